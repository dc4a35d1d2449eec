/*
 * admin.c: the admin endpoints (admin.h): who may ask, and the bodies of
 * the metrics, the health check, the status JSON and the status page.
 *
 * Nothing here runs on a decision's path: the front's dispatch
 * (rlg_front_serve) calls rlg_admin_match (a prefix compare, then the
 * allow list) and, for the few requests it claims, rlg_admin_serve. The store is asked through its probe and
 * survey operations; the counters are the scoreboard's sums (metrics.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "admin.h"
#include "metrics.h"
#include "status_page.h"
#include "util.h"

/* Clients shown as closest to their limits. */
#define ADMIN_CLOSEST 10

static void put_metrics_requests(const struct rlg_config *cfg,
    const struct rlg_metrics_sums *m, struct rlg_sb *out);
static void put_policy_key(const struct rlg_policy *p, struct rlg_sb *out);
static const struct rlg_policy *policy_named(const struct rlg_config *cfg,
    const char *name);
static void put_closest(const struct rlg_config *cfg,
    const struct rlg_store_survey *sv, int64_t now_ms, struct rlg_sb *out);
static int closest_cmp(const void *a, const void *b);
static void put_status_policies(const struct rlg_config *cfg,
    const struct rlg_metrics_sums *m, const struct rlg_store_survey *sv,
    struct rlg_sb *out);
static void put_status_routes(const struct rlg_config *cfg,
    struct rlg_sb *out);
static void put_metrics_responses(const struct rlg_metrics_sums *m,
    struct rlg_sb *out);
static void put_metrics_histogram(const struct rlg_metrics_sums *m,
    struct rlg_sb *out);
static bool flushes(const struct rlg_config *cfg);
static double flush_age_s(const struct rlg_metrics_sums *m);

/* The endpoints, by what follows the prefix in the path. */
static const struct {
	const char *rest;
	enum rlg_admin_endpoint e;
} endpoints[] = {
	{ "", RLG_ADMIN_PAGE },
	{ "/", RLG_ADMIN_PAGE },
	{ "/metrics", RLG_ADMIN_METRICS },
	{ "/health", RLG_ADMIN_HEALTH },
	{ "/status", RLG_ADMIN_STATUS },
};

enum rlg_admin_endpoint
rlg_admin_match(const struct rlg_config *cfg, const struct rlg_request *r)
{
	const struct rlg_admin_config *ac = &cfg->admin;
	size_t n, i;
	const char *rest;

	if (ac->nallow == 0 || r->role == RLG_ROLE_OTHER || !r->path_ok ||
	    ac->prefix == NULL)
		return RLG_ADMIN_NONE;
	n = strlen(ac->prefix);
	if (strncmp(r->path, ac->prefix, n) != 0 ||
	    (r->path[n] != '\0' && r->path[n] != '/'))
		return RLG_ADMIN_NONE;
	if (!r->addr_ok || !rlg_cidr_any(ac->allow, ac->nallow, &r->addr))
		return RLG_ADMIN_NONE;
	if (rlg_request_guards(r))
		return RLG_ADMIN_PASS;
	rest = r->path + n;
	for (i = 0; i < sizeof endpoints / sizeof endpoints[0]; i++)
		if (strcmp(rest, endpoints[i].rest) == 0)
			return endpoints[i].e;
	return RLG_ADMIN_UNKNOWN;
}

int
rlg_admin_serve(const struct rlg_config *cfg, struct rlg_store *store,
    struct rlg_metrics_slot *slot, enum rlg_admin_endpoint e,
    const struct rlg_request *r, int64_t now_ms, const struct rlg_out *out)
{
	struct rlg_answer pass;
	int rc;

	if (e == RLG_ADMIN_PASS) {
		memset(&pass, 0, sizeof pass);
		pass.outcome = RLG_OUT_AUTHORIZED;
		pass.role = r->role;
		pass.style = cfg->style;
		rlg_metrics_response(slot, 200, true);
		return rlg_response_send(&pass, out);
	}
	rc = rlg_admin_answer(cfg, store, e, r, now_ms, out);
	if (rc > 0)
		rlg_metrics_response(slot, rc, true);
	return rc < 0 ? rc : 0;
}

int
rlg_admin_answer(const struct rlg_config *cfg, struct rlg_store *store,
    enum rlg_admin_endpoint e, const struct rlg_request *r, int64_t now_ms,
    const struct rlg_out *out)
{
	struct rlg_admin_answer a = {
		.status = 200,
		.content_type = "application/json",
		.head = r->method == RLG_METHOD_HEAD,
	};
	struct rlg_sb body = { 0 };
	int rc;

	if (e == RLG_ADMIN_UNKNOWN || e == RLG_ADMIN_NONE ||
	    e == RLG_ADMIN_PASS) {
		a.status = 404;
		rlg_sb_printf(&body, "{\"error\":{\"code\":404,"
		    "\"message\":\"Not Found\"}}\n");
	} else if (r->method != RLG_METHOD_GET &&
	    r->method != RLG_METHOD_HEAD) {
		a.status = 405;
		rlg_sb_printf(&body, "{\"error\":{\"code\":405,"
		    "\"message\":\"Method Not Allowed\"}}\n");
	} else {
		switch (e) {
		case RLG_ADMIN_PAGE:
			a.content_type = "text/html; charset=utf-8";
			a.page = true;
			rlg_sb_mem(&body, rlg_status_page,
			    rlg_status_page_len);
			break;
		case RLG_ADMIN_METRICS:
			a.content_type =
			    "text/plain; version=0.0.4; charset=utf-8";
			rlg_admin_metrics(cfg, store, now_ms, &body);
			break;
		case RLG_ADMIN_HEALTH:
			if (!rlg_admin_health(store, now_ms, &body))
				a.status = 503;
			break;
		default:
			rlg_admin_status(cfg, store, now_ms, &body);
			break;
		}
	}
	a.body = body.p;
	a.len = body.len;
	rc = rlg_response_send_admin(&a, out);
	rlg_sb_free(&body);
	return rc < 0 ? rc : a.status;
}

/* Whether the config writes the database behind a table that flushes. */
static bool
flushes(const struct rlg_config *cfg)
{
	return rlg_store_behind(&cfg->store);
}

/*
 * Seconds since the last good flush of the table, by the wall clock (the
 * flusher's): since the counters started when none has been.
 */
static double
flush_age_s(const struct rlg_metrics_sums *m)
{
	int64_t since = m->flush_ok_ms > 0 ? m->flush_ok_ms :
	    m->start_s * 1000, age = rlg_now_ms() - since;

	return age > 0 ? (double)age / 1000 : 0;
}

static void
put_metrics_requests(const struct rlg_config *cfg,
    const struct rlg_metrics_sums *m, struct rlg_sb *out)
{
	const struct rlg_policy *p;
	size_t i, d;

	rlg_sb_printf(out, "# HELP rlgate_requests_total Requests a policy"
	    " decided, by its decision (each policy of a request's route"
	    " counts it once).\n# TYPE rlgate_requests_total counter\n");
	for (i = 0; i < rlg_metrics_npolicies(cfg); i++) {
		if ((p = rlg_metrics_policy(cfg, i)) == NULL)
			continue;
		for (d = 0; d < RLG_MD_N; d++)
			rlg_sb_printf(out, "rlgate_requests_total{policy=\"%s\","
			    "decision=\"%s\"} %llu\n", p->name,
			    rlg_metrics_decision_name(
			    (enum rlg_metric_decision)d),
			    (unsigned long long)m->requests[i][d]);
	}
}

/* rlgate_responses_total and rlgate_admin_responses_total, by code. */
static void
put_metrics_responses(const struct rlg_metrics_sums *m, struct rlg_sb *out)
{
	size_t i;
	int code;

	rlg_sb_printf(out, "# HELP rlgate_responses_total Answers to requests"
	    " other than the admin endpoints', by status code.\n"
	    "# TYPE rlgate_responses_total counter\n");
	for (i = 0; i < RLG_METRICS_CODES; i++) {
		code = rlg_metrics_code(i);
		if (code == 0 && m->responses[i] == 0)
			continue;
		rlg_sb_printf(out, "rlgate_responses_total{code=\"%s%.0d\"} %llu\n",
		    code == 0 ? "other" : "", code,
		    (unsigned long long)m->responses[i]);
	}
	rlg_sb_printf(out, "# HELP rlgate_admin_responses_total Answers of the"
	    " admin endpoints, by status code.\n"
	    "# TYPE rlgate_admin_responses_total counter\n");
	for (i = 0; i < RLG_METRICS_CODES; i++) {
		code = rlg_metrics_code(i);
		if (m->admin_responses[i] == 0 && code != 200)
			continue;
		rlg_sb_printf(out, "rlgate_admin_responses_total{code=\"%s%.0d\"}"
		    " %llu\n", code == 0 ? "other" : "", code,
		    (unsigned long long)m->admin_responses[i]);
	}
}

/* rlgate_decision_duration_seconds: the timed steps' histogram. */
static void
put_metrics_histogram(const struct rlg_metrics_sums *m, struct rlg_sb *out)
{
	uint64_t cum = 0;
	size_t i;

	rlg_sb_printf(out, "# HELP rlgate_decision_duration_seconds Time of the"
	    " store's step for one request (one step in %d timed).\n"
	    "# TYPE rlgate_decision_duration_seconds histogram\n",
	    RLG_METRICS_SAMPLE);
	for (i = 0; i < RLG_METRICS_BUCKETS; i++) {
		cum += m->buckets[i];
		if (i + 1 < RLG_METRICS_BUCKETS)
			rlg_sb_printf(out, "rlgate_decision_duration_seconds_"
			    "bucket{le=\"%g\"} %llu\n",
			    (double)rlg_metrics_bucket_ns(i) / 1e9,
			    (unsigned long long)cum);
		else
			rlg_sb_printf(out, "rlgate_decision_duration_seconds_"
			    "bucket{le=\"+Inf\"} %llu\n",
			    (unsigned long long)cum);
	}
	rlg_sb_printf(out, "rlgate_decision_duration_seconds_sum %.9f\n"
	    "rlgate_decision_duration_seconds_count %llu\n",
	    (double)m->step_ns / 1e9, (unsigned long long)m->steps);
}

void
rlg_admin_metrics(const struct rlg_config *cfg, struct rlg_store *store,
    int64_t now_ms, struct rlg_sb *out)
{
	struct rlg_metrics_sums m;
	struct rlg_store_survey *sv;
	size_t i;

	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	put_metrics_requests(cfg, &m, out);
	put_metrics_responses(&m, out);
	rlg_sb_printf(out, "# HELP rlgate_store_errors_total Store steps that"
	    " failed (answered as on_error says).\n"
	    "# TYPE rlgate_store_errors_total counter\n"
	    "rlgate_store_errors_total %llu\n"
	    "# HELP rlgate_rejection_cache_hits_total Rejections answered by"
	    " the rejection cache without asking the store.\n"
	    "# TYPE rlgate_rejection_cache_hits_total counter\n"
	    "rlgate_rejection_cache_hits_total %llu\n",
	    (unsigned long long)m.store_errors,
	    (unsigned long long)m.cache_hits);
	rlg_sb_printf(out, "# HELP rlgate_unguarded_total Requests of a"
	    " guarding role (Authorizer, auth_request, forward_auth) that no"
	    " policy covered: admitted unlimited.\n"
	    "# TYPE rlgate_unguarded_total counter\n");
	for (i = 0; i < RLG_METRICS_GUARDS; i++)
		rlg_sb_printf(out, "rlgate_unguarded_total{role=\"%s\"} %llu\n",
		    rlg_metrics_guard_name(i),
		    (unsigned long long)m.unguarded[i]);
	rlg_sb_printf(out, "# HELP rlgate_bad_tokens_total Bearer tokens a"
	    " jwt key could not use, by why: their requests were keyed by the"
	    " client's address.\n"
	    "# TYPE rlgate_bad_tokens_total counter\n");
	for (i = 0; i < RLG_METRICS_TOKENS; i++)
		rlg_sb_printf(out, "rlgate_bad_tokens_total{reason=\"%s\"} %llu\n",
		    rlg_token_name((enum rlg_token)(RLG_TOKEN_INVALID + i)),
		    (unsigned long long)m.bad_tokens[i]);
	rlg_sb_printf(out, "# HELP rlgate_held_total Admitted requests whose"
	    " answer a smoothing policy (delay) held for its turn.\n"
	    "# TYPE rlgate_held_total counter\n"
	    "rlgate_held_total %llu\n"
	    "# HELP rlgate_park_full_total Requests a smoothing policy refused"
	    " because no answer could be held ([fastcgi] max_parked).\n"
	    "# TYPE rlgate_park_full_total counter\n"
	    "rlgate_park_full_total %llu\n", (unsigned long long)m.held,
	    (unsigned long long)m.park_full);
	put_metrics_histogram(&m, out);
	sv = rlg_xmalloc(sizeof *sv);
	if (rlg_store_survey(store, now_ms, false, sv) == RLG_OK) {
		rlg_sb_printf(out, "# HELP rlgate_clients Clients a policy holds"
		    " state for (expired ones until they are pruned).\n"
		    "# TYPE rlgate_clients gauge\n");
		for (i = 0; i < sv->npolicies; i++)
			if (policy_named(cfg, sv->policies[i].name) != NULL)
				rlg_sb_printf(out, "rlgate_clients{policy=\"%s\"}"
				    " %lld\n", sv->policies[i].name,
				    (long long)sv->policies[i].clients);
	}
	free(sv);
	rlg_sb_printf(out, "# HELP rlgate_store_up Whether the store answered"
	    " a probe during this scrape.\n# TYPE rlgate_store_up gauge\n"
	    "rlgate_store_up %d\n",
	    rlg_store_probe(store, now_ms) == RLG_OK ? 1 : 0);
	if (flushes(cfg))
		rlg_sb_printf(out, "# HELP rlgate_flush_failures_total Flushes"
		    " of the table to the database (Redis: syncs) that failed"
		    " (each retried at the next interval).\n"
		    "# TYPE rlgate_flush_failures_total counter\n"
		    "rlgate_flush_failures_total %llu\n"
		    "# HELP rlgate_flush_age_seconds Seconds since the last"
		    " flush of the table to the database (Redis: sync) that"
		    " succeeded.\n"
		    "# TYPE rlgate_flush_age_seconds gauge\n"
		    "rlgate_flush_age_seconds %.3f\n",
		    (unsigned long long)m.flush_failures, flush_age_s(&m));
	rlg_sb_printf(out, "# HELP rlgate_build_info The running version.\n"
	    "# TYPE rlgate_build_info gauge\n"
	    "rlgate_build_info{version=\"%s\"} 1\n"
	    "# HELP rlgate_start_time_seconds When the counters started, in"
	    " seconds since the epoch.\n"
	    "# TYPE rlgate_start_time_seconds gauge\n"
	    "rlgate_start_time_seconds %lld\n"
	    "# HELP rlgate_metrics_shared Whether the counters are the host's"
	    " (1) or this process's only (0: the scoreboard file cannot be"
	    " used).\n# TYPE rlgate_metrics_shared gauge\n"
	    "rlgate_metrics_shared %d\n",
	    PACKAGE_VERSION, (long long)m.start_s, m.shared ? 1 : 0);
}

bool
rlg_admin_health(struct rlg_store *store, int64_t now_ms,
    struct rlg_sb *out)
{
	if (rlg_store_probe(store, now_ms) == RLG_OK) {
		rlg_sb_printf(out, "{\"status\":\"ok\"}\n");
		return true;
	}
	rlg_sb_printf(out, "{\"status\":\"failing\",\"reason\":");
	rlg_sb_json(out, rlg_store_errmsg(store));
	rlg_sb_printf(out, "}\n");
	return false;
}

/* "ip", "header:NAME", "cookie:NAME", "query:NAME", "jwt:CLAIM", ip+ one
 * of those, or "global". */
static void
put_policy_key(const struct rlg_policy *p, struct rlg_sb *out)
{
	char buf[RLG_HEADER_NAME_MAX + 32];
	unsigned chosen = p->key & RLG_KEY_CHOSEN;

	snprintf(buf, sizeof buf, "%s%s%s%s",
	    p->key & RLG_KEY_GLOBAL ? "global" :
	    p->key == 0 || (p->key & RLG_KEY_IP) ? "ip" : "",
	    (p->key & RLG_KEY_IP) && chosen != 0 ? "+" : "",
	    chosen == RLG_KEY_HEADER ? "header:" :
	    chosen == RLG_KEY_COOKIE ? "cookie:" :
	    chosen == RLG_KEY_QUERY ? "query:" :
	    chosen == RLG_KEY_JWT ? "jwt:" : "",
	    chosen != 0 && p->key_name != NULL ? p->key_name : "");
	rlg_sb_json(out, buf);
}

/* The config's policy (or .new_keys bound) of that name, or NULL. */
static const struct rlg_policy *
policy_named(const struct rlg_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < cfg->npolicies; i++) {
		if (strcmp(cfg->policies[i].name, name) == 0)
			return &cfg->policies[i];
		if (cfg->policies[i].new_keys_policy != NULL &&
		    strcmp(cfg->policies[i].new_keys_policy->name, name) == 0)
			return cfg->policies[i].new_keys_policy;
	}
	return NULL;
}

struct closest {
	const struct rlg_survey_row *row;
	const struct rlg_policy *p;
	struct rlg_decision d;
	int64_t remaining;        /* requests admitted right now */
};

/* Fewest remaining in proportion to the limit first, then the longest
 * wait. */
static int
closest_cmp(const void *a, const void *b)
{
	const struct closest *x = a, *y = b;
	/* remaining / limit, compared without division */
	__int128 l = (__int128)x->remaining * y->p->lim.limit;
	__int128 r = (__int128)y->remaining * x->p->lim.limit;

	if (l != r)
		return l < r ? -1 : 1;
	if (x->d.retry_ms != y->d.retry_ms)
		return x->d.retry_ms > y->d.retry_ms ? -1 : 1;
	return strcmp(x->row->client, y->row->client);
}

/* Whether the state st of policy p is in its penalty box at now_ms. */
static bool
banned(const struct rlg_policy *p, const struct rlg_state *st, int64_t now_ms)
{
	return p->lim.ban_ms > 0 && st->ban_until_ms > now_ms;
}

/*
 * The survey's candidates ranked by what the limiter (a pure function)
 * says of their state now, without changing it: a sliding_log's state
 * is its log, which the survey does not read, so those are left out
 * unless a ban holds them (its end is on the row). A banned client has
 * 0 remaining and the longest wait: first.
 */
static void
put_closest(const struct rlg_config *cfg, const struct rlg_store_survey *sv,
    int64_t now_ms, struct rlg_sb *out)
{
	struct closest *c = rlg_xcalloc(sv->ntop + 1, sizeof *c);
	struct rlg_state next;
	bool append;
	size_t i, n = 0;

	for (i = 0; i < sv->ntop; i++) {
		c[n].row = &sv->top[i];
		c[n].p = policy_named(cfg, sv->top[i].policy);
		if (c[n].p == NULL)
			continue;
		/* A sliding_log in the penalty box is its row's ban alone. */
		next = sv->top[i].st;
		if (c[n].p->lim.algorithm == RLG_ALG_SLIDING_LOG ?
		    !banned(c[n].p, &sv->top[i].st, now_ms) ||
		    rlg_limiter_sliding_log(&c[n].p->lim, NULL, 0, now_ms, 1,
		    &append, &next, &c[n].d) != 0 :
		    rlg_limiter_step(&c[n].p->lim, &sv->top[i].st, now_ms, 1,
		    &next, &c[n].d) != 0)
			continue;
		c[n].remaining = c[n].d.admitted ? c[n].d.remaining + 1 : 0;
		n++;
	}
	qsort(c, n, sizeof *c, closest_cmp);
	rlg_sb_printf(out, "\"closest\":[");
	for (i = 0; i < n && i < ADMIN_CLOSEST; i++) {
		rlg_sb_printf(out, "%s{\"policy\":", i > 0 ? "," : "");
		rlg_sb_json(out, c[i].p->name);
		rlg_sb_printf(out, ",\"client\":");
		rlg_sb_json(out, c[i].row->client);
		rlg_sb_printf(out, ",\"limit\":%lld,\"remaining\":%lld,"
		    "\"retry_after_s\":%lld,\"reset_s\":%lld,"
		    "\"banned\":%s}",
		    (long long)c[i].p->lim.limit, (long long)c[i].remaining,
		    c[i].d.admitted ? 0LL :
		    (long long)rlg_response_seconds(c[i].d.retry_ms),
		    (long long)rlg_response_seconds(c[i].d.reset_ms),
		    banned(c[i].p, &c[i].row->st, now_ms) ? "true" : "false");
	}
	rlg_sb_printf(out, "],");
	free(c);
}

/*
 * The status JSON's "policies" items: each policy the counters count
 * (rlg_metrics_policy), its settings, m's counts by decision, and the
 * clients survey sv holds for it (sv NULL: not surveyed, "clients":
 * null).
 */
static void
put_status_policies(const struct rlg_config *cfg,
    const struct rlg_metrics_sums *m, const struct rlg_store_survey *sv,
    struct rlg_sb *out)
{
	const struct rlg_policy *p;
	bool surveyed = sv != NULL;
	size_t i, j;

	for (i = 0, j = 0; i < rlg_metrics_npolicies(cfg); i++) {
		size_t k, d;
		int64_t clients = -1;

		if ((p = rlg_metrics_policy(cfg, i)) == NULL)
			continue;
		for (k = 0; surveyed && k < sv->npolicies; k++)
			if (strcmp(sv->policies[k].name, p->name) == 0)
				clients = sv->policies[k].clients;
		if (surveyed && clients < 0)
			clients = 0;
		rlg_sb_printf(out, "%s{\"name\":", j++ > 0 ? "," : "");
		rlg_sb_json(out, p->name);
		rlg_sb_printf(out, ",\"algorithm\":\"%s\",\"limit\":%lld,"
		    "\"window_s\":%lld,\"burst\":%lld,\"mode\":\"%s\","
		    "\"key\":", rlg_algorithm_name(p->lim.algorithm),
		    (long long)p->lim.limit, (long long)(p->lim.window_ms / 1000),
		    (long long)p->lim.burst,
		    p->mode == RLG_MODE_DRY_RUN ? "dry_run" : "enforce");
		put_policy_key(p, out);
		/* The penalty box: 0 and null without one. */
		if (p->lim.ban_ms > 0)
			rlg_sb_printf(out, ",\"ban_s\":%lld,\"ban_after\":%lld",
			    (long long)(p->lim.ban_ms / 1000),
			    (long long)(p->lim.ban_after < 1 ? 1 :
			    p->lim.ban_after));
		else
			rlg_sb_printf(out, ",\"ban_s\":0,\"ban_after\":null");
		rlg_sb_printf(out, ",\"requests\":{");
		for (d = 0; d < RLG_MD_N; d++)
			rlg_sb_printf(out, "%s\"%s\":%llu", d > 0 ? "," : "",
			    rlg_metrics_decision_name(
			    (enum rlg_metric_decision)d),
			    (unsigned long long)m->requests[i][d]);
		if (clients < 0)
			rlg_sb_printf(out, "},\"clients\":null}");
		else
			rlg_sb_printf(out, "},\"clients\":%lld}",
			    (long long)clients);
	}
}

/* The status JSON's "routes" items: each [route] as configured. */
static void
put_status_routes(const struct rlg_config *cfg, struct rlg_sb *out)
{
	const struct rlg_route *rt;
	size_t i, j;

	for (i = 0; i < cfg->nroutes; i++) {
		rt = &cfg->routes[i];
		rlg_sb_printf(out, "%s{\"name\":", i > 0 ? "," : "");
		rlg_sb_json(out, rt->name);
		rlg_sb_printf(out, ",\"path\":");
		rlg_sb_json(out, rt->path);
		rlg_sb_printf(out, ",\"prefix\":%s,\"methods\":[",
		    rt->prefix ? "true" : "false");
		for (j = 0; j < rt->nmethods; j++) {
			rlg_sb_printf(out, "%s", j > 0 ? "," : "");
			rlg_sb_json(out, rt->methods[j]);
		}
		rlg_sb_printf(out, "],\"policies\":[");
		for (j = 0; j < rt->npolicies; j++) {
			rlg_sb_printf(out, "%s", j > 0 ? "," : "");
			rlg_sb_json(out, cfg->policies[rt->policies[j]].name);
		}
		rlg_sb_printf(out, "]}");
	}
}

void
rlg_admin_status(const struct rlg_config *cfg, struct rlg_store *store,
    int64_t now_ms, struct rlg_sb *out)
{
	struct rlg_metrics_sums m;
	struct rlg_store_survey *sv = rlg_xmalloc(sizeof *sv);
	char where[512];
	bool healthy, surveyed;
	size_t i, j;
	int code;

	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	healthy = rlg_store_probe(store, now_ms) == RLG_OK;
	rlg_sb_printf(out, "{\"version\":\"%s\",\"time_ms\":%lld,"
	    "\"start_time_s\":%lld,\"pid\":%ld,\"metrics_shared\":%s,"
	    "\"store\":{\"backend\":\"%s\",\"where\":", PACKAGE_VERSION,
	    (long long)now_ms, (long long)m.start_s, (long)getpid(),
	    m.shared ? "true" : "false",
	    rlg_store_backend_name(cfg->store.backend));
	rlg_sb_json(out, rlg_store_describe(&cfg->store, where, sizeof where));
	rlg_sb_printf(out, ",\"commit\":\"%s\",\"on_error\":\"%s\","
	    "\"healthy\":%s,\"error\":",
	    rlg_store_can(&cfg->store, RLG_STORE_CAN_COMMIT) ?
	    rlg_commit_name(cfg->store.sqlite.commit) : "-",
	    rlg_on_error_name(cfg->store.on_error),
	    healthy ? "true" : "false");
	if (healthy)
		rlg_sb_printf(out, "null");
	else
		rlg_sb_json(out, rlg_store_errmsg(store));
	if (flushes(cfg))
		rlg_sb_printf(out, ",\"flush_failures\":%llu,"
		    "\"flush_age_s\":%.3f",
		    (unsigned long long)m.flush_failures, flush_age_s(&m));
	else
		rlg_sb_printf(out, ",\"flush_failures\":null,"
		    "\"flush_age_s\":null");
	rlg_sb_printf(out, "},\"responses\":{");
	for (i = 0, j = 0; i < RLG_METRICS_CODES; i++) {
		if (m.responses[i] == 0)
			continue;
		code = rlg_metrics_code(i);
		rlg_sb_printf(out, "%s\"%s%.0d\":%llu", j++ > 0 ? "," : "",
		    code == 0 ? "other" : "", code,
		    (unsigned long long)m.responses[i]);
	}
	rlg_sb_printf(out, "},\"store_errors\":%llu,"
	    "\"rejection_cache_hits\":%llu,\"policies\":[",
	    (unsigned long long)m.store_errors,
	    (unsigned long long)m.cache_hits);
	surveyed = rlg_store_survey(store, now_ms, true, sv) == RLG_OK;
	put_status_policies(cfg, &m, surveyed ? sv : NULL, out);
	rlg_sb_printf(out, "],");
	if (surveyed)
		put_closest(cfg, sv, now_ms, out);
	else
		rlg_sb_printf(out, "\"closest\":[],");
	rlg_sb_printf(out, "\"closest_sampled\":%s,\"routes\":[",
	    surveyed && sv->sampled ? "true" : "false");
	put_status_routes(cfg, out);
	rlg_sb_printf(out, "],\"config\":{\"source\":");
	if (cfg->source != NULL)
		rlg_sb_json(out, cfg->source);
	else
		rlg_sb_printf(out, "null");
	rlg_sb_printf(out, ",\"header_style\":\"%s\",\"errors\":\"%s\","
	    "\"log_level\":\"%s\",\"trusted_proxies\":%zu,"
	    "\"admin_prefix\":", rlg_style_name(cfg->style),
	    rlg_error_format_name(cfg->errors),
	    rlg_log_level_name(cfg->log_level), cfg->client.ntrusted);
	rlg_sb_json(out, cfg->admin.prefix);
	rlg_sb_printf(out, "}}\n");
	free(sv);
}
