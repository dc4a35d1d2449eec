/*
 * response.c: the only place that chooses what rlgate answers: the status,
 * the rate-limit headers in the configured style, and the bodies (the
 * seed's JSON, or RFC 9457 problem details), built as a struct rlg_reply
 * that the request's front renders (front_cgi.c: CGI text).
 *
 * Every answer is built into one bounded stack buffer, with room before
 * its headers for the front's status line, and rendered from there in
 * place, so a worker makes one write per answer. Header values
 * are numbers, fixed strings and policy names from the config only: nothing
 * from the request is echoed, and a name that a header could not carry
 * verbatim (a control byte, CR or LF among them) fails the whole answer
 * rather than being sent, so no header line can ever be split.
 *
 * The ietf style follows draft-ietf-httpapi-ratelimit-headers-11
 * (May 2026): RateLimit-Policy (section 3) and RateLimit (section 4) as
 * RFC 8941 Lists, one Item per policy, the name as an sf-string; the
 * quota-exceeded problem type (sections 5.1 and 10.2.1) for 429 bodies.
 * Since draft-11 RateLimit's t is "the number of seconds until additional
 * quota associated with the quota policy is made available" (until the
 * quota resets, up to draft-10; WG issue #149: a sliding algorithm gives
 * quota back before its full window): the decision's next_ms, not its
 * reset_ms, which draft03's RateLimit-Reset and X-RateLimit-Reset keep.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "front_cgi.h"
#include "response.h"
#include "util.h"

/* The seed's bodies: success with data, and its exact 429 error. */
#define BODY_OK \
	"{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}"
#define BODY_429 \
	"{\"error\":{\"code\":429,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}"
/* The same with another [response] status: its code, the same message. */
#define BODY_REFUSED_HEAD "{\"error\":{\"code\":"
#define BODY_REFUSED_TAIL ",\"message\":\"Too Many Requests. Rate limit exceeded.\"}}"
#define BODY_404 \
	"{\"error\":{\"code\":404,\"message\":\"Not Found.\"}}"
#define BODY_405 \
	"{\"error\":{\"code\":405,\"message\":\"Method Not Allowed.\"}}"
#define BODY_400 \
	"{\"error\":{\"code\":400,\"message\":\"Bad Request.\"}}"
#define BODY_500 \
	"{\"error\":{\"code\":500,\"message\":\"Internal Server Error.\"}}"
#define BODY_503 \
	"{\"error\":{\"code\":503,\"message\":\"Service Unavailable. Rate limit store unavailable.\"}}"

/*
 * errors = problem. The 429 carries the draft's quota-exceeded type with
 * the title IANA registers for it (draft section 10.2.1: the same for every
 * occurrence, as RFC 9457 3.1.3 wants) and its "violated-policies"
 * extension member. Every other 4xx/5xx is "about:blank", whose title is
 * the status phrase (RFC 9457 4.2.1).
 */
#define PROBLEM_JSON         "application/problem+json"
#define PROBLEM_ABOUT_BLANK  "about:blank"
#define PROBLEM_QUOTA_TITLE  "Quota Exceeded"
#define PROBLEM_QUOTA_DETAIL "Too Many Requests. Rate limit exceeded."

/*
 * The token bucket's burst in RateLimit-Policy. The draft defines only q,
 * qu, w and pk, allows other parameters ("regarded as comments") and asks
 * that implementation-specific ones carry a vendor prefix (section 3.1).
 */
#define IETF_BURST_PARAM "rlgate-burst"

struct outcome_text {
	int code;
	const char *reason;   /* status line; the about:blank problem title */
	const char *json;     /* the body for errors = json (and every 200) */
	size_t json_len;      /* its length: known here, never measured */
};

#define JSON(body) body, sizeof(body) - 1

static const struct outcome_text texts[] = {
	[RLG_OUT_ADMITTED] = { 200, "OK", JSON(BODY_OK) },
	[RLG_OUT_REJECTED] = { 429, "Too Many Requests", JSON(BODY_429) },
	[RLG_OUT_NOT_FOUND] = { 404, "Not Found", JSON(BODY_404) },
	[RLG_OUT_BAD_METHOD] = { 405, "Method Not Allowed", JSON(BODY_405) },
	[RLG_OUT_BAD_REQUEST] = { 400, "Bad Request", JSON(BODY_400) },
	[RLG_OUT_STORE_DOWN] = { 503, "Service Unavailable", JSON(BODY_503) },
	[RLG_OUT_AUTHORIZED] = { 200, "OK", JSON("") },
	[RLG_OUT_MISCONFIGURED] = { 500, "Internal Server Error",
	    JSON(BODY_500) },
};

/* Where an authorizer's yes repeats the style's headers for the front:
 * lighttpd keeps Variable-Rlgate-RateLimit as Rlgate-RateLimit in the
 * request's environment, where www/lighttpd/rlgate-headers.lua (mod_magnet)
 * reads it and puts RateLimit on the answer. */
#define VARIABLE_HEADER "Variable-Rlgate-"

/*
 * The header names, with their ": ", as every answer has them: made
 * here, once, with their lengths, and copied; never put together from a
 * prefix and a name, nor measured, per answer. One set for the answer's
 * own headers, one for an authorizer's Variable- copies of them.
 */
struct lit {
	const char *s;
	size_t len;
};
#define LIT(s) { "" s, sizeof(s) - 1 }

struct trio_names {
	struct lit limit, remaining, reset;
};
#define TRIO(p) { LIT(p "Limit: "), LIT(p "Remaining: "), LIT(p "Reset: ") }

struct header_names {
	struct trio_names draft03, x;
	struct lit policy, ratelimit;   /* the ietf pair */
};

static const struct header_names plain_names = {
	TRIO("RateLimit-"), TRIO("X-RateLimit-"),
	LIT("RateLimit-Policy: "), LIT("RateLimit: "),
};
static const struct header_names variable_names = {
	TRIO(VARIABLE_HEADER "RateLimit-"),
	TRIO(VARIABLE_HEADER "X-RateLimit-"),
	LIT(VARIABLE_HEADER "RateLimit-Policy: "),
	LIT(VARIABLE_HEADER "RateLimit: "),
};
/* An authorizer's single-policy trio for the backend's environment. */
static const struct trio_names variable_trio = TRIO("Variable-RateLimit-");

/*
 * A bounded appender that keeps p NUL-terminated. With p == NULL it only
 * counts, so a body can be measured before the Content-Length that
 * announces it. The first failure sticks in err: RLG_ENOSPC (it did not
 * fit) or RLG_EINVAL (a policy name that cannot be sent).
 */
struct buf {
	char *p;
	size_t len, used;
	int err;
	/*
	 * The digits of the last Reset header written (put_trio): at
	 * reset_at, reset_len bytes and "\r\n", saying reset_s; reset_len
	 * 0: none. Retry-After copies them when it says the same.
	 */
	size_t reset_at, reset_len;
	int64_t reset_s;
};

static void put_mem(struct buf *b, const char *s, size_t n);
static void put_lit(struct buf *b, const struct lit *l);
static void put_str(struct buf *b, const char *s);
static void put_int(struct buf *b, int64_t v);
static void put_sf_string(struct buf *b, const char *s);
static void put_json_string(struct buf *b, const char *s);
static void put_trio(struct buf *b, const struct trio_names *names,
    const struct rlg_decision *d);
static void put_ietf(struct buf *b, const struct header_names *names,
    const struct rlg_answer *a);
static void put_ratelimit(struct buf *b, const struct header_names *names,
    const struct rlg_answer *a);
static void put_after(struct buf *b, const struct rlg_answer *a);
static void put_delay(struct buf *b, const struct rlg_answer *a);
static int finish(struct buf *b);
static void format_authorized(const struct rlg_answer *a, struct buf *b,
    struct rlg_reply *rep);
static void format_auth_request(const struct rlg_answer *a,
    const struct outcome_text *t, bool problem, struct buf *b,
    struct rlg_reply *rep);
static int format_answer(const struct rlg_answer *a,
    const struct outcome_text *t, bool problem, struct buf *b,
    struct rlg_reply *rep);
static void put_body(struct buf *b, const struct rlg_answer *a,
    const struct outcome_text *t, bool problem);
static const struct outcome_text *text_of(const struct rlg_answer *a,
    struct outcome_text *own);
static bool has_decisions(const struct rlg_answer *a);
static int64_t retry_ms(const struct rlg_answer *a);
static int64_t nonneg(int64_t v);
static int64_t shown_remaining(const struct rlg_decision *d);

static void
put_mem(struct buf *b, const char *s, size_t n)
{
	if (b->err != 0)
		return;
	if (b->p != NULL) {
		if (n >= b->len - b->used) {
			b->err = RLG_ENOSPC;
			return;
		}
		memcpy(b->p + b->used, s, n);
		b->p[b->used + n] = '\0';
	}
	b->used += n;
}

/*
 * A string, and a decimal integer: what every answer is made of, without
 * the printf machinery (which was most of what formatting an answer cost).
 * A literal goes by PUT_LIT, or as a struct lit: its length is the
 * compiler's, not strlen's.
 */
#define PUT_LIT(b, s) put_mem((b), "" s, sizeof(s) - 1)

static void
put_lit(struct buf *b, const struct lit *l)
{
	put_mem(b, l->s, l->len);
}

static void
put_str(struct buf *b, const char *s)
{
	put_mem(b, s, strlen(s));
}

/*
 * Two digits a step from a table of the hundred pairs: half the
 * divisions of one digit a step, for the limits and remainders of nine
 * and ten digits that every answer carries.
 */
static void
put_int(struct buf *b, int64_t v)
{
	static const char pairs[] =
	    "00010203040506070809101112131415161718192021222324"
	    "25262728293031323334353637383940414243444546474849"
	    "50515253545556575859606162636465666768697071727374"
	    "75767778798081828384858687888990919293949596979899";
	char digits[24];
	size_t i = sizeof digits, k;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	while (u >= 100) {
		k = (size_t)(u % 100) * 2;
		u /= 100;
		digits[--i] = pairs[k + 1];
		digits[--i] = pairs[k];
	}
	if (u >= 10) {
		digits[--i] = pairs[u * 2 + 1];
		digits[--i] = pairs[u * 2];
	} else {
		digits[--i] = (char)('0' + u);
	}
	if (v < 0)
		digits[--i] = '-';
	put_mem(b, digits + i, sizeof digits - i);
}

/*
 * An RFC 8941 sf-string: DQUOTE, printable ASCII with '"' and '\' escaped,
 * DQUOTE. Anything else has no sf-string form (and may be CR or LF): the
 * answer fails with RLG_EINVAL. Config names ([A-Za-z0-9_.-]) never do.
 */
static void
put_sf_string(struct buf *b, const char *s)
{
	const unsigned char *c;

	if (s == NULL) {
		if (b->err == 0)
			b->err = RLG_EINVAL;
		return;
	}
	/* A config name has nothing to escape: one copy, not one a byte. */
	for (c = (const unsigned char *)s; *c >= 0x20 && *c <= 0x7e &&
	    *c != '"' && *c != '\\'; c++)
		;
	if (*c == '\0') {
		put_mem(b, "\"", 1);
		put_mem(b, s, (size_t)((const char *)c - s));
		put_mem(b, "\"", 1);
		return;
	}
	put_mem(b, "\"", 1);
	for (c = (const unsigned char *)s; *c != '\0'; c++) {
		if (*c < 0x20 || *c > 0x7e) {
			if (b->err == 0)
				b->err = RLG_EINVAL;
			return;
		}
		if (*c == '"' || *c == '\\')
			put_mem(b, "\\", 1);
		put_mem(b, (const char *)c, 1);
	}
	put_mem(b, "\"", 1);
}

/*
 * A JSON string (RFC 8259 section 7), as rlg_json_escape writes one: '"'
 * and '\\' escaped, control bytes as \u00XX; other bytes pass (the config
 * holds ASCII names). Defensive: the names come from the config, never
 * from the request; one longer than a policy name can be is refused.
 */
static void
put_json_string(struct buf *b, const char *s)
{
	enum { NAME_MAX_BYTES = 2 * RLG_POLICY_NAME_MAX };
	char tmp[6 * NAME_MAX_BYTES + 2];
	size_t n;

	if (s == NULL || (n = strlen(s)) > NAME_MAX_BYTES) {
		if (b->err == 0)
			b->err = RLG_EINVAL;
		return;
	}
	put_mem(b, tmp, rlg_json_escape(tmp, s, n));
}

static int64_t
nonneg(int64_t v)
{
	return v < 0 ? 0 : v;
}

/*
 * The remaining a header shows: 0 for a policy that refused the request
 * (DESIGN.md: a 429 carries RateLimit-Remaining: 0). A refused request
 * of cost c > 1 may leave units in the decision (limiter.h: "Request
 * cost"), which a smaller request could still take; a client reading
 * "2 left" beside a 429 would retry the same costly request at once.
 * The decision keeps the true units (the gate logs them as left=).
 */
static int64_t
shown_remaining(const struct rlg_decision *d)
{
	return d->admitted ? nonneg(d->remaining) : 0;
}

static bool
has_decisions(const struct rlg_answer *a)
{
	return a->decisions != NULL && a->n > 0;
}

/*
 * What Retry-After says on a 429: the latest moment any rejecting policy
 * admits again. The limiter sets reset_ms == next_ms == retry_ms on a
 * rejection; the largest of the three is taken anyway, so no delay
 * reported beside it (t of RateLimit, RateLimit-Reset) can ever be later
 * than Retry-After.
 */
static int64_t
retry_ms(const struct rlg_answer *a)
{
	int64_t ms = 0;
	size_t i;

	if (!has_decisions(a))
		return 0;
	for (i = 0; i < a->n; i++) {
		const struct rlg_decision *d = &a->decisions[i];

		if (d->admitted)
			continue;
		if (d->retry_ms > ms)
			ms = d->retry_ms;
		if (d->reset_ms > ms)
			ms = d->reset_ms;
		if (d->next_ms > ms)
			ms = d->next_ms;
	}
	return ms;
}

int64_t
rlg_response_seconds(int64_t ms)
{
	int64_t s;

	if (ms <= 0)
		return 1;
	s = ms / 1000 + (ms % 1000 != 0);
	if (s > RLG_RESPONSE_SECONDS_MAX)
		return RLG_RESPONSE_SECONDS_MAX;
	return s < 1 ? 1 : s;
}

int
rlg_response_pick(const struct rlg_decision *decisions, size_t n)
{
	const struct rlg_decision *d = decisions;
	bool rejected = false;
	size_t i;
	int best = -1;

	if (d == NULL || n > (size_t)INT_MAX)
		return -1;
	for (i = 0; i < n; i++)
		if (!d[i].admitted)
			rejected = true;
	for (i = 0; i < n; i++) {
		if (rejected) {
			/* Strictly later only: among equals, the first. */
			if (!d[i].admitted && (best < 0 ||
			    d[i].retry_ms > d[best].retry_ms))
				best = (int)i;
		} else if (best < 0 || d[i].remaining < d[best].remaining ||
		    (d[i].remaining == d[best].remaining &&
		    d[i].reset_ms < d[best].reset_ms)) {
			best = (int)i;
		}
	}
	return best;
}

/*
 * The three single-policy headers, for the picked decision: draft03's
 * "RateLimit-" and the de-facto "X-RateLimit-". Both Resets are delta
 * seconds, never an epoch timestamp: a delta needs no clock agreement
 * between client and server (a skewed client clock would misread a
 * timestamp), and it matches Retry-After and the ietf t (the draft's
 * section 4.1.2 and FAQ 5 give these reasons). X-RateLimit-Reset means
 * different things in the wild (seconds, ms, epoch); rlgate documents
 * seconds. Both say when the whole quota is back (reset_ms), as draft03
 * defines it; the ietf t says when some more of it is (next_ms).
 */
static void
put_trio(struct buf *b, const struct trio_names *names,
    const struct rlg_decision *d)
{
	put_lit(b, &names->limit);
	put_int(b, nonneg(d->limit));
	PUT_LIT(b, "\r\n");
	put_lit(b, &names->remaining);
	put_int(b, shown_remaining(d));
	PUT_LIT(b, "\r\n");
	put_lit(b, &names->reset);
	b->reset_at = b->used;
	b->reset_s = rlg_response_seconds(d->reset_ms);
	put_int(b, b->reset_s);
	b->reset_len = b->used - b->reset_at;
	PUT_LIT(b, "\r\n");
}

/*
 * RateLimit-Policy: every policy that applied, q its quota, w its window
 * in whole seconds (the config holds whole seconds, so this is
 * window_ms / 1000; a stray fraction would round up, the stricter way).
 * RateLimit: r remaining, t seconds until more quota is available
 * (next_ms: draft-11's t, the window's end for fixed_window, earlier than
 * the whole quota's return for the other algorithms), for every policy; on
 * a 429 only for those that rejected (whose next_ms is their retry_ms),
 * so Retry-After (their latest retry) is never earlier than any t (draft
 * section 6). A skipped charge (next_ms 0) never reaches here (the gate
 * leaves it out), and rlg_response_seconds sends at least 1 anyway. No pk: the partition key
 * here is the client's address, and the draft (6.1) asks servers not to
 * return sensitive keys. No qu: "requests" is the default. names: the
 * answer's own header names, or an authorizer's Variable- copies.
 */
static void
put_ietf(struct buf *b, const struct header_names *names,
    const struct rlg_answer *a)
{
	bool rejected = a->outcome == RLG_OUT_REJECTED;
	size_t i, members = 0;

	for (i = 0; i < a->n; i++) {
		const struct rlg_policy *p = &a->policies[i];

		if (i == 0)
			put_lit(b, &names->policy);
		else
			PUT_LIT(b, ", ");
		put_sf_string(b, p->name);
		PUT_LIT(b, ";q=");
		put_int(b, nonneg(p->lim.limit));
		PUT_LIT(b, ";w=");
		put_int(b, rlg_response_seconds(p->lim.window_ms));
		if (rlg_limiter_has_burst(&p->lim)) {
			PUT_LIT(b, ";" IETF_BURST_PARAM "=");
			put_int(b, nonneg(p->lim.burst));
		}
	}
	PUT_LIT(b, "\r\n");
	for (i = 0; i < a->n; i++) {
		const struct rlg_decision *d = &a->decisions[i];

		if (rejected && d->admitted)
			continue;
		if (members++ == 0)
			put_lit(b, &names->ratelimit);
		else
			PUT_LIT(b, ", ");
		put_sf_string(b, a->policies[i].name);
		PUT_LIT(b, ";r=");
		put_int(b, shown_remaining(d));
		PUT_LIT(b, ";t=");
		put_int(b, rlg_response_seconds(d->next_ms));
	}
	if (members > 0)     /* a List field is never sent empty */
		PUT_LIT(b, "\r\n");
}

static void
put_ratelimit(struct buf *b, const struct header_names *names,
    const struct rlg_answer *a)
{
	bool draft03 = false, ietf = false, x = false;
	const struct rlg_decision *d;

	if (!has_decisions(a))
		return;
	switch (a->style) {
	case RLG_STYLE_DRAFT03:
		draft03 = true;
		break;
	case RLG_STYLE_IETF:
		ietf = true;
		break;
	case RLG_STYLE_X_RATELIMIT:
		x = true;
		break;
	case RLG_STYLE_ALL:
		draft03 = ietf = x = true;
		break;
	case RLG_STYLE_NONE:
		return;
	}
	d = &a->decisions[rlg_response_pick(a->decisions, a->n)];
	if (draft03)
		put_trio(b, &names->draft03, d);
	if (ietf)
		put_ietf(b, names, a);
	if (x)
		put_trio(b, &names->x, d);
}

/*
 * An answer held for its turn (a smoothing policy: hold_ms > 0) says how
 * long, in seconds to the ms: X-Rlgate-Delay: 0.200. rlgate's own field:
 * the draft has none for a delay (its RateLimit and RateLimit-* fields
 * read as at the answer's end: gate.c). Not with style = none.
 */
static void
put_delay(struct buf *b, const struct rlg_answer *a)
{
	char ms[6];
	int64_t frac;

	if (a->hold_ms <= 0 || a->style == RLG_STYLE_NONE)
		return;
	frac = a->hold_ms % 1000;
	ms[0] = '.';
	ms[1] = (char)('0' + frac / 100);
	ms[2] = (char)('0' + frac / 10 % 10);
	ms[3] = (char)('0' + frac % 10);
	ms[4] = '\r';
	ms[5] = '\n';
	PUT_LIT(b, RLG_HEADER_DELAY ": ");
	put_int(b, a->hold_ms / 1000);
	put_mem(b, ms, sizeof ms);
}

/* The bytes of "Retry-After: ". */
#define RETRY_AFTER_LEN (sizeof "Retry-After: " - 1)

/*
 * The headers an answer's status asks for. A 429's Retry-After says what
 * the Reset before it says whenever the rejecting policy is the one shown
 * and gives its whole quota back at its retry (fixed_window): then its
 * digits and line end are copied from there, not made again.
 */
static void
put_after(struct buf *b, const struct rlg_answer *a)
{
	int64_t s;

	switch (a->outcome) {
	case RLG_OUT_REJECTED:
		/* Every 429, whatever the style (none included); at least 1 s. */
		s = rlg_response_seconds(retry_ms(a));
		if (b->reset_len > 0 && b->reset_s == s && b->p != NULL &&
		    b->err == 0 && RETRY_AFTER_LEN + b->reset_len + 2 <
		    b->len - b->used) {
			/* one write: the name, the Reset's digits and CRLF */
			memcpy(b->p + b->used, "Retry-After: ",
			    RETRY_AFTER_LEN);
			memcpy(b->p + b->used + RETRY_AFTER_LEN,
			    b->p + b->reset_at, b->reset_len + 2);
			b->used += RETRY_AFTER_LEN + b->reset_len + 2;
			b->p[b->used] = '\0';
			break;
		}
		PUT_LIT(b, "Retry-After: ");
		put_int(b, s);
		PUT_LIT(b, "\r\n");
		break;
	case RLG_OUT_STORE_DOWN:
		PUT_LIT(b, "Retry-After: ");
		put_int(b, RLG_STORE_DOWN_RETRY_S);
		PUT_LIT(b, "\r\n");
		break;
	case RLG_OUT_BAD_METHOD:
		PUT_LIT(b, "Allow: GET, HEAD\r\n");
		break;
	default:
		break;
	}
}

/* The length written, or the first error (buf then holds ""). */
static int
finish(struct buf *b)
{
	if (b->err == 0 && b->used > (size_t)INT_MAX)
		b->err = RLG_ENOSPC;
	if (b->err != 0) {
		b->p[0] = '\0';
		return b->err;
	}
	return (int)b->used;
}

static void
put_body(struct buf *b, const struct rlg_answer *a,
    const struct outcome_text *t, bool problem)
{
	size_t i, listed = 0;

	if (!problem) {
		if (t->json != NULL) {
			put_mem(b, t->json, t->json_len);
			return;
		}
		PUT_LIT(b, BODY_REFUSED_HEAD);
		put_int(b, t->code);
		PUT_LIT(b, BODY_REFUSED_TAIL);
		return;
	}
	if (a->outcome != RLG_OUT_REJECTED) {
		PUT_LIT(b, "{\"type\":\"" PROBLEM_ABOUT_BLANK "\",\"title\":\"");
		put_str(b, t->reason);
		PUT_LIT(b, "\",\"status\":");
		put_int(b, t->code);
		PUT_LIT(b, "}");
		return;
	}
	PUT_LIT(b, "{\"type\":\"" RLG_PROBLEM_QUOTA_EXCEEDED "\","
	    "\"title\":\"" PROBLEM_QUOTA_TITLE "\",\"status\":");
	put_int(b, t->code);
	PUT_LIT(b, ",\"detail\":\"" PROBLEM_QUOTA_DETAIL "\","
	    "\"violated-policies\":[");
	for (i = 0; has_decisions(a) && i < a->n; i++) {
		if (a->decisions[i].admitted)
			continue;
		if (listed++ > 0)
			put_mem(b, ",", 1);
		put_json_string(b, a->policies[i].name);
	}
	PUT_LIT(b, "]}");
}

/*
 * A guarding role's yes: Status first (lighttpd drops lines before it),
 * the style's headers as a responder's 200 has them (nginx's
 * auth_request_set and Caddy's copy_headers take them from there, Apache
 * passes an authorizer's plain headers to the client), no body: the front
 * serves the request itself. An authorizer's adds them again as
 * Variable-Rlgate-NAME, and the single-policy trio as Variable-RateLimit-*:
 * the web server does not send those, it hands them to the backend as
 * environment (Variable-RateLimit-Limit becomes RATELIMIT_LIMIT under
 * lighttpd, RateLimit_Limit under Apache), where lighttpd's mod_magnet
 * can also copy them onto the answer. The whole answer goes out in one
 * write: Apache replaces a 429 whose body comes in a later record with
 * its own page.
 */
static void
format_authorized(const struct rlg_answer *a, struct buf *b,
    struct rlg_reply *rep)
{
	rep->status = 200;
	rep->reason = "OK";
	put_ratelimit(b, &plain_names, a);
	put_delay(b, a);
	if (a->role == RLG_ROLE_AUTHORIZER && has_decisions(a) &&
	    a->style != RLG_STYLE_NONE) {
		put_ratelimit(b, &variable_names, a);
		put_trio(b, &variable_trio,
		    &a->decisions[rlg_response_pick(a->decisions, a->n)]);
	}
	rep->head_len = b->used;
	PUT_LIT(b, "\r\n");
}

/*
 * An auth_request's no, for nginx, whose auth_request passes only 2xx,
 * 401 and 403 (any other status becomes its 500): 403, with what the
 * client is to get in headers the shipped include reads (the body is one
 * line: rlgate's bodies have no line break).
 */
static void
format_auth_request(const struct rlg_answer *a,
    const struct outcome_text *t, bool problem, struct buf *b,
    struct rlg_reply *rep)
{
	rep->status = 403;
	rep->reason = "Forbidden";
	PUT_LIT(b, RLG_HEADER_STATUS ": ");
	put_int(b, t->code);
	if (problem)
		PUT_LIT(b, "\r\n" RLG_HEADER_TYPE ": problem\r\n");
	else
		PUT_LIT(b, "\r\n" RLG_HEADER_TYPE ": json\r\n");
	put_ratelimit(b, &plain_names, a);
	put_after(b, a);
	PUT_LIT(b, RLG_HEADER_BODY ": ");
	put_body(b, a, t, problem);
	PUT_LIT(b, "\r\nContent-Length: 0\r\n");
	rep->head_len = b->used;
	PUT_LIT(b, "\r\n");
}

/*
 * A responder's answer, and every refusal but auth_request's: the status
 * of t, its headers, the body (measured first: HEAD announces the length
 * GET would send, and sends none).
 */
static int
format_answer(const struct rlg_answer *a, const struct outcome_text *t,
    bool problem, struct buf *b, struct rlg_reply *rep)
{
	struct buf body = { NULL, 0, 0, 0, 0, 0, 0 };

	put_body(&body, a, t, problem);
	if (body.err != 0)
		return body.err;
	rep->status = t->code;
	rep->reason = t->reason;
	if (problem)
		PUT_LIT(b, "Content-Type: " PROBLEM_JSON
		    "\r\nCache-Control: no-store\r\n");
	else
		PUT_LIT(b, "Content-Type: application/json"
		    "\r\nCache-Control: no-store\r\n");
	put_ratelimit(b, &plain_names, a);
	put_delay(b, a);
	put_after(b, a);
	PUT_LIT(b, "Content-Length: ");
	put_int(b, (int64_t)body.used);
	PUT_LIT(b, "\r\n");
	rep->head_len = b->used;
	PUT_LIT(b, "\r\n");
	if (!a->head)
		put_body(b, a, t, problem);
	return 0;
}

int
rlg_response_build(const struct rlg_answer *a, char *buf, size_t len,
    struct rlg_reply *rep)
{
	struct buf b = { buf + RLG_REPLY_ROOM, len - RLG_REPLY_ROOM, 0, 0, 0, 0,
	    0 };
	const struct outcome_text *t;
	struct outcome_text own;
	bool problem;
	int rc;

	if (len <= RLG_REPLY_ROOM)
		return RLG_ENOSPC;
	b.p[0] = '\0';
	if ((size_t)a->outcome >= sizeof texts / sizeof texts[0] ||
	    (unsigned)a->style > RLG_STYLE_NONE ||
	    (unsigned)a->role > RLG_ROLE_OTHER ||
	    (a->errors != RLG_ERRORS_JSON && a->errors != RLG_ERRORS_PROBLEM) ||
	    (has_decisions(a) && a->policies == NULL))
		return RLG_EINVAL;
	t = text_of(a, &own);
	if (t == NULL)
		return RLG_EINVAL;
	problem = a->errors == RLG_ERRORS_PROBLEM && t->code >= 400;
	if (a->outcome == RLG_OUT_AUTHORIZED)
		format_authorized(a, &b, rep);
	else if (a->role == RLG_ROLE_AUTH_REQUEST)
		format_auth_request(a, t, problem, &b, rep);
	else if ((rc = format_answer(a, t, problem, &b, rep)) != 0)
		return rc;
	if ((rc = finish(&b)) < 0)
		return rc;
	rep->head = b.p;
	rep->room = RLG_REPLY_ROOM;
	rep->body = b.p + rep->head_len + 2;
	rep->body_len = b.used - rep->head_len - 2;
	rep->joined = true;
	return 0;
}

int
rlg_response_send(const struct rlg_answer *a, const struct rlg_out *out)
{
	char buf[RLG_REPLY_ROOM + RLG_RESPONSE_MAX];
	struct rlg_reply rep;
	int rc;

	if ((rc = rlg_response_build(a, buf, sizeof buf, &rep)) != 0)
		return rc;
	return out->render(&rep, out->write, out->ctx);
}

/* A bounded writer into a caller's buffer, for rlg_response_format. */
struct text_sink {
	char *p;
	size_t len, used;
};

static int
text_write(void *ctx, const char *buf, size_t len)
{
	struct text_sink *s = ctx;

	if (len >= s->len - s->used)
		return RLG_ENOSPC;
	memcpy(s->p + s->used, buf, len);
	s->used += len;
	s->p[s->used] = '\0';
	return 0;
}

int
rlg_response_format(const struct rlg_answer *a, char *out, size_t len)
{
	char buf[RLG_REPLY_ROOM + RLG_RESPONSE_MAX];
	struct text_sink s = { out, len, 0 };
	struct rlg_reply rep;
	int rc;

	if (len == 0)
		return RLG_ENOSPC;
	out[0] = '\0';
	if ((rc = rlg_response_build(a, buf, sizeof buf, &rep)) != 0)
		return rc;
	if ((rc = rlg_front_cgi_render(&rep, text_write, &s)) != 0 ||
	    s.used > (size_t)INT_MAX) {
		out[0] = '\0';
		return rc != 0 ? rc : RLG_ENOSPC;
	}
	return (int)s.used;
}

/*
 * The text of a's outcome; a refusal's with another [response] status
 * than 429 is made in own: its code and registered phrase, the body
 * built around its code (json NULL). NULL for a code rlgate may not send.
 */
static const struct outcome_text *
text_of(const struct rlg_answer *a, struct outcome_text *own)
{
	const char *reason;

	if (a->outcome != RLG_OUT_REJECTED || a->status == 0 ||
	    a->status == 429)
		return &texts[a->outcome];
	if (a->status < 400 || a->status > 599 ||
	    (reason = rlg_http_reason(a->status)) == NULL)
		return NULL;
	own->code = a->status;
	own->reason = reason;
	own->json = NULL;
	own->json_len = 0;
	return own;
}

int
rlg_response_answer_code(const struct rlg_answer *a)
{
	struct outcome_text own;
	const struct outcome_text *t;

	if ((unsigned)a->outcome >= sizeof texts / sizeof texts[0])
		return 500;
	t = text_of(a, &own);
	return t != NULL ? t->code : 500;
}

int
rlg_response_code(enum rlg_outcome o)
{
	return (unsigned)o < sizeof texts / sizeof texts[0] ? texts[o].code :
	    500;
}

/*
 * The admin endpoints' answers: the headers here, the body as admin.c
 * built it, rendered apart (a metrics body can be larger than an
 * answer's stack buffer). The page may run its own inline script and
 * style and fetch from its origin, nothing else.
 */
int
rlg_response_send_admin(const struct rlg_admin_answer *a,
    const struct rlg_out *out)
{
	enum { HEAD_MAX = 1024 };    /* with the status line */
	char head[RLG_REPLY_ROOM + HEAD_MAX];
	struct rlg_reply rep;
	const char *reason;
	size_t room;
	int n;

	switch (a->status) {
	case 200: reason = "OK"; break;
	case 404: reason = "Not Found"; break;
	case 405: reason = "Method Not Allowed"; break;
	case 503: reason = "Service Unavailable"; break;
	default: return RLG_EINVAL;
	}
	/* "Status: NNN reason\r\n" */
	room = HEAD_MAX - (14 + strlen(reason));
	n = snprintf(head + RLG_REPLY_ROOM, room,
	    "Content-Type: %s\r\n"
	    "Content-Length: %zu\r\n"
	    "Cache-Control: no-store\r\n"
	    "X-Content-Type-Options: nosniff\r\n"
	    "%s%s\r\n",
	    a->content_type, a->len,
	    a->status == 405 ? "Allow: GET, HEAD\r\n" : "",
	    a->page ? "Content-Security-Policy: default-src 'none'; "
	    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
	    "connect-src 'self'; img-src data:; base-uri 'none'; "
	    "form-action 'none'; frame-ancestors 'none'\r\n" : "");
	if (n < 0 || (size_t)n >= room)
		return RLG_ENOSPC;
	rep.status = a->status;
	rep.reason = reason;
	rep.head = head + RLG_REPLY_ROOM;
	rep.head_len = (size_t)n - 2;
	rep.room = RLG_REPLY_ROOM;
	rep.body = a->body;
	rep.body_len = a->head ? 0 : a->len;
	rep.joined = false;
	return out->render(&rep, out->write, out->ctx);
}
