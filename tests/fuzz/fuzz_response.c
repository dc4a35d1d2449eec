/*
 * fuzz_response.c: libFuzzer target for the response formatter, the code
 * that writes every byte rlgate sends back. The input is read as a stream
 * of fields (missing bytes read as 0): outcome, style, error format, HEAD,
 * a flag that drops the policies, n (0..RLG_POLICIES_MAX), then per
 * decision its admitted flag and limit, remaining, reset_ms, retry_ms and
 * next_ms as arbitrary int64, and per policy a name of 1 to 64 bytes mapped onto
 * [A-Za-z0-9_.-] (all a config allows), then the role (who reads the
 * answer) and the refusal's status (none, 429, 503, 403 or 420, which
 * is no registered code). A small value of the outcome, style, error format and role
 * fields is out of range on purpose.
 *
 * The answer is formatted into an RLG_RESPONSE_MAX buffer and a small one.
 * Beyond the sanitizers, it checks that RLG_EINVAL comes exactly for the
 * answers the header calls invalid, that RLG_RESPONSE_MAX is always enough,
 * that the small buffer gives the same bytes or RLG_ENOSPC and "", and that
 * a formatted answer starts with "Status: ", has header lines that end in
 * CRLF and hold no other CR or LF, a blank line after the headers and a
 * Content-Length equal to the length of the body (that GET would send, for
 * HEAD, whose body is empty); a guarding role's yes has no body, nor
 * has nginx's no (403 with the body in its X-Rlgate-Body header).
 *
 * Build with ./configure CC=clang --enable-fuzzing; run scripts/fuzz.sh.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "limiter.h"
#include "response.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char name_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";

struct input {
	const uint8_t *p;
	size_t left;
};

static uint8_t
take8(struct input *in)
{
	if (in->left == 0)
		return 0;
	in->left--;
	return *in->p++;
}

static int64_t
take64(struct input *in)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | take8(in);
	return (int64_t)v;
}

/* Checks a formatted answer of len bytes (NUL-terminated) for a. */
static void
check_answer(const struct rlg_answer *a, const char *out, int len)
{
	const char *p, *end, *eol, *body;
	const char *cl = NULL;
	size_t bodylen;
	bool blank = false;

	if (len < 0 || out[len] != '\0' || strlen(out) != (size_t)len)
		abort();
	if (strncmp(out, "Status: ", 8) != 0)
		abort();
	end = out + len;
	/* Header lines: each ends in CRLF, none holds another CR or LF. */
	for (p = out; p < end; p = eol + 2) {
		eol = memchr(p, '\r', (size_t)(end - p));
		if (eol == NULL || eol + 1 >= end || eol[1] != '\n')
			abort();
		if (memchr(p, '\n', (size_t)(eol - p)) != NULL)
			abort();
		if (eol == p) {
			blank = true;
			p = eol + 2;
			break;
		}
		if (strncmp(p, "Content-Length: ", 16) == 0) {
			if (cl != NULL)
				abort();
			cl = p + 16;
		}
	}
	if (!blank)
		abort();
	body = p;
	bodylen = (size_t)(end - body);

	if (a->outcome == RLG_OUT_AUTHORIZED) {
		if (cl != NULL || bodylen != 0)
			abort();
		return;
	}
	if (a->role == RLG_ROLE_AUTH_REQUEST) {
		if (cl == NULL || strncmp(cl, "0\r", 2) != 0 || bodylen != 0 ||
		    strncmp(out, "Status: 403 ", 12) != 0 ||
		    strstr(out, "\r\nX-Rlgate-Body: ") == NULL)
			abort();
		return;
	}
	if (cl == NULL)
		abort();
	if (a->head) {
		struct rlg_answer get = *a;
		static char full[RLG_RESPONSE_MAX];
		const char *gb;
		int n;

		if (bodylen != 0)
			abort();
		/* HEAD announces the length GET sends: compare the headers. */
		get.head = false;
		n = rlg_response_format(&get, full, sizeof full);
		if (n < len || memcmp(full, out, (size_t)len) != 0)
			abort();
		gb = full + len;
		bodylen = strlen(gb);
	}
	{
		char *stop;
		unsigned long long v = strtoull(cl, &stop, 10);

		if (stop == cl || stop[0] != '\r' || v != bodylen)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char big[RLG_RESPONSE_MAX];
	static char names[RLG_POLICIES_MAX][RLG_POLICY_NAME_MAX + 1];
	struct rlg_policy policies[RLG_POLICIES_MAX];
	struct rlg_decision decisions[RLG_POLICIES_MAX];
	struct input in = { data, size };
	struct rlg_answer a;
	char small[256];
	size_t i, j, smallcap, namelen;
	bool no_policies, invalid;
	int n, m;
	uint8_t b;

	memset(&a, 0, sizeof a);
	memset(policies, 0, sizeof policies);
	memset(decisions, 0, sizeof decisions);
	/* 0..8, 0..6, 0..2, 0..5: one past each range, to hit RLG_EINVAL. */
	a.outcome = (enum rlg_outcome)(take8(&in) % 9);
	a.style = (enum rlg_header_style)(take8(&in) % 6);
	a.errors = (enum rlg_error_format)(take8(&in) % 3);
	b = take8(&in);
	a.head = (b & 1) != 0;
	no_policies = (b & 0x0e) == 0x0e;     /* rarely: decisions only */
	smallcap = 1 + take8(&in);            /* 1..256 */
	a.n = take8(&in) % (RLG_POLICIES_MAX + 1);
	for (i = 0; i < a.n; i++) {
		decisions[i].admitted = (take8(&in) & 1) != 0;
		decisions[i].limit = take64(&in);
		decisions[i].remaining = take64(&in);
		decisions[i].reset_ms = take64(&in);
		decisions[i].retry_ms = take64(&in);
		decisions[i].next_ms = take64(&in);
	}
	for (i = 0; i < a.n; i++) {
		namelen = 1 + take8(&in) % RLG_POLICY_NAME_MAX;
		for (j = 0; j < namelen; j++)
			names[i][j] = name_chars[take8(&in) %
			    (sizeof name_chars - 1)];
		names[i][namelen] = '\0';
		policies[i].name = names[i];
		policies[i].lim.algorithm = RLG_ALG_FIXED_WINDOW;
		policies[i].lim.limit = decisions[i].limit;
		policies[i].lim.window_ms = 1000;
	}
	a.decisions = decisions;
	a.policies = no_policies ? NULL : policies;
	a.role = (enum rlg_role)(take8(&in) % 6);
	{
		static const int statuses[] = { 0, 429, 503, 403, 420 };

		a.status = statuses[take8(&in) % 5];
	}

	invalid = (unsigned)a.outcome > RLG_OUT_MISCONFIGURED ||
	    (unsigned)a.role > RLG_ROLE_OTHER ||
	    (a.outcome == RLG_OUT_REJECTED && a.status == 420) ||
	    (unsigned)a.style > RLG_STYLE_NONE ||
	    (unsigned)a.errors > RLG_ERRORS_PROBLEM ||
	    (a.n > 0 && a.policies == NULL);

	n = rlg_response_format(&a, big, sizeof big);
	if (n < 0) {
		if (big[0] != '\0')
			abort();
		/* RLG_RESPONSE_MAX is room for every answer. */
		if (n != RLG_EINVAL || !invalid)
			abort();
	} else {
		if (invalid)
			abort();
		check_answer(&a, big, n);
	}

	/* A small buffer: the same bytes, or RLG_ENOSPC and "". */
	m = rlg_response_format(&a, small, smallcap);
	if (n < 0) {
		if (m != n || small[0] != '\0')
			abort();
	} else if ((size_t)n < smallcap) {
		if (m != n || memcmp(small, big, (size_t)n + 1) != 0)
			abort();
	} else if (m != RLG_ENOSPC || small[0] != '\0') {
		abort();
	}
	return 0;
}
