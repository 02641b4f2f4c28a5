/*
 * The thumbnail driver: header, plan, shrink-on-load, streaming resample,
 * orientation, encode. Nothing here ever holds the full-size image (except
 * libpng's Adam7 case, inside the PNG decoder).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * DCT scaling at 1/2 and 1/4 keeps low frequencies a box filter would
 * remove, so a decode that lands just above the target leaves the kernel to
 * interpolate rather than reduce: measured on the corpus photos at 256x256,
 * headroom 1 gives 31 dB against an exact area average, headroom 1.75 or 2
 * gives 36.8 dB at worst. 1.75 lets 12 MP photos decode at 1/8 (the DC-only
 * scale, which is exact 8x8 block averaging) instead of 1/4: 0.61 instead of
 * 0.75 of vipsthumbnail's time, with the same worst case.
 */
#define IC_SHRINK_HEADROOM 1.75

typedef struct resize_sink {
  ic_sink base;
  const ic_plan *plan;
  uint32_t full_width, full_height;
  /* The decoder's pixel_scale (0: the decoded size over the full size). */
  double pixel_scale;
  ic_filter filter;
  ic_resizer *resizer;
  int channels;
  ic_colour_info *colour;
  ic_colour_mode colour_mode;
  ic_colour_step step;
  uint32_t decode_width;
} resize_sink;

/* Decoded pixels per source pixel along each axis: the decoder's fixed scale when it has
 * one (see ic_decoder.pixel_scale), else the decoded size over the source's. */
static void decode_scales(double pixel_scale, uint32_t width, uint32_t height,
                          uint32_t full_width, uint32_t full_height, double *sx, double *sy) {
  *sx = pixel_scale > 0 ? pixel_scale : (double)width / full_width;
  *sy = pixel_scale > 0 ? pixel_scale : (double)height / full_height;
}

static ic_status resize_begin(ic_sink *sink, uint32_t width, uint32_t height,
                              int channels, ic_result *result) {
  resize_sink *s = (resize_sink *)sink;
  /* The plan is in full-resolution pixels; the decoder may deliver fewer. */
  double sx, sy;
  decode_scales(s->pixel_scale, width, height, s->full_width, s->full_height, &sx, &sy);
  const ic_plan *p = s->plan;
  s->channels = channels;
  s->decode_width = width;
  if (ic_colour_step_begin(&s->step, s->colour, s->colour_mode, width, channels, result) !=
      IC_OK)
    return result->status;
  s->resizer = ic_resizer_create(width, height, channels, p->crop_x * sx,
                                 p->crop_y * sy, p->crop_width * sx,
                                 p->crop_height * sy, p->out_width,
                                 p->out_height, s->filter);
  if (!s->resizer)
    return ic_fail(result, IC_ERR_NO_MEMORY, "resampler allocation failed");
  return IC_OK;
}

static ic_status resize_row(ic_sink *sink, const uint8_t *row,
                            ic_result *result) {
  (void)result;
  resize_sink *s = (resize_sink *)sink;
  ic_resizer_push_row(s->resizer, ic_colour_step_row(&s->step, row, s->decode_width));
  return IC_OK;
}

static int valid_anchor(const ic_anchor *anchor) {
  return (unsigned)anchor->type <= IC_GRAVITY_SMART && isfinite(anchor->offset_x) &&
         isfinite(anchor->offset_y) && fabs(anchor->offset_x) <= IC_MAX_GEOMETRY &&
         fabs(anchor->offset_y) <= IC_MAX_GEOMETRY &&
         (anchor->type != IC_GRAVITY_FOCUS ||
          (anchor->focus_x >= 0 && anchor->focus_x <= 1 && anchor->focus_y >= 0 &&
           anchor->focus_y <= 1));
}

static ic_status validate_geometry(const ic_request *request, ic_result *result) {
  const ic_geometry *g = &request->geometry;
  if (!valid_anchor(&g->gravity) || !valid_anchor(&g->crop_gravity) ||
      !valid_anchor(&g->extend_gravity))
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "a gravity is unknown, or its focus or offsets out of range");
  if (!(g->crop_width >= 0 && g->crop_width <= IC_MAX_GEOMETRY) ||
      !(g->crop_height >= 0 && g->crop_height <= IC_MAX_GEOMETRY))
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "crop sides must be 0...%u",
                   IC_MAX_GEOMETRY);
  if (g->rotate != 0 && g->rotate != 90 && g->rotate != 180 && g->rotate != 270)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "rotation must be 0, 90, 180 or 270");
  const ic_effects *e = &request->effects;
  if (!(e->blur_sigma >= 0 && e->blur_sigma <= IC_MAX_SIGMA) ||
      !(e->sharpen_sigma >= 0 && e->sharpen_sigma <= IC_MAX_SIGMA) ||
      e->pixelate > IC_MAX_GEOMETRY)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "blur and sharpen sigmas must be 0...%g, pixelate 0...%u", IC_MAX_SIGMA,
                   IC_MAX_GEOMETRY);
  if (g->trim && !(g->trim_threshold >= 0 && g->trim_threshold <= 255))
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "trim's threshold must be 0...255");
  const ic_watermark *w = &request->watermark;
  if (w->pixels && (!(w->opacity >= 0 && w->opacity <= 1) || !(w->scale >= 0 && w->scale <= 1) ||
                    !valid_anchor(&w->position) || w->width > IC_MAX_GEOMETRY ||
                    w->height > IC_MAX_GEOMETRY))
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "a watermark's opacity and scale must be 0...1, its position known");
  if (g->pad_top > IC_MAX_GEOMETRY || g->pad_right > IC_MAX_GEOMETRY ||
      g->pad_bottom > IC_MAX_GEOMETRY || g->pad_left > IC_MAX_GEOMETRY)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "padding must be 0...%u",
                   IC_MAX_GEOMETRY);
  return IC_OK;
}

static ic_status validate(const ic_request *request, ic_result *result) {
  if (request->quality < 1 || request->quality > 100)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "quality must be 1...100, got %d", request->quality);
  if (request->png_level < 0 || request->png_level > 9)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "PNG level must be 0...9, got %d", request->png_level);
  if ((unsigned)request->fit > IC_FIT_AUTO || (unsigned)request->filter > IC_FILTER_LANCZOS3_AREA ||
      (request->format != IC_OUTPUT_AUTO && !ic_format_encodable((ic_format)request->format)))
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "unknown enum value");
  if ((unsigned)request->colour > IC_COLOUR_KEEP)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "unknown colour mode");
  if (request->avif_speed < 0 || request->avif_speed > 9)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "AVIF speed must be 0...9, got %d",
                   request->avif_speed);
  return validate_geometry(request, result);
}

/* Drops an alpha channel that is opaque everywhere, in place. */
static void drop_alpha(uint8_t *pixels, size_t count) {
  for (size_t i = 0; i < count; i++) {
    pixels[i * 3] = pixels[i * 4];
    pixels[i * 3 + 1] = pixels[i * 4 + 1];
    pixels[i * 3 + 2] = pixels[i * 4 + 2];
  }
}

/* A preview is never larger than the picture it comes from: the output shrinks (aspect
 * kept, the same crop) until the crop's decoded pixels cover it. */
static void cap_to_decode(ic_plan *plan, uint32_t full_w, uint32_t full_h, uint32_t decode_w,
                          uint32_t decode_h) {
  double have_w = plan->crop_width * decode_w / full_w;
  double have_h = plan->crop_height * decode_h / full_h;
  double scale = fmin(have_w / plan->out_width, have_h / plan->out_height);
  if (scale >= 1) return;
  uint32_t w = (uint32_t)floor(plan->out_width * scale + 0.5);
  uint32_t h = (uint32_t)floor(plan->out_height * scale + 0.5);
  plan->out_width = w ? w : 1;
  plan->out_height = h ? h : 1;
  w = (uint32_t)floor(plan->window_width * scale + 0.5);
  h = (uint32_t)floor(plan->window_height * scale + 0.5);
  plan->window_width = w ? w : 1;
  plan->window_height = h ? h : 1;
  if (!plan->smart) {
    int swap = plan->orientation >= 5 && plan->orientation <= 8;
    plan->window_width = swap ? plan->out_height : plan->out_width;
    plan->window_height = swap ? plan->out_width : plan->out_height;
  }
}

/* The output plan and the decode size for a request: the smallest decode whose crop still
 * covers the output pixels, with headroom (see IC_SHRINK_HEADROOM). */
static ic_status plan_decode(ic_decoder *decoder, const ic_request *request,
                             const ic_limits *limits, ic_result *result, ic_plan *plan,
                             uint32_t *decode_w, uint32_t *decode_h) {
  const ic_header *h = &decoder->header;
  result->orientation = h->orientation;
  ic_status status =
      ic_plan_make(h->width, h->height, h->orientation, request, plan, result);
  if (status != IC_OK) return status;
  if (limits->max_pixels &&
      (uint64_t)plan->out_width * plan->out_height > limits->max_pixels)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "output %ux%u exceeds the pixel limit", plan->out_width,
                   plan->out_height);
  if (plan->canvas_width > IC_MAX_GEOMETRY || plan->canvas_height > IC_MAX_GEOMETRY ||
      (limits->max_pixels &&
       (uint64_t)plan->canvas_width * plan->canvas_height > limits->max_pixels))
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "the extended or padded output %ux%u exceeds the limits",
                   plan->canvas_width, plan->canvas_height);
  /* The 1e-9 keeps an exact size exact (256 * w / w must not round up to 257). */
  double headroom = decoder->exact_scaling ? 1.0 : IC_SHRINK_HEADROOM;
  uint32_t need_w = (uint32_t)ceil(headroom * plan->out_width *
                                   (double)h->width / plan->crop_width - 1e-9);
  uint32_t need_h = (uint32_t)ceil(headroom * plan->out_height *
                                   (double)h->height / plan->crop_height - 1e-9);
  decoder->ops->choose_size(decoder, need_w, need_h, request->shrink_on_load, decode_w,
                       decode_h);
  if (request->preview) {
    cap_to_decode(plan, h->width, h->height, *decode_w, *decode_h);
    ic_plan_canvas(plan, request);
  }
  return IC_OK;
}

static ic_status resample(ic_decoder *decoder, const ic_request *request,
                          const ic_limits *limits, ic_result *result, ic_plan *planned,
                          uint8_t **pixels, uint32_t *width, uint32_t *height,
                          int *channels, uint8_t **kept_icc, size_t *kept_size) {
  ic_plan plan;
  memset(&plan, 0, sizeof(plan));
  const ic_header *h = &decoder->header;
  uint32_t decode_w, decode_h;
  ic_status status =
      plan_decode(decoder, request, limits, result, &plan, &decode_w, &decode_h);
  if (status != IC_OK) return status;
  resize_sink sink = {
      .base = {.begin = resize_begin, .row = resize_row},
      .plan = &plan,
      .full_width = h->width,
      .full_height = h->height,
      .pixel_scale = decoder->pixel_scale,
      .filter = request->filter,
      .colour = &decoder->header.colour,
      .colour_mode = request->colour,
  };
  status = ic_decoder_run(decoder, &sink.base, result);
  if (status == IC_OK) {
    *pixels = ic_resizer_finish(sink.resizer);
    if (!*pixels)
      status = ic_fail(result, IC_ERR_TRUNCATED, "image ended early");
    *width = plan.out_width;
    *height = plan.out_height;
    *channels = sink.channels;
    /* Colour on the small result: its cost does not grow with the source. */
    if (*pixels) ic_colour_step_finish(&sink.step, *pixels, *width, *height);
  }
  *kept_icc = sink.step.kept;
  *kept_size = sink.step.kept_size;
  *planned = plan;
  ic_colour_step_end(&sink.step);
  ic_resizer_destroy(sink.resizer);
  return status;
}

/* Samples per summary cell along each axis past which a cell is sampled rather than read
 * whole: the output is already low-pass filtered by the resampler, so an 8x8 grid of its
 * pixels averages a cell to within a level or two, at a fixed cost whatever the output size. */
#define SUMMARY_GRID 8

/* The upright output averaged down to at most IC_SUMMARY_SIDE a side, as straight RGBA.
 * Cells of at most SUMMARY_GRID pixels a side (small outputs) are averaged exactly, with
 * fractional coverage at their edges; larger cells by an even SUMMARY_GRID x SUMMARY_GRID
 * grid of samples, so the cost stays at most IC_SUMMARY_SIDE^2 * SUMMARY_GRID^2 pixel reads. */
ic_status ic_summarize(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                       ic_result *result) {
  uint32_t longest = width > height ? width : height;
  uint32_t sw = width, sh = height;
  if (longest > IC_SUMMARY_SIDE) {
    sw = (uint32_t)(((uint64_t)width * IC_SUMMARY_SIDE + longest / 2) / longest);
    sh = (uint32_t)(((uint64_t)height * IC_SUMMARY_SIDE + longest / 2) / longest);
    if (sw == 0) sw = 1;
    if (sh == 0) sh = 1;
  }
  uint8_t *out = malloc((size_t)sw * sh * 4);
  if (!out) return ic_fail(result, IC_ERR_NO_MEMORY, "summary buffer failed");
  double step_x = (double)width / sw, step_y = (double)height / sh;
  int sampled = step_x > SUMMARY_GRID || step_y > SUMMARY_GRID;
  for (uint32_t y = 0; y < sh; y++) {
    double top = y * step_y, bottom = (y + 1) * step_y;
    for (uint32_t x = 0; x < sw; x++) {
      double left = x * step_x, right = (x + 1) * step_x;
      double sum[4] = {0, 0, 0, 0}, total = 0;
      if (sampled) {
        for (int j = 0; j < SUMMARY_GRID; j++) {
          uint32_t sy = (uint32_t)(top + (j + 0.5) * step_y / SUMMARY_GRID);
          if (sy >= height) sy = height - 1;
          for (int i = 0; i < SUMMARY_GRID; i++) {
            uint32_t sx = (uint32_t)(left + (i + 0.5) * step_x / SUMMARY_GRID);
            if (sx >= width) sx = width - 1;
            const uint8_t *p = pixels + ((size_t)sy * width + sx) * channels;
            sum[0] += p[0];
            sum[1] += p[1];
            sum[2] += p[2];
            sum[3] += channels == 4 ? p[3] : 255;
          }
        }
        total = SUMMARY_GRID * SUMMARY_GRID;
      } else {
        for (uint32_t sy = (uint32_t)top; sy < height && sy < bottom; sy++) {
          double wy = fmin(bottom, sy + 1.0) - fmax(top, (double)sy);
          for (uint32_t sx = (uint32_t)left; sx < width && sx < right; sx++) {
            double w = wy * (fmin(right, sx + 1.0) - fmax(left, (double)sx));
            if (w <= 0) continue;
            const uint8_t *p = pixels + ((size_t)sy * width + sx) * channels;
            sum[0] += w * p[0];
            sum[1] += w * p[1];
            sum[2] += w * p[2];
            sum[3] += w * (channels == 4 ? p[3] : 255);
            total += w;
          }
        }
      }
      uint8_t *cell = out + ((size_t)y * sw + x) * 4;
      for (int c = 0; c < 4; c++) {
        double v = total > 0 ? sum[c] / total + 0.5 : 0;
        cell[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
      }
    }
  }
  result->summary = out;
  result->summary_width = sw;
  result->summary_height = sh;
  return IC_OK;
}

ic_status ic_finish_upright(uint8_t **pixels, uint32_t *width_io, uint32_t *height_io,
                            int *channels_io, ic_plan *plan, const ic_request *request,
                            const ic_control *control, int *smart_chosen, uint32_t *smart_x,
                            uint32_t *smart_y, ic_result *result) {
  const ic_geometry *geometry = &request->geometry;
  const ic_effects *effects = &request->effects;
  uint8_t *upright = *pixels;
  uint32_t width = *width_io, height = *height_io;
  int channels = *channels_io;
  /* The window (a smart crop's part of the upright resample), filtered, then placed. */
  if (!plan->smart || plan->window_width > width) plan->window_width = width;
  if (!plan->smart || plan->window_height > height) plan->window_height = height;
  if (plan->smart) {
    if (!*smart_chosen) {
      ic_smart_window(upright, width, height, channels, plan->window_width,
                      plan->window_height, smart_x, smart_y);
      *smart_chosen = 1;
    }
    ic_plan window = *plan;
    ic_geometry bare;
    memset(&bare, 0, sizeof(bare));
    window.canvas_width = plan->window_width;
    window.canvas_height = plan->window_height;
    window.place_x = window.place_y = 0;
    uint8_t *cut = ic_canvas(upright, width, channels, *smart_x, *smart_y, &window, &bare,
                             &channels);
    free(upright);
    *pixels = upright = cut;
    if (!upright) return ic_fail(result, IC_ERR_NO_MEMORY, "window buffer failed");
    width = plan->window_width;
    height = plan->window_height;
  }
  if (effects->blur_sigma > 0 || effects->sharpen_sigma > 0 || effects->pixelate > 1) {
    ic_status status = ic_apply_effects(upright, width, height, channels, effects, control,
                                        result);
    if (status != IC_OK) return status;
  }
  ic_plan_canvas(plan, request);
  if (plan->canvas_width != width || plan->canvas_height != height || geometry->has_background) {
    uint8_t *canvas = ic_canvas(upright, width, channels, 0, 0, plan, geometry, &channels);
    free(upright);
    *pixels = upright = canvas;
    if (!canvas) return ic_fail(result, IC_ERR_NO_MEMORY, "canvas buffer failed");
    width = plan->canvas_width;
    height = plan->canvas_height;
  }
  *width_io = width;
  *height_io = height;
  *channels_io = channels;
  if (request->watermark.pixels &&
      ic_apply_watermark(upright, width, height, channels, &request->watermark,
                         request->filter, result) != IC_OK)
    return result->status;
  return IC_OK;
}

/* A trim's first stage (trim.c): the whole picture upright at a working size (twice the box,
 * 512 to 4096 a side, the box when larger), its borders found; `decoder` becomes one over what
 * is left, and `next` the request for it: rotation and mirroring done, a crop's pixels made
 * the working picture's. */
static ic_status trim_first_stage(ic_decoder **decoder, const ic_request *request,
                                  const ic_limits *limits, ic_result *result, ic_request *next,
                                  uint8_t **first, uint8_t **kept_icc, size_t *kept_size) {
  ic_request whole = *request;
  memset(&whole.geometry, 0, sizeof(whole.geometry));
  memset(&whole.effects, 0, sizeof(whole.effects));
  memset(&whole.watermark, 0, sizeof(whole.watermark));
  whole.geometry.rotate = request->geometry.rotate;
  whole.geometry.flip_horizontal = request->geometry.flip_horizontal;
  whole.geometry.flip_vertical = request->geometry.flip_vertical;
  whole.summary = 0;
  whole.fit = IC_FIT_CONTAIN;
  whole.allow_upscale = 0;
  uint32_t longest = request->width > request->height ? request->width : request->height;
  uint32_t side = longest > 2048 ? longest : 2 * longest < 512 ? 512 : 2 * longest;
  whole.width = whole.height = side;
  ic_header header = (*decoder)->header;
  ic_plan plan;
  uint8_t *pixels = NULL;
  uint32_t width = 0, height = 0;
  int channels = 0;
  ic_status status = resample(*decoder, &whole, limits, result, &plan, &pixels, &width,
                              &height, &channels, kept_icc, kept_size);
  (*decoder)->ops->destroy(*decoder);
  *decoder = NULL;
  if (status != IC_OK) return status;
  uint8_t *upright = pixels;
  if (plan.orientation != 1) {
    uint32_t w, h;
    upright = ic_orient(pixels, width, height, channels, plan.orientation, &w, &h);
    free(pixels);
    if (!upright) return ic_fail(result, IC_ERR_NO_MEMORY, "orientation buffer failed");
    width = w;
    height = h;
  }
  uint32_t x, y, w, h;
  ic_trim_box(upright, width, height, channels, &request->geometry, &x, &y, &w, &h);
  *decoder = ic_memory_decoder(upright, width, channels, x, y, w, h, result);
  if (!*decoder) {
    free(upright);
    return result->status;
  }
  *first = upright;
  *next = *request;
  next->geometry.trim = 0;
  next->geometry.rotate = 0;
  next->geometry.flip_horizontal = next->geometry.flip_vertical = 0;
  int swap = plan.orientation >= 5 && plan.orientation <= 8;
  double shown = swap ? header.height : header.width;
  double factor = shown > 0 ? width / shown : 1;
  if (next->geometry.crop_width >= 1) next->geometry.crop_width = fmax(1, next->geometry.crop_width * factor);
  if (next->geometry.crop_height >= 1)
    next->geometry.crop_height = fmax(1, next->geometry.crop_height * factor);
  if (fabs(next->geometry.crop_gravity.offset_x) >= 1) next->geometry.crop_gravity.offset_x *= factor;
  if (fabs(next->geometry.crop_gravity.offset_y) >= 1) next->geometry.crop_gravity.offset_y *= factor;
  return IC_OK;
}

ic_status ic_thumbnail(const ic_source *source, const ic_request *request,
                       const ic_limits *limits, const int32_t *cancel_flag,
                       ic_result *result) {
  memset(result, 0, sizeof(*result));
  uint64_t started = ic_now_ns();
  ic_control control = {.cancel_flag = cancel_flag,
                        .deadline_ns = limits->decode_timeout_ms
                                           ? started + (uint64_t)limits->decode_timeout_ms * 1000000ull
                                           : 0};
  if (validate(request, result) != IC_OK) return result->status;
  ic_stream stream;
  if (ic_stream_open(&stream, source, result) != IC_OK) return result->status;
  if (ic_animates(request) && !request->preview) {
    /* An animated GIF or WebP stays animated; a still goes on as usual. */
    if (ic_stream_read_head(&stream, result) != IC_OK) {
      ic_stream_close(&stream);
      return result->status;
    }
    size_t magic_size = 0;
    const uint8_t *magic = ic_stream_magic(&stream, &magic_size);
    ic_format sniffed = ic_sniff(magic, magic_size);
    /* A WebP says in its first bytes whether it is animated (VP8X's animation flag), so a
     * still is never read whole twice; a GIF's frames are counted from its blocks. */
    int webp_animated = sniffed == IC_FORMAT_WEBP && magic_size >= 21 &&
                        memcmp(magic + 12, "VP8X", 4) == 0 && (magic[20] & 0x02);
    if (sniffed == IC_FORMAT_GIF || webp_animated) {
      const uint8_t *bytes = NULL;
      size_t size = 0;
      ic_status status = ic_stream_contents(&stream, limits, &control, &bytes, &size, result);
      if (status == IC_OK) status = ic_animate(bytes, size, sniffed, request, limits, &control,
                                               result);
      if (status != IC_ERR_UNSUPPORTED) {
        ic_stream_close(&stream);
        result->decode_ns = ic_now_ns() - started;
        return status;
      }
      memset(result, 0, sizeof(*result));
    }
    /* A still: from the start again, as the decoders read their own heads. */
    ic_stream_close(&stream);
    if (ic_stream_open(&stream, source, result) != IC_OK) return result->status;
  }
  ic_decoder *decoder = NULL;
  uint8_t *pixels = NULL;
  uint32_t width = 0, height = 0;
  int channels = 0;
  uint8_t *kept_icc = NULL;
  size_t kept_size = 0;
  ic_status status = request->preview
                         ? ic_preview_open(&stream, limits, &control, result, &decoder)
                         : ic_decoder_open(&stream, limits, &control, result, &decoder);
  ic_plan plan;
  memset(&plan, 0, sizeof(plan));
  ic_request trimmed;
  uint8_t *first = NULL; /* a trim's first stage, which the second reads */
  if (status == IC_OK && request->geometry.trim && !request->preview) {
    status = trim_first_stage(&decoder, request, limits, result, &trimmed, &first, &kept_icc,
                              &kept_size);
    if (status == IC_OK) request = &trimmed;
  }
  if (status == IC_OK) {
    /* The first stage's orientation and colour outcome are the source's; its profile, when
     * kept, too. */
    ic_result first_stage = *result;
    uint8_t *icc = NULL;
    size_t icc_size = 0;
    status = resample(decoder, request, limits, result, &plan, &pixels, &width,
                      &height, &channels, &icc, &icc_size);
    decoder->ops->destroy(decoder);
    if (first) {
      result->orientation = first_stage.orientation;
      result->profile = first_stage.profile;
      result->transform_cached = first_stage.transform_cached;
      free(icc);
    } else {
      kept_icc = icc;
      kept_size = icc_size;
    }
  }
  free(first);
  ic_stream_close(&stream);
  if (status != IC_OK) {
    free(kept_icc);
    return status;
  }

  uint32_t upright_w, upright_h;
  uint8_t *upright = pixels;
  if (plan.orientation != 1) {
    upright = ic_orient(pixels, width, height, channels, plan.orientation,
                        &upright_w, &upright_h);
    free(pixels);
    if (!upright) {
      free(kept_icc);
      return ic_fail(result, IC_ERR_NO_MEMORY, "orientation buffer failed");
    }
    width = upright_w;
    height = upright_h;
  }
  int smart_chosen = 0;
  uint32_t smart_x = 0, smart_y = 0;
  status = ic_finish_upright(&upright, &width, &height, &channels, &plan, request, &control,
                             &smart_chosen, &smart_x, &smart_y, result);
  if (status != IC_OK) {
    free(upright);
    free(kept_icc);
    return status;
  }
  uint64_t decoded = ic_now_ns();
  result->decode_ns = decoded - started;
  size_t count = (size_t)width * height;
  result->has_alpha = ic_has_transparency(upright, count, channels);
  if (channels == 4 && !result->has_alpha) {
    drop_alpha(upright, count);
    channels = 3;
  }
  if (request->summary && ic_summarize(upright, width, height, channels, result) != IC_OK) {
    free(upright);
    free(kept_icc);
    return result->status;
  }
  ic_format format = (ic_format)request->format;
  if (request->format == IC_OUTPUT_AUTO)
    format = result->has_alpha ? IC_FORMAT_PNG : IC_FORMAT_JPEG;
  ic_format from = result->source_format;
  ic_encode_options options = {.quality = request->quality,
                               .png_level = request->png_level,
                               .png_interlaced = 0,
                               .png_photographic = from == IC_FORMAT_JPEG ||
                                                   from == IC_FORMAT_HEIC ||
                                                   from == IC_FORMAT_AVIF,
                               .avif_speed = request->avif_speed,
                               .icc = kept_icc,
                               .icc_size = kept_size};
  status = ic_encode_as(format, upright, width, height, channels, &options, &result->data,
                        &result->size, result);
  result->format = format;
  if (!ic_format_keeps_alpha(format)) result->has_alpha = 0;
  free(upright);
  free(kept_icc);
  result->encode_ns = ic_now_ns() - decoded;
  result->width = width;
  result->frames = 1;
  result->height = height;
  return status;
}

ic_status ic_estimate_thumbnail(const ic_source *source, const ic_request *request,
                                const ic_limits *limits, ic_estimate *estimate,
                                ic_result *result) {
  memset(result, 0, sizeof(*result));
  memset(estimate, 0, sizeof(*estimate));
  ic_control control = {.cancel_flag = NULL, .deadline_ns = 0};
  if (validate(request, result) != IC_OK) return result->status;
  ic_stream stream;
  if (ic_stream_open(&stream, source, result) != IC_OK) return result->status;
  ic_decoder *decoder = NULL;
  ic_status status = ic_decoder_open(&stream, limits, &control, result, &decoder);
  if (status == IC_OK) {
    ic_plan plan;
    uint32_t decode_w = 0, decode_h = 0;
    status = plan_decode(decoder, request, limits, result, &plan, &decode_w, &decode_h);
    if (status == IC_OK) {
      const ic_header *h = &decoder->header;
      double sx, sy;
      decode_scales(decoder->pixel_scale, decode_w, decode_h, h->width, h->height, &sx, &sy);
      /* The resampler as the decode will build it (RGBA: the larger of the two). */
      size_t resizer = ic_resizer_memory(decode_w, decode_h, 4, plan.crop_width * sx,
                                         plan.crop_height * sy, plan.out_width,
                                         plan.out_height, request->filter);
      uint64_t output = (uint64_t)plan.out_width * plan.out_height * 4 +
                        (uint64_t)plan.canvas_width * plan.canvas_height * 4;
      /* Decoder and resampler run together; then the upright copy and the encoder's
       * buffer beside the result, and the encoder's library (AUTO writes PNG or JPEG, whose
       * libraries hold no more than the buffer). Counted together: freed decoder memory is
       * not always given back before the encoder allocates. */
      uint64_t library = request->format == IC_OUTPUT_AUTO
                             ? 0
                             : ic_encoder_memory((ic_format)request->format, plan.out_width,
                                                 plan.out_height);
      /* The profile stays until encoding (copied into the output with IC_COLOUR_KEEP). */
      estimate->bytes = decoder->ops->working_memory(decoder) + resizer +
                        2 * output + library + 2 * (uint64_t)h->colour.icc_size;
      /* An animation (animation.c) composes on two full canvases beside the resampler, and
       * libwebp's animation encoder keeps about four output frames. */
      if (ic_animates(request) &&
          (result->source_format == IC_FORMAT_GIF || result->source_format == IC_FORMAT_WEBP))
        estimate->bytes += (uint64_t)h->width * h->height * 4 * 2 + 4 * output;
      estimate->first_use = ic_first_use_pending(ic_decoder_first_use(decoder)) +
                            (request->format == IC_OUTPUT_AUTO
                                 ? 0
                                 : ic_encoder_first_use((ic_format)request->format));
      estimate->decode_width = decode_w;
      estimate->decode_height = decode_h;
      estimate->source_width = h->width;
      estimate->source_height = h->height;
    }
    decoder->ops->destroy(decoder);
  }
  ic_stream_close(&stream);
  return status;
}
