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
 * it falls below `least` of its peak (libvips: 0.2 for gaussblur, 0.1 for sharpen); radius 0
 * (no filter) when even the first step does. */
static float *half_kernel(double sigma, double least, int *radius) {
  int r = 0;
  while (r < 8 * sigma + 1 && exp(-(double)(r + 1) * (r + 1) / (2 * sigma * sigma)) >= least)
    r++;
  float *k = malloc(sizeof(float) * (size_t)(r + 1));
  if (!k) return NULL;
  double sum = 0;
  for (int i = 0; i <= r; i++) {
    k[i] = (float)exp(-(double)i * i / (2 * sigma * sigma));
    sum += i ? 2 * k[i] : k[i];
  }
  for (int i = 0; i <= r; i++) k[i] = (float)(k[i] / sum);
  *radius = r;
  return k;
}

static int clamp_index(long i, uint32_t n) { return i < 0 ? 0 : i >= (long)n ? (int)n - 1 : (int)i; }

/* A ring of `rows` rows of `floats` floats, or NULL (and a result) past MAX_RING_BYTES. */
static float *ring_alloc(int rows, size_t floats, ic_result *result) {
  uint64_t bytes = (uint64_t)rows * floats * sizeof(float);
  if (bytes > MAX_RING_BYTES) {
    ic_fail(result, IC_ERR_INVALID_ARGUMENT, "the filter's sigma is too large for this output");
    return NULL;
  }
  float *ring = malloc(bytes ? bytes : 1);
  if (!ring) ic_fail(result, IC_ERR_NO_MEMORY, "filter buffer failed");
  return ring;
}

static ic_status blur(uint8_t *pixels, uint32_t w, uint32_t h, int ch, double sigma,
                      const ic_control *control, ic_result *result) {
  int r;
  float *k = half_kernel(sigma, 0.2, &r);
  if (!k) return ic_fail(result, IC_ERR_NO_MEMORY, "filter buffer failed");
  if (r == 0) {
    free(k);
    return IC_OK;
  }
  int n = 2 * r + 1;
  size_t stride = (size_t)w * ch;
  float *ring = ring_alloc(n, stride, result);
  float *in = ring ? malloc(sizeof(float) * stride) : NULL;
  if (!ring || !in) {
    free(k);
    free(ring);
    return ring ? ic_fail(result, IC_ERR_NO_MEMORY, "filter buffer failed") : result->status;
  }
  uint32_t next = 0;
  ic_status status = IC_OK;
  for (uint32_t y = 0; y < h && status == IC_OK; y++) {
    for (; next < h && next <= y + (uint32_t)r; next++) {
      /* Row `next`, premultiplied, blurred across into its ring slot. */
      const uint8_t *src = pixels + next * stride;
      for (uint32_t x = 0; x < w; x++) {
        float a = ch == 4 ? src[x * 4 + 3] / 255.0f : 1.0f;
        for (int c = 0; c < ch; c++)
          in[x * ch + c] = c == 3 ? src[x * 4 + 3] : src[x * ch + c] * a;
      }
      float *out = ring + (size_t)(next % n) * stride;
      for (uint32_t x = 0; x < w; x++)
        for (int c = 0; c < ch; c++) {
          float sum = k[0] * in[x * ch + c];
          for (int i = 1; i <= r; i++)
            sum += k[i] * (in[(size_t)clamp_index((long)x - i, w) * ch + c] +
                           in[(size_t)clamp_index((long)x + i, w) * ch + c]);
          out[x * ch + c] = sum;
        }
    }
    uint8_t *dst = pixels + y * stride;
    for (size_t i = 0; i < stride; i += ch) {
      float sums[4];
      for (int c = 0; c < ch; c++) {
        float sum = k[0] * ring[(size_t)(y % n) * stride + i + c];
        for (int d = 1; d <= r; d++)
          sum += k[d] * (ring[(size_t)(clamp_index((long)y - d, h) % n) * stride + i + c] +
                         ring[(size_t)(clamp_index((long)y + d, h) % n) * stride + i + c]);
        sums[c] = sum;
      }
      float a = ch == 4 ? sums[3] / 255.0f : 1.0f;
      for (int c = 0; c < ch; c++) {
        float v = c == 3 ? sums[3] : a > 0 ? sums[c] / a : 0;
        dst[i + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
      }
    }
    status = ic_check(control, result);
  }
  free(k);
  free(ring);
  free(in);
  return status;
}

/* sRGB and linear light, by table. */
#define LINEAR_STEPS 16384
static float to_linear[256];
static uint8_t from_linear[LINEAR_STEPS + 1];
static void tables_once(void) {
  for (int i = 0; i < 256; i++) {
    double v = i / 255.0;
    to_linear[i] = (float)(v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4));
  }
  for (int i = 0; i <= LINEAR_STEPS; i++) {
    double v = (double)i / LINEAR_STEPS;
    double s = v <= 0.0031308 ? v * 12.92 : 1.055 * pow(v, 1 / 2.4) - 0.055;
    from_linear[i] = (uint8_t)(s * 255 + 0.5);
  }
}
static pthread_once_t tables = PTHREAD_ONCE_INIT;

/* CIE Lab (D65) of an sRGB pixel, and back: what libvips sharpens in. */
static float lab_f(float t) { return t > 0.008856f ? cbrtf(t) : 7.787f * t + 16.0f / 116; }
static float lab_f_inverse(float t) {
  return t > 0.206893f ? t * t * t : (t - 16.0f / 116) / 7.787f;
}
static void to_lab(const uint8_t *p, float *lab) {
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

static ic_status sharpen(uint8_t *pixels, uint32_t w, uint32_t h, int ch, double sigma,
                         const ic_control *control, ic_result *result) {
  int r;
  float *k = half_kernel(sigma, 0.1, &r);
  if (!k) return ic_fail(result, IC_ERR_NO_MEMORY, "filter buffer failed");
  if (r == 0) {
    free(k);
    return IC_OK;
  }
  pthread_once(&tables, tables_once);
  int n = 2 * r + 1;
  size_t stride = (size_t)w * ch;
  float *ring = ring_alloc(n, w, result);
  float *in = ring ? malloc(sizeof(float) * w) : NULL;
  if (!ring || !in) {
    free(k);
    free(ring);
    return ring ? ic_fail(result, IC_ERR_NO_MEMORY, "filter buffer failed") : result->status;
  }
  uint32_t next = 0;
  ic_status status = IC_OK;
  for (uint32_t y = 0; y < h && status == IC_OK; y++) {
    for (; next < h && next <= y + (uint32_t)r; next++) {
      const uint8_t *src = pixels + next * stride;
      for (uint32_t x = 0; x < w; x++) in[x] = lightness(src + (size_t)x * ch);
      float *out = ring + (size_t)(next % n) * w;
      for (uint32_t x = 0; x < w; x++) {
        float sum = k[0] * in[x];
        for (int i = 1; i <= r; i++)
          sum += k[i] * (in[clamp_index((long)x - i, w)] + in[clamp_index((long)x + i, w)]);
        out[x] = sum;
      }
    }
    uint8_t *dst = pixels + y * stride;
    for (uint32_t x = 0; x < w; x++) {
      float blurred = k[0] * ring[(size_t)(y % n) * w + x];
      for (int d = 1; d <= r; d++)
        blurred += k[d] * (ring[(size_t)(clamp_index((long)y - d, h) % n) * w + x] +
                           ring[(size_t)(clamp_index((long)y + d, h) % n) * w + x]);
      uint8_t *p = dst + (size_t)x * ch;
      float lab[3];
      to_lab(p, lab);
      float sharpened = lab[0] + sharpen_curve(lab[0] - blurred);
      lab[0] = sharpened < 0 ? 0 : sharpened > 100 ? 100 : sharpened;
      from_lab(lab, p);
    }
    status = ic_check(control, result);
  }
  free(k);
  free(ring);
  free(in);
  return status;
}

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
    status = blur(pixels, width, height, channels, effects->blur_sigma, control, result);
  if (status == IC_OK && effects->sharpen_sigma > 0)
    status = sharpen(pixels, width, height, channels, effects->sharpen_sigma, control, result);
  if (status == IC_OK && effects->pixelate > 1)
    pixelate(pixels, width, height, channels, effects->pixelate);
  return status;
}
