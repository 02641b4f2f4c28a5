/*
 * After the resample and orientation: the smart crop's window, then the canvas (extending,
 * padding, background). Everything here works on the small upright result.
 *
 * Rules kept here:
 * - Saliency is scored on cells, so its memory is fixed (at most SALIENCY_CELLS a side of
 *   prefix sums) whatever the result's size, and its work is one pass over the pixels.
 * - It is deterministic: the best window wins, and among equals the one nearest the centre.
 * - Added pixels are the background when one is asked for, else transparent; a background
 *   also flattens the picture's own alpha onto it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define SALIENCY_CELLS 128

static int luma(const uint8_t *p) { return (77 * p[0] + 150 * p[1] + 29 * p[2]) >> 8; }

/* A pixel's interest: detail (the luma gradient), saturation, and skin tone, which counts
 * most (a face is the usual subject). Transparent pixels are of no interest. */
static uint32_t interest(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                         uint32_t x, uint32_t y) {
  const uint8_t *p = pixels + ((size_t)y * width + x) * channels;
  const uint8_t *left = x > 0 ? p - channels : p, *right = x + 1 < width ? p + channels : p;
  const uint8_t *up = y > 0 ? p - (size_t)width * channels : p;
  const uint8_t *down = y + 1 < height ? p + (size_t)width * channels : p;
  int r = p[0], g = p[1], b = p[2];
  int max = r > g ? (r > b ? r : b) : (g > b ? g : b);
  int min = r < g ? (r < b ? r : b) : (g < b ? g : b);
  uint32_t detail = (uint32_t)abs(luma(right) - luma(left)) + (uint32_t)abs(luma(down) - luma(up));
  uint32_t saturation = max - min > 48 ? (uint32_t)(max - min) / 2 : 0;
  int skin = r > 95 && g > 40 && b > 20 && max - min > 15 && r - g > 15 && r > b;
  uint32_t score = detail + saturation + (skin ? 96 : 0);
  if (channels == 4) score = score * p[3] / 255;
  return score;
}

void ic_smart_window(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                     uint32_t window_width, uint32_t window_height, uint32_t *x, uint32_t *y) {
  uint32_t room_x = width > window_width ? width - window_width : 0;
  uint32_t room_y = height > window_height ? height - window_height : 0;
  *x = room_x / 2;
  *y = room_y / 2;
  if (room_x == 0 && room_y == 0) return;
  uint32_t longest = width > height ? width : height;
  uint32_t cell = (longest + SALIENCY_CELLS - 1) / SALIENCY_CELLS;
  uint32_t cols = (width + cell - 1) / cell, rows = (height + cell - 1) / cell;
  /* Prefix sums over cells: sums[(r) * (cols + 1) + c] covers cells above r and left of c. */
  uint64_t *sums = calloc((size_t)(cols + 1) * (rows + 1), sizeof(uint64_t));
  if (!sums) return; /* the centre, as without a smart crop */
  for (uint32_t py = 0; py < height; py++)
    for (uint32_t px = 0; px < width; px++)
      sums[(size_t)(py / cell + 1) * (cols + 1) + px / cell + 1] +=
          interest(pixels, width, height, channels, px, py);
  for (uint32_t r = 1; r <= rows; r++)
    for (uint32_t c = 1; c <= cols; c++)
      sums[(size_t)r * (cols + 1) + c] += sums[(size_t)(r - 1) * (cols + 1) + c] +
                                          sums[(size_t)r * (cols + 1) + c - 1] -
                                          sums[(size_t)(r - 1) * (cols + 1) + c - 1];
  uint32_t span_c = (window_width + cell / 2) / cell, span_r = (window_height + cell / 2) / cell;
  if (span_c < 1) span_c = 1;
  if (span_r < 1) span_r = 1;
  if (span_c > cols) span_c = cols;
  if (span_r > rows) span_r = rows;
  uint64_t best = 0;
  int64_t best_distance = INT64_MAX;
  for (uint32_t r = 0; r + span_r <= rows; r++)
    for (uint32_t c = 0; c + span_c <= cols; c++) {
      size_t top = (size_t)r * (cols + 1), bottom = (size_t)(r + span_r) * (cols + 1);
      uint64_t total = sums[bottom + c + span_c] - sums[top + c + span_c] - sums[bottom + c] +
                       sums[top + c];
      /* Where this window would sit in pixels, and how far that is from the centre. */
      uint32_t at_x = c * cell > room_x ? room_x : c * cell;
      uint32_t at_y = r * cell > room_y ? room_y : r * cell;
      int64_t dx = (int64_t)at_x - room_x / 2, dy = (int64_t)at_y - room_y / 2;
      int64_t distance = dx * dx + dy * dy;
      if (total > best || (total == best && distance < best_distance)) {
        best = total;
        best_distance = distance;
        *x = at_x;
        *y = at_y;
      }
    }
  free(sums);
}

uint8_t *ic_canvas(const uint8_t *pixels, uint32_t width, int channels, uint32_t from_x,
                   uint32_t from_y, const ic_plan *plan, const ic_geometry *geometry,
                   int *out_channels) {
  uint32_t w = plan->window_width, h = plan->window_height;
  int filled = plan->canvas_width != w || plan->canvas_height != h;
  int out = geometry->has_background ? 3 : filled ? 4 : channels;
  size_t bytes = (size_t)plan->canvas_width * plan->canvas_height * out;
  uint8_t *canvas = malloc(bytes ? bytes : 1);
  if (!canvas) return NULL;
  const uint8_t *bg = geometry->background;
  for (size_t i = 0; i < (size_t)plan->canvas_width * plan->canvas_height; i++) {
    uint8_t *q = canvas + i * out;
    if (out == 3) memcpy(q, bg, 3);
    else memset(q, 0, (size_t)out);
  }
  for (uint32_t y = 0; y < h; y++) {
    const uint8_t *src = pixels + ((size_t)(from_y + y) * width + from_x) * channels;
    uint8_t *dst = canvas + (((size_t)plan->place_y + y) * plan->canvas_width + plan->place_x) * out;
    for (uint32_t x = 0; x < w; x++, src += channels, dst += out) {
      if (out == 3 && channels == 4) {
        uint32_t a = src[3];
        for (int c = 0; c < 3; c++) dst[c] = (uint8_t)((src[c] * a + bg[c] * (255 - a) + 127) / 255);
      } else {
        dst[0] = src[0];
        dst[1] = src[1];
        dst[2] = src[2];
        if (out == 4) dst[3] = channels == 4 ? src[3] : 255;
      }
    }
  }
  *out_channels = out;
  return canvas;
}
