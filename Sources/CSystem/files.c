/*
 * Opening a file beneath a root: openat2 with RESOLVE_BENEATH, or a walk that
 * refuses every symlink where openat2 is missing.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
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

int ts_open_beneath(const char *root, const char *relative, int flags, int walk) {
  int directory = ts_open_root(root);
  if (directory < 0) return directory;
  int fd = ts_open_beneath_at(directory, relative, flags, walk);
  close(directory);
  return fd;
}

int ts_open_beneath_at(int directory, const char *relative, int flags, int walk) {
  int fd = -ENOSYS;
  if (!walk) {
    struct ts_open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                              .mode = 0,
                              .resolve = TS_RESOLVE_BENEATH | TS_RESOLVE_NO_MAGICLINKS};
    long result = syscall(SYS_openat2, directory, relative, &how, sizeof(how));
    fd = result >= 0 ? (int)result : -errno;
  }
  /* No openat2 (before Linux 5.6), or a syscall filter that refuses it. */
  if (fd == -ENOSYS || fd == -EPERM) fd = open_walking(directory, relative, flags);
  return fd;
}

