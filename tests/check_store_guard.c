/*
 * check_store_guard.c: what the SQLite store (store_sqlite.c) guards
 * beside the counts: the schema of its file, the modes of its files, and
 * the length of its WAL.
 *
 * On real files in a temporary directory; another connection (the
 * operator's sqlite3 shell) changes the file in between.
 *
 * "schema": the file runs no code rlgate did not write. A trigger of
 * someone else's (one that resets the count on every update, the attack),
 * a trigger of rlgate's name with another body, a missing trigger of
 * rlgate's, an index on rlg_state: each refused at open and, added while
 * a handle is open, at that handle's next step or prune, before any of it
 * runs, with a message naming the object and the fix; nothing admitted
 * beyond the limit meanwhile, and the same handle counts exactly again
 * once the operator removed it. The operator's own tables, indexes on
 * them, and views (of rlgate's tables too) are allowed, also added while
 * open. Files of schema versions 1 to 3 are migrated and pass; a version
 * 1 file with a trigger of someone else's is refused after its migration.
 *
 * "files": rlg_store_check_files names a database, -wal and -shm that
 * others than the owner may read or write, with their modes and the
 * chmod; nothing for files of mode 0600, for a missing file, or for Redis.
 *
 * "wal": the WAL file stays within about 4 MB, checkpointed by
 * rlg_store_idle or, for a caller that never calls it, by the step; a
 * reader that holds an old snapshot open lets it grow (SQLite cannot copy
 * past it), the checkpoints neither wait for it nor hold up the steps,
 * once it is gone the next checkpoints make the WAL start over and
 * journal_size_limit cuts the file back to 16 MiB, and a prune once the
 * requests have stopped truncates it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check_rlgate.h"
#include "store.h"
#include "fixture.h"
#include "store_fixture.h"
#include "util.h"

/* db/schema.sql, compiled into the library. */
extern const char rlg_schema_sql[];

/* 2023-11-14 22:13:00 UTC, one second in: a fixed instant. */
#define GT0 ((int64_t)1699999981000)

/* The trigger of the attack: every update sets the count back to 0. */
#define RESET_TRIGGER \
	"CREATE TRIGGER reset AFTER UPDATE ON rlg_state BEGIN" \
	" UPDATE rlg_state SET count = 0 WHERE policy = new.policy" \
	" AND client = new.client; END"

/* The WAL length at which the store checkpoints: 1000 frames of 4 KiB. */
#define WAL_CHECKPOINT_BYTES ((off_t)1000 * (4096 + 24))
/* Its journal_size_limit. */
#define WAL_LIMIT_BYTES ((off_t)16 << 20)

static char lname[] = "strict";

/* A handle on path, without a rejection cache: every step is the store's. */
static int
open_store(const char *path, bool group, struct rlg_store **s)
{
	struct rlg_store_config cfg = { .sqlite.path = (char *)path,
	    .sqlite.busy_timeout_ms = 2000, .on_error = RLG_ON_ERROR_CLOSED,
	    .group_commit = group ? RLG_GROUP_ON : RLG_GROUP_OFF };

	return rlg_store_open(&cfg, s);
}

/* One request: the step's result; *admitted when RLG_OK. */

/*
 * Runs the CREATE statement of rlgate's trigger or index name, as it
 * stands in db/schema.sql: what an operator who broke it pastes back.
 */
static void
restore(const char *path, const char *name)
{
	char key[128], sql[1024];
	const char *at, *start, *end;

	snprintf(key, sizeof key, "IF NOT EXISTS %s", name);
	at = strstr(rlg_schema_sql, key);
	ck_assert_ptr_nonnull(at);
	for (start = at; start > rlg_schema_sql &&
	    strncmp(start, "CREATE", 6) != 0; start--)
		;
	end = strncmp(start, "CREATE TRIGGER", 14) == 0 ?
	    strstr(at, "\nEND;") + 5 : strchr(at, ';') + 1;
	ck_assert_int_lt(end - start, (long)sizeof sql);
	memcpy(sql, start, (size_t)(end - start));
	sql[end - start] = '\0';
	sql_exec(path, sql);
}

/* The last error holds every one of the NULL-terminated strings. */
static void
check_msg(const struct rlg_store *s, ...)
{
	const char *msg = rlg_store_errmsg(s), *want;
	va_list ap;

	va_start(ap, s);
	while ((want = va_arg(ap, const char *)) != NULL)
		ck_assert_msg(strstr(msg, want) != NULL,
		    "error message \"%s\" lacks \"%s\"", msg, want);
	va_end(ap);
}

/*
 * The file holds an object the store refuses (sql made it): a handle
 * open before is refused at its next step and keeps being refused, with a
 * message holding want1 and want2; a new one is refused at open; the count
 * of "c" never moves; once fix has run (if not NULL) and rlgate's object
 * restored has been created again from db/schema.sql (if not NULL), both
 * handles decide again, exactly.
 */
static void
check_refused(const char *sql, const char *fix, const char *restored,
    const char *want1, const char *want2)
{
	static int calls;
	char name[32], *path;
	struct rlg_policy p = policy(2, 60);
	struct rlg_store *s, *t = NULL;
	int i;

	snprintf(name, sizeof name, "refused-%d.db", ++calls);
	path = path_in(name);
	s = open_ok(path, 2000);

	ck_assert(hit(s, &p, "c", GT0, NULL));
	ck_assert(hit(s, &p, "c", GT0, NULL));
	sql_exec(path, sql);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(rlg_test_step(s, &p, "c", GT0 + i, NULL), RLG_ESTORE);
		check_msg(s, path, want1, want2, NULL);
	}
	ck_assert_int_eq(rlg_store_prune(s, GT0, NULL), RLG_ESTORE);
	ck_assert_int_eq(open_store(path, false, &t), RLG_ESTORE);
	ck_assert_ptr_nonnull(t);
	check_msg(t, want1, want2, NULL);
	ck_assert_int_eq(count_of(path, "default", "c"), 2);

	if (fix != NULL)
		sql_exec(path, fix);
	if (restored != NULL)
		restore(path, restored);
	/* At its limit: rejected, the count unchanged, then a new client. */
	ck_assert(!hit(s, &p, "c", GT0 + 10, NULL));
	ck_assert(!hit(t, &p, "c", GT0 + 10, NULL));
	ck_assert(hit(s, &p, "d", GT0 + 10, NULL));
	ck_assert_int_eq(count_of(path, "default", "c"), 2);
	ck_assert_int_eq(count_of(path, "default", "d"), 1);
	rlg_store_close(t);
	rlg_store_close(s);
}

/* ---- schema ------------------------------------------------------- */

/*
 * The attack: a trigger that sets the count back to 0 on every update
 * would admit every request. Added while the handle is open, it never
 * runs: the next step is refused, and six requests at a limit of 2 get no
 * admission at all.
 */
START_TEST(test_foreign_trigger)
{
	check_refused(RESET_TRIGGER, "DROP TRIGGER reset", NULL,
	    "holds trigger \"reset\" on rlg_state that rlgate did not create",
	    "remove it with DROP TRIGGER \"reset\"");
}
END_TEST

/* Present before the handle opens: refused at open, and it heals. */
START_TEST(test_foreign_trigger_at_open)
{
	char *path = path_in("open.db");
	struct rlg_policy p = policy(2, 60);
	struct rlg_store *s = NULL;
	bool admitted;
	int i, n = 0;

	rlg_store_close(open_ok(path, 2000));
	sql_exec(path, RESET_TRIGGER);
	ck_assert_int_eq(open_store(path, false, &s), RLG_ESTORE);
	check_msg(s, "sqlite schema check on ", path,
	    "the database holds trigger \"reset\"", "DROP TRIGGER", NULL);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(rlg_test_step(s, &p, "c", GT0, &admitted), RLG_ESTORE);
		n += admitted;
	}
	ck_assert_int_eq(n, 0);
	sql_exec(path, "DROP TRIGGER reset");
	for (i = 0; i < 6; i++)
		n += hit(s, &p, "c", GT0, NULL);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(count_of(path, "default", "c"), 2);
	rlg_store_close(s);
}
END_TEST

/* A trigger on a table of the operator's own: "no trigger anywhere". */
START_TEST(test_foreign_trigger_elsewhere)
{
	check_refused("CREATE TABLE notes (x); CREATE TRIGGER audit AFTER"
	    " INSERT ON notes BEGIN SELECT 1; END",
	    "DROP TRIGGER audit", NULL,
	    "holds trigger \"audit\" on notes", "DROP TRIGGER \"audit\"");
}
END_TEST

/* rlgate's trigger, its body changed: the name alone is not enough. */
START_TEST(test_altered_trigger)
{
	check_refused("DROP TRIGGER rlg_state_count_insert;"
	    " CREATE TRIGGER rlg_state_count_insert AFTER INSERT ON rlg_state"
	    " BEGIN UPDATE rlg_state SET count = 0; END",
	    "DROP TRIGGER rlg_state_count_insert", "rlg_state_count_insert",
	    "trigger \"rlg_state_count_insert\" is not the one rlgate created",
	    "create it again from db/schema.sql");
}
END_TEST

/*
 * The same body on another event, and one space more in the same text:
 * only the text schema.sql creates passes.
 */
START_TEST(test_altered_trigger_text)
{
	check_refused("DROP TRIGGER rlg_state_delete_log;"
	    " CREATE TRIGGER rlg_state_delete_log AFTER UPDATE ON rlg_state"
	    " BEGIN DELETE FROM rlg_log WHERE policy = old.policy AND"
	    " client = old.client; END",
	    "DROP TRIGGER rlg_state_delete_log", "rlg_state_delete_log",
	    "trigger \"rlg_state_delete_log\" is not the one", "DROP TRIGGER");
	check_refused("DROP TRIGGER rlg_state_count_delete;"
	    " CREATE TRIGGER rlg_state_count_delete\nAFTER DELETE ON rlg_state\n"
	    "BEGIN\n\tUPDATE rlg_clients SET clients = clients - 1 WHERE"
	    "  policy = old.policy;\nEND",
	    "DROP TRIGGER rlg_state_count_delete", "rlg_state_count_delete",
	    "trigger \"rlg_state_count_delete\" is not the one", "DROP TRIGGER");
}
END_TEST

/* One of rlgate's triggers dropped: max_clients would count wrong. */
START_TEST(test_missing_trigger)
{
	check_refused("DROP TRIGGER rlg_state_count_delete", NULL,
	    "rlg_state_count_delete",
	    "lacks trigger \"rlg_state_count_delete\" of rlgate's schema",
	    "db/schema.sql");
}
END_TEST

/* An index on rlg_state (a UNIQUE one would refuse every new client). */
START_TEST(test_foreign_index)
{
	check_refused("CREATE INDEX by_client ON rlg_state (client)",
	    "DROP INDEX by_client", NULL,
	    "holds index \"by_client\" on rlg_state that rlgate did not create",
	    "remove it with DROP INDEX \"by_client\"");
	check_refused("DROP INDEX rlg_state_expires; CREATE INDEX"
	    " rlg_state_expires ON rlg_state (expires_ms, count)",
	    "DROP INDEX rlg_state_expires", "rlg_state_expires",
	    "index \"rlg_state_expires\" is not the one rlgate created",
	    "DROP INDEX \"rlg_state_expires\"");
}
END_TEST

/*
 * The operator's own tables, indexes on them and views, of rlgate's
 * tables too, added while the handle is open and before another opens:
 * both count on exactly, and rlgate's own views still work.
 */
START_TEST(test_operator_objects)
{
	char *path = path_in("ops.db");
	struct rlg_policy p = policy(3, 60);
	struct rlg_store *s = open_ok(path, 2000), *t;
	int64_t deleted = -1;

	ck_assert(hit(s, &p, "c", GT0, NULL));
	sql_exec(path, "CREATE TABLE notes (client TEXT, note TEXT);"
	    " CREATE INDEX notes_client ON notes (client);"
	    " CREATE VIEW busy AS SELECT client, count FROM rlg_state"
	    " WHERE count > 1; ANALYZE");
	ck_assert(hit(s, &p, "c", GT0 + 1, NULL));
	t = open_ok(path, 2000);
	ck_assert(hit(t, &p, "c", GT0 + 2, NULL));
	ck_assert(!hit(t, &p, "c", GT0 + 3, NULL));
	ck_assert(!hit(s, &p, "c", GT0 + 3, NULL));
	ck_assert_int_eq(count_of(path, "default", "c"), 3);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM busy"), 1);
	ck_assert_int_eq(sql_int(path, "SELECT count FROM clients"), 3);
	/* A prune after a change of the schema, with rlgate's triggers. */
	sql_exec(path, "DROP VIEW busy");
	ck_assert_int_eq(rlg_store_prune(s, GT0 + 120000, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 1);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_clients"
	    " WHERE clients != 0"), 0);
	rlg_store_close(t);
	rlg_store_close(s);
}
END_TEST

/*
 * The prune is the first to run after the trigger came: refused before
 * its DELETE fires it, and no row is deleted.
 */
START_TEST(test_foreign_trigger_prune)
{
	char *path = path_in("prune.db");
	struct rlg_policy p = policy(2, 60);
	struct rlg_store *s = open_ok(path, 2000);

	ck_assert(hit(s, &p, "c", GT0, NULL));
	sql_exec(path, "CREATE TABLE seen (client TEXT);"
	    " CREATE TRIGGER keep AFTER DELETE ON rlg_state BEGIN"
	    " INSERT INTO seen VALUES (old.client); END");
	ck_assert_int_eq(rlg_store_prune(s, GT0 + 120000, NULL), RLG_ESTORE);
	check_msg(s, "holds trigger \"keep\"", NULL);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 1);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM seen"), 0);
	sql_exec(path, "DROP TRIGGER keep");
	ck_assert_int_eq(rlg_store_prune(s, GT0 + 120000, NULL), RLG_OK);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"), 0);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM seen"), 0);
	rlg_store_close(s);
}
END_TEST

/*
 * The sliding log (another first read) and group commit (the steps of
 * several requests in one transaction) are guarded the same way.
 */
START_TEST(test_foreign_trigger_log_and_group)
{
	char *path = path_in("log.db");
	struct rlg_policy l = { .name = lname,
	    .lim.algorithm = RLG_ALG_SLIDING_LOG, .lim.limit = 2, .lim.window_ms = 60000,
	    .key = RLG_KEY_IP };
	struct rlg_policy p = policy(2, 60);
	struct rlg_store *s = open_ok(path, 2000), *g = NULL;
	int i;

	ck_assert_int_eq(open_store(path, true, &g), RLG_OK);
	ck_assert(hit(s, &l, "c", GT0, NULL));
	ck_assert(hit(g, &p, "c", GT0, NULL));
	sql_exec(path, "CREATE TRIGGER spare BEFORE INSERT ON rlg_log BEGIN"
	    " SELECT RAISE(IGNORE); END;" RESET_TRIGGER);
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(rlg_test_step(s, &l, "c", GT0 + 1 + i, NULL),
		    RLG_ESTORE);
		ck_assert_int_eq(rlg_test_step(g, &p, "c", GT0 + 1 + i, NULL),
		    RLG_ESTORE);
	}
	check_msg(s, "that rlgate did not create", NULL);
	check_msg(g, "that rlgate did not create", NULL);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log"), 1);
	sql_exec(path, "DROP TRIGGER spare; DROP TRIGGER reset");
	ck_assert(hit(s, &l, "c", GT0 + 10, NULL));
	ck_assert(!hit(s, &l, "c", GT0 + 11, NULL));
	ck_assert(hit(g, &p, "c", GT0 + 10, NULL));
	ck_assert(!hit(g, &p, "c", GT0 + 11, NULL));
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_log"), 2);
	ck_assert_int_eq(count_of(path, "default", "c"), 2);
	rlg_store_close(g);
	rlg_store_close(s);
}
END_TEST

/*
 * A file of the first rlgate (schema version 1), as it made it: its
 * table, index and views, no trigger.
 */
static void
make_v1(const char *path, const char *extra)
{
	char sql[2048];
	sqlite3 *db;

	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
	sqlite3_close(db);

	snprintf(sql, sizeof sql, "PRAGMA journal_mode = WAL;"
	    "CREATE TABLE rlg_state (\n"
	    "\tpolicy          TEXT    NOT NULL,\n"
	    "\tclient          TEXT    NOT NULL,\n"
	    "\twindow_start_ms INTEGER NOT NULL,\n"
	    "\tcount           INTEGER NOT NULL,\n"
	    "\texpires_ms      INTEGER NOT NULL,\n"
	    "\tPRIMARY KEY (policy, client)\n"
	    ") WITHOUT ROWID;"
	    "CREATE INDEX IF NOT EXISTS rlg_state_expires ON rlg_state"
	    " (expires_ms);"
	    "CREATE VIEW clients AS SELECT policy, client, count"
	    " FROM rlg_state;"
	    "CREATE VIEW summary AS SELECT policy, sum(count) AS total_count"
	    " FROM rlg_state GROUP BY policy;"
	    "INSERT INTO rlg_state VALUES ('default', 'c', 1699999980000, 1,"
	    " 1700000040000);"
	    "%s PRAGMA user_version = 1;", extra);
	sql_exec(path, sql);
}

/* Versions 1 and 2 are migrated and pass the check; so does a new one. */
START_TEST(test_migrated_pass)
{
	char *v1 = path_in("v1.db"), *v2 = path_in("v2.db");
	struct rlg_policy p = policy(2, 60);
	struct rlg_store *s;

	make_v1(v1, "");
	s = open_ok(v1, 2000);
	ck_assert_int_eq(sql_int(v1, "PRAGMA user_version"), 5);
	ck_assert(hit(s, &p, "c", GT0, NULL));
	ck_assert(!hit(s, &p, "c", GT0, NULL));
	rlg_store_close(s);

	/*
	 * Version 2: a version 4 file without the overrides, rlg_clients
	 * and their triggers.
	 */
	rlg_store_close(open_ok(v2, 2000));
	sql_exec(v2, SQL_DROP_V4 " DROP TRIGGER rlg_state_count_insert;"
	    " DROP TRIGGER rlg_state_count_delete; DROP TABLE rlg_clients;"
	    " PRAGMA user_version = 2");
	s = open_ok(v2, 2000);
	ck_assert_int_eq(sql_int(v2, "PRAGMA user_version"), 5);
	ck_assert(hit(s, &p, "c", GT0, NULL));
	ck_assert_int_eq(sql_int(v2, "SELECT clients FROM rlg_clients"), 1);
	rlg_store_close(s);

	/* Version 3: without the overrides. */
	sql_exec(v2, SQL_DROP_V4 " PRAGMA user_version = 3");
	s = open_ok(v2, 2000);
	ck_assert_int_eq(sql_int(v2, "PRAGMA user_version"), 5);
	ck_assert_int_eq(sql_int(v2, "SELECT count(*) FROM sqlite_master"
	    " WHERE name LIKE 'rlg_override%'"), 5);
	/* The row is kept: one more fills the limit of 2. */
	ck_assert(hit(s, &p, "c", GT0, NULL));
	ck_assert(!hit(s, &p, "c", GT0, NULL));
	rlg_store_close(s);
}
END_TEST

/* A version 1 file that holds a trigger of someone else's is refused. */
START_TEST(test_migrated_foreign_trigger)
{
	char *v1 = path_in("v1-trigger.db");
	struct rlg_policy p = policy(2, 60);
	struct rlg_store *s = NULL;

	make_v1(v1, RESET_TRIGGER ";");
	ck_assert_int_eq(open_store(v1, false, &s), RLG_ESTORE);
	check_msg(s, "holds trigger \"reset\"", NULL);
	ck_assert_int_eq(rlg_test_step(s, &p, "c", GT0, NULL), RLG_ESTORE);
	sql_exec(v1, "DROP TRIGGER reset");
	ck_assert(hit(s, &p, "c", GT0, NULL));
	ck_assert(!hit(s, &p, "c", GT0, NULL));
	ck_assert_int_eq(count_of(v1, "default", "c"), 2);
	rlg_store_close(s);
}
END_TEST

/* ---- files -------------------------------------------------------- */

struct warnings {
	int n;
	char line[4096];
};

static void
collect(void *ctx, const char *line)
{
	struct warnings *w = ctx;

	w->n++;
	snprintf(w->line, sizeof w->line, "%s", line);
}

START_TEST(test_file_modes)
{
	char *path = path_in("modes.db"), wal[300], shm[300];
	struct rlg_store_config cfg = { .sqlite.path = path };
	struct rlg_store_config redis = { .backend = RLG_BACKEND_REDIS,
	    .sqlite.path = path };
	struct rlg_policy p = policy(5, 60);
	struct warnings w = { 0, "" };
	struct rlg_store *s;

	/* Missing: nothing to say. */
	ck_assert_int_eq(rlg_store_check_files(&cfg, collect, &w), 0);
	/* Made by the store: 0600, nothing to say. */
	s = open_ok(path, 2000);
	ck_assert(hit(s, &p, "c", GT0, NULL));
	snprintf(wal, sizeof wal, "%s-wal", path);
	snprintf(shm, sizeof shm, "%s-shm", path);
	ck_assert_int_eq(rlg_store_check_files(&cfg, collect, &w), 0);
	ck_assert_int_eq(w.n, 0);

	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(rlg_store_check_files(&cfg, collect, &w), 1);
	ck_assert_int_eq(w.n, 1);
	ck_assert_msg(strstr(w.line, "the database has mode 0644"
	    " (group-readable, world-readable)") != NULL &&
	    strstr(w.line, "read the clients' state") != NULL &&
	    strstr(w.line, "change their counts") == NULL, "%s", w.line);
	ck_assert_msg(strstr(w.line, ": chmod go-rwx ") != NULL &&
	    strstr(w.line, path) != NULL, "%s", w.line);

	ck_assert_int_eq(chmod(wal, 0666), 0);
	ck_assert_int_eq(chmod(shm, 0660), 0);
	ck_assert_int_eq(rlg_store_check_files(&cfg, collect, &w), 3);
	ck_assert_int_eq(w.n, 2);
	ck_assert_msg(strstr(w.line, "its -wal has mode 0666"
	    " (group-readable, group-writable, world-readable,"
	    " world-writable)") != NULL && strstr(w.line, "its -shm has mode"
	    " 0660 (group-readable, group-writable)") != NULL &&
	    strstr(w.line, "change their counts") != NULL, "%s", w.line);
	ck_assert_msg(strstr(w.line, "chmod go-rwx") != NULL &&
	    strstr(w.line, wal) != NULL && strstr(w.line, shm) != NULL,
	    "%s", w.line);

	/* Redis keeps no files; NULL warn only counts. */
	ck_assert_int_eq(rlg_store_check_files(&redis, collect, &w), 0);
	ck_assert_int_eq(rlg_store_check_files(&cfg, NULL, NULL), 3);
	ck_assert_int_eq(w.n, 2);
	rlg_store_close(s);
}
END_TEST

START_TEST(test_mode_describe)
{
	char words[128], chmod_arg[16];

	rlg_mode_describe(0, words, sizeof words, chmod_arg,
	    sizeof chmod_arg);
	ck_assert_str_eq(words, "");
	ck_assert_str_eq(chmod_arg, "");
	rlg_mode_describe(S_IWGRP | S_IROTH | S_IWOTH, words, sizeof words,
	    chmod_arg, sizeof chmod_arg);
	ck_assert_str_eq(words, "group-writable, world-readable,"
	    " world-writable");
	ck_assert_str_eq(chmod_arg, "g-w,o-rw");
	rlg_mode_describe(S_IRWXG | S_IRWXO, words, sizeof words, chmod_arg,
	    sizeof chmod_arg);
	ck_assert_str_eq(chmod_arg, "g-rwx,o-rwx");
	rlg_mode_describe(S_IXOTH, words, sizeof words, chmod_arg,
	    sizeof chmod_arg);
	ck_assert_str_eq(words, "world-executable");
	ck_assert_str_eq(chmod_arg, "o-x");
}
END_TEST

/* ---- wal ---------------------------------------------------------- */

static off_t
wal_size(const char *path)
{
	char wal[300];
	struct stat st;

	snprintf(wal, sizeof wal, "%s-wal", path);
	return stat(wal, &st) == 0 ? st.st_size : 0;
}

/*
 * n requests of new clients (each one a new row: several pages a
 * commit), from first on, each followed by rlg_store_idle if idle.
 */
static void
new_clients(struct rlg_store *s, int first, int n, bool idle)
{
	struct rlg_policy p = policy(5, 60);
	char client[32];
	int i;

	for (i = first; i < first + n; i++) {
		snprintf(client, sizeof client, "10.%d.%d.%d", i >> 16,
		    (i >> 8) & 255, i & 255);
		ck_assert(hit(s, &p, client, GT0, NULL));
		if (idle)
			rlg_store_idle(s, GT0);
	}
}

static double
ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/*
 * With rlg_store_idle after each request, and with none (the step does
 * it), the WAL never passes the checkpoint length by more than a few
 * requests' pages, and a reader elsewhere that reads briefly (as the
 * operator's shell does) changes nothing.
 */
START_TEST(test_wal_bounded)
{
	char *a = path_in("idle.db"), *b = path_in("steps.db");
	struct rlg_store *s = open_ok(a, 2000), *t = open_ok(b, 2000);
	off_t most = 0;
	int round;

	for (round = 0; round < 12; round++) {
		new_clients(s, round * 1000, 1000, true);
		new_clients(t, round * 1000, 1000, false);
		ck_assert_int_eq(sql_int(a, "SELECT count(*) FROM rlg_state"),
		    (round + 1) * 1000);
		if (wal_size(a) > most)
			most = wal_size(a);
		if (wal_size(b) > most)
			most = wal_size(b);
	}
	ck_assert_msg(most <= WAL_CHECKPOINT_BYTES + 64 * 4120,
	    "the WAL reached %lld bytes", (long long)most);
	rlg_store_close(t);
	rlg_store_close(s);
}
END_TEST

/*
 * A reader holds a snapshot: the WAL grows past it (nothing can be
 * copied past a snapshot in use) and the checkpoints neither wait for it
 * nor hold up the steps; once the reader ends, the next checkpoints make
 * the WAL start over, and the file is cut back to 16 MiB; the first prune
 * after a quiet interval truncates it. (SQLite's own checkpoint leaves it
 * at the largest size it reached.)
 */
START_TEST(test_wal_reader_pins)
{
	char *path = path_in("pinned.db");
	struct rlg_store *s = open_ok(path, 2000);
	struct timespec t0;
	sqlite3 *reader;
	sqlite3_stmt *st;
	double slowest = 0, ms;
	int i;

	new_clients(s, 0, 10, true);
	ck_assert_int_eq(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL),
	    SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(reader, "SELECT count(*) FROM"
	    " rlg_state", -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_int_eq(sqlite3_column_int(st, 0), 10);
	sqlite3_finalize(st);

	for (i = 0; i < 30; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		new_clients(s, 10 + i * 100, 100, true);
		ms = ms_since(&t0);
		if (ms > slowest)
			slowest = ms;
	}
	ck_assert_msg(wal_size(path) > 2 * WAL_CHECKPOINT_BYTES,
	    "the WAL is %lld bytes", (long long)wal_size(path));
	/* 100 requests, none held up by a checkpoint waiting 2 s. */
	ck_assert_msg(slowest < 1500, "100 requests took %.0f ms", slowest);

	ck_assert_int_eq(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(reader);
	new_clients(s, 5000, 400, true);
	ck_assert_msg(wal_size(path) <= WAL_LIMIT_BYTES,
	    "the WAL is %lld bytes", (long long)wal_size(path));
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM rlg_state"),
	    3410);
	/* A prune after the load (its commits counted), then a quiet one. */
	ck_assert_int_eq(rlg_store_prune(s, GT0, NULL), RLG_OK);
	ck_assert_int_eq(rlg_store_prune(s, GT0, NULL), RLG_OK);
	ck_assert_msg(wal_size(path) <= 64 * 4120, "the WAL is %lld bytes",
	    (long long)wal_size(path));
	rlg_store_close(s);
}
END_TEST

Suite *
rlg_store_guard_suite(void)
{
	Suite *s = suite_create("store_guard");
	TCase *tc;

	tc = store_tcase(s, "schema", base_setup, base_teardown, 60);
	tcase_add_test(tc, test_foreign_trigger);
	tcase_add_test(tc, test_foreign_trigger_at_open);
	tcase_add_test(tc, test_foreign_trigger_elsewhere);
	tcase_add_test(tc, test_altered_trigger);
	tcase_add_test(tc, test_altered_trigger_text);
	tcase_add_test(tc, test_missing_trigger);
	tcase_add_test(tc, test_foreign_index);
	tcase_add_test(tc, test_operator_objects);
	tcase_add_test(tc, test_foreign_trigger_prune);
	tcase_add_test(tc, test_foreign_trigger_log_and_group);
	tcase_add_test(tc, test_migrated_pass);
	tcase_add_test(tc, test_migrated_foreign_trigger);

	tc = store_tcase(s, "files", base_setup, base_teardown, 0);
	tcase_add_test(tc, test_file_modes);
	tcase_add_test(tc, test_mode_describe);

	tc = store_tcase(s, "wal", base_setup, base_teardown, 120);
	tcase_add_test(tc, test_wal_bounded);
	tcase_add_test(tc, test_wal_reader_pins);
	return s;
}
