/*
 * response.c: the only place that writes HTTP: a CGI-style "Status:" line,
 * the rate-limit headers in the configured style, and the JSON bodies.
 *
 * Every answer is formatted into one bounded stack buffer and handed to the
 * writer in one call, so a worker makes one write per answer. Header values
 * are numbers and fixed strings only: nothing from the request is echoed,
 * so no input can split a header line.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "response.h"
#include "util.h"

/* The seed's bodies: success with data, and its exact 429 error. */
#define BODY_OK \
	"{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}"
#define BODY_429 \
	"{\"error\":{\"code\":429,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}"
#define BODY_404 \
	"{\"error\":{\"code\":404,\"message\":\"Not Found.\"}}"
#define BODY_405 \
	"{\"error\":{\"code\":405,\"message\":\"Method Not Allowed.\"}}"
#define BODY_400 \
	"{\"error\":{\"code\":400,\"message\":\"Bad Request.\"}}"
#define BODY_503 \
	"{\"error\":{\"code\":503,\"message\":\"Service Unavailable. Rate limit store unavailable.\"}}"

struct outcome_text {
	const char *status;
	const char *body;
};

static const struct outcome_text texts[] = {
	[RLG_OUT_ADMITTED] = { "200 OK", BODY_OK },
	[RLG_OUT_REJECTED] = { "429 Too Many Requests", BODY_429 },
	[RLG_OUT_NOT_FOUND] = { "404 Not Found", BODY_404 },
	[RLG_OUT_BAD_METHOD] = { "405 Method Not Allowed", BODY_405 },
	[RLG_OUT_BAD_REQUEST] = { "400 Bad Request", BODY_400 },
	[RLG_OUT_STORE_DOWN] = { "503 Service Unavailable", BODY_503 },
};

/* A bounded appender: once anything does not fit, the result is ENOSPC. */
struct buf {
	char *p;
	size_t len, used;
	int overflow;
};

static void put(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put_ratelimit(struct buf *b, const struct rlg_answer *a);

static void
put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->len - b->used) {
		b->overflow = 1;
		return;
	}
	b->used += (size_t)n;
}

int64_t
rlg_response_seconds(int64_t ms)
{
	int64_t s;

	if (ms <= 0)
		return 1;
	s = ms / 1000 + (ms % 1000 != 0);
	return s < 1 ? 1 : s;
}

/* The draft-ietf-httpapi-ratelimit-headers-03 trio (the seed's headers). */
static void
put_ratelimit(struct buf *b, const struct rlg_answer *a)
{
	const struct rlg_decision *d = a->decision;

	if (d == NULL)
		return;
	switch (a->style) {
	case RLG_STYLE_DRAFT03:
		put(b, "RateLimit-Limit: %" PRId64 "\r\n"
		    "RateLimit-Remaining: %" PRId64 "\r\n"
		    "RateLimit-Reset: %" PRId64 "\r\n",
		    d->limit, d->remaining, rlg_response_seconds(d->reset_ms));
		break;
	}
}

int
rlg_response_format(const struct rlg_answer *a, char *out, size_t len)
{
	struct buf b = { out, len, 0, 0 };
	const struct outcome_text *t;
	size_t body_len;

	if (len == 0)
		return RLG_ENOSPC;
	if ((size_t)a->outcome >= sizeof texts / sizeof texts[0])
		return RLG_EINVAL;
	t = &texts[a->outcome];
	body_len = strlen(t->body);

	put(&b, "Status: %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n", t->status);
	put_ratelimit(&b, a);
	switch (a->outcome) {
	case RLG_OUT_REJECTED:
		/* Never earlier than the reset it reports; at least 1 s. */
		put(&b, "Retry-After: %" PRId64 "\r\n", rlg_response_seconds(
		    a->decision != NULL ? a->decision->retry_ms : 0));
		break;
	case RLG_OUT_STORE_DOWN:
		put(&b, "Retry-After: %d\r\n", RLG_STORE_DOWN_RETRY_S);
		break;
	case RLG_OUT_BAD_METHOD:
		put(&b, "Allow: GET, HEAD\r\n");
		break;
	default:
		break;
	}
	put(&b, "Content-Length: %zu\r\n\r\n", body_len);
	if (!a->head)
		put(&b, "%s", t->body);
	if (b.overflow) {
		out[0] = '\0';
		return RLG_ENOSPC;
	}
	return (int)b.used;
}

int
rlg_response_write(const struct rlg_answer *a, rlg_write_fn write, void *ctx)
{
	char buf[1024];
	int n;

	n = rlg_response_format(a, buf, sizeof buf);
	if (n < 0)
		return n;
	return write(ctx, buf, (size_t)n);
}
