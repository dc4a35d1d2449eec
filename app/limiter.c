/*
 * limiter.c: the rate-limit algorithms, as pure functions of
 * (policy, stored state, now) -> (new state, decision), and their
 * descriptor table (rlg_algorithms): one row per algorithm saying what
 * the config, the tiers, the stores and the headers need to know of it.
 *
 * No clock reads, no allocation, no I/O: the store calls these inside its
 * transaction, and the unit tests drive them with fixed times. Times are
 * integer milliseconds (the token bucket keeps microseconds). now_ms and
 * stored window starts are clamped to [0, RLG_TIME_MS_MAX] and stored
 * counts to [0, limit], so with the config's bounds on limit, window and
 * burst no sum below can overflow an int64_t; products of a count and a
 * window (up to 1e9 * 3.2e10) are taken in 128 bits.
 *
 * Every algorithm answers alike: a rejected request leaves the state
 * bit-identical (out = in) and says exactly when it would be admitted
 * (retry_ms, the smallest such delay); an admitted one says how many more
 * would be admitted at the same instant (remaining), when the quota
 * available first grows if no other request comes (next_ms) and when the
 * state is as fresh (reset_ms, expires_ms). A clock that went backwards
 * never grants quota that the stored state did not already allow.
 *
 * Request cost: a request charges cost c >= 1 units, all or
 * nothing. It is admitted exactly when c requests of cost 1 arriving at
 * the same instant would all be admitted, and then leaves the state those
 * c would leave; refused, it consumes nothing, even when some units would
 * have fitted. c = 1 is the algorithms as they always were, to the bit:
 *   fixed_window:   count + c <= limit; count += c.
 *   sliding_window: prev * (W - e) + (count + c - 1) * W < limit * W;
 *                   count += c (the c-th unit's test: the earlier ones
 *                   pass whenever it does).
 *   token_bucket:   now >= tat + (c - 1) * T - tau; tat += c * T.
 *   sliding_log:    m + c <= limit; the store appends c entries at now.
 * remaining stays what it was: requests of cost 1 still admitted right
 * now (after this one when admitted; when refused, what is left, which a
 * refusal of c > 1 may leave above 0). retry_ms, when refused, is the
 * time until a request of the same cost c is admitted. A cost above the
 * capacity (limit; for token_bucket burst, or fewer when the tolerance is
 * capped) is never admitted: it is refused with the retry_ms of a request
 * of the whole capacity, the time until the whole quota is back, at least
 * 1 ms (a fresh client has it already: 1 ms). The config keeps such costs
 * out (a route's cost and cost_max are held to its policies' capacities);
 * the limiter only answers them sanely.
 */
#include <stdbool.h>
#include <stddef.h>

#include "limiter.h"
#include "limiter_priv.h"
#include "util.h"


static int64_t window_begin(const struct rlg_limit *lim, int64_t *now_ms,
    struct rlg_state *st);
static bool cost_ok(int64_t cost);
static void never(struct rlg_decision *d);
static int64_t sw_next_ms(int64_t w, int64_t e, int64_t prev, i128 room,
    int64_t remaining);
static int64_t sw_retry_ms(int64_t w, int64_t e, int64_t limit, int64_t c,
    const struct rlg_state *st);
static size_t log_first_in(const int64_t *log_ms, size_t n, int64_t since);
static int sliding_log_core(const struct rlg_limit *lim,
    const int64_t *log_ms, size_t n, int64_t now_ms, int64_t cost,
    bool *append, struct rlg_state *out, struct rlg_decision *d);
static bool ban_ok(const struct rlg_limit *lim);
static bool ban_holds(const struct rlg_limit *lim,
    const struct rlg_state *in, int64_t now_ms, struct rlg_state *out,
    struct rlg_decision *d);
static void ban_count(const struct rlg_limit *lim,
    const struct rlg_state *in, int64_t now_ms, struct rlg_state *out,
    struct rlg_decision *d);

/*
 * The descriptor table: one row per algorithm, in the order of enum
 * rlg_algorithm (limiter.h says what each field means).
 */
static const struct rlg_algorithm_desc rlg_algorithms[RLG_ALG_COUNT] = {
	[RLG_ALG_FIXED_WINDOW] = {
		.algorithm = RLG_ALG_FIXED_WINDOW, .name = "fixed_window",
		.step = rlg_limiter_fixed_window,
		.limit_max = RLG_LIMIT_MAX,
	},
	[RLG_ALG_SLIDING_WINDOW] = {
		.algorithm = RLG_ALG_SLIDING_WINDOW, .name = "sliding_window",
		.step = rlg_limiter_sliding_window,
		.limit_max = RLG_LIMIT_MAX,
	},
	[RLG_ALG_TOKEN_BUCKET] = {
		.algorithm = RLG_ALG_TOKEN_BUCKET, .name = "token_bucket",
		.step = rlg_limiter_token_bucket, .has_burst = true,
		.limit_max = RLG_LIMIT_MAX, .smooths = true,
	},
	[RLG_ALG_SLIDING_LOG] = {
		.algorithm = RLG_ALG_SLIDING_LOG, .name = "sliding_log",
		.step = NULL, .keeps_log = true,
		.limit_max = RLG_SLIDING_LOG_LIMIT_MAX,
		.limit_why = "keeps one row per request",
	},
};

/*
 * The config enforces these bounds; checking them again here keeps a bad
 * policy from reaching the arithmetic below, whose overflow analysis rests
 * on them: limit up to the algorithm's limit_max, burst only for an
 * algorithm with a burst (others leave it 0). An unknown algorithm is
 * none.
 */
bool
rlg_limiter_policy_ok(const struct rlg_limit *p, enum rlg_algorithm alg)
{
	const struct rlg_algorithm_desc *a = rlg_algorithm_desc(alg);

	if (a == NULL || p->limit < 1 || p->limit > a->limit_max ||
	    p->window_ms < 1 || p->window_ms > RLG_WINDOW_S_MAX * 1000 ||
	    !ban_ok(p))
		return false;
	return !a->has_burst || (p->burst >= 1 && p->burst <= RLG_BURST_MAX);
}

const struct rlg_algorithm_desc *
rlg_algorithm_desc(enum rlg_algorithm a)
{
	if ((unsigned)a >= RLG_ALG_COUNT)
		return NULL;
	return &rlg_algorithms[a];
}

bool
rlg_limiter_has_burst(const struct rlg_limit *lim)
{
	const struct rlg_algorithm_desc *a = rlg_algorithm_desc(lim->algorithm);

	return a != NULL && a->has_burst;
}

bool
rlg_limiter_keeps_log(const struct rlg_limit *lim)
{
	const struct rlg_algorithm_desc *a = rlg_algorithm_desc(lim->algorithm);

	return a != NULL && a->keeps_log;
}

int64_t
rlg_limiter_capacity(const struct rlg_limit *lim)
{
	return rlg_limiter_has_burst(lim) ? lim->burst : lim->limit;
}

/* A cost the limiter takes: 1..RLG_COST_MAX units. */
static bool
cost_ok(int64_t cost)
{
	return cost >= 1 && cost <= RLG_COST_MAX;
}

/*
 * A cost above the capacity, decided as a request of the whole capacity:
 * when that one would be admitted now (the whole quota is there), the
 * costlier request is still refused, with the shortest delay, 1 ms.
 * The state is not touched (the caller sets *out = *in).
 */
static void
never(struct rlg_decision *d)
{
	d->admitted = false;
	d->retry_ms = 1;
	d->reset_ms = 1;
	d->next_ms = 1;
}

/*
 * Times before the epoch (a broken clock) count as the epoch, times after
 * year 9999 as its last millisecond: both are far from any real request,
 * and the bound is what makes the sums below safe.
 */
int64_t
rlg_limiter_clamp_time(int64_t t_ms)
{
	return clamp_upto(t_ms, RLG_TIME_MS_MAX);
}


/*
 * The bounds of limiter.h, derived from the algorithms below (each
 * clamps stored times to RLG_TIME_MS_MAX, so skew = RLG_TIME_MS_MAX -
 * now bounds how far ahead a stored state can be):
 *   fixed_window: reset_ms = retry_ms = end - now with now moved up to
 *     the stored window's start when that is later: 1..W.
 *   sliding_window: reset_ms = start + 2W - now_ms; retry_ms <= W + 1 +
 *     (start - now_ms); start is the stored start when that is later.
 *   sliding_log: newest + W - now_ms and oldest + W - now_ms, the entries
 *     clamped: <= W + skew.
 *   token_bucket: admitted, ceil(tat_new / 1000) - now_ms with tat_new <=
 *     now + tau + T: <= ceil((tau + T) / 1000). Rejected, ceil((tat - tau
 *     - now) / 1000) where a tat that rlgate stored is at most (a time <=
 *     RLG_TIME_MS_MAX) + tau' + T' of whatever policy stored it: tau' <=
 *     RLG_GCRA_TAU_MAX_US, T' <= RLG_WINDOW_S_MAX seconds.
 * remaining: see each algorithm's "the k-th further request" comment.
 */
int
rlg_limiter_bounds(const struct rlg_limit *lim, int64_t now_ms,
    struct rlg_limiter_bounds *b)
{
	int64_t skew;

	if (!rlg_limiter_policy_ok(lim, lim->algorithm))
		return RLG_EINVAL;
	skew = RLG_TIME_MS_MAX - rlg_limiter_clamp_time(now_ms);
	b->remaining_max = lim->limit - 1;
	switch (lim->algorithm) {
	case RLG_ALG_FIXED_WINDOW:
		b->delay_max = lim->window_ms;
		break;
	case RLG_ALG_SLIDING_WINDOW:
		b->delay_max = 2 * lim->window_ms + skew;
		break;
	case RLG_ALG_SLIDING_LOG:
		b->delay_max = lim->window_ms + skew;
		break;
	case RLG_ALG_TOKEN_BUCKET:
		b->remaining_max = lim->burst - 1;
		b->delay_max = RLG_GCRA_TAU_MAX_US / 1000 +
		    RLG_WINDOW_S_MAX * 1000 + skew;
		break;
	}
	/* A ban's end counts as at most ban_ms away (limiter.h). */
	if (b->delay_max < lim->ban_ms)
		b->delay_max = lim->ban_ms;
	return RLG_OK;
}

const char *
rlg_algorithm_name(enum rlg_algorithm a)
{
	const struct rlg_algorithm_desc *d = rlg_algorithm_desc(a);

	return d != NULL ? d->name : NULL;
}

int
rlg_limiter_step(const struct rlg_limit *lim, const struct rlg_state *in,
    int64_t now_ms, int64_t cost, struct rlg_state *out,
    struct rlg_decision *d)
{
	const struct rlg_algorithm_desc *a = rlg_algorithm_desc(lim->algorithm);
	struct rlg_state st = *in;      /* in and out may be the same */
	int rc;

	/* One with a log needs it: the store calls rlg_limiter_sliding_log. */
	if (a == NULL || a->step == NULL || !ban_ok(lim))
		return RLG_EINVAL;
	if (ban_holds(lim, &st, now_ms, out, d))
		return RLG_OK;
	rc = a->step(lim, &st, now_ms, cost, out, d);
	if (rc == RLG_OK)
		ban_count(lim, &st, now_ms, out, d);
	return rc;
}

/* A ban within its bounds (limiter.h): none, or 1 s..RLG_BAN_S_MAX. */
static bool
ban_ok(const struct rlg_limit *lim)
{
	return lim->ban_ms == 0 || (lim->ban_ms >= 1000 &&
	    lim->ban_ms <= RLG_BAN_S_MAX * 1000 && lim->ban_ms % 1000 == 0 &&
	    lim->ban_after >= 0 && lim->ban_after <= RLG_LIMIT_MAX);
}

/*
 * Before the algorithm: whether a ban holds at now_ms (limiter.h, "The
 * ban"). If so the request is refused until its end, *out = *in (the ban
 * is not extended), and true.
 */
static bool
ban_holds(const struct rlg_limit *lim, const struct rlg_state *in,
    int64_t now_ms, struct rlg_state *out, struct rlg_decision *d)
{
	int64_t until;

	if (lim->ban_ms == 0)
		return false;
	now_ms = rlg_limiter_clamp_time(now_ms);
	if (in->ban_until_ms <= now_ms)
		return false;
	until = in->ban_until_ms;
	if (until > now_ms + lim->ban_ms)
		until = now_ms + lim->ban_ms;   /* ahead of this clock, or damaged */
	*out = *in;
	d->admitted = false;
	d->limit = lim->limit;
	d->remaining = 0;
	d->retry_ms = until - now_ms;
	d->reset_ms = d->retry_ms;
	d->next_ms = d->retry_ms;
	return true;
}

/*
 * After the algorithm decided (no ban held): the ban's fields of *out.
 * Without a ban they are 0 when admitted, in's when refused (*out =
 * *in). With one, admitted: the count is kept, an ended ban cleared;
 * refused: counted in now's aligned window, the ban_after-th starting
 * the ban, answered with its whole length.
 */
static void
ban_count(const struct rlg_limit *lim, const struct rlg_state *in,
    int64_t now_ms, struct rlg_state *out, struct rlg_decision *d)
{
	int64_t start, after, n;

	if (lim->ban_ms == 0) {
		/* As before bans: a refusal leaves the state as it was. */
		out->refused = d->admitted ? 0 : in->refused;
		out->refused_start_ms = d->admitted ? 0 : in->refused_start_ms;
		out->ban_until_ms = d->admitted ? 0 : in->ban_until_ms;
		return;
	}
	now_ms = rlg_limiter_clamp_time(now_ms);
	start = now_ms - now_ms % lim->window_ms;
	after = lim->ban_after < 1 ? 1 : lim->ban_after;
	n = in->refused_start_ms == start ?
	    clamp_upto(in->refused, after - 1) : 0;
	out->refused = n;
	out->refused_start_ms = n > 0 ? start : 0;
	out->ban_until_ms = 0;
	if (d->admitted)
		return;
	n++;
	out->refused_start_ms = start;
	if (n < after) {
		out->refused = n;
	} else {
		out->refused = 0;
		out->ban_until_ms = now_ms + lim->ban_ms;
		d->remaining = 0;
		d->retry_ms = lim->ban_ms;
		d->reset_ms = d->retry_ms;
		d->next_ms = d->retry_ms;
	}
	if (out->expires_ms < out->ban_until_ms)
		out->expires_ms = out->ban_until_ms;
	if (out->expires_ms < start + lim->window_ms)
		out->expires_ms = start + lim->window_ms;
}

bool
rlg_limiter_refusal_writes(const struct rlg_limit *lim,
    const struct rlg_state *in, const struct rlg_state *out)
{
	return lim->ban_ms > 0 && (out->refused != in->refused ||
	    out->refused_start_ms != in->refused_start_ms ||
	    out->ban_until_ms != in->ban_until_ms);
}

/*
 * Where a window algorithm starts: now_ms clamped (in place), the stored
 * row's window start aligned and its count bounded (a damaged row, or one
 * from before the window was changed). Returns the start of the aligned
 * window now_ms falls in; the caller compares it with the stored one, and
 * a stored window later than it is a clock that went backwards.
 */
static int64_t
window_begin(const struct rlg_limit *lim, int64_t *now_ms,
    struct rlg_state *st)
{
	*now_ms = rlg_limiter_clamp_time(*now_ms);
	st->window_start_ms = align_start(st->window_start_ms, lim->window_ms);
	st->count = clamp_upto(st->count, lim->limit);
	return *now_ms - *now_ms % lim->window_ms;
}

/*
 * The seed's fixed window: the time line is cut at multiples of window_ms;
 * one counter per client counts the admitted requests of the current
 * window. The stored row is reused when a new window starts (count back to
 * zero), so there is one row per client, not one per window. prev_count
 * and tat_us are not ours: an admitted step stores them as 0.
 *
 * A request of cost c is admitted iff count + c <= limit, and adds c.
 * Refused, it waits for the next window, which starts from nothing: any
 * c <= limit fits then. A c above limit never does: refused at the
 * window's end (the whole quota back), or in 1 ms when the count is 0
 * already.
 */
int
rlg_limiter_fixed_window(const struct rlg_limit *lim,
    const struct rlg_state *in, int64_t now_ms, int64_t cost,
    struct rlg_state *out, struct rlg_decision *d)
{
	struct rlg_state st = *in;
	int64_t start, end;

	if (!rlg_limiter_policy_ok(lim, RLG_ALG_FIXED_WINDOW) || !cost_ok(cost))
		return RLG_EINVAL;
	start = window_begin(lim, &now_ms, &st);
	if (start > st.window_start_ms || st.count == 0) {
		/* A new window (or a fresh client): the counter starts again. */
		st.window_start_ms = start;
		st.count = 0;
	} else if (start < st.window_start_ms) {
		/*
		 * The clock went backwards (another host or an NTP step).
		 * Clamp: count this request in the stored window, which is
		 * later than now, so nobody gets a fresh window early.
		 * reset_ms and retry_ms are then measured from the stored
		 * window's start (under-reported, never over-reported).
		 */
		start = st.window_start_ms;
		if (now_ms < start)
			now_ms = start;
	}
	end = st.window_start_ms + lim->window_ms;

	d->limit = lim->limit;
	d->reset_ms = end - now_ms;
	if (cost <= lim->limit - st.count) {
		st.count += cost;
		st.prev_count = 0;
		st.tat_us = 0;
		st.expires_ms = end;
		d->admitted = true;
		d->remaining = lim->limit - st.count;
		d->retry_ms = 0;
		/* Nothing comes back before the window's end: all of it then. */
		d->next_ms = d->reset_ms;
		*out = st;
	} else {
		d->admitted = false;
		/* What is left to requests of cost 1 (0 when c = 1). */
		d->remaining = lim->limit - st.count;
		d->retry_ms = end - now_ms;
		d->next_ms = d->retry_ms;
		if (st.count == 0)
			never(d);       /* cost > limit, the quota whole */
		*out = *in;
	}
	return RLG_OK;
}

/*
 * The sliding window counter (Cloudflare's): the previous aligned window's
 * count is assumed spread evenly over it, so the share of it still inside
 * the last window_ms is prev_count * (W - e) / W, e being the time elapsed
 * in the current window. Compared multiplied out by W, in 128 bits:
 *   prev_count * (W - e) + count * W < limit * W.
 * The stored row rolls forward by whole windows: the next window makes
 * count the previous one; any later one starts from nothing. The count of
 * a window still weighs during the next, so the state is fresh only at
 * window_start + 2W.
 *
 * A request of cost c is the c-th of c unit requests at this instant:
 *   prev_count * (W - e) + (count + c - 1) * W < limit * W,
 * then count += c (so count stays <= limit). c above limit never passes:
 * it is decided as c = limit (the whole quota) and refused (never).
 */
int
rlg_limiter_sliding_window(const struct rlg_limit *lim,
    const struct rlg_state *in, int64_t now_ms, int64_t cost,
    struct rlg_state *out, struct rlg_decision *d)
{
	struct rlg_state st = *in;
	int64_t w, limit, start, now, e, c;
	i128 used, room;
	bool over;

	if (!rlg_limiter_policy_ok(lim, RLG_ALG_SLIDING_WINDOW) || !cost_ok(cost))
		return RLG_EINVAL;
	w = lim->window_ms;
	limit = lim->limit;
	over = cost > limit;
	c = over ? limit : cost;
	start = window_begin(lim, &now_ms, &st);
	now = now_ms;
	st.prev_count = clamp_upto(st.prev_count, limit);
	if (st.window_start_ms > start) {
		/*
		 * The clock went backwards: decide as at the start of the
		 * stored window, whose counts stand, so no step back frees
		 * quota. Delays are still measured from the real now_ms.
		 */
		start = st.window_start_ms;
		now = start;
	} else if (st.window_start_ms == start - w) {
		st.prev_count = st.count;
		st.count = 0;
		st.window_start_ms = start;
	} else if (st.window_start_ms < start) {
		st.prev_count = 0;
		st.count = 0;
		st.window_start_ms = start;
	}
	e = now - start;    /* in [0, w) */

	used = (i128)st.prev_count * (w - e) + (i128)st.count * w;
	d->limit = limit;
	if (used + (i128)(c - 1) * w < (i128)limit * w && !over) {
		st.count += c;
		st.tat_us = 0;
		st.expires_ms = start + 2 * w;
		/*
		 * The k-th further request at this instant is admitted
		 * while (k - 1) * W < room: ceil(room / W) of them.
		 */
		room = (i128)limit * w - (i128)st.prev_count * (w - e) -
		    (i128)st.count * w;
		d->admitted = true;
		d->remaining = room > 0 ? ceil_div(room, w) : 0;
		d->reset_ms = st.expires_ms - now_ms;
		d->retry_ms = 0;
		d->next_ms = sw_next_ms(w, e, st.prev_count, room,
		    d->remaining) + (now - now_ms);
		*out = st;
		return RLG_OK;
	}

	/* Refused: what is left to requests of cost 1, as above. */
	room = (i128)limit * w - used;
	d->admitted = false;
	d->remaining = room > 0 ? ceil_div(room, w) : 0;
	*out = *in;
	if (used + (i128)(c - 1) * w < (i128)limit * w) {
		never(d);               /* cost > limit, the quota there */
		return RLG_OK;
	}

	d->retry_ms = sw_retry_ms(w, e, limit, c, &st) + (now - now_ms);
	d->reset_ms = d->retry_ms;
	d->next_ms = d->retry_ms;
	return RLG_OK;
}

/*
 * When a refused sliding window request of cost c would pass, in ms from
 * now (the now it decided at, e ms into the window; st the counts it
 * decided on). In the next window prev becomes count and count 0: it
 * admits at its e'-th millisecond, the first with
 *   count * (W - e') < R = (limit - c + 1) * W    (R >= W),
 * e' = 0 when count * W < R, else W - (R - 1) / count (at most W: the
 * window after that is empty and admits anyway). c = 1: the first
 * millisecond unless count == limit, then one later. Earlier, inside this
 * window, only the decay of prev can help: at x ms before the window's
 * end it admits iff prev * x < room = (limit - count - c + 1) * W, i.e.
 * x <= (room - 1) / prev.
 */
static int64_t
sw_retry_ms(int64_t w, int64_t e, int64_t limit, int64_t c,
    const struct rlg_state *st)
{
	int64_t retry;
	i128 room, x;

	room = (i128)(limit - c + 1) * w;
	retry = w - e;
	if (st->count > 0 && (i128)st->count * w >= room)
		retry += w - (int64_t)((room - 1) / st->count);
	room = (i128)(limit - st->count - c + 1) * w;
	if (st->prev_count > 0 && room >= 1) {
		x = (room - 1) / st->prev_count;
		if (x >= 1 && x < w - e && (w - e) - x < retry)
			retry = (w - e) - (int64_t)x;
	}
	return retry;
}

/*
 * When an admitted sliding window's quota first grows, in ms from now
 * (the now it decided at), if no other request comes. room = limit * W -
 * prev * (W - e) - count * W (after the admitted request, maybe <= 0) and
 * remaining = ceil(room / W) (0 when room <= 0). As time passes room only
 * grows, and continuously: x ms later, still inside this window, it is
 * room + prev * x; at the window's end (x = W - e) that is (limit - count)
 * * W, which is also what the next window starts from (prev' = count,
 * count' = 0: room' = limit * W - count * (W - e')), whose room then grows
 * by count per ms up to limit * W at its end (the state fresh). The quota
 * grows when room' > remaining * W:
 *   inside this window (the window's end included: the next one starts
 *     from the same room), when prev * x > gap = remaining * W - room
 *     (>= 0, as remaining is room / W rounded up): at x = gap / prev + 1,
 *     if that is at most W - e;
 *   else in the next window. Not before its end means (limit - count) * W
 *     <= remaining * W, and remaining <= limit - count (room is at most
 *     (limit - count) * W), so remaining = limit - count exactly: the
 *     first e' with (limit - count) * W + count * e' > remaining * W is
 *     e' = 1 (count >= 1 after the admission), W - e + 1 from now, within
 *     reset_ms (2 W - e).
 * gap reaches limit * W: 128 bits, as above.
 */
static int64_t
sw_next_ms(int64_t w, int64_t e, int64_t prev, i128 room, int64_t remaining)
{
	i128 gap, x;

	if (prev > 0) {
		gap = (i128)remaining * w - room;
		x = gap / prev + 1;
		if (x <= w - e)
			return (int64_t)x;
	}
	return (w - e) + 1;
}

/*
 * The token bucket as GCRA (the generic cell rate algorithm of ATM, as in
 * redis-cell and nginx's limit_req): one theoretical arrival time per
 * client. The emission interval is rounded up to whole microseconds so the
 * sustained rate never exceeds limit per window (a limit above one per
 * microsecond is thus held to one per microsecond). A clock stepped back
 * only leaves tat further ahead of now: stricter, never looser.
 *
 * A request of cost c is c emission intervals at once: admitted iff
 *   now >= tat + (c - 1) * T - tau,
 * then tat += c * T. The capacity is burst, or tau / T + 1 when the
 * tolerance is capped (the same when it is not): a costlier request is
 * decided as one of the capacity and refused (never).
 */
int
rlg_limiter_token_bucket(const struct rlg_limit *lim,
    const struct rlg_state *in, int64_t now_ms, int64_t cost,
    struct rlg_state *out, struct rlg_decision *d)
{
	int64_t now_us, t_us, tau_us, tat, tat_new, room, cap, c, lhs;
	i128 tau;
	bool over;

	if (!rlg_limiter_policy_ok(lim, RLG_ALG_TOKEN_BUCKET) || !cost_ok(cost))
		return RLG_EINVAL;
	now_ms = rlg_limiter_clamp_time(now_ms);
	now_us = now_ms * 1000;
	t_us = (lim->window_ms * 1000 + lim->limit - 1) / lim->limit;
	tau = (i128)(lim->burst - 1) * t_us;
	tau_us = tau > RLG_GCRA_TAU_MAX_US ? RLG_GCRA_TAU_MAX_US : (int64_t)tau;
	cap = tau_us / t_us + 1;
	over = cost > cap;
	c = over ? cap : cost;
	/*
	 * A stored tat_us beyond now + tau (a clock stepped back, or a
	 * damaged row up to INT64_MAX) is rejected, and that path only
	 * subtracts: no clamp is needed above. lhs = now + tau - (c - 1) *
	 * T is at least now ((c - 1) * T <= tau): tat - lhs cannot
	 * overflow. An admitted tat_new is at most now + tau + T, far below
	 * INT64_MAX.
	 */
	tat = in->tat_us;
	if (tat < now_us)
		tat = now_us;
	lhs = now_us + tau_us - (c - 1) * t_us;

	d->limit = lim->limit;
	if (lhs < tat || over) {
		d->admitted = false;
		/* What is left to requests of cost 1 (none when c = 1). */
		room = now_us + tau_us - tat;
		d->remaining = room < 0 ? 0 : room / t_us + 1;
		d->retry_ms = ceil_div(tat - lhs, 1000);
		d->reset_ms = d->retry_ms;
		d->next_ms = d->retry_ms;
		if (lhs >= tat)
			never(d);       /* cost > capacity, the bucket full */
		*out = *in;
		return RLG_OK;
	}
	tat_new = tat + c * t_us;
	/*
	 * The k-th further request now is admitted while
	 * tat_new + (k - 1) * T - tau <= now: floor(room / T) + 1 of them,
	 * none when room is negative (C's division would round -1 / T up
	 * to 0 and promise one).
	 */
	room = now_us + tau_us - tat_new;
	out->window_start_ms = 0;
	out->count = 0;
	out->prev_count = 0;
	out->tat_us = tat_new;
	out->expires_ms = ceil_div(tat_new, 1000);
	d->admitted = true;
	d->remaining = room < 0 ? 0 : room / t_us + 1;
	d->reset_ms = out->expires_ms - now_ms;
	d->retry_ms = 0;
	/*
	 * room grows by one per us: the next token is there when
	 * floor(room / T) steps up, T - room mod T us from now (a whole T
	 * when room is a multiple), or when room reaches 0 if it is
	 * negative (-room <= T: tat was at most now + tau). Both are
	 * remaining * T - room, which step.lua computes. Rounded up to
	 * whole ms (now_us is whole ms), so at least 1; at most
	 * ceil(T / 1000) <= reset_ms.
	 */
	d->next_ms = ceil_div(room < 0 ? -room : t_us - room % t_us, 1000);
	return RLG_OK;
}

/*
 * The wait of an admitted request under a smoothing policy (limiter.h).
 * b + c * T = tat_new - now <= reset_ms * 1000 < tat_new - now + 1000,
 * so wait_us = reset_ms * 1000 - (max(D, 1) - 1 + c) * T is b - (max(D,
 * 1) - 1) * T rounded up by less than 1 ms. 128 bits: D and c up to
 * 1e9, T up to a year in us.
 */
int64_t
rlg_limiter_wait(const struct rlg_limit *lim, int64_t delay, int64_t cost,
    const struct rlg_decision *d)
{
	const struct rlg_algorithm_desc *a = rlg_algorithm_desc(lim->algorithm);
	int64_t t_us, ahead;
	i128 wait_us;

	if (a == NULL || !a->smooths || delay < 0 || !d->admitted ||
	    !rlg_limiter_policy_ok(lim, lim->algorithm) || !cost_ok(cost) ||
	    d->reset_ms <= 0)
		return 0;
	t_us = (lim->window_ms * 1000 + lim->limit - 1) / lim->limit;
	ahead = (delay > 1 ? delay : 1) - 1 + cost;
	wait_us = (i128)d->reset_ms * 1000 - (i128)ahead * t_us;
	if (wait_us <= 0)
		return 0;
	return ceil_div(wait_us, 1000) < d->reset_ms ?
	    ceil_div(wait_us, 1000) : d->reset_ms - 1;
}

void
rlg_limiter_later(struct rlg_decision *d, int64_t ms)
{
	if (ms <= 0)
		return;
	d->reset_ms = d->reset_ms - ms >= 1 ? d->reset_ms - ms : 1;
	d->next_ms = d->next_ms - ms >= 1 ? d->next_ms - ms : 1;
	if (d->next_ms > d->reset_ms)
		d->next_ms = d->reset_ms;
	if (!d->admitted)
		d->retry_ms = d->retry_ms - ms >= 1 ? d->retry_ms - ms : 1;
}

/*
 * The first entry of the ascending log_ms[0..n) inside a window that
 * began after since: the first with log_ms[i] > since, or n.
 */
static size_t
log_first_in(const int64_t *log_ms, size_t n, int64_t since)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (log_ms[mid] > since)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * The sliding log: exact, one timestamp per admitted unit. The store
 * passes the log; entries <= now - window (stale, if the store has not
 * dropped them yet) are skipped, so only the ascending in-window suffix
 * counts. A request of cost c is admitted iff m + c <= limit (m the
 * entries in the window), and the store then appends c entries at now.
 * When it does not fit, it is admitted again once its oldest m + c -
 * limit entries have slid out: at log_ms[n + c - limit - 1] + window
 * (c = 1: log_ms[n - limit]). A c above limit never fits: decided as
 * c = limit, the time until the log is empty (never, if it is).
 */
int
rlg_limiter_sliding_log(const struct rlg_limit *lim,
    const int64_t *log_ms, size_t n, int64_t now_ms, int64_t cost,
    bool *append, struct rlg_state *out, struct rlg_decision *d)
{
	struct rlg_state in = { 0 };
	int rc;

	if (append != NULL)
		*append = false;
	if (append == NULL || out == NULL || !ban_ok(lim))
		return RLG_EINVAL;
	if (lim->ban_ms > 0)
		in = *out;      /* the stored row: its ban */
	if (ban_holds(lim, &in, now_ms, out, d))
		return RLG_OK;
	rc = sliding_log_core(lim, log_ms, n, now_ms, cost, append, out, d);
	if (rc == RLG_OK)
		ban_count(lim, &in, now_ms, out, d);
	return rc;
}

/* The sliding log's decision, without the ban: as limiter.h says. */
static int
sliding_log_core(const struct rlg_limit *lim,
    const int64_t *log_ms, size_t n, int64_t now_ms, int64_t cost,
    bool *append, struct rlg_state *out, struct rlg_decision *d)
{
	int64_t w, limit, oldest, newest, c;
	size_t lo, m;
	bool over;

	if (append != NULL)
		*append = false;
	if (append == NULL || (log_ms == NULL && n > 0) ||
	    !rlg_limiter_policy_ok(lim, RLG_ALG_SLIDING_LOG) || !cost_ok(cost))
		return RLG_EINVAL;
	w = lim->window_ms;
	limit = lim->limit;
	over = cost > limit;
	c = over ? limit : cost;
	now_ms = rlg_limiter_clamp_time(now_ms);

	lo = log_first_in(log_ms, n, now_ms - w);
	m = n - lo;

	out->prev_count = 0;
	out->tat_us = 0;
	d->limit = limit;
	if ((int64_t)m + c <= limit && !over) {
		/* After the append: now joins the log (maybe not last). */
		oldest = now_ms;
		newest = now_ms;
		if (m > 0 && log_ms != NULL) {
			if (rlg_limiter_clamp_time(log_ms[lo]) < oldest)
				oldest = rlg_limiter_clamp_time(log_ms[lo]);
			if (rlg_limiter_clamp_time(log_ms[n - 1]) > newest)
				newest = rlg_limiter_clamp_time(log_ms[n - 1]);
		}
		*append = true;
		out->count = (int64_t)m + c;
		out->window_start_ms = oldest;
		out->expires_ms = newest + w;
		d->admitted = true;
		d->remaining = limit - (int64_t)m - c;
		d->reset_ms = out->expires_ms - now_ms;
		d->retry_ms = 0;
		/*
		 * The quota grows when the oldest entry (now itself, for a
		 * fresh log) slides out: it is inside the window, so at
		 * least 1 ms away.
		 */
		d->next_ms = oldest + w - now_ms;
		if (d->next_ms < 1)
			d->next_ms = 1;
		return RLG_OK;
	}

	d->admitted = false;
	d->remaining = (int64_t)m < limit ? limit - (int64_t)m : 0;
	if (m == 0 || log_ms == NULL) {
		/* c > limit, the log empty: nothing to wait for. */
		out->count = 0;
		out->window_start_ms = 0;
		out->expires_ms = 0;
		never(d);
		return RLG_OK;
	}
	/*
	 * Full for c (or overfull: a caller that passed n > limit). m + c
	 * > limit means n + c - limit - 1 >= lo: that entry is inside the
	 * window, so the delay is at least 1 ms.
	 */
	out->count = (int64_t)m;
	out->window_start_ms = rlg_limiter_clamp_time(log_ms[lo]);
	out->expires_ms = rlg_limiter_clamp_time(log_ms[n - 1]) + w;
	if (out->expires_ms < now_ms + 1)
		out->expires_ms = now_ms + 1;     /* an unsorted log */
	d->retry_ms = rlg_limiter_clamp_time(log_ms[n + (size_t)c -
	    (size_t)limit - 1]) + w - now_ms;
	if (d->retry_ms < 1)
		d->retry_ms = 1;                  /* an unsorted log */
	d->reset_ms = d->retry_ms;
	d->next_ms = d->retry_ms;
	return RLG_OK;
}
