/*
 * check_request.c: parameters -> request: path decoding and the query
 * string, methods and roles, the client address from REMOTE_ADDR or, behind
 * a trusted proxy, from Forwarded / X-Forwarded-For, and the policy keys
 * (IP, hashed header, both), with the hostile cases (missing, malformed,
 * oversized, spoofed) that must never crash a worker or let a client pick
 * its own key.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jwt.h>
#include <sodium.h>

#include "check_rlgate.h"
#include "fixture.h"
#include "front_cgi.h"
#include "path.h"
#include "request.h"
#include "util.h"

/* Reads the request whose parameters are envp, as the CGI fronts do. */
static void
read_envp(struct rlg_request *r, char *const *envp,
    const struct rlg_client_config *c)
{
	struct rlg_params in;

	rlg_params_envp(&in, envp);
	rlg_request_read(r, &in, c);
}

static void
parse(struct rlg_request *r, const char *method, const char *uri,
    const char *addr)
{
	char m[64], u[RLG_PATH_MAX + 64], a[300];
	char *envp[5];
	int n = 0;

	if (method != NULL) {
		snprintf(m, sizeof m, "REQUEST_METHOD=%s", method);
		envp[n++] = m;
	}
	if (uri != NULL) {
		snprintf(u, sizeof u, "REQUEST_URI=%s", uri);
		envp[n++] = u;
	}
	if (addr != NULL) {
		snprintf(a, sizeof a, "REMOTE_ADDR=%s", addr);
		envp[n++] = a;
	}
	envp[n] = NULL;
	read_envp(r, envp, NULL);
}

START_TEST(test_basic_get)
{
	struct rlg_request r;

	parse(&r, "GET", "/api/v1/resources?page=2&x=%00", "192.0.2.7");
	ck_assert_int_eq(r.method, RLG_METHOD_GET);
	ck_assert(r.path_ok);
	ck_assert_str_eq(r.path, "/api/v1/resources");
	ck_assert_str_eq(r.client, "192.0.2.7");
	parse(&r, "HEAD", "/api/v1/resources#frag", "192.0.2.7");
	ck_assert_int_eq(r.method, RLG_METHOD_HEAD);
	ck_assert_str_eq(r.path, "/api/v1/resources");
	parse(&r, "POST", "/api/v1/%72esources", "::1");
	ck_assert_int_eq(r.method, RLG_METHOD_OTHER);
	ck_assert_str_eq(r.method_name, "POST");
	ck_assert_str_eq(r.path, "/api/v1/resources");
}
END_TEST

START_TEST(test_param_lookup)
{
	char *envp[] = { "REMOTE_ADDRX=1", "REMOTE_ADDR=10.0.0.1",
	    "EMPTY=", NULL };

	ck_assert_str_eq(rlg_envp_param(envp, "REMOTE_ADDR"), "10.0.0.1");
	ck_assert_str_eq(rlg_envp_param(envp, "EMPTY"), "");
	ck_assert_ptr_null(rlg_envp_param(envp, "REMOTE"));
	ck_assert_ptr_null(rlg_envp_param(NULL, "REMOTE_ADDR"));
}
END_TEST

START_TEST(test_script_name_fallback)
{
	char *envp[] = { "REQUEST_METHOD=GET", "SCRIPT_NAME=/api",
	    "PATH_INFO=/v1/resources", "REMOTE_ADDR=10.0.0.1", NULL };
	char *none[] = { "REQUEST_METHOD=GET", NULL };
	struct rlg_request r;

	read_envp(&r, envp, NULL);
	ck_assert(r.path_ok);
	ck_assert_str_eq(r.path, "/api/v1/resources");
	read_envp(&r, none, NULL);
	ck_assert(!r.path_ok);
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
}
END_TEST

START_TEST(test_bad_paths)
{
	struct rlg_request r;
	char longuri[RLG_PATH_MAX + 10];

	parse(&r, "GET", "/api/%zz", "10.0.0.1");
	ck_assert(!r.path_ok);
	ck_assert_int_eq(r.flaw, RLG_FLAW_PATH);
	ck_assert_str_eq(r.path, "");
	/* an encoded '/': a separator to some servers, a name to others */
	parse(&r, "GET", "/static/public%2F..%2Fsecret.txt", "10.0.0.1");
	ck_assert(!r.path_ok);
	parse(&r, "GET", "/a%2fb", "10.0.0.1");
	ck_assert(!r.path_ok);
	parse(&r, "OPTIONS", "*", "10.0.0.1");
	ck_assert(!r.path_ok);
	parse(&r, "GET", "host/x", "10.0.0.1");
	ck_assert(!r.path_ok);
	parse(&r, "GET", "/api/%00x", "10.0.0.1");
	ck_assert(!r.path_ok);
	parse(&r, "GET", "/api/%4", "10.0.0.1");
	ck_assert(!r.path_ok);
	parse(&r, "GET", "api/v1/resources", "10.0.0.1");
	ck_assert(!r.path_ok);
	memset(longuri, 'a', sizeof longuri - 1);
	longuri[0] = '/';
	longuri[sizeof longuri - 1] = '\0';
	parse(&r, "GET", longuri, "10.0.0.1");
	ck_assert(!r.path_ok);
	ck_assert_int_eq(r.flaw, RLG_FLAW_PATH);
	/* the longest that fits */
	longuri[RLG_PATH_MAX] = '\0';
	parse(&r, "GET", longuri, "10.0.0.1");
	ck_assert(r.path_ok);
	ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);
	/* Non-UTF-8 and CR/LF bytes decode, and simply do not match. */
	parse(&r, "GET", "/api/%ff%0d%0a", "10.0.0.1");
	ck_assert(r.path_ok);
	ck_assert_str_eq(r.path, "/api/\xff\r\n");
}
END_TEST

/*
 * The path the server serves: lighttpd and Apache decode once, then
 * remove dot segments and merge slashes before they map the URL, so a
 * route must match that path, not the raw one.
 */
START_TEST(test_normalised_paths)
{
	static const struct { const char *uri, *path; } cases[] = {
		{ "/static/public/../secret.txt", "/static/secret.txt" },
		{ "/static/public/%2e%2e/secret.txt", "/static/secret.txt" },
		{ "/static/public/.%2E/.%2e/secret.txt", "/secret.txt" },
		{ "/x/../login", "/login" },
		{ "//login", "/login" },
		{ "/./login", "/login" },
		{ "/api//v1///resources", "/api/v1/resources" },
		{ "/a/b/..", "/a/" },
		{ "/a/b/../", "/a/" },
		{ "/a/.", "/a/" },
		{ "/a/./", "/a/" },
		{ "/..", "/" },
		{ "/../../etc/passwd", "/etc/passwd" },
		{ "/a/../../b", "/b" },
		{ "/", "/" },
		{ "/.", "/" },
		{ "/a/...", "/a/..." },
		{ "/a/..b/.c", "/a/..b/.c" },
		{ "/a/b/", "/a/b/" },
		{ "/a?x=/../b", "/a" },
		{ "/%41/%2E./%42", "/B" },
		{ "http://example.test/x/../login?q", "/login" },
		{ "HTTPS://example.test:8443//a", "/a" },
		{ "http://example.test", "/" },
		{ "http://example.test?x", "/" },
	};
	struct rlg_request r;
	char *fallback[] = { "REQUEST_METHOD=GET", "SCRIPT_NAME=/static",
	    "PATH_INFO=/public/../secret.txt", NULL };
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		parse(&r, "GET", cases[i].uri, "10.0.0.1");
		ck_assert_msg(r.path_ok, "%s", cases[i].uri);
		ck_assert_msg(strcmp(r.path, cases[i].path) == 0,
		    "%s -> %s (want %s)", cases[i].uri, r.path, cases[i].path);
	}
	read_envp(&r, fallback, NULL);
	ck_assert(r.path_ok);
	ck_assert_str_eq(r.path, "/static/secret.txt");
}
END_TEST

START_TEST(test_long_method)
{
	struct rlg_request r;

	parse(&r, "GETGETGETGETGET", "/", "10.0.0.1");
	ck_assert(r.method_ok);
	parse(&r, "GETGETGETGETGETX", "/", "10.0.0.1");
	ck_assert(!r.method_ok);
	ck_assert_str_eq(r.method_name, "GETGETGETGETGET");
}
END_TEST

START_TEST(test_decode_bounds)
{
	char out[8];

	ck_assert_int_eq(rlg_path_decode("/1234567", out, sizeof out),
	    RLG_ENOSPC);
	ck_assert_int_eq(rlg_path_decode("/123456", out, sizeof out),
	    RLG_OK);
	ck_assert_str_eq(out, "/123456");
	ck_assert_int_eq(rlg_path_decode("/%41%42?q", out, sizeof out),
	    RLG_OK);
	ck_assert_str_eq(out, "/AB");
	ck_assert_int_eq(rlg_path_decode("/", out, 0), RLG_ENOSPC);
}
END_TEST

START_TEST(test_client_keys)
{
	struct rlg_request r;

	parse(&r, "GET", "/", "2001:DB8:0:0:0:0:0:1");
	ck_assert_str_eq(r.client, "2001:db8::/64");   /* default /64 */
	ck_assert(r.addr_ok);
	ck_assert(!r.via_proxy);
	parse(&r, "GET", "/", "127.0.0.2");
	ck_assert_str_eq(r.client, "127.0.0.2");
	parse(&r, "GET", "/", "");
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	parse(&r, "GET", "/", "999.1.1.1");
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	parse(&r, "GET", "/", "10.0.0.1\r\nX-Evil: 1");
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	parse(&r, "GET", "/", "fe80::1%eth0");
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	parse(&r, "GET", "/", NULL);
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	ck_assert(!r.addr_ok);
	/* an IPv4-mapped IPv6 address is its IPv4 address */
	parse(&r, "GET", "/", "::ffff:10.1.2.3");
	ck_assert_str_eq(r.client, "10.1.2.3");
}
END_TEST

START_TEST(test_missing_everything)
{
	char *envp[] = { NULL };
	struct rlg_request r;
	char method[300];

	read_envp(&r, envp, NULL);
	ck_assert_int_eq(r.method, RLG_METHOD_OTHER);
	ck_assert_str_eq(r.method_name, "");
	ck_assert(!r.path_ok);
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	read_envp(&r, NULL, NULL);
	ck_assert(!r.path_ok);
	memset(method, 'G', sizeof method - 1);
	method[sizeof method - 1] = '\0';
	parse(&r, method, "/", "10.0.0.1");
	ck_assert_int_eq(strlen(r.method_name), RLG_METHOD_MAX);
	ck_assert_int_eq(r.method, RLG_METHOD_OTHER);
}
END_TEST

/*
 * The proxies trusted below: 10.0.0.0/8, 2001:db8:ffff::/48 and ::1;
 * IPv6 clients grouped by /64; API keys hashed with "s3cret".
 */
static struct rlg_cidr trusted[3];
static struct rlg_client_config ccfg;
/* envp of the last who(): requests borrow it, so it outlives the call. */
static char *g_envp[16];

static const struct rlg_client_config *
cc(void)
{
	static const char *nets[] = { "10.0.0.0/8", "2001:db8:ffff::/48",
	    "::1" };
	size_t i;

	for (i = 0; i < 3; i++)
		ck_assert_int_eq(rlg_cidr_parse(nets[i], &trusted[i]), 0);
	ccfg.trusted_proxies = trusted;
	ccfg.ntrusted = 3;
	ccfg.ipv6_prefix = 64;
	ccfg.key_secret = "s3cret";
	return &ccfg;
}

/*
 * Parses the NULL-terminated "NAME=value" arguments; returns r->client.
 * With the shared config, a request that carries only Forwarded is read
 * as from proxies that set Forwarded (forwarded_header = forwarded); the
 * choice itself is tested in test_forwarded_header_choice.
 */
static const char *
who(struct rlg_request *r, const struct rlg_client_config *c, ...)
{
	struct rlg_client_config fwd;
	bool has_fwd = false, has_xff = false;
	va_list ap;
	size_t n, i;

	/* Room for REQUEST_URI after them. */
	va_start(ap, c);
	n = rlg_test_envv(g_envp, 15, ap);
	va_end(ap);
	for (i = 0; i < n; i++) {
		has_fwd = has_fwd ||
		    strncmp(g_envp[i], "HTTP_FORWARDED=", 15) == 0;
		has_xff = has_xff ||
		    strncmp(g_envp[i], "HTTP_X_FORWARDED_FOR=", 21) == 0;
	}
	/* A path, so that only the identity can be a flaw. */
	if (rlg_envp_param(g_envp, "REQUEST_URI") == NULL) {
		g_envp[n++] = "REQUEST_URI=/";
		g_envp[n] = NULL;
	}
	if (c == &ccfg && has_fwd && !has_xff) {
		fwd = ccfg;
		fwd.forwarded_header = RLG_FWD_FORWARDED;
		c = &fwd;
	}
	read_envp(r, g_envp, c);
	return r->client;
}

/*
 * Only the header the trusted proxies set is read: a proxy that sets
 * X-Forwarded-For and passes the client's own Forwarded through must not
 * let the client choose its key, and the other way round.
 */
START_TEST(test_forwarded_header_choice)
{
	struct rlg_client_config xff = *cc(), fwd = *cc();
	char *env1[] = { "REMOTE_ADDR=10.0.0.1",
	    "HTTP_FORWARDED=for=198.51.100.66",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5", NULL };
	char *env2[] = { "REMOTE_ADDR=10.0.0.1",
	    "HTTP_FORWARDED=for=198.51.100.66", NULL };
	struct rlg_request r;

	xff.forwarded_header = RLG_FWD_X_FORWARDED_FOR;
	fwd.forwarded_header = RLG_FWD_FORWARDED;
	read_envp(&r, env1, &xff);
	ck_assert_str_eq(r.client, "203.0.113.5");
	read_envp(&r, env2, &xff);
	ck_assert_str_eq(r.client, "10.0.0.1");     /* spoof ignored */
	ck_assert(!r.via_proxy);
	read_envp(&r, env1, &fwd);
	ck_assert_str_eq(r.client, "198.51.100.66");
	ck_assert(r.via_proxy);
}
END_TEST

#define PEER "REMOTE_ADDR=10.0.0.1"

START_TEST(test_roles)
{
	struct rlg_request r;

	who(&r, NULL, PEER, NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_RESPONDER);
	who(&r, NULL, "FCGI_ROLE=RESPONDER", NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_RESPONDER);
	who(&r, NULL, "FCGI_ROLE=AUTHORIZER", NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_AUTHORIZER);
	who(&r, NULL, "FCGI_ROLE=FILTER", NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_OTHER);
	who(&r, NULL, "FCGI_ROLE=authorizer", NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_OTHER);
	who(&r, NULL, "FCGI_ROLE=", NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_OTHER);
	ck_assert_ptr_eq(r.params.src, g_envp);
}
END_TEST

/*
 * RLGATE_ROLE, set by a front's configuration (a parameter: a client's
 * header would be HTTP_RLGATE_ROLE): nginx's auth_request and Caddy's
 * forward_auth. The FastCGI Authorizer role wins over it; any other value
 * is the front's mistake, refused (never a responder's request).
 */
START_TEST(test_front_roles)
{
	struct rlg_request r;

	who(&r, NULL, PEER, "RLGATE_ROLE=auth_request", NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_AUTH_REQUEST);
	ck_assert(rlg_request_guards(&r));
	ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);
	who(&r, NULL, PEER, "FCGI_ROLE=RESPONDER", "RLGATE_ROLE=forward_auth",
	    NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_FORWARD_AUTH);
	ck_assert(rlg_request_guards(&r));
	who(&r, NULL, PEER, "FCGI_ROLE=AUTHORIZER", "RLGATE_ROLE=forward_auth",
	    NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_AUTHORIZER);
	who(&r, NULL, PEER, "HTTP_RLGATE_ROLE=auth_request", NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_RESPONDER);
	ck_assert(!rlg_request_guards(&r));
	who(&r, NULL, PEER, "RLGATE_ROLE=Auth_Request", NULL);
	ck_assert_int_eq(r.role, RLG_ROLE_OTHER);
	ck_assert_int_eq(r.flaw, RLG_FLAW_ROLE);
	ck_assert_str_eq(r.flaw_about, "RLGATE_ROLE");
	ck_assert_str_eq(rlg_flaw_name(r.flaw), "bad_role");
	who(&r, NULL, PEER, "RLGATE_ROLE=", NULL);
	ck_assert_int_eq(r.flaw, RLG_FLAW_ROLE);
}
END_TEST

/*
 * The original request in the front's roles: RLGATE_METHOD and RLGATE_URI
 * when the front sets them, else REQUEST_METHOD and REQUEST_URI (nginx's
 * $request_method and $request_uri are the original's); X-Forwarded-Method
 * and X-Forwarded-Uri only in forward_auth and only from a trusted peer.
 * Whether the answer is headers only is the request rlgate answers.
 */
START_TEST(test_described_request)
{
	char *caddy[] = { "REMOTE_ADDR=198.51.100.7", "RLGATE_ROLE=forward_auth",
	    "REQUEST_METHOD=GET", "REQUEST_URI=/api/search?q=1",
	    "RLGATE_METHOD=POST", "HTTP_X_FORWARDED_METHOD=DELETE",
	    "HTTP_X_FORWARDED_URI=/free", NULL };
	char *nginx[] = { "REMOTE_ADDR=198.51.100.7", "RLGATE_ROLE=auth_request",
	    "REQUEST_METHOD=HEAD", "REQUEST_URI=/api/a%62c/../x?q=1",
	    "HTTP_X_FORWARDED_METHOD=DELETE", "HTTP_X_FORWARDED_URI=/free",
	    NULL };
	char *traefik[] = { "REMOTE_ADDR=10.1.2.3", "RLGATE_ROLE=forward_auth",
	    "REQUEST_METHOD=GET", "REQUEST_URI=/auth",
	    "HTTP_X_FORWARDED_METHOD=PUT", "HTTP_X_FORWARDED_URI=/api/v1/x?y",
	    "HTTP_X_FORWARDED_FOR=203.0.113.9", NULL };
	char *forged[] = { "REMOTE_ADDR=198.51.100.7",
	    "RLGATE_ROLE=forward_auth", "REQUEST_METHOD=GET",
	    "REQUEST_URI=/api/x", "HTTP_X_FORWARDED_METHOD=PUT",
	    "HTTP_X_FORWARDED_URI=/free", NULL };
	char *twice[] = { "REMOTE_ADDR=10.1.2.3", "RLGATE_ROLE=forward_auth",
	    "REQUEST_METHOD=GET", "REQUEST_URI=/auth",
	    "HTTP_X_FORWARDED_URI=/api/x", "HTTP_X_FORWARDED_URI=/free", NULL };
	char *twice_m[] = { "REMOTE_ADDR=10.1.2.3", "RLGATE_ROLE=forward_auth",
	    "REQUEST_METHOD=GET", "REQUEST_URI=/auth",
	    "HTTP_X_FORWARDED_METHOD=GET", "HTTP_X_FORWARDED_METHOD=POST",
	    "HTTP_X_FORWARDED_URI=/api/x", NULL };
	char *responder[] = { "REMOTE_ADDR=10.1.2.3", "REQUEST_METHOD=GET",
	    "REQUEST_URI=/api/x", "RLGATE_METHOD=POST", "RLGATE_URI=/free",
	    "HTTP_X_FORWARDED_URI=/free", NULL };
	struct rlg_request r;

	read_envp(&r, caddy, cc());
	ck_assert_str_eq(r.method_name, "POST");
	ck_assert_str_eq(r.path, "/api/search");
	ck_assert(!r.head);
	ck_assert_str_eq(r.client, "198.51.100.7");

	read_envp(&r, nginx, cc());
	ck_assert_str_eq(r.method_name, "HEAD");
	ck_assert_int_eq(r.method, RLG_METHOD_HEAD);
	ck_assert(r.head);
	ck_assert_str_eq(r.path, "/api/x");
	ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);

	read_envp(&r, traefik, cc());
	ck_assert_str_eq(r.method_name, "PUT");
	ck_assert_str_eq(r.path, "/api/v1/x");
	ck_assert_str_eq(r.client, "203.0.113.9");
	ck_assert(!r.head);

	/* The same headers from a client are not believed. */
	read_envp(&r, forged, cc());
	ck_assert_str_eq(r.method_name, "GET");
	ck_assert_str_eq(r.path, "/api/x");
	ck_assert_str_eq(r.client, "198.51.100.7");

	read_envp(&r, twice, cc());
	ck_assert_int_eq(r.flaw, RLG_FLAW_DUPLICATE);
	ck_assert_str_eq(r.flaw_about, "X-Forwarded-Uri");
	read_envp(&r, twice_m, cc());
	ck_assert_int_eq(r.flaw, RLG_FLAW_DUPLICATE);
	ck_assert_str_eq(r.flaw_about, "X-Forwarded-Method");

	/* A responder reads its own request only. */
	read_envp(&r, responder, cc());
	ck_assert_str_eq(r.method_name, "GET");
	ck_assert_str_eq(r.path, "/api/x");
}
END_TEST

/*
 * A source that counts its lookups: a lookup walks every parameter of the
 * request (an envp), so each name is looked up once per request (the
 * method was looked up twice: once for HEAD, once as the method).
 */
struct counted {
	char *const *envp;
	const char *names[16];
	int n[16];
	size_t used;
};

static void
count_name(struct counted *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->used; i++)
		if (strcmp(c->names[i], name) == 0)
			break;
	if (i == c->used) {
		ck_assert_uint_lt(c->used, 16);
		c->names[c->used++] = name;
	}
	c->n[i]++;
}

static const char *
counted_param(const void *src, const char *name)
{
	struct counted *c = (struct counted *)(uintptr_t)src;

	count_name(c, name);
	return rlg_envp_param(c->envp, name);
}

static int
counted_header(const void *src, const char *name, const char **value)
{
	struct counted *c = (struct counted *)(uintptr_t)src;

	count_name(c, name);
	return rlg_envp_header(c->envp, name, value);
}

START_TEST(test_params_once)
{
	char *plain[] = { "FCGI_ROLE=RESPONDER", "REMOTE_ADDR=10.1.2.3",
	    "REQUEST_METHOD=HEAD", "REQUEST_URI=/api/v1/resources?x=1", NULL };
	char *nginx[] = { "REMOTE_ADDR=10.1.2.3", "RLGATE_ROLE=auth_request",
	    "REQUEST_METHOD=GET", "REQUEST_URI=/api/x", NULL };
	char *const *envps[] = { plain, nginx };
	struct rlg_request r;
	struct rlg_params in;
	struct counted c;
	size_t k, i;

	for (k = 0; k < 2; k++) {
		memset(&c, 0, sizeof c);
		c.envp = envps[k];
		in.param = counted_param;
		in.header = counted_header;
		in.src = &c;
		rlg_request_read(&r, &in, cc());
		ck_assert_str_eq(r.method_name, k == 0 ? "HEAD" : "GET");
		ck_assert(r.head == (k == 0));
		ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);
		for (i = 0; i < c.used; i++)
			ck_assert_msg(c.n[i] == 1, "%s looked up %d times",
			    c.names[i], c.n[i]);
	}
}
END_TEST

START_TEST(test_xff_walk)
{
	const struct rlg_client_config *c = cc();
	struct rlg_request r;

	ck_assert_str_eq(who(&r, c, PEER,
	    "HTTP_X_FORWARDED_FOR=203.0.113.5", NULL), "203.0.113.5");
	ck_assert(r.via_proxy);
	ck_assert(r.addr_ok);
	/* right to left past two trusted hops; the spoofed left one ignored */
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "198.51.100.1, 203.0.113.5, 10.0.0.2, 10.1.1.1", NULL),
	    "203.0.113.5");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "1.1.1.1,203.0.113.5,10.0.0.2", NULL), "203.0.113.5");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "203.0.113.5\t,\t 10.0.0.2  ", NULL), "203.0.113.5");
	/* every hop trusted: the leftmost */
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "10.0.0.3, 10.0.0.2", NULL), "10.0.0.3");
	ck_assert(r.via_proxy);
	/* IPv6 peer and hops, mapped peer */
	ck_assert_str_eq(who(&r, c, "REMOTE_ADDR=::1", "HTTP_X_FORWARDED_FOR="
	    "2001:db8:1:2::7, 2001:db8:ffff::9", NULL), "2001:db8:1:2::/64");
	ck_assert_str_eq(who(&r, c, "REMOTE_ADDR=::ffff:10.0.0.1",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5", NULL), "203.0.113.5");
	ck_assert_str_eq(who(&r, c, PEER,
	    "HTTP_X_FORWARDED_FOR=::ffff:192.0.2.1", NULL), "192.0.2.1");
	/* no header: the peer */
	ck_assert_str_eq(who(&r, c, PEER, NULL), "10.0.0.1");
	ck_assert(!r.via_proxy);
}
END_TEST

START_TEST(test_forwarded_walk)
{
	const struct rlg_client_config *c = cc();
	struct rlg_request r;

	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=192.0.2.60;proto=http;by=203.0.113.43", NULL), "192.0.2.60");
	ck_assert(r.via_proxy);
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "For=\"[2001:db8:cafe::17]:4711\"", NULL), "2001:db8:cafe::/64");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=\"[2001:db8:cafe::17]\"", NULL), "2001:db8:cafe::/64");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=192.0.2.43, for=198.51.100.17;by=10.0.0.9, for=10.0.0.5,"
	    "for=\"[2001:db8:ffff::1]:80\"", NULL), "198.51.100.17");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "FOR=192.0.2.1", NULL), "192.0.2.1");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=\"192.0.2.1:80\"", NULL), "192.0.2.1");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=\"192.0.2.1:_port-1\"", NULL), "192.0.2.1");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=\"192.0.2.\\1\"", NULL), "192.0.2.1");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "proto=https ; for=192.0.2.1 ;by=_a", NULL), "192.0.2.1");
	/* empty elements are skipped */
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=192.0.2.1, ,for=10.0.0.5", NULL), "192.0.2.1");
	/* all trusted: the leftmost */
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=\"[2001:db8:ffff::1]\", for=10.0.0.5", NULL),
	    "2001:db8:ffff::/64");
	/* An element without for= hides the client: unknown, not the peer. */
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED=proto=https", NULL),
	    RLG_CLIENT_UNKNOWN);
	ck_assert(!r.addr_ok);
	ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);
	/* An empty one names nobody: the peer. */
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED=", NULL),
	    "10.0.0.1");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED= , ,", NULL),
	    "10.0.0.1");
	ck_assert(r.addr_ok);
	ck_assert(!r.via_proxy);
}
END_TEST

START_TEST(test_untrusted_peer)
{
	const struct rlg_client_config *c = cc();
	struct rlg_client_config none = { 0 };
	struct rlg_request r;

	/* a client talking to us directly cannot pick its key */
	ck_assert_str_eq(who(&r, c, "REMOTE_ADDR=203.0.113.9",
	    "HTTP_X_FORWARDED_FOR=10.0.0.7", NULL), "203.0.113.9");
	ck_assert(!r.via_proxy);
	ck_assert_str_eq(who(&r, c, "REMOTE_ADDR=203.0.113.9",
	    "HTTP_FORWARDED=for=198.51.100.1",
	    "HTTP_X_FORWARDED_FOR=198.51.100.1", NULL), "203.0.113.9");
	ck_assert_str_eq(who(&r, c, "REMOTE_ADDR=2001:db8:1::1",
	    "HTTP_X_FORWARDED_FOR=198.51.100.1", NULL), "2001:db8:1::/64");
	/* no config, or no trusted proxies: the headers are never read */
	ck_assert_str_eq(who(&r, NULL, PEER,
	    "HTTP_X_FORWARDED_FOR=198.51.100.1", NULL), "10.0.0.1");
	none.ipv6_prefix = 64;
	ck_assert_str_eq(who(&r, &none, PEER,
	    "HTTP_FORWARDED=for=198.51.100.1", NULL), "10.0.0.1");
	ck_assert(!r.via_proxy);
	/* no usable peer: unknown, headers or not */
	ck_assert_str_eq(who(&r, c, "REMOTE_ADDR=bogus",
	    "HTTP_X_FORWARDED_FOR=198.51.100.1", NULL), RLG_CLIENT_UNKNOWN);
	ck_assert(!r.addr_ok);
	ck_assert(!r.via_proxy);
}
END_TEST

/*
 * A hop the walk needs and cannot read refuses the request (a flaw), and
 * never makes the client the peer: the proxy's key is shared by every
 * client behind it, and may be exempt. Its key stays the peer's, for the
 * log only, and no exemption applies (addr_ok is false).
 */
static void
assert_flaw(struct rlg_request *r, const struct rlg_client_config *c,
    const char *h, enum rlg_flaw flaw)
{
	who(r, c, PEER, h, NULL);
	ck_assert_msg(r->flaw == flaw, "%.60s -> flaw %d", h, (int)r->flaw);
	ck_assert_msg(!r->addr_ok, "%.60s: addr_ok", h);
	ck_assert_str_eq(r->client, "10.0.0.1");
}

START_TEST(test_malformed_hops)
{
	static const char *refused[] = {
	    "HTTP_X_FORWARDED_FOR=203.0.113.5, garbage",
	    "HTTP_X_FORWARDED_FOR= , ",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5,",
	    "HTTP_X_FORWARDED_FOR=fe80::1%eth0",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5 198.51.100.1",
	    "HTTP_X_FORWARDED_FOR=_hidden",
	    "HTTP_X_FORWARDED_FOR=192.0.2.1:_port",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5, garbage, 10.0.0.2",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5,,10.0.0.2",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5\r\n, 10.0.0.2",
	    "HTTP_FORWARDED=for=192.0.2.1:80",           /* needs quotes */
	    "HTTP_FORWARDED=for=2001:db8::1",
	    "HTTP_FORWARDED=for=\"2001:db8::1\"",        /* needs brackets */
	    "HTTP_FORWARDED=for=\"[192.0.2.1]\"",
	    "HTTP_FORWARDED=for=\"[2001:db8::1\"",
	    "HTTP_FORWARDED=for=\"[2001:db8::1]x\"",
	    "HTTP_FORWARDED=for=\"[2001:db8::1]:\"",
	    "HTTP_FORWARDED=for=\"[2001:db8::1]:123456\"",
	    "HTTP_FORWARDED=for=\"192.0.2.1:_\"",
	    "HTTP_FORWARDED=for=\"192.0.2.1:8_0\"",
	    "HTTP_FORWARDED=for=\"999.0.2.1\"",
	    "HTTP_FORWARDED=for=192.0.2.1;for=192.0.2.2",
	    "HTTP_FORWARDED=for=\"192.0.2.1",
	    /* the client's open quote swallows the element its proxy added */
	    "HTTP_FORWARDED=for=\"x, for=203.0.113.5",
	    "HTTP_FORWARDED=for=\"x, for=\"[2001:db8::1]\"",
	    "HTTP_FORWARDED=for=",
	    "HTTP_FORWARDED=for=192.0.2.1 x",
	    "HTTP_FORWARDED==192.0.2.1;for=192.0.2.1",
	    "HTTP_FORWARDED=for=\"192.0.2.1\r\n\"",
	    "HTTP_FORWARDED=for=192.0.2.1\r\n",
	    "HTTP_FORWARDED=for=198.51.100.1, x, for=10.0.0.5",
	};
	static const char *hidden[] = {
	    "HTTP_X_FORWARDED_FOR=unknown",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5, UNKNOWN, 10.0.0.2",
	    "HTTP_FORWARDED=for=unknown",
	    "HTTP_FORWARDED=for=_hidden",
	    "HTTP_FORWARDED=for=\"_hidden:_port\"",
	    "HTTP_FORWARDED=for=\"unknown:80\"",
	    "HTTP_FORWARDED=for=192.0.2.1;proto=http, by=10.0.0.5",
	    "HTTP_FORWARDED=for=192.0.2.9, for=_hidden, for=10.0.0.5",
	    "HTTP_FORWARDED=for=192.0.2.9, for=unknown;proto=http, "
	    "for=\"[::1]\"",
	    "HTTP_FORWARDED=for=192.0.2.9, by=10.0.0.7, for=10.0.0.5",
	};
	const struct rlg_client_config *c = cc();
	struct rlg_request r;
	size_t i;

	for (i = 0; i < sizeof refused / sizeof refused[0]; i++)
		assert_flaw(&r, c, refused[i], RLG_FLAW_FORWARDED);
	/* hidden by a trusted proxy: the shared unknown key, never exempt */
	for (i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
		ck_assert_msg(strcmp(who(&r, c, PEER, hidden[i], NULL),
		    RLG_CLIENT_UNKNOWN) == 0, "%s -> %s", hidden[i], r.client);
		ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);
		ck_assert(!r.addr_ok);
		ck_assert(r.via_proxy);
	}
	/* what proxies add in X-Forwarded-For besides a bare address */
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "203.0.113.5, 10.0.0.2:8080", NULL), "203.0.113.5");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "203.0.113.5:1234", NULL), "203.0.113.5");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "[2001:db8::1]:443", NULL), "2001:db8::/64");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "[2001:db8::1]", NULL), "2001:db8::/64");
	/* a broken element left of the client does not matter */
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_FORWARDED="
	    "for=\"oops, for=192.0.2.9\" x, for=198.51.100.3, for=10.0.0.5",
	    NULL), "198.51.100.3");
	ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "garbage, 198.51.100.3", NULL), "198.51.100.3");
	ck_assert_str_eq(who(&r, c, PEER, "HTTP_X_FORWARDED_FOR="
	    "unknown, 198.51.100.3", NULL), "198.51.100.3");
	ck_assert(r.addr_ok);
}
END_TEST

/*
 * lighttpd names X-Forwarded-For and X_Forwarded_For alike: the proxy's
 * header and the client's look-alike arrive as two parameters of one
 * name. Neither is believed, whichever comes first; from an untrusted
 * peer they are not read at all.
 */
START_TEST(test_duplicate_headers)
{
	const struct rlg_client_config *c = cc();
	struct rlg_request r;
	const char *v;
	char *two[] = { "HTTP_X_API_KEY=a", "HTTP_X_API_KEYS=b",
	    "HTTP_X_API_KEY=c", NULL };
	char *one[] = { "HTTP_X_API_KEYS=b", "HTTP_X_API_KEY=c", NULL };

	ck_assert_int_eq(rlg_envp_header(two, "HTTP_X_API_KEY", &v), 2);
	ck_assert_ptr_null(v);
	ck_assert_int_eq(rlg_envp_header(one, "HTTP_X_API_KEY", &v), 1);
	ck_assert_str_eq(v, "c");
	ck_assert_int_eq(rlg_envp_header(one, "HTTP_X_API", &v), 0);
	ck_assert_ptr_null(v);
	ck_assert_int_eq(rlg_envp_header(NULL, "HTTP_X_API_KEY", &v), 0);

	who(&r, c, PEER, "HTTP_X_FORWARDED_FOR=198.51.100.7",
	    "HTTP_X_FORWARDED_FOR=203.0.113.5", NULL);
	ck_assert_int_eq(r.flaw, RLG_FLAW_DUPLICATE);
	ck_assert(!r.addr_ok);
	ck_assert_str_eq(r.client, "10.0.0.1");
	who(&r, c, PEER, "HTTP_X_FORWARDED_FOR=203.0.113.5",
	    "HTTP_X_FORWARDED_FOR=198.51.100.7", NULL);
	ck_assert_int_eq(r.flaw, RLG_FLAW_DUPLICATE);
	who(&r, c, PEER, "HTTP_FORWARDED=for=198.51.100.7",
	    "HTTP_FORWARDED=for=203.0.113.5", NULL);
	ck_assert_int_eq(r.flaw, RLG_FLAW_DUPLICATE);
	/* the header the proxies do not set is never read: no flaw */
	who(&r, c, PEER, "HTTP_X_FORWARDED_FOR=203.0.113.5",
	    "HTTP_FORWARDED=for=1.1.1.1", "HTTP_FORWARDED=for=2.2.2.2", NULL);
	ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);
	ck_assert_str_eq(r.client, "203.0.113.5");
	/* an untrusted peer: neither is read */
	who(&r, c, "REMOTE_ADDR=203.0.113.9",
	    "HTTP_X_FORWARDED_FOR=198.51.100.7",
	    "HTTP_X_FORWARDED_FOR=10.0.0.7", NULL);
	ck_assert_int_eq(r.flaw, RLG_FLAW_NONE);
	ck_assert_str_eq(r.client, "203.0.113.9");
	ck_assert(r.addr_ok);
}
END_TEST

START_TEST(test_oversized_headers)
{
	const struct rlg_client_config *c = cc();
	struct rlg_request r;
	char *h = malloc(12 * 1024);
	size_t n;
	int i;

	ck_assert_ptr_nonnull(h);
	/* 100 hops, the 64 rightmost all trusted: unreadable, refused */
	n = (size_t)sprintf(h, "HTTP_X_FORWARDED_FOR=198.51.100.1");
	for (i = 1; i < 100; i++)
		n += (size_t)sprintf(h + n, ", 10.0.0.%d", i);
	assert_flaw(&r, c, h, RLG_FLAW_FORWARDED);
	/* 64 hops all trusted: the leftmost */
	n = (size_t)sprintf(h, "HTTP_X_FORWARDED_FOR=10.0.0.200");
	for (i = 1; i < 64; i++)
		n += (size_t)sprintf(h + n, ", 10.0.0.%d", i);
	ck_assert_str_eq(who(&r, c, PEER, h, NULL), "10.0.0.200");
	/* the client right of many hops is still found */
	n = (size_t)sprintf(h, "HTTP_X_FORWARDED_FOR=");
	for (i = 0; i < 100; i++)
		n += (size_t)sprintf(h + n, "198.51.100.%d, ", i);
	sprintf(h + n, "203.0.113.5, 10.0.0.2");
	ck_assert_str_eq(who(&r, c, PEER, h, NULL), "203.0.113.5");
	n = (size_t)sprintf(h, "HTTP_FORWARDED=");
	for (i = 0; i < 100; i++)
		n += (size_t)sprintf(h + n, "for=198.51.100.%d, ", i);
	sprintf(h + n, "for=203.0.113.5, for=10.0.0.2");
	ck_assert_str_eq(who(&r, c, PEER, h, NULL), "203.0.113.5");
	/* over 8 KiB: the hops we need could be anywhere; refused */
	n = (size_t)sprintf(h, "HTTP_X_FORWARDED_FOR=");
	while (n < 10 * 1024)
		n += (size_t)sprintf(h + n, "10.0.0.7, ");
	sprintf(h + n, "203.0.113.5, 10.0.0.2");
	assert_flaw(&r, c, h, RLG_FLAW_FORWARDED);
	memcpy(h, "HTTP_FORWARDED=for=1", 20);
	memset(h + 20, ' ', 10 * 1024);
	sprintf(h + 20 + 10 * 1024, ", for=203.0.113.5");
	assert_flaw(&r, c, h, RLG_FLAW_FORWARDED);
	/* a long single hop */
	n = (size_t)sprintf(h, "HTTP_FORWARDED=for=\"");
	memset(h + n, '1', 200);
	sprintf(h + n + 200, "\"");
	assert_flaw(&r, c, h, RLG_FLAW_FORWARDED);
	free(h);
}
END_TEST

/*
 * What a request costs: 1 without a route, a route's fixed cost, and with
 * cost = header:X-Cost (cost_max 10) the header of a trusted peer only
 * (PEER is in cc()'s trusted_proxies), in every role; anyone else, or a
 * trusted peer without it, costs 10; a trusted peer's value that is no
 * plain decimal integer from 1 to 10, or the header twice, is refused.
 */
START_TEST(test_request_cost)
{
	static const char *const bad[] = {
		"HTTP_X_COST=0", "HTTP_X_COST=11", "HTTP_X_COST=+2",
		"HTTP_X_COST=-2", "HTTP_X_COST= 2", "HTTP_X_COST=2 ",
		"HTTP_X_COST=1 0", "HTTP_X_COST=", "HTTP_X_COST=two",
		"HTTP_X_COST=2e0", "HTTP_X_COST=100000000000000000000",
	};
	struct rlg_route fixed = { .cost = 7 };
	struct rlg_route hdr = { .cost = 1, .cost_header = "x-Cost",
	    .cost_max = 10 };
	struct rlg_request r;
	int64_t cost;
	size_t i;

	who(&r, cc(), PEER, "HTTP_X_COST=3", NULL);
	ck_assert(r.trusted);
	ck_assert_int_eq(rlg_request_cost(&r, NULL, &cost), RLG_OK);
	ck_assert_int_eq(cost, 1);
	ck_assert_int_eq(rlg_request_cost(&r, &fixed, &cost), RLG_OK);
	ck_assert_int_eq(cost, 7);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_OK);
	ck_assert_int_eq(cost, 3);
	who(&r, cc(), PEER, "HTTP_X_COST=0010", NULL);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_OK);
	ck_assert_int_eq(cost, 10);
	/* Behind the proxy, in forward_auth: still the proxy's header. */
	who(&r, cc(), PEER, "RLGATE_ROLE=forward_auth",
	    "HTTP_X_FORWARDED_FOR=203.0.113.9", "HTTP_X_COST=2", NULL);
	ck_assert(r.trusted);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_OK);
	ck_assert_int_eq(cost, 2);
	/* A trusted peer without it: cost_max. */
	who(&r, cc(), PEER, NULL);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_OK);
	ck_assert_int_eq(cost, 10);

	/* Untrusted: cost_max, whatever the header says, in any role,
	 * malformed or twice too. */
	who(&r, cc(), "REMOTE_ADDR=203.0.113.9", "HTTP_X_COST=1", NULL);
	ck_assert(!r.trusted);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_OK);
	ck_assert_int_eq(cost, 10);
	who(&r, cc(), "REMOTE_ADDR=203.0.113.9", "FCGI_ROLE=AUTHORIZER",
	    "HTTP_X_COST=1", NULL);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_OK);
	ck_assert_int_eq(cost, 10);
	who(&r, cc(), "REMOTE_ADDR=203.0.113.9", "RLGATE_ROLE=auth_request",
	    "HTTP_X_COST=x", "HTTP_X_COST=1", NULL);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_OK);
	ck_assert_int_eq(cost, 10);
	who(&r, NULL, PEER, "HTTP_X_COST=1", NULL);
	ck_assert(!r.trusted);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_OK);
	ck_assert_int_eq(cost, 10);

	/* Malformed from the trusted peer, or twice: refused. */
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		who(&r, cc(), PEER, bad[i], NULL);
		ck_assert_msg(rlg_request_cost(&r, &hdr, &cost) == RLG_EINVAL,
		    "%s taken", bad[i]);
		ck_assert_int_eq(cost, 10);
	}
	who(&r, cc(), PEER, "HTTP_X_COST=2", "HTTP_X_COST=2", NULL);
	ck_assert_int_eq(rlg_request_cost(&r, &hdr, &cost), RLG_EINVAL);
	ck_assert_str_eq(rlg_flaw_name(RLG_FLAW_COST), "bad_cost");
}
END_TEST

START_TEST(test_ipv6_grouping)
{
	struct rlg_client_config c = *cc();
	struct rlg_request r;
	char a[RLG_CLIENT_KEY_MAX + 1];

	snprintf(a, sizeof a, "%s",
	    who(&r, &c, "REMOTE_ADDR=2001:db8:1:2::1", NULL));
	ck_assert_str_eq(a, "2001:db8:1:2::/64");
	ck_assert_str_eq(who(&r, &c, "REMOTE_ADDR=2001:db8:1:2:aaaa:bbbb:cccc:9",
	    NULL), a);
	ck_assert_str_ne(who(&r, &c, "REMOTE_ADDR=2001:db8:1:3::1", NULL), a);
	c.ipv6_prefix = 56;
	ck_assert_str_eq(who(&r, &c, "REMOTE_ADDR=2001:db8:1:2::1", NULL),
	    "2001:db8:1::/56");
	c.ipv6_prefix = 128;
	ck_assert_str_eq(who(&r, &c, "REMOTE_ADDR=2001:db8:1:2::1", NULL),
	    "2001:db8:1:2::1");
	/* the mapped form is the IPv4 client, whatever the prefix */
	ck_assert_str_eq(who(&r, &c, "REMOTE_ADDR=::ffff:192.0.2.1", NULL),
	    "192.0.2.1");
	ck_assert_str_eq(who(&r, NULL, "REMOTE_ADDR=::ffff:192.0.2.1", NULL),
	    who(&r, NULL, "REMOTE_ADDR=192.0.2.1", NULL));
	ck_assert(r.addr.v4);
	/* cc NULL groups by /64 */
	ck_assert_str_eq(who(&r, NULL, "REMOTE_ADDR=2001:db8::1", NULL),
	    "2001:db8::/64");
}
END_TEST

static int
pkey(const struct rlg_request *r, unsigned key, const char *hdr,
    const struct rlg_client_config *c, char *out, size_t len)
{
	struct rlg_policy p;

	memset(&p, 0, sizeof p);
	p.key = key;
	p.key_name = (char *)hdr;
	return rlg_request_policy_key(r, &p, c, out, len, NULL);
}

START_TEST(test_policy_keys)
{
	struct rlg_client_config c = *cc();
	struct rlg_request r;
	char k1[RLG_CLIENT_KEY_MAX + 1], k2[RLG_CLIENT_KEY_MAX + 1];
	char both[RLG_CLIENT_KEY_MAX + 1], want[2 * RLG_CLIENT_KEY_MAX];
	char sec[300];
	const unsigned HB = RLG_KEY_HEADER, IB = RLG_KEY_IP;
	size_t i;

	who(&r, &c, "REMOTE_ADDR=192.0.2.1",
	    "HTTP_X_API_KEY=secret-api-key-123", NULL);
	ck_assert_int_eq(pkey(&r, IB, NULL, &c, k1, sizeof k1), RLG_OK);
	ck_assert_str_eq(k1, "192.0.2.1");
	ck_assert_int_eq(pkey(&r, 0, NULL, &c, k1, sizeof k1), RLG_OK);
	ck_assert_str_eq(k1, "192.0.2.1");
	/* hashed: keyed BLAKE2b-128, key = BLAKE2b-256("s3cret") */
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k1, sizeof k1), RLG_OK);
	ck_assert_str_eq(k1, "k:1e9fa79d0abd750df4e8c23251848502");
	ck_assert_ptr_null(strstr(k1, "secret"));
	ck_assert_int_eq(pkey(&r, HB, "x-api-key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_eq(k1, k2);
	/* composite */
	ck_assert_int_eq(pkey(&r, IB | HB, "X-Api-Key", &c, both, sizeof both),
	    RLG_OK);
	snprintf(want, sizeof want, "192.0.2.1|%s", k1);
	ck_assert_str_eq(both, want);
	/* same value from another address: same header key */
	who(&r, &c, "REMOTE_ADDR=198.51.100.4",
	    "HTTP_X_API_KEY=secret-api-key-123", NULL);
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_eq(k1, k2);
	/* another value, another key */
	who(&r, &c, "REMOTE_ADDR=198.51.100.4",
	    "HTTP_X_API_KEY=secret-api-key-124", NULL);
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_ne(k1, k2);
	/* another secret, another key */
	who(&r, &c, "REMOTE_ADDR=198.51.100.4",
	    "HTTP_X_API_KEY=secret-api-key-123", NULL);
	c.key_secret = "other";
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_ne(k1, k2);
	ck_assert_uint_eq(strlen(k2), 34);
	c.key_secret = NULL;
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_ne(k1, k2);
	ck_assert_uint_eq(strlen(k2), 34);
	/* the stretched secret a thread keeps follows the text, not the
	 * address (a config read again may reuse it) */
	snprintf(sec, sizeof sec, "s3cret");
	c.key_secret = sec;
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_eq(k1, k2);
	sec[5] = 'u';
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_ne(k1, k2);
	memset(sec, 'x', sizeof sec - 1);   /* too long to keep: each time */
	sec[sizeof sec - 1] = '\0';
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, both, sizeof both),
	    RLG_OK);
	ck_assert_str_eq(k2, both);
	ck_assert_str_ne(k1, k2);
	c.key_secret = "s3cret";
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_eq(k1, k2);
	/* absent or empty header: the IP key */
	who(&r, &c, "REMOTE_ADDR=2001:db8::1", NULL);
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_eq(k2, "2001:db8::/64");
	ck_assert_int_eq(pkey(&r, IB | HB, "X-Api-Key", &c, k2, sizeof k2),
	    RLG_OK);
	ck_assert_str_eq(k2, "2001:db8::/64");
	who(&r, &c, "REMOTE_ADDR=2001:db8::1", "HTTP_X_API_KEY=", NULL);
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_eq(k2, "2001:db8::/64");
	who(&r, &c, "HTTP_X_API_KEY=abc", NULL);
	ck_assert_int_eq(pkey(&r, IB | HB, "X-Api-Key", &c, k2, sizeof k2),
	    RLG_OK);
	/* no REMOTE_ADDR: the shared "unknown" address key */
	ck_assert_str_eq(k2, "unknown|k:80958e28babe7458d332e1297cf663bd");
	ck_assert_int_eq(pkey(&r, IB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	ck_assert_str_eq(k2, "unknown");
	/* X-API-Key beside X_API_Key: refused, whichever comes first */
	who(&r, &c, PEER, "HTTP_X_API_KEY=victim", "HTTP_X_API_KEY=mine", NULL);
	ck_assert_int_eq(pkey(&r, HB, "X-Api-Key", &c, k2, sizeof k2),
	    RLG_EINVAL);
	ck_assert_int_eq(pkey(&r, IB | HB, "X-Api-Key", &c, k2, sizeof k2),
	    RLG_EINVAL);
	ck_assert_int_eq(pkey(&r, IB, "X-Api-Key", &c, k2, sizeof k2), RLG_OK);
	/* CR/LF in the value never reaches the key */
	who(&r, &c, PEER, "HTTP_X_API_KEY=a\r\nSet-Cookie: x", NULL);
	ck_assert_int_eq(pkey(&r, IB | HB, "X-Api-Key", &c, k2, sizeof k2),
	    RLG_OK);
	for (i = 0; k2[i] != '\0'; i++)
		ck_assert(k2[i] != '\r' && k2[i] != '\n');
}
END_TEST

/*
 * key = cookie:NAME and query:NAME: the value of that name hashed as a
 * header's (one value, one key, whatever its spelling: %XX, '+', quotes,
 * spaces), the address when it is absent or empty, refused (EINVAL) when
 * the name comes twice under any spelling; key = global: one key.
 */
START_TEST(test_policy_key_sources)
{
	const struct rlg_client_config *c = cc();
	const unsigned CB = RLG_KEY_COOKIE, QB = RLG_KEY_QUERY;
	char hk[RLG_CLIENT_KEY_MAX + 1], k[RLG_CLIENT_KEY_MAX + 1];
	struct rlg_request r;
	static const char *const same_cookie[] = {
		"HTTP_COOKIE=sid=abc",
		"HTTP_COOKIE=theme=dark; sid=abc; lang=en",
		"HTTP_COOKIE=sid=\"abc\"",
		"HTTP_COOKIE=  sid = abc ;x=1",
		"HTTP_COOKIE=sid=%61bc",
		"HTTP_COOKIE=SID=abc",
	};
	static const char *const same_query[] = {
		"REQUEST_URI=/a?key=abc",
		"REQUEST_URI=/a?x=1&key=abc&y=2",
		"REQUEST_URI=/a?k%65y=%61bc",
		"REQUEST_URI=/a?Key=abc",
	};
	static const char *const twice[] = {
		"REQUEST_URI=/a?key=abc&key=abd",
		"REQUEST_URI=/a?key=abc&Key=abc",
		"REQUEST_URI=/a?key=abc&k%65y=abd",
		"REQUEST_URI=/a?key&key=abc",
	};
	size_t i;

	/* the header's hash of the same value */
	who(&r, c, "REMOTE_ADDR=192.0.2.1", "HTTP_X_API_KEY=abc", NULL);
	ck_assert_int_eq(pkey(&r, RLG_KEY_HEADER, "X-Api-Key", c, hk,
	    sizeof hk), RLG_OK);
	for (i = 0; i < sizeof same_cookie / sizeof same_cookie[0]; i++) {
		who(&r, c, "REMOTE_ADDR=192.0.2.1", same_cookie[i], NULL);
		ck_assert_int_eq(pkey(&r, CB, "sid", c, k, sizeof k), RLG_OK);
		ck_assert_msg(strcmp(k, hk) == 0, "%s: %s", same_cookie[i], k);
	}
	for (i = 0; i < sizeof same_query / sizeof same_query[0]; i++) {
		who(&r, c, "REMOTE_ADDR=192.0.2.1", same_query[i], NULL);
		ck_assert_int_eq(pkey(&r, QB, "key", c, k, sizeof k), RLG_OK);
		ck_assert_msg(strcmp(k, hk) == 0, "%s: %s", same_query[i], k);
	}
	/* the query of a guarding role's original request; '+' a space */
	who(&r, c, "REMOTE_ADDR=192.0.2.1", "REQUEST_URI=/a?key=a+b", NULL);
	ck_assert_int_eq(pkey(&r, QB, "key", c, k, sizeof k), RLG_OK);
	who(&r, c, "REMOTE_ADDR=192.0.2.1", "REQUEST_URI=/a?key=a%20b", NULL);
	ck_assert_int_eq(pkey(&r, QB, "key", c, hk, sizeof hk), RLG_OK);
	ck_assert_str_eq(k, hk);
	/* the cookie's '+' is itself */
	who(&r, c, "REMOTE_ADDR=192.0.2.1", "HTTP_COOKIE=sid=a+b", NULL);
	ck_assert_int_eq(pkey(&r, CB, "sid", c, k, sizeof k), RLG_OK);
	ck_assert_str_ne(k, hk);
	/* absent, empty, only a longer name, a fragment of it: the address */
	who(&r, c, "REMOTE_ADDR=192.0.2.1", "HTTP_COOKIE=sidx=abc; s=1",
	    "REQUEST_URI=/a?keys=abc&key=", NULL);
	ck_assert_int_eq(pkey(&r, CB, "sid", c, k, sizeof k), RLG_OK);
	ck_assert_str_eq(k, "192.0.2.1");
	ck_assert_int_eq(pkey(&r, QB, "key", c, k, sizeof k), RLG_OK);
	ck_assert_str_eq(k, "192.0.2.1");
	who(&r, c, "REMOTE_ADDR=192.0.2.1", "REQUEST_URI=/a", NULL);
	ck_assert_int_eq(pkey(&r, QB, "key", c, k, sizeof k), RLG_OK);
	ck_assert_str_eq(k, "192.0.2.1");
	/* no REQUEST_URI (SCRIPT_NAME and PATH_INFO): QUERY_STRING */
	{
		char *env[] = { "REMOTE_ADDR=192.0.2.1", "SCRIPT_NAME=/a",
		    "QUERY_STRING=key=abc", NULL };
		struct rlg_params in;

		rlg_params_envp(&in, env);
		rlg_request_read(&r, &in, c);
		ck_assert_str_eq(r.query, "key=abc");
		ck_assert_int_eq(pkey(&r, QB, "key", c, k, sizeof k), RLG_OK);
		ck_assert_str_ne(k, "192.0.2.1");
	}
	/* named twice, whatever the spelling: refused */
	for (i = 0; i < sizeof twice / sizeof twice[0]; i++) {
		who(&r, c, "REMOTE_ADDR=192.0.2.1", twice[i], NULL);
		ck_assert_msg(pkey(&r, QB, "key", c, k, sizeof k) ==
		    RLG_EINVAL, "%s", twice[i]);
	}
	who(&r, c, "REMOTE_ADDR=192.0.2.1", "HTTP_COOKIE=sid=a; Sid=b", NULL);
	ck_assert_int_eq(pkey(&r, CB, "sid", c, k, sizeof k), RLG_EINVAL);
	/* with the address: ip|k:... */
	who(&r, c, "REMOTE_ADDR=192.0.2.1", "HTTP_COOKIE=sid=abc", NULL);
	ck_assert_int_eq(pkey(&r, RLG_KEY_IP | CB, "sid", c, k, sizeof k),
	    RLG_OK);
	ck_assert_msg(strncmp(k, "192.0.2.1|k:", 12) == 0, "%s", k);
	/* global: one key, whoever asks */
	ck_assert_int_eq(pkey(&r, RLG_KEY_GLOBAL, NULL, c, k, sizeof k),
	    RLG_OK);
	ck_assert_str_eq(k, RLG_KEY_GLOBAL_CLIENT);
	who(&r, c, "REMOTE_ADDR=198.51.100.9", NULL);
	ck_assert_int_eq(pkey(&r, RLG_KEY_GLOBAL, NULL, c, k, sizeof k),
	    RLG_OK);
	ck_assert_str_eq(k, RLG_KEY_GLOBAL_CLIENT);
}
END_TEST

START_TEST(test_policy_key_bounds)
{
	const struct rlg_client_config *c = cc();
	struct rlg_request r;
	char out[64], name[300];
	char *big = malloc(64 * 1024);

	who(&r, c, "REMOTE_ADDR=192.0.2.1", "HTTP_X_API_KEY=v", NULL);
	ck_assert_int_eq(pkey(&r, RLG_KEY_HEADER, "X-Api-Key", c, out, 35),
	    RLG_OK);
	ck_assert_int_eq(pkey(&r, RLG_KEY_HEADER, "X-Api-Key", c, out, 34),
	    RLG_ENOSPC);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(pkey(&r, RLG_KEY_IP | RLG_KEY_HEADER, "X-Api-Key", c,
	    out, 10 + 35), RLG_OK);
	ck_assert_str_eq(out, "192.0.2.1|k:ca4d0e57dc189b9b1729e4f77677f78e");
	ck_assert_int_eq(pkey(&r, RLG_KEY_IP | RLG_KEY_HEADER, "X-Api-Key", c,
	    out, 10 + 34), RLG_ENOSPC);
	ck_assert_int_eq(pkey(&r, RLG_KEY_IP, NULL, c, out, 10), RLG_OK);
	ck_assert_int_eq(pkey(&r, RLG_KEY_IP, NULL, c, out, 9), RLG_ENOSPC);
	ck_assert_int_eq(pkey(&r, RLG_KEY_IP, NULL, c, out, 0), RLG_ENOSPC);
	/* a huge value is hashed like any other */
	ck_assert_ptr_nonnull(big);
	memcpy(big, "HTTP_X_API_KEY=", 15);
	memset(big + 15, 'x', 64 * 1024 - 16);
	big[64 * 1024 - 1] = '\0';
	who(&r, c, "REMOTE_ADDR=192.0.2.1", big, NULL);
	ck_assert_int_eq(pkey(&r, RLG_KEY_HEADER, "X-Api-Key", c, out,
	    sizeof out), RLG_OK);
	ck_assert_uint_eq(strlen(out), 34);
	/* a header name too long to be a CGI variable: the IP key */
	memset(name, 'A', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	ck_assert_int_eq(pkey(&r, RLG_KEY_HEADER, name, c, out, sizeof out),
	    RLG_OK);
	ck_assert_str_eq(out, "192.0.2.1");
	free(big);
}
END_TEST

/*
 * The spelling normalised routes compare: ASCII case folded, each
 * segment's ";params" dropped (a decoded %3B's too), slashes merged
 * again, the trailing '/' kept for rlg_path_route_slash; bounded by
 * out. A dot segment with params is no path (decode_path refuses it).
 */
START_TEST(test_route_path)
{
	static const char *const cases[][2] = {
		{ "/api/search", "/api/search" },
		{ "/API/Search", "/api/search" },
		{ "/api/search/", "/api/search/" },
		{ "/api/search;jsessionid=1", "/api/search" },
		{ "/api;v=1/search;x/", "/api/search/" },
		{ "/api/;x/search", "/api/search" },
		{ "/;x", "/" },
		{ "/", "/" },
		{ "/\xc3\x89t\xc3\xa9/A", "/\xc3\x89t\xc3\xa9/a" },
	};
	char out[64], small[8];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_int_eq(rlg_path_route(cases[i][0], out,
		    sizeof out), RLG_OK);
		ck_assert_str_eq(out, cases[i][1]);
	}
	/* the decoded path of %3B: a ';' like any other */
	ck_assert_int_eq(rlg_path_decode("/api/search%3Bx", out,
	    sizeof out), RLG_OK);
	ck_assert_int_eq(rlg_path_route(out, out, sizeof out),
	    RLG_OK);
	ck_assert_str_eq(out, "/api/search");
	ck_assert_int_eq(rlg_path_route("/12345678", small,
	    sizeof small), RLG_ENOSPC);
	ck_assert_str_eq(small, "");
	ck_assert_int_eq(rlg_path_route("/1234;5678", small,
	    sizeof small), RLG_OK);
	ck_assert_str_eq(small, "/1234");
	ck_assert_int_eq(rlg_path_route("/", small, 1), RLG_ENOSPC);
	rlg_path_route_slash(out);
	ck_assert_str_eq(out, "/api/search");
	memcpy(out, "/a/", 4);
	rlg_path_route_slash(out);
	ck_assert_str_eq(out, "/a");
	memcpy(out, "/", 2);
	rlg_path_route_slash(out);
	ck_assert_str_eq(out, "/");
	/* "..;" is the parent to Tomcat, a name elsewhere: refused */
	ck_assert_int_eq(rlg_path_decode("/a/..;/b", out,
	    sizeof out), RLG_EINVAL);
	ck_assert_int_eq(rlg_path_decode("/a/%2e%2e;x/b", out,
	    sizeof out), RLG_EINVAL);
	ck_assert_int_eq(rlg_path_decode("/a/.;x", out,
	    sizeof out), RLG_EINVAL);
	ck_assert_int_eq(rlg_path_decode("/a/..%3b/b", out,
	    sizeof out), RLG_EINVAL);
	ck_assert_int_eq(rlg_path_decode("/a/...;/b", out,
	    sizeof out), RLG_OK);
	ck_assert_int_eq(rlg_path_decode("/a/..x;/b", out,
	    sizeof out), RLG_OK);
	ck_assert_int_eq(rlg_path_decode("/a;x/..", out,
	    sizeof out), RLG_OK);
	ck_assert_str_eq(out, "/");
}
END_TEST

/* ---- bearer tokens (key = jwt:CLAIM) ---------------------------------- */

/* The output of the shell command cmd (its stdout, NUL-ended), or abort. */
static char *
run_out(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	char *buf = malloc(16384);
	size_t n;

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(buf);
	n = fread(buf, 1, 16383, f);
	buf[n] = '\0';
	ck_assert_int_eq(pclose(f), 0);
	ck_assert_uint_gt(n, 0);
	return buf;
}

/* A key pair made by openssl: its private key file (kept for openssl
 * dgst) in path, and the public key's PEM. */
static char *
key_pair(const char *genpkey_args, char *path, size_t size)
{
	char cmd[512];
	int fd;

	snprintf(path, size, "/tmp/rlgate-jwt-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(cmd, sizeof cmd, "openssl genpkey %s -out %s 2>/dev/null && "
	    "openssl pkey -in %s -pubout 2>/dev/null", genpkey_args, path,
	    path);
	return run_out(cmd);
}

/* A token signed by libjwt: alg with key (len bytes), the claims sub
 * (if not NULL), uid 42, exp and nbf (0: none). */
static char *
lib_token(jwt_alg_t alg, const char *key, size_t len, const char *sub,
    long exp, long nbf)
{
	jwt_t *j = NULL;
	char *tok;

	ck_assert_int_eq(jwt_new(&j), 0);
	ck_assert_int_eq(jwt_set_alg(j, alg, (const unsigned char *)key,
	    (int)len), 0);
	if (sub != NULL)
		ck_assert_int_eq(jwt_add_grant(j, "sub", sub), 0);
	ck_assert_int_eq(jwt_add_grant_int(j, "uid", 42), 0);
	if (exp != 0)
		ck_assert_int_eq(jwt_add_grant_int(j, "exp", exp), 0);
	if (nbf != 0)
		ck_assert_int_eq(jwt_add_grant_int(j, "nbf", nbf), 0);
	tok = jwt_encode_str(j);
	ck_assert_ptr_nonnull(tok);
	jwt_free(j);
	return tok;
}

/* base64url without padding of n bytes of b, into out (room enough). */
static void
b64u(const void *b, size_t n, char *out, size_t size)
{
	sodium_bin2base64(out, size, b, n,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

/*
 * A token made as another issuer makes it, with openssl: header and
 * payload JSON, signed by openssl dgst -sha256 with the private key file
 * priv (an ES256 signature turned from DER into JOSE's r||s).
 */
static char *
ossl_token(const char *header, const char *payload, const char *priv,
    bool ecdsa)
{
	char in[1024], cmd[1024], *tok = malloc(4096), sig[512];
	unsigned char der[600], raw[64];
	FILE *f;
	size_t n, rl, sl, at;
	int fd;
	char path[64];

	ck_assert_ptr_nonnull(tok);
	b64u(header, strlen(header), in, sizeof in);
	n = strlen(in);
	in[n++] = '.';
	b64u(payload, strlen(payload), in + n, sizeof in - n);
	snprintf(path, sizeof path, "/tmp/rlgate-jwt-in-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, in, strlen(in)), (int)strlen(in));
	close(fd);
	snprintf(cmd, sizeof cmd, "openssl dgst -sha256 -sign %s %s", priv,
	    path);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(der, 1, sizeof der, f);
	ck_assert_int_eq(pclose(f), 0);
	unlink(path);
	if (ecdsa) {
		/* SEQUENCE { INTEGER r, INTEGER s }, each to 32 bytes */
		ck_assert(n > 8 && der[0] == 0x30 && der[2] == 0x02);
		rl = der[3];
		at = 4;
		memset(raw, 0, sizeof raw);
		memcpy(raw + 32 - (rl > 32 ? 32 : rl), der + at +
		    (rl > 32 ? rl - 32 : 0), rl > 32 ? 32 : rl);
		at += rl;
		ck_assert(der[at] == 0x02);
		sl = der[at + 1];
		at += 2;
		memcpy(raw + 64 - (sl > 32 ? 32 : sl), der + at +
		    (sl > 32 ? sl - 32 : 0), sl > 32 ? 32 : sl);
		b64u(raw, 64, sig, sizeof sig);
	} else {
		b64u(der, n, sig, sizeof sig);
	}
	snprintf(tok, 4096, "%s.%s", in, sig);
	return tok;
}

/* The claim the request with "Authorization: VALUE" keys jwt:CLAIM by
 * under cc, as pkey does; *t what became of the token. */
static int
jkey(const struct rlg_client_config *cc, const char *authorization,
    const char *claim, char *out, size_t len, enum rlg_token *t)
{
	char auth[4200];
	struct rlg_request r;
	struct rlg_policy p;

	snprintf(auth, sizeof auth, "HTTP_AUTHORIZATION=%s", authorization);
	who(&r, cc, "REMOTE_ADDR=192.0.2.1", auth, NULL);
	memset(&p, 0, sizeof p);
	p.key = RLG_KEY_JWT;
	p.key_name = (char *)claim;
	return rlg_request_policy_key(&r, &p, cc, out, len, t);
}

/* cc verifies with key under alg, as a load numbered generation. */
static void
use_key(struct rlg_client_config *cc, int alg, const char *key,
    uint64_t generation)
{
	cc->jwt_algorithm = alg;
	cc->jwt_key = (unsigned char *)key;
	cc->jwt_key_len = strlen(key);
	cc->jwt_generation = generation;
}

/* A Bearer header for tok. */
static const char *
bearer(const char *tok)
{
	static char b[4200];

	snprintf(b, sizeof b, "Bearer %s", tok);
	return b;
}

/* The request with tok as its bearer token keys jwt:claim under cc as
 * want says, with the key key (NULL: any). */
static void
expect_jwt(const struct rlg_client_config *cc, const char *tok,
    const char *claim, enum rlg_token want, const char *key)
{
	char k[RLG_CLIENT_KEY_MAX + 1];
	enum rlg_token t;

	ck_assert_int_eq(jkey(cc, bearer(tok), claim, k, sizeof k, &t),
	    RLG_OK);
	ck_assert_int_eq(t, want);
	if (key != NULL)
		ck_assert_str_eq(k, key);
}

/*
 * key = jwt:CLAIM: a verified token keys by its claim's hash (the same
 * value as a header's); a forged, expired, early, alg-none or
 * alg-confused token, or one without the claim, keys by the address and
 * says why; a token issued by openssl (another issuer) verifies too, for
 * RS256 and ES256 (JOSE's r||s); the cache of verified tokens follows the
 * key's load.
 */
START_TEST(test_jwt_keys)
{
	static const char secret[] = "0123456789abcdef0123456789abcdef-hs";
	struct rlg_client_config c = *cc();
	char hk[RLG_CLIENT_KEY_MAX + 1], k[RLG_CLIENT_KEY_MAX + 1];
	char rsa_priv[64], ec_priv[64], *rsa_pub, *ec_pub, *tok, payload[256];
	long now = (long)time(NULL);
	enum rlg_token t;
	struct rlg_request r;

	/* the header key of the same value, "alice" */
	who(&r, &c, "REMOTE_ADDR=192.0.2.1", "HTTP_X_API_KEY=alice", NULL);
	ck_assert_int_eq(pkey(&r, RLG_KEY_HEADER, "X-Api-Key", &c, hk,
	    sizeof hk), RLG_OK);

	use_key(&c, RLG_JWT_HS256, secret, 1001);
	tok = lib_token(JWT_ALG_HS256, secret, strlen(secret), "alice",
	    now + 600, now - 5);
	expect_jwt(&c, tok, "sub", RLG_TOKEN_OK, hk);
	/* again: from the cache, the same */
	ck_assert_int_eq(jkey(&c, bearer(tok), "sub", k, sizeof k, &t), RLG_OK);
	ck_assert_str_eq(k, hk);
	/* "bearer" in any case, spaces; an integer claim */
	ck_assert_int_eq(jkey(&c, "bEaReR   x", "sub", k, sizeof k, &t),
	    RLG_OK);
	ck_assert_int_eq(t, RLG_TOKEN_INVALID);
	free(tok);
	tok = lib_token(JWT_ALG_HS256, secret, strlen(secret), NULL, 0, 0);
	ck_assert_int_eq(jkey(&c, bearer(tok), "uid", k, sizeof k, &t), RLG_OK);
	ck_assert_int_eq(t, RLG_TOKEN_OK);
	ck_assert_str_ne(k, "192.0.2.1");
	/* no such claim */
	expect_jwt(&c, tok, "sub", RLG_TOKEN_NO_CLAIM, "192.0.2.1");
	free(tok);
	/* forged: another secret; replayed, refused again (from the cache) */
	tok = lib_token(JWT_ALG_HS256, "another-secret-of-32-bytes-or-more",
	    34, "alice", 0, 0);
	expect_jwt(&c, tok, "sub", RLG_TOKEN_INVALID, "192.0.2.1");
	expect_jwt(&c, tok, "sub", RLG_TOKEN_INVALID, "192.0.2.1");
	free(tok);
	/* expired (twice: the cached one expired too), not yet valid */
	tok = lib_token(JWT_ALG_HS256, secret, strlen(secret), "alice",
	    now - 1, 0);
	expect_jwt(&c, tok, "sub", RLG_TOKEN_EXPIRED, "192.0.2.1");
	expect_jwt(&c, tok, "sub", RLG_TOKEN_EXPIRED, "192.0.2.1");
	free(tok);
	tok = lib_token(JWT_ALG_HS256, secret, strlen(secret), "alice",
	    0, now + 600);
	ck_assert_int_eq(jkey(&c, bearer(tok), "sub", k, sizeof k, &t), RLG_OK);
	ck_assert_int_eq(t, RLG_TOKEN_EARLY);
	free(tok);
	/* alg none: libjwt refuses it beside a key */
	{
		char h[64], b[64], none[200];

		b64u("{\"alg\":\"none\"}", 14, h, sizeof h);
		b64u("{\"sub\":\"alice\"}", 15, b, sizeof b);
		snprintf(none, sizeof none, "%s.%s.", h, b);
		ck_assert_int_eq(jkey(&c, bearer(none), "sub", k, sizeof k,
		    &t), RLG_OK);
		ck_assert(t == RLG_TOKEN_INVALID || t == RLG_TOKEN_ALGORITHM);
		ck_assert_str_eq(k, "192.0.2.1");
	}
	/* no token, another scheme, twice */
	ck_assert_int_eq(jkey(&c, "Basic YWxpY2U6cHc=", "sub", k, sizeof k,
	    &t), RLG_OK);
	ck_assert_int_eq(t, RLG_TOKEN_NONE);
	ck_assert_str_eq(k, "192.0.2.1");
	{
		struct rlg_policy p;

		who(&r, &c, "REMOTE_ADDR=192.0.2.1", "HTTP_AUTHORIZATION=a",
		    "HTTP_AUTHORIZATION=b", NULL);
		memset(&p, 0, sizeof p);
		p.key = RLG_KEY_JWT;
		p.key_name = "sub";
		ck_assert_int_eq(rlg_request_policy_key(&r, &p, &c, k, sizeof k,
		    &t), RLG_EINVAL);
	}

	/* RS256: a token of libjwt's and one of openssl's verify */
	rsa_pub = key_pair("-algorithm RSA -pkeyopt rsa_keygen_bits:2048",
	    rsa_priv, sizeof rsa_priv);
	use_key(&c, RLG_JWT_RS256, rsa_pub, 1002);
	snprintf(payload, sizeof payload, "{\"sub\":\"alice\",\"exp\":%ld}",
	    now + 600);
	tok = ossl_token("{\"alg\":\"RS256\",\"typ\":\"JWT\"}", payload,
	    rsa_priv, false);
	expect_jwt(&c, tok, "sub", RLG_TOKEN_OK, hk);
	free(tok);
	/* the confusion: HS256 "signed" with the RSA public key as secret */
	tok = lib_token(JWT_ALG_HS256, rsa_pub, strlen(rsa_pub), "alice", 0,
	    0);
	expect_jwt(&c, tok, "sub", RLG_TOKEN_ALGORITHM, "192.0.2.1");
	free(tok);

	/* ES256: openssl's signature as JOSE has it (r||s) */
	ec_pub = key_pair("-algorithm EC -pkeyopt ec_paramgen_curve:P-256",
	    ec_priv, sizeof ec_priv);
	use_key(&c, RLG_JWT_ES256, ec_pub, 1003);
	tok = ossl_token("{\"alg\":\"ES256\",\"typ\":\"JWT\"}", payload,
	    ec_priv, true);
	expect_jwt(&c, tok, "sub", RLG_TOKEN_OK, hk);
	/* the same token under another key's load: verified anew, refused */
	use_key(&c, RLG_JWT_ES256, rsa_pub, 1004);
	ck_assert_int_eq(jkey(&c, bearer(tok), "sub", k, sizeof k, &t), RLG_OK);
	ck_assert_int_ne(t, RLG_TOKEN_OK);
	ck_assert_str_eq(k, "192.0.2.1");
	free(tok);
	unlink(rsa_priv);
	unlink(ec_priv);
	free(rsa_pub);
	free(ec_pub);
}
END_TEST

Suite *
rlg_request_suite(void)
{
	Suite *s = suite_create("request");
	TCase *core = tcase_create("core"), *hostile = tcase_create("hostile");
	TCase *proxy = tcase_create("proxy"), *keys = tcase_create("keys");

	tcase_add_test(core, test_basic_get);
	tcase_add_test(core, test_param_lookup);
	tcase_add_test(core, test_script_name_fallback);
	tcase_add_test(core, test_client_keys);
	tcase_add_test(core, test_roles);
	tcase_add_test(core, test_front_roles);
	tcase_add_test(proxy, test_described_request);
	tcase_add_test(proxy, test_params_once);
	tcase_add_test(proxy, test_xff_walk);
	tcase_add_test(proxy, test_forwarded_walk);
	tcase_add_test(proxy, test_forwarded_header_choice);
	tcase_add_test(proxy, test_untrusted_peer);
	tcase_add_test(proxy, test_ipv6_grouping);
	tcase_add_test(keys, test_policy_keys);
	tcase_add_test(keys, test_policy_key_sources);
	tcase_add_test(keys, test_jwt_keys);
	tcase_add_test(keys, test_policy_key_bounds);
	tcase_add_test(keys, test_request_cost);
	tcase_add_test(hostile, test_malformed_hops);
	tcase_add_test(hostile, test_duplicate_headers);
	tcase_add_test(hostile, test_oversized_headers);
	tcase_add_test(hostile, test_bad_paths);
	tcase_add_test(hostile, test_decode_bounds);
	tcase_add_test(hostile, test_normalised_paths);
	tcase_add_test(hostile, test_route_path);
	tcase_add_test(hostile, test_long_method);
	tcase_add_test(hostile, test_missing_everything);
	suite_add_tcase(s, core);
	suite_add_tcase(s, proxy);
	suite_add_tcase(s, keys);
	suite_add_tcase(s, hostile);
	return s;
}
