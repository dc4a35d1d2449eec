/*
 * check_gate.c: the decision for one request (gate.c), fed CGI/FastCGI
 * parameter arrays as a web server sends them, on a real SQLite file:
 * the outcome and what the answer shows (responder and Authorizer),
 * routes and methods, refused requests, dry run, the bound on new keys,
 * on_error, the rejection cache's repeats, and the log lines each writes
 * (captured from stderr), paced (pacer.c).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "check_rlgate.h"
#include "fixture.h"
#include "front_cgi.h"
#include "fronts.h"
#include "gate.h"
#include "store_fixture.h"
#include "util.h"


/* The gate under test, on cfg (owned by the test). */
static struct rlg_config *cfg;
static struct rlg_gate gate;


/*
 * The config text, named name: its [store] path a new file of the
 * test's directory, unless text starts with a [store] path of its own.
 */
static struct rlg_config *
config_of(const char *text, const char *name)
{
	struct rlg_config *c = NULL;
	char full[4096];
	int n;

	if (strncmp(text, "[store]\npath = ", 15) == 0)
		n = snprintf(full, sizeof full, "%s", text);
	else
		n = snprintf(full, sizeof full, "[store]\npath = %s\n%s",
		    path_in("g.db"), text);
	ck_assert(n > 0 && (size_t)n < sizeof full);
	ck_assert_int_eq(rlg_config_load_string(full, name, stderr, &c), 0);
	return c;
}

/* A gate on the config text (config_of). */
static void
gate_on(const char *text)
{
	cfg = config_of(text, "gate.conf");
	rlg_gate_init(&gate, cfg);
}

static void
gate_off(void)
{
	rlg_gate_fini(&gate);
	rlg_config_free(cfg);
	cfg = NULL;
}

/*
 * A reload (SIGHUP): the gate decides with the config text (config_of:
 * the same [store] as gate_on's) from its next request on; the old
 * config is freed.
 */
static void
gate_reload(const char *text)
{
	struct rlg_config *old = cfg;

	cfg = config_of(text, "next.conf");
	rlg_gate_reconfig(&gate, cfg);
	rlg_config_free(old);
}

/* in: the NULL-terminated "NAME=value" parameters of ap, in envp[16]. */
static void
params_v(struct rlg_params *in, char **envp, va_list ap)
{
	(void)rlg_test_envv(envp, 16, ap);
	rlg_params_envp(in, envp);
}

/* Decides for the NULL-terminated "NAME=value" parameters at now. */
static void
ask(struct rlg_verdict *v, int64_t now, ...)
{
	struct rlg_params in;
	char *envp[16];
	va_list ap;

	va_start(ap, now);
	params_v(&in, envp, ap);
	va_end(ap);
	rlg_gate_decide(&gate, &in, now, v);
}

#define GET "REQUEST_METHOD=GET"
#define RES "REQUEST_URI=/api/v1/resources"
#define A1 "REMOTE_ADDR=10.0.0.1"
#define A2 "REMOTE_ADDR=10.0.0.2"

/* The log goes to a file of the test's directory until log_end. */
static void
log_begin(void)
{
	ck_assert_int_eq(rlg_test_log_begin(path_in("log.txt")), 0);
}

/* Restores stderr; returns how many log lines contain needle. */
static int
log_end(const char *needle)
{
	int n = rlg_test_log_end(needle);

	ck_assert_int_ge(n, 0);
	return n;
}

/* The responder: the endpoint within the quota, then 429; other paths
 * and methods counted too (404, 405). */
START_TEST(test_responder)
{
	struct rlg_verdict v;

	gate_on("[policy default]\nlimit = 3\nwindow = 60\n");
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ck_assert_uint_eq(v.answer.n, 1);
	ck_assert_str_eq(v.answer.policies[0].name, "default");
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	ck_assert(!v.cached);
	ck_assert_ptr_null(v.route);
	ask(&v, T1, GET, "REQUEST_URI=/elsewhere", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 1);
	ask(&v, T1, "REQUEST_METHOD=POST", RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_BAD_METHOD);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 0);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert(!v.answer.decisions[0].admitted);
	ck_assert_int_eq(v.answer.decisions[0].retry_ms, 59000);
	/* another client, its own quota; HEAD is answered headers only */
	ask(&v, T1, "REQUEST_METHOD=HEAD", RES, A2, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ck_assert(v.answer.head);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	/* the next window */
	ask(&v, WIN0 + 60000, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	gate_off();
}
END_TEST

/* The Authorizer: yes (200, Variable-*) or the 429 itself. */
START_TEST(test_authorizer)
{
	struct rlg_verdict v;

	gate_on("[policy default]\nlimit = 1\nwindow = 60\n");
	ask(&v, T1, "FCGI_ROLE=AUTHORIZER", GET, "REQUEST_URI=/static/x.css",
	    A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_uint_eq(v.answer.n, 1);
	ask(&v, T1, "FCGI_ROLE=AUTHORIZER", GET, "REQUEST_URI=/static/x.css",
	    A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	/* a path it cannot read fails closed: 400, not authorized */
	ask(&v, T1, "FCGI_ROLE=AUTHORIZER", GET, "REQUEST_URI=/a%2Fb", A2,
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_BAD_REQUEST);
	ck_assert_uint_eq(v.answer.n, 0);
	gate_off();
}
END_TEST

/*
 * nginx's auth_request and Caddy's forward_auth: the original request
 * the front describes is decided (its route, its method), the yes is
 * AUTHORIZED in the role (the answer's form: check_response), the admin
 * prefix passes an allowed client uncounted, a store failure follows
 * on_error, and a role the front misnames is a 500, logged.
 */
START_TEST(test_front_roles)
{
	struct rlg_verdict v;
	char text[512];

	gate_on("[policy default]\nlimit = 2\nwindow = 60\n"
	    "[policy search]\nlimit = 1\nwindow = 60\n"
	    "[route search]\npath = /search\nmethods = POST\n"
	    "policies = search\n"
	    "[route free]\npath = /free/*\npolicies = none\n");
	ask(&v, T1, "RLGATE_ROLE=auth_request", "REQUEST_METHOD=POST",
	    "REQUEST_URI=/search?q=1", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_int_eq(v.answer.role, RLG_ROLE_AUTH_REQUEST);
	ck_assert_str_eq(v.route->name, "search");
	ck_assert_str_eq(v.answer.policies[0].name, "search");
	/* Caddy: the transport's GET, the original POST in RLGATE_METHOD */
	ask(&v, T1, "RLGATE_ROLE=forward_auth", GET, "RLGATE_METHOD=POST",
	    "REQUEST_URI=/search", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_int_eq(v.answer.role, RLG_ROLE_FORWARD_AUTH);
	ck_assert_str_eq(v.route->name, "search");
	/* a GET of the same path is another route: the default policy */
	ask(&v, T1, "RLGATE_ROLE=forward_auth", GET, "REQUEST_URI=/search",
	    A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_ptr_null(v.route);
	ask(&v, T1, "RLGATE_ROLE=auth_request", GET, "REQUEST_URI=/free/a",
	    A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_uint_eq(v.answer.n, 0);
	ask(&v, T1, "RLGATE_ROLE=auth_request", "REQUEST_METHOD=HEAD",
	    "REQUEST_URI=/x", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert(v.answer.head);
	ask(&v, T1, "RLGATE_ROLE=auth_request", GET, "REQUEST_URI=/x", A1,
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert(!v.answer.head);
	/* another client keeps its quota */
	ask(&v, T1, "RLGATE_ROLE=auth_request", GET, "REQUEST_URI=/x", A2,
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	/* a role nobody has: 500, counted by no policy, logged by name */
	log_begin();
	ask(&v, T1, "RLGATE_ROLE=authrequest", GET, "REQUEST_URI=/x", A2,
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_MISCONFIGURED);
	ck_assert_uint_eq(v.answer.n, 0);
	ck_assert_int_eq(log_end("reason=bad_role header=RLGATE_ROLE"), 1);
	ask(&v, T1, "RLGATE_ROLE=auth_request", GET, "REQUEST_URI=/x", A2,
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ask(&v, T1, "RLGATE_ROLE=auth_request", GET, "REQUEST_URI=/x", A2,
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	gate_off();

	/* the store down: closed refuses with 503, open lets it through */
	snprintf(text, sizeof text, "[store]\npath = %s\n"
	    "on_error = closed\n", path_in("missing/x.db"));
	log_begin();
	gate_on(text);
	ask(&v, T1, "RLGATE_ROLE=auth_request", GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_STORE_DOWN);
	gate_off();
	snprintf(text, sizeof text, "[store]\npath = %s\n"
	    "on_error = open\n", path_in("missing/x.db"));
	gate_on(text);
	ask(&v, T1, "RLGATE_ROLE=forward_auth", GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_uint_eq(v.answer.n, 0);
	gate_off();
	(void)log_end("");
}
END_TEST

/* Routes: first match, prefixes, policies = none, GET takes HEAD, the
 * path the server serves; the route is in the verdict. */
START_TEST(test_routes)
{
	struct rlg_verdict v;

	gate_on("[policy default]\nlimit = 5\n"
	    "[policy login]\nlimit = 1\n"
	    "[route login]\npath = /login\nmethods = GET\npolicies = login\n"
	    "[route free]\npath = /static/public/*\npolicies = none\n");
	ask(&v, T1, GET, "REQUEST_URI=/x/../login", A1, NULL);
	ck_assert_ptr_nonnull(v.route);
	ck_assert_str_eq(v.route->name, "login");
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_str_eq(v.answer.policies[0].name, "login");
	ask(&v, T1, "REQUEST_METHOD=HEAD", "REQUEST_URI=//login", A1, NULL);
	ck_assert_str_eq(v.route->name, "login");
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	/* another method: no route, [policy default] */
	ask(&v, T1, "REQUEST_METHOD=POST", "REQUEST_URI=/login", A1, NULL);
	ck_assert_ptr_null(v.route);
	ck_assert_str_eq(v.answer.policies[0].name, "default");
	/* the free route: no policy, nothing to show */
	ask(&v, T1, GET, "REQUEST_URI=/static/public/a.png", A1, NULL);
	ck_assert_str_eq(v.route->name, "free");
	ck_assert_uint_eq(v.answer.n, 0);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	/* ... but not a path that leaves it */
	ask(&v, T1, GET, "REQUEST_URI=/static/public/../secret", A1, NULL);
	ck_assert_ptr_null(v.route);
	ck_assert_uint_eq(v.answer.n, 1);
	gate_off();
}
END_TEST

/*
 * The spellings a backend serves as a route's resource count under it
 * (path_match = normalized, the default): case, one trailing slash,
 * ";params" (a decoded %3B too), for exact and prefix routes; the log
 * shows the path as sent. path_match = bytes matches byte for byte; a
 * dot segment with params is refused (400, counted by none).
 */
START_TEST(test_route_spellings)
{
	static const char *const search[] = {
		"/api/search", "/api/search/", "/api/search;x", "/API/search",
		"/api/Search", "/api/search%3Bx", "/api;v=1/SEARCH;x/",
	};
	static const char *const private[] = {
		"/private/a", "/PRIVATE/a", "/private;x/a", "/Private/",
		"/private", "/private;x",
	};
	char uri[64];
	struct rlg_verdict v;
	size_t i;

	gate_on("[policy default]\nlimit = 100\n"
	    "[policy search]\nlimit = 100\n"
	    "[policy login]\nlimit = 100\n"
	    "[route search]\npath = /api/search\npolicies = search\n"
	    "[route login]\npath = /Login/\nmethods = POST\n"
	    "policies = login\n"
	    "[route private]\npath = /private/*\npolicies = none\n"
	    "[route strict]\npath = /strict\npath_match = bytes\n"
	    "policies = none\n"
	    "[route api]\npath = /api/*\npolicies = default\n");
	ck_assert_ptr_null(cfg->routes[3].match_path);
	ck_assert_str_eq(cfg->routes[1].match_path, "/login");
	ck_assert_str_eq(cfg->routes[2].match_path, "/private/");
	for (i = 0; i < sizeof search / sizeof search[0]; i++) {
		(void)snprintf(uri, sizeof uri, "REQUEST_URI=%s", search[i]);
		ask(&v, T1, GET, uri, A1, NULL);
		ck_assert_msg(v.route != NULL &&
		    strcmp(v.route->name, "search") == 0, "%s", search[i]);
		ck_assert_int_eq(v.answer.decisions[0].remaining,
		    100 - 1 - (int64_t)i);
	}
	for (i = 0; i < sizeof private / sizeof private[0]; i++) {
		(void)snprintf(uri, sizeof uri, "REQUEST_URI=%s", private[i]);
		ask(&v, T1, GET, uri, A1, NULL);
		ck_assert_msg(v.route != NULL &&
		    strcmp(v.route->name, "private") == 0, "%s", private[i]);
	}
	ask(&v, T1, "REQUEST_METHOD=POST", "REQUEST_URI=/LOGIN;jsessionid=1",
	    A1, NULL);
	ck_assert_str_eq(v.route->name, "login");
	ask(&v, T1, "REQUEST_METHOD=POST", "REQUEST_URI=/login", A1, NULL);
	ck_assert_str_eq(v.route->name, "login");
	/* not the same resource: another name, or not under the prefix */
	ask(&v, T1, GET, "REQUEST_URI=/api/searching", A1, NULL);
	ck_assert_str_eq(v.route->name, "api");
	ask(&v, T1, GET, "REQUEST_URI=/privatex", A1, NULL);
	ck_assert_ptr_null(v.route);
	ask(&v, T1, GET, "REQUEST_URI=/API/x", A1, NULL);
	ck_assert_str_eq(v.route->name, "api");
	/* bytes: only the path as written */
	ask(&v, T1, GET, "REQUEST_URI=/strict", A1, NULL);
	ck_assert_str_eq(v.route->name, "strict");
	ask(&v, T1, GET, "REQUEST_URI=/STRICT", A1, NULL);
	ck_assert_ptr_null(v.route);
	ask(&v, T1, GET, "REQUEST_URI=/strict/", A1, NULL);
	ck_assert_ptr_null(v.route);
	/* "..;": the parent to some backends, a name to others */
	log_begin();
	ask(&v, T1, GET, "REQUEST_URI=/private/..;/api/search", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_BAD_REQUEST);
	ck_assert_uint_eq(v.answer.n, 0);
	(void)log_end("");
	gate_off();

	/* the log shows the request's own spelling (another client: the
	 * table keeps A1's counts across the two configurations) */
	gate_on("[policy search]\nlimit = 1\n"
	    "[route search]\npath = /api/search\npolicies = search\n");
	ask(&v, T1, GET, "REQUEST_URI=/api/search", A2, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	log_begin();
	ask(&v, T1, GET, "REQUEST_URI=/API/Search;x", A2, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_int_eq(log_end(" route=search policy=search "
	    "retry_after_s=59 method=GET path=/API/Search;x"), 1);
	gate_off();
}
END_TEST

/* Refused unread: counted by none, logged once then paced. */
START_TEST(test_refused)
{
	struct rlg_verdict v;
	int i;

	gate_on("[client]\ntrusted_proxies = 10.0.0.1\n"
	    "key_secret = 0123456789abcdef0123\n"
	    "[policy default]\nlimit = 2\n"
	    "[policy k]\nkey = header:X-Api-Key\nlimit = 2\n");
	log_begin();
	for (i = 0; i < 5; i++) {
		ask(&v, T1 + i, GET, RES, A1, "HTTP_X_FORWARDED_FOR=1.2.3.4",
		    "HTTP_X_FORWARDED_FOR=5.6.7.8", NULL);
		ck_assert_int_eq(v.answer.outcome, RLG_OUT_BAD_REQUEST);
		ck_assert_uint_eq(v.answer.n, 0);
	}
	ask(&v, T1, GET, RES, A2, "HTTP_X_API_KEY=a", "HTTP_X_API_KEY=b",
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_BAD_REQUEST);
	ask(&v, T1, GET, "REQUEST_URI=/%zz", A2, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_BAD_REQUEST);
	/* one line for the lot within 10 s; then one with the count */
	ck_assert_int_eq(log_end("event=bad_request"), 1);
	log_begin();
	ask(&v, T1 + 20000, GET, "REQUEST_URI=/%zz", A2, NULL);
	ck_assert_int_eq(log_end("reason=bad_path header=- suppressed=6"), 1);
	/* nothing was counted: both clients have their whole quota */
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 1);
	ask(&v, T1, GET, RES, A2, NULL);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 1);
	gate_off();
}
END_TEST

/* A dry-run policy is decided, stored and logged, never shown. */
START_TEST(test_dry_run_hidden)
{
	struct rlg_verdict v;

	gate_on("[policy hard]\nlimit = 2\n"
	    "[policy trial]\nlimit = 1\nmode = dry_run\n");
	log_begin();
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_uint_eq(v.answer.n, 1);
	ck_assert_str_eq(v.answer.policies[0].name, "hard");
	ck_assert_int_eq(v.answer.decisions[0].remaining, 1);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ck_assert_uint_eq(v.answer.n, 1);
	ck_assert_int_eq(log_end("event=dry_run_reject client=10.0.0.1 "
	    "route=- policy=trial"), 1);
	gate_off();
}
END_TEST

/*
 * A rejection's line carries the method and the path as log tokens:
 * bytes outside the safe set percent-encoded (no space, quote or
 * control byte reaches the log), the path cut at 200 bytes with "...",
 * a method longer than the request keeps cut with "...".
 */
START_TEST(test_reject_line_request)
{
	struct rlg_verdict v;
	char uri[600], want[900];
	int i;

	gate_on("commit = each\nrejection_cache = 0\n"
	    "[policy default]\nlimit = 1\n");
	log_begin();
	ask(&v, T1, GET, RES, A1, NULL);
	ask(&v, T1, GET, "REQUEST_URI=/api/v1/a%20b%22c%5C%C3%A9%25?q=1", A1,
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	snprintf(uri, sizeof uri, "REQUEST_URI=/");
	for (i = 0; i < 300; i++)
		strcat(uri, "x");
	ask(&v, T1, GET, uri, A1, NULL);
	ask(&v, T1, "REQUEST_METHOD=PROPFINDXXXXXXXXXXXXX", RES, A1, NULL);
	ck_assert_int_eq(log_end(" retry_after_s=59 method=GET"
	    " path=/api/v1/a%20b%22c%5C%C3%A9%25\n"), 1);
	snprintf(want, sizeof want, " method=GET path=/");
	for (i = 0; i < 199; i++)
		strcat(want, "x");
	strcat(want, "...\n");
	ck_assert_int_eq(log_end(want), 1);
	ck_assert_int_eq(log_end(" method=PROPFINDXXXXXXX... path="
	    "/api/v1/resources\n"), 1);
	gate_off();
}
END_TEST

/*
 * [log] format = json: one object per line, the time and pid first, an
 * event's pairs as members (retry_after_s a number), other lines as
 * "message" with JSON's escapes.
 */
START_TEST(test_log_json)
{
	struct rlg_verdict v;

	gate_on("commit = each\nrejection_cache = 0\n"
	    "[policy default]\nlimit = 1\n[log]\nformat = json\n");
	ck_assert_int_eq(cfg->log_format, RLG_LOG_JSON);
	rlg_log_set_json(1);
	log_begin();
	ask(&v, T1, GET, RES, A1, NULL);
	ask(&v, T1, GET, RES, A1, NULL);
	rlg_log("store error: \"quoted\" \\ and a\ttab");
	rlg_log_set_json(0);
	ck_assert_int_eq(log_end("\",\"pid\":"), 2);
	ck_assert_int_eq(log_end("Z\",\"pid\":"), 2);
	ck_assert_int_eq(log_end(",\"event\":\"reject\",\"client\":\"10.0.0.1\","
	    "\"route\":\"-\",\"policy\":\"default\",\"retry_after_s\":59,"
	    "\"method\":\"GET\",\"path\":\"/api/v1/resources\"}\n"), 1);
	ck_assert_int_eq(log_end(",\"message\":\"store error: \\\"quoted\\\" "
	    "\\\\ and a\\u0009tab\"}\n"), 1);
	ck_assert_int_eq(log_end("{\"time\":\"20"), 2);
	gate_off();
}
END_TEST

/* The bound on new keys: shown and logged only when it refuses. */
START_TEST(test_new_keys)
{
	struct rlg_verdict v;
	char key[32];
	int i;

	gate_on("[client]\nkey_secret = 0123456789abcdef0123\n"
	    "[policy k]\nkey = ip, header:X-Api-Key\nlimit = 5\n"
	    "new_keys_per_ip = 2\n");
	log_begin();
	for (i = 0; i < 3; i++) {
		snprintf(key, sizeof key, "HTTP_X_API_KEY=key-%d", i);
		ask(&v, T1, GET, RES, A1, key, NULL);
		if (i < 2) {
			ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
			ck_assert_uint_eq(v.answer.n, 1);
			ck_assert_str_eq(v.answer.policies[0].name, "k");
		}
	}
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_uint_eq(v.answer.n, 2);
	ck_assert_str_eq(v.answer.policies[1].name, "k.new_keys");
	ck_assert(!v.answer.decisions[1].admitted);
	ck_assert_int_eq(v.answer.decisions[1].limit, 2);
	ck_assert_int_eq(log_end("policy=k.new_keys "), 1);
	/* a held key goes on; no header: the address key, no charge */
	ask(&v, T1, GET, RES, A1, "HTTP_X_API_KEY=key-0", NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ck_assert_uint_eq(v.answer.n, 1);
	gate_off();
}
END_TEST

/* A store that cannot open: on_error decides, one log line. */
START_TEST(test_on_error)
{
	struct rlg_verdict v;
	char text[512];

	snprintf(text, sizeof text, "[store]\npath = %s\n"
	    "on_error = closed\n", path_in("missing/x.db"));
	log_begin();
	gate_on(text);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_STORE_DOWN);
	ck_assert_uint_eq(v.answer.n, 0);
	ask(&v, T1 + 1, GET, RES, A1, NULL);
	gate_off();
	ck_assert_int_eq(log_end("store error:"), 1);
	snprintf(text, sizeof text, "[store]\npath = %s\n"
	    "on_error = open\n", path_in("missing/x.db"));
	log_begin();
	gate_on(text);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ck_assert_uint_eq(v.answer.n, 0);
	ask(&v, T1, "FCGI_ROLE=AUTHORIZER", GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	gate_off();
	(void)log_end("");
}
END_TEST

/* A repeat answered by the rejection cache is reported as such, and
 * logged once (at warn). The cache stands before a store that commits
 * each decision. */
START_TEST(test_cached_repeats)
{
	struct rlg_verdict v;
	int i;

	gate_on("[store]\nrejection_cache = 64\ncommit = each\n"
	    "[policy default]\nlimit = 1\n");
	log_begin();
	for (i = 0; i < 4; i++) {
		ask(&v, T1 + i, GET, RES, A1, NULL);
		ck_assert(v.cached == (i >= 2));
	}
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_int_eq(log_end("event=reject"), 1);
	gate_off();
}
END_TEST

/*
 * With the decision table, which answers repeats itself (no rejection
 * cache): a client's repeats before its Retry-After are logged once at
 * warn, another client's rejection has its own line, and so has the
 * first rejection after the quota came back; at info, or with
 * rejection_cache = 0, every one.
 */
START_TEST(test_table_repeats)
{
	struct rlg_verdict v;
	int i;

	gate_on("[store]\ncommit = behind\nmax_clients = 100\n"
	    "[policy default]\nlimit = 1\nwindow = 60\n");
	log_begin();
	for (i = 0; i < 5; i++) {
		ask(&v, T1 + i, GET, RES, A1, NULL);
		ck_assert(!v.cached);
	}
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ask(&v, T1 + 10, GET, RES, A2, NULL);
	ask(&v, T1 + 11, GET, RES, A2, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	/* The next window: admitted, then a new rejection. */
	ask(&v, T1 + 60000, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ask(&v, T1 + 60001, GET, RES, A1, NULL);
	ask(&v, T1 + 60002, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_int_eq(log_end("event=reject"), 3);
	gate_off();

	gate_on("[store]\ncommit = behind\nmax_clients = 100\n"
	    "[log]\nlevel = info\n[policy default]\nlimit = 1\n");
	log_begin();
	for (i = 0; i < 5; i++)      /* a window of its own */
		ask(&v, T1 + 120000 + i, GET, RES, A1, NULL);
	ck_assert_int_eq(log_end("event=reject"), 4);
	gate_off();

	/* No rejection cache: every rejection logged, as without the table. */
	gate_on("[store]\ncommit = behind\nmax_clients = 100\n"
	    "rejection_cache = 0\n[policy default]\nlimit = 1\n");
	log_begin();
	for (i = 0; i < 5; i++)
		ask(&v, T1 + 240000 + i, GET, RES, A1, NULL);
	ck_assert_int_eq(log_end("event=reject"), 4);
	gate_off();
}
END_TEST

/*
 * A repeat paced away (the same client, route and policy before its
 * Retry-After) is not formatted at all, not merely left unwritten: the
 * log's count of rejection lines stays. Two routes on one policy are two
 * rejections (their names are hashed apart), each a line of its own.
 */
START_TEST(test_repeat_not_formatted)
{
	static const struct {
		const char *uri;
		uint64_t lines;     /* formatted after it */
	} steps[] = {
		{ "REQUEST_URI=/r1", 0 }, { "REQUEST_URI=/r1", 0 },
		{ "REQUEST_URI=/r1", 1 },       /* refused: its line */
		{ "REQUEST_URI=/r1", 1 },       /* the repeat: nothing */
		{ "REQUEST_URI=/r2", 2 },       /* another route: a line */
		{ "REQUEST_URI=/r2", 2 },
	};
	struct rlg_verdict v;
	size_t i;

	gate_on("[store]\ncommit = behind\nmax_clients = 100\n"
	    "[policy default]\nlimit = 2\nwindow = 60\n"
	    "[route r1]\npath = /r1\npolicies = default\n"
	    "[route r2]\npath = /r2\npolicies = default\n");
	log_begin();
	for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		ask(&v, T1 + (int64_t)i, GET, steps[i].uri, A1, NULL);
		if (i >= 2)
			ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
		ck_assert_uint_eq(gate.log.rejection_lines, steps[i].lines);
	}
	ck_assert_int_eq(log_end("event=reject"), 2);
	ck_assert_int_eq(log_end("route=r2"), 1);
	gate_off();
}
END_TEST

/*
 * A reload hashes the new config's names (rlg_gate_reconfig): a
 * rejection by a policy of another name, in the same place of the
 * config, for the same client, is a line of its own, not a repeat of
 * the old policy's; a gate still hashing the old names would pace it
 * away.
 */
START_TEST(test_repeats_reload)
{
	struct rlg_verdict v;
	int i;

	gate_on("[policy a]\nlimit = 1\nwindow = 60\n");
	log_begin();
	for (i = 0; i < 3; i++)
		ask(&v, T1 + i, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_uint_eq(gate.log.rejection_lines, 1);
	gate_reload("[policy b]\nlimit = 1\nwindow = 60\n");
	for (i = 3; i < 6; i++)
		ask(&v, T1 + i, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_str_eq(v.answer.policies[0].name, "b");
	ck_assert_uint_eq(gate.log.rejection_lines, 2);
	ck_assert_int_eq(log_end("event=reject"), 2);
	ck_assert_int_eq(log_end("policy=b "), 1);
	gate_off();
}
END_TEST

/*
 * A route's cost: each of its policies charged that many units, all or
 * nothing. Cost 5 against a limit of 12: admitted twice (2 left), then
 * refused with nothing consumed, logged with cost=5 (a number in JSON);
 * a cost-1 request of another route on the same policy still gets the 2
 * left. A request no route takes costs 1. Both commits (each, behind).
 */
START_TEST(test_route_cost)
{
	static const char *const commits[] = { "each", "behind" };
	struct rlg_verdict v;
	char text[512];

	snprintf(text, sizeof text, "[store]\ncommit = %s\n"
	    "max_clients = 100\nrejection_cache = 64\n"
	    "[policy default]\nlimit = 100\n"
	    "[policy shared]\nlimit = 12\nwindow = 60\n"
	    "[route export]\npath = /export\ncost = 5\npolicies = shared\n"
	    "[route list]\npath = /list\npolicies = shared\n", commits[_i]);
	gate_on(text);
	ck_assert_int_eq(cfg->routes[0].cost, 5);
	log_begin();
	ask(&v, T1, GET, "REQUEST_URI=/export", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 7);
	ask(&v, T1, GET, "REQUEST_URI=/export", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	ask(&v, T1, GET, "REQUEST_URI=/export", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert(!v.answer.decisions[0].admitted);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	ck_assert(!v.cached);
	/* again: still refused, still 2 left, not from the cache */
	ask(&v, T1 + 1, GET, "REQUEST_URI=/export", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	ck_assert(!v.cached);
	/* cost 1 on the other route: the two units left */
	ask(&v, T1 + 2, GET, "REQUEST_URI=/list", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 1);
	ask(&v, T1 + 2, GET, "REQUEST_URI=/list", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 0);
	ask(&v, T1 + 2, GET, "REQUEST_URI=/list", A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	/* no route: [policy default], cost 1 */
	ask(&v, T1 + 3, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 99);
	/* the cost on the export's line, none on the list's */
	ck_assert_int_eq(log_end(" route=export policy=shared "
	    "retry_after_s=59 cost=5 left=2 method=GET path=/export\n"), 1);
	ck_assert_int_eq(log_end(" route=list policy=shared "
	    "retry_after_s=59 method=GET path=/list\n"), 1);
	ck_assert_int_eq(log_end("cost="), 1);
	gate_off();

	/* JSON: the cost a number. */
	snprintf(text, sizeof text, "[store]\ncommit = %s\n"
	    "max_clients = 100\n"
	    "[policy shared]\nlimit = 4\nwindow = 60\n"
	    "[route export]\npath = /export\ncost = 3\npolicies = shared\n"
	    "[log]\nformat = json\n", commits[_i]);
	gate_on(text);
	rlg_log_set_json(1);
	log_begin();
	ask(&v, T1, GET, "REQUEST_URI=/export", A2, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ask(&v, T1, GET, "REQUEST_URI=/export", A2, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	rlg_log_set_json(0);
	ck_assert_int_eq(log_end("\"retry_after_s\":59,\"cost\":3,"
	    "\"left\":1,\"method\":\"GET\""), 1);
	gate_off();
}
END_TEST

/*
 * cost = header:X-Cost, cost_max = 10, against 12 per minute: a trusted
 * peer's header is the cost (4), in a guarding role too; the same header
 * from an untrusted peer (a responder's client, an Authorizer's client)
 * is ignored and the request costs cost_max; a trusted peer without the
 * header costs cost_max; a value that is no plain decimal integer from
 * 1 to cost_max, or the header twice, is refused with 400, counted by no
 * policy (the units are still there after), and logged reason=bad_cost.
 */
START_TEST(test_route_cost_header)
{
	static const char *const bad[] = {
		"HTTP_X_COST=0", "HTTP_X_COST=11", "HTTP_X_COST=+3",
		"HTTP_X_COST=-3", "HTTP_X_COST=3 ", "HTTP_X_COST= 3",
		"HTTP_X_COST=3 4", "HTTP_X_COST=", "HTTP_X_COST=0x3",
		"HTTP_X_COST=3.0", "HTTP_X_COST=99999999999999999999999",
	};
	struct rlg_verdict v;
	size_t i;

	gate_on("[client]\ntrusted_proxies = 10.0.0.1/32\n"
	    "[policy shared]\nlimit = 12\nwindow = 60\n"
	    "[route search]\npath = /search\ncost = header:X-Cost\n"
	    "cost_max = 10\npolicies = shared\n");
	log_begin();
	/* Trusted: the header's 4. */
	ask(&v, T1, GET, "REQUEST_URI=/search", A1, "HTTP_X_COST=4", NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 8);
	/* Untrusted: 10, whatever it says (1), or with no header. */
	ask(&v, T1, GET, "REQUEST_URI=/search", A2, "HTTP_X_COST=1", NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	ask(&v, T1, GET, "REQUEST_URI=/search", A2, "HTTP_X_COST=1", NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ask(&v, T1, GET, "REQUEST_URI=/search", "REMOTE_ADDR=10.0.0.3",
	    NULL);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	/* A guarding role does not make the client's header believed. */
	ask(&v, T1, "FCGI_ROLE=AUTHORIZER", GET, "REQUEST_URI=/search",
	    "REMOTE_ADDR=10.0.0.4", "HTTP_X_COST=1", NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	/* Malformed from the trusted peer: 400, nothing taken. */
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ask(&v, T1, GET, "REQUEST_URI=/search", A1, bad[i], NULL);
		ck_assert_msg(v.answer.outcome == RLG_OUT_BAD_REQUEST,
		    "%s: outcome %d", bad[i], (int)v.answer.outcome);
		ck_assert_uint_eq(v.answer.n, 0);
	}
	/* X-Cost and X_Cost: the header twice. */
	ask(&v, T1, GET, "REQUEST_URI=/search", A1, "HTTP_X_COST=1",
	    "HTTP_X_COST=1", NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_BAD_REQUEST);
	ck_assert_int_eq(log_end(" reason=bad_cost header=X-Cost "
	    "suppressed=0\n"), 1);
	/* The 8 left are all there: a trusted peer's 8 takes them. */
	ask(&v, T1 + 1, GET, "REQUEST_URI=/search", A1, "HTTP_X_COST=8",
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_NOT_FOUND);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 0);
	/* Behind the trusted proxy, the client's header is the proxy's,
	 * in forward_auth too; without one the client pays cost_max. */
	ask(&v, T1, "RLGATE_ROLE=forward_auth", GET, "REQUEST_URI=/search",
	    A1, "HTTP_X_FORWARDED_FOR=192.0.2.9", "HTTP_X_COST=3", NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 9);
	ask(&v, T1, GET, "REQUEST_URI=/search", A1,
	    "HTTP_X_FORWARDED_FOR=192.0.2.10", NULL);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	gate_off();
}
END_TEST

/*
 * [tier NAME] through the gate, for each algorithm: the tier's client
 * gets the tier's limit on the same policy (the headers' numbers are
 * its), another client the policy's; an exempt tier is not limited; the
 * rejection's line names the tier and the limit that applied.
 */
START_TEST(test_tiers)
{
	static const char *const algs[] = { "fixed_window", "sliding_window",
	    "token_bucket", "sliding_log" };
	struct rlg_verdict v;
	char text[1024];
	int i;

	snprintf(text, sizeof text, "[policy default]\nalgorithm = %s\n"
	    "limit = 2\nwindow = 60\n"
	    "[tier gold]\nclients = 10.0.0.0/31\ndefault = limit=4\n"
	    "[tier free]\nclients = 10.0.0.9\ndefault = exempt\n", algs[_i]);
	gate_on(text);
	log_begin();
	for (i = 0; i < 4; i++) {
		ask(&v, T1, GET, RES, A1, NULL);
		ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
		ck_assert_int_eq(v.answer.decisions[0].limit, 4);
		ck_assert_int_eq(v.answer.decisions[0].remaining, 3 - i);
		ck_assert_int_eq(v.answer.policies[0].lim.limit, 4);
		ck_assert_str_eq(v.answer.policies[0].name, "default");
	}
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_int_eq(v.answer.decisions[0].limit, 4);
	/* another client: the policy's own 2 */
	ask(&v, T1, GET, RES, A2, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 2);
	ask(&v, T1, GET, RES, A2, NULL);
	ask(&v, T1, GET, RES, A2, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	ck_assert_int_eq(v.answer.policies[0].lim.limit, 2);
	/* the exempt tier: never limited, nothing shown */
	for (i = 0; i < 5; i++) {
		ask(&v, T1, GET, RES, "REMOTE_ADDR=10.0.0.9", NULL);
		ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
		ck_assert_uint_eq(v.answer.n, 0);
	}
	/* the guarding roles decide with the tier too (10.0.0.0 is gold) */
	ask(&v, T1, "FCGI_ROLE=AUTHORIZER", GET, RES, "REMOTE_ADDR=10.0.0.0",
	    NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_int_eq(v.answer.decisions[0].limit, 4);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 3);
	ask(&v, T1, "RLGATE_ROLE=auth_request", GET, RES,
	    "REMOTE_ADDR=10.0.0.0", NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 2);
	ck_assert_int_eq(log_end("client=10.0.0.1 route=- policy=default "), 1);
	ck_assert_int_eq(log_end(" tier=gold limit=4 method=GET"), 1);
	ck_assert_int_eq(log_end("client=10.0.0.2 route=- policy=default "
	    "retry_after_s="), 1);
	ck_assert_int_eq(log_end("tier="), 1);
	gate_off();
}
END_TEST

/*
 * A reload gives the gate the new config's tiers: the same client, the
 * new limit, on the state it has.
 */
START_TEST(test_tiers_reload)
{
	struct rlg_verdict v;

	gate_on("[policy default]\nlimit = 2\nwindow = 60\n");
	ask(&v, T1, GET, RES, A1, NULL);
	ask(&v, T1, GET, RES, A1, NULL);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	gate_reload("[policy default]\nlimit = 2\nwindow = 60\n[tier t]\n"
	    "clients = 10.0.0.1\ndefault = limit=3\n");
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_ADMITTED);
	ck_assert_int_eq(v.answer.decisions[0].limit, 3);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 0);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	gate_off();
}
END_TEST

/* Runs sql on the gate's database, as an operator's sqlite3 shell. */
static void
gate_sql(const char *sql)
{
	sqlite3 *db;

	ck_assert_int_eq(sqlite3_open(path_in("g.db"), &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK,
	    "%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* A whole pass of the process's overrides reader, as at its interval. */
static void
overrides_pass(struct rlg_gate *g)
{
	rlg_overrides_sync(&g->overrides);
}

/*
 * Overrides in the store through the gate: read by the process's reader
 * when their version moved (a pass, as every RLG_OVERRIDES_INTERVAL_MS),
 * before the config's tiers; a bad row skipped and logged with its text
 * as tokens (a newline in it never makes a line of its own).
 */
START_TEST(test_overrides)
{
	struct rlg_verdict v;

	gate_on("[policy default]\nlimit = 2\nwindow = 60\n"
	    "[tier t]\nclients = 10.0.0.2\ndefault = limit=3\n");
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 2);
	gate_sql("INSERT INTO rlg_override(policy, client, spec) VALUES"
	    " ('default', '10.0.0.1', 'limit=5'),"
	    " ('default', '10.0.0.2', 'limit=6'),"
	    " ('default', 'bad' || char(10) || 'row', 'limit=5'),"
	    " ('nope', '10.0.0.3', 'limit=5'),"
	    " ('default', '10.0.0.4', 'limit=0')");
	log_begin();
	overrides_pass(&gate);
	ask(&v, T1 + RLG_OVERRIDES_INTERVAL_MS, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 5);
	ck_assert_int_eq(v.answer.decisions[0].remaining, 3);
	/* the override before the tier */
	ask(&v, T1 + RLG_OVERRIDES_INTERVAL_MS, GET, RES, A2, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 6);
	ck_assert_int_eq(log_end("event=bad_override policy=default "
	    "client=bad%0Arow spec=limit=5 reason=bad_client detail=client:"
	    "%20%22bad%0Arow%22%20is%20no%20address"), 1);
	ck_assert_int_eq(log_end("event=bad_override policy=nope "
	    "client=10.0.0.3 spec=limit=5 reason=unknown_policy "
	    "detail=no%20%5Bpolicy%20nope%5D\n"), 1);
	ck_assert_int_eq(log_end("client=10.0.0.4 spec=limit=0 "
	    "reason=bad_spec detail=spec:%20limit:%20must%20be%20an%20integer"),
	    1);
	ck_assert_int_eq(log_end("overrides loaded: 2 (3 skipped)"), 1);
	/* deleted: the tier again, the policy's for the other */
	gate_sql("DELETE FROM rlg_override WHERE client LIKE '10.0.0.%'");
	overrides_pass(&gate);
	ask(&v, T1 + 2 * RLG_OVERRIDES_INTERVAL_MS, GET, RES, A2, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 3);
	ask(&v, T1 + 2 * RLG_OVERRIDES_INTERVAL_MS, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 2);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_REJECTED);
	gate_off();
}
END_TEST

/*
 * The overrides are read and built once per process, not once per
 * worker thread: three gates (three workers' on one config) after a
 * change all decide with it, and one set was built ("overrides loaded"
 * once at level info). The gates' own clocks never make them read.
 */
START_TEST(test_overrides_once)
{
	struct rlg_gate more[2];
	struct rlg_verdict v;
	struct rlg_params in;
	char *envp[8];
	size_t i;

	gate_on("[policy default]\nlimit = 2\nwindow = 60\n"
	    "[log]\nlevel = info\n");
	for (i = 0; i < 2; i++)
		rlg_gate_init(&more[i], cfg);
	gate_sql("INSERT INTO rlg_override(policy, client, spec) VALUES"
	    " ('default', '10.0.0.1', 'limit=5')");
	log_begin();
	overrides_pass(&gate);
	ask(&v, T1 + RLG_OVERRIDES_INTERVAL_MS, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 5);
	envp[0] = GET;
	envp[1] = RES;
	envp[2] = A1;
	envp[3] = NULL;
	rlg_params_envp(&in, envp);
	for (i = 0; i < 2; i++) {
		rlg_gate_decide(&more[i], &in, T1 + RLG_OVERRIDES_INTERVAL_MS,
		    &v);
		ck_assert_int_eq(v.answer.decisions[0].limit, 5);
	}
	ck_assert_int_eq(log_end("overrides loaded: 1 (0 skipped)"), 1);
	for (i = 0; i < 2; i++)
		rlg_gate_fini(&more[i]);
	gate_off();
}
END_TEST

/*
 * A reload while the reader holds rows: the new config (its policies
 * renumbered) gets its own set before the gate decides with it, and the
 * old config is freed at once (ASan: nothing of it is read after).
 */
START_TEST(test_overrides_reload)
{
	struct rlg_verdict v;

	gate_on("[policy default]\nlimit = 2\nwindow = 60\n"
	    "[policy other]\nlimit = 9\nwindow = 60\n"
	    "[route r]\npath = /api/v1/resources\npolicies = default\n");
	gate_sql("INSERT INTO rlg_override(policy, client, spec) VALUES"
	    " ('default', '10.0.0.1', 'limit=5')");
	overrides_pass(&gate);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 5);
	gate_reload("[policy other]\nlimit = 9\nwindow = 60\n"
	    "[policy default]\nlimit = 3\nwindow = 60\n"
	    "[route r]\npath = /api/v1/resources\npolicies = default\n");
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_str_eq(v.answer.policies[0].name, "default");
	ck_assert_int_eq(v.answer.decisions[0].limit, 5);
	ask(&v, T1, GET, RES, A2, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 3);
	gate_off();
}
END_TEST

/* A reload of the gate to the same config but max_overrides = max, and
 * a pass of the reader. */
static void
reload_max(int max)
{
	char text[512];

	snprintf(text, sizeof text, "max_overrides = %d\n"
	    "[policy default]\nlimit = 2\nwindow = 60\n", max);
	gate_reload(text);
	overrides_pass(&gate);
}

/*
 * [store] max_overrides bounds the rows read, whatever the store holds:
 * of 3 rows 2 are read (the store's order: SQLite's primary key), the
 * third skipped, and one line says so at that change, not at each pass;
 * a reload's bound applies at once (0: none read).
 */
START_TEST(test_overrides_max)
{
	struct rlg_verdict v;

	gate_on("max_overrides = 2\n[policy default]\nlimit = 2\n"
	    "window = 60\n");
	ck_assert_int_eq(cfg->store.max_overrides, 2);
	gate_sql("INSERT INTO rlg_override(policy, client, spec) VALUES"
	    " ('default', '10.0.0.1', 'limit=5'),"
	    " ('default', '10.0.0.2', 'limit=6'),"
	    " ('default', '10.0.0.3', 'limit=7')");
	log_begin();
	overrides_pass(&gate);
	overrides_pass(&gate);
	ask(&v, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 5);
	ask(&v, T1, GET, RES, A2, NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 6);
	ask(&v, T1, GET, RES, "REMOTE_ADDR=10.0.0.3", NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 2);
	ck_assert_int_eq(log_end("overrides: more than max_overrides = 2 rows"
	    " in the store: the first 2 read, the others skipped"), 1);
	/* a reload's bound applies: all three, then none */
	reload_max(3);
	ask(&v, T1, GET, RES, "REMOTE_ADDR=10.0.0.3", NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 7);
	reload_max(0);
	ask(&v, T1, GET, RES, "REMOTE_ADDR=10.0.0.3", NULL);
	ck_assert_int_eq(v.answer.decisions[0].limit, 2);
	gate_off();
}
END_TEST

/*
 * One key=value pair of a logfmt line at *p: its key into key (cut to
 * size), the value skipped ("quoted" with \ escapes, or up to a space).
 * false at the end of the line.
 */
static bool
logfmt_pair(const char **p, char *key, size_t size)
{
	const char *s = *p;
	size_t n = 0;

	while (*s == ' ')
		s++;
	if (*s == '\0' || *s == '\n')
		return false;
	while (*s != '\0' && *s != '\n' && *s != ' ' && *s != '=') {
		if (n + 1 < size)
			key[n++] = *s;
		s++;
	}
	key[n] = '\0';
	if (*s == '=') {
		s++;
		if (*s == '"') {
			for (s++; *s != '\0' && *s != '"'; s++)
				if (*s == '\\' && s[1] != '\0')
					s++;
			if (*s == '"')
				s++;
		} else {
			while (*s != '\0' && *s != '\n' && *s != ' ')
				s++;
		}
	}
	*p = s;
	return true;
}

/* How many "event" keys a logfmt reader finds in a text line (after
 * its "TIME rlgate[PID]: " prefix). */
static int
logfmt_events(const char *line)
{
	const char *p = strstr(line, "]: ");
	char key[64];
	int n = 0;

	p = p != NULL ? p + 3 : line;
	while (logfmt_pair(&p, key, sizeof key))
		n += strcmp(key, "event") == 0;
	return n;
}

/* A JSON string at *p (quotes included) into out (cut to size). */
static bool
json_str(const char **p, char *out, size_t size)
{
	const char *s = *p;
	size_t n = 0;

	if (*s++ != '"')
		return false;
	for (; *s != '"'; s++) {
		if (*s == '\0' || (unsigned char)*s < 0x20)
			return false;
		if (*s == '\\') {
			s++;
			if (*s == 'u') {
				if (strspn(s + 1, "0123456789abcdefABCDEF") < 4)
					return false;
				s += 4;
			} else if (strchr("\"\\/bfnrt", *s) == NULL ||
			    *s == '\0') {
				return false;
			}
		}
		if (n + 1 < size)
			out[n++] = *s;
	}
	out[n] = '\0';
	*p = s + 1;
	return true;
}

/*
 * How many "event" members a line holds if it is one flat JSON object
 * (string or number members) and nothing else; -1 when it is not.
 */
static int
json_events(const char *line)
{
	const char *p = line;
	char key[64], val[1024];
	int n = 0;

	if (*p++ != '{')
		return -1;
	for (;;) {
		if (!json_str(&p, key, sizeof key) || *p++ != ':')
			return -1;
		if (*p == '"') {
			if (!json_str(&p, val, sizeof val))
				return -1;
		} else if (strspn(p, "0123456789") > 0) {
			p += strspn(p, "0123456789");
		} else {
			return -1;
		}
		n += strcmp(key, "event") == 0;
		if (*p == '}')
			break;
		if (*p++ != ',')
			return -1;
	}
	return strcmp(p, "}\n") == 0 ? n : -1;
}

/*
 * Hostile override rows (a client, a spec, a policy name that carry
 * quotes, spaces and event=... of their own; a newline; a bad spec; a
 * spec of 100,000 bytes, kept cut and refused as too long)
 * are logged so that a key=value reader finds one event per line, the
 * bad_override, and in the JSON format each line is one object with one
 * "event" member.
 */
START_TEST(test_override_log_tokens)
{
	const char *rows = "INSERT INTO rlg_override(policy, client, spec)"
	    " VALUES ('default', 'x\" event=admit client=6.6.6.6 z=\"',"
	    " 'limit=5'),"
	    " ('default', '10.0.0.5', 'banana'),"
	    " ('default', '10.0.0.6',"
	    " 'limit=5\" event=admit client=6.6.6.6 x=\"'),"
	    " ('x event=admit y', '10.0.0.7', 'limit=5'),"
	    " ('default', 'bad' || char(10) || 'event=admit', 'limit=5'),"
	    " ('default', '10.0.0.8', 'limit=1 window=' || char(34) ||"
	    " ' event=admit'),"
	    " ('default', '10.0.0.9', 'limit=5' || printf('%100000s', '')"
	    " || ' event=admit')";
	struct rlg_verdict v;
	char line[4096];
	int json, bad, n;
	FILE *f;

	for (json = 0; json < 2; json++) {
		gate_on("[policy default]\nlimit = 2\nwindow = 60\n");
		gate_sql("DELETE FROM rlg_override");
		gate_sql(rows);
		rlg_log_set_json(json);
		log_begin();
		overrides_pass(&gate);
		ask(&v, T1 + RLG_OVERRIDES_INTERVAL_MS, GET, RES, A1,
		    NULL);
		rlg_log_set_json(0);
		ck_assert_int_eq(log_end(""), 8);
		/* the long spec cut in the line too, "..." after it */
		ck_assert_int_eq(log_end(json ? "\"client\":\"10.0.0.9\","
		    "\"spec\":\"limit=5%20%20" : "client=10.0.0.9 "
		    "spec=limit=5%20%20"), 1);
		ck_assert_int_eq(log_end(json ? "%20...\",\"reason\":"
		    "\"too_long\",\"detail\":\"a%20field%20longer%20than%20128"
		    "%20bytes\"}" : "%20... reason=too_long detail=a%20field"
		    "%20longer%20than%20128%20bytes\n"), 1);
		f = fopen(path_in("log.txt"), "r");
		ck_assert_ptr_nonnull(f);
		bad = 0;
		while (fgets(line, sizeof line, f) != NULL) {
			n = json ? json_events(line) : logfmt_events(line);
			if (strstr(line, "bad_override") != NULL) {
				bad++;
				ck_assert_msg(n == 1, "%d events: %s", n, line);
			} else {
				ck_assert_msg(n == 0, "%d events: %s", n, line);
			}
		}
		fclose(f);
		ck_assert_int_eq(bad, 7);
		gate_off();
	}
}
END_TEST

/*
 * A guarding front that asks about a path no policy covers (a route with
 * policies = none; no route and no [policy default]) gets a yes, and the
 * process logs "event=unguarded" once, then at most once a minute with
 * how many it did not log; a responder's request, or a covered one, is
 * not such a request.
 */
START_TEST(test_unguarded)
{
	struct rlg_verdict v;

	gate_on("[policy api]\nlimit = 5\nwindow = 60\n"
	    "[route free]\npath = /free/*\npolicies = none\n"
	    "[route api]\npath = /api/*\npolicies = api\n");
	log_begin();
	ask(&v, T1, "FCGI_ROLE=AUTHORIZER", GET, "REQUEST_URI=/free/a%20b",
	    A1, NULL);
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ck_assert_uint_eq(v.answer.n, 0);
	ask(&v, T1 + 1000, "RLGATE_ROLE=auth_request", GET,
	    "REQUEST_URI=/elsewhere", A1, NULL);        /* no route, no default */
	ck_assert_int_eq(v.answer.outcome, RLG_OUT_AUTHORIZED);
	ask(&v, T1 + 2000, "RLGATE_ROLE=forward_auth", GET,
	    "REQUEST_URI=/free/c", A2, NULL);
	ask(&v, T1 + 2000, "RLGATE_ROLE=forward_auth", GET,
	    "REQUEST_URI=/api/x", A2, NULL);            /* covered */
	ck_assert_uint_eq(v.answer.n, 1);
	ask(&v, T1 + 2000, GET, "REQUEST_URI=/free/d", A2, NULL);  /* responder */
	ask(&v, T1 + 60000, "FCGI_ROLE=AUTHORIZER", GET, "REQUEST_URI=/free/e",
	    A1, NULL);
	ck_assert_int_eq(log_end("event=unguarded"), 2);
	ck_assert_int_eq(rlg_test_log_end("event=unguarded role=authorizer "
	    "path=/free/a%20b route=free suppressed=0"), 1);
	ck_assert_int_eq(rlg_test_log_end("event=unguarded role=authorizer "
	    "path=/free/e route=free suppressed=2"), 1);
	gate_off();
}
END_TEST

/*
 * The pacer of the log lines (pacer.h): a line at once, then none until
 * the interval has passed, and that one says how many were held back; a
 * restart (a line written outside it) starts an interval afresh.
 */
START_TEST(test_pacer)
{
	struct rlg_pacer p = { 0, 0 };

	ck_assert_int_eq(rlg_pacer_take(&p, T1, 1000), 0);
	ck_assert_int_eq(rlg_pacer_take(&p, T1 + 1, 1000), -1);
	ck_assert_int_eq(rlg_pacer_take(&p, T1 + 999, 1000), -1);
	ck_assert_int_eq(rlg_pacer_take(&p, T1 + 1000, 1000), 2);
	ck_assert_int_eq(rlg_pacer_take(&p, T1 + 1500, 1000), -1);
	rlg_pacer_restart(&p, T1 + 1600, 1000);
	ck_assert_int_eq(rlg_pacer_take(&p, T1 + 2599, 1000), -1);
	ck_assert_int_eq(rlg_pacer_take(&p, T1 + 2600, 1000), 1);
}
END_TEST

/* A bounded writer into a test's buffer. */
struct text {
	char buf[4096];
	size_t used;
};

static int
text_put(void *ctx, const char *buf, size_t len)
{
	struct text *t = ctx;

	if (len >= sizeof t->buf - t->used)
		return -1;
	memcpy(t->buf + t->used, buf, len);
	t->used += len;
	t->buf[t->used] = '\0';
	return 0;
}

/*
 * Answers the NULL-terminated parameters at now through the fronts'
 * dispatch, as the FastCGI front does: the answer's text into *t, how
 * long to hold it into *hold (hold NULL: the front cannot hold one).
 */
static void
answer(struct text *t, int64_t *hold, int64_t now, ...)
{
	struct rlg_params in;
	struct rlg_out out = { rlg_front_cgi_render, text_put, t, hold };
	char *envp[16];
	va_list ap;

	va_start(ap, now);
	params_v(&in, envp, ap);
	va_end(ap);
	t->used = 0;
	t->buf[0] = '\0';
	if (hold != NULL)
		*hold = -1;
	ck_assert_int_eq(rlg_front_serve(&gate, &in, now, &out), 0);
}

/*
 * Smoothing (delay): 5 a second, burst 4, delay 0. Each admitted request
 * after the first waits its turn (200 ms more each), whatever the role;
 * its answer says so (X-Rlgate-Delay) and its headers read as at its
 * end. A front that cannot hold (its park full) gets only what passes at
 * once: the rest refused, charged nothing. Past the burst: refused.
 */
START_TEST(test_delay_hold)
{
	struct text t;
	int64_t hold;

	gate_on("[headers]\nstyle = draft03\n[policy s]\nalgorithm = "
	    "token_bucket\nlimit = 5\nwindow = 1\nburst = 4\ndelay = 0\n");
	log_begin();
	answer(&t, &hold, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(hold, 0);
	ck_assert_ptr_null(strstr(t.buf, "X-Rlgate-Delay"));
	answer(&t, &hold, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(hold, 200);
	ck_assert_ptr_nonnull(strstr(t.buf, "Status: 200"));
	ck_assert_ptr_nonnull(strstr(t.buf, "X-Rlgate-Delay: 0.200\r\n"));
	/* reset (tat 400 ms ahead) as at the answer, 200 ms later */
	ck_assert_ptr_nonnull(strstr(t.buf, "RateLimit-Reset: 1\r\n"));
	/* the Authorizer's yes waits alike */
	answer(&t, &hold, T1, "FCGI_ROLE=AUTHORIZER", GET, RES, A1, NULL);
	ck_assert_int_eq(hold, 400);
	ck_assert_ptr_nonnull(strstr(t.buf, "X-Rlgate-Delay: 0.400\r\n"));
	/* the park full: what would wait is refused, charged nothing */
	answer(&t, NULL, T1, GET, RES, A1, NULL);
	ck_assert_ptr_nonnull(strstr(t.buf, "Status: 429"));
	ck_assert_ptr_null(strstr(t.buf, "X-Rlgate-Delay"));
	answer(&t, &hold, T1, GET, RES, A1, NULL);
	ck_assert_int_eq(hold, 600);
	/* the burst (4) is spent: refused, not held */
	answer(&t, &hold, T1, GET, RES, A1, NULL);
	ck_assert_ptr_nonnull(strstr(t.buf, "Status: 429"));
	ck_assert_int_eq(hold, 0);
	/* another client starts at once */
	answer(&t, &hold, T1, GET, RES, A2, NULL);
	ck_assert_int_eq(hold, 0);
	ck_assert_ptr_nonnull(strstr(t.buf, "Status: 200"));
	/* style = none: held, but no header says so */
	gate_off();
	gate_on("[headers]\nstyle = none\n[policy s]\nalgorithm = "
	    "token_bucket\nlimit = 5\nwindow = 1\nburst = 4\ndelay = 2\n");
	answer(&t, &hold, T1, GET, RES, "REMOTE_ADDR=10.0.0.3", NULL);
	answer(&t, &hold, T1, GET, RES, "REMOTE_ADDR=10.0.0.3", NULL);
	ck_assert_int_eq(hold, 0);
	answer(&t, &hold, T1, GET, RES, "REMOTE_ADDR=10.0.0.3", NULL);
	ck_assert_int_eq(hold, 200);
	ck_assert_ptr_null(strstr(t.buf, "X-Rlgate-Delay"));
	gate_off();
	ck_assert_int_eq(log_end("event=admit"), 0);
}
END_TEST

Suite *
rlg_gate_suite(void)
{
	Suite *s = suite_create("gate");
	TCase *tc = store_tcase(s, "core", base_setup, base_teardown, 0);

	tcase_add_test(tc, test_responder);
	tcase_add_test(tc, test_authorizer);
	tcase_add_test(tc, test_front_roles);
	tcase_add_test(tc, test_routes);
	tcase_add_test(tc, test_route_spellings);
	tcase_add_loop_test(tc, test_route_cost, 0, 2);
	tcase_add_loop_test(tc, test_tiers, 0, 4);
	tcase_add_test(tc, test_tiers_reload);
	tcase_add_test(tc, test_overrides);
	tcase_add_test(tc, test_overrides_once);
	tcase_add_test(tc, test_overrides_reload);
	tcase_add_test(tc, test_overrides_max);
	tcase_add_test(tc, test_override_log_tokens);
	tcase_add_test(tc, test_route_cost_header);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_dry_run_hidden);
	tcase_add_test(tc, test_reject_line_request);
	tcase_add_test(tc, test_log_json);
	tcase_add_test(tc, test_new_keys);
	tcase_add_test(tc, test_on_error);
	tcase_add_test(tc, test_cached_repeats);
	tcase_add_test(tc, test_table_repeats);
	tcase_add_test(tc, test_repeat_not_formatted);
	tcase_add_test(tc, test_repeats_reload);
	tcase_add_test(tc, test_unguarded);
	tcase_add_test(tc, test_pacer);
	tcase_add_test(tc, test_delay_hold);
	return s;
}
