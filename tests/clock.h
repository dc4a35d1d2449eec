/*
 * clock.h: a clock's reading in nanoseconds, for the test programs and
 * benchmarks that time themselves (inline: fake_redis and loadgen link
 * nothing else of the tests).
 */
#ifndef RLG_TEST_CLOCK_H
#define RLG_TEST_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clock_gettime(id) in ns: ms, us or seconds are a division away. */
static inline int64_t
rlg_test_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* clock_gettime(id) in ms. */
static inline int64_t
rlg_test_clock_ms(clockid_t id)
{
	return rlg_test_clock_ns(id) / 1000000;
}

/* The monotonic clock in seconds: what a benchmark times a round by. */
static inline double
rlg_test_mono_s(void)
{
	return (double)rlg_test_clock_ns(CLOCK_MONOTONIC) / 1e9;
}

#endif
