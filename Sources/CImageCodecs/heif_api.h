/*
 * libheif at run time: opened with dlopen on the first HEIC or AVIF decode or AVIF encode,
 * never linked. libheif brings its codecs (x265, libde265, dav1d, libaom, and libstdc++'s
 * share of them): linked, every thumbd process mapped and relocated them at start, about
 * 2 MiB of resident pages and 4 ms, though most never see a HEIF file (the desktop's
 * `.thumbnailer` runs one process per file).
 *
 * Each function is named once, in IC_HEIF_FUNCTIONS; its type comes from libheif's own
 * declaration. Call them as ic_libheif.NAME(...) after ic_heif_load has succeeded; libheif's
 * types, enums and constants are used from its headers as before.
 */
#ifndef CIMAGECODECS_HEIF_API_H
#define CIMAGECODECS_HEIF_API_H

#include <libheif/heif.h>
#include <libheif/heif_plugin.h>
#include <stddef.h>

/* Every libheif function thumbd calls, without its heif_ prefix. */
#define IC_HEIF_FUNCTIONS(X) \
  X(context_alloc) \
  X(context_encode_image) \
  X(context_free) \
  X(context_get_encoder_for_format) \
  X(context_get_primary_image_ID) \
  X(context_get_primary_image_handle) \
  X(context_read_from_memory_without_copy) \
  X(context_set_max_decoding_threads) \
  X(context_set_maximum_image_size_limit) \
  X(context_write) \
  X(decode_image) \
  X(decoding_options_alloc) \
  X(decoding_options_free) \
  X(encoder_release) \
  X(encoder_set_lossy_quality) \
  X(encoder_set_parameter_integer) \
  X(encoding_options_alloc) \
  X(encoding_options_free) \
  X(image_add_plane) \
  X(image_create) \
  X(image_get_bits_per_pixel_range) \
  X(image_get_height) \
  X(image_get_plane) \
  X(image_get_plane_readonly) \
  X(image_get_width) \
  X(image_handle_get_height) \
  X(image_handle_get_ispe_height) \
  X(image_handle_get_ispe_width) \
  X(image_handle_get_list_of_thumbnail_IDs) \
  X(image_handle_get_luma_bits_per_pixel) \
  X(image_handle_get_nclx_color_profile) \
  X(image_handle_get_number_of_thumbnails) \
  X(image_handle_get_raw_color_profile) \
  X(image_handle_get_raw_color_profile_size) \
  X(image_handle_get_thumbnail) \
  X(image_handle_get_width) \
  X(image_handle_has_alpha_channel) \
  X(image_handle_release) \
  X(image_is_premultiplied_alpha) \
  X(image_release) \
  X(image_set_nclx_color_profile) \
  X(image_set_raw_color_profile) \
  X(nclx_color_profile_alloc) \
  X(nclx_color_profile_free) \
  X(nclx_color_profile_set_color_primaries) \
  X(nclx_color_profile_set_matrix_coefficients) \
  X(nclx_color_profile_set_transfer_characteristics) \
  X(register_decoder)


typedef struct ic_heif_api {
#define IC_HEIF_FIELD(name) __typeof__(heif_##name) *name;
  IC_HEIF_FUNCTIONS(IC_HEIF_FIELD)
#undef IC_HEIF_FIELD
} ic_heif_api;

/* The functions, filled by the first successful ic_heif_load and never changed after. */
extern ic_heif_api ic_libheif;

/* Loads libheif once per process (thread-safe). 0 when it is loaded; else -1 with the reason
 * in error (the library is missing, of another major version, or lacks a function). */
int ic_heif_load(char *error, size_t error_size);

#endif
