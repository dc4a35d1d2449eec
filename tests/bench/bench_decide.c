/*
 * bench_decide.c: decisions per second through rlg_store_step (issue 6,
 * "Fast at the limit"), in process, against the naive responder.
 *
 * For each store (a file on a normal disk directory, and the same on
 * tmpfs, /dev/shm, called "memory"), each algorithm, 1, 2 and 8 threads
 * and 1, 1,000, 100,000 and 1,000,000 client keys, threads each with a
 * store handle of their own on one file (as rlgate's worker threads have)
 * call rlg_store_step for one policy and one key picked uniformly at
 * random (a per-thread xorshift64*) from the set, keys shaped like IPv4
 * addresses ("10.a.b.c"). The policies never reject (the admitted path:
 * every decision reads and writes one row). The rejected path: the hot
 * key, limit 1 already spent, one thread, through rlg_store_open (what the
 * server opens, with whatever wraps the SQLite store: a rejection cache
 * answers these from memory) and through the SQLite backend alone
 * (rlg_store_sqlite_ops: BEGIN IMMEDIATE, SELECT, ROLLBACK). Handles get
 * the production defaults (rlg_config_defaults) but busy_timeout_ms 5000.
 *
 * A true ":memory:" database cannot be shared by the separate connections
 * of the threads, and the store opens only files, so "memory" is a file on
 * tmpfs: no disk, but the same SQLite code, locks and system calls.
 *
 * The baseline, the naive responder: one autocommit
 *   INSERT ... ON CONFLICT (policy, client) DO UPDATE SET count = count + 1
 * per decision on the same kind of file (rlgate's schema, WAL,
 * synchronous=NORMAL, busy_timeout 5000), prepared once per connection,
 * with the same threads and keys. It counts, it does not limit.
 *
 * Each file is made by the store (its schema), then every key of the set
 * is written directly with sqlite3 in one transaction, in key order: the
 * row the store would write for the key's first admitted request (the pure
 * limiter on a fresh state, the expiry rounded up to the second as the
 * store rounds it), and for the sliding log that request's rlg_log row;
 * so the timed decisions update rows and never time the inserts (a child
 * process writes them, so its page cache never shows in VmRSS). One
 * rlg_store_step then checks that the store finds the rows (its client
 * count does not move). Each measurement opens the handles, waits on a
 * barrier, runs a warm-up, then counts the decisions completed in a fixed
 * time (CLOCK_MONOTONIC); now_ms is the wall clock (rlg_now_ms), as in
 * production. VmRSS is read while the handles are still open.
 *
 * Output: markdown tables on stdout and in --out, one TSV row per
 * measurement in --tsv (store, algorithm, threads, keys, decisions_per_s)
 * for gnuplot, progress on stderr. Exits 1 on any store error or on a
 * decision that is not the one expected, 64 on a bad command line.
 *
 * Usage: bench_decide [--seconds S] [--quick] [--out FILE] [--tsv FILE]
 *                     [--dir DIR] [--only ALG[,THREADS[,KEYS[,STORE]]]]
 * The default run (128 measurements of 3 s) takes 8 to 10 minutes;
 * --quick about 2; --only runs one cell, e.g. under perf.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
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

#include <sqlite3.h>

#include "config.h"
#include "limiter.h"
#include "store.h"
#include "util.h"

#define BUSY_TIMEOUT_MS 5000
#define MAX_THREADS 8
/* "10.255.255.255" and its NUL, with room to spare. */
#define KEY_LEN 20
/* The store rounds stored expiries up to this (store_sqlite.c). */
#define EXPIRES_GRAIN_MS 1000
/* The sliding log of the admitted runs: RLG_SLIDING_LOG_LIMIT_MAX per 1 s. */
#define LOG_WINDOW_MS 1000

enum engine {
	ENG_STORE = 0,       /* rlg_store_open + rlg_store_step */
	ENG_SQLITE,          /* rlg_store_sqlite_ops alone, no wrapper */
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
#define NSTORES 2

static const char *const store_names[NSTORES] = { "disk", "memory" };

/* One timed measurement. */
struct job {
	const char *path;
	enum engine engine;
	const struct rlg_policy *policy;
	long nkeys;
	bool expect_admit;
	int nthreads;
	double warm_s;           /* untimed, after the handles are open */
	double seconds;          /* timed */
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
};

/* What populating one file gave. */
struct fileinfo {
	bool done;
	int64_t bytes;           /* page_count * page_size after populating */
	double seconds;          /* populating took */
	long rows;               /* rlg_state rows */
	long log_rows;           /* rlg_log rows */
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
	bool sync_full;          /* --sync full: both rlgate and the baseline */
	enum rlg_group group;    /* --group */
};

static double mono(void);
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
static int store_open(enum engine e, const char *path,
    struct rlg_store **out, char *err, size_t errsize);
static int naive_open(struct naive *nv, const char *path, char *err,
    size_t errsize);
static void naive_close(struct naive *nv);
static int naive_step(struct naive *nv, const char *key, int64_t now_ms,
    const struct rlg_policy *p, char *err, size_t errsize);
static void *worker_main(void *arg);
static int run_job_apart(struct job *j, struct cell *c, char *backend,
    size_t backend_size);
static int run_job(struct job *j, struct cell *c, char *backend,
    size_t backend_size);
static int create_db(const char *path);
static int populate_apart(const char *path, const struct rlg_policy *p,
    long nkeys, struct fileinfo *fi);
static int populate(const char *path, const struct rlg_policy *p,
    long nkeys, struct fileinfo *fi);
static int insert_key(sqlite3_stmt *st_state, sqlite3_stmt *st_log,
    const struct rlg_policy *p, long i, int64_t now_ms);
static int check_populated(const char *path, const struct rlg_policy *p,
    long nkeys, bool expect_admit);
static int query_int64(sqlite3 *db, const char *sql, int64_t *v);
static void remove_db(const char *path);
static long vm_kb(const char *field);
static const char *fs_name(const char *dir, char *buf, size_t size);
static void cpu_model(char *buf, size_t size);
static int rm_entry(const char *path, const struct stat *st, int flag,
    struct FTW *ftw);
static void cleanup(void);
static void usage(FILE *f);
static int parse_only(const char *spec, struct options *o);
static int parse_options(int argc, char **argv, struct options *o);
static const char *row_name(size_t r);
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

/* Results: [store][row][threads index][keys index]. */
static struct cell admitted[NSTORES][NROWS][NTHREADS_MAX][NKEYS_MAX];
/* The rejected path, 1 thread, hot key: [store][algorithm][engine]. */
static struct cell rejected[NSTORES][NALGS][2];
static struct fileinfo files[NSTORES][NROWS][NKEYS_MAX];

static double
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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
	struct rlg_policy p = { .name = policy_name, .algorithm = a,
	    .limit = RLG_LIMIT_MAX, .window_ms = RLG_WINDOW_S_MAX * 1000,
	    .burst = 0, .key = RLG_KEY_IP };

	if (a == RLG_ALG_SLIDING_LOG) {
		p.limit = RLG_SLIDING_LOG_LIMIT_MAX;
		p.window_ms = LOG_WINDOW_MS;
	}
	if (a == RLG_ALG_TOKEN_BUCKET)
		p.burst = p.limit;
	return p;
}

/* Limit 1 per year: one admitted request (populated) and then only 429s. */
static struct rlg_policy
reject_policy(enum rlg_algorithm a)
{
	struct rlg_policy p = { .name = policy_name, .algorithm = a,
	    .limit = 1, .window_ms = RLG_WINDOW_S_MAX * 1000, .burst = 0,
	    .key = RLG_KEY_IP };

	if (a == RLG_ALG_TOKEN_BUCKET)
		p.burst = 1;
	return p;
}

/*
 * A store handle on path with the production defaults (rlg_config_defaults)
 * but busy_timeout_ms = BUSY_TIMEOUT_MS. ENG_STORE: rlg_store_open, what
 * the server opens; ENG_SQLITE: the SQLite backend alone. 0, or -1 with
 * the store's message in err (the handle is closed).
 */
static int
store_open(enum engine e, const char *path, struct rlg_store **out,
    char *err, size_t errsize)
{
	struct rlg_store_config *cfg = &defaults->store;
	int rc;

	/* Only the main thread changes the path, between runs. */
	if (strcmp(cfg->path, path) != 0) {
		free(cfg->path);
		cfg->path = rlg_xstrdup(path);
	}
	if (e == ENG_SQLITE)
		rc = rlg_store_sqlite_ops.open(cfg, out);
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
	int64_t start = now_ms - now_ms % p->window_ms;
	int rc;

	sqlite3_bind_text(nv->st, 1, p->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(nv->st, 2, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(nv->st, 3, start);
	sqlite3_bind_int64(nv->st, 4, start + p->window_ms);
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
	struct rlg_store_item item = { j->policy, NULL, false };
	struct rlg_decision d = { 0 };
	uint64_t x = 0x9E3779B97F4A7C15ULL * (uint64_t)(w->id + 1) ^
	    (uint64_t)j->nkeys;
	char key[KEY_LEN];
	double t;
	int rc;

	if (j->engine == ENG_BASELINE)
		w->failed = naive_open(&nv, j->path, w->errmsg,
		    sizeof w->errmsg) != 0;
	else
		w->failed = store_open(j->engine, j->path, &store,
		    w->errmsg, sizeof w->errmsg) != 0;
	if (store != NULL)
		xsnprintf(w->backend, sizeof w->backend, "%s",
		    store->ops->name);
	item.client = key;
	pthread_barrier_wait(&j->barrier);      /* ready */
	pthread_barrier_wait(&j->barrier);      /* go: warm_end, end set */
	while (!w->failed) {
		key_format(key, rng_pick(&x, j->nkeys));
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
		t = mono();
		if (t >= j->end)
			break;
		if (t >= j->warm_end) {
			w->ops++;
			if (j->engine != ENG_BASELINE &&
			    d.admitted != j->expect_admit)
				w->wrong++;
		}
	}
	pthread_barrier_wait(&j->barrier);      /* stop */
	pthread_barrier_wait(&j->barrier);      /* release */
	rlg_store_close(store);
	naive_close(&nv);
	return NULL;
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
	struct {
		struct cell c;
		char backend[32];
	} got;
	int fd[2], status = 0;
	ssize_t n;
	pid_t pid;

	memset(&got, 0, sizeof got);
	fflush(NULL);
	if (pipe(fd) != 0 || (pid = fork()) < 0) {
		fprintf(stderr, "bench_decide: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		close(fd[0]);
		status = run_job(j, &got.c, got.backend,
		    sizeof got.backend) == 0 ? 0 : 1;
		if (write(fd[1], &got, sizeof got) != (ssize_t)sizeof got)
			status = 1;
		fflush(NULL);
		_exit(status);
	}
	close(fd[1]);
	while ((n = read(fd[0], &got, sizeof got)) < 0 && errno == EINTR)
		;
	close(fd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof got || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
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
	long ops = 0, wrong = 0;
	int i, failed = 0;

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
	j->warm_end = mono() + j->warm_s;
	j->end = j->warm_end + j->seconds;
	pthread_barrier_wait(&j->barrier);      /* go */
	pthread_barrier_wait(&j->barrier);      /* stop */
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
	c->done = !failed;
	return failed ? -1 : 0;
}

/* A new file with rlgate's schema, made by the store itself. 0 or -1. */
static int
create_db(const char *path)
{
	struct rlg_store *s = NULL;
	char err[600];

	remove_db(path);
	if (store_open(ENG_SQLITE, path, &s, err, sizeof err) != 0) {
		fprintf(stderr, "bench_decide: %s\n", err);
		return -1;
	}
	rlg_store_close(s);
	return 0;
}

/*
 * populate() in a child process, so that its page cache (and the heap it
 * leaves behind) never shows in this process's VmRSS. fi gets the
 * child's figures and the time. 0 or -1.
 */
static int
populate_apart(const char *path, const struct rlg_policy *p, long nkeys,
    struct fileinfo *fi)
{
	struct fileinfo got = { 0 };
	double t0 = mono();
	int fd[2], status = 0;
	ssize_t n = 0;
	pid_t pid;

	fflush(NULL);
	if (pipe(fd) != 0 || (pid = fork()) < 0) {
		fprintf(stderr, "bench_decide: populate: %s\n",
		    strerror(errno));
		return -1;
	}
	if (pid == 0) {
		close(fd[0]);
		status = populate(path, p, nkeys, &got) == 0 ? 0 : 1;
		if (write(fd[1], &got, sizeof got) != (ssize_t)sizeof got)
			status = 1;
		_exit(status);
	}
	close(fd[1]);
	while ((n = read(fd[0], &got, sizeof got)) < 0 && errno == EINTR)
		;
	close(fd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof got || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || !got.done)
		return -1;
	*fi = got;
	fi->seconds = mono() - t0;
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
	struct rlg_state zero = { 0 }, out;
	struct rlg_decision d;
	char key[KEY_LEN];
	bool append = false;
	int rc;

	key_format(key, i);
	if (p->algorithm == RLG_ALG_SLIDING_LOG)
		rc = rlg_limiter_sliding_log(p, NULL, 0, now_ms, &append,
		    &out, &d);
	else
		rc = rlg_limiter_step(p, &zero, now_ms, &out, &d);
	if (rc != RLG_OK || !d.admitted) {
		fprintf(stderr, "bench_decide: the limiter refused the first"
		    " request of %s\n", key);
		return -1;
	}
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

/*
 * One rlg_store_step on the last key: the decision must be the expected
 * one, and the policy's client count (the schema's triggers keep it)
 * must still be nkeys: the store found the populated row. 0 or -1.
 */
static int
check_populated(const char *path, const struct rlg_policy *p, long nkeys,
    bool expect_admit)
{
	struct rlg_store *s = NULL;
	struct rlg_store_item item = { p, NULL, false };
	struct rlg_decision d;
	sqlite3 *db = NULL;
	int64_t clients = -1;
	char key[KEY_LEN], err[600];
	int rc;

	key_format(key, nkeys - 1);
	item.client = key;
	if (store_open(ENG_SQLITE, path, &s, err, sizeof err) != 0) {
		fprintf(stderr, "bench_decide: %s\n", err);
		return -1;
	}
	rc = rlg_store_step(s, &item, 1, rlg_now_ms(), &d);
	if (rc != RLG_OK)
		fprintf(stderr, "bench_decide: %s: rlg_store_step: %s\n",
		    path, rlg_store_errmsg(s));
	rlg_store_close(s);
	if (rc != RLG_OK)
		return -1;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK || query_int64(db, "SELECT clients FROM rlg_clients"
	    " WHERE policy = 'bench'", &clients) != 0)
		clients = -1;
	sqlite3_close(db);
	if (d.admitted != expect_admit || clients != nkeys) {
		fprintf(stderr, "bench_decide: %s: populated rows not as the"
		    " store writes them (decision %s, %lld clients for %ld"
		    " keys)\n", path, d.admitted ? "admitted" : "rejected",
		    (long long)clients, nkeys);
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

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	(void)remove(path);
	return 0;
}

/* Removes the directories this run made, whatever it left in them. */
static void
cleanup(void)
{
	int s;

	for (s = 0; s < NSTORES; s++) {
		if (store_dir_made[s])
			(void)nftw(store_dir[s], rm_entry, 16,
			    FTW_DEPTH | FTW_PHYS);
		store_dir_made[s] = false;
	}
}

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: bench_decide [--seconds S] [--quick] [--out FILE]"
	    " [--tsv FILE] [--dir DIR]\n"
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
	    "  --only ALG[,THREADS[,KEYS[,STORE]]]  one cell of the matrix,"
	    " e.g. to profile:\n"
	    "               fixed_window,1,1,disk (ALG may be baseline; no"
	    " rejected runs)\n");
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
		ok = o->only_store >= 0;
	}
	if (!ok)
		fprintf(stderr, "bench_decide: --only: ALG[,THREADS[,KEYS["
		    ",STORE]]] with ALG an algorithm or baseline, THREADS 1, 2"
		    " or 8, KEYS 1, 1000, 100000 or 1000000, STORE disk or"
		    " memory (got \"%s\")\n", spec);
	return ok ? 0 : -1;
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
		{ "sync", required_argument, NULL, 'S' },
		{ "group", required_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool seconds_set = false;
	char *end;
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
	char path[PATH_MAX + 64], buf[64], backend[32];
	double t_begin = mono();
	FILE *md, *tsv;
	size_t s, r, ti, ki;
	int failed = 0, e;

	if (parse_options(argc, argv, &o) != 0)
		return RLG_EXIT_USAGE;
	/* --quick trims the matrix; --only picks from the whole of it. */
	if (o.only_row >= 0)
		o.quick = false;
	threads_list = o.quick ? quick_threads : all_threads;
	nthreads_list = o.quick ? sizeof quick_threads /
	    sizeof quick_threads[0] : NTHREADS_MAX;
	nkeys_list = o.quick ? 3 : NKEYS_MAX;
	defaults = rlg_config_defaults();
	defaults->store.synchronous = o.sync_full ? RLG_SYNC_FULL :
	    RLG_SYNC_NORMAL;
	defaults->store.group_commit = o.group;
	naive_sync_full = o.sync_full;
	defaults->store.busy_timeout_ms = BUSY_TIMEOUT_MS;

	xsnprintf(store_dir[0], sizeof store_dir[0],
	    "%s/rlg-bench-decide-XXXXXX", o.dir);
	xsnprintf(store_dir[1], sizeof store_dir[1],
	    "/dev/shm/rlg-bench-decide-XXXXXX");
	atexit(cleanup);
	for (s = 0; s < NSTORES; s++) {
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
		if (o.only_store >= 0 && (int)s != o.only_store)
			continue;
		for (ki = 0; ki < nkeys_list && !failed; ki++) {
			long nkeys = all_keys[ki];

			if (o.only_keys > 0 && nkeys != o.only_keys)
				continue;
			for (r = 0; r < NROWS && !failed; r++) {
				if (o.only_row >= 0 && (int)r != o.only_row)
					continue;
				pol = admit_policy(r == ROW_BASELINE ?
				    RLG_ALG_FIXED_WINDOW : algorithms[r]);
				xsnprintf(path, sizeof path, "%s/%s-%ld.db",
				    store_dir[s], r == ROW_BASELINE ?
				    "baseline" :
				    rlg_algorithm_name(pol.algorithm), nkeys);
				if (create_db(path) != 0 ||
				    populate_apart(path, &pol, nkeys,
				    &files[s][r][ki]) != 0 ||
				    check_populated(path, &pol, nkeys,
				    true) != 0) {
					failed = 1;
					break;
				}
				fprintf(stderr, "%-6s %-15s %7ld keys:"
				    " populated in %.1f s\n", store_names[s],
				    r == ROW_BASELINE ? "baseline" :
				    rlg_algorithm_name(pol.algorithm), nkeys,
				    files[s][r][ki].seconds);
				for (ti = 0; ti < nthreads_list; ti++) {
					if (o.only_threads > 0 &&
					    threads_list[ti] != o.only_threads)
						continue;
					memset(&j, 0, sizeof j);
					j.path = path;
					j.engine = r == ROW_BASELINE ?
					    ENG_BASELINE : ENG_STORE;
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
					    " VmRSS %ld kB\n", store_names[s],
					    r == ROW_BASELINE ? "baseline" :
					    rlg_algorithm_name(pol.algorithm),
					    nkeys, threads_list[ti],
					    group(admitted[s][r][ti][ki].rate,
					    buf, sizeof buf),
					    admitted[s][r][ti][ki].rss_kb);
				}
				remove_db(path);
			}
		}
		/* The rejected path: hot key, limit 1 spent, 1 thread. */
		for (r = 0; r < NALGS && !failed && o.only_row < 0; r++) {
			pol = reject_policy(algorithms[r]);
			for (e = 0; e < 2 && !failed; e++) {
				xsnprintf(path, sizeof path,
				    "%s/rejected-%s.db", store_dir[s],
				    rlg_algorithm_name(pol.algorithm));
				if (create_db(path) != 0 ||
				    populate_apart(path, &pol, 1,
				    &(struct fileinfo){ 0 }) != 0 ||
				    check_populated(path, &pol, 1, false) !=
				    0) {
					failed = 1;
					break;
				}
				memset(&j, 0, sizeof j);
				j.path = path;
				j.engine = e == 0 ? ENG_STORE : ENG_SQLITE;
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
				    rlg_algorithm_name(pol.algorithm),
				    e == 0 ? "rlg_store_open" : "SQLite store",
				    group(rejected[s][r][e].rate, buf,
				    sizeof buf));
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
		return 1;
	}
	report(md, &o, mono() - t_begin);
	write_tsv(tsv);
	if (fclose(md) != 0 || fclose(tsv) != 0) {
		fprintf(stderr, "bench_decide: writing %s or %s: %s\n", o.out,
		    o.tsv, strerror(errno));
		rlg_config_free(defaults);
		return 1;
	}
	fprintf(stderr, "bench_decide: wrote %s and %s\n", o.out, o.tsv);
	rlg_config_free(defaults);
	return 0;
}

/* A row name of the tables. */
static const char *
row_name(size_t r)
{
	return r == ROW_BASELINE ? "baseline (naive UPSERT)" :
	    rlg_algorithm_name(algorithms[r]);
}

static void
report(FILE *md, const struct options *o, double elapsed)
{
	char cpu[256], fs[2][32], b1[32], b2[32], b3[32];
	struct utsname un;
	double load[3] = { -1, -1, -1 }, ratio;
	size_t s, r, ti, ki, a;
	const struct fileinfo *fi;
	const struct cell *c, *cb;

	cpu_model(cpu, sizeof cpu);
	if (uname(&un) != 0)
		xsnprintf(un.release, sizeof un.release, "?");
	(void)getloadavg(load, 3);
	for (s = 0; s < NSTORES; s++)
		fs_name(store_dir[s], fs[s], sizeof fs[s]);

	emit(md, "# bench_decide: decisions per second through"
	    " rlg_store_step\n\n");
	emit(md, "machine: %ld CPUs (nproc), %s, Linux %s, SQLite %s;"
	    " load average at the end %.2f %.2f %.2f\n\n",
	    sysconf(_SC_NPROCESSORS_ONLN), cpu, un.release,
	    sqlite3_libversion(), load[0], load[1], load[2]);
	emit(md, "parameters: %.3g s timed per measurement after a %.3g s"
	    " warm-up%s; threads:", o->seconds, o->warm_s,
	    o->quick ? " (--quick)" : "");
	for (ti = 0; ti < nthreads_list; ti++)
		emit(md, " %d", threads_list[ti]);
	emit(md, "; keys:");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, " %s", group((double)all_keys[ki], b1, sizeof b1));
	emit(md, "; whole run %.0f s\n\n", elapsed);
	emit(md, "stores: disk = files in %s (%s), memory = files in %s"
	    " (%s). WAL, synchronous=NORMAL, busy_timeout %d ms, one"
	    " connection per thread. A true :memory: database cannot be"
	    " shared by the threads' separate connections and the store"
	    " opens only files, so \"memory\" is the same file on tmpfs.\n\n",
	    store_dir[0], fs[0], store_dir[1], fs[1], BUSY_TIMEOUT_MS);
	emit(md, "rlgate: rlg_store_open (backend \"%s\") with the"
	    " production defaults (rlg_config_defaults: max_clients %lld,"
	    " ...), busy_timeout_ms %d; one policy per step; now_ms ="
	    " rlg_now_ms(). Policies: 1e9 requests per 366 days (token"
	    " bucket burst 1e9), never reached; sliding_log %lld per %d ms"
	    " (its largest limit: one row per admitted request, so a key"
	    " holds at most a second's worth of rows; the hot key holds as"
	    " many rows as it gets decisions per second, and each decision"
	    " reads them all).\n\n", backend_open,
	    (long long)defaults->store.max_clients, BUSY_TIMEOUT_MS,
	    (long long)RLG_SLIDING_LOG_LIMIT_MAX, LOG_WINDOW_MS);
	emit(md, "baseline: one autocommit `INSERT INTO rlg_state (policy,"
	    " client, window_start_ms, count, expires_ms) VALUES (...) ON"
	    " CONFLICT (policy, client) DO UPDATE SET count = count + 1`"
	    " per decision, prepared once per connection, on a file of the"
	    " same schema and settings.\n\n");
	emit(md, "keys: \"10.a.b.c\", key i = 10.(i>>16).(i>>8&255).(i&255),"
	    " each decision picks one uniformly at random (xorshift64* per"
	    " thread). Every file is populated before timing: all keys"
	    " written with sqlite3 in one transaction, in key order, each"
	    " as the store writes its first admitted request (the pure"
	    " limiter on a fresh state; the sliding log with its rlg_log"
	    " row); one rlg_store_step then checks that the store finds the"
	    " rows. Each algorithm and the baseline get a file of their"
	    " own, used by the 1-, 2- and 8-thread runs in turn.\n\n");

	for (s = 0; s < NSTORES; s++) {
		emit(md, "## Admitted, %s store: decisions/s\n\n",
		    store_names[s]);
		emit(md, "| algorithm | threads |");
		for (ki = 0; ki < nkeys_list; ki++)
			emit(md, " %s key%s |", group((double)all_keys[ki], b1,
			    sizeof b1), all_keys[ki] == 1 ? "" : "s");
		emit(md, "\n|---|---:|");
		for (ki = 0; ki < nkeys_list; ki++)
			emit(md, "---:|");
		emit(md, "\n");
		for (r = 0; r < NROWS; r++) {
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

	emit(md, "## rlgate / baseline, fixed_window (issue 6 target: >= 2"
	    " with 8 threads on one file)\n\n");
	emit(md, "| store | threads |");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, " %s key%s |", group((double)all_keys[ki], b1,
		    sizeof b1), all_keys[ki] == 1 ? "" : "s");
	emit(md, "\n|---|---:|");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, "---:|");
	emit(md, "\n");
	for (s = 0; s < NSTORES; s++) {
		for (ti = 0; ti < nthreads_list; ti++) {
			emit(md, "| %s | %d |", store_names[s],
			    threads_list[ti]);
			for (ki = 0; ki < nkeys_list; ki++) {
				c = &admitted[s][0][ti][ki];
				cb = &admitted[s][ROW_BASELINE][ti][ki];
				ratio = c->done && cb->done && cb->rate > 0 ?
				    c->rate / cb->rate : -1;
				if (ratio < 0)
					emit(md, " - |");
				else
					emit(md, " %.2f%s |", ratio,
					    threads_list[ti] == MAX_THREADS ?
					    (ratio >= 2 ? " (met)" :
					    " (not met)") : "");
			}
			emit(md, "\n");
		}
	}
	emit(md, "\n");

	emit(md, "## Rejected: hot key, limit 1 spent, 1 thread:"
	    " decisions/s\n\n");
	emit(md, "rlg_store_open is what the server opens (backend \"%s\");"
	    " \"SQLite store\" is rlg_store_sqlite_ops alone (BEGIN"
	    " IMMEDIATE, SELECT, limiter, ROLLBACK).\n\n", backend_open);
	emit(md, "| algorithm |");
	for (s = 0; s < NSTORES; s++)
		emit(md, " %s, rlg_store_open | %s, SQLite store |",
		    store_names[s], store_names[s]);
	emit(md, "\n|---|");
	for (s = 0; s < NSTORES; s++)
		emit(md, "---:|---:|");
	emit(md, "\n");
	for (a = 0; a < NALGS; a++) {
		emit(md, "| %s |", rlg_algorithm_name(algorithms[a]));
		for (s = 0; s < NSTORES; s++)
			emit(md, " %s | %s |", rejected[s][a][0].done ?
			    group(rejected[s][a][0].rate, b1, sizeof b1) : "-",
			    rejected[s][a][1].done ?
			    group(rejected[s][a][1].rate, b2, sizeof b2) :
			    "-");
		emit(md, "\n");
	}
	emit(md, "\n");

	emit(md, "## Memory\n\n");
	emit(md, "Database bytes per client: page_count * page_size /"
	    " rlg_state rows, right after populating (the disk and memory"
	    " files are identical; the 1-key file is the schema's few"
	    " pages).\n\n");
	emit(md, "| algorithm |");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, " %s key%s |", group((double)all_keys[ki], b1,
		    sizeof b1), all_keys[ki] == 1 ? "" : "s");
	emit(md, "\n|---|");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, "---:|");
	emit(md, "\n");
	for (r = 0; r < NROWS; r++) {
		emit(md, "| %s |", row_name(r));
		for (ki = 0; ki < nkeys_list; ki++) {
			fi = &files[0][r][ki];
			if (!fi->done || fi->rows == 0)
				emit(md, " - |");
			else if (fi->rows == 1)
				emit(md, " (%s B in all) |", group((double)
				    fi->bytes, b1, sizeof b1));
			else
				emit(md, " %.1f (%s B) |",
				    (double)fi->bytes / (double)fi->rows,
				    group((double)fi->bytes, b1, sizeof b1));
		}
		emit(md, "\n");
	}
	if (nkeys_list > 2 && files[0][0][2].done)
		emit(md, "\nfixed_window, 100,000 keys: %.1f bytes per active"
		    " client (%s bytes for %s rows).\n",
		    (double)files[0][0][2].bytes / (double)files[0][0][2].rows,
		    group((double)files[0][0][2].bytes, b1, sizeof b1),
		    group((double)files[0][0][2].rows, b2, sizeof b2));
	emit(md, "\nPopulating took (s, disk / memory; child process, one"
	    " transaction per file):\n\n| algorithm |");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, " %s key%s |", group((double)all_keys[ki], b1,
		    sizeof b1), all_keys[ki] == 1 ? "" : "s");
	emit(md, "\n|---|");
	for (ki = 0; ki < nkeys_list; ki++)
		emit(md, "---:|");
	emit(md, "\n");
	for (r = 0; r < NROWS; r++) {
		emit(md, "| %s |", row_name(r));
		for (ki = 0; ki < nkeys_list; ki++) {
			if (files[0][r][ki].done && files[1][r][ki].done)
				emit(md, " %.1f / %.1f |",
				    files[0][r][ki].seconds,
				    files[1][r][ki].seconds);
			else
				emit(md, " - |");
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
	    " default cache_size, -2000: up to about 2 MB):\n\n");
	emit(md, "| store | keys |");
	for (ti = 0; ti < nthreads_list; ti++)
		emit(md, " %d thr |", threads_list[ti]);
	emit(md, " max |\n|---|---:|");
	for (ti = 0; ti < nthreads_list; ti++)
		emit(md, "---:|");
	emit(md, "---:|\n");
	for (s = 0; s < NSTORES; s++) {
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

/* One row per measurement: store algorithm threads keys decisions_per_s. */
static void
write_tsv(FILE *f)
{
	size_t s, r, ti, ki, a;
	const struct cell *c;

	fprintf(f, "# store\talgorithm\tthreads\tkeys\tdecisions_per_s\n");
	for (s = 0; s < NSTORES; s++) {
		for (r = 0; r < NROWS; r++) {
			for (ti = 0; ti < nthreads_list; ti++) {
				for (ki = 0; ki < nkeys_list; ki++) {
					c = &admitted[s][r][ti][ki];
					if (!c->done)
						continue;
					fprintf(f, "%s\t%s\t%d\t%ld\t%.0f\n",
					    store_names[s], r == ROW_BASELINE ?
					    "baseline" :
					    rlg_algorithm_name(algorithms[r]),
					    threads_list[ti], all_keys[ki],
					    c->rate);
				}
			}
		}
		for (a = 0; a < NALGS; a++) {
			if (rejected[s][a][0].done)
				fprintf(f, "%s\t%s_rejected\t1\t1\t%.0f\n",
				    store_names[s],
				    rlg_algorithm_name(algorithms[a]),
				    rejected[s][a][0].rate);
			if (rejected[s][a][1].done)
				fprintf(f, "%s\t%s_rejected_sqlite\t1\t1"
				    "\t%.0f\n", store_names[s],
				    rlg_algorithm_name(algorithms[a]),
				    rejected[s][a][1].rate);
		}
	}
}
