/*
 * config_check.c: the checks that span keys or sections, run once the
 * whole file is read, since the keys may come in any order: burst needs
 * an algorithm that has one, an algorithm's cap on the limit, a header
 * key needs [client] key_secret, a route names policies that may come
 * later in the file, a route's cost (or cost_max) fits each of its
 * policies, the [store] keys that belong to one backend, and what
 * commit = auto resolves to. Their problems carry the line of the key at
 * fault (or of the section header, for a key that is missing), so the
 * sort puts them in place.
 *
 * Called by the loader (config_load.c) after the last line; what it
 * knows of an algorithm it asks the limiter's descriptor.
 */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_priv.h"
#include "path.h"
#include "store_backends.h"
#include "util.h"

/* The instant rlg_burst_above asks the limiter about (any will do). */
#define RLG_BURST_PROBE_MS 1700000000000LL

static void rlg_new_keys_policy(struct rlg_parse *p, struct rlg_policy *pol,
    size_t i);
static void rlg_delay_check(struct rlg_parse *p,
    const struct rlg_policy *pol, const char *label, int line);
static void rlg_burst_above(struct rlg_parse *p,
    const struct rlg_policy *pol, const char *label, int line);
static void rlg_table_finish(struct rlg_parse *p);
static void rlg_global_finish(struct rlg_parse *p);
static void rlg_global_no_ban(struct rlg_parse *p);
static void rlg_table_checks(struct rlg_parse *p, int commit);
static void rlg_route_cost_check(struct rlg_parse *p,
    const struct rlg_route *r, const struct rlg_build *b, size_t scope);
static void rlg_route_match_path(struct rlg_parse *p, struct rlg_route *r,
    const struct rlg_build *b, size_t scope);

/*
 * After the whole file: the checks that span keys of one policy, the
 * burst default, the key_secret a header key needs, and the policies of
 * the file in place of the built-in one. A policy whose algorithm was bad
 * (already reported) is not checked further: its algorithm is unknown.
 */
void
rlg_policies_finish(struct rlg_parse *p)
{
	const struct rlg_set_lines *alg, *limit, *burst, *key, *delay, *after;
	const struct rlg_algorithm_desc *a;
	struct rlg_policy *pol;
	char names[128];
	const char *label;
	size_t i;
	bool secret_set, jwt_set;

	/* A key_secret (a jwt_key) that was set but bad is reported for
	 * itself. */
	secret_set = rlg_lines(p, 0, "client", "key_secret")->first != 0;
	jwt_set = rlg_lines(p, 0, "client", "jwt_key")->first != 0;
	for (i = 0; i < p->npols; i++) {
		pol = &p->pols[i];
		label = p->builds[i].label;
		alg = rlg_lines(p, 1 + i, "policy", "algorithm");
		limit = rlg_lines(p, 1 + i, "policy", "limit");
		burst = rlg_lines(p, 1 + i, "policy", "burst");
		key = rlg_lines(p, 1 + i, "policy", "key");
		delay = rlg_lines(p, 1 + i, "policy", "delay");
		after = rlg_lines(p, 1 + i, "policy", "ban_after");
		if (burst->ok == 0)
			pol->lim.burst = pol->lim.limit;
		pol->smooth = delay->ok != 0;
		if (after->ok == 0)
			pol->lim.ban_after = 1;
		else if (pol->lim.ban_ms == 0 && pol->lim.ban_after > 1)
			rlg_problem(p, after->ok, "%s ban_after: applies only "
			    "with ban (seconds > 0)", label);
		if (key->ok != 0 && (pol->key & RLG_KEY_CHOSEN) != 0 &&
		    !secret_set)
			rlg_problem(p, key->ok, "%s key: header, cookie, "
			    "query and jwt keys are stored hashed: set [client] "
			    "key_secret (at least %d random bytes, e.g. openssl "
			    "rand -hex 32)", label, RLG_KEY_SECRET_MIN);
		if (key->ok != 0 && (pol->key & RLG_KEY_JWT) != 0 && !jwt_set)
			rlg_problem(p, key->ok, "%s key: jwt:CLAIM reads "
			    "verified bearer tokens: set [client] jwt_key (the "
			    "file of the HS256 secret, or of the RS256 or ES256 "
			    "public key)", label);
		if (alg->ok == 0 && alg->first != 0)
			continue;
		a = rlg_policy_alg(pol);
		if (burst->ok != 0 && !a->has_burst)
			rlg_problem(p, burst->ok, "%s burst: applies only "
			    "to algorithm = %s", label,
			    rlg_burst_algorithms(names, sizeof names));
		else if (burst->ok != 0)
			rlg_burst_above(p, pol, label, burst->ok);
		if (delay->ok != 0)
			rlg_delay_check(p, pol, label, delay->ok);
		if (limit->ok != 0 && pol->lim.limit > a->limit_max)
			rlg_problem(p, limit->ok, "%s limit: %s %s: at most "
			    "%lld (got \"%lld\")", label, a->name,
			    a->limit_why, (long long)a->limit_max,
			    (long long)pol->lim.limit);
	}
	for (i = 0; i < p->npols; i++)
		rlg_new_keys_policy(p, &p->pols[i], i);
	if (p->npols > 0) {
		for (i = 0; i < p->cfg->npolicies; i++)
			rlg_policy_free_fields(&p->cfg->policies[i]);
		free(p->cfg->policies);
		p->cfg->policies = rlg_xcalloc(p->npols,
		    sizeof *p->cfg->policies);
		memcpy(p->cfg->policies, p->pols, p->npols * sizeof *p->pols);
		p->cfg->npolicies = p->npols;
	}
	free(p->pols);
	free(p->builds);
}

/*
 * delay = N: only an algorithm that smooths has turns to wait for, and
 * more than burst would never hold (the bucket admits at most burst at
 * once); a dry_run policy never holds (it decides nothing).
 */
static void
rlg_delay_check(struct rlg_parse *p, const struct rlg_policy *pol,
    const char *label, int line)
{
	const struct rlg_algorithm_desc *a = rlg_policy_alg(pol);
	char names[128];

	if (!a->smooths)
		rlg_problem(p, line, "%s delay: applies only to algorithm = "
		    "%s (%s has no turns to wait for)", label,
		    rlg_algorithms_that(names, sizeof names, true), a->name);
	else if (pol->delay > pol->lim.burst)
		rlg_problem(p, line, "%s delay: %lld is above the burst "
		    "(%lld): at most burst requests fit at once, so none would "
		    "ever wait (omit delay to answer every admitted request at "
		    "once)", label, (long long)pol->delay,
		    (long long)pol->lim.burst);
}

/*
 * A token bucket holds burst requests, but the headers show its limit
 * (RateLimit-Limit, X-RateLimit-Limit, the ietf q=): a new client's
 * first request leaves burst - 1 (fewer when the limiter caps a huge
 * tolerance), so with a burst above limit + 1 the answer shows more
 * remaining than the limit, which clients read as a bug. Allowed (the
 * bucket does what it says), said as a warning at burst's line with
 * what the client will see: the limiter's own answer to a new client's
 * first request (pure: any now will do).
 */
static void
rlg_burst_above(struct rlg_parse *p, const struct rlg_policy *pol,
    const char *label, int line)
{
	struct rlg_state in, out;
	struct rlg_decision d;

	memset(&in, 0, sizeof in);
	if (rlg_limiter_step(&pol->lim, &in, RLG_BURST_PROBE_MS, 1,
	    &out, &d) != RLG_OK || d.remaining <= d.limit)
		return;
	rlg_problem(p, line, "%s burst: %lld is above the limit (%lld): a new "
	    "client's first request is answered RateLimit-Limit: %lld and "
	    "RateLimit-Remaining: %lld (the bucket holds burst, the headers "
	    "show the limit), more left than the limit, which surprises "
	    "clients; a burst up to %lld keeps Remaining within Limit", label,
	    (long long)pol->lim.burst, (long long)pol->lim.limit,
	    (long long)d.limit, (long long)d.remaining,
	    (long long)pol->lim.limit + 1);
	p->problems[p->nproblems - 1].warning = true;
}

/*
 * The bound on new keys of pols[i], a policy keyed by a header: a fixed
 * window of new_keys per the policy's window, counted per client address
 * under its own name, NAME.new_keys (the store charges it only for a key
 * it holds no live state for; see struct rlg_store_item). Without a
 * header key there is nothing to mint: the key is reported if set,
 * ignored if not.
 */
static void
rlg_new_keys_policy(struct rlg_parse *p, struct rlg_policy *pol, size_t i)
{
	const char *label = p->builds[i].label;
	struct rlg_policy *charge;
	int new_keys_line, key_line;
	int64_t max;
	size_t len;

	new_keys_line = rlg_lines(p, 1 + i, "policy", "new_keys_per_ip")->ok;
	key_line = rlg_lines(p, 1 + i, "policy", "key")->ok;
	if ((pol->key & RLG_KEY_CHOSEN) == 0) {
		if (new_keys_line != 0)
			rlg_problem(p, new_keys_line, "%s new_keys_per_ip: "
			    "applies only to a key with header:NAME, "
			    "cookie:NAME, query:NAME or jwt:CLAIM", label);
		return;
	}
	/*
	 * One address may then hold every row the store allows: say so
	 * (the bound's window may be short, so this is no error).
	 */
	max = p->cfg->store.sqlite.max_clients;
	if (rlg_backend_has(p->cfg->store.backend, RLG_BACKEND_FILES) &&
	    max > 0 && (pol->new_keys == 0 || pol->new_keys >= max)) {
		rlg_problem(p, new_keys_line != 0 ? new_keys_line : key_line,
		    "%s new_keys_per_ip: %lld%s lets one address start as "
		    "many keys as [store] max_clients (%lld) holds, and lock "
		    "every new client out", label, (long long)pol->new_keys,
		    pol->new_keys == 0 ? " (no bound)" : "",
		    (long long)p->cfg->store.sqlite.max_clients);
		p->problems[p->nproblems - 1].warning = true;
	}
	if (pol->new_keys == 0)
		return;
	charge = rlg_xcalloc(1, sizeof *charge);
	len = strlen(pol->name) + sizeof RLG_NEW_KEYS_SUFFIX;
	charge->name = rlg_xmalloc(len);
	snprintf(charge->name, len, "%s%s", pol->name, RLG_NEW_KEYS_SUFFIX);
	charge->lim.algorithm = RLG_ALG_FIXED_WINDOW;
	charge->lim.limit = pol->new_keys;
	charge->lim.window_ms = pol->lim.window_ms;
	charge->lim.burst = pol->new_keys;
	charge->key = RLG_KEY_IP;
	charge->mode = pol->mode;
	pol->new_keys_policy = charge;
}

/*
 * A route's cost against each of its policies: a cost above a policy's
 * capacity (its limit; burst for token_bucket) could never be admitted,
 * so every request of the route would be refused. Reported at the cost
 * line, once per such policy. With a header cost, cost_max is held to
 * the same bound at its own line; it is required (reported at the cost
 * line), and without a header cost it is a mistake (at its line: it
 * would bound nothing), unless the cost line was bad (already reported).
 */
static void
rlg_route_cost_check(struct rlg_parse *p, const struct rlg_route *r,
    const struct rlg_build *b, size_t scope)
{
	const struct rlg_set_lines *cost = rlg_lines(p, scope, "route",
	    "cost");
	const struct rlg_set_lines *max = rlg_lines(p, scope, "route",
	    "cost_max");
	const struct rlg_policy *pol;
	bool bucket, header = r->cost_header != NULL;
	int64_t cap, most = header ? r->cost_max : r->cost;
	size_t j;

	if (header && max->ok == 0) {
		if (max->first == 0)
			rlg_problem(p, cost->ok, "%s cost: header:%s needs "
			    "cost_max = N, the most one request may cost (and "
			    "what one costs whose header is not believed)",
			    b->label, r->cost_header);
		return;
	}
	if (!header && max->first != 0) {
		if (cost->first == 0 || cost->ok != 0)
			rlg_problem(p, max->first, "%s cost_max: only with "
			    "cost = header:NAME (the cost is fixed: %lld)",
			    b->label, (long long)r->cost);
		return;
	}
	for (j = 0; j < r->npolicies; j++) {
		pol = &p->cfg->policies[r->policies[j]];
		bucket = rlg_limiter_has_burst(&pol->lim);
		cap = rlg_limiter_capacity(&pol->lim);
		if (most <= cap)
			continue;
		rlg_problem(p, header ? max->ok : cost->ok,
		    "%s %s: %lld is above the %s of [policy %s] (%lld): %s",
		    b->label, header ? "cost_max" : "cost", (long long)most,
		    bucket ? "burst" : "limit", pol->name, (long long)cap,
		    header ? "a request that costs it could never be admitted"
		    : "no request of the route could ever be admitted");
	}
}

/*
 * With path_match = normalized, the spelling of a route's path that
 * requests are compared with (rlg_path_route; an exact route's
 * without its trailing '/'). A ';' in such a path is reported at its
 * line: requests' ";params" are dropped, so it could never match.
 */
static void
rlg_route_match_path(struct rlg_parse *p, struct rlg_route *r,
    const struct rlg_build *b, size_t scope)
{
	size_t len;

	free(r->match_path);
	r->match_path = NULL;
	if (r->path == NULL || r->path_match != RLG_PATH_MATCH_NORMALIZED)
		return;
	if (strchr(r->path, ';') != NULL) {
		rlg_problem(p, rlg_lines(p, scope, "route", "path")->ok,
		    "%s path: a request's \";params\" are dropped before it "
		    "is compared, so \"%s\" could never match (or set "
		    "path_match = bytes)", b->label, r->path);
		return;
	}
	len = strlen(r->path) + 1;
	r->match_path = rlg_xmalloc(len);
	if (rlg_path_route(r->path, r->match_path, len) != RLG_OK)
		r->match_path[0] = '\0';
	if (!r->prefix)
		rlg_path_route_slash(r->match_path);
}

/*
 * After the policies are final: each route's policy names become indexes
 * (an unknown name is reported at the route's policies line; policies =
 * none is a warning there: a guarding front asking about the route's
 * paths limits nothing), a cost
 * above one of them at the cost line (rlg_route_cost_check), a route
 * without path or policies is reported at its header, and the routes of
 * the file go to the config, with the policies of a request that matches
 * none of them.
 */
void
rlg_routes_finish(struct rlg_parse *p)
{
	struct rlg_config *cfg = p->cfg;
	const struct rlg_set_lines *pols;
	struct rlg_build *b;
	struct rlg_route *r;
	size_t i, j, n, scope;

	for (i = 0; i < p->nroutes; i++) {
		r = &p->routes[i];
		b = &p->rbuilds[i];
		scope = 1 + RLG_POLICIES_MAX + i;
		pols = rlg_lines(p, scope, "route", "policies");
		if (rlg_lines(p, scope, "route", "path")->first == 0)
			rlg_problem(p, b->line, "%s has no path: set path = "
			    "/PATH (or /PREFIX* for a prefix)", b->label);
		if (pols->first == 0)
			rlg_problem(p, b->line, "%s has no policies: set "
			    "policies = NAME, ... (or policies = none: not "
			    "limited)", b->label);
		if (pols->ok != 0 && b->nnames == 0) {
			rlg_problem(p, pols->ok, "%s policies = none: a "
			    "guarding front (FastCGI Authorizer, nginx "
			    "auth_request, Caddy forward_auth) asking about "
			    "%s%s will limit nothing: rlgate admits those "
			    "requests unlimited", b->label, r->path != NULL ?
			    r->path : "its path", r->prefix ? "*" : "");
			p->problems[p->nproblems - 1].warning = true;
		}
		if (b->nnames > 0)
			r->policies = rlg_xcalloc(b->nnames,
			    sizeof *r->policies);
		for (j = 0; j < b->nnames; j++) {
			for (n = 0; n < cfg->npolicies; n++)
				if (strcmp(cfg->policies[n].name,
				    b->names[j]) == 0)
					break;
			if (n == cfg->npolicies)
				rlg_no_policy(p, pols->ok, b->label,
				    b->names[j]);
			else
				r->policies[r->npolicies++] = n;
		}
		rlg_list_free(b->names, b->nnames);
		rlg_route_cost_check(p, r, b, scope);
		rlg_route_match_path(p, r, b, scope);
	}
	if (p->nroutes > 0) {
		cfg->routes = rlg_xcalloc(p->nroutes, sizeof *cfg->routes);
		memcpy(cfg->routes, p->routes, p->nroutes * sizeof *p->routes);
		cfg->nroutes = p->nroutes;
	}
	free(p->routes);
	free(p->rbuilds);

	/* Without routes every policy; with routes [policy default], if. */
	free(cfg->default_policies);
	cfg->default_policies = NULL;
	cfg->ndefault = 0;
	for (i = 0; i < cfg->npolicies; i++) {
		if (cfg->nroutes > 0 &&
		    strcmp(cfg->policies[i].name, "default") != 0)
			continue;
		if (cfg->default_policies == NULL)
			cfg->default_policies = rlg_xcalloc(cfg->npolicies,
			    sizeof *cfg->default_policies);
		cfg->default_policies[cfg->ndefault++] = i;
	}
}

/*
 * After the whole file: the [store] keys that belong to one backend only,
 * as the flags of the backend's row say (store_backends.h: the keys of a
 * file, or of a server and its url). Each is reported on its own line.
 * Redis keys with the SQLite backend are an error, not a no-op: an
 * operator who set url but not backend = redis would get one SQLite file
 * per machine, each client a full quota on each. max_clients set with
 * Redis likewise promises a bound that Redis does not keep (its memory
 * follows maxmemory and key expiry), and synchronous a durability it
 * has not. A list of seed nodes with backend
 * = redis would silently use the first node only; a Redis Cluster is
 * reached over TCP and has database 0 only. With a backend that was
 * itself bad (already reported) nothing is checked.
 */
void
rlg_store_finish(struct rlg_parse *p)
{
	/*
	 * Each key that only some backends read: what it is of [store]
	 * (RLG_BACKEND_*), the backends that read it, and why (for
	 * SQLite's).
	 */
	static const struct {
		const char *key;
		unsigned reads;
		const char *backends, *why;
	} one_backend[] = {
		{ "url", RLG_BACKEND_URL, "redis or redis_cluster", "" },
		{ "connect_timeout_ms", RLG_BACKEND_URL,
		    "redis or redis_cluster", "" },
		{ "timeout_ms", RLG_BACKEND_URL, "redis or redis_cluster", "" },
		{ "clock", RLG_BACKEND_URL, "redis or redis_cluster", "" },
		{ "synchronous", RLG_BACKEND_FILES, "sqlite", ": Redis "
		    "durability is its own appendfsync" },
		{ "flush_ms", RLG_BACKEND_FILES, "sqlite", ": the table of "
		    "backend = redis (commit = behind) syncs every sync_ms" },
		{ "sync_ms", RLG_BACKEND_URL, "redis or redis_cluster", "" },
	};
	const struct rlg_store_config *sc = &p->cfg->store;
	const struct rlg_set_lines *backend, *url;
	bool cluster = sc->redis.cluster;
	int line;
	size_t i;

	backend = rlg_lines(p, 0, "store", "backend");
	url = rlg_lines(p, 0, "store", "url");
	p->cfg->store.sqlite.path_line = rlg_lines(p, 0, "store", "path")->ok;
	if (p->backend_bad)
		return;
	for (i = 0; i < sizeof one_backend / sizeof one_backend[0]; i++) {
		line = rlg_lines(p, 0, "store", one_backend[i].key)->ok;
		if (line != 0 &&
		    !rlg_backend_has(sc->backend, one_backend[i].reads))
			rlg_problem(p, line, "[store] %s: applies only to "
			    "backend = %s%s", one_backend[i].key,
			    one_backend[i].backends, one_backend[i].why);
	}
	if (rlg_backend_has(sc->backend, RLG_BACKEND_FILES)) {
		rlg_table_finish(p);
		return;
	}
	rlg_global_finish(p);
	if (!rlg_backend_has(sc->backend, RLG_BACKEND_URL))
		return;
	/* A url that was set but bad is reported for itself. */
	if (url->first == 0)
		rlg_problem(p, backend->ok, cluster ? "[store] backend: "
		    "redis_cluster needs [store] url = redis://HOST:PORT"
		    "[,HOST:PORT...] (seed nodes)" : "[store] backend: redis "
		    "needs [store] url = redis://HOST:PORT or unix:/PATH");
	if (url->ok != 0 && cluster && sc->redis.master != NULL)
		rlg_problem(p, url->ok, "[store] url: redis+sentinel:// "
		    "names one master for backend = redis, not a cluster");
	if (url->ok != 0 && !cluster && sc->redis.nseeds > 0 &&
	    sc->redis.master == NULL)
		rlg_problem(p, url->ok, "[store] url: several HOST:PORT "
		    "are the seed nodes of a Redis Cluster: set backend = "
		    "redis_cluster, or name one server");
	if (url->ok != 0 && cluster && sc->redis.socket != NULL)
		rlg_problem(p, url->ok, "[store] url: backend = "
		    "redis_cluster needs redis://HOST:PORT[,HOST:PORT...]: "
		    "cluster nodes talk TCP");
	if (url->ok != 0 && cluster && sc->redis.db != 0)
		rlg_problem(p, url->ok, "[store] url: a Redis Cluster has "
		    "database 0 only (got /%d)", sc->redis.db);
}

/*
 * commit: auto becomes behind where the table holds the config, else each
 * (rlg_config_why_each), and says so in commit_auto. An explicit behind
 * must fit, or each reason is a problem on the commit line: the table
 * holds max_clients entries for each policy that keeps state (a bound on
 * new keys is one), so max_clients must be set and the product bounded;
 * an algorithm that keeps a log (sliding_log) keeps it in the database,
 * which the table does not (store_table.c). flush_ms only means something with behind: with an
 * auto that gave each, the problem says why it did.
 */
static void
rlg_table_finish(struct rlg_parse *p)
{
	struct rlg_sqlite_config *sq = &p->cfg->store.sqlite;
	int commit = rlg_lines(p, 0, "store", "commit")->ok;
	int flush = rlg_lines(p, 0, "store", "flush_ms")->ok;
	char why[256];

	if (sq->commit == RLG_COMMIT_AUTO) {
		sq->commit_auto = true;
		if (rlg_config_why_each(p->cfg, why, sizeof why)) {
			sq->commit = RLG_COMMIT_EACH;
			if (flush != 0)
				rlg_problem(p, flush, "[store] flush_ms: "
				    "commit = auto resolves to each here (%s):"
				    " flush_ms applies only to commit = "
				    "behind", why);
			return;
		}
		sq->commit = RLG_COMMIT_BEHIND;
	}
	if (sq->commit != RLG_COMMIT_BEHIND) {
		if (flush != 0)
			rlg_problem(p, flush, "[store] flush_ms: applies only "
			    "to commit = behind");
		return;
	}
	rlg_table_checks(p, commit);
}

/*
 * commit with Redis: each (auto, the default: one script decides each
 * request, exact), or behind, the local+global mode: the host's table in
 * front (store_table_sync.c), which holds what SQLite's holds
 * (rlg_table_checks). Without behind, max_clients (which sizes the table)
 * and sync_ms mean nothing.
 */
static void
rlg_global_finish(struct rlg_parse *p)
{
	struct rlg_sqlite_config *sq = &p->cfg->store.sqlite;
	int commit = rlg_lines(p, 0, "store", "commit")->ok;
	int clients = rlg_lines(p, 0, "store", "max_clients")->ok;
	int sync = rlg_lines(p, 0, "store", "sync_ms")->ok;

	if (sq->commit == RLG_COMMIT_AUTO) {
		sq->commit = RLG_COMMIT_EACH;
		sq->commit_auto = true;
	}
	if (sq->commit == RLG_COMMIT_BEHIND) {
		rlg_table_checks(p, commit);
		rlg_global_no_ban(p);
		return;
	}
	if (clients != 0)
		rlg_problem(p, clients, "[store] max_clients: applies to "
		    "backend = redis only with commit = behind (it sizes the "
		    "host's table): Redis memory is bounded by its maxmemory "
		    "and by the expiry of the keys");
	if (sync != 0)
		rlg_problem(p, sync, "[store] sync_ms: applies only to "
		    "commit = behind");
}

/*
 * The local+global mode has no ban: each host decides from its own table
 * and pushes only the units it admitted (db/redis/sync.lua), so a ban
 * started on one host would hold on that host alone, and a refusal count
 * split across hosts would never reach ban_after. Said on the ban line.
 */
static void
rlg_global_no_ban(struct rlg_parse *p)
{
	size_t i;
	int line;

	for (i = 0; i < p->cfg->npolicies; i++) {
		if (p->cfg->policies[i].lim.ban_ms == 0)
			continue;
		line = rlg_lines(p, 1 + i, "policy", "ban")->ok;
		rlg_problem(p, line, "[policy %s] ban: the local+global mode "
		    "(backend = redis, commit = behind) cannot keep a ban (each"
		    " host refuses on its own and pushes only what it "
		    "admitted): use commit = each, or no ban",
		    p->cfg->policies[i].name);
	}
}

/*
 * What the table holds, for commit = behind (on the commit line): an
 * algorithm that keeps a log (sliding_log) keeps it in the database,
 * which the table does not (store_table.c); max_clients entries for each
 * policy that keeps state (a bound on new keys is one), so max_clients
 * must be set and the product bounded.
 */
static void
rlg_table_checks(struct rlg_parse *p, int commit)
{
	struct rlg_sqlite_config *sq = &p->cfg->store.sqlite;
	int64_t kept = rlg_table_policies(p->cfg);
	size_t i;

	for (i = 0; i < p->cfg->npolicies; i++)
		if (rlg_policy_alg(&p->cfg->policies[i])->keeps_log)
			rlg_problem(p, commit, "[store] commit: behind does "
			    "not keep [policy %s], a %s (its log "
			    "lives in the database): use commit = each, or "
			    "another algorithm", p->cfg->policies[i].name,
			    rlg_policy_alg(&p->cfg->policies[i])->name);
	if (sq->max_clients == 0) {
		rlg_problem(p, commit, "[store] commit: behind sizes its "
		    "table by max_clients: set [store] max_clients > 0");
		return;
	}
	if (sq->max_clients > RLG_TABLE_ENTRIES_MAX / kept) {
		rlg_problem(p, commit, "[store] commit: behind keeps "
		    "max_clients (%lld) x %lld policies = %lld entries, over "
		    "the table's %lld: lower max_clients",
		    (long long)sq->max_clients, (long long)kept,
		    (long long)sq->max_clients * (long long)kept,
		    (long long)RLG_TABLE_ENTRIES_MAX);
		return;
	}
	sq->table_entries = sq->max_clients * kept;
}

/* Where the key sect/name (a row that is there) was set, in scope. */
struct rlg_set_lines *
rlg_lines(struct rlg_parse *p, size_t scope, const char *sect,
    const char *name)
{
	size_t i = rlg_option_find(sect, name);

	assert(i < rlg_noptions && scope < RLG_NSCOPES);
	return &p->lines[scope * rlg_noptions + i];
}

/* A policy name that names no policy, at line: "LABEL policies: no
 * [policy NAME]", and the closest name if one is close. */
void
rlg_no_policy(struct rlg_parse *p, int line, const char *label,
    const char *name)
{
	const char *near = rlg_policy_suggest(p->cfg, name);

	rlg_problem(p, line, "%s policies: no [policy %s]%s%s%s", label, name,
	    near != NULL ? ": did you mean \"" : "", near != NULL ? near : "",
	    near != NULL ? "\"?" : "");
}
