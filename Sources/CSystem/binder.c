/*
 * Optional libraries, opened with dlopen and bound by one function (cs_bind): the libraries
 * thumbd does not link, so that processes which never use them do not map them.
 */
#define _GNU_SOURCE
#include "CSystem.h"

#include <dlfcn.h>
#include <stdio.h>

int cs_bind(const char *soname, const char *package, const cs_symbol *symbols, size_t count,
            void **handle, char *error, size_t error_size) {
  void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    if (error && error_size)
      snprintf(error, error_size, "cannot load %s (install %s): %s", soname, package, dlerror());
    return -1;
  }
  for (size_t i = 0; i < count; i++) {
    void *address = dlsym(library, symbols[i].name);
    if (!address) {
      if (error && error_size)
        snprintf(error, error_size, "%s lacks %s (install %s: a newer one)", soname,
                 symbols[i].name, package);
      return -1;
    }
    *symbols[i].address = address;
  }
  if (handle) *handle = library;
  return 0;
}

const char *cs_library_of(const char *symbol) {
  void *address = dlsym(RTLD_DEFAULT, symbol);
  Dl_info info;
  if (!address || dladdr(address, &info) == 0) return NULL;
  return info.dli_fname;
}
