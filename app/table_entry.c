/*
 * table_entry.c: the entries of the decision table and its index (open
 * addressing, linear probing, keyed SipHash of policy slot and client):
 * lookup, insertion (the free list, the unused tail, expired entries
 * reclaimed), removal, and the walks. Every write is journaled first
 * (table_mem.c).
 *
 * A key longer than TBL_KEY_INLINE goes to a spill slot (taken from the
 * spill free list or its tail, as entries are), which names its entry;
 * the entry keeps the slot's number + 1 where its key would be. Every
 * read of a key goes through tbl_key_at, which checks the length, the
 * slot's number and that the slot names the entry.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "table_entry.h"
#include "table_mem_priv.h"

static uint64_t tbl_hash(const struct tbl *t, unsigned policy,
    const char *client, size_t len);
static int tbl_policy_slot(struct tbl *t, const char *policy, bool add);
static bool tbl_reclaim(struct tbl *t, int64_t now_ms);
static const char *tbl_key_at(const struct tbl *t,
    const struct tbl_entry *e);
static struct tbl_spill *tbl_spill_peek(struct tbl *t, size_t len);
static void tbl_spill_take(struct tbl *t, struct tbl_spill *sp, uint64_t at);
static void tbl_spill_free(struct tbl *t, struct tbl_entry *e);

/*
 * The client_len bytes of e's key, or NULL when e holds no sound one: a
 * length past TBL_CLIENT_MAX, a spill slot past the area or not e's.
 */
static const char *
tbl_key_at(const struct tbl *t, const struct tbl_entry *e)
{
	uint64_t at = (uint64_t)(e - t->entries);
	const struct tbl_spill *sp;
	uint32_t ref;

	if (e->client_len <= TBL_KEY_INLINE)
		return e->client;
	if (e->client_len > TBL_CLIENT_MAX)
		return NULL;
	memcpy(&ref, e->client, sizeof ref);
	if (ref == 0 || ref > t->spills)
		return NULL;
	sp = &t->spill[ref - 1];
	return sp->owner == at + 1 ? sp->key : NULL;
}

int
tbl_client(const struct tbl *t, const struct tbl_entry *e, char *out)
{
	const char *k = tbl_key_at(t, e);

	out[0] = '\0';
	if (k == NULL || memchr(k, '\0', e->client_len) != NULL)
		return -1;
	memcpy(out, k, e->client_len);
	out[e->client_len] = '\0';
	return e->client_len;
}

/*
 * The spill slot a key of len bytes would take (NULL for a key that fits
 * the entry): the free list's first (a list that was never written so
 * is dropped, its slots lost until the table is built again), else the
 * tail's, its blocks taken. NULL too when there is none (the caller
 * tells by len).
 */
static struct tbl_spill *
tbl_spill_peek(struct tbl *t, size_t len)
{
	struct tbl_header *h = t->h;
	uint64_t n = h->spill_extent;
	struct tbl_spill *sp;

	if (len <= TBL_KEY_INLINE)
		return NULL;
	if (h->spill_free != 0 && (h->spill_free > t->spills ||
	    t->spill[h->spill_free - 1].owner != 0))
		tbl_set_u64(t, &h->spill_free, 0);
	if (h->spill_free != 0)
		return &t->spill[h->spill_free - 1];
	if (n >= t->spills)
		return NULL;
	sp = &t->spill[n];
	if (tbl_take_blocks(t, (uint64_t)((unsigned char *)sp - t->base),
	    sizeof *sp) != 0)
		return NULL;
	return sp;
}

/* Takes sp (tbl_spill_peek's) for entry at. Journaled. */
static void
tbl_spill_take(struct tbl *t, struct tbl_spill *sp, uint64_t at)
{
	struct tbl_header *h = t->h;
	uint64_t n = (uint64_t)(sp - t->spill);

	if (h->spill_free == n + 1)
		tbl_set_u64(t, &h->spill_free, sp->next);
	else
		tbl_set_u64(t, &h->spill_extent, n + 1);
	tbl_save(t, sp, sizeof *sp);
	memset(sp, 0, sizeof *sp);
	sp->owner = (uint32_t)(at + 1);
}

/* Frees e's spill slot, if it has one of its own. Journaled. */
static void
tbl_spill_free(struct tbl *t, struct tbl_entry *e)
{
	struct tbl_spill *sp;
	uint32_t ref;

	if (e->client_len <= TBL_KEY_INLINE || tbl_key_at(t, e) == NULL)
		return;
	memcpy(&ref, e->client, sizeof ref);
	sp = &t->spill[ref - 1];
	tbl_save(t, sp, offsetof(struct tbl_spill, key));
	sp->owner = 0;
	sp->next = t->h->spill_free;
	tbl_set_u64(t, &t->h->spill_free, ref);
}

/* Keyed SipHash of the policy slot and the client key. */
static uint64_t
tbl_hash(const struct tbl *t, unsigned policy, const char *client,
    size_t len)
{
	unsigned char in[1 + TBL_CLIENT_MAX], out[crypto_shorthash_BYTES];
	uint64_t v;

	in[0] = (unsigned char)policy;
	memcpy(in + 1, client, len);
	crypto_shorthash(out, in, 1 + len, t->hash_key);
	memcpy(&v, out, sizeof v);
	return v;
}

/* The slot of a policy name, added when add; -1 if none (or full). */
static int
tbl_policy_slot(struct tbl *t, const char *policy, bool add)
{
	struct tbl_policy *p;
	int i, spare = -1;

	if (strlen(policy) > TBL_POLICY_MAX)
		return -1;
	for (i = 0; i < TBL_POLICIES; i++) {
		p = &t->h->policies[i];
		if (p->used && strncmp(p->name, policy, sizeof p->name) == 0)
			return i;
		if (spare < 0 && (!p->used || p->count == 0))
			spare = i;
	}
	if (!add || spare < 0)
		return -1;
	/* A name without entries (a policy the config dropped) makes room. */
	p = &t->h->policies[spare];
	tbl_save(t, p, sizeof *p);
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "%s", policy);
	p->used = 1;
	return spare;
}

struct tbl_entry *
tbl_find(struct tbl *t, const char *policy, const char *client)
{
	size_t len = strlen(client);
	int slot;

	if (len > TBL_CLIENT_MAX || (slot = tbl_policy_slot(t, policy,
	    false)) < 0)
		return NULL;
	return tbl_find_hashed(t, slot, tbl_key_hash(t, slot, client),
	    client);
}

struct tbl_entry *
tbl_find_hashed(struct tbl *t, int slot, uint64_t hash, const char *client)
{
	uint64_t mask = t->slots - 1, i, probes;
	size_t len = strlen(client);
	struct tbl_entry *e;
	const char *k;
	uint32_t at;

	if (len > TBL_CLIENT_MAX)
		return NULL;
	/* Bounded: an index with no free slot was never written so. */
	for (i = hash & mask, probes = 0; probes < t->slots &&
	    (at = t->index[i]) != 0; i = (i + 1) & mask, probes++) {
		if (at > t->capacity)
			return NULL;  /* never written so; not trusted */
		e = &t->entries[at - 1];
		if (e->hash == hash && e->policy == slot &&
		    e->client_len == len && (k = tbl_key_at(t, e)) != NULL &&
		    memcmp(k, client, len) == 0)
			return e;
	}
	return NULL;
}

int
tbl_slot(struct tbl *t, const char *policy)
{
	return tbl_policy_slot(t, policy, false);
}

uint64_t
tbl_key_hash(const struct tbl *t, int slot, const char *client)
{
	size_t len = strnlen(client, TBL_CLIENT_MAX + 1);

	return tbl_hash(t, (unsigned)slot, client,
	    len > TBL_CLIENT_MAX ? TBL_CLIENT_MAX : len);
}

/*
 * A hint only: the index slot of hash and the entry it names now, read
 * without the lock (a relaxed atomic load; a writer may change it at any
 * moment, and nothing but the cache depends on what it reads).
 */
void
tbl_prefetch(const struct tbl *t, uint64_t hash)
{
	uint64_t i = hash & (t->slots - 1);
	uint32_t at;

	at = __atomic_load_n(&t->index[i], __ATOMIC_RELAXED);
	if (at != 0 && at <= t->capacity)
		__builtin_prefetch(&t->entries[at - 1]);
}

struct tbl_entry *
tbl_insert(struct tbl *t, const char *policy, const char *client,
    int64_t now_ms, uint64_t max)
{
	struct tbl_header *h = t->h;
	size_t len = strlen(client);
	uint64_t hash, mask = t->slots - 1, i, at, probes;
	struct tbl_spill *sp;
	struct tbl_entry *e;
	bool reclaimed = false;
	int slot;

	if (len > TBL_CLIENT_MAX ||
	    (slot = tbl_policy_slot(t, policy, true)) < 0)
		return NULL;
	/* A free list that was never written so is dropped, not followed
	 * (its entries are lost until the table is built again). */
	if (h->free_head != 0 && (h->free_head > t->capacity ||
	    t->entries[h->free_head - 1].used))
		tbl_set_u64(t, &h->free_head, 0);
	while ((max > 0 && h->policies[slot].count >= max) ||
	    (h->free_head == 0 && h->extent >= t->capacity)) {
		if (reclaimed || !tbl_reclaim(t, now_ms))
			return NULL;
		reclaimed = true;
	}
	hash = tbl_hash(t, (unsigned)slot, client, len);
	/* The index slot first: one is free unless the index was written
	 * by another hand (count <= capacity, slots >= 2 x capacity). */
	for (i = hash & mask, probes = 0; t->index[i] != 0;
	    i = (i + 1) & mask)
		if (++probes >= t->slots)
			return NULL;
	/* A long key's slot before the entry: none is a full table. */
	if ((sp = tbl_spill_peek(t, len)) == NULL && len > TBL_KEY_INLINE)
		return NULL;
	if (h->free_head != 0) {
		at = h->free_head - 1;
		e = &t->entries[at];
		/* A free entry keeps the next free one in its hash. */
		tbl_set_u64(t, &h->free_head, e->hash);
	} else {
		at = h->extent;
		if (tbl_reserve(t, at + 1) != 0)
			return NULL;
		e = &t->entries[at];
		tbl_set_u64(t, &h->extent, at + 1);
	}
	tbl_save(t, e, sizeof *e);
	memset(e, 0, sizeof *e);
	e->hash = hash;
	e->policy = (uint8_t)slot;
	e->client_len = (uint16_t)len;
	if (sp != NULL) {
		uint32_t ref = (uint32_t)(sp - t->spill) + 1;

		tbl_spill_take(t, sp, at);
		memcpy(sp->key, client, len);
		memcpy(e->client, &ref, sizeof ref);
	} else {
		memcpy(e->client, client, len);
	}
	e->used = 1;
	tbl_save(t, &t->index[i], sizeof t->index[i]);
	t->index[i] = (uint32_t)(at + 1);
	tbl_set_u64(t, &h->count, h->count + 1);
	tbl_set_u64(t, &h->policies[slot].count, h->policies[slot].count + 1);
	return e;
}

void
tbl_write(struct tbl *t, struct tbl_entry *e, const struct rlg_state *st)
{
	tbl_save(t, &e->st, sizeof e->st + sizeof e->seq);
	e->st = *st;
	e->seq++;
}

/*
 * Takes e out of the index (backward-shift deletion: no tombstones, so
 * probes stay short) and puts it on the free list.
 */
void
tbl_remove(struct tbl *t, struct tbl_entry *e)
{
	struct tbl_header *h = t->h;
	uint64_t mask = t->slots - 1, i, j, home, at, probes;
	uint32_t x;

	at = (uint64_t)(e - t->entries);
	for (i = e->hash & mask, probes = 0; t->index[i] != at + 1;
	    i = (i + 1) & mask)
		if (t->index[i] == 0 || ++probes >= t->slots)
			return;       /* not in the index */
	for (j = (i + 1) & mask, probes = 0; (x = t->index[j]) != 0 &&
	    ++probes < t->slots; j = (j + 1) & mask) {
		/* An index entry never written so stays where it is. */
		home = x <= t->capacity ? t->entries[x - 1].hash & mask : j;
		/* Move j into the hole at i unless its home lies in (i, j]. */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			tbl_save(t, &t->index[i], sizeof t->index[i]);
			t->index[i] = t->index[j];
			i = j;
		}
	}
	tbl_save(t, &t->index[i], sizeof t->index[i]);
	t->index[i] = 0;
	if (e->policy < TBL_POLICIES)
		tbl_set_u64(t, &h->policies[e->policy].count,
		    h->policies[e->policy].count - 1);
	tbl_set_u64(t, &h->count, h->count - 1);
	tbl_spill_free(t, e);
	tbl_save(t, e, sizeof e->hash + sizeof e->st + 2 * sizeof e->seq +
	    sizeof e->client_len + sizeof e->policy + sizeof e->used);
	e->used = 0;
	e->hash = h->free_head;
	tbl_set_u64(t, &h->free_head, at + 1);
}

/*
 * Frees up to TBL_RECLAIM_MAX expired entries among the next
 * TBL_RECLAIM_SCAN from the hand. Whether it freed any.
 */
static bool
tbl_reclaim(struct tbl *t, int64_t now_ms)
{
	struct tbl_header *h = t->h;
	uint64_t k, i, start, freed = 0, extent = tbl_extent(t);
	struct tbl_entry *e;

	if (extent == 0)
		return false;
	/* start + k < 2 x extent below: one subtraction wraps it */
	start = h->hand % extent;
	for (k = 0; k < TBL_RECLAIM_SCAN && k < extent &&
	    freed < TBL_RECLAIM_MAX; k++) {
		i = start + k < extent ? start + k : start + k - extent;
		if ((e = tbl_at(t, i)) != NULL &&
		    e->st.expires_ms <= now_ms) {
			tbl_remove(t, e);
			freed++;
		}
	}
	tbl_set_u64(t, &h->hand, start + k < extent ? start + k :
	    start + k - extent);
	return freed > 0;
}

const char *
tbl_policy(const struct tbl *t, const struct tbl_entry *e)
{
	const char *name = tbl_policy_at(t, e->policy);

	return name != NULL ? name : "";
}

const char *
tbl_policy_at(const struct tbl *t, int slot)
{
	const struct tbl_policy *p;

	if (slot < 0 || slot >= TBL_POLICIES)
		return NULL;
	p = &t->h->policies[slot];
	/* A name is terminated where it was written; else not trusted. */
	if (!p->used || memchr(p->name, '\0', sizeof p->name) == NULL)
		return NULL;
	return p->name;
}

/* Entry i, used and whole (a policy slot and a key it can hold). */
struct tbl_entry *
tbl_at(struct tbl *t, uint64_t i)
{
	struct tbl_entry *e;

	if (i >= tbl_extent(t))
		return NULL;
	e = &t->entries[i];
	if (!e->used || tbl_key_at(t, e) == NULL ||
	    e->policy >= TBL_POLICIES)
		return NULL;
	return e;
}

/* The header's extent, never past the capacity mapped. */
uint64_t
tbl_extent(const struct tbl *t)
{
	uint64_t n = t->h->extent;

	return n < t->capacity ? n : t->capacity;
}

uint64_t
tbl_count(const struct tbl *t)
{
	return t->h->count;
}

uint64_t
tbl_capacity(const struct tbl *t)
{
	return t->capacity;
}
