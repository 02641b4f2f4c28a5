/*
 * A worker that serves many jobs from one start, inside its sandbox: thumbd-frame --serve
 * (binding FFmpeg's libraries, which it does first, maps and relocates a few hundred of them:
 * most of a short video's cost). thumbd keeps one server per concurrent video and sends it
 * jobs (tf_request in CSystem.h) on its stdin.
 *
 * Rules kept here:
 * - each job runs in a process forked from the server after the libraries are bound and before
 *   any input is read: no process that has parsed a video ever meets another video;
 * - the job's process closes the control socket before it reads a byte, so what a hostile
 *   video takes over cannot take or answer the next job;
 * - the server is not dumpable, and its job processes inherit that: neither a job nor what it
 *   starts can read or write the server's memory or another job's (the sandbox's filter also
 *   refuses ptrace and process_vm_*);
 * - after each job every other process in the sandbox is killed, and the answer is sent only
 *   once none is left: nothing a job starts is there when the next one begins;
 * - only a request of the exact size with exactly three descriptors is a job; anything else
 *   ends the server, and thumbd starts a new sandbox.
 * The sandbox is read-only for a server (no /tmp, no output folder), so a job leaves no file
 * for the next. thumbd kills the whole sandbox on a job's deadline or cancellation.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
  /* Tries, 1 ms apart, for the processes a job left to be gone. */
  SETTLE_TRIES = 1000,
  /* Processes looked at in /proc at most (the sandbox's process limit is far below). */
  MAX_LISTED = 4096,
};

/* One job from `control`: 1 with the request and its descriptors, 0 when the socket has
 * closed, -1 for anything that is not a job (every descriptor it carried closed). */
static int receive(int control, tf_request *request, int fds[TF_REQUEST_FDS]) {
  int carried = 0;
  long got = ts_job_receive(control, request, sizeof *request, 1, fds, TF_REQUEST_FDS, &carried);
  if (got == 0) return 0;
  if (got < 0) return -1;
  if (carried == TF_REQUEST_FDS && request->magic == TF_REQUEST_MAGIC &&
      request->width <= 65535 && request->height <= 65535 && request->kind <= TF_KIND_SVG &&
      request->max_pixels > 0 &&
      request->max_pixels <= (1ull << 40) && memchr(request->name, 0, TF_NAME_SIZE) != NULL) {
    return 1;
  }
  for (int i = 0; i < carried && i < TF_REQUEST_FDS; i++) close(fds[i]);
  return -1;
}

/* Whether a process other than process 1 and `self` is left in the sandbox, ended ones
 * waiting for their parent not counted: 1, 0, or -1 when /proc cannot tell. */
static int others_left(pid_t self) {
  DIR *listing = opendir("/proc");
  if (!listing) return -1;
  int left = 0, listed = 0;
  struct dirent *entry;
  while (!left && (entry = readdir(listing)) != NULL) {
    char *end;
    long pid = strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid <= 1 || pid == self) continue;
    if (++listed > MAX_LISTED) {
      left = -1;
      break;
    }
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *file = fopen(path, "re");
    if (!file) continue; /* gone meanwhile */
    size_t length = fread(stat, 1, sizeof stat - 1, file);
    fclose(file);
    stat[length] = '\0';
    char *close_paren = strrchr(stat, ')');
    left = !(close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z');
  }
  closedir(listing);
  return left;
}

/* Kills every other process in the sandbox and waits until none is left: 0, or -1 when some
 * outlived SETTLE_TRIES. */
static int settle(pid_t self) {
  for (int tries = 0; tries < SETTLE_TRIES; tries++) {
    kill(-1, SIGKILL);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    int left = others_left(self);
    if (left == 0) return 0;
    if (left < 0) return -1;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  return -1;
}

/* The job's process: the control socket closed, the three descriptors as stdin, stdout and
 * stderr, then `run`. Never returns. */
static void run_job(int control, const tf_request *request, const int fds[TF_REQUEST_FDS],
                    ts_job_runner run) {
  close(control);
  for (int i = 0; i < TF_REQUEST_FDS; i++) {
    if (dup2(fds[i], i) < 0) _exit(TF_EXIT_OUTPUT);
  }
  /* Nothing else of the server's: its own messages, what bubblewrap left open. */
  if (syscall(SYS_close_range, 3u, ~0u, 0) != 0) {
    for (int fd = 3; fd < 1024; fd++) close(fd);
  }
  _exit(run(request));
}

int ts_serve_jobs(int control, ts_job_runner run) {
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    fputs("job server: cannot make itself undumpable\n", stderr);
    return TF_EXIT_UNAVAILABLE;
  }
  pid_t self = getpid();
  for (;;) {
    tf_request request;
    int fds[TF_REQUEST_FDS];
    int got = receive(control, &request, fds);
    if (got == 0) return TF_EXIT_OK;
    if (got < 0) {
      fputs("job server: the control socket sent something that is not a job\n", stderr);
      return TF_EXIT_USAGE;
    }
    pid_t job = fork();
    if (job == 0) run_job(control, &request, fds, run);
    for (int i = 0; i < TF_REQUEST_FDS; i++) close(fds[i]);
    tf_reply reply = {TF_REPLY_MAGIC, 0};
    if (job < 0) {
      reply.status = TF_EXIT_UNAVAILABLE << 8; /* as a wait status: exited with that code */
    } else {
      int status = 0;
      pid_t done;
      do {
        done = waitpid(job, &status, 0);
      } while (done < 0 && errno == EINTR);
      reply.status = done == job ? status : (TF_EXIT_UNAVAILABLE << 8);
    }
    if (settle(self) != 0) {
      fputs("job server: a job's processes outlived it\n", stderr);
      return TF_EXIT_UNAVAILABLE;
    }
    ssize_t sent;
    do {
      sent = send(control, &reply, sizeof reply, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent != (ssize_t)sizeof reply) return TF_EXIT_OK;
  }
}
