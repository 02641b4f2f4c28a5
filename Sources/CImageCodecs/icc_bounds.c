/*
 * What an ICC profile makes lcms2 do before it is linked. lcms2 reads a multiProcessElement
 * tag (`mpet`: D2Bx, B2Dx) into one pipeline stage per element, then samples the whole
 * pipeline on a grid (17^3 or more points) while it links: an RGB profile whose D2B0 chains
 * 50,000 matrices (400 KB, every entry of its position table pointing at one matrix) cost 51 s
 * of CPU, uninterruptibly. A segmented curve is evaluated by walking its segments. So before
 * lcms2 sees a profile, the counts that multiply its work are bounded; real profiles have a
 * handful of elements and segments. Everything else in a profile is bounded by its size
 * (max_profile_bytes) and by the bytes lcms2 may allocate (colour.c).
 */
#include "internal.h"

/* Tags a profile may have (real ones: 10 to 60). */
#define IC_ICC_MAX_TAGS 256
/* Elements of one multiProcessElement tag, and segments of one segmented curve. */
#define IC_ICC_MAX_ELEMENTS 32
#define IC_ICC_MAX_SEGMENTS 64

#define SIG(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

/* A curve-set element's segmented curves: each within IC_ICC_MAX_SEGMENTS. Positions
 * outside the element are lcms2's to refuse. */
static int curves_bounded(const uint8_t *element, size_t size) {
  if (size < 12) return 1;
  uint32_t channels = ic_be16(element + 8);
  for (uint32_t c = 0; c < channels && 12 + (size_t)c * 8 + 8 <= size; c++) {
    uint32_t offset = ic_be32(element + 12 + c * 8);
    if (offset > size || size - offset < 12) continue;
    const uint8_t *curve = element + offset;
    if (ic_be32(curve) == SIG('c', 'u', 'r', 'f') && ic_be16(curve + 8) > IC_ICC_MAX_SEGMENTS)
      return 0;
  }
  return 1;
}

/* A multiProcessElement tag: its element count, and each curve set's segments. */
static int elements_bounded(const uint8_t *tag, size_t size) {
  if (size < 16) return 1;
  uint32_t count = ic_be32(tag + 12);
  if (count > IC_ICC_MAX_ELEMENTS) return 0;
  for (uint32_t e = 0; e < count && 16 + (size_t)e * 8 + 8 <= size; e++) {
    uint32_t offset = ic_be32(tag + 16 + e * 8), length = ic_be32(tag + 20 + e * 8);
    if (offset > size || length > size - offset || length < 4) continue;
    if (ic_be32(tag + offset) == SIG('c', 'v', 's', 't') && !curves_bounded(tag + offset, length))
      return 0;
  }
  return 1;
}

int ic_icc_bounded(const uint8_t *icc, size_t size) {
  if (size < 132) return 1; /* lcms2 refuses it */
  uint32_t tags = ic_be32(icc + 128);
  if (tags > IC_ICC_MAX_TAGS) return 0;
  for (uint32_t t = 0; t < tags && 132 + (size_t)t * 12 + 12 <= size; t++) {
    const uint8_t *entry = icc + 132 + (size_t)t * 12;
    uint32_t offset = ic_be32(entry + 4), length = ic_be32(entry + 8);
    if (offset > size || length > size - offset || length < 4) continue;
    if (ic_be32(icc + offset) == SIG('m', 'p', 'e', 't') && !elements_bounded(icc + offset, length))
      return 0;
  }
  return 1;
}
