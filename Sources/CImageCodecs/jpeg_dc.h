/*
 * The DC-only path for progressive JPEGs, shared by jpeg_decode.c and jpeg_dc_scans.c.
 * Not visible to Swift (it needs jpeglib.h).
 */
#ifndef CIMAGECODECS_JPEG_DC_H
#define CIMAGECODECS_JPEG_DC_H

#include "internal.h"

#include <jpeglib.h>

/*
 * Whether a progressive file whose header libjpeg has read (up to its first SOS) can be
 * decoded at 1/8 from its DC coefficients alone: Huffman coding, grey, YCbCr or RGB, and
 * sampling factors that divide the largest ones.
 */
int ic_jpeg_dc_applies(j_decompress_ptr cinfo);

/* Bytes the DC-only path allocates for an image: one coefficient per block, one row. */
uint64_t ic_jpeg_dc_memory(j_decompress_ptr cinfo);

/*
 * Reads every scan after the header, keeps the DC coefficients of the DC scans (first and
 * refinement), steps over the AC scans without decoding them, and streams the 1/8 image
 * (one pixel per 8x8 block of the largest sampling) into the sink as RGB rows.
 *
 * Errors go through libjpeg's error manager (ERREXIT, WARNMS), so the caller's setjmp
 * catches them; memory comes from libjpeg's image pool. The progress monitor is called
 * for every scan and every row of blocks, so cancellation, the deadline and the scan
 * limits apply as in libjpeg's own decode. With first_dc_only (a preview), it stops at the
 * first marker after every component's first DC scan: the bytes may end there.
 */
ic_status ic_jpeg_dc_run(j_decompress_ptr cinfo, const ic_control *control, ic_sink *sink,
                         ic_result *result, int first_dc_only);

#endif /* CIMAGECODECS_JPEG_DC_H */
