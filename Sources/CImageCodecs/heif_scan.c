/*
 * A HEIF file's item graph and the real sizes of its images, read before libheif sees the
 * file (heif_decode.c). libheif 1.15 trusts what the file says: it recurses along derived-image
 * references without a depth bound (a grid that is its own tile, an `iden` of itself), takes
 * an image's size from its `ispe` property while the decoder allocates what the coded
 * bitstream says, computes a grid's plane size in 32 bits, and decodes every tile of a grid
 * whatever their number. So this scan, bounded by the file's bytes:
 *
 *  - refuses cycles in the references libheif follows (dimg, auxl, thmb), chains deeper than
 *    IC_HEIF_MAX_DEPTH, and derived images (grid, iovl, iden) whose inputs are derived too;
 *  - refuses grids of more tiles than IC_HEIF_MAX_TILES, or of more than
 *    IC_HEIF_SMALL_TILES tiles under 512x512 each (each tile costs a decoder's setup);
 *  - reads each coded image's frame size from its bitstream (the HEVC SPS in hvcC and in the
 *    item's data, the AV1 sequence header's maximum frame size in av1C and in the item's
 *    data), each grid's and overlay's output size from its own box, and takes the larger of
 *    the coded and declared sizes as the image's: a coded frame larger than its `ispe` is no
 *    error (an AV1 sequence header gives a maximum, and real encoders write frames larger than
 *    the ispe they declare), but what a decode of it allocates is what is checked and counted;
 *  - applies the pixel limits to every image a decode of the primary image or of one of its
 *    thumbnails can touch (tiles, alpha planes, thumbnails), and records what each of those
 *    decodes allocates, for the memory estimate.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Items a file may declare: a 200 MP camera grid is about 800 tiles plus metadata. */
#define IC_HEIF_MAX_ITEMS 4096
/* References a file may declare, counted over every iref entry's targets. */
#define IC_HEIF_MAX_REFERENCES 8192
/* Property boxes in ipco, and associations in ipma. */
#define IC_HEIF_MAX_PROPERTIES 4096
#define IC_HEIF_MAX_ASSOCIATIONS 65536
/* Longest chain of references (primary -> alpha -> tile, primary -> thumbnail -> tile). */
#define IC_HEIF_MAX_DEPTH 4
/* Boxes visited in all, at every level. */
#define IC_HEIF_MAX_BOXES 65536

#define FOURCC(a, b, c, d) \
  ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

enum { KIND_OTHER = 0, KIND_HEVC, KIND_AV1, KIND_GRID, KIND_OVERLAY, KIND_IDEN };

typedef struct scan_extent {
  uint64_t offset, length;
} scan_extent;

typedef struct scan_item {
  uint32_t id;
  uint32_t type;
  int kind;
  /* Declared size (ispe), 0 when absent. */
  uint32_t ispe_width, ispe_height;
  /* Property indices (1-based in ipco) of its hvcC / av1C / auxC, 0 for none. */
  uint32_t hvcc, av1c;
  int alpha;
  /* Location: construction method 0 (file) or 1 (idat), its extents. */
  int located, method;
  uint64_t base;
  uint32_t first_extent, extent_count;
  /* Worked out by the scan. */
  uint32_t width, height;
  int state; /* 0 unvisited, 1 on the path, 2 done */
} scan_item;

typedef struct scan_reference {
  uint32_t type, from, to;
} scan_reference;

typedef struct scan_property {
  uint32_t type;
  const uint8_t *body;
  size_t size;
} scan_property;

typedef struct heif_scan {
  const uint8_t *file;
  size_t file_size;
  const uint8_t *idat;
  size_t idat_size;
  uint32_t primary;
  int has_primary;
  scan_item *items;
  uint32_t item_count, item_capacity;
  scan_reference *refs;
  uint32_t ref_count, ref_capacity;
  scan_property *props;
  uint32_t prop_count, prop_capacity;
  scan_extent *extents;
  uint32_t extent_count, extent_capacity;
  uint32_t boxes;
  const ic_limits *limits;
  ic_result *result;
} heif_scan;

/* ---- bytes and boxes ---- */

typedef struct reader {
  const uint8_t *p;
  size_t left;
  int bad;
} reader;

static uint64_t take(reader *r, int bytes) {
  if (bytes == 0) return 0;
  if (r->left < (size_t)bytes) {
    r->bad = 1;
    r->left = 0;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v = v << 8 | r->p[i];
  r->p += bytes;
  r->left -= (size_t)bytes;
  return v;
}

static void skip(reader *r, size_t bytes) {
  if (r->left < bytes) {
    r->bad = 1;
    r->left = 0;
    return;
  }
  r->p += bytes;
  r->left -= bytes;
}

/* The next box in r: its type and body. 0 at the end, -1 when malformed, -2 when it runs
 * past the end of what encloses it (its type is set: a truncated file). */
static int next_box(heif_scan *s, reader *r, uint32_t *type, reader *body) {
  if (r->left == 0) return 0;
  if (++s->boxes > IC_HEIF_MAX_BOXES) return -1;
  size_t start_left = r->left;
  uint64_t size = take(r, 4);
  *type = (uint32_t)take(r, 4);
  if (size == 1) size = take(r, 8);
  if (r->bad) return -1;
  size_t header = start_left - r->left;
  if (size == 0) size = start_left; /* to the end of what encloses it */
  if (size < header) return -1;
  if (size > start_left) return -2;
  body->p = r->p;
  body->left = (size_t)(size - header);
  body->bad = 0;
  skip(r, (size_t)(size - header));
  return 1;
}

static int grow(void **array, uint32_t *capacity, uint32_t count, size_t element, uint32_t max) {
  if (count < *capacity) return 1;
  if (count >= max) return 0;
  uint32_t next = *capacity ? *capacity * 2 : 16;
  if (next > max) next = max;
  void *grown = realloc(*array, (size_t)next * element);
  if (!grown) return 0;
  *array = grown;
  *capacity = next;
  return 1;
}

static scan_item *find_item(heif_scan *s, uint32_t id) {
  for (uint32_t i = 0; i < s->item_count; i++)
    if (s->items[i].id == id) return &s->items[i];
  return NULL;
}

static scan_item *add_item(heif_scan *s, uint32_t id) {
  scan_item *item = find_item(s, id);
  if (item) return item;
  if (!grow((void **)&s->items, &s->item_capacity, s->item_count, sizeof(scan_item),
            IC_HEIF_MAX_ITEMS))
    return NULL;
  item = &s->items[s->item_count++];
  memset(item, 0, sizeof(*item));
  item->id = id;
  return item;
}

static ic_status corrupt(heif_scan *s, const char *what) {
  return ic_fail(s->result, IC_ERR_CORRUPT, "HEIF %s", what);
}

/* ---- the meta box's children ---- */

static ic_status read_iinf(heif_scan *s, reader r) {
  int version = (int)take(&r, 1);
  skip(&r, 3);
  uint32_t entries = (uint32_t)take(&r, version == 0 ? 2 : 4);
  if (r.bad) return corrupt(s, "item list is truncated");
  if (entries > IC_HEIF_MAX_ITEMS)
    return ic_fail(s->result, IC_ERR_TOO_COMPLEX, "HEIF file declares %u items (at most %d)",
                   entries, IC_HEIF_MAX_ITEMS);
  uint32_t type;
  reader body;
  int found;
  while ((found = next_box(s, &r, &type, &body)) > 0) {
    if (type != FOURCC('i', 'n', 'f', 'e')) continue;
    int v = (int)take(&body, 1);
    skip(&body, 3);
    if (v < 2) continue; /* no item type: not an image */
    uint32_t id = (uint32_t)take(&body, v == 2 ? 2 : 4);
    skip(&body, 2);
    uint32_t item_type = (uint32_t)take(&body, 4);
    if (body.bad) return corrupt(s, "item entry is truncated");
    scan_item *item = add_item(s, id);
    if (!item)
      return ic_fail(s->result, IC_ERR_TOO_COMPLEX, "HEIF file has over %d items",
                     IC_HEIF_MAX_ITEMS);
    item->type = item_type;
    item->kind = item_type == FOURCC('h', 'v', 'c', '1')   ? KIND_HEVC
                 : item_type == FOURCC('a', 'v', '0', '1') ? KIND_AV1
                 : item_type == FOURCC('g', 'r', 'i', 'd') ? KIND_GRID
                 : item_type == FOURCC('i', 'o', 'v', 'l') ? KIND_OVERLAY
                 : item_type == FOURCC('i', 'd', 'e', 'n') ? KIND_IDEN
                                                            : KIND_OTHER;
  }
  return found < 0 ? corrupt(s, "item list is malformed") : IC_OK;
}

static ic_status read_iref(heif_scan *s, reader r) {
  int version = (int)take(&r, 1);
  skip(&r, 3);
  int id_bytes = version == 0 ? 2 : 4;
  uint32_t type;
  reader body;
  int found;
  while ((found = next_box(s, &r, &type, &body)) > 0) {
    uint32_t from = (uint32_t)take(&body, id_bytes);
    uint32_t count = (uint32_t)take(&body, 2);
    for (uint32_t i = 0; i < count && !body.bad; i++) {
      uint32_t to = (uint32_t)take(&body, id_bytes);
      if (body.bad) break;
      if (!grow((void **)&s->refs, &s->ref_capacity, s->ref_count, sizeof(scan_reference),
                IC_HEIF_MAX_REFERENCES))
        return ic_fail(s->result, IC_ERR_TOO_COMPLEX, "HEIF file has over %d references",
                       IC_HEIF_MAX_REFERENCES);
      s->refs[s->ref_count++] = (scan_reference){type, from, to};
    }
    if (body.bad) return corrupt(s, "reference list is truncated");
  }
  return found < 0 ? corrupt(s, "reference list is malformed") : IC_OK;
}

static ic_status read_iprp(heif_scan *s, reader r) {
  uint32_t type;
  reader body;
  int found;
  /* ipco first (its order numbers the properties), then every ipma. */
  reader again = r;
  while ((found = next_box(s, &r, &type, &body)) > 0) {
    if (type != FOURCC('i', 'p', 'c', 'o')) continue;
    uint32_t ptype;
    reader pbody;
    int more;
    while ((more = next_box(s, &body, &ptype, &pbody)) > 0) {
      if (!grow((void **)&s->props, &s->prop_capacity, s->prop_count, sizeof(scan_property),
                IC_HEIF_MAX_PROPERTIES))
        return ic_fail(s->result, IC_ERR_TOO_COMPLEX, "HEIF file has over %d properties",
                       IC_HEIF_MAX_PROPERTIES);
      s->props[s->prop_count++] = (scan_property){ptype, pbody.p, pbody.left};
    }
    if (more < 0) return corrupt(s, "property list is malformed");
  }
  if (found < 0) return corrupt(s, "properties are malformed");
  uint32_t associations = 0;
  while ((found = next_box(s, &again, &type, &body)) > 0) {
    if (type != FOURCC('i', 'p', 'm', 'a')) continue;
    int version = (int)take(&body, 1);
    uint32_t flags = (uint32_t)take(&body, 3);
    uint32_t entries = (uint32_t)take(&body, 4);
    for (uint32_t e = 0; e < entries && !body.bad; e++) {
      uint32_t id = (uint32_t)take(&body, version < 1 ? 2 : 4);
      int count = (int)take(&body, 1);
      scan_item *item = find_item(s, id);
      for (int a = 0; a < count && !body.bad; a++) {
        if (++associations > IC_HEIF_MAX_ASSOCIATIONS)
          return ic_fail(s->result, IC_ERR_TOO_COMPLEX, "HEIF file has over %d associations",
                         IC_HEIF_MAX_ASSOCIATIONS);
        uint32_t index = (uint32_t)take(&body, flags & 1 ? 2 : 1) & (flags & 1 ? 0x7fff : 0x7f);
        if (!item || index == 0 || index > s->prop_count) continue;
        const scan_property *p = &s->props[index - 1];
        if (p->type == FOURCC('i', 's', 'p', 'e')) {
          reader ispe = {p->body, p->size, 0};
          skip(&ispe, 4);
          uint32_t w = (uint32_t)take(&ispe, 4), h = (uint32_t)take(&ispe, 4);
          if (!ispe.bad) {
            item->ispe_width = w;
            item->ispe_height = h;
          }
        } else if (p->type == FOURCC('h', 'v', 'c', 'C')) {
          item->hvcc = index;
        } else if (p->type == FOURCC('a', 'v', '1', 'C')) {
          item->av1c = index;
        } else if (p->type == FOURCC('a', 'u', 'x', 'C')) {
          /* Skip version and flags; the type is a NUL-terminated URN. */
          size_t n = p->size > 4 ? p->size - 4 : 0;
          const char *urn = (const char *)p->body + 4;
          item->alpha = (n >= 26 && memcmp(urn, "urn:mpeg:hevc:2015:auxid:1", 26) == 0) ||
                        (n >= 43 && memcmp(urn, "urn:mpeg:mpegB:cicp:systems:auxiliary:alpha",
                                           43) == 0);
        }
      }
    }
    if (body.bad) return corrupt(s, "property associations are truncated");
  }
  return found < 0 ? corrupt(s, "properties are malformed") : IC_OK;
}

static ic_status read_iloc(heif_scan *s, reader r) {
  int version = (int)take(&r, 1);
  skip(&r, 3);
  int sizes = (int)take(&r, 1), more = (int)take(&r, 1);
  int offset_size = sizes >> 4, length_size = sizes & 15, base_size = more >> 4;
  int index_size = version >= 1 ? more & 15 : 0;
  uint32_t count = (uint32_t)take(&r, version < 2 ? 2 : 4);
  if (r.bad) return corrupt(s, "item locations are truncated");
  for (uint32_t i = 0; i < count; i++) {
    uint32_t id = (uint32_t)take(&r, version < 2 ? 2 : 4);
    int method = version >= 1 ? (int)(take(&r, 2) & 15) : 0;
    skip(&r, 2); /* data reference index */
    uint64_t base = take(&r, base_size);
    uint32_t extents = (uint32_t)take(&r, 2);
    if (r.bad) return corrupt(s, "item locations are truncated");
    scan_item *item = find_item(s, id);
    if (item) {
      item->located = 1;
      item->method = method;
      item->base = base;
      item->first_extent = s->extent_count;
      item->extent_count = 0;
    }
    for (uint32_t e = 0; e < extents; e++) {
      take(&r, index_size);
      uint64_t offset = take(&r, offset_size), length = take(&r, length_size);
      if (r.bad) return corrupt(s, "item locations are truncated");
      if (!item) continue;
      if (!grow((void **)&s->extents, &s->extent_capacity, s->extent_count,
                sizeof(scan_extent), IC_HEIF_MAX_REFERENCES))
        return ic_fail(s->result, IC_ERR_TOO_COMPLEX, "HEIF file has over %d extents",
                       IC_HEIF_MAX_REFERENCES);
      s->extents[s->extent_count++] = (scan_extent){offset, length};
      item->extent_count++;
    }
  }
  return IC_OK;
}

static ic_status read_meta(heif_scan *s, reader r) {
  skip(&r, 4);
  uint32_t type;
  reader body;
  int found;
  reader pass = r;
  /* iinf first: the other boxes refer to its items. */
  while ((found = next_box(s, &pass, &type, &body)) > 0) {
    if (type == FOURCC('i', 'i', 'n', 'f') && read_iinf(s, body) != IC_OK) return s->result->status;
  }
  if (found < 0) return corrupt(s, "meta box is malformed");
  while ((found = next_box(s, &r, &type, &body)) > 0) {
    ic_status status = IC_OK;
    if (type == FOURCC('p', 'i', 't', 'm')) {
      int version = (int)take(&body, 1);
      skip(&body, 3);
      s->primary = (uint32_t)take(&body, version == 0 ? 2 : 4);
      s->has_primary = !body.bad;
    } else if (type == FOURCC('i', 'r', 'e', 'f')) {
      status = read_iref(s, body);
    } else if (type == FOURCC('i', 'p', 'r', 'p')) {
      status = read_iprp(s, body);
    } else if (type == FOURCC('i', 'l', 'o', 'c')) {
      status = read_iloc(s, body);
    } else if (type == FOURCC('i', 'd', 'a', 't')) {
      s->idat = body.p;
      s->idat_size = body.left;
    }
    if (status != IC_OK) return status;
  }
  return found < 0 ? corrupt(s, "meta box is malformed") : IC_OK;
}

/* ---- item data ---- */

/* An item's bytes: a pointer into the file when it has one extent, else a copy (*owned),
 * bounded by the file's size. 0 when it has none or they lie outside the file. */
static int item_bytes(heif_scan *s, const scan_item *item, const uint8_t **out, size_t *size,
                      uint8_t **owned) {
  *owned = NULL;
  if (!item->located || item->extent_count == 0) return 0;
  const uint8_t *space = item->method == 0 ? s->file : item->method == 1 ? s->idat : NULL;
  size_t space_size = item->method == 0 ? s->file_size : s->idat_size;
  if (!space) return 0;
  uint64_t total = 0;
  for (uint32_t e = 0; e < item->extent_count; e++) {
    scan_extent x = s->extents[item->first_extent + e];
    uint64_t start = item->base + x.offset;
    uint64_t length = x.length ? x.length : (start <= space_size ? space_size - start : 0);
    if (start > space_size || length > space_size - start) return 0;
    total += length;
  }
  if (total > s->file_size) return 0;
  if (item->extent_count == 1) {
    scan_extent x = s->extents[item->first_extent];
    *out = space + item->base + x.offset;
    *size = (size_t)total;
    return 1;
  }
  uint8_t *copy = malloc(total ? (size_t)total : 1);
  if (!copy) return 0;
  size_t at = 0;
  for (uint32_t e = 0; e < item->extent_count; e++) {
    scan_extent x = s->extents[item->first_extent + e];
    uint64_t start = item->base + x.offset;
    uint64_t length = x.length ? x.length : space_size - start;
    memcpy(copy + at, space + start, (size_t)length);
    at += (size_t)length;
  }
  *out = copy;
  *size = at;
  *owned = copy;
  return 1;
}

/* Whether every extent of a located item lies inside the file (or idat): one past the end
 * is a damaged file, which libheif 1.15 reports as a failed allocation. */
static int extents_inside(const heif_scan *s, const scan_item *item) {
  if (!item->located) return 1;
  uint64_t space_size = item->method == 1 ? s->idat_size : s->file_size;
  for (uint32_t e = 0; e < item->extent_count; e++) {
    scan_extent x = s->extents[item->first_extent + e];
    uint64_t start = item->base + x.offset;
    if (start < item->base || start > space_size || x.length > space_size - start) return 0;
  }
  return 1;
}

/* ---- bitstream headers ---- */

typedef ic_bits bits;

static uint32_t bits_take(bits *b, int n) { return ic_bits_read(b, n, 1); }

static uint32_t bits_ue(bits *b) {
  int zeros = 0;
  while (!b->over && bits_take(b, 1) == 0)
    if (++zeros > 31) {
      b->over = 1;
      return 0;
    }
  if (b->over) return 0;
  return (uint32_t)(((uint64_t)1 << zeros) - 1 + bits_take(b, zeros));
}

/* An HEVC SPS NAL unit (with its two-byte header): the coded picture size. */
static int hevc_sps_size(const uint8_t *nal, size_t size, uint32_t *width, uint32_t *height) {
  /* The fields needed lie within the first 200 bytes; emulation prevention removed. */
  uint8_t rbsp[200];
  size_t n = 0, zeros = 0;
  for (size_t i = 2; i < size && n < sizeof(rbsp); i++) {
    if (zeros >= 2 && nal[i] == 3) {
      zeros = 0;
      continue;
    }
    zeros = nal[i] == 0 ? zeros + 1 : 0;
    rbsp[n++] = nal[i];
  }
  bits b = {rbsp, n, 0, 0};
  bits_take(&b, 4); /* sps_video_parameter_set_id */
  int sub_layers = (int)bits_take(&b, 3);
  bits_take(&b, 1);
  bits_take(&b, 32);
  bits_take(&b, 32);
  bits_take(&b, 32); /* the general profile, tier and level: 96 bits */
  int profile_present[8] = {0}, level_present[8] = {0};
  for (int i = 0; i < sub_layers; i++) {
    profile_present[i] = (int)bits_take(&b, 1);
    level_present[i] = (int)bits_take(&b, 1);
  }
  if (sub_layers > 0)
    for (int i = sub_layers; i < 8; i++) bits_take(&b, 2);
  for (int i = 0; i < sub_layers; i++) {
    if (profile_present[i]) {
      bits_take(&b, 32);
      bits_take(&b, 32);
      bits_take(&b, 24);
    }
    if (level_present[i]) bits_take(&b, 8);
  }
  bits_ue(&b); /* sps_seq_parameter_set_id */
  if (bits_ue(&b) == 3) bits_take(&b, 1);
  uint32_t w = bits_ue(&b), h = bits_ue(&b);
  if (b.over) return 0;
  *width = w;
  *height = h;
  return 1;
}

/* AV1 OBUs (low-overhead format, sizes present): the largest maximum frame size any
 * sequence header in them allows. */
static void av1_sizes(const uint8_t *p, size_t size, uint32_t *width, uint32_t *height) {
  size_t at = 0;
  for (int obus = 0; at < size && obus < 4096; obus++) {
    uint8_t header = p[at++];
    int type = header >> 3 & 15, extension = header >> 2 & 1, has_size = header >> 1 & 1;
    if (extension) at++;
    uint64_t length = 0;
    if (has_size) {
      for (int i = 0; i < 8; i++) {
        if (at >= size) return;
        uint8_t byte = p[at++];
        length |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) break;
      }
    } else {
      length = at <= size ? size - at : 0;
    }
    if (at > size || length > size - at) return;
    if (type == 1) {
      bits b = {p + at, (size_t)length, 0, 0};
      bits_take(&b, 3); /* seq_profile */
      bits_take(&b, 1); /* still_picture */
      int reduced = (int)bits_take(&b, 1);
      if (reduced) {
        bits_take(&b, 5);
      } else {
        int timing = (int)bits_take(&b, 1), decoder_model = 0, delay_length = 0;
        if (timing) {
          bits_take(&b, 32);
          bits_take(&b, 32);
          if (bits_take(&b, 1)) {
            int zeros = 0;
            while (!b.over && bits_take(&b, 1) == 0 && zeros < 32) zeros++;
            if (zeros < 32) bits_take(&b, zeros);
          }
          decoder_model = (int)bits_take(&b, 1);
          if (decoder_model) {
            delay_length = (int)bits_take(&b, 5) + 1;
            bits_take(&b, 32);
            bits_take(&b, 10);
          }
        }
        int display_delay = (int)bits_take(&b, 1);
        int points = (int)bits_take(&b, 5) + 1;
        for (int i = 0; i < points && !b.over; i++) {
          bits_take(&b, 12);
          if (bits_take(&b, 5) > 7) bits_take(&b, 1);
          if (decoder_model && bits_take(&b, 1)) {
            bits_take(&b, delay_length);
            bits_take(&b, delay_length);
            bits_take(&b, 1);
          }
          if (display_delay && bits_take(&b, 1)) bits_take(&b, 4);
        }
      }
      int wb = (int)bits_take(&b, 4) + 1, hb = (int)bits_take(&b, 4) + 1;
      uint32_t w = bits_take(&b, wb) + 1, h = bits_take(&b, hb) + 1;
      if (!b.over) {
        if (w > *width) *width = w;
        if (h > *height) *height = h;
      }
    }
    at += (size_t)length;
  }
}

/* The largest coded frame a coded item's decoder is told to make. */
static void coded_size(heif_scan *s, const scan_item *item, uint32_t *width,
                       uint32_t *height) {
  *width = *height = 0;
  const uint8_t *data = NULL;
  size_t size = 0;
  uint8_t *owned = NULL;
  int has_data = item_bytes(s, item, &data, &size, &owned);
  if (item->kind == KIND_HEVC) {
    int length_size = 4;
    if (item->hvcc) {
      const scan_property *p = &s->props[item->hvcc - 1];
      reader r = {p->body, p->size, 0};
      skip(&r, 21);
      length_size = (int)(take(&r, 1) & 3) + 1;
      int arrays = (int)take(&r, 1);
      for (int a = 0; a < arrays && !r.bad; a++) {
        int nal_type = (int)(take(&r, 1) & 0x3f);
        int count = (int)take(&r, 2);
        for (int n = 0; n < count && !r.bad; n++) {
          size_t length = (size_t)take(&r, 2);
          if (r.left < length) break;
          uint32_t w, h;
          if (nal_type == 33 && hevc_sps_size(r.p, length, &w, &h)) {
            if (w > *width) *width = w;
            if (h > *height) *height = h;
          }
          skip(&r, length);
        }
      }
    }
    /* Parameter sets in the item's own data win over hvcC's in the decoder. */
    size_t at = 0;
    for (int nals = 0; has_data && at + (size_t)length_size <= size && nals < 65536; nals++) {
      size_t length = 0;
      for (int i = 0; i < length_size; i++) length = length << 8 | data[at + (size_t)i];
      at += (size_t)length_size;
      if (length > size - at) break;
      uint32_t w, h;
      if (length >= 2 && (data[at] >> 1 & 0x3f) == 33 && hevc_sps_size(data + at, length, &w, &h)) {
        if (w > *width) *width = w;
        if (h > *height) *height = h;
      }
      at += length;
    }
  } else if (item->kind == KIND_AV1) {
    if (item->av1c) {
      const scan_property *p = &s->props[item->av1c - 1];
      if (p->size > 4) av1_sizes(p->body + 4, p->size - 4, width, height);
    }
    if (has_data) av1_sizes(data, size, width, height);
  }
  free(owned);
}

/* A grid's or overlay's output size, and a grid's tile count, from its item data. */
static int derived_size(heif_scan *s, const scan_item *item, uint32_t *width,
                        uint32_t *height, uint32_t *tiles) {
  const uint8_t *data = NULL;
  size_t size = 0;
  uint8_t *owned = NULL;
  if (!item_bytes(s, item, &data, &size, &owned)) return 0;
  reader r = {data, size, 0};
  take(&r, 1); /* version */
  int flags = (int)take(&r, 1);
  int field = flags & 1 ? 4 : 2;
  *tiles = 1;
  if (item->kind == KIND_GRID) {
    uint32_t rows = (uint32_t)take(&r, 1) + 1, columns = (uint32_t)take(&r, 1) + 1;
    *tiles = rows * columns;
  } else {
    skip(&r, 8); /* fill colour */
  }
  *width = (uint32_t)take(&r, field);
  *height = (uint32_t)take(&r, field);
  free(owned);
  return !r.bad;
}

/* ---- the graph ---- */

/* Over the pixel limits: too large, naming which image. */
static ic_status check_size(heif_scan *s, const scan_item *item, const char *what, uint32_t w,
                            uint32_t h) {
  const ic_limits *l = s->limits;
  uint32_t max_width = l->max_width && l->max_width < IC_HEIF_MAX_SIDE ? l->max_width
                                                                        : IC_HEIF_MAX_SIDE;
  uint32_t max_height = l->max_height && l->max_height < IC_HEIF_MAX_SIDE ? l->max_height
                                                                           : IC_HEIF_MAX_SIDE;
  if (w > max_width || h > max_height || (l->max_pixels && (uint64_t)w * h > l->max_pixels)) {
    /* The size the typed error reports (ThumbnailError.tooLarge). */
    s->result->source_width = w;
    s->result->source_height = h;
    char subject[64];
    snprintf(subject, sizeof subject, "HEIF item %u: its %s of ", item->id, what);
    return ic_fail_over_limits(s->result, subject, w, h, max_width, max_height, l->max_pixels);
  }
  return IC_OK;
}

/* Visits item and what libheif reaches from it; works out its size. depth counts the chain. */
static ic_status visit(heif_scan *s, scan_item *item, int depth, int from_derived) {
  if (item->state == 2) {
    if (from_derived && item->kind >= KIND_GRID)
      return ic_fail(s->result, IC_ERR_UNSUPPORTED,
                     "HEIF item %u: a derived image whose input is derived too", item->id);
    return IC_OK;
  }
  if (item->state == 1)
    return ic_fail(s->result, IC_ERR_CORRUPT, "HEIF item %u refers to itself through others",
                   item->id);
  if (depth > IC_HEIF_MAX_DEPTH)
    return ic_fail(s->result, IC_ERR_TOO_COMPLEX, "HEIF references nest deeper than %d",
                   IC_HEIF_MAX_DEPTH);
  if (from_derived && item->kind >= KIND_GRID)
    return ic_fail(s->result, IC_ERR_UNSUPPORTED,
                   "HEIF item %u: a derived image whose input is derived too", item->id);
  item->state = 1;
  ic_status status = IC_OK;
  uint32_t w = item->ispe_width, h = item->ispe_height;
  if ((item->kind == KIND_HEVC || item->kind == KIND_AV1) && !extents_inside(s, item))
    return ic_fail(s->result, IC_ERR_TRUNCATED,
                   "HEIF item %u: its data runs past the end of the file", item->id);
  if (item->kind == KIND_HEVC || item->kind == KIND_AV1) {
    uint32_t cw, ch;
    coded_size(s, item, &cw, &ch);
    if (cw > w) w = cw;
    if (ch > h) h = ch;
    status = check_size(s, item, "coded frame", w, h);
  } else if (item->kind == KIND_GRID || item->kind == KIND_OVERLAY) {
    uint32_t ow = 0, oh = 0, tiles = 0;
    if (!derived_size(s, item, &ow, &oh, &tiles))
      return ic_fail(s->result, IC_ERR_CORRUPT, "HEIF item %u: its %s description is missing",
                     item->id, item->kind == KIND_GRID ? "grid" : "overlay");
    if (ow > w) w = ow;
    if (oh > h) h = oh;
    status = check_size(s, item, item->kind == KIND_GRID ? "grid" : "overlay", w, h);
    uint32_t inputs = 0;
    for (uint32_t r = 0; r < s->ref_count; r++)
      if (s->refs[r].type == FOURCC('d', 'i', 'm', 'g') && s->refs[r].from == item->id) inputs++;
    if (status == IC_OK && item->kind == KIND_GRID && inputs != tiles)
      status = ic_fail(s->result, IC_ERR_CORRUPT, "HEIF item %u: a grid of %u tiles with %u inputs",
                       item->id, tiles, inputs);
    if (status == IC_OK && inputs > IC_HEIF_MAX_TILES)
      status = ic_fail(s->result, IC_ERR_TOO_COMPLEX,
                       "HEIF item %u: %u tiles (at most %d are decoded)", item->id, inputs,
                       IC_HEIF_MAX_TILES);
  }
  if (status != IC_OK) return status;
  item->width = w;
  item->height = h;
  /* What decoding this item touches: derived inputs, and (for alpha and thumbnails, which
   * libheif decodes with or instead of their master) the items that refer to it. */
  uint64_t tile_pixels = 0;
  uint32_t small_tiles = 0;
  for (uint32_t r = 0; r < s->ref_count && status == IC_OK; r++) {
    scan_reference ref = s->refs[r];
    scan_item *next = NULL;
    int derived_input = 0;
    if (ref.type == FOURCC('d', 'i', 'm', 'g') && ref.from == item->id) {
      next = find_item(s, ref.to);
      derived_input = 1;
      if (!next)
        return ic_fail(s->result, IC_ERR_CORRUPT, "HEIF item %u refers to a missing item %u",
                       item->id, ref.to);
    } else if ((ref.type == FOURCC('a', 'u', 'x', 'l') || ref.type == FOURCC('t', 'h', 'm', 'b')) &&
               ref.to == item->id) {
      next = find_item(s, ref.from);
      /* Only alpha planes and thumbnails are decoded; depth maps and the like are not. */
      if (next && ref.type == FOURCC('a', 'u', 'x', 'l') && !next->alpha) next = NULL;
    }
    if (!next) continue;
    status = visit(s, next, depth + 1, derived_input && item->kind >= KIND_GRID);
    if (status == IC_OK && derived_input) {
      uint64_t pixels = (uint64_t)next->width * next->height;
      if (pixels > tile_pixels) tile_pixels = pixels;
      if (pixels < 512 * 512) small_tiles++;
    }
  }
  /* An identity image is its input's size. */
  if (status == IC_OK && item->kind == KIND_IDEN && tile_pixels > (uint64_t)w * h) {
    for (uint32_t r = 0; r < s->ref_count; r++) {
      scan_item *input = s->refs[r].type == FOURCC('d', 'i', 'm', 'g') && s->refs[r].from == item->id
                             ? find_item(s, s->refs[r].to)
                             : NULL;
      if (input) {
        item->width = input->width;
        item->height = input->height;
        break;
      }
    }
  }
  if (status == IC_OK && small_tiles > IC_HEIF_SMALL_TILES)
    status = ic_fail(s->result, IC_ERR_TOO_COMPLEX,
                     "HEIF item %u: %u tiles under 512x512 (at most %d)", item->id, small_tiles,
                     IC_HEIF_SMALL_TILES);
  item->state = 2;
  return status;
}

void ic_heif_scan_free(ic_heif_layout *layout) {
  free(layout->images);
  memset(layout, 0, sizeof(*layout));
}

ic_status ic_heif_scan(const uint8_t *data, size_t size, const ic_limits *limits,
                       ic_result *result, ic_heif_layout *layout) {
  memset(layout, 0, sizeof(*layout));
  heif_scan s = {0};
  s.file = data;
  s.file_size = size;
  s.limits = limits;
  s.result = result;
  reader r = {data, size, 0};
  uint32_t type;
  reader body;
  int found, metas = 0;
  ic_status status = IC_OK;
  while (status == IC_OK && (found = next_box(&s, &r, &type, &body)) > 0) {
    if (type != FOURCC('m', 'e', 't', 'a')) continue;
    if (metas++) {
      status = corrupt(&s, "file has two meta boxes");
      break;
    }
    status = read_meta(&s, body);
  }
  if (status == IC_OK && found == -2) {
    char name[5] = {(char)(type >> 24), (char)(type >> 16), (char)(type >> 8), (char)type, 0};
    for (int i = 0; i < 4; i++)
      if (name[i] < 0x20 || name[i] > 0x7e) name[i] = '?';
    status = ic_fail(result, IC_ERR_TRUNCATED, "HEIF file ends inside its '%s' box", name);
  }
  if (status == IC_OK && found < 0) status = corrupt(&s, "file's boxes are malformed");
  if (status == IC_OK && !metas)
    status = ic_fail(result, IC_ERR_UNSUPPORTED,
                     "HEIF file has no still image (no meta box): image sequences are not read");
  scan_item *primary = status == IC_OK && s.has_primary ? find_item(&s, s.primary) : NULL;
  if (status == IC_OK && !primary) status = corrupt(&s, "file names no primary image item");
  if (status == IC_OK) status = visit(&s, primary, 0, 0);
  /* Every other image libheif's own reading walks: cycles anywhere are refused. */
  for (uint32_t i = 0; status == IC_OK && i < s.item_count; i++)
    if (s.items[i].state == 0 && s.items[i].kind >= KIND_GRID) {
      scan_item *other = &s.items[i];
      status = visit(&s, other, 0, 0);
    }
  if (status == IC_OK) {
    /* What a decode of the primary or of each thumbnail of it allocates: its own planes
     * and those of everything it touched (bounded above by the sum). */
    layout->images = calloc(s.item_count ? s.item_count : 1, sizeof(ic_heif_image));
    if (!layout->images) status = ic_fail(result, IC_ERR_NO_MEMORY, "HEIF scan allocation failed");
  }
  if (status == IC_OK) {
    for (uint32_t i = 0; i < s.item_count; i++) {
      scan_item *item = &s.items[i];
      if (item->state != 2 || item->width == 0) continue;
      /* The primary and its thumbnails: what heif_run may decode. */
      int decoded = item->id == s.primary;
      for (uint32_t ref = 0; ref < s.ref_count && !decoded; ref++)
        decoded = s.refs[ref].type == FOURCC('t', 'h', 'm', 'b') &&
                  s.refs[ref].from == item->id && s.refs[ref].to == s.primary;
      if (!decoded) continue;
      ic_heif_image *image = &layout->images[layout->count++];
      image->id = item->id;
      image->width = item->width;
      image->height = item->height;
      /* Its inputs and alpha, the largest of each kind (tiles decode a few at a time). */
      for (uint32_t ref = 0; ref < s.ref_count; ref++) {
        scan_reference x = s.refs[ref];
        scan_item *input = x.type == FOURCC('d', 'i', 'm', 'g') && x.from == item->id
                               ? find_item(&s, x.to)
                           : x.type == FOURCC('a', 'u', 'x', 'l') && x.to == item->id
                               ? find_item(&s, x.from)
                               : NULL;
        if (!input || input->state != 2) continue;
        uint64_t pixels = (uint64_t)input->width * input->height;
        if (x.type == FOURCC('a', 'u', 'x', 'l')) {
          if (input->alpha && pixels > image->alpha_pixels) image->alpha_pixels = pixels;
        } else if (pixels > image->tile_pixels) {
          image->tile_pixels = pixels;
        }
      }
    }
  }
  free(s.items);
  free(s.refs);
  free(s.props);
  free(s.extents);
  if (status != IC_OK) ic_heif_scan_free(layout);
  return status;
}

const ic_heif_image *ic_heif_layout_image(const ic_heif_layout *layout, uint32_t id) {
  for (uint32_t i = 0; i < layout->count; i++)
    if (layout->images[i].id == id) return &layout->images[i];
  return NULL;
}
