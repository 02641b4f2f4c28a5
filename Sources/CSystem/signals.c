/*
 * Signals as bytes on a pipe (the self-pipe trick): the handler only writes the
 * signal's number, which is async-signal-safe, and a thread of the daemon's
 * reads them. sigaction takes effect before it returns, on every thread, so no
 * signal that arrives after ts_signals_install is lost or ignored.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int signal_pipe[2] = {-1, -1};

static void on_signal(int number) {
  int saved = errno;
  unsigned char byte = (unsigned char)number;
  /* A full pipe drops the byte: 64 KiB of pending signals already say enough. */
  ssize_t written = write(signal_pipe[1], &byte, 1);
  (void)written;
  errno = saved;
}

int ts_signals_install(const int *numbers, int count) {
  if (signal_pipe[0] < 0 && pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -errno;
  /* The reader blocks; only the handler's end must never block. */
  int flags = fcntl(signal_pipe[0], F_GETFL);
  if (flags < 0 || fcntl(signal_pipe[0], F_SETFL, flags & ~O_NONBLOCK) != 0) return -errno;
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < count; i++) {
    if (sigaction(numbers[i], &action, NULL) != 0) return -errno;
  }
  return signal_pipe[0];
}
