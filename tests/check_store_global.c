/*
 * check_store_global.c: test case "global" of the suites store_redis and
 * store_redis_cluster: the local+global mode (commit = behind with
 * Redis: store_table.c in front, store_table_sync.c), hosts being store
 * handles on tables of their own (paths of their own) and one Redis
 * database (the suite's server, or its cluster). A sync is
 * rlg_store_flush at the test's time; sync_ms is long, so that no
 * flusher thread syncs at its own time during a test.
 *
 * "bound": two hosts admit at most the limit plus what the other admitted
 * since a host last synced, and every count reaches Redis. "stale": a
 * client not synced for 2 x sync_ms is read again before a decision.
 * "alone": one host is exact for the three algorithms that merge, across
 * syncs, as the pure limiter. "cost": a host owes a request's cost.
 * "reset": a reset on one host reaches
 * Redis, and another host that refused the client admits it after its
 * next sync. "down" (single server): Redis killed: clients the table
 * holds are decided from it, a new one is a store error (on_error), a
 * sync fails and keeps what is owed; Redis back (empty): the next sync
 * pushes it. "crowded": a sync that frees expired entries of a full
 * table, whose runs then move the entries after them back, pushes what
 * every owing entry owes in that sync. "long key": a key past what an
 * entry holds inline is pushed as itself. "carry": the table file
 * removed, what its entries owe is carried into the new one and pushed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "check_store.h"
#include "fixture.h"
#include "limiter.h"
#include "store.h"
#include "store_fixture.h"
#include "util.h"

#define G_SYNC_MS 60000
/* An hour: stale after 2 minutes, still the same window. */
#define G_WINDOW_S 3600
#define G0 ((int64_t)1699999200000)     /* a multiple of 3600 s */

/*
 * A host: a handle in the local+global mode on the database that shared
 * stands for (url: another server), with its table at table-table.
 */
static struct rlg_store *
host_of(const char *shared, const char *url, const char *table,
    int64_t entries)
{
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;
	int rc;

	if (url == NULL) {
		store_cfg(&cfg, shared, 0);
	} else {
		memset(&cfg, 0, sizeof cfg);
		cfg.on_error = RLG_ON_ERROR_CLOSED;
		store_cfg_url(&cfg, url);
		cfg.redis.clock = RLG_CLOCK_LOCAL;
		cfg.redis.timeout_ms = 300;
		cfg.redis.connect_timeout_ms = 300;
	}
	free(cfg.sqlite.path);
	cfg.sqlite.path = rlg_xstrdup(table);
	cfg.sqlite.commit = RLG_COMMIT_BEHIND;
	cfg.sqlite.max_clients = entries;
	cfg.sqlite.table_entries = entries;
	cfg.sync_ms = G_SYNC_MS;
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_msg(rc == RLG_OK, "open %s: %s", table, rlg_store_errmsg(s));
	return s;
}

static struct rlg_store *
host(const char *shared, const char *url, const char *table)
{
	return host_of(shared, url, table, 4000);
}

/* A sync of host h at now, which must work (within HEAL_MS: a store
 * that failed waits before it connects again). */
static void
sync_ok(struct rlg_store *h, int64_t now)
{
	int64_t until = mono_ms() + HEAL_MS;

	while (rlg_store_flush(h, now) != RLG_OK && mono_ms() < until)
		sleep_ms(POLL_MS);
	ck_assert_msg(rlg_store_flush(h, now) == RLG_OK, "sync: %s",
	    rlg_store_errmsg(h));
}

/* Requests of client on h at now until one is refused (at most max):
 * how many were admitted. */
static int
admit_all(struct rlg_store *h, const struct rlg_policy *p,
    const char *client, int64_t now, int max)
{
	int n = 0;

	while (n < max && hit(h, p, client, now, NULL))
		n++;
	return n;
}

/* The count Redis holds for (p, client) of the shared path. */
static long long
redis_count(const char *shared, const struct rlg_policy *p,
    const char *client)
{
	char buf[256];
	long long ws, count;

	state_dump(shared, p->name, client, buf, sizeof buf);
	if (sscanf(buf, "%lld|%lld", &ws, &count) != 2)
		return 0;
	return count;
}

/* Two hosts on the shared database of the test. */
struct pair {
	char *shared, *ta, *tb;
	struct rlg_store *a, *b;
};

static void
pair_open(struct pair *h)
{
	h->shared = rlg_xstrdup(path_in("shared"));
	h->ta = rlg_xstrdup(path_in("a"));
	h->tb = rlg_xstrdup(path_in("b"));
	h->a = host(h->shared, NULL, h->ta);
	h->b = host(h->shared, NULL, h->tb);
}

static void
pair_close(struct pair *h)
{
	rlg_store_close(h->a);
	rlg_store_close(h->b);
	free(h->shared);
	free(h->ta);
	free(h->tb);
}

START_TEST(test_global_bound)
{
	struct pair h;
	struct rlg_policy p = policy(5, G_WINDOW_S);
	int64_t now = G0 + 1000;

	pair_open(&h);
	ck_assert_int_eq(admit_all(h.a, &p, "c1", now, 3), 3);
	sync_ok(h.a, now);
	ck_assert_int_eq(redis_count(h.shared, &p, "c1"), 3);
	/* b reads the client before deciding: 2 left */
	ck_assert_int_eq(admit_all(h.b, &p, "c1", now + 10, 10), 2);
	sync_ok(h.b, now + 20);
	ck_assert_int_eq(redis_count(h.shared, &p, "c1"), 5);
	/* a has not synced since b admitted: it admits its own 2 more, the
	 * bound (what the other host admitted since a's last sync) */
	ck_assert_int_eq(admit_all(h.a, &p, "c1", now + 30, 10), 2);
	sync_ok(h.a, now + 40);
	ck_assert_int_eq(redis_count(h.shared, &p, "c1"), 7);
	/* both know it now */
	ck_assert(!hit(h.a, &p, "c1", now + 50, NULL));
	ck_assert(!hit(h.b, &p, "c1", now + 50, NULL));
	/* the next window: exact again, from either */
	now = G0 + (int64_t)G_WINDOW_S * 1000 + 1000;
	ck_assert_int_eq(admit_all(h.a, &p, "c1", now, 2), 2);
	sync_ok(h.a, now);
	ck_assert_int_eq(admit_all(h.b, &p, "c1", now + 10, 10), 3);
	sync_ok(h.b, now + 20);
	ck_assert_int_eq(redis_count(h.shared, &p, "c1"), 5);
	/* a owes nothing and refused nothing: its sync leaves the client,
	 * and a admits up to its own view (b's 3 are the bound) */
	sync_ok(h.a, now + 20);
	ck_assert_int_eq(admit_all(h.a, &p, "c1", now + 30, 10), 3);
	sync_ok(h.a, now + 40);
	ck_assert_int_eq(redis_count(h.shared, &p, "c1"), 8);
	ck_assert(!hit(h.a, &p, "c1", now + 50, NULL));
	pair_close(&h);
}
END_TEST

START_TEST(test_global_stale)
{
	struct pair h;
	struct rlg_policy p = policy(5, G_WINDOW_S);
	int64_t now = G0 + 1000;

	pair_open(&h);
	ck_assert_int_eq(admit_all(h.a, &p, "c2", now, 1), 1);
	sync_ok(h.a, now);
	ck_assert_int_eq(admit_all(h.b, &p, "c2", now + 10, 10), 4);
	sync_ok(h.b, now + 20);
	/* within 2 x sync_ms a decides from its table; past it, it reads
	 * Redis first, and refuses */
	now += 2 * G_SYNC_MS + 1;
	ck_assert(!hit(h.a, &p, "c2", now, NULL));
	pair_close(&h);
}
END_TEST

/* One host alone, syncing between requests: its decisions are the pure
 * limiter's, for each algorithm that merges. */
START_TEST(test_global_alone)
{
	char *shared = rlg_xstrdup(path_in("shared"));
	char *ta = rlg_xstrdup(path_in("a"));
	struct rlg_policy pol[3] = {
	    alg_policy(name_default, RLG_ALG_FIXED_WINDOW, 4, 60, 0),
	    alg_policy(name_sw, RLG_ALG_SLIDING_WINDOW, 4, 60, 0),
	    alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 4, 60, 2) };
	struct rlg_store *a = host(shared, NULL, ta);
	struct rlg_state st[3] = { { 0 } }, out;
	struct rlg_decision d;
	int64_t now;
	size_t k, i;
	bool want, got;

	for (i = 0; i < 120; i++) {
		now = G0 + (int64_t)i * 1700;
		for (k = 0; k < 3; k++) {
			ck_assert_int_eq(rlg_limiter_step(&pol[k].lim, &st[k],
			    now, 1, &out, &d), RLG_OK);
			want = d.admitted;
			if (want)
				st[k] = out;
			got = hit(a, &pol[k], "c3", now, NULL);
			ck_assert_msg(got == want, "%s at step %zu: got %d,"
			    " the limiter %d", pol[k].name, i, got, want);
		}
		if (i % 3 == 0)
			sync_ok(a, now);
	}
	rlg_store_close(a);
	free(shared);
	free(ta);
}
END_TEST

/* A request's cost is what a host owes: units, not requests. */
START_TEST(test_global_cost)
{
	struct pair h;
	struct rlg_policy p = policy(10, G_WINDOW_S);
	struct rlg_store_item it = { &p, "c6", false, false, 4 };
	struct rlg_decision d;
	int64_t now = G0 + 1000;

	pair_open(&h);
	ck_assert_int_eq(rlg_store_step(h.a, &it, 1, now, &d), RLG_OK);
	ck_assert(d.admitted);
	sync_ok(h.a, now);
	ck_assert_int_eq(redis_count(h.shared, &p, "c6"), 4);
	it.cost = 7;
	ck_assert_int_eq(rlg_store_step(h.b, &it, 1, now + 10, &d), RLG_OK);
	ck_assert(!d.admitted);
	it.cost = 6;
	ck_assert_int_eq(rlg_store_step(h.b, &it, 1, now + 10, &d), RLG_OK);
	ck_assert(d.admitted);
	sync_ok(h.b, now + 20);
	ck_assert_int_eq(redis_count(h.shared, &p, "c6"), 10);
	pair_close(&h);
}
END_TEST

START_TEST(test_global_reset)
{
	struct pair h;
	struct rlg_policy p = policy(3, G_WINDOW_S);
	int64_t now = G0 + 1000, deleted = 0;

	pair_open(&h);
	ck_assert_int_eq(admit_all(h.a, &p, "c4", now, 10), 3);
	sync_ok(h.a, now);
	ck_assert(!hit(h.a, &p, "c4", now + 10, NULL));
	ck_assert_int_eq(rlg_store_reset(h.b, "c4", NULL, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 1);
	ck_assert_int_eq(redis_count(h.shared, &p, "c4"), 0);
	/* a refused it since its last sync: the next one reads Redis */
	sync_ok(h.a, now + 20);
	ck_assert_int_eq(admit_all(h.a, &p, "c4", now + 30, 10), 3);
	/* one policy only */
	ck_assert_int_eq(rlg_store_reset(h.b, "c4", "other", &deleted),
	    RLG_OK);
	ck_assert_int_eq(deleted, 0);
	pair_close(&h);
}
END_TEST

START_TEST(test_global_down)
{
	struct rlg_test_redis r;
	char *ta = rlg_xstrdup(path_in("a")), *tc = rlg_xstrdup(path_in("c"));
	struct rlg_policy p = policy(6, G_WINDOW_S);
	struct rlg_store *a, *c;
	struct rlg_store_item item = { &p, "new", false, false, 1 };
	struct rlg_decision d;
	int64_t now = G0 + 1000;

	ck_assert_int_eq(rlg_test_redis_start(&r), 0);
	a = host(NULL, r.url, ta);
	ck_assert_int_eq(admit_all(a, &p, "c5", now, 2), 2);
	sync_ok(a, now);
	ck_assert_int_eq(rlg_test_redis_kill(&r), 0);
	/* the table decides the client it holds; a new one is an error */
	ck_assert_int_eq(admit_all(a, &p, "c5", now + 10, 3), 3);
	ck_assert_int_eq(rlg_store_step(a, &item, 1, now + 10, &d),
	    RLG_ESTORE);
	ck_assert_int_eq(rlg_store_flush(a, now + 20), RLG_ESTORE);
	/* back, empty: what was admitted meanwhile (3) is pushed */
	ck_assert_int_eq(rlg_test_redis_restart(&r), 0);
	sync_ok(a, now + 30);
	c = host(NULL, r.url, tc);
	ck_assert_int_eq(admit_all(c, &p, "c5", now + 40, 10), 3);
	rlg_store_close(a);
	rlg_store_close(c);
	rlg_test_redis_stop(&r);
	free(ta);
	free(tc);
}
END_TEST

/* The table file removed: the handle carries its entries into the table
 * the path names, with what they owe, which its next sync pushes. */
START_TEST(test_global_carry)
{
	struct pair h;
	struct rlg_policy p = policy(10, G_WINDOW_S);
	char table[512];
	int64_t now = G0 + 1000;

	pair_open(&h);
	ck_assert_int_eq(admit_all(h.a, &p, "c9", now, 1), 1);
	sync_ok(h.a, now);
	ck_assert_int_eq(admit_all(h.a, &p, "c9", now + 10, 2), 2);
	snprintf(table, sizeof table, "%s-table", h.ta);
	ck_assert_int_eq(unlink(table), 0);
	ck_assert(hit(h.a, &p, "c9", now + 20, NULL));
	sync_ok(h.a, now + 30);
	ck_assert_int_eq(redis_count(h.shared, &p, "c9"), 4);
	pair_close(&h);
}
END_TEST

/* A key longer than an entry holds inline (in a spill slot of the
 * table) is pushed and read back as itself. */
START_TEST(test_global_long_key)
{
	struct pair h;
	struct rlg_policy p = policy(3, G_WINDOW_S);
	char client[200];
	int64_t now = G0 + 1000;

	memset(client, 'k', sizeof client - 1);
	client[sizeof client - 1] = '\0';
	pair_open(&h);
	ck_assert_int_eq(admit_all(h.a, &p, client, now, 2), 2);
	sync_ok(h.a, now);
	ck_assert_int_eq(redis_count(h.shared, &p, client), 2);
	ck_assert_int_eq(admit_all(h.b, &p, client, now + 10, 10), 1);
	sync_ok(h.b, now + 20);
	ck_assert_int_eq(redis_count(h.shared, &p, client), 3);
	pair_close(&h);
}
END_TEST

/*
 * Tables of 64 entries (86 slots) full: runs of entries, the 16 p
 * clients come last (so some sit after q clients in runs). Each client
 * admitted once and synced; then, the q clients expired, each p client
 * admitted again: the next sync frees the q entries (each freed slot
 * taken by the next entry of its run whose home allows) and must push
 * every p client's unit in that one sync, wherever its entry moved.
 * Three tables, each with a hash key of its own.
 */
START_TEST(test_global_crowded)
{
	char *shared = rlg_xstrdup(path_in("shared"));
	char *table;
	struct rlg_policy p = alg_policy("p", RLG_ALG_FIXED_WINDOW, 10,
	    G_WINDOW_S, 0);
	struct rlg_policy q = alg_policy("q", RLG_ALG_FIXED_WINDOW, 10, 1, 0);
	struct rlg_store *h;
	char client[32], name[16];
	int64_t now;
	int i, round, pushed;

	for (round = 0; round < 3; round++) {
		snprintf(name, sizeof name, "crowded%d", round);
		table = rlg_xstrdup(path_in(name));
		h = host_of(shared, NULL, table, 64);
		now = G0 + 1000;
		/* the p clients last: more of them after others in runs */
		for (i = 0; i < 64; i++) {
			snprintf(client, sizeof client, "%c%d-%d",
			    i < 48 ? 'q' : 'p', round, i < 48 ? i : i - 48);
			ck_assert(hit(h, i < 48 ? &q : &p, client, now, NULL));
		}
		sync_ok(h, now);
		now += 5000;
		for (i = 0; i < 16; i++) {
			snprintf(client, sizeof client, "p%d-%d", round, i);
			ck_assert(hit(h, &p, client, now, NULL));
		}
		sync_ok(h, now);
		for (i = 0, pushed = 0; i < 16; i++) {
			snprintf(client, sizeof client, "p%d-%d", round, i);
			pushed += redis_count(shared, &p, client) == 2;
		}
		ck_assert_int_eq(pushed, 16);
		rlg_store_close(h);
		free(table);
	}
	free(shared);
}
END_TEST

void
rlg_global_redis_tests(Suite *s, bool cluster)
{
	TCase *tc = store_tcase(s, "global", cluster ? cluster_base_setup :
	    redis_base_setup, cluster ? cluster_base_teardown :
	    redis_base_teardown, 60);

	tcase_add_test(tc, test_global_bound);
	tcase_add_test(tc, test_global_stale);
	tcase_add_test(tc, test_global_alone);
	tcase_add_test(tc, test_global_cost);
	tcase_add_test(tc, test_global_reset);
	tcase_add_test(tc, test_global_crowded);
	tcase_add_test(tc, test_global_long_key);
	tcase_add_test(tc, test_global_carry);
	if (!cluster)
		tcase_add_test(tc, test_global_down);
}
