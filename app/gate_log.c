/*
 * gate_log.c: the log lines of the gate's verdicts (gate_log.h).
 *
 * Logging is paced per gate (one worker thread): a store failure, the
 * store refusing new clients (max_clients) and refused requests each log
 * one line at once, then at most one per RLG_ERROR_LOG_INTERVAL_MS with
 * how many were not written (pacer.h); a rejection logs one line when
 * the store decides it, not when the rejection cache repeats it (but at
 * level info). A guarding role's request that no policy covers is logged
 * at most once a minute per process (unguarded). Nothing from a request
 * is written raw.
 */
#include <stdio.h>
#include <string.h>

#include "gate_log.h"
#include "metrics.h"
#include "response.h"
#include "util.h"

/* The bytes of a path a log line shows at most (then "..."). */
#define RLG_LOG_PATH_MAX 200
/* A process logs a request no policy covered at most once a minute. */
#define RLG_UNGUARDED_LOG_INTERVAL_MS 60000

static void store_failed(struct rlg_gate_log *l,
    const struct rlg_config *cfg, const char *msg, int64_t now_ms);
static void store_ok(struct rlg_gate_log *l, const struct rlg_config *cfg,
    int64_t now_ms);
static void store_full(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const char *msg, int64_t now_ms);
static void log_flaw(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_request *r, const char *reason, const char *header,
    int64_t now_ms);
static void bad_token(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_request *r, enum rlg_token t, int64_t now_ms);
static void unguarded(const struct rlg_config *cfg,
    const struct rlg_request *req, const struct rlg_route *rt,
    int64_t now_ms);
static void tier_words(const struct rlg_verdict_items *gi,
    const struct rlg_decision *d, const bool *which, char *out,
    size_t size);
static void log_rejection(struct rlg_gate_log *l,
    const struct rlg_config *cfg, const struct rlg_request *req,
    const char *event, const struct rlg_route *rt,
    const struct rlg_verdict_items *gi, const struct rlg_decision *d,
    const bool *which);
static uint64_t mix(uint64_t h, uint64_t w);
static uint64_t hash_name(uint64_t h, const char *s);
static uint64_t policy_hash(const struct rlg_gate_log *l,
    const struct rlg_config *cfg, const struct rlg_policy *p);
static bool repeat_rejection(struct rlg_gate_log *l,
    const struct rlg_config *cfg, const struct rlg_verdict_items *gi,
    const struct rlg_route *rt, const struct rlg_decision *d,
    int64_t now_ms);
static void log_decisions(struct rlg_gate_log *l,
    const struct rlg_config *cfg, const struct rlg_decided *dd,
    int64_t now_ms);

void
rlg_gate_log_verdict(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_decided *dd, int64_t now_ms)
{
	if (dd->flaw != RLG_FLAW_NONE) {
		log_flaw(l, cfg, dd->req, rlg_flaw_name(dd->flaw),
		    dd->flaw_about, now_ms);
		return;
	}
	if (dd->unguarded)
		unguarded(cfg, dd->req, dd->route, now_ms);
	if (dd->token > RLG_TOKEN_NONE)
		bad_token(l, cfg, dd->req, dd->token, now_ms);
	rlg_gate_log_store(l, cfg, dd->store, dd->store_msg, now_ms);
	if (dd->store == RLG_STORE_SAID_FULL ||
	    dd->store == RLG_STORE_SAID_FAILED)
		return;
	log_decisions(l, cfg, dd, now_ms);
}

void
rlg_gate_log_store(struct rlg_gate_log *l, const struct rlg_config *cfg,
    enum rlg_store_said said, const char *msg, int64_t now_ms)
{
	switch (said) {
	case RLG_STORE_SAID_OK:
		store_ok(l, cfg, now_ms);
		break;
	case RLG_STORE_SAID_FULL:
		store_ok(l, cfg, now_ms);
		store_full(l, cfg, msg, now_ms);
		break;
	case RLG_STORE_SAID_FAILED:
		store_failed(l, cfg, msg, now_ms);
		break;
	default:
		break;
	}
}

/*
 * One line when the store starts failing, then at most one per
 * RLG_ERROR_LOG_INTERVAL_MS while it goes on, and one when it heals: the
 * error log names the fault without drowning in it.
 */
static void
store_failed(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const char *msg, int64_t now_ms)
{
	const char *mode = rlg_on_error_name(cfg->store.on_error);
	long more;

	if (l->store_failing_since_ms == 0) {
		l->store_failing_since_ms = now_ms;
		rlg_pacer_restart(&l->store_errors, now_ms,
		    RLG_ERROR_LOG_INTERVAL_MS);
		rlg_log("store error: %s (on_error = %s)", msg, mode);
	} else if ((more = rlg_pacer_take(&l->store_errors, now_ms,
	    RLG_ERROR_LOG_INTERVAL_MS)) >= 0) {
		rlg_log("store still failing: %s (%ld more errors; on_error = %s)",
		    msg, more + 1, mode);
	}
}

static void
store_ok(struct rlg_gate_log *l, const struct rlg_config *cfg,
    int64_t now_ms)
{
	if (l->store_failing_since_ms == 0)
		return;
	if (cfg->log_level >= RLG_LOG_WARN)
		rlg_log("store recovered after %lld ms",
		    (long long)(now_ms - l->store_failing_since_ms));
	l->store_failing_since_ms = 0;
}

/*
 * The store refused a new client (max_clients): a line at once, then at
 * most one per RLG_ERROR_LOG_INTERVAL_MS, saying how many more were
 * refused in between. The store itself works, so this is no failure.
 */
static void
store_full(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const char *msg, int64_t now_ms)
{
	const char *mode = rlg_on_error_name(cfg->store.on_error);
	long more;

	if ((more = rlg_pacer_take(&l->store_full, now_ms,
	    RLG_ERROR_LOG_INTERVAL_MS)) < 0)
		return;
	if (more > 0)
		rlg_log("%s (on_error = %s; %ld more refused since the last"
		    " line)", msg, mode, more);
	else
		rlg_log("%s (on_error = %s)", msg, mode);
}

/*
 * A request rlgate refuses unread (a flaw, or an API key header sent
 * twice): one line at once, then at most one per RLG_ERROR_LOG_INTERVAL_MS
 * with how many more came in between, so a flood of them costs no disk.
 * Only the peer's key and fixed words are written, never request bytes.
 */
static void
log_flaw(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_request *r, const char *reason, const char *header,
    int64_t now_ms)
{
	long more;

	if (cfg->log_level < RLG_LOG_WARN ||
	    (more = rlg_pacer_take(&l->flaws, now_ms,
	    RLG_ERROR_LOG_INTERVAL_MS)) < 0)
		return;
	rlg_log("event=bad_request peer=%s reason=%s header=%s suppressed=%ld",
	    r->client, reason, header != NULL ? header : "-", more);
}

/*
 * A bearer token that a jwt:CLAIM key could not use (forged, expired,
 * another algorithm...): its request was keyed by the client's address,
 * as an anonymous client. "event=bad_token peer= reason=", at level warn,
 * at most once per RLG_ERROR_LOG_INTERVAL_MS per thread, with how many
 * were not logged since (suppressed=). The token itself is never logged.
 */
static void
bad_token(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_request *r, enum rlg_token t, int64_t now_ms)
{
	long more;

	if (cfg->log_level < RLG_LOG_WARN ||
	    (more = rlg_pacer_take(&l->tokens, now_ms,
	    RLG_ERROR_LOG_INTERVAL_MS)) < 0)
		return;
	rlg_log("event=bad_token peer=%s reason=%s suppressed=%ld", r->client,
	    rlg_token_name(t), more);
}

/*
 * A guarding front asked about a request that no policy covers (its
 * route has policies = none, or it matched no route and there is no
 * [policy default]): admitted unlimited, as configured, but counted
 * (rlgate_unguarded_total, by role: metrics.c) and logged, "event=
 * unguarded role= path= route=", at most once per
 * RLG_UNGUARDED_LOG_INTERVAL_MS per process (one pacer for every
 * thread), with how many were not logged since the last line
 * (suppressed=, this process's): a front pointed at rlgate for paths it
 * does not limit would otherwise write a line per request.
 */
static void
unguarded(const struct rlg_config *cfg, const struct rlg_request *req,
    const struct rlg_route *rt, int64_t now_ms)
{
	static struct rlg_pacer pacer;
	char path[RLG_LOG_PATH_MAX * 3 + 4];
	long n;

	if (cfg->log_level < RLG_LOG_WARN ||
	    (n = rlg_pacer_take(&pacer, now_ms,
	    RLG_UNGUARDED_LOG_INTERVAL_MS)) < 0)
		return;
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
tier_words(const struct rlg_verdict_items *gi, const struct rlg_decision *d,
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
log_rejection(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_request *req, const char *event,
    const struct rlg_route *rt, const struct rlg_verdict_items *gi,
    const struct rlg_decision *d, const bool *which)
{
	char names[512], method[RLG_METHOD_MAX * 3 + 4];
	char path[RLG_LOG_PATH_MAX * 3 + 4], cost[64], tiers[1024];
	size_t n;
	const char *client = NULL;
	int64_t retry_ms = 0, left = 0;
	size_t i, used = 0;
	int k;

	if (cfg->log_level < RLG_LOG_WARN)
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
	l->rejection_lines++;
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
/* The seed of the names' hashes. */
#define NAME_HASH_SEED 0x243f6a8885a308d3ULL

/* One word into a name hash: multiply and fold (as FxHash, wyhash). */
static uint64_t
mix(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 32);
}

/*
 * The NUL-terminated s into h a word at a time, its length first (so
 * that two names hashed in a row cannot trade bytes), spread over the
 * word and taken in by the first word's mix. The last word overlaps
 * the one before it rather than be put together a byte at a time; under
 * 8 bytes, the first and last 4 (or 1, middle and last 1).
 */
static uint64_t
hash_name(uint64_t h, const char *s)
{
	size_t n = strlen(s), i;
	uint32_t a, b;
	uint64_t w;

	h ^= (uint64_t)n * 0xff51afd7ed558ccdULL;
	if (n >= 8) {
		for (i = 0; i + 8 < n; i += 8) {
			memcpy(&w, s + i, 8);
			h = mix(h, w);
		}
		memcpy(&w, s + n - 8, 8);
	} else if (n >= 4) {
		memcpy(&a, s, 4);
		memcpy(&b, s + n - 4, 4);
		w = (uint64_t)a << 32 | b;
	} else if (n > 0) {
		w = (uint64_t)(unsigned char)s[0] << 16 |
		    (uint64_t)(unsigned char)s[n / 2] << 8 |
		    (unsigned char)s[n - 1];
	} else {
		w = 0;
	}
	return mix(h, w);
}

void
rlg_gate_log_config(struct rlg_gate_log *l, const struct rlg_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->npolicies && i < RLG_POLICIES_MAX; i++)
		l->policy_hash[i] = hash_name(NAME_HASH_SEED,
		    cfg->policies[i].name);
	for (i = 0; i < cfg->nroutes && i < RLG_ROUTES_MAX; i++)
		l->route_hash[i] = hash_name(NAME_HASH_SEED,
		    cfg->routes[i].name);
}

/*
 * The hash of p's name: a policy of cfg's from l's table (its copies
 * for a tier or an answer at once are gi->base's: the policy itself),
 * another (a bound on new keys, owned by its policy) hashed now.
 */
static uint64_t
policy_hash(const struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_policy *p)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)cfg->policies;

	if (off < cfg->npolicies * sizeof *p && off / sizeof *p <
	    RLG_POLICIES_MAX)
		return l->policy_hash[off / sizeof *p];
	return hash_name(NAME_HASH_SEED, p->name);
}

/*
 * Whether a rejection repeats one this thread logged: the same client,
 * route and rejecting policies, before the Retry-After that line gave.
 * What the rejection cache tells of the repeats it answers, for a store
 * that answers them itself (the decision table); remembered by a 64-bit
 * hash, the latest of each slot. As the cache, rejection_cache = 0 turns
 * it off: every rejection logged. The names' hashes were taken when cfg
 * came (rlg_gate_log_config); the client's is taken a word at a time.
 */
static bool
repeat_rejection(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_verdict_items *gi, const struct rlg_route *rt,
    const struct rlg_decision *d, int64_t now_ms)
{
	uintptr_t r = (uintptr_t)rt - (uintptr_t)cfg->routes;
	struct rlg_gate_seen *seen;
	int64_t retry_ms = 0;
	uint64_t h;
	size_t i;

	/* The route's name, then each rejecting policy's and its client. */
	if (rt == NULL)
		h = NAME_HASH_SEED;
	else if (r < cfg->nroutes * sizeof *rt && r / sizeof *rt <
	    RLG_ROUTES_MAX)
		h = l->route_hash[r / sizeof *rt];
	else
		h = hash_name(NAME_HASH_SEED, rt->name);
	for (i = 0; i < gi->n; i++) {
		if (d[i].admitted || !gi->enforced[i])
			continue;
		if (d[i].retry_ms > retry_ms)
			retry_ms = d[i].retry_ms;
		h = hash_name(h ^ policy_hash(l, cfg, gi->base[i]),
		    gi->items[i].client);
	}
	seen = &l->seen[h % RLG_GATE_SEEN];
	if (seen->hash == h && now_ms < seen->until_ms)
		return true;
	seen->hash = h;
	seen->until_ms = now_ms + retry_ms;
	return false;
}

/*
 * Logs what the step decided (dd->admitted: every enforcing item
 * admits; advisory ones never reject). A repeat rejection (answered by
 * the rejection cache, or repeat_rejection while there is one:
 * rejection_cache > 0) is the same decision as the one logged before
 * it: logged again only at level info, so a flood does not write a line
 * per request.
 */
static void
log_decisions(struct rlg_gate_log *l, const struct rlg_config *cfg,
    const struct rlg_decided *dd, int64_t now_ms)
{
	const struct rlg_verdict_items *gi = &dd->gi;

	if (!dd->admitted && (cfg->log_level >= RLG_LOG_INFO ||
	    (!dd->cached && (cfg->store.rejection_cache == 0 ||
	    !repeat_rejection(l, cfg, gi, dd->route, gi->d, now_ms)))))
		log_rejection(l, cfg, dd->req, "reject", dd->route, gi, gi->d,
		    gi->enforced);
	else if (dd->admitted && gi->n > 0 && cfg->log_level >= RLG_LOG_INFO &&
	    dd->hold_ms > 0)
		rlg_log("event=admit client=%s route=%s held_ms=%lld",
		    gi->items[0].client, dd->route != NULL ? dd->route->name :
		    "-", (long long)dd->hold_ms);
	else if (dd->admitted && gi->n > 0 && cfg->log_level >= RLG_LOG_INFO)
		rlg_log("event=admit client=%s route=%s", gi->items[0].client,
		    dd->route != NULL ? dd->route->name : "-");
	if (dd->dry_rejected)
		log_rejection(l, cfg, dd->req, "dry_run_reject", dd->route, gi,
		    gi->d, gi->dry);
}
