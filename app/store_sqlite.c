/*
 * store_sqlite.c: the SQLite store, one connection per handle: its
 * operations and its entry in the registry of backends (store_sqlite.h),
 * its handle from open to close, the step passed to group commit or run
 * alone (store_sqlite_step.c), and its prune.
 *
 * The rest of the backend sits below this file, one seam each, sharing
 * struct sq_store and the sq_ functions of store_sqlite_parts.h:
 * store_sqlite_step.c decides a request in a transaction;
 * store_sqlite_run.c prepares, runs and reports the statements;
 * store_sqlite_rows.c reads and writes the states in bulk;
 * store_sqlite_db.c opens the connection (and heals it), runs and
 * reports its statements; store_sqlite_schema.c applies, migrates and
 * guards the schema (the file runs no code rlgate did not write);
 * store_sqlite_group.c is group commit; store_sqlite_wal.c keeps the WAL
 * bounded and reports the modes of the files.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "store.h"
#include "store_group.h"
#include "store_sqlite.h"
#include "store_sqlite_parts.h"
#include "util.h"

#define SQ_PRUNE_ROWS (10 * SQ_PRUNE_BATCH)

static int sq_open(const struct rlg_store_config *cfg, struct rlg_store **out);
static int sq_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static int sq_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted);
static void sq_close(struct rlg_store *base);
static const char *sq_describe(const struct rlg_store_config *sc, char *buf,
    size_t size);


const struct rlg_store_ops rlg_store_sqlite_ops = {
	.name = "sqlite",
	.open = sq_open,
	.step = sq_step,
	.prune = sq_prune,
	.close = sq_close,
	.stats = sq_stats,
	.idle = sq_idle,
	.reset = rlg_store_sqlite_reset,
	.probe = sq_probe,
	.survey = sq_survey,
	.overrides = sq_overrides,
	.scan = rlg_store_sqlite_scan,
	.begin = rlg_store_sqlite_begin,
	.put = rlg_store_sqlite_put,
	.commit = rlg_store_sqlite_commit,
	.rollback = rlg_store_sqlite_rollback,
	.cache = rlg_store_sqlite_cache,
	.ident = rlg_store_sqlite_ident,
};

const struct rlg_backend rlg_sqlite_backend = {
	.ops = &rlg_store_sqlite_ops,
	.caps = RLG_STORE_CAN_COMMIT,
	.describe = sq_describe,
	.check_files = sq_check_files,
	.behind = rlg_store_commit_behind,
};

static int
sq_open(const struct rlg_store_config *cfg, struct rlg_store **out)
{
	struct sq_store *s;

	assert(cfg != NULL && out != NULL);
	s = rlg_xcalloc(1, sizeof *s);
	s->base.ops = &rlg_store_sqlite_ops;
	s->path = rlg_xstrdup(cfg->sqlite.path != NULL ? cfg->sqlite.path : "");
	s->wal_path = rlg_xmalloc(strlen(s->path) + sizeof "-wal");
	memcpy(s->wal_path, s->path, strlen(s->path));
	memcpy(s->wal_path + strlen(s->path), "-wal", sizeof "-wal");
	s->busy_timeout_ms = cfg->sqlite.busy_timeout_ms > 0 ?
	    cfg->sqlite.busy_timeout_ms : 0;
	s->busy_limit_ms = s->busy_timeout_ms;
	s->max_clients = cfg->sqlite.max_clients > 0 ?
	    cfg->sqlite.max_clients : 0;
	s->sync_full = cfg->sqlite.synchronous == RLG_SYNC_FULL;
	if (cfg->group_commit == RLG_GROUP_ON ||
	    (cfg->group_commit == RLG_GROUP_AUTO && s->sync_full))
		rlg_group_join(&s->group, s, &sq_group_kind, s->path);
	s->nscratch = 4;
	s->scratch = rlg_xcalloc(s->nscratch, sizeof *s->scratch);
	s->prune_batch = SQ_PRUNE_BATCH;
	snprintf(s->base.errmsg, sizeof s->base.errmsg, "no error");
	*out = &s->base;
	return sq_connect(s) == 0 ? RLG_OK : RLG_ESTORE;
}

/* "sqlite PATH". */
static const char *
sq_describe(const struct rlg_store_config *sc, char *buf, size_t size)
{
	snprintf(buf, size, "sqlite %s", sc->sqlite.path != NULL ?
	    sc->sqlite.path : "(no path)");
	return buf;
}

static int
sq_step(struct rlg_store *base, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions)
{
	struct sq_store *s = (struct sq_store *)base;
	int rc;

	/* rlg_store_step has checked the items. */
	if (s->group.g != NULL)
		rc = rlg_group_step(&s->group, items, n, now_ms, decisions);
	else
		rc = sq_step_alone(s, items, n, now_ms, decisions);
	/* Nobody calls rlg_store_idle: the WAL is this step's to bound. */
	if (!s->idle_seen && s->wal_frames >= s->checkpoint_at)
		sq_checkpoint(s);
	return rc;
}

static int
sq_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted)
{
	struct sq_store *s = (struct sq_store *)base;
	sqlite3_stmt *st;
	int64_t total = 0, next, none;
	unsigned before, rows;
	int rc, changes, batch;

	if (deleted != NULL)
		*deleted = 0;
	if (sq_ready(s, now_ms) != 0)
		return RLG_ESTORE;
	/*
	 * Each batch is one DELETE in a short transaction of its own. The
	 * state rows of sliding_log clients take up to limit log rows
	 * each along (the trigger): the next batch is sized so that it
	 * deletes about SQ_PRUNE_ROWS rows in all, judging by this one, and
	 * the size is kept for the next prune. The transaction reads first
	 * (the client count of no policy), so that a schema changed since
	 * the last step is checked before the DELETE fires any trigger.
	 */
	do {
		batch = s->prune_batch;
		if ((rc = sq_run(s, "prune", s->stmt[SQ_BEGIN])) != SQLITE_OK ||
		    (rc = sq_clients(s, "", &none)) != SQLITE_OK)
			return sq_failed(s, rc);
		if (s->schema_moved && sq_recheck(s) != 0)
			return sq_failed(s, SQLITE_AUTH);
		st = s->stmt[SQ_PRUNE];
		before = (unsigned)sqlite3_total_changes(s->db);
		sqlite3_bind_int64(st, 1, now_ms);
		sqlite3_bind_int(st, 2, batch);
		if ((rc = sq_run(s, "prune", st)) != SQLITE_OK)
			return sq_failed(s, rc);
		changes = sqlite3_changes(s->db);
		if ((rc = sq_run(s, "prune", s->stmt[SQ_COMMIT])) != SQLITE_OK)
			return sq_failed(s, rc);
		/* Counted with the trigger's; modulo 2^32 (SQLite 3.35). */
		rows = (unsigned)sqlite3_total_changes(s->db) - before;
		if (changes > 0 && rows > 0) {
			next = (int64_t)changes * (int64_t)SQ_PRUNE_ROWS / rows;
			s->prune_batch = next < 1 ? 1 : next > SQ_PRUNE_BATCH ?
			    SQ_PRUNE_BATCH : (int)next;
		}
		total += changes;
		if (deleted != NULL)
			*deleted = total;
	} while (changes >= batch);
	sq_shrink(s);
	return RLG_OK;
}

static void
sq_close(struct rlg_store *base)
{
	struct sq_store *s = (struct sq_store *)base;

	if (s == NULL)
		return;
	sq_disconnect(s);
	rlg_group_leave(&s->group);
	free(s->scratch);
	free(s->log_ms);
	free(s->path);
	free(s->wal_path);
	free(s);
}
