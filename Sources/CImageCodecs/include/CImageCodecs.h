/*
 * CImageCodecs: the one header Swift sees.
 *
 * Decoding (libjpeg-turbo, libpng, libwebp, giflib, libheif, libtiff, libjxl; BMP, ICO and
 * camera RAW previews with readers of our own), streaming resampling, EXIF orientation and
 * encoding (libjpeg-turbo, libpng, libwebp, libavif, giflib) live behind this interface;
 * codecs.c's tables list them. It includes none of those libraries' headers: every error is
 * caught inside C (libjpeg/libpng with setjmp/longjmp) and comes back here as a status code
 * plus a message.
 */
#ifndef CIMAGECODECS_H
#define CIMAGECODECS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Outcome of a codec call. IC_OK is zero; everything else is an error. */
typedef enum ic_status {
  IC_OK = 0,
  /** The bytes are no format the codecs read (sniffed from magic bytes). */
  IC_ERR_UNSUPPORTED = 1,
  /** The decoder rejected the data (bad markers, CRC, zlib, tables...). */
  IC_ERR_CORRUPT = 2,
  /** The data ends before the image does. */
  IC_ERR_TRUNCATED = 3,
  /** The header declares more pixels or a longer side than the limits allow. */
  IC_ERR_TOO_LARGE = 4,
  /** The cancellation flag was raised while decoding. */
  IC_ERR_CANCELLED = 5,
  /** An allocation failed or the decoder memory budget was exceeded. */
  IC_ERR_NO_MEMORY = 6,
  /** The source file could not be opened or read. */
  IC_ERR_IO = 7,
  /** The request itself is invalid (zero box, bad quality...). */
  IC_ERR_INVALID_ARGUMENT = 8,
  /** Encoding the thumbnail failed. */
  IC_ERR_ENCODE = 9,
  /** The decode passed its deadline (decode_timeout_ms). */
  IC_ERR_TIMEOUT = 10,
  /** The image would cost more work than the limits allow (too many scans). */
  IC_ERR_TOO_COMPLEX = 11
} ic_status;

/** Formats the codecs know. Every one is read; JPEG, PNG, WebP and AVIF are also written. */
typedef enum ic_format {
  IC_FORMAT_UNKNOWN = 0,
  IC_FORMAT_JPEG = 1,
  IC_FORMAT_PNG = 2,
  IC_FORMAT_WEBP = 3,
  IC_FORMAT_GIF = 4,
  /** HEIF with HEVC-coded images (what phones write). */
  IC_FORMAT_HEIC = 5,
  /** HEIF with AV1-coded images. */
  IC_FORMAT_AVIF = 6,
  /** Windows and OS/2 bitmaps. */
  IC_FORMAT_BMP = 7,
  /** Windows icons and cursors (ICO, CUR): the entry nearest the output size. */
  IC_FORMAT_ICO = 8,
  /** TIFF: the first page, or its smallest reduced-resolution level covering the output. */
  IC_FORMAT_TIFF = 9,
  /** Camera RAW (CR2, CR3, CRW, NEF, ARW, DNG, ORF, RW2, PEF, RAF...): its embedded JPEG
   *  preview, never a demosaic. */
  IC_FORMAT_RAW = 10,
  /** JPEG XL (libjxl, opened at run time): the first frame. */
  IC_FORMAT_JXL = 11
} ic_format;

/** How the source is mapped into the target box. */
typedef enum ic_fit {
  /** Inside the box, aspect kept. */
  IC_FIT_CONTAIN = 0,
  /** Fills the box, aspect kept, centre cropped. */
  IC_FIT_COVER = 1,
  /** Exactly the box, aspect ignored. */
  IC_FIT_FILL = 2,
  /** COVER when the displayed source and the box have the same orientation (both
   * landscape, or both portrait or square), else CONTAIN: imgproxy's `rt:auto`. */
  IC_FIT_AUTO = 3
} ic_fit;

/** The largest crop side, offset, padding or canvas side a request may ask for. */
#define IC_MAX_GEOMETRY 65535u

/** Where a window sits in what it is cut from, or a picture in a larger canvas: an edge or
 * corner (imgproxy's compass), the centre, a focus point, or, for crops, the most salient
 * part. */
typedef enum ic_gravity {
  IC_GRAVITY_CENTRE = 0,
  IC_GRAVITY_NORTH = 1,
  IC_GRAVITY_SOUTH = 2,
  IC_GRAVITY_EAST = 3,
  IC_GRAVITY_WEST = 4,
  IC_GRAVITY_NORTH_EAST = 5,
  IC_GRAVITY_NORTH_WEST = 6,
  IC_GRAVITY_SOUTH_EAST = 7,
  IC_GRAVITY_SOUTH_WEST = 8,
  /** Centred on (focus_x, focus_y), fractions of the width and height, moved no further
   * than the edges. */
  IC_GRAVITY_FOCUS = 9,
  /** The window holding the most detail, saturation and skin tone (a cover crop only;
   * elsewhere it is the centre). */
  IC_GRAVITY_SMART = 10
} ic_gravity;

/** A gravity with its arguments. Offsets move the window away from the edges it is
 * anchored to (both ways from the centre), in the pixels of what is being cut or filled. */
typedef struct ic_anchor {
  ic_gravity type;
  double focus_x;
  double focus_y;
  double offset_x;
  double offset_y;
} ic_anchor;

/** Geometry around the resize, all in displayed (upright) terms. Zeroed (ic_request_init):
 * none of it. */
typedef struct ic_geometry {
  /** Where a cover (or auto) crop's window sits. */
  ic_anchor gravity;
  /** A crop of the displayed source before resizing, in source pixels, or fractions of
   * the side below 1; 0 keeps that side whole. */
  double crop_width;
  double crop_height;
  /** Where that crop sits (offsets in source pixels). */
  ic_anchor crop_gravity;
  /** Clockwise rotation after the EXIF orientation: 0, 90, 180 or 270. */
  int rotate;
  /** Mirroring after the rotation. */
  int flip_horizontal;
  int flip_vertical;
  /** When nonzero, a result smaller than the box is placed on a canvas of the box's size
   * (a side of 0 stays the result's), by extend_gravity. */
  int extend;
  ic_anchor extend_gravity;
  /** Output pixels added around the result, after extending. */
  uint32_t pad_top;
  uint32_t pad_right;
  uint32_t pad_bottom;
  uint32_t pad_left;
  /** When nonzero, added pixels are `background` and a result with alpha is flattened
   * onto it; else added pixels are transparent. */
  int has_background;
  uint8_t background[3];
  /** When nonzero, borders of one colour are cut first (imgproxy's `t`), decided on a small
   * upright resample; the rest of the request (crop included) applies to what is left. */
  int trim;
  /** How far (0...255, on any channel) a pixel may be from the colour and be border. */
  double trim_threshold;
  /** The border colour; without it, the top-left pixel's. */
  int trim_has_colour;
  uint8_t trim_colour[3];
  /** Cut as much from the right as from the left, from the bottom as from the top. */
  int trim_equal_horizontal;
  int trim_equal_vertical;
} ic_geometry;

/** Requested output encoding: a writable ic_format, or AUTO (PNG when the result has
 * alpha, JPEG otherwise). */
typedef enum ic_output_format {
  IC_OUTPUT_AUTO = 0,
  IC_OUTPUT_JPEG = IC_FORMAT_JPEG,
  IC_OUTPUT_PNG = IC_FORMAT_PNG,
  IC_OUTPUT_WEBP = IC_FORMAT_WEBP,
  IC_OUTPUT_AVIF = IC_FORMAT_AVIF,
  IC_OUTPUT_GIF = IC_FORMAT_GIF
} ic_output_format;

/** Resampling kernel for the final, exact-size reduction. */
typedef enum ic_filter {
  IC_FILTER_LANCZOS3 = 0,
  IC_FILTER_CATMULL_ROM = 1,
  /** Exact area averaging (box with fractional coverage). */
  IC_FILTER_AREA = 2,
  /** The default: 0.65 of Lanczos-3 plus 0.35 of an exact area average (linear
   * interpolation when enlarging). Scores above vipsthumbnail against a Lanczos-3
   * reference and above Catmull-Rom against an area reference (docs/BENCHMARKS.md). */
  IC_FILTER_LANCZOS3_AREA = 3
} ic_filter;

/** What happens to a source's colour profile. */
typedef enum ic_colour_mode {
  /** Converted to sRGB through the embedded profile (the default); output untagged. */
  IC_COLOUR_SRGB = 0,
  /** Pixels left as they are and an RGB profile copied into the output. Grey and CMYK
   * profiles still convert (an RGB output cannot carry them). */
  IC_COLOUR_KEEP = 1
} ic_colour_mode;

/** What the colour step did with the source's profile (for metrics). */
typedef enum ic_profile_outcome {
  /** No profile, or one that says sRGB (PNG sRGB chunk, gAMA 1/2.2): taken as sRGB. */
  IC_PROFILE_NONE = 0,
  /** Converted to sRGB through the embedded profile. */
  IC_PROFILE_CONVERTED = 1,
  /** Copied into the output unchanged (IC_COLOUR_KEEP). */
  IC_PROFILE_KEPT = 2,
  /** Present but damaged (bad chunks, truncated, unreadable by lcms2): ignored. */
  IC_PROFILE_BROKEN = 3,
  /** Larger than max_profile_bytes: ignored, its bytes never buffered past the cap. */
  IC_PROFILE_OVERSIZED = 4,
  /** Readable but not linkable to sRGB (wrong colour space for the image, lcms2 refused
   * or ran past its memory cap): ignored. */
  IC_PROFILE_UNLINKABLE = 5,
  /** An untagged (or broken-profile) CMYK JPEG converted through the standard CMYK
   * profile (ic_colour_set_cmyk_profile), or by formula when none is set. */
  IC_PROFILE_STANDARD_CMYK = 6
} ic_profile_outcome;

/** Where the encoded source bytes come from: memory, or a file path. */
typedef struct ic_source {
  /** In-memory bytes; used when path is NULL. Must outlive the call. */
  const uint8_t *data;
  size_t size;
  /** A file to stream from; when set, data is ignored. */
  const char *path;
  /** With path NULL and fd >= 0: an open file to stream from, from its start. It is
   * duplicated, so the caller keeps (and closes) its own; -1 for none. Opening once and
   * checking what was opened (a regular file, not a FIFO) leaves no race with the path. */
  int fd;
} ic_source;

/** Guards checked against the header before any pixel work. */
typedef struct ic_limits {
  uint32_t max_width;
  uint32_t max_height;
  uint64_t max_pixels;
  /** Cap on libjpeg's working memory (progressive coefficient buffers). */
  uint64_t max_decoder_memory;
  /** When non-zero, damaged or truncated JPEGs yield libjpeg's padded image. */
  int accept_damaged;
  /** When non-zero, every PNG row goes through libpng (no fast IDAT path). */
  int disable_png_fast_path;
  /** When non-zero, a progressive JPEG at 1/8 goes through libjpeg's whole-image decode
   * instead of its DC scans alone (for comparisons). */
  int disable_progressive_dc;
  /** When non-zero, HEIC and AVIF rows come from libheif's own interleaved 8-bit conversion
   * instead of its planar RGB (for comparisons). */
  int heif_interleaved;
  /** When non-zero, HEIC goes through libheif's own HEVC decoder (libde265) instead of
   * FFmpeg's (for comparisons). */
  int hevc_libde265;
  /** Milliseconds a decode may take, wall clock, from header to last row; 0 for none. */
  uint32_t decode_timeout_ms;
  /** Most scans a JPEG may have (real encoders write about 10); 0 for none. */
  uint32_t max_scans;
  /** Blocks a JPEG's scans may decode in all, in whole-image passes (a progressive file
   * from jpegtran or mozjpeg needs 5-6); 0 for none. */
  uint32_t max_scan_passes;
  /** Largest embedded colour profile read; larger ones are ignored (IC_PROFILE_OVERSIZED). */
  uint32_t max_profile_bytes;
  /** Threads one decode may use: a sequential JPEG with restart markers is decoded in this
   * many bands at once (at most 16), each on a thread of its own; 0 for as many as there are
   * cores no other decode is using; 1 for one piece on the calling thread. */
  uint32_t threads_per_decode;
} ic_limits;

/** The largest blur or sharpen sigma a request may ask for, in output pixels. */
#define IC_MAX_SIGMA 100.0

/** Filters on the result: after the crop and orientation, before extending and padding.
 * Zeroed (ic_request_init): none. */
typedef struct ic_effects {
  /** A gaussian blur's sigma, in output pixels; 0 for none. Its kernel stops where the
   * gaussian falls below 0.2 of its peak, as libvips' gaussblur does. */
  double blur_sigma;
  /** Sharpening's sigma: an unsharp mask on lightness through libvips' sharpen curve (flat
   * below 2 L*, slope 3 above, at most +10 and -20 L*); 0 for none. */
  double sharpen_sigma;
  /** Blocks of this many output pixels a side, each its average; 0 or 1 for none. */
  uint32_t pixelate;
} ic_effects;

/** A picture laid over the result last (after padding): imgproxy's `wm`. Zeroed: none. */
typedef struct ic_watermark {
  /** Premultiplied RGBA, width x height; NULL for none. Must outlive the call. */
  const uint8_t *pixels;
  uint32_t width;
  uint32_t height;
  /** 0...1: how much of it shows. */
  double opacity;
  /** Where it sits (offsets in output pixels); with replicate, tiled from the top left with
   * the offsets as the gaps between tiles. */
  ic_anchor position;
  int replicate;
  /** Its width as a fraction of the result's (0: its own size); never larger than the
   * result, aspect kept. */
  double scale;
} ic_watermark;

/** What thumbnail to make. The box is in output pixels (scale applied). */
typedef struct ic_request {
  /** Target box; 0 on one side leaves that side unconstrained. */
  uint32_t width;
  uint32_t height;
  ic_fit fit;
  /** When zero the output is never larger than the (oriented) source. */
  int allow_upscale;
  ic_output_format format;
  /** Quality of the lossy formats (JPEG, WebP, AVIF), 1...100. */
  int quality;
  /** zlib level for PNG output, 0...9. */
  int png_level;
  ic_filter filter;
  /** When zero, the decoder delivers the full size: no JPEG DCT scaling, no WebP scaled
   * decoding, no HEIF embedded thumbnail. */
  int shrink_on_load;
  /** AVIF encoder speed, 0 (slowest, smallest) ... 9 (fastest). */
  int avif_speed;
  /** What to do with the source's colour profile. */
  ic_colour_mode colour;
  /** When nonzero, the result also carries a summary: the output averaged down to at most
   * IC_SUMMARY_SIDE a side, RGBA, for placeholders (ThumbHash, a dominant colour). */
  int summary;
  /** When nonzero, the thumbnail is a preview, made from the cheapest early picture the
   * bytes carry instead of the image itself: a JPEG's EXIF thumbnail (when it has the image's
   * shape), else a progressive JPEG's first DC scans (the bytes may end anywhere after them:
   * see ic_preview_prefix), or a HEIC's or AVIF's embedded thumbnail. Never larger than that
   * picture; the plan, orientation and source size are the image's own.
   * IC_ERR_UNSUPPORTED when the bytes carry none. */
  int preview;
  /** Crop, gravity, rotation, mirroring, extending, padding and background. */
  ic_geometry geometry;
  /** Blur, sharpening and pixelation. */
  ic_effects effects;
  /** A watermark. */
  ic_watermark watermark;
  /** With WebP output: an animated GIF or WebP keeps up to this many frames, as an animated
   * WebP; 0 or 1 for its first frame alone (a still). */
  uint32_t max_frames;
} ic_request;

/** What the first bytes of a download offer a preview (ic_preview_prefix). */
typedef enum ic_prefix_verdict {
  /** Not yet: ask again when more bytes have arrived. */
  IC_PREFIX_MORE = 0,
  /** A preview (ic_request.preview) can be made from the first ready_size bytes. */
  IC_PREFIX_READY = 1,
  /** None before the whole file: another format, a baseline JPEG without a usable EXIF
   * thumbnail, or bytes the scan does not follow. */
  IC_PREFIX_NONE = 2
} ic_prefix_verdict;

/** A scan of a download's first bytes, resumed as more arrive. Zero it to start; the
 * fields after ready_size are the scanner's own. */
typedef struct ic_prefix_scan {
  ic_prefix_verdict verdict;
  size_t ready_size;
  size_t offset;
  ic_format format;
  int in_entropy;
  int progressive;
  int components;
  uint8_t ids[4];
  uint8_t scan_ids[4];
  int scan_components;
  int dc_first_scan;
  uint32_t dc_done;
  uint32_t width, height;
  int thumbnail;
  uint32_t thumbnail_width, thumbnail_height;
} ic_prefix_scan;

/**
 * Looks at the first `size` bytes of a download (the same bytes as on the last call, and
 * more) for the point where a preview can be made: a JPEG's first scan header when its EXIF
 * thumbnail has the image's shape, else the marker after the DC scans of a progressive JPEG.
 * Each byte is looked at once over all calls. Other formats give IC_PREFIX_NONE: their
 * previews (a HEIF's thumbnail) need the whole file.
 */
ic_prefix_verdict ic_preview_prefix(const uint8_t *bytes, size_t size, ic_prefix_scan *scan);

/** The longest side of a result's summary. */
#define IC_SUMMARY_SIDE 32

/** What happened, and the encoded thumbnail when status is IC_OK. */
typedef struct ic_result {
  ic_status status;
  char message[200];
  ic_format source_format;
  /** Stored (pre-orientation) dimensions from the header. */
  uint32_t source_width;
  uint32_t source_height;
  /** EXIF orientation applied, 1...8. */
  int orientation;
  /** Number of decoder warnings, harmless ones included. */
  uint32_t warnings;
  /** Warnings that mean damaged pixels (accepted only with accept_damaged). */
  uint32_t damage_warnings;
  /** Monotonic nanoseconds spent decoding and resampling, and encoding. */
  uint64_t decode_ns;
  uint64_t encode_ns;
  /** Encoded output; free with ic_result_free. */
  uint8_t *data;
  size_t size;
  ic_format format;
  uint32_t width;
  uint32_t height;
  int has_alpha;
  /** 1 when a progressive JPEG was decoded from its DC scans alone. */
  int dc_only;
  /** Bands a JPEG with restart markers was decoded in at once, on as many threads; 0 when it
   * was decoded in one piece. */
  uint32_t jpeg_bands;
  /** With bands: the largest band's share of the decode's estimated work, in thousandths
   * (the bands are cut to about equal work, 1000 / jpeg_bands each). */
  uint32_t jpeg_band_share;
  /** What the colour step did with the source's profile. */
  ic_profile_outcome profile;
  /** 1 when the profile's transform came from the cache (not parsed and linked again). */
  int transform_cached;
  /** With ic_request.summary: the upright output averaged down to summary_width x
   * summary_height (each at most IC_SUMMARY_SIDE), straight RGBA; freed by ic_result_free. */
  uint8_t *summary;
  uint32_t summary_width;
  uint32_t summary_height;
  /** Frames written: more than 1 for an animated output, else 1 (0 before encoding). */
  uint32_t frames;
} ic_result;

/** Fills result->summary (as ic_request.summary does) from an upright bitmap of 3 or 4
 * channels: the same box filter, for pictures that come from elsewhere (a cached thumbnail
 * decoded again). IC_OK or IC_ERR_NO_MEMORY. */
ic_status ic_summarize(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                       ic_result *result);

/** The size ic_thumbnail gives a source of stored size width x height with EXIF
 * `orientation` (1...8) for `request`, upright, without decoding: what a placeholder says the
 * final image will be. IC_OK, or IC_ERR_INVALID_ARGUMENT for an empty box. */
ic_status ic_output_size(uint32_t width, uint32_t height, int orientation,
                         const ic_request *request, uint32_t *out_width, uint32_t *out_height);

/** A decoded bitmap: 8-bit RGB (3 channels) or straight RGBA (4). */
typedef struct ic_bitmap {
  uint8_t *pixels;
  uint32_t width;
  uint32_t height;
  int channels;
} ic_bitmap;

/** Fills defaults: 65535 px a side, 100 MP, 512 MiB decoder memory, strict, 10 s a
 * decode, 64 scans, 16 passes of scan work, 4 MiB of colour profile. */
void ic_limits_init(ic_limits *limits);

/** AVIF encoder speed when a request does not say (docs/BENCHMARKS.md, "Encoding"). */
#define IC_AVIF_DEFAULT_SPEED 8

/** Fills defaults: contain, auto format, quality 80, Lanczos-3 + area, shrink-on-load, sRGB. */
void ic_request_init(ic_request *request);

/** Identifies a readable format from the first bytes (32 are enough). */
ic_format ic_sniff(const uint8_t *bytes, size_t size);

/** The format's display name ("JPEG", "WebP"...), from the codec table. */
const char *ic_format_name(ic_format format);

/** What the codec table's row says of a format it reads: each format carries its own traits
 * there, and Swift reads them from here. */
typedef struct ic_format_info {
  /** The display name ("JPEG", "WebP"...). */
  const char *name;
  /** The media type a desktop names it by ("image/jpeg"). */
  const char *media_type;
  /** File name extensions, lower case, space-separated, the usual one first. */
  const char *extensions;
} ic_format_info;

/** Fills `info` from the row of `format` and returns 1, or zeroes it and returns 0 when no
 * decoder reads the format. */
int ic_format_info_of(ic_format format, ic_format_info *info);

/** Whether the codecs can write this format. */
int ic_format_encodable(ic_format format);

/** The first bytes a gzip stream's `size` bytes (a file's head) inflate to, at most
 * `capacity` into `out`: how many, 0 when they are not gzip. For sniffing what a compressed
 * file holds (a compressed SVG); the work is bounded by `size` and `capacity`. */
size_t ic_gunzip_head(const uint8_t *data, size_t size, uint8_t *out, size_t capacity);

/** The HEVC decoder HEIC images go through: "ffmpeg" when libavcodec loads (on this first
 * call, if no HEIC has loaded it yet), else "libde265", libheif's own. */
const char *ic_hevc_decoder(void);

/**
 * Decodes, resizes, orients and encodes one image.
 * cancel_flag may be NULL; when it becomes non-zero the decode stops within a
 * few rows with IC_ERR_CANCELLED. Returns result->status.
 */
ic_status ic_thumbnail(const ic_source *source, const ic_request *request,
                       const ic_limits *limits, const int32_t *cancel_flag,
                       ic_result *result);

/** What making a thumbnail is expected to cost in memory, from the source's header alone. */
typedef struct ic_estimate {
  /** Peak bytes the decode, the resampling and the encoding hold together. */
  uint64_t bytes;
  /** Bytes the process itself keeps from this decoder's or encoder's first run (the code of a
   * library opened on first use), while no such run has ended in this process; then 0. */
  uint64_t first_use;
  /** The size the decoder delivers (after DCT scaling), and the stored size. */
  uint32_t decode_width;
  uint32_t decode_height;
  uint32_t source_width;
  uint32_t source_height;
} ic_estimate;

/**
 * Reads the header and plans the thumbnail as ic_thumbnail would, without decoding: the
 * working memory it will need (coefficient buffers of progressive JPEGs, the whole image of
 * Adam7 PNGs, rows, the resampler, the output). Header errors and limits are reported as
 * ic_thumbnail reports them.
 */
ic_status ic_estimate_thumbnail(const ic_source *source, const ic_request *request,
                                const ic_limits *limits, ic_estimate *estimate,
                                ic_result *result);

/** Releases the encoded bytes of a result. Safe to call twice. */
void ic_result_free(ic_result *result);

/**
 * Decodes at full resolution, orientation applied, converted to sRGB through the source's
 * profile at full resolution, into an RGB or RGBA bitmap. For references and tests: it holds
 * the whole image in memory.
 */
ic_status ic_decode_full(const ic_source *source, const ic_limits *limits,
                         ic_bitmap *bitmap, ic_result *info);

/**
 * Like ic_decode_full, at the smallest size the decoder offers (JPEG DCT scaling) that is
 * at least min_width x min_height in the stored frame. For references and tests.
 */
ic_status ic_decode_scaled(const ic_source *source, const ic_limits *limits,
                           uint32_t min_width, uint32_t min_height, ic_bitmap *bitmap,
                           ic_result *info);

/** How ic_encode writes a format; ic_encode_options_init fills the defaults. */
typedef struct ic_encode_options {
  /** 1...100, for the lossy formats (JPEG, WebP, AVIF). */
  int quality;
  /** zlib level 0...9, and Adam7 interlacing (for fixtures), for PNG. */
  int png_level;
  int png_interlaced;
  /** PNG: the pixels are a photograph (from a lossy source). Rows are Paeth-filtered and
   * run-length coded (zlib's Z_RLE) instead of the adaptive filters and LZ77 at png_level:
   * on photo thumbnails about 1.5x faster and no larger; graphics keep the default, which
   * finds their repeats. Ignored at png_level 0. */
  int png_photographic;
  /** AVIF encoder speed, 0 (slowest) ... 9. */
  int avif_speed;
  /** WebP: keep the colour under fully transparent pixels as given (libwebp otherwise
   * smooths it), and lossless (VP8L). For fixtures. */
  int webp_exact;
  int webp_lossless;
  /** JPEG: progressive (libjpeg's standard script: DC first), as web images often are. */
  int jpeg_progressive;
  /** AVIF: EXIF-style orientation 2...8 stored as HEIF irot and imir boxes (0 or 1: none). */
  int avif_orientation;
  /** An ICC profile to embed (IC_COLOUR_KEEP), or NULL. */
  const uint8_t *icc;
  size_t icc_size;
} ic_encode_options;

/** Fills defaults: quality 80, PNG level 6, AVIF at IC_AVIF_DEFAULT_SPEED, nothing else. */
void ic_encode_options_init(ic_encode_options *options);

/**
 * Encodes a bitmap (RGB or straight RGBA) as `format` under `options` (JPEG composites alpha
 * over white). The bytes land in result->data; free them with ic_result_free.
 */
ic_status ic_encode(const ic_bitmap *bitmap, ic_format format,
                    const ic_encode_options *options, ic_result *result);

/**
 * Sets the standard CMYK profile for CMYK JPEGs without a usable one of their own (copied;
 * NULL or a profile lcms2 cannot read restores the fixed formula). Returns 1 when the
 * profile was taken. Call at start-up; later thumbnails use it.
 */
int ic_colour_set_cmyk_profile(const uint8_t *icc, size_t size);

/** The colour transform cache, for metrics and tests. */
typedef struct ic_colour_stats {
  /** Transforms built (profiles parsed and linked), and requests served from the cache. */
  uint64_t builds;
  uint64_t hits;
  /** Transforms held now, and the bytes lcms2 (and our tables) hold for them. */
  uint32_t entries;
  uint64_t bytes;
  /** Transforms built that run as curve-and-matrix tables instead of through lcms2. */
  uint64_t tables;
} ic_colour_stats;

/** Reads the colour transform cache's counters. */
void ic_colour_stats_get(ic_colour_stats *stats);

/** Whether transforms that have tables use them (the default) or lcms2's transform, on the
 * calling thread only: off only to compare the two in tests. */
void ic_colour_set_tables(int enabled);

/** For tests: a function called at the start of every transform build (not for one served
 * from the cache), on the building thread; NULL for none. A test holds a build there to show
 * that decodes needing cached transforms do not wait for it. */
void ic_colour_set_build_gate(void (*gate)(void));

/** Releases a bitmap's pixels. Safe to call twice. */
void ic_bitmap_free(ic_bitmap *bitmap);

/** Sets a cancellation flag (atomically) so a running decode stops. */
void ic_cancel_flag_set(int32_t *flag, int32_t value);

/** Reads a cancellation flag atomically. */
int32_t ic_cancel_flag_get(const int32_t *flag);

#ifdef __cplusplus
}
#endif

#endif /* CIMAGECODECS_H */
