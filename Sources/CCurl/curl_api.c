/*
 * Loading libcurl at run time: bound once (cs_bind), every function the client calls,
 * then the library initialised. Loading lazily keeps libcurl and its
 * TLS stack out of processes that never fetch.
 */
#define _GNU_SOURCE
#include "curl_api.h"

#include <CSystem.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* libcurl 7.85 brought CURLOPT_PROTOCOLS_STR; 7.80 CURLOPT_PREREQFUNCTION. */
#define CC_MINIMUM_VERSION 0x075500

static cc_api api;
static const cc_api *loaded;
static char load_error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load_once(void) {
  const cs_symbol symbols[] = {
      CS_SYMBOL(api, global_init, "curl_global_init")
      CS_SYMBOL(api, version_info, "curl_version_info")
      CS_SYMBOL(api, multi_init, "curl_multi_init")
      CS_SYMBOL(api, multi_setopt, "curl_multi_setopt")
      CS_SYMBOL(api, multi_add_handle, "curl_multi_add_handle")
      CS_SYMBOL(api, multi_remove_handle, "curl_multi_remove_handle")
      CS_SYMBOL(api, multi_perform, "curl_multi_perform")
      CS_SYMBOL(api, multi_poll, "curl_multi_poll")
      CS_SYMBOL(api, multi_wakeup, "curl_multi_wakeup")
      CS_SYMBOL(api, multi_info_read, "curl_multi_info_read")
      CS_SYMBOL(api, multi_timeout, "curl_multi_timeout")
      CS_SYMBOL(api, multi_cleanup, "curl_multi_cleanup")
      CS_SYMBOL(api, easy_init, "curl_easy_init")
      CS_SYMBOL(api, easy_setopt, "curl_easy_setopt")
      CS_SYMBOL(api, easy_getinfo, "curl_easy_getinfo")
      CS_SYMBOL(api, easy_cleanup, "curl_easy_cleanup")
      CS_SYMBOL(api, easy_strerror, "curl_easy_strerror")
      CS_SYMBOL(api, slist_append, "curl_slist_append")
      CS_SYMBOL(api, slist_free_all, "curl_slist_free_all")
  };
  if (CS_BIND_MAJOR("curl", 4, symbols, NULL, load_error) != 0)
    return;
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
