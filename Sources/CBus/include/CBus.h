/*
 * CBus: the desktop's thumbnail services on D-Bus, over sd-bus (libsystemd).
 *
 * One bus is one sd-bus connection driven by one thread of its own, the one
 * that calls cb_run: every method handler runs there, one at a time. Signals
 * may be emitted from any thread: they are copied into a bounded queue and
 * sent by the bus thread, in the order they were emitted, after the reply of
 * the call that caused them. This header does not include sd-bus.h.
 *
 * Served at /org/freedesktop/thumbnails/Thumbnailer1 and
 * /org/freedesktop/thumbnails/Cache1 (the interfaces of the freedesktop
 * thumbnail management D-Bus specification, as tumbler serves them).
 */
#ifndef CBUS_H
#define CBUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most strings one call may carry in one array argument. */
#define CB_MAX_STRINGS 100000
/** Most bytes of all the strings of one call. */
#define CB_MAX_STRING_BYTES (32u << 20)

typedef struct cb_bus cb_bus;

/** A call's array of strings: valid only while the handler runs. */
typedef struct cb_strings {
  const char *const *items;
  size_t count;
} cb_strings;

/** What a Cache1 call asks. */
typedef enum cb_cache_op {
  CB_CACHE_MOVE = 0,
  CB_CACHE_COPY = 1,
  CB_CACHE_DELETE = 2,
  CB_CACHE_CLEANUP = 3
} cb_cache_op;

/** What the bus thread calls. Every string is valid only during the call. */
typedef struct cb_handlers {
  void *context;
  /** Thumbnailer1.Queue from `sender`: returns the new request's handle
   * (never 0). The reply carrying it is sent when this returns; then
   * `queued` is called with it, so signals emitted there follow the reply. */
  uint32_t (*queue)(void *context, const char *sender, cb_strings uris,
                    cb_strings mime_types, const char *flavor,
                    const char *scheduler, uint32_t handle_to_unqueue);
  void (*queued)(void *context, uint32_t handle);
  /** Thumbnailer1.Dequeue from `sender`. */
  void (*dequeue)(void *context, const char *sender, uint32_t handle);
  /** Cache1: Move and Copy (first: from, second: to), Delete (first),
   * Cleanup (first: base URIs, since). The reply is sent when this returns. */
  void (*cache)(void *context, cb_cache_op op, cb_strings first,
                cb_strings second, uint32_t since);
  /** A unique name (":1.42") left the bus. */
  void (*peer_gone)(void *context, const char *name);
} cb_handlers;

/** What a bus starts with (GetSupported's answer may change: cb_set_supported). */
typedef struct cb_options {
  /** A D-Bus address ("unix:path=..."); NULL or "" for the session bus. */
  const char *address;
  /** Request the well-known names org.freedesktop.thumbnails.Thumbnailer1
   * and org.freedesktop.thumbnails.Cache1 (never queued, never replacing
   * another owner). */
  int request_names;
  /** GetSupported's answer: one URI scheme per MIME type, and
   * GetFlavors'. */
  cb_strings schemes;
  cb_strings mime_types;
  cb_strings flavors;
} cb_options;

/** Connects and exports both objects. NULL on failure, with the reason in
 * `error` (for example that another program owns the names). */
cb_bus *cb_open(const cb_options *options, const cb_handlers *handlers,
                char *error, size_t error_size);

/** This connection's unique name (":1.7"). */
const char *cb_unique_name(cb_bus *bus);

/** Replaces GetSupported's answer (one URI scheme per MIME type), from any
 * thread: installed thumbnailers were read again. 0, or a negative errno. */
int cb_set_supported(cb_bus *bus, cb_strings schemes, cb_strings mime_types);

/** Runs the bus until cb_stop is called or the connection ends: 0 when
 * stopped, a negative errno when the connection failed. Call it on the
 * thread that owns the bus. */
int cb_run(cb_bus *bus);

/** Makes cb_run return soon, from any thread. */
void cb_stop(cb_bus *bus);

/** Frees the bus; call after cb_run returned (or when it never ran). */
void cb_close(cb_bus *bus);

/* Signals of Thumbnailer1, to `destination` alone. From any thread. They
 * return 0, or -ENOBUFS when the queue is full (the signal is dropped and
 * counted). */
int cb_emit_started(cb_bus *bus, const char *destination, uint32_t handle);
int cb_emit_finished(cb_bus *bus, const char *destination, uint32_t handle);
int cb_emit_ready(cb_bus *bus, const char *destination, uint32_t handle,
                  cb_strings uris);
int cb_emit_error(cb_bus *bus, const char *destination, uint32_t handle,
                  cb_strings uris, int32_t code, const char *message);

/** Signals dropped because the queue was full. */
uint64_t cb_dropped_signals(cb_bus *bus);

#ifdef __cplusplus
}
#endif

#endif
