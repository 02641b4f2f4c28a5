/*
 * GIF encoding (giflib's LZW writer): a still, or the frames of an animation (animation.c),
 * each frame with a palette of its own.
 *
 * Rules kept here:
 * - A frame's colours are counted exactly while at most 32,768 are distinct (a thumbnail's
 *   usually are), else with one bit less of each channel, down to 5. A variance-based median
 *   cut chooses at most 255 entries, then two rounds of Lloyd's refinement move each to the
 *   centre of its colours; one more index is for transparency when a pixel's alpha is under
 *   128 (GIF has no other). Pixels are mapped with Floyd-Steinberg error diffusion (three
 *   quarters of each error passed on, which keeps flat areas quiet) to the entry nearest
 *   their exact colour (a search pruned by green, remembered in a small cache).
 * - Work per frame is bounded: one pass to count (at most 3 rebuilds of the table), at most
 *   254 cuts of at most 32,768 colours (each a counting sort), 2 rounds over them, and one
 *   search of at most 255 entries per pixel. Working memory is fixed (about 4.2 MiB) beside
 *   one row of errors and indices.
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

/* Distinct colours a frame's table holds at most: past it, one bit less of each channel. */
#define COLOURS 32768
/* The table's slots (twice the colours, so probes stay short). */
#define SLOTS 65536
/* The output at most: far above any frame limit's product, far below size_t's. */
#define IC_GIF_MAX_OUTPUT ((size_t)1 << 31)
/* Entries of the nearest-colour cache. */
#define CACHE 4096

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

/* One colour of the frame's table (at the table's precision), its pixels and their sums. */
typedef struct colour_entry {
  uint32_t key; /* r << 16 | g << 8 | b, each shifted right by the table's shift */
  uint32_t count;
  uint64_t sum[3];
  uint8_t mean[3];
} colour_entry;

/* A box of the median cut: entries order[start..<end], with their pixel count. */
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
  colour_entry *slots;  /* SLOTS: the frame's colours, open addressing; count 0 is empty */
  uint32_t listed;      /* the slots the last frame used, listed in `order` */
  colour_entry *spill;  /* COLOURS: the colours while the table is rebuilt coarser */
  uint32_t *order;      /* COLOURS: the slots in use, in box order */
  uint32_t *sorted;     /* COLOURS: scratch of the counting sort */
  uint32_t *cache_key;  /* CACHE: colour + 1 (0 empty) of a recent nearest-entry search */
  uint8_t *cache_index; /* CACHE: its entry */
  int32_t *errors;      /* 2 rows x (width + 2) x 3, in 16ths */
  GifByteType *row;     /* one row of indices */
};

void ic_gif_writer_destroy(ic_gif_writer *w) {
  if (!w) return;
  if (w->gif) EGifCloseFile(w->gif, NULL);
  free(w->out.data);
  free(w->slots);
  free(w->spill);
  free(w->order);
  free(w->sorted);
  free(w->cache_key);
  free(w->cache_index);
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
  w->slots = calloc(SLOTS, sizeof(colour_entry));
  w->spill = malloc(COLOURS * sizeof(colour_entry));
  w->order = malloc(COLOURS * sizeof(uint32_t));
  w->sorted = malloc(COLOURS * sizeof(uint32_t));
  w->cache_key = malloc(CACHE * sizeof(uint32_t));
  w->cache_index = malloc(CACHE);
  w->errors = malloc(2 * ((size_t)width + 2) * 3 * sizeof(int32_t));
  w->row = malloc(width);
  int error = 0;
  w->gif = w->slots && w->spill && w->order && w->sorted && w->cache_key && w->cache_index &&
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

static uint32_t slot_of(uint32_t key) { return (key * 2654435761u) >> 16; }

/* The slot of `key` in the table: its own, or the empty one where it goes. */
static colour_entry *find(colour_entry *slots, uint32_t key) {
  for (uint32_t at = slot_of(key);; at = (at + 1) & (SLOTS - 1))
    if (slots[at].count == 0 || slots[at].key == key) return &slots[at];
}

/* Counts `count` pixels summing to `sum` under `key`; the number of distinct keys. */
static uint32_t count_colour(colour_entry *slots, uint32_t key, uint32_t count,
                             const uint64_t sum[3], uint32_t distinct) {
  colour_entry *e = find(slots, key);
  if (e->count == 0) {
    e->key = key;
    e->sum[0] = e->sum[1] = e->sum[2] = 0;
    distinct++;
  }
  e->count += count;
  for (int k = 0; k < 3; k++) e->sum[k] += sum[k];
  return distinct;
}

/* The spread of box's entries and its channel of most spread. */
static void measure(const ic_gif_writer *w, cut_box *box) {
  double n = 0, s[3] = {0, 0, 0}, q[3] = {0, 0, 0};
  for (uint32_t i = box->start; i < box->end; i++) {
    const colour_entry *e = &w->slots[w->order[i]];
    double c = e->count;
    n += c;
    for (int k = 0; k < 3; k++) {
      double v = e->mean[k];
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

/* Splits box in two at its channel's weighted median: a counting sort of its entries by that
 * channel, then the first place where half its pixels are behind. 0 when it cannot be split. */
static int split(ic_gif_writer *w, cut_box *box, cut_box *other) {
  if (box->end - box->start < 2) return 0;
  uint32_t histogram[257] = {0};
  int k = box->channel;
  for (uint32_t i = box->start; i < box->end; i++)
    histogram[w->slots[w->order[i]].mean[k] + 1]++;
  for (int v = 0; v < 256; v++) histogram[v + 1] += histogram[v];
  for (uint32_t i = box->start; i < box->end; i++) {
    uint32_t slot = w->order[i];
    w->sorted[box->start + histogram[w->slots[slot].mean[k]]++] = slot;
  }
  memcpy(w->order + box->start, w->sorted + box->start,
         (box->end - box->start) * sizeof(uint32_t));
  uint64_t half = box->count / 2, behind = 0;
  uint32_t at = box->start;
  while (at < box->end - 1) {
    behind += w->slots[w->order[at]].count;
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

/* The entry of `palette` nearest (r, g, b): entries sorted by green (`by_green`, their
 * indices), searched outward from the first at or above g while green alone is no farther
 * than the best found. */
static int nearest(const GifColorType *palette, const uint8_t *by_green, int entries, int r,
                   int g, int b) {
  int low = 0, high = entries;
  while (low < high) {
    int mid = (low + high) / 2;
    if (palette[by_green[mid]].Green < g)
      low = mid + 1;
    else
      high = mid;
  }
  int best = by_green[low < entries ? low : entries - 1];
  long best_distance = 1L << 30;
  int up = low, down = low - 1;
  while (up < entries || down >= 0) {
    if (up < entries) {
      const GifColorType *e = &palette[by_green[up]];
      long dg = e->Green - g;
      if (dg * dg >= best_distance) {
        up = entries;
      } else {
        long dr = e->Red - r, db = e->Blue - b, distance = dr * dr + dg * dg + db * db;
        if (distance < best_distance) {
          best_distance = distance;
          best = by_green[up];
        }
        up++;
      }
    }
    if (down >= 0) {
      const GifColorType *e = &palette[by_green[down]];
      long dg = e->Green - g;
      if (dg * dg >= best_distance) {
        down = -1;
      } else {
        long dr = e->Red - r, db = e->Blue - b, distance = dr * dr + dg * dg + db * db;
        if (distance < best_distance) {
          best_distance = distance;
          best = by_green[down];
        }
        down--;
      }
    }
  }
  return best;
}

/* `by_green`: the entries' indices sorted by green (an insertion sort of at most 255). */
static void sort_by_green(const GifColorType *palette, int entries, uint8_t *by_green) {
  for (int e = 0; e < entries; e++) {
    int at = e;
    while (at > 0 && palette[by_green[at - 1]].Green > palette[e].Green) {
      by_green[at] = by_green[at - 1];
      at--;
    }
    by_green[at] = (uint8_t)e;
  }
}

/* Lloyd's refinement of the median cut's palette over the frame's colours (weighted by their
 * pixels): every colour to its nearest entry, every entry to the mean of its colours; a fixed
 * number of rounds. */
static void refine(ic_gif_writer *w, uint32_t used, GifColorType *palette, int entries) {
  enum { ROUNDS = 2 };
  uint8_t by_green[256];
  uint64_t s[256][3], c[256];
  for (int round = 0; round < ROUNDS; round++) {
    memset(s, 0, sizeof(s));
    memset(c, 0, sizeof(c));
    sort_by_green(palette, entries, by_green);
    for (uint32_t i = 0; i < used; i++) {
      const colour_entry *colour = &w->slots[w->order[i]];
      int e = nearest(palette, by_green, entries, colour->mean[0], colour->mean[1],
                      colour->mean[2]);
      c[e] += colour->count;
      for (int k = 0; k < 3; k++) s[e][k] += colour->sum[k];
    }
    for (int e = 0; e < entries; e++) {
      if (!c[e]) continue;
      palette[e].Red = (GifByteType)((s[e][0] + c[e] / 2) / c[e]);
      palette[e].Green = (GifByteType)((s[e][1] + c[e] / 2) / c[e]);
      palette[e].Blue = (GifByteType)((s[e][2] + c[e] / 2) / c[e]);
    }
  }
}

/* Counts the frame's opaque colours into the table: exact while at most COLOURS are
 * distinct, else with one bit less of each channel (the table rebuilt from itself), down to
 * 5 bits, where there can be no more. Returns the colours, listed in `order`. */
static uint32_t count_colours(ic_gif_writer *w, const uint8_t *pixels, int channels,
                              int *transparent) {
  /* The last frame's colours are emptied, not the whole table (every one it used is listed). */
  for (uint32_t i = 0; i < w->listed; i++) w->slots[w->order[i]].count = 0;
  w->listed = 0;
  size_t n = (size_t)w->width * w->height;
  uint32_t distinct = 0;
  int shift = 0;
  *transparent = 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *p = pixels + i * (size_t)channels;
    if (channels == 4 && p[3] < 128) {
      *transparent = 1;
      continue;
    }
    uint32_t key = (uint32_t)(p[0] >> shift) << 16 | (uint32_t)(p[1] >> shift) << 8 |
                   (uint32_t)(p[2] >> shift);
    uint64_t sum[3] = {p[0], p[1], p[2]};
    distinct = count_colour(w->slots, key, 1, sum, distinct);
    if (distinct >= COLOURS && shift < 3) {
      /* One bit less: the colours so far merged into their coarser keys. */
      uint32_t kept = 0;
      for (uint32_t at = 0; at < SLOTS; at++)
        if (w->slots[at].count) w->spill[kept++] = w->slots[at];
      memset(w->slots, 0, SLOTS * sizeof(colour_entry));
      shift++;
      distinct = 0;
      for (uint32_t e = 0; e < kept; e++) {
        uint32_t old = w->spill[e].key;
        uint32_t key2 = ((old >> 16 & 0xFF) >> 1) << 16 | ((old >> 8 & 0xFF) >> 1) << 8 |
                        ((old & 0xFF) >> 1);
        distinct = count_colour(w->slots, key2, w->spill[e].count, w->spill[e].sum, distinct);
      }
    }
  }
  uint32_t used = 0;
  for (uint32_t at = 0; at < SLOTS && used < COLOURS; at++) {
    colour_entry *e = &w->slots[at];
    if (!e->count) continue;
    for (int k = 0; k < 3; k++)
      e->mean[k] = (uint8_t)((e->sum[k] + e->count / 2) / e->count);
    w->order[used++] = at;
  }
  w->listed = used;
  return used;
}

/* The palette of the frame's opaque pixels: its entries, at most `most`. */
static int choose_palette(ic_gif_writer *w, const uint8_t *pixels, int channels,
                          GifColorType *palette, int most, int *transparent) {
  uint32_t used = count_colours(w, pixels, channels, transparent);
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
      const colour_entry *e = &w->slots[w->order[i]];
      c += e->count;
      for (int k = 0; k < 3; k++) s[k] += e->sum[k];
    }
    palette[b].Red = (GifByteType)((s[0] + c / 2) / c);
    palette[b].Green = (GifByteType)((s[1] + c / 2) / c);
    palette[b].Blue = (GifByteType)((s[2] + c / 2) / c);
  }
  /* Exact colours that fit need no refinement; others are moved to their colours' centres. */
  if ((uint32_t)count < used) refine(w, used, palette, count);
  return count;
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
  uint8_t by_green[256];
  sort_by_green(palette, entries, by_green);
  memset(w->cache_key, 0, CACHE * sizeof(uint32_t));
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
      /* The nearest entry to the exact colour, remembered for the next pixel of it. */
      uint32_t colour = (uint32_t)r << 16 | (uint32_t)g << 8 | (uint32_t)b;
      uint32_t at = (colour * 2654435761u) >> 20;
      int index;
      if (w->cache_key[at] == colour + 1) {
        index = w->cache_index[at];
      } else {
        index = nearest(palette, by_green, entries, r, g, b);
        w->cache_key[at] = colour + 1;
        w->cache_index[at] = (uint8_t)index;
      }
      w->row[x] = (GifByteType)index;
      int d[3] = {(r - palette[index].Red) * 3 / 4, (g - palette[index].Green) * 3 / 4,
                  (b - palette[index].Blue) * 3 / 4};
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
