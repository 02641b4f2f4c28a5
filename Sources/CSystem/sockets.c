/*
 * Thin wrappers over socket(2), epoll(7) and eventfd(2). The daemon's event
 * loop owns the policy; this file only hides the C structures.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(void) { return -errno; }

static int fill_unix_address(struct sockaddr_un *address, const char *path) {
  memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(address->sun_path)) return -ENAMETOOLONG;
  strcpy(address->sun_path, path);
  return 0;
}

/* True when something accepts connections on the socket at `path`. */
static int socket_is_live(const struct sockaddr_un *address) {
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return 1; /* cannot tell: be safe, keep the file */
  int live = connect(probe, (const struct sockaddr *)address, sizeof(*address)) == 0 ||
             errno == EAGAIN;
  close(probe);
  return live;
}

int ts_listen_unix(const char *path, uint32_t mode, int backlog) {
  struct sockaddr_un address;
  int status = fill_unix_address(&address, path);
  if (status < 0) return status;
  struct stat info;
  if (lstat(path, &info) == 0) {
    if (!S_ISSOCK(info.st_mode)) return -EEXIST;
    if (socket_is_live(&address)) return -EADDRINUSE;
    if (unlink(path) != 0) return fail();
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail();
  /* Linux creates the socket file with the socket inode's mode, less the umask:
   * set that mode first, so the file is never briefly wider than asked, then set
   * it exactly. Not umask(): it is process-wide, and changing it around bind
   * made files that other threads created meanwhile (a test's nginx root, a
   * library user's) unreadable. */
  status = fchmod(fd, (mode_t)mode);
  if (status == 0) status = bind(fd, (struct sockaddr *)&address, sizeof(address));
  if (status != 0 || chmod(path, (mode_t)mode) != 0 || listen(fd, backlog) != 0) {
    int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

/* An IPv4 or IPv6 literal and a port as a socket address; 0, or -EINVAL for neither. */
static int tcp_address(const char *address, uint16_t port, struct sockaddr_storage *out,
                       socklen_t *length) {
  memset(out, 0, sizeof(*out));
  struct sockaddr_in *in = (struct sockaddr_in *)out;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
  if (inet_pton(AF_INET, address, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    *length = sizeof(*in);
    return 0;
  }
  if (inet_pton(AF_INET6, address, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    *length = sizeof(*in6);
    return 0;
  }
  return -EINVAL;
}

int ts_listen_tcp(const char *address, uint16_t port, int backlog) {
  struct sockaddr_storage at;
  socklen_t length;
  if (tcp_address(address, port, &at, &length) != 0) return -EINVAL;
  int fd = socket(at.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail();
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  /* An IPv6 address means that address alone, not IPv4 as well. */
  if (at.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &yes, sizeof(yes));
  if (bind(fd, (struct sockaddr *)&at, length) != 0 || listen(fd, backlog) != 0) {
    int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

int ts_local_port(int fd) {
  struct sockaddr_storage at;
  socklen_t length = sizeof(at);
  if (getsockname(fd, (struct sockaddr *)&at, &length) != 0) return fail();
  if (at.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&at)->sin6_port);
  return ntohs(((struct sockaddr_in *)&at)->sin_port);
}

int ts_accept(int listener) {
  int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return fail();
  /* Responses leave in one send; Nagle would only hold back the tail of a
   * pipelined batch. Fails harmlessly on Unix sockets. */
  int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  return fd;
}

int ts_connect_unix(const char *path) {
  struct sockaddr_un address;
  int status = fill_unix_address(&address, path);
  if (status < 0) return status;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail();
  if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
    int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

int ts_connect_tcp(const char *address, uint16_t port) {
  struct sockaddr_storage at;
  socklen_t length;
  if (tcp_address(address, port, &at, &length) != 0) return -EINVAL;
  int fd = socket(at.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail();
  int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  if (connect(fd, (struct sockaddr *)&at, length) != 0) {
    int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

int ts_adopt_listener(int fd) {
  int listening = 0;
  socklen_t length = sizeof(listening);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0) return fail();
  if (!listening) return -ENOTSOCK;
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return fail();
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return fail();
  return 0;
}

int ts_poll_create(void) {
  int fd = epoll_create1(EPOLL_CLOEXEC);
  return fd >= 0 ? fd : fail();
}

ssize_t ts_send_two(int fd, const void *first, size_t first_length, const void *second,
                    size_t second_length) {
  struct iovec parts[2] = {{(void *)first, first_length}, {(void *)second, second_length}};
  struct msghdr message;
  memset(&message, 0, sizeof(message));
  message.msg_iov = first_length ? parts : parts + 1;
  message.msg_iovlen = first_length && second_length ? 2 : 1;
  ssize_t n;
  do {
    n = sendmsg(fd, &message, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

int ts_poll_watch(int poller, int fd, uint32_t events, uint64_t token, int modify) {
  struct epoll_event event;
  memset(&event, 0, sizeof(event));
  event.events = events;
  event.data.u64 = token;
  return epoll_ctl(poller, modify ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event) == 0 ? 0 : fail();
}

int ts_poll_forget(int poller, int fd) {
  return epoll_ctl(poller, EPOLL_CTL_DEL, fd, NULL) == 0 ? 0 : fail();
}

int ts_poll_wait(int poller, ts_event *events, int capacity, int timeout_ms) {
  struct epoll_event raw[256];
  if (capacity > 256) capacity = 256;
  int n;
  do {
    n = epoll_wait(poller, raw, capacity, timeout_ms);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return fail();
  for (int i = 0; i < n; i++) {
    events[i].events = raw[i].events;
    events[i].token = raw[i].data.u64;
  }
  return n;
}

int ts_wakeup_create(void) {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return fd >= 0 ? fd : fail();
}

int ts_wakeup_signal(int fd) {
  uint64_t one = 1;
  return write(fd, &one, sizeof(one)) == sizeof(one) || errno == EAGAIN ? 0 : fail();
}

int ts_wakeup_drain(int fd) {
  uint64_t value;
  return read(fd, &value, sizeof(value)) == sizeof(value) || errno == EAGAIN ? 0 : fail();
}

