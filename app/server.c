/*
 * server.c: how requests reach rlgate and answers leave it.
 *
 * FastCGI: libfcgi's reentrant API on the socket a spawner (spawn-fcgi, or
 * the web server) left on fd 0; N threads per process, each with its own
 * store connection, each looping FCGX_Accept_r -> handle -> FCGX_Finish_r.
 * CGI: one request from environ to stdout, through the same handler. The
 * handler routes, asks the store for one atomic decision and answers; it
 * is the only place that applies on_error. Only this file includes
 * fcgiapp.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "server.h"
#include "util.h"

extern char **environ;

static int fcgx_write(void *ctx, const char *buf, size_t len);
static int stdout_write(void *ctx, const char *buf, size_t len);
static void store_failed(struct rlg_worker *w, int64_t now_ms);
static void store_ok(struct rlg_worker *w, int64_t now_ms);
static void store_full(struct rlg_worker *w, int64_t now_ms);
static enum rlg_outcome route(const struct rlg_request *r);
static const struct rlg_route *match_route(const struct rlg_config *cfg,
    const struct rlg_request *r);
static void log_rejection(const struct rlg_worker *w, const char *event,
    const struct rlg_route *rt, const struct rlg_store_item *items,
    const struct rlg_decision *d, size_t n, const bool *which);
static void *fastcgi_thread(void *arg);

static int
fcgx_write(void *ctx, const char *buf, size_t len)
{
	FCGX_Stream *out = ctx;

	return FCGX_PutStr(buf, (int)len, out) == (int)len ? 0 : -1;
}

static int
stdout_write(void *ctx, const char *buf, size_t len)
{
	FILE *out = ctx;

	if (fwrite(buf, 1, len, out) != len || fflush(out) != 0)
		return -1;
	return 0;
}

void
rlg_worker_init(struct rlg_worker *w, const struct rlg_config *cfg)
{
	memset(w, 0, sizeof *w);
	w->cfg = cfg;
	if (rlg_store_open(&cfg->store, &w->store) != RLG_OK)
		store_failed(w, rlg_now_ms());
}

void
rlg_worker_fini(struct rlg_worker *w)
{
	rlg_store_close(w->store);
	w->store = NULL;
}

/*
 * One line when the store starts failing, then at most one per
 * RLG_ERROR_LOG_INTERVAL_MS while it goes on, and one when it heals: the
 * error log names the fault without drowning in it.
 */
static void
store_failed(struct rlg_worker *w, int64_t now_ms)
{
	const char *mode = rlg_on_error_name(w->cfg->store.on_error);

	if (w->store_failing_since_ms == 0) {
		w->store_failing_since_ms = now_ms;
		w->next_error_log_ms = now_ms + RLG_ERROR_LOG_INTERVAL_MS;
		w->suppressed_errors = 0;
		rlg_log("store error: %s (on_error = %s)",
		    rlg_store_errmsg(w->store), mode);
	} else if (now_ms >= w->next_error_log_ms) {
		rlg_log("store still failing: %s (%ld more errors; on_error = %s)",
		    rlg_store_errmsg(w->store), w->suppressed_errors + 1, mode);
		w->next_error_log_ms = now_ms + RLG_ERROR_LOG_INTERVAL_MS;
		w->suppressed_errors = 0;
	} else {
		w->suppressed_errors++;
	}
}

static void
store_ok(struct rlg_worker *w, int64_t now_ms)
{
	if (w->store_failing_since_ms == 0)
		return;
	if (w->cfg->log_level >= RLG_LOG_WARN)
		rlg_log("store recovered after %lld ms",
		    (long long)(now_ms - w->store_failing_since_ms));
	w->store_failing_since_ms = 0;
}

/*
 * The store refused a new client (max_clients): a line at once, then at
 * most one per RLG_ERROR_LOG_INTERVAL_MS, saying how many more were
 * refused in between. The store itself works, so this is no failure.
 */
static void
store_full(struct rlg_worker *w, int64_t now_ms)
{
	const char *mode = rlg_on_error_name(w->cfg->store.on_error);

	if (now_ms < w->next_full_log_ms) {
		w->suppressed_full++;
		return;
	}
	if (w->suppressed_full > 0)
		rlg_log("%s (on_error = %s; %ld more refused since the last"
		    " line)", rlg_store_errmsg(w->store), mode,
		    w->suppressed_full);
	else
		rlg_log("%s (on_error = %s)", rlg_store_errmsg(w->store), mode);
	w->next_full_log_ms = now_ms + RLG_ERROR_LOG_INTERVAL_MS;
	w->suppressed_full = 0;
}

static enum rlg_outcome
route(const struct rlg_request *r)
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
 * there are no routes). NULL: no route matched.
 */
static const struct rlg_route *
match_route(const struct rlg_config *cfg, const struct rlg_request *r)
{
	size_t i, j;

	if (!r->path_ok)
		return NULL;
	for (i = 0; i < cfg->nroutes; i++) {
		const struct rlg_route *rt = &cfg->routes[i];
		bool method_ok = rt->nmethods == 0;

		if (rt->prefix ? strncmp(r->path, rt->path, strlen(rt->path)) != 0
		    : strcmp(r->path, rt->path) != 0)
			continue;
		for (j = 0; j < rt->nmethods && !method_ok; j++)
			method_ok = strcmp(rt->methods[j], r->method_name) == 0;
		if (method_ok)
			return rt;
	}
	return NULL;
}

/*
 * One line per rejection the store decides (and per dry-run would-be
 * rejection; repeats answered by the rejection cache only at level info),
 * in a stable key=value form for log tools: the client's store key (an API
 * key only as its hash), the route, the policies that said no (those
 * which[i] selects), and when the client may come back. Nothing from the
 * request is written raw.
 */
static void
log_rejection(const struct rlg_worker *w, const char *event,
    const struct rlg_route *rt, const struct rlg_store_item *items,
    const struct rlg_decision *d, size_t n, const bool *which)
{
	char names[512];
	const char *client = NULL;
	int64_t retry_ms = 0;
	size_t i, used = 0;
	int k;

	if (w->cfg->log_level < RLG_LOG_WARN)
		return;
	names[0] = '\0';
	for (i = 0; i < n; i++) {
		if (d[i].admitted || !which[i])
			continue;
		if (client == NULL)
			client = items[i].client;
		if (d[i].retry_ms > retry_ms)
			retry_ms = d[i].retry_ms;
		k = snprintf(names + used, sizeof names - used, "%s%s",
		    used > 0 ? "," : "", items[i].policy->name);
		if (k < 0 || (size_t)k >= sizeof names - used)
			break;
		used += (size_t)k;
	}
	if (client == NULL)
		return;
	rlg_log("event=%s client=%s route=%s policy=%s retry_after_s=%lld",
	    event, client, rt != NULL ? rt->name : "-", names,
	    (long long)rlg_response_seconds(retry_ms));
}

/*
 * Every request that reaches rlgate counts against its client's quota
 * under the policies its route names. As a responder, rlgate answers its
 * own endpoint (404/405 elsewhere); as a FastCGI Authorizer, it says yes
 * (200, the state in Variable-* headers) or answers the 429 itself.
 */
int
rlg_server_handle(struct rlg_worker *w, char *const *envp, int64_t now_ms,
    rlg_write_fn write, void *ctx)
{
	const struct rlg_config *cfg = w->cfg;
	struct rlg_store_item items[RLG_POLICIES_MAX];
	struct rlg_decision decisions[RLG_POLICIES_MAX];
	struct rlg_policy policies[RLG_POLICIES_MAX];
	char keys[RLG_POLICIES_MAX][RLG_CLIENT_KEY_MAX + 1];
	bool enforced[RLG_POLICIES_MAX], dry[RLG_POLICIES_MAX];
	const struct rlg_route *rt;
	const size_t *list;
	struct rlg_request req;
	struct rlg_answer a;
	const struct rlg_store_cache_stats *cache;
	size_t i, nlist, n = 0;
	uint64_t hits;
	int rc;
	bool admitted = true, authorizer, dry_rejected = false;

	rlg_request_parse(&req, envp, &cfg->client);
	authorizer = req.role == RLG_ROLE_AUTHORIZER;
	rt = match_route(cfg, &req);
	list = rt != NULL ? rt->policies : cfg->default_policies;
	nlist = rt != NULL ? rt->npolicies : cfg->ndefault;

	for (i = 0; i < nlist && n < RLG_POLICIES_MAX; i++) {
		const struct rlg_policy *p = &cfg->policies[list[i]];
		bool exempt = req.addr_ok &&
		    (rlg_cidr_any(cfg->client.exempt, cfg->client.nexempt,
		    &req.addr) || rlg_cidr_any(p->exempt, p->nexempt, &req.addr));

		if (exempt && !cfg->report_exempt)
			continue;
		if (rlg_request_policy_key(&req, p, &cfg->client, keys[n],
		    sizeof keys[n]) != RLG_OK)
			snprintf(keys[n], sizeof keys[n], "%s", req.client);
		policies[n] = *p;
		items[n].policy = p;
		items[n].client = keys[n];
		items[n].advisory = exempt || p->mode == RLG_MODE_DRY_RUN;
		enforced[n] = !items[n].advisory;
		/* A reported exemption is not a dry run: never logged. */
		dry[n] = !exempt && p->mode == RLG_MODE_DRY_RUN;
		n++;
	}

	memset(&a, 0, sizeof a);
	a.style = cfg->style;
	a.errors = cfg->errors;
	a.head = req.method == RLG_METHOD_HEAD;
	a.policies = policies;
	cache = rlg_store_cache_stats(w->store);
	hits = cache != NULL ? cache->hits : 0;
	if (n > 0 && (rc = rlg_store_step(w->store, items, n, now_ms,
	    decisions)) != RLG_OK) {
		if (rc == RLG_EFULL) {
			store_ok(w, now_ms);
			store_full(w, now_ms);
		} else {
			store_failed(w, now_ms);
		}
		/* on_error = open: pass, with nothing to report. */
		if (cfg->store.on_error == RLG_ON_ERROR_CLOSED)
			a.outcome = RLG_OUT_STORE_DOWN;
		else
			a.outcome = authorizer ? RLG_OUT_AUTHORIZED : route(&req);
		return rlg_response_write(&a, write, ctx);
	}
	if (n > 0)
		store_ok(w, now_ms);
	for (i = 0; i < n; i++) {
		if (decisions[i].admitted)
			continue;
		if (dry[i])
			dry_rejected = true;
		else if (enforced[i])
			admitted = false;
	}
	/*
	 * A repeat rejection answered by the rejection cache is the same
	 * decision as the one logged when the store took it: logged again only
	 * at level info, so a flood does not write a line per request.
	 */
	if (!admitted && (cache == NULL || cache->hits == hits ||
	    cfg->log_level >= RLG_LOG_INFO))
		log_rejection(w, "reject", rt, items, decisions, n, enforced);
	else if (n > 0 && cfg->log_level >= RLG_LOG_INFO)
		rlg_log("event=admit client=%s route=%s", items[0].client,
		    rt != NULL ? rt->name : "-");
	if (dry_rejected)
		log_rejection(w, "dry_run_reject", rt, items, decisions, n, dry);
	/*
	 * A rejected request is answered for the enforcing policies only: an
	 * advisory one that would also reject must not set Retry-After or
	 * appear among the violated policies.
	 */
	for (i = 0; !admitted && i < n; i++)
		if (items[i].advisory)
			decisions[i].admitted = true;
	a.decisions = n > 0 ? decisions : NULL;
	a.n = n;
	if (!admitted)
		a.outcome = RLG_OUT_REJECTED;
	else
		a.outcome = authorizer ? RLG_OUT_AUTHORIZED : route(&req);
	return rlg_response_write(&a, write, ctx);
}

void
rlg_worker_idle(struct rlg_worker *w, int64_t now_ms)
{
	int64_t deleted = 0;

	rlg_store_idle(w->store, now_ms);
	if (now_ms < w->next_prune_ms || w->store_failing_since_ms != 0)
		return;
	w->next_prune_ms = now_ms + RLG_PRUNE_INTERVAL_MS;
	if (rlg_store_prune(w->store, now_ms, &deleted) != RLG_OK)
		rlg_log("store prune failed: %s", rlg_store_errmsg(w->store));
}

int
rlg_server_is_fastcgi(void)
{
	return !FCGX_IsCGI();
}

struct thread_arg {
	const struct rlg_config *cfg;
	pthread_t tid;
};

static void *
fastcgi_thread(void *arg)
{
	struct thread_arg *t = arg;
	struct rlg_worker w;
	FCGX_Request req;
	int rc;

	rlg_worker_init(&w, t->cfg);
	if (FCGX_InitRequest(&req, 0, 0) != 0) {
		rlg_log("FCGX_InitRequest failed");
		rlg_worker_fini(&w);
		return NULL;
	}
	/*
	 * No lock around the accept, unlike fcgi2's threaded example: Linux
	 * lets threads accept() on one socket at once (libfcgi serializes
	 * only where USE_LOCKING says a platform cannot), and a kept
	 * FastCGI connection (nginx fastcgi_keep_conn) makes FCGX_Accept_r
	 * wait on that connection: under a lock, every other thread of the
	 * process would wait with it.
	 */
	for (;;) {
		rc = FCGX_Accept_r(&req);
		if (rc < 0) {
			rlg_log("FastCGI accept failed (%d): stopping this worker",
			    rc);
			break;
		}
		rlg_server_handle(&w, req.envp, rlg_now_ms(), fcgx_write,
		    req.out);
		FCGX_Finish_r(&req);
		rlg_worker_idle(&w, rlg_now_ms());
	}
	FCGX_Free(&req, 1);
	rlg_worker_fini(&w);
	return NULL;
}

int
rlg_server_run_fastcgi(const struct rlg_config *cfg, int nthreads)
{
	struct thread_arg *threads;
	int i, started = 0, rc;

	if (FCGX_Init() != 0) {
		rlg_log("FCGX_Init failed");
		return 70;      /* EX_SOFTWARE */
	}
	/* A client that hangs up must not kill the worker mid-write. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * libfcgi catches SIGTERM and only marks a shutdown as pending, which
	 * threads blocked in accept never see: spawn-fcgi users and service
	 * managers expect SIGTERM to stop us. Dying mid-request is safe: an
	 * uncommitted SQLite transaction rolls back.
	 */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	threads = rlg_xcalloc((size_t)nthreads, sizeof *threads);
	for (i = 0; i < nthreads; i++) {
		threads[i].cfg = cfg;
		rc = pthread_create(&threads[i].tid, NULL, fastcgi_thread,
		    &threads[i]);
		if (rc != 0) {
			rlg_log("cannot start worker thread: %s", strerror(rc));
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(threads[i].tid, NULL);
	free(threads);
	return started == nthreads ? 0 : 71;    /* EX_OSERR */
}

int
rlg_server_run_cgi(const struct rlg_config *cfg)
{
	struct rlg_worker w;
	int rc;

	/* Writing to a Redis connection the server closed must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	rlg_worker_init(&w, cfg);
	rc = rlg_server_handle(&w, environ, rlg_now_ms(), stdout_write,
	    stdout);
	/*
	 * The web server waits for a CGI process to exit, so pruning here
	 * delays the client: do it for about one request in a hundred.
	 */
	if (rlg_now_ms() % 100 == 0)
		rlg_worker_idle(&w, rlg_now_ms());
	rlg_worker_fini(&w);
	return rc == 0 ? 0 : 74;        /* EX_IOERR */
}
