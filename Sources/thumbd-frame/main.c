/* thumbd-frame [--kind video|pdf|svg] NAME WIDTH HEIGHT MAX_PIXELS < INPUT: see frame.c (a
 * video's frame) and page.c (a PDF's first page, an SVG).
 * thumbd-frame --serve LABEL: the same for each job on stdin, the libraries bound once
 * (CSystem's serve.c); LABEL only names the server in a process listing. */
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

static int run(int fd, uint32_t kind, const char *name, int w, int h, uint64_t pixels) {
  return kind == TF_KIND_VIDEO ? tf_run(fd, name, w, h, pixels) : tp_run(fd, kind, w, h, pixels);
}

static int run_job(const tf_request *request) {
  return run(0, request->kind, request->name, (int)request->width, (int)request->height,
             request->max_pixels);
}

static int kind_named(const char *text, uint32_t *kind) {
  static const char *const names[] = {"video", "pdf", "svg"};
  for (uint32_t i = 0; i < 3; i++) {
    if (strcmp(text, names[i]) == 0) {
      *kind = i;
      return 0;
    }
  }
  return -1;
}

int main(int argc, char **argv) {
  /* librsvg's filters would start a thread a core, past the sandbox's process limit. */
  setenv("RAYON_NUM_THREADS", "1", 1);
  if (argc == 3 && strcmp(argv[1], "--serve") == 0 && argv[2][0] != '\0' &&
      strlen(argv[2]) <= 64) {
    /* What cannot be bound is refused job by job, with the package to install. */
    (void)tf_bind();
    tp_warm();
    return ts_serve_jobs(0, run_job);
  }
  uint32_t kind = TF_KIND_VIDEO;
  if (argc == 7 && strcmp(argv[1], "--kind") == 0 && kind_named(argv[2], &kind) == 0) {
    argc -= 2;
    argv += 2;
  }
  unsigned long long w, h, pixels;
  if (argc != 5 || number(argv[2], 65535, &w) != 0 || number(argv[3], 65535, &h) != 0 ||
      number(argv[4], 1ull << 40, &pixels) != 0 || pixels == 0) {
    fputs("usage: thumbd-frame [--kind video|pdf|svg] NAME WIDTH HEIGHT MAX_PIXELS < INPUT\n"
          "       thumbd-frame --serve LABEL (jobs on stdin, from thumbd)\n",
          stderr);
    return TF_EXIT_USAGE;
  }
  return run(0, kind, argv[1], (int)w, (int)h, pixels);
}
