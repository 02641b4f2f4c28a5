/*
 * The bus: one sd-bus connection, one thread (the caller of cb_run).
 *
 * sd-bus is not thread-safe, so only that thread touches the connection.
 * Other threads hand signals over through `pending` (a bounded list under
 * `lock`) and wake the thread with an eventfd; the thread sends them after
 * each round of sd_bus_process, so a signal emitted while a call is handled
 * follows that call's reply.
 *
 * Rules kept here, whatever a caller sends:
 * - an array argument is read string by string, and refused past
 *   CB_MAX_STRINGS entries or CB_MAX_STRING_BYTES bytes, before any handler
 *   sees it;
 * - Move and Copy need arrays of one length;
 * - the well-known names are requested without queueing or replacing, so
 *   another owner (tumblerd) makes cb_open fail instead of racing it.
 */
#define _GNU_SOURCE
#include "CBus.h"

#include <CSystem.h>

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

/* libsystemd at run time: opened with dlopen by the first cb_open, never linked, so the
 * processes that use no bus (the CLI, the `.thumbnailer` entry's one process per file, a
 * daemon without --dbus) do not map it and its crypto and compression libraries (about
 * 1 MiB and 1 ms at start). Every function called, without its sd_ prefix, named once;
 * their types come from sd-bus.h. */
#define CB_SD_FUNCTIONS(X) \
  X(bus_add_object_vtable) \
  X(bus_error_set) \
  X(bus_error_setf) \
  X(bus_flush) \
  X(bus_flush_close_unref) \
  X(bus_get_events) \
  X(bus_get_fd) \
  X(bus_get_timeout) \
  X(bus_get_unique_name) \
  X(bus_match_signal) \
  X(bus_message_append) \
  X(bus_message_append_strv) \
  X(bus_message_enter_container) \
  X(bus_message_exit_container) \
  X(bus_message_get_sender) \
  X(bus_message_new_method_return) \
  X(bus_message_new_signal) \
  X(bus_message_read) \
  X(bus_message_read_basic) \
  X(bus_message_set_destination) \
  X(bus_message_unref) \
  X(bus_new) \
  X(bus_open_user) \
  X(bus_process) \
  X(bus_reply_method_return) \
  X(bus_request_name) \
  X(bus_send) \
  X(bus_set_address) \
  X(bus_set_bus_client) \
  X(bus_start)

static struct {
#define CB_SD_FIELD(name) __typeof__(sd_##name) *name;
  CB_SD_FUNCTIONS(CB_SD_FIELD)
#undef CB_SD_FIELD
} libsystemd;

static int libsystemd_loaded;
static void set_vtable_format(const unsigned *format);
static char libsystemd_error[256];
static pthread_once_t libsystemd_once = PTHREAD_ONCE_INIT;

static void load_libsystemd(void) {
  /* sd-bus's ABI is libsystemd.so.0's. */
#define CB_SD_SYMBOL(name) CS_SYMBOL(libsystemd, name, "sd_" #name)
  const cs_symbol symbols[] = {CB_SD_FUNCTIONS(CB_SD_SYMBOL)};
#undef CB_SD_SYMBOL
  void *library = NULL;
  if (CS_BIND_MAJOR("systemd", 0, symbols, &library, libsystemd_error) != 0)
    return;
  const unsigned *format = dlsym(library, "sd_bus_object_vtable_format");
  if (!format) {
    snprintf(libsystemd_error, sizeof(libsystemd_error),
             "libsystemd.so.0 lacks sd_bus_object_vtable_format");
    return;
  }
  set_vtable_format(format);
  libsystemd_loaded = 1;
}

#define THUMBNAILER_PATH "/org/freedesktop/thumbnails/Thumbnailer1"
#define THUMBNAILER_IFACE "org.freedesktop.thumbnails.Thumbnailer1"
#define CACHE_PATH "/org/freedesktop/thumbnails/Cache1"
#define CACHE_IFACE "org.freedesktop.thumbnails.Cache1"

/* Signals waiting for the bus thread, at most. */
#define CB_MAX_PENDING 65536
#define CB_MAX_PENDING_BYTES (64u << 20)

typedef enum signal_kind { SIG_STARTED, SIG_FINISHED, SIG_READY, SIG_ERROR } signal_kind;

typedef struct pending_signal {
  struct pending_signal *next;
  signal_kind kind;
  uint32_t handle;
  int32_t code;
  size_t bytes;
  char *destination;
  char *message;
  char **uris;
  size_t uri_count;
} pending_signal;

struct cb_bus {
  sd_bus *bus;
  cb_handlers handlers;
  /* GetSupported and GetFlavors, copied; GetSupported's two lists change under
   * supported_lock (cb_set_supported, from any thread). */
  pthread_mutex_t supported_lock;
  char **schemes;
  char **mime_types;
  size_t mime_count;
  char **flavors;
  size_t flavor_count;
  int wake_fd;
  atomic_int stopping;
  atomic_uint_fast64_t dropped;
  pthread_mutex_t lock;
  pending_signal *head, *tail;
  size_t pending_count, pending_bytes;
};

/* Strings read from a message: pointers into it, valid while it is. */
typedef struct string_list {
  const char **items;
  size_t count, capacity;
} string_list;

static void string_list_free(string_list *list) { free(list->items); }

static int read_strings(sd_bus_message *m, string_list *out, size_t *bytes,
                        sd_bus_error *error) {
  int r = libsystemd.bus_message_enter_container(m, 'a', "s");
  if (r < 0) return r;
  const char *text;
  while ((r = libsystemd.bus_message_read_basic(m, 's', &text)) > 0) {
    *bytes += strlen(text) + 1;
    if (out->count >= CB_MAX_STRINGS || *bytes > CB_MAX_STRING_BYTES) {
      return libsystemd.bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                       "more than %d strings or %u bytes in one call",
                                       CB_MAX_STRINGS, CB_MAX_STRING_BYTES);
    }
    if (out->count == out->capacity) {
      size_t capacity = out->capacity ? out->capacity * 2 : 16;
      const char **grown = realloc(out->items, capacity * sizeof *grown);
      if (!grown) return -ENOMEM;
      out->items = grown;
      out->capacity = capacity;
    }
    out->items[out->count++] = text;
  }
  if (r < 0) return r;
  return libsystemd.bus_message_exit_container(m);
}

static cb_strings strings_of(const string_list *list) {
  cb_strings strings = {list->items, list->count};
  return strings;
}

static const char *sender_of(sd_bus_message *m) {
  const char *sender = libsystemd.bus_message_get_sender(m);
  return sender ? sender : "";
}

static int on_queue(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  cb_bus *bus = userdata;
  string_list uris = {0}, mimes = {0};
  size_t bytes = 0;
  const char *flavor = NULL, *scheduler = NULL;
  uint32_t unqueue = 0;
  int r = read_strings(m, &uris, &bytes, error);
  if (r >= 0) r = read_strings(m, &mimes, &bytes, error);
  if (r >= 0) r = libsystemd.bus_message_read(m, "ssu", &flavor, &scheduler, &unqueue);
  if (r >= 0) {
    uint32_t handle =
        bus->handlers.queue(bus->handlers.context, sender_of(m), strings_of(&uris),
                            strings_of(&mimes), flavor, scheduler, unqueue);
    r = libsystemd.bus_reply_method_return(m, "u", handle);
    bus->handlers.queued(bus->handlers.context, handle);
  }
  string_list_free(&uris);
  string_list_free(&mimes);
  return r;
}

static int on_dequeue(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  (void)error;
  cb_bus *bus = userdata;
  uint32_t handle = 0;
  int r = libsystemd.bus_message_read(m, "u", &handle);
  if (r < 0) return r;
  bus->handlers.dequeue(bus->handlers.context, sender_of(m), handle);
  return libsystemd.bus_reply_method_return(m, "");
}

static int reply_strings(sd_bus_message *call, char **first, char **second) {
  sd_bus_message *reply = NULL;
  int r = libsystemd.bus_message_new_method_return(call, &reply);
  if (r >= 0) r = libsystemd.bus_message_append_strv(reply, first);
  if (r >= 0 && second) r = libsystemd.bus_message_append_strv(reply, second);
  if (r >= 0) r = libsystemd.bus_send(NULL, reply, NULL);
  libsystemd.bus_message_unref(reply);
  return r;
}

static int on_get_supported(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  (void)error;
  cb_bus *bus = userdata;
  pthread_mutex_lock(&bus->supported_lock);
  int r = reply_strings(m, bus->schemes, bus->mime_types);
  pthread_mutex_unlock(&bus->supported_lock);
  return r;
}

static int on_get_schedulers(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  (void)userdata;
  (void)error;
  char *schedulers[] = {"default", "foreground", "background", NULL};
  return reply_strings(m, schedulers, NULL);
}

static int on_get_flavors(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  (void)error;
  cb_bus *bus = userdata;
  return reply_strings(m, bus->flavors, NULL);
}

static int on_cache_call(sd_bus_message *m, cb_bus *bus, cb_cache_op op, sd_bus_error *error) {
  string_list first = {0}, second = {0};
  size_t bytes = 0;
  uint32_t since = 0;
  int r = read_strings(m, &first, &bytes, error);
  if (r >= 0 && (op == CB_CACHE_MOVE || op == CB_CACHE_COPY))
    r = read_strings(m, &second, &bytes, error);
  if (r >= 0 && op == CB_CACHE_CLEANUP) r = libsystemd.bus_message_read(m, "u", &since);
  if (r >= 0 && (op == CB_CACHE_MOVE || op == CB_CACHE_COPY) && first.count != second.count)
    r = libsystemd.bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                 "from_uris and to_uris differ in length");
  if (r >= 0) {
    bus->handlers.cache(bus->handlers.context, op, strings_of(&first), strings_of(&second),
                        since);
    r = libsystemd.bus_reply_method_return(m, "");
  }
  string_list_free(&first);
  string_list_free(&second);
  return r;
}

static int on_move(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  return on_cache_call(m, userdata, CB_CACHE_MOVE, error);
}
static int on_copy(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  return on_cache_call(m, userdata, CB_CACHE_COPY, error);
}
static int on_delete(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  return on_cache_call(m, userdata, CB_CACHE_DELETE, error);
}
static int on_cleanup(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  return on_cache_call(m, userdata, CB_CACHE_CLEANUP, error);
}

static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  (void)error;
  cb_bus *bus = userdata;
  const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
  if (libsystemd.bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0) return 0;
  if (name[0] == ':' && new_owner[0] == '\0') bus->handlers.peer_gone(bus->handlers.context, name);
  return 0;
}

/* SD_BUS_VTABLE_START stores the address of libsystemd's sd_bus_object_vtable_format, by which
 * sd-bus knows the table's layout. That address exists only once libsystemd is loaded: the
 * tables hold a stand-in and set_vtable_format puts the real one in, before the first
 * cb_open uses them. */
static const unsigned vtable_format_stand_in;
#define sd_bus_object_vtable_format vtable_format_stand_in

static sd_bus_vtable thumbnailer_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD_WITH_ARGS("Queue",
                            SD_BUS_ARGS("as", uris, "as", mime_types, "s", flavor, "s",
                                        scheduler, "u", handle_to_unqueue),
                            SD_BUS_RESULT("u", handle), on_queue, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Dequeue", SD_BUS_ARGS("u", handle), SD_BUS_NO_RESULT, on_dequeue,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("GetSupported", SD_BUS_NO_ARGS,
                            SD_BUS_RESULT("as", uri_schemes, "as", mime_types),
                            on_get_supported, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("GetSchedulers", SD_BUS_NO_ARGS, SD_BUS_RESULT("as", schedulers),
                            on_get_schedulers, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("GetFlavors", SD_BUS_NO_ARGS, SD_BUS_RESULT("as", flavors),
                            on_get_flavors, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_ARGS("Started", SD_BUS_ARGS("u", handle), 0),
    SD_BUS_SIGNAL_WITH_ARGS("Finished", SD_BUS_ARGS("u", handle), 0),
    SD_BUS_SIGNAL_WITH_ARGS("Ready", SD_BUS_ARGS("u", handle, "as", uris), 0),
    SD_BUS_SIGNAL_WITH_ARGS("Error",
                            SD_BUS_ARGS("u", handle, "as", failed_uris, "i", error_code, "s",
                                        message),
                            0),
    SD_BUS_VTABLE_END};

static sd_bus_vtable cache_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD_WITH_ARGS("Move", SD_BUS_ARGS("as", from_uris, "as", to_uris), SD_BUS_NO_RESULT,
                            on_move, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Copy", SD_BUS_ARGS("as", from_uris, "as", to_uris), SD_BUS_NO_RESULT,
                            on_copy, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Delete", SD_BUS_ARGS("as", uris), SD_BUS_NO_RESULT, on_delete,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Cleanup", SD_BUS_ARGS("as", base_uris, "u", since), SD_BUS_NO_RESULT,
                            on_cleanup, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END};

#undef sd_bus_object_vtable_format

static void set_vtable_format(const unsigned *format) {
  thumbnailer_vtable[0].x.start.vtable_format_reference = format;
  cache_vtable[0].x.start.vtable_format_reference = format;
}

static char **copy_strv(cb_strings strings) {
  char **copy = calloc(strings.count + 1, sizeof *copy);
  if (!copy) return NULL;
  for (size_t i = 0; i < strings.count; i++) {
    copy[i] = strdup(strings.items[i]);
    if (!copy[i]) {
      for (size_t j = 0; j < i; j++) free(copy[j]);
      free(copy);
      return NULL;
    }
  }
  return copy;
}

static void free_strv(char **strv) {
  if (!strv) return;
  for (char **item = strv; *item; item++) free(*item);
  free(strv);
}

void cb_close(cb_bus *bus) {
  if (!bus) return;
  if (bus->bus) libsystemd.bus_flush_close_unref(bus->bus);
  pending_signal *signal = bus->head;
  while (signal) {
    pending_signal *next = signal->next;
    free(signal->destination);
    free(signal->message);
    for (size_t i = 0; i < signal->uri_count; i++) free(signal->uris[i]);
    free(signal->uris);
    free(signal);
    signal = next;
  }
  free_strv(bus->schemes);
  free_strv(bus->mime_types);
  free_strv(bus->flavors);
  if (bus->wake_fd >= 0) close(bus->wake_fd);
  pthread_mutex_destroy(&bus->lock);
  pthread_mutex_destroy(&bus->supported_lock);
  free(bus);
}

static cb_bus *fail(cb_bus *bus, char *error, size_t size, const char *what, int r) {
  snprintf(error, size, "%s: %s", what, strerror(r < 0 ? -r : r));
  cb_close(bus);
  return NULL;
}

cb_bus *cb_open(const cb_options *options, const cb_handlers *handlers, char *error,
                size_t error_size) {
  pthread_once(&libsystemd_once, load_libsystemd);
  if (!libsystemd_loaded) {
    snprintf(error, error_size, "%s", libsystemd_error);
    return NULL;
  }
  cb_bus *bus = calloc(1, sizeof *bus);
  if (!bus) {
    snprintf(error, error_size, "out of memory");
    return NULL;
  }
  bus->wake_fd = -1;
  pthread_mutex_init(&bus->lock, NULL);
  pthread_mutex_init(&bus->supported_lock, NULL);
  bus->handlers = *handlers;
  if (options->schemes.count != options->mime_types.count)
    return fail(bus, error, error_size, "GetSupported's two lists differ in length", EINVAL);
  bus->schemes = copy_strv(options->schemes);
  bus->mime_types = copy_strv(options->mime_types);
  bus->flavors = copy_strv(options->flavors);
  if (!bus->schemes || !bus->mime_types || !bus->flavors)
    return fail(bus, error, error_size, "copying the supported types", ENOMEM);
  bus->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (bus->wake_fd < 0) return fail(bus, error, error_size, "eventfd", errno);

  int r;
  if (options->address && options->address[0]) {
    r = libsystemd.bus_new(&bus->bus);
    if (r >= 0) r = libsystemd.bus_set_address(bus->bus, options->address);
    if (r >= 0) r = libsystemd.bus_set_bus_client(bus->bus, 1);
    if (r >= 0) r = libsystemd.bus_start(bus->bus);
  } else {
    r = libsystemd.bus_open_user(&bus->bus);
  }
  if (r < 0) return fail(bus, error, error_size, "cannot connect to the session bus", r);

  r = libsystemd.bus_add_object_vtable(bus->bus, NULL, THUMBNAILER_PATH, THUMBNAILER_IFACE,
                                       thumbnailer_vtable, bus);
  if (r >= 0)
    r = libsystemd.bus_add_object_vtable(bus->bus, NULL, CACHE_PATH, CACHE_IFACE, cache_vtable,
                                         bus);
  if (r < 0) return fail(bus, error, error_size, "cannot export the thumbnail objects", r);
  r = libsystemd.bus_match_signal(bus->bus, NULL, "org.freedesktop.DBus",
                                  "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                  "NameOwnerChanged", on_name_owner_changed, bus);
  if (r < 0) return fail(bus, error, error_size, "cannot watch callers leaving the bus", r);
  if (options->request_names) {
    static const char *const names[] = {THUMBNAILER_IFACE, CACHE_IFACE};
    for (size_t i = 0; i < 2; i++) {
      r = libsystemd.bus_request_name(bus->bus, names[i], 0);
      if (r == -EEXIST) {
        snprintf(error, error_size,
                 "%s is owned by another program (tumblerd?): stop it first, see "
                 "docs/DESKTOP.md",
                 names[i]);
        cb_close(bus);
        return NULL;
      }
      if (r < 0) return fail(bus, error, error_size, names[i], r);
    }
  }
  return bus;
}

int cb_set_supported(cb_bus *bus, cb_strings schemes, cb_strings mime_types) {
  if (schemes.count != mime_types.count) return -EINVAL;
  char **new_schemes = copy_strv(schemes), **new_types = copy_strv(mime_types);
  if (!new_schemes || !new_types) {
    free_strv(new_schemes);
    free_strv(new_types);
    return -ENOMEM;
  }
  pthread_mutex_lock(&bus->supported_lock);
  char **old_schemes = bus->schemes, **old_types = bus->mime_types;
  bus->schemes = new_schemes;
  bus->mime_types = new_types;
  pthread_mutex_unlock(&bus->supported_lock);
  free_strv(old_schemes);
  free_strv(old_types);
  return 0;
}

const char *cb_unique_name(cb_bus *bus) {
  const char *name = NULL;
  if (libsystemd.bus_get_unique_name(bus->bus, &name) < 0) return "";
  return name;
}

static void wake(cb_bus *bus) {
  uint64_t one = 1;
  ssize_t written = write(bus->wake_fd, &one, sizeof one);
  (void)written; /* EAGAIN: the counter is already non-zero, the thread will wake */
}

void cb_stop(cb_bus *bus) {
  atomic_store(&bus->stopping, 1);
  wake(bus);
}

uint64_t cb_dropped_signals(cb_bus *bus) { return atomic_load(&bus->dropped); }

static int enqueue(cb_bus *bus, signal_kind kind, const char *destination, uint32_t handle,
                   cb_strings uris, int32_t code, const char *message) {
  size_t bytes = sizeof(pending_signal) + strlen(destination) + 1 +
                 (message ? strlen(message) + 1 : 0);
  for (size_t i = 0; i < uris.count; i++) bytes += strlen(uris.items[i]) + 1 + sizeof(char *);
  pthread_mutex_lock(&bus->lock);
  int full = bus->pending_count >= CB_MAX_PENDING ||
             bus->pending_bytes + bytes > CB_MAX_PENDING_BYTES;
  pthread_mutex_unlock(&bus->lock);
  pending_signal *signal = full ? NULL : calloc(1, sizeof *signal);
  if (signal) {
    signal->kind = kind;
    signal->handle = handle;
    signal->code = code;
    signal->bytes = bytes;
    signal->destination = strdup(destination);
    signal->message = message ? strdup(message) : NULL;
    signal->uris = uris.count ? (char **)copy_strv(uris) : NULL;
    signal->uri_count = uris.count;
    if (!signal->destination || (message && !signal->message) || (uris.count && !signal->uris)) {
      free(signal->destination);
      free(signal->message);
      free_strv(signal->uris);
      free(signal);
      signal = NULL;
    }
  }
  if (!signal) {
    atomic_fetch_add(&bus->dropped, 1);
    return -ENOBUFS;
  }
  pthread_mutex_lock(&bus->lock);
  if (bus->tail)
    bus->tail->next = signal;
  else
    bus->head = signal;
  bus->tail = signal;
  bus->pending_count++;
  bus->pending_bytes += bytes;
  pthread_mutex_unlock(&bus->lock);
  wake(bus);
  return 0;
}

static const cb_strings no_strings = {NULL, 0};

int cb_emit_started(cb_bus *bus, const char *destination, uint32_t handle) {
  return enqueue(bus, SIG_STARTED, destination, handle, no_strings, 0, NULL);
}
int cb_emit_finished(cb_bus *bus, const char *destination, uint32_t handle) {
  return enqueue(bus, SIG_FINISHED, destination, handle, no_strings, 0, NULL);
}
int cb_emit_ready(cb_bus *bus, const char *destination, uint32_t handle, cb_strings uris) {
  return enqueue(bus, SIG_READY, destination, handle, uris, 0, NULL);
}
int cb_emit_error(cb_bus *bus, const char *destination, uint32_t handle, cb_strings uris,
                  int32_t code, const char *message) {
  return enqueue(bus, SIG_ERROR, destination, handle, uris, code, message ? message : "");
}

static void send_signal(cb_bus *bus, const pending_signal *signal) {
  static const char *const members[] = {"Started", "Finished", "Ready", "Error"};
  sd_bus_message *m = NULL;
  int r = libsystemd.bus_message_new_signal(bus->bus, &m, THUMBNAILER_PATH, THUMBNAILER_IFACE,
                                            members[signal->kind]);
  if (r >= 0 && signal->destination[0])
    r = libsystemd.bus_message_set_destination(m, signal->destination);
  if (r >= 0) r = libsystemd.bus_message_append(m, "u", signal->handle);
  if (r >= 0 && (signal->kind == SIG_READY || signal->kind == SIG_ERROR)) {
    char *empty[] = {NULL};
    r = libsystemd.bus_message_append_strv(m, signal->uris ? signal->uris : empty);
  }
  if (r >= 0 && signal->kind == SIG_ERROR)
    r = libsystemd.bus_message_append(m, "is", signal->code, signal->message);
  if (r >= 0) r = libsystemd.bus_send(bus->bus, m, NULL);
  if (r < 0) atomic_fetch_add(&bus->dropped, 1);
  libsystemd.bus_message_unref(m);
}

/* Sends every queued signal, in order; called on the bus thread only. */
static void drain(cb_bus *bus) {
  pthread_mutex_lock(&bus->lock);
  pending_signal *signal = bus->head;
  bus->head = bus->tail = NULL;
  bus->pending_count = 0;
  bus->pending_bytes = 0;
  pthread_mutex_unlock(&bus->lock);
  while (signal) {
    pending_signal *next = signal->next;
    send_signal(bus, signal);
    free(signal->destination);
    free(signal->message);
    free_strv(signal->uris);
    free(signal);
    signal = next;
  }
}

int cb_run(cb_bus *bus) {
  for (;;) {
    if (atomic_load(&bus->stopping)) {
      drain(bus);
      libsystemd.bus_flush(bus->bus);
      return 0;
    }
    int r = libsystemd.bus_process(bus->bus, NULL);
    if (r < 0) return r;
    drain(bus);
    if (r > 0) continue;
    struct pollfd fds[2] = {{.fd = libsystemd.bus_get_fd(bus->bus), .events = 0},
                            {.fd = bus->wake_fd, .events = POLLIN}};
    r = libsystemd.bus_get_events(bus->bus);
    if (r < 0) return r;
    fds[0].events = (short)r;
    uint64_t until = 0;
    int timeout_ms = -1;
    if (libsystemd.bus_get_timeout(bus->bus, &until) >= 0 && until != UINT64_MAX) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      uint64_t now_us = (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
      uint64_t wait_ms = until <= now_us ? 0 : (until - now_us + 999) / 1000;
      timeout_ms = wait_ms > 1000 ? 1000 : (int)wait_ms;
    }
    if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR) return -errno;
    if (fds[1].revents & POLLIN) {
      uint64_t count;
      ssize_t got = read(bus->wake_fd, &count, sizeof count);
      (void)got;
    }
  }
}
