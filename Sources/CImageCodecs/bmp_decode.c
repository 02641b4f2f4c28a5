/*
 * BMP and ICO/CUR decoding, with a parser of our own (no library reads these bytes).
 *
 * BMP: every header version (OS/2 1.x's 12 bytes, OS/2 2.x's 16 to 64, Windows' 40, 52, 56,
 * 108 and 124); 1, 2, 4, 8, 16, 24 and 32 bits a pixel; bit fields (with alpha when a mask
 * gives it); RLE8 and RLE4. Rows stream in the order they are stored, one row held: a
 * bottom-up file (the usual kind) is read as its stored frame and turned upright with the
 * other orientation work, on the small result (orientation 4, a vertical flip). A V5
 * header's embedded ICC profile is read where it lies (after the pixels, usually), when the
 * source can be read out of order.
 *
 * ICO and CUR: a directory of images. The one nearest the output size is decoded (the
 * smallest at least as large, else the largest), since icons are drawn for each size: a PNG
 * entry through the PNG decoder, a DIB entry through the BMP path here with its AND mask as
 * alpha (a 32-bit entry's own alpha wins).
 *
 * Hostile shapes are bounded before any pixel is read: sizes against the limits (and, where
 * the source's size is known, uncompressed rows against the bytes there are); RLE by its
 * pixels (every run clipped to its row, commands capped by the pixels they can paint); ICO
 * entries by count, and each entry's bytes by the source and the decoder's memory limit.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define BMP_FILE_HEADER 14
/* The largest header version (BITMAPV5HEADER); longer headers are read that far. */
#define BMP_MAX_INFO 124
#define BMP_RGB 0
#define BMP_RLE8 1
#define BMP_RLE4 2
#define BMP_BITFIELDS 3
#define BMP_JPEG 4
#define BMP_PNG 5
#define BMP_ALPHABITFIELDS 6
/* An ICO directory entry, and the entries looked at (a real icon has a dozen at most). */
#define ICO_ENTRY 16
#define ICO_MAX_ENTRIES 256

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* What a DIB header says. */
typedef struct dib_info {
  uint32_t info_size;
  uint32_t width, height;
  int top_down;
  int bpp;
  uint32_t compression;
  /* OS/2 1.x: palette entries of 3 bytes, not 4. */
  int core;
  /* Red, green, blue and alpha masks, when the header or the bit-fields block gives them. */
  uint32_t masks[4];
  int has_masks;
  uint32_t colours_used;
  /* A V5 header's embedded profile: offset from the header's start, and size. */
  uint32_t profile_offset, profile_size;
  int profile_embedded, srgb;
} dib_info;

/* One channel of a bit-fields pixel: (value & mask) >> shift, scaled from 0...max to 8 bits. */
typedef struct channel_mask {
  uint32_t mask;
  int shift;
  uint32_t max;
} channel_mask;

typedef struct bmp_decoder {
  ic_decoder base;
  /* Where the pixels are read from: the source, or an ICO entry's bytes. */
  ic_stream *stream;
  dib_info info;
  uint8_t palette[256][4];
  channel_mask channel[4];
  size_t stride;
  /* ICO: the entry's rows and AND mask (1 bit a pixel) in memory, read top row first (the
   * icon needs no flip); NULL when rows stream from the source. */
  const uint8_t *rows;
  const uint8_t *and_mask;
  size_t and_stride;
} bmp_decoder;

int ic_bmp_sniff(const uint8_t *bytes, size_t size) {
  if (size < 18 || bytes[0] != 'B' || bytes[1] != 'M') return 0;
  uint32_t info = le32(bytes + 14);
  return info == 12 || (info >= 16 && info <= 64) || info == 108 || info == 124;
}

/* Reads a DIB header from its first `have` bytes (at least 4). */
static ic_status parse_info(const uint8_t *h, size_t have, dib_info *info, ic_result *result) {
  memset(info, 0, sizeof(*info));
  uint32_t size = le32(h);
  info->info_size = size;
  if (size == 12) {
    if (have < 12) return ic_fail(result, IC_ERR_TRUNCATED, "BMP header ends early");
    info->core = 1;
    info->width = le16(h + 4);
    info->height = le16(h + 6);
    info->bpp = (int)le16(h + 10);
  } else {
    if (size < 16 || (size > 64 && size != 108 && size != 124) || have < 16)
      return ic_fail(result, size < 16 || size > 124 ? IC_ERR_CORRUPT : IC_ERR_TRUNCATED,
                     "BMP header of %u bytes", size);
    int32_t w = (int32_t)le32(h + 4), hh = (int32_t)le32(h + 8);
    if (w <= 0 || hh == 0 || hh == INT32_MIN)
      return ic_fail(result, IC_ERR_CORRUPT, "BMP of %dx%d", w, hh);
    info->width = (uint32_t)w;
    info->top_down = hh < 0;
    info->height = (uint32_t)(hh < 0 ? -hh : hh);
    info->bpp = (int)le16(h + 14);
    size_t known = size < have ? size : have;
    if (known >= 20) info->compression = le32(h + 16);
    if (known >= 36) info->colours_used = le32(h + 32);
    /* OS/2 2.x (16 or 64 bytes) numbers its compressions its own way: 3 is Huffman, 4 RLE24. */
    if ((size == 16 || size == 64) && info->compression >= 3)
      return ic_fail(result, IC_ERR_UNSUPPORTED, "OS/2 BMP compression %u is not read",
                     info->compression);
    if (known >= 52) {
      for (int i = 0; i < 3; i++) info->masks[i] = le32(h + 40 + 4 * i);
      info->has_masks = 1;
    }
    if (known >= 56) info->masks[3] = le32(h + 52);
    if (known >= 108) {
      uint32_t space = le32(h + 56);
      info->srgb = space == 0x73524742 /* 'sRGB' */ || space == 0x57696E20 /* 'Win ' */;
      if (known >= 124 && space == 0x4D424544 /* 'MBED' */) {
        info->profile_embedded = 1;
        info->profile_offset = le32(h + 112);
        info->profile_size = le32(h + 116);
      }
    }
  }
  if (info->width == 0 || info->height == 0)
    return ic_fail(result, IC_ERR_CORRUPT, "BMP of %ux%u", info->width, info->height);
  switch (info->compression) {
  case BMP_RGB:
    if (info->bpp != 1 && info->bpp != 2 && info->bpp != 4 && info->bpp != 8 &&
        info->bpp != 16 && info->bpp != 24 && info->bpp != 32)
      return ic_fail(result, IC_ERR_CORRUPT, "BMP of %d bits a pixel", info->bpp);
    break;
  case BMP_RLE8:
  case BMP_RLE4:
    if (info->bpp != (info->compression == BMP_RLE8 ? 8 : 4))
      return ic_fail(result, IC_ERR_CORRUPT, "RLE%d BMP of %d bits a pixel",
                     info->compression == BMP_RLE8 ? 8 : 4, info->bpp);
    break;
  case BMP_BITFIELDS:
  case BMP_ALPHABITFIELDS:
    if (info->bpp != 16 && info->bpp != 32)
      return ic_fail(result, IC_ERR_CORRUPT, "bit-field BMP of %d bits a pixel", info->bpp);
    break;
  case BMP_JPEG:
  case BMP_PNG:
    return ic_fail(result, IC_ERR_UNSUPPORTED, "a BMP holding a %s is not read",
                   info->compression == BMP_JPEG ? "JPEG" : "PNG");
  default:
    return ic_fail(result, IC_ERR_CORRUPT, "BMP compression %u", info->compression);
  }
  return IC_OK;
}

static channel_mask make_mask(uint32_t mask) {
  channel_mask c = {mask, 0, 0};
  if (!mask) return c;
  while (!(mask & 1)) {
    mask >>= 1;
    c.shift++;
  }
  /* The mask's bits from its lowest set one (gaps inside it are read as they lie). */
  c.max = mask;
  return c;
}

static uint8_t mask_value(const channel_mask *c, uint32_t pixel) {
  if (!c->mask) return 0; /* a channel the bit fields leave out */
  uint32_t v = (pixel & c->mask) >> c->shift;
  if (c->max == 255) return (uint8_t)v;
  return (uint8_t)(((uint64_t)v * 255 + c->max / 2) / c->max);
}

/* Bytes one stored row takes (rows are padded to 4 bytes). */
static uint64_t row_bytes(uint32_t width, int bpp) {
  return (((uint64_t)width * (uint64_t)bpp + 31) / 32) * 4;
}

/* The pixel layout's masks and output channels, once the header and masks are known. */
static void setup_pixels(bmp_decoder *d, int alpha_from_data) {
  dib_info *info = &d->info;
  uint32_t masks[4] = {0, 0, 0, 0};
  if (info->compression == BMP_BITFIELDS || info->compression == BMP_ALPHABITFIELDS) {
    memcpy(masks, info->masks, sizeof(masks));
    if (info->compression == BMP_BITFIELDS && info->info_size < 56) masks[3] = 0;
  } else if (info->bpp == 16) {
    masks[0] = 0x7C00, masks[1] = 0x03E0, masks[2] = 0x001F;
  } else if (info->bpp == 32) {
    masks[0] = 0xFF0000, masks[1] = 0xFF00, masks[2] = 0xFF;
    /* BI_RGB's fourth byte is padding, except in an icon, where it is alpha. */
    masks[3] = alpha_from_data ? 0xFF000000u : 0;
  }
  if (info->bpp == 16)
    for (int i = 0; i < 4; i++) masks[i] &= 0xFFFF;
  for (int i = 0; i < 4; i++) d->channel[i] = make_mask(masks[i]);
  int alpha = (info->bpp == 16 || info->bpp == 32) && masks[3] != 0;
  /* RLE may leave pixels unpainted (a delta, an early end): those are transparent. */
  alpha = alpha || info->compression == BMP_RLE8 || info->compression == BMP_RLE4 ||
          d->and_mask != NULL;
  d->base.header.channels = alpha ? 4 : 3;
  d->stride = (size_t)row_bytes(info->width, info->bpp);
}

/* One stored row (src, stride bytes) as RGB or RGBA. */
static void expand_row(const bmp_decoder *d, const uint8_t *src, uint8_t *dst, uint32_t row) {
  uint32_t w = d->info.width;
  int channels = d->base.header.channels, bpp = d->info.bpp;
  if (bpp <= 8) {
    int per_byte = 8 / bpp;
    uint8_t bits = (uint8_t)((1u << bpp) - 1);
    for (uint32_t x = 0; x < w; x++) {
      int shift = 8 - bpp * (int)(x % (uint32_t)per_byte + 1);
      uint8_t index = (uint8_t)((src[x / (uint32_t)per_byte] >> shift) & bits);
      memcpy(dst + (size_t)x * channels, d->palette[index], (size_t)channels);
    }
  } else if (bpp == 24) {
    for (uint32_t x = 0; x < w; x++) {
      uint8_t *p = dst + (size_t)x * channels;
      p[0] = src[3 * x + 2], p[1] = src[3 * x + 1], p[2] = src[3 * x];
      if (channels == 4) p[3] = 255;
    }
  } else {
    int bytes = bpp / 8;
    for (uint32_t x = 0; x < w; x++) {
      const uint8_t *s = src + (size_t)x * bytes;
      uint32_t pixel = bytes == 2 ? le16(s) : le32(s);
      uint8_t *p = dst + (size_t)x * channels;
      for (int c = 0; c < 3; c++) p[c] = mask_value(&d->channel[c], pixel);
      if (channels == 4) p[3] = d->channel[3].mask ? mask_value(&d->channel[3], pixel) : 255;
    }
  }
  if (d->and_mask && !(bpp == 32 && d->channel[3].mask)) {
    const uint8_t *mask = d->and_mask + (size_t)row * d->and_stride;
    for (uint32_t x = 0; x < w; x++)
      dst[(size_t)x * 4 + 3] = (mask[x / 8] >> (7 - x % 8)) & 1 ? 0 : 255;
  }
}

/* Whether any stored pixel's alpha bits are set, looking at n rows of raw bytes. */
static int rows_have_alpha(const bmp_decoder *d, const uint8_t *rows, size_t n) {
  int bytes = d->info.bpp / 8;
  size_t pixels = (size_t)d->info.width;
  for (size_t r = 0; r < n; r++)
    for (size_t x = 0; x < pixels; x++) {
      const uint8_t *s = rows + r * d->stride + x * (size_t)bytes;
      if (((bytes == 2 ? le16(s) : le32(s)) & d->channel[3].mask) != 0) return 1;
    }
  return 0;
}

/*
 * An alpha channel that is zero everywhere is no alpha (a writer that set the mask and left
 * the bits empty): the picture is opaque, as browsers show it (an icon's AND mask then says
 * what is transparent). Found by reading ahead until a pixel has alpha (the first, in a real
 * alpha image) and putting the stream back; a source that cannot be read twice keeps it.
 */
static ic_status drop_unused_alpha(bmp_decoder *d, ic_result *result) {
  if (!d->channel[3].mask) return IC_OK;
  int used = 0;
  if (d->rows) {
    used = rows_have_alpha(d, d->rows, d->info.height);
  } else {
    uint64_t back = ic_stream_tell(d->stream), size = 0;
    if (back == UINT64_MAX || !ic_stream_size(d->stream, &size)) return IC_OK;
    uint8_t *raw = malloc(d->stride);
    if (!raw) return ic_fail(result, IC_ERR_NO_MEMORY, "BMP row allocation failed");
    for (uint32_t y = 0; y < d->info.height && !used; y++) {
      if (y % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->base.control, result) != IC_OK) break;
      if (ic_stream_read(d->stream, raw, d->stride) < d->stride) break;
      used = rows_have_alpha(d, raw, 1);
    }
    free(raw);
    if (result->status != IC_OK) return result->status;
    if (ic_stream_seek(d->stream, back, d->base.control, result) != IC_OK) return result->status;
  }
  if (used) return IC_OK;
  d->channel[3] = make_mask(0);
  if (!d->and_mask) d->base.header.channels = 3;
  return IC_OK;
}

static void bmp_choose_size(ic_decoder *base, uint32_t need_width, uint32_t need_height,
                            int allow_scaling, uint32_t *width, uint32_t *height) {
  (void)need_width, (void)need_height, (void)allow_scaling;
  *width = base->header.width;
  *height = base->header.height;
}

static ic_status run_plain(bmp_decoder *d, ic_sink *sink, uint8_t *raw, uint8_t *row,
                           ic_result *result) {
  for (uint32_t y = 0; y < d->info.height; y++) {
    if (y % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->base.control, result) != IC_OK)
      return result->status;
    if (d->rows) {
      uint32_t stored = d->info.top_down ? y : d->info.height - 1 - y;
      expand_row(d, d->rows + (size_t)stored * d->stride, row, stored);
      if (sink->row(sink, row, result) != IC_OK) return result->status;
      continue;
    }
    size_t n = ic_stream_read(d->stream, raw, d->stride);
    if (n < d->stride) {
      if (ic_stream_failed(d->stream)) return ic_fail(result, IC_ERR_IO, "cannot read the BMP");
      if (!d->base.limits->accept_damaged)
        return ic_fail(result, IC_ERR_TRUNCATED, "BMP ends at row %u of %u", y, d->info.height);
      memset(raw + n, 0, d->stride - n);
    }
    expand_row(d, raw, row, y);
    if (sink->row(sink, row, result) != IC_OK) return result->status;
  }
  return IC_OK;
}

/* Paints an index at x of an RGBA row. */
static void paint(const bmp_decoder *d, uint8_t *row, uint32_t x, uint8_t index) {
  memcpy(row + (size_t)x * 4, d->palette[index], 3);
  row[(size_t)x * 4 + 3] = 255;
}

/* RLE8 and RLE4, in stored order: every run is clipped to its row, and the commands are
 * capped by what they can paint (each paints a pixel or ends a row, but for a few). */
static ic_status run_rle(bmp_decoder *d, ic_sink *sink, uint8_t *row, ic_result *result) {
  uint32_t w = d->info.width, h = d->info.height, x = 0, y = 0;
  int four = d->info.compression == BMP_RLE4;
  size_t row_size = (size_t)w * 4;
  uint64_t commands = 0, cap = 2 * ((uint64_t)w * h + h) + 1024;
  memset(row, 0, row_size);
  while (y < h) {
    if (++commands > cap) return ic_fail(result, IC_ERR_CORRUPT, "BMP RLE data paints nothing");
    if (commands % 4096 == 0 && ic_check(d->base.control, result) != IC_OK) return result->status;
    uint8_t pair[2];
    if (ic_stream_read(d->stream, pair, 2) < 2) {
      if (!d->base.limits->accept_damaged)
        return ic_fail(result, IC_ERR_TRUNCATED, "BMP RLE data ends at row %u of %u", y, h);
      pair[0] = 0, pair[1] = 1; /* the rest left unpainted */
    }
    if (pair[0] > 0) {
      for (uint32_t i = 0; i < pair[0] && x < w; i++, x++)
        paint(d, row, x, four ? (uint8_t)(i & 1 ? pair[1] & 15 : pair[1] >> 4) : pair[1]);
      continue;
    }
    uint32_t skip_rows = 0;
    if (pair[1] == 0) {
      skip_rows = 1;
      x = 0;
    } else if (pair[1] == 1) {
      skip_rows = h - y;
    } else if (pair[1] == 2) {
      uint8_t delta[2];
      if (ic_stream_read(d->stream, delta, 2) < 2)
        return ic_fail(result, IC_ERR_TRUNCATED, "BMP RLE delta ends early");
      x = x + delta[0] > w ? w : x + delta[0];
      skip_rows = delta[1];
    } else {
      uint32_t count = pair[1];
      size_t bytes = four ? (count + 1) / 2 : count;
      uint8_t literal[256];
      if (ic_stream_read(d->stream, literal, (bytes + 1) & ~(size_t)1) < bytes)
        return ic_fail(result, IC_ERR_TRUNCATED, "BMP RLE literal ends early");
      for (uint32_t i = 0; i < count && x < w; i++, x++)
        paint(d, row, x, four ? (uint8_t)(i & 1 ? literal[i / 2] & 15 : literal[i / 2] >> 4)
                              : literal[i]);
      continue;
    }
    for (; skip_rows > 0 && y < h; skip_rows--, y++) {
      if (sink->row(sink, row, result) != IC_OK) return result->status;
      memset(row, 0, row_size);
    }
  }
  return IC_OK;
}

static ic_status bmp_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  bmp_decoder *d = (bmp_decoder *)base;
  int rle = d->info.compression == BMP_RLE8 || d->info.compression == BMP_RLE4;
  uint8_t *raw = rle ? NULL : malloc(d->stride);
  uint8_t *row = malloc((size_t)d->info.width * 4);
  ic_status status = IC_OK;
  if (!row || (!rle && !raw))
    status = ic_fail(result, IC_ERR_NO_MEMORY, "BMP row allocation failed");
  if (status == IC_OK)
    status = sink->begin(sink, d->info.width, d->info.height, base->header.channels, result);
  if (status == IC_OK)
    status = rle ? run_rle(d, sink, row, result) : run_plain(d, sink, raw, row, result);
  free(raw);
  free(row);
  return status;
}

static uint64_t bmp_working_memory(ic_decoder *base) {
  bmp_decoder *d = (bmp_decoder *)base;
  return d->stride + (uint64_t)d->info.width * 4 + IC_DECODE_BASE_BYTES;
}

static void bmp_destroy(ic_decoder *base) {
  ic_colour_info_clear(&base->header.colour);
  free(base);
}

static const ic_decoder_ops bmp_ops = {bmp_choose_size, bmp_run, bmp_destroy,
                                       bmp_working_memory, NULL};

/* The palette: `declared` entries (0: 2^bpp), of 3 or 4 bytes, at most `room` bytes of them;
 * indices past it are black. */
static ic_status read_palette(bmp_decoder *d, uint64_t room, ic_result *result) {
  for (int i = 0; i < 256; i++) d->palette[i][0] = d->palette[i][1] = d->palette[i][2] = 0;
  for (int i = 0; i < 256; i++) d->palette[i][3] = 255;
  if (d->info.bpp > 8) return IC_OK;
  uint32_t entry = d->info.core ? 3 : 4, most = 1u << d->info.bpp;
  uint32_t count = d->info.colours_used && d->info.colours_used < most ? d->info.colours_used
                                                                        : most;
  if ((uint64_t)count * entry > room) count = (uint32_t)(room / entry);
  uint8_t bytes[256 * 4];
  if (ic_stream_read(d->stream, bytes, (size_t)count * entry) < (size_t)count * entry)
    return ic_fail(result, IC_ERR_TRUNCATED, "BMP palette ends early");
  for (uint32_t i = 0; i < count; i++) {
    d->palette[i][0] = bytes[i * entry + 2];
    d->palette[i][1] = bytes[i * entry + 1];
    d->palette[i][2] = bytes[i * entry];
  }
  return IC_OK;
}

/* The bit-fields block after a 40-byte header (masks the header itself does not hold). */
static ic_status read_masks(bmp_decoder *d, ic_result *result) {
  dib_info *info = &d->info;
  if (info->has_masks ||
      (info->compression != BMP_BITFIELDS && info->compression != BMP_ALPHABITFIELDS))
    return IC_OK;
  int count = info->compression == BMP_ALPHABITFIELDS ? 4 : 3;
  uint8_t bytes[16];
  if (ic_stream_read(d->stream, bytes, (size_t)count * 4) < (size_t)count * 4)
    return ic_fail(result, IC_ERR_TRUNCATED, "BMP bit fields end early");
  for (int i = 0; i < count; i++) info->masks[i] = le32(bytes + 4 * i);
  info->has_masks = 1;
  return IC_OK;
}

/* A V5 header's embedded profile, read where it lies and the stream put back; skipped when
 * the source cannot be read out of order. */
static void read_profile(bmp_decoder *d, uint64_t info_start, ic_result *result) {
  dib_info *info = &d->info;
  ic_colour_info *colour = &d->base.header.colour;
  colour->srgb = info->srgb;
  if (!info->profile_embedded || info->profile_size == 0) return;
  if (info->profile_size > d->base.limits->max_profile_bytes) {
    colour->damage = IC_PROFILE_OVERSIZED;
    return;
  }
  uint64_t back = ic_stream_tell(d->stream), size = 0;
  if (back == UINT64_MAX || !ic_stream_size(d->stream, &size)) return;
  uint64_t at = info_start + info->profile_offset;
  if (at > size || info->profile_size > size - at) {
    colour->damage = IC_PROFILE_BROKEN;
    return;
  }
  uint8_t *icc = malloc(info->profile_size);
  ic_result scratch = {0};
  if (icc && ic_stream_seek(d->stream, at, d->base.control, &scratch) == IC_OK &&
      ic_stream_read(d->stream, icc, info->profile_size) == info->profile_size) {
    colour->icc = icc;
    colour->icc_size = info->profile_size;
  } else {
    free(icc);
    colour->damage = IC_PROFILE_BROKEN;
  }
  if (ic_stream_seek(d->stream, back, d->base.control, &scratch) != IC_OK)
    ic_fail(result, scratch.status, "%s", scratch.message);
}

/* Checks the size against the limits and records it on the header. */
static ic_status accept_size(bmp_decoder *d, ic_result *result) {
  if (ic_check_limits(d->info.width, d->info.height, d->base.limits, result) != IC_OK)
    return result->status;
  d->base.header.width = d->info.width;
  d->base.header.height = d->info.height;
  /* Bottom-up rows are the picture flipped: turned upright on the small result. */
  d->base.header.orientation = d->info.top_down ? 1 : 4;
  return IC_OK;
}

/* Fails when uncompressed rows need more bytes than the source has after `start`. */
static ic_status check_room(bmp_decoder *d, uint64_t start, ic_result *result) {
  uint64_t size = 0;
  if (d->base.limits->accept_damaged || d->info.compression == BMP_RLE8 ||
      d->info.compression == BMP_RLE4 || !ic_stream_size(d->stream, &size))
    return IC_OK;
  uint64_t need = row_bytes(d->info.width, d->info.bpp) * d->info.height;
  if (start > size || need > size - start)
    return ic_fail(result, IC_ERR_TRUNCATED, "BMP rows need %llu bytes; %llu are there",
                   (unsigned long long)need,
                   (unsigned long long)(start > size ? 0 : size - start));
  return IC_OK;
}

ic_status ic_bmp_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                      ic_result *result, ic_decoder **out) {
  uint8_t head[BMP_FILE_HEADER + BMP_MAX_INFO];
  size_t have = ic_stream_read(stream, head, BMP_FILE_HEADER + 4);
  if (have < BMP_FILE_HEADER + 4) return ic_fail(result, IC_ERR_TRUNCATED, "BMP ends early");
  uint32_t info_size = le32(head + BMP_FILE_HEADER);
  size_t want = info_size < BMP_MAX_INFO ? info_size : BMP_MAX_INFO;
  if (want > 4) have += ic_stream_read(stream, head + have, want - 4);
  dib_info info;
  if (parse_info(head + BMP_FILE_HEADER, have - BMP_FILE_HEADER, &info, result) != IC_OK)
    return result->status;
  bmp_decoder *d = ic_decoder_new(sizeof(*d), &bmp_ops, limits, control, result);
  if (!d) return result->status;
  d->stream = stream;
  d->info = info;
  uint64_t pixels_at = le32(head + 10), info_end = BMP_FILE_HEADER + (uint64_t)info_size;
  ic_status status = accept_size(d, result);
  /* A header longer than the versions known is skipped to its end. */
  if (status == IC_OK) status = ic_stream_seek(stream, info_end, control, result);
  if (status == IC_OK) status = read_masks(d, result);
  if (status == IC_OK) {
    uint64_t at = ic_stream_tell(stream);
    if (at == UINT64_MAX || pixels_at < at)
      status = ic_fail(result, IC_ERR_CORRUPT, "BMP pixels start inside its header");
    else
      status = read_palette(d, pixels_at - at, result);
  }
  if (status == IC_OK) read_profile(d, BMP_FILE_HEADER, result);
  if (status == IC_OK && result->status == IC_OK)
    status = ic_stream_seek(stream, pixels_at, control, result);
  if (status == IC_OK) status = result->status;
  if (status == IC_OK) status = check_room(d, pixels_at, result);
  if (status != IC_OK) {
    bmp_destroy(&d->base);
    return status;
  }
  setup_pixels(d, 0);
  if (drop_unused_alpha(d, result) != IC_OK) {
    bmp_destroy(&d->base);
    return result->status;
  }
  *out = &d->base;
  return IC_OK;
}

/* ---- ICO and CUR ---------------------------------------------------------------------- */

typedef struct ico_entry {
  uint32_t offset, size;
  /* The image's own size (its PNG header's, or its DIB's), not the directory's. */
  uint32_t width, height;
  int png;
} ico_entry;

typedef struct ico_decoder {
  ic_decoder base;
  ic_stream *stream;
  ico_entry entries[ICO_MAX_ENTRIES];
  uint32_t count;
  /* The entry choose_size picked. */
  uint32_t chosen;
} ico_decoder;

int ic_ico_sniff(const uint8_t *bytes, size_t size) {
  if (size < 6 + ICO_ENTRY || le16(bytes) != 0 || (le16(bytes + 2) != 1 && le16(bytes + 2) != 2))
    return 0;
  /* An ISO-BMFF box of 256 bytes starts the same way. */
  if (memcmp(bytes + 4, "ftyp", 4) == 0) return 0;
  uint32_t count = le16(bytes + 4);
  uint32_t entry_size = le32(bytes + 6 + 8), entry_offset = le32(bytes + 6 + 12);
  return count > 0 && entry_size > 0 && entry_offset >= 6 + 16 * count;
}

static void ico_choose_size(ic_decoder *base, uint32_t need_width, uint32_t need_height,
                            int allow_scaling, uint32_t *width, uint32_t *height) {
  ico_decoder *d = (ico_decoder *)base;
  (void)allow_scaling; /* another entry is another picture, not a scaled decode */
  /* The smallest entry covering the need; else the largest (the header's size). Ties go to
   * the first, as the directory orders them. */
  uint32_t best = UINT32_MAX, largest = 0;
  for (uint32_t i = 0; i < d->count; i++) {
    const ico_entry *e = &d->entries[i];
    uint64_t area = (uint64_t)e->width * e->height;
    if (area > (uint64_t)d->entries[largest].width * d->entries[largest].height) largest = i;
    if (e->width < need_width || e->height < need_height) continue;
    if (best == UINT32_MAX ||
        area < (uint64_t)d->entries[best].width * d->entries[best].height)
      best = i;
  }
  d->chosen = best == UINT32_MAX ? largest : best;
  *width = d->entries[d->chosen].width;
  *height = d->entries[d->chosen].height;
}

/* An entry's DIB: its header (height doubled: the XOR rows, then the AND mask), palette,
 * rows, mask, all in memory. */
static ic_status open_dib(ico_decoder *icon, ic_stream *bytes, const ico_entry *entry,
                          const uint8_t *data, ic_result *result, bmp_decoder **out) {
  dib_info info;
  if (parse_info(data, entry->size, &info, result) != IC_OK) return result->status;
  if (info.compression == BMP_RLE8 || info.compression == BMP_RLE4)
    return ic_fail(result, IC_ERR_CORRUPT, "an icon's DIB is RLE-compressed");
  if (info.top_down) return ic_fail(result, IC_ERR_CORRUPT, "an icon's DIB is top-down");
  info.height /= 2;
  if (info.height == 0) return ic_fail(result, IC_ERR_CORRUPT, "an icon's DIB has no rows");
  bmp_decoder *d = ic_decoder_new(sizeof(*d), &bmp_ops, icon->base.limits, icon->base.control, result);
  if (!d) return result->status;
  d->stream = bytes;
  d->info = info;
  ic_status status = accept_size(d, result);
  if (status == IC_OK) status = ic_stream_seek(bytes, info.info_size, icon->base.control, result);
  if (status == IC_OK) status = read_masks(d, result);
  if (status == IC_OK) status = read_palette(d, entry->size - ic_stream_tell(bytes), result);
  uint64_t rows = ic_stream_tell(bytes);
  uint64_t xor_bytes = row_bytes(info.width, info.bpp) * info.height;
  uint64_t and_stride = row_bytes(info.width, 1), and_bytes = and_stride * info.height;
  if (status == IC_OK && (xor_bytes > entry->size - rows || and_bytes > entry->size - rows - xor_bytes)) {
    /* Some writers leave the mask out of a 32-bit entry, whose alpha stands alone. */
    if (info.bpp == 32 && xor_bytes <= entry->size - rows) and_bytes = 0;
    else status = ic_fail(result, IC_ERR_TRUNCATED, "an icon's DIB ends early");
  }
  if (status != IC_OK) {
    bmp_destroy(&d->base);
    return status;
  }
  d->rows = data + rows;
  d->base.header.orientation = 1;
  /* A V5 header's profile, in the entry's bytes: where it lies, no AND mask does. */
  uint64_t and_at = rows + xor_bytes;
  if (info.profile_embedded && info.profile_size && info.profile_offset < entry->size &&
      info.profile_size <= entry->size - info.profile_offset) {
    if (info.profile_offset < and_at + and_bytes && info.profile_offset + info.profile_size > and_at)
      and_bytes = 0;
    if (info.profile_size > icon->base.limits->max_profile_bytes) {
      d->base.header.colour.damage = IC_PROFILE_OVERSIZED;
    } else if ((d->base.header.colour.icc = malloc(info.profile_size))) {
      memcpy(d->base.header.colour.icc, data + info.profile_offset, info.profile_size);
      d->base.header.colour.icc_size = info.profile_size;
    }
  }
  d->base.header.colour.srgb = info.srgb;
  if (and_bytes) {
    d->and_mask = data + and_at;
    d->and_stride = (size_t)and_stride;
  }
  setup_pixels(d, 1);
  drop_unused_alpha(d, result);
  *out = d;
  return IC_OK;
}

static ic_status ico_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  ico_decoder *d = (ico_decoder *)base;
  const ico_entry *entry = &d->entries[d->chosen];
  uint8_t *data = malloc(entry->size);
  if (!data) return ic_fail(result, IC_ERR_NO_MEMORY, "icon entry allocation failed");
  ic_status status = ic_stream_seek(d->stream, entry->offset, d->base.control, result);
  if (status == IC_OK && ic_stream_read(d->stream, data, entry->size) < entry->size)
    status = ic_fail(result, IC_ERR_TRUNCATED, "icon entry ends early");
  ic_stream bytes;
  ic_source source = {.data = data, .size = entry->size, .path = NULL, .fd = -1};
  if (status == IC_OK) status = ic_stream_open(&bytes, &source, result);
  if (status != IC_OK) {
    free(data);
    return status;
  }
  ic_decoder *inner = NULL;
  if (entry->png) {
    status = ic_png_open(&bytes, d->base.limits, d->base.control, result, &inner);
  } else {
    bmp_decoder *dib = NULL;
    status = open_dib(d, &bytes, entry, data, result, &dib);
    inner = dib ? &dib->base : NULL;
  }
  if (status == IC_OK &&
      (inner->header.width != entry->width || inner->header.height != entry->height))
    status = ic_fail(result, IC_ERR_CORRUPT, "icon entry changed its size");
  if (status == IC_OK) {
    /* Full size (an entry is drawn at its size); a PNG entry's own orientation is not an
     * icon's. */
    uint32_t w, h;
    inner->ops->choose_size(inner, entry->width, entry->height, 0, &w, &h);
    status = ic_decoder_run_inner(inner, base, sink, result);
  }
  if (inner) inner->ops->destroy(inner);
  ic_stream_close(&bytes);
  free(data);
  return status;
}

static uint64_t ico_working_memory(ic_decoder *base) {
  ico_decoder *d = (ico_decoder *)base;
  const ico_entry *e = &d->entries[d->chosen];
  /* The entry's bytes, and (for an interlaced PNG) its whole picture. */
  return e->size + (uint64_t)e->width * e->height * 4 + (uint64_t)e->width * 8 +
         2 * IC_DECODE_BASE_BYTES;
}

static void ico_destroy(ic_decoder *base) {
  ic_colour_info_clear(&base->header.colour);
  free(base);
}

static const ic_decoder_ops ico_ops = {ico_choose_size, ico_run, ico_destroy,
                                       ico_working_memory, NULL};

/* An entry's real size, from the first bytes of its image. */
static ic_status probe_entry(ico_decoder *d, ico_entry *e, uint64_t file_size, ic_result *result) {
  if (e->offset > file_size || e->size > file_size - e->offset)
    return ic_fail(result, IC_ERR_CORRUPT, "icon entry lies past the end of the file");
  uint8_t head[24];
  if (file_size - e->offset < sizeof(head))
    return ic_fail(result, IC_ERR_TRUNCATED, "icon entry ends early");
  if (ic_stream_seek(d->stream, e->offset, d->base.control, result) != IC_OK) return result->status;
  if (ic_stream_read(d->stream, head, sizeof(head)) < sizeof(head))
    return ic_fail(result, IC_ERR_TRUNCATED, "icon entry ends early");
  if (memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0) {
    e->png = 1;
    e->width = ic_be32(head + 16);
    e->height = ic_be32(head + 20);
  } else {
    dib_info info;
    if (parse_info(head, sizeof(head), &info, result) != IC_OK) return result->status;
    e->width = info.width;
    e->height = info.height / 2;
    /* Some writers put a wrong size in the directory: the DIB's own header says what it
     * holds (its palette, rows and mask), read as far as the file goes. */
    uint64_t colours = info.bpp > 8 ? 0
                       : info.colours_used && info.colours_used < (1u << info.bpp)
                           ? info.colours_used
                           : 1u << info.bpp;
    uint64_t need = info.info_size + colours * (info.core ? 3 : 4) + 16 +
                    (row_bytes(info.width, info.bpp) + row_bytes(info.width, 1)) * e->height;
    if (need > e->size) e->size = (uint32_t)(need < file_size - e->offset ? need : file_size - e->offset);
  }
  if (e->width == 0 || e->height == 0) return ic_fail(result, IC_ERR_CORRUPT, "icon entry of no size");
  if (d->base.limits->max_decoder_memory && e->size > d->base.limits->max_decoder_memory)
    return ic_fail(result, IC_ERR_TOO_LARGE, "icon entry of %u bytes", e->size);
  return ic_check_limits(e->width, e->height, d->base.limits, result);
}

ic_status ic_ico_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                      ic_result *result, ic_decoder **out) {
  uint8_t head[6];
  uint64_t file_size = 0;
  if (ic_stream_read(stream, head, 6) < 6) return ic_fail(result, IC_ERR_TRUNCATED, "ICO ends early");
  if (!ic_stream_size(stream, &file_size))
    return ic_fail(result, IC_ERR_UNSUPPORTED, "an icon is read from a file or from memory, not a pipe");
  ico_decoder *d = ic_decoder_new(sizeof(*d), &ico_ops, limits, control, result);
  if (!d) return result->status;
  d->stream = stream;
  uint32_t listed = le16(head + 4);
  uint32_t count = listed < ICO_MAX_ENTRIES ? listed : ICO_MAX_ENTRIES;
  ic_status status = IC_OK;
  uint8_t entry[ICO_ENTRY];
  /* The directory first (a sequential read), then each image's own header. */
  for (uint32_t i = 0; i < count && status == IC_OK; i++) {
    if (ic_stream_read(stream, entry, ICO_ENTRY) < ICO_ENTRY)
      status = ic_fail(result, IC_ERR_TRUNCATED, "ICO directory ends early");
    d->entries[i].size = le32(entry + 8);
    d->entries[i].offset = le32(entry + 12);
  }
  /* Entries that cannot be read are passed over, as long as one can. */
  ic_result first_failure = {0};
  for (uint32_t i = 0; i < count && status == IC_OK; i++) {
    if (ic_check(control, result) != IC_OK) {
      status = result->status;
      break;
    }
    ico_entry e = d->entries[i];
    ic_result attempt = {0};
    if (probe_entry(d, &e, file_size, &attempt) == IC_OK)
      d->entries[d->count++] = e;
    else if (first_failure.status == IC_OK)
      first_failure = attempt;
  }
  if (status == IC_OK && d->count == 0)
    status = ic_fail(result, first_failure.status ? first_failure.status : IC_ERR_CORRUPT, "%s",
                     first_failure.status ? first_failure.message : "ICO without images");
  if (status != IC_OK) {
    ico_destroy(&d->base);
    return status;
  }
  uint32_t w = 0, h = 0;
  ico_choose_size(&d->base, UINT32_MAX, UINT32_MAX, 0, &w, &h);
  d->base.header.width = w;
  d->base.header.height = h;
  d->base.header.orientation = 1;
  d->base.header.channels = 4;
  /* The entry is picked for the output size itself, with no headroom: a 16 px box shows the
   * 16 px drawing, not a larger one shrunk. */
  d->base.exact_scaling = 1;
  *out = &d->base;
  return IC_OK;
}
