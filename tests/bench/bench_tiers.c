/*
 * bench_tiers.c: what tiers cost a decision, in process,
 * side by side with the same gate without them (make bench-tiers).
 *
 * One gate (a worker thread's: rlg_gate_init) on a fresh SQLite file in
 * /dev/shm with the default commit (behind: the decision table), one
 * fixed_window policy that never refuses (limit 1e9 per hour), and
 * rlg_gate_decide called with the parameters of a GET of the endpoint
 * from one of 4,096 client addresses (10.0.a.b, picked by a xorshift64*),
 * in four configurations:
 *   none      no tier (the baseline);
 *   tiers     16 [tier] sections of 256 addresses each (4,096 host
 *             entries, half of the clients tiered) and 64 networks
 *             (none of which holds a client: every lookup of an
 *             untiered client scans them all);
 *   overrides the same entries as rows of the store's rlg_override
 *             (the gate reads them once, then asks every 500 ms whether
 *             they changed);
 *   both      the tiers and the overrides.
 * Rounds alternate between the configurations (ROUNDS rounds of DECIDES
 * decisions each); the median decisions per second of each, and its
 * ratio to none's, are printed as a Markdown table. No assertion: a
 * benchmark prints figures.
 */
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

#define ROUNDS   7
#define DECIDES  200000
#define CLIENTS  4096
#define NCONF    4

static const char *const names[NCONF] = { "none", "tiers", "overrides",
	"both" };

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* The config text of configuration c on database db. */
static char *
config_text(int c, const char *db)
{
	size_t cap = 1 << 20, used = 0;
	char *t = malloc(cap);
	int i, j;

	if (t == NULL)
		abort();
	used += (size_t)snprintf(t + used, cap - used, "[store]\npath = %s\n"
	    "[policy default]\nlimit = 1000000000\nwindow = 3600\n", db);
	if (c != 1 && c != 3)
		return t;
	for (i = 0; i < 16; i++) {
		used += (size_t)snprintf(t + used, cap - used, "[tier t%d]\n"
		    "clients = ", i);
		for (j = 0; j < 256; j++)
			used += (size_t)snprintf(t + used, cap - used, "%s10.0.%d."
			    "%d", j > 0 ? ", " : "", i, j);
		used += (size_t)snprintf(t + used, cap - used, "\ndefault = "
		    "limit=%d\n", 1000000 + i);
	}
	used += (size_t)snprintf(t + used, cap - used, "[tier nets]\n"
	    "clients = ");
	for (i = 0; i < 64; i++)
		used += (size_t)snprintf(t + used, cap - used, "%s172.16.%d.0/24",
		    i > 0 ? ", " : "", i);
	snprintf(t + used, cap - used, "\ndefault = limit=3000000\n");
	return t;
}

/* Row i's client: 4,096 addresses 10.0.X.Y, then 64 networks
 * 172.16.I.0/24. */
static void
row_client(int i, char *out, size_t size)
{
	if (i < 4096)
		snprintf(out, size, "10.0.%d.%d", i / 256, i % 256);
	else
		snprintf(out, size, "172.16.%d.0/24", i - 4096);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
main(void)
{
	static char addrs[CLIENTS][32];
	struct rlg_config *cfg[NCONF];
	struct rlg_gate gate[NCONF];
	double rate[NCONF][ROUNDS];
	char db[NCONF][128], *text;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	struct rlg_verdict v;
	int c, r, i;

	for (i = 0; i < CLIENTS; i++)
		snprintf(addrs[i], sizeof addrs[i], "REMOTE_ADDR=10.0.%d.%d",
		    i / 256 * 2 % 32, i % 256);
	for (c = 0; c < NCONF; c++) {
		snprintf(db[c], sizeof db[c], "/dev/shm/bench_tiers.%d.%d.db",
		    (int)getpid(), c);
		text = config_text(c, db[c]);
		if (rlg_config_load_string(text, names[c], stderr, &cfg[c]) !=
		    0)
			return 1;
		free(text);
		rlg_gate_init(&gate[c], cfg[c]);
	}
	/* The store makes its file at the first step; then the rows, read
	 * by the gate at its next step past the interval. */
	for (c = 0; c < NCONF; c++) {
		char *envp[4] = { "REQUEST_METHOD=GET",
		    "REQUEST_URI=/api/v1/resources", addrs[0], NULL };

		rlg_test_decide_envp(&gate[c], envp, rlg_now_ms(), &v);
		if (c >= 2)
			rlg_test_put_overrides(db[c], "bench_tiers", 4096 + 64,
			    row_client);
	}
	usleep((RLG_OVERRIDES_INTERVAL_MS + 100) * 1000);
	for (c = 0; c < NCONF; c++) {
		char *envp[4] = { "REQUEST_METHOD=GET",
		    "REQUEST_URI=/api/v1/resources", addrs[0], NULL };

		rlg_test_decide_envp(&gate[c], envp, rlg_now_ms(), &v);
		if (v.answer.n != 1 || v.answer.decisions[0].limit !=
		    (c == 0 ? 1000000000 : c == 1 ? 1000000 : 2000000)) {
			fprintf(stderr, "bench_tiers: %s: the limit applied is "
			    "%lld\n", names[c], v.answer.n == 1 ? (long long)
			    v.answer.decisions[0].limit : -1LL);
			return 1;
		}
	}
	for (r = 0; r < ROUNDS; r++)
		for (c = 0; c < NCONF; c++) {
			char *envp[4] = { "REQUEST_METHOD=GET",
			    "REQUEST_URI=/api/v1/resources", NULL, NULL };
			double t0 = now_s();

			for (i = 0; i < DECIDES; i++) {
				envp[2] = addrs[xorshift(&seed) % CLIENTS];
				rlg_test_decide_envp(&gate[c], envp, rlg_now_ms(), &v);
				if (v.answer.outcome != RLG_OUT_ADMITTED) {
					fprintf(stderr, "bench_tiers: %s: outcome"
					    " %d\n", names[c], v.answer.outcome);
					return 1;
				}
			}
			rate[c][r] = DECIDES / (now_s() - t0);
		}
	printf("| configuration | entries | decisions/s (median of %d) |"
	    " against none |\n|---|---|---|---|\n", ROUNDS);
	for (c = 0; c < NCONF; c++)
		qsort(rate[c], ROUNDS, sizeof rate[c][0], cmp_double);
	for (c = 0; c < NCONF; c++)
		printf("| %s | %s | %.0f | %.2f |\n", names[c],
		    c == 0 ? "0" : c == 3 ? "2 x (4,096 + 64)" : "4,096 + 64",
		    rate[c][ROUNDS / 2], rate[c][ROUNDS / 2] /
		    rate[0][ROUNDS / 2]);
	for (c = 0; c < NCONF; c++) {
		char f[160];

		rlg_gate_fini(&gate[c]);
		rlg_config_free(cfg[c]);
		unlink(db[c]);
		snprintf(f, sizeof f, "%s-wal", db[c]);
		unlink(f);
		snprintf(f, sizeof f, "%s-shm", db[c]);
		unlink(f);
		snprintf(f, sizeof f, "%s-table", db[c]);
		unlink(f);
		snprintf(f, sizeof f, "%s-metrics", db[c]);
		unlink(f);
	}
	return 0;
}
