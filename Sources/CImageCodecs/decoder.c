/*
 * Opening a source and choosing its decoder from magic bytes: the file name
 * never decides the format.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

/* Larger stdio buffer: fewer read syscalls while streaming rows. */
#define IC_FILE_BUFFER (64 * 1024)

ic_status ic_source_open(const ic_source *source, FILE **file,
                         ic_result *result) {
  *file = NULL;
  if (!source->path) {
    if (!source->data && source->size)
      return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "no source bytes");
    return IC_OK;
  }
  FILE *f = fopen(source->path, "rb");
  if (!f) return ic_fail(result, IC_ERR_IO, "cannot open: %s", strerror(errno));
  setvbuf(f, NULL, _IOFBF, IC_FILE_BUFFER);
  *file = f;
  return IC_OK;
}

ic_status ic_decoder_open(FILE *file, const uint8_t *data, size_t size,
                          const ic_limits *limits, const int32_t *cancel_flag,
                          ic_result *result, ic_decoder **decoder) {
  uint8_t magic[8];
  size_t have;
  if (file) {
    have = fread(magic, 1, sizeof(magic), file);
    if (ferror(file))
      return ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(errno));
    rewind(file);
  } else {
    have = size < sizeof(magic) ? size : sizeof(magic);
    if (have) memcpy(magic, data, have);
  }
  result->source_format = ic_sniff(magic, have);
  switch (result->source_format) {
  case IC_FORMAT_JPEG:
    return ic_jpeg_open(file, data, size, limits, cancel_flag, result, decoder);
  case IC_FORMAT_PNG:
    return ic_png_open(file, data, size, limits, cancel_flag, result, decoder);
  default:
    if (have == 0) return ic_fail(result, IC_ERR_UNSUPPORTED, "empty input");
    return ic_fail(result, IC_ERR_UNSUPPORTED, "not a JPEG or PNG image");
  }
}
