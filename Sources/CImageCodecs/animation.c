/*
 * Animated output: an animated GIF or WebP to an animated WebP or GIF (gif_encode.c), frame
 * by frame through the same plan, resampler and finishing stages as a still (ic_thumbnail's).
 *
 * Rules kept here:
 * - Frames times canvas pixels are counted from the container before any frame is decoded,
 *   and refused past the pixel limit (IC_ERR_TOO_COMPLEX): a GIF's blocks are walked without
 *   decompressing them, a WebP's demuxer reads its frame headers.
 * - One full-size canvas is composed at a time (a GIF's disposal needs the one before it),
 *   its frames read one by one, then resampled to the output and encoded: neither the
 *   source's frames nor the output's are ever all held.
 * - The control is checked per frame, so the decode deadline covers the whole animation.
 * - Frame delays and the loop count are kept; a GIF delay under 20 ms is 100 ms, as browsers
 *   play it.
 */
#include "internal.h"

#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>
#include <webp/demux.h>
#include <webp/encode.h>
#include <webp/mux.h>

/* A GIF's frame count, the pixels of all its frames and its loop count as WebP counts plays
 * (1 without a NETSCAPE block, as browsers play it), from its blocks, without decompressing a
 * frame; 0 frames when the blocks do not parse. */
static uint32_t gif_frames(const uint8_t *p, size_t n, int *loop) {
  *loop = 1;
  if (n < 13) return 0;
  size_t i = 13;
  if (p[10] & 0x80) i += 3u << ((p[10] & 7) + 1);
  uint32_t frames = 0;
  while (i < n) {
    uint8_t kind = p[i++];
    if (kind == 0x3B) break;
    if (kind == 0x2C) {
      if (i + 9 > n) break;
      uint8_t flags = p[i + 8];
      i += 9;
      if (flags & 0x80) i += 3u << ((flags & 7) + 1);
      i += 1; /* LZW minimum code size */
      frames++;
    } else if (kind == 0x21) {
      if (i + 1 > n) break;
      uint8_t label = p[i++];
      if (label == 0xFF && i + 12 <= n && p[i] == 11 && memcmp(p + i + 1, "NETSCAPE2.0", 11) == 0 &&
          i + 16 <= n && p[i + 12] == 3 && p[i + 13] == 1) {
        /* The GIF's count is of repeats after the first play; WebP's, of plays (0: for
         * ever in both). */
        int repeats = p[i + 14] | p[i + 15] << 8;
        *loop = repeats == 0 ? 0 : repeats + 1;
      }
    } else {
      break;
    }
    /* The sub-blocks that follow, to their terminator. */
    while (i < n && p[i] != 0) i += (size_t)p[i] + 1;
    i++;
  }
  return frames;
}

typedef struct memory_reader {
  const uint8_t *data;
  size_t size, at;
} memory_reader;

static int read_memory(GifFileType *gif, GifByteType *out, int length) {
  memory_reader *m = gif->UserData;
  size_t left = m->size - m->at, take = length < 0 ? 0 : (size_t)length;
  if (take > left) take = left;
  memcpy(out, m->data + m->at, take);
  m->at += take;
  return (int)take;
}

/* One output frame at a time into the encoder of the output format. */
typedef struct animation_out {
  ic_format format;
  /* Plays as WebP counts them (0: for ever), for a GIF's loop block before its frames. */
  int plays;
  WebPAnimEncoder *encoder;
  ic_gif_writer *gif;
  WebPConfig config;
  int timestamp;
  uint32_t frames;
  const ic_request *request;
  const ic_plan *plan;
  uint32_t source_w, source_h;
  ic_filter filter;
  uint32_t width, height;
  int smart_chosen;
  uint32_t smart_x, smart_y;
} animation_out;

/* The composed canvas (RGBA, source size) resampled, finished and added for `delay` ms. */
static ic_status add_frame(animation_out *out, const uint8_t *canvas, int delay,
                           const ic_control *control, ic_result *result) {
  const ic_plan *p = out->plan;
  ic_resizer *resizer =
      ic_resizer_create(out->source_w, out->source_h, 4, p->crop_x, p->crop_y, p->crop_width,
                        p->crop_height, p->out_width, p->out_height, out->filter);
  if (!resizer) return ic_fail(result, IC_ERR_NO_MEMORY, "resampler allocation failed");
  for (uint32_t y = 0; y < out->source_h; y++)
    ic_resizer_push_row(resizer, canvas + (size_t)y * out->source_w * 4);
  uint8_t *pixels = ic_resizer_finish(resizer);
  ic_resizer_destroy(resizer);
  if (!pixels) return ic_fail(result, IC_ERR_NO_MEMORY, "frame buffer failed");
  uint32_t width = p->out_width, height = p->out_height;
  int channels = 4;
  if (p->orientation != 1) {
    uint32_t w, h;
    uint8_t *turned = ic_orient(pixels, width, height, channels, p->orientation, &w, &h);
    free(pixels);
    if (!turned) return ic_fail(result, IC_ERR_NO_MEMORY, "orientation buffer failed");
    pixels = turned;
    width = w;
    height = h;
  }
  ic_plan plan = *p;
  ic_status status = ic_finish_upright(&pixels, &width, &height, &channels, &plan, out->request,
                                       control, &out->smart_chosen, &out->smart_x,
                                       &out->smart_y, result);
  if (status != IC_OK) {
    free(pixels);
    return status;
  }
  if (out->frames == 0) {
    out->width = width;
    out->height = height;
    if (out->request->summary) ic_summarize(pixels, width, height, channels, result);
  }
  if (width != out->width || height != out->height) {
    free(pixels);
    return ic_fail(result, IC_ERR_ENCODE, "animation frame of %ux%u after %ux%u", width,
                   height, out->width, out->height);
  }
  if (out->format == IC_FORMAT_GIF) {
    if (!out->gif) out->gif = ic_gif_writer_create(width, height, 1, out->plays, result);
    ic_status added =
        out->gif ? ic_gif_writer_add(out->gif, pixels, channels, delay, result) : result->status;
    free(pixels);
    if (added != IC_OK) return added;
    out->frames++;
    return ic_check(control, result);
  }
  if (out->frames == 0) {
    WebPAnimEncoderOptions options;
    if (!WebPAnimEncoderOptionsInit(&options)) {
      free(pixels);
      return ic_fail(result, IC_ERR_ENCODE, "WebP animation options failed");
    }
    options.anim_params.loop_count = 0;
    out->encoder = WebPAnimEncoderNew((int)width, (int)height, &options);
    if (!out->encoder) {
      free(pixels);
      return ic_fail(result, IC_ERR_NO_MEMORY, "WebP animation encoder failed");
    }
  }
  WebPPicture picture;
  int ok = WebPPictureInit(&picture);
  picture.use_argb = 1;
  picture.width = (int)width;
  picture.height = (int)height;
  ok = ok && (channels == 4 ? WebPPictureImportRGBA(&picture, pixels, (int)width * 4)
                            : WebPPictureImportRGB(&picture, pixels, (int)width * 3));
  free(pixels);
  ok = ok && WebPAnimEncoderAdd(out->encoder, &picture, out->timestamp, &out->config);
  WebPPictureFree(&picture);
  if (!ok) return ic_fail(result, IC_ERR_ENCODE, "WebP animation frame failed");
  out->timestamp += delay;
  out->frames++;
  return ic_check(control, result);
}

static ic_status finish_webp(animation_out *out, int loop, ic_result *result) {
  WebPData data;
  WebPDataInit(&data);
  int ok = WebPAnimEncoderAdd(out->encoder, NULL, out->timestamp, NULL) &&
           WebPAnimEncoderAssemble(out->encoder, &data);
  if (ok && loop != 0 && out->frames > 1) {
    /* The loop count the source asked for (0: for ever, the encoder's default). */
    WebPMux *mux = WebPMuxCreate(&data, 1);
    WebPMuxAnimParams params;
    ok = mux && WebPMuxGetAnimationParams(mux, &params) == WEBP_MUX_OK;
    if (ok) {
      params.loop_count = loop;
      WebPDataClear(&data);
      ok = WebPMuxSetAnimationParams(mux, &params) == WEBP_MUX_OK &&
           WebPMuxAssemble(mux, &data) == WEBP_MUX_OK;
    }
    WebPMuxDelete(mux);
  }
  if (!ok) {
    WebPDataClear(&data);
    return ic_fail(result, IC_ERR_ENCODE, "WebP animation assembly failed");
  }
  result->data = malloc(data.size ? data.size : 1);
  if (!result->data) {
    WebPDataClear(&data);
    return ic_fail(result, IC_ERR_NO_MEMORY, "output buffer failed");
  }
  memcpy(result->data, data.bytes, data.size);
  result->size = data.size;
  WebPDataClear(&data);
  return IC_OK;
}

/* One frame's rows, read by giflib straight onto the canvas (interlaced rows to their place),
 * its transparent index skipped. */
static ic_status gif_frame_onto(GifFileType *gif, uint8_t *canvas, uint32_t w, uint32_t h,
                                const GraphicsControlBlock *gcb, GifPixelType *line,
                                const ic_control *control, ic_result *result) {
  GifImageDesc *d = &gif->Image;
  ColorMapObject *map = d->ColorMap ? d->ColorMap : gif->SColorMap;
  static const int starts[4] = {0, 4, 2, 1}, steps[4] = {8, 8, 4, 2};
  int passes = d->Interlace ? 4 : 1;
  for (int pass = 0; pass < passes; pass++) {
    int start = d->Interlace ? starts[pass] : 0, step = d->Interlace ? steps[pass] : 1;
    for (int y = start; y < d->Height; y += step) {
      if (DGifGetLine(gif, line, d->Width) != GIF_OK)
        return ic_fail(result, IC_ERR_CORRUPT, "GIF frame rows failed");
      if ((y & 63) == 63 && ic_check(control, result) != IC_OK) return result->status;
      long sy = (long)d->Top + y;
      if (sy < 0 || sy >= (long)h) continue;
      for (int x = 0; x < d->Width; x++) {
        long sx = (long)d->Left + x;
        int index = line[x];
        if (sx < 0 || sx >= (long)w || index == gcb->TransparentColor) continue;
        uint8_t *q = canvas + ((size_t)sy * w + (size_t)sx) * 4;
        if (map && index < map->ColorCount) {
          q[0] = map->Colors[index].Red;
          q[1] = map->Colors[index].Green;
          q[2] = map->Colors[index].Blue;
        } else {
          q[0] = q[1] = q[2] = 0;
        }
        q[3] = 255;
      }
    }
  }
  return IC_OK;
}

/* Frames read one at a time (never giflib's slurp of them all): one canvas, and the one
 * before it for a frame that restores it. */
static ic_status animate_gif(const uint8_t *bytes, size_t size, uint32_t frames,
                             animation_out *out, const ic_limits *limits,
                             const ic_control *control, ic_result *result) {
  memory_reader reader = {bytes, size, 0};
  int error = 0;
  GifFileType *gif = DGifOpen(&reader, read_memory, &error);
  if (!gif) return ic_fail(result, IC_ERR_CORRUPT, "GIF open failed");
  uint32_t w = out->source_w, h = out->source_h;
  uint8_t *canvas = calloc((size_t)w * h, 4), *previous = malloc((size_t)w * h * 4);
  GifPixelType *line = malloc(65536);
  ic_status status =
      canvas && previous && line ? IC_OK : ic_fail(result, IC_ERR_NO_MEMORY, "canvas failed");
  GraphicsControlBlock gcb = {.DisposalMode = DISPOSAL_UNSPECIFIED, .DelayTime = 0,
                              .TransparentColor = NO_TRANSPARENT_COLOR};
  uint32_t done = 0;
  while (status == IC_OK && done < frames) {
    GifRecordType type;
    if (DGifGetRecordType(gif, &type) != GIF_OK) {
      status = ic_fail(result, IC_ERR_CORRUPT, "GIF record failed");
      break;
    }
    if (type == TERMINATE_RECORD_TYPE) break;
    if (type == EXTENSION_RECORD_TYPE) {
      int code;
      GifByteType *block;
      if (DGifGetExtension(gif, &code, &block) != GIF_OK) {
        status = ic_fail(result, IC_ERR_CORRUPT, "GIF extension failed");
        break;
      }
      if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4)
        DGifExtensionToGCB(block[0], block + 1, &gcb);
      while (block && status == IC_OK) {
        if (DGifGetExtensionNext(gif, &block) != GIF_OK)
          status = ic_fail(result, IC_ERR_CORRUPT, "GIF extension failed");
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif) != GIF_OK) {
      status = ic_fail(result, IC_ERR_CORRUPT, "GIF frame header failed");
      break;
    }
    GifImageDesc desc = gif->Image;
    if (desc.Width <= 0 || desc.Height <= 0 || desc.Width > 65535) {
      status = ic_fail(result, IC_ERR_CORRUPT, "GIF frame of %dx%d", desc.Width, desc.Height);
      break;
    }
    /* A frame may reach past the screen, which clips it, but its rows are decoded all the
     * same: its own size is held to the limits before any of them. */
    if (ic_fail_over_limits(result, "GIF frame ", (uint32_t)desc.Width, (uint32_t)desc.Height,
                            limits->max_width, limits->max_height, limits->max_pixels) != IC_OK) {
      status = result->status;
      break;
    }
    if (gcb.DisposalMode == DISPOSE_PREVIOUS) memcpy(previous, canvas, (size_t)w * h * 4);
    status = gif_frame_onto(gif, canvas, w, h, &gcb, line, control, result);
    if (status != IC_OK) break;
    int delay = gcb.DelayTime * 10;
    status = add_frame(out, canvas, delay < 20 ? 100 : delay, control, result);
    done++;
    /* Disposal before the next frame. */
    if (gcb.DisposalMode == DISPOSE_BACKGROUND) {
      for (int y = 0; y < desc.Height; y++) {
        long sy = (long)desc.Top + y;
        if (sy < 0 || sy >= (long)h) continue;
        for (int x = 0; x < desc.Width; x++) {
          long sx = (long)desc.Left + x;
          if (sx >= 0 && sx < (long)w) memset(canvas + ((size_t)sy * w + (size_t)sx) * 4, 0, 4);
        }
      }
    } else if (gcb.DisposalMode == DISPOSE_PREVIOUS) {
      memcpy(canvas, previous, (size_t)w * h * 4);
    }
    gcb = (GraphicsControlBlock){.DisposalMode = DISPOSAL_UNSPECIFIED, .DelayTime = 0,
                                 .TransparentColor = NO_TRANSPARENT_COLOR};
  }
  /* A damaged tail after frames were made keeps them, as a browser plays them. */
  if (status == IC_ERR_CORRUPT && done > 0) {
    status = result->status = IC_OK;
    result->message[0] = 0;
  }
  free(canvas);
  free(previous);
  free(line);
  DGifCloseFile(gif, NULL);
  return status;
}

static ic_status animate_webp(const uint8_t *bytes, size_t size, uint32_t frames,
                              animation_out *out, const ic_control *control, ic_result *result) {
  WebPData data = {bytes, size};
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options))
    return ic_fail(result, IC_ERR_CORRUPT, "WebP animation options failed");
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  WebPAnimDecoder *decoder = WebPAnimDecoderNew(&data, &options);
  if (!decoder) return ic_fail(result, IC_ERR_CORRUPT, "WebP animation failed to open");
  ic_status status = IC_OK;
  int previous = 0;
  for (uint32_t f = 0; f < frames && status == IC_OK && WebPAnimDecoderHasMoreFrames(decoder); f++) {
    uint8_t *canvas;
    int timestamp;
    if (!WebPAnimDecoderGetNext(decoder, &canvas, &timestamp)) {
      status = ic_fail(result, IC_ERR_CORRUPT, "WebP animation frame %u failed", f);
      break;
    }
    status = add_frame(out, canvas, timestamp - previous, control, result);
    previous = timestamp;
  }
  WebPAnimDecoderDelete(decoder);
  return status;
}

int ic_animates(const ic_request *request) {
  return request->max_frames > 1 &&
         (request->format == IC_OUTPUT_WEBP || request->format == IC_OUTPUT_GIF);
}

ic_status ic_animate(const uint8_t *bytes, size_t size, ic_format format,
                     const ic_request *request, const ic_limits *limits,
                     const ic_control *control, ic_result *result) {
  uint32_t frames = 0, w = 0, h = 0;
  int loop = 0;
  if (format == IC_FORMAT_GIF) {
    frames = gif_frames(bytes, size, &loop);
    w = size >= 10 ? (uint32_t)(bytes[6] | bytes[7] << 8) : 0;
    h = size >= 10 ? (uint32_t)(bytes[8] | bytes[9] << 8) : 0;
  } else {
    WebPData data = {bytes, size};
    WebPDemuxer *demux = WebPDemux(&data);
    if (demux) {
      frames = WebPDemuxGetI(demux, WEBP_FF_FRAME_COUNT);
      w = WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH);
      h = WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
      loop = (int)WebPDemuxGetI(demux, WEBP_FF_LOOP_COUNT);
      WebPDemuxDelete(demux);
    }
  }
  if (frames < 2 || w == 0 || h == 0) return IC_ERR_UNSUPPORTED; /* a still: the usual path */
  if (frames > request->max_frames) frames = request->max_frames;
  if (ic_fail_over_limits(result, "animation canvas ", w, h, limits->max_width,
                          limits->max_height, limits->max_pixels) != IC_OK)
    return result->status;
  if (limits->max_pixels && (uint64_t)frames * w * h > limits->max_pixels)
    return ic_fail(result, IC_ERR_TOO_COMPLEX,
                   "an animation of %u frames of %ux%u passes the pixel limit of %llu", frames,
                   w, h, (unsigned long long)limits->max_pixels);
  ic_plan plan;
  if (ic_plan_make(w, h, 1, request, &plan, result) != IC_OK) return result->status;
  animation_out out;
  memset(&out, 0, sizeof(out));
  out.request = request;
  out.plan = &plan;
  out.source_w = w;
  out.source_h = h;
  out.format = (ic_format)request->format;
  out.plays = loop;
  out.filter = request->filter;
  if (!WebPConfigInit(&out.config)) return ic_fail(result, IC_ERR_ENCODE, "WebP config failed");
  out.config.quality = (float)request->quality;
  result->source_format = format;
  result->source_width = w;
  result->source_height = h;
  result->orientation = 1;
  ic_status status = format == IC_FORMAT_GIF
                         ? animate_gif(bytes, size, frames, &out, limits, control, result)
                         : animate_webp(bytes, size, frames, &out, control, result);
  if (status == IC_OK && out.frames == 0)
    status = ic_fail(result, IC_ERR_CORRUPT, "the animation has no frames");
  if (status == IC_OK)
    status = out.gif ? ic_gif_writer_finish(out.gif, &result->data, &result->size, result)
                     : finish_webp(&out, loop, result);
  if (out.encoder) WebPAnimEncoderDelete(out.encoder);
  ic_gif_writer_destroy(out.gif);
  if (status != IC_OK) return status;
  result->format = out.format;
  result->width = out.width;
  result->height = out.height;
  result->has_alpha = 1;
  result->frames = out.frames;
  return IC_OK;
}
