/*
 * store_fixture.h: what the store suites (check_store*.c) share: the
 * backend of the running test case and its servers, a directory (and empty
 * servers) per test, a store config and handle for that backend, the
 * stored state read back whatever the backend (SQL, or HGET and LRANGE on
 * the master of the key), a pure-limiter simulation to compare decisions
 * with, the concurrency workers (threads and processes on one store), and
 * for the Redis suites a free port, a monotonic clock and a fake server
 * whose replies a test sets.
 *
 * The names are short, as the tests read best; no other file of the test
 * program defines them.
 */
#ifndef RLG_TEST_STORE_FIXTURE_H
#define RLG_TEST_STORE_FIXTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "limiter.h"
#include "redis_fixture.h"
#include "store.h"

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

/* The per-test directory (in the suite's own, removed with it). */
extern char case_dir[128];

/*
 * The backend of the running test case: set by its unchecked fixture,
 * which runs before the case's tests (and their forks). cluster_mode:
 * the Redis backend against the suite's three-master cluster, where every
 * path is database 0 (a cluster has no other).
 */
extern int backend;     /* its row (store_backends.h): RLG_BACKEND_SQLITE.. */
extern bool cluster_mode;
extern struct rlg_test_redis redis_srv;
extern struct rlg_test_redis_cluster cluster_srv;

/* Policy names (a policy's name is not const). */
extern char name_default[], name_burst[], name_hour[], name_alg[];
extern char name_sl[], name_tb[], name_sw[], name_ten[];

/*
 * The unchecked fixtures of the three suites: a directory of the run; and
 * for Redis the suite's redis-server, or its cluster, started (and the
 * backend set) before the case's tests and stopped after them.
 */
void base_setup(void);
void base_teardown(void);
void redis_base_setup(void);
void redis_base_teardown(void);
void cluster_base_setup(void);
void cluster_base_teardown(void);

/*
 * The checked fixture: a directory of the test's own; with Redis, empty
 * servers (FLUSHALL) and no path mapped to a database yet.
 */
void case_setup(void);

/*
 * A test case named name, added to s: the unchecked fixture setup and
 * teardown (the suite's backend and servers) around its tests, and
 * case_setup before each; timeout_s for each test (0: Check's default).
 */
TCase *store_tcase(Suite *s, const char *name, void (*setup)(void),
    void (*teardown)(void), int timeout_s);

/*
 * A path in this test's directory; static storage, one of four in turn.
 * With Redis, path stands for a database of its own (registered here, so
 * that a worker process finds it mapped).
 */
char *path_in(const char *name);

/*
 * A config for the test's backend: the SQLite file path, or the Redis
 * database that stands for it, clock = local so that the fixed times of
 * the tests are the times the script runs at. store_cfg_free frees it.
 */
void store_cfg(struct rlg_store_config *cfg, const char *path, int busy_ms);

/* A Redis config for url (through the config's own parser). */
void store_cfg_url(struct rlg_store_config *cfg, const char *url);

void store_cfg_free(struct rlg_store_config *cfg);

/*
 * One command to the server on 127.0.0.1:port (AUTH with password if not
 * NULL, SELECT db); the reply, never NULL nor an error, caller frees.
 */
redisReply *rcmd(int port, const char *password, int db, const char *fmt,
    ...);

/*
 * One command to the suite's server, in the database of path; on the
 * cluster, to the master of the key (following MOVED). Caller frees.
 */
redisReply *rdb(const char *path, const char *fmt, ...);

/* rlg:{CLIENT}:POLICY, or its log rlg:{CLIENT}:POLICY:log, into buf. */
void redis_key(char *buf, size_t size, const char *policy_name,
    const char *client, bool log);

/* One field of a (policy, client) state; -1 when it has no state. */
int64_t state_field(const char *path, const char *policy_name,
    const char *client, const char *field);

/* Its count. */
int64_t count_of(const char *path, const char *policy_name,
    const char *client);

/* How many (policy, client) states the store holds. */
int64_t nstates(const char *path);

/* Sliding-log entries of policy and client (NULL: any). */
int64_t nlog(const char *path, const char *policy_name, const char *client);

/* An operator's reset of one client: every state (and log) of it. */
void reset_client(const char *path, const char *client);

/*
 * An operator's override of client under policy, as db/queries.sql and
 * docs/operations.md write it: SQLite an UPSERT into rlg_override (from
 * a connection of the test's own), Redis HSET rlg:overrides "POLICY
 * CLIENT" SPEC; spec NULL deletes it (DELETE, HDEL).
 */
void override_set(const char *path, const char *policy_name,
    const char *client, const char *spec);

/*
 * What rlg_store_overrides delivered: the calls of its fn and the rows as
 * "policy|client|spec", sorted, joined by ','; after stop_after calls
 * (0: never) fn returns 1.
 */
struct overrides_seen {
	int calls;
	int stop_after;
	char rows[2048];
};

/* rlg_store_overrides(s, version) into *seen (emptied first): its result. */
int overrides_read(struct rlg_store *s, uint64_t *version,
    struct overrides_seen *seen);

/*
 * Whether anything was written between probe_start and probe_changed:
 * SQLite's data_version moves when another connection commits; Redis
 * counts every write in rdb_changes_since_last_save.
 */
void probe_start(const char *path);
bool probe_changed(const char *path);

/* "window_start_ms|count|expires_ms|prev_count|tat_us", "" if no row. */
void state_dump(const char *path, const char *policy_name,
    const char *client, char *buf, size_t size);

/*
 * The client's log rows as "ts_ms:seq,...", ascending; "" if none. A
 * Redis log holds only the times: seq counts within one ms, as SQLite's.
 */
void log_dump(const char *path, const char *policy_name, const char *client,
    char *buf, size_t size);

/* A fixed-window policy "default" of limit per window_s, keyed by IP. */
struct rlg_policy policy(int64_t limit, int64_t window_s);

/* A policy name of algorithm a (burst: token_bucket's), keyed by IP. */
struct rlg_policy alg_policy(char *name, enum rlg_algorithm a, int64_t limit,
    int64_t window_s, int64_t burst);

/* A handle on path (busy_timeout_ms for SQLite); fails the test if not. */
struct rlg_store *open_ok(const char *path, int busy_ms);

/* A handle with [store] max_clients and rejection_cache as given. */
struct rlg_store *open_with(const char *path, int64_t max_clients,
    int64_t cache);

/*
 * One request for one policy, which must be decided; whether it was
 * admitted (the decision into *d unless NULL).
 */
int hit(struct rlg_store *s, const struct rlg_policy *p, const char *client,
    int64_t now, struct rlg_decision *d);

/*
 * SQLite: what schema version 5 added (the penalty box's columns and
 * view), dropped: a version 5 file made a version 4 one, with "PRAGMA
 * user_version = 4". SQL_DROP_V4 also drops what version 4 added (the
 * overrides): a version 3 file, with "PRAGMA user_version = 3".
 */
#define SQL_DROP_V5 "DROP VIEW bans;" \
	" ALTER TABLE rlg_state DROP COLUMN ban_until_ms;" \
	" ALTER TABLE rlg_state DROP COLUMN refused_start_ms;" \
	" ALTER TABLE rlg_state DROP COLUMN refused;"
#define SQL_DROP_V4 SQL_DROP_V5 " DROP TRIGGER rlg_override_insert;" \
	" DROP TRIGGER rlg_override_update;" \
	" DROP TRIGGER rlg_override_delete;" \
	" DROP TABLE rlg_override; DROP TABLE rlg_override_version;"

/* SQLite: the first column of the first row as an integer; -1: no row. */
int64_t sql_int(const char *path, const char *sql);

/* SQLite: the first row's columns as text joined with '|'. */
void sql_text(const char *path, const char *sql, char *buf, size_t size);

/* SQLite: statements from another connection, as an operator's shell. */
void sql_exec(const char *path, const char *sql);

/*
 * One request of the simulation: the pure limiter on the state the store
 * would hold.
 */
void sim_step(struct sim *m, int64_t now, struct rlg_decision *d);

/* The store decided as the simulation did, to the millisecond. */
void check_same(const struct rlg_decision *got,
    const struct rlg_decision *want, const char *what, long i);

/* The stored row (and log) of client equals the simulation's. */
void check_row(const char *path, const struct sim *m, const char *client);

/*
 * NWORKERS threads, or processes, each with its own handle on path (a
 * rejection cache of cache entries), start together and send what many
 * (MODE_*) says; their results into w[NWORKERS].
 */
void run_threads(const char *path, int many, int64_t cache,
    struct worker *w);
void run_processes(const char *path, int many, int64_t cache,
    struct worker *w);

/* MODE_ONE, MODE_MANY: exactly the limit over all workers. */
void check_totals(const char *path, int many, struct worker *w);

/* MODE_ALGS: the log's limit, the bucket's burst, the rows as well. */
void check_algorithms(const char *path, struct worker *w);

/* Redis suites: a port on 127.0.0.1 that nothing listens on right now. */
int free_port(void);

void sleep_ms(long ms);

/* CLOCK_MONOTONIC in ms. */
int64_t mono_ms(void);

/* A Redis store on url, clock = local; its open's result in *rc. */
struct rlg_store *open_url(const char *url, int timeout_ms, int *rc);

/* Steps until the store answers, at most HEAL_MS; the last result. */
int step_until_ok(struct rlg_store *s, const struct rlg_policy *p,
    const char *client, struct rlg_decision *d);

/* errmsg names the server 127.0.0.1:port (and also, unless NULL). */
void check_names(const struct rlg_store *s, int port, const char *also);

/*
 * A fake Redis on 127.0.0.1 that answers SCRIPT LOAD with a SHA1, PING
 * with +PONG, CLUSTER with slots (when set), EVALSHA with reply, anything
 * else with +OK; what a malformed reply or a redirection does. Set reply
 * and slots under mu.
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

void fake_start(struct fake *f);
void fake_stop(struct fake *f);

#endif
