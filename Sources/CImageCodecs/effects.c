/*
 * Filters on the small upright result: gaussian blur, sharpening, pixelation.
 *
 * Rules kept here:
 * - Work is per output pixel and bounded: kernels stop where the gaussian falls below 0.2 of
 *   its peak (libvips' gaussblur and sharpen do the same), sigma is at most IC_MAX_SIGMA,
 *   every row checks the control, and a blur's working rows are refused past
 *   MAX_RING_BYTES.
 * - Filters run in place, a ring of horizontally filtered rows ahead of the row written: a
 *   row is overwritten only after every row that reads it has been filtered.
 * - Colour is weighted by alpha (blurred premultiplied), so transparent pixels lend no
 *   colour to their neighbours.
 */
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RING_BYTES (64u << 20)

/* The half kernel k[0..radius] of a gaussian, normalised over -radius..radius, ending where
 * it falls below `least` of its peak (libvips: 0.2 for gaussblur, 0.1 for sharpen). *kernel
 * is NULL when there is nothing to do: radius 0 (even the first step falls below; IC_OK), or
 * no memory (the error). */
static ic_status half_kernel(double sigma, double least, float **kernel, int *radius,
                             ic_result *result) {
  int r = 0;
  while (r < 8 * sigma + 1 && exp(-(double)(r + 1) * (r + 1) / (2 * sigma * sigma)) >= least)
    r++;
  *kernel = NULL;
  if (r == 0) return IC_OK;
  float *k = malloc(sizeof(float) * (size_t)(r + 1));
  if (!k) return ic_fail(result, IC_ERR_NO_MEMORY, "filter buffer failed");
  double sum = 0;
  for (int i = 0; i <= r; i++) {
    k[i] = (float)exp(-(double)i * i / (2 * sigma * sigma));
    sum += i ? 2 * k[i] : k[i];
  }
  for (int i = 0; i <= r; i++) k[i] = (float)(k[i] / sum);
  *radius = r;
  *kernel = k;
  return IC_OK;
}

/* A separable gaussian over rows that arrive one by one, `width` floats each: a ring of
 * horizontally filtered rows ahead of the row asked for. Loops run over whole rows, so the
 * compiler can vectorise them. */
typedef struct ring_blur {
  const float *k;
  int radius, count;
  uint32_t width, height;
  float *rows;   /* count rows, filtered across */
  float *padded; /* one row with radius copies of its edges on each side */
  float *out;    /* the row filtered down */
} ring_blur;

/* Work rows past MAX_RING_BYTES are refused. */
static ic_status ring_begin(ring_blur *ring, const float *k, int radius, uint32_t height,
                            int stride_floats, ic_result *result) {
  memset(ring, 0, sizeof(*ring));
  ring->k = k;
  ring->radius = radius;
  ring->count = 2 * radius + 1;
  ring->width = (uint32_t)stride_floats;
  ring->height = height;
  uint64_t bytes = ((uint64_t)ring->count + 2) * stride_floats * sizeof(float) +
                   (uint64_t)2 * radius * 4 * sizeof(float);
  if (bytes > MAX_RING_BYTES)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "the filter's sigma is too large for this output");
  ring->rows = malloc(sizeof(float) * (size_t)ring->count * stride_floats);
  ring->padded = malloc(sizeof(float) * ((size_t)stride_floats + 2 * (size_t)radius * 4));
  ring->out = malloc(sizeof(float) * (size_t)stride_floats);
  if (!ring->rows || !ring->padded || !ring->out)
    return ic_fail(result, IC_ERR_NO_MEMORY, "filter buffer failed");
  return IC_OK;
}

static void ring_end(ring_blur *ring) {
  free(ring->rows);
  free(ring->padded);
  free(ring->out);
}

/* Row `y`'s samples (`channels` interleaved per pixel, ring->width floats in all) filtered
 * across into its ring slot. The caller fills ring_input(ring, channels) first. */
static float *ring_input(ring_blur *ring, int channels) {
  return ring->padded + (size_t)ring->radius * channels;
}

static void ring_push(ring_blur *ring, uint32_t y, int channels) {
  size_t n = ring->width, edge = (size_t)ring->radius * channels;
  float *row = ring->padded + edge;
  for (size_t i = 0; i < edge; i++) {
    ring->padded[i] = row[i % channels];
    row[n + i] = row[n - channels + i % channels];
  }
  float *out = ring->rows + (size_t)(y % ring->count) * n;
  const float *k = ring->k;
  for (size_t i = 0; i < n; i++) out[i] = k[0] * row[i];
  for (int d = 1; d <= ring->radius; d++) {
    const float *left = row - (size_t)d * channels, *right = row + (size_t)d * channels;
    float weight = k[d];
    for (size_t i = 0; i < n; i++) out[i] += weight * (left[i] + right[i]);
  }
}

/* Row `y` filtered down (rows up to y + radius, or the last, pushed). */
static const float *ring_row(ring_blur *ring, uint32_t y) {
  size_t n = ring->width;
  const float *k = ring->k;
  long last = (long)ring->height - 1;
  const float *centre = ring->rows + (size_t)(y % ring->count) * n;
  for (size_t i = 0; i < n; i++) ring->out[i] = k[0] * centre[i];
  for (int d = 1; d <= ring->radius; d++) {
    long up = (long)y - d, down = (long)y + d;
    up = up < 0 ? 0 : up;
    down = down > last ? last : down;
    const float *a = ring->rows + (size_t)(up % ring->count) * n;
    const float *b = ring->rows + (size_t)(down % ring->count) * n;
    float weight = k[d];
    for (size_t i = 0; i < n; i++) ring->out[i] += weight * (a[i] + b[i]);
  }
  return ring->out;
}

/* A separable filter run in place: each row goes into the ring (`load`: the image's row to
 * `channels` floats a pixel) as far ahead of the row written as the kernel reaches, and each
 * row is written from its filtered one (`store`). */
typedef struct ring_filter {
  double least; /* where the kernel ends (half_kernel) */
  int channels; /* floats a pixel in the ring; 0 for the image's own */
  void (*load)(const uint8_t *src, float *in, uint32_t w, int ch);
  void (*store)(uint8_t *dst, const float *filtered, uint32_t w, int ch);
} ring_filter;

static ic_status run_filter(const ring_filter *filter, uint8_t *pixels, uint32_t w, uint32_t h,
                            int ch, double sigma, const ic_control *control,
                            ic_result *result) {
  int r;
  float *k;
  ic_status made = half_kernel(sigma, filter->least, &k, &r, result);
  if (!k) return made;
  size_t stride = (size_t)w * ch;
  int channels = filter->channels ? filter->channels : ch;
  ring_blur ring;
  ic_status status = ring_begin(&ring, k, r, h, (int)w * channels, result);
  uint32_t next = 0;
  for (uint32_t y = 0; y < h && status == IC_OK; y++) {
    for (; next < h && next <= y + (uint32_t)r; next++) {
      filter->load(pixels + next * stride, ring_input(&ring, channels), w, ch);
      ring_push(&ring, next, channels);
    }
    filter->store(pixels + y * stride, ring_row(&ring, y), w, ch);
    status = ic_check(control, result);
  }
  ring_end(&ring);
  free(k);
  return status;
}

/* Blur: the row premultiplied, and back. */
static void load_premultiplied(const uint8_t *src, float *in, uint32_t w, int ch) {
  if (ch == 4) {
    for (uint32_t x = 0; x < w; x++) {
      float a = src[x * 4 + 3] / 255.0f;
      in[x * 4] = src[x * 4] * a;
      in[x * 4 + 1] = src[x * 4 + 1] * a;
      in[x * 4 + 2] = src[x * 4 + 2] * a;
      in[x * 4 + 3] = src[x * 4 + 3];
    }
  } else {
    for (size_t i = 0; i < (size_t)w * ch; i++) in[i] = src[i];
  }
}

static void store_unpremultiplied(uint8_t *dst, const float *sums, uint32_t w, int ch) {
  size_t stride = (size_t)w * ch;
  for (size_t i = 0; i < stride; i += ch) {
    float a = ch == 4 ? sums[i + 3] / 255.0f : 1.0f;
    for (int c = 0; c < ch; c++) {
      float v = c == 3 ? sums[i + 3] : ch == 3 ? sums[i + c] : a > 0 ? sums[i + c] / a : 0;
      dst[i + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
    }
  }
}

static const ring_filter blur_filter = {0.2, 0, load_premultiplied, store_unpremultiplied};

/* sRGB and linear light, by table. */
#define LINEAR_STEPS 16384
static float to_linear[256];
static uint8_t from_linear[LINEAR_STEPS + 1];
/* Lab's f(t) for t in 0...1 by table, linearly between LAB_STEPS steps (within 2e-5 of the
 * cube root above the linear toe, which is exact). */
#define LAB_STEPS 4096
static float lab_table[LAB_STEPS + 2];
static void tables_once(void) {
  for (int i = 0; i < 256; i++) {
    double v = i / 255.0;
    to_linear[i] = (float)(v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4));
  }
  for (int i = 0; i <= LAB_STEPS + 1; i++) lab_table[i] = cbrtf((float)i / LAB_STEPS);
  for (int i = 0; i <= LINEAR_STEPS; i++) {
    double v = (double)i / LINEAR_STEPS;
    double s = v <= 0.0031308 ? v * 12.92 : 1.055 * pow(v, 1 / 2.4) - 0.055;
    from_linear[i] = (uint8_t)(s * 255 + 0.5);
  }
}
static pthread_once_t tables = PTHREAD_ONCE_INIT;

/* CIE Lab (D65) of an sRGB pixel, and back: what libvips sharpens in. */
/* Lab's f(t), by lab_table. */
static float lab_f(float t) {
  if (t <= 0.008856f) return 7.787f * t + 16.0f / 116;
  float at = (t < 1 ? t : 1) * LAB_STEPS;
  int i = (int)at;
  return lab_table[i] + (at - i) * (lab_table[i + 1] - lab_table[i]);
}
static float lab_f_inverse(float t) {
  return t > 0.206893f ? t * t * t : (t - 16.0f / 116) / 7.787f;
}
void ic_srgb_to_lab(const uint8_t *p, float *lab) {
  pthread_once(&tables, tables_once);
  float r = to_linear[p[0]], g = to_linear[p[1]], b = to_linear[p[2]];
  float x = (0.4124f * r + 0.3576f * g + 0.1805f * b) / 0.95047f;
  float y = 0.2126f * r + 0.7152f * g + 0.0722f * b;
  float z = (0.0193f * r + 0.1192f * g + 0.9505f * b) / 1.08883f;
  float fx = lab_f(x), fy = lab_f(y), fz = lab_f(z);
  lab[0] = 116 * fy - 16;
  lab[1] = 500 * (fx - fy);
  lab[2] = 200 * (fy - fz);
}
static uint8_t encode(float v) {
  v = v < 0 ? 0 : v > 1 ? 1 : v;
  return from_linear[(int)(v * LINEAR_STEPS + 0.5f)];
}
static void from_lab(const float *lab, uint8_t *p) {
  float fy = (lab[0] + 16) / 116, fx = fy + lab[1] / 500, fz = fy - lab[2] / 200;
  float x = lab_f_inverse(fx) * 0.95047f, y = lab_f_inverse(fy), z = lab_f_inverse(fz) * 1.08883f;
  p[0] = encode(3.2406f * x - 1.5372f * y - 0.4986f * z);
  p[1] = encode(-0.9689f * x + 1.8758f * y + 0.0415f * z);
  p[2] = encode(0.0557f * x - 0.2040f * y + 1.0570f * z);
}
static float lightness(const uint8_t *p) {
  float y = 0.2126f * to_linear[p[0]] + 0.7152f * to_linear[p[1]] + 0.0722f * to_linear[p[2]];
  return 116 * lab_f(y) - 16;
}

/* libvips' sharpen curve with its defaults: flat (slope 0) within 2 L* of the blur, slope 3
 * beyond, at most 10 brighter and 20 darker. */
static float sharpen_curve(float d) {
  const float x1 = 2, m1 = 0, m2 = 3, y2 = 10, y3 = 20;
  float y = fabsf(d) <= x1 ? d * m1 : d > 0 ? x1 * m1 + (d - x1) * m2 : -x1 * m1 + (d + x1) * m2;
  return y < -y3 ? -y3 : y > y2 ? y2 : y;
}

/* Sharpen: lightness into the ring; each pixel's L* moved by the curve of its difference
 * from the blurred one. */
static void load_lightness(const uint8_t *src, float *in, uint32_t w, int ch) {
  for (uint32_t x = 0; x < w; x++) in[x] = lightness(src + (size_t)x * ch);
}

static void store_sharpened(uint8_t *dst, const float *blurred, uint32_t w, int ch) {
  for (uint32_t x = 0; x < w; x++) {
    uint8_t *p = dst + (size_t)x * ch;
    float lab[3];
    ic_srgb_to_lab(p, lab);
    float change = sharpen_curve(lab[0] - blurred[x]);
    if (change == 0) continue; /* flat: the pixel as it was, exactly */
    float sharpened = lab[0] + change;
    lab[0] = sharpened < 0 ? 0 : sharpened > 100 ? 100 : sharpened;
    from_lab(lab, p);
  }
}

static const ring_filter sharpen_filter = {0.1, 1, load_lightness, store_sharpened};

static void pixelate(uint8_t *pixels, uint32_t w, uint32_t h, int ch, uint32_t size) {
  for (uint32_t by = 0; by < h; by += size)
    for (uint32_t bx = 0; bx < w; bx += size) {
      uint32_t ey = by + size < h ? by + size : h, ex = bx + size < w ? bx + size : w;
      double sums[4] = {0, 0, 0, 0}, weight = 0;
      for (uint32_t y = by; y < ey; y++)
        for (uint32_t x = bx; x < ex; x++) {
          const uint8_t *p = pixels + ((size_t)y * w + x) * ch;
          double a = ch == 4 ? p[3] : 255;
          for (int c = 0; c < 3; c++) sums[c] += p[c] * a;
          sums[3] += a;
          weight += 1;
        }
      uint8_t value[4];
      for (int c = 0; c < 3; c++)
        value[c] = (uint8_t)(sums[3] > 0 ? sums[c] / sums[3] + 0.5 : 0);
      value[3] = (uint8_t)(sums[3] / weight + 0.5);
      for (uint32_t y = by; y < ey; y++)
        for (uint32_t x = bx; x < ex; x++)
          memcpy(pixels + ((size_t)y * w + x) * ch, value, (size_t)ch);
    }
}

ic_status ic_apply_effects(uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                           const ic_effects *effects, const ic_control *control,
                           ic_result *result) {
  /* imgproxy's order: blur, sharpen, pixelate. */
  ic_status status = IC_OK;
  if (effects->blur_sigma > 0)
    status = run_filter(&blur_filter, pixels, width, height, channels, effects->blur_sigma,
                        control, result);
  if (status == IC_OK && effects->sharpen_sigma > 0) {
    pthread_once(&tables, tables_once);
    status = run_filter(&sharpen_filter, pixels, width, height, channels,
                        effects->sharpen_sigma, control, result);
  }
  if (status == IC_OK && effects->pixelate > 1)
    pixelate(pixels, width, height, channels, effects->pixelate);
  return status;
}
