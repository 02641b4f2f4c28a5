/*
 * Camera RAW as a preview: the JPEG a camera embeds in its raw file, never a demosaic.
 *
 * A bounded walker of our own finds every embedded JPEG: in TIFF-structured raws (CR2, NEF, ARW,
 * DNG, ORF, RW2, PEF, SRW...) through IFD0's chain, SubIFDs and the EXIF IFD (JPEG interchange
 * offsets, JPEG strips that are not raw data, RW2's JpgFromRaw); in Fujifilm's RAF through its
 * header; in Canon's CR3 through its boxes (PRVW, THMB); in Canon's CIFF (CRW) through its heaps
 * (JpgFromRaw, ThumbnailImage). Offsets are checked against the file, visited directories
 * remembered (no loops), entries, directories, depth and candidates capped.
 *
 * Each candidate is checked to start a JPEG whose frame header says its size. The smallest
 * that covers the output is decoded through the JPEG decoder (shrink-on-load), its rows
 * relayed; the orientation is the raw file's own (IFD0's, or CR3's CMT1), else the preview's
 * EXIF (RAF). A raw without a usable preview is refused (unsupported), so a desktop can hand
 * it to an installed thumbnailer.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define RAW_MAX_CANDIDATES 16
#define RAW_MAX_DIRECTORIES 48
#define RAW_MAX_ENTRIES 1024
#define RAW_MAX_DEPTH 4
#define RAW_MAX_BOXES 4096
/* Bytes of a candidate read to find its frame header (past EXIF and maker notes). */
#define RAW_HEAD_BYTES (256u << 10)

typedef struct raw_candidate {
  uint64_t offset, length;
  uint32_t width, height;
} raw_candidate;

typedef struct raw_decoder {
  ic_decoder base;
  ic_random bytes;
  raw_candidate candidates[RAW_MAX_CANDIDATES];
  uint32_t count, chosen;
  /* The chosen preview: its bytes and its decoder, opened when chosen. */
  uint8_t *jpeg;
  ic_stream stream;
  int stream_open;
  ic_decoder *inner;
  ic_result failure;
} raw_decoder;

/* What the walk found. */
typedef struct raw_walk {
  const ic_random *bytes;
  int big;
  uint64_t visited[RAW_MAX_DIRECTORIES];
  uint32_t directories;
  raw_candidate candidates[RAW_MAX_CANDIDATES];
  uint32_t count;
  int orientation;
  /* Signs of a camera's raw file: DNGVersion, a Make tag, CFA or linear raw data. */
  int dng, make, raw_data;
} raw_walk;

static uint32_t get16(const uint8_t *p, int big) {
  return big ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}
static uint32_t get32(const uint8_t *p, int big) {
  return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
             : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The RAW magics thumbd recognises by their first bytes; NEF, ARW, DNG, PEF and others share
 * TIFF's and are recognised inside the TIFF decoder (ic_raw_is_camera). */
int ic_raw_sniff(const uint8_t *b, size_t size) {
  if (size >= 16 && memcmp(b, "FUJIFILMCCD-RAW ", 16) == 0) return 1;
  if (size >= 12 && memcmp(b, "II*\0", 4) == 0 && b[8] == 'C' && b[9] == 'R' && b[10] == 2)
    return 1;                                                                /* CR2 */
  if (size >= 4 && (memcmp(b, "IIRO", 4) == 0 || memcmp(b, "IIRS", 4) == 0 ||
                    memcmp(b, "MMOR", 4) == 0 || memcmp(b, "IIU\0", 4) == 0))
    return 1;                                                                /* ORF, RW2 */
  if (size >= 14 && b[0] == 'I' && b[1] == 'I' && memcmp(b + 6, "HEAPCCDR", 8) == 0)
    return 1;                                                                /* CRW */
  if (size >= 12 && memcmp(b + 4, "ftypcrx ", 8) == 0) return 1;           /* CR3 */
  return 0;
}

static void add_candidate(raw_walk *w, uint64_t offset, uint64_t length);

/* The JPEG thumbnail in the EXIF of a JPEG whose first bytes are `head` (at `offset` in the
 * file): a candidate too (a RAF's preview JPEG may be small and carry a larger one). */
static void add_exif_thumbnail(raw_walk *w, const uint8_t *head, size_t n, uint64_t offset) {
  for (size_t at = 2; at + 4 <= n;) {
    if (head[at] != 0xFF) return;
    uint32_t marker = head[at + 1], length = (uint32_t)head[at + 2] << 8 | head[at + 3];
    if (marker == 0xDA || length < 2) return;
    if (marker == 0xE1 && length >= 8 && at + 2 + length <= n &&
        memcmp(head + at + 4, "Exif\0\0", 6) == 0) {
      size_t start = 0, size = 0;
      if (ic_exif_thumbnail(head + at + 10, length - 8, &start, &size))
        add_candidate(w, offset + at + 10 + start, size);
      return;
    }
    at += 2 + length;
  }
}

/* Records a JPEG at [offset, offset + length) if it is one: SOI, and a frame header within
 * its first bytes; and the thumbnail in its EXIF, if any. */
static void add_candidate(raw_walk *w, uint64_t offset, uint64_t length) {
  if (w->count == RAW_MAX_CANDIDATES || length < 4 || offset >= w->bytes->size ||
      length > w->bytes->size - offset)
    return;
  for (uint32_t i = 0; i < w->count; i++)
    if (w->candidates[i].offset == offset) return;
  size_t want = length < RAW_HEAD_BYTES ? (size_t)length : RAW_HEAD_BYTES;
  uint8_t *head = malloc(want);
  if (!head) return;
  uint32_t width = 0, height = 0;
  if (ic_random_read(w->bytes, offset, head, want) == want && head[0] == 0xFF &&
      head[1] == 0xD8 && ic_jpeg_frame_size(head, want, &width, &height) && width && height) {
    w->candidates[w->count++] = (raw_candidate){offset, length, width, height};
    add_exif_thumbnail(w, head, want, offset);
  }
  free(head);
}

/* One IFD at `offset` (relative to the TIFF at `base`), its SubIFDs and EXIF IFD, and the
 * IFDs after it when `chain`. */
static void walk_ifd(raw_walk *w, uint64_t base, uint64_t offset, int depth, int chain,
                     int first) {
  while (offset && depth <= RAW_MAX_DEPTH && w->directories < RAW_MAX_DIRECTORIES) {
    uint64_t at = base + offset;
    for (uint32_t i = 0; i < w->directories; i++)
      if (w->visited[i] == at) return;
    w->visited[w->directories++] = at;
    uint8_t count_bytes[2];
    if (ic_random_read(w->bytes, at, count_bytes, 2) < 2) return;
    uint32_t count = get16(count_bytes, w->big);
    if (count == 0 || count > RAW_MAX_ENTRIES) return;
    uint8_t *entries = malloc((size_t)count * 12 + 4);
    if (!entries) return;
    size_t got = ic_random_read(w->bytes, at + 2, entries, (size_t)count * 12 + 4);
    if (got < (size_t)count * 12) {
      free(entries);
      return;
    }
    uint32_t compression = 0, photometric = 0, strip_count = 0, jpeg_length = 0;
    uint64_t strip = 0, strip_length = 0, jpeg = 0, subifds[8] = {0}, exif = 0;
    uint32_t subifd_count = 0;
    for (uint32_t i = 0; i < count; i++) {
      const uint8_t *e = entries + (size_t)i * 12;
      uint32_t tag = get16(e, w->big), type = get16(e + 2, w->big), n = get32(e + 4, w->big);
      uint32_t value = type == 3 && n == 1 ? get16(e + 8, w->big) : get32(e + 8, w->big);
      switch (tag) {
      case 0x0103: compression = value; break;
      case 0x0106: photometric = value; break;
      case 0x010F: w->make = 1; break;
      case 0x0112:
        if (first && value >= 1 && value <= 8) w->orientation = (int)value;
        break;
      case 0x0111:
      case 0x0144: /* strip or tile offsets: one is a whole preview */
        strip_count = n, strip = value;
        break;
      case 0x0117:
      case 0x0145: strip_length = n == 1 ? value : 0; break;
      case 0x0201: jpeg = value; break;
      case 0x0202: jpeg_length = value; break;
      case 0x002E: /* RW2's JpgFromRaw: the JPEG is the entry's data */
        if (type == 7) add_candidate(w, base + value, n);
        break;
      case 0x8769: exif = value; break;
      case 0xC612: w->dng = 1; break;
      case 0x014A:
        if (n == 1) {
          subifds[0] = value, subifd_count = 1;
        } else if (n <= 8) {
          uint8_t list[32];
          if (ic_random_read(w->bytes, base + value, list, 4 * n) == 4 * n)
            for (uint32_t k = 0; k < n; k++) subifds[subifd_count++] = get32(list + 4 * k, w->big);
        }
        break;
      }
    }
    uint64_t next = got >= (size_t)count * 12 + 4 ? get32(entries + (size_t)count * 12, w->big) : 0;
    free(entries);
    /* CFA (32803) and linear raw (34892) are sensor data, whatever their compression. */
    if (photometric == 32803 || photometric == 34892) w->raw_data = 1;
    if (jpeg && jpeg_length) add_candidate(w, base + jpeg, jpeg_length);
    if ((compression == 6 || compression == 7 || compression == 99) && strip_count == 1 &&
        strip_length && photometric != 32803 && photometric != 34892)
      add_candidate(w, base + strip, strip_length);
    for (uint32_t k = 0; k < subifd_count; k++) walk_ifd(w, base, subifds[k], depth + 1, 1, 0);
    if (exif) walk_ifd(w, base, exif, depth + 1, 0, 0);
    if (!chain) return;
    offset = next;
    first = 0;
  }
}

/* A TIFF structure at `base` (its header there): its IFD chain. */
static int walk_tiff(raw_walk *w, uint64_t base) {
  uint8_t header[8];
  if (ic_random_read(w->bytes, base, header, 8) < 8) return 0;
  if (header[0] == 'I' && header[1] == 'I') w->big = 0;
  else if (header[0] == 'M' && header[1] == 'M') w->big = 1;
  else return 0;
  walk_ifd(w, base, get32(header + 4, w->big), 0, 1, 1);
  return 1;
}

/* An ISO-BMFF box at `at` within [at, end): its type and payload. */
typedef struct box {
  char type[5];
  uint64_t payload, end;
} box;

static int read_box(const ic_random *bytes, uint64_t at, uint64_t end, box *b) {
  uint8_t h[16];
  if (end - at < 8 || ic_random_read(bytes, at, h, 8) < 8) return 0;
  uint64_t size = get32(h, 1), header = 8;
  if (size == 1) {
    if (end - at < 16 || ic_random_read(bytes, at + 8, h + 8, 8) < 8) return 0;
    size = (uint64_t)get32(h + 8, 1) << 32 | get32(h + 12, 1);
    header = 16;
  } else if (size == 0) {
    size = end - at;
  }
  if (size < header || size > end - at) return 0;
  memcpy(b->type, h + 4, 4);
  b->type[4] = 0;
  b->payload = at + header;
  b->end = at + size;
  return 1;
}

/* The JPEG inside a CR3 PRVW or THMB box: it starts within the box's first bytes. */
static void cr3_preview(raw_walk *w, const box *b) {
  uint8_t head[40];
  size_t n = ic_random_read(w->bytes, b->payload, head, sizeof(head));
  for (size_t i = 0; i + 1 < n; i++)
    if (head[i] == 0xFF && head[i + 1] == 0xD8) {
      add_candidate(w, b->payload + i, b->end - b->payload - i);
      return;
    }
}

/* CR3's boxes: moov's Canon uuid (CMT1 is a TIFF with the orientation; THMB), and the
 * top-level uuid holding PRVW. */
static void walk_cr3(raw_walk *w, uint64_t at, uint64_t end, int depth, uint32_t *boxes) {
  static const uint8_t canon[16] = {0x85, 0xc0, 0xb6, 0x87, 0x82, 0x0f, 0x11, 0xe0,
                                    0x81, 0x11, 0xf4, 0xce, 0x46, 0x2b, 0x6a, 0x48};
  static const uint8_t preview[16] = {0xea, 0xf4, 0x2b, 0x5e, 0x1c, 0x98, 0x4b, 0x88,
                                      0xb9, 0xfb, 0xb7, 0xdc, 0x40, 0x6e, 0x4d, 0x16};
  box b;
  while (at < end && depth <= RAW_MAX_DEPTH && ++*boxes < RAW_MAX_BOXES &&
         read_box(w->bytes, at, end, &b)) {
    if (strcmp(b.type, "moov") == 0) {
      walk_cr3(w, b.payload, b.end, depth + 1, boxes);
    } else if (strcmp(b.type, "uuid") == 0) {
      uint8_t id[16];
      if (ic_random_read(w->bytes, b.payload, id, 16) == 16) {
        if (memcmp(id, canon, 16) == 0) walk_cr3(w, b.payload + 16, b.end, depth + 1, boxes);
        if (memcmp(id, preview, 16) == 0) walk_cr3(w, b.payload + 24, b.end, depth + 1, boxes);
      }
    } else if (strcmp(b.type, "CMT1") == 0) {
      raw_walk ifd0 = {.bytes = w->bytes, .orientation = 1};
      if (walk_tiff(&ifd0, b.payload)) w->orientation = ifd0.orientation;
      w->make = 1;
    } else if (strcmp(b.type, "PRVW") == 0 || strcmp(b.type, "THMB") == 0) {
      cr3_preview(w, &b);
    }
    at = b.end;
  }
}

/* CIFF (CRW): heaps of records; JpgFromRaw (0x2007) and ThumbnailImage (0x2008) hold
 * previews, 0x28xx and 0x30xx
 * records are heaps of their own. A heap's table offset is its last four bytes. */
static void walk_ciff(raw_walk *w, uint64_t start, uint64_t end, int depth, uint32_t *records) {
  uint8_t tail[4], count_bytes[2];
  if (depth > RAW_MAX_DEPTH || end - start < 6 || ic_random_read(w->bytes, end - 4, tail, 4) < 4)
    return;
  uint64_t table = start + get32(tail, 0);
  if (table >= end - 4 || ic_random_read(w->bytes, table, count_bytes, 2) < 2) return;
  uint32_t count = get16(count_bytes, 0);
  if (count > RAW_MAX_ENTRIES || table + 2 + (uint64_t)count * 10 > end) return;
  for (uint32_t i = 0; i < count && ++*records < RAW_MAX_BOXES; i++) {
    uint8_t r[10];
    if (ic_random_read(w->bytes, table + 2 + (uint64_t)i * 10, r, 10) < 10) return;
    uint32_t tag = get16(r, 0), size = get32(r + 2, 0), offset = get32(r + 6, 0);
    if ((tag & 0xC000) != 0 || offset > end - start || size > end - start - offset) continue;
    uint32_t kind = tag & 0x3800;
    /* JpgFromRaw, and ThumbnailImage. */
    if ((tag & 0x3FFF) == 0x2007 || (tag & 0x3FFF) == 0x2008) add_candidate(w, start + offset, size);
    else if (kind == 0x2800 || kind == 0x3000)
      walk_ciff(w, start + offset, start + offset + size, depth + 1, records);
  }
  w->make = 1;
}

/* The EXIF orientation of a JPEG's APP1, when it has one within its first bytes (RAF). */
static int jpeg_orientation(const ic_random *bytes, const raw_candidate *c) {
  uint8_t head[65536 + 4];
  size_t n = ic_random_read(bytes, c->offset, head, c->length < sizeof(head) ? c->length : sizeof(head));
  for (size_t at = 2; at + 4 <= n;) {
    if (head[at] != 0xFF) break;
    uint32_t marker = head[at + 1], length = (uint32_t)head[at + 2] << 8 | head[at + 3];
    if (marker == 0xE1 && length >= 8 && at + 2 + length <= n && memcmp(head + at + 4, "Exif\0\0", 6) == 0)
      return ic_exif_orientation(head + at + 10, length - 8);
    if (marker == 0xDA || length < 2) break;
    at += 2 + length;
  }
  return 1;
}

/* Everything the walk finds in the file, by its kind. */
static void walk(raw_walk *w) {
  uint8_t head[96];
  size_t n = ic_random_read(w->bytes, 0, head, sizeof(head));
  w->orientation = 1;
  uint32_t boxes = 0;
  if (n >= 92 && memcmp(head, "FUJIFILMCCD-RAW ", 16) == 0) {
    w->make = 1;
    add_candidate(w, get32(head + 84, 1), get32(head + 88, 1));
    if (w->count) w->orientation = jpeg_orientation(w->bytes, &w->candidates[0]);
  } else if (n >= 12 && memcmp(head + 4, "ftypcrx ", 8) == 0) {
    walk_cr3(w, 0, w->bytes->size, 0, &boxes);
  } else if (n >= 14 && memcmp(head + 6, "HEAPCCDR", 8) == 0) {
    walk_ciff(w, get32(head + 2, 0), w->bytes->size, 0, &boxes);
  } else if (n >= 8 && (memcmp(head, "IIRO", 4) == 0 || memcmp(head, "IIRS", 4) == 0 ||
                        memcmp(head, "IIU\0", 4) == 0 || memcmp(head, "MMOR", 4) == 0)) {
    /* ORF and RW2: TIFF's layout under magics of their own. */
    w->big = head[0] == 'M';
    w->make = 1;
    walk_ifd(w, 0, get32(head + 4, w->big), 0, 1, 1);
  } else {
    walk_tiff(w, 0);
  }
}

int ic_raw_is_camera(const ic_random *bytes) {
  raw_walk w = {.bytes = bytes};
  walk(&w);
  /* A DNG, or a camera's TIFF that holds sensor data: a plain TIFF with a Make tag is not. */
  return w.dng || (w.make && w.raw_data);
}

static void raw_close_inner(raw_decoder *d) {
  if (d->inner) d->inner->ops->destroy(d->inner);
  d->inner = NULL;
  if (d->stream_open) ic_stream_close(&d->stream);
  d->stream_open = 0;
  free(d->jpeg);
  d->jpeg = NULL;
}

/* Reads the chosen preview and opens its decoder; a failure is kept for run. */
static void open_chosen(raw_decoder *d) {
  raw_close_inner(d);
  memset(&d->failure, 0, sizeof(d->failure));
  const raw_candidate *c = &d->candidates[d->chosen];
  if (d->base.limits->max_decoder_memory && c->length > d->base.limits->max_decoder_memory) {
    ic_fail(&d->failure, IC_ERR_TOO_LARGE, "RAW preview of %llu bytes",
            (unsigned long long)c->length);
    return;
  }
  d->jpeg = malloc((size_t)c->length);
  if (!d->jpeg) {
    ic_fail(&d->failure, IC_ERR_NO_MEMORY, "RAW preview allocation failed");
    return;
  }
  if (ic_random_read(&d->bytes, c->offset, d->jpeg, (size_t)c->length) < c->length) {
    ic_fail(&d->failure, IC_ERR_TRUNCATED, "RAW preview ends early");
    return;
  }
  ic_source source = {.data = d->jpeg, .size = (size_t)c->length, .path = NULL, .fd = -1};
  if (ic_stream_open(&d->stream, &source, &d->failure) != IC_OK) return;
  d->stream_open = 1;
  if (ic_jpeg_open(&d->stream, d->base.limits, d->base.control, &d->failure, &d->inner) != IC_OK) {
    d->inner = NULL;
    return;
  }
  if (d->inner->header.width != c->width || d->inner->header.height != c->height)
    ic_fail(&d->failure, IC_ERR_CORRUPT, "RAW preview changed its size");
}

static void raw_choose_size(ic_decoder *base, uint32_t need_width, uint32_t need_height,
                            int allow_scaling, uint32_t *width, uint32_t *height) {
  raw_decoder *d = (raw_decoder *)base;
  /* The smallest preview that covers the need (the largest when none does), then the JPEG
   * decoder's own scaling inside it, at the need in that preview's pixels. */
  uint32_t best = 0;
  for (uint32_t i = 1; i < d->count; i++) {
    const raw_candidate *c = &d->candidates[i], *b = &d->candidates[best];
    int covers = c->width >= need_width && c->height >= need_height;
    int best_covers = b->width >= need_width && b->height >= need_height;
    if ((covers && (!best_covers || c->width < b->width)) || (!covers && !best_covers && c->width > b->width))
      best = i;
  }
  if (!allow_scaling) {
    for (uint32_t i = 0; i < d->count; i++)
      if (d->candidates[i].width > d->candidates[best].width) best = i;
  }
  d->chosen = best;
  open_chosen(d);
  const raw_candidate *c = &d->candidates[best];
  *width = c->width;
  *height = c->height;
  base->pixel_scale = 0;
  if (d->failure.status != IC_OK || !d->inner) return;
  /* The need, from the largest preview's pixels (the header's) into this one's. */
  uint32_t w = (uint32_t)(((uint64_t)need_width * c->width + base->header.width - 1) / base->header.width);
  uint32_t h = (uint32_t)(((uint64_t)need_height * c->height + base->header.height - 1) / base->header.height);
  d->inner->ops->choose_size(d->inner, w, h, allow_scaling, width, height);
  /* The JPEG's fixed scale maps onto the header's pixels when the preview is the largest. */
  if (c->width == base->header.width && c->height == base->header.height)
    base->pixel_scale = d->inner->pixel_scale;
}

static ic_status raw_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  raw_decoder *d = (raw_decoder *)base;
  if (d->failure.status != IC_OK)
    return ic_fail(result, d->failure.status, "%s", d->failure.message);
  if (!d->inner) return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "RAW preview not chosen");
  return ic_decoder_run_inner(d->inner, base, sink, result);
}

static uint64_t raw_working_memory(ic_decoder *base) {
  raw_decoder *d = (raw_decoder *)base;
  const raw_candidate *c = &d->candidates[d->chosen];
  return c->length + (d->inner ? d->inner->ops->working_memory(d->inner) : IC_DECODE_BASE_BYTES);
}

static void raw_destroy(ic_decoder *base) {
  raw_decoder *d = (raw_decoder *)base;
  raw_close_inner(d);
  ic_colour_info_clear(&base->header.colour);
  free(d);
}

static const ic_decoder_ops raw_ops = {raw_choose_size, raw_run, raw_destroy,
                                       raw_working_memory, NULL};

ic_status ic_raw_open_random(const ic_random *bytes, const ic_limits *limits,
                             const ic_control *control, ic_result *result, ic_decoder **out) {
  raw_walk w = {.bytes = bytes};
  walk(&w);
  result->source_format = IC_FORMAT_RAW;
  if (w.count == 0)
    return ic_fail(result, IC_ERR_UNSUPPORTED,
                   "a camera RAW without an embedded JPEG preview (thumbd never demosaics)");
  raw_decoder *d = ic_decoder_new(sizeof(*d), &raw_ops, limits, control, result);
  if (!d) return result->status;
  d->bytes = *bytes;
  memcpy(d->candidates, w.candidates, sizeof(w.candidates));
  d->count = w.count;
  /* The picture is the largest preview. */
  const raw_candidate *largest = &d->candidates[0];
  for (uint32_t i = 1; i < d->count; i++)
    if (d->candidates[i].width > largest->width) largest = &d->candidates[i];
  if (ic_check_limits(largest->width, largest->height, limits, result) != IC_OK) {
    raw_destroy(&d->base);
    return result->status;
  }
  d->base.header.width = largest->width;
  d->base.header.height = largest->height;
  d->base.header.orientation = w.orientation;
  d->base.header.channels = 3;
  *out = &d->base;
  return IC_OK;
}

ic_status ic_raw_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                      ic_result *result, ic_decoder **out) {
  ic_random bytes;
  if (ic_stream_random(stream, limits, control, &bytes, result) != IC_OK) return result->status;
  return ic_raw_open_random(&bytes, limits, control, result, out);
}
