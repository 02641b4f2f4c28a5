/*
 * HEVC for libheif on FFmpeg's decoder (libavcodec), as a decoder plugin that outranks
 * libheif's own libde265 plugin. HEVC decoding is exact by specification, so the planes are
 * the same as libde265's (HEIFPlaneTests compares them on every corpus HEIC); FFmpeg's
 * SIMD kernels make a 12 MP phone photo's tiles 1.5x as fast (docs/BENCHMARKS.md).
 *
 * libavcodec and libavutil are opened with dlopen on the first HEIC, never linked: they
 * bring dozens of codec libraries that a process reading JPEGs should not map. Without them
 * (or with ic_limits.hevc_libde265 set) libheif keeps decoding through libde265.
 *
 * What libheif hands the plugin: hvcC's parameter sets and then the item's NAL units, each
 * behind a 4-byte big-endian length (libde265's plugin reads them the same way). They become
 * one Annex B packet in place (a start code is 4 bytes too). The bitstream's own colour
 * description (VUI) is attached as nclx, as libde265's plugin does; an nclx box on the item
 * overrides it in libheif.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "heif_api.h"

#include <CSystem.h>

#include <libavcodec/avcodec.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The libavutil and libavcodec functions the plugin calls, resolved once: each named once,
 * typed by FFmpeg's own declaration, called as av.NAME. */
#define HEVC_AVUTIL(X)                                                                        \
  X(av_frame_alloc) X(av_frame_free) X(av_pix_fmt_desc_get) X(av_log_set_level)
#define HEVC_AVCODEC(X)                                                                       \
  X(avcodec_find_decoder) X(avcodec_alloc_context3) X(avcodec_open2) X(avcodec_free_context)  \
  X(avcodec_send_packet) X(avcodec_receive_frame) X(av_packet_alloc) X(av_packet_free)

typedef struct av_api {
  HEVC_AVUTIL(CS_FUNCTION)
  HEVC_AVCODEC(CS_FUNCTION)
  const AVCodec *hevc;
} av_api;

static av_api av;
static int av_ready;
static pthread_once_t av_once = PTHREAD_ONCE_INIT;

/* The largest frame, in pixels, any decoder opened in this process allows (UINT64_MAX once
 * one allows any size): FFmpeg refuses a bitstream whose frame is larger before allocating it
 * (CLITests: a frame larger than the size its file declares). The plugin cannot see the limits of
 * the decode that runs it (libheif calls it from its tile threads), so this is the general guard
 * behind the header checks of heif_decode.c, which apply each decode's own limits to the sizes the
 * file declares. */
static _Atomic uint64_t pixel_cap;

static void load_once(void) {
#define HEVC_ROW(name) CS_SYMBOL(av, name, #name)
  const cs_symbol util[] = {HEVC_AVUTIL(HEVC_ROW)};
  const cs_symbol codec[] = {HEVC_AVCODEC(HEVC_ROW)};
#undef HEVC_ROW
  char error[256];
  /* The major versions the headers describe: a library of another major has another ABI. */
  if (CS_BIND_MAJOR("avutil", LIBAVUTIL_VERSION_MAJOR, util, NULL, error) != 0 ||
      CS_BIND_MAJOR("avcodec", LIBAVCODEC_VERSION_MAJOR, codec, NULL, error) != 0)
    return;
  av.hevc = av.avcodec_find_decoder(AV_CODEC_ID_HEVC);
  if (!av.hevc) return;
  /* Damaged input is reported through errors; FFmpeg's own messages would go to stderr. */
  av.av_log_set_level(AV_LOG_QUIET);
  av_ready = 1;
}

/* --- the plugin ------------------------------------------------------------------------ */

typedef struct hevc_stream {
  uint8_t *data;
  size_t size, capacity;
} hevc_stream;

static struct heif_error plugin_error(enum heif_error_code code, const char *message) {
  struct heif_error error = {code, heif_suberror_Unspecified, message};
  return error;
}

static const struct heif_error plugin_ok = {heif_error_Ok, heif_suberror_Unspecified, "Success"};

static const char *plugin_name(void) { return "FFmpeg HEVC (thumbd)"; }

/* libde265's plugin answers 100. */
static int plugin_supports(enum heif_compression_format format) {
  return format == heif_compression_HEVC ? 200 : 0;
}

static struct heif_error plugin_new(void **decoder) {
  *decoder = calloc(1, sizeof(hevc_stream));
  return *decoder ? plugin_ok
                  : plugin_error(heif_error_Memory_allocation_error, "HEVC decoder allocation");
}

static void plugin_free(void *decoder) {
  hevc_stream *stream = decoder;
  if (!stream) return;
  free(stream->data);
  free(stream);
}

/* Appends, keeping FFmpeg's zeroed padding after the end (its readers look past it). */
static struct heif_error plugin_push(void *decoder, const void *data, size_t size) {
  hevc_stream *s = decoder;
  if (size > (size_t)INT_MAX - AV_INPUT_BUFFER_PADDING_SIZE - s->size)
    return plugin_error(heif_error_Memory_allocation_error, "HEVC data too large");
  size_t need = s->size + size + AV_INPUT_BUFFER_PADDING_SIZE;
  if (need > s->capacity) {
    size_t capacity = s->capacity ? s->capacity : 64 * 1024;
    while (capacity < need) capacity = capacity > SIZE_MAX / 2 ? need : capacity * 2;
    uint8_t *grown = realloc(s->data, capacity);
    if (!grown) return plugin_error(heif_error_Memory_allocation_error, "HEVC data allocation");
    s->data = grown;
    s->capacity = capacity;
  }
  memcpy(s->data + s->size, data, size);
  s->size += size;
  memset(s->data + s->size, 0, AV_INPUT_BUFFER_PADDING_SIZE);
  return plugin_ok;
}

/* 4-byte lengths to start codes, in place; 0 when a length runs past the data. */
static int to_annex_b(uint8_t *data, size_t size) {
  for (size_t at = 0; at < size;) {
    if (size - at < 4) return 0;
    uint32_t length = ic_be32(data + at);
    if (length > size - at - 4) return 0;
    data[at] = data[at + 1] = data[at + 2] = 0;
    data[at + 3] = 1;
    at += 4 + (size_t)length;
  }
  return 1;
}

/*
 * The decoded frame as a heif_image of its coded planes at their own bit depth: YCbCr (or
 * monochrome), and also RGB coded with the identity matrix, which FFmpeg returns as planar
 * GBR where libde265 returns the same three planes as "YCbCr" with matrix 0 for libheif to
 * apply. Either way the coded plane c is FFmpeg's data[c].
 */
static struct heif_error to_heif_image(const AVFrame *frame, struct heif_image **out) {
  const AVPixFmtDescriptor *format = av.av_pix_fmt_desc_get((enum AVPixelFormat)frame->format);
  int planes = format ? format->nb_components : 0;
  if (!format || (planes != 1 && planes != 3) ||
      (format->flags & (AV_PIX_FMT_FLAG_BE | AV_PIX_FMT_FLAG_FLOAT | AV_PIX_FMT_FLAG_ALPHA |
                        AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_PAL)) ||
      (planes == 3 && !(format->flags & AV_PIX_FMT_FLAG_PLANAR)))
    return plugin_error(heif_error_Unsupported_feature, "HEVC pixel format not supported");
  int bits = format->comp[0].depth;
  /* One sample a plane, no shifted or packed samples: each plane is rows of plain samples. */
  int used[3] = {0, 0, 0};
  for (int c = 0; c < planes; c++) {
    int plane = format->comp[c].plane;
    if (format->comp[c].depth != bits || format->comp[c].shift != 0 ||
        format->comp[c].offset != 0 || format->comp[c].step != (bits > 8 ? 2 : 1) ||
        plane < 0 || plane >= planes || used[plane]++)
      return plugin_error(heif_error_Unsupported_feature, "HEVC sample layout not supported");
  }
  int sw = format->log2_chroma_w, sh = format->log2_chroma_h;
  enum heif_chroma chroma = planes == 1             ? heif_chroma_monochrome
                            : sw == 1 && sh == 1 ? heif_chroma_420
                            : sw == 1 && sh == 0 ? heif_chroma_422
                            : sw == 0 && sh == 0 ? heif_chroma_444
                                                 : heif_chroma_undefined;
  if (chroma == heif_chroma_undefined || bits < 8 || bits > 16 || frame->width <= 0 ||
      frame->height <= 0)
    return plugin_error(heif_error_Unsupported_feature, "HEVC frame not supported");
  struct heif_error error = ic_libheif.image_create(
      frame->width, frame->height,
      planes == 1 ? heif_colorspace_monochrome : heif_colorspace_YCbCr, chroma, out);
  if (error.code != heif_error_Ok) return error;
  static const enum heif_channel channels[3] = {heif_channel_Y, heif_channel_Cb,
                                                heif_channel_Cr};
  for (int c = 0; c < planes; c++) {
    int w = c ? AV_CEIL_RSHIFT(frame->width, sw) : frame->width;
    int h = c ? AV_CEIL_RSHIFT(frame->height, sh) : frame->height;
    error = ic_libheif.image_add_plane(*out, channels[c], w, h, bits);
    if (error.code != heif_error_Ok) break;
    int stride = 0;
    uint8_t *to = ic_libheif.image_get_plane(*out, channels[c], &stride);
    const uint8_t *from = frame->data[c];
    int pitch = frame->linesize[c];
    size_t row = (size_t)w * (bits > 8 ? 2 : 1);
    if (!to || !from || stride < 0 || (size_t)stride < row || pitch < 0 || (size_t)pitch < row) {
      error = plugin_error(heif_error_Decoder_plugin_error, "HEVC plane missing");
      break;
    }
    for (int y = 0; y < h; y++)
      memcpy(to + (size_t)y * stride, from + (size_t)y * pitch, row);
  }
  if (error.code != heif_error_Ok) {
    ic_libheif.image_release(*out);
    *out = NULL;
    return error;
  }
  /* FFmpeg's enumerations are H.273's code points, as nclx's are. A value nclx does not
   * know is left at its default, as libde265's plugin leaves it. */
  struct heif_color_profile_nclx *nclx = ic_libheif.nclx_color_profile_alloc();
  if (nclx) {
    (void)ic_libheif.nclx_color_profile_set_color_primaries(nclx, (uint16_t)frame->color_primaries);
    (void)ic_libheif.nclx_color_profile_set_transfer_characteristics(nclx,
                                                                     (uint16_t)frame->color_trc);
    (void)ic_libheif.nclx_color_profile_set_matrix_coefficients(nclx, (uint16_t)frame->colorspace);
    nclx->full_range_flag = frame->color_range == AVCOL_RANGE_JPEG;
    (void)ic_libheif.image_set_nclx_color_profile(*out, nclx);
    ic_libheif.nclx_color_profile_free(nclx);
  }
  return plugin_ok;
}

static struct heif_error plugin_decode(void *decoder, struct heif_image **out) {
  hevc_stream *s = decoder;
  *out = NULL;
  if (!s->size || !to_annex_b(s->data, s->size))
    return plugin_error(heif_error_Decoder_plugin_error, "Unexpected end of file");
  struct heif_error error = plugin_error(heif_error_Memory_allocation_error,
                                         "HEVC decoder allocation");
  AVCodecContext *context = av.avcodec_alloc_context3(av.hevc);
  AVPacket *packet = av.av_packet_alloc();
  AVFrame *frame = av.av_frame_alloc();
  if (context && packet && frame) {
    /* Tiles already run on libheif's threads; one frame has nothing for frame threads. */
    context->thread_count = 1;
    /* A damaged slice fails the image, as it does in libde265, instead of being concealed. */
    context->err_recognition |= AV_EF_EXPLODE;
    uint64_t cap = atomic_load(&pixel_cap);
    if (cap && cap < (uint64_t)INT64_MAX) context->max_pixels = (int64_t)cap;
    packet->data = s->data;
    packet->size = (int)s->size;
    error = plugin_error(heif_error_Decoder_plugin_error, "HEVC decoding failed");
    if (av.avcodec_open2(context, av.hevc, NULL) == 0 &&
        av.avcodec_send_packet(context, packet) == 0 &&
        av.avcodec_send_packet(context, NULL) == 0 &&
        av.avcodec_receive_frame(context, frame) == 0)
      error = to_heif_image(frame, out);
  }
  av.av_frame_free(&frame);
  av.av_packet_free(&packet);
  av.avcodec_free_context(&context);
  return error;
}

static void plugin_strict(void *decoder, int strict) {
  (void)decoder;
  (void)strict; /* always strict: see plugin_decode */
}

static const struct heif_decoder_plugin plugin = {
    .plugin_api_version = 3,
    .get_plugin_name = plugin_name,
    .does_support_format = plugin_supports,
    .new_decoder = plugin_new,
    .free_decoder = plugin_free,
    .push_data = plugin_push,
    .decode_image = plugin_decode,
    .set_strict_decoding = plugin_strict,
    .id_name = "thumbd-ffmpeg-hevc",
};

const struct heif_decoder_plugin *ic_hevc_plugin(uint64_t max_pixels) {
  pthread_once(&av_once, load_once);
  if (!av_ready) return NULL;
  uint64_t cap = max_pixels ? max_pixels : UINT64_MAX;
  uint64_t seen = atomic_load(&pixel_cap);
  while (seen < cap && !atomic_compare_exchange_weak(&pixel_cap, &seen, cap)) {
  }
  return &plugin;
}

const char *ic_hevc_decoder(void) {
  pthread_once(&av_once, load_once);
  return av_ready ? "ffmpeg" : "libde265";
}
