/*
 * table_entry.c: the entries of the decision table, each in the slot its
 * hash leads to (open addressing over the entry slots themselves, linear
 * probing from the home slot, keyed SipHash of policy slot and client):
 * lookup, insertion (expired entries reclaimed when full), removal
 * (backward shift), and the walks (a bitmap of the slots in use). Every
 * write is journaled first (table_mem.c).
 *
 * One page a decision: the entry is its own index slot, so a lookup
 * reads the home slot's entry and, in a run, the next ones, the hash
 * compared before the key; the home slot is known from the hash alone,
 * so the step touches the entry before it takes the lock
 * (tbl_prefetch), its address found without reading the table, and the
 * page's miss is paid outside the lock.
 *
 * Concurrency. Every lookup, insertion and removal runs under the
 * table's lock (table_mem.c), in every process: no probe ever runs
 * while another process inserts or removes, and the lock's acquire and
 * release order the entries' bytes between them. The only reads without
 * the lock are that touch's: relaxed atomic loads of the home slot's
 * bitmap word and entry, whose values nothing else uses (a writer may be changing it: no
 * decision depends on what they read). A step that holds a pointer to an
 * entry holds it only while it holds the lock and makes no removal
 * meanwhile: a removal moves the entries after it in their run
 * (tbl_remove), an insertion never moves one but may reclaim (remove)
 * expired ones first, so a step finds its entries again after one
 * (store_table.c). A holder killed mid-move is undone whole by the
 * journal, as any step.
 *
 * Nothing read from the file is trusted beyond the mapping: the home
 * slot is derived from the hash within the slots mapped; every run is
 * bounded by the slots mapped (a table with no unused slot was never
 * written so, and a lookup in it ends); counts past the capacity make a
 * full table. A slot is in use when its bit in the bitmap and its own
 * mark both say so (tbl_in_use): a slot whose bit is clear is not read,
 * so a group of slots whose blocks were never taken is never touched.
 *
 * A key longer than TBL_KEY_INLINE goes to a spill slot (taken from the
 * spill free list or its tail), which names its entry's slot; the entry
 * keeps the spill slot's number + 1 where its key would be, and a move
 * renames it. Every read of a key goes through tbl_key_at, which checks
 * the length, the spill slot's number and that it names the entry.
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
static uint64_t tbl_home(const struct tbl *t, uint64_t hash);
static uint64_t tbl_after(const struct tbl *t, uint64_t i);
static void tbl_mark(struct tbl *t, uint64_t i, bool on);
static int tbl_take_group(struct tbl *t, uint64_t i);
static bool tbl_in_use(const struct tbl *t, uint64_t i);
static uint64_t tbl_shift(struct tbl *t, uint64_t i, bool apply);
static void tbl_move(struct tbl *t, uint64_t from, uint64_t to);
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

/* The home slot of a hash: its top 32 bits scaled to the slots. */
static uint64_t
tbl_home(const struct tbl *t, uint64_t hash)
{
	return ((hash >> 32) * t->slots) >> 32;
}

/* The slot after i, the first after the last. */
static uint64_t
tbl_after(const struct tbl *t, uint64_t i)
{
	return i + 1 < t->slots ? i + 1 : 0;
}

/* Slot i's bit in map set or cleared. Journaled. */
static void
tbl_set_bit(struct tbl *t, uint64_t *map, uint64_t i, bool on)
{
	uint64_t *w = &map[i / 64], bit = UINT64_C(1) << (i % 64);
	uint64_t v = on ? *w | bit : *w & ~bit;

	if (v != *w)
		tbl_set_u64(t, w, v);
}

/* Slot i marked in use or not in the bitmap. Journaled. */
static void
tbl_mark(struct tbl *t, uint64_t i, bool on)
{
	tbl_set_bit(t, t->bitmap, i, on);
}

/*
 * Whether slot i holds an entry: its bit in the bitmap first, so that a
 * slot of a group never taken is not read (on tmpfs, reading a page of
 * the file that has no block takes one: on a full file system, SIGBUS),
 * then its own mark.
 */
static bool
tbl_in_use(const struct tbl *t, uint64_t i)
{
	return (t->bitmap[i / 64] >> (i % 64) & 1) != 0 && t->entries[i].used;
}

/*
 * The disk blocks of slot i's group of 64 slots (9 KiB), taken when the
 * group has no slot in use: its first entry. A group with one has them
 * (a bitmap word another hand wrote nonzero skips this: on a full file
 * system a write to that group could then fail as a page first written;
 * a hand that may write the file may do worse).
 */
static int
tbl_take_group(struct tbl *t, uint64_t i)
{
	uint64_t first = i / 64 * 64, n = t->slots - first;

	if (t->bitmap[i / 64] != 0)
		return 0;
	return tbl_take_blocks(t, (uint64_t)((unsigned char *)&t->entries[first]
	    - t->base), (n < 64 ? n : 64) * sizeof(struct tbl_entry));
}

struct tbl_entry *
tbl_find_hashed(struct tbl *t, int slot, uint64_t hash, const char *client)
{
	size_t len = strlen(client);
	struct tbl_entry *e;
	uint64_t i, probes;
	const char *k;

	if (len > TBL_CLIENT_MAX)
		return NULL;
	/* The run from the home slot to an unused one, the hash compared
	 * first; bounded: a table with no unused slot was never written
	 * so. */
	for (i = tbl_home(t, hash), probes = 0; probes < t->slots &&
	    tbl_in_use(t, i); i = tbl_after(t, i), probes++) {
		e = &t->entries[i];
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
 * Without the lock: the home slot's entry brought into the caches and
 * the TLB, from the hash alone, so that the lookup under the lock finds
 * it there. Loaded, not only hinted: a hint whose page misses the TLB
 * may be dropped (a virtual machine's shadow page tables drop it), and
 * a load waits for the page here, where no other step waits on this
 * one. Relaxed atomic loads, their values unused: a writer holding the
 * lock may be changing the entry.
 */
void
tbl_prefetch(const struct tbl *t, uint64_t hash)
{
	uint64_t home = tbl_home(t, hash), v;
	const struct tbl_entry *e = &t->entries[home];
	const unsigned char *last = (const unsigned char *)(e + 1) - 1;

	/* A group with no entry yet may have no blocks: not read (and
	 * nothing there to find). */
	if (__atomic_load_n(&t->bitmap[home / 64], __ATOMIC_RELAXED) == 0)
		return;
	/* An entry spans three lines at most, two pages: its first and
	 * last bytes are on both pages, the middle line is hinted. */
	v = __atomic_load_n(&e->hash, __ATOMIC_RELAXED) ^
	    __atomic_load_n(last, __ATOMIC_RELAXED);
	__builtin_prefetch((const char *)e + 64, 1);
	__asm__ volatile("" : : "r"(v));
}

struct tbl_entry *
tbl_insert(struct tbl *t, const char *policy, const char *client,
    int64_t now_ms, uint64_t max)
{
	struct tbl_header *h = t->h;
	size_t len = strlen(client);
	uint64_t hash, i, probes;
	struct tbl_spill *sp;
	struct tbl_entry *e;
	bool reclaimed = false;
	int slot;

	if (len > TBL_CLIENT_MAX ||
	    (slot = tbl_policy_slot(t, policy, true)) < 0)
		return NULL;
	while ((max > 0 && h->policies[slot].count >= max) ||
	    h->count >= t->capacity) {
		if (reclaimed || !tbl_reclaim(t, now_ms))
			return NULL;
		reclaimed = true;
	}
	hash = tbl_hash(t, (unsigned)slot, client, len);
	/* The first unused slot of the run: one is, unless the table was
	 * written by another hand (count < capacity < slots). */
	for (i = tbl_home(t, hash), probes = 0; tbl_in_use(t, i);
	    i = tbl_after(t, i))
		if (++probes >= t->slots)
			return NULL;
	/* A long key's slot before the entry: none is a full table. */
	if ((sp = tbl_spill_peek(t, len)) == NULL && len > TBL_KEY_INLINE)
		return NULL;
	if (tbl_take_group(t, i) != 0)
		return NULL;
	e = &t->entries[i];
	tbl_save(t, e, sizeof *e);
	memset(e, 0, sizeof *e);
	e->hash = hash;
	e->policy = (uint8_t)slot;
	e->client_len = (uint16_t)len;
	if (sp != NULL) {
		uint32_t ref = (uint32_t)(sp - t->spill) + 1;

		tbl_spill_take(t, sp, i);
		memcpy(sp->key, client, len);
		memcpy(e->client, &ref, sizeof ref);
	} else {
		memcpy(e->client, client, len);
	}
	e->used = 1;
	tbl_mark(t, i, true);
	tbl_set_bit(t, t->owing, i, false);
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

bool
tbl_sync_owes(const struct tbl_sync *y)
{
	return y->units[0] > 0 || y->units[1] > 0 || y->pull;
}

void
tbl_write_sync(struct tbl *t, struct tbl_entry *e, const struct tbl_sync *y)
{
	tbl_save(t, &e->sync, sizeof e->sync);
	e->sync = *y;
	tbl_set_bit(t, t->owing, (uint64_t)(e - t->entries), tbl_sync_owes(y));
}

/* The entry in slot from moved to slot to, with its spill slot's name.
 * Journaled. */
static void
tbl_move(struct tbl *t, uint64_t from, uint64_t to)
{
	struct tbl_entry *e = &t->entries[from];
	struct tbl_spill *sp;
	uint32_t ref;

	if (e->client_len > TBL_KEY_INLINE && tbl_key_at(t, e) != NULL) {
		memcpy(&ref, e->client, sizeof ref);
		sp = &t->spill[ref - 1];
		tbl_save(t, &sp->owner, sizeof sp->owner);
		sp->owner = (uint32_t)(to + 1);
	}
	tbl_save(t, &t->entries[to], sizeof *e);
	t->entries[to] = *e;
	tbl_set_bit(t, t->owing, to, (t->owing[from / 64] >> (from % 64) & 1)
	    != 0);
}

/*
 * Backward shift from the hole at slot i: each entry after it in the
 * run whose home is not in (hole, its slot] moves into the hole, which
 * moves to where it was; the last hole is left unused. With apply
 * false, nothing is written. The moves. Bounded by the slots (a run
 * with no end was never written so).
 */
static uint64_t
tbl_shift(struct tbl *t, uint64_t i, bool apply)
{
	uint64_t j, home, probes, moves = 0;

	for (j = tbl_after(t, i), probes = 1; probes < t->slots &&
	    tbl_in_use(t, j); j = tbl_after(t, j), probes++) {
		home = tbl_home(t, t->entries[j].hash);
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			if (apply)
				tbl_move(t, j, i);
			moves++;
			i = j;
		}
	}
	if (apply) {
		tbl_save(t, &t->entries[i], sizeof t->entries[i]);
		memset(&t->entries[i], 0, sizeof t->entries[i]);
		tbl_mark(t, i, false);
		tbl_set_bit(t, t->owing, i, false);
	}
	return moves;
}

/*
 * Takes e out of its slot (backward shift: no tombstones, so runs stay
 * as short as if it had never been put in). Not made, false, when its
 * moves would not fit in the journal (a run that long was never written
 * so by rlgate).
 */
bool
tbl_remove(struct tbl *t, struct tbl_entry *e)
{
	struct tbl_header *h = t->h;
	uint64_t at = (uint64_t)(e - t->entries);
	/* a move: the entry, its spill slot's owner and its word of the
	 * bitmap of those that owe, as records */
	size_t per = 3 * sizeof(struct tbl_undo) + sizeof *e + 16;

	if (at >= t->slots || !tbl_in_use(t, at) ||
	    !tbl_room(t, (tbl_shift(t, at, false) + 4) * per +
	    sizeof(struct tbl_spill)))
		return false;
	if (e->policy < TBL_POLICIES)
		tbl_set_u64(t, &h->policies[e->policy].count,
		    h->policies[e->policy].count - 1);
	tbl_set_u64(t, &h->count, h->count - 1);
	tbl_spill_free(t, e);
	(void)tbl_shift(t, at, true);
	return true;
}

/*
 * Frees up to TBL_RECLAIM_MAX expired entries among the next
 * TBL_RECLAIM_SCAN slots from the hand, while the journal is less than
 * half full. Whether it freed any.
 */
static bool
tbl_reclaim(struct tbl *t, int64_t now_ms)
{
	struct tbl_header *h = t->h;
	uint64_t k, i, start, freed = 0, extent = tbl_extent(t);
	struct tbl_entry *e;

	/* start + k < 2 x extent below: one subtraction wraps it */
	start = h->hand % extent;
	for (k = 0; k < TBL_RECLAIM_SCAN && k < extent &&
	    freed < TBL_RECLAIM_MAX && tbl_room(t, TBL_UNDO_BYTES / 2); k++) {
		i = start + k < extent ? start + k : start + k - extent;
		if ((e = tbl_at(t, i)) != NULL &&
		    e->st.expires_ms <= now_ms && tbl_remove(t, e))
			freed++;
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

	if (i >= t->slots)
		return NULL;
	e = &t->entries[i];
	if (!tbl_in_use(t, i) || tbl_key_at(t, e) == NULL ||
	    e->policy >= TBL_POLICIES)
		return NULL;
	return e;
}

uint64_t
tbl_extent(const struct tbl *t)
{
	return t->slots;
}

/* The first slot at or after i whose bit in map is set, or the slots. */
static uint64_t
tbl_next_in(const struct tbl *t, const uint64_t *map, uint64_t i)
{
	uint64_t w;

	if (i >= t->slots)
		return t->slots;
	w = map[i / 64] & (~UINT64_C(0) << (i % 64));
	while (w == 0) {
		i = (i / 64 + 1) * 64;
		if (i >= t->slots)
			return t->slots;
		w = map[i / 64];
	}
	i = i / 64 * 64 + (uint64_t)__builtin_ctzll(w);
	return i < t->slots ? i : t->slots;
}

uint64_t
tbl_next(const struct tbl *t, uint64_t i)
{
	return tbl_next_in(t, t->bitmap, i);
}

uint64_t
tbl_next_owing(const struct tbl *t, uint64_t i)
{
	return tbl_next_in(t, t->owing, i);
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
