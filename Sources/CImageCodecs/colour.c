/*
 * Colour: a source's profile (or its PNG/nclx description) into a transform to sRGB, and the
 * cache that keeps transforms by profile. Three files help, each with one job:
 * colour_memory.c (lcms2's allocator, its memory counted and capped), colour_tables.c
 * (curve-and-matrix transforms as tables) and colour_profiles.c (descriptions as profiles).
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
#include "colour_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Transforms the cache keeps, and the lcms2 bytes they may hold (least recently used go). */
#define IC_COLOUR_CACHE_ENTRIES 32
#define IC_COLOUR_CACHE_BYTES (48u << 20)

/* Levels of bend (see nonlinearity) past which a transform runs before resampling. Measured
 * on the corpus' profiles: sRGB 0-1, Display P3 and DCI-P3 7-11, Adobe RGB 9, ProPhoto 19,
 * a scanner profile 17; a test profile with steps and an XYB profile jump by 169 and 216
 * levels between neighbours 16 apart. */
#define IC_COLOUR_MAX_BEND 24

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
  /* RGB sources whose transform is curves and a matrix: its tables (see ic_separable_build), or
   * NULL to run lcms2's transform. */
  struct separable *tables;
  uint64_t bytes;
  int references;
  uint64_t last_use;
  ic_colour_transform *next;
};

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
  uint64_t *saved = ic_lcms_count_into(NULL);
  if (entry->transform) cmsDeleteTransform(entry->transform);
  ic_lcms_count_into(saved);
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
  if (cmsGetColorSpace(source) != ic_space_signature(space)) {
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
    entry->tables = ic_separable_build(source, transform, layout);
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
  ic_lcms_setup();
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
    ic_lcms_count_into(&bytes);
    if (icc) {
      built = build(icc, icc_size, info->space, layout, entry);
    } else {
      size_t size = 0;
      uint8_t *made = ic_synthetic_icc(info, &size);
      if (made) built = build(made, size, info->space, layout, entry);
      free(made);
    }
    ic_lcms_count_into(NULL);
    entry->bytes = bytes + (entry->tables ? ic_separable_bytes() : 0);
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
  if (!info->icc && ic_synthetic_is_srgb(info)) return NULL;
  ic_profile_outcome built;
  ic_colour_transform *transform = acquire(info->icc, info->icc_size, info,
                                           channels == 4 ? LAYOUT_RGBA : LAYOUT_RGB, &built);
  /* A damaged ICC profile was dropped by its decoder; what it leaves (PNG chunks) counts,
   * but the damage is what gets reported. */
  *outcome = info->damage != IC_PROFILE_NONE ? info->damage : built;
  return transform;
}

void ic_colour_apply(const ic_colour_transform *transform, uint8_t *row, uint32_t width) {
  if (transform->tables && ic_separable_enabled()) {
    ic_separable_apply(transform->tables, row, width, transform->layout == LAYOUT_RGBA ? 4 : 3);
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
  ic_lcms_setup();
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

