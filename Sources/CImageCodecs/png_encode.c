/*
 * PNG encoding: 8-bit RGB or RGBA into a growing memory buffer, with a fast
 * zlib level: thumbnails are small and latency matters more than bytes.
 */
#include "internal.h"

#include <png.h>
#include <zlib.h>
#include <stdlib.h>
#include <string.h>

typedef struct png_sink_buffer {
  uint8_t *data;
  size_t size;
  size_t capacity;
  int failed;
  char message[160];
} png_sink_buffer;

static void on_write_error(png_structp png, png_const_charp message) {
  png_sink_buffer *b = png_get_error_ptr(png);
  snprintf(b->message, sizeof(b->message), "%s", message);
  png_longjmp(png, 1);
}

static void on_write_warning(png_structp png, png_const_charp message) {
  (void)png;
  (void)message;
}

static void write_bytes(png_structp png, png_bytep bytes, size_t length) {
  png_sink_buffer *b = png_get_io_ptr(png);
  if (b->capacity - b->size < length) {
    size_t capacity = b->capacity ? b->capacity * 2 : 16384;
    while (capacity - b->size < length) capacity *= 2;
    uint8_t *grown = realloc(b->data, capacity);
    if (!grown) png_error(png, "out of memory");
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->size, bytes, length);
  b->size += length;
}

static void flush_bytes(png_structp png) { (void)png; }

ic_status ic_encode_png(const uint8_t *pixels, uint32_t width, uint32_t height,
                        int channels, const ic_encode_options *options, uint8_t **out,
                        size_t *out_size, ic_result *result) {
  const int level = options->png_level, interlaced = options->png_interlaced;
  png_sink_buffer buffer;
  memset(&buffer, 0, sizeof(buffer));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &buffer,
                                            on_write_error, on_write_warning);
  if (!png) return ic_fail(result, IC_ERR_NO_MEMORY, "libpng allocation failed");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, NULL);
    return ic_fail(result, IC_ERR_NO_MEMORY, "libpng allocation failed");
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    free(buffer.data);
    return ic_fail(result, IC_ERR_ENCODE, "PNG encoder: %s", buffer.message);
  }
  png_set_write_fn(png, &buffer, write_bytes, flush_bytes);
  png_set_compression_level(png, level < 0 ? 0 : level > 9 ? 9 : level);
  if (options->png_photographic && level > 0) {
    /* A photograph's rows rarely repeat: the Paeth prediction leaves small residuals, and
     * runs of them are what a match search would find anyway. */
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_PAETH);
    png_set_compression_strategy(png, Z_RLE);
  }
  png_set_IHDR(png, info, width, height, 8,
               channels == 4 ? PNG_COLOR_TYPE_RGB_ALPHA : PNG_COLOR_TYPE_RGB,
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  if (options->icc && options->icc_size > 0 && options->icc_size <= (64u << 20)) {
    /* Written as it is: libpng's own iCCP checks refuse profiles lcms2 links and browsers
     * honour (a ProPhoto profile with a non-D50 illuminant tag). */
    uLong bound = compressBound((uLong)options->icc_size);
    uint8_t *chunk = malloc(5 + bound);
    if (!chunk) png_error(png, "profile buffer allocation failed");
    memcpy(chunk, "icc\0\0", 5);
    uLongf packed = bound;
    int ok = compress2(chunk + 5, &packed, options->icc, (uLong)options->icc_size, 6) == Z_OK;
    if (ok) png_write_chunk(png, (png_const_bytep) "iCCP", chunk, 5 + packed);
    free(chunk);
    if (!ok) png_error(png, "profile compression failed");
  }
  /* Adam7: libpng picks each pass's pixels from the full rows it is given once per pass. */
  int passes = interlaced ? png_set_interlace_handling(png) : 1;
  for (int pass = 0; pass < passes; pass++)
    for (uint32_t y = 0; y < height; y++)
      png_write_row(png, (png_const_bytep)(pixels + (size_t)y * width * channels));
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  *out = buffer.data;
  *out_size = buffer.size;
  return IC_OK;
}
