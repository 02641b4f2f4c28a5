/*
 * socketload: a minimal closed-loop HTTP/1.1 load client for Unix sockets and TCP, so thumbd
 * and nginx can be compared on a Unix socket with the same client (wrk speaks TCP only).
 *
 *   socketload unix:/path/to.sock|tcp:127.0.0.1:PORT TARGET CONNECTIONS SECONDS
 *
 * Each thread owns one keep-alive connection and sends the next GET when the previous
 * response (Content-Length framed) is complete. Prints requests per second and the count of
 * non-200 answers.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *endpoint;
static char request[4096];
static size_t request_length;
static atomic_long completed;
static atomic_long failures;
static atomic_int running = 1;

static int open_connection(void) {
  if (strncmp(endpoint, "unix:", 5) == 0) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof(address.sun_path), "%s", endpoint + 5);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) return -1;
    return fd;
  }
  char host[64];
  const char *colon = strrchr(endpoint + 4, ':');
  if (!colon) return -1;
  snprintf(host, sizeof(host), "%.*s", (int)(colon - endpoint - 4), endpoint + 4);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
  inet_pton(AF_INET, host, &address.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) return -1;
  return fd;
}

/* Reads one response; returns its status or -1. */
static int read_response(int fd, char *buffer, size_t capacity, size_t *carried) {
  size_t have = *carried;
  for (;;) {
    char *end = memmem(buffer, have, "\r\n\r\n", 4);
    if (end) {
      size_t head = (size_t)(end - buffer) + 4;
      long length = 0;
      char *field = memmem(buffer, head, "Content-Length:", 15);
      if (!field) field = memmem(buffer, head, "content-length:", 15);
      if (field) length = strtol(field + 15, NULL, 10);
      int status = atoi(buffer + 9);
      size_t total = head + (size_t)length;
      if (total > capacity) return -1; /* thumbnails are far below the 1 MiB buffer */
      while (have < total) {
        ssize_t n = read(fd, buffer + have, total - have);
        if (n <= 0) return -1;
        have += (size_t)n;
      }
      memmove(buffer, buffer + total, have - total);
      *carried = have - total;
      return status;
    }
    if (have == capacity) return -1;
    ssize_t n = read(fd, buffer + have, capacity - have);
    if (n <= 0) return -1;
    have += (size_t)n;
  }
}

static void *worker(void *unused) {
  (void)unused;
  char *buffer = malloc(1 << 20);
  int fd = open_connection();
  size_t carried = 0;
  while (fd >= 0 && atomic_load(&running)) {
    if (write(fd, request, request_length) != (ssize_t)request_length) break;
    int status = read_response(fd, buffer, 1 << 20, &carried);
    if (status < 0) break;
    if (status != 200) atomic_fetch_add(&failures, 1);
    atomic_fetch_add(&completed, 1);
  }
  if (fd >= 0) close(fd);
  free(buffer);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: socketload unix:PATH|tcp:HOST:PORT TARGET CONNECTIONS SECONDS\n");
    return 2;
  }
  endpoint = argv[1];
  request_length = (size_t)snprintf(
      request, sizeof(request), "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n", argv[2]);
  int connections = atoi(argv[3]);
  double seconds = atof(argv[4]);
  pthread_t *threads = calloc((size_t)connections, sizeof(pthread_t));
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int i = 0; i < connections; i++) pthread_create(&threads[i], NULL, worker, NULL);
  struct timespec pause = {.tv_sec = (time_t)seconds,
                           .tv_nsec = (long)((seconds - (time_t)seconds) * 1e9)};
  nanosleep(&pause, NULL);
  long done = atomic_load(&completed);
  clock_gettime(CLOCK_MONOTONIC, &now);
  atomic_store(&running, 0);
  for (int i = 0; i < connections; i++) pthread_join(threads[i], NULL);
  double elapsed = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
  printf("%.0f requests/s, %ld non-200\n", (double)done / elapsed, atomic_load(&failures));
  free(threads);
  return 0;
}
