/* thumbd-frame NAME WIDTH HEIGHT MAX_PIXELS < VIDEO: see frame.c. */
#include "frame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int number(const char *text, unsigned long long most, unsigned long long *value) {
  char *end = NULL;
  errno = 0;
  unsigned long long parsed = strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || parsed > most) return -1;
  *value = parsed;
  return 0;
}

int main(int argc, char **argv) {
  unsigned long long w, h, pixels;
  if (argc != 5 || number(argv[2], 65535, &w) != 0 || number(argv[3], 65535, &h) != 0 ||
      number(argv[4], 1ull << 40, &pixels) != 0 || pixels == 0) {
    fputs("usage: thumbd-frame NAME WIDTH HEIGHT MAX_PIXELS < VIDEO\n", stderr);
    return TF_EXIT_USAGE;
  }
  return tf_run(0, argv[1], (int)w, (int)h, pixels);
}
