/* libtiff, for CImageCodecs. */
#include <tiffio.h>
