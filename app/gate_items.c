/*
 * gate_items.c: what a request's step is made of (gate_items.h): the
 * [route] that names its policies, what it costs, and one item per
 * policy that applies (its key, the tier or override that applies to
 * the client, whether it is advisory), with the charges for new keys.
 * Pure: it reads the config, the request and the tier sets, and writes
 * the items into the verdict's record; the gate (gate.c) steps them.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gate_items.h"
#include "net.h"
#include "path.h"
#include "util.h"

static bool find_tier(const struct rlg_tier_set *const sets[2], size_t pi,
    const struct rlg_request *req, const char *key, struct rlg_tier_match *m);
static int cost_of(const struct rlg_request *req, const struct rlg_route *rt,
    struct rlg_decided *dd);
static int gather(const struct rlg_config *cfg,
    const struct rlg_tier_set *const sets[2], const struct rlg_request *req,
    const struct rlg_route *rt, struct rlg_decided *dd);

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
const struct rlg_route *
rlg_gate_route(const struct rlg_config *cfg, const struct rlg_request *r)
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

int
rlg_gate_items(const struct rlg_config *cfg,
    const struct rlg_tier_set *const sets[2], const struct rlg_request *req,
    const struct rlg_route *rt, struct rlg_decided *dd)
{
	if (cost_of(req, rt, dd) != RLG_OK)
		return RLG_EINVAL;
	return gather(cfg, sets, req, rt, dd);
}

/* What applies to the client under policy pi: an override, else a tier. */
static bool
find_tier(const struct rlg_tier_set *const sets[2], size_t pi, const struct rlg_request *req,
    const char *key, struct rlg_tier_match *m)
{
	const struct rlg_addr *addr = req->addr_ok ? &req->addr : NULL;

	return rlg_tier_find(sets[0], pi, addr, key, m) ||
	    rlg_tier_find(sets[1], pi, addr, key, m);
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
gather(const struct rlg_config *cfg, const struct rlg_tier_set *const sets[2],
    const struct rlg_request *req, const struct rlg_route *rt,
    struct rlg_decided *dd)
{
	struct rlg_verdict_items *gi = &dd->gi;
	const size_t *list = rt != NULL ? rt->policies : cfg->default_policies;
	size_t nlist = rt != NULL ? rt->npolicies : cfg->ndefault;
	size_t i, nkeys = 0, n = 0;
	enum rlg_token token;
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
		    RLG_CLIENT_KEY_MAX + 1, &token);
		if (token > RLG_TOKEN_NONE && dd->token == RLG_TOKEN_OK)
			dd->token = token;    /* the first, for the observers */
		if (rc == RLG_EINVAL) {
			/* The key's header, cookie or parameter came twice. */
			dd->flaw = (p->key & RLG_KEY_QUERY) ?
			    RLG_FLAW_DUPLICATE_PARAM : RLG_FLAW_DUPLICATE;
			dd->flaw_about = (p->key & RLG_KEY_COOKIE) ? "Cookie" :
			    (p->key & RLG_KEY_JWT) ? "Authorization" :
			    p->key_name;
			return RLG_EINVAL;
		}
		if (rc != RLG_OK)
			snprintf(key, RLG_CLIENT_KEY_MAX + 1, "%s", req->client);
		if (!exempt && find_tier(sets, list[i], req, key, &tm) &&
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
