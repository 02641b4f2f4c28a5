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

/* Binds FFmpeg's libraries and sets up its log, once; an exit code (0 when bound). */
int tf_bind(void);

#endif
