/*
 * After the resample and orientation: the smart crop's window, then the canvas (extending,
 * padding, background). Everything here works on the small upright result.
 *
 * Rules kept here:
 * - Saliency is scored on a fixed grid of cells from at most SALIENCY_SAMPLES samples a side
 *   (every pixel of a small result), so its memory and work are bounded whatever the
 *   result's size. The map is blurred over
 *   about the window's size and the window centred on its peak.
 * - It is deterministic: the highest peak wins, and among equals the one nearest the centre.
 * - Added pixels are the background when one is asked for, else transparent; a background
 *   also flattens the picture's own alpha onto it.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The score map's cells a side, and the most samples scored along a side. */
#define SALIENCY_CELLS 32
#define SALIENCY_SAMPLES 96


static int is_skin(const float *lab) {
  return lab[1] >= 3 && lab[1] <= 22 && lab[2] >= 4 && lab[2] <= 31 && lab[0] >= 15;
}

static int is_vivid(const float *lab) { return lab[1] * lab[1] + lab[2] * lab[2] > 60 * 60; }

/* One cell of a line of `count` cells `step` apart, blurred by the kernel of `radius`: the
 * line's ends repeat outwards. The map is blurred across rows, then down columns. */
static float blurred(const float *line, uint32_t count, uint32_t step, uint32_t at,
                     const float *kernel, int radius) {
  float sum = 0;
  for (int i = -radius; i <= radius; i++) {
    long cell = (long)at + i;
    cell = cell < 0 ? 0 : cell >= (long)count ? (long)count - 1 : cell;
    sum += kernel[i + radius] * line[(size_t)cell * step];
  }
  return sum;
}

void ic_smart_window(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                     uint32_t window_width, uint32_t window_height, uint32_t *x, uint32_t *y) {
  uint32_t room_x = width > window_width ? width - window_width : 0;
  uint32_t room_y = height > window_height ? height - window_height : 0;
  *x = room_x / 2;
  *y = room_y / 2;
  if (room_x == 0 && room_y == 0) return;
  /* Samples (every pixel up to SALIENCY_SAMPLES a side), each pixel's Lab once. */
  uint32_t sw = width < SALIENCY_SAMPLES ? width : SALIENCY_SAMPLES;
  uint32_t sh = height < SALIENCY_SAMPLES ? height : SALIENCY_SAMPLES;
  float *lab = malloc(sizeof(float) * 4 * sw * sh);
  if (!lab) return; /* the centre, as without a smart crop */
  for (uint32_t j = 0; j < sh; j++)
    for (uint32_t i = 0; i < sw; i++) {
      const uint8_t *p = pixels + ((size_t)((j * 2 + 1) * (uint64_t)height / (2 * sh)) * width +
                                   (size_t)((i * 2 + 1) * (uint64_t)width / (2 * sw))) *
                                      channels;
      float *q = lab + 4 * ((size_t)j * sw + i);
      ic_srgb_to_lab(p, q);
      q[3] = channels == 4 ? p[3] / 255.0f : 1;
    }
  /* Each sample's interest, summed into a coarse grid: detail (a Sobel gradient of
   * lightness over the samples), a skin tone (a and b in the range of human skin, not too
   * dark) and strong colour (chroma over 60). A tone or colour counts as much as a strong
   * edge when it is rare, less the more of the picture it covers: a wall of wood or a field of
   * flowers is the background, a face or a toy on it the subject. Transparent samples count
   * for nothing. */
  uint32_t cols = width < SALIENCY_CELLS ? width : SALIENCY_CELLS;
  uint32_t rows = height < SALIENCY_CELLS ? height : SALIENCY_CELLS;
  float map[SALIENCY_CELLS * SALIENCY_CELLS];
  memset(map, 0, sizeof(map));
  size_t skins = 0, vivids = 0, samples = (size_t)sw * sh;
  for (size_t k = 0; k < samples; k++) {
    skins += is_skin(lab + 4 * k);
    vivids += is_vivid(lab + 4 * k);
  }
  float skin_weight = 255.0f * (1 - (float)skins / samples);
  float vivid_weight = 255.0f * (1 - (float)vivids / samples);
#define L_AT(i, j)                                                                          \
  lab[4 * ((size_t)((j) < 0 ? 0 : (j) >= (long)sh ? sh - 1 : (j)) * sw +                   \
           (size_t)((i) < 0 ? 0 : (i) >= (long)sw ? sw - 1 : (i)))]
  for (long j = 0; j < (long)sh; j++)
    for (long i = 0; i < (long)sw; i++) {
      float gx = (L_AT(i + 1, j - 1) + 2 * L_AT(i + 1, j) + L_AT(i + 1, j + 1)) -
                 (L_AT(i - 1, j - 1) + 2 * L_AT(i - 1, j) + L_AT(i - 1, j + 1));
      float gy = (L_AT(i - 1, j + 1) + 2 * L_AT(i, j + 1) + L_AT(i + 1, j + 1)) -
                 (L_AT(i - 1, j - 1) + 2 * L_AT(i, j - 1) + L_AT(i + 1, j - 1));
      const float *q = lab + 4 * ((size_t)j * sw + i);
      float score = (fabsf(gx) + fabsf(gy) + (is_skin(q) ? skin_weight : 0) +
                     (is_vivid(q) ? vivid_weight : 0)) *
                    q[3];
      map[(size_t)j * rows / sh * cols + (size_t)i * cols / sw] += score;
    }
#undef L_AT
  free(lab);
  /* Blurred over about the window's size, so the peak is where a window gathers most. */
  double wx = (double)window_width * cols / width, wy = (double)window_height * rows / height;
  double sigma = sqrt(wx * wx + wy * wy) / 6;
  if (sigma < 0.5) sigma = 0.5;
  /* The kernel ends below 0.2 of its peak; the map's edges repeat outwards. */
  int radius = (int)floor(sigma * sqrt(-2 * log(0.2)));
  float kernel[4 * SALIENCY_CELLS + 1];
  if (radius > 2 * SALIENCY_CELLS) radius = 2 * SALIENCY_CELLS;
  for (int i = -radius; i <= radius; i++)
    kernel[i + radius] = (float)exp(-(double)i * i / (2 * sigma * sigma));
  float across[SALIENCY_CELLS * SALIENCY_CELLS];
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t c = 0; c < cols; c++)
      across[r * cols + c] = blurred(map + (size_t)r * cols, cols, 1, c, kernel, radius);
  float best = -1;
  double best_distance = 0;
  uint32_t best_r = rows / 2, best_c = cols / 2;
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t c = 0; c < cols; c++) {
      float sum = blurred(across + c, rows, cols, r, kernel, radius);
      double dx = c + 0.5 - cols / 2.0, dy = r + 0.5 - rows / 2.0;
      double distance = dx * dx + dy * dy;
      if (sum > best || (sum == best && distance < best_distance)) {
        best = sum;
        best_distance = distance;
        best_r = r;
        best_c = c;
      }
    }
  /* The window centred on the peak's cell, kept inside. */
  double centre_x = (best_c + 0.5) * width / cols, centre_y = (best_r + 0.5) * height / rows;
  double left = centre_x - window_width / 2.0, top = centre_y - window_height / 2.0;
  *x = left < 0 ? 0 : left > room_x ? room_x : (uint32_t)(left + 0.5);
  *y = top < 0 ? 0 : top > room_y ? room_y : (uint32_t)(top + 0.5);
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

/* The watermark at `width` x `height`, premultiplied: through the resampler (which takes and
 * gives straight alpha). NULL when out of memory. */
static uint8_t *scaled_watermark(const ic_watermark *w, uint32_t width, uint32_t height,
                                 ic_filter filter) {
  ic_resizer *resizer = ic_resizer_create(w->width, w->height, 4, 0, 0, w->width, w->height,
                                          width, height, filter);
  uint8_t *row = malloc((size_t)w->width * 4);
  if (!resizer || !row) {
    ic_resizer_destroy(resizer);
    free(row);
    return NULL;
  }
  for (uint32_t y = 0; y < w->height; y++) {
    const uint8_t *src = w->pixels + (size_t)y * w->width * 4;
    for (uint32_t x = 0; x < w->width; x++) {
      uint32_t a = src[x * 4 + 3];
      for (int c = 0; c < 3; c++)
        row[x * 4 + c] = a ? (uint8_t)((src[x * 4 + c] * 255u + a / 2) / a) : 0;
      row[x * 4 + 3] = (uint8_t)a;
    }
    ic_resizer_push_row(resizer, row);
  }
  free(row);
  uint8_t *out = ic_resizer_finish(resizer);
  ic_resizer_destroy(resizer);
  if (!out) return NULL;
  for (size_t i = 0; i < (size_t)width * height; i++) {
    uint32_t a = out[i * 4 + 3];
    for (int c = 0; c < 3; c++) out[i * 4 + c] = (uint8_t)((out[i * 4 + c] * a + 127) / 255);
  }
  return out;
}

/* One copy of the watermark (premultiplied, ww x wh) over the picture at (left, top), clipped. */
static void blend(uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                  const uint8_t *mark, uint32_t ww, uint32_t wh, long left, long top,
                  float opacity) {
  for (uint32_t j = 0; j < wh; j++) {
    long y = top + (long)j;
    if (y < 0 || y >= (long)height) continue;
    for (uint32_t i = 0; i < ww; i++) {
      long x = left + (long)i;
      if (x < 0 || x >= (long)width) continue;
      const uint8_t *m = mark + ((size_t)j * ww + i) * 4;
      float a = m[3] * opacity / 255.0f;
      if (a <= 0) continue;
      uint8_t *p = pixels + ((size_t)y * width + (size_t)x) * channels;
      if (channels == 4) {
        /* Straight colour under it: out = mark + picture * (1 - a), in premultiplied terms. */
        float below = p[3] / 255.0f, out = a + below * (1 - a);
        for (int c = 0; c < 3; c++) {
          float v = (m[c] * opacity + p[c] * below * (1 - a)) / (out > 0 ? out : 1);
          p[c] = (uint8_t)(v > 255 ? 255 : v + 0.5f);
        }
        p[3] = (uint8_t)(out * 255 + 0.5f);
      } else {
        for (int c = 0; c < 3; c++) {
          float v = m[c] * opacity + p[c] * (1 - a);
          p[c] = (uint8_t)(v > 255 ? 255 : v + 0.5f);
        }
      }
    }
  }
}

ic_status ic_apply_watermark(uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                             const ic_watermark *w, ic_filter filter, ic_result *result) {
  if (!w->pixels || w->width == 0 || w->height == 0 || !(w->opacity > 0)) return IC_OK;
  /* Its size: a fraction of the picture's width, or its own; never past the picture. */
  double ww = w->width, wh = w->height;
  if (w->scale > 0) {
    wh = wh * (w->scale * width) / ww;
    ww = w->scale * width;
  }
  double fit = fmin(1.0, fmin(width / ww, height / wh));
  uint32_t mw = (uint32_t)floor(ww * fit + 0.5), mh = (uint32_t)floor(wh * fit + 0.5);
  if (mw == 0) mw = 1;
  if (mh == 0) mh = 1;
  const uint8_t *mark = w->pixels;
  uint8_t *scaled = NULL;
  if (mw != w->width || mh != w->height) {
    scaled = scaled_watermark(w, mw, mh, filter);
    if (!scaled) return ic_fail(result, IC_ERR_NO_MEMORY, "watermark buffer failed");
    mark = scaled;
  }
  float opacity = (float)(w->opacity > 1 ? 1 : w->opacity);
  if (w->replicate) {
    /* Tiles from the top left, the offsets as gaps: at most one blend per picture pixel. */
    long gap_x = (long)ic_offset_pixels(w->position.offset_x > 0 ? w->position.offset_x : 0, mw);
    long gap_y = (long)ic_offset_pixels(w->position.offset_y > 0 ? w->position.offset_y : 0, mh);
    for (long top = 0; top < (long)height; top += (long)mh + gap_y)
      for (long left = 0; left < (long)width; left += (long)mw + gap_x)
        blend(pixels, width, height, channels, mark, mw, mh, left, top, opacity);
  } else {
    long left = (long)floor(ic_anchor_place(&w->position, 0, width, mw) + 0.5);
    long top = (long)floor(ic_anchor_place(&w->position, 1, height, mh) + 0.5);
    blend(pixels, width, height, channels, mark, mw, mh, left, top, opacity);
  }
  free(scaled);
  return IC_OK;
}
