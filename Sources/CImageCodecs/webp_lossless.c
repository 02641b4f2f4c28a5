/*
 * How many prefix-code groups a lossless WebP (VP8L) bitstream makes libwebp build, read
 * before libwebp sees it. libwebp 1.2 allocates a full set of Huffman tables (about 12 KB)
 * for every group its entropy image names, whatever the picture's size: a 295 KB file of
 * 1024x1024 naming 65,536 groups took 374 MB. Nothing in the header says how many groups
 * there are: they are the distinct values of the entropy image, itself an entropy-coded
 * sub-image behind the transforms' sub-images. So this reads the bitstream up to the end of
 * the entropy image (RFC 9649, sections 3 to 6): header, transforms (decoding their
 * sub-images only to get past them), colour cache, and the entropy image's symbols. New
 * values only come from literals (backward references and the colour cache repeat earlier
 * ones), so distances are skipped, not resolved.
 *
 * Bounded by the bitstream: every symbol consumes bits, sub-images have at most the pixels
 * their sizes give, and the control is checked every IC_VP8L_CHECK_PIXELS pixels.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define IC_VP8L_CHECK_PIXELS (1u << 16)
#define IC_VP8L_MAX_CODE_LENGTH 15

typedef ic_bits vp8l_bits;

static uint32_t read_bits(vp8l_bits *b, int n) { return ic_bits_read(b, n, 0); }

/* A canonical prefix code: symbols sorted by code length, and the counts per length. */
typedef struct vp8l_code {
  uint16_t count[IC_VP8L_MAX_CODE_LENGTH + 1];
  uint16_t *symbols;
  int single; /* only one symbol: it takes no bits */
  uint16_t only;
} vp8l_code;

static void code_free(vp8l_code *code) {
  free(code->symbols);
  code->symbols = NULL;
}

/* Builds the code from lengths; 0 when they are not a complete prefix code. */
static int code_build(vp8l_code *code, const uint8_t *lengths, int alphabet) {
  memset(code->count, 0, sizeof(code->count));
  int used = 0;
  uint16_t last = 0;
  for (int s = 0; s < alphabet; s++) {
    if (lengths[s]) {
      code->count[lengths[s]]++;
      used++;
      last = (uint16_t)s;
    }
  }
  code->single = used == 1;
  code->only = last;
  if (used == 0) return 0;
  code->symbols = malloc(sizeof(uint16_t) * (size_t)used);
  if (!code->symbols) return 0;
  uint16_t offsets[IC_VP8L_MAX_CODE_LENGTH + 2] = {0};
  for (int len = 1; len <= IC_VP8L_MAX_CODE_LENGTH; len++)
    offsets[len + 1] = (uint16_t)(offsets[len] + code->count[len]);
  for (int s = 0; s < alphabet; s++)
    if (lengths[s]) code->symbols[offsets[lengths[s]]++] = (uint16_t)s;
  if (code->single) return 1;
  /* Complete: the Kraft sum is exactly one (libwebp refuses other codes). */
  int64_t left = 1;
  for (int len = 1; len <= IC_VP8L_MAX_CODE_LENGTH; len++) {
    left = left * 2 - code->count[len];
    if (left < 0) return 0;
  }
  return left == 0;
}

static int code_read(const vp8l_code *code, vp8l_bits *b) {
  if (code->single) return code->only;
  int first = 0, index = 0, value = 0;
  for (int len = 1; len <= IC_VP8L_MAX_CODE_LENGTH; len++) {
    value |= (int)read_bits(b, 1);
    if (b->over) return -1;
    int count = code->count[len];
    if (value - first < count) return code->symbols[index + value - first];
    index += count;
    first = (first + count) << 1;
    value <<= 1;
  }
  return -1;
}

static const uint8_t code_length_order[19] = {17, 18, 0, 1,  2,  3,  4,  5,  16, 6,
                                              7,  8,  9, 10, 11, 12, 13, 14, 15};

/* Reads one prefix code of `alphabet` symbols (section 3.7.2). */
static int read_code(vp8l_bits *b, int alphabet, vp8l_code *code) {
  uint8_t *lengths = calloc((size_t)alphabet, 1);
  if (!lengths) return 0;
  int ok = 0;
  if (read_bits(b, 1)) { /* simple */
    int symbols = (int)read_bits(b, 1) + 1;
    int first_bits = read_bits(b, 1) ? 8 : 1;
    uint32_t s0 = read_bits(b, first_bits);
    if (s0 < (uint32_t)alphabet) lengths[s0] = 1;
    if (symbols == 2) {
      uint32_t s1 = read_bits(b, 8);
      if (s1 < (uint32_t)alphabet) lengths[s1] = 1;
    }
    ok = !b->over;
    if (ok) {
      /* Two symbols of length 1, or one of any length (no bits). */
      int used = 0;
      for (int s = 0; s < alphabet; s++) used += lengths[s] != 0;
      if (used == 1)
        for (int s = 0; s < alphabet; s++) lengths[s] = lengths[s] ? 1 : 0;
      ok = used > 0 && code_build(code, lengths, alphabet);
    }
  } else {
    uint8_t length_lengths[19] = {0};
    int count = (int)read_bits(b, 4) + 4;
    for (int i = 0; i < count; i++) length_lengths[code_length_order[i]] = (uint8_t)read_bits(b, 3);
    vp8l_code lengths_code;
    memset(&lengths_code, 0, sizeof(lengths_code));
    ok = !b->over && code_build(&lengths_code, length_lengths, 19);
    int max_symbol = alphabet;
    if (ok && read_bits(b, 1)) {
      int width = 2 + 2 * (int)read_bits(b, 3);
      max_symbol = 2 + (int)read_bits(b, width);
      if (max_symbol > alphabet) ok = 0;
    }
    int previous = 8, symbol = 0;
    while (ok && symbol < alphabet && max_symbol-- > 0) {
      int v = code_read(&lengths_code, b);
      if (v < 0) {
        ok = 0;
      } else if (v < 16) {
        lengths[symbol++] = (uint8_t)v;
        if (v) previous = v;
      } else {
        int extra = v == 16 ? 2 : v == 17 ? 3 : 7, offset = v == 16 ? 3 : v == 17 ? 3 : 11;
        int repeat = (int)read_bits(b, extra) + offset;
        if (symbol + repeat > alphabet) {
          ok = 0;
        } else {
          for (int i = 0; i < repeat; i++) lengths[symbol++] = (uint8_t)(v == 16 ? previous : 0);
        }
      }
    }
    code_free(&lengths_code);
    ok = ok && !b->over && code_build(code, lengths, alphabet);
  }
  free(lengths);
  return ok;
}

/* Skips the extra bits of a length or distance prefix symbol (section 5.2.2). */
static void skip_prefix_extra(vp8l_bits *b, int prefix) {
  if (prefix >= 4) read_bits(b, (prefix - 2) >> 1);
}

/* Decodes the symbols of a width x height image coded with one group of five codes (a
 * sub-image) or, with `groups` NULL, only passes over them. When `values` is set, the
 * distinct (red << 8 | green) values of its literals are marked in it (65,536 flags). */
static ic_status read_image(vp8l_bits *b, uint32_t width, uint32_t height, uint8_t *values,
                            const ic_control *control, ic_result *result) {
  int cache_bits = 0;
  if (read_bits(b, 1)) {
    cache_bits = (int)read_bits(b, 4);
    if (cache_bits < 1 || cache_bits > 11)
      return ic_fail(result, IC_ERR_CORRUPT, "WebP lossless colour cache of %d bits", cache_bits);
  }
  static const int base_alphabets[5] = {256 + 24, 256, 256, 256, 40};
  vp8l_code codes[5];
  memset(codes, 0, sizeof(codes));
  ic_status status = IC_OK;
  for (int c = 0; c < 5 && status == IC_OK; c++) {
    int alphabet = base_alphabets[c] + (c == 0 && cache_bits ? 1 << cache_bits : 0);
    if (!read_code(b, alphabet, &codes[c]))
      status = ic_fail(result, IC_ERR_CORRUPT, "WebP lossless prefix code is invalid");
  }
  uint64_t pixels = (uint64_t)width * height, at = 0, checked = 0;
  while (status == IC_OK && at < pixels) {
    if (at - checked >= IC_VP8L_CHECK_PIXELS) {
      checked = at;
      if (ic_check(control, result) != IC_OK) {
        status = result->status;
        break;
      }
    }
    int green = code_read(&codes[0], b);
    if (green < 0) {
      status = ic_fail(result, IC_ERR_TRUNCATED, "WebP lossless data ends in a sub-image");
    } else if (green < 256) {
      int red = code_read(&codes[1], b);
      code_read(&codes[2], b);
      code_read(&codes[3], b);
      if (red < 0 || b->over) {
        status = ic_fail(result, IC_ERR_TRUNCATED, "WebP lossless data ends in a sub-image");
      } else {
        if (values) values[(uint32_t)red << 8 | (uint32_t)green] = 1;
        at++;
      }
    } else if (green < 256 + 24) {
      int prefix = green - 256;
      uint32_t length;
      if (prefix < 4) {
        length = (uint32_t)prefix + 1;
      } else {
        int extra = (prefix - 2) >> 1;
        length = ((2u + (uint32_t)(prefix & 1)) << extra) + read_bits(b, extra) + 1;
      }
      int distance = code_read(&codes[4], b);
      if (distance < 0 || b->over) {
        status = ic_fail(result, IC_ERR_TRUNCATED, "WebP lossless data ends in a sub-image");
      } else {
        skip_prefix_extra(b, distance);
        /* A copy repeats pixels already there: no value it brings is new. */
        at += length;
      }
    } else {
      at++; /* a colour cache entry: an earlier value */
    }
    if (b->over && status == IC_OK)
      status = ic_fail(result, IC_ERR_TRUNCATED, "WebP lossless data ends in a sub-image");
  }
  for (int c = 0; c < 5; c++) code_free(&codes[c]);
  return status;
}

static uint32_t subsample(uint32_t size, int bits) { return (size + (1u << bits) - 1) >> bits; }

ic_status ic_vp8l_groups(const uint8_t *data, size_t size, const ic_control *control,
                         ic_result *result, uint32_t *groups, int *cache_bits) {
  *groups = 1;
  *cache_bits = 0;
  vp8l_bits b = {data, size, 0, 0};
  if (read_bits(&b, 8) != 0x2f) return ic_fail(result, IC_ERR_CORRUPT, "not a WebP lossless bitstream");
  uint32_t width = read_bits(&b, 14) + 1, height = read_bits(&b, 14) + 1;
  read_bits(&b, 1); /* alpha hint */
  if (read_bits(&b, 3) != 0) return ic_fail(result, IC_ERR_CORRUPT, "WebP lossless version is not 0");
  uint32_t seen = 0;
  while (!b.over && read_bits(&b, 1)) {
    int type = (int)read_bits(&b, 2);
    if (seen & 1u << type) return ic_fail(result, IC_ERR_CORRUPT, "WebP lossless transform repeats");
    seen |= 1u << type;
    ic_status status = IC_OK;
    if (type == 0 || type == 1) {
      int bits = (int)read_bits(&b, 3) + 2;
      status = read_image(&b, subsample(width, bits), subsample(height, bits), NULL, control, result);
    } else if (type == 3) {
      uint32_t colours = read_bits(&b, 8) + 1;
      status = read_image(&b, colours, 1, NULL, control, result);
      int bits = colours > 16 ? 0 : colours > 4 ? 1 : colours > 2 ? 2 : 3;
      width = subsample(width, bits);
    }
    if (status != IC_OK) return status;
  }
  if (read_bits(&b, 1)) {
    *cache_bits = (int)read_bits(&b, 4);
    if (*cache_bits < 1 || *cache_bits > 11)
      return ic_fail(result, IC_ERR_CORRUPT, "WebP lossless colour cache of %d bits", *cache_bits);
  }
  if (b.over) return ic_fail(result, IC_ERR_TRUNCATED, "WebP lossless header is truncated");
  if (!read_bits(&b, 1)) return IC_OK; /* one group for the whole image */
  int bits = (int)read_bits(&b, 3) + 2;
  uint8_t *values = calloc(1u << 16, 1);
  if (!values) return ic_fail(result, IC_ERR_NO_MEMORY, "WebP scan allocation failed");
  ic_status status =
      read_image(&b, subsample(width, bits), subsample(height, bits), values, control, result);
  if (status == IC_OK) {
    /* libwebp 1.2 sizes its tables by the largest index, or by the distinct ones past 1000. */
    uint32_t largest = 0, distinct = 0;
    for (uint32_t v = 0; v < 1u << 16; v++)
      if (values[v]) {
        largest = v;
        distinct++;
      }
    *groups = largest + 1 > 1000 ? distinct : largest + 1;
  }
  free(values);
  return status;
}
