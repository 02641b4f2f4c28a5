/* thumbd-frame NAME WIDTH HEIGHT MAX_PIXELS < VIDEO: see frame.c.
 * thumbd-frame --serve LABEL: the same for each job on stdin, FFmpeg bound once (CSystem's
 * serve.c); LABEL only names the server in a process listing. */
#include "frame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int number(const char *text, unsigned long long most, unsigned long long *value) {
  char *end = NULL;
  errno = 0;
  unsigned long long parsed = strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || parsed > most) return -1;
  *value = parsed;
  return 0;
}

static int run_job(const tf_request *request) {
  return tf_run(0, request->name, (int)request->width, (int)request->height,
                request->max_pixels);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--serve") == 0 && argv[2][0] != '\0' &&
      strlen(argv[2]) <= 64) {
    int bound = tf_bind();
    return bound != 0 ? bound : ts_serve_jobs(0, run_job);
  }
  unsigned long long w, h, pixels;
  if (argc != 5 || number(argv[2], 65535, &w) != 0 || number(argv[3], 65535, &h) != 0 ||
      number(argv[4], 1ull << 40, &pixels) != 0 || pixels == 0) {
    fputs("usage: thumbd-frame NAME WIDTH HEIGHT MAX_PIXELS < VIDEO\n"
          "       thumbd-frame --serve LABEL (jobs on stdin, from thumbd)\n",
          stderr);
    return TF_EXIT_USAGE;
  }
  return tf_run(0, argv[1], (int)w, (int)h, pixels);
}
