/*
 * store_sqlite.c: the SQLite store, one connection per handle.
 *
 * A step is one BEGIN IMMEDIATE transaction: it reads the state of each
 * (policy, client) of the request, runs the pure limiter on it and writes
 * the new states back only when every policy admits the request. The write
 * lock taken by BEGIN IMMEDIATE makes read, decide and write one atomic step
 * for every process and thread that shares the file, so counting is exact;
 * a rejected request ends in ROLLBACK and writes nothing. The file is in WAL
 * mode: readers (the operator's sqlite3 shell) never block the gateway.
 * With synchronous = normal (the default) a commit costs no fsync; with
 * full it costs one, and group commit (below) lets the threads of a
 * process share it. A step that finds the write lock taken waits in
 * sq_busy, in pauses of 50 us doubling to 2 ms, up to busy_timeout_ms.
 *
 * A sliding_log policy keeps one rlg_log row per admitted request: the step
 * reads the client's in-window rows into a buffer of the handle, and when
 * the request is admitted adds its row and deletes the client's rows that
 * left the window, so a client never has more rows than its limit. Its
 * state row (count, oldest, expires_ms = newest + window) is what pruning
 * goes by: a trigger of the schema deletes the log with the state row.
 *
 * The schema is db/schema.sql (version 3). Files of versions 1 and 2 are
 * migrated in place when opened (sq_migrations).
 *
 * max_clients: the schema's triggers keep, per policy, the number of its
 * rows in rlg_clients, in the same transaction. A step that adds a client
 * reads that count before it commits; past max_clients it first prunes one
 * batch of expired rows in the same transaction, and if the policy is
 * still over, rolls back and returns RLG_EFULL. Clients that have a row
 * are never refused for it, and nobody's state is evicted to make room.
 *
 * The handle heals by itself. If the file cannot be opened (directory
 * missing, not a database, newer schema, read-only) the handle still
 * exists, says why, and the next call tries again. After an error that
 * leaves the connection unusable (I/O error, corruption, file gone) the
 * connection is closed and the next call reopens it, at most one open per
 * call. Once a second (by the caller's now_ms) a step checks that the path
 * still names the file it opened, so a database deleted or replaced while
 * rlgate serves is noticed and reopened (and recreated with its schema).
 *
 * The file runs no code rlgate did not write. Anyone who can write the
 * file can add a trigger to it (one that resets a count on every update
 * would admit everyone), and a trigger runs inside the statement that
 * fires it: inside rlgate. So every connection is opened with
 * SQLITE_DBCONFIG_DEFENSIVE and trusted_schema off, and the schema is
 * checked against rlgate's own (db/schema.sql applied to an in-memory
 * database, once per process): every trigger in the file, and every index
 * on rlgate's tables, must be one that schema.sql creates, with the same
 * SQL text, and all of those must be there (sq_check_schema). A file that
 * fails is refused like any store fault, with the object and the fix in
 * the message, and retried on the next call. Views and tables of the
 * operator's own stay: rlgate never reads them.
 *
 * A trigger added while rlgate serves is caught before it can run, by an
 * authorizer (sq_authorize) and the order of each transaction. SQLite
 * compiles a trigger into each statement that may fire it, when the
 * statement is prepared; a statement prepared before a schema change is
 * prepared again by SQLite itself when it next runs. The authorizer lets
 * trigger code compile only while rlgate prepares its own statements
 * itself, right after a check of the schema that passed, and only for
 * rlgate's triggers: anything SQLite compiles again on its own gets no
 * trigger code at all (the statement fails, SQLITE_AUTH). Each transaction
 * of a step or a prune reads before it writes, so a schema change shows
 * as a read statement compiled again (the authorizer sees it); the step
 * then checks the schema inside that transaction, under the write lock,
 * where nobody can change it, and prepares every statement again before
 * its first write. No window is left: code that was not checked never
 * runs, and what was checked cannot change before it runs.
 *
 * The WAL stays bounded. Under continuous writes from several processes
 * SQLite's automatic checkpoint (PASSIVE, after each commit once the WAL
 * is long) copies pages but seldom lets the WAL start over: some
 * connection nearly always reads from it. And nothing cuts the file back,
 * so it keeps the largest size it ever reached (tens of MB after 20,000
 * new clients from 8 processes). The store replaces the automatic
 * checkpoint with a WAL hook that only notes the WAL's length; past
 * SQ_WAL_CHECKPOINT_FRAMES it checkpoints (sq_checkpoint): PASSIVE, which
 * copies without the write lock, and past SQ_WAL_RESTART_FRAMES also
 * RESTART, which takes the write lock briefly (at most
 * SQ_CHECKPOINT_BUSY_MS of waiting) so that the WAL starts over. A reader
 * of an old snapshot (which SQLite cannot copy past) is left alone rather
 * than waited for. journal_size_limit cuts the file back after a burst,
 * and a prune once the load has dropped truncates it (sq_shrink). The
 * server runs the checkpoints between requests (rlg_store_idle), outside
 * any answer's time; a caller that never calls rlg_store_idle gets them
 * in the step that found the WAL long, as SQLite's own would.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "store_stats.h"
#include "util.h"

/* db/schema.sql, compiled in by the build as app/schema.c. */
extern const char rlg_schema_sql[];

/* The PRAGMA user_version that db/schema.sql sets. */
#define SQ_SCHEMA_VERSION 3

/*
 * Rows deleted per prune transaction, about: keeps the write lock short.
 * A transaction deletes at most SQ_PRUNE_BATCH state rows; the trigger
 * deletes their log rows with them, so the store shrinks the next batch
 * when the last one took many log rows along (sq_prune).
 */
#define SQ_PRUNE_BATCH 1000
#define SQ_PRUNE_ROWS (10 * SQ_PRUNE_BATCH)

/* The sliding-log buffer starts with this many entries and doubles. */
#define SQ_LOG_INITIAL 64

/*
 * Stored expiries are rounded up to this (a whole second): pruning a row
 * up to a second late changes nothing, and the expiry of a token bucket
 * (its tat, which every admitted request moves on) then changes, and with
 * it the index, about once a second instead of on every request, so the
 * UPDATE without expires_ms serves the rest (about 1.5x the decisions per
 * second of a hot bucket). Windows are whole seconds: a fixed or sliding
 * window's expiry is one already.
 */
#define SQ_EXPIRES_GRAIN_MS 1000

/* How often (in ms of the caller's clock) a step checks the file's inode. */
#define SQ_CHECK_MS 1000

/*
 * The WAL (sq_checkpoint). A commit that leaves SQ_WAL_CHECKPOINT_FRAMES
 * frames in it (about 4 MB of 4 KiB pages, where SQLite's own automatic
 * checkpoint starts too) makes its connection checkpoint it, and again
 * each SQ_WAL_CHECKPOINT_STEP frames more while it stays that long. A WAL
 * of SQ_WAL_RESTART_FRAMES that did not start over by itself is made to.
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
	SQ_PRUNE,
	SQ_LOG_SELECT,
	SQ_LOG_INSERT,
	SQ_LOG_TRIM,
	SQ_CLIENTS,
	SQ_SAVEPOINT,
	SQ_RELEASE,
	SQ_ROLLBACK_TO,
	SQ_NSTMT
};

/* A waiter's result while it is not known yet, and "run it alone". */
#define SQ_PENDING (-1000)
#define SQ_ALONE   (-1001)

/*
 * Group commit. The handles of one process that open the same path with
 * group commit on share one sq_group. A step queues itself there; the
 * first thread to find no leader takes the whole queue and runs it on its
 * own connection in one transaction, each request in queue order exactly
 * as if it came alone (it sees the writes of those before it), then
 * commits once and wakes them. Requests that arrive meanwhile make the
 * next batch. Any failure inside a batch rolls it back whole and every
 * request of it runs again alone, so errors stay per request and nothing
 * is half written.
 */
struct sq_waiter {
	struct sq_store *s;               /* the waiting thread's handle */
	const struct rlg_store_item *items;
	size_t n;
	int64_t now_ms;
	struct rlg_decision *decisions;
	int rc;                           /* SQ_PENDING until done */
	int res;                          /* the leader's result, then rc */
	struct sq_waiter *next;
};

struct sq_group {
	char *path;                       /* the key: the database path */
	int refs;                         /* handles sharing it */
	pthread_mutex_t mu;               /* guards all below */
	struct sq_waiter *head;           /* the queue, oldest first */
	struct sq_waiter **tailp;
	bool leading;                     /* a batch is running */
	uint64_t batches;                 /* transactions a leader committed */
	uint64_t steps;                   /* requests they carried */
	struct sq_group *next;            /* sq_groups list */
};

static pthread_mutex_t sq_groups_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sq_group *sq_groups;

/*
 * rlgate's schema as SQLite stores it: db/schema.sql applied to an
 * in-memory database, read back from its sqlite_master, once per process
 * (sq_ref_build). What sq_check_schema holds a file to, and the names of
 * the only triggers sq_authorize lets run. Built once and never freed.
 */
struct sq_object {
	char *type;                   /* "table", "index", "trigger", "view" */
	char *name;
	char *tbl_name;               /* the table it belongs to */
	char *sql;                    /* its CREATE text; NULL: automatic */
};

static pthread_once_t sq_ref_once = PTHREAD_ONCE_INIT;
static struct sq_object *sq_ref;
static size_t sq_nref;
static char sq_ref_error[256];        /* empty when sq_ref is built */

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
	struct sq_group *group;       /* group commit, or NULL */
	pthread_cond_t cv;            /* group: this handle's waiter wakes */
	int64_t max_clients;          /* per policy; 0: no limit */
	sqlite3 *db;                  /* NULL while closed: next call opens */
	sqlite3_stmt *stmt[SQ_NSTMT];
	dev_t dev;                    /* the file db opened, to notice */
	ino_t ino;                    /* deletion or replacement */
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

static int sq_open(const struct rlg_store_config *cfg, struct rlg_store **out);
static int sq_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static int sq_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted);
static void sq_stats(const struct rlg_store *base,
    struct rlg_store_stats *out);
static void sq_close(struct rlg_store *base);
static void sq_idle(struct rlg_store *base, int64_t now_ms);

static int sq_step_alone(struct sq_store *s,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions);
static int sq_apply(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions, bool nested,
    bool *wrote);
static int sq_group_step(struct sq_store *s,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions);
static void sq_lead(struct sq_store *s, struct sq_waiter *batch);
static struct sq_group *sq_group_join(const char *path);
static void sq_group_leave(struct sq_group *g);
static void sq_grow_scratch(struct sq_store *s, size_t n);
static int sq_busy(void *arg, int count);
static int sq_ready(struct sq_store *s, int64_t now_ms);
static bool sq_same_file(const struct sq_store *s);
static int sq_connect(struct sq_store *s);
static void sq_disconnect(struct sq_store *s);
static int sq_create_file(struct sq_store *s);
static void sq_unlink_suffix(const char *path, const char *suffix);
static int sq_check_header(struct sq_store *s);
static int sq_set_wal(struct sq_store *s);
static int sq_apply_schema(struct sq_store *s);
static int sq_user_version(struct sq_store *s, int *version);
static int sq_exec(struct sq_store *s, const char *op, const char *sql);
static int sq_run(struct sq_store *s, const char *op, sqlite3_stmt *st);
static int sq_migrate(struct sq_store *s, int from);
static int sq_decide(struct sq_store *s, const struct rlg_store_item *items,
    size_t i, int64_t now_ms, struct rlg_decision *d);
static int sq_decide_log(struct sq_store *s,
    const struct rlg_store_item *items, size_t i, int64_t now_ms,
    struct rlg_decision *d);
static int sq_refused(struct sq_store *s, const struct rlg_policy *policy);
static int sq_check_room(struct sq_store *s,
    const struct rlg_store_item *items, size_t n,
    const struct rlg_decision *decisions, int64_t now_ms);
static int sq_clients(struct sq_store *s, const char *policy,
    int64_t *clients);
static bool sq_same_key(const struct rlg_store_item *a,
    const struct rlg_store_item *b);
static int sq_load(struct sq_store *s, const struct rlg_store_item *item,
    struct sq_item *x);
static int sq_load_log(struct sq_store *s, const struct rlg_store_item *item,
    int64_t now_ms, size_t *n, int64_t *seq);
static void sq_log_reserve(struct sq_store *s, size_t n, size_t need);
static int sq_save(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x);
static int sq_save_log(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x, int64_t now_ms);
static int64_t sq_expires(int64_t expires_ms);
static int sq_failed(struct sq_store *s, int rc);
static void sq_rollback(struct sq_store *s);
static void sq_sqlite_error(struct sq_store *s, const char *op, int rc);
static bool sq_unusable(int rc);
static const char *sq_code_name(int rc, char *buf, size_t size);
static int sq_prepare_all(struct sq_store *s);
static void sq_finalize_all(struct sq_store *s);
static int sq_authorize(void *arg, int action, const char *a3,
    const char *a4, const char *dbname, const char *inner);
static int sq_recheck(struct sq_store *s);
static int sq_check_schema(struct sq_store *s);
static void sq_ref_build(void);
static const struct sq_object *sq_ref_find(const char *type,
    const char *name);
static bool sq_ref_table(const char *name);
static const char *sq_quote(const char *name, char *buf, size_t size);
static int sq_wal_hook(void *arg, sqlite3 *db, const char *dbname,
    int frames);
static void sq_checkpoint(struct sq_store *s);
static void sq_shrink(struct sq_store *s);
static void sq_warn_file(const char *path, const char *suffix, char *files,
    size_t fsize, char *names, size_t nsize, unsigned *bad,
    unsigned *bad_bits);

const struct rlg_store_ops rlg_store_sqlite_ops = {
	.name = "sqlite",
	.open = sq_open,
	.step = sq_step,
	.prune = sq_prune,
	.close = sq_close,
	.stats = sq_stats,
	.idle = sq_idle,
};

static const char *const sq_sql[SQ_NSTMT] = {
	[SQ_BEGIN] = "BEGIN IMMEDIATE",
	[SQ_COMMIT] = "COMMIT",
	[SQ_ROLLBACK] = "ROLLBACK",
	[SQ_SELECT] =
	    "SELECT window_start_ms, count, expires_ms, prev_count, tat_us"
	    " FROM rlg_state WHERE policy = ?1 AND client = ?2",
	[SQ_UPSERT] =
	    "INSERT INTO rlg_state (policy, client, window_start_ms, count,"
	    " expires_ms, prev_count, tat_us)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
	    " ON CONFLICT (policy, client) DO UPDATE SET"
	    " window_start_ms = excluded.window_start_ms,"
	    " count = excluded.count,"
	    " expires_ms = excluded.expires_ms,"
	    " prev_count = excluded.prev_count,"
	    " tat_us = excluded.tat_us",
	/*
	 * Most admitted requests of a fixed or sliding window change only
	 * the count of a stored row. Leaving expires_ms out of the SET list
	 * spares the index: one page per commit instead of two, about 1.5x
	 * the decisions per second.
	 */
	[SQ_UPDATE] =
	    "UPDATE rlg_state SET window_start_ms = ?3, count = ?4,"
	    " prev_count = ?5, tat_us = ?6"
	    " WHERE policy = ?1 AND client = ?2",
	/*
	 * A bounded batch: the inner SELECT walks the expires_ms index; the
	 * schema's trigger deletes each state's log rows with it.
	 */
	[SQ_PRUNE] =
	    "DELETE FROM rlg_state WHERE (policy, client) IN"
	    " (SELECT policy, client FROM rlg_state"
	    " WHERE expires_ms <= ?1 LIMIT ?2)",
	/*
	 * The newest ?4 (the limit) in-window rows, newest first: all of
	 * them while the client is under its limit; when it is over (the
	 * limit was lowered), the limit-th newest is the one whose leaving
	 * admits again, as the limiter wants it. One range of the primary
	 * key, read backwards.
	 */
	[SQ_LOG_SELECT] =
	    "SELECT ts_ms, seq FROM rlg_log"
	    " WHERE policy = ?1 AND client = ?2 AND ts_ms > ?3"
	    " ORDER BY ts_ms DESC, seq DESC LIMIT ?4",
	[SQ_LOG_INSERT] =
	    "INSERT INTO rlg_log (policy, client, ts_ms, seq)"
	    " VALUES (?1, ?2, ?3, ?4)",
	[SQ_LOG_TRIM] =
	    "DELETE FROM rlg_log"
	    " WHERE policy = ?1 AND client = ?2 AND ts_ms <= ?3",
	/* The schema's triggers keep this count (max_clients). */
	[SQ_CLIENTS] =
	    "SELECT clients FROM rlg_clients WHERE policy = ?1",
	/* Group commit: one request's writes, undone alone if it is full. */
	[SQ_SAVEPOINT] = "SAVEPOINT rlg_step",
	[SQ_RELEASE] = "RELEASE rlg_step",
	[SQ_ROLLBACK_TO] = "ROLLBACK TO rlg_step",
};

/*
 * Migrations: sq_migrations[v] brings the objects of a version v file to
 * what db/schema.sql creates at version v + 1, where schema.sql's IF NOT
 * EXISTS statements would not: columns added to an existing table, views
 * whose text changed (dropped here, created again by schema.sql). After
 * the steps from the file's version on, rlg_schema_sql runs in the same
 * transaction: it adds the new tables and triggers, the views, and sets
 * user_version. A file of version v < SQ_SCHEMA_VERSION needs one entry
 * here for each version from v on.
 *
 * 1 -> 2: the columns of sliding_window and token_bucket (appended, as
 * ALTER TABLE adds them; schema.sql lists them last too), and the views,
 * which show them. rlg_log and its trigger are new in schema.sql.
 *
 * 2 -> 3: nothing to alter. schema.sql adds rlg_clients, its triggers and
 * the counts of the rows already there.
 *
 * A version that changes the text of one of rlgate's triggers or indexes
 * must DROP it here: schema.sql's IF NOT EXISTS would keep the old text,
 * and sq_check_schema refuses any text but the one schema.sql creates.
 */
static const char *const sq_migrations[SQ_SCHEMA_VERSION] = {
	[1] =
	    "ALTER TABLE rlg_state ADD COLUMN"
	    " prev_count INTEGER NOT NULL DEFAULT 0;"
	    "ALTER TABLE rlg_state ADD COLUMN"
	    " tat_us INTEGER NOT NULL DEFAULT 0;"
	    "DROP VIEW IF EXISTS clients;"
	    "DROP VIEW IF EXISTS summary;",
	[2] = "",
};

/* Result codes by name, for messages: sqlite3_errstr has no names. */
static const struct {
	int code;
	const char *name;
} sq_codes[] = {
	{ SQLITE_ERROR, "SQLITE_ERROR" },
	{ SQLITE_INTERNAL, "SQLITE_INTERNAL" },
	{ SQLITE_PERM, "SQLITE_PERM" },
	{ SQLITE_ABORT, "SQLITE_ABORT" },
	{ SQLITE_BUSY, "SQLITE_BUSY" },
	{ SQLITE_BUSY_RECOVERY, "SQLITE_BUSY_RECOVERY" },
	{ SQLITE_BUSY_SNAPSHOT, "SQLITE_BUSY_SNAPSHOT" },
	{ SQLITE_LOCKED, "SQLITE_LOCKED" },
	{ SQLITE_NOMEM, "SQLITE_NOMEM" },
	{ SQLITE_READONLY, "SQLITE_READONLY" },
	{ SQLITE_READONLY_RECOVERY, "SQLITE_READONLY_RECOVERY" },
	{ SQLITE_READONLY_CANTLOCK, "SQLITE_READONLY_CANTLOCK" },
	{ SQLITE_READONLY_ROLLBACK, "SQLITE_READONLY_ROLLBACK" },
	{ SQLITE_READONLY_DBMOVED, "SQLITE_READONLY_DBMOVED" },
	{ SQLITE_READONLY_CANTINIT, "SQLITE_READONLY_CANTINIT" },
	{ SQLITE_READONLY_DIRECTORY, "SQLITE_READONLY_DIRECTORY" },
	{ SQLITE_INTERRUPT, "SQLITE_INTERRUPT" },
	{ SQLITE_IOERR, "SQLITE_IOERR" },
	{ SQLITE_IOERR_READ, "SQLITE_IOERR_READ" },
	{ SQLITE_IOERR_SHORT_READ, "SQLITE_IOERR_SHORT_READ" },
	{ SQLITE_IOERR_WRITE, "SQLITE_IOERR_WRITE" },
	{ SQLITE_IOERR_FSYNC, "SQLITE_IOERR_FSYNC" },
	{ SQLITE_IOERR_TRUNCATE, "SQLITE_IOERR_TRUNCATE" },
	{ SQLITE_IOERR_FSTAT, "SQLITE_IOERR_FSTAT" },
	{ SQLITE_IOERR_LOCK, "SQLITE_IOERR_LOCK" },
	{ SQLITE_IOERR_SHMOPEN, "SQLITE_IOERR_SHMOPEN" },
	{ SQLITE_IOERR_SHMSIZE, "SQLITE_IOERR_SHMSIZE" },
	{ SQLITE_IOERR_SHMMAP, "SQLITE_IOERR_SHMMAP" },
	{ SQLITE_CORRUPT, "SQLITE_CORRUPT" },
	{ SQLITE_NOTFOUND, "SQLITE_NOTFOUND" },
	{ SQLITE_FULL, "SQLITE_FULL" },
	{ SQLITE_CANTOPEN, "SQLITE_CANTOPEN" },
	{ SQLITE_CANTOPEN_ISDIR, "SQLITE_CANTOPEN_ISDIR" },
	{ SQLITE_CANTOPEN_FULLPATH, "SQLITE_CANTOPEN_FULLPATH" },
	{ SQLITE_PROTOCOL, "SQLITE_PROTOCOL" },
	{ SQLITE_SCHEMA, "SQLITE_SCHEMA" },
	{ SQLITE_TOOBIG, "SQLITE_TOOBIG" },
	{ SQLITE_CONSTRAINT, "SQLITE_CONSTRAINT" },
	{ SQLITE_MISMATCH, "SQLITE_MISMATCH" },
	{ SQLITE_MISUSE, "SQLITE_MISUSE" },
	{ SQLITE_NOLFS, "SQLITE_NOLFS" },
	{ SQLITE_AUTH, "SQLITE_AUTH" },
	{ SQLITE_RANGE, "SQLITE_RANGE" },
	{ SQLITE_NOTADB, "SQLITE_NOTADB" },
};

static int
sq_open(const struct rlg_store_config *cfg, struct rlg_store **out)
{
	struct sq_store *s;

	assert(cfg != NULL && out != NULL);
	s = rlg_xcalloc(1, sizeof *s);
	s->base.ops = &rlg_store_sqlite_ops;
	s->path = rlg_xstrdup(cfg->sqlite.path != NULL ? cfg->sqlite.path : "");
	s->wal_path = rlg_xmalloc(strlen(s->path) + sizeof "-wal");
	memcpy(s->wal_path, s->path, strlen(s->path));
	memcpy(s->wal_path + strlen(s->path), "-wal", sizeof "-wal");
	s->busy_timeout_ms = cfg->sqlite.busy_timeout_ms > 0 ?
	    cfg->sqlite.busy_timeout_ms : 0;
	s->busy_limit_ms = s->busy_timeout_ms;
	s->max_clients = cfg->sqlite.max_clients > 0 ?
	    cfg->sqlite.max_clients : 0;
	s->sync_full = cfg->sqlite.synchronous == RLG_SYNC_FULL;
	if (cfg->sqlite.group_commit == RLG_GROUP_ON ||
	    (cfg->sqlite.group_commit == RLG_GROUP_AUTO && s->sync_full)) {
		s->group = sq_group_join(s->path);
		pthread_cond_init(&s->cv, NULL);
	}
	s->nscratch = 4;
	s->scratch = rlg_xcalloc(s->nscratch, sizeof *s->scratch);
	s->prune_batch = SQ_PRUNE_BATCH;
	snprintf(s->base.errmsg, sizeof s->base.errmsg, "no error");
	*out = &s->base;
	return sq_connect(s) == 0 ? RLG_OK : RLG_ESTORE;
}

static int
sq_step(struct rlg_store *base, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions)
{
	struct sq_store *s = (struct sq_store *)base;
	int rc;

	/* rlg_store_step has checked the items. */
	if (s->group != NULL)
		rc = sq_group_step(s, items, n, now_ms, decisions);
	else
		rc = sq_step_alone(s, items, n, now_ms, decisions);
	/* Nobody calls rlg_store_idle: the WAL is this step's to bound. */
	if (!s->idle_seen && s->wal_frames >= s->checkpoint_at)
		sq_checkpoint(s);
	return rc;
}

/* One request in a transaction of its own. */
static int
sq_step_alone(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	bool wrote;
	int rc, end;

	if (sq_ready(s, now_ms) != 0)
		return RLG_ESTORE;
	if ((rc = sq_run(s, "step", s->stmt[SQ_BEGIN])) != SQLITE_OK)
		return sq_failed(s, rc);
	rc = sq_apply(s, items, n, now_ms, decisions, false, &wrote);
	if (rc == RLG_EFULL || (rc == RLG_OK && !wrote)) {
		/* Rejected or full: no quota consumed, nothing written. */
		if ((end = sq_run(s, "step", s->stmt[SQ_ROLLBACK])) !=
		    SQLITE_OK)
			return sq_failed(s, end);
		return rc;
	}
	if (rc != RLG_OK)
		return rc;
	if ((rc = sq_run(s, "step", s->stmt[SQ_COMMIT])) != SQLITE_OK)
		return sq_failed(s, rc);
	return RLG_OK;
}

/*
 * The decisions and writes of one request inside an open transaction.
 * *wrote tells whether it was admitted (its states written). RLG_OK, or
 * RLG_EFULL with nothing of this request written (when nested, its writes
 * are undone to a savepoint; else the caller rolls back), the transaction
 * still open; else the transaction is rolled back and RLG_ESTORE or
 * RLG_EINVAL returned.
 */
static int
sq_apply(struct sq_store *s, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions, bool nested, bool *wrote)
{
	bool admitted = true, fresh = false;
	size_t i;
	int rc;

	*wrote = false;
	sq_grow_scratch(s, n);
	for (i = 0; i < n; i++) {
		/* A charge for a new key, and the key is not new. */
		s->scratch[i].skip = items[i].if_new && s->scratch[i - 1].live;
		if (s->scratch[i].skip) {
			rlg_store_skipped(items[i].policy, &decisions[i]);
			continue;
		}
		if ((rc = sq_decide(s, items, i, now_ms, &decisions[i])) !=
		    RLG_OK)
			return rc;
		/* An advisory item (dry run) never rejects the request. */
		if (!decisions[i].admitted && !items[i].advisory)
			admitted = false;
	}
	/*
	 * The reads above were compiled again if the schema changed: check
	 * it now, under the write lock, before any statement that can fire
	 * a trigger runs (see the file comment).
	 */
	if (s->schema_moved && sq_recheck(s) != 0)
		return sq_failed(s, SQLITE_AUTH);
	if (!admitted)
		return RLG_OK;
	/* Only a request that may add a client can find the store full. */
	for (i = 0; i < n && s->max_clients > 0 && !fresh; i++)
		fresh = decisions[i].admitted && !s->scratch[i].skip &&
		    (!s->scratch[i].stored ||
		    items[i].policy->lim.algorithm == RLG_ALG_SLIDING_LOG);
	if (fresh && nested &&
	    (rc = sq_run(s, "step", s->stmt[SQ_SAVEPOINT])) != SQLITE_OK)
		return sq_failed(s, rc);
	for (i = 0; i < n; i++) {
		/* An advisory rejection consumes nothing; a skip is none. */
		if (!decisions[i].admitted || s->scratch[i].skip)
			continue;
		if (items[i].policy->lim.algorithm == RLG_ALG_SLIDING_LOG)
			rc = sq_save_log(s, &items[i], &s->scratch[i], now_ms);
		else
			rc = sq_save(s, &items[i], &s->scratch[i]);
		if (rc != SQLITE_OK)
			return sq_failed(s, rc);
	}
	if (!fresh) {
		*wrote = true;
		return RLG_OK;
	}
	rc = sq_check_room(s, items, n, decisions, now_ms);
	if (rc == RLG_EFULL) {
		if (nested && ((rc = sq_run(s, "step",
		    s->stmt[SQ_ROLLBACK_TO])) != SQLITE_OK ||
		    (rc = sq_run(s, "step", s->stmt[SQ_RELEASE])) !=
		    SQLITE_OK))
			return sq_failed(s, rc);
		return RLG_EFULL;
	}
	if (rc != RLG_OK)
		return rc;
	if (nested && (rc = sq_run(s, "step", s->stmt[SQ_RELEASE])) !=
	    SQLITE_OK)
		return sq_failed(s, rc);
	*wrote = true;
	return RLG_OK;
}

/*
 * A step through the group: queue, then either lead a batch (the whole
 * queue) or wait until a leader has done this request. A request the
 * batch could not finish runs again alone.
 */
static int
sq_group_step(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	struct sq_group *g = s->group;
	struct sq_waiter w, *x, *next, *batch;

	w.s = s;
	w.items = items;
	w.n = n;
	w.now_ms = now_ms;
	w.decisions = decisions;
	w.rc = SQ_PENDING;
	w.next = NULL;
	pthread_mutex_lock(&g->mu);
	*g->tailp = &w;
	g->tailp = &w.next;
	while (w.rc == SQ_PENDING && g->leading)
		pthread_cond_wait(&s->cv, &g->mu);
	if (w.rc == SQ_PENDING) {
		batch = g->head;
		g->head = NULL;
		g->tailp = &g->head;
		g->leading = true;
		pthread_mutex_unlock(&g->mu);
		sq_lead(s, batch);
		pthread_mutex_lock(&g->mu);
		g->leading = false;
		g->batches++;
		for (x = batch; x != NULL; x = next) {
			next = x->next;   /* x may return once signalled */
			x->rc = x->res;
			g->steps++;
			if (x != &w)
				pthread_cond_signal(&x->s->cv);
		}
		/* The oldest of those who came meanwhile leads next. */
		if (g->head != NULL)
			pthread_cond_signal(&g->head->s->cv);
	}
	pthread_mutex_unlock(&g->mu);
	if (w.rc == SQ_ALONE)
		return sq_step_alone(s, items, n, now_ms, decisions);
	return w.rc;
}

/*
 * Runs a batch in one transaction on the leader's connection and sets
 * every waiter's res, outside the group's mutex: the leader hands it over
 * as rc under the mutex, so a waiter woken early never reads it half done. Each request is applied as if alone;
 * one that finds its policy full is undone to its savepoint and gets
 * RLG_EFULL. Any other failure rolls the batch back and sends everyone to
 * run alone.
 */
static void
sq_lead(struct sq_store *s, struct sq_waiter *batch)
{
	struct sq_waiter *x;
	bool wrote;
	int rc;

	if (sq_ready(s, batch->now_ms) != 0 ||
	    sq_run(s, "step", s->stmt[SQ_BEGIN]) != SQLITE_OK)
		goto alone;
	for (x = batch; x != NULL; x = x->next) {
		rc = sq_apply(s, x->items, x->n, x->now_ms, x->decisions,
		    true, &wrote);
		if (rc != RLG_OK && rc != RLG_EFULL)
			goto alone;     /* the transaction is rolled back */
		if (rc == RLG_EFULL && x->s != s)
			memcpy(x->s->base.errmsg, s->base.errmsg, sizeof s->base.errmsg);
		x->res = rc;
	}
	if ((rc = sq_run(s, "step", s->stmt[SQ_COMMIT])) != SQLITE_OK) {
		(void)sq_failed(s, rc);
		goto alone;
	}
	return;

alone:
	if (s->db != NULL && !sqlite3_get_autocommit(s->db))
		(void)sq_failed(s, SQLITE_ERROR);
	for (x = batch; x != NULL; x = x->next)
		x->res = SQ_ALONE;
}

/* The group of this process for path, made on first use. */
static struct sq_group *
sq_group_join(const char *path)
{
	struct sq_group *g;

	pthread_mutex_lock(&sq_groups_mu);
	for (g = sq_groups; g != NULL; g = g->next)
		if (strcmp(g->path, path) == 0)
			break;
	if (g == NULL) {
		g = rlg_xcalloc(1, sizeof *g);
		g->path = rlg_xstrdup(path);
		pthread_mutex_init(&g->mu, NULL);
		g->tailp = &g->head;
		g->next = sq_groups;
		sq_groups = g;
	}
	g->refs++;
	pthread_mutex_unlock(&sq_groups_mu);
	return g;
}

static void
sq_group_leave(struct sq_group *g)
{
	struct sq_group **pp;

	pthread_mutex_lock(&sq_groups_mu);
	if (--g->refs == 0) {
		for (pp = &sq_groups; *pp != g; pp = &(*pp)->next)
			;
		*pp = g->next;
		pthread_mutex_destroy(&g->mu);
		free(g->path);
		free(g);
	}
	pthread_mutex_unlock(&sq_groups_mu);
}

/* The group commit's counters, for tests and benchmarks. */
static void
sq_stats(const struct rlg_store *base, struct rlg_store_stats *out)
{
	const struct sq_store *s = (const struct sq_store *)base;

	if (s->group == NULL)
		return;
	pthread_mutex_lock(&s->group->mu);
	out->group = true;
	out->group_batches = s->group->batches;
	out->group_steps = s->group->steps;
	pthread_mutex_unlock(&s->group->mu);
}

/* Makes room for n items in the step scratch. */
static void
sq_grow_scratch(struct sq_store *s, size_t n)
{
	if (n > s->nscratch) {
		free(s->scratch);
		s->nscratch = n;
		s->scratch = rlg_xcalloc(n, sizeof *s->scratch);
	}
}

/*
 * Before the commit of an admitted step: every policy to which the step
 * may have added a client (a state row that was not there; a sliding_log
 * item, whose row is not read) must hold at most max_clients. Over it, one
 * batch of expired rows is pruned in this transaction and the count read
 * again. RLG_OK; RLG_EFULL with the transaction still open (the caller
 * undoes the step); or RLG_ESTORE with the transaction rolled back.
 */
static int
sq_check_room(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, const struct rlg_decision *decisions, int64_t now_ms)
{
	sqlite3_stmt *st = s->stmt[SQ_PRUNE];
	bool pruned = false;
	int64_t clients;
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		if (!decisions[i].admitted || s->scratch[i].skip ||
		    (s->scratch[i].stored &&
		    items[i].policy->lim.algorithm != RLG_ALG_SLIDING_LOG))
			continue;
		if ((rc = sq_clients(s, items[i].policy->name, &clients)) !=
		    SQLITE_OK)
			return sq_failed(s, rc);
		if (clients > s->max_clients && !pruned) {
			pruned = true;
			sqlite3_bind_int64(st, 1, now_ms);
			sqlite3_bind_int(st, 2, SQ_PRUNE_BATCH);
			if ((rc = sq_run(s, "prune", st)) != SQLITE_OK ||
			    (rc = sq_clients(s, items[i].policy->name,
			    &clients)) != SQLITE_OK)
				return sq_failed(s, rc);
		}
		if (clients > s->max_clients) {
			rlg_store_seterr(&s->base, "store full: policy \"%s\" holds state"
			    " for max_clients = %lld clients; new clients"
			    " are refused until states expire",
			    items[i].policy->name,
			    (long long)s->max_clients);
			return RLG_EFULL;
		}
	}
	return RLG_OK;
}

/* The number of clients policy holds state for (0 if it has none). */
static int
sq_clients(struct sq_store *s, const char *policy, int64_t *clients)
{
	sqlite3_stmt *st = s->stmt[SQ_CLIENTS];
	int rc;

	*clients = 0;
	sqlite3_bind_text(st, 1, policy, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*clients = sqlite3_column_int64(st, 0);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		rc = SQLITE_OK;
	else
		sq_sqlite_error(s, "step", rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

/*
 * Item i of a step, inside its transaction: reads what it needs, runs the
 * limiter, leaves what to write in s->scratch[i] and the decision in *d.
 * RLG_OK; else the transaction is closed and the step's result returned
 * (RLG_ESTORE, or RLG_EINVAL for a policy the limiter refuses).
 */
static int
sq_decide(struct sq_store *s, const struct rlg_store_item *items, size_t i,
    int64_t now_ms, struct rlg_decision *d)
{
	struct sq_item *x = &s->scratch[i];
	bool found = false;
	size_t j;
	int rc;

	if (items[i].policy->lim.algorithm == RLG_ALG_SLIDING_LOG)
		return sq_decide_log(s, items, i, now_ms, d);
	x->append = false;
	/*
	 * The same (policy, client) twice in one request counts twice: the
	 * second sees the first one's new state, and its row exists by the
	 * time the second is written.
	 */
	for (j = i; j-- > 0 && !found; ) {
		if (sq_same_key(&items[j], &items[i])) {
			x->in = s->scratch[j].out;
			x->stored = true;
			found = true;
		}
	}
	if (!found && (rc = sq_load(s, &items[i], x)) != SQLITE_OK)
		return sq_failed(s, rc);
	x->live = x->stored && x->in.expires_ms > now_ms;
	if (rlg_limiter_step(&items[i].policy->lim, &x->in, now_ms, &x->out,
	    d) != RLG_OK)
		return sq_refused(s, items[i].policy);
	return RLG_OK;
}

/*
 * A sliding_log item: its log into s->log_ms, then the limiter. The state
 * row is not read: the log is the state, the row only its summary for
 * pruning and the views, written in full when admitted.
 *
 * The same (policy, client) earlier in the step has not written its row
 * yet; each one that was admitted adds one entry at now (clamped) to what
 * the database holds, so the log stays what it would be had the two
 * requests come one after the other. Entries that left the window are
 * never read, so the earlier items' trimming changes nothing here.
 */
static int
sq_decide_log(struct sq_store *s, const struct rlg_store_item *items,
    size_t i, int64_t now_ms, struct rlg_decision *d)
{
	const struct rlg_policy *p = items[i].policy;
	struct sq_item *x = &s->scratch[i];
	int64_t now = rlg_limiter_clamp_time(now_ms), seq;
	size_t n, k = 0, j, at, drop;
	int rc;

	/* The limiter checks it too; here it bounds the buffer. */
	if (p->lim.limit < 1 || p->lim.limit > RLG_SLIDING_LOG_LIMIT_MAX)
		return sq_refused(s, p);
	for (j = 0; j < i; j++) {
		if (sq_same_key(&items[j], &items[i]) && s->scratch[j].append)
			k++;
	}
	if ((rc = sq_load_log(s, &items[i], now, &n, &seq)) != SQLITE_OK)
		return sq_failed(s, rc);
	if (k > 0) {
		/* k entries at now, after those <= now; the newest limit. */
		sq_log_reserve(s, n, n + k);
		for (at = n; at > 0 && s->log_ms[at - 1] > now; at--)
			;
		memmove(s->log_ms + at + k, s->log_ms + at,
		    (n - at) * sizeof *s->log_ms);
		for (j = 0; j < k; j++)
			s->log_ms[at + j] = now;
		n += k;
		if (n > (size_t)p->lim.limit) {
			drop = n - (size_t)p->lim.limit;
			memmove(s->log_ms, s->log_ms + drop,
			    (n - drop) * sizeof *s->log_ms);
			n -= drop;
		}
	}
	x->seq = seq + (int64_t)k;
	x->stored = false;
	x->live = n > 0;
	if (rlg_limiter_sliding_log(&p->lim, s->log_ms, n, now_ms, &x->append,
	    &x->out, d) != RLG_OK)
		return sq_refused(s, p);
	return RLG_OK;
}

/* The limiter refused a policy: RLG_EINVAL, transaction closed. */
static int
sq_refused(struct sq_store *s, const struct rlg_policy *policy)
{
	rlg_store_seterr(&s->base, "store step: the limiter refused policy \"%s\" (%s,"
	    " limit %lld, window %lld ms, burst %lld)", policy->name,
	    rlg_algorithm_name(policy->lim.algorithm) != NULL ?
	    rlg_algorithm_name(policy->lim.algorithm) : "unknown algorithm",
	    (long long)policy->lim.limit, (long long)policy->lim.window_ms,
	    (long long)policy->lim.burst);
	sq_rollback(s);
	return RLG_EINVAL;
}

/* The same (policy, client): the same state row and log. */
static bool
sq_same_key(const struct rlg_store_item *a, const struct rlg_store_item *b)
{
	return strcmp(a->policy->name, b->policy->name) == 0 &&
	    strcmp(a->client, b->client) == 0;
}

static int
sq_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted)
{
	struct sq_store *s = (struct sq_store *)base;
	sqlite3_stmt *st;
	int64_t total = 0, next, none;
	unsigned before, rows;
	int rc, changes, batch;

	if (deleted != NULL)
		*deleted = 0;
	if (sq_ready(s, now_ms) != 0)
		return RLG_ESTORE;
	/*
	 * Each batch is one DELETE in a short transaction of its own. The
	 * state rows of sliding_log clients take up to limit log rows
	 * each along (the trigger): the next batch is sized so that it
	 * deletes about SQ_PRUNE_ROWS rows in all, judging by this one, and
	 * the size is kept for the next prune. The transaction reads first
	 * (the client count of no policy), so that a schema changed since
	 * the last step is checked before the DELETE fires any trigger.
	 */
	do {
		batch = s->prune_batch;
		if ((rc = sq_run(s, "prune", s->stmt[SQ_BEGIN])) != SQLITE_OK ||
		    (rc = sq_clients(s, "", &none)) != SQLITE_OK)
			return sq_failed(s, rc);
		if (s->schema_moved && sq_recheck(s) != 0)
			return sq_failed(s, SQLITE_AUTH);
		st = s->stmt[SQ_PRUNE];
		before = (unsigned)sqlite3_total_changes(s->db);
		sqlite3_bind_int64(st, 1, now_ms);
		sqlite3_bind_int(st, 2, batch);
		if ((rc = sq_run(s, "prune", st)) != SQLITE_OK)
			return sq_failed(s, rc);
		changes = sqlite3_changes(s->db);
		if ((rc = sq_run(s, "prune", s->stmt[SQ_COMMIT])) != SQLITE_OK)
			return sq_failed(s, rc);
		/* Counted with the trigger's; modulo 2^32 (SQLite 3.35). */
		rows = (unsigned)sqlite3_total_changes(s->db) - before;
		if (changes > 0 && rows > 0) {
			next = (int64_t)changes * (int64_t)SQ_PRUNE_ROWS / rows;
			s->prune_batch = next < 1 ? 1 : next > SQ_PRUNE_BATCH ?
			    SQ_PRUNE_BATCH : (int)next;
		}
		total += changes;
		if (deleted != NULL)
			*deleted = total;
	} while (changes >= batch);
	sq_shrink(s);
	return RLG_OK;
}

static void
sq_close(struct rlg_store *base)
{
	struct sq_store *s = (struct sq_store *)base;

	if (s == NULL)
		return;
	sq_disconnect(s);
	if (s->group != NULL) {
		sq_group_leave(s->group);
		pthread_cond_destroy(&s->cv);
	}
	free(s->scratch);
	free(s->log_ms);
	free(s->path);
	free(s->wal_path);
	free(s);
}

/*
 * The busy handler: waits for the write lock another connection holds,
 * up to busy_timeout_ms (busy_limit_ms: a checkpoint waits less). A step
 * holds the lock for tens of microseconds
 * (a millisecond or so with synchronous = full), so the pauses start at
 * 50 us and double up to 2 ms; SQLite's own handler sleeps 1 ms at
 * first and up to 100 ms, long enough for other processes to take the
 * lock again and again meanwhile (tails of hundreds of ms under load).
 */
static int
sq_busy(void *arg, int count)
{
	struct sq_store *s = arg;
	struct timespec now, pause;
	int64_t waited_us, pause_us;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (count == 0)
		s->busy_since = now;
	waited_us = (int64_t)(now.tv_sec - s->busy_since.tv_sec) * 1000000 +
	    (now.tv_nsec - s->busy_since.tv_nsec) / 1000;
	if (waited_us >= (int64_t)s->busy_limit_ms * 1000)
		return 0;
	pause_us = count < 6 ? (int64_t)50 << count : 2000;
	if (pause_us > (int64_t)s->busy_limit_ms * 1000 - waited_us)
		pause_us = (int64_t)s->busy_limit_ms * 1000 - waited_us;
	s->busy_waits++;
	pause.tv_sec = 0;
	pause.tv_nsec = (long)pause_us * 1000;
	nanosleep(&pause, NULL);
	return 1;
}

/*
 * Makes sure the connection is open and still on the file that the path
 * names, reopening it at most once. 0 or -1 (errmsg set).
 */
static int
sq_ready(struct sq_store *s, int64_t now_ms)
{
	if (s->db != NULL) {
		if (!s->check_armed) {
			s->check_armed = true;
			s->checked_ms = now_ms;
		} else if (now_ms < s->checked_ms ||
		    now_ms - s->checked_ms >= SQ_CHECK_MS) {
			s->checked_ms = now_ms;
			if (!sq_same_file(s)) {
				rlg_log("store %s: the database file was"
				    " deleted or replaced: reopening",
				    s->path);
				sq_disconnect(s);
			}
		}
	}
	if (s->db == NULL) {
		if (sq_connect(s) != 0)
			return -1;
		s->check_armed = true;
		s->checked_ms = now_ms;
	}
	return 0;
}

/* Does the path still name the file the connection opened? */
static bool
sq_same_file(const struct sq_store *s)
{
	struct stat st;

	if (stat(s->path, &st) != 0)
		return false;
	return st.st_dev == s->dev && st.st_ino == s->ino;
}

/*
 * Opens the connection: creates the file (mode 0600) if it is missing,
 * sets WAL, synchronous and journal_size_limit, applies the schema to a
 * new file, checks that the schema is rlgate's (sq_check_schema) and
 * prepares the statements. 0, or -1 with errmsg set and s->db NULL.
 */
static int
sq_connect(struct sq_store *s)
{
	struct stat st;
	char limit[64];
	int rc;

	assert(s->db == NULL);
	s->check_armed = false;
	if (s->path[0] == '\0') {
		rlg_store_seterr(&s->base, "sqlite open: no database path configured");
		return -1;
	}
	if (sq_create_file(s) != 0)
		return -1;
	/*
	 * No SQLITE_OPEN_CREATE: sq_create_file made the file with mode
	 * 0600; should it vanish in between, sqlite must not create one with
	 * its default mode. The open then fails and the next call retries.
	 */
	rc = sqlite3_open_v2(s->path, &s->db,
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		if (s->db == NULL)
			rlg_store_seterr(&s->base, "sqlite open on %s: %s", s->path,
			    sqlite3_errstr(rc));
		else
			sq_sqlite_error(s, "open", rc);
		goto fail;
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_handler(s->db, sq_busy, s);
	/*
	 * No code from the file runs unchecked: no writes to the schema
	 * through this connection, no functions with side effects in
	 * triggers or views, no trigger code but rlgate's (sq_authorize).
	 * The WAL hook replaces the automatic checkpoint (sq_checkpoint).
	 */
	s->preparing = true;
	s->schema_ok = false;
	s->schema_moved = false;
	s->wal_frames = 0;
	s->checkpoint_at = SQ_WAL_CHECKPOINT_FRAMES;
	if (sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL) !=
	    SQLITE_OK || sqlite3_db_config(s->db,
	    SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL) != SQLITE_OK) {
		rlg_store_seterr(&s->base, "sqlite open on %s: cannot set"
		    " SQLITE_DBCONFIG_DEFENSIVE and trusted_schema = OFF: %s",
		    s->path, sqlite3_errmsg(s->db));
		goto fail;
	}
	sqlite3_set_authorizer(s->db, sq_authorize, s);
	sqlite3_wal_hook(s->db, sq_wal_hook, s);
	if (sqlite3_db_readonly(s->db, "main") == 1) {
		rlg_store_seterr(&s->base, "sqlite open on %s: the file is read-only for"
		    " this process (SQLITE_READONLY)", s->path);
		goto fail;
	}
	snprintf(limit, sizeof limit, "PRAGMA journal_size_limit = %lld",
	    (long long)SQ_WAL_LIMIT_BYTES);
	if (sq_check_header(s) != 0 || sq_set_wal(s) != 0 ||
	    sq_exec(s, "open", s->sync_full ? "PRAGMA synchronous = FULL" :
	    "PRAGMA synchronous = NORMAL") != 0 ||
	    sq_exec(s, "open", limit) != 0 ||
	    sq_apply_schema(s) != 0)
		goto fail;
	/*
	 * The check and the statements see one snapshot of the schema: the
	 * statements carry no trigger but those the check saw.
	 */
	if (sq_exec(s, "open", "BEGIN") != 0)
		goto fail;
	if (sq_check_schema(s) != 0 || sq_prepare_all(s) != 0) {
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		goto fail;
	}
	if (sq_exec(s, "open", "COMMIT") != 0)
		goto fail;
	s->preparing = false;
	if (stat(s->path, &st) != 0) {
		rlg_store_seterr(&s->base, "sqlite open on %s: %s", s->path,
		    strerror(errno));
		goto fail;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	return 0;

fail:
	sq_disconnect(s);
	return -1;
}

/* Finalizes the statements and closes the connection, if open. */
static void
sq_disconnect(struct sq_store *s)
{
	sq_finalize_all(s);
	s->schema_ok = false;
	s->wal_frames = 0;
	if (s->db != NULL) {
		/* An open transaction is rolled back. */
		sqlite3_close_v2(s->db);
		s->db = NULL;
	}
	s->check_armed = false;
}

/*
 * Creates the database file with mode 0600 if it does not exist (an empty
 * file is an empty SQLite database), without touching the process umask.
 *
 * The file is made under a temporary name and linked into place, so no
 * descriptor on it is ever closed once another connection could lock it
 * (closing any descriptor drops every POSIX lock the process holds on the
 * file, other connections' included). Under a lock on the directory,
 * leftover -wal, -shm and -journal files of a deleted database are removed
 * first: sqlite would otherwise replay them into the new file.
 */
static int
sq_create_file(struct sq_store *s)
{
	struct stat st;
	char *dir, *tmp, *slash;
	size_t len;
	int dfd, fd, err = 0;

	if (stat(s->path, &st) == 0)
		return 0;
	if (errno != ENOENT) {
		rlg_store_seterr(&s->base, "sqlite open on %s: %s", s->path,
		    strerror(errno));
		return -1;
	}

	len = strlen(s->path);
	dir = rlg_xstrdup(s->path);
	slash = strrchr(dir, '/');
	if (slash == NULL)
		memcpy(dir, ".", 2);   /* s->path is not empty: len >= 1 */
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rlg_store_seterr(&s->base, "sqlite open on %s: cannot create the database:"
		    " directory %s: %s", s->path, dir, strerror(errno));
		free(dir);
		return -1;
	}
	/* Serializes creators; without it (ENOLCK) the race is only wider. */
	while (flock(dfd, LOCK_EX) != 0 && errno == EINTR)
		;

	if (stat(s->path, &st) == 0)
		goto done;
	sq_unlink_suffix(s->path, "-wal");
	sq_unlink_suffix(s->path, "-shm");
	sq_unlink_suffix(s->path, "-journal");

	tmp = rlg_xmalloc(len + sizeof ".new-XXXXXX");
	memcpy(tmp, s->path, len);
	memcpy(tmp + len, ".new-XXXXXX", sizeof ".new-XXXXXX");
	fd = mkostemp(tmp, O_CLOEXEC);      /* mode 0600 */
	if (fd < 0) {
		err = errno;
	} else {
		close(fd);
		if (link(tmp, s->path) != 0 && errno != EEXIST &&
		    rename(tmp, s->path) != 0)
			err = errno;
		unlink(tmp);
	}
	if (err != 0)
		rlg_store_seterr(&s->base, "sqlite open on %s: cannot create the database:"
		    " %s", s->path, strerror(err));
	free(tmp);

done:
	flock(dfd, LOCK_UN);
	close(dfd);
	free(dir);
	return err != 0 ? -1 : 0;
}

/* Removes path+suffix if it exists. */
static void
sq_unlink_suffix(const char *path, const char *suffix)
{
	char name[4096];

	if ((size_t)snprintf(name, sizeof name, "%s%s", path, suffix) <
	    sizeof name)
		(void)unlink(name);
}

/*
 * Refuses a file that is neither empty nor an SQLite database. sqlite would
 * say so too, but only once it reads the header, and a -wal left behind by
 * the file this one replaced could hand it a valid page 1 over garbage.
 * The bytes are read through sqlite's own descriptor: opening and closing
 * another one would drop the POSIX locks of every connection in this
 * process.
 */
static int
sq_check_header(struct sq_store *s)
{
	static const char magic[16] = "SQLite format 3";
	sqlite3_file *f = NULL;
	unsigned char head[100];
	size_t i;
	int rc;

	if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_FILE_POINTER,
	    &f) != SQLITE_OK || f == NULL || f->pMethods == NULL)
		return 0;                  /* let sqlite judge by itself */
	rc = f->pMethods->xRead(f, head, sizeof head, 0);
	if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) {
		rlg_store_seterr(&s->base, "sqlite open on %s: cannot read the header (%s)",
		    s->path, sqlite3_errstr(rc));
		return -1;
	}
	/* A short read pads with zeros: an empty file is an empty database. */
	for (i = 0; i < sizeof head && head[i] == 0; i++)
		;
	if (i < sizeof head && memcmp(head, magic, sizeof magic) != 0) {
		rlg_store_seterr(&s->base, "sqlite open on %s: file is not a database"
		    " (SQLITE_NOTADB)", s->path);
		return -1;
	}
	return 0;
}

/*
 * PRAGMA journal_mode = WAL; a file system without WAL support is logged.
 *
 * Switching a new file to WAL upgrades a read transaction to a write one,
 * and sqlite does not call the busy handler for that (it could deadlock):
 * when several processes open a new file together, all but one get
 * SQLITE_BUSY at once. So this waits by itself, up to busy_timeout_ms.
 */
static int
sq_set_wal(struct sq_store *s)
{
	struct timespec t0, t1;
	sqlite3_stmt *st;
	const char *mode;
	int rc, pause_ms = 1;
	int64_t waited_ms;

	rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st,
	    NULL);
	if (rc != SQLITE_OK) {
		sq_sqlite_error(s, "open", rc);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((rc = sqlite3_step(st)) != SQLITE_ROW &&
	    (rc & 0xff) == SQLITE_BUSY) {
		sqlite3_reset(st);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		waited_ms = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000 +
		    (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (waited_ms >= s->busy_timeout_ms)
			break;
		sqlite3_sleep(pause_ms);
		if (pause_ms < 32)
			pause_ms *= 2;
	}
	if (rc != SQLITE_ROW) {
		sq_sqlite_error(s, "open", rc);
		sqlite3_finalize(st);
		return -1;
	}
	mode = (const char *)sqlite3_column_text(st, 0);
	if ((mode == NULL || strcmp(mode, "wal") != 0) && !s->warned_journal) {
		s->warned_journal = true;
		rlg_log("store %s: journal_mode is %s, not wal: readers will"
		    " block the gateway", s->path, mode != NULL ? mode : "?");
	}
	sqlite3_finalize(st);
	return 0;
}

/*
 * Applies db/schema.sql to a new database (user_version 0), or migrates an
 * older one to it, in one write transaction, checking the version again
 * under the lock since another process may have done it meanwhile;
 * refuses versions it does not know.
 */
static int
sq_apply_schema(struct sq_store *s)
{
	int version, from;

	if (sq_user_version(s, &version) != 0)
		return -1;
	if (version >= 0 && version < SQ_SCHEMA_VERSION &&
	    (version == 0 || sq_migrations[version] != NULL)) {
		if (sq_exec(s, "schema", "BEGIN IMMEDIATE") != 0)
			return -1;
		if (sq_user_version(s, &version) != 0)
			goto rollback;
		/* Another process may have done it: then nothing to do. */
		from = version;
		if (from >= 0 && from < SQ_SCHEMA_VERSION) {
			if ((from >= 1 && sq_migrate(s, from) != 0) ||
			    sq_exec(s, "schema", rlg_schema_sql) != 0 ||
			    sq_user_version(s, &version) != 0)
				goto rollback;
		}
		if (sq_exec(s, "schema", "COMMIT") != 0)
			goto rollback;
		if (from >= 1 && from < SQ_SCHEMA_VERSION)
			rlg_log("store %s: database schema migrated from"
			    " version %d to %d", s->path, from, version);
	}
	if (version > SQ_SCHEMA_VERSION) {
		rlg_store_seterr(&s->base, "sqlite open on %s: database schema version %d"
		    " is newer than this rlgate (%d)", s->path, version,
		    SQ_SCHEMA_VERSION);
		return -1;
	}
	if (version != SQ_SCHEMA_VERSION) {
		rlg_store_seterr(&s->base, "sqlite open on %s: unknown database schema"
		    " version %d (this rlgate has %d)", s->path, version,
		    SQ_SCHEMA_VERSION);
		return -1;
	}
	return 0;

rollback:
	if (!sqlite3_get_autocommit(s->db))
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/*
 * Runs the migration steps from version `from` on (inside the caller's
 * transaction); rlg_schema_sql then completes them. 0 or -1.
 */
static int
sq_migrate(struct sq_store *s, int from)
{
	int v;

	for (v = from; v < SQ_SCHEMA_VERSION; v++) {
		if (sq_migrations[v] == NULL) {
			rlg_store_seterr(&s->base, "sqlite open on %s: no migration from"
			    " database schema version %d", s->path, v);
			return -1;
		}
		if (sq_exec(s, "schema migration", sq_migrations[v]) != 0)
			return -1;
	}
	return 0;
}

/* Reads PRAGMA user_version into *version. 0 or -1. */
static int
sq_user_version(struct sq_store *s, int *version)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
	if (rc != SQLITE_OK) {
		sq_sqlite_error(s, "open", rc);
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		sq_sqlite_error(s, "open", rc);
		sqlite3_finalize(st);
		return -1;
	}
	*version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return 0;
}

/* Runs SQL text once (set-up only, never per request). 0 or -1. */
static int
sq_exec(struct sq_store *s, const char *op, const char *sql)
{
	int rc;

	rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		sq_sqlite_error(s, op, rc);
		return -1;
	}
	return 0;
}

/*
 * Steps a prepared statement that returns no rows to completion, then
 * resets it and clears its bindings. Returns SQLITE_OK or the error code,
 * with errmsg set when op is not NULL.
 */
static int
sq_run(struct sq_store *s, const char *op, sqlite3_stmt *st)
{
	int rc;

	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		rc = SQLITE_OK;
	else if (op != NULL)
		sq_sqlite_error(s, op, rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

/*
 * Reads one state into x->in; a missing row is the all-zero state of a
 * new client.
 */
static int
sq_load(struct sq_store *s, const struct rlg_store_item *item,
    struct sq_item *x)
{
	sqlite3_stmt *st = s->stmt[SQ_SELECT];
	int rc;

	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		x->in.window_start_ms = sqlite3_column_int64(st, 0);
		x->in.count = sqlite3_column_int64(st, 1);
		x->in.expires_ms = sqlite3_column_int64(st, 2);
		x->in.prev_count = sqlite3_column_int64(st, 3);
		x->in.tat_us = sqlite3_column_int64(st, 4);
		x->stored = true;
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		memset(&x->in, 0, sizeof x->in);
		x->stored = false;
		rc = SQLITE_OK;
	} else {
		sq_sqlite_error(s, "step", rc);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

/*
 * Reads the newest in-window log entries of item's client (ts_ms > now_ms
 * - window, at most limit of them) into s->log_ms[0..*n), ascending. *seq
 * gets the seq the row of an admitted request at now_ms takes: one more
 * than the largest seq at now_ms, 0 if none. (When fewer than limit
 * entries are in the window, all of them are read, those of now_ms too;
 * with limit of them the request is rejected and adds no row.)
 */
static int
sq_load_log(struct sq_store *s, const struct rlg_store_item *item,
    int64_t now_ms, size_t *n, int64_t *seq)
{
	sqlite3_stmt *st = s->stmt[SQ_LOG_SELECT];
	int64_t ts, t, *lo, *hi;
	size_t got = 0;
	int rc;

	*seq = 0;
	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now_ms - item->policy->lim.window_ms);
	sqlite3_bind_int64(st, 4, item->policy->lim.limit);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ts = sqlite3_column_int64(st, 0);
		if (ts == now_ms && sqlite3_column_int64(st, 1) >= *seq)
			*seq = sqlite3_column_int64(st, 1) + 1;
		sq_log_reserve(s, got, got + 1);
		s->log_ms[got++] = ts;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	else
		sq_sqlite_error(s, "step", rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	/* Newest first from the index: turn it around. */
	if (got > 1) {
		for (lo = s->log_ms, hi = s->log_ms + got - 1; lo < hi;
		    lo++, hi--) {
			t = *lo;
			*lo = *hi;
			*hi = t;
		}
	}
	*n = got;
	return rc;
}

/*
 * Makes s->log_ms hold at least need entries, keeping the first n:
 * doubles from SQ_LOG_INITIAL, so a step allocates only while the largest
 * log it has read grows.
 */
static void
sq_log_reserve(struct sq_store *s, size_t n, size_t need)
{
	size_t cap;
	int64_t *p;

	if (need <= s->log_cap)
		return;
	cap = s->log_cap > 0 ? s->log_cap : SQ_LOG_INITIAL;
	while (cap < need)
		cap *= 2;
	p = rlg_xmalloc(cap * sizeof *p);
	if (n > 0)
		memcpy(p, s->log_ms, n * sizeof *p);
	free(s->log_ms);
	s->log_ms = p;
	s->log_cap = cap;
}

/*
 * Writes x->out: an UPDATE that leaves the expiry index alone when the row
 * exists and keeps its (rounded) expiry, else the UPSERT (new row, new
 * window, a token bucket's tat in a new second).
 */
static int
sq_save(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x)
{
	sqlite3_stmt *st;
	int64_t expires = sq_expires(x->out.expires_ms);
	int rc;

	if (x->stored && expires == x->in.expires_ms) {
		st = s->stmt[SQ_UPDATE];
		sqlite3_bind_text(st, 1, item->policy->name, -1,
		    SQLITE_STATIC);
		sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, x->out.window_start_ms);
		sqlite3_bind_int64(st, 4, x->out.count);
		sqlite3_bind_int64(st, 5, x->out.prev_count);
		sqlite3_bind_int64(st, 6, x->out.tat_us);
		rc = sq_run(s, "step", st);
		/*
		 * The write lock is ours, so the row cannot have gone; if
		 * it has all the same (nothing changed), insert it.
		 */
		if (rc != SQLITE_OK || sqlite3_changes(s->db) == 1)
			return rc;
	}
	st = s->stmt[SQ_UPSERT];
	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, x->out.window_start_ms);
	sqlite3_bind_int64(st, 4, x->out.count);
	sqlite3_bind_int64(st, 5, expires);
	sqlite3_bind_int64(st, 6, x->out.prev_count);
	sqlite3_bind_int64(st, 7, x->out.tat_us);
	return sq_run(s, "step", st);
}

/*
 * An admitted sliding_log item: its log row at now (clamped as the limiter
 * clamps it), the client's rows that left the window deleted, the state
 * row written in full (its expiry moves with every new newest entry).
 */
static int
sq_save_log(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x, int64_t now_ms)
{
	sqlite3_stmt *st;
	int64_t now = rlg_limiter_clamp_time(now_ms);
	int rc;

	if (!x->append)
		return SQLITE_OK;
	st = s->stmt[SQ_LOG_INSERT];
	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now);
	sqlite3_bind_int64(st, 4, x->seq);
	if ((rc = sq_run(s, "step", st)) != SQLITE_OK)
		return rc;
	st = s->stmt[SQ_LOG_TRIM];
	sqlite3_bind_text(st, 1, item->policy->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now - item->policy->lim.window_ms);
	if ((rc = sq_run(s, "step", st)) != SQLITE_OK)
		return rc;
	return sq_save(s, item, x);
}

/* The expiry to store: rounded up to SQ_EXPIRES_GRAIN_MS. */
static int64_t
sq_expires(int64_t expires_ms)
{
	int64_t r;

	if (expires_ms <= 0 || expires_ms > INT64_MAX - SQ_EXPIRES_GRAIN_MS)
		return expires_ms;
	r = expires_ms % SQ_EXPIRES_GRAIN_MS;
	return r == 0 ? expires_ms : expires_ms + SQ_EXPIRES_GRAIN_MS - r;
}

/*
 * After an SQLite error (errmsg already set): rolls back an open
 * transaction and closes a connection the error left unusable, so the next
 * call reopens it. Returns RLG_ESTORE.
 */
static int
sq_failed(struct sq_store *s, int rc)
{
	sq_rollback(s);
	if (sq_unusable(rc))
		sq_disconnect(s);
	return RLG_ESTORE;
}

/*
 * Rolls back an open transaction, if any: with the prepared ROLLBACK, or
 * without it when a failed schema check left the statements unprepared.
 */
static void
sq_rollback(struct sq_store *s)
{
	if (s->db == NULL || sqlite3_get_autocommit(s->db))
		return;
	if (s->stmt[SQ_ROLLBACK] != NULL)
		(void)sq_run(s, NULL, s->stmt[SQ_ROLLBACK]);
	else
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* errmsg = "sqlite OP on PATH: message (SQLITE_CODE)". */
static void
sq_sqlite_error(struct sq_store *s, const char *op, int rc)
{
	char name[48];

	rlg_store_seterr(&s->base, "sqlite %s on %s: %s (%s)", op, s->path,
	    s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc),
	    sq_code_name(rc, name, sizeof name));
}

/*
 * Errors after which the connection cannot be trusted: the file is gone,
 * moved, unreadable, not (or no longer) a database. Busy, full and the like
 * pass by themselves and keep the connection.
 */
static bool
sq_unusable(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
	case SQLITE_AUTH:           /* code rlgate did not write: check again */
	case SQLITE_CANTOPEN:
	case SQLITE_IOERR:
	case SQLITE_READONLY:
		return true;
	default:
		return false;
	}
}

/* "SQLITE_BUSY", or "SQLITE_IOERR extended 1234" for one without a name. */
static const char *
sq_code_name(int rc, char *buf, size_t size)
{
	size_t i;

	for (i = 0; i < sizeof sq_codes / sizeof sq_codes[0]; i++) {
		if (sq_codes[i].code == rc)
			return sq_codes[i].name;
	}
	for (i = 0; i < sizeof sq_codes / sizeof sq_codes[0]; i++) {
		if (sq_codes[i].code == (rc & 0xff)) {
			snprintf(buf, size, "%s extended %d", sq_codes[i].name,
			    rc);
			return buf;
		}
	}
	snprintf(buf, size, "code %d", rc);
	return buf;
}

/*
 * Prepares every statement of the connection, as the store's own (trigger
 * code allowed, if the schema passed its check). 0, or -1 with errmsg set.
 */
static int
sq_prepare_all(struct sq_store *s)
{
	bool was = s->preparing;
	int rc = SQLITE_OK, i;

	s->preparing = true;
	for (i = 0; i < SQ_NSTMT && rc == SQLITE_OK; i++) {
		rc = sqlite3_prepare_v3(s->db, sq_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &s->stmt[i], NULL);
		if (rc != SQLITE_OK)
			sq_sqlite_error(s, "prepare", rc);
	}
	s->preparing = was;
	return rc == SQLITE_OK ? 0 : -1;
}

static void
sq_finalize_all(struct sq_store *s)
{
	int i;

	for (i = 0; i < SQ_NSTMT; i++) {
		sqlite3_finalize(s->stmt[i]);
		s->stmt[i] = NULL;
	}
}

/*
 * The authorizer, called for every table, column and statement a
 * statement touches while SQLite compiles it: when rlgate prepares one,
 * and when SQLite prepares one again by itself after a schema change
 * (then it also notes that the schema moved). inner names the trigger (or
 * view) whose code makes the access, NULL for the statement's own. Trigger
 * code compiles only into rlgate's own preparations after a schema check
 * that passed, and only rlgate's triggers; any other is denied, which
 * fails the statement (SQLITE_AUTH) before it runs.
 */
static int
sq_authorize(void *arg, int action, const char *a3, const char *a4,
    const char *dbname, const char *inner)
{
	struct sq_store *s = arg;

	(void)action;
	(void)a3;
	(void)a4;
	(void)dbname;
	if (!s->preparing)
		s->schema_moved = true;
	if (inner == NULL)
		return SQLITE_OK;
	if (s->preparing && s->schema_ok &&
	    sq_ref_find("trigger", inner) != NULL)
		return SQLITE_OK;
	return SQLITE_DENY;
}

/*
 * The schema changed while the connection was open: inside the caller's
 * transaction (the write lock held, so it cannot change again), checks it
 * and prepares every statement again, so that no statement holds trigger
 * code the check has not seen. 0, or -1 with errmsg set (the caller rolls
 * back; the connection is closed and the next call opens and checks it
 * afresh).
 */
static int
sq_recheck(struct sq_store *s)
{
	int rc;

	s->preparing = true;
	s->schema_ok = false;
	sq_finalize_all(s);
	rc = sq_check_schema(s) == 0 && sq_prepare_all(s) == 0 ? 0 : -1;
	s->preparing = false;
	s->schema_moved = false;
	return rc;
}

/*
 * Holds the schema of the file to rlgate's (sq_ref): each trigger in it,
 * and each index on one of rlgate's tables, must be one of rlgate's, on
 * the same table, with the same SQL text; each of rlgate's triggers and
 * indexes must be there. Other tables, views and the indexes on those are
 * the operator's and stay. Runs inside a transaction (sq_connect,
 * sq_recheck), so it reads one snapshot of the schema. Sets schema_ok.
 * 0, or -1 with errmsg naming the first object that fails and the fix.
 */
static int
sq_check_schema(struct sq_store *s)
{
	static const char sql[] = "SELECT type, name, tbl_name, sql"
	    " FROM sqlite_master WHERE type IN ('trigger', 'index')";
	const struct sq_object *o;
	const char *type, *name, *tbl, *text, *what;
	char q[160];
	bool *seen = NULL;
	sqlite3_stmt *st = NULL;
	size_t i;
	int rc;

	s->schema_ok = false;
	(void)pthread_once(&sq_ref_once, sq_ref_build);
	if (sq_ref_error[0] != '\0') {
		rlg_store_seterr(&s->base, "sqlite schema check on %s: %s", s->path,
		    sq_ref_error);
		return -1;
	}
	seen = rlg_xcalloc(sq_nref, sizeof *seen);
	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		sq_sqlite_error(s, "schema check", rc);
		goto fail;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		type = (const char *)sqlite3_column_text(st, 0);
		name = (const char *)sqlite3_column_text(st, 1);
		tbl = (const char *)sqlite3_column_text(st, 2);
		text = (const char *)sqlite3_column_text(st, 3);
		if (type == NULL || name == NULL || tbl == NULL)
			continue;
		/* An index of the operator's own on a table of its own. */
		if (strcmp(type, "trigger") != 0 && !sq_ref_table(tbl))
			continue;
		o = sq_ref_find(type, name);
		what = strcmp(type, "trigger") == 0 ? "TRIGGER" : "INDEX";
		if (o == NULL) {
			rlg_store_seterr(&s->base, "sqlite schema check on %s: the database"
			    " holds %s %s on %s that rlgate did not create:"
			    " remove it with DROP %s %s", s->path, type,
			    sq_quote(name, q, sizeof q), tbl, what, q);
			goto fail;
		}
		if (sqlite3_stricmp(o->tbl_name, tbl) != 0 ||
		    (o->sql == NULL) != (text == NULL) ||
		    (text != NULL && strcmp(o->sql, text) != 0)) {
			rlg_store_seterr(&s->base, "sqlite schema check on %s: the database's"
			    " %s %s is not the one rlgate created (its SQL"
			    " differs from db/schema.sql): DROP %s %s, then"
			    " create it again from db/schema.sql", s->path,
			    type, sq_quote(name, q, sizeof q), what, q);
			goto fail;
		}
		seen[o - sq_ref] = true;
	}
	if (rc != SQLITE_DONE) {
		sq_sqlite_error(s, "schema check", rc);
		goto fail;
	}
	for (i = 0; i < sq_nref; i++) {
		if (seen[i] || (strcmp(sq_ref[i].type, "trigger") != 0 &&
		    strcmp(sq_ref[i].type, "index") != 0))
			continue;
		rlg_store_seterr(&s->base, "sqlite schema check on %s: the database lacks"
		    " %s %s of rlgate's schema: create it again from"
		    " db/schema.sql", s->path, sq_ref[i].type,
		    sq_quote(sq_ref[i].name, q, sizeof q));
		goto fail;
	}
	sqlite3_finalize(st);
	free(seen);
	s->schema_ok = true;
	return 0;

fail:
	sqlite3_finalize(st);
	free(seen);
	return -1;
}

/*
 * Builds sq_ref (pthread_once): db/schema.sql on a private in-memory
 * database, its tables, indexes, triggers and views read back. On failure
 * sq_ref_error says why, and every schema check fails with it.
 */
static void
sq_ref_build(void)
{
	static const char sql[] = "SELECT type, name, tbl_name, sql"
	    " FROM sqlite_master ORDER BY type, name";
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	struct sq_object *o;
	const char *text;
	size_t cap = 0;
	int rc;

	rc = sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, rlg_schema_sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sq_nref == cap) {
			cap = cap > 0 ? cap * 2 : 16;
			o = rlg_xcalloc(cap, sizeof *o);
			if (sq_nref > 0)
				memcpy(o, sq_ref, sq_nref * sizeof *o);
			free(sq_ref);
			sq_ref = o;
		}
		o = &sq_ref[sq_nref++];
		o->type = rlg_xstrdup((const char *)sqlite3_column_text(st, 0));
		o->name = rlg_xstrdup((const char *)sqlite3_column_text(st, 1));
		o->tbl_name = rlg_xstrdup(
		    (const char *)sqlite3_column_text(st, 2));
		text = (const char *)sqlite3_column_text(st, 3);
		o->sql = text != NULL ? rlg_xstrdup(text) : NULL;
		rc = SQLITE_OK;
	}
	if (rc != SQLITE_DONE)
		snprintf(sq_ref_error, sizeof sq_ref_error, "cannot build the"
		    " reference schema from db/schema.sql: %s",
		    db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* The object of rlgate's schema of that type and name, or NULL. */
static const struct sq_object *
sq_ref_find(const char *type, const char *name)
{
	size_t i;

	for (i = 0; i < sq_nref; i++) {
		if (strcmp(sq_ref[i].type, type) == 0 &&
		    sqlite3_stricmp(sq_ref[i].name, name) == 0)
			return &sq_ref[i];
	}
	return NULL;
}

/* Is name one of rlgate's tables? */
static bool
sq_ref_table(const char *name)
{
	return sq_ref_find("table", name) != NULL;
}

/* name as an SQL identifier in double quotes, for a message. */
static const char *
sq_quote(const char *name, char *buf, size_t size)
{
	sqlite3_snprintf((int)size, buf, "\"%w\"", name);
	return buf;
}

/*
 * After every commit of the connection (in place of SQLite's automatic
 * checkpoint): notes how many frames the WAL holds; the checkpoint itself
 * waits for rlg_store_idle, or the end of the step.
 */
static int
sq_wal_hook(void *arg, sqlite3 *db, const char *dbname, int frames)
{
	struct sq_store *s = arg;

	(void)db;
	(void)dbname;
	s->wal_frames = frames;
	s->commits++;
	/* Started over (by anyone): the next checkpoint at the full length. */
	if (frames < SQ_WAL_CHECKPOINT_FRAMES)
		s->checkpoint_at = SQ_WAL_CHECKPOINT_FRAMES;
	return SQLITE_OK;
}

static void
sq_idle(struct rlg_store *base, int64_t now_ms)
{
	struct sq_store *s = (struct sq_store *)base;

	(void)now_ms;
	s->idle_seen = true;
	if (s->wal_frames >= s->checkpoint_at)
		sq_checkpoint(s);
}

/*
 * Copies the WAL into the database, and makes it start over once it is
 * SQ_WAL_RESTART_FRAMES long.
 *
 * A PASSIVE checkpoint copies what it can without the write lock, so
 * requests go on meanwhile; it gives up at once when another connection
 * is checkpointing (one at a time is enough). When no reader held a
 * snapshot anywhere in the WAL, the next commit starts the WAL over by
 * itself, as with one process. Under load from several, some connection
 * is nearly always reading, and the WAL only grows: once it holds
 * SQ_WAL_RESTART_FRAMES, a RESTART checkpoint takes the write lock, copies
 * the few frames committed meanwhile, waits for readers still on the WAL
 * and makes the next commit start it over (journal_size_limit then cuts
 * the file back). Requests queue behind it for that only, and its waits
 * are bounded by SQ_CHECKPOINT_BUSY_MS (busy_timeout_ms if shorter). It is
 * not tried while a reader of an old snapshot pins the WAL
 * (SQ_WAL_PINNED_FRAMES): that would hold the write lock waiting for it.
 * This connection tries again each SQ_WAL_CHECKPOINT_STEP frames. Failures
 * are left to the next step to report.
 */
static void
sq_checkpoint(struct sq_store *s)
{
	int log_frames = 0, done_frames = 0;

	s->checkpoint_at = s->wal_frames + SQ_WAL_CHECKPOINT_STEP;
	if (s->db == NULL || !sqlite3_get_autocommit(s->db))
		return;
	if (sqlite3_wal_checkpoint_v2(s->db, "main",
	    SQLITE_CHECKPOINT_PASSIVE, &log_frames, &done_frames) !=
	    SQLITE_OK || log_frames < SQ_WAL_RESTART_FRAMES ||
	    log_frames - done_frames >= SQ_WAL_PINNED_FRAMES)
		return;
	s->busy_limit_ms = s->busy_timeout_ms < SQ_CHECKPOINT_BUSY_MS ?
	    s->busy_timeout_ms : SQ_CHECKPOINT_BUSY_MS;
	clock_gettime(CLOCK_MONOTONIC, &s->busy_since);
	(void)sqlite3_wal_checkpoint_v2(s->db, "main",
	    SQLITE_CHECKPOINT_RESTART, &log_frames, &done_frames);
	s->busy_limit_ms = s->busy_timeout_ms;
}

/*
 * At a prune (every 10 s or so, after a request): when this connection
 * committed fewer than SQ_WAL_QUIET_COMMITS times since the last one (the
 * load went down), truncates a WAL file longer than SQ_WAL_SHRINK_BYTES
 * to nothing (TRUNCATE: the write lock and waits as a RESTART's), so an
 * idle gateway does not keep the WAL of its last busy hour. Under load it
 * leaves the file alone: cut and grown again, it costs every commit.
 */
static void
sq_shrink(struct sq_store *s)
{
	struct stat st;
	int log_frames, done_frames, commits = s->commits;

	s->commits = 0;
	if (commits >= SQ_WAL_QUIET_COMMITS || s->db == NULL ||
	    !sqlite3_get_autocommit(s->db) || stat(s->wal_path, &st) != 0 ||
	    st.st_size <= SQ_WAL_SHRINK_BYTES)
		return;
	s->busy_limit_ms = s->busy_timeout_ms < SQ_CHECKPOINT_BUSY_MS ?
	    s->busy_timeout_ms : SQ_CHECKPOINT_BUSY_MS;
	clock_gettime(CLOCK_MONOTONIC, &s->busy_since);
	(void)sqlite3_wal_checkpoint_v2(s->db, "main",
	    SQLITE_CHECKPOINT_TRUNCATE, &log_frames, &done_frames);
	s->busy_limit_ms = s->busy_timeout_ms;
}

int
rlg_store_check_files(const struct rlg_store_config *cfg,
    void (*warn)(void *ctx, const char *line), void *ctx)
{
	char files[1024], names[1024], line[2300];
	unsigned bad = 0, bad_bits = 0;

	if (cfg == NULL || cfg->backend != RLG_BACKEND_SQLITE ||
	    cfg->sqlite.path == NULL || cfg->sqlite.path[0] == '\0')
		return 0;
	files[0] = '\0';
	names[0] = '\0';
	sq_warn_file(cfg->sqlite.path, "", files, sizeof files, names,
	    sizeof names, &bad, &bad_bits);
	sq_warn_file(cfg->sqlite.path, "-wal", files, sizeof files, names,
	    sizeof names, &bad, &bad_bits);
	sq_warn_file(cfg->sqlite.path, "-shm", files, sizeof files, names,
	    sizeof names, &bad, &bad_bits);
	if (bad == 0)
		return 0;
	snprintf(line, sizeof line, "warning: store %s: %s: users other than"
	    " rlgate's can read the clients' state%s (rlgate creates these"
	    " files with mode 0600): chmod go-rwx%s", cfg->sqlite.path, files,
	    (bad_bits & (S_IWGRP | S_IWOTH)) != 0 ?
	    " and change their counts" : "", names);
	if (warn != NULL)
		warn(ctx, line);
	return (int)bad;
}

/*
 * Adds path+suffix to the report when it exists with group or other
 * permission bits: "the database has mode 0644 (group-readable,
 * world-readable)" or "its -wal has ..." to files, " NAME" to names (the
 * chmod's arguments), the bits to bad_bits.
 */
static void
sq_warn_file(const char *path, const char *suffix, char *files,
    size_t fsize, char *names, size_t nsize, unsigned *bad,
    unsigned *bad_bits)
{
	char name[4096], words[128], chmod_arg[16];
	size_t f = strlen(files), n = strlen(names);
	struct stat st;

	if ((size_t)snprintf(name, sizeof name, "%s%s", path, suffix) >=
	    sizeof name || stat(name, &st) != 0 ||
	    (st.st_mode & (S_IRWXG | S_IRWXO)) == 0)
		return;
	rlg_mode_describe(st.st_mode & (S_IRWXG | S_IRWXO), words,
	    sizeof words, chmod_arg, sizeof chmod_arg);
	/* Cut short, a long report still names the first files. */
	if (f < fsize && (size_t)snprintf(files + f, fsize - f,
	    "%s%s%s has mode %04o (%s)", *bad > 0 ? ", " : "",
	    suffix[0] == '\0' ? "the database" : "its ", suffix,
	    (unsigned)(st.st_mode & 07777), words) >= fsize - f)
		files[fsize - 1] = '\0';
	if (n < nsize && (size_t)snprintf(names + n, nsize - n, " %s",
	    name) >= nsize - n)
		names[nsize - 1] = '\0';
	(*bad)++;
	*bad_bits |= st.st_mode & (S_IRWXG | S_IRWXO);
}
