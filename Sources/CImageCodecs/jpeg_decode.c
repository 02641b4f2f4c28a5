/*
 * JPEG decoding through libjpeg-turbo with shrink-on-load.
 *
 * libjpeg reports fatal errors through error_exit and damage through
 * warnings. Both longjmp back to the setjmp in the same function that called
 * into libjpeg, so the jump never crosses into Swift. Warnings that mean the
 * picture is damaged abort the decode unless the caller accepts damage.
 */
#include "internal.h"
#include "jpeg_bands.h"
#include "jpeg_dc.h"

#include <jerror.h>
#include <jpeglib.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Rows requested per jpeg_read_scanlines call. */
#define JPEG_ROWS_PER_READ 8
/* Bytes read from a file or pipe per refill. */
#define JPEG_STREAM_BUFFER 16384

typedef struct jpeg_error_state {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  ic_status status;
  char message[JMSG_LENGTH_MAX];
  int accept_damaged;
  uint32_t warnings;
  uint32_t damage_warnings;
  const ic_control *control;
  /* Scan work, counted by the progress monitor: the scan last seen, the blocks decoded
   * by the scans so far and what they may add up to. */
  int scan_seen;
  uint64_t scan_blocks;
  uint64_t scan_block_budget;
  uint32_t max_scans;
  uint32_t source_width, source_height;
} jpeg_error_state;

/* Feeds libjpeg from an ic_stream (files and pipes). */
typedef struct stream_source {
  struct jpeg_source_mgr pub;
  ic_stream *stream;
  JOCTET buffer[JPEG_STREAM_BUFFER];
} stream_source;

/* Bytes of the first EXIF APP1 segment kept: the format caps a segment at 65533. */
#define JPEG_EXIF_MAX 65533

typedef struct jpeg_decoder {
  ic_decoder base;
  stream_source source;
  /* The source, which the bands of a file with restart markers read again in place. */
  ic_stream *stream;
  /* ic_limits.threads_per_decode. */
  unsigned threads;
  /* The first EXIF APP1 segment (after "Exif\0\0"), the only APP1 kept: every other APP1
   * is skipped unread, so a chain of thousands of them costs no memory. */
  uint8_t *exif;
  size_t exif_length;
  /* An APP1 segment being read: libjpeg may longjmp out of the reads (a strict
   * warning at a truncated end), so it is the decoder's to free until kept. */
  uint8_t *app1_reading;
  struct jpeg_decompress_struct cinfo;
  jpeg_error_state err;
  struct jpeg_progress_mgr progress;
  unsigned scale_num;
  int cmyk;
  int inverted_cmyk;
  int disable_dc;
  /* A preview from the first DC scans (ic_request.preview): 1/8 whatever is needed, and the
   * bytes may end after them. */
  int preview;
  /* ICC_PROFILE APP2 chunks by sequence number, held until the header is read; a chunk is
   * in the table before its bytes are read, so a longjmp mid-read cannot leak it. */
  uint8_t *icc_chunks[256];
  uint32_t icc_chunk_sizes[256];
  int icc_count;
  size_t icc_total;
  size_t icc_max;
  ic_profile_outcome icc_damage;
} jpeg_decoder;

static void on_error_exit(j_common_ptr cinfo) {
  jpeg_error_state *err = (jpeg_error_state *)cinfo->err;
  (*cinfo->err->format_message)(cinfo, err->message);
  switch (cinfo->err->msg_code) {
  case JERR_OUT_OF_MEMORY:
  case JERR_NO_BACKING_STORE:
    err->status = IC_ERR_NO_MEMORY;
    break;
  case JERR_IMAGE_TOO_BIG:
    /* Over libjpeg's own 65500 px a side: a size limit, not damage. */
    err->status = IC_ERR_TOO_LARGE;
    err->source_width = ((j_decompress_ptr)cinfo)->image_width;
    err->source_height = ((j_decompress_ptr)cinfo)->image_height;
    break;
  case JERR_INPUT_EMPTY:
  case JERR_INPUT_EOF:
    err->status = IC_ERR_TRUNCATED;
    break;
  default:
    err->status = IC_ERR_CORRUPT;
    break;
  }
  longjmp(err->jump, 1);
}

/* Warnings that say nothing about the pixels. */
static int warning_is_harmless(int code) {
  switch (code) {
  case JWRN_ADOBE_XFORM:
  case JWRN_JFIF_MAJOR:
  case JWRN_BOGUS_ICC:
  case JWRN_TOO_MUCH_DATA:
  /* Stray bytes between segments: the decoder resynchronises at the next
   * marker and the image is intact. Common in camera and MJPEG files. */
  case JWRN_EXTRANEOUS_DATA:
    return 1;
  default:
    return 0;
  }
}

static void on_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return; /* trace messages */
  jpeg_error_state *err = (jpeg_error_state *)cinfo->err;
  err->warnings++;
  int code = cinfo->err->msg_code;
  if (warning_is_harmless(code)) return;
  err->damage_warnings++;
  if (err->accept_damaged) return;
  (*cinfo->err->format_message)(cinfo, err->message);
  err->status = code == JWRN_JPEG_EOF ? IC_ERR_TRUNCATED : IC_ERR_CORRUPT;
  longjmp(err->jump, 1);
}

static void on_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void stop_with(jpeg_error_state *err, ic_status status, const char *message) {
  err->status = status;
  snprintf(err->message, sizeof(err->message), "%s", message);
  longjmp(err->jump, 1);
}

/* libjpeg calls this for every iMCU row, also while it absorbs the scans of a
 * multi-scan file: the point where cancellation, the deadline and the scan limits
 * are checked. Repeated scans raise no warning (a scan that redecodes the same
 * coefficients is legal), so strictness alone cannot stop a file that repeats
 * one scan thousands of times: counting scans and the blocks they cover does. */
static void on_progress(j_common_ptr common) {
  jpeg_error_state *err = (jpeg_error_state *)common->err;
  ic_status reason = ic_stop_reason(err->control);
  if (reason == IC_ERR_CANCELLED) stop_with(err, reason, "decode cancelled");
  if (reason == IC_ERR_TIMEOUT)
    stop_with(err, reason, "the decode took longer than its deadline");
  if (common->is_decompressor) {
    j_decompress_ptr cinfo = (j_decompress_ptr)common;
    if (cinfo->input_scan_number != err->scan_seen && cinfo->comps_in_scan > 0) {
      err->scan_seen = cinfo->input_scan_number;
      if (err->max_scans && (uint32_t)err->scan_seen > err->max_scans)
        stop_with(err, IC_ERR_TOO_COMPLEX, "the JPEG has more scans than allowed");
      for (int i = 0; i < cinfo->comps_in_scan; i++) {
        jpeg_component_info *c = cinfo->cur_comp_info[i];
        err->scan_blocks += (uint64_t)c->width_in_blocks * c->height_in_blocks;
      }
      if (err->scan_block_budget && err->scan_blocks > err->scan_block_budget)
        stop_with(err, IC_ERR_TOO_COMPLEX, "the JPEG's scans add up to more work than allowed");
    }
  }
}

static boolean source_fill(j_decompress_ptr cinfo) {
  static const JOCTET fake_eoi[2] = {0xFF, JPEG_EOI};
  stream_source *src = (stream_source *)cinfo->src;
  size_t n = ic_stream_read(src->stream, src->buffer, sizeof(src->buffer));
  if (n == 0) {
    /* Same as libjpeg's own sources: warn, then pretend the file ended,
     * so the strict policy decides whether that is an error. */
    if (ic_stream_failed(src->stream)) ERREXIT(cinfo, JERR_FILE_READ);
    WARNMS(cinfo, JWRN_JPEG_EOF);
    src->pub.next_input_byte = fake_eoi;
    src->pub.bytes_in_buffer = 2;
    return TRUE;
  }
  src->pub.next_input_byte = src->buffer;
  src->pub.bytes_in_buffer = n;
  return TRUE;
}

static void use_stream_source(jpeg_decoder *d, ic_stream *stream) {
  d->source.stream = stream;
  ic_jpeg_use_source(&d->cinfo, &d->source.pub, source_fill, jpeg_resync_to_restart);
}

static void free_icc_chunks(jpeg_decoder *d) {
  for (int i = 0; i < 256; i++) {
    free(d->icc_chunks[i]);
    d->icc_chunks[i] = NULL;
  }
}

static void jpeg_destroy_decoder(ic_decoder *base) {
  jpeg_decoder *d = (jpeg_decoder *)base;
  jpeg_destroy_decompress(&d->cinfo);
  free_icc_chunks(d);
  ic_colour_info_clear(&d->base.header.colour);
  free(d->exif);
  free(d->app1_reading);
  free(d);
}

/* One byte from the source (our sources never suspend: they pretend an EOI at the end). */
static int next_byte(j_decompress_ptr cinfo) {
  struct jpeg_source_mgr *src = cinfo->src;
  if (src->bytes_in_buffer == 0) (void)(*src->fill_input_buffer)(cinfo);
  src->bytes_in_buffer--;
  return *src->next_input_byte++;
}

/* APP1: keep the first EXIF segment, skip every other one without storing it. */
static boolean read_app1(j_decompress_ptr cinfo) {
  jpeg_decoder *d = (jpeg_decoder *)((char *)cinfo - offsetof(jpeg_decoder, cinfo));
  int high = next_byte(cinfo);
  long length = (long)(high << 8 | next_byte(cinfo)) - 2;
  if (length <= 0) return TRUE;
  if (d->exif || length < 6) {
    (*cinfo->src->skip_input_data)(cinfo, length);
    return TRUE;
  }
  uint8_t *buffer = malloc((size_t)length);
  if (!buffer) {
    (*cinfo->src->skip_input_data)(cinfo, length);
    return TRUE;
  }
  /* Found by fuzzing: a longjmp out of next_byte leaked the buffer. */
  d->app1_reading = buffer;
  for (long i = 0; i < length; i++) buffer[i] = (uint8_t)next_byte(cinfo);
  d->app1_reading = NULL;
  static const uint8_t exif[6] = {'E', 'x', 'i', 'f', 0, 0};
  if (memcmp(buffer, exif, 6) == 0 && length - 6 <= JPEG_EXIF_MAX) {
    d->exif = buffer;
    d->exif_length = (size_t)length;
  } else {
    free(buffer);
  }
  return TRUE;
}

/* Records damage to the profile: it is dropped, and later ICC chunks are skipped. */
static void icc_damaged(jpeg_decoder *d, ic_profile_outcome damage) {
  if (d->icc_damage == IC_PROFILE_NONE) d->icc_damage = damage;
  free_icc_chunks(d);
}

/* APP2: keep ICC_PROFILE chunks, each checked (sequence, count) and all of them together
 * capped at max_profile_bytes as they arrive; every other APP2 is skipped unread. */
static boolean read_app2(j_decompress_ptr cinfo) {
  jpeg_decoder *d = (jpeg_decoder *)((char *)cinfo - offsetof(jpeg_decoder, cinfo));
  int high = next_byte(cinfo);
  long length = (long)(high << 8 | next_byte(cinfo)) - 2;
  static const uint8_t tag[12] = {'I', 'C', 'C', '_', 'P', 'R', 'O', 'F', 'I', 'L', 'E', 0};
  if (length < 14) {
    if (length > 0) (*cinfo->src->skip_input_data)(cinfo, length);
    return TRUE;
  }
  uint8_t head[14];
  for (int i = 0; i < 14; i++) head[i] = (uint8_t)next_byte(cinfo);
  length -= 14;
  if (memcmp(head, tag, 12) != 0 || d->icc_damage != IC_PROFILE_NONE) {
    if (length > 0) (*cinfo->src->skip_input_data)(cinfo, length);
    return TRUE;
  }
  int sequence = head[12], count = head[13];
  if (sequence == 0 || count == 0 || sequence > count ||
      (d->icc_count && count != d->icc_count) || d->icc_chunks[sequence] || length == 0) {
    icc_damaged(d, IC_PROFILE_BROKEN);
  } else if (d->icc_total + (size_t)length > d->icc_max) {
    icc_damaged(d, IC_PROFILE_OVERSIZED);
  } else {
    uint8_t *chunk = malloc((size_t)length);
    if (chunk) {
      d->icc_count = count;
      d->icc_chunks[sequence] = chunk;
      d->icc_chunk_sizes[sequence] = (uint32_t)length;
      d->icc_total += (size_t)length;
      for (long i = 0; i < length; i++) chunk[i] = (uint8_t)next_byte(cinfo);
      return TRUE;
    }
    icc_damaged(d, IC_PROFILE_BROKEN);
  }
  if (length > 0) (*cinfo->src->skip_input_data)(cinfo, length);
  return TRUE;
}

/* The chunks in order as one profile, or the damage when one is missing. */
static void assemble_icc(jpeg_decoder *d) {
  ic_colour_info *colour = &d->base.header.colour;
  colour->damage = d->icc_damage;
  if (d->icc_damage != IC_PROFILE_NONE || d->icc_count == 0) return;
  for (int i = 1; i <= d->icc_count; i++) {
    if (!d->icc_chunks[i]) {
      icc_damaged(d, IC_PROFILE_BROKEN);
      colour->damage = IC_PROFILE_BROKEN;
      return;
    }
  }
  colour->icc = malloc(d->icc_total);
  if (!colour->icc) {
    free_icc_chunks(d);
    return;
  }
  size_t offset = 0;
  for (int i = 1; i <= d->icc_count; i++) {
    memcpy(colour->icc + offset, d->icc_chunks[i], d->icc_chunk_sizes[i]);
    offset += d->icc_chunk_sizes[i];
  }
  colour->icc_size = offset;
  free_icc_chunks(d);
}

static uint32_t scaled(uint32_t size, unsigned num) {
  return (uint32_t)(((uint64_t)size * num + 7) / 8);
}

/*
 * How much more than the common headroom (IC_SHRINK_HEADROOM, 1.75) the 1/4 and 1/2 scales
 * need: their 2x2 and 4x4 IDCTs keep each block's lowest frequencies, which aliases fine
 * detail more than 1/8's exact block average. Measured at 256 px against a full decode's
 * Lanczos-3 on the corpus photos (docs/BENCHMARKS.md, "Resampling against vipsthumbnail"):
 * 1.75x everywhere scores 48.24 dB mean, worst 41.92 (a 2048-pixel photo at 1/4, 2.0x);
 * 2.5x 48.80 and 43.93, with 2560-pixel photos still at 1/4 (0.54 of vips' time; 3x sends
 * them to 1/2, 0.76).
 */
#define IC_JPEG_REDUCED_IDCT_HEADROOM (2.5 / 1.75)

unsigned ic_jpeg_scale_for(uint32_t w, uint32_t h, uint32_t need_width, uint32_t need_height) {
  /* Powers of two only: libjpeg-turbo has SIMD reduced IDCTs for them, and the odd sizes
   * (3/8, 5/8...) measured worse against an exact area average. */
  unsigned num = 1;
  for (; num < 8; num *= 2) {
    /* 1/8 is an exact 8x8 block average; the 2x2 and 4x4 IDCTs of 1/4 and 1/2 truncate each
     * block's spectrum, which aliases fine detail, so they need more room above the output
     * for the kernel to filter it (see IC_JPEG_REDUCED_IDCT_HEADROOM). */
    double room = num == 1 ? 1.0 : IC_JPEG_REDUCED_IDCT_HEADROOM;
    if (scaled(w, num) >= room * need_width && scaled(h, num) >= room * need_height) break;
  }
  return num;
}

void ic_jpeg_set_scale(ic_decoder *base, unsigned num, int rgb, uint32_t *width,
                       uint32_t *height) {
  jpeg_decoder *d = (jpeg_decoder *)base;
  if (rgb && d->cinfo.num_components == 3) d->cinfo.jpeg_color_space = JCS_RGB;
  d->scale_num = num;
  base->pixel_scale = num / 8.0;
  *width = scaled(d->cinfo.image_width, num);
  *height = scaled(d->cinfo.image_height, num);
}

static void jpeg_choose_size(ic_decoder *base, uint32_t need_width,
                             uint32_t need_height, int allow_scaling,
                             uint32_t *width, uint32_t *height) {
  jpeg_decoder *d = (jpeg_decoder *)base;
  uint32_t w = d->cinfo.image_width, h = d->cinfo.image_height;
  unsigned num = 8;
  if (d->preview) num = 1;
  else if (allow_scaling) num = ic_jpeg_scale_for(w, h, need_width, need_height);
  d->scale_num = num;
  base->pixel_scale = num / 8.0;
  *width = scaled(w, num);
  *height = scaled(h, num);
}

static uint64_t round_up(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

/* Coefficient buffers libjpeg allocates for an arithmetic-coded multi-scan file, past which
 * it is refused before they are: the DC-scan reader (jpeg_dc_scans.c) reads Huffman codes
 * only, so such a file has no path without every block's 64 coefficients (a 10000x10000
 * one held 191 MiB for a 256-pixel thumbnail). Real ones are rare and small. */
#define IC_JPEG_ARITH_MAX_COEFFICIENTS (64u << 20)

/* Bytes of libjpeg's whole-image coefficient arrays (a multi-scan file). */
static uint64_t coefficient_bytes(j_decompress_ptr cinfo) {
  uint64_t bytes = 0;
  for (int ci = 0; ci < cinfo->num_components; ci++) {
    const jpeg_component_info *c = &cinfo->comp_info[ci];
    bytes += round_up(c->width_in_blocks, (uint64_t)c->h_samp_factor) *
             round_up(c->height_in_blocks, (uint64_t)c->v_samp_factor) * DCTSIZE2 *
             sizeof(JCOEF);
  }
  return bytes;
}

static int multi_scan(j_decompress_ptr cinfo) {
  return cinfo->progressive_mode || cinfo->comps_in_scan < cinfo->num_components;
}

/* What jpeg_run will hold at the chosen scale. */
static uint64_t jpeg_working_memory(ic_decoder *base) {
  jpeg_decoder *d = (jpeg_decoder *)base;
  j_decompress_ptr cinfo = &d->cinfo;
  uint64_t bytes = IC_DECODE_BASE_BYTES + d->exif_length;
  if (d->scale_num == 1 && !d->disable_dc && ic_jpeg_dc_applies(cinfo))
    return bytes + ic_jpeg_dc_memory(cinfo);
  uint64_t width = scaled(cinfo->image_width, d->scale_num);
  int components = cinfo->num_components;
  /* Sample rows: each component's iMCU row at the output scale, three of them for the
   * context that smooth upsampling keeps, the upsampled rows, and our row buffers. */
  bytes += width * (uint64_t)components * cinfo->max_v_samp_factor * 8 * 3 +
           width * (uint64_t)(components + 3) * JPEG_ROWS_PER_READ;
  /* A multi-scan file: libjpeg keeps every block's 64 coefficients. */
  if (multi_scan(cinfo)) bytes += coefficient_bytes(cinfo);
  /* A file with restart markers may be decoded in bands, each with a decoder of its own,
   * into the whole image at the scale. */
  if (!d->preview)
    bytes += ic_jpeg_bands_memory(cinfo, d->scale_num, d->threads, bytes - IC_DECODE_BASE_BYTES);
  return bytes;
}

static void cmyk_to_rgb(const uint8_t *src, uint8_t *dst, uint32_t width,
                        int inverted) {
  for (uint32_t x = 0; x < width; x++) {
    uint32_t c = src[x * 4], m = src[x * 4 + 1], y = src[x * 4 + 2],
             k = src[x * 4 + 3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    /* With inverted (Adobe) values, c * k / 255 is (1-C)(1-K) scaled. */
    dst[x * 3] = (uint8_t)((c * k + 127) / 255);
    dst[x * 3 + 1] = (uint8_t)((m * k + 127) / 255);
    dst[x * 3 + 2] = (uint8_t)((y * k + 127) / 255);
  }
}

/* CMYK rows to RGB on their way to the sink: through the file's profile (or the standard
 * one), else the formula. Both decode paths (libjpeg's and the DC scans') hand their rows
 * to it. */
typedef struct cmyk_sink {
  ic_sink base;
  ic_sink *next;
  ic_colour_transform *transform;
  int inverted;
  uint32_t width;
  uint8_t *rgb;
} cmyk_sink;

static ic_status cmyk_begin(ic_sink *sink, uint32_t width, uint32_t height, int channels,
                            ic_result *result) {
  cmyk_sink *s = (cmyk_sink *)sink;
  if (channels != 4) return ic_fail(result, IC_ERR_CORRUPT, "unexpected component count %d", channels);
  s->width = width;
  s->rgb = malloc((size_t)width * 3);
  if (!s->rgb) return ic_fail(result, IC_ERR_NO_MEMORY, "row buffer allocation failed");
  return s->next->begin(s->next, width, height, 3, result);
}

static ic_status cmyk_row(ic_sink *sink, const uint8_t *row, ic_result *result) {
  cmyk_sink *s = (cmyk_sink *)sink;
  if (s->transform) ic_colour_cmyk_row(s->transform, row, s->rgb, s->width);
  else cmyk_to_rgb(row, s->rgb, s->width, s->inverted);
  return s->next->row(s->next, s->rgb, result);
}

static void report_warnings(jpeg_decoder *d, ic_result *result) {
  result->warnings = d->err.warnings;
  result->damage_warnings = d->err.damage_warnings;
}

static ic_status fail_from_libjpeg(jpeg_decoder *d, ic_result *result) {
  report_warnings(d, result);
  return ic_fail(result, d->err.status, "%s", d->err.message);
}

static ic_status jpeg_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  jpeg_decoder *d = (jpeg_decoder *)base;
  struct jpeg_decompress_struct *cinfo = &d->cinfo;
  /* volatile: modified between setjmp and a possible longjmp. */
  uint8_t *volatile buffer = NULL;
  cmyk_sink cmyk = {.base = {.begin = cmyk_begin, .row = cmyk_row}, .next = sink};
  cmyk_sink *volatile converting = NULL;
  if (setjmp(d->err.jump)) {
    free(buffer);
    if (converting) {
      free(converting->rgb);
      ic_colour_release(converting->transform);
    }
    return fail_from_libjpeg(d, result);
  }
  ic_sink *out = sink;
  if (d->cmyk) {
    ic_profile_outcome outcome;
    cmyk.inverted = d->inverted_cmyk;
    cmyk.transform = ic_colour_acquire_cmyk(&base->header.colour, d->inverted_cmyk, &outcome,
                                            &result->transform_cached);
    result->profile = outcome;
    converting = &cmyk;
    out = &cmyk.base;
  }
  ic_status status;
  if (d->scale_num == 1 && !d->disable_dc && ic_jpeg_dc_applies(cinfo)) {
    /* Every output pixel is a block's DC: the AC scans need not be decoded, nor the
     * whole image's coefficients kept (see jpeg_dc_scans.c). */
    result->dc_only = 1;
    status = ic_jpeg_dc_run(cinfo, d->err.control, out, result, d->preview);
    report_warnings(d, result);
  } else if (cinfo->arith_code && multi_scan(cinfo) &&
             coefficient_bytes(cinfo) > IC_JPEG_ARITH_MAX_COEFFICIENTS) {
    status = ic_fail(result, IC_ERR_TOO_COMPLEX,
                     "an arithmetic-coded multi-scan JPEG of %ux%u needs %llu MiB of "
                     "coefficients (at most %u)",
                     cinfo->image_width, cinfo->image_height,
                     (unsigned long long)(coefficient_bytes(cinfo) >> 20),
                     IC_JPEG_ARITH_MAX_COEFFICIENTS >> 20);
  } else if (!d->preview && d->threads != 1 &&
             ic_jpeg_bands_run(cinfo, d->stream, d->scale_num, d->threads, d->err.control,
                               out, result, &status)) {
    /* Decoded in bands at once, or stopped while they ran (see jpeg_bands.c). */
  } else {
    cinfo->scale_num = d->scale_num;
    cinfo->scale_denom = 8;
    jpeg_start_decompress(cinfo);
    uint32_t width = cinfo->output_width, height = cinfo->output_height;
    int components = cinfo->output_components;
    if ((d->cmyk && components != 4) || (!d->cmyk && components != 3)) {
      status = ic_fail(result, IC_ERR_CORRUPT, "unexpected component count %d", components);
    } else {
      size_t stride = (size_t)width * components;
      buffer = malloc(stride * JPEG_ROWS_PER_READ);
      status = buffer ? out->begin(out, width, height, components, result)
                      : ic_fail(result, IC_ERR_NO_MEMORY, "row buffer allocation failed");
      JSAMPROW rows[JPEG_ROWS_PER_READ];
      for (int i = 0; i < JPEG_ROWS_PER_READ && buffer; i++) rows[i] = buffer + stride * i;
      while (status == IC_OK && cinfo->output_scanline < height) {
        status = ic_check(d->err.control, result);
        if (status != IC_OK) break;
        JDIMENSION got = jpeg_read_scanlines(cinfo, rows, JPEG_ROWS_PER_READ);
        if (got == 0) {
          status = ic_fail(result, IC_ERR_TRUNCATED, "decoder returned no rows");
          break;
        }
        for (JDIMENSION i = 0; i < got && status == IC_OK; i++)
          status = out->row(out, rows[i], result);
      }
      /* Reads on to EOI, so damage after the last scan (a second SOF, bogus
       * tables) is still an error rather than silently ignored. */
      if (status == IC_OK) jpeg_finish_decompress(cinfo);
      report_warnings(d, result);
    }
  }
  free(buffer);
  free(cmyk.rgb);
  ic_colour_release(cmyk.transform);
  return status;
}

int ic_jpeg_sniff(const uint8_t *bytes, size_t size) {
  /* SOI alone: libjpeg skips stray bytes before the next marker. */
  return size >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8;
}

static const ic_decoder_ops jpeg_ops = {jpeg_choose_size, jpeg_run, jpeg_destroy_decoder,
                                        jpeg_working_memory, NULL};

ic_status ic_jpeg_open(ic_stream *stream, const ic_limits *limits,
                       const ic_control *control, ic_result *result,
                       ic_decoder **out) {
  jpeg_decoder *d = ic_decoder_new(sizeof(*d), &jpeg_ops, limits, control, result);
  if (!d) return result->status;
  d->scale_num = 8;
  d->stream = stream;
  d->threads = limits->threads_per_decode;
  d->cinfo.err = jpeg_std_error(&d->err.pub);
  d->err.pub.error_exit = on_error_exit;
  d->err.pub.emit_message = on_emit_message;
  d->err.pub.output_message = on_output_message;
  d->err.accept_damaged = limits->accept_damaged;
  d->err.control = control;
  d->err.max_scans = limits->max_scans;
  d->disable_dc = limits->disable_progressive_dc;
  d->icc_max = limits->max_profile_bytes;
  if (setjmp(d->err.jump)) {
    fail_from_libjpeg(d, result);
    if (result->status == IC_ERR_TOO_LARGE) {
      result->source_width = d->err.source_width;
      result->source_height = d->err.source_height;
    }
    jpeg_destroy_decoder(&d->base);
    return result->status;
  }
  jpeg_create_decompress(&d->cinfo);
  d->progress.progress_monitor = on_progress;
  d->cinfo.progress = &d->progress;
  if (limits->max_decoder_memory)
    d->cinfo.mem->max_memory_to_use = (long)limits->max_decoder_memory;
  if (stream->file) use_stream_source(d, stream);
  else jpeg_mem_src(&d->cinfo, stream->data, (unsigned long)stream->size);
  jpeg_set_marker_processor(&d->cinfo, JPEG_APP0 + 1, read_app1);
  jpeg_set_marker_processor(&d->cinfo, JPEG_APP0 + 2, read_app2);
  jpeg_read_header(&d->cinfo, TRUE);
  assemble_icc(d);
  d->base.header.colour.space = d->cinfo.num_components == 1   ? IC_SPACE_GREY
                                : d->cinfo.num_components == 4 ? IC_SPACE_CMYK
                                                               : IC_SPACE_RGB;
  report_warnings(d, result);
  ic_status status = ic_check_limits(d->cinfo.image_width,
                                     d->cinfo.image_height, limits, result);
  if (status != IC_OK) {
    jpeg_destroy_decoder(&d->base);
    return status;
  }
  if (d->cinfo.jpeg_color_space == JCS_CMYK ||
      d->cinfo.jpeg_color_space == JCS_YCCK) {
    d->cinfo.out_color_space = JCS_CMYK;
    d->cmyk = 1;
    /* Adobe writers store CMYK inverted; the APP14 marker says so. */
    d->inverted_cmyk = d->cinfo.saw_Adobe_marker;
  } else {
    d->cinfo.out_color_space = JCS_RGB;
  }
  d->base.header.width = d->cinfo.image_width;
  d->base.header.height = d->cinfo.image_height;
  d->base.header.orientation =
      d->exif ? ic_exif_orientation(d->exif + 6, d->exif_length - 6) : 1;
  /* The scans may decode at most max_scan_passes times every block of the image. */
  if (limits->max_scan_passes) {
    uint64_t blocks = 0;
    for (int i = 0; i < d->cinfo.num_components; i++)
      blocks += (uint64_t)d->cinfo.comp_info[i].width_in_blocks *
                d->cinfo.comp_info[i].height_in_blocks;
    d->err.scan_block_budget = blocks * limits->max_scan_passes;
  }
  d->base.header.channels = 3;
  *out = &d->base;
  return IC_OK;
}

/* ---- Previews ---- */

/* A preview from the EXIF thumbnail: the image's header (size, orientation) over a decoder of
 * the thumbnail's bytes, which spans the whole image as a smaller decode would. The thumbnail
 * is taken as sRGB: the image's profile describes the image's encoding, not the camera's
 * thumbnail. */
typedef struct exif_preview {
  ic_decoder base;
  ic_decoder *inner;
  ic_stream stream;
  uint8_t *bytes;
} exif_preview;

static void exif_preview_choose_size(ic_decoder *base, uint32_t need_width,
                                     uint32_t need_height, int allow_scaling, uint32_t *width,
                                     uint32_t *height) {
  (void)need_width;
  (void)need_height;
  (void)allow_scaling;
  exif_preview *p = (exif_preview *)base;
  p->inner->ops->choose_size(p->inner, p->inner->header.width, p->inner->header.height, 0, width,
                        height);
}

static ic_status exif_preview_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  exif_preview *p = (exif_preview *)base;
  return p->inner->ops->run(p->inner, sink, result);
}

static uint64_t exif_preview_memory(ic_decoder *base) {
  exif_preview *p = (exif_preview *)base;
  return p->inner->ops->working_memory(p->inner);
}

static void exif_preview_destroy(ic_decoder *base) {
  exif_preview *p = (exif_preview *)base;
  if (p->inner) p->inner->ops->destroy(p->inner);
  ic_stream_close(&p->stream);
  free(p->bytes);
  free(p);
}

/* The EXIF thumbnail of `d` as a preview decoder, or NULL when it has none of the image's
 * shape or it does not open. */
static const ic_decoder_ops exif_preview_ops = {exif_preview_choose_size, exif_preview_run,
                                                exif_preview_destroy, exif_preview_memory, NULL};

static ic_decoder *open_exif_preview(jpeg_decoder *d, const ic_limits *limits,
                                     const ic_control *control) {
  size_t offset = 0, length = 0;
  if (!d->exif || !ic_exif_thumbnail(d->exif + 6, d->exif_length - 6, &offset, &length))
    return NULL;
  exif_preview *p = ic_decoder_new(sizeof(*p), &exif_preview_ops, limits, control, NULL);
  if (!p) return NULL;
  p->bytes = malloc(length);
  ic_result scratch;
  memset(&scratch, 0, sizeof(scratch));
  ic_source source = {.data = p->bytes, .size = length, .path = NULL, .fd = -1};
  if (!p->bytes || ic_stream_open(&p->stream, &source, &scratch) != IC_OK) {
    exif_preview_destroy(&p->base);
    return NULL;
  }
  memcpy(p->bytes, d->exif + 6 + offset, length);
  uint32_t width = d->cinfo.image_width, height = d->cinfo.image_height;
  if (ic_jpeg_open(&p->stream, limits, control, &scratch, &p->inner) != IC_OK ||
      !ic_same_shape(p->inner->header.width, p->inner->header.height, width, height) ||
      p->inner->header.width >= width) {
    exif_preview_destroy(&p->base);
    return NULL;
  }
  p->base.header.width = width;
  p->base.header.height = height;
  p->base.header.orientation = d->base.header.orientation;
  p->base.header.channels = 3;
  return &p->base;
}

ic_status ic_jpeg_preview_open(ic_decoder *base, const ic_limits *limits,
                               const ic_control *control, ic_result *result,
                               ic_decoder **out) {
  jpeg_decoder *d = (jpeg_decoder *)base;
  ic_decoder *exif = open_exif_preview(d, limits, control);
  if (exif) {
    jpeg_destroy_decoder(base);
    *out = exif;
    return IC_OK;
  }
  if (d->disable_dc || !ic_jpeg_dc_applies(&d->cinfo)) {
    jpeg_destroy_decoder(base);
    return ic_fail(result, IC_ERR_UNSUPPORTED,
                   "the JPEG has neither an EXIF thumbnail of its shape nor DC scans first");
  }
  d->preview = 1;
  *out = base;
  return IC_OK;
}
