/*
 * store_sqlite_step.c: the SQLite store's step: one request decided and
 * written in a transaction, alone or in a group's (store_sqlite_group.c).
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
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "limiter.h"
#include "store.h"
#include "store_sqlite_parts.h"
#include "util.h"

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
static bool sq_refusal_writes(const struct sq_store *s,
    const struct rlg_store_item *items, size_t i,
    const struct rlg_decision *decisions);
static bool sq_refusals(const struct sq_store *s,
    const struct rlg_store_item *items, size_t n,
    const struct rlg_decision *decisions);
static int sq_save_refusals(struct sq_store *s,
    const struct rlg_store_item *items, size_t n,
    const struct rlg_decision *decisions);

/* One request in a transaction of its own. */
int
sq_step_alone(void *handle, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	struct sq_store *s = handle;
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
 * *wrote tells whether it wrote: admitted (its states written), or
 * refused with refusals that a ban counts (those states written). RLG_OK, or
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
	if (!admitted) {
		/* A refused request writes only the refusals a ban counts. */
		if ((rc = sq_save_refusals(s, items, n, decisions)) != SQLITE_OK)
			return sq_failed(s, rc);
		*wrote = sq_refusals(s, items, n, decisions);
		return RLG_OK;
	}
	/* Only a request that may add a client can find the store full. */
	for (i = 0; i < n && s->max_clients > 0 && !fresh; i++)
		fresh = decisions[i].admitted && !s->scratch[i].skip &&
		    (!s->scratch[i].stored ||
		    items[i].policy->lim.algorithm == RLG_ALG_SLIDING_LOG);
	if (fresh && nested &&
	    (rc = sq_run(s, "step", s->stmt[SQ_SAVEPOINT])) != SQLITE_OK)
		return sq_failed(s, rc);
	if ((rc = sq_save_refusals(s, items, n, decisions)) != SQLITE_OK)
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

/*
 * Whether item i's refusal must be written: a policy with a ban counted
 * it, or started a ban with it (rlg_limiter_refusal_writes).
 */
static bool
sq_refusal_writes(const struct sq_store *s, const struct rlg_store_item *items,
    size_t i, const struct rlg_decision *decisions)
{
	return !decisions[i].admitted && !s->scratch[i].skip &&
	    rlg_limiter_refusal_writes(&items[i].policy->lim,
	    &s->scratch[i].in, &s->scratch[i].out);
}

/* Whether any item's refusal is written. */
static bool
sq_refusals(const struct sq_store *s, const struct rlg_store_item *items,
    size_t n, const struct rlg_decision *decisions)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (sq_refusal_writes(s, items, i, decisions))
			return true;
	return false;
}

/*
 * The refusals a ban counts, written: each such item's state row (a
 * sliding_log's row only, never its log). SQLITE_OK or the error.
 */
static int
sq_save_refusals(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, const struct rlg_decision *decisions)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		if (!sq_refusal_writes(s, items, i, decisions))
			continue;
		if ((rc = sq_save(s, &items[i], &s->scratch[i])) != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
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
int
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
	/* Its ban lives in the state row: read it only for a ban. */
	memset(&x->in, 0, sizeof x->in);
	x->stored = false;
	for (j = i; p->lim.ban_ms > 0 && j-- > 0 && !x->stored; ) {
		if (sq_same_key(&items[j], &items[i])) {
			x->in = s->scratch[j].out;
			x->stored = true;
		}
	}
	if (p->lim.ban_ms > 0 && !x->stored &&
	    (rc = sq_load(s, &items[i], x)) != SQLITE_OK)
		return sq_failed(s, rc);
	x->out = x->in;
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
		x->in.refused = sqlite3_column_int64(st, 5);
		x->in.refused_start_ms = sqlite3_column_int64(st, 6);
		x->in.ban_until_ms = sqlite3_column_int64(st, 7);
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
		sqlite3_bind_int64(st, 7, x->out.refused);
		sqlite3_bind_int64(st, 8, x->out.refused_start_ms);
		sqlite3_bind_int64(st, 9, x->out.ban_until_ms);
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
	sqlite3_bind_int64(st, 8, x->out.refused);
	sqlite3_bind_int64(st, 9, x->out.refused_start_ms);
	sqlite3_bind_int64(st, 10, x->out.ban_until_ms);
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
