/*
 * check_limiter.c: the fixed window at exact boundaries, with fixed times
 * (no clock, no sleeps): what the seed promises, the boundary burst it
 * warns about, a clock going backwards, and bad policies.
 */
#include <stdint.h>

#include "check_rlgate.h"
#include "limiter.h"
#include "util.h"

static struct rlg_policy
policy(int64_t limit, int64_t window_s)
{
	struct rlg_policy p = { "default", RLG_ALG_FIXED_WINDOW, limit,
	    window_s * 1000, RLG_KEY_IP };

	return p;
}

/* Sends one request at now; returns whether it was admitted. */
static int
hit(const struct rlg_policy *p, struct rlg_state *st, int64_t now,
    struct rlg_decision *d)
{
	ck_assert_int_eq(rlg_limiter_step(p, st, now, st, d), RLG_OK);
	return d->admitted;
}

/* 12:00:00 UTC on some day, a multiple of 60 s. */
#define T0 ((int64_t)1767268800000)

START_TEST(test_admits_limit_then_rejects)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_state st = { 0, 0, 0 };
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
	struct rlg_policy p = policy(2, 60);
	struct rlg_state st = { 0, 0, 0 };
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
	struct rlg_policy p = policy(60, 60);
	struct rlg_state st = { 0, 0, 0 };
	struct rlg_decision d;
	int i, admitted = 0;

	for (i = 0; i < 100; i++)
		admitted += hit(&p, &st, T0 + 59000 + i, &d);
	for (i = 0; i < 100; i++)
		admitted += hit(&p, &st, T0 + 60000 + i, &d);
	ck_assert_int_eq(admitted, 120);
}
END_TEST

START_TEST(test_clock_backwards_is_clamped)
{
	struct rlg_policy p = policy(3, 10);
	struct rlg_state st = { 0, 0, 0 };
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
	struct rlg_policy p = policy(1, RLG_WINDOW_S_MAX);
	struct rlg_state st = { 0, 0, 0 };
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
	struct rlg_policy p = policy(5, 60);
	struct rlg_state st = { T0, 1000, T0 + 60000 };   /* count > limit */
	struct rlg_decision d;

	ck_assert(!hit(&p, &st, T0 + 1, &d));
	st.count = -7;
	ck_assert(hit(&p, &st, T0 + 2, &d));
	ck_assert_int_eq(st.count, 1);
}
END_TEST

START_TEST(test_bad_policy)
{
	struct rlg_policy zero = policy(0, 60), nowin = policy(5, 0);
	struct rlg_policy huge = policy(RLG_LIMIT_MAX + 1, 60);
	struct rlg_state st = { 0, 0, 0 };
	struct rlg_decision d;

	ck_assert_int_eq(rlg_limiter_step(&zero, &st, T0, &st, &d), RLG_EINVAL);
	ck_assert_int_eq(rlg_limiter_step(&nowin, &st, T0, &st, &d), RLG_EINVAL);
	ck_assert_int_eq(rlg_limiter_step(&huge, &st, T0, &st, &d), RLG_EINVAL);
	ck_assert_str_eq(rlg_algorithm_name(RLG_ALG_FIXED_WINDOW),
	    "fixed_window");
}
END_TEST

Suite *
rlg_limiter_suite(void)
{
	Suite *s = suite_create("limiter");
	TCase *core = tcase_create("core"), *limits = tcase_create("limits");

	tcase_add_test(core, test_admits_limit_then_rejects);
	tcase_add_test(core, test_window_aligned_and_resets);
	tcase_add_test(core, test_boundary_burst);
	tcase_add_test(limits, test_clock_backwards_is_clamped);
	tcase_add_test(limits, test_limit_one_and_big_window);
	tcase_add_test(limits, test_damaged_state);
	tcase_add_test(limits, test_bad_policy);
	suite_add_tcase(s, core);
	suite_add_tcase(s, limits);
	return s;
}
