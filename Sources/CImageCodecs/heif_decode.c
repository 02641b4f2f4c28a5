/*
 * HEIC and AVIF decoding (libheif, with FFmpeg's decoder for HEVC, hevc_avcodec.c, or
 * libheif's libde265 without it, and dav1d/aom for AV1 in Debian's build): the primary
 * image with its transforms (irot, imir, clap) applied by libheif, alpha, and 10/12-bit
 * samples reduced to 8 bits. EXIF orientation is not applied on top: HEIF's
 * own transforms take precedence, and a second rotation would be wrong.
 *
 * The codecs decode whole frames, so the size is checked against the limits before decoding
 * starts and the estimate counts the whole frame. When the file carries an embedded thumbnail
 * that covers what the output needs (the same headroom as JPEG's DCT scaling), that smaller
 * image is decoded instead. libheif 1.15 cannot be interrupted inside a decode: the control is
 * checked before and after it and between the rows handed on.
 */
#include "internal.h"
#include "heif_api.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct heif_decoder {
  ic_decoder base;
  struct heif_context *context;
  struct heif_image_handle *primary;
  /* What run() decodes: the primary image or one of its thumbnails. */
  struct heif_image_handle *chosen;
  uint32_t chosen_width, chosen_height;
  int bits;
  /* AV1-coded (AVIF): dav1d applies film grain into another copy of the planes. */
  int av1;
  /* Bytes of the file read into memory (a path source), 0 for a source given in memory. */
  uint64_t buffered;
  /* libheif's own interleaved 8-bit RGB instead of its planes (ic_limits.heif_interleaved). */
  int interleaved;
  /* HEVC through libde265 rather than FFmpeg (ic_limits.hevc_libde265). */
  int libde265;
  uint64_t max_pixels;
  /* The item graph and real sizes (heif_scan.c), and the item run() decodes. */
  ic_heif_layout layout;
  uint32_t primary_id, chosen_id;
  /* A preview (ic_request.preview): an embedded thumbnail, never the primary image. */
  int preview;
} heif_decoder;

/* Brands in the ftyp box: the major one, then the compatible ones that fit in the bytes. */
static int has_brand(const uint8_t *bytes, size_t size, const char *const *brands) {
  if (size < 12 || memcmp(bytes + 4, "ftyp", 4) != 0) return 0;
  uint32_t box = ic_be32(bytes);
  size_t end = box < size ? box : size;
  for (size_t at = 8; at + 4 <= end; at += 4) {
    if (at == 12) continue; /* minor version */
    for (const char *const *b = brands; *b; b++)
      if (memcmp(bytes + at, *b, 4) == 0) return 1;
  }
  return 0;
}

static const char *const avif_brands[] = {"avif", "avis", NULL};
static const char *const heic_brands[] = {"heic", "heix", "heim", "heis", "hevc",
                                          "hevx", "mif1", "msf1", NULL};

int ic_avif_sniff(const uint8_t *bytes, size_t size) {
  return has_brand(bytes, size, avif_brands);
}

int ic_heic_sniff(const uint8_t *bytes, size_t size) {
  return !ic_avif_sniff(bytes, size) && has_brand(bytes, size, heic_brands);
}

/*
 * Threads libheif may decode a grid's tiles on (it uses none for other images): one per
 * core, at most IC_HEIF_MAX_TILE_THREADS. A 12 MP phone photo is a grid of 48 tiles, and a
 * decode on one thread took 0.59-0.87 s where two cores took 0.33-0.40 (docs/BENCHMARKS.md):
 * a picture waited for alone gets the whole machine, and under load the extra threads only
 * share the cores the pipeline's decode threads already keep busy.
 */
#define IC_HEIF_MAX_TILE_THREADS 4

static int heif_tile_threads(void) {
  /* glibc reads /sys for the core count: once per process, not once per decode (-1: not yet). */
  static _Atomic int threads = -1;
  int known = atomic_load_explicit(&threads, memory_order_relaxed);
  if (known >= 0) return known;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  known = cores <= 1 ? 0 /* on the calling thread */
          : cores < IC_HEIF_MAX_TILE_THREADS ? (int)cores
                                             : IC_HEIF_MAX_TILE_THREADS;
  atomic_store_explicit(&threads, known, memory_order_relaxed);
  return known;
}

/* The primary image's item ID (libheif 1.15 has no handle accessor for it). */
static uint32_t primary_item_id(heif_decoder *d) {
  heif_item_id id = 0;
  if (ic_libheif.context_get_primary_image_ID(d->context, &id).code != heif_error_Ok) return 0;
  return id;
}

static ic_status fail_from_heif(struct heif_error error, const char *what, ic_result *result) {
  ic_status status = IC_ERR_CORRUPT;
  /* Sizes over the limits were refused by the scan, which names them: what libheif still
   * calls a security limit is a damaged file (an extent past the end, say). */
  if (error.subcode == heif_suberror_Security_limit_exceeded && result->source_width > 0)
    status = IC_ERR_TOO_LARGE;
  else if (error.subcode == heif_suberror_Security_limit_exceeded)
    status = IC_ERR_CORRUPT; /* never out_of_memory: a retry cannot help */
  else if (error.code == heif_error_Memory_allocation_error)
    status = IC_ERR_NO_MEMORY;
  else if (error.code == heif_error_Unsupported_feature ||
           error.code == heif_error_Unsupported_filetype)
    status = IC_ERR_UNSUPPORTED;
  return ic_fail(result, status, "HEIF %s: %s (%d.%d)", what,
                 error.message ? error.message : "error", (int)error.code,
                 (int)error.subcode);
}

static void heif_choose_size(ic_decoder *base, uint32_t need_width, uint32_t need_height,
                             int allow_scaling, uint32_t *width, uint32_t *height) {
  heif_decoder *d = (heif_decoder *)base;
  if (d->chosen && d->chosen != d->primary) ic_libheif.image_handle_release(d->chosen);
  d->chosen = d->primary;
  d->chosen_id = d->primary_id;
  d->chosen_width = base->header.width;
  d->chosen_height = base->header.height;
  int count = allow_scaling || d->preview
                  ? ic_libheif.image_handle_get_number_of_thumbnails(d->primary)
                  : 0;
  if (count > 16) count = 16;
  heif_item_id ids[16];
  if (count > 0) count = ic_libheif.image_handle_get_list_of_thumbnail_IDs(d->primary, ids, count);
  /* A preview takes the smallest thumbnail that covers the need, else the largest one; a
   * decode, only a thumbnail that covers it. */
  int covered = 0;
  for (int i = 0; i < count; i++) {
    struct heif_image_handle *thumb = NULL;
    struct heif_error error = ic_libheif.image_handle_get_thumbnail(d->primary, ids[i], &thumb);
    if (error.code != heif_error_Ok || !thumb) continue;
    int tw = ic_libheif.image_handle_get_width(thumb);
    int th = ic_libheif.image_handle_get_height(thumb);
    int covers = tw > 0 && th > 0 && (uint32_t)tw >= need_width && (uint32_t)th >= need_height;
    int better = d->chosen == d->primary ||
                 (covers ? !covered || (uint32_t)tw < d->chosen_width
                         : !covered && (uint32_t)tw > d->chosen_width);
    if (tw > 0 && th > 0 && (covers || d->preview) && better &&
        (uint32_t)tw < base->header.width &&
        ic_same_shape((uint32_t)tw, (uint32_t)th, base->header.width, base->header.height)) {
      covered = covers;
      if (d->chosen != d->primary) ic_libheif.image_handle_release(d->chosen);
      d->chosen = thumb;
      d->chosen_id = ids[i];
      d->chosen_width = (uint32_t)tw;
      d->chosen_height = (uint32_t)th;
    } else {
      ic_libheif.image_handle_release(thumb);
    }
  }
  *width = d->chosen_width;
  *height = d->chosen_height;
}

/* One plane of the decoded image: its rows, stride, bits and samples a pixel. */
typedef struct heif_plane {
  const uint8_t *data;
  int stride;
  /* Significant bits (8 to 16); samples over 8 bits are 16-bit words in host order. */
  int bits;
  /* Samples a pixel: 1 for a plane of planar RGB, 3 or 4 for libheif's interleaved RGB. */
  int samples;
} heif_plane;

static int get_plane(const struct heif_image *image, enum heif_channel channel, int samples,
                     int width, int height, heif_plane *plane) {
  plane->data = ic_libheif.image_get_plane_readonly(image, channel, &plane->stride);
  plane->bits = ic_libheif.image_get_bits_per_pixel_range(image, channel);
  plane->samples = samples;
  int bytes = plane->bits > 8 ? 2 : 1;
  /* Interleaved rows are copied as they are: 8-bit, one sample a channel. */
  return plane->data && plane->bits >= 8 && plane->bits <= 16 &&
         (samples == 1 || plane->bits == 8) &&
         ic_libheif.image_get_width(image, channel) == width &&
         ic_libheif.image_get_height(image, channel) == height &&
         plane->stride / bytes / samples >= width;
}

/* Row y of a plane into out: an interleaved row as it is, a plane's samples into every
 * channels-th byte, reduced to 8 bits (rounded). */
static void put_plane_row(const heif_plane *plane, int y, int width, uint8_t *out,
                          int channels) {
  const uint8_t *src = plane->data + (size_t)y * plane->stride;
  if (plane->samples != 1) {
    memcpy(out, src, (size_t)width * plane->samples);
    return;
  }
  if (plane->bits == 8) {
    for (int x = 0; x < width; x++) out[(size_t)x * channels] = src[x];
    return;
  }
  const uint16_t *wide = (const uint16_t *)src;
  uint32_t max = (1u << plane->bits) - 1;
  for (int x = 0; x < width; x++) {
    uint32_t v = wide[x] > max ? max : wide[x];
    out[(size_t)x * channels] = (uint8_t)((v * 255 + max / 2) / max);
  }
}

/*
 * libheif 1.15 turns every coded image into planar RGB 4:4:4 before anything else (grids
 * are assembled in it, tile by tile): asking for that layout spares a second conversion of
 * the whole frame into interleaved RGB, 14% of a 12 MP grid's decode (docs/BENCHMARKS.md),
 * and its 3 bytes a pixel. Rows are interleaved here, one at a time. libheif then also
 * leaves samples over 8 bits as they are (convert_hdr_to_8bit acts only within a
 * conversion), so they are reduced here.
 */
static ic_status heif_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  heif_decoder *d = (heif_decoder *)base;
  if (ic_check(d->base.control, result) != IC_OK) return result->status;
  int alpha = base->header.channels == 4;
  int channels = alpha ? 4 : 3;
  enum heif_chroma chroma = !d->interleaved ? heif_chroma_444
                            : alpha         ? heif_chroma_interleaved_RGBA
                                            : heif_chroma_interleaved_RGB;
  /* Registered here, not at open: a file refused from its header never loads libavcodec. */
  const struct heif_decoder_plugin *hevc =
      d->av1 || d->libde265 ? NULL : ic_hevc_plugin(d->max_pixels);
  if (hevc) ic_libheif.register_decoder(d->context, hevc);
  struct heif_decoding_options *options = ic_libheif.decoding_options_alloc();
  if (!options) return ic_fail(result, IC_ERR_NO_MEMORY, "HEIF options allocation failed");
  options->convert_hdr_to_8bit = 1;
  struct heif_image *image = NULL;
  struct heif_error error =
      ic_libheif.decode_image(d->chosen, &image, heif_colorspace_RGB, chroma, options);
  ic_libheif.decoding_options_free(options);
  if (error.code != heif_error_Ok) return fail_from_heif(error, "decode", result);
  ic_status status = ic_check(d->base.control, result);
  static const enum heif_channel names[4] = {heif_channel_R, heif_channel_G, heif_channel_B,
                                             heif_channel_Alpha};
  int planes = d->interleaved ? 1 : channels;
  enum heif_channel first = d->interleaved ? heif_channel_interleaved : heif_channel_R;
  int w = ic_libheif.image_get_width(image, first), h = ic_libheif.image_get_height(image, first);
  heif_plane plane[4];
  int complete = w > 0 && h > 0;
  for (int c = 0; c < planes && complete; c++)
    complete = get_plane(image, d->interleaved ? first : names[c],
                         d->interleaved ? channels : 1, w, h, &plane[c]);
  if (status == IC_OK && !complete)
    status = ic_fail(result, IC_ERR_CORRUPT, "HEIF decode gave no complete RGB image");
  /* A coded frame may be larger than the size the file declares (an AV1 sequence header's
   * maximum, an encoder that wrote a display size in ispe): the scan bounded it and the
   * estimate counted it, and it is resampled into the plan made from the declared size, as
   * browsers and libvips show such files. Only a frame of another shape is no picture of the
   * declared image. */
  if (status == IC_OK && ((uint32_t)w != d->chosen_width || (uint32_t)h != d->chosen_height) &&
      !ic_same_shape((uint32_t)w, (uint32_t)h, d->chosen_width, d->chosen_height))
    status = ic_fail(result, IC_ERR_CORRUPT,
                     "HEIF decode gave a %dx%d frame for an image declared %ux%u", w, h,
                     d->chosen_width, d->chosen_height);
  int premultiplied = alpha && ic_libheif.image_is_premultiplied_alpha(image);
  uint8_t *row = status == IC_OK ? malloc((size_t)w * channels) : NULL;
  if (status == IC_OK && !row) status = ic_fail(result, IC_ERR_NO_MEMORY, "row allocation failed");
  if (status == IC_OK) status = sink->begin(sink, (uint32_t)w, (uint32_t)h, channels, result);
  for (int y = 0; y < h && status == IC_OK; y++) {
    if (y % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->base.control, result) != IC_OK) {
      status = result->status;
      break;
    }
    for (int c = 0; c < planes; c++) put_plane_row(&plane[c], y, w, row + c, channels);
    if (premultiplied) ic_unpremultiply_row(row, (uint32_t)w);
    status = sink->row(sink, row, result);
  }
  free(row);
  ic_libheif.image_release(image);
  return status;
}

/* Pixels of a frame as codecs allocate it: whole coding blocks (AV1 superblocks of up to
 * 128, HEVC trees of 64): a 16 x 17000 AVIF holds frames 128 wide (measured: 24 MB). */
static uint64_t block_pixels(uint64_t width, uint64_t height) {
  return (width + 127) / 128 * 128 * ((height + 127) / 128 * 128);
}

static uint64_t heif_working_memory(ic_decoder *base) {
  heif_decoder *d = (heif_decoder *)base;
  /* The largest of the size libheif reports and what the scan read from the bitstreams and
   * grid boxes; the tiles in flight (one a tile thread, or one), and the alpha plane. */
  uint32_t width = d->chosen_width, height = d->chosen_height;
  const ic_heif_image *scanned = ic_heif_layout_image(&d->layout, d->chosen_id);
  uint64_t frame = block_pixels(width, height), tiles = 0, alpha = 0;
  if (scanned) {
    uint64_t found = block_pixels(scanned->width, scanned->height);
    if (found > frame) frame = found;
    int threads = heif_tile_threads();
    tiles = scanned->tile_pixels * (uint64_t)(threads > 1 ? threads : 1);
    alpha = scanned->alpha_pixels;
  }
  uint64_t sample = d->bits > 8 ? 2 : 1, channels = (uint64_t)base->header.channels;
  /* Alpha is an image of its own, one plane: counted once at the larger of its real size
   * (the scan's; a hostile file can make it larger than the primary) and the primary's, not
   * as a fourth channel of every pixel on top of its own size (which put a 3840x2160 AVIF
   * with alpha at 259 MiB, over the default budget, for a measured 65 MiB). */
  uint64_t planes = frame * channels;
  if (scanned && channels == 4) planes = frame * 3 + (alpha > frame ? alpha : frame);
  /* A coded image: the codec's planes and libheif's planar RGB copy of them, counted as
   * full-resolution 4:4:4 (chroma is often a quarter of that, which covers the codec's own
   * state): 6 bytes a pixel for 8-bit RGB, against 9.7 measured for a 4 MP 10-bit HEIC at two
   * bytes a sample. dav1d holds more: film grain is applied into further copies
   * (abandoned_filmgrain.avif peaks at 16 bytes a pixel inside dav1d, with or without
   * libheif's interleaved copy), so AV1 counts four. Rows are interleaved one at a time
   * (heif_run). MemoryEstimateTests checks every corpus file. */
  uint64_t copies = d->av1 ? 4 : 2;
  uint64_t work = planes * copies;
  /* A grid (or overlay): only its tiles in flight go through the codec's copies; the frame
   * is libheif's one planar RGB image they are pasted into, counted one and a half times
   * (4.5 bytes a pixel, against 3.5 measured for a 12 MP HEVC grid and 4.2 for an 18 MP AV1
   * one, whose estimate at four whole-frame copies, 242 MiB, refused it under a 128 MiB
   * budget for a peak of 77). */
  if (tiles) work = planes * 3 / 2 + tiles * channels * copies;
  return work * sample + d->buffered + (4u << 20) + IC_DECODE_BASE_BYTES;
}

static void heif_destroy(ic_decoder *base) {
  heif_decoder *d = (heif_decoder *)base;
  if (d->chosen && d->chosen != d->primary) ic_libheif.image_handle_release(d->chosen);
  if (d->primary) ic_libheif.image_handle_release(d->primary);
  if (d->context) ic_libheif.context_free(d->context);
  ic_heif_scan_free(&d->layout);
  ic_colour_info_clear(&base->header.colour);
  free(d);
}

/* The primary image's colour: its ICC profile (colr prof/rICC), else its nclx primaries and
 * transfer curve. PQ and HLG (HDR) are not converted: they need tone mapping. */
static void read_colour(heif_decoder *d, const ic_limits *limits) {
  ic_colour_info *colour = &d->base.header.colour;
  size_t size = ic_libheif.image_handle_get_raw_color_profile_size(d->primary);
  if (size > 0) {
    if (size > limits->max_profile_bytes) {
      colour->damage = IC_PROFILE_OVERSIZED;
    } else if ((colour->icc = malloc(size))) {
      if (ic_libheif.image_handle_get_raw_color_profile(d->primary, colour->icc).code ==
          heif_error_Ok) {
        colour->icc_size = size;
        return;
      }
      ic_colour_info_clear(colour);
      colour->damage = IC_PROFILE_BROKEN;
    }
  }
  struct heif_color_profile_nclx *nclx = NULL;
  /* libheif 1.15 allocates the description before checking its values and hands it back
   * with the error when one is unknown: it is freed either way (found by decode-heif). */
  if (ic_libheif.image_handle_get_nclx_color_profile(d->primary, &nclx).code != heif_error_Ok ||
      !nclx) {
    if (nclx) ic_libheif.nclx_color_profile_free(nclx);
    return;
  }
  switch ((int)nclx->transfer_characteristics) {
    case 1: case 6: case 14: case 15: colour->transfer = 1; break;
    case 4: colour->gamma = 2.2; break;
    case 5: colour->gamma = 2.8; break;
    case 8: colour->transfer = 8; break;
    case 16: case 18: colour->damage = IC_PROFILE_UNLINKABLE; break;
    default: colour->transfer = 13; break;
  }
  int primaries = (int)nclx->color_primaries;
  if (primaries != 1 && primaries != 2 && nclx->color_primary_white_x > 0) {
    double *p = colour->primaries;
    p[0] = nclx->color_primary_white_x;
    p[1] = nclx->color_primary_white_y;
    p[2] = nclx->color_primary_red_x;
    p[3] = nclx->color_primary_red_y;
    p[4] = nclx->color_primary_green_x;
    p[5] = nclx->color_primary_green_y;
    p[6] = nclx->color_primary_blue_x;
    p[7] = nclx->color_primary_blue_y;
    colour->has_primaries = 1;
  }
  ic_libheif.nclx_color_profile_free(nclx);
}

/* A fresh daemon's RSS after its first HEIC grew by 14-17 MiB (libavcodec and the hundred
 * libraries it brings, then libheif's decoding paths), after its first AVIF by 4.7 (dav1d).
 * libheif itself is opened by the header's read, before any estimate. */
static ic_first_use hevc_first_use = {.bytes = 16u << 20};
static ic_first_use av1_first_use = {.bytes = 5u << 20};

static ic_first_use *heif_first_use(ic_decoder *base) {
  return ((heif_decoder *)base)->av1 ? &av1_first_use : &hevc_first_use;
}

static const ic_decoder_ops heif_ops = {heif_choose_size, heif_run, heif_destroy,
                                        heif_working_memory, heif_first_use};

ic_status ic_heif_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                       ic_result *result, ic_decoder **out) {
  char why[256];
  if (ic_heif_load(why, sizeof(why)) != 0) return ic_fail(result, IC_ERR_UNSUPPORTED, "%s", why);
  const uint8_t *data = NULL;
  size_t size = 0;
  if (ic_stream_contents(stream, limits, control, &data, &size, result) != IC_OK)
    return result->status;
  heif_decoder *d = ic_decoder_new(sizeof(*d), &heif_ops, limits, control, result);
  if (!d) return result->status;
  d->buffered = stream->owned_size;
  d->interleaved = limits->heif_interleaved;
  d->libde265 = limits->hevc_libde265;
  d->max_pixels = limits->max_pixels;
  size_t magic_length = 0;
  const uint8_t *magic = ic_stream_magic(stream, &magic_length);
  d->av1 = ic_avif_sniff(magic, magic_length);
  d->context = ic_libheif.context_alloc();
  if (!d->context) {
    free(d);
    return ic_fail(result, IC_ERR_NO_MEMORY, "HEIF context allocation failed");
  }
  /* The graph and the real sizes first: libheif recurses along references and trusts ispe. */
  if (ic_heif_scan(data, size, limits, result, &d->layout) != IC_OK) {
    heif_destroy(&d->base);
    return result->status;
  }
  /* Never above libheif's own default (32768 a side): past it, libheif 1.15 computes a grid's
   * plane size in 32 bits and writes past what it allocated. */
  uint32_t side = limits->max_width > limits->max_height ? limits->max_width : limits->max_height;
  if (side == 0 || side > IC_HEIF_MAX_SIDE) side = IC_HEIF_MAX_SIDE;
  ic_libheif.context_set_maximum_image_size_limit(d->context, (int)side);
  ic_libheif.context_set_max_decoding_threads(d->context, heif_tile_threads());
  struct heif_error error =
      ic_libheif.context_read_from_memory_without_copy(d->context, data, size, NULL);
  if (error.code == heif_error_Ok)
    error = ic_libheif.context_get_primary_image_handle(d->context, &d->primary);
  if (error.code != heif_error_Ok) {
    /* The message lives in the context: record it before freeing. */
    fail_from_heif(error, "header", result);
    heif_destroy(&d->base);
    return result->status;
  }
  d->primary_id = primary_item_id(d);
  int w = ic_libheif.image_handle_get_width(d->primary);
  int h = ic_libheif.image_handle_get_height(d->primary);
  int iw = ic_libheif.image_handle_get_ispe_width(d->primary);
  int ih = ic_libheif.image_handle_get_ispe_height(d->primary);
  if (w <= 0 || h <= 0) {
    heif_destroy(&d->base);
    return ic_fail(result, IC_ERR_CORRUPT, "HEIF image has no size");
  }
  /* The coded size too: a crop (clap) can make a huge coded image look small. */
  if (ic_check_limits((uint32_t)(iw > 0 ? iw : w), (uint32_t)(ih > 0 ? ih : h), limits,
                      result) != IC_OK ||
      ic_check_limits((uint32_t)w, (uint32_t)h, limits, result) != IC_OK) {
    heif_destroy(&d->base);
    return result->status;
  }
  d->bits = ic_libheif.image_handle_get_luma_bits_per_pixel(d->primary);
  d->base.header.width = (uint32_t)w;
  d->base.header.height = (uint32_t)h;
  d->base.header.orientation = 1;
  d->base.header.channels = ic_libheif.image_handle_has_alpha_channel(d->primary) ? 4 : 3;
  read_colour(d, limits);
  d->chosen = d->primary;
  d->chosen_id = d->primary_id;
  d->chosen_width = (uint32_t)w;
  d->chosen_height = (uint32_t)h;
  *out = &d->base;
  return IC_OK;
}

ic_status ic_heif_preview_open(ic_decoder *base, const ic_limits *limits,
                               const ic_control *control, ic_result *result,
                               ic_decoder **out) {
  (void)limits;
  (void)control;
  heif_decoder *d = (heif_decoder *)base;
  d->preview = 1;
  uint32_t width = 0, height = 0;
  heif_choose_size(base, 0, 0, 1, &width, &height);
  if (d->chosen == d->primary) {
    heif_destroy(base);
    return ic_fail(result, IC_ERR_UNSUPPORTED, "the HEIF image has no embedded thumbnail of its shape");
  }
  *out = base;
  return IC_OK;
}
