/*
 * A JPEG XL file's headers up to those of its first frame shown, read before libjxl decodes a
 * pixel (jxl_decode.c). libjxl 0.7 allocates with its own allocator: its memory manager covers
 * only the decoder object (libjxl issue 1795; later versions route images through it), so what
 * a decode holds cannot be counted as it happens, only foreseen, and libjxl outside fuzzing
 * builds takes any frame size a file declares. So this reads (ISO/IEC 18181-1, whose fields
 * and codings are followed here):
 *
 *  - the image's header: what a frame header depends on (XYB or not, extra channels,
 *    animation), and where it ends;
 *  - each frame's header, from the first to the first one shown, past the hidden ones before
 *    it (a DC frame, a reference frame of patches) by their tables of contents: its type,
 *    VarDCT or modular, its passes, its size when it declares one of its own (a 64x64 image
 *    may declare a frame of 2^30 on a side; every such size is judged by the pixel limits
 *    here), and whether it is the last frame.
 *
 * An ICC profile after the image's header is an entropy-coded stream: then the first frame's
 * place is where libjxl's reading of the headers ended, exact when the codestream is one run
 * of bytes (a bare codestream, or one box); without a profile, where both readings exist
 * they must agree. A preview frame first, a profile in a codestream split over jxlp boxes, a
 * permuted table of contents, an extension, readings that part ways, or bytes that run out
 * leave the frame unknown, never refused: libjxl judges validity, and the estimate counts the
 * worst case. Bounded: the codestream's bytes (a split one gathered up to
 * IC_JXL_GATHER_BYTES), IC_JXL_MAX_BOXES boxes, IC_JXL_MAX_HIDDEN frames.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* A codestream split over jxlp boxes is gathered up to this many bytes: its headers, and the
 * hidden frames before the first one shown (a DC frame is 1/64 of the image). */
#define IC_JXL_GATHER_BYTES (4u << 20)
/* Boxes walked in a container. */
#define IC_JXL_MAX_BOXES 256
/* Frames read past before the first one shown. */
#define IC_JXL_MAX_HIDDEN 8

typedef ic_bits jxl_bits;

static uint32_t bits(jxl_bits *b, int n) { return ic_bits_read(b, n, 0); }

/* U32(d0, d1, d2, d3): a 2-bit selector, then that distribution's value. Each distribution is
 * an offset and a bit count (0 bits: a constant). */
typedef struct jxl_dist {
  uint32_t offset;
  int bits;
} jxl_dist;

static uint32_t u32(jxl_bits *b, jxl_dist d0, jxl_dist d1, jxl_dist d2, jxl_dist d3) {
  jxl_dist d[4] = {d0, d1, d2, d3};
  jxl_dist chosen = d[bits(b, 2)];
  return chosen.offset + bits(b, chosen.bits);
}

#define VAL(v) ((jxl_dist){(v), 0})
#define BITS(n) ((jxl_dist){0, (n)})
#define OFFSET(n, o) ((jxl_dist){(o), (n)})

static uint64_t u64(jxl_bits *b) {
  switch (bits(b, 2)) {
  case 0: return 0;
  case 1: return 1 + bits(b, 4);
  case 2: return 17 + bits(b, 8);
  default: break;
  }
  uint64_t value = bits(b, 12);
  for (int shift = 12; bits(b, 1) && !b->over; shift += 8) {
    if (shift == 60) {
      value |= (uint64_t)bits(b, 4) << 60;
      break;
    }
    value |= (uint64_t)bits(b, 8) << shift;
  }
  return value;
}

static void skip(jxl_bits *b, size_t count) {
  b->at += count;
  if (b->at > b->size * 8) b->over = 1;
}

static uint32_t enumeration(jxl_bits *b) {
  return u32(b, VAL(0), VAL(1), OFFSET(4, 2), OFFSET(6, 18));
}

/* SizeHeader: the image's width and height. */
static void size_header(jxl_bits *b, uint32_t *width, uint32_t *height) {
  static const uint32_t ratios[8][2] = {{0, 0}, {1, 1}, {12, 10}, {4, 3},
                                        {3, 2}, {16, 9}, {5, 4},   {2, 1}};
  int small = (int)bits(b, 1);
  uint64_t h = small ? (bits(b, 5) + 1) * 8u
                     : u32(b, OFFSET(9, 1), OFFSET(13, 1), OFFSET(18, 1), OFFSET(30, 1));
  uint32_t ratio = bits(b, 3);
  uint64_t w = ratio ? h * ratios[ratio][0] / ratios[ratio][1]
               : small ? (bits(b, 5) + 1) * 8u
                       : u32(b, OFFSET(9, 1), OFFSET(13, 1), OFFSET(18, 1), OFFSET(30, 1));
  *width = w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
  *height = (uint32_t)h;
}

static void bit_depth(jxl_bits *b) {
  if (bits(b, 1)) { /* floating point */
    u32(b, VAL(32), VAL(16), VAL(24), OFFSET(6, 1));
    bits(b, 4);
  } else {
    u32(b, VAL(8), VAL(10), VAL(12), OFFSET(6, 1));
  }
}

static void custom_xy(jxl_bits *b) {
  for (int i = 0; i < 2; i++)
    u32(b, BITS(19), OFFSET(19, 524288), OFFSET(20, 1048576), OFFSET(21, 2097152));
}

/* What the image's header says that the first frame's header depends on. */
typedef struct jxl_image {
  uint32_t width, height, extra_channels;
  int xyb, animation, timecodes;
  int icc;  /* an ICC profile's stream follows */
  int stop; /* a preview frame or an extension follows: the frame is not read */
} jxl_image;

/* ImageMetadata, and the CustomTransformData after it. */
static void image_metadata(jxl_bits *b, jxl_image *image) {
  if (bits(b, 1)) { /* all default: 8-bit XYB, nothing extra */
    image->xyb = 1;
  } else {
    int extra_fields = (int)bits(b, 1);
    if (extra_fields) {
      bits(b, 3); /* orientation */
      if (bits(b, 1)) {
        uint32_t w, h;
        size_header(b, &w, &h); /* intrinsic size */
      }
      if (bits(b, 1)) {
        image->stop = 1; /* a preview frame comes first */
        return;
      }
      if ((image->animation = (int)bits(b, 1))) {
        u32(b, VAL(100), VAL(1000), OFFSET(10, 1), OFFSET(30, 1));
        u32(b, VAL(1), VAL(1001), OFFSET(8, 1), OFFSET(10, 1));
        u32(b, VAL(0), BITS(3), BITS(16), BITS(32));
        image->timecodes = (int)bits(b, 1);
      }
    }
    bit_depth(b);
    bits(b, 1); /* modular_16_bit_buffer_sufficient */
    image->extra_channels = u32(b, VAL(0), VAL(1), OFFSET(4, 2), OFFSET(12, 1));
    for (uint32_t i = 0; i < image->extra_channels && !b->over; i++) {
      if (bits(b, 1)) continue; /* all default: 8-bit alpha */
      uint32_t type = enumeration(b);
      bit_depth(b);
      u32(b, VAL(0), VAL(3), VAL(4), OFFSET(3, 1)); /* dim_shift */
      skip(b, 8u * u32(b, VAL(0), BITS(4), OFFSET(5, 16), OFFSET(10, 48))); /* its name */
      if (type == 0 /* alpha */) bits(b, 1);
      if (type == 2 /* spot colour */) skip(b, 4 * 16);
      if (type == 5 /* CFA */) u32(b, VAL(1), BITS(2), OFFSET(4, 3), OFFSET(8, 19));
    }
    image->xyb = (int)bits(b, 1);
    if (!bits(b, 1)) { /* the colour encoding, not all default */
      image->icc = (int)bits(b, 1);
      uint32_t space = enumeration(b);
      if (!image->icc) {
        if (space != 2 /* XYB: implicit white point */ && enumeration(b) == 2) custom_xy(b);
        if (space != 1 && space != 2 /* grey and XYB have no primaries */ &&
            enumeration(b) == 2)
          for (int i = 0; i < 3; i++) custom_xy(b);
        if (space != 2) {
          if (bits(b, 1)) bits(b, 24); /* gamma */
          else enumeration(b);         /* transfer function */
        }
        enumeration(b); /* rendering intent */
      }
    }
    if (extra_fields && !bits(b, 1)) skip(b, 16 + 16 + 1 + 16); /* tone mapping */
    if (u64(b) != 0) {
      image->stop = 1; /* extensions */
      return;
    }
  }
  if (!bits(b, 1)) { /* custom transform data */
    if (image->xyb && !bits(b, 1)) skip(b, 16 * (9 + 3 + 4)); /* opsin inverse matrix */
    uint32_t weights = bits(b, 3);
    if (weights & 1) skip(b, 16 * 15);
    if (weights & 2) skip(b, 16 * 55);
    if (weights & 4) skip(b, 16 * 210);
  }
}

static int32_t unpack_signed(uint32_t value) {
  return value & 1 ? -(int32_t)((value + 1) / 2) : (int32_t)(value / 2);
}

/* What a frame header says. */
typedef struct jxl_frame {
  uint32_t type; /* 0 regular, 1 DC, 2 reference-only, 3 skip-progressive */
  int modular, last, custom_size;
  uint32_t passes, upsampling, group_shift, dc_level, max_hshift, max_vshift;
  uint32_t width, height; /* as displayed: the image's, or its own */
} jxl_frame;

/* LoopFilter: its fields are skipped. */
static void loop_filter(jxl_bits *b, int modular) {
  if (bits(b, 1)) return; /* all default */
  if (bits(b, 1) && bits(b, 1)) skip(b, 6 * 16); /* gaborish, custom weights */
  if (bits(b, 2)) {                                /* edge-preserving filter iterations */
    if (!modular && bits(b, 1)) skip(b, 8 * 16);   /* sharpness table */
    if (bits(b, 1)) skip(b, 5 * 16);               /* channel weights */
    if (bits(b, 1)) skip(b, (modular ? 3 : 4) * 16); /* sigma scales */
    if (modular) skip(b, 16);
  }
  if (u64(b) != 0) b->over = 1; /* extensions: not followed */
}

/* A frame header (byte-aligned), through its end; the reader then stands at its TOC. Sets
 * overrun for what is not followed here (extensions) as for bytes that run out. */
static void frame_header(jxl_bits *b, const jxl_image *image, jxl_frame *f) {
  *f = (jxl_frame){.passes = 1, .upsampling = 1, .group_shift = 1, .last = 1};
  f->width = image->width;
  f->height = image->height;
  if (bits(b, 1)) return; /* all default: one regular VarDCT frame, the last */
  f->type = u32(b, VAL(0), VAL(1), VAL(2), VAL(3));
  f->modular = (int)bits(b, 1);
  uint64_t flags = u64(b);
  int ycbcr = image->xyb ? 0 : (int)bits(b, 1);
  const uint64_t use_dc_frame = 32;
  if (ycbcr && !(flags & use_dc_frame)) {
    static const uint32_t hshift[4] = {0, 1, 1, 0}, vshift[4] = {0, 1, 0, 1};
    for (int c = 0; c < 3; c++) {
      uint32_t mode = bits(b, 2);
      if (hshift[mode] > f->max_hshift) f->max_hshift = hshift[mode];
      if (vshift[mode] > f->max_vshift) f->max_vshift = vshift[mode];
    }
  }
  if (!(flags & use_dc_frame)) {
    f->upsampling = u32(b, VAL(1), VAL(2), VAL(4), VAL(8));
    for (uint32_t i = 0; i < image->extra_channels && !b->over; i++)
      u32(b, VAL(1), VAL(2), VAL(4), VAL(8));
  }
  if (f->modular) f->group_shift = bits(b, 2);
  if (!f->modular && image->xyb) bits(b, 6); /* x and b quantisation scales */
  if (f->type != 2) {                         /* passes, but for a reference-only frame */
    f->passes = u32(b, VAL(1), VAL(2), VAL(3), OFFSET(3, 4));
    if (f->passes != 1) {
      uint32_t downsample = u32(b, VAL(0), VAL(1), VAL(2), OFFSET(1, 3));
      if (downsample > 4) downsample = 4; /* libjxl refuses more */
      skip(b, 2u * (f->passes - 1));
      for (uint32_t i = 0; i < downsample; i++) u32(b, VAL(1), VAL(2), VAL(4), VAL(8));
      for (uint32_t i = 0; i < downsample; i++) u32(b, VAL(0), VAL(1), VAL(2), BITS(3));
    }
  }
  if (f->type == 1) { /* a DC frame: 1/8 of each side per level */
    f->dc_level = u32(b, VAL(1), VAL(2), VAL(3), VAL(4));
    f->width = (uint32_t)(((uint64_t)image->width + (1u << (3 * f->dc_level)) - 1) >>
                          (3 * f->dc_level));
    f->height = (uint32_t)(((uint64_t)image->height + (1u << (3 * f->dc_level)) - 1) >>
                           (3 * f->dc_level));
  }
  int partial = 0;
  if (f->type != 1 && bits(b, 1)) { /* custom size or origin */
    jxl_dist d0 = BITS(8), d1 = OFFSET(11, 256), d2 = OFFSET(14, 2304), d3 = OFFSET(30, 18688);
    int32_t x0 = 0, y0 = 0;
    if (f->type == 0 || f->type == 3) {
      x0 = unpack_signed(u32(b, d0, d1, d2, d3));
      y0 = unpack_signed(u32(b, d0, d1, d2, d3));
    }
    f->width = u32(b, d0, d1, d2, d3);
    f->height = u32(b, d0, d1, d2, d3);
    f->custom_size = 1;
    partial = x0 > 0 || y0 > 0 || (int64_t)f->width + x0 < (int64_t)image->width ||
              (int64_t)f->height + y0 < (int64_t)image->height;
  }
  uint32_t duration = 0, reference = 0, mode = 0;
  if (f->type == 0 || f->type == 3) {
    for (uint32_t i = 0; i <= image->extra_channels && !b->over; i++) {
      uint32_t channel_mode = u32(b, VAL(0), VAL(1), VAL(2), OFFSET(2, 3));
      int alpha_blend = image->extra_channels > 0 && (channel_mode == 2 || channel_mode == 3);
      if (alpha_blend) u32(b, VAL(0), VAL(1), VAL(2), OFFSET(3, 3));
      if (alpha_blend || channel_mode == 4) bits(b, 1);
      if (channel_mode != 0 || partial) u32(b, VAL(0), VAL(1), VAL(2), VAL(3));
      if (i == 0) mode = channel_mode;
    }
    if (image->animation) {
      duration = u32(b, VAL(0), VAL(1), BITS(8), BITS(32));
      if (image->timecodes) bits(b, 32);
    }
    f->last = (int)bits(b, 1);
  }
  if (f->type != 0) f->last = 0;
  if (f->type != 1 && !f->last) reference = u32(b, VAL(0), VAL(1), VAL(2), VAL(3));
  if (f->type != 1) {
    int referenced = !f->last && (duration == 0 || reference != 0);
    if ((referenced && mode == 0 && !partial && (f->type == 0 || f->type == 3)) || f->type == 2)
      bits(b, 1); /* saved before the colour transform */
  }
  skip(b, 8u * u32(b, VAL(0), BITS(4), OFFSET(5, 16), OFFSET(10, 48))); /* its name */
  loop_filter(b, f->modular);
  if (u64(b) != 0) b->over = 1; /* extensions: not followed */
}

/* Skips a frame's table of contents and its sections (the reader stands after its header);
 * overrun when the table is permuted (an entropy-coded permutation) or too long. */
static void skip_frame(jxl_bits *b, const jxl_frame *f) {
  uint64_t width = ((uint64_t)f->width + f->upsampling - 1) / f->upsampling;
  uint64_t height = ((uint64_t)f->height + f->upsampling - 1) / f->upsampling;
  uint64_t group = 128u << f->group_shift;
  uint64_t hblock = 8u << f->max_hshift, vblock = 8u << f->max_vshift;
  uint64_t xblocks = (width + hblock - 1) / hblock << f->max_hshift;
  uint64_t yblocks = (height + vblock - 1) / vblock << f->max_vshift;
  uint64_t groups = ((width + group - 1) / group) * ((height + group - 1) / group);
  uint64_t dc_groups = ((xblocks + group - 1) / group) * ((yblocks + group - 1) / group);
  uint64_t entries = groups == 1 && f->passes == 1 ? 1 : 2 + dc_groups + groups * f->passes;
  if (entries > 65536 || bits(b, 1)) { /* libjxl refuses more; a permutation */
    b->over = 1;
    return;
  }
  b->at = (b->at + 7) / 8 * 8;
  uint64_t total = 0;
  for (uint64_t i = 0; i < entries && !b->over; i++)
    total += u32(b, BITS(10), OFFSET(14, 1024), OFFSET(22, 17408), OFFSET(30, 4211712));
  b->at = (b->at + 7) / 8 * 8;
  if (total > (uint64_t)b->size) {
    b->over = 1;
    return;
  }
  skip(b, (size_t)total * 8);
}

/* A container's codestream (ISO/IEC 18181-2): one jxlc box, or jxlp boxes in order. Points
 * *codestream at it when it is one run of bytes; otherwise gathers at most
 * IC_JXL_GATHER_BYTES of it into *gathered (the caller frees it). *at, libjxl's file offset,
 * becomes an offset in the codestream when that is one run of bytes holding it, and SIZE_MAX
 * otherwise. Returns the codestream's length, 0 when there is none. */
static size_t container_codestream(const uint8_t *data, size_t size, const uint8_t **codestream,
                                   uint8_t **gathered, size_t *at) {
  size_t offset = 0, length = 0, file_at = *at;
  int parts = 0;
  *at = SIZE_MAX;
  for (int boxes = 0; boxes < IC_JXL_MAX_BOXES && size - offset >= 8; boxes++) {
    const uint8_t *box = data + offset;
    uint64_t box_length = ic_be32(box);
    size_t header = 8;
    if (box_length == 1) {
      if (size - offset < 16) break;
      box_length = (uint64_t)ic_be32(box + 8) << 32 | ic_be32(box + 12);
      header = 16;
    } else if (box_length == 0) {
      box_length = size - offset;
    }
    if (box_length < header || box_length > size - offset) break;
    int jxlp = memcmp(box + 4, "jxlp", 4) == 0;
    size_t payload = offset + header + (jxlp ? 4 : 0), end = offset + (size_t)box_length;
    if ((jxlp || memcmp(box + 4, "jxlc", 4) == 0) && payload <= end) {
      if (parts++ == 0) {
        *codestream = data + payload;
        length = end - payload;
        if (file_at >= payload && file_at < end) *at = file_at - payload;
      } else {
        if (parts == 2) {
          *at = SIZE_MAX; /* libjxl's offsets are exact only in one run */
          if (!(*gathered = malloc(IC_JXL_GATHER_BYTES))) return 0;
          length = length < IC_JXL_GATHER_BYTES ? length : IC_JXL_GATHER_BYTES;
          memcpy(*gathered, *codestream, length);
          *codestream = *gathered;
        }
        size_t n = end - payload;
        if (n > IC_JXL_GATHER_BYTES - length) n = IC_JXL_GATHER_BYTES - length;
        memcpy(*gathered + length, data + payload, n);
        length += n;
      }
    }
    offset = end;
  }
  return length;
}

ic_status ic_jxl_scan(const uint8_t *data, size_t size, size_t frame_at,
                      const ic_limits *limits, ic_result *result, ic_jxl_layout *layout) {
  memset(layout, 0, sizeof(*layout));
  const uint8_t *codestream = data;
  uint8_t *gathered = NULL;
  size_t length = size, at = frame_at;
  if (!(size >= 2 && data[0] == 0xFF && data[1] == 0x0A))
    length = container_codestream(data, size, &codestream, &gathered, &at);
  jxl_bits b = {codestream, length, 0, 0};
  jxl_image image = {0};
  if (length >= 2 && bits(&b, 8) == 0xFF && bits(&b, 8) == 0x0A) {
    size_header(&b, &image.width, &image.height);
    image_metadata(&b, &image);
  } else {
    image.stop = 1;
  }
  if (image.icc && !image.stop && at != SIZE_MAX)
    b.at = at * 8; /* after the profile, where libjxl's reading of it ended */
  else if (image.icc)
    image.stop = 1;
  else if (at != SIZE_MAX && at != (b.at + 7) / 8)
    image.stop = 1; /* libjxl read the headers to another end: trust neither reading */
  else
    b.at = (b.at + 7) / 8 * 8; /* the frame starts on a byte */
  /* Frames before the first one shown (a DC frame, a reference frame of patches) are read
   * past, each judged by the limits; the estimate counts what they hold. */
  ic_status status = IC_OK;
  jxl_frame f = {0};
  for (int frames = 0; !image.stop && !b.over && frames < IC_JXL_MAX_HIDDEN; frames++) {
    frame_header(&b, &image, &f);
    if (b.over) break;
    if (f.custom_size || f.type == 1) {
      status = ic_fail_over_limits(result, "JPEG XL: a frame, ", f.width, f.height,
                                   limits->max_width, limits->max_height, limits->max_pixels);
      if (status != IC_OK) break;
    }
    if (f.type == 0 || f.type == 3) {
      layout->known = 1;
      break;
    }
    layout->hidden_pixels += (uint64_t)f.width * f.height;
    skip_frame(&b, &f);
  }
  free(gathered);
  if (status != IC_OK || !layout->known) {
    memset(layout, 0, sizeof(*layout));
    return status;
  }
  layout->vardct = !f.modular;
  layout->regular = f.type == 0;
  layout->last = f.last;
  layout->custom_size = f.custom_size;
  layout->passes = f.passes;
  layout->frame_width = f.width;
  layout->frame_height = f.height;
  layout->extra_channels = image.extra_channels;
  return IC_OK;
}
