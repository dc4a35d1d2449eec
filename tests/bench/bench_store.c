/*
 * bench_store.c: decisions per second of the two ways to make one
 * fixed-window step atomic in SQLite, measured side by side; then each
 * algorithm through the store, and the bytes of database it costs.
 *
 *   A  rlg_store_step: BEGIN IMMEDIATE; SELECT the state; the pure limiter
 *      in C; UPSERT the new state only if admitted; COMMIT (ROLLBACK when
 *      rejected). What rlgate does: any algorithm, several policies per
 *      request, all or nothing.
 *   B  one INSERT ... ON CONFLICT DO UPDATE ... WHERE ... RETURNING
 *      statement in autocommit, the fixed-window counting written in SQL
 *      (below): a returned row means admitted, no row means rejected.
 *
 * Both run on temporary files in WAL mode with synchronous=NORMAL, one
 * connection per thread, with the real clock. The rounds alternate
 * A B A B so drift (page cache, CPU frequency) hits both alike. Before
 * timing, the program checks that A and B decide identically on the same
 * request sequence, and that both admit exactly the limit under two
 * threads; it exits 1 if not.
 *
 * The per-algorithm table runs rlg_store_step alone, one thread, for
 * fixed_window, sliding_window, token_bucket and sliding_log: one hot key
 * whose limit is never reached (every request admitted and written), one
 * hot key over its limit (every request rejected), 10,000 keys in turn
 * (admitted). A limit that one key never reaches is 1e9 per year for the
 * counters and the bucket (burst 1e9); the sliding log keeps one row per
 * request, at most 100,000, so it gets 100,000 per second: the hot key
 * then has as many rows in its window as requests in the last second, and
 * every decision reads them all (the table says how many), and on a clock
 * of its own with 10, 100 and 1,000 rows in its window. Then the file
 * size per client: 10,000 clients with one admitted request each, and for
 * the sliding log 500 clients at their limit of 100 (a row per request).
 *
 * Usage: bench_store [SECONDS_PER_ROUND]   (default 1: 36 + 27 rounds,
 * about 80 s in all; 0.1 gives a quick look in about 15 s)
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "limiter.h"
#include "store.h"
#include "util.h"
#include "../clock.h"
#include "../fixture.h"

#define ROUNDS 3
#define ALG_ROUNDS 2
#define NKEYS_MAX 10000
#define BUSY_MS 10000
/* The size table: clients, and sliding-log clients at their limit. */
#define SIZE_CLIENTS 10000
#define SIZE_LOG_CLIENTS 500
#define SIZE_LOG_LIMIT 100

/* B: the whole fixed-window step as one statement. ?1 policy, ?2 client,
 * ?3 window start of now, ?4 window_ms, ?5 limit. A clock that went back
 * counts in the stored (later) window, as the C limiter does. */
static const char b_sql[] =
    "INSERT INTO rlg_state"
    " (policy, client, window_start_ms, count, expires_ms)"
    " VALUES (?1, ?2, ?3, 1, ?3 + ?4)"
    " ON CONFLICT (policy, client) DO UPDATE SET"
    "  count = CASE WHEN excluded.window_start_ms > window_start_ms"
    "   THEN 1 ELSE count + 1 END,"
    "  window_start_ms = max(window_start_ms, excluded.window_start_ms),"
    "  expires_ms = max(window_start_ms, excluded.window_start_ms) + ?4"
    " WHERE excluded.window_start_ms > rlg_state.window_start_ms"
    "  OR rlg_state.count < ?5"
    " RETURNING count, window_start_ms";

struct scenario {
	const char *name;
	int64_t limit;
	int nkeys;
	int nthreads;
};

/* One connection of either kind. */
struct conn {
	int variant;                   /* 0: A, 1: B */
	struct rlg_store *store;       /* A */
	sqlite3 *db;                   /* B */
	sqlite3_stmt *st;              /* B */
};

struct runner {
	int variant;
	const struct scenario *sc;
	const char *path;
	int id;
	double seconds;
	pthread_barrier_t *start;
	long ops;
	long errors;
	double t_start, t_end;
	char errmsg[256];
};

static int conn_open(struct conn *c, int variant, const char *path);
static void conn_close(struct conn *c);
static int conn_step(struct conn *c, const struct rlg_policy *p,
    const char *client, int64_t now_ms, bool *admitted);
static const char *conn_errmsg(const struct conn *c);
static void create_db(const char *path);
static void *runner_main(void *arg);
static double run_round(int variant, const struct scenario *sc,
    const char *path, double seconds, long *errors);
static void warm_up(int variant, const struct scenario *sc,
    const char *path);
static int check_sequence(const char *dir);
static int check_threads(const char *dir);
static void *exact_main(void *arg);
static char *table_dump(const char *path);
static struct rlg_policy fixed_policy(int64_t limit, int64_t window_ms);
static struct rlg_policy alg_policy(enum rlg_algorithm a, int kind);
static double alg_round(const char *path, const struct rlg_policy *p,
    int nkeys, double seconds, long *errors, long *ops, long *admitted);
static int alg_table(const char *dir, double seconds);
static double log_rows_round(const char *path, int rows, double seconds,
    long *errors);
static int64_t file_bytes(const char *path);
static int64_t size_run(const char *path, const struct rlg_policy *p,
    int nclients, int per_client);
static int size_table(const char *dir);

static char keys[NKEYS_MAX][20];
static char policy_name[] = "bench";

static const enum rlg_algorithm algorithms[] = {
	RLG_ALG_FIXED_WINDOW, RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET,
	RLG_ALG_SLIDING_LOG,
};
#define NALGS (sizeof algorithms / sizeof algorithms[0])

/* The scenarios of the per-algorithm table; kind for alg_policy. */
enum { KIND_ADMIT = 0, KIND_REJECT };
static const struct {
	const char *name;
	int kind;
	int nkeys;
} alg_scenarios[] = {
	{ "1 hot key, admitted", KIND_ADMIT, 1 },
	{ "1 hot key, rejected", KIND_REJECT, 1 },
	{ "10000 keys, admitted", KIND_ADMIT, NKEYS_MAX },
};
#define NALGSC (sizeof alg_scenarios / sizeof alg_scenarios[0])

static int
conn_open(struct conn *c, int variant, const char *path)
{
	struct rlg_store_config cfg = { 0 };
	char p[512];

	memset(c, 0, sizeof *c);
	c->variant = variant;
	if (variant == 0) {
		snprintf(p, sizeof p, "%s", path);
		cfg.sqlite.path = p;
		cfg.sqlite.busy_timeout_ms = BUSY_MS;
		cfg.on_error = RLG_ON_ERROR_CLOSED;
		if (rlg_store_open(&cfg, &c->store) != RLG_OK) {
			fprintf(stderr, "bench: %s\n",
			    rlg_store_errmsg(c->store));
			return -1;
		}
		return 0;
	}
	/* The same settings as the store: WAL, synchronous=NORMAL. */
	if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
	    sqlite3_busy_timeout(c->db, BUSY_MS) != SQLITE_OK ||
	    sqlite3_exec(c->db, "PRAGMA journal_mode = WAL;"
	    " PRAGMA synchronous = NORMAL", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(c->db, b_sql, -1, SQLITE_PREPARE_PERSISTENT,
	    &c->st, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench: %s: %s\n", path,
		    sqlite3_errmsg(c->db));
		return -1;
	}
	return 0;
}

static void
conn_close(struct conn *c)
{
	rlg_store_close(c->store);
	sqlite3_finalize(c->st);
	sqlite3_close(c->db);
}

/* One decision; 0, or -1 on a store error. */
static int
conn_step(struct conn *c, const struct rlg_policy *p, const char *client,
    int64_t now_ms, bool *admitted)
{
	struct rlg_store_item item = { p, client, false, false, 0 };
	struct rlg_decision d;
	int rc;

	if (c->variant == 0) {
		if (rlg_store_step(c->store, &item, 1, now_ms, &d) != RLG_OK)
			return -1;
		*admitted = d.admitted;
		return 0;
	}
	sqlite3_bind_text(c->st, 1, p->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(c->st, 2, client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(c->st, 3, now_ms - now_ms % p->lim.window_ms);
	sqlite3_bind_int64(c->st, 4, p->lim.window_ms);
	sqlite3_bind_int64(c->st, 5, p->lim.limit);
	rc = sqlite3_step(c->st);
	*admitted = rc == SQLITE_ROW;
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(c->st);    /* to the end: the commit */
	sqlite3_reset(c->st);
	return rc == SQLITE_DONE ? 0 : -1;
}

static const char *
conn_errmsg(const struct conn *c)
{
	return c->variant == 0 ? rlg_store_errmsg(c->store) :
	    sqlite3_errmsg(c->db);
}

/* A new database file with the schema, through the store. */
static void
create_db(const char *path)
{
	struct conn c;

	if (conn_open(&c, 0, path) != 0)
		exit(1);
	conn_close(&c);
}

static void *
runner_main(void *arg)
{
	struct runner *r = arg;
	struct rlg_policy p = fixed_policy(r->sc->limit,
	    RLG_WINDOW_S_MAX * 1000);
	struct conn c;
	double deadline;
	bool admitted;
	int k, i;

	if (conn_open(&c, r->variant, r->path) != 0)
		exit(1);
	k = r->id * (r->sc->nkeys / r->sc->nthreads);
	pthread_barrier_wait(r->start);
	r->t_start = rlg_test_mono_s();
	deadline = r->t_start + r->seconds;
	do {
		for (i = 0; i < 32; i++) {
			if (conn_step(&c, &p, keys[k], rlg_now_ms(),
			    &admitted) != 0) {
				r->errors++;
				snprintf(r->errmsg, sizeof r->errmsg, "%s",
				    conn_errmsg(&c));
			}
			r->ops++;
			if (++k == r->sc->nkeys)
				k = 0;
		}
	} while (rlg_test_mono_s() < deadline);
	r->t_end = rlg_test_mono_s();
	conn_close(&c);
	return NULL;
}

/* One timed round of one variant; decisions per second. */
static double
run_round(int variant, const struct scenario *sc, const char *path,
    double seconds, long *errors)
{
	struct runner r[8];
	pthread_barrier_t start;
	double t0 = 0, t1 = 0;
	long ops = 0;
	int i;

	pthread_barrier_init(&start, NULL, (unsigned)sc->nthreads);
	for (i = 0; i < sc->nthreads; i++)
		r[i] = (struct runner){ .variant = variant, .sc = sc,
		    .path = path, .id = i, .seconds = seconds,
		    .start = &start };
	rlg_test_threads(sc->nthreads, runner_main, r, sizeof r[0]);
	for (i = 0; i < sc->nthreads; i++) {
		ops += r[i].ops;
		*errors += r[i].errors;
		if (r[i].errors > 0)
			fprintf(stderr, "bench: %c: %ld errors: %s\n",
			    'A' + variant, r[i].errors, r[i].errmsg);
		if (i == 0 || r[i].t_start < t0)
			t0 = r[i].t_start;
		if (i == 0 || r[i].t_end > t1)
			t1 = r[i].t_end;
	}
	pthread_barrier_destroy(&start);
	return (double)ops / (t1 - t0);
}

/* Every key once (and a rejected key past its limit), untimed. */
static void
warm_up(int variant, const struct scenario *sc, const char *path)
{
	struct rlg_policy p = fixed_policy(sc->limit, RLG_WINDOW_S_MAX * 1000);
	struct conn c;
	bool admitted;
	long i, n;

	n = sc->nkeys + (sc->limit < 1000 ? sc->limit : 0) + 100;
	if (conn_open(&c, variant, path) != 0)
		exit(1);
	for (i = 0; i < n; i++)
		(void)conn_step(&c, &p, keys[i % sc->nkeys], rlg_now_ms(),
		    &admitted);
	conn_close(&c);
}

/*
 * A and B on the same 20000 requests: 5 keys, limit 7 per 1 s window,
 * time moving forward by 0-39 ms (about 10 requests a second per key, so
 * both paths run) and now and then back by up to 1.5 s. Every decision
 * and the final table must match.
 */
static int
check_sequence(const char *dir)
{
	struct rlg_policy p = fixed_policy(7, 1000);
	struct conn c[2];
	char path[2][300], *dump[2];
	long admitted[2] = { 0, 0 }, mismatches = 0, errors = 0, i;
	uint64_t x = 88172645463325252ULL, r;
	int64_t now = 1700000000000;
	bool a[2];
	int v, ok;

	for (v = 0; v < 2; v++) {
		snprintf(path[v], sizeof path[v], "%s/seq-%c.db", dir,
		    'a' + v);
		create_db(path[v]);
		if (conn_open(&c[v], v, path[v]) != 0)
			exit(1);
	}
	for (i = 0; i < 20000; i++) {
		/* One in 50 back by up to 1.5 s, else on by up to 40 ms. */
		r = rlg_test_clock_walk(&x, &now, 50, 1500, 40);
		for (v = 0; v < 2; v++) {
			if (conn_step(&c[v], &p, keys[(r >> 20) % 5], now,
			    &a[v]) != 0)
				errors++;
			admitted[v] += a[v];
		}
		mismatches += a[0] != a[1];
	}
	for (v = 0; v < 2; v++) {
		conn_close(&c[v]);
		dump[v] = table_dump(path[v]);
	}
	ok = errors == 0 && mismatches == 0 && admitted[0] == admitted[1] &&
	    strcmp(dump[0], dump[1]) == 0;
	printf("same sequence: 20000 requests, 5 keys, limit 7/s, clock"
	    " jumps back: A admitted %ld, B admitted %ld, %ld different"
	    " decisions, tables %s, %ld errors: %s\n", admitted[0],
	    admitted[1], mismatches, strcmp(dump[0], dump[1]) == 0 ?
	    "identical" : "DIFFERENT", errors, ok ? "ok" : "FAILED");
	free(dump[0]);
	free(dump[1]);
	return ok ? 0 : -1;
}

struct exact {
	int variant;
	const char *path;
	pthread_barrier_t *start;
	long admitted;
	long errors;
};

static void *
exact_main(void *arg)
{
	struct exact *e = arg;
	struct rlg_policy p = fixed_policy(3000, 60000);
	struct conn c;
	bool admitted;
	int i;

	if (conn_open(&c, e->variant, e->path) != 0)
		exit(1);
	pthread_barrier_wait(e->start);
	for (i = 0; i < 5000; i++) {
		if (conn_step(&c, &p, "hot", 1700000001000, &admitted) != 0)
			e->errors++;
		else
			e->admitted += admitted;
	}
	conn_close(&c);
	return NULL;
}

/* Two threads, 5000 requests each, one key, limit 3000: exactly 3000. */
static int
check_threads(const char *dir)
{
	struct exact e[2];
	pthread_barrier_t start;
	char path[300];
	int v, i, ok = 1;
	long total, errors;

	for (v = 0; v < 2; v++) {
		snprintf(path, sizeof path, "%s/exact-%c.db", dir, 'a' + v);
		create_db(path);
		pthread_barrier_init(&start, NULL, 2);
		for (i = 0; i < 2; i++)
			e[i] = (struct exact){ .variant = v, .path = path,
			    .start = &start };
		rlg_test_threads(2, exact_main, e, sizeof e[0]);
		total = errors = 0;
		for (i = 0; i < 2; i++) {
			total += e[i].admitted;
			errors += e[i].errors;
		}
		pthread_barrier_destroy(&start);
		printf("2 threads x 5000 requests, one key, limit 3000: %c"
		    " admitted %ld, %ld errors: %s\n", 'A' + v, total, errors,
		    total == 3000 && errors == 0 ? "ok" : "FAILED");
		if (total != 3000 || errors != 0)
			ok = 0;
	}
	return ok ? 0 : -1;
}

/* The whole table as text, ordered, for comparison. Caller frees. */
static char *
table_dump(const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	const unsigned char *t;
	char *out;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT group_concat(policy || ',' ||"
	    " client || ',' || window_start_ms || ',' || count || ',' ||"
	    " expires_ms, ';') FROM (SELECT * FROM rlg_state"
	    " ORDER BY policy, client)", -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench: %s: %s\n", path, sqlite3_errmsg(db));
		exit(1);
	}
	t = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_text(st, 0) :
	    NULL;
	out = rlg_xstrdup(t != NULL ? (const char *)t : "");
	sqlite3_finalize(st);
	sqlite3_close(db);
	return out;
}

static struct rlg_policy
fixed_policy(int64_t limit, int64_t window_ms)
{
	struct rlg_policy p = { .name = policy_name,
	    .lim.algorithm = RLG_ALG_FIXED_WINDOW, .lim.limit = limit,
	    .lim.window_ms = window_ms, .key = RLG_KEY_IP };

	return p;
}

/*
 * KIND_ADMIT: a limit no key reaches in a run (see the top); KIND_REJECT:
 * 10 per year, reached in the warm-up.
 */
static struct rlg_policy
alg_policy(enum rlg_algorithm a, int kind)
{
	struct rlg_policy p = { .name = policy_name, .lim.algorithm = a,
	    .lim.limit = RLG_LIMIT_MAX, .lim.window_ms = RLG_WINDOW_S_MAX * 1000,
	    .lim.burst = 0, .key = RLG_KEY_IP };

	if (kind == KIND_REJECT) {
		p.lim.limit = 10;
	} else if (a == RLG_ALG_SLIDING_LOG) {
		p.lim.limit = RLG_SLIDING_LOG_LIMIT_MAX;
		p.lim.window_ms = 1000;
	}
	if (a == RLG_ALG_TOKEN_BUCKET)
		p.lim.burst = p.lim.limit;
	return p;
}

/*
 * One timed round of rlg_store_step on nkeys keys in turn, real clock;
 * decisions per second. *ops gets the decisions, *admitted the admitted
 * ones.
 */
static double
alg_round(const char *path, const struct rlg_policy *p, int nkeys,
    double seconds, long *errors, long *ops, long *admitted)
{
	struct conn c;
	double t0, t1, deadline;
	bool adm;
	int k = 0, i;

	if (conn_open(&c, 0, path) != 0)
		exit(1);
	t0 = rlg_test_mono_s();
	deadline = t0 + seconds;
	do {
		for (i = 0; i < 32; i++) {
			if (conn_step(&c, p, keys[k], rlg_now_ms(),
			    &adm) != 0) {
				if (*errors == 0)
					fprintf(stderr, "bench: %s\n",
					    conn_errmsg(&c));
				(*errors)++;
			} else {
				*admitted += adm;
			}
			(*ops)++;
			if (++k == nkeys)
				k = 0;
		}
	} while ((t1 = rlg_test_mono_s()) < deadline);
	conn_close(&c);
	return (double)*ops / (t1 - t0);
}

/*
 * Decisions per second of each algorithm in each scenario: a new file
 * each, warmed up untimed (every key once; the rejected key past its
 * limit), then ALG_ROUNDS rounds. Every decision must be as the scenario
 * says (all admitted, or all rejected). 0, or -1 if not.
 */
static int
alg_table(const char *dir, double seconds)
{
	double rate[NALGS][NALGSC];
	long log_rows[NALGS];
	char path[300], sql[128];
	struct rlg_policy p;
	long errors = 0, ops, admitted, expect, wrong = 0;
	size_t a, sc;
	int round, i;
	bool adm;
	struct conn c;
	sqlite3 *db;
	sqlite3_stmt *st;

	printf("\nper algorithm: rlg_store_step, 1 thread, decisions/s (mean"
	    " of %d rounds of %.2g s)\n", ALG_ROUNDS, seconds);
	for (a = 0; a < NALGS; a++) {
		log_rows[a] = -1;
		for (sc = 0; sc < NALGSC; sc++) {
			p = alg_policy(algorithms[a], alg_scenarios[sc].kind);
			snprintf(path, sizeof path, "%s/alg-%zu-%zu.db", dir,
			    a, sc);
			create_db(path);
			if (conn_open(&c, 0, path) != 0)
				exit(1);
			for (i = 0; i < alg_scenarios[sc].nkeys + 20; i++)
				(void)conn_step(&c, &p,
				    keys[i % alg_scenarios[sc].nkeys],
				    rlg_now_ms(), &adm);
			conn_close(&c);
			rate[a][sc] = 0;
			for (round = 0; round < ALG_ROUNDS; round++) {
				ops = admitted = 0;
				rate[a][sc] += alg_round(path, &p,
				    alg_scenarios[sc].nkeys, seconds, &errors,
				    &ops, &admitted) / ALG_ROUNDS;
				expect = alg_scenarios[sc].kind ==
				    KIND_ADMIT ? ops : 0;
				if (admitted != expect)
					wrong++;
			}
			if (algorithms[a] != RLG_ALG_SLIDING_LOG || sc != 0)
				continue;
			/* The hot key's rows in its window at the end. */
			snprintf(sql, sizeof sql, "SELECT count(*) FROM"
			    " rlg_log WHERE client = '%s'", keys[0]);
			if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY,
			    NULL) == SQLITE_OK && sqlite3_prepare_v2(db, sql,
			    -1, &st, NULL) == SQLITE_OK) {
				if (sqlite3_step(st) == SQLITE_ROW)
					log_rows[a] = sqlite3_column_int(st,
					    0);
				sqlite3_finalize(st);
			}
			sqlite3_close(db);
		}
	}
	printf("%-15s %20s %20s %20s\n", "algorithm", alg_scenarios[0].name,
	    alg_scenarios[1].name, alg_scenarios[2].name);
	for (a = 0; a < NALGS; a++) {
		printf("%-15s %20.0f %20.0f %20.0f",
		    rlg_algorithm_name(algorithms[a]), rate[a][0], rate[a][1],
		    rate[a][2]);
		if (log_rows[a] >= 0)
			printf("   (hot key: %ld rows in its 1 s window)",
			    log_rows[a]);
		printf("\n");
		fflush(stdout);
	}

	/* The sliding log's cost grows with the rows a decision reads. */
	printf("sliding_log, 1 hot key with K rows in its window, admitted:");
	for (i = 10; i <= 1000; i *= 10) {
		snprintf(path, sizeof path, "%s/rows-%d.db", dir, i);
		printf(" K=%d %.0f/s%s", i, log_rows_round(path, i, seconds,
		    &errors), i < 1000 ? "," : "\n");
		fflush(stdout);
	}
	if (errors > 0 || wrong > 0)
		printf("%ld store errors, %ld rounds with unexpected"
		    " decisions: FAILED\n", errors, wrong);
	return errors == 0 && wrong == 0 ? 0 : -1;
}

/*
 * One hot sliding_log key on a clock of its own that moves 1000 / rows ms
 * per request, limit 2 * rows per second: the window always holds rows
 * entries (rows - 1 read, one added, one trimmed). Decisions per second
 * of one round, after a warm-up that fills the window.
 */
static double
log_rows_round(const char *path, int rows, double seconds, long *errors)
{
	struct rlg_policy p = { .name = policy_name,
	    .lim.algorithm = RLG_ALG_SLIDING_LOG, .lim.limit = 2 * rows,
	    .lim.window_ms = 1000, .key = RLG_KEY_IP };
	int64_t now = rlg_now_ms(), step = 1000 / rows;
	struct conn c;
	double t0, t1, deadline;
	bool adm;
	long ops = 0;
	int i;

	create_db(path);
	if (conn_open(&c, 0, path) != 0)
		exit(1);
	for (i = 0; i < rows; i++, now += step) {
		if (conn_step(&c, &p, keys[0], now, &adm) != 0 || !adm)
			(*errors)++;
	}
	t0 = rlg_test_mono_s();
	deadline = t0 + seconds;
	do {
		for (i = 0; i < 32; i++, now += step, ops++) {
			if (conn_step(&c, &p, keys[0], now, &adm) != 0 || !adm)
				(*errors)++;
		}
	} while ((t1 = rlg_test_mono_s()) < deadline);
	conn_close(&c);
	return (double)ops / (t1 - t0);
}

/* The size of path in bytes (after the last connection closed). */
static int64_t
file_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/*
 * A new file; nclients keys, per_client admitted requests each, 1 ms
 * apart (a fixed clock: the size does not depend on the pace). Returns
 * the file size once every connection is closed (the last one
 * checkpoints the WAL into the file), or -1 if a request was not
 * admitted.
 */
static int64_t
size_run(const char *path, const struct rlg_policy *p, int nclients,
    int per_client)
{
	struct conn c;
	int64_t now = 1700000000000;
	bool adm;
	int i, k, bad = 0;

	create_db(path);
	if (conn_open(&c, 0, path) != 0)
		exit(1);
	for (i = 0; i < nclients; i++) {
		for (k = 0; k < per_client; k++) {
			if (conn_step(&c, p, keys[i], now + k, &adm) != 0 ||
			    !adm)
				bad++;
		}
	}
	conn_close(&c);
	return bad == 0 ? file_bytes(path) : -1;
}

/* Bytes of database per client, per algorithm. 0, or -1. */
static int
size_table(const char *dir)
{
	struct rlg_policy p;
	char path[300];
	int64_t empty, bytes;
	size_t a;
	int ok = 1;

	snprintf(path, sizeof path, "%s/size-empty.db", dir);
	create_db(path);
	empty = file_bytes(path);
	printf("\nbytes of database per client (file size after N clients,"
	    " WAL checkpointed; an empty database is %lld bytes)\n",
	    (long long)empty);
	printf("%-15s %8s %10s %12s %14s %16s\n", "algorithm", "clients",
	    "requests", "file bytes", "bytes/client", "bytes/log row");
	for (a = 0; a < NALGS; a++) {
		p = alg_policy(algorithms[a], KIND_ADMIT);
		snprintf(path, sizeof path, "%s/size-%zu.db", dir, a);
		bytes = size_run(path, &p, SIZE_CLIENTS, 1);
		if (bytes < 0)
			ok = 0;
		printf("%-15s %8d %10d %12lld %14.1f %16s\n",
		    rlg_algorithm_name(algorithms[a]), SIZE_CLIENTS,
		    SIZE_CLIENTS, (long long)bytes,
		    (double)bytes / SIZE_CLIENTS,
		    algorithms[a] == RLG_ALG_SLIDING_LOG ? "(1 row each)" :
		    "-");
	}
	/* The sliding log, each client at its limit of 100 per minute. */
	p = alg_policy(RLG_ALG_SLIDING_LOG, KIND_ADMIT);
	p.lim.limit = SIZE_LOG_LIMIT;
	p.lim.window_ms = 60000;
	snprintf(path, sizeof path, "%s/size-log.db", dir);
	bytes = size_run(path, &p, SIZE_LOG_CLIENTS, SIZE_LOG_LIMIT);
	if (bytes < 0)
		ok = 0;
	printf("%-15s %8d %10d %12lld %14.1f %16.1f   (limit %d, all"
	    " used)\n", "sliding_log", SIZE_LOG_CLIENTS,
	    SIZE_LOG_CLIENTS * SIZE_LOG_LIMIT, (long long)bytes,
	    (double)bytes / SIZE_LOG_CLIENTS,
	    (double)bytes / (SIZE_LOG_CLIENTS * SIZE_LOG_LIMIT),
	    SIZE_LOG_LIMIT);
	if (!ok)
		printf("a request of the size runs was rejected: FAILED\n");
	return ok ? 0 : -1;
}


int
main(int argc, char **argv)
{
	static const struct scenario scenarios[] = {
		{ "1 hot key, admitted", RLG_LIMIT_MAX, 1, 1 },
		{ "1 hot key, rejected", 10, 1, 1 },
		{ "10000 keys, admitted", RLG_LIMIT_MAX, 10000, 1 },
		{ "1 hot key, admitted", RLG_LIMIT_MAX, 1, 2 },
		{ "1 hot key, rejected", 10, 1, 2 },
		{ "10000 keys, admitted", RLG_LIMIT_MAX, 10000, 2 },
	};
	const size_t nsc = sizeof scenarios / sizeof scenarios[0];
	double seconds = 1.0, rate[2], sum[2], ratio;
	double t_begin = rlg_test_mono_s();
	char dir[] = "/tmp/rlg-bench-XXXXXX", path[2][300], *end;
	long errors = 0;
	size_t s;
	int i, round, v, failed = 0;

	if (argc > 2 || (argc == 2 && (seconds = strtod(argv[1], &end),
	    *end != '\0' || !(seconds > 0 && seconds <= 60)))) {
		fprintf(stderr, "usage: bench_store [SECONDS_PER_ROUND]"
		    " (0 < s <= 60, default 1)\n");
		return 64;
	}
	if (mkdtemp(dir) == NULL) {
		perror("bench: mkdtemp");
		return 1;
	}
	for (i = 0; i < NKEYS_MAX; i++)
		snprintf(keys[i], sizeof keys[i], "10.%d.%d.%d",
		    i / 65536, i / 256 % 256, i % 256);

	printf("rlgate store benchmark: SQLite %s, WAL, synchronous=NORMAL,"
	    " files in %s\n", sqlite3_libversion(), dir);
	printf("A = rlg_store_step (BEGIN IMMEDIATE; SELECT; limiter;"
	    " UPSERT if admitted; COMMIT)\n");
	printf("B = one INSERT ... ON CONFLICT DO UPDATE ... RETURNING,"
	    " autocommit\n\n");
	printf("correctness:\n");
	if (check_sequence(dir) != 0)
		failed = 1;
	if (check_threads(dir) != 0)
		failed = 1;

	printf("\n%-22s %3s %5s %14s %14s %7s\n", "scenario", "thr", "round",
	    "A decisions/s", "B decisions/s", "B/A");
	for (s = 0; s < nsc; s++) {
		const struct scenario *sc = &scenarios[s];

		for (v = 0; v < 2; v++) {
			snprintf(path[v], sizeof path[v], "%s/s%zu-%c.db",
			    dir, s, 'a' + v);
			create_db(path[v]);
			warm_up(v, sc, path[v]);
		}
		sum[0] = sum[1] = 0;
		for (round = 1; round <= ROUNDS; round++) {
			for (v = 0; v < 2; v++) {
				rate[v] = run_round(v, sc, path[v], seconds,
				    &errors);
				sum[v] += rate[v];
			}
			printf("%-22s %3d %5d %14.0f %14.0f %7.2f\n",
			    sc->name, sc->nthreads, round, rate[0], rate[1],
			    rate[1] / rate[0]);
			fflush(stdout);
		}
		ratio = sum[1] / sum[0];
		printf("%-22s %3d %5s %14.0f %14.0f %7.2f\n", sc->name,
		    sc->nthreads, "mean", sum[0] / ROUNDS, sum[1] / ROUNDS,
		    ratio);
	}
	if (errors > 0) {
		printf("\n%ld store errors during the timed rounds\n", errors);
		failed = 1;
	}
	if (alg_table(dir, seconds) != 0)
		failed = 1;
	if (size_table(dir) != 0)
		failed = 1;
	rlg_test_rmtree(dir);
	printf("\n%s (%.0f s)\n", failed ? "FAILED" : "ok",
	    rlg_test_mono_s() - t_begin);
	return failed ? 1 : 0;
}
