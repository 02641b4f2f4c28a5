/*
 * glibc's allocator, tuned and trimmed (see docs/ARCHITECTURE.md, "Memory").
 */
#include "CSystem.h"

#include <malloc.h>
#include <stdlib.h>

void ts_malloc_tune(int arenas, long mmap_threshold) {
  /* The environment (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_) wins: an operator's choice. */
  if (arenas > 0 && !getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, arenas);
  if (mmap_threshold > 0 && !getenv("MALLOC_MMAP_THRESHOLD_"))
    mallopt(M_MMAP_THRESHOLD, (int)mmap_threshold);
}

int ts_malloc_trim(void) { return malloc_trim(0); }
