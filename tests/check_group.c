/*
 * check_group.c: group commit (store_group.c) of the SQLite store, on real
 * files, and of the Redis store (store_redis_batch.c), on a real
 * redis-server, with 8 threads of one process, each with its own handle,
 * sending at once at one fixed instant.
 *
 * A batch must decide exactly as a serial run would: so for every
 * algorithm exactly limit (token_bucket: burst) requests are admitted, and
 * the RateLimit-Remaining values of the admitted ones are limit - 1 down
 * to 0, each exactly once (two requests decided on the same state would
 * show the same value; a lost write would admit one too many). The group
 * counters prove the requests went through batches and that batches held
 * more than one request. A store that is full (SQLite's max_clients)
 * undoes only the request that found it full; a request the store refuses
 * runs alone and fails alone, and the others of its batch are still
 * decided exactly.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check_rlgate.h"
#include "check_store.h"
#include "fixture.h"
#include "store.h"
#include "store_fixture.h"
#include "util.h"

/* 2023-11-14 22:13:00 UTC, one second in: a fixed instant. */
#define GT ((int64_t)1699999981000)

#define GTHREADS 8
#define GSENT 150                 /* requests per thread */
#define GLIMIT 500                /* below GTHREADS * GSENT */
#define GMAX_CLIENTS 40

enum gmode {
	G_HOT = 0,          /* one client, the policy of the run */
	G_NEW_CLIENTS,      /* a new client per request, max_clients */
	G_WITH_BAD,         /* the hot client, and now and then a bad policy */
	G_SPREAD,           /* GSPREAD clients in turn (a cluster: on every
	                       master, in one batch) */
};

#define GSPREAD 16

struct gworker {
	const char *path;
	const struct rlg_policy *p;
	const struct rlg_policy *bad;
	enum gmode mode;
	int id;
	pthread_barrier_t *barrier;
	long admitted;
	long full;                     /* RLG_EFULL answers */
	long refused;                  /* RLG_EINVAL answers */
	long errors;                   /* anything else */
	int64_t remaining[GSENT];      /* of the admitted requests */
	struct rlg_store_stats stats;
	char errmsg[256];
};

static char gname[] = "g";
static char gbad_name[] = "bad";

static struct rlg_policy
gpolicy(enum rlg_algorithm a, int64_t limit)
{
	struct rlg_policy p;

	memset(&p, 0, sizeof p);
	p.name = gname;
	p.lim.algorithm = a;
	p.lim.limit = limit;
	p.lim.window_ms = 3600 * 1000;
	p.lim.burst = limit;
	return p;
}

/* The handle of a thread: the suite's store (store_cfg: a SQLite file,
 * or the Redis database for it) with group commit left to auto, which is
 * on for SQLite with synchronous = full and for one Redis server. */
static void
gopen(struct gworker *w, struct rlg_store **s)
{
	struct rlg_store_config cfg;

	store_cfg(&cfg, w->path, 30000);
	cfg.sqlite.max_clients = w->mode == G_NEW_CLIENTS ? GMAX_CLIENTS : 0;
	cfg.rejection_cache = 0;
	cfg.sqlite.synchronous = RLG_SYNC_FULL;
	cfg.group_commit = RLG_GROUP_AUTO;
	if (rlg_store_open(&cfg, s) != RLG_OK) {
		snprintf(w->errmsg, sizeof w->errmsg, "%s",
		    rlg_store_errmsg(*s));
		w->errors++;
	}
	store_cfg_free(&cfg);
}

static void *
gthread(void *arg)
{
	struct gworker *w = arg;
	struct rlg_store *s = NULL;
	struct rlg_store_item item;
	struct rlg_decision d;
	char client[32];
	int i, rc;

	gopen(w, &s);
	pthread_barrier_wait(w->barrier);
	for (i = 0; i < GSENT; i++) {
		item.policy = w->p;
		item.client = "hot";
		item.advisory = false;
		item.if_new = false;
		item.cost = 1;
		if (w->mode == G_NEW_CLIENTS) {
			snprintf(client, sizeof client, "10.%d.0.%d", w->id,
			    i);
			item.client = client;
		} else if (w->mode == G_WITH_BAD && i % 10 == 3) {
			item.policy = w->bad;
		} else if (w->mode == G_SPREAD) {
			snprintf(client, sizeof client, "s%d",
			    (w->id + i) % GSPREAD);
			item.client = client;
		}
		rc = rlg_store_step(s, &item, 1, GT, &d);
		if (rc == RLG_OK && d.admitted) {
			ck_assert_int_lt(w->admitted, GSENT);
			w->remaining[w->admitted++] = d.remaining;
		} else if (rc == RLG_EFULL) {
			w->full++;
		} else if (rc == RLG_EINVAL) {
			w->refused++;
		} else if (rc != RLG_OK) {
			snprintf(w->errmsg, sizeof w->errmsg, "%s",
			    rlg_store_errmsg(s));
			w->errors++;
		}
	}
	pthread_barrier_wait(w->barrier);
	w->stats = rlg_test_stats(s);
	rlg_store_close(s);
	return NULL;
}

static void
run(const char *path, enum gmode mode, const struct rlg_policy *p,
    const struct rlg_policy *bad, struct gworker *w)
{
	pthread_barrier_t barrier;
	int i;

	pthread_barrier_init(&barrier, NULL, GTHREADS);
	for (i = 0; i < GTHREADS; i++)
		w[i] = (struct gworker){ .path = path, .p = p, .bad = bad,
		    .mode = mode, .id = i, .barrier = &barrier };
	rlg_test_threads(GTHREADS, gthread, w, sizeof w[0]);
	pthread_barrier_destroy(&barrier);
	for (i = 0; i < GTHREADS; i++)
		ck_assert_msg(w[i].errors == 0, "thread %d: %ld errors: %s",
		    i, w[i].errors, w[i].errmsg);
}

/*
 * The admitted requests' remaining values are quota - 1 down to 0, each
 * once: what a serial run gives. The batches carried every request, and
 * some carried several.
 */
static void
check_serial(struct gworker *w, int64_t quota)
{
	char *seen;
	long total = 0, i, k;

	seen = rlg_xcalloc((size_t)quota, 1);
	for (i = 0; i < GTHREADS; i++) {
		total += w[i].admitted;
		for (k = 0; k < w[i].admitted; k++) {
			ck_assert_int_ge(w[i].remaining[k], 0);
			ck_assert_int_lt(w[i].remaining[k], quota);
			ck_assert_msg(!seen[w[i].remaining[k]],
			    "remaining %lld given twice",
			    (long long)w[i].remaining[k]);
			seen[w[i].remaining[k]] = 1;
		}
	}
	ck_assert_int_eq(total, quota);
	free(seen);
	/* Each thread read the counters after all had sent. */
	ck_assert_uint_eq(w[0].stats.group_steps, (uint64_t)GTHREADS * GSENT);
	ck_assert_uint_lt(w[0].stats.group_batches, w[0].stats.group_steps);
	ck_assert_uint_gt(w[0].stats.group_batches, 0);
}

/* Loop over the algorithms: exactly the quota, decided as in series. */
START_TEST(test_group_exact_each_algorithm)
{
	struct rlg_policy p = gpolicy((enum rlg_algorithm)_i, GLIMIT);
	struct gworker w[GTHREADS];
	char *path = path_in("g.db");

	run(path, G_HOT, &p, NULL, w);
	check_serial(w, GLIMIT);
	if (p.lim.algorithm != RLG_ALG_TOKEN_BUCKET)
		ck_assert_int_eq(count_of(path, gname, "hot"), GLIMIT);
}
END_TEST

/* max_clients: exactly that many new clients, the rest undone alone. */
START_TEST(test_group_full_undoes_one)
{
	struct rlg_policy p = gpolicy(RLG_ALG_FIXED_WINDOW, 5);
	struct gworker w[GTHREADS];
	long admitted = 0, full = 0;
	sqlite3 *db;
	sqlite3_stmt *st;
	int i;

	run(path_in("g.db"), G_NEW_CLIENTS, &p, NULL, w);
	for (i = 0; i < GTHREADS; i++) {
		admitted += w[i].admitted;
		full += w[i].full;
	}
	ck_assert_int_eq(admitted, GMAX_CLIENTS);
	ck_assert_int_eq(full, (long)GTHREADS * GSENT - GMAX_CLIENTS);
	ck_assert_int_eq(sqlite3_open_v2(w[0].path, &db, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT (SELECT count(*)"
	    " FROM rlg_state), (SELECT clients FROM rlg_clients)", -1, &st,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_int_eq(sqlite3_column_int64(st, 0), GMAX_CLIENTS);
	ck_assert_int_eq(sqlite3_column_int64(st, 1), GMAX_CLIENTS);
	sqlite3_finalize(st);
	sqlite3_close(db);
}
END_TEST

/* A refused request fails alone; the rest of its batch stays exact. */
START_TEST(test_group_refused_alone)
{
	struct rlg_policy p = gpolicy(RLG_ALG_FIXED_WINDOW, GLIMIT);
	struct rlg_policy bad = gpolicy(RLG_ALG_FIXED_WINDOW, 0);
	struct gworker w[GTHREADS];
	long admitted = 0, refused = 0;
	int i;

	bad.name = gbad_name;
	run(path_in("g.db"), G_WITH_BAD, &p, &bad, w);
	for (i = 0; i < GTHREADS; i++) {
		admitted += w[i].admitted;
		refused += w[i].refused;
	}
	ck_assert_int_eq(refused, (long)GTHREADS * (GSENT / 10));
	ck_assert_int_eq(admitted, GLIMIT);
	ck_assert_int_eq(count_of(w[0].path, gname, "hot"), GLIMIT);
}
END_TEST

/* Many clients at once (a cluster: on every master, each master's in one
 * pipeline): every request counted once, on its own client. */
START_TEST(test_group_spread)
{
	struct rlg_policy p = gpolicy(RLG_ALG_FIXED_WINDOW, GLIMIT);
	struct gworker w[GTHREADS];
	char client[16];
	long admitted = 0, want;
	int i, t, k;

	run(path_in("g.db"), G_SPREAD, &p, NULL, w);
	for (i = 0; i < GTHREADS; i++)
		admitted += w[i].admitted;
	ck_assert_int_eq(admitted, (long)GTHREADS * GSENT);
	for (i = 0; i < GSPREAD; i++) {
		/* thread t sends to client i at every k with (t + k) %
		 * GSPREAD == i */
		for (t = 0, want = 0; t < GTHREADS; t++)
			for (k = 0; k < GSENT; k++)
				want += (t + k) % GSPREAD == i;
		snprintf(client, sizeof client, "s%d", i);
		ck_assert_int_eq(count_of(w[0].path, gname, client), want);
	}
	ck_assert_uint_lt(w[0].stats.group_batches, w[0].stats.group_steps);
}
END_TEST

/*
 * auto: off for SQLite with normal synchronous (no counters), on for one
 * Redis server; off is off, on is on.
 */
START_TEST(test_group_auto_off)
{
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;

	store_cfg(&cfg, path_in("g.db"), 1000);
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);
	ck_assert(rlg_test_stats(s).group == (backend != RLG_BACKEND_SQLITE));
	rlg_store_close(s);
	cfg.group_commit = RLG_GROUP_OFF;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);
	ck_assert(!rlg_test_stats(s).group);
	rlg_store_close(s);
	cfg.group_commit = RLG_GROUP_ON;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);
	ck_assert(rlg_test_stats(s).group);
	ck_assert_uint_eq(rlg_test_stats(s).group_batches, 0);
	rlg_store_close(s);
	store_cfg_free(&cfg);
}
END_TEST

Suite *
rlg_group_suite(void)
{
	Suite *s = suite_create("group");
	TCase *tc = store_tcase(s, "group", base_setup, base_teardown, 120);

	tcase_add_loop_test(tc, test_group_exact_each_algorithm, 0, 4);
	tcase_add_test(tc, test_group_full_undoes_one);
	tcase_add_test(tc, test_group_refused_alone);
	tcase_add_test(tc, test_group_spread);
	tcase_add_test(tc, test_group_auto_off);
	return s;
}

/* The same against the store_redis suite's redis-server, or the
 * store_redis_cluster suite's cluster (no max_clients: Redis keeps no
 * count of clients). */
void
rlg_group_redis_tests(Suite *s, bool cluster)
{
	TCase *tc = store_tcase(s, "group", cluster ? cluster_base_setup :
	    redis_base_setup, cluster ? cluster_base_teardown :
	    redis_base_teardown, 120);

	tcase_add_loop_test(tc, test_group_exact_each_algorithm, 0, 4);
	tcase_add_test(tc, test_group_refused_alone);
	tcase_add_test(tc, test_group_spread);
	tcase_add_test(tc, test_group_auto_off);
}
