/*
 * Output geometry: which part of the source maps onto how many pixels, and how the result
 * is turned upright and placed.
 *
 * Rules kept here:
 * - Every request field (box, crop, gravity, offsets) is in displayed terms: after the EXIF
 *   orientation and the request's rotation and mirroring, composed into one orientation
 *   code. Planning happens in that frame; only the final source region is mapped back to
 *   the stored frame, where decoding and resampling happen.
 * - A window never leaves what it is cut from: gravity and offsets are clamped. An offset
 *   below 1 either way is a fraction of the side it moves along (imgproxy's rule).
 * - A smart crop resamples the whole region at the cover scale and leaves the window to
 *   ic_smart_window; the free side is capped so the extra resample stays small. A smart `c`
 *   crop does the same over the whole picture, its window the part of the crop shown.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

static uint32_t at_least_one(double v) {
  double r = floor(v + 0.5);
  return r < 1.0 ? 1u : (uint32_t)r;
}

static int swaps_axes(int orientation) { return orientation >= 5 && orientation <= 8; }

/* The stored point (sx, sy) shown at the displayed point (x, y), for a stored picture of
 * width x height: ic_orient's table, continuous (a pixel [x, x+1) maps to [W-x-1, W-x)). */
static void stored_point(int orientation, double width, double height, double x, double y,
                         double *sx, double *sy) {
  switch (orientation) {
  case 2: *sx = width - x; *sy = y; break;
  case 3: *sx = width - x; *sy = height - y; break;
  case 4: *sx = x; *sy = height - y; break;
  case 5: *sx = y; *sy = x; break;
  case 6: *sx = y; *sy = height - x; break;
  case 7: *sx = width - y; *sy = height - x; break;
  case 8: *sx = width - y; *sy = x; break;
  default: *sx = x; *sy = y; break;
  }
}

/* The one orientation code that shows `first` and then `second` applied to its result.
 * Found by testing the eight on a 2x3 picture's pixel centres, so it follows the table
 * above and nothing else. */
static int compose(int first, int second) {
  const double width = 2, height = 3;
  double mid_w = swaps_axes(first) ? height : width, mid_h = swaps_axes(first) ? width : height;
  double shown_w = swaps_axes(second) ? mid_h : mid_w, shown_h = swaps_axes(second) ? mid_w : mid_h;
  for (int candidate = 1; candidate <= 8; candidate++) {
    int same = 1;
    for (double y = 0.5; y < shown_h && same; y += 1)
      for (double x = 0.5; x < shown_w && same; x += 1) {
        double mx, my, sx, sy, cx, cy;
        stored_point(second, mid_w, mid_h, x, y, &mx, &my);
        stored_point(first, width, height, mx, my, &sx, &sy);
        stored_point(candidate, width, height, x, y, &cx, &cy);
        same = cx == sx && cy == sy;
      }
    if (same) return candidate;
  }
  return first;
}

/* EXIF, then the request's clockwise rotation, then its mirroring. */
static int upright_orientation(int exif, const ic_geometry *g) {
  int o = exif >= 1 && exif <= 8 ? exif : 1;
  switch (g->rotate) {
  case 90: o = compose(o, 6); break;
  case 180: o = compose(o, 3); break;
  case 270: o = compose(o, 8); break;
  default: break;
  }
  if (g->flip_horizontal) o = compose(o, 2);
  if (g->flip_vertical) o = compose(o, 4);
  return o;
}

double ic_offset_pixels(double offset, double outer) {
  if (!isfinite(offset)) return 0;
  return fabs(offset) < 1 ? offset * outer : offset;
}

double ic_anchor_place(const ic_anchor *anchor, int vertical, double outer, double inner) {
  double room = outer - inner;
  if (room <= 0) return 0;
  double offset = ic_offset_pixels(vertical ? anchor->offset_y : anchor->offset_x, outer);
  double start;
  switch (anchor->type) {
  case IC_GRAVITY_FOCUS: {
    double focus = vertical ? anchor->focus_y : anchor->focus_x;
    if (!isfinite(focus)) focus = 0.5;
    start = focus * outer - inner / 2;
    break;
  }
  case IC_GRAVITY_NORTH:
  case IC_GRAVITY_NORTH_EAST:
  case IC_GRAVITY_NORTH_WEST:
    start = vertical ? offset : anchor->type == IC_GRAVITY_NORTH ? room / 2 + offset
            : anchor->type == IC_GRAVITY_NORTH_EAST ? room - offset : offset;
    break;
  case IC_GRAVITY_SOUTH:
  case IC_GRAVITY_SOUTH_EAST:
  case IC_GRAVITY_SOUTH_WEST:
    start = vertical ? room - offset : anchor->type == IC_GRAVITY_SOUTH ? room / 2 + offset
            : anchor->type == IC_GRAVITY_SOUTH_EAST ? room - offset : offset;
    break;
  case IC_GRAVITY_EAST: start = vertical ? room / 2 + offset : room - offset; break;
  case IC_GRAVITY_WEST: start = vertical ? room / 2 + offset : offset; break;
  default: start = room / 2 + offset; break;
  }
  return start < 0 ? 0 : start > room ? room : start;
}

/* A crop side: 0 keeps the whole side, below 1 is a fraction of it, else pixels (at most the
 * side). */
static double crop_side(double asked, double side) {
  if (!isfinite(asked) || asked <= 0) return side;
  double pixels = asked < 1 ? asked * side : asked;
  return pixels < 1 ? 1 : pixels > side ? side : pixels;
}

/* How much longer than the window a smart crop's resample may be along its free side. */
#define SMART_SPAN 4.0

ic_status ic_plan_make(uint32_t width, uint32_t height, int orientation,
                       const ic_request *request, ic_plan *plan,
                       ic_result *result) {
  if (request->width == 0 && request->height == 0)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "the target box needs a width or a height");
  const ic_geometry *g = &request->geometry;
  memset(plan, 0, sizeof(*plan));
  plan->orientation = upright_orientation(orientation, g);
  int swap = swaps_axes(plan->orientation);
  double shown_w = swap ? height : width, shown_h = swap ? width : height;
  double box_w = request->width, box_h = request->height;

  /* The region of the displayed source the box maps from: all of it, or the crop. */
  double rx = 0, ry = 0, rw = shown_w, rh = shown_h;
  /* A smart crop's place is the pixels' to choose: the region is sized, and centred until
   * then; what the box takes of it is chosen with it (below). */
  int crop_smart = 0;
  if (g->crop_width > 0 || g->crop_height > 0) {
    rw = crop_side(g->crop_width, shown_w);
    rh = crop_side(g->crop_height, shown_h);
    crop_smart = g->crop_gravity.type == IC_GRAVITY_SMART && (rw < shown_w || rh < shown_h);
    ic_anchor centre = {.type = IC_GRAVITY_CENTRE};
    const ic_anchor *place = g->crop_gravity.type == IC_GRAVITY_SMART ? &centre : &g->crop_gravity;
    rx = ic_anchor_place(place, 0, shown_w, rw);
    ry = ic_anchor_place(place, 1, shown_h, rh);
  }

  ic_fit fit = request->fit;
  /* With one side open, only "contain" is meaningful. */
  if (box_w == 0 || box_h == 0) fit = IC_FIT_CONTAIN;
  if (fit == IC_FIT_AUTO) fit = (rw >= rh) == (box_w >= box_h) ? IC_FIT_COVER : IC_FIT_CONTAIN;

  double wx = rx, wy = ry, ww = rw, wh = rh; /* the window, displayed */
  double out_w, out_h;
  switch (fit) {
  case IC_FIT_FILL:
    out_w = box_w;
    out_h = box_h;
    if (!request->allow_upscale) {
      if (out_w > rw) out_w = rw;
      if (out_h > rh) out_h = rh;
    }
    break;
  case IC_FIT_COVER: {
    double s = fmax(box_w / rw, box_h / rh);
    if (!request->allow_upscale && s > 1.0) s = 1.0;
    out_w = fmin(box_w, rw * s);
    out_h = fmin(box_h, rh * s);
    uint32_t final_w = at_least_one(out_w), final_h = at_least_one(out_h);
    ww = fmin(rw, final_w / s);
    wh = fmin(rh, final_h / s);
    if ((g->gravity.type == IC_GRAVITY_SMART && (ww < rw || wh < rh)) || crop_smart) {
      /* Resample the region along the free side (at most SMART_SPAN windows of it, about
       * the centre) and leave the choice to the pixels; a smart crop's region is the whole
       * picture. */
      double bx = crop_smart ? 0 : rx, by = crop_smart ? 0 : ry;
      double bw = crop_smart ? shown_w : rw, bh = crop_smart ? shown_h : rh;
      double span_w = fmin(bw, ww * SMART_SPAN), span_h = fmin(bh, wh * SMART_SPAN);
      wx = bx + (bw - span_w) / 2;
      wy = by + (bh - span_h) / 2;
      ww = span_w;
      wh = span_h;
      plan->smart = 1;
      plan->window_width = final_w;
      plan->window_height = final_h;
      out_w = ww * s;
      out_h = wh * s;
    } else {
      /* Offsets in pixels are output pixels: in the region's they are 1/s as long (a
       * fraction of the side is the same in both). */
      ic_anchor anchor = g->gravity;
      if (fabs(anchor.offset_x) >= 1) anchor.offset_x /= s;
      if (fabs(anchor.offset_y) >= 1) anchor.offset_y /= s;
      wx = rx + ic_anchor_place(&anchor, 0, rw, ww);
      wy = ry + ic_anchor_place(&anchor, 1, rh, wh);
      out_w = final_w;
      out_h = final_h;
    }
    break;
  }
  case IC_FIT_CONTAIN:
  default: {
    double s;
    if (box_w == 0) s = box_h / rh;
    else if (box_h == 0) s = box_w / rw;
    else s = fmin(box_w / rw, box_h / rh);
    if (!request->allow_upscale && s > 1.0) s = 1.0;
    out_w = rw * s;
    out_h = rh * s;
    break;
  }
  }
  if (crop_smart && !plan->smart) {
    /* The whole crop is shown (contain, fill): its place is chosen among the picture's
     * windows of its size, as a cover crop's is. */
    double sx = out_w / rw, sy = out_h / rh;
    double span_w = fmin(shown_w, rw * SMART_SPAN), span_h = fmin(shown_h, rh * SMART_SPAN);
    plan->smart = 1;
    plan->window_width = at_least_one(out_w);
    plan->window_height = at_least_one(out_h);
    wx = (shown_w - span_w) / 2;
    wy = (shown_h - span_h) / 2;
    ww = span_w;
    wh = span_h;
    out_w = span_w * sx;
    out_h = span_h * sy;
  }
  uint32_t shown_out_w = at_least_one(out_w), shown_out_h = at_least_one(out_h);
  if (!plan->smart) {
    plan->window_width = shown_out_w;
    plan->window_height = shown_out_h;
  }

  /* The window's corners, back in the stored frame. */
  double ax, ay, bx, by;
  stored_point(plan->orientation, width, height, wx, wy, &ax, &ay);
  stored_point(plan->orientation, width, height, wx + ww, wy + wh, &bx, &by);
  plan->crop_x = fmin(ax, bx);
  plan->crop_y = fmin(ay, by);
  plan->crop_width = fabs(bx - ax);
  plan->crop_height = fabs(by - ay);
  plan->out_width = swap ? shown_out_h : shown_out_w;
  plan->out_height = swap ? shown_out_w : shown_out_h;
  ic_plan_canvas(plan, request);
  return IC_OK;
}

void ic_plan_canvas(ic_plan *plan, const ic_request *request) {
  const ic_geometry *g = &request->geometry;
  uint64_t w = plan->window_width, h = plan->window_height;
  double x = 0, y = 0;
  if (g->extend) {
    uint64_t cw = request->width > w ? request->width : w;
    uint64_t ch = request->height > h ? request->height : h;
    x = floor(ic_anchor_place(&g->extend_gravity, 0, (double)cw, (double)w) + 0.5);
    y = floor(ic_anchor_place(&g->extend_gravity, 1, (double)ch, (double)h) + 0.5);
    w = cw;
    h = ch;
  }
  w += (uint64_t)g->pad_left + g->pad_right;
  h += (uint64_t)g->pad_top + g->pad_bottom;
  /* Saturated: the caller refuses a canvas over its limits. */
  plan->canvas_width = w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
  plan->canvas_height = h > UINT32_MAX ? UINT32_MAX : (uint32_t)h;
  plan->place_x = (uint32_t)x + g->pad_left;
  plan->place_y = (uint32_t)y + g->pad_top;
}

ic_status ic_output_size(uint32_t width, uint32_t height, int orientation,
                         const ic_request *request, uint32_t *out_width, uint32_t *out_height) {
  ic_result scratch;
  memset(&scratch, 0, sizeof(scratch));
  ic_plan plan;
  if (width == 0 || height == 0)
    return ic_fail(&scratch, IC_ERR_INVALID_ARGUMENT, "the source has no pixels");
  if (ic_plan_make(width, height, orientation, request, &plan, &scratch) != IC_OK)
    return scratch.status;
  *out_width = plan.canvas_width;
  *out_height = plan.canvas_height;
  return IC_OK;
}
