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
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "gate.h"
#include "gate_log.h"
#include "path.h"
#include "util.h"

static enum rlg_outcome endpoint(const struct rlg_request *r);
static const struct rlg_route *match_route(const struct rlg_config *cfg,
    const struct rlg_request *r);
static int gather(struct rlg_gate *g, const struct rlg_request *req,
    const struct rlg_route *rt, struct rlg_decided *dd);
static int cost_of(const struct rlg_request *req, const struct rlg_route *rt,
    struct rlg_decided *dd);
static int step(struct rlg_gate *g, int64_t now_ms, struct rlg_decided *dd);
static void rule(struct rlg_decided *dd);
static enum rlg_item_outcome item_outcome(const struct rlg_verdict_items *gi,
    size_t i);
static void show(const struct rlg_verdict_items *gi, bool admitted,
    const struct rlg_decision *d, struct rlg_verdict *v);
static void judge(struct rlg_gate *g, const struct rlg_request *req,
    int64_t now_ms, struct rlg_verdict *v, struct rlg_decided *dd);
static void decide(struct rlg_gate *g, const struct rlg_request *req,
    int64_t now_ms, struct rlg_verdict *v);

void
rlg_gate_init(struct rlg_gate *g, const struct rlg_config *cfg)
{
	memset(g, 0, sizeof *g);
	g->cfg = cfg;
	g->slot = rlg_metrics_claim();
	g->mxmap = rlg_metrics_map(cfg);
	g->tiers = rlg_tier_set_config(cfg);
	if (rlg_store_open(&cfg->store, &g->store) != RLG_OK)
		rlg_gate_log_store(&g->log, cfg, RLG_STORE_SAID_FAILED,
		    rlg_store_errmsg(g->store), rlg_now_ms());
	rlg_overrides_attach(&g->overrides, cfg);
}

/*
 * The tiers follow the config; so do the overrides (the reader builds
 * them for the new config from the rows it holds: their policies are
 * the old config's).
 */
void
rlg_gate_reconfig(struct rlg_gate *g, const struct rlg_config *cfg)
{
	g->cfg = cfg;
	g->mxmap = rlg_metrics_map(cfg);
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
 * The first [route] whose path and method match decides the policies; a
 * request no route matches gets the default policies (every policy when
 * there are no routes). NULL: no route matched. A route with path_match
 * = normalized compares the request's path as rlg_path_route
 * spells it, one trailing slash aside (a prefix "/a/" takes "/a" too),
 * so the spellings a backend serves as the route's resource count under
 * it; bytes compares the decoded path. A route that lists GET takes HEAD
 * too, as every server answers HEAD with GET's headers; a method too
 * long to read matches no list.
 */
static const struct rlg_route *
match_route(const struct rlg_config *cfg, const struct rlg_request *r)
{
	char norm[RLG_PATH_MAX + 1];
	bool have_norm = false;
	size_t i, j, n;

	if (!r->path_ok)
		return NULL;
	for (i = 0; i < cfg->nroutes; i++) {
		const struct rlg_route *rt = &cfg->routes[i];
		const char *path = r->path, *want = rt->path;
		bool method_ok = rt->nmethods == 0;

		if (rt->match_path != NULL) {
			if (!have_norm) {
				if (rlg_path_route(r->path, norm,
				    sizeof norm) != RLG_OK)
					norm[0] = '\0';
				rlg_path_route_slash(norm);
				have_norm = true;
			}
			path = norm;
			want = rt->match_path;
		}
		n = strlen(want);
		if (!rt->prefix ? strcmp(path, want) != 0 :
		    strncmp(path, want, n) != 0 && !(rt->match_path != NULL &&
		    n > 1 && want[n - 1] == '/' && strlen(path) == n - 1 &&
		    strncmp(path, want, n - 1) == 0))
			continue;
		for (j = 0; j < rt->nmethods && !method_ok && r->method_ok; j++)
			method_ok = strcmp(rt->methods[j], r->method_name) == 0 ||
			    (r->method == RLG_METHOD_HEAD &&
			    strcmp(rt->methods[j], "GET") == 0);
		if (method_ok)
			return rt;
	}
	return NULL;
}

/* What applies to the client under policy pi: an override, else a tier. */
static bool
find_tier(const struct rlg_gate *g, size_t pi, const struct rlg_request *req,
    const char *key, struct rlg_tier_match *m)
{
	const struct rlg_addr *addr = req->addr_ok ? &req->addr : NULL;

	return rlg_tier_find(g->ovr_set, pi, addr, key, m) ||
	    rlg_tier_find(g->tiers, pi, addr, key, m);
}

/*
 * What the request costs (rlg_request_cost: the route's fixed cost, or
 * its trusted front's header, else cost_max; 1 without a route) into
 * dd->gi.cost. RLG_OK, or RLG_EINVAL when a trusted front's cost header
 * cannot be read (the flaw in dd: the request must be refused, counted
 * by no policy).
 */
static int
cost_of(const struct rlg_request *req, const struct rlg_route *rt,
    struct rlg_decided *dd)
{
	if (rlg_request_cost(req, rt, &dd->gi.cost) == RLG_OK)
		return RLG_OK;
	dd->flaw = RLG_FLAW_COST;
	/* only a route's cost header can be unreadable */
	dd->flaw_about = rt != NULL ? rt->cost_header : NULL;
	return RLG_EINVAL;
}

/*
 * The items of the request's step: one per policy of its route that
 * applies (an exempt client skips a policy, or is only reported with
 * report_exempt), each keyed by the policy's key and charged the
 * request's cost (gi->cost: cost_of), and after a key taken from a
 * header, the charge for a new key of the policy's bound (always 1: it
 * counts keys, not requests), into dd->gi. RLG_OK, or RLG_EINVAL when
 * a key header came twice (the flaw in dd: the request must be refused).
 */
static int
gather(struct rlg_gate *g, const struct rlg_request *req,
    const struct rlg_route *rt, struct rlg_decided *dd)
{
	struct rlg_verdict_items *gi = &dd->gi;
	const struct rlg_config *cfg = g->cfg;
	const size_t *list = rt != NULL ? rt->policies : cfg->default_policies;
	size_t nlist = rt != NULL ? rt->npolicies : cfg->ndefault;
	size_t i, nkeys = 0, n = 0;
	int rc;

	gi->nexempt = 0;
	for (i = 0; i < nlist && nkeys < RLG_POLICIES_MAX; i++) {
		const struct rlg_policy *p = &cfg->policies[list[i]];
		bool exempt = req->addr_ok &&
		    (rlg_cidr_any(cfg->client.exempt, cfg->client.nexempt,
		    &req->addr) || rlg_cidr_any(p->exempt, p->nexempt,
		    &req->addr));
		char *key = gi->keys[nkeys++];
		struct rlg_tier_match tm = { NULL, false, NULL };

		if (exempt && !cfg->report_exempt) {
			gi->exempt[gi->nexempt++] = p;
			continue;
		}
		rc = rlg_request_policy_key(req, p, &cfg->client, key,
		    RLG_CLIENT_KEY_MAX + 1);
		if (rc == RLG_EINVAL) {
			dd->flaw = RLG_FLAW_DUPLICATE;
			dd->flaw_about = p->key_header;
			return RLG_EINVAL;
		}
		if (rc != RLG_OK)
			snprintf(key, RLG_CLIENT_KEY_MAX + 1, "%s", req->client);
		if (!exempt && find_tier(g, list[i], req, key, &tm) &&
		    tm.exempt) {
			exempt = true;
			if (!cfg->report_exempt) {
				gi->exempt[gi->nexempt++] = p;
				continue;
			}
		}
		gi->items[n].policy = tm.policy != NULL ? tm.policy : p;
		gi->base[n] = p;
		gi->tier[n] = tm.source;
		gi->items[n].client = key;
		gi->items[n].advisory = exempt || p->mode == RLG_MODE_DRY_RUN;
		gi->items[n].if_new = false;
		gi->items[n].cost = gi->cost;
		gi->enforced[n] = !gi->items[n].advisory;
		/* A reported exemption is not a dry run: never logged. */
		gi->dry[n] = !exempt && p->mode == RLG_MODE_DRY_RUN;
		n++;
		/*
		 * A key from the header (not the address fallback) that the
		 * store holds nothing for costs its client address one of
		 * the policy's new keys: one address cannot mint keys until
		 * the store is full and lock everyone else out.
		 */
		if (p->new_keys_policy != NULL && strcmp(key, req->client) != 0) {
			gi->items[n] = gi->items[n - 1];
			gi->items[n].policy = p->new_keys_policy;
			gi->base[n] = p->new_keys_policy;
			gi->tier[n] = NULL;
			gi->items[n].client = req->client;
			gi->items[n].if_new = true;
			gi->items[n].cost = 1;      /* one key, whatever the cost */
			gi->enforced[n] = gi->enforced[n - 1];
			gi->dry[n] = gi->dry[n - 1];
			n++;
		}
	}
	gi->n = n;
	return RLG_OK;
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
	decide(g, &req, now_ms, v);
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
    struct rlg_verdict *v, struct rlg_decided *dd)
{
	const struct rlg_config *cfg = g->cfg;
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
	v->route = dd->route = match_route(cfg, req);
	g->ovr_set = rlg_overrides_current(&g->overrides);
	if (cost_of(req, v->route, dd) != RLG_OK ||
	    gather(g, req, v->route, dd) != RLG_OK) {
		v->answer.outcome = RLG_OUT_BAD_REQUEST;
		return;
	}
	dd->unguarded = guards && (v->route != NULL ? v->route->npolicies :
	    cfg->ndefault) == 0;
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
	if (!dd->admitted)
		v->answer.outcome = RLG_OUT_REJECTED;
	else
		v->answer.outcome = guards ? RLG_OUT_AUTHORIZED : endpoint(req);
}

/*
 * The verdict for req at now_ms (judge), the answer into *v; then its
 * observers, in this order: the log, the counters of the gate's slot.
 */
static void
decide(struct rlg_gate *g, const struct rlg_request *req, int64_t now_ms,
    struct rlg_verdict *v)
{
	struct rlg_decided dd;

	judge(g, req, now_ms, v, &dd);
	rlg_gate_log_verdict(&g->log, g->cfg, &dd, now_ms);
	rlg_metrics_verdict(g->slot, g->mxmap, &dd);
}

int
rlg_gate_handle(struct rlg_gate *g, const struct rlg_params *params,
    int64_t now_ms, const struct rlg_out *out)
{
	struct rlg_verdict v;
	struct rlg_request req;
	enum rlg_admin_endpoint e;
	int rc;

	rlg_request_read(&req, params, &g->cfg->client);
	e = req.flaw == RLG_FLAW_NONE ? rlg_admin_match(g->cfg, &req) :
	    RLG_ADMIN_NONE;
	if (e == RLG_ADMIN_PASS) {
		memset(&v.answer, 0, sizeof v.answer);
		v.answer.outcome = RLG_OUT_AUTHORIZED;
		v.answer.role = req.role;
		v.answer.style = g->cfg->style;
		rlg_metrics_response(g->slot, 200, true);
		return rlg_response_send(&v.answer, out);
	}
	if (e != RLG_ADMIN_NONE) {
		rc = rlg_admin_answer(g->cfg, g->store, e, &req, now_ms, out);
		if (rc > 0)
			rlg_metrics_response(g->slot, rc, true);
		return rc < 0 ? rc : 0;
	}
	decide(g, &req, now_ms, &v);
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
