/*
 * store_fixture.c: the helpers of store_fixture.h, for the store suites
 * "store" (SQLite), "store_redis" and "store_redis_cluster".
 *
 * The backend of a test case is set by the suite's unchecked fixture; the
 * helpers that read the stored state back pick SQL or Redis by it. With
 * Redis, each path a test names is one database (SELECT) of the suite's
 * server, flushed before each test; on the cluster every path is
 * database 0, every master is flushed, and a key is read on its master
 * (following MOVED) or looked for on every master.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <hiredis/hiredis.h>
#include <sqlite3.h>

#include "clock.h"
#include "config.h"
#include "fixture.h"
#include "resp.h"
#include "store_fixture.h"
#include "util.h"

/* The algorithms workers (MODE_ALGS): what they send, the limits. */
#define ALGS_SENT 100               /* per worker, of each kind */
#define ALGS_LOG_LIMIT 150          /* sliding_log: 150 per minute */
#define ALGS_BUCKET_LIMIT 600       /* token_bucket: 600 per minute, */
#define ALGS_BUCKET_BURST 90        /* 90 at once; T = 100 ms */

/* The limit of the concurrency tests: below the one-client total. */
#define CONC_LIMIT 250
#define CONC_SENT 300               /* per worker, one client */
#define MANY_LIMIT 12

#define REDIS_DBS 16

static int key_servers(const char *path, int *ports, int *db);
static int redis_db_of(const char *path);
static int64_t redis_dirty(const char *path);
static void sim_log_dump(const struct sim *m, char *buf, size_t size);
static int sent_to(int client);
static void run_worker(struct worker *w);
static void run_algorithms(struct rlg_store *s, struct worker *w);
static void *thread_main(void *arg);
static size_t resp_command(const char *buf, size_t len, char *name,
    size_t size);
static void *fake_main(void *arg);

/* The per-run directory (parent) and the per-test one inside it (child). */
static char base_dir[64];
char case_dir[128];
static int case_seq;

int backend = RLG_BACKEND_SQLITE;
bool cluster_mode;
struct rlg_test_redis redis_srv;
struct rlg_test_redis_cluster cluster_srv;
/* Whether the suite's server (or cluster) started. */
static bool redis_up;
/* Redis: the paths the test named, one database each (by index). */
static char redis_paths[REDIS_DBS][256];
static int redis_npaths;

char name_default[] = "default";
char name_burst[] = "burst";
char name_hour[] = "hour";
char name_alg[] = "alg";
char name_sl[] = "sl";
char name_tb[] = "tb";
char name_sw[] = "sw";
char name_ten[] = "ten";

void
base_setup(void)
{
	snprintf(base_dir, sizeof base_dir, "/tmp/rlg-check-store-XXXXXX");
	if (mkdtemp(base_dir) == NULL) {
		perror("mkdtemp");
		abort();
	}
}

void
base_teardown(void)
{
	rlg_test_rmtree(base_dir);
}

/*
 * Each test gets a directory of its own, removed with the base; with
 * Redis, an empty server and no path mapped to a database yet.
 */
void
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

/* A path in this test's directory; static storage, one per call site. */
char *
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

/*
 * A test case of a store suite: the suite's unchecked fixture (its
 * backend and servers), a fresh directory (and empty servers) per test.
 */
TCase *
store_tcase(Suite *s, const char *name, void (*setup)(void),
    void (*teardown)(void), int timeout_s)
{
	TCase *tc = tcase_create(name);

	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(tc, case_setup, NULL);
	if (timeout_s > 0)
		tcase_set_timeout(tc, timeout_s);
	suite_add_tcase(s, tc);
	return tc;
}

/* ---- two backends --------------------------------------------------- */

/*
 * The unchecked fixture of the Redis backends: one server (the suite
 * "store_redis") or the cluster (cluster), started once per tcase.
 */
static void
redis_backend_setup(bool cluster)
{
	base_setup();
	backend = RLG_BACKEND_REDIS;
	cluster_mode = cluster;
	/* A connection Redis closed must fail a write, not kill the test. */
	signal(SIGPIPE, SIG_IGN);
	if (cluster)
		redis_up = rlg_test_redis_cluster_start(&cluster_srv) == 0;
	else
		redis_up = rlg_test_redis_start(&redis_srv) == 0;
}

/* Stops what redis_backend_setup(cluster) started; SQLite again. */
static void
redis_backend_teardown(bool cluster)
{
	if (cluster)
		rlg_test_redis_cluster_stop(&cluster_srv);
	else
		rlg_test_redis_stop(&redis_srv);
	redis_up = false;
	cluster_mode = false;
	backend = RLG_BACKEND_SQLITE;
	base_teardown();
}

void
redis_base_setup(void)
{
	redis_backend_setup(false);
}

void
redis_base_teardown(void)
{
	redis_backend_teardown(false);
}

void
cluster_base_setup(void)
{
	redis_backend_setup(true);
}

void
cluster_base_teardown(void)
{
	redis_backend_teardown(true);
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
void
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
void
store_cfg_url(struct rlg_store_config *cfg, const char *url)
{
	char why[256];

	cfg->backend = RLG_BACKEND_REDIS;
	ck_assert_msg(rlg_redis_url_parse(&cfg->redis, url, why, sizeof why) == 0,
	    "%s: %s", url, why);
	/* Generous: sanitizer builds and a loaded machine are slow. */
	cfg->redis.connect_timeout_ms = 2000;
	cfg->redis.timeout_ms = 5000;
}

void
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
	free(cfg->redis.master);
	memset(cfg, 0, sizeof *cfg);
}

/*
 * One command (fmt, ap) on a new connection to 127.0.0.1:port, after AUTH
 * with password if not NULL and SELECT db: the reply, never NULL, maybe
 * an error; caller frees. What rcmd and rdb both send by.
 */
static redisReply *
rvcmd(int port, const char *password, int db, const char *fmt, va_list ap)
{
	struct timeval tv = { 5, 0 };
	redisContext *c;
	redisReply *r;

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
	r = redisvCommand(c, fmt, ap);
	ck_assert_msg(r != NULL, "%s: %s", fmt, c->errstr);
	redisFree(c);
	return r;
}

/*
 * One command to the server on 127.0.0.1:port (AUTH with password if not
 * NULL, SELECT db); the reply, never NULL nor an error, caller frees.
 */
redisReply *
rcmd(int port, const char *password, int db, const char *fmt, ...)
{
	redisReply *r;
	va_list ap;

	va_start(ap, fmt);
	r = rvcmd(port, password, db, fmt, ap);
	va_end(ap);
	ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r->str);
	return r;
}

/*
 * One command to the suite's server, in the database of path; on the
 * cluster, to the master of the key (following MOVED).
 */
redisReply *
rdb(const char *path, const char *fmt, ...)
{
	redisReply *r;
	va_list ap;
	int port, hops;

	port = cluster_mode ? cluster_srv.port[0] : redis_srv.port;
	for (hops = 0;; hops++) {
		va_start(ap, fmt);
		r = rvcmd(port, NULL, cluster_mode ? 0 : redis_db_of(path),
		    fmt, ap);
		va_end(ap);
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
void
redis_key(char *buf, size_t size, const char *policy_name,
    const char *client, bool log)
{
	snprintf(buf, size, "rlg:{%s}:%s%s", client, policy_name,
	    log ? ":log" : "");
}

/* One field of a (policy, client) state; -1 when it has no state. */
int64_t
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

int64_t
count_of(const char *path, const char *policy_name, const char *client)
{
	return state_field(path, policy_name, client, "count");
}

/* How many (policy, client) states the store holds. */
int64_t
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

/*
 * "cmd KEY" for every key that matches pattern on the servers of path's
 * keys; the sum of the (integer) replies. How nlog counts (LLEN) and
 * reset_client deletes (DEL) on Redis.
 */
static int64_t
redis_each_key(const char *path, const char *pattern, const char *cmd)
{
	int ports[RLG_TEST_CLUSTER_NODES], db, k, nk;
	redisReply *keys, *r;
	int64_t n = 0;
	size_t i;

	nk = key_servers(path, ports, &db);
	for (k = 0; k < nk; k++) {
		keys = rcmd(ports[k], NULL, db, "KEYS %s", pattern);
		for (i = 0; i < keys->elements; i++) {
			r = rcmd(ports[k], NULL, db, "%s %s", cmd,
			    keys->element[i]->str);
			n += r->integer;
			freeReplyObject(r);
		}
		freeReplyObject(keys);
	}
	return n;
}

/* Sliding-log entries of policy and client (NULL: any). */
int64_t
nlog(const char *path, const char *policy_name, const char *client)
{
	char *sql, pattern[512];
	int64_t n;

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
	return redis_each_key(path, pattern, "LLEN");
}

/* An operator's reset of one client: every state (and log) of it. */
void
reset_client(const char *path, const char *client)
{
	char *sql, pattern[512];

	if (backend == RLG_BACKEND_SQLITE) {
		sql = sqlite3_mprintf("DELETE FROM rlg_state WHERE client = %Q",
		    client);
		sql_exec(path, sql);
		sqlite3_free(sql);
		return;
	}
	snprintf(pattern, sizeof pattern, "rlg:{%s}:*", client);
	(void)redis_each_key(path, pattern, "DEL");
}

void
override_set(const char *path, const char *policy_name, const char *client,
    const char *spec)
{
	char field[512];
	char *sql;

	if (backend == RLG_BACKEND_SQLITE) {
		if (spec == NULL)
			sql = sqlite3_mprintf("DELETE FROM rlg_override WHERE"
			    " policy = %Q AND client = %Q", policy_name,
			    client);
		else
			sql = sqlite3_mprintf("INSERT INTO rlg_override"
			    " (policy, client, spec, note) VALUES (%Q, %Q, %Q,"
			    " 'test') ON CONFLICT (policy, client) DO UPDATE"
			    " SET spec = excluded.spec, note = excluded.note",
			    policy_name, client, spec);
		sql_exec(path, sql);
		sqlite3_free(sql);
		return;
	}
	snprintf(field, sizeof field, "%s %s", policy_name, client);
	if (spec == NULL)
		freeReplyObject(rdb(path, "HDEL rlg:overrides %s", field));
	else
		freeReplyObject(rdb(path, "HSET rlg:overrides %s %s", field,
		    spec));
}

/* The rows as strcmp orders them: qsort's comparison. */
static int
override_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct overrides_acc {
	struct overrides_seen *seen;
	char *rows[64];
	size_t n;
};

static int
overrides_row(void *ctx, const struct rlg_override_row *row)
{
	struct overrides_acc *acc = ctx;
	char buf[600];

	acc->seen->calls++;
	ck_assert_uint_lt(acc->n, sizeof acc->rows / sizeof acc->rows[0]);
	snprintf(buf, sizeof buf, "%s|%s|%s", row->policy, row->client,
	    row->spec);
	acc->rows[acc->n++] = rlg_xstrdup(buf);
	return acc->seen->stop_after > 0 &&
	    acc->seen->calls >= acc->seen->stop_after;
}

int
overrides_read(struct rlg_store *s, uint64_t *version,
    struct overrides_seen *seen)
{
	struct overrides_acc acc = { .seen = seen };
	size_t i, len = 0;
	int rc;

	seen->calls = 0;
	seen->rows[0] = '\0';
	rc = rlg_store_overrides(s, version, overrides_row, &acc);
	qsort(acc.rows, acc.n, sizeof acc.rows[0], override_cmp);
	for (i = 0; i < acc.n; i++) {
		len += (size_t)snprintf(seen->rows + len,
		    sizeof seen->rows - len, "%s%s", i > 0 ? "," : "",
		    acc.rows[i]);
		ck_assert_uint_lt(len, sizeof seen->rows);
		free(acc.rows[i]);
	}
	return rc;
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

void
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

bool
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

struct rlg_policy
policy(int64_t limit, int64_t window_s)
{
	struct rlg_policy p = { .name = name_default,
	    .lim.algorithm = RLG_ALG_FIXED_WINDOW, .lim.limit = limit,
	    .lim.window_ms = window_s * 1000, .key = RLG_KEY_IP };

	return p;
}

struct rlg_store *
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
int
hit(struct rlg_store *s, const struct rlg_policy *p, const char *client,
    int64_t now, struct rlg_decision *d)
{
	struct rlg_store_item item = { p, client, false, false, 1 };
	struct rlg_decision tmp;
	int rc;

	if (d == NULL)
		d = &tmp;
	rc = rlg_store_step(s, &item, 1, now, d);
	ck_assert_msg(rc == RLG_OK, "step: %s", rlg_store_errmsg(s));
	return d->admitted;
}

/* The first column of the first row as an integer; -1 when no row. */
int64_t
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
void
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

void
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
struct rlg_policy
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
void
sim_step(struct sim *m, int64_t now, struct rlg_decision *d)
{
	const struct rlg_policy *p = m->p;
	struct rlg_state out;
	size_t lo, i, at;
	bool append = false;

	if (p->lim.algorithm != RLG_ALG_SLIDING_LOG) {
		ck_assert_int_eq(rlg_limiter_step(&p->lim, &m->st, now, 1, &out, d),
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
	    now, 1, &append, &out, d), RLG_OK);
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
void
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
void
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
void
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
void
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
/* A handle with [store] max_clients and rejection_cache as given. */
struct rlg_store *
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
	struct rlg_store_item item = { NULL, NULL, false, false, 1 };
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
	struct rlg_store_item items[2] = { { &log, "both", false, false, 1 },
	    { &bucket, "both", false, false, 1 } };
	struct rlg_store_item one = { NULL, NULL, false, false, 1 };
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

/* Worker id of a run, its settings and nothing counted yet. */
static void
worker_init(struct worker *w, const char *path, int many, int64_t cache,
    int id)
{
	memset(w, 0, sizeof *w);
	w->path = path;
	w->many = many;
	w->id = id;
	w->cache = cache;
}

/* NWORKERS threads open path together (a new file) and send at once. */
void
run_threads(const char *path, int many, int64_t cache, struct worker *w)
{
	pthread_barrier_t barrier;
	int i;

	pthread_barrier_init(&barrier, NULL, NWORKERS);
	for (i = 0; i < NWORKERS; i++) {
		worker_init(&w[i], path, many, cache, i);
		w[i].barrier = &barrier;
	}
	rlg_test_threads(NWORKERS, thread_main, w, sizeof w[0]);
	pthread_barrier_destroy(&barrier);
}

/* NWORKERS processes, released together through a pipe, results back. */
void
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
		worker_init(&w[i], path, many, cache, i);
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
void
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
void
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
/* ---- Redis suites ------------------------------------------------- */

/* A port on 127.0.0.1 that nothing listens on right now. */
int
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

void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int64_t
mono_ms(void)
{
	return rlg_test_clock_ms(CLOCK_MONOTONIC);
}

/* A Redis store on url, clock = local; its open's result in *rc. */
struct rlg_store *
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
int
step_until_ok(struct rlg_store *s, const struct rlg_policy *p,
    const char *client, struct rlg_decision *d)
{
	struct rlg_store_item item = { p, client, false, false, 1 };
	int64_t t0 = mono_ms();
	int rc;

	while ((rc = rlg_store_step(s, &item, 1, T1, d)) != RLG_OK &&
	    mono_ms() - t0 < HEAL_MS)
		sleep_ms(POLL_MS);
	return rc;
}

/* errmsg names the server (and not a password). */
void
check_names(const struct rlg_store *s, int port, const char *also)
{
	const char *msg = rlg_store_errmsg(s);
	char name[64];

	snprintf(name, sizeof name, "redis 127.0.0.1:%d", port);
	ck_assert_msg(strstr(msg, name) != NULL, "%s", msg);
	if (also != NULL)
		ck_assert_msg(strstr(msg, also) != NULL, "%s", msg);
}


/* ---- a fake Redis --------------------------------------------------- */

/*
 * The length of the first whole RESP command in buf, or 0 (not all
 * there); its name, "" if it has none.
 */
static size_t
resp_command(const char *buf, size_t len, char *name, size_t size)
{
	const char *argv[512];
	size_t argvlen[512], used;
	int argc;

	used = rlg_test_resp_parse(buf, len, argv, argvlen, 512, &argc);
	snprintf(name, size, "%.*s", argc > 0 ? (int)argvlen[0] : 0,
	    argc > 0 ? argv[0] : "");
	return used;
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

void
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

void
fake_stop(struct fake *f)
{
	f->stop = 1;
	pthread_join(f->tid, NULL);
	close(f->lfd);
	pthread_mutex_destroy(&f->mu);
}

