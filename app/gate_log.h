/*
 * gate_log.h: the log lines of the gate's verdicts (verdict.h), an
 * observer called after the decision: refused requests, requests no
 * policy covers, the store failing, full or healing, and rejections
 * (and, at level info, admissions), each kind paced (pacer.h) so that a
 * flood writes a line per interval, not per request.
 */
#ifndef RLG_GATE_LOG_H
#define RLG_GATE_LOG_H

#include <stdint.h>

#include "config.h"
#include "pacer.h"
#include "verdict.h"

/* Rejections a worker thread remembers having logged. */
#define RLG_GATE_SEEN 64

/*
 * One worker thread's pacing of its log lines (a member of its gate).
 * All zero is a log that has written nothing yet.
 */
struct rlg_gate_log {
	int64_t store_failing_since_ms;    /* 0 while the store works */
	struct rlg_pacer store_errors;     /* "store still failing" */
	struct rlg_pacer store_full;       /* max_clients reached */
	struct rlg_pacer flaws;            /* refused requests */
	struct rlg_pacer tokens;           /* bearer tokens not used */
	/*
	 * The rejections this thread logged lately, one per slot (by a hash
	 * of client, route and policies): a repeat before its Retry-After is
	 * logged at level info only (gate_log.c, repeat_rejection).
	 */
	struct rlg_gate_seen {
		uint64_t hash;
		int64_t until_ms;
	} seen[RLG_GATE_SEEN];
	/*
	 * The names of the config the gate decides with, hashed once
	 * (rlg_gate_log_config: at the gate's start and at each reload)
	 * for repeat_rejection: cfg->policies[i]'s at policy_hash[i],
	 * cfg->routes[i]'s at route_hash[i].
	 */
	uint64_t policy_hash[RLG_POLICIES_MAX];
	uint64_t route_hash[RLG_ROUTES_MAX];
	/* Rejection lines formatted (not paced away): what a test reads. */
	uint64_t rejection_lines;
};

/*
 * Hashes cfg's policy and route names into l, for the rejections decided
 * with cfg from now on: a gate's start (rlg_gate_init) and each reload
 * (rlg_gate_reconfig) call it before the first request on cfg.
 */
void rlg_gate_log_config(struct rlg_gate_log *l, const struct rlg_config *cfg);

/*
 * What the store said of a step (or of opening it: RLG_STORE_SAID_FAILED)
 * at now_ms, with its message msg (full or failed), logged as cfg's log
 * level and on_error ask: a failure's first line at once, then one per
 * RLG_ERROR_LOG_INTERVAL_MS while it goes on, one when it heals; a
 * refused new client likewise paced. RLG_STORE_NOT_ASKED logs nothing.
 */
void rlg_gate_log_store(struct rlg_gate_log *l, const struct rlg_config *cfg,
    enum rlg_store_said said, const char *msg, int64_t now_ms);

/*
 * The lines of the verdict dd, decided at now_ms with cfg, as cfg's
 * [log] level asks: the
 * flaw that refused the request, an unguarded request (once a minute per
 * process), the store's state (rlg_gate_log_store), the rejections and
 * dry-run rejections, the admission at level info.
 */
void rlg_gate_log_verdict(struct rlg_gate_log *l,
    const struct rlg_config *cfg, const struct rlg_decided *dd,
    int64_t now_ms);

#endif
