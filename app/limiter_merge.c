/*
 * limiter_merge.c: units admitted elsewhere added to a state, for the
 * local+global mode (limiter.h: "Merge"; db/redis/sync.lua is its Lua
 * twin). Pure, as every function of the limiter.
 */
#include <stdbool.h>
#include <stdint.h>

#include "limiter.h"
#include "limiter_priv.h"
#include "util.h"

static int merge_windows(const struct rlg_limit *lim,
    const struct rlg_state *g, int64_t units, int64_t uws,
    struct rlg_state *out);

/*
 * The merge of limiter.h: units added to global. The window algorithms
 * compare the units' window with global's (merge_windows); the token
 * bucket adds units emission intervals to its tat, in 128 bits, within
 * [max(tat, now), now + tau cap + T].
 */
int
rlg_limiter_merge(const struct rlg_limit *lim,
    const struct rlg_state *global, int64_t units, int64_t window_start_ms,
    int64_t now_ms, struct rlg_state *out)
{
	int64_t now_us, t_us, base;
	i128 tat;

	if (!rlg_limiter_policy_ok(lim, lim->algorithm) || rlg_limiter_keeps_log(lim) ||
	    units < 0 || units > RLG_MERGE_COUNT_MAX)
		return RLG_EINVAL;
	if (units == 0) {
		*out = *global;
		return RLG_OK;
	}
	if (lim->algorithm != RLG_ALG_TOKEN_BUCKET)
		return merge_windows(lim, global, units,
		    align_start(window_start_ms, lim->window_ms), out);
	now_us = rlg_limiter_clamp_time(now_ms) * 1000;
	t_us = (lim->window_ms * 1000 + lim->limit - 1) / lim->limit;
	base = clamp_upto(global->tat_us, RLG_TAT_US_MAX);
	if (base < now_us)
		base = now_us;
	tat = (i128)base + (i128)units * t_us;
	if (tat > now_us + RLG_GCRA_TAU_MAX_US + t_us)
		tat = now_us + RLG_GCRA_TAU_MAX_US + t_us;
	if (tat < base)
		tat = base;
	out->refused = global->refused;
	out->refused_start_ms = global->refused_start_ms;
	out->ban_until_ms = global->ban_until_ms;
	out->window_start_ms = 0;
	out->count = 0;
	out->prev_count = 0;
	out->tat_us = (int64_t)tat;
	out->expires_ms = ceil_div(tat, 1000);
	return RLG_OK;
}

/*
 * fixed_window and sliding_window: units admitted in the window that
 * starts at uws (aligned) added to g, as limiter.h says. The stored
 * window is aligned and its counts clamped to 0..RLG_MERGE_COUNT_MAX
 * first. RLG_OK.
 */
static int
merge_windows(const struct rlg_limit *lim, const struct rlg_state *g,
    int64_t units, int64_t uws, struct rlg_state *out)
{
	struct rlg_state st = *g;
	int64_t w = lim->window_ms;
	bool sliding = lim->algorithm == RLG_ALG_SLIDING_WINDOW;

	st.window_start_ms = align_start(st.window_start_ms, w);
	st.count = clamp_upto(st.count, RLG_MERGE_COUNT_MAX);
	st.prev_count = sliding ? clamp_upto(st.prev_count,
	    RLG_MERGE_COUNT_MAX) : 0;
	if (st.count == 0 && st.prev_count == 0) {
		/* Empty: as old as can be. */
		st.window_start_ms = uws - 2 * w;
	}
	if (st.window_start_ms == uws) {
		st.count += units;
	} else if (sliding && st.window_start_ms == uws - w) {
		st.prev_count = st.count;
		st.count = units;
		st.window_start_ms = uws;
	} else if (st.window_start_ms < uws) {
		st.prev_count = 0;
		st.count = units;
		st.window_start_ms = uws;
	} else if (sliding && st.window_start_ms == uws + w) {
		st.prev_count += units;
	} else {
		/* The units' window is over: they change nothing. */
		*out = *g;
		return RLG_OK;
	}
	st.count = clamp_upto(st.count, RLG_MERGE_COUNT_MAX);
	st.prev_count = clamp_upto(st.prev_count, RLG_MERGE_COUNT_MAX);
	st.tat_us = 0;
	st.expires_ms = st.window_start_ms + (sliding ? 2 : 1) * w;
	*out = st;
	return RLG_OK;
}
