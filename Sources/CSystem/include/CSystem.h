/*
 * CSystem: the operating-system calls Swift cannot make cleanly by itself:
 * sockets, epoll and eventfd for the event loop (sockets.c), opening beneath a
 * root (files.c), and a thread's name and priority (threads.c). Results are
 * errno-style (negative errno on failure), and no sockaddr layout reaches Swift.
 */
#ifndef CSYSTEM_H
#define CSYSTEM_H

#include <spawn.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Readiness bits, as in epoll. */
enum {
  TS_READABLE = 0x001,
  TS_WRITABLE = 0x004,
  TS_ERROR = 0x008,
  TS_HANGUP = 0x010,
  TS_READ_HANGUP = 0x2000,
  /** With a listener several pollers watch: a new connection wakes one of them. */
  TS_EXCLUSIVE = 0x10000000
};

/** One ready descriptor from ts_poll_wait. */
typedef struct ts_event {
  uint32_t events;
  uint64_t token;
} ts_event;

/**
 * Listens on a Unix socket at `path` with permissions `mode`, non-blocking.
 * An existing socket file is replaced only if nothing answers on it
 * (returns -EADDRINUSE when a live server owns it); any other existing file
 * is left alone (-EEXIST). Returns the descriptor or a negative errno.
 */
int ts_listen_unix(const char *path, uint32_t mode, int backlog);

/** Listens on an IPv4 address and port (0 picks one), non-blocking. */
int ts_listen_tcp(const char *address, uint16_t port, int backlog);

/** The port a TCP listener is bound to, or a negative errno. */
int ts_local_port(int fd);

/** Accepts one connection, non-blocking and close-on-exec; -EAGAIN if none. */
int ts_accept(int listener);

/** Connects (blocking, close-on-exec) to a Unix socket; fd or negative errno. */
int ts_connect_unix(const char *path);

/** Connects (blocking, close-on-exec, no Nagle) to an IPv4 or IPv6 address and port. */
int ts_connect_tcp(const char *address, uint16_t port);

/**
 * Prepares an inherited descriptor (systemd socket activation) for the
 * event loop: checks it is a listening socket, makes it non-blocking and
 * close-on-exec. Returns 0 or a negative errno (-ENOTSOCK if not listening).
 */
int ts_adopt_listener(int fd);

/**
 * Sends `first` then `second` (either may be empty) in one sendmsg, without SIGPIPE: a
 * response's head and its body, which stays where it is (no copy into one buffer). Returns
 * the bytes written or -1 with errno set (EINTR retried).
 */
ssize_t ts_send_two(int fd, const void *first, size_t first_length, const void *second,
                    size_t second_length);

/** A new epoll instance, or a negative errno. */
int ts_poll_create(void);

/** Adds (or, with `modify`, changes) interest in `fd` for `events`, edge-free. */
int ts_poll_watch(int poller, int fd, uint32_t events, uint64_t token, int modify);

/** Stops watching `fd`. */
int ts_poll_forget(int poller, int fd);

/** Waits up to `timeout_ms` (-1 forever) for events; returns how many. */
int ts_poll_wait(int poller, ts_event *events, int capacity, int timeout_ms);

/** A pipe-like eventfd to wake a poller from another thread. */
int ts_wakeup_create(void);
int ts_wakeup_signal(int fd);
int ts_wakeup_drain(int fd);

/**
 * Opens `relative` (no leading slash) below the root directory `directory` (from
 * ts_open_root; it stays open), whose real path is `root_path`, so that the file opened is
 * inside the root whatever the links on the way say or become:
 *  - openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS first (relative links that stay
 *    inside are followed);
 *  - when that refuses an absolute link or a `..` that climbs out and back (EXDEV), the path
 *    is resolved again with O_PATH (nothing is opened for reading yet), the real path of what
 *    it reached is read from /proc/self/fd and must lie below `root_path`, and only then is
 *    that same inode reopened with `flags`;
 *  - where the kernel or a seccomp filter lacks openat2, or when `walk` is non-zero, a walk
 *    component by component with O_NOFOLLOW (every symlink refused).
 * Returns the descriptor (opened with `flags` | O_CLOEXEC) or a negative errno: -EXDEV or
 * -ELOOP for an escape or a refused symlink, -ENODEV for something other than a regular
 * file reached by the second way (never opened), -ENOENT, ...
 */
int ts_open_beneath_at(int directory, const char *root_path, const char *relative, int flags,
                       int walk);

/** 1 when the open file lies on a pseudo file system whose files are not data (proc, sysfs,
 * debugfs, tracefs, securityfs, configfs, cgroup): their sizes lie and reads can block or
 * run forever; 0 otherwise, or when fstatfs fails. */
int ts_is_pseudo_file(int fd);

/** A root directory opened once (O_PATH | O_DIRECTORY | O_CLOEXEC), or a negative errno. */
int ts_open_root(const char *root);

/**
 * Names the calling thread for top -H, ps -L and perf (cut to the 15 characters
 * Linux keeps). Foundation on Linux does not pass Thread.name to the kernel.
 */
void ts_name_thread(const char *name);

/**
 * Moves the calling thread to the lowest CPU priority (nice 19), for threads
 * that do speculative (prefetch) work. Needs no privilege; affects only the
 * calling thread, and cannot be undone without privilege. Returns 0 or a
 * negative errno.
 */
int ts_thread_background(void);

/* glibc's allocator: at most `arenas` arenas (0 leaves the default of 8 per core) and a fixed
 * mmap threshold in bytes (0 leaves glibc's sliding one), unless MALLOC_ARENA_MAX or
 * MALLOC_MMAP_THRESHOLD_ is set in the environment. */
void ts_malloc_tune(int arenas, long mmap_threshold);

/* Gives free heap memory of every arena back to the kernel (malloc_trim); 1 if any was. */
int ts_malloc_trim(void);

/**
 * Installs a handler for each of `numbers` (count of them) that writes the
 * signal's number as one byte to a pipe, and returns the pipe's read end
 * (blocking), or a negative errno. A handler is in place on every thread when
 * this returns, so no later signal is lost; the caller reads the bytes on a
 * thread of its own. Calling it again adds signals to the same pipe.
 */
int ts_signals_install(const int *numbers, int count);

/* Spawning. */

/* Closes every descriptor from `lowest` up in the child (glibc's addclosefrom_np, 2.34 and
 * later); 0, or ENOSYS where the libc lacks it. */
int ts_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

#ifdef __cplusplus
}
#endif

#endif
