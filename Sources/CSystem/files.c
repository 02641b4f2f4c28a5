/*
 * Opening a file beneath a root: openat2 with RESOLVE_BENEATH, or a walk that
 * refuses every symlink where openat2 is missing.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
/* From linux/openat2.h, which not every libc's headers carry. */
struct ts_open_how {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};
#define TS_RESOLVE_NO_MAGICLINKS 0x02
#define TS_RESOLVE_BENEATH 0x08

static int fail(void) { return -errno; }

/* The fallback: each directory opened with O_NOFOLLOW relative to the last. */
static int open_walking(int directory, const char *relative, int flags) {
  char path[4096];
  size_t length = strlen(relative);
  if (length == 0 || length >= sizeof(path)) return -ENAMETOOLONG;
  memcpy(path, relative, length + 1);
  int current = dup(directory);
  if (current < 0) return fail();
  char *cursor = path;
  for (;;) {
    char *slash = strchr(cursor, '/');
    if (slash) *slash = 0;
    if (*cursor == 0 || strcmp(cursor, ".") == 0 || strcmp(cursor, "..") == 0) {
      close(current);
      return -EXDEV;
    }
    int next = slash ? openat(current, cursor, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                     : openat(current, cursor, flags | O_NOFOLLOW | O_CLOEXEC);
    int error = errno;
    close(current);
    if (next < 0) return -error;
    if (!slash) return next;
    current = next;
    cursor = slash + 1;
  }
}

int ts_open_root(const char *root) {
  int directory = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  return directory < 0 ? fail() : directory;
}

/* Whether `path` is `root` or below it. */
static int is_beneath(const char *path, const char *root) {
  size_t length = strlen(root);
  if (length == 1 && root[0] == '/') return path[0] == '/';
  return strncmp(path, root, length) == 0 && (path[length] == '/' || path[length] == 0);
}

/* The second chance for links openat2's RESOLVE_BENEATH refuses (absolute, or climbing out
 * and back): resolve to an O_PATH descriptor, which opens nothing, read where it is, and
 * reopen that very inode only when it lies below the root. */
static int open_resolved_beneath(int directory, const char *root_path, const char *relative,
                                 int flags) {
  struct ts_open_how how = {.flags = O_PATH | O_CLOEXEC, .mode = 0,
                            .resolve = TS_RESOLVE_NO_MAGICLINKS};
  long located = syscall(SYS_openat2, directory, relative, &how, sizeof(how));
  if (located < 0) return fail();
  int path_fd = (int)located;
  char proc[64];
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path_fd);
  char real[PATH_MAX + 1];
  ssize_t length = readlink(proc, real, PATH_MAX);
  if (length <= 0 || length >= PATH_MAX || real[0] != '/') {
    close(path_fd);
    return -EXDEV;
  }
  real[length] = 0;
  if (!is_beneath(real, root_path)) {
    close(path_fd);
    return -EXDEV;
  }
  struct stat located_info, opened_info;
  if (fstat(path_fd, &located_info) != 0) {
    int error = errno;
    close(path_fd);
    return -error;
  }
  /* A FIFO or device is never opened for reading: the caller wants regular files only. */
  if (!S_ISREG(located_info.st_mode)) {
    close(path_fd);
    return -ENODEV;
  }
  int fd = open(proc, flags | O_CLOEXEC);
  int error = errno;
  close(path_fd);
  if (fd < 0) return -error;
  if (fstat(fd, &opened_info) != 0 || opened_info.st_dev != located_info.st_dev ||
      opened_info.st_ino != located_info.st_ino) {
    close(fd);
    return -EXDEV;
  }
  return fd;
}

int ts_open_beneath_at(int directory, const char *root_path, const char *relative, int flags,
                       int walk) {
  int fd = -ENOSYS;
  if (!walk) {
    struct ts_open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                              .mode = 0,
                              .resolve = TS_RESOLVE_BENEATH | TS_RESOLVE_NO_MAGICLINKS};
    long result = syscall(SYS_openat2, directory, relative, &how, sizeof(how));
    fd = result >= 0 ? (int)result : -errno;
    if (fd == -EXDEV && root_path) fd = open_resolved_beneath(directory, root_path, relative, flags);
  }
  /* No openat2 (before Linux 5.6), or a syscall filter that refuses it. */
  if (fd == -ENOSYS || fd == -EPERM) fd = open_walking(directory, relative, flags);
  return fd;
}

int ts_is_pseudo_file(int fd) {
  struct statfs info;
  if (fstatfs(fd, &info) != 0) return 0;
  switch ((unsigned long)info.f_type) {
  case 0x9fa0:     /* proc */
  case 0x62656572: /* sysfs */
  case 0x64626720: /* debugfs */
  case 0x74726163: /* tracefs */
  case 0x73636673: /* securityfs */
  case 0x62656570: /* configfs */
  case 0x27e0eb:   /* cgroup */
  case 0x63677270: /* cgroup2 */
    return 1;
  default:
    return 0;
  }
}
