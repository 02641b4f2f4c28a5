/*
 * CNetShim: the socket and epoll calls the daemon's event loop needs, with
 * errno-style results (negative errno on failure) that Swift can read
 * without touching sockaddr layouts.
 */
#ifndef CNETSHIM_H
#define CNETSHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Readiness bits, as in epoll. */
enum {
  NS_READABLE = 0x001,
  NS_WRITABLE = 0x004,
  NS_ERROR = 0x008,
  NS_HANGUP = 0x010,
  NS_READ_HANGUP = 0x2000
};

/** One ready descriptor from ns_poll_wait. */
typedef struct ns_event {
  uint32_t events;
  uint64_t token;
} ns_event;

/**
 * Listens on a Unix socket at `path` with permissions `mode`, non-blocking.
 * An existing socket file is replaced only if nothing answers on it
 * (returns -EADDRINUSE when a live server owns it); any other existing file
 * is left alone (-EEXIST). Returns the descriptor or a negative errno.
 */
int ns_listen_unix(const char *path, uint32_t mode, int backlog);

/** Listens on an IPv4 address and port (0 picks one), non-blocking. */
int ns_listen_tcp(const char *address, uint16_t port, int backlog);

/** The port a TCP listener is bound to, or a negative errno. */
int ns_local_port(int fd);

/** Accepts one connection, non-blocking and close-on-exec; -EAGAIN if none. */
int ns_accept(int listener);

/** Connects (blocking, close-on-exec) to a Unix socket; fd or negative errno. */
int ns_connect_unix(const char *path);

/** Connects (blocking, close-on-exec, no Nagle) to an IPv4 address and port. */
int ns_connect_tcp(const char *address, uint16_t port);

/**
 * Prepares an inherited descriptor (systemd socket activation) for the
 * event loop: checks it is a listening socket, makes it non-blocking and
 * close-on-exec. Returns 0 or a negative errno (-ENOTSOCK if not listening).
 */
int ns_adopt_listener(int fd);

/** A new epoll instance, or a negative errno. */
int ns_poll_create(void);

/** Adds (or, with `modify`, changes) interest in `fd` for `events`, edge-free. */
int ns_poll_watch(int poller, int fd, uint32_t events, uint64_t token, int modify);

/** Stops watching `fd`. */
int ns_poll_forget(int poller, int fd);

/** Waits up to `timeout_ms` (-1 forever) for events; returns how many. */
int ns_poll_wait(int poller, ns_event *events, int capacity, int timeout_ms);

/** A pipe-like eventfd to wake a poller from another thread. */
int ns_wakeup_create(void);
int ns_wakeup_signal(int fd);
int ns_wakeup_drain(int fd);

/**
 * Opens `relative` (no leading slash) below the directory `root` so that resolution cannot
 * leave it: openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (symlinks that stay inside
 * are followed), or, where the kernel or a seccomp filter lacks openat2, or when `walk` is
 * non-zero, a walk component by component with O_NOFOLLOW (every symlink refused). `..`
 * never resolves. Returns the descriptor (opened with `flags` | O_CLOEXEC) or a negative
 * errno: -EXDEV or -ELOOP for an escape or a symlink, -ENOENT, ...
 */
int ns_open_beneath(const char *root, const char *relative, int flags, int walk);

/**
 * Names the calling thread for top -H, ps -L and perf (cut to the 15 characters
 * Linux keeps). Foundation on Linux does not pass Thread.name to the kernel.
 */
void ns_name_thread(const char *name);

#ifdef __cplusplus
}
#endif

#endif
