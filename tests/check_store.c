/*
 * check_store.c: what a store step decides and writes, the same through
 * every backend, and the three store suites assembled from these tests
 * and each backend's own: "store" (SQLite files in a temporary directory,
 * check_store_sqlite.c), "store_redis" (a redis-server the suite starts,
 * check_store_redis.c) and "store_redis_cluster" (a three-master Redis
 * Cluster the suite creates, check_store_cluster.c). Their fixtures, and
 * the helpers that read the stored state back by backend (SQL, or HGET
 * and LRANGE), are in store_fixture.h; Redis runs with clock = local, so
 * the times are the same fixed ones and so are the expected decisions.
 *
 * "core": exact counting in one window at fixed times, new windows,
 * rejections that write nothing, one state per (policy, client), several
 * policies per request all or nothing; the rejection cache decides as the
 * store does (a differential), leaves to the store what it must, and
 * keeps a rejection of a client reset by hand; the operator's overrides
 * delivered exactly, and only when they changed. "algorithms": each
 * algorithm through the store decides exactly as the pure limiter does on
 * the same requests (a simulation in memory), with hand-counted
 * admissions per burst; several algorithms on one request, all or
 * nothing; advisory items; charges for new keys; a policy's copy with
 * other limits (a tier) deciding on the same state, behind the cache; the
 * penalty box (a ban) in each algorithm, written, timed, lifted.
 * "concurrency": threads and forked processes, each with its own handle on one store: exactly
 * limit admitted (sliding_log: limit, token_bucket: burst), never more or
 * fewer, with and without a rejection cache. "errors" (Redis: "core"):
 * items the store refuses.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "check_rlgate.h"
#include "check_store.h"
#include "fixture.h"
#include "store_fixture.h"
#include "util.h"

static void check_cache_differential(const struct rlg_policy *ps, size_t np,
    const char *tag, uint64_t min_hits);
static void add_shared_tests(TCase *tc, const char *name);
static void add_shared_tcases(Suite *s, void (*setup)(void),
    void (*teardown)(void));

/* ---- core --------------------------------------------------------- */

START_TEST(test_reopen_keeps_state)
{
	char *path = path_in("reopen.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "c", T1 + i, NULL));
	rlg_store_close(s);

	s = open_ok(path, 2000);       /* user_version 4: schema kept */
	ck_assert(hit(s, &p, "c", T1 + 10, &d));
	ck_assert_int_eq(d.remaining, 1);
	rlg_store_close(s);
	ck_assert_int_eq(count_of(path, "default", "c"), 4);
}
END_TEST

START_TEST(test_limit_in_window)
{
	char *path = path_in("limit.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 5; i++) {
		ck_assert(hit(s, &p, "10.0.0.1", T1, &d));
		ck_assert_int_eq(d.limit, 5);
		ck_assert_int_eq(d.remaining, 4 - i);
		ck_assert_int_eq(d.reset_ms, 59000);
		ck_assert_int_eq(d.retry_ms, 0);
	}
	for (i = 0; i < 5; i++) {
		ck_assert(!hit(s, &p, "10.0.0.1", T1 + 1000 * i, &d));
		ck_assert_int_eq(d.remaining, 0);
		ck_assert_int_eq(d.retry_ms, 59000 - 1000 * i);
		ck_assert_int_eq(d.reset_ms, 59000 - 1000 * i);
	}
	/* The last millisecond of the window still rejects. */
	ck_assert(!hit(s, &p, "10.0.0.1", WIN0 + 59999, &d));
	ck_assert_int_eq(d.retry_ms, 1);
	ck_assert_int_eq(count_of(path, "default", "10.0.0.1"), 5);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_new_window_resets)
{
	char *path = path_in("window.db");
	struct rlg_policy p = policy(3, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(!hit(s, &p, "c", T1, NULL));

	/* The next window, to the millisecond. */
	ck_assert(hit(s, &p, "c", WIN0 + 60000, &d));
	ck_assert_int_eq(d.remaining, 2);
	ck_assert_int_eq(d.reset_ms, 60000);
	ck_assert_int_eq(state_field(path, "default", "c", "window_start_ms"),
	    WIN0 + 60000);
	ck_assert_int_eq(count_of(path, "default", "c"), 1);

	/* Two windows skipped: a fresh count again. */
	ck_assert(hit(s, &p, "c", WIN0 + 180005, &d));
	ck_assert_int_eq(d.remaining, 2);
	ck_assert_int_eq(count_of(path, "default", "c"), 1);
	ck_assert_int_eq(state_field(path, "default", "c", "expires_ms"),
	    WIN0 + 240000);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_rejected_writes_nothing)
{
	char *path = path_in("reject.db"), before[256], after[256];
	struct rlg_policy p = policy(2, 60);
	struct rlg_policy q = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 1, 60,
	    0);
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(hit(s, &q, "c", T1, NULL));
	state_dump(path, "default", "c", before, sizeof before);

	/* Nothing at all is written: not the state, not an expiry. */
	probe_start(path);
	for (i = 0; i < 20; i++) {
		ck_assert(!hit(s, &p, "c", T1 + 100 * i, NULL));
		ck_assert(!hit(s, &q, "c", T1 + 100 * i, NULL));
	}
	ck_assert(!probe_changed(path));
	state_dump(path, "default", "c", after, sizeof after);
	ck_assert_str_eq(after, before);
	ck_assert_int_eq(count_of(path, "default", "c"), 2);
	ck_assert_int_eq(nlog(path, "sl", "c"), 1);

	/* An admitted request does write: the probe works. */
	probe_start(path);
	ck_assert(hit(s, &p, "other", T1, NULL));
	ck_assert(probe_changed(path));
	rlg_store_close(s);
}
END_TEST

START_TEST(test_distinct_clients)
{
	char *path = path_in("clients.db");
	struct rlg_policy p = policy(3, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "10.0.0.1", T1, NULL));
	ck_assert(!hit(s, &p, "10.0.0.1", T1, NULL));
	for (i = 0; i < 3; i++) {
		ck_assert(hit(s, &p, "10.0.0.2", T1, &d));
		ck_assert_int_eq(d.remaining, 2 - i);
	}
	ck_assert(!hit(s, &p, "10.0.0.2", T1, NULL));
	ck_assert(hit(s, &p, "2001:db8::/64", T1, &d));
	ck_assert_int_eq(d.remaining, 2);
	ck_assert_int_eq(count_of(path, "default", "10.0.0.1"), 3);
	ck_assert_int_eq(count_of(path, "default", "2001:db8::/64"), 1);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_one_row_per_client)
{
	char *path = path_in("rows.db");
	struct rlg_policy p1 = policy(5, 60), p2 = policy(100, 60);
	const char *clients[] = { "a", "b", "c" };
	struct rlg_store *s;
	int w, c, k;

	p2.name = name_hour;
	s = open_ok(path, 2000);
	for (w = 0; w < 5; w++) {
		for (c = 0; c < 3; c++) {
			for (k = 0; k < 2; k++) {
				ck_assert(hit(s, &p1, clients[c],
				    WIN0 + 60000 * w + k, NULL));
				ck_assert(hit(s, &p2, clients[c],
				    WIN0 + 60000 * w + k, NULL));
			}
		}
	}
	ck_assert_int_eq(nstates(path), 6);
	for (c = 0; c < 3; c++) {
		for (k = 0; k < 2; k++) {
			ck_assert_int_eq(state_field(path, k == 0 ? "default" :
			    "hour", clients[c], "window_start_ms"),
			    WIN0 + 4 * 60000);
			ck_assert_int_eq(count_of(path, k == 0 ? "default" :
			    "hour", clients[c]), 2);
		}
	}
	rlg_store_close(s);
}
END_TEST

START_TEST(test_policies_all_or_nothing)
{
	char *path = path_in("policies.db");
	struct rlg_policy burst = policy(2, 1), hour = policy(10, 3600);
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item items[2] = {
		{ NULL, NULL, false, false, 1 }, { NULL, NULL, false, false, 1 }
	};
	struct rlg_decision d[2];
	struct rlg_store *s;

	burst.name = name_burst;
	hour.name = name_hour;
	items[0].policy = &burst;
	items[0].client = "c";
	items[1].policy = &hour;
	items[1].client = "c";
	s = open_ok(path, 2000);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, 8);

	/* burst rejects: hour would admit, but writes nothing. */
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 999, d), RLG_OK);
	ck_assert(!d[0].admitted);
	ck_assert(d[1].admitted);
	ck_assert_int_eq(count_of(path, "hour", "c"), 2);

	/* The next second: both admit, hour counts 3. */
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 1000, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, 7);
	ck_assert_int_eq(count_of(path, "hour", "c"), 3);

	/* The same policy twice counts twice; all or nothing still. */
	items[0].policy = &p;
	items[1].policy = &p;
	items[0].client = items[1].client = "d";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, 3);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert_int_eq(d[1].remaining, 1);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(count_of(path, "default", "d"), 4);
	rlg_store_close(s);
}
END_TEST

/* ---- the rejection cache (store_cache.c) ----------------------------- */

/*
 * The same requests at the same instants into two files, one store with
 * the cache and one without: every decision is the same, field by field,
 * and the cache answered most rejections. Bursts every 97 ms over three
 * windows, with pauses, so rejections, retries that come due and new
 * windows all happen; one and two policies per request.
 */
static void
check_cache_differential(const struct rlg_policy *ps, size_t np,
    const char *tag, uint64_t min_hits)
{
	char a[64], b[64], ca[64], cb[64];
	struct rlg_store *c, *u;
	struct rlg_store_item items[2], uitems[2];
	struct rlg_decision dc[2], du[2];
	int64_t t = T1;
	size_t i;
	int k, rc, rejected = 0;

	snprintf(a, sizeof a, "cache-%s.db", tag);
	snprintf(b, sizeof b, "plain-%s.db", tag);
	c = open_with(path_in(a), 0, 64);
	u = open_with(path_in(b), 0, 0);
	ck_assert(rlg_test_stats(c).cache);
	ck_assert(!rlg_test_stats(u).cache);
	/*
	 * A client of its own for each store and each call: stores that
	 * share one keyspace (a Redis Cluster has database 0 only) must not
	 * meet.
	 */
	snprintf(ca, sizeof ca, "cached-%s", tag);
	snprintf(cb, sizeof cb, "plain-%s", tag);
	for (i = 0; i < np; i++) {
		items[i].policy = &ps[i];
		items[i].client = ca;
		items[i].advisory = false;
		items[i].if_new = false;
		items[i].cost = 1;
		uitems[i] = items[i];
		uitems[i].client = cb;
	}
	for (k = 0; k < 900; k++) {
		t += (k % 40 == 39) ? 1500 : 97;
		rc = rlg_store_step(c, items, np, t, dc);
		ck_assert_int_eq(rc, RLG_OK);
		ck_assert_int_eq(rlg_store_step(u, uitems, np, t, du), RLG_OK);
		for (i = 0; i < np; i++) {
			ck_assert_msg(dc[i].admitted == du[i].admitted &&
			    dc[i].limit == du[i].limit &&
			    dc[i].remaining == du[i].remaining &&
			    dc[i].reset_ms == du[i].reset_ms &&
			    dc[i].retry_ms == du[i].retry_ms,
			    "%s, request %d at +%lld ms, policy %zu: cached"
			    " %d/%lld/%lld/%lld, store %d/%lld/%lld/%lld", tag,
			    k, (long long)(t - T1), i, dc[i].admitted,
			    (long long)dc[i].remaining,
			    (long long)dc[i].reset_ms,
			    (long long)dc[i].retry_ms, du[i].admitted,
			    (long long)du[i].remaining,
			    (long long)du[i].reset_ms,
			    (long long)du[i].retry_ms);
			if (!du[i].admitted)
				rejected++;
		}
	}
	ck_assert_msg(rlg_test_stats(c).cache_hits >= min_hits && rejected > 0,
	    "%s: %llu hits", tag,
	    (unsigned long long)rlg_test_stats(c).cache_hits);
	rlg_store_close(c);
	rlg_store_close(u);
}

START_TEST(test_cache_exact_each_algorithm)
{
	struct rlg_policy fw = alg_policy(name_alg, RLG_ALG_FIXED_WINDOW, 5,
	    2, 0);
	struct rlg_policy sw = alg_policy(name_sw, RLG_ALG_SLIDING_WINDOW, 5,
	    2, 0);
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5, 2,
	    3);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 5, 2,
	    0);
	struct rlg_policy two[2];

	check_cache_differential(&fw, 1, "fixed", 300);
	check_cache_differential(&sw, 1, "sliding", 300);
	check_cache_differential(&tb, 1, "bucket", 300);
	check_cache_differential(&sl, 1, "log", 300);
	two[0] = fw;
	two[1] = sl;
	two[1].lim.limit = 7;
	check_cache_differential(two, 2, "fixed+log", 10);
	two[0] = tb;
	two[1] = sw;
	check_cache_differential(two, 2, "bucket+sliding", 10);
}
END_TEST

/*
 * What the cache leaves to the store: a request rejected by only some of
 * its policies, advisory items, a clock that went back before the
 * rejection, and the instant the earliest retry comes due.
 */
START_TEST(test_cache_leaves_to_store)
{
	char *path = path_in("cacheleft.db");
	struct rlg_policy p = policy(1, 60), q = policy(100, 60);
	struct rlg_store_item items[2] = { { &p, "c", false, false, 1 },
	    { &q, "c", false, false, 1 } };
	struct rlg_decision d[2];
	struct rlg_store *s = open_with(path, 0, 16);

	q.name = name_hour;
	ck_assert(hit(s, &p, "c", T1, NULL));
	/* Only p rejects: not remembered. */
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 1, d), RLG_OK);
	ck_assert(!d[0].admitted && d[1].admitted);
	ck_assert_uint_eq(rlg_test_stats(s).cache_stored, 0);
	/* Advisory: not remembered. */
	items[0].advisory = true;
	ck_assert_int_eq(rlg_store_step(s, items, 1, T1 + 2, d), RLG_OK);
	ck_assert_uint_eq(rlg_test_stats(s).cache_stored, 0);
	items[0].advisory = false;
	/* Remembered, then a hit. */
	ck_assert(!hit(s, &p, "c", T1 + 3, NULL));
	ck_assert_uint_eq(rlg_test_stats(s).cache_stored, 1);
	ck_assert(!hit(s, &p, "c", T1 + 4, &d[0]));
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 1);
	ck_assert_int_eq(d[0].retry_ms, WIN0 + 60000 - (T1 + 4));
	/* A clock gone back before the rejection: the store answers. */
	ck_assert(!hit(s, &p, "c", T1 + 2, NULL));
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 1);
	/* The last millisecond is a hit; the retry instant goes to the store. */
	ck_assert(!hit(s, &p, "c", WIN0 + 59999, NULL));
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 2);
	ck_assert(hit(s, &p, "c", WIN0 + 60000, NULL));
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 2);
	rlg_store_close(s);
}
END_TEST

/*
 * Documented: a client reset by hand stays rejected by a handle that
 * remembers its rejection until the retry time; a handle without the
 * cache sees the reset at once.
 */
START_TEST(test_cache_reset_by_hand)
{
	char *path = path_in("cachereset.db");
	struct rlg_policy p = policy(1, 60);
	struct rlg_store *c = open_with(path, 0, 16);
	struct rlg_store *u = open_with(path, 0, 0);

	ck_assert(hit(c, &p, "r", T1, NULL));
	ck_assert(!hit(c, &p, "r", T1 + 1, NULL));
	reset_client(path, "r");
	ck_assert(!hit(c, &p, "r", T1 + 2, NULL));
	ck_assert(hit(u, &p, "r", T1 + 3, NULL));
	rlg_store_close(c);
	rlg_store_close(u);
}
END_TEST

/* The concurrency tests again, every handle with a cache. */
START_TEST(test_cache_processes_one_client)
{
	char *path = path_in("cprocs1.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_ONE, 64, w);
	check_totals(path, MODE_ONE, w);
}
END_TEST

START_TEST(test_cache_processes_many_clients)
{
	char *path = path_in("cprocsn.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_MANY, 64, w);
	check_totals(path, MODE_MANY, w);
}
END_TEST

START_TEST(test_cache_processes_algorithms)
{
	char *path = path_in("cprocsalg.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_ALGS, 64, w);
	check_algorithms(path, w);
}
END_TEST

START_TEST(test_cache_threads_algorithms)
{
	char *path = path_in("cthreadsalg.db");
	struct worker w[NWORKERS];

	run_threads(path, MODE_ALGS, 64, w);
	check_algorithms(path, w);
}
END_TEST

/* ---- algorithms --------------------------------------------------- */

/*
 * 8 requests at each of these instants (ms after WIN0, a multiple of the
 * 10 s window), limit 5 per 10 s (token bucket: one every 2 s, burst 3);
 * the admissions per burst, counted by hand from app/limiter.h:
 *   fixed_window    the aligned windows 0, 10 s, 20 s, 30 s: 5 each.
 *   sliding_window  at 10 s the previous 5 still weigh fully: none; at
 *                   15 s they weigh 2.5: 3; at 25 s 3 * 0.5 + c < 5: 4;
 *                   at 34.999 s 4 * 0.5001 + c < 5: 3; at 35 s none.
 *   token_bucket    3 at once; then as the tat allows (now + 4 s).
 *   sliding_log     5 whenever the last 5 left the window: at 10 s
 *                   (0 <= 10 - 10), 25 s and 35 s, not at 34.999 s.
 */
static const int64_t burst_at_ms[8] = {
	0, 4000, 9999, 10000, 15000, 25000, 34999, 35000
};
static const struct {
	enum rlg_algorithm algorithm;
	int admitted[8];
} burst_cases[] = {
	{ RLG_ALG_FIXED_WINDOW,   { 5, 0, 0, 5, 0, 5, 5, 0 } },
	{ RLG_ALG_SLIDING_WINDOW, { 5, 0, 0, 0, 3, 4, 3, 0 } },
	{ RLG_ALG_TOKEN_BUCKET,   { 3, 2, 2, 1, 2, 3, 3, 0 } },
	{ RLG_ALG_SLIDING_LOG,    { 5, 0, 0, 5, 0, 5, 0, 5 } },
};

/* Loop test: _i picks the algorithm. */
START_TEST(test_algorithm_bursts)
{
	char *path = path_in("bursts.db");
	struct rlg_policy p = alg_policy(name_alg,
	    burst_cases[_i].algorithm, 5, 10, 3);
	const char *what = rlg_algorithm_name(p.lim.algorithm);
	struct rlg_decision d, want;
	struct sim m = { .p = &p };
	struct rlg_store *s;
	int b, k, admitted;

	s = open_ok(path, 2000);
	for (b = 0; b < 8; b++) {
		admitted = 0;
		for (k = 0; k < 8; k++) {
			admitted += hit(s, &p, "c", WIN0 + burst_at_ms[b], &d);
			sim_step(&m, WIN0 + burst_at_ms[b], &want);
			check_same(&d, &want, what, b * 8 + k);
		}
		ck_assert_msg(admitted == burst_cases[_i].admitted[b],
		    "%s: burst at %lld ms: %d admitted, %d expected", what,
		    (long long)burst_at_ms[b], admitted,
		    burst_cases[_i].admitted[b]);
		check_row(path, &m, "c");
	}
	rlg_store_close(s);
}
END_TEST

/*
 * 3000 requests of 3 clients, time moving on by 0-2999 ms and now and then
 * back by up to 30 s: every decision, row and log equals the simulation's.
 * A 20 s window: Redis expires a key after its state's expiry less the
 * step's now, in real milliseconds, and a loaded machine may take more
 * than a short window's between two steps of one client.
 */
START_TEST(test_algorithm_sequence)
{
	static const enum rlg_algorithm algs[4] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET,
	    RLG_ALG_SLIDING_LOG };
	static const char *const clients[3] = { "a", "b", "c" };
	char *path = path_in("sequence.db");
	struct rlg_policy p = alg_policy(name_alg, algs[_i], 7, 20, 4);
	struct rlg_decision d, want;
	struct sim m[3];
	struct rlg_store *s;
	uint64_t x = 88172645463325252ULL, r;
	int64_t now = T1;
	long i, admitted = 0;
	int c;

	memset(m, 0, sizeof m);
	for (c = 0; c < 3; c++)
		m[c].p = &p;
	s = open_ok(path, 2000);
	for (i = 0; i < 3000; i++) {
		/* One in 40 back by up to 30 s, else on by up to 3 s. */
		r = rlg_test_clock_walk(&x, &now, 40, 30000, 3000);
		c = (int)((r >> 20) % 3);
		admitted += hit(s, &p, clients[c], now, &d);
		sim_step(&m[c], now, &want);
		check_same(&d, &want, rlg_algorithm_name(p.lim.algorithm), i);
	}
	for (c = 0; c < 3; c++)
		check_row(path, &m[c], clients[c]);
	/* Both paths ran: some admitted, some rejected. */
	ck_assert_int_gt(admitted, 300);
	ck_assert_int_lt(admitted, 2900);
	rlg_store_close(s);
}
END_TEST

/*
 * 3 per second (sliding_log), 5 per 10 s (token_bucket, burst 5) and 5
 * per 10 s (sliding_log) on every request: the 4th in one second is
 * rejected by the first and advances none of them.
 */
/*
 * An advisory item (a dry_run policy) is decided and stored, but its
 * rejection rejects nothing, and only its admissions advance it.
 */
START_TEST(test_advisory_items)
{
	char *path = path_in("advisory.db");
	struct rlg_policy strict = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 2,
	    10, 0);
	struct rlg_policy main_p = alg_policy(name_ten, RLG_ALG_FIXED_WINDOW,
	    5, 10, 0);
	struct rlg_store_item items[2] = {
		{ &strict, "c", true, false, 1 }, { &main_p, "c", false, false, 1 }
	};
	struct rlg_decision d[2];
	struct rlg_store *s;
	int i, admitted = 0;

	s = open_ok(path, 2000);
	for (i = 0; i < 7; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + i, d), RLG_OK);
		if (i < 2)
			ck_assert(d[0].admitted);
		else
			ck_assert(!d[0].admitted);   /* would reject: dry run */
		if (d[1].admitted)
			admitted++;
	}
	/* The enforcing policy alone decided: 5 of 7. */
	ck_assert_int_eq(admitted, 5);
	ck_assert_int_eq(count_of(path, "ten", "c"), 5);
	/* The dry-run log holds only what it admitted. */
	ck_assert_int_eq(nlog(path, NULL, NULL), 2);
	/* Once the enforcing policy rejects, nothing advances. */
	items[0].advisory = false;
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 20000, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	rlg_store_close(s);
}
END_TEST

/*
 * A charge for a new key (if_new) after a key item: applied when the key
 * has no live state, skipped when it has, all in the step: a client
 * address starts at most 3 new keys per 10 s window, every algorithm of
 * the key's policy; keys it holds go on while it may start no new one.
 * The rejection cache answers a skipped charge as the store does.
 */
START_TEST(test_new_key_charges)
{
	static const enum rlg_algorithm algs[] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET, RLG_ALG_SLIDING_LOG };
	static char name_nk[] = "alg.new_keys";
	char *path = path_in("charges.db");
	struct rlg_policy key = alg_policy(name_alg, algs[_i], 2, 10, 2);
	struct rlg_policy charge = alg_policy(name_nk, RLG_ALG_FIXED_WINDOW, 3,
	    10, 3);
	struct rlg_store_item items[2] = {
		{ &key, "k:1", false, false, 1 }, { &charge, "10.0.0.1", false, true, 1 }
	};
	char kbuf[8];
	struct rlg_decision d[2];
	struct rlg_store *s;
	int i;

	s = open_with(path, 0, _i == 0 ? 4096 : 0);
	/* k:1 .. k:3 are new: each costs one of the 3 */
	for (i = 1; i <= 3; i++) {
		snprintf(kbuf, sizeof kbuf, "k:%d", i);
		items[0].client = kbuf;
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
		ck_assert(d[0].admitted && d[1].admitted);
		ck_assert(!d[0].skipped && !d[1].skipped);
		ck_assert_int_eq(d[1].remaining, 3 - i);
	}
	ck_assert_int_eq(count_of(path, "alg.new_keys", "10.0.0.1"), 3);
	/* a 4th new key: refused by the charge, nothing written */
	items[0].client = "k:4";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 1, d), RLG_OK);
	ck_assert(d[0].admitted);
	ck_assert(!d[1].admitted);
	ck_assert_int_gt(d[1].retry_ms, 0);
	ck_assert_int_eq(nstates(path), 4);
	/* a key the address holds: no charge (skipped), admitted */
	items[0].client = "k:1";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 2, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert(!d[0].skipped && d[1].skipped);
	ck_assert_int_eq(d[1].remaining, 3);
	ck_assert_int_eq(d[1].retry_ms, 0);
	ck_assert_int_eq(d[1].reset_ms, 0);
	ck_assert_int_eq(count_of(path, "alg.new_keys", "10.0.0.1"), 3);
	/* k:1 exhausted (limit 2): rejected by its key; twice, so that a
	 * cache answers the second, and the charge stays skipped */
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 3 + i, d),
		    RLG_OK);
		ck_assert(!d[0].admitted);
		ck_assert(d[1].admitted && d[1].skipped);
		ck_assert_int_eq(d[1].remaining, 3);
	}
	/* another address starts its own */
	items[0].client = "k:4";
	items[1].client = "10.0.0.2";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 5, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	/* an advisory charge (a dry run) refuses nothing */
	items[0].client = "k:5";
	items[1].client = "10.0.0.1";
	items[1].advisory = true;
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 6, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(count_of(path, "alg.new_keys", "10.0.0.1"), 3);
	items[1].advisory = false;
	/* a charge with no key before it */
	ck_assert_int_eq(rlg_store_step(s, items + 1, 1, T1 + 7, d),
	    RLG_EINVAL);
	items[0].if_new = true;
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 7, d), RLG_EINVAL);
	items[0].if_new = false;
	items[0].cost = 1;
	/*
	 * The next window (and past every state's expiry): new again. A
	 * cluster asks whether the key's state key still exists (its slot
	 * differs from the charge's), which in real time it does: skipped.
	 */
	items[0].client = "k:1";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 60000, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, cluster_mode ? 3 : 2);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_algorithms_all_or_nothing)
{
	char *path = path_in("mixed.db"), text[512];
	struct rlg_policy sec = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 1,
	    0);
	struct rlg_policy bucket = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5,
	    10, 5);
	struct rlg_policy ten = alg_policy(name_ten, RLG_ALG_SLIDING_LOG, 5, 10,
	    0);
	struct rlg_store_item items[3] = {
		{ &sec, "c", false, false, 1 }, { &bucket, "c", false, false, 1 }, { &ten, "c", false, false, 1 }
	};
	struct rlg_decision d[3];
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 100 * i, d),
		    RLG_OK);
		ck_assert(d[0].admitted && d[1].admitted && d[2].admitted);
	}
	ck_assert_int_eq(d[0].remaining, 0);
	ck_assert_int_eq(d[1].remaining, 2);
	ck_assert_int_eq(d[2].remaining, 2);
	/* The 4th in that second: only the first policy says no. */
	ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 300, d), RLG_OK);
	ck_assert(!d[0].admitted && d[1].admitted && d[2].admitted);
	ck_assert_int_eq(d[0].retry_ms, 700);
	ck_assert_int_eq(nlog(path, NULL, NULL), 6);
	log_dump(path, "sl", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999981000:0,1699999981100:0,"
	    "1699999981200:0");
	ck_assert_int_eq(state_field(path, "tb", "c", "tat_us"),
	    T1 * 1000 + 3 * 2000000);
	ck_assert_int_eq(count_of(path, "ten", "c"), 3);

	/*
	 * Once the three have left the 1 s window: the first admits 3
	 * again, the bucket 2 more (tat T1 + 6 s, up to 8 s ahead of now),
	 * the 10 s log 2 more (5): the third request is rejected by two.
	 */
	ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 1200, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted && d[2].admitted);
	ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 1200, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted && d[2].admitted);
	ck_assert_int_eq(d[2].remaining, 0);
	ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 1200, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted && !d[2].admitted);
	/* Exact rows: the 1 s log lost the rows that left its window. */
	log_dump(path, "sl", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999982200:0,1699999982200:1");
	log_dump(path, "ten", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999981000:0,1699999981100:0,"
	    "1699999981200:0,1699999982200:0,1699999982200:1");
	state_dump(path, "sl", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999982200|2|1699999984000|0|0");
	state_dump(path, "ten", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999981000|5|1699999993000|0|0");
	ck_assert_int_eq(state_field(path, "tb", "c", "tat_us"),
	    T1 * 1000 + 5 * 2000000);
	ck_assert_int_eq(nlog(path, NULL, NULL), 7);

	/* The same sliding_log twice on one request counts twice. */
	items[0].policy = &ten;
	items[1].policy = &ten;
	items[0].client = items[1].client = "d";
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
		ck_assert(d[0].admitted && d[1].admitted);
		ck_assert_int_eq(d[1].remaining, 3 - 2 * i);
	}
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(d[1].retry_ms, 10000);
	log_dump(path, "ten", "d", text, sizeof text);
	ck_assert_str_eq(text, "1699999981000:0,1699999981000:1,"
	    "1699999981000:2,1699999981000:3");
	rlg_store_close(s);
}
END_TEST

/* ---- concurrency -------------------------------------------------- */


START_TEST(test_processes_algorithms)
{
	char *path = path_in("procsalg.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_ALGS, 0, w);
	check_algorithms(path, w);
}
END_TEST

START_TEST(test_threads_algorithms)
{
	char *path = path_in("threadsalg.db");
	struct worker w[NWORKERS];

	run_threads(path, MODE_ALGS, 0, w);
	check_algorithms(path, w);
}
END_TEST

START_TEST(test_threads_one_client)
{
	char *path = path_in("threads1.db");
	struct worker w[NWORKERS];

	run_threads(path, MODE_ONE, 0, w);
	check_totals(path, MODE_ONE, w);
}
END_TEST

START_TEST(test_processes_one_client)
{
	char *path = path_in("procs1.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_ONE, 0, w);
	check_totals(path, MODE_ONE, w);
}
END_TEST

START_TEST(test_threads_many_clients)
{
	char *path = path_in("threadsn.db");
	struct worker w[NWORKERS];

	run_threads(path, MODE_MANY, 0, w);
	check_totals(path, MODE_MANY, w);
}
END_TEST

START_TEST(test_processes_many_clients)
{
	char *path = path_in("procsn.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_MANY, 0, w);
	check_totals(path, MODE_MANY, w);
}
END_TEST
/* ---- errors ------------------------------------------------------- */

START_TEST(test_bad_items)
{
	char *path = path_in("items.db"), key[RLG_CLIENT_KEY_MAX + 2];
	struct rlg_policy p = policy(5, 60), bad = policy(0, 60);
	struct rlg_store_item item = { &p, key, false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;

	s = open_ok(path, 2000);
	memset(key, 'k', sizeof key - 1);
	key[sizeof key - 1] = '\0';           /* RLG_CLIENT_KEY_MAX + 1 */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "client key") != NULL, "%s",
	    rlg_store_errmsg(s));
	key[RLG_CLIENT_KEY_MAX] = '\0';       /* exactly the maximum */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert(d.admitted);

	ck_assert_int_eq(rlg_store_step(s, &item, 0, T1, &d), RLG_EINVAL);
	item.client = NULL;
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);

	/* The limiter refuses: EINVAL, the transaction is not left open. */
	item.policy = &bad;
	item.client = "c";
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "default") != NULL, "%s",
	    rlg_store_errmsg(s));
	item.policy = &p;
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert_int_eq(d.remaining, 4);
	ck_assert_int_eq(nstates(path), 2);
	rlg_store_close(s);
}
END_TEST

/*
 * Request cost on every backend, behind the rejection cache, one algorithm
 * per loop iteration, 12 per minute, all at one instant: cost 5 twice
 * (7, then 2 left), 5 refused with the 2 left (nothing consumed) twice,
 * neither answered from the cache, so the cost-1 requests that follow
 * still get the 2 units; the sliding log holds one row per unit.
 */
START_TEST(test_cost_each_algorithm)
{
	static const enum rlg_algorithm algs[] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET, RLG_ALG_SLIDING_LOG };
	static const struct { int64_t cost; bool admitted; int64_t rem; }
	    rows[] = {
		{ 5, true, 7 }, { 5, true, 2 }, { 5, false, 2 },
		{ 5, false, 2 }, { 1, true, 1 }, { 1, true, 0 },
		{ 1, false, 0 },
	};
	struct rlg_policy p = alg_policy(name_alg, algs[_i], 12, 60, 12);
	struct rlg_store_item item = { &p, "10.0.0.5", false, false, 0 };
	struct rlg_decision d;
	struct rlg_store *s = open_with(path_in("cost.db"), 0, 64);
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		item.cost = rows[i].cost;
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
		ck_assert_msg(d.admitted == rows[i].admitted &&
		    d.remaining == rows[i].rem, "%s row %zu: %d, %lld left",
		    rlg_algorithm_name(p.lim.algorithm), i, d.admitted,
		    (long long)d.remaining);
		/* Only cost-1 refusals are the cache's. */
		ck_assert(!rlg_store_cached(s) || rows[i].cost == 1);
	}
	if (p.lim.algorithm == RLG_ALG_SLIDING_LOG)
		ck_assert_int_eq(nlog(path_in("cost.db"), name_alg,
		    "10.0.0.5"), 12);
	else if (p.lim.algorithm != RLG_ALG_TOKEN_BUCKET)
		ck_assert_int_eq(count_of(path_in("cost.db"), name_alg,
		    "10.0.0.5"), 12);
	rlg_store_close(s);
}
END_TEST

/*
 * The penalty box through the store, per algorithm (loop index): 2 a
 * minute, a ban of 600 s at the 2nd refusal of a window, behind a
 * rejection cache. The 1st refusal is written (its count), the 2nd
 * starts the ban (Retry-After its whole length, its end stored); during
 * it every request is refused to its exact end, nothing is written and
 * the cache never answers; at its end the client is admitted; a ban
 * again is lifted by rlgate --reset's call. A policy without a ban still
 * writes nothing on a refusal (test_rejected_writes_nothing).
 */
START_TEST(test_ban_each_algorithm)
{
	static const enum rlg_algorithm algs[] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET, RLG_ALG_SLIDING_LOG };
	char *path = path_in("ban.db");
	struct rlg_policy p = alg_policy(name_alg, algs[_i], 2, 60, 2);
	struct rlg_store *s = open_with(path, 0, 16);
	struct rlg_decision d;
	int64_t end = T1 + 2 + 600000, t, deleted;

	p.lim.ban_ms = 600000;
	p.lim.ban_after = 2;
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(!hit(s, &p, "c", T1 + 1, &d));
	ck_assert(d.retry_ms < 600000);
	ck_assert_int_eq(state_field(path, name_alg, "c", "refused"), 1);
	ck_assert_int_eq(state_field(path, name_alg, "c", "ban_until_ms"), 0);
	ck_assert(!hit(s, &p, "c", T1 + 2, &d));
	ck_assert_int_eq(d.retry_ms, 600000);
	ck_assert_int_eq(d.remaining, 0);
	ck_assert_int_eq(state_field(path, name_alg, "c", "ban_until_ms"),
	    end);
	probe_start(path);
	for (t = T1 + 3; t < end; t += 119999) {
		ck_assert(!hit(s, &p, "c", t, &d));
		ck_assert_int_eq(d.retry_ms, end - t);
		ck_assert_int_eq(d.reset_ms, end - t);
		ck_assert(!rlg_store_cached(s));
	}
	ck_assert(!hit(s, &p, "c", end - 1, &d));
	ck_assert_int_eq(d.retry_ms, 1);
	ck_assert(!probe_changed(path));
	ck_assert(hit(s, &p, "c", end, NULL));
	ck_assert(hit(s, &p, "c", end, NULL));
	ck_assert(!hit(s, &p, "c", end + 1, NULL));
	ck_assert(!hit(s, &p, "c", end + 2, &d));
	ck_assert_int_eq(d.retry_ms, 600000);
	ck_assert_int_eq(rlg_store_reset(s, "c", NULL, &deleted), RLG_OK);
	ck_assert_int_ge(deleted, 1);
	ck_assert_int_eq(state_field(path, name_alg, "c", "ban_until_ms"), -1);
	ck_assert(hit(s, &p, "c", end + 3, NULL));
	rlg_store_close(s);
}
END_TEST

/*
 * A tier: the gate's copy of a policy (the same name, so the same state;
 * another address) with other limits decides as a policy of those limits
 * on that state, on every backend and behind the rejection cache. Per
 * algorithm (loop index): the policy allows 3 a minute, the copy 6
 * (token_bucket: 6 a minute, a bucket of 12). A fresh client gets the
 * copy's capacity at once, and is then refused under the policy too; a
 * client refused twice under the policy (the second answer the cache's)
 * is admitted at once under the copy, by the store, and the store decides
 * its next request under the policy again (the cache forgot the entry the
 * copy's admission made stale). Then requests under both, three every 7 s
 * for three minutes, decide as the pure limiter does on the state the
 * store holds with each request's limits.
 */
START_TEST(test_tier_copy_each_algorithm)
{
	static const enum rlg_algorithm algs[] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET, RLG_ALG_SLIDING_LOG };
	enum rlg_algorithm a = algs[_i];
	char *path = path_in("tier.db"), what[64];
	struct rlg_policy p = alg_policy(name_alg, a, 3, 60, 3);
	struct rlg_policy *q = rlg_xmalloc(sizeof *q);
	struct rlg_store *s = open_with(path, 0, 64);
	struct rlg_decision d, want;
	struct sim m = { .p = &p };
	int64_t cap, i, k, r;

	*q = p;
	q->lim.limit = 6;
	q->lim.burst = a == RLG_ALG_TOKEN_BUCKET ? 12 : 6;
	cap = q->lim.burst;
	for (i = 0; i < cap; i++)
		ck_assert_msg(hit(s, q, "fresh", T1, &d), "%s: request %lld",
		    rlg_algorithm_name(a), (long long)i);
	ck_assert_int_eq(d.limit, 6);
	ck_assert(!hit(s, q, "fresh", T1, NULL));
	ck_assert(!hit(s, &p, "fresh", T1, &d));
	ck_assert_int_eq(d.limit, 3);

	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(!hit(s, &p, "c", T1, NULL));
	ck_assert(!rlg_store_cached(s));
	ck_assert(!hit(s, &p, "c", T1 + 1, NULL));
	ck_assert(rlg_store_cached(s));
	ck_assert_msg(hit(s, q, "c", T1 + 2, &d), "%s",
	    rlg_algorithm_name(a));
	ck_assert(!rlg_store_cached(s));
	ck_assert_int_eq(d.limit, 6);
	ck_assert(!hit(s, &p, "c", T1 + 3, &d));
	ck_assert(!rlg_store_cached(s));
	ck_assert_int_eq(d.limit, 3);

	for (k = 0; k < 26; k++) {
		for (r = 0; r < 3; r++) {
			m.p = (k + r) % 3 == 0 ? q : &p;
			sim_step(&m, T1 + k * 7000, &want);
			(void)hit(s, m.p, "d", T1 + k * 7000, &d);
			snprintf(what, sizeof what, "%s, limit %lld",
			    rlg_algorithm_name(a), (long long)m.p->lim.limit);
			check_same(&d, &want, what, (long)(k * 3 + r));
		}
	}
	rlg_store_close(s);
	free(q);
}
END_TEST

/* ---- overrides ---------------------------------------------------- */

#define KEY_HASH "k:0123456789abcdef0123456789abcdef"

/*
 * The operator's overrides, read as the gate polls them, behind the
 * rejection cache: none at first (a version all the same, never 0); rows
 * written by the operator delivered exactly, once, then nothing until they
 * change again (an update, a delete); another worker's handle sees the
 * same rows and the same version; fn stops the reading when it says so,
 * and the version is taken all the same.
 */
START_TEST(test_overrides)
{
	char *path = path_in("ovr.db");
	struct rlg_store *s = open_with(path, 0, 64), *w;
	struct overrides_seen seen = { 0 };
	uint64_t v = 0, v0, v1, vw = 0;

	ck_assert(rlg_test_stats(s).cache);
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_ne(v, 0);
	ck_assert_int_eq(seen.calls, 0);
	v0 = v;
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_eq(v, v0);
	ck_assert_int_eq(seen.calls, 0);

	override_set(path, "default", "203.0.113.7", "limit=600 window=60");
	override_set(path, "default", KEY_HASH, "exempt");
	override_set(path, "hour", "2001:db8::/32", "limit=10 burst=4");
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_ne(v, v0);
	ck_assert_uint_ne(v, 0);
	ck_assert_int_eq(seen.calls, 3);
	ck_assert_str_eq(seen.rows, "default|203.0.113.7|limit=600 window=60,"
	    "default|" KEY_HASH "|exempt,hour|2001:db8::/32|limit=10 burst=4");
	v1 = v;
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_eq(v, v1);
	ck_assert_int_eq(seen.calls, 0);

	/* Another worker: the same rows, the same version. */
	w = open_with(path, 0, 0);
	ck_assert_int_eq(overrides_read(w, &vw, &seen), RLG_OK);
	ck_assert_uint_eq(vw, v1);
	ck_assert_int_eq(seen.calls, 3);

	/* An update of a spec: all of them again. */
	override_set(path, "default", "203.0.113.7", "limit=6");
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_ne(v, v1);
	ck_assert_str_eq(seen.rows, "default|203.0.113.7|limit=6,"
	    "default|" KEY_HASH "|exempt,hour|2001:db8::/32|limit=10 burst=4");
	v1 = v;
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_int_eq(seen.calls, 0);

	/* A delete: the rest. */
	override_set(path, "hour", "2001:db8::/32", NULL);
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_ne(v, v1);
	ck_assert_str_eq(seen.rows, "default|203.0.113.7|limit=6,"
	    "default|" KEY_HASH "|exempt");

	/* fn stops after one row: the version is taken all the same. */
	vw = 0;
	seen.stop_after = 1;
	ck_assert_int_eq(overrides_read(w, &vw, &seen), RLG_OK);
	ck_assert_int_eq(seen.calls, 1);
	ck_assert_uint_eq(vw, v);
	seen.stop_after = 0;
	ck_assert_int_eq(overrides_read(w, &vw, &seen), RLG_OK);
	ck_assert_int_eq(seen.calls, 0);

	/* All deleted: none, at a version of its own. */
	override_set(path, "default", "203.0.113.7", NULL);
	override_set(path, "default", KEY_HASH, NULL);
	v1 = v;
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_ne(v, v1);
	ck_assert_uint_ne(v, 0);
	ck_assert_int_eq(seen.calls, 0);
	rlg_store_close(w);
	rlg_store_close(s);
}
END_TEST

/* Counts the rows delivered, and the last one's text; stops at *ctx's
 * limit (0: never). */
struct ovr_count {
	size_t n, stop;
	char last[128];
};

static int
ovr_count_row(void *ctx, const struct rlg_override_row *row)
{
	struct ovr_count *c = ctx;

	c->n++;
	snprintf(c->last, sizeof c->last, "%s|%s|%s", row->policy,
	    row->client, row->spec);
	return c->stop > 0 && c->n >= c->stop;
}

/*
 * More rows than 32,768 (Redis's reply could hold no more as an array of
 * fields and values): all of them delivered, on every backend; fn's stop
 * (the reader's max_overrides) ends the reading and the version is taken.
 */
START_TEST(test_overrides_many)
{
	char *path = path_in("ovr.db");
	struct rlg_store *s = open_with(path, 0, 64);
	struct ovr_count c = { 0, 0, "" };
	uint64_t v = 0, v1;

	ck_assert_int_eq(rlg_store_overrides(s, &v, ovr_count_row, &c),
	    RLG_OK);
	if (backend == RLG_BACKEND_SQLITE)
		sql_exec(path, "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL"
		    " SELECT n + 1 FROM i WHERE n < 39999) INSERT INTO"
		    " rlg_override(policy, client, spec) SELECT 'default',"
		    " '10.' || (n / 65536) || '.' || (n / 256 % 256) || '.' ||"
		    " (n % 256), 'limit=' || (n + 1) FROM i");
	else
		freeReplyObject(rdb(path, "EVAL %s 1 rlg:overrides",
		    "for n = 0, 39999 do redis.call('HSET', KEYS[1],"
		    " 'default 10.' .. math.floor(n / 65536) .. '.' .."
		    " (math.floor(n / 256) % 256) .. '.' .. (n % 256),"
		    " 'limit=' .. (n + 1)) end"));
	v1 = v;
	ck_assert_int_eq(rlg_store_overrides(s, &v, ovr_count_row, &c),
	    RLG_OK);
	ck_assert_uint_ne(v, v1);
	ck_assert_uint_eq(c.n, 40000);
	ck_assert_msg(strncmp(c.last, "default|10.0.", 13) == 0, "%s",
	    c.last);
	/* stopped after 100: the version all the same */
	c.n = 0;
	c.stop = 100;
	v1 = v;
	v = 0;
	ck_assert_int_eq(rlg_store_overrides(s, &v, ovr_count_row, &c),
	    RLG_OK);
	ck_assert_uint_eq(c.n, 100);
	ck_assert_uint_eq(v, v1);
	rlg_store_close(s);
}
END_TEST

/*
 * Smoothing on every backend: the wait of a held answer comes from the
 * store's decision alone (rlg_limiter_wait), so each backend's token
 * bucket (Redis's step.lua included) gives the turns: 5 a second, burst
 * 4, four requests at once wait 0, 200, 400 and 600 ms under delay 0, 0,
 * 0, 200 and 400 under delay 2; the fifth is refused and waits nothing.
 */
START_TEST(test_delay_turns)
{
	static const int64_t want[2][4] = { { 0, 200, 400, 600 },
	    { 0, 0, 200, 400 } };
	static const int64_t delays[2] = { 0, 2 };
	static const char *const clients[2] = { "10.0.0.7", "10.0.0.8" };
	struct rlg_policy p = alg_policy(name_alg, RLG_ALG_TOKEN_BUCKET, 5, 1,
	    4);
	struct rlg_store_item item = { &p, NULL, false, false, 0 };
	struct rlg_decision d;
	struct rlg_store *s = open_with(path_in("delay.db"), 0, 64);
	int k, i;

	for (k = 0; k < 2; k++) {
		item.client = clients[k];
		for (i = 0; i < 4; i++) {
			ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d),
			    RLG_OK);
			ck_assert(d.admitted);
			ck_assert_int_eq(rlg_limiter_wait(&p.lim, delays[k], 1,
			    &d), want[k][i]);
		}
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
		ck_assert(!d.admitted);
		ck_assert_int_eq(rlg_limiter_wait(&p.lim, delays[k], 1, &d), 0);
	}
	rlg_store_close(s);
}
END_TEST

/*
 * The tests every backend runs of test case name ("core", "algorithms",
 * "concurrency"), added to tc.
 */
static void
add_shared_tests(TCase *tc, const char *name)
{
	if (strcmp(name, "core") == 0) {
		tcase_add_test(tc, test_reopen_keeps_state);
		tcase_add_test(tc, test_limit_in_window);
		tcase_add_test(tc, test_new_window_resets);
		tcase_add_test(tc, test_rejected_writes_nothing);
		tcase_add_test(tc, test_distinct_clients);
		tcase_add_test(tc, test_one_row_per_client);
		tcase_add_test(tc, test_policies_all_or_nothing);
		tcase_add_test(tc, test_cache_exact_each_algorithm);
		tcase_add_test(tc, test_cache_leaves_to_store);
		tcase_add_test(tc, test_cache_reset_by_hand);
		tcase_add_test(tc, test_overrides);
		tcase_add_test(tc, test_overrides_many);
	} else if (strcmp(name, "algorithms") == 0) {
		tcase_add_loop_test(tc, test_algorithm_bursts, 0,
		    (int)(sizeof burst_cases / sizeof burst_cases[0]));
		tcase_add_loop_test(tc, test_algorithm_sequence, 0, 4);
		tcase_add_test(tc, test_algorithms_all_or_nothing);
		tcase_add_test(tc, test_advisory_items);
		tcase_add_loop_test(tc, test_new_key_charges, 0, 4);
		tcase_add_loop_test(tc, test_cost_each_algorithm, 0, 4);
		tcase_add_loop_test(tc, test_tier_copy_each_algorithm, 0, 4);
		tcase_add_test(tc, test_delay_turns);
		tcase_add_loop_test(tc, test_ban_each_algorithm, 0, 4);
	} else if (strcmp(name, "concurrency") == 0) {
		tcase_add_test(tc, test_threads_one_client);
		tcase_add_test(tc, test_processes_one_client);
		tcase_add_test(tc, test_threads_many_clients);
		tcase_add_test(tc, test_processes_many_clients);
		tcase_add_test(tc, test_processes_algorithms);
		tcase_add_test(tc, test_threads_algorithms);
		tcase_add_test(tc, test_cache_processes_one_client);
		tcase_add_test(tc, test_cache_processes_many_clients);
		tcase_add_test(tc, test_cache_processes_algorithms);
		tcase_add_test(tc, test_cache_threads_algorithms);
	}
}

/* SQLite: the shared tests, then the SQLite-only ones of each case. */
Suite *
rlg_store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc;

	tc = store_tcase(s, "core", base_setup, base_teardown, 60);
	add_shared_tests(tc, "core");
	rlg_store_sqlite_tests(tc, "core");

	tc = store_tcase(s, "algorithms", base_setup, base_teardown, 60);
	add_shared_tests(tc, "algorithms");
	rlg_store_sqlite_tests(tc, "algorithms");

	tc = store_tcase(s, "schema", base_setup, base_teardown, 120);
	rlg_store_sqlite_tests(tc, "schema");

	tc = store_tcase(s, "concurrency", base_setup, base_teardown, 120);
	add_shared_tests(tc, "concurrency");
	rlg_store_sqlite_tests(tc, "concurrency");

	tc = store_tcase(s, "errors", base_setup, base_teardown, 60);
	rlg_store_sqlite_tests(tc, "errors");
	tcase_add_test(tc, test_bad_items);
	return s;
}

/*
 * The test cases "core", "algorithms" and "concurrency" of the Redis
 * suites: the tests shared with SQLite, against the servers that setup
 * starts (one redis-server, or a cluster).
 */
static void
add_shared_tcases(Suite *s, void (*setup)(void), void (*teardown)(void))
{
	TCase *tc;

	tc = store_tcase(s, "core", setup, teardown, 60);
	add_shared_tests(tc, "core");
	tcase_add_test(tc, test_bad_items);

	tc = store_tcase(s, "algorithms", setup, teardown, 60);
	add_shared_tests(tc, "algorithms");

	tc = store_tcase(s, "concurrency", setup, teardown, 120);
	add_shared_tests(tc, "concurrency");
}

Suite *
rlg_store_redis_suite(void)
{
	Suite *s = suite_create("store_redis");
	TCase *tc;

	add_shared_tcases(s, redis_base_setup, redis_base_teardown);
	tc = store_tcase(s, "redis", redis_base_setup, redis_base_teardown,
	    60);
	rlg_store_redis_tests(tc);
	rlg_group_redis_tests(s, false);
	rlg_sync_redis_tests(s, false);
	rlg_global_redis_tests(s, false);
	return s;
}

Suite *
rlg_store_redis_cluster_suite(void)
{
	Suite *s = suite_create("store_redis_cluster");
	TCase *tc;

	add_shared_tcases(s, cluster_base_setup, cluster_base_teardown);
	tc = store_tcase(s, "cluster", cluster_base_setup,
	    cluster_base_teardown, 120);
	rlg_store_cluster_tests(tc, "cluster");
	rlg_group_redis_tests(s, true);
	rlg_sync_redis_tests(s, true);
	rlg_global_redis_tests(s, true);
	/* A master stopped and started again: a cluster of its own. */
	tc = store_tcase(s, "cluster_faults", cluster_base_setup,
	    cluster_base_teardown, 120);
	rlg_store_cluster_tests(tc, "cluster_faults");
	return s;
}
