/* libwebpdemux, for CImageCodecs. */
#include <webp/demux.h>
