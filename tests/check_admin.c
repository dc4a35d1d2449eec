/*
 * check_admin.c: the host's counters (metrics.c) and the admin endpoints
 * (admin.c), in process: the scoreboard shared by processes (a forked
 * child's counts in the parent's sums, a dead process's slot taken over
 * with its counts, the file's names and layout), who may ask (prefix,
 * allow, the address behind trusted proxies, a forged forwarding
 * header), and the answers through the gate: exact counts per policy and
 * decision, admin requests counted by no policy, the exposition's shape,
 * health while the store works and while it fails, the status JSON.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admin.h"
#include "check_rlgate.h"
#include "fixture.h"
#include "front_cgi.h"
#include "fronts.h"
#include "gate.h"
#include "metrics.h"
#include "store_fixture.h"
#include "util.h"

static struct rlg_config *cfg;
static struct rlg_gate gate;
static char answer[1 << 16];
static size_t answer_len;

static int
buf_write(void *ctx, const char *b, size_t len)
{
	(void)ctx;
	if (answer_len + len >= sizeof answer)
		return -1;
	memcpy(answer + answer_len, b, len);
	answer_len += len;
	answer[answer_len] = '\0';
	return 0;
}

/* A config from text over a [store] path in the test's directory, its
 * scoreboard opened beside it. */
static void
load(const char *text)
{
	char full[4096], mpath[4200];

	snprintf(full, sizeof full, "[store]\npath = %s\n%s", path_in("a.db"),
	    text);
	ck_assert_int_eq(rlg_config_load_string(full, "admin.conf", stderr,
	    &cfg), 0);
	ck_assert_int_eq(rlg_metrics_open(rlg_metrics_path(cfg, mpath,
	    sizeof mpath), cfg), 0);
}

static void
unload(void)
{
	rlg_metrics_close();
	rlg_config_free(cfg);
	cfg = NULL;
}

/* Answers the NULL-terminated parameters through the gate at now. */
static void
handle(int64_t now, ...)
{
	const struct rlg_out out = { rlg_front_cgi_render, buf_write, NULL, NULL };
	struct rlg_params in;
	char *envp[16];
	va_list ap;

	va_start(ap, now);
	(void)rlg_test_envv(envp, 16, ap);
	va_end(ap);
	rlg_params_envp(&in, envp);
	answer_len = 0;
	answer[0] = '\0';
	ck_assert_int_eq(rlg_front_serve(&gate, &in, now, &out), 0);
}

/* The value of the metric line that starts with name (with labels). */
static long long
metric(const char *name)
{
	char *at = answer, want[256];
	size_t n;

	n = (size_t)snprintf(want, sizeof want, "\n%s ", name);
	at = strstr(answer, want);
	ck_assert_msg(at != NULL, "no metric %s in:\n%s", name, answer);
	return strtoll(at + n, NULL, 10);
}

#define GET "REQUEST_METHOD=GET"
#define RES "REQUEST_URI=/api/v1/resources"
#define LOOP "REMOTE_ADDR=127.0.0.1"
#define MET "REQUEST_URI=/rlgate/metrics"
#define REQS "rlgate_requests_total"

/*
 * The scoreboard: counts of two slots sum; a forked process's counts are
 * in the sums after it exits; with every slot held, the dead process's
 * slot is the one left, its counts kept; then none is.
 */
START_TEST(test_scoreboard)
{
	struct rlg_metrics_slot **held, *a, *b;
	struct rlg_metrics_sums m;
	const struct rlg_policy *api, *trial;
	char mpath[4200];
	size_t i, n = 0;
	pid_t pid;
	int st;

	load("[policy api]\nlimit = 5\n[policy trial]\nlimit = 1\n"
	    "mode = dry_run\n");
	api = &cfg->policies[0];
	trial = &cfg->policies[1];
	a = rlg_metrics_claim();
	b = rlg_metrics_claim();
	ck_assert(a != NULL && b != NULL && a != b);
	rlg_metrics_decision(a, rlg_metrics_map(cfg), api, RLG_MD_ADMITTED);
	rlg_metrics_decision(b, rlg_metrics_map(cfg), api, RLG_MD_ADMITTED);
	rlg_metrics_decision(b, rlg_metrics_map(cfg), api, RLG_MD_REJECTED);
	rlg_metrics_decision(a, rlg_metrics_map(cfg), trial, RLG_MD_DRY_RUN_REJECTED);
	rlg_metrics_response(a, 200, false);
	rlg_metrics_response(b, 429, false);
	rlg_metrics_response(b, 418, false);
	rlg_metrics_response(a, 200, true);
	rlg_metrics_step_time(a, 500);
	rlg_metrics_step_time(a, 3000000);
	rlg_metrics_store_error(b);
	rlg_metrics_cache_hit(b);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* another process of the host: its own open, its own slot */
		struct rlg_metrics_slot *c;

		rlg_metrics_close();
		if (rlg_metrics_open(rlg_metrics_path(cfg, mpath,
		    sizeof mpath), cfg) != 0 || (c = rlg_metrics_claim()) ==
		    NULL)
			_exit(1);
		for (i = 0; i < 5; i++)
			rlg_metrics_decision(c, rlg_metrics_map(cfg), &cfg->policies[0],
			    RLG_MD_ADMITTED);
		_exit(0);       /* dies holding its slot */
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	ck_assert(m.shared);
	ck_assert_uint_eq(m.requests[0][RLG_MD_ADMITTED], 7);
	ck_assert_uint_eq(m.requests[0][RLG_MD_REJECTED], 1);
	ck_assert_uint_eq(m.requests[1][RLG_MD_DRY_RUN_REJECTED], 1);
	ck_assert_uint_eq(m.responses[rlg_metrics_code_index(200)], 1);
	ck_assert_uint_eq(m.responses[rlg_metrics_code_index(429)], 1);
	ck_assert_uint_eq(m.responses[0], 1);          /* 418: other */
	ck_assert_uint_eq(m.admin_responses[rlg_metrics_code_index(200)], 1);
	ck_assert_uint_eq(m.steps, 2);
	ck_assert_uint_eq(m.step_ns, 3000500);
	ck_assert_uint_eq(m.buckets[0], 1);            /* <= 1 us */
	ck_assert_uint_eq(m.buckets[11], 1);           /* <= 5 ms */
	ck_assert_uint_eq(m.store_errors, 1);
	ck_assert_uint_eq(m.cache_hits, 1);
	/* every slot but the dead child's is taken: then that one */
	held = calloc(RLG_METRICS_SLOTS, sizeof *held);
	ck_assert_ptr_nonnull(held);
	rlg_metrics_release(b);
	for (i = 0; i < RLG_METRICS_SLOTS; i++)
		if ((held[n] = rlg_metrics_claim()) != NULL)
			n++;
	ck_assert_uint_eq(n, RLG_METRICS_SLOTS - 1);   /* a is still held */
	ck_assert_ptr_null(rlg_metrics_claim());
	for (i = 0; i < n; i++)
		rlg_metrics_release(held[i]);
	rlg_metrics_release(a);
	free(held);
	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	ck_assert_uint_eq(m.requests[0][RLG_MD_ADMITTED], 7);  /* kept */
	unload();
}
END_TEST

/*
 * The file's names: a config with another policy adds its name and
 * keeps the counts of the policy both have; a file of another layout is
 * replaced (the counts restart).
 */
START_TEST(test_scoreboard_file)
{
	struct rlg_metrics_slot *a;
	struct rlg_metrics_sums m;
	struct stat sb;
	char mpath[4200];
	FILE *f;

	load("[policy api]\nlimit = 5\n");
	a = rlg_metrics_claim();
	rlg_metrics_decision(a, rlg_metrics_map(cfg), &cfg->policies[0], RLG_MD_REJECTED);
	rlg_metrics_release(a);
	rlg_metrics_path(cfg, mpath, sizeof mpath);
	ck_assert_int_eq(stat(mpath, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	unload();
	load("[policy new]\nlimit = 1\n[policy api]\nlimit = 9\n");
	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	ck_assert_uint_eq(m.requests[1][RLG_MD_REJECTED], 1);   /* api */
	ck_assert_uint_eq(m.requests[0][RLG_MD_REJECTED], 0);   /* new */
	a = rlg_metrics_claim();
	rlg_metrics_decision(a, rlg_metrics_map(cfg), &cfg->policies[0], RLG_MD_ADMITTED);
	rlg_metrics_release(a);
	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	ck_assert_uint_eq(m.requests[0][RLG_MD_ADMITTED], 1);
	unload();
	/* garbage where the scoreboard was: replaced, said in the log */
	f = fopen(mpath, "w");
	ck_assert_ptr_nonnull(f);
	fputs("not a scoreboard\n", f);
	fclose(f);
	ck_assert_int_eq(rlg_test_log_begin(path_in("log.txt")), 0);
	load("[policy api]\nlimit = 5\n");
	ck_assert_int_eq(rlg_test_log_end("replaced by a new one"), 1);
	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	ck_assert(m.shared);
	ck_assert_uint_eq(m.requests[0][RLG_MD_REJECTED], 0);
	unload();
}
END_TEST

/* Builds a request's parameters and asks rlg_admin_match. */
static enum rlg_admin_endpoint
match(const char *uri, const char *addr, const char *xff, bool authorizer)
{
	char u[256], a[64], x[256];
	char *envp[8];
	struct rlg_params in;
	struct rlg_request r;
	size_t n = 0;

	snprintf(u, sizeof u, "REQUEST_URI=%s", uri);
	snprintf(a, sizeof a, "REMOTE_ADDR=%s", addr);
	envp[n++] = (char *)GET;
	envp[n++] = u;
	envp[n++] = a;
	if (xff != NULL) {
		snprintf(x, sizeof x, "HTTP_X_FORWARDED_FOR=%s", xff);
		envp[n++] = x;
	}
	if (authorizer)
		envp[n++] = (char *)"FCGI_ROLE=AUTHORIZER";
	envp[n] = NULL;
	rlg_params_envp(&in, envp);
	rlg_request_read(&r, &in, &cfg->client);
	return rlg_admin_match(cfg, &r);
}

/*
 * A front's auth request from addr about uri (RLGATE_URI, the transport's
 * own target elsewhere), role its RLGATE_ROLE (NULL: a responder's).
 */
static enum rlg_admin_endpoint
front(const char *role, const char *uri, const char *addr)
{
	char r_role[64], r_uri[256], r_addr[64];
	char *envp[] = { r_role, "REQUEST_METHOD=GET",
	    "REQUEST_URI=/.rlgate/auth", r_uri, r_addr, NULL };
	struct rlg_params in;
	struct rlg_request r;

	snprintf(r_role, sizeof r_role, "RLGATE_ROLE=%s",
	    role != NULL ? role : "");
	snprintf(r_uri, sizeof r_uri, "RLGATE_URI=%s", uri);
	snprintf(r_addr, sizeof r_addr, "REMOTE_ADDR=%s", addr);
	if (role == NULL)
		snprintf(r_role, sizeof r_role, "X=");
	rlg_params_envp(&in, envp);
	rlg_request_read(&r, &in, &cfg->client);
	return rlg_admin_match(cfg, &r);
}

/* Who may ask, and for what. */
START_TEST(test_match)
{
	load("[client]\ntrusted_proxies = 10.9.9.9\n[policy api]\nlimit = 5\n");
	ck_assert_int_eq(match("/rlgate/metrics", "127.0.0.1", NULL, false),
	    RLG_ADMIN_METRICS);
	ck_assert_int_eq(match("/rlgate/health", "::1", NULL, false),
	    RLG_ADMIN_HEALTH);
	ck_assert_int_eq(match("/rlgate/status?x=1", "127.0.0.1", NULL, false),
	    RLG_ADMIN_STATUS);
	ck_assert_int_eq(match("/rlgate/", "127.0.0.1", NULL, false),
	    RLG_ADMIN_PAGE);
	ck_assert_int_eq(match("/rlgate", "127.0.0.1", NULL, false),
	    RLG_ADMIN_PAGE);
	ck_assert_int_eq(match("/rlgate/%6detrics", "127.0.0.1", NULL, false),
	    RLG_ADMIN_METRICS);          /* the path as the server serves it */
	ck_assert_int_eq(match("/rlgate/x/../metrics", "127.0.0.1", NULL,
	    false), RLG_ADMIN_METRICS);
	ck_assert_int_eq(match("/rlgate/metrics/", "127.0.0.1", NULL, false),
	    RLG_ADMIN_UNKNOWN);
	ck_assert_int_eq(match("/rlgatex/metrics", "127.0.0.1", NULL, false),
	    RLG_ADMIN_NONE);
	ck_assert_int_eq(match("/api/v1/resources", "127.0.0.1", NULL, false),
	    RLG_ADMIN_NONE);
	/* others: not the endpoints */
	ck_assert_int_eq(match("/rlgate/metrics", "10.0.0.1", NULL, false),
	    RLG_ADMIN_NONE);
	ck_assert_int_eq(match("/rlgate/metrics", "::2", NULL, false),
	    RLG_ADMIN_NONE);
	/* a forwarding header from a peer that is no trusted proxy: unread */
	ck_assert_int_eq(match("/rlgate/metrics", "10.0.0.1", "127.0.0.1",
	    false), RLG_ADMIN_NONE);
	/* through the trusted proxy: the client it names */
	ck_assert_int_eq(match("/rlgate/metrics", "10.9.9.9", "127.0.0.1",
	    false), RLG_ADMIN_METRICS);
	ck_assert_int_eq(match("/rlgate/metrics", "10.9.9.9", "10.0.0.1",
	    false), RLG_ADMIN_NONE);
	/* a forged entry before the one the proxy added: the proxy's wins */
	ck_assert_int_eq(match("/rlgate/metrics", "10.9.9.9",
	    "127.0.0.1, 203.0.113.5", false), RLG_ADMIN_NONE);
	/* the proxy itself is not the client */
	ck_assert_int_eq(match("/rlgate/metrics", "10.9.9.9", NULL, false),
	    RLG_ADMIN_NONE);
	/* an Authorizer asked about the prefix: passed, for allowed only */
	ck_assert_int_eq(match("/rlgate/metrics", "127.0.0.1", NULL, true),
	    RLG_ADMIN_PASS);
	ck_assert_int_eq(match("/rlgate/metrics", "10.0.0.1", NULL, true),
	    RLG_ADMIN_NONE);
	/* so are nginx's auth_request and Caddy's forward_auth: about the
	 * original request, which a responder's RLGATE_URI never is */
	ck_assert_int_eq(front("auth_request", "/rlgate/", "127.0.0.1"),
	    RLG_ADMIN_PASS);
	ck_assert_int_eq(front("forward_auth", "/rlgate/status", "::1"),
	    RLG_ADMIN_PASS);
	ck_assert_int_eq(front("forward_auth", "/rlgate/status", "10.0.0.1"),
	    RLG_ADMIN_NONE);
	ck_assert_int_eq(front(NULL, "/rlgate/metrics", "127.0.0.1"),
	    RLG_ADMIN_NONE);
	unload();
	load("[admin]\nallow =\n[policy api]\nlimit = 5\n");
	ck_assert_int_eq(match("/rlgate/metrics", "127.0.0.1", NULL, false),
	    RLG_ADMIN_NONE);
	unload();
	load("[admin]\nallow = none\nprefix = /ops/rl\n");
	ck_assert_uint_eq(cfg->admin.nallow, 0);
	unload();
	load("[admin]\nallow = 10.0.0.0/8\nprefix = /ops/rl\n");
	ck_assert_int_eq(match("/ops/rl/metrics", "10.1.2.3", NULL, false),
	    RLG_ADMIN_METRICS);
	ck_assert_int_eq(match("/rlgate/metrics", "10.1.2.3", NULL, false),
	    RLG_ADMIN_NONE);
	ck_assert_int_eq(match("/ops/rl/metrics", "127.0.0.1", NULL, false),
	    RLG_ADMIN_NONE);
	unload();
}
END_TEST

/* A bad [admin] line: file:line and what is wrong. */
START_TEST(test_config)
{
	static const struct {
		const char *line, *message;
	} bad[] = {
		{ "prefix = rlgate", "must start with '/'" },
		{ "prefix = /", "trailing '/'" },
		{ "prefix = /rlgate/", "trailing '/'" },
		{ "prefix = /a//b", "without an empty" },
		{ "prefix = /a/../b", "without an empty" },
		{ "prefix = /a b", "may hold only" },
		{ "prefix = /a?b", "may hold only" },
		{ "allow = 10.0.0.1/8", "zero host bits" },
		{ "allow = localhost", "not an IP address" },
	};
	char text[256], *msg = NULL;
	size_t i, len = 0;
	FILE *errs;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "[admin]\n%s\n", bad[i].line);
		errs = open_memstream(&msg, &len);
		ck_assert_ptr_nonnull(errs);
		ck_assert_int_eq(rlg_config_load_string(text, "a.conf", errs,
		    &cfg), 1);
		fclose(errs);
		ck_assert_msg(strncmp(msg, "a.conf:2: [admin] ", 18) == 0 &&
		    strstr(msg, bad[i].message) != NULL, "%s: got %s",
		    bad[i].line, msg);
		free(msg);
		msg = NULL;
	}
	ck_assert_int_eq(rlg_config_load_string("[admin]\nprefix = /ops/r-l.1~\n",
	    "a.conf", stderr, &cfg), 0);
	ck_assert_str_eq(cfg->admin.prefix, "/ops/r-l.1~");
	ck_assert_uint_eq(cfg->admin.nallow, 2);
	rlg_config_free(cfg);
	cfg = NULL;
}
END_TEST

/*
 * Through the gate: a known sequence, then the metrics equal the counts
 * per policy and decision; admin requests count in no policy (nor in
 * rlgate_responses_total); the exposition's header and families.
 */
START_TEST(test_metrics_exact)
{
	int i;

	load("commit = each\n[client]\nexempt = 10.7.0.0/16\n"
	    "[policy api]\nlimit = 3\nwindow = 3600\n"
	    "[policy trial]\nlimit = 1\nwindow = 3600\nmode = dry_run\n");
	rlg_gate_init(&gate, cfg);
	for (i = 0; i < 5; i++)
		handle(T1, GET, RES, LOOP, NULL);
	ck_assert(strncmp(answer, "Status: 429", 11) == 0);
	handle(T1, GET, "REQUEST_URI=/nowhere", "REMOTE_ADDR=10.0.0.2", NULL);
	ck_assert(strncmp(answer, "Status: 404", 11) == 0);
	handle(T1, GET, RES, "REMOTE_ADDR=10.7.1.1", NULL);       /* exempt */
	ck_assert(strncmp(answer, "Status: 200", 11) == 0);
	/* the admin endpoints, twice each: counted by no policy */
	for (i = 0; i < 2; i++) {
		handle(T1, GET, "REQUEST_URI=/rlgate/health", LOOP, NULL);
		handle(T1, GET, "REQUEST_URI=/rlgate/status", LOOP, NULL);
		handle(T1, GET, "REQUEST_URI=/rlgate/", LOOP, NULL);
		handle(T1, GET, "REQUEST_URI=/rlgate/nothing", LOOP, NULL);
		ck_assert(strncmp(answer, "Status: 404", 11) == 0);
	}
	/* not allowed: a path like any other (counted, 404) */
	handle(T1, GET, MET, "REMOTE_ADDR=10.0.0.2", NULL);
	ck_assert(strncmp(answer, "Status: 404", 11) == 0);
	ck_assert_ptr_null(strstr(answer, "rlgate_"));
	handle(T1, GET, MET, LOOP, NULL);
	ck_assert_msg(strncmp(answer, "Status: 200 OK\r\nContent-Type: "
	    "text/plain; version=0.0.4; charset=utf-8\r\n", 70) == 0,
	    "%s", answer);
	ck_assert_int_eq(metric(REQS "{policy=\"api\",decision=\"admitted\"}"),
	    3 + 2);
	ck_assert_int_eq(metric(REQS "{policy=\"api\",decision=\"rejected\"}"),
	    2);
	ck_assert_int_eq(metric(REQS "{policy=\"api\",decision="
	    "\"dry_run_rejected\"}"), 0);
	ck_assert_int_eq(metric(REQS "{policy=\"api\",decision=\"exempt\"}"),
	    1);
	ck_assert_int_eq(metric(REQS "{policy=\"trial\",decision="
	    "\"admitted\"}"), 1 + 1);
	ck_assert_int_eq(metric(REQS "{policy=\"trial\",decision="
	    "\"dry_run_rejected\"}"), 4 + 1);
	ck_assert_int_eq(metric(REQS "{policy=\"trial\",decision="
	    "\"exempt\"}"), 1);
	ck_assert_int_eq(metric("rlgate_responses_total{code=\"200\"}"), 4);
	ck_assert_int_eq(metric("rlgate_responses_total{code=\"429\"}"), 2);
	ck_assert_int_eq(metric("rlgate_responses_total{code=\"404\"}"), 2);
	ck_assert_int_eq(metric("rlgate_admin_responses_total{code=\"200\"}"),
	    6);
	ck_assert_int_eq(metric("rlgate_admin_responses_total{code=\"404\"}"),
	    2);
	/* one step in RLG_METRICS_SAMPLE timed, the first among them */
	ck_assert_int_eq(metric("rlgate_decision_duration_seconds_count"),
	    (7 + RLG_METRICS_SAMPLE - 1) / RLG_METRICS_SAMPLE);
	ck_assert_int_eq(metric("rlgate_decision_duration_seconds_bucket"
	    "{le=\"+Inf\"}"), (7 + RLG_METRICS_SAMPLE - 1) / RLG_METRICS_SAMPLE);
	ck_assert_int_eq(metric("rlgate_store_errors_total"), 0);
	ck_assert_int_eq(metric("rlgate_clients{policy=\"api\"}"), 2);
	ck_assert_int_eq(metric("rlgate_store_up"), 1);
	ck_assert_int_eq(metric("rlgate_build_info{version=\"" PACKAGE_VERSION
	    "\"}"), 1);
	ck_assert_int_ge(metric("rlgate_start_time_seconds"), 1700000000);
	ck_assert_ptr_nonnull(strstr(answer, "\n# HELP rlgate_requests_total "));
	ck_assert_ptr_nonnull(strstr(answer,
	    "\n# TYPE rlgate_decision_duration_seconds histogram\n"));
	/* HEAD: the headers only */
	handle(T1, "REQUEST_METHOD=HEAD", MET, LOOP, NULL);
	ck_assert_ptr_nonnull(strstr(answer, "\r\n\r\n"));
	ck_assert_str_eq(strstr(answer, "\r\n\r\n"), "\r\n\r\n");
	/* another method: 405 with Allow */
	handle(T1, "REQUEST_METHOD=POST", MET, LOOP, NULL);
	ck_assert(strncmp(answer, "Status: 405", 11) == 0);
	ck_assert_ptr_nonnull(strstr(answer, "\r\nAllow: GET, HEAD\r\n"));
	rlg_gate_fini(&gate);
	unload();
}
END_TEST

/*
 * The bound on new keys counts under its own name (k.new_keys), after
 * the policies, in the one order rlg_metrics_policy knows: a charge that
 * applied as admitted or rejected, one skipped (its key not new) not at
 * all.
 */
START_TEST(test_metrics_new_keys)
{
	const struct rlg_policy *nk;
	char key[32];
	int i;

	load("commit = each\n[client]\nkey_secret = 0123456789abcdef0123\n"
	    "[policy k]\nkey = ip, header:X-Api-Key\nlimit = 50\n"
	    "new_keys_per_ip = 2\n");
	nk = cfg->policies[0].new_keys_policy;
	ck_assert_ptr_nonnull(nk);
	ck_assert_uint_eq(rlg_metrics_npolicies(cfg), 2);
	ck_assert_ptr_eq(rlg_metrics_policy(cfg, 0), &cfg->policies[0]);
	ck_assert_ptr_eq(rlg_metrics_policy(cfg, 1), nk);
	ck_assert_ptr_null(rlg_metrics_policy(cfg, 2));
	ck_assert_uint_eq(rlg_metrics_index(cfg, &cfg->policies[0]), 0);
	ck_assert_uint_eq(rlg_metrics_index(cfg, nk), 1);
	rlg_gate_init(&gate, cfg);
	/* key-0 new, key-0 held, key-1 new, key-2 refused, key-0 held */
	for (i = 0; i < 5; i++) {
		snprintf(key, sizeof key, "HTTP_X_API_KEY=key-%d",
		    i == 2 ? 1 : i == 3 ? 2 : 0);
		handle(T1, GET, RES, LOOP, key, NULL);
		ck_assert(strncmp(answer, i == 3 ? "Status: 429" :
		    "Status: 200", 11) == 0);
	}
	handle(T1, GET, MET, LOOP, NULL);
	ck_assert_int_eq(metric(REQS "{policy=\"k\",decision=\"admitted\"}"),
	    5);
	ck_assert_int_eq(metric(REQS "{policy=\"k.new_keys\",decision="
	    "\"admitted\"}"), 2);
	ck_assert_int_eq(metric(REQS "{policy=\"k.new_keys\",decision="
	    "\"rejected\"}"), 1);
	rlg_gate_fini(&gate);
	unload();
}
END_TEST

/*
 * The penalty box in /status: each policy's ban (ban_s 0 and ban_after
 * null without one), and a banned client among the closest with
 * "banned":true, its retry the ban's; its row under the other policy,
 * which the refused request left alone (48 of 50 left), false.
 */
START_TEST(test_status_ban)
{
	int i;

	load("commit = each\n[policy login]\nlimit = 2\nban = 900\n"
	    "[policy api]\nlimit = 50\n");
	rlg_gate_init(&gate, cfg);
	for (i = 0; i < 3; i++)
		handle(T1, GET, RES, LOOP, NULL);
	ck_assert(strncmp(answer, "Status: 429", 11) == 0);
	ck_assert_ptr_nonnull(strstr(answer, "Retry-After: 900\r\n"));
	handle(T1 + 1000, GET, "REQUEST_URI=/rlgate/status", LOOP, NULL);
	ck_assert_ptr_nonnull(strstr(answer, "\"name\":\"login\","));
	ck_assert_ptr_nonnull(strstr(answer, "\"ban_s\":900,\"ban_after\":1,"));
	ck_assert_ptr_nonnull(strstr(answer, "\"ban_s\":0,\"ban_after\":null,"));
	ck_assert_msg(strstr(answer, "\"closest\":[{\"policy\":\"login\","
	    "\"client\":\"127.0.0.1\",\"limit\":2,\"remaining\":0,"
	    "\"retry_after_s\":899,\"reset_s\":899,\"banned\":true}") !=
	    NULL, "%s", answer);
	ck_assert_ptr_nonnull(strstr(answer, "\"policy\":\"api\","
	    "\"client\":\"127.0.0.1\",\"limit\":50,\"remaining\":48,"));
	ck_assert_ptr_nonnull(strstr(answer, "\"banned\":false}"));
	rlg_gate_fini(&gate);
	unload();
}
END_TEST

/* Health and status while the store works, and while it cannot. */
START_TEST(test_health)
{
	char text[1024];

	load("commit = each\n[policy api]\nlimit = 3\n");
	rlg_gate_init(&gate, cfg);
	handle(T1, GET, RES, LOOP, NULL);
	handle(T1, GET, "REQUEST_URI=/rlgate/health", LOOP, NULL);
	ck_assert(strncmp(answer, "Status: 200 OK\r\nContent-Type: "
	    "application/json\r\n", 46) == 0);
	ck_assert_str_eq(strstr(answer, "\r\n\r\n") + 4, "{\"status\":\"ok\"}\n");
	handle(T1, GET, "REQUEST_URI=/rlgate/status", LOOP, NULL);
	ck_assert_ptr_nonnull(strstr(answer, "\"healthy\":true,\"error\":null"));
	ck_assert_ptr_nonnull(strstr(answer, "\"requests\":{\"admitted\":1,"
	    "\"rejected\":0,\"dry_run_rejected\":0,\"exempt\":0},"
	    "\"clients\":1}"));
	ck_assert_ptr_nonnull(strstr(answer, "\"closest\":[{\"policy\":\"api\","
	    "\"client\":\"127.0.0.1\",\"limit\":3,\"remaining\":2,"));
	rlg_gate_fini(&gate);
	unload();
	/* a database in a directory that is not there */
	snprintf(text, sizeof text, "[store]\npath = %s/no/such/dir/x.db\n"
	    "[policy api]\nlimit = 3\n", path_in(""));
	ck_assert_int_eq(rlg_config_load_string(text, "h.conf", stderr, &cfg),
	    0);
	ck_assert_int_eq(rlg_test_log_begin(path_in("log.txt")), 0);
	ck_assert_int_eq(rlg_metrics_open(path_in("m-metrics"), cfg), 0);
	rlg_gate_init(&gate, cfg);
	handle(T1, GET, "REQUEST_URI=/rlgate/health", LOOP, NULL);
	ck_assert_msg(strncmp(answer, "Status: 503 Service Unavailable\r\n",
	    33) == 0, "%s", answer);
	ck_assert_ptr_nonnull(strstr(answer, "\r\n\r\n{\"status\":\"failing\","
	    "\"reason\":\""));
	ck_assert_ptr_nonnull(strstr(answer, "no/such/dir"));
	handle(T1, GET, "REQUEST_URI=/rlgate/status", LOOP, NULL);
	ck_assert(strncmp(answer, "Status: 200", 11) == 0);
	ck_assert_ptr_nonnull(strstr(answer, "\"healthy\":false,\"error\":\""));
	ck_assert_ptr_nonnull(strstr(answer, "\"clients\":null"));
	ck_assert_ptr_nonnull(strstr(answer, "\"closest\":[]"));
	handle(T1, GET, MET, LOOP, NULL);
	ck_assert_int_eq(metric("rlgate_store_up"), 0);
	ck_assert_ptr_null(strstr(answer, "rlgate_clients{"));
	rlg_gate_fini(&gate);
	(void)rlg_test_log_end("store");
	unload();
}
END_TEST

/*
 * Planted scoreboards: a file of mode 0666 (anybody's to write), another
 * user's, a symbolic link: refused (never mapped), said in the log with
 * the owner and mode, set aside as PATH.refused, a new one made (mode
 * 0600, shared); what a link pointed to is untouched.
 */
START_TEST(test_planted_scoreboard)
{
	struct rlg_metrics_sums m;
	char mpath[4200], aside[4300], victim[4200];
	struct stat sb;
	int round;
	FILE *f;

	load("[policy api]\nlimit = 5\n");
	rlg_metrics_path(cfg, mpath, sizeof mpath);
	unload();
	snprintf(aside, sizeof aside, "%s.refused", mpath);
	snprintf(victim, sizeof victim, "%s", path_in("victim"));
	for (round = 0; round < 3; round++) {
		if (round == 0) {
			ck_assert_int_eq(chmod(mpath, 0666), 0);
		} else if (round == 1) {
			if (geteuid() != 0) {
				printf("test_planted_scoreboard: another"
				    " user's file skipped: chown needs root\n");
				continue;
			}
			ck_assert_int_eq(chown(mpath, 65534, 65534), 0);
		} else {
			f = fopen(victim, "w");
			ck_assert_ptr_nonnull(f);
			fputs("keep\n", f);
			fclose(f);
			ck_assert_int_eq(unlink(mpath), 0);
			ck_assert_int_eq(symlink(victim, mpath), 0);
		}
		ck_assert_int_eq(rlg_test_log_begin(path_in("log.txt")), 0);
		load("[policy api]\nlimit = 5\n");
		ck_assert_int_eq(rlg_test_log_end(round == 0 ?
		    "refused: a file of another mode (owner uid 0, mode 0666)" :
		    round == 1 ? "refused: another user's file (owner uid"
		    " 65534" : "refused: a symbolic link"), 1);
		rlg_metrics_sum(rlg_metrics_map(cfg), &m);
		ck_assert(m.shared);
		unload();
		ck_assert_int_eq(lstat(mpath, &sb), 0);
		ck_assert(S_ISREG(sb.st_mode));
		ck_assert_uint_eq(sb.st_mode & 07777, 0600);
		ck_assert_uint_eq(sb.st_uid, geteuid());
		ck_assert_int_eq(lstat(aside, &sb), 0);
		ck_assert(round < 2 ? S_ISREG(sb.st_mode) : S_ISLNK(sb.st_mode));
	}
	ck_assert_int_eq(stat(victim, &sb), 0);
	ck_assert_int_eq(sb.st_size, 5);
}
END_TEST

/* Writes len bytes of p at off into the scoreboard's file, as any
 * writer of the file can while it is mapped. */
static void
scribble(off_t off, const void *p, size_t len)
{
	char mpath[4200];
	int fd;

	fd = open(rlg_metrics_path(cfg, mpath, sizeof mpath), O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, p, len, off), (ssize_t)len);
	close(fd);
}

/*
 * The scoreboard's header written after it was mapped: a slot count of
 * 0x7fffffff (offset 24), a name count past the names, names without an
 * end; slots owned by pids no process has. The sums and the claims keep
 * to the slots mapped, the names to the room there is; the endpoints
 * answer; a slot of an impossible owner is free.
 */
START_TEST(test_scoreboard_hostile)
{
	struct rlg_metrics_slot *a, **held;
	struct rlg_metrics_sums m;
	struct rlg_config *other;
	const struct rlg_metrics_map *om;
	uint32_t big = 0x7fffffff, names = 0xffffffffu;
	uint64_t owner = UINT64_C(0xffffffff00000001);   /* pid -1 */
	char noend[4096], mpath[4200];
	struct stat sb;
	off_t slots_at;
	size_t i, n = 0;

	load("[policy api]\nlimit = 5\n");
	rlg_gate_init(&gate, cfg);
	handle(T1, GET, RES, LOOP, NULL);
	scribble(24, &big, sizeof big);
	scribble(28, &names, sizeof names);
	memset(noend, 'A', sizeof noend);
	scribble(32, noend, sizeof noend);
	handle(T1, GET, MET, LOOP, NULL);
	ck_assert(strncmp(answer, "Status: 200", 11) == 0);
	ck_assert_int_eq(metric(REQS "{policy=\"api\",decision=\"admitted\"}"),
	    1);
	handle(T1, GET, "REQUEST_URI=/rlgate/status", LOOP, NULL);
	ck_assert(strncmp(answer, "Status: 200", 11) == 0);
	handle(T1, GET, RES, LOOP, NULL);
	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	ck_assert_uint_eq(m.requests[0][RLG_MD_ADMITTED], 2);
	/* a config with a new name: no room among names it cannot read,
	 * not counted, and nothing written past the names */
	ck_assert_int_eq(rlg_config_load_string("[policy fresh]\nlimit = 1\n",
	    "o.conf", stderr, &other), 0);
	om = rlg_metrics_map(other);
	ck_assert_ptr_nonnull(om);
	ck_assert_int_eq(om->idx[0], -1);
	rlg_metrics_unmap(other);
	rlg_config_free(other);
	/* every slot owned by pid -1 (none has it): claimable; the slots
	 * end the file */
	ck_assert_int_eq(stat(rlg_metrics_path(cfg, mpath, sizeof mpath),
	    &sb), 0);
	slots_at = sb.st_size - (off_t)(RLG_METRICS_SLOTS *
	    sizeof(struct rlg_metrics_slot));
	rlg_gate_fini(&gate);
	for (i = 0; i < RLG_METRICS_SLOTS; i++)
		scribble(slots_at + (off_t)(i * sizeof(struct rlg_metrics_slot)),
		    &owner, sizeof owner);
	held = calloc(RLG_METRICS_SLOTS, sizeof *held);
	ck_assert_ptr_nonnull(held);
	for (i = 0; i < RLG_METRICS_SLOTS + 8; i++)
		if ((a = rlg_metrics_claim()) != NULL)
			held[n++] = a;
	ck_assert_uint_eq(n, RLG_METRICS_SLOTS);
	for (i = 0; i < n; i++)
		rlg_metrics_release(held[i]);
	free(held);
	unload();
}
END_TEST

/*
 * The write-behind's flushes in the metrics and the status: the failures
 * counted, the age of the last good one; none of it for another commit.
 */
START_TEST(test_flush_metrics)
{
	struct rlg_metrics_sums m;

	load("commit = behind\nflush_ms = 100\n[policy api]\nlimit = 3\n");
	rlg_gate_init(&gate, cfg);
	rlg_metrics_flush(false);
	rlg_metrics_flush(false);
	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	ck_assert_uint_eq(m.flush_failures, 2);
	handle(T1, GET, MET, LOOP, NULL);
	ck_assert_int_eq(metric("rlgate_flush_failures_total"), 2);
	ck_assert_ptr_nonnull(strstr(answer,
	    "# TYPE rlgate_flush_age_seconds gauge\n"));
	rlg_metrics_flush(true);
	rlg_metrics_sum(rlg_metrics_map(cfg), &m);
	ck_assert_int_le(rlg_now_ms() - m.flush_ok_ms, 60000);
	handle(T1, GET, "REQUEST_URI=/rlgate/status", LOOP, NULL);
	ck_assert_ptr_nonnull(strstr(answer, "\"flush_failures\":2,"
	    "\"flush_age_s\":"));
	rlg_gate_fini(&gate);
	unload();
	load("commit = each\n[policy api]\nlimit = 3\n");
	rlg_gate_init(&gate, cfg);
	handle(T1, GET, MET, LOOP, NULL);
	ck_assert_ptr_null(strstr(answer, "rlgate_flush_"));
	handle(T1, GET, "REQUEST_URI=/rlgate/status", LOOP, NULL);
	ck_assert_ptr_nonnull(strstr(answer, "\"flush_failures\":null,"
	    "\"flush_age_s\":null"));
	rlg_gate_fini(&gate);
	unload();
}
END_TEST

/*
 * rlgate_unguarded_total: the requests of each guarding role that no
 * policy covered (a route with policies = none, no route and no
 * default); covered ones and a responder's count nothing there.
 */
START_TEST(test_unguarded_metric)
{
	load("commit = each\n[policy api]\nlimit = 5\n"
	    "[route free]\npath = /free/*\npolicies = none\n"
	    "[route api]\npath = /api/*\npolicies = api\n");
	rlg_gate_init(&gate, cfg);
	handle(T1, "FCGI_ROLE=AUTHORIZER", GET, "REQUEST_URI=/free/a", LOOP,
	    NULL);
	ck_assert(strncmp(answer, "Status: 200", 11) == 0);
	handle(T1, "FCGI_ROLE=AUTHORIZER", GET, "REQUEST_URI=/nowhere", LOOP,
	    NULL);
	handle(T1, "RLGATE_ROLE=forward_auth", GET, "REQUEST_URI=/free/b",
	    LOOP, NULL);
	handle(T1, "RLGATE_ROLE=auth_request", GET, "REQUEST_URI=/api/x",
	    LOOP, NULL);
	handle(T1, GET, "REQUEST_URI=/free/c", LOOP, NULL);
	handle(T1, GET, MET, LOOP, NULL);
	ck_assert_int_eq(metric("rlgate_unguarded_total{role=\"authorizer\"}"),
	    2);
	ck_assert_int_eq(metric("rlgate_unguarded_total{role="
	    "\"auth_request\"}"), 0);
	ck_assert_int_eq(metric("rlgate_unguarded_total{role="
	    "\"forward_auth\"}"), 1);
	ck_assert_ptr_nonnull(strstr(answer,
	    "\n# TYPE rlgate_unguarded_total counter\n"));
	rlg_gate_fini(&gate);
	unload();
}
END_TEST

/*
 * The index of a response code (metrics.c: a switch) is its place in
 * the codes the scoreboard counts, both ways; any other code is 0.
 */
START_TEST(test_code_index)
{
	static const int others[] = { 0, 201, 403, 418, 502, 599, -1 };
	size_t i;

	for (i = 1; i < RLG_METRICS_CODES; i++)
		ck_assert_uint_eq(rlg_metrics_code_index(rlg_metrics_code(i)),
		    i);
	for (i = 0; i < sizeof others / sizeof others[0]; i++)
		ck_assert_uint_eq(rlg_metrics_code_index(others[i]), 0);
	ck_assert_int_eq(rlg_metrics_code(0), 0);
}
END_TEST

Suite *
rlg_admin_suite(void)
{
	Suite *s = suite_create("admin");
	/* test_scoreboard_hostile scribbles on every slot of the file: more
	 * than Check's 4 s under the sanitizers on a loaded machine */
	TCase *tc = store_tcase(s, "core", base_setup, base_teardown, 60);

	tcase_add_test(tc, test_scoreboard);
	tcase_add_test(tc, test_scoreboard_file);
	tcase_add_test(tc, test_match);
	tcase_add_test(tc, test_config);
	tcase_add_test(tc, test_metrics_exact);
	tcase_add_test(tc, test_code_index);
	tcase_add_test(tc, test_metrics_new_keys);
	tcase_add_test(tc, test_health);
	tcase_add_test(tc, test_status_ban);
	tcase_add_test(tc, test_planted_scoreboard);
	tcase_add_test(tc, test_scoreboard_hostile);
	tcase_add_test(tc, test_flush_metrics);
	tcase_add_test(tc, test_unguarded_metric);
	return s;
}
