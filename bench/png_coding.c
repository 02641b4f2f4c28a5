/*
 * PNG coding choices on real thumbnails: encode time and size per image for zlib levels,
 * row filters and zlib's run-length strategy, with libpng, as thumbd's encoder calls it.
 * Inputs are PNG thumbnails (RGB is taken; alpha dropped), e.g. a desktop cache's `normal`
 * folder for photos, or `thumbd thumbnail ... --format png` of the corpus's PNG, GIF and
 * WebP suites for graphics. Each configuration encodes every input 5 times.
 *
 *   gcc -O2 bench/png_coding.c -lpng -o /tmp/png_coding && /tmp/png_coding FILE.png...
 */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
typedef struct { unsigned char *d; size_t n, cap; } buf;
static void wr(png_structp p, png_bytep b, png_size_t l) { buf *o = png_get_io_ptr(p); if (o->n + l > o->cap) { o->cap = (o->n + l) * 2; o->d = realloc(o->d, o->cap);} memcpy(o->d + o->n, b, l); o->n += l; }
static void fl(png_structp p) { (void)p; }
typedef struct { int w, h; unsigned char *px; } img;
static size_t enc(img *im, int level, int filters, int strategy) {
  buf o = {0};
  png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, 0, 0, 0);
  png_infop i = png_create_info_struct(p);
  png_set_write_fn(p, &o, wr, fl);
  png_set_compression_level(p, level);
  if (filters >= 0) png_set_filter(p, 0, filters);
  if (strategy >= 0) png_set_compression_strategy(p, strategy);
  png_set_IHDR(p, i, im->w, im->h, 8, PNG_COLOR_TYPE_RGB, 0, 0, 0);
  png_write_info(p, i);
  for (int y = 0; y < im->h; y++) png_write_row(p, im->px + (size_t)y * im->w * 3);
  png_write_end(p, i);
  png_destroy_write_struct(&p, &i);
  free(o.d);
  return o.n;
}
int main(int argc, char **argv) {
  img ims[400]; int n = 0;
  for (int a = 1; a < argc && n < 400; a++) {
    png_image pi; memset(&pi, 0, sizeof pi); pi.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&pi, argv[a])) continue;
    pi.format = PNG_FORMAT_RGB;
    ims[n].w = pi.width; ims[n].h = pi.height; ims[n].px = malloc(PNG_IMAGE_SIZE(pi));
    png_image_finish_read(&pi, NULL, ims[n].px, 0, NULL); n++;
  }
  struct { const char *name; int level, filters, strategy; } cfg[] = {
    {"L2 all (graphics)", 2, -1, -1}, {"L1 all", 1, -1, -1}, {"L2 paeth", 2, PNG_FILTER_PAETH, -1},
    {"L1 paeth", 1, PNG_FILTER_PAETH, -1}, {"L2 sub", 2, PNG_FILTER_SUB, -1}, {"L1 up", 1, PNG_FILTER_UP, -1},
    {"rle paeth (photos)", 6, PNG_FILTER_PAETH, 3}, {"rle all", 6, -1, 3}, {"L6 all", 6, -1, -1}};
  for (int c = 0; c < 9; c++) {
    size_t total = 0; struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < 5; r++) { total = 0; for (int k = 0; k < n; k++) total += enc(&ims[k], cfg[c].level, cfg[c].filters, cfg[c].strategy); }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%-20s %6.2f ms/img  %7.0f B/img\n", cfg[c].name, ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / 5 / n, (double)total / n);
  }
}
