/*
 * Colour: a source's profile (or its PNG/nclx description) into a transform to sRGB, and the
 * cache that keeps transforms by profile.
 *
 * Transforms run on the small result after resampling (thumbnail.c), so their cost does not
 * grow with the source. The exception is CMYK, converted on the decoder's rows: ink mixes are
 * far from linear, and averaging ink values before converting gives wrong colours at edges.
 *
 * Every profile is a hostile input: its size is capped where the decoder reads it, lcms2's
 * allocations go through our allocator (at most IC_COLOUR_BUILD_MAX bytes for one transform,
 * IC_COLOUR_TOTAL_MAX for all of lcms2), and anything lcms2 cannot open or link is ignored:
 * the image is taken as sRGB and the outcome says why.
 *
 * The cache keys on the profile's bytes (compared in full, not only their hash: a profile
 * crafted to collide must not change another source's colours) and the pixel layout. Its
 * transforms are built with cmsFLAGS_NOCACHE, which lcms2 requires for use from several
 * threads at once.
 */
#include "internal.h"

#include <lcms2.h>
#include <lcms2_plugin.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* lcms2 memory for one transform while it is built: a CMYK press profile's link is about
 * 1 MiB (measured on the corpus' 940 KiB profile); an 8-bit 4-D table is at most 17^4 x 3. */
#define IC_COLOUR_BUILD_MAX (32u << 20)
/* Everything lcms2 may hold at once, cache included. */
#define IC_COLOUR_TOTAL_MAX (128u << 20)
/* Transforms the cache keeps, and the lcms2 bytes they may hold (least recently used go). */
#define IC_COLOUR_CACHE_ENTRIES 32
#define IC_COLOUR_CACHE_BYTES (48u << 20)

/* Levels of bend (see nonlinearity) past which a transform runs before resampling. Measured
 * on the corpus' profiles: sRGB 0-1, Display P3 and DCI-P3 7-11, Adobe RGB 9, ProPhoto 19,
 * a scanner profile 17; a test profile with steps and an XYB profile jump by 169 and 216
 * levels between neighbours 16 apart. */
#define IC_COLOUR_MAX_BEND 24

/* Rendering intent: relative colorimetric, what browsers use for tagged images. Black-point
 * compensation stays off: measured in docs/BENCHMARKS.md, "Colour". */
#define IC_COLOUR_INTENT INTENT_RELATIVE_COLORIMETRIC
#define IC_COLOUR_FLAGS (cmsFLAGS_NOCACHE)

/* sRGB's white point and primaries, as CIE xy. */
static const double srgb_primaries[8] = {0.3127, 0.3290, 0.64, 0.33, 0.30, 0.60, 0.15, 0.06};

/* ---- lcms2's allocator: every block carries its size, so the totals stay exact. ---- */

static _Atomic uint64_t lcms_bytes;
/* Bytes the transform this thread is building has taken, or NULL outside a build. */
static __thread uint64_t *build_bytes;

typedef union block_header {
  size_t size;
  max_align_t align;
} block_header;

static void *counted_malloc(cmsContext context, cmsUInt32Number size) {
  (void)context;
  if (build_bytes && *build_bytes + size > IC_COLOUR_BUILD_MAX) return NULL;
  /* Reserved before allocating: builds run on several threads at once. */
  uint64_t held = atomic_load(&lcms_bytes);
  do {
    if (held + size > IC_COLOUR_TOTAL_MAX) return NULL;
  } while (!atomic_compare_exchange_weak(&lcms_bytes, &held, held + size));
  block_header *block = malloc(sizeof(block_header) + size);
  if (!block) {
    atomic_fetch_sub(&lcms_bytes, size);
    return NULL;
  }
  block->size = size;
  if (build_bytes) *build_bytes += size;
  return block + 1;
}

static void counted_free(cmsContext context, void *pointer) {
  (void)context;
  if (!pointer) return;
  block_header *block = (block_header *)pointer - 1;
  atomic_fetch_sub(&lcms_bytes, block->size);
  if (build_bytes) *build_bytes -= block->size < *build_bytes ? block->size : *build_bytes;
  free(block);
}

static void *counted_realloc(cmsContext context, void *pointer, cmsUInt32Number size) {
  void *grown = counted_malloc(context, size);
  if (!grown || !pointer) return grown;
  block_header *block = (block_header *)pointer - 1;
  memcpy(grown, pointer, block->size < size ? block->size : size);
  counted_free(context, pointer);
  return grown;
}

static void silent_errors(cmsContext context, cmsUInt32Number code, const char *text) {
  (void)context;
  (void)code;
  (void)text;
}

static cmsPluginMemHandler memory_plugin = {
    .base = {.Magic = cmsPluginMagicNumber,
             .ExpectedVersion = 2000,
             .Type = cmsPluginMemHandlerSig,
             .Next = NULL},
    .MallocPtr = counted_malloc,
    .FreePtr = counted_free,
    .ReallocPtr = counted_realloc,
};

static pthread_once_t lcms_once = PTHREAD_ONCE_INIT;

static void lcms_setup(void) {
  cmsPlugin(&memory_plugin);
  cmsSetLogErrorHandler(silent_errors);
}

/* ---- the cache ---- */

typedef enum layout {
  LAYOUT_RGB = 3,
  LAYOUT_RGBA = 4,
  LAYOUT_CMYK = 5,
  LAYOUT_CMYK_INVERTED = 6
} layout;

struct ic_colour_transform {
  uint64_t hash;
  uint8_t *key;
  size_t key_size;
  layout layout;
  ic_colour_space space;
  cmsHTRANSFORM transform;
  /* Grey sources: the grey level (the R of the expanded RGB) to sRGB, in one table. */
  int grey;
  uint8_t grey_table[256 * 3];
  /* Whether the transform bends too much to run after averaging (convert before resampling:
   * see ic_colour_step_begin). */
  int early;
  /* RGB sources whose transform is curves and a matrix: its tables (see separable_build), or
   * NULL to run lcms2's transform. */
  struct separable *tables;
  uint64_t bytes;
  int references;
  uint64_t last_use;
  ic_colour_transform *next;
};

/* ---- matrix-and-curve transforms as tables ----
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

/* Fixed point of the linear sums: 1.0 is 1 << 16; the encode table has 1 << 14 entries. */
#define SEPARABLE_ONE 65536
#define SEPARABLE_SHIFT 2

typedef struct separable {
  int32_t channel[3][256][3]; /* [input channel][level][output channel], the first with T(0) */
  uint8_t encode[SEPARABLE_ONE >> SEPARABLE_SHIFT];
} separable;

/* Cleared by ic_colour_set_tables on this thread only. */
static __thread int tables_disabled;

static void separable_apply(const separable *t, uint8_t *row, uint32_t width, int channels) {
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

/* Tables for source's RGB transform when they match `reference` (its 8-bit transform with
 * `layout`'s pixels), else NULL. Called with the build counter set, like build(). */
static separable *separable_build(cmsHPROFILE source, cmsHTRANSFORM reference, layout layout) {
  cmsToneCurve *linear_curve = cmsBuildGamma(NULL, 1.0);
  cmsCIExyY white = {srgb_primaries[0], srgb_primaries[1], 1.0};
  const double *p = srgb_primaries;
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
      separable_apply(t, mine, CHECKS, channels);
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

/* Whether this thread's last acquire was served from the cache (for ic_result). */
static __thread int entry_was_cached;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static ic_colour_transform *cache_head;
static uint32_t cache_entries;
static uint64_t cache_bytes, cache_clock, cache_builds, cache_hits, cache_tables;
/* The standard CMYK profile (ic_colour_set_cmyk_profile), under cache_lock. */
static uint8_t *standard_cmyk;
static size_t standard_cmyk_size;

static uint64_t fnv1a(const uint8_t *bytes, size_t size) {
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < size; i++) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

static void entry_free(ic_colour_transform *entry) {
  uint64_t *saved = build_bytes;
  build_bytes = NULL;
  if (entry->transform) cmsDeleteTransform(entry->transform);
  build_bytes = saved;
  free(entry->tables);
  free(entry->key);
  free(entry);
}

/* Drops unused entries, least recently used first, while the cache is over its bounds. */
static void evict_locked(void) {
  while (cache_entries > IC_COLOUR_CACHE_ENTRIES || cache_bytes > IC_COLOUR_CACHE_BYTES) {
    ic_colour_transform **victim = NULL;
    for (ic_colour_transform **link = &cache_head; *link; link = &(*link)->next)
      if ((*link)->references == 0 && (!victim || (*link)->last_use < (*victim)->last_use))
        victim = link;
    if (!victim) return;
    ic_colour_transform *entry = *victim;
    *victim = entry->next;
    cache_entries--;
    cache_bytes -= entry->bytes;
    entry_free(entry);
  }
}

/* ---- source descriptions to profiles ---- */

static cmsToneCurve *transfer_curve(const ic_colour_info *info) {
  if (info->gamma > 0) return cmsBuildGamma(NULL, info->gamma);
  double srgb[5] = {2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045};
  double bt709[5] = {1 / 0.45, 1 / 1.099, 0.099 / 1.099, 1 / 4.5, 0.081};
  switch (info->transfer) {
    case 8: return cmsBuildGamma(NULL, 1.0);
    case 1:
    case 6:
    case 14:
    case 15: return cmsBuildParametricToneCurve(NULL, 4, bt709);
    default: return cmsBuildParametricToneCurve(NULL, 4, srgb);
  }
}

/* A profile for a gamma/primaries description (PNG gAMA + cHRM, HEIF nclx). */
static cmsHPROFILE synthetic_profile(const ic_colour_info *info) {
  const double *p = info->has_primaries ? info->primaries : srgb_primaries;
  cmsToneCurve *curve = transfer_curve(info);
  if (!curve) return NULL;
  cmsCIExyY white = {p[0], p[1], 1.0};
  cmsHPROFILE profile = NULL;
  if (info->space == IC_SPACE_GREY) {
    profile = cmsCreateGrayProfile(&white, curve);
  } else {
    cmsCIExyYTRIPLE primaries = {{p[2], p[3], 1.0}, {p[4], p[5], 1.0}, {p[6], p[7], 1.0}};
    cmsToneCurve *curves[3] = {curve, curve, curve};
    profile = cmsCreateRGBProfile(&white, &primaries, curves);
  }
  cmsFreeToneCurve(curve);
  return profile;
}

/* Whether a description without ICC is sRGB as it stands: no chunks at all, the sRGB
 * chunk, or gamma 1/2.2 on sRGB primaries (what most PNG writers stamp, meaning sRGB). */
static int synthetic_is_srgb(const ic_colour_info *info) {
  if (info->srgb) return 1;
  int srgb_curve = info->gamma > 0 ? fabs(info->gamma - 2.2) <= 0.05
                                   : info->transfer == 0 || info->transfer == 13;
  if (!srgb_curve) return 0;
  if (!info->has_primaries) return 1;
  for (int i = 0; i < 8; i++)
    if (fabs(info->primaries[i] - srgb_primaries[i]) > 0.01) return 0;
  return 1;
}

static cmsColorSpaceSignature space_signature(ic_colour_space space) {
  switch (space) {
    case IC_SPACE_GREY: return cmsSigGrayData;
    case IC_SPACE_CMYK: return cmsSigCmykData;
    default: return cmsSigRgbData;
  }
}

/* Called at the start of every build, for tests (ic_colour_set_build_gate). */
static void (*_Atomic build_gate)(void);

void ic_colour_set_build_gate(void (*gate)(void)) { atomic_store(&build_gate, gate); }

/* Builds a transform from ICC bytes (without cache_lock: a slow build delays only the
 * decodes that need it; with this thread's build counter set). */
static ic_profile_outcome build(const uint8_t *icc, size_t size, ic_colour_space space,
                                layout layout, ic_colour_transform *entry) {
  void (*gate)(void) = atomic_load(&build_gate);
  if (gate) gate();
  /* lcms2 cannot be interrupted while it links: what it would spend is bounded first. */
  if (!ic_icc_bounded(icc, size)) return IC_PROFILE_UNLINKABLE;
  cmsHPROFILE source = cmsOpenProfileFromMem(icc, (cmsUInt32Number)size);
  if (!source) return IC_PROFILE_BROKEN;
  if (cmsGetColorSpace(source) != space_signature(space)) {
    cmsCloseProfile(source);
    return IC_PROFILE_UNLINKABLE;
  }
  cmsHPROFILE srgb = cmsCreate_sRGBProfile();
  if (!srgb) {
    cmsCloseProfile(source);
    return IC_PROFILE_UNLINKABLE;
  }
  cmsUInt32Number in_format = TYPE_RGB_8, out_format = TYPE_RGB_8, flags = IC_COLOUR_FLAGS;
  if (space == IC_SPACE_GREY) {
    in_format = TYPE_GRAY_8;
  } else if (layout == LAYOUT_RGBA) {
    in_format = out_format = TYPE_RGBA_8;
    flags |= cmsFLAGS_COPY_ALPHA;
  } else if (layout == LAYOUT_CMYK) {
    in_format = TYPE_CMYK_8;
  } else if (layout == LAYOUT_CMYK_INVERTED) {
    in_format = TYPE_CMYK_8_REV;
  }
  cmsHTRANSFORM transform =
      cmsCreateTransform(source, in_format, srgb, out_format, IC_COLOUR_INTENT, flags);
  cmsCloseProfile(srgb);
  if (transform && space == IC_SPACE_RGB && (layout == LAYOUT_RGB || layout == LAYOUT_RGBA))
    entry->tables = separable_build(source, transform, layout);
  cmsCloseProfile(source);
  if (!transform) return IC_PROFILE_UNLINKABLE;
  if (space == IC_SPACE_GREY) {
    /* 8-bit grey has 256 levels: one table replaces the transform. */
    uint8_t levels[256];
    for (int i = 0; i < 256; i++) levels[i] = (uint8_t)i;
    cmsDoTransform(transform, levels, entry->grey_table, 256);
    cmsDeleteTransform(transform);
    entry->grey = 1;
  } else {
    entry->transform = transform;
  }
  return IC_PROFILE_CONVERTED;
}

/*
 * How far the transform is from commuting with averaging, in 8-bit levels: for pairs of
 * neighbouring colours on a coarse grid, the distance between the transform of their mean
 * and the mean of their transforms. Matrix-and-curve profiles (Adobe RGB, Display P3,
 * ProPhoto) stay within a few levels; a profile with steps or folds (the corpus has one that
 * maps mid-grey to white) does not, and averaging before it gives wrong colours at edges.
 */
static int nonlinearity(const ic_colour_transform *entry) {
  /* Steps of 16 along each axis, with the other two channels at 5 levels: 1275 pairs. */
  enum { STEPS = 16, CROSS = 5, PAIRS = STEPS * CROSS * CROSS * 3 };
  static const int cross[CROSS] = {0, 64, 128, 192, 255};
  int channels = entry->layout == LAYOUT_RGBA ? 4 : 3;
  /* Three runs of PAIRS pixels: the first colours, their neighbours, their means. */
  uint8_t *pixels = calloc((size_t)3 * PAIRS, (size_t)channels);
  if (!pixels) return 0;
  int n = 0;
  for (int axis = 0; axis < 3; axis++)
    for (int step = 0; step < STEPS; step++)
      for (int u = 0; u < CROSS; u++)
        for (int v = 0; v < CROSS; v++, n++) {
          int others[2] = {cross[u], cross[v]}, k = 0;
          for (int c = 0; c < channels; c++) {
            int x = 255, y = 255;
            if (c == axis) {
              x = step * 16;
              y = step == STEPS - 1 ? 255 : x + 16;
            } else if (c < 3) {
              x = y = others[k++];
            }
            pixels[(size_t)n * channels + c] = (uint8_t)x;
            pixels[((size_t)PAIRS + n) * channels + c] = (uint8_t)y;
            pixels[((size_t)2 * PAIRS + n) * channels + c] = (uint8_t)((x + y + 1) / 2);
          }
        }
  if (entry->grey) {
    for (int i = 0; i < 3 * PAIRS; i++) {
      uint8_t *p = pixels + (size_t)i * channels;
      memcpy(p, entry->grey_table + (size_t)p[0] * 3, 3);
    }
  } else {
    cmsDoTransform(entry->transform, pixels, pixels, 3 * PAIRS);
  }
  /* Clipping at the gamut's edge bends every wide-gamut transform, harmlessly: only pairs
   * that stay inside count for the bend. A step is measured by the jump between neighbours. */
  int worst = 0, jump = 0;
  for (int i = 0; i < PAIRS; i++) {
    int clipped = 0;
    for (int c = 0; c < 3; c++)
      for (int set = 0; set < 3; set++) {
        int v = pixels[((size_t)set * PAIRS + i) * channels + c];
        if (v < 2 || v > 253) clipped = 1;
      }
    for (int c = 0; c < 3; c++) {
      int ta = pixels[(size_t)i * channels + c];
      int tb = pixels[((size_t)PAIRS + i) * channels + c];
      int tm = pixels[((size_t)2 * PAIRS + i) * channels + c];
      if (abs(tb - ta) > jump) jump = abs(tb - ta);
      if (!clipped && abs(2 * tm - ta - tb) / 2 > worst) worst = abs(2 * tm - ta - tb) / 2;
    }
  }
  /* A neighbour 16 levels away landing more than half the range away is a step. */
  if (jump > 128) worst = 255;
  free(pixels);
  return worst;
}

/* ICC bytes for a synthetic description (malloc'd), or NULL. */
static uint8_t *synthetic_icc(const ic_colour_info *info, size_t *size) {
  cmsHPROFILE profile = synthetic_profile(info);
  if (!profile) return NULL;
  cmsUInt32Number length = 0;
  uint8_t *bytes = NULL;
  if (cmsSaveProfileToMem(profile, NULL, &length) && length > 0 &&
      (bytes = malloc(length)) && !cmsSaveProfileToMem(profile, bytes, &length)) {
    free(bytes);
    bytes = NULL;
  }
  cmsCloseProfile(profile);
  *size = length;
  return bytes;
}

/* A cached entry for the key, referenced and marked used; NULL when there is none. */
static ic_colour_transform *find_locked(uint64_t hash, const uint8_t *key, size_t key_size,
                                        layout layout, ic_colour_space space) {
  for (ic_colour_transform *entry = cache_head; entry; entry = entry->next) {
    if (entry->hash == hash && entry->layout == layout && entry->space == space &&
        entry->key_size == key_size && memcmp(entry->key, key, key_size) == 0) {
      entry->references++;
      entry->last_use = ++cache_clock;
      cache_hits++;
      return entry;
    }
  }
  return NULL;
}

/*
 * The entry for a profile (icc, or the synthetic description when icc is NULL) and layout,
 * from the cache or built now; NULL with *outcome saying why when there is none.
 */
static ic_colour_transform *acquire(const uint8_t *icc, size_t icc_size,
                                    const ic_colour_info *info, layout layout,
                                    ic_profile_outcome *outcome) {
  pthread_once(&lcms_once, lcms_setup);
  entry_was_cached = 0;
  /* The key: 'I' and the ICC bytes, or 'S' and the synthetic fields in a fixed form. */
  uint8_t synthetic[2 + 10 * sizeof(double)];
  const uint8_t *key = icc;
  size_t key_size = icc_size;
  if (!icc) {
    memset(synthetic, 0, sizeof(synthetic));
    synthetic[0] = 'S';
    synthetic[1] = (uint8_t)info->space;
    double fields[10] = {info->gamma, (double)info->transfer};
    if (info->has_primaries) memcpy(fields + 2, info->primaries, sizeof(info->primaries));
    memcpy(synthetic + 2, fields, sizeof(fields));
    key = synthetic;
    key_size = sizeof(synthetic);
  }
  uint64_t hash = fnv1a(key, key_size) ^ ((uint64_t)layout << 56) ^ (uint64_t)info->space;
  pthread_mutex_lock(&cache_lock);
  ic_colour_transform *cached = find_locked(hash, key, key_size, layout, info->space);
  pthread_mutex_unlock(&cache_lock);
  if (cached) {
    *outcome = IC_PROFILE_CONVERTED;
    entry_was_cached = 1;
    return cached;
  }
  /* Built outside the lock: a first-time build (lcms2 links a long profile for seconds and
   * cannot be interrupted) must not hold up decodes whose transforms are cached. Two threads
   * may build the same profile at once; the second to finish uses the first's. */
  ic_colour_transform *entry = calloc(1, sizeof(*entry));
  uint8_t *copy = entry ? malloc(key_size) : NULL;
  ic_profile_outcome built = IC_PROFILE_UNLINKABLE;
  if (copy) {
    memcpy(copy, key, key_size);
    uint64_t bytes = 0;
    build_bytes = &bytes;
    if (icc) {
      built = build(icc, icc_size, info->space, layout, entry);
    } else {
      size_t size = 0;
      uint8_t *made = synthetic_icc(info, &size);
      if (made) built = build(made, size, info->space, layout, entry);
      free(made);
    }
    build_bytes = NULL;
    entry->bytes = bytes + (entry->tables ? sizeof(separable) : 0);
  }
  if (built != IC_PROFILE_CONVERTED) {
    if (entry) free(entry->tables);
    free(copy);
    free(entry);
    *outcome = built;
    return NULL;
  }
  /* nonlinearity reads the row layout from the entry. */
  entry->layout = layout;
  if (layout == LAYOUT_RGB || layout == LAYOUT_RGBA) {
    entry->early = nonlinearity(entry) > IC_COLOUR_MAX_BEND;
  }
  pthread_mutex_lock(&cache_lock);
  cached = find_locked(hash, key, key_size, layout, info->space);
  if (cached) {
    pthread_mutex_unlock(&cache_lock);
    entry->key = copy;
    entry_free(entry);
    *outcome = IC_PROFILE_CONVERTED;
    entry_was_cached = 1;
    return cached;
  }
  cache_builds++;
  if (entry->tables) cache_tables++;
  entry->hash = hash;
  entry->key = copy;
  entry->key_size = key_size;
  entry->layout = layout;
  entry->space = info->space;
  entry->references = 1;
  entry->last_use = ++cache_clock;
  entry->next = cache_head;
  cache_head = entry;
  cache_entries++;
  cache_bytes += entry->bytes;
  evict_locked();
  pthread_mutex_unlock(&cache_lock);
  *outcome = IC_PROFILE_CONVERTED;
  return entry;
}

void ic_colour_info_clear(ic_colour_info *info) {
  free(info->icc);
  info->icc = NULL;
  info->icc_size = 0;
}

ic_colour_transform *ic_colour_acquire(const ic_colour_info *info, int channels,
                                       ic_profile_outcome *outcome) {
  *outcome = info->damage;
  if (info->space == IC_SPACE_CMYK) return NULL;
  if (!info->icc && synthetic_is_srgb(info)) return NULL;
  ic_profile_outcome built;
  ic_colour_transform *transform = acquire(info->icc, info->icc_size, info,
                                           channels == 4 ? LAYOUT_RGBA : LAYOUT_RGB, &built);
  /* A damaged ICC profile was dropped by its decoder; what it leaves (PNG chunks) counts,
   * but the damage is what gets reported. */
  *outcome = info->damage != IC_PROFILE_NONE ? info->damage : built;
  return transform;
}

void ic_colour_apply(const ic_colour_transform *transform, uint8_t *row, uint32_t width) {
  if (transform->tables && !tables_disabled) {
    separable_apply(transform->tables, row, width, transform->layout == LAYOUT_RGBA ? 4 : 3);
    return;
  }
  if (!transform->grey) {
    cmsDoTransform(transform->transform, row, row, width);
    return;
  }
  /* Grey rows come expanded to RGB(A): R holds the level. */
  int channels = transform->layout == LAYOUT_RGBA ? 4 : 3;
  for (uint32_t x = 0; x < width; x++) {
    uint8_t *pixel = row + (size_t)x * channels;
    const uint8_t *to = transform->grey_table + (size_t)pixel[0] * 3;
    pixel[0] = to[0];
    pixel[1] = to[1];
    pixel[2] = to[2];
  }
}

ic_status ic_colour_step_begin(ic_colour_step *step, ic_colour_info *info, ic_colour_mode mode,
                               uint32_t width, int channels, ic_result *result) {
  memset(step, 0, sizeof(*step));
  step->channels = channels;
  if (info->space == IC_SPACE_CMYK) return IC_OK;
  ic_profile_outcome outcome;
  step->transform = ic_colour_acquire(info, channels, &outcome);
  result->profile = outcome;
  result->transform_cached = step->transform && entry_was_cached;
  if (!step->transform) return IC_OK;
  if (mode == IC_COLOUR_KEEP && info->icc && info->space == IC_SPACE_RGB) {
    /* lcms2 linked it, so it is a profile worth copying. */
    step->kept = info->icc;
    step->kept_size = info->icc_size;
    info->icc = NULL;
    info->icc_size = 0;
    result->profile = IC_PROFILE_KEPT;
    ic_colour_release(step->transform);
    step->transform = NULL;
    return IC_OK;
  }
  if (step->transform->early) {
    step->row = malloc((size_t)width * channels);
    if (!step->row) return ic_fail(result, IC_ERR_NO_MEMORY, "colour row allocation failed");
  }
  return IC_OK;
}

const uint8_t *ic_colour_step_row(ic_colour_step *step, const uint8_t *row, uint32_t width) {
  if (!step->row) return row;
  memcpy(step->row, row, (size_t)width * step->channels);
  ic_colour_apply(step->transform, step->row, width);
  return step->row;
}

void ic_colour_step_finish(ic_colour_step *step, uint8_t *pixels, uint32_t width,
                           uint32_t height) {
  if (!step->transform || step->row) return;
  size_t stride = (size_t)width * step->channels;
  for (uint32_t y = 0; y < height; y++)
    ic_colour_apply(step->transform, pixels + stride * y, width);
}

void ic_colour_step_end(ic_colour_step *step) {
  ic_colour_release(step->transform);
  step->transform = NULL;
  free(step->row);
  step->row = NULL;
}

void ic_colour_convert(ic_colour_info *info, uint8_t *pixels, uint32_t width, uint32_t height,
                       int channels, ic_result *result) {
  ic_colour_step step;
  if (ic_colour_step_begin(&step, info, IC_COLOUR_SRGB, width, channels, result) == IC_OK) {
    /* Whole rows at full size: the early and late orders are the same here. */
    free(step.row);
    step.row = NULL;
    ic_colour_step_finish(&step, pixels, width, height);
  }
  ic_colour_step_end(&step);
}

void ic_colour_release(ic_colour_transform *transform) {
  if (!transform) return;
  pthread_mutex_lock(&cache_lock);
  transform->references--;
  evict_locked();
  pthread_mutex_unlock(&cache_lock);
}

ic_colour_transform *ic_colour_acquire_cmyk(const ic_colour_info *info, int inverted,
                                            ic_profile_outcome *outcome, int *cached) {
  *cached = 0;
  layout layout = inverted ? LAYOUT_CMYK_INVERTED : LAYOUT_CMYK;
  ic_profile_outcome own = info->damage;
  if (info->icc) {
    ic_colour_transform *transform = acquire(info->icc, info->icc_size, info, layout, &own);
    if (transform) {
      *outcome = IC_PROFILE_CONVERTED;
      *cached = entry_was_cached;
      return transform;
    }
  }
  /* Its own profile is missing or unusable: the standard one, copied under the lock so a
   * concurrent ic_colour_set_cmyk_profile cannot free it mid-build. */
  *outcome = info->icc ? own
             : info->damage != IC_PROFILE_NONE ? info->damage
                                                : IC_PROFILE_STANDARD_CMYK;
  pthread_mutex_lock(&cache_lock);
  uint8_t *standard = standard_cmyk_size ? malloc(standard_cmyk_size) : NULL;
  size_t size = standard ? standard_cmyk_size : 0;
  if (standard) memcpy(standard, standard_cmyk, size);
  pthread_mutex_unlock(&cache_lock);
  ic_colour_transform *transform = NULL;
  if (standard) {
    ic_profile_outcome ignored;
    transform = acquire(standard, size, info, layout, &ignored);
    *cached = transform && entry_was_cached;
    free(standard);
  }
  return transform;
}

void ic_colour_cmyk_row(const ic_colour_transform *transform, const uint8_t *cmyk,
                        uint8_t *rgb, uint32_t width) {
  cmsDoTransform(transform->transform, cmyk, rgb, width);
}

int ic_colour_set_cmyk_profile(const uint8_t *icc, size_t size) {
  pthread_once(&lcms_once, lcms_setup);
  int usable = 0;
  if (icc && size > 0 && size <= (64u << 20)) {
    cmsHPROFILE profile = cmsOpenProfileFromMem(icc, (cmsUInt32Number)size);
    usable = profile && cmsGetColorSpace(profile) == cmsSigCmykData;
    if (profile) cmsCloseProfile(profile);
  }
  uint8_t *copy = usable ? malloc(size) : NULL;
  if (copy) memcpy(copy, icc, size);
  pthread_mutex_lock(&cache_lock);
  free(standard_cmyk);
  standard_cmyk = copy;
  standard_cmyk_size = copy ? size : 0;
  pthread_mutex_unlock(&cache_lock);
  return copy != NULL;
}

void ic_colour_stats_get(ic_colour_stats *stats) {
  pthread_mutex_lock(&cache_lock);
  stats->builds = cache_builds;
  stats->hits = cache_hits;
  stats->entries = cache_entries;
  stats->bytes = cache_bytes;
  stats->tables = cache_tables;
  pthread_mutex_unlock(&cache_lock);
}

void ic_colour_set_tables(int enabled) { tables_disabled = !enabled; }
