/*
 * thumbd-frame's pictures of drawings: a PDF's first page (poppler) and an SVG (librsvg),
 * drawn with cairo for a box, written as the video's frame is (frame.h's header, then a BMP),
 * which thumbd decodes again with its own bounded BMP decoder.
 *
 * Rules kept here:
 * - poppler-glib, librsvg and cairo are opened with dlopen (cs_bind), once per server (before
 *   any job's process is forked), so a missing package is a message that names it, and a
 *   server pays for loading them once;
 * - no header of theirs is needed: the few functions used are declared here, with opaque
 *   types;
 * - only the input is read, through its descriptor: a PDF by poppler from a duplicate of it,
 *   an SVG from at most PAGE_SVG_BYTES read into memory (librsvg then has no base file, so it
 *   loads no other file; the sandbox shows none anyway);
 * - the picture is drawn at the size the thumbnail will have, fitted to the box (a drawing
 *   smaller than the box enlarged: vectors lose nothing), as the desktop's thumbnailers draw
 *   it: drawing more pixels to shrink them after costs a drawing's time four times over and
 *   gives text that is fainter than every other thumbnailer's; its pixels stay within the
 *   pixel limit (the scale is lowered to fit, a drawing never refused for being large), and
 *   each side within PAGE_MAX_SIDE;
 * - a PDF is drawn on white (a page is paper) as 24-bit; an SVG keeps its transparency, as a
 *   32-bit BMP with an alpha mask (cairo's premultiplied pixels made straight), unless nothing
 *   of it is drawn: then it is a blank page, white;
 * - what the file declares is checked before it is used: a size that is not finite, not
 *   positive or absurd is refused;
 * - poppler's and librsvg's own loops are bounded by the sandbox's CPU limit, address space
 *   and deadline.
 */
#define _GNU_SOURCE
#include "frame.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
  PAGE_MAX_SIDE = 32768,
  PAGE_SVG_BYTES = 32 << 20,
  /* cairo_format_t */
  CAIRO_ARGB32 = 0,
  CAIRO_RGB24 = 1,
};

/* A drawing's own size (points for a PDF, CSS pixels for an SVG) is at most this. */
#define PAGE_MAX_NATURAL 1.0e6

typedef struct page_error {
  uint32_t domain;
  int code;
  char *message;
} page_error;

typedef struct page_length {
  double length;
  int unit;
} page_length;

typedef struct page_rectangle {
  double x, y, width, height;
} page_rectangle;

typedef struct page_dimensions {
  int width, height;
  double em, ex;
} page_dimensions;

/* Every function of these libraries the worker calls, by library: each named once, with the
 * prototype declared here (no -dev package: the libraries' headers are not installed), called
 * as pg.NAME. Pointers to the libraries' own objects are void *. */
#define PAGE_GLIB(X) X(void, g_error_free, (page_error *error))
#define PAGE_GOBJECT(X) X(void, g_object_unref, (void *object))
#define PAGE_CAIRO(X)                                                                       \
  X(void *, cairo_image_surface_create, (int format, int width, int height))               \
  X(int, cairo_surface_status, (void *surface))                                            \
  X(void, cairo_surface_flush, (void *surface))                                            \
  X(unsigned char *, cairo_image_surface_get_data, (void *surface))                        \
  X(int, cairo_image_surface_get_stride, (void *surface))                                  \
  X(void, cairo_surface_destroy, (void *surface))                                          \
  X(void *, cairo_create, (void *surface))                                                 \
  X(int, cairo_status, (void *cairo))                                                      \
  X(void, cairo_scale, (void *cairo, double x, double y))                                  \
  X(void, cairo_set_source_rgb, (void *cairo, double r, double g, double b))               \
  X(void, cairo_paint, (void *cairo))                                                      \
  X(void, cairo_destroy, (void *cairo))
#define PAGE_POPPLER(X)                                                                     \
  X(void *, poppler_document_new_from_fd, (int fd, const char *password, page_error **error)) \
  X(void *, poppler_document_new_from_data,                                                 \
    (char *data, int length, const char *password, page_error **error))                     \
  X(int, poppler_document_get_n_pages, (void *document))                                   \
  X(void *, poppler_document_get_page, (void *document, int index))                        \
  X(void, poppler_page_get_size, (void *page, double *width, double *height))              \
  X(void, poppler_page_render, (void *page, void *cairo))
#define PAGE_RSVG(X)                                                                        \
  X(void *, rsvg_handle_new_from_data, (const uint8_t *data, size_t size, page_error **error)) \
  X(int, rsvg_handle_get_intrinsic_size_in_pixels,                                         \
    (void *handle, double *width, double *height))                                         \
  X(void, rsvg_handle_get_intrinsic_dimensions,                                            \
    (void *handle, int *has_width, page_length *width, int *has_height, page_length *height, \
     int *has_viewbox, page_rectangle *viewbox))                                           \
  X(int, rsvg_handle_render_document,                                                      \
    (void *handle, void *cairo, const page_rectangle *viewport, page_error **error))        \
  X(void, rsvg_handle_get_dimensions, (void *handle, page_dimensions *size))

#define PAGE_FIELD(result, name, parameters) result(*name) parameters;
typedef struct page_api {
  PAGE_GLIB(PAGE_FIELD)
  PAGE_GOBJECT(PAGE_FIELD)
  PAGE_CAIRO(PAGE_FIELD)
  PAGE_POPPLER(PAGE_FIELD)
  PAGE_RSVG(PAGE_FIELD)
} page_api;
#undef PAGE_FIELD

static page_api pg;
/* Which kinds could be bound: 0 not yet tried, 1 bound, -1 missing (the message kept). */
static int pdf_bound, svg_bound;
static char pdf_missing[256], svg_missing[256];

/* A row of a cs_symbol table for one of the functions above. */
#define PAGE_ROW(result, name, parameters) CS_SYMBOL(pg, name, #name)

static int bind_common(char *error, size_t size) {
  const cs_symbol gobject[] = {PAGE_GOBJECT(PAGE_ROW)};
  const cs_symbol glib[] = {PAGE_GLIB(PAGE_ROW)};
  const cs_symbol cairo[] = {PAGE_CAIRO(PAGE_ROW)};
  if (cs_bind("libglib-2.0.so.0", "libglib2.0-0", glib, 1, NULL, error, size) != 0 ||
      cs_bind("libgobject-2.0.so.0", "libglib2.0-0", gobject, 1, NULL, error, size) != 0 ||
      CS_BIND("libcairo.so.2", "libcairo2", cairo, NULL, error) != 0) {
    return -1;
  }
  return 0;
}

void tp_bind(void) {
  if (pdf_bound != 0) return;
  char common[256];
  if (bind_common(common, sizeof common) != 0) {
    snprintf(pdf_missing, sizeof pdf_missing, "%s", common);
    snprintf(svg_missing, sizeof svg_missing, "%s", common);
    pdf_bound = svg_bound = -1;
    return;
  }
  const cs_symbol poppler[] = {PAGE_POPPLER(PAGE_ROW)};
  const cs_symbol rsvg[] = {PAGE_RSVG(PAGE_ROW)};
  pdf_bound = CS_BIND("libpoppler-glib.so.8", "libpoppler-glib8", poppler, NULL, pdf_missing) == 0
                  ? 1
                  : -1;
  svg_bound = CS_BIND("librsvg-2.so.2", "librsvg2-2", rsvg, NULL, svg_missing) == 0 ? 1 : -1;
}

/* ---- the plan: the size drawn and the size reported ---- */

typedef struct plan {
  int width, height;    /* the picture drawn */
  double scale;         /* from the drawing's units to the picture's pixels */
  uint32_t shown_w, shown_h; /* the drawing's size as the thumbnail reports it */
} plan;

static int plan_for(double natural_w, double natural_h, int box_w, int box_h,
                    uint64_t max_pixels, plan *out) {
  if (!isfinite(natural_w) || !isfinite(natural_h) || natural_w <= 0 || natural_h <= 0 ||
      natural_w > PAGE_MAX_NATURAL || natural_h > PAGE_MAX_NATURAL) {
    return tf_fail(TF_EXIT_CORRUPT, "a drawing of %g x %g", natural_w, natural_h);
  }
  /* The scale that fits the drawing in the box (1 for a free box). */
  double fit = INFINITY;
  if (box_w > 0) fit = fmin(fit, box_w / natural_w);
  if (box_h > 0) fit = fmin(fit, box_h / natural_h);
  if (!isfinite(fit)) fit = 1;
  double shown = fmax(1, fit);
  double scale = fit;
  /* Within the side and pixel limits: lowered, never refused. */
  double most = fmin((double)max_pixels, (double)PAGE_MAX_SIDE * PAGE_MAX_SIDE);
  double pixels = natural_w * scale * natural_h * scale;
  if (pixels > most) scale *= sqrt(most / pixels) * 0.999;
  scale = fmin(scale, fmin(PAGE_MAX_SIDE / natural_w, PAGE_MAX_SIDE / natural_h));
  double w = floor(natural_w * scale + 0.5), h = floor(natural_h * scale + 0.5);
  out->width = (int)fmax(1, fmin(w, PAGE_MAX_SIDE));
  out->height = (int)fmax(1, fmin(h, PAGE_MAX_SIDE));
  if ((uint64_t)out->width * (uint64_t)out->height > max_pixels) {
    return tf_fail(TF_EXIT_TOO_LARGE, "no picture of this drawing fits %llu pixels",
                (unsigned long long)max_pixels);
  }
  out->scale = scale;
  out->shown_w = (uint32_t)fmax(1, floor(natural_w * shown + 0.5));
  out->shown_h = (uint32_t)fmax(1, floor(natural_h * shown + 0.5));
  return 0;
}

/* ---- output: the header and a BMP of cairo's pixels ---- */

/* Writes cairo's surface (w x h, premultiplied ARGB32 or RGB24) as the header and a top-down
 * BMP: 32-bit with BITMAPV4HEADER's alpha mask when `alpha`, 24-bit otherwise, `over_white`
 * putting an ARGB32 surface's pixels on white. */
static int emit(const unsigned char *data, int stride, int w, int h, int alpha, int over_white,
                const plan *p) {
  size_t header = alpha ? 14 + 108 : 14 + 40;
  size_t row_bytes = alpha ? (size_t)w * 4 : (((size_t)w * 3 + 3) & ~(size_t)3);
  size_t pixels = row_bytes * (size_t)h;
  uint8_t head[TF_HEADER_SIZE + 14 + 108] = {0};
  memcpy(head, TF_MAGIC, 8);
  tf_put32(head + 8, (uint32_t)w);
  tf_put32(head + 12, (uint32_t)h);
  tf_put32(head + 16, 0);
  tf_put32(head + 20, TF_UNKNOWN);
  tf_put32(head + 24, alpha ? TF_FLAG_ALPHA : 0);
  tf_put32(head + 28, p->shown_w);
  tf_put32(head + 32, p->shown_h);
  uint8_t *bmp = head + TF_HEADER_SIZE;
  bmp[0] = 'B';
  bmp[1] = 'M';
  tf_put32(bmp + 2, (uint32_t)(header + pixels));
  tf_put32(bmp + 10, (uint32_t)header);
  tf_put32(bmp + 14, (uint32_t)(header - 14));
  tf_put32(bmp + 18, (uint32_t)w);
  tf_put32(bmp + 22, (uint32_t)-h); /* top-down */
  bmp[26] = 1;
  bmp[28] = alpha ? 32 : 24;
  tf_put32(bmp + 30, alpha ? 3 : 0); /* BI_BITFIELDS, or BI_RGB */
  tf_put32(bmp + 34, (uint32_t)pixels);
  if (alpha) {
    tf_put32(bmp + 54, 0x00FF0000u);
    tf_put32(bmp + 58, 0x0000FF00u);
    tf_put32(bmp + 62, 0x000000FFu);
    tf_put32(bmp + 66, 0xFF000000u);
    memcpy(bmp + 70, "BGRs", 4); /* LCS_sRGB, stored little-endian */
  }
  if (tf_write_all(STDOUT_FILENO, head, TF_HEADER_SIZE + header) != 0) return -1;
  uint8_t *row = calloc(1, row_bytes);
  if (!row) return -1;
  int status = 0;
  for (int y = 0; y < h && status == 0; y++) {
    const uint32_t *from = (const uint32_t *)(const void *)(data + (size_t)y * (size_t)stride);
    for (int x = 0; x < w; x++) {
      uint32_t pixel = from[x];
      unsigned a = pixel >> 24, r = (pixel >> 16) & 0xFF, g = (pixel >> 8) & 0xFF, b = pixel & 0xFF;
      if (alpha) {
        /* cairo's colours are premultiplied; a BMP's are not. */
        if (a != 0 && a != 255) {
          r = (r * 255 + a / 2) / a;
          g = (g * 255 + a / 2) / a;
          b = (b * 255 + a / 2) / a;
          r = r > 255 ? 255 : r;
          g = g > 255 ? 255 : g;
          b = b > 255 ? 255 : b;
        }
        uint8_t *to = row + (size_t)x * 4;
        to[0] = (uint8_t)b;
        to[1] = (uint8_t)g;
        to[2] = (uint8_t)r;
        to[3] = (uint8_t)a;
      } else {
        if (over_white) {
          r += 255 - a;
          g += 255 - a;
          b += 255 - a;
        }
        uint8_t *to = row + (size_t)x * 3;
        to[0] = (uint8_t)b;
        to[1] = (uint8_t)g;
        to[2] = (uint8_t)r;
      }
    }
    status = tf_write_all(STDOUT_FILENO, row, row_bytes);
  }
  free(row);
  return status;
}

/* A surface of the plan's size and a context scaled to it; 0, or an exit code. */
static int canvas(const plan *p, int alpha, void **surface, void **cairo) {
  *surface = pg.cairo_image_surface_create(alpha ? CAIRO_ARGB32 : CAIRO_RGB24, p->width, p->height);
  if (!*surface || pg.cairo_surface_status(*surface) != 0) {
    return tf_fail(TF_EXIT_TOO_LARGE, "no surface of %d x %d", p->width, p->height);
  }
  *cairo = pg.cairo_create(*surface);
  if (!*cairo || pg.cairo_status(*cairo) != 0)
    return tf_fail(TF_EXIT_CORRUPT, "no drawing context");
  return 0;
}

/* Whether any pixel of an ARGB32 surface is not wholly transparent. */
static int drawn(const unsigned char *data, int stride, int w, int h) {
  for (int y = 0; y < h; y++) {
    const uint32_t *row = (const uint32_t *)(const void *)(data + (size_t)y * (size_t)stride);
    for (int x = 0; x < w; x++) {
      if (row[x] >> 24) return 1;
    }
  }
  return 0;
}

/* Set while the server warms the libraries up: what is drawn is not written. */
static int warming;

static int finish(void *surface, void *cairo, const plan *p, int alpha) {
  int status = pg.cairo_status(cairo);
  if (status != 0) return tf_fail(TF_EXIT_CORRUPT, "drawing failed (cairo status %d)", status);
  if (warming) return TF_EXIT_OK;
  pg.cairo_surface_flush(surface);
  const unsigned char *data = pg.cairo_image_surface_get_data(surface);
  int stride = pg.cairo_image_surface_get_stride(surface);
  if (!data || stride < p->width * 4) return tf_fail(TF_EXIT_CORRUPT, "no pixels drawn");
  /* A drawing with nothing drawn is a blank page: as a BMP whose alpha is zero everywhere it
   * would be read as one without alpha, and shown black. */
  int blank = alpha && !drawn(data, stride, p->width, p->height);
  if (emit(data, stride, p->width, p->height, alpha && !blank, blank, p) != 0) {
    return tf_fail(TF_EXIT_OUTPUT, "cannot write the picture");
  }
  return TF_EXIT_OK;
}

static const char *message_of(page_error *error) {
  return error && error->message ? error->message : "no reason given";
}

/* ---- PDF ---- */

static int draw_document(void *document, int box_w, int box_h, uint64_t max_pixels);

static int draw_pdf(int fd, int box_w, int box_h, uint64_t max_pixels) {
  /* poppler takes the descriptor it is given and closes it with the document. */
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (own < 0) return tf_fail(TF_EXIT_CORRUPT, "cannot duplicate the input");
  page_error *error = NULL;
  void *document = pg.poppler_document_new_from_fd(own, NULL, &error);
  if (!document) {
    /* POPPLER_ERROR_ENCRYPTED is 1: a password is asked for. */
    int encrypted = error && error->code == 1;
    int code = tf_fail(encrypted ? TF_EXIT_UNSUPPORTED : TF_EXIT_CORRUPT, "%s: %s",
                    encrypted ? "a PDF that needs a password" : "not a PDF poppler reads",
                    message_of(error));
    if (error) pg.g_error_free(error);
    return code;
  }
  return draw_document(document, box_w, box_h, max_pixels);
}

/* Draws the first page of `document`, and lets go of it. */
static int draw_document(void *document, int box_w, int box_h, uint64_t max_pixels) {
  int status;
  void *page = NULL, *surface = NULL, *cairo = NULL;
  if (pg.poppler_document_get_n_pages(document) < 1 ||
      !(page = pg.poppler_document_get_page(document, 0))) {
    status = tf_fail(TF_EXIT_CORRUPT, "a PDF without a page");
    goto done;
  }
  double width = 0, height = 0;
  pg.poppler_page_get_size(page, &width, &height);
  plan p;
  status = plan_for(width, height, box_w, box_h, max_pixels, &p);
  if (status != 0) goto done;
  status = canvas(&p, 0, &surface, &cairo);
  if (status != 0) goto done;
  pg.cairo_set_source_rgb(cairo, 1, 1, 1);
  pg.cairo_paint(cairo);
  pg.cairo_scale(cairo, p.scale, p.scale);
  pg.poppler_page_render(page, cairo);
  status = finish(surface, cairo, &p, 0);
done:
  if (cairo) pg.cairo_destroy(cairo);
  if (surface) pg.cairo_surface_destroy(surface);
  if (page) pg.g_object_unref(page);
  pg.g_object_unref(document);
  return status;
}

/* ---- SVG ---- */

/* The whole input, at most PAGE_SVG_BYTES, read with pread; NULL with an exit code. */
static uint8_t *read_input(int fd, size_t *size, int *code) {
  struct stat about;
  if (fstat(fd, &about) != 0 || !S_ISREG(about.st_mode) || about.st_size <= 0) {
    *code = tf_fail(TF_EXIT_UNSUPPORTED, "the input is not a file with content");
    return NULL;
  }
  if (about.st_size > PAGE_SVG_BYTES) {
    *code = tf_fail(TF_EXIT_TOO_LARGE, "an SVG of %lld bytes (at most %d)",
                 (long long)about.st_size, PAGE_SVG_BYTES);
    return NULL;
  }
  size_t total = (size_t)about.st_size, got = 0;
  uint8_t *bytes = malloc(total);
  if (!bytes) {
    *code = tf_fail(TF_EXIT_TOO_LARGE, "no memory for the SVG");
    return NULL;
  }
  while (got < total) {
    ssize_t done = pread(fd, bytes + got, total - got, (off_t)got);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) break;
    got += (size_t)done;
  }
  if (got == 0) {
    free(bytes);
    *code = tf_fail(TF_EXIT_CORRUPT, "cannot read the SVG");
    return NULL;
  }
  *size = got;
  return bytes;
}

/* The SVG's own size in pixels: its width and height, or its viewBox's, or (with neither)
 * what librsvg's older interface gives, the extent of what it draws. */
static int svg_size(void *handle, double *width, double *height) {
  if (pg.rsvg_handle_get_intrinsic_size_in_pixels(handle, width, height)) return 0;
  int has_width = 0, has_height = 0, has_viewbox = 0;
  page_length w = {0}, h = {0};
  page_rectangle box = {0};
  pg.rsvg_handle_get_intrinsic_dimensions(handle, &has_width, &w, &has_height, &h, &has_viewbox,
                                          &box);
  if (has_viewbox) {
    *width = box.width;
    *height = box.height;
    return 0;
  }
  page_dimensions legacy = {0};
  pg.rsvg_handle_get_dimensions(handle, &legacy);
  if (legacy.width <= 0 || legacy.height <= 0) return -1;
  *width = legacy.width;
  *height = legacy.height;
  return 0;
}

static int draw_svg_bytes(const uint8_t *bytes, size_t size, int box_w, int box_h,
                          uint64_t max_pixels);

static int draw_svg(int fd, int box_w, int box_h, uint64_t max_pixels) {
  size_t size = 0;
  int status = 0;
  uint8_t *bytes = read_input(fd, &size, &status);
  if (!bytes) return status;
  status = draw_svg_bytes(bytes, size, box_w, box_h, max_pixels);
  free(bytes);
  return status;
}

static int draw_svg_bytes(const uint8_t *bytes, size_t size, int box_w, int box_h,
                          uint64_t max_pixels) {
  int status = 0;
  page_error *error = NULL;
  void *handle = pg.rsvg_handle_new_from_data(bytes, size, &error);
  if (!handle) {
    status = tf_fail(TF_EXIT_CORRUPT, "not an SVG librsvg reads: %s", message_of(error));
    if (error) pg.g_error_free(error);
    return status;
  }
  void *surface = NULL, *cairo = NULL;
  double width = 0, height = 0;
  if (svg_size(handle, &width, &height) != 0) {
    status = tf_fail(TF_EXIT_CORRUPT, "an SVG without a size or a viewBox");
    goto done;
  }
  plan p;
  status = plan_for(width, height, box_w, box_h, max_pixels, &p);
  if (status != 0) goto done;
  status = canvas(&p, 1, &surface, &cairo);
  if (status != 0) goto done;
  /* The drawing in its own units, scaled by cairo: the same for a viewBox, and right for
   * one without, which librsvg draws at its own size. */
  pg.cairo_scale(cairo, p.scale, p.scale);
  page_rectangle viewport = {0, 0, width, height};
  if (!pg.rsvg_handle_render_document(handle, cairo, &viewport, &error)) {
    status = tf_fail(TF_EXIT_CORRUPT, "the SVG does not draw: %s", message_of(error));
    if (error) pg.g_error_free(error);
    goto done;
  }
  status = finish(surface, cairo, &p, 1);
done:
  if (cairo) pg.cairo_destroy(cairo);
  if (surface) pg.cairo_surface_destroy(surface);
  pg.g_object_unref(handle);
  return status;
}

/* A PDF of one small page with a line of text in a standard font (which poppler finds through
 * fontconfig, as most documents' fonts), its cross-reference table made to match. */
static int warm_pdf(char *out, size_t size) {
  static const char *const objects[] = {
      "<< /Type /Catalog /Pages 2 0 R >>",
      "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
      ("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 16 16] /Contents 4 0 R "
       "/Resources << /Font << /F1 5 0 R >> >> >>"),
      "<< /Length 30 >>\nstream\nBT /F1 12 Tf 1 2 Td (a) Tj ET\nendstream",
      "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  };
  size_t used = (size_t)snprintf(out, size, "%%PDF-1.4\n");
  long offsets[5];
  for (int i = 0; i < 5 && used < size; i++) {
    offsets[i] = (long)used;
    used += (size_t)snprintf(out + used, size - used, "%d 0 obj\n%s\nendobj\n", i + 1, objects[i]);
  }
  long table = (long)used;
  if (used < size) used += (size_t)snprintf(out + used, size - used, "xref\n0 6\n0000000000 65535 f \n");
  for (int i = 0; i < 5 && used < size; i++) {
    used += (size_t)snprintf(out + used, size - used, "%010ld 00000 n \n", offsets[i]);
  }
  if (used < size) {
    used += (size_t)snprintf(out + used, size - used,
                             "trailer\n<< /Size 6 /Root 1 0 R >>\nstartxref\n%ld\n%%%%EOF\n", table);
  }
  return used < size ? (int)used : -1;
}

void tp_warm(void) {
  tp_bind();
  warming = 1;
  if (svg_bound > 0) {
    static const char svg[] = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"16\" height=\"16\">"
                              "<text x=\"1\" y=\"12\" font-size=\"12\">a</text></svg>";
    (void)draw_svg_bytes((const uint8_t *)svg, sizeof svg - 1, 16, 16, 1024);
  }
  char pdf[1024];
  int length = warm_pdf(pdf, sizeof pdf);
  if (pdf_bound > 0 && length > 0) {
    void *document = pg.poppler_document_new_from_data(pdf, length, NULL, NULL);
    if (document) (void)draw_document(document, 16, 16, 1024);
  }
  warming = 0;
}

int tp_run(int fd, uint32_t kind, int box_w, int box_h, uint64_t max_pixels) {
  tp_bind();
  switch (kind) {
  case TF_KIND_PDF:
    if (pdf_bound < 0) return tf_fail(TF_EXIT_UNAVAILABLE, "%s", pdf_missing);
    return draw_pdf(fd, box_w, box_h, max_pixels);
  case TF_KIND_SVG:
    if (svg_bound < 0) return tf_fail(TF_EXIT_UNAVAILABLE, "%s", svg_missing);
    return draw_svg(fd, box_w, box_h, max_pixels);
  default:
    return tf_fail(TF_EXIT_USAGE, "no drawing of kind %u", kind);
  }
}
