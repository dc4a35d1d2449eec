/*
 * store.h: where the limiter state lives, behind one interface.
 *
 * A store handle is one connection, used by one thread. rlg_store_step is
 * the heart of rlgate: for one request it reads the state of every policy
 * that applies, runs the limiter on each, and writes the new states only if
 * every policy admits the request, all in one atomic write, so counting is
 * exact however many processes and threads share the store. The one
 * exception is a policy with a ban (the penalty box, limiter.h "The
 * ban"): its refusal, when the limiter counts it or starts a ban with it
 * (rlg_limiter_refusal_writes), is written in the same atomic step
 * whether the request is admitted or not; other policies' states stay
 * as they were, and a policy without a ban never writes a refusal. The
 * backends sit behind one operations table and register by name (struct
 * rlg_backend): SQLite (store_sqlite.c: one file, the processes of one
 * machine) and Redis (store_redis.c: one server, many gateways), chosen
 * by [store] backend; a rejection cache (store_cache.c) or the decision
 * table (store_table.c) wraps one. store.c dispatches the calls below;
 * store_backends.h keeps the registry, store_open.c opens (rlg_store_open,
 * rlg_store_describe, rlg_store_check_files, rlg_store_can). Callers see
 * the same calls and the same semantics.
 */
#ifndef RLG_STORE_H
#define RLG_STORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"
#include "limiter.h"
#include "store_backends.h"


/*
 * One policy to apply to one client within a step. An advisory item (a
 * dry_run policy, or an exempt client the operator wants reported) is
 * decided and stored like the others, but its rejection does not reject
 * the request, and its state advances only when it admits.
 *
 * An if_new item is a charge for a new key: it applies only when the
 * item just before it (which is no if_new item; the first item never is
 * one) finds no live state for its
 * client, i.e. the request would start a new key (no row, or an expired
 * one; sliding_log: no request in the window). Then it is decided like
 * any other, in the same atomic step (policy->new_keys_policy, counted
 * per client address). Otherwise it is skipped: decided admitted with
 * remaining = limit and reset_ms = retry_ms = next_ms = 0, nothing read
 * or written.
 */
struct rlg_store_item {
	const struct rlg_policy *policy;
	const char *client;        /* client key, NUL-terminated, <= RLG_CLIENT_KEY_MAX */
	bool advisory;
	bool if_new;
	int64_t cost;              /* the request's units, 1..RLG_COST_MAX, charged
	                              all or nothing (limiter.h: "Request
	                              cost"); 0 counts as 1, so an item
	                              written without it costs what a request
	                              always cost (rlg_store_item_cost) */
};

/*
 * An item's cost as the backends charge it: 0 is 1. Inline: every
 * backend and the cache use it, and none of them calls into store.c.
 */
static inline int64_t
rlg_store_item_cost(const struct rlg_store_item *item)
{
	return item->cost == 0 ? 1 : item->cost;
}

/*
 * One (policy, client) of a sync (rlg_store_sync): the units admitted
 * for it elsewhere (on this host since its last sync), in the window
 * that starts at window_start_ms (the window they were admitted in;
 * unused by the token bucket).
 */
struct rlg_sync_item {
	const struct rlg_policy *policy;
	const char *client;        /* client key, NUL-terminated, <= RLG_CLIENT_KEY_MAX */
	int64_t units;             /* 0..RLG_MERGE_COUNT_MAX; 0 reads */
	int64_t window_start_ms;
};

struct rlg_store_ops;
struct rlg_store_row;
struct rlg_store_stats;
struct rlg_store_survey;
struct rlg_override_row;

/* The longest error message a handle keeps, with its NUL. */
#define RLG_STORE_ERRMSG_MAX 512

/*
 * Every backend's handle starts with this, so the calls below dispatch:
 * its operations, and what the callers read of any handle alike.
 */
struct rlg_store {
	const struct rlg_store_ops *ops;
	bool cached;               /* the last step was answered from memory */
	char errmsg[RLG_STORE_ERRMSG_MAX];  /* the last error (rlg_store_errmsg) */
};

/* A backend (store_sqlite.c, store_redis.c), or a wrapper (store_cache.c). */
struct rlg_store_ops {
	const char *name;
	int (*open)(const struct rlg_store_config *cfg, struct rlg_store **out);
	int (*step)(struct rlg_store *s, const struct rlg_store_item *items,
	    size_t n, int64_t now_ms, struct rlg_decision *decisions);
	int (*prune)(struct rlg_store *s, int64_t now_ms, int64_t *deleted);
	void (*close)(struct rlg_store *s);
	/* What it has done, for tests and benchmarks (store_stats.h);
	 * NULL: nothing to count. */
	void (*stats)(const struct rlg_store *s, struct rlg_store_stats *out);
	/* Upkeep between requests (rlg_store_idle); NULL: none. */
	void (*idle)(struct rlg_store *s, int64_t now_ms);
	/* rlg_store_flush; NULL: nothing is kept behind. */
	int (*flush)(struct rlg_store *s, int64_t now_ms);
	/* rlg_store_reset; NULL: the store cannot. */
	int (*reset)(struct rlg_store *s, const char *client,
	    const char *policy, int64_t *deleted);
	/* rlg_store_probe; NULL: the store cannot tell. */
	int (*probe)(struct rlg_store *s, int64_t now_ms);
	/* rlg_store_survey; NULL: the store cannot tell. */
	int (*survey)(struct rlg_store *s, int64_t now_ms, bool top,
	    struct rlg_store_survey *out);
	/* rlg_store_overrides; NULL: the store keeps none. */
	int (*overrides)(struct rlg_store *s, uint64_t *version,
	    int (*fn)(void *ctx, const struct rlg_override_row *row),
	    void *ctx);
	/*
	 * The states in bulk, for a wrapper that decides in memory and
	 * writes behind (the decision table, store_table.c), as struct
	 * rlg_store_row says below; NULL: the store has none (only a store
	 * that has them all can be written behind).
	 */
	int (*scan)(struct rlg_store *s, int64_t now_ms,
	    int (*fn)(void *ctx, const struct rlg_store_row *row), void *ctx);
	int (*begin)(struct rlg_store *s, int64_t now_ms);
	int (*put)(struct rlg_store *s, const struct rlg_store_row *rows,
	    size_t n);
	int (*commit)(struct rlg_store *s);
	void (*rollback)(struct rlg_store *s);
	void (*cache)(struct rlg_store *s, int64_t kib);
	int (*ident)(struct rlg_store *s, dev_t *dev, ino_t *ino,
	    int64_t *born_ns, int64_t *created_ms);
	/* rlg_store_sync; NULL: the store cannot. */
	int (*sync)(struct rlg_store *s, const struct rlg_sync_item *items,
	    size_t n, int64_t now_ms, struct rlg_state *global);
};

/*
 * A store backend, registered by name (a row of store_backends.h's table
 * points at it): what rlg_store_open, rlg_store_describe,
 * rlg_store_check_files and rlg_store_can consult, so that nothing
 * outside the backend's own files and its row asks which backend a store
 * is.
 */
struct rlg_backend {
	const struct rlg_store_ops *ops;
	unsigned caps;                 /* RLG_STORE_CAN_*: what it has */
	/* "sqlite PATH" (rlg_store_describe), into buf. */
	const char *(*describe)(const struct rlg_store_config *sc, char *buf,
	    size_t size);
	/* rlg_store_check_files; NULL: it keeps no files. */
	int (*check_files)(const struct rlg_store_config *sc,
	    void (*warn)(void *ctx, const char *line), void *ctx);
	/* Whether sc writes behind a decision table (rlg_store_behind);
	 * NULL: never. */
	bool (*behind)(const struct rlg_store_config *sc);
};

/* A backend with [store] commit (each, behind): SQLite. */
#define RLG_STORE_CAN_COMMIT 0x1u
/* A server that --check-config connects to and probes: Redis. */
#define RLG_STORE_CAN_CONNECT 0x2u

/* Whether the backend that sc names has every capability of caps. */
bool rlg_store_can(const struct rlg_store_config *sc, unsigned caps);

/*
 * Whether sc's store decides in the host's shared table and writes the
 * database behind (SQLite with commit = behind), so that it flushes.
 */
bool rlg_store_behind(const struct rlg_store_config *sc);

/*
 * The .behind of a backend whose table [store] commit turns on (SQLite's
 * write-behind, Redis' local+global mode): commit = behind.
 */
bool rlg_store_commit_behind(const struct rlg_store_config *sc);

/*
 * Opens a connection to the store that cfg names: cfg->backend picks
 * SQLite (creating the file with its schema on first use, mode 0600) or
 * Redis (connect, AUTH, SELECT, SCRIPT LOAD), behind a rejection cache of
 * cfg->rejection_cache entries unless that is 0. On success returns RLG_OK
 * and the handle in *out, owned by the caller (rlg_store_close). On
 * failure returns RLG_ESTORE and still sets *out to a handle whose
 * rlg_store_errmsg says why, and which later calls retry to open; so a
 * store that is missing at start-up heals by itself when the fault goes
 * away (Redis: after a backoff). The handle copies what it needs from cfg.
 */
int rlg_store_open(const struct rlg_store_config *cfg, struct rlg_store **out);

/*
 * One request: applies items[0..n) at now_ms, atomically. decisions[i] gets
 * policy i's decision. The request is admitted when every decision is; only
 * then are the new states written (but a refusal a ban counts, written
 * either way: above). Returns RLG_OK (admitted or not), or
 * RLG_ESTORE when the store failed (nothing written, decisions undefined;
 * on a Redis Cluster, items of several slots: see
 * store_redis_cluster.c),
 * or RLG_EFULL when admitting would give a policy state for more than
 * max_clients clients even after pruning expired ones (SQLite only; nothing
 * written, decisions undefined; clients the store already holds are never
 * refused for it), or RLG_EINVAL for a request no store could take: n == 0,
 * an item without policy or client, an if_new item with no key item
 * before it, a cost out of 0..RLG_COST_MAX, a client key
 * longer than RLG_CLIENT_KEY_MAX (Redis: also one that is empty or starts with '}',
 * which would empty its hash tag), a policy the limiter refuses (nothing
 * written; rlg_store_errmsg says which).
 * The same (policy, client) twice in items counts twice. now_ms is the
 * caller's wall clock: the time the algorithms run at, except with Redis
 * and [store] clock = redis, where the script reads Redis TIME so that
 * every gateway agrees. It also paces the SQLite store's cheap health
 * checks (it looks once a second whether its file was deleted or
 * replaced), so pass the real time.
 */
int rlg_store_step(struct rlg_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);

/*
 * Deletes states that expired before now_ms, so the store follows the number
 * of active clients. *deleted (if not NULL) gets the count. RLG_OK or
 * RLG_ESTORE. Redis expires its keys by itself: RLG_OK, 0 deleted.
 */
int rlg_store_prune(struct rlg_store *s, int64_t now_ms, int64_t *deleted);

/*
 * Whether the last rlg_store_step on s was answered from memory by the
 * rejection cache (a repeat of a rejection the store decided before)
 * rather than by the store. false for a NULL handle.
 */
bool rlg_store_cached(const struct rlg_store *s);

/*
 * Upkeep that must not delay an answer, for the caller to run between
 * requests (after one is answered): the SQLite store checkpoints its WAL
 * there once a commit found it past about 4 MB (and makes it start over
 * past about 8 MB), so the file stays bounded under continuous load
 * (store_sqlite_wal.c). One comparison when there is nothing to do. A
 * handle whose caller never calls it does that work in the step
 * instead. NULL does nothing.
 */
void rlg_store_idle(struct rlg_store *s, int64_t now_ms);

/*
 * Reports the files the store keeps for cfg that anyone but their owner
 * may read or write: SQLite's database, its -wal and -shm and the
 * decision table (-table), those that exist (the store creates them 0600
 * but keeps the mode of a file it finds); Redis keeps none. One line through warn(ctx, line) when there
 * is any: each file with its mode and what that allows, and the chmod
 * that fixes it. Returns the number of files reported.
 */
int rlg_store_check_files(const struct rlg_store_config *cfg,
    void (*warn)(void *ctx, const char *line), void *ctx);

/*
 * Where the store that sc names is, for the logs, never with a password:
 * "sqlite PATH", or a Redis store as rlg_redis_describe says it. Writes
 * into buf (size bytes) and returns it.
 */
const char *rlg_store_describe(const struct rlg_store_config *sc, char *buf,
    size_t size);

/*
 * A wrapper's handle starts with this (store_cache.c, store_table.c): the
 * store it wraps, which it owns. The rlg_store_pass_* operations below
 * forward to inner what the wrapper does not change, so that a wrapper's
 * operations table names them for those: each makes the rlg_store_* call
 * on inner (one it lacks: RLG_EINVAL and why, or nothing to do, as that
 * call says) and then copies inner's error message into the wrapper's: always
 * when mirror is set (the rejection cache, which has no errors of its
 * own), else only when the call failed (the table's own errors stay);
 * prune's, in both, only when it failed.
 */
struct rlg_store_wrap {
	struct rlg_store base;     /* first: rlg_store_* dispatch on it */
	struct rlg_store *inner;   /* owned */
	bool mirror;
};

int rlg_store_pass_prune(struct rlg_store *s, int64_t now_ms,
    int64_t *deleted);
void rlg_store_pass_idle(struct rlg_store *s, int64_t now_ms);
void rlg_store_pass_stats(const struct rlg_store *s,
    struct rlg_store_stats *out);
int rlg_store_pass_flush(struct rlg_store *s, int64_t now_ms);
int rlg_store_pass_reset(struct rlg_store *s, const char *client,
    const char *policy, int64_t *deleted);
int rlg_store_pass_probe(struct rlg_store *s, int64_t now_ms);
int rlg_store_pass_survey(struct rlg_store *s, int64_t now_ms, bool top,
    struct rlg_store_survey *out);
int rlg_store_pass_overrides(struct rlg_store *s, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx);

/* The last error, for the log. Never NULL. */
const char *rlg_store_errmsg(const struct rlg_store *s);

/*
 * Sets s's error message, printf-style: for the backends and wrappers
 * (inline, so that they need nothing of store.c).
 */
static inline void rlg_store_seterr(struct rlg_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline void
rlg_store_seterr(struct rlg_store *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
	va_end(ap);
}

/*
 * The decision of an if_new item that does not apply (its key is not
 * new): skipped, admitted, remaining = limit, reset_ms = retry_ms =
 * next_ms = 0 (never shown: the gate leaves it out of the answer). For the
 * backends and the rejection cache (inline: they need nothing of
 * store.c).
 */
static inline void
rlg_store_skipped(const struct rlg_policy *p, struct rlg_decision *d)
{
	d->admitted = true;
	d->limit = p->lim.limit;
	d->remaining = p->lim.limit;
	d->reset_ms = 0;
	d->retry_ms = 0;
	d->next_ms = 0;
	d->skipped = true;
}

/*
 * Per-client overrides (tier.h) kept in the store, for operators to edit
 * while rlgate runs: SQLite's table rlg_override (db/schema.sql; the
 * sqlite3 shell, db/queries.sql), Redis's hash rlg:overrides (redis-cli:
 * field "POLICY CLIENT", value SPEC). A row as the store holds it, not
 * checked: the gate parses and checks it (rlg_tier_*), and skips a bad one
 * with a log line.
 */
struct rlg_override_row {
	const char *policy;        /* a [policy NAME]'s name */
	const char *client;        /* an address, a CIDR, or k:HASH */
	const char *spec;          /* "limit=N window=S burst=B" (any of
	                              them), or "exempt" */
};

/*
 * The overrides, when they changed since *version (0: never read): the
 * store compares its version of them (SQLite: a counter the table's
 * triggers bump, which starts at a random value; Redis: a digest of the
 * hash) with *version; when they differ it calls fn for every row (until
 * fn returns non-zero) and then sets *version to its own, which is never
 * 0. Unchanged: fn is not called, *version stays. RLG_OK, RLG_ESTORE
 * (*version unchanged: the caller keeps what it has and asks again), or
 * RLG_EINVAL (a store that keeps none). Cheap when nothing changed (one
 * small read): each process's reader (overrides.h) asks about twice a
 * second.
 */
int rlg_store_overrides(struct rlg_store *s, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx);

/*
 * The local+global mode's exchange with the shared store: merges into
 * the stored state of each item's (policy, client) the units admitted
 * for it elsewhere, as rlg_limiter_merge does, atomically per item, and
 * gives back in global[i] the state after the merge (the state every
 * host then bounds its decisions by; units 0 only reads it). The stored
 * states are the ones rlg_store_step reads and writes, so exact-mode
 * steps and syncs on one store count together. now_ms is the caller's
 * clock, or the store's (Redis with [store] clock = redis). A state that
 * changed is stored with expires_ms rounded up to the second, as a step
 * stores it; one that did not is given back as stored.
 * Redis: one script call (db/redis/sync.lua) per 1024 items at most,
 * those of one server sent as one pipeline; a Redis Cluster's
 * items grouped by slot, one call per slot, one pipeline per master.
 * Returns RLG_OK; RLG_EINVAL for a call no store could take (n == 0, an
 * item without policy or client, a client key too long (Redis: or one
 * that would empty its hash tag), units out of 0..RLG_MERGE_COUNT_MAX,
 * a policy the limiter refuses, sliding_log: not mergeable; nothing
 * sent; errmsg says which), or for a store that cannot sync; or
 * RLG_ESTORE (errmsg names the server): then global[i].expires_ms is -1
 * (RLG_SYNC_UNKNOWN) for every item not known to be merged (not sent,
 * or sent and not answered: it may have been), and the others, merged,
 * have their states.
 */
#define RLG_SYNC_UNKNOWN (-1)
int rlg_store_sync(struct rlg_store *s, const struct rlg_sync_item *items,
    size_t n, int64_t now_ms, struct rlg_state *global);

/* Closes the connection; NULL does nothing. */
void rlg_store_close(struct rlg_store *s);

/*
 * Writes what the store keeps behind (commit = behind: the table's
 * changed states) to the database now, as a flush would. RLG_OK (also
 * when there is nothing behind), or RLG_ESTORE.
 */
int rlg_store_flush(struct rlg_store *s, int64_t now_ms);

/*
 * Resets a client: deletes its state under policy (NULL: every policy),
 * wherever the store keeps it (the decision table and the database).
 * *deleted gets the number of states removed. RLG_OK, RLG_ESTORE, or
 * RLG_EINVAL for a store that cannot (Redis: DEL its keys).
 */
int rlg_store_reset(struct rlg_store *s, const char *client,
    const char *policy, int64_t *deleted);

/*
 * Whether the store answers, for a health check: SQLite writes a value
 * it holds over itself in a transaction it rolls back (a file that
 * cannot be written fails), the decision table probes its database,
 * Redis answers PING. Changes nothing. RLG_OK, RLG_ESTORE (errmsg says
 * why), or RLG_EINVAL for a store that cannot tell.
 */
int rlg_store_probe(struct rlg_store *s, int64_t now_ms);

/*
 * What the admin endpoints show of the store's contents (admin.c): the
 * clients each policy holds state for, and for each policy the states
 * of the clients that used most of their window (count + prev_count,
 * then tat_us: the candidates to rank as closest to their limits).
 * Bounded: past RLG_SURVEY_SCAN states of one policy only that many are
 * read (sampled). The decision table answers from its database, as of
 * its last flush.
 */
#define RLG_SURVEY_POLICIES ((size_t)RLG_POLICIES_MAX * 2)
#define RLG_SURVEY_TOP 10
#define RLG_SURVEY_SCAN 20000

struct rlg_survey_row {
	char policy[RLG_POLICY_NAME_MAX + sizeof RLG_NEW_KEYS_SUFFIX];
	char client[RLG_CLIENT_KEY_MAX + 1];
	struct rlg_state st;
};

struct rlg_store_survey {
	size_t npolicies;
	struct {
		char name[RLG_POLICY_NAME_MAX + sizeof RLG_NEW_KEYS_SUFFIX];
		int64_t clients;       /* states held, expired ones not yet
		                          pruned included */
	} policies[RLG_SURVEY_POLICIES];
	size_t ntop;
	struct rlg_survey_row top[RLG_SURVEY_POLICIES * RLG_SURVEY_TOP];
	bool sampled;                  /* a policy held more than
	                                  RLG_SURVEY_SCAN states */
};

/* Fills *out (top: the closest too, else the counts only). RLG_OK,
 * RLG_ESTORE, or RLG_EINVAL (the store cannot). */
int rlg_store_survey(struct rlg_store *s, int64_t now_ms, bool top,
    struct rlg_store_survey *out);

/* The table file of the SQLite database at path: PATH-table. Into buf. */
const char *rlg_store_table_path(const char *path, char *buf, size_t size);

/*
 * A state in bulk (the ops scan, begin, put, commit, rollback, cache and
 * ident above; the SQLite store's, store_sqlite.h):
 *   scan      calls fn for every state live at now_ms, until it returns
 *             non-zero;
 *   begin, put, commit, rollback
 *             a write transaction of many rows: begin (the store checked),
 *             put rows (an upsert each) as often as needed, commit or roll
 *             back; a failed put or commit has rolled it back;
 *   cache     the connection's page cache, in KiB;
 *   ident     the file the connection has open (checked first: a file
 *             deleted or replaced is reopened), when this handle made it
 *             (said once, then 0), and its birth time (0 where the file
 *             system keeps none).
 */
struct rlg_store_row {
	const char *policy;
	const char *client;
	struct rlg_state st;
};

#endif
