/* What the frame worker's two halves (frame.c, page.c) write with: its messages and its
 * output's bytes. */
#include "frame.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int tf_fail(int code, const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("thumbd-frame: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  return code;
}

int tf_write_all(int fd, const void *bytes, size_t count) {
  const uint8_t *at = bytes;
  while (count > 0) {
    ssize_t done = write(fd, at, count);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return -1;
    at += done;
    count -= (size_t)done;
  }
  return 0;
}

void tf_put32(uint8_t *at, uint32_t value) {
  for (int i = 0; i < 4; i++) at[i] = (uint8_t)(value >> (8 * i));
}

void tf_put16(uint8_t *at, uint16_t value) {
  at[0] = (uint8_t)value;
  at[1] = (uint8_t)(value >> 8);
}
