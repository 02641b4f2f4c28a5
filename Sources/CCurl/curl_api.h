/*
 * The libcurl functions the client uses, resolved from the shared library at
 * run time (curl_api.c). curl.h is included for types and constants only:
 * every call goes through this table, so nothing links against libcurl.
 */
#ifndef CCURL_API_H
#define CCURL_API_H

#include <curl/curl.h>

typedef struct cc_api {
  CURLcode (*global_init)(long flags);
  curl_version_info_data *(*version_info)(CURLversion which);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_setopt)(CURLM *multi, CURLMoption option, ...);
  CURLMcode (*multi_add_handle)(CURLM *multi, CURL *easy);
  CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *easy);
  CURLMcode (*multi_perform)(CURLM *multi, int *running);
  CURLMcode (*multi_poll)(CURLM *multi, struct curl_waitfd extra[],
                          unsigned int extra_count, int timeout_ms, int *ready);
  CURLMcode (*multi_wakeup)(CURLM *multi);
  CURLMsg *(*multi_info_read)(CURLM *multi, int *queued);
  CURLMcode (*multi_timeout)(CURLM *multi, long *timeout_ms);
  CURLMcode (*multi_cleanup)(CURLM *multi);
  CURL *(*easy_init)(void);
  CURLcode (*easy_setopt)(CURL *easy, CURLoption option, ...);
  CURLcode (*easy_getinfo)(CURL *easy, CURLINFO info, ...);
  void (*easy_cleanup)(CURL *easy);
  const char *(*easy_strerror)(CURLcode code);
  struct curl_slist *(*slist_append)(struct curl_slist *list, const char *text);
  void (*slist_free_all)(struct curl_slist *list);
} cc_api;

/*
 * The table, loaded once per process; NULL with a reason in `error` when
 * libcurl is missing or older than the 7.85 features the client needs.
 */
const cc_api *cc_api_load(char *error, size_t error_size);

#endif /* CCURL_API_H */
