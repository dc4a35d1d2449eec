/*
 * check_store.c: the SQLite store on real files in a temporary directory.
 *
 * "core": the schema and file mode of a new file, exact counting in one
 * window at fixed times, new windows, rejections that write nothing, one
 * row per (policy, client), the operator views, pruning. "algorithms":
 * each algorithm through the store decides exactly as the pure limiter
 * does on the same requests (a simulation in memory), with hand-counted
 * admissions per burst; several algorithms on one request, all or
 * nothing; the sliding log's rows bounded by the limit as the window
 * slides, pruned with their state row, reset by hand. "schema": a file of
 * schema version 1 migrated in place, rows kept, also by several
 * processes at once. "concurrency": threads and forked processes, each
 * with its own handle, on one file: exactly limit admitted (sliding_log:
 * limit, token_bucket: burst), never more or fewer. "errors": a missing
 * directory, a file that is not a database, a file deleted or replaced
 * while open, a lock held past busy_timeout_ms, a newer schema; each one
 * reported with a clear message and healed by the same handle once the
 * fault is gone. Times are fixed; the only waits are the lock timeouts.
 *
 * The suite "store_redis" runs the tests of what a step decides and writes
 * (every algorithm, several policies per request, advisory items, the same
 * key twice, rejections that write nothing, the rejection cache, the
 * concurrency of threads and processes) again through the same interface
 * against a redis-server the suite starts (tests/redis_fixture.h), with
 * [store] backend = redis and clock = local: the same fixed times, the same
 * expected decisions, the stored state read back with HGET and LRANGE in
 * place of SQL (the helpers below pick by the backend of the test case).
 * Each path a test names is one Redis database (SELECT), flushed before
 * each test. The SQLite-only tests (files, schema, views, max_clients,
 * pruning) stay in "store". Its "redis" case holds the Redis-only tests:
 * Redis down at open and killed mid-run (RLG_ESTORE naming the server,
 * then recovery), the reconnect backoff (no traffic while it runs), a
 * timeout, NOSCRIPT after SCRIPT FLUSH, clock = redis, AUTH (password, ACL
 * user, a wrong one), a unix socket, key expiry, strict replies (a fake
 * server), hash-tag-breaking client keys; servers of their own are
 * started on 127.0.0.1 and stopped by pid.
 *
 * The suite "store_redis_cluster" runs the same shared tests against a
 * three-master Redis Cluster the suite creates (redis_fixture.h), with
 * [store] backend = redis_cluster: every path is database 0 (the only
 * one), every master is flushed before each test, the helpers find a key
 * on its master (following MOVED) and scan every master. Its "cluster"
 * case: clients spread over the masters on the slots Redis computes, with
 * no redirection; a slot migrated between requests (ASK, then MOVED) and
 * under load from four threads, counts exact; NOSCRIPT on every master;
 * two policies keyed by clients in two slots, checked then committed (no
 * quota spent by a rejected request, round trips counted); the seeds
 * (dead, one dead, not a cluster); an ACL user; the bounds on MOVED, ASK,
 * TRYAGAIN and CLUSTERDOWN against a fake node. "cluster_faults": a
 * master stopped (RLG_ESTORE for its clients, answers for the others,
 * CLUSTERDOWN once the cluster needs full coverage) and started again.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <hiredis/hiredis.h>
#include <sqlite3.h>

#include "check_rlgate.h"
#include "fixture.h"
#include "redis_fixture.h"
#include "store.h"
#include "util.h"

/* 2023-11-14 22:13:00 UTC: a multiple of 60 s. */
#define WIN0 ((int64_t)1699999980000)
/* One second into that window. */
#define T1 (WIN0 + 1000)

#define NWORKERS 4
#define NCLIENTS 40

/* What a concurrency worker sends. */
enum {
	MODE_ONE = 0,                  /* one client, fixed window */
	MODE_MANY,                     /* NCLIENTS clients, fixed window */
	MODE_ALGS,                     /* sliding_log, token_bucket, both */
};

struct worker {
	const char *path;
	int many;                      /* MODE_* */
	int id;
	int64_t cache;                 /* rejection cache entries (0: none) */
	pthread_barrier_t *barrier;    /* threads: start together */
	long admitted;
	long errors;
	long per_client[NCLIENTS];     /* many: admitted per client */
	long admitted_log;             /* algs: sliding_log alone */
	long admitted_bucket;          /* algs: token_bucket alone */
	long admitted_both;            /* algs: both on one request */
	char errmsg[256];
};

/* A pure-limiter simulation of one (policy, client), as the store keeps it. */
#define SIM_LOG_MAX 64
struct sim {
	const struct rlg_policy *p;
	struct rlg_state st;           /* the row: written when admitted */
	int64_t written_ms;            /* now of the last admission */
	int64_t log[SIM_LOG_MAX];      /* sliding_log: the rows, ascending */
	size_t n;
};

/* Redis: how long a test waits for a store to heal, and polls. */
#define HEAL_MS 15000
#define POLL_MS 20

static void base_setup(void);
static void base_teardown(void);
static void redis_base_setup(void);
static void redis_base_teardown(void);
static void cluster_base_setup(void);
static void cluster_base_teardown(void);
static int key_servers(const char *path, int *ports, int *db);
static void case_setup(void);
static int redis_db_of(const char *path);
static void store_cfg(struct rlg_store_config *cfg, const char *path,
    int busy_ms);
static void store_cfg_url(struct rlg_store_config *cfg, const char *url);
static void store_cfg_free(struct rlg_store_config *cfg);
static redisReply *rcmd(int port, const char *password, int db,
    const char *fmt, ...);
static redisReply *rdb(const char *path, const char *fmt, ...);
static void redis_key(char *buf, size_t size, const char *policy_name,
    const char *client, bool log);
static int64_t state_field(const char *path, const char *policy_name,
    const char *client, const char *field);
static int64_t count_of(const char *path, const char *policy_name,
    const char *client);
static int64_t nstates(const char *path);
static int64_t nlog(const char *path, const char *policy_name,
    const char *client);
static void reset_client(const char *path, const char *client);
static void probe_start(const char *path);
static bool probe_changed(const char *path);
static int64_t redis_dirty(const char *path);
static int rm_entry(const char *path, const struct stat *st, int flag,
    struct FTW *ftw);
static char *path_in(const char *name);
static struct rlg_policy policy(int64_t limit, int64_t window_s);
static struct rlg_store *open_ok(const char *path, int busy_ms);
static int hit(struct rlg_store *s, const struct rlg_policy *p,
    const char *client, int64_t now, struct rlg_decision *d);
static int64_t sql_int(const char *path, const char *sql);
static void sql_text(const char *path, const char *sql, char *buf,
    size_t size);
static void sql_exec(const char *path, const char *sql);
static void write_garbage(const char *path);
static int file_mode(const char *path);
static int sent_to(int client);
static void run_worker(struct worker *w);
static void *thread_main(void *arg);
static void run_threads(const char *path, int many, int64_t cache,
    struct worker *w);
static void run_processes(const char *path, int many, int64_t cache,
    struct worker *w);
static void check_totals(const char *path, int many, struct worker *w);
static void run_algorithms(struct rlg_store *s, struct worker *w);
static void check_algorithms(const char *path, struct worker *w);
static struct rlg_policy alg_policy(char *name, enum rlg_algorithm a,
    int64_t limit, int64_t window_s, int64_t burst);
static void sim_step(struct sim *m, int64_t now, struct rlg_decision *d);
static void check_same(const struct rlg_decision *got,
    const struct rlg_decision *want, const char *what, long i);
static void check_row(const char *path, const struct sim *m,
    const char *client);
static void state_dump(const char *path, const char *policy_name,
    const char *client, char *buf, size_t size);
static void log_dump(const char *path, const char *policy_name,
    const char *client, char *buf, size_t size);
static void sim_log_dump(const struct sim *m, char *buf, size_t size);
static void make_v1(const char *path);

/* The per-run directory (parent) and the per-test one inside it (child). */
static char base_dir[64];
static char case_dir[128];
static int case_seq;

/*
 * The backend of the running test case: set by its unchecked fixture,
 * which runs before the case's tests (and their forks). Redis: the
 * suite's server, and the paths the test named, one database each.
 */
static enum rlg_store_backend backend = RLG_BACKEND_SQLITE;
static struct rlg_test_redis redis_srv;
static bool redis_up;
/*
 * Suite store_redis_cluster: the Redis backend against the suite's
 * three-master cluster; every path is database 0 (a cluster has no
 * other), every master is flushed before each test.
 */
static bool cluster_mode;
static struct rlg_test_redis_cluster cluster_srv;
#define REDIS_DBS 16
static char redis_paths[REDIS_DBS][256];
static int redis_npaths;

static char name_default[] = "default";
static char name_burst[] = "burst";
static char name_hour[] = "hour";
static char name_alg[] = "alg";
static char name_sl[] = "sl";
static char name_tb[] = "tb";
static char name_sw[] = "sw";
static char name_ten[] = "ten";

/*
 * db/schema.sql of the first rlgate, version 1, verbatim (git show
 * 5581c60:db/schema.sql): what a file to migrate was created with.
 */
static const char schema_v1[] =
    "-- db/schema.sql: the rlgate database, schema version 1.\n"
    "--\n"
    "-- rlgate compiles this file in and applies it by itself to a"
    " database whose\n"
    "-- PRAGMA user_version is 0 (a new, empty file), in one BEGIN IMMEDIATE\n"
    "-- transaction, after checking user_version again under that lock"
    " (several\n"
    "-- processes may create the file together). The last statement sets\n"
    "-- user_version to 1; a later rlgate raises it when it changes"
    " the schema,\n"
    "-- and refuses a file whose version is newer than it knows.\n"
    "--\n"
    "-- Every statement is IF NOT EXISTS, so feeding this file to an existing\n"
    "-- database by hand (sqlite3 rlgate.db < schema.sql) changes nothing.\n"
    "--\n"
    "-- Times are integers: milliseconds since 1970-01-01 00:00:00"
    " UTC. The views\n"
    "-- below turn them into readable UTC times for the sqlite3 shell; see\n"
    "-- db/queries.sql for ready queries.\n"
    "\n"
    "-- The limiter state: one row per (policy, client), never one per"
    " window.\n"
    "-- A new window overwrites the row, so the file grows with the number of\n"
    "-- active clients, not with time; rows whose expires_ms has"
    " passed are as\n"
    "-- good as absent and rlgate prunes them in batches.\n"
    "CREATE TABLE IF NOT EXISTS rlg_state (\n"
    "	policy          TEXT    NOT NULL,  -- [policy NAME] of the"
    " config\n"
    "	client          TEXT    NOT NULL,  -- client key: IP, prefix,"
    " key hash\n"
    "	window_start_ms INTEGER NOT NULL,  -- start of the counted"
    " window\n"
    "	count           INTEGER NOT NULL,  -- requests admitted in that"
    " window\n"
    "	expires_ms      INTEGER NOT NULL,  -- from this instant on:"
    " prunable\n"
    "	PRIMARY KEY (policy, client)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "-- Pruning finds expired rows through this index, without a full scan.\n"
    "CREATE INDEX IF NOT EXISTS rlg_state_expires ON rlg_state (expires_ms);\n"
    "\n"
    "-- One row per (policy, client) with readable times (UTC):\n"
    "--   window_start  start of the counted window\n"
    "--   resets_at     when the state expires: for the fixed window,"
    " the end of\n"
    "--                 the window, when the count starts again from 0\n"
    "--   reset_in_s    whole seconds from now until then (0 once passed)\n"
    "--   expired       1 when the row is stale (its count no longer applies)\n"
    "-- Example: SELECT * FROM clients WHERE NOT expired ORDER BY count DESC;\n"
    "CREATE VIEW IF NOT EXISTS clients AS\n"
    "WITH now (ms) AS (\n"
    "	SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS"
    " INTEGER)\n"
    ")\n"
    "SELECT\n"
    "	policy,\n"
    "	client,\n"
    "	count,\n"
    "	datetime(window_start_ms / 1000, 'unixepoch') AS window_start,\n"
    "	datetime(expires_ms / 1000, 'unixepoch')      AS resets_at,\n"
    "	max(0, (expires_ms - now.ms + 999) / 1000)    AS reset_in_s,\n"
    "	expires_ms <= now.ms                          AS expired\n"
    "FROM rlg_state, now;\n"
    "\n"
    "-- One row per policy:\n"
    "--   active_clients  clients whose state has not expired\n"
    "--   total_count     requests admitted in their current windows\n"
    "--   expired_rows    stale rows that the next prune deletes\n"
    "CREATE VIEW IF NOT EXISTS summary AS\n"
    "WITH now (ms) AS (\n"
    "	SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS"
    " INTEGER)\n"
    ")\n"
    "SELECT\n"
    "	policy,\n"
    "	sum(expires_ms > now.ms) AS active_clients,\n"
    "	coalesce(sum(CASE WHEN expires_ms > now.ms THEN count END), 0)\n"
    "	    AS total_count,\n"
    "	sum(expires_ms <= now.ms) AS expired_rows\n"
    "FROM rlg_state, now\n"
    "GROUP BY policy;\n"
    "\n"
    "PRAGMA user_version = 1;\n";

/* The algorithms tests: concurrency limits of MODE_ALGS. */
#define ALGS_SENT 100               /* per worker, of each kind */
#define ALGS_LOG_LIMIT 150          /* sliding_log: 150 per minute */
#define ALGS_BUCKET_LIMIT 600       /* token_bucket: 600 per minute, */
#define ALGS_BUCKET_BURST 90        /* 90 at once; T = 100 ms */

/* The limit of the concurrency tests: below the one-client total. */
#define CONC_LIMIT 250
#define CONC_SENT 300               /* per worker, one client */
#define MANY_LIMIT 12

static void
base_setup(void)
{
	snprintf(base_dir, sizeof base_dir, "/tmp/rlg-check-store-XXXXXX");
	if (mkdtemp(base_dir) == NULL) {
		perror("mkdtemp");
		abort();
	}
}

static void
base_teardown(void)
{
	nftw(base_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * Each test gets a directory of its own, removed with the base; with
 * Redis, an empty server and no path mapped to a database yet.
 */
static void
case_setup(void)
{
	redisReply *r;
	int i;

	snprintf(case_dir, sizeof case_dir, "%s/t%d-%ld", base_dir,
	    ++case_seq, (long)getpid());
	ck_assert_int_eq(mkdir(case_dir, 0700), 0);
	if (backend != RLG_BACKEND_REDIS)
		return;
	ck_assert_msg(redis_up, "the suite's redis-server did not start");
	redis_npaths = 0;
	if (cluster_mode) {
		for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
			r = rcmd(cluster_srv.port[i], NULL, 0, "FLUSHALL");
			freeReplyObject(r);
		}
		return;
	}
	r = rcmd(redis_srv.port, NULL, 0, "FLUSHALL");
	freeReplyObject(r);
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* A path in this test's directory; static storage, one per call site. */
static char *
path_in(const char *name)
{
	static char bufs[4][256];
	static int next;
	char *p = bufs[next++ % 4];

	snprintf(p, sizeof bufs[0], "%s/%s", case_dir, name);
	/* Here, in the test: a worker process then finds it mapped. */
	if (backend == RLG_BACKEND_REDIS)
		(void)redis_db_of(p);
	return p;
}

/* ---- two backends --------------------------------------------------- */

static void
redis_base_setup(void)
{
	base_setup();
	backend = RLG_BACKEND_REDIS;
	/* A connection Redis closed must fail a write, not kill the test. */
	signal(SIGPIPE, SIG_IGN);
	redis_up = rlg_test_redis_start(&redis_srv) == 0;
}

static void
redis_base_teardown(void)
{
	rlg_test_redis_stop(&redis_srv);
	redis_up = false;
	backend = RLG_BACKEND_SQLITE;
	base_teardown();
}

static void
cluster_base_setup(void)
{
	base_setup();
	backend = RLG_BACKEND_REDIS;
	cluster_mode = true;
	signal(SIGPIPE, SIG_IGN);
	redis_up = rlg_test_redis_cluster_start(&cluster_srv) == 0;
}

static void
cluster_base_teardown(void)
{
	rlg_test_redis_cluster_stop(&cluster_srv);
	redis_up = false;
	cluster_mode = false;
	backend = RLG_BACKEND_SQLITE;
	base_teardown();
}

/*
 * The servers that hold the test's keys, into ports (at most
 * RLG_TEST_CLUSTER_NODES) and their database into *db: the suite's
 * server and the database of path, or every master of the cluster.
 */
static int
key_servers(const char *path, int *ports, int *db)
{
	int i;

	if (!cluster_mode) {
		ports[0] = redis_srv.port;
		*db = redis_db_of(path);
		return 1;
	}
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++)
		ports[i] = cluster_srv.port[i];
	*db = 0;
	return RLG_TEST_CLUSTER_NODES;
}

/* The Redis database that stands for path in this test (registered). */
static int
redis_db_of(const char *path)
{
	int i;

	for (i = 0; i < redis_npaths; i++)
		if (strcmp(redis_paths[i], path) == 0)
			return i;
	ck_assert_int_lt(redis_npaths, REDIS_DBS);
	snprintf(redis_paths[redis_npaths], sizeof redis_paths[0], "%s",
	    path);
	return redis_npaths++;
}

/*
 * A config for the test's backend: the SQLite file path, or the Redis
 * database that stands for it, clock = local so that the fixed times of
 * the tests are the times the script runs at. store_cfg_free frees it.
 */
static void
store_cfg(struct rlg_store_config *cfg, const char *path, int busy_ms)
{
	char url[128];

	memset(cfg, 0, sizeof *cfg);
	cfg->on_error = RLG_ON_ERROR_CLOSED;
	if (backend == RLG_BACKEND_SQLITE) {
		cfg->sqlite.path = rlg_xstrdup(path);
		cfg->sqlite.busy_timeout_ms = busy_ms;
		return;
	}
	if (cluster_mode) {
		(void)redis_db_of(path);
		store_cfg_url(cfg, cluster_srv.url);
		cfg->redis.cluster = true;
	} else {
		snprintf(url, sizeof url, "%s/%d", redis_srv.url,
		    redis_db_of(path));
		store_cfg_url(cfg, url);
	}
	cfg->redis.clock = RLG_CLOCK_LOCAL;
}

/* A Redis config for url (through the config's own parser). */
static void
store_cfg_url(struct rlg_store_config *cfg, const char *url)
{
	char why[256];

	cfg->backend = RLG_BACKEND_REDIS;
	ck_assert_msg(rlg_config_redis_url(cfg, url, why, sizeof why) == 0,
	    "%s: %s", url, why);
	/* Generous: sanitizer builds and a loaded machine are slow. */
	cfg->redis.connect_timeout_ms = 2000;
	cfg->redis.timeout_ms = 5000;
}

static void
store_cfg_free(struct rlg_store_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->redis.nseeds; i++)
		free(cfg->redis.seeds[i].host);
	free(cfg->redis.seeds);
	free(cfg->sqlite.path);
	free(cfg->redis.host);
	free(cfg->redis.socket);
	free(cfg->redis.user);
	free(cfg->redis.password);
	memset(cfg, 0, sizeof *cfg);
}

/*
 * One command to the server on 127.0.0.1:port (AUTH with password if not
 * NULL, SELECT db); the reply, never NULL nor an error, caller frees.
 */
static redisReply *
rcmd(int port, const char *password, int db, const char *fmt, ...)
{
	struct timeval tv = { 5, 0 };
	redisContext *c;
	redisReply *r;
	va_list ap;

	c = redisConnectWithTimeout("127.0.0.1", port, tv);
	ck_assert_msg(c != NULL && c->err == 0, "connect to %d: %s", port,
	    c != NULL ? c->errstr : "out of memory");
	redisSetTimeout(c, tv);
	if (password != NULL) {
		r = redisCommand(c, "AUTH %s", password);
		ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
		freeReplyObject(r);
	}
	r = redisCommand(c, "SELECT %d", db);
	ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	ck_assert_msg(r != NULL, "%s: %s", fmt, c->errstr);
	ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r->str);
	redisFree(c);
	return r;
}

/*
 * One command to the suite's server, in the database of path; on the
 * cluster, to the master of the key (following MOVED).
 */
static redisReply *
rdb(const char *path, const char *fmt, ...)
{
	struct timeval tv = { 5, 0 };
	redisContext *c;
	redisReply *r;
	va_list ap;
	int port, hops;

	port = cluster_mode ? cluster_srv.port[0] : redis_srv.port;
	for (hops = 0;; hops++) {
		c = redisConnectWithTimeout("127.0.0.1", port, tv);
		ck_assert_msg(c != NULL && c->err == 0, "connect: %s",
		    c != NULL ? c->errstr : "out of memory");
		redisSetTimeout(c, tv);
		r = redisCommand(c, "SELECT %d", cluster_mode ? 0 :
		    redis_db_of(path));
		ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
		freeReplyObject(r);
		va_start(ap, fmt);
		r = redisvCommand(c, fmt, ap);
		va_end(ap);
		ck_assert_msg(r != NULL, "%s: %s", fmt, c->errstr);
		redisFree(c);
		if (!cluster_mode || hops == 3 ||
		    r->type != REDIS_REPLY_ERROR ||
		    strncmp(r->str, "MOVED ", 6) != 0)
			break;
		port = atoi(strrchr(r->str, ':') + 1);
		freeReplyObject(r);
	}
	ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r->str);
	return r;
}

/* rlg:{CLIENT}:POLICY, or its log rlg:{CLIENT}:POLICY:log. */
static void
redis_key(char *buf, size_t size, const char *policy_name,
    const char *client, bool log)
{
	snprintf(buf, size, "rlg:{%s}:%s%s", client, policy_name,
	    log ? ":log" : "");
}

/* One field of a (policy, client) state; -1 when it has no state. */
static int64_t
state_field(const char *path, const char *policy_name, const char *client,
    const char *field)
{
	char key[512], *sql;
	redisReply *r;
	int64_t v = -1;

	if (backend == RLG_BACKEND_SQLITE) {
		sql = sqlite3_mprintf("SELECT %s FROM rlg_state WHERE"
		    " policy = %Q AND client = %Q", field, policy_name,
		    client);
		v = sql_int(path, sql);
		sqlite3_free(sql);
		return v;
	}
	redis_key(key, sizeof key, policy_name, client, false);
	r = rdb(path, "EXISTS %s", key);
	if (r->integer == 1) {
		freeReplyObject(r);
		r = rdb(path, "HGET %s %s", key, field);
		/* A field the script did not write is 0, as in a fresh row. */
		v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) :
		    0;
	}
	freeReplyObject(r);
	return v;
}

static int64_t
count_of(const char *path, const char *policy_name, const char *client)
{
	return state_field(path, policy_name, client, "count");
}

/* How many (policy, client) states the store holds. */
static int64_t
nstates(const char *path)
{
	int ports[RLG_TEST_CLUSTER_NODES], db, k, nk;
	redisReply *r;
	int64_t n = 0;
	size_t i, len;

	if (backend == RLG_BACKEND_SQLITE)
		return sql_int(path, "SELECT count(*) FROM rlg_state");
	nk = key_servers(path, ports, &db);
	for (k = 0; k < nk; k++) {
		r = rcmd(ports[k], NULL, db, "KEYS rlg:*");
		for (i = 0; i < r->elements; i++) {
			len = r->element[i]->len;
			if (len < 4 || strcmp(r->element[i]->str + len - 4,
			    ":log") != 0)
				n++;
		}
		freeReplyObject(r);
	}
	return n;
}

/* Sliding-log entries of policy and client (NULL: any). */
static int64_t
nlog(const char *path, const char *policy_name, const char *client)
{
	int ports[RLG_TEST_CLUSTER_NODES], db, k, nk;
	char *sql, pattern[512];
	redisReply *r, *len;
	int64_t n = 0;
	size_t i;

	if (backend == RLG_BACKEND_SQLITE) {
		sql = sqlite3_mprintf("SELECT count(*) FROM rlg_log WHERE"
		    " (%Q IS NULL OR policy = %Q) AND (%Q IS NULL OR"
		    " client = %Q)", policy_name, policy_name, client,
		    client);
		n = sql_int(path, sql);
		sqlite3_free(sql);
		return n;
	}
	redis_key(pattern, sizeof pattern, policy_name != NULL ?
	    policy_name : "*", client != NULL ? client : "*", true);
	nk = key_servers(path, ports, &db);
	for (k = 0; k < nk; k++) {
		r = rcmd(ports[k], NULL, db, "KEYS %s", pattern);
		for (i = 0; i < r->elements; i++) {
			len = rcmd(ports[k], NULL, db, "LLEN %s",
			    r->element[i]->str);
			n += len->integer;
			freeReplyObject(len);
		}
		freeReplyObject(r);
	}
	return n;
}

/* An operator's reset of one client: every state (and log) of it. */
static void
reset_client(const char *path, const char *client)
{
	int ports[RLG_TEST_CLUSTER_NODES], db, k, nk;
	char *sql, pattern[512];
	redisReply *r, *del;
	size_t i;

	if (backend == RLG_BACKEND_SQLITE) {
		sql = sqlite3_mprintf("DELETE FROM rlg_state WHERE client = %Q",
		    client);
		sql_exec(path, sql);
		sqlite3_free(sql);
		return;
	}
	snprintf(pattern, sizeof pattern, "rlg:{%s}:*", client);
	nk = key_servers(path, ports, &db);
	for (k = 0; k < nk; k++) {
		r = rcmd(ports[k], NULL, db, "KEYS %s", pattern);
		for (i = 0; i < r->elements; i++) {
			del = rcmd(ports[k], NULL, db, "DEL %s",
			    r->element[i]->str);
			freeReplyObject(del);
		}
		freeReplyObject(r);
	}
}

/*
 * Whether anything was written between probe_start and probe_changed:
 * SQLite's data_version moves when another connection commits; Redis
 * counts every write in rdb_changes_since_last_save (no persistence here,
 * so nothing resets it).
 */
static sqlite3 *probe_db;
static sqlite3_stmt *probe_st;
static int64_t probe_v0;

static void
probe_start(const char *path)
{
	if (backend == RLG_BACKEND_REDIS) {
		probe_v0 = redis_dirty(path);
		return;
	}
	ck_assert_int_eq(sqlite3_open_v2(path, &probe_db,
	    SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(probe_db, "PRAGMA data_version",
	    -1, &probe_st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(probe_st), SQLITE_ROW);
	probe_v0 = sqlite3_column_int64(probe_st, 0);
	sqlite3_reset(probe_st);
}

static bool
probe_changed(const char *path)
{
	int64_t v1;

	if (backend == RLG_BACKEND_REDIS)
		return redis_dirty(path) != probe_v0;
	ck_assert_int_eq(sqlite3_step(probe_st), SQLITE_ROW);
	v1 = sqlite3_column_int64(probe_st, 0);
	sqlite3_finalize(probe_st);
	sqlite3_close(probe_db);
	probe_st = NULL;
	probe_db = NULL;
	return v1 != probe_v0;
}

/* The servers' count of writes (INFO persistence), summed. */
static int64_t
redis_dirty(const char *path)
{
	int ports[RLG_TEST_CLUSTER_NODES], db, k, nk;
	const char *at;
	redisReply *r;
	int64_t v = 0;

	nk = key_servers(path, ports, &db);
	for (k = 0; k < nk; k++) {
		r = rcmd(ports[k], NULL, db, "INFO persistence");
		at = strstr(r->str, "rdb_changes_since_last_save:");
		ck_assert_ptr_nonnull(at);
		v += strtoll(at + strlen("rdb_changes_since_last_save:"),
		    NULL, 10);
		freeReplyObject(r);
	}
	return v;
}

static struct rlg_policy
policy(int64_t limit, int64_t window_s)
{
	struct rlg_policy p = { .name = name_default,
	    .lim.algorithm = RLG_ALG_FIXED_WINDOW, .lim.limit = limit,
	    .lim.window_ms = window_s * 1000, .key = RLG_KEY_IP };

	return p;
}

static struct rlg_store *
open_ok(const char *path, int busy_ms)
{
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;
	int rc;

	store_cfg(&cfg, path, busy_ms);
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_msg(rc == RLG_OK, "open %s: %s", path, rlg_store_errmsg(s));
	ck_assert_ptr_nonnull(s);
	return s;
}

/* One request for one policy; returns whether it was admitted. */
static int
hit(struct rlg_store *s, const struct rlg_policy *p, const char *client,
    int64_t now, struct rlg_decision *d)
{
	struct rlg_store_item item = { p, client, false, false };
	struct rlg_decision tmp;
	int rc;

	if (d == NULL)
		d = &tmp;
	rc = rlg_store_step(s, &item, 1, now, d);
	ck_assert_msg(rc == RLG_OK, "step: %s", rlg_store_errmsg(s));
	return d->admitted;
}

/* The first column of the first row as an integer; -1 when no row. */
static int64_t
sql_int(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t v = -1;
	int rc;

	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
	rc = sqlite3_step(st);
	ck_assert_msg(rc == SQLITE_ROW || rc == SQLITE_DONE, "%s: %s", sql,
	    sqlite3_errmsg(db));
	if (rc == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* The first row's columns as text joined with '|'. */
static void
sql_text(const char *path, const char *sql, char *buf, size_t size)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	size_t len = 0;
	int i, rc;

	buf[0] = '\0';
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW) {
		for (i = 0; i < sqlite3_column_count(st) && len < size; i++) {
			const unsigned char *t = sqlite3_column_text(st, i);

			len += (size_t)snprintf(buf + len, size - len, "%s%s",
			    i > 0 ? "|" : "", t != NULL ? (const char *)t :
			    "NULL");
		}
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static void
sql_exec(const char *path, const char *sql)
{
	sqlite3 *db;
	int rc;

	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* 8 KiB that no SQLite header starts with. */
static void
write_garbage(const char *path)
{
	char block[8192];
	FILE *f;
	size_t i;

	for (i = 0; i < sizeof block; i++)
		block[i] = "this is not a database, just junk\n"[i % 34];
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(block, 1, sizeof block, f), sizeof block);
	ck_assert_int_eq(fclose(f), 0);
}

/* Permission bits of path, or -1 if it does not exist. */
static int
file_mode(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return -1;
	return (int)(st.st_mode & 07777);
}

static struct rlg_policy
alg_policy(char *name, enum rlg_algorithm a, int64_t limit, int64_t window_s,
    int64_t burst)
{
	struct rlg_policy p = { .name = name, .lim.algorithm = a, .lim.limit = limit,
	    .lim.window_ms = window_s * 1000, .lim.burst = burst, .key = RLG_KEY_IP };

	return p;
}

/*
 * One request of the simulation: the pure limiter on the state the store
 * would hold. sliding_log: the newest limit entries inside the window go
 * to the limiter; an admitted request adds now and drops what left the
 * window, as the store does with its rows.
 */
static void
sim_step(struct sim *m, int64_t now, struct rlg_decision *d)
{
	const struct rlg_policy *p = m->p;
	struct rlg_state out;
	size_t lo, i, at;
	bool append = false;

	if (p->lim.algorithm != RLG_ALG_SLIDING_LOG) {
		ck_assert_int_eq(rlg_limiter_step(&p->lim, &m->st, now, &out, d),
		    RLG_OK);
		if (d->admitted) {
			m->st = out;
			m->written_ms = now;
		}
		return;
	}
	for (lo = 0; lo < m->n && m->log[lo] <= now - p->lim.window_ms; lo++)
		;
	if (m->n - lo > (size_t)p->lim.limit)
		lo = m->n - (size_t)p->lim.limit;
	ck_assert_int_eq(rlg_limiter_sliding_log(&p->lim, m->log + lo, m->n - lo,
	    now, &append, &out, d), RLG_OK);
	ck_assert(append == d->admitted);
	if (!append)
		return;
	m->st = out;
	m->written_ms = now;
	for (lo = 0; lo < m->n && m->log[lo] <= now - p->lim.window_ms; lo++)
		;
	memmove(m->log, m->log + lo, (m->n - lo) * sizeof m->log[0]);
	m->n -= lo;
	ck_assert_uint_lt(m->n, SIM_LOG_MAX);
	for (at = m->n; at > 0 && m->log[at - 1] > now; at--)
		;
	for (i = m->n; i > at; i--)
		m->log[i] = m->log[i - 1];
	m->log[at] = now;
	m->n++;
}

/* The store decided as the simulation did, to the millisecond. */
static void
check_same(const struct rlg_decision *got, const struct rlg_decision *want,
    const char *what, long i)
{
	ck_assert_msg(got->admitted == want->admitted &&
	    got->limit == want->limit && got->remaining == want->remaining &&
	    got->reset_ms == want->reset_ms &&
	    got->retry_ms == want->retry_ms,
	    "%s, request %ld: store %d/%lld/%lld/%lld, limiter %d/%lld/%lld"
	    "/%lld (admitted/remaining/reset/retry)", what, i, got->admitted,
	    (long long)got->remaining, (long long)got->reset_ms,
	    (long long)got->retry_ms, want->admitted,
	    (long long)want->remaining, (long long)want->reset_ms,
	    (long long)want->retry_ms);
}

/*
 * The stored row (and log) of client equals the simulation's; both stores
 * round expiries up to a whole second. Redis keys expire in real time,
 * PEXPIREd by expires_ms - now of their last write: a state whose expiry
 * was that close to the last write may be gone already, and is then as
 * fresh (no state) for both.
 */
static void
check_row(const char *path, const struct sim *m, const char *client)
{
	char got[4096], want[4096];

	state_dump(path, m->p->name, client, got, sizeof got);
	if (backend == RLG_BACKEND_REDIS && got[0] == '\0' &&
	    m->st.expires_ms - m->written_ms < 1000)
		return;
	snprintf(want, sizeof want, "%lld|%lld|%lld|%lld|%lld",
	    (long long)m->st.window_start_ms, (long long)m->st.count,
	    (long long)((m->st.expires_ms + 999) / 1000 * 1000),
	    (long long)m->st.prev_count, (long long)m->st.tat_us);
	ck_assert_msg(strcmp(got, want) == 0, "%s %s: row %s, limiter %s",
	    rlg_algorithm_name(m->p->lim.algorithm), client, got, want);
	log_dump(path, m->p->name, client, got, sizeof got);
	sim_log_dump(m, want, sizeof want);
	ck_assert_msg(strcmp(got, want) == 0, "%s %s: log %s, limiter %s",
	    rlg_algorithm_name(m->p->lim.algorithm), client, got, want);
}

/* "window_start_ms|count|expires_ms|prev_count|tat_us", "" if no row. */
static void
state_dump(const char *path, const char *policy_name, const char *client,
    char *buf, size_t size)
{
	static const char *const fields[5] = { "window_start_ms", "count",
	    "expires_ms", "prev_count", "tat_us" };
	char *sql;
	size_t len = 0;
	int i;

	if (backend == RLG_BACKEND_REDIS) {
		buf[0] = '\0';
		if (state_field(path, policy_name, client, "count") < 0)
			return;
		for (i = 0; i < 5 && len < size; i++)
			len += (size_t)snprintf(buf + len, size - len,
			    "%s%lld", i > 0 ? "|" : "",
			    (long long)state_field(path, policy_name, client,
			    fields[i]));
		return;
	}

	sql = sqlite3_mprintf("SELECT window_start_ms, count, expires_ms,"
	    " prev_count, tat_us FROM rlg_state WHERE policy = %Q AND"
	    " client = %Q", policy_name, client);
	sql_text(path, sql, buf, size);
	sqlite3_free(sql);
}

/*
 * The client's log rows as "ts_ms:seq,...", ascending; "" if none. A
 * Redis log holds only the times: seq counts within one ms, as SQLite's.
 */
static void
log_dump(const char *path, const char *policy_name, const char *client,
    char *buf, size_t size)
{
	char *sql, key[512];
	redisReply *r;
	size_t i, len = 0;
	int seq = 0;

	if (backend == RLG_BACKEND_REDIS) {
		buf[0] = '\0';
		redis_key(key, sizeof key, policy_name, client, true);
		r = rdb(path, "LRANGE %s 0 -1", key);
		for (i = 0; i < r->elements && len < size; i++) {
			ck_assert_int_eq(r->element[i]->type,
			    REDIS_REPLY_STRING);
			seq = i > 0 && strcmp(r->element[i]->str,
			    r->element[i - 1]->str) == 0 ? seq + 1 : 0;
			len += (size_t)snprintf(buf + len, size - len,
			    "%s%s:%d", i > 0 ? "," : "", r->element[i]->str,
			    seq);
		}
		freeReplyObject(r);
		return;
	}

	sql = sqlite3_mprintf("SELECT coalesce(group_concat(ts_ms || ':' ||"
	    " seq, ','), '') FROM (SELECT ts_ms, seq FROM rlg_log WHERE"
	    " policy = %Q AND client = %Q ORDER BY ts_ms, seq)", policy_name,
	    client);
	sql_text(path, sql, buf, size);
	sqlite3_free(sql);
}

/* The simulation's log as log_dump shows it: seq counts within one ms. */
static void
sim_log_dump(const struct sim *m, char *buf, size_t size)
{
	size_t i, len = 0;
	int seq = 0;

	buf[0] = '\0';
	for (i = 0; i < m->n && len < size; i++) {
		seq = i > 0 && m->log[i] == m->log[i - 1] ? seq + 1 : 0;
		len += (size_t)snprintf(buf + len, size - len, "%s%lld:%d",
		    i > 0 ? "," : "", (long long)m->log[i], seq);
	}
}

/*
 * A database as the first rlgate left it: schema version 1 in WAL mode,
 * three rows (WIN0's window, limit 5 per 60 s: 10.0.0.2 is at its limit).
 */
static void
make_v1(const char *path)
{
	sqlite3 *db;
	int fd;

	fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL,
	    NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, schema_v1, NULL, NULL, NULL),
	    SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "INSERT INTO rlg_state VALUES"
	    " ('default', '10.0.0.1', 1699999980000, 3, 1700000040000),"
	    " ('default', '10.0.0.2', 1699999980000, 5, 1700000040000),"
	    " ('hour', '10.0.0.1', 1699999200000, 42, 1700002800000)",
	    NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 1);
}

/* One request that must not fail but may find the store full: true if
 * admitted, false if refused with RLG_EFULL (never merely rejected). */
static bool
hit_full(struct rlg_store *s, const struct rlg_policy *p, const char *client,
    int64_t now)
{
	struct rlg_store_item item = { p, client, false, false };
	struct rlg_decision d;
	int rc = rlg_store_step(s, &item, 1, now, &d);

	ck_assert_msg(rc == RLG_OK || rc == RLG_EFULL, "step: %s",
	    rlg_store_errmsg(s));
	if (rc == RLG_OK)
		ck_assert(d.admitted);
	return rc == RLG_OK;
}

/* ---- max_clients ---------------------------------------------------- */

/* A handle with [store] max_clients and rejection_cache as given. */
static struct rlg_store *
open_with(const char *path, int64_t max_clients, int64_t cache)
{
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;
	int rc;

	store_cfg(&cfg, path, 2000);
	cfg.sqlite.max_clients = max_clients;
	cfg.rejection_cache = cache;
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_msg(rc == RLG_OK, "open %s: %s", path, rlg_store_errmsg(s));
	return s;
}

/* rlg_clients agrees with the rows of rlg_state, policy by policy. */
static void
check_client_counts(const char *path)
{
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM (SELECT policy,"
	    " count(*) AS n FROM rlg_state GROUP BY policy) AS r"
	    " LEFT JOIN rlg_clients AS c USING (policy)"
	    " WHERE c.clients IS NOT r.n"), 0);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_clients AS c"
	    " WHERE c.clients != (SELECT count(*) FROM rlg_state AS r"
	    " WHERE r.policy = c.policy)"), 0);
}

/*
 * Full: a new client is refused with RLG_EFULL and nothing is written;
 * the clients already held go on exactly, rejections included; once
 * their states expire the step itself prunes them and admits again.
 */
START_TEST(test_max_clients)
{
	char *path = path_in("full.db");
	struct rlg_policy p = policy(2, 60);
	struct rlg_store_item item = { &p, "d", false, false };
	struct rlg_decision d;
	struct rlg_store *s = open_with(path, 3, 0);

	ck_assert(hit(s, &p, "a", T1, NULL));
	ck_assert(hit(s, &p, "b", T1, NULL));
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 1, &d), RLG_EFULL);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "store full: policy"
	    " \"default\" holds state for max_clients = 3 clients") != NULL,
	    "%s", rlg_store_errmsg(s));
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state WHERE"
	    " client = 'd'"), 0);
	ck_assert_int_eq(sql_int(path, "SELECT clients FROM rlg_clients"), 3);

	/* The clients held: counted, then rejected, never refused. */
	ck_assert(hit(s, &p, "a", T1 + 2, &d));
	ck_assert_int_eq(d.remaining, 0);
	ck_assert(!hit(s, &p, "a", T1 + 3, NULL));
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state WHERE"
	    " client = 'a'"), 2);

	/* Still full one ms before the window ends; room after it. */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, WIN0 + 59999, &d),
	    RLG_EFULL);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, WIN0 + 60000, &d),
	    RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 1);
	ck_assert_int_eq(sql_int(path, "SELECT clients FROM rlg_clients"), 1);
	check_client_counts(path);
	rlg_store_close(s);
}
END_TEST

/* One full policy refuses the whole step: the other one writes nothing. */
START_TEST(test_max_clients_per_policy)
{
	char *path = path_in("full2.db");
	struct rlg_policy a = policy(5, 60), b = policy(5, 3600);
	struct rlg_store_item items[2] = { { &a, "x", false, false },
	    { &b, "x", false, false } };
	struct rlg_decision d[2];
	struct rlg_store *s = open_with(path, 2, 0);

	b.name = name_hour;
	ck_assert(hit(s, &b, "h1", T1, NULL));
	ck_assert(hit(s, &b, "h2", T1, NULL));
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_EFULL);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state WHERE"
	    " client = 'x'"), 0);
	/* "default" alone has room: its own count is what matters. */
	ck_assert(hit(s, &a, "x", T1, NULL));
	ck_assert(hit(s, &a, "y", T1, NULL));
	ck_assert_int_eq(rlg_store_step(s, items, 1, T1, d), RLG_OK);
	check_client_counts(path);
	rlg_store_close(s);
}
END_TEST

/* sliding_log (whose row the step does not read) and max_clients = 0. */
START_TEST(test_max_clients_sliding_log_and_unlimited)
{
	char *path = path_in("full3.db"), client[32];
	struct rlg_policy p = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 60,
	    0);
	struct rlg_policy f = policy(1, 60);
	struct rlg_store_item item = { &p, "new", false, false };
	struct rlg_decision d;
	struct rlg_store *s = open_with(path, 2, 0);
	int i;

	ck_assert(hit(s, &p, "a", T1, NULL));
	ck_assert(hit(s, &p, "b", T1, NULL));
	ck_assert(hit(s, &p, "a", T1 + 1, NULL));   /* held: not refused */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 2, &d), RLG_EFULL);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log WHERE"
	    " client = 'new'"), 0);
	check_client_counts(path);
	rlg_store_close(s);

	s = open_with(path, 0, 0);
	for (i = 0; i < 50; i++) {
		snprintf(client, sizeof client, "c%d", i);
		ck_assert(hit(s, &f, client, T1, NULL));
	}
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 2, &d), RLG_OK);
	check_client_counts(path);
	rlg_store_close(s);
}
END_TEST

/* Rows deleted by hand (an operator's reset) leave the count exact. */
START_TEST(test_client_counts_follow_deletes)
{
	char *path = path_in("counts.db"), client[32];
	struct rlg_policy p = policy(5, 60);
	struct rlg_store *s = open_with(path, 5, 0);
	int i;

	for (i = 0; i < 5; i++) {
		snprintf(client, sizeof client, "c%d", i);
		ck_assert(hit(s, &p, client, T1, NULL));
	}
	sql_exec(path, "DELETE FROM rlg_state WHERE client IN ('c1', 'c3')");
	ck_assert_int_eq(sql_int(path, "SELECT clients FROM rlg_clients"), 3);
	ck_assert(hit(s, &p, "n1", T1, NULL));
	ck_assert(hit(s, &p, "n2", T1, NULL));
	ck_assert(!hit_full(s, &p, "n3", T1));
	sql_exec(path, "DELETE FROM rlg_state");
	ck_assert_int_eq(sql_int(path, "SELECT clients FROM rlg_clients"), 0);
	check_client_counts(path);
	rlg_store_close(s);
}
END_TEST

/*
 * A version 2 file (no rlg_clients, rows already there) gets the table,
 * its triggers and the counts of its rows when opened.
 */
START_TEST(test_migrate_v2)
{
	char *path = path_in("v2.db"), text[256];
	struct rlg_policy p = policy(5, 60);
	struct rlg_store *s = open_ok(path, 2000);

	ck_assert(hit(s, &p, "a", T1, NULL));
	rlg_store_close(s);
	sql_exec(path, "DROP TRIGGER rlg_state_count_insert;"
	    " DROP TRIGGER rlg_state_count_delete; DROP TABLE rlg_clients;"
	    " INSERT INTO rlg_state (policy, client, window_start_ms, count,"
	    " expires_ms) VALUES ('default', 'b', 0, 1, 4102444800000),"
	    " ('hour', 'a', 0, 1, 4102444800000); PRAGMA user_version = 2");
	s = open_with(path, 3, 0);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
	sql_text(path, "SELECT group_concat(policy || ':' || clients, ',')"
	    " FROM (SELECT * FROM rlg_clients ORDER BY policy)", text,
	    sizeof text);
	ck_assert_str_eq(text, "default:2,hour:1");
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(!hit_full(s, &p, "d", T1));
	check_client_counts(path);
	rlg_store_close(s);
}
END_TEST

/* ---- the rejection cache (store_cache.c) ----------------------------- */

/*
 * The same requests at the same instants into two files, one store with
 * the cache and one without: every decision is the same, field by field,
 * and the cache answered most rejections. Bursts every 97 ms over three
 * windows, with pauses, so rejections, retries that come due and new
 * windows all happen; one and two policies per request.
 */
static void
check_cache_differential(const struct rlg_policy *ps, size_t np,
    const char *tag, uint64_t min_hits)
{
	char a[64], b[64], ca[64], cb[64];
	struct rlg_store *c, *u;
	struct rlg_store_item items[2], uitems[2];
	struct rlg_decision dc[2], du[2];
	int64_t t = T1;
	size_t i;
	int k, rc, rejected = 0;

	snprintf(a, sizeof a, "cache-%s.db", tag);
	snprintf(b, sizeof b, "plain-%s.db", tag);
	c = open_with(path_in(a), 0, 64);
	u = open_with(path_in(b), 0, 0);
	ck_assert(rlg_test_stats(c).cache);
	ck_assert(!rlg_test_stats(u).cache);
	/*
	 * A client of its own for each store and each call: stores that
	 * share one keyspace (a Redis Cluster has database 0 only) must not
	 * meet.
	 */
	snprintf(ca, sizeof ca, "cached-%s", tag);
	snprintf(cb, sizeof cb, "plain-%s", tag);
	for (i = 0; i < np; i++) {
		items[i].policy = &ps[i];
		items[i].client = ca;
		items[i].advisory = false;
		items[i].if_new = false;
		uitems[i] = items[i];
		uitems[i].client = cb;
	}
	for (k = 0; k < 900; k++) {
		t += (k % 40 == 39) ? 1500 : 97;
		rc = rlg_store_step(c, items, np, t, dc);
		ck_assert_int_eq(rc, RLG_OK);
		ck_assert_int_eq(rlg_store_step(u, uitems, np, t, du), RLG_OK);
		for (i = 0; i < np; i++) {
			ck_assert_msg(dc[i].admitted == du[i].admitted &&
			    dc[i].limit == du[i].limit &&
			    dc[i].remaining == du[i].remaining &&
			    dc[i].reset_ms == du[i].reset_ms &&
			    dc[i].retry_ms == du[i].retry_ms,
			    "%s, request %d at +%lld ms, policy %zu: cached"
			    " %d/%lld/%lld/%lld, store %d/%lld/%lld/%lld", tag,
			    k, (long long)(t - T1), i, dc[i].admitted,
			    (long long)dc[i].remaining,
			    (long long)dc[i].reset_ms,
			    (long long)dc[i].retry_ms, du[i].admitted,
			    (long long)du[i].remaining,
			    (long long)du[i].reset_ms,
			    (long long)du[i].retry_ms);
			if (!du[i].admitted)
				rejected++;
		}
	}
	ck_assert_msg(rlg_test_stats(c).cache_hits >= min_hits && rejected > 0,
	    "%s: %llu hits", tag,
	    (unsigned long long)rlg_test_stats(c).cache_hits);
	rlg_store_close(c);
	rlg_store_close(u);
}

START_TEST(test_cache_exact_each_algorithm)
{
	struct rlg_policy fw = alg_policy(name_alg, RLG_ALG_FIXED_WINDOW, 5,
	    2, 0);
	struct rlg_policy sw = alg_policy(name_sw, RLG_ALG_SLIDING_WINDOW, 5,
	    2, 0);
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5, 2,
	    3);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 5, 2,
	    0);
	struct rlg_policy two[2];

	check_cache_differential(&fw, 1, "fixed", 300);
	check_cache_differential(&sw, 1, "sliding", 300);
	check_cache_differential(&tb, 1, "bucket", 300);
	check_cache_differential(&sl, 1, "log", 300);
	two[0] = fw;
	two[1] = sl;
	two[1].lim.limit = 7;
	check_cache_differential(two, 2, "fixed+log", 10);
	two[0] = tb;
	two[1] = sw;
	check_cache_differential(two, 2, "bucket+sliding", 10);
}
END_TEST

/*
 * What the cache leaves to the store: a request rejected by only some of
 * its policies, advisory items, a clock that went back before the
 * rejection, and the instant the earliest retry comes due.
 */
START_TEST(test_cache_leaves_to_store)
{
	char *path = path_in("cacheleft.db");
	struct rlg_policy p = policy(1, 60), q = policy(100, 60);
	struct rlg_store_item items[2] = { { &p, "c", false, false },
	    { &q, "c", false, false } };
	struct rlg_decision d[2];
	struct rlg_store *s = open_with(path, 0, 16);

	q.name = name_hour;
	ck_assert(hit(s, &p, "c", T1, NULL));
	/* Only p rejects: not remembered. */
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 1, d), RLG_OK);
	ck_assert(!d[0].admitted && d[1].admitted);
	ck_assert_uint_eq(rlg_test_stats(s).cache_stored, 0);
	/* Advisory: not remembered. */
	items[0].advisory = true;
	ck_assert_int_eq(rlg_store_step(s, items, 1, T1 + 2, d), RLG_OK);
	ck_assert_uint_eq(rlg_test_stats(s).cache_stored, 0);
	items[0].advisory = false;
	/* Remembered, then a hit. */
	ck_assert(!hit(s, &p, "c", T1 + 3, NULL));
	ck_assert_uint_eq(rlg_test_stats(s).cache_stored, 1);
	ck_assert(!hit(s, &p, "c", T1 + 4, &d[0]));
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 1);
	ck_assert_int_eq(d[0].retry_ms, WIN0 + 60000 - (T1 + 4));
	/* A clock gone back before the rejection: the store answers. */
	ck_assert(!hit(s, &p, "c", T1 + 2, NULL));
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 1);
	/* The last millisecond is a hit; the retry instant goes to the store. */
	ck_assert(!hit(s, &p, "c", WIN0 + 59999, NULL));
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 2);
	ck_assert(hit(s, &p, "c", WIN0 + 60000, NULL));
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 2);
	rlg_store_close(s);
}
END_TEST

/*
 * Documented: a client reset by hand stays rejected by a handle that
 * remembers its rejection until the retry time; a handle without the
 * cache sees the reset at once.
 */
START_TEST(test_cache_reset_by_hand)
{
	char *path = path_in("cachereset.db");
	struct rlg_policy p = policy(1, 60);
	struct rlg_store *c = open_with(path, 0, 16);
	struct rlg_store *u = open_with(path, 0, 0);

	ck_assert(hit(c, &p, "r", T1, NULL));
	ck_assert(!hit(c, &p, "r", T1 + 1, NULL));
	reset_client(path, "r");
	ck_assert(!hit(c, &p, "r", T1 + 2, NULL));
	ck_assert(hit(u, &p, "r", T1 + 3, NULL));
	rlg_store_close(c);
	rlg_store_close(u);
}
END_TEST

/* The concurrency tests again, every handle with a cache. */
START_TEST(test_cache_processes_one_client)
{
	char *path = path_in("cprocs1.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_ONE, 64, w);
	check_totals(path, MODE_ONE, w);
}
END_TEST

START_TEST(test_cache_processes_many_clients)
{
	char *path = path_in("cprocsn.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_MANY, 64, w);
	check_totals(path, MODE_MANY, w);
}
END_TEST

START_TEST(test_cache_processes_algorithms)
{
	char *path = path_in("cprocsalg.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_ALGS, 64, w);
	check_algorithms(path, w);
}
END_TEST

START_TEST(test_cache_threads_algorithms)
{
	char *path = path_in("cthreadsalg.db");
	struct worker w[NWORKERS];

	run_threads(path, MODE_ALGS, 64, w);
	check_algorithms(path, w);
}
END_TEST

/* ---- core --------------------------------------------------------- */

START_TEST(test_new_file_schema)
{
	char *path = path_in("new.db"), wal[300], text[256];
	struct rlg_policy p = policy(5, 60);
	struct rlg_store *s;

	ck_assert_int_eq(file_mode(path), -1);
	s = open_ok(path, 2000);
	ck_assert_int_eq(file_mode(path), 0600);
	ck_assert(hit(s, &p, "10.0.0.1", T1, NULL));
	snprintf(wal, sizeof wal, "%s-wal", path);
	ck_assert_int_eq(file_mode(wal), 0600);   /* sqlite copies the mode */

	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
	sql_text(path, "PRAGMA journal_mode", text, sizeof text);
	ck_assert_str_eq(text, "wal");
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
	    " WHERE (type, name) IN (VALUES ('table', 'rlg_state'),"
	    " ('index', 'rlg_state_expires'), ('view', 'clients'),"
	    " ('view', 'summary'), ('table', 'rlg_log'),"
	    " ('trigger', 'rlg_state_delete_log'), ('table', 'rlg_clients'),"
	    " ('trigger', 'rlg_state_count_insert'),"
	    " ('trigger', 'rlg_state_count_delete'))"), 9);
	sql_text(path, "SELECT policy, client, window_start_ms, count,"
	    " expires_ms FROM rlg_state", text, sizeof text);
	ck_assert_str_eq(text, "default|10.0.0.1|1699999980000|1|"
	    "1700000040000");
	rlg_store_close(s);
}
END_TEST

START_TEST(test_reopen_keeps_state)
{
	char *path = path_in("reopen.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "c", T1 + i, NULL));
	rlg_store_close(s);

	s = open_ok(path, 2000);       /* user_version 3: schema kept */
	ck_assert(hit(s, &p, "c", T1 + 10, &d));
	ck_assert_int_eq(d.remaining, 1);
	rlg_store_close(s);
	ck_assert_int_eq(count_of(path, "default", "c"), 4);
}
END_TEST

START_TEST(test_limit_in_window)
{
	char *path = path_in("limit.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 5; i++) {
		ck_assert(hit(s, &p, "10.0.0.1", T1, &d));
		ck_assert_int_eq(d.limit, 5);
		ck_assert_int_eq(d.remaining, 4 - i);
		ck_assert_int_eq(d.reset_ms, 59000);
		ck_assert_int_eq(d.retry_ms, 0);
	}
	for (i = 0; i < 5; i++) {
		ck_assert(!hit(s, &p, "10.0.0.1", T1 + 1000 * i, &d));
		ck_assert_int_eq(d.remaining, 0);
		ck_assert_int_eq(d.retry_ms, 59000 - 1000 * i);
		ck_assert_int_eq(d.reset_ms, 59000 - 1000 * i);
	}
	/* The last millisecond of the window still rejects. */
	ck_assert(!hit(s, &p, "10.0.0.1", WIN0 + 59999, &d));
	ck_assert_int_eq(d.retry_ms, 1);
	ck_assert_int_eq(count_of(path, "default", "10.0.0.1"), 5);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_new_window_resets)
{
	char *path = path_in("window.db");
	struct rlg_policy p = policy(3, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(!hit(s, &p, "c", T1, NULL));

	/* The next window, to the millisecond. */
	ck_assert(hit(s, &p, "c", WIN0 + 60000, &d));
	ck_assert_int_eq(d.remaining, 2);
	ck_assert_int_eq(d.reset_ms, 60000);
	ck_assert_int_eq(state_field(path, "default", "c", "window_start_ms"),
	    WIN0 + 60000);
	ck_assert_int_eq(count_of(path, "default", "c"), 1);

	/* Two windows skipped: a fresh count again. */
	ck_assert(hit(s, &p, "c", WIN0 + 180005, &d));
	ck_assert_int_eq(d.remaining, 2);
	ck_assert_int_eq(count_of(path, "default", "c"), 1);
	ck_assert_int_eq(state_field(path, "default", "c", "expires_ms"),
	    WIN0 + 240000);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_rejected_writes_nothing)
{
	char *path = path_in("reject.db"), before[256], after[256];
	struct rlg_policy p = policy(2, 60);
	struct rlg_policy q = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 1, 60,
	    0);
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(hit(s, &q, "c", T1, NULL));
	state_dump(path, "default", "c", before, sizeof before);

	/* Nothing at all is written: not the state, not an expiry. */
	probe_start(path);
	for (i = 0; i < 20; i++) {
		ck_assert(!hit(s, &p, "c", T1 + 100 * i, NULL));
		ck_assert(!hit(s, &q, "c", T1 + 100 * i, NULL));
	}
	ck_assert(!probe_changed(path));
	state_dump(path, "default", "c", after, sizeof after);
	ck_assert_str_eq(after, before);
	ck_assert_int_eq(count_of(path, "default", "c"), 2);
	ck_assert_int_eq(nlog(path, "sl", "c"), 1);

	/* An admitted request does write: the probe works. */
	probe_start(path);
	ck_assert(hit(s, &p, "other", T1, NULL));
	ck_assert(probe_changed(path));
	rlg_store_close(s);
}
END_TEST

START_TEST(test_distinct_clients)
{
	char *path = path_in("clients.db");
	struct rlg_policy p = policy(3, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "10.0.0.1", T1, NULL));
	ck_assert(!hit(s, &p, "10.0.0.1", T1, NULL));
	for (i = 0; i < 3; i++) {
		ck_assert(hit(s, &p, "10.0.0.2", T1, &d));
		ck_assert_int_eq(d.remaining, 2 - i);
	}
	ck_assert(!hit(s, &p, "10.0.0.2", T1, NULL));
	ck_assert(hit(s, &p, "2001:db8::/64", T1, &d));
	ck_assert_int_eq(d.remaining, 2);
	ck_assert_int_eq(count_of(path, "default", "10.0.0.1"), 3);
	ck_assert_int_eq(count_of(path, "default", "2001:db8::/64"), 1);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_one_row_per_client)
{
	char *path = path_in("rows.db");
	struct rlg_policy p1 = policy(5, 60), p2 = policy(100, 60);
	const char *clients[] = { "a", "b", "c" };
	struct rlg_store *s;
	int w, c, k;

	p2.name = name_hour;
	s = open_ok(path, 2000);
	for (w = 0; w < 5; w++) {
		for (c = 0; c < 3; c++) {
			for (k = 0; k < 2; k++) {
				ck_assert(hit(s, &p1, clients[c],
				    WIN0 + 60000 * w + k, NULL));
				ck_assert(hit(s, &p2, clients[c],
				    WIN0 + 60000 * w + k, NULL));
			}
		}
	}
	ck_assert_int_eq(nstates(path), 6);
	for (c = 0; c < 3; c++) {
		for (k = 0; k < 2; k++) {
			ck_assert_int_eq(state_field(path, k == 0 ? "default" :
			    "hour", clients[c], "window_start_ms"),
			    WIN0 + 4 * 60000);
			ck_assert_int_eq(count_of(path, k == 0 ? "default" :
			    "hour", clients[c]), 2);
		}
	}
	rlg_store_close(s);
}
END_TEST

START_TEST(test_policies_all_or_nothing)
{
	char *path = path_in("policies.db");
	struct rlg_policy burst = policy(2, 1), hour = policy(10, 3600);
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item items[2] = {
		{ NULL, NULL, false, false }, { NULL, NULL, false, false }
	};
	struct rlg_decision d[2];
	struct rlg_store *s;

	burst.name = name_burst;
	hour.name = name_hour;
	items[0].policy = &burst;
	items[0].client = "c";
	items[1].policy = &hour;
	items[1].client = "c";
	s = open_ok(path, 2000);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, 8);

	/* burst rejects: hour would admit, but writes nothing. */
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 999, d), RLG_OK);
	ck_assert(!d[0].admitted);
	ck_assert(d[1].admitted);
	ck_assert_int_eq(count_of(path, "hour", "c"), 2);

	/* The next second: both admit, hour counts 3. */
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 1000, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, 7);
	ck_assert_int_eq(count_of(path, "hour", "c"), 3);

	/* The same policy twice counts twice; all or nothing still. */
	items[0].policy = &p;
	items[1].policy = &p;
	items[0].client = items[1].client = "d";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, 3);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert_int_eq(d[1].remaining, 1);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(count_of(path, "default", "d"), 4);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_clients_view)
{
	char *path = path_in("view.db"), text[256];
	struct rlg_policy p = policy(5, 60);
	struct rlg_store *s;
	int64_t live;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "old", T1, NULL));
	sql_text(path, "SELECT policy, client, count, window_start, resets_at,"
	    " reset_in_s, expired FROM clients", text, sizeof text);
	ck_assert_str_eq(text, "default|old|3|2023-11-14 22:13:00|"
	    "2023-11-14 22:14:00|0|1");

	/* A client of the real now: resets within the minute. */
	ck_assert(hit(s, &p, "live", rlg_now_ms(), NULL));
	live = sql_int(path, "SELECT reset_in_s FROM clients WHERE"
	    " client = 'live'");
	ck_assert_int_ge(live, 1);
	ck_assert_int_le(live, 60);
	ck_assert_int_eq(sql_int(path, "SELECT expired FROM clients WHERE"
	    " client = 'live'"), 0);
	sql_text(path, "SELECT policy, active_clients, total_count,"
	    " expired_rows FROM summary", text, sizeof text);
	ck_assert_str_eq(text, "default|1|1|1");
	rlg_store_close(s);
}
END_TEST

START_TEST(test_prune)
{
	char *path = path_in("prune.db"), client[32];
	struct rlg_policy p = policy(5, 60);
	struct rlg_store *s;
	int64_t deleted;
	int i;

	s = open_ok(path, 2000);
	/* 2500 rows expiring at WIN0 + 60 s: more than two batches. */
	for (i = 0; i < 2500; i++) {
		snprintf(client, sizeof client, "old-%d", i);
		ck_assert(hit(s, &p, client, T1, NULL));
	}
	/* 10 rows of a later window, expiring at WIN0 + 180 s. */
	for (i = 0; i < 10; i++) {
		snprintf(client, sizeof client, "new-%d", i);
		ck_assert(hit(s, &p, client, WIN0 + 120000, NULL));
	}

	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 59999, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 0);
	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 60000, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 2500);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 10);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state WHERE"
	    " client LIKE 'new-%'"), 10);
	ck_assert_int_eq(sql_int(path, "SELECT clients FROM rlg_clients"), 10);
	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 60000, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 0);
	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 180000, NULL), RLG_OK);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 0);

	/* A pruned client starts afresh. */
	ck_assert(hit(s, &p, "old-1", WIN0 + 180000, NULL));
	rlg_store_close(s);
}
END_TEST

START_TEST(test_null_safe)
{
	struct rlg_decision d;

	rlg_store_close(NULL);
	ck_assert_ptr_nonnull(rlg_store_errmsg(NULL));
	ck_assert_int_eq(rlg_store_step(NULL, NULL, 0, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(rlg_store_prune(NULL, T1, NULL), RLG_ESTORE);
}
END_TEST

/* ---- algorithms --------------------------------------------------- */

/*
 * 8 requests at each of these instants (ms after WIN0, a multiple of the
 * 10 s window), limit 5 per 10 s (token bucket: one every 2 s, burst 3);
 * the admissions per burst, counted by hand from app/limiter.h:
 *   fixed_window    the aligned windows 0, 10 s, 20 s, 30 s: 5 each.
 *   sliding_window  at 10 s the previous 5 still weigh fully: none; at
 *                   15 s they weigh 2.5: 3; at 25 s 3 * 0.5 + c < 5: 4;
 *                   at 34.999 s 4 * 0.5001 + c < 5: 3; at 35 s none.
 *   token_bucket    3 at once; then as the tat allows (now + 4 s).
 *   sliding_log     5 whenever the last 5 left the window: at 10 s
 *                   (0 <= 10 - 10), 25 s and 35 s, not at 34.999 s.
 */
static const int64_t burst_at_ms[8] = {
	0, 4000, 9999, 10000, 15000, 25000, 34999, 35000
};
static const struct {
	enum rlg_algorithm algorithm;
	int admitted[8];
} burst_cases[] = {
	{ RLG_ALG_FIXED_WINDOW,   { 5, 0, 0, 5, 0, 5, 5, 0 } },
	{ RLG_ALG_SLIDING_WINDOW, { 5, 0, 0, 0, 3, 4, 3, 0 } },
	{ RLG_ALG_TOKEN_BUCKET,   { 3, 2, 2, 1, 2, 3, 3, 0 } },
	{ RLG_ALG_SLIDING_LOG,    { 5, 0, 0, 5, 0, 5, 0, 5 } },
};

/* Loop test: _i picks the algorithm. */
START_TEST(test_algorithm_bursts)
{
	char *path = path_in("bursts.db");
	struct rlg_policy p = alg_policy(name_alg,
	    burst_cases[_i].algorithm, 5, 10, 3);
	const char *what = rlg_algorithm_name(p.lim.algorithm);
	struct rlg_decision d, want;
	struct sim m = { .p = &p };
	struct rlg_store *s;
	int b, k, admitted;

	s = open_ok(path, 2000);
	for (b = 0; b < 8; b++) {
		admitted = 0;
		for (k = 0; k < 8; k++) {
			admitted += hit(s, &p, "c", WIN0 + burst_at_ms[b], &d);
			sim_step(&m, WIN0 + burst_at_ms[b], &want);
			check_same(&d, &want, what, b * 8 + k);
		}
		ck_assert_msg(admitted == burst_cases[_i].admitted[b],
		    "%s: burst at %lld ms: %d admitted, %d expected", what,
		    (long long)burst_at_ms[b], admitted,
		    burst_cases[_i].admitted[b]);
		check_row(path, &m, "c");
	}
	rlg_store_close(s);
}
END_TEST

/*
 * 3000 requests of 3 clients, time moving on by 0-299 ms and now and then
 * back by up to 3 s: every decision, row and log equals the simulation's.
 */
START_TEST(test_algorithm_sequence)
{
	static const enum rlg_algorithm algs[4] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET,
	    RLG_ALG_SLIDING_LOG };
	static const char *const clients[3] = { "a", "b", "c" };
	char *path = path_in("sequence.db");
	struct rlg_policy p = alg_policy(name_alg, algs[_i], 7, 2, 4);
	struct rlg_decision d, want;
	struct sim m[3];
	struct rlg_store *s;
	uint64_t x = 88172645463325252ULL;
	int64_t now = T1;
	long i, admitted = 0;
	int c;

	memset(m, 0, sizeof m);
	for (c = 0; c < 3; c++)
		m[c].p = &p;
	s = open_ok(path, 2000);
	for (i = 0; i < 3000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (x % 40 == 0)
			now -= (int64_t)(x >> 8) % 3000;
		else
			now += (int64_t)(x >> 8) % 300;
		c = (int)((x >> 20) % 3);
		admitted += hit(s, &p, clients[c], now, &d);
		sim_step(&m[c], now, &want);
		check_same(&d, &want, rlg_algorithm_name(p.lim.algorithm), i);
	}
	for (c = 0; c < 3; c++)
		check_row(path, &m[c], clients[c]);
	/* Both paths ran: some admitted, some rejected. */
	ck_assert_int_gt(admitted, 300);
	ck_assert_int_lt(admitted, 2900);
	rlg_store_close(s);
}
END_TEST

/*
 * 3 per second (sliding_log), 5 per 10 s (token_bucket, burst 5) and 5
 * per 10 s (sliding_log) on every request: the 4th in one second is
 * rejected by the first and advances none of them.
 */
/*
 * An advisory item (a dry_run policy) is decided and stored, but its
 * rejection rejects nothing, and only its admissions advance it.
 */
START_TEST(test_advisory_items)
{
	char *path = path_in("advisory.db");
	struct rlg_policy strict = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 2,
	    10, 0);
	struct rlg_policy main_p = alg_policy(name_ten, RLG_ALG_FIXED_WINDOW,
	    5, 10, 0);
	struct rlg_store_item items[2] = {
		{ &strict, "c", true, false }, { &main_p, "c", false, false }
	};
	struct rlg_decision d[2];
	struct rlg_store *s;
	int i, admitted = 0;

	s = open_ok(path, 2000);
	for (i = 0; i < 7; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + i, d), RLG_OK);
		if (i < 2)
			ck_assert(d[0].admitted);
		else
			ck_assert(!d[0].admitted);   /* would reject: dry run */
		if (d[1].admitted)
			admitted++;
	}
	/* The enforcing policy alone decided: 5 of 7. */
	ck_assert_int_eq(admitted, 5);
	ck_assert_int_eq(count_of(path, "ten", "c"), 5);
	/* The dry-run log holds only what it admitted. */
	ck_assert_int_eq(nlog(path, NULL, NULL), 2);
	/* Once the enforcing policy rejects, nothing advances. */
	items[0].advisory = false;
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 20000, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	rlg_store_close(s);
}
END_TEST

/*
 * A charge for a new key (if_new) after a key item: applied when the key
 * has no live state, skipped when it has, all in the step: a client
 * address starts at most 3 new keys per 10 s window, every algorithm of
 * the key's policy; keys it holds go on while it may start no new one.
 * The rejection cache answers a skipped charge as the store does.
 */
START_TEST(test_new_key_charges)
{
	static const enum rlg_algorithm algs[] = { RLG_ALG_FIXED_WINDOW,
	    RLG_ALG_SLIDING_WINDOW, RLG_ALG_TOKEN_BUCKET, RLG_ALG_SLIDING_LOG };
	static char name_nk[] = "alg.new_keys";
	char *path = path_in("charges.db");
	struct rlg_policy key = alg_policy(name_alg, algs[_i], 2, 10, 2);
	struct rlg_policy charge = alg_policy(name_nk, RLG_ALG_FIXED_WINDOW, 3,
	    10, 3);
	struct rlg_store_item items[2] = {
		{ &key, "k:1", false, false }, { &charge, "10.0.0.1", false, true }
	};
	char kbuf[8];
	struct rlg_decision d[2];
	struct rlg_store *s;
	int i;

	s = open_with(path, 0, _i == 0 ? 4096 : 0);
	/* k:1 .. k:3 are new: each costs one of the 3 */
	for (i = 1; i <= 3; i++) {
		snprintf(kbuf, sizeof kbuf, "k:%d", i);
		items[0].client = kbuf;
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
		ck_assert(d[0].admitted && d[1].admitted);
		ck_assert_int_eq(d[1].remaining, 3 - i);
	}
	ck_assert_int_eq(count_of(path, "alg.new_keys", "10.0.0.1"), 3);
	/* a 4th new key: refused by the charge, nothing written */
	items[0].client = "k:4";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 1, d), RLG_OK);
	ck_assert(d[0].admitted);
	ck_assert(!d[1].admitted);
	ck_assert_int_gt(d[1].retry_ms, 0);
	ck_assert_int_eq(nstates(path), 4);
	/* a key the address holds: no charge (skipped), admitted */
	items[0].client = "k:1";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 2, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, 3);
	ck_assert_int_eq(d[1].retry_ms, 0);
	ck_assert_int_eq(d[1].reset_ms, 0);
	ck_assert_int_eq(count_of(path, "alg.new_keys", "10.0.0.1"), 3);
	/* k:1 exhausted (limit 2): rejected by its key; twice, so that a
	 * cache answers the second, and the charge stays skipped */
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 3 + i, d),
		    RLG_OK);
		ck_assert(!d[0].admitted);
		ck_assert(d[1].admitted);
		ck_assert_int_eq(d[1].remaining, 3);
	}
	/* another address starts its own */
	items[0].client = "k:4";
	items[1].client = "10.0.0.2";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 5, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	/* an advisory charge (a dry run) refuses nothing */
	items[0].client = "k:5";
	items[1].client = "10.0.0.1";
	items[1].advisory = true;
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 6, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(count_of(path, "alg.new_keys", "10.0.0.1"), 3);
	items[1].advisory = false;
	/* a charge with no key before it */
	ck_assert_int_eq(rlg_store_step(s, items + 1, 1, T1 + 7, d),
	    RLG_EINVAL);
	items[0].if_new = true;
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 7, d), RLG_EINVAL);
	items[0].if_new = false;
	/*
	 * The next window (and past every state's expiry): new again. A
	 * cluster asks whether the key's state key still exists (its slot
	 * differs from the charge's), which in real time it does: skipped.
	 */
	items[0].client = "k:1";
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 60000, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, cluster_mode ? 3 : 2);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_algorithms_all_or_nothing)
{
	char *path = path_in("mixed.db"), text[512];
	struct rlg_policy sec = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 1,
	    0);
	struct rlg_policy bucket = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5,
	    10, 5);
	struct rlg_policy ten = alg_policy(name_ten, RLG_ALG_SLIDING_LOG, 5, 10,
	    0);
	struct rlg_store_item items[3] = {
		{ &sec, "c", false, false }, { &bucket, "c", false, false }, { &ten, "c", false, false }
	};
	struct rlg_decision d[3];
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 100 * i, d),
		    RLG_OK);
		ck_assert(d[0].admitted && d[1].admitted && d[2].admitted);
	}
	ck_assert_int_eq(d[0].remaining, 0);
	ck_assert_int_eq(d[1].remaining, 2);
	ck_assert_int_eq(d[2].remaining, 2);
	/* The 4th in that second: only the first policy says no. */
	ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 300, d), RLG_OK);
	ck_assert(!d[0].admitted && d[1].admitted && d[2].admitted);
	ck_assert_int_eq(d[0].retry_ms, 700);
	ck_assert_int_eq(nlog(path, NULL, NULL), 6);
	log_dump(path, "sl", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999981000:0,1699999981100:0,"
	    "1699999981200:0");
	ck_assert_int_eq(state_field(path, "tb", "c", "tat_us"),
	    T1 * 1000 + 3 * 2000000);
	ck_assert_int_eq(count_of(path, "ten", "c"), 3);

	/*
	 * Once the three have left the 1 s window: the first admits 3
	 * again, the bucket 2 more (tat T1 + 6 s, up to 8 s ahead of now),
	 * the 10 s log 2 more (5): the third request is rejected by two.
	 */
	ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 1200, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted && d[2].admitted);
	ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 1200, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted && d[2].admitted);
	ck_assert_int_eq(d[2].remaining, 0);
	ck_assert_int_eq(rlg_store_step(s, items, 3, T1 + 1200, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted && !d[2].admitted);
	/* Exact rows: the 1 s log lost the rows that left its window. */
	log_dump(path, "sl", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999982200:0,1699999982200:1");
	log_dump(path, "ten", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999981000:0,1699999981100:0,"
	    "1699999981200:0,1699999982200:0,1699999982200:1");
	state_dump(path, "sl", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999982200|2|1699999984000|0|0");
	state_dump(path, "ten", "c", text, sizeof text);
	ck_assert_str_eq(text, "1699999981000|5|1699999993000|0|0");
	ck_assert_int_eq(state_field(path, "tb", "c", "tat_us"),
	    T1 * 1000 + 5 * 2000000);
	ck_assert_int_eq(nlog(path, NULL, NULL), 7);

	/* The same sliding_log twice on one request counts twice. */
	items[0].policy = &ten;
	items[1].policy = &ten;
	items[0].client = items[1].client = "d";
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
		ck_assert(d[0].admitted && d[1].admitted);
		ck_assert_int_eq(d[1].remaining, 3 - 2 * i);
	}
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(d[1].retry_ms, 10000);
	log_dump(path, "ten", "d", text, sizeof text);
	ck_assert_str_eq(text, "1699999981000:0,1699999981000:1,"
	    "1699999981000:2,1699999981000:3");
	rlg_store_close(s);
}
END_TEST

/*
 * The sliding log's rows follow the window: 10 per 5 s, a request every
 * 100 ms from two clients for 20 s. Never more rows than the limit; the
 * rows of a client that stops go with its state row when that expires;
 * an operator's DELETE of a state row resets the log too.
 */
START_TEST(test_sliding_log_rows)
{
	char *path = path_in("slide.db"), sql[256];
	struct rlg_policy p = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 10, 5,
	    0);
	struct rlg_decision d;
	struct rlg_store *s;
	sqlite3 *watch;
	sqlite3_stmt *st;
	int64_t deleted, now = WIN0;
	long admitted[2] = { 0, 0 };
	int t, c;

	s = open_ok(path, 2000);
	ck_assert_int_eq(sqlite3_open_v2(path, &watch, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(watch, "SELECT coalesce(max(n), 0)"
	    " FROM (SELECT count(*) AS n FROM rlg_log GROUP BY client)", -1,
	    &st, NULL), SQLITE_OK);
	for (t = 0; t < 200; t++) {
		now = WIN0 + 100 * t;
		for (c = 0; c < 2; c++)
			admitted[c] += hit(s, &p, c == 0 ? "a" : "b", now, &d);
		ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
		ck_assert_int_le(sqlite3_column_int64(st, 0), 10);
		if (t >= 50)          /* full ever since 0.9 s, trimmed */
			ck_assert_int_eq(sqlite3_column_int64(st, 0), 10);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(watch);
	/* 10 in each 5 s: at 0, 5, 10, 15 s. The rows: those of 15 s. */
	ck_assert_int_eq(admitted[0], 40);
	ck_assert_int_eq(admitted[1], 40);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log"), 20);
	ck_assert_int_eq(sql_int(path, "SELECT min(ts_ms) FROM rlg_log"),
	    WIN0 + 15000);
	/* The newest row leaves the window at 20.9 s: stored as 21 s. */
	ck_assert_int_eq(sql_int(path, "SELECT expires_ms FROM rlg_state"
	    " WHERE client = 'a'"), WIN0 + 21000);

	/* Before that: nothing to prune. */
	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 20999, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 0);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log"), 20);
	/* Client b goes on; a stops and is pruned with its rows. */
	ck_assert(hit(s, &p, "b", WIN0 + 20000, NULL));
	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 21000, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 1);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log WHERE"
	    " client = 'a'"), 0);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log WHERE"
	    " client = 'b'"), 10);

	/* An operator resets b by hand: its log goes too. */
	ck_assert(!hit(s, &p, "b", WIN0 + 20000, NULL));
	sql_exec(path, "DELETE FROM rlg_state WHERE client = 'b'");
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log"), 0);
	ck_assert(hit(s, &p, "b", WIN0 + 20000, &d));
	ck_assert_int_eq(d.remaining, 9);

	/*
	 * 2500 expired clients with 10 rows each: every row goes, in
	 * transactions that the store sizes by the rows they take along.
	 */
	snprintf(sql, sizeof sql, "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL"
	    " SELECT n + 1 FROM i WHERE n < 2499) INSERT INTO rlg_state"
	    " SELECT 'sl', 'x' || n, %lld, 10, %lld, 0, 0 FROM i",
	    (long long)WIN0, (long long)WIN0 + 5000);
	sql_exec(path, sql);
	sql_exec(path, "WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL"
	    " SELECT n + 1 FROM k WHERE n < 9) INSERT INTO rlg_log"
	    " SELECT policy, client, window_start_ms + 100 * k.n, 0"
	    " FROM rlg_state, k WHERE client LIKE 'x%'");
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log"), 25001);
	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 20000, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 2500);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log"), 1);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 1);
	rlg_store_close(s);
}
END_TEST

/*
 * A token bucket's expiry (its tat) is stored rounded up to a whole
 * second: requests whose tat stays in that second update the row without
 * the expiry (the tat still exact); the next second writes a new one.
 */
START_TEST(test_expiry_rounded)
{
	char *path = path_in("expiry.db"), text[128];
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 3, 1,
	    3);
	struct rlg_store *s;

	s = open_ok(path, 2000);
	ck_assert(hit(s, &tb, "c", T1, NULL));
	state_dump(path, "tb", "c", text, sizeof text);
	ck_assert_str_eq(text, "0|0|1699999982000|0|1699999981333334");
	ck_assert(hit(s, &tb, "c", T1, NULL));
	state_dump(path, "tb", "c", text, sizeof text);
	ck_assert_str_eq(text, "0|0|1699999982000|0|1699999981666668");
	ck_assert(hit(s, &tb, "c", T1, NULL));
	state_dump(path, "tb", "c", text, sizeof text);
	ck_assert_str_eq(text, "0|0|1699999983000|0|1699999982000002");
	ck_assert(!hit(s, &tb, "c", T1, NULL));
	rlg_store_close(s);
}
END_TEST

/* The views show what each algorithm keeps. */
START_TEST(test_views_algorithms)
{
	char *path = path_in("views.db"), text[256];
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5, 10,
	    3);
	struct rlg_policy sw = alg_policy(name_sw, RLG_ALG_SLIDING_WINDOW, 5,
	    10, 0);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 5, 10,
	    0);
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	ck_assert(hit(s, &tb, "c", T1, NULL));
	ck_assert(hit(s, &sw, "c", T1, NULL));
	ck_assert(hit(s, &sw, "c", T1, NULL));
	ck_assert(hit(s, &sw, "c", WIN0 + 10500, NULL));
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &sl, "c", T1 + 250 * i, NULL));

	sql_text(path, "SELECT count, window_start, resets_at, prev_count,"
	    " tat, log_rows FROM clients WHERE policy = 'tb'", text,
	    sizeof text);
	ck_assert_str_eq(text, "0|NULL|2023-11-14 22:13:03|0|"
	    "2023-11-14 22:13:03.000|0");
	sql_text(path, "SELECT count, window_start, resets_at, prev_count,"
	    " tat, log_rows FROM clients WHERE policy = 'sw'", text,
	    sizeof text);
	ck_assert_str_eq(text, "1|2023-11-14 22:13:10|2023-11-14 22:13:30|2|"
	    "NULL|0");
	sql_text(path, "SELECT count, window_start, resets_at, prev_count,"
	    " tat, log_rows FROM clients WHERE policy = 'sl'", text,
	    sizeof text);
	ck_assert_str_eq(text, "3|2023-11-14 22:13:01|2023-11-14 22:13:12|0|"
	    "NULL|3");
	sql_text(path, "SELECT policy, expired_rows, log_rows FROM summary"
	    " WHERE policy = 'sl'", text, sizeof text);
	ck_assert_str_eq(text, "sl|1|3");
	rlg_store_close(s);
}
END_TEST

/* ---- schema ------------------------------------------------------- */

/*
 * A file of the first rlgate (schema version 1, three rows) opened by this
 * one: migrated in place, rows kept, counting goes on from them, and the
 * tables look as in a new file.
 */
START_TEST(test_migrate_v1)
{
	char *path = path_in("v1.db"), *fresh = path_in("v2.db");
	char text[512], want[512];
	static const char objects[] = "SELECT group_concat(type || ':' ||"
	    " name, ',') FROM (SELECT type, name FROM sqlite_master"
	    " ORDER BY type, name)";
	static const char columns[] = "SELECT group_concat(name || ':' ||"
	    " type || ':' || \"notnull\" || ':' || coalesce(dflt_value, '')"
	    " || ':' || pk, ',') FROM pragma_table_info('rlg_state')";
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s;

	make_v1(path);
	s = open_ok(path, 2000);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
	sql_text(path, "SELECT group_concat(policy || ',' || client || ',' ||"
	    " window_start_ms || ',' || count || ',' || expires_ms || ',' ||"
	    " prev_count || ',' || tat_us, ';') FROM (SELECT * FROM rlg_state"
	    " ORDER BY policy, client)", text, sizeof text);
	ck_assert_str_eq(text,
	    "default,10.0.0.1,1699999980000,3,1700000040000,0,0;"
	    "default,10.0.0.2,1699999980000,5,1700000040000,0,0;"
	    "hour,10.0.0.1,1699999200000,42,1700002800000,0,0");
	/* rlg_clients counts the kept rows. */
	sql_text(path, "SELECT group_concat(policy || ':' || clients, ',')"
	    " FROM (SELECT * FROM rlg_clients ORDER BY policy)", text,
	    sizeof text);
	ck_assert_str_eq(text, "default:2,hour:1");

	/* The same objects and columns as a new file, and working views. */
	rlg_store_close(open_ok(fresh, 2000));
	sql_text(fresh, objects, want, sizeof want);
	sql_text(path, objects, text, sizeof text);
	ck_assert_str_eq(text, want);
	sql_text(fresh, columns, want, sizeof want);
	sql_text(path, columns, text, sizeof text);
	ck_assert_str_eq(text, want);
	sql_text(path, "SELECT policy, client, count, window_start, prev_count,"
	    " tat, log_rows, expired FROM clients ORDER BY policy, client",
	    text, sizeof text);
	ck_assert_str_eq(text, "default|10.0.0.1|3|2023-11-14 22:13:00|0|NULL|"
	    "0|1");
	ck_assert_int_eq(sql_int(path, "SELECT sum(total_count) FROM summary"),
	    0);

	/* Counting goes on from the kept rows. */
	ck_assert(hit(s, &p, "10.0.0.1", T1, &d));
	ck_assert_int_eq(d.remaining, 1);
	ck_assert(!hit(s, &p, "10.0.0.2", T1, NULL));
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state WHERE"
	    " policy = 'default' AND client = '10.0.0.1'"), 4);
	rlg_store_close(s);

	/* Opened again: nothing more to do. */
	s = open_ok(path, 2000);
	ck_assert(hit(s, &p, "10.0.0.1", T1, &d));
	ck_assert_int_eq(d.remaining, 0);
	rlg_store_close(s);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 3);
}
END_TEST

/*
 * 8 processes open one version 1 file at once, 20 times: every open
 * succeeds, one of them migrates, every step counts, no row is lost.
 */
START_TEST(test_processes_migrate)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_config cfg = { 0 };
	struct rlg_store *s;
	struct rlg_decision d;
	struct rlg_store_item item = { NULL, NULL, false, false };
	pid_t pids[8];
	char path[256], client[32];
	int round, i, go[2], status, failed = 0;
	char byte;

	for (round = 0; round < 20; round++) {
		snprintf(path, sizeof path, "%s/v1-%d.db", case_dir, round);
		make_v1(path);
		ck_assert_int_eq(pipe(go), 0);
		for (i = 0; i < 8; i++) {
			pids[i] = fork();
			ck_assert_int_ge(pids[i], 0);
			if (pids[i] != 0)
				continue;
			close(go[1]);
			if (read(go[0], &byte, 1) != 0)
				_exit(2);
			cfg.sqlite.path = path;
			cfg.sqlite.busy_timeout_ms = 10000;
			cfg.on_error = RLG_ON_ERROR_CLOSED;
			snprintf(client, sizeof client, "10.9.0.%d", i);
			item.policy = &p;
			item.client = client;
			if (rlg_store_open(&cfg, &s) != RLG_OK ||
			    rlg_store_step(s, &item, 1, T1, &d) != RLG_OK ||
			    !d.admitted) {
				fprintf(stderr, "%s\n", rlg_store_errmsg(s));
				_exit(1);
			}
			rlg_store_close(s);
			_exit(0);
		}
		close(go[0]);
		close(go[1]);              /* EOF: all start at once */
		for (i = 0; i < 8; i++) {
			ck_assert_int_eq(waitpid(pids[i], &status, 0),
			    pids[i]);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				failed++;
		}
		ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
		ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM"
		    " rlg_state"), 3 + 8);
		ck_assert_int_eq(sql_int(path, "SELECT sum(count) FROM"
		    " rlg_state WHERE policy = 'default'"), 3 + 5 + 8);
		ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM"
		    " pragma_table_info('rlg_state')"), 7);
	}
	ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- concurrency -------------------------------------------------- */

/* Requests each worker sends to client c in the many-clients tests. */
static int
sent_to(int client)
{
	return client % 6 + 1;
}

/*
 * One worker: its own handle on path; one client (CONC_SENT requests) or
 * NCLIENTS clients (sent_to(c) each, interleaved, from a different start),
 * or the algorithms (run_algorithms).
 */
static void
run_worker(struct worker *w)
{
	struct rlg_policy one = policy(CONC_LIMIT, 60);
	struct rlg_policy many = policy(MANY_LIMIT, 60);
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;
	struct rlg_store_item item = { NULL, NULL, false, false };
	struct rlg_decision d;
	char client[32];
	int i, r, c;

	store_cfg(&cfg, w->path, 30000);
	cfg.rejection_cache = w->cache;
	if (rlg_store_open(&cfg, &s) != RLG_OK) {
		snprintf(w->errmsg, sizeof w->errmsg, "%s",
		    rlg_store_errmsg(s));
		w->errors++;
	}
	store_cfg_free(&cfg);
	if (w->many == MODE_ALGS) {
		run_algorithms(s, w);
	} else if (w->many == MODE_ONE) {
		item.policy = &one;
		item.client = "hot";
		for (i = 0; i < CONC_SENT; i++) {
			if (rlg_store_step(s, &item, 1, T1, &d) != RLG_OK) {
				snprintf(w->errmsg, sizeof w->errmsg, "%s",
				    rlg_store_errmsg(s));
				w->errors++;
			} else if (d.admitted) {
				w->admitted++;
			}
		}
	} else {
		item.policy = &many;
		item.client = client;
		for (r = 0; r < 6; r++) {
			for (i = 0; i < NCLIENTS; i++) {
				c = (i + w->id * 7) % NCLIENTS;
				if (r >= sent_to(c))
					continue;
				snprintf(client, sizeof client, "10.1.0.%d",
				    c);
				if (rlg_store_step(s, &item, 1, T1, &d) !=
				    RLG_OK) {
					snprintf(w->errmsg, sizeof w->errmsg,
					    "%s", rlg_store_errmsg(s));
					w->errors++;
				} else if (d.admitted) {
					w->admitted++;
					w->per_client[c]++;
				}
			}
		}
	}
	rlg_store_close(s);
}

/*
 * ALGS_SENT times, at one fixed instant: a sliding_log request, a
 * token_bucket request (client "hot" each) and one request under both
 * (client "both").
 */
static void
run_algorithms(struct rlg_store *s, struct worker *w)
{
	struct rlg_policy log = alg_policy(name_sl, RLG_ALG_SLIDING_LOG,
	    ALGS_LOG_LIMIT, 60, 0);
	struct rlg_policy bucket = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET,
	    ALGS_BUCKET_LIMIT, 60, ALGS_BUCKET_BURST);
	struct rlg_store_item items[2] = { { &log, "both", false, false },
	    { &bucket, "both", false, false } };
	struct rlg_store_item one = { NULL, NULL, false, false };
	struct rlg_decision d[2];
	long *count;
	int i, k, rc;

	for (i = 0; i < ALGS_SENT; i++) {
		for (k = 0; k < 3; k++) {
			one.policy = k == 0 ? &log : &bucket;
			one.client = "hot";
			if (k < 2)
				rc = rlg_store_step(s, &one, 1, T1, d);
			else
				rc = rlg_store_step(s, items, 2, T1, d);
			count = k == 0 ? &w->admitted_log : k == 1 ?
			    &w->admitted_bucket : &w->admitted_both;
			if (rc != RLG_OK) {
				snprintf(w->errmsg, sizeof w->errmsg, "%s",
				    rlg_store_errmsg(s));
				w->errors++;
			} else if (d[0].admitted && (k < 2 || d[1].admitted)) {
				(*count)++;
			}
		}
	}
}

static void *
thread_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(w->barrier);
	run_worker(w);
	return NULL;
}

/* NWORKERS threads open path together (a new file) and send at once. */
static void
run_threads(const char *path, int many, int64_t cache, struct worker *w)
{
	pthread_barrier_t barrier;
	pthread_t t[NWORKERS];
	int i;

	pthread_barrier_init(&barrier, NULL, NWORKERS);
	for (i = 0; i < NWORKERS; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].path = path;
		w[i].many = many;
		w[i].id = i;
		w[i].cache = cache;
		w[i].barrier = &barrier;
		ck_assert_int_eq(pthread_create(&t[i], NULL, thread_main,
		    &w[i]), 0);
	}
	for (i = 0; i < NWORKERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&barrier);
}

/* NWORKERS processes, released together through a pipe, results back. */
static void
run_processes(const char *path, int many, int64_t cache,
    struct worker *w)
{
	int go[2], res[2], i, status;
	pid_t pids[NWORKERS];
	char byte;
	ssize_t got;
	size_t off;

	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(res), 0);
	for (i = 0; i < NWORKERS; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].path = path;
		w[i].many = many;
		w[i].id = i;
		w[i].cache = cache;
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0) {
			close(go[1]);
			close(res[0]);
			if (read(go[0], &byte, 1) != 1)
				_exit(2);
			run_worker(&w[i]);
			/* < PIPE_BUF: one atomic write per worker. */
			if (write(res[1], &w[i], sizeof w[i]) !=
			    (ssize_t)sizeof w[i])
				_exit(3);
			_exit(0);
		}
	}
	close(go[0]);
	close(res[1]);
	for (i = 0; i < NWORKERS; i++)
		ck_assert_int_eq(write(go[1], "g", 1), 1);
	close(go[1]);
	for (i = 0; i < NWORKERS; i++) {
		struct worker tmp;

		for (off = 0; off < sizeof tmp; off += (size_t)got) {
			got = read(res[0], (char *)&tmp + off,
			    sizeof tmp - off);
			ck_assert_int_gt(got, 0);
		}
		w[tmp.id] = tmp;
	}
	close(res[0]);
	for (i = 0; i < NWORKERS; i++) {
		ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

/* Exactly the limit over all workers, never more or fewer. */
static void
check_totals(const char *path, int many, struct worker *w)
{
	long total = 0, per[NCLIENTS], expect, sum_expect = 0;
	char client[32];
	int i, c;

	memset(per, 0, sizeof per);
	for (i = 0; i < NWORKERS; i++) {
		ck_assert_msg(w[i].errors == 0, "worker %d: %ld errors: %s",
		    i, w[i].errors, w[i].errmsg);
		total += w[i].admitted;
		for (c = 0; c < NCLIENTS; c++)
			per[c] += w[i].per_client[c];
	}
	if (many == MODE_ONE) {
		ck_assert_int_eq(total, CONC_LIMIT);
		ck_assert_int_eq(count_of(path, "default", "hot"), CONC_LIMIT);
		return;
	}
	for (c = 0; c < NCLIENTS; c++) {
		expect = NWORKERS * sent_to(c);
		if (expect > MANY_LIMIT)
			expect = MANY_LIMIT;
		sum_expect += expect;
		ck_assert_msg(per[c] == expect, "client %d: admitted %ld,"
		    " expected %ld", c, per[c], expect);
		snprintf(client, sizeof client, "10.1.0.%d", c);
		ck_assert_int_eq(count_of(path, "default", client), expect);
	}
	ck_assert_int_eq(total, sum_expect);
	ck_assert_int_eq(nstates(path), NCLIENTS);
}

/*
 * At one instant the sliding log admits exactly its limit, the bucket
 * exactly its burst, both together the smaller; the rows say so too.
 */
static void
check_algorithms(const char *path, struct worker *w)
{
	long log = 0, bucket = 0, both = 0;
	int i;

	for (i = 0; i < NWORKERS; i++) {
		ck_assert_msg(w[i].errors == 0, "worker %d: %ld errors: %s",
		    i, w[i].errors, w[i].errmsg);
		log += w[i].admitted_log;
		bucket += w[i].admitted_bucket;
		both += w[i].admitted_both;
	}
	ck_assert_int_eq(log, ALGS_LOG_LIMIT);
	ck_assert_int_eq(bucket, ALGS_BUCKET_BURST);
	ck_assert_int_eq(both, ALGS_BUCKET_BURST);
	ck_assert_int_eq(nlog(path, "sl", "hot"), ALGS_LOG_LIMIT);
	if (backend == RLG_BACKEND_SQLITE)
		ck_assert_int_eq(sql_int(path, "SELECT max(seq) FROM rlg_log"
		    " WHERE client = 'hot'"), ALGS_LOG_LIMIT - 1);
	ck_assert_int_eq(count_of(path, "sl", "hot"), ALGS_LOG_LIMIT);
	ck_assert_int_eq(nlog(path, "sl", "both"), ALGS_BUCKET_BURST);
	/* tat: burst emission intervals of 100 ms after T1. */
	ck_assert_int_eq(state_field(path, "tb", "hot", "tat_us"),
	    T1 * 1000 + ALGS_BUCKET_BURST * 100000);
	ck_assert_int_eq(state_field(path, "tb", "both", "tat_us"),
	    T1 * 1000 + ALGS_BUCKET_BURST * 100000);
}

START_TEST(test_processes_algorithms)
{
	char *path = path_in("procsalg.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_ALGS, 0, w);
	check_algorithms(path, w);
}
END_TEST

START_TEST(test_threads_algorithms)
{
	char *path = path_in("threadsalg.db");
	struct worker w[NWORKERS];

	run_threads(path, MODE_ALGS, 0, w);
	check_algorithms(path, w);
}
END_TEST

START_TEST(test_threads_one_client)
{
	char *path = path_in("threads1.db");
	struct worker w[NWORKERS];

	run_threads(path, MODE_ONE, 0, w);
	check_totals(path, MODE_ONE, w);
}
END_TEST

START_TEST(test_processes_one_client)
{
	char *path = path_in("procs1.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_ONE, 0, w);
	check_totals(path, MODE_ONE, w);
}
END_TEST

START_TEST(test_threads_many_clients)
{
	char *path = path_in("threadsn.db");
	struct worker w[NWORKERS];

	run_threads(path, MODE_MANY, 0, w);
	check_totals(path, MODE_MANY, w);
}
END_TEST

START_TEST(test_processes_many_clients)
{
	char *path = path_in("procsn.db");
	struct worker w[NWORKERS];

	run_processes(path, MODE_MANY, 0, w);
	check_totals(path, MODE_MANY, w);
}
END_TEST

/*
 * 8 processes open a new file at once, 50 times: every open succeeds (the
 * switch to WAL upgrades a lock without sqlite's busy handler).
 */
START_TEST(test_processes_open_new_file)
{
	struct rlg_store_config cfg = { 0 };
	struct rlg_store *s;
	pid_t pids[8];
	char path[256];
	int round, i, go[2], status, failed = 0;
	char byte;

	for (round = 0; round < 50; round++) {
		snprintf(path, sizeof path, "%s/new-%d.db", case_dir, round);
		ck_assert_int_eq(pipe(go), 0);
		for (i = 0; i < 8; i++) {
			pids[i] = fork();
			ck_assert_int_ge(pids[i], 0);
			if (pids[i] == 0) {
				close(go[1]);
				if (read(go[0], &byte, 1) != 0)
					_exit(2);
				cfg.sqlite.path = path;
				cfg.sqlite.busy_timeout_ms = 10000;
				cfg.on_error = RLG_ON_ERROR_CLOSED;
				if (rlg_store_open(&cfg, &s) != RLG_OK) {
					fprintf(stderr, "%s\n",
					    rlg_store_errmsg(s));
					_exit(1);
				}
				rlg_store_close(s);
				_exit(0);
			}
		}
		close(go[0]);
		close(go[1]);              /* EOF: all start at once */
		for (i = 0; i < 8; i++) {
			ck_assert_int_eq(waitpid(pids[i], &status, 0),
			    pids[i]);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				failed++;
		}
		ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
	}
	ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- errors ------------------------------------------------------- */

START_TEST(test_missing_directory)
{
	char *dir = path_in("missing"), *path = path_in("missing/rl.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_config cfg = { .sqlite.path = path, .sqlite.busy_timeout_ms = 2000,
	    .on_error = RLG_ON_ERROR_CLOSED };
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_decision d;
	struct rlg_store *s = NULL;

	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_ESTORE);
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(strstr(rlg_store_errmsg(s), path) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_msg(strstr(rlg_store_errmsg(s), "No such file") != NULL,
	    "%s", rlg_store_errmsg(s));

	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), path) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(rlg_store_prune(s, T1, NULL), RLG_ESTORE);

	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 4);
	ck_assert_int_eq(file_mode(path), 0600);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
	ck_assert_int_eq(rlg_store_prune(s, T1, NULL), RLG_OK);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_garbage_file)
{
	char *path = path_in("garbage.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_config cfg = { .sqlite.path = path, .sqlite.busy_timeout_ms = 2000,
	    .on_error = RLG_ON_ERROR_CLOSED };
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_decision d;
	struct rlg_store *s = NULL;

	write_garbage(path);
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_ESTORE);
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "not a database") != NULL &&
	    strstr(rlg_store_errmsg(s), path) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "not a database") != NULL,
	    "%s", rlg_store_errmsg(s));

	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 4);
	ck_assert_int_eq(file_mode(path), 0600);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_deleted_while_open)
{
	char *path = path_in("deleted.db"), side[300];
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	int i;

	s = open_ok(path, 2000);
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "c", T1, NULL));

	/* Only the main file: the -wal and -shm left behind are stale. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert(hit(s, &p, "c", T1 + 1000, &d));
	ck_assert_int_eq(d.remaining, 4);
	ck_assert_int_eq(file_mode(path), 0600);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 3);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state"), 1);

	/* All three files, as an operator should. */
	ck_assert(hit(s, &p, "c", T1 + 1500, NULL));
	ck_assert_int_eq(unlink(path), 0);
	snprintf(side, sizeof side, "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof side, "%s-shm", path);
	unlink(side);
	ck_assert(hit(s, &p, "c", T1 + 2500, &d));
	ck_assert_int_eq(d.remaining, 4);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state"), 1);
	ck_assert_int_eq(file_mode(path), 0600);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_replaced_while_open)
{
	char *path = path_in("replaced.db"), *junk = path_in("junk");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_decision d;
	struct rlg_store *s;

	s = open_ok(path, 2000);
	ck_assert(hit(s, &p, "c", T1, NULL));
	write_garbage(junk);
	ck_assert_int_eq(rename(junk, path), 0);

	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 1000, &d),
	    RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "not a database") != NULL,
	    "%s", rlg_store_errmsg(s));
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 1001, &d),
	    RLG_ESTORE);

	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1 + 1002, &d), RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 4);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_lock_held)
{
	char *path = path_in("locked.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_decision d;
	struct rlg_store *s;
	struct timespec t0, t1;
	sqlite3 *other;
	const char *msg;
	double elapsed_ms;

	s = open_ok(path, 50);
	ck_assert(hit(s, &p, "c", T1, NULL));

	ck_assert_int_eq(sqlite3_open_v2(path, &other, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL,
	    NULL), SQLITE_OK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	elapsed_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	msg = rlg_store_errmsg(s);
	ck_assert_msg((strstr(msg, "locked") != NULL ||
	    strstr(msg, "busy") != NULL || strstr(msg, "BUSY") != NULL) &&
	    strstr(msg, path) != NULL, "%s", msg);
	ck_assert_msg(elapsed_ms >= 40 && elapsed_ms < 5000,
	    "waited %.1f ms for a 50 ms busy timeout", elapsed_ms);
	ck_assert_int_eq(rlg_store_prune(s, T1, NULL), RLG_ESTORE);

	ck_assert_int_eq(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(other);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 3);    /* the failed step wrote nothing */
	rlg_store_close(s);
}
END_TEST

START_TEST(test_newer_schema)
{
	char *path = path_in("newer.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_config cfg = { .sqlite.path = path, .sqlite.busy_timeout_ms = 2000,
	    .on_error = RLG_ON_ERROR_CLOSED };
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	const char *want = "database schema version 4 is newer than this"
	    " rlgate (3)";

	rlg_store_close(open_ok(path, 2000));
	sql_exec(path, "PRAGMA user_version = 4");
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), want) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), want) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 4);

	sql_exec(path, "PRAGMA user_version = 3");
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert(d.admitted);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_bad_items)
{
	char *path = path_in("items.db"), key[RLG_CLIENT_KEY_MAX + 2];
	struct rlg_policy p = policy(5, 60), bad = policy(0, 60);
	struct rlg_store_item item = { &p, key, false, false };
	struct rlg_decision d;
	struct rlg_store *s;

	s = open_ok(path, 2000);
	memset(key, 'k', sizeof key - 1);
	key[sizeof key - 1] = '\0';           /* RLG_CLIENT_KEY_MAX + 1 */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "client key") != NULL, "%s",
	    rlg_store_errmsg(s));
	key[RLG_CLIENT_KEY_MAX] = '\0';       /* exactly the maximum */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert(d.admitted);

	ck_assert_int_eq(rlg_store_step(s, &item, 0, T1, &d), RLG_EINVAL);
	item.client = NULL;
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);

	/* The limiter refuses: EINVAL, the transaction is not left open. */
	item.policy = &bad;
	item.client = "c";
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "default") != NULL, "%s",
	    rlg_store_errmsg(s));
	item.policy = &p;
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert_int_eq(d.remaining, 4);
	ck_assert_int_eq(nstates(path), 2);
	rlg_store_close(s);
}
END_TEST

/* ---- Redis only ----------------------------------------------------- */

/*
 * A redis-server of a test's own, on a port it chooses (so it can be
 * killed and started again on the same one), with a password or a unix
 * socket if asked; started and stopped by pid, its dir removed at the end.
 */
struct own_redis {
	pid_t pid;
	int port;
	char dir[64];
	char sock[128];                /* unix socket path, or "" */
	const char *password;          /* requirepass, or NULL */
};

/* A port on 127.0.0.1 that nothing listens on right now. */
static int
free_port(void)
{
	struct sockaddr_in sa;
	unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	int fd, i, port;

	for (i = 0; i < 200; i++) {
		port = 33000 + (int)(rand_r(&seed) % 20000);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		ck_assert_int_ge(fd, 0);
		memset(&sa, 0, sizeof sa);
		sa.sin_family = AF_INET;
		sa.sin_port = htons((unsigned short)port);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
			close(fd);
			return port;
		}
		close(fd);
	}
	ck_abort_msg("no free port");
	return -1;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether the server answers PING (after AUTH, if it has a password). */
static bool
own_answers(const struct own_redis *o)
{
	struct timeval tv = { 0, 200 * 1000 };
	redisContext *c;
	redisReply *r = NULL;
	bool ok = false;

	c = redisConnectWithTimeout("127.0.0.1", o->port, tv);
	if (c == NULL)
		return false;
	if (c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
		if (o->password != NULL)
			r = redisCommand(c, "AUTH %s", o->password);
		if (o->password == NULL || (r != NULL &&
		    r->type == REDIS_REPLY_STATUS)) {
			freeReplyObject(r);
			r = redisCommand(c, "PING");
			ok = r != NULL && r->type == REDIS_REPLY_STATUS;
		}
		freeReplyObject(r);
	}
	redisFree(c);
	return ok;
}

/* Starts (or starts again) o's server; waits until it answers. */
static void
own_start(struct own_redis *o)
{
	char port[16], log[96];
	int fd, waited;

	if (o->dir[0] == '\0') {
		snprintf(o->dir, sizeof o->dir, "/tmp/rlg-own-redis-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(o->dir));
	}
	snprintf(port, sizeof port, "%d", o->port);
	snprintf(log, sizeof log, "%s/redis.log", o->dir);
	fflush(NULL);
	o->pid = fork();
	ck_assert_int_ge(o->pid, 0);
	if (o->pid == 0) {
		/* Dies with the test, should that fail before stopping it. */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		for (fd = STDERR_FILENO + 1; fd < 1024; fd++)
			close(fd);
		if (o->password != NULL && o->sock[0] != '\0')
			execlp("redis-server", "redis-server", "--port", port,
			    "--bind", "127.0.0.1", "--save", "", "--appendonly",
			    "no", "--dir", o->dir, "--requirepass",
			    o->password, "--unixsocket", o->sock,
			    "--unixsocketperm", "700", (char *)NULL);
		else if (o->password != NULL)
			execlp("redis-server", "redis-server", "--port", port,
			    "--bind", "127.0.0.1", "--save", "", "--appendonly",
			    "no", "--dir", o->dir, "--requirepass",
			    o->password, (char *)NULL);
		else if (o->sock[0] != '\0')
			execlp("redis-server", "redis-server", "--port", port,
			    "--bind", "127.0.0.1", "--save", "", "--appendonly",
			    "no", "--dir", o->dir, "--unixsocket", o->sock,
			    "--unixsocketperm", "700", (char *)NULL);
		else
			execlp("redis-server", "redis-server", "--port", port,
			    "--bind", "127.0.0.1", "--save", "", "--appendonly",
			    "no", "--dir", o->dir, (char *)NULL);
		_exit(127);
	}
	for (waited = 0; waited < HEAL_MS; waited += POLL_MS) {
		if (own_answers(o))
			return;
		ck_assert_msg(waitpid(o->pid, NULL, WNOHANG) == 0,
		    "redis-server on port %d exited (see %s)", o->port, log);
		sleep_ms(POLL_MS);
	}
	ck_abort_msg("redis-server on port %d did not answer", o->port);
}

/* Stops it with sig (SIGKILL: as a crash) and reaps it, bounded. */
static void
own_stop(struct own_redis *o, int sig)
{
	int waited;

	if (o->pid <= 0)
		return;
	kill(o->pid, sig);
	for (waited = 0; waited < 5000; waited += POLL_MS) {
		if (waitpid(o->pid, NULL, WNOHANG) == o->pid) {
			o->pid = 0;
			return;
		}
		sleep_ms(POLL_MS);
	}
	kill(o->pid, SIGKILL);
	waitpid(o->pid, NULL, 0);
	o->pid = 0;
}

static void
own_cleanup(struct own_redis *o)
{
	own_stop(o, SIGTERM);
	if (o->dir[0] != '\0')
		nftw(o->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	o->dir[0] = '\0';
}

/* A Redis store on url, clock = local; its open's result in *rc. */
static struct rlg_store *
open_url(const char *url, int timeout_ms, int *rc)
{
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;

	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.clock = RLG_CLOCK_LOCAL;
	if (timeout_ms > 0)
		cfg.redis.timeout_ms = timeout_ms;
	*rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_ptr_nonnull(s);
	return s;
}

/* Steps until the store answers, at most HEAL_MS; the last result. */
static int
step_until_ok(struct rlg_store *s, const struct rlg_policy *p,
    const char *client, struct rlg_decision *d)
{
	struct rlg_store_item item = { p, client, false, false };
	int64_t t0 = mono_ms();
	int rc;

	while ((rc = rlg_store_step(s, &item, 1, T1, d)) != RLG_OK &&
	    mono_ms() - t0 < HEAL_MS)
		sleep_ms(POLL_MS);
	return rc;
}

/* errmsg names the server (and not a password). */
static void
check_names(const struct rlg_store *s, int port, const char *also)
{
	const char *msg = rlg_store_errmsg(s);
	char name[64];

	snprintf(name, sizeof name, "redis 127.0.0.1:%d", port);
	ck_assert_msg(strstr(msg, name) != NULL, "%s", msg);
	if (also != NULL)
		ck_assert_msg(strstr(msg, also) != NULL, "%s", msg);
}

/*
 * Down at open: RLG_ESTORE with a usable handle whose errmsg names the
 * server; steps fail at once meanwhile; the same handle heals once a
 * server listens there.
 */
START_TEST(test_redis_down_at_open)
{
	struct own_redis o = { .port = free_port() };
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_decision d;
	struct rlg_store *s;
	char url[64];
	int64_t t0;
	int rc;

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "refused");
	t0 = mono_ms();
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_lt(mono_ms() - t0, 50);
	check_names(s, o.port, "refused");
	ck_assert_int_eq(rlg_store_prune(s, T1, NULL), RLG_OK);

	own_start(&o);
	ck_assert_msg(step_until_ok(s, &p, "c", &d) == RLG_OK, "%s",
	    rlg_store_errmsg(s));
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 4);
	rlg_store_close(s);
	own_cleanup(&o);
}
END_TEST

/*
 * Killed mid-run: RLG_ESTORE naming the server; started again on the same
 * port, the same handle goes on (from a fresh state: no persistence).
 */
START_TEST(test_redis_killed_mid_run)
{
	struct own_redis o = { .port = free_port() };
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_decision d;
	struct rlg_store *s;
	char url[64];
	int rc, i;

	own_start(&o);
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "c", T1, NULL));

	own_stop(&o, SIGKILL);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	check_names(s, o.port, NULL);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	check_names(s, o.port, NULL);

	own_start(&o);
	ck_assert_msg(step_until_ok(s, &p, "c", &d) == RLG_OK, "%s",
	    rlg_store_errmsg(s));
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 4);
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 3);
	rlg_store_close(s);
	own_cleanup(&o);
}
END_TEST

/* Connections waiting on the listener, accepted and closed: how many. */
static int
drain(int lfd)
{
	int fd, n = 0;

	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		close(fd);
		n++;
	}
	ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
	return n;
}

/*
 * A server that accepts and never answers: each connect times out after
 * timeout_ms; then no connection at all until the backoff is over (100
 * ms, then 200 ms), so a dead Redis costs nothing per request.
 */
START_TEST(test_redis_backoff)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false };
	struct sockaddr_in sa;
	struct rlg_decision d;
	struct rlg_store *s;
	socklen_t len = sizeof sa;
	int lfd, port, rc, i;
	int64_t t0;
	char url[64];

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(lfd, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(lfd, 64), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
	t0 = mono_ms();
	s = open_url(url, 100, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	ck_assert_int_ge(mono_ms() - t0, 90);
	check_names(s, port, "timed out after 100 ms");
	ck_assert_int_eq(drain(lfd), 1);

	/* Within the first backoff: fail at once, no connection. */
	t0 = mono_ms();
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d),
		    RLG_ESTORE);
	ck_assert_int_lt(mono_ms() - t0, 50);
	ck_assert_int_eq(drain(lfd), 0);
	check_names(s, port, "timed out");

	/* After it: one attempt, then a backoff of 200 ms. */
	sleep_ms(150);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(drain(lfd), 1);
	sleep_ms(60);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(drain(lfd), 0);
	sleep_ms(250);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(drain(lfd), 1);
	rlg_store_close(s);
	close(lfd);
}
END_TEST

/* SCRIPT FLUSH under a live handle: NOSCRIPT, loaded again, answered. */
START_TEST(test_redis_noscript)
{
	char *path = path_in("noscript");
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s = open_ok(path, 0);
	redisReply *r;

	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 4);
	r = rdb(path, "SCRIPT FLUSH");
	freeReplyObject(r);
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 3);
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 2);
	rlg_store_close(s);
}
END_TEST

/* Redis TIME in ms. */
static int64_t
redis_time_ms(const char *path)
{
	redisReply *r = rdb(path, "TIME");
	int64_t t;

	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	ck_assert_uint_eq(r->elements, 2);
	t = strtoll(r->element[0]->str, NULL, 10) * 1000 +
	    strtoll(r->element[1]->str, NULL, 10) / 1000;
	freeReplyObject(r);
	return t;
}

/*
 * clock = redis: the caller's now_ms (here 1970) is not used; the window
 * and the log follow Redis TIME.
 */
START_TEST(test_redis_clock)
{
	char *path = path_in("clock");
	struct rlg_policy p = policy(5, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 10,
	    0);
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_store_config cfg;
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	char text[256];
	int64_t before, after, ws, ts;

	store_cfg(&cfg, path, 0);
	cfg.redis.clock = RLG_CLOCK_REDIS;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);
	store_cfg_free(&cfg);

	before = redis_time_ms(path);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, 1, &d), RLG_OK);
	item.policy = &sl;
	ck_assert_int_eq(rlg_store_step(s, &item, 1, 1, &d), RLG_OK);
	after = redis_time_ms(path);
	ck_assert(d.admitted);

	ws = state_field(path, "default", "c", "window_start_ms");
	ck_assert_int_ge(ws, before - before % 60000);
	ck_assert_int_le(ws, after - after % 60000);
	log_dump(path, "sl", "c", text, sizeof text);
	ts = strtoll(text, NULL, 10);
	ck_assert_msg(ts >= before && ts <= after, "log %s, TIME %lld..%lld",
	    text, (long long)before, (long long)after);
	/* The reset counts from Redis' now too: at most one window away. */
	ck_assert_int_le(d.reset_ms, 10000);
	ck_assert_int_ge(d.reset_ms, 10000 - (after - before) - 1);
	rlg_store_close(s);
}
END_TEST

/*
 * AUTH: a password with '@' and ':' in the url, an ACL user, a wrong
 * password and none: clear errors that never show the password.
 */
START_TEST(test_redis_auth)
{
	struct own_redis o = { .port = free_port(),
	    .password = "pw@with:colon" };
	struct rlg_policy p = policy(5, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 2, 10,
	    0);
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5, 10,
	    3);
	struct rlg_store_item item = { &p, "t", false, false };
	struct rlg_store_config cfg;
	struct rlg_decision d;
	struct rlg_store *s;
	redisReply *r;
	char url[128];
	int rc;

	own_start(&o);
	snprintf(url, sizeof url, "redis://:pw@with:colon@127.0.0.1:%d",
	    o.port);
	s = open_url(url, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert(hit(s, &p, "c", T1, &d));
	rlg_store_close(s);

	snprintf(url, sizeof url, "redis://:badsecret@127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "AUTH failed");
	ck_assert_msg(strstr(rlg_store_errmsg(s), "WRONGPASS") != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_msg(strstr(rlg_store_errmsg(s), "badsecret") == NULL, "%s",
	    rlg_store_errmsg(s));
	rlg_store_close(s);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "NOAUTH");
	ck_assert_msg(strstr(rlg_store_errmsg(s), "[store] url") != NULL,
	    "%s", rlg_store_errmsg(s));
	rlg_store_close(s);

	/*
	 * An ACL user with the README's permissions (and only those), and a
	 * database of its own.
	 */
	r = rcmd(o.port, o.password, 0, "ACL SETUSER alice on >alice%%pw"
	    " ~rlg:* resetchannels -@all +ping +select +evalsha +script|load"
	    " +hmget +hset +lrange +linsert +ltrim +rpush +pexpire +time");
	freeReplyObject(r);
	snprintf(url, sizeof url, "redis://alice:alice%%25pw@127.0.0.1:%d/3",
	    o.port);
	s = open_url(url, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert(hit(s, &p, "u", T1, &d));
	ck_assert(hit(s, &sl, "u", T1, &d));
	ck_assert(hit(s, &sl, "u", T1 + 1, &d));
	ck_assert(!hit(s, &sl, "u", T1 + 2, &d));
	ck_assert(hit(s, &tb, "u", T1, &d));
	rlg_store_close(s);
	/* clock = redis: TIME in the script is allowed too. */
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);
	store_cfg_free(&cfg);
	ck_assert_msg(rlg_store_step(s, &item, 1, 0, &d) == RLG_OK, "%s",
	    rlg_store_errmsg(s));
	ck_assert(d.admitted);
	rlg_store_close(s);
	r = rcmd(o.port, o.password, 3, "EXISTS rlg:{u}:default");
	ck_assert_int_eq(r->integer, 1);
	freeReplyObject(r);
	snprintf(url, sizeof url, "redis://alice:nope@127.0.0.1:%d/3",
	    o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "AUTH failed");
	rlg_store_close(s);
	own_cleanup(&o);
}
END_TEST

/* A unix socket with ?db=N, and a database that does not exist. */
START_TEST(test_redis_unix_socket)
{
	struct own_redis o = { .port = free_port() };
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	redisReply *r;
	char url[256];
	int rc;

	snprintf(o.dir, sizeof o.dir, "/tmp/rlg-own-redis-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(o.dir));
	snprintf(o.sock, sizeof o.sock, "%s/redis.sock", o.dir);
	own_start(&o);
	snprintf(url, sizeof url, "unix:%s?db=2", o.sock);
	s = open_url(url, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 3);
	rlg_store_close(s);
	r = rcmd(o.port, NULL, 2, "HGET rlg:{c}:default count");
	ck_assert_str_eq(r->str, "2");
	freeReplyObject(r);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d/99", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "SELECT failed");
	rlg_store_close(s);
	own_cleanup(&o);
}
END_TEST

/* Every key written expires: PEXPIRE by expires_ms - now. */
START_TEST(test_redis_keys_expire)
{
	char *path = path_in("expire");
	struct rlg_policy fw = policy(5, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 10,
	    0);
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5, 10,
	    3);
	struct rlg_store *s = open_ok(path, 0);
	redisReply *r, *ttl;
	int64_t deleted = -1;
	size_t i;

	ck_assert(hit(s, &fw, "c", T1, NULL));
	ck_assert(hit(s, &sl, "c", T1, NULL));
	ck_assert(hit(s, &tb, "c", T1, NULL));
	r = rdb(path, "PTTL rlg:{c}:default");
	ck_assert_int_gt(r->integer, 58000);
	ck_assert_int_le(r->integer, 59000);
	freeReplyObject(r);
	r = rdb(path, "PTTL rlg:{c}:sl");
	ck_assert_int_gt(r->integer, 9000);
	ck_assert_int_le(r->integer, 10000);
	freeReplyObject(r);
	r = rdb(path, "PTTL rlg:{c}:sl:log");
	ck_assert_int_gt(r->integer, 9000);
	ck_assert_int_le(r->integer, 10000);
	freeReplyObject(r);
	/* tat = T1 + 2 s. */
	r = rdb(path, "PTTL rlg:{c}:tb");
	ck_assert_int_gt(r->integer, 1000);
	ck_assert_int_le(r->integer, 2000);
	freeReplyObject(r);
	r = rdb(path, "KEYS *");
	ck_assert_uint_eq(r->elements, 4);
	for (i = 0; i < r->elements; i++) {
		ttl = rdb(path, "PTTL %s", r->element[i]->str);
		ck_assert_msg(ttl->integer > 0, "%s: PTTL %lld",
		    r->element[i]->str, (long long)ttl->integer);
		freeReplyObject(ttl);
	}
	freeReplyObject(r);

	/* prune has nothing to do: the keys expire by themselves. */
	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 3600000, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 0);
	ck_assert_int_eq(nstates(path), 3);
	rlg_store_close(s);
}
END_TEST

/*
 * Client keys: braces inside are harmless (one prefix tags every key of
 * the client); an empty key or one that starts with '}' would leave the
 * tag empty and is refused.
 */
START_TEST(test_redis_client_keys)
{
	char *path = path_in("keys");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "", false, false };
	struct rlg_decision d;
	struct rlg_store *s = open_ok(path, 0);
	const char *good[] = { "a}b", "a", "{x}", "x{", "10.0.0.1|k:0a1b",
	    "2001:db8::/64", "unknown" };
	size_t i;

	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "hash tag") != NULL, "%s",
	    rlg_store_errmsg(s));
	item.client = "}x";
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		ck_assert(hit(s, &p, good[i], T1, &d));
		ck_assert(hit(s, &p, good[i], T1, &d));
		ck_assert_int_eq(d.remaining, 3);
		ck_assert_int_eq(count_of(path, "default", good[i]), 2);
	}
	ck_assert_int_eq(nstates(path), (int64_t)(sizeof good /
	    sizeof good[0]));
	rlg_store_close(s);
}
END_TEST

/*
 * A fake Redis that answers SCRIPT LOAD with a SHA1, PING with +PONG,
 * AUTH and SELECT with +OK, and EVALSHA with fake_reply: what a malformed
 * reply does.
 */
struct fake {
	int lfd;
	int port;
	pthread_t tid;
	pthread_mutex_t mu;
	const char *reply;             /* to EVALSHA */
	int loads;                     /* SCRIPT LOADs seen */
	int evals;                     /* EVALSHAs seen */
	int askings;                   /* ASKINGs seen */
	char slots[128];               /* to CLUSTER (SLOTS), if set */
	volatile int stop;
};

/* The length of the first whole RESP command in buf, or 0; its name. */
static size_t
resp_command(const char *buf, size_t len, char *name, size_t size)
{
	const char *at = buf, *end = buf + len, *nl;
	long n, i, blen;

	if (len < 4 || *at != '*' || (nl = memchr(at, '\n', len)) == NULL)
		return 0;
	n = strtol(at + 1, NULL, 10);
	at = nl + 1;
	for (i = 0; i < n; i++) {
		if (at >= end || *at != '$' ||
		    (nl = memchr(at, '\n', (size_t)(end - at))) == NULL)
			return 0;
		blen = strtol(at + 1, NULL, 10);
		at = nl + 1;
		if (end - at < blen + 2)
			return 0;
		if (i == 0)
			snprintf(name, size, "%.*s", (int)blen, at);
		at += blen + 2;
	}
	return (size_t)(at - buf);
}

static void *
fake_main(void *arg)
{
	static char buf[1 << 18];
	struct fake *f = arg;
	char name[32];
	const char *out;
	size_t have, used;
	ssize_t got;
	int fd;

	while (!f->stop) {
		if ((fd = accept(f->lfd, NULL, NULL)) < 0) {
			sleep_ms(5);
			continue;
		}
		have = 0;
		for (;;) {
			got = read(fd, buf + have, sizeof buf - have);
			if (got <= 0)
				break;
			have += (size_t)got;
			while ((used = resp_command(buf, have, name,
			    sizeof name)) > 0) {
				pthread_mutex_lock(&f->mu);
				if (strcasecmp(name, "SCRIPT") == 0) {
					f->loads++;
					out = "$40\r\n0123456789abcdef0123456789"
					    "abcdef01234567\r\n";
				} else if (strcasecmp(name, "EVALSHA") == 0) {
					f->evals++;
					out = f->reply;
				} else if (strcasecmp(name, "CLUSTER") == 0 &&
				    f->slots[0] != '\0') {
					out = f->slots;
				} else if (strcasecmp(name, "PING") == 0) {
					out = "+PONG\r\n";
				} else {
					if (strcasecmp(name, "ASKING") == 0)
						f->askings++;
					out = "+OK\r\n";
				}
				pthread_mutex_unlock(&f->mu);
				if (write(fd, out, strlen(out)) < 0)
					break;
				memmove(buf, buf + used, have - used);
				have -= used;
			}
		}
		close(fd);
	}
	return NULL;
}

static void
fake_start(struct fake *f)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;

	memset(f, 0, sizeof *f);
	pthread_mutex_init(&f->mu, NULL);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(f->lfd, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(f->lfd, 16), 0);
	ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&sa, &len),
	    0);
	f->port = ntohs(sa.sin_port);
	ck_assert_int_eq(pthread_create(&f->tid, NULL, fake_main, f), 0);
}

static void
fake_stop(struct fake *f)
{
	f->stop = 1;
	pthread_join(f->tid, NULL);
	close(f->lfd);
	pthread_mutex_destroy(&f->mu);
}

/*
 * Malformed replies are store failures (RLG_ESTORE, errmsg naming the
 * server and what was wrong); a well-formed one is taken field by field;
 * NOSCRIPT twice in a row is retried once only.
 */
START_TEST(test_redis_strict_reply)
{
	static const struct {
		const char *reply;
		const char *msg;       /* NULL: RLG_OK */
	} cases[] = {
		{ ":1\r\n", "unexpected reply: an integer," },
		{ "*2\r\n:1\r\n:1\r\n", "unexpected reply: an array of 2," },
		{ "*6\r\n:1\r\n:1\r\n:5\r\n$1\r\n4\r\n:1000\r\n:0\r\n",
		    "element 3 is a string" },
		{ "*6\r\n:1\r\n:2\r\n:5\r\n:4\r\n:1000\r\n:0\r\n",
		    "element 1 is out of range (2)" },
		{ "*6\r\n:1\r\n:1\r\n:5\r\n:-4\r\n:1000\r\n:0\r\n",
		    "element 3 is out of range (-4)" },
		{ "*6\r\n:1\r\n:1\r\n:5\r\n*0\r\n:1000\r\n:0\r\n",
		    "element 3 is an array" },
		{ "-ERR rlgate: bad argument\r\n",
		    "EVALSHA failed: ERR rlgate: bad argument" },
		{ "$-1\r\n", "unexpected reply: nil," },
		{ "-NOSCRIPT No matching script\r\n",
		    "EVALSHA failed: NOSCRIPT" },
		{ "*6\r\n:1700000000000\r\n:1\r\n:5\r\n:4\r\n:1000\r\n:0\r\n",
		    NULL },
	};
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_decision d;
	struct rlg_store *s;
	struct fake f;
	char url[64];
	size_t i;
	int rc, loads;

	fake_start(&f);
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", f.port);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		pthread_mutex_lock(&f.mu);
		f.reply = cases[i].reply;
		loads = f.loads;
		pthread_mutex_unlock(&f.mu);
		s = open_url(url, 0, &rc);
		ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
		rc = rlg_store_step(s, &item, 1, T1, &d);
		if (cases[i].msg == NULL) {
			ck_assert_int_eq(rc, RLG_OK);
			ck_assert(d.admitted);
			ck_assert_int_eq(d.limit, 5);
			ck_assert_int_eq(d.remaining, 4);
			ck_assert_int_eq(d.reset_ms, 1000);
			ck_assert_int_eq(d.retry_ms, 0);
		} else {
			ck_assert_msg(rc == RLG_ESTORE, "case %zu", i);
			check_names(s, f.port, cases[i].msg);
		}
		rlg_store_close(s);
		pthread_mutex_lock(&f.mu);
		/* NOSCRIPT: loaded at connect and once again, no more. */
		ck_assert_int_eq(f.loads - loads,
		    strncmp(cases[i].reply, "-NOSCRIPT", 9) == 0 ? 2 : 1);
		pthread_mutex_unlock(&f.mu);
	}
	fake_stop(&f);
}
END_TEST

Suite *
rlg_store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc;

	tc = tcase_create("core");
	tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_new_file_schema);
	tcase_add_test(tc, test_reopen_keeps_state);
	tcase_add_test(tc, test_limit_in_window);
	tcase_add_test(tc, test_new_window_resets);
	tcase_add_test(tc, test_rejected_writes_nothing);
	tcase_add_test(tc, test_distinct_clients);
	tcase_add_test(tc, test_one_row_per_client);
	tcase_add_test(tc, test_policies_all_or_nothing);
	tcase_add_test(tc, test_clients_view);
	tcase_add_test(tc, test_prune);
	tcase_add_test(tc, test_null_safe);
	tcase_add_test(tc, test_cache_exact_each_algorithm);
	tcase_add_test(tc, test_cache_leaves_to_store);
	tcase_add_test(tc, test_cache_reset_by_hand);
	tcase_add_test(tc, test_max_clients);
	tcase_add_test(tc, test_max_clients_per_policy);
	tcase_add_test(tc, test_max_clients_sliding_log_and_unlimited);
	tcase_add_test(tc, test_client_counts_follow_deletes);
	suite_add_tcase(s, tc);

	tc = tcase_create("algorithms");
	tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_algorithm_bursts, 0,
	    (int)(sizeof burst_cases / sizeof burst_cases[0]));
	tcase_add_loop_test(tc, test_algorithm_sequence, 0, 4);
	tcase_add_test(tc, test_algorithms_all_or_nothing);
	tcase_add_test(tc, test_advisory_items);
	tcase_add_loop_test(tc, test_new_key_charges, 0, 4);
	tcase_add_test(tc, test_sliding_log_rows);
	tcase_add_test(tc, test_expiry_rounded);
	tcase_add_test(tc, test_views_algorithms);
	suite_add_tcase(s, tc);

	tc = tcase_create("schema");
	tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_migrate_v1);
	tcase_add_test(tc, test_migrate_v2);
	tcase_add_test(tc, test_processes_migrate);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrency");
	tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_threads_one_client);
	tcase_add_test(tc, test_processes_one_client);
	tcase_add_test(tc, test_threads_many_clients);
	tcase_add_test(tc, test_processes_many_clients);
	tcase_add_test(tc, test_processes_open_new_file);
	tcase_add_test(tc, test_processes_algorithms);
	tcase_add_test(tc, test_threads_algorithms);
	tcase_add_test(tc, test_cache_processes_one_client);
	tcase_add_test(tc, test_cache_processes_many_clients);
	tcase_add_test(tc, test_cache_processes_algorithms);
	tcase_add_test(tc, test_cache_threads_algorithms);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_missing_directory);
	tcase_add_test(tc, test_garbage_file);
	tcase_add_test(tc, test_deleted_while_open);
	tcase_add_test(tc, test_replaced_while_open);
	tcase_add_test(tc, test_lock_held);
	tcase_add_test(tc, test_newer_schema);
	tcase_add_test(tc, test_bad_items);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * The tests of what a step decides and writes, against Redis (see the top
 * of this file), and the Redis-only ones.
 */
/* ---- Redis Cluster (suite store_redis_cluster) ------------------------ */

/* One command to cluster node i (0..2), database 0; never an error. */
#define CL(i, ...) rcmd(cluster_srv.port[i], NULL, 0, __VA_ARGS__)

/* The slot of a key, as the cluster says (CLUSTER KEYSLOT). */
static int
cl_keyslot(const char *key)
{
	redisReply *r = CL(0, "CLUSTER KEYSLOT %s", key);
	int slot = (int)r->integer;

	freeReplyObject(r);
	return slot;
}

/* The node (0..2) that serves slot, as node `ask` sees it; -1: none. */
static int
cl_owner_seen_by(int ask, int slot)
{
	redisReply *r = CL(ask, "CLUSTER SLOTS"), *e;
	int i, port = -1;
	size_t k;

	for (k = 0; k < r->elements; k++) {
		e = r->element[k];
		if (slot >= e->element[0]->integer &&
		    slot <= e->element[1]->integer)
			port = (int)e->element[2]->element[1]->integer;
	}
	freeReplyObject(r);
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++)
		if (cluster_srv.port[i] == port)
			return i;
	return -1;
}

static int
cl_owner(int slot)
{
	return cl_owner_seen_by(0, slot);
}

/* The node that serves client's keys. */
static int
cl_client_node(const char *client)
{
	char key[512];

	redis_key(key, sizeof key, "default", client, false);
	return cl_owner(cl_keyslot(key));
}

/* A client key "PREFIX-N" whose keys node i serves, into buf. */
static void
cl_client_on(int i, const char *prefix, char *buf, size_t size)
{
	int n;

	for (n = 0; n < 1000; n++) {
		snprintf(buf, size, "%s-%d", prefix, n);
		if (cl_client_node(buf) == i)
			return;
	}
	ck_abort_msg("no client of node %d", i);
}

/*
 * A number from INFO section of node i: the integer after field (e.g.
 * "errorstat_MOVED:count=", "cmdstat_evalsha:calls="); 0 when absent.
 */
static int64_t
cl_info(int i, const char *section, const char *field)
{
	redisReply *r = CL(i, "INFO %s", section);
	const char *at = strstr(r->str, field);
	int64_t v = at != NULL ? strtoll(at + strlen(field), NULL, 10) : 0;

	freeReplyObject(r);
	return v;
}

/* Summed over the three masters. */
static int64_t
cl_info_sum(const char *section, const char *field)
{
	int64_t v = 0;
	int i;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++)
		v += cl_info(i, section, field);
	return v;
}

static void
cl_resetstat(void)
{
	redisReply *r;
	int i;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		r = CL(i, "CONFIG RESETSTAT");
		freeReplyObject(r);
	}
}

/*
 * The count field of a state read on node i itself, -1 when it has none
 * there: ASKING first, so that a node importing the slot answers too.
 */
static int64_t
cl_count_on(int i, const char *policy_name, const char *client)
{
	struct timeval tv = { 5, 0 };
	redisContext *c;
	redisReply *r;
	char key[512];
	int64_t v;

	redis_key(key, sizeof key, policy_name, client, false);
	c = redisConnectWithTimeout("127.0.0.1", cluster_srv.port[i], tv);
	ck_assert(c != NULL && c->err == 0);
	redisSetTimeout(c, tv);
	r = redisCommand(c, "ASKING");
	ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = redisCommand(c, "HGET %s count", key);
	ck_assert(r != NULL);
	/* ASK: a node migrating the slot away has no such key. */
	ck_assert_msg(r->type != REDIS_REPLY_ERROR || strncmp(r->str, "ASK ",
	    4) == 0, "HGET %s: %s", key, r->str);
	v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
	freeReplyObject(r);
	redisFree(c);
	return v;
}

/* "CLUSTER MYID" of node i into id. */
static void
cl_id(int i, char *id, size_t size)
{
	redisReply *r = CL(i, "CLUSTER MYID");

	snprintf(id, size, "%s", r->str);
	freeReplyObject(r);
}

/* Migration, step 1: slot IMPORTING on b from a, MIGRATING on a to b. */
static void
cl_migrate_open(int slot, int a, int b)
{
	char ida[64], idb[64];
	redisReply *r;

	cl_id(a, ida, sizeof ida);
	cl_id(b, idb, sizeof idb);
	r = CL(b, "CLUSTER SETSLOT %d IMPORTING %s", slot, ida);
	freeReplyObject(r);
	r = CL(a, "CLUSTER SETSLOT %d MIGRATING %s", slot, idb);
	freeReplyObject(r);
}

/* Step 2: MIGRATE every key of slot from a to b; how many there were. */
static size_t
cl_migrate_keys(int slot, int a, int b)
{
	const char *argv[1000 + 8];
	char port[16];
	redisReply *keys, *r;
	struct timeval tv = { 5, 0 };
	redisContext *c;
	size_t n, i;

	keys = CL(a, "CLUSTER GETKEYSINSLOT %d 1000", slot);
	n = keys->elements;
	if (n > 0) {
		snprintf(port, sizeof port, "%d", cluster_srv.port[b]);
		argv[0] = "MIGRATE";
		argv[1] = "127.0.0.1";
		argv[2] = port;
		argv[3] = "";
		argv[4] = "0";
		argv[5] = "5000";
		argv[6] = "KEYS";
		for (i = 0; i < n; i++)
			argv[7 + i] = keys->element[i]->str;
		c = redisConnectWithTimeout("127.0.0.1", cluster_srv.port[a],
		    tv);
		ck_assert(c != NULL && c->err == 0);
		redisSetTimeout(c, tv);
		r = redisCommandArgv(c, (int)(7 + n), argv, NULL);
		ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS,
		    "MIGRATE: %s", r != NULL && r->str != NULL ? r->str :
		    c->errstr);
		freeReplyObject(r);
		redisFree(c);
	}
	freeReplyObject(keys);
	return n;
}

/* Step 3: slot belongs to b, told to b, to a, then to the third. */
static void
cl_migrate_close(int slot, int a, int b)
{
	char idb[64];
	redisReply *r;
	int i;

	cl_id(b, idb, sizeof idb);
	r = CL(b, "CLUSTER SETSLOT %d NODE %s", slot, idb);
	freeReplyObject(r);
	r = CL(a, "CLUSTER SETSLOT %d NODE %s", slot, idb);
	freeReplyObject(r);
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		if (i == a || i == b)
			continue;
		r = CL(i, "CLUSTER SETSLOT %d NODE %s", slot, idb);
		freeReplyObject(r);
	}
}

/*
 * Many clients spread over the three masters, each counted exactly, with
 * its keys on the master of its slot: rlgate's slot is the cluster's
 * (CLUSTER KEYSLOT, COUNTKEYSINSLOT) for every kind of client key, and
 * once the map is read no request is redirected.
 */
START_TEST(test_cluster_spread)
{
	char *path = path_in("spread");
	struct rlg_policy p = policy(5, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 10,
	    0);
	struct rlg_store *s = open_ok(path, 0);
	const char *odd[] = { "a}b", "{x}", "x{", "10.0.0.1|k:0a1b",
	    "2001:db8::/64", "unknown", "k:ffee" };
	char client[64], key[512];
	int per_node[RLG_TEST_CLUSTER_NODES] = { 0 };
	int i, k, slot, owner;
	size_t j;
	redisReply *r;
	int64_t total = 0;

	cl_resetstat();
	for (i = 0; i < 300; i++) {
		snprintf(client, sizeof client, "10.%d.%d.%d", i % 7, i / 7,
		    i % 251);
		for (k = 0; k < 7; k++)
			ck_assert_int_eq(hit(s, &p, client, T1, NULL), k < 5);
	}
	for (j = 0; j < sizeof odd / sizeof odd[0]; j++) {
		ck_assert(hit(s, &p, odd[j], T1, NULL));
		ck_assert(hit(s, &sl, odd[j], T1, NULL));
		ck_assert(hit(s, &sl, odd[j], T1 + 1, NULL));
	}
	/* Not one MOVED or ASK: every request went to the right master. */
	ck_assert_int_eq(cl_info_sum("errorstats", "errorstat_MOVED:count="),
	    0);
	ck_assert_int_eq(cl_info_sum("errorstats", "errorstat_ASK:count="),
	    0);

	for (i = 0; i < 300; i++) {
		snprintf(client, sizeof client, "10.%d.%d.%d", i % 7, i / 7,
		    i % 251);
		redis_key(key, sizeof key, "default", client, false);
		slot = cl_keyslot(key);
		owner = cl_owner(slot);
		ck_assert_int_ge(owner, 0);
		per_node[owner]++;
		ck_assert_int_eq(cl_count_on(owner, "default", client), 5);
		r = CL(owner, "CLUSTER COUNTKEYSINSLOT %d", slot);
		ck_assert_int_ge(r->integer, 1);
		freeReplyObject(r);
	}
	for (j = 0; j < sizeof odd / sizeof odd[0]; j++) {
		redis_key(key, sizeof key, "sl", odd[j], true);
		owner = cl_owner(cl_keyslot(key));
		ck_assert_int_eq(cl_count_on(owner, "default", odd[j]), 1);
		ck_assert_int_eq(cl_count_on(owner, "sl", odd[j]), 2);
		r = CL(owner, "LLEN %s", key);
		ck_assert_int_eq(r->integer, 2);
		freeReplyObject(r);
	}
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		ck_assert_msg(per_node[i] >= 50, "node %d holds %d clients",
		    i, per_node[i]);
		r = CL(i, "DBSIZE");
		total += r->integer;
		freeReplyObject(r);
	}
	/* 300 states, and per odd client two states and one log. */
	ck_assert_int_eq(total, 300 + 3 * (int64_t)(sizeof odd /
	    sizeof odd[0]));
	ck_assert_int_eq(nstates(path), 300 + 2 * (int64_t)(sizeof odd /
	    sizeof odd[0]));
	rlg_store_close(s);
}
END_TEST

/*
 * A client's slot moves from its master a to b while its requests go on,
 * the counts exact before, during and after: keys still on a are served
 * there; a new client of the slot, and this one once its keys moved, are
 * served on b after ASK (the map unchanged); once the slot is b's, MOVED
 * takes the handle there for good. A sliding log (two keys) follows too,
 * and so does a request of two policies whose keys all moved; a request
 * of two policies of a new client gets TRYAGAIN until the slot has moved.
 */
START_TEST(test_cluster_migration)
{
	char *path = path_in("migrate");
	struct rlg_policy p = policy(100, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 50, 60,
	    0);
	struct rlg_policy q = policy(100, 60);
	struct rlg_store *s = open_ok(path, 0);
	struct rlg_store_item items[2];
	char c[32], d[64], e[64], key[512];
	struct rlg_decision dd, two[2];
	int slot, a, b, i, n = 0;
	int64_t asks, moved, t0;

	snprintf(c, sizeof c, "203.0.113.7");
	redis_key(key, sizeof key, "default", c, false);
	slot = cl_keyslot(key);
	a = cl_owner(slot);
	b = (a + 1) % RLG_TEST_CLUSTER_NODES;
	/* Other clients of the same slot (their tag is c), new during it. */
	snprintf(d, sizeof d, "%s}new", c);
	snprintf(e, sizeof e, "%s}two", c);
	q.name = name_hour;
	cl_resetstat();

	/* Before. */
	for (i = 0; i < 10; i++, n++)
		ck_assert(hit(s, &p, c, T1, NULL));
	ck_assert(hit(s, &sl, c, T1, NULL));
	ck_assert_int_eq(cl_count_on(a, "default", c), 10);

	/* During, the keys still on a: served there. */
	cl_migrate_open(slot, a, b);
	for (i = 0; i < 10; i++, n++)
		ck_assert(hit(s, &p, c, T1, NULL));
	ck_assert(hit(s, &sl, c, T1, NULL));
	ck_assert_int_eq(cl_count_on(a, "default", c), 20);
	ck_assert_int_eq(cl_info(a, "errorstats", "errorstat_ASK:count="),
	    0);
	/* A new client of the slot: ASK to b, served there. */
	for (i = 0; i < 5; i++) {
		ck_assert(hit(s, &p, d, T1, &dd));
		ck_assert_int_eq(dd.remaining, 99 - i);
	}
	asks = cl_info(a, "errorstats", "errorstat_ASK:count=");
	ck_assert_int_eq(asks, 5);
	ck_assert_int_eq(cl_count_on(b, "default", d), 5);
	ck_assert_int_eq(cl_count_on(a, "default", d), -1);   /* an ASK */
	asks++;

	/* During, the keys moved to b: ASK, served on b. */
	ck_assert_uint_eq(cl_migrate_keys(slot, a, b), 3);
	for (i = 0; i < 10; i++, n++) {
		ck_assert(hit(s, &p, c, T1, &dd));
		ck_assert_int_eq(dd.remaining, 100 - n - 1);
	}
	ck_assert(hit(s, &sl, c, T1, &dd));
	ck_assert_int_eq(dd.remaining, 50 - 3);
	ck_assert_int_eq(cl_info(a, "errorstats", "errorstat_ASK:count="),
	    asks + 11);
	/* Two policies, every key there: served after ASK too. */
	items[0] = (struct rlg_store_item){ &p, c, false, false };
	items[1] = (struct rlg_store_item){ &sl, c, false, false };
	ck_assert_msg(rlg_store_step(s, items, 2, T1, two) == RLG_OK, "%s",
	    rlg_store_errmsg(s));
	ck_assert(two[0].admitted && two[1].admitted);
	ck_assert_int_eq(two[0].remaining, 100 - ++n);
	ck_assert_int_eq(two[1].remaining, 50 - 4);
	/*
	 * Two policies of a new client: its keys are missing on both
	 * sides, and Redis answers TRYAGAIN to several keys missing on the
	 * importing side: retried, then a failure that wrote nothing.
	 */
	items[0].client = e;
	items[1] = (struct rlg_store_item){ &q, e, false, false };
	t0 = mono_ms();
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, two), RLG_ESTORE);
	ck_assert_int_ge(mono_ms() - t0, 5 + 10 + 20 + 40 + 80);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "TRYAGAIN") != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(cl_count_on(b, "default", e), -1);
	ck_assert_int_eq(cl_count_on(b, "hour", e), -1);
	ck_assert_int_eq(cl_count_on(b, "default", c), 31);
	ck_assert_int_eq(cl_count_on(a, "default", c), -1);
	/* The map was not changed by ASK: still a first. */
	ck_assert_int_eq(cl_info_sum("errorstats", "errorstat_MOVED:count="),
	    0);

	/* After: the slot is b's; MOVED once, then straight to b. */
	cl_migrate_close(slot, a, b);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, two), RLG_OK);
	ck_assert(two[0].admitted && two[1].admitted);
	ck_assert_int_eq(cl_count_on(b, "hour", e), 1);
	for (i = 0; i < 10; i++, n++)
		ck_assert(hit(s, &p, c, T1, NULL));
	moved = cl_info(a, "errorstats", "errorstat_MOVED:count=");
	ck_assert_int_eq(moved, 1);
	ck_assert_int_eq(cl_count_on(b, "default", c), 41);
	for (; n < 100; n++)
		ck_assert(hit(s, &p, c, T1, NULL));
	ck_assert(!hit(s, &p, c, T1, &dd));
	ck_assert_int_gt(dd.retry_ms, 0);
	ck_assert_int_eq(count_of(path, "default", c), 100);
	ck_assert_int_eq(count_of(path, "default", d), 5);
	ck_assert_int_eq(cl_count_on(b, "sl", c), 4);
	ck_assert_int_eq(cl_info(a, "errorstats", "errorstat_MOVED:count="),
	    1);
	/* Another handle, whose map is fresh: no redirection at all. */
	rlg_store_close(s);
	s = open_ok(path, 0);
	ck_assert(hit(s, &p, d, T1, &dd));
	ck_assert_int_eq(dd.remaining, 94);
	ck_assert_int_eq(cl_info(a, "errorstats", "errorstat_MOVED:count="),
	    1);
	rlg_store_close(s);
}
END_TEST

/* Threads hammering one client while its slot moves. */
struct mig_worker {
	pthread_t tid;
	const char *path;
	const char *client;
	const struct rlg_policy *p;
	volatile int *stop;
	long sent;
	long admitted;
	long errors;
	char errmsg[256];
};

static void *
mig_main(void *arg)
{
	struct mig_worker *w = arg;
	struct rlg_store_config cfg;
	struct rlg_store_item item = { w->p, w->client, false, false };
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	int rc;

	store_cfg(&cfg, w->path, 0);
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	if (rc != RLG_OK) {
		snprintf(w->errmsg, sizeof w->errmsg, "%s",
		    rlg_store_errmsg(s));
		w->errors++;
	}
	while (!*w->stop && w->sent < 200000) {
		rc = rlg_store_step(s, &item, 1, T1, &d);
		w->sent++;
		if (rc != RLG_OK) {
			w->errors++;
			snprintf(w->errmsg, sizeof w->errmsg, "%s",
			    rlg_store_errmsg(s));
		} else if (d.admitted) {
			__atomic_add_fetch(&w->admitted, 1, __ATOMIC_RELAXED);
		}
	}
	rlg_store_close(s);
	return NULL;
}

/*
 * Four threads, a handle each, send one client's requests without pause
 * while its slot moves (the three steps, a pause after each): not one
 * error, and exactly limit admitted and counted.
 */
START_TEST(test_cluster_migration_load)
{
	enum { NW = 4, LIMIT = 3000 };
	char *path = path_in("migload");
	struct rlg_policy p = policy(LIMIT, 600);
	struct mig_worker w[NW];
	volatile int stop = 0;
	char key[512];
	long admitted, sent = 0, errors = 0;
	int64_t t0;
	int slot, a, b, i;

	redis_key(key, sizeof key, "default", "198.51.100.9", false);
	slot = cl_keyslot(key);
	a = cl_owner(slot);
	b = (a + 2) % RLG_TEST_CLUSTER_NODES;
	cl_resetstat();
	memset(w, 0, sizeof w);
	for (i = 0; i < NW; i++) {
		w[i].path = path;
		w[i].client = "198.51.100.9";
		w[i].p = &p;
		w[i].stop = &stop;
		ck_assert_int_eq(pthread_create(&w[i].tid, NULL, mig_main,
		    &w[i]), 0);
	}
	/* Some of the quota used before the migration starts. */
	for (t0 = mono_ms(); mono_ms() - t0 < 20000; sleep_ms(2)) {
		for (admitted = 0, i = 0; i < NW; i++)
			admitted += __atomic_load_n(&w[i].admitted,
			    __ATOMIC_RELAXED);
		if (admitted >= LIMIT / 5)
			break;
	}
	cl_migrate_open(slot, a, b);
	sleep_ms(30);
	(void)cl_migrate_keys(slot, a, b);
	sleep_ms(30);
	cl_migrate_close(slot, a, b);
	sleep_ms(30);
	/* Then until the quota is gone, and a little more. */
	for (t0 = mono_ms(); mono_ms() - t0 < 20000; sleep_ms(2)) {
		for (admitted = 0, i = 0; i < NW; i++)
			admitted += __atomic_load_n(&w[i].admitted,
			    __ATOMIC_RELAXED);
		if (admitted >= LIMIT)
			break;
	}
	sleep_ms(20);
	stop = 1;
	for (admitted = 0, i = 0; i < NW; i++) {
		pthread_join(w[i].tid, NULL);
		admitted += w[i].admitted;
		sent += w[i].sent;
		errors += w[i].errors;
		ck_assert_msg(w[i].errors == 0, "thread %d: %ld errors: %s",
		    i, w[i].errors, w[i].errmsg);
	}
	ck_assert_int_eq(errors, 0);
	ck_assert_int_gt(sent, LIMIT);
	ck_assert_int_eq(admitted, LIMIT);
	ck_assert_int_eq(cl_count_on(b, "default", "198.51.100.9"), LIMIT);
	ck_assert_int_eq(cl_owner(slot), b);
	/* The requests did meet the migration: ASK during it, MOVED after. */
	ck_assert_int_gt(cl_info(a, "errorstats", "errorstat_ASK:count="), 0);
	ck_assert_int_gt(cl_info(a, "errorstats", "errorstat_MOVED:count="),
	    0);
}
END_TEST

/* SCRIPT FLUSH on every master: NOSCRIPT, loaded again there, counted. */
START_TEST(test_cluster_noscript)
{
	char *path = path_in("noscript");
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s = open_ok(path, 0);
	char client[RLG_TEST_CLUSTER_NODES][64];
	redisReply *r;
	int i;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		cl_client_on(i, "ns", client[i], sizeof client[i]);
		ck_assert(hit(s, &p, client[i], T1, &d));
		ck_assert_int_eq(d.remaining, 4);
	}
	cl_resetstat();
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		r = CL(i, "SCRIPT FLUSH");
		freeReplyObject(r);
	}
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		ck_assert(hit(s, &p, client[i], T1, &d));
		ck_assert_int_eq(d.remaining, 3);
		ck_assert(hit(s, &p, client[i], T1, &d));
		ck_assert_int_eq(d.remaining, 2);
		ck_assert_int_eq(cl_count_on(i, "default", client[i]), 3);
		/* Once per node: NOSCRIPT, SCRIPT LOAD, the retry. */
		ck_assert_int_eq(cl_info(i, "errorstats",
		    "errorstat_NOSCRIPT:count="), 1);
		ck_assert_int_eq(cl_info(i, "commandstats",
		    "cmdstat_script|load:calls="), 1);
	}
	rlg_store_close(s);
}
END_TEST

/*
 * Two policies keyed by two clients in two slots, as the top of
 * store_redis.c documents: checked, then committed. A request rejected
 * by either policy costs no quota in the other, whatever the order of the
 * items; an admitted one counts in both. Round trips: one EVALSHA for one
 * slot, two for a rejection at the check, three for an admission. An
 * advisory item in another slot never rejects, and is written only when
 * the request is admitted and it admits.
 */
START_TEST(test_cluster_two_slots)
{
	char *path = path_in("twoslots");
	struct rlg_policy ip = policy(3, 60), key = policy(5, 60);
	struct rlg_store *s = open_ok(path, 0);
	struct rlg_store_item items[2];
	struct rlg_decision d[2];
	const char *ca = "192.0.2.1", *cb = "k:00aa";
	char ka[512], kb[512];
	int i;

	key.name = name_hour;
	redis_key(ka, sizeof ka, "default", ca, false);
	redis_key(kb, sizeof kb, "hour", cb, false);
	ck_assert_int_ne(cl_keyslot(ka), cl_keyslot(kb));
	items[0] = (struct rlg_store_item){ &ip, ca, false, false };
	items[1] = (struct rlg_store_item){ &key, cb, false, false };

	cl_resetstat();
	ck_assert(hit(s, &ip, ca, T1, NULL));
	ck_assert_int_eq(cl_info_sum("commandstats",
	    "cmdstat_evalsha:calls="), 1);

	cl_resetstat();
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
		ck_assert(d[0].admitted && d[1].admitted);
		ck_assert_int_eq(d[0].remaining, 3 - 2 - i);
		ck_assert_int_eq(d[1].remaining, 5 - 1 - i);
	}
	ck_assert_int_eq(cl_info_sum("commandstats",
	    "cmdstat_evalsha:calls="), 6);
	ck_assert_int_eq(count_of(path, "default", ca), 3);
	ck_assert_int_eq(count_of(path, "hour", cb), 2);

	/* ip is full: rejected, and cb's quota untouched, either order. */
	cl_resetstat();
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(!d[0].admitted && d[1].admitted);
	ck_assert_int_gt(d[0].retry_ms, 0);
	ck_assert_int_eq(d[1].remaining, 2);
	ck_assert_int_eq(cl_info_sum("commandstats",
	    "cmdstat_evalsha:calls="), 2);
	items[0] = (struct rlg_store_item){ &key, cb, false, false };
	items[1] = (struct rlg_store_item){ &ip, ca, false, false };
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(d[0].remaining, 2);
	ck_assert_int_eq(count_of(path, "default", ca), 3);
	ck_assert_int_eq(count_of(path, "hour", cb), 2);

	/* key full (a fresh address): the fresh address stays untouched. */
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &key, cb, T1, NULL));
	items[0] = (struct rlg_store_item){ &ip, "192.0.2.2", false, false };
	items[1] = (struct rlg_store_item){ &key, cb, false, false };
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(count_of(path, "default", "192.0.2.2"), -1);
	ck_assert_int_eq(count_of(path, "hour", cb), 5);

	/* Advisory in the other slot: rejecting, it does not reject. */
	items[1].advisory = true;
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(count_of(path, "default", "192.0.2.2"), 1);
	ck_assert_int_eq(count_of(path, "hour", cb), 5);
	/* Admitting, it is written with the admitted request. */
	items[1] = (struct rlg_store_item){ &key, "k:00bb", true, false };
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(count_of(path, "default", "192.0.2.2"), 2);
	ck_assert_int_eq(count_of(path, "hour", "k:00bb"), 1);
	rlg_store_close(s);
}
END_TEST

/* Threads sending two-slot requests: what they may and may not do. */
struct two_worker {
	pthread_t tid;
	const char *path;
	const struct rlg_policy *p;
	const struct rlg_policy *q;
	long admitted;
	long errors;
};

static void *
two_main(void *arg)
{
	struct two_worker *w = arg;
	struct rlg_store_config cfg;
	struct rlg_store_item items[2] = { { w->p, "192.0.2.50", false, false },
	    { w->q, "k:77", false, false } };
	struct rlg_decision d[2];
	struct rlg_store *s = NULL;
	int i;

	store_cfg(&cfg, w->path, 0);
	if (rlg_store_open(&cfg, &s) != RLG_OK)
		w->errors++;
	store_cfg_free(&cfg);
	for (i = 0; i < 150; i++) {
		if (rlg_store_step(s, items, 2, T1, d) != RLG_OK)
			w->errors++;
		else if (d[0].admitted && d[1].admitted)
			w->admitted++;
	}
	rlg_store_close(s);
	return NULL;
}

/*
 * Under concurrency, two slots, both limits reachable: no policy ever
 * counts past its limit, each counts every admitted request, and runs
 * ahead of them only by the requests that lost a race between a check
 * and its commit (README): at most one per request rejected.
 */
START_TEST(test_cluster_two_slots_concurrent)
{
	enum { NW = 4 };
	char *path = path_in("twoconc");
	struct rlg_policy p = policy(100, 60), q = policy(100, 60);
	struct two_worker w[NW];
	long admitted = 0;
	int64_t cp, cq;
	int i;

	q.name = name_hour;
	memset(w, 0, sizeof w);
	for (i = 0; i < NW; i++) {
		w[i].path = path;
		w[i].p = &p;
		w[i].q = &q;
		ck_assert_int_eq(pthread_create(&w[i].tid, NULL, two_main,
		    &w[i]), 0);
	}
	for (i = 0; i < NW; i++) {
		pthread_join(w[i].tid, NULL);
		ck_assert_int_eq(w[i].errors, 0);
		admitted += w[i].admitted;
	}
	cp = count_of(path, "default", "192.0.2.50");
	cq = count_of(path, "hour", "k:77");
	ck_assert_int_le(cp, 100);
	ck_assert_int_le(cq, 100);
	ck_assert_int_ge(cp, admitted);
	ck_assert_int_ge(cq, admitted);
	ck_assert_int_ge(admitted, 100 - (cp - admitted) - (cq - admitted));
	ck_assert_int_le(admitted, 100);
}
END_TEST

/*
 * The seeds: none answering is RLG_ESTORE at open with a usable handle
 * naming a node, whose steps fail at once; a dead seed before a live one
 * is passed over. A cluster url at a server that is no cluster, and a
 * single-server url at a cluster node, say what to set.
 */
START_TEST(test_cluster_seeds)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_store_config cfg;
	struct rlg_test_redis plain;
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	char url[256], name[64];
	int dead = free_port(), i, rc;
	int64_t t0;

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", dead);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.cluster = true;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_ESTORE);
	store_cfg_free(&cfg);
	snprintf(name, sizeof name, "redis_cluster node 127.0.0.1:%d", dead);
	ck_assert_msg(strstr(rlg_store_errmsg(s), name) != NULL &&
	    strstr(rlg_store_errmsg(s), "refused") != NULL, "%s",
	    rlg_store_errmsg(s));
	t0 = mono_ms();
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d),
		    RLG_ESTORE);
	ck_assert_int_lt(mono_ms() - t0, 50);
	rlg_store_close(s);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d,127.0.0.1:%d", dead,
	    cluster_srv.port[1]);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.cluster = true;
	cfg.redis.clock = RLG_CLOCK_LOCAL;
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 4);
	rlg_store_close(s);

	ck_assert_int_eq(rlg_test_redis_start(&plain), 0);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, plain.url);
	cfg.redis.cluster = true;
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	rlg_test_redis_stop(&plain);
	ck_assert_int_eq(rc, RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "set [store] backend ="
	    " redis") != NULL, "%s", rlg_store_errmsg(s));
	rlg_store_close(s);

	/* backend = redis at one node: a client another node serves. */
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", cluster_srv.port[0]);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_OK);
	cl_client_on(1, "x", name, sizeof name);
	item.client = name;
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "MOVED") != NULL &&
	    strstr(rlg_store_errmsg(s), "backend = redis_cluster") != NULL,
	    "%s", rlg_store_errmsg(s));
	rlg_store_close(s);
}
END_TEST

/*
 * An ACL user with the README's permissions for a cluster (the single
 * server's, and CLUSTER SLOTS and ASKING), created on every master:
 * clients of every master are counted, through a migration's ASK too.
 */
START_TEST(test_cluster_acl)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_config cfg;
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	char client[64], url[256], key[512];
	redisReply *r;
	int i, slot, a, b, rc;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		r = CL(i, "ACL SETUSER rlgate on >s3cret ~rlg:* resetchannels"
		    " -@all +ping +evalsha +script|load +hmget +hset +lrange"
		    " +linsert +ltrim +rpush +pexpire +time +cluster|slots"
		    " +asking");
		freeReplyObject(r);
	}
	snprintf(url, sizeof url, "redis://rlgate:s3cret@127.0.0.1:%d,"
	    "127.0.0.1:%d", cluster_srv.port[2], cluster_srv.port[0]);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.cluster = true;
	cfg.redis.clock = RLG_CLOCK_LOCAL;
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		cl_client_on(i, "acl", client, sizeof client);
		ck_assert(hit(s, &p, client, T1, &d));
		ck_assert(hit(s, &p, client, T1, &d));
		ck_assert_int_eq(d.remaining, 3);
	}
	/* A new client of a slot being migrated: ASK, ASKING, served. */
	redis_key(key, sizeof key, "default", "acl-new", false);
	slot = cl_keyslot(key);
	a = cl_owner(slot);
	b = (a + 1) % RLG_TEST_CLUSTER_NODES;
	cl_migrate_open(slot, a, b);
	ck_assert_msg(hit(s, &p, "acl-new", T1, &d), "%s", rlg_store_errmsg(s));
	ck_assert_int_eq(cl_count_on(b, "default", "acl-new"), 1);
	cl_migrate_close(slot, a, b);
	ck_assert(hit(s, &p, "acl-new", T1, &d));
	ck_assert_int_eq(d.remaining, 3);
	rlg_store_close(s);
}
END_TEST

/*
 * The bounds, against a fake node that serves every slot itself and
 * answers EVALSHA with one reply: MOVED and ASK to itself are followed 5
 * times, then an error; TRYAGAIN is retried 5 times (waiting), then an
 * error that does not take the node down; CLUSTERDOWN is tried twice,
 * then the node is lost and backs off.
 */
START_TEST(test_cluster_redirect_bounds)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false };
	struct rlg_store_config cfg;
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	char url[64], moved[64], ask[64];
	struct fake f;
	int evals;
	int64_t t0;

	fake_start(&f);
	snprintf(f.slots, sizeof f.slots, "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n"
	    "$9\r\n127.0.0.1\r\n:%d\r\n", f.port);
	/* 7365: the slot of the client "c" (a redirection names it). */
	snprintf(moved, sizeof moved, "-MOVED 7365 127.0.0.1:%d\r\n",
	    f.port);
	snprintf(ask, sizeof ask, "-ASK 7365 :%d\r\n", f.port);
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", f.port);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.cluster = true;
	cfg.redis.clock = RLG_CLOCK_LOCAL;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);

	pthread_mutex_lock(&f.mu);
	f.reply = moved;
	evals = f.evals;
	pthread_mutex_unlock(&f.mu);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "more than 5 redirections")
	    != NULL, "%s", rlg_store_errmsg(s));
	pthread_mutex_lock(&f.mu);
	ck_assert_int_eq(f.evals - evals, 6);
	f.reply = ask;
	evals = f.evals;
	pthread_mutex_unlock(&f.mu);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "more than 5 redirections")
	    != NULL, "%s", rlg_store_errmsg(s));
	pthread_mutex_lock(&f.mu);
	ck_assert_int_eq(f.evals - evals, 6);
	ck_assert_int_eq(f.askings, 5);

	f.reply = "-TRYAGAIN Multiple keys request during rehashing of"
	    " slot\r\n";
	evals = f.evals;
	pthread_mutex_unlock(&f.mu);
	t0 = mono_ms();
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_ge(mono_ms() - t0, 5 + 10 + 20 + 40 + 80);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "TRYAGAIN") != NULL &&
	    strstr(rlg_store_errmsg(s), "tried 6 times") != NULL, "%s",
	    rlg_store_errmsg(s));
	pthread_mutex_lock(&f.mu);
	ck_assert_int_eq(f.evals - evals, 6);
	f.reply = "*6\r\n:1700000000000\r\n:1\r\n:5\r\n:4\r\n:1000\r\n:0\r\n";
	pthread_mutex_unlock(&f.mu);
	/* Not lost: the next step goes through at once. */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert_int_eq(d.remaining, 4);

	pthread_mutex_lock(&f.mu);
	f.reply = "-CLUSTERDOWN The cluster is down\r\n";
	evals = f.evals;
	pthread_mutex_unlock(&f.mu);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "CLUSTERDOWN") != NULL,
	    "%s", rlg_store_errmsg(s));
	/* Lost: backing off, no traffic. */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "CLUSTERDOWN") != NULL,
	    "%s", rlg_store_errmsg(s));
	pthread_mutex_lock(&f.mu);
	ck_assert_int_eq(f.evals - evals, 2);
	pthread_mutex_unlock(&f.mu);
	rlg_store_close(s);
	store_cfg_free(&cfg);
	fake_stop(&f);
}
END_TEST

/*
 * A master stopped: RLG_ESTORE for the clients of its slots (naming it,
 * at once during its backoff) while the clients of the other masters are
 * answered and counted, as long as the cluster serves a partial slot
 * space (cluster-require-full-coverage no); with the default (yes) the
 * cluster goes down once it notices, and every request fails
 * (CLUSTERDOWN). Started again, it rejoins and the same handle heals.
 */
START_TEST(test_cluster_master_down)
{
	char *path = path_in("down");
	struct rlg_policy p = policy(1000, 600);
	struct rlg_store_item item = { &p, NULL, false, false };
	struct rlg_store *s = open_ok(path, 0);
	char client[RLG_TEST_CLUSTER_NODES][64], name[64];
	int64_t want[RLG_TEST_CLUSTER_NODES], t0;
	struct rlg_decision d;
	redisReply *r;
	int i, rounds;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		cl_client_on(i, "down", client[i], sizeof client[i]);
		ck_assert(hit(s, &p, client[i], T1, NULL));
		want[i] = 1;
		r = CL(i, "CONFIG SET cluster-require-full-coverage no");
		freeReplyObject(r);
	}
	ck_assert_int_eq(rlg_test_redis_cluster_stop_node(&cluster_srv, 0),
	    0);
	snprintf(name, sizeof name, "redis_cluster node 127.0.0.1:%d",
	    cluster_srv.port[0]);
	/* Until the others mark it failed, and on: 1 and 2 answer. */
	t0 = mono_ms();
	for (rounds = 0; mono_ms() - t0 < 15000; rounds++) {
		item.client = client[0];
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d),
		    RLG_ESTORE);
		ck_assert_msg(strstr(rlg_store_errmsg(s), name) != NULL, "%s",
		    rlg_store_errmsg(s));
		for (i = 1; i < RLG_TEST_CLUSTER_NODES; i++) {
			ck_assert(hit(s, &p, client[i], T1, &d));
			ck_assert_int_eq(d.remaining, 1000 - ++want[i]);
		}
		r = CL(1, "CLUSTER NODES");
		if (strstr(r->str, "master,fail") != NULL && rounds > 10) {
			freeReplyObject(r);
			break;
		}
		freeReplyObject(r);
		sleep_ms(POLL_MS);
	}
	ck_assert_int_lt(mono_ms() - t0, 15000);
	for (i = 1; i < RLG_TEST_CLUSTER_NODES; i++)
		ck_assert_int_eq(cl_count_on(i, "default", client[i]),
		    want[i]);

	/* Full coverage required: the cluster is down for everyone. */
	for (i = 1; i < RLG_TEST_CLUSTER_NODES; i++) {
		r = CL(i, "CONFIG SET cluster-require-full-coverage yes");
		freeReplyObject(r);
	}
	/* Gossip on a loaded machine (other CI, a build) can take long. */
	ck_assert_int_eq(rlg_test_redis_cluster_wait(&cluster_srv, "fail",
	    45000), 0);
	item.client = client[1];
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "CLUSTERDOWN") != NULL,
	    "%s", rlg_store_errmsg(s));

	/* Back: it rejoins (empty: no persistence); the handle heals. */
	ck_assert_int_eq(rlg_test_redis_cluster_start_node(&cluster_srv, 0),
	    0);
	ck_assert_int_eq(rlg_test_redis_cluster_wait(&cluster_srv, "ok",
	    30000), 0);
	want[0] = 0;
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		ck_assert_msg(step_until_ok(s, &p, client[i], &d) == RLG_OK,
		    "%s", rlg_store_errmsg(s));
		ck_assert_int_eq(d.remaining, 1000 - ++want[i]);
		ck_assert_int_eq(cl_count_on(i, "default", client[i]),
		    want[i]);
	}
	rlg_store_close(s);
	/* Ours now: stopped here, reaped here. */
	ck_assert_int_eq(rlg_test_redis_cluster_stop_node(&cluster_srv, 0),
	    0);
}
END_TEST

/*
 * The test cases "core", "algorithms" and "concurrency" of the Redis
 * suites: the tests shared with SQLite, against the servers that setup
 * starts (one redis-server, or a cluster).
 */
static void
add_shared_tcases(Suite *s, void (*setup)(void), void (*teardown)(void))
{
	TCase *tc;

	tc = tcase_create("core");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_reopen_keeps_state);
	tcase_add_test(tc, test_limit_in_window);
	tcase_add_test(tc, test_new_window_resets);
	tcase_add_test(tc, test_rejected_writes_nothing);
	tcase_add_test(tc, test_distinct_clients);
	tcase_add_test(tc, test_one_row_per_client);
	tcase_add_test(tc, test_policies_all_or_nothing);
	tcase_add_test(tc, test_cache_exact_each_algorithm);
	tcase_add_test(tc, test_cache_leaves_to_store);
	tcase_add_test(tc, test_cache_reset_by_hand);
	tcase_add_test(tc, test_bad_items);
	suite_add_tcase(s, tc);

	tc = tcase_create("algorithms");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_algorithm_bursts, 0,
	    (int)(sizeof burst_cases / sizeof burst_cases[0]));
	tcase_add_loop_test(tc, test_algorithm_sequence, 0, 4);
	tcase_add_test(tc, test_algorithms_all_or_nothing);
	tcase_add_test(tc, test_advisory_items);
	tcase_add_loop_test(tc, test_new_key_charges, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrency");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_threads_one_client);
	tcase_add_test(tc, test_processes_one_client);
	tcase_add_test(tc, test_threads_many_clients);
	tcase_add_test(tc, test_processes_many_clients);
	tcase_add_test(tc, test_processes_algorithms);
	tcase_add_test(tc, test_threads_algorithms);
	tcase_add_test(tc, test_cache_processes_one_client);
	tcase_add_test(tc, test_cache_processes_many_clients);
	tcase_add_test(tc, test_cache_processes_algorithms);
	tcase_add_test(tc, test_cache_threads_algorithms);
	suite_add_tcase(s, tc);
}

Suite *
rlg_store_redis_suite(void)
{
	Suite *s = suite_create("store_redis");
	TCase *tc;

	add_shared_tcases(s, redis_base_setup, redis_base_teardown);

	tc = tcase_create("redis");
	tcase_add_unchecked_fixture(tc, redis_base_setup, redis_base_teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_redis_down_at_open);
	tcase_add_test(tc, test_redis_killed_mid_run);
	tcase_add_test(tc, test_redis_backoff);
	tcase_add_test(tc, test_redis_noscript);
	tcase_add_test(tc, test_redis_clock);
	tcase_add_test(tc, test_redis_auth);
	tcase_add_test(tc, test_redis_unix_socket);
	tcase_add_test(tc, test_redis_keys_expire);
	tcase_add_test(tc, test_redis_client_keys);
	tcase_add_test(tc, test_redis_strict_reply);
	suite_add_tcase(s, tc);
	return s;
}

Suite *
rlg_store_redis_cluster_suite(void)
{
	Suite *s = suite_create("store_redis_cluster");
	TCase *tc;

	add_shared_tcases(s, cluster_base_setup, cluster_base_teardown);

	tc = tcase_create("cluster");
	tcase_add_unchecked_fixture(tc, cluster_base_setup,
	    cluster_base_teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_cluster_spread);
	tcase_add_test(tc, test_cluster_noscript);
	tcase_add_test(tc, test_cluster_two_slots);
	tcase_add_test(tc, test_cluster_two_slots_concurrent);
	tcase_add_test(tc, test_cluster_seeds);
	tcase_add_test(tc, test_cluster_redirect_bounds);
	tcase_add_test(tc, test_cluster_acl);
	/* These move slots: last. */
	tcase_add_test(tc, test_cluster_migration);
	tcase_add_test(tc, test_cluster_migration_load);
	suite_add_tcase(s, tc);

	/* A master stopped and started again: a cluster of its own. */
	tc = tcase_create("cluster_faults");
	tcase_add_unchecked_fixture(tc, cluster_base_setup,
	    cluster_base_teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_cluster_master_down);
	suite_add_tcase(s, tc);
	return s;
}
