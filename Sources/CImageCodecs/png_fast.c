/*
 * Image data of the common PNG case, without libpng's row machinery.
 *
 * Profiling the 12 MP benchmark set put half of all PNG time in libpng's
 * scalar Paeth unfilter (Debian builds libpng without its SIMD filters).
 * For non-interlaced 8-bit RGB and RGBA images without tRNS, libpng still
 * parses everything up to the first IDAT (signature, IHDR, every ancillary
 * chunk, limits); this file then reads the IDAT chunks itself: CRC-checked,
 * inflated with zlib (Adler-32 checked at the end), unfiltered with SSE2
 * where it helps, streamed row by row into the sink, and the chunks after
 * the image are checked through IEND the way png_read_end does. Every other
 * PNG goes through libpng alone. The test suite checks that both paths give
 * identical pixels for every PNG in the corpus.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define FAST_INPUT_BUFFER 65536

typedef struct fast_reader {
  ic_stream *stream;
  uint32_t chunk_left; /* IDAT bytes not yet read from the current chunk */
  uLong crc;
  int idat_done;
  ic_result *result;
  const ic_control *control;
  uint32_t reads;
  uint8_t input[FAST_INPUT_BUFFER];
} fast_reader;

static ic_status read_exact(fast_reader *r, uint8_t *out, size_t length) {
  /* Every loop that reads comes through here: cancellation and the deadline. */
  if (++r->reads % IC_CANCEL_CHECK_ROWS == 0) {
    ic_status status = ic_check(r->control, r->result);
    if (status != IC_OK) return status;
  }
  if (ic_stream_read(r->stream, out, length) != length) {
    if (ic_stream_failed(r->stream))
      return ic_fail(r->result, IC_ERR_IO, "read error");
    return ic_fail(r->result, IC_ERR_TRUNCATED, "unexpected end of data");
  }
  return IC_OK;
}

/* Checks the CRC of the chunk just read; `critical` chunks fail on mismatch. */
static ic_status finish_chunk(fast_reader *r, int critical) {
  uint8_t stored[4];
  ic_status status = read_exact(r, stored, 4);
  if (status != IC_OK) return status;
  if (ic_be32(stored) != (uint32_t)r->crc && critical)
    return ic_fail(r->result, IC_ERR_CORRUPT, "CRC error");
  return IC_OK;
}

/* Starts the next chunk; sets idat_done when it is not an IDAT. */
static ic_status next_chunk(fast_reader *r, uint8_t header[8]) {
  ic_status status = read_exact(r, header, 8);
  if (status != IC_OK) return status;
  uint32_t length = ic_be32(header);
  if (length > 0x7fffffffu)
    return ic_fail(r->result, IC_ERR_CORRUPT, "PNG unsigned integer out of range");
  r->crc = crc32(0, header + 4, 4);
  r->chunk_left = length;
  if (memcmp(header + 4, "IDAT", 4) != 0) r->idat_done = 1;
  return IC_OK;
}

/* Fills `input` with the next IDAT bytes; 0 when the image data has ended. */
static ic_status next_input(fast_reader *r, size_t *got) {
  *got = 0;
  uint8_t header[8];
  while (!r->idat_done && r->chunk_left == 0) {
    ic_status status = finish_chunk(r, 1);
    if (status == IC_OK) status = next_chunk(r, header);
    if (status != IC_OK) return status;
    if (r->idat_done) {
      /* Hand the header of the first chunk after the image to the tail
       * check through the reader's state. */
      memcpy(r->input, header, 8);
      return IC_OK;
    }
  }
  if (r->idat_done) return IC_OK;
  size_t n = r->chunk_left < sizeof(r->input) ? r->chunk_left : sizeof(r->input);
  ic_status status = read_exact(r, r->input, n);
  if (status != IC_OK) return status;
  r->crc = crc32(r->crc, r->input, (uInt)n);
  r->chunk_left -= (uint32_t)n;
  *got = n;
  return IC_OK;
}

#if !defined(__SSE2__)
static uint8_t paeth_scalar(uint8_t a, uint8_t b, uint8_t c) {
  int p = a + b - c;
  int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}
#endif

#if defined(__SSE2__)
/* Always inlined with a constant bpp, so the memcpy calls become plain moves. */
static inline __attribute__((always_inline)) __m128i load_pixel(const uint8_t *p, int bpp) {
  uint32_t v = 0;
  memcpy(&v, p, (size_t)bpp);
  return _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)v), _mm_setzero_si128());
}

static inline __m128i abs16(__m128i x) {
  return _mm_max_epi16(x, _mm_sub_epi16(_mm_setzero_si128(), x));
}

/* Paeth on one pixel per step in 16-bit lanes: the left neighbour is the
 * previous step's result, so the loop is serial, but branch-free. */
static inline __attribute__((always_inline)) void
unfilter_paeth_sse2(uint8_t *row, const uint8_t *prior, size_t length, int bpp) {
  __m128i a = _mm_setzero_si128(), c = _mm_setzero_si128();
  for (size_t i = 0; i + (size_t)bpp <= length; i += (size_t)bpp) {
    __m128i b = load_pixel(prior + i, bpp);
    __m128i x = load_pixel(row + i, bpp);
    __m128i pa = abs16(_mm_sub_epi16(b, c));
    __m128i pb = abs16(_mm_sub_epi16(a, c));
    __m128i pc = abs16(_mm_add_epi16(_mm_sub_epi16(b, c), _mm_sub_epi16(a, c)));
    /* take a where pa <= pb and pa <= pc; else b where pb <= pc; else c */
    __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
    __m128i use_c = _mm_cmpgt_epi16(pb, pc);
    __m128i bc = _mm_or_si128(_mm_and_si128(use_c, c), _mm_andnot_si128(use_c, b));
    __m128i pred = _mm_or_si128(_mm_and_si128(not_a, bc), _mm_andnot_si128(not_a, a));
    __m128i out = _mm_and_si128(_mm_add_epi16(x, pred), _mm_set1_epi16(0xFF));
    uint32_t v = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(out, out));
    memcpy(row + i, &v, (size_t)bpp);
    a = out;
    c = b;
  }
}
#endif

static ic_status unfilter(uint8_t filter, uint8_t *row, const uint8_t *prior,
                          size_t length, int bpp, ic_result *result) {
  size_t i;
  switch (filter) {
  case 0:
    return IC_OK;
  case 1:
    for (i = (size_t)bpp; i < length; i++) row[i] = (uint8_t)(row[i] + row[i - bpp]);
    return IC_OK;
  case 2:
    for (i = 0; i < length; i++) row[i] = (uint8_t)(row[i] + prior[i]);
    return IC_OK;
  case 3:
    for (i = 0; i < (size_t)bpp; i++) row[i] = (uint8_t)(row[i] + (prior[i] >> 1));
    for (; i < length; i++)
      row[i] = (uint8_t)(row[i] + ((row[i - bpp] + prior[i]) >> 1));
    return IC_OK;
  case 4:
#if defined(__SSE2__)
    if (bpp == 3) unfilter_paeth_sse2(row, prior, length, 3);
    else unfilter_paeth_sse2(row, prior, length, 4);
#else
    for (i = 0; i < (size_t)bpp; i++) row[i] = (uint8_t)(row[i] + prior[i]);
    for (; i < length; i++)
      row[i] = (uint8_t)(row[i] + paeth_scalar(row[i - bpp], prior[i], prior[i - bpp]));
#endif
    return IC_OK;
  default:
    return ic_fail(result, IC_ERR_CORRUPT, "bad adaptive filter value");
  }
}

/* Reads the chunks after the image data through IEND, as png_read_end does:
 * critical chunks must not appear (IEND aside) and must have good CRCs;
 * ancillary chunks are skipped, a bad CRC on them is only a warning. */
static ic_status check_tail(fast_reader *r, uint8_t header[8]) {
  for (;;) {
    int critical = (header[4] & 0x20) == 0;
    int is_iend = memcmp(header + 4, "IEND", 4) == 0;
    int is_idat = memcmp(header + 4, "IDAT", 4) == 0;
    if (critical && !is_iend && !is_idat)
      return ic_fail(r->result, IC_ERR_CORRUPT, "critical chunk after image data");
    while (r->chunk_left > 0) {
      size_t n = r->chunk_left < sizeof(r->input) ? r->chunk_left : sizeof(r->input);
      ic_status status = read_exact(r, r->input, n);
      if (status != IC_OK) return status;
      r->crc = crc32(r->crc, r->input, (uInt)n);
      r->chunk_left -= (uint32_t)n;
    }
    /* A stray IDAT after other chunks is libpng's benign "too many IDATs". */
    ic_status status = finish_chunk(r, critical && !is_idat);
    if (status != IC_OK || is_iend) return status;
    status = next_chunk(r, header);
    if (status != IC_OK) return status;
  }
}

/* Gives zlib the next IDAT bytes; an error naming `ended` when there are none. */
static ic_status refill(fast_reader *r, z_stream *z, const char *ended) {
  size_t got;
  ic_status status = next_input(r, &got);
  if (status != IC_OK) return status;
  if (got == 0) return ic_fail(r->result, IC_ERR_CORRUPT, "%s", ended);
  z->next_in = r->input;
  z->avail_in = (uInt)got;
  return IC_OK;
}

static ic_status inflate_failed(z_stream *z, ic_result *result) {
  return ic_fail(result, IC_ERR_CORRUPT, "zlib: %s", z->msg ? z->msg : "inflate error");
}

ic_status ic_png_fast_rows(ic_stream *stream, uint32_t idat_length,
                           uint32_t width, uint32_t height, int channels,
                           ic_sink *sink, const ic_control *control,
                           ic_result *result) {
  fast_reader *r = calloc(1, sizeof(*r));
  size_t stride = (size_t)width * channels;
  uint8_t *rows = malloc(2 * (stride + 1));
  if (!r || !rows) {
    free(r);
    free(rows);
    return ic_fail(result, IC_ERR_NO_MEMORY, "row buffer allocation failed");
  }
  r->stream = stream;
  r->result = result;
  r->control = control;
  r->chunk_left = idat_length;
  r->crc = crc32(0, (const Bytef *)"IDAT", 4);
  z_stream z;
  memset(&z, 0, sizeof(z));
  if (inflateInit(&z) != Z_OK) {
    free(r);
    free(rows);
    return ic_fail(result, IC_ERR_NO_MEMORY, "zlib initialisation failed");
  }
  uint8_t *current = rows, *prior = rows + stride + 1;
  memset(prior, 0, stride + 1);
  ic_status status = sink->begin(sink, width, height, channels, result);
  int stream_end = 0;
  for (uint32_t y = 0; status == IC_OK && y < height; y++) {
    if (y % IC_CANCEL_CHECK_ROWS == 0 && (status = ic_check(control, result)) != IC_OK) break;
    z.next_out = current;
    z.avail_out = (uInt)(stride + 1);
    while (status == IC_OK && z.avail_out > 0) {
      if (z.avail_in == 0) {
        status = refill(r, &z, "not enough image data");
        if (status != IC_OK) break;
      }
      int zr = inflate(&z, Z_NO_FLUSH);
      if (zr == Z_STREAM_END) {
        stream_end = 1;
        if (z.avail_out > 0)
          status = ic_fail(result, IC_ERR_CORRUPT, "not enough image data");
        break;
      }
      if (zr != Z_OK && zr != Z_BUF_ERROR) status = inflate_failed(&z, result);
    }
    if (status != IC_OK) break;
    status = unfilter(current[0], current + 1, prior + 1, stride, channels, result);
    if (status == IC_OK) status = sink->row(sink, current + 1, result);
    uint8_t *swap = prior;
    prior = current;
    current = swap;
  }
  /* Runs zlib to the end of its stream so the Adler-32 is checked, as
   * libpng does; data beyond it is tolerated, like libpng's benign error. But
   * only within IC_PNG_TAIL_ALLOWANCE compressed bytes: a stream may go on for
   * gigabytes of zeros after the last row, and the rows are complete. */
  uint8_t drain[4096];
  uLong tail_start = z.total_in;
  while (status == IC_OK && !stream_end) {
    if (z.total_in - tail_start > IC_PNG_TAIL_ALLOWANCE) {
      result->warnings++;
      break;
    }
    if (z.avail_in == 0) {
      status = refill(r, &z, "image data ends early");
      if (status != IC_OK) break;
    }
    z.next_out = drain;
    z.avail_out = sizeof(drain);
    int zr = inflate(&z, Z_NO_FLUSH);
    if (zr == Z_STREAM_END) stream_end = 1;
    else if (zr != Z_OK && zr != Z_BUF_ERROR) status = inflate_failed(&z, result);
  }
  /* Skips what is left of the IDAT chunks (CRC still checked), then checks
   * everything after them. */
  uint8_t header[8] = {0};
  while (status == IC_OK && !r->idat_done) {
    size_t got;
    status = next_input(r, &got);
    if (status == IC_OK && got == 0 && r->idat_done) memcpy(header, r->input, 8);
  }
  if (status == IC_OK) status = check_tail(r, header);
  inflateEnd(&z);
  free(rows);
  free(r);
  return status;
}
