/*
 * server_hold.h: a FastCGI answer held for its turn (a smoothing policy:
 * config.h, delay), between the worker that decided it (server.c) and
 * the park that gives it (server_park.c): the worker's wire
 * (server_wire.h) holds the answer's records, which are handed over with
 * the connection, and the worker goes on with its next request.
 */
#ifndef RLG_SERVER_HOLD_H
#define RLG_SERVER_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "server_wire.h"

/*
 * Parks the request of w (its answer rendered on w, in the slot the
 * caller reserved: rlg_park_reserve), due hold_ms from now. At its turn,
 * on the park's thread, the answer is written; its connection is closed
 * at once when at_once (its input was read to its end), else by the
 * park's lingering close, which does not block the park; a kept
 * connection is closed too (the web server opens another). The
 * connection is the park's from here on (w lets it go). Returns false
 * when the answer could not be kept (no memory): the connection is
 * closed, the slot is the caller's to give back.
 */
bool rlg_hold_park(struct rlg_wire *w, int64_t hold_ms, bool at_once);

#endif
