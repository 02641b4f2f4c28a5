/*
 * thumbd-hostile-server --serve LABEL: CSystem's job server with jobs that attack it, for
 * FrameServerTests (a test program, never installed). What a job does is named by its input's
 * extension (the request's name, "input.EXT"); each attack writes one line to stdout, "held
 * NAME" when it failed and "ESCAPED NAME" when it got through:
 *   benign    writes "ok" after 50 ms
 *   attacks   reads the server's memory and descriptors, traces it, looks for the control
 *             socket among its own descriptors and answers on it, writes to /tmp and the
 *             output folder, and checks that it is not dumpable itself
 *   straggle  writes "ok" and leaves a process that, for 10 s, kills every later job's
 *             process it finds
 *   killsrv   kills the server
 *   sleep     sleeps forever
 */
#define _GNU_SOURCE
#include <CSystem.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void report(const char *attack, int escaped) {
  printf("%s %s\n", escaped ? "ESCAPED" : "held", attack);
  fflush(stdout);
}

static int opens(const char *path, int flags) {
  int fd = open(path, flags, 0600);
  if (fd < 0) return 0;
  close(fd);
  return 1;
}

static void attacks(void) {
  pid_t server = getppid();
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", (int)server);
  report("server-memory", opens(path, O_RDONLY));
  snprintf(path, sizeof path, "/proc/%d/fd/0", (int)server);
  report("server-descriptor", opens(path, O_RDWR));
  snprintf(path, sizeof path, "/proc/%d/environ", (int)server);
  report("server-environment", opens(path, O_RDONLY));
  report("server-trace", ptrace(PTRACE_ATTACH, server, NULL, NULL) == 0);
  report("dumpable", prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0);
  int found = 0;
  for (int fd = 0; fd < 1024; fd++) {
    int type = 0;
    socklen_t length = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == SOCK_SEQPACKET) {
      tf_reply forged = {TF_REPLY_MAGIC, 0};
      send(fd, &forged, sizeof forged, MSG_NOSIGNAL);
      found = 1;
    }
  }
  report("control-socket", found);
  report("write-tmp", opens("/tmp/planted", O_WRONLY | O_CREAT | O_TRUNC));
  report("write-output-folder", opens("/thumbd/out/planted", O_WRONLY | O_CREAT | O_TRUNC));
}

/* The parent of process `pid` in the sandbox, or -1. */
static long parent_of(long pid) {
  char path[64], stat[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *file = fopen(path, "re");
  if (!file) return -1;
  size_t length = fread(stat, 1, sizeof stat - 1, file);
  fclose(file);
  stat[length] = '\0';
  char *close_paren = strrchr(stat, ')');
  long parent = -1;
  if (close_paren) sscanf(close_paren + 1, " %*c %ld", &parent);
  return parent;
}

static void straggle(void) {
  pid_t server = getppid();
  pid_t child = fork();
  if (child != 0) {
    puts("ok");
    fflush(stdout);
    return;
  }
  setsid();
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  /* For 10 s, every later job's process (the server's other children) is killed. */
  for (int round = 0; round < 10000; round++) {
    DIR *listing = opendir("/proc");
    struct dirent *entry;
    while (listing && (entry = readdir(listing)) != NULL) {
      long pid = strtol(entry->d_name, NULL, 10);
      if (pid <= 1 || pid == getpid() || pid == server) continue;
      if (parent_of(pid) == server) kill((pid_t)pid, SIGKILL);
    }
    if (listing) closedir(listing);
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  _exit(0);
}

static int run(const tf_request *request) {
  const char *dot = strrchr(request->name, '.');
  const char *what = dot ? dot + 1 : "";
  if (strcmp(what, "benign") == 0) {
    /* Long enough for anything left from an earlier job to find this one. */
    struct timespec pause = {0, 50000000};
    nanosleep(&pause, NULL);
    puts("ok");
  } else if (strcmp(what, "attacks") == 0) {
    attacks();
  } else if (strcmp(what, "straggle") == 0) {
    straggle();
  } else if (strcmp(what, "killsrv") == 0) {
    kill(getppid(), SIGKILL);
    sleep(5);
  } else if (strcmp(what, "sleep") == 0) {
    for (;;) pause();
  } else {
    return 64;
  }
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--serve") == 0) return ts_serve_jobs(0, run);
  fputs("usage: thumbd-hostile-server --serve LABEL\n", stderr);
  return 64;
}
