/*
 * check_store_sqlite.c: what only the SQLite store does, on real files in
 * a temporary directory (suite "store"; its tests of what every backend
 * does are in check_store.c).
 *
 * "core": the schema and file mode of a new file, the operator views,
 * pruning, NULL handles; [store] max_clients: a new client refused with
 * RLG_EFULL while the clients held go on, one full policy refusing the
 * whole step, rlg_clients following rows deleted by hand; the overrides
 * of a file deleted and made anew while open. "algorithms":
 * the sliding log's rows bounded by the limit as the window slides,
 * pruned with their state row, reset by hand; a token bucket's expiry
 * rounded to the second; the views of each algorithm. "schema": files of
 * schema version 1, 2 and 3 migrated in place, rows kept, also by several
 * processes at once. "concurrency": processes opening a new file at once.
 * "errors": a missing directory, a file that is not a database, a file
 * deleted or replaced while open, a lock held past busy_timeout_ms, a
 * newer schema, the overrides of a store that cannot open or lost its
 * version row; each one reported with a clear message and healed by the
 * same handle once the fault is gone. Times are fixed; the only waits are
 * the lock timeouts.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <sqlite3.h>

#include "check_store.h"
#include "store_fixture.h"
#include "util.h"

static void write_garbage(const char *path);
static int file_mode(const char *path);
static void make_v1(const char *path);
static bool hit_full(struct rlg_store *s, const struct rlg_policy *p,
    const char *client, int64_t now);
static void check_client_counts(const char *path);

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
	struct rlg_store_item item = { p, client, false, false, 1 };
	struct rlg_decision d;
	int rc = rlg_store_step(s, &item, 1, now, &d);

	ck_assert_msg(rc == RLG_OK || rc == RLG_EFULL, "step: %s",
	    rlg_store_errmsg(s));
	if (rc == RLG_OK)
		ck_assert(d.admitted);
	return rc == RLG_OK;
}

/* ---- max_clients ---------------------------------------------------- */

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
	struct rlg_store_item item = { &p, "d", false, false, 1 };
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
	struct rlg_store_item items[2] = { { &a, "x", false, false, 1 },
	    { &b, "x", false, false, 1 } };
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
	struct rlg_store_item item = { &p, "new", false, false, 1 };
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
	sql_exec(path, SQL_DROP_V4 " DROP TRIGGER rlg_state_count_insert;"
	    " DROP TRIGGER rlg_state_count_delete; DROP TABLE rlg_clients;"
	    " INSERT INTO rlg_state (policy, client, window_start_ms, count,"
	    " expires_ms) VALUES ('default', 'b', 0, 1, 4102444800000),"
	    " ('hour', 'a', 0, 1, 4102444800000); PRAGMA user_version = 2");
	s = open_with(path, 3, 0);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
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

/*
 * A version 4 file (before the penalty box) gets the ban's columns (0 in
 * every kept row), in the order of a new file, and the view bans; a ban
 * then works on the kept row and shows in the view, at the exact end.
 */
START_TEST(test_migrate_v4)
{
	char *path = path_in("v4.db"), *fresh = path_in("v5.db");
	char text[512], want[512];
	static const char columns[] = "SELECT group_concat(name || ':' ||"
	    " type || ':' || \"notnull\" || ':' || coalesce(dflt_value, '')"
	    " || ':' || pk, ',') FROM pragma_table_info('rlg_state')";
	struct rlg_policy p = policy(2, 60);
	struct rlg_decision d;
	struct rlg_store *s = open_ok(path, 2000);

	ck_assert(hit(s, &p, "a", T1, NULL));
	rlg_store_close(s);
	sql_exec(path, SQL_DROP_V5 " PRAGMA user_version = 4");
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM pragma_table_info"
	    "('rlg_state') WHERE name = 'ban_until_ms'"), 0);
	s = open_ok(path, 2000);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
	rlg_store_close(open_ok(fresh, 2000));
	sql_text(fresh, columns, want, sizeof want);
	sql_text(path, columns, text, sizeof text);
	ck_assert_str_eq(text, want);
	ck_assert_int_eq(sql_int(path, "SELECT refused + refused_start_ms +"
	    " ban_until_ms FROM rlg_state WHERE client = 'a'"), 0);
	/* The kept row counts: the second request fills the limit. */
	p.lim.ban_ms = 600000;
	ck_assert(hit(s, &p, "a", T1, NULL));
	ck_assert(!hit(s, &p, "a", T1 + 1, &d));
	ck_assert_int_eq(d.retry_ms, 600000);
	ck_assert_int_eq(sql_int(path, "SELECT ban_until_ms FROM rlg_state"
	    " WHERE client = 'a'"), T1 + 1 + 600000);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM bans"), 0);
	sql_exec(path, "UPDATE rlg_state SET ban_until_ms = 4102444800000");
	sql_text(path, "SELECT policy, client, banned_until FROM bans", text,
	    sizeof text);
	ck_assert_str_eq(text, "default|a|2100-01-01 00:00:00");
	rlg_store_close(s);
}
END_TEST

/*
 * A version 3 file (no overrides) gets rlg_override, its triggers and its
 * version row at a random version, its rows kept; the overrides are then
 * read as in a new file.
 */
START_TEST(test_migrate_v3)
{
	char *path = path_in("v3.db");
	struct rlg_policy p = policy(2, 60);
	struct rlg_store *s = open_ok(path, 2000);
	struct overrides_seen seen = { 0 };
	uint64_t v = 0, v0;

	ck_assert(hit(s, &p, "a", T1, NULL));
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	v0 = v;
	rlg_store_close(s);
	sql_exec(path, SQL_DROP_V4 " PRAGMA user_version = 3");
	s = open_ok(path, 2000);
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_override"), 0);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM"
	    " rlg_override_version WHERE id = 1 AND version > 0"), 1);
	/* The row of rlg_state is kept: the second request fills the limit. */
	ck_assert(hit(s, &p, "a", T1, NULL));
	ck_assert(!hit(s, &p, "a", T1, NULL));
	v = v0;
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_ne(v, v0);      /* a new random start */
	ck_assert_int_eq(seen.calls, 0);
	override_set(path, "default", "198.51.100.0/24", "exempt");
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_str_eq(seen.rows, "default|198.51.100.0/24|exempt");
	rlg_store_close(s);
}
END_TEST

/*
 * The overrides' version is the file's: another new file starts at
 * another random one, and a handle whose file was deleted (with its -wal
 * and -shm, as test_deleted_while_open) and made anew reads the new
 * file's version once it noticed (a step a second later, by the caller's
 * clock): a version it never had, with no rows.
 */
START_TEST(test_overrides_replaced_file)
{
	char *path = path_in("ovr.db"), *other = path_in("ovr-new.db");
	char side[300];
	struct rlg_policy p = policy(5, 60);
	struct rlg_store *s = open_ok(path, 2000), *o;
	struct overrides_seen seen = { 0 };
	uint64_t v = 0, v0, vo = 0;
	int64_t now = rlg_now_ms();

	override_set(path, "default", "203.0.113.7", "limit=600 window=60");
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_int_eq(seen.calls, 1);
	v0 = v;
	ck_assert(hit(s, &p, "c", now, NULL));

	o = open_ok(other, 2000);
	ck_assert_int_eq(overrides_read(o, &vo, &seen), RLG_OK);
	ck_assert_uint_ne(vo, v0);
	rlg_store_close(o);

	ck_assert_int_eq(unlink(path), 0);
	snprintf(side, sizeof side, "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof side, "%s-shm", path);
	unlink(side);
	ck_assert(hit(s, &p, "c", now + 1500, NULL));
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_ne(v, v0);
	ck_assert_uint_ne(v, 0);
	ck_assert_uint_eq(v, (uint64_t)sql_int(path, "SELECT version FROM"
	    " rlg_override_version"));
	ck_assert_int_eq(seen.calls, 0);
	rlg_store_close(s);
}
END_TEST

/*
 * A store that cannot be opened (its directory is missing), or whose
 * version row an operator deleted: RLG_ESTORE, the version left as it
 * was, fn never called; the row put back, the overrides read again.
 */
START_TEST(test_overrides_store_down)
{
	char missing[256], *path = path_in("ovr-down.db");
	struct rlg_store_config cfg = { .sqlite.busy_timeout_ms = 2000,
	    .on_error = RLG_ON_ERROR_CLOSED };
	struct overrides_seen seen = { 0 };
	struct rlg_store *s = NULL;
	uint64_t v = 42;

	snprintf(missing, sizeof missing, "%s/no-such-dir/x.db", case_dir);
	cfg.sqlite.path = missing;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_ESTORE);
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_ESTORE);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_eq(seen.calls, 0);
	rlg_store_close(s);

	s = open_ok(path, 2000);
	override_set(path, "default", "203.0.113.7", "exempt");
	sql_exec(path, "DELETE FROM rlg_override_version");
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_ESTORE);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_eq(seen.calls, 0);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "rlg_override_version") !=
	    NULL, "%s", rlg_store_errmsg(s));
	sql_exec(path, "INSERT INTO rlg_override_version (id, version)"
	    " VALUES (1, 7)");
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_uint_eq(v, 7);
	ck_assert_int_eq(seen.calls, 1);
	rlg_store_close(s);
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

	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
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
	    " SELECT 'sl', 'x' || n, %lld, 10, %lld, 0, 0, 0, 0, 0 FROM i",
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
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
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
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
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
	struct rlg_store_item item = { NULL, NULL, false, false, 1 };
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
		ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
		ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM"
		    " rlg_state"), 3 + 8);
		ck_assert_int_eq(sql_int(path, "SELECT sum(count) FROM"
		    " rlg_state WHERE policy = 'default'"), 3 + 5 + 8);
		ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM"
		    " pragma_table_info('rlg_state')"), 10);
	}
	ck_assert_int_eq(failed, 0);
}
END_TEST


/* ---- concurrency -------------------------------------------------- */

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
		ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
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
	struct rlg_store_item item = { &p, "c", false, false, 1 };
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
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
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
	struct rlg_store_item item = { &p, "c", false, false, 1 };
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
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
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
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 5);
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
	struct rlg_store_item item = { &p, "c", false, false, 1 };
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
	struct rlg_store_item item = { &p, "c", false, false, 1 };
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
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	const char *want = "database schema version 6 is newer than this"
	    " rlgate (5)";

	rlg_store_close(open_ok(path, 2000));
	sql_exec(path, "PRAGMA user_version = 6");
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), want) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), want) != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(sql_int(path, "PRAGMA user_version"), 6);

	sql_exec(path, "PRAGMA user_version = 5");
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert(d.admitted);
	rlg_store_close(s);
}
END_TEST

void
rlg_store_sqlite_tests(TCase *tc, const char *name)
{
	if (strcmp(name, "core") == 0) {
		tcase_add_test(tc, test_new_file_schema);
		tcase_add_test(tc, test_clients_view);
		tcase_add_test(tc, test_prune);
		tcase_add_test(tc, test_null_safe);
		tcase_add_test(tc, test_max_clients);
		tcase_add_test(tc, test_max_clients_per_policy);
		tcase_add_test(tc, test_max_clients_sliding_log_and_unlimited);
		tcase_add_test(tc, test_client_counts_follow_deletes);
		tcase_add_test(tc, test_overrides_replaced_file);
	} else if (strcmp(name, "algorithms") == 0) {
		tcase_add_test(tc, test_sliding_log_rows);
		tcase_add_test(tc, test_expiry_rounded);
		tcase_add_test(tc, test_views_algorithms);
	} else if (strcmp(name, "schema") == 0) {
		tcase_add_test(tc, test_migrate_v1);
		tcase_add_test(tc, test_migrate_v2);
		tcase_add_test(tc, test_migrate_v3);
		tcase_add_test(tc, test_migrate_v4);
		tcase_add_test(tc, test_processes_migrate);
	} else if (strcmp(name, "concurrency") == 0) {
		tcase_add_test(tc, test_processes_open_new_file);
	} else if (strcmp(name, "errors") == 0) {
		tcase_add_test(tc, test_missing_directory);
		tcase_add_test(tc, test_garbage_file);
		tcase_add_test(tc, test_deleted_while_open);
		tcase_add_test(tc, test_replaced_while_open);
		tcase_add_test(tc, test_lock_held);
		tcase_add_test(tc, test_newer_schema);
		tcase_add_test(tc, test_overrides_store_down);
	}
}
