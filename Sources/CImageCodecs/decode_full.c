/*
 * Full-resolution decode into one bitmap, orientation applied. This is the
 * reference path (quality checks, tests); thumbnails never go through it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct collect_sink {
  ic_sink base;
  uint8_t *pixels;
  uint32_t width, height, next_row;
  int channels;
} collect_sink;

static ic_status collect_begin(ic_sink *sink, uint32_t width, uint32_t height,
                               int channels, ic_result *result) {
  collect_sink *s = (collect_sink *)sink;
  s->pixels = malloc((size_t)width * height * channels);
  if (!s->pixels)
    return ic_fail(result, IC_ERR_NO_MEMORY, "bitmap allocation failed");
  s->width = width;
  s->height = height;
  s->channels = channels;
  return IC_OK;
}

static ic_status collect_row(ic_sink *sink, const uint8_t *row,
                             ic_result *result) {
  (void)result;
  collect_sink *s = (collect_sink *)sink;
  if (s->next_row >= s->height) return IC_OK;
  size_t stride = (size_t)s->width * s->channels;
  memcpy(s->pixels + stride * s->next_row++, row, stride);
  return IC_OK;
}

/* Decodes at the smallest size the decoder offers that covers need_w x need_h (the full
 * size when allow_scaling is 0). */
static ic_status decode_into(const ic_source *source, const ic_limits *limits,
                             uint32_t need_w, uint32_t need_h, int allow_scaling,
                             ic_bitmap *bitmap, ic_result *info) {
  memset(info, 0, sizeof(*info));
  memset(bitmap, 0, sizeof(*bitmap));
  ic_stream stream;
  if (ic_stream_open(&stream, source, info) != IC_OK) return info->status;
  ic_decoder *decoder = NULL;
  collect_sink sink = {.base = {.begin = collect_begin, .row = collect_row}};
  ic_control control = {.cancel_flag = NULL, .deadline_ns = 0};
  ic_status status = ic_decoder_open(&stream, limits, &control, info, &decoder);
  if (status == IC_OK) {
    uint32_t w, h;
    info->orientation = decoder->header.orientation;
    info->source_width = decoder->header.width;
    info->source_height = decoder->header.height;
    if (!allow_scaling) {
      need_w = decoder->header.width;
      need_h = decoder->header.height;
    }
    decoder->ops->choose_size(decoder, need_w, need_h, allow_scaling, &w, &h);
    status = ic_decoder_run(decoder, &sink.base, info);
    /* The reference converts every source pixel, before any averaging. */
    if (status == IC_OK && sink.pixels)
      ic_colour_convert(&decoder->header.colour, sink.pixels, sink.width, sink.next_row,
                        sink.channels, info);
    decoder->ops->destroy(decoder);
  }
  ic_stream_close(&stream);
  if (status == IC_OK && sink.next_row < sink.height)
    status = ic_fail(info, IC_ERR_TRUNCATED, "image ended early");
  if (status != IC_OK) {
    free(sink.pixels);
    return status;
  }
  uint32_t w = sink.width, h = sink.height;
  uint8_t *pixels = sink.pixels;
  if (info->orientation != 1) {
    pixels = ic_orient(sink.pixels, sink.width, sink.height, sink.channels,
                       info->orientation, &w, &h);
    free(sink.pixels);
    if (!pixels) return ic_fail(info, IC_ERR_NO_MEMORY, "orientation failed");
  }
  bitmap->pixels = pixels;
  bitmap->width = w;
  bitmap->height = h;
  bitmap->channels = sink.channels;
  info->width = w;
  info->height = h;
  return IC_OK;
}

ic_status ic_decode_full(const ic_source *source, const ic_limits *limits,
                         ic_bitmap *bitmap, ic_result *info) {
  return decode_into(source, limits, 0, 0, 0, bitmap, info);
}

ic_status ic_decode_scaled(const ic_source *source, const ic_limits *limits,
                           uint32_t min_width, uint32_t min_height, ic_bitmap *bitmap,
                           ic_result *info) {
  return decode_into(source, limits, min_width, min_height, 1, bitmap, info);
}
