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
 * Logging is paced per gate (one worker thread): a store failure, the
 * store refusing new clients (max_clients) and refused requests each log
 * one line at once, then at most one per RLG_ERROR_LOG_INTERVAL_MS with
 * how many were not written; a rejection logs one line when the store
 * decides it, not when the rejection cache repeats it (but at level info).
 * A guarding role's request that no policy covers is counted and logged
 * at most once a minute per process (unguarded).
 */
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "gate.h"
#include "path.h"
#include "util.h"

/* The bytes of a path a log line shows at most (then "..."). */
#define RLG_LOG_PATH_MAX 200
/* A process logs a request no policy covered at most once a minute. */
#define RLG_UNGUARDED_LOG_INTERVAL_MS 60000

/* The items of one store step and what the gate knows of each. */
struct gate_items {
	struct rlg_store_item items[RLG_GATE_ITEMS_MAX];
	bool enforced[RLG_GATE_ITEMS_MAX];  /* may reject the request */
	bool dry[RLG_GATE_ITEMS_MAX];       /* a dry_run policy's */
	/* the policy as configured (an item's may be a tier's copy), and
	 * the tier that gave the item its limit, or NULL */
	const struct rlg_policy *base[RLG_GATE_ITEMS_MAX];
	const char *tier[RLG_GATE_ITEMS_MAX];
	size_t n;
	/* the policies the client is exempt from, not asked (counted) */
	const struct rlg_policy *exempt[RLG_POLICIES_MAX];
	size_t nexempt;
	char keys[RLG_POLICIES_MAX][RLG_CLIENT_KEY_MAX + 1];
	int64_t cost;           /* the request's (rlg_request_cost) */
};

static void store_failed(struct rlg_gate *g, int64_t now_ms);
static void unguarded(struct rlg_gate *g, const struct rlg_request *req,
    const struct rlg_route *rt, int64_t now_ms);
static void store_ok(struct rlg_gate *g, int64_t now_ms);
static void store_full(struct rlg_gate *g, int64_t now_ms);
static enum rlg_outcome endpoint(const struct rlg_request *r);
static const struct rlg_route *match_route(const struct rlg_config *cfg,
    const struct rlg_request *r);
static int gather(struct rlg_gate *g, const struct rlg_request *req,
    const struct rlg_route *rt, struct gate_items *gi, int64_t now_ms);
static int cost_of(struct rlg_gate *g, const struct rlg_request *req,
    const struct rlg_route *rt, struct gate_items *gi, int64_t now_ms);
static void log_flaw(struct rlg_gate *g, const struct rlg_request *r,
    const char *reason, const char *header, int64_t now_ms);
static void log_rejection(const struct rlg_gate *g,
    const struct rlg_request *req, const char *event,
    const struct rlg_route *rt, const struct gate_items *gi,
    const struct rlg_decision *d, const bool *which);
static bool repeat_rejection(struct rlg_gate *g,
    const struct gate_items *gi, const struct rlg_route *rt,
    const struct rlg_decision *d, int64_t now_ms);
static bool log_decisions(struct rlg_gate *g, const struct rlg_request *req,
    const struct gate_items *gi, const struct rlg_verdict *v,
    const struct rlg_decision *d, int64_t now_ms);
static void show(const struct gate_items *gi, bool admitted,
    const struct rlg_decision *d, struct rlg_verdict *v);
static void count_decisions(struct rlg_gate *g, const struct gate_items *gi,
    const struct rlg_decision *d);
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
		store_failed(g, rlg_now_ms());
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

/*
 * One line when the store starts failing, then at most one per
 * RLG_ERROR_LOG_INTERVAL_MS while it goes on, and one when it heals: the
 * error log names the fault without drowning in it.
 */
static void
store_failed(struct rlg_gate *g, int64_t now_ms)
{
	const char *mode = rlg_on_error_name(g->cfg->store.on_error);

	if (g->store_failing_since_ms == 0) {
		g->store_failing_since_ms = now_ms;
		g->next_error_log_ms = now_ms + RLG_ERROR_LOG_INTERVAL_MS;
		g->suppressed_errors = 0;
		rlg_log("store error: %s (on_error = %s)",
		    rlg_store_errmsg(g->store), mode);
	} else if (now_ms >= g->next_error_log_ms) {
		rlg_log("store still failing: %s (%ld more errors; on_error = %s)",
		    rlg_store_errmsg(g->store), g->suppressed_errors + 1, mode);
		g->next_error_log_ms = now_ms + RLG_ERROR_LOG_INTERVAL_MS;
		g->suppressed_errors = 0;
	} else {
		g->suppressed_errors++;
	}
}

static void
store_ok(struct rlg_gate *g, int64_t now_ms)
{
	if (g->store_failing_since_ms == 0)
		return;
	if (g->cfg->log_level >= RLG_LOG_WARN)
		rlg_log("store recovered after %lld ms",
		    (long long)(now_ms - g->store_failing_since_ms));
	g->store_failing_since_ms = 0;
}

/*
 * The store refused a new client (max_clients): a line at once, then at
 * most one per RLG_ERROR_LOG_INTERVAL_MS, saying how many more were
 * refused in between. The store itself works, so this is no failure.
 */
static void
store_full(struct rlg_gate *g, int64_t now_ms)
{
	const char *mode = rlg_on_error_name(g->cfg->store.on_error);

	if (now_ms < g->next_full_log_ms) {
		g->suppressed_full++;
		return;
	}
	if (g->suppressed_full > 0)
		rlg_log("%s (on_error = %s; %ld more refused since the last"
		    " line)", rlg_store_errmsg(g->store), mode,
		    g->suppressed_full);
	else
		rlg_log("%s (on_error = %s)", rlg_store_errmsg(g->store), mode);
	g->next_full_log_ms = now_ms + RLG_ERROR_LOG_INTERVAL_MS;
	g->suppressed_full = 0;
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
 * gi->cost. RLG_OK, or RLG_EINVAL when a trusted front's cost header
 * cannot be read (logged: the request must be refused, counted by no
 * policy).
 */
static int
cost_of(struct rlg_gate *g, const struct rlg_request *req,
    const struct rlg_route *rt, struct gate_items *gi, int64_t now_ms)
{
	if (rlg_request_cost(req, rt, &gi->cost) == RLG_OK)
		return RLG_OK;
	log_flaw(g, req, rlg_flaw_name(RLG_FLAW_COST), rt->cost_header,
	    now_ms);
	return RLG_EINVAL;
}

/*
 * The items of the request's step: one per policy of its route that
 * applies (an exempt client skips a policy, or is only reported with
 * report_exempt), each keyed by the policy's key and charged the
 * request's cost (gi->cost: cost_of), and after a key taken from a
 * header, the charge for a new key of the policy's bound (always 1: it
 * counts keys, not requests). RLG_OK, or RLG_EINVAL when a key header
 * came twice (logged: the request must be refused).
 */
static int
gather(struct rlg_gate *g, const struct rlg_request *req,
    const struct rlg_route *rt, struct gate_items *gi, int64_t now_ms)
{
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
			log_flaw(g, req, rlg_flaw_name(RLG_FLAW_DUPLICATE),
			    p->key_header, now_ms);
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
 * A request rlgate refuses unread (a flaw, or an API key header sent
 * twice): one line at once, then at most one per RLG_ERROR_LOG_INTERVAL_MS
 * with how many more came in between, so a flood of them costs no disk.
 * Only the peer's key and fixed words are written, never request bytes.
 */
static void
log_flaw(struct rlg_gate *g, const struct rlg_request *r,
    const char *reason, const char *header, int64_t now_ms)
{
	if (g->cfg->log_level < RLG_LOG_WARN)
		return;
	if (now_ms < g->next_flaw_log_ms) {
		g->suppressed_flaws++;
		return;
	}
	rlg_log("event=bad_request peer=%s reason=%s header=%s suppressed=%ld",
	    r->client, reason, header != NULL ? header : "-",
	    g->suppressed_flaws);
	g->next_flaw_log_ms = now_ms + RLG_ERROR_LOG_INTERVAL_MS;
	g->suppressed_flaws = 0;
}

/*
 * A guarding front asked about a request that no policy covers (its
 * route has policies = none, or it matched no route and there is no
 * [policy default]): admitted unlimited, as configured, but counted
 * (rlgate_unguarded_total, by role) and logged, "event=unguarded role=
 * path= route=", at most once per RLG_UNGUARDED_LOG_INTERVAL_MS per
 * process (one pacer for every thread, taken by compare-and-swap), with
 * how many were not logged since the last line (suppressed=, this
 * process's): a front pointed at rlgate for paths it does not limit
 * would otherwise write a line per request.
 */
static void
unguarded(struct rlg_gate *g, const struct rlg_request *req,
    const struct rlg_route *rt, int64_t now_ms)
{
	static int64_t next_ms;
	static uint64_t suppressed;
	char path[RLG_LOG_PATH_MAX * 3 + 4];
	int64_t next;
	uint64_t n;

	rlg_metrics_unguarded(g->slot, req->role);
	if (g->cfg->log_level < RLG_LOG_WARN)
		return;
	next = __atomic_load_n(&next_ms, __ATOMIC_RELAXED);
	if (now_ms < next || !__atomic_compare_exchange_n(&next_ms, &next,
	    now_ms + RLG_UNGUARDED_LOG_INTERVAL_MS, false, __ATOMIC_RELAXED,
	    __ATOMIC_RELAXED)) {
		(void)__atomic_add_fetch(&suppressed, 1, __ATOMIC_RELAXED);
		return;
	}
	n = __atomic_exchange_n(&suppressed, 0, __ATOMIC_RELAXED);
	(void)rlg_log_token(path, sizeof path, req->path, RLG_LOG_PATH_MAX);
	rlg_log("event=unguarded role=%s path=%s route=%s suppressed=%llu",
	    rlg_metrics_guard_name((size_t)req->role - 1),
	    path[0] != '\0' ? path : "-", rt != NULL ? rt->name : "-",
	    (unsigned long long)n);
}

/*
 * The tiers of a rejection's line: when a tier or an override gave one
 * of the rejecting policies its limit, " tier=A,B limit=N,M", one word
 * per rejecting policy in the order of policy= ("-" for none: the
 * policy's own limit); else "".
 */
static void
tier_words(const struct gate_items *gi, const struct rlg_decision *d,
    const bool *which, char *out, size_t size)
{
	char limits[512] = "";
	size_t i, used = 0, lused = 0;
	bool any = false;
	int k, l;

	out[0] = '\0';
	for (i = 0; i < gi->n; i++)
		if (!d[i].admitted && which[i] && gi->tier[i] != NULL)
			any = true;
	if (!any)
		return;
	for (i = 0; i < gi->n; i++) {
		if (d[i].admitted || !which[i])
			continue;
		k = snprintf(out + used, size - used, "%s%s",
		    used == 0 ? " tier=" : ",",
		    gi->tier[i] != NULL ? gi->tier[i] : "-");
		l = snprintf(limits + lused, sizeof limits - lused, "%s%lld",
		    lused == 0 ? "" : ",",
		    (long long)gi->items[i].policy->lim.limit);
		if (k < 0 || (size_t)k >= size - used || l < 0 ||
		    (size_t)l >= sizeof limits - lused)
			break;
		used += (size_t)k;
		lused += (size_t)l;
	}
	snprintf(out + used, size - used, " limit=%s", limits);
}

/*
 * One line per rejection the store decides (and per dry-run would-be
 * rejection), in a stable key=value form for log tools: the client's
 * store key (an API key only as its hash), the route, the policies that
 * said no (those which[i] selects), when the client may come back, the
 * request's cost when above 1 with the units the refusing policies still
 * had (left=, the fewest: a smaller request could take them; the answer
 * shows 0, response.c), and the request's method and path.
 * Nothing from the request is written raw: the method and path as log
 * tokens (rlg_log_token: percent-encoded, the path cut at
 * RLG_LOG_PATH_MAX bytes).
 */
static void
log_rejection(const struct rlg_gate *g, const struct rlg_request *req,
    const char *event, const struct rlg_route *rt,
    const struct gate_items *gi, const struct rlg_decision *d,
    const bool *which)
{
	char names[512], method[RLG_METHOD_MAX * 3 + 4];
	char path[RLG_LOG_PATH_MAX * 3 + 4], cost[64], tiers[1024];
	size_t n;
	const char *client = NULL;
	int64_t retry_ms = 0, left = 0;
	size_t i, used = 0;
	int k;

	if (g->cfg->log_level < RLG_LOG_WARN)
		return;
	names[0] = '\0';
	for (i = 0; i < gi->n; i++) {
		if (d[i].admitted || !which[i])
			continue;
		if (client == NULL || d[i].remaining < left)
			left = d[i].remaining;
		if (client == NULL)
			client = gi->items[i].client;
		if (d[i].retry_ms > retry_ms)
			retry_ms = d[i].retry_ms;
		k = snprintf(names + used, sizeof names - used, "%s%s",
		    used > 0 ? "," : "", gi->items[i].policy->name);
		if (k < 0 || (size_t)k >= sizeof names - used)
			break;
		used += (size_t)k;
	}
	if (client == NULL)
		return;
	tier_words(gi, d, which, tiers, sizeof tiers);
	n = rlg_log_token(method, sizeof method, req->method_name,
	    RLG_METHOD_MAX);
	if (!req->method_ok)    /* longer than the request keeps: cut */
		memcpy(method + n, "...", 4);
	(void)rlg_log_token(path, sizeof path, req->path, RLG_LOG_PATH_MAX);
	cost[0] = '\0';
	if (gi->cost > 1)
		snprintf(cost, sizeof cost, " cost=%lld left=%lld",
		    (long long)gi->cost, (long long)(left > 0 ? left : 0));
	rlg_log("event=%s client=%s route=%s policy=%s retry_after_s=%lld%s%s"
	    " method=%s path=%s", event, client, rt != NULL ? rt->name : "-",
	    names, (long long)rlg_response_seconds(retry_ms), cost, tiers,
	    method[0] != '\0' ? method : "-", path[0] != '\0' ? path : "-");
}

/*
 * Whether a rejection repeats one this thread logged: the same client,
 * route and rejecting policies, before the Retry-After that line gave.
 * What the rejection cache tells of the repeats it answers, for a store
 * that answers them itself (the decision table); remembered by a 64-bit
 * hash, the latest of each slot. As the cache, rejection_cache = 0 turns
 * it off: every rejection logged.
 */
static bool
repeat_rejection(struct rlg_gate *g, const struct gate_items *gi,
    const struct rlg_route *rt, const struct rlg_decision *d, int64_t now_ms)
{
	uint64_t h = 14695981039346656037ULL;   /* FNV-1a */
	struct rlg_gate_seen *seen;
	int64_t retry_ms = 0;
	const unsigned char *c;
	size_t i;

	for (i = 0; i < gi->n; i++) {
		if (d[i].admitted || !gi->enforced[i])
			continue;
		if (d[i].retry_ms > retry_ms)
			retry_ms = d[i].retry_ms;
		for (c = (const unsigned char *)gi->items[i].policy->name;
		    *c != '\0'; c++)
			h = (h ^ *c) * 1099511628211ULL;
		h = (h ^ 0xff) * 1099511628211ULL;
		for (c = (const unsigned char *)gi->items[i].client;
		    *c != '\0'; c++)
			h = (h ^ *c) * 1099511628211ULL;
		h = (h ^ 0xfe) * 1099511628211ULL;
	}
	for (c = (const unsigned char *)(rt != NULL ? rt->name : "");
	    *c != '\0'; c++)
		h = (h ^ *c) * 1099511628211ULL;
	seen = &g->seen[h % RLG_GATE_SEEN];
	if (seen->hash == h && now_ms < seen->until_ms)
		return true;
	seen->hash = h;
	seen->until_ms = now_ms + retry_ms;
	return false;
}

/*
 * Logs what the step decided, and returns whether the request is
 * admitted: every enforcing item admits (advisory ones never reject). A
 * repeat rejection (answered by the rejection cache, or repeat_rejection
 * while there is one: rejection_cache > 0) is the same decision as the
 * one logged before it: logged again only at level info, so a flood does
 * not write a line per request.
 */
static bool
log_decisions(struct rlg_gate *g, const struct rlg_request *req,
    const struct gate_items *gi, const struct rlg_verdict *v,
    const struct rlg_decision *d, int64_t now_ms)
{
	bool admitted = true, dry_rejected = false;
	size_t i;

	for (i = 0; i < gi->n; i++) {
		if (d[i].admitted)
			continue;
		if (gi->dry[i])
			dry_rejected = true;
		else if (gi->enforced[i])
			admitted = false;
	}
	if (!admitted && (g->cfg->log_level >= RLG_LOG_INFO ||
	    (!v->cached && (g->cfg->store.rejection_cache == 0 ||
	    !repeat_rejection(g, gi, v->route, d, now_ms)))))
		log_rejection(g, req, "reject", v->route, gi, d, gi->enforced);
	else if (admitted && gi->n > 0 && g->cfg->log_level >= RLG_LOG_INFO)
		rlg_log("event=admit client=%s route=%s", gi->items[0].client,
		    v->route != NULL ? v->route->name : "-");
	if (dry_rejected)
		log_rejection(g, req, "dry_run_reject", v->route, gi, d,
		    gi->dry);
	return admitted;
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
show(const struct gate_items *gi, bool admitted, const struct rlg_decision *d,
    struct rlg_verdict *v)
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

/*
 * What each policy decided for the request, counted (rlgate_requests_total):
 * an exempt client's policies as exempt (asked or not), a charge for a
 * new key only when it applied (a skipped one reads nothing and decides
 * nothing: rlg_store_skipped's all-clear with no reset).
 */
static void
count_decisions(struct rlg_gate *g, const struct gate_items *gi,
    const struct rlg_decision *d)
{
	enum rlg_metric_decision md;
	size_t i;

	if (g->slot == NULL)
		return;
	for (i = 0; i < gi->n; i++) {
		if (gi->items[i].if_new && d[i].admitted && d[i].reset_ms == 0 &&
		    d[i].retry_ms == 0 && d[i].remaining == d[i].limit)
			continue;
		if (gi->items[i].advisory && !gi->dry[i])
			md = RLG_MD_EXEMPT;
		else if (d[i].admitted)
			md = RLG_MD_ADMITTED;
		else if (gi->dry[i])
			md = RLG_MD_DRY_RUN_REJECTED;
		else
			md = RLG_MD_REJECTED;
		rlg_metrics_decision(g->slot, g->mxmap, gi->base[i], md);
	}
}

void
rlg_gate_decide(struct rlg_gate *g, const struct rlg_params *params,
    int64_t now_ms, struct rlg_verdict *v)
{
	struct rlg_request req;

	rlg_request_read(&req, params, &g->cfg->client);
	decide(g, &req, now_ms, v);
}

static void
decide(struct rlg_gate *g, const struct rlg_request *req, int64_t now_ms,
    struct rlg_verdict *v)
{
	const struct rlg_config *cfg = g->cfg;
	struct rlg_decision d[RLG_GATE_ITEMS_MAX];
	struct gate_items gi;
	bool guards, timed;
	int64_t t0 = 0;
	size_t i;
	int rc;

	guards = rlg_request_guards(req);
	memset(&v->answer, 0, sizeof v->answer);
	v->answer.role = req->role;
	v->answer.status = cfg->reject_status;
	v->answer.style = cfg->style;
	v->answer.errors = cfg->errors;
	v->answer.head = req->head;
	v->answer.policies = v->policies;
	v->route = NULL;
	v->cached = false;
	if (req->flaw != RLG_FLAW_NONE) {
		log_flaw(g, req, rlg_flaw_name(req->flaw),
		    req->flaw_about, now_ms);
		v->answer.outcome = req->flaw == RLG_FLAW_ROLE ?
		    RLG_OUT_MISCONFIGURED : RLG_OUT_BAD_REQUEST;
		return;
	}
	v->route = match_route(cfg, req);
	g->ovr_set = rlg_overrides_current(&g->overrides);
	if (cost_of(g, req, v->route, &gi, now_ms) != RLG_OK ||
	    gather(g, req, v->route, &gi, now_ms) != RLG_OK) {
		v->answer.outcome = RLG_OUT_BAD_REQUEST;
		return;
	}
	if (guards && (v->route != NULL ? v->route->npolicies :
	    cfg->ndefault) == 0)
		unguarded(g, req, v->route, now_ms);
	for (i = 0; i < gi.nexempt; i++)
		rlg_metrics_decision(g->slot, g->mxmap, gi.exempt[i],
		    RLG_MD_EXEMPT);
	if (gi.n > 0) {
		timed = g->slot != NULL &&
		    (g->steps++ & (RLG_METRICS_SAMPLE - 1)) == 0;
		if (timed)
			t0 = rlg_mono_ns();
		rc = rlg_store_step(g->store, gi.items, gi.n, now_ms, d);
		if (timed)
			rlg_metrics_step_time(g->slot, rlg_mono_ns() - t0);
		v->cached = rlg_store_cached(g->store);
		if (rc != RLG_OK) {
			rlg_metrics_store_error(g->slot);
			if (rc == RLG_EFULL) {
				store_ok(g, now_ms);
				store_full(g, now_ms);
			} else {
				store_failed(g, now_ms);
			}
			/* on_error = open: pass, with nothing to report. */
			if (cfg->store.on_error == RLG_ON_ERROR_CLOSED)
				v->answer.outcome = RLG_OUT_STORE_DOWN;
			else
				v->answer.outcome = guards ?
				    RLG_OUT_AUTHORIZED : endpoint(req);
			return;
		}
		store_ok(g, now_ms);
		if (v->cached)
			rlg_metrics_cache_hit(g->slot);
		count_decisions(g, &gi, d);
	}
	if (!log_decisions(g, req, &gi, v, d, now_ms)) {
		show(&gi, false, d, v);
		v->answer.outcome = RLG_OUT_REJECTED;
		return;
	}
	show(&gi, true, d, v);
	v->answer.outcome = guards ? RLG_OUT_AUTHORIZED : endpoint(req);
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
	if (now_ms < g->next_prune_ms || g->store_failing_since_ms != 0)
		return;
	g->next_prune_ms = now_ms + RLG_PRUNE_INTERVAL_MS;
	if (rlg_store_prune(g->store, now_ms, &deleted) != RLG_OK)
		rlg_log("store prune failed: %s", rlg_store_errmsg(g->store));
}
