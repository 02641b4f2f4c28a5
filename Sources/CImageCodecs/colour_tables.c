/*
 * Matrix-and-curve transforms as tables.
 *
 * Most embedded profiles (Display P3, Adobe RGB, ProPhoto, every camera's) are three curves
 * and a 3x3 matrix. Into linear sRGB such a transform is additive: each channel contributes
 * a vector of its own, T(r, g, b) = R[r] + G[g] + B[b]. The tables are sampled from lcms2
 * itself (the source to a linear-light sRGB profile, in floats, unclipped), then the sum is
 * clipped and encoded with the sRGB curve through one table. Nothing of the profile is
 * parsed here, and the tables are only used when they reproduce lcms2's own 8-bit transform
 * to within one level on a grid of 4913 colours and 4096 more scattered ones (a profile
 * with lookup tables, or one lcms2 clips inside, fails that and keeps lcms2's transform).
 * Measured on a 12 MP JPEG set at 256 px (docs/BENCHMARKS.md, "Colour"): 4.5-7% of
 * thumbnail time with lcms2's transform, 2.3-2.6% with the tables. */
#include "colour_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Fixed point of the linear sums: 1.0 is 1 << 16; the encode table has 1 << 14 entries. */
#define SEPARABLE_ONE 65536
#define SEPARABLE_SHIFT 2

struct separable {
  int32_t channel[3][256][3]; /* [input channel][level][output channel], the first with T(0) */
  uint8_t encode[SEPARABLE_ONE >> SEPARABLE_SHIFT];
};

/* Set by ic_colour_set_tables on this thread only. */
static __thread int tables_disabled;

void ic_separable_apply(const separable *t, uint8_t *row, uint32_t width, int channels) {
  for (uint32_t x = 0; x < width; x++) {
    uint8_t *pixel = row + (size_t)x * channels;
    const int32_t *r = t->channel[0][pixel[0]], *g = t->channel[1][pixel[1]],
                  *b = t->channel[2][pixel[2]];
    for (int c = 0; c < 3; c++) {
      int32_t v = r[c] + g[c] + b[c];
      v = v < 0 ? 0 : v > SEPARABLE_ONE - 1 ? SEPARABLE_ONE - 1 : v;
      pixel[c] = t->encode[v >> SEPARABLE_SHIFT];
    }
  }
}

/* The sRGB curve, encoded value (0...1) to linear light. */
static double srgb_decode(double encoded) {
  if (encoded <= 0.04045) return encoded / 12.92;
  return pow((encoded + 0.055) / 1.055, 2.4);
}

separable *ic_separable_build(cmsHPROFILE source, cmsHTRANSFORM reference, layout layout) {
  cmsToneCurve *linear_curve = cmsBuildGamma(NULL, 1.0);
  cmsCIExyY white = {ic_srgb_primaries[0], ic_srgb_primaries[1], 1.0};
  const double *p = ic_srgb_primaries;
  cmsCIExyYTRIPLE primaries = {{p[2], p[3], 1.0}, {p[4], p[5], 1.0}, {p[6], p[7], 1.0}};
  cmsToneCurve *curves[3] = {linear_curve, linear_curve, linear_curve};
  cmsHPROFILE linear = linear_curve ? cmsCreateRGBProfile(&white, &primaries, curves) : NULL;
  if (linear_curve) cmsFreeToneCurve(linear_curve);
  cmsHTRANSFORM to_linear =
      linear ? cmsCreateTransform(source, TYPE_RGB_FLT, linear, TYPE_RGB_FLT, IC_COLOUR_INTENT,
                                  IC_COLOUR_FLAGS)
             : NULL;
  if (linear) cmsCloseProfile(linear);
  separable *t = to_linear ? malloc(sizeof(*t)) : NULL;
  /* Three ramps, one channel each, and black. */
  enum { SAMPLES = 3 * 256 + 1 };
  float *in = t ? calloc(SAMPLES * 3, sizeof(float)) : NULL;
  float *out = in ? malloc(SAMPLES * 3 * sizeof(float)) : NULL;
  int ok = out != NULL;
  if (ok) {
    for (int c = 0; c < 3; c++)
      for (int level = 0; level < 256; level++) in[(c * 256 + level) * 3 + c] = level / 255.0f;
    cmsDoTransform(to_linear, in, out, SAMPLES);
    const float *black = out + (size_t)(SAMPLES - 1) * 3;
    for (int c = 0; c < 3 && ok; c++)
      for (int level = 0; level < 256 && ok; level++)
        for (int o = 0; o < 3; o++) {
          /* Each channel's vector without black, black added once (to the first). */
          double v = out[(c * 256 + level) * 3 + o] - black[o] + (c == 0 ? black[o] : 0.0);
          if (!isfinite(v) || fabs(v) > 64.0) {
            ok = 0;
            break;
          }
          t->channel[c][level][o] = (int32_t)lrint(v * SEPARABLE_ONE);
        }
    /* The encode table from the 255 linear values where the rounded level steps up (255
     * powers, not one per entry: building is on the first request's path). */
    int level = 0;
    double next = srgb_decode(0.5 / 255.0);
    for (int i = 0; i < SEPARABLE_ONE >> SEPARABLE_SHIFT; i++) {
      double linear_value = (i + 0.5) / (SEPARABLE_ONE >> SEPARABLE_SHIFT);
      while (level < 255 && linear_value >= next)
        next = ++level < 255 ? srgb_decode((level + 0.5) / 255.0) : 2.0;
      t->encode[i] = (uint8_t)level;
    }
  }
  free(in);
  free(out);
  if (to_linear) cmsDeleteTransform(to_linear);
  if (ok) {
    /* The check: a 17-level grid and scattered colours through both. */
    enum { GRID = 17, CHECKS = GRID * GRID * GRID + 4096 };
    int channels = layout == LAYOUT_RGBA ? 4 : 3;
    uint8_t *mine = malloc((size_t)CHECKS * channels);
    uint8_t *theirs = mine ? malloc((size_t)CHECKS * channels) : NULL;
    ok = theirs != NULL;
    if (ok) {
      uint32_t seed = 2463534242u;
      for (int i = 0; i < CHECKS; i++) {
        uint8_t *pixel = mine + (size_t)i * channels;
        for (int c = 0; c < 3; c++) {
          if (i < GRID * GRID * GRID) {
            int step = c == 0 ? i % GRID : c == 1 ? i / GRID % GRID : i / (GRID * GRID);
            pixel[c] = (uint8_t)(step * 16 > 255 ? 255 : step * 16);
          } else {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            pixel[c] = (uint8_t)(seed >> 24);
          }
        }
        if (channels == 4) pixel[3] = 255;
      }
      memcpy(theirs, mine, (size_t)CHECKS * channels);
      cmsDoTransform(reference, theirs, theirs, CHECKS);
      ic_separable_apply(t, mine, CHECKS, channels);
      for (size_t i = 0; i < (size_t)CHECKS * channels && ok; i++)
        if (abs(mine[i] - theirs[i]) > 1) ok = 0;
    }
    free(mine);
    free(theirs);
  }
  if (!ok) {
    free(t);
    return NULL;
  }
  return t;
}

size_t ic_separable_bytes(void) { return sizeof(separable); }

int ic_separable_enabled(void) { return !tables_disabled; }

void ic_colour_set_tables(int enabled) { tables_disabled = !enabled; }
