/*
 * CSystem: the operating-system calls Swift cannot make cleanly by itself:
 * sockets, epoll and eventfd for the event loop (sockets.c), opening beneath a
 * root (files.c), a thread's name and priority (threads.c), and sandboxed children
 * (sandbox.c). Results are
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

/* 1 when the calling thread is the process's main thread, else 0. */
int ts_thread_is_main(void);

/* glibc's allocator: at most `arenas` arenas (0 leaves the default of 8 per core) and a fixed
 * mmap threshold in bytes (0 leaves glibc's sliding one), unless MALLOC_ARENA_MAX or
 * MALLOC_MMAP_THRESHOLD_ is set in the environment. */
void ts_malloc_tune(int arenas, long mmap_threshold);

/* Gives free heap memory of every arena back to the kernel (malloc_trim); 1 if any was. */
int ts_malloc_trim(void);

/* The calling process's resident memory in bytes (the second field of /proc/self/statm times
 * the page size), or -1 when it cannot be read. */
long long ts_resident_bytes(void);

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

/* Sandboxed children (sandbox.c). */

/** Limits a child runs under, set before its program starts; 0 leaves one as inherited. */
typedef struct ts_child_limits {
  uint64_t cpu_seconds;
  uint64_t address_space;
  uint64_t file_size;
  uint64_t processes;
  uint64_t open_files;
} ts_child_limits;

/**
 * The seccomp program bubblewrap's `--seccomp` reads, in a new memfd at offset 0
 * (close-on-exec: the spawn passes it on as descriptor 3), or a negative errno.
 */
int ts_sandbox_filter(void);

/** How many descriptors ts_spawn_limited passes on. */
#define TS_SPAWN_MAX_PASSED 8

/**
 * Starts `path` with `argv` and `envp` in a session (and process group) of its own: signals
 * at their defaults and unblocked, as user and group `run_as` when it is not negative (no
 * supplementary groups), under `limits` and with no core files, killed when the caller
 * dies, stdin from `stdin_fd` (when not negative; else /dev/null), stdout to `stdout_fd`
 * (when not negative; else with stderr), stderr to `output_fd` (or /dev/null when negative),
 * the `pass_count` descriptors of `pass_fds` as descriptors 3, 4, ..., every other
 * descriptor closed. Returns the child's pid, or a negative errno; a child that cannot set
 * itself up exits 126, one whose exec fails 127.
 */
pid_t ts_spawn_limited(const char *path, char *const argv[], char *const envp[],
                       const ts_child_limits *limits, const int *pass_fds, int pass_count,
                       int stdin_fd, int stdout_fd, int output_fd, int64_t run_as);

/** A descriptor that becomes readable when the child `pid` ends (pidfd), or a negative errno. */
int ts_child_handle(pid_t pid);

/**
 * Waits up to `timeout_ms` for the child's handle, or for `wake_fd` (when not negative) to
 * be readable: 1 the child ended, 2 woken, 0 the time passed, or a negative errno.
 */
int ts_child_wait(int handle, int wake_fd, int timeout_ms);

/** Collects an ended child's status; 0, or a negative errno. */
int ts_child_reap(pid_t pid, int *status);

/** SIGKILL to every process in the process group `group`; 0, or a negative errno. */
int ts_child_kill_group(pid_t group);

/** Ends a sandbox's whole tree: stops `leader` (so it makes no process meanwhile), SIGKILLs
 * the group of each of its children (bubblewrap's inner process is in a session of its own,
 * from --new-session, and is the sandbox's process 1: its death ends every process in the
 * sandbox), then the leader's group. 0, or a negative errno. */
int ts_child_kill_tree(pid_t leader);

/** A wait status's exit code, or -1 when the child did not exit. */
int ts_status_exit_code(int status);

/** The signal that ended a child, or 0 when none did. */
int ts_status_signal(int status);

/** A folder watcher (inotify, non-blocking, close-on-exec), or a negative errno. */
int ts_watch_create(void);

/**
 * Watches the folder `path` for entries made, removed, renamed, written or changed; a watch
 * id, or a negative errno (a missing folder is ENOENT).
 */
int ts_watch_folder(int watcher, const char *path);

/**
 * Waits up to `timeout_ms` for a change in a watched folder (its events drained: 1), for
 * `wake_fd` (when not negative) to be readable (2), or the time to pass (0); or a negative
 * errno.
 */
int ts_watch_wait(int watcher, int wake_fd, int timeout_ms);

/** A new anonymous file in memory (memfd, close-on-exec), or a negative errno. */
int ts_memory_file(void);

/** A folder opened as a path only (O_PATH, not through a last link), or a negative errno. */
int ts_open_folder(const char *path);

/**
 * Removes the folder `path` and what it holds, never following a link, at most `max_depth`
 * folders deep and `max_entries` entries in all (a child may have filled it); 0 when it is
 * gone (or was never there), or a negative errno.
 */
int ts_remove_tree(const char *path, int max_depth, int max_entries);

/* ---- optional libraries (binder.c) --------------------------------------------------- */

/**
 * One function (or variable) an optional library must export: its name, and the field its
 * address is written to.
 */
typedef struct cs_symbol {
  const char *name;
  void **address;
} cs_symbol;

/** A row of a cs_symbol table: `field` of `table`, found as `name`. */
#define CS_SYMBOL(table, field, name) {name, (void **)&(table).field},

/**
 * A table of a library's functions, each named once: list them in an X macro
 * (`#define AVUTIL(X) X(av_frame_alloc) X(av_frame_free)`), declare the table's fields with
 * `AVUTIL(CS_FUNCTION)` (each typed by the library's own declaration, whose header is
 * included) and bind them with a row macro of the file's (`CS_SYMBOL(av, name, #name)`).
 */
#define CS_FUNCTION(name) __typeof__(name) *name;

/**
 * The one way thumbd opens a library it does not link (libheif, libcurl, libsystemd,
 * FFmpeg's, libjxl): dlopen(`soname`, RTLD_NOW | RTLD_LOCAL), then every symbol of the table
 * resolved, or none used. 0 on success, with the handle in *handle (never closed: the
 * functions stay in use); -1 otherwise, with `error` naming what is missing and the Debian
 * package that provides it ("cannot load libjxl.so.0.7 (install libjxl0.7): ...", "libcurl.so.4
 * lacks curl_multi_poll (install libcurl4: a newer one)"). Call it once (pthread_once).
 */
int cs_bind(const char *soname, const char *package, const cs_symbol *symbols, size_t count,
            void **handle, char *error, size_t error_size);

/** `cs_bind` over a whole table (an array of `cs_symbol`), its message into the array `error`. */
#define CS_BIND(soname, package, table, handle, error)                                      \
  cs_bind(soname, package, table, sizeof(table) / sizeof((table)[0]), handle, error,        \
          sizeof(error))

/** The soname of a library from its major version (a number, or a macro that is one):
 * CS_SONAME("avcodec", 59) is "libavcodec.so.59". */
#define CS_SONAME(library, major) "lib" library ".so." CS_TEXT(major)
/** Debian's package of that library ("libavcodec59"), for the message when it is missing. */
#define CS_PACKAGE(library, major) "lib" library CS_TEXT(major)
#define CS_TEXT(x) #x
/** CS_BIND of Debian's library `library` of major version `major`: its soname and package,
 * spelled once (CS_BIND_MAJOR("avcodec", LIBAVCODEC_VERSION_MAJOR, table, NULL, error)). */
#define CS_BIND_MAJOR(library, major, table, handle, error)                                  \
  CS_BIND(CS_SONAME(library, major), CS_PACKAGE(library, major), table, handle, error)

/** The file of the loaded object that defines `symbol` (the program itself, or a shared
 * library), or NULL when nothing loaded defines it. */
const char *cs_library_of(const char *symbol);

#ifdef __cplusplus
}
#endif

/* ---- the video worker's output (thumbd-frame, read by Sandbox/VideoFrames.swift) ------- */

/* stdout: TF_HEADER_SIZE bytes (TF_MAGIC, then little-endian u32s: the BMP's width and height,
 * the frame's time and the video's duration in milliseconds or TF_UNKNOWN, TF_FLAG_* flags,
 * the displayed frame's width and height), then a top-down 24-bit BMP of that size. */
#define TF_MAGIC "TDFRAME1"
#define TF_HEADER_SIZE 36
#define TF_UNKNOWN 0xFFFFFFFFu

/* Every frame tried was almost black: this is the first of them. */
#define TF_FLAG_DARK 1u
/* The BMP is 32-bit with an alpha mask (a drawing's transparency), not 24-bit. */
#define TF_FLAG_ALPHA 2u

/* What a job's input is: a video, a PDF (its first page) or an SVG. */
#define TF_KIND_VIDEO 0u
#define TF_KIND_PDF 1u
#define TF_KIND_SVG 2u

/* The worker's exit codes. */
enum {
  TF_EXIT_OK = 0,
  TF_EXIT_USAGE = 64,
  TF_EXIT_UNSUPPORTED = 65,  /* not a video it reads, no video stream, no decoder; a locked PDF */
  TF_EXIT_CORRUPT = 66,      /* a video whose frames do not decode */
  TF_EXIT_TOO_LARGE = 67,    /* frames over the pixel limit */
  TF_EXIT_UNAVAILABLE = 69,  /* FFmpeg's (or poppler's, librsvg's) libraries are not installed */
  TF_EXIT_OUTPUT = 74,       /* stdout could not take the frame */
};

/* ---- the video worker as a server (thumbd-frame --serve LABEL, Sandbox/FrameServers.swift) -- */

/* Its stdin is a SOCK_SEQPACKET socket. Each job is one tf_request with exactly three
 * descriptors (SCM_RIGHTS): the input, the frame's output, the job's messages. The server
 * forks a process for the job, which reads and writes them as the one-file worker reads stdin
 * and writes stdout and stderr, and answers with one tf_reply once that process and every
 * other process in the sandbox are gone. Anything else on the socket ends the server. */
#define TF_REQUEST_MAGIC 0x31514A54u /* "TJQ1" */
#define TF_REPLY_MAGIC 0x31524A54u   /* "TJR1" */
#define TF_NAME_SIZE 32
#define TF_REQUEST_FDS 3

/** One job: the box (0 leaves a side free), the input's kind, the pixel limit and the input's
 * name (its extension hints at a video's container), NUL-terminated. */
typedef struct tf_request {
  uint32_t magic;
  uint32_t width;
  uint32_t height;
  uint32_t kind; /* TF_KIND_* */
  uint64_t max_pixels;
  char name[TF_NAME_SIZE];
} tf_request;

/** A job's end: the job process's wait status (exit code or signal). */
typedef struct tf_reply {
  uint32_t magic;
  int32_t status;
} tf_reply;

/** A job's work, in the process forked for it, with its descriptors as stdin, stdout and
 * stderr: an exit code. */
typedef int (*ts_job_runner)(const tf_request *request);

/**
 * Serves jobs on `control` until it closes (serve.c): the calling process becomes
 * undumpable, forks `run` for each job, and answers once every other process in its PID
 * namespace is gone. Returns an exit code: TF_EXIT_OK when the socket closed, another when
 * something that is not a job came or a job's processes would not end.
 */
int ts_serve_jobs(int control, ts_job_runner run);

/** A connected pair of close-on-exec SOCK_SEQPACKET sockets in `pair`; 0, or a negative
 * errno. */
int ts_job_socket(int pair[2]);

/** Sends `length` bytes of `bytes` as one message with the `count` descriptors of `fds`
 * (SCM_RIGHTS), without SIGPIPE; 0, or a negative errno. */
int ts_job_send(int socket, const void *bytes, size_t length, const int *fds, int count);

/** Takes one message of exactly `length` bytes into `buffer` (waiting for it when `wait`,
 * else -EAGAIN when none waits), keeping up to `max_fds` of the descriptors sent with it in
 * `fds` and closing the rest; `*carried` (when not NULL) says how many came. Returns
 * `length`, 0 at the end of the stream, or a negative errno: -EPROTO for a message of
 * another length, whose descriptors are all closed. */
long ts_job_receive(int socket, void *buffer, size_t length, int wait, int *fds, int max_fds,
                    int *carried);

/** Waits up to `timeout_ms` for `socket` to be readable, the child's `handle` to end or
 * `wake_fd` (when not negative): 1 readable, 2 woken, 3 the child ended, 0 the time passed,
 * or a negative errno. */
int ts_job_wait(int socket, int handle, int wake_fd, int timeout_ms);


#endif
