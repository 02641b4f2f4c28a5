/*
 * PNG decoding through libpng.
 *
 * Every colour type and depth is expanded to 8-bit RGB or RGBA by libpng's
 * own transforms. Non-interlaced images stream one row at a time into the
 * sink. Adam7 needs all seven passes before any row is complete: its passes'
 * pixels are added into sums of f x f blocks as they arrive (f chosen like a
 * DCT scale, from the output size), so a 10000x10000 interlaced PNG becomes a
 * thumbnail without its full-size image; only a decode that cannot shrink
 * (f = 1) holds the image, at one byte a sample.
 * png_read_end runs too, so a bad CRC or Adler-32 after the last row is
 * still an error, unless the image data goes on for more than
 * IC_PNG_TAIL_ALLOWANCE bytes after the last row: then the complete rows are
 * kept and nothing more is inflated.
 *
 * Bounds against hostile files, each where the bytes arrive:
 * - ancillary chunks we do not use are skipped unread (PNG_HANDLE_CHUNK_NEVER);
 * - no chunk may claim more than IC_PNG_CHUNK_MAX bytes (checked on its header,
 *   before libpng allocates for it);
 * - every allocation libpng makes counts against a per-decode budget (our own
 *   malloc), so whatever slips past the rules above still cannot take gigabytes;
 * - every read checks cancellation and the deadline.
 */
#include "internal.h"

#include <png.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Largest chunk libpng may read (iCCP profiles, eXIf): real ones are kilobytes. */
#define IC_PNG_CHUNK_MAX (2u << 20)
/* libpng's own memory per decode beyond its row buffers: structs, zlib, chunks. */
#define IC_PNG_BUDGET_BASE (16u << 20)

typedef struct png_decoder {
  ic_decoder base;
  png_structp png;
  png_infop info;
  ic_stream *stream;
  int hit_end;
  /* libpng's allocations so far, and what they may add up to. */
  size_t allocated;
  size_t budget;
  /* Set once the last row is out: bytes read since, and whether they passed the
   * allowance (libpng is then stopped, and the rows kept). */
  int rows_done;
  uint64_t tail_start;
  uint64_t tail_allowance;
  int tail_exceeded;
  uint32_t reads;
  /* The last 8 bytes libpng read, and how many it read: after png_read_info
   * they are the first IDAT chunk's header. */
  uint8_t tail[8];
  uint64_t consumed;
  int fast;
  uint32_t idat_length;
  int passes;
  /* Adam7: the side of the blocks choose_size picked (1: the full image). */
  uint32_t block;
  ic_status status;
  char message[160];
  uint32_t warnings;
  /* libpng warned about the iCCP chunk (and dropped it). */
  int icc_warning;
} png_decoder;

/* libpng's allocator: every block carries its size in front, so the budget can be kept. */
typedef struct allocation {
  size_t size;
  max_align_t align;
} allocation;

static png_voidp budget_malloc(png_structp png, png_alloc_size_t size) {
  png_decoder *d = png_get_mem_ptr(png);
  if (size > d->budget || d->allocated > d->budget - size) return NULL;
  allocation *block = malloc(offsetof(allocation, align) + size);
  if (!block) return NULL;
  block->size = size;
  d->allocated += size;
  return (char *)block + offsetof(allocation, align);
}

static void budget_free(png_structp png, png_voidp pointer) {
  if (!pointer) return;
  png_decoder *d = png_get_mem_ptr(png);
  allocation *block = (allocation *)((char *)pointer - offsetof(allocation, align));
  d->allocated -= block->size;
  free(block);
}

static void on_png_error(png_structp png, png_const_charp message) {
  png_decoder *d = png_get_error_ptr(png);
  if (d->status == IC_OK) {
    snprintf(d->message, sizeof(d->message), "%s", message);
    if (d->hit_end) d->status = IC_ERR_TRUNCATED;
    else if (strstr(message, "memory") || strstr(message, "Memory"))
      d->status = IC_ERR_NO_MEMORY;
    else d->status = IC_ERR_CORRUPT;
  }
  png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp message) {
  png_decoder *d = png_get_error_ptr(png);
  d->warnings++;
  if (message && strncmp(message, "iCCP", 4) == 0) d->icc_warning = 1;
}

static void read_bytes(png_structp png, png_bytep out, size_t length) {
  png_decoder *d = png_get_io_ptr(png);
  if (++d->reads % IC_CANCEL_CHECK_ROWS == 0) {
    ic_status reason = ic_stop_reason(d->base.control);
    if (reason != IC_OK) {
      d->status = reason;
      snprintf(d->message, sizeof(d->message), "%s",
               reason == IC_ERR_CANCELLED ? "decode cancelled"
                                          : "the decode took longer than its deadline");
      png_longjmp(png, 1);
    }
  }
  if (d->rows_done && d->consumed - d->tail_start > d->tail_allowance) {
    d->tail_exceeded = 1;
    png_longjmp(png, 1);
  }
  if (ic_stream_read(d->stream, out, length) != length) {
    if (ic_stream_failed(d->stream)) png_error(png, "read error");
    d->hit_end = 1;
    png_error(png, "unexpected end of data");
  }
  d->consumed += length;
  if (length >= 8) {
    memcpy(d->tail, out + length - 8, 8);
  } else {
    memmove(d->tail, d->tail + length, 8 - length);
    memcpy(d->tail + 8 - length, out, length);
  }
}

static void png_destroy_decoder(ic_decoder *base) {
  png_decoder *d = (png_decoder *)base;
  png_destroy_read_struct(&d->png, d->info ? &d->info : NULL, NULL);
  ic_colour_info_clear(&d->base.header.colour);
  free(d);
}

/* Blocks of an Adam7 image at most this wide: sums of premultiplied samples (at most
 * 255 x 255 each) over 255 x 255 pixels stay within 32 bits. */
#define IC_PNG_MAX_BLOCK 255

static uint32_t blocks(uint32_t size, uint32_t block) { return (size + block - 1) / block; }

/* Non-interlaced rows stream at full size. Adam7 shrinks by the largest block side whose
 * size still covers what is needed: an exact area average, like JPEG's 1/8 DCT scale. */
static void png_choose_size(ic_decoder *base, uint32_t need_width,
                            uint32_t need_height, int allow_scaling,
                            uint32_t *width, uint32_t *height) {
  png_decoder *d = (png_decoder *)base;
  uint32_t w = base->header.width, h = base->header.height, block = 1;
  if (d->passes > 1 && allow_scaling) {
    while (block < IC_PNG_MAX_BLOCK && blocks(w, block + 1) >= need_width &&
           blocks(h, block + 1) >= need_height)
      block++;
  }
  d->block = block;
  base->pixel_scale = block > 1 ? 1.0 / block : 0;
  *width = blocks(w, block);
  *height = blocks(h, block);
}

static ic_status fail_from_libpng(png_decoder *d, ic_result *result) {
  result->warnings = d->warnings;
  return ic_fail(result, d->status == IC_OK ? IC_ERR_CORRUPT : d->status,
                 "%s", d->message);
}

/*
 * Adam7: each pass's rows (libpng hands them over as they are stored, without its own
 * interlace handling) are scattered to their places: into the image (block 1), or added into
 * the sums of block x block cells, premultiplied by alpha. Once every pass is in, the rows go
 * to the sink: each cell the average of the pixels it holds (the last row and column of
 * cells hold fewer).
 */
typedef struct adam7 {
  uint32_t width, height, block, out_width, out_height;
  int channels;
  uint8_t *image;  /* block 1 */
  uint32_t *sums;  /* block > 1: out_width x out_height x channels */
  uint8_t *row;    /* one pass row, then one output row */
} adam7;

static void adam7_add(adam7 *a, const uint8_t *row, uint32_t y, uint32_t x0, uint32_t dx,
                      uint32_t count) {
  int c = a->channels;
  if (a->block == 1) {
    uint8_t *line = a->image + (size_t)y * a->width * c;
    for (uint32_t i = 0; i < count; i++) memcpy(line + (size_t)(x0 + i * dx) * c, row + (size_t)i * c, (size_t)c);
    return;
  }
  uint32_t *cells = a->sums + (size_t)(y / a->block) * a->out_width * c;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *p = row + (size_t)i * c;
    uint32_t *cell = cells + (size_t)((x0 + i * dx) / a->block) * c;
    if (c == 4) {
      uint32_t alpha = p[3];
      cell[0] += p[0] * alpha;
      cell[1] += p[1] * alpha;
      cell[2] += p[2] * alpha;
      cell[3] += alpha;
    } else {
      cell[0] += p[0];
      cell[1] += p[1];
      cell[2] += p[2];
    }
  }
}

/* Rows to the sink once every pass is in. */
static ic_status adam7_emit(adam7 *a, ic_sink *sink, ic_result *result) {
  int c = a->channels;
  ic_status status = IC_OK;
  for (uint32_t y = 0; y < a->out_height && status == IC_OK; y++) {
    if (a->block == 1) {
      status = sink->row(sink, a->image + (size_t)y * a->width * c, result);
      continue;
    }
    uint32_t rows = y == a->out_height - 1 ? a->height - y * a->block : a->block;
    const uint32_t *cells = a->sums + (size_t)y * a->out_width * c;
    for (uint32_t x = 0; x < a->out_width; x++) {
      uint32_t columns = x == a->out_width - 1 ? a->width - x * a->block : a->block;
      uint32_t count = rows * columns;
      const uint32_t *cell = cells + (size_t)x * c;
      uint8_t *out = a->row + (size_t)x * c;
      if (c == 4) {
        uint32_t alpha = cell[3];
        for (int k = 0; k < 3; k++)
          out[k] = alpha ? (uint8_t)(((uint64_t)cell[k] + alpha / 2) / alpha) : 0;
        out[3] = (uint8_t)((alpha + count / 2) / count);
      } else {
        for (int k = 0; k < 3; k++) out[k] = (uint8_t)((cell[k] + count / 2) / count);
      }
    }
    status = sink->row(sink, a->row, result);
  }
  return status;
}

static void adam7_free(adam7 *a) {
  free(a->image);
  free(a->sums);
  free(a->row);
}

static ic_status png_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  png_decoder *d = (png_decoder *)base;
  uint32_t width = base->header.width, height = base->header.height;
  int channels = base->header.channels;
  size_t stride = (size_t)width * channels;
  uint8_t *volatile pixels = NULL;
  /* volatile: read after libpng longjmps back here. */
  adam7 interlaced = {0};
  adam7 *volatile a = NULL;
  if (setjmp(png_jmpbuf(d->png))) {
    if (d->tail_exceeded) {
      /* libpng drains the stream inside the last png_read_row, after that row is complete:
       * what follows is only more image data. Keep the rows: the last one (still in the
       * buffer) or, for Adam7, every pass's. */
      ic_status status = a ? adam7_emit(a, sink, result) : sink->row(sink, pixels, result);
      result->warnings = d->warnings + 1;
      if (a) adam7_free(a);
      free(pixels);
      return status;
    }
    if (a) adam7_free(a);
    free(pixels);
    return fail_from_libpng(d, result);
  }
  if (d->fast) {
    ic_status status =
        ic_png_fast_rows(d->stream, d->idat_length, width, height, channels, sink,
                         d->base.control, result);
    result->warnings = d->warnings;
    return status;
  }
  uint32_t block = d->passes > 1 && d->block ? d->block : 1;
  ic_status status = sink->begin(sink, blocks(width, block), blocks(height, block), channels, result);
  if (status != IC_OK) return status;
  if (d->passes > 1) {
    interlaced.width = width;
    interlaced.height = height;
    interlaced.block = block;
    interlaced.channels = channels;
    interlaced.out_width = blocks(width, block);
    interlaced.out_height = blocks(height, block);
    interlaced.row = malloc(stride);
    if (block == 1)
      interlaced.image = malloc(stride * height);
    else
      interlaced.sums = calloc((size_t)interlaced.out_width * interlaced.out_height * channels,
                               sizeof(uint32_t));
    a = &interlaced;
    if (!interlaced.row || (!interlaced.image && !interlaced.sums)) {
      adam7_free(a);
      return ic_fail(result, IC_ERR_NO_MEMORY, "pixel buffer allocation failed");
    }
  } else {
    pixels = malloc(stride);
    if (!pixels) return ic_fail(result, IC_ERR_NO_MEMORY, "pixel buffer allocation failed");
  }
  /* Rows libpng will hand over in all, for the tail allowance on the last one. */
  uint64_t calls = 0, done = 0;
  for (int pass = 0; pass < d->passes; pass++) {
    if (d->passes == 1)
      calls += height;
    else if (PNG_PASS_COLS(width, pass) > 0)
      calls += PNG_PASS_ROWS(height, pass);
  }
  for (int pass = 0; pass < d->passes; pass++) {
    uint32_t rows = d->passes == 1 ? height : PNG_PASS_ROWS(height, pass);
    uint32_t columns = d->passes == 1 ? width : PNG_PASS_COLS(width, pass);
    if (columns == 0) continue; /* libpng skips an empty pass */
    for (uint32_t y = 0; y < rows; y++) {
      if (y % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->base.control, result) != IC_OK) {
        if (a) adam7_free(a);
        free(pixels);
        return result->status;
      }
      uint8_t *row = a ? a->row : pixels;
      if (++done == calls) {
        /* libpng reads the rest of the stream inside this call, once the row is out: count
         * from here, allowing the row's own data (at most its raw size, plus deflate's
         * framing and libpng's 8 KiB reads) on top of IC_PNG_TAIL_ALLOWANCE. */
        d->rows_done = 1;
        d->tail_start = d->consumed;
        d->tail_allowance = IC_PNG_TAIL_ALLOWANCE + 2 * (stride + 1) + (16 << 10);
      }
      png_read_row(d->png, row, NULL);
      if (a) {
        adam7_add(a, row, d->passes == 1 ? y : PNG_ROW_FROM_PASS_ROW(y, pass),
                  PNG_COL_FROM_PASS_COL(0, pass), 1u << PNG_PASS_COL_SHIFT(pass), columns);
      } else {
        status = sink->row(sink, row, result);
        if (status != IC_OK) {
          free(pixels);
          return status;
        }
      }
    }
  }
  /* Reads the rest of the stream: the final CRC and Adler-32 checks (within the
   * allowance: see read_bytes). */
  png_read_end(d->png, NULL);
  if (a) status = adam7_emit(a, sink, result);
  result->warnings = d->warnings;
  if (a) adam7_free(a);
  free(pixels);
  return status;
}

/* What png_run will hold: libpng's allocations so far (text and profile chunks are kept),
 * its two rows and zlib's state, and ours: a row, and for Adam7 the block sums (4 bytes a
 * sample of the reduced size) or, unreduced, the whole image. */
static uint64_t png_working_memory(ic_decoder *base) {
  png_decoder *d = (png_decoder *)base;
  uint64_t width = d->base.header.width, height = d->base.header.height;
  uint64_t channels = (uint64_t)d->base.header.channels, stride = width * channels;
  enum { ZLIB_STATE = 48 << 10 };
  uint64_t bytes = IC_DECODE_BASE_BYTES + d->allocated + ZLIB_STATE;
  if (d->fast) return bytes + 2 * (stride + 1);
  bytes += 4 * (width * 8 + 16) + stride;
  if (d->passes == 1) return bytes;
  uint32_t block = d->block ? d->block : 1;
  if (block == 1) return bytes + stride * height;
  return bytes + blocks((uint32_t)width, block) * (uint64_t)blocks((uint32_t)height, block) *
                     channels * 4;
}

/* The colour description: iCCP (copied), else sRGB, else gAMA and cHRM. libpng has checked
 * each chunk and dropped the bad ones with a warning. */
static void read_colour(png_decoder *d, int color_type, const ic_limits *limits) {
  ic_colour_info *colour = &d->base.header.colour;
  colour->space = color_type & PNG_COLOR_MASK_COLOR ? IC_SPACE_RGB : IC_SPACE_GREY;
  if (d->icc_warning) colour->damage = IC_PROFILE_BROKEN;
  png_charp name = NULL;
  int compression = 0;
  png_bytep profile = NULL;
  png_uint_32 length = 0;
  if (png_get_valid(d->png, d->info, PNG_INFO_iCCP) &&
      png_get_iCCP(d->png, d->info, &name, &compression, &profile, &length) && profile &&
      length > 0) {
    if (length > limits->max_profile_bytes) {
      colour->damage = IC_PROFILE_OVERSIZED;
    } else if ((colour->icc = malloc(length))) {
      memcpy(colour->icc, profile, length);
      colour->icc_size = length;
      return;
    }
  }
  if (png_get_valid(d->png, d->info, PNG_INFO_sRGB)) {
    colour->srgb = 1;
    return;
  }
  double gamma = 0;
  if (png_get_valid(d->png, d->info, PNG_INFO_gAMA) &&
      png_get_gAMA(d->png, d->info, &gamma) && gamma > 0.01 && gamma < 10)
    colour->gamma = 1.0 / gamma;
  double *p = colour->primaries;
  if (colour->space == IC_SPACE_RGB && png_get_valid(d->png, d->info, PNG_INFO_cHRM) &&
      png_get_cHRM(d->png, d->info, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6],
                   &p[7]))
    colour->has_primaries = 1;
  /* cHRM alone: the primaries on the sRGB curve. */
}

static int orientation_from_exif_chunk(png_structp png, png_infop info) {
#ifdef PNG_eXIf_SUPPORTED
  png_uint_32 length = 0;
  png_bytep exif = NULL;
  if (png_get_eXIf_1(png, info, &length, &exif) && exif)
    return ic_exif_orientation(exif, length);
#else
  (void)png;
  (void)info;
#endif
  return 1;
}

int ic_png_sniff(const uint8_t *bytes, size_t size) {
  static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  return size >= 8 && memcmp(bytes, signature, 8) == 0;
}

static const ic_decoder_ops png_ops = {png_choose_size, png_run, png_destroy_decoder,
                                       png_working_memory, NULL};

ic_status ic_png_open(ic_stream *stream, const ic_limits *limits,
                      const ic_control *control, ic_result *result,
                      ic_decoder **out) {
  png_decoder *d = ic_decoder_new(sizeof(*d), &png_ops, limits, control, result);
  if (!d) return result->status;
  d->stream = stream;
  d->budget = IC_PNG_BUDGET_BASE;
  d->png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, d, on_png_error,
                                    on_png_warning, d, budget_malloc, budget_free);
  if (!d->png) {
    free(d);
    return ic_fail(result, IC_ERR_NO_MEMORY, "libpng allocation failed");
  }
  d->info = png_create_info_struct(d->png);
  if (!d->info) {
    png_destroy_decoder(&d->base);
    return ic_fail(result, IC_ERR_NO_MEMORY, "libpng allocation failed");
  }
  if (setjmp(png_jmpbuf(d->png))) {
    fail_from_libpng(d, result);
    png_destroy_decoder(&d->base);
    return result->status;
  }
  png_set_read_fn(d->png, d, read_bytes);
  /* Our own limits decide, with a typed error; libpng's default of one
   * million pixels a side would otherwise answer first. */
  png_set_user_limits(d->png, 0x7fffffffL, 0x7fffffffL);
  /* Every chunk (known to libpng or not) is skipped unread, except those we use. */
  static const png_byte used[] = {'t', 'R', 'N', 'S', 0, 'e', 'X', 'I', 'f', 0,
                                  'g', 'A', 'M', 'A', 0, 'c', 'H', 'R', 'M', 0,
                                  's', 'R', 'G', 'B', 0, 'i', 'C', 'C', 'P', 0};
  png_set_keep_unknown_chunks(d->png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
  png_set_keep_unknown_chunks(d->png, PNG_HANDLE_CHUNK_AS_DEFAULT, used,
                              (int)(sizeof(used) / 5));
  png_set_chunk_malloc_max(d->png, IC_PNG_CHUNK_MAX);
  png_set_chunk_cache_max(d->png, 32);
  png_read_info(d->png, d->info);
  png_uint_32 width, height;
  int depth, color_type, interlace;
  png_get_IHDR(d->png, d->info, &width, &height, &depth, &color_type,
               &interlace, NULL, NULL);
  ic_status status = ic_check_limits(width, height, limits, result);
  if (status != IC_OK) {
    png_destroy_decoder(&d->base);
    return status;
  }
  /* Row buffers (libpng keeps two, at up to 8 bytes a pixel) on top of the base. */
  d->budget = IC_PNG_BUDGET_BASE + 4 * ((size_t)width * 8 + 16);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(d->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && depth < 8)
    png_set_expand_gray_1_2_4_to_8(d->png);
  if (png_get_valid(d->png, d->info, PNG_INFO_tRNS))
    png_set_tRNS_to_alpha(d->png);
  if (depth == 16) png_set_scale_16(d->png);
  if (color_type == PNG_COLOR_TYPE_GRAY ||
      color_type == PNG_COLOR_TYPE_GRAY_ALPHA)
    png_set_gray_to_rgb(d->png);
  /* Adam7's passes are read as they are stored (no png_set_interlace_handling): png_run
   * places their pixels itself, into block sums. */
  d->passes = interlace == PNG_INTERLACE_ADAM7 ? 7 : 1;
  uint64_t consumed_by_info = d->consumed;
  png_read_update_info(d->png, d->info);
  /* The common case takes the fast IDAT path (png_fast.c) when libpng has
   * stopped exactly after the first IDAT header and no transform applies. */
  d->fast = !limits->disable_png_fast_path && depth == 8 && d->passes == 1 &&
            (color_type == PNG_COLOR_TYPE_RGB ||
             color_type == PNG_COLOR_TYPE_RGB_ALPHA) &&
            !png_get_valid(d->png, d->info, PNG_INFO_tRNS) &&
            d->consumed == consumed_by_info && memcmp(d->tail + 4, "IDAT", 4) == 0;
  if (d->fast)
    d->idat_length = ic_be32(d->tail);
  int channels = png_get_channels(d->png, d->info);
  if ((channels != 3 && channels != 4) ||
      png_get_rowbytes(d->png, d->info) != (size_t)width * channels) {
    png_destroy_decoder(&d->base);
    return ic_fail(result, IC_ERR_CORRUPT, "unexpected PNG row layout");
  }
  d->base.header.width = width;
  d->base.header.height = height;
  d->base.header.channels = channels;
  d->base.header.orientation = orientation_from_exif_chunk(d->png, d->info);
  read_colour(d, color_type, limits);
  result->warnings = d->warnings;
  *out = &d->base;
  return IC_OK;
}
