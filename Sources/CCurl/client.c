/*
 * The fetch client: one libcurl multi handle, one thread driving it.
 *
 * cc_start and cc_cancel only queue work under the lock and wake the
 * thread; the thread adds and removes easy handles, runs libcurl, checks
 * our own deadlines and calls every handler. The lock is never held while a
 * handler runs, so handlers may start and cancel transfers themselves.
 *
 * Rules kept here, whatever the caller does:
 * - libcurl resolves nothing the caller did not hand it (CURLOPT_RESOLVE);
 *   every socket it opens and every reused connection is checked with
 *   allow_address first, so a second DNS answer can never be connected to;
 * - http and https only, redirects never followed, no proxy from the
 *   environment, no user name from the URL, no .netrc, no cookies;
 * - bodies are never decompressed, so the caller counts wire bytes, and a
 *   handler's "stop" aborts the transfer in the same callback;
 * - the head deadline and the total deadline are checked on every turn of
 *   the loop, whatever libcurl is waiting for.
 */
#define _GNU_SOURCE
#include "CCurl.h"
#include "curl_api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Largest response head accepted (status line and every header line). */
#define CC_HEAD_LIMIT (64 * 1024)
/* Longest sleep of the loop: deadlines are checked at least this often. */
#define CC_MAX_POLL_MS 250

typedef struct cc_transfer cc_transfer;
struct cc_transfer {
  uint64_t id;
  cc_client *client;
  cc_transfer *next;
  CURL *easy;
  struct curl_slist *headers;
  struct curl_slist *resolve;
  cc_handlers handlers;
  uint64_t head_deadline;
  uint64_t total_deadline;
  int added;
  int head_done;
  int stopped;
  int head_too_large;
  int protocol_error;
  int prereq_refused;
  uint32_t refused;
  uint32_t allowed;
  char *head;
  size_t head_length;
  size_t head_capacity;
  char error[CURL_ERROR_SIZE];
};

struct cc_client {
  const cc_api *api;
  CURLM *multi;
  pthread_t thread;
  pthread_mutex_t lock;
  /* Under the lock: */
  cc_transfer *incoming;
  cc_transfer **incoming_tail;
  uint64_t *cancels;
  size_t cancel_count;
  size_t cancel_capacity;
  int stopping;
  /* Set when the last owner let go on the client thread itself (inside a
   * handler): the thread frees the client as it exits. */
  int free_on_exit;
  uint64_t next_id;
  size_t active;
  /* The thread's own: */
  cc_transfer *running;
  /* Atomic: */
  uint64_t connections;
  /* Fixed after create: */
  long receive_buffer;
  long idle_seconds;
  char *ca_file;
  char *ca_path;
  char *user_agent;
};

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static char *copy(const char *text) { return text ? strdup(text) : NULL; }

/* ---- callbacks from libcurl (on the client thread) ---------------------- */

static int address_allowed(cc_transfer *t, const struct sockaddr *address) {
  if (address->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)address;
    return t->handlers.allow_address(t->handlers.context, 4,
                                     (const uint8_t *)&in->sin_addr,
                                     ntohs(in->sin_port));
  }
  if (address->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)address;
    return t->handlers.allow_address(t->handlers.context, 6,
                                     (const uint8_t *)&in6->sin6_addr,
                                     ntohs(in6->sin6_port));
  }
  return 0;
}

static curl_socket_t on_open_socket(void *user, curlsocktype purpose,
                                    struct curl_sockaddr *address) {
  cc_transfer *t = user;
  if (purpose != CURLSOCKTYPE_IPCXN || !address_allowed(t, &address->addr)) {
    t->refused++;
    return CURL_SOCKET_BAD;
  }
  int fd = socket(address->family, address->socktype | SOCK_CLOEXEC,
                  address->protocol);
  if (fd < 0) return CURL_SOCKET_BAD;
  if (t->client->receive_buffer > 0) {
    int size = (int)t->client->receive_buffer;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }
  t->allowed++;
  __atomic_add_fetch(&t->client->connections, 1, __ATOMIC_RELAXED);
  return fd;
}

/* Before every request, reused connections included. */
static int on_prerequest(void *user, char *primary_ip, char *local_ip,
                         int primary_port, int local_port) {
  (void)local_ip;
  (void)local_port;
  cc_transfer *t = user;
  struct sockaddr_storage storage;
  memset(&storage, 0, sizeof(storage));
  struct sockaddr_in *in = (struct sockaddr_in *)&storage;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&storage;
  if (inet_pton(AF_INET, primary_ip, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)primary_port);
  } else if (inet_pton(AF_INET6, primary_ip, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)primary_port);
  }
  if (address_allowed(t, (const struct sockaddr *)&storage))
    return CURL_PREREQFUNC_OK;
  t->refused++;
  t->prereq_refused = 1;
  return CURL_PREREQFUNC_ABORT;
}

static size_t on_header(char *data, size_t size, size_t count, void *user) {
  cc_transfer *t = user;
  size_t length = size * count;
  if (t->head_done) return length; /* trailers: not used */
  /* A status line starts a new head: after a 1xx, the final one follows. */
  if (length >= 5 && memcmp(data, "HTTP/", 5) == 0) t->head_length = 0;
  if (t->head_length + length > CC_HEAD_LIMIT) {
    t->head_too_large = 1;
    return 0;
  }
  if (t->head_length + length > t->head_capacity) {
    size_t capacity = t->head_capacity ? t->head_capacity * 2 : 2048;
    while (capacity < t->head_length + length) capacity *= 2;
    char *grown = realloc(t->head, capacity);
    if (!grown) return 0;
    t->head = grown;
    t->head_capacity = capacity;
  }
  memcpy(t->head + t->head_length, data, length);
  t->head_length += length;
  int blank = (length == 2 && data[0] == '\r' && data[1] == '\n') ||
              (length == 1 && data[0] == '\n');
  if (!blank) return length;
  long code = 0;
  t->client->api->easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 100 && code < 200) {
    t->head_length = 0;
    return length;
  }
  t->head_done = 1;
  if (t->handlers.head(t->handlers.context, t->head, t->head_length)) {
    t->stopped = 1;
    return 0;
  }
  return length;
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
  cc_transfer *t = user;
  size_t length = size * count;
  if (!t->head_done) {
    t->protocol_error = 1;
    return 0;
  }
  if (length && t->handlers.body(t->handlers.context, (const uint8_t *)data,
                                 length)) {
    t->stopped = 1;
    return 0;
  }
  return length;
}

/* ---- setting up and ending transfers ----------------------------------- */

static void transfer_free(cc_transfer *t) {
  const cc_api *api = t->client->api;
  if (t->easy) api->easy_cleanup(t->easy);
  api->slist_free_all(t->headers);
  api->slist_free_all(t->resolve);
  free(t->head);
  free(t);
}

static cc_status map_result(cc_transfer *t, CURLcode code) {
  if (t->head_too_large) return CC_HEAD_TOO_LARGE;
  if (t->protocol_error) return CC_PROTOCOL;
  if (t->stopped) return CC_STOPPED;
  switch (code) {
  case CURLE_OK:
    return CC_OK;
  case CURLE_ABORTED_BY_CALLBACK:
    return t->prereq_refused ? CC_ADDRESS_REFUSED : CC_FAILED;
  case CURLE_COULDNT_CONNECT:
    return t->refused > 0 && t->allowed == 0 ? CC_ADDRESS_REFUSED
                                             : CC_CONNECT_FAILED;
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
    return CC_RESOLVE_FAILED;
  case CURLE_OPERATION_TIMEDOUT:
    return t->head_done ? CC_TIMEOUT : CC_HEAD_TIMEOUT;
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_USE_SSL_FAILED:
    return CC_TLS_FAILED;
  case CURLE_RECV_ERROR:
  case CURLE_SEND_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_PARTIAL_FILE:
    return CC_RESET;
  case CURLE_FILESIZE_EXCEEDED:
    return CC_TOO_LARGE;
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
  case CURLE_BAD_CONTENT_ENCODING:
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_URL_MALFORMAT:
    return CC_PROTOCOL;
  default:
    return CC_FAILED;
  }
}

/* Removes t from the running list, tells its owner and frees it. */
static void finish(cc_client *c, cc_transfer *t, cc_status status,
                   const char *message) {
  for (cc_transfer **link = &c->running; *link; link = &(*link)->next) {
    if (*link == t) {
      *link = t->next;
      break;
    }
  }
  /* Removing a handle mid-transfer closes its connection: the origin stops
   * being read at once instead of being drained. */
  if (t->added) c->api->multi_remove_handle(c->multi, t->easy);
  t->handlers.done(t->handlers.context, status, message ? message : "");
  transfer_free(t);
  pthread_mutex_lock(&c->lock);
  c->active--;
  pthread_mutex_unlock(&c->lock);
}

static int set_up(cc_client *c, cc_transfer *t, const cc_request *r) {
  const cc_api *api = c->api;
  CURL *e = t->easy;
  for (size_t i = 0; i < r->header_count; i++) {
    struct curl_slist *grown = api->slist_append(t->headers, r->headers[i]);
    if (!grown) return 0;
    t->headers = grown;
  }
  if (r->resolve) {
    t->resolve = api->slist_append(NULL, r->resolve);
    if (!t->resolve) return 0;
  }
  int ok = 1;
#define CC_SET(option, value) ok &= api->easy_setopt(e, option, value) == CURLE_OK
  CC_SET(CURLOPT_URL, r->url);
  CC_SET(CURLOPT_PROTOCOLS_STR, "http,https");
  CC_SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  CC_SET(CURLOPT_FOLLOWLOCATION, 0L);
  CC_SET(CURLOPT_NOSIGNAL, 1L);
  /* "" disables every proxy, those from the environment included. */
  CC_SET(CURLOPT_PROXY, "");
  CC_SET(CURLOPT_DISALLOW_USERNAME_IN_URL, 1L);
  CC_SET(CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
  CC_SET(CURLOPT_HTTP_CONTENT_DECODING, 0L);
  CC_SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
  /* Over TLS, ALPN says at the handshake whether the origin multiplexes (h2),
   * so waiting for it is cheap. Over plain http libcurl learns it only from a
   * response: waiting there would queue every request behind the first. */
  if (strncmp(r->url, "https:", 6) == 0) CC_SET(CURLOPT_PIPEWAIT, 1L);
  CC_SET(CURLOPT_HTTPHEADER, t->headers);
  if (t->resolve) CC_SET(CURLOPT_RESOLVE, t->resolve);
  CC_SET(CURLOPT_DNS_CACHE_TIMEOUT, 60L);
  CC_SET(CURLOPT_CONNECTTIMEOUT_MS, (long)r->head_timeout_ms);
  /* Our own deadlines decide; libcurl's is a backstop a second later. */
  CC_SET(CURLOPT_TIMEOUT_MS, (long)r->total_timeout_ms + 1000L);
  if (r->max_body_bytes > 0)
    CC_SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)r->max_body_bytes);
  CC_SET(CURLOPT_HEADERFUNCTION, on_header);
  CC_SET(CURLOPT_HEADERDATA, t);
  CC_SET(CURLOPT_WRITEFUNCTION, on_body);
  CC_SET(CURLOPT_WRITEDATA, t);
  CC_SET(CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
  CC_SET(CURLOPT_OPENSOCKETDATA, t);
  CC_SET(CURLOPT_PREREQFUNCTION, on_prerequest);
  CC_SET(CURLOPT_PREREQDATA, t);
  CC_SET(CURLOPT_ERRORBUFFER, t->error);
  CC_SET(CURLOPT_PRIVATE, t);
  CC_SET(CURLOPT_TCP_KEEPALIVE, 1L);
  if (c->idle_seconds > 0) CC_SET(CURLOPT_MAXAGE_CONN, c->idle_seconds);
  if (c->user_agent) CC_SET(CURLOPT_USERAGENT, c->user_agent);
  if (c->ca_file) CC_SET(CURLOPT_CAINFO, c->ca_file);
  if (c->ca_path) CC_SET(CURLOPT_CAPATH, c->ca_path);
#undef CC_SET
  /* Optional (7.87+): a transfer removed while libcurl resolves never waits
   * for the resolver thread. We hand libcurl every address, so it should
   * not resolve at all; this is the guard behind that. */
  api->easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
  return ok;
}

static void release_client(cc_client *c);

/* ---- the thread -------------------------------------------------------- */

static void take_queued(cc_client *c, cc_transfer **incoming, uint64_t **cancels,
                        size_t *cancel_count, int *stopping) {
  pthread_mutex_lock(&c->lock);
  *incoming = c->incoming;
  c->incoming = NULL;
  c->incoming_tail = &c->incoming;
  *cancels = c->cancels;
  *cancel_count = c->cancel_count;
  c->cancels = NULL;
  c->cancel_count = 0;
  c->cancel_capacity = 0;
  *stopping = c->stopping;
  pthread_mutex_unlock(&c->lock);
}

static void apply_queued(cc_client *c, int *stopping) {
  cc_transfer *incoming;
  uint64_t *cancels;
  size_t cancel_count;
  take_queued(c, &incoming, &cancels, &cancel_count, stopping);
  /* New transfers join the running list first, so a cancel queued right
   * after its start finds it. */
  while (incoming) {
    cc_transfer *t = incoming;
    incoming = t->next;
    t->next = c->running;
    c->running = t;
  }
  for (size_t i = 0; i < cancel_count; i++) {
    for (cc_transfer *t = c->running; t; t = t->next) {
      if (t->id == cancels[i]) {
        finish(c, t, CC_CANCELLED, "cancelled");
        break;
      }
    }
  }
  free(cancels);
  /* finish() unlinks, so a failed add restarts the walk. */
  for (int again = 1; again;) {
    again = 0;
    for (cc_transfer *t = c->running; t; t = t->next) {
      if (t->added) continue;
      if (c->api->multi_add_handle(c->multi, t->easy) == CURLM_OK) {
        t->added = 1;
      } else {
        finish(c, t, CC_FAILED, "cannot add the transfer");
        again = 1;
        break;
      }
    }
  }
}

static void collect_finished(cc_client *c) {
  CURLMsg *message;
  int left;
  while ((message = c->api->multi_info_read(c->multi, &left))) {
    if (message->msg != CURLMSG_DONE) continue;
    CURL *easy = message->easy_handle;
    CURLcode code = message->data.result;
    cc_transfer *t = NULL;
    c->api->easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t);
    if (!t) continue;
    cc_status status = map_result(t, code);
    const char *text = t->error[0] ? t->error : c->api->easy_strerror(code);
    char message_copy[CURL_ERROR_SIZE];
    snprintf(message_copy, sizeof(message_copy), "%s", status == CC_OK ? "" : text);
    finish(c, t, status, message_copy);
  }
}

/* Ends overdue transfers; returns milliseconds to the nearest deadline. */
static long check_deadlines(cc_client *c) {
  uint64_t now = now_ns();
  uint64_t nearest = UINT64_MAX;
  cc_transfer *t = c->running;
  while (t) {
    cc_transfer *next = t->next;
    if (!t->head_done && now >= t->head_deadline) {
      finish(c, t, CC_HEAD_TIMEOUT, "no response head in time");
    } else if (now >= t->total_deadline) {
      finish(c, t, CC_TIMEOUT, "transfer took too long");
    } else {
      uint64_t deadline = t->head_done ? t->total_deadline : t->head_deadline;
      if (deadline < nearest) nearest = deadline;
    }
    t = next;
  }
  if (nearest == UINT64_MAX) return CC_MAX_POLL_MS;
  uint64_t wait = (nearest - now + 999999) / 1000000;
  return wait < CC_MAX_POLL_MS ? (long)wait : CC_MAX_POLL_MS;
}

static void *run(void *argument) {
  cc_client *c = argument;
  pthread_setname_np(pthread_self(), "thumbd-fetch");
  for (;;) {
    int stopping = 0;
    apply_queued(c, &stopping);
    if (stopping) break;
    int running = 0;
    c->api->multi_perform(c->multi, &running);
    collect_finished(c);
    long wait = check_deadlines(c);
    long curl_wait = -1;
    c->api->multi_timeout(c->multi, &curl_wait);
    if (curl_wait >= 0 && curl_wait < wait) wait = curl_wait;
    c->api->multi_poll(c->multi, NULL, 0, (int)wait, NULL);
  }
  while (c->running) finish(c, c->running, CC_CANCELLED, "client stopped");
  pthread_mutex_lock(&c->lock);
  int free_on_exit = c->free_on_exit;
  pthread_mutex_unlock(&c->lock);
  if (free_on_exit) {
    pthread_detach(pthread_self());
    release_client(c);
  }
  return NULL;
}

/* ---- the public functions ---------------------------------------------- */

cc_client *cc_client_create(const cc_options *options, char *error,
                            size_t error_size) {
  const cc_api *api = cc_api_load(error, error_size);
  if (!api) return NULL;
  cc_client *c = calloc(1, sizeof(*c));
  if (!c) {
    snprintf(error, error_size, "out of memory");
    return NULL;
  }
  c->api = api;
  c->incoming_tail = &c->incoming;
  c->receive_buffer = options->receive_buffer;
  c->idle_seconds = options->idle_seconds;
  c->ca_file = copy(options->ca_file);
  c->ca_path = copy(options->ca_path);
  c->user_agent = copy(options->user_agent);
  pthread_mutex_init(&c->lock, NULL);
  c->multi = api->multi_init();
  if (!c->multi) {
    snprintf(error, error_size, "curl_multi_init failed");
    goto fail;
  }
  api->multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
  if (options->connections_per_host > 0)
    api->multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                      options->connections_per_host);
  if (options->connection_cache > 0)
    api->multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, options->connection_cache);
  if (pthread_create(&c->thread, NULL, run, c) != 0) {
    snprintf(error, error_size, "cannot start the fetch thread: %s",
             strerror(errno));
    api->multi_cleanup(c->multi);
    goto fail;
  }
  return c;
fail:
  pthread_mutex_destroy(&c->lock);
  free(c->ca_file);
  free(c->ca_path);
  free(c->user_agent);
  free(c);
  return NULL;
}

uint64_t cc_start(cc_client *c, const cc_request *request,
                  const cc_handlers *handlers) {
  cc_transfer *t = calloc(1, sizeof(*t));
  if (!t) return 0;
  t->client = c;
  t->handlers = *handlers;
  t->easy = c->api->easy_init();
  if (!t->easy || !set_up(c, t, request)) {
    transfer_free(t);
    return 0;
  }
  uint64_t now = now_ns();
  t->head_deadline = now + (uint64_t)request->head_timeout_ms * 1000000ull;
  t->total_deadline = now + (uint64_t)request->total_timeout_ms * 1000000ull;
  pthread_mutex_lock(&c->lock);
  t->id = ++c->next_id;
  uint64_t id = t->id;
  *c->incoming_tail = t;
  c->incoming_tail = &t->next;
  c->active++;
  pthread_mutex_unlock(&c->lock);
  c->api->multi_wakeup(c->multi);
  return id;
}

void cc_cancel(cc_client *c, uint64_t id) {
  pthread_mutex_lock(&c->lock);
  if (c->cancel_count == c->cancel_capacity) {
    size_t capacity = c->cancel_capacity ? c->cancel_capacity * 2 : 16;
    uint64_t *grown = realloc(c->cancels, capacity * sizeof(uint64_t));
    if (!grown) {
      pthread_mutex_unlock(&c->lock);
      return; /* the transfer still ends by its deadline */
    }
    c->cancels = grown;
    c->cancel_capacity = capacity;
  }
  c->cancels[c->cancel_count++] = id;
  pthread_mutex_unlock(&c->lock);
  c->api->multi_wakeup(c->multi);
}

size_t cc_active(cc_client *c) {
  pthread_mutex_lock(&c->lock);
  size_t active = c->active;
  pthread_mutex_unlock(&c->lock);
  return active;
}

uint64_t cc_connections_opened(cc_client *c) {
  return __atomic_load_n(&c->connections, __ATOMIC_RELAXED);
}

/* Frees what the thread left: transfers queued after its last look. */
static void release_client(cc_client *c) {
  cc_transfer *t = c->incoming;
  while (t) {
    cc_transfer *next = t->next;
    t->handlers.done(t->handlers.context, CC_CANCELLED, "client stopped");
    transfer_free(t);
    t = next;
  }
  free(c->cancels);
  c->api->multi_cleanup(c->multi);
  pthread_mutex_destroy(&c->lock);
  free(c->ca_file);
  free(c->ca_path);
  free(c->user_agent);
  free(c);
}

void cc_client_destroy(cc_client *c) {
  if (!c) return;
  int on_own_thread = pthread_equal(pthread_self(), c->thread);
  pthread_mutex_lock(&c->lock);
  c->stopping = 1;
  c->free_on_exit = on_own_thread;
  pthread_mutex_unlock(&c->lock);
  c->api->multi_wakeup(c->multi);
  /* From a handler (the last owner let go there), the thread cannot wait for
   * itself: it finishes its turn and frees the client on the way out. */
  if (on_own_thread) return;
  pthread_join(c->thread, NULL);
  release_client(c);
}
