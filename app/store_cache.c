/*
 * store_cache.c: the free rejected path. A store that wraps another one
 * (the SQLite store) and answers repeat rejections from memory.
 *
 * Why it is exact: a rejected request changes no state (rlg_store_step
 * writes only when every policy admits), so once every policy of a request
 * has rejected a client at t0, that client's state for those policies can
 * change only through an admission, and no admission is possible before
 * the earliest time one of them admits (its retry_ms): every other process
 * and thread finds the same state and rejects too. Until then the limiter,
 * run again on that unchanged state at t, gives the same absolute times:
 * reset_ms and retry_ms count down from t0's (next_ms is retry_ms, as for
 * every rejection), remaining stays 0. So the cache keeps, per request
 * (the same policies for the same clients, in order), the limit and the
 * absolute reset and retry instants of each decision, and answers from
 * them while t0 <= now < the earliest retry.
 *
 * What it caches: only steps in which every item rejected, none is
 * advisory and none has a ban (below). A request that only some of its policies reject goes to the
 * store: an admission through another route could make another of its
 * policies reject too, which would change the answer. Advisory items (dry
 * run, reported exemptions) go to the store so their decisions stay live.
 * Charges for a new key (if_new items) are left out of the step's identity
 * and of the test: a rejecting item has live state, so the charge after it
 * is skipped, which is what the cache answers for it (rlg_store_skipped).
 *
 * Request cost: only steps whose items all cost 1 are cached or answered.
 * A refusal of cost c > 1 says nothing of a later request of a smaller
 * cost, which may fit (a cached refusal of cost 5 must not refuse a
 * request of cost 1 with 2 units left), and its remaining (the units
 * still there) grows as the sliding algorithms decay, where a cost-1
 * refusal's stays 0. Keying the entries on the costs would be exact for
 * repeats of the same cost, but the remaining would still move: costly
 * requests go to the store every time.
 *
 * Bounds: a fixed table of entries per handle (one handle per worker
 * thread, so no locks), direct-mapped by a seeded FNV-1a hash of the key;
 * a new entry overwrites whatever held its slot. Keys longer than
 * RLG_CACHE_KEY_MAX and steps of more than RLG_CACHE_ITEMS_MAX items are
 * not cached. Nothing is allocated per request. Instants are now_ms plus
 * a delay, taken only when now_ms >= 0 and the sum fits an int64_t: a
 * delay no limiter gives (a store that was lied to) is passed on as the
 * store said it and not remembered, and every difference taken on a hit
 * (two instants >= 0) fits too.
 *
 * Limits per client (tiers): the gate may pass an item whose policy is a
 * copy of a configured one, with the same name (so the same state) but
 * other limits (struct rlg_limit: algorithm, limit, window_ms, burst).
 * The limits are part of the step's identity, compared on a hit: a
 * rejection under one set of limits never answers a request under
 * another (a client refused at a limit of 3 goes to the store, and is
 * admitted, once its item carries 6). The entry of the same policies and
 * clients is forgotten then, since the store may admit under the other
 * limits and so change the state the entry was exact for; what this
 * handle remembers stays exact. Another worker that admits the client
 * under other limits meanwhile (for the moment the workers disagree on
 * its tier, after the operator changed it) leaves an entry right about
 * the rejection: the state only took more quota, and an algorithm that
 * rejected a state rejects a fuller one until at least the same instant;
 * the instants the entry tells can be early, and the client asks again
 * sooner, where the store answers.
 *
 * A policy with a ban (the penalty box) is never cached: its refusals
 * write (the refusal count, the ban), so the store must see each one,
 * and a ban lasts far longer than a window, so a cached one would outlive
 * rlgate --reset by up to the ban's length.
 *
 * What it changes: a client reset by hand in the database (DELETE FROM
 * rlg_state) stays rejected by a worker that cached it until its retry
 * time, at most one window; [store] rejection_cache = 0 turns it off.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_cache.h"
#include "store_stats.h"
#include "util.h"

/* Per entry: the items of a cacheable step, and their key's bytes. */
#define RLG_CACHE_ITEMS_MAX 4
#define RLG_CACHE_KEY_MAX 320

struct cache_decision {
	struct rlg_limit lim;         /* the item's limits (see the top) */
	int64_t limit;
	int64_t reset_at_ms;          /* t0 + reset_ms */
	int64_t retry_at_ms;          /* t0 + retry_ms */
};

struct cache_entry {
	uint64_t hash;                /* 0: empty */
	int64_t since_ms;             /* t0: the store's rejection */
	int64_t until_ms;             /* the earliest retry: invalid from then */
	uint16_t n;                   /* items */
	uint16_t keylen;
	struct cache_decision d[RLG_CACHE_ITEMS_MAX];
	char key[RLG_CACHE_KEY_MAX];
};

struct cache_store {
	struct rlg_store_wrap w;      /* first: the store, and what it wraps */
	struct cache_entry *entries;  /* nentries, a power of two */
	size_t mask;
	uint64_t seed;
	uint64_t hits;                /* rejections answered from memory */
	uint64_t misses;              /* steps that went to the store */
	uint64_t stored;              /* rejections remembered */
};

static int cache_step(struct rlg_store *base,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions);
static void cache_close(struct rlg_store *base);
static void cache_stats(const struct rlg_store *base,
    struct rlg_store_stats *out);
static void cache_answer(const struct cache_entry *e,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions);
static bool cache_remember(struct cache_entry *e,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    const struct rlg_decision *decisions);
static size_t cache_key(const struct rlg_store_item *items, size_t n,
    char *key, size_t *m);
static bool cache_same_limits(const struct cache_entry *e,
    const struct rlg_store_item *items, size_t n);
static uint64_t cache_hash(uint64_t seed, const char *key, size_t len);
static int cache_reset(struct rlg_store *base, const char *client,
    const char *policy, int64_t *deleted);

const struct rlg_store_ops rlg_store_cache_ops = {
	.name = "rejection-cache",
	.open = NULL,           /* made by rlg_store_cache_wrap, not opened */
	.step = cache_step,
	.prune = rlg_store_pass_prune,
	.close = cache_close,
	.stats = cache_stats,
	.idle = rlg_store_pass_idle,
	.reset = cache_reset,
	.flush = rlg_store_pass_flush,
	.probe = rlg_store_pass_probe,
	.survey = rlg_store_pass_survey,
	.overrides = rlg_store_pass_overrides,
};

struct rlg_store *
rlg_store_cache_wrap(struct rlg_store *inner, int64_t entries)
{
	struct cache_store *c;
	size_t size = 1;

	if (inner == NULL || entries <= 0)
		return inner;
	while (size < (size_t)entries && size < ((size_t)1 << 24))
		size <<= 1;
	c = rlg_xcalloc(1, sizeof *c);
	c->w.base.ops = &rlg_store_cache_ops;
	c->w.inner = inner;
	c->w.mirror = true;
	c->entries = rlg_xcalloc(size, sizeof *c->entries);
	c->mask = size - 1;
	memcpy(c->w.base.errmsg, inner->errmsg, sizeof c->w.base.errmsg);
	/* Per handle, so nobody can aim keys at one slot from outside. */
	c->seed = 0xcbf29ce484222325u ^ (uint64_t)(uintptr_t)c ^
	    (uint64_t)rlg_now_ms() * 0x9e3779b97f4a7c15u;
	return &c->w.base;
}

static int
cache_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	struct cache_store *c = (struct cache_store *)base;
	struct cache_entry *e = NULL;
	char key[RLG_CACHE_KEY_MAX];
	size_t keylen = 0, m = 0;
	uint64_t h = 0;
	int rc;

	if (n >= 1 && items != NULL && decisions != NULL)
		keylen = cache_key(items, n, key, &m);
	if (keylen > 0) {
		h = cache_hash(c->seed, key, keylen);
		e = &c->entries[h & c->mask];
		if (e->hash == h && e->n == m && e->keylen == keylen &&
		    memcmp(e->key, key, keylen) == 0) {
			if (!cache_same_limits(e, items, n)) {
				/* Other limits: the store decides, and may
				 * admit (see the top). */
				e->hash = 0;
			} else if (now_ms >= e->since_ms &&
			    now_ms < e->until_ms) {
				cache_answer(e, items, n, now_ms, decisions);
				c->hits++;
				c->w.base.cached = true;
				return RLG_OK;
			}
		}
	}
	c->w.base.cached = false;
	c->misses++;
	/* The items were checked by rlg_store_step, for both of us. */
	rc = c->w.inner->ops->step(c->w.inner, items, n, now_ms, decisions);
	if (rc != RLG_OK) {
		memcpy(c->w.base.errmsg, c->w.inner->errmsg,
		    sizeof c->w.base.errmsg);
		return rc;
	}
	if (keylen == 0)
		return rc;
	if (cache_remember(e, items, n, now_ms, decisions)) {
		e->hash = h;
		e->n = (uint16_t)m;
		e->keylen = (uint16_t)keylen;
		memcpy(e->key, key, keylen);
		c->stored++;
	}
	return rc;
}

/*
 * A hit: the step's decisions from entry e at now_ms, as the store would
 * give them (see the top): each key item rejected with its limit and the
 * time left until the instants remembered, each charge skipped.
 */
static void
cache_answer(const struct cache_entry *e, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	size_t i, j;

	for (i = 0, j = 0; i < n; i++) {
		if (items[i].if_new) {
			rlg_store_skipped(items[i].policy, &decisions[i]);
			continue;
		}
		decisions[i].admitted = false;
		decisions[i].limit = e->d[j].limit;
		decisions[i].remaining = 0;
		decisions[i].reset_ms = e->d[j].reset_at_ms - now_ms;
		decisions[i].retry_ms = e->d[j].retry_at_ms - now_ms;
		/* Rejected: more quota is available when one is admitted. */
		decisions[i].next_ms = decisions[i].retry_ms;
		j++;
	}
}

/*
 * After a step the store answered at now_ms: when it is cacheable (every
 * key item rejected by the store, none advisory, and every instant
 * now_ms + delay representable: see the top), the instants of its
 * decisions into e, and true (the caller writes the key); else false and
 * e untouched.
 */
static bool
cache_remember(struct cache_entry *e, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, const struct rlg_decision *decisions)
{
	int64_t until;
	size_t i, j;

	if (now_ms < 0)
		return false;
	until = INT64_MAX;
	for (i = 0; i < n; i++) {
		if (items[i].if_new)
			continue;
		if (decisions[i].admitted || items[i].advisory ||
		    items[i].policy->lim.ban_ms > 0 ||
		    decisions[i].retry_ms <= 0 || decisions[i].reset_ms <= 0 ||
		    decisions[i].remaining != 0 ||
		    decisions[i].retry_ms > INT64_MAX - now_ms ||
		    decisions[i].reset_ms > INT64_MAX - now_ms)
			return false;
		if (now_ms + decisions[i].retry_ms < until)
			until = now_ms + decisions[i].retry_ms;
	}
	e->since_ms = now_ms;
	e->until_ms = until;
	for (i = 0, j = 0; i < n; i++) {
		if (items[i].if_new)
			continue;
		e->d[j].lim = items[i].policy->lim;
		e->d[j].limit = decisions[i].limit;
		e->d[j].reset_at_ms = now_ms + decisions[i].reset_ms;
		e->d[j].retry_at_ms = now_ms + decisions[i].retry_ms;
		j++;
	}
	return true;
}

/* Passed on; this handle forgets what it remembered (all of it: cheap,
 * and a reset is rare). */
static int
cache_reset(struct rlg_store *base, const char *client, const char *policy,
    int64_t *deleted)
{
	struct cache_store *c = (struct cache_store *)base;

	memset(c->entries, 0, (c->mask + 1) * sizeof *c->entries);
	return rlg_store_pass_reset(base, client, policy, deleted);
}

static void
cache_close(struct rlg_store *base)
{
	struct cache_store *c = (struct cache_store *)base;

	c->w.inner->ops->close(c->w.inner);
	free(c->entries);
	free(c);
}

/* Its own counters, and those of the store it wraps. */
static void
cache_stats(const struct rlg_store *base, struct rlg_store_stats *out)
{
	const struct cache_store *c = (const struct cache_store *)base;

	rlg_store_pass_stats(base, out);
	out->cache = true;
	out->cache_hits = c->hits;
	out->cache_misses = c->misses;
	out->cache_stored = c->stored;
}

/*
 * The step's identity, but for the limits of its items (kept in the
 * entry and compared on a hit: cache_same_limits): the policy name and
 * client of each item but the charges for a new key (*m of them, at most RLG_CACHE_ITEMS_MAX),
 * NUL-separated, into key (RLG_CACHE_KEY_MAX bytes). Returns its length,
 * or 0 when it does not fit, there are too many or none, an item lacks
 * a policy or client (the store says why), or an item costs more than 1
 * (see the top).
 */
static size_t
cache_key(const struct rlg_store_item *items, size_t n, char *key,
    size_t *m)
{
	size_t len = 0, a, b, i;

	*m = 0;
	for (i = 0; i < n; i++) {
		if (items[i].policy == NULL || items[i].policy->name == NULL ||
		    items[i].client == NULL || rlg_store_item_cost(&items[i]) != 1)
			return 0;
		if (items[i].if_new)
			continue;
		if (++*m > RLG_CACHE_ITEMS_MAX)
			return 0;
		a = strlen(items[i].policy->name) + 1;
		b = strlen(items[i].client) + 1;
		if (a + b > RLG_CACHE_KEY_MAX - len)
			return 0;
		memcpy(key + len, items[i].policy->name, a);
		len += a;
		memcpy(key + len, items[i].client, b);
		len += b;
	}
	return len;
}

/*
 * Whether the key items of a step (its charges for a new key left out, as
 * in the key) carry the limits entry e remembered, in order.
 */
static bool
cache_same_limits(const struct cache_entry *e,
    const struct rlg_store_item *items, size_t n)
{
	const struct rlg_limit *a, *b;
	size_t i, j;

	for (i = 0, j = 0; i < n; i++) {
		if (items[i].if_new)
			continue;
		a = &items[i].policy->lim;
		b = &e->d[j++].lim;
		if (a->algorithm != b->algorithm || a->limit != b->limit ||
		    a->window_ms != b->window_ms || a->burst != b->burst)
			return false;
	}
	return true;
}

/* FNV-1a, seeded; never 0 (0 marks an empty slot). */
static uint64_t
cache_hash(uint64_t seed, const char *key, size_t len)
{
	uint64_t h = seed;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)key[i];
		h *= 0x100000001b3u;
	}
	return h != 0 ? h : 1;
}
