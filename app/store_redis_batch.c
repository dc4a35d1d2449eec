/*
 * store_redis_batch.c: the Redis store's step, one request in a call of
 * its own (rd_step_alone), or with group commit ([store] group_commit, on
 * by default):
 * the steps that the threads of one process make at the same time go to
 * Redis as one script call. Below the handle's calls (store_redis.c),
 * which hand it the step; the protocol between the threads is
 * store_group.c's.
 *
 * Why: one call costs Redis a read, a write and a script's setup, more
 * than the few commands of a decision (docs/benchmarks.md), and Redis
 * runs scripts on one thread: one call for k decisions divides that part
 * by k, for every gateway sharing the server.
 *
 * The batch. The handles of one process on the same server share a
 * group. A thread that finds no batch under way leads at once (alone, it
 * is an ordinary step: a batch never waits for company); those that come
 * while it waits for Redis queue, and the next leader takes them all, up
 * to RD_BATCH_ITEMS items, in one EVALSHA on its own connection: each
 * request's keys and arguments one after the other (rd_build_batch), run
 * by the script in queue order, each all or nothing on its own as if it
 * came alone (db/redis/step.lua), at one now_ms (the latest of the
 * batch's, with clock = local). The reply is checked whole as a step's;
 * each request's decisions are its own items of it.
 *
 * A Redis Cluster: a script's keys must share a slot, so there the batch
 * is one pipeline per master (rd_batch_cluster, below), not one call.
 *
 * Failures stay per request where they can. An error reply (the script
 * refused the call, which then wrote nothing; or the server refused it:
 * READONLY, OOM, BUSY) sends every request to run again alone on its own
 * handle, so each meets its own answer. A failure of the exchange (the
 * connection, the deadline) or a reply that is not the script's fails
 * every request of the batch as the step of one would have failed
 * (on_error), with the leader's message in each one's handle: whether a
 * script that timed out ran is not known, so none runs again.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "store.h"
#include "store_group.h"
#include "store_redis_parts.h"
#include "util.h"

/* Items in one batch, at most (a request of more goes alone): its reply
 * is 1 + 6 x this many integers, far below RD_ARRAY_MAX. */
#define RD_BATCH_ITEMS 512

static void rd_lead(void *handle, struct rlg_group_waiter *batch);
static int rd_batch_run(struct rd_store *s, struct rlg_group_waiter *batch,
    size_t nreq);
static void rd_batch_cluster(struct rd_store *s,
    struct rlg_group_waiter *batch, size_t nreq);
static size_t rd_batch_node(struct rd_store *s,
    const struct rlg_group_waiter *x);
static void rd_batch_pipeline(struct rd_store *s,
    struct rlg_group_waiter *batch, size_t ni, int64_t now_ms);
static int rd_batch_reply(struct rd_store *s, size_t ni,
    struct rlg_group_waiter *x, redisReply *reply);
static int64_t rd_batch_now(const struct rlg_group_waiter *batch);
static void rd_batch_result(struct rd_store *s,
    struct rlg_group_waiter *batch, int res);

/* One request in a script call of its own (a cluster: its slot groups),
 * its items checked: RLG_OK, or RLG_ESTORE (errmsg). */
int
rd_step_alone(void *handle, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	struct rd_store *s = handle;
	redisReply *reply;
	int rc;

	rd_budget(s);
	if (s->cluster)
		return rd_cluster_step(s, items, n, now_ms, decisions);
	if (rd_ready0(s) != 0)
		return RLG_ESTORE;
	reply = rd_exec_script(s, rd_build(s, items, NULL, n, false, now_ms));
	if (reply == NULL)
		return rd_failed(s, 0);
	rc = rd_decisions(s, &s->nodes[0], reply, items, n, NULL, n,
	    decisions);
	freeReplyObject(reply);
	if (rc != 0)
		return rd_failed(s, 0);
	rd_node_ok(s, 0);
	return RLG_OK;
}

/*
 * The script call in s->argv on the single server, again once after
 * NOSCRIPT (flushed, or failed over: loaded again first). Its reply, or
 * NULL (errmsg).
 */
redisReply *
rd_exec_script(struct rd_store *s, int argc)
{
	redisReply *reply = rd_exec_on(s, 0, false, argc);

	if (reply != NULL && rd_not_loaded(reply)) {
		freeReplyObject(reply);
		if (rd_load_script(s, &s->nodes[0]) != 0)
			return NULL;
		reply = rd_exec_on(s, 0, false, argc);
	}
	return reply;
}

/* The single server's connection: rd_ready, or rd_sentinel_ready for a
 * master the sentinels name. 0, or -1 (errmsg). */
int
rd_ready0(struct rd_store *s)
{
	return s->master != NULL ? rd_sentinel_ready(s) : rd_ready(s, 0);
}

/* The Redis store's group commit (store_group.c): a batch is one call
 * (per node on a cluster) of at most RD_BATCH_ITEMS items; a request the
 * batch could not finish runs again alone. */
static const struct rlg_group_kind rd_group_kind = { rd_lead, rd_step_alone,
    RD_BATCH_ITEMS };

/* rlg_group_lead_fn: one request is a step; more, one call. */
static void
rd_lead(void *handle, struct rlg_group_waiter *batch)
{
	struct rd_store *s = handle;
	struct rlg_group_waiter *x;
	size_t nreq = 0;

	for (x = batch; x != NULL; x = x->next)
		nreq++;
	if (nreq == 1 && batch->handle == s) {
		batch->res = rd_step_alone(s, batch->items, batch->n,
		    batch->now_ms, batch->decisions);
		return;
	}
	if (s->cluster)
		rd_batch_cluster(s, batch, nreq);
	else
		rd_batch_result(s, batch, rd_batch_run(s, batch, nreq));
}

/* The latest now_ms of a batch: the one time its calls run at. */
static int64_t
rd_batch_now(const struct rlg_group_waiter *batch)
{
	int64_t now_ms = 0;

	for (; batch != NULL; batch = batch->next)
		if (batch->now_ms > now_ms)
			now_ms = batch->now_ms;
	return now_ms;
}

/*
 * The batch as one EVALSHA on the leader's connection, NOSCRIPT handled
 * as a step's: RLG_OK with every waiter's decisions filled, RLG_ESTORE
 * (errmsg; the server's failure counted), or RLG_GROUP_ALONE.
 */
static int
rd_batch_run(struct rd_store *s, struct rlg_group_waiter *batch,
    size_t nreq)
{
	struct rlg_group_waiter *x;
	redisReply *reply;
	size_t r, base, total = 0;
	int64_t now;
	int argc, rc = RLG_OK;

	if (nreq > s->reqcap) {
		free(s->reqs);
		s->reqcap = nreq;
		s->reqs = rlg_xcalloc(nreq, sizeof *s->reqs);
	}
	for (x = batch, r = 0; x != NULL; x = x->next, r++) {
		s->reqs[r] = (struct rd_req){ x->items, NULL, x->n, x->n };
		total += x->n;
	}
	rd_budget(s);
	if (rd_ready0(s) != 0)
		return RLG_ESTORE;
	argc = rd_build_batch(s, s->reqs, nreq, rd_batch_now(batch));
	if ((reply = rd_exec_script(s, argc)) == NULL)
		return rd_failed(s, 0);
	if (reply->type == REDIS_REPLY_ERROR) {
		freeReplyObject(reply);
		return RLG_GROUP_ALONE;
	}
	if (rd_reply_now(s, &s->nodes[0], reply, total, &now) != 0)
		rc = -1;
	for (x = batch, base = 0; rc == RLG_OK && x != NULL;
	    base += x->n, x = x->next)
		rc = rd_reply_items(s, &s->nodes[0], reply, base, now,
		    x->items, NULL, x->n, x->decisions);
	freeReplyObject(reply);
	if (rc != RLG_OK)
		return rd_failed(s, 0);
	rd_node_ok(s, 0);
	return RLG_OK;
}

/*
 * A cluster's batch: a script's keys must share a slot, so each request
 * whose items all lie in one slot, with no charge for a new key, goes to
 * the master of that slot, and each master gets its requests as one
 * pipeline of EVALSHAs (one write, one read); the others run alone (the
 * cluster's slot groups, store_redis_cluster.c). A reply that is an error
 * (MOVED, ASK, TRYAGAIN, NOSCRIPT, CLUSTERDOWN: the script did not run)
 * sends its request to run alone, where the cluster's redirections and
 * retries are; a failed exchange fails that master's requests.
 */
static void
rd_batch_cluster(struct rd_store *s, struct rlg_group_waiter *batch,
    size_t nreq)
{
	struct rlg_group_waiter *x;
	size_t r, k, ni;
	int64_t now_ms = rd_batch_now(batch);

	if (nreq > s->bcap) {
		free(s->bnode);
		free(s->breply);
		s->bcap = nreq;
		s->bnode = rlg_xcalloc(nreq, sizeof *s->bnode);
		s->breply = rlg_xcalloc(nreq, sizeof(redisReply *));
	}
	rd_budget(s);
	if (rd_map_ready(s) != 0) {
		rd_batch_result(s, batch, RLG_ESTORE);
		return;
	}
	for (x = batch, r = 0; x != NULL; x = x->next, r++) {
		s->bnode[r] = rd_batch_node(s, x);
		x->res = RLG_GROUP_ALONE;
	}
	/* Each master in turn, in the order of its first request. */
	for (r = 0; r < nreq; r++) {
		if (s->bnode[r] == 0)
			continue;
		ni = s->bnode[r] - 1;
		rd_batch_pipeline(s, batch, ni, now_ms);
		for (k = r; k < nreq; k++)
			if (s->bnode[k] == ni + 1)
				s->bnode[k] = 0;
	}
}

/* The master (index + 1) that x goes to in a pipeline, or 0: alone. */
static size_t
rd_batch_node(struct rd_store *s, const struct rlg_group_waiter *x)
{
	unsigned slot = rd_slot(x->items[0].client);
	size_t i;

	for (i = 0; i < x->n; i++)
		if (x->items[i].if_new || rd_slot(x->items[i].client) != slot)
			return 0;
	return s->slots[slot];
}

/*
 * The requests of batch whose master is node ni (s->bnode), as one
 * pipeline on the leader's connection to it: each one's res set, RLG_OK
 * or RLG_ESTORE, or left RLG_GROUP_ALONE.
 */
static void
rd_batch_pipeline(struct rd_store *s, struct rlg_group_waiter *batch,
    size_t ni, int64_t now_ms)
{
	struct rlg_group_waiter *x;
	size_t r, k = 0, n = 0;
	bool bad = false, noscript = false;

	if (rd_ready(s, ni) == 0) {
		s->outlen = 0;
		for (x = batch, r = 0; x != NULL; x = x->next, r++)
			if (s->bnode[r] == ni + 1) {
				rd_append(s, ni, rd_build(s, x->items, NULL,
				    x->n, false, now_ms));
				n++;
			}
		if (rd_exec_many(s, ni, n, s->breply) != 0) {
			(void)rd_failed(s, ni);
			n = 0;
		}
	}
	for (x = batch, r = 0; x != NULL; x = x->next, r++) {
		if (s->bnode[r] != ni + 1)
			continue;
		if (n == 0) {
			x->res = RLG_ESTORE;        /* no connection, or no reply */
		} else {
			noscript = noscript ||
			    rd_not_loaded(s->breply[k]);
			/* A slot moved (or the cluster is down): the map is
			 * read again before the next batch, which then goes
			 * to the right master; this request goes alone. */
			if (rd_error_is(s->breply[k], "MOVED") ||
			    rd_error_is(s->breply[k], "CLUSTERDOWN"))
				s->map_stale = true;
			x->res = rd_batch_reply(s, ni, x, s->breply[k]);
			freeReplyObject(s->breply[k++]);
		}
		bad = bad || x->res == RLG_ESTORE;
		/* The message of a failure in the handle of each it failed. */
		if (x->res == RLG_ESTORE && x->handle != s)
			memcpy(((struct rd_store *)x->handle)->base.errmsg,
			    s->base.errmsg, sizeof s->base.errmsg);
	}
	/* Flushed, or a failover to a server without it: loaded again for
	 * the next batch (this one's requests went alone). */
	if (noscript && !bad && rd_load_script(s, &s->nodes[ni]) != 0)
		bad = rd_failed(s, ni) != RLG_OK;
	if (!bad)
		rd_node_ok(s, ni);
}

/* One request's reply in a pipeline: RLG_OK (its decisions filled),
 * RLG_GROUP_ALONE for an error reply, or RLG_ESTORE (errmsg). */
static int
rd_batch_reply(struct rd_store *s, size_t ni, struct rlg_group_waiter *x,
    redisReply *reply)
{
	int64_t now;

	if (reply->type == REDIS_REPLY_ERROR)
		return RLG_GROUP_ALONE;
	if (rd_reply_now(s, &s->nodes[ni], reply, x->n, &now) != 0 ||
	    rd_reply_items(s, &s->nodes[ni], reply, 0, now, x->items, NULL,
	    x->n, x->decisions) != 0)
		return rd_failed(s, ni);
	return RLG_OK;
}

/* Every waiter's res, and a failure's message in each one's handle. */
static void
rd_batch_result(struct rd_store *s, struct rlg_group_waiter *batch, int res)
{
	struct rlg_group_waiter *x;
	struct rd_store *xs;

	for (x = batch; x != NULL; x = x->next) {
		x->res = res;
		xs = x->handle;
		if (res == RLG_ESTORE && xs != s)
			memcpy(xs->base.errmsg, s->base.errmsg,
			    sizeof s->base.errmsg);
	}
}

/* The group of this process for the server, and leaving it: rd_open,
 * rd_close. */
void
rd_batch_join(struct rd_store *s)
{
	rlg_group_join(&s->group, s, &rd_group_kind, s->name);
}

void
rd_batch_leave(struct rd_store *s)
{
	rlg_group_leave(&s->group);
	free(s->reqs);
	free(s->bnode);
	free(s->breply);
}

/* The stats operation: the group's counters. */
void
rd_stats(const struct rlg_store *base, struct rlg_store_stats *out)
{
	const struct rd_store *s = (const struct rd_store *)base;

	rlg_group_stats(&s->group, out);
}
