/*
 * store_redis_sync.c: the Redis store's sync (rlg_store_sync), the
 * local+global mode's exchange: the units each host admitted since its
 * last sync merged into the stored states by db/redis/sync.lua (the
 * Lua twin of rlg_limiter_merge), and the states after the merge read
 * back, every value checked.
 *
 * Calls. The items go in script calls of at most RD_SYNC_ITEMS items
 * (their reply stays far below the reader's array bound). A single
 * server (or a Sentinel's master) gets all of them as one pipeline. On a
 * Redis Cluster a script's keys must share a slot: the items are grouped
 * by slot (in item order within a slot, so the same key twice merges
 * twice, in order), each slot's items are its own calls, and each master
 * gets its slots' calls as one pipeline, as a batch of steps does
 * (store_redis_batch.c). Each exchange has its own deadline
 * ([store] timeout_ms).
 *
 * Failures. A call whose reply is an error the script never ran behind
 * (NOSCRIPT: the script is loaded there and the call sent again; a
 * cluster's MOVED, ASK, TRYAGAIN, CLUSTERDOWN: sent again alone through
 * the cluster's redirections and retries, store_redis_cluster.c) is sent
 * again, once; any other failure fails the sync with RLG_ESTORE and the
 * server named. A call is never sent again after a failed exchange (it
 * may have run: merging twice would count twice): its items are marked
 * RLG_SYNC_UNKNOWN, and the caller decides.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "store.h"
#include "store_redis_parts.h"
#include "util.h"

/* db/redis/sync.lua after step.lua's helpers, compiled in by the build
 * as app/redis_sync.c. */
extern const char rlg_redis_sync_lua[];

/* Items in one script call, at most: a reply of 1 + 5 x this many. */
#define RD_SYNC_ITEMS 1024
/* The arguments: n, then this many per item; the reply: now_ms, then
 * this many per item. */
#define RD_SYNC_ARGS 6
#define RD_SYNC_REPLY 5
/* The largest expires_ms a merged state stores: ceil(RLG_TAT_US_MAX /
 * 1000) rounded up to the second. */
#define RD_SYNC_EXPIRES_MAX (RLG_TAT_US_MAX / 1000 + 1000)

/* One script call: items order[start..start + m) of one slot. */
struct rd_call {
	size_t start;
	size_t m;
	unsigned slot;
	size_t node;                  /* index in s->nodes */
	int res;                      /* RLG_OK, RLG_ESTORE, or RD_AGAIN */
};

/* A sync under way: its items, their order, its calls. */
struct rd_sync {
	const struct rlg_sync_item *items;
	size_t n;
	int64_t now_ms;
	struct rlg_state *global;
	size_t *order;
	unsigned *slot;
	struct rd_call *calls;
	size_t ncalls;
};

#define RD_AGAIN (-1002)     /* none of the RLG_ codes */

static int rd_sync_check(struct rd_store *s,
    const struct rlg_sync_item *items, size_t n);
static void rd_sync_plan(struct rd_store *s, struct rd_sync *y);
static int rd_sync_build(struct rd_store *s, const struct rd_sync *y,
    const struct rd_call *c);
static void rd_sync_node(struct rd_store *s, struct rd_sync *y, size_t ni);
static void rd_sync_again(struct rd_store *s, struct rd_sync *y,
    struct rd_call *c);
static int rd_sync_reply(struct rd_store *s, struct rd_sync *y,
    const struct rd_call *c, size_t ni, const redisReply *reply);
static int rd_sync_value(struct rd_store *s, size_t ni,
    const redisReply *e, size_t k, int64_t hi, int64_t *v);
static int rd_sync_load(struct rd_store *s, struct rd_node *node);
static bool rd_sync_retry(const redisReply *reply);
static int rd_sync_exec(struct rd_store *s, struct rd_sync *y,
    const struct rd_call *c, redisReply **out, size_t *nodep);
static int rd_sort_cmp(const void *a, const void *b, void *slots);

/* The order of a cluster's items (qsort_r): by slot, then by index. */
static int
rd_sort_cmp(const void *a, const void *b, void *slots)
{
	const unsigned *slot = slots;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	if (slot[x] != slot[y])
		return slot[x] < slot[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/*
 * rlg_store_sync on Redis (store.c has checked the items): the calls
 * planned, each master's sent as one pipeline, those to send again sent
 * again alone. RLG_OK, RLG_EINVAL, or RLG_ESTORE (errmsg; the items not
 * known merged marked RLG_SYNC_UNKNOWN).
 */
int
rd_sync(struct rlg_store *base, const struct rlg_sync_item *items,
    size_t n, int64_t now_ms, struct rlg_state *global)
{
	struct rd_store *s = (struct rd_store *)base;
	struct rd_sync y = { items, n, now_ms, global, NULL, NULL, NULL, 0 };
	size_t i, k;
	int rc = RLG_OK;

	if (rd_sync_check(s, items, n) != RLG_OK)
		return RLG_EINVAL;
	for (i = 0; i < n; i++)
		global[i].expires_ms = RLG_SYNC_UNKNOWN;
	if (s->nnodes == 0)
		return RLG_ESTORE;      /* no url: errmsg says so since open */
	rd_budget(s);
	if (s->cluster && rd_map_ready(s) != 0)
		return RLG_ESTORE;
	rd_sync_plan(s, &y);
	/* Each master in turn, in the order of its first call. */
	for (i = 0; i < y.ncalls; i++) {
		if (y.calls[i].res != RD_AGAIN || y.calls[i].node == SIZE_MAX)
			continue;
		rd_sync_node(s, &y, y.calls[i].node);
	}
	for (k = 0; k < y.ncalls; k++) {
		if (y.calls[k].res == RD_AGAIN)
			rd_sync_again(s, &y, &y.calls[k]);
		if (y.calls[k].res != RLG_OK)
			rc = RLG_ESTORE;
	}
	free(y.order);
	free(y.slot);
	free(y.calls);
	return rc;
}

/*
 * What only Redis refuses: a client key that would leave the hash tag
 * empty (as a step's, store_redis.c). RLG_OK or RLG_EINVAL (errmsg).
 */
static int
rd_sync_check(struct rd_store *s, const struct rlg_sync_item *items,
    size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (items[i].client[0] == '\0' || items[i].client[0] == '}') {
			rd_seterr(s, "store sync: client key \"%s\" would"
			    " leave the Redis hash tag {...} empty",
			    items[i].client);
			return RLG_EINVAL;
		}
	return RLG_OK;
}

/*
 * The calls of a sync: the items in slot order (a single server: item
 * order), cut at each slot and every RD_SYNC_ITEMS items; each call's
 * node its slot's master (0 on a single server), res RD_AGAIN (to send).
 */
static void
rd_sync_plan(struct rd_store *s, struct rd_sync *y)
{
	size_t i, m;
	struct rd_call *c;

	y->order = rlg_xcalloc(y->n, sizeof *y->order);
	y->slot = rlg_xcalloc(y->n, sizeof *y->slot);
	y->calls = rlg_xcalloc(y->n, sizeof *y->calls);
	for (i = 0; i < y->n; i++) {
		y->order[i] = i;
		y->slot[i] = s->cluster ? rd_slot(y->items[i].client) : 0;
	}
	if (s->cluster)
		qsort_r(y->order, y->n, sizeof *y->order, rd_sort_cmp, y->slot);
	for (i = 0; i < y->n; i += m) {
		c = &y->calls[y->ncalls++];
		for (m = 1; i + m < y->n && m < RD_SYNC_ITEMS &&
		    y->slot[y->order[i + m]] == y->slot[y->order[i]]; m++)
			;
		c->start = i;
		c->m = m;
		c->slot = y->slot[y->order[i]];
		c->res = RD_AGAIN;
		/* A slot no master serves (SIZE_MAX): sent alone, where the
		 * cluster's code says so. */
		c->node = (s->cluster ? (size_t)s->slots[c->slot] : 1) - 1;
	}
}

/*
 * EVALSHA sync_sha m KEYS... now m ARGS... for call c into s->argv (the
 * handle's buffers, as a step's). Returns argc.
 */
static int
rd_sync_build(struct rd_store *s, const struct rd_sync *y,
    const struct rd_call *c)
{
	size_t argc = 5 + (1 + RD_SYNC_ARGS) * c->m, need, a, i, k;
	const struct rlg_sync_item *it;
	const struct rlg_policy *p;
	int64_t v[RD_SYNC_ARGS];
	char *at;

	need = (size_t)3 * RD_NUM;
	for (i = 0; i < c->m; i++) {
		it = &y->items[y->order[c->start + i]];
		need += strlen(it->client) + strlen(it->policy->name) + 8 +
		    (size_t)RD_SYNC_ARGS * RD_NUM;
	}
	rd_reserve(s, argc, need);
	at = rd_script_head(s, s->sync_sha, c->m, s->text);
	a = 3;
	for (i = 0; i < c->m; i++, a++) {
		it = &y->items[y->order[c->start + i]];
		at = rd_state_key(s, a, it->client, it->policy->name, at);
	}
	/* now: "" for Redis TIME (clock = redis), as a step's. */
	s->argv[a] = at;
	*at = '\0';
	s->argvlen[a] = s->local_clock ? (size_t)snprintf(at, RD_NUM, "%lld",
	    (long long)y->now_ms) : 0;
	at += s->argvlen[a++] + 1;
	s->argv[a] = s->argv[2];
	s->argvlen[a++] = s->argvlen[2];
	for (i = 0; i < c->m; i++) {
		it = &y->items[y->order[c->start + i]];
		p = it->policy;
		v[0] = (int64_t)p->lim.algorithm;
		v[1] = p->lim.limit;
		v[2] = p->lim.window_ms;
		v[3] = p->lim.burst;
		v[4] = it->units;
		v[5] = it->window_start_ms;
		for (k = 0; k < RD_SYNC_ARGS; k++, a++) {
			s->argv[a] = at;
			s->argvlen[a] = (size_t)snprintf(at, RD_NUM, "%lld",
			    (long long)v[k]);
			at += s->argvlen[a] + 1;
		}
	}
	return (int)a;
}

/*
 * The calls still to send to node ni, as one pipeline (the script loaded
 * there first if this handle never loaded it): each one's res RLG_OK
 * (its states in global), RLG_ESTORE, or RD_AGAIN to send again alone.
 */
static void
rd_sync_node(struct rd_store *s, struct rd_sync *y, size_t ni)
{
	redisReply **replies;
	size_t k, j, sent = 0;
	bool bad = false;

	rd_budget(s);
	if ((!s->cluster ? rd_ready0(s) : rd_ready(s, ni)) != 0 ||
	    (!s->nodes[ni].fcall && s->sync_sha[0] == '\0' &&
	    rd_sync_load(s, &s->nodes[ni]) != 0)) {
		if (s->nodes[ni].c != NULL)
			(void)rd_failed(s, ni);
		for (k = 0; k < y->ncalls; k++)
			if (y->calls[k].node == ni && y->calls[k].res == RD_AGAIN)
				y->calls[k].res = RLG_ESTORE;
		return;
	}
	s->outlen = 0;
	for (k = 0; k < y->ncalls; k++)
		if (y->calls[k].node == ni && y->calls[k].res == RD_AGAIN) {
			rd_append(s, ni, rd_sync_build(s, y, &y->calls[k]));
			sent++;
		}
	replies = rlg_xcalloc(sent, sizeof(redisReply *));
	if (rd_exec_many(s, ni, sent, replies) != 0) {
		(void)rd_failed(s, ni);
		sent = 0;
		bad = true;
	}
	for (k = 0, j = 0; k < y->ncalls; k++) {
		if (y->calls[k].node != ni || y->calls[k].res != RD_AGAIN)
			continue;
		if (sent == 0) {
			y->calls[k].res = RLG_ESTORE;
			continue;
		}
		y->calls[k].res = rd_sync_retry(replies[j]) ? RD_AGAIN :
		    rd_sync_reply(s, y, &y->calls[k], ni, replies[j]);
		/* Answered: not to send again to this node in this round. */
		if (y->calls[k].res == RD_AGAIN)
			y->calls[k].node = SIZE_MAX;
		bad = bad || y->calls[k].res == RLG_ESTORE;
		freeReplyObject(replies[j++]);
	}
	free(replies);
	if (bad && sent > 0)
		(void)rd_failed(s, ni);
	else if (!bad)
		rd_node_ok(s, ni);
}

/*
 * The merge where node lacks it: the library again where node takes FCALL
 * (rd_load_script, which falls back to EVALSHA when refused), else
 * SCRIPT LOAD of sync.lua, its SHA1 into s->sync_sha. 0, or -1 (errmsg).
 */
static int
rd_sync_load(struct rd_store *s, struct rd_node *node)
{
	if (node->fcall && rd_load_script(s, node) != 0)
		return -1;
	if (node->fcall)
		return 0;
	return rd_load_lua(s, node, rlg_redis_sync_lua, s->sync_sha);
}

/* An error reply behind which the script did not run: send it again. */
static bool
rd_sync_retry(const redisReply *reply)
{
	return rd_not_loaded(reply) || rd_error_is(reply, "MOVED") ||
	    rd_error_is(reply, "ASK") || rd_error_is(reply, "TRYAGAIN") ||
	    rd_error_is(reply, "CLUSTERDOWN");
}

/*
 * Call c alone, once more: after a NOSCRIPT (the script loaded again
 * where it was missing, then once more) or a cluster's redirection
 * (rd_cluster_key_exec follows them). res RLG_OK or RLG_ESTORE.
 */
static void
rd_sync_again(struct rd_store *s, struct rd_sync *y, struct rd_call *c)
{
	redisReply *reply = NULL;
	size_t ni = 0;
	int tries;

	c->res = RLG_ESTORE;
	for (tries = 0; tries < 2; tries++) {
		rd_budget(s);
		if (rd_sync_exec(s, y, c, &reply, &ni) != 0)
			return;
		if (!rd_not_loaded(reply) || tries > 0)
			break;
		freeReplyObject(reply);
		if (rd_sync_load(s, &s->nodes[ni]) != 0) {
			(void)rd_failed(s, ni);
			return;
		}
	}
	c->res = rd_sync_reply(s, y, c, ni, reply);
	freeReplyObject(reply);
	if (c->res != RLG_OK)
		(void)rd_failed(s, ni);
	else
		rd_node_ok(s, ni);
}

/*
 * Call c sent alone: on a cluster to the master of its slot, with the
 * cluster's redirections and retries (its own reload after NOSCRIPT is
 * step.lua's: a NOSCRIPT it hands back is the caller's to load); else to
 * the server. 0 with the reply and its node, or -1 (errmsg).
 */
static int
rd_sync_exec(struct rd_store *s, struct rd_sync *y, const struct rd_call *c,
    redisReply **out, size_t *nodep)
{
	int argc;

	if (!s->cluster && rd_ready0(s) != 0)
		return -1;
	argc = rd_sync_build(s, y, c);
	if (s->cluster)
		return rd_cluster_key_exec(s, s->argv[3], argc, out, nodep);
	*nodep = 0;
	if ((*out = rd_exec_on(s, 0, false, argc)) == NULL) {
		(void)rd_failed(s, 0);
		return -1;
	}
	return 0;
}

/*
 * The reply to call c from node ni: an array of 1 + 5 m elements, now_ms
 * and per item window_start_ms, count, prev_count (integers), tat_us (a
 * decimal string) and expires_ms, each within what rlgate stores; then
 * into global. RLG_OK, or RLG_ESTORE (errmsg: the element and why).
 */
static int
rd_sync_reply(struct rd_store *s, struct rd_sync *y, const struct rd_call *c,
    size_t ni, const redisReply *reply)
{
	static const int64_t hi[RD_SYNC_REPLY] = { RLG_TIME_MS_MAX,
	    RLG_MERGE_COUNT_MAX, RLG_MERGE_COUNT_MAX, RLG_TAT_US_MAX,
	    RD_SYNC_EXPIRES_MAX };
	struct rlg_state st;
	int64_t v[RD_SYNC_REPLY], now;
	size_t i, f;
	char said[RD_SAID];

	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: %s (sync) failed: %s", s->nodes[ni].name,
		    rd_call_name(&s->nodes[ni]), rd_said(reply->str, reply->len, said));
		return RLG_ESTORE;
	}
	if (reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != 1 + RD_SYNC_REPLY * c->m) {
		rd_seterr(s, "%s: %s (sync): unexpected reply: %s, not an"
		    " array of %zu elements (is db/redis/sync.lua the script"
		    " of this rlgate?)", s->nodes[ni].name,
		    rd_call_name(&s->nodes[ni]),
		    rd_reply_type(reply->type), 1 + RD_SYNC_REPLY * c->m);
		return RLG_ESTORE;
	}
	if (rd_sync_value(s, ni, reply, 0, RLG_TIME_MS_MAX, &now) != 0)
		return RLG_ESTORE;
	for (i = 0; i < c->m; i++) {
		for (f = 0; f < RD_SYNC_REPLY; f++)
			if (rd_sync_value(s, ni, reply, 1 + RD_SYNC_REPLY * i + f,
			    hi[f], &v[f]) != 0) {
				/* It ran, but what it left is not known. */
				for (i = 0; i < c->m; i++)
					y->global[y->order[c->start +
					    i]].expires_ms = RLG_SYNC_UNKNOWN;
				return RLG_ESTORE;
			}
		st.window_start_ms = v[0];
		st.count = v[1];
		st.prev_count = v[2];
		st.tat_us = v[3];
		st.expires_ms = v[4];
		/* no ban in the local+global mode (config_check.c) */
		st.refused = 0;
		st.refused_start_ms = 0;
		st.ban_until_ms = 0;
		y->global[y->order[c->start + i]] = st;
	}
	return RLG_OK;
}

/*
 * Element k of reply: an integer, or a string of decimal digits (tat_us),
 * within 0..hi, into *v. 0, or -1 (errmsg).
 */
static int
rd_sync_value(struct rd_store *s, size_t ni, const redisReply *reply,
    size_t k, int64_t hi, int64_t *v)
{
	const redisReply *e = reply->element[k];
	char said[RD_SAID];
	unsigned long long x = ULLONG_MAX;
	size_t i;

	if (e->type == REDIS_REPLY_INTEGER && e->integer >= 0) {
		x = (unsigned long long)e->integer;
	} else if (e->type == REDIS_REPLY_STRING && e->len > 0 &&
	    e->len <= 19) {
		/* 19 digits fit 64 bits unsigned. */
		for (i = 0, x = 0; i < e->len && x != ULLONG_MAX; i++)
			x = e->str[i] >= '0' && e->str[i] <= '9' ?
			    x * 10 + (unsigned)(e->str[i] - '0') : ULLONG_MAX;
	}
	if (x <= (unsigned long long)hi) {
		*v = (int64_t)x;
		return 0;
	}
	if (e->type == REDIS_REPLY_STRING)
		rd_seterr(s, "%s: %s (sync): unexpected reply: element"
		    " %zu is \"%s\", not a number of 0 to %lld",
		    s->nodes[ni].name, rd_call_name(&s->nodes[ni]), k,
		    rd_said(e->str, e->len, said), (long long)hi);
	else
		rd_seterr(s, "%s: %s (sync): unexpected reply: element"
		    " %zu is %s%s, not a number of 0 to %lld",
		    s->nodes[ni].name, rd_call_name(&s->nodes[ni]), k, rd_reply_type(e->type),
		    e->type == REDIS_REPLY_INTEGER ? " out of range" : "",
		    (long long)hi);
	return -1;
}
