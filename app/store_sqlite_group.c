/*
 * store_sqlite_group.c: group commit for the SQLite store: the steps of
 * the threads of one process share one transaction, and so one commit
 * (one fsync with synchronous = full). Apart from the step
 * (store_sqlite.c) because it is a batch of steps, around an unchanged
 * step; the protocol between the threads is store_group.c's.
 *
 * Group commit. The handles of one process that open the same path with
 * group commit on share one group. A step queues itself there; the
 * first thread to find no leader takes the whole queue and runs it on its
 * own connection in one transaction, each request in queue order exactly
 * as if it came alone (it sees the writes of those before it), then
 * commits once and wakes them. Requests that arrive meanwhile make the
 * next batch. Any failure inside a batch rolls it back whole and every
 * request of it runs again alone, so errors stay per request and nothing
 * is half written.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store.h"
#include "store_group.h"
#include "store_sqlite_parts.h"
#include "store_stats.h"
#include "util.h"

static void sq_lead(void *handle, struct rlg_group_waiter *batch);

/*
 * The SQLite store's group commit (store_group.c): a batch is the whole
 * queue, in one transaction; a request the batch could not finish runs
 * again alone.
 */
const struct rlg_group_kind sq_group_kind = { sq_lead, sq_step_alone,
    SIZE_MAX };

/*
 * Runs a batch in one transaction on the leader's connection and sets
 * every waiter's res, outside the group's mutex: the leader hands it over
 * as rc under the mutex, so a waiter woken early never reads it half
 * done. Each request is applied as if alone; one that finds its policy
 * full is undone to its savepoint and gets RLG_EFULL. Any other failure
 * rolls the batch back and sends everyone to run alone.
 */
static void
sq_lead(void *handle, struct rlg_group_waiter *batch)
{
	struct sq_store *s = handle, *xs;
	struct rlg_group_waiter *x;
	bool wrote;
	int rc;

	if (sq_ready(s, batch->now_ms) != 0 ||
	    sq_run(s, "step", s->stmt[SQ_BEGIN]) != SQLITE_OK)
		goto alone;
	for (x = batch; x != NULL; x = x->next) {
		rc = sq_apply(s, x->items, x->n, x->now_ms, x->decisions,
		    true, &wrote);
		if (rc != RLG_OK && rc != RLG_EFULL)
			goto alone;     /* the transaction is rolled back */
		xs = x->handle;
		if (rc == RLG_EFULL && xs != s)
			memcpy(xs->base.errmsg, s->base.errmsg, sizeof s->base.errmsg);
		x->res = rc;
	}
	if ((rc = sq_run(s, "step", s->stmt[SQ_COMMIT])) != SQLITE_OK) {
		(void)sq_failed(s, rc);
		goto alone;
	}
	return;

alone:
	if (s->db != NULL && !sqlite3_get_autocommit(s->db))
		(void)sq_failed(s, SQLITE_ERROR);
	for (x = batch; x != NULL; x = x->next)
		x->res = RLG_GROUP_ALONE;
}

/* The group commit's counters, for tests and benchmarks. */
void
sq_stats(const struct rlg_store *base, struct rlg_store_stats *out)
{
	const struct sq_store *s = (const struct sq_store *)base;

	rlg_group_stats(&s->group, out);
}
