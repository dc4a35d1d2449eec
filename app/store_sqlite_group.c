/*
 * store_sqlite_group.c: group commit for the SQLite store: the steps of
 * the threads of one process share one transaction, and so one commit
 * (one fsync with synchronous = full). Apart from the step
 * (store_sqlite.c) because it is a protocol between threads, with a lock
 * and a queue of its own, around an unchanged step.
 *
 * Group commit. The handles of one process that open the same path with
 * group commit on share one sq_group. A step queues itself there; the
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
#include "store_sqlite_parts.h"
#include "store_stats.h"
#include "util.h"

/* A waiter's result while it is not known yet, and "run it alone". */
#define SQ_PENDING (-1000)
#define SQ_ALONE   (-1001)

struct sq_waiter {
	struct sq_store *s;               /* the waiting thread's handle */
	const struct rlg_store_item *items;
	size_t n;
	int64_t now_ms;
	struct rlg_decision *decisions;
	int rc;                           /* SQ_PENDING until done */
	int res;                          /* the leader's result, then rc */
	struct sq_waiter *next;
};

struct sq_group {
	char *path;                       /* the key: the database path */
	int refs;                         /* handles sharing it */
	pthread_mutex_t mu;               /* guards all below */
	struct sq_waiter *head;           /* the queue, oldest first */
	struct sq_waiter **tailp;
	bool leading;                     /* a batch is running */
	uint64_t batches;                 /* transactions a leader committed */
	uint64_t steps;                   /* requests they carried */
	struct sq_group *next;            /* sq_groups list */
};

static pthread_mutex_t sq_groups_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sq_group *sq_groups;

static void sq_lead(struct sq_store *s, struct sq_waiter *batch);

/*
 * A step through the group: queue, then either lead a batch (the whole
 * queue) or wait until a leader has done this request. A request the
 * batch could not finish runs again alone.
 */
int
sq_group_step(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	struct sq_group *g = s->group;
	struct sq_waiter w, *x, *next, *batch;

	w.s = s;
	w.items = items;
	w.n = n;
	w.now_ms = now_ms;
	w.decisions = decisions;
	w.rc = SQ_PENDING;
	w.next = NULL;
	pthread_mutex_lock(&g->mu);
	*g->tailp = &w;
	g->tailp = &w.next;
	while (w.rc == SQ_PENDING && g->leading)
		pthread_cond_wait(&s->cv, &g->mu);
	if (w.rc == SQ_PENDING) {
		batch = g->head;
		g->head = NULL;
		g->tailp = &g->head;
		g->leading = true;
		pthread_mutex_unlock(&g->mu);
		sq_lead(s, batch);
		pthread_mutex_lock(&g->mu);
		g->leading = false;
		g->batches++;
		for (x = batch; x != NULL; x = next) {
			next = x->next;   /* x may return once signalled */
			x->rc = x->res;
			g->steps++;
			if (x != &w)
				pthread_cond_signal(&x->s->cv);
		}
		/* The oldest of those who came meanwhile leads next. */
		if (g->head != NULL)
			pthread_cond_signal(&g->head->s->cv);
	}
	pthread_mutex_unlock(&g->mu);
	if (w.rc == SQ_ALONE)
		return sq_step_alone(s, items, n, now_ms, decisions);
	return w.rc;
}

/*
 * Runs a batch in one transaction on the leader's connection and sets
 * every waiter's res, outside the group's mutex: the leader hands it over
 * as rc under the mutex, so a waiter woken early never reads it half
 * done. Each request is applied as if alone; one that finds its policy
 * full is undone to its savepoint and gets RLG_EFULL. Any other failure
 * rolls the batch back and sends everyone to run alone.
 */
static void
sq_lead(struct sq_store *s, struct sq_waiter *batch)
{
	struct sq_waiter *x;
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
		if (rc == RLG_EFULL && x->s != s)
			memcpy(x->s->base.errmsg, s->base.errmsg, sizeof s->base.errmsg);
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
		x->res = SQ_ALONE;
}

/* The group of this process for path, made on first use. */
struct sq_group *
sq_group_join(const char *path)
{
	struct sq_group *g;

	pthread_mutex_lock(&sq_groups_mu);
	for (g = sq_groups; g != NULL; g = g->next)
		if (strcmp(g->path, path) == 0)
			break;
	if (g == NULL) {
		g = rlg_xcalloc(1, sizeof *g);
		g->path = rlg_xstrdup(path);
		pthread_mutex_init(&g->mu, NULL);
		g->tailp = &g->head;
		g->next = sq_groups;
		sq_groups = g;
	}
	g->refs++;
	pthread_mutex_unlock(&sq_groups_mu);
	return g;
}

void
sq_group_leave(struct sq_group *g)
{
	struct sq_group **pp;

	pthread_mutex_lock(&sq_groups_mu);
	if (--g->refs == 0) {
		for (pp = &sq_groups; *pp != g; pp = &(*pp)->next)
			;
		*pp = g->next;
		pthread_mutex_destroy(&g->mu);
		free(g->path);
		free(g);
	}
	pthread_mutex_unlock(&sq_groups_mu);
}

/* The group commit's counters, for tests and benchmarks. */
void
sq_stats(const struct rlg_store *base, struct rlg_store_stats *out)
{
	const struct sq_store *s = (const struct sq_store *)base;

	if (s->group == NULL)
		return;
	pthread_mutex_lock(&s->group->mu);
	out->group = true;
	out->group_batches = s->group->batches;
	out->group_steps = s->group->steps;
	pthread_mutex_unlock(&s->group->mu);
}
