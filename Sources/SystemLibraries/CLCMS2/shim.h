/* lcms2, for CImageCodecs. */
#include <lcms2.h>
