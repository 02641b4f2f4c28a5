/*
 * AVIF encoding (libheif with libaom): quality from the 1-100 scale as libheif maps it, alpha
 * as an auxiliary image, 4:2:0, one encoder thread (a decode thread must not fan out into
 * more cores than the pool was sized for), speed from the request.
 */
#include "internal.h"
#include "heif_api.h"

#include <stdlib.h>
#include <string.h>

typedef struct avif_output {
  uint8_t *data;
  size_t size;
  int failed;
} avif_output;

static struct heif_error write_output(struct heif_context *context, const void *data,
                                      size_t size, void *user) {
  (void)context;
  avif_output *out = user;
  struct heif_error ok = {heif_error_Ok, heif_suberror_Unspecified, "ok"};
  free(out->data);
  out->data = malloc(size ? size : 1);
  if (!out->data) {
    out->failed = 1;
    struct heif_error error = {heif_error_Memory_allocation_error, heif_suberror_Unspecified,
                               "output allocation failed"};
    return error;
  }
  memcpy(out->data, data, size);
  out->size = size;
  return ok;
}

ic_status ic_encode_avif(const uint8_t *pixels, uint32_t width, uint32_t height,
                         int channels, const ic_encode_options *options, uint8_t **out,
                         size_t *out_size, ic_result *result) {
  char why[256];
  if (ic_heif_load(why, sizeof(why)) != 0) return ic_fail(result, IC_ERR_ENCODE, "%s", why);
  struct heif_context *context = ic_libheif.context_alloc();
  if (!context) return ic_fail(result, IC_ERR_NO_MEMORY, "HEIF context allocation failed");
  struct heif_encoder *encoder = NULL;
  struct heif_image *image = NULL;
  avif_output output = {0};
  ic_status status = IC_OK;
  struct heif_error error =
      ic_libheif.context_get_encoder_for_format(context, heif_compression_AV1, &encoder);
  if (error.code != heif_error_Ok) {
    status = ic_fail(result, IC_ERR_ENCODE, "no AV1 encoder: %s", error.message);
    goto done;
  }
  int quality = options->quality < 1 ? 1 : options->quality > 100 ? 100 : options->quality;
  int speed = options->avif_speed < 0 ? 0 : options->avif_speed > 9 ? 9 : options->avif_speed;
  ic_libheif.encoder_set_lossy_quality(encoder, quality);
  ic_libheif.encoder_set_parameter_integer(encoder, "speed", speed);
  ic_libheif.encoder_set_parameter_integer(encoder, "threads", 1);
  int alpha = channels == 4;
  enum heif_chroma chroma = alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB;
  error = ic_libheif.image_create((int)width, (int)height, heif_colorspace_RGB, chroma, &image);
  if (error.code == heif_error_Ok)
    error = ic_libheif.image_add_plane(image, heif_channel_interleaved, (int)width, (int)height, 8);
  if (error.code != heif_error_Ok) {
    status = ic_fail(result, IC_ERR_NO_MEMORY, "AVIF image allocation failed");
    goto done;
  }
  int stride = 0;
  uint8_t *plane = ic_libheif.image_get_plane(image, heif_channel_interleaved, &stride);
  size_t row = (size_t)width * channels;
  for (uint32_t y = 0; y < height; y++) memcpy(plane + (size_t)y * stride, pixels + y * row, row);
  if (options->icc && options->icc_size > 0)
    ic_libheif.image_set_raw_color_profile(image, "prof", options->icc, options->icc_size);
  struct heif_encoding_options *encoding = ic_libheif.encoding_options_alloc();
  if (encoding && options->avif_orientation >= 2 && options->avif_orientation <= 8)
    encoding->image_orientation = (enum heif_orientation)options->avif_orientation;
  error = ic_libheif.context_encode_image(context, image, encoder, encoding, NULL);
  ic_libheif.encoding_options_free(encoding);
  if (error.code == heif_error_Ok) {
    struct heif_writer writer = {.writer_api_version = 1, .write = write_output};
    error = ic_libheif.context_write(context, &writer, &output);
  }
  if (error.code != heif_error_Ok || output.failed || !output.data) {
    status = ic_fail(result, IC_ERR_ENCODE, "AVIF encoding failed: %s",
                     error.message ? error.message : "no output");
    free(output.data);
    goto done;
  }
  *out = output.data;
  *out_size = output.size;
done:
  if (image) ic_libheif.image_release(image);
  if (encoder) ic_libheif.encoder_release(encoder);
  ic_libheif.context_free(context);
  return status;
}
