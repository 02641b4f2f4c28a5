/*
 * What a sandboxed child needs from the OS that Swift cannot give cleanly: a
 * process started in a session of its own under resource limits, waited for
 * with a deadline and a cancellation, killed as a group; and the seccomp
 * program bubblewrap installs before the child's program runs.
 *
 * Rules kept here:
 * - between fork and exec only async-signal-safe calls run (the daemon has
 *   many threads, and any of them may hold a lock at the fork);
 * - the child inherits nothing it is not given: signals back to their
 *   defaults and unblocked, descriptors from 3 up closed except the one passed
 *   on as descriptor 3, stdin from /dev/null;
 * - limits are in place before exec, so no instruction of the child's program
 *   runs without them;
 * - the filter refuses what gnome-desktop's refuses and more (see below), and
 *   kills a process that calls in through another architecture's table.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#define TS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the sandbox filter knows x86_64 and aarch64"
#endif

/* ---- the filter ---- */

/* Namespaces a child may not make: any of them could undo the sandbox's view. */
#define TS_NAMESPACE_FLAGS                                                                  \
  (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | \
   CLONE_NEWCGROUP)

/* Calls refused with EPERM: the kernel's log, keyrings, NUMA and page moving, mounts and
 * namespaces, tracing and profiling, BPF, io_uring (its operations pass no filter),
 * modules, clocks, and reaching into other processes. A thumbnailer needs none. */
static const int refused_calls[] = {
    SYS_syslog, SYS_acct, SYS_quotactl, SYS_add_key, SYS_keyctl, SYS_request_key,
    SYS_move_pages, SYS_mbind, SYS_get_mempolicy, SYS_set_mempolicy, SYS_migrate_pages,
    SYS_unshare, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_setns, SYS_ptrace,
    SYS_perf_event_open, SYS_bpf, SYS_userfaultfd, SYS_kexec_load, SYS_init_module,
    SYS_finit_module, SYS_delete_module, SYS_open_by_handle_at, SYS_name_to_handle_at,
    SYS_settimeofday, SYS_clock_settime, SYS_adjtimex, SYS_clock_adjtime, SYS_process_vm_readv,
    SYS_process_vm_writev, SYS_kcmp, SYS_vhangup, SYS_swapon, SYS_swapoff, SYS_reboot,
    SYS_personality,
#ifdef SYS_uselib
    SYS_uselib,
#endif
#ifdef SYS_modify_ldt
    SYS_modify_ldt,
#endif
#ifdef SYS_iopl
    SYS_iopl,
#endif
#ifdef SYS_ioperm
    SYS_ioperm,
#endif
#ifdef SYS_kexec_file_load
    SYS_kexec_file_load,
#endif
#ifdef SYS_io_uring_setup
    SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
#endif
#ifdef SYS_open_tree
    SYS_open_tree, SYS_move_mount, SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick,
#endif
#ifdef SYS_mount_setattr
    SYS_mount_setattr,
#endif
#ifdef SYS_pidfd_getfd
    SYS_pidfd_getfd,
#endif
};

#define REFUSED_COUNT (sizeof(refused_calls) / sizeof(refused_calls[0]))

/* Room for the program: the fixed part and two instructions per refused call. */
#define FILTER_CAPACITY (40 + 2 * REFUSED_COUNT)

#define ARG_LOW(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))

typedef struct {
  struct sock_filter code[FILTER_CAPACITY];
  unsigned count;
} program;

static void emit(program *p, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k) {
  if (p->count < FILTER_CAPACITY) p->code[p->count] = (struct sock_filter){code, jt, jf, k};
  p->count++;
}

/* `if (nr == call) return result;` */
static void refuse_call(program *p, int call, uint32_t result) {
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (uint32_t)call);
  emit(p, BPF_RET | BPF_K, 0, 0, result);
}

/* The program: the architecture checked, the refused calls, then the three calls judged by
 * an argument (clone's flags, ioctl's request, socket's family), the rest allowed. */
static int build(program *p) {
  p->count = 0;
  emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, TS_AUDIT_ARCH);
  emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_KILL_PROCESS);
  emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
  /* The x32 table is another way in to the same calls. */
  emit(p, BPF_JMP | BPF_JGE | BPF_K, 0, 1, 0x40000000u);
  emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_KILL_PROCESS);
#endif
  for (unsigned i = 0; i < REFUSED_COUNT; i++) refuse_call(p, refused_calls[i], RET_ERRNO(EPERM));
#ifdef SYS_clone3
  /* clone3's flags are behind a pointer the filter cannot read: the C library falls back
   * to clone, whose flags it can. */
  refuse_call(p, SYS_clone3, RET_ERRNO(ENOSYS));
#endif
  /* clone: no new namespaces. */
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, SYS_clone);
  emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LOW(0));
  emit(p, BPF_JMP | BPF_JSET | BPF_K, 0, 1, TS_NAMESPACE_FLAGS);
  emit(p, BPF_RET | BPF_K, 0, 0, RET_ERRNO(EPERM));
  emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
  /* ioctl: no faked terminal input (TIOCSTI, CVE-2017-5226) nor console tricks. */
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 5, SYS_ioctl);
  emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LOW(1));
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 2, 0, TIOCSTI);
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, TIOCLINUX);
  emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
  emit(p, BPF_RET | BPF_K, 0, 0, RET_ERRNO(EPERM));
  /* socket and socketpair: local (AF_UNIX) sockets only; the network namespace is empty
   * anyway, and every other family is kernel code a thumbnailer never needs. */
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, SYS_socket);
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, SYS_socketpair);
  emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LOW(0));
  emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, AF_UNIX);
  emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
  emit(p, BPF_RET | BPF_K, 0, 0, RET_ERRNO(EAFNOSUPPORT));
  emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
  return p->count <= FILTER_CAPACITY ? 0 : -EOVERFLOW;
}

static program the_filter;
static int the_filter_failed;
static pthread_once_t the_filter_once = PTHREAD_ONCE_INIT;

static void build_the_filter(void) { the_filter_failed = build(&the_filter); }

int ts_sandbox_filter(void) {
  pthread_once(&the_filter_once, build_the_filter);
  if (the_filter_failed) return the_filter_failed;
  const program *p = &the_filter;
  int fd = memfd_create("thumbd-seccomp", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  size_t length = p->count * sizeof(struct sock_filter);
  const char *bytes = (const char *)p->code;
  size_t written = 0;
  while (written < length) {
    ssize_t n = write(fd, bytes + written, length - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int error = n < 0 ? errno : EIO;
      close(fd);
      return -error;
    }
    written += (size_t)n;
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

/* ---- the child ---- */

static void set_limit(int resource, uint64_t value) {
  /* An unset limit stays as inherited; one that cannot be set ends the child. */
  if (value == 0) return;
  struct rlimit limit = {(rlim_t)value, (rlim_t)value};
  if (setrlimit(resource, &limit) != 0) _exit(126);
}

pid_t ts_spawn_limited(const char *path, char *const argv[], char *const envp[],
                       const ts_child_limits *limits, const int *pass_fds, int pass_count,
                       int stdin_fd, int stdout_fd, int output_fd, int64_t run_as) {
  if (pass_count < 0 || pass_count > TS_SPAWN_MAX_PASSED) return -EINVAL;
  /* Everything the child needs is opened before the fork. */
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return -errno;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int error = errno;
    close(null_fd);
    return -error;
  }
  if (pid > 0) {
    close(null_fd);
    return pid;
  }
  /* The child: async-signal-safe calls only. */
  sigset_t none;
  sigemptyset(&none);
  struct sigaction fallback = {0};
  fallback.sa_handler = SIG_DFL;
  for (int signal = 1; signal < NSIG; signal++) sigaction(signal, &fallback, NULL);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (setsid() < 0) _exit(126);
  /* If the daemon dies, so does the child (bubblewrap passes it on to the sandbox). */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);
  /* Another user: raw calls, since the C library's set*id would signal threads the child
   * does not have. Groups first, while the child may still change them. */
  if (run_as >= 0) {
    gid_t group = (gid_t)run_as;
    uid_t user = (uid_t)run_as;
    if (syscall(SYS_setgroups, 0, NULL) != 0 || syscall(SYS_setresgid, group, group, group) != 0 ||
        syscall(SYS_setresuid, user, user, user) != 0) {
      _exit(126);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
  }
  set_limit(RLIMIT_CPU, limits->cpu_seconds);
  set_limit(RLIMIT_AS, limits->address_space);
  set_limit(RLIMIT_FSIZE, limits->file_size);
  set_limit(RLIMIT_NPROC, limits->processes);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  /* Descriptors: 0 from stdin_fd (or /dev/null), 1 to stdout_fd, 1 (without one) and 2 to
   * output_fd (or /dev/null), then the passed
   * ones from 3 up. Each is first copied above the range it goes to, so none overwrites
   * another before it is moved; dup2 clears close-on-exec on the copies. */
  int moved[TS_SPAWN_MAX_PASSED];
  int floor = 3 + TS_SPAWN_MAX_PASSED;
  for (int i = 0; i < pass_count; i++) {
    moved[i] = fcntl(pass_fds[i], F_DUPFD_CLOEXEC, floor);
    if (moved[i] < 0) _exit(126);
  }
  int out = fcntl(output_fd >= 0 ? output_fd : null_fd, F_DUPFD_CLOEXEC, floor);
  int standard = stdout_fd >= 0 ? fcntl(stdout_fd, F_DUPFD_CLOEXEC, floor) : out;
  int in = fcntl(stdin_fd >= 0 ? stdin_fd : null_fd, F_DUPFD_CLOEXEC, floor);
  if (out < 0 || in < 0 || standard < 0) _exit(126);
  if (dup2(in, 0) < 0 || dup2(standard, 1) < 0 || dup2(out, 2) < 0) _exit(126);
  for (int i = 0; i < pass_count; i++) {
    if (dup2(moved[i], 3 + i) < 0) _exit(126);
  }
  int lowest = 3 + pass_count;
  if (syscall(SYS_close_range, (unsigned)lowest, ~0u, 0) != 0) {
    for (int fd = lowest; fd < 4096; fd++) close(fd);
  }
  /* The descriptor limit comes last: the copies above need free numbers, and a daemon with
   * many connections has none below a small limit until its own are closed. */
  set_limit(RLIMIT_NOFILE, limits->open_files);
  execve(path, argv, envp);
  _exit(127);
}

int ts_child_handle(pid_t pid) {
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -errno : fd;
}

int ts_child_wait(int handle, int wake_fd, int timeout_ms) {
  struct pollfd watched[2] = {{handle, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  int count = wake_fd >= 0 ? 2 : 1;
  int ready = poll(watched, (nfds_t)count, timeout_ms);
  if (ready < 0) return errno == EINTR ? 0 : -errno;
  if (watched[0].revents) return 1;
  if (count == 2 && watched[1].revents) return 2;
  return 0;
}

int ts_child_reap(pid_t pid, int *status) {
  for (;;) {
    pid_t done = waitpid(pid, status, 0);
    if (done == pid) return 0;
    if (done < 0 && errno == EINTR) continue;
    return -errno;
  }
}

int ts_child_kill_group(pid_t group) { return kill(-group, SIGKILL) == 0 ? 0 : -errno; }

int ts_child_kill_tree(pid_t leader) {
  if (kill(leader, SIGSTOP) != 0) return -errno;
  /* Stopped (or ended) within 200 ms: a clone in progress completes before the stop, so every
   * child it makes is listed below. WNOWAIT leaves the status for ts_child_reap. */
  for (int tries = 0; tries < 200; tries++) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)leader, &info, WSTOPPED | WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == leader)
      break;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)leader, (int)leader);
  int file = open(path, O_RDONLY | O_CLOEXEC);
  if (file >= 0) {
    char list[512];
    ssize_t length = read(file, list, sizeof list - 1);
    close(file);
    list[length > 0 ? length : 0] = 0;
    for (char *at = list; *at;) {
      char *end;
      long child = strtol(at, &end, 10);
      if (end == at) break;
      if (child > 0) {
        kill(-(pid_t)child, SIGKILL); /* its own group, when it made a session */
        kill((pid_t)child, SIGKILL);
      }
      at = end;
    }
  }
  /* The leader itself too: stopped before its setsid, it has no group of its own yet. */
  int group = kill(-leader, SIGKILL) == 0 ? 0 : -errno;
  return kill(leader, SIGKILL) == 0 ? 0 : group;
}

int ts_status_exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

int ts_status_signal(int status) { return WIFSIGNALED(status) ? WTERMSIG(status) : 0; }

/* ---- a server's jobs ---- */

int ts_job_socket(int pair[2]) {
  return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0 ? 0 : -errno;
}

int ts_job_send(int socket, const void *bytes, size_t length, const int *fds, int count) {
  if (count < 0 || count > TS_SPAWN_MAX_PASSED) return -EINVAL;
  struct iovec part = {(void *)bytes, length};
  union {
    char space[CMSG_SPACE(sizeof(int) * TS_SPAWN_MAX_PASSED)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr message = {0};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  if (count > 0) {
    message.msg_control = control.space;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count);
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
    memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)count);
  }
  for (;;) {
    ssize_t sent = sendmsg(socket, &message, MSG_NOSIGNAL);
    if (sent == (ssize_t)length) return 0;
    if (sent < 0 && errno == EINTR) continue;
    return sent < 0 ? -errno : -EPROTO;
  }
}

long ts_job_receive(int socket, void *buffer, size_t length, int wait, int *fds, int max_fds,
                    int *carried) {
  struct iovec part = {buffer, length};
  /* Room for more descriptors than kept, so that extra ones arrive to be closed. */
  union {
    char space[CMSG_SPACE(sizeof(int) * TS_SPAWN_MAX_PASSED)];
    struct cmsghdr align;
  } control;
  struct msghdr message = {0};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = control.space;
  message.msg_controllen = sizeof control.space;
  ssize_t got;
  do {
    got = recvmsg(socket, &message, (wait ? 0 : MSG_DONTWAIT) | MSG_TRUNC | MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return -errno;
  int count = 0;
  for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    size_t sent = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < sent; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
      if (count < max_fds) {
        fds[count] = fd;
      } else {
        close(fd);
      }
      count++;
    }
  }
  if (carried) *carried = count;
  if (got == 0 && count == 0) return 0;
  if ((size_t)got == length && !(message.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) return (long)got;
  for (int i = 0; i < count && i < max_fds; i++) close(fds[i]);
  return -EPROTO;
}

int ts_job_wait(int socket, int handle, int wake_fd, int timeout_ms) {
  struct pollfd watched[3] = {
      {socket, POLLIN, 0}, {handle, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  int ready = poll(watched, wake_fd >= 0 ? 3 : 2, timeout_ms);
  if (ready < 0) return errno == EINTR ? 0 : -errno;
  if (wake_fd >= 0 && watched[2].revents) return 2;
  if (watched[0].revents) return 1;
  if (watched[1].revents) return 3;
  return 0;
}

/* ---- the output folder ---- */

#include <dirent.h>
#include <string.h>

/* Removes what `directory` (an open folder) holds, never following a link, `depth` folders
 * deep at most and `*budget` entries in all; 0, or -1 when something was left. */
static int empty_folder(int directory, int depth, int *budget) {
  DIR *listing = fdopendir(directory);
  if (!listing) {
    close(directory);
    return -1;
  }
  int left = 0;
  struct dirent *entry;
  while ((entry = readdir(listing)) != NULL) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    if (--*budget < 0) {
      left = -1;
      break;
    }
    if (unlinkat(dirfd(listing), entry->d_name, 0) == 0) continue;
    if (errno != EISDIR && errno != EPERM) {
      left = -1;
      continue;
    }
    int inner = depth > 0 ? openat(dirfd(listing), entry->d_name,
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                          : -1;
    if (inner < 0 || empty_folder(inner, depth - 1, budget) != 0 ||
        unlinkat(dirfd(listing), entry->d_name, AT_REMOVEDIR) != 0) {
      left = -1;
    }
  }
  closedir(listing);
  return left;
}

int ts_memory_file(void) {
  int fd = memfd_create("thumbd-child-output", MFD_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

int ts_open_folder(const char *path) {
  int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

int ts_remove_tree(const char *path, int max_depth, int max_entries) {
  int directory = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (directory < 0) return errno == ENOENT ? 0 : -errno;
  int budget = max_entries;
  if (empty_folder(directory, max_depth, &budget) != 0) return -ENOTEMPTY;
  return rmdir(path) == 0 ? 0 : -errno;
}

/* ---- watching folders ---- */

#include <sys/inotify.h>

int ts_watch_create(void) {
  int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  return fd < 0 ? -errno : fd;
}

int ts_watch_folder(int watcher, const char *path) {
  int id = inotify_add_watch(watcher, path,
                             IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                 IN_CLOSE_WRITE | IN_ATTRIB | IN_ONLYDIR);
  return id < 0 ? -errno : id;
}

int ts_watch_wait(int watcher, int wake_fd, int timeout_ms) {
  struct pollfd watched[2] = {{watcher, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  int ready = poll(watched, wake_fd >= 0 ? 2 : 1, timeout_ms);
  if (ready < 0) return errno == EINTR ? 0 : -errno;
  if (wake_fd >= 0 && watched[1].revents) return 2;
  if (!watched[0].revents) return 0;
  /* The events themselves do not matter: a change is a change. Drained, bounded. */
  char buffer[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (int i = 0; i < 64; i++) {
    ssize_t n = read(watcher, buffer, sizeof buffer);
    if (n <= 0) break;
  }
  return 1;
}
