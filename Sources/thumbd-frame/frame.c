/*
 * thumbd-frame: one representative frame of a video, for thumbd, which runs this program in
 * its sandbox (bubblewrap, seccomp, rlimits, a deadline) and never opens FFmpeg itself.
 *
 *   thumbd-frame NAME WIDTH HEIGHT MAX_PIXELS < VIDEO
 *
 * reads the video from stdin (NAME's extension is a hint for the container) and writes to stdout a
 * header (frame.h) and then an upright, top-down 24-bit BMP whose size covers WIDTH x HEIGHT twice
 * over (never more than the displayed frame), which thumbd decodes again with its own bounded BMP
 * decoder, resamples and encodes. WIDTH or HEIGHT 0 leaves that side free. The exit code says what
 * went wrong (frame.h); the first line on stderr, why.
 *
 * Rules kept here:
 * - libavformat, libavcodec, libavutil and libswscale are opened with dlopen (cs_bind), so a
 *   missing package gets a message naming it;
 * - only the input is read, through its descriptor: no path is opened, no protocol is
 *   allowed, and only demuxers of real video containers run (no playlists, no concat, no
 *   image sequences that name other files);
 * - what the file declares is bounded before work: the probe size, the analysis time, the
 *   stream count, the frame size against MAX_PIXELS (the stream's and each decoded frame's);
 * - every loop is bounded by packets, frames and seek tries; the sandbox's deadline and CPU
 *   limit are the guard behind them;
 * - the frame is chosen at 10% of the duration (1 s when the duration is unknown): the first
 *   frame at or after a second before that time; a frame that is almost black is passed over
 *   for one further in, at most three times, and kept when nothing better comes;
 * - the display matrix (rotation and reflection) and the sample aspect ratio are applied, so
 *   the picture is as a player shows it.
 */
#define _GNU_SOURCE
#include "frame.h"

#include <CSystem.h>

#include <errno.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* Demuxers of video containers; nothing that reads other files or the network. */
static const char format_whitelist[] =
    "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,flv,mpegts,mpeg,mpegvideo,asf,ogg,dv,mxf,nut,"
    "rm,m4v,h264,hevc,mjpeg,ivf,obu,wtv,vob,yuv4mpegpipe";

/* Bounds on what the file can make the worker do. */
enum {
  PROBE_BYTES = 8 << 20,
  ANALYSE_MICROSECONDS = 5000000,
  MAX_STREAMS = 64,
  MAX_PACKETS = 20000,
  MAX_FRAMES = 1200,
  BLACK_TRIES = 4,
  MAX_SIDE = 32768,
  LOG_LINES = 20,
};

/* Every FFmpeg function the worker calls, by library: each named once, typed by FFmpeg's own
 * declaration, called as av.NAME. */
#define TF_AVUTIL(X)                                                                         \
  X(av_frame_alloc) X(av_frame_free) X(av_frame_unref) X(av_frame_move_ref) X(av_dict_set)   \
  X(av_dict_free) X(av_log_set_level) X(av_log_set_callback) X(av_rescale_q) X(av_malloc)    \
  X(av_free)
#define TF_AVCODEC(X)                                                                        \
  X(avcodec_alloc_context3) X(avcodec_free_context) X(avcodec_parameters_to_context)         \
  X(avcodec_open2) X(avcodec_send_packet) X(avcodec_receive_frame) X(avcodec_flush_buffers)  \
  X(av_packet_alloc) X(av_packet_free) X(av_packet_unref)
#define TF_AVFORMAT(X)                                                                       \
  X(avformat_open_input) X(avformat_find_stream_info) X(av_find_best_stream) X(av_read_frame) \
  X(av_seek_frame) X(avformat_alloc_context) X(avio_alloc_context) X(avio_context_free)      \
  X(avformat_close_input) X(av_stream_get_side_data)
#define TF_SWSCALE(X)                                                                        \
  X(sws_getContext) X(sws_scale) X(sws_freeContext) X(sws_getCoefficients)                   \
  X(sws_setColorspaceDetails)

typedef struct api {
  TF_AVUTIL(CS_FUNCTION)
  TF_AVCODEC(CS_FUNCTION)
  TF_AVFORMAT(CS_FUNCTION)
  TF_SWSCALE(CS_FUNCTION)
} api;

static api av;

/* FFmpeg's own messages, the first few only: a hostile file could log without end. */
static int log_lines;
static void bounded_log(void *context, int level, const char *format, va_list args) {
  (void)context;
  if (level > AV_LOG_ERROR || log_lines >= LOG_LINES) return;
  log_lines++;
  vfprintf(stderr, format, args);
}

static int bind_libraries(void) {
#define TF_ROW(name) CS_SYMBOL(av, name, #name)
  const cs_symbol util[] = {TF_AVUTIL(TF_ROW)};
  const cs_symbol codec[] = {TF_AVCODEC(TF_ROW)};
  const cs_symbol format[] = {TF_AVFORMAT(TF_ROW)};
  const cs_symbol scale[] = {TF_SWSCALE(TF_ROW)};
#undef TF_ROW
  char error[256];
  if (CS_BIND_MAJOR("avutil", LIBAVUTIL_VERSION_MAJOR, util, NULL, error) != 0 ||
      CS_BIND_MAJOR("avcodec", LIBAVCODEC_VERSION_MAJOR, codec, NULL, error) != 0 ||
      CS_BIND_MAJOR("avformat", LIBAVFORMAT_VERSION_MAJOR, format, NULL, error) != 0 ||
      CS_BIND_MAJOR("swscale", LIBSWSCALE_VERSION_MAJOR, scale, NULL, error) != 0) {
    return tf_fail(TF_EXIT_UNAVAILABLE, "%s", error);
  }
  return 0;
}

/* ---- the display matrix as a map of pixels ---- */

/* Output pixel (x, y) comes from source pixel (a*X + b*Y, c*X + d*Y) where X = x + px and
 * Y = y + py: the matrix's 2x2 part rounded to -1, 0 or 1 (a turn by a multiple of 90 degrees,
 * maybe mirrored), inverted by transposing. Anything else is shown unturned. */
typedef struct turn {
  int a, b, c, d;
  int px, py;
  int swaps; /* whether width and height trade places */
} turn;

static int unit(int32_t fixed) {
  double value = fixed / 65536.0;
  return value > 0.5 ? 1 : (value < -0.5 ? -1 : 0);
}

static turn turn_of(const int32_t *matrix) {
  turn identity = {1, 0, 0, 1, 0, 0, 0};
  if (!matrix) return identity;
  /* FFmpeg's matrix maps a source point (p, q) to (a p + c q, b p + d q) in image space
   * (y down), with a b c d at 0 1 3 4. */
  int a = unit(matrix[0]), b = unit(matrix[1]), c = unit(matrix[3]), d = unit(matrix[4]);
  int straight = a != 0 && d != 0 && b == 0 && c == 0;
  int across = a == 0 && d == 0 && b != 0 && c != 0;
  if (!straight && !across) return identity;
  /* Inverse of [[a, c], [b, d]] (orthogonal) is its transpose: p = a P + b Q, q = c P + d Q. */
  turn t = {a, b, c, d, 0, 0, across};
  return t;
}

/* Fills the offsets for a source of w x h: the smallest displayed P and Q. */
static void turn_place(turn *t, int w, int h) {
  /* P = a p + c q over p in [0, w), q in [0, h); likewise Q = b p + d q. */
  t->px = (t->a < 0 ? -(w - 1) : 0) + (t->c < 0 ? -(h - 1) : 0);
  t->py = (t->b < 0 ? -(w - 1) : 0) + (t->d < 0 ? -(h - 1) : 0);
}

/* ---- output ---- */

/* Writes the header and the BMP of `rgb` (w x h, packed RGB) turned by `t`. */
static int emit(const uint8_t *rgb, int w, int h, turn t, const tf_header *fields) {
  int out_w = t.swaps ? h : w, out_h = t.swaps ? w : h;
  size_t stride = ((size_t)out_w * 3 + 3) & ~(size_t)3;
  size_t pixels = stride * (size_t)out_h;
  uint8_t head[TF_HEADER_SIZE + 54] = {0};
  memcpy(head, TF_MAGIC, 8);
  tf_put32(head + 8, (uint32_t)out_w);
  tf_put32(head + 12, (uint32_t)out_h);
  tf_put32(head + 16, fields->frame_ms);
  tf_put32(head + 20, fields->duration_ms);
  tf_put32(head + 24, fields->flags);
  tf_put32(head + 28, fields->source_w);
  tf_put32(head + 32, fields->source_h);
  uint8_t *bmp = head + TF_HEADER_SIZE;
  bmp[0] = 'B';
  bmp[1] = 'M';
  tf_put32(bmp + 2, (uint32_t)(54 + pixels));
  tf_put32(bmp + 10, 54);
  tf_put32(bmp + 14, 40);
  tf_put32(bmp + 18, (uint32_t)out_w);
  tf_put32(bmp + 22, (uint32_t)-out_h); /* top-down */
  tf_put16(bmp + 26, 1);
  tf_put16(bmp + 28, 24);
  tf_put32(bmp + 34, (uint32_t)pixels);
  if (tf_write_all(STDOUT_FILENO, head, sizeof(head)) != 0) return -1;
  uint8_t *row = calloc(1, stride);
  if (!row) return -1;
  turn_place(&t, w, h);
  int status = 0;
  for (int y = 0; y < out_h && status == 0; y++) {
    for (int x = 0; x < out_w; x++) {
      int px = x + t.px, py = y + t.py;
      int p = t.a * px + t.b * py, q = t.c * px + t.d * py;
      const uint8_t *from = rgb + ((size_t)q * (size_t)w + (size_t)p) * 3;
      row[x * 3] = from[2];
      row[x * 3 + 1] = from[1];
      row[x * 3 + 2] = from[0];
    }
    status = tf_write_all(STDOUT_FILENO, row, stride);
  }
  free(row);
  return status;
}

/* Almost black: the mean is under 1/16 of white and at most 2% of pixels above 1/8. */
static int near_black(const uint8_t *rgb, int w, int h) {
  size_t count = (size_t)w * (size_t)h, bright = 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < count; i++) {
    const uint8_t *p = rgb + i * 3;
    unsigned luma = (77u * p[0] + 150u * p[1] + 29u * p[2]) >> 8;
    sum += luma;
    if (luma > 32) bright++;
  }
  return count > 0 && sum < (uint64_t)count * 16 && bright * 50 <= count;
}

/* ---- input: the descriptor, read with pread ---- */

typedef struct input input;
struct input {
  int fd;
  int64_t position;
  int64_t size;
};

static int input_read(void *opaque, uint8_t *buffer, int size) {
  input *in = opaque;
  if (size <= 0) return 0;
  if (in->position >= in->size) return AVERROR_EOF;
  ssize_t got;
  do {
    got = pread(in->fd, buffer, (size_t)size, (off_t)in->position);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return AVERROR(EIO);
  if (got == 0) return AVERROR_EOF;
  in->position += got;
  return (int)got;
}

static int64_t input_seek(void *opaque, int64_t offset, int whence) {
  input *in = opaque;
  whence &= ~AVSEEK_FORCE;
  if (whence == AVSEEK_SIZE) return in->size;
  int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? in->position
                                         : whence == SEEK_END ? in->size : -1;
  if (base < 0 || offset < -base || offset > INT64_MAX - base) return AVERROR(EINVAL);
  in->position = base + offset;
  return in->position;
}

/* ---- decoding ---- */

typedef struct worker {
  AVFormatContext *format;
  AVIOContext *io;
  input *in;
  const char *name;
  int index;
  AVCodecContext *codec;
  AVStream *stream;
  AVPacket *packet;
  uint64_t max_pixels;
  int packets;
  int frames;
} worker;

/* Where times are counted from, microseconds on the file's clock: the file's start (as
 * players and `ffmpeg -ss` count), else the stream's. */
static int64_t origin(const worker *w) {
  if (w->format->start_time != AV_NOPTS_VALUE) return w->format->start_time;
  if (w->stream->start_time != AV_NOPTS_VALUE)
    return av.av_rescale_q(w->stream->start_time, w->stream->time_base, (AVRational){1, 1000000});
  return 0;
}

/* Microseconds from the start of a timestamp of the stream, or INT64_MIN when unknown. */
static int64_t stream_time(const worker *w, int64_t pts) {
  if (pts == AV_NOPTS_VALUE) return INT64_MIN;
  return av.av_rescale_q(pts, w->stream->time_base, (AVRational){1, 1000000}) - origin(w);
}

/* Microseconds of `frame` from the file's start, or INT64_MIN when unknown. */
static int64_t frame_time(const worker *w, const AVFrame *frame) {
  return stream_time(w, frame->best_effort_timestamp);
}

/* Decodes until a frame at or after `from` (microseconds; INT64_MIN for the first frame), or
 * the end: 0 with the frame in `out` (the last one, at the end), or a TF_EXIT code. */
static int decode_until(worker *w, int64_t from, AVFrame *out, AVFrame *scratch) {
  int have = 0, ended = 0;
  while (w->packets < MAX_PACKETS && w->frames < MAX_FRAMES) {
    int status = av.avcodec_receive_frame(w->codec, scratch);
    if (status == 0) {
      w->frames++;
      if ((uint64_t)scratch->width * (uint64_t)scratch->height > w->max_pixels ||
          scratch->width > MAX_SIDE || scratch->height > MAX_SIDE) {
        return tf_fail(TF_EXIT_TOO_LARGE, "a decoded frame is %dx%d, over the limit",
                    scratch->width, scratch->height);
      }
      av.av_frame_unref(out);
      av.av_frame_move_ref(out, scratch);
      have = 1;
      int64_t at = frame_time(w, out);
      if (from == INT64_MIN || at == INT64_MIN || at >= from) return 0;
      continue;
    }
    if (status == AVERROR_EOF) break;
    if (status != AVERROR(EAGAIN)) {
      if (have) return 0;
      return tf_fail(TF_EXIT_CORRUPT, "the video stream does not decode");
    }
    if (ended) break;
    /* The decoder wants input. */
    int read = av.av_read_frame(w->format, w->packet);
    if (read < 0) {
      ended = 1;
      av.avcodec_send_packet(w->codec, NULL);
      continue;
    }
    if (w->packet->stream_index == w->stream->index) {
      w->packets++;
      int sent = av.avcodec_send_packet(w->codec, w->packet);
      /* A damaged packet is passed over; the packet cap ends a stream of them. */
      (void)sent;
    }
    av.av_packet_unref(w->packet);
  }
  return have ? 0 : tf_fail(TF_EXIT_CORRUPT, "no frame decodes");
}

/* The packet's time from the start, microseconds, or INT64_MIN when unknown. */
static int64_t packet_time(const worker *w, const AVPacket *packet) {
  return stream_time(w, packet->pts != AV_NOPTS_VALUE ? packet->pts : packet->dts);
}

/* The next keyframe alone, when it is within `reach` of `at`: its packet is decoded
 * and the decoder drained, so only that frame is held (a 4K frame, not a 4K decoder's whole
 * reference set). 0 with the frame in `out`; -1 when the keyframe is elsewhere or does not
 * decode alone (the caller seeks again and decodes up to the time). */
enum { KEYFRAME_REACH = 1500000 };
static int decode_keyframe(worker *w, int64_t at, int64_t reach, AVFrame *out,
                           AVFrame *scratch) {
  while (w->packets < MAX_PACKETS) {
    if (av.av_read_frame(w->format, w->packet) < 0) return -1;
    if (w->packet->stream_index != w->stream->index) {
      av.av_packet_unref(w->packet);
      continue;
    }
    w->packets++;
    if (!(w->packet->flags & AV_PKT_FLAG_KEY)) {
      av.av_packet_unref(w->packet);
      continue;
    }
    int64_t time = packet_time(w, w->packet);
    if (time == INT64_MIN || time < at - reach || time > at + reach) {
      av.av_packet_unref(w->packet);
      return -1;
    }
    int sent = av.avcodec_send_packet(w->codec, w->packet);
    av.av_packet_unref(w->packet);
    if (sent < 0) return -1;
    av.avcodec_send_packet(w->codec, NULL);
    for (int tries = 0; tries < 4; tries++) {
      int status = av.avcodec_receive_frame(w->codec, scratch);
      if (status != 0) return -1;
      w->frames++;
      if ((uint64_t)scratch->width * (uint64_t)scratch->height > w->max_pixels ||
          scratch->width > MAX_SIDE || scratch->height > MAX_SIDE) {
        return tf_fail(TF_EXIT_TOO_LARGE, "a decoded frame is %dx%d, over the limit",
                    scratch->width, scratch->height);
      }
      if (scratch->key_frame || tries == 3) {
        av.av_frame_unref(out);
        av.av_frame_move_ref(out, scratch);
        return 0;
      }
      av.av_frame_unref(scratch);
    }
    return -1;
  }
  return -1;
}

/* Seeks so that decoding starts at or before `at` microseconds from the start. */
/* Seeks to the keyframe at or before `at` microseconds from the start (AVSEEK_FLAG_BACKWARD),
 * or at or after it (0), where the container's index allows. */
static void seek_to(worker *w, int64_t at, int flags) {
  int64_t stamp =
      av.av_rescale_q(at + origin(w), (AVRational){1, 1000000}, w->stream->time_base);
  if (av.av_seek_frame(w->format, w->stream->index, stamp, flags) >= 0)
    av.avcodec_flush_buffers(w->codec);
}

/* The frame's displayed size before the turn: its width stretched by the sample aspect
 * ratio. */
static void display_size(const AVFrame *frame, AVRational sar, double *w, double *h) {
  *w = frame->width;
  *h = frame->height;
  if (sar.num > 0 && sar.den > 0) *w = *w * sar.num / sar.den;
  if (*w < 1 || *w > MAX_SIDE * 4.0) *w = frame->width;
}

/* Opens the container from the input's first byte: a fresh I/O context over the descriptor,
 * the demuxers allowed, the probing bounded, its streams read. 0, or an exit code. */
static int open_format(worker *w) {
  enum { IO_BUFFER = 64 << 10 };
  w->in->position = 0;
  unsigned char *buffer = av.av_malloc(IO_BUFFER);
  w->io = buffer ? av.avio_alloc_context(buffer, IO_BUFFER, 0, w->in, input_read, NULL, input_seek)
                 : NULL;
  w->format = w->io ? av.avformat_alloc_context() : NULL;
  if (!w->format) {
    if (!w->io) av.av_free(buffer);
    return tf_fail(TF_EXIT_CORRUPT, "no memory");
  }
  w->format->pb = w->io;
  AVDictionary *options = NULL;
  /* A nested open (a playlist's entries) has no protocol it may use. */
  av.av_dict_set(&options, "protocol_whitelist", "none", 0);
  av.av_dict_set(&options, "format_whitelist", format_whitelist, 0);
  av.av_dict_set(&options, "probesize", "8388608", 0);
  av.av_dict_set(&options, "analyzeduration", "5000000", 0);
  av.av_dict_set(&options, "max_streams", "64", 0);
  av.av_dict_set(&options, "fpsprobesize", "8", 0);
  int opened = av.avformat_open_input(&w->format, w->name, NULL, &options);
  av.av_dict_free(&options);
  /* open_input freed the format context on failure; the I/O context is ours. */
  if (opened < 0) return tf_fail(TF_EXIT_UNSUPPORTED, "not a video container thumbd reads");
  if (w->format->nb_streams > MAX_STREAMS)
    return tf_fail(TF_EXIT_CORRUPT, "%u streams, over %d", w->format->nb_streams, MAX_STREAMS);
  if (av.avformat_find_stream_info(w->format, NULL) < 0)
    return tf_fail(TF_EXIT_CORRUPT, "its streams cannot be read");
  return 0;
}

static void close_format(worker *w) {
  if (w->format) av.avformat_close_input(&w->format);
  if (w->io) {
    av.av_free(w->io->buffer);
    av.avio_context_free(&w->io);
  }
}

/* Back to the first byte, where the first frame is: the container opened again (a damaged
 * file's demuxer may not seek back from its end), the same stream chosen. 0, or an exit
 * code. */
static int rewind_input(worker *w) {
  close_format(w);
  int status = open_format(w);
  if (status != 0) return status;
  if (w->index >= (int)w->format->nb_streams)
    return tf_fail(TF_EXIT_CORRUPT, "its streams changed when read again");
  for (unsigned i = 0; i < w->format->nb_streams; i++)
    w->format->streams[i]->discard = (int)i == w->index ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
  w->stream = w->format->streams[w->index];
  av.avcodec_flush_buffers(w->codec);
  return 0;
}

typedef struct scaled {
  uint8_t *rgb;
  int w, h;
} scaled;

/* The frame at a size covering the box twice over, in display proportions (the sample aspect
 * ratio applied), as packed RGB. */
static int scale_frame(const AVFrame *frame, AVRational sar, int box_w, int box_h, int swaps,
                       scaled *out) {
  double display_w, display_h;
  display_size(frame, sar, &display_w, &display_h);
  /* The box is in displayed orientation; the scaling happens before the turn. */
  double bw = swaps ? box_h : box_w, bh = swaps ? box_w : box_h;
  double factor = 0;
  if (bw > 0) factor = fmax(factor, 2 * bw / display_w);
  if (bh > 0) factor = fmax(factor, 2 * bh / display_h);
  if (factor <= 0 || factor > 1) factor = 1;
  int w = (int)lround(display_w * factor), h = (int)lround(display_h * factor);
  if (w < 1) w = 1;
  if (h < 1) h = 1;
  if (w > MAX_SIDE || h > MAX_SIDE) return tf_fail(TF_EXIT_TOO_LARGE, "the frame is too wide");
  struct SwsContext *sws = av.sws_getContext(frame->width, frame->height, frame->format, w, h,
                                      AV_PIX_FMT_RGB24, SWS_AREA | SWS_ACCURATE_RND, NULL, NULL,
                                      NULL);
  if (!sws) return tf_fail(TF_EXIT_CORRUPT, "the frame's pixel format cannot be converted");
  /* The frame's own matrix and range (BT.601 when it names none, as players do). */
  int space = frame->colorspace == AVCOL_SPC_UNSPECIFIED
                  ? (frame->height > 576 ? AVCOL_SPC_BT709 : AVCOL_SPC_BT470BG)
                  : frame->colorspace;
  int full = frame->color_range == AVCOL_RANGE_JPEG;
  const int *coefficients = av.sws_getCoefficients(space);
  av.sws_setColorspaceDetails(sws, coefficients, full, av.sws_getCoefficients(AVCOL_SPC_BT709),
                              1, 0, 1 << 16, 1 << 16);
  out->rgb = malloc((size_t)w * (size_t)h * 3);
  if (!out->rgb) {
    av.sws_freeContext(sws);
    return tf_fail(TF_EXIT_TOO_LARGE, "no memory for a %dx%d frame", w, h);
  }
  uint8_t *planes[4] = {out->rgb, NULL, NULL, NULL};
  int strides[4] = {w * 3, 0, 0, 0};
  int rows = av.sws_scale(sws, (const uint8_t *const *)frame->data, frame->linesize, 0,
                          frame->height, planes, strides);
  av.sws_freeContext(sws);
  if (rows <= 0) {
    free(out->rgb);
    out->rgb = NULL;
    return tf_fail(TF_EXIT_CORRUPT, "the frame does not convert");
  }
  out->w = w;
  out->h = h;
  return 0;
}

int tf_bind(void) {
  static int bound;
  if (bound) return 0;
  int status = bind_libraries();
  if (status != 0) return status;
  av.av_log_set_level(AV_LOG_ERROR);
  av.av_log_set_callback(bounded_log);
  bound = 1;
  return 0;
}

int tf_run(int fd, const char *name, int box_w, int box_h, uint64_t max_pixels) {
  int status = tf_bind();
  if (status != 0) return status;

  struct stat about;
  if (fstat(fd, &about) != 0 || !S_ISREG(about.st_mode) || about.st_size <= 0)
    return tf_fail(TF_EXIT_UNSUPPORTED, "the input is not a file with content");
  input in = {fd, 0, (int64_t)about.st_size};
  worker w = {0};
  w.max_pixels = max_pixels;
  w.in = &in;
  w.name = name;
  scaled picture = {0};
  AVFrame *frame = NULL, *scratch = NULL;
  status = open_format(&w);
  if (status != 0) goto done;
  frame = av.av_frame_alloc();
  scratch = av.av_frame_alloc();
  w.packet = av.av_packet_alloc();
  if (!frame || !scratch || !w.packet) {
    status = tf_fail(TF_EXIT_CORRUPT, "no memory");
    goto done;
  }
  /* Only the chosen stream is read; cover art (an attached picture) is not a frame of the
   * video, so the best stream is chosen among the others. */
  const AVCodec *decoder = NULL;
  int index = AVERROR_STREAM_NOT_FOUND;
  for (unsigned i = 0; i < w.format->nb_streams; i++) {
    AVStream *stream = w.format->streams[i];
    stream->discard = AVDISCARD_ALL;
    if (stream->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
        !(stream->disposition & AV_DISPOSITION_ATTACHED_PIC) && index < 0) {
      index = av.av_find_best_stream(w.format, AVMEDIA_TYPE_VIDEO, -1, -1, &decoder, 0);
      if (index >= 0 && (w.format->streams[index]->disposition & AV_DISPOSITION_ATTACHED_PIC))
        index = av.av_find_best_stream(w.format, AVMEDIA_TYPE_VIDEO, (int)i, -1, &decoder, 0);
    }
  }
  if (index == AVERROR_DECODER_NOT_FOUND) {
    status = tf_fail(TF_EXIT_UNSUPPORTED, "no decoder for its video stream");
    goto done;
  }
  if (index < 0 || !decoder) {
    status = tf_fail(TF_EXIT_UNSUPPORTED, "no video stream");
    goto done;
  }
  w.index = index;
  w.stream = w.format->streams[index];
  w.stream->discard = AVDISCARD_DEFAULT;
  AVCodecParameters *parameters = w.stream->codecpar;
  if (parameters->width > MAX_SIDE || parameters->height > MAX_SIDE ||
      (uint64_t)parameters->width * (uint64_t)parameters->height > max_pixels) {
    status = tf_fail(TF_EXIT_TOO_LARGE, "its frames are %dx%d, over the limit", parameters->width,
                  parameters->height);
    goto done;
  }
  w.codec = av.avcodec_alloc_context3(decoder);
  if (!w.codec || av.avcodec_parameters_to_context(w.codec, parameters) < 0) {
    status = tf_fail(TF_EXIT_CORRUPT, "its codec parameters are unusable");
    goto done;
  }
  w.codec->thread_count = 1;
  /* A smaller decode where the codec has one and the box allows. */
  int lowres = 0;
  while (lowres < decoder->max_lowres && box_w > 0 && box_h > 0 &&
         (parameters->width >> (lowres + 1)) >= 2 * box_w &&
         (parameters->height >> (lowres + 1)) >= 2 * box_h) {
    lowres++;
  }
  w.codec->lowres = lowres;
  /* Film grain is described, not drawn: a grained copy of every frame (a second picture of
   * the frame's size in dav1d) buys nothing in a thumbnail. */
  AVDictionary *codec_options = NULL;
  av.av_dict_set(&codec_options, "export_side_data", "film_grain", 0);
  int opened = av.avcodec_open2(w.codec, decoder, &codec_options);
  av.av_dict_free(&codec_options);
  if (opened < 0) {
    status = tf_fail(TF_EXIT_UNSUPPORTED, "its codec (%s) cannot be opened", decoder->name);
    goto done;
  }

  size_t matrix_size = 0;
  const int32_t *matrix = (const int32_t *)av.av_stream_get_side_data(
      w.stream, AV_PKT_DATA_DISPLAYMATRIX, &matrix_size);
  turn t = turn_of(matrix_size >= 9 * sizeof(int32_t) ? matrix : NULL);
  AVRational sar = w.stream->sample_aspect_ratio.num > 0 ? w.stream->sample_aspect_ratio
                                                         : parameters->sample_aspect_ratio;

  int64_t duration = w.format->duration;
  if (duration <= 0 && w.stream->duration > 0)
    duration = av.av_rescale_q(w.stream->duration, w.stream->time_base, (AVRational){1, 1000000});
  int64_t chosen = duration > 0 ? duration / 10 : 1000000;
  int64_t step = duration > 0 ? duration / 10 : 2000000;
  tf_header fields = {0, duration > 0 ? (uint32_t)(duration / 1000 > UINT32_MAX - 1
                                                        ? UINT32_MAX - 1
                                                        : duration / 1000)
                                      : TF_UNKNOWN,
                      0, 0, 0};
  scaled fallback = {0};
  uint32_t fallback_ms = 0;
  status = TF_EXIT_CORRUPT;
  for (int attempt = 0; attempt < BLACK_TRIES; attempt++) {
    int64_t at = chosen + attempt * step;
    if (duration > 0 && at >= duration) break;
    /* Near the start, the file is read from where it is (a seek there can land past the
     * first keyframe of a short stream). */
    if (attempt > 0 || at > KEYFRAME_REACH) seek_to(&w, at, AVSEEK_FLAG_BACKWARD);
    /* The keyframe at the chosen time, when there is one within reach before it or after it;
     * else the frame at or after a second before that time, decoded from the keyframe before
     * it. */
    int decoded = decode_keyframe(&w, at, KEYFRAME_REACH, frame, scratch);
    if (decoded < 0 && (attempt > 0 || at > KEYFRAME_REACH)) {
      /* A later try, past a dark frame, is a time of our own: any keyframe after it will do. */
      seek_to(&w, at, 0);
      decoded = decode_keyframe(&w, at, attempt > 0 ? INT64_MAX / 4 : KEYFRAME_REACH, frame,
                                scratch);
    }
    if (decoded > 0) {
      status = decoded;
      break;
    }
    if (decoded != 0) {
      seek_to(&w, at, AVSEEK_FLAG_BACKWARD);
      decoded = decode_until(&w, at - 1000000, frame, scratch);
    }
    if (decoded == TF_EXIT_TOO_LARGE) {
      status = decoded;
      break;
    }
    if (decoded != 0) {
      /* A seek that lands nowhere: from the start, the first frame. */
      if (attempt > 0 || fallback.rgb) break;
      if ((status = rewind_input(&w)) != 0) break;
      decoded = decode_until(&w, INT64_MIN, frame, scratch);
      if (decoded != 0) {
        status = decoded;
        break;
      }
    }
    int64_t at_frame = frame_time(&w, frame);
    uint32_t ms = at_frame == INT64_MIN || at_frame < 0 ? 0 : (uint32_t)(at_frame / 1000);
    status = scale_frame(frame, sar, box_w, box_h, t.swaps, &picture);
    /* The decoder's picture goes back to it now: a try past a dark frame decodes another,
     * and holding this one meanwhile would keep a second full-size picture. */
    av.av_frame_unref(frame);
    if (status != 0) break;
    /* The coded size, not the decoded one (a smaller decode is the same picture). */
    /* (The stream's parameters read again: a rewind opened the container anew.) */
    double shown_w = w.stream->codecpar->width, shown_h = w.stream->codecpar->height;
    if (sar.num > 0 && sar.den > 0 && shown_w * sar.num / sar.den >= 1)
      shown_w = shown_w * sar.num / sar.den;
    fields.source_w = (uint32_t)lround(t.swaps ? shown_h : shown_w);
    fields.source_h = (uint32_t)lround(t.swaps ? shown_w : shown_h);
    if (!near_black(picture.rgb, picture.w, picture.h)) {
      fields.frame_ms = ms;
      break;
    }
    if (!fallback.rgb) {
      fallback = picture;
      fallback_ms = ms;
    } else {
      free(picture.rgb);
    }
    picture.rgb = NULL;
  }
  if (!picture.rgb && fallback.rgb) {
    picture = fallback;
    fallback.rgb = NULL;
    fields.frame_ms = fallback_ms;
    fields.flags |= TF_FLAG_DARK;
    status = 0;
  }
  free(fallback.rgb);
  if (status == 0 && picture.rgb) {
    if (emit(picture.rgb, picture.w, picture.h, t, &fields) != 0)
      status = tf_fail(TF_EXIT_OUTPUT, "cannot write the frame");
  } else if (status == 0) {
    status = tf_fail(TF_EXIT_CORRUPT, "no frame decodes");
  }

done:
  free(picture.rgb);
  av.av_frame_free(&frame);
  av.av_frame_free(&scratch);
  av.av_packet_free(&w.packet);
  av.avcodec_free_context(&w.codec);
  close_format(&w);
  return status;
}
