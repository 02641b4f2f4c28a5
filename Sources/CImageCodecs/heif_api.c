/*
 * Loading libheif at run time (heif_api.h): bound once (cs_bind), every function thumbd calls.
 */
#define _GNU_SOURCE
#include "heif_api.h"

#include "internal.h"

#include <CSystem.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

ic_heif_api ic_libheif;

static int loaded;
static char load_error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* libheif's soname carries its major version; the headers must describe that major. */
#define IC_HEIF_MAJOR 1
_Static_assert(LIBHEIF_NUMERIC_VERSION >> 24 == IC_HEIF_MAJOR, "libheif's major version");

static void load_once(void) {
  const char *soname = CS_SONAME("heif", IC_HEIF_MAJOR);
  ic_heif_api api;
#define IC_HEIF_SYMBOL(name) CS_SYMBOL(api, name, "heif_" #name)
  const cs_symbol symbols[] = {IC_HEIF_FUNCTIONS(IC_HEIF_SYMBOL)};
#undef IC_HEIF_SYMBOL
  void *library = NULL;
  if (CS_BIND(soname, CS_PACKAGE("heif", IC_HEIF_MAJOR), symbols, &library, load_error) != 0)
    return;
  /* The functions this build's headers declare were found; a minor version older than the
   * headers' could still differ in what it does with them. */
  int (*major)(void) = (int (*)(void))dlsym(library, "heif_get_version_number_major");
  if (!major || major() != IC_HEIF_MAJOR) {
    snprintf(load_error, sizeof(load_error), "%s is not libheif %d", soname, IC_HEIF_MAJOR);
    return;
  }
  ic_libheif = api;
  loaded = 1;
}

int ic_heif_load(char *error, size_t error_size) {
  pthread_once(&once, load_once);
  if (loaded) return 0;
  if (error && error_size) snprintf(error, error_size, "%s", load_error);
  return -1;
}
