/*
 * response.h: everything rlgate answers: the status, the rate-limit
 * headers in the configured style, and the bodies (the seed's JSON, or RFC
 * 9457 problem details with errors = problem), built as data (struct
 * rlg_reply, front.h) that the request's front renders: the FastCGI and
 * CGI fronts as CGI text, the tests into a buffer. No header value is
 * ever taken from the request, so no input can inject a header line.
 */
#ifndef RLG_RESPONSE_H
#define RLG_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "front.h"
#include "limiter.h"
#include "request.h"

/* What to answer; the server fills it from the routing and the store. */
enum rlg_outcome {
	RLG_OUT_ADMITTED = 0,   /* 200 with the resource */
	RLG_OUT_REJECTED,       /* 429 */
	RLG_OUT_NOT_FOUND,      /* 404 */
	RLG_OUT_BAD_METHOD,     /* 405 with Allow */
	RLG_OUT_BAD_REQUEST,    /* 400: a path that cannot be read */
	RLG_OUT_STORE_DOWN,     /* 503 with Retry-After (on_error = closed) */
	RLG_OUT_AUTHORIZED,     /* a guarding role's yes: 200, no body (the
	                           front serves the request) */
	RLG_OUT_MISCONFIGURED,  /* 500: the front asked for no role rlgate
	                           has (RLG_FLAW_ROLE) */
};

/*
 * One answer. policies[i] and decisions[i] (i < n) are the policies that
 * applied to the request and what each decided; decisions == NULL (or
 * n == 0) means nothing to report (the store was down, or no policy).
 * When there are decisions, policies must not be NULL: the ietf headers
 * and the problem body name them.
 */
struct rlg_answer {
	enum rlg_outcome outcome;
	bool head;                       /* HEAD: headers only */
	enum rlg_header_style style;
	enum rlg_error_format errors;    /* body of 4xx/5xx answers */
	const struct rlg_policy *policies;
	const struct rlg_decision *decisions;
	size_t n;
	enum rlg_role role;              /* who reads it (below); 0: the client */
	int status;                      /* RLG_OUT_REJECTED's code ([response]
	                                    status, rlg_http_reason knows it);
	                                    0: 429 */
	int64_t hold_ms;                 /* how long the answer was held for
	                                    its turn (smoothing), 0: none; the
	                                    decisions read as at its end */
};

/* The IANA problem type of the draft, for [response] errors = problem. */
#define RLG_PROBLEM_QUOTA_EXCEEDED \
	"https://iana.org/assignments/http-problem-types#quota-exceeded"

/* Room for every answer: headers for RLG_POLICIES_MAX policies and a body. */
#define RLG_RESPONSE_MAX 16384

/* Seconds to send in Retry-After when the store is down (on_error = closed). */
#define RLG_STORE_DOWN_RETRY_S 1

/*
 * Builds the answer into buf (len bytes) as *rep: its status, its header
 * lines, its body (none for HEAD), after RLG_REPLY_ROOM bytes left for
 * the renderer, all in buf. Returns 0, RLG_ENOSPC if it does not fit, or
 * RLG_EINVAL as rlg_response_format.
 */
int rlg_response_build(const struct rlg_answer *a, char *buf, size_t len,
    struct rlg_reply *rep);

/*
 * Builds the answer in an RLG_RESPONSE_MAX stack buffer and hands it to
 * out's renderer (a CGI-shaped front's sends it with one call to its
 * writer). Returns 0, the renderer's negative result, or the error of
 * rlg_response_build (nothing is sent then).
 */
int rlg_response_send(const struct rlg_answer *a, const struct rlg_out *out);

/*
 * What each role's reader gets:
 *   responder, forward_auth and (but for its yes) authorizer: the HTTP
 *     answer the client gets (Caddy and Traefik send a side service's
 *     non-2xx answer to the client as it is; a FastCGI Authorizer's too);
 *   the yes (RLG_OUT_AUTHORIZED): 200, the style's headers, no body; an
 *     authorizer's adds them as Variable-Rlgate-NAME (lighttpd's mod_magnet
 *     script copies those onto the answer) and the single-policy trio as
 *     Variable-RateLimit-* (the backend's environment);
 *   auth_request, not admitted: 403 (nginx's auth_request passes only 2xx,
 *     401 and 403), the real status in X-Rlgate-Status, the body in
 *     X-Rlgate-Body on one line and its kind in X-Rlgate-Type (json or
 *     problem), beside Retry-After and the style's headers: the shipped
 *     nginx include answers the client with them.
 */
#define RLG_HEADER_STATUS  "X-Rlgate-Status"
#define RLG_HEADER_TYPE    "X-Rlgate-Type"
#define RLG_HEADER_BODY    "X-Rlgate-Body"
/* How long an answer was held for its turn (smoothing), in seconds. */
#define RLG_HEADER_DELAY   "X-Rlgate-Delay"

/*
 * Formats the answer into buf (len bytes) as the CGI-shaped fronts send
 * it (rlg_front_cgi_render: "Status:" line, headers, blank line, body
 * unless HEAD). Returns the number of bytes
 * written (excluding a NUL it always adds), RLG_ENOSPC if it does not fit,
 * or RLG_EINVAL for an outcome, style or error format out of range,
 * decisions without policies, or a policy name a header cannot carry
 * verbatim (a byte outside printable ASCII: never in a valid config). On
 * error buf holds "" (when len > 0).
 */
int rlg_response_format(const struct rlg_answer *a, char *buf, size_t len);

/*
 * The most seconds a header says: 2^31 (68 years), the value RFC 9111
 * (1.2.2) tells a recipient to take for any larger delta-seconds, so a
 * duration no limiter gives (a store that was lied to) never becomes a
 * header a client cannot parse or would wait on forever.
 */
#define RLG_RESPONSE_SECONDS_MAX 2147483648LL

/*
 * Whole seconds for a header from a duration in ms: rounded up, at least
 * 1, at most RLG_RESPONSE_SECONDS_MAX.
 */
int64_t rlg_response_seconds(int64_t ms);

/*
 * The decision the single-policy styles (draft03, x-ratelimit) report, as
 * an index into decisions[0..n): all admitted, the policy with the fewest
 * remaining requests (ties: the soonest reset, then the first); any
 * rejected, among the policies that rejected, the one with the largest
 * retry_ms (ties: the first), so Retry-After is never too early. -1 when
 * n == 0 or decisions is NULL.
 */
int rlg_response_pick(const struct rlg_decision *decisions, size_t n);

/* The status code of an outcome (200, 429, ...); a's for a refusal. */
int rlg_response_code(enum rlg_outcome o);
int rlg_response_answer_code(const struct rlg_answer *a);

/*
 * An answer of the admin endpoints (admin.c): status 200, 404, 405 (with
 * Allow: GET, HEAD) or 503, a body of content_type, never cached; page:
 * the status page, with a Content-Security-Policy that lets it run only
 * its inline script and style and fetch only from its origin.
 */
struct rlg_admin_answer {
	int status;
	const char *content_type;
	const char *body;
	size_t len;
	bool head;                       /* HEAD: headers only */
	bool page;
};

/*
 * Sends it through out's renderer: the headers as a reply whose body (not
 * joined) is a's. Returns 0, the renderer's negative result, RLG_EINVAL
 * for another status, or RLG_ENOSPC for a content type too long for the
 * headers.
 */
int rlg_response_send_admin(const struct rlg_admin_answer *a,
    const struct rlg_out *out);

#endif
