/*
 * WebP encoding (libwebp): lossy at the request's quality, alpha kept (lossless-coded alpha
 * plane at full quality, so edges stay exact).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <webp/encode.h>
#include <webp/mux.h>

ic_status ic_encode_webp(const uint8_t *pixels, uint32_t width, uint32_t height,
                         int channels, const ic_encode_options *options, uint8_t **out,
                         size_t *out_size, ic_result *result) {
  WebPConfig config;
  if (!WebPConfigInit(&config))
    return ic_fail(result, IC_ERR_ENCODE, "libwebp version mismatch");
  int quality = options->quality < 1 ? 1 : options->quality > 100 ? 100 : options->quality;
  config.quality = (float)quality;
  /* Method 4 is libwebp's default balance; at thumbnail sizes 6 costs twice the time for
   * 1-2% fewer bytes (docs/BENCHMARKS.md, "Encoding"). */
  config.method = 4;
  config.exact = options->webp_exact;
  config.lossless = options->webp_lossless;
  WebPPicture picture;
  if (!WebPPictureInit(&picture))
    return ic_fail(result, IC_ERR_ENCODE, "libwebp version mismatch");
  picture.width = (int)width;
  picture.height = (int)height;
  /* Lossless needs the ARGB picture: from YUV it would no longer be lossless. */
  picture.use_argb = options->webp_lossless;
  int stride = (int)(width * (uint32_t)channels);
  int imported = channels == 4 ? WebPPictureImportRGBA(&picture, pixels, stride)
                               : WebPPictureImportRGB(&picture, pixels, stride);
  if (!imported) {
    WebPPictureFree(&picture);
    return ic_fail(result, IC_ERR_NO_MEMORY, "WebP picture allocation failed");
  }
  WebPMemoryWriter writer;
  WebPMemoryWriterInit(&writer);
  picture.writer = WebPMemoryWrite;
  picture.custom_ptr = &writer;
  int ok = WebPEncode(&config, &picture);
  int error = picture.error_code;
  WebPPictureFree(&picture);
  if (!ok) {
    WebPMemoryWriterClear(&writer);
    return ic_fail(result, IC_ERR_ENCODE, "WebP encoding failed (%d)", error);
  }
  const uint8_t *bytes = writer.mem;
  size_t size = writer.size;
  WebPData assembled = {NULL, 0};
  if (options->icc && options->icc_size > 0) {
    /* The profile goes in an ICCP chunk of an extended (VP8X) file, through the muxer. */
    WebPData image = {writer.mem, writer.size}, profile = {options->icc, options->icc_size};
    WebPMux *mux = WebPMuxCreate(&image, 0);
    int muxed = mux && WebPMuxSetChunk(mux, "ICCP", &profile, 0) == WEBP_MUX_OK &&
                WebPMuxAssemble(mux, &assembled) == WEBP_MUX_OK;
    WebPMuxDelete(mux);
    if (!muxed) {
      WebPDataClear(&assembled);
      WebPMemoryWriterClear(&writer);
      return ic_fail(result, IC_ERR_ENCODE, "WebP profile chunk could not be added");
    }
    bytes = assembled.bytes;
    size = assembled.size;
  }
  /* Our callers free with free(): hand over a copy of libwebp's buffer. */
  *out = malloc(size);
  if (*out) memcpy(*out, bytes, size);
  *out_size = size;
  WebPDataClear(&assembled);
  WebPMemoryWriterClear(&writer);
  if (!*out) return ic_fail(result, IC_ERR_NO_MEMORY, "output allocation failed");
  return IC_OK;
}
