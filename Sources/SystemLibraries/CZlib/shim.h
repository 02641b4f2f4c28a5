/* zlib, for CImageCodecs (png_fast.c). */
#include <zlib.h>
