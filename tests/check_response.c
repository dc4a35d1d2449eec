/*
 * check_response.c: every answer rlgate sends. The exact bytes of the
 * seed's draft03 answers and of a 200 and a 429 in style all; a matrix of
 * every header style x error format x outcome, read back like a client
 * would (headers split and checked for stray CR/LF, RateLimit-Policy and
 * RateLimit parsed as RFC 8941 Lists, problem+json checked as JSON);
 * Retry-After never earlier than any reset; the decision the one-policy
 * styles report; 32 long policies fitting; names that cannot be sent.
 * And the fronts that render them: the CGI-shaped adapter and renderer,
 * and every registered front.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "check_rlgate.h"
#include "front_cgi.h"
#include "fronts.h"
#include "response.h"
#include "sf_parse.h"
#include "util.h"

#define NAMES_MAX RLG_POLICIES_MAX

struct sink {
	char buf[RLG_RESPONSE_MAX + 1];
	size_t used;
	int calls;
};

/* An answer read back: pointers into copy. */
#define HEADERS_MAX 32
struct parsed {
	char copy[RLG_RESPONSE_MAX + 1];
	const char *name[HEADERS_MAX];
	const char *value[HEADERS_MAX];
	size_t nh;
	int status;
	const char *body;
	size_t body_len;
};

/* One row of the matrix. */
struct scenario {
	const char *what;
	enum rlg_outcome outcome;
	bool head;
	const struct rlg_decision *d;
	size_t n;
	int pick;              /* the decision draft03/x-ratelimit report */
	int64_t retry_after;   /* expected Retry-After, 0: none */
	const char *problem;   /* the expected problem+json body, or NULL */
};

static int sink_write(void *ctx, const char *buf, size_t len);
static int failing_write(void *ctx, const char *buf, size_t len);
static int send_cgi(const struct rlg_answer *a, rlg_write_fn write,
    void *ctx);
static const char *answer(const struct rlg_answer *a);
static struct rlg_answer draft03(enum rlg_outcome o,
    const struct rlg_decision *d, bool head);
static void parse_answer(const char *raw, struct parsed *p);
static const char *header(const struct parsed *p, const char *name);
static int64_t header_int(const struct parsed *p, const char *name);
static int64_t to_int(const char *s);
static void check_scenario(enum rlg_header_style style,
    enum rlg_error_format errors, const struct scenario *sc);
static void check_ietf(const struct parsed *p, const struct rlg_answer *a,
    int64_t *max_t);
static const char *json_value(const char *s, int depth);
static const char *json_string(const char *s);
static const char *json_ws(const char *s);
static bool json_valid(const char *s);

/* Three policies, one per shape of RateLimit-Policy member. */
static const struct rlg_policy pol[3] = {
	{ "per-second", { RLG_ALG_FIXED_WINDOW, 10, 1000, 0, 0, 0 }, RLG_KEY_IP, NULL, RLG_MODE_ENFORCE, NULL, 0, 0, NULL, false, 0 },
	{ "per.minute", { RLG_ALG_SLIDING_WINDOW, 100, 60000, 0, 0, 0 }, RLG_KEY_IP, NULL, RLG_MODE_ENFORCE, NULL, 0, 0, NULL, false, 0 },
	{ "burst_bucket", { RLG_ALG_TOKEN_BUCKET, 1000, 3600000, 50, 0, 0 }, RLG_KEY_IP, NULL, RLG_MODE_ENFORCE, NULL, 0, 0, NULL, false, 0 },
};

static const struct rlg_decision d_one[1] = {
	{ true, 10, 9, 800, 0, 800, false },
};
/*
 * Tie on remaining (3): the sooner reset (per.minute) is reported. The
 * sliding window and the bucket give quota back before their reset
 * (next_ms, the ietf t); the fixed window at its reset.
 */
static const struct rlg_decision d_ok[3] = {
	{ true, 10, 9, 800, 0, 800, false },
	{ true, 100, 3, 45000, 0, 1200, false },
	{ true, 1000, 3, 72000, 0, 3600, false },
};
/* per-second and burst_bucket reject; burst_bucket admits again last. */
static const struct rlg_decision d_429[3] = {
	{ false, 10, 0, 900, 900, 900, false },
	{ true, 100, 50, 30000, 0, 30000, false },
	{ false, 1000, 0, 12500, 12500, 12500, false },
};

#define PROBLEM_429 \
	"{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\"," \
	"\"title\":\"Quota Exceeded\",\"status\":429," \
	"\"detail\":\"Too Many Requests. Rate limit exceeded.\"," \
	"\"violated-policies\":[\"per-second\",\"burst_bucket\"]}"
#define PROBLEM_404 \
	"{\"type\":\"about:blank\",\"title\":\"Not Found\",\"status\":404}"
#define PROBLEM_405 \
	"{\"type\":\"about:blank\",\"title\":\"Method Not Allowed\",\"status\":405}"
#define PROBLEM_400 \
	"{\"type\":\"about:blank\",\"title\":\"Bad Request\",\"status\":400}"
#define PROBLEM_503 \
	"{\"type\":\"about:blank\",\"title\":\"Service Unavailable\",\"status\":503}"

static const struct scenario scenarios[] = {
	{ "200, 1 policy", RLG_OUT_ADMITTED, false, d_one, 1, 0, 0, NULL },
	{ "200, 3 policies", RLG_OUT_ADMITTED, false, d_ok, 3, 1, 0, NULL },
	{ "429, 2 of 3 reject", RLG_OUT_REJECTED, false, d_429, 3, 2, 13,
	    PROBLEM_429 },
	{ "404", RLG_OUT_NOT_FOUND, false, d_ok, 3, 1, 0, PROBLEM_404 },
	{ "405", RLG_OUT_BAD_METHOD, false, d_ok, 3, 1, 0, PROBLEM_405 },
	{ "400", RLG_OUT_BAD_REQUEST, false, d_ok, 3, 1, 0, PROBLEM_400 },
	{ "503, no decisions", RLG_OUT_STORE_DOWN, false, NULL, 0, -1, 1,
	    PROBLEM_503 },
	{ "200, store down, open", RLG_OUT_ADMITTED, false, NULL, 0, -1, 0,
	    NULL },
	{ "HEAD 200, 3 policies", RLG_OUT_ADMITTED, true, d_ok, 3, 1, 0, NULL },
	{ "HEAD 429", RLG_OUT_REJECTED, true, d_429, 3, 2, 13, PROBLEM_429 },
};

static const struct {
	int code;
	const char *json;
} expect[] = {
	[RLG_OUT_ADMITTED] = { 200, "{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}" },
	[RLG_OUT_REJECTED] = { 429, "{\"error\":{\"code\":429,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}" },
	[RLG_OUT_NOT_FOUND] = { 404, "{\"error\":{\"code\":404,\"message\":\"Not Found.\"}}" },
	[RLG_OUT_BAD_METHOD] = { 405, "{\"error\":{\"code\":405,\"message\":\"Method Not Allowed.\"}}" },
	[RLG_OUT_BAD_REQUEST] = { 400, "{\"error\":{\"code\":400,\"message\":\"Bad Request.\"}}" },
	[RLG_OUT_STORE_DOWN] = { 503, "{\"error\":{\"code\":503,\"message\":\"Service Unavailable. Rate limit store unavailable.\"}}" },
};

static int
sink_write(void *ctx, const char *buf, size_t len)
{
	struct sink *s = ctx;

	ck_assert_uint_lt(s->used + len, sizeof s->buf);
	memcpy(s->buf + s->used, buf, len);
	s->used += len;
	s->buf[s->used] = '\0';
	s->calls++;
	return 0;
}

static int
failing_write(void *ctx, const char *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
	return -5;
}

/* Sends a as the CGI-shaped fronts do, through write/ctx. */
static int
send_cgi(const struct rlg_answer *a, rlg_write_fn write, void *ctx)
{
	const struct rlg_out out = { rlg_front_cgi_render, write, ctx, NULL };

	return rlg_response_send(a, &out);
}

/* The answer's bytes, written through the writer in exactly one call. */
static const char *
answer(const struct rlg_answer *a)
{
	static struct sink s;

	memset(&s, 0, sizeof s);
	ck_assert_int_eq(send_cgi(a, sink_write, &s), 0);
	ck_assert_int_eq(s.calls, 1);
	ck_assert_uint_eq(strlen(s.buf), s.used);
	return s.buf;
}

static struct rlg_answer
draft03(enum rlg_outcome o, const struct rlg_decision *d, bool head)
{
	struct rlg_answer a = { o, head, RLG_STYLE_DRAFT03, RLG_ERRORS_JSON,
	    pol, d, d != NULL ? 1 : 0, RLG_ROLE_RESPONDER, 0, 0 };

	return a;
}

/*
 * Splits an answer like a client: header lines end in CRLF and hold no
 * other CR or LF, each is "Name: value" with a token name, no name twice,
 * the first is Status; then the body.
 */
static void
parse_answer(const char *raw, struct parsed *p)
{
	char *line, *end, *colon;
	size_t i, j;

	memset(p, 0, sizeof *p);
	ck_assert_uint_lt(strlen(raw), sizeof p->copy);
	strcpy(p->copy, raw);
	end = strstr(p->copy, "\r\n\r\n");
	ck_assert_ptr_nonnull(end);
	p->body = end + 4;
	p->body_len = strlen(p->body);
	end[2] = '\0';
	for (line = p->copy; *line != '\0'; line = end + 2) {
		end = strstr(line, "\r\n");
		ck_assert_ptr_nonnull(end);
		*end = '\0';
		ck_assert_msg(strpbrk(line, "\r\n") == NULL,
		    "CR or LF inside a header line: %s", line);
		colon = strstr(line, ": ");
		ck_assert_ptr_nonnull(colon);
		*colon = '\0';
		ck_assert_uint_gt(strlen(line), 0);
		ck_assert_uint_eq(strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "abcdefghijklmnopqrstuvwxyz0123456789-"), strlen(line));
		ck_assert_uint_lt(p->nh, HEADERS_MAX);
		p->name[p->nh] = line;
		p->value[p->nh] = colon + 2;
		p->nh++;
	}
	for (i = 0; i < p->nh; i++)
		for (j = i + 1; j < p->nh; j++)
			ck_assert_msg(strcasecmp(p->name[i], p->name[j]) != 0,
			    "header %s twice", p->name[i]);
	ck_assert_uint_gt(p->nh, 0);
	ck_assert_str_eq(p->name[0], "Status");
	p->status = (int)to_int(p->value[0]);
}

static const char *
header(const struct parsed *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->nh; i++)
		if (strcasecmp(p->name[i], name) == 0)
			return p->value[i];
	return NULL;
}

/* A leading run of digits (the whole value but for "Status"). */
static int64_t
to_int(const char *s)
{
	int64_t v = 0;
	size_t i;

	ck_assert(s[0] >= '0' && s[0] <= '9');
	for (i = 0; s[i] >= '0' && s[i] <= '9'; i++) {
		ck_assert_uint_lt(i, 18);
		v = v * 10 + (s[i] - '0');
	}
	ck_assert(s[i] == '\0' || s[i] == ' ');
	return v;
}

static int64_t
header_int(const struct parsed *p, const char *name)
{
	const char *v = header(p, name);

	ck_assert_msg(v != NULL, "no %s", name);
	ck_assert_uint_eq(strspn(v, "0123456789"), strlen(v));
	return to_int(v);
}

/*
 * RateLimit-Policy names every policy with q, w (whole seconds) and, for a
 * token bucket only, rlgate-burst; RateLimit has r and t for every policy,
 * or on a 429 for the rejecting ones only. Sets *max_t to the largest t.
 */
static void
check_ietf(const struct parsed *p, const struct rlg_answer *a, int64_t *max_t)
{
	static struct sf_item items[NAMES_MAX + 1];
	const struct sf_bare *v;
	const char *f;
	size_t i, k, n;

	f = header(p, "RateLimit-Policy");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(sf_parse_list(f, strlen(f), items, NAMES_MAX + 1, &n), 0);
	ck_assert_uint_eq(n, a->n);
	for (i = 0; i < n; i++) {
		const struct rlg_policy *pp = &a->policies[i];
		bool bucket = pp->lim.algorithm == RLG_ALG_TOKEN_BUCKET;

		ck_assert_int_eq(items[i].value.type, SF_STRING);
		ck_assert_str_eq(items[i].value.string, pp->name);
		ck_assert_uint_eq(items[i].nparams, bucket ? 3 : 2);
		ck_assert_str_eq(items[i].params[0].key, "q");
		ck_assert_str_eq(items[i].params[1].key, "w");
		v = sf_param(&items[i], "q");
		ck_assert_int_eq(v->type, SF_INTEGER);
		ck_assert_int_eq(v->integer, pp->lim.limit);
		v = sf_param(&items[i], "w");
		ck_assert_int_eq(v->type, SF_INTEGER);
		ck_assert_int_eq(v->integer, pp->lim.window_ms / 1000);
		v = sf_param(&items[i], "rlgate-burst");
		if (bucket) {
			ck_assert_ptr_nonnull(v);
			ck_assert_int_eq(v->type, SF_INTEGER);
			ck_assert_int_eq(v->integer, pp->lim.burst);
		} else {
			ck_assert_ptr_null(v);
		}
	}

	*max_t = 0;
	f = header(p, "RateLimit");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(sf_parse_list(f, strlen(f), items, NAMES_MAX + 1, &n), 0);
	for (i = 0, k = 0; i < a->n; i++) {
		const struct rlg_decision *d = &a->decisions[i];

		if (a->outcome == RLG_OUT_REJECTED && d->admitted)
			continue;
		ck_assert_uint_lt(k, n);
		ck_assert_int_eq(items[k].value.type, SF_STRING);
		ck_assert_str_eq(items[k].value.string, a->policies[i].name);
		ck_assert_uint_eq(items[k].nparams, 2);
		ck_assert_str_eq(items[k].params[0].key, "r");
		ck_assert_str_eq(items[k].params[1].key, "t");
		v = sf_param(&items[k], "r");
		ck_assert_int_eq(v->type, SF_INTEGER);
		ck_assert_int_eq(v->integer, d->remaining);
		v = sf_param(&items[k], "t");
		ck_assert_int_eq(v->type, SF_INTEGER);
		ck_assert_int_eq(v->integer, rlg_response_seconds(d->next_ms));
		if (v->integer > *max_t)
			*max_t = v->integer;
		k++;
	}
	ck_assert_uint_eq(k, n);
	ck_assert_uint_gt(n, 0);
}

/* One answer of the matrix, checked as a client reads it. */
static void
check_scenario(enum rlg_header_style style, enum rlg_error_format errors,
    const struct scenario *sc)
{
	static struct parsed p;
	static char get_body[RLG_RESPONSE_MAX + 1];
	struct rlg_answer a = { sc->outcome, false, style, errors,
	    sc->d != NULL ? pol : NULL, sc->d, sc->n, RLG_ROLE_RESPONDER, 0, 0 };
	bool has = sc->n > 0;
	bool want_draft03 = has && (style == RLG_STYLE_DRAFT03 ||
	    style == RLG_STYLE_ALL);
	bool want_x = has && (style == RLG_STYLE_X_RATELIMIT ||
	    style == RLG_STYLE_ALL);
	bool want_ietf = has && (style == RLG_STYLE_IETF ||
	    style == RLG_STYLE_ALL);
	bool problem = errors == RLG_ERRORS_PROBLEM &&
	    sc->outcome != RLG_OUT_ADMITTED;
	int64_t max_t = 0, retry;
	size_t i;

	/* The GET body first: HEAD must announce its length. */
	parse_answer(answer(&a), &p);
	ck_assert_uint_lt(p.body_len, sizeof get_body);
	strcpy(get_body, p.body);
	a.head = sc->head;
	parse_answer(answer(&a), &p);

	ck_assert_int_eq(p.status, expect[sc->outcome].code);
	ck_assert_str_eq(header(&p, "Content-Type"),
	    problem ? "application/problem+json" : "application/json");
	ck_assert_str_eq(header(&p, "Cache-Control"), "no-store");
	ck_assert_int_eq(header_int(&p, "Content-Length"), strlen(get_body));
	if (sc->head)
		ck_assert_uint_eq(p.body_len, 0);
	else
		ck_assert_uint_eq(p.body_len, strlen(get_body));
	ck_assert(json_valid(get_body));
	if (problem)
		ck_assert_str_eq(get_body, sc->problem);
	else
		ck_assert_str_eq(get_body, expect[sc->outcome].json);

	/* No rate-limit header but the ones the style asks for. */
	for (i = 0; i < p.nh; i++) {
		const char *n = p.name[i];

		if (strncmp(n, "RateLimit-Limit", 15) == 0 ||
		    strncmp(n, "RateLimit-Remaining", 19) == 0 ||
		    strncmp(n, "RateLimit-Reset", 15) == 0)
			ck_assert_msg(want_draft03, "%s", n);
		else if (strncmp(n, "X-RateLimit", 11) == 0)
			ck_assert_msg(want_x, "%s", n);
		else if (strncmp(n, "RateLimit", 9) == 0)
			ck_assert_msg(want_ietf, "%s", n);
	}
	if (want_draft03) {
		const struct rlg_decision *d = &sc->d[sc->pick];

		ck_assert_int_eq(header_int(&p, "RateLimit-Limit"), d->limit);
		ck_assert_int_eq(header_int(&p, "RateLimit-Remaining"),
		    d->remaining);
		ck_assert_int_eq(header_int(&p, "RateLimit-Reset"),
		    rlg_response_seconds(d->reset_ms));
		if (header_int(&p, "RateLimit-Reset") > max_t)
			max_t = header_int(&p, "RateLimit-Reset");
	}
	if (want_x) {
		const struct rlg_decision *d = &sc->d[sc->pick];

		ck_assert_int_eq(header_int(&p, "X-RateLimit-Limit"), d->limit);
		ck_assert_int_eq(header_int(&p, "X-RateLimit-Remaining"),
		    d->remaining);
		ck_assert_int_eq(header_int(&p, "X-RateLimit-Reset"),
		    rlg_response_seconds(d->reset_ms));
		if (header_int(&p, "X-RateLimit-Reset") > max_t)
			max_t = header_int(&p, "X-RateLimit-Reset");
	}
	if (want_ietf) {
		int64_t t;

		check_ietf(&p, &a, &t);
		if (t > max_t)
			max_t = t;
	}

	if (sc->retry_after > 0) {
		retry = header_int(&p, "Retry-After");
		ck_assert_int_eq(retry, sc->retry_after);
		if (sc->outcome == RLG_OUT_REJECTED)
			ck_assert_int_ge(retry, max_t);
	} else {
		ck_assert_ptr_null(header(&p, "Retry-After"));
	}
	if (sc->outcome == RLG_OUT_BAD_METHOD)
		ck_assert_str_eq(header(&p, "Allow"), "GET, HEAD");
	else
		ck_assert_ptr_null(header(&p, "Allow"));
}

/* ---- a tiny JSON (RFC 8259) well-formedness checker -------------------- */

static const char *
json_ws(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return s;
}

static const char *
json_string(const char *s)
{
	int i;

	if (*s++ != '"')
		return NULL;
	for (;;) {
		unsigned char c = (unsigned char)*s++;

		if (c == '"')
			return s;
		if (c < 0x20)              /* NUL (the end) included */
			return NULL;
		if (c != '\\')
			continue;
		c = (unsigned char)*s++;
		if (c == 'u') {
			for (i = 0; i < 4; i++, s++)
				if (*s == '\0' ||
				    strchr("0123456789abcdefABCDEF", *s) == NULL)
					return NULL;
		} else if (c == '\0' || strchr("\"\\/bfnrt", c) == NULL) {
			return NULL;
		}
	}
}

/* One value; returns the rest of s, or NULL. */
static const char *
json_value(const char *s, int depth)
{
	if (depth > 16)
		return NULL;
	s = json_ws(s);
	if (*s == '{' || *s == '[') {
		char close = *s == '{' ? '}' : ']';
		bool object = *s == '{';

		s = json_ws(s + 1);
		if (*s == close)
			return s + 1;
		for (;;) {
			if (object) {
				if ((s = json_string(json_ws(s))) == NULL)
					return NULL;
				s = json_ws(s);
				if (*s++ != ':')
					return NULL;
			}
			if ((s = json_value(s, depth + 1)) == NULL)
				return NULL;
			s = json_ws(s);
			if (*s == close)
				return s + 1;
			if (*s++ != ',')
				return NULL;
		}
	}
	if (*s == '"')
		return json_string(s);
	if (strncmp(s, "true", 4) == 0 || strncmp(s, "null", 4) == 0)
		return s + 4;
	if (strncmp(s, "false", 5) == 0)
		return s + 5;
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return NULL;
	if (*s == '.') {
		if (*++s < '0' || *s > '9')
			return NULL;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		if (*++s == '+' || *s == '-')
			s++;
		if (*s < '0' || *s > '9')
			return NULL;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return s;
}

static bool
json_valid(const char *s)
{
	s = json_value(s, 0);
	return s != NULL && *json_ws(s) == '\0';
}

/* ---- core: the exact bytes ---------------------------------------------- */

START_TEST(test_200)
{
	struct rlg_decision d = { true, 5, 4, 45000, 0, 45000, false };
	struct rlg_answer a = draft03(RLG_OUT_ADMITTED, &d, false);

	ck_assert_str_eq(answer(&a),
	    "Status: 200 OK\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 5\r\n"
	    "RateLimit-Remaining: 4\r\n"
	    "RateLimit-Reset: 45\r\n"
	    "Content-Length: 71\r\n"
	    "\r\n"
	    "{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}");
}
END_TEST

/*
 * The FastCGI Authorizer's yes: Status first, the style's headers (Apache
 * passes them to the client), then as Variable-Rlgate-* (lighttpd's
 * mod_magnet script) and the trio as Variable-RateLimit-* (the backend's
 * environment); no body.
 */
START_TEST(test_authorized)
{
	struct rlg_decision d = { true, 5, 4, 45000, 0, 45000, false };
	struct rlg_answer a = draft03(RLG_OUT_AUTHORIZED, &d, false);

	a.role = RLG_ROLE_AUTHORIZER;
	ck_assert_str_eq(answer(&a),
	    "Status: 200 OK\r\n"
	    "RateLimit-Limit: 5\r\n"
	    "RateLimit-Remaining: 4\r\n"
	    "RateLimit-Reset: 45\r\n"
	    "Variable-Rlgate-RateLimit-Limit: 5\r\n"
	    "Variable-Rlgate-RateLimit-Remaining: 4\r\n"
	    "Variable-Rlgate-RateLimit-Reset: 45\r\n"
	    "Variable-RateLimit-Limit: 5\r\n"
	    "Variable-RateLimit-Remaining: 4\r\n"
	    "Variable-RateLimit-Reset: 45\r\n"
	    "\r\n");
	a.style = RLG_STYLE_NONE;
	ck_assert_str_eq(answer(&a), "Status: 200 OK\r\n\r\n");
	a.style = RLG_STYLE_DRAFT03;
	a.decisions = NULL;
	a.n = 0;
	ck_assert_str_eq(answer(&a), "Status: 200 OK\r\n\r\n");
	/* The rejected answer of an authorizer is the 429 itself. */
	d.admitted = false;
	d.remaining = 0;
	d.retry_ms = 3000;
	a = draft03(RLG_OUT_REJECTED, &d, false);
	a.role = RLG_ROLE_AUTHORIZER;
	ck_assert(strncmp(answer(&a), "Status: 429 Too Many Requests\r\n",
	    31) == 0);
}
END_TEST

/* The ietf headers of an authorizer's yes, as Variable-Rlgate-* too. */
START_TEST(test_authorized_ietf)
{
	struct rlg_policy one = { .name = "api" };
	struct rlg_decision d = { true, 5, 4, 45000, 0, 45000, false };
	struct rlg_answer a = { RLG_OUT_AUTHORIZED, false, RLG_STYLE_IETF,
	    RLG_ERRORS_JSON, &one, &d, 1, RLG_ROLE_AUTHORIZER, 0, 0 };

	one.lim.limit = 5;
	one.lim.window_ms = 60000;
	ck_assert_str_eq(answer(&a),
	    "Status: 200 OK\r\n"
	    "RateLimit-Policy: \"api\";q=5;w=60\r\n"
	    "RateLimit: \"api\";r=4;t=45\r\n"
	    "Variable-Rlgate-RateLimit-Policy: \"api\";q=5;w=60\r\n"
	    "Variable-Rlgate-RateLimit: \"api\";r=4;t=45\r\n"
	    "Variable-RateLimit-Limit: 5\r\n"
	    "Variable-RateLimit-Remaining: 4\r\n"
	    "Variable-RateLimit-Reset: 45\r\n"
	    "\r\n");
}
END_TEST

/*
 * nginx's auth_request and Caddy's forward_auth: the yes is a 200 with the
 * style's headers and no body; nginx's no is a 403 carrying the real
 * answer in X-Rlgate-* headers, Caddy's the real answer.
 */
START_TEST(test_auth_request_roles)
{
	struct rlg_decision d = { true, 5, 4, 45000, 0, 45000, false };
	struct rlg_answer a = draft03(RLG_OUT_AUTHORIZED, &d, false);
	const char *yes =
	    "Status: 200 OK\r\n"
	    "RateLimit-Limit: 5\r\n"
	    "RateLimit-Remaining: 4\r\n"
	    "RateLimit-Reset: 45\r\n"
	    "\r\n";
	struct parsed p;

	a.role = RLG_ROLE_AUTH_REQUEST;
	ck_assert_str_eq(answer(&a), yes);
	a.role = RLG_ROLE_FORWARD_AUTH;
	ck_assert_str_eq(answer(&a), yes);

	d = (struct rlg_decision){ false, 5, 0, 11200, 11200, 11200, false };
	a = draft03(RLG_OUT_REJECTED, &d, false);
	a.role = RLG_ROLE_AUTH_REQUEST;
	ck_assert_str_eq(answer(&a),
	    "Status: 403 Forbidden\r\n"
	    "X-Rlgate-Status: 429\r\n"
	    "X-Rlgate-Type: json\r\n"
	    "RateLimit-Limit: 5\r\n"
	    "RateLimit-Remaining: 0\r\n"
	    "RateLimit-Reset: 12\r\n"
	    "Retry-After: 12\r\n"
	    "X-Rlgate-Body: {\"error\":{\"code\":429,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}\r\n"
	    "Content-Length: 0\r\n"
	    "\r\n");
	/* HEAD changes nothing: nginx sends or drops the body itself. */
	a.head = true;
	parse_answer(answer(&a), &p);
	ck_assert_int_eq(p.status, 403);
	ck_assert(strstr(header(&p, "X-Rlgate-Body"), "429") != NULL);
	a.head = false;
	a.errors = RLG_ERRORS_PROBLEM;
	parse_answer(answer(&a), &p);
	ck_assert_str_eq(header(&p, "X-Rlgate-Type"), "problem");
	ck_assert(json_valid(header(&p, "X-Rlgate-Body")));
	ck_assert(strstr(header(&p, "X-Rlgate-Body"), "quota-exceeded") !=
	    NULL);
	/* The store down (on_error = closed): 503 and its Retry-After. */
	a = draft03(RLG_OUT_STORE_DOWN, NULL, false);
	a.role = RLG_ROLE_AUTH_REQUEST;
	parse_answer(answer(&a), &p);
	ck_assert_int_eq(p.status, 403);
	ck_assert_str_eq(header(&p, "X-Rlgate-Status"), "503");
	ck_assert_str_eq(header(&p, "Retry-After"), "1");
	ck_assert(json_valid(header(&p, "X-Rlgate-Body")));
	/* Caddy's and Traefik's no is the answer the client gets. */
	a.role = RLG_ROLE_FORWARD_AUTH;
	parse_answer(answer(&a), &p);
	ck_assert_int_eq(p.status, 503);
	ck_assert(header(&p, "X-Rlgate-Status") == NULL);
	ck_assert_str_eq(header(&p, "Retry-After"), "1");
	a = draft03(RLG_OUT_MISCONFIGURED, NULL, false);
	parse_answer(answer(&a), &p);
	ck_assert_int_eq(p.status, 500);
	ck_assert_int_eq(rlg_response_code(RLG_OUT_MISCONFIGURED), 500);
	a.role = (enum rlg_role)(RLG_ROLE_OTHER + 1);
	ck_assert_int_eq(rlg_response_format(&a, (char[64]){ 0 }, 64),
	    RLG_EINVAL);
}
END_TEST

/*
 * [response] status: a refusal with another registered code keeps its
 * headers and Retry-After; the status line, the body's code and the
 * problem's status say the code; nginx is told it in X-Rlgate-Status.
 * A code rlgate may not send fails the answer.
 */
START_TEST(test_reject_status)
{
	struct rlg_decision d = { false, 5, 0, 11200, 11200, 11200, false };
	struct rlg_answer a = draft03(RLG_OUT_REJECTED, &d, false);
	struct parsed p;

	a.status = 503;
	ck_assert_str_eq(answer(&a),
	    "Status: 503 Service Unavailable\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 5\r\n"
	    "RateLimit-Remaining: 0\r\n"
	    "RateLimit-Reset: 12\r\n"
	    "Retry-After: 12\r\n"
	    "Content-Length: 74\r\n"
	    "\r\n"
	    "{\"error\":{\"code\":503,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}");
	ck_assert_int_eq(rlg_response_answer_code(&a), 503);
	a.errors = RLG_ERRORS_PROBLEM;
	a.status = 403;
	parse_answer(answer(&a), &p);
	ck_assert_int_eq(p.status, 403);
	ck_assert(strstr(p.body, "\"status\":403") != NULL);
	ck_assert(strstr(p.body, "quota-exceeded") != NULL);
	ck_assert(json_valid(p.body));
	ck_assert_str_eq(header(&p, "Retry-After"), "12");
	a.role = RLG_ROLE_AUTH_REQUEST;
	parse_answer(answer(&a), &p);
	ck_assert_int_eq(p.status, 403);
	ck_assert_str_eq(header(&p, "X-Rlgate-Status"), "403");
	/* only a refusal's code changes */
	a = draft03(RLG_OUT_STORE_DOWN, NULL, false);
	a.status = 403;
	ck_assert_int_eq(rlg_response_answer_code(&a), 503);
	a = draft03(RLG_OUT_REJECTED, &d, false);
	a.status = 429;
	ck_assert_int_eq(rlg_response_answer_code(&a), 429);
	a.status = 420;
	ck_assert_int_eq(rlg_response_format(&a, (char[64]){ 0 }, 64),
	    RLG_EINVAL);
	a.status = 299;
	ck_assert_int_eq(rlg_response_format(&a, (char[64]){ 0 }, 64),
	    RLG_EINVAL);
}
END_TEST

START_TEST(test_429)
{
	struct rlg_decision d = { false, 5, 0, 11200, 11200, 11200, false };
	struct rlg_answer a = draft03(RLG_OUT_REJECTED, &d, false);

	ck_assert_str_eq(answer(&a),
	    "Status: 429 Too Many Requests\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 5\r\n"
	    "RateLimit-Remaining: 0\r\n"
	    "RateLimit-Reset: 12\r\n"
	    "Retry-After: 12\r\n"
	    "Content-Length: 74\r\n"
	    "\r\n"
	    "{\"error\":{\"code\":429,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}");
}
END_TEST

/*
 * A refused request of cost 5 with 2 units left (limiter.h: the decision
 * keeps them): every style shows 0 remaining for the policies that
 * refused (DESIGN.md: a 429 carries RateLimit-Remaining: 0), and the
 * decision itself is not changed; a policy that admitted is left out of
 * the ietf field of a 429, as ever. Admitted, the units show as they are.
 */
START_TEST(test_429_costly_shows_zero)
{
	const struct rlg_decision d[3] = {
		{ true, 10, 9, 800, 0, 800, false },
		{ false, 100, 2, 30000, 30000, 30000, false },
		{ false, 1000, 3, 12500, 12500, 12500, false },
	};
	struct rlg_answer a = { RLG_OUT_REJECTED, false, RLG_STYLE_ALL,
	    RLG_ERRORS_JSON, pol, d, 3, RLG_ROLE_RESPONDER, 0, 0 };
	struct rlg_answer one = draft03(RLG_OUT_REJECTED, &d[1], false);

	ck_assert_str_eq(answer(&a),
	    "Status: 429 Too Many Requests\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 100\r\n"
	    "RateLimit-Remaining: 0\r\n"
	    "RateLimit-Reset: 30\r\n"
	    "RateLimit-Policy: \"per-second\";q=10;w=1, "
	    "\"per.minute\";q=100;w=60, "
	    "\"burst_bucket\";q=1000;w=3600;rlgate-burst=50\r\n"
	    "RateLimit: \"per.minute\";r=0;t=30, \"burst_bucket\";r=0;t=13\r\n"
	    "X-RateLimit-Limit: 100\r\n"
	    "X-RateLimit-Remaining: 0\r\n"
	    "X-RateLimit-Reset: 30\r\n"
	    "Retry-After: 30\r\n"
	    "Content-Length: 74\r\n"
	    "\r\n"
	    "{\"error\":{\"code\":429,\"message\":\"Too Many Requests. "
	    "Rate limit exceeded.\"}}");
	ck_assert_int_eq(d[1].remaining, 2);
	ck_assert_ptr_nonnull(strstr(answer(&one),
	    "\r\nRateLimit-Remaining: 0\r\n"));
	/* The same units, admitted: shown as they are. */
	one = draft03(RLG_OUT_ADMITTED, &d[0], false);
	ck_assert_ptr_nonnull(strstr(answer(&one),
	    "\r\nRateLimit-Remaining: 9\r\n"));
}
END_TEST

START_TEST(test_all_200_exact)
{
	struct rlg_answer a = { RLG_OUT_ADMITTED, false, RLG_STYLE_ALL,
	    RLG_ERRORS_PROBLEM, pol, d_ok, 3, RLG_ROLE_RESPONDER, 0, 0 };

	ck_assert_str_eq(answer(&a),
	    "Status: 200 OK\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 100\r\n"
	    "RateLimit-Remaining: 3\r\n"
	    "RateLimit-Reset: 45\r\n"
	    "RateLimit-Policy: \"per-second\";q=10;w=1, "
	    "\"per.minute\";q=100;w=60, "
	    "\"burst_bucket\";q=1000;w=3600;rlgate-burst=50\r\n"
	    "RateLimit: \"per-second\";r=9;t=1, \"per.minute\";r=3;t=2, "
	    "\"burst_bucket\";r=3;t=4\r\n"
	    "X-RateLimit-Limit: 100\r\n"
	    "X-RateLimit-Remaining: 3\r\n"
	    "X-RateLimit-Reset: 45\r\n"
	    "Content-Length: 71\r\n"
	    "\r\n"
	    "{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}");
}
END_TEST

START_TEST(test_all_429_exact)
{
	struct rlg_answer a = { RLG_OUT_REJECTED, false, RLG_STYLE_ALL,
	    RLG_ERRORS_PROBLEM, pol, d_429, 3, RLG_ROLE_RESPONDER, 0, 0 };

	ck_assert_str_eq(answer(&a),
	    "Status: 429 Too Many Requests\r\n"
	    "Content-Type: application/problem+json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 1000\r\n"
	    "RateLimit-Remaining: 0\r\n"
	    "RateLimit-Reset: 13\r\n"
	    "RateLimit-Policy: \"per-second\";q=10;w=1, "
	    "\"per.minute\";q=100;w=60, "
	    "\"burst_bucket\";q=1000;w=3600;rlgate-burst=50\r\n"
	    "RateLimit: \"per-second\";r=0;t=1, \"burst_bucket\";r=0;t=13\r\n"
	    "X-RateLimit-Limit: 1000\r\n"
	    "X-RateLimit-Remaining: 0\r\n"
	    "X-RateLimit-Reset: 13\r\n"
	    "Retry-After: 13\r\n"
	    "Content-Length: 212\r\n"
	    "\r\n"
	    PROBLEM_429);
	ck_assert_uint_eq(strlen(PROBLEM_429), 212);
}
END_TEST

#define EXPECT_AUTHORIZED \
	"Status: 200 OK\r\n" \
	"RateLimit-Limit: 100\r\n" \
	"RateLimit-Remaining: 3\r\n" \
	"RateLimit-Reset: 45\r\n" \
	"RateLimit-Policy: \"per-second\";q=10;w=1, \"per.minute\";q=" \
	"100;w=60, \"burst_bucket\";q=1000;w=3600;rlgate-burst=50\r\n" \
	"RateLimit: \"per-second\";r=9;t=1, \"per.minute\";r=3;t=2, " \
	"\"burst_bucket\";r=3;t=4\r\n" \
	"X-RateLimit-Limit: 100\r\n" \
	"X-RateLimit-Remaining: 3\r\n" \
	"X-RateLimit-Reset: 45\r\n" \
	"X-Rlgate-Delay: 1.075\r\n" \
	"Variable-Rlgate-RateLimit-Limit: 100\r\n" \
	"Variable-Rlgate-RateLimit-Remaining: 3\r\n" \
	"Variable-Rlgate-RateLimit-Reset: 45\r\n" \
	"Variable-Rlgate-RateLimit-Policy: \"per-second\";q=10;w=1, " \
	"\"per.minute\";q=100;w=60, \"burst_bucket\";q=1000;w=3600;rl" \
	"gate-burst=50\r\n" \
	"Variable-Rlgate-RateLimit: \"per-second\";r=9;t=1, \"per.min" \
	"ute\";r=3;t=2, \"burst_bucket\";r=3;t=4\r\n" \
	"Variable-Rlgate-X-RateLimit-Limit: 100\r\n" \
	"Variable-Rlgate-X-RateLimit-Remaining: 3\r\n" \
	"Variable-Rlgate-X-RateLimit-Reset: 45\r\n" \
	"Variable-RateLimit-Limit: 100\r\n" \
	"Variable-RateLimit-Remaining: 3\r\n" \
	"Variable-RateLimit-Reset: 45\r\n" \
	"\r\n"
#define EXPECT_AUTH_REQUEST_429 \
	"Status: 403 Forbidden\r\n" \
	"X-Rlgate-Status: 429\r\n" \
	"X-Rlgate-Type: problem\r\n" \
	"X-RateLimit-Limit: 1000\r\n" \
	"X-RateLimit-Remaining: 0\r\n" \
	"X-RateLimit-Reset: 13\r\n" \
	"Retry-After: 13\r\n" \
	"X-Rlgate-Body: {\"type\":\"https://iana.org/assignments/http" \
	"-problem-types#quota-exceeded\",\"title\":\"Quota Exceeded\"" \
	",\"status\":429,\"detail\":\"Too Many Requests. Rate limit e" \
	"xceeded.\",\"violated-policies\":[\"per-second\",\"burst_buc" \
	"ket\"]}\r\n" \
	"Content-Length: 0\r\n" \
	"\r\n"
#define EXPECT_AUTH_REQUEST_503 \
	"Status: 403 Forbidden\r\n" \
	"X-Rlgate-Status: 503\r\n" \
	"X-Rlgate-Type: problem\r\n" \
	"X-RateLimit-Limit: 1000\r\n" \
	"X-RateLimit-Remaining: 0\r\n" \
	"X-RateLimit-Reset: 13\r\n" \
	"Retry-After: 1\r\n" \
	"X-Rlgate-Body: {\"type\":\"about:blank\",\"title\":\"Service" \
	" Unavailable\",\"status\":503}\r\n" \
	"Content-Length: 0\r\n" \
	"\r\n"
#define EXPECT_REFUSED_503 \
	"Status: 503 Service Unavailable\r\n" \
	"Content-Type: application/json\r\n" \
	"Cache-Control: no-store\r\n" \
	"X-RateLimit-Limit: 1000\r\n" \
	"X-RateLimit-Remaining: 0\r\n" \
	"X-RateLimit-Reset: 13\r\n" \
	"Retry-After: 13\r\n" \
	"Content-Length: 74\r\n" \
	"\r\n" \
	"{\"error\":{\"code\":503,\"message\":\"Too Many Requests. Ra" \
	"te limit exceeded.\"}}"

/*
 * Every header name an answer can carry, byte for byte: the names are
 * made once (header_names in response.c), not put together per answer,
 * so a set that went wrong shows here. An authorizer's yes in every
 * style with a delay, and auth_request's 503 and 429 as problems.
 */
START_TEST(test_every_name_exact)
{
	struct rlg_answer a = { RLG_OUT_AUTHORIZED, false, RLG_STYLE_ALL,
	    RLG_ERRORS_PROBLEM, pol, d_ok, 3, RLG_ROLE_AUTHORIZER, 0, 1075 };

	ck_assert_str_eq(answer(&a), EXPECT_AUTHORIZED);
	a = (struct rlg_answer){ RLG_OUT_REJECTED, false, RLG_STYLE_X_RATELIMIT,
	    RLG_ERRORS_PROBLEM, pol, d_429, 3, RLG_ROLE_AUTH_REQUEST, 0, 0 };
	ck_assert_str_eq(answer(&a), EXPECT_AUTH_REQUEST_429);
	a.outcome = RLG_OUT_STORE_DOWN;
	ck_assert_str_eq(answer(&a), EXPECT_AUTH_REQUEST_503);
	a.errors = RLG_ERRORS_JSON;
	a.status = 503;
	a.outcome = RLG_OUT_REJECTED;
	a.role = RLG_ROLE_RESPONDER;
	ck_assert_str_eq(answer(&a), EXPECT_REFUSED_503);
}
END_TEST

/*
 * Numbers as printf writes them, on each side of every step of put_int's
 * two digits at a time: one and two digits, odd and even counts, the
 * largest a header carries.
 */
START_TEST(test_numbers_exact)
{
	static const int64_t v[] = { 0, 1, 9, 10, 11, 99, 100, 101, 999, 1000,
	    9999, 10000, 12345, 999999999, 1000000000, 4294967296LL,
	    INT64_MAX - 1, INT64_MAX };
	struct rlg_decision d = { true, 0, 0, 1000, 0, 1000, false };
	struct rlg_answer a;
	char want[64];
	size_t i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		d.limit = v[i];
		d.remaining = v[i];
		a = draft03(RLG_OUT_ADMITTED, &d, false);
		snprintf(want, sizeof want, "\r\nRateLimit-Limit: %lld\r\n"
		    "RateLimit-Remaining: %lld\r\n", (long long)v[i],
		    (long long)v[i]);
		ck_assert_msg(strstr(answer(&a), want) != NULL, "%lld: %s",
		    (long long)v[i], answer(&a));
	}
}
END_TEST

START_TEST(test_head_has_no_body)
{
	struct rlg_decision d = { true, 5, 3, 1000, 0, 1000, false };
	struct rlg_answer a = draft03(RLG_OUT_ADMITTED, &d, true);
	const char *out = answer(&a);

	ck_assert_ptr_nonnull(strstr(out, "Content-Length: 71\r\n\r\n"));
	ck_assert_str_eq(strstr(out, "\r\n\r\n"), "\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(out, "RateLimit-Reset: 1\r\n"));
}
END_TEST

START_TEST(test_errors)
{
	struct rlg_decision d = { true, 5, 2, 1000, 0, 1000, false };
	struct rlg_answer a = draft03(RLG_OUT_NOT_FOUND, &d, false);
	const char *out;

	out = answer(&a);
	ck_assert_ptr_nonnull(strstr(out, "Status: 404 Not Found\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "RateLimit-Remaining: 2\r\n"));
	ck_assert_str_eq(strstr(out, "\r\n\r\n") + 4,
	    "{\"error\":{\"code\":404,\"message\":\"Not Found.\"}}");

	a.outcome = RLG_OUT_BAD_METHOD;
	out = answer(&a);
	ck_assert_ptr_nonnull(strstr(out, "Status: 405 Method Not Allowed\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "Allow: GET, HEAD\r\n"));
	ck_assert_str_eq(strstr(out, "\r\n\r\n") + 4,
	    "{\"error\":{\"code\":405,\"message\":\"Method Not Allowed.\"}}");

	a.outcome = RLG_OUT_BAD_REQUEST;
	out = answer(&a);
	ck_assert_ptr_nonnull(strstr(out, "Status: 400 Bad Request\r\n"));

	a = draft03(RLG_OUT_STORE_DOWN, NULL, false);
	out = answer(&a);
	ck_assert_ptr_nonnull(strstr(out,
	    "Status: 503 Service Unavailable\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "Retry-After: 1\r\n"));
	ck_assert_ptr_null(strstr(out, "RateLimit-"));
	ck_assert_ptr_nonnull(strstr(out, "Content-Type: application/json\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "\"code\":503"));

	/* on_error = open passes without rate-limit headers. */
	a = draft03(RLG_OUT_ADMITTED, NULL, false);
	out = answer(&a);
	ck_assert_ptr_null(strstr(out, "RateLimit-"));
	ck_assert_ptr_nonnull(strstr(out, "Status: 200 OK\r\n"));
}
END_TEST

START_TEST(test_problem_bodies)
{
	struct rlg_answer a = { RLG_OUT_REJECTED, false, RLG_STYLE_NONE,
	    RLG_ERRORS_PROBLEM, pol, d_429, 3, RLG_ROLE_RESPONDER, 0, 0 };
	const char *out = answer(&a);

	/* style none: no rate-limit header, but Retry-After and the body. */
	ck_assert_str_eq(out,
	    "Status: 429 Too Many Requests\r\n"
	    "Content-Type: application/problem+json\r\n"
	    "Cache-Control: no-store\r\n"
	    "Retry-After: 13\r\n"
	    "Content-Length: 212\r\n"
	    "\r\n"
	    PROBLEM_429);

	/* A 200 keeps its JSON whatever the error format. */
	a.outcome = RLG_OUT_ADMITTED;
	a.decisions = d_ok;
	out = answer(&a);
	ck_assert_ptr_nonnull(strstr(out, "Content-Type: application/json\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "\"status\":\"success\""));

	/* A 429 that names no rejecting policy still reads as JSON. */
	a.outcome = RLG_OUT_REJECTED;
	a.decisions = NULL;
	a.n = 0;
	out = answer(&a);
	ck_assert_ptr_nonnull(strstr(out, "\"violated-policies\":[]}"));
	ck_assert(json_valid(strstr(out, "\r\n\r\n") + 4));
	ck_assert_ptr_nonnull(strstr(out, "Retry-After: 1\r\n"));
}
END_TEST

/* Every style x error format over every scenario. */
START_TEST(test_matrix)
{
	enum rlg_header_style style = (enum rlg_header_style)(_i / 2);
	enum rlg_error_format errors = (enum rlg_error_format)(_i % 2);
	size_t i;

	for (i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
		check_scenario(style, errors, &scenarios[i]);
}
END_TEST

/* ---- pick --------------------------------------------------------------- */

START_TEST(test_pick)
{
	const struct rlg_decision tie_reset[3] = {
		{ true, 10, 4, 9000, 0, 9000, false },
		{ true, 10, 2, 5000, 0, 5000, false },
		{ true, 10, 2, 3000, 0, 3000, false },
	};
	const struct rlg_decision tie_all[2] = {
		{ true, 10, 2, 3000, 0, 3000, false },
		{ true, 99, 2, 3000, 0, 3000, false },
	};
	const struct rlg_decision all_rejected[3] = {
		{ false, 10, 0, 500, 500, 500, false },
		{ false, 20, 0, 2000, 2000, 2000, false },
		{ false, 30, 0, 2000, 2000, 2000, false },
	};
	/* An admitted policy with less left or a later reset never wins. */
	const struct rlg_decision mixed[4] = {
		{ true, 100, 0, 99000, 0, 99000, false },
		{ false, 10, 0, 300, 300, 300, false },
		{ true, 5, 0, 1, 0, 1, false },
		{ false, 5, 0, 700, 700, 700, false },
	};

	ck_assert_int_eq(rlg_response_pick(NULL, 0), -1);
	ck_assert_int_eq(rlg_response_pick(NULL, 3), -1);
	ck_assert_int_eq(rlg_response_pick(tie_reset, 0), -1);
	ck_assert_int_eq(rlg_response_pick(tie_reset, 1), 0);
	ck_assert_int_eq(rlg_response_pick(tie_reset, 3), 2);
	ck_assert_int_eq(rlg_response_pick(tie_all, 2), 0);
	ck_assert_int_eq(rlg_response_pick(all_rejected, 3), 1);
	ck_assert_int_eq(rlg_response_pick(mixed, 4), 3);
	ck_assert_int_eq(rlg_response_pick(mixed, 2), 1);
	ck_assert_int_eq(rlg_response_pick(d_ok, 3), 1);
	ck_assert_int_eq(rlg_response_pick(d_429, 3), 2);
}
END_TEST

/* ---- the RFC 8941 parser the tests rely on ------------------------------ */

START_TEST(test_sf_parse_valid)
{
	static struct sf_item it[8];
	size_t n;

#define PARSE(s) sf_parse_list((s), strlen(s), it, 8, &n)
	ck_assert_int_eq(PARSE("sugar, tea, rum"), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(it[1].value.type, SF_TOKEN);
	ck_assert_str_eq(it[2].value.string, "rum");

	/* RFC 8941 3.1.2, without its Inner List. */
	ck_assert_int_eq(PARSE("abc;a=1;b=2; cde_456"), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(it[0].value.string, "abc");
	ck_assert_uint_eq(it[0].nparams, 3);
	ck_assert_int_eq(sf_param(&it[0], "b")->integer, 2);
	ck_assert_int_eq(sf_param(&it[0], "cde_456")->type, SF_BOOLEAN);
	ck_assert(sf_param(&it[0], "cde_456")->boolean);
	ck_assert_ptr_null(sf_param(&it[0], "c"));

	ck_assert_int_eq(PARSE("\"a \\\"q\\\" \\\\ b\";x=?0, -42, 0042,"
	    "\t999999999999999 ,*foo/bar:baz"), 0);
	ck_assert_uint_eq(n, 5);
	ck_assert_int_eq(it[0].value.type, SF_STRING);
	ck_assert_str_eq(it[0].value.string, "a \"q\" \\ b");
	ck_assert_int_eq(sf_param(&it[0], "x")->type, SF_BOOLEAN);
	ck_assert(!sf_param(&it[0], "x")->boolean);
	ck_assert_int_eq(it[1].value.integer, -42);
	ck_assert_int_eq(it[2].value.integer, 42);
	ck_assert_int_eq(it[3].value.integer, 999999999999999LL);
	ck_assert_str_eq(it[4].value.string, "*foo/bar:baz");

	/* The draft's own examples. */
	ck_assert_int_eq(PARSE("\"permin\";q=50;w=60,\"perhr\";q=1000;w=3600"),
	    0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(sf_param(&it[1], "q")->integer, 1000);
	ck_assert_int_eq(PARSE("\"default\";r=50;t=30"), 0);
	ck_assert_int_eq(sf_param(&it[0], "t")->integer, 30);

	/* A key seen twice: first position, last value. */
	ck_assert_int_eq(PARSE("a;b=1;c=2;b=3"), 0);
	ck_assert_uint_eq(it[0].nparams, 2);
	ck_assert_str_eq(it[0].params[0].key, "b");
	ck_assert_int_eq(it[0].params[0].value.integer, 3);

	/* Empty and all-space values are the empty List; SP around is fine. */
	ck_assert_int_eq(PARSE(""), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(PARSE("   "), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(PARSE("  a ,  b  "), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(PARSE("\"\""), 0);
	ck_assert_str_eq(it[0].value.string, "");
}
END_TEST

START_TEST(test_sf_parse_invalid)
{
	static const char *const bad[] = {
		"\"unterminated",
		"\"bad \\q escape\"",
		"\"trailing backslash\\",
		"\"tab\there\"",
		"\"\x7f\"",
		"\"caf\xc3\xa9\"",
		"1234567890123456",          /* 16 digits */
		"-",
		"--1",
		"a,",                        /* trailing comma */
		",a",
		"a,,b",
		"a b",
		"\"foo\"bar",
		"a;B=1",                     /* keys are lowercase */
		"a;1a=1",
		"a;",
		"a;b=",
		"a=1",
		"1;a=\"x",
		"\ta",                       /* only SP may lead */
		"a;b=(1 2)",
		"(a b)",                     /* Inner List: outside the subset */
		"1.5",                       /* Decimal: outside the subset */
		":cHJldGVuZA==:",            /* Byte Sequence: outside the subset */
		"?2",
		"@",
	};
	static struct sf_item it[8];
	size_t i, n;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(sf_parse_list(bad[i], strlen(bad[i]), it, 8, &n)
		    == -1, "accepted: %s", bad[i]);
	/* More members than room. */
	ck_assert_int_eq(sf_parse_list("a, b, c", 7, it, 2, &n), -1);
	/* A NUL inside the value is no valid byte. */
	ck_assert_int_eq(sf_parse_list("a\0b", 3, it, 8, &n), -1);
#undef PARSE
}
END_TEST

START_TEST(test_json_checker)
{
	ck_assert(json_valid("{}"));
	ck_assert(json_valid("{\"a\":[1,-2.5e3,\"x\\u00e9\\n\",true,null,{}]}"));
	ck_assert(json_valid(PROBLEM_429));
	ck_assert(!json_valid("{\"a\":1,}"));
	ck_assert(!json_valid("{\"a\" 1}"));
	ck_assert(!json_valid("[\"a\nb\"]"));
	ck_assert(!json_valid("[\"\\x\"]"));
	ck_assert(!json_valid("[01]"));
	ck_assert(!json_valid("{\"a\":1}x"));
	ck_assert(!json_valid("{\"a\":\"b}"));
}
END_TEST

/* ---- limits ------------------------------------------------------------- */

START_TEST(test_seconds_rounding)
{
	ck_assert_int_eq(rlg_response_seconds(0), 1);
	ck_assert_int_eq(rlg_response_seconds(-5), 1);
	ck_assert_int_eq(rlg_response_seconds(1), 1);
	ck_assert_int_eq(rlg_response_seconds(999), 1);
	ck_assert_int_eq(rlg_response_seconds(1000), 1);
	ck_assert_int_eq(rlg_response_seconds(1001), 2);
	ck_assert_int_eq(rlg_response_seconds(60000), 60);
	ck_assert_int_eq(rlg_response_seconds(31622400000LL), 31622400);
}
END_TEST

/*
 * A huge duration never becomes a huge header: at most 2^31 seconds, the
 * value RFC 9111 (1.2.2) tells a recipient to read any larger
 * delta-seconds as. 2^63 - 1 ms was sent as 9223372036854776.
 */
START_TEST(test_seconds_cap)
{
	ck_assert_int_eq(rlg_response_seconds(INT64_MAX), 2147483648LL);
	ck_assert_int_eq(rlg_response_seconds(INT64_MAX - 999), 2147483648LL);
	ck_assert_int_eq(rlg_response_seconds(2147483648000LL), 2147483648LL);
	ck_assert_int_eq(rlg_response_seconds(2147483648001LL), 2147483648LL);
	ck_assert_int_eq(rlg_response_seconds(2147483647000LL), 2147483647LL);
	ck_assert_int_eq(rlg_response_seconds(2147483646001LL), 2147483647LL);
	ck_assert_int_eq(rlg_response_seconds(INT64_MIN), 1);
}
END_TEST

START_TEST(test_retry_never_below_one)
{
	struct rlg_decision d = { false, 1, 0, 1, 1, 1, false };
	struct rlg_answer a = draft03(RLG_OUT_REJECTED, &d, false);
	const char *out = answer(&a);

	ck_assert_ptr_nonnull(strstr(out, "Retry-After: 1\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "RateLimit-Reset: 1\r\n"));
}
END_TEST

/*
 * Even a decision breaking reset_ms == next_ms == retry_ms leaves no
 * delay after Retry-After: a later reset (RateLimit-Reset), then a later
 * next_ms (t).
 */
START_TEST(test_retry_covers_every_reset)
{
	struct rlg_decision d[2] = {
		{ false, 10, 0, 9000, 2000, 2000, false },
		{ false, 10, 0, 4000, 4000, 4000, false },
	};
	struct rlg_answer a = { RLG_OUT_REJECTED, false, RLG_STYLE_ALL,
	    RLG_ERRORS_JSON, pol, d, 2, RLG_ROLE_RESPONDER, 0, 0 };
	const char *out = answer(&a);

	ck_assert_ptr_nonnull(strstr(out, "Retry-After: 9\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "RateLimit-Reset: 4\r\n"));
	ck_assert_ptr_nonnull(strstr(out,
	    "RateLimit: \"per-second\";r=0;t=2, \"per.minute\";r=0;t=4\r\n"));
	d[1].next_ms = 9500;
	out = answer(&a);
	ck_assert_ptr_nonnull(strstr(out, "Retry-After: 10\r\n"));
	ck_assert_ptr_nonnull(strstr(out,
	    "RateLimit: \"per-second\";r=0;t=2, \"per.minute\";r=0;t=10\r\n"));
}
END_TEST

/*
 * Retry-After and the Reset headers beside it, where they say the same
 * (Retry-After's digits are copied from the Reset's then: response.c,
 * put_after), from the same ms or not, and where they differ: the picked policy's Reset is earlier
 * than another rejecting policy's (a later reset, a longer number); in
 * every style, the copy from the last trio written (X-RateLimit-), none
 * without one (ietf, none), and auth_request's form.
 */
START_TEST(test_retry_after_beside_reset)
{
	static const struct {
		struct rlg_decision d[2];
		size_t n;
		const char *reset, *retry;
	} cases[] = {
		{ { { false, 1, 0, 3599001, 3599001, 3599001, false } }, 1,
		    "3600", "3600" },
		{ { { false, 10, 0, 3500, 3100, 3100, false } }, 1, "4", "4" },
		{ { { false, 10, 0, 3600, 1000, 1000, false },
		    { false, 10, 0, 3200, 3200, 3200, false } }, 2, "4", "4" },
		{ { { false, 10, 0, 9000, 2000, 2000, false },
		    { false, 10, 0, 4000, 4000, 4000, false } }, 2, "4", "9" },
		{ { { false, 10, 0, 10000, 1000, 1000, false },
		    { false, 10, 0, 9000, 9000, 9000, false } }, 2, "9", "10" },
		{ { { false, 10, 0, 99999, 1000, 1000, false },
		    { false, 10, 0, 99001, 99001, 99001, false } }, 2, "100",
		    "100" },
	};
	static const enum rlg_header_style styles[] = { RLG_STYLE_DRAFT03,
	    RLG_STYLE_X_RATELIMIT, RLG_STYLE_ALL, RLG_STYLE_IETF,
	    RLG_STYLE_NONE };
	static const enum rlg_role roles[] = { RLG_ROLE_RESPONDER,
	    RLG_ROLE_AUTH_REQUEST };
	struct rlg_answer a;
	struct parsed p;
	size_t i, j, k;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (j = 0; j < sizeof styles / sizeof styles[0]; j++)
			for (k = 0; k < 2; k++) {
				a = (struct rlg_answer){ RLG_OUT_REJECTED,
				    false, styles[j], RLG_ERRORS_JSON, pol,
				    cases[i].d, cases[i].n, roles[k], 0, 0 };
				parse_answer(answer(&a), &p);
				ck_assert_str_eq(header(&p, "Retry-After"),
				    cases[i].retry);
				if (styles[j] == RLG_STYLE_DRAFT03 ||
				    styles[j] == RLG_STYLE_ALL)
					ck_assert_str_eq(header(&p,
					    "RateLimit-Reset"), cases[i].reset);
				if (styles[j] == RLG_STYLE_X_RATELIMIT ||
				    styles[j] == RLG_STYLE_ALL)
					ck_assert_str_eq(header(&p,
					    "X-RateLimit-Reset"),
					    cases[i].reset);
			}
	a = (struct rlg_answer){ RLG_OUT_REJECTED, false, RLG_STYLE_DRAFT03,
	    RLG_ERRORS_JSON, pol, cases[4].d, 2, RLG_ROLE_RESPONDER, 0, 0 };
	ck_assert_str_eq(answer(&a),
	    "Status: 429 Too Many Requests\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 10\r\n"
	    "RateLimit-Remaining: 0\r\n"
	    "RateLimit-Reset: 9\r\n"
	    "Retry-After: 10\r\n"
	    "Content-Length: 74\r\n"
	    "\r\n"
	    "{\"error\":{\"code\":429,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}");
	a.decisions = cases[0].d;
	a.n = 1;
	a.style = RLG_STYLE_X_RATELIMIT;
	ck_assert_str_eq(answer(&a),
	    "Status: 429 Too Many Requests\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "X-RateLimit-Limit: 1\r\n"
	    "X-RateLimit-Remaining: 0\r\n"
	    "X-RateLimit-Reset: 3600\r\n"
	    "Retry-After: 3600\r\n"
	    "Content-Length: 74\r\n"
	    "\r\n"
	    "{\"error\":{\"code\":429,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}");
}
END_TEST

/* 32 policies, 64-byte names, the largest values: style all fits. */
START_TEST(test_32_policies_fit)
{
	static char names[NAMES_MAX][RLG_POLICY_NAME_MAX + 1];
	static struct rlg_policy many[NAMES_MAX];
	static struct rlg_decision dec[NAMES_MAX];
	static char buf[RLG_RESPONSE_MAX];
	static struct parsed p;
	struct rlg_answer a = { RLG_OUT_REJECTED, false, RLG_STYLE_ALL,
	    RLG_ERRORS_PROBLEM, many, dec, NAMES_MAX, RLG_ROLE_RESPONDER, 0, 0 };
	int64_t window_ms = RLG_WINDOW_S_MAX * 1000, t;
	char prefix[16];
	size_t i;
	int n, rejected;

	for (i = 0; i < NAMES_MAX; i++) {
		memset(names[i], 'x', RLG_POLICY_NAME_MAX);
		names[i][RLG_POLICY_NAME_MAX] = '\0';
		snprintf(prefix, sizeof prefix, "p%02zu.-_Z", i);
		memcpy(names[i], prefix, strlen(prefix));
		many[i] = (struct rlg_policy){ names[i], { RLG_ALG_TOKEN_BUCKET,
		    RLG_LIMIT_MAX, window_ms, RLG_BURST_MAX, 0, 0 }, RLG_KEY_IP, NULL, RLG_MODE_ENFORCE, NULL, 0, 0, NULL, false, 0 };
	}
	for (rejected = 0; rejected <= 1; rejected++) {
		for (i = 0; i < NAMES_MAX; i++)
			dec[i] = rejected ?
			    (struct rlg_decision){ false, RLG_LIMIT_MAX, 0,
			    window_ms - 1, window_ms - 1, window_ms - 1, false } :
			    (struct rlg_decision){ true, RLG_LIMIT_MAX,
			    RLG_LIMIT_MAX - 1, window_ms, 0, window_ms, false };
		a.outcome = rejected ? RLG_OUT_REJECTED : RLG_OUT_ADMITTED;
		n = rlg_response_format(&a, buf, sizeof buf);
		ck_assert_int_gt(n, 0);
		ck_assert_int_lt(n, RLG_RESPONSE_MAX);
		parse_answer(answer(&a), &p);
		check_ietf(&p, &a, &t);
		ck_assert_int_eq(t, RLG_WINDOW_S_MAX);
		ck_assert_int_eq(header_int(&p, "Content-Length"),
		    p.body_len);
		ck_assert(json_valid(p.body));
	}
}
END_TEST

/* One byte short fails whole (every length up to it), one more fits. */
START_TEST(test_small_buffer_and_failing_writer)
{
	static char full[RLG_RESPONSE_MAX], small[RLG_RESPONSE_MAX];
	struct rlg_answer a = { RLG_OUT_REJECTED, false, RLG_STYLE_ALL,
	    RLG_ERRORS_PROBLEM, pol, d_429, 3, RLG_ROLE_RESPONDER, 0, 0 };
	int n, len;

	n = rlg_response_format(&a, full, sizeof full);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(rlg_response_format(&a, small, 0), RLG_ENOSPC);
	for (len = 1; len <= n; len++) {
		memset(small, 'x', sizeof small);
		ck_assert_int_eq(rlg_response_format(&a, small, (size_t)len),
		    RLG_ENOSPC);
		ck_assert_str_eq(small, "");
	}
	ck_assert_int_eq(rlg_response_format(&a, small, (size_t)n + 1), n);
	ck_assert_str_eq(small, full);

	ck_assert_int_eq(send_cgi(&a, failing_write, NULL), -5);
	a.outcome = (enum rlg_outcome)99;
	ck_assert_int_eq(rlg_response_format(&a, small, sizeof small),
	    RLG_EINVAL);
	a.outcome = RLG_OUT_ADMITTED;
	a.style = (enum rlg_header_style)99;
	ck_assert_int_eq(rlg_response_format(&a, small, sizeof small),
	    RLG_EINVAL);
	a.style = RLG_STYLE_DRAFT03;
	a.errors = (enum rlg_error_format)99;
	ck_assert_int_eq(rlg_response_format(&a, small, sizeof small),
	    RLG_EINVAL);
	a.errors = RLG_ERRORS_JSON;
	a.policies = NULL;            /* decisions without their policies */
	ck_assert_int_eq(rlg_response_format(&a, small, sizeof small),
	    RLG_EINVAL);
	ck_assert_str_eq(small, "");
}
END_TEST

/*
 * Names never come from the request, but one a header cannot carry
 * verbatim fails the answer, and quotes are escaped both ways.
 */
START_TEST(test_names_escaped)
{
	struct rlg_policy odd[2] = {
		{ "in\"ner\\q", { RLG_ALG_FIXED_WINDOW, 10, 1000, 0, 0, 0 }, RLG_KEY_IP, NULL, RLG_MODE_ENFORCE, NULL, 0, 0, NULL, false, 0 },
		{ "a\r\nX-Injected: 1", { RLG_ALG_FIXED_WINDOW, 10, 1000, 0, 0, 0 },
		    RLG_KEY_IP, NULL, RLG_MODE_ENFORCE, NULL, 0, 0, NULL, false, 0 },
	};
	const struct rlg_decision d[2] = {
		{ false, 10, 0, 900, 900, 900, false },
		{ false, 10, 0, 900, 900, 900, false },
	};
	static struct sf_item it[4];
	static struct parsed p;
	struct rlg_answer a = { RLG_OUT_REJECTED, false, RLG_STYLE_IETF,
	    RLG_ERRORS_PROBLEM, odd, d, 1, RLG_ROLE_RESPONDER, 0, 0 };
	struct sink s;
	const char *f;
	size_t n;

	/* '"' and '\' go out escaped and read back as they were. */
	parse_answer(answer(&a), &p);
	f = header(&p, "RateLimit-Policy");
	ck_assert_str_eq(f, "\"in\\\"ner\\\\q\";q=10;w=1");
	ck_assert_int_eq(sf_parse_list(f, strlen(f), it, 4, &n), 0);
	ck_assert_str_eq(it[0].value.string, "in\"ner\\q");
	ck_assert_ptr_nonnull(strstr(p.body,
	    "\"violated-policies\":[\"in\\\"ner\\\\q\"]}"));
	ck_assert(json_valid(p.body));

	/* CR LF in a name: no header style may send it, nothing is written. */
	a.n = 2;
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(send_cgi(&a, sink_write, &s), RLG_EINVAL);
	ck_assert_int_eq(s.calls, 0);
	a.style = RLG_STYLE_ALL;
	ck_assert_int_eq(send_cgi(&a, sink_write, &s), RLG_EINVAL);

	/* Styles without names send it; the body escapes it as JSON. */
	a.style = RLG_STYLE_X_RATELIMIT;
	parse_answer(answer(&a), &p);
	ck_assert_ptr_null(header(&p, "X-Injected"));
	ck_assert_ptr_nonnull(strstr(p.body,
	    "\"a\\u000d\\u000aX-Injected: 1\"]}"));
	ck_assert(json_valid(p.body));
}
END_TEST

/*
 * The fronts: the CGI-shaped adapter reads "NAME=value" strings (a header
 * that came twice says so), the CGI renderer frames a reply in the room
 * before its headers (one write), or writes a body kept apart second,
 * and every registered front renders an answer.
 */
START_TEST(test_front_cgi_adapter)
{
	char *envp[] = { "REMOTE_ADDRX=1", "REMOTE_ADDR=10.0.0.1",
	    "HTTP_X_KEY=a", "HTTP_X_KEY=b", "HTTP_ONE=1", NULL };
	struct rlg_params in;
	const char *v;

	rlg_params_envp(&in, envp);
	ck_assert_ptr_eq(in.src, envp);
	ck_assert_str_eq(rlg_param(&in, "REMOTE_ADDR"), "10.0.0.1");
	ck_assert_ptr_null(rlg_param(&in, "REMOTE"));
	ck_assert_str_eq(rlg_param(&in, "HTTP_X_KEY"), "a");
	ck_assert_int_eq(rlg_param_header(&in, "HTTP_X_KEY", &v), 2);
	ck_assert_ptr_null(v);
	ck_assert_int_eq(rlg_param_header(&in, "HTTP_ONE", &v), 1);
	ck_assert_str_eq(v, "1");
	ck_assert_int_eq(rlg_param_header(&in, "HTTP_NONE", &v), 0);
	rlg_params_envp(&in, NULL);
	ck_assert_ptr_null(rlg_param(&in, "REMOTE_ADDR"));
}
END_TEST

START_TEST(test_front_cgi_render)
{
	char buf[RLG_REPLY_ROOM + 64];
	struct rlg_reply rep = { 404, "Not Found", buf + RLG_REPLY_ROOM, 0,
	    RLG_REPLY_ROOM, NULL, 0, true };
	static struct sink s;

	memcpy(rep.head, "A: 1\r\n\r\nbody", 12);
	rep.head_len = 6;
	rep.body = rep.head + 8;
	rep.body_len = 4;
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(rlg_front_cgi_render(&rep, sink_write, &s), 0);
	ck_assert_int_eq(s.calls, 1);
	ck_assert_str_eq(s.buf, "Status: 404 Not Found\r\nA: 1\r\n\r\nbody");
	/* a body kept apart: a second write, none when it is empty */
	rep.joined = false;
	rep.body = "apart";
	rep.body_len = 5;
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(rlg_front_cgi_render(&rep, sink_write, &s), 0);
	ck_assert_int_eq(s.calls, 2);
	ck_assert_str_eq(s.buf, "Status: 404 Not Found\r\nA: 1\r\n\r\napart");
	rep.body_len = 0;
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(rlg_front_cgi_render(&rep, sink_write, &s), 0);
	ck_assert_int_eq(s.calls, 1);
	/* no room for the status line: nothing written */
	rep.room = 10;
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(rlg_front_cgi_render(&rep, sink_write, &s),
	    RLG_ENOSPC);
	ck_assert_int_eq(s.calls, 0);
}
END_TEST

START_TEST(test_fronts_registered)
{
	struct rlg_decision d = { false, 5, 0, 11200, 11200, 11200, false };
	struct rlg_answer a = draft03(RLG_OUT_REJECTED, &d, false);
	const struct rlg_front *f;
	char buf[RLG_REPLY_ROOM + RLG_RESPONSE_MAX];
	struct rlg_reply rep;
	static struct sink s;
	size_t i;

	ck_assert_ptr_eq(rlg_front_find("fastcgi"), &rlg_front_fastcgi);
	ck_assert_ptr_eq(rlg_front_find("cgi"), &rlg_front_cgi);
	ck_assert_ptr_null(rlg_front_find("nothing"));
	ck_assert_int_eq(rlg_front_register(&rlg_front_cgi), RLG_EINVAL);
	for (i = 0; (f = rlg_front_at(i)) != NULL; i++) {
		ck_assert(f->name != NULL && f->about != NULL);
		ck_assert(f->params != NULL && f->render != NULL);
		ck_assert_int_eq(rlg_response_build(&a, buf, sizeof buf, &rep),
		    0);
		memset(&s, 0, sizeof s);
		ck_assert_int_eq(f->render(&rep, sink_write, &s), 0);
		ck_assert_uint_gt(s.used, 0);
	}
	ck_assert_uint_ge(i, 2);
	/* the CGI fronts send what rlg_response_format formats */
	ck_assert_int_eq(rlg_response_build(&a, buf, sizeof buf, &rep), 0);
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(rlg_front_cgi.render(&rep, sink_write, &s), 0);
	ck_assert_str_eq(s.buf, answer(&a));
}
END_TEST

Suite *
rlg_response_suite(void)
{
	Suite *s = suite_create("response");
	TCase *core = tcase_create("core"), *styles = tcase_create("styles");
	TCase *parsers = tcase_create("parsers");
	TCase *limits = tcase_create("limits");
	TCase *fronts = tcase_create("fronts");

	tcase_add_test(core, test_200);
	tcase_add_test(core, test_authorized);
	tcase_add_test(core, test_authorized_ietf);
	tcase_add_test(core, test_auth_request_roles);
	tcase_add_test(core, test_reject_status);
	tcase_add_test(core, test_429);
	tcase_add_test(core, test_retry_after_beside_reset);
	tcase_add_test(core, test_all_200_exact);
	tcase_add_test(core, test_all_429_exact);
	tcase_add_test(core, test_every_name_exact);
	tcase_add_test(core, test_numbers_exact);
	tcase_add_test(core, test_429_costly_shows_zero);
	tcase_add_test(core, test_head_has_no_body);
	tcase_add_test(core, test_errors);
	tcase_add_test(core, test_problem_bodies);
	/* _i: style * 2 + error format, over all five styles. */
	tcase_add_loop_test(styles, test_matrix, 0, (RLG_STYLE_NONE + 1) * 2);
	tcase_add_test(styles, test_pick);
	tcase_add_test(parsers, test_sf_parse_valid);
	tcase_add_test(parsers, test_sf_parse_invalid);
	tcase_add_test(parsers, test_json_checker);
	tcase_add_test(limits, test_seconds_rounding);
	tcase_add_test(limits, test_seconds_cap);
	tcase_add_test(limits, test_retry_never_below_one);
	tcase_add_test(limits, test_retry_covers_every_reset);
	tcase_add_test(limits, test_32_policies_fit);
	tcase_add_test(limits, test_small_buffer_and_failing_writer);
	tcase_add_test(limits, test_names_escaped);
	suite_add_tcase(s, core);
	suite_add_tcase(s, styles);
	suite_add_tcase(s, parsers);
	tcase_add_test(fronts, test_front_cgi_adapter);
	tcase_add_test(fronts, test_front_cgi_render);
	tcase_add_test(fronts, test_fronts_registered);
	suite_add_tcase(s, limits);
	suite_add_tcase(s, fronts);
	return s;
}
