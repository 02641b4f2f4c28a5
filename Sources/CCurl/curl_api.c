/*
 * Loading libcurl at run time: dlopen once, resolve every function the
 * client calls, initialise the library. Loading lazily keeps libcurl and its
 * TLS stack out of processes that never fetch.
 */
#define _GNU_SOURCE
#include "curl_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* libcurl 7.85 brought CURLOPT_PROTOCOLS_STR; 7.80 CURLOPT_PREREQFUNCTION. */
#define CC_MINIMUM_VERSION 0x075500

static cc_api api;
static const cc_api *loaded;
static char load_error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int resolve_all(void *library) {
#define CC_RESOLVE(field, name)                                                \
  do {                                                                         \
    *(void **)(&api.field) = dlsym(library, name);                             \
    if (!api.field) {                                                          \
      snprintf(load_error, sizeof(load_error), "libcurl lacks %s", name);      \
      return 0;                                                                \
    }                                                                          \
  } while (0)
  CC_RESOLVE(global_init, "curl_global_init");
  CC_RESOLVE(version_info, "curl_version_info");
  CC_RESOLVE(multi_init, "curl_multi_init");
  CC_RESOLVE(multi_setopt, "curl_multi_setopt");
  CC_RESOLVE(multi_add_handle, "curl_multi_add_handle");
  CC_RESOLVE(multi_remove_handle, "curl_multi_remove_handle");
  CC_RESOLVE(multi_perform, "curl_multi_perform");
  CC_RESOLVE(multi_poll, "curl_multi_poll");
  CC_RESOLVE(multi_wakeup, "curl_multi_wakeup");
  CC_RESOLVE(multi_info_read, "curl_multi_info_read");
  CC_RESOLVE(multi_timeout, "curl_multi_timeout");
  CC_RESOLVE(multi_cleanup, "curl_multi_cleanup");
  CC_RESOLVE(easy_init, "curl_easy_init");
  CC_RESOLVE(easy_setopt, "curl_easy_setopt");
  CC_RESOLVE(easy_getinfo, "curl_easy_getinfo");
  CC_RESOLVE(easy_cleanup, "curl_easy_cleanup");
  CC_RESOLVE(easy_strerror, "curl_easy_strerror");
  CC_RESOLVE(slist_append, "curl_slist_append");
  CC_RESOLVE(slist_free_all, "curl_slist_free_all");
#undef CC_RESOLVE
  return 1;
}

static void load_once(void) {
  void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    snprintf(load_error, sizeof(load_error), "cannot load libcurl.so.4: %s",
             dlerror());
    return;
  }
  if (!resolve_all(library)) return;
  curl_version_info_data *version = api.version_info(CURLVERSION_NOW);
  if (!version || version->version_num < CC_MINIMUM_VERSION) {
    snprintf(load_error, sizeof(load_error),
             "libcurl %s is too old (7.85 or later is needed)",
             version ? version->version : "?");
    return;
  }
  if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    snprintf(load_error, sizeof(load_error), "curl_global_init failed");
    return;
  }
  loaded = &api;
}

const cc_api *cc_api_load(char *error, size_t error_size) {
  pthread_once(&once, load_once);
  if (!loaded && error && error_size) snprintf(error, error_size, "%s", load_error);
  return loaded;
}
