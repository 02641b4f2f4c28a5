/* libjpeg-turbo, for CImageCodecs: its C sources include the header themselves. */
#include <stdio.h>
#include <jpeglib.h>
