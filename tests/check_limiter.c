/*
 * check_limiter.c: the four algorithms at exact boundaries, with fixed
 * times (no clock, no sleeps): what the seed promises, the boundary burst
 * it warns about and what each cure admits instead, a clock going
 * backwards, huge gaps and extreme policies, and bad policies.
 *
 * Most tests drive a simulated client (struct sim) that plays the store:
 * it keeps the row (and, for the sliding log, its own ascending array,
 * dropping entries <= now - window and appending on admit). Every decision
 * it sees is checked against the contract of limiter.h: a rejection leaves
 * the state bit-identical, retry_ms is exact (now + retry_ms - 1 rejected,
 * now + retry_ms admitted), remaining is exact (that many more admitted at
 * the same instant, then a rejection) and at now + reset_ms the state
 * decides as a fresh client's.
 *
 * Compile with -DRLG_LIMITER_REPORT to print the measured per-window
 * maxima of the property tests.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#ifdef RLG_LIMITER_REPORT
#include <stdio.h>
#endif

#include "check_rlgate.h"
#include "fixture.h"
#include "limiter.h"
#include "util.h"

/* 12:00:00 UTC on some day, a multiple of 60 s. */
#define T0 ((int64_t)1767268800000)
#define MINUTE_MS ((int64_t)60000)
#define HOUR_MS ((int64_t)3600000)
#define YEAR_MS ((int64_t)365 * 24 * HOUR_MS)
#define WINDOW_MS_MAX (RLG_WINDOW_S_MAX * 1000)

/* The simulated store's log: enough for every limit the sims use. */
#define SIM_LOG_CAP 1024
/* Admitted requests one property run may record. */
#define RUN_CAP 65536

/*
 * Check marks every passing ck_assert (a write to its runner): the
 * helpers and property loops below run millions of checks, so they call
 * Check only when one fails.
 */
#define REQUIRE(expr) do {						\
	if (!(expr))							\
		ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #expr);	\
} while (0)
#define REQUIRE_EQ(a, b) do {						\
	long long req_a_ = (long long)(a), req_b_ = (long long)(b);	\
									\
	if (req_a_ != req_b_)						\
		ck_abort_msg("%s:%d: %s == %lld, %s == %lld", __FILE__,	\
		    __LINE__, #a, req_a_, #b, req_b_);			\
} while (0)

/* Token bucket burst, relative to the limit. */
enum burst_kind { B_NONE, B_ONE, B_LIMIT, B_MORE };

struct sim {
	struct rlg_limit p;
	struct rlg_state st;         /* the stored row */
	int64_t log[SIM_LOG_CAP];    /* sliding_log: ascending, as stored */
	size_t n;
};

/* The real times of the admitted requests of one run, ascending. */
struct run {
	int64_t t[RUN_CAP];
	size_t n;
};

/* One request of a table: when, and what must come of it. */
struct step_row {
	int64_t at;          /* ms after T0 */
	bool admitted;
	int64_t remaining;
	int64_t reset_ms;
	int64_t retry_ms;
};

/* One algorithm as the property tests run it. */
struct alg_case {
	enum rlg_algorithm alg;
	enum burst_kind burst;
	const char *label;
};

static struct rlg_limit policy(int64_t limit, int64_t window_s);
static struct rlg_limit mkpolicy(enum rlg_algorithm alg, int64_t limit,
    int64_t window_ms, int64_t burst);
static int64_t burst_of(enum burst_kind b, int64_t limit);
static int hit(const struct rlg_limit *p, struct rlg_state *st, int64_t now,
    struct rlg_decision *d);
static int64_t clamp_ms(int64_t t);
static int64_t gcra_t_us(const struct rlg_limit *p);
static void sim_init(struct sim *s, enum rlg_algorithm alg, int64_t limit,
    int64_t window_ms, int64_t burst);
static size_t sim_first(const struct sim *s, int64_t now);
static void sim_decide(const struct sim *s, int64_t now,
    struct rlg_state *out, struct rlg_decision *d, bool *append);
static void sim_decide_cost(const struct sim *s, int64_t now, int64_t cost,
    struct rlg_state *out, struct rlg_decision *d, bool *append);
static void sim_apply(struct sim *s, int64_t now,
    const struct rlg_state *out);
static void sim_apply_cost(struct sim *s, int64_t now, int64_t cost,
    const struct rlg_state *out);
static int64_t sim_capacity(const struct sim *s);
static void check_cost(struct sim *s, int64_t now, int64_t cost,
    struct rlg_decision *d);
static void cost_table(struct sim *s, const int64_t *costs,
    const struct step_row *rows, size_t n);
static bool sim_fixed_clamped(const struct sim *s, int64_t now);
static bool sim_hit(struct sim *s, int64_t now, struct rlg_decision *d);
static int64_t sim_burst_at(const struct sim *s, int64_t now);
static void check_retry(const struct sim *s, int64_t now,
    const struct rlg_decision *d);
static void check_remaining(const struct sim *s, int64_t now,
    const struct rlg_decision *d);
static void check_fresh_at_reset(const struct sim *s, int64_t now,
    const struct rlg_decision *d);
static void check_next(const struct sim *s, int64_t now,
    const struct rlg_decision *d);
static void check_retry_brute(const struct sim *s, int64_t now,
    int64_t horizon);
static int64_t max_in_span(const struct run *r, int64_t w);
static int64_t count_between(const struct run *r, int64_t from, int64_t to);
static bool run_hit(struct sim *s, struct run *r, int64_t real,
    int64_t reported);
static int64_t span_bound(const struct sim *s);
static int64_t seed_scenario(enum rlg_algorithm alg, int64_t per_second);
static void run_table(struct sim *s, const struct step_row *rows, size_t n);
static void sw_stored(struct sim *s, int64_t limit, int64_t window_ms,
    int64_t start, int64_t count, int64_t prev);

static const struct alg_case alg_cases[] = {
	{ RLG_ALG_FIXED_WINDOW, B_NONE, "fixed_window" },
	{ RLG_ALG_SLIDING_WINDOW, B_NONE, "sliding_window" },
	{ RLG_ALG_TOKEN_BUCKET, B_LIMIT, "token_bucket burst=limit" },
	{ RLG_ALG_TOKEN_BUCKET, B_ONE, "token_bucket burst=1" },
	{ RLG_ALG_TOKEN_BUCKET, B_MORE, "token_bucket burst=limit+40" },
	{ RLG_ALG_SLIDING_LOG, B_NONE, "sliding_log" },
};
#define N_ALG_CASES (sizeof alg_cases / sizeof alg_cases[0])

/* The runs are too big for a test's stack. */
static struct run run_a, run_b;

static struct rlg_limit
policy(int64_t limit, int64_t window_s)
{
	return mkpolicy(RLG_ALG_FIXED_WINDOW, limit, window_s * 1000, 0);
}

static struct rlg_limit
mkpolicy(enum rlg_algorithm alg, int64_t limit, int64_t window_ms,
    int64_t burst)
{
	struct rlg_limit p = { .algorithm = alg,
	    .limit = limit, .window_ms = window_ms, .burst = burst };

	return p;
}

static int64_t
burst_of(enum burst_kind b, int64_t limit)
{
	switch (b) {
	case B_ONE:
		return 1;
	case B_LIMIT:
		return limit;
	case B_MORE:
		return limit + 40;
	case B_NONE:
		break;
	}
	return 0;
}

/* Sends one request at now; returns whether it was admitted. */
static int
hit(const struct rlg_limit *p, struct rlg_state *st, int64_t now,
    struct rlg_decision *d)
{
	REQUIRE_EQ(rlg_limiter_step(p, st, now, 1, st, d), RLG_OK);
	return d->admitted;
}

static int64_t
clamp_ms(int64_t t)
{
	return t < 0 ? 0 : t > RLG_TIME_MS_MAX ? RLG_TIME_MS_MAX : t;
}

/* The emission interval as limiter.h states it: rounded up. */
static int64_t
gcra_t_us(const struct rlg_limit *p)
{
	return (p->window_ms * 1000 + p->limit - 1) / p->limit;
}

static void
sim_init(struct sim *s, enum rlg_algorithm alg, int64_t limit,
    int64_t window_ms, int64_t burst)
{
	memset(s, 0, sizeof *s);
	s->p = mkpolicy(alg, limit, window_ms, burst);
}

/* The first entry the store would read at now (the rest are stale). */
static size_t
sim_first(const struct sim *s, int64_t now)
{
	size_t k = 0;

	while (k < s->n && s->log[k] <= now - s->p.window_ms)
		k++;
	return k;
}

/*
 * One decision at now, storing nothing, checked against the contract
 * every algorithm shares.
 */
static void
sim_decide(const struct sim *s, int64_t now, struct rlg_state *out,
    struct rlg_decision *d, bool *append)
{
	sim_decide_cost(s, now, 1, out, d, append);
}

/* The same for a request of cost units. */
static void
sim_decide_cost(const struct sim *s, int64_t now, int64_t cost,
    struct rlg_state *out, struct rlg_decision *d, bool *append)
{
	size_t k;

	memset(d, 0xa5, sizeof *d);
	if (s->p.algorithm == RLG_ALG_SLIDING_LOG) {
		k = sim_first(s, now);
		REQUIRE_EQ(rlg_limiter_sliding_log(&s->p, s->log + k,
		    s->n - k, now, cost, append, out, d), RLG_OK);
	} else {
		REQUIRE_EQ(rlg_limiter_step(&s->p, &s->st, now, cost, out, d),
		    RLG_OK);
		*append = d->admitted;
	}
	REQUIRE_EQ(d->limit, s->p.limit);
	REQUIRE(d->reset_ms >= 1);
	if (d->admitted) {
		REQUIRE(*append);
		REQUIRE_EQ(d->retry_ms, 0);
		REQUIRE(d->remaining >= 0);
		REQUIRE(d->next_ms >= 1 && d->next_ms <= d->reset_ms);
		if (!sim_fixed_clamped(s, now))
			REQUIRE_EQ(out->expires_ms,
			    clamp_ms(now) + d->reset_ms);
	} else {
		REQUIRE(!*append);
		/* A refusal of cost c > 1 may leave units to cost-1 requests. */
		if (cost == 1)
			REQUIRE_EQ(d->remaining, 0);
		else
			REQUIRE(d->remaining >= 0 &&
			    d->remaining <= sim_capacity(s));
		REQUIRE(d->retry_ms >= 1);
		REQUIRE_EQ(d->reset_ms, d->retry_ms);
		REQUIRE_EQ(d->next_ms, d->retry_ms);
		if (s->p.algorithm != RLG_ALG_SLIDING_LOG)
			REQUIRE(memcmp(out, &s->st, sizeof *out) == 0);
	}
}

/* What the store does with an admitted decision. */
static void
sim_apply(struct sim *s, int64_t now, const struct rlg_state *out)
{
	sim_apply_cost(s, now, 1, out);
}

/* The same for a request of cost units: cost entries at now. */
static void
sim_apply_cost(struct sim *s, int64_t now, int64_t cost,
    const struct rlg_state *out)
{
	size_t k, i;
	int64_t c;

	s->st = *out;
	if (s->p.algorithm != RLG_ALG_SLIDING_LOG)
		return;
	k = sim_first(s, now);
	memmove(s->log, s->log + k, (s->n - k) * sizeof s->log[0]);
	s->n -= k;
	for (c = 0; c < cost; c++) {
		REQUIRE(s->n < SIM_LOG_CAP);
		/* A clock that went back appends before later entries. */
		for (i = s->n; i > 0 && s->log[i - 1] > now; i--)
			s->log[i] = s->log[i - 1];
		s->log[i] = now;
		s->n++;
	}
}

/*
 * The largest cost the policy can ever admit: limit, burst for the
 * token bucket (the sims' bursts leave the tolerance uncapped).
 */
static int64_t
sim_capacity(const struct sim *s)
{
	return s->p.algorithm == RLG_ALG_TOKEN_BUCKET ? s->p.burst :
	    s->p.limit;
}

/*
 * The fixed window measures reset and retry from the start of a stored
 * window that is later than now (it clamps now there): then they are
 * lower bounds, not exact.
 */
static bool
sim_fixed_clamped(const struct sim *s, int64_t now)
{
	now = clamp_ms(now);
	return s->p.algorithm == RLG_ALG_FIXED_WINDOW && s->st.count > 0 &&
	    now - now % s->p.window_ms < s->st.window_start_ms;
}

/* One request, stored if admitted, with every exactness check. */
static bool
sim_hit(struct sim *s, int64_t now, struct rlg_decision *d)
{
	struct rlg_state out;
	bool append;

	sim_decide(s, now, &out, d, &append);
	if (!d->admitted) {
		check_retry(s, now, d);
		return false;
	}
	sim_apply(s, now, &out);
	check_remaining(s, now, d);
	check_fresh_at_reset(s, now, d);
	check_next(s, now, d);
	return true;
}

/* How many requests would be admitted at now, one after another. */
static int64_t
sim_burst_at(const struct sim *s, int64_t now)
{
	struct rlg_state out;
	struct rlg_decision d;
	bool append;

	sim_decide(s, now, &out, &d, &append);
	return d.admitted ? 1 + d.remaining : 0;
}

/* Rejected at now: now + retry - 1 is rejected, now + retry admitted. */
static void
check_retry(const struct sim *s, int64_t now, const struct rlg_decision *d)
{
	struct rlg_state out;
	struct rlg_decision d2;
	bool append;

	if (d->retry_ms > 1) {
		sim_decide(s, now + d->retry_ms - 1, &out, &d2, &append);
		if (d2.admitted)
			ck_abort_msg("admitted before retry_ms %lld",
			    (long long)d->retry_ms);
	}
	/* Beyond year 9999 the limiter sees one instant: nothing to probe. */
	if (sim_fixed_clamped(s, now) || now + d->retry_ms > RLG_TIME_MS_MAX)
		return;
	sim_decide(s, now + d->retry_ms, &out, &d2, &append);
	if (!d2.admitted)
		ck_abort_msg("rejected at retry_ms %lld",
		    (long long)d->retry_ms);
}

/*
 * s has just stored an admitted request at now: exactly d->remaining more
 * are admitted at now, then one is rejected. The windowed algorithms and
 * the bucket are checked in O(1) by writing the state those requests
 * would leave; the log by sending them.
 */
static void
check_remaining(const struct sim *s, int64_t now, const struct rlg_decision *d)
{
	struct sim *c;
	struct sim copy;
	struct rlg_decision d2;
	int64_t i;

	if (s->p.algorithm == RLG_ALG_SLIDING_LOG) {
		REQUIRE(d->remaining <= SIM_LOG_CAP);
		copy = *s;
		c = &copy;
		for (i = 0; i < d->remaining; i++) {
			struct rlg_state out;
			bool append;

			sim_decide(c, now, &out, &d2, &append);
			REQUIRE(d2.admitted);
			sim_apply(c, now, &out);
		}
		REQUIRE_EQ(sim_burst_at(c, now), 0);
		return;
	}
	copy.p = s->p;
	copy.n = 0;
	if (d->remaining > 0) {
		copy.st = s->st;
		if (s->p.algorithm == RLG_ALG_TOKEN_BUCKET)
			copy.st.tat_us += (d->remaining - 1) * gcra_t_us(&s->p);
		else
			copy.st.count += d->remaining - 1;
		REQUIRE(sim_burst_at(&copy, now) >= 1);
	}
	copy.st = s->st;
	if (s->p.algorithm == RLG_ALG_TOKEN_BUCKET)
		copy.st.tat_us += d->remaining * gcra_t_us(&s->p);
	else
		copy.st.count += d->remaining;
	REQUIRE_EQ(sim_burst_at(&copy, now), 0);
}

/* At now + reset_ms the state decides exactly as a fresh client's. */
static void
check_fresh_at_reset(const struct sim *s, int64_t now,
    const struct rlg_decision *d)
{
	struct sim fresh;
	struct rlg_state out1, out2;
	struct rlg_decision d1, d2;
	bool a1, a2;

	if (sim_fixed_clamped(s, now) || now + d->reset_ms > RLG_TIME_MS_MAX)
		return;
	fresh.p = s->p;
	fresh.n = 0;
	memset(&fresh.st, 0, sizeof fresh.st);
	sim_decide(s, now + d->reset_ms, &out1, &d1, &a1);
	sim_decide(&fresh, now + d->reset_ms, &out2, &d2, &a2);
	REQUIRE(d1.admitted && d2.admitted && a1 && a2);
	REQUIRE_EQ(d1.remaining, d2.remaining);
	REQUIRE_EQ(d1.reset_ms, d2.reset_ms);
	REQUIRE(memcmp(&out1, &out2, sizeof out1) == 0);
}

/*
 * s has just stored an admitted request at now: the quota available (the
 * requests admitted one after another, d->remaining at now) is the same
 * at now + next_ms - 1 and larger at now + next_ms. The quota only grows
 * while nothing arrives, so these two probes pin next_ms down.
 */
static void
check_next(const struct sim *s, int64_t now, const struct rlg_decision *d)
{
	int64_t got;

	if (sim_fixed_clamped(s, now) || now + d->next_ms > RLG_TIME_MS_MAX)
		return;
	if (d->next_ms > 1) {
		got = sim_burst_at(s, now + d->next_ms - 1);
		if (got != d->remaining)
			ck_abort_msg("%s: %lld available before next_ms %lld,"
			    " remaining %lld", rlg_algorithm_name(s->p.algorithm),
			    (long long)got, (long long)d->next_ms,
			    (long long)d->remaining);
	}
	got = sim_burst_at(s, now + d->next_ms);
	if (got <= d->remaining)
		ck_abort_msg("%s: %lld available at next_ms %lld, remaining"
		    " %lld", rlg_algorithm_name(s->p.algorithm),
		    (long long)got, (long long)d->next_ms,
		    (long long)d->remaining);
}

/* Rejected at now: retry_ms is the first admitted ms, found by scanning. */
static void
check_retry_brute(const struct sim *s, int64_t now, int64_t horizon)
{
	struct rlg_state out;
	struct rlg_decision d, d2;
	bool append;
	int64_t t;

	sim_decide(s, now, &out, &d, &append);
	REQUIRE(!d.admitted);
	for (t = 1; t <= horizon; t++) {
		sim_decide(s, now + t, &out, &d2, &append);
		if (d2.admitted)
			break;
	}
	REQUIRE_EQ(d.retry_ms, t);
}

/* The most admissions in any span of w ms (spans ending at one). */
static int64_t
max_in_span(const struct run *r, int64_t w)
{
	size_t i = 0, j;
	int64_t best = 0;

	for (j = 0; j < r->n; j++) {
		while (r->t[j] - r->t[i] >= w)
			i++;
		if ((int64_t)(j - i + 1) > best)
			best = (int64_t)(j - i + 1);
	}
	return best;
}

/* Admissions at real times in [from, to). */
static int64_t
count_between(const struct run *r, int64_t from, int64_t to)
{
	size_t j;
	int64_t c = 0;

	for (j = 0; j < r->n; j++)
		c += r->t[j] >= from && r->t[j] < to;
	return c;
}

/* One request at real time real, which the gateway clock reads as reported. */
static bool
run_hit(struct sim *s, struct run *r, int64_t real, int64_t reported)
{
	struct rlg_decision d;

	if (!sim_hit(s, reported, &d))
		return false;
	REQUIRE(r->n < RUN_CAP);
	r->t[r->n++] = real;
	return true;
}

/* The most any span of one window may admit, per algorithm. */
static int64_t
span_bound(const struct sim *s)
{
	switch (s->p.algorithm) {
	case RLG_ALG_FIXED_WINDOW:
		return 2 * s->p.limit;
	case RLG_ALG_SLIDING_WINDOW:
		/* not 2 * limit - 1: see test_sliding_window_worst_span */
		return 2 * s->p.limit;
	case RLG_ALG_TOKEN_BUCKET:
		return s->p.limit + s->p.burst - 1;
	case RLG_ALG_SLIDING_LOG:
		return s->p.limit;
	}
	return 0;
}

/*
 * The seed's scenario, 60 per 60 s (burst = limit): a fresh client sends
 * per_second requests spread over the last second of a window and as many
 * over the first second of the next. Returns how many were admitted in
 * those two seconds.
 */
static int64_t
seed_scenario(enum rlg_algorithm alg, int64_t per_second)
{
	struct sim s;
	int64_t i, admitted = 0;
	struct rlg_decision d;

	sim_init(&s, alg, 60, MINUTE_MS, 60);
	for (i = 0; i < per_second; i++)
		admitted += sim_hit(&s, T0 + MINUTE_MS - 1000 +
		    i * 1000 / per_second, &d);
	for (i = 0; i < per_second; i++)
		admitted += sim_hit(&s, T0 + MINUTE_MS + i * 1000 / per_second,
		    &d);
	return admitted;
}

/* ---- core: the fixed window of the seed (the original tests) ---- */

START_TEST(test_admits_limit_then_rejects)
{
	struct rlg_limit p = policy(5, 60);
	struct rlg_state st = { 0 };
	struct rlg_decision d;
	int i;

	for (i = 0; i < 5; i++) {
		ck_assert(hit(&p, &st, T0 + 1000 * i, &d));
		ck_assert_int_eq(d.limit, 5);
		ck_assert_int_eq(d.remaining, 4 - i);
		ck_assert_int_eq(d.reset_ms, 60000 - 1000 * i);
		ck_assert_int_eq(d.retry_ms, 0);
	}
	ck_assert_int_eq(st.count, 5);
	ck_assert_int_eq(st.window_start_ms, T0);
	ck_assert_int_eq(st.expires_ms, T0 + 60000);

	ck_assert(!hit(&p, &st, T0 + 48000, &d));
	ck_assert_int_eq(d.remaining, 0);
	ck_assert_int_eq(d.reset_ms, 12000);
	ck_assert_int_eq(d.retry_ms, 12000);
	ck_assert_int_eq(st.count, 5);      /* a rejection consumes nothing */
}
END_TEST

START_TEST(test_window_aligned_and_resets)
{
	struct rlg_limit p = policy(2, 60);
	struct rlg_state st = { 0 };
	struct rlg_decision d;

	/* 45 s into a window: the window still started at T0. */
	ck_assert(hit(&p, &st, T0 + 45000, &d));
	ck_assert_int_eq(st.window_start_ms, T0);
	ck_assert_int_eq(d.reset_ms, 15000);
	ck_assert(hit(&p, &st, T0 + 59999, &d));
	ck_assert_int_eq(d.reset_ms, 1);
	ck_assert(!hit(&p, &st, T0 + 59999, &d));
	/* The first millisecond of the next window starts afresh. */
	ck_assert(hit(&p, &st, T0 + 60000, &d));
	ck_assert_int_eq(st.window_start_ms, T0 + 60000);
	ck_assert_int_eq(st.count, 1);
	ck_assert_int_eq(d.remaining, 1);
	ck_assert_int_eq(d.reset_ms, 60000);
}
END_TEST

/* The seed's warning, measured: 2x the limit within two seconds. */
START_TEST(test_boundary_burst)
{
	struct rlg_limit p = policy(60, 60);
	struct rlg_state st = { 0 };
	struct rlg_decision d;
	int i, admitted = 0;

	for (i = 0; i < 100; i++)
		admitted += hit(&p, &st, T0 + 59000 + i, &d);
	for (i = 0; i < 100; i++)
		admitted += hit(&p, &st, T0 + 60000 + i, &d);
	ck_assert_int_eq(admitted, 120);
}
END_TEST

/* ---- core: names, dispatch, the other algorithms step by step ---- */

START_TEST(test_names_and_dispatch)
{
	static const enum rlg_algorithm algs[] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET };
	static int (*const fns[])(const struct rlg_limit *,
	    const struct rlg_state *, int64_t, int64_t, struct rlg_state *,
	    struct rlg_decision *) = { rlg_limiter_fixed_window,
	    rlg_limiter_sliding_window, rlg_limiter_token_bucket };
	struct rlg_limit p;
	struct rlg_state in = { T0, 2, 1, 0, T0 + 1, 0, 0, 0 }, o1, o2;
	struct rlg_decision d1, d2;
	size_t i;

	ck_assert_str_eq(rlg_algorithm_name(RLG_ALG_FIXED_WINDOW),
	    "fixed_window");
	ck_assert_str_eq(rlg_algorithm_name(RLG_ALG_SLIDING_WINDOW),
	    "sliding_window");
	ck_assert_str_eq(rlg_algorithm_name(RLG_ALG_TOKEN_BUCKET),
	    "token_bucket");
	ck_assert_str_eq(rlg_algorithm_name(RLG_ALG_SLIDING_LOG),
	    "sliding_log");
	ck_assert_ptr_null(rlg_algorithm_name((enum rlg_algorithm)99));

	for (i = 0; i < 3; i++) {
		p = mkpolicy(algs[i], 5, 10000, 5);
		memset(&o1, 0, sizeof o1);
		memset(&o2, 0, sizeof o2);
		ck_assert_int_eq(rlg_limiter_step(&p, &in, T0 + 7, 1, &o1, &d1),
		    RLG_OK);
		ck_assert_int_eq(fns[i](&p, &in, T0 + 7, 1, &o2, &d2), RLG_OK);
		ck_assert(memcmp(&o1, &o2, sizeof o1) == 0);
		ck_assert(d1.admitted == d2.admitted);
		ck_assert_int_eq(d1.remaining, d2.remaining);
		ck_assert_int_eq(d1.reset_ms, d2.reset_ms);
	}
	/* The sliding log needs its log: not through rlg_limiter_step. */
	p = mkpolicy(RLG_ALG_SLIDING_LOG, 5, 10000, 0);
	ck_assert_int_eq(rlg_limiter_step(&p, &in, T0, 1, &o1, &d1), RLG_EINVAL);
	p.algorithm = (enum rlg_algorithm)99;
	ck_assert_int_eq(rlg_limiter_step(&p, &in, T0, 1, &o1, &d1), RLG_EINVAL);
}
END_TEST

/*
 * The descriptor table: a row per algorithm, in enum order, named as the
 * config's words; a step unless the algorithm keeps a log; a limit cap
 * with its reason; and what the rest of rlgate asks of it (burst, log,
 * capacity) follows the row.
 */
START_TEST(test_descriptors)
{
	const struct rlg_algorithm_desc *a;
	struct rlg_limit p;
	int i;

	for (i = 0; i < RLG_ALG_COUNT; i++) {
		a = rlg_algorithm_desc((enum rlg_algorithm)i);
		ck_assert_ptr_nonnull(a);
		ck_assert_int_eq((int)a->algorithm, i);
		ck_assert_str_eq(a->name, rlg_algorithm_name(a->algorithm));
		ck_assert(a->keeps_log == (a->step == NULL));
		ck_assert_int_ge(a->limit_max, 1);
		ck_assert_int_le(a->limit_max, RLG_LIMIT_MAX);
		ck_assert(a->limit_why == NULL ? a->limit_max == RLG_LIMIT_MAX :
		    a->limit_max < RLG_LIMIT_MAX);
		p = mkpolicy(a->algorithm, 5, 10000, 7);
		ck_assert(rlg_limiter_has_burst(&p) == a->has_burst);
		ck_assert(rlg_limiter_keeps_log(&p) == a->keeps_log);
		ck_assert_int_eq(rlg_limiter_capacity(&p), a->has_burst ? 7 : 5);
	}
	ck_assert_ptr_null(rlg_algorithm_desc((enum rlg_algorithm)RLG_ALG_COUNT));
	ck_assert_ptr_null(rlg_algorithm_desc((enum rlg_algorithm)-1));
	ck_assert(rlg_algorithm_desc(RLG_ALG_TOKEN_BUCKET)->has_burst);
	ck_assert(rlg_algorithm_desc(RLG_ALG_SLIDING_LOG)->keeps_log);
	ck_assert_int_eq(rlg_algorithm_desc(RLG_ALG_SLIDING_LOG)->limit_max,
	    RLG_SLIDING_LOG_LIMIT_MAX);
	p.algorithm = (enum rlg_algorithm)99;
	ck_assert(!rlg_limiter_has_burst(&p) && !rlg_limiter_keeps_log(&p));
}
END_TEST

/*
 * The fixed window stores 0 in the fields it does not own when it admits,
 * and leaves the row bit-identical when it rejects.
 */
START_TEST(test_fixed_unused_fields)
{
	struct rlg_limit p = policy(2, 10);
	struct rlg_state in = { T0, 1, 77, 12345, T0 + 10000, 0, 0, 0 }, out, keep;
	struct rlg_decision d;

	ck_assert_int_eq(rlg_limiter_fixed_window(&p, &in, T0 + 5, 1, &out, &d),
	    RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(out.count, 2);
	ck_assert_int_eq(out.prev_count, 0);
	ck_assert_int_eq(out.tat_us, 0);
	in = out;
	in.prev_count = 77;
	in.tat_us = 12345;
	keep = in;
	memset(&out, 0x5a, sizeof out);
	ck_assert_int_eq(rlg_limiter_fixed_window(&p, &in, T0 + 6, 1, &out, &d),
	    RLG_OK);
	ck_assert(!d.admitted);
	ck_assert(memcmp(&out, &keep, sizeof out) == 0);
}
END_TEST

/*
 * Runs a table through a sim: every decision as listed, and (through
 * sim_hit) every exactness check.
 */
static void
run_table(struct sim *s, const struct step_row *rows, size_t n)
{
	struct rlg_decision d;
	size_t i;

	for (i = 0; i < n; i++) {
		ck_assert_msg(sim_hit(s, T0 + rows[i].at, &d) ==
		    rows[i].admitted, "row %zu (T0 + %lld)", i,
		    (long long)rows[i].at);
		ck_assert_msg(d.remaining == rows[i].remaining,
		    "row %zu: remaining %lld", i, (long long)d.remaining);
		ck_assert_msg(d.reset_ms == rows[i].reset_ms,
		    "row %zu: reset_ms %lld", i, (long long)d.reset_ms);
		ck_assert_msg(d.retry_ms == rows[i].retry_ms,
		    "row %zu: retry_ms %lld", i, (long long)d.retry_ms);
	}
}

/* limit 4 per 10 s: the weighted previous window, step by step. */
START_TEST(test_sliding_window_table)
{
	static const struct step_row rows[] = {
		{ 0, true, 3, 20000, 0 },
		{ 1000, true, 2, 19000, 0 },
		{ 2000, true, 1, 18000, 0 },
		{ 3000, true, 0, 17000, 0 },
		/* count == limit: the next window's first ms is not enough */
		{ 4000, false, 0, 6001, 6001 },
		/* next window, e = 0: prev 4 weighs 4 * 10000 = the limit */
		{ 10000, false, 0, 1, 1 },
		{ 10001, true, 0, 19999, 0 },
		/* 4 * (10000 - e) + 10000 < 40000 from e = 2501 on */
		{ 10002, false, 0, 2499, 2499 },
		{ 12500, false, 0, 1, 1 },
		{ 12501, true, 0, 17499, 0 },
		/* 2501 ms before the end: 4 * 2501 + 2 * 10000 < 40000 */
		{ 17499, true, 0, 12501, 0 },
		/* two windows on: nothing weighs any more */
		{ 35000, true, 3, 15000, 0 },
	};
	struct sim s;

	sim_init(&s, RLG_ALG_SLIDING_WINDOW, 4, 10000, 0);
	run_table(&s, rows, sizeof rows / sizeof rows[0]);
	ck_assert_int_eq(s.st.window_start_ms, T0 + 30000);
	ck_assert_int_eq(s.st.count, 1);
	ck_assert_int_eq(s.st.prev_count, 0);
	ck_assert_int_eq(s.st.tat_us, 0);
	ck_assert_int_eq(s.st.expires_ms, T0 + 50000);
}
END_TEST

/*
 * limit 5 per 5 s, burst 5: T = 1 s, tolerance 4 s. A fresh bucket admits
 * 5 at once (remaining 4, 3, 2, 1, 0), then one per second.
 */
START_TEST(test_token_bucket_table)
{
	static const struct step_row rows[] = {
		{ 0, true, 4, 1000, 0 },
		{ 0, true, 3, 2000, 0 },
		{ 0, true, 2, 3000, 0 },
		{ 0, true, 1, 4000, 0 },
		{ 0, true, 0, 5000, 0 },
		{ 0, false, 0, 1000, 1000 },
		{ 999, false, 0, 1, 1 },
		{ 1000, true, 0, 5000, 0 },
		{ 1500, false, 0, 500, 500 },
		/* 3.5 s idle: 3 back, so this one and 3 more */
		{ 5000, true, 3, 2000, 0 },
		/* long idle: fresh */
		{ 60000, true, 4, 1000, 0 },
	};
	struct sim s;

	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 5, 5000, 5);
	run_table(&s, rows, sizeof rows / sizeof rows[0]);
	ck_assert_int_eq(s.st.tat_us, (T0 + 61000) * 1000);
	ck_assert_int_eq(s.st.expires_ms, T0 + 61000);
	ck_assert_int_eq(s.st.window_start_ms, 0);
	ck_assert_int_eq(s.st.count, 0);
	ck_assert_int_eq(s.st.prev_count, 0);
}
END_TEST

/*
 * A period that is not whole milliseconds: 3 per second gives
 * T = 333334 us (rounded up), so retry_ms rounds up too.
 */
START_TEST(test_token_bucket_sub_ms)
{
	static const struct step_row rows[] = {
		{ 0, true, 0, 334, 0 },
		{ 0, false, 0, 334, 334 },
		{ 333, false, 0, 1, 1 },
		/* tat = max(333334, 334000) + 333334 = 667334 us */
		{ 334, true, 0, 334, 0 },
		{ 667, false, 0, 1, 1 },
		{ 668, true, 0, 334, 0 },
	};
	struct sim s;

	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 3, 1000, 1);
	run_table(&s, rows, sizeof rows / sizeof rows[0]);
	ck_assert_int_eq(s.st.tat_us, T0 * 1000 + 668000 + 333334);
}
END_TEST

/* limit 3 per 10 s, the log fed as the store keeps it. */
START_TEST(test_sliding_log_table)
{
	static const struct step_row rows[] = {
		{ 0, true, 2, 10000, 0 },
		{ 1000, true, 1, 10000, 0 },
		{ 2000, true, 0, 10000, 0 },
		{ 3000, false, 0, 7000, 7000 },
		{ 9999, false, 0, 1, 1 },
		/* T0 slides out at T0 + 10000 exactly */
		{ 10000, true, 0, 10000, 0 },
		{ 10500, false, 0, 500, 500 },
		{ 11000, true, 0, 10000, 0 },
	};
	struct sim s;

	sim_init(&s, RLG_ALG_SLIDING_LOG, 3, 10000, 0);
	run_table(&s, rows, sizeof rows / sizeof rows[0]);
	ck_assert_int_eq(s.st.count, 3);
	ck_assert_int_eq(s.st.window_start_ms, T0 + 2000);
	ck_assert_int_eq(s.st.expires_ms, T0 + 21000);
}
END_TEST

/* ---- boundary: admits exactly what it should, to the millisecond ---- */

START_TEST(test_fixed_edges)
{
	static const struct step_row rows[] = {
		{ 9999, true, 1, 1, 0 },
		{ 9999, true, 0, 1, 0 },
		{ 9999, false, 0, 1, 1 },
		{ 10000, true, 1, 10000, 0 },
		{ 10000, true, 0, 10000, 0 },
		{ 19999, false, 0, 1, 1 },
		{ 20000, true, 1, 10000, 0 },
	};
	struct sim s;

	sim_init(&s, RLG_ALG_FIXED_WINDOW, 2, 10000, 0);
	run_table(&s, rows, sizeof rows / sizeof rows[0]);
}
END_TEST

/*
 * 60 per 60 s with a full previous window: in the next window the c-th
 * request (from 0) needs 60 * (60000 - e) + c * 60000 < 3600000, that is
 * e > 1000 * c: the quota comes back one per second, at e = 1000 c + 1.
 */
START_TEST(test_sliding_window_edges)
{
	struct sim s;
	struct rlg_decision d;
	int64_t c, i;

	sim_init(&s, RLG_ALG_SLIDING_WINDOW, 60, MINUTE_MS, 0);
	for (i = 0; i < 60; i++)
		ck_assert(sim_hit(&s, T0 + MINUTE_MS - 1, &d));
	ck_assert(!sim_hit(&s, T0 + MINUTE_MS - 1, &d));
	ck_assert_int_eq(d.retry_ms, 2);
	for (c = 0; c < 60; c++) {
		ck_assert(!sim_hit(&s, T0 + MINUTE_MS + 1000 * c, &d));
		ck_assert_int_eq(d.retry_ms, 1);
		ck_assert(sim_hit(&s, T0 + MINUTE_MS + 1000 * c + 1, &d));
		ck_assert_int_eq(d.remaining, 0);
	}
	ck_assert_int_eq(s.st.count, 60);
	ck_assert_int_eq(s.st.prev_count, 60);
	/* Full, late in the window: the next one is 1 ms into the next. */
	ck_assert(!sim_hit(&s, T0 + 2 * MINUTE_MS - 1, &d));
	ck_assert_int_eq(d.retry_ms, 2);
	ck_assert(sim_hit(&s, T0 + 2 * MINUTE_MS + 1, &d));
}
END_TEST

/*
 * The sliding window counter is an estimate: it stops the seed's burst
 * (limit in the last second, limit in the first of the next), but a
 * client that waits until the last moments of the next window, when the
 * previous one barely weighs, gets limit again: 2 * limit within one
 * window's span, exactly like the fixed window, only spread out.
 */
START_TEST(test_sliding_window_worst_span)
{
	struct sim s;
	struct rlg_decision d;
	int64_t i;

	sim_init(&s, RLG_ALG_SLIDING_WINDOW, 60, MINUTE_MS, 0);
	run_a.n = 0;
	for (i = 0; i < 60; i++)
		ck_assert(run_hit(&s, &run_a, T0 + MINUTE_MS - 1,
		    T0 + MINUTE_MS - 1));
	/* 60 * 2 / 60000 + 59 < 60: all 60 pass, 59999 ms after the first */
	for (i = 0; i < 60; i++)
		ck_assert(run_hit(&s, &run_a, T0 + 2 * MINUTE_MS - 2,
		    T0 + 2 * MINUTE_MS - 2));
	ck_assert(!sim_hit(&s, T0 + 2 * MINUTE_MS - 2, &d));
	ck_assert_int_eq(max_in_span(&run_a, MINUTE_MS), 2 * 60);
}
END_TEST

/* GCRA edges: burst 1 spaces requests by T exactly, burst 3 allows 3. */
START_TEST(test_token_bucket_edges)
{
	struct sim s;
	struct rlg_decision d;
	int64_t i;

	/* 10 per 10 s, burst 1: one per second, to the millisecond. */
	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 10, 10000, 1);
	for (i = 0; i < 30; i++) {
		ck_assert(sim_hit(&s, T0 + 1000 * i, &d));
		ck_assert_int_eq(d.remaining, 0);
		ck_assert_int_eq(d.reset_ms, 1000);
		ck_assert(!sim_hit(&s, T0 + 1000 * i + 999, &d));
		ck_assert_int_eq(d.retry_ms, 1);
	}
	/* burst 3: 3 at once, then the 4th one T later. */
	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 10, 10000, 3);
	for (i = 0; i < 3; i++)
		ck_assert(sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.remaining, 0);
	ck_assert(!sim_hit(&s, T0 + 999, &d));
	ck_assert(sim_hit(&s, T0 + 1000, &d));
	/* 2.5 s idle: 2 back (the half is not a whole request) */
	ck_assert(sim_hit(&s, T0 + 3500, &d));
	ck_assert_int_eq(d.remaining, 1);
}
END_TEST

/* An entry slides out at entry + window exactly, not a ms earlier. */
START_TEST(test_sliding_log_edges)
{
	struct sim s;
	struct rlg_decision d;
	int64_t i, base;

	sim_init(&s, RLG_ALG_SLIDING_LOG, 2, 1000, 0);
	ck_assert(sim_hit(&s, T0 + 10, &d));
	ck_assert(sim_hit(&s, T0 + 500, &d));
	for (i = 1; i <= 5; i++) {
		base = T0 + 1000 * i;
		ck_assert(!sim_hit(&s, base + 9, &d));
		ck_assert_int_eq(d.retry_ms, 1);
		ck_assert(sim_hit(&s, base + 10, &d));
		ck_assert(!sim_hit(&s, base + 10, &d));
		ck_assert_int_eq(d.retry_ms, 490);
		ck_assert(!sim_hit(&s, base + 499, &d));
		ck_assert_int_eq(d.retry_ms, 1);
		ck_assert(sim_hit(&s, base + 500, &d));
		ck_assert(!sim_hit(&s, base + 500, &d));
		ck_assert_int_eq(d.retry_ms, 510);
		ck_assert_int_eq(s.n, 2);
	}
}
END_TEST

/*
 * retry_ms against a brute-force scan, from rejected states of each
 * algorithm (a scan of every ms up to two windows and a bit).
 */
START_TEST(test_retry_brute_force)
{
	struct sim s;
	struct rlg_decision d;
	size_t a;
	int64_t i, t;

	for (a = 0; a < N_ALG_CASES; a++) {
		sim_init(&s, alg_cases[a].alg, 4, 2000,
		    burst_of(alg_cases[a].burst, 4));
		/* a pattern that leaves different rejected states */
		for (i = 0, t = T0 + 1500; i < 40; i++, t += 137 * (i % 4)) {
			if (!sim_hit(&s, t, &d))
				check_retry_brute(&s, t, 2 * 2000 + 10);
			while (sim_hit(&s, t, &d))
				;
			check_retry_brute(&s, t, 2 * 2000 + 10);
		}
	}
}
END_TEST

/* The seed's scenario for every algorithm: what the boundary costs. */
START_TEST(test_seed_scenario)
{
	int64_t bound = 60 + (60 * 1000 + MINUTE_MS - 1) / MINUTE_MS + 1;

	/* 1000 requests a second (hammering), and 60 a second. */
	ck_assert_int_eq(seed_scenario(RLG_ALG_FIXED_WINDOW, 1000), 120);
	ck_assert_int_eq(seed_scenario(RLG_ALG_FIXED_WINDOW, 60), 120);
	ck_assert_int_le(seed_scenario(RLG_ALG_SLIDING_WINDOW, 1000),
	    bound);
	ck_assert_int_le(seed_scenario(RLG_ALG_SLIDING_WINDOW, 60), bound);
	ck_assert_int_eq(seed_scenario(RLG_ALG_SLIDING_WINDOW, 1000), 61);
	ck_assert_int_eq(seed_scenario(RLG_ALG_SLIDING_WINDOW, 60), 61);
	ck_assert_int_eq(seed_scenario(RLG_ALG_TOKEN_BUCKET, 1000), 61);
	ck_assert_int_eq(seed_scenario(RLG_ALG_TOKEN_BUCKET, 60), 61);
	ck_assert_int_eq(seed_scenario(RLG_ALG_SLIDING_LOG, 1000), 60);
	ck_assert_int_eq(seed_scenario(RLG_ALG_SLIDING_LOG, 60), 60);
#ifdef RLG_LIMITER_REPORT
	printf("seed scenario (60/60 s, 2 s around a boundary): fixed %lld,"
	    " sliding_window %lld (bound %lld), token_bucket %lld,"
	    " sliding_log %lld\n",
	    (long long)seed_scenario(RLG_ALG_FIXED_WINDOW, 1000),
	    (long long)seed_scenario(RLG_ALG_SLIDING_WINDOW, 1000),
	    (long long)bound,
	    (long long)seed_scenario(RLG_ALG_TOKEN_BUCKET, 1000),
	    (long long)seed_scenario(RLG_ALG_SLIDING_LOG, 1000));
#endif
}
END_TEST

/* ---- limits: the fixed window's originals ---- */

START_TEST(test_clock_backwards_is_clamped)
{
	struct rlg_limit p = policy(3, 10);
	struct rlg_state st = { 0 };
	struct rlg_decision d;

	ck_assert(hit(&p, &st, T0 + 10500, &d));       /* window T0+10 s */
	/* The clock steps back into the previous window: no fresh quota. */
	ck_assert(hit(&p, &st, T0 + 9000, &d));
	ck_assert_int_eq(st.window_start_ms, T0 + 10000);
	ck_assert_int_eq(st.count, 2);
	ck_assert_int_eq(d.reset_ms, 10000);
	ck_assert(hit(&p, &st, T0 + 9500, &d));
	ck_assert(!hit(&p, &st, T0 + 9600, &d));
	ck_assert_int_gt(d.retry_ms, 0);
	ck_assert_int_eq(st.count, 3);
}
END_TEST

START_TEST(test_limit_one_and_big_window)
{
	struct rlg_limit p = policy(1, RLG_WINDOW_S_MAX);
	struct rlg_state st = { 0 };
	struct rlg_decision d;

	ck_assert(hit(&p, &st, T0, &d));
	ck_assert_int_eq(d.remaining, 0);
	ck_assert(!hit(&p, &st, T0 + 1, &d));
	ck_assert_int_eq(d.retry_ms, d.reset_ms);
	ck_assert_int_gt(d.retry_ms, 0);
	ck_assert_int_le(d.retry_ms, RLG_WINDOW_S_MAX * 1000);
}
END_TEST

START_TEST(test_damaged_state)
{
	struct rlg_limit p = policy(5, 60);
	struct rlg_state st = { .window_start_ms = T0, .count = 1000,
	    .expires_ms = T0 + 60000 };      /* count > limit */
	struct rlg_decision d;

	ck_assert(!hit(&p, &st, T0 + 1, &d));
	st.count = -7;
	ck_assert(hit(&p, &st, T0 + 2, &d));
	ck_assert_int_eq(st.count, 1);
}
END_TEST

START_TEST(test_bad_policy)
{
	struct rlg_limit zero = policy(0, 60), nowin = policy(5, 0);
	struct rlg_limit huge = policy(RLG_LIMIT_MAX + 1, 60);
	struct rlg_state st = { 0 };
	struct rlg_decision d;

	ck_assert_int_eq(rlg_limiter_step(&zero, &st, T0, 1, &st, &d), RLG_EINVAL);
	ck_assert_int_eq(rlg_limiter_step(&nowin, &st, T0, 1, &st, &d), RLG_EINVAL);
	ck_assert_int_eq(rlg_limiter_step(&huge, &st, T0, 1, &st, &d), RLG_EINVAL);
	ck_assert_str_eq(rlg_algorithm_name(RLG_ALG_FIXED_WINDOW),
	    "fixed_window");
}
END_TEST

/* ---- limits: every algorithm ---- */

START_TEST(test_bad_policy_per_algorithm)
{
	static const struct {
		enum rlg_algorithm alg;
		int64_t limit, window_ms, burst;
		int want;
	} rows[] = {
		{ RLG_ALG_SLIDING_WINDOW, 0, 1000, 0, RLG_EINVAL },
		{ RLG_ALG_SLIDING_WINDOW, 1, 0, 0, RLG_EINVAL },
		{ RLG_ALG_SLIDING_WINDOW, 1, WINDOW_MS_MAX + 1, 0, RLG_EINVAL },
		{ RLG_ALG_SLIDING_WINDOW, RLG_LIMIT_MAX + 1, 1000, 0,
		    RLG_EINVAL },
		{ RLG_ALG_SLIDING_WINDOW, RLG_LIMIT_MAX, WINDOW_MS_MAX, 0,
		    RLG_OK },
		/* burst matters to the token bucket only */
		{ RLG_ALG_FIXED_WINDOW, 5, 1000, -3, RLG_OK },
		{ RLG_ALG_SLIDING_WINDOW, 5, 1000, 0, RLG_OK },
		{ RLG_ALG_TOKEN_BUCKET, 5, 1000, 0, RLG_EINVAL },
		{ RLG_ALG_TOKEN_BUCKET, 5, 1000, -1, RLG_EINVAL },
		{ RLG_ALG_TOKEN_BUCKET, 5, 1000, RLG_BURST_MAX + 1,
		    RLG_EINVAL },
		{ RLG_ALG_TOKEN_BUCKET, 5, 1000, RLG_BURST_MAX, RLG_OK },
		{ RLG_ALG_TOKEN_BUCKET, 5, 1000, 1, RLG_OK },
		{ RLG_ALG_TOKEN_BUCKET, 0, 1000, 1, RLG_EINVAL },
		{ RLG_ALG_TOKEN_BUCKET, 5, 0, 1, RLG_EINVAL },
	};
	static const int64_t empty[1] = { 0 };
	struct rlg_limit p;
	struct rlg_state st = { 0 }, out;
	struct rlg_decision d;
	bool append = true;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		p = mkpolicy(rows[i].alg, rows[i].limit, rows[i].window_ms,
		    rows[i].burst);
		ck_assert_msg(rlg_limiter_step(&p, &st, T0, 1, &out, &d) ==
		    rows[i].want, "row %zu", i);
	}
	/* The sliding log: its limit is bounded, its arguments checked. */
	p = mkpolicy(RLG_ALG_SLIDING_LOG, RLG_SLIDING_LOG_LIMIT_MAX + 1, 1000,
	    0);
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, empty, 0, T0, 1, &append,
	    &out, &d), RLG_EINVAL);
	ck_assert(!append);
	p.limit = 0;
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, empty, 0, T0, 1, &append,
	    &out, &d), RLG_EINVAL);
	p.limit = 5;
	p.window_ms = 0;
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, empty, 0, T0, 1, &append,
	    &out, &d), RLG_EINVAL);
	p.window_ms = 1000;
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, NULL, 3, T0, 1, &append,
	    &out, &d), RLG_EINVAL);
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, empty, 0, T0, 1, NULL,
	    &out, &d), RLG_EINVAL);
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, NULL, 0, T0, 1, &append,
	    &out, &d), RLG_OK);
	ck_assert(append);
	p.limit = RLG_SLIDING_LOG_LIMIT_MAX;
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, empty, 0, T0, 1, &append,
	    &out, &d), RLG_OK);
	ck_assert_int_eq(d.remaining, RLG_SLIDING_LOG_LIMIT_MAX - 1);
}
END_TEST

/* A rejected request leaves the state bit-identical, in place or not. */
START_TEST(test_rejected_is_bit_identical)
{
	struct sim s;
	struct rlg_state in, out, keep;
	struct rlg_decision d;
	size_t a;
	int i;

	for (a = 0; a < N_ALG_CASES; a++) {
		if (alg_cases[a].alg == RLG_ALG_SLIDING_LOG)
			continue;
		sim_init(&s, alg_cases[a].alg, 3, 10000,
		    burst_of(alg_cases[a].burst, 3));
		while (sim_hit(&s, T0 + 9000, &d))
			;
		for (i = 0; i < 3; i++) {
			/* junk in the fields the algorithm does not use */
			in = s.st;
			if (s.p.algorithm == RLG_ALG_TOKEN_BUCKET)
				in.count = 99 + i;
			else
				in.tat_us = 1234567 + i;
			in.expires_ms += i;
			keep = in;
			memset(&out, 0xee, sizeof out);
			ck_assert_int_eq(rlg_limiter_step(&s.p, &in,
			    T0 + 9000 + i, 1, &out, &d), RLG_OK);
			ck_assert(!d.admitted);
			ck_assert(memcmp(&out, &keep, sizeof out) == 0);
			ck_assert(memcmp(&in, &keep, sizeof in) == 0);
			ck_assert_int_eq(rlg_limiter_step(&s.p, &in,
			    T0 + 9000 + i, 1, &in, &d), RLG_OK);
			ck_assert(!d.admitted);
			ck_assert(memcmp(&in, &keep, sizeof in) == 0);
		}
	}
}
END_TEST

/*
 * The clock steps back 1 ms, 1 s, 1 window, 1 hour, from every state a
 * pseudo-random client reaches: the requests admitted at the earlier
 * reading are never more than those admitted at the true one.
 */
START_TEST(test_clock_back_never_grants_more)
{
	static const int64_t steps[] = { 1, 1000, MINUTE_MS, HOUR_MS };
	struct sim s;
	struct rlg_decision d;
	uint64_t x = 0x2231e809da0746a5ULL;
	size_t a, k;
	int64_t t, i, at, back;

	for (a = 0; a < N_ALG_CASES; a++) {
		sim_init(&s, alg_cases[a].alg, 60, MINUTE_MS,
		    burst_of(alg_cases[a].burst, 60));
		t = T0 + 7;
		for (i = 0; i < 3000; i++) {
			for (k = 0; k < sizeof steps / sizeof steps[0]; k++) {
				at = sim_burst_at(&s, t);
				back = sim_burst_at(&s, t - steps[k]);
				if (back > at)
					ck_abort_msg("%s: %lld at t - %lld"
					    " > %lld at t", alg_cases[a].label,
					    (long long)back,
					    (long long)steps[k],
					    (long long)at);
			}
			(void)sim_hit(&s, t, &d);
			switch (rlg_test_xorshift(&x) % 4) {
			case 0:
				break;
			case 1:
				t += (int64_t)(rlg_test_xorshift(&x) % 50);
				break;
			case 2:
				t += (int64_t)(rlg_test_xorshift(&x) % 3000);
				break;
			default:
				t += (int64_t)(rlg_test_xorshift(&x) % 70000);
				break;
			}
		}
	}
}
END_TEST

/*
 * A run with the clock stepped back mid-way: a client sends every 50 ms;
 * at ts (just after a boundary, or mid-window) the gateway's clock steps
 * back. Compared with the same run on a true clock, the admissions so far
 * are never more at any instant, and every span of one window (in real
 * time) stays within the algorithm's bound. Nothing crashes.
 */
START_TEST(test_clock_back_runs)
{
	static const int64_t steps[] = { 1, 1000, MINUTE_MS, HOUR_MS };
	static const int64_t at[] = { MINUTE_MS + 500, 2 * MINUTE_MS + 30000 };
	struct sim sa, sb;
	size_t a, k, j;
	int64_t t, ts, end, na, nb;

	for (a = 0; a < N_ALG_CASES; a++) {
		for (k = 0; k < sizeof steps / sizeof steps[0]; k++) {
			for (j = 0; j < 2; j++) {
				sim_init(&sa, alg_cases[a].alg, 60, MINUTE_MS,
				    burst_of(alg_cases[a].burst, 60));
				sb = sa;
				run_a.n = run_b.n = 0;
				ts = T0 + at[j];
				end = ts + steps[k] + 3 * MINUTE_MS;
				na = nb = 0;
				for (t = T0 + MINUTE_MS - 5000; t < end;
				    t += 50) {
					na += run_hit(&sa, &run_a, t, t);
					nb += run_hit(&sb, &run_b, t,
					    t < ts ? t : t - steps[k]);
					if (nb > na)
						ck_abort_msg("%s, step %lld:"
						    " %lld > %lld at T0 + %lld",
						    alg_cases[a].label,
						    (long long)steps[k],
						    (long long)nb,
						    (long long)na,
						    (long long)(t - T0));
				}
				REQUIRE(max_in_span(&run_b, MINUTE_MS) <=
				    span_bound(&sb));
				REQUIRE(max_in_span(&run_a, MINUTE_MS) <=
				    span_bound(&sa));
			}
		}
	}
}
END_TEST

/* The sliding window after a step back: counts stand, delays are exact. */
START_TEST(test_sliding_window_clock_back)
{
	struct sim s;
	struct rlg_decision d;

	sim_init(&s, RLG_ALG_SLIDING_WINDOW, 60, MINUTE_MS, 0);
	s.st.window_start_ms = T0 + MINUTE_MS;
	s.st.count = 30;
	s.st.prev_count = 60;
	/* At the stored window's start: 60 * 60000 weighs the limit. */
	ck_assert(!sim_hit(&s, T0 + MINUTE_MS, &d));
	ck_assert_int_eq(d.retry_ms, 30001);
	/* 1 s back: decided as at the stored start, 1 s further to wait. */
	ck_assert(!sim_hit(&s, T0 + MINUTE_MS - 1000, &d));
	ck_assert_int_eq(d.retry_ms, 31001);
	/* 1 hour back. */
	ck_assert(!sim_hit(&s, T0 + MINUTE_MS - HOUR_MS, &d));
	ck_assert_int_eq(d.retry_ms, HOUR_MS + 30001);
	/* Admitted while clamped: reset from the real now. */
	s.st.count = 0;
	s.st.prev_count = 0;
	ck_assert(sim_hit(&s, T0 + 1000, &d));
	ck_assert_int_eq(s.st.window_start_ms, T0 + MINUTE_MS);
	ck_assert_int_eq(s.st.count, 1);
	ck_assert_int_eq(d.reset_ms, 3 * MINUTE_MS - 1000);
}
END_TEST

/* The bucket after a step back: stricter, exactly. */
START_TEST(test_token_bucket_clock_back)
{
	struct sim s;
	struct rlg_decision d;
	int i;

	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 5, 5000, 5);
	for (i = 0; i < 5; i++)
		ck_assert(sim_hit(&s, T0, &d));
	/* tat = T0 + 5 s, tolerance 4 s: from T0 + 1 s on. */
	ck_assert(!sim_hit(&s, T0 - 1, &d));
	ck_assert_int_eq(d.retry_ms, 1001);
	ck_assert(!sim_hit(&s, T0 - HOUR_MS, &d));
	ck_assert_int_eq(d.retry_ms, HOUR_MS + 1000);
	ck_assert(sim_hit(&s, T0 + 1000, &d));
	ck_assert_int_eq(d.remaining, 0);
}
END_TEST

/* The log after a step back: later entries count until they slide out. */
START_TEST(test_sliding_log_clock_back)
{
	struct rlg_limit p = mkpolicy(RLG_ALG_SLIDING_LOG, 3, 10000, 0);
	int64_t log2[] = { T0 + 5000, T0 + 6000 };
	int64_t log3[] = { T0, T0 + 5000, T0 + 6000 };
	struct rlg_state out;
	struct rlg_decision d;
	bool append;

	ck_assert_int_eq(rlg_limiter_sliding_log(&p, log2, 2, T0, 1, &append,
	    &out, &d), RLG_OK);
	ck_assert(d.admitted && append);
	ck_assert_int_eq(d.remaining, 0);
	ck_assert_int_eq(out.count, 3);
	ck_assert_int_eq(out.window_start_ms, T0);
	ck_assert_int_eq(out.expires_ms, T0 + 16000);
	ck_assert_int_eq(d.reset_ms, 16000);
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, log3, 3, T0 + 1, 1, &append,
	    &out, &d), RLG_OK);
	ck_assert(!d.admitted && !append);
	ck_assert_int_eq(d.retry_ms, 9999);
	ck_assert_int_eq(out.count, 3);
	ck_assert_int_eq(out.window_start_ms, T0);
	ck_assert_int_eq(out.expires_ms, T0 + 16000);
	/* An hour back: everything is still in the window. */
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, log3, 3, T0 - HOUR_MS, 1,
	    &append, &out, &d), RLG_OK);
	ck_assert(!d.admitted);
	ck_assert_int_eq(d.retry_ms, HOUR_MS + 10000);
}
END_TEST

/* What the store may hand over: stale entries, too many, a big log. */
START_TEST(test_sliding_log_feed)
{
	static int64_t big[RLG_SLIDING_LOG_LIMIT_MAX + 2];
	struct rlg_limit p = mkpolicy(RLG_ALG_SLIDING_LOG, 3, 10000, 0);
	int64_t stale[] = { T0 - 20000, T0 - 10000, T0, T0 + 1000, T0 + 2000 };
	int64_t stale2[] = { T0 - 20000, T0 - 7000, T0 + 1000, T0 + 2000 };
	int64_t over[] = { T0, T0 + 1, T0 + 2, T0 + 3, T0 + 4 };
	struct rlg_state out;
	struct rlg_decision d;
	bool append;
	size_t i;

	/* Entries <= now - window are not counted. */
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, stale, 5, T0 + 3000, 1,
	    &append, &out, &d), RLG_OK);
	ck_assert(!d.admitted);
	ck_assert_int_eq(d.retry_ms, 7000);
	ck_assert_int_eq(out.count, 3);
	ck_assert_int_eq(out.window_start_ms, T0);
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, stale2, 4, T0 + 3000, 1,
	    &append, &out, &d), RLG_OK);
	ck_assert(d.admitted && append);
	ck_assert_int_eq(out.count, 3);
	ck_assert_int_eq(out.window_start_ms, T0 + 1000);
	ck_assert_int_eq(out.expires_ms, T0 + 13000);
	ck_assert_int_eq(d.remaining, 0);
	/* More in-window entries than the limit: rejected, no crash. */
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, over, 5, T0 + 5, 1, &append,
	    &out, &d), RLG_OK);
	ck_assert(!d.admitted && !append);
	ck_assert_int_eq(d.retry_ms, 2 + 10000 - 5);
	ck_assert_int_eq(out.count, 5);
	/* The largest log the config allows, full, and one over. */
	p = mkpolicy(RLG_ALG_SLIDING_LOG, RLG_SLIDING_LOG_LIMIT_MAX,
	    HOUR_MS, 0);
	for (i = 0; i < RLG_SLIDING_LOG_LIMIT_MAX + 2; i++)
		big[i] = T0 + (int64_t)i / 100;
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, big,
	    RLG_SLIDING_LOG_LIMIT_MAX - 1, T0 + 2000, 1, &append, &out, &d),
	    RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 0);
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, big,
	    RLG_SLIDING_LOG_LIMIT_MAX, T0 + 2000, 1, &append, &out, &d), RLG_OK);
	ck_assert(!d.admitted);
	ck_assert_int_eq(d.retry_ms, T0 + HOUR_MS - (T0 + 2000));
	ck_assert_int_eq(rlg_limiter_sliding_log(&p, big,
	    RLG_SLIDING_LOG_LIMIT_MAX + 2, T0 + 2000, 1, &append, &out, &d),
	    RLG_OK);
	ck_assert(!d.admitted);
	ck_assert_int_eq(d.retry_ms, HOUR_MS - 2000);   /* big[2] = T0 */
	ck_assert_int_eq(out.count, RLG_SLIDING_LOG_LIMIT_MAX + 2);
}
END_TEST

/*
 * Years of silence: a full state from T0 decides, 1, 10 and 100 years on
 * and at the last ms of year 9999, exactly as a fresh client's.
 */
START_TEST(test_huge_gaps)
{
	static const int64_t gaps[] = { YEAR_MS, 10 * YEAR_MS, 100 * YEAR_MS };
	struct sim s, fresh;
	struct rlg_state o1, o2;
	struct rlg_decision d, d1, d2;
	bool a1, a2;
	size_t a, g;
	int64_t when;

	for (a = 0; a < N_ALG_CASES; a++) {
		sim_init(&s, alg_cases[a].alg, 5, MINUTE_MS,
		    burst_of(alg_cases[a].burst, 5));
		fresh = s;
		while (sim_hit(&s, T0, &d))
			;
		for (g = 0; g <= sizeof gaps / sizeof gaps[0]; g++) {
			when = g < sizeof gaps / sizeof gaps[0] ?
			    T0 + gaps[g] : RLG_TIME_MS_MAX;
			sim_decide(&s, when, &o1, &d1, &a1);
			sim_decide(&fresh, when, &o2, &d2, &a2);
			ck_assert(d1.admitted && d2.admitted);
			ck_assert_int_eq(d1.remaining, d2.remaining);
			ck_assert_int_eq(d1.reset_ms, d2.reset_ms);
			ck_assert(memcmp(&o1, &o2, sizeof o1) == 0);
		}
		/* From the epoch itself to year 9999 in one step. */
		sim_init(&s, alg_cases[a].alg, 5, WINDOW_MS_MAX,
		    burst_of(alg_cases[a].burst, 5));
		ck_assert(sim_hit(&s, 0, &d));
		ck_assert(sim_hit(&s, RLG_TIME_MS_MAX, &d));
	}
}
END_TEST

/*
 * The extremes of every input, for every algorithm: no overflow (the
 * sanitizers watch), and the shared contract holds.
 */
START_TEST(test_extremes)
{
	static const int64_t limits[] = { 1, 2, 1000, RLG_LIMIT_MAX };
	static const int64_t windows[] = { 1, 1000, WINDOW_MS_MAX };
	static const enum burst_kind bursts[] = { B_ONE, B_LIMIT, B_MORE };
	static const int64_t nows[] = { INT64_MIN, -1, 0, 1, T0,
	    RLG_TIME_MS_MAX - 1, RLG_TIME_MS_MAX, RLG_TIME_MS_MAX + 1,
	    INT64_MAX };
	static const struct rlg_state states[] = {
		{ 0, 0, 0, 0, 0, 0, 0, 0 },
		{ INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, 0, 0, 0 },
		{ INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, 0, 0, 0 },
		{ RLG_TIME_MS_MAX, 1, 1, RLG_TIME_MS_MAX * 1000, 0, 0, 0, 0 },
		{ T0, 1, 1, T0 * 1000, 0, 0, 0, 0 },
	};
	static const int64_t log_a[] = { INT64_MIN, -5, 0, T0, RLG_TIME_MS_MAX,
	    INT64_MAX };
	struct rlg_limit p;
	struct rlg_state out;
	struct rlg_decision d;
	bool append;
	size_t a, l, w, b, n, s, k;
	int64_t burst;

	for (a = 0; a < 4; a++)
	for (l = 0; l < sizeof limits / sizeof limits[0]; l++)
	for (w = 0; w < sizeof windows / sizeof windows[0]; w++)
	for (b = 0; b < sizeof bursts / sizeof bursts[0]; b++) {
		burst = burst_of(bursts[b], limits[l]);
		if (burst > RLG_BURST_MAX)
			burst = RLG_BURST_MAX;
		p = mkpolicy((enum rlg_algorithm)a, limits[l], windows[w],
		    burst);
		for (n = 0; n < sizeof nows / sizeof nows[0]; n++) {
			if (p.algorithm == RLG_ALG_SLIDING_LOG) {
				if (p.limit > RLG_SLIDING_LOG_LIMIT_MAX)
					continue;
				for (k = 0; k <= 6; k++) {
					REQUIRE_EQ(
					    rlg_limiter_sliding_log(&p,
					    log_a + 6 - k, k, nows[n], 1, &append,
					    &out, &d), RLG_OK);
					REQUIRE(d.reset_ms >= 1);
					REQUIRE(d.admitted ? d.retry_ms == 0 :
					    d.retry_ms >= 1 &&
					    d.reset_ms == d.retry_ms);
				}
				continue;
			}
			for (s = 0; s < sizeof states / sizeof states[0];
			    s++) {
				REQUIRE_EQ(rlg_limiter_step(&p,
				    &states[s], nows[n], 1, &out, &d), RLG_OK);
				REQUIRE(d.reset_ms >= 1);
				REQUIRE(d.remaining >= 0);
				if (d.admitted) {
					REQUIRE_EQ(d.retry_ms, 0);
				} else {
					REQUIRE(d.retry_ms >= 1);
					REQUIRE_EQ(d.reset_ms,
					    d.retry_ms);
					REQUIRE(memcmp(&out, &states[s],
					    sizeof out) == 0);
				}
			}
		}
	}
}
END_TEST

/* limit 1 and window 1 (ms and s): every algorithm stays in bounds. */
START_TEST(test_limit_one_window_one)
{
	static const int64_t windows[] = { 1, 1000 };
	struct sim s;
	size_t a, w;
	int64_t t, limit;

	for (a = 0; a < N_ALG_CASES; a++)
	for (w = 0; w < 2; w++)
	for (limit = 1; limit <= 2; limit++) {
		sim_init(&s, alg_cases[a].alg, limit, windows[w],
		    burst_of(alg_cases[a].burst, limit));
		run_a.n = 0;
		for (t = T0; t < T0 + 5000; t++) {
			(void)run_hit(&s, &run_a, t, t);
			(void)run_hit(&s, &run_a, t, t);
		}
		ck_assert_int_le(max_in_span(&run_a, windows[w]),
		    span_bound(&s));
		ck_assert_int_gt(run_a.n, 0);
		if (alg_cases[a].alg == RLG_ALG_FIXED_WINDOW ||
		    alg_cases[a].alg == RLG_ALG_SLIDING_LOG)
			REQUIRE_EQ(run_a.n,
			    limit * (5000 / windows[w]));
	}
	/* window 1 ms, limit 1: the sliding window admits every other ms */
	sim_init(&s, RLG_ALG_SLIDING_WINDOW, 1, 1, 0);
	run_a.n = 0;
	for (t = T0; t < T0 + 100; t++)
		(void)run_hit(&s, &run_a, t, t);
	REQUIRE_EQ(run_a.n, 50);
}
END_TEST

/* A limit of 1e9, with the largest windows: exact, no overflow. */
START_TEST(test_large_limits)
{
	struct sim s;
	struct rlg_decision d;
	int64_t w = WINDOW_MS_MAX, t;

	/* fixed: the last of 1e9 in a year-long window */
	sim_init(&s, RLG_ALG_FIXED_WINDOW, RLG_LIMIT_MAX, w, 0);
	ck_assert(sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.remaining, RLG_LIMIT_MAX - 1);
	s.st.count = RLG_LIMIT_MAX - 1;
	ck_assert(sim_hit(&s, T0 + 1, &d));
	ck_assert_int_eq(d.remaining, 0);
	ck_assert(!sim_hit(&s, T0 + 2, &d));

	/* sliding: a full previous window of 1e9, half-way through */
	sim_init(&s, RLG_ALG_SLIDING_WINDOW, RLG_LIMIT_MAX, w, 0);
	t = w * 3 + w / 2;       /* w is even */
	s.st.window_start_ms = w * 3;
	s.st.prev_count = RLG_LIMIT_MAX;
	ck_assert(sim_hit(&s, t, &d));
	ck_assert_int_eq(d.remaining, RLG_LIMIT_MAX / 2 - 1);
	s.st.count = RLG_LIMIT_MAX / 2;
	ck_assert(!sim_hit(&s, t, &d));
	ck_assert_int_eq(d.retry_ms, 1);
	s.st.count = RLG_LIMIT_MAX;
	ck_assert(!sim_hit(&s, t, &d));
	ck_assert_int_eq(d.retry_ms, w / 2 + 1);
	/* sliding: 1e9 per ms */
	sim_init(&s, RLG_ALG_SLIDING_WINDOW, RLG_LIMIT_MAX, 1, 0);
	ck_assert(sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.remaining, RLG_LIMIT_MAX - 1);

	/* token bucket: 1e9 per second is held to 1 per us, burst 1e9 */
	sim_init(&s, RLG_ALG_TOKEN_BUCKET, RLG_LIMIT_MAX, 1000,
	    RLG_BURST_MAX);
	ck_assert(sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.remaining, RLG_BURST_MAX - 1);
	ck_assert_int_eq(d.reset_ms, 1);
	/*
	 * 1 per year, burst 1e9: the tolerance is capped at 1e18 us
	 * (limiter.h): floor(1e18 / T) more at once after the first (the
	 * remaining of a fresh bucket is floor(tau / T)), not 1e9 - 1.
	 */
	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 1, w, RLG_BURST_MAX);
	ck_assert(sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.remaining, 1000000000000000000LL /
	    gcra_t_us(&s.p));
	ck_assert_int_eq(d.remaining, 31623);
	s.st.tat_us += (d.remaining - 1) * gcra_t_us(&s.p);
	ck_assert(sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.remaining, 0);
	ck_assert(!sim_hit(&s, T0, &d));
	ck_assert_int_le(d.retry_ms, w);
	/* 1 per year, burst 1 */
	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 1, w, 1);
	ck_assert(sim_hit(&s, RLG_TIME_MS_MAX, &d));
	ck_assert(!sim_hit(&s, RLG_TIME_MS_MAX, &d));
	ck_assert_int_eq(d.retry_ms, w);
}
END_TEST

/* GCRA: burst 1 is strict spacing; burst > limit lends more at once. */
START_TEST(test_token_bucket_burst)
{
	struct sim s;
	struct rlg_decision d;
	int64_t i;

	/* 5 per 5 s with burst 10: 10 at once, then one per second. */
	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 5, 5000, 10);
	for (i = 0; i < 10; i++) {
		ck_assert(sim_hit(&s, T0, &d));
		ck_assert_int_eq(d.remaining, 9 - i);
	}
	ck_assert(!sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.retry_ms, 1000);
	ck_assert_int_eq(s.st.tat_us, (T0 + 10000) * 1000);
	ck_assert_int_eq(s.st.expires_ms, T0 + 10000);
	/* burst 1: never two closer than T, even a fresh client. */
	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 5, 5000, 1);
	ck_assert(sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.remaining, 0);
	ck_assert(!sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.retry_ms, 1000);
}
END_TEST

/* Rows that no step can produce: bounded, never a crash, never looser. */
START_TEST(test_damaged_rows)
{
	struct sim s;
	struct rlg_decision d;

	sim_init(&s, RLG_ALG_SLIDING_WINDOW, 5, 10000, 0);
	s.st.window_start_ms = T0;
	s.st.count = 1000;
	s.st.prev_count = -4;
	ck_assert(!sim_hit(&s, T0 + 1, &d));
	s.st.count = -1;
	s.st.prev_count = INT64_MAX;
	ck_assert(!sim_hit(&s, T0, &d));      /* prev counts as 5 */
	ck_assert_int_eq(d.retry_ms, 1);
	ck_assert(sim_hit(&s, T0 + 1, &d));
	/*
	 * A window start that is not aligned (the window was changed):
	 * taken as the aligned window it falls in.
	 */
	sim_init(&s, RLG_ALG_SLIDING_WINDOW, 5, 10000, 0);
	s.st.window_start_ms = T0 + 3333;
	s.st.count = 5;
	ck_assert(!sim_hit(&s, T0 + 5000, &d));
	ck_assert_int_eq(d.retry_ms, 5001);
	ck_assert(sim_hit(&s, T0 + 10001, &d));
	sim_init(&s, RLG_ALG_FIXED_WINDOW, 5, 10000, 0);
	s.st.window_start_ms = T0 + 3333;
	s.st.count = 5;
	ck_assert(!sim_hit(&s, T0 + 5000, &d));
	ck_assert_int_eq(d.retry_ms, 5000);
	ck_assert(sim_hit(&s, T0 + 10000, &d));
	/*
	 * The fixed window takes an empty row as fresh even when it is
	 * stamped in the future (no step stores count 0): now's window.
	 */
	sim_init(&s, RLG_ALG_FIXED_WINDOW, 5, 10000, 0);
	s.st.window_start_ms = T0 + HOUR_MS;
	ck_assert(sim_hit(&s, T0 + 5000, &d));
	ck_assert_int_eq(s.st.window_start_ms, T0);
	ck_assert_int_eq(d.reset_ms, 5000);

	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 5, 10000, 5);
	s.st.tat_us = INT64_MAX;
	ck_assert(!sim_hit(&s, T0, &d));
	s.st.tat_us = INT64_MIN;
	ck_assert(sim_hit(&s, T0, &d));
	ck_assert_int_eq(d.remaining, 4);
}
END_TEST

/* ---- properties: many requests, every span of one window ---- */

/*
 * A client hammering every 1 ms for 5 windows of 60 per 60 s. Also the
 * quota is not withheld: fixed and log admit exactly 60 per window.
 */
START_TEST(test_prop_hammer)
{
	struct sim s;
	size_t a;
	int64_t t, best, bound;

	for (a = 0; a < N_ALG_CASES; a++) {
		sim_init(&s, alg_cases[a].alg, 60, MINUTE_MS,
		    burst_of(alg_cases[a].burst, 60));
		run_a.n = 0;
		for (t = T0; t < T0 + 5 * MINUTE_MS; t++)
			(void)run_hit(&s, &run_a, t, t);
		best = max_in_span(&run_a, MINUTE_MS);
		bound = span_bound(&s);
		ck_assert_int_le(best, bound);
		switch (alg_cases[a].alg) {
		case RLG_ALG_FIXED_WINDOW:
		case RLG_ALG_SLIDING_LOG:
			REQUIRE_EQ(run_a.n, 5 * 60);
			REQUIRE_EQ(count_between(&run_a, T0 + MINUTE_MS,
			    T0 + 2 * MINUTE_MS), 60);
			REQUIRE_EQ(best, 60);
			break;
		case RLG_ALG_TOKEN_BUCKET:
			/* the bound is tight: burst at once, then 1/s */
			REQUIRE_EQ(best, bound);
			break;
		case RLG_ALG_SLIDING_WINDOW:
			ck_assert_int_lt(best, 2 * 60);
			break;
		}
#ifdef RLG_LIMITER_REPORT
		printf("hammer 1/ms, 60/60 s, 5 windows: %-28s admitted %zu,"
		    " max per 60 s span %lld (bound %lld)\n",
		    alg_cases[a].label, run_a.n, (long long)best,
		    (long long)bound);
#endif
	}
}
END_TEST

/*
 * The seed's attack on every window: idle, then hammering from the last
 * second of a window to the end of the first second of the next. The
 * fixed window reaches 2 * limit; the others stay within their bounds.
 */
START_TEST(test_prop_boundary_attack)
{
	struct sim s;
	size_t a;
	int64_t t, k, best, bound, two_s;

	for (a = 0; a < N_ALG_CASES; a++) {
		sim_init(&s, alg_cases[a].alg, 60, MINUTE_MS,
		    burst_of(alg_cases[a].burst, 60));
		run_a.n = 0;
		two_s = 0;
		for (k = 1; k <= 6; k += 2) {
			for (t = T0 + k * MINUTE_MS - 1000;
			    t < T0 + k * MINUTE_MS + 1000; t++)
				(void)run_hit(&s, &run_a, t, t);
			if (k == 1)
				two_s = (int64_t)run_a.n;
		}
		best = max_in_span(&run_a, MINUTE_MS);
		bound = span_bound(&s);
		ck_assert_int_le(best, bound);
		switch (alg_cases[a].alg) {
		case RLG_ALG_FIXED_WINDOW:
			REQUIRE_EQ(best, 2 * 60);
			break;
		case RLG_ALG_SLIDING_WINDOW:
			ck_assert_int_le(two_s, 60 + 1 + 1);
			ck_assert_int_lt(best, 2 * 60);
			break;
		case RLG_ALG_SLIDING_LOG:
			REQUIRE_EQ(best, 60);
			break;
		case RLG_ALG_TOKEN_BUCKET:
			break;
		}
#ifdef RLG_LIMITER_REPORT
		printf("boundary attack, 60/60 s: %-28s first 2 s %lld,"
		    " max per 60 s span %lld (bound %lld)\n",
		    alg_cases[a].label, (long long)two_s, (long long)best,
		    (long long)bound);
#endif
	}
}
END_TEST

/*
 * Pseudo-random arrivals (fixed seed) for several policies: the client
 * switches now and then between hammering, sending at about the limit's
 * rate, sending sparsely, and long silences. Every span of one window
 * stays within bounds, and every decision is checked for exactness on
 * the way.
 */
START_TEST(test_prop_random)
{
	static const struct { int64_t limit, window_ms; } pol[] = {
		{ 60, MINUTE_MS }, { 5, 1000 }, { 1, 1000 }, { 3, 1 },
		{ 7, 10000 },
	};
	struct sim s;
	uint64_t x;
	size_t a, q;
	int64_t t, i, w, gap, mode, best, bound;

	for (a = 0; a < N_ALG_CASES; a++)
	for (q = 0; q < sizeof pol / sizeof pol[0]; q++) {
		w = pol[q].window_ms;
		sim_init(&s, alg_cases[a].alg, pol[q].limit, w,
		    burst_of(alg_cases[a].burst, pol[q].limit));
		x = 0x2231e809da0746a5ULL + q;
		run_a.n = 0;
		t = T0 + 13;
		mode = 0;
		for (i = 0; i < 20000; i++) {
			(void)run_hit(&s, &run_a, t, t);
			if (rlg_test_xorshift(&x) % 100 == 0)
				mode = (int64_t)(rlg_test_xorshift(&x) % 3);
			if (mode == 0)
				gap = 3;                       /* hammering */
			else if (mode == 1)
				gap = 2 * w / pol[q].limit + 1;  /* ~ the rate */
			else
				gap = w / 4 + 1;               /* sparse */
			if (rlg_test_xorshift(&x) % 200 == 0)
				gap = 3 * w;                   /* silence */
			t += (int64_t)(rlg_test_xorshift(&x) % (uint64_t)gap);
		}
		best = max_in_span(&run_a, w);
		bound = span_bound(&s);
		if (best > bound)
			ck_abort_msg("%s, %lld per %lld ms: %lld in one window"
			    " > %lld", alg_cases[a].label,
			    (long long)pol[q].limit, (long long)w,
			    (long long)best, (long long)bound);
		ck_assert_int_gt(run_a.n, 0);
#ifdef RLG_LIMITER_REPORT
		if (q == 0)
			printf("random arrivals, 60/60 s: %-28s admitted %zu"
			    " of 20000, max per 60 s span %lld (bound %lld)\n",
			    alg_cases[a].label, run_a.n, (long long)best,
			    (long long)bound);
#endif
	}
}
END_TEST

/*
 * rlg_limiter_bounds holds for every state rlgate itself can store: each
 * run stores states through the algorithm under other policies of the
 * same algorithm (any limit, window, burst) at times anywhere in [0,
 * RLG_TIME_MS_MAX], often ahead of the step checked (a skewed clock),
 * then decides at now and must stay within the bounds the Redis store
 * holds its replies to.
 */
START_TEST(test_bounds_hold)
{
	static const int64_t limits[] = { 1, 2, 5, 60, 1000, RLG_LIMIT_MAX };
	static const int64_t windows[] = { 1000, 60000, HOUR_MS,
	    WINDOW_MS_MAX };
	static const int64_t times[] = { 0, 1, T0, RLG_TIME_MS_MAX - 1,
	    RLG_TIME_MS_MAX };
	struct rlg_limiter_bounds b;
	struct rlg_limit p, q;
	struct rlg_state st, out;
	struct rlg_decision d;
	int64_t log[64], now, t;
	uint64_t rnd = 0x9e3779b97f4a7c15u;
	size_t n, lo, k;
	bool append;
	int run, i, a;

#define RND() (rnd = rnd * 6364136223846793005u + 1442695040888963407u, \
	rnd >> 17)
#define PICK(arr) (arr[RND() % (sizeof arr / sizeof arr[0])])
#define ATIME() (RND() % 3 == 0 ? PICK(times) : \
	(int64_t)(RND() % (uint64_t)(RLG_TIME_MS_MAX + 1)))
	for (run = 0; run < 20000; run++) {
		a = (int)(RND() % 4);
		memset(&st, 0, sizeof st);
		n = 0;
		now = ATIME();
		for (i = 0; i < 4; i++) {
			memset(&q, 0, sizeof q);
			q.algorithm = (enum rlg_algorithm)a;
			q.limit = a == RLG_ALG_SLIDING_LOG ? 1 + (int64_t)(RND() %
			    8) : PICK(limits);
			q.window_ms = PICK(windows);
			q.burst = RND() % 2 ? q.limit : PICK(limits);
			/* Often just before now, else anywhere (skew). */
			t = RND() % 2 ? now - (int64_t)(RND() % 3) : ATIME();
			if (a == RLG_ALG_SLIDING_LOG) {
				/* The store passes the in-window suffix. */
				for (lo = 0; lo < n && log[lo] <= t -
				    q.window_ms; lo++)
					;
				if (n - lo > (size_t)q.limit)
					lo = n - (size_t)q.limit;
				REQUIRE_EQ(rlg_limiter_sliding_log(&q,
				    log + lo, n - lo, t, 1, &append, &out, &d),
				    RLG_OK);
				if (append && n < 64) {
					for (k = n; k > 0 && log[k - 1] > t;
					    k--)
						log[k] = log[k - 1];
					log[k] = t;
					n++;
				}
			} else {
				REQUIRE_EQ(rlg_limiter_step(&q, &st, t, 1, &out,
				    &d), RLG_OK);
				st = out;
			}
		}
		p = q;
		p.limit = a == RLG_ALG_SLIDING_LOG ? 1 + (int64_t)(RND() %
		    8) : PICK(limits);
		p.window_ms = PICK(windows);
		p.burst = RND() % 2 ? p.limit : PICK(limits);
		if (a == RLG_ALG_SLIDING_LOG) {
			for (lo = 0; lo < n && log[lo] <= now - p.window_ms;
			    lo++)
				;
			/* At most limit newest, as the stores keep. */
			if (n - lo > (size_t)p.limit)
				lo = n - (size_t)p.limit;
			REQUIRE_EQ(rlg_limiter_sliding_log(&p, log + lo,
			    n - lo, now, 1, &append, &out, &d), RLG_OK);
		} else {
			REQUIRE_EQ(rlg_limiter_step(&p, &st, now, 1, &out, &d),
			    RLG_OK);
		}
		REQUIRE_EQ(rlg_limiter_bounds(&p, now, &b), RLG_OK);
		REQUIRE_EQ(d.limit, p.limit);
		if (d.admitted) {
			REQUIRE(d.remaining >= 0 &&
			    d.remaining <= b.remaining_max);
			REQUIRE_EQ(d.retry_ms, 0);
			REQUIRE(d.reset_ms >= 1 && d.reset_ms <= b.delay_max);
		} else {
			REQUIRE_EQ(d.remaining, 0);
			REQUIRE(d.retry_ms >= 1 && d.retry_ms <= b.delay_max);
			REQUIRE_EQ(d.reset_ms, d.retry_ms);
		}
		/* now (clamped) + delay_max cannot overflow. */
		REQUIRE(b.delay_max <= INT64_MAX - RLG_TIME_MS_MAX);
	}
#undef RND
#undef PICK
#undef ATIME

	/* The bounds themselves, and a policy the limiter refuses. */
	memset(&p, 0, sizeof p);
	p.limit = 10;
	p.window_ms = 60000;
	ck_assert_int_eq(rlg_limiter_bounds(&p, T0, &b), RLG_OK);
	ck_assert_int_eq(b.remaining_max, 9);
	ck_assert_int_eq(b.delay_max, 60000);
	p.algorithm = RLG_ALG_SLIDING_WINDOW;
	ck_assert_int_eq(rlg_limiter_bounds(&p, RLG_TIME_MS_MAX, &b), RLG_OK);
	ck_assert_int_eq(b.delay_max, 120000);
	ck_assert_int_eq(rlg_limiter_bounds(&p, INT64_MAX, &b), RLG_OK);
	ck_assert_int_eq(b.delay_max, 120000);
	ck_assert_int_eq(rlg_limiter_bounds(&p, INT64_MIN, &b), RLG_OK);
	ck_assert_int_eq(b.delay_max, 120000 + RLG_TIME_MS_MAX);
	p.algorithm = RLG_ALG_TOKEN_BUCKET;
	p.burst = 25;
	ck_assert_int_eq(rlg_limiter_bounds(&p, RLG_TIME_MS_MAX, &b), RLG_OK);
	ck_assert_int_eq(b.remaining_max, 24);
	ck_assert_int_eq(b.delay_max, 1000000000000000LL +
	    RLG_WINDOW_S_MAX * 1000);
	/*
	 * Reached: the latest tat_us a store can hold (the latest time, the
	 * largest tolerance and emission interval of another policy), read
	 * at the epoch by a policy without tolerance.
	 */
	memset(&st, 0, sizeof st);
	st.tat_us = RLG_TIME_MS_MAX * 1000 + 1000000000000000000LL +
	    WINDOW_MS_MAX * 1000;
	p.limit = 1;
	p.window_ms = 1000;
	p.burst = 1;
	ck_assert_int_eq(rlg_limiter_step(&p, &st, 0, 1, &out, &d), RLG_OK);
	ck_assert_int_eq(rlg_limiter_bounds(&p, 0, &b), RLG_OK);
	ck_assert(!d.admitted);
	ck_assert_int_eq(d.retry_ms, b.delay_max);
	p.burst = 0;
	ck_assert_int_eq(rlg_limiter_bounds(&p, T0, &b), RLG_EINVAL);
	p.algorithm = (enum rlg_algorithm)7;
	ck_assert_int_eq(rlg_limiter_bounds(&p, T0, &b), RLG_EINVAL);
}
END_TEST

/* ---- next_ms: when more quota is available (draft-11's t) ------------- */

/* An admitted decision: remaining, reset_ms and next_ms as computed. */
#define EXPECT_NEXT(d, rem, reset, next) do {				\
	REQUIRE((d).admitted);						\
	REQUIRE_EQ((d).remaining, (rem));				\
	REQUIRE_EQ((d).reset_ms, (reset));				\
	REQUIRE_EQ((d).next_ms, (next));				\
} while (0)

/*
 * A sliding window of limit per window_ms whose stored row counted count
 * in the window from start and prev in the one before.
 */
static void
sw_stored(struct sim *s, int64_t limit, int64_t window_ms, int64_t start,
    int64_t count, int64_t prev)
{
	sim_init(s, RLG_ALG_SLIDING_WINDOW, limit, window_ms, 0);
	s->st.window_start_ms = start;
	s->st.count = count;
	s->st.prev_count = prev;
	s->st.expires_ms = start + 2 * window_ms;
}

/* fixed_window: nothing comes back before the window's end. */
START_TEST(test_next_fixed_window)
{
	struct sim s;
	struct rlg_decision d;

	sim_init(&s, RLG_ALG_FIXED_WINDOW, 2, 10000, 0);
	REQUIRE(sim_hit(&s, T0 + 3000, &d));
	EXPECT_NEXT(d, 1, 7000, 7000);
	REQUIRE(sim_hit(&s, T0 + 4000, &d));
	EXPECT_NEXT(d, 0, 6000, 6000);
	REQUIRE(!sim_hit(&s, T0 + 4500, &d));
	REQUIRE_EQ(d.next_ms, 5500);
	REQUIRE_EQ(d.next_ms, d.retry_ms);
}
END_TEST

/*
 * sliding_window, 10 per 10 s. The previous window counted 8; at 2.501 s
 * into this one they weigh 8 * 7499 / 10000 = 5.9992: after one request
 * room = 100000 - 59992 - 10000 = 30008 (remaining ceil(3.0008) = 4). A
 * fifth comes back when 8 * x > 40000 - 30008 = 9992: x = 1250, long
 * before the state is fresh (17.499 s, the reset).
 */
START_TEST(test_next_sliding_window_decay)
{
	struct sim s;
	struct rlg_decision d;

	sw_stored(&s, 10, 10000, T0 - 10000, 8, 0);
	REQUIRE(sim_hit(&s, T0 + 2501, &d));
	EXPECT_NEXT(d, 4, 17499, 1250);
	/* Room an exact multiple of W: the next ms already adds some. */
	sw_stored(&s, 10, 10000, T0 - 10000, 8, 0);
	REQUIRE(sim_hit(&s, T0 + 2500, &d));
	EXPECT_NEXT(d, 3, 17500, 1);
	/* A rejection: next_ms is retry_ms. */
	sw_stored(&s, 2, 10000, T0, 2, 0);
	REQUIRE(!sim_hit(&s, T0 + 6000, &d));
	REQUIRE_EQ(d.retry_ms, 4001);
	REQUIRE_EQ(d.next_ms, 4001);
}
END_TEST

/*
 * sliding_window, crossing into the next window: 10 per 10 s, the
 * previous window's 1 request weighs 0.5 at 5 s in, which never makes a
 * whole request here; the 7 of this window start decaying one ms into the
 * next (room 30000 + 7 > 3 * 10000): 5001 ms. With no previous count at
 * all, the last request of a full window: 4001 ms at 6 s in.
 */
START_TEST(test_next_sliding_window_crossing)
{
	struct sim s;
	struct rlg_decision d;

	sw_stored(&s, 10, 10000, T0, 6, 1);
	REQUIRE(sim_hit(&s, T0 + 5000, &d));
	EXPECT_NEXT(d, 3, 15000, 5001);

	sw_stored(&s, 5, 10000, T0, 4, 0);
	REQUIRE(sim_hit(&s, T0 + 6000, &d));
	EXPECT_NEXT(d, 0, 14000, 4001);

	/*
	 * 128 bits: a billion per 366 days, a billion in the previous
	 * window, 1 ms in: room = 1e9 - W < 0 (remaining 0); one comes
	 * back when 1e9 * x > W - 1e9 = 30622400000: x = 31.
	 */
	sw_stored(&s, RLG_LIMIT_MAX, WINDOW_MS_MAX, 0, RLG_LIMIT_MAX, 0);
	REQUIRE(sim_hit(&s, WINDOW_MS_MAX + 1, &d));
	EXPECT_NEXT(d, 0, 2 * WINDOW_MS_MAX - 1, 31);
}
END_TEST

/*
 * token_bucket: the next token, not the full refill. 10 per 10 s, burst
 * 10: ten at once leave reset_ms 10 s (the bucket full again) but the
 * first token is back after 1 s; 3 per 10 s (T = 3333334 us) shows the
 * rounding up to whole ms.
 */
START_TEST(test_next_token_bucket)
{
	struct sim s;
	struct rlg_decision d;
	int i;

	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 10, 10000, 10);
	for (i = 0; i < 10; i++) {
		REQUIRE(sim_hit(&s, T0, &d));
		EXPECT_NEXT(d, 9 - i, 1000 * (i + 1), 1000);
	}
	REQUIRE(!sim_hit(&s, T0 + 400, &d));
	REQUIRE_EQ(d.next_ms, 600);
	REQUIRE_EQ(d.retry_ms, 600);
	/* Half a token's time later: the next one is half a token away. */
	REQUIRE(sim_hit(&s, T0 + 1000, &d));
	EXPECT_NEXT(d, 0, 10000, 1000);
	REQUIRE(sim_hit(&s, T0 + 2500, &d));
	EXPECT_NEXT(d, 0, 9500, 500);

	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 3, 10000, 3);
	REQUIRE(sim_hit(&s, T0, &d));
	EXPECT_NEXT(d, 2, 3334, 3334);
	/* room = 500000 us: the next token in 2833334 us. */
	REQUIRE(sim_hit(&s, T0 + 500, &d));
	EXPECT_NEXT(d, 1, 6167, 2834);
	/* room = -2833334 us: the first token in as long. */
	REQUIRE(sim_hit(&s, T0 + 500, &d));
	EXPECT_NEXT(d, 0, 9501, 2834);

	/* Burst 1: one token, back after T. */
	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 10, 10000, 1);
	REQUIRE(sim_hit(&s, T0 + 7, &d));
	EXPECT_NEXT(d, 0, 1000, 1000);
}
END_TEST

/* sliding_log: the oldest entry inside the window slides out. */
START_TEST(test_next_sliding_log)
{
	const struct rlg_limit p = mkpolicy(RLG_ALG_SLIDING_LOG, 5, 10000, 0);
	const int64_t log[] = { T0 - 20000, T0, T0 + 1000, T0 + 2000 };
	struct rlg_state out;
	struct rlg_decision d;
	bool append;
	struct sim s;

	/* The stale entry is skipped; T0 is the oldest. */
	REQUIRE_EQ(rlg_limiter_sliding_log(&p, log, 4, T0 + 3000, 1, &append,
	    &out, &d), RLG_OK);
	EXPECT_NEXT(d, 1, 10000, 7000);
	/* A fresh log: the request itself is the oldest. */
	REQUIRE_EQ(rlg_limiter_sliding_log(&p, NULL, 0, T0, 1, &append, &out,
	    &d), RLG_OK);
	EXPECT_NEXT(d, 4, 10000, 10000);
	/* T0 gone at T0 + 10000: T0 + 1000 is the oldest. */
	REQUIRE_EQ(rlg_limiter_sliding_log(&p, log, 4, T0 + 10000, 1, &append,
	    &out, &d), RLG_OK);
	EXPECT_NEXT(d, 2, 10000, 1000);

	sim_init(&s, RLG_ALG_SLIDING_LOG, 3, 10000, 0);
	REQUIRE(sim_hit(&s, T0, &d));
	REQUIRE(sim_hit(&s, T0 + 4000, &d));
	EXPECT_NEXT(d, 1, 10000, 6000);
	REQUIRE(sim_hit(&s, T0 + 6000, &d));
	EXPECT_NEXT(d, 0, 10000, 4000);
	REQUIRE(!sim_hit(&s, T0 + 7000, &d));
	REQUIRE_EQ(d.next_ms, 3000);
	REQUIRE_EQ(d.retry_ms, 3000);
}
END_TEST

/* ---- cost: requests of several units ---- */

/*
 * A request of cost units at now, checked against cost requests of cost 1
 * at the same instant (sent to a copy of the sim): admitted iff all of
 * them are, leaving their state and log and the last one's remaining;
 * refused, it leaves the state bit-identical, its remaining is what the
 * copy admits one after another at now, and retry_ms is exact for its
 * cost (refused at now + retry_ms - 1, admitted at now + retry_ms). Above
 * the capacity the cost is never admitted, and retry_ms is that of a
 * request of the whole capacity, or 1 ms when that one fits now. An
 * admitted request is applied to s and held to the checks every
 * admission gets (remaining, reset_ms, next_ms).
 */
static void
check_cost(struct sim *s, int64_t now, int64_t cost, struct rlg_decision *d)
{
	static struct sim units;
	struct rlg_state out, uout;
	struct rlg_decision ud, d2;
	bool append, uappend, all = true;
	int64_t i, cap = sim_capacity(s), probe;

	sim_decide_cost(s, now, cost, &out, d, &append);
	units = *s;
	memset(&ud, 0, sizeof ud);
	for (i = 0; i < cost && all; i++) {
		sim_decide(&units, now, &uout, &ud, &uappend);
		if (ud.admitted)
			sim_apply(&units, now, &uout);
		else
			all = false;
	}
	REQUIRE(d->admitted == all);
	if (d->admitted) {
		REQUIRE_EQ(d->remaining, ud.remaining);
		REQUIRE(memcmp(&out, &uout, sizeof out) == 0);
		sim_apply_cost(s, now, cost, &out);
		REQUIRE_EQ(s->n, units.n);
		REQUIRE(memcmp(s->log, units.log, s->n * sizeof s->log[0]) ==
		    0);
		check_remaining(s, now, d);
		check_fresh_at_reset(s, now, d);
		check_next(s, now, d);
		return;
	}
	REQUIRE_EQ(d->remaining, sim_burst_at(s, now));
	probe = cost > cap ? cap : cost;
	if (cost > cap) {
		sim_decide_cost(s, now, cap, &out, &d2, &append);
		if (d2.admitted) {
			REQUIRE_EQ(d->retry_ms, 1);
			return;
		}
		REQUIRE_EQ(d->retry_ms, d2.retry_ms);
	}
	if (d->retry_ms > 1) {
		sim_decide_cost(s, now + d->retry_ms - 1, probe, &out, &d2,
		    &append);
		REQUIRE(!d2.admitted);
	}
	if (sim_fixed_clamped(s, now) || now + d->retry_ms > RLG_TIME_MS_MAX)
		return;
	sim_decide_cost(s, now + d->retry_ms, probe, &out, &d2, &append);
	REQUIRE(d2.admitted);
}

/* Rows of requests of costs[i] units, each held to check_cost. */
static void
cost_table(struct sim *s, const int64_t *costs, const struct step_row *rows,
    size_t n)
{
	struct rlg_decision d;
	size_t i;

	for (i = 0; i < n; i++) {
		check_cost(s, T0 + rows[i].at, costs[i], &d);
		ck_assert_msg(d.admitted == rows[i].admitted,
		    "row %zu (T0 + %lld, cost %lld)", i,
		    (long long)rows[i].at, (long long)costs[i]);
		ck_assert_msg(d.remaining == rows[i].remaining,
		    "row %zu: remaining %lld", i, (long long)d.remaining);
		ck_assert_msg(d.reset_ms == rows[i].reset_ms,
		    "row %zu: reset_ms %lld", i, (long long)d.reset_ms);
		ck_assert_msg(d.retry_ms == rows[i].retry_ms,
		    "row %zu: retry_ms %lld", i, (long long)d.retry_ms);
	}
}

/*
 * fixed_window, 12 per minute: 5 fits, 5 fits, 5 does not (2 left, and
 * they stay: the refused request consumed nothing), 2 fits exactly; 13
 * (above the limit) never fits: refused in 1 ms when the whole quota is
 * there, else at the window's end.
 */
START_TEST(test_cost_fixed_window)
{
	static const int64_t costs[] = { 5, 5, 5, 2, 1, 13, 12, 13 };
	static const struct step_row rows[] = {
		{ 0, true, 7, 60000, 0 },
		{ 1000, true, 2, 59000, 0 },
		{ 2000, false, 2, 58000, 58000 },
		{ 3000, true, 0, 57000, 0 },
		{ 4000, false, 0, 56000, 56000 },
		{ 60000, false, 12, 1, 1 },
		{ 60000, true, 0, 60000, 0 },
		{ 61000, false, 0, 59000, 59000 },
	};
	struct sim s;

	sim_init(&s, RLG_ALG_FIXED_WINDOW, 12, MINUTE_MS, 0);
	cost_table(&s, costs, rows, sizeof rows / sizeof rows[0]);
}
END_TEST

/*
 * sliding_window, 10 per 10 s, 4 in the previous window: at e = 5 s they
 * weigh 2 units, so 8 fit exactly and 9 wait 1 ms for the decay; in the
 * next window the 8 weigh 8 (1 s in: 7.2) and 10 wait until 8 * (W - e)
 * < W, at e = 8751 ms.
 */
START_TEST(test_cost_sliding_window)
{
	static const int64_t costs[] = { 9, 8, 1, 10, 11 };
	static const struct step_row rows[] = {
		{ 5000, false, 8, 1, 1 },
		{ 5000, true, 0, 15000, 0 },
		{ 5000, false, 0, 1, 1 },
		{ 10000, false, 2, 8751, 8751 },
		{ 10000, false, 2, 8751, 8751 },
	};
	struct sim s;

	sw_stored(&s, 10, 10000, T0 - 10000, 4, 0);
	cost_table(&s, costs, rows, sizeof rows / sizeof rows[0]);
}
END_TEST

/*
 * token_bucket, 10 per 10 s (T = 1 s), burst 10: 11 never fits (1 ms, the
 * bucket full), 4 leave 6, 7 wait a second, 6 fit exactly, then 10 (the
 * whole bucket) and 11 (decided as 10) wait for the bucket to refill.
 */
START_TEST(test_cost_token_bucket)
{
	static const int64_t costs[] = { 11, 4, 7, 6, 1, 10, 11 };
	static const struct step_row rows[] = {
		{ 0, false, 10, 1, 1 },
		{ 0, true, 6, 4000, 0 },
		{ 0, false, 6, 1000, 1000 },
		{ 0, true, 0, 10000, 0 },
		{ 0, false, 0, 1000, 1000 },
		{ 5000, false, 5, 5000, 5000 },
		{ 5000, false, 5, 5000, 5000 },
	};
	struct sim s;

	sim_init(&s, RLG_ALG_TOKEN_BUCKET, 10, 10000, 10);
	cost_table(&s, costs, rows, sizeof rows / sizeof rows[0]);
}
END_TEST

/*
 * sliding_log, 5 per 10 s: a request of cost c appends c entries at now;
 * one that does not fit waits for the oldest m + c - limit to slide out.
 */
START_TEST(test_cost_sliding_log)
{
	static const int64_t costs[] = { 3, 3, 2, 5, 6, 4, 3, 6 };
	static const struct step_row rows[] = {
		{ 0, true, 2, 10000, 0 },
		{ 1000, false, 2, 9000, 9000 },
		{ 1000, true, 0, 10000, 0 },
		{ 2000, false, 0, 9000, 9000 },
		{ 2000, false, 0, 9000, 9000 },
		{ 10000, false, 3, 1000, 1000 },
		{ 10000, true, 0, 10000, 0 },
		{ 30000, false, 5, 1, 1 },
	};
	struct sim s;

	sim_init(&s, RLG_ALG_SLIDING_LOG, 5, 10000, 0);
	cost_table(&s, costs, rows, sizeof rows / sizeof rows[0]);
	REQUIRE_EQ(s.n, 5);
}
END_TEST

/* A cost out of 1..RLG_COST_MAX is refused by every algorithm. */
START_TEST(test_cost_bad)
{
	static const int64_t bad[] = { 0, -1, RLG_COST_MAX + 1, INT64_MAX };
	struct rlg_limit p;
	struct rlg_state st = { 0 }, out;
	struct rlg_decision d;
	bool append;
	size_t a, i;

	for (a = 0; a < N_ALG_CASES; a++) {
		p = mkpolicy(alg_cases[a].alg, 5, 1000,
		    burst_of(alg_cases[a].burst, 5));
		for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			if (p.algorithm == RLG_ALG_SLIDING_LOG)
				REQUIRE_EQ(rlg_limiter_sliding_log(&p, NULL, 0,
				    T0, bad[i], &append, &out, &d),
				    RLG_EINVAL);
			else
				REQUIRE_EQ(rlg_limiter_step(&p, &st, T0,
				    bad[i], &out, &d), RLG_EINVAL);
		}
		/* The largest cost is taken, and refused (never fits). */
		if (p.algorithm == RLG_ALG_SLIDING_LOG)
			REQUIRE_EQ(rlg_limiter_sliding_log(&p, NULL, 0, T0,
			    RLG_COST_MAX, &append, &out, &d), RLG_OK);
		else
			REQUIRE_EQ(rlg_limiter_step(&p, &st, T0, RLG_COST_MAX,
			    &out, &d), RLG_OK);
		REQUIRE(!d.admitted);
		REQUIRE_EQ(d.retry_ms, 1);
	}
}
END_TEST

/*
 * The property: pseudo-random arrivals of pseudo-random costs (mostly
 * small, sometimes the capacity or above it) for every algorithm and
 * several policies; every request is held to check_cost, so a request of
 * cost c decides exactly as c requests of cost 1 at one instant would,
 * all or nothing. With cost 1 the limiter is the one of before: every
 * other test of this file (and the Lua twin's differential suite, the
 * script unchanged) runs at cost 1 with the expectations written before
 * costs existed.
 */
START_TEST(test_prop_cost)
{
	static const struct { int64_t limit, window_ms; } pol[] = {
		{ 12, MINUTE_MS }, { 5, 1000 }, { 1, 1000 }, { 3, 1 },
		{ 7, 10000 },
	};
	struct sim s;
	struct rlg_decision d;
	uint64_t x, r;
	size_t a, q;
	int64_t t, i, w, cap, cost, admitted;

	for (a = 0; a < N_ALG_CASES; a++)
	for (q = 0; q < sizeof pol / sizeof pol[0]; q++) {
		w = pol[q].window_ms;
		sim_init(&s, alg_cases[a].alg, pol[q].limit, w,
		    burst_of(alg_cases[a].burst, pol[q].limit));
		cap = sim_capacity(&s);
		x = 0x18c05bULL + 977 * q + a;
		t = T0 + 7;
		admitted = 0;
		for (i = 0; i < 3000; i++) {
			r = rlg_test_xorshift(&x) % 20;
			if (r < 12)
				cost = 1 + (int64_t)(rlg_test_xorshift(&x) %
				    (uint64_t)(cap < 4 ? cap : 4));
			else if (r < 17)
				cost = 1 + (int64_t)(rlg_test_xorshift(&x) %
				    (uint64_t)cap);
			else
				cost = cap + (int64_t)(rlg_test_xorshift(&x) %
				    3);
			check_cost(&s, t, cost, &d);
			admitted += d.admitted;
			t += (int64_t)(rlg_test_xorshift(&x) %
			    (uint64_t)(w / 3 + 2));
		}
		ck_assert_int_gt(admitted, 0);
	}
}
END_TEST

/* ---- merge (local+global mode) ------------------------------------- */

/* A state of the window algorithms: start, count, prev_count. */
static struct rlg_state
wstate(int64_t start, int64_t count, int64_t prev)
{
	struct rlg_state st = { .window_start_ms = start, .count = count,
	    .prev_count = prev };

	return st;
}

/* merge(g, units, uws, now) into *out, which must succeed. */
static struct rlg_state
merged(const struct rlg_limit *p, struct rlg_state g, int64_t units,
    int64_t uws, int64_t now)
{
	struct rlg_state out;

	REQUIRE_EQ(rlg_limiter_merge(p, &g, units, uws, now, &out), RLG_OK);
	return out;
}

static void
require_state(struct rlg_state got, int64_t start, int64_t count,
    int64_t prev, int64_t tat, int64_t expires)
{
	REQUIRE_EQ(got.window_start_ms, start);
	REQUIRE_EQ(got.count, count);
	REQUIRE_EQ(got.prev_count, prev);
	REQUIRE_EQ(got.tat_us, tat);
	REQUIRE_EQ(got.expires_ms, expires);
}

static bool
same_state(struct rlg_state a, struct rlg_state b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

START_TEST(test_merge_fixed_window)
{
	struct rlg_limit p = mkpolicy(RLG_ALG_FIXED_WINDOW, 10, MINUTE_MS, 0);
	struct rlg_state g = wstate(T0, 4, 0), newer = wstate(T0 + MINUTE_MS,
	    2, 0), empty = { 0 };

	g.expires_ms = T0 + MINUTE_MS;
	/* The same window: added (past the limit too: kept). */
	require_state(merged(&p, g, 3, T0, T0 + 5), T0, 7, 0, 0,
	    T0 + MINUTE_MS);
	require_state(merged(&p, g, 30, T0 + 59999, T0), T0, 34, 0, 0,
	    T0 + MINUTE_MS);
	/* global older, or empty: the units' window. */
	require_state(merged(&p, g, 5, T0 + MINUTE_MS, T0), T0 + MINUTE_MS,
	    5, 0, 0, T0 + 2 * MINUTE_MS);
	require_state(merged(&p, empty, 5, T0 + 17, T0), T0, 5, 0, 0,
	    T0 + MINUTE_MS);
	/* global newer: the units' window is over, nothing changes. */
	REQUIRE(same_state(merged(&p, newer, 5, T0, T0), newer));
	/* units 0: global as it is, bit for bit (even a stale one). */
	REQUIRE(same_state(merged(&p, g, 0, T0 + HOUR_MS, T0), g));
	/* An unaligned stored start counts as its aligned window. */
	require_state(merged(&p, wstate(T0 + 123, 1, 0), 1, T0, T0), T0, 2,
	    0, 0, T0 + MINUTE_MS);
}
END_TEST

START_TEST(test_merge_sliding_window)
{
	struct rlg_limit p = mkpolicy(RLG_ALG_SLIDING_WINDOW, 10, MINUTE_MS,
	    0);
	struct rlg_state g = wstate(T0, 4, 2);
	int64_t w = MINUTE_MS;

	/* The same window: count += units, prev kept. */
	require_state(merged(&p, g, 3, T0, T0), T0, 7, 2, 0, T0 + 2 * w);
	/* global one window older: its count becomes prev. */
	require_state(merged(&p, g, 3, T0 + w, T0 + w), T0 + w, 3, 4, 0,
	    T0 + 3 * w);
	/* older still: prev 0. */
	require_state(merged(&p, g, 3, T0 + 2 * w, T0), T0 + 2 * w, 3, 0, 0,
	    T0 + 4 * w);
	/* global one window newer: the units weigh as its prev. */
	require_state(merged(&p, g, 3, T0 - w, T0), T0, 4, 5, 0, T0 + 2 * w);
	/* newer still: unchanged. */
	REQUIRE(same_state(merged(&p, g, 3, T0 - 2 * w, T0), g));
	/* empty (both counts 0): the units' window. */
	require_state(merged(&p, wstate(T0 + 5 * w, 0, 0), 3, T0, T0), T0,
	    3, 0, 0, T0 + 2 * w);
	REQUIRE(same_state(merged(&p, g, 0, T0 + w, T0), g));
}
END_TEST

START_TEST(test_merge_token_bucket)
{
	/* 10 per second: T = 100 ms; burst 5. */
	struct rlg_limit p = mkpolicy(RLG_ALG_TOKEN_BUCKET, 10, 1000, 5);
	struct rlg_state g = { .tat_us = T0 * 1000 + 300000 }, fresh = { 0 };
	int64_t cap;

	/* tat ahead of now: units * T added to it. */
	require_state(merged(&p, g, 4, 0, T0), 0, 0, 0,
	    T0 * 1000 + 700000, T0 + 700);
	/* tat behind now (or none): from now. */
	require_state(merged(&p, fresh, 3, 0, T0 + 1000), 0, 0, 0,
	    (T0 + 1300) * 1000, T0 + 1300);
	/* The clock went back: from the stored tat, never below it. */
	require_state(merged(&p, g, 1, 0, T0 - HOUR_MS), 0, 0, 0,
	    T0 * 1000 + 400000, T0 + 400);
	/* A window start means nothing to it. */
	require_state(merged(&p, g, 1, T0 + YEAR_MS, T0), 0, 0, 0,
	    T0 * 1000 + 400000, T0 + 400);
	/* Huge units: at most now + the tolerance's cap + T. */
	cap = T0 * 1000 + 1000000000000000000LL + 100000;
	require_state(merged(&p, g, RLG_MERGE_COUNT_MAX, 0, T0), 0, 0, 0,
	    cap, (cap + 999) / 1000);
	/* A stored tat beyond anything rlgate stores: that bound, kept. */
	g.tat_us = INT64_MAX;
	REQUIRE(merged(&p, g, 1, 0, T0).tat_us <= 253402300799999LL * 1000 +
	    1000000000000000000LL + WINDOW_MS_MAX * 1000);
	REQUIRE(merged(&p, g, 1, 0, T0).tat_us > cap);
	REQUIRE(same_state(merged(&p, g, 0, 0, T0), g));
}
END_TEST

START_TEST(test_merge_huge_and_bad)
{
	struct rlg_limit fw = mkpolicy(RLG_ALG_FIXED_WINDOW, 10, MINUTE_MS, 0),
	    sw = mkpolicy(RLG_ALG_SLIDING_WINDOW, 10, MINUTE_MS, 0),
	    log = mkpolicy(RLG_ALG_SLIDING_LOG, 10, MINUTE_MS, 0),
	    bad = mkpolicy(RLG_ALG_FIXED_WINDOW, 0, MINUTE_MS, 0);
	struct rlg_state g = wstate(T0, RLG_MERGE_COUNT_MAX - 1, 0), out;

	/* Counts stop at RLG_MERGE_COUNT_MAX. */
	require_state(merged(&fw, g, RLG_MERGE_COUNT_MAX, T0, T0), T0,
	    RLG_MERGE_COUNT_MAX, 0, 0, T0 + MINUTE_MS);
	require_state(merged(&sw, wstate(T0, 1, INT64_MAX), 1, T0 - MINUTE_MS,
	    T0), T0, 1, RLG_MERGE_COUNT_MAX, 0, T0 + 2 * MINUTE_MS);
	/* Damaged counts: negative as 0 (then empty). */
	require_state(merged(&fw, wstate(T0 + MINUTE_MS, -5, 0), 2, T0, T0),
	    T0, 2, 0, 0, T0 + MINUTE_MS);
	/* Times past the clamp. */
	require_state(merged(&fw, wstate(0, 0, 0), 1, INT64_MAX, INT64_MAX),
	    253402300799999LL - 253402300799999LL % MINUTE_MS, 1, 0, 0,
	    253402300799999LL - 253402300799999LL % MINUTE_MS + MINUTE_MS);
	REQUIRE_EQ(rlg_limiter_merge(&fw, &g, -1, T0, T0, &out), RLG_EINVAL);
	REQUIRE_EQ(rlg_limiter_merge(&fw, &g, RLG_MERGE_COUNT_MAX + 1, T0, T0,
	    &out), RLG_EINVAL);
	REQUIRE_EQ(rlg_limiter_merge(&log, &g, 1, T0, T0, &out), RLG_EINVAL);
	REQUIRE_EQ(rlg_limiter_merge(&bad, &g, 1, T0, T0, &out), RLG_EINVAL);
}
END_TEST

/* merge(merge(g, a), b) == merge(g, a + b) in one window, every kind of
 * global, and a step on the result rejects while it is over the limit. */
START_TEST(test_merge_associative)
{
	static const enum rlg_algorithm algs[3] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET };
	static const int64_t us[] = { 0, 1, 3, 9, 10, 11, 1000, 999999999 };
	struct rlg_state gs[5] = { { 0 }, wstate(T0, 4, 3),
	    wstate(T0 - MINUTE_MS, 7, 1), wstate(T0 + MINUTE_MS, 2, 8),
	    { .tat_us = T0 * 1000 + 5000000, .expires_ms = T0 + 5000 } };
	struct rlg_state ab, sum, out;
	struct rlg_decision d;
	size_t k, g, a, b;

	for (k = 0; k < 3; k++) {
		struct rlg_limit p = mkpolicy(algs[k], 10, MINUTE_MS, 10);

		for (g = 0; g < 5; g++)
			for (a = 0; a < sizeof us / sizeof us[0]; a++)
				for (b = 0; b < sizeof us / sizeof us[0]; b++) {
			ab = merged(&p, merged(&p, gs[g], us[a], T0 + 7,
			    T0 + 9), us[b], T0 + 59000, T0 + 9);
			sum = merged(&p, gs[g], us[a] + us[b], T0 + 1, T0 + 9);
			REQUIRE(same_state(ab, sum));
			if (us[a] + us[b] < 10 || g == 3)
				continue;
			/* Over the limit: a step refuses, state untouched. */
			REQUIRE_EQ(rlg_limiter_step(&p, &sum, T0 + 9, 1, &out,
			    &d), RLG_OK);
			REQUIRE(!d.admitted);
			REQUIRE(d.retry_ms >= 1);
			REQUIRE(same_state(out, sum));
				}
	}
}
END_TEST

static struct rlg_decision ban_hit_w(struct sim *s, int64_t now,
    bool *wrote);

/*
 * The ban: one request of the sim's client at now, as a store runs it
 * (the sliding log's step reads the stored row from out), storing what
 * an admitted request or a counted refusal writes. Returns the decision.
 */
static struct rlg_decision
ban_hit(struct sim *s, int64_t now)
{
	return ban_hit_w(s, now, NULL);
}

/* The same, and in *wrote whether the refusal was written. */
static struct rlg_decision
ban_hit_w(struct sim *s, int64_t now, bool *wrote)
{
	struct rlg_state out = s->st, keep = s->st;
	struct rlg_decision d;
	bool append = false, w;
	size_t k;

	memset(&d, 0xa5, sizeof d);
	if (s->p.algorithm == RLG_ALG_SLIDING_LOG) {
		k = sim_first(s, now);
		REQUIRE_EQ(rlg_limiter_sliding_log(&s->p, s->log + k, s->n - k,
		    now, 1, &append, &out, &d), RLG_OK);
	} else {
		REQUIRE_EQ(rlg_limiter_step(&s->p, &s->st, now, 1, &out, &d),
		    RLG_OK);
	}
	w = !d.admitted && rlg_limiter_refusal_writes(&s->p, &keep, &out);
	if (wrote != NULL)
		*wrote = w;
	if (d.admitted) {
		sim_apply(s, now, &out);
	} else if (w) {
		s->st = out;
	} else {
		/* Nothing to write: the state is the stored one. */
		REQUIRE(s->p.algorithm == RLG_ALG_SLIDING_LOG ||
		    memcmp(&out, &keep, sizeof out) == 0);
	}
	return d;
}

/*
 * The penalty box in every algorithm: limit 3 per 10 s, ban 60 s after
 * the 2nd refusal of a window. The 1st refusal is an ordinary one (and
 * is written: its count); the 2nd starts the ban, answered with its
 * whole length; during it every request is refused with retry_ms exact
 * to its end and nothing written (not extended), even when the
 * algorithm would admit; at its end the client is admitted again.
 */
START_TEST(test_ban_every_algorithm)
{
	struct sim s;
	struct rlg_decision d;
	size_t a;
	int64_t t, ban_end;
	bool w;
	int i;

	for (a = 0; a < N_ALG_CASES; a++) {
		sim_init(&s, alg_cases[a].alg, 3, 10000,
		    burst_of(alg_cases[a].burst, 3));
		s.p.ban_ms = 60000;
		s.p.ban_after = 2;
		t = T0 + 1000;
		for (i = 0; i < 100; i++) {
			d = ban_hit(&s, t);
			if (!d.admitted)
				break;
		}
		ck_assert_msg(!d.admitted, "%s", alg_cases[a].label);
		/* The 1st refusal: counted, no ban. */
		ck_assert_msg(s.st.refused == 1, "%s", alg_cases[a].label);
		ck_assert_int_eq(s.st.refused, 1);
		ck_assert_int_eq(s.st.refused_start_ms, T0);
		ck_assert_int_eq(s.st.ban_until_ms, 0);
		ck_assert(d.retry_ms >= 1 && d.retry_ms < 60000);
		/* The 2nd, 5 ms later: the ban starts. */
		d = ban_hit_w(&s, t + 5, &w);
		ck_assert_msg(!d.admitted && w, "%s", alg_cases[a].label);
		ban_end = t + 5 + 60000;
		ck_assert_int_eq(s.st.ban_until_ms, ban_end);
		ck_assert_int_eq(s.st.refused, 0);
		ck_assert_int_eq(d.retry_ms, 60000);
		ck_assert_int_eq(d.reset_ms, 60000);
		ck_assert_int_eq(d.next_ms, 60000);
		ck_assert_int_eq(d.remaining, 0);
		ck_assert(s.st.expires_ms >= ban_end);
		/* During it: refused to its end, nothing written. */
		for (t = t + 1000; t < ban_end; t += 7001) {
			d = ban_hit_w(&s, t, &w);
			ck_assert_msg(!d.admitted && !w, "%s",
			    alg_cases[a].label);
			ck_assert_int_eq(d.retry_ms, ban_end - t);
			ck_assert_int_eq(d.reset_ms, ban_end - t);
			ck_assert_int_eq(s.st.ban_until_ms, ban_end);
		}
		d = ban_hit(&s, ban_end - 1);
		ck_assert(!d.admitted && d.retry_ms == 1);
		/* At its end: admitted, the ended ban cleared. */
		d = ban_hit(&s, ban_end);
		ck_assert_msg(d.admitted, "%s", alg_cases[a].label);
		ck_assert_int_eq(s.st.ban_until_ms, 0);
	}
}
END_TEST

/*
 * ban_after 1 (and 0, its default) bans at the first refusal; a count
 * from an earlier window is forgotten; a stored end beyond now + ban
 * (a clock stepped back, a damaged row) counts as now + ban.
 */
START_TEST(test_ban_first_refusal_and_bounds)
{
	struct sim s;
	struct rlg_decision d;
	int i, after;

	for (after = 0; after <= 1; after++) {
		sim_init(&s, RLG_ALG_FIXED_WINDOW, 5, MINUTE_MS, 0);
		s.p.ban_ms = 900000;
		s.p.ban_after = after;
		for (i = 0; i < 5; i++)
			ck_assert(ban_hit(&s, T0 + i).admitted);
		d = ban_hit(&s, T0 + 10);
		ck_assert(!d.admitted);
		ck_assert_int_eq(d.retry_ms, 900000);
		ck_assert_int_eq(s.st.ban_until_ms, T0 + 10 + 900000);
	}
	/* A count from the window before does not carry over. */
	sim_init(&s, RLG_ALG_FIXED_WINDOW, 1, MINUTE_MS, 0);
	s.p.ban_ms = 1000;
	s.p.ban_after = 2;
	ck_assert(ban_hit(&s, T0).admitted);
	d = ban_hit(&s, T0 + MINUTE_MS - 1);
	ck_assert(!d.admitted && s.st.refused == 1 && s.st.ban_until_ms == 0);
	ck_assert(ban_hit(&s, T0 + MINUTE_MS).admitted);
	ck_assert_int_eq(s.st.refused, 0);
	d = ban_hit(&s, T0 + MINUTE_MS + 1);
	ck_assert(!d.admitted && s.st.refused == 1 && s.st.ban_until_ms == 0);
	/* A damaged end, far ahead: at most ban_ms away. */
	s.st.ban_until_ms = INT64_MAX;
	d = ban_hit(&s, T0 + MINUTE_MS + 2);
	ck_assert(!d.admitted && d.retry_ms == 1000);
	/* A bad ban: not whole seconds, too long, ban_after too big. */
	s.p.ban_ms = 1500;
	ck_assert_int_eq(rlg_limiter_step(&s.p, &s.st, T0, 1, &s.st, &d),
	    RLG_EINVAL);
	s.p.ban_ms = (RLG_BAN_S_MAX + 1) * 1000;
	ck_assert_int_eq(rlg_limiter_step(&s.p, &s.st, T0, 1, &s.st, &d),
	    RLG_EINVAL);
	s.p.ban_ms = 1000;
	s.p.ban_after = RLG_LIMIT_MAX + 1;
	ck_assert_int_eq(rlg_limiter_step(&s.p, &s.st, T0, 1, &s.st, &d),
	    RLG_EINVAL);
}
END_TEST

/*
 * No ban configured: every algorithm's states and decisions are those of
 * a run without the ban's fields, bit for bit, and a refusal writes
 * nothing (rlg_limiter_refusal_writes never true), whatever the row's ban fields say.
 */
START_TEST(test_ban_none_is_bit_identical)
{
	struct sim s;
	struct rlg_decision d;
	size_t a;
	bool w;
	int i;

	for (a = 0; a < N_ALG_CASES; a++) {
		sim_init(&s, alg_cases[a].alg, 3, 10000,
		    burst_of(alg_cases[a].burst, 3));
		/* A ban stored under an earlier config: ignored. */
		s.st.ban_until_ms = T0 + HOUR_MS;
		s.st.refused = 7;
		for (i = 0; i < 12; i++) {
			d = ban_hit_w(&s, T0 + 100 * i, &w);
			ck_assert(!w);
			if (d.admitted) {
				ck_assert_int_eq(s.st.ban_until_ms, 0);
				ck_assert_int_eq(s.st.refused, 0);
				ck_assert_int_eq(s.st.refused_start_ms, 0);
			}
		}
	}
}
END_TEST

/*
 * Smoothing (rlg_limiter_wait): 5 per second, burst 10, 20 requests at
 * once. The bucket admits 10 either way; delay 0 answers them one turn
 * (200 ms) apart from the first, delay 4 lets 4 through at once, delay
 * 10 (= burst) holds none. Refused, non-smoothing and delay < 0 wait 0.
 */
START_TEST(test_delay_turns)
{
	static const int64_t delays[] = { 0, 1, 4, 10 };
	struct rlg_limit p = mkpolicy(RLG_ALG_TOKEN_BUCKET, 5, 1000, 10);
	struct rlg_state st, out;
	struct rlg_decision d;
	size_t k;
	int i, admitted;

	for (k = 0; k < sizeof delays / sizeof delays[0]; k++) {
		memset(&st, 0, sizeof st);
		admitted = 0;
		for (i = 0; i < 20; i++) {
			REQUIRE_EQ(rlg_limiter_step(&p, &st, T0, 1, &out, &d),
			    RLG_OK);
			if (!d.admitted) {
				REQUIRE_EQ(rlg_limiter_wait(&p, delays[k], 1,
				    &d), 0);
				continue;
			}
			st = out;
			/* request i waits (i - (max(D, 1) - 1)) turns */
			REQUIRE_EQ(rlg_limiter_wait(&p, delays[k], 1, &d),
			    200 * (i - (delays[k] > 1 ? delays[k] : 1) + 1 > 0 ?
			    i - (delays[k] > 1 ? delays[k] : 1) + 1 : 0));
			REQUIRE_EQ(rlg_limiter_wait(&p, -1, 1, &d), 0);
			admitted++;
		}
		REQUIRE_EQ(admitted, 10);
	}
	/* a cost of 3 after 2 requests: its first turn is the third */
	memset(&st, 0, sizeof st);
	for (i = 0; i < 2; i++) {
		REQUIRE_EQ(rlg_limiter_step(&p, &st, T0, 1, &out, &d), RLG_OK);
		st = out;
	}
	REQUIRE_EQ(rlg_limiter_step(&p, &st, T0, 3, &out, &d), RLG_OK);
	REQUIRE(d.admitted);
	REQUIRE_EQ(rlg_limiter_wait(&p, 0, 3, &d), 400);
	REQUIRE_EQ(rlg_limiter_wait(&p, 2, 3, &d), 200);
	/* 100 ms later the third turn is 300 ms away */
	REQUIRE_EQ(rlg_limiter_step(&p, &st, T0 + 100, 1, &out, &d), RLG_OK);
	REQUIRE_EQ(rlg_limiter_wait(&p, 0, 1, &d), 300);
	/* the others never hold */
	p = mkpolicy(RLG_ALG_FIXED_WINDOW, 5, 1000, 0);
	memset(&st, 0, sizeof st);
	for (i = 0; i < 3; i++) {
		REQUIRE_EQ(rlg_limiter_step(&p, &st, T0, 1, &out, &d), RLG_OK);
		st = out;
		REQUIRE_EQ(rlg_limiter_wait(&p, 0, 1, &d), 0);
	}
	REQUIRE(!rlg_algorithm_desc(RLG_ALG_FIXED_WINDOW)->smooths);
	REQUIRE(rlg_algorithm_desc(RLG_ALG_TOKEN_BUCKET)->smooths);
}
END_TEST

/*
 * The wait against a model of the turns, in microseconds: random
 * arrivals, costs and delays on periods that are not whole ms. The
 * answer leaves at most 1 ms after the request's turn less the delay's
 * allowance, never before; answers of one client leave in the order of
 * their turns (to the ms); the wait is below reset_ms.
 */
START_TEST(test_delay_model)
{
	static const int64_t limits[][3] = {
		{ 5, 1000, 10 }, { 3, 1000, 7 }, { 7, 60000, 3 }, { 1000, 1000, 50 },
	};
	uint64_t x = 0x5eed0000 + 31;
	struct rlg_limit p;
	struct rlg_state st, out;
	struct rlg_decision d;
	int64_t now, t_us, delay, cost, tat, ahead, want, w, last_answer;
	size_t k;
	int i;

	for (k = 0; k < sizeof limits / sizeof limits[0]; k++) {
		p = mkpolicy(RLG_ALG_TOKEN_BUCKET, limits[k][0], limits[k][1],
		    limits[k][2]);
		t_us = gcra_t_us(&p);
		delay = (int64_t)(rlg_test_xorshift(&x) % (uint64_t)(p.burst + 1));
		memset(&st, 0, sizeof st);
		now = T0;
		last_answer = 0;
		for (i = 0; i < 2000; i++) {
			now += (int64_t)(rlg_test_xorshift(&x) %
			    (uint64_t)(2 * t_us / 1000 + 2));
			cost = 1 + (int64_t)(rlg_test_xorshift(&x) % 3);
			tat = st.tat_us > now * 1000 ? st.tat_us : now * 1000;
			REQUIRE_EQ(rlg_limiter_step(&p, &st, now, cost, &out,
			    &d), RLG_OK);
			w = rlg_limiter_wait(&p, delay, cost, &d);
			if (!d.admitted) {
				REQUIRE_EQ(w, 0);
				continue;
			}
			ahead = tat - now * 1000 -
			    ((delay > 1 ? delay : 1) - 1) * t_us;
			want = ahead > 0 ? (ahead + 999) / 1000 : 0;
			REQUIRE(w >= want && w <= want + 1);
			REQUIRE(w < d.reset_ms);
			REQUIRE(now + w + 1 >= last_answer);
			last_answer = now + w;
			st = out;
		}
	}
}
END_TEST

/* A decision read later: times count from the answer, at least 1 ms. */
START_TEST(test_delay_later)
{
	struct rlg_decision d = { .admitted = true, .limit = 5,
	    .remaining = 3, .reset_ms = 1000, .next_ms = 200 };

	rlg_limiter_later(&d, 0);
	REQUIRE_EQ(d.reset_ms, 1000);
	rlg_limiter_later(&d, 150);
	REQUIRE_EQ(d.reset_ms, 850);
	REQUIRE_EQ(d.next_ms, 50);
	REQUIRE_EQ(d.remaining, 3);
	REQUIRE_EQ(d.retry_ms, 0);
	rlg_limiter_later(&d, 900);
	REQUIRE_EQ(d.reset_ms, 1);
	REQUIRE_EQ(d.next_ms, 1);
	d = (struct rlg_decision){ .admitted = false, .reset_ms = 400,
	    .retry_ms = 400, .next_ms = 400 };
	rlg_limiter_later(&d, 100);
	REQUIRE_EQ(d.retry_ms, 300);
	REQUIRE_EQ(d.reset_ms, 300);
	REQUIRE_EQ(d.next_ms, 300);
}
END_TEST

Suite *
rlg_limiter_suite(void)
{
	Suite *s = suite_create("limiter");
	TCase *core = tcase_create("core");
	TCase *boundary = tcase_create("boundary");
	TCase *limits = tcase_create("limits");
	TCase *props = tcase_create("properties");
	TCase *cost = tcase_create("cost");
	TCase *merge = tcase_create("merge");
	TCase *ban = tcase_create("ban");

	tcase_add_test(core, test_admits_limit_then_rejects);
	tcase_add_test(core, test_window_aligned_and_resets);
	tcase_add_test(core, test_boundary_burst);
	tcase_add_test(core, test_names_and_dispatch);
	tcase_add_test(core, test_descriptors);
	tcase_add_test(core, test_fixed_unused_fields);
	tcase_add_test(core, test_sliding_window_table);
	tcase_add_test(core, test_token_bucket_table);
	tcase_add_test(core, test_token_bucket_sub_ms);
	tcase_add_test(core, test_sliding_log_table);
	tcase_add_test(core, test_delay_turns);
	tcase_add_test(core, test_delay_model);
	tcase_add_test(core, test_delay_later);
	tcase_add_test(core, test_next_fixed_window);
	tcase_add_test(core, test_next_sliding_window_decay);
	tcase_add_test(core, test_next_sliding_window_crossing);
	tcase_add_test(core, test_next_token_bucket);
	tcase_add_test(core, test_next_sliding_log);

	tcase_add_test(boundary, test_fixed_edges);
	tcase_add_test(boundary, test_sliding_window_edges);
	tcase_add_test(boundary, test_sliding_window_worst_span);
	tcase_add_test(boundary, test_token_bucket_edges);
	tcase_add_test(boundary, test_sliding_log_edges);
	tcase_add_test(boundary, test_retry_brute_force);
	tcase_add_test(boundary, test_seed_scenario);

	tcase_add_test(limits, test_clock_backwards_is_clamped);
	tcase_add_test(limits, test_limit_one_and_big_window);
	tcase_add_test(limits, test_damaged_state);
	tcase_add_test(limits, test_bad_policy);
	tcase_add_test(limits, test_bad_policy_per_algorithm);
	tcase_add_test(limits, test_rejected_is_bit_identical);
	tcase_add_test(limits, test_clock_back_never_grants_more);
	tcase_add_test(limits, test_clock_back_runs);
	tcase_add_test(limits, test_sliding_window_clock_back);
	tcase_add_test(limits, test_token_bucket_clock_back);
	tcase_add_test(limits, test_sliding_log_clock_back);
	tcase_add_test(limits, test_sliding_log_feed);
	tcase_add_test(limits, test_huge_gaps);
	tcase_add_test(limits, test_extremes);
	tcase_add_test(limits, test_limit_one_window_one);
	tcase_add_test(limits, test_large_limits);
	tcase_add_test(limits, test_token_bucket_burst);
	tcase_add_test(limits, test_damaged_rows);
	tcase_add_test(limits, test_bounds_hold);

	tcase_add_test(props, test_prop_hammer);
	tcase_add_test(props, test_prop_boundary_attack);
	tcase_add_test(props, test_prop_random);

	tcase_add_test(cost, test_cost_fixed_window);
	tcase_add_test(cost, test_cost_sliding_window);
	tcase_add_test(cost, test_cost_token_bucket);
	tcase_add_test(cost, test_cost_sliding_log);
	tcase_add_test(cost, test_cost_bad);
	tcase_add_test(cost, test_prop_cost);

	tcase_add_test(ban, test_ban_every_algorithm);
	tcase_add_test(ban, test_ban_first_refusal_and_bounds);
	tcase_add_test(ban, test_ban_none_is_bit_identical);
	suite_add_tcase(s, ban);

	tcase_add_test(merge, test_merge_fixed_window);
	tcase_add_test(merge, test_merge_sliding_window);
	tcase_add_test(merge, test_merge_token_bucket);
	tcase_add_test(merge, test_merge_huge_and_bad);
	tcase_add_test(merge, test_merge_associative);

	/* Hundreds of thousands of steps, slower under the sanitizers. */
	tcase_set_timeout(limits, 120);
	tcase_set_timeout(props, 120);
	tcase_set_timeout(cost, 120);
	suite_add_tcase(s, core);
	suite_add_tcase(s, boundary);
	suite_add_tcase(s, limits);
	suite_add_tcase(s, props);
	suite_add_tcase(s, cost);
	suite_add_tcase(s, merge);
	return s;
}
