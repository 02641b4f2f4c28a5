/*
 * Spawning children that inherit only what they are given.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <errno.h>
#include <spawn.h>

int ts_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
#else
  (void)actions;
  (void)lowest;
  return ENOSYS;
#endif
}
