/*
 * bench_decide.c: decisions per second through rlg_store_step, in
 * process, against the naive responder; and the Redis store beside the
 * SQLite one.
 *
 * For each store (a file on a normal disk directory, the same on tmpfs,
 * /dev/shm, called "memory", and a redis-server on 127.0.0.1 that this
 * program starts, called "redis"), each algorithm, 1, 2 and 8 threads
 * and 1, 1,000, 100,000 and 1,000,000 client keys, threads each with a
 * store handle of their own on one file or one server (as rlgate's worker
 * threads have) call rlg_store_step for one policy and one key picked
 * uniformly at random (a per-thread xorshift64*) from the set, keys shaped
 * like IPv4 addresses ("10.a.b.c"). The policies never reject (the
 * admitted path: every decision reads and writes one row, or one hash).
 * The rejected path: the hot key, limit 1 already spent, one thread,
 * through rlg_store_open (what the server opens, with whatever wraps the
 * store: a rejection cache answers these from memory) and through the
 * backend alone (rlg_store_sqlite_ops: BEGIN IMMEDIATE, SELECT, ROLLBACK;
 * rlg_store_redis_ops: one script call that writes nothing). Handles get the
 * production defaults (rlg_config_defaults) but busy_timeout_ms 5000; the
 * Redis ones [store] backend = redis, clock = redis (Redis TIME, the
 * default), a TCP connection per handle.
 *
 * A true ":memory:" database cannot be shared by the separate connections
 * of the threads, and the store opens only files, so "memory" is a file on
 * tmpfs: no disk, but the same SQLite code, locks and system calls.
 *
 * The redis-server is the test fixture's (tests/redis_fixture.c): a child
 * on 127.0.0.1 at a free port in 10000-32767, --save "" --appendonly no,
 * in a temporary directory, stopped by pid at the end (and by the parent
 * death signal if this program dies). Without redis-server in PATH a run
 * that includes the redis store stops at once with a message (exit 1).
 *
 * The baseline, the naive responder: one autocommit
 *   INSERT ... ON CONFLICT (policy, client) DO UPDATE SET count = count + 1
 * per decision on the same kind of file (rlgate's schema, WAL,
 * synchronous=NORMAL, busy_timeout 5000), prepared once per connection,
 * with the same threads and keys. It counts, it does not limit. (SQLite
 * stores only: Redis has no such row.)
 *
 * Each file is made by the store (its schema), then every key of the set
 * is written directly with sqlite3 in one transaction, in key order: the
 * row the store would write for the key's first admitted request (the pure
 * limiter on a fresh state, the expiry rounded up to the second as the
 * store rounds it), and for the sliding log that request's rlg_log row;
 * so the timed decisions update rows and never time the inserts (a child
 * process writes them, so its page cache never shows in VmRSS). Redis is
 * emptied (FLUSHALL) and gets the same states as the script writes them
 * (HSET of the hash, RPUSH of the log, PEXPIRE until the state is stale),
 * pipelined, 1,000 keys per round trip. One rlg_store_step then checks
 * that the store finds the rows (its client count, or Redis' key count,
 * does not move). States that go stale within a second or two (the token
 * bucket's, whose expiry is its next token, and the 1 s sliding log's)
 * expire from Redis during the run as in production: a decision then
 * finds no key and writes a new one, where SQLite finds a stale row.
 * Each measurement opens the handles, waits on a barrier, runs a warm-up,
 * then counts the decisions completed in a fixed time (CLOCK_MONOTONIC);
 * now_ms is the wall clock (rlg_now_ms), as in production. VmRSS is read
 * while the handles are still open; with Redis, the server's CPU time over
 * the timed phase (/proc/PID/stat) too. In the 1-thread runs each
 * rlg_store_step is timed (CLOCK_MONOTONIC before and after, into a
 * histogram of 1.6% buckets): p50 and p99 per decision.
 *
 * Output: markdown tables on stdout and in --out, one TSV row per
 * measurement in --tsv (store, algorithm, threads, keys, decisions_per_s,
 * p50_us, p99_us; "-" where no latency was taken) for gnuplot, progress
 * on stderr. Exits 1 on any store error, on a decision that is not the
 * one expected or without redis-server, 64 on a bad command line.
 *
 * Usage: bench_decide [--seconds S] [--quick] [--out FILE] [--tsv FILE]
 *                     [--dir DIR] [--stores LIST]
 *                     [--only ALG[,THREADS[,KEYS[,STORE]]]]
 * The default run (192 measurements of 3 s, 3 stores) takes 12 to 15
 * minutes; --quick about 3; --stores disk,redis compares the two that
 * matter in production; --only runs one cell, e.g. under perf.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <sqlite3.h>

#include "config.h"
#include "limiter.h"
#include "store.h"
#include "store_redis.h"
#include "store_sqlite.h"
#include "util.h"
#include "../clock.h"
#include "../fixture.h"
#include "../redis_fixture.h"

#define BUSY_TIMEOUT_MS 5000
#define MAX_THREADS 8
/* "10.255.255.255" and its NUL, with room to spare. */
#define KEY_LEN 20
/* The store rounds stored expiries up to this (store_sqlite.c). */
#define EXPIRES_GRAIN_MS 1000
/* The sliding log of the admitted runs: RLG_SLIDING_LOG_LIMIT_MAX per 1 s. */
#define LOG_WINDOW_MS 1000
/* Redis populating: keys per pipelined round trip. */
#define REDIS_BATCH 1000
/* A populated Redis state that lives this long is counted after the check. */
#define REDIS_LONG_TTL_MS 60000
/*
 * The latency histogram: 64 buckets per power of two of nanoseconds (1.6%
 * wide), exact below 128 ns, up to 2^44 ns.
 */
#define LAT_SUB ((size_t)64)
#define LAT_SUB_BITS 6
#define LAT_EXACT (2 * LAT_SUB)
#define LAT_BUCKETS (LAT_SUB * 40)

enum engine {
	ENG_STORE = 0,       /* rlg_store_open + rlg_store_step */
	ENG_BACKEND,         /* the store's backend alone, no wrapper */
	ENG_BASELINE,        /* the naive autocommit UPSERT */
};

/* The rows of the tables: the four algorithms, then the baseline. */
#define NALGS 4
#define ROW_BASELINE NALGS
#define NROWS (NALGS + 1)

static const enum rlg_algorithm algorithms[NALGS] = {
	RLG_ALG_FIXED_WINDOW, RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET,
	RLG_ALG_SLIDING_LOG,
};

static const int all_threads[] = { 1, 2, 8 };
static const int quick_threads[] = { 1, 8 };
static const long all_keys[] = { 1, 1000, 100000, 1000000 };
#define NTHREADS_MAX (sizeof all_threads / sizeof all_threads[0])
#define NKEYS_MAX (sizeof all_keys / sizeof all_keys[0])
#define NSTORES 3
#define STORE_DISK 0
#define STORE_MEMORY 1
#define STORE_REDIS 2

static const char *const store_names[NSTORES] = { "disk", "memory", "redis" };

/* One timed measurement. */
struct job {
	const char *path;        /* the SQLite file; unused for Redis */
	int store;               /* STORE_* */
	enum engine engine;
	const struct rlg_policy *policy;
	long nkeys;
	bool expect_admit;
	int nthreads;
	double warm_s;           /* untimed, after the handles are open */
	double seconds;          /* timed */
	bool latency;            /* time each step (1 thread only) */
	/* Set by the main thread between the ready and go barriers. */
	double warm_end;         /* CLOCK_MONOTONIC: counting starts */
	double end;              /* counting stops */
	pthread_barrier_t barrier;   /* nthreads + the main thread */
};

struct worker {
	struct job *job;
	int id;
	long ops;                /* decisions completed in [warm_end, end) */
	long wrong;              /* of them, not the decision expected */
	bool failed;
	char errmsg[600];
	char backend[32];        /* the handle's ops->name */
};

/* The naive responder's connection. */
struct naive {
	sqlite3 *db;
	sqlite3_stmt *st;
};

/* What one (store, row, threads, keys) cell measured. */
struct cell {
	bool done;
	double rate;             /* decisions per second */
	long rss_kb;             /* VmRSS at the end, handles open */
	bool has_latency;
	double p50_us;           /* per rlg_store_step, 1 thread */
	double p99_us;
	double redis_cpu_us;     /* redis-server CPU per decision; < 0: none */
};

/* What populating one file (or Redis) gave. */
struct fileinfo {
	bool done;
	int64_t bytes;           /* page_count * page_size after populating;
	                            Redis: used_memory over the empty server's */
	double seconds;          /* populating took */
	long rows;               /* rlg_state rows; Redis: state hashes */
	long log_rows;           /* rlg_log rows; Redis: log lists */
};

struct options {
	double seconds;
	double warm_s;
	bool quick;
	const char *out;
	const char *tsv;
	const char *dir;
	/* --only: -1 or 0 for all, else a row, threads, keys, store. */
	int only_row;
	int only_threads;
	long only_keys;
	int only_store;
	bool stores[NSTORES];    /* --stores, and --only's STORE */
	bool sync_full;          /* --sync full: both rlgate and the baseline */
	enum rlg_group group;    /* --group */
};

static void xsnprintf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void emit(FILE *md, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *group(double v, char *buf, size_t size);
static void key_format(char *buf, long i);
static uint64_t rng_next(uint64_t *x);
static long rng_pick(uint64_t *x, long n);
static int64_t expires_rounded(int64_t expires_ms);
static struct rlg_policy admit_policy(enum rlg_algorithm a);
static struct rlg_policy reject_policy(enum rlg_algorithm a);
static int first_state(const struct rlg_policy *p, long i, int64_t now_ms,
    char *key, struct rlg_state *out, bool *append);
static bool short_lived(const struct rlg_policy *p);
static int store_open(enum engine e, int store, const char *path,
    struct rlg_store **out, char *err, size_t errsize);
static int naive_open(struct naive *nv, const char *path, char *err,
    size_t errsize);
static void naive_close(struct naive *nv);
static int naive_step(struct naive *nv, const char *key, int64_t now_ms,
    const struct rlg_policy *p, char *err, size_t errsize);
static void *worker_main(void *arg);
static int run_apart(const char *what, int (*fn)(void *arg, void *out),
    void *arg, void *out, size_t size);
static int job_child(void *arg, void *out);
static int run_job_apart(struct job *j, struct cell *c, char *backend,
    size_t backend_size);
static int run_job(struct job *j, struct cell *c, char *backend,
    size_t backend_size);
static void lat_record(double seconds);
static double lat_quantile(double q);
static long redis_cpu_ticks(void);
static int create_db(const char *path);
static int populate_child(void *arg, void *out);
static int populate_apart(int store, const char *path,
    const struct rlg_policy *p, long nkeys, struct fileinfo *fi);
static int populate(const char *path, const struct rlg_policy *p,
    long nkeys, struct fileinfo *fi);
static int insert_key(sqlite3_stmt *st_state, sqlite3_stmt *st_log,
    const struct rlg_policy *p, long i, int64_t now_ms);
static redisContext *redis_connect(char *err, size_t errsize);
static int redis_cmd_int(redisContext *c, const char *cmd, long long *v);
static int redis_used_memory(redisContext *c, long long *bytes);
static int redis_populate(const struct rlg_policy *p, long nkeys,
    struct fileinfo *fi);
static int check_populated(int store, const char *path,
    const struct rlg_policy *p, long nkeys, bool expect_admit);
static int query_int64(sqlite3 *db, const char *sql, int64_t *v);
static void remove_db(const char *path);
static long vm_kb(const char *field);
static const char *fs_name(const char *dir, char *buf, size_t size);
static void cpu_model(char *buf, size_t size);
static void cleanup(void);
static int redis_in_path(void);
static void usage(FILE *f);
static int parse_only(const char *spec, struct options *o);
static int parse_stores(const char *spec, struct options *o);
static int parse_options(int argc, char **argv, struct options *o);
static const char *row_name(size_t r);
static void table_head(FILE *md, const char *first, bool threads);
static const char *redis_version(char *buf, size_t size);
static void report(FILE *md, const struct options *o, double elapsed);
static void write_tsv(FILE *f);

static char policy_name[] = "bench";
static struct rlg_config *defaults;      /* production store defaults */
static bool naive_sync_full;             /* the baseline's synchronous */
static char store_dir[NSTORES][PATH_MAX];
static bool store_dir_made[NSTORES];
static const int *threads_list;
static size_t nthreads_list;
static size_t nkeys_list;
static char key_order[256];              /* 0..255 sorted as decimal strings */
static bool key_order_ready;
static char backend_open[32];            /* ops->name of rlg_store_open */
static bool store_run[NSTORES];          /* stores of this run */
static struct rlg_config *redis_conf;    /* defaults, backend = redis */
static struct rlg_test_redis redis;      /* the server; pid 0: none */
static pid_t main_pid;                   /* cleanup() runs only here */
/* The 1-thread runs' step times; only their one worker writes it. */
static uint32_t lat_hist[LAT_BUCKETS];
static uint64_t lat_count;

/* Results: [store][row][threads index][keys index]. */
static struct cell admitted[NSTORES][NROWS][NTHREADS_MAX][NKEYS_MAX];
/* The rejected path, 1 thread, hot key: [store][algorithm][engine]. */
static struct cell rejected[NSTORES][NALGS][2];
static struct fileinfo files[NSTORES][NROWS][NKEYS_MAX];

/* snprintf into a buffer that is always large enough for what we write. */
static void
xsnprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

/* One piece of the report, to stdout and to the markdown file. */
static void
emit(FILE *md, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	va_start(ap, fmt);
	vfprintf(md, fmt, ap);
	va_end(ap);
}

/* v rounded, with thousands separators: 33,932. */
static const char *
group(double v, char *buf, size_t size)
{
	char digits[32];
	size_t n, i, o = 0;

	xsnprintf(digits, sizeof digits, "%.0f", v < 0 ? 0 : v);
	n = strlen(digits);
	for (i = 0; i < n && o + 2 < size; i++) {
		if (i > 0 && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

/* Key i as an IPv4-shaped client key: 10.(i >> 16).(i >> 8 & 255).(i & 255). */
static void
key_format(char *buf, long i)
{
	unsigned part[3] = { (unsigned)(i >> 16) & 255,
	    (unsigned)(i >> 8) & 255, (unsigned)i & 255 };
	char *p = buf;
	int k;

	*p++ = '1';
	*p++ = '0';
	for (k = 0; k < 3; k++) {
		*p++ = '.';
		if (part[k] >= 100)
			*p++ = (char)('0' + part[k] / 100);
		if (part[k] >= 10)
			*p++ = (char)('0' + part[k] / 10 % 10);
		*p++ = (char)('0' + part[k] % 10);
	}
	*p = '\0';
}

/* xorshift64* (Vigna): one per thread, no locks. */
static uint64_t
rng_next(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 2685821657736338717ULL;
}

/* Uniform in [0, n): the high 32 bits scaled (bias below 2^-32 * n). */
static long
rng_pick(uint64_t *x, long n)
{
	return (long)(((rng_next(x) >> 32) * (uint64_t)n) >> 32);
}

/* The expiry the store writes: rounded up to a whole second. */
static int64_t
expires_rounded(int64_t expires_ms)
{
	int64_t r;

	if (expires_ms <= 0 || expires_ms > INT64_MAX - EXPIRES_GRAIN_MS)
		return expires_ms;
	r = expires_ms % EXPIRES_GRAIN_MS;
	return r == 0 ? expires_ms : expires_ms + EXPIRES_GRAIN_MS - r;
}

/*
 * A policy that never rejects in a run: 1e9 per year for the counters and
 * the bucket (burst 1e9); the sliding log, one row per admitted request,
 * gets its largest limit, RLG_SLIDING_LOG_LIMIT_MAX, over a short window
 * (LOG_WINDOW_MS), so a key holds at most a second's worth of rows.
 */
static struct rlg_policy
admit_policy(enum rlg_algorithm a)
{
	struct rlg_policy p = { .name = policy_name, .lim.algorithm = a,
	    .lim.limit = RLG_LIMIT_MAX, .lim.window_ms = RLG_WINDOW_S_MAX * 1000,
	    .lim.burst = 0, .key = RLG_KEY_IP };

	if (a == RLG_ALG_SLIDING_LOG) {
		p.lim.limit = RLG_SLIDING_LOG_LIMIT_MAX;
		p.lim.window_ms = LOG_WINDOW_MS;
	}
	if (a == RLG_ALG_TOKEN_BUCKET)
		p.lim.burst = p.lim.limit;
	return p;
}

/* Limit 1 per year: one admitted request (populated) and then only 429s. */
static struct rlg_policy
reject_policy(enum rlg_algorithm a)
{
	struct rlg_policy p = { .name = policy_name, .lim.algorithm = a,
	    .lim.limit = 1, .lim.window_ms = RLG_WINDOW_S_MAX * 1000, .lim.burst = 0,
	    .key = RLG_KEY_IP };

	if (a == RLG_ALG_TOKEN_BUCKET)
		p.lim.burst = 1;
	return p;
}

/*
 * Key i's client key into key (KEY_LEN bytes) and the state the store
 * writes for its first admitted request at now_ms (the pure limiter on a
 * fresh state); *append: the sliding log gets an entry at now_ms. 0, or
 * -1 if the limiter refused it.
 */
static int
first_state(const struct rlg_policy *p, long i, int64_t now_ms, char *key,
    struct rlg_state *out, bool *append)
{
	struct rlg_state zero = { 0 };
	struct rlg_decision d;
	int rc;

	key_format(key, i);
	*append = false;
	if (p->lim.algorithm == RLG_ALG_SLIDING_LOG)
		rc = rlg_limiter_sliding_log(&p->lim, NULL, 0, now_ms, 1, append, out,
		    &d);
	else
		rc = rlg_limiter_step(&p->lim, &zero, now_ms, 1, out, &d);
	if (rc != RLG_OK || !d.admitted) {
		fprintf(stderr, "bench_decide: the limiter refused the first"
		    " request of %s\n", key);
		return -1;
	}
	return 0;
}

/*
 * Whether a first request's state goes stale (and its Redis keys expire)
 * within REDIS_LONG_TTL_MS: the admitted token bucket's (its next token)
 * and sliding log's (its 1 s window).
 */
static bool
short_lived(const struct rlg_policy *p)
{
	struct rlg_state st;
	char key[KEY_LEN];
	bool append;

	return first_state(p, 0, 0, key, &st, &append) == 0 &&
	    expires_rounded(st.expires_ms) < REDIS_LONG_TTL_MS;
}

/*
 * A store handle with the production defaults (rlg_config_defaults) but
 * busy_timeout_ms = BUSY_TIMEOUT_MS: on path (SQLite), or on the bench's
 * redis-server (store STORE_REDIS: backend = redis, clock = redis).
 * ENG_STORE: rlg_store_open, what the server opens; ENG_BACKEND: the
 * backend alone. 0, or -1 with the store's message in err (the handle is
 * closed).
 */
static int
store_open(enum engine e, int store, const char *path,
    struct rlg_store **out, char *err, size_t errsize)
{
	struct rlg_store_config *cfg = &defaults->store;
	int rc;

	if (store == STORE_REDIS) {
		cfg = &redis_conf->store;
	} else if (strcmp(cfg->sqlite.path, path) != 0) {
		/* Only the main thread changes the path, between runs. */
		free(cfg->sqlite.path);
		cfg->sqlite.path = rlg_xstrdup(path);
	}
	if (e == ENG_BACKEND)
		rc = (store == STORE_REDIS ? &rlg_store_redis_ops :
		    &rlg_store_sqlite_ops)->open(cfg, out);
	else
		rc = rlg_store_open(cfg, out);
	if (rc != RLG_OK) {
		xsnprintf(err, errsize, "store open: %s",
		    *out != NULL ? rlg_store_errmsg(*out) : "no handle");
		rlg_store_close(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

static int
naive_open(struct naive *nv, const char *path, char *err, size_t errsize)
{
	memset(nv, 0, sizeof *nv);
	if (sqlite3_open_v2(path, &nv->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
	    sqlite3_busy_timeout(nv->db, BUSY_TIMEOUT_MS) != SQLITE_OK ||
	    sqlite3_exec(nv->db, naive_sync_full ?
	    "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL" :
	    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL",
	    NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(nv->db,
	    "INSERT INTO rlg_state"
	    " (policy, client, window_start_ms, count, expires_ms)"
	    " VALUES (?1, ?2, ?3, 1, ?4)"
	    " ON CONFLICT (policy, client) DO UPDATE SET count = count + 1",
	    -1, SQLITE_PREPARE_PERSISTENT, &nv->st, NULL) != SQLITE_OK) {
		xsnprintf(err, errsize, "baseline open %s: %s", path,
		    nv->db != NULL ? sqlite3_errmsg(nv->db) : "out of memory");
		naive_close(nv);
		return -1;
	}
	return 0;
}

static void
naive_close(struct naive *nv)
{
	sqlite3_finalize(nv->st);
	sqlite3_close(nv->db);
	nv->st = NULL;
	nv->db = NULL;
}

/* One naive decision: count the request, whatever the count. 0 or -1. */
static int
naive_step(struct naive *nv, const char *key, int64_t now_ms,
    const struct rlg_policy *p, char *err, size_t errsize)
{
	int64_t start = now_ms - now_ms % p->lim.window_ms;
	int rc;

	sqlite3_bind_text(nv->st, 1, p->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(nv->st, 2, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(nv->st, 3, start);
	sqlite3_bind_int64(nv->st, 4, start + p->lim.window_ms);
	rc = sqlite3_step(nv->st);
	sqlite3_reset(nv->st);
	if (rc != SQLITE_DONE) {
		xsnprintf(err, errsize, "baseline step: %s (%d)",
		    sqlite3_errmsg(nv->db), rc);
		return -1;
	}
	return 0;
}

/*
 * One thread of a measurement: opens its own handle, meets the others at
 * the barrier (ready), waits for the main thread to set the clock (go),
 * decides until job->end, counting from job->warm_end; then waits (stop)
 * while the main thread reads VmRSS, and closes (release).
 */
static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct job *j = w->job;
	struct rlg_store *store = NULL;
	struct naive nv = { NULL, NULL };
	struct rlg_store_item item = { j->policy, NULL, false, false, 1 };
	struct rlg_decision d = { 0 };
	uint64_t x = 0x9E3779B97F4A7C15ULL * (uint64_t)(w->id + 1) ^
	    (uint64_t)j->nkeys;
	char key[KEY_LEN];
	double t, t0 = 0;
	int rc;

	if (j->engine == ENG_BASELINE)
		w->failed = naive_open(&nv, j->path, w->errmsg,
		    sizeof w->errmsg) != 0;
	else
		w->failed = store_open(j->engine, j->store, j->path, &store,
		    w->errmsg, sizeof w->errmsg) != 0;
	if (store != NULL)
		xsnprintf(w->backend, sizeof w->backend, "%s",
		    store->ops->name);
	item.client = key;
	pthread_barrier_wait(&j->barrier);      /* ready */
	pthread_barrier_wait(&j->barrier);      /* go: warm_end, end set */
	while (!w->failed) {
		key_format(key, rng_pick(&x, j->nkeys));
		if (j->latency)
			t0 = rlg_test_mono_s();
		if (j->engine == ENG_BASELINE) {
			rc = naive_step(&nv, key, rlg_now_ms(), j->policy,
			    w->errmsg, sizeof w->errmsg);
		} else if ((rc = rlg_store_step(store, &item, 1, rlg_now_ms(),
		    &d)) != RLG_OK) {
			xsnprintf(w->errmsg, sizeof w->errmsg,
			    "rlg_store_step: %d: %s", rc,
			    rlg_store_errmsg(store));
		}
		if (rc != 0) {
			w->failed = true;
			break;
		}
		t = rlg_test_mono_s();
		if (t >= j->end)
			break;
		if (t >= j->warm_end) {
			w->ops++;
			if (j->engine != ENG_BASELINE &&
			    d.admitted != j->expect_admit)
				w->wrong++;
			if (j->latency)
				lat_record(t - t0);
		}
	}
	pthread_barrier_wait(&j->barrier);      /* stop */
	pthread_barrier_wait(&j->barrier);      /* release */
	rlg_store_close(store);
	naive_close(&nv);
	return NULL;
}

/*
 * fn(arg, out) in a child process; out (size bytes) comes back through a
 * pipe. 0, or -1 if the fork failed (said so, naming what), fn failed or
 * the child died (the child printed why).
 */
static int
run_apart(const char *what, int (*fn)(void *arg, void *out), void *arg,
    void *out, size_t size)
{
	int fd[2], status = 0;
	ssize_t n;
	pid_t pid;

	fflush(NULL);
	if (pipe(fd) != 0 || (pid = fork()) < 0) {
		fprintf(stderr, "bench_decide: %s: %s\n", what, strerror(errno));
		return -1;
	}
	if (pid == 0) {
		close(fd[0]);
		status = fn(arg, out) == 0 ? 0 : 1;
		if (write(fd[1], out, size) != (ssize_t)size)
			status = 1;
		fflush(NULL);
		_exit(status);
	}
	close(fd[1]);
	while ((n = read(fd[0], out, size)) < 0 && errno == EINTR)
		;
	close(fd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)size || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return -1;
	return 0;
}

/* What a run_job() in a child process sends back. */
struct job_result {
	struct cell c;
	char backend[32];
};

/* run_apart's fn for run_job_apart: arg the job, out a job_result. */
static int
job_child(void *arg, void *out)
{
	struct job_result *got = out;

	return run_job(arg, &got->c, got->backend, sizeof got->backend);
}

/*
 * run_job() in a child process: each measurement starts from the same
 * heap, so VmRSS is that measurement's own (glibc keeps what earlier
 * threads' arenas freed), and nothing of it outlives the measurement.
 * 0, or -1 (the child printed why).
 */
static int
run_job_apart(struct job *j, struct cell *c, char *backend,
    size_t backend_size)
{
	struct job_result got;

	memset(&got, 0, sizeof got);
	if (run_apart("fork", job_child, j, &got, sizeof got) != 0)
		return -1;
	*c = got.c;
	if (backend != NULL)
		xsnprintf(backend, backend_size, "%s", got.backend);
	return 0;
}

/*
 * Runs one measurement; fills c (rate, VmRSS) and the backend's name.
 * 0, or -1 after printing the store error or the wrong decisions.
 */
static int
run_job(struct job *j, struct cell *c, char *backend, size_t backend_size)
{
	static struct worker w[MAX_THREADS];
	pthread_t t[MAX_THREADS];
	struct timespec ts;
	long ops = 0, wrong = 0, ticks0 = -1, ticks1 = -1, hz;
	double left;
	int i, failed = 0;

	if (j->latency) {
		memset(lat_hist, 0, sizeof lat_hist);
		lat_count = 0;
	}
	pthread_barrier_init(&j->barrier, NULL, (unsigned)j->nthreads + 1);
	for (i = 0; i < j->nthreads; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].job = j;
		w[i].id = i;
		if (pthread_create(&t[i], NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "bench_decide: pthread_create"
			    " failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&j->barrier);      /* ready: handles open */
	j->warm_end = rlg_test_mono_s() + j->warm_s;
	j->end = j->warm_end + j->seconds;
	pthread_barrier_wait(&j->barrier);      /* go */
	if (j->store == STORE_REDIS) {
		/* The server's CPU over the timed phase: from warm_end. */
		while ((left = j->warm_end - rlg_test_mono_s()) > 0) {
			ts.tv_sec = (time_t)left;
			ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
			(void)nanosleep(&ts, NULL);
		}
		ticks0 = redis_cpu_ticks();
	}
	pthread_barrier_wait(&j->barrier);      /* stop */
	if (ticks0 >= 0)
		ticks1 = redis_cpu_ticks();
	c->rss_kb = vm_kb("VmRSS:");
	pthread_barrier_wait(&j->barrier);      /* release */
	for (i = 0; i < j->nthreads; i++) {
		pthread_join(t[i], NULL);
		ops += w[i].ops;
		wrong += w[i].wrong;
		if (w[i].failed) {
			fprintf(stderr, "bench_decide: %s, thread %d: %s\n",
			    j->path, i, w[i].errmsg);
			failed = 1;
		}
	}
	pthread_barrier_destroy(&j->barrier);
	if (backend != NULL)
		xsnprintf(backend, backend_size, "%s", w[0].backend);
	if (wrong > 0) {
		fprintf(stderr, "bench_decide: %s: %ld of %ld decisions were"
		    " not %s\n", j->path, wrong, ops,
		    j->expect_admit ? "admitted" : "rejected");
		failed = 1;
	}
	c->rate = (double)ops / j->seconds;
	c->has_latency = j->latency && lat_count > 0;
	if (c->has_latency) {
		c->p50_us = lat_quantile(0.50);
		c->p99_us = lat_quantile(0.99);
	}
	hz = sysconf(_SC_CLK_TCK);
	c->redis_cpu_us = ticks0 >= 0 && ticks1 >= ticks0 && ops > 0 &&
	    hz > 0 ? (double)(ticks1 - ticks0) / (double)hz * 1e6 /
	    (double)ops : -1;
	c->done = !failed;
	return failed ? -1 : 0;
}

/* One step's time into the histogram (lat_hist, lat_count). */
static void
lat_record(double seconds)
{
	uint64_t ns = seconds > 0 ? (uint64_t)(seconds * 1e9) : 0;
	unsigned e;
	size_t b;

	if (ns < LAT_EXACT) {
		b = (size_t)ns;
	} else {
		/* e >= LAT_SUB_BITS + 1: the top LAT_SUB_BITS bits below it. */
		e = 63u - (unsigned)__builtin_clzll(ns);
		b = (size_t)(e - LAT_SUB_BITS + 1) * LAT_SUB +
		    (size_t)((ns >> (e - LAT_SUB_BITS)) & (LAT_SUB - 1));
	}
	if (b >= LAT_BUCKETS)
		b = LAT_BUCKETS - 1;
	lat_hist[b]++;
	lat_count++;
}

/* The q-quantile of the histogram, in us: the middle of its bucket. */
static double
lat_quantile(double q)
{
	uint64_t want = (uint64_t)(q * (double)lat_count), seen = 0;
	double lo, width;
	size_t b;
	unsigned e;

	if (want < 1)
		want = 1;
	for (b = 0; b < LAT_BUCKETS; b++) {
		seen += lat_hist[b];
		if (seen >= want)
			break;
	}
	if (b >= LAT_BUCKETS)
		b = LAT_BUCKETS - 1;
	if (b < LAT_EXACT) {
		lo = (double)b;
		width = 1;
	} else {
		e = (unsigned)(b / LAT_SUB) + LAT_SUB_BITS - 1;
		width = (double)(1ULL << (e - LAT_SUB_BITS));
		lo = (double)(LAT_SUB + b % LAT_SUB) * width;
	}
	return (lo + width / 2) / 1000;
}

/* User + system clock ticks of the redis-server so far, or -1. */
static long
redis_cpu_ticks(void)
{
	char path[64], line[1024], *p, *tok, *save = NULL, *end;
	unsigned long v, sum = 0;
	FILE *f;
	int field, got = 0;

	if (redis.pid <= 0)
		return -1;
	xsnprintf(path, sizeof path, "/proc/%ld/stat", (long)redis.pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	p = fgets(line, sizeof line, f);
	fclose(f);
	/* After "(comm) ": state is field 3, utime and stime 14 and 15. */
	if (p == NULL || (p = strrchr(line, ')')) == NULL)
		return -1;
	for (field = 3, tok = strtok_r(p + 1, " ", &save); tok != NULL &&
	    field <= 15; field++, tok = strtok_r(NULL, " ", &save)) {
		if (field < 14)
			continue;
		errno = 0;
		v = strtoul(tok, &end, 10);
		if (errno != 0 || end == tok)
			return -1;
		sum += v;
		got++;
	}
	return got == 2 ? (long)sum : -1;
}

/* A new file with rlgate's schema, made by the store itself. 0 or -1. */
static int
create_db(const char *path)
{
	struct rlg_store *s = NULL;
	char err[600];

	remove_db(path);
	if (store_open(ENG_BACKEND, STORE_DISK, path, &s, err, sizeof err) !=
	    0) {
		fprintf(stderr, "bench_decide: %s\n", err);
		return -1;
	}
	rlg_store_close(s);
	return 0;
}

/* populate_apart's arguments, for run_apart. */
struct populate_args {
	int store;
	const char *path;
	const struct rlg_policy *p;
	long nkeys;
};

/* run_apart's fn for populate_apart: arg the populate_args, out a fileinfo. */
static int
populate_child(void *arg, void *out)
{
	const struct populate_args *a = arg;

	return a->store == STORE_REDIS ? redis_populate(a->p, a->nkeys, out) :
	    populate(a->path, a->p, a->nkeys, out);
}

/*
 * populate(), or redis_populate() for the redis store, in a child
 * process, so that its page cache (and the heap it leaves behind) never
 * shows in this process's VmRSS. fi gets the child's figures and the
 * time. 0 or -1.
 */
static int
populate_apart(int store, const char *path, const struct rlg_policy *p,
    long nkeys, struct fileinfo *fi)
{
	struct populate_args a = { store, path, p, nkeys };
	struct fileinfo got = { 0 };
	double t0 = rlg_test_mono_s();

	if (run_apart("populate", populate_child, &a, &got, sizeof got) != 0 ||
	    !got.done)
		return -1;
	*fi = got;
	fi->seconds = rlg_test_mono_s() - t0;
	return 0;
}

/*
 * Writes keys 0..nkeys-1 into path (made by create_db) in one
 * transaction, in the table's key order (so each insert appends to the
 * b-tree), each as the store would store its first admitted request at
 * one instant. Then fi gets page_count * page_size and the rows. 0 or -1.
 * The connection has a 256 MiB page cache and temp_store = MEMORY: each
 * INSERT fires the schema's count trigger, so it keeps a statement
 * journal, which would otherwise go to a temporary file (1,000,000 keys:
 * 7 to 30 s instead of 4 to 8).
 */
static int
populate(const char *path, const struct rlg_policy *p, long nkeys,
    struct fileinfo *fi)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st_state = NULL, *st_log = NULL;
	int64_t now = rlg_now_ms(), pages = 0, page_size = 0, rows = 0;
	int64_t log_rows = 0;
	long amax, ia, ib, ic, i;
	int a, b, c, k, l, tmp, rc = -1;

	if (!key_order_ready) {
		/* 0..255 as their decimal strings sort: 0 1 10 100 ... */
		char sa[4], sb[4];

		for (k = 0; k < 256; k++)
			key_order[k] = (char)k;
		for (k = 1; k < 256; k++) {
			for (l = k; l > 0; l--) {
				xsnprintf(sa, sizeof sa, "%d",
				    (unsigned char)key_order[l - 1]);
				xsnprintf(sb, sizeof sb, "%d",
				    (unsigned char)key_order[l]);
				if (strcmp(sa, sb) <= 0)
					break;
				tmp = key_order[l];
				key_order[l] = key_order[l - 1];
				key_order[l - 1] = (char)tmp;
			}
		}
		key_order_ready = true;
	}
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK ||
	    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS) != SQLITE_OK ||
	    sqlite3_exec(db, "PRAGMA cache_size = -262144;"
	    " PRAGMA temp_store = MEMORY; BEGIN IMMEDIATE", NULL, NULL,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO rlg_state (policy, client,"
	    " window_start_ms, count, expires_ms, prev_count, tat_us)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", -1, &st_state, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO rlg_log (policy, client,"
	    " ts_ms, seq) VALUES (?1, ?2, ?3, 0)", -1, &st_log, NULL) !=
	    SQLITE_OK)
		goto out;
	amax = (nkeys - 1) >> 16;
	for (ia = 0; ia < 256; ia++) {
		if ((a = (unsigned char)key_order[ia]) > amax)
			continue;
		for (ib = 0; ib < 256; ib++) {
			b = (unsigned char)key_order[ib];
			if ((((long)a << 16) | ((long)b << 8)) >= nkeys)
				continue;
			for (ic = 0; ic < 256; ic++) {
				c = (unsigned char)key_order[ic];
				i = ((long)a << 16) | ((long)b << 8) | c;
				if (i >= nkeys)
					continue;
				if (insert_key(st_state, st_log, p, i, now) !=
				    0)
					goto out;
			}
		}
	}
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK ||
	    query_int64(db, "PRAGMA page_count", &pages) != 0 ||
	    query_int64(db, "PRAGMA page_size", &page_size) != 0 ||
	    query_int64(db, "SELECT count(*) FROM rlg_state", &rows) != 0 ||
	    query_int64(db, "SELECT count(*) FROM rlg_log", &log_rows) != 0)
		goto out;
	fi->bytes = pages * page_size;
	fi->rows = (long)rows;
	fi->log_rows = (long)log_rows;
	fi->done = true;
	rc = rows == nkeys ? 0 : -1;
	if (rc != 0)
		fprintf(stderr, "bench_decide: %s: %lld rows for %ld keys\n",
		    path, (long long)rows, nkeys);
out:
	if (rc != 0 && db != NULL && sqlite3_errcode(db) != SQLITE_OK)
		fprintf(stderr, "bench_decide: populate %s: %s\n", path,
		    sqlite3_errmsg(db));
	sqlite3_finalize(st_state);
	sqlite3_finalize(st_log);
	sqlite3_close(db);
	return rc;
}

/* Key i's rows: what the store writes for its first admitted request. */
static int
insert_key(sqlite3_stmt *st_state, sqlite3_stmt *st_log,
    const struct rlg_policy *p, long i, int64_t now_ms)
{
	struct rlg_state out;
	char key[KEY_LEN];
	bool append;
	int rc;

	if (first_state(p, i, now_ms, key, &out, &append) != 0)
		return -1;
	sqlite3_bind_text(st_state, 1, p->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st_state, 2, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st_state, 3, out.window_start_ms);
	sqlite3_bind_int64(st_state, 4, out.count);
	sqlite3_bind_int64(st_state, 5, expires_rounded(out.expires_ms));
	sqlite3_bind_int64(st_state, 6, out.prev_count);
	sqlite3_bind_int64(st_state, 7, out.tat_us);
	rc = sqlite3_step(st_state);
	sqlite3_reset(st_state);
	if (rc != SQLITE_DONE)
		return -1;
	if (!append)
		return 0;
	sqlite3_bind_text(st_log, 1, p->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st_log, 2, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st_log, 3, rlg_limiter_clamp_time(now_ms));
	rc = sqlite3_step(st_log);
	sqlite3_reset(st_log);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* A connection to the bench's redis-server, or NULL with why in err. */
static redisContext *
redis_connect(char *err, size_t errsize)
{
	struct timeval connect_tv = { 5, 0 }, tv = { 60, 0 };
	redisContext *c;

	c = redisConnectWithTimeout("127.0.0.1", redis.port, connect_tv);
	if (c == NULL || c->err != 0 || redisSetTimeout(c, tv) != REDIS_OK) {
		xsnprintf(err, errsize, "redis 127.0.0.1:%d: %s", redis.port,
		    c != NULL ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	return c;
}

/* An integer reply of a command without arguments (DBSIZE). 0 or -1. */
static int
redis_cmd_int(redisContext *c, const char *cmd, long long *v)
{
	redisReply *rep = redisCommand(c, cmd);
	int rc = -1;

	if (rep != NULL && rep->type == REDIS_REPLY_INTEGER) {
		*v = rep->integer;
		rc = 0;
	} else {
		fprintf(stderr, "bench_decide: redis %s: %s\n", cmd,
		    rep == NULL ? c->errstr : rep->type == REDIS_REPLY_ERROR ?
		    rep->str : "unexpected reply");
	}
	freeReplyObject(rep);
	return rc;
}

/* INFO memory's used_memory, in bytes. 0 or -1. */
static int
redis_used_memory(redisContext *c, long long *bytes)
{
	redisReply *rep = redisCommand(c, "INFO memory");
	const char *at;
	int rc = -1;

	if (rep != NULL && rep->type == REDIS_REPLY_STRING &&
	    (at = strstr(rep->str, "used_memory:")) != NULL) {
		*bytes = strtoll(at + strlen("used_memory:"), NULL, 10);
		rc = 0;
	} else {
		fprintf(stderr, "bench_decide: redis INFO memory: %s\n",
		    rep == NULL ? c->errstr : "no used_memory");
	}
	freeReplyObject(rep);
	return rc;
}

/*
 * Empties Redis (FLUSHALL), then writes keys 0..nkeys-1 as the script
 * writes a first admitted request at one instant: the hash rlg:{C}:bench
 * (HSET of the five fields, the expiry rounded up to the second), for the
 * sliding log the list rlg:{C}:bench:log (RPUSH of the instant), each
 * with PEXPIRE until the state is stale; pipelined, REDIS_BATCH keys per
 * round trip. fi gets used_memory over the empty server's and the keys.
 * 0 or -1.
 */
static int
redis_populate(const struct rlg_policy *p, long nkeys, struct fileinfo *fi)
{
	redisContext *c;
	redisReply *rep = NULL;
	struct rlg_state out;
	char key[KEY_LEN], hkey[KEY_LEN + 64], lkey[KEY_LEN + 80], err[256];
	long long base = 0, used = 0, keys = 0, want;
	int64_t now = rlg_now_ms(), expires, ttl = 1;
	long i, pending = 0, lists = 0;
	bool append = false;
	int rc = -1;

	if ((c = redis_connect(err, sizeof err)) == NULL) {
		fprintf(stderr, "bench_decide: %s\n", err);
		return -1;
	}
	rep = redisCommand(c, "FLUSHALL");
	if (rep == NULL || rep->type != REDIS_REPLY_STATUS) {
		fprintf(stderr, "bench_decide: redis FLUSHALL: %s\n",
		    rep == NULL ? c->errstr : rep->type == REDIS_REPLY_ERROR ?
		    rep->str : "unexpected reply");
		goto out;
	}
	freeReplyObject(rep);
	rep = NULL;
	if (redis_used_memory(c, &base) != 0)
		goto out;
	for (i = 0; i < nkeys; i++) {
		if (first_state(p, i, now, key, &out, &append) != 0)
			goto out;
		expires = expires_rounded(out.expires_ms);
		ttl = expires - now > 1 ? expires - now : 1;
		xsnprintf(hkey, sizeof hkey, "rlg:{%s}:%s", key, p->name);
		if (redisAppendCommand(c, "HSET %s window_start_ms %lld count"
		    " %lld prev_count %lld tat_us %lld expires_ms %lld", hkey,
		    (long long)out.window_start_ms, (long long)out.count,
		    (long long)out.prev_count, (long long)out.tat_us,
		    (long long)expires) != REDIS_OK ||
		    redisAppendCommand(c, "PEXPIRE %s %lld", hkey,
		    (long long)ttl) != REDIS_OK)
			goto out;
		pending += 2;
		if (append) {
			xsnprintf(lkey, sizeof lkey, "%s:log", hkey);
			if (redisAppendCommand(c, "RPUSH %s %lld", lkey,
			    (long long)rlg_limiter_clamp_time(now)) !=
			    REDIS_OK || redisAppendCommand(c, "PEXPIRE %s %lld",
			    lkey, (long long)ttl) != REDIS_OK)
				goto out;
			pending += 2;
			lists++;
		}
		if ((i + 1) % REDIS_BATCH != 0 && i + 1 != nkeys)
			continue;
		for (; pending > 0; pending--) {
			if (redisGetReply(c, (void **)&rep) != REDIS_OK ||
			    rep == NULL) {
				fprintf(stderr, "bench_decide: redis populate:"
				    " %s\n", c->errstr);
				goto out;
			}
			if (rep->type == REDIS_REPLY_ERROR) {
				fprintf(stderr, "bench_decide: redis populate:"
				    " %s\n", rep->str);
				goto out;
			}
			freeReplyObject(rep);
			rep = NULL;
		}
	}
	if (redis_cmd_int(c, "DBSIZE", &keys) != 0 ||
	    redis_used_memory(c, &used) != 0)
		goto out;
	fi->bytes = used - base;
	fi->rows = nkeys;
	fi->log_rows = lists;
	fi->done = true;
	/* States that go stale within a minute may be gone already. */
	want = (long long)nkeys + lists;
	rc = keys == want || (ttl < REDIS_LONG_TTL_MS && keys <= want) ? 0 : -1;
	if (rc != 0)
		fprintf(stderr, "bench_decide: redis: %lld keys for %ld"
		    " clients\n", keys, nkeys);
out:
	freeReplyObject(rep);
	redisFree(c);
	return rc;
}

/*
 * One rlg_store_step (the backend alone) on the last key: the decision
 * must be the expected one, and the policy's client count (the schema's
 * triggers keep it; Redis: its key count, when the states outlive the
 * check) must still be nkeys: the store found the populated row. 0 or -1.
 */
static int
check_populated(int store, const char *path, const struct rlg_policy *p,
    long nkeys, bool expect_admit)
{
	struct rlg_store *s = NULL;
	struct rlg_store_item item = { p, NULL, false, false, 1 };
	struct rlg_decision d;
	redisContext *c;
	sqlite3 *db = NULL;
	int64_t clients = -1;
	long long keys = -1;
	char key[KEY_LEN], err[600];
	bool exact = true, ok;
	int rc;

	key_format(key, nkeys - 1);
	item.client = key;
	if (store_open(ENG_BACKEND, store, path, &s, err, sizeof err) != 0) {
		fprintf(stderr, "bench_decide: %s\n", err);
		return -1;
	}
	rc = rlg_store_step(s, &item, 1, rlg_now_ms(), &d);
	if (rc != RLG_OK)
		fprintf(stderr, "bench_decide: %s: rlg_store_step: %s\n",
		    store == STORE_REDIS ? "redis" : path, rlg_store_errmsg(s));
	rlg_store_close(s);
	if (rc != RLG_OK)
		return -1;
	if (store == STORE_REDIS) {
		if ((c = redis_connect(err, sizeof err)) == NULL ||
		    redis_cmd_int(c, "DBSIZE", &keys) != 0)
			keys = -1;
		redisFree(c);
		/* Keys per client: the hash, and the sliding log's list. */
		clients = p->lim.algorithm == RLG_ALG_SLIDING_LOG ? keys / 2 :
		    keys;
		/* Short-lived states (see redis_populate) may be gone. */
		exact = !short_lived(p);
	} else {
		if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) !=
		    SQLITE_OK || query_int64(db, "SELECT clients FROM"
		    " rlg_clients WHERE policy = 'bench'", &clients) != 0)
			clients = -1;
		sqlite3_close(db);
	}
	ok = d.admitted == expect_admit && (exact ? clients == nkeys :
	    clients >= 0 && clients <= nkeys);
	if (!ok) {
		fprintf(stderr, "bench_decide: %s: populated %s not as the"
		    " store writes them (decision %s, %lld clients for %ld"
		    " keys)\n", store == STORE_REDIS ? "redis" : path,
		    store == STORE_REDIS ? "keys" : "rows",
		    d.admitted ? "admitted" : "rejected", (long long)clients,
		    nkeys);
		return -1;
	}
	return 0;
}

/* The first column of the first row of sql. 0 or -1. */
static int
query_int64(sqlite3 *db, const char *sql, int64_t *v)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : -1;
}

/* The database and its -wal and -shm files. */
static void
remove_db(const char *path)
{
	char name[PATH_MAX + 8];

	(void)unlink(path);
	xsnprintf(name, sizeof name, "%s-wal", path);
	(void)unlink(name);
	xsnprintf(name, sizeof name, "%s-shm", path);
	(void)unlink(name);
}

/* A "VmXXX:" line of /proc/self/status, in kB; -1 if absent. */
static long
vm_kb(const char *field)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, field, strlen(field)) == 0) {
			kb = strtol(line + strlen(field), NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb;
}

/* The file system type of dir, by statfs magic, for the header. */
static const char *
fs_name(const char *dir, char *buf, size_t size)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} fs[] = {
		{ 0xEF53UL, "ext4" }, { 0x01021994UL, "tmpfs" },
		{ 0x58465342UL, "xfs" }, { 0x9123683EUL, "btrfs" },
		{ 0x794C7630UL, "overlayfs" }, { 0x2FC12FC1UL, "zfs" },
		{ 0x6969UL, "nfs" },
	};
	struct statfs sf;
	size_t i;

	if (statfs(dir, &sf) != 0) {
		xsnprintf(buf, size, "?");
		return buf;
	}
	for (i = 0; i < sizeof fs / sizeof fs[0]; i++) {
		if ((unsigned long)sf.f_type == fs[i].magic) {
			xsnprintf(buf, size, "%s", fs[i].name);
			return buf;
		}
	}
	xsnprintf(buf, size, "fs 0x%lx", (unsigned long)sf.f_type);
	return buf;
}

static void
cpu_model(char *buf, size_t size)
{
	char line[512], *v;
	FILE *f = fopen("/proc/cpuinfo", "r");

	xsnprintf(buf, size, "unknown CPU");
	if (f == NULL)
		return;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "model name", 10) == 0 &&
		    (v = strchr(line, ':')) != NULL) {
			v += strspn(v + 1, " \t") + 1;
			v[strcspn(v, "\n")] = '\0';
			xsnprintf(buf, size, "%s", v);
			break;
		}
	}
	fclose(f);
}


/*
 * Removes the directories this run made, whatever it left in them, and
 * stops the redis-server; in the main process only (a child that calls
 * exit() must not stop what the parent still uses).
 */
static void
cleanup(void)
{
	int s;

	if (getpid() != main_pid)
		return;
	for (s = 0; s < NSTORES; s++) {
		if (store_dir_made[s])
			rlg_test_rmtree(store_dir[s]);
		store_dir_made[s] = false;
	}
	if (redis.pid > 0 || redis.dir[0] != '\0')
		rlg_test_redis_stop(&redis);
}

/* 0 if an executable redis-server is in PATH, else -1. */
static int
redis_in_path(void)
{
	char buf[PATH_MAX], dir[PATH_MAX];
	const char *path = getenv("PATH"), *p, *colon;
	size_t len;

	for (p = path != NULL ? path : ""; *p != '\0'; p = colon + 1) {
		colon = strchr(p, ':');
		if (colon == NULL)
			colon = p + strlen(p);
		len = (size_t)(colon - p);
		if (len > 0 && len < sizeof dir) {
			memcpy(dir, p, len);
			dir[len] = '\0';
			xsnprintf(buf, sizeof buf, "%s/redis-server", dir);
			if (access(buf, X_OK) == 0)
				return 0;
		}
		if (*colon == '\0')
			break;
	}
	return -1;
}

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: bench_decide [--seconds S] [--quick] [--out FILE]"
	    " [--tsv FILE] [--dir DIR]\n"
	    "                    [--stores LIST] [--only"
	    " ALG[,THREADS[,KEYS[,STORE]]]] [--sync full|normal]\n"
	    "                    [--group auto|on|off]\n"
	    "  --seconds S  timed span of each measurement (default 3;"
	    " 0.1 to 60)\n"
	    "  --quick      smoke test: 1 s, 1 and 8 threads, 1, 1000 and"
	    " 100000 keys\n"
	    "  --out FILE   markdown report (default ./bench-decide.md)\n"
	    "  --tsv FILE   one row per measurement (default"
	    " ./bench-decide.tsv)\n"
	    "  --dir DIR    where the disk store's temporary directory is"
	    " made (default /var/tmp);\n"
	    "               the memory store's is made in /dev/shm\n"
	    "  --stores LIST  the stores to run, comma-separated, of disk,"
	    " memory, redis\n"
	    "               (default all three; redis needs redis-server in"
	    " PATH)\n"
	    "  --only ALG[,THREADS[,KEYS[,STORE]]]  one cell of the matrix,"
	    " e.g. to profile:\n"
	    "               fixed_window,1,1,disk or"
	    " fixed_window,1,1000,redis (ALG may be\n"
	    "               baseline, SQLite stores only; no rejected"
	    " runs)\n"
	    "  --sync MODE  [store] synchronous of the SQLite stores and"
	    " the baseline\n"
	    "  --group MODE [store] group_commit of every store\n");
}

/* --only ALG[,THREADS[,KEYS[,STORE]]], each from the matrix. 0 or -1. */
static int
parse_only(const char *spec, struct options *o)
{
	char buf[128], *field[4] = { NULL, NULL, NULL, NULL }, *save = NULL;
	size_t i, n;
	bool ok = true;

	xsnprintf(buf, sizeof buf, "%s", spec);
	field[0] = strtok_r(buf, ",", &save);
	for (n = 1; n < 4 && field[n - 1] != NULL; n++)
		field[n] = strtok_r(NULL, ",", &save);
	if (field[0] == NULL || (field[3] != NULL &&
	    strtok_r(NULL, ",", &save) != NULL))
		ok = false;
	for (i = 0; ok && i < NROWS; i++) {
		if (strcmp(field[0], i == ROW_BASELINE ? "baseline" :
		    rlg_algorithm_name(algorithms[i])) == 0)
			o->only_row = (int)i;
	}
	if (o->only_row < 0)
		ok = false;
	if (ok && field[1] != NULL) {
		o->only_threads = atoi(field[1]);
		for (ok = false, i = 0; i < NTHREADS_MAX; i++)
			ok = ok || all_threads[i] == o->only_threads;
	}
	if (ok && field[2] != NULL) {
		o->only_keys = atol(field[2]);
		for (ok = false, i = 0; i < NKEYS_MAX; i++)
			ok = ok || all_keys[i] == o->only_keys;
	}
	if (ok && field[3] != NULL) {
		for (i = 0; i < NSTORES; i++) {
			if (strcmp(field[3], store_names[i]) == 0)
				o->only_store = (int)i;
		}
		ok = o->only_store >= 0 && !(o->only_store == STORE_REDIS &&
		    o->only_row == ROW_BASELINE);
	}
	if (!ok)
		fprintf(stderr, "bench_decide: --only: ALG[,THREADS[,KEYS["
		    ",STORE]]] with ALG an algorithm or baseline, THREADS 1, 2"
		    " or 8, KEYS 1, 1000, 100000 or 1000000, STORE disk, memory"
		    " or redis (baseline: not redis) (got \"%s\")\n", spec);
	return ok ? 0 : -1;
}

/* --stores LIST: store names, comma-separated. 0 or -1. */
static int
parse_stores(const char *spec, struct options *o)
{
	char buf[128], *name, *save = NULL;
	size_t i;
	bool ok = true, any = false, found;

	xsnprintf(buf, sizeof buf, "%s", spec);
	for (i = 0; i < NSTORES; i++)
		o->stores[i] = false;
	for (name = strtok_r(buf, ",", &save); name != NULL && ok;
	    name = strtok_r(NULL, ",", &save)) {
		found = false;
		for (i = 0; i < NSTORES; i++) {
			if (strcmp(name, store_names[i]) == 0) {
				o->stores[i] = true;
				found = true;
			}
		}
		ok = found;
		any = any || found;
	}
	if (!ok || !any) {
		fprintf(stderr, "bench_decide: --stores: a comma-separated"
		    " list of disk, memory and redis (got \"%s\")\n", spec);
		return -1;
	}
	return 0;
}

static int
parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "quick", no_argument, NULL, 'q' },
		{ "out", required_argument, NULL, 'o' },
		{ "tsv", required_argument, NULL, 't' },
		{ "dir", required_argument, NULL, 'd' },
		{ "only", required_argument, NULL, 'O' },
		{ "stores", required_argument, NULL, 'T' },
		{ "sync", required_argument, NULL, 'S' },
		{ "group", required_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool seconds_set = false;
	char *end;
	size_t i;
	int ch;

	o->seconds = 3.0;
	o->quick = false;
	o->out = "bench-decide.md";
	o->tsv = "bench-decide.tsv";
	o->dir = "/var/tmp";
	o->only_row = -1;
	o->only_threads = 0;
	o->only_keys = 0;
	o->only_store = -1;
	for (i = 0; i < NSTORES; i++)
		o->stores[i] = true;
	o->sync_full = false;
	o->group = RLG_GROUP_AUTO;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			errno = 0;
			o->seconds = strtod(optarg, &end);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    !(o->seconds >= 0.1 && o->seconds <= 60)) {
				fprintf(stderr, "bench_decide: --seconds: from"
				    " 0.1 to 60 (got \"%s\")\n", optarg);
				return -1;
			}
			seconds_set = true;
			break;
		case 'q':
			o->quick = true;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 't':
			o->tsv = optarg;
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 'O':
			if (parse_only(optarg, o) != 0)
				return -1;
			break;
		case 'T':
			if (parse_stores(optarg, o) != 0)
				return -1;
			break;
		case 'S':
			if (strcmp(optarg, "normal") != 0 &&
			    strcmp(optarg, "full") != 0) {
				fprintf(stderr, "bench_decide: --sync: normal"
				    " or full (got \"%s\")\n", optarg);
				return -1;
			}
			o->sync_full = strcmp(optarg, "full") == 0;
			break;
		case 'G':
			if (strcmp(optarg, "auto") == 0)
				o->group = RLG_GROUP_AUTO;
			else if (strcmp(optarg, "on") == 0)
				o->group = RLG_GROUP_ON;
			else if (strcmp(optarg, "off") == 0)
				o->group = RLG_GROUP_OFF;
			else {
				fprintf(stderr, "bench_decide: --group: auto,"
				    " on or off (got \"%s\")\n", optarg);
				return -1;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	/* --only's STORE narrows --stores (or all of them) to one. */
	if (o->only_store >= 0) {
		if (!o->stores[o->only_store]) {
			fprintf(stderr, "bench_decide: --only names store %s,"
			    " which --stores leaves out\n",
			    store_names[o->only_store]);
			return -1;
		}
		for (i = 0; i < NSTORES; i++)
			o->stores[i] = (int)i == o->only_store;
	}
	if (o->quick && !seconds_set)
		o->seconds = 1.0;
	o->warm_s = o->seconds >= 2 ? 0.3 : 0.2;
	return 0;
}

int
main(int argc, char **argv)
{
	struct options o;
	struct rlg_policy pol;
	struct job j;
	char path[PATH_MAX + 64], buf[64], backend[32], why[256];
	double t_begin = rlg_test_mono_s();
	FILE *md, *tsv;
	size_t s, r, ti, ki;
	int failed = 0, e;
	bool sqlite_store;

	if (parse_options(argc, argv, &o) != 0)
		return RLG_EXIT_USAGE;
	memcpy(store_run, o.stores, sizeof store_run);
	main_pid = getpid();
	/* A Redis connection the server closed must not kill us (as rlgate). */
	(void)signal(SIGPIPE, SIG_IGN);
	/* --quick trims the matrix; --only picks from the whole of it. */
	if (o.only_row >= 0)
		o.quick = false;
	threads_list = o.quick ? quick_threads : all_threads;
	nthreads_list = o.quick ? sizeof quick_threads /
	    sizeof quick_threads[0] : NTHREADS_MAX;
	nkeys_list = o.quick ? 3 : NKEYS_MAX;
	defaults = rlg_config_defaults();
	defaults->store.sqlite.synchronous = o.sync_full ? RLG_SYNC_FULL :
	    RLG_SYNC_NORMAL;
	defaults->store.group_commit = o.group;
	naive_sync_full = o.sync_full;
	defaults->store.sqlite.busy_timeout_ms = BUSY_TIMEOUT_MS;

	xsnprintf(store_dir[STORE_DISK], sizeof store_dir[STORE_DISK],
	    "%s/rlg-bench-decide-XXXXXX", o.dir);
	xsnprintf(store_dir[STORE_MEMORY], sizeof store_dir[STORE_MEMORY],
	    "/dev/shm/rlg-bench-decide-XXXXXX");
	atexit(cleanup);
	if (store_run[STORE_REDIS]) {
		if (redis_in_path() != 0) {
			fprintf(stderr, "bench_decide: redis-server is not"
			    " installed (not in PATH): the redis store needs"
			    " it (scripts/deps.sh installs the redis-server"
			    " package); --stores disk,memory runs without"
			    " it\n");
			rlg_config_free(defaults);
			return 1;
		}
		if (rlg_test_redis_start(&redis) != 0) {
			fprintf(stderr, "bench_decide: could not start"
			    " redis-server (above)\n");
			rlg_config_free(defaults);
			return 1;
		}
		fprintf(stderr, "bench_decide: redis-server pid %ld on"
		    " 127.0.0.1:%d\n", (long)redis.pid, redis.port);
		redis_conf = rlg_config_defaults();
		redis_conf->store.backend = RLG_BACKEND_REDIS;
		/* exact mode: the defaults' commit (behind, SQLite's) would
		 * put the host's table in front (local+global) */
		redis_conf->store.sqlite.commit = RLG_COMMIT_EACH;
		redis_conf->store.redis.clock = RLG_CLOCK_REDIS;
		redis_conf->store.group_commit = o.group;
		if (rlg_redis_url_parse(&redis_conf->store.redis, redis.url, why,
		    sizeof why) != 0) {
			fprintf(stderr, "bench_decide: %s: %s\n", redis.url,
			    why);
			rlg_config_free(defaults);
			rlg_config_free(redis_conf);
			return 1;
		}
	}
	for (s = 0; s < NSTORES; s++) {
		if (s == STORE_REDIS || !store_run[s])
			continue;
		if (mkdtemp(store_dir[s]) == NULL) {
			fprintf(stderr, "bench_decide: mkdtemp %s: %s\n",
			    store_dir[s], strerror(errno));
			return 1;
		}
		store_dir_made[s] = true;
	}
	if ((md = fopen(o.out, "w")) == NULL ||
	    (tsv = fopen(o.tsv, "w")) == NULL) {
		fprintf(stderr, "bench_decide: %s: %s\n", md == NULL ? o.out :
		    o.tsv, strerror(errno));
		return 1;
	}

	for (s = 0; s < NSTORES && !failed; s++) {
		if (!store_run[s])
			continue;
		sqlite_store = s != STORE_REDIS;
		for (ki = 0; ki < nkeys_list && !failed; ki++) {
			long nkeys = all_keys[ki];

			if (o.only_keys > 0 && nkeys != o.only_keys)
				continue;
			for (r = 0; r < NROWS && !failed; r++) {
				if (o.only_row >= 0 && (int)r != o.only_row)
					continue;
				/* The naive UPSERT is SQLite's. */
				if (r == ROW_BASELINE && !sqlite_store)
					continue;
				pol = admit_policy(r == ROW_BASELINE ?
				    RLG_ALG_FIXED_WINDOW : algorithms[r]);
				xsnprintf(path, sizeof path, "%s/%s-%ld.db",
				    sqlite_store ? store_dir[s] : "redis",
				    r == ROW_BASELINE ? "baseline" :
				    rlg_algorithm_name(pol.lim.algorithm), nkeys);
				if ((sqlite_store && create_db(path) != 0) ||
				    populate_apart((int)s, path, &pol, nkeys,
				    &files[s][r][ki]) != 0 ||
				    check_populated((int)s, path, &pol, nkeys,
				    true) != 0) {
					failed = 1;
					break;
				}
				fprintf(stderr, "%-6s %-15s %7ld keys:"
				    " populated in %.1f s\n", store_names[s],
				    r == ROW_BASELINE ? "baseline" :
				    rlg_algorithm_name(pol.lim.algorithm), nkeys,
				    files[s][r][ki].seconds);
				for (ti = 0; ti < nthreads_list; ti++) {
					if (o.only_threads > 0 &&
					    threads_list[ti] != o.only_threads)
						continue;
					memset(&j, 0, sizeof j);
					j.path = path;
					j.store = (int)s;
					j.engine = r == ROW_BASELINE ?
					    ENG_BASELINE : ENG_STORE;
					j.latency = threads_list[ti] == 1 &&
					    r != ROW_BASELINE;
					j.policy = &pol;
					j.nkeys = nkeys;
					j.expect_admit = true;
					j.nthreads = threads_list[ti];
					j.warm_s = o.warm_s;
					j.seconds = o.seconds;
					if (run_job_apart(&j,
					    &admitted[s][r][ti][ki],
					    backend, sizeof backend) != 0) {
						failed = 1;
						break;
					}
					if (j.engine == ENG_STORE)
						memcpy(backend_open, backend,
						    sizeof backend_open);
					fprintf(stderr, "%-6s %-15s %7ld keys"
					    " %d thr: %12s decisions/s,"
					    " VmRSS %ld kB", store_names[s],
					    r == ROW_BASELINE ? "baseline" :
					    rlg_algorithm_name(pol.lim.algorithm),
					    nkeys, threads_list[ti],
					    group(admitted[s][r][ti][ki].rate,
					    buf, sizeof buf),
					    admitted[s][r][ti][ki].rss_kb);
					if (admitted[s][r][ti][ki].has_latency)
						fprintf(stderr, ", p50 %.1f us,"
						    " p99 %.1f us",
						    admitted[s][r][ti][ki].
						    p50_us,
						    admitted[s][r][ti][ki].
						    p99_us);
					if (admitted[s][r][ti][ki].
					    redis_cpu_us >= 0)
						fprintf(stderr, ", redis-server"
						    " %.1f us CPU/decision",
						    admitted[s][r][ti][ki].
						    redis_cpu_us);
					fprintf(stderr, "\n");
				}
				if (sqlite_store)
					remove_db(path);
			}
		}
		/* The rejected path: hot key, limit 1 spent, 1 thread. */
		for (r = 0; r < NALGS && !failed && o.only_row < 0; r++) {
			pol = reject_policy(algorithms[r]);
			for (e = 0; e < 2 && !failed; e++) {
				xsnprintf(path, sizeof path,
				    "%s/rejected-%s.db", sqlite_store ?
				    store_dir[s] : "redis",
				    rlg_algorithm_name(pol.lim.algorithm));
				if ((sqlite_store && create_db(path) != 0) ||
				    populate_apart((int)s, path, &pol, 1,
				    &(struct fileinfo){ 0 }) != 0 ||
				    check_populated((int)s, path, &pol, 1,
				    false) != 0) {
					failed = 1;
					break;
				}
				memset(&j, 0, sizeof j);
				j.path = path;
				j.store = (int)s;
				j.engine = e == 0 ? ENG_STORE : ENG_BACKEND;
				j.policy = &pol;
				j.nkeys = 1;
				j.expect_admit = false;
				j.nthreads = 1;
				j.warm_s = o.warm_s;
				j.seconds = o.seconds;
				if (run_job_apart(&j, &rejected[s][r][e],
				    NULL, 0) != 0) {
					failed = 1;
					break;
				}
				fprintf(stderr, "%-6s %-15s rejected, %s:"
				    " %12s decisions/s\n", store_names[s],
				    rlg_algorithm_name(pol.lim.algorithm),
				    e == 0 ? "rlg_store_open" : sqlite_store ?
				    "SQLite store" : "Redis store",
				    group(rejected[s][r][e].rate, buf,
				    sizeof buf));
				if (sqlite_store)
					remove_db(path);
			}
		}
	}
	if (failed) {
		fprintf(stderr, "bench_decide: FAILED (a store error or an"
		    " unexpected decision, above)\n");
		fclose(md);
		fclose(tsv);
		rlg_config_free(defaults);
		rlg_config_free(redis_conf);
		return 1;
	}
	report(md, &o, rlg_test_mono_s() - t_begin);
	write_tsv(tsv);
	if (fclose(md) != 0 || fclose(tsv) != 0) {
		fprintf(stderr, "bench_decide: writing %s or %s: %s\n", o.out,
		    o.tsv, strerror(errno));
		rlg_config_free(defaults);
		rlg_config_free(redis_conf);
		return 1;
	}
	fprintf(stderr, "bench_decide: wrote %s and %s\n", o.out, o.tsv);
	rlg_config_free(defaults);
	rlg_config_free(redis_conf);
	return 0;
}

/* A row name of the tables. */
static const char *
row_name(size_t r)
{
	return r == ROW_BASELINE ? "baseline (naive UPSERT)" :
	    rlg_algorithm_name(algorithms[r]);
}

/*
 * The header of a table whose columns are the key counts: "| FIRST |
 * threads |" (or without threads) and its alignment line.
 */
static void
table_head(FILE *md, const char *first, bool threads)
{
	char b1[32];
	size_t ki;

	emit(md, "| %s |%s", first, threads ? " threads |" : "");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, " %s key%s |", group((double)all_keys[ki], b1,
		    sizeof b1), all_keys[ki] == 1 ? "" : "s");
	emit(md, "\n|---|%s", threads ? "---:|" : "");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, "---:|");
	emit(md, "\n");
}

/* The redis-server's version (INFO server), or "?". */
static const char *
redis_version(char *buf, size_t size)
{
	redisContext *c;
	redisReply *rep;
	const char *at;
	char err[256];

	xsnprintf(buf, size, "?");
	if ((c = redis_connect(err, sizeof err)) == NULL)
		return buf;
	rep = redisCommand(c, "INFO server");
	if (rep != NULL && rep->type == REDIS_REPLY_STRING &&
	    (at = strstr(rep->str, "redis_version:")) != NULL) {
		at += strlen("redis_version:");
		xsnprintf(buf, size, "%.*s", (int)strcspn(at, "\r\n"), at);
	}
	freeReplyObject(rep);
	redisFree(c);
	return buf;
}

static void
report(FILE *md, const struct options *o, double elapsed)
{
	char cpu[256], fs[NSTORES][32], b1[32], b2[32], b3[32], rver[32];
	struct utsname un;
	double load[3] = { -1, -1, -1 }, ratio;
	size_t s, r, ti, ki, a, ref;
	const struct fileinfo *fi;
	const struct cell *c, *cb;
	struct rlg_policy pol;
	bool any_sqlite = store_run[STORE_DISK] || store_run[STORE_MEMORY];
	bool first;

	cpu_model(cpu, sizeof cpu);
	if (uname(&un) != 0)
		xsnprintf(un.release, sizeof un.release, "?");
	(void)getloadavg(load, 3);
	for (s = 0; s < NSTORES; s++) {
		if (s != STORE_REDIS && store_run[s])
			fs_name(store_dir[s], fs[s], sizeof fs[s]);
		else
			xsnprintf(fs[s], sizeof fs[s], "-");
	}
	if (store_run[STORE_REDIS])
		redis_version(rver, sizeof rver);
	else
		xsnprintf(rver, sizeof rver, "-");
	/* SQLite's figures to set Redis' beside: the disk file's. */
	ref = store_run[STORE_DISK] ? STORE_DISK : STORE_MEMORY;

	emit(md, "# bench_decide: decisions per second through"
	    " rlg_store_step\n\n");
	emit(md, "machine: %ld CPUs (nproc), %s, Linux %s, SQLite %s%s%s;"
	    " load average at the end %.2f %.2f %.2f\n\n",
	    sysconf(_SC_NPROCESSORS_ONLN), cpu, un.release,
	    sqlite3_libversion(), store_run[STORE_REDIS] ?
	    ", redis-server " : "", store_run[STORE_REDIS] ? rver : "",
	    load[0], load[1], load[2]);
	emit(md, "parameters: %.3g s timed per measurement after a %.3g s"
	    " warm-up%s; threads:", o->seconds, o->warm_s,
	    o->quick ? " (--quick)" : "");
	for (ti = 0; ti < nthreads_list; ti++)
		emit(md, " %d", threads_list[ti]);
	emit(md, "; keys:");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, " %s", group((double)all_keys[ki], b1, sizeof b1));
	emit(md, "; stores:");
	for (s = 0; s < NSTORES; s++)
		if (store_run[s])
			emit(md, " %s", store_names[s]);
	emit(md, "; whole run %.0f s\n\n", elapsed);
	for (s = 0; s < NSTORES; s++) {
		if (s == STORE_REDIS || !store_run[s])
			continue;
		emit(md, "%s = files in %s (%s); ", store_names[s],
		    store_dir[s], fs[s]);
	}
	if (any_sqlite)
		emit(md, "WAL, synchronous=%s, busy_timeout %d ms, one"
		    " connection per thread. A true :memory: database cannot"
		    " be shared by the threads' separate connections and the"
		    " store opens only files, so \"memory\" is the same file"
		    " on tmpfs.\n\n", o->sync_full ? "FULL" : "NORMAL",
		    BUSY_TIMEOUT_MS);
	if (store_run[STORE_REDIS])
		emit(md, "redis = redis-server %s on 127.0.0.1:%d, started by"
		    " this program (--save \"\" --appendonly no: no"
		    " persistence), on the same 2 CPUs as the threads; one"
		    " TCP connection per thread (loopback: no network delay),"
		    " [store] backend = redis, clock = redis (the script"
		    " reads Redis TIME), timeout_ms %d; one script call per"
		    " decision (FCALL of the library, as rlgate makes it on"
		    " Redis 7; EVALSHA before).\n\n", rver, redis.port,
		    redis_conf != NULL ? redis_conf->store.redis.timeout_ms : 0);
	emit(md, "rlgate: rlg_store_open (backend \"%s\") with the"
	    " production defaults (rlg_config_defaults: max_clients %lld"
	    " (SQLite), rejection_cache %lld, ...), busy_timeout_ms %d; one"
	    " policy per step; now_ms = rlg_now_ms(). Policies: 1e9"
	    " requests per 366 days (token bucket burst 1e9), never"
	    " reached; sliding_log %lld per %d ms (its largest limit: one"
	    " row per admitted request, so a key holds at most a second's"
	    " worth of rows; the hot key holds as many rows as it gets"
	    " decisions per second, and each decision reads them all).\n\n",
	    backend_open, (long long)defaults->store.sqlite.max_clients,
	    (long long)defaults->store.rejection_cache, BUSY_TIMEOUT_MS,
	    (long long)RLG_SLIDING_LOG_LIMIT_MAX, LOG_WINDOW_MS);
	if (any_sqlite)
		emit(md, "baseline: one autocommit `INSERT INTO rlg_state"
		    " (policy, client, window_start_ms, count, expires_ms)"
		    " VALUES (...) ON CONFLICT (policy, client) DO UPDATE SET"
		    " count = count + 1` per decision, prepared once per"
		    " connection, on a file of the same schema and"
		    " settings.\n\n");
	emit(md, "keys: \"10.a.b.c\", key i = 10.(i>>16).(i>>8&255).(i&255),"
	    " each decision picks one uniformly at random (xorshift64* per"
	    " thread). Every file is populated before timing: all keys"
	    " written with sqlite3 in one transaction, in key order, each"
	    " as the store writes its first admitted request (the pure"
	    " limiter on a fresh state; the sliding log with its rlg_log"
	    " row); one rlg_store_step then checks that the store finds the"
	    " rows. Each algorithm and the baseline get a file of their"
	    " own, used by the 1-, 2- and 8-thread runs in turn.");
	if (store_run[STORE_REDIS])
		emit(md, " Redis is emptied (FLUSHALL) per algorithm and key"
		    " set and gets the same states as the script writes them"
		    " (HSET, RPUSH for the sliding log, PEXPIRE), pipelined"
		    " %d keys per round trip. The token bucket's states (stale"
		    " at its next token, about 32 ms, rounded up to 1 s) and"
		    " the 1 s sliding log's expire from Redis within a second"
		    " or two, as in production: with many keys most of their"
		    " decisions find no key and write a new one, where SQLite"
		    " reads a stale row.", REDIS_BATCH);
	emit(md, "\n\n");

	for (s = 0; s < NSTORES; s++) {
		if (!store_run[s])
			continue;
		emit(md, "## Admitted, %s store: decisions/s\n\n",
		    store_names[s]);
		table_head(md, "algorithm", true);
		for (r = 0; r < NROWS; r++) {
			if (r == ROW_BASELINE && s == STORE_REDIS)
				continue;
			for (ti = 0; ti < nthreads_list; ti++) {
				emit(md, "| %s | %d |", row_name(r),
				    threads_list[ti]);
				for (ki = 0; ki < nkeys_list; ki++) {
					c = &admitted[s][r][ti][ki];
					if (c->done)
						emit(md, " %s |", group(c->rate,
						    b1, sizeof b1));
					else
						emit(md, " - |");
				}
				emit(md, "\n");
			}
		}
		emit(md, "\n");
	}

	if (store_run[STORE_REDIS] && store_run[ref]) {
		emit(md, "## Redis / SQLite (%s store): decisions/s of the"
		    " redis store over the %s store's\n\n", store_names[ref],
		    store_names[ref]);
		table_head(md, "algorithm", true);
		for (r = 0; r < NALGS; r++) {
			for (ti = 0; ti < nthreads_list; ti++) {
				emit(md, "| %s | %d |", row_name(r),
				    threads_list[ti]);
				for (ki = 0; ki < nkeys_list; ki++) {
					c = &admitted[STORE_REDIS][r][ti][ki];
					cb = &admitted[ref][r][ti][ki];
					if (c->done && cb->done && cb->rate > 0)
						emit(md, " %.2f |", c->rate /
						    cb->rate);
					else
						emit(md, " - |");
				}
				emit(md, "\n");
			}
		}
		emit(md, "\n");
	}

	emit(md, "## Latency per decision, 1 thread: p50 / p99 (us)\n\n");
	emit(md, "CLOCK_MONOTONIC before and after each rlg_store_step of"
	    " the 1-thread runs above (admitted path, every decision of the"
	    " timed phase), in buckets 1.6%% wide; the figure is the"
	    " bucket's middle.\n\n");
	emit(md, "| algorithm | keys |");
	for (s = 0; s < NSTORES; s++)
		if (store_run[s])
			emit(md, " %s p50 | %s p99 |", store_names[s],
			    store_names[s]);
	emit(md, "\n|---|---:|");
	for (s = 0; s < NSTORES; s++)
		if (store_run[s])
			emit(md, "---:|---:|");
	emit(md, "\n");
	for (r = 0; r < NALGS; r++) {
		for (ki = 0; ki < nkeys_list; ki++) {
			first = true;
			for (s = 0; s < NSTORES; s++)
				for (ti = 0; ti < nthreads_list; ti++)
					if (store_run[s] && admitted[s][r][ti]
					    [ki].has_latency)
						first = false;
			if (first)
				continue;
			emit(md, "| %s | %s |", row_name(r),
			    group((double)all_keys[ki], b1, sizeof b1));
			for (s = 0; s < NSTORES; s++) {
				if (!store_run[s])
					continue;
				c = NULL;
				for (ti = 0; ti < nthreads_list; ti++)
					if (admitted[s][r][ti][ki].has_latency)
						c = &admitted[s][r][ti][ki];
				if (c != NULL)
					emit(md, " %.1f | %.1f |", c->p50_us,
					    c->p99_us);
				else
					emit(md, " - | - |");
			}
			emit(md, "\n");
		}
	}
	emit(md, "\n");

	if (store_run[STORE_REDIS]) {
		emit(md, "## redis-server CPU per decision (us)\n\n");
		emit(md, "The server's user + system time over the timed"
		    " phase (/proc/PID/stat, 10 ms ticks) over the decisions:"
		    " what one decision costs the Redis machine, so 1e6 / this"
		    " is what one Redis core can decide per second.\n\n");
		table_head(md, "algorithm", true);
		for (r = 0; r < NALGS; r++) {
			for (ti = 0; ti < nthreads_list; ti++) {
				emit(md, "| %s | %d |", row_name(r),
				    threads_list[ti]);
				for (ki = 0; ki < nkeys_list; ki++) {
					c = &admitted[STORE_REDIS][r][ti][ki];
					if (c->done && c->redis_cpu_us >= 0)
						emit(md, " %.1f |",
						    c->redis_cpu_us);
					else
						emit(md, " - |");
				}
				emit(md, "\n");
			}
		}
		emit(md, "\n");
	}

	if (any_sqlite) {
		emit(md, "## rlgate / baseline, fixed_window (the goal:"
		    " >= 2 with 8 threads on one file)\n\n");
		table_head(md, "store", true);
		for (s = 0; s < NSTORES; s++) {
			if (!store_run[s] || s == STORE_REDIS)
				continue;
			for (ti = 0; ti < nthreads_list; ti++) {
				emit(md, "| %s | %d |", store_names[s],
				    threads_list[ti]);
				for (ki = 0; ki < nkeys_list; ki++) {
					c = &admitted[s][0][ti][ki];
					cb = &admitted[s][ROW_BASELINE][ti][ki];
					ratio = c->done && cb->done &&
					    cb->rate > 0 ? c->rate / cb->rate :
					    -1;
					if (ratio < 0)
						emit(md, " - |");
					else
						emit(md, " %.2f%s |", ratio,
						    threads_list[ti] ==
						    MAX_THREADS ? (ratio >= 2 ?
						    " (met)" : " (not met)") :
						    "");
				}
				emit(md, "\n");
			}
		}
		emit(md, "\n");
	}

	emit(md, "## Rejected: hot key, limit 1 spent, 1 thread:"
	    " decisions/s\n\n");
	emit(md, "rlg_store_open is what the server opens (backend \"%s\");"
	    " \"SQLite store\" is rlg_store_sqlite_ops alone (BEGIN"
	    " IMMEDIATE, SELECT, limiter, ROLLBACK); \"Redis store\" is"
	    " rlg_store_redis_ops alone (one script call that reads the state"
	    " and writes nothing).\n\n", backend_open);
	emit(md, "| algorithm |");
	for (s = 0; s < NSTORES; s++)
		if (store_run[s])
			emit(md, " %s, rlg_store_open | %s, %s store |",
			    store_names[s], store_names[s],
			    s == STORE_REDIS ? "Redis" : "SQLite");
	emit(md, "\n|---|");
	for (s = 0; s < NSTORES; s++)
		if (store_run[s])
			emit(md, "---:|---:|");
	emit(md, "\n");
	for (a = 0; a < NALGS; a++) {
		emit(md, "| %s |", rlg_algorithm_name(algorithms[a]));
		for (s = 0; s < NSTORES; s++) {
			if (!store_run[s])
				continue;
			emit(md, " %s | %s |", rejected[s][a][0].done ?
			    group(rejected[s][a][0].rate, b1, sizeof b1) : "-",
			    rejected[s][a][1].done ?
			    group(rejected[s][a][1].rate, b2, sizeof b2) :
			    "-");
		}
		emit(md, "\n");
	}
	emit(md, "\n");

	emit(md, "## Memory\n\n");
	if (any_sqlite) {
		emit(md, "Database bytes per client (%s store):"
		    " page_count * page_size / rlg_state rows, right after"
		    " populating (the disk and memory files are identical;"
		    " the 1-key file is the schema's few pages).\n\n",
		    store_names[ref]);
		table_head(md, "algorithm", false);
		for (r = 0; r < NROWS; r++) {
			emit(md, "| %s |", row_name(r));
			for (ki = 0; ki < nkeys_list; ki++) {
				fi = &files[ref][r][ki];
				if (!fi->done || fi->rows == 0)
					emit(md, " - |");
				else if (fi->rows == 1)
					emit(md, " (%s B in all) |", group(
					    (double)fi->bytes, b1, sizeof b1));
				else
					emit(md, " %.1f (%s B) |",
					    (double)fi->bytes /
					    (double)fi->rows, group((double)
					    fi->bytes, b1, sizeof b1));
			}
			emit(md, "\n");
		}
		if (nkeys_list > 2 && files[ref][0][2].done)
			emit(md, "\nfixed_window, 100,000 keys: %.1f bytes per"
			    " active client (%s bytes for %s rows).\n",
			    (double)files[ref][0][2].bytes /
			    (double)files[ref][0][2].rows,
			    group((double)files[ref][0][2].bytes, b1,
			    sizeof b1), group((double)files[ref][0][2].rows,
			    b2, sizeof b2));
		emit(md, "\n");
	}
	if (store_run[STORE_REDIS]) {
		emit(md, "Redis bytes per client: INFO memory used_memory"
		    " after populating over the empty server's, per client"
		    " (one hash; 1,000 keys or more). The token bucket's and"
		    " the sliding log's keys expire within 1 to 2 s, faster"
		    " than a large set is written, so Redis holds only the"
		    " clients of the last second or two: \"expire\".\n\n");
		table_head(md, "algorithm", false);
		for (r = 0; r < NALGS; r++) {
			pol = admit_policy(algorithms[r]);
			emit(md, "| %s |", row_name(r));
			for (ki = 0; ki < nkeys_list; ki++) {
				fi = &files[STORE_REDIS][r][ki];
				if (fi->done && short_lived(&pol))
					emit(md, " expire |");
				else if (!fi->done || fi->rows < 1000)
					emit(md, " - |");
				else
					emit(md, " %.0f |", (double)fi->bytes /
					    (double)fi->rows);
			}
			emit(md, "\n");
		}
		emit(md, "\n");
	}
	emit(md, "Populating took (s, ");
	first = true;
	for (s = 0; s < NSTORES; s++) {
		if (store_run[s]) {
			emit(md, "%s%s", first ? "" : " / ", store_names[s]);
			first = false;
		}
	}
	emit(md, "; SQLite: a child process, one transaction per file;"
	    " Redis: a child process, pipelined):\n\n");
	table_head(md, "algorithm", false);
	for (r = 0; r < NROWS; r++) {
		emit(md, "| %s |", row_name(r));
		for (ki = 0; ki < nkeys_list; ki++) {
			first = true;
			for (s = 0; s < NSTORES; s++) {
				if (!store_run[s])
					continue;
				if (files[s][r][ki].done)
					emit(md, "%s%.1f", first ? " " : " / ",
					    files[s][r][ki].seconds);
				else
					emit(md, "%s-", first ? " " : " / ");
				first = false;
			}
			emit(md, " |");
		}
		emit(md, "\n");
	}
	emit(md, "\nProcess VmRSS (kB) at the end of each fixed_window run,"
	    " the threads' handles still open, and the largest over all the"
	    " algorithms and thread counts of that key set. Each"
	    " measurement runs in a child process of its own, forked from"
	    " a parent that holds no connection, so each figure is that"
	    " measurement's alone: the program and its libraries (about"
	    " 3.5 MB of file pages), the threads' stacks, and per"
	    " connection its schema, statements and page cache (SQLite's"
	    " default cache_size, -2000: up to about 2 MB; a Redis"
	    " connection holds only its buffers):\n\n");
	emit(md, "| store | keys |");
	for (ti = 0; ti < nthreads_list; ti++)
		emit(md, " %d thr |", threads_list[ti]);
	emit(md, " max |\n|---|---:|");
	for (ti = 0; ti < nthreads_list; ti++)
		emit(md, "---:|");
	emit(md, "---:|\n");
	for (s = 0; s < NSTORES; s++) {
		if (!store_run[s])
			continue;
		for (ki = 0; ki < nkeys_list; ki++) {
			long max = 0;

			emit(md, "| %s | %s |", store_names[s],
			    group((double)all_keys[ki], b1, sizeof b1));
			for (ti = 0; ti < nthreads_list; ti++)
				emit(md, " %s |", admitted[s][0][ti][ki].done ?
				    group((double)admitted[s][0][ti][ki].rss_kb,
				    b2, sizeof b2) : "-");
			for (r = 0; r < NROWS; r++)
				for (ti = 0; ti < nthreads_list; ti++)
					if (admitted[s][r][ti][ki].rss_kb > max)
						max = admitted[s][r][ti][ki].
						    rss_kb;
			emit(md, " %s |\n", max > 0 ? group((double)max, b3,
			    sizeof b3) : "-");
		}
	}
}

/*
 * One row per measurement: store algorithm threads keys decisions_per_s
 * p50_us p99_us (the latency of a 1-thread run; "-" for the others).
 */
static void
write_tsv(FILE *f)
{
	size_t s, r, ti, ki, a;
	const struct cell *c;

	fprintf(f, "# store\talgorithm\tthreads\tkeys\tdecisions_per_s"
	    "\tp50_us\tp99_us\n");
	for (s = 0; s < NSTORES; s++) {
		for (r = 0; r < NROWS; r++) {
			for (ti = 0; ti < nthreads_list; ti++) {
				for (ki = 0; ki < nkeys_list; ki++) {
					c = &admitted[s][r][ti][ki];
					if (!c->done)
						continue;
					fprintf(f, "%s\t%s\t%d\t%ld\t%.0f",
					    store_names[s], r == ROW_BASELINE ?
					    "baseline" :
					    rlg_algorithm_name(algorithms[r]),
					    threads_list[ti], all_keys[ki],
					    c->rate);
					if (c->has_latency)
						fprintf(f, "\t%.2f\t%.2f\n",
						    c->p50_us, c->p99_us);
					else
						fprintf(f, "\t-\t-\n");
				}
			}
		}
		for (a = 0; a < NALGS; a++) {
			if (rejected[s][a][0].done)
				fprintf(f, "%s\t%s_rejected\t1\t1\t%.0f\t-\t-\n",
				    store_names[s],
				    rlg_algorithm_name(algorithms[a]),
				    rejected[s][a][0].rate);
			if (rejected[s][a][1].done)
				fprintf(f, "%s\t%s_rejected_%s\t1\t1"
				    "\t%.0f\t-\t-\n", store_names[s],
				    rlg_algorithm_name(algorithms[a]),
				    s == STORE_REDIS ? "redis" : "sqlite",
				    rejected[s][a][1].rate);
		}
	}
}
