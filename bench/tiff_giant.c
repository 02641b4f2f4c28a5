/*
 * Giant TIFFs for the memory benchmarks (bench/tiff_memory.sh), written in seconds: every
 * tile or strip of a level is the same Deflate-compressed block (squares), written raw, so
 * a 100,000 x 100,000 pyramid costs what its file does, not 10 gigapixels of compression.
 *
 *   tiff_giant OUT WIDTH HEIGHT tiled|strips|one-strip [LEVELS]
 *
 * tiled: 256x256 tiles, then LEVELS reduced-resolution levels (each half the last, flagged
 * FILETYPE_REDUCEDIMAGE), as libvips writes a pyramid. strips: 16-row strips. one-strip: every
 * row in one strip (its decoded size far over any strip buffer).
 *
 * Build: cc -O2 bench/tiff_giant.c -o tiff_giant -ltiff -lz
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <zlib.h>

/* A block of w x h RGB pixels (squares of 64 in four colours), compressed with zlib
 * (TIFF's Deflate): a few hundred bytes, so a 10-gigapixel level is a small file. */
static unsigned char *block(uint32_t w, uint32_t h, uLongf *size) {
  uLong raw = (uLong)w * h * 3;
  unsigned char *pixels = malloc(raw);
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      unsigned char *p = pixels + ((size_t)y * w + x) * 3;
      unsigned square = (x / 64 + 2 * (y / 64)) % 4;
      p[0] = (unsigned char)(square * 60);
      p[1] = (unsigned char)(200 - square * 40);
      p[2] = 120;
    }
  *size = compressBound(raw);
  unsigned char *out = malloc(*size);
  compress2(out, size, pixels, raw, 6);
  free(pixels);
  return out;
}

static void common(TIFF *tif, uint32_t w, uint32_t h, int reduced) {
  TIFFSetField(tif, TIFFTAG_SUBFILETYPE, reduced ? FILETYPE_REDUCEDIMAGE : 0);
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
}

static int tiled_level(TIFF *tif, uint32_t w, uint32_t h, int reduced) {
  common(tif, w, h, reduced);
  TIFFSetField(tif, TIFFTAG_TILEWIDTH, 256);
  TIFFSetField(tif, TIFFTAG_TILELENGTH, 256);
  uLongf size;
  unsigned char *data = block(256, 256, &size);
  uint32_t tiles = TIFFNumberOfTiles(tif);
  for (uint32_t t = 0; t < tiles; t++)
    if (TIFFWriteRawTile(tif, t, data, (tmsize_t)size) < 0) return 0;
  free(data);
  return TIFFWriteDirectory(tif);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: tiff_giant OUT WIDTH HEIGHT tiled|strips|one-strip [LEVELS]\n");
    return 2;
  }
  uint32_t w = (uint32_t)strtoul(argv[2], NULL, 10), h = (uint32_t)strtoul(argv[3], NULL, 10);
  const char *mode = argv[4];
  int levels = argc > 5 ? atoi(argv[5]) : 0;
  TIFF *tif = TIFFOpen(argv[1], w * (uint64_t)h > 1000000000u ? "w8" : "w");
  if (!tif) return 1;
  if (strcmp(mode, "tiled") == 0) {
    if (!tiled_level(tif, w, h, 0)) return 1;
    for (int i = 0; i < levels; i++) {
      w = (w + 1) / 2, h = (h + 1) / 2;
      if (!tiled_level(tif, w, h, 1)) return 1;
    }
  } else {
    uint32_t rows = strcmp(mode, "one-strip") == 0 ? h : 16;
    common(tif, w, h, 0);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, rows);
    uLongf size;
    if (rows == h) {
      /* One strip of every row: compressed a band at a time into one zlib stream. */
      z_stream z = {0};
      deflateInit(&z, 6);
      size_t capacity = 1 << 20, used = 0;
      unsigned char *out = malloc(capacity), *row = malloc((size_t)w * 3);
      for (uint32_t y = 0; y < h; y++) {
        for (uint32_t x = 0; x < w; x++) {
          row[x * 3] = (unsigned char)(x * 255 / w);
          row[x * 3 + 1] = (unsigned char)((uint64_t)y * 255 / h);
          row[x * 3 + 2] = 120;
        }
        z.next_in = row;
        z.avail_in = w * 3;
        do {
          if (capacity - used < 65536) out = realloc(out, capacity *= 2);
          z.next_out = out + used;
          z.avail_out = (uInt)(capacity - used);
          deflate(&z, y + 1 == h ? Z_FINISH : Z_NO_FLUSH);
          used = capacity - z.avail_out;
        } while (z.avail_in || (y + 1 == h && z.avail_out == 0));
      }
      deflateEnd(&z);
      if (TIFFWriteRawStrip(tif, 0, out, (tmsize_t)used) < 0) return 1;
    } else {
      unsigned char *data = block(w, rows, &size);
      uint32_t strips = TIFFNumberOfStrips(tif);
      for (uint32_t s = 0; s < strips; s++) {
        /* The last strip holds fewer rows: its own block. */
        if (s + 1 == strips && h % rows) {
          uLongf last_size;
          unsigned char *last = block(w, h % rows, &last_size);
          if (TIFFWriteRawStrip(tif, s, last, (tmsize_t)last_size) < 0) return 1;
          free(last);
        } else if (TIFFWriteRawStrip(tif, s, data, (tmsize_t)size) < 0) {
          return 1;
        }
      }
      free(data);
    }
    if (!TIFFWriteDirectory(tif)) return 1;
  }
  TIFFClose(tif);
  return 0;
}
