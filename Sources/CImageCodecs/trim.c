/*
 * Trimming borders of one colour (imgproxy's `t`), in two stages: the whole picture is
 * resampled upright at a working size, its borders found there, and the request then runs
 * on what is left, read from memory.
 *
 * Rules kept here:
 * - The border test is per channel: a pixel is border when every channel is within the
 *   threshold of the colour (alpha too, for a transparent border).
 * - Nothing is cut when everything would be (a picture of one colour keeps its size).
 * - Work is one pass over each border line until it stops, so at most the working picture.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int is_border(const uint8_t *p, int channels, const uint8_t *colour, int threshold) {
  for (int c = 0; c < channels; c++)
    if (abs((int)p[c] - (int)colour[c]) > threshold) return 0;
  return 1;
}

/* Whether `count` pixels from `first`, `step` pixels apart (a row or a column), are all border. */
static int line_is_border(const uint8_t *pixels, size_t first, size_t step, uint32_t count,
                          int channels, const uint8_t *colour, int threshold) {
  for (uint32_t i = 0; i < count; i++)
    if (!is_border(pixels + (first + i * step) * channels, channels, colour, threshold)) return 0;
  return 1;
}

void ic_trim_box(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                 const ic_geometry *g, uint32_t *x, uint32_t *y, uint32_t *out_width,
                 uint32_t *out_height) {
  *x = *y = 0;
  *out_width = width;
  *out_height = height;
  if (width == 0 || height == 0) return;
  uint8_t colour[4] = {0, 0, 0, 255};
  if (g->trim_has_colour) memcpy(colour, g->trim_colour, 3);
  else memcpy(colour, pixels, (size_t)channels);
  int threshold = (int)(g->trim_threshold < 0 ? 0 : g->trim_threshold > 255 ? 255 : g->trim_threshold);
  uint32_t top = 0, bottom = height, left = 0, right = width;
#define ROW(y) line_is_border(pixels, (size_t)(y) * width, 1, width, channels, colour, threshold)
#define COLUMN(x)                                                                            \
  line_is_border(pixels, (size_t)top * width + (x), width, bottom - top, channels, colour,   \
                 threshold)
  while (top < bottom && ROW(top)) top++;
  if (top == bottom) return; /* all border: keep it all */
  while (bottom > top && ROW(bottom - 1)) bottom--;
  while (left < right && COLUMN(left)) left++;
  while (right > left && COLUMN(right - 1)) right--;
#undef ROW
#undef COLUMN
  if (g->trim_equal_horizontal) {
    uint32_t cut = left < width - right ? left : width - right;
    left = cut;
    right = width - cut;
  }
  if (g->trim_equal_vertical) {
    uint32_t cut = top < height - bottom ? top : height - bottom;
    top = cut;
    bottom = height - cut;
  }
  *x = left;
  *y = top;
  *out_width = right - left;
  *out_height = bottom - top;
}

typedef struct memory_decoder {
  ic_decoder base;
  const uint8_t *pixels;
  uint32_t stride, x, y;
} memory_decoder;

static void memory_choose_size(ic_decoder *decoder, uint32_t need_width, uint32_t need_height,
                               int allow_scaling, uint32_t *width, uint32_t *height) {
  (void)need_width;
  (void)need_height;
  (void)allow_scaling;
  *width = decoder->header.width;
  *height = decoder->header.height;
}

static ic_status memory_run(ic_decoder *decoder, ic_sink *sink, ic_result *result) {
  memory_decoder *m = (memory_decoder *)decoder;
  const ic_header *h = &decoder->header;
  if (sink->begin(sink, h->width, h->height, h->channels, result) != IC_OK)
    return result->status;
  for (uint32_t row = 0; row < h->height; row++) {
    const uint8_t *at = m->pixels + ((size_t)(m->y + row) * m->stride + m->x) * h->channels;
    if (sink->row(sink, at, result) != IC_OK) return result->status;
  }
  return IC_OK;
}

static void memory_destroy(ic_decoder *decoder) { free(decoder); }

static uint64_t memory_working(ic_decoder *decoder) {
  (void)decoder;
  return 0;
}

static const ic_decoder_ops memory_ops = {
    .choose_size = memory_choose_size,
    .run = memory_run,
    .destroy = memory_destroy,
    .working_memory = memory_working,
};

ic_decoder *ic_memory_decoder(const uint8_t *pixels, uint32_t stride, int channels, uint32_t x,
                              uint32_t y, uint32_t width, uint32_t height, ic_result *result) {
  memory_decoder *m = ic_decoder_new(sizeof(memory_decoder), &memory_ops, NULL, NULL, result);
  if (!m) return NULL;
  m->pixels = pixels;
  m->stride = stride;
  m->x = x;
  m->y = y;
  m->base.header.width = width;
  m->base.header.height = height;
  m->base.header.orientation = 1;
  m->base.header.channels = channels;
  return &m->base;
}
