/*
 * store_sqlite_schema.c: the SQLite store's schema: db/schema.sql applied
 * to a new file, an older file migrated, and every file held to rlgate's
 * own schema before and while it is used. Apart from the connection
 * (store_sqlite_db.c) because it is the store's guard against the file
 * it opens, with a reasoning of its own, below.
 *
 * The schema is db/schema.sql (version 4). Files of versions 1 to 3 are
 * migrated in place when opened (sq_migrations).
 *
 * The file runs no code rlgate did not write. Anyone who can write the
 * file can add a trigger to it (one that resets a count on every update
 * would admit everyone), and a trigger runs inside the statement that
 * fires it: inside rlgate. So every connection is opened with
 * SQLITE_DBCONFIG_DEFENSIVE and trusted_schema off, and the schema is
 * checked against rlgate's own (db/schema.sql applied to an in-memory
 * database, once per process): every trigger in the file, and every index
 * on rlgate's tables, must be one that schema.sql creates, with the same
 * SQL text, and all of those must be there (sq_check_schema). A file that
 * fails is refused like any store fault, with the object and the fix in
 * the message, and retried on the next call. Views and tables of the
 * operator's own stay: rlgate never reads them.
 *
 * A trigger added while rlgate serves is caught before it can run, by an
 * authorizer (sq_authorize) and the order of each transaction. SQLite
 * compiles a trigger into each statement that may fire it, when the
 * statement is prepared; a statement prepared before a schema change is
 * prepared again by SQLite itself when it next runs. The authorizer lets
 * trigger code compile only while rlgate prepares its own statements
 * itself, right after a check of the schema that passed, and only for
 * rlgate's triggers: anything SQLite compiles again on its own gets no
 * trigger code at all (the statement fails, SQLITE_AUTH). Each transaction
 * of a step or a prune reads before it writes, so a schema change shows
 * as a read statement compiled again (the authorizer sees it); the step
 * then checks the schema inside that transaction, under the write lock,
 * where nobody can change it, and prepares every statement again before
 * its first write. No window is left: code that was not checked never
 * runs, and what was checked cannot change before it runs.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store.h"
#include "store_sqlite_parts.h"
#include "util.h"

/* db/schema.sql, compiled in by the build as app/schema.c. */
extern const char rlg_schema_sql[];

/* The PRAGMA user_version that db/schema.sql sets. */
#define SQ_SCHEMA_VERSION 5

/*
 * rlgate's schema as SQLite stores it: db/schema.sql applied to an
 * in-memory database, read back from its sqlite_master, once per process
 * (sq_ref_build). What sq_check_schema holds a file to, and the names of
 * the only triggers sq_authorize lets run. Built once and never freed.
 */
struct sq_object {
	char *type;                   /* "table", "index", "trigger", "view" */
	char *name;
	char *tbl_name;               /* the table it belongs to */
	char *sql;                    /* its CREATE text; NULL: automatic */
};

static pthread_once_t sq_ref_once = PTHREAD_ONCE_INIT;
static struct sq_object *sq_ref;
static size_t sq_nref;
static char sq_ref_error[256];        /* empty when sq_ref is built */

static int sq_user_version(struct sq_store *s, int *version);
static int sq_migrate(struct sq_store *s, int from);
static int sq_check_object(struct sq_store *s, sqlite3_stmt *st,
    bool *seen);
static void sq_ref_build(void);
static const struct sq_object *sq_ref_find(const char *type,
    const char *name);
static bool sq_ref_table(const char *name);
static const char *sq_quote(const char *name, char *buf, size_t size);

/*
 * Migrations: sq_migrations[v] brings the objects of a version v file to
 * what db/schema.sql creates at version v + 1, where schema.sql's IF NOT
 * EXISTS statements would not: columns added to an existing table, views
 * whose text changed (dropped here, created again by schema.sql). After
 * the steps from the file's version on, rlg_schema_sql runs in the same
 * transaction: it adds the new tables and triggers, the views, and sets
 * user_version. A file of version v < SQ_SCHEMA_VERSION needs one entry
 * here for each version from v on.
 *
 * 1 -> 2: the columns of sliding_window and token_bucket (appended, as
 * ALTER TABLE adds them; schema.sql lists them last too), and the views,
 * which show them. rlg_log and its trigger are new in schema.sql.
 *
 * 2 -> 3: nothing to alter. schema.sql adds rlg_clients, its triggers and
 * the counts of the rows already there.
 *
 * 3 -> 4: nothing to alter. schema.sql adds rlg_override, its triggers and
 * rlg_override_version, whose one row starts at a random version.
 *
 * 4 -> 5: the columns of the penalty box (refused, refused_start_ms,
 * ban_until_ms; appended, 0 in every row: no ban). schema.sql adds the
 * view bans.
 *
 * A version that changes the text of one of rlgate's triggers or indexes
 * must DROP it here: schema.sql's IF NOT EXISTS would keep the old text,
 * and sq_check_schema refuses any text but the one schema.sql creates.
 */
static const char *const sq_migrations[SQ_SCHEMA_VERSION] = {
	[1] =
	    "ALTER TABLE rlg_state ADD COLUMN"
	    " prev_count INTEGER NOT NULL DEFAULT 0;"
	    "ALTER TABLE rlg_state ADD COLUMN"
	    " tat_us INTEGER NOT NULL DEFAULT 0;"
	    "DROP VIEW IF EXISTS clients;"
	    "DROP VIEW IF EXISTS summary;",
	[2] = "",
	[3] = "",
	[4] =
	    "ALTER TABLE rlg_state ADD COLUMN"
	    " refused INTEGER NOT NULL DEFAULT 0;"
	    "ALTER TABLE rlg_state ADD COLUMN"
	    " refused_start_ms INTEGER NOT NULL DEFAULT 0;"
	    "ALTER TABLE rlg_state ADD COLUMN"
	    " ban_until_ms INTEGER NOT NULL DEFAULT 0;",
};

/*
 * Applies db/schema.sql to a new database (user_version 0), or migrates an
 * older one to it, in one write transaction, checking the version again
 * under the lock since another process may have done it meanwhile;
 * refuses versions it does not know.
 */
int
sq_apply_schema(struct sq_store *s)
{
	int version, from;

	if (sq_user_version(s, &version) != 0)
		return -1;
	if (version >= 0 && version < SQ_SCHEMA_VERSION &&
	    (version == 0 || sq_migrations[version] != NULL)) {
		if (sq_exec(s, "schema", "BEGIN IMMEDIATE") != 0)
			return -1;
		if (sq_user_version(s, &version) != 0)
			goto rollback;
		/* Another process may have done it: then nothing to do. */
		from = version;
		if (from >= 0 && from < SQ_SCHEMA_VERSION) {
			if ((from >= 1 && sq_migrate(s, from) != 0) ||
			    sq_exec(s, "schema", rlg_schema_sql) != 0 ||
			    sq_user_version(s, &version) != 0)
				goto rollback;
		}
		if (sq_exec(s, "schema", "COMMIT") != 0)
			goto rollback;
		/* The file was new: a table of its path is not its own. */
		if (from == 0)
			s->created_ms = rlg_now_ms();
		if (from >= 1 && from < SQ_SCHEMA_VERSION)
			rlg_log("store %s: database schema migrated from"
			    " version %d to %d", s->path, from, version);
	}
	if (version > SQ_SCHEMA_VERSION) {
		sq_open_error(s, "database schema version %d is newer than"
		    " this rlgate (%d)", version, SQ_SCHEMA_VERSION);
		return -1;
	}
	if (version != SQ_SCHEMA_VERSION) {
		sq_open_error(s, "unknown database schema version %d (this"
		    " rlgate has %d)", version, SQ_SCHEMA_VERSION);
		return -1;
	}
	return 0;

rollback:
	if (!sqlite3_get_autocommit(s->db))
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/*
 * Runs the migration steps from version `from` on (inside the caller's
 * transaction); rlg_schema_sql then completes them. 0 or -1.
 */
static int
sq_migrate(struct sq_store *s, int from)
{
	int v;

	for (v = from; v < SQ_SCHEMA_VERSION; v++) {
		if (sq_migrations[v] == NULL) {
			sq_open_error(s, "no migration from database schema"
			    " version %d", v);
			return -1;
		}
		if (sq_exec(s, "schema migration", sq_migrations[v]) != 0)
			return -1;
	}
	return 0;
}

/* Reads PRAGMA user_version into *version. 0 or -1. */
static int
sq_user_version(struct sq_store *s, int *version)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
	if (rc != SQLITE_OK) {
		sq_sqlite_error(s, "open", rc);
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		sq_sqlite_error(s, "open", rc);
		sqlite3_finalize(st);
		return -1;
	}
	*version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return 0;
}

/*
 * The authorizer, called for every table, column and statement a
 * statement touches while SQLite compiles it: when rlgate prepares one,
 * and when SQLite prepares one again by itself after a schema change
 * (then it also notes that the schema moved). inner names the trigger (or
 * view) whose code makes the access, NULL for the statement's own. Trigger
 * code compiles only into rlgate's own preparations after a schema check
 * that passed, and only rlgate's triggers; any other is denied, which
 * fails the statement (SQLITE_AUTH) before it runs.
 */
int
sq_authorize(void *arg, int action, const char *a3, const char *a4,
    const char *dbname, const char *inner)
{
	struct sq_store *s = arg;

	(void)action;
	(void)a3;
	(void)a4;
	(void)dbname;
	if (!s->preparing)
		s->schema_moved = true;
	if (inner == NULL)
		return SQLITE_OK;
	if (s->preparing && s->schema_ok &&
	    sq_ref_find("trigger", inner) != NULL)
		return SQLITE_OK;
	return SQLITE_DENY;
}

/*
 * The schema changed while the connection was open: inside the caller's
 * transaction (the write lock held, so it cannot change again), checks it
 * and prepares every statement again, so that no statement holds trigger
 * code the check has not seen. 0, or -1 with errmsg set (the caller rolls
 * back; the connection is closed and the next call opens and checks it
 * afresh).
 */
int
sq_recheck(struct sq_store *s)
{
	int rc;

	s->preparing = true;
	s->schema_ok = false;
	sq_finalize_all(s);
	rc = sq_check_schema(s) == 0 && sq_prepare_all(s) == 0 ? 0 : -1;
	s->preparing = false;
	s->schema_moved = false;
	return rc;
}

/*
 * Holds the schema of the file to rlgate's (sq_ref): each trigger in it,
 * and each index on one of rlgate's tables, must be one of rlgate's, on
 * the same table, with the same SQL text; each of rlgate's triggers and
 * indexes must be there. Other tables, views and the indexes on those are
 * the operator's and stay. Runs inside a transaction (sq_connect,
 * sq_recheck), so it reads one snapshot of the schema. Sets schema_ok.
 * 0, or -1 with errmsg naming the first object that fails and the fix.
 */
int
sq_check_schema(struct sq_store *s)
{
	static const char sql[] = "SELECT type, name, tbl_name, sql"
	    " FROM sqlite_master WHERE type IN ('trigger', 'index')";
	char q[160];
	bool *seen = NULL;
	sqlite3_stmt *st = NULL;
	size_t i;
	int rc;

	s->schema_ok = false;
	(void)pthread_once(&sq_ref_once, sq_ref_build);
	if (sq_ref_error[0] != '\0') {
		rlg_store_seterr(&s->base, "sqlite schema check on %s: %s", s->path,
		    sq_ref_error);
		return -1;
	}
	seen = rlg_xcalloc(sq_nref, sizeof *seen);
	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		sq_sqlite_error(s, "schema check", rc);
		goto fail;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sq_check_object(s, st, seen) != 0)
			goto fail;
	}
	if (rc != SQLITE_DONE) {
		sq_sqlite_error(s, "schema check", rc);
		goto fail;
	}
	for (i = 0; i < sq_nref; i++) {
		if (seen[i] || (strcmp(sq_ref[i].type, "trigger") != 0 &&
		    strcmp(sq_ref[i].type, "index") != 0))
			continue;
		rlg_store_seterr(&s->base, "sqlite schema check on %s: the database lacks"
		    " %s %s of rlgate's schema: create it again from"
		    " db/schema.sql", s->path, sq_ref[i].type,
		    sq_quote(sq_ref[i].name, q, sizeof q));
		goto fail;
	}
	sqlite3_finalize(st);
	free(seen);
	s->schema_ok = true;
	return 0;

fail:
	sqlite3_finalize(st);
	free(seen);
	return -1;
}

/*
 * One trigger or index of the file, the row st of sq_check_schema's
 * query (type, name, tbl_name, sql): rlgate's own, on the same table,
 * with the same SQL text, noted in seen; or an index of the operator's
 * own on a table of its own, left alone. 0, or -1 with errmsg naming the
 * object and the fix.
 */
static int
sq_check_object(struct sq_store *s, sqlite3_stmt *st, bool *seen)
{
	const struct sq_object *o;
	const char *type, *name, *tbl, *text, *what;
	char q[160];

	type = (const char *)sqlite3_column_text(st, 0);
	name = (const char *)sqlite3_column_text(st, 1);
	tbl = (const char *)sqlite3_column_text(st, 2);
	text = (const char *)sqlite3_column_text(st, 3);
	if (type == NULL || name == NULL || tbl == NULL)
		return 0;
	/* An index of the operator's own on a table of its own. */
	if (strcmp(type, "trigger") != 0 && !sq_ref_table(tbl))
		return 0;
	o = sq_ref_find(type, name);
	what = strcmp(type, "trigger") == 0 ? "TRIGGER" : "INDEX";
	if (o == NULL) {
		rlg_store_seterr(&s->base, "sqlite schema check on %s: the database"
		    " holds %s %s on %s that rlgate did not create:"
		    " remove it with DROP %s %s", s->path, type,
		    sq_quote(name, q, sizeof q), tbl, what, q);
		return -1;
	}
	if (sqlite3_stricmp(o->tbl_name, tbl) != 0 ||
	    (o->sql == NULL) != (text == NULL) ||
	    (text != NULL && strcmp(o->sql, text) != 0)) {
		rlg_store_seterr(&s->base, "sqlite schema check on %s: the database's"
		    " %s %s is not the one rlgate created (its SQL"
		    " differs from db/schema.sql): DROP %s %s, then"
		    " create it again from db/schema.sql", s->path,
		    type, sq_quote(name, q, sizeof q), what, q);
		return -1;
	}
	seen[o - sq_ref] = true;
	return 0;
}

/*
 * Builds sq_ref (pthread_once): db/schema.sql on a private in-memory
 * database, its tables, indexes, triggers and views read back. On failure
 * sq_ref_error says why, and every schema check fails with it.
 */
static void
sq_ref_build(void)
{
	static const char sql[] = "SELECT type, name, tbl_name, sql"
	    " FROM sqlite_master ORDER BY type, name";
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	struct sq_object *o;
	const char *text;
	size_t cap = 0;
	int rc;

	rc = sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, rlg_schema_sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sq_nref == cap) {
			cap = cap > 0 ? cap * 2 : 16;
			o = rlg_xcalloc(cap, sizeof *o);
			if (sq_nref > 0)
				memcpy(o, sq_ref, sq_nref * sizeof *o);
			free(sq_ref);
			sq_ref = o;
		}
		o = &sq_ref[sq_nref++];
		o->type = rlg_xstrdup((const char *)sqlite3_column_text(st, 0));
		o->name = rlg_xstrdup((const char *)sqlite3_column_text(st, 1));
		o->tbl_name = rlg_xstrdup(
		    (const char *)sqlite3_column_text(st, 2));
		text = (const char *)sqlite3_column_text(st, 3);
		o->sql = text != NULL ? rlg_xstrdup(text) : NULL;
		rc = SQLITE_OK;
	}
	if (rc != SQLITE_DONE)
		snprintf(sq_ref_error, sizeof sq_ref_error, "cannot build the"
		    " reference schema from db/schema.sql: %s",
		    db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* The object of rlgate's schema of that type and name, or NULL. */
static const struct sq_object *
sq_ref_find(const char *type, const char *name)
{
	size_t i;

	for (i = 0; i < sq_nref; i++) {
		if (strcmp(sq_ref[i].type, type) == 0 &&
		    sqlite3_stricmp(sq_ref[i].name, name) == 0)
			return &sq_ref[i];
	}
	return NULL;
}

/* Is name one of rlgate's tables? */
static bool
sq_ref_table(const char *name)
{
	return sq_ref_find("table", name) != NULL;
}

/* name as an SQL identifier in double quotes, for a message. */
static const char *
sq_quote(const char *name, char *buf, size_t size)
{
	sqlite3_snprintf((int)size, buf, "\"%w\"", name);
	return buf;
}
