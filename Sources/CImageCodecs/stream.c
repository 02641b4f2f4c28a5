/*
 * Encoded bytes being read: in memory, or streamed from a FILE (which may be a pipe).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Larger stdio buffer: fewer read syscalls while streaming rows. */
#define IC_FILE_BUFFER (64 * 1024)

/* How long a FIFO named as a source may take to deliver its first bytes. */
#define IC_FIFO_WAIT_MS 5000

/* Whether bytes (or the end of a writer that came and went) arrive on a FIFO in time. A FIFO
 * no writer ever opened reports nothing to poll, so the wait is bounded by the clock. */
static int fifo_has_data(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  uint64_t deadline = ic_now_ns() + (uint64_t)IC_FIFO_WAIT_MS * 1000000u;
  for (;;) {
    uint64_t now = ic_now_ns();
    if (now >= deadline) return 0;
    int n = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return 0;
  }
}

ic_status ic_stream_open(ic_stream *stream, const ic_source *source,
                         ic_result *result) {
  memset(stream, 0, sizeof(*stream));
  if (!source->path && source->fd >= 0) {
    int copy = fcntl(source->fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(errno));
    FILE *f = fdopen(copy, "rb");
    if (!f || fseek(f, 0, SEEK_SET) != 0) {
      int code = errno;
      if (f) fclose(f);
      else close(copy);
      return ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(code));
    }
    setvbuf(f, NULL, _IOFBF, IC_FILE_BUFFER);
    stream->file = f;
    return IC_OK;
  }
  if (!source->path) {
    if (!source->data && source->size)
      return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "no source bytes");
    stream->data = source->data;
    stream->size = source->size;
    return IC_OK;
  }
  /* Opened without blocking: a FIFO nobody writes to would hold open() for ever. A FIFO then
   * gets IC_FIFO_WAIT_MS for its first bytes (a writer that opens it a moment later streams
   * as /dev/stdin after a pipe does), and is read as usual from then on. Devices and
   * directories are no source. */
  int fd = open(source->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ic_fail(result, IC_ERR_IO, "cannot open: %s", strerror(errno));
  struct stat info;
  int flags = fcntl(fd, F_GETFL);
  if (fstat(fd, &info) != 0 || flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int code = errno;
    close(fd);
    return ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(code));
  }
  if (!S_ISREG(info.st_mode) && !S_ISFIFO(info.st_mode) && !S_ISSOCK(info.st_mode)) {
    close(fd);
    return ic_fail(result, IC_ERR_IO, S_ISDIR(info.st_mode) ? "is a directory"
                                                             : "not a regular file");
  }
  if (S_ISFIFO(info.st_mode) && !fifo_has_data(fd)) {
    close(fd);
    return ic_fail(result, IC_ERR_IO, "nothing arrived through the FIFO within %d ms",
                   IC_FIFO_WAIT_MS);
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    int code = errno;
    close(fd);
    return ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(code));
  }
  setvbuf(f, NULL, _IOFBF, IC_FILE_BUFFER);
  stream->file = f;
  return IC_OK;
}

void ic_stream_close(ic_stream *stream) {
  if (stream->file) fclose(stream->file);
  stream->file = NULL;
  free(stream->owned);
  stream->owned = NULL;
}

ic_status ic_stream_read_head(ic_stream *stream, ic_result *result) {
  if (!stream->file) {
    stream->head_length = 0;
    return IC_OK;
  }
  /* Keep what sniffing reads: the decoder gets it back first. */
  stream->head_length = fread(stream->head, 1, sizeof(stream->head), stream->file);
  if (ferror(stream->file))
    return ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(errno));
  return IC_OK;
}

const uint8_t *ic_stream_magic(const ic_stream *stream, size_t *length) {
  if (stream->file) {
    *length = stream->head_length;
    return stream->head;
  }
  *length = stream->size < IC_SNIFF_BYTES ? stream->size : IC_SNIFF_BYTES;
  return stream->data;
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

uint64_t ic_stream_tell(const ic_stream *stream) {
  if (!stream->file) return stream->offset;
  off_t at = ftello(stream->file);
  if (at < 0) return UINT64_MAX;
  return (uint64_t)at - (stream->head_length - stream->head_offset);
}

int ic_stream_size(ic_stream *stream, uint64_t *size) {
  if (!stream->file) {
    *size = stream->size;
    return 1;
  }
  struct stat info;
  if (fstat(fileno(stream->file), &info) != 0 || !S_ISREG(info.st_mode)) return 0;
  *size = (uint64_t)info.st_size;
  return 1;
}

ic_status ic_stream_seek(ic_stream *stream, uint64_t offset, const ic_control *control,
                         ic_result *result) {
  if (!stream->file) {
    if (offset > stream->size) return ic_fail(result, IC_ERR_TRUNCATED, "data ends early");
    stream->offset = (size_t)offset;
    return IC_OK;
  }
  uint64_t now = ic_stream_tell(stream);
  if (now == offset) return IC_OK;
  /* A regular file moves; the kept head serves offsets inside it. */
  uint64_t size = 0;
  if (ic_stream_size(stream, &size)) {
    if (offset > size) return ic_fail(result, IC_ERR_TRUNCATED, "data ends early");
    uint64_t from = offset < stream->head_length ? stream->head_length : offset;
    if (fseeko(stream->file, (off_t)from, SEEK_SET) != 0)
      return ic_fail(result, IC_ERR_IO, "cannot seek: %s", strerror(errno));
    stream->head_offset = offset < stream->head_length ? (size_t)offset : stream->head_length;
    return IC_OK;
  }
  /* A pipe only goes forward, by reading. */
  if (now == UINT64_MAX || offset < now)
    return ic_fail(result, IC_ERR_UNSUPPORTED, "a piped source cannot be read out of order");
  uint8_t scratch[4096];
  for (uint64_t left = offset - now; left > 0;) {
    if (ic_check(control, result) != IC_OK) return result->status;
    size_t want = left < sizeof(scratch) ? (size_t)left : sizeof(scratch);
    size_t n = ic_stream_read(stream, scratch, want);
    left -= n;
    if (n < want)
      return ic_stream_failed(stream) ? ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(errno))
                                      : ic_fail(result, IC_ERR_TRUNCATED, "data ends early");
  }
  return IC_OK;
}

ic_status ic_stream_random(ic_stream *stream, const ic_limits *limits, const ic_control *control,
                           ic_random *out, ic_result *result) {
  memset(out, 0, sizeof(*out));
  out->fd = -1;
  uint64_t size = 0;
  if (stream->file && ic_stream_size(stream, &size)) {
    out->fd = fileno(stream->file);
    out->size = size;
    return IC_OK;
  }
  /* Nothing has been read past the sniffed head, which the stream hands out again first. */
  const uint8_t *data = NULL;
  size_t length = 0;
  if (ic_stream_contents(stream, limits, control, &data, &length, result) != IC_OK)
    return result->status;
  out->data = data;
  out->size = length;
  return IC_OK;
}

size_t ic_random_read(const ic_random *source, uint64_t offset, void *buffer, size_t length) {
  if (offset >= source->size) return 0;
  if (length > source->size - offset) length = (size_t)(source->size - offset);
  if (source->data) {
    memcpy(buffer, source->data + offset, length);
    return length;
  }
  size_t done = 0;
  while (done < length) {
    ssize_t n = pread(source->fd, (uint8_t *)buffer + done, length - done, (off_t)(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += (size_t)n;
  }
  return done;
}

int ic_stream_failed(const ic_stream *stream) {
  return stream->file && ferror(stream->file);
}

ic_status ic_stream_contents(ic_stream *stream, const ic_limits *limits,
                             const ic_control *control, const uint8_t **data, size_t *size,
                             ic_result *result) {
  size_t cap = limits->max_decoder_memory ? (size_t)limits->max_decoder_memory : SIZE_MAX;
  if (!stream->file) {
    if (stream->size > cap)
      return ic_fail(result, IC_ERR_TOO_LARGE, "the source is over %zu bytes", cap);
    *data = stream->data + stream->offset;
    *size = stream->size - stream->offset;
    return IC_OK;
  }
  size_t capacity = cap < (256u << 10) ? cap + 1 : 256u << 10, used = 0;
  uint8_t *buffer = NULL;
  for (;;) {
    if (ic_check(control, result) != IC_OK) break;
    if (used == capacity || !buffer) {
      /* Doubling, but never past one byte over the cap. */
      if (buffer) capacity = capacity > cap / 2 ? cap + 1 : capacity * 2;
      uint8_t *grown = realloc(buffer, capacity);
      if (!grown) {
        ic_fail(result, IC_ERR_NO_MEMORY, "source buffer allocation failed");
        break;
      }
      buffer = grown;
    }
    /* Never more than one byte past the cap: that byte says the file is over it. */
    size_t want = capacity - used;
    if (cap < SIZE_MAX && want > cap + 1 - used) want = cap + 1 - used;
    size_t n = ic_stream_read(stream, buffer + used, want);
    used += n;
    if (used > cap) {
      ic_fail(result, IC_ERR_TOO_LARGE, "the source is over %zu bytes", cap);
      break;
    }
    if (n < want) {
      if (ic_stream_failed(stream)) {
        ic_fail(result, IC_ERR_IO, "cannot read: %s", strerror(errno));
        break;
      }
      free(stream->owned);
      stream->owned = buffer;
      stream->owned_size = used;
      *data = buffer;
      *size = used;
      return IC_OK;
    }
  }
  free(buffer);
  return result->status;
}
