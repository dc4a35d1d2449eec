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
 * Behind: each process runs one flusher thread (shared by its handles of
 * one database). Every flush_ms, the flusher of whichever process wins
 * the table's flush clock copies the entries changed since they were
 * last written (seq != flushed), under the lock in batches, writes them
 * in one UPSERT transaction per TAB_FLUSH_ROWS rows, and marks those
 * still unchanged as flushed once it is committed. The database thus
 * lags the table by about one interval while a flusher runs; a process
 * that closes its last handle flushes once more. The same pass frees
 * entries that expired and are flushed, so the table holds the active
 * clients.
 *
 * The write-behind never takes more than about half of one core: after
 * each transaction of a long flush it waits as long as the transaction
 * took (the flush lock released meanwhile), so that with more changed
 * clients than it writes in an interval the decisions keep their speed
 * and the database lags more (the table, which decides, stays exact).
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
#include "store_stats.h"
#include "table.h"
#include "util.h"

/*
 * Rows per flush transaction at most (the marks kept until its commit);
 * entries looked at per hold of the table's lock; rows per put.
 */
#define TAB_FLUSH_ROWS ((size_t)65536)
#define TAB_FLUSH_BATCH ((size_t)1024)
#define TAB_PUT_ROWS (TAB_FLUSH_BATCH * 4)
/*
 * The flusher's SQLite page cache: about 256 bytes per entry (a state row
 * and its index entry), from SQLite's default 2 MB up to 32 MB.
 */
#define TAB_CACHE_KIB_MIN 2048
#define TAB_CACHE_KIB_MAX 32768
/*
 * How much nicer than the threads that answer the flusher runs: a flush
 * of many rows then waits for the answers instead of delaying them (the
 * tail latency of the answers), and takes what the cores leave.
 */
#define TAB_FLUSHER_NICE 5
/* Policies whose table slot a handle remembers. */
#define TAB_SLOTS 16
/* The default interval, and the bounds the config holds it to. */
#define TAB_FLUSH_MS_DEFAULT 1000

/* The flusher of one process for one table file. */
struct tab_flusher {
	char *path;                   /* the table file */
	char *db_path;
	struct rlg_store_config cfg;  /* a copy: its own connection */
	struct rlg_store *db;         /* the flusher's SQLite handle */
	struct tbl *t;                /* its own mapping, NULL until open */
	uint64_t capacity;
	int64_t interval_ms;
	struct tab_wb *wb;            /* its buffers */
	int refs;
	bool stop;
	bool running;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct tab_flusher *next;
};

/* A worker's handle. */
struct tab_store {
	struct rlg_store base;        /* first: rlg_store_* dispatch on it */
	struct rlg_store *inner;      /* the SQLite store, owned */
	struct tab_flusher *f;
	struct tbl *t;                /* this handle's mapping, or NULL */
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

/*
 * What a flush keeps of each row it wrote, to mark the entry flushed once
 * the transaction is committed: the entry, its change and its key hash
 * (an entry freed and reused meanwhile holds another key).
 */
struct tab_mark {
	uint64_t at;                  /* entry index */
	uint64_t hash;
	uint32_t seq;
};

/* One row copied for a flush. */
struct tab_row {
	struct rlg_store_row row;
	struct tab_mark mark;
	char policy[TBL_POLICY_MAX + 1];
	char client[TBL_CLIENT_MAX + 1];
};

/* A flush's buffers, allocated once per flusher (about 3.5 MB). */
struct tab_wb {
	struct tab_row rows[TAB_PUT_ROWS];
	struct rlg_store_row put[TAB_PUT_ROWS];
	struct tab_mark marks[TAB_FLUSH_ROWS];
};

static int tab_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static int tab_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted);
static void tab_close(struct rlg_store *base);
static void tab_stats(const struct rlg_store *base, struct rlg_store_stats *out);
static void tab_idle(struct rlg_store *base, int64_t now_ms);
static int tab_reset(struct rlg_store *base, const char *client,
    const char *policy, int64_t *deleted);
static int tab_ready(struct tab_store *s);
static void tab_prehash(struct tab_store *s,
    const struct rlg_store_item *items, size_t n);
static struct tbl_entry *tab_find(struct tab_store *s,
    const struct rlg_store_item *item, struct tab_item *x);
static int tab_decide(struct tab_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions, bool *admit);
static struct tbl *tab_open_table(struct rlg_store *db, const char *path,
    uint64_t capacity, char *err, size_t errsize);
static int tab_seed(void *ctx, struct tbl *t);
static struct tab_flusher *tab_flusher_find(const char *path);
static struct tab_flusher *tab_flusher_join(const struct rlg_store_config *cfg,
    const char *path, uint64_t capacity);
static void tab_flusher_leave(struct tab_flusher *f);
static void *tab_flusher_main(void *arg);
static int tab_flush(struct tab_flusher *f, int64_t now_ms);
static void tab_move(struct tbl **tp, struct rlg_store *db, const char *path,
    uint64_t capacity);
static int tab_write_behind(struct tbl *t, struct rlg_store *db,
    const char *path, int64_t now_ms, struct tab_wb *wb,
    struct tab_flusher *pace);
static int tab_commit(struct tbl *t, struct rlg_store *db,
    const struct tbl_ident *id, const struct tab_mark *marks, size_t n);
static bool tab_pause(struct tbl *t, struct tab_flusher *f, int64_t ms);
static void tab_wait(struct tab_flusher *f, int64_t ms);
static int tab_flush_now(struct rlg_store *base, int64_t now_ms);
static int tab_probe(struct rlg_store *base, int64_t now_ms);
static int tab_survey(struct rlg_store *base, int64_t now_ms, bool top,
    struct rlg_store_survey *out);
static int tab_overrides(struct rlg_store *base, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx);

const struct rlg_store_ops rlg_store_table_ops = {
	.name = "table",
	.open = NULL,           /* made by rlg_store_table_wrap */
	.step = tab_step,
	.prune = tab_prune,
	.close = tab_close,
	.stats = tab_stats,
	.idle = tab_idle,
	.reset = tab_reset,
	.flush = tab_flush_now,
	.probe = tab_probe,
	.survey = tab_survey,
	.overrides = tab_overrides,
};

static pthread_mutex_t tab_flushers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tab_flusher *tab_flushers;
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
	s->base.ops = &rlg_store_table_ops;
	s->inner = inner;
	s->max_clients = cfg->sqlite.max_clients;
	s->table_entries = cfg->sqlite.table_entries;
	s->capacity = cfg->sqlite.table_entries > 0 ?
	    (uint64_t)cfg->sqlite.table_entries :
	    (uint64_t)(s->max_clients > 0 ? s->max_clients : 250000) * 4;
	snprintf(s->base.errmsg, sizeof s->base.errmsg, "no error");
	*out = &s->base;
	/*
	 * Open now, so a start-up with a broken table says so at once; and
	 * before the flusher starts, so that a database file this start
	 * makes is made by the handle that builds the table from it: were
	 * the flusher's connection first, its first flush would take the
	 * table for one of an older file and build it again, losing the
	 * decisions made meanwhile.
	 */
	rc = tab_ready(s) == 0 ? RLG_OK : RLG_ESTORE;
	s->f = tab_flusher_join(cfg, s->path, s->capacity);
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
	s->t = tab_open_table(s->inner, s->path, s->capacity, err,
	    sizeof err);
	if (s->t == NULL) {
		rlg_store_seterr(&s->base, "%s", err);
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

/* Maps the table of db's file, built from db's states if need be. */
static struct tbl *
tab_open_table(struct rlg_store *db, const char *path, uint64_t capacity,
    char *err, size_t errsize)
{
	struct tbl_ident id;

	if (rlg_store_sqlite_ident(db, &id.dev, &id.ino, &id.born_ns,
	    &id.created_ms) != RLG_OK) {
		snprintf(err, errsize, "%s", db->errmsg);
		return NULL;
	}
	return tbl_open(path, &id, capacity, tab_seed, db, err, errsize);
}

struct tab_seed_ctx {
	struct tbl *t;
	uint64_t skipped;
};

static int
tab_seed_row(void *arg, const struct rlg_store_row *row)
{
	struct tab_seed_ctx *c = arg;
	struct tbl_entry *e;

	e = tbl_insert(c->t, row->policy, row->client, rlg_now_ms(), 0);
	if (e == NULL) {
		c->skipped++;
		return 0;
	}
	tbl_write(c->t, e, &row->st);
	e->flushed = e->seq;
	tbl_commit(c->t);
	return 0;
}

/* Seeds a new table with the live states of the database. */
static int
tab_seed(void *ctx, struct tbl *t)
{
	struct tab_seed_ctx c = { t, 0 };
	struct rlg_store *db = ctx;

	if (rlg_store_sqlite_scan(db, rlg_now_ms(), tab_seed_row, &c) !=
	    RLG_OK)
		return -1;
	if (c.skipped > 0)
		rlg_log("table: %llu states of the database did not fit in"
		    " %llu entries and start fresh",
		    (unsigned long long)c.skipped,
		    (unsigned long long)tbl_capacity(t));
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
	/* A table retired while this step waited for its lock (its
	 * entries carried into another, tab_move): the step is decided on
	 * the one that has them. */
	for (tries = 0;; tries++) {
		if (tab_ready(s) != 0)
			return RLG_ESTORE;
		tab_prehash(s, items, n);
		if (tbl_lock(s->t) != 0) {
			rlg_store_seterr(base, "table %s: its lock is unusable;"
			    " the table is built again", s->path);
			tbl_retire(s->t);
			return RLG_ESTORE;
		}
		if (!tbl_retired(s->t) || tries == 2)
			break;
		tbl_unlock(s->t);
	}
	rc = tab_decide(s, items, n, now_ms, decisions, &admit);
	if (rc != RLG_OK) {
		tbl_abort(s->t);
		return rc;
	}
	tbl_unlock(s->t);
	return RLG_OK;
}

/*
 * Under the lock: every item decided, then, if the request is admitted,
 * every admitted item's state written. RLG_OK, RLG_EINVAL (a policy the
 * limiter refuses) or RLG_EFULL; the caller ends or plays back the
 * journal.
 */
static int
tab_decide(struct tab_store *s, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions, bool *admit)
{
	static const struct rlg_state fresh;
	const struct rlg_state *in;
	struct tbl_entry *e;
	bool live_prev = false, inserted = false;
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
				in = decisions[j].admitted ? &s->scratch[j].out : NULL;
		if (in == NULL) {
			e = tab_find(s, &items[i], &s->scratch[i]);
			in = e != NULL ? &e->st : &fresh;
			s->scratch[i].e = e;
		}
		live_prev = in->expires_ms > now_ms;
		if (rlg_limiter_step(&items[i].policy->lim, in, now_ms,
		    rlg_store_item_cost(&items[i]), &s->scratch[i].out,
		    &decisions[i]) != RLG_OK) {
			rlg_store_seterr(&s->base, "store step: the limiter"
			    " refused policy \"%s\"", items[i].policy->name);
			return RLG_EINVAL;
		}
		if (!decisions[i].admitted && !items[i].advisory)
			*admit = false;
	}
	if (!*admit)
		return RLG_OK;
	for (i = 0; i < n; i++) {
		if (s->scratch[i].skip || !decisions[i].admitted)
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
		}
		if (e == NULL && errno != 0) {
			/* The file system could not give the table room. */
			rlg_store_seterr(&s->base, "table %s: no room for new"
			    " clients on its file system: %s", s->path,
			    strerror(errno));
			return RLG_ESTORE;
		}
		if (e == NULL) {
			rlg_store_seterr(&s->base, "store full: policy \"%s\""
			    " holds state for max_clients = %lld clients, or"
			    " the table its %llu entries; new clients are"
			    " refused until states expire",
			    items[i].policy->name, (long long)s->max_clients,
			    (unsigned long long)tbl_capacity(s->t));
			return RLG_EFULL;
		}
		tbl_write(s->t, e, &s->scratch[i].out);
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

/* The database's expired rows; the table frees its own when it flushes. */
static int
tab_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted)
{
	struct tab_store *s = (struct tab_store *)base;
	int rc = s->inner->ops->prune(s->inner, now_ms, deleted);

	if (rc != RLG_OK)
		rlg_store_seterr(base, "%s", s->inner->errmsg);
	return rc;
}

static void
tab_idle(struct rlg_store *base, int64_t now_ms)
{
	struct tab_store *s = (struct tab_store *)base;

	if (s->inner->ops->idle != NULL)
		s->inner->ops->idle(s->inner, now_ms);
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
		if (e != NULL) {
			tbl_remove(s->t, e);
			tbl_commit(s->t);
			removed++;
		}
	}
	tbl_unlock(s->t);
	rc = rlg_store_sqlite_reset(s->inner, client, policy, &rows);
	tbl_flush_unlock(s->t);
	if (rc != RLG_OK) {
		rlg_store_seterr(base, "%s", s->inner->errmsg);
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
	if (s->inner->ops->probe(s->inner, now_ms) != RLG_OK) {
		rlg_store_seterr(base, "%s", s->inner->errmsg);
		return RLG_ESTORE;
	}
	return RLG_OK;
}

/* rlg_store_survey: the database's, as of the last flush. */
static int
tab_survey(struct rlg_store *base, int64_t now_ms, bool top,
    struct rlg_store_survey *out)
{
	struct tab_store *s = (struct tab_store *)base;
	int rc = s->inner->ops->survey(s->inner, now_ms, top, out);

	if (rc != RLG_OK)
		rlg_store_seterr(base, "%s", s->inner->errmsg);
	return rc;
}

/*
 * rlg_store_overrides: the database's (the table holds no overrides);
 * the SQLite handle underneath reads them.
 */
static int
tab_overrides(struct rlg_store *base, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx)
{
	struct tab_store *s = (struct tab_store *)base;
	int rc = s->inner->ops->overrides(s->inner, version, fn, ctx);

	if (rc != RLG_OK)
		rlg_store_seterr(base, "%s", s->inner->errmsg);
	return rc;
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
		tab_move(&s->t, s->inner, s->path, s->capacity);
	if (tab_ready(s) != 0)
		return RLG_ESTORE;
	wb = rlg_xmalloc(sizeof *wb);
	rc = tab_write_behind(s->t, s->inner, s->path, now_ms, wb, NULL);
	free(wb);
	if (rc != 0) {
		rlg_store_seterr(base, "%s", s->inner->errmsg);
		return RLG_ESTORE;
	}
	return RLG_OK;
}

static void
tab_stats(const struct rlg_store *base, struct rlg_store_stats *out)
{
	const struct tab_store *s = (const struct tab_store *)base;

	if (s->inner->ops->stats != NULL)
		s->inner->ops->stats(s->inner, out);
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
	s->inner->ops->close(s->inner);
	free(s->scratch);
	free(s);
}

/* ---- the flusher ----------------------------------------------------- */

/* The flusher of path in this process, or NULL (tab_flushers_mu held). */
static struct tab_flusher *
tab_flusher_find(const char *path)
{
	struct tab_flusher *f = tab_flushers;

	while (f != NULL && strcmp(f->path, path) != 0)
		f = f->next;
	return f;
}

/*
 * The process's flusher of the table at path, started on first use; the
 * last handle to leave stops it (after a last flush).
 */
static struct tab_flusher *
tab_flusher_join(const struct rlg_store_config *cfg, const char *path,
    uint64_t capacity)
{
	struct tab_flusher *f;

	pthread_mutex_lock(&tab_flushers_mu);
	if ((f = tab_flusher_find(path)) == NULL) {
		f = rlg_xcalloc(1, sizeof *f);
		f->path = rlg_xstrdup(path);
		f->db_path = rlg_xstrdup(cfg->sqlite.path);
		f->cfg.backend = RLG_BACKEND_SQLITE;
		f->cfg.sqlite = cfg->sqlite;
		f->cfg.sqlite.path = f->db_path;
		/* Its own connection, with no group (it commits alone),
		 * no table and no cache: the database itself. */
		f->cfg.sqlite.group_commit = RLG_GROUP_OFF;
		f->cfg.sqlite.commit = RLG_COMMIT_EACH;
		f->cfg.rejection_cache = 0;
		f->capacity = capacity;
		f->interval_ms = cfg->sqlite.flush_ms > 0 ?
		    cfg->sqlite.flush_ms : TAB_FLUSH_MS_DEFAULT;
		pthread_mutex_init(&f->mu, NULL);
		pthread_cond_init(&f->cv, NULL);
		f->running = pthread_create(&f->thread, NULL,
		    tab_flusher_main, f) == 0;
		if (!f->running)
			rlg_log("table %s: no flusher thread: %s", path,
			    strerror(errno));
		f->next = tab_flushers;
		tab_flushers = f;
	}
	f->refs++;
	pthread_mutex_unlock(&tab_flushers_mu);
	return f;
}

static void
tab_flusher_leave(struct tab_flusher *f)
{
	struct tab_flusher **pp;

	pthread_mutex_lock(&tab_flushers_mu);
	if (--f->refs > 0) {
		pthread_mutex_unlock(&tab_flushers_mu);
		return;
	}
	for (pp = &tab_flushers; *pp != f; pp = &(*pp)->next)
		;
	*pp = f->next;
	pthread_mutex_unlock(&tab_flushers_mu);
	pthread_mutex_lock(&f->mu);
	f->stop = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	if (f->running)
		pthread_join(f->thread, NULL);
	tbl_close(f->t);
	if (f->db != NULL)
		f->db->ops->close(f->db);
	free(f->wb);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f->path);
	free(f->db_path);
	free(f);
}

/* Waits ms, or until the flusher is told to stop. */
static void
tab_wait(struct tab_flusher *f, int64_t ms)
{
	struct timespec until;

	pthread_mutex_lock(&f->mu);
	if (!f->stop) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)(ms % 1000) * 1000000L;
		until.tv_sec += (time_t)(ms / 1000) +
		    until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&f->cv, &f->mu, &until);
	}
	pthread_mutex_unlock(&f->mu);
}

/*
 * Wakes four times an interval; flushes when it wins the table's flush
 * clock. On stop, one last flush of what is left.
 */
static void *
tab_flusher_main(void *arg)
{
	struct tab_flusher *f = arg;
	int64_t tick = f->interval_ms / 4 > 0 ? f->interval_ms / 4 : 1;
	int64_t kib = (int64_t)(f->capacity / 4);
	bool stop;
	int prio;

	f->wb = rlg_xmalloc(sizeof *f->wb);
	/* This thread only (Linux: a thread has its own nice value). */
	errno = 0;
	prio = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno == 0)
		(void)setpriority(PRIO_PROCESS, (id_t)gettid(),
		    prio + TAB_FLUSHER_NICE);
	/* The backend itself: a handle even on failure, which heals. */
	if (rlg_store_sqlite_ops.open(&f->cfg, &f->db) != RLG_OK)
		rlg_log("table %s: %s", f->path, f->db->errmsg);
	rlg_store_sqlite_cache(f->db, kib < TAB_CACHE_KIB_MIN ?
	    TAB_CACHE_KIB_MIN : kib > TAB_CACHE_KIB_MAX ? TAB_CACHE_KIB_MAX :
	    kib);
	for (;;) {
		tab_wait(f, tick);
		pthread_mutex_lock(&f->mu);
		stop = f->stop;
		pthread_mutex_unlock(&f->mu);
		if (stop || (f->t != NULL &&
		    tbl_flush_due(f->t, rlg_now_ms(), f->interval_ms)) ||
		    f->t == NULL)
			tab_flush(f, rlg_now_ms());
		if (stop)
			break;
	}
	return NULL;
}

/* Copies the next batch of changed entries from *at on; frees those that
 * expired and are flushed. Returns the rows copied into rows + n. */
static size_t
tab_copy(struct tbl *t, uint64_t *at, struct tab_row *rows, size_t n,
    size_t room, int64_t now_ms)
{
	struct tbl_entry *e;
	struct tab_row *r;
	uint64_t end = *at + TAB_FLUSH_BATCH;
	size_t got = 0;

	for (; *at < end && *at < tbl_extent(t) && n + got < room; (*at)++) {
		if ((e = tbl_at(t, *at)) == NULL)
			continue;
		if (e->seq == e->flushed) {
			if (e->st.expires_ms <= now_ms) {
				tbl_remove(t, e);
				tbl_commit(t);
			}
			continue;
		}
		r = &rows[n + got++];
		r->mark.at = *at;
		r->mark.hash = e->hash;
		r->mark.seq = e->seq;
		snprintf(r->policy, sizeof r->policy, "%s", tbl_policy(t, e));
		memcpy(r->client, e->client, e->client_len);
		r->client[e->client_len] = '\0';
		r->row.policy = r->policy;
		r->row.client = r->client;
		r->row.st = e->st;
	}
	return got;
}

/*
 * One flush: the table (opened again when another process replaced it)
 * copied and written. 0, or -1 (logged; the entries stay
 * changed and the next flush tries again).
 */
static int
tab_flush(struct tab_flusher *f, int64_t now_ms)
{
	char err[RLG_STORE_ERRMSG_MAX];

	if (f->db == NULL)
		return -1;
	if (f->t != NULL && !tbl_retired(f->t) && !tbl_named_by(f->t, f->path))
		tab_move(&f->t, f->db, f->path, f->capacity);
	if (f->t == NULL || tbl_retired(f->t)) {
		tbl_close(f->t);
		f->t = tab_open_table(f->db, f->path, f->capacity, err,
		    sizeof err);
		if (f->t == NULL)
			return -1;
	}
	return tab_write_behind(f->t, f->db, f->path, now_ms, f->wb, f);
}

/*
 * The path no longer names the table *tp (deleted, replaced, or
 * hidden by a file system mounted over its directory), so a process that
 * opens it now, a worker or an rlgate --reset, would get another table,
 * built from the database without what this one holds. The table the
 * path names (built when there is none) takes this one's entries,
 * unflushed, and this one is retired: every process that maps it opens
 * the path again, and the next flush writes every state into the
 * database. Under this table's flush lock and lock, so that it is
 * carried once (a flusher of another process that maps it finds it
 * retired) and no step decides on it meanwhile (tab_step checks
 * retired under the lock). When the path's table cannot be had (a
 * read-only file system), this one stays, and is tried again at the next
 * flush.
 */
static void
tab_move(struct tbl **tp, struct rlg_store *db, const char *path,
    uint64_t capacity)
{
	char err[RLG_STORE_ERRMSG_MAX];
	struct tbl *t = *tp, *nt;
	uint64_t n = 0;
	bool carried = false;

	nt = tab_open_table(db, path, capacity, err, sizeof err);
	if (nt == NULL)
		return;
	if (tbl_named_by(t, path) || tbl_flush_lock(t) != 0) {
		tbl_close(nt);
		return;
	}
	if (tbl_lock(t) == 0) {
		if (!tbl_retired(t) && tbl_lock(nt) == 0) {
			n = tbl_carry(nt, t);
			tbl_unlock(nt);
			tbl_retire(t);
			carried = true;
		}
		tbl_unlock(t);
	}
	tbl_flush_unlock(t);
	if (carried)
		rlg_log("table %s: the path no longer names the table this"
		    " process has open (deleted, replaced, or hidden by a file"
		    " system mounted over its directory): its %llu states are"
		    " carried into the table the path names, which every"
		    " process uses from now on", path,
		    (unsigned long long)n);
	else if (!tbl_retired(t)) {
		tbl_close(nt);          /* this one stays; again next flush */
		return;
	}
	tbl_close(t);
	*tp = nt;
}

/*
 * Writes the entries of t changed since their last flush to db, under
 * t's flush lock, in transactions of up to TAB_FLUSH_ROWS rows; frees
 * those that expired and are flushed. pace: the flusher, which rests
 * between transactions (tab_pause); NULL: no rest. 0, or -1 (logged; the
 * entries not committed stay changed and the next flush tries again).
 */
static int
tab_write_behind(struct tbl *t, struct rlg_store *db, const char *path,
    int64_t now_ms, struct tab_wb *wb, struct tab_flusher *pace)
{
	struct tbl_ident id;
	uint64_t at = 0;
	int64_t began = 0;
	size_t n, i, marked = 0;
	int rc = 0;

	if (tbl_flush_lock(t) != 0)
		return -1;
	/*
	 * The file the path names now, under the flush lock: a database
	 * deleted or replaced gets every entry (tbl_rebind), and no flush
	 * marks an entry flushed into a file the table has left.
	 */
	if (rlg_store_sqlite_ident(db, &id.dev, &id.ino, &id.born_ns,
	    &id.created_ms) != RLG_OK)
		rc = -2;
	else if (!tbl_belongs(t, &id) && tbl_rebind(t, &id, path) < 0)
		rc = -1;
	while (rc == 0 && at < tbl_extent(t)) {
		n = 0;
		while (n < TAB_PUT_ROWS - TAB_FLUSH_BATCH &&
		    at < tbl_extent(t)) {
			if (tbl_lock(t) != 0) {
				rc = -1;
				break;
			}
			n += tab_copy(t, &at, wb->rows, n, TAB_PUT_ROWS,
			    now_ms);
			tbl_unlock(t);
		}
		if (rc != 0 || n == 0)
			continue;
		if (marked == 0) {
			began = rlg_now_ms();
			if (rlg_store_sqlite_begin(db, now_ms) != RLG_OK) {
				rc = -2;
				break;
			}
		}
		for (i = 0; i < n; i++) {
			wb->put[i] = wb->rows[i].row;
			wb->marks[marked + i] = wb->rows[i].mark;
		}
		if (rlg_store_sqlite_put(db, wb->put, n) != RLG_OK) {
			marked = 0;             /* rolled back */
			rc = -2;
			break;
		}
		marked += n;
		if (marked + TAB_PUT_ROWS <= TAB_FLUSH_ROWS)
			continue;
		rc = tab_commit(t, db, &id, wb->marks, marked);
		marked = 0;
		if (rc == 0 && pace != NULL && at < tbl_extent(t) &&
		    !tab_pause(t, pace, rlg_now_ms() - began))
			return -1;              /* the flush lock is lost */
	}
	if (rc == 0 && marked > 0)
		rc = tab_commit(t, db, &id, wb->marks, marked);
	else if (marked > 0)
		rlg_store_sqlite_rollback(db);
	tbl_flush_unlock(t);
	if (rc == -2)
		rlg_log("table %s: flush failed, retried: %s", path,
		    db->errmsg);
	if (rc == 0)
		tbl_set_flushed_at(t, now_ms);
	rlg_metrics_flush(rc == 0);
	return rc == 0 ? 0 : -1;
}

/*
 * Commits the open transaction, then marks flushed the entries written
 * that have not changed since (under the table's lock), if the table is
 * still bound to id, the database the flush began with: another process
 * may have bound it to a new file while a long flush rested (tab_pause),
 * and the entries then stay unflushed, for the new file. 0, or -2 (the
 * commit failed: rolled back) or -1.
 */
static int
tab_commit(struct tbl *t, struct rlg_store *db, const struct tbl_ident *id,
    const struct tab_mark *marks, size_t n)
{
	struct tbl_entry *e;
	size_t i;

	if (rlg_store_sqlite_commit(db) != RLG_OK)
		return -2;
	if (tbl_lock(t) != 0)
		return -1;
	if (!tbl_belongs(t, id))
		n = 0;
	for (i = 0; i < n; i++) {
		e = tbl_at(t, marks[i].at);
		/* Unchanged since the copy: the database has it. */
		if (e != NULL && e->seq == marks[i].seq &&
		    e->hash == marks[i].hash)
			e->flushed = e->seq;
	}
	tbl_unlock(t);
	return 0;
}

/*
 * The rest between two transactions of one flush: as long as the last
 * one took (at most an interval), the flush lock released so that a reset
 * does not wait for the whole flush; none when the flusher is stopping.
 * false if the flush lock could not be taken again.
 */
static bool
tab_pause(struct tbl *t, struct tab_flusher *f, int64_t ms)
{
	if (ms <= 0)
		return true;
	tbl_flush_unlock(t);
	tab_wait(f, ms < f->interval_ms ? ms : f->interval_ms);
	return tbl_flush_lock(t) == 0;
}
