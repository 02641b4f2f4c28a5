/*
 * JPEG encoding: 8-bit RGB, 4:2:0, Huffman tables optimised (a thumbnail is
 * small, so the second pass costs little and saves bytes on every transfer).
 * RGBA input is composited over white first: JPEG has no alpha.
 */
#include "internal.h"

#include <jerror.h>
#include <jpeglib.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

typedef struct encode_error {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
} encode_error;

static void on_encode_error(j_common_ptr cinfo) {
  encode_error *err = (encode_error *)cinfo->err;
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

static void on_encode_message(j_common_ptr cinfo, int level) {
  (void)cinfo;
  (void)level;
}

static void flatten_row(const uint8_t *src, uint8_t *dst, uint32_t width) {
  for (uint32_t x = 0; x < width; x++) {
    uint32_t a = src[x * 4 + 3];
    for (int c = 0; c < 3; c++)
      dst[x * 3 + c] =
          (uint8_t)((src[x * 4 + c] * a + 255u * (255u - a) + 127u) / 255u);
  }
}

ic_status ic_encode_jpeg(const uint8_t *pixels, uint32_t width, uint32_t height,
                         int channels, const ic_encode_options *options, uint8_t **out,
                         size_t *out_size, ic_result *result) {
  const int quality = options->quality;
  struct jpeg_compress_struct cinfo;
  encode_error err;
  unsigned char *volatile buffer = NULL;
  unsigned long size = 0;
  uint8_t *volatile flat = NULL;
  memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_encode_error;
  err.pub.emit_message = on_encode_message;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    free(buffer);
    free(flat);
    return ic_fail(result, IC_ERR_ENCODE, "JPEG encoder: %s", err.message);
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, (unsigned char **)&buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality < 1 ? 1 : quality > 100 ? 100 : quality,
                   TRUE);
  /* jpeg_set_defaults already picks 2x2 luma sampling; say so explicitly
   * because 4:2:0 is part of our output contract. */
  cinfo.comp_info[0].h_samp_factor = 2;
  cinfo.comp_info[0].v_samp_factor = 2;
  cinfo.optimize_coding = TRUE;
  if (options->jpeg_progressive) jpeg_simple_progression(&cinfo);
  if (channels == 4) {
    flat = malloc((size_t)width * 3);
    if (!flat) {
      jpeg_destroy_compress(&cinfo);
      return ic_fail(result, IC_ERR_NO_MEMORY, "encoder allocation failed");
    }
  }
  jpeg_start_compress(&cinfo, TRUE);
  if (options->icc && options->icc_size > 0 && options->icc_size <= 0xffffffffu)
    jpeg_write_icc_profile(&cinfo, options->icc, (unsigned int)options->icc_size);
  while (cinfo.next_scanline < height) {
    const uint8_t *src =
        pixels + (size_t)cinfo.next_scanline * width * channels;
    JSAMPROW row;
    if (channels == 4) {
      flatten_row(src, flat, width);
      row = flat;
    } else {
      row = (JSAMPROW)src;
    }
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  free(flat);
  *out = buffer;
  *out_size = size;
  return IC_OK;
}
