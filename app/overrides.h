/*
 * overrides.h: the store's override rows (store.h: rlg_store_overrides),
 * read once per process and off the request path.
 *
 * One reader per process and store: a thread with its own store handle
 * asks every RLG_OVERRIDES_INTERVAL_MS whether the rows changed; when
 * they did, it keeps them (at most [store] max_overrides) and builds a
 * sealed tier set (tier.h) for each config a gate decides with (two at
 * once during a reload: policies may be renumbered), then publishes it.
 * Per request a gate does one atomic load of the reader's publish
 * counter and, only when that moved, takes its config's current set as a
 * hazard pointer (store, then check it is still current): no lock, no
 * count. The reader frees a replaced set once no gate's hazard pointer
 * names it, and stops with the last gate of the process.
 */
#ifndef RLG_OVERRIDES_H
#define RLG_OVERRIDES_H

#include <stdint.h>

#include "config.h"
#include "tier.h"

/* How often the reader asks the store whether its overrides changed: an
 * operator's change applies within a second. */
#define RLG_OVERRIDES_INTERVAL_MS 500

struct rlg_overrides;           /* a process's reader (opaque) */
struct rlg_overrides_snap;      /* one published set (opaque) */
struct rlg_overrides_cfg;       /* a config's entry in the reader */

/*
 * A gate's view of the reader: the set it decides with. Owned by one
 * thread (rlg_overrides_attach fills it), but in the reader's list of
 * views from attach to detach: it must not move meanwhile. held is the
 * thread's hazard pointer: the set it may be reading, which the reader
 * never frees (written by the thread, read by the reader, atomically).
 */
struct rlg_overrides_view {
	struct rlg_overrides *o;            /* NULL: no overrides */
	struct rlg_overrides_cfg *c;        /* its config's entry */
	const struct rlg_config *cfg;       /* the config it decides with */
	struct rlg_overrides_snap *held;    /* the set in use (atomic) */
	uint64_t seq;                       /* the publish it took */
	struct rlg_overrides_view *next;    /* the reader's list */
};

/*
 * Attaches a gate deciding with cfg to its process's reader for
 * cfg->store (the first attach opens a store handle and starts the
 * thread), and waits for the set of cfg (the first read of the store,
 * or a build from the rows in memory for a new config). A thread that
 * cannot start is logged: no overrides then.
 */
void rlg_overrides_attach(struct rlg_overrides_view *v,
    const struct rlg_config *cfg);

/*
 * The gate decides with cfg from now on (a reload: same [store]). Waits
 * for cfg's set (built from the rows in memory, no store read), then
 * lets the old config's go: nothing refers to the old config after it.
 */
void rlg_overrides_switch(struct rlg_overrides_view *v,
    const struct rlg_config *cfg);

/* Detaches; the last gate of a reader stops and frees it. */
void rlg_overrides_detach(struct rlg_overrides_view *v);

/*
 * The set to match against (NULL: none), valid until the next call: per
 * request one atomic load; when the reader published since the last
 * call, the new set taken without a lock.
 */
const struct rlg_tier_set *rlg_overrides_current(
    struct rlg_overrides_view *v);

/*
 * Asks the reader for a whole pass now (a read of the store and the
 * builds it calls for) and waits until one has finished: what the tests
 * and benchmarks call instead of waiting for the interval.
 */
void rlg_overrides_sync(struct rlg_overrides_view *v);

#endif
