/*
 * What the colour files share (colour.c, colour_memory.c, colour_tables.c,
 * colour_profiles.c): lcms2's types, the pixel layouts, and each file's few entry points.
 * Swift never sees this header.
 */
#ifndef IC_COLOUR_INTERNAL_H
#define IC_COLOUR_INTERNAL_H

#include "internal.h"

#include <lcms2.h>

/* lcms2 memory for one transform while it is built: a CMYK press profile's link is about
 * 1 MiB (measured on the corpus' 940 KiB profile); an 8-bit 4-D table is at most 17^4 x 3. */
#define IC_COLOUR_BUILD_MAX (32u << 20)
/* Everything lcms2 may hold at once, cache included. */
#define IC_COLOUR_TOTAL_MAX (128u << 20)
/* Rendering intent: relative colorimetric, what browsers use for tagged images; lcms2's own
 * transform cache off, which lcms2 requires for use from several threads at once. */
#define IC_COLOUR_INTENT INTENT_RELATIVE_COLORIMETRIC
#define IC_COLOUR_FLAGS (cmsFLAGS_NOCACHE)

/* The pixels a transform is built for. */
typedef enum layout {
  LAYOUT_RGB = 3,
  LAYOUT_RGBA = 4,
  LAYOUT_CMYK = 5,
  LAYOUT_CMYK_INVERTED = 6
} layout;

/* sRGB's white point and primaries, as xy pairs: white, red, green, blue. */
extern const double ic_srgb_primaries[8];

/* colour_memory.c: lcms2's allocator, every block counted (IC_COLOUR_TOTAL_MAX for all of
 * lcms2; IC_COLOUR_BUILD_MAX for the build counted into `counter`). */
void ic_lcms_setup(void);
/* Counts this thread's lcms2 allocations into `counter` (NULL: into none) from now on;
 * returns the counter that was set. */
uint64_t *ic_lcms_count_into(uint64_t *counter);

/* colour_tables.c: curve-and-matrix transforms as three tables. */
typedef struct separable separable;
/* Tables for source's RGB transform when they match `reference` (its 8-bit transform with
 * `layout`'s pixels) to within one level, else NULL. Called with the build counter set. */
separable *ic_separable_build(cmsHPROFILE source, cmsHTRANSFORM reference, layout layout);
void ic_separable_apply(const separable *tables, uint8_t *row, uint32_t width, int channels);
/* The memory one set of tables holds. */
size_t ic_separable_bytes(void);
/* Whether this thread may use tables (ic_colour_set_tables). */
int ic_separable_enabled(void);

/* colour_profiles.c: source descriptions (PNG gAMA and cHRM, HEIF nclx) as profiles. */
/* Whether a description without ICC is sRGB as it stands. */
int ic_synthetic_is_srgb(const ic_colour_info *info);
/* ICC bytes for a synthetic description (malloc'd), or NULL. */
uint8_t *ic_synthetic_icc(const ic_colour_info *info, size_t *size);
/* The lcms2 colour space of a source's samples. */
cmsColorSpaceSignature ic_space_signature(ic_colour_space space);

#endif
