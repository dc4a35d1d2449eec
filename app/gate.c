/*
 * gate.c: the decision for one request (gate.h).
 *
 * A request that reaches rlgate counts against its client's quota under
 * the policies its route names. As a responder, rlgate answers its own
 * endpoint (404/405 elsewhere); in a guarding role (a FastCGI Authorizer,
 * nginx's auth_request, Caddy's forward_auth: rlg_request_guards) it
 * decides for the request the front describes and says yes (200, the
 * state in headers), or no (429, 503, 400) in the form the front needs
 * (response.h). A request it cannot route or key safely (a flaw:
 * request.h) is answered 400 in every role and counted by no policy: it
 * never reaches the backend, and never borrows somebody else's key; a
 * front that names no role rlgate has gets 500. The gate is the only
 * place that applies on_error.
 *
 * The decision (judge) makes a verdict (verdict.h) and no side effect
 * but the store's step; decide then hands the verdict to its observers,
 * in one place: the log (rlg_gate_log_verdict, which paces its lines)
 * and the counters (rlg_metrics_verdict).
 */
#include <stddef.h>
#include <string.h>

#include "gate.h"
#include "gate_items.h"
#include "gate_log.h"
#include "util.h"

static enum rlg_outcome endpoint(const struct rlg_request *r);
static int step(struct rlg_gate *g, int64_t now_ms, struct rlg_decided *dd);
static void rule(struct rlg_decided *dd);
static enum rlg_item_outcome item_outcome(const struct rlg_verdict_items *gi,
    size_t i);
static void show(const struct rlg_verdict_items *gi, bool admitted,
    const struct rlg_decision *d, struct rlg_verdict *v);
static void judge(struct rlg_gate *g, const struct rlg_request *req,
    int64_t now_ms, bool can_hold, struct rlg_verdict *v,
    struct rlg_decided *dd);
static void decide(struct rlg_gate *g, const struct rlg_request *req,
    int64_t now_ms, bool can_hold, struct rlg_verdict *v);
static void at_once(struct rlg_decided *dd);
static void hold(struct rlg_decided *dd, struct rlg_verdict *v);

void
rlg_gate_init(struct rlg_gate *g, const struct rlg_config *cfg)
{
	memset(g, 0, sizeof *g);
	g->cfg = cfg;
	g->slot = rlg_metrics_claim();
	g->mxmap = rlg_metrics_map(cfg);
	g->tiers = rlg_tier_set_config(cfg);
	rlg_gate_log_config(&g->log, cfg);
	if (rlg_store_open(&cfg->store, &g->store) != RLG_OK)
		rlg_gate_log_store(&g->log, cfg, RLG_STORE_SAID_FAILED,
		    rlg_store_errmsg(g->store), rlg_now_ms());
	rlg_overrides_attach(&g->overrides, cfg);
}

/*
 * The tiers follow the config; so do the overrides (the reader builds
 * them for the new config from the rows it holds: their policies are
 * the old config's), and the log's hashes of the names.
 */
void
rlg_gate_reconfig(struct rlg_gate *g, const struct rlg_config *cfg)
{
	g->cfg = cfg;
	g->mxmap = rlg_metrics_map(cfg);
	rlg_gate_log_config(&g->log, cfg);
	rlg_tier_set_free(g->tiers);
	g->tiers = rlg_tier_set_config(cfg);
	rlg_overrides_switch(&g->overrides, cfg);
	g->ovr_set = NULL;
}

void
rlg_gate_fini(struct rlg_gate *g)
{
	rlg_tier_set_free(g->tiers);
	g->tiers = NULL;
	rlg_overrides_detach(&g->overrides);
	g->ovr_set = NULL;
	rlg_store_close(g->store);
	g->store = NULL;
	rlg_metrics_release(g->slot);
	g->slot = NULL;
}

/* What the responder answers a request that may pass: its endpoint. */
static enum rlg_outcome
endpoint(const struct rlg_request *r)
{
	if (!r->path_ok)
		return RLG_OUT_BAD_REQUEST;
	if (strcmp(r->path, RLG_RESOURCE_PATH) != 0)
		return RLG_OUT_NOT_FOUND;
	if (r->method != RLG_METHOD_GET && r->method != RLG_METHOD_HEAD)
		return RLG_OUT_BAD_METHOD;
	return RLG_OUT_ADMITTED;
}

/*
 * What the client sees: a dry-run policy is a trial, logged and stored but
 * never shown (a client that honours the headers would back off for a
 * limit that is not enforced), as nginx's limit_req_dry_run; a charge for
 * a new key shows only when it refuses. A rejected request is answered
 * for the enforcing policies only: a reported exemption that would also
 * reject must not set Retry-After or appear among the violated ones.
 */
static void
show(const struct rlg_verdict_items *gi, bool admitted,
    const struct rlg_decision *d, struct rlg_verdict *v)
{
	size_t i, shown = 0;

	for (i = 0; i < gi->n; i++) {
		if (gi->dry[i] || (gi->items[i].if_new && d[i].admitted))
			continue;
		v->policies[shown] = *gi->items[i].policy;
		v->decisions[shown] = d[i];
		if (!admitted && gi->items[i].advisory)
			v->decisions[shown].admitted = true;
		shown++;
	}
	v->answer.decisions = shown > 0 ? v->decisions : NULL;
	v->answer.n = shown;
}

void
rlg_gate_decide(struct rlg_gate *g, const struct rlg_params *params,
    int64_t now_ms, struct rlg_verdict *v)
{
	struct rlg_request req;

	rlg_request_read(&req, params, &g->cfg->client);
	decide(g, &req, now_ms, true, v);
}

/*
 * The store's one atomic step for dd's items at now_ms, their decisions
 * into dd->gi.d, and what the store said (and its message) into dd; one
 * step in
 * RLG_METRICS_SAMPLE is timed (dd->step_ns) when the gate counts.
 * Returns the store's result.
 */
static int
step(struct rlg_gate *g, int64_t now_ms, struct rlg_decided *dd)
{
	bool timed = g->slot != NULL &&
	    (g->steps++ & (RLG_METRICS_SAMPLE - 1)) == 0;
	int64_t t0 = timed ? rlg_mono_ns() : 0;
	int rc;

	rc = rlg_store_step(g->store, dd->gi.items, dd->gi.n, now_ms,
	    dd->gi.d);
	if (timed)
		dd->step_ns = rlg_mono_ns() - t0;
	dd->cached = rlg_store_cached(g->store);
	dd->store = rc == RLG_OK ? RLG_STORE_SAID_OK : rc == RLG_EFULL ?
	    RLG_STORE_SAID_FULL : RLG_STORE_SAID_FAILED;
	if (rc != RLG_OK)
		dd->store_msg = rlg_store_errmsg(g->store);
	return rc;
}

/*
 * What item i of a step the store answered came to. A charge for a new
 * key that did not apply reads nothing and decides nothing: the store
 * says so (rlg_decision.skipped).
 */
static enum rlg_item_outcome
item_outcome(const struct rlg_verdict_items *gi, size_t i)
{
	const struct rlg_decision *d = &gi->d[i];

	if (gi->items[i].if_new && d->skipped)
		return RLG_ITEM_SKIPPED;
	if (gi->items[i].advisory && !gi->dry[i])
		return RLG_ITEM_EXEMPT;
	if (d->admitted)
		return RLG_ITEM_ADMITTED;
	if (gi->dry[i])
		return RLG_ITEM_DRY_RUN_REJECTED;
	return RLG_ITEM_REJECTED;
}

/*
 * Each item's outcome, and the request's: admitted when every enforcing
 * item admits (advisory ones never reject); dry_rejected when a dry-run
 * item would have rejected it.
 */
static void
rule(struct rlg_decided *dd)
{
	struct rlg_verdict_items *gi = &dd->gi;
	size_t i;

	dd->admitted = true;
	dd->dry_rejected = false;
	for (i = 0; i < gi->n; i++) {
		gi->outcome[i] = item_outcome(gi, i);
		if (gi->d[i].admitted)
			continue;
		if (gi->dry[i])
			dd->dry_rejected = true;
		else if (gi->enforced[i])
			dd->admitted = false;
	}
}

/*
 * The decision for req at now_ms: the answer into *v, the whole verdict
 * into *dd (verdict.h). Its one side effect is the store's step (and
 * the overrides it reads, the step it times); it counts and logs
 * nothing: decide's observers do.
 */
static void
judge(struct rlg_gate *g, const struct rlg_request *req, int64_t now_ms,
    bool can_hold, struct rlg_verdict *v, struct rlg_decided *dd)
{
	const struct rlg_config *cfg = g->cfg;
	const struct rlg_tier_set *sets[2];
	bool guards = rlg_request_guards(req);

	memset(&v->answer, 0, sizeof v->answer);
	v->answer.role = req->role;
	v->answer.status = cfg->reject_status;
	v->answer.style = cfg->style;
	v->answer.errors = cfg->errors;
	v->answer.head = req->head;
	v->answer.policies = v->policies;
	v->route = NULL;
	v->cached = false;
	memset(dd, 0, offsetof(struct rlg_decided, gi));
	dd->req = req;
	dd->flaw = req->flaw;
	dd->flaw_about = req->flaw_about;
	dd->step_ns = -1;
	dd->admitted = true;
	dd->gi.n = 0;
	dd->gi.nexempt = 0;
	if (req->flaw != RLG_FLAW_NONE) {
		v->answer.outcome = req->flaw == RLG_FLAW_ROLE ?
		    RLG_OUT_MISCONFIGURED : RLG_OUT_BAD_REQUEST;
		return;
	}
	v->route = dd->route = rlg_gate_route(cfg, req);
	g->ovr_set = rlg_overrides_current(&g->overrides);
	sets[0] = g->ovr_set;
	sets[1] = g->tiers;
	if (rlg_gate_items(cfg, sets, req, v->route, dd) != RLG_OK) {
		v->answer.outcome = RLG_OUT_BAD_REQUEST;
		return;
	}
	dd->unguarded = guards && (v->route != NULL ? v->route->npolicies :
	    cfg->ndefault) == 0;
	if (!can_hold)
		at_once(dd);
	if (dd->gi.n > 0 && step(g, now_ms, dd) != RLG_OK) {
		v->cached = dd->cached;
		/* on_error = open: pass, with nothing to report. */
		if (cfg->store.on_error == RLG_ON_ERROR_CLOSED)
			v->answer.outcome = RLG_OUT_STORE_DOWN;
		else
			v->answer.outcome = guards ?
			    RLG_OUT_AUTHORIZED : endpoint(req);
		return;
	}
	v->cached = dd->cached;
	rule(dd);
	show(&dd->gi, dd->admitted, dd->gi.d, v);
	if (!dd->admitted) {
		v->answer.outcome = RLG_OUT_REJECTED;
		return;
	}
	v->answer.outcome = guards ? RLG_OUT_AUTHORIZED : endpoint(req);
	hold(dd, v);
}

/*
 * The front cannot hold an answer (can_hold false: its park is full):
 * each enforcing smoothing item is decided with burst = max(delay, 1),
 * its copy in gi->at_once, so only what passes at once is admitted and
 * what would wait is refused, charging nothing (dd->park_full says so).
 */
static void
at_once(struct rlg_decided *dd)
{
	struct rlg_verdict_items *gi = &dd->gi;
	struct rlg_policy *p;
	size_t i;

	gi->nat_once = 0;
	for (i = 0; i < gi->n; i++) {
		if (!gi->enforced[i] || gi->items[i].advisory ||
		    !gi->items[i].policy->smooth ||
		    gi->nat_once == RLG_POLICIES_MAX)
			continue;
		p = &gi->at_once[gi->nat_once++];
		*p = *gi->items[i].policy;
		p->lim.burst = p->delay > 1 ? p->delay : 1;
		if (p->lim.burst > gi->items[i].policy->lim.burst)
			p->lim.burst = gi->items[i].policy->lim.burst;
		gi->items[i].policy = p;
		dd->park_full = true;
	}
}

/*
 * How long an admitted request's answer waits for its turn: the longest
 * wait of its enforcing smoothing items (rlg_limiter_wait). The answer
 * then reads as at its end: each shown decision later by that much
 * (rlg_limiter_later).
 */
static void
hold(struct rlg_decided *dd, struct rlg_verdict *v)
{
	const struct rlg_verdict_items *gi = &dd->gi;
	const struct rlg_policy *p;
	int64_t w;
	size_t i;

	dd->hold_ms = 0;
	for (i = 0; i < gi->n; i++) {
		p = gi->items[i].policy;
		if (!gi->enforced[i] || gi->items[i].advisory || !p->smooth)
			continue;
		w = rlg_limiter_wait(&p->lim, p->delay,
		    rlg_store_item_cost(&gi->items[i]), &gi->d[i]);
		if (w > dd->hold_ms)
			dd->hold_ms = w;
	}
	v->answer.hold_ms = dd->hold_ms;
	for (i = 0; i < v->answer.n; i++)
		rlg_limiter_later(&v->decisions[i], dd->hold_ms);
}

/*
 * The verdict for req at now_ms (judge), the answer into *v; then its
 * observers, in this order: the log, the counters of the gate's slot.
 */
static void
decide(struct rlg_gate *g, const struct rlg_request *req, int64_t now_ms,
    bool can_hold, struct rlg_verdict *v)
{
	struct rlg_decided dd;

	judge(g, req, now_ms, can_hold, v, &dd);
	rlg_gate_log_verdict(&g->log, g->cfg, &dd, now_ms);
	rlg_metrics_verdict(g->slot, g->mxmap, &dd);
}

int
rlg_gate_answer(struct rlg_gate *g, const struct rlg_request *req,
    int64_t now_ms, const struct rlg_out *out)
{
	struct rlg_verdict v;

	decide(g, req, now_ms, out->hold_ms != NULL, &v);
	if (out->hold_ms != NULL)
		*out->hold_ms = v.answer.hold_ms;
	/* the code the client gets ([response] status for a refusal) */
	rlg_metrics_response(g->slot, rlg_response_answer_code(&v.answer),
	    false);
	return rlg_response_send(&v.answer, out);
}

void
rlg_gate_idle(struct rlg_gate *g, int64_t now_ms)
{
	int64_t deleted = 0;

	rlg_store_idle(g->store, now_ms);
	if (now_ms < g->next_prune_ms || g->log.store_failing_since_ms != 0)
		return;
	g->next_prune_ms = now_ms + RLG_PRUNE_INTERVAL_MS;
	if (rlg_store_prune(g->store, now_ms, &deleted) != RLG_OK)
		rlg_log("store prune failed: %s", rlg_store_errmsg(g->store));
}
