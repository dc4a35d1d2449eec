/*
 * bench_overrides.c: what a large, changing override table costs the
 * requests (make bench-overrides), in process.
 *
 * One process as a FastCGI worker is: THREADS worker threads, each with
 * its own gate (rlg_gate_init) on one config and one SQLite file in
 * /dev/shm (default commit: behind, the decision table), one policy that
 * never refuses, and rlg_override holding ROWS rows (host addresses, a
 * limit each), a quarter of the 4,096 clients asked among them. Each
 * worker calls rlg_gate_decide as fast as it can for SECONDS seconds per
 * round and times every call (CLOCK_MONOTONIC). Rounds alternate between
 *   quiet    nobody writes the table;
 *   changes  another thread (an operator's sqlite3) updates one row
 *            every CHANGE_MS ms, so the overrides' version moves and
 *            rlgate reads and builds all ROWS rows again each time.
 * Printed: per mode the median over the rounds of the decisions per
 * second (all workers) and of the 99th percentile and the worst call,
 * with their spread (min-max), and the changes' medians against quiet's.
 * In process, not behind a web server and wrk: the cost under study is
 * the gate's alone, and a front's noise (sockets, the web server's own
 * CPU on two cores) would drown a 5% difference. No assertion: a
 * benchmark prints figures.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../fixture.h"
#include "config.h"
#include "gate.h"
#include "util.h"

#define ROWS       100000
#define THREADS    2
#define ROUNDS     6          /* each mode's; they alternate */
#define SECONDS    2
#define CHANGE_MS  250
#define CLIENTS    4096
#define BUCKETS    4096       /* latency histogram: 1 us each, the last
                                 one holds everything slower */

static char db[128];
static char addrs[CLIENTS][48];
static struct rlg_config *cfg;
static volatile int running, changing;

struct worker {
	pthread_t tid;
	struct rlg_gate gate;
	uint64_t n;
	uint64_t hist[BUCKETS];
	int64_t worst_ns;
	int failed;
};

static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* Row i's client: 10.a.b.c, the first CLIENTS/4 the clients asked. */
static void
row_client(int i, char *out, size_t size)
{
	int h = i < CLIENTS / 4 ? i * 4 : CLIENTS + i;

	snprintf(out, size, "10.%d.%d.%d", h >> 16 & 255, h >> 8 & 255,
	    h & 255);
}

static sqlite3 *
db_open(void)
{
	sqlite3 *h;

	if (sqlite3_open(db, &h) != SQLITE_OK) {
		fprintf(stderr, "bench_overrides: %s: %s\n", db,
		    sqlite3_errmsg(h));
		exit(1);
	}
	sqlite3_busy_timeout(h, 5000);
	return h;
}

static void *
work(void *arg)
{
	struct worker *w = arg;
	char *envp[4] = { "REQUEST_METHOD=GET",
	    "REQUEST_URI=/api/v1/resources", NULL, NULL };
	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)w;
	struct rlg_verdict v;
	int64_t t0, dt;

	while (__atomic_load_n(&running, __ATOMIC_ACQUIRE)) {
		envp[2] = addrs[xorshift(&seed) % CLIENTS];
		t0 = mono_ns();
		rlg_test_decide_envp(&w->gate, envp, rlg_now_ms(), &v);
		dt = mono_ns() - t0;
		if (v.answer.outcome != RLG_OUT_ADMITTED)
			w->failed = 1;
		w->hist[dt / 1000 < BUCKETS - 1 ? dt / 1000 : BUCKETS - 1]++;
		if (dt > w->worst_ns)
			w->worst_ns = dt;
		w->n++;
	}
	return NULL;
}

/* One row changed every CHANGE_MS while changing (a new spec each). */
static void *
change(void *arg)
{
	sqlite3 *h = db_open();
	char sql[160], client[32];
	struct timespec nap = { 0, CHANGE_MS * 1000000L };
	int k = 0;

	(void)arg;
	while (__atomic_load_n(&changing, __ATOMIC_ACQUIRE)) {
		nanosleep(&nap, NULL);
		row_client(CLIENTS / 4 + k % 1000, client, sizeof client);
		snprintf(sql, sizeof sql, "UPDATE rlg_override SET spec ="
		    " 'limit=%d' WHERE policy = 'default' AND client = '%s'",
		    2000001 + k++, client);
		if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK)
			fprintf(stderr, "bench_overrides: %s\n",
			    sqlite3_errmsg(h));
	}
	sqlite3_close(h);
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One round: rate, p99 (us) and worst (ms) into out[0..2]. */
static int
round_run(struct worker *w, int with_changes, double *out)
{
	uint64_t hist[BUCKETS] = { 0 }, n = 0, seen = 0;
	pthread_t changer;
	int64_t worst = 0, t0;
	int i, b;

	for (i = 0; i < THREADS; i++) {
		memset(w[i].hist, 0, sizeof w[i].hist);
		w[i].n = 0;
		w[i].worst_ns = 0;
	}
	__atomic_store_n(&changing, with_changes, __ATOMIC_RELEASE);
	__atomic_store_n(&running, 1, __ATOMIC_RELEASE);
	if (with_changes && pthread_create(&changer, NULL, change, NULL) != 0)
		return -1;
	t0 = mono_ns();
	for (i = 0; i < THREADS; i++)
		if (pthread_create(&w[i].tid, NULL, work, &w[i]) != 0)
			return -1;
	sleep(SECONDS);
	__atomic_store_n(&running, 0, __ATOMIC_RELEASE);
	for (i = 0; i < THREADS; i++)
		pthread_join(w[i].tid, NULL);
	out[0] = 0;
	for (i = 0; i < THREADS; i++) {
		if (w[i].failed)
			return -1;
		n += w[i].n;
		for (b = 0; b < BUCKETS; b++)
			hist[b] += w[i].hist[b];
		if (w[i].worst_ns > worst)
			worst = w[i].worst_ns;
	}
	out[0] = (double)n / ((double)(mono_ns() - t0) / 1e9);
	for (b = 0; b < BUCKETS; b++)
		if ((seen += hist[b]) * 100 >= n * 99)
			break;
	out[1] = b + 1;
	out[2] = (double)worst / 1e6;
	__atomic_store_n(&changing, 0, __ATOMIC_RELEASE);
	if (with_changes)
		pthread_join(changer, NULL);
	return 0;
}

int
main(void)
{
	static struct worker w[THREADS];
	double fig[2][3][ROUNDS], out[3], med[2][3];
	const char *names[2] = { "quiet", "changes" };
	char text[256], f[160];
	struct rlg_verdict v;
	int i, m, r, k;

	for (i = 0; i < CLIENTS; i++) {
		char c[32];

		if (i % 4 == 0)
			row_client(i / 4, c, sizeof c);
		else
			snprintf(c, sizeof c, "192.168.%d.%d", i >> 8, i & 255);
		snprintf(addrs[i], sizeof addrs[i], "REMOTE_ADDR=%s", c);
	}
	snprintf(db, sizeof db, "/dev/shm/bench_overrides.%d.db",
	    (int)getpid());
	snprintf(text, sizeof text, "[store]\npath = %s\n[policy default]\n"
	    "limit = 1000000000\nwindow = 3600\n", db);
	if (rlg_config_load_string(text, "bench", stderr, &cfg) != 0)
		return 1;
	rlg_gate_init(&w[0].gate, cfg);
	{
		char *envp[4] = { "REQUEST_METHOD=GET",
		    "REQUEST_URI=/api/v1/resources", addrs[0], NULL };

		/* the store makes its file at the first step */
		rlg_test_decide_envp(&w[0].gate, envp, rlg_now_ms(), &v);
		rlg_test_put_overrides(db, "bench_overrides", ROWS,
		    row_client);
		for (i = 1; i < THREADS; i++)
			rlg_gate_init(&w[i].gate, cfg);
		/* the reader has read and built the rows before the rounds */
		rlg_overrides_sync(&w[0].gate.overrides);
		for (i = 0; i < THREADS; i++) {
			rlg_test_decide_envp(&w[i].gate, envp, rlg_now_ms(), &v);
			if (v.answer.n != 1 ||
			    v.answer.decisions[0].limit != 2000000) {
				fprintf(stderr, "bench_overrides: the overrides"
				    " do not apply\n");
				return 1;
			}
		}
	}
	for (r = 0; r < ROUNDS; r++)
		for (m = 0; m < 2; m++) {
			if (round_run(w, m, out) != 0) {
				fprintf(stderr, "bench_overrides: a round"
				    " failed\n");
				return 1;
			}
			for (k = 0; k < 3; k++)
				fig[m][k][r] = out[k];
		}
	for (m = 0; m < 2; m++)
		for (k = 0; k < 3; k++) {
			qsort(fig[m][k], ROUNDS, sizeof fig[m][k][0],
			    cmp_double);
			med[m][k] = fig[m][k][ROUNDS / 2];
		}
	printf("%d rows in rlg_override, %d worker threads, %d rounds of"
	    " %d s per mode (alternating); changes: one row updated every"
	    " %d ms\n\n", ROWS, THREADS, ROUNDS, SECONDS, CHANGE_MS);
	printf("| mode | decisions/s: median (min-max) | p99 us: median"
	    " (min-max) | worst ms: median (min-max) |\n|---|---|---|---|\n");
	for (m = 0; m < 2; m++)
		printf("| %s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) |"
		    " %.1f (%.1f-%.1f) |\n", names[m], med[m][0],
		    fig[m][0][0], fig[m][0][ROUNDS - 1], med[m][1],
		    fig[m][1][0], fig[m][1][ROUNDS - 1], med[m][2],
		    fig[m][2][0], fig[m][2][ROUNDS - 1]);
	printf("\nchanges against quiet: throughput %.3f, p99 %.2fx\n",
	    med[1][0] / med[0][0], med[1][1] / med[0][1]);
	for (i = 0; i < THREADS; i++)
		rlg_gate_fini(&w[i].gate);
	rlg_config_free(cfg);
	unlink(db);
	snprintf(f, sizeof f, "%s-wal", db);
	unlink(f);
	snprintf(f, sizeof f, "%s-shm", db);
	unlink(f);
	snprintf(f, sizeof f, "%s-table", db);
	unlink(f);
	snprintf(f, sizeof f, "%s-metrics", db);
	unlink(f);
	return 0;
}
