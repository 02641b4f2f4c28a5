/*
 * A sequential JPEG with restart markers, decoded in bands on several threads
 * (jpeg_bands.c). Not visible to Swift (it needs jpeglib.h).
 */
#ifndef CIMAGECODECS_JPEG_BANDS_H
#define CIMAGECODECS_JPEG_BANDS_H

#include "internal.h"

#include <jpeglib.h>

/* skip_input_data for a source manager whose fill_input_buffer never suspends: skips
 * `count` bytes, refilling as often as needed (the file's own source and the bands'). */
void ic_jpeg_skip_input(j_decompress_ptr cinfo, long count);

/* Installs `src` as cinfo's source manager with nothing buffered yet: `fill` refills it (and
 * never suspends), ic_jpeg_skip_input skips, `resync` meets a restart marker out of order. */
void ic_jpeg_use_source(j_decompress_ptr cinfo, struct jpeg_source_mgr *src,
                        boolean (*fill)(j_decompress_ptr),
                        boolean (*resync)(j_decompress_ptr, int));

/* The most bands (and threads) one image is split into. */
#define IC_JPEG_MAX_BANDS 16

/*
 * Whether a file whose header libjpeg has read may be split into bands at `scale_num`/8:
 * one Huffman-coded sequential scan of every component, a restart interval, and no component
 * upsampled at that scale (so a band's edge rows are the one-piece decode's). Sets the scale
 * on cinfo to find out.
 */
int ic_jpeg_bands_apply(j_decompress_ptr cinfo, unsigned scale_num);

/* Bytes the bands hold beyond one libjpeg decode, for `threads` of them (0: every core),
 * when they may apply: the decoded image at the scale, and each further band's decoder, of
 * `one_decode` bytes. Calls nothing in libjpeg. */
uint64_t ic_jpeg_bands_memory(j_decompress_ptr cinfo, unsigned scale_num, unsigned threads,
                              uint64_t one_decode);

/*
 * Decodes the file in `threads` bands at once (0: as many as idle cores), and pushes every
 * row into the sink in order. Returns 1 when it did (or was stopped by cancellation or the
 * deadline), with *status set; 0 when it did not push a row and the file is to be decoded in
 * one piece: the bands do not apply, the cores are busy, the source is not in memory or a
 * regular file, a marker other than a restart comes before EOI, or a band failed or warned
 * (damage is then reported by the one-piece decode, exactly as without bands).
 * `out_color_space` is what the caller set for the one-piece decode.
 */
int ic_jpeg_bands_run(j_decompress_ptr cinfo, ic_stream *stream, unsigned scale_num,
                      unsigned threads, const ic_control *control,
                      ic_sink *sink, ic_result *result, ic_status *status);

#endif /* CIMAGECODECS_JPEG_BANDS_H */
