/*
 * store_redis_script.c: the Redis store's side of its script
 * (db/redis/step.lua): EVALSHA's keys and arguments for a step's items,
 * built in the handle's buffers, and the script's reply checked, every
 * value, into decisions. Beside the step (store_redis.c) and the cluster
 * (store_redis_cluster.c), which both send what it builds and read what
 * it checks, so that neither calls the other for it.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "store.h"
#include "store_redis_parts.h"
#include "util.h"

/* The arguments: n, then this many per item. */
#define RD_PER_ITEM 8
/* The reply: now_ms, then this many integers per item. */
#define RD_REPLY_PER_ITEM 6

static int rd_field(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t k, const struct rlg_policy *p,
    int64_t lo, int64_t hi);
static bool rd_skipped(const redisReply *const *e, size_t k,
    const struct rlg_policy *p);
static int rd_reply_shape(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, size_t nreply);
static int rd_reply_item(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t i, const struct rlg_store_item *it,
    int64_t now);
static char *rd_build_keys(struct rd_store *s,
    const struct rlg_store_item *items, const size_t *idx, size_t m,
    size_t n, char *at, size_t *ap);
static char *rd_build_now(struct rd_store *s, int64_t now_ms, char *at,
    size_t *ap);
static char *rd_build_args(struct rd_store *s,
    const struct rlg_store_item *items, const size_t *idx, size_t m,
    size_t n, char *at, size_t *ap);

/*
 * EVALSHA sha 2n KEYS... now n ARGS... into s->argv for the items
 * idx[0..m) (idx NULL: items[0..m)), and with probe the two items of a
 * check (store_redis_cluster.c) after them, growing the buffers if this
 * request is the largest yet. Returns argc.
 */
int
rd_build(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, bool probe, int64_t now_ms)
{
	struct rd_req req = { items, idx, m, m + (probe ? RD_PROBE_ITEMS : 0) };

	return rd_build_batch(s, &req, 1, now_ms);
}

/*
 * EVALSHA for the requests reqs[0..nreq) in one call (a batch: the
 * script runs them in order): their KEYS, then now, then each request's
 * n and items. Returns argc.
 */
int
rd_build_batch(struct rd_store *s, const struct rd_req *reqs, size_t nreq,
    int64_t now_ms)
{
	size_t argc = 4, need = (size_t)3 * RD_NUM, keys = 0, i, r, a;
	const struct rlg_store_item *it;
	char *at;

	/* "rlg:{" C "}:" P, and the same with ":log", each NUL-ended. */
	for (r = 0; r < nreq; r++) {
		argc += 1 + (2 + RD_PER_ITEM) * reqs[r].n;
		keys += 2 * reqs[r].n;
		need += RD_NUM;
		for (i = 0; i < reqs[r].m; i++) {
			it = &reqs[r].items[reqs[r].idx != NULL ?
			    reqs[r].idx[i] : i];
			need += 2 * (strlen(it->client) +
			    strlen(it->policy->name) + 8) + 4 +
			    (size_t)RD_PER_ITEM * RD_NUM;
		}
	}
	rd_reserve(s, argc, need);

	at = rd_script_head(s, s->sha, keys, s->text);
	a = 3;
	for (r = 0; r < nreq; r++)
		at = rd_build_keys(s, reqs[r].items, reqs[r].idx, reqs[r].m,
		    reqs[r].n, at, &a);
	at = rd_build_now(s, now_ms, at, &a);
	for (r = 0; r < nreq; r++)
		at = rd_build_args(s, reqs[r].items, reqs[r].idx, reqs[r].m,
		    reqs[r].n, at, &a);
	assert(a == argc && (size_t)(at - s->text) <= need);
	return (int)argc;
}

/*
 * Makes room for argc arguments in s->argv and s->argvlen and for need
 * bytes in s->text (what was there is not kept).
 */
void
rd_reserve(struct rd_store *s, size_t argc, size_t need)
{
	if (argc > s->argcap) {
		free(s->argv);
		free(s->argvlen);
		s->argcap = argc;
		s->argv = rlg_xcalloc(argc, sizeof *s->argv);
		s->argvlen = rlg_xcalloc(argc, sizeof *s->argvlen);
	}
	if (need > s->textcap) {
		free(s->text);
		s->textcap = need;
		s->text = rlg_xmalloc(need);
	}
}

/*
 * A request's KEYS from argument *a on, their text from at on: each
 * item's state key and its log key (the state key again for an item
 * that is no sliding log), then the probe's (n - m items), all four the
 * request's first state key. Returns the end of the text written.
 */
static char *
rd_build_keys(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, size_t n, char *at, size_t *ap)
{
	const struct rlg_store_item *it;
	size_t i, k, a = *ap, first = *ap;

	for (i = 0; i < m; i++) {
		it = &items[idx != NULL ? idx[i] : i];
		at = rd_state_key(s, a++, it->client, it->policy->name, at);
		if (it->policy->lim.algorithm != RLG_ALG_SLIDING_LOG) {
			/* Unused: the state key again (store_redis_cluster.c). */
			s->argv[a] = s->argv[a - 1];
			s->argvlen[a] = s->argvlen[a - 1];
			a++;
			continue;
		}
		s->argv[a] = at;
		at = rd_put(at, s->argv[a - 1], s->argvlen[a - 1]);
		at = rd_put(at, ":log", 4);
		s->argvlen[a] = (size_t)(at - s->argv[a]);
		*at++ = '\0';
		a++;
	}
	for (i = m; i < n; i++) {
		/* The probe: the first state key, four times. */
		for (k = 0; k < 2; k++, a++) {
			s->argv[a] = s->argv[first];
			s->argvlen[a] = s->argvlen[first];
		}
	}
	*ap = a;
	return at;
}

/*
 * ARGV[1] of rd_build at argument *a, its text at at: now ("" for Redis
 * TIME: the script reads it). Returns the end of the text written.
 */
static char *
rd_build_now(struct rd_store *s, int64_t now_ms, char *at, size_t *ap)
{
	size_t len = 0;

	s->argv[*ap] = at;
	*at = '\0';
	if (s->local_clock)
		len = (size_t)snprintf(at, RD_NUM, "%lld", (long long)now_ms);
	s->argvlen[(*ap)++] = len;
	return at + len + 1;
}

/*
 * A request's ARGV from argument *a on, their text from at on: n, then
 * each item's algorithm, limit, window_ms, burst, flags, cost, ban_ms and
 * ban_after, then
 * the probe's (n - m items). Returns the end of the text written.
 */
static char *
rd_build_args(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, size_t n, char *at, size_t *ap)
{
	static const char *const probe_args[RD_PER_ITEM] = { "0", "1",
	    "1000", "0", "0", "1", "0", "1" };
	const struct rlg_store_item *it;
	const struct rlg_policy *p;
	size_t i, k, a = *ap;
	int64_t v[RD_PER_ITEM];

	s->argv[a] = at;
	s->argvlen[a] = (size_t)snprintf(at, RD_NUM, "%zu", n);
	at += s->argvlen[a++] + 1;
	for (i = 0; i < m; i++) {
		it = &items[idx != NULL ? idx[i] : i];
		p = it->policy;
		v[0] = (int64_t)p->lim.algorithm;
		v[1] = p->lim.limit;
		v[2] = p->lim.window_ms;
		v[3] = p->lim.burst;
		/* flags: 1 advisory, 2 a charge for a new key */
		v[4] = (it->advisory ? 1 : 0) | (it->if_new ? 2 : 0);
		v[5] = rlg_store_item_cost(it);
		v[6] = p->lim.ban_ms;
		v[7] = p->lim.ban_after;
		for (k = 0; k < RD_PER_ITEM; k++, a++) {
			s->argv[a] = at;
			s->argvlen[a] = (size_t)snprintf(at, RD_NUM, "%lld",
			    (long long)v[k]);
			at += s->argvlen[a] + 1;
		}
	}
	for (i = m; i < n; i++) {
		for (k = 0; k < RD_PER_ITEM; k++, a++) {
			s->argv[a] = probe_args[k];
			s->argvlen[a] = strlen(probe_args[k]);
		}
	}
	*ap = a;
	return at;
}

/*
 * The state key of client under policy, "rlg:{CLIENT}:POLICY", written
 * at at as argument a of s->argv (NUL-ended; the client in braces is the hash tag that puts
 * a client's keys in one cluster slot). Returns the end past the NUL.
 */
char *
rd_state_key(struct rd_store *s, size_t a, const char *client,
    const char *policy, char *at)
{
	s->argv[a] = at;
	at = rd_put(at, "rlg:{", 5);
	at = rd_put(at, client, strlen(client));
	at = rd_put(at, "}:", 2);
	at = rd_put(at, policy, strlen(policy));
	s->argvlen[a] = (size_t)(at - s->argv[a]);
	*at++ = '\0';
	return at;
}

/* Copies len bytes of s to at; returns the end. */
char *
rd_put(char *at, const char *s, size_t len)
{
	memcpy(at, s, len);
	return at + len;
}

/*
 * The script's reply from node, for nreply items (items[idx[j]] for the
 * first m, idx NULL: items[j]; then the probe's), into decisions: the
 * first m reply items go to decisions[idx[j]] (idx NULL: decisions[j]).
 * Every value is checked (see the top) before any is used. 0, or -1
 * (errmsg names the element, its field, its value and the range).
 */
int
rd_decisions(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, const struct rlg_store_item *items,
    size_t nreply, const size_t *idx, size_t m,
    struct rlg_decision *decisions)
{
	const redisReply *const *e;
	size_t i;
	int64_t now;

	if (rd_reply_now(s, node, reply, nreply, &now) != 0)
		return -1;
	if (rd_reply_items(s, node, reply, 0, now, items, idx, m,
	    decisions) != 0)
		return -1;
	e = (const redisReply *const *)reply->element;
	for (i = m; i < nreply; i++)
		if (rd_reply_item(s, node, e, i, NULL, now) != 0)
			return -1;
	return 0;
}

/*
 * The reply as a whole (rd_reply_shape) for nreply items, and its now_ms
 * into *now. 0, or -1 (errmsg).
 */
int
rd_reply_now(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, size_t nreply, int64_t *now)
{
	const redisReply *const *e;

	if (rd_reply_shape(s, node, reply, nreply) != 0)
		return -1;
	e = (const redisReply *const *)reply->element;
	if (rd_field(s, node, e, 0, NULL, 0, RLG_TIME_MS_MAX) != 0)
		return -1;
	*now = e[0]->integer;
	return 0;
}

/*
 * The m items of one request in a reply whose shape rd_reply_now has
 * checked, from its item base on (a batch's requests follow each
 * other): each checked, then into decisions[idx[j]] (idx NULL:
 * decisions[j]). 0, or -1 (errmsg).
 */
int
rd_reply_items(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, size_t base, int64_t now,
    const struct rlg_store_item *items, const size_t *idx, size_t m,
    struct rlg_decision *decisions)
{
	const redisReply *const *e = (const redisReply *const *)reply->element;
	const struct rlg_store_item *it;
	struct rlg_decision *d;
	size_t i, k;

	for (i = 0; i < m; i++)
		if (rd_reply_item(s, node, e, base + i,
		    &items[idx != NULL ? idx[i] : i], now) != 0)
			return -1;
	for (i = 0; i < m; i++) {
		it = &items[idx != NULL ? idx[i] : i];
		d = &decisions[idx != NULL ? idx[i] : i];
		k = 1 + RD_REPLY_PER_ITEM * (base + i);
		d->admitted = e[k]->integer == 1;
		d->limit = e[k + 1]->integer;
		d->remaining = e[k + 2]->integer;
		d->reset_ms = e[k + 3]->integer;
		d->retry_ms = e[k + 4]->integer;
		d->next_ms = e[k + 5]->integer;
		/* the script's all-clear for a charge that did not apply */
		d->skipped = it->if_new && d->admitted &&
		    rd_skipped(e, k, it->policy);
	}
	return 0;
}

/*
 * The step's reply as a whole: no error, an array of 1 + 6 nreply
 * elements. 0, or -1 (errmsg: the error, or what came instead).
 */
static int
rd_reply_shape(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, size_t nreply)
{
	char got[48], said[RD_SAID];

	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: %s failed: %s%s", node->name,
		    rd_call_name(node), rd_said(reply->str, reply->len, said),
		    !s->cluster && (rd_error_is(reply, "MOVED") ||
		    rd_error_is(reply, "ASK")) ? " (a Redis Cluster node:"
		    " set [store] backend = redis_cluster)" : "");
		return -1;
	}
	if (reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != 1 + RD_REPLY_PER_ITEM * nreply) {
		if (reply->type == REDIS_REPLY_ARRAY)
			snprintf(got, sizeof got, "an array of %zu",
			    reply->elements);
		else
			snprintf(got, sizeof got, "%s",
			    rd_reply_type(reply->type));
		rd_seterr(s, "%s: %s: unexpected reply: %s, not an"
		    " array of %zu integers (is db/redis/step.lua the"
		    " script of this rlgate?)", node->name,
		    rd_call_name(node), got,
		    1 + RD_REPLY_PER_ITEM * nreply);
		return -1;
	}
	return 0;
}

/*
 * Item i of the step's reply e, for it (NULL: an item of the probe),
 * answered at now: each field an integer within what the limiter can
 * give for its policy, admitted or rejected alike (limiter.h), or
 * exactly a skipped charge. 0, or -1 (errmsg, rd_field's).
 */
static int
rd_reply_item(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t i, const struct rlg_store_item *it,
    int64_t now)
{
	/* The probe's items: fixed_window, limit 1 (rd_build). */
	static const struct rlg_policy probe = { .name = (char *)"probe",
	    .lim = { .algorithm = RLG_ALG_FIXED_WINDOW, .limit = 1,
	    .window_ms = 1000 } };
	const struct rlg_policy *p = it != NULL ? it->policy : &probe;
	struct rlg_limiter_bounds b;
	size_t k = 1 + RD_REPLY_PER_ITEM * i;

	if (rlg_limiter_bounds(&p->lim, now, &b) != RLG_OK) {
		/* rd_check_items let only good policies through. */
		rd_seterr(s, "%s: %s: item %zu: no bounds for its"
		    " policy", node->name, rd_call_name(node), i);
		return -1;
	}
	if (rd_field(s, node, e, k, p, 0, 1) != 0)
		return -1;
	/* A charge for a new key that did not apply: skipped. */
	if (it != NULL && it->if_new && e[k]->integer == 1 &&
	    rd_skipped(e, k, p))
		return 0;
	if (e[k]->integer == 1) {
		if (rd_field(s, node, e, k + 1, p, p->lim.limit,
		    p->lim.limit) != 0 ||
		    rd_field(s, node, e, k + 2, p, 0,
		    b.remaining_max) != 0 ||
		    rd_field(s, node, e, k + 3, p, 1,
		    b.delay_max) != 0 ||
		    rd_field(s, node, e, k + 4, p, 0, 0) != 0 ||
		    rd_field(s, node, e, k + 5, p, 1,
		    e[k + 3]->integer) != 0)
			return -1;
		return 0;
	}
	/*
	 * Rejected: reset_ms and next_ms are retry_ms (limiter.h); what is
	 * left to requests of cost 1 is 0 unless a costlier one was
	 * refused, up to the whole capacity.
	 */
	if (rd_field(s, node, e, k + 1, p, p->lim.limit,
	    p->lim.limit) != 0 ||
	    rd_field(s, node, e, k + 2, p, 0, it != NULL &&
	    rlg_store_item_cost(it) > 1 ? b.remaining_max + 1 : 0) != 0 ||
	    rd_field(s, node, e, k + 4, p, 1, b.delay_max) != 0 ||
	    rd_field(s, node, e, k + 3, p, e[k + 4]->integer,
	    e[k + 4]->integer) != 0 ||
	    rd_field(s, node, e, k + 5, p, e[k + 4]->integer,
	    e[k + 4]->integer) != 0)
		return -1;
	return 0;
}

/*
 * Whether the reply of an item from element k (admitted) is exactly what
 * the script answers for a skipped charge (rlg_store_skipped): limit and
 * remaining the policy's limit, reset_ms, retry_ms and next_ms 0.
 */
static bool
rd_skipped(const redisReply *const *e, size_t k, const struct rlg_policy *p)
{
	size_t f;

	for (f = 1; f < RD_REPLY_PER_ITEM; f++)
		if (e[k + f]->type != REDIS_REPLY_INTEGER)
			return false;
	return e[k + 1]->integer == p->lim.limit &&
	    e[k + 2]->integer == p->lim.limit &&
	    e[k + 3]->integer == 0 && e[k + 4]->integer == 0 &&
	    e[k + 5]->integer == 0;
}

/*
 * Element k of the step's reply e, a field of item (k - 1) / 6 of policy
 * p (now_ms when k is 0), must be an integer from lo to hi. Only a value
 * that is not costs a message. 0, or -1 (errmsg: the element, the field,
 * the value and the range).
 */
static int
rd_field(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t k, const struct rlg_policy *p,
    int64_t lo, int64_t hi)
{
	static const char *const fields[RD_REPLY_PER_ITEM] = { "admitted",
	    "limit", "remaining", "reset_ms", "retry_ms", "next_ms" };
	size_t item = (k - 1) / RD_REPLY_PER_ITEM,
	    f = (k - 1) % RD_REPLY_PER_ITEM;
	char what[200], range[64];

	if (e[k]->type == REDIS_REPLY_INTEGER && e[k]->integer >= lo &&
	    e[k]->integer <= hi)
		return 0;
	if (k == 0)
		snprintf(what, sizeof what, "now_ms");
	else
		snprintf(what, sizeof what, "%s of item %zu (policy \"%.64s\"%s)",
		    fields[f], item, p->name, f == 0 ? "" :
		    e[k - f]->integer == 1 ? ", admitted" : ", rejected");
	if (e[k]->type != REDIS_REPLY_INTEGER) {
		rd_seterr(s, "%s: %s: unexpected reply: element %zu is"
		    " %s, not an integer: %s", node->name,
		    rd_call_name(node), k,
		    rd_reply_type(e[k]->type), what);
		return -1;
	}
	if (lo == hi)
		snprintf(range, sizeof range, "%lld", (long long)lo);
	else
		snprintf(range, sizeof range, "%lld to %lld", (long long)lo,
		    (long long)hi);
	rd_seterr(s, "%s: %s: unexpected reply: element %zu is out of"
	    " range (%lld): %s must be %s", node->name,
	    rd_call_name(node), k,
	    (long long)e[k]->integer, what, range);
	return -1;
}
