/*
 * limiter.c: the rate-limit algorithms, as pure functions of
 * (policy, stored state, now) -> (new state, decision).
 *
 * No clock reads, no allocation, no I/O: the store calls these inside its
 * transaction, and the unit tests drive them with fixed times. All times
 * are integer milliseconds; the config bounds limit and window so that no
 * sum below can overflow an int64_t for any time before year 292 million.
 */
#include <stddef.h>

#include "limiter.h"
#include "util.h"

static int policy_ok(const struct rlg_policy *p);

static int
policy_ok(const struct rlg_policy *p)
{
	return p->limit >= 1 && p->limit <= RLG_LIMIT_MAX &&
	    p->window_ms >= 1 && p->window_ms <= RLG_WINDOW_S_MAX * 1000;
}

const char *
rlg_algorithm_name(enum rlg_algorithm a)
{
	switch (a) {
	case RLG_ALG_FIXED_WINDOW:
		return "fixed_window";
	}
	return NULL;
}

int
rlg_limiter_step(const struct rlg_policy *policy, const struct rlg_state *in,
    int64_t now_ms, struct rlg_state *out, struct rlg_decision *d)
{
	switch (policy->algorithm) {
	case RLG_ALG_FIXED_WINDOW:
		return rlg_limiter_fixed_window(policy, in, now_ms, out, d);
	}
	return RLG_EINVAL;
}

/*
 * The seed's fixed window: the time line is cut at multiples of window_ms;
 * one counter per client counts the admitted requests of the current
 * window. The stored row is reused when a new window starts (count back to
 * zero), so there is one row per client, not one per window.
 */
int
rlg_limiter_fixed_window(const struct rlg_policy *policy,
    const struct rlg_state *in, int64_t now_ms, struct rlg_state *out,
    struct rlg_decision *d)
{
	struct rlg_state st = *in;
	int64_t start, end;

	if (!policy_ok(policy))
		return RLG_EINVAL;
	if (now_ms < 0)
		now_ms = 0;
	start = now_ms - now_ms % policy->window_ms;
	if (st.count < 0 || st.count > policy->limit)
		st.count = st.count < 0 ? 0 : policy->limit;  /* a damaged row */
	if (start > st.window_start_ms || st.count == 0) {
		/* A new window (or a fresh client): the counter starts again. */
		st.window_start_ms = start;
		st.count = 0;
	} else if (start < st.window_start_ms) {
		/*
		 * The clock went backwards (another host or an NTP step).
		 * Clamp: count this request in the stored window, which is
		 * later than now, so nobody gets a fresh window early.
		 */
		start = st.window_start_ms;
		if (now_ms < start)
			now_ms = start;
	}
	end = st.window_start_ms + policy->window_ms;

	d->limit = policy->limit;
	d->reset_ms = end - now_ms;
	if (st.count < policy->limit) {
		st.count++;
		st.expires_ms = end;
		d->admitted = true;
		d->remaining = policy->limit - st.count;
		d->retry_ms = 0;
		*out = st;
	} else {
		d->admitted = false;
		d->remaining = 0;
		d->retry_ms = end - now_ms;
		*out = *in;
	}
	return RLG_OK;
}
