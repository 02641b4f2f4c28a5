/*
 * Small shared helpers: errors, cancellation, defaults, sniffing.
 */
#include "internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

ic_status ic_fail(ic_result *result, ic_status status, const char *format,
                  ...) {
  if (result->status != IC_OK) return result->status;
  result->status = status;
  va_list args;
  va_start(args, format);
  vsnprintf(result->message, sizeof(result->message), format, args);
  va_end(args);
  return status;
}

int ic_same_shape(uint32_t w1, uint32_t h1, uint32_t w2, uint32_t h2) {
  if (w1 == 0 || h1 == 0 || w2 == 0 || h2 == 0) return 0;
  double a = (double)w1 / h1, b = (double)w2 / h2;
  return fabs(a - b) <= 0.02 * a;
}

uint64_t ic_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

ic_status ic_stop_reason(const ic_control *control) {
  if (!control) return IC_OK;
  if (control->cancel_flag && __atomic_load_n(control->cancel_flag, __ATOMIC_RELAXED) != 0)
    return IC_ERR_CANCELLED;
  if (control->deadline_ns && ic_now_ns() >= control->deadline_ns) return IC_ERR_TIMEOUT;
  return IC_OK;
}

ic_status ic_check(const ic_control *control, ic_result *result) {
  ic_status reason = ic_stop_reason(control);
  if (reason == IC_ERR_CANCELLED) return ic_fail(result, reason, "decode cancelled");
  if (reason == IC_ERR_TIMEOUT)
    return ic_fail(result, reason, "the decode took longer than its deadline");
  return IC_OK;
}

void ic_cancel_flag_set(int32_t *flag, int32_t value) {
  __atomic_store_n(flag, value, __ATOMIC_RELAXED);
}

int32_t ic_cancel_flag_get(const int32_t *flag) {
  return __atomic_load_n(flag, __ATOMIC_RELAXED);
}

void ic_limits_init(ic_limits *limits) {
  memset(limits, 0, sizeof(*limits));
  limits->max_width = 65535;
  limits->max_height = 65535;
  limits->max_pixels = 100000000ull;
  limits->max_decoder_memory = 512ull << 20;
  limits->accept_damaged = 0;
  limits->decode_timeout_ms = 10000;
  limits->max_scans = 64;
  limits->max_scan_passes = 16;
  limits->max_profile_bytes = 4u << 20;
}

void ic_request_init(ic_request *request) {
  memset(request, 0, sizeof(*request));
  request->fit = IC_FIT_CONTAIN;
  request->format = IC_OUTPUT_AUTO;
  request->quality = 80;
  request->png_level = 2;
  request->filter = IC_FILTER_LANCZOS3_AREA;
  request->shrink_on_load = 1;
  request->avif_speed = IC_AVIF_DEFAULT_SPEED;
}

ic_status ic_fail_over_limits(ic_result *result, const char *subject, uint32_t width,
                              uint32_t height, uint32_t max_width, uint32_t max_height,
                              uint64_t max_pixels) {
  const char *what = subject ? subject : "";
  uint64_t pixels = (uint64_t)width * (uint64_t)height;
  if (max_width && width > max_width)
    return ic_fail(result, IC_ERR_TOO_LARGE,
                   "%s%ux%u is wider than the limit of %u pixels a side", what, width, height,
                   max_width);
  if (max_height && height > max_height)
    return ic_fail(result, IC_ERR_TOO_LARGE,
                   "%s%ux%u is taller than the limit of %u pixels a side", what, width,
                   height, max_height);
  if (max_pixels && pixels > max_pixels)
    return ic_fail(result, IC_ERR_TOO_LARGE,
                   "%s%ux%u is %llu pixels, over the limit of %llu pixels", what, width,
                   height, (unsigned long long)pixels, (unsigned long long)max_pixels);
  return IC_OK;
}

ic_status ic_check_limits(uint32_t width, uint32_t height,
                          const ic_limits *limits, ic_result *result) {
  result->source_width = width;
  result->source_height = height;
  if (width == 0 || height == 0)
    return ic_fail(result, IC_ERR_CORRUPT, "image has zero size (%ux%u)",
                   width, height);
  return ic_fail_over_limits(result, NULL, width, height, limits->max_width,
                             limits->max_height, limits->max_pixels);
}

int ic_has_transparency(const uint8_t *pixels, size_t pixel_count,
                        int channels) {
  if (channels != 4) return 0;
  for (size_t i = 0; i < pixel_count; i++)
    if (pixels[i * 4 + 3] != 255) return 1;
  return 0;
}

void ic_result_free(ic_result *result) {
  if (!result) return;
  free(result->data);
  result->data = NULL;
  result->size = 0;
  free(result->summary);
  result->summary = NULL;
  result->summary_width = result->summary_height = 0;
}

void ic_bitmap_free(ic_bitmap *bitmap) {
  if (!bitmap) return;
  free(bitmap->pixels);
  bitmap->pixels = NULL;
}

void ic_unpremultiply_row(uint8_t *rgba, uint32_t width) {
  for (uint32_t x = 0; x < width; x++) {
    uint8_t *p = rgba + (size_t)x * 4;
    unsigned a = p[3];
    if (a == 255) continue;
    if (a == 0) {
      p[0] = p[1] = p[2] = 0;
      continue;
    }
    for (int c = 0; c < 3; c++) {
      unsigned v = (p[c] * 255u + a / 2) / a;
      p[c] = (uint8_t)(v > 255 ? 255 : v);
    }
  }
}

size_t ic_gunzip_head(const uint8_t *data, size_t size, uint8_t *out, size_t capacity) {
  if (!data || !out || size < 18 || capacity == 0 || data[0] != 0x1F || data[1] != 0x8B) {
    return 0;
  }
  z_stream z;
  memset(&z, 0, sizeof z);
  /* 16 + MAX_WBITS: a gzip header, not zlib's. */
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return 0;
  z.next_in = (Bytef *)(uintptr_t)data;
  z.avail_in = (uInt)(size > UINT32_MAX ? UINT32_MAX : size);
  z.next_out = out;
  z.avail_out = (uInt)(capacity > UINT32_MAX ? UINT32_MAX : capacity);
  int status = inflate(&z, Z_SYNC_FLUSH);
  size_t made = capacity - z.avail_out;
  inflateEnd(&z);
  /* Z_BUF_ERROR: the head ran out before the output filled, which a head does. */
  return status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR ? made : 0;
}
