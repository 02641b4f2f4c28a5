/*
 * A sequential JPEG with restart markers, decoded in bands on several threads.
 *
 * A restart marker resets the entropy decoder (DC predictions, the bit buffer), so the
 * intervals between markers decode independently. When an interval starts a row of MCUs, the
 * rows from there down are a JPEG of their own: the same tables and frame with a smaller
 * height, then the entropy-coded bytes from that marker on. Each band is such a JPEG, given
 * to libjpeg on a thread of its own at the scale chosen; the rows are then pushed into the
 * sink in order. The bands are cut to about equal work (entropy-coded bytes and blocks), not
 * equal height. The bands' headers are built here (the tables, the frame with its height
 * changed, the restart interval, the scan header); their entropy-coded bytes are read in
 * place (from memory, or with pread from a regular file), and a band's restart markers,
 * which count on from the file's, are taken in its own count by its resync hook.
 *
 * The rows are exactly the one-piece decode's: each output row comes from its own blocks,
 * because no component is upsampled at the scales the bands are used at (libjpeg's smooth
 * upsampling reads rows across a band's edge). A marker other than a restart before EOI, a
 * band that does not come out at the expected size, and any warning in a band leave the file
 * to the one-piece decode, which reports damage exactly as without bands.
 */
#include "jpeg_bands.h"

#include <errno.h>
#include <jerror.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes a band reads from a file at a time. */
#define BAND_READ_BUFFER (64 * 1024)
/* Bytes of the marker scan's reads from a file, and between two looks at cancellation. */
#define SCAN_CHUNK (256 * 1024)
/* The kept header (tables, frame, restart interval, scan header) is at most this long, and
 * at most this many segments are walked to find it: real files have a few dozen. */
#define HEADER_MAX_BYTES (64 * 1024)
#define HEADER_MAX_SEGMENTS 1024
/* A band has at least this many rows of MCUs: fewer do not pay for a thread. */
#define MIN_BAND_MCU_ROWS 8

/* What every band shares. */
typedef struct band_plan {
  /* The source's bytes: in memory, or a regular file read with pread. */
  ic_random bytes;
  /* The kept header; the frame's height is at sof_height (two bytes, big-endian). */
  uint8_t header[HEADER_MAX_BYTES];
  size_t header_length;
  size_t sof_height;
  unsigned scale_num;
  J_COLOR_SPACE jpeg_color_space, out_color_space;
  long max_memory;
  uint32_t width, components;
  const ic_control *control;
} band_plan;

/* One band: its rows of MCUs, its entropy-coded bytes, and its decoded rows. */
typedef struct band {
  const band_plan *plan;
  uint32_t mcu_row_start;
  /* Source pixel rows, and output rows at the scale. */
  uint32_t pixel_rows, out_rows;
  /* The entropy-coded bytes: from the first byte after the marker that starts it (the scan
   * header for the first band) to the first byte of the marker that ends it. */
  uint64_t start, end;
  /* The file's restart markers count on from the first band's: this band's first is
   * RST(shift). */
  int shift;
  uint8_t *pixels;
  /* Set by the band's thread: 1 when every row came out; the reason it stopped, if it was
   * told to. */
  int done;
  ic_status stopped;
} band;

typedef struct band_error {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
} band_error;

typedef struct band_source {
  struct jpeg_source_mgr pub;
  band *band;
  /* 0: the header, 1: the entropy-coded bytes, 2: EOI, 3: past the end. */
  int phase;
  uint64_t position;
  uint8_t header[HEADER_MAX_BYTES];
  uint8_t buffer[BAND_READ_BUFFER];
} band_source;

static void band_error_exit(j_common_ptr cinfo) {
  band_error *err = (band_error *)cinfo->err;
  longjmp(err->jump, 1);
}

/* Any warning ends the band: the one-piece decode then decides what the damage means. */
static void band_emit_message(j_common_ptr cinfo, int level) {
  if (level < 0) band_error_exit(cinfo);
}

static void band_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void source_nothing(j_decompress_ptr cinfo) { (void)cinfo; }

void ic_jpeg_use_source(j_decompress_ptr cinfo, struct jpeg_source_mgr *src,
                        boolean (*fill)(j_decompress_ptr),
                        boolean (*resync)(j_decompress_ptr, int)) {
  src->init_source = source_nothing;
  src->fill_input_buffer = fill;
  src->skip_input_data = ic_jpeg_skip_input;
  src->resync_to_restart = resync;
  src->term_source = source_nothing;
  src->bytes_in_buffer = 0;
  src->next_input_byte = NULL;
  cinfo->src = src;
}

static boolean band_source_fill(j_decompress_ptr cinfo) {
  static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
  band_source *src = (band_source *)cinfo->src;
  band *b = src->band;
  switch (src->phase) {
  case 0:
    src->phase = 1;
    src->position = b->start;
    src->pub.next_input_byte = src->header;
    src->pub.bytes_in_buffer = b->plan->header_length;
    return TRUE;
  case 1:
    if (src->position < b->end) {
      uint64_t left = b->end - src->position;
      const ic_random *bytes = &b->plan->bytes;
      if (bytes->data) {
        src->pub.next_input_byte = bytes->data + src->position;
        src->pub.bytes_in_buffer = (size_t)left;
        src->position = b->end;
        return TRUE;
      }
      size_t want = left < sizeof(src->buffer) ? (size_t)left : sizeof(src->buffer);
      size_t n = ic_random_read(bytes, src->position, src->buffer, want);
      if (n == 0) ERREXIT(cinfo, JERR_FILE_READ);
      src->position += n;
      src->pub.next_input_byte = src->buffer;
      src->pub.bytes_in_buffer = n;
      return TRUE;
    }
    src->phase = 2;
    src->pub.next_input_byte = eoi;
    src->pub.bytes_in_buffer = 2;
    return TRUE;
  default:
    /* Asked for bytes after EOI: the band is not what its header says. */
    ERREXIT(cinfo, JERR_INPUT_EOF);
    return FALSE;
  }
}

void ic_jpeg_skip_input(j_decompress_ptr cinfo, long count) {
  struct jpeg_source_mgr *src = cinfo->src;
  if (count <= 0) return;
  while (count > (long)src->bytes_in_buffer) {
    count -= (long)src->bytes_in_buffer;
    (void)(*src->fill_input_buffer)(cinfo);
  }
  src->next_input_byte += count;
  src->bytes_in_buffer -= (size_t)count;
}

/* The marker libjpeg expects is RST(desired) in the band's own count; the file's is `shift`
 * further on. Any other marker goes to libjpeg's own resync, which warns: the band fails. */
static boolean band_resync(j_decompress_ptr cinfo, int desired) {
  band_source *src = (band_source *)cinfo->src;
  if (cinfo->unread_marker == JPEG_RST0 + ((desired + src->band->shift) & 7)) {
    cinfo->unread_marker = 0;
    return TRUE;
  }
  return jpeg_resync_to_restart(cinfo, desired);
}

/* Decodes one band into its pixels. Runs on a thread of its own (or the caller's); every
 * jump into this function's setjmp comes from libjpeg called here. */
static void *decode_band(void *argument) {
  band *b = argument;
  const band_plan *plan = b->plan;
  struct jpeg_decompress_struct cinfo;
  band_error err;
  band_source *src = malloc(sizeof(*src));
  if (!src) return NULL;
  memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = band_error_exit;
  err.pub.emit_message = band_emit_message;
  err.pub.output_message = band_output_message;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    free(src);
    return NULL;
  }
  jpeg_create_decompress(&cinfo);
  cinfo.mem->max_memory_to_use = plan->max_memory;
  memcpy(src->header, plan->header, plan->header_length);
  src->header[plan->sof_height] = (uint8_t)(b->pixel_rows >> 8);
  src->header[plan->sof_height + 1] = (uint8_t)b->pixel_rows;
  src->band = b;
  src->phase = 0;
  ic_jpeg_use_source(&cinfo, &src->pub, band_source_fill, band_resync);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.jpeg_color_space = plan->jpeg_color_space;
  cinfo.out_color_space = plan->out_color_space;
  cinfo.scale_num = plan->scale_num;
  cinfo.scale_denom = 8;
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_width != plan->width || cinfo.output_height != b->out_rows ||
      (uint32_t)cinfo.output_components != plan->components) {
    jpeg_destroy_decompress(&cinfo);
    free(src);
    return NULL;
  }
  size_t stride = (size_t)plan->width * plan->components;
  while (cinfo.output_scanline < cinfo.output_height) {
    ic_status stop = ic_stop_reason(plan->control);
    if (stop != IC_OK) {
      b->stopped = stop;
      jpeg_destroy_decompress(&cinfo);
      free(src);
      return NULL;
    }
    JSAMPROW rows[8];
    for (int i = 0; i < 8; i++) {
      JDIMENSION row = cinfo.output_scanline + (JDIMENSION)i;
      if (row >= cinfo.output_height) row = cinfo.output_height - 1;
      rows[i] = b->pixels + stride * row;
    }
    JDIMENSION left = cinfo.output_height - cinfo.output_scanline;
    if (jpeg_read_scanlines(&cinfo, rows, left < 8 ? left : 8) == 0) {
      jpeg_destroy_decompress(&cinfo);
      free(src);
      return NULL;
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  free(src);
  b->done = 1;
  return NULL;
}

static int upsampled(j_decompress_ptr cinfo) {
  for (int i = 0; i < cinfo->num_components; i++) {
    const jpeg_component_info *c = &cinfo->comp_info[i];
#if JPEG_LIB_VERSION >= 70
    int h = c->DCT_h_scaled_size, v = c->DCT_v_scaled_size;
    int min_h = cinfo->min_DCT_h_scaled_size, min_v = cinfo->min_DCT_v_scaled_size;
#else
    int h = c->DCT_scaled_size, v = c->DCT_scaled_size;
    int min_h = cinfo->min_DCT_scaled_size, min_v = cinfo->min_DCT_scaled_size;
#endif
    if (h * c->h_samp_factor != min_h * cinfo->max_h_samp_factor ||
        v * c->v_samp_factor != min_v * cinfo->max_v_samp_factor)
      return 1;
  }
  return 0;
}

int ic_jpeg_bands_apply(j_decompress_ptr cinfo, unsigned scale_num) {
  if (cinfo->progressive_mode || cinfo->arith_code || cinfo->restart_interval == 0 ||
      cinfo->comps_in_scan != cinfo->num_components || cinfo->image_height > 65535)
    return 0;
  cinfo->scale_num = scale_num;
  cinfo->scale_denom = 8;
  jpeg_calc_output_dimensions(cinfo);
  return !upsampled(cinfo);
}

/* Rows of MCUs, MCUs per row and pixel rows per MCU row of the file's one scan. */
static void mcu_geometry(j_decompress_ptr cinfo, uint32_t *rows, uint32_t *per_row,
                         uint32_t *pixels) {
  uint32_t h = cinfo->comps_in_scan == 1 ? 1 : (uint32_t)cinfo->max_h_samp_factor;
  uint32_t v = cinfo->comps_in_scan == 1 ? 1 : (uint32_t)cinfo->max_v_samp_factor;
  *pixels = DCTSIZE * v;
  *per_row = (cinfo->image_width + DCTSIZE * h - 1) / (DCTSIZE * h);
  *rows = (cinfo->image_height + *pixels - 1) / *pixels;
}

/* The bands wanted: `threads` when set, else every core. */
static unsigned bands_wanted(unsigned threads) {
  unsigned n = threads ? threads : ic_cores();
  return n > IC_JPEG_MAX_BANDS ? IC_JPEG_MAX_BANDS : n;
}

uint64_t ic_jpeg_bands_memory(j_decompress_ptr cinfo, unsigned scale_num, unsigned threads,
                              uint64_t one_decode) {
  /* From the header alone, without libjpeg (no error handler is set up here): upsampling is
   * not looked at, so this may count bands that will not run. */
  if (cinfo->progressive_mode || cinfo->arith_code || cinfo->restart_interval == 0 ||
      cinfo->comps_in_scan != cinfo->num_components)
    return 0;
  unsigned n = bands_wanted(threads);
  if (n < 2) return 0;
  uint64_t width = ((uint64_t)cinfo->image_width * scale_num + 7) / 8;
  uint64_t height = ((uint64_t)cinfo->image_height * scale_num + 7) / 8;
  uint64_t image = width * height * (cinfo->num_components == 4 ? 4 : 3);
  /* Where a band may start: two offsets per row of MCUs at most. */
  uint64_t places = 2 * sizeof(uint64_t) * ((cinfo->image_height + 7) / 8 + 1);
  return image + (n - 1) * (one_decode + sizeof(band_source)) + sizeof(band_plan) + places;
}

/* Reads the header from SOI to the end of the scan header at `scan_start`, keeping the
 * segments a band needs: the tables (DQT, DHT), the frame (SOF0, SOF1), the restart interval
 * (DRI) and the scan header (SOS). Anything it does not expect leaves the file whole. */
static int keep_header(band_plan *plan, uint64_t scan_start) {
  uint8_t at[2];
  if (ic_random_read(&plan->bytes, 0, at, 2) != 2 || at[0] != 0xFF || at[1] != 0xD8) return 0;
  plan->header[0] = 0xFF;
  plan->header[1] = 0xD8;
  plan->header_length = 2;
  plan->sof_height = 0;
  uint64_t position = 2;
  for (int segments = 0; segments < HEADER_MAX_SEGMENTS && position < scan_start; segments++) {
    if (ic_random_read(&plan->bytes, position, at, 2) != 2 || at[0] != 0xFF) return 0;
    position += 2;
    /* Fill bytes before the marker's code: a few at most in real files. */
    for (int fill = 0; at[1] == 0xFF; fill++) {
      if (fill == 64 || ic_random_read(&plan->bytes, position, &at[1], 1) != 1) return 0;
      position++;
    }
    int code = at[1];
    uint8_t length_bytes[2];
    if (ic_random_read(&plan->bytes, position, length_bytes, 2) != 2) return 0;
    uint32_t length = (uint32_t)length_bytes[0] << 8 | length_bytes[1];
    if (length < 2 || position + length > scan_start) return 0;
    int keep = 0;
    switch (code) {
    case 0xDB: /* DQT */
    case 0xC4: /* DHT */
    case 0xDD: /* DRI */
    case 0xDA: /* SOS */
      keep = 1;
      break;
    case 0xC0: /* SOF0, SOF1: the sequential Huffman frames */
    case 0xC1:
      if (plan->sof_height) return 0;
      plan->sof_height = plan->header_length + 5;
      keep = 1;
      break;
    case 0xFE: /* COM */
      break;
    default:
      if (code < 0xE0 || code > 0xEF) return 0; /* not an APPn */
    }
    if (keep) {
      if (plan->header_length + 2 + length > sizeof(plan->header)) return 0;
      plan->header[plan->header_length] = 0xFF;
      plan->header[plan->header_length + 1] = (uint8_t)code;
      uint8_t *segment = plan->header + plan->header_length + 2;
      if (ic_random_read(&plan->bytes, position, segment, length) != length) return 0;
      plan->header_length += 2 + length;
    }
    position += length;
    if (code == 0xDA) return position == scan_start && plan->sof_height != 0;
  }
  return 0;
}

/*
 * Steps over the entropy-coded bytes from `scan_start`, counting restart markers. Every
 * `per_step` intervals an interval starts a row of MCUs where a band may start: for the k-th
 * such place (k from 1 while k < `places`), notes where its bytes start (starts[k]) and where
 * the marker before it starts (ends[k]). The restart markers must come in order, as many as
 * the MCUs need, and the first other marker must be EOI, whose offset is *eoi. Returns 1 if
 * so, 0 if not, -1 if stopped (*stop says why).
 */
static int find_intervals(const band_plan *plan, uint64_t scan_start, uint64_t expected,
                          uint64_t per_step, uint64_t places, uint64_t *starts,
                          uint64_t *ends, uint64_t *eoi, ic_status *stop) {
  const ic_random *bytes = &plan->bytes;
  uint8_t *buffer = bytes->data ? NULL : malloc(SCAN_CHUNK);
  if (!bytes->data && !buffer) return 0;
  uint64_t markers = 0, ff_at = 0;
  int after_ff = 0, outcome = 0;
  for (uint64_t offset = scan_start; offset < bytes->size;) {
    *stop = ic_stop_reason(plan->control);
    if (*stop != IC_OK) {
      outcome = -1;
      break;
    }
    size_t length = bytes->size - offset < SCAN_CHUNK ? (size_t)(bytes->size - offset)
                                                        : SCAN_CHUNK;
    const uint8_t *chunk = bytes->data ? bytes->data + offset : buffer;
    if (!bytes->data && ic_random_read(bytes, offset, buffer, length) != length) break;
    for (size_t i = 0; i < length; i++) {
      if (!after_ff) {
        const uint8_t *next = memchr(chunk + i, 0xFF, length - i);
        if (!next) break;
        i = (size_t)(next - chunk);
        after_ff = 1;
        ff_at = offset + i;
        continue;
      }
      uint8_t code = chunk[i];
      if (code == 0xFF) continue;
      after_ff = 0;
      if (code == 0x00) continue;
      if (code >= JPEG_RST0 && code <= JPEG_RST0 + 7) {
        if (code != JPEG_RST0 + (markers & 7)) goto done;
        markers++;
        if (markers % per_step == 0 && markers / per_step < places) {
          starts[markers / per_step] = offset + i + 1;
          ends[markers / per_step] = ff_at;
        }
        continue;
      }
      if (code == JPEG_EOI && markers == expected && markers / per_step >= places - 1) {
        *eoi = ff_at;
        outcome = 1;
      }
      goto done;
    }
    offset += length;
  }
done:
  free(buffer);
  return outcome;
}

/* What the bands need of the source: its bytes, and where the entropy-coded data starts. */
static int source_bytes(j_decompress_ptr cinfo, ic_stream *stream, ic_random *bytes,
                        uint64_t *scan_start) {
  if (stream->file) {
    struct stat status;
    int fd = fileno(stream->file);
    if (stream->head_offset < stream->head_length || fd < 0 || fstat(fd, &status) != 0 ||
        !S_ISREG(status.st_mode))
      return 0;
    off_t position = ftello(stream->file);
    if (position < 0 || (uint64_t)position < cinfo->src->bytes_in_buffer) return 0;
    *bytes = (ic_random){.data = NULL, .size = (uint64_t)status.st_size, .fd = fd};
    *scan_start = (uint64_t)position - cinfo->src->bytes_in_buffer;
  } else {
    if (!stream->data || cinfo->src->next_input_byte < stream->data ||
        cinfo->src->next_input_byte > stream->data + stream->size)
      return 0;
    *bytes = (ic_random){.data = stream->data, .size = stream->size, .fd = -1};
    *scan_start = (uint64_t)(cinfo->src->next_input_byte - stream->data);
  }
  return *scan_start < bytes->size;
}

static uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static void free_bands(band *bands, unsigned count) {
  for (unsigned i = 0; i < count; i++) free(bands[i].pixels);
}

int ic_jpeg_bands_run(j_decompress_ptr cinfo, ic_stream *stream, unsigned scale_num,
                      unsigned threads, const ic_control *control,
                      ic_sink *sink, ic_result *result, ic_status *status) {
  if (!ic_jpeg_bands_apply(cinfo, scale_num)) return 0;
  /* As many bands as asked for; by default, this decode's own core and the cores no other
   * decode is running on. */
  unsigned n = bands_wanted(threads);
  if (threads == 0 && n > ic_idle_cores() + 1) n = ic_idle_cores() + 1;
  uint32_t rows, per_row, row_pixels;
  mcu_geometry(cinfo, &rows, &per_row, &row_pixels);
  if (n > rows / MIN_BAND_MCU_ROWS) n = rows / MIN_BAND_MCU_ROWS;
  if (n < 2) return 0;

  /* A band starts where an interval starts a row of MCUs: every `per_step` intervals,
   * which are `rows_per_step` rows; `places` such steps, the first at row 0. */
  uint64_t interval = cinfo->restart_interval;
  uint64_t rows_per_step = interval / gcd(interval, per_row);
  uint64_t per_step = rows_per_step * per_row / interval;
  uint64_t places = (rows + rows_per_step - 1) / rows_per_step;
  if (places < 2) return 0;

  band_plan *plan = malloc(sizeof(*plan));
  uint64_t *starts = malloc(2 * places * sizeof(uint64_t));
  if (!plan || !starts) {
    free(plan);
    free(starts);
    return 0;
  }
  uint64_t *ends = starts + places;
  uint64_t scan_start, eoi = 0;
  if (!source_bytes(cinfo, stream, &plan->bytes, &scan_start) ||
      !keep_header(plan, scan_start)) {
    free(plan);
    free(starts);
    return 0;
  }
  plan->scale_num = scale_num;
  plan->jpeg_color_space = cinfo->jpeg_color_space;
  plan->out_color_space = cinfo->out_color_space;
  plan->max_memory = cinfo->mem->max_memory_to_use;
  plan->width = cinfo->output_width;
  plan->components = (uint32_t)cinfo->out_color_components;
  plan->control = control;
  uint64_t mcus = (uint64_t)rows * per_row;
  ic_status stop = IC_OK;
  int found = find_intervals(plan, scan_start, (mcus - 1) / interval, per_step, places, starts,
                             ends, &eoi, &stop);
  if (found <= 0) {
    free(plan);
    free(starts);
    if (found < 0) *status = ic_check(control, result);
    return found < 0;
  }

  /* Bands of about equal work, not of equal height: a detailed half of a picture holds far
   * more entropy-coded bytes than a sky. Work up to a place is its bytes from the scan's
   * start, and each row of MCUs above it: decoding a block costs about as much as 1.5 bytes
   * of Huffman codes (djpeg -scale 1/8 on a flat and a detailed 48 MP picture). */
  uint64_t blocks_per_mcu = 0;
  for (int i = 0; i < cinfo->num_components; i++)
    blocks_per_mcu += (uint64_t)cinfo->comp_info[i].h_samp_factor *
                      (uint64_t)cinfo->comp_info[i].v_samp_factor;
  uint64_t row_work = per_row * blocks_per_mcu * 3 / 2;
  uint64_t total_work = (eoi - scan_start) + rows * row_work;
  uint64_t boundary[IC_JPEG_MAX_BANDS], wanted[IC_JPEG_MAX_BANDS];
  uint64_t chosen[IC_JPEG_MAX_BANDS];
  int count = 0;
  uint64_t place = 0;
#define WORK_BEFORE(k) ((starts[k] - scan_start) + (k) * rows_per_step * row_work)
  for (unsigned b = 1; b < n; b++) {
    uint64_t target = total_work / n * b;
    uint64_t k = place + 1;
    while (k + 1 < places && WORK_BEFORE(k + 1) <= target) k++;
    if (k + 1 < places && WORK_BEFORE(k) < target &&
        WORK_BEFORE(k + 1) - target < target - WORK_BEFORE(k))
      k++;
    if (k >= places) break;
    chosen[count] = k;
    boundary[count] = k * rows_per_step;
    wanted[count] = k * per_step;
    count++;
    place = k;
  }
  if (count == 0) {
    free(plan);
    free(starts);
    return 0;
  }
  /* The largest band's share of the work, for the result. */
  uint64_t largest = 0;
  for (int i = 0; i <= count; i++) {
    uint64_t from = i == 0 ? 0 : WORK_BEFORE(chosen[i - 1]);
    uint64_t to = i == count ? total_work : WORK_BEFORE(chosen[i]);
    if (to - from > largest) largest = to - from;
  }
#undef WORK_BEFORE
  uint64_t band_starts[IC_JPEG_MAX_BANDS], band_ends[IC_JPEG_MAX_BANDS];
  for (int i = 0; i < count; i++) {
    band_starts[i] = starts[chosen[i]];
    band_ends[i] = ends[chosen[i]];
  }
  free(starts);

  /* The bands: the first from the scan header, each next one from its marker on. */
  unsigned bands_count = (unsigned)count + 1;
  band bands[IC_JPEG_MAX_BANDS];
  memset(bands, 0, sizeof(bands));
  size_t stride = (size_t)plan->width * plan->components;
  uint32_t out_rows_left = cinfo->output_height;
  int ok = 1;
  for (unsigned i = 0; i < bands_count; i++) {
    band *b = &bands[i];
    b->plan = plan;
    b->mcu_row_start = i == 0 ? 0 : (uint32_t)boundary[i - 1];
    uint32_t end_row = i < (unsigned)count ? (uint32_t)boundary[i] : rows;
    uint32_t first_pixel = b->mcu_row_start * row_pixels;
    b->pixel_rows = i < (unsigned)count ? (end_row - b->mcu_row_start) * row_pixels
                                        : cinfo->image_height - first_pixel;
    b->out_rows = i < (unsigned)count ? b->pixel_rows / DCTSIZE * scale_num : out_rows_left;
    b->start = i == 0 ? scan_start : band_starts[i - 1];
    b->end = i < (unsigned)count ? band_ends[i] : eoi;
    b->shift = i == 0 ? 0 : (int)(wanted[i - 1] & 7);
    if (b->out_rows == 0 || b->out_rows > out_rows_left || b->end < b->start) ok = 0;
    out_rows_left -= ok ? b->out_rows : 0;
    if (ok) b->pixels = malloc(stride * b->out_rows);
    if (!b->pixels) ok = 0;
    if (!ok) break;
  }
  if (!ok || out_rows_left != 0) {
    free_bands(bands, bands_count);
    free(plan);
    return 0;
  }

  /* Every band but the first on a thread of its own, counted as a busy core while it runs;
   * the first on this one. */
  pthread_t helpers[IC_JPEG_MAX_BANDS];
  int started[IC_JPEG_MAX_BANDS] = {0};
  ic_busy_cores_add((int)bands_count - 1);
  for (unsigned i = 1; i < bands_count; i++)
    started[i] = pthread_create(&helpers[i], NULL, decode_band, &bands[i]) == 0;
  decode_band(&bands[0]);
  for (unsigned i = 1; i < bands_count; i++) {
    if (started[i]) pthread_join(helpers[i], NULL);
    else decode_band(&bands[i]);
  }
  ic_busy_cores_add(1 - (int)bands_count);

  int done = 1, stopped = 0;
  for (unsigned i = 0; i < bands_count; i++) {
    if (bands[i].stopped != IC_OK) stopped = 1;
    if (!bands[i].done) done = 0;
  }
  if (stopped || !done) {
    free_bands(bands, bands_count);
    free(plan);
    if (!stopped) return 0;
    *status = ic_check(control, result);
    return 1;
  }
  ic_status pushed = sink->begin(sink, plan->width, cinfo->output_height,
                                 (int)plan->components, result);
  for (unsigned i = 0; i < bands_count && pushed == IC_OK; i++) {
    for (uint32_t row = 0; row < bands[i].out_rows && pushed == IC_OK; row++) {
      if (row % 64 == 0) pushed = ic_check(control, result);
      if (pushed == IC_OK) pushed = sink->row(sink, bands[i].pixels + stride * row, result);
    }
  }
  result->jpeg_bands = bands_count;
  result->jpeg_band_share = (uint32_t)(largest * 1000 / total_work);
  free_bands(bands, bands_count);
  free(plan);
  *status = pushed;
  return 1;
}
