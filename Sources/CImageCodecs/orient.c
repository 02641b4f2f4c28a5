/*
 * EXIF orientation, applied to the small resampled image rather than the
 * source, so turning a photo upright costs a few hundred kilobytes at most.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

uint8_t *ic_orient(const uint8_t *pixels, uint32_t width, uint32_t height,
                   int channels, int orientation, uint32_t *out_width,
                   uint32_t *out_height) {
  int swap = orientation >= 5 && orientation <= 8;
  uint32_t dw = swap ? height : width, dh = swap ? width : height;
  size_t bytes = (size_t)dw * dh * channels;
  uint8_t *out = malloc(bytes ? bytes : 1);
  if (!out) return NULL;
  *out_width = dw;
  *out_height = dh;
  for (uint32_t y = 0; y < dh; y++) {
    uint8_t *dst = out + (size_t)y * dw * channels;
    for (uint32_t x = 0; x < dw; x++) {
      /* (sx, sy): the stored pixel shown at display position (x, y). */
      uint32_t sx, sy;
      switch (orientation) {
      case 2: sx = width - 1 - x; sy = y; break;
      case 3: sx = width - 1 - x; sy = height - 1 - y; break;
      case 4: sx = x; sy = height - 1 - y; break;
      case 5: sx = y; sy = x; break;
      case 6: sx = y; sy = height - 1 - x; break;
      case 7: sx = width - 1 - y; sy = height - 1 - x; break;
      case 8: sx = width - 1 - y; sy = x; break;
      default: sx = x; sy = y; break;
      }
      memcpy(dst + (size_t)x * channels,
             pixels + ((size_t)sy * width + sx) * channels, (size_t)channels);
    }
  }
  return out;
}
