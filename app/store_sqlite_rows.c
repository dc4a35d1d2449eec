/*
 * store_sqlite_rows.c: the SQLite store's states in bulk, for what works
 * beside the step: the decision table (store_table.c) seeds itself from
 * the live states and writes its changes behind, many rows to one
 * transaction; rlgate --reset deletes a client's states; the gate reads
 * the operator's overrides (rlg_override) when their version moved.
 *
 * Each write transaction reads first (the client count of no policy), so
 * that a schema changed since the connection's last statement is checked
 * before anything that can fire a trigger runs, as in the step
 * (store_sqlite_schema.c says why).
 */
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "store.h"
#include "store_sqlite.h"
#include "store_sqlite_parts.h"
#include "util.h"

static int sq_rows_begin(struct sq_store *s, const char *op);
static int sq_rows_commit(struct sq_store *s, const char *op);

/* The handle, when it is the SQLite store's (whose scan is this one). */
static struct sq_store *
sq_handle(struct rlg_store *base)
{
	return base != NULL && base->ops->scan == rlg_store_sqlite_scan ?
	    (struct sq_store *)base : NULL;
}

int
rlg_store_sqlite_scan(struct rlg_store *base, int64_t now_ms,
    int (*fn)(void *ctx, const struct rlg_store_row *row), void *ctx)
{
	struct sq_store *s = sq_handle(base);
	struct rlg_store_row row;
	sqlite3_stmt *st;
	int rc;

	if (s == NULL || sq_ready(s, now_ms) != 0)
		return RLG_ESTORE;
	st = s->stmt[SQ_SCAN];
	sqlite3_bind_int64(st, 1, now_ms);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		row.policy = (const char *)sqlite3_column_text(st, 0);
		row.client = (const char *)sqlite3_column_text(st, 1);
		if (row.policy == NULL || row.client == NULL)
			continue;
		row.st.window_start_ms = sqlite3_column_int64(st, 2);
		row.st.count = sqlite3_column_int64(st, 3);
		row.st.expires_ms = sqlite3_column_int64(st, 4);
		row.st.prev_count = sqlite3_column_int64(st, 5);
		row.st.tat_us = sqlite3_column_int64(st, 6);
		row.st.refused = sqlite3_column_int64(st, 7);
		row.st.refused_start_ms = sqlite3_column_int64(st, 8);
		row.st.ban_until_ms = sqlite3_column_int64(st, 9);
		if (fn(ctx, &row) != 0) {
			rc = SQLITE_DONE;
			break;
		}
	}
	if (rc != SQLITE_DONE)
		sq_sqlite_error(s, "scan", rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? RLG_OK : RLG_ESTORE;
}

int
rlg_store_sqlite_begin(struct rlg_store *base, int64_t now_ms)
{
	struct sq_store *s = sq_handle(base);

	if (s == NULL || sq_ready(s, now_ms) != 0 ||
	    sq_rows_begin(s, "flush") != 0)
		return RLG_ESTORE;
	return RLG_OK;
}

static void
bind_row(sqlite3_stmt *st, const struct rlg_store_row *row)
{
	sqlite3_bind_text(st, 1, row->policy, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, row->client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, row->st.window_start_ms);
	sqlite3_bind_int64(st, 4, row->st.count);
	sqlite3_bind_int64(st, 5, row->st.expires_ms);
	sqlite3_bind_int64(st, 6, row->st.prev_count);
	sqlite3_bind_int64(st, 7, row->st.tat_us);
	sqlite3_bind_int64(st, 8, row->st.refused);
	sqlite3_bind_int64(st, 9, row->st.refused_start_ms);
	sqlite3_bind_int64(st, 10, row->st.ban_until_ms);
}

/*
 * A row of a window (no GCRA tat) most often keeps the expiry the
 * database holds: the UPDATE that leaves the expires_ms index alone is
 * tried first, and the UPSERT writes the rest (a new window, a new
 * client, a row an operator deleted). A token bucket moves its expiry
 * with every admitted request: straight to the UPSERT.
 */
int
rlg_store_sqlite_put(struct rlg_store *base, const struct rlg_store_row *rows,
    size_t n)
{
	struct sq_store *s = sq_handle(base);
	sqlite3_stmt *st;
	size_t i;
	int rc;

	if (s == NULL || s->db == NULL || sqlite3_get_autocommit(s->db))
		return s != NULL ? sq_failed(s, SQLITE_MISUSE) : RLG_ESTORE;
	for (i = 0; i < n; i++) {
		if (rows[i].st.tat_us == 0) {
			st = s->stmt[SQ_FLUSH_UPDATE];
			bind_row(st, &rows[i]);
			if ((rc = sq_run(s, "flush", st)) != SQLITE_OK)
				return sq_failed(s, rc);
			if (sqlite3_changes(s->db) == 1)
				continue;
		}
		st = s->stmt[SQ_UPSERT];
		bind_row(st, &rows[i]);
		if ((rc = sq_run(s, "flush", st)) != SQLITE_OK)
			return sq_failed(s, rc);
	}
	return RLG_OK;
}

int
rlg_store_sqlite_commit(struct rlg_store *base)
{
	struct sq_store *s = sq_handle(base);

	if (s == NULL || s->db == NULL || sqlite3_get_autocommit(s->db))
		return RLG_ESTORE;
	return sq_rows_commit(s, "flush");
}

void
rlg_store_sqlite_rollback(struct rlg_store *base)
{
	struct sq_store *s = sq_handle(base);

	if (s != NULL)
		sq_rollback(s);
}

/*
 * The connection's page cache: the flusher's updates land all over the
 * state b-tree, and pages read again from the kernel's cache cost a
 * system call each (measured: a third of the flush's time with 200,000
 * rows in SQLite's default 2 MB).
 */
void
rlg_store_sqlite_cache(struct rlg_store *base, int64_t kib)
{
	struct sq_store *s = sq_handle(base);
	char sql[64];

	if (s == NULL || s->db == NULL || kib <= 0)
		return;
	snprintf(sql, sizeof sql, "PRAGMA cache_size = -%lld",
	    (long long)kib);
	(void)sqlite3_exec(s->db, sql, NULL, NULL, NULL);
}

int
rlg_store_sqlite_reset(struct rlg_store *base, const char *client,
    const char *policy, int64_t *deleted)
{
	struct sq_store *s = sq_handle(base);
	sqlite3_stmt *st;
	int rc;

	*deleted = 0;
	if (s == NULL || sq_ready(s, rlg_now_ms()) != 0 ||
	    sq_rows_begin(s, "reset") != 0)
		return RLG_ESTORE;
	st = s->stmt[SQ_RESET];
	sqlite3_bind_text(st, 1, client, -1, SQLITE_STATIC);
	if (policy != NULL)
		sqlite3_bind_text(st, 2, policy, -1, SQLITE_STATIC);
	rc = sq_run(s, "reset", st);
	*deleted = rc == SQLITE_OK ? sqlite3_changes(s->db) : 0;
	return rc == SQLITE_OK ? sq_rows_commit(s, "reset") : sq_failed(s, rc);
}

int
rlg_store_sqlite_ident(struct rlg_store *base, dev_t *dev, ino_t *ino,
    int64_t *born_ns, int64_t *created_ms)
{
	struct sq_store *s = sq_handle(base);

	if (s == NULL || sq_ready_now(s, rlg_now_ms()) != 0)
		return RLG_ESTORE;
	*dev = s->dev;
	*ino = s->ino;
	*born_ns = s->born_ns;
	*created_ms = s->created_ms;
	s->created_ms = 0;            /* told once */
	return RLG_OK;
}

/*
 * BEGIN IMMEDIATE, a read, the schema checked if it moved: 0, or -1 with
 * the transaction closed and errmsg set.
 */
static int
sq_rows_begin(struct sq_store *s, const char *op)
{
	sqlite3_stmt *st = s->stmt[SQ_CLIENTS];
	int rc;

	if ((rc = sq_run(s, op, s->stmt[SQ_BEGIN])) != SQLITE_OK) {
		sq_failed(s, rc);
		return -1;
	}
	sqlite3_bind_text(st, 1, "", -1, SQLITE_STATIC);
	if ((rc = sq_run(s, op, st)) != SQLITE_OK) {
		sq_failed(s, rc);
		return -1;
	}
	if (s->schema_moved && sq_recheck(s) != 0) {
		sq_failed(s, SQLITE_AUTH);
		return -1;
	}
	return 0;
}

/* COMMIT: RLG_OK, or RLG_ESTORE with the transaction closed. */
static int
sq_rows_commit(struct sq_store *s, const char *op)
{
	int rc = sq_run(s, op, s->stmt[SQ_COMMIT]);

	return rc == SQLITE_OK ? RLG_OK : sq_failed(s, rc);
}

/*
 * rlg_store_probe: the schema checked (sq_ready, the BEGIN IMMEDIATE of
 * sq_rows_begin), then the file's user_version written over itself in
 * the transaction, rolled back: a database that cannot be written fails
 * here as a decision's commit would.
 */
int
sq_probe(struct rlg_store *base, int64_t now_ms)
{
	struct sq_store *s = sq_handle(base);
	sqlite3_stmt *st = NULL;
	char sql[48];
	int rc, version = 0;

	if (s == NULL || sq_ready(s, now_ms) != 0 ||
	    sq_rows_begin(s, "probe") != 0)
		return RLG_ESTORE;
	rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		version = sqlite3_column_int(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_OK) {
		snprintf(sql, sizeof sql, "PRAGMA user_version = %d", version);
		rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	}
	if (rc != SQLITE_OK) {
		sq_sqlite_error(s, "probe", rc);
		return sq_failed(s, rc);
	}
	sq_rollback(s);
	return RLG_OK;
}

/*
 * rlg_store_survey: the schema's per-policy client counts, and for each
 * policy its RLG_SURVEY_TOP most used states among the first
 * RLG_SURVEY_SCAN of its primary key's range, the banned ones first. Statements prepared per
 * call: a page's poll, not a decision.
 */
int
sq_survey(struct rlg_store *base, int64_t now_ms, bool top,
    struct rlg_store_survey *out)
{
	struct sq_store *s = sq_handle(base);
	sqlite3_stmt *cs = NULL, *ts = NULL;
	struct rlg_survey_row *r;
	const char *text;
	size_t i;
	int rc;

	if (s == NULL || sq_ready(s, now_ms) != 0)
		return RLG_ESTORE;
	rc = sqlite3_prepare_v2(s->db, "SELECT policy, clients FROM rlg_clients"
	    " WHERE policy <> '' ORDER BY policy", -1, &cs, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(s->db,
		    "SELECT client, window_start_ms, count, expires_ms,"
		    " prev_count, tat_us, refused, refused_start_ms,"
		    " ban_until_ms FROM (SELECT * FROM rlg_state"
		    " WHERE policy = ?1 AND expires_ms > ?2 LIMIT ?3)"
		    " ORDER BY ban_until_ms > ?2 DESC,"
		    " count + prev_count DESC, tat_us DESC LIMIT ?4",
		    -1, &ts, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(cs)) == SQLITE_ROW) {
		rc = SQLITE_OK;
		if (out->npolicies == RLG_SURVEY_POLICIES ||
		    (text = (const char *)sqlite3_column_text(cs, 0)) == NULL)
			continue;
		i = out->npolicies++;
		snprintf(out->policies[i].name, sizeof out->policies[i].name,
		    "%s", text);
		out->policies[i].clients = sqlite3_column_int64(cs, 1);
		if (!top)
			continue;
		if (out->policies[i].clients > RLG_SURVEY_SCAN)
			out->sampled = true;
		sqlite3_bind_text(ts, 1, out->policies[i].name, -1,
		    SQLITE_STATIC);
		sqlite3_bind_int64(ts, 2, now_ms);
		sqlite3_bind_int(ts, 3, RLG_SURVEY_SCAN);
		sqlite3_bind_int(ts, 4, RLG_SURVEY_TOP);
		while ((rc = sqlite3_step(ts)) == SQLITE_ROW) {
			if ((text = (const char *)sqlite3_column_text(ts, 0)) ==
			    NULL)
				continue;
			r = &out->top[out->ntop++];
			memcpy(r->policy, out->policies[i].name,
			    sizeof r->policy);
			snprintf(r->client, sizeof r->client, "%s", text);
			r->st.window_start_ms = sqlite3_column_int64(ts, 1);
			r->st.count = sqlite3_column_int64(ts, 2);
			r->st.expires_ms = sqlite3_column_int64(ts, 3);
			r->st.prev_count = sqlite3_column_int64(ts, 4);
			r->st.tat_us = sqlite3_column_int64(ts, 5);
			r->st.refused = sqlite3_column_int64(ts, 6);
			r->st.refused_start_ms = sqlite3_column_int64(ts, 7);
			r->st.ban_until_ms = sqlite3_column_int64(ts, 8);
		}
		sqlite3_reset(ts);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	else if (rc != SQLITE_OK)
		sq_sqlite_error(s, "survey", rc);
	sqlite3_finalize(cs);
	sqlite3_finalize(ts);
	return rc == SQLITE_OK ? RLG_OK : RLG_ESTORE;
}

/* The overrides' version from SQ_OVR_VERSION into *v: SQLITE_OK or the
 * error (errmsg set). */
static int
sq_ovr_version(struct sq_store *s, uint64_t *v)
{
	sqlite3_stmt *st = s->stmt[SQ_OVR_VERSION];
	int rc;

	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		/* Stored as 1 .. 2^63 - 1; never 0, whatever was written. */
		*v = (uint64_t)sqlite3_column_int64(st, 0);
		if (*v == 0)
			*v = 1;
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rlg_store_seterr(&s->base, "sqlite overrides on %s: the row of"
		    " rlg_override_version is missing: put it back with"
		    " INSERT INTO rlg_override_version (id, version)"
		    " VALUES (1, abs(random() %% 4611686018427387904) + 1)",
		    s->path);
		rc = SQLITE_ERROR;
	} else {
		sq_sqlite_error(s, "overrides", rc);
	}
	sqlite3_reset(st);
	return rc;
}

/*
 * rlg_store_overrides: the version row alone when nothing changed (the
 * reader's poll, about twice a second per process); else, in one read
 * transaction (one snapshot: the rows are those of the version read with
 * them), the version again and every row of rlg_override.
 */
int
sq_overrides(struct rlg_store *base, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx)
{
	struct sq_store *s = sq_handle(base);
	struct rlg_override_row row;
	sqlite3_stmt *st;
	uint64_t v = 0;
	int rc;

	if (s == NULL || sq_ready(s, rlg_now_ms()) != 0)
		return RLG_ESTORE;
	if ((rc = sq_ovr_version(s, &v)) != SQLITE_OK)
		return sq_failed(s, rc);
	if (v == *version)
		return RLG_OK;
	if ((rc = sq_run(s, "overrides", s->stmt[SQ_BEGIN_READ])) !=
	    SQLITE_OK || (rc = sq_ovr_version(s, &v)) != SQLITE_OK)
		return sq_failed(s, rc);
	st = s->stmt[SQ_OVR_ROWS];
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		row.policy = (const char *)sqlite3_column_text(st, 0);
		row.client = (const char *)sqlite3_column_text(st, 1);
		row.spec = (const char *)sqlite3_column_text(st, 2);
		if (row.policy == NULL || row.client == NULL ||
		    row.spec == NULL)
			continue;
		if (fn(ctx, &row) != 0) {
			rc = SQLITE_DONE;
			break;
		}
	}
	if (rc != SQLITE_DONE)
		sq_sqlite_error(s, "overrides", rc);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return sq_failed(s, rc);
	if ((rc = sq_run(s, "overrides", s->stmt[SQ_COMMIT])) != SQLITE_OK)
		return sq_failed(s, rc);
	*version = v;
	return RLG_OK;
}
