/*
 * store_group.c: group commit's protocol between threads (store_group.h),
 * shared by the SQLite store (one transaction, one commit per batch) and
 * the Redis store (one script call per batch).
 *
 * A step queues itself. The first thread to find no leader takes the
 * queue from its oldest, up to max_items items, and runs it through the
 * backend's lead function on its own handle, without the lock; requests
 * that arrive meanwhile make the next batch. Then, under the lock, it
 * hands every waiter of the batch its result (a waiter woken early never
 * reads a result half done) and wakes the oldest still queued to lead
 * next. A leader whose own request was not in its batch (the bound was
 * reached before it) goes round again. A thread alone leads at once: a
 * batch never waits for company.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store_group.h"
#include "util.h"

/* A waiter's rc while its result is not handed over. */
#define RLG_GROUP_PENDING (-1000)

struct rlg_group_queue {
	const struct rlg_group_kind *kind; /* the key: the backend's kind */
	char *key;                         /* and its store */
	int refs;                          /* handles sharing it */
	pthread_mutex_t mu;                /* guards all below */
	struct rlg_group_waiter *head;     /* the queue, oldest first */
	struct rlg_group_waiter **tailp;
	bool leading;                      /* a batch is running */
	uint64_t batches;                  /* batches a leader ran */
	uint64_t steps;                    /* requests they carried */
	struct rlg_group_queue *next;            /* rlg_groups list */
};

static pthread_mutex_t rlg_groups_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rlg_group_queue *rlg_groups;

static struct rlg_group_waiter *rlg_group_take(struct rlg_group_queue *g,
    size_t max_items);

int
rlg_group_step(struct rlg_group_member *m,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions)
{
	const struct rlg_group_kind *kind = m->kind;
	struct rlg_group_queue *g = m->g;
	struct rlg_group_waiter w, *x, *next, *batch;

	w = (struct rlg_group_waiter){ .handle = m->handle, .cv = &m->cv,
	    .items = items, .n = n, .now_ms = now_ms,
	    .decisions = decisions, .rc = RLG_GROUP_PENDING };
	pthread_mutex_lock(&g->mu);
	*g->tailp = &w;
	g->tailp = &w.next;
	for (;;) {
		while (w.rc == RLG_GROUP_PENDING && g->leading)
			pthread_cond_wait(w.cv, &g->mu);
		if (w.rc != RLG_GROUP_PENDING)
			break;
		batch = rlg_group_take(g, kind->max_items);
		g->leading = true;
		pthread_mutex_unlock(&g->mu);
		kind->lead(w.handle, batch);
		pthread_mutex_lock(&g->mu);
		g->leading = false;
		g->batches++;
		for (x = batch; x != NULL; x = next) {
			next = x->next;   /* x may return once signalled */
			x->rc = x->res;
			g->steps++;
			if (x != &w)
				pthread_cond_signal(x->cv);
		}
		/* The oldest of those still queued leads next (w itself:
		 * the loop goes round). */
		if (g->head != NULL && g->head != &w)
			pthread_cond_signal(g->head->cv);
	}
	pthread_mutex_unlock(&g->mu);
	if (w.rc == RLG_GROUP_ALONE)
		return kind->alone(w.handle, items, n, now_ms, decisions);
	return w.rc;
}

/* The batch: the queue's oldest waiters, up to max_items items (at least
 * one waiter), taken off it. Under the lock. */
static struct rlg_group_waiter *
rlg_group_take(struct rlg_group_queue *g, size_t max_items)
{
	struct rlg_group_waiter *batch = g->head, *last = g->head;
	size_t items = last->n;

	while (last->next != NULL && items + last->next->n <= max_items) {
		last = last->next;
		items += last->n;
	}
	g->head = last->next;
	if (g->head == NULL)
		g->tailp = &g->head;
	last->next = NULL;
	return batch;
}

void
rlg_group_join(struct rlg_group_member *m, void *handle,
    const struct rlg_group_kind *kind, const char *key)
{
	struct rlg_group_queue *g;

	pthread_mutex_lock(&rlg_groups_mu);
	for (g = rlg_groups; g != NULL; g = g->next)
		if (g->kind == kind && strcmp(g->key, key) == 0)
			break;
	if (g == NULL) {
		g = rlg_xcalloc(1, sizeof *g);
		g->kind = kind;
		g->key = rlg_xstrdup(key);
		pthread_mutex_init(&g->mu, NULL);
		g->tailp = &g->head;
		g->next = rlg_groups;
		rlg_groups = g;
	}
	g->refs++;
	pthread_mutex_unlock(&rlg_groups_mu);
	m->g = g;
	m->kind = kind;
	m->handle = handle;
	pthread_cond_init(&m->cv, NULL);
}

void
rlg_group_leave(struct rlg_group_member *m)
{
	struct rlg_group_queue *g = m->g, **pp;

	if (g == NULL)
		return;
	pthread_mutex_lock(&rlg_groups_mu);
	if (--g->refs == 0) {
		for (pp = &rlg_groups; *pp != g; pp = &(*pp)->next)
			;
		*pp = g->next;
		pthread_mutex_destroy(&g->mu);
		free(g->key);
		free(g);
	}
	pthread_mutex_unlock(&rlg_groups_mu);
	pthread_cond_destroy(&m->cv);
	m->g = NULL;
}

void
rlg_group_stats(const struct rlg_group_member *m, struct rlg_store_stats *out)
{
	struct rlg_group_queue *g = m->g;

	if (g == NULL)
		return;
	pthread_mutex_lock(&g->mu);
	out->group = true;
	out->group_batches = g->batches;
	out->group_steps = g->steps;
	pthread_mutex_unlock(&g->mu);
}
