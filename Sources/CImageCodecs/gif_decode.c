/*
 * GIF decoding (giflib): the first frame composited on its logical screen, as a browser shows
 * it before the animation starts. Pixels outside the frame are transparent; the part of a
 * frame beyond the screen is clipped. Interlaced frames, transparency, local colour tables
 * and frames without any colour table (black) are handled.
 *
 * The screen size is checked against the limits before any pixel work (a 30-byte file can
 * declare 4 gigapixels), and the frame's against the pixel limit. Rows stream: only an
 * interlaced frame is buffered, since its rows arrive in four passes, and only its part on
 * the screen, one byte a pixel.
 */
#include "internal.h"

#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>

typedef struct gif_decoder {
  ic_decoder base;
  ic_stream *stream;
  GifFileType *gif;
  /* The first frame: its rectangle, in screen pixels (it may reach past the screen). */
  int left, top, width, height, interlaced;
  int transparent; /* palette index, or -1 */
  /* Palette as RGBA, 256 entries (indices past the colour table are black). */
  uint8_t palette[256][4];
} gif_decoder;

int ic_gif_sniff(const uint8_t *bytes, size_t size) {
  return size >= 6 &&
         (memcmp(bytes, "GIF87a", 6) == 0 || memcmp(bytes, "GIF89a", 6) == 0);
}

static int read_bytes(GifFileType *gif, GifByteType *out, int length) {
  gif_decoder *d = gif->UserData;
  if (length <= 0) return 0;
  return (int)ic_stream_read(d->stream, out, (size_t)length);
}

static ic_status fail_from_gif(int code, const char *what, ic_result *result) {
  const char *text = GifErrorString(code);
  ic_status status = IC_ERR_CORRUPT;
  if (code == D_GIF_ERR_READ_FAILED || code == D_GIF_ERR_EOF_TOO_SOON)
    status = IC_ERR_TRUNCATED;
  else if (code == D_GIF_ERR_NOT_ENOUGH_MEM)
    status = IC_ERR_NO_MEMORY;
  /* giflib returns GIF_ERROR without a code for a zero-sized or overflowing frame. */
  return ic_fail(result, status, "GIF %s: %s", what, text ? text : "invalid frame");
}

static void gif_choose_size(ic_decoder *base, uint32_t need_width, uint32_t need_height,
                            int allow_scaling, uint32_t *width, uint32_t *height) {
  (void)need_width;
  (void)need_height;
  (void)allow_scaling;
  *width = base->header.width;
  *height = base->header.height;
}

/* The part of the frame on the screen: frame rows [r0, r1) and columns [c0, c1), empty
 * when the frame lies wholly outside it. */
typedef struct visible_part {
  int r0, r1, c0, c1;
} visible_part;

static visible_part visible(const gif_decoder *d) {
  int64_t sw = d->base.header.width, sh = d->base.header.height;
  visible_part v;
  v.r0 = d->top < 0 ? -d->top : 0;
  v.c0 = d->left < 0 ? -d->left : 0;
  v.r1 = (int)(sh - d->top < d->height ? sh - d->top : d->height);
  v.c1 = (int)(sw - d->left < d->width ? sw - d->left : d->width);
  if (v.r1 < v.r0) v.r1 = v.r0;
  if (v.c1 < v.c0) v.c1 = v.c0;
  return v;
}

/* The visible columns of one frame row (indices[0] is column c0) onto a canvas row that
 * starts out transparent. */
static void compose_row(const gif_decoder *d, const visible_part *v,
                        const GifPixelType *indices, uint8_t *row, int channels) {
  for (int x = v->c0; x < v->c1; x++) {
    GifPixelType index = indices[x - v->c0];
    if (index == d->transparent) continue;
    memcpy(row + ((int64_t)d->left + x) * channels, d->palette[index], (size_t)channels);
  }
}

/* Reads frame rows up to and including row `last` (non-interlaced order). */
static ic_status read_rows_to(gif_decoder *d, int *next, int last, GifPixelType *line,
                              ic_result *result) {
  for (; *next <= last; (*next)++) {
    if (*next % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->base.control, result) != IC_OK)
      return result->status;
    if (DGifGetLine(d->gif, line, d->width) != GIF_OK)
      return fail_from_gif(d->gif->Error, "frame", result);
  }
  return IC_OK;
}

/* An interlaced frame's visible part, gathered from its four passes. */
static ic_status read_interlaced(gif_decoder *d, const visible_part *v, GifPixelType *line,
                                 GifPixelType *frame, ic_result *result) {
  static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
  size_t columns = (size_t)(v->c1 - v->c0);
  int done = 0;
  for (int pass = 0; pass < 4; pass++)
    for (int r = start[pass]; r < d->height; r += step[pass]) {
      /* Every row is read (the passes follow one another in the data), the visible kept;
       * the frame's size is within the pixel limit, which bounds the work. */
      if (++done % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->base.control, result) != IC_OK)
        return result->status;
      if (DGifGetLine(d->gif, line, d->width) != GIF_OK)
        return fail_from_gif(d->gif->Error, "frame", result);
      if (r >= v->r0 && r < v->r1)
        memcpy(frame + (size_t)(r - v->r0) * columns, line + v->c0, columns);
    }
  return IC_OK;
}

static ic_status gif_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  gif_decoder *d = (gif_decoder *)base;
  uint32_t w = base->header.width, h = base->header.height;
  int channels = base->header.channels;
  size_t stride = (size_t)w * channels;
  visible_part v = visible(d);
  int shown = v.r1 > v.r0 && v.c1 > v.c0;
  uint8_t *row = malloc(stride);
  GifPixelType *line = malloc((size_t)d->width);
  /* Interlaced frames arrive in passes: their visible part is gathered first. */
  GifPixelType *frame =
      d->interlaced && shown ? malloc((size_t)(v.r1 - v.r0) * (size_t)(v.c1 - v.c0)) : NULL;
  ic_status status = IC_OK;
  if (!row || !line || (d->interlaced && shown && !frame))
    status = ic_fail(result, IC_ERR_NO_MEMORY, "GIF row allocation failed");
  if (status == IC_OK && frame) status = read_interlaced(d, &v, line, frame, result);
  if (status == IC_OK) status = sink->begin(sink, w, h, channels, result);
  int next = 0; /* frame rows read so far (non-interlaced) */
  for (uint32_t y = 0; y < h && status == IC_OK; y++) {
    if (y % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->base.control, result) != IC_OK) {
      status = result->status;
      break;
    }
    memset(row, 0, stride);
    int r = (int)((int64_t)y - d->top);
    if (shown && r >= v.r0 && r < v.r1) {
      const GifPixelType *indices;
      if (frame) {
        indices = frame + (size_t)(r - v.r0) * (size_t)(v.c1 - v.c0);
      } else {
        /* Rows above the screen are read and dropped. */
        status = read_rows_to(d, &next, r, line, result);
        indices = line + v.c0;
      }
      if (status != IC_OK) break;
      compose_row(d, &v, indices, row, channels);
    }
    status = sink->row(sink, row, result);
  }
  free(frame);
  free(line);
  free(row);
  return status;
}

static uint64_t gif_working_memory(ic_decoder *base) {
  gif_decoder *d = (gif_decoder *)base;
  uint64_t bytes = (uint64_t)base->header.width * base->header.channels + (uint64_t)d->width;
  visible_part v = visible(d);
  if (d->interlaced) bytes += (uint64_t)(v.r1 - v.r0) * (uint64_t)(v.c1 - v.c0);
  /* giflib's LZW state and stack. */
  return bytes + (32u << 10) + IC_DECODE_BASE_BYTES;
}

static void gif_destroy(ic_decoder *base) {
  gif_decoder *d = (gif_decoder *)base;
  if (d->gif) DGifCloseFile(d->gif, NULL);
  free(d);
}

/* Reads records up to the first image descriptor, keeping its graphic control's
 * transparency. Extension data is read and dropped, the control checked as it goes. */
static ic_status read_to_first_frame(gif_decoder *d, ic_result *result) {
  GifFileType *gif = d->gif;
  d->transparent = -1;
  for (unsigned records = 0;; records++) {
    if (records % 64 == 0 && ic_check(d->base.control, result) != IC_OK) return result->status;
    GifRecordType type;
    if (DGifGetRecordType(gif, &type) != GIF_OK) return fail_from_gif(gif->Error, "record", result);
    if (type == TERMINATE_RECORD_TYPE)
      return ic_fail(result, IC_ERR_CORRUPT, "GIF has no image");
    if (type == IMAGE_DESC_RECORD_TYPE) {
      if (DGifGetImageDesc(gif) != GIF_OK)
        return fail_from_gif(gif->Error, "image descriptor", result);
      return IC_OK;
    }
    if (type != EXTENSION_RECORD_TYPE)
      return ic_fail(result, IC_ERR_CORRUPT, "GIF record of unknown type");
    int code = 0;
    GifByteType *block = NULL;
    if (DGifGetExtension(gif, &code, &block) != GIF_OK)
      return fail_from_gif(gif->Error, "extension", result);
    if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4)
      d->transparent = (block[1] & 1) ? block[4] : -1;
    while (block) {
      if (++records % 64 == 0 && ic_check(d->base.control, result) != IC_OK) return result->status;
      if (DGifGetExtensionNext(gif, &block) != GIF_OK)
        return fail_from_gif(gif->Error, "extension", result);
    }
  }
}

static const ic_decoder_ops gif_ops = {gif_choose_size, gif_run, gif_destroy, gif_working_memory, NULL};

ic_status ic_gif_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                      ic_result *result, ic_decoder **out) {
  gif_decoder *d = ic_decoder_new(sizeof(*d), &gif_ops, limits, control, result);
  if (!d) return result->status;
  d->stream = stream;
  int error = 0;
  d->gif = DGifOpen(d, read_bytes, &error);
  if (!d->gif) {
    free(d);
    return fail_from_gif(error, "header", result);
  }
  GifFileType *gif = d->gif;
  /* The screen first: nothing larger than the limits is read any further. */
  if (ic_check_limits((uint32_t)gif->SWidth, (uint32_t)gif->SHeight, limits, result) != IC_OK ||
      read_to_first_frame(d, result) != IC_OK) {
    gif_destroy(&d->base);
    return result->status;
  }
  GifImageDesc *image = &gif->Image;
  d->left = image->Left;
  d->top = image->Top;
  d->width = image->Width;
  d->height = image->Height;
  d->interlaced = image->Interlace;
  if (d->width <= 0 || d->height <= 0) {
    ic_fail(result, IC_ERR_CORRUPT, "GIF frame of %dx%d", d->width, d->height);
    gif_destroy(&d->base);
    return result->status;
  }
  if (limits->max_pixels && (uint64_t)d->width * d->height > limits->max_pixels) {
    /* Its size, not the screen's, is what the typed error reports. */
    result->source_width = (uint32_t)d->width;
    result->source_height = (uint32_t)d->height;
    ic_fail_over_limits(result, "its first frame of ", (uint32_t)d->width, (uint32_t)d->height,
                        0, 0, limits->max_pixels);
    gif_destroy(&d->base);
    return result->status;
  }
  ColorMapObject *map = image->ColorMap ? image->ColorMap : gif->SColorMap;
  for (int i = 0; i < 256; i++) d->palette[i][3] = 255;
  if (map && map->Colors)
    for (int i = 0; i < map->ColorCount && i < 256; i++) {
      d->palette[i][0] = map->Colors[i].Red;
      d->palette[i][1] = map->Colors[i].Green;
      d->palette[i][2] = map->Colors[i].Blue;
    }
  int covers = d->left <= 0 && d->top <= 0 && d->left + d->width >= gif->SWidth &&
               d->top + d->height >= gif->SHeight;
  d->base.header.width = (uint32_t)gif->SWidth;
  d->base.header.height = (uint32_t)gif->SHeight;
  d->base.header.orientation = 1;
  d->base.header.channels = covers && d->transparent < 0 ? 3 : 4;
  *out = &d->base;
  return IC_OK;
}
