/*
 * store_sqlite_parts.h: the SQLite store's internals, shared by the files
 * of the one backend and included by nothing else (the rest of rlgate
 * sees store_sqlite.h): the handle, struct sq_store, and
 * the sq_ functions one file calls in another.
 *   store_sqlite.c         the entry: operations, open, prune, close
 *   store_sqlite_step.c    the step: a request in a transaction
 *   store_sqlite_run.c     the statements: SQL, prepare, run, report
 *   store_sqlite_rows.c    the states in bulk, reset, probe, survey,
 *                          overrides
 *   store_sqlite_db.c      the connection: open (and heal), run, report
 *   store_sqlite_schema.c  the schema: apply, migrate, guard
 *   store_sqlite_group.c   group commit
 *   store_sqlite_wal.c     upkeep: the WAL's checkpoints, the file modes
 * Each function's full contract is above its definition; here, what it
 * is for and where it lives.
 */
#ifndef RLG_STORE_SQLITE_PARTS_H
#define RLG_STORE_SQLITE_PARTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <sqlite3.h>

#include "store.h"
#include "store_group.h"

/*
 * Rows deleted per prune transaction, about: keeps the write lock short.
 * A transaction deletes at most SQ_PRUNE_BATCH state rows; the trigger
 * deletes their log rows with them, so the store shrinks the next batch
 * when the last one took many log rows along (sq_prune).
 */
#define SQ_PRUNE_BATCH 1000

/*
 * The WAL (store_sqlite_wal.c). A commit that leaves
 * SQ_WAL_CHECKPOINT_FRAMES frames in it (about 4 MB of 4 KiB pages, where
 * SQLite's own automatic checkpoint starts too) makes its connection
 * checkpoint it, and again each SQ_WAL_CHECKPOINT_STEP frames more while
 * it stays that long. A WAL of SQ_WAL_RESTART_FRAMES that did not start
 * over by itself is made to.
 *
 * The file is reused from one cycle to the next (cut back to 4 MiB at
 * every cycle and grown again, it cost 20% of the decisions per second of
 * 8 threads on one file in bench_decide): journal_size_limit cuts it back
 * to SQ_WAL_LIMIT_BYTES, above a cycle's length, only after a burst (a
 * reader that pinned it). When the load drops (the connection committed
 * fewer than SQ_WAL_QUIET_COMMITS times since its last prune), a prune
 * truncates a file longer than SQ_WAL_SHRINK_BYTES (sq_shrink).
 */
#define SQ_WAL_CHECKPOINT_FRAMES 1000
#define SQ_WAL_CHECKPOINT_STEP 250
#define SQ_WAL_RESTART_FRAMES 2000
#define SQ_WAL_LIMIT_BYTES ((int64_t)16 << 20)
#define SQ_WAL_SHRINK_BYTES ((off_t)4 << 20)
#define SQ_WAL_QUIET_COMMITS 100
/* The longest a checkpoint that takes the write lock waits for a lock. */
#define SQ_CHECKPOINT_BUSY_MS 100
/*
 * A WAL that a PASSIVE checkpoint left this many frames or more behind is
 * pinned by a reader of an old snapshot (an operator's long query): a
 * RESTART would hold the write lock waiting for it, so it is not tried.
 * rlgate's own transactions are short and leave a few dozen at most.
 */
#define SQ_WAL_PINNED_FRAMES 500

/* The prepared statements of a connection, reused by every call. */
enum sq_stmt {
	SQ_BEGIN = 0,
	SQ_COMMIT,
	SQ_ROLLBACK,
	SQ_SELECT,
	SQ_UPSERT,
	SQ_UPDATE,
	SQ_FLUSH_UPDATE,
	SQ_PRUNE,
	SQ_LOG_SELECT,
	SQ_LOG_INSERT,
	SQ_LOG_TRIM,
	SQ_CLIENTS,
	SQ_SAVEPOINT,
	SQ_RELEASE,
	SQ_ROLLBACK_TO,
	SQ_SCAN,
	SQ_RESET,
	SQ_BEGIN_READ,
	SQ_OVR_VERSION,
	SQ_OVR_ROWS,
	SQ_NSTMT
};

/* Their SQL, by enum sq_stmt (store_sqlite_run.c). */
extern const char *const sq_sql[SQ_NSTMT];


/* Step scratch for one item: the state read and the state to write. */
struct sq_item {
	struct rlg_state in;
	struct rlg_state out;
	bool stored;                  /* a row exists when out is written */
	bool live;                    /* the client had live state (not new) */
	bool skip;                    /* an if_new item not applied */
	bool append;                  /* sliding_log: add the log row */
	int64_t seq;                  /* sliding_log: its seq */
};

struct sq_store {
	struct rlg_store base;        /* first: rlg_store_* dispatch on it */
	char *path;                   /* the database file, owned */
	int busy_timeout_ms;          /* how long to wait for the write lock */
	bool sync_full;               /* PRAGMA synchronous = FULL */
	struct timespec busy_since;   /* sq_busy: when this wait began */
	uint64_t busy_waits;          /* sq_busy: pauses so far */
	struct rlg_group_member group; /* group commit (group.g: or NULL) */
	int64_t max_clients;          /* per policy; 0: no limit */
	sqlite3 *db;                  /* NULL while closed: next call opens */
	sqlite3_stmt *stmt[SQ_NSTMT];
	dev_t dev;                    /* the file db opened, to notice */
	ino_t ino;                    /* deletion or replacement */
	int64_t born_ns;              /* its birth time (statx; 0: none),
	                                 which tells a file made anew on a
	                                 reused inode */
	int64_t created_ms;           /* when this handle gave the file its
	                                 schema (committed); 0: it did not */
	bool check_armed;             /* checked_ms holds a time */
	int64_t checked_ms;           /* now_ms of the last inode check */
	bool warned_journal;          /* logged once: WAL not available */
	/*
	 * sq_authorize: preparing is true while the store prepares its own
	 * statements (its checks included); schema_ok while the schema of
	 * the connection is one sq_check_schema passed; schema_moved once
	 * SQLite compiled something again by itself (the schema changed).
	 */
	bool preparing;
	bool schema_ok;
	bool schema_moved;
	int busy_limit_ms;            /* sq_busy's limit: busy_timeout_ms,
	                                 or less for a checkpoint */
	int wal_frames;               /* the WAL's length at the last commit
	                                 (sq_wal_hook) */
	int checkpoint_at;            /* checkpoint once wal_frames is this */
	bool idle_seen;               /* the caller calls rlg_store_idle */
	int commits;                  /* since the last prune (sq_shrink) */
	char *wal_path;               /* path + "-wal", owned */
	struct sq_item *scratch;      /* step scratch, one per item */
	size_t nscratch;              /* entries in scratch */
	/*
	 * One client's sliding log, ascending, for rlg_limiter_sliding_log:
	 * reused by every item and call, grown on demand up to the largest
	 * limit seen (at most RLG_SLIDING_LOG_LIMIT_MAX) plus the items of a
	 * step. Owned; freed with the handle.
	 */
	int64_t *log_ms;
	size_t log_cap;               /* entries allocated in log_ms */
	int prune_batch;              /* state rows per prune transaction */
};

/* ---- store_sqlite_step.c: the step ---------------------------------- */

/* One request in a transaction of its own (also a request that a group
 * commit could not finish). */
int sq_step_alone(void *handle, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);

/* The decisions and writes of one request inside an open transaction
 * (nested: under a savepoint of a group's batch). */
int sq_apply(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions, bool nested,
    bool *wrote);

/* The number of clients policy holds state for (rlg_clients), read in
 * the open transaction: SQLITE_OK or the error. */
int sq_clients(struct sq_store *s, const char *policy, int64_t *clients);

/* ---- store_sqlite_run.c: the statements ------------------------------- */

/* Runs SQL text once (set-up only): 0, or -1 with errmsg set. */
int sq_exec(struct sq_store *s, const char *op, const char *sql);

/* Steps a statement that returns no rows, resets it: SQLITE_OK or the
 * error (errmsg set when op is not NULL). */
int sq_run(struct sq_store *s, const char *op, sqlite3_stmt *st);

/* errmsg = "sqlite OP on PATH: message (SQLITE_CODE)". */
void sq_sqlite_error(struct sq_store *s, const char *op, int rc);

/* errmsg = "sqlite open on PATH: " and the message, printf-style. */
void sq_open_error(struct sq_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepares every statement of sq_sql as the store's own: 0, or -1. */
int sq_prepare_all(struct sq_store *s);

/* Finalizes every prepared statement. */
void sq_finalize_all(struct sq_store *s);

/* The busy handler of every connection: waits for the write lock up to
 * busy_limit_ms. */
int sq_busy(void *arg, int count);

/* ---- store_sqlite_db.c: the connection -------------------------------- */

/* The connection open and on the file the path names: 0, or -1. */
int sq_ready(struct sq_store *s, int64_t now_ms);

/*
 * The same, the path checked now (sq_ready checks it once a second): for
 * a caller that ties other state to the file. 0, or -1.
 */
int sq_ready_now(struct sq_store *s, int64_t now_ms);

/* Opens the connection (file, pragmas, schema, statements): 0, or -1. */
int sq_connect(struct sq_store *s);

/* Finalizes the statements and closes the connection, if open. */
void sq_disconnect(struct sq_store *s);



/* After an SQLite error: rolls back, drops an unusable connection.
 * Returns RLG_ESTORE. */
int sq_failed(struct sq_store *s, int rc);

/* Rolls back an open transaction, if any. */
void sq_rollback(struct sq_store *s);



/* The operations rlg_store_probe, rlg_store_survey and
 * rlg_store_overrides (store_sqlite_rows.c). */
int sq_probe(struct rlg_store *base, int64_t now_ms);
int sq_survey(struct rlg_store *base, int64_t now_ms, bool top,
    struct rlg_store_survey *out);
int sq_overrides(struct rlg_store *base, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx);


/* ---- store_sqlite_schema.c: the schema -------------------------------- */

/* Applies db/schema.sql to a new file or migrates an older one: 0, -1. */
int sq_apply_schema(struct sq_store *s);

/* The authorizer of every connection: trigger code only rlgate's. */
int sq_authorize(void *arg, int action, const char *a3, const char *a4,
    const char *dbname, const char *inner);

/* Checks the schema again after it changed and prepares every statement
 * again, inside the caller's transaction: 0, or -1. */
int sq_recheck(struct sq_store *s);

/* Holds the file's triggers and indexes to rlgate's: 0, or -1. */
int sq_check_schema(struct sq_store *s);

/* ---- store_sqlite_group.c: group commit ------------------------------- */

/* The group commit's kind: a batch in one transaction (rlg_group_step). */
extern const struct rlg_group_kind sq_group_kind;

/* The stats operation: the group commit's counters. */
void sq_stats(const struct rlg_store *base, struct rlg_store_stats *out);

/* ---- store_sqlite_wal.c: upkeep --------------------------------------- */

/* The WAL hook of every connection: notes the WAL's length. */
int sq_wal_hook(void *arg, sqlite3 *db, const char *dbname, int frames);

/* The idle operation: a checkpoint, when the WAL is long. */
void sq_idle(struct rlg_store *base, int64_t now_ms);

/* Checkpoints the WAL (PASSIVE; RESTART once it is long). */
void sq_checkpoint(struct sq_store *s);

/* At a prune, once the load dropped: truncates a long WAL file. */
void sq_shrink(struct sq_store *s);

/* The check_files of the backend's entry (rlg_store_check_files): its
 * database, -wal, -shm and -table that others may read or write. */
int sq_check_files(const struct rlg_store_config *cfg,
    void (*warn)(void *ctx, const char *line), void *ctx);

#endif
