/*
 * bench_table.c: [store] commit = behind in process: how many
 * decisions a second the decision table makes, against commit = each on
 * the same file, for 1,000 and 1,000,000 active clients; and whether the
 * write-behind keeps up, the database's lag behind the table under full
 * load.
 *
 * Each run: a fresh directory, a SQLite file, THREADS threads each with a
 * handle of its own (rlg_store_open, as the worker threads have), calling
 * rlg_store_step for one fixed-window policy that never rejects and a key
 * picked at random (xorshift, per thread) from KEYS keys shaped like IPv4
 * addresses, for SECONDS after a warm-up in which every key is stepped
 * once (so the timed phase finds its entries, as a steady state does).
 * The lag: a sampler thread reads every 10 ms the end of the last flush
 * (rlg_store_stats: table_flushed_at_ms) and keeps the longest time since
 * it, in intervals of flush_ms; after the load, the time until every
 * change is in the database (the table's states all flushed, read back
 * with sqlite3: the sum of the counts equals the decisions admitted).
 *
 * commit = each runs at 1,000 keys only (a million keys would take a
 * million commits to warm up). BENCH_TABLE_ROUNDS rounds (default 3) of
 * every run in turn, so that drift hits all alike; the table shows the
 * medians (single runs here move by a factor of two).
 *
 * Output: one markdown table on stdout. Exit 1 on a store error.
 * Usage: bench_table [SECONDS] [THREADS]   (defaults 3 and 2)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../clock.h"
#include "config.h"
#include "../fixture.h"
#include "store.h"
#include "store_stats.h"
#include "util.h"

/* At most this many rounds (BENCH_TABLE_ROUNDS, default 3). */
#define BENCH_ROUNDS_MAX 15

/* The flush interval (BENCH_TABLE_FLUSH_MS, default 1000). */
static int64_t FLUSH_MS = 1000;

struct run {
	const char *path;
	enum rlg_commit commit;
	long keys;
	double seconds;
	int threads;
	/* results */
	long decisions;
	double per_s;
	int64_t max_lag_ms;           /* longest time since a flush ended */
	int64_t catch_up_ms;          /* after the load, until all is in */
	volatile int stop;
	int warm;                     /* workers done warming up (atomic) */
	int failed;
};

static struct rlg_policy policy;

static struct rlg_store *
open_store(const struct run *r)
{
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;

	memset(&cfg, 0, sizeof cfg);
	cfg.sqlite.path = (char *)r->path;
	cfg.sqlite.busy_timeout_ms = 5000;
	cfg.sqlite.max_clients = 2000000;
	cfg.sqlite.commit = r->commit;
	cfg.sqlite.flush_ms = FLUSH_MS;
	cfg.sqlite.table_entries = 2000000;
	if (rlg_store_open(&cfg, &s) != RLG_OK) {
		fprintf(stderr, "bench_table: open %s: %s\n", r->path,
		    rlg_store_errmsg(s));
		rlg_store_close(s);
		return NULL;
	}
	return s;
}

static void
key_of(long k, char *buf, size_t size)
{
	snprintf(buf, size, "10.%ld.%ld.%ld", (k >> 16) & 255, (k >> 8) & 255,
	    k & 255);
}

struct worker {
	struct run *r;
	int id;
	long done;
};

static void *
work(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	struct rlg_store *s = open_store(r);
	uint64_t x = 0x9e3779b97f4a7c15u * (uint64_t)(w->id + 1);
	char key[32];
	bool ok;
	long k;

	if (s == NULL) {
		r->failed = 1;
		return NULL;
	}
	/* Warm-up: this thread's share of the keys, once each. */
	for (k = w->id; k < r->keys; k += r->threads) {
		key_of(k, key, sizeof key);
		if (rlg_test_step(s, &policy, key, rlg_now_ms(), &ok) != RLG_OK)
			r->failed = 1;
	}
	__atomic_add_fetch(&r->warm, 1, __ATOMIC_SEQ_CST);
	while (!r->stop && !r->failed) {
		key_of((long)(rlg_test_xorshift(&x) % (uint64_t)r->keys), key,
		    sizeof key);
		if (rlg_test_step(s, &policy, key, rlg_now_ms(), &ok) != RLG_OK ||
		    !ok) {
			fprintf(stderr, "bench_table: step: %s\n",
			    rlg_store_errmsg(s));
			r->failed = 1;
		}
		w->done++;
	}
	rlg_store_close(s);
	return NULL;
}

/* The sum of the counts in the database. */
static long
db_sum(const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	long v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
	    SQLITE_OK && sqlite3_prepare_v2(db, "SELECT sum(count) FROM"
	    " rlg_state", -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return v;
}

static int
bench(struct run *r)
{
	struct worker w[64];
	pthread_t t[64];
	struct rlg_store *probe = open_store(r);
	struct rlg_store_stats st;
	long total = 0, before;
	int64_t t0, since, end, started = rlg_now_ms();
	int i;

	if (probe == NULL)
		return -1;
	for (i = 0; i < r->threads; i++) {
		w[i] = (struct worker){ r, i, 0 };
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	/* The warm-up steps every key once: timed from when it is over. */
	while (__atomic_load_n(&r->warm, __ATOMIC_SEQ_CST) < r->threads &&
	    !r->failed)
		usleep(1000);
	before = 0;
	for (i = 0; i < r->threads; i++)
		before += w[i].done;
	t0 = rlg_test_clock_ms(CLOCK_MONOTONIC);
	while (rlg_test_clock_ms(CLOCK_MONOTONIC) - t0 < (int64_t)(r->seconds * 1000)) {
		usleep(10000);
		if (r->commit == RLG_COMMIT_BEHIND) {
			st = rlg_test_stats(probe);
			/* Never flushed yet: since the load began. */
			since = rlg_now_ms() - (st.table_flushed_at_ms > 0 ?
			    st.table_flushed_at_ms : started);
			if (since > r->max_lag_ms)
				r->max_lag_ms = since;
		}
	}
	for (i = 0; i < r->threads; i++)
		total += w[i].done;
	end = rlg_test_clock_ms(CLOCK_MONOTONIC);
	r->stop = 1;
	for (i = 0; i < r->threads; i++)
		pthread_join(t[i], NULL);
	r->decisions = total - before;
	r->per_s = (double)r->decisions * 1000.0 / (double)(end - t0);
	total = r->keys;
	for (i = 0; i < r->threads; i++)
		total += w[i].done;
	/* Every handle has closed: the last flushed what was left. */
	t0 = rlg_test_clock_ms(CLOCK_MONOTONIC);
	while (db_sum(r->path) != total && rlg_test_clock_ms(CLOCK_MONOTONIC) - t0 < 10000)
		usleep(10000);
	r->catch_up_ms = rlg_test_clock_ms(CLOCK_MONOTONIC) - t0;
	rlg_store_close(probe);
	if (db_sum(r->path) != total) {
		fprintf(stderr, "bench_table: the database holds %ld"
		    " decisions, not %ld\n", db_sum(r->path), total);
		return -1;
	}
	return r->failed ? -1 : 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
median(const double *v, int n)
{
	double s[BENCH_ROUNDS_MAX];

	memcpy(s, v, (size_t)n * sizeof *s);
	qsort(s, (size_t)n, sizeof *s, cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* One run in its own file; -1 on a store error. */
static int
run_one(const char *dir, int round, enum rlg_commit commit, long keys,
    double seconds, int threads, struct run *r)
{
	char path[160];

	snprintf(path, sizeof path, "%s/%s-%ld-%d.db", dir,
	    commit == RLG_COMMIT_BEHIND ? "behind" : "each", keys, round);
	*r = (struct run){ 0 };
	r->path = path;
	r->commit = commit;
	r->keys = keys;
	r->seconds = seconds;
	r->threads = threads;
	fprintf(stderr, "bench_table: round %d, %s, %ld keys...\n", round + 1,
	    commit == RLG_COMMIT_BEHIND ? "behind" : "each", keys);
	return bench(r);
}

int
main(int argc, char **argv)
{
	static const long keys[] = { 1000, 10000, 1000000 };
	enum { NKEYS = sizeof keys / sizeof keys[0] };
	char dir[] = "/tmp/rlg-bench-table-XXXXXX";
	double seconds = argc > 1 ? atof(argv[1]) : 3;
	int threads = argc > 2 ? atoi(argv[2]) : 2;
	int rounds = getenv("BENCH_TABLE_ROUNDS") != NULL ?
	    atoi(getenv("BENCH_TABLE_ROUNDS")) : 3;
	double each_s[BENCH_ROUNDS_MAX], per_s[NKEYS][BENCH_ROUNDS_MAX];
	double ratio[NKEYS][BENCH_ROUNDS_MAX];
	int64_t lag[NKEYS] = { 0 }, catch_up[NKEYS] = { 0 };
	struct run r;
	size_t k;
	int n, rc = 0;

	if (seconds <= 0 || threads < 1 || threads > 64 || rounds < 1 ||
	    rounds > BENCH_ROUNDS_MAX) {
		fprintf(stderr, "usage: bench_table [SECONDS] [THREADS]"
		    " (BENCH_TABLE_ROUNDS 1 to %d)\n", BENCH_ROUNDS_MAX);
		return 64;
	}
	if (rlg_test_mkdtemp(dir) != 0) {
		perror("bench_table: mkdtemp");
		return 1;
	}
	if (getenv("BENCH_TABLE_FLUSH_MS") != NULL)
		FLUSH_MS = atoll(getenv("BENCH_TABLE_FLUSH_MS"));
	policy.name = "default";
	policy.lim = (struct rlg_limit){ .algorithm = RLG_ALG_FIXED_WINDOW,
	    .limit = 1000000000, .window_ms = 3600000, .burst = 1000000000 };
	/*
	 * Rounds, each every run in turn (each at 1,000 keys, then behind at
	 * 1,000, 10,000 and 1,000,000): drift hits all alike. A round's
	 * ratio is to its own 1,000-key run; the table shows medians, and
	 * the worst lag and catch-up of any round.
	 */
	for (n = 0; n < rounds && rc == 0; n++) {
		/* commit = each at 1,000 keys only: a million keys would be
		 * a million commits to warm up, and nothing the table is
		 * held to. */
		if (run_one(dir, n, RLG_COMMIT_EACH, keys[0], seconds, threads,
		    &r) != 0) {
			rc = 1;
			break;
		}
		each_s[n] = r.per_s;
		for (k = 0; k < NKEYS; k++) {
			if (run_one(dir, n, RLG_COMMIT_BEHIND, keys[k], seconds,
			    threads, &r) != 0) {
				rc = 1;
				break;
			}
			per_s[k][n] = r.per_s;
			ratio[k][n] = r.per_s / per_s[0][n];
			if (r.max_lag_ms > lag[k])
				lag[k] = r.max_lag_ms;
			if (r.catch_up_ms > catch_up[k])
				catch_up[k] = r.catch_up_ms;
		}
	}
	rlg_test_rmtree(dir);
	if (rc != 0)
		return rc;
	printf("Medians over %d round%s of %.0f s, %d thread%s (worst lag and"
	    " catch-up of any round):\n\n", rounds, rounds > 1 ? "s" : "",
	    seconds, threads, threads > 1 ? "s" : "");
	printf("| commit | keys | decisions/s | vs 1,000 keys |"
	    " longest since a flush | catch-up after the load |\n");
	printf("|---|---:|---:|---:|---:|---:|\n");
	printf("| each | %ld | %.0f | 1.00 | - | - |\n", keys[0],
	    median(each_s, rounds));
	for (k = 0; k < NKEYS; k++)
		printf("| behind | %ld | %.0f | %.2f | %lld ms (%.1f intervals)"
		    " | %lld ms |\n", keys[k], median(per_s[k], rounds),
		    median(ratio[k], rounds), (long long)lag[k],
		    (double)lag[k] / (double)FLUSH_MS,
		    (long long)catch_up[k]);
	return 0;
}
