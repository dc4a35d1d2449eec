/*
 * store_group.h: group commit between the threads of one process, for a
 * backend whose round trip (a SQLite commit, a Redis script call) costs
 * more than the work it carries. The handles that share a group queue
 * their steps; one thread leads a batch (the queue, up to a bound) on its
 * own handle while the others wait, and hands each its result. The
 * protocol lives here; what a batch is, the backend's lead function says
 * (store_sqlite_group.c, store_redis_batch.c).
 */
#ifndef RLG_STORE_GROUP_H
#define RLG_STORE_GROUP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "store_stats.h"

/* A waiter's res that sends the request to run alone, outside any batch. */
#define RLG_GROUP_ALONE (-1001)

/* One queued step: the thread's handle, its request, its result. */
struct rlg_group_waiter {
	void *handle;                      /* the waiting thread's handle */
	pthread_cond_t *cv;                /* where it waits (one per handle) */
	const struct rlg_store_item *items;
	size_t n;
	int64_t now_ms;
	struct rlg_decision *decisions;
	int rc;                            /* pending until handed over */
	int res;                           /* the lead function's result */
	struct rlg_group_waiter *next;
};

struct rlg_group_queue;

/*
 * Runs a batch (a list by next, oldest first, never empty) on handle, the
 * leader's, and sets every waiter's res: an RLG_ code, or RLG_GROUP_ALONE.
 * Called without the group's lock; the waiters sleep meanwhile.
 */
typedef void rlg_group_lead_fn(void *handle, struct rlg_group_waiter *batch);

/* Runs one request on handle outside any batch: an RLG_ code. */
typedef int rlg_group_alone_fn(void *handle,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions);

/* A backend's group commit: what a batch is, how a request runs alone,
 * and a batch's bound in items (SIZE_MAX: none). Its address tells the
 * backends' groups apart. */
struct rlg_group_kind {
	rlg_group_lead_fn *lead;
	rlg_group_alone_fn *alone;
	size_t max_items;
};

/* A handle's place in its process's group: the group (NULL: none), its
 * backend's kind, where the handle's thread waits, the handle. */
struct rlg_group_member {
	struct rlg_group_queue *g;
	const struct rlg_group_kind *kind;
	pthread_cond_t cv;
	void *handle;
};

/* handle joins the group of this process for (kind, key), made on first
 * use; key names the store (its path or server). */
void rlg_group_join(struct rlg_group_member *m, void *handle,
    const struct rlg_group_kind *kind, const char *key);

/* The handle leaves, if it joined; the last one frees the group. */
void rlg_group_leave(struct rlg_group_member *m);

/*
 * A step through the group: queued, then either led in a batch of at most
 * the kind's max_items items (a request of more still goes, alone in its
 * batch) or handed its result by another thread's. Returns the result, an
 * RLG_ code: a request that a batch could not finish has run again alone
 * (the kind's alone function, on the member's handle).
 */
int rlg_group_step(struct rlg_group_member *m,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions);

/* The group's counters into out (group, group_batches, group_steps), if
 * the handle joined one. */
void rlg_group_stats(const struct rlg_group_member *m,
    struct rlg_store_stats *out);

#endif
