/* libwebpmux, for CImageCodecs. */
#include <webp/mux.h>
