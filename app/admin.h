/*
 * admin.h: the admin endpoints of the responder role, under [admin]
 * prefix (default /rlgate), for the clients [admin] allow lists:
 *
 *   PREFIX/metrics  Prometheus text exposition 0.0.4 (metrics.c's sums)
 *   PREFIX/health   200 {"status":"ok"} when the store answers a probe,
 *                   503 {"status":"failing","reason":...} when not
 *   PREFIX/status   the JSON the status page polls (docs/operations.md)
 *   PREFIX/ (and PREFIX)  the status page (status_page.html, built in)
 *
 * The fronts' dispatch (rlg_front_serve, fronts.c) asks rlg_admin_match
 * before the gate: a request it claims is counted by no policy. For anyone else these paths are paths like any
 * other (counted, and 404). The bodies are built here; response.c writes
 * them.
 */
#ifndef RLG_ADMIN_H
#define RLG_ADMIN_H

#include <stdint.h>

#include "config.h"
#include "metrics.h"
#include "request.h"
#include "response.h"
#include "store.h"
#include "util.h"

enum rlg_admin_endpoint {
	RLG_ADMIN_NONE = 0,     /* not an admin request */
	RLG_ADMIN_PAGE,
	RLG_ADMIN_METRICS,
	RLG_ADMIN_HEALTH,
	RLG_ADMIN_STATUS,
	RLG_ADMIN_UNKNOWN,      /* under the prefix, no endpoint: 404 */
	RLG_ADMIN_PASS,         /* an Authorizer asked about an admin path:
	                           let it through, counted by no policy */
};

/*
 * The endpoint r asks for, or RLG_ADMIN_NONE: the endpoints are off (no
 * allow), r is neither a responder's nor an authorizer's request, its path
 * is not PREFIX or under PREFIX/, or its client address (as [client]
 * resolves it) is not in allow. An authorizer's request for such a path
 * is RLG_ADMIN_PASS: a guard over the prefix lets the admin through to
 * the responder that serves it, without counting.
 */
enum rlg_admin_endpoint rlg_admin_match(const struct rlg_config *cfg,
    const struct rlg_request *r);

/*
 * Answers r for endpoint e (not NONE) through out, and counts the answer
 * in slot (metrics.h; NULL: none) as an admin one: PASS, the
 * Authorizer's 200 that lets the admin through; any other, the
 * endpoint's answer (rlg_admin_answer). Returns 0, or the renderer's
 * negative result.
 */
int rlg_admin_serve(const struct rlg_config *cfg, struct rlg_store *store,
    struct rlg_metrics_slot *slot, enum rlg_admin_endpoint e,
    const struct rlg_request *r, int64_t now_ms, const struct rlg_out *out);

/*
 * Answers r for endpoint e (not NONE nor PASS) with store (the worker's), at
 * now_ms, through out (the front's renderer). Returns the status code
 * sent, or a negative renderer's error.
 */
int rlg_admin_answer(const struct rlg_config *cfg, struct rlg_store *store,
    enum rlg_admin_endpoint e, const struct rlg_request *r, int64_t now_ms,
    const struct rlg_out *out);

/* The bodies, for the tests: appended to out. */
void rlg_admin_metrics(const struct rlg_config *cfg, struct rlg_store *store,
    int64_t now_ms, struct rlg_sb *out);
/* Returns whether the store answered (200) or not (503). */
bool rlg_admin_health(struct rlg_store *store, int64_t now_ms,
    struct rlg_sb *out);
void rlg_admin_status(const struct rlg_config *cfg, struct rlg_store *store,
    int64_t now_ms, struct rlg_sb *out);

#endif
