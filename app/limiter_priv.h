/*
 * limiter_priv.h: what the limiter's files share (limiter.c: the
 * algorithms, their bounds and the ban; limiter_merge.c: the merge of
 * local+global), and nothing else includes: the GCRA tolerance's cap,
 * 128-bit products, the check of a policy, and the clamps and roundings
 * every algorithm uses.
 */
#ifndef RLG_LIMITER_PRIV_H
#define RLG_LIMITER_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "limiter.h"

/*
 * The GCRA tolerance is capped so that tat_us, up to now + tolerance + one
 * emission interval, fits an int64_t for any time up to RLG_TIME_MS_MAX.
 * 1e18 us is about 31,700 years: only a policy whose burst times emission
 * interval exceeds that is affected, and it gets a smaller burst (stricter),
 * never a larger one.
 */
#define RLG_GCRA_TAU_MAX_US  1000000000000000000LL
_Static_assert(RLG_GCRA_TAU_MAX_US == RLG_TAT_US_MAX - RLG_TIME_MS_MAX *
    1000 - RLG_WINDOW_S_MAX * 1000000, "RLG_TAT_US_MAX's tolerance");

/*
 * Products of a count and a window reach 1e9 * 3.2e10: wider than
 * int64_t. __extension__ keeps -Wpedantic quiet about the GCC/Clang type.
 */
__extension__ typedef __int128 i128;

/*
 * The config enforces these bounds; checking them again here keeps a bad
 * policy from reaching the arithmetic, whose overflow analysis rests on
 * them (limiter.c).
 */
bool rlg_limiter_policy_ok(const struct rlg_limit *p, enum rlg_algorithm alg);

/*
 * A stored window start is a multiple of the window, unless the row is
 * damaged or the operator changed the window: then the aligned window it
 * falls in is the one it counted, so every later decision (and the delays
 * promised from it) agree on where windows begin.
 */
static inline int64_t
align_start(int64_t start_ms, int64_t window_ms)
{
	start_ms = rlg_limiter_clamp_time(start_ms);
	return start_ms - start_ms % window_ms;
}

/*
 * v within [0, max]: a damaged row's count (negative, or more than a
 * step can admit) within [0, limit], a time within [0, RLG_TIME_MS_MAX].
 */
static inline int64_t
clamp_upto(int64_t v, int64_t max)
{
	if (v < 0)
		return 0;
	if (v > max)
		return max;
	return v;
}


/* ceil(num / den) for num >= 0 and den > 0 whose result fits an int64_t. */
static inline int64_t
ceil_div(i128 num, int64_t den)
{
	return (int64_t)((num + den - 1) / den);
}

#endif
