/*
 * gate.h: the decision for one request, between the transport (server.c:
 * FastCGI or CGI) and the store. From the request's parameters it reads
 * the request (request.c), refuses what it cannot key or route safely,
 * picks the route and its policies, derives each policy's key, runs the
 * store's one atomic step, applies on_error and chooses the answer: a
 * verdict (verdict.h), which its observers then count (metrics.c) and
 * log (gate_log.c). It knows nothing of FastCGI, SQL or header syntax:
 * the answer it builds is written by response.c.
 */
#ifndef RLG_GATE_H
#define RLG_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "gate_log.h"
#include "metrics.h"
#include "overrides.h"
#include "request.h"
#include "response.h"
#include "store.h"
#include "tier.h"
#include "verdict.h"

/* The resource endpoint of the responder role. */
#define RLG_RESOURCE_PATH "/api/v1/resources"

/* How often a gate prunes expired states, between requests. */
#define RLG_PRUNE_INTERVAL_MS 10000

/*
 * One worker thread's gate: its store connection, its slot of the
 * counters and the pacing of its log lines. Owned by the thread; not
 * shared.
 */

struct rlg_gate {
	const struct rlg_config *cfg;      /* borrowed, outlives the gate */
	struct rlg_store *store;           /* owned */
	struct rlg_metrics_slot *slot;     /* its counters (metrics.h), or
	                                      NULL: none */
	const struct rlg_metrics_map *mxmap;  /* cfg's, for the slot */
	uint32_t steps;                    /* store steps: one in
	                                      RLG_METRICS_SAMPLE is timed */
	int64_t next_prune_ms;
	struct rlg_gate_log log;           /* its lines' pacing (gate_log.h) */
	/*
	 * Tiers (tier.h): the config's, and the overrides the store holds,
	 * which the process's reader thread reads when they change and
	 * builds for the gate's config (overrides.h).
	 */
	struct rlg_tier_set *tiers;
	struct rlg_overrides_view overrides;
	const struct rlg_tier_set *ovr_set;   /* the request's: overrides' */
};

/*
 * What the gate decided for one request: the answer, and the arrays it
 * points into (the policies shown and their decisions). route is the
 * [route] that matched, or NULL; cached tells whether the store's step
 * was answered by the rejection cache.
 */
struct rlg_verdict {
	struct rlg_answer answer;
	const struct rlg_route *route;
	bool cached;
	struct rlg_policy policies[RLG_GATE_ITEMS_MAX];
	struct rlg_decision decisions[RLG_GATE_ITEMS_MAX];
};

/* Sets up a gate for cfg, opening its store connection (a store that
 * fails to open is logged; its handle heals by itself). */
void rlg_gate_init(struct rlg_gate *g, const struct rlg_config *cfg);

/*
 * The gate decides with cfg from its next request on (a reload: the
 * server's). cfg's [store] must be the one the gate was opened with
 * (rlg_config_store_changed): the store connection is kept.
 */
void rlg_gate_reconfig(struct rlg_gate *g, const struct rlg_config *cfg);

/* Closes the gate's store connection. */
void rlg_gate_fini(struct rlg_gate *g);

/*
 * Decides for the request whose parameters a front hands in (front.h:
 * the FastCGI params or environ through front_cgi.c) at now_ms, into *v,
 * and logs what the config's [log] level asks for. Never fails: bad input is an
 * answer (400), a failing store follows on_error. An admitted request of
 * a smoothing policy may have to wait for its turn: v->answer.hold_ms.
 */
void rlg_gate_decide(struct rlg_gate *g, const struct rlg_params *params,
    int64_t now_ms, struct rlg_verdict *v);

/*
 * The decision for req (read by the front: rlg_front_serve) at now_ms,
 * the answer sent through out (the front's renderer and writer:
 * rlg_response_send), and counted in the gate's slot of the scoreboard.
 * How long the front must hold it goes to *out->hold_ms first (with
 * out->hold_ms NULL, smoothing policies answer at once: struct rlg_out).
 * Returns 0, or the renderer's negative result.
 */
int rlg_gate_answer(struct rlg_gate *g, const struct rlg_request *req,
    int64_t now_ms, const struct rlg_out *out);

/*
 * Housekeeping after a request has been answered: the store's upkeep
 * (rlg_store_idle: the SQLite WAL's checkpoint), and pruning of expired
 * states at most once per RLG_PRUNE_INTERVAL_MS (not while the store
 * fails).
 */
void rlg_gate_idle(struct rlg_gate *g, int64_t now_ms);

#endif
