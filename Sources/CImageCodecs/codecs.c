/*
 * The codec tables: which decoder reads a source (from its magic bytes; the file name never
 * decides), and which encoder writes an output format. A new format is one file with its
 * sniff, open and encode functions, plus one row here. Dispatch through the tables lives
 * here too: opening a decoder, a preview, a prefix scan, and encoding.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "internal.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ic_decoder_entry {
  ic_format format;
  const char *name;
  /* The media type a desktop names it by, and its file name extensions (space-separated, the
   * usual one first: for tools that pick example files; a source is judged by its bytes). */
  const char *media_type;
  const char *extensions;
  /* True when the first bytes (at most IC_SNIFF_BYTES) are this format's. */
  int (*sniff)(const uint8_t *bytes, size_t size);
  ic_status (*open)(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                    ic_result *result, ic_decoder **decoder);
  /* The preview opener (ic_request.preview), NULL for formats that carry no early picture. */
  ic_status (*preview_open)(ic_decoder *decoder, const ic_limits *limits,
                            const ic_control *control, ic_result *result,
                            ic_decoder **preview);
  /* The prefix scanner (ic_preview_prefix), NULL when a preview needs the whole file. */
  ic_prefix_verdict (*prefix)(const uint8_t *bytes, size_t size, ic_prefix_scan *scan);
} ic_decoder_entry;

/* Order matters only where signatures could overlap (noted where they do). */
static const ic_decoder_entry decoders[] = {
    {IC_FORMAT_JPEG, "JPEG", "image/jpeg", "jpg jpeg", ic_jpeg_sniff, ic_jpeg_open, ic_jpeg_preview_open, ic_jpeg_prefix},
    {IC_FORMAT_PNG, "PNG", "image/png", "png", ic_png_sniff, ic_png_open, NULL, NULL},
    {IC_FORMAT_WEBP, "WebP", "image/webp", "webp", ic_webp_sniff, ic_webp_open, NULL, NULL},
    {IC_FORMAT_GIF, "GIF", "image/gif", "gif", ic_gif_sniff, ic_gif_open, NULL, NULL},
    {IC_FORMAT_HEIC, "HEIC", "image/heic", "heic heif", ic_heic_sniff, ic_heif_open, ic_heif_preview_open, NULL},
    {IC_FORMAT_AVIF, "AVIF", "image/avif", "avif", ic_avif_sniff, ic_heif_open, ic_heif_preview_open, NULL},
    {IC_FORMAT_BMP, "BMP", "image/bmp", "bmp dib", ic_bmp_sniff, ic_bmp_open, NULL, NULL},
    /* After HEIF: an ISO-BMFF box of 256 bytes starts as an icon does (ic_ico_sniff). */
    {IC_FORMAT_ICO, "ICO", "image/vnd.microsoft.icon", "ico cur", ic_ico_sniff, ic_ico_open, NULL, NULL},
    /* Before TIFF: CR2 starts as a TIFF does (ic_raw_sniff); NEF, DNG and other raws with
     * TIFF's own header are passed on by the TIFF decoder (ic_raw_is_camera). */
    {IC_FORMAT_RAW, "RAW", "image/x-dcraw",
     "cr2 cr3 crw nef nrw arw dng orf rw2 pef raf srw", ic_raw_sniff, ic_raw_open, NULL, NULL},
    {IC_FORMAT_TIFF, "TIFF", "image/tiff", "tif tiff", ic_tiff_sniff, ic_tiff_open, NULL, NULL},
    {IC_FORMAT_JXL, "JPEG XL", "image/jxl", "jxl", ic_jxl_sniff, ic_jxl_open, NULL, NULL},
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
  /* The growth its first run brings, or NULL. */
  ic_first_use *first_use;
} ic_encoder_entry;

/* libaom's encoder: +3.3 MiB of a fresh daemon's RSS after its first AVIF output. */
static ic_first_use avif_encoder_first_use = {.bytes = 4u << 20};

static const ic_encoder_entry encoders[] = {
    {IC_FORMAT_JPEG, ic_encode_jpeg, 0, 0, 0, NULL},
    {IC_FORMAT_PNG, ic_encode_png, 1, 0, 0, NULL},
    /* +0.4 MiB at 256 px. */
    {IC_FORMAT_WEBP, ic_encode_webp, 1, 1u << 20, 4, NULL},
    /* libaom: +5.6 MiB at 256 px, +18.4 MiB at 1024x683. */
    {IC_FORMAT_AVIF, ic_encode_avif, 1, 6u << 20, 20, &avif_encoder_first_use},
    /* The quantiser's fixed tables (gif_encode.c), the output and a row. */
    {IC_FORMAT_GIF, ic_encode_gif, 1, 5u << 20, 2, NULL},
};

ic_format ic_sniff(const uint8_t *bytes, size_t size) {
  if (!bytes) return IC_FORMAT_UNKNOWN;
  if (size > IC_SNIFF_BYTES) size = IC_SNIFF_BYTES;
  for (size_t i = 0; i < COUNT(decoders); i++)
    if (decoders[i].sniff(bytes, size)) return decoders[i].format;
  return IC_FORMAT_UNKNOWN;
}

const char *ic_format_name(ic_format format) {
  ic_format_info info;
  return ic_format_info_of(format, &info) ? info.name : "unknown";
}

int ic_format_info_of(ic_format format, ic_format_info *info) {
  for (size_t i = 0; i < COUNT(decoders); i++) {
    if (decoders[i].format != format) continue;
    info->name = decoders[i].name;
    info->media_type = decoders[i].media_type;
    info->extensions = decoders[i].extensions;
    return 1;
  }
  memset(info, 0, sizeof(*info));
  return 0;
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

/* The table's entry for a stream's first bytes, with the format recorded on the result;
 * NULL (and the result failed) when none reads them. */
static const ic_decoder_entry *sniffed_entry(ic_stream *stream, ic_result *result) {
  if (ic_stream_read_head(stream, result) != IC_OK) return NULL;
  size_t have = 0;
  const uint8_t *magic = ic_stream_magic(stream, &have);
  for (size_t i = 0; i < COUNT(decoders); i++) {
    if (!decoders[i].sniff(magic, have)) continue;
    result->source_format = decoders[i].format;
    return &decoders[i];
  }
  if (have == 0) {
    ic_fail(result, IC_ERR_UNSUPPORTED, "empty input");
    return NULL;
  }
  char names[96];
  readable_formats(names, sizeof(names));
  ic_fail(result, IC_ERR_UNSUPPORTED, "not a %s image", names);
  return NULL;
}

void *ic_decoder_new(size_t size, const ic_decoder_ops *ops, const ic_limits *limits,
                     const ic_control *control, ic_result *result) {
  ic_decoder *decoder = calloc(1, size);
  if (!decoder) {
    if (result) ic_fail(result, IC_ERR_NO_MEMORY, "decoder allocation failed");
    return NULL;
  }
  decoder->ops = ops;
  decoder->limits = limits;
  decoder->control = control;
  return decoder;
}

/* Rows of an inner decoder, passed on once its colour description is the outer one's. */
typedef struct relay_sink {
  ic_sink base;
  ic_sink *to;
  ic_header *inner, *outer;
} relay_sink;

static ic_status relay_begin(ic_sink *sink, uint32_t width, uint32_t height, int channels,
                             ic_result *result) {
  relay_sink *s = (relay_sink *)sink;
  ic_colour_info_clear(&s->outer->colour);
  s->outer->colour = s->inner->colour;
  memset(&s->inner->colour, 0, sizeof(s->inner->colour));
  return s->to->begin(s->to, width, height, channels, result);
}

static ic_status relay_row(ic_sink *sink, const uint8_t *row, ic_result *result) {
  relay_sink *s = (relay_sink *)sink;
  return s->to->row(s->to, row, result);
}

ic_status ic_decoder_run_inner(ic_decoder *inner, ic_decoder *outer, ic_sink *sink,
                               ic_result *result) {
  relay_sink relay = {{relay_begin, relay_row}, sink, &inner->header, &outer->header};
  return ic_decoder_run(inner, &relay.base, result);
}

/* Decodes running and the extra threads they run, in this process. */
static _Atomic int busy_cores;

ic_status ic_decoder_run(ic_decoder *decoder, ic_sink *sink, ic_result *result) {
  atomic_fetch_add_explicit(&busy_cores, 1, memory_order_relaxed);
  ic_status status = decoder->ops->run(decoder, sink, result);
  atomic_fetch_sub_explicit(&busy_cores, 1, memory_order_relaxed);
  ic_first_use_ran(ic_decoder_first_use(decoder));
  return status;
}

ic_first_use *ic_decoder_first_use(ic_decoder *decoder) {
  return decoder->ops->first_use ? decoder->ops->first_use(decoder) : NULL;
}

unsigned ic_cores(void) {
  /* Read once per process: the affinity mask (taskset, a cgroup's cpuset) or else the
   * online count. 0 means not read yet. */
  static _Atomic unsigned cores;
  unsigned known = atomic_load_explicit(&cores, memory_order_relaxed);
  if (known) return known;
  cpu_set_t set;
  long count = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                           : sysconf(_SC_NPROCESSORS_ONLN);
  known = count < 1 ? 1 : count > 1024 ? 1024 : (unsigned)count;
  atomic_store_explicit(&cores, known, memory_order_relaxed);
  return known;
}

unsigned ic_idle_cores(void) {
  int busy = atomic_load_explicit(&busy_cores, memory_order_relaxed);
  if (busy < 1) busy = 1;
  unsigned cores = ic_cores();
  return (unsigned)busy >= cores ? 0 : cores - (unsigned)busy;
}

void ic_busy_cores_add(int delta) {
  atomic_fetch_add_explicit(&busy_cores, delta, memory_order_relaxed);
}

ic_status ic_decoder_open(ic_stream *stream, const ic_limits *limits,
                          const ic_control *control, ic_result *result,
                          ic_decoder **decoder) {
  const ic_decoder_entry *entry = sniffed_entry(stream, result);
  if (!entry) return result->status;
  return entry->open(stream, limits, control, result, decoder);
}

ic_status ic_preview_open(ic_stream *stream, const ic_limits *limits,
                          const ic_control *control, ic_result *result,
                          ic_decoder **decoder) {
  const ic_decoder_entry *entry = sniffed_entry(stream, result);
  if (!entry) return result->status;
  if (!entry->preview_open)
    return ic_fail(result, IC_ERR_UNSUPPORTED, "a %s image carries no preview", entry->name);
  ic_decoder *opened = NULL;
  if (entry->open(stream, limits, control, result, &opened) != IC_OK) return result->status;
  return entry->preview_open(opened, limits, control, result, decoder);
}

ic_prefix_verdict ic_preview_prefix(const uint8_t *bytes, size_t size, ic_prefix_scan *scan) {
  if (scan->verdict != IC_PREFIX_MORE) return scan->verdict;
  if (!bytes) return IC_PREFIX_MORE;
  if (scan->format == IC_FORMAT_UNKNOWN) {
    /* Sniffed once the bytes are enough for every format, or for a JPEG's two. */
    for (size_t i = 0; i < COUNT(decoders); i++)
      if (decoders[i].sniff(bytes, size < IC_SNIFF_BYTES ? size : IC_SNIFF_BYTES))
        scan->format = decoders[i].format;
    if (scan->format == IC_FORMAT_UNKNOWN) {
      if (size < IC_SNIFF_BYTES) return IC_PREFIX_MORE;
      scan->verdict = IC_PREFIX_NONE;
      return scan->verdict;
    }
  }
  for (size_t i = 0; i < COUNT(decoders); i++)
    if (decoders[i].format == scan->format)
      return decoders[i].prefix ? decoders[i].prefix(bytes, size, scan)
                                : (scan->verdict = IC_PREFIX_NONE);
  return scan->verdict = IC_PREFIX_NONE;
}

ic_status ic_encode_as(ic_format format, const uint8_t *pixels, uint32_t width,
                       uint32_t height, int channels, const ic_encode_options *options,
                       uint8_t **out, size_t *out_size, ic_result *result) {
  for (size_t i = 0; i < COUNT(encoders); i++)
    if (encoders[i].format == format) {
      ic_status status = encoders[i].encode(pixels, width, height, channels, options, out,
                                            out_size, result);
      ic_first_use_ran(encoders[i].first_use);
      return status;
    }
  return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "%s is not an output format",
                 ic_format_name(format));
}

void ic_encode_options_init(ic_encode_options *options) {
  memset(options, 0, sizeof(*options));
  options->quality = 80;
  options->png_level = 6;
  options->avif_speed = IC_AVIF_DEFAULT_SPEED;
}

ic_status ic_encode(const ic_bitmap *bitmap, ic_format format,
                    const ic_encode_options *options, ic_result *result) {
  memset(result, 0, sizeof(*result));
  if (!bitmap->pixels || bitmap->width == 0 || bitmap->height == 0 ||
      (bitmap->channels != 3 && bitmap->channels != 4))
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "invalid bitmap");
  result->width = bitmap->width;
  result->height = bitmap->height;
  result->format = format;
  return ic_encode_as(format, bitmap->pixels, bitmap->width, bitmap->height,
                      bitmap->channels, options, &result->data, &result->size, result);
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

uint64_t ic_encoder_first_use(ic_format format) {
  for (size_t i = 0; i < COUNT(encoders); i++)
    if (encoders[i].format == format) return ic_first_use_pending(encoders[i].first_use);
  return 0;
}

uint64_t ic_first_use_pending(ic_first_use *use) {
  return use && !atomic_load_explicit(&use->ran, memory_order_relaxed) ? use->bytes : 0;
}

void ic_first_use_ran(ic_first_use *use) {
  if (use) atomic_store_explicit(&use->ran, 1, memory_order_relaxed);
}

int ic_format_encodable(ic_format format) {
  for (size_t i = 0; i < COUNT(encoders); i++)
    if (encoders[i].format == format) return 1;
  return 0;
}
