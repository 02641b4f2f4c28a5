/* libheif, for CImageCodecs. */
#include <libheif/heif.h>
