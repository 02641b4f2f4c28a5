/*
 * The worker's entry. What it writes and how it ends (TF_* in CSystem.h, which thumbd's
 * reader, Sandbox/VideoFrames.swift, sees too):
 *
 * stdin: the video, read with pread (the caller's offset is never moved).
 * stdout: TF_HEADER_SIZE bytes, then a BMP (BITMAPINFOHEADER, 24 bits, top-down) of the
 * header's width and height:
 *   0  "TDFRAME1"
 *   8  width, u32 little-endian (of the BMP)
 *   12 height
 *   16 the frame's time from the start, milliseconds
 *   20 the video's duration, milliseconds, or TF_UNKNOWN
 *   24 flags (TF_FLAG_*)
 *   28 the displayed frame's width (sample aspect ratio and turn applied)
 *   32 its height
 */
#ifndef THUMBD_FRAME_H
#define THUMBD_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <CSystem.h>

typedef struct tf_header {
  uint32_t frame_ms;
  uint32_t duration_ms;
  uint32_t flags;
  uint32_t source_w, source_h;
} tf_header;

/* Writes the frame of the video on descriptor `fd` (`name` only hints at its container by
 * its extension) for a box of `box_w` x `box_h` (0: free) to stdout; returns an exit code. */
int tf_run(int fd, const char *name, int box_w, int box_h, uint64_t max_pixels);

/* Writes "thumbd-frame: " and the message as one line on stderr; returns `code`. */
int tf_fail(int code, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Writes all `count` bytes to `fd` (retrying short writes); 0, or -1. */
int tf_write_all(int fd, const void *bytes, size_t count);

/* Little-endian fields of the header and the BMP. */
void tf_put32(uint8_t *at, uint32_t value);
void tf_put16(uint8_t *at, uint16_t value);

/* Binds FFmpeg's libraries and sets up its log, once; an exit code (0 when bound). */
int tf_bind(void);

/* Writes the picture of the drawing on descriptor `fd` (a PDF's first page or an SVG, by
 * `kind`, TF_KIND_*) for a box of `box_w` x `box_h` to stdout, as tf_run writes a frame
 * (page.c); returns an exit code. */
int tp_run(int fd, uint32_t kind, int box_w, int box_h, uint64_t max_pixels);

/* Binds poppler-glib, librsvg and cairo, once; a kind whose library is missing is refused by
 * tp_run with the package to install. */
void tp_bind(void);

/* Binds them and draws a small drawing of each kind of the server's own (text in a standard
 * font among it), writing nothing: what each library sets up on first use (its types,
 * fontconfig's configuration and fonts) is then set up once, in the server, for every job's
 * process it forks. */
void tp_warm(void);

#endif
