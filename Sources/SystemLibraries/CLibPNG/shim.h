/* libpng, for CImageCodecs. */
#include <png.h>
