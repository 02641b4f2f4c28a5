/*
 * EXIF Orientation from a TIFF structure (the body of a JPEG APP1 "Exif"
 * segment after its 6-byte prefix, or a PNG eXIf chunk). Every offset is
 * bounds-checked: the block comes straight from untrusted files.
 */
#include "internal.h"

static uint32_t read16(const uint8_t *p, int little) {
  return little ? (uint32_t)(p[0] | p[1] << 8) : (uint32_t)(p[0] << 8 | p[1]);
}

static uint32_t read32(const uint8_t *p, int little) {
  return little ? (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                      (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
                : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                      (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int ic_exif_orientation(const uint8_t *tiff, size_t size) {
  if (!tiff || size < 8) return 1;
  int little;
  if (tiff[0] == 'I' && tiff[1] == 'I') little = 1;
  else if (tiff[0] == 'M' && tiff[1] == 'M') little = 0;
  else return 1;
  if (read16(tiff + 2, little) != 42) return 1;
  uint32_t ifd = read32(tiff + 4, little);
  if (ifd > size || size - ifd < 2) return 1;
  uint32_t entries = read16(tiff + ifd, little);
  const uint8_t *entry = tiff + ifd + 2;
  size_t available = (size - ifd - 2) / 12;
  if (entries > available) entries = (uint32_t)available;
  for (uint32_t i = 0; i < entries; i++, entry += 12) {
    if (read16(entry, little) != 0x0112) continue;
    uint32_t type = read16(entry + 2, little);
    uint32_t value;
    if (type == 3) value = read16(entry + 8, little);       /* SHORT */
    else if (type == 4) value = read32(entry + 8, little);  /* LONG */
    else return 1;
    return value >= 1 && value <= 8 ? (int)value : 1;
  }
  return 1;
}
