/*
 * What a JPEG download's first bytes offer a preview, before the rest has arrived: its EXIF
 * thumbnail once the first scan's header is in (libjpeg reads the header that far), or, for a
 * progressive file, its first DC scans once the marker after them is in. A walk over the
 * markers that resumes where the last call stopped: segments are stepped over without their
 * bytes (only APP1, SOF and SOS are read), entropy-coded data is searched for its ending
 * marker with memchr, so each byte is looked at once however often it is asked. No libjpeg:
 * the bytes are untrusted and incomplete.
 */
#include "internal.h"

#include <string.h>

/* Frame markers: SOF0...SOF15 but DHT (C4), JPG (C8) and DAC (CC). */
static int is_frame(int marker) {
  return marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
         marker != 0xCC;
}

/* Markers that stand alone, with no length: TEM and RST0...RST7. */
static int is_bare(int marker) { return marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7); }

int ic_jpeg_frame_size(const uint8_t *bytes, size_t size, uint32_t *width, uint32_t *height) {
  if (size < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8) return 0;
  size_t at = 2;
  /* Each step moves past a whole segment: at most size / 4 steps. */
  while (at + 4 <= size) {
    if (bytes[at] != 0xFF) return 0;
    int marker = bytes[at + 1];
    if (marker == 0xFF) {
      at++;
      continue;
    }
    if (is_bare(marker)) {
      at += 2;
      continue;
    }
    if (marker == 0xD8 || marker == 0xD9 || marker == 0xDA) return 0;
    uint32_t length = ic_be16(bytes + at + 2);
    if (length < 2) return 0;
    if (is_frame(marker)) {
      if (length < 8 || at + 2 + length > size) return 0;
      *height = ic_be16(bytes + at + 5);
      *width = ic_be16(bytes + at + 7);
      return *width > 0 && *height > 0;
    }
    at += 2 + (size_t)length;
  }
  return 0;
}

static ic_prefix_verdict decide(ic_prefix_scan *scan, ic_prefix_verdict verdict, size_t ready) {
  scan->verdict = verdict;
  if (verdict == IC_PREFIX_READY) scan->ready_size = ready;
  return verdict;
}

/* An APP1 segment's body: the first EXIF block's thumbnail, with its frame size. */
static void read_app1(ic_prefix_scan *scan, const uint8_t *body, size_t length) {
  static const uint8_t exif[6] = {'E', 'x', 'i', 'f', 0, 0};
  if (scan->thumbnail != 0 || length < 6 || memcmp(body, exif, 6) != 0) return;
  /* Only the first EXIF block counts, as for the decoder: -1 marks it seen. */
  scan->thumbnail = -1;
  size_t offset, bytes;
  if (!ic_exif_thumbnail(body + 6, length - 6, &offset, &bytes)) return;
  uint32_t w = 0, h = 0;
  if (!ic_jpeg_frame_size(body + 6 + offset, bytes, &w, &h)) return;
  scan->thumbnail = 1;
  scan->thumbnail_width = w;
  scan->thumbnail_height = h;
}

/* A frame header: the size, the components and whether the file is progressive (Huffman). */
static int read_frame(ic_prefix_scan *scan, int marker, const uint8_t *body, size_t length) {
  if (scan->components != 0 || length < 6) return 0;
  int count = body[5];
  if (count < 1 || count > 4 || length < 6 + 3 * (size_t)count) return 0;
  scan->height = ic_be16(body + 1);
  scan->width = ic_be16(body + 3);
  scan->progressive = marker == 0xC2;
  scan->components = count;
  for (int i = 0; i < count; i++) scan->ids[i] = body[6 + 3 * i];
  return scan->width > 0 && scan->height > 0;
}

/* A scan header: which components, and whether it is a first DC scan. */
static int read_scan(ic_prefix_scan *scan, const uint8_t *body, size_t length) {
  if (length < 1) return 0;
  int count = body[0];
  if (count < 1 || count > 4 || length < 1 + 2 * (size_t)count + 3) return 0;
  scan->scan_components = count;
  for (int i = 0; i < count; i++) scan->scan_ids[i] = body[1 + 2 * i];
  const uint8_t *tail = body + 1 + 2 * count;
  scan->dc_first_scan = tail[0] == 0 && (tail[2] >> 4) == 0;
  return 1;
}

/* After a scan's data: the components a first DC scan covered, and whether all are. */
static int scan_ended(ic_prefix_scan *scan) {
  if (scan->dc_first_scan)
    for (int i = 0; i < scan->scan_components; i++)
      for (int c = 0; c < scan->components; c++)
        if (scan->ids[c] == scan->scan_ids[i]) scan->dc_done |= 1u << c;
  return scan->components > 0 && scan->dc_done == (1u << scan->components) - 1;
}

ic_prefix_verdict ic_jpeg_prefix(const uint8_t *bytes, size_t size, ic_prefix_scan *scan) {
  if (scan->offset == 0) {
    if (size < 2) return IC_PREFIX_MORE;
    if (bytes[0] != 0xFF || bytes[1] != 0xD8) return decide(scan, IC_PREFIX_NONE, 0);
    scan->offset = 2;
  }
  while (scan->offset < size) {
    size_t at = scan->offset;
    if (scan->in_entropy) {
      /* Entropy-coded data holds 0xFF only before a stuffed zero, a fill byte, a restart
       * marker or the marker that ends the scan. */
      const uint8_t *ff = memchr(bytes + at, 0xFF, size - at);
      if (!ff) {
        scan->offset = size;
        return IC_PREFIX_MORE;
      }
      at = (size_t)(ff - bytes);
      if (at + 1 >= size) {
        scan->offset = at;
        return IC_PREFIX_MORE;
      }
      int next = bytes[at + 1];
      if (next == 0x00 || (next >= 0xD0 && next <= 0xD7)) {
        scan->offset = at + 2;
        continue;
      }
      if (next == 0xFF) {
        scan->offset = at + 1;
        continue;
      }
      scan->in_entropy = 0;
      scan->offset = at;
      /* The marker itself is part of the preview's bytes: the DC reader stops on it. */
      if (scan_ended(scan)) return decide(scan, IC_PREFIX_READY, at + 2);
      continue;
    }
    if (at + 2 > size) return IC_PREFIX_MORE;
    if (bytes[at] != 0xFF) return decide(scan, IC_PREFIX_NONE, 0);
    int marker = bytes[at + 1];
    if (marker == 0xFF) {
      scan->offset = at + 1;
      continue;
    }
    if (is_bare(marker)) {
      scan->offset = at + 2;
      continue;
    }
    /* A second SOI, or the end before a preview point. */
    if (marker == 0xD8 || marker == 0xD9 || marker == 0x00) return decide(scan, IC_PREFIX_NONE, 0);
    if (at + 4 > size) return IC_PREFIX_MORE;
    size_t length = ic_be16(bytes + at + 2);
    if (length < 2) return decide(scan, IC_PREFIX_NONE, 0);
    size_t end = at + 2 + length;
    int read = marker == 0xE1 || is_frame(marker) || marker == 0xDA;
    if (!read) {
      /* Stepped over: its bytes need not have arrived. */
      scan->offset = end;
      continue;
    }
    if (end > size) return IC_PREFIX_MORE;
    const uint8_t *body = bytes + at + 4;
    size_t body_length = length - 2;
    scan->offset = end;
    if (marker == 0xE1) {
      read_app1(scan, body, body_length);
    } else if (is_frame(marker)) {
      if (!read_frame(scan, marker, body, body_length)) return decide(scan, IC_PREFIX_NONE, 0);
    } else {
      if (scan->components == 0 || !read_scan(scan, body, body_length))
        return decide(scan, IC_PREFIX_NONE, 0);
      /* libjpeg's header ends here: an EXIF thumbnail of the image's shape is ready. */
      if (scan->thumbnail == 1 &&
          ic_same_shape(scan->thumbnail_width, scan->thumbnail_height, scan->width,
                        scan->height) &&
          scan->thumbnail_width < scan->width)
        return decide(scan, IC_PREFIX_READY, end);
      if (!scan->progressive) return decide(scan, IC_PREFIX_NONE, 0);
      scan->in_entropy = 1;
    }
  }
  return IC_PREFIX_MORE;
}
