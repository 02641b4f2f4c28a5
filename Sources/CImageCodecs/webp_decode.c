/*
 * WebP decoding (libwebp): lossy, lossless and alpha, the first frame of an animation
 * composited on its canvas, EXIF orientation from the VP8X EXIF chunk.
 *
 * libwebp scales while it decodes, and its rescaler is an exact area average, so the decode
 * goes straight to the output size (no headroom for a kernel to finish: at 256 px that scored
 * 34.4 dB against an exact area average of the full image on the corpus's 24 MP photo, going
 * to the output size directly scores more; docs/BENCHMARKS.md). A thumbnail never holds the
 * full-size picture: the output buffer is the scaled size. The bitstream is
 * appended in doubling slices to the incremental decoder, rows go to the sink as they are
 * finished, and the control is checked between slices. A lossless bitstream's prefix-code
 * groups are counted first (webp_lossless.c): libwebp allocates tables for each.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/demux.h>

/* Bitstream bytes first handed to the incremental decoder; each later slice doubles what it
 * has. libwebp 1.2 parses a lossless header from its first byte again on each update while
 * the header is incomplete: with fixed 64 KiB slices a 15 MB header cost 6 s and 610 MB
 * (quadratic); doubling keeps the re-reading under twice the file, and the control is still
 * checked between slices. */
#define WEBP_FIRST_SLICE (64 * 1024)
/* Prefix-code groups a lossless WebP may have: libwebp's encoder writes at most 2,600, and
 * libwebp 1.2 allocates about 12 KB of tables for each (webp_lossless.c). */
#define IC_WEBP_MAX_GROUPS 4096

typedef struct webp_decoder {
  ic_decoder base;
  /* The bitstream to decode: the whole file, or an animation's first frame. */
  const uint8_t *frame;
  size_t frame_size;
  /* The frame's place on the canvas (header.width x header.height), in canvas pixels. */
  uint32_t frame_x, frame_y, frame_width, frame_height;
  int frame_alpha;
  int lossless;
  /* The canvas size the decode delivers (choose_size). */
  uint32_t out_width, out_height;
  /* Bytes of the file read into memory (a path source), 0 for a source given in memory. */
  uint64_t buffered;
  /* Lossless: the prefix-code groups libwebp builds tables for, and the colour cache bits. */
  uint32_t groups;
  int cache_bits;
} webp_decoder;

int ic_webp_sniff(const uint8_t *bytes, size_t size) {
  return size >= 12 && memcmp(bytes, "RIFF", 4) == 0 && memcmp(bytes + 8, "WEBP", 4) == 0;
}

static ic_status fail_from_status(VP8StatusCode code, const char *what, ic_result *result) {
  switch (code) {
  case VP8_STATUS_OK:
    return IC_OK;
  case VP8_STATUS_NOT_ENOUGH_DATA:
  case VP8_STATUS_SUSPENDED:
    return ic_fail(result, IC_ERR_TRUNCATED, "WebP %s: the data ends early", what);
  case VP8_STATUS_OUT_OF_MEMORY:
    return ic_fail(result, IC_ERR_NO_MEMORY, "WebP %s: out of memory", what);
  case VP8_STATUS_UNSUPPORTED_FEATURE:
    return ic_fail(result, IC_ERR_UNSUPPORTED, "WebP %s: unsupported feature", what);
  case VP8_STATUS_INVALID_PARAM:
  case VP8_STATUS_BITSTREAM_ERROR:
  case VP8_STATUS_USER_ABORT:
  default:
    return ic_fail(result, IC_ERR_CORRUPT, "WebP %s: bitstream error (%d)", what, (int)code);
  }
}

/* Exactly the size asked for on each axis (libwebp scales the axes independently), so a
 * contain or fill thumbnail leaves the resampler nothing to do but copy. */
static void webp_choose_size(ic_decoder *base, uint32_t need_width, uint32_t need_height,
                             int allow_scaling, uint32_t *width, uint32_t *height) {
  webp_decoder *d = (webp_decoder *)base;
  uint32_t w = base->header.width, h = base->header.height;
  d->out_width = w;
  d->out_height = h;
  /* Lossy with alpha: libwebp rescales its RGB without weighting by alpha, which darkens
   * edges next to transparent black (measured: 42 levels on a red/transparent edge). Such a
   * file decodes at full size and our premultiplied resampler reduces it. */
  int scalable = !(d->frame_alpha && !d->lossless);
  if (allow_scaling && scalable && (need_width < w || need_height < h)) {
    d->out_width = need_width < 1 ? 1 : need_width > w ? w : need_width;
    d->out_height = need_height < 1 ? 1 : need_height > h ? h : need_height;
  }
  *width = d->out_width;
  *height = d->out_height;
}

/* The frame's rectangle on the output canvas: its edges scaled like the canvas. */
static void scaled_span(uint32_t start, uint32_t length, uint32_t canvas, uint32_t out,
                        uint32_t *out_start, uint32_t *out_length) {
  double s = (double)out / canvas;
  uint32_t a = (uint32_t)floor(start * s + 0.5), b = (uint32_t)floor((start + length) * s + 0.5);
  if (a >= out) a = out - 1;
  if (b > out) b = out;
  if (b <= a) b = a + 1;
  *out_start = a;
  *out_length = b - a;
}

static ic_status webp_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  webp_decoder *d = (webp_decoder *)base;
  uint32_t fx, fy, fw, fh;
  scaled_span(d->frame_x, d->frame_width, base->header.width, d->out_width, &fx, &fw);
  scaled_span(d->frame_y, d->frame_height, base->header.height, d->out_height, &fy, &fh);
  int channels = base->header.channels;
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config))
    return ic_fail(result, IC_ERR_CORRUPT, "libwebp version mismatch");
  config.output.colorspace = channels == 4 ? MODE_RGBA : MODE_RGB;
  /* libwebp's filter thread: the in-loop filter of one macroblock row runs beside the
   * decoding of the next (82 -> 54 ms for a 12 MP photo here; vipsthumbnail does the same).
   * One extra thread for the length of a decode; lossless files have no filter and ignore it. */
  config.options.use_threads = 1;
  if (fw != d->frame_width || fh != d->frame_height) {
    config.options.use_scaling = 1;
    config.options.scaled_width = (int)fw;
    config.options.scaled_height = (int)fh;
  }
  WebPIDecoder *idec = WebPIDecode(NULL, 0, &config);
  if (!idec) return ic_fail(result, IC_ERR_NO_MEMORY, "WebP decoder allocation failed");
  size_t stride = (size_t)d->out_width * channels;
  uint8_t *row = calloc(stride, 1);
  ic_status status = row ? sink->begin(sink, d->out_width, d->out_height, channels, result)
                         : ic_fail(result, IC_ERR_NO_MEMORY, "row allocation failed");
  uint32_t emitted = 0; /* canvas rows handed to the sink */
  size_t fed = 0;
  VP8StatusCode code = VP8_STATUS_SUSPENDED;
  while (status == IC_OK && emitted < d->out_height) {
    if (ic_check(d->base.control, result) != IC_OK) {
      status = result->status;
      break;
    }
    int frame_rows = 0;
    if (code == VP8_STATUS_SUSPENDED && fed < d->frame_size) {
      size_t slice = fed < WEBP_FIRST_SLICE ? WEBP_FIRST_SLICE : fed;
      size_t n = d->frame_size - fed < slice ? d->frame_size - fed : slice;
      /* WebPIUpdate reads our buffer in place; WebPIAppend would copy the file. */
      fed += n;
      code = WebPIUpdate(idec, d->frame, fed);
      if (code != VP8_STATUS_OK && code != VP8_STATUS_SUSPENDED) {
        status = fail_from_status(code, "decode", result);
        break;
      }
    }
    int last_y = 0, got_w = 0, got_h = 0, got_stride = 0;
    const uint8_t *pixels = WebPIDecGetRGB(idec, &last_y, &got_w, &got_h, &got_stride);
    if (pixels && got_w == (int)fw && got_h == (int)fh) frame_rows = last_y;
    /* Canvas rows whose frame rows are finished (or that lie outside the frame). */
    uint32_t ready = frame_rows >= (int)fh ? d->out_height : fy + (uint32_t)frame_rows;
    if (ready > d->out_height) ready = d->out_height;
    for (; emitted < ready && status == IC_OK; emitted++) {
      const uint8_t *out = row;
      if (emitted >= fy && emitted < fy + fh) {
        const uint8_t *src = pixels + (size_t)(emitted - fy) * got_stride;
        if (fx == 0 && fw == d->out_width) {
          out = src;
        } else {
          memset(row, 0, stride);
          memcpy(row + (size_t)fx * channels, src, (size_t)fw * channels);
        }
      } else if (channels == 4) {
        memset(row, 0, stride);
      }
      status = sink->row(sink, out, result);
    }
    if (status == IC_OK && emitted < d->out_height && fed >= d->frame_size &&
        frame_rows < (int)fh) {
      status = ic_fail(result, IC_ERR_TRUNCATED, "WebP data ends at row %d of %u",
                       frame_rows, fh);
    }
  }
  free(row);
  WebPIDelete(idec);
  /* The output buffer is the config's, not the decoder's: WebPIDelete leaves it. */
  WebPFreeDecBuffer(&config.output);
  return status;
}

static uint64_t webp_working_memory(ic_decoder *base) {
  webp_decoder *d = (webp_decoder *)base;
  uint64_t w = d->frame_width, h = d->frame_height;
  uint64_t out = (uint64_t)d->out_width * d->out_height * base->header.channels;
  /* The (scaled) output and one canvas row, the rescaler's accumulators (4 channels of 2
   * int32 rows), and the bitstream decoder: lossless keeps every ARGB pixel (backward
   * references reach anywhere), lossy a band of YUV rows and per-macroblock state, plus
   * the whole alpha plane when there is one. */
  uint64_t bytes = out + (uint64_t)d->out_width * 4 * 9;
  /* libwebp 1.2's Huffman tables of one group, by colour cache bits (its kTableSize), as
   * 4-byte entries, and the group's own record. */
  static const uint16_t table_entries[12] = {2954, 2956, 2958, 2962, 2970, 2986,
                                             3018, 3082, 3210, 3466, 3978, 5002};
  if (d->lossless)
    bytes += w * h * 4 + w * 16 * 4 +
             (uint64_t)d->groups * (table_entries[d->cache_bits] * 4u + 128);
  else
    bytes += w * 64 + (d->frame_alpha ? w * h : 0);
  return bytes + d->buffered + IC_DECODE_BASE_BYTES;
}

static void webp_destroy(ic_decoder *base) {
  ic_colour_info_clear(&base->header.colour);
  free(base);
}

/* The payload of the first `tag` chunk in a RIFF file or in a frame's chunks. */
static int find_chunk(const uint8_t *bytes, size_t size, const char *tag, const uint8_t **out,
                      size_t *out_size) {
  size_t at = size >= 12 && memcmp(bytes, "RIFF", 4) == 0 ? 12 : 0;
  while (at + 8 <= size) {
    size_t length = (size_t)bytes[at + 4] | (size_t)bytes[at + 5] << 8 |
                    (size_t)bytes[at + 6] << 16 | (size_t)bytes[at + 7] << 24;
    size_t body = at + 8;
    if (length > size - body) length = size - body; /* truncated: what is there */
    if (memcmp(bytes + at, tag, 4) == 0) {
      *out = bytes + body;
      *out_size = length;
      return 1;
    }
    at = body + length + (length & 1);
  }
  return 0;
}

/* Orientation from an EXIF chunk (a TIFF block, sometimes behind an "Exif\0\0" prefix). */
static int exif_orientation(const uint8_t *bytes, size_t size) {
  if (size >= 6 && memcmp(bytes, "Exif\0\0", 6) == 0) {
    bytes += 6;
    size -= 6;
  }
  return ic_exif_orientation(bytes, size);
}

static const ic_decoder_ops webp_ops = {webp_choose_size, webp_run, webp_destroy,
                                        webp_working_memory, NULL};

ic_status ic_webp_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                       ic_result *result, ic_decoder **out) {
  const uint8_t *data = NULL;
  size_t size = 0;
  if (ic_stream_contents(stream, limits, control, &data, &size, result) != IC_OK)
    return result->status;
  WebPBitstreamFeatures features;
  VP8StatusCode code = WebPGetFeatures(data, size, &features);
  if (code != VP8_STATUS_OK) return fail_from_status(code, "header", result);
  webp_decoder *d = ic_decoder_new(sizeof(*d), &webp_ops, limits, control, result);
  if (!d) return result->status;
  d->buffered = stream->owned_size;
  d->frame = data;
  d->frame_size = size;
  d->frame_width = (uint32_t)features.width;
  d->frame_height = (uint32_t)features.height;
  d->base.header.width = d->frame_width;
  d->base.header.height = d->frame_height;
  d->base.header.orientation = 1;
  int canvas_alpha = 0;
  WebPData whole = {data, size};
  WebPDemuxer *demux = WebPDemux(&whole);
  if (features.has_animation && !demux) {
    webp_destroy(&d->base);
    return ic_fail(result, IC_ERR_CORRUPT, "WebP animation container is damaged");
  }
  if (demux) {
    if (WebPDemuxGetI(demux, WEBP_FF_FORMAT_FLAGS) & EXIF_FLAG) {
      WebPChunkIterator chunk;
      if (WebPDemuxGetChunk(demux, "EXIF", 1, &chunk))
        d->base.header.orientation = exif_orientation(chunk.chunk.bytes, chunk.chunk.size);
      WebPDemuxReleaseChunkIterator(&chunk);
    }
    if (WebPDemuxGetI(demux, WEBP_FF_FORMAT_FLAGS) & ICCP_FLAG) {
      WebPChunkIterator chunk;
      ic_colour_info *colour = &d->base.header.colour;
      if (WebPDemuxGetChunk(demux, "ICCP", 1, &chunk) && chunk.chunk.size > 0) {
        if (chunk.chunk.size > limits->max_profile_bytes)
          colour->damage = IC_PROFILE_OVERSIZED;
        else if ((colour->icc = malloc(chunk.chunk.size))) {
          memcpy(colour->icc, chunk.chunk.bytes, chunk.chunk.size);
          colour->icc_size = chunk.chunk.size;
        }
      }
      WebPDemuxReleaseChunkIterator(&chunk);
    }
    if (features.has_animation) {
      WebPIterator frame;
      if (!WebPDemuxGetFrame(demux, 1, &frame)) {
        WebPDemuxDelete(demux);
        webp_destroy(&d->base);
        return ic_fail(result, IC_ERR_CORRUPT, "WebP animation has no frame");
      }
      d->base.header.width = WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH);
      d->base.header.height = WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
      d->frame = frame.fragment.bytes;
      d->frame_size = frame.fragment.size;
      d->frame_x = (uint32_t)frame.x_offset;
      d->frame_y = (uint32_t)frame.y_offset;
      d->frame_width = (uint32_t)frame.width;
      d->frame_height = (uint32_t)frame.height;
      WebPDemuxReleaseIterator(&frame);
      /* The first frame over a transparent canvas: what lies outside it is transparent. */
      canvas_alpha = d->frame_x || d->frame_y || d->frame_width != d->base.header.width ||
                     d->frame_height != d->base.header.height;
      if (WebPGetFeatures(d->frame, d->frame_size, &features) != VP8_STATUS_OK) {
        WebPDemuxDelete(demux);
        webp_destroy(&d->base);
        return ic_fail(result, IC_ERR_CORRUPT, "WebP first frame is damaged");
      }
    }
    WebPDemuxDelete(demux);
  }
  d->frame_alpha = features.has_alpha;
  d->lossless = features.format == 2;
  if (d->lossless) {
    /* The groups libwebp will build tables for, read before it runs. */
    const uint8_t *vp8l = NULL;
    size_t vp8l_size = 0;
    if (!find_chunk(d->frame, d->frame_size, "VP8L", &vp8l, &vp8l_size) ||
        ic_vp8l_groups(vp8l, vp8l_size, control, result, &d->groups, &d->cache_bits) != IC_OK) {
      webp_destroy(&d->base);
      return ic_fail(result, IC_ERR_CORRUPT, "WebP lossless bitstream is missing");
    }
    if (d->groups > IC_WEBP_MAX_GROUPS) {
      uint32_t groups = d->groups;
      webp_destroy(&d->base);
      return ic_fail(result, IC_ERR_TOO_COMPLEX,
                     "WebP lossless image has %u prefix-code groups (at most %d)", groups,
                     IC_WEBP_MAX_GROUPS);
    }
  }
  d->base.header.channels = d->frame_alpha || canvas_alpha ? 4 : 3;
  /* A first frame smaller than its canvas lands on the scaled canvas at rounded edges: with
   * headroom the kernel makes those edges exact. */
  d->base.exact_scaling = !canvas_alpha;
  if (ic_check_limits(d->base.header.width, d->base.header.height, limits, result) != IC_OK ||
      d->frame_width == 0 || d->frame_height == 0 ||
      d->frame_x + (uint64_t)d->frame_width > d->base.header.width ||
      d->frame_y + (uint64_t)d->frame_height > d->base.header.height) {
    webp_destroy(&d->base);
    return ic_fail(result, IC_ERR_CORRUPT, "WebP frame lies outside its canvas");
  }
  *out = &d->base;
  return IC_OK;
}
