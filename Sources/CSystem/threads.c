/*
 * The calling thread's name and CPU priority.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void ts_name_thread(const char *name) {
  char shortened[16];
  snprintf(shortened, sizeof shortened, "%s", name);
  pthread_setname_np(pthread_self(), shortened);
}

int ts_thread_is_main(void) { return (pid_t)syscall(SYS_gettid) == getpid(); }

int ts_thread_background(void) {
  /* Nice 19 rather than SCHED_IDLE: an idle-policy thread can wait indefinitely while any
   * other process keeps the CPUs busy, whereas nice 19 still gets a small, steady share.
   * On Linux, PRIO_PROCESS with a thread id sets that thread's nice value alone. */
  pid_t tid = (pid_t)syscall(SYS_gettid);
  return setpriority(PRIO_PROCESS, (id_t)tid, 19) == 0 ? 0 : -errno;
}
