/*
 * flood.c: key flooding against the SQLite store, in process, on a real
 * file. Prints TAP, and the figures it measured as "# flood:" lines.
 *
 * The clock is simulated (the store takes now_ms from its caller), so a
 * flood of FLOOD_KEYS (default 1,000,000) distinct client keys arrives at
 * FLOOD_RATE keys per simulated second (default 10,000) against a fixed
 * window of 10 s, and the worker's pruning runs every RLG_PRUNE_INTERVAL_MS
 * of that clock, as in the server. Each key sends one request.
 *
 * 1. Growth (max_clients = 0): the rows follow the keys active in the
 *    current windows, never the keys seen. A row expires at the end of its
 *    window and the next prune, at most RLG_PRUNE_INTERVAL_MS later,
 *    deletes it, so at most rate * (window + prune interval + 1 s) rows
 *    are ever held: checked every 1024 keys and at every prune. The file stops growing once
 *    pruning frees pages as fast as new clients take them: its size at the
 *    end is within 10% of its size at half the flood.
 * 2. A well-behaved client sends one request every 10 ms of the clock
 *    throughout, under its limit: every one is admitted and counted. Its
 *    decisions are timed (real time) before the flood, on a small file,
 *    and during it; the ratio of the medians is the slowdown factor,
 *    printed, not asserted (machines are noisy): docs/design.md states it.
 * 3. The guard (max_clients = FLOOD_GUARD, default 50,000): a second
 *    flood never gives the policy more than max_clients rows; new keys
 *    past it get RLG_EFULL; the well-behaved client, which the store
 *    holds, is never refused; once the flood's states expire, new keys are
 *    admitted again.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "clock.h"
#include "gate.h"
#include "store.h"
#include "util.h"

#define WINDOW_S 10
#define GOOD_EVERY_MS 10            /* the well-behaved client's pace */
#define GOOD_LIMIT 2000             /* per window: it sends 1000 */
#define T0 ((int64_t)1800000000000) /* a window start */

static int ntests, nfailed;
static char dir[64];
static char name_flood[] = "flood";
static char name_good[] = "good";

static void
tap(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	ntests++;
	if (!ok)
		nfailed++;
	printf("%sok %d - ", ok ? "" : "not ", ntests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static int64_t
env_int(const char *name, int64_t dflt)
{
	const char *v = getenv(name);

	return v != NULL && *v != '\0' ? strtoll(v, NULL, 10) : dflt;
}

static double
real_us(void)
{
	return (double)rlg_test_clock_ns(CLOCK_MONOTONIC) / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof *v, cmp_double);
	return v[n / 2];
}

/* One integer from the database, through a connection of its own. */
static int64_t
sql_int(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK) {
		sqlite3_close(db);
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return v;
}

static int64_t
clients_of(const char *path, const char *policy)
{
	char sql[128];

	snprintf(sql, sizeof sql, "SELECT coalesce((SELECT clients FROM"
	    " rlg_clients WHERE policy = '%s'), 0)", policy);
	return sql_int(path, sql);
}

static int64_t
file_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static struct rlg_store *
open_store(const char *path, int64_t max_clients)
{
	struct rlg_store_config cfg = { 0 };
	struct rlg_store *s = NULL;
	char p[128];

	snprintf(p, sizeof p, "%s", path);
	cfg.sqlite.path = p;
	cfg.sqlite.busy_timeout_ms = 5000;
	cfg.sqlite.max_clients = max_clients;
	if (rlg_store_open(&cfg, &s) != RLG_OK) {
		printf("Bail out! open %s: %s\n", path, rlg_store_errmsg(s));
		exit(1);
	}
	return s;
}

struct good {
	struct rlg_policy policy;
	int64_t sent, admitted, refused;
	int64_t window_ms, in_window;  /* its current window, and requests */
	double *lat_us;             /* one per timed request */
	size_t nlat, cap;
};

/* The well-behaved client's request at now; timed when timing. */
static void
good_hit(struct rlg_store *s, struct good *g, int64_t now, bool timing)
{
	struct rlg_store_item item = { &g->policy, "192.0.2.1", false, false, 1 };
	struct rlg_decision d;
	double t0 = real_us();
	int rc = rlg_store_step(s, &item, 1, now, &d);

	if (timing) {
		if (g->nlat == g->cap) {
			g->cap = g->cap ? g->cap * 2 : 4096;
			g->lat_us = realloc(g->lat_us, g->cap * sizeof(double));
			if (g->lat_us == NULL)
				abort();
		}
		g->lat_us[g->nlat++] = real_us() - t0;
	}
	g->sent++;
	if (now - now % g->policy.lim.window_ms != g->window_ms) {
		g->window_ms = now - now % g->policy.lim.window_ms;
		g->in_window = 0;
	}
	g->in_window++;
	if (rc == RLG_OK && d.admitted)
		g->admitted++;
	else
		g->refused++;
}

struct flood_result {
	int64_t keys, admitted, full, failed;
	int64_t max_rows, max_rows_guarded;
	int64_t bytes_half, bytes_end;
	double seconds;
	int64_t end_ms;
};

/*
 * keys distinct keys from start_ms at rate per second, the good client
 * every GOOD_EVERY_MS, a prune every RLG_PRUNE_INTERVAL_MS.
 */
static void
flood(struct rlg_store *s, const char *path, struct good *g, int64_t keys,
    int64_t rate, int64_t start_ms, const char *tag, struct flood_result *r)
{
	struct rlg_policy p = {
		.name = name_flood, .lim.algorithm = RLG_ALG_FIXED_WINDOW,
		.lim.limit = 5, .lim.window_ms = WINDOW_S * 1000, .key = RLG_KEY_IP,
	};
	struct rlg_store_item item = { &p, NULL, false, false, 1 };
	struct rlg_decision d;
	int64_t i, now = start_ms, next_good = start_ms;
	int64_t next_prune = start_ms + RLG_PRUNE_INTERVAL_MS, rows;
	char key[48];
	double t0 = real_us();
	int rc;

	memset(r, 0, sizeof *r);
	for (i = 0; i < keys; i++) {
		now = start_ms + i * 1000 / rate;
		while (next_good <= now) {
			good_hit(s, g, next_good, true);
			next_good += GOOD_EVERY_MS;
		}
		if (now >= next_prune) {
			if (rlg_store_prune(s, now, NULL) != RLG_OK)
				r->failed++;
			next_prune += RLG_PRUNE_INTERVAL_MS;
			rows = clients_of(path, name_flood);
			if (rows > r->max_rows)
				r->max_rows = rows;
		}
		if (i == keys / 2)
			r->bytes_half = file_bytes(path);
		snprintf(key, sizeof key, "%s-%" PRId64, tag, i);
		item.client = key;
		rc = rlg_store_step(s, &item, 1, now, &d);
		if (rc == RLG_OK && d.admitted)
			r->admitted++;
		else if (rc == RLG_EFULL)
			r->full++;
		else
			r->failed++;
		if ((i & 1023) == 0) {
			rows = clients_of(path, name_flood);
			if (rows > r->max_rows)
				r->max_rows = rows;
		}
	}
	r->keys = keys;
	r->seconds = (real_us() - t0) / 1e6;
	r->bytes_end = file_bytes(path);
	r->end_ms = now;
}

int
main(void)
{
	int64_t keys = env_int("FLOOD_KEYS", 1000000);
	int64_t rate = env_int("FLOOD_RATE", 10000);
	int64_t guard = env_int("FLOOD_GUARD", 50000);
	int64_t bound, now, i, after;
	struct good g = { .policy = { .name = name_good,
	    .lim.algorithm = RLG_ALG_FIXED_WINDOW, .lim.limit = GOOD_LIMIT,
	    .lim.window_ms = WINDOW_S * 1000, .key = RLG_KEY_IP } };
	struct flood_result a, b;
	struct rlg_store *s;
	char path[128], path2[128], key[32], sql[160];
	double base_us, flood_us;
	struct rlg_policy late = { .name = name_flood,
	    .lim.algorithm = RLG_ALG_FIXED_WINDOW, .lim.limit = 5,
	    .lim.window_ms = WINDOW_S * 1000, .key = RLG_KEY_IP };
	struct rlg_store_item item;
	struct rlg_decision d;
	const char *const suffixes[] = { "", "-wal", "-shm" };

	snprintf(dir, sizeof dir, "/tmp/rlg-flood-XXXXXX");
	if (mkdtemp(dir) == NULL) {
		printf("Bail out! mkdtemp failed\n");
		return 1;
	}
	snprintf(path, sizeof path, "%s/flood.db", dir);
	snprintf(path2, sizeof path2, "%s/guard.db", dir);
	printf("# flood: %" PRId64 " keys at %" PRId64 " keys/s (simulated"
	    " clock), fixed window %d s, prune every %d s\n", keys, rate,
	    WINDOW_S, RLG_PRUNE_INTERVAL_MS / 1000);

	/* 1 and 2: growth, and the well-behaved client. */
	s = open_store(path, 0);
	/* Baseline: the good client alone, 2000 requests on a small file. */
	for (i = 0, now = T0 - 40000; i < 2000; i++, now += GOOD_EVERY_MS)
		good_hit(s, &g, now, true);
	base_us = median(g.lat_us, g.nlat);
	g.nlat = 0;
	g.sent = g.admitted = g.refused = 0;

	flood(s, path, &g, keys, rate, T0, "f", &a);
	flood_us = median(g.lat_us, g.nlat);
	bound = rate * (WINDOW_S + RLG_PRUNE_INTERVAL_MS / 1000 + 1);
	printf("# flood: %" PRId64 " keys in %.1f s real: %.0f decisions/s\n",
	    a.keys, a.seconds, (double)a.keys / a.seconds);
	printf("# flood: most rows held %" PRId64 " (bound %" PRId64 ", %.1f%%"
	    " of the keys sent)\n", a.max_rows, bound,
	    100.0 * (double)a.max_rows / (double)keys);
	printf("# flood: file %.1f MB at half the flood, %.1f MB at its end"
	    " (%.0f bytes per row held at most)\n", a.bytes_half / 1e6,
	    a.bytes_end / 1e6, (double)a.bytes_end / (double)a.max_rows);
	printf("# flood: well-behaved client: median %.1f us alone, %.1f us"
	    " during the flood: slowdown factor %.2f\n", base_us, flood_us,
	    flood_us / base_us);
	tap(a.admitted == keys && a.failed == 0, "growth: all %" PRId64
	    " keys admitted, no store error (admitted %" PRId64 ", failed %"
	    PRId64 ")", keys, a.admitted, a.failed);
	tap(a.max_rows > 0 && a.max_rows <= bound, "growth: at most rate x"
	    " (window + prune interval + 1 s) = %" PRId64 " rows held (most:"
	    " %" PRId64 ")", bound, a.max_rows);
	tap(a.bytes_end <= a.bytes_half + a.bytes_half / 10, "growth: the file"
	    " stops growing (%" PRId64 " bytes at half, %" PRId64 " at the"
	    " end)", a.bytes_half, a.bytes_end);
	tap(g.refused == 0 && g.admitted == g.sent && g.sent > 0,
	    "well-behaved client: all %" PRId64 " requests admitted during"
	    " the flood", g.sent);
	snprintf(sql, sizeof sql, "SELECT count FROM rlg_state WHERE policy ="
	    " 'good' AND window_start_ms = %" PRId64, g.window_ms);
	tap(sql_int(path, sql) == g.in_window, "well-behaved client: its row"
	    " counts the %" PRId64 " requests of its last window exactly",
	    g.in_window);
	rlg_store_close(s);

	/* 3: the guard. */
	s = open_store(path2, guard);
	g.sent = g.admitted = g.refused = 0;
	good_hit(s, &g, T0 - 1, false);   /* held before the flood */
	flood(s, path2, &g, guard * 4, rate, T0, "g", &b);
	printf("# flood: guard max_clients = %" PRId64 ": %" PRId64 " keys,"
	    " %" PRId64 " admitted, %" PRId64 " refused (store full), most"
	    " rows %" PRId64 "\n", guard, b.keys, b.admitted, b.full,
	    b.max_rows);
	tap(b.max_rows <= guard && clients_of(path2, name_flood) <= guard,
	    "guard: never more than max_clients = %" PRId64 " rows (most: %"
	    PRId64 ")", guard, b.max_rows);
	tap(b.full > 0 && b.failed == 0 && b.admitted + b.full == b.keys,
	    "guard: new keys past it refused with RLG_EFULL (%" PRId64 "),"
	    " no other failure", b.full);
	tap(g.refused == 0 && g.admitted == g.sent, "guard: the well-behaved"
	    " client is never refused (%" PRId64 " requests)", g.sent);
	/* Two windows after the flood every state has expired. */
	after = b.end_ms + 2 * WINDOW_S * 1000;
	item.policy = &late;
	item.advisory = false;
	item.if_new = false;
	item.cost = 1;
	for (i = 0; i < 10; i++) {
		snprintf(key, sizeof key, "late-%" PRId64, i);
		item.client = key;
		if (rlg_store_step(s, &item, 1, after + i, &d) != RLG_OK ||
		    !d.admitted)
			break;
	}
	tap(i == 10, "guard: once the flood's states expire, new keys are"
	    " admitted again");
	rlg_store_close(s);

	printf("1..%d\n", ntests);
	free(g.lat_us);
	for (i = 0; i < 3; i++) {
		snprintf(sql, sizeof sql, "%s%s", path, suffixes[i]);
		unlink(sql);
		snprintf(sql, sizeof sql, "%s%s", path2, suffixes[i]);
		unlink(sql);
	}
	rmdir(dir);
	return nfailed > 0;
}
