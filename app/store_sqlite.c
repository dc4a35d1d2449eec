/*
 * store_sqlite.c: the SQLite store, one connection per handle: its
 * step, its prune, and its handle from open to close.
 *
 * A step is one BEGIN IMMEDIATE transaction: it reads the state of each
 * (policy, client) of the request, runs the pure limiter on it and writes
 * the new states back only when every policy admits the request. The write
 * lock taken by BEGIN IMMEDIATE makes read, decide and write one atomic step
 * for every process and thread that shares the file, so counting is exact;
 * a rejected request ends in ROLLBACK and writes nothing. The file is in WAL
 * mode: readers (the operator's sqlite3 shell) never block the gateway.
 * With synchronous = normal (the default) a commit costs no fsync; with
 * full it costs one, and group commit (store_sqlite_group.c) lets the
 * threads of a process share it. A step that finds the write lock taken
 * waits in sq_busy, in pauses of 50 us doubling to 2 ms, up to
 * busy_timeout_ms.
 *
 * A sliding_log policy keeps one rlg_log row per admitted unit (a request
 * of cost c adds c rows at its time, seq apart): the step reads the
 * client's in-window rows into a buffer of the handle, and when the
 * request is admitted adds its rows and deletes the client's rows that
 * left the window, so a client never has more rows than its limit. Its
 * state row (count, oldest, expires_ms = newest + window) is what pruning
 * goes by: a trigger of the schema deletes the log with the state row.
 *
 * max_clients: the schema's triggers keep, per policy, the number of its
 * rows in rlg_clients, in the same transaction. A step that adds a client
 * reads that count before it commits; past max_clients it first prunes one
 * batch of expired rows in the same transaction, and if the policy is
 * still over, rolls back and returns RLG_EFULL. Clients that have a row
 * are never refused for it, and nobody's state is evicted to make room.
 *
 * The rest of the backend sits beside this file, one seam each, sharing
 * struct sq_store and the sq_ functions of store_sqlite_priv.h:
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
#include "store_sqlite_priv.h"
#include "util.h"

/*
 * Rows deleted per prune transaction, about: keeps the write lock short.
 * A transaction deletes at most SQ_PRUNE_BATCH state rows; the trigger
 * deletes their log rows with them, so the store shrinks the next batch
 * when the last one took many log rows along (sq_prune).
 */
#define SQ_PRUNE_BATCH 1000
#define SQ_PRUNE_ROWS (10 * SQ_PRUNE_BATCH)

/* The sliding-log buffer starts with this many entries and doubles. */
#define SQ_LOG_INITIAL 64

/*
 * Stored expiries are rounded up to this (a whole second): pruning a row
 * up to a second late changes nothing, and the expiry of a token bucket
 * (its tat, which every admitted request moves on) then changes, and with
 * it the index, about once a second instead of on every request, so the
 * UPDATE without expires_ms serves the rest (about 1.5x the decisions per
 * second of a hot bucket). Windows are whole seconds: a fixed or sliding
 * window's expiry is one already.
 */
#define SQ_EXPIRES_GRAIN_MS 1000

static int sq_open(const struct rlg_store_config *cfg, struct rlg_store **out);
static int sq_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static int sq_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted);
static void sq_close(struct rlg_store *base);

static void sq_grow_scratch(struct sq_store *s, size_t n);
static int sq_decide(struct sq_store *s, const struct rlg_store_item *items,
    size_t i, int64_t now_ms, struct rlg_decision *d);
static int sq_decide_log(struct sq_store *s,
    const struct rlg_store_item *items, size_t i, int64_t now_ms,
    struct rlg_decision *d);
static int sq_refused(struct sq_store *s, const struct rlg_policy *policy);
static int sq_check_room(struct sq_store *s,
    const struct rlg_store_item *items, size_t n,
    const struct rlg_decision *decisions, int64_t now_ms);
static int sq_clients(struct sq_store *s, const char *policy,
    int64_t *clients);
static bool sq_same_key(const struct rlg_store_item *a,
    const struct rlg_store_item *b);
static int sq_load(struct sq_store *s, const struct rlg_store_item *item,
    struct sq_item *x);
static int sq_load_log(struct sq_store *s, const struct rlg_store_item *item,
    int64_t now_ms, size_t *n, int64_t *seq);
static void sq_log_reserve(struct sq_store *s, size_t n, size_t need);
static int sq_save(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x);
static int sq_save_log(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x, int64_t now_ms);
static int64_t sq_expires(int64_t expires_ms);

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
};

const char *const sq_sql[SQ_NSTMT] = {
	[SQ_BEGIN] = "BEGIN IMMEDIATE",
	[SQ_COMMIT] = "COMMIT",
	[SQ_ROLLBACK] = "ROLLBACK",
	[SQ_SELECT] =
	    "SELECT window_start_ms, count, expires_ms, prev_count, tat_us"
	    " FROM rlg_state WHERE policy = ?1 AND client = ?2",
	[SQ_UPSERT] =
	    "INSERT INTO rlg_state (policy, client, window_start_ms, count,"
	    " expires_ms, prev_count, tat_us)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
	    " ON CONFLICT (policy, client) DO UPDATE SET"
	    " window_start_ms = excluded.window_start_ms,"
	    " count = excluded.count,"
	    " expires_ms = excluded.expires_ms,"
	    " prev_count = excluded.prev_count,"
	    " tat_us = excluded.tat_us",
	/*
	 * Most admitted requests of a fixed or sliding window change only
	 * the count of a stored row. Leaving expires_ms out of the SET list
	 * spares the index: one page per commit instead of two, about 1.5x
	 * the decisions per second.
	 */
	[SQ_UPDATE] =
	    "UPDATE rlg_state SET window_start_ms = ?3, count = ?4,"
	    " prev_count = ?5, tat_us = ?6"
	    " WHERE policy = ?1 AND client = ?2",
	/*
	 * The write-behind's row when its expiry is the one stored (a fixed
	 * or sliding window between two windows): the UPSERT's numbering,
	 * expires_ms kept out of the SET list as above.
	 */
	[SQ_FLUSH_UPDATE] =
	    "UPDATE rlg_state SET window_start_ms = ?3, count = ?4,"
	    " prev_count = ?6, tat_us = ?7"
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
	    " prev_count, tat_us FROM rlg_state WHERE expires_ms > ?1",
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
	if (cfg->sqlite.group_commit == RLG_GROUP_ON ||
	    (cfg->sqlite.group_commit == RLG_GROUP_AUTO && s->sync_full)) {
		s->group = sq_group_join(s->path);
		pthread_cond_init(&s->cv, NULL);
	}
	s->nscratch = 4;
	s->scratch = rlg_xcalloc(s->nscratch, sizeof *s->scratch);
	s->prune_batch = SQ_PRUNE_BATCH;
	snprintf(s->base.errmsg, sizeof s->base.errmsg, "no error");
	*out = &s->base;
	return sq_connect(s) == 0 ? RLG_OK : RLG_ESTORE;
}

static int
sq_step(struct rlg_store *base, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions)
{
	struct sq_store *s = (struct sq_store *)base;
	int rc;

	/* rlg_store_step has checked the items. */
	if (s->group != NULL)
		rc = sq_group_step(s, items, n, now_ms, decisions);
	else
		rc = sq_step_alone(s, items, n, now_ms, decisions);
	/* Nobody calls rlg_store_idle: the WAL is this step's to bound. */
	if (!s->idle_seen && s->wal_frames >= s->checkpoint_at)
		sq_checkpoint(s);
	return rc;
}

/* One request in a transaction of its own. */
int
sq_step_alone(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	bool wrote;
	int rc, end;

	if (sq_ready(s, now_ms) != 0)
		return RLG_ESTORE;
	if ((rc = sq_run(s, "step", s->stmt[SQ_BEGIN])) != SQLITE_OK)
		return sq_failed(s, rc);
	rc = sq_apply(s, items, n, now_ms, decisions, false, &wrote);
	if (rc == RLG_EFULL || (rc == RLG_OK && !wrote)) {
		/* Rejected or full: no quota consumed, nothing written. */
		if ((end = sq_run(s, "step", s->stmt[SQ_ROLLBACK])) !=
		    SQLITE_OK)
			return sq_failed(s, end);
		return rc;
	}
	if (rc != RLG_OK)
		return rc;
	if ((rc = sq_run(s, "step", s->stmt[SQ_COMMIT])) != SQLITE_OK)
		return sq_failed(s, rc);
	return RLG_OK;
}

/*
 * The decisions and writes of one request inside an open transaction.
 * *wrote tells whether it was admitted (its states written). RLG_OK, or
 * RLG_EFULL with nothing of this request written (when nested, its writes
 * are undone to a savepoint; else the caller rolls back), the transaction
 * still open; else the transaction is rolled back and RLG_ESTORE or
 * RLG_EINVAL returned.
 */
int
sq_apply(struct sq_store *s, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions, bool nested, bool *wrote)
{
	bool admitted = true, fresh = false;
	size_t i;
	int rc;

	*wrote = false;
	sq_grow_scratch(s, n);
	for (i = 0; i < n; i++) {
		/* A charge for a new key, and the key is not new. */
		s->scratch[i].skip = items[i].if_new && s->scratch[i - 1].live;
		if (s->scratch[i].skip) {
			rlg_store_skipped(items[i].policy, &decisions[i]);
			continue;
		}
		if ((rc = sq_decide(s, items, i, now_ms, &decisions[i])) !=
		    RLG_OK)
			return rc;
		/* An advisory item (dry run) never rejects the request. */
		if (!decisions[i].admitted && !items[i].advisory)
			admitted = false;
	}
	/*
	 * The reads above were compiled again if the schema changed: check
	 * it now, under the write lock, before any statement that can fire
	 * a trigger runs (store_sqlite_schema.c's opening comment says why).
	 */
	if (s->schema_moved && sq_recheck(s) != 0)
		return sq_failed(s, SQLITE_AUTH);
	if (!admitted)
		return RLG_OK;
	/* Only a request that may add a client can find the store full. */
	for (i = 0; i < n && s->max_clients > 0 && !fresh; i++)
		fresh = decisions[i].admitted && !s->scratch[i].skip &&
		    (!s->scratch[i].stored ||
		    items[i].policy->lim.algorithm == RLG_ALG_SLIDING_LOG);
	if (fresh && nested &&
	    (rc = sq_run(s, "step", s->stmt[SQ_SAVEPOINT])) != SQLITE_OK)
		return sq_failed(s, rc);
	for (i = 0; i < n; i++) {
		/* An advisory rejection consumes nothing; a skip is none. */
		if (!decisions[i].admitted || s->scratch[i].skip)
			continue;
		if (items[i].policy->lim.algorithm == RLG_ALG_SLIDING_LOG)
			rc = sq_save_log(s, &items[i], &s->scratch[i], now_ms);
		else
			rc = sq_save(s, &items[i], &s->scratch[i]);
		if (rc != SQLITE_OK)
			return sq_failed(s, rc);
	}
	if (!fresh) {
		*wrote = true;
		return RLG_OK;
	}
	rc = sq_check_room(s, items, n, decisions, now_ms);
	if (rc == RLG_EFULL) {
		if (nested && ((rc = sq_run(s, "step",
		    s->stmt[SQ_ROLLBACK_TO])) != SQLITE_OK ||
		    (rc = sq_run(s, "step", s->stmt[SQ_RELEASE])) !=
		    SQLITE_OK))
			return sq_failed(s, rc);
		return RLG_EFULL;
	}
	if (rc != RLG_OK)
		return rc;
	if (nested && (rc = sq_run(s, "step", s->stmt[SQ_RELEASE])) !=
	    SQLITE_OK)
		return sq_failed(s, rc);
	*wrote = true;
	return RLG_OK;
}

/* Makes room for n items in the step scratch. */
static void
sq_grow_scratch(struct sq_store *s, size_t n)
{
	if (n > s->nscratch) {
		free(s->scratch);
		s->nscratch = n;
		s->scratch = rlg_xcalloc(n, sizeof *s->scratch);
	}
}

/*
 * Before the commit of an admitted step: every policy to which the step
 * may have added a client (a state row that was not there; a sliding_log
 * item, whose row is not read) must hold at most max_clients. Over it, one
 * batch of expired rows is pruned in this transaction and the count read
 * again. RLG_OK; RLG_EFULL with the transaction still open (the caller
 * undoes the step); or RLG_ESTORE with the transaction rolled back.
 */
static int
sq_check_room(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, const struct rlg_decision *decisions, int64_t now_ms)
{
	sqlite3_stmt *st = s->stmt[SQ_PRUNE];
	bool pruned = false;
	int64_t clients;
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		if (!decisions[i].admitted || s->scratch[i].skip ||
		    (s->scratch[i].stored &&
		    items[i].policy->lim.algorithm != RLG_ALG_SLIDING_LOG))
			continue;
		if ((rc = sq_clients(s, items[i].policy->name, &clients)) !=
		    SQLITE_OK)
			return sq_failed(s, rc);
		if (clients > s->max_clients && !pruned) {
			pruned = true;
			sqlite3_bind_int64(st, 1, now_ms);
			sqlite3_bind_int(st, 2, SQ_PRUNE_BATCH);
			if ((rc = sq_run(s, "prune", st)) != SQLITE_OK ||
			    (rc = sq_clients(s, items[i].policy->name,
			    &clients)) != SQLITE_OK)
				return sq_failed(s, rc);
		}
		if (clients > s->max_clients) {
			rlg_store_seterr(&s->base, "store full: policy \"%s\" holds state"
			    " for max_clients = %lld clients; new clients"
			    " are refused until states expire",
			    items[i].policy->name,
			    (long long)s->max_clients);
			return RLG_EFULL;
		}
	}
	return RLG_OK;
}

/* The number of clients policy holds state for (0 if it has none). */
static int
sq_clients(struct sq_store *s, const char *policy, int64_t *clients)
{
	sqlite3_stmt *st = s->stmt[SQ_CLIENTS];
	int rc;

	*clients = 0;
	sqlite3_bind_text(st, 1, policy, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*clients = sqlite3_column_int64(st, 0);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		rc = SQLITE_OK;
	else
		sq_sqlite_error(s, "step", rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

/*
 * Item i of a step, inside its transaction: reads what it needs, runs the
 * limiter, leaves what to write in s->scratch[i] and the decision in *d.
 * RLG_OK; else the transaction is closed and the step's result returned
 * (RLG_ESTORE, or RLG_EINVAL for a policy the limiter refuses).
 */
static int
sq_decide(struct sq_store *s, const struct rlg_store_item *items, size_t i,
    int64_t now_ms, struct rlg_decision *d)
{
	struct sq_item *x = &s->scratch[i];
	bool found = false;
	size_t j;
	int rc;

	if (items[i].policy->lim.algorithm == RLG_ALG_SLIDING_LOG)
		return sq_decide_log(s, items, i, now_ms, d);
	x->append = false;
	/*
	 * The same (policy, client) twice in one request counts twice: the
	 * second sees the first one's new state, and its row exists by the
	 * time the second is written.
	 */
	for (j = i; j-- > 0 && !found; ) {
		if (sq_same_key(&items[j], &items[i])) {
			x->in = s->scratch[j].out;
			x->stored = true;
			found = true;
		}
	}
	if (!found && (rc = sq_load(s, &items[i], x)) != SQLITE_OK)
		return sq_failed(s, rc);
	x->live = x->stored && x->in.expires_ms > now_ms;
	if (rlg_limiter_step(&items[i].policy->lim, &x->in, now_ms,
	    rlg_store_item_cost(&items[i]), &x->out, d) != RLG_OK)
		return sq_refused(s, items[i].policy);
	return RLG_OK;
}

/*
 * A sliding_log item: its log into s->log_ms, then the limiter. The state
 * row is not read: the log is the state, the row only its summary for
 * pruning and the views, written in full when admitted.
 *
 * The same (policy, client) earlier in the step has not written its rows
 * yet; each one that was admitted adds its cost in entries at now
 * (clamped) to what the database holds, so the log stays what it would be had the two
 * requests come one after the other. Entries that left the window are
 * never read, so the earlier items' trimming changes nothing here.
 */
static int
sq_decide_log(struct sq_store *s, const struct rlg_store_item *items,
    size_t i, int64_t now_ms, struct rlg_decision *d)
{
	const struct rlg_policy *p = items[i].policy;
	struct sq_item *x = &s->scratch[i];
	int64_t now = rlg_limiter_clamp_time(now_ms), seq;
	size_t n, k = 0, j, at, drop;
	int rc;

	/* The limiter checks it too; here it bounds the buffer. */
	if (p->lim.limit < 1 || p->lim.limit > RLG_SLIDING_LOG_LIMIT_MAX)
		return sq_refused(s, p);
	for (j = 0; j < i; j++) {
		if (sq_same_key(&items[j], &items[i]) && s->scratch[j].append)
			k += (size_t)rlg_store_item_cost(&items[j]);
	}
	if ((rc = sq_load_log(s, &items[i], now, &n, &seq)) != SQLITE_OK)
		return sq_failed(s, rc);
	if (k > 0) {
		/* k entries at now, after those <= now; the newest limit. */
		sq_log_reserve(s, n, n + k);
		for (at = n; at > 0 && s->log_ms[at - 1] > now; at--)
			;
		memmove(s->log_ms + at + k, s->log_ms + at,
		    (n - at) * sizeof *s->log_ms);
		for (j = 0; j < k; j++)
			s->log_ms[at + j] = now;
		n += k;
		if (n > (size_t)p->lim.limit) {
			drop = n - (size_t)p->lim.limit;
			memmove(s->log_ms, s->log_ms + drop,
			    (n - drop) * sizeof *s->log_ms);
			n -= drop;
		}
	}
	x->seq = seq + (int64_t)k;
	x->stored = false;
	x->live = n > 0;
	if (rlg_limiter_sliding_log(&p->lim, s->log_ms, n, now_ms,
	    rlg_store_item_cost(&items[i]), &x->append, &x->out, d) != RLG_OK)
		return sq_refused(s, p);
	return RLG_OK;
}

/* The limiter refused a policy: RLG_EINVAL, transaction closed. */
static int
sq_refused(struct sq_store *s, const struct rlg_policy *policy)
{
	rlg_store_seterr(&s->base, "store step: the limiter refused policy \"%s\" (%s,"
	    " limit %lld, window %lld ms, burst %lld)", policy->name,
	    rlg_algorithm_name(policy->lim.algorithm) != NULL ?
	    rlg_algorithm_name(policy->lim.algorithm) : "unknown algorithm",
	    (long long)policy->lim.limit, (long long)policy->lim.window_ms,
	    (long long)policy->lim.burst);
	sq_rollback(s);
	return RLG_EINVAL;
}

/* The same (policy, client): the same state row and log. */
static bool
sq_same_key(const struct rlg_store_item *a, const struct rlg_store_item *b)
{
	return strcmp(a->policy->name, b->policy->name) == 0 &&
	    strcmp(a->client, b->client) == 0;
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
	if (s->group != NULL) {
		sq_group_leave(s->group);
		pthread_cond_destroy(&s->cv);
	}
	free(s->scratch);
	free(s->log_ms);
	free(s->path);
	free(s->wal_path);
	free(s);
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

/*
 * Reads one state into x->in; a missing row is the all-zero state of a
 * new client.
 */
static int
sq_load(struct sq_store *s, const struct rlg_store_item *item,
    struct sq_item *x)
{
	sqlite3_stmt *st = s->stmt[SQ_SELECT];
	int rc;

	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		x->in.window_start_ms = sqlite3_column_int64(st, 0);
		x->in.count = sqlite3_column_int64(st, 1);
		x->in.expires_ms = sqlite3_column_int64(st, 2);
		x->in.prev_count = sqlite3_column_int64(st, 3);
		x->in.tat_us = sqlite3_column_int64(st, 4);
		x->stored = true;
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		memset(&x->in, 0, sizeof x->in);
		x->stored = false;
		rc = SQLITE_OK;
	} else {
		sq_sqlite_error(s, "step", rc);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

/*
 * Reads the newest in-window log entries of item's client (ts_ms > now_ms
 * - window, at most limit of them) into s->log_ms[0..*n), ascending. *seq
 * gets the seq the row of an admitted request at now_ms takes: one more
 * than the largest seq at now_ms, 0 if none. (When fewer than limit
 * entries are in the window, all of them are read, those of now_ms too;
 * with limit of them the request is rejected and adds no row.)
 */
static int
sq_load_log(struct sq_store *s, const struct rlg_store_item *item,
    int64_t now_ms, size_t *n, int64_t *seq)
{
	sqlite3_stmt *st = s->stmt[SQ_LOG_SELECT];
	int64_t ts, t, *lo, *hi;
	size_t got = 0;
	int rc;

	*seq = 0;
	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now_ms - item->policy->lim.window_ms);
	sqlite3_bind_int64(st, 4, item->policy->lim.limit);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ts = sqlite3_column_int64(st, 0);
		if (ts == now_ms && sqlite3_column_int64(st, 1) >= *seq)
			*seq = sqlite3_column_int64(st, 1) + 1;
		sq_log_reserve(s, got, got + 1);
		s->log_ms[got++] = ts;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	else
		sq_sqlite_error(s, "step", rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	/* Newest first from the index: turn it around. */
	if (got > 1) {
		for (lo = s->log_ms, hi = s->log_ms + got - 1; lo < hi;
		    lo++, hi--) {
			t = *lo;
			*lo = *hi;
			*hi = t;
		}
	}
	*n = got;
	return rc;
}

/*
 * Makes s->log_ms hold at least need entries, keeping the first n:
 * doubles from SQ_LOG_INITIAL, so a step allocates only while the largest
 * log it has read grows.
 */
static void
sq_log_reserve(struct sq_store *s, size_t n, size_t need)
{
	size_t cap;
	int64_t *p;

	if (need <= s->log_cap)
		return;
	cap = s->log_cap > 0 ? s->log_cap : SQ_LOG_INITIAL;
	while (cap < need)
		cap *= 2;
	p = rlg_xmalloc(cap * sizeof *p);
	if (n > 0)
		memcpy(p, s->log_ms, n * sizeof *p);
	free(s->log_ms);
	s->log_ms = p;
	s->log_cap = cap;
}

/*
 * Writes x->out: an UPDATE that leaves the expiry index alone when the row
 * exists and keeps its (rounded) expiry, else the UPSERT (new row, new
 * window, a token bucket's tat in a new second).
 */
static int
sq_save(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x)
{
	sqlite3_stmt *st;
	int64_t expires = sq_expires(x->out.expires_ms);
	int rc;

	if (x->stored && expires == x->in.expires_ms) {
		st = s->stmt[SQ_UPDATE];
		sqlite3_bind_text(st, 1, item->policy->name, -1,
		    SQLITE_STATIC);
		sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, x->out.window_start_ms);
		sqlite3_bind_int64(st, 4, x->out.count);
		sqlite3_bind_int64(st, 5, x->out.prev_count);
		sqlite3_bind_int64(st, 6, x->out.tat_us);
		rc = sq_run(s, "step", st);
		/*
		 * The write lock is ours, so the row cannot have gone; if
		 * it has all the same (nothing changed), insert it.
		 */
		if (rc != SQLITE_OK || sqlite3_changes(s->db) == 1)
			return rc;
	}
	st = s->stmt[SQ_UPSERT];
	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, x->out.window_start_ms);
	sqlite3_bind_int64(st, 4, x->out.count);
	sqlite3_bind_int64(st, 5, expires);
	sqlite3_bind_int64(st, 6, x->out.prev_count);
	sqlite3_bind_int64(st, 7, x->out.tat_us);
	return sq_run(s, "step", st);
}

/*
 * An admitted sliding_log item: its log rows at now (clamped as the
 * limiter clamps it), one per unit of its cost (seq, seq + 1, ...), the
 * client's rows that left the window deleted, the state row written in
 * full (its expiry moves with every new newest entry).
 */
static int
sq_save_log(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x, int64_t now_ms)
{
	sqlite3_stmt *st;
	int64_t now = rlg_limiter_clamp_time(now_ms), u;
	int rc;

	if (!x->append)
		return SQLITE_OK;
	st = s->stmt[SQ_LOG_INSERT];
	for (u = 0; u < rlg_store_item_cost(item); u++) {
		sqlite3_bind_text(st, 1, item->policy->name, -1,
		    SQLITE_STATIC);
		sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, now);
		sqlite3_bind_int64(st, 4, x->seq + u);
		if ((rc = sq_run(s, "step", st)) != SQLITE_OK)
			return rc;
	}
	st = s->stmt[SQ_LOG_TRIM];
	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now - item->policy->lim.window_ms);
	if ((rc = sq_run(s, "step", st)) != SQLITE_OK)
		return rc;
	return sq_save(s, item, x);
}

/* The expiry to store: rounded up to SQ_EXPIRES_GRAIN_MS. */
static int64_t
sq_expires(int64_t expires_ms)
{
	int64_t r;

	if (expires_ms <= 0 || expires_ms > INT64_MAX - SQ_EXPIRES_GRAIN_MS)
		return expires_ms;
	r = expires_ms % SQ_EXPIRES_GRAIN_MS;
	return r == 0 ? expires_ms : expires_ms + SQ_EXPIRES_GRAIN_MS - r;
}
