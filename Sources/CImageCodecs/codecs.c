/*
 * The codec tables: which decoder reads a source (from its magic bytes; the file name never
 * decides), and which encoder writes an output format. A new format is one file with its
 * sniff, open and encode functions, plus one row here.
 */
#include "internal.h"

#include <string.h>

typedef struct ic_decoder_entry {
  ic_format format;
  const char *name;
  /* True when the first bytes (at most IC_SNIFF_BYTES) are this format's. */
  int (*sniff)(const uint8_t *bytes, size_t size);
  ic_status (*open)(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                    ic_result *result, ic_decoder **decoder);
} ic_decoder_entry;

/* Order matters only where signatures could overlap; none of these do. */
static const ic_decoder_entry decoders[] = {
    {IC_FORMAT_JPEG, "JPEG", ic_jpeg_sniff, ic_jpeg_open},
    {IC_FORMAT_PNG, "PNG", ic_png_sniff, ic_png_open},
    {IC_FORMAT_WEBP, "WebP", ic_webp_sniff, ic_webp_open},
    {IC_FORMAT_GIF, "GIF", ic_gif_sniff, ic_gif_open},
    {IC_FORMAT_HEIC, "HEIC", ic_heic_sniff, ic_heif_open},
    {IC_FORMAT_AVIF, "AVIF", ic_avif_sniff, ic_heif_open},
};

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

typedef struct ic_encoder_entry {
  ic_format format;
  ic_encode_fn encode;
  /* Whether the format keeps an alpha channel (JPEG flattens it over white). */
  int keeps_alpha;
  /* What the encoder's library holds beyond the output buffer: a fixed part and bytes per
   * output pixel, measured as peak RSS against JPEG output (docs/BENCHMARKS.md, "Encoding"). */
  uint32_t fixed_bytes;
  uint32_t bytes_per_pixel;
} ic_encoder_entry;

static const ic_encoder_entry encoders[] = {
    {IC_FORMAT_JPEG, ic_encode_jpeg, 0, 0, 0},
    {IC_FORMAT_PNG, ic_encode_png, 1, 0, 0},
    /* +0.4 MiB at 256 px. */
    {IC_FORMAT_WEBP, ic_encode_webp, 1, 1u << 20, 4},
    /* libaom: +5.6 MiB at 256 px, +18.4 MiB at 1024x683. */
    {IC_FORMAT_AVIF, ic_encode_avif, 1, 6u << 20, 20},
};

ic_format ic_sniff(const uint8_t *bytes, size_t size) {
  if (!bytes) return IC_FORMAT_UNKNOWN;
  if (size > IC_SNIFF_BYTES) size = IC_SNIFF_BYTES;
  for (size_t i = 0; i < COUNT(decoders); i++)
    if (decoders[i].sniff(bytes, size)) return decoders[i].format;
  return IC_FORMAT_UNKNOWN;
}

const char *ic_format_name(ic_format format) {
  for (size_t i = 0; i < COUNT(decoders); i++)
    if (decoders[i].format == format) return decoders[i].name;
  return "unknown";
}

/* "a JPEG, PNG, ... or AVIF image", from the table. */
static void readable_formats(char *out, size_t size) {
  size_t used = 0;
  out[0] = 0;
  for (size_t i = 0; i < COUNT(decoders) && used < size; i++) {
    const char *separator = i == 0 ? "" : (i + 1 == COUNT(decoders) ? " or " : ", ");
    int n = snprintf(out + used, size - used, "%s%s", separator, decoders[i].name);
    if (n < 0) break;
    used += (size_t)n;
  }
}

ic_status ic_decoder_open(ic_stream *stream, const ic_limits *limits,
                          const ic_control *control, ic_result *result,
                          ic_decoder **decoder) {
  if (ic_stream_read_head(stream, result) != IC_OK) return result->status;
  size_t have = 0;
  const uint8_t *magic = ic_stream_magic(stream, &have);
  for (size_t i = 0; i < COUNT(decoders); i++) {
    if (!decoders[i].sniff(magic, have)) continue;
    result->source_format = decoders[i].format;
    return decoders[i].open(stream, limits, control, result, decoder);
  }
  if (have == 0) return ic_fail(result, IC_ERR_UNSUPPORTED, "empty input");
  char names[96];
  readable_formats(names, sizeof(names));
  return ic_fail(result, IC_ERR_UNSUPPORTED, "not a %s image", names);
}

ic_status ic_encode_as(ic_format format, const uint8_t *pixels, uint32_t width,
                       uint32_t height, int channels, const ic_encode_options *options,
                       uint8_t **out, size_t *out_size, ic_result *result) {
  for (size_t i = 0; i < COUNT(encoders); i++)
    if (encoders[i].format == format)
      return encoders[i].encode(pixels, width, height, channels, options, out, out_size,
                                result);
  return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "%s is not an output format",
                 ic_format_name(format));
}

int ic_format_keeps_alpha(ic_format format) {
  for (size_t i = 0; i < COUNT(encoders); i++)
    if (encoders[i].format == format) return encoders[i].keeps_alpha;
  return 0;
}

uint64_t ic_encoder_memory(ic_format format, uint32_t width, uint32_t height) {
  for (size_t i = 0; i < COUNT(encoders); i++)
    if (encoders[i].format == format)
      return encoders[i].fixed_bytes + (uint64_t)encoders[i].bytes_per_pixel * width * height;
  return 0;
}

int ic_format_encodable(ic_format format) {
  for (size_t i = 0; i < COUNT(encoders); i++)
    if (encoders[i].format == format) return 1;
  return 0;
}
