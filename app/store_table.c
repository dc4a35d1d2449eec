/*
 * store_table.c: [store] commit = behind. The decisions of every process
 * and thread of a host are made in one table in shared memory (table.c),
 * and the SQLite store is written behind.
 *
 * A step takes the table's lock, reads each item's entry, runs the pure
 * limiter on it and, only when every enforcing item admits, writes the
 * new states, journaled, and unlocks: exact across processes and threads
 * and all or nothing across the policies of a request, as the SQLite
 * transaction is, at the cost of a mutex instead of a commit.
 *
 * Behind: store_table_flush.c writes the changed entries to the
 * database, by one flusher thread per process, every flush_ms.
 *
 * The table outlives the processes (it is a file): a restart loses
 * nothing. It is the authority: a process whose configuration asks for
 * another size adopts the live table's size (logged, naming both), so
 * two configurations on one database share one table and its counts; a
 * database deleted or replaced is given the table's states whole by the
 * next flush (tbl_rebind, under the flush lock, so that no flush marks
 * an entry flushed into a file the table is no longer bound to). A
 * table file the path no longer names while processes map it (removed,
 * or hidden by a file system mounted over its directory) is carried by
 * the next flush into the table the path names (tab_move), so that a
 * process that opens the path later, such as an rlgate --reset, shares
 * the counts. Only a reboot (or a table file removed while no process
 * maps it) builds it again from the database's live states: what was
 * not flushed, at most one interval, is lost, as a power cut loses the
 * last commits with synchronous = normal.
 *
 * sliding_log keeps its log in the database (a state of variable size):
 * the config does not let commit = behind apply to a config that has a
 * sliding_log policy, and a step with one is refused here (RLG_EINVAL).
 */
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "store.h"
#include "store_table.h"
#include "store_table_flush.h"
#include "store_table_sync.h"
#include "store_stats.h"
#include "table.h"
#include "util.h"

/* Policies whose table slot a handle remembers. */
#define TAB_SLOTS 16
/* A worker's handle. */
struct tab_store {
	struct rlg_store_wrap w;      /* first: the store, and the SQLite
	                               * store it wraps */
	struct tab_flusher *f;
	struct tbl *t;                /* this handle's mapping, or NULL */
	bool sync;                    /* local+global: the inner store is
	                               * shared (store_table_sync.c) */
	bool may_pull;                /* this decide may ask for tab_pull */
	bool pull_failed;             /* the last tab_pull could not read */
	int64_t stale_ms;             /* sync: a state older is read again
	                               * before a decision (2 x sync_ms) */
	struct tab_sb *sb;            /* its sync buffers (rlg_store_flush) */
	uint64_t capacity;            /* what the config asks (the table's
	                               * may differ: tbl_capacity) */
	int64_t max_clients;
	int64_t table_entries;
	/* Step scratch, one per item: its new state, or skipped. */
	struct tab_item {
		struct rlg_state out;
		struct tbl_entry *e;      /* its entry found when decided */
		uint64_t hash;            /* of (slot, client), before the lock */
		int slot;                 /* the policy's slot it assumed; -1 */
		bool skip;
		bool refusal;             /* refused, and a ban counted it:
		                           * written all the same */
		bool pull;                /* sync: new here, read from the
		                           * shared store first */
	} *scratch;
	/*
	 * The table's slot of each policy seen, so that a step hashes its
	 * keys and prefetches their entries before it takes the lock (what
	 * the lock then holds is the lookups, not the hashing and the cache
	 * misses). A hint, by the policy's address, never dereferenced:
	 * under the lock tab_find takes the slot of the item's policy by
	 * its name and hashes again when the hint was another. So an
	 * address that now holds another policy (the gate frees its tier
	 * copies of the policies, which share their names and states but
	 * not their limits, and makes new ones when the tiers change)
	 * costs a hash, never a wrong slot; the limits are always the
	 * item's own.
	 */
	struct tab_slot {
		const struct rlg_policy *policy;
		int slot;
	} slots[TAB_SLOTS];
	size_t nscratch;
	char path[];                  /* the table file */
};

static int tab_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static void tab_close(struct rlg_store *base);
static void tab_stats(const struct rlg_store *base, struct rlg_store_stats *out);
static int tab_reset(struct rlg_store *base, const char *client,
    const char *policy, int64_t *deleted);
static int tab_ready(struct tab_store *s);
static void tab_prehash(struct tab_store *s,
    const struct rlg_store_item *items, size_t n);
static struct tbl_entry *tab_find(struct tab_store *s,
    const struct rlg_store_item *item, struct tab_item *x);
static int tab_no_entry(struct tab_store *s,
    const struct rlg_store_item *item, int err);
static int tab_decide(struct tab_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions, bool *admit);
static int tab_write_states(struct tab_store *s,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    const struct rlg_decision *decisions, bool admit);
static int tab_lock_ready(struct tab_store *s,
    const struct rlg_store_item *items, size_t n);
static int tab_pull(struct tab_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms);
static void tab_wrote(struct tab_store *s, struct tbl_entry *e,
    const struct rlg_store_item *item, const struct rlg_state *out,
    int64_t now_ms);
static void tab_refused(struct tab_store *s, size_t n);

/* tab_decide: some items are new here and their state is in the shared
 * store (read it first: tab_pull). */
#define TAB_PULL 1
static int tab_flush_now(struct rlg_store *base, int64_t now_ms);
static int tab_probe(struct rlg_store *base, int64_t now_ms);

const struct rlg_store_ops rlg_store_table_ops = {
	.name = "table",
	.open = NULL,           /* made by rlg_store_table_wrap */
	.step = tab_step,
	.prune = rlg_store_pass_prune,  /* the database's expired rows; the
	                                 * table frees its own when it
	                                 * flushes */
	.close = tab_close,
	.stats = tab_stats,
	.idle = rlg_store_pass_idle,
	.reset = tab_reset,
	.flush = tab_flush_now,
	.probe = tab_probe,
	.survey = rlg_store_pass_survey,  /* the database's, as of the last
	                                   * flush */
	.overrides = rlg_store_pass_overrides,  /* the database's: the
	                                         * table holds none */
};

/* A handle of this process logged that it adopted another size. */
static bool tab_told_size;

const char *
rlg_store_table_path(const char *path, char *buf, size_t size)
{
	snprintf(buf, size, "%s-table", path != NULL ? path : "");
	return buf;
}

int
rlg_store_table_wrap(struct rlg_store *inner,
    const struct rlg_store_config *cfg, struct rlg_store **out)
{
	struct tab_store *s;
	char path[4200];
	int rc;

	rlg_store_table_path(cfg->sqlite.path, path, sizeof path);
	s = rlg_xcalloc(1, sizeof *s + strlen(path) + 1);
	memcpy(s->path, path, strlen(path) + 1);
	s->w.base.ops = &rlg_store_table_ops;
	s->w.inner = inner;
	s->w.mirror = false;
	s->sync = inner->ops->sync != NULL;
	s->stale_ms = 2 * (cfg->sync_ms > 0 ? cfg->sync_ms :
	    TAB_SYNC_MS_DEFAULT);
	s->max_clients = cfg->sqlite.max_clients;
	s->table_entries = cfg->sqlite.table_entries;
	s->capacity = cfg->sqlite.table_entries > 0 ?
	    (uint64_t)cfg->sqlite.table_entries :
	    (uint64_t)(s->max_clients > 0 ? s->max_clients : 250000) * 4;
	snprintf(s->w.base.errmsg, sizeof s->w.base.errmsg, "no error");
	*out = &s->w.base;
	/*
	 * Open now, so a start-up with a broken table says so at once; and
	 * before the flusher starts, so that a database file this start
	 * makes is made by the handle that builds the table from it: were
	 * the flusher's connection first, its first flush would take the
	 * table for one of an older file and build it again, losing the
	 * decisions made meanwhile.
	 */
	rc = tab_ready(s) == 0 ? RLG_OK : RLG_ESTORE;
	s->f = tab_flusher_join(cfg, inner->ops, s->path, s->capacity);
	return rc;
}

/*
 * The handle's table mapped and current (opened again when another
 * process replaced it): 0, or -1 with errmsg set.
 */
static int
tab_ready(struct tab_store *s)
{
	char err[RLG_STORE_ERRMSG_MAX];

	if (s->t != NULL && !tbl_retired(s->t))
		return 0;
	tbl_close(s->t);
	s->t = tab_open_table(s->w.inner, s->path, s->capacity, err,
	    sizeof err);
	if (s->t == NULL) {
		rlg_store_seterr(&s->w.base, "%s", err);
		return -1;
	}
	/* Once a process: its threads' handles all adopt the same. */
	if (tbl_capacity(s->t) != s->capacity &&
	    !__atomic_exchange_n(&tab_told_size, true, __ATOMIC_RELAXED)) {
		rlg_log("table %s: warning: the live table holds %llu entries,"
		    " this configuration asks for %llu (max_clients = %lld,"
		    " table_entries = %lld): another configuration made it"
		    " and a process has it open; this one adopts it, so both"
		    " share its counts (max_clients still bounds each policy"
		    " of this configuration); it is resized when no process"
		    " has it open", s->path,
		    (unsigned long long)tbl_capacity(s->t),
		    (unsigned long long)s->capacity, (long long)s->max_clients,
		    (long long)s->table_entries);
	}
	return 0;
}

static int
tab_step(struct rlg_store *base, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions)
{
	struct tab_store *s = (struct tab_store *)base;
	bool admit;
	size_t i;
	int rc, tries;

	for (i = 0; i < n; i++) {
		if (rlg_limiter_keeps_log(&items[i].policy->lim)) {
			rlg_store_seterr(base, "store step: policy \"%s\" is a"
			    " %s, which commit = behind does not"
			    " keep", items[i].policy->name,
			    rlg_algorithm_name(items[i].policy->lim.algorithm));
			return RLG_EINVAL;
		}
	}
	if (n > s->nscratch) {
		free(s->scratch);
		s->nscratch = n;
		s->scratch = rlg_xcalloc(n, sizeof *s->scratch);
	}
	for (i = 0; i < n; i++)
		s->scratch[i].pull = false;
	s->pull_failed = false;
	for (tries = 0;; tries++) {
		if ((rc = tab_lock_ready(s, items, n)) != RLG_OK)
			return rc;
		s->may_pull = s->sync && tries == 0;
		rc = tab_decide(s, items, n, now_ms, decisions, &admit);
		if (rc != TAB_PULL || tries > 0)
			break;
		/* nothing written yet: the new clients' state read, once */
		tbl_unlock(s->t);
		s->pull_failed = tab_pull(s, items, n, now_ms) != RLG_OK;
	}
	if (rc != RLG_OK) {
		tbl_abort(s->t);
		return rc;
	}
	tbl_unlock(s->t);
	return RLG_OK;
}

/*
 * The table ready and locked, each item hashed before: RLG_OK, or
 * RLG_ESTORE (errmsg set). A table retired while this step waited for its
 * lock (its entries carried into another, tab_move): the step is decided
 * on the one that has them.
 */
static int
tab_lock_ready(struct tab_store *s, const struct rlg_store_item *items,
    size_t n)
{
	int tries;

	for (tries = 0;; tries++) {
		if (tab_ready(s) != 0)
			return RLG_ESTORE;
		tab_prehash(s, items, n);
		if (tbl_lock(s->t) != 0) {
			rlg_store_seterr(&s->w.base, "table %s: its lock is"
			    " unusable; the table is built again", s->path);
			tbl_retire(s->t);
			return RLG_ESTORE;
		}
		if (!tbl_retired(s->t) || tries == 2)
			return RLG_OK;
		tbl_unlock(s->t);
	}
}

/*
 * Local+global: the items new here or not synced for long (scratch pull)
 * read from the shared store, without the lock; their entries get the
 * global state (with what they owe merged), a new one only when the
 * store has a state (a client another host, or this one before its table
 * was built, has counted). RLG_OK, or RLG_ESTORE (errmsg set): the store
 * cannot be read; the step decides the clients the table holds from it,
 * and a new one gets on_error.
 */
static int
tab_pull(struct tab_store *s, const struct rlg_store_item *items, size_t n,
    int64_t now_ms)
{
	struct rlg_sync_item *it = rlg_xcalloc(n, sizeof *it);
	struct rlg_state *global = rlg_xcalloc(n, sizeof *global);
	struct tbl_entry *e;
	size_t i, m = 0;
	int rc;

	for (i = 0; i < n; i++)
		if (s->scratch[i].pull)
			it[m++] = (struct rlg_sync_item){ .policy =
			    items[i].policy, .client = items[i].client };
	rc = rlg_store_sync(s->w.inner, it, m, now_ms, global);
	if (rc != RLG_OK)
		rlg_store_seterr(&s->w.base, "%s", s->w.inner->errmsg);
	if (rc == RLG_OK && tbl_lock(s->t) != 0)
		rc = RLG_ESTORE;
	for (i = 0; rc == RLG_OK && i < m; i++) {
		e = tbl_find(s->t, it[i].policy->name, it[i].client);
		if (e == NULL && global[i].expires_ms > now_ms) {
			e = tbl_insert(s->t, it[i].policy->name,
			    it[i].client, now_ms, s->max_clients > 0 ?
			    (uint64_t)s->max_clients : 0);
			if (e != NULL)
				tbl_write_sync(s->t, e, &(struct tbl_sync){
				    .lim = it[i].policy->lim });
		}
		/* none: the step says why, if it must */
		if (e != NULL)
			tab_settle(s->t, e, &global[i], now_ms);
		tbl_commit(s->t);
	}
	if (rc == RLG_OK)
		tbl_unlock(s->t);
	free(it);
	free(global);
	return rc == RLG_OK ? RLG_OK : RLG_ESTORE;
}

/*
 * Under the lock, after e got out: local+global, e owes the units the
 * item admitted, in its window, under the item's limits.
 */
static void
tab_wrote(struct tab_store *s, struct tbl_entry *e,
    const struct rlg_store_item *item, const struct rlg_state *out,
    int64_t now_ms)
{
	struct tbl_sync y;

	if (!s->sync)
		return;
	y = e->sync;
	y.lim = item->policy->lim;
	/* made now, after its pull found nothing (tab_pull) */
	if (y.synced_ms == 0)
		y.synced_ms = now_ms;
	tab_owe(&y, rlg_store_item_cost(item), out->window_start_ms);
	tbl_write_sync(s->t, e, &y);
}

/*
 * Under the lock, a request refused: local+global, the entries it met ask
 * for the global state at the next sync (a reset, or a window another
 * host saw pass, reaches a client this host only refuses).
 */
static void
tab_refused(struct tab_store *s, size_t n)
{
	struct tbl_entry *e;
	struct tbl_sync y;
	size_t i;

	if (!s->sync)
		return;
	for (i = 0; i < n; i++) {
		e = s->scratch[i].skip ? NULL : s->scratch[i].e;
		if (e == NULL || e->sync.pull)
			continue;
		y = e->sync;
		y.pull = 1;
		tbl_write_sync(s->t, e, &y);
	}
}

/*
 * The store's error when a new client got no entry (tbl_insert's NULL,
 * err its errno): RLG_ESTORE (no room on the file system) or RLG_EFULL.
 */
static int
tab_no_entry(struct tab_store *s, const struct rlg_store_item *item, int err)
{
	char why[64] = "";

	if (err != 0) {
		rlg_store_seterr(&s->w.base, "table %s: no room for new"
		    " clients on its file system: %s", s->path,
		    strerror(err));
		return RLG_ESTORE;
	}
	if (strlen(item->client) > TBL_KEY_INLINE)
		snprintf(why, sizeof why, " (a key over %d bytes: or its slots"
		    " of long keys)", TBL_KEY_INLINE);
	rlg_store_seterr(&s->w.base, "store full: policy \"%s\" holds state"
	    " for max_clients = %lld clients, or the table its %llu"
	    " entries%s; new clients are refused until states expire",
	    item->policy->name, (long long)s->max_clients,
	    (unsigned long long)tbl_capacity(s->t), why);
	return RLG_EFULL;
}

/*
 * Under the lock: every item decided, then, if the request is admitted,
 * every admitted item's state written, and the refusals a ban counted
 * (tab_write_states). RLG_OK,
 * RLG_EINVAL (a policy the limiter refuses), RLG_EFULL or RLG_ESTORE;
 * TAB_PULL (local+global): an item's state is to be read from the shared
 * store first, nothing written. The caller ends or plays back the
 * journal.
 */
static int
tab_decide(struct tab_store *s, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions, bool *admit)
{
	static const struct rlg_state fresh;
	const struct rlg_state *in;
	struct tbl_entry *e;
	bool live_prev = false, pull = false;
	size_t i, j;

	*admit = true;
	for (i = 0; i < n; i++) {
		/* A charge for a new key, and the key is not new. */
		s->scratch[i].skip = items[i].if_new && live_prev;
		if (s->scratch[i].skip) {
			rlg_store_skipped(items[i].policy, &decisions[i]);
			continue;
		}
		/* The same (policy, client) earlier: its new state counts. */
		in = NULL;
		s->scratch[i].e = NULL;
		for (j = i; j-- > 0 && in == NULL; )
			if (!s->scratch[j].skip &&
			    strcmp(items[j].policy->name, items[i].policy->name) == 0 &&
			    strcmp(items[j].client, items[i].client) == 0)
				in = decisions[j].admitted ||
				    s->scratch[j].refusal ?
				    &s->scratch[j].out : NULL;
		if (in == NULL) {
			e = tab_find(s, &items[i], &s->scratch[i]);
			in = e != NULL ? &e->st : &fresh;
			s->scratch[i].e = e;
			/* new here, or not synced for long: the shared
			 * store's state first */
			if (s->may_pull && !s->scratch[i].pull && (e == NULL ||
			    now_ms - e->sync.synced_ms > s->stale_ms))
				s->scratch[i].pull = pull = true;
			/* unread, a client the table holds is decided from
			 * it; a new one gets on_error */
			if (e == NULL && s->pull_failed && s->scratch[i].pull)
				return RLG_ESTORE;
		}
		live_prev = in->expires_ms > now_ms;
		if (rlg_limiter_step(&items[i].policy->lim, in, now_ms,
		    rlg_store_item_cost(&items[i]), &s->scratch[i].out,
		    &decisions[i]) != RLG_OK) {
			rlg_store_seterr(&s->w.base, "store step: the limiter"
			    " refused policy \"%s\"", items[i].policy->name);
			return RLG_EINVAL;
		}
		s->scratch[i].refusal = !decisions[i].admitted &&
		    rlg_limiter_refusal_writes(&items[i].policy->lim, in,
		    &s->scratch[i].out);
		if (!decisions[i].admitted && !items[i].advisory)
			*admit = false;
	}
	if (pull)
		return TAB_PULL;
	if (!*admit)
		tab_refused(s, n);
	return tab_write_states(s, items, n, now_ms, decisions, *admit);
}

/*
 * Under the lock: each admitted item's new state written if the request
 * is admitted (admit), and each refusal that a ban counted whether it is
 * or not, its entry made if need be. RLG_OK, RLG_EFULL or RLG_ESTORE.
 */
static int
tab_write_states(struct tab_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, const struct rlg_decision *decisions,
    bool admit)
{
	struct tbl_entry *e;
	bool inserted = false;
	size_t i;

	for (i = 0; i < n; i++) {
		if (s->scratch[i].skip || (!(admit && decisions[i].admitted) &&
		    !s->scratch[i].refusal))
			continue;
		/*
		 * The entry found when deciding, unless an insertion since
		 * (which may free expired entries) or an earlier item of the
		 * same key (which made it) makes it stale: then found again.
		 */
		e = inserted ? NULL : s->scratch[i].e;
		if (e == NULL)
			e = tbl_find(s->t, items[i].policy->name,
			    items[i].client);
		if (e == NULL) {
			errno = 0;
			e = tbl_insert(s->t, items[i].policy->name,
			    items[i].client, now_ms,
			    s->max_clients > 0 ? (uint64_t)s->max_clients : 0);
			inserted = true;
			if (e == NULL)
				return tab_no_entry(s, &items[i], errno);
		}
		tbl_write(s->t, e, &s->scratch[i].out);
		if (decisions[i].admitted)
			tab_wrote(s, e, &items[i], &s->scratch[i].out, now_ms);
	}
	return RLG_OK;
}

/*
 * Before the lock: each item's hash under the slot its policy had last
 * time, and a prefetch of its entry.
 */
static void
tab_prehash(struct tab_store *s, const struct rlg_store_item *items,
    size_t n)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		s->scratch[i].slot = -1;
		for (k = 0; k < TAB_SLOTS; k++) {
			if (s->slots[k].policy != items[i].policy)
				continue;
			s->scratch[i].slot = s->slots[k].slot;
			s->scratch[i].hash = tbl_key_hash(s->t,
			    s->slots[k].slot, items[i].client);
			tbl_prefetch(s->t, s->scratch[i].hash);
			break;
		}
	}
}

/*
 * Under the lock: the entry of item, by the hash taken before when its
 * policy's slot is still that one; the slot remembered for next time.
 */
static struct tbl_entry *
tab_find(struct tab_store *s, const struct rlg_store_item *item,
    struct tab_item *x)
{
	int slot = tbl_slot(s->t, item->policy->name);
	size_t k;

	if (slot < 0)
		return NULL;
	if (slot != x->slot) {
		/* Remembered from now on (a full cache: the first one
		 * of the policies not there takes the last place). */
		for (k = 0; k < TAB_SLOTS - 1 && s->slots[k].policy != NULL &&
		    s->slots[k].policy != item->policy; k++)
			;
		s->slots[k].policy = item->policy;
		s->slots[k].slot = slot;
		x->hash = tbl_key_hash(s->t, slot, item->client);
	}
	return tbl_find_hashed(s->t, slot, x->hash, item->client);
}

/*
 * Removes the client's entries from the table and its rows from the
 * database, holding the flush lock, so no flush writes back what was
 * removed. The table is searched by key under each policy name it knows
 * (a lookup each), never walked: a reset holds the lock for microseconds
 * however many clients the table has.
 */
static int
tab_reset(struct rlg_store *base, const char *client, const char *policy,
    int64_t *deleted)
{
	struct tab_store *s = (struct tab_store *)base;
	struct tbl_entry *e;
	const char *name;
	int64_t rows = 0, removed = 0;
	int slot, rc;

	*deleted = 0;
	if (tab_ready(s) != 0)
		return RLG_ESTORE;
	if (tbl_flush_lock(s->t) != 0) {
		rlg_store_seterr(base, "table %s: its lock is unusable",
		    s->path);
		return RLG_ESTORE;
	}
	if (tbl_lock(s->t) != 0) {
		tbl_flush_unlock(s->t);
		rlg_store_seterr(base, "table %s: its lock is unusable",
		    s->path);
		return RLG_ESTORE;
	}
	for (slot = 0; slot < TBL_POLICIES; slot++) {
		name = tbl_policy_at(s->t, slot);
		if (name == NULL || (policy != NULL &&
		    strcmp(name, policy) != 0))
			continue;
		e = tbl_find_hashed(s->t, slot, tbl_key_hash(s->t, slot,
		    client), client);
		if (e != NULL && tbl_remove(s->t, e)) {
			tbl_commit(s->t);
			removed++;
		}
	}
	tbl_unlock(s->t);
	rc = s->w.inner->ops->reset(s->w.inner, client, policy, &rows);
	tbl_flush_unlock(s->t);
	if (rc != RLG_OK) {
		rlg_store_seterr(base, "%s", s->w.inner->errmsg);
		return rc;
	}
	*deleted = removed > rows ? removed : rows;
	return RLG_OK;
}

/*
 * rlg_store_probe: the table open, and its database writable (what the
 * write-behind needs).
 */
static int
tab_probe(struct rlg_store *base, int64_t now_ms)
{
	struct tab_store *s = (struct tab_store *)base;

	if (tab_ready(s) != 0)
		return RLG_ESTORE;
	/* the inner store is SQLite's, which can */
	if (rlg_store_pass_probe(base, now_ms) != RLG_OK)
		return RLG_ESTORE;
	return RLG_OK;
}

/* rlg_store_flush: this handle writes the table behind, now. */
static int
tab_flush_now(struct rlg_store *base, int64_t now_ms)
{
	struct tab_store *s = (struct tab_store *)base;
	struct tab_wb *wb;
	int rc;

	if (tab_ready(s) != 0)
		return RLG_ESTORE;
	if (!tbl_named_by(s->t, s->path))
		tab_move(&s->t, s->w.inner, s->path, s->capacity);
	if (tab_ready(s) != 0)
		return RLG_ESTORE;
	if (s->sync) {
		if (s->sb == NULL)
			s->sb = rlg_xcalloc(1, sizeof *s->sb);
		if (tab_sync_behind(s->t, s->w.inner, s->path, now_ms,
		    s->sb) != 0) {
			rlg_store_seterr(base, "%s", s->w.inner->errmsg);
			return RLG_ESTORE;
		}
		return RLG_OK;
	}
	wb = rlg_xmalloc(sizeof *wb);
	rc = tab_write_behind(s->t, s->w.inner, s->path, now_ms, wb, NULL);
	free(wb);
	if (rc != 0) {
		rlg_store_seterr(base, "%s", s->w.inner->errmsg);
		return RLG_ESTORE;
	}
	return RLG_OK;
}

static void
tab_stats(const struct rlg_store *base, struct rlg_store_stats *out)
{
	const struct tab_store *s = (const struct tab_store *)base;

	rlg_store_pass_stats(base, out);
	if (s->t != NULL) {
		out->table = true;
		out->table_entries = tbl_count(s->t);
		out->table_recoveries = tbl_recoveries(s->t);
		out->table_flushed_at_ms = tbl_flushed_at(s->t);
	}
}

static void
tab_close(struct rlg_store *base)
{
	struct tab_store *s = (struct tab_store *)base;

	tab_flusher_leave(s->f);
	tbl_close(s->t);
	s->w.inner->ops->close(s->w.inner);
	free(s->scratch);
	free(s->sb);
	free(s);
}

