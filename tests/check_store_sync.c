/*
 * check_store_sync.c: test case "sync" of the suites store_redis and
 * store_redis_cluster: rlg_store_sync (the local+global mode's exchange)
 * on the suite's redis-server, or its three-master cluster.
 *
 * "model": many clients (across slots on the cluster) of the three
 * mergeable algorithms in one call, repeatedly, each result equal to a
 * model held by rlg_limiter_merge (expires rounded up to the second, as
 * the store keeps it), and the stored hashes too. "steps": a sync and
 * exact-mode steps on one store count together (keys and fields are
 * step.lua's). "refused": what no store takes, nothing written. "down"
 * (single server): RLG_ESTORE naming the server, every item unknown.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "check_store.h"
#include "fixture.h"
#include "limiter.h"
#include "store.h"
#include "store_fixture.h"
#include "util.h"

/* Past one script call's 1024 items on a single server. */
#define SYNC_CLIENTS 400
#define SYNC_POLICIES 3
#define SYNC_ITEMS (SYNC_CLIENTS * SYNC_POLICIES)
#define SYNC_ROUNDS 4

static struct rlg_state model[SYNC_ITEMS];
static struct rlg_sync_item items[SYNC_ITEMS];
static struct rlg_state global[SYNC_ITEMS];
static char clients[SYNC_CLIENTS][16];

/* What the store keeps of a merged state: expires rounded up to 1 s. */
static struct rlg_state
as_stored(struct rlg_state st)
{
	if (st.expires_ms > 0 && st.expires_ms % 1000 != 0)
		st.expires_ms += 1000 - st.expires_ms % 1000;
	return st;
}

static void
require_state(const struct rlg_state *got, const struct rlg_state *want,
    size_t i)
{
	ck_assert_msg(memcmp(got, want, sizeof *got) == 0, "item %zu: got"
	    " %lld %lld %lld %lld %lld, want %lld %lld %lld %lld %lld", i,
	    (long long)got->window_start_ms, (long long)got->count,
	    (long long)got->prev_count, (long long)got->tat_us,
	    (long long)got->expires_ms, (long long)want->window_start_ms,
	    (long long)want->count, (long long)want->prev_count,
	    (long long)want->tat_us, (long long)want->expires_ms);
}

/*
 * Many clients and three algorithms in one call, SYNC_ROUNDS times with
 * units and windows that move on: every result and stored field equals
 * the model's.
 */
START_TEST(test_sync_model)
{
	char *path = path_in("sync");
	struct rlg_policy pol[SYNC_POLICIES] = {
	    alg_policy(name_default, RLG_ALG_FIXED_WINDOW, 10, 60, 0),
	    alg_policy(name_sw, RLG_ALG_SLIDING_WINDOW, 10, 60, 0),
	    alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 10, 60, 5) };
	struct rlg_store *s = open_ok(path, 0);
	uint64_t x = 12345;
	int64_t now, units;
	size_t i, r;

	memset(model, 0, sizeof model);
	for (r = 0; r < SYNC_ROUNDS; r++) {
		now = T1 + (int64_t)r * 45000;
		for (i = 0; i < SYNC_ITEMS; i++) {
			snprintf(clients[i / SYNC_POLICIES], sizeof clients[0],
			    "c%zu", i / SYNC_POLICIES);
			units = (int64_t)(rlg_test_xorshift(&x) % 7);
			items[i] = (struct rlg_sync_item){
			    &pol[i % SYNC_POLICIES], clients[i / SYNC_POLICIES],
			    units, now - now % 60000 };
			ck_assert_int_eq(rlg_limiter_merge(&items[i].policy->lim,
			    &model[i], units, items[i].window_start_ms, now,
			    &model[i]), RLG_OK);
			model[i] = as_stored(model[i]);
		}
		ck_assert_msg(rlg_store_sync(s, items, SYNC_ITEMS, now,
		    global) == RLG_OK, "%s", rlg_store_errmsg(s));
		for (i = 0; i < SYNC_ITEMS; i++)
			require_state(&global[i], &model[i], i);
	}
	for (i = 0; i < SYNC_ITEMS; i += 37)
		if (model[i].expires_ms > 0)
			ck_assert_int_eq(state_field(path,
			    items[i].policy->name, items[i].client,
			    i % SYNC_POLICIES == 2 ? "tat_us" : "count"),
			    i % SYNC_POLICIES == 2 ? model[i].tat_us :
			    model[i].count);
	rlg_store_close(s);
}
END_TEST

/* A sync adds to what steps counted, and steps see what a sync added. */
START_TEST(test_sync_steps)
{
	char *path = path_in("steps");
	struct rlg_policy p = policy(10, 60);
	struct rlg_store_item item = { &p, "a", false, false, 1 };
	struct rlg_sync_item sy = { &p, "a", 5, WIN0 };
	struct rlg_store *s = open_ok(path, 0);
	struct rlg_decision d;
	struct rlg_state g;
	int k;

	for (k = 0; k < 3; k++)
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert_int_eq(rlg_store_sync(s, &sy, 1, T1, &g), RLG_OK);
	ck_assert_int_eq(g.count, 8);
	ck_assert_int_eq(g.window_start_ms, WIN0);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 1, &d), RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 1);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 2, &d), RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 3, &d), RLG_OK);
	ck_assert(!d.admitted);
	/* units 0 reads, writes nothing. */
	sy.units = 0;
	probe_start(path);
	ck_assert_int_eq(rlg_store_sync(s, &sy, 1, T1 + 4, &g), RLG_OK);
	ck_assert(!probe_changed(path));
	ck_assert_int_eq(g.count, 10);
	ck_assert_int_eq(count_of(path, "default", "a"), 10);
	/* Units of a window that is over change nothing. */
	sy.units = 4;
	sy.window_start_ms = WIN0 - 60000;
	ck_assert_int_eq(rlg_store_sync(s, &sy, 1, T1 + 5, &g), RLG_OK);
	ck_assert_int_eq(g.count, 10);
	/* Past the limit: kept, and a step refuses. */
	sy.window_start_ms = WIN0;
	ck_assert_int_eq(rlg_store_sync(s, &sy, 1, T1 + 6, &g), RLG_OK);
	ck_assert_int_eq(g.count, 14);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 7, &d), RLG_OK);
	ck_assert(!d.admitted);
	rlg_store_close(s);
}
END_TEST

/*
 * The script flushed from every server between two syncs: loaded again
 * where it is missing, and each call merged once (on the cluster, the
 * calls sent again alone through the redirection code).
 */
START_TEST(test_sync_noscript)
{
	char *path = path_in("noscript");
	struct rlg_policy p = policy(1000, 60);
	struct rlg_store *s = open_ok(path, 0);
	struct rlg_sync_item sy[40];
	struct rlg_state g[40];
	char names[40][8];
	redisReply *r;
	size_t i, k;

	for (i = 0; i < 40; i++) {
		snprintf(names[i], sizeof names[i], "n%zu", i);
		sy[i] = (struct rlg_sync_item){ &p, names[i], 3, WIN0 };
	}
	for (k = 1; k <= 3; k++) {
		ck_assert_msg(rlg_store_sync(s, sy, 40, T1, g) == RLG_OK, "%s",
		    rlg_store_errmsg(s));
		for (i = 0; i < 40; i++)
			ck_assert_int_eq(g[i].count, (int64_t)(3 * k));
		for (i = 0; i < (cluster_mode ? RLG_TEST_CLUSTER_NODES : 1);
		    i++) {
			r = rcmd(cluster_mode ? cluster_srv.port[i] :
			    redis_srv.port, NULL, 0, "SCRIPT FLUSH");
			freeReplyObject(r);
		}
	}
	ck_assert_int_eq(count_of(path, "default", "n7"), 9);
	rlg_store_close(s);
}
END_TEST

/* What no store takes is refused before anything is sent. */
START_TEST(test_sync_refused)
{
	char *path = path_in("refused");
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 10,
	    0);
	struct rlg_policy p = policy(10, 60);
	struct rlg_sync_item sy[2] = { { &p, "a", 1, WIN0 },
	    { &sl, "a", 1, WIN0 } };
	struct rlg_store *s = open_ok(path, 0);
	struct rlg_state g[2];

	ck_assert_int_eq(rlg_store_sync(s, sy, 2, T1, g), RLG_EINVAL);
	ck_assert_ptr_nonnull(strstr(rlg_store_errmsg(s), "sliding_log"));
	sy[1] = (struct rlg_sync_item){ &p, "b", -1, WIN0 };
	ck_assert_int_eq(rlg_store_sync(s, sy, 2, T1, g), RLG_EINVAL);
	sy[1] = (struct rlg_sync_item){ &p, "}b", 1, WIN0 };
	ck_assert_int_eq(rlg_store_sync(s, sy, 2, T1, g), RLG_EINVAL);
	ck_assert_int_eq(rlg_store_sync(s, sy, 0, T1, g), RLG_EINVAL);
	ck_assert_int_eq(nstates(path), 0);
	rlg_store_close(s);
}
END_TEST

/* Redis TIME, in ms, of the server that holds path. */
static int64_t
redis_now_ms(const char *path)
{
	redisReply *r = rdb(path, "TIME");
	int64_t t;

	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	ck_assert_uint_eq(r->elements, 2);
	t = strtoll(r->element[0]->str, NULL, 10) * 1000 +
	    strtoll(r->element[1]->str, NULL, 10) / 1000;
	freeReplyObject(r);
	return t;
}

/*
 * clock = redis: the caller's now (1970 here) is not used; the token
 * bucket's TAT starts from Redis TIME.
 */
START_TEST(test_sync_redis_clock)
{
	char *path = path_in("clock");
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 10, 60,
	    5);
	struct rlg_sync_item sy = { &tb, "a", 2, 0 };
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;
	struct rlg_state g;
	int64_t before, after;

	store_cfg(&cfg, path, 0);
	cfg.redis.clock = RLG_CLOCK_REDIS;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);
	store_cfg_free(&cfg);
	before = redis_now_ms(path);
	ck_assert_msg(rlg_store_sync(s, &sy, 1, 1, &g) == RLG_OK, "%s",
	    rlg_store_errmsg(s));
	after = redis_now_ms(path);
	/* Two emission intervals of 6 s after Redis's now. */
	ck_assert_int_ge(g.tat_us, before * 1000 + 12000000);
	ck_assert_int_le(g.tat_us, after * 1000 + 12000000);
	rlg_store_close(s);
}
END_TEST

/* A server that is not there: RLG_ESTORE naming it, nothing known. */
START_TEST(test_sync_down)
{
	struct rlg_policy p = policy(10, 60);
	struct rlg_sync_item sy[2] = { { &p, "a", 1, WIN0 },
	    { &p, "b", 2, WIN0 } };
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;
	struct rlg_state g[2];
	char url[64], where[32];
	int port = free_port();

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	(void)rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(rlg_store_sync(s, sy, 2, T1, g), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), where) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(g[0].expires_ms, RLG_SYNC_UNKNOWN);
	ck_assert_int_eq(g[1].expires_ms, RLG_SYNC_UNKNOWN);
	rlg_store_close(s);
}
END_TEST

void
rlg_sync_redis_tests(Suite *s, bool cluster)
{
	TCase *tc = store_tcase(s, "sync", cluster ? cluster_base_setup :
	    redis_base_setup, cluster ? cluster_base_teardown :
	    redis_base_teardown, 60);

	tcase_add_test(tc, test_sync_model);
	tcase_add_test(tc, test_sync_steps);
	tcase_add_test(tc, test_sync_refused);
	tcase_add_test(tc, test_sync_noscript);
	tcase_add_test(tc, test_sync_redis_clock);
	if (!cluster)
		tcase_add_test(tc, test_sync_down);
}
