/*
 * What thumbd-frame writes and how it ends: the one header thumbd's reader
 * (Sandbox/VideoFrames.swift) and the worker share.
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

#define TF_MAGIC "TDFRAME1"
#define TF_HEADER_SIZE 36
#define TF_UNKNOWN 0xFFFFFFFFu

/* Every frame tried was almost black: this is the first of them. */
#define TF_FLAG_DARK 1u

/* Exit codes. */
enum {
  TF_EXIT_OK = 0,
  TF_EXIT_USAGE = 64,
  TF_EXIT_UNSUPPORTED = 65,  /* not a video it reads, no video stream, no decoder */
  TF_EXIT_CORRUPT = 66,      /* a video whose frames do not decode */
  TF_EXIT_TOO_LARGE = 67,    /* frames over the pixel limit */
  TF_EXIT_UNAVAILABLE = 69,  /* FFmpeg's libraries are not installed */
  TF_EXIT_OUTPUT = 74,       /* stdout could not take the frame */
};

typedef struct tf_header {
  uint32_t frame_ms;
  uint32_t duration_ms;
  uint32_t flags;
  uint32_t source_w, source_h;
} tf_header;

/* Writes the frame of the video on descriptor `fd` (`name` only hints at its container by
 * its extension) for a box of `box_w` x `box_h` (0: free) to stdout; returns an exit code. */
int tf_run(int fd, const char *name, int box_w, int box_h, uint64_t max_pixels);

#endif
