/* giflib, for CImageCodecs. */
#include <gif_lib.h>
