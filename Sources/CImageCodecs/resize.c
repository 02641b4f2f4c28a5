/*
 * Streaming resampler.
 *
 * Stage 1 averages whole fx x fy blocks while rows arrive: each row is added
 * into per-column accumulators (contiguous, so the compiler vectorises it) and
 * a block row is folded horizontally only once every fy rows. Alpha is
 * premultiplied before anything is averaged, so transparent pixels never
 * bleed their (often black) colour into visible ones.
 *
 * Stage 2 reduces the block-averaged rows to the exact size with a separable
 * kernel. The horizontal pass runs as each block row completes; the vertical
 * pass keeps only as many filtered rows as its widest kernel needs, in a
 * ring. Memory is therefore O(width) for the source plus O(output).
 *
 * The block factor leaves a residual reduction of about three for the
 * kernel, so the kernel still does the antialiasing between block centres.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Larger blocks would overflow the 32-bit premultiplied column sums. */
#define IC_MAX_BLOCK 256
/* Residual reduction left to the kernel after block averaging: the block
 * factor is the reduction over this, rounded, so the kernel reduces by
 * 2...4 (or by less than 4.5 with no blocks). Measured against an exact area
 * average of the full image at 256 px: with 2.0, full-frame decodes (HEIC)
 * scored 34.6 and 35.0 dB, whole blocks landing across output pixels; 3.0
 * gives 35.9 and leaves the JPEG photos at 35 dB or more (docs/BENCHMARKS.md,
 * "Formats"). */
#define IC_KERNEL_RESIDUAL 3.0

typedef struct ic_taps {
  int *start;
  int *count;
  float *weights; /* count rows of stride max_count */
  int max_count;
  int first_needed;
  int end_needed; /* one past the last input index any output needs */
} ic_taps;

struct ic_resizer {
  uint32_t in_width, in_height, out_width, out_height;
  int channels;
  /* Horizontal weights of output pixels 2p and 2p + 1 side by side, 8 floats per tap
   * (max_count taps per pair), for the AVX2 filter; NULL when the CPU has no AVX2/FMA. */
  float *pair_weights;
  int block_x, block_y;
  uint32_t mid_width, mid_height;
  ic_taps taps_x, taps_y;
  uint32_t column_lo, column_hi; /* input columns that feed needed output */
  uint32_t *column_sums;
  int rows_in_block;
  uint32_t next_in_row;
  float *mid_row;
  float *ring;
  int ring_capacity;
  float *vertical_sum;
  uint32_t next_out_row;
  uint8_t *out;
};

/* What taps_build allocates for out_n outputs of max_count taps at most (its scratch too). */
static size_t taps_bytes(int max_count, uint32_t out_n) {
  return (size_t)out_n * (2 * sizeof(int) + (size_t)max_count * sizeof(float)) +
         2 * sizeof(double) * (size_t)max_count;
}

static double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return sin(x) / x;
}

static double filter_support(ic_filter filter) {
  switch (filter) {
  case IC_FILTER_CATMULL_ROM: return 2.0;
  case IC_FILTER_AREA: return 1.0;
  case IC_FILTER_LANCZOS3:
  case IC_FILTER_LANCZOS3_AREA:
  default: return 3.0;
  }
}

/* Lanczos-3's share of IC_FILTER_LANCZOS3_AREA, the rest an exact area average. Measured
 * at 256 px (docs/BENCHMARKS.md, "Resampling against vipsthumbnail"): 0.60 / 0.65 / 0.70
 * score 47.3 / 48.0 / 48.7 dB mean against a Lanczos-3 reference on the corpus photos (vips
 * 47.1), 36.9 / 36.5 / 35.9 dB worst against an exact area average (the floor is 35) and
 * p99 4.3 / 4.6 / 4.9 CIEDE2000 worst on the profiled images (the floor is 5), all before
 * scaled JPEG decodes stopped being shifted (which raised the first figure to 48.8 at 0.65).
 * 0.65 leaves room on all three. */
#define IC_LANCZOS3_SHARE 0.65

static double filter_weight(ic_filter filter, double x) {
  double ax = fabs(x);
  switch (filter) {
  case IC_FILTER_CATMULL_ROM:
    if (ax < 1.0) return 1.5 * ax * ax * ax - 2.5 * ax * ax + 1.0;
    if (ax < 2.0) return -0.5 * ax * ax * ax + 2.5 * ax * ax - 4.0 * ax + 2.0;
    return 0.0;
  case IC_FILTER_AREA: /* used only when enlarging: linear interpolation */
    return ax < 1.0 ? 1.0 - ax : 0.0;
  case IC_FILTER_LANCZOS3_AREA: /* blended in taps_build; not a kernel of its own */
  case IC_FILTER_LANCZOS3:
  default:
    return ax < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0;
  }
}

static void taps_free(ic_taps *taps) {
  free(taps->start);
  free(taps->count);
  free(taps->weights);
  memset(taps, 0, sizeof(*taps));
}

/* How much of input pixel k the output span of width scale centred on center covers. */
static double coverage(int k, double center, double scale) {
  double a = center - scale / 2.0, b = center + scale / 2.0;
  double l = k > a ? k : a, r = (k + 1) < b ? (k + 1) : b;
  return r > l ? r - l : 0.0;
}

/* How far from an output's centre its kernel reaches, in input pixels. */
static double taps_support(int out_n, double length, ic_filter filter) {
  double scale = length / out_n;
  if (filter == IC_FILTER_AREA && scale > 1.0) return scale / 2.0 + 1.0;
  return filter_support(filter) * (scale > 1.0 ? scale : 1.0);
}

/* The most input pixels one output takes: the stride of taps_build's weights. */
static int taps_max_count(int out_n, double length, int in_n, ic_filter filter) {
  int max_count = (int)ceil(2.0 * taps_support(out_n, length, filter)) + 2;
  if (max_count > in_n) max_count = in_n;
  return max_count < 1 ? 1 : max_count;
}

/*
 * Builds, for each of out_n outputs, the input indices and normalised weights
 * that map the input span [lo, lo + length) onto it.
 */
static int taps_build(ic_taps *taps, int out_n, double lo, double length,
                      int in_n, ic_filter filter) {
  double scale = length / out_n;
  double stretch = scale > 1.0 ? scale : 1.0;
  int area = filter == IC_FILTER_AREA && scale > 1.0;
  int blend = filter == IC_FILTER_LANCZOS3_AREA;
  double support = taps_support(out_n, length, filter);
  int max_count = taps_max_count(out_n, length, in_n, filter);
  taps->max_count = max_count;
  taps->start = malloc(sizeof(int) * (size_t)out_n);
  taps->count = malloc(sizeof(int) * (size_t)out_n);
  taps->weights = calloc((size_t)out_n * (size_t)max_count, sizeof(float));
  /* Each tap's weight, and with blend its Lanczos-3 weight after it (max_count apart). */
  double *scratch = malloc(sizeof(double) * 2 * (size_t)max_count);
  double *lanczos = scratch + max_count;
  if (!taps->start || !taps->count || !taps->weights || !scratch) {
    free(scratch);
    return 0;
  }
  taps->first_needed = in_n;
  taps->end_needed = 0;
  for (int i = 0; i < out_n; i++) {
    double center = lo + (i + 0.5) * scale;
    int first = (int)floor(center - support);
    int last = (int)ceil(center + support);
    if (first < 0) first = 0;
    if (last > in_n - 1) last = in_n - 1;
    if (last - first + 1 > max_count) {
      /* Window wider than planned (rounding): keep it centred. */
      int excess = last - first + 1 - max_count;
      first += excess / 2;
      last = first + max_count - 1;
    }
    double sum = 0.0;
    int n = 0;
    for (int k = first; k <= last; k++, n++) {
      double w;
      if (area || (blend && scale > 1.0)) {
        w = coverage(k, center, scale);
      } else {
        w = filter_weight(blend ? IC_FILTER_AREA : filter, (k + 0.5 - center) / stretch);
      }
      scratch[n] = w;
      sum += w;
      if (blend) lanczos[n] = filter_weight(IC_FILTER_LANCZOS3, (k + 0.5 - center) / stretch);
    }
    if (blend && sum > 0.0) {
      /* Each kernel normalised on its own, then mixed, so the mix sums to one too. */
      double lanczos_sum = 0.0;
      for (int j = 0; j < n; j++) lanczos_sum += lanczos[j];
      if (lanczos_sum != 0.0) {
        for (int j = 0; j < n; j++)
          scratch[j] = IC_LANCZOS3_SHARE * lanczos[j] / lanczos_sum +
                       (1.0 - IC_LANCZOS3_SHARE) * scratch[j] / sum;
        sum = 1.0;
      }
    }
    /* Drop zero weights at both ends so the loops stay short. */
    int begin = 0, end = n;
    while (begin < end && scratch[begin] == 0.0) begin++;
    while (end > begin && scratch[end - 1] == 0.0) end--;
    if (begin == end || sum == 0.0) {
      /* Degenerate (tiny span): take the nearest sample. */
      int nearest = (int)floor(center);
      if (nearest < 0) nearest = 0;
      if (nearest > in_n - 1) nearest = in_n - 1;
      taps->start[i] = nearest;
      taps->count[i] = 1;
      taps->weights[(size_t)i * max_count] = 1.0f;
    } else {
      taps->start[i] = first + begin;
      taps->count[i] = end - begin;
      for (int k = begin; k < end; k++)
        taps->weights[(size_t)i * max_count + (k - begin)] =
            (float)(scratch[k] / sum);
    }
    if (taps->start[i] < taps->first_needed) taps->first_needed = taps->start[i];
    if (taps->start[i] + taps->count[i] > taps->end_needed)
      taps->end_needed = taps->start[i] + taps->count[i];
  }
  free(scratch);
  return 1;
}

static int block_factor(double crop, uint32_t out) {
  double f = floor(crop / out / IC_KERNEL_RESIDUAL + 0.5);
  if (f < 1.0) return 1;
  if (f > IC_MAX_BLOCK) return IC_MAX_BLOCK;
  return (int)f;
}

/* The sizes a resampler's buffers follow from, worked out before anything is allocated. */
typedef struct resizer_layout {
  int block_x, block_y;
  uint32_t mid_width, mid_height;
  int taps_x, taps_y; /* max_count of each axis */
  int paired;         /* whether the AVX2 filter's paired weights are built */
} resizer_layout;

static resizer_layout layout_of(uint32_t in_width, uint32_t in_height, double crop_width,
                                double crop_height, uint32_t out_width, uint32_t out_height,
                                ic_filter filter) {
  resizer_layout l;
  l.block_x = block_factor(crop_width, out_width);
  l.block_y = block_factor(crop_height, out_height);
  l.mid_width = (in_width + l.block_x - 1) / l.block_x;
  l.mid_height = (in_height + l.block_y - 1) / l.block_y;
  l.taps_x = taps_max_count((int)out_width, crop_width / l.block_x, (int)l.mid_width, filter);
  l.taps_y = taps_max_count((int)out_height, crop_height / l.block_y, (int)l.mid_height, filter);
  l.paired = 0;
#if defined(__x86_64__)
  l.paired = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && out_width >= 2;
#endif
  return l;
}

/* Bytes of the paired weights, of the row padded for the vector filters, and of the ring. */
static size_t pair_bytes(const resizer_layout *l, uint32_t out_width) {
  return (size_t)(out_width / 2) * (size_t)l->taps_x * 8 * sizeof(float);
}

static size_t mid_row_floats(const resizer_layout *l, int channels) {
  /* Padding: the vector filters read a lane past the last RGB pixel, and the paired one up
   * to max_count pixels past the shorter pixel's taps (with zero weights; the padding stays
   * zero, so no Inf or NaN is ever multiplied by them). */
  return ((size_t)l->mid_width + (size_t)l->taps_x) * (size_t)channels + 1;
}

size_t ic_resizer_memory(uint32_t in_width, uint32_t in_height, int channels,
                         double crop_width, double crop_height, uint32_t out_width,
                         uint32_t out_height, ic_filter filter) {
  if (in_width == 0 || in_height == 0 || out_width == 0 || out_height == 0) return 0;
  resizer_layout l =
      layout_of(in_width, in_height, crop_width, crop_height, out_width, out_height, filter);
  size_t out_row = (size_t)out_width * (size_t)channels;
  return sizeof(ic_resizer) + taps_bytes(l.taps_x, out_width) + taps_bytes(l.taps_y, out_height) +
         (l.paired ? pair_bytes(&l, out_width) : 0) +
         (size_t)in_width * (size_t)channels * sizeof(uint32_t) +
         mid_row_floats(&l, channels) * sizeof(float) +
         sizeof(float) * out_row * ((size_t)l.taps_y + 1) + out_row * out_height;
}

ic_resizer *ic_resizer_create(uint32_t in_width, uint32_t in_height,
                              int channels, double crop_x, double crop_y,
                              double crop_width, double crop_height,
                              uint32_t out_width, uint32_t out_height,
                              ic_filter filter) {
  if (in_width == 0 || in_height == 0 || out_width == 0 || out_height == 0 ||
      (channels != 3 && channels != 4))
    return NULL;
  ic_resizer *r = calloc(1, sizeof(*r));
  if (!r) return NULL;
  resizer_layout l =
      layout_of(in_width, in_height, crop_width, crop_height, out_width, out_height, filter);
  r->in_width = in_width;
  r->in_height = in_height;
  r->out_width = out_width;
  r->out_height = out_height;
  r->channels = channels;
  r->block_x = l.block_x;
  r->block_y = l.block_y;
  r->mid_width = l.mid_width;
  r->mid_height = l.mid_height;
  if (!taps_build(&r->taps_x, (int)out_width, crop_x / r->block_x,
                  crop_width / r->block_x, (int)r->mid_width, filter) ||
      !taps_build(&r->taps_y, (int)out_height, crop_y / r->block_y,
                  crop_height / r->block_y, (int)r->mid_height, filter)) {
    ic_resizer_destroy(r);
    return NULL;
  }
  r->column_lo = (uint32_t)r->taps_x.first_needed * r->block_x;
  r->column_hi = (uint32_t)r->taps_x.end_needed * r->block_x;
  if (r->column_hi > in_width) r->column_hi = in_width;
  r->ring_capacity = r->taps_y.max_count;
  if (l.paired) {
    int m = r->taps_x.max_count;
    r->pair_weights = calloc(pair_bytes(&l, out_width), 1);
    if (r->pair_weights) {
      for (uint32_t p = 0; p < out_width / 2; p++)
        for (int half = 0; half < 2; half++) {
          const float *w = r->taps_x.weights + (size_t)(2 * p + half) * m;
          for (int k = 0; k < r->taps_x.count[2 * p + half]; k++)
            for (int lane = 0; lane < 4; lane++)
              r->pair_weights[((size_t)p * m + k) * 8 + half * 4 + lane] = w[k];
        }
    }
  }
  size_t out_row = (size_t)out_width * channels;
  r->column_sums = calloc((size_t)in_width * channels, sizeof(uint32_t));
  r->mid_row = calloc(mid_row_floats(&l, channels), sizeof(float));
  r->ring = malloc(sizeof(float) * out_row * (size_t)r->ring_capacity);
  r->vertical_sum = malloc(sizeof(float) * out_row);
  r->out = malloc(out_row * out_height);
  if (!r->column_sums || !r->mid_row || !r->ring || !r->vertical_sum ||
      !r->out) {
    ic_resizer_destroy(r);
    return NULL;
  }
  return r;
}

void ic_resizer_destroy(ic_resizer *r) {
  if (!r) return;
  taps_free(&r->taps_x);
  taps_free(&r->taps_y);
  free(r->column_sums);
  free(r->mid_row);
  free(r->pair_weights);
  free(r->ring);
  free(r->vertical_sum);
  free(r->out);
  free(r);
}

static void accumulate_row(ic_resizer *r, const uint8_t *row) {
  uint32_t *sums = r->column_sums;
  if (r->channels == 3) {
    size_t lo = (size_t)r->column_lo * 3, hi = (size_t)r->column_hi * 3;
    for (size_t i = lo; i < hi; i++) sums[i] += row[i];
    return;
  }
  /* Premultiply: colour * alpha, and alpha * 255 so all share one scale. */
  for (size_t x = r->column_lo; x < r->column_hi; x++) {
    uint32_t a = row[x * 4 + 3];
    sums[x * 4 + 0] += row[x * 4 + 0] * a;
    sums[x * 4 + 1] += row[x * 4 + 1] * a;
    sums[x * 4 + 2] += row[x * 4 + 2] * a;
    sums[x * 4 + 3] += a * 255u;
  }
}

/* Folds the column sums of one block row into a row of block averages. */
static void fold_block_row(ic_resizer *r, int rows) {
  const int ch = r->channels;
  const uint32_t *sums = r->column_sums;
  double unit = ch == 4 ? 255.0 : 1.0;
  /* Every block but the last one of a row is full width. */
  double full_scale = 1.0 / ((double)r->block_x * rows * unit);
  for (int j = r->taps_x.first_needed; j < r->taps_x.end_needed; j++) {
    uint32_t x0 = (uint32_t)j * r->block_x;
    uint32_t x1 = x0 + r->block_x;
    double scale = full_scale;
    if (x1 > r->in_width) {
      x1 = r->in_width;
      scale = 1.0 / ((double)(x1 - x0) * rows * unit);
    }
    for (int c = 0; c < ch; c++) {
      uint64_t total = 0;
      for (uint32_t x = x0; x < x1; x++) total += sums[(size_t)x * ch + c];
      r->mid_row[(size_t)j * ch + c] = (float)(total * scale);
    }
  }
  memset(r->column_sums + (size_t)r->column_lo * ch, 0,
         sizeof(uint32_t) * (r->column_hi - r->column_lo) * ch);
}

/* Output pixel i alone, with SSE where there is SSE. */
static void filter_pixel(ic_resizer *r, uint32_t i, float *dst) {
  const int ch = r->channels;
  const ic_taps *t = &r->taps_x;
  const float *w = t->weights + (size_t)i * t->max_count;
  const float *src = r->mid_row + (size_t)t->start[i] * ch;
  int n = t->count[i];
#if defined(__SSE2__)
  /* One pixel per tap in the four lanes: for RGB the fourth lane reads the next pixel's red
   * (mid_row is padded) and is thrown away. Two sums: one chain of adds would wait on each
   * add's latency. */
  __m128 even = _mm_setzero_ps(), odd = _mm_setzero_ps();
  int k = 0;
  for (; k + 1 < n; k += 2) {
    even = _mm_add_ps(even, _mm_mul_ps(_mm_set1_ps(w[k]), _mm_loadu_ps(src + k * ch)));
    odd = _mm_add_ps(odd, _mm_mul_ps(_mm_set1_ps(w[k + 1]), _mm_loadu_ps(src + (k + 1) * ch)));
  }
  if (k < n)
    even = _mm_add_ps(even, _mm_mul_ps(_mm_set1_ps(w[k]), _mm_loadu_ps(src + k * ch)));
  __m128 sum = _mm_add_ps(even, odd);
  if (ch == 4 || i + 1 < r->out_width) {
    /* For RGB the fourth lane lands on the next pixel's red, written after this one. */
    _mm_storeu_ps(dst + (size_t)i * ch, sum);
  } else {
    float *last = dst + (size_t)i * 3;
    _mm_store_ss(last, sum);
    _mm_store_ss(last + 1, _mm_shuffle_ps(sum, sum, _MM_SHUFFLE(1, 1, 1, 1)));
    _mm_store_ss(last + 2, _mm_shuffle_ps(sum, sum, _MM_SHUFFLE(2, 2, 2, 2)));
  }
#else
  float s4[4] = {0, 0, 0, 0};
  for (int k = 0; k < n; k++)
    for (int c = 0; c < ch; c++) s4[c] += w[k] * src[k * ch + c];
  for (int c = 0; c < ch; c++) dst[(size_t)i * ch + c] = s4[c];
#endif
}

#if defined(__x86_64__)
/* Two output pixels per step in one 256-bit register, fused multiply-adds, weights laid out
 * side by side beforehand. Measured (hyperfine, 100 JPEGs of 0.3 MP to 256 px, 11 taps a
 * pixel): the whole run 8% faster than one pixel per SSE step, which was itself 10% faster
 * than the scalar three-sum loop it replaced. */
__attribute__((target("avx2,fma"))) static void filter_pairs_avx2(ic_resizer *r, float *dst) {
  const int ch = r->channels;
  const ic_taps *t = &r->taps_x;
  const int m = t->max_count;
  const uint32_t pairs = r->out_width / 2;
  for (uint32_t p = 0; p < pairs; p++) {
    uint32_t i = 2 * p;
    const float *a = r->mid_row + (size_t)t->start[i] * ch;
    const float *b = r->mid_row + (size_t)t->start[i + 1] * ch;
    const float *w = r->pair_weights + (size_t)p * m * 8;
    int n = t->count[i] > t->count[i + 1] ? t->count[i] : t->count[i + 1];
    __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
    int k = 0;
    for (; k + 1 < n; k += 2) {
      __m256 s0 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(a + k * ch)),
                                       _mm_loadu_ps(b + k * ch), 1);
      __m256 s1 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(a + (k + 1) * ch)),
                                       _mm_loadu_ps(b + (k + 1) * ch), 1);
      even = _mm256_fmadd_ps(_mm256_loadu_ps(w + k * 8), s0, even);
      odd = _mm256_fmadd_ps(_mm256_loadu_ps(w + (k + 1) * 8), s1, odd);
    }
    if (k < n) {
      __m256 s0 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(a + k * ch)),
                                       _mm_loadu_ps(b + k * ch), 1);
      even = _mm256_fmadd_ps(_mm256_loadu_ps(w + k * 8), s0, even);
    }
    __m256 sum = _mm256_add_ps(even, odd);
    _mm_storeu_ps(dst + (size_t)i * ch, _mm256_castps256_ps128(sum));
    __m128 high = _mm256_extractf128_ps(sum, 1);
    if (ch == 4 || i + 2 < r->out_width) {
      _mm_storeu_ps(dst + (size_t)(i + 1) * ch, high);
    } else {
      float *last = dst + (size_t)(i + 1) * 3;
      _mm_store_ss(last, high);
      _mm_store_ss(last + 1, _mm_shuffle_ps(high, high, _MM_SHUFFLE(1, 1, 1, 1)));
      _mm_store_ss(last + 2, _mm_shuffle_ps(high, high, _MM_SHUFFLE(2, 2, 2, 2)));
    }
  }
  if (r->out_width % 2) filter_pixel(r, r->out_width - 1, dst);
}
#endif

static void filter_horizontally(ic_resizer *r, float *dst) {
#if defined(__x86_64__)
  if (r->pair_weights) {
    filter_pairs_avx2(r, dst);
    return;
  }
#endif
  for (uint32_t i = 0; i < r->out_width; i++) filter_pixel(r, i, dst);
}

static inline uint8_t to_byte(float v) {
  if (!(v > 0.0f)) return 0; /* also catches NaN */
  if (v >= 255.0f) return 255;
  return (uint8_t)(v + 0.5f);
}

static void emit_output_row(ic_resizer *r) {
  const uint32_t j = r->next_out_row;
  const int ch = r->channels;
  const size_t n = (size_t)r->out_width * ch;
  const ic_taps *t = &r->taps_y;
  const float *w = t->weights + (size_t)j * t->max_count;
  float *sum = r->vertical_sum;
  memset(sum, 0, sizeof(float) * n);
  for (int k = 0; k < t->count[j]; k++) {
    const float *src =
        r->ring + (size_t)((t->start[j] + k) % r->ring_capacity) * n;
    const float wk = w[k];
    for (size_t i = 0; i < n; i++) sum[i] += wk * src[i];
  }
  uint8_t *dst = r->out + (size_t)j * n;
  if (ch == 3) {
    for (size_t i = 0; i < n; i++) dst[i] = to_byte(sum[i]);
  } else {
    for (size_t x = 0; x < r->out_width; x++) {
      float a = sum[x * 4 + 3];
      if (a < 0.5f) {
        memset(dst + x * 4, 0, 4);
        continue;
      }
      /* Kernel overshoot can leave colour above alpha; clamp before
       * dividing so highlights do not wrap. */
      float unpremultiply = 255.0f / a;
      for (int c = 0; c < 3; c++) {
        float v = sum[x * 4 + c];
        if (v > a) v = a;
        dst[x * 4 + c] = to_byte(v * unpremultiply);
      }
      dst[x * 4 + 3] = to_byte(a);
    }
  }
  r->next_out_row++;
}

/* Without blocks a row converts straight to floats (premultiplied). */
static void convert_row(ic_resizer *r, const uint8_t *row) {
  float *mid = r->mid_row;
  if (r->channels == 3) {
    size_t lo = (size_t)r->column_lo * 3, hi = (size_t)r->column_hi * 3;
    for (size_t i = lo; i < hi; i++) mid[i] = row[i];
    return;
  }
  for (size_t x = r->column_lo; x < r->column_hi; x++) {
    float a = row[x * 4 + 3] * (1.0f / 255.0f);
    mid[x * 4 + 0] = row[x * 4 + 0] * a;
    mid[x * 4 + 1] = row[x * 4 + 1] * a;
    mid[x * 4 + 2] = row[x * 4 + 2] * a;
    mid[x * 4 + 3] = row[x * 4 + 3];
  }
}

void ic_resizer_push_row(ic_resizer *r, const uint8_t *row) {
  if (r->next_in_row >= r->in_height) return;
  uint32_t y = r->next_in_row++;
  int mid_y = (int)(y / r->block_y);
  int needed = mid_y >= r->taps_y.first_needed && mid_y < r->taps_y.end_needed;
  if (r->block_x == 1 && r->block_y == 1) {
    if (!needed) return;
    convert_row(r, row);
  } else {
    if (needed) accumulate_row(r, row);
    r->rows_in_block++;
    if (r->rows_in_block < r->block_y && r->next_in_row < r->in_height) return;
    int rows = r->rows_in_block;
    r->rows_in_block = 0;
    if (!needed) return;
    fold_block_row(r, rows);
  }
  size_t n = (size_t)r->out_width * r->channels;
  filter_horizontally(r, r->ring + (size_t)(mid_y % r->ring_capacity) * n);
  while (r->next_out_row < r->out_height) {
    uint32_t j = r->next_out_row;
    if (r->taps_y.start[j] + r->taps_y.count[j] - 1 > mid_y) break;
    emit_output_row(r);
  }
}

uint8_t *ic_resizer_finish(ic_resizer *r) {
  if (r->next_out_row < r->out_height) return NULL;
  uint8_t *out = r->out;
  r->out = NULL;
  return out;
}
