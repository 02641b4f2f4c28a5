/*
 * JPEG XL (libjxl 0.7, opened with dlopen through cs_bind on the first JXL, never linked).
 *
 * The header first: the size (before orientation) against the limits, the orientation, alpha,
 * and the colour profile of the decoded pixels, before any pixel is decoded; then our own read
 * of the headers up to the first frame's (jxl_header.c), which refuses a frame larger than the
 * limits and tells the estimate what kind of frame comes. Then the first frame only (an
 * animation's first), composited by libjxl into one 8-bit buffer: libjxl 0.7 hands out pixels
 * by groups, in no row order, so rows cannot stream; the buffer counts against the decode's
 * memory limit. When the output is small enough that the DC image (1/8 of each side) covers
 * it with room, decoding stops at libjxl's DC progression step and the upsampled DC is used:
 * no AC coefficients are decoded.
 *
 * libjxl 0.7 allocates its planes with its own allocator (its memory manager covers only the
 * decoder object), so what it holds is bounded by the estimate alone, which the memory budget
 * admits decodes by: measured per kind of frame (docs/BENCHMARKS.md, "Memory estimates"), the
 * worst case when the headers could not be followed. libjxl cannot be interrupted inside a
 * frame: the pixel limit bounds that work.
 */
#include "internal.h"

#include <CSystem.h>
#include <jxl/decode.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every libjxl function called, named once. */
#define IC_JXL_FUNCTIONS(X)                                                                  \
  X(JxlDecoderCreate)                                                                        \
  X(JxlDecoderDestroy)                                                                       \
  X(JxlDecoderSubscribeEvents)                                                               \
  X(JxlDecoderSetInput)                                                                      \
  X(JxlDecoderCloseInput)                                                                    \
  X(JxlDecoderReleaseInput)                                                                  \
  X(JxlDecoderProcessInput)                                                                  \
  X(JxlDecoderGetBasicInfo)                                                                  \
  X(JxlDecoderSetKeepOrientation)                                                            \
  X(JxlDecoderSetUnpremultiplyAlpha)                                                         \
  X(JxlDecoderGetICCProfileSize)                                                             \
  X(JxlDecoderSetPreferredColorProfile)                                                      \
  X(JxlDecoderGetColorAsICCProfile)                                                          \
  X(JxlDecoderImageOutBufferSize)                                                            \
  X(JxlDecoderSetImageOutBuffer)                                                             \
  X(JxlDecoderFlushImage)

static struct {
#define IC_JXL_FIELD(name) __typeof__(name) *name;
  IC_JXL_FUNCTIONS(IC_JXL_FIELD)
#undef IC_JXL_FIELD
} jxl;

static int jxl_loaded;
static char jxl_error[256];
static pthread_once_t jxl_once = PTHREAD_ONCE_INIT;

/* libjxl's soname names its minor version (0.7): the ABI of another is another. */
#define IC_JXL_SONAME "libjxl.so.0.7"

static void load_jxl(void) {
#define IC_JXL_SYMBOL(name) CS_SYMBOL(jxl, name, #name)
  const cs_symbol symbols[] = {IC_JXL_FUNCTIONS(IC_JXL_SYMBOL)};
#undef IC_JXL_SYMBOL
  jxl_loaded = CS_BIND(IC_JXL_SONAME, "libjxl0.7", symbols, NULL, jxl_error) == 0;
}

int ic_jxl_sniff(const uint8_t *b, size_t size) {
  static const uint8_t box[12] = {0, 0, 0, 12, 'J', 'X', 'L', ' ', 0x0D, 0x0A, 0x87, 0x0A};
  return (size >= 2 && b[0] == 0xFF && b[1] == 0x0A) || (size >= 12 && memcmp(b, box, 12) == 0);
}

typedef struct jxl_decoder {
  ic_decoder base;
  JxlDecoder *dec;
  /* Where libjxl's reading of the image's headers ended, and what the first frame's says. */
  size_t frame_at;
  ic_jxl_layout layout;
  JxlPixelFormat format;
  uint8_t *pixels;
  /* Whether the DC image (1/8 a side) covers what the output needs. */
  int dc_enough;
} jxl_decoder;

static ic_status fail_from_jxl(JxlDecoderStatus status, const char *what, ic_result *result) {
  if (result->status != IC_OK) return result->status;
  if (status == JXL_DEC_NEED_MORE_INPUT)
    return ic_fail(result, IC_ERR_TRUNCATED, "JPEG XL %s: data ends early", what);
  return ic_fail(result, IC_ERR_CORRUPT, "JPEG XL %s: libjxl refused it", what);
}

static void jxl_choose_size(ic_decoder *base, uint32_t need_width, uint32_t need_height,
                            int allow_scaling, uint32_t *width, uint32_t *height) {
  jxl_decoder *d = (jxl_decoder *)base;
  uint32_t w = base->header.width, h = base->header.height;
  /* The DC image is an approximation of the 8x8 averages (their quantised LF coefficients),
   * not the exact averages a JPEG's DC-only decode gives: it must exceed what the output
   * needs by more, as the JPEG decoder's reduced scales do (2.5 against 1.75). At 1.75 a
   * 12 MP photo to 256 px scored 0.1 dB under a full decode's (docs/BENCHMARKS.md). */
  double room = 2.5 / 1.75;
  d->dc_enough = allow_scaling && need_width * room <= (w + 7) / 8 &&
                 need_height * room <= (h + 7) / 8;
  /* libjxl hands out the DC image upsampled to full size. */
  *width = w;
  *height = h;
}

static ic_status jxl_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  jxl_decoder *d = (jxl_decoder *)base;
  uint32_t w = base->header.width, h = base->header.height;
  int channels = base->header.channels;
  for (;;) {
    if (ic_check(d->base.control, result) != IC_OK) return result->status;
    JxlDecoderStatus status = jxl.JxlDecoderProcessInput(d->dec);
    if (status == JXL_DEC_NEED_IMAGE_OUT_BUFFER) {
      size_t size = 0;
      if (jxl.JxlDecoderImageOutBufferSize(d->dec, &d->format, &size) != JXL_DEC_SUCCESS ||
          size != (size_t)w * h * channels)
        return fail_from_jxl(JXL_DEC_ERROR, "frame", result);
      if (d->base.limits->max_decoder_memory && size > d->base.limits->max_decoder_memory)
        return ic_fail(result, IC_ERR_TOO_LARGE,
                       "JPEG XL frame of %ux%u: over the decoder's memory limit", w, h);
      d->pixels = malloc(size);
      if (!d->pixels) return ic_fail(result, IC_ERR_NO_MEMORY, "JPEG XL frame allocation failed");
      if (jxl.JxlDecoderSetImageOutBuffer(d->dec, &d->format, d->pixels, size) != JXL_DEC_SUCCESS)
        return fail_from_jxl(JXL_DEC_ERROR, "frame", result);
    } else if (status == JXL_DEC_FRAME_PROGRESSION) {
      /* The DC image is ready: enough for this output, the rest is not decoded. */
      if (d->dc_enough && d->pixels && jxl.JxlDecoderFlushImage(d->dec) == JXL_DEC_SUCCESS) {
        result->dc_only = 1;
        break;
      }
    } else if (status == JXL_DEC_FULL_IMAGE) {
      break; /* the first frame: the rest of an animation is not read */
    } else if (status == JXL_DEC_FRAME || status == JXL_DEC_COLOR_ENCODING ||
               status == JXL_DEC_BASIC_INFO) {
      continue;
    } else {
      return fail_from_jxl(status, "frame", result);
    }
  }
  ic_status status = sink->begin(sink, w, h, channels, result);
  for (uint32_t y = 0; y < h && status == IC_OK; y++) {
    if (y % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->base.control, result) != IC_OK)
      return result->status;
    status = sink->row(sink, d->pixels + (size_t)y * w * channels, result);
  }
  return status;
}

/* libjxl's planes, in bytes a pixel, measured (docs/BENCHMARKS.md, "Memory estimates", with
 * about twice the room): to the DC step; a whole VarDCT frame that is the image alone (no
 * extra channels, no frame of a size of its own), with progressive passes (whose coefficients
 * libjxl keeps) or without; and anything else (modular, extra channels, layers, or headers
 * not followed), the corpus's worst, from lossless and modular files. */
#define IC_JXL_DC_BYTES 6
#define IC_JXL_VARDCT_BYTES 8
#define IC_JXL_PASSES_BYTES 20
#define IC_JXL_WORST_BYTES 56

static uint64_t jxl_working_memory(ic_decoder *base) {
  jxl_decoder *d = (jxl_decoder *)base;
  const ic_jxl_layout *l = &d->layout;
  uint64_t pixels = (uint64_t)base->header.width * base->header.height;
  int plain_vardct = l->known && l->vardct && l->regular && l->last && !l->custom_size &&
                     l->extra_channels == 0;
  /* Only a VarDCT frame has a DC step to stop at. */
  uint64_t per_pixel = !plain_vardct  ? IC_JXL_WORST_BYTES
                       : d->dc_enough ? IC_JXL_DC_BYTES
                       : l->passes > 1 ? IC_JXL_PASSES_BYTES
                                       : IC_JXL_VARDCT_BYTES;
  /* libjxl's planes are as large as the frame shown, which may be larger than the image; the
   * hidden frames before it (a DC frame, patches) are kept, counted at the worst. */
  uint64_t planes = pixels;
  if (l->known && (uint64_t)l->frame_width * l->frame_height > planes)
    planes = (uint64_t)l->frame_width * l->frame_height;
  /* The 8-bit frame, and libjxl's planes. */
  return pixels * (uint64_t)base->header.channels + planes * per_pixel +
         l->hidden_pixels * IC_JXL_WORST_BYTES + (8u << 20) + IC_DECODE_BASE_BYTES;
}

static void jxl_destroy(ic_decoder *base) {
  jxl_decoder *d = (jxl_decoder *)base;
  if (d->dec) jxl.JxlDecoderDestroy(d->dec);
  free(d->pixels);
  ic_colour_info_clear(&base->header.colour);
  free(d);
}

/* A fresh daemon's RSS grew by 2.0 MiB over its first JPEG XL (libjxl's decoding paths; the
 * library itself is opened by the header's read). */
static ic_first_use jxl_first_use_record = {.bytes = 2u << 20};

static ic_first_use *jxl_first_use(ic_decoder *base) {
  (void)base;
  return &jxl_first_use_record;
}

static const ic_decoder_ops jxl_ops = {jxl_choose_size, jxl_run, jxl_destroy,
                                       jxl_working_memory, jxl_first_use};

/* Events up to the colour encoding: the size against the limits, then the profile; and where
 * in data the image's headers end (the first frame, or a preview, starts on the next byte).
 * The input is closed only then: libjxl refuses new input after it is closed. */
static ic_status read_header(jxl_decoder *d, const uint8_t *data, size_t length,
                             ic_result *result) {
  ic_header *h = &d->base.header;
  for (;;) {
    if (ic_check(d->base.control, result) != IC_OK) return result->status;
    JxlDecoderStatus status = jxl.JxlDecoderProcessInput(d->dec);
    if (status == JXL_DEC_BASIC_INFO) {
      JxlBasicInfo info;
      if (jxl.JxlDecoderGetBasicInfo(d->dec, &info) != JXL_DEC_SUCCESS)
        return fail_from_jxl(JXL_DEC_ERROR, "header", result);
      if (ic_check_limits(info.xsize, info.ysize, d->base.limits, result) != IC_OK)
        return result->status;
      h->width = info.xsize;
      h->height = info.ysize;
      h->orientation = info.orientation >= 1 && info.orientation <= 8 ? (int)info.orientation : 1;
      h->channels = info.alpha_bits ? 4 : 3;
      h->colour.space = info.num_color_channels == 1 ? IC_SPACE_GREY : IC_SPACE_RGB;
      d->format = (JxlPixelFormat){(uint32_t)h->channels, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
    } else if (status == JXL_DEC_COLOR_ENCODING) {
      /* A lossy (XYB) image is converted by libjxl to what is asked: sRGB, as the output is
       * (left alone, libjxl gives linear sRGB, whose 8 bits band the shadows). An image kept
       * in its own space ignores this; its profile below says which. */
      JxlColorEncoding srgb = {
          .color_space = h->colour.space == IC_SPACE_GREY ? JXL_COLOR_SPACE_GRAY : JXL_COLOR_SPACE_RGB,
          .white_point = JXL_WHITE_POINT_D65,
          .primaries = JXL_PRIMARIES_SRGB,
          .transfer_function = JXL_TRANSFER_FUNCTION_SRGB,
          .rendering_intent = JXL_RENDERING_INTENT_PERCEPTUAL,
      };
      jxl.JxlDecoderSetPreferredColorProfile(d->dec, &srgb);
      size_t size = 0;
      if (jxl.JxlDecoderGetICCProfileSize(d->dec, NULL, JXL_COLOR_PROFILE_TARGET_DATA, &size) ==
              JXL_DEC_SUCCESS &&
          size) {
        if (size > d->base.limits->max_profile_bytes) {
          h->colour.damage = IC_PROFILE_OVERSIZED;
        } else if ((h->colour.icc = malloc(size))) {
          if (jxl.JxlDecoderGetColorAsICCProfile(d->dec, NULL, JXL_COLOR_PROFILE_TARGET_DATA,
                                                 h->colour.icc, size) == JXL_DEC_SUCCESS) {
            h->colour.icc_size = size;
          } else {
            ic_colour_info_clear(&h->colour);
            h->colour.damage = IC_PROFILE_BROKEN;
          }
        }
      }
      size_t unread = jxl.JxlDecoderReleaseInput(d->dec);
      d->frame_at = length - unread;
      if (jxl.JxlDecoderSetInput(d->dec, data + d->frame_at, unread) != JXL_DEC_SUCCESS)
        return fail_from_jxl(JXL_DEC_ERROR, "header", result);
      jxl.JxlDecoderCloseInput(d->dec);
      return IC_OK;
    } else {
      return fail_from_jxl(status, "header", result);
    }
  }
}

ic_status ic_jxl_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                      ic_result *result, ic_decoder **out) {
  pthread_once(&jxl_once, load_jxl);
  if (!jxl_loaded) return ic_fail(result, IC_ERR_UNSUPPORTED, "JPEG XL: %s", jxl_error);
  const uint8_t *data = NULL;
  size_t size = 0;
  if (ic_stream_contents(stream, limits, control, &data, &size, result) != IC_OK)
    return result->status;
  jxl_decoder *d = ic_decoder_new(sizeof(*d), &jxl_ops, limits, control, result);
  if (!d) return result->status;
  d->dec = jxl.JxlDecoderCreate(NULL);
  ic_status status = IC_OK;
  if (!d->dec) {
    status = ic_fail(result, IC_ERR_NO_MEMORY, "JPEG XL decoder allocation failed");
  } else if (jxl.JxlDecoderSubscribeEvents(d->dec, JXL_DEC_BASIC_INFO | JXL_DEC_COLOR_ENCODING |
                                                       JXL_DEC_FRAME_PROGRESSION |
                                                       JXL_DEC_FULL_IMAGE) != JXL_DEC_SUCCESS ||
             jxl.JxlDecoderSetKeepOrientation(d->dec, JXL_TRUE) != JXL_DEC_SUCCESS ||
             jxl.JxlDecoderSetUnpremultiplyAlpha(d->dec, JXL_TRUE) != JXL_DEC_SUCCESS ||
             jxl.JxlDecoderSetInput(d->dec, data, size) != JXL_DEC_SUCCESS) {
    status = ic_fail(result, IC_ERR_CORRUPT, "JPEG XL decoder setup failed");
  }
  if (status == IC_OK) status = read_header(d, data, size, result);
  if (status == IC_OK)
    status = ic_jxl_scan(data, size, d->frame_at, limits, result, &d->layout);
  if (status != IC_OK) {
    jxl_destroy(&d->base);
    return status;
  }
  *out = &d->base;
  return IC_OK;
}
