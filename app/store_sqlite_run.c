/*
 * store_sqlite_run.c: the SQLite store's statements: their SQL (sq_sql),
 * prepared once per connection and finalized with it, run, and their
 * errors reported by name; and the busy handler every connection waits
 * with. Below the connection (store_sqlite_db.c) and the schema
 * (store_sqlite_schema.c), which both run statements, so that neither
 * calls the other for it.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include <sqlite3.h>

#include "store.h"
#include "store_sqlite_parts.h"
#include "util.h"

static const char *sq_code_name(int rc, char *buf, size_t size);

const char *const sq_sql[SQ_NSTMT] = {
	[SQ_BEGIN] = "BEGIN IMMEDIATE",
	[SQ_COMMIT] = "COMMIT",
	[SQ_ROLLBACK] = "ROLLBACK",
	[SQ_SELECT] =
	    "SELECT window_start_ms, count, expires_ms, prev_count, tat_us,"
	    " refused, refused_start_ms, ban_until_ms"
	    " FROM rlg_state WHERE policy = ?1 AND client = ?2",
	[SQ_UPSERT] =
	    "INSERT INTO rlg_state (policy, client, window_start_ms, count,"
	    " expires_ms, prev_count, tat_us, refused, refused_start_ms,"
	    " ban_until_ms)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
	    " ON CONFLICT (policy, client) DO UPDATE SET"
	    " window_start_ms = excluded.window_start_ms,"
	    " count = excluded.count,"
	    " expires_ms = excluded.expires_ms,"
	    " prev_count = excluded.prev_count,"
	    " tat_us = excluded.tat_us,"
	    " refused = excluded.refused,"
	    " refused_start_ms = excluded.refused_start_ms,"
	    " ban_until_ms = excluded.ban_until_ms",
	/*
	 * Most admitted requests of a fixed or sliding window change only
	 * the count of a stored row. Leaving expires_ms out of the SET list
	 * spares the index: one page per commit instead of two, about 1.5x
	 * the decisions per second.
	 */
	[SQ_UPDATE] =
	    "UPDATE rlg_state SET window_start_ms = ?3, count = ?4,"
	    " prev_count = ?5, tat_us = ?6, refused = ?7,"
	    " refused_start_ms = ?8, ban_until_ms = ?9"
	    " WHERE policy = ?1 AND client = ?2",
	/*
	 * The write-behind's row when its expiry is the one stored (a fixed
	 * or sliding window between two windows): the UPSERT's numbering,
	 * expires_ms kept out of the SET list as above.
	 */
	[SQ_FLUSH_UPDATE] =
	    "UPDATE rlg_state SET window_start_ms = ?3, count = ?4,"
	    " prev_count = ?6, tat_us = ?7, refused = ?8,"
	    " refused_start_ms = ?9, ban_until_ms = ?10"
	    " WHERE policy = ?1 AND client = ?2 AND expires_ms = ?5",
	/*
	 * A bounded batch: the inner SELECT walks the expires_ms index; the
	 * schema's trigger deletes each state's log rows with it.
	 */
	[SQ_PRUNE] =
	    "DELETE FROM rlg_state WHERE (policy, client) IN"
	    " (SELECT policy, client FROM rlg_state"
	    " WHERE expires_ms <= ?1 LIMIT ?2)",
	/*
	 * The newest ?4 (the limit) in-window rows, newest first: all of
	 * them while the client is under its limit; when it is over (the
	 * limit was lowered), the limit-th newest is the one whose leaving
	 * admits again, as the limiter wants it. One range of the primary
	 * key, read backwards.
	 */
	[SQ_LOG_SELECT] =
	    "SELECT ts_ms, seq FROM rlg_log"
	    " WHERE policy = ?1 AND client = ?2 AND ts_ms > ?3"
	    " ORDER BY ts_ms DESC, seq DESC LIMIT ?4",
	[SQ_LOG_INSERT] =
	    "INSERT INTO rlg_log (policy, client, ts_ms, seq)"
	    " VALUES (?1, ?2, ?3, ?4)",
	[SQ_LOG_TRIM] =
	    "DELETE FROM rlg_log"
	    " WHERE policy = ?1 AND client = ?2 AND ts_ms <= ?3",
	/* The schema's triggers keep this count (max_clients). */
	[SQ_CLIENTS] =
	    "SELECT clients FROM rlg_clients WHERE policy = ?1",
	/* Group commit: one request's writes, undone alone if it is full. */
	[SQ_SAVEPOINT] = "SAVEPOINT rlg_step",
	[SQ_RELEASE] = "RELEASE rlg_step",
	[SQ_ROLLBACK_TO] = "ROLLBACK TO rlg_step",
	/* The table's seed (store_sqlite_rows.c): every live state. */
	[SQ_SCAN] =
	    "SELECT policy, client, window_start_ms, count, expires_ms,"
	    " prev_count, tat_us, refused, refused_start_ms, ban_until_ms"
	    " FROM rlg_state WHERE expires_ms > ?1",
	/* rlgate --reset: a client's states (the trigger takes its log). */
	[SQ_RESET] =
	    "DELETE FROM rlg_state WHERE client = ?1"
	    " AND (?2 IS NULL OR policy = ?2)",
	/*
	 * The overrides (store_sqlite_rows.c): their version, the one row
	 * that the gate's poll reads; when it moved, the rows, in a read
	 * transaction with the version read again.
	 */
	[SQ_BEGIN_READ] = "BEGIN",
	[SQ_OVR_VERSION] =
	    "SELECT version FROM rlg_override_version WHERE id = 1",
	[SQ_OVR_ROWS] =
	    "SELECT policy, client, spec FROM rlg_override",
};

/* Result codes by name, for messages: sqlite3_errstr has no names. */
static const struct {
	int code;
	const char *name;
} sq_codes[] = {
	{ SQLITE_ERROR, "SQLITE_ERROR" },
	{ SQLITE_INTERNAL, "SQLITE_INTERNAL" },
	{ SQLITE_PERM, "SQLITE_PERM" },
	{ SQLITE_ABORT, "SQLITE_ABORT" },
	{ SQLITE_BUSY, "SQLITE_BUSY" },
	{ SQLITE_BUSY_RECOVERY, "SQLITE_BUSY_RECOVERY" },
	{ SQLITE_BUSY_SNAPSHOT, "SQLITE_BUSY_SNAPSHOT" },
	{ SQLITE_LOCKED, "SQLITE_LOCKED" },
	{ SQLITE_NOMEM, "SQLITE_NOMEM" },
	{ SQLITE_READONLY, "SQLITE_READONLY" },
	{ SQLITE_READONLY_RECOVERY, "SQLITE_READONLY_RECOVERY" },
	{ SQLITE_READONLY_CANTLOCK, "SQLITE_READONLY_CANTLOCK" },
	{ SQLITE_READONLY_ROLLBACK, "SQLITE_READONLY_ROLLBACK" },
	{ SQLITE_READONLY_DBMOVED, "SQLITE_READONLY_DBMOVED" },
	{ SQLITE_READONLY_CANTINIT, "SQLITE_READONLY_CANTINIT" },
	{ SQLITE_READONLY_DIRECTORY, "SQLITE_READONLY_DIRECTORY" },
	{ SQLITE_INTERRUPT, "SQLITE_INTERRUPT" },
	{ SQLITE_IOERR, "SQLITE_IOERR" },
	{ SQLITE_IOERR_READ, "SQLITE_IOERR_READ" },
	{ SQLITE_IOERR_SHORT_READ, "SQLITE_IOERR_SHORT_READ" },
	{ SQLITE_IOERR_WRITE, "SQLITE_IOERR_WRITE" },
	{ SQLITE_IOERR_FSYNC, "SQLITE_IOERR_FSYNC" },
	{ SQLITE_IOERR_TRUNCATE, "SQLITE_IOERR_TRUNCATE" },
	{ SQLITE_IOERR_FSTAT, "SQLITE_IOERR_FSTAT" },
	{ SQLITE_IOERR_LOCK, "SQLITE_IOERR_LOCK" },
	{ SQLITE_IOERR_SHMOPEN, "SQLITE_IOERR_SHMOPEN" },
	{ SQLITE_IOERR_SHMSIZE, "SQLITE_IOERR_SHMSIZE" },
	{ SQLITE_IOERR_SHMMAP, "SQLITE_IOERR_SHMMAP" },
	{ SQLITE_CORRUPT, "SQLITE_CORRUPT" },
	{ SQLITE_NOTFOUND, "SQLITE_NOTFOUND" },
	{ SQLITE_FULL, "SQLITE_FULL" },
	{ SQLITE_CANTOPEN, "SQLITE_CANTOPEN" },
	{ SQLITE_CANTOPEN_ISDIR, "SQLITE_CANTOPEN_ISDIR" },
	{ SQLITE_CANTOPEN_FULLPATH, "SQLITE_CANTOPEN_FULLPATH" },
	{ SQLITE_PROTOCOL, "SQLITE_PROTOCOL" },
	{ SQLITE_SCHEMA, "SQLITE_SCHEMA" },
	{ SQLITE_TOOBIG, "SQLITE_TOOBIG" },
	{ SQLITE_CONSTRAINT, "SQLITE_CONSTRAINT" },
	{ SQLITE_MISMATCH, "SQLITE_MISMATCH" },
	{ SQLITE_MISUSE, "SQLITE_MISUSE" },
	{ SQLITE_NOLFS, "SQLITE_NOLFS" },
	{ SQLITE_AUTH, "SQLITE_AUTH" },
	{ SQLITE_RANGE, "SQLITE_RANGE" },
	{ SQLITE_NOTADB, "SQLITE_NOTADB" },
};

/*
 * Makes sure the connection is open and still on the file that the path
 * names, reopening it at most once. 0 or -1 (errmsg set).
 */
/* Runs SQL text once (set-up only, never per request). 0 or -1. */
int
sq_exec(struct sq_store *s, const char *op, const char *sql)
{
	int rc;

	rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		sq_sqlite_error(s, op, rc);
		return -1;
	}
	return 0;
}

/*
 * Steps a prepared statement that returns no rows to completion, then
 * resets it and clears its bindings. Returns SQLITE_OK or the error code,
 * with errmsg set when op is not NULL.
 */
int
sq_run(struct sq_store *s, const char *op, sqlite3_stmt *st)
{
	int rc;

	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		rc = SQLITE_OK;
	else if (op != NULL)
		sq_sqlite_error(s, op, rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

/* errmsg = "sqlite OP on PATH: message (SQLITE_CODE)". */
void
sq_sqlite_error(struct sq_store *s, const char *op, int rc)
{
	char name[48];

	rlg_store_seterr(&s->base, "sqlite %s on %s: %s (%s)", op, s->path,
	    s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc),
	    sq_code_name(rc, name, sizeof name));
}

void
sq_open_error(struct sq_store *s, const char *fmt, ...)
{
	char msg[RLG_STORE_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	rlg_store_seterr(&s->base, "sqlite open on %s: %s", s->path, msg);
}

/* "SQLITE_BUSY", or "SQLITE_IOERR extended 1234" for one without a name. */
static const char *
sq_code_name(int rc, char *buf, size_t size)
{
	size_t i;

	for (i = 0; i < sizeof sq_codes / sizeof sq_codes[0]; i++) {
		if (sq_codes[i].code == rc)
			return sq_codes[i].name;
	}
	for (i = 0; i < sizeof sq_codes / sizeof sq_codes[0]; i++) {
		if (sq_codes[i].code == (rc & 0xff)) {
			snprintf(buf, size, "%s extended %d", sq_codes[i].name,
			    rc);
			return buf;
		}
	}
	snprintf(buf, size, "code %d", rc);
	return buf;
}

/*
 * Prepares every statement of the connection, as the store's own (trigger
 * code allowed, if the schema passed its check). 0, or -1 with errmsg set.
 */
int
sq_prepare_all(struct sq_store *s)
{
	bool was = s->preparing;
	int rc = SQLITE_OK, i;

	s->preparing = true;
	for (i = 0; i < SQ_NSTMT && rc == SQLITE_OK; i++) {
		rc = sqlite3_prepare_v3(s->db, sq_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &s->stmt[i], NULL);
		if (rc != SQLITE_OK)
			sq_sqlite_error(s, "prepare", rc);
	}
	s->preparing = was;
	return rc == SQLITE_OK ? 0 : -1;
}

void
sq_finalize_all(struct sq_store *s)
{
	int i;

	for (i = 0; i < SQ_NSTMT; i++) {
		sqlite3_finalize(s->stmt[i]);
		s->stmt[i] = NULL;
	}
}

/*
 * The busy handler: waits for the write lock another connection holds,
 * up to busy_timeout_ms (busy_limit_ms: a checkpoint waits less). A step
 * holds the lock for tens of microseconds
 * (a millisecond or so with synchronous = full), so the pauses start at
 * 50 us and double up to 2 ms; SQLite's own handler sleeps 1 ms at
 * first and up to 100 ms, long enough for other processes to take the
 * lock again and again meanwhile (tails of hundreds of ms under load).
 */
int
sq_busy(void *arg, int count)
{
	struct sq_store *s = arg;
	struct timespec now, pause;
	int64_t waited_us, pause_us;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (count == 0)
		s->busy_since = now;
	waited_us = (int64_t)(now.tv_sec - s->busy_since.tv_sec) * 1000000 +
	    (now.tv_nsec - s->busy_since.tv_nsec) / 1000;
	if (waited_us >= (int64_t)s->busy_limit_ms * 1000)
		return 0;
	pause_us = count < 6 ? (int64_t)50 << count : 2000;
	if (pause_us > (int64_t)s->busy_limit_ms * 1000 - waited_us)
		pause_us = (int64_t)s->busy_limit_ms * 1000 - waited_us;
	s->busy_waits++;
	pause.tv_sec = 0;
	pause.tv_nsec = (long)pause_us * 1000;
	nanosleep(&pause, NULL);
	return 1;
}
