/*
 * check_store.c: the SQLite store on real files in a temporary directory.
 *
 * "core": the schema and file mode of a new file, exact counting in one
 * window at fixed times, new windows, rejections that write nothing, one
 * row per (policy, client), the operator views, pruning. "concurrency":
 * threads and forked processes, each with its own handle, on one file:
 * exactly limit admitted, never more or fewer. "errors": a missing
 * directory, a file that is not a database, a file deleted or replaced
 * while open, a lock held past busy_timeout_ms, a newer schema; each one
 * reported with a clear message and healed by the same handle once the
 * fault is gone. Times are fixed; the only waits are the lock timeouts.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check_rlgate.h"
#include "store.h"
#include "util.h"

/* 2023-11-14 22:13:00 UTC: a multiple of 60 s. */
#define WIN0 ((int64_t)1699999980000)
/* One second into that window. */
#define T1 (WIN0 + 1000)

#define NWORKERS 4
#define NCLIENTS 40

struct worker {
	const char *path;
	int many;                      /* 0: one client; 1: NCLIENTS clients */
	int id;
	pthread_barrier_t *barrier;    /* threads: start together */
	long admitted;
	long errors;
	long per_client[NCLIENTS];     /* many: admitted per client */
	char errmsg[256];
};

static void base_setup(void);
static void base_teardown(void);
static void case_setup(void);
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
static void run_threads(const char *path, int many, struct worker *w);
static void run_processes(const char *path, int many, struct worker *w);
static void check_totals(const char *path, int many, struct worker *w);

/* The per-run directory (parent) and the per-test one inside it (child). */
static char base_dir[64];
static char case_dir[128];
static int case_seq;

static char name_default[] = "default";
static char name_burst[] = "burst";
static char name_hour[] = "hour";

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

/* Each test gets a directory of its own, removed with the base. */
static void
case_setup(void)
{
	snprintf(case_dir, sizeof case_dir, "%s/t%d-%ld", base_dir,
	    ++case_seq, (long)getpid());
	ck_assert_int_eq(mkdir(case_dir, 0700), 0);
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
	return p;
}

static struct rlg_policy
policy(int64_t limit, int64_t window_s)
{
	struct rlg_policy p = { name_default, RLG_ALG_FIXED_WINDOW, limit,
	    window_s * 1000, RLG_KEY_IP };

	return p;
}

static struct rlg_store *
open_ok(const char *path, int busy_ms)
{
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;
	char p[256];
	int rc;

	snprintf(p, sizeof p, "%s", path);
	cfg.path = p;
	cfg.busy_timeout_ms = busy_ms;
	cfg.on_error = RLG_ON_ERROR_CLOSED;
	rc = rlg_store_open(&cfg, &s);
	ck_assert_msg(rc == RLG_OK, "open %s: %s", path, rlg_store_errmsg(s));
	ck_assert_ptr_nonnull(s);
	return s;
}

/* One request for one policy; returns whether it was admitted. */
static int
hit(struct rlg_store *s, const struct rlg_policy *p, const char *client,
    int64_t now, struct rlg_decision *d)
{
	struct rlg_store_item item = { p, client };
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

	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 1);
	sql_text(path, "PRAGMA journal_mode", text, sizeof text);
	ck_assert_str_eq(text, "wal");
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
	    " WHERE (type, name) IN (VALUES ('table', 'rlg_state'),"
	    " ('index', 'rlg_state_expires'), ('view', 'clients'),"
	    " ('view', 'summary'))"), 4);
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

	s = open_ok(path, 2000);       /* user_version 1: schema kept */
	ck_assert(hit(s, &p, "c", T1 + 10, &d));
	ck_assert_int_eq(d.remaining, 1);
	rlg_store_close(s);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state"), 4);
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
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state"), 5);
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
	ck_assert_int_eq(sql_int(path, "SELECT window_start_ms FROM"
	    " rlg_state"), WIN0 + 60000);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state"), 1);

	/* Two windows skipped: a fresh count again. */
	ck_assert(hit(s, &p, "c", WIN0 + 180005, &d));
	ck_assert_int_eq(d.remaining, 2);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state"), 1);
	ck_assert_int_eq(sql_int(path, "SELECT expires_ms FROM rlg_state"),
	    WIN0 + 240000);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_rejected_writes_nothing)
{
	char *path = path_in("reject.db"), before[256], after[256];
	struct rlg_policy p = policy(2, 60);
	struct rlg_store *s;
	sqlite3 *watch;
	sqlite3_stmt *st;
	int64_t v0, v1;
	int i;

	s = open_ok(path, 2000);
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert(hit(s, &p, "c", T1, NULL));
	sql_text(path, "SELECT * FROM rlg_state", before, sizeof before);

	/* data_version moves when another connection commits anything. */
	ck_assert_int_eq(sqlite3_open_v2(path, &watch, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(watch, "PRAGMA data_version", -1,
	    &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	v0 = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);

	for (i = 0; i < 20; i++)
		ck_assert(!hit(s, &p, "c", T1 + 100 * i, NULL));

	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	v1 = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(watch);
	ck_assert_int_eq(v1, v0);
	sql_text(path, "SELECT * FROM rlg_state", after, sizeof after);
	ck_assert_str_eq(after, before);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state"), 2);

	/* An admitted request does commit: the probe works. */
	ck_assert(hit(s, &p, "other", T1, NULL));
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
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state WHERE"
	    " client = '10.0.0.1'"), 3);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state WHERE"
	    " client = '2001:db8::/64'"), 1);
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
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 6);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state WHERE"
	    " window_start_ms = 1699999980000 + 4 * 60000 AND count = 2"), 6);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_policies_all_or_nothing)
{
	char *path = path_in("policies.db");
	struct rlg_policy burst = policy(2, 1), hour = policy(10, 3600);
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item items[2];
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
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state WHERE"
	    " policy = 'hour'"), 2);

	/* The next second: both admit, hour counts 3. */
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1 + 1000, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(d[1].remaining, 7);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state WHERE"
	    " policy = 'hour'"), 3);

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
	ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state WHERE"
	    " client = 'd'"), 4);
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

/* ---- concurrency -------------------------------------------------- */

/* Requests each worker sends to client c in the many-clients tests. */
static int
sent_to(int client)
{
	return client % 6 + 1;
}

/*
 * One worker: its own handle on path; one client (CONC_SENT requests) or
 * NCLIENTS clients (sent_to(c) each, interleaved, from a different start).
 */
static void
run_worker(struct worker *w)
{
	struct rlg_policy one = policy(CONC_LIMIT, 60);
	struct rlg_policy many = policy(MANY_LIMIT, 60);
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;
	struct rlg_store_item item;
	struct rlg_decision d;
	char path[256], client[32];
	int i, r, c;

	snprintf(path, sizeof path, "%s", w->path);
	cfg.path = path;
	cfg.busy_timeout_ms = 30000;
	cfg.on_error = RLG_ON_ERROR_CLOSED;
	if (rlg_store_open(&cfg, &s) != RLG_OK) {
		snprintf(w->errmsg, sizeof w->errmsg, "%s",
		    rlg_store_errmsg(s));
		w->errors++;
	}
	if (!w->many) {
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
run_threads(const char *path, int many, struct worker *w)
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
run_processes(const char *path, int many, struct worker *w)
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
	char sql[128];
	int i, c;

	memset(per, 0, sizeof per);
	for (i = 0; i < NWORKERS; i++) {
		ck_assert_msg(w[i].errors == 0, "worker %d: %ld errors: %s",
		    i, w[i].errors, w[i].errmsg);
		total += w[i].admitted;
		for (c = 0; c < NCLIENTS; c++)
			per[c] += w[i].per_client[c];
	}
	if (!many) {
		ck_assert_int_eq(total, CONC_LIMIT);
		ck_assert_int_eq(sql_int(path, "SELECT count FROM rlg_state"
		    " WHERE client = 'hot'"), CONC_LIMIT);
		return;
	}
	for (c = 0; c < NCLIENTS; c++) {
		expect = NWORKERS * sent_to(c);
		if (expect > MANY_LIMIT)
			expect = MANY_LIMIT;
		sum_expect += expect;
		ck_assert_msg(per[c] == expect, "client %d: admitted %ld,"
		    " expected %ld", c, per[c], expect);
		snprintf(sql, sizeof sql, "SELECT count FROM rlg_state WHERE"
		    " client = '10.1.0.%d'", c);
		ck_assert_int_eq(sql_int(path, sql), expect);
	}
	ck_assert_int_eq(total, sum_expect);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"),
	    NCLIENTS);
}

START_TEST(test_threads_one_client)
{
	char *path = path_in("threads1.db");
	struct worker w[NWORKERS];

	run_threads(path, 0, w);
	check_totals(path, 0, w);
}
END_TEST

START_TEST(test_processes_one_client)
{
	char *path = path_in("procs1.db");
	struct worker w[NWORKERS];

	run_processes(path, 0, w);
	check_totals(path, 0, w);
}
END_TEST

START_TEST(test_threads_many_clients)
{
	char *path = path_in("threadsn.db");
	struct worker w[NWORKERS];

	run_threads(path, 1, w);
	check_totals(path, 1, w);
}
END_TEST

START_TEST(test_processes_many_clients)
{
	char *path = path_in("procsn.db");
	struct worker w[NWORKERS];

	run_processes(path, 1, w);
	check_totals(path, 1, w);
}
END_TEST

/*
 * 8 processes open a new file at once, 50 times: every open succeeds (the
 * switch to WAL upgrades a lock without sqlite's busy handler).
 */
START_TEST(test_processes_open_new_file)
{
	struct rlg_store_config cfg;
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
				cfg.path = path;
				cfg.busy_timeout_ms = 10000;
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
		ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 1);
	}
	ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- errors ------------------------------------------------------- */

START_TEST(test_missing_directory)
{
	char *dir = path_in("missing"), *path = path_in("missing/rl.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_config cfg = { path, 2000, RLG_ON_ERROR_CLOSED };
	struct rlg_store_item item = { &p, "c" };
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
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 1);
	ck_assert_int_eq(rlg_store_prune(s, T1, NULL), RLG_OK);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_garbage_file)
{
	char *path = path_in("garbage.db");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_config cfg = { path, 2000, RLG_ON_ERROR_CLOSED };
	struct rlg_store_item item = { &p, "c" };
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
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 1);
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
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 1);
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
	struct rlg_store_item item = { &p, "c" };
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
	struct rlg_store_item item = { &p, "c" };
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
	struct rlg_store_config cfg = { path, 2000, RLG_ON_ERROR_CLOSED };
	struct rlg_store_item item = { &p, "c" };
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	const char *want = "database schema version 2 is newer than this"
	    " rlgate (1)";

	rlg_store_close(open_ok(path, 2000));
	sql_exec(path, "PRAGMA user_version = 2");
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), want) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), want) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 2);

	sql_exec(path, "PRAGMA user_version = 1");
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert(d.admitted);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_bad_items)
{
	char *path = path_in("items.db"), key[RLG_CLIENT_KEY_MAX + 2];
	struct rlg_policy p = policy(5, 60), bad = policy(0, 60);
	struct rlg_store_item item = { &p, key };
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
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 2);
	rlg_store_close(s);
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
