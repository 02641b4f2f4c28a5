/*
 * Source descriptions to profiles: PNG gAMA and cHRM, and HEIF nclx (transfer and primaries),
 * as lcms2 profiles and their ICC bytes, so that one cache and one build serve them like an
 * embedded profile.
 */
#include "colour_internal.h"

#include <math.h>
#include <stdlib.h>

const double ic_srgb_primaries[8] = {0.3127, 0.3290, 0.64, 0.33, 0.30, 0.60, 0.15, 0.06};

static cmsToneCurve *transfer_curve(const ic_colour_info *info) {
  if (info->gamma > 0) return cmsBuildGamma(NULL, info->gamma);
  double srgb[5] = {2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045};
  double bt709[5] = {1 / 0.45, 1 / 1.099, 0.099 / 1.099, 1 / 4.5, 0.081};
  switch (info->transfer) {
    case 8: return cmsBuildGamma(NULL, 1.0);
    case 1:
    case 6:
    case 14:
    case 15: return cmsBuildParametricToneCurve(NULL, 4, bt709);
    default: return cmsBuildParametricToneCurve(NULL, 4, srgb);
  }
}

/* A profile for a gamma/primaries description (PNG gAMA + cHRM, HEIF nclx). */
static cmsHPROFILE synthetic_profile(const ic_colour_info *info) {
  const double *p = info->has_primaries ? info->primaries : ic_srgb_primaries;
  cmsToneCurve *curve = transfer_curve(info);
  if (!curve) return NULL;
  cmsCIExyY white = {p[0], p[1], 1.0};
  cmsHPROFILE profile = NULL;
  if (info->space == IC_SPACE_GREY) {
    profile = cmsCreateGrayProfile(&white, curve);
  } else {
    cmsCIExyYTRIPLE primaries = {{p[2], p[3], 1.0}, {p[4], p[5], 1.0}, {p[6], p[7], 1.0}};
    cmsToneCurve *curves[3] = {curve, curve, curve};
    profile = cmsCreateRGBProfile(&white, &primaries, curves);
  }
  cmsFreeToneCurve(curve);
  return profile;
}

/* No chunks at all, the sRGB chunk, or gamma 1/2.2 on sRGB primaries (what most PNG
 * writers stamp, meaning sRGB). */
int ic_synthetic_is_srgb(const ic_colour_info *info) {
  if (info->srgb) return 1;
  int srgb_curve = info->gamma > 0 ? fabs(info->gamma - 2.2) <= 0.05
                                   : info->transfer == 0 || info->transfer == 13;
  if (!srgb_curve) return 0;
  if (!info->has_primaries) return 1;
  for (int i = 0; i < 8; i++)
    if (fabs(info->primaries[i] - ic_srgb_primaries[i]) > 0.01) return 0;
  return 1;
}

cmsColorSpaceSignature ic_space_signature(ic_colour_space space) {
  switch (space) {
    case IC_SPACE_GREY: return cmsSigGrayData;
    case IC_SPACE_CMYK: return cmsSigCmykData;
    default: return cmsSigRgbData;
  }
}

uint8_t *ic_synthetic_icc(const ic_colour_info *info, size_t *size) {
  cmsHPROFILE profile = synthetic_profile(info);
  if (!profile) return NULL;
  cmsUInt32Number length = 0;
  uint8_t *bytes = NULL;
  if (cmsSaveProfileToMem(profile, NULL, &length) && length > 0 &&
      (bytes = malloc(length)) && !cmsSaveProfileToMem(profile, bytes, &length)) {
    free(bytes);
    bytes = NULL;
  }
  cmsCloseProfile(profile);
  *size = length;
  return bytes;
}
