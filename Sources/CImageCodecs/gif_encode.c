/*
 * GIF encoding (giflib's LZW writer): a still, or the frames of an animation (animation.c),
 * each frame with a palette of its own.
 *
 * Rules kept here:
 * - A frame's colours are chosen by variance-based median cut over a 15-bit histogram of its
 *   opaque pixels: at most 255 entries, and one more index for transparency when a pixel's
 *   alpha is under 128 (GIF has no other). Pixels are then mapped with Floyd-Steinberg error
 *   diffusion; the nearest entry to each 15-bit colour is searched for once per frame.
 * - Work per frame is bounded: one pass to count, at most 254 cuts of at most 32,768 bins
 *   (each a counting sort), one pass to map, at most 32,768 searches of at most 255 entries.
 *   Working memory is fixed (about 1.3 MiB) beside one row of errors and indices.
 * - The output grows in one buffer, refused past IC_GIF_MAX_OUTPUT.
 * - An animation's frames are whole canvases, each cleared to the background after it is
 *   shown, so a pixel that turns transparent does; every frame names a transparent index, so
 *   every reader clears to transparent. A still is one frame with no loop block.
 */
#include "internal.h"

#include <gif_lib.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BINS 32768
/* The output at most: far above any frame limit's product, far below size_t's. */
#define IC_GIF_MAX_OUTPUT ((size_t)1 << 31)

static uint32_t bin_of(int r, int g, int b) {
  return (uint32_t)(r >> 3) << 10 | (uint32_t)(g >> 3) << 5 | (uint32_t)(b >> 3);
}

typedef struct gif_buffer {
  uint8_t *data;
  size_t size, capacity;
  int failed;
} gif_buffer;

static int write_buffer(GifFileType *gif, const GifByteType *bytes, int length) {
  gif_buffer *b = gif->UserData;
  if (length < 0 || b->failed) return 0;
  size_t need = b->size + (size_t)length;
  if (need > IC_GIF_MAX_OUTPUT) {
    b->failed = 1;
    return 0;
  }
  if (need > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 65536;
    while (capacity < need) capacity *= 2;
    uint8_t *grown = realloc(b->data, capacity);
    if (!grown) {
      b->failed = 1;
      return 0;
    }
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->size, bytes, (size_t)length);
  b->size = need;
  return length;
}

/* A box of the median cut: bins order[start..<end], with their pixel count. */
typedef struct cut_box {
  uint32_t start, end;
  uint64_t count;
  double spread; /* weighted sum of squared distances from the mean, over all channels */
  int channel;   /* the channel of most spread */
} cut_box;

struct ic_gif_writer {
  GifFileType *gif;
  gif_buffer out;
  uint32_t width, height;
  int animated;
  uint32_t frames;
  uint32_t *counts;  /* BINS */
  uint64_t *sums;    /* BINS x 3 */
  uint8_t *means;    /* BINS x 3: each non-empty bin's mean colour */
  int16_t *nearest;  /* BINS: the entry nearest each bin's colours, -1 not yet searched */
  uint32_t *order;   /* the non-empty bins, in box order */
  uint32_t *sorted;  /* scratch of the counting sort */
  int32_t *errors;   /* 2 rows x (width + 2) x 3, in 16ths */
  GifByteType *row;  /* one row of indices */
};

void ic_gif_writer_destroy(ic_gif_writer *w) {
  if (!w) return;
  if (w->gif) EGifCloseFile(w->gif, NULL);
  free(w->out.data);
  free(w->counts);
  free(w->sums);
  free(w->means);
  free(w->nearest);
  free(w->order);
  free(w->sorted);
  free(w->errors);
  free(w->row);
  free(w);
}

ic_gif_writer *ic_gif_writer_create(uint32_t width, uint32_t height, int animated, int plays,
                                    ic_result *result) {
  if (width == 0 || height == 0 || width > 65535 || height > 65535) {
    ic_fail(result, IC_ERR_TOO_LARGE, "GIF holds at most 65535x65535, not %ux%u", width, height);
    return NULL;
  }
  ic_gif_writer *w = calloc(1, sizeof(*w));
  if (!w) {
    ic_fail(result, IC_ERR_NO_MEMORY, "GIF writer failed");
    return NULL;
  }
  w->width = width;
  w->height = height;
  w->animated = animated;
  w->counts = malloc(BINS * sizeof(uint32_t));
  w->sums = malloc(BINS * 3 * sizeof(uint64_t));
  w->means = malloc(BINS * 3);
  w->nearest = malloc(BINS * sizeof(int16_t));
  w->order = malloc(BINS * sizeof(uint32_t));
  w->sorted = malloc(BINS * sizeof(uint32_t));
  w->errors = malloc(2 * ((size_t)width + 2) * 3 * sizeof(int32_t));
  w->row = malloc(width);
  int error = 0;
  w->gif = w->counts && w->sums && w->means && w->nearest && w->order && w->sorted &&
                   w->errors && w->row
               ? EGifOpen(&w->out, write_buffer, &error)
               : NULL;
  if (!w->gif) {
    ic_gif_writer_destroy(w);
    ic_fail(result, IC_ERR_NO_MEMORY, "GIF writer failed");
    return NULL;
  }
  EGifSetGifVersion(w->gif, true);
  int ok = EGifPutScreenDesc(w->gif, (int)width, (int)height, 8, 0, NULL) == GIF_OK;
  if (ok && animated && plays != 1) {
    /* NETSCAPE2.0 counts repeats after the first play; plays 0 is for ever in both. */
    int repeats = plays <= 0 ? 0 : plays - 1 > 65535 ? 65535 : plays - 1;
    GifByteType loop[3] = {1, (GifByteType)(repeats & 0xFF), (GifByteType)(repeats >> 8)};
    ok = EGifPutExtensionLeader(w->gif, APPLICATION_EXT_FUNC_CODE) == GIF_OK &&
         EGifPutExtensionBlock(w->gif, 11, "NETSCAPE2.0") == GIF_OK &&
         EGifPutExtensionBlock(w->gif, 3, loop) == GIF_OK &&
         EGifPutExtensionTrailer(w->gif) == GIF_OK;
  }
  if (!ok) {
    ic_gif_writer_destroy(w);
    ic_fail(result, IC_ERR_ENCODE, "GIF header failed");
    return NULL;
  }
  return w;
}

/* The spread of box's bins and its channel of most spread. */
static void measure(const ic_gif_writer *w, cut_box *box) {
  double n = 0, s[3] = {0, 0, 0}, q[3] = {0, 0, 0};
  for (uint32_t i = box->start; i < box->end; i++) {
    uint32_t bin = w->order[i];
    double c = w->counts[bin];
    n += c;
    for (int k = 0; k < 3; k++) {
      double v = w->means[bin * 3 + k];
      s[k] += c * v;
      q[k] += c * v * v;
    }
  }
  box->count = (uint64_t)n;
  box->spread = 0;
  box->channel = 0;
  double most = -1;
  for (int k = 0; k < 3; k++) {
    double spread = n > 0 ? q[k] - s[k] * s[k] / n : 0;
    box->spread += spread;
    /* Green counts most to the eye, then red: ties go that way. */
    double weighted = spread * (k == 1 ? 1.2 : k == 0 ? 1.1 : 1.0);
    if (weighted > most) {
      most = weighted;
      box->channel = k;
    }
  }
}

/* Splits box in two at its channel's weighted median: a counting sort of its bins by that
 * channel, then the first place where half its pixels are behind. 0 when it cannot be split. */
static int split(ic_gif_writer *w, cut_box *box, cut_box *other) {
  if (box->end - box->start < 2) return 0;
  uint32_t histogram[257] = {0};
  int k = box->channel;
  for (uint32_t i = box->start; i < box->end; i++)
    histogram[w->means[w->order[i] * 3 + k] + 1]++;
  for (int v = 0; v < 256; v++) histogram[v + 1] += histogram[v];
  for (uint32_t i = box->start; i < box->end; i++) {
    uint32_t bin = w->order[i];
    w->sorted[box->start + histogram[w->means[bin * 3 + k]]++] = bin;
  }
  memcpy(w->order + box->start, w->sorted + box->start,
         (box->end - box->start) * sizeof(uint32_t));
  uint64_t half = box->count / 2, behind = 0;
  uint32_t at = box->start;
  while (at < box->end - 1) {
    behind += w->counts[w->order[at]];
    at++;
    if (behind >= half) break;
  }
  other->start = at;
  other->end = box->end;
  box->end = at;
  measure(w, box);
  measure(w, other);
  return 1;
}

/* The palette of the frame's opaque pixels: its entries, at most `most`. */
static int choose_palette(ic_gif_writer *w, const uint8_t *pixels, int channels,
                          GifColorType *palette, int most, int *transparent) {
  memset(w->counts, 0, BINS * sizeof(uint32_t));
  memset(w->sums, 0, BINS * 3 * sizeof(uint64_t));
  size_t n = (size_t)w->width * w->height;
  *transparent = 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *p = pixels + i * (size_t)channels;
    if (channels == 4 && p[3] < 128) {
      *transparent = 1;
      continue;
    }
    uint32_t bin = bin_of(p[0], p[1], p[2]);
    w->counts[bin]++;
    w->sums[bin * 3] += p[0];
    w->sums[bin * 3 + 1] += p[1];
    w->sums[bin * 3 + 2] += p[2];
  }
  uint32_t used = 0;
  for (uint32_t bin = 0; bin < BINS; bin++) {
    if (!w->counts[bin]) continue;
    for (int k = 0; k < 3; k++)
      w->means[bin * 3 + k] = (uint8_t)((w->sums[bin * 3 + k] + w->counts[bin] / 2) /
                                        w->counts[bin]);
    w->order[used++] = bin;
  }
  if (used == 0) {
    palette[0] = (GifColorType){0, 0, 0};
    return 1;
  }
  cut_box boxes[256];
  int count = 1;
  boxes[0] = (cut_box){.start = 0, .end = used};
  measure(w, &boxes[0]);
  while (count < most) {
    int widest = -1;
    for (int b = 0; b < count; b++)
      if (boxes[b].end - boxes[b].start >= 2 &&
          (widest < 0 || boxes[b].spread > boxes[widest].spread))
        widest = b;
    if (widest < 0 || boxes[widest].spread <= 0) break;
    if (!split(w, &boxes[widest], &boxes[count])) break;
    count++;
  }
  for (int b = 0; b < count; b++) {
    uint64_t s[3] = {0, 0, 0}, c = 0;
    for (uint32_t i = boxes[b].start; i < boxes[b].end; i++) {
      uint32_t bin = w->order[i];
      c += w->counts[bin];
      for (int k = 0; k < 3; k++) s[k] += w->sums[bin * 3 + k];
    }
    palette[b].Red = (GifByteType)((s[0] + c / 2) / c);
    palette[b].Green = (GifByteType)((s[1] + c / 2) / c);
    palette[b].Blue = (GifByteType)((s[2] + c / 2) / c);
  }
  return count;
}

static int nearest(ic_gif_writer *w, const GifColorType *palette, int entries, int r, int g,
                   int b) {
  uint32_t bin = bin_of(r, g, b);
  if (w->nearest[bin] >= 0) return w->nearest[bin];
  /* The bin's centre stands for every colour in it. */
  int cr = (r & ~7) | 4, cg = (g & ~7) | 4, cb = (b & ~7) | 4;
  int best = 0;
  long best_distance = -1;
  for (int e = 0; e < entries; e++) {
    long dr = cr - palette[e].Red, dg = cg - palette[e].Green, db = cb - palette[e].Blue;
    long distance = dr * dr + dg * dg + db * db;
    if (best_distance < 0 || distance < best_distance) {
      best_distance = distance;
      best = e;
    }
  }
  w->nearest[bin] = (int16_t)best;
  return best;
}

static int clamp255(int v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

ic_status ic_gif_writer_add(ic_gif_writer *w, const uint8_t *pixels, int channels,
                            int delay_ms, ic_result *result) {
  if (channels != 3 && channels != 4)
    return ic_fail(result, IC_ERR_INVALID_ARGUMENT, "GIF frames are RGB or RGBA");
  GifColorType palette[256];
  int transparent;
  int entries = choose_palette(w, pixels, channels, palette, 255, &transparent);
  if (entries < 1) entries = 1;
  memset(w->nearest, 0xFF, BINS * sizeof(int16_t));
  /* An animation's frames all name a transparent index, used or not: the background a frame
   * is cleared to after it is shown is then transparent for every reader (a browser clears
   * to transparent anyway; Pillow and others fill with the frame's transparent index). */
  int keyed = transparent || w->animated;
  int key = keyed ? entries : NO_TRANSPARENT_COLOR;
  int total = entries + (keyed ? 1 : 0), size = 2;
  while (size < total) size *= 2;
  for (int e = entries; e < size; e++) palette[e] = (GifColorType){0, 0, 0};
  ColorMapObject *map = GifMakeMapObject(size, palette);
  if (!map) return ic_fail(result, IC_ERR_NO_MEMORY, "GIF palette failed");
  int ok = 1;
  if (keyed) {
    GraphicsControlBlock gcb = {
        .DisposalMode = w->animated ? DISPOSE_BACKGROUND : DISPOSAL_UNSPECIFIED,
        .UserInputFlag = false,
        .DelayTime = w->animated ? (delay_ms + 5) / 10 : 0,
        .TransparentColor = key};
    GifByteType extension[4];
    size_t length = EGifGCBToExtension(&gcb, extension);
    ok = EGifPutExtension(w->gif, GRAPHICS_EXT_FUNC_CODE, (int)length, extension) == GIF_OK;
  }
  ok = ok && EGifPutImageDesc(w->gif, 0, 0, (int)w->width, (int)w->height, false, map) ==
                 GIF_OK;
  GifFreeMapObject(map);
  /* Floyd-Steinberg, errors in 16ths: this row's and the next's, one spare pixel each side. */
  size_t stride = ((size_t)w->width + 2) * 3;
  memset(w->errors, 0, 2 * stride * sizeof(int32_t));
  for (uint32_t y = 0; ok && y < w->height; y++) {
    int32_t *here = w->errors + (y & 1) * stride, *next = w->errors + ((y + 1) & 1) * stride;
    memset(next, 0, stride * sizeof(int32_t));
    const uint8_t *p = pixels + (size_t)y * w->width * (size_t)channels;
    for (uint32_t x = 0; x < w->width; x++, p += channels) {
      if (channels == 4 && p[3] < 128) {
        w->row[x] = (GifByteType)key;
        continue;
      }
      int32_t *e = here + (x + 1) * 3;
      int r = clamp255(p[0] + e[0] / 16), g = clamp255(p[1] + e[1] / 16),
          b = clamp255(p[2] + e[2] / 16);
      int index = nearest(w, palette, entries, r, g, b);
      w->row[x] = (GifByteType)index;
      int d[3] = {r - palette[index].Red, g - palette[index].Green, b - palette[index].Blue};
      for (int k = 0; k < 3; k++) {
        e[3 + k] += d[k] * 7;
        next[x * 3 + k] += d[k] * 3;
        next[(x + 1) * 3 + k] += d[k] * 5;
        next[(x + 2) * 3 + k] += d[k];
      }
    }
    ok = EGifPutLine(w->gif, w->row, (int)w->width) == GIF_OK;
  }
  if (!ok)
    return ic_fail(result, w->out.failed ? IC_ERR_TOO_LARGE : IC_ERR_ENCODE,
                   "GIF frame %u failed", w->frames);
  w->frames++;
  return IC_OK;
}

ic_status ic_gif_writer_finish(ic_gif_writer *w, uint8_t **out, size_t *out_size,
                               ic_result *result) {
  int error = 0;
  int ok = EGifCloseFile(w->gif, &error) == GIF_OK && !w->out.failed;
  w->gif = NULL;
  if (!ok) return ic_fail(result, IC_ERR_ENCODE, "GIF trailer failed (%d)", error);
  *out = w->out.data;
  *out_size = w->out.size;
  w->out.data = NULL;
  return IC_OK;
}

ic_status ic_encode_gif(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                        const ic_encode_options *options, uint8_t **out, size_t *out_size,
                        ic_result *result) {
  (void)options;
  ic_gif_writer *w = ic_gif_writer_create(width, height, 0, 1, result);
  if (!w) return result->status;
  ic_status status = ic_gif_writer_add(w, pixels, channels, 0, result);
  if (status == IC_OK) status = ic_gif_writer_finish(w, out, out_size, result);
  ic_gif_writer_destroy(w);
  return status;
}
