/*
 * bench_metrics.c: what counting costs a decision (the goal: under 1% of
 * a decision on the hot path, measured).
 *
 * A decision here is all a worker thread does for a request between
 * libfcgi's accept and its finish: rlg_front_serve on the parameters a
 * web server sends (the request read, the route, the store's step in the
 * decision table, the answer formatted and written, into a buffer).
 * THREADS threads (default 2), each with a gate of its own on one SQLite
 * file with the default commit (the table), answer requests from KEYS
 * (1,000) client addresses picked at random (xorshift, per thread) under
 * two fixed-window policies that never reject, for SECONDS (default 10)
 * after a warm-up.
 *
 * Two measures:
 *  - interleaved: the run is cut in pairs of slices of 20 ms; in one
 *    slice of each pair (which one drawn by a hash) the gates count into
 *    their slots of the scoreboard (as rlgate does after
 *    rlg_metrics_open), in the other they have no slot (nothing counted,
 *    no clock read). Alternating this finely, the machine's drift (2x
 *    between runs of seconds on a shared VM) hits both alike; the medians
 *    of the slices' decisions/s are compared;
 *  - direct: what the gate adds to a request of these two policies (two
 *    decisions, an answer's code, a store step timed one time in
 *    RLG_METRICS_SAMPLE), timed alone over 10,000,000 rounds, against the
 *    time of a decision without counting.
 *
 * Output: markdown on stdout. Exit 1 on an error.
 * Usage: bench_metrics [SECONDS] [THREADS]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../fixture.h"
#include "config.h"
#include "front_cgi.h"
#include "fronts.h"
#include "gate.h"
#include "metrics.h"
#include "util.h"

/* rlg_front_serve on "NAME=value" parameters, rendered as CGI text. */
static int
handle_envp(struct rlg_gate *g, char **envp, int64_t now_ms,
    rlg_write_fn write, void *ctx)
{
	const struct rlg_out out = { rlg_front_cgi_render, write, ctx, NULL };
	struct rlg_params in;

	rlg_params_envp(&in, envp);
	return rlg_front_serve(g, &in, now_ms, &out);
}

#define KEYS 1000

/* BENCH_METRICS_NULL=1: no slice counts (the method's own bias: the
 * ratio should be 1). */
static bool null_run;
#define SLICE_NS 20000000LL
#define SLICES_MAX 4096

struct worker {
	const struct rlg_config *cfg;
	pthread_barrier_t *start;
	int64_t t0_ns;
	int nslices;
	uint64_t seed;
	uint64_t *done;           /* per slice */
	int failed;
};

static int
sink(void *ctx, const char *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	return len > 0 ? 0 : -1;
}

static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Whether slice i counts: one slice of each pair does, which one by a
 * hash of the pair, the same for every thread; a fixed order would let
 * anything periodic (the flusher's write every second: 50 slices) fall
 * always on one kind.
 */
static bool
slice_on(int i)
{
	uint64_t h = (uint64_t)(i / 2) * 0x9e3779b97f4a7c15ULL;

	return ((h >> 32) & 1) == (uint64_t)(i & 1);
}

static void *
work(void *arg)
{
	struct worker *w = arg;
	struct rlg_metrics_slot *slot;
	struct rlg_gate g;
	char addr[64];
	char *envp[] = { "REQUEST_METHOD=GET",
	    "REQUEST_URI=/api/v1/resources", addr, "SERVER_PROTOCOL=HTTP/1.1",
	    "HTTP_HOST=127.0.0.1", "HTTP_USER_AGENT=bench", NULL };
	int64_t now;
	uint64_t k;
	int i, slice;

	rlg_gate_init(&g, w->cfg);
	slot = g.slot;
	for (i = 0; i < KEYS; i++) {        /* warm-up: every key once */
		snprintf(addr, sizeof addr, "REMOTE_ADDR=10.0.%d.%d", i / 250,
		    i % 250 + 1);
		if (handle_envp(&g, envp, rlg_now_ms(), sink, NULL) != 0)
			w->failed = 1;
	}
	pthread_barrier_wait(w->start);
	for (;;) {
		if ((now = mono_ns()) < w->t0_ns)
			continue;
		slice = (int)((now - w->t0_ns) / SLICE_NS);
		if (slice >= w->nslices)
			break;
		g.slot = slice_on(slice) && !null_run ? slot : NULL;
		for (i = 0; i < 16; i++) {
			k = rlg_test_xorshift(&w->seed) % KEYS;
			snprintf(addr, sizeof addr, "REMOTE_ADDR=10.0.%d.%d",
			    (int)(k / 250), (int)(k % 250 + 1));
			if (handle_envp(&g, envp, rlg_now_ms(), sink,
			    NULL) != 0)
				w->failed = 1;
		}
		w->done[slice] += 16;
	}
	g.slot = slot;
	rlg_gate_fini(&g);
	return NULL;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* What the gate adds to one request of two policies, in ns. */
static double
direct_ns(const struct rlg_config *cfg)
{
	struct rlg_metrics_slot *slot = rlg_metrics_claim();
	const struct rlg_metrics_map *map = rlg_metrics_map(cfg);
	const long n = 10000000;
	uint32_t steps = 0;
	int64_t t0, t1, s0 = 0;
	long i;

	if (slot == NULL)
		exit(1);
	t0 = mono_ns();
	for (i = 0; i < n; i++) {
		bool timed = (steps++ & (RLG_METRICS_SAMPLE - 1)) == 0;

		if (timed)
			s0 = mono_ns();
		if (timed)
			rlg_metrics_step_time(slot, mono_ns() - s0);
		rlg_metrics_decision(slot, map, &cfg->policies[0], RLG_MD_ADMITTED);
		rlg_metrics_decision(slot, map, &cfg->policies[1], RLG_MD_ADMITTED);
		rlg_metrics_response(slot, 200, false);
	}
	t1 = mono_ns();
	rlg_metrics_release(slot);
	return (double)(t1 - t0) / (double)n;
}

int
main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	int threads = argc > 2 ? atoi(argv[2]) : 2, i, j, n, non = 0, noff = 0;
	char dir[] = "/tmp/rlgate-bench-metrics-XXXXXX", text[8192];
	char mpath[8300];
	static double on[SLICES_MAX], off[SLICES_MAX];
	struct worker *w;
	pthread_t *t;
	pthread_barrier_t start;
	struct rlg_config *cfg;
	double mon, moff, per_off, add;
	uint64_t sum;

	null_run = getenv("BENCH_METRICS_NULL") != NULL &&
	    strcmp(getenv("BENCH_METRICS_NULL"), "1") == 0;
	n = (int)(seconds * 1e9 / (double)SLICE_NS);
	if (seconds <= 0 || n < 2 || n > SLICES_MAX || threads < 1 ||
	    threads > 64) {
		fprintf(stderr, "usage: bench_metrics [SECONDS (0.04..80)]"
		    " [THREADS (1..64)]\n");
		return 1;
	}
	if (rlg_test_mkdtemp(dir) != 0)
		return 1;
	snprintf(text, sizeof text, "[store]\npath = %s/b.db\n"
	    "[policy api]\nlimit = 1000000000\nwindow = 3600\n"
	    "[policy per_minute]\nlimit = 1000000000\nwindow = 60\n", dir);
	if (rlg_config_load_string(text, "bench.conf", stderr, &cfg) != 0)
		return 1;
	snprintf(mpath, sizeof mpath, "%s/b.db-metrics", dir);
	if (rlg_metrics_open(mpath, cfg) != 0)
		return 1;
	w = calloc((size_t)threads, sizeof *w);
	t = calloc((size_t)threads, sizeof *t);
	if (w == NULL || t == NULL)
		return 1;
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (i = 0; i < threads; i++) {
		w[i].cfg = cfg;
		w[i].start = &start;
		w[i].nslices = n;
		w[i].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
		w[i].done = calloc((size_t)n, sizeof *w[i].done);
		if (w[i].done == NULL)
			return 1;
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	/* every thread starts its clock at the same instant */
	for (i = 0; i < threads; i++)
		w[i].t0_ns = mono_ns() + 50000000;
	pthread_barrier_wait(&start);
	for (i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		if (w[i].failed) {
			fprintf(stderr, "bench_metrics: a write failed\n");
			return 1;
		}
	}
	/* the first slice of each kind warms up; the last may be cut */
	for (j = 2; j < n - 1; j++) {
		for (sum = 0, i = 0; i < threads; i++)
			sum += w[i].done[j];
		if (slice_on(j))
			on[non++] = (double)sum * 1e9 / (double)SLICE_NS;
		else
			off[noff++] = (double)sum * 1e9 / (double)SLICE_NS;
	}
	qsort(on, (size_t)non, sizeof on[0], cmp);
	qsort(off, (size_t)noff, sizeof off[0], cmp);
	mon = on[non / 2];
	moff = off[noff / 2];
	per_off = 1e9 * threads / moff;
	add = direct_ns(cfg);
	printf("# What counting costs a decision\n\n"
	    "rlg_front_serve in process: %d thread%s, %d client addresses,"
	    " two policies, commit = %s; %.0f s in slices of %lld ms,"
	    " counting on in one slice of each pair\n\n"
	    "| | decisions/s (median of %d slices) | ns per decision |\n"
	    "|---|---:|---:|\n"
	    "| without metrics | %.0f | %.0f |\n"
	    "| with metrics | %.0f | %.0f |\n"
	    "| with / without | %.4f | |\n\n"
	    "Counting alone (two decisions, the answer's code, one step in %d"
	    " timed): %.1f ns per request, %.2f%% of a decision without"
	    " metrics (%.0f ns per thread).\n",
	    threads, threads == 1 ? "" : "s", KEYS,
	    rlg_commit_name(cfg->store.sqlite.commit), seconds,
	    SLICE_NS / 1000000, noff, moff, per_off, mon,
	    1e9 * threads / mon, mon / moff, RLG_METRICS_SAMPLE, add,
	    100.0 * add / per_off, per_off);
	for (i = 0; i < threads; i++)
		free(w[i].done);
	free(w);
	free(t);
	pthread_barrier_destroy(&start);
	rlg_metrics_close();
	rlg_config_free(cfg);
	rlg_test_rmtree(dir);
	return 0;
}
