/*
 * EXIF from a TIFF structure (the body of a JPEG APP1 "Exif" segment after its 6-byte
 * prefix, or a PNG eXIf chunk): the Orientation tag, and the JPEG thumbnail IFD1 points at.
 * Every offset is bounds-checked: the block comes straight from untrusted files.
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

/* The byte order from the TIFF header, and the offset of IFD0; 0 when the header is bad. */
static int tiff_header(const uint8_t *tiff, size_t size, int *little, uint32_t *ifd0) {
  if (!tiff || size < 8) return 0;
  if (tiff[0] == 'I' && tiff[1] == 'I') *little = 1;
  else if (tiff[0] == 'M' && tiff[1] == 'M') *little = 0;
  else return 0;
  if (read16(tiff + 2, *little) != 42) return 0;
  *ifd0 = read32(tiff + 4, *little);
  return 1;
}

/* The entries of the IFD at `ifd` that lie inside the block (a count past the end is cut
 * to what is there); 0 when the IFD itself is outside. */
static uint32_t ifd_entries(const uint8_t *tiff, size_t size, uint32_t ifd, int little) {
  if (ifd > size || size - ifd < 2) return 0;
  uint32_t entries = read16(tiff + ifd, little);
  size_t available = (size - ifd - 2) / 12;
  return entries > available ? (uint32_t)available : entries;
}

/* A SHORT or LONG entry's first value; 0 when the entry has another type. */
static int entry_value(const uint8_t *entry, int little, uint32_t *value) {
  uint32_t type = read16(entry + 2, little);
  if (type == 3) *value = read16(entry + 8, little);
  else if (type == 4) *value = read32(entry + 8, little);
  else return 0;
  return 1;
}

int ic_exif_orientation(const uint8_t *tiff, size_t size) {
  int little;
  uint32_t ifd;
  if (!tiff_header(tiff, size, &little, &ifd)) return 1;
  uint32_t entries = ifd_entries(tiff, size, ifd, little);
  const uint8_t *entry = tiff + ifd + 2;
  for (uint32_t i = 0; i < entries; i++, entry += 12) {
    if (read16(entry, little) != 0x0112) continue;
    uint32_t value;
    if (!entry_value(entry, little, &value)) return 1;
    return value >= 1 && value <= 8 ? (int)value : 1;
  }
  return 1;
}

int ic_exif_thumbnail(const uint8_t *tiff, size_t size, size_t *offset, size_t *length) {
  int little;
  uint32_t ifd0;
  if (!tiff_header(tiff, size, &little, &ifd0)) return 0;
  uint32_t entries = ifd_entries(tiff, size, ifd0, little);
  /* IFD1 follows IFD0's entries: its offset is the 4 bytes after them. */
  size_t next = (size_t)ifd0 + 2 + (size_t)entries * 12;
  if (entries == 0 || next > size || size - next < 4) return 0;
  uint32_t ifd1 = read32(tiff + next, little);
  if (ifd1 == 0 || ifd1 == ifd0) return 0;
  uint32_t count = ifd_entries(tiff, size, ifd1, little);
  const uint8_t *entry = tiff + ifd1 + 2;
  uint32_t start = 0, bytes = 0, compression = 6;
  for (uint32_t i = 0; i < count; i++, entry += 12) {
    uint32_t tag = read16(entry, little), value;
    if (!entry_value(entry, little, &value)) continue;
    if (tag == 0x0201) start = value;
    else if (tag == 0x0202) bytes = value;
    else if (tag == 0x0103) compression = value;
  }
  /* Compression 6 is JPEG; 1 (uncompressed strips) is not read. */
  if (compression != 6 || start == 0 || bytes < 4 || start > size || size - start < bytes)
    return 0;
  if (tiff[start] != 0xFF || tiff[start + 1] != 0xD8) return 0;
  *offset = start;
  *length = bytes;
  return 1;
}
