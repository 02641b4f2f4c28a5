/*
 * Opening a source and choosing its decoder from magic bytes: the file name
 * never decides the format.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

/* Larger stdio buffer: fewer read syscalls while streaming rows. */
#define IC_FILE_BUFFER (64 * 1024)

ic_status ic_stream_open(ic_stream *stream, const ic_source *source,
                         ic_result *result) {
  memset(stream, 0, sizeof(*stream));
  if (!source->path) {
    if (!source->data && source->size)
      return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "no source bytes");
    stream->data = source->data;
    stream->size = source->size;
    return IC_OK;
  }
  FILE *f = fopen(source->path, "rb");
  if (!f) return ic_fail(result, IC_ERR_IO, "cannot open: %s", strerror(errno));
  setvbuf(f, NULL, _IOFBF, IC_FILE_BUFFER);
  stream->file = f;
  return IC_OK;
}

void ic_stream_close(ic_stream *stream) {
  if (stream->file) fclose(stream->file);
  stream->file = NULL;
}

size_t ic_stream_read(ic_stream *stream, uint8_t *out, size_t length) {
  size_t done = 0;
  if (stream->head_offset < stream->head_length) {
    size_t n = stream->head_length - stream->head_offset;
    if (n > length) n = length;
    memcpy(out, stream->head + stream->head_offset, n);
    stream->head_offset += n;
    done = n;
  }
  if (done == length) return done;
  if (stream->file)
    return done + fread(out + done, 1, length - done, stream->file);
  size_t n = stream->size - stream->offset;
  if (n > length - done) n = length - done;
  if (n) memcpy(out + done, stream->data + stream->offset, n);
  stream->offset += n;
  return done + n;
}

int ic_stream_failed(const ic_stream *stream) {
  return stream->file && ferror(stream->file);
}

ic_status ic_decoder_open(ic_stream *stream, const ic_limits *limits,
                          const ic_control *control, ic_result *result,
                          ic_decoder **decoder) {
  if (stream->file) {
    /* Keep what sniffing reads: the decoder gets it back first. */
    stream->head_length = fread(stream->head, 1, sizeof(stream->head),
                                stream->file);
    if (ferror(stream->file))
      return ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(errno));
  } else {
    stream->head_length = 0;
  }
  const uint8_t *magic = stream->file ? stream->head : stream->data;
  size_t have = stream->file ? stream->head_length
                             : (stream->size < 8 ? stream->size : 8);
  result->source_format = ic_sniff(magic, have);
  switch (result->source_format) {
  case IC_FORMAT_JPEG:
    return ic_jpeg_open(stream, limits, control, result, decoder);
  case IC_FORMAT_PNG:
    return ic_png_open(stream, limits, control, result, decoder);
  default:
    if (have == 0) return ic_fail(result, IC_ERR_UNSUPPORTED, "empty input");
    return ic_fail(result, IC_ERR_UNSUPPORTED, "not a JPEG or PNG image");
  }
}
