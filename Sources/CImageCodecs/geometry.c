/*
 * Output geometry: which part of the source maps onto how many pixels.
 *
 * The target box applies to the displayed image, so for orientations that
 * swap the axes (5...8) the box is swapped before planning in the stored
 * frame, where decoding and resampling happen.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

static uint32_t at_least_one(double v) {
  double r = floor(v + 0.5);
  return r < 1.0 ? 1u : (uint32_t)r;
}

ic_status ic_plan_make(uint32_t width, uint32_t height, int orientation,
                       const ic_request *request, ic_plan *plan,
                       ic_result *result) {
  if (request->width == 0 && request->height == 0)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT,
                   "the target box needs a width or a height");
  int swap = orientation >= 5 && orientation <= 8;
  double box_w = swap ? request->height : request->width;
  double box_h = swap ? request->width : request->height;
  double w = width, h = height;
  ic_fit fit = request->fit;
  /* With one side open, only "contain" is meaningful. */
  if (box_w == 0 || box_h == 0) fit = IC_FIT_CONTAIN;

  plan->crop_x = 0;
  plan->crop_y = 0;
  plan->crop_width = w;
  plan->crop_height = h;

  switch (fit) {
  case IC_FIT_FILL: {
    double out_w = box_w, out_h = box_h;
    if (!request->allow_upscale) {
      if (out_w > w) out_w = w;
      if (out_h > h) out_h = h;
    }
    plan->out_width = at_least_one(out_w);
    plan->out_height = at_least_one(out_h);
    break;
  }
  case IC_FIT_COVER: {
    double s = fmax(box_w / w, box_h / h);
    if (!request->allow_upscale && s > 1.0) s = 1.0;
    double out_w = fmin(box_w, w * s), out_h = fmin(box_h, h * s);
    plan->out_width = at_least_one(out_w);
    plan->out_height = at_least_one(out_h);
    plan->crop_width = fmin(w, plan->out_width / s);
    plan->crop_height = fmin(h, plan->out_height / s);
    plan->crop_x = (w - plan->crop_width) / 2.0;
    plan->crop_y = (h - plan->crop_height) / 2.0;
    break;
  }
  case IC_FIT_CONTAIN:
  default: {
    double s;
    if (box_w == 0) s = box_h / h;
    else if (box_h == 0) s = box_w / w;
    else s = fmin(box_w / w, box_h / h);
    if (!request->allow_upscale && s > 1.0) s = 1.0;
    plan->out_width = at_least_one(w * s);
    plan->out_height = at_least_one(h * s);
    break;
  }
  }
  return IC_OK;
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
  int swap = orientation >= 5 && orientation <= 8;
  *out_width = swap ? plan.out_height : plan.out_width;
  *out_height = swap ? plan.out_width : plan.out_height;
  return IC_OK;
}
