/*
 * GIF decoding (giflib): the first frame composited on its logical screen, as a browser shows
 * it before the animation starts. Pixels outside the frame are transparent; the part of a
 * frame beyond the screen is clipped. Interlaced frames, transparency, local colour tables
 * and frames without any colour table (black) are handled.
 *
 * The screen size is checked against the limits before any pixel work (a 30-byte file can
 * declare 4 gigapixels). Rows stream: only an interlaced frame is buffered, as one byte per
 * pixel of the frame, since its rows arrive in four passes.
 */
#include "internal.h"

#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>

typedef struct gif_decoder {
  ic_decoder base;
  ic_stream *stream;
  const ic_control *control;
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

/* One frame row of colour indices onto a canvas row that starts out transparent. */
static void compose_row(const gif_decoder *d, const GifPixelType *indices, uint8_t *row,
                        int channels) {
  int64_t screen = d->base.header.width;
  for (int x = 0; x < d->width; x++) {
    int64_t cx = (int64_t)d->left + x;
    if (cx < 0 || cx >= screen || indices[x] == d->transparent) continue;
    memcpy(row + cx * channels, d->palette[indices[x]], (size_t)channels);
  }
}

/* The frame row that canvas row y shows, or -1. */
static int frame_row(const gif_decoder *d, uint32_t y) {
  int64_t r = (int64_t)y - d->top;
  return r >= 0 && r < d->height ? (int)r : -1;
}

static ic_status gif_run(ic_decoder *base, ic_sink *sink, ic_result *result) {
  gif_decoder *d = (gif_decoder *)base;
  uint32_t w = base->header.width, h = base->header.height;
  int channels = base->header.channels;
  size_t stride = (size_t)w * channels;
  uint8_t *row = malloc(stride);
  GifPixelType *line = malloc((size_t)d->width);
  /* Interlaced frames arrive in passes: gather the indices first. */
  GifPixelType *frame = d->interlaced ? malloc((size_t)d->width * d->height) : NULL;
  ic_status status = IC_OK;
  if (!row || !line || (d->interlaced && !frame))
    status = ic_fail(result, IC_ERR_NO_MEMORY, "GIF row allocation failed");
  if (status == IC_OK && frame) {
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    int done = 0;
    for (int pass = 0; pass < 4 && status == IC_OK; pass++)
      for (int r = start[pass]; r < d->height && status == IC_OK; r += step[pass]) {
        if (++done % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->control, result) != IC_OK)
          status = result->status;
        else if (DGifGetLine(d->gif, frame + (size_t)r * d->width, d->width) != GIF_OK)
          status = fail_from_gif(d->gif->Error, "frame", result);
      }
  }
  if (status == IC_OK) status = sink->begin(sink, w, h, channels, result);
  int next_line = 0; /* frame rows read so far (non-interlaced) */
  for (uint32_t y = 0; y < h && status == IC_OK; y++) {
    if (y % IC_CANCEL_CHECK_ROWS == 0 && ic_check(d->control, result) != IC_OK) {
      status = result->status;
      break;
    }
    /* Transparent canvas, or the frame's opaque cover of the whole screen. */
    memset(row, 0, stride);
    int r = frame_row(d, y);
    if (r >= 0) {
      const GifPixelType *indices = NULL;
      if (frame) {
        indices = frame + (size_t)r * d->width;
      } else {
        /* Rows above the screen are read and dropped. */
        while (next_line <= r && status == IC_OK) {
          if (DGifGetLine(d->gif, line, d->width) != GIF_OK)
            status = fail_from_gif(d->gif->Error, "frame", result);
          next_line++;
        }
        indices = line;
      }
      if (status != IC_OK) break;
      compose_row(d, indices, row, channels);
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
  if (d->interlaced) bytes += (uint64_t)d->width * d->height;
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
    if (records % 64 == 0 && ic_check(d->control, result) != IC_OK) return result->status;
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
      if (++records % 64 == 0 && ic_check(d->control, result) != IC_OK) return result->status;
      if (DGifGetExtensionNext(gif, &block) != GIF_OK)
        return fail_from_gif(gif->Error, "extension", result);
    }
  }
}

ic_status ic_gif_open(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                      ic_result *result, ic_decoder **out) {
  gif_decoder *d = calloc(1, sizeof(*d));
  if (!d) return ic_fail(result, IC_ERR_NO_MEMORY, "decoder allocation failed");
  d->base.choose_size = gif_choose_size;
  d->base.run = gif_run;
  d->base.destroy = gif_destroy;
  d->base.working_memory = gif_working_memory;
  d->stream = stream;
  d->control = control;
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
  if (d->width <= 0 || d->height <= 0 ||
      (limits->max_pixels && (uint64_t)d->width * d->height > limits->max_pixels)) {
    ic_fail(result, IC_ERR_CORRUPT, "GIF frame of %dx%d", d->width, d->height);
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
