/*
 * lcms2's allocator: every block carries its size, so the totals stay exact. All of lcms2
 * holds at most IC_COLOUR_TOTAL_MAX; a transform being built, at most IC_COLOUR_BUILD_MAX
 * (counted per thread while colour.c builds one). lcms2's error log is silenced: anything it
 * cannot open or link is reported by the caller's outcome instead.
 */
#include "colour_internal.h"

#include <lcms2_plugin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint64_t lcms_bytes;
/* Bytes the transform this thread is building has taken, or NULL outside a build. */
static __thread uint64_t *build_bytes;

typedef union block_header {
  size_t size;
  max_align_t align;
} block_header;

static void *counted_malloc(cmsContext context, cmsUInt32Number size) {
  (void)context;
  if (build_bytes && *build_bytes + size > IC_COLOUR_BUILD_MAX) return NULL;
  /* Reserved before allocating: builds run on several threads at once. */
  uint64_t held = atomic_load(&lcms_bytes);
  do {
    if (held + size > IC_COLOUR_TOTAL_MAX) return NULL;
  } while (!atomic_compare_exchange_weak(&lcms_bytes, &held, held + size));
  block_header *block = malloc(sizeof(block_header) + size);
  if (!block) {
    atomic_fetch_sub(&lcms_bytes, size);
    return NULL;
  }
  block->size = size;
  if (build_bytes) *build_bytes += size;
  return block + 1;
}

static void counted_free(cmsContext context, void *pointer) {
  (void)context;
  if (!pointer) return;
  block_header *block = (block_header *)pointer - 1;
  atomic_fetch_sub(&lcms_bytes, block->size);
  if (build_bytes) *build_bytes -= block->size < *build_bytes ? block->size : *build_bytes;
  free(block);
}

static void *counted_realloc(cmsContext context, void *pointer, cmsUInt32Number size) {
  void *grown = counted_malloc(context, size);
  if (!grown || !pointer) return grown;
  block_header *block = (block_header *)pointer - 1;
  memcpy(grown, pointer, block->size < size ? block->size : size);
  counted_free(context, pointer);
  return grown;
}

static void silent_errors(cmsContext context, cmsUInt32Number code, const char *text) {
  (void)context;
  (void)code;
  (void)text;
}

static cmsPluginMemHandler memory_plugin = {
    .base = {.Magic = cmsPluginMagicNumber,
             .ExpectedVersion = 2000,
             .Type = cmsPluginMemHandlerSig,
             .Next = NULL},
    .MallocPtr = counted_malloc,
    .FreePtr = counted_free,
    .ReallocPtr = counted_realloc,
};

static pthread_once_t lcms_once = PTHREAD_ONCE_INIT;

static void lcms_setup(void) {
  cmsPlugin(&memory_plugin);
  cmsSetLogErrorHandler(silent_errors);
}

void ic_lcms_setup(void) { pthread_once(&lcms_once, lcms_setup); }

uint64_t *ic_lcms_count_into(uint64_t *counter) {
  uint64_t *previous = build_bytes;
  build_bytes = counter;
  return previous;
}
