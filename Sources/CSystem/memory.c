/*
 * glibc's allocator, tuned and trimmed (see docs/ARCHITECTURE.md, "Memory").
 */
#include "CSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

void ts_malloc_tune(int arenas, long mmap_threshold) {
  /* The environment (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_) wins: an operator's choice. */
  if (arenas > 0 && !getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, arenas);
  if (mmap_threshold > 0 && !getenv("MALLOC_MMAP_THRESHOLD_"))
    mallopt(M_MMAP_THRESHOLD, (int)mmap_threshold);
}

int ts_malloc_trim(void) { return malloc_trim(0); }

long long ts_resident_bytes(void) {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  /* Seven decimal fields of at most 20 digits each: 160 bytes hold them. */
  char text[160];
  ssize_t got;
  do got = read(fd, text, sizeof text - 1);
  while (got < 0 && errno == EINTR);
  close(fd);
  if (got <= 0) return -1;
  text[got] = 0;
  /* size resident shared ...: the second field, in pages. */
  const char *at = text;
  while (*at >= '0' && *at <= '9') at++;
  if (*at != ' ') return -1;
  at++;
  long long pages = 0;
  int digits = 0;
  for (; *at >= '0' && *at <= '9' && digits < 18; at++, digits++) pages = pages * 10 + (*at - '0');
  if (digits == 0) return -1;
  long page = sysconf(_SC_PAGESIZE);
  return pages * (page > 0 ? page : 4096);
}
