/*
 * TIFF decoding (libtiff): the first page, or the smallest of its reduced-resolution levels
 * (pyramid levels in the main chain or in SubIFDs) that covers the output, so a gigapixel
 * pyramid costs one small level.
 *
 * Rows stream. Strips are read a scanline at a time (libtiff reads a large strip in parts);
 * tiles a row of tiles at a time. 1-, 2-, 4-, 8- and 16-bit grey, palette, RGB (alpha
 * associated or not) and CMYK (through its profile or the standard one) are expanded here;
 * JPEG-compressed YCbCr is upsampled by libjpeg inside libtiff. Every other layout (separate
 * planes, subsampled YCbCr, float, CIELab, LogLuv...) goes through libtiff's RGBA reader, a
 * band of rows at a time. The orientation tag is applied on the small result, the ICC
 * profile by the colour step.
 *
 * Limits before pixels: the size of the level read against the limits (a pyramid's page may
 * be larger, as long as a level that is read is not), samples and bit
 * depths checked, directories walked at most IC_TIFF_MAX_DIRECTORIES (libtiff refuses IFD
 * loops), SubIFDs at most IC_TIFF_MAX_SUBIFDS, and libtiff's own allocations capped at the
 * decoder's memory limit (TIFFOpenOptionsSetMaxSingleMemAlloc). libtiff's messages go to the
 * result, never to stderr.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <unistd.h>

#define IC_TIFF_MAX_DIRECTORIES 64
#define IC_TIFF_MAX_SUBIFDS 16
#define IC_TIFF_MAX_LEVELS 32
/* libtiff's own allocations when the limits set no decoder memory. */
#define IC_TIFF_DEFAULT_ALLOC (256u << 20)
/* What libtiff holds of a strip's compressed bytes when reading scanlines: strips under
 * 10 MB are read whole (tif_read.c), larger ones in parts. */
#define IC_TIFF_RAW_STRIP (10u << 20)

/* One readable picture of the page: the page itself or a reduced-resolution level. */
typedef struct tiff_level {
  /* Its directory: an index in the main chain, or a SubIFD's offset. */
  tdir_t index;
  uint64_t subifd;
  uint32_t width, height;
} tiff_level;

/* One libtiff handle's reading: the bytes, its own position, and what libtiff said. */
typedef struct tiff_io {
  ic_random bytes;
  uint64_t position;
  int short_read;
  /* libtiff's first error, and its last warning. */
  char message[200], warning[200];
  int failed;
} tiff_io;

typedef struct tiff_decoder {
  ic_decoder base;
  TIFF *tif;
  tiff_io io;
  tiff_level levels[IC_TIFF_MAX_LEVELS];
  uint32_t level_count, chosen;
  /* JPEG strips decoded by the JPEG decoder at num/8 (DCT scaling); 8 when libtiff decodes. */
  unsigned jpeg_num;
} tiff_decoder;

int ic_tiff_sniff(const uint8_t *bytes, size_t size) {
  if (size < 4) return 0;
  return (bytes[0] == 'I' && bytes[1] == 'I' && (bytes[2] == 42 || bytes[2] == 43) &&
          bytes[3] == 0) ||
         (bytes[0] == 'M' && bytes[1] == 'M' && bytes[2] == 0 && (bytes[3] == 42 || bytes[3] == 43));
}

/* ---- libtiff's I/O and messages -------------------------------------------------------- */

static tmsize_t io_read(thandle_t handle, void *buffer, tmsize_t size) {
  tiff_io *d = handle;
  if (size <= 0) return 0;
  size_t done = ic_random_read(&d->bytes, d->position, buffer, (size_t)size);
  d->position += done;
  if (done < (size_t)size) d->short_read = 1;
  return (tmsize_t)done;
}

static tmsize_t io_write(thandle_t handle, void *buffer, tmsize_t size) {
  (void)handle, (void)buffer, (void)size;
  return -1;
}

static toff_t io_seek(thandle_t handle, toff_t offset, int whence) {
  tiff_io *d = handle;
  uint64_t base = whence == SEEK_CUR ? d->position : whence == SEEK_END ? d->bytes.size : 0;
  if (offset > UINT64_MAX - base) return (toff_t)-1;
  d->position = base + offset;
  return d->position;
}

static int io_close(thandle_t handle) {
  (void)handle;
  return 0;
}

static toff_t io_size(thandle_t handle) { return ((tiff_io *)handle)->bytes.size; }

static int io_map(thandle_t handle, void **base, toff_t *size) {
  (void)handle, (void)base, (void)size;
  return 0;
}

static void io_unmap(thandle_t handle, void *base, toff_t size) {
  (void)handle, (void)base, (void)size;
}

static int on_error(TIFF *tif, void *user, const char *module, const char *format, va_list args) {
  (void)tif, (void)module;
  tiff_io *d = user;
  if (!d->failed) {
    vsnprintf(d->message, sizeof(d->message), format, args);
    d->failed = 1;
  }
  return 1;
}

/* Warnings are kept too: a codec that fails after warning only (a fax page it cannot
 * follow) is explained by its last one. */
static int on_warning(TIFF *tif, void *user, const char *module, const char *format,
                      va_list args) {
  (void)tif, (void)module;
  tiff_io *d = user;
  vsnprintf(d->warning, sizeof(d->warning), format, args);
  return 1;
}

/* Messages libtiff gives without a TIFF (before one is open) go nowhere. */
static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;
static void quiet_globals(void) {
  TIFFSetErrorHandler(NULL);
  TIFFSetWarningHandler(NULL);
}

/* The result failed with libtiff's message: truncated when a read came up short. */
static ic_status fail_from_io(const tiff_io *d, const char *what, ic_result *result) {
  if (result->status != IC_OK) return result->status;
  if (d->short_read) return ic_fail(result, IC_ERR_TRUNCATED, "TIFF %s: data ends early", what);
  return ic_fail(result, IC_ERR_CORRUPT, "TIFF %s: %s", what,
                 d->failed ? d->message : d->warning[0] ? d->warning : "unreadable");
}

static ic_status fail_from_tiff(tiff_decoder *d, const char *what, ic_result *result) {
  return fail_from_io(&d->io, what, result);
}

/* A libtiff handle over io's bytes: no mapping (the bytes are read, never mapped), strip and
 * tile offsets loaded as needed (a pyramid's full level has 150,000 tiles), allocations
 * capped at the decoder's memory limit, messages to io. */
static TIFF *open_handle(tiff_io *io, const ic_limits *limits) {
  TIFFOpenOptions *options = TIFFOpenOptionsAlloc();
  if (!options) return NULL;
  TIFFOpenOptionsSetMaxSingleMemAlloc(
      options, limits->max_decoder_memory ? (tmsize_t)limits->max_decoder_memory
                                          : (tmsize_t)IC_TIFF_DEFAULT_ALLOC);
  TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, io);
  TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, io);
  TIFF *tif = TIFFClientOpenExt("TIFF", "rmO", io, io_read, io_write, io_seek, io_close, io_size,
                                io_map, io_unmap, options);
  TIFFOpenOptionsFree(options);
  return tif;
}

/* ---- the page and its levels ------------------------------------------------------------ */

static ic_status set_level(tiff_decoder *d, const tiff_level *level, ic_result *result) {
  int ok = level->subifd ? TIFFSetSubDirectory(d->tif, level->subifd)
                         : TIFFSetDirectory(d->tif, level->index);
  return ok ? IC_OK : fail_from_tiff(d, "directory", result);
}

/* A level's size against the limits; the result keeps the page's size as the source's. */
static ic_status check_level(tiff_decoder *d, const tiff_level *level, ic_result *result) {
  ic_status status = ic_check_limits(level->width, level->height, d->base.limits, result);
  result->source_width = d->levels[0].width;
  result->source_height = d->levels[0].height;
  return status;
}

static uint32_t subfile_type(TIFF *tif) {
  uint32_t type = 0;
  TIFFGetField(tif, TIFFTAG_SUBFILETYPE, &type);
  return type;
}

static void add_level(tiff_decoder *d, tdir_t index, uint64_t subifd) {
  uint32_t w = 0, h = 0;
  TIFFGetField(d->tif, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(d->tif, TIFFTAG_IMAGELENGTH, &h);
  if (!w || !h || d->level_count == IC_TIFF_MAX_LEVELS) return;
  /* A level of the page has its shape (a thumbnail of another crop is not one). */
  if (d->level_count && !ic_same_shape(w, h, d->levels[0].width, d->levels[0].height)) return;
  if (d->level_count && (w >= d->levels[0].width || h >= d->levels[0].height)) return;
  d->levels[d->level_count++] = (tiff_level){index, subifd, w, h};
}

/* The first page (the first directory that is not a reduced image, else the first), then its
 * reduced levels: directories flagged reduced that follow it, and its SubIFDs. */
static ic_status find_levels(tiff_decoder *d, ic_result *result) {
  TIFF *tif = d->tif;
  tdir_t page = 0;
  for (tdir_t i = 0; i < IC_TIFF_MAX_DIRECTORIES; i++) {
    if (!(subfile_type(tif) & FILETYPE_REDUCEDIMAGE)) {
      page = i;
      break;
    }
    if (!TIFFReadDirectory(tif)) break;
  }
  if (!TIFFSetDirectory(tif, page)) return fail_from_tiff(d, "directory", result);
  add_level(d, page, 0);
  if (d->level_count == 0) return ic_fail(result, IC_ERR_CORRUPT, "TIFF page has no size");
  /* SubIFDs of the page: read now, before the directory moves on. */
  uint16_t count = 0;
  uint64_t *offsets = NULL, subifds[IC_TIFF_MAX_SUBIFDS];
  if (TIFFGetField(tif, TIFFTAG_SUBIFD, &count, &offsets) && offsets) {
    if (count > IC_TIFF_MAX_SUBIFDS) count = IC_TIFF_MAX_SUBIFDS;
    memcpy(subifds, offsets, count * sizeof(uint64_t));
  } else {
    count = 0;
  }
  for (tdir_t i = page + 1; i < IC_TIFF_MAX_DIRECTORIES && TIFFReadDirectory(tif); i++) {
    if (ic_check(d->base.control, result) != IC_OK) return result->status;
    if (!(subfile_type(tif) & FILETYPE_REDUCEDIMAGE)) break; /* the next page */
    add_level(d, i, 0);
  }
  for (uint16_t i = 0; i < count; i++)
    if (subifds[i] && TIFFSetSubDirectory(tif, subifds[i]) &&
        (subfile_type(tif) & FILETYPE_REDUCEDIMAGE))
      add_level(d, 0, subifds[i]);
  d->io.failed = 0; /* a broken level is not the page's failure */
  return set_level(d, &d->levels[0], result);
}

/* ---- rows ------------------------------------------------------------------------------- */

/* One sample of a stored row as 8 bits, by its index in the row. */
typedef uint8_t (*sample_fn)(const uint8_t *row, size_t index, int bits);

static uint8_t sample_u8(const uint8_t *row, size_t i, int bits) {
  (void)bits;
  return row[i];
}
/* Wider samples arrive in the host's byte order (libtiff swaps them). */
static uint8_t sample_u16(const uint8_t *row, size_t i, int bits) {
  (void)bits;
  uint16_t v;
  memcpy(&v, row + 2 * i, 2);
  return (uint8_t)(((uint32_t)v + 128) / 257);
}
static uint8_t sample_u32(const uint8_t *row, size_t i, int bits) {
  (void)bits;
  uint32_t v;
  memcpy(&v, row + 4 * i, 4);
  return (uint8_t)(v >> 24);
}
/* A float sample of 0...1 as 8 bits; NaN is 0 (a cast of NaN is undefined). */
static uint8_t unit(double v) { return (uint8_t)(!(v > 0) ? 0 : v >= 1 ? 255 : v * 255 + 0.5); }
static uint8_t sample_f32(const uint8_t *row, size_t i, int bits) {
  (void)bits;
  float v;
  memcpy(&v, row + 4 * i, 4);
  return unit(v);
}
static uint8_t sample_f64(const uint8_t *row, size_t i, int bits) {
  (void)bits;
  double v;
  memcpy(&v, row + 8 * i, 8);
  return unit(v);
}
static uint8_t sample_f16(const uint8_t *row, size_t i, int bits) {
  (void)bits;
  uint16_t h;
  memcpy(&h, row + 2 * i, 2);
  int exponent = (h >> 10) & 31, mantissa = h & 1023;
  double v = exponent == 0    ? mantissa / 16777216.0
             : exponent == 31 ? (mantissa ? 0 : 65504)
                              : (1 + mantissa / 1024.0) * ((double)(1u << exponent) / 32768.0);
  return unit(h & 0x8000 ? -v : v);
}
/* Samples of other widths (1 to 15 bits), packed most significant bit first. */
static uint32_t packed_raw(const uint8_t *row, size_t i, int bits) {
  uint64_t bit = (uint64_t)i * (uint64_t)bits;
  uint32_t v = 0;
  for (int b = 0; b < bits; b++, bit++) v = v << 1 | ((row[bit / 8] >> (7 - bit % 8)) & 1);
  return v;
}
static uint8_t sample_packed(const uint8_t *row, size_t i, int bits) {
  return (uint8_t)((packed_raw(row, i, bits) * 255u + ((1u << bits) - 1) / 2) / ((1u << bits) - 1));
}

/* How the current directory's samples are expanded here (direct), or not (libtiff's RGBA
 * reader then). */
typedef struct layout {
  int direct;
  uint16_t photometric, bits, samples, colours, planar, format;
  int alpha, associated;
  sample_fn sample;
  /* A palette image's colours as 8-bit RGB, 2^bits entries. */
  uint8_t (*palette)[3];
} layout;

static sample_fn sample_reader(uint16_t bits, uint16_t format) {
  if (format == SAMPLEFORMAT_IEEEFP)
    return bits == 16 ? sample_f16 : bits == 32 ? sample_f32 : bits == 64 ? sample_f64 : NULL;
  if (format != SAMPLEFORMAT_UINT) return NULL;
  if (bits == 8) return sample_u8;
  if (bits == 16) return sample_u16;
  if (bits == 32) return sample_u32;
  return bits >= 1 && bits < 16 ? sample_packed : NULL;
}

static int read_layout(TIFF *tif, layout *l) {
  memset(l, 0, sizeof(*l));
  uint16_t compression = 1, inkset = INKSET_CMYK;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &l->bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &l->samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &l->planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &l->format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_INKSET, &inkset);
  if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &l->photometric))
    l->photometric = l->samples >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
  if (compression == COMPRESSION_JPEG && l->photometric == PHOTOMETRIC_YCBCR) {
    /* libjpeg converts to RGB inside libtiff. */
    TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    l->photometric = PHOTOMETRIC_RGB;
  }
  switch (l->photometric) {
  case PHOTOMETRIC_MINISWHITE:
  case PHOTOMETRIC_MINISBLACK:
  case PHOTOMETRIC_PALETTE: l->colours = 1; break;
  case PHOTOMETRIC_RGB: l->colours = 3; break;
  case PHOTOMETRIC_SEPARATED: l->colours = inkset == INKSET_CMYK ? 4 : 0; break;
  default: l->colours = 0;
  }
  uint16_t extras = 0, *kinds = NULL;
  TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &extras, &kinds);
  if (l->colours && l->samples > l->colours && l->photometric != PHOTOMETRIC_SEPARATED) {
    uint16_t kind = extras && kinds ? kinds[0] : EXTRASAMPLE_UNSPECIFIED;
    /* An unspecified fourth sample of RGB (or second of grey) is alpha, as most readers take
     * it. */
    l->alpha = kind == EXTRASAMPLE_ASSOCALPHA || kind == EXTRASAMPLE_UNASSALPHA ||
               (kind == EXTRASAMPLE_UNSPECIFIED && l->samples == l->colours + 1);
    l->associated = kind == EXTRASAMPLE_ASSOCALPHA;
  }
  l->sample = sample_reader(l->bits, l->format);
  int palette_ok = l->photometric != PHOTOMETRIC_PALETTE ||
                   (l->format == SAMPLEFORMAT_UINT && l->bits <= 16 && l->samples == 1);
  l->direct = l->colours && l->sample && palette_ok && l->planar == PLANARCONFIG_CONTIG &&
              l->samples >= l->colours && compression != COMPRESSION_OJPEG;
  return l->direct;
}

/* The palette, as 8-bit RGB: 16-bit entries, unless every one is under 256 (some writers
 * store 8-bit values). */
static ic_status read_palette(tiff_decoder *d, layout *l, ic_result *result) {
  uint16_t *r, *g, *b;
  if (!TIFFGetField(d->tif, TIFFTAG_COLORMAP, &r, &g, &b))
    return ic_fail(result, IC_ERR_CORRUPT, "TIFF palette image without a colour map");
  uint32_t n = 1u << l->bits;
  int wide = 0;
  for (uint32_t i = 0; i < n; i++) wide |= r[i] > 255 || g[i] > 255 || b[i] > 255;
  l->palette = calloc(n, sizeof(*l->palette));
  if (!l->palette) return ic_fail(result, IC_ERR_NO_MEMORY, "TIFF palette allocation failed");
  for (uint32_t i = 0; i < n; i++) {
    l->palette[i][0] = (uint8_t)(wide ? r[i] >> 8 : r[i]);
    l->palette[i][1] = (uint8_t)(wide ? g[i] >> 8 : g[i]);
    l->palette[i][2] = (uint8_t)(wide ? b[i] >> 8 : b[i]);
  }
  return IC_OK;
}

/* A palette index: the sample's raw value. */
static uint32_t index_at(const layout *l, const uint8_t *row, size_t i) {
  if (l->bits == 8) return row[i];
  if (l->bits == 16) {
    uint16_t v;
    memcpy(&v, row + 2 * i, 2);
    return v;
  }
  return packed_raw(row, i, l->bits);
}

/* One stored row of `width` pixels as RGB(A), or as CMYK for the converter (channels 4). */
/* Grey of 1, 2 or 4 bits a pixel, alone in its samples (fax pages, scans): a sample never
 * straddles a byte, so it is a shift and a table, not a bit at a time. */
static int grey_packed(const layout *l) {
  return !l->palette && l->colours == 1 && !l->alpha && l->samples == 1 &&
         l->sample == sample_packed && (l->bits == 1 || l->bits == 2 || l->bits == 4);
}

/* A byte of 1-bit grey as 8 RGB pixels: [0] black is 0, [1] white is 0 (min-is-white). */
static uint8_t bilevel[2][256][24];
static pthread_once_t bilevel_once = PTHREAD_ONCE_INIT;
static void make_bilevel(void) {
  for (int b = 0; b < 256; b++)
    for (int i = 0; i < 8; i++) {
      int set = (b >> (7 - i)) & 1;
      memset(bilevel[0][b] + 3 * i, set ? 255 : 0, 3);
      memset(bilevel[1][b] + 3 * i, set ? 0 : 255, 3);
    }
}

static void expand_grey_packed(const layout *l, const uint8_t *src, uint8_t *dst, uint32_t width,
                               int channels) {
  int bits = l->bits, levels = 1 << bits, mask = levels - 1;
  uint8_t value[16];
  for (int v = 0; v < levels; v++) {
    uint8_t grey = sample_packed((const uint8_t[]){(uint8_t)(v << (8 - bits))}, 0, bits);
    value[v] = l->photometric == PHOTOMETRIC_MINISWHITE ? (uint8_t)(255 - grey) : grey;
  }
  uint32_t x = 0;
  if (bits == 1 && channels == 3) {
    /* Eight pixels a byte: each byte's 24 output bytes from a table, made once. */
    pthread_once(&bilevel_once, make_bilevel);
    const uint8_t(*table)[24] = bilevel[l->photometric == PHOTOMETRIC_MINISWHITE];
    for (; x + 8 <= width; x += 8) memcpy(dst + (size_t)x * 3, table[src[x >> 3]], 24);
  }
  for (; x < width; x++) {
    size_t bit = (size_t)x * (size_t)bits;
    uint8_t grey = value[(src[bit >> 3] >> (8 - bits - (int)(bit & 7))) & mask];
    uint8_t *p = dst + (size_t)x * channels;
    p[0] = p[1] = p[2] = grey;
    if (channels == 4) p[3] = 255;
  }
}

static void expand(const layout *l, const uint8_t *src, uint8_t *dst, uint32_t width,
                   int channels) {
  size_t n = l->samples;
  if (grey_packed(l)) {
    expand_grey_packed(l, src, dst, width, channels);
    return;
  }
  if (l->photometric == PHOTOMETRIC_SEPARATED) {
    for (uint32_t x = 0; x < width; x++)
      for (int c = 0; c < 4; c++) dst[(size_t)x * 4 + c] = l->sample(src, x * n + c, l->bits);
    return;
  }
  if (l->bits == 8 && l->colours == 3 && !l->palette) {
    /* The common case, without a call a sample. */
    for (uint32_t x = 0; x < width; x++) {
      const uint8_t *s = src + x * n;
      uint8_t *p = dst + (size_t)x * channels;
      p[0] = s[0], p[1] = s[1], p[2] = s[2];
      if (channels == 4) p[3] = l->alpha ? s[3] : 255;
    }
  } else {
    for (uint32_t x = 0; x < width; x++) {
      size_t at = x * n;
      uint8_t *p = dst + (size_t)x * channels;
      if (l->palette) {
        memcpy(p, l->palette[index_at(l, src, at)], 3);
      } else if (l->colours == 1) {
        uint8_t grey = l->sample(src, at, l->bits);
        if (l->photometric == PHOTOMETRIC_MINISWHITE) grey = (uint8_t)(255 - grey);
        p[0] = p[1] = p[2] = grey;
      } else {
        for (int c = 0; c < 3; c++) p[c] = l->sample(src, at + (size_t)c, l->bits);
      }
      if (channels == 4) p[3] = l->alpha ? l->sample(src, at + l->colours, l->bits) : 255;
    }
  }
  if (channels == 4 && l->associated) ic_unpremultiply_row(dst, width);
}

/* Rows out of stored rows: the expansion, and CMYK through its converter. */
typedef struct row_out {
  const layout *layout;
  uint32_t width;
  int channels;
  uint8_t *row, *cmyk;
  ic_colour_transform *transform;
  ic_sink *sink;
} row_out;

static ic_status emit(row_out *o, const uint8_t *stored, ic_result *result) {
  if (o->cmyk) {
    expand(o->layout, stored, o->cmyk, o->width, 4);
    ic_colour_cmyk_row(o->transform, o->cmyk, o->row, o->width);
  } else {
    expand(o->layout, stored, o->row, o->width, o->channels);
  }
  return o->sink->row(o->sink, o->row, result);
}

/* The largest raster of libtiff's RGBA reader that holds a whole strip; past it, bands of 256
 * rows. */
#define IC_TIFF_RGBA_BAND_BYTES (32u << 20)

/* A strip decoded whole when it is at most this large; larger ones a scanline at a time. */
#define IC_TIFF_WHOLE_STRIP (8u << 20)

/* Strips: whole ones (up to IC_TIFF_WHOLE_STRIP decoded) one at a time, larger ones a
 * scanline at a time (libtiff reads such a strip's bytes in parts). Decoding strips on
 * idle cores at once was tried: on this project's 2-vCPU machine two strips at once each
 * took 1.5-2x as long, and the whole was no faster (docs/BENCHMARKS.md). */
/* Whether a strip that failed may be a Group 3 page coded in one dimension without EOL codes,
 * which libtiff's Group 3 decoder cannot follow (it looks for an EOL before every row): the
 * same codes read as Modified Huffman without byte alignment (CCITTRLE's decoder, its rows
 * not aligned) make the page. The handle is switched to that once; a page whose codes are
 * not that fails again and is refused. */
static int read_as_plain_huffman(tiff_decoder *d) {
  TIFF *tif = d->tif;
  uint16_t compression = 0;
  uint32_t options = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  if (compression != COMPRESSION_CCITTFAX3) return 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_GROUP3OPTIONS, &options);
  if (options & GROUP3OPT_2DENCODING) return 0;
  if (!TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_CCITTRLE) ||
      !TIFFSetField(tif, TIFFTAG_FAXMODE, FAXMODE_NORTC | FAXMODE_NOEOL))
    return 0;
  d->io.failed = 0;
  d->io.message[0] = d->io.warning[0] = 0;
  return 1;
}

static ic_status run_strips(tiff_decoder *d, row_out *o, uint32_t height, ic_result *result) {
  TIFF *tif = d->tif;
  uint32_t per_strip = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &per_strip);
  if (per_strip == 0 || per_strip > height) per_strip = height;
  tmsize_t line_size = TIFFScanlineSize64(tif), strip_size = TIFFStripSize64(tif);
  int whole = strip_size > 0 && (uint64_t)strip_size <= IC_TIFF_WHOLE_STRIP;
  uint8_t *buffer = malloc(whole ? (size_t)strip_size : (size_t)line_size);
  if (!buffer || line_size <= 0) {
    free(buffer);
    return ic_fail(result, IC_ERR_NO_MEMORY, "TIFF row allocation failed");
  }
  ic_status status = IC_OK;
  for (uint32_t y = 0; y < height && status == IC_OK;) {
    if (ic_check(d->base.control, result) != IC_OK) break;
    uint32_t rows = 1;
    if (whole) {
      rows = height - y < per_strip ? height - y : per_strip;
      tmsize_t want = (tmsize_t)rows * line_size;
      uint32_t strip = TIFFComputeStrip(tif, y, 0);
      if (TIFFReadEncodedStrip(tif, strip, buffer, want) != want &&
          (d->io.short_read || !read_as_plain_huffman(d) ||
           TIFFReadEncodedStrip(tif, strip, buffer, want) != want)) {
        status = fail_from_tiff(d, "strip", result);
        break;
      }
    } else if (TIFFReadScanline(tif, buffer, y, 0) < 0) {
      status = fail_from_tiff(d, "row", result);
      break;
    }
    for (uint32_t r = 0; r < rows && status == IC_OK; r++)
      status = emit(o, buffer + (size_t)r * (size_t)line_size, result);
    y += rows;
  }
  free(buffer);
  return result->status != IC_OK ? result->status : status;
}

static ic_status run_tiles(tiff_decoder *d, row_out *o, uint32_t width, uint32_t height,
                           ic_result *result) {
  uint32_t tw = 0, th = 0;
  TIFFGetField(d->tif, TIFFTAG_TILEWIDTH, &tw);
  TIFFGetField(d->tif, TIFFTAG_TILELENGTH, &th);
  size_t pixel_bits = (size_t)o->layout->samples * o->layout->bits;
  size_t pixel = pixel_bits / 8;
  size_t tile_row = (size_t)tw * pixel, band_row = (size_t)width * pixel;
  uint8_t *tile = malloc((size_t)TIFFTileSize64(d->tif));
  uint8_t *band = malloc(band_row * th);
  ic_status status = IC_OK;
  if (!tile || !band || !tw || !th)
    status = tw && th ? ic_fail(result, IC_ERR_NO_MEMORY, "TIFF tile allocation failed")
                      : ic_fail(result, IC_ERR_CORRUPT, "TIFF tiles of no size");
  for (uint32_t y0 = 0; y0 < height && status == IC_OK; y0 += th) {
    uint32_t rows = height - y0 < th ? height - y0 : th;
    for (uint32_t x0 = 0; x0 < width && status == IC_OK; x0 += tw) {
      if (ic_check(d->base.control, result) != IC_OK) return free(tile), free(band), result->status;
      if (TIFFReadTile(d->tif, tile, x0, y0, 0, 0) < 0) {
        status = fail_from_tiff(d, "tile", result);
        break;
      }
      size_t bytes = ((width - x0 < tw) ? width - x0 : tw) * pixel;
      for (uint32_t r = 0; r < rows; r++)
        memcpy(band + r * band_row + x0 * pixel, tile + r * tile_row, bytes);
    }
    for (uint32_t r = 0; r < rows && status == IC_OK; r++)
      status = emit(o, band + r * band_row, result);
  }
  free(tile);
  free(band);
  return status;
}

/* libtiff's RGBA reader, a band of rows at a time, in stored order (the orientation is the
 * driver's). Its output is premultiplied when there is alpha. */
static ic_status run_rgba(tiff_decoder *d, ic_sink *sink, uint32_t width, uint32_t height,
                          int channels, ic_result *result) {
  char problem[1024] = "";
  TIFFRGBAImage image;
  if (!TIFFRGBAImageOK(d->tif, problem) || !TIFFRGBAImageBegin(&image, d->tif, 1, problem))
    return result->status != IC_OK
               ? result->status
               : ic_fail(result, IC_ERR_UNSUPPORTED, "TIFF layout not read: %s", problem);
  image.req_orientation = image.orientation;
  uint32_t band = 0;
  if (TIFFIsTiled(d->tif)) TIFFGetField(d->tif, TIFFTAG_TILELENGTH, &band);
  else TIFFGetFieldDefaulted(d->tif, TIFFTAG_ROWSPERSTRIP, &band);
  if (band == 0 || band > height) band = height;
  /* A band is a whole strip where the raster allows: libtiff decodes a strip from its start
   * for every band that reaches into it. */
  if (!TIFFIsTiled(d->tif) && (uint64_t)width * band * 4 > IC_TIFF_RGBA_BAND_BYTES)
    band = 256;
  uint32_t *raster = malloc((size_t)width * band * 4);
  uint8_t *row = malloc((size_t)width * 4);
  ic_status status = IC_OK;
  if (!raster || !row) status = ic_fail(result, IC_ERR_NO_MEMORY, "TIFF band allocation failed");
  for (uint32_t y0 = 0; y0 < height && status == IC_OK; y0 += band) {
    if (ic_check(d->base.control, result) != IC_OK) {
      status = result->status;
      break;
    }
    uint32_t rows = height - y0 < band ? height - y0 : band;
    image.row_offset = (int)y0;
    if (!TIFFRGBAImageGet(&image, raster, width, rows)) {
      status = fail_from_tiff(d, "rows", result);
      break;
    }
    for (uint32_t r = 0; r < rows && status == IC_OK; r++) {
      const uint32_t *in = raster + (size_t)r * width;
      for (uint32_t x = 0; x < width; x++) {
        uint8_t *p = row + (size_t)x * channels;
        p[0] = (uint8_t)TIFFGetR(in[x]);
        p[1] = (uint8_t)TIFFGetG(in[x]);
        p[2] = (uint8_t)TIFFGetB(in[x]);
        if (channels == 4) p[3] = (uint8_t)TIFFGetA(in[x]);
      }
      if (channels == 4 && image.alpha) ic_unpremultiply_row(row, width);
      status = sink->row(sink, row, result);
    }
  }
  TIFFRGBAImageEnd(&image);
  free(raster);
  free(row);
  return status;
}

/* ---- JPEG strips through thumbd's JPEG decoder, with DCT scaling ---- */

/* The largest JPEGTables a file may give (the quantisation and Huffman tables of a few
 * components take under 1 KiB). */
#define IC_TIFF_JPEG_TABLES (64u << 10)

static uint32_t jpeg_scaled(uint32_t size, unsigned num) {
  return (uint32_t)(((uint64_t)size * num + 7) / 8);
}

/* Whether the current directory is JPEG strips the JPEG decoder reads as they are: 8-bit
 * YCbCr, RGB or grey in one plane, no extra samples, not tiled (libtiff decodes the rest);
 * `rows` gets the rows a strip. */
static int jpeg_strips(TIFF *tif, uint32_t *rows) {
  uint16_t compression = 0, photometric = 0, bits = 0, samples = 0, planar = 0, extra = 0;
  uint16_t *extra_types = NULL;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &extra, &extra_types);
  if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric)) return 0;
  int colours = photometric == PHOTOMETRIC_YCBCR || photometric == PHOTOMETRIC_RGB ? 3
                : photometric == PHOTOMETRIC_MINISBLACK                           ? 1
                                                                                  : 0;
  if (compression != COMPRESSION_JPEG || TIFFIsTiled(tif) || bits != 8 || extra != 0 ||
      colours == 0 || samples != colours || (samples > 1 && planar != PLANARCONFIG_CONTIG))
    return 0;
  uint32_t height = 0;
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
  *rows = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, rows);
  if (*rows == 0 || *rows > height) *rows = height;
  return 1;
}

/* Rows of one strip's JPEG decode passed on to the page's sink, counted. */
typedef struct strip_sink {
  ic_sink base;
  ic_sink *to;
  uint32_t width, rows, given;
} strip_sink;

static ic_status strip_begin(ic_sink *sink, uint32_t width, uint32_t height, int channels,
                             ic_result *result) {
  strip_sink *s = (strip_sink *)sink;
  if (width != s->width || height != s->rows || channels != 3)
    return ic_fail(result, IC_ERR_CORRUPT, "TIFF JPEG strip of %ux%u, not %ux%u", width,
                   height, s->width, s->rows);
  return IC_OK;
}

static ic_status strip_row(ic_sink *sink, const uint8_t *row, ic_result *result) {
  strip_sink *s = (strip_sink *)sink;
  if (s->given++ >= s->rows) return ic_fail(result, IC_ERR_CORRUPT, "TIFF JPEG strip too long");
  return s->to->row(s->to, row, result);
}

/* Each strip as a JPEG of its own (the file's tables, then the strip's data after its SOI),
 * decoded at jpeg_num/8 by thumbd's JPEG decoder, its rows straight to the sink. */
static ic_status run_jpeg_strips(tiff_decoder *d, ic_sink *sink, uint32_t width, uint32_t height,
                                 uint32_t out_width, uint32_t out_height, ic_result *result) {
  TIFF *tif = d->tif;
  uint32_t per_strip = 0;
  jpeg_strips(tif, &per_strip);
  uint32_t table_size = 0;
  const uint8_t *tables = NULL;
  if (!TIFFGetField(tif, TIFFTAG_JPEGTABLES, &table_size, &tables)) table_size = 0;
  /* The tables' stream without its EOI (an empty one is 4 bytes: SOI, EOI). */
  if (table_size > IC_TIFF_JPEG_TABLES) return ic_fail(result, IC_ERR_CORRUPT, "TIFF JPEG tables too large");
  if (table_size < 4 || !tables || tables[0] != 0xFF || tables[1] != 0xD8) table_size = 0;
  else table_size -= 2;
  uint64_t *counts = NULL;
  if (!TIFFGetField(tif, TIFFTAG_STRIPBYTECOUNTS, &counts) || !counts)
    return ic_fail(result, IC_ERR_CORRUPT, "TIFF strips without byte counts");
  ic_status status = sink->begin(sink, out_width, out_height, 3, result);
  uint8_t *buffer = NULL;
  size_t capacity = 0;
  uint32_t strips = TIFFNumberOfStrips(tif), given = 0;
  unsigned num = d->jpeg_num;
  uint16_t photometric = 0;
  TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  int rgb = photometric == PHOTOMETRIC_RGB;
  for (uint32_t strip = 0, y = 0; strip < strips && y < height && status == IC_OK; strip++) {
    if (ic_check(d->base.control, result) != IC_OK) {
      status = result->status;
      break;
    }
    uint32_t rows = height - y < per_strip ? height - y : per_strip;
    uint64_t bytes = counts[strip];
    if (bytes < 4 || bytes > IC_TIFF_RAW_STRIP || bytes > d->io.bytes.size) {
      status = ic_fail(result, IC_ERR_CORRUPT, "TIFF JPEG strip of %llu bytes",
                       (unsigned long long)bytes);
      break;
    }
    /* The strip is read in over the tables' last two bytes, so its SOI lands there; they are
     * put back: the tables (SOI, tables), then the strip's markers and data, with no copy. */
    size_t at = table_size ? table_size - 2 : 0;
    size_t need = at + (size_t)bytes;
    if (need > capacity) {
      uint8_t *grown = realloc(buffer, need);
      if (!grown) {
        status = ic_fail(result, IC_ERR_NO_MEMORY, "TIFF JPEG strip allocation failed");
        break;
      }
      buffer = grown, capacity = need;
    }
    uint8_t kept[2] = {0, 0};
    if (table_size) {
      memcpy(buffer, tables, table_size);
      memcpy(kept, buffer + at, 2);
    }
    tmsize_t read = TIFFReadRawStrip(tif, strip, buffer + at, (tmsize_t)bytes);
    if (read < 4 || buffer[at] != 0xFF || buffer[at + 1] != 0xD8) {
      status = result->status != IC_OK ? result->status : fail_from_tiff(d, "JPEG strip", result);
      break;
    }
    if (table_size) memcpy(buffer + at, kept, 2);
    const uint8_t *jpeg = buffer;
    size_t length = at + (size_t)read;
    ic_source source = {jpeg, length, NULL, -1};
    ic_stream stream;
    ic_decoder *inner = NULL;
    if (ic_stream_open(&stream, &source, result) != IC_OK) {
      status = result->status;
      break;
    }
    status = ic_jpeg_open(&stream, d->base.limits, d->base.control, result, &inner);
    if (status == IC_OK) {
      uint32_t w = 0, h = 0;
      ic_jpeg_set_scale(inner, num, rgb, &w, &h);
      strip_sink forward = {{strip_begin, strip_row}, sink, out_width, jpeg_scaled(rows, num), 0};
      if (inner->header.width != width || inner->header.height != rows)
        status = ic_fail(result, IC_ERR_CORRUPT, "TIFF JPEG strip is %ux%u, not %ux%u",
                         inner->header.width, inner->header.height, width, rows);
      else status = ic_decoder_run(inner, &forward.base, result);
      if (status == IC_OK && forward.given != forward.rows)
        status = ic_fail(result, IC_ERR_CORRUPT, "TIFF JPEG strip ended early");
      given += forward.given;
    }
    if (inner) inner->ops->destroy(inner);
    ic_stream_close(&stream);
    y += rows;
  }
  free(buffer);
  if (status == IC_OK && given != out_height)
    status = ic_fail(result, IC_ERR_CORRUPT, "TIFF JPEG strips gave %u rows of %u", given,
                     out_height);
  return status;
}

static void tiff_choose_size(ic_decoder *base, uint32_t need_width, uint32_t need_height,
                             int allow_scaling, uint32_t *width, uint32_t *height) {
  tiff_decoder *d = (tiff_decoder *)base;
  d->chosen = 0;
  if (allow_scaling)
    for (uint32_t i = 1; i < d->level_count; i++) {
      const tiff_level *l = &d->levels[i], *best = &d->levels[d->chosen];
      if (l->width >= need_width && l->height >= need_height && l->width < best->width)
        d->chosen = i;
    }
  *width = d->levels[d->chosen].width;
  *height = d->levels[d->chosen].height;
  d->jpeg_num = 8;
  base->pixel_scale = 0;
  uint32_t rows = 0;
  ic_result scratch = {0};
  if (!allow_scaling || set_level(d, &d->levels[d->chosen], &scratch) != IC_OK ||
      !jpeg_strips(d->tif, &rows))
    return;
  unsigned num = ic_jpeg_scale_for(*width, *height, need_width, need_height);
  /* Every strip but the last must give whole rows at the scale. */
  while (num < 8 && rows < *height && (rows * num) % 8) num *= 2;
  if (num == 8) return;
  d->jpeg_num = num;
  base->pixel_scale = num / 8.0;
  *width = jpeg_scaled(*width, num);
  *height = jpeg_scaled(*height, num);
}

static ic_status tiff_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  tiff_decoder *d = (tiff_decoder *)base;
  const tiff_level *level = &d->levels[d->chosen];
  if (check_level(d, level, result) != IC_OK ||
      set_level(d, level, result) != IC_OK)
    return result->status;
  uint32_t width = level->width, height = level->height;
  if (d->jpeg_num < 8)
    return run_jpeg_strips(d, sink, width, height, jpeg_scaled(width, d->jpeg_num),
                           jpeg_scaled(height, d->jpeg_num), result);
  layout l;
  int direct = read_layout(d->tif, &l);
  /* Tiles of packed pixels (under 8 bits) go to libtiff's reader. */
  if (TIFFIsTiled(d->tif) && (l.samples * l.bits) % 8) direct = 0;
  int channels = base->header.channels;
  if (direct && l.photometric == PHOTOMETRIC_PALETTE && read_palette(d, &l, result) != IC_OK)
    return result->status;
  ic_status status = sink->begin(sink, width, height, channels, result);
  if (status != IC_OK || !direct) {
    free(l.palette);
    return status != IC_OK ? status : run_rgba(d, sink, width, height, channels, result);
  }
  row_out o = {&l, width, channels, malloc((size_t)width * 4), NULL, NULL, sink};
  if (l.photometric == PHOTOMETRIC_SEPARATED) {
    ic_profile_outcome outcome;
    o.cmyk = malloc((size_t)width * 4);
    o.transform = ic_colour_acquire_cmyk(&base->header.colour, 0, &outcome,
                                         &result->transform_cached);
    result->profile = outcome;
  }
  if (!o.row || (l.photometric == PHOTOMETRIC_SEPARATED && !o.cmyk))
    status = ic_fail(result, IC_ERR_NO_MEMORY, "TIFF row allocation failed");
  else if (TIFFIsTiled(d->tif))
    status = run_tiles(d, &o, width, height, result);
  else
    status = run_strips(d, &o, height, result);
  ic_colour_release(o.transform);
  free(o.cmyk);
  free(o.row);
  free(l.palette);
  return status;
}

static uint64_t tiff_working_memory(ic_decoder *base) {
  tiff_decoder *d = (tiff_decoder *)base;
  const tiff_level *level = &d->levels[d->chosen];
  ic_result scratch = {0};
  uint64_t bytes = (uint64_t)level->width * 4 * 3 + IC_DECODE_BASE_BYTES;
  if (set_level(d, level, &scratch) != IC_OK) return bytes;
  uint32_t strip_rows = 0;
  if (d->jpeg_num < 8 && jpeg_strips(d->tif, &strip_rows)) {
    /* A strip's bytes with the tables, and the JPEG decoder's state for a strip of it. */
    uint64_t raw = d->io.bytes.size < IC_TIFF_RAW_STRIP ? d->io.bytes.size : IC_TIFF_RAW_STRIP;
    return bytes + raw + IC_TIFF_JPEG_TABLES + (uint64_t)level->width * 3 * 32;
  }
  layout l;
  int direct = read_layout(d->tif, &l);
  if (TIFFIsTiled(d->tif)) {
    uint32_t tw = 0, th = 0;
    TIFFGetField(d->tif, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(d->tif, TIFFTAG_TILELENGTH, &th);
    /* A band of tiles (raw pixels, or libtiff's RGBA raster), a tile, and its bytes. */
    uint64_t pixel = direct ? (uint64_t)l.samples * l.bits / 8 : 4;
    bytes += (uint64_t)level->width * th * pixel + 2 * (uint64_t)TIFFTileSize64(d->tif);
  } else {
    uint32_t rows = 0;
    TIFFGetFieldDefaulted(d->tif, TIFFTAG_ROWSPERSTRIP, &rows);
    if (rows == 0 || rows > level->height) rows = level->height;
    uint64_t raw = d->io.bytes.size < IC_TIFF_RAW_STRIP ? d->io.bytes.size : IC_TIFF_RAW_STRIP;
    uint64_t strip = (uint64_t)TIFFStripSize64(d->tif);
    /* A strip decoded whole (or scanlines), and what libtiff holds of its bytes; the RGBA
     * reader holds a whole strip decoded and a band of at most 256 rows. */
    /* A whole strip, decoded and its bytes as read (about as large); or scanlines, and
     * libtiff's part of a strip. */
    bytes += strip <= IC_TIFF_WHOLE_STRIP ? 2 * strip + (64u << 10)
                                          : 2 * (uint64_t)TIFFScanlineSize64(d->tif) + raw;
    uint64_t band = (uint64_t)level->width * rows * 4;
    if (band > IC_TIFF_RGBA_BAND_BYTES) band = (uint64_t)level->width * (rows < 256 ? rows : 256) * 4;
    if (!direct) bytes += (uint64_t)TIFFScanlineSize64(d->tif) * rows + band;
  }
  return bytes;
}

static void tiff_destroy(ic_decoder *base) {
  tiff_decoder *d = (tiff_decoder *)base;
  if (d->tif) TIFFClose(d->tif);
  ic_colour_info_clear(&base->header.colour);
  free(d);
}

static const ic_decoder_ops tiff_ops = {tiff_choose_size, tiff_run, tiff_destroy,
                                        tiff_working_memory, NULL};

/* The page's description: orientation, profile, channels. */
static ic_status read_page(tiff_decoder *d, ic_result *result) {
  TIFF *tif = d->tif;
  ic_header *h = &d->base.header;
  h->width = d->levels[0].width;
  h->height = d->levels[0].height;
  uint16_t orientation = ORIENTATION_TOPLEFT;
  TIFFGetFieldDefaulted(tif, TIFFTAG_ORIENTATION, &orientation);
  h->orientation = orientation >= 1 && orientation <= 8 ? orientation : 1;
  layout l;
  int direct = read_layout(tif, &l);
  if (l.bits == 0 || l.bits > 64 || l.samples == 0 || l.samples > 16 ||
      (l.photometric == PHOTOMETRIC_PALETTE && l.bits > 16))
    return ic_fail(result, IC_ERR_CORRUPT, "TIFF of %u samples of %u bits", l.samples, l.bits);
  uint16_t extras = 0, *kinds = NULL;
  TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &extras, &kinds);
  h->channels = (direct ? l.alpha : extras > 0) ? 4 : 3;
  h->colour.space = l.photometric == PHOTOMETRIC_SEPARATED ? IC_SPACE_CMYK
                    : l.colours == 1 && !l.palette && l.photometric != PHOTOMETRIC_PALETTE
                        ? IC_SPACE_GREY
                        : IC_SPACE_RGB;
  uint32_t size = 0;
  void *icc = NULL;
  if (TIFFGetField(tif, TIFFTAG_ICCPROFILE, &size, &icc) && icc && size) {
    if (size > d->base.limits->max_profile_bytes) {
      h->colour.damage = IC_PROFILE_OVERSIZED;
    } else if ((h->colour.icc = malloc(size))) {
      memcpy(h->colour.icc, icc, size);
      h->colour.icc_size = size;
    }
  }
  return IC_OK;
}

ic_status ic_tiff_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                       ic_result *result, ic_decoder **out) {
  pthread_once(&quiet_once, quiet_globals);
  tiff_decoder *d = ic_decoder_new(sizeof(*d), &tiff_ops, limits, control, result);
  if (d) d->jpeg_num = 8;
  if (!d) return result->status;
  if (ic_stream_random(stream, limits, control, &d->io.bytes, result) != IC_OK) {
    free(d);
    return result->status;
  }
  if (ic_raw_is_camera(&d->io.bytes)) {
    /* A camera's raw file: its preview, never its sensor data. */
    ic_random bytes = d->io.bytes;
    free(d);
    return ic_raw_open_random(&bytes, limits, control, result, out);
  }
  d->tif = open_handle(&d->io, limits);
  ic_status status = d->tif ? IC_OK : fail_from_tiff(d, "header", result);
  if (status == IC_OK) status = find_levels(d, result);
  /* The limits bound what is decoded: a pyramid's page may be over them as long as the
   * level a decode reads is not (checked again for the level chosen). */
  if (status == IC_OK) {
    const tiff_level *smallest = &d->levels[d->level_count - 1];
    for (uint32_t i = 0; i < d->level_count; i++)
      if (d->levels[i].width < smallest->width) smallest = &d->levels[i];
    status = check_level(d, smallest, result);
  }
  if (status == IC_OK) status = read_page(d, result);
  /* A level is the picture made small by its writer (averaged): the one at least as large
   * as the output is taken, with no headroom. */
  d->base.exact_scaling = 1;
  if (status != IC_OK) {
    tiff_destroy(&d->base);
    return status;
  }
  *out = &d->base;
  return IC_OK;
}
