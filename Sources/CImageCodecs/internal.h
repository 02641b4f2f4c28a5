/*
 * Declarations shared by the codec sources. Not visible to Swift.
 */
#ifndef CIMAGECODECS_INTERNAL_H
#define CIMAGECODECS_INTERNAL_H

#include "CImageCodecs.h"

#include <stdio.h>

/* Rows between two looks at the cancellation flag. */
#define IC_CANCEL_CHECK_ROWS 16


/* Records an error on the result unless one is already recorded. */
ic_status ic_fail(ic_result *result, ic_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * What tells a running decode to stop: the caller's cancellation flag and the wall-clock
 * deadline (CLOCK_MONOTONIC ns, 0 for none). Every loop that reads input or produces rows
 * asks ic_check.
 */
typedef struct ic_control {
  const int32_t *cancel_flag;
  uint64_t deadline_ns;
} ic_control;

/* Monotonic nanoseconds. */
uint64_t ic_now_ns(void);

/* IC_OK, or IC_ERR_CANCELLED / IC_ERR_TIMEOUT recorded on the result. */
ic_status ic_check(const ic_control *control, ic_result *result);

/* The same test without touching a result (for code that reports errors its own way). */
ic_status ic_stop_reason(const ic_control *control);

/*
 * A consumer of decoded rows. Decoders call begin once with the size they
 * will deliver, then row() for every row top to bottom. Rows are 8-bit RGB
 * (3 channels) or straight-alpha RGBA (4 channels).
 */
typedef struct ic_sink ic_sink;
struct ic_sink {
  ic_status (*begin)(ic_sink *sink, uint32_t width, uint32_t height,
                     int channels, ic_result *result);
  ic_status (*row)(ic_sink *sink, const uint8_t *row, ic_result *result);
};

/* The colour space a source's samples are in, before its decoder expands them to RGB. */
typedef enum ic_colour_space {
  IC_SPACE_RGB = 0,
  IC_SPACE_GREY = 1,
  /* CMYK JPEGs: their decoder converts rows to RGB itself (ic_colour_cmyk_row). */
  IC_SPACE_CMYK = 2
} ic_colour_space;

/*
 * How a source describes its colour, as its decoder found it (colour.c turns it into a
 * transform). An ICC profile wins over everything else; then PNG's sRGB chunk, then gAMA
 * and cHRM (or HEIF's nclx, given the same way).
 */
typedef struct ic_colour_info {
  ic_colour_space space;
  /* The embedded ICC profile (malloc'd, the decoder's; never more than max_profile_bytes). */
  uint8_t *icc;
  size_t icc_size;
  /* IC_PROFILE_BROKEN or IC_PROFILE_OVERSIZED when a profile was there but is not usable. */
  ic_profile_outcome damage;
  int srgb;
  /* Decoding exponent (2.2 for PNG's gAMA 45455); 0 when none. */
  double gamma;
  /* White point and red, green, blue primaries as CIE xy; has_primaries 0 when none. */
  int has_primaries;
  double primaries[8];
  /* A transfer curve by nclx code (ITU-T H.273), when the source gives one instead of a
   * gamma: 13 sRGB, 1/6/14/15 BT.709, 8 linear. 0 when none. */
  int transfer;
} ic_colour_info;

/* Frees the profile. */
void ic_colour_info_clear(ic_colour_info *info);

/* What a decoder learnt from the header. */
typedef struct ic_header {
  uint32_t width;
  uint32_t height;
  int orientation;
  int channels;
  ic_colour_info colour;
} ic_header;

/*
 * Memory a process keeps from the first run of a decoder or encoder: the code of a library
 * opened on first use (dlopen maps and relocates it and its dependencies) and the pages that
 * run touches. An estimate counts it (`first_use`) until one run has ended, so that a budget
 * counting the process's own memory expects the growth before it happens, not after the
 * first wave of such decodes. The bytes are a fresh daemon's RSS growth over its first such
 * request (docs/BENCHMARKS.md, "Soak").
 */
typedef struct ic_first_use {
  uint64_t bytes;
  _Atomic int ran;
} ic_first_use;

/* `use`'s bytes while no run has ended, else 0; 0 for NULL. */
uint64_t ic_first_use_pending(ic_first_use *use);

/* A run has ended: the growth is the process's from now on. */
void ic_first_use_ran(ic_first_use *use);

/*
 * A decoder that has read its header. choose_size picks the smallest decode
 * size the codec offers that is at least need_width x need_height (JPEG DCT
 * scaling; PNG always decodes full size). run streams rows into a sink.
 */
typedef struct ic_decoder ic_decoder;
/* What a decoder does, one static table per decoder (`ops` of every decoder it opens). */
typedef struct ic_decoder_ops {
  void (*choose_size)(ic_decoder *decoder, uint32_t need_width,
                      uint32_t need_height, int allow_scaling,
                      uint32_t *width, uint32_t *height);
  ic_status (*run)(ic_decoder *decoder, ic_sink *sink, ic_result *result);
  void (*destroy)(ic_decoder *decoder);
  /* Bytes run() will hold at its peak at the size choose_size picked, from the header
   * alone: coefficient buffers, whole-image buffers, rows, the library's own state. */
  uint64_t (*working_memory)(ic_decoder *decoder);
  /* The library growth its first run brings (ic_first_use), or NULL: a decoder whose
   * libraries are linked and small has none. */
  ic_first_use *(*first_use)(ic_decoder *decoder);
} ic_decoder_ops;

struct ic_decoder {
  ic_header header;
  const ic_decoder_ops *ops;
  /* What the decode may do, and what stops it: the opener's, kept by ic_decoder_new for every
   * decoder (checked with ic_check every 16 rows or input slices). */
  const ic_limits *limits;
  const ic_control *control;
  /* Non-zero when the codec's own scaling averages every source pixel exactly (libwebp's
   * rescaler): it may then scale straight to the output size, with no headroom. */
  int exact_scaling;
  /* Decoded pixels per source pixel, when choose_size picked a scale whose pixels each
   * cover a fixed number of source pixels, the last row and column fewer (JPEG's DCT
   * scaling: num/8, the size rounded up); 0 when the decoded image spans the source exactly
   * (its size over the source's). Mapping a rounded-up size as if it spanned the source
   * shifted the picture by up to 0.3 output pixels at its far edges: 37 dB instead of 46
   * for a 2725-pixel-wide photo at 1/4 (docs/BENCHMARKS.md). */
  double pixel_scale;
};

/* A zeroed decoder struct of `size` bytes (its first member an ic_decoder) run by `ops`, under
 * `limits` and `control`; NULL, with the result failed, when there is no memory. */
void *ic_decoder_new(size_t size, const ic_decoder_ops *ops, const ic_limits *limits,
                     const ic_control *control, ic_result *result);

/* Runs a decoder inside another's run (an icon's entry, a camera RAW's preview): its rows go
 * to the sink, its colour description becomes the outer decoder's when its rows begin. */
ic_status ic_decoder_run_inner(ic_decoder *inner, ic_decoder *outer, ic_sink *sink,
                               ic_result *result);

/* Runs a decoder (ops->run), counted as one busy core while it runs. */
ic_status ic_decoder_run(ic_decoder *decoder, ic_sink *sink, ic_result *result);

/* The growth `decoder`'s first run brings (its ops' first_use), or NULL. */
ic_first_use *ic_decoder_first_use(ic_decoder *decoder);

/* Cores this process may run on (its CPU affinity), counted once. */
unsigned ic_cores(void);

/* Cores not busy with a decode or a decode's extra threads: what a decode may add threads
 * on. The decode asking counts itself as busy. */
unsigned ic_idle_cores(void);

/* Counts extra threads a decode runs (negative when they end). */
void ic_busy_cores_add(int delta);

/* Memory every decode holds whatever its size: the decoder's structs and tables, stream
 * and stdio buffers (measured: see docs/BENCHMARKS.md, "Memory estimates"). */
#define IC_DECODE_BASE_BYTES (256u << 10)

/* Bytes sniffing looks at: enough for an ISO-BMFF `ftyp` box with a few brands. */
#define IC_SNIFF_BYTES 32

/*
 * Encoded bytes being read: in memory, or from a FILE that may be a pipe.
 * Sniffing consumes the first bytes; they are kept and handed out again
 * first, because pipes and FIFOs cannot be rewound.
 */
typedef struct ic_stream {
  FILE *file;
  const uint8_t *data;
  size_t size;
  size_t offset;
  uint8_t head[IC_SNIFF_BYTES];
  size_t head_length;
  size_t head_offset;
  /* The whole source, when a decoder asked for it from a FILE (ic_stream_contents): memory
   * a decoder's working_memory counts. */
  uint8_t *owned;
  size_t owned_size;
} ic_stream;

/* Opens a source: a FILE when it names a path, otherwise its bytes. */
ic_status ic_stream_open(ic_stream *stream, const ic_source *source,
                         ic_result *result);
void ic_stream_close(ic_stream *stream);
/* Reads the first bytes of a FILE for sniffing (kept, and read again first). */
ic_status ic_stream_read_head(ic_stream *stream, ic_result *result);
/* The first bytes (at most IC_SNIFF_BYTES), for sniffing. */
const uint8_t *ic_stream_magic(const ic_stream *stream, size_t *length);
/*
 * The rest of the source in one piece, for decoders whose library wants all of it (WebP's
 * demuxer, libheif): the bytes themselves when in memory, else read from the FILE into a
 * buffer the stream owns (owned_size), never more than the limits' decoder memory
 * (IC_ERR_TOO_LARGE past it), checking the control between reads.
 */
ic_status ic_stream_contents(ic_stream *stream, const ic_limits *limits,
                             const ic_control *control, const uint8_t **data, size_t *size,
                             ic_result *result);
/* Reads up to length bytes; fewer only at the end of data or on error. */
size_t ic_stream_read(ic_stream *stream, uint8_t *out, size_t length);
/* The absolute offset of the next byte read (UINT64_MAX when a FILE cannot say). */
uint64_t ic_stream_tell(const ic_stream *stream);
/* The source's size in bytes, when known (in memory, or a regular file): 1, else 0. */
int ic_stream_size(ic_stream *stream, uint64_t *size);
/* Moves to an absolute offset: anywhere in memory or a regular file (past the end is
 * IC_ERR_TRUNCATED), only forward in a pipe (by reading, checking the control). */
ic_status ic_stream_seek(ic_stream *stream, uint64_t offset, const ic_control *control,
                         ic_result *result);
/*
 * A source read at any offset (TIFF, camera RAW): a regular file by pread on its descriptor
 * (the stream's position untouched), else its bytes in memory (a pipe read whole, within the
 * decoder's memory limit, kept by the stream).
 */
typedef struct ic_random {
  int fd;
  const uint8_t *data;
  uint64_t size;
} ic_random;
ic_status ic_stream_random(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                           ic_random *out, ic_result *result);
/* Reads up to length bytes at offset: the count read (fewer at the end or on error). */
size_t ic_random_read(const ic_random *source, uint64_t offset, void *buffer, size_t length);
/* True when the last short read was an I/O error rather than the end. */
int ic_stream_failed(const ic_stream *stream);

/* Sniffs the format and reads the header, checking the limits. */
ic_status ic_decoder_open(ic_stream *stream, const ic_limits *limits,
                          const ic_control *control, ic_result *result,
                          ic_decoder **decoder);

/* Like ic_decoder_open, for a preview (ic_request.preview): the format's preview opener,
 * IC_ERR_UNSUPPORTED for formats without one. */
ic_status ic_preview_open(ic_stream *stream, const ic_limits *limits,
                          const ic_control *control, ic_result *result,
                          ic_decoder **decoder);

/* Whether two sizes have the same aspect ratio, within 2%: an embedded thumbnail of another
 * crop or orientation (letterboxed, say) does not stand for the image. */
int ic_same_shape(uint32_t w1, uint32_t h1, uint32_t w2, uint32_t h2);

/* The decoder table's entries (codecs.c): each format's sniff and open. */
#define IC_DECLARE_DECODER(name)                                                         \
  int ic_##name##_sniff(const uint8_t *bytes, size_t size);                              \
  ic_status ic_##name##_open(ic_stream *stream, const ic_limits *limits,                 \
                             const ic_control *control, ic_result *result,              \
                             ic_decoder **decoder)
IC_DECLARE_DECODER(jpeg);
/* JPEG's DCT scale, num/8 (1, 2, 4 or 8), for a w x h image and a need: the one rule its
 * decoder and a container of JPEG data (a TIFF's strips) choose by. */
unsigned ic_jpeg_scale_for(uint32_t w, uint32_t h, uint32_t need_width, uint32_t need_height);
/* Sets an open JPEG decoder's scale to num/8 and gives its size then; `rgb` says its three
 * components are R, G and B whatever its markers say (a TIFF's photometric RGB). */
void ic_jpeg_set_scale(ic_decoder *jpeg, unsigned num, int rgb, uint32_t *width,
                       uint32_t *height);
IC_DECLARE_DECODER(png);
IC_DECLARE_DECODER(webp);
IC_DECLARE_DECODER(gif);
IC_DECLARE_DECODER(heif);
IC_DECLARE_DECODER(bmp);
IC_DECLARE_DECODER(ico);
IC_DECLARE_DECODER(tiff);
IC_DECLARE_DECODER(raw);
IC_DECLARE_DECODER(jxl);
/* What the header of the first frame shown says (jxl_header.c), read before libjxl decodes a
 * pixel. known is 0 when it could not be read (a preview frame first, a profile in a
 * codestream split over boxes, a permuted table of contents, a header cut short): the
 * estimate counts the worst case. */
typedef struct ic_jxl_layout {
  int known;
  int vardct;      /* VarDCT, not modular */
  int regular;     /* a regular frame: not a DC, reference-only or skip-progressive one */
  int last;        /* the image's last frame, so the picture is this frame alone */
  int custom_size; /* the frame declares a size or origin of its own */
  uint32_t passes, extra_channels;
  uint32_t frame_width, frame_height; /* as displayed: the image's, or its own */
  uint64_t hidden_pixels; /* in frames before it (a DC frame, patches), which libjxl keeps */
} ic_jxl_layout;
/* Reads the headers of the JPEG XL file in data up to its first frame's; frame_at is the file
 * offset where libjxl's reading of the image's headers ended (the frame's place after an ICC
 * profile). Refuses a frame whose own size is over the limits; never refuses what it cannot
 * read. */
ic_status ic_jxl_scan(const uint8_t *data, size_t size, size_t frame_at,
                      const ic_limits *limits, ic_result *result, ic_jxl_layout *layout);
/* Whether a TIFF-structured file is a camera's raw file (a DNG, or a Make tag and sensor
 * data), which raw_decode.c reads for its preview. */
int ic_raw_is_camera(const ic_random *bytes);
/* The RAW decoder over bytes already open for random reads (from the TIFF decoder). */
ic_status ic_raw_open_random(const ic_random *bytes, const ic_limits *limits,
                             const ic_control *control, ic_result *result, ic_decoder **out);
/* Preview openers (ic_request.preview) and prefix scanners (ic_preview_prefix), for the
 * formats that have them. A preview opener takes the format's open decoder, and gives the
 * decoder of its preview (that one, set to make it, or another, the first destroyed) or an
 * error (the decoder destroyed). */
#define IC_DECLARE_PREVIEW(name)                                                         \
  ic_status ic_##name##_preview_open(ic_decoder *decoder, const ic_limits *limits,       \
                                     const ic_control *control, ic_result *result,      \
                                     ic_decoder **preview)
IC_DECLARE_PREVIEW(jpeg);
IC_DECLARE_PREVIEW(heif);
ic_prefix_verdict ic_jpeg_prefix(const uint8_t *bytes, size_t size, ic_prefix_scan *scan);
/* The width and height in a JPEG's first frame header, found by walking its markers; 0 when
 * the bytes end (or stop being markers) before it. */
int ic_jpeg_frame_size(const uint8_t *bytes, size_t size, uint32_t *width, uint32_t *height);
/* HEVC for libheif on FFmpeg's decoder (hevc_avcodec.c), loaded on first use; NULL when
 * libavcodec cannot be loaded (libheif's libde265 plugin decodes then). max_pixels is the
 * calling decode's limit (0: none), folded into the cap every decoder in the process uses. */
struct heif_decoder_plugin;
const struct heif_decoder_plugin *ic_hevc_plugin(uint64_t max_pixels);
/*
 * What heif_scan.c found before libheif read the file: for the primary image and each of its
 * thumbnails, the size its decode allocates (the largest of its declared size, its coded
 * frame and its grid's or overlay's output), its largest tile and its alpha plane.
 */
#define IC_HEIF_MAX_TILES 1024
/* libheif's largest image side by default (32768); thumbd never raises it: past it, libheif
 * 1.15 computes a grid's plane size in 32 bits and writes past what it allocated. */
#define IC_HEIF_MAX_SIDE 32768
/* Tiles under 512x512 a grid may have: each tile costs a decoder's setup (65,025 tiles of
 * 64x64 took 28 s of CPU). */
#define IC_HEIF_SMALL_TILES 256
typedef struct ic_heif_image {
  uint32_t id, width, height;
  uint64_t tile_pixels, alpha_pixels;
} ic_heif_image;
typedef struct ic_heif_layout {
  ic_heif_image *images;
  uint32_t count;
} ic_heif_layout;
/* Reads the item graph and real sizes of the HEIF file in data; refuses cycles, derived
 * inputs to derived images, too many tiles, coded frames larger than declared, and sizes
 * over the limits, before libheif sees any of it. */
ic_status ic_heif_scan(const uint8_t *data, size_t size, const ic_limits *limits,
                       ic_result *result, ic_heif_layout *layout);
void ic_heif_scan_free(ic_heif_layout *layout);
/* The scan's entry for item id, NULL when it has none. */
const ic_heif_image *ic_heif_layout_image(const ic_heif_layout *layout, uint32_t id);
/* Whether an ICC profile's element chains and segmented curves are short enough to link
 * (icc_bounds.c); 0 to leave it unlinked. */
int ic_icc_bounded(const uint8_t *icc, size_t size);
/* The prefix-code groups libwebp builds tables for from a VP8L bitstream (webp_lossless.c),
 * and its main image's colour cache bits: the bitstream is read up to its entropy image. */
ic_status ic_vp8l_groups(const uint8_t *data, size_t size, const ic_control *control,
                         ic_result *result, uint32_t *groups, int *cache_bits);
/* HEIC and AVIF share libheif's decoder; only their brands differ. */
int ic_heic_sniff(const uint8_t *bytes, size_t size);
int ic_avif_sniff(const uint8_t *bytes, size_t size);

/*
 * Reads the image data of a non-interlaced 8-bit RGB or RGBA PNG whose first
 * IDAT chunk header (`idat_length` data bytes) libpng has just consumed, and
 * checks the chunks after it through IEND. See png_fast.c.
 */
ic_status ic_png_fast_rows(ic_stream *stream, uint32_t idat_length,
                           uint32_t width, uint32_t height, int channels,
                           ic_sink *sink, const ic_control *control,
                           ic_result *result);

/* Compressed image-data bytes a PNG may carry after its last row; past this, inflating
 * stops (the rows are complete) instead of running zlib to the end of the stream. A real
 * encoder leaves a few bytes (the final block and the Adler-32). */
#define IC_PNG_TAIL_ALLOWANCE (64 * 1024)

/* Fails `result` with IC_ERR_TOO_LARGE and a message naming the limit passed (a side or the
 * pixel count; a zero limit is none) when width x height is over one; IC_OK otherwise.
 * `subject`, when not NULL, starts the message ("HEIF item 3: its grid is "). */
ic_status ic_fail_over_limits(ic_result *result, const char *subject, uint32_t width,
                              uint32_t height, uint32_t max_width, uint32_t max_height,
                              uint64_t max_pixels);

/* Big-endian numbers, as containers, chunk headers and profiles write them. */
static inline uint32_t ic_be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | (uint32_t)p[1]; }
static inline uint32_t ic_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* A bit reader bounded by its `size` bytes: a read past them gives 0 bits and sets `over`,
 * which callers check once after a run of reads. `at` counts bits. Least significant bit
 * first (VP8L, JPEG XL), or with msb_first most significant first (HEVC's and AV1's headers). */
typedef struct ic_bits {
  const uint8_t *data;
  size_t size, at;
  int over;
} ic_bits;
static inline uint32_t ic_bits_read(ic_bits *b, int n, int msb_first) {
  uint32_t value = 0;
  for (int i = 0; i < n; i++, b->at++) {
    if (b->at / 8 >= b->size) {
      b->over = 1;
      return 0;
    }
    unsigned shift = msb_first ? 7 - b->at % 8 : b->at % 8;
    uint32_t bit = (uint32_t)(b->data[b->at / 8] >> shift) & 1;
    value = msb_first ? value << 1 | bit : value | bit << i;
  }
  return value;
}

/* Checks header dimensions against the limits; IC_ERR_TOO_LARGE if over. */
ic_status ic_check_limits(uint32_t width, uint32_t height,
                          const ic_limits *limits, ic_result *result);

/* Reads the Orientation tag (1...8) from a TIFF/EXIF block; 1 if absent. */
int ic_exif_orientation(const uint8_t *tiff, size_t size);
/* Finds the JPEG thumbnail IFD1 of a TIFF/EXIF block points at: 1 with its offset and length
 * inside the block (starting with a JPEG SOI), 0 when there is none. */
int ic_exif_thumbnail(const uint8_t *tiff, size_t size, size_t *offset, size_t *length);

/* Output geometry in the stored (pre-orientation) frame. */
typedef struct ic_plan {
  /* The resampled size, in the stored frame. */
  uint32_t out_width;
  uint32_t out_height;
  /* Source region, in full-resolution stored pixels, mapped to the output. */
  double crop_x;
  double crop_y;
  double crop_width;
  double crop_height;
  /* What turns the resampled picture upright: the EXIF orientation, then the request's
   * rotation and mirroring, as one orientation code (1...8). */
  int orientation;
  /* With a smart crop: the upright resample is larger than the result along one side, and
   * a window_width x window_height part of it is chosen by saliency (ic_smart_window). */
  int smart;
  uint32_t window_width;
  uint32_t window_height;
  /* The final picture: the window placed at (place_x, place_y) on a canvas (the window
   * itself when nothing is extended or padded). */
  uint32_t canvas_width;
  uint32_t canvas_height;
  uint32_t place_x;
  uint32_t place_y;
} ic_plan;

/* Plans the resample (source region, output size, orientation) and the canvas. */
ic_status ic_plan_make(uint32_t width, uint32_t height, int orientation,
                       const ic_request *request, ic_plan *plan,
                       ic_result *result);

/* Sets the canvas from the window (after a preview has shrunk the output): extending and
 * padding, as the request asks. */
void ic_plan_canvas(ic_plan *plan, const ic_request *request);

/* An offset in pixels along an axis of `outer` pixels: as given from 1 either way, a fraction
 * of `outer` below (imgproxy's relative offsets). */
double ic_offset_pixels(double offset, double outer);

/* Where, along an axis of `outer` pixels, a part of `inner` pixels starts under `anchor`
 * (horizontal when `vertical` is zero), kept inside. */
double ic_anchor_place(const ic_anchor *anchor, int vertical, double outer, double inner);

/* The window of the upright picture (pixels, width x height, channels) with the most
 * detail, saturation and skin tone, of the plan's window size: its origin. */
void ic_smart_window(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                     uint32_t window_width, uint32_t window_height, uint32_t *x, uint32_t *y);

/* The final picture from the upright resample (width pixels a row): its window at
 * (from_x, from_y), placed on the plan's canvas, with the geometry's background. The
 * channels it has (3 with a background, 4 when transparent pixels were added, else the
 * input's) go to out_channels. NULL when out of memory. */
uint8_t *ic_canvas(const uint8_t *pixels, uint32_t width, int channels, uint32_t from_x,
                   uint32_t from_y, const ic_plan *plan, const ic_geometry *geometry,
                   int *out_channels);

/* CIE Lab (D65) of an 8-bit sRGB pixel (effects.c, which sharpens in it). */
void ic_srgb_to_lab(const uint8_t *pixel, float *lab);

/* Applies the effects to an upright picture in place (straight alpha kept straight: colour
 * is weighted by alpha). Bounded: each row checks `control`, and the working rows of a
 * blur are refused past 64 MiB. */
ic_status ic_apply_effects(uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                           const ic_effects *effects, const ic_control *control,
                           ic_result *result);

/* Lays the watermark over the picture in place (scaled with the resampler when asked). IC_OK,
 * or IC_ERR_NO_MEMORY. */
ic_status ic_apply_watermark(uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                             const ic_watermark *watermark, ic_filter filter,
                             ic_result *result);

/* What is left of an upright picture when its borders of one colour are cut (trim.c): the
 * rectangle (x, y, width, height); all of it when nothing, or everything, would be cut. */
void ic_trim_box(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                 const ic_geometry *geometry, uint32_t *x, uint32_t *y, uint32_t *out_width,
                 uint32_t *out_height);

/* A decoder over a rectangle of pixels in memory (`stride` pixels a row), upright, without a
 * profile: what the second stage of a trim reads. The pixels must outlive it. */
ic_decoder *ic_memory_decoder(const uint8_t *pixels, uint32_t stride, int channels, uint32_t x,
                              uint32_t y, uint32_t width, uint32_t height, ic_result *result);

/* After orientation: the smart crop's window (chosen once: with *smart_chosen set, the one
 * at *smart_x, *smart_y), filters, the canvas and the watermark, in place of *pixels. */
ic_status ic_finish_upright(uint8_t **pixels, uint32_t *width, uint32_t *height, int *channels,
                            ic_plan *plan, const ic_request *request,
                            const ic_control *control, int *smart_chosen, uint32_t *smart_x,
                            uint32_t *smart_y, ic_result *result);

/* Whether the request asks for animated output: more than one frame, as WebP or GIF. */
int ic_animates(const ic_request *request);

/* An animated GIF or WebP (`bytes`, of `format`) to an animated WebP or GIF, as the request
 * asks (animation.c), or IC_ERR_UNSUPPORTED, with nothing done, when it has one frame. */
ic_status ic_animate(const uint8_t *bytes, size_t size, ic_format format,
                     const ic_request *request, const ic_limits *limits,
                     const ic_control *control, ic_result *result);

/* Streaming two-stage resampler: integer box shrink, then a kernel. */
typedef struct ic_resizer ic_resizer;

ic_resizer *ic_resizer_create(uint32_t in_width, uint32_t in_height,
                              int channels, double crop_x, double crop_y,
                              double crop_width, double crop_height,
                              uint32_t out_width, uint32_t out_height,
                              ic_filter filter);
/* Bytes ic_resizer_create allocates for these arguments, worked out without building it. */
size_t ic_resizer_memory(uint32_t in_width, uint32_t in_height, int channels,
                         double crop_width, double crop_height, uint32_t out_width,
                         uint32_t out_height, ic_filter filter);
void ic_resizer_push_row(ic_resizer *resizer, const uint8_t *row);
/* Hands over the out_width x out_height straight-alpha result (malloc'd). */
uint8_t *ic_resizer_finish(ic_resizer *resizer);
void ic_resizer_destroy(ic_resizer *resizer);

/* Returns a new buffer holding the image turned upright. */
uint8_t *ic_orient(const uint8_t *pixels, uint32_t width, uint32_t height,
                   int channels, int orientation, uint32_t *out_width,
                   uint32_t *out_height);

/* True when any alpha sample is below 255. */
int ic_has_transparency(const uint8_t *pixels, size_t pixel_count,
                        int channels);

/* An encoder of the table (codecs.c): RGB or straight RGBA in, malloc'd bytes out. */
typedef ic_status (*ic_encode_fn)(const uint8_t *pixels, uint32_t width, uint32_t height,
                                  int channels, const ic_encode_options *options,
                                  uint8_t **out, size_t *out_size, ic_result *result);
#define IC_DECLARE_ENCODER(name)                                                         \
  ic_status ic_encode_##name(const uint8_t *pixels, uint32_t width, uint32_t height,     \
                             int channels, const ic_encode_options *options,            \
                             uint8_t **out, size_t *out_size, ic_result *result)
IC_DECLARE_ENCODER(jpeg);
IC_DECLARE_ENCODER(png);
IC_DECLARE_ENCODER(webp);
IC_DECLARE_ENCODER(avif);
IC_DECLARE_ENCODER(gif);

/* GIF frames one at a time (gif_encode.c): a still (animated 0) or an animation played
 * `plays` times (0: for ever), every frame width x height, RGB or straight RGBA. */
typedef struct ic_gif_writer ic_gif_writer;
ic_gif_writer *ic_gif_writer_create(uint32_t width, uint32_t height, int animated, int plays,
                                    ic_result *result);
ic_status ic_gif_writer_add(ic_gif_writer *writer, const uint8_t *pixels, int channels,
                            int delay_ms, ic_result *result);
/* Hands over the file (malloc'd); the writer is then only to be destroyed. */
ic_status ic_gif_writer_finish(ic_gif_writer *writer, uint8_t **out, size_t *out_size,
                               ic_result *result);
void ic_gif_writer_destroy(ic_gif_writer *writer);

/* Encodes with the table's encoder for format (IC_ERR_INVALID_ARGUMENT when none). */
ic_status ic_encode_as(ic_format format, const uint8_t *pixels, uint32_t width,
                       uint32_t height, int channels, const ic_encode_options *options,
                       uint8_t **out, size_t *out_size, ic_result *result);

/* Whether an output format keeps alpha (JPEG does not). */
int ic_format_keeps_alpha(ic_format format);

/* What encoding a width x height result holds beyond the output buffer (codecs.c's table). */
uint64_t ic_encoder_memory(ic_format format, uint32_t width, uint32_t height);

/* The encoder's pending first-use growth (ic_first_use), 0 when it has run or has none. */
uint64_t ic_encoder_first_use(ic_format format);

/*
 * A cached colour transform into sRGB (colour.c): built once per profile and pixel layout,
 * shared by every decode that needs it, safe to use from many threads at once.
 */
typedef struct ic_colour_transform ic_colour_transform;

/*
 * The transform that takes RGB (channels 3) or straight RGBA (4) rows of this source into
 * sRGB, or NULL when none is needed or the profile is unusable; *outcome says which.
 * Release a transform with ic_colour_release.
 */
ic_colour_transform *ic_colour_acquire(const ic_colour_info *info, int channels,
                                       ic_profile_outcome *outcome);
/* Converts width pixels of a row in place. */
void ic_colour_apply(const ic_colour_transform *transform, uint8_t *row, uint32_t width);
void ic_colour_release(ic_colour_transform *transform);

/*
 * The CMYK row converter of a CMYK JPEG: its own profile, else the standard one; NULL for
 * the fixed formula. inverted: Adobe's convention, 0 for full ink. *outcome is
 * IC_PROFILE_CONVERTED, or IC_PROFILE_STANDARD_CMYK with the damage of its own profile, if
 * any, left in info->damage.
 */
ic_colour_transform *ic_colour_acquire_cmyk(const ic_colour_info *info, int inverted,
                                            ic_profile_outcome *outcome, int *cached);
/*
 * The colour step of one decode. Begun when the decoder's first row is due (it knows the
 * row layout then): with IC_COLOUR_KEEP and a usable RGB profile the pixels stay and the
 * profile moves to `kept` (malloc'd, the caller's to free); otherwise a transform to sRGB,
 * run on the small result after resampling (finish), or on every decoded row first (row)
 * when the transform bends too much for averaging to come before it. Records the outcome
 * on the result. CMYK sources were converted by their decoder, which recorded its own.
 */
typedef struct ic_colour_step {
  ic_colour_transform *transform;
  int channels;
  uint8_t *row;
  uint8_t *kept;
  size_t kept_size;
} ic_colour_step;

ic_status ic_colour_step_begin(ic_colour_step *step, ic_colour_info *info, ic_colour_mode mode,
                               uint32_t width, int channels, ic_result *result);
/* The row converted (a buffer of the step's) when the step converts early; else row. */
const uint8_t *ic_colour_step_row(ic_colour_step *step, const uint8_t *row, uint32_t width);
/* Converts the resampled result in place, unless the rows were converted already. */
void ic_colour_step_finish(ic_colour_step *step, uint8_t *pixels, uint32_t width,
                           uint32_t height);
/* Releases the transform and the row (not `kept`). */
void ic_colour_step_end(ic_colour_step *step);

/* A whole bitmap to sRGB, in place (the full-resolution reference). */
void ic_colour_convert(ic_colour_info *info, uint8_t *pixels, uint32_t width, uint32_t height,
                       int channels, ic_result *result);

/* Converts width CMYK pixels into RGB (3 bytes a pixel) in dst. */
void ic_colour_cmyk_row(const ic_colour_transform *transform, const uint8_t *cmyk,
                        uint8_t *rgb, uint32_t width);

/* Premultiplied RGBA (what some libraries deliver) back to straight alpha, in place. */
void ic_unpremultiply_row(uint8_t *rgba, uint32_t width);

#endif /* CIMAGECODECS_INTERNAL_H */
