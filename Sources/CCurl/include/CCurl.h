/*
 * CCurl: the origin fetcher's HTTP transport, over libcurl.
 *
 * libcurl is loaded on first use (dlopen of libcurl.so.4), not linked: a
 * program that never fetches over HTTP, such as the one-shot CLI, never maps
 * libcurl or the TLS and Kerberos libraries behind it (measured: 6.5 MiB of
 * RSS before any transfer). This header does not include curl.h.
 *
 * One client is one libcurl multi handle driven by one thread of its own.
 * Every handler of a transfer runs on that thread, one at a time, and
 * `done` runs exactly once per started transfer, last.
 */
#ifndef CCURL_H
#define CCURL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** How a transfer ended. */
typedef enum cc_status {
  CC_OK = 0,
  /** cc_cancel was called. */
  CC_CANCELLED = 1,
  /** A head or body handler asked to stop. */
  CC_STOPPED = 2,
  /** No complete response head within head_timeout_ms. */
  CC_HEAD_TIMEOUT = 3,
  /** The transfer did not end within total_timeout_ms. */
  CC_TIMEOUT = 4,
  /** Every address libcurl was about to connect to was refused. */
  CC_ADDRESS_REFUSED = 5,
  /** Connecting failed (refused, unreachable). */
  CC_CONNECT_FAILED = 6,
  /** The host name could not be resolved. */
  CC_RESOLVE_FAILED = 7,
  /** TLS handshake or certificate verification failed. */
  CC_TLS_FAILED = 8,
  /** The connection broke: reset, closed early, nothing received. */
  CC_RESET = 9,
  /** The declared body length is over max_body_bytes. */
  CC_TOO_LARGE = 10,
  /** The response head is over the head limit. */
  CC_HEAD_TOO_LARGE = 11,
  /** The response broke the protocol. */
  CC_PROTOCOL = 12,
  /** libcurl could not be loaded, or is too old. */
  CC_UNAVAILABLE = 13,
  /** Anything else. */
  CC_FAILED = 14
} cc_status;

/** Settings of a client, fixed for its lifetime. */
typedef struct cc_options {
  /** Connections to one host:port at once (0: libcurl's default, none). */
  long connections_per_host;
  /** Idle connections kept for reuse, over all hosts. */
  long connection_cache;
  /** SO_RCVBUF of every origin socket in bytes (0: the kernel's). A small
   * window bounds what an origin can push before a cancel lands. */
  long receive_buffer;
  /** Seconds an idle connection is kept for reuse. */
  long idle_seconds;
  /** CA bundle file and directory; NULL for the system default. */
  const char *ca_file;
  const char *ca_path;
  /** The User-Agent sent with every request. */
  const char *user_agent;
} cc_options;

/** One request. Strings are copied by cc_start. */
typedef struct cc_request {
  /** http or https URL without user info; libcurl never follows redirects. */
  const char *url;
  /** "Name: value" lines. */
  const char *const *headers;
  size_t header_count;
  /** "+HOST:PORT:ADDR[,ADDR...]" so libcurl connects only to addresses the
   * caller checked and resolves nothing itself; NULL for an IP literal. */
  const char *resolve;
  uint32_t head_timeout_ms;
  uint32_t total_timeout_ms;
  /** Declared lengths over this fail with CC_TOO_LARGE before the body. */
  int64_t max_body_bytes;
} cc_request;

/** Callbacks of one transfer, all on the client's thread. */
typedef struct cc_handlers {
  void *context;
  /** Whether the transfer may connect to this address: family 4 (4 bytes)
   * or 6 (16 bytes), network order. Asked for every socket libcurl opens
   * and again before each request on a reused connection. */
  int (*allow_address)(void *context, int family, const uint8_t *address,
                       uint16_t port);
  /** The final (non-1xx) response head: the status line and header lines,
   * CRLF-separated, as received. Return non-zero to stop (CC_STOPPED). */
  int (*head)(void *context, const char *text, size_t length);
  /** Body bytes, after content framing (chunked) and never decompressed.
   * Return non-zero to stop (CC_STOPPED). */
  int (*body)(void *context, const uint8_t *bytes, size_t length);
  /** The end, exactly once. `message` is libcurl's explanation (may be
   * empty); it and the context must not be used after returning. */
  void (*done)(void *context, cc_status status, const char *message);
} cc_handlers;

/** An origin fetch client. */
typedef struct cc_client cc_client;

/**
 * Loads libcurl if needed and starts a client thread. Returns NULL and an
 * explanation in `error` when libcurl is missing or cannot be set up.
 */
cc_client *cc_client_create(const cc_options *options, char *error,
                            size_t error_size);

/**
 * Queues a transfer; returns its id, or 0 if it could not be queued (then
 * no handler is ever called).
 */
uint64_t cc_start(cc_client *client, const cc_request *request,
                  const cc_handlers *handlers);

/**
 * Asks the client to end transfer `id`: its easy handle is removed and its
 * connection closed on the client's thread, then `done` reports
 * CC_CANCELLED. Unknown or finished ids are ignored.
 */
void cc_cancel(cc_client *client, uint64_t id);

/** Transfers queued or running. */
size_t cc_active(cc_client *client);

/** Connections opened so far (sockets libcurl was allowed to create). */
uint64_t cc_connections_opened(cc_client *client);

/** Ends every transfer (done reports CC_CANCELLED), stops the thread and
 * frees the client. */
void cc_client_destroy(cc_client *client);

#ifdef __cplusplus
}
#endif

#endif /* CCURL_H */
