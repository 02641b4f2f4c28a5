/*
 * A progressive JPEG at 1/8 without the whole image's coefficients.
 *
 * At scale 1/8 libjpeg gives each 8x8 block of a fully sampled component one pixel: its DC
 * coefficient. libjpeg-turbo, even in buffered-image mode, allocates the whole image's
 * coefficient arrays (64 coefficients of 2 bytes per block: 104 MiB for an 18 MP 4:4:4 file)
 * before it reads the first scan. This path keeps what the 1/8 output needs instead:
 *
 * - a component decoded by a 1x1 IDCT (luma; chroma subsampled in one direction only) keeps
 *   one DC coefficient per block; its AC scans are stepped over by looking only for their
 *   ending marker, never decoded;
 * - a component subsampled in both directions (4:2:0 chroma) gets a 2x2 (or 4x4) reduced
 *   IDCT from libjpeg, which uses AC coefficients too. Those scans are decoded here, and each
 *   coefficient's contribution to the k x k output is added to k x k accumulators as it
 *   arrives (the IDCT is linear); a block keeps only which coefficients are non-zero and their
 *   signs, which the refinement scans need. libjpeg's reduced IDCT is the area average of the
 *   full 8x8 one (the coefficients whose averaged basis vanishes are the ones it ignores), and
 *   so is ours, in floating point: it differs from libjpeg's fixed point by rounding.
 *
 * libjpeg still reads the header (frame, tables, EXIF, the first SOS); the markers after it
 * are read here, from the same source manager and through the same error manager, so
 * truncation, damage warnings, strictness, cancellation and the scan limits behave as in
 * libjpeg's own decode. Damage inside AC scans that are stepped over is not seen: those
 * coefficients never reach the output.
 */
#include "jpeg_dc.h"

#include <jerror.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bytes stepped over in an AC scan between two looks at cancellation and the deadline. */
#define DC_SKIP_CHECK_BYTES (64 * 1024)
/* The last restart marker (jpeglib.h names only the first). */
#define JPEG_RST7 (JPEG_RST0 + 7)

/* A Huffman table in canonical form (ITU T.81 F.2.2.3). */
typedef struct huff_table {
  int defined;
  int32_t maxcode[18];
  int32_t valoffset[17];
  uint8_t values[256];
  /* The codes of up to 8 bits by their next 8 bits: length << 8 | symbol (0: longer). */
  uint16_t lookup[256];
} huff_table;

/* The natural (row-major) position of each zigzag index. */
static const uint8_t zigzag_to_natural[DCTSIZE2] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

/* What one component keeps. */
typedef struct component_state {
  /* Output pixels per block side: libjpeg's reduced IDCT size at 1/8 (1, 2 or 4). */
  int k;
  /* DC coefficients on the grid of the image's MCUs (padding included). */
  int16_t *dc;
  uint32_t grid_w, grid_h;
  /* k > 1 only: per block, which coefficients (bit = zigzag index) are non-zero and which
   * negative, and the k x k output of the AC coefficients so far. */
  uint64_t *nonzero, *negative;
  float *ac;
  /* Quantizers in zigzag order, latched by the first scan that contains the component. */
  uint16_t quant[DCTSIZE2];
  int latched;
  /* Successive-approximation bit last decoded for each coefficient (-1: none yet), to raise
   * libjpeg's "inconsistent progression" warnings at the same places. */
  int coef_bits[DCTSIZE2];
} component_state;

typedef struct dc_state {
  j_decompress_ptr cinfo;
  huff_table dc_tables[NUM_HUFF_TBLS], ac_tables[NUM_HUFF_TBLS];
  uint16_t quant_slot[NUM_QUANT_TBLS][DCTSIZE2];
  int quant_slot_defined[NUM_QUANT_TBLS];
  component_state comp[MAX_COMPONENTS];
  /* basis[k / 2][u][q]: the averaged 1-D IDCT basis of frequency u over output cell q. */
  float basis[3][DCTSIZE][4];
  uint32_t mcus_per_row, mcu_rows;
  unsigned restart_interval;
  int scan_number;
  /* Entropy-coded bits: the low `count` bits of `acc`. */
  uint64_t acc;
  int count;
  /* A marker met inside entropy-coded data (0 if none), and whether the scan has warned
   * about reading past it. */
  int marker;
  int warned_marker;
  /* DC predictions of the scan's components; the AC end-of-band run. */
  int32_t pred[MAX_COMPS_IN_SCAN];
  uint32_t eobrun;
} dc_state;

/* libjpeg's IDCT size for a component at 1/8 (jdmaster.c): doubled while the component's
 * sampling leaves room in both directions. */
static int reduced_size(j_decompress_ptr cinfo, const jpeg_component_info *c) {
  int size = 1;
  while (size < DCTSIZE && cinfo->max_h_samp_factor % (c->h_samp_factor * size * 2) == 0 &&
         cinfo->max_v_samp_factor % (c->v_samp_factor * size * 2) == 0)
    size *= 2;
  return size;
}

int ic_jpeg_dc_applies(j_decompress_ptr cinfo) {
  if (!cinfo->progressive_mode || cinfo->arith_code) return 0;
  switch (cinfo->jpeg_color_space) {
  case JCS_GRAYSCALE:
    if (cinfo->num_components != 1) return 0;
    break;
  case JCS_YCbCr:
  case JCS_RGB:
    if (cinfo->num_components != 3) return 0;
    break;
  case JCS_CMYK:
  case JCS_YCCK:
    /* Rows leave as CMYK, as libjpeg's would: the decoder's CMYK sink converts them. */
    if (cinfo->num_components != 4) return 0;
    break;
  default:
    return 0;
  }
  for (int ci = 0; ci < cinfo->num_components; ci++) {
    const jpeg_component_info *c = &cinfo->comp_info[ci];
    int k = reduced_size(cinfo, c);
    if (k == 1) {
      /* libjpeg replicates such a component's pixels: whole factors only. */
      if (cinfo->max_h_samp_factor % c->h_samp_factor ||
          cinfo->max_v_samp_factor % c->v_samp_factor)
        return 0;
    } else if (c->h_samp_factor * k != cinfo->max_h_samp_factor ||
               c->v_samp_factor * k != cinfo->max_v_samp_factor) {
      /* A reduced IDCT followed by libjpeg's smoothing upsampler: not reproduced here. */
      return 0;
    }
  }
  return 1;
}

static uint32_t div_up(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a + b - 1) / b); }

static uint32_t mcus_per_row(j_decompress_ptr cinfo) {
  return div_up(cinfo->image_width, (uint32_t)cinfo->max_h_samp_factor * DCTSIZE);
}

static uint32_t mcu_rows(j_decompress_ptr cinfo) {
  return div_up(cinfo->image_height, (uint32_t)cinfo->max_v_samp_factor * DCTSIZE);
}

uint64_t ic_jpeg_dc_memory(j_decompress_ptr cinfo) {
  uint64_t bytes = sizeof(dc_state);
  for (int ci = 0; ci < cinfo->num_components; ci++) {
    const jpeg_component_info *c = &cinfo->comp_info[ci];
    uint64_t blocks = (uint64_t)mcus_per_row(cinfo) * c->h_samp_factor * mcu_rows(cinfo) *
                      c->v_samp_factor;
    int k = reduced_size(cinfo, c);
    bytes += blocks * sizeof(int16_t);
    if (k > 1) bytes += blocks * (2 * sizeof(uint64_t) + (uint64_t)k * k * sizeof(float));
  }
  /* The output row of each component and of RGB or CMYK. */
  return bytes + (uint64_t)div_up(cinfo->image_width, 8) * (cinfo->num_components + 4);
}

/* ---- Bytes and markers ---- */

/* One byte from libjpeg's source manager (ours never suspend: at the end they warn and
 * hand out an EOI marker). */
static int read_byte(dc_state *s) {
  struct jpeg_source_mgr *src = s->cinfo->src;
  if (src->bytes_in_buffer == 0) (void)(*src->fill_input_buffer)(s->cinfo);
  src->bytes_in_buffer--;
  return *src->next_input_byte++;
}

static unsigned read_u16(dc_state *s) {
  unsigned high = (unsigned)read_byte(s);
  return high << 8 | (unsigned)read_byte(s);
}

/* A marker segment's length, without the two length bytes. */
static unsigned segment_length(dc_state *s) {
  unsigned length = read_u16(s);
  if (length < 2) ERREXIT(s->cinfo, JERR_BAD_LENGTH);
  return length - 2;
}

static void skip_bytes(dc_state *s, unsigned count) {
  if (count) (*s->cinfo->src->skip_input_data)(s->cinfo, (long)count);
}

/* Calls libjpeg's progress monitor (ours): cancellation, the deadline, and the scan
 * limits for the scan described by cinfo's scan fields. */
static void progress(dc_state *s) {
  if (s->cinfo->progress) (*s->cinfo->progress->progress_monitor)((j_common_ptr)s->cinfo);
}

/*
 * The next marker after entropy-coded data: the one the bit reader met, or the first
 * 0xFF followed by neither 0x00 (a stuffed byte) nor 0xFF (fill). Restart markers are
 * passed over when `skip_restarts` (an AC scan being stepped over). `extraneous` says
 * whether bytes before it are garbage (after a decoded scan) rather than skipped data.
 */
static int next_marker(dc_state *s, int skip_restarts, int extraneous) {
  if (s->marker) {
    int m = s->marker;
    s->marker = 0;
    if (!(skip_restarts && m >= JPEG_RST0 && m <= JPEG_RST7)) return m;
  }
  uint64_t skipped = 0, checked = 0;
  struct jpeg_source_mgr *src = s->cinfo->src;
  for (;;) {
    /* Entropy-coded data holds 0xFF only before a stuffed zero or a marker. */
    if (src->bytes_in_buffer == 0) (void)(*src->fill_input_buffer)(s->cinfo);
    const JOCTET *ff = memchr(src->next_input_byte, 0xFF, src->bytes_in_buffer);
    size_t plain = ff ? (size_t)(ff - src->next_input_byte) : src->bytes_in_buffer;
    src->next_input_byte += plain;
    src->bytes_in_buffer -= plain;
    skipped += plain;
    if (skipped - checked >= DC_SKIP_CHECK_BYTES) {
      checked = skipped;
      progress(s);
    }
    if (!ff) continue;
    (void)read_byte(s); /* the 0xFF */
    skipped++;
    int c;
    do c = read_byte(s);
    while (c == 0xFF);
    if (c == 0) continue;
    if (skip_restarts && c >= JPEG_RST0 && c <= JPEG_RST7) continue;
    if (extraneous && skipped > 1) WARNMS2(s->cinfo, JWRN_EXTRANEOUS_DATA, (int)skipped - 1, c);
    return c;
  }
}

/* ---- Tables ---- */

/* Builds a canonical table from a DHT's counts and values; DC symbols are sizes up to 15. */
static void make_table(dc_state *s, huff_table *t, const uint8_t counts[17],
                       const uint8_t *values, int dc) {
  int32_t code = 0, k = 0;
  unsigned total = 0;
  for (int l = 1; l <= 16; l++) {
    t->valoffset[l] = k - code;
    code += counts[l];
    k += counts[l];
    total += counts[l];
    t->maxcode[l] = counts[l] ? code - 1 : -1;
    /* Codes of length l must fit in l bits. */
    if (code > (1 << l) || total > 256) ERREXIT(s->cinfo, JERR_BAD_HUFF_TABLE);
    code <<= 1;
  }
  t->maxcode[17] = 0x7FFFFFFF;
  for (unsigned i = 0; i < total; i++)
    if (dc && values[i] > 15) ERREXIT(s->cinfo, JERR_BAD_HUFF_TABLE);
  memcpy(t->values, values, total);
  memset(t->lookup, 0, sizeof(t->lookup));
  code = 0;
  k = 0;
  for (int l = 1; l <= 8; l++, code <<= 1)
    for (int i = 0; i < counts[l]; i++, code++, k++)
      for (int fill = 0; fill < 1 << (8 - l); fill++)
        t->lookup[(code << (8 - l)) | fill] = (uint16_t)(l << 8 | values[k]);
  t->defined = 1;
}

static void read_dht(dc_state *s) {
  long left = (long)segment_length(s);
  while (left > 16) {
    int index = read_byte(s);
    uint8_t counts[17] = {0};
    unsigned total = 0;
    for (int l = 1; l <= 16; l++) {
      counts[l] = (uint8_t)read_byte(s);
      total += counts[l];
    }
    left -= 17;
    if (total > 256 || (long)total > left) ERREXIT(s->cinfo, JERR_BAD_HUFF_TABLE);
    uint8_t values[256];
    for (unsigned i = 0; i < total; i++) values[i] = (uint8_t)read_byte(s);
    left -= (long)total;
    int ac = index & 0x10;
    index &= ~0x10;
    if (index < 0 || index >= NUM_HUFF_TBLS) ERREXIT1(s->cinfo, JERR_DHT_INDEX, index);
    make_table(s, ac ? &s->ac_tables[index] : &s->dc_tables[index], counts, values, !ac);
  }
  if (left != 0) ERREXIT(s->cinfo, JERR_BAD_LENGTH);
}

static void take_libjpeg_table(dc_state *s, huff_table *t, const JHUFF_TBL *table, int dc) {
  uint8_t counts[17];
  for (int l = 0; l <= 16; l++) counts[l] = table->bits[l];
  make_table(s, t, counts, table->huffval, dc);
}

/* DQT: kept in zigzag order, the order scans number coefficients in. */
static void read_dqt(dc_state *s) {
  long left = (long)segment_length(s);
  while (left > 0) {
    int n = read_byte(s);
    int precision = n >> 4, index = n & 0x0F;
    if (index >= NUM_QUANT_TBLS) ERREXIT1(s->cinfo, JERR_DQT_INDEX, index);
    long size = 1 + DCTSIZE2 * (precision ? 2 : 1);
    if (left < size) ERREXIT(s->cinfo, JERR_BAD_LENGTH);
    for (int i = 0; i < DCTSIZE2; i++)
      s->quant_slot[index][i] = (uint16_t)(precision ? read_u16(s) : (unsigned)read_byte(s));
    s->quant_slot_defined[index] = 1;
    left -= size;
  }
}

static void read_dri(dc_state *s) {
  if (segment_length(s) != 2) ERREXIT(s->cinfo, JERR_BAD_LENGTH);
  s->restart_interval = read_u16(s);
}

/* SOS: the scan's components and parameters, into cinfo's scan fields. */
static void read_sos(dc_state *s) {
  j_decompress_ptr cinfo = s->cinfo;
  unsigned length = segment_length(s);
  int n = read_byte(s);
  if (n < 1 || n > MAX_COMPS_IN_SCAN || length != 4 + 2 * (unsigned)n)
    ERREXIT(cinfo, JERR_BAD_LENGTH);
  for (int i = 0; i < n; i++) {
    int id = read_byte(s), tables = read_byte(s);
    jpeg_component_info *found = NULL;
    for (int ci = 0; ci < cinfo->num_components; ci++)
      if (cinfo->comp_info[ci].component_id == id) found = &cinfo->comp_info[ci];
    for (int j = 0; j < i && found; j++)
      if (cinfo->cur_comp_info[j] == found) found = NULL;
    if (!found) ERREXIT1(cinfo, JERR_BAD_COMPONENT_ID, id);
    found->dc_tbl_no = tables >> 4;
    found->ac_tbl_no = tables & 0x0F;
    cinfo->cur_comp_info[i] = found;
  }
  cinfo->comps_in_scan = n;
  cinfo->Ss = read_byte(s);
  cinfo->Se = read_byte(s);
  int a = read_byte(s);
  cinfo->Ah = a >> 4;
  cinfo->Al = a & 0x0F;
}

/* ---- Entropy-coded bits ---- */

/* Reads whole bytes of entropy-coded data, up to `want` bits, stopping (silently) at a
 * marker: bits for looking ahead, never padding. */
static void fill_real(dc_state *s, int want) {
  while (s->count < want && !s->marker) {
    int c = read_byte(s);
    if (c == 0xFF) {
      int next;
      do next = read_byte(s);
      while (next == 0xFF);
      if (next != 0) {
        s->marker = next;
        return;
      }
    }
    s->acc = s->acc << 8 | (uint64_t)c;
    s->count += 8;
  }
}

/* Makes at least `need` (<= 32) bits available. Past a marker they are zeros, with one
 * "premature end of data segment" warning per scan, as libjpeg gives; bits are read only
 * when a code needs them, so the warning comes only when data is really missing. */
static void fill_bits(dc_state *s, int need) {
  fill_real(s, need);
  while (s->count < need) {
    if (!s->warned_marker) {
      s->warned_marker = 1;
      WARNMS(s->cinfo, JWRN_HIT_MARKER);
    }
    s->acc <<= 8;
    s->count += 8;
  }
}

static uint32_t get_bits(dc_state *s, int n) {
  if (n == 0) return 0;
  fill_bits(s, n);
  s->count -= n;
  return (uint32_t)(s->acc >> s->count) & ((1u << n) - 1);
}

/* A size category's extra bits as a signed value (T.81 F.2.2.1). */
static int32_t extend(uint32_t raw, int size) {
  return raw < (1u << (size - 1)) ? (int32_t)raw - (int32_t)((1u << size) - 1) : (int32_t)raw;
}

/* Codes of up to 8 bits from the lookup table; longer ones, and the last codes of a scan
 * (whose 8-bit look-ahead would reach past the scan), bit by bit, so the reader never asks
 * for bits past the scan unless a code needs them. */
static int decode_symbol(dc_state *s, const huff_table *t) {
  fill_real(s, 8);
  if (s->count >= 8) {
    uint16_t entry = t->lookup[(s->acc >> (s->count - 8)) & 0xFF];
    if (entry) {
      s->count -= entry >> 8;
      return entry & 0xFF;
    }
  }
  int32_t code = 0;
  for (int l = 1; l <= 16; l++) {
    code = code << 1 | (int32_t)get_bits(s, 1);
    if (code <= t->maxcode[l]) return t->values[code + t->valoffset[l]];
  }
  /* libjpeg's answer to a code no table has: warn, and take the symbol as 0. */
  WARNMS(s->cinfo, JWRN_HUFF_BAD_CODE);
  return 0;
}

/* Expected RSTn between restart intervals; a wrong or missing one is damage. */
static void restart(dc_state *s, int *next_restart) {
  s->count = 0;
  s->acc = 0;
  int m = next_marker(s, 0, 1);
  if (m != JPEG_RST0 + *next_restart) {
    WARNMS2(s->cinfo, JWRN_MUST_RESYNC, m, *next_restart);
    /* Accepted damage: a restart marker resynchronises, anything else ends the scan's
     * data (the remaining blocks read zero bits). */
    if (m < JPEG_RST0 || m > JPEG_RST7) s->marker = m;
  }
  *next_restart = (*next_restart + 1) & 7;
  memset(s->pred, 0, sizeof(s->pred));
  s->eobrun = 0;
  s->warned_marker = 0;
}

static void start_entropy(dc_state *s) {
  memset(s->pred, 0, sizeof(s->pred));
  s->eobrun = 0;
  s->acc = 0;
  s->count = 0;
  s->marker = 0;
  s->warned_marker = 0;
}

/* ---- Scans ---- */

/* libjpeg's checks of a progressive scan's parameters (jdphuff.c start_pass). */
static void check_progression(dc_state *s) {
  j_decompress_ptr cinfo = s->cinfo;
  int dc = cinfo->Ss == 0;
  int bad = 0;
  if (dc) {
    if (cinfo->Se != 0) bad = 1;
  } else {
    if (cinfo->Ss > cinfo->Se || cinfo->Se > DCTSIZE2 - 1) bad = 1;
    if (cinfo->comps_in_scan != 1) bad = 1;
  }
  if (cinfo->Ah != 0 && cinfo->Al != cinfo->Ah - 1) bad = 1;
  if (cinfo->Al > 13) bad = 1;
  if (bad)
    ERREXIT4(cinfo, JERR_BAD_PROGRESSION, cinfo->Ss, cinfo->Se, cinfo->Ah, cinfo->Al);
  for (int i = 0; i < cinfo->comps_in_scan; i++) {
    int ci = cinfo->cur_comp_info[i]->component_index;
    int *bits = s->comp[ci].coef_bits;
    if (!dc && bits[0] < 0) WARNMS2(cinfo, JWRN_BOGUS_PROGRESSION, ci, 0);
    for (int k = cinfo->Ss; k <= cinfo->Se; k++) {
      int expected = bits[k] < 0 ? 0 : bits[k];
      if (cinfo->Ah != expected) WARNMS2(cinfo, JWRN_BOGUS_PROGRESSION, ci, k);
      bits[k] = cinfo->Al;
    }
  }
}

/* The first scan that contains a component fixes its quantizers (libjpeg latches too). */
static void latch_quantizers(dc_state *s) {
  j_decompress_ptr cinfo = s->cinfo;
  for (int i = 0; i < cinfo->comps_in_scan; i++) {
    jpeg_component_info *c = cinfo->cur_comp_info[i];
    component_state *comp = &s->comp[c->component_index];
    if (comp->latched) continue;
    int slot = c->quant_tbl_no;
    if (slot < 0 || slot >= NUM_QUANT_TBLS || !s->quant_slot_defined[slot])
      ERREXIT1(cinfo, JERR_NO_QUANT_TABLE, slot);
    memcpy(comp->quant, s->quant_slot[slot], sizeof(comp->quant));
    comp->latched = 1;
  }
}

/* One block's DC: a first-scan difference or a refinement bit. */
static void decode_dc_block(dc_state *s, int position, const huff_table *table, int16_t *coef) {
  j_decompress_ptr cinfo = s->cinfo;
  if (cinfo->Ah == 0) {
    int size = decode_symbol(s, table);
    int32_t diff = size ? extend(get_bits(s, size), size) : 0;
    /* Wraps like libjpeg's int arithmetic would, without overflowing. */
    s->pred[position] = (int32_t)((uint32_t)s->pred[position] + (uint32_t)diff);
    *coef = (int16_t)(uint32_t)((uint32_t)s->pred[position] << cinfo->Al);
  } else if (get_bits(s, 1)) {
    *coef = (int16_t)(*coef | (1 << cinfo->Al));
  }
}

/* Decodes a DC scan (first or refinement) into the coefficient grids. */
static void decode_dc_scan(dc_state *s) {
  j_decompress_ptr cinfo = s->cinfo;
  const huff_table *tables[MAX_COMPS_IN_SCAN] = {NULL};
  for (int i = 0; i < cinfo->comps_in_scan; i++) {
    int slot = cinfo->cur_comp_info[i]->dc_tbl_no;
    if (cinfo->Ah == 0) {
      if (slot < 0 || slot >= NUM_HUFF_TBLS || !s->dc_tables[slot].defined)
        ERREXIT1(cinfo, JERR_NO_HUFF_TABLE, slot);
      tables[i] = &s->dc_tables[slot];
    }
  }
  start_entropy(s);
  int next_restart = 0;
  uint64_t mcu = 0;
  if (cinfo->comps_in_scan == 1) {
    /* Not interleaved: the component's own blocks, one per MCU, without padding. */
    jpeg_component_info *c = cinfo->cur_comp_info[0];
    component_state *comp = &s->comp[c->component_index];
    for (JDIMENSION by = 0; by < c->height_in_blocks; by++) {
      progress(s);
      for (JDIMENSION bx = 0; bx < c->width_in_blocks; bx++, mcu++) {
        if (s->restart_interval && mcu && mcu % s->restart_interval == 0)
          restart(s, &next_restart);
        decode_dc_block(s, 0, tables[0], &comp->dc[(size_t)by * comp->grid_w + bx]);
      }
    }
    return;
  }
  for (uint32_t my = 0; my < s->mcu_rows; my++) {
    progress(s);
    for (uint32_t mx = 0; mx < s->mcus_per_row; mx++, mcu++) {
      if (s->restart_interval && mcu && mcu % s->restart_interval == 0)
        restart(s, &next_restart);
      for (int i = 0; i < cinfo->comps_in_scan; i++) {
        jpeg_component_info *c = cinfo->cur_comp_info[i];
        component_state *comp = &s->comp[c->component_index];
        for (int v = 0; v < c->v_samp_factor; v++) {
          size_t row = ((size_t)my * c->v_samp_factor + v) * comp->grid_w;
          for (int h = 0; h < c->h_samp_factor; h++)
            decode_dc_block(s, i, tables[i], &comp->dc[row + (size_t)mx * c->h_samp_factor + h]);
        }
      }
    }
  }
}

/* Adds coefficient `z` (zigzag index) with value `value` to a block's k x k output. */
static void add_coefficient(const dc_state *s, const component_state *comp, size_t block, int z,
                            int32_t value) {
  int natural = zigzag_to_natural[z];
  int u = natural % DCTSIZE, v = natural / DCTSIZE;
  const float(*basis)[4] = s->basis[comp->k / 2];
  float scaled = (float)value * comp->quant[z];
  float *out = comp->ac + block * (size_t)(comp->k * comp->k);
  for (int qy = 0; qy < comp->k; qy++) {
    float row = scaled * basis[v][qy];
    if (row == 0) continue;
    for (int qx = 0; qx < comp->k; qx++) out[qy * comp->k + qx] += row * basis[u][qx];
  }
}

static void set_coefficient(const dc_state *s, component_state *comp, size_t block, int z,
                            int32_t value) {
  if (z > DCTSIZE2 - 1) return; /* a run past the block's end: damage, dropped */
  comp->nonzero[block] |= 1ull << z;
  if (value < 0) comp->negative[block] |= 1ull << z;
  add_coefficient(s, comp, block, z, value);
}

/* A correction bit for coefficient z, already non-zero: it grows away from zero by p1. */
static void refine_coefficient(dc_state *s, component_state *comp, size_t block, int z,
                               int32_t p1) {
  if (!get_bits(s, 1)) return;
  add_coefficient(s, comp, block, z, (comp->negative[block] >> z & 1) ? -p1 : p1);
}

/* One block of an AC scan (T.81 G.1.2.2 and G.1.2.3). */
static void decode_ac_block(dc_state *s, component_state *comp, size_t block,
                            const huff_table *table) {
  j_decompress_ptr cinfo = s->cinfo;
  int k = cinfo->Ss, end = cinfo->Se, al = cinfo->Al;
  if (cinfo->Ah == 0) {
    if (s->eobrun) {
      s->eobrun--;
      return;
    }
    while (k <= end) {
      int rs = decode_symbol(s, table), r = rs >> 4, size = rs & 15;
      if (size) {
        k += r;
        int32_t value = extend(get_bits(s, size), size);
        set_coefficient(s, comp, block, k, (int32_t)((uint32_t)value << al));
        k++;
      } else if (r == 15) {
        k += 16;
      } else {
        s->eobrun = (1u << r) - 1;
        if (r) s->eobrun += get_bits(s, r);
        break;
      }
    }
    return;
  }
  int32_t p1 = 1 << al;
  if (s->eobrun == 0) {
    for (; k <= end; k++) {
      int rs = decode_symbol(s, table), r = rs >> 4, size = rs & 15;
      int32_t value = 0;
      if (size) {
        if (size != 1) WARNMS(cinfo, JWRN_HUFF_BAD_CODE);
        value = get_bits(s, 1) ? p1 : -p1;
      } else if (r != 15) {
        s->eobrun = 1u << r;
        if (r) s->eobrun += get_bits(s, r);
        break;
      }
      /* Over coefficients already non-zero (each takes a correction bit) and r zero ones,
       * to the one this symbol sets. */
      for (; k <= end; k++) {
        if (comp->nonzero[block] >> k & 1) {
          refine_coefficient(s, comp, block, k, p1);
        } else if (--r < 0) {
          break;
        }
      }
      if (value && k <= end) set_coefficient(s, comp, block, k, value);
    }
  }
  if (s->eobrun) {
    for (; k <= end; k++)
      if (comp->nonzero[block] >> k & 1) refine_coefficient(s, comp, block, k, p1);
    s->eobrun--;
  }
}

/* Decodes an AC scan of a component with a reduced IDCT larger than 1x1. */
static void decode_ac_scan(dc_state *s) {
  j_decompress_ptr cinfo = s->cinfo;
  jpeg_component_info *c = cinfo->cur_comp_info[0];
  component_state *comp = &s->comp[c->component_index];
  int slot = c->ac_tbl_no;
  const huff_table *table = NULL;
  if (slot < 0 || slot >= NUM_HUFF_TBLS || !s->ac_tables[slot].defined)
    ERREXIT1(cinfo, JERR_NO_HUFF_TABLE, slot);
  table = &s->ac_tables[slot];
  start_entropy(s);
  int next_restart = 0;
  uint64_t mcu = 0;
  for (JDIMENSION by = 0; by < c->height_in_blocks; by++) {
    progress(s);
    for (JDIMENSION bx = 0; bx < c->width_in_blocks; bx++, mcu++) {
      if (s->restart_interval && mcu && mcu % s->restart_interval == 0)
        restart(s, &next_restart);
      decode_ac_block(s, comp, (size_t)by * comp->grid_w + bx, table);
    }
  }
}

/* Checks and counts a scan, then decodes or steps over it. Returns the next marker. */
static int run_scan(dc_state *s) {
  j_decompress_ptr cinfo = s->cinfo;
  s->scan_number++;
  cinfo->input_scan_number = s->scan_number;
  check_progression(s);
  progress(s);
  latch_quantizers(s);
  if (cinfo->Ss == 0) {
    decode_dc_scan(s);
    return next_marker(s, 0, 1);
  }
  if (s->comp[cinfo->cur_comp_info[0]->component_index].k > 1) {
    decode_ac_scan(s);
    return next_marker(s, 0, 1);
  }
  s->marker = 0;
  return next_marker(s, 1, 0);
}

/* ---- Output ---- */

static uint8_t clamp_sample(int32_t v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/*
 * One output row of a component. k = 1: one pixel per block (libjpeg's 1x1 IDCT: the DC
 * dequantized, divided by 8 rounding, centred on 128), replicated by the sampling factors
 * the way libjpeg upsamples 1x1-decoded components. k > 1: k x k pixels per block from the
 * DC and the accumulated AC output.
 */
static void component_row(const dc_state *s, int ci, uint32_t y, uint32_t width, uint8_t *out) {
  const jpeg_component_info *c = &s->cinfo->comp_info[ci];
  const component_state *comp = &s->comp[ci];
  uint16_t q0 = comp->latched ? comp->quant[0] : 0;
  if (comp->k == 1) {
    uint32_t fx = (uint32_t)(s->cinfo->max_h_samp_factor / c->h_samp_factor);
    uint32_t fy = (uint32_t)(s->cinfo->max_v_samp_factor / c->v_samp_factor);
    const int16_t *row = comp->dc + (size_t)(y / fy) * comp->grid_w;
    for (uint32_t x = 0; x < width; x++)
      out[x] = clamp_sample((((int32_t)row[x / fx] * q0 + 4) >> 3) + 128);
    return;
  }
  uint32_t k = (uint32_t)comp->k;
  size_t block_row = (size_t)(y / k) * comp->grid_w;
  uint32_t qy = y % k;
  for (uint32_t x = 0; x < width; x++) {
    size_t block = block_row + x / k;
    float value = (float)comp->dc[block] * q0 / 8.0f;
    if (comp->latched) value += comp->ac[block * k * k + qy * k + x % k];
    out[x] = clamp_sample((int32_t)lrintf(value) + 128);
  }
}

/* JFIF's YCbCr to RGB, in 16-bit fixed point. */
static void ycc_to_rgb(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, uint32_t width,
                       uint8_t *rgb) {
  enum { HALF = 1 << 15 };
  const int32_t r_cr = 91881, g_cb = 22554, g_cr = 46802, b_cb = 116130; /* x 65536 */
  for (uint32_t x = 0; x < width; x++) {
    int32_t l = y[x], u = (int32_t)cb[x] - 128, v = (int32_t)cr[x] - 128;
    rgb[x * 3] = clamp_sample(l + ((r_cr * v + HALF) >> 16));
    rgb[x * 3 + 1] = clamp_sample(l + ((-g_cb * u - g_cr * v + HALF) >> 16));
    rgb[x * 3 + 2] = clamp_sample(l + ((b_cb * u + HALF) >> 16));
  }
}

static void *pool_alloc(j_decompress_ptr cinfo, size_t bytes) {
  void *p = (*cinfo->mem->alloc_large)((j_common_ptr)cinfo, JPOOL_IMAGE, bytes ? bytes : 1);
  memset(p, 0, bytes ? bytes : 1);
  return p;
}

/* basis[k / 2][u][q]: the 1-D IDCT basis of frequency u, (1/2) C(u) cos((2x+1)u pi/16),
 * averaged over the 8/k samples x of output cell q. */
static void make_basis(dc_state *s) {
  for (int k = 2; k <= 4; k *= 2)
    for (int u = 0; u < DCTSIZE; u++)
      for (int q = 0; q < k; q++) {
        double sum = 0;
        int span = DCTSIZE / k;
        for (int x = q * span; x < (q + 1) * span; x++)
          sum += (u ? 1.0 : M_SQRT1_2) * 0.5 * cos((2 * x + 1) * u * M_PI / 16);
        double average = sum / span;
        s->basis[k / 2][u][q] = fabs(average) < 1e-9 ? 0.0f : (float)average;
      }
}

/* Whether every component has had its first DC scan. */
static int dc_complete(const dc_state *s) {
  for (int ci = 0; ci < s->cinfo->num_components; ci++)
    if (s->comp[ci].coef_bits[0] < 0) return 0;
  return 1;
}

ic_status ic_jpeg_dc_run(j_decompress_ptr cinfo, const ic_control *control, ic_sink *sink,
                         ic_result *result, int first_dc_only) {
  dc_state *s = pool_alloc(cinfo, sizeof(*s));
  s->cinfo = cinfo;
  s->mcus_per_row = mcus_per_row(cinfo);
  s->mcu_rows = mcu_rows(cinfo);
  s->restart_interval = cinfo->restart_interval;
  make_basis(s);
  for (int i = 0; i < NUM_HUFF_TBLS; i++) {
    if (cinfo->dc_huff_tbl_ptrs[i])
      take_libjpeg_table(s, &s->dc_tables[i], cinfo->dc_huff_tbl_ptrs[i], 1);
    if (cinfo->ac_huff_tbl_ptrs[i])
      take_libjpeg_table(s, &s->ac_tables[i], cinfo->ac_huff_tbl_ptrs[i], 0);
  }
  /* libjpeg-turbo decodes files that define no DC tables (Motion-JPEG frames) with the
   * example tables of the standard (T.81 K.3); so does this path. */
  static const uint8_t standard_counts[2][17] = {
      {0, 0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0}};
  static const uint8_t standard_values[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  for (int i = 0; i < 2; i++)
    if (!s->dc_tables[i].defined)
      make_table(s, &s->dc_tables[i], standard_counts[i], standard_values, 1);
  for (int i = 0; i < NUM_QUANT_TBLS; i++)
    if (cinfo->quant_tbl_ptrs[i]) {
      for (int z = 0; z < DCTSIZE2; z++)
        s->quant_slot[i][z] = cinfo->quant_tbl_ptrs[i]->quantval[zigzag_to_natural[z]];
      s->quant_slot_defined[i] = 1;
    }
  for (int ci = 0; ci < cinfo->num_components; ci++) {
    const jpeg_component_info *c = &cinfo->comp_info[ci];
    component_state *comp = &s->comp[ci];
    comp->k = reduced_size(cinfo, c);
    comp->grid_w = s->mcus_per_row * (uint32_t)c->h_samp_factor;
    comp->grid_h = s->mcu_rows * (uint32_t)c->v_samp_factor;
    size_t blocks = (size_t)comp->grid_w * comp->grid_h;
    comp->dc = pool_alloc(cinfo, blocks * sizeof(int16_t));
    if (comp->k > 1) {
      comp->nonzero = pool_alloc(cinfo, blocks * sizeof(uint64_t));
      comp->negative = pool_alloc(cinfo, blocks * sizeof(uint64_t));
      comp->ac = pool_alloc(cinfo, blocks * (size_t)(comp->k * comp->k) * sizeof(float));
    }
    for (int k = 0; k < DCTSIZE2; k++) comp->coef_bits[k] = -1;
  }

  /* libjpeg has read the first SOS; every marker after it up to EOI is read here. */
  int marker = run_scan(s);
  while (marker != JPEG_EOI && !(first_dc_only && dc_complete(s))) {
    switch (marker) {
    case 0xDA: /* SOS */
      read_sos(s);
      marker = run_scan(s);
      continue;
    case 0xC4: read_dht(s); break;
    case 0xDB: read_dqt(s); break;
    case 0xDD: read_dri(s); break;
    case 0xDC: /* DNL: libjpeg skips it too */
    case 0xFE:
      skip_bytes(s, segment_length(s));
      break;
    case 0xC0: case 0xC1: case 0xC2: case 0xC3: case 0xC5: case 0xC6: case 0xC7:
    case 0xC9: case 0xCA: case 0xCB: case 0xCD: case 0xCE: case 0xCF:
      ERREXIT(cinfo, JERR_SOF_DUPLICATE);
      break;
    default:
      if (marker >= JPEG_APP0 && marker <= JPEG_APP0 + 15) {
        skip_bytes(s, segment_length(s));
      } else if (marker < JPEG_RST0 || marker > JPEG_RST7) {
        ERREXIT1(cinfo, JERR_UNKNOWN_MARKER, marker);
      }
      break;
    }
    marker = next_marker(s, 0, 1);
  }

  uint32_t width = div_up(cinfo->image_width, 8), height = div_up(cinfo->image_height, 8);
  int components = cinfo->num_components;
  /* RGB, or CMYK for four components (YCCK's YCC to RGB, then inverted, as libjpeg does). */
  int out_channels = components == 4 ? 4 : 3;
  ic_status status = sink->begin(sink, width, height, out_channels, result);
  uint8_t *planes = pool_alloc(cinfo, (size_t)width * (size_t)components);
  uint8_t *rgb = pool_alloc(cinfo, (size_t)width * (size_t)out_channels);
  for (uint32_t y = 0; y < height && status == IC_OK; y++) {
    if (y % IC_CANCEL_CHECK_ROWS == 0) status = ic_check(control, result);
    if (status != IC_OK) break;
    for (int ci = 0; ci < components; ci++)
      component_row(s, ci, y, width, planes + (size_t)width * ci);
    if (components == 1) {
      for (uint32_t x = 0; x < width; x++) rgb[x * 3] = rgb[x * 3 + 1] = rgb[x * 3 + 2] = planes[x];
    } else if (components == 4) {
      const uint8_t *k = planes + 3 * (size_t)width;
      if (cinfo->jpeg_color_space == JCS_YCCK) {
        /* YCC to RGB into the first three places, then C, M, Y = 255 - R, G, B. */
        for (uint32_t x = 0; x < width; x++) {
          uint8_t one[3];
          ycc_to_rgb(planes + x, planes + width + x, planes + 2 * (size_t)width + x, 1, one);
          rgb[x * 4] = (uint8_t)(255 - one[0]);
          rgb[x * 4 + 1] = (uint8_t)(255 - one[1]);
          rgb[x * 4 + 2] = (uint8_t)(255 - one[2]);
          rgb[x * 4 + 3] = k[x];
        }
      } else {
        for (uint32_t x = 0; x < width; x++)
          for (int ci = 0; ci < 4; ci++) rgb[x * 4 + ci] = planes[(size_t)width * ci + x];
      }
    } else if (cinfo->jpeg_color_space == JCS_YCbCr) {
      ycc_to_rgb(planes, planes + width, planes + 2 * (size_t)width, width, rgb);
    } else {
      for (uint32_t x = 0; x < width; x++)
        for (int ci = 0; ci < 3; ci++) rgb[x * 3 + ci] = planes[(size_t)width * ci + x];
    }
    status = sink->row(sink, rgb, result);
  }
  return status;
}
