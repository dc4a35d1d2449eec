/*
 * response.h: every byte rlgate sends back: the status line, the rate-limit
 * headers in the configured style, and the JSON bodies.
 *
 * It writes through a small writer callback, so the server hands it a
 * FastCGI stream or stdout and the tests hand it a buffer. No header value
 * is ever taken from the request, so no input can inject a header line.
 */
#ifndef RLG_RESPONSE_H
#define RLG_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "limiter.h"

/* Writes len bytes; returns 0 on success, negative on failure. */
typedef int (*rlg_write_fn)(void *ctx, const char *buf, size_t len);

/* What to answer; the server fills it from the routing and the store. */
enum rlg_outcome {
	RLG_OUT_ADMITTED = 0,   /* 200 with the resource */
	RLG_OUT_REJECTED,       /* 429 */
	RLG_OUT_NOT_FOUND,      /* 404 */
	RLG_OUT_BAD_METHOD,     /* 405 with Allow */
	RLG_OUT_BAD_REQUEST,    /* 400: a path that cannot be read */
	RLG_OUT_STORE_DOWN,     /* 503 with Retry-After (on_error = closed) */
};

struct rlg_answer {
	enum rlg_outcome outcome;
	bool head;                       /* HEAD: headers only */
	enum rlg_header_style style;
	const struct rlg_decision *decision;   /* rate-limit state to report, or NULL */
};

/* Seconds to send in Retry-After when the store is down (on_error = closed). */
#define RLG_STORE_DOWN_RETRY_S 1

/*
 * Writes the whole answer (CGI-style "Status:" line, headers, blank line,
 * body unless HEAD) with one call to write. Returns 0, or the writer's
 * negative result.
 */
int rlg_response_write(const struct rlg_answer *a, rlg_write_fn write,
    void *ctx);

/*
 * Formats the answer into buf (len bytes). Returns the number of bytes
 * written (excluding a NUL it always adds), or RLG_ENOSPC.
 */
int rlg_response_format(const struct rlg_answer *a, char *buf, size_t len);

/* Whole seconds for a header from a duration in ms: rounded up, at least 1. */
int64_t rlg_response_seconds(int64_t ms);

#endif
