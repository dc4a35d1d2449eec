/*
 * store_sqlite.c: the SQLite store, one connection per handle.
 *
 * A step is one BEGIN IMMEDIATE transaction: it reads the state of each
 * (policy, client) of the request, runs the pure limiter on it and writes
 * the new states back only when every policy admits the request. The write
 * lock taken by BEGIN IMMEDIATE makes read, decide and write one atomic step
 * for every process and thread that shares the file, so counting is exact;
 * a rejected request ends in ROLLBACK and writes nothing. The file is in WAL
 * mode with synchronous=NORMAL: readers (the operator's sqlite3 shell) never
 * block the gateway, and a commit costs no fsync.
 *
 * The handle heals by itself. If the file cannot be opened (directory
 * missing, not a database, newer schema, read-only) the handle still
 * exists, says why, and the next call tries again. After an error that
 * leaves the connection unusable (I/O error, corruption, file gone) the
 * connection is closed and the next call reopens it, at most one open per
 * call. Once a second (by the caller's now_ms) a step checks that the path
 * still names the file it opened, so a database deleted or replaced while
 * rlgate serves is noticed and reopened (and recreated with its schema).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
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
#include "util.h"

/* db/schema.sql, compiled in by the build as app/schema.c. */
extern const char rlg_schema_sql[];

/* The PRAGMA user_version that db/schema.sql sets. */
#define SQ_SCHEMA_VERSION 1

/* Rows deleted per prune transaction: keeps the write lock short. */
#define SQ_PRUNE_BATCH 1000

/* How often (in ms of the caller's clock) a step checks the file's inode. */
#define SQ_CHECK_MS 1000

/* The prepared statements of a connection, reused by every call. */
enum sq_stmt {
	SQ_BEGIN = 0,
	SQ_COMMIT,
	SQ_ROLLBACK,
	SQ_SELECT,
	SQ_UPSERT,
	SQ_UPDATE,
	SQ_PRUNE,
	SQ_NSTMT
};

/* Step scratch for one item: the state read and the state to write. */
struct sq_item {
	struct rlg_state in;
	struct rlg_state out;
	bool stored;                  /* a row exists when out is written */
};

struct sq_store {
	struct rlg_store base;        /* first: rlg_store_* dispatch on it */
	char *path;                   /* the database file, owned */
	int busy_timeout_ms;          /* how long to wait for the write lock */
	sqlite3 *db;                  /* NULL while closed: next call opens */
	sqlite3_stmt *stmt[SQ_NSTMT];
	dev_t dev;                    /* the file db opened, to notice */
	ino_t ino;                    /* deletion or replacement */
	bool check_armed;             /* checked_ms holds a time */
	int64_t checked_ms;           /* now_ms of the last inode check */
	bool warned_journal;          /* logged once: WAL not available */
	struct sq_item *scratch;      /* step scratch, one per item */
	size_t nscratch;              /* entries in scratch */
	char errmsg[512];             /* the last error, NUL-terminated */
};

static int sq_open(const struct rlg_store_config *cfg, struct rlg_store **out);
static int sq_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static int sq_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted);
static const char *sq_errmsg(const struct rlg_store *base);
static void sq_close(struct rlg_store *base);

static int sq_check_items(struct sq_store *s,
    const struct rlg_store_item *items, size_t n,
    const struct rlg_decision *decisions);
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
static int sq_load(struct sq_store *s, const struct rlg_store_item *item,
    struct sq_item *x);
static int sq_save(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x);
static int sq_failed(struct sq_store *s, int rc);
static void sq_sqlite_error(struct sq_store *s, const char *op, int rc);
static void sq_seterr(struct sq_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool sq_unusable(int rc);
static const char *sq_code_name(int rc, char *buf, size_t size);

const struct rlg_store_ops rlg_store_sqlite_ops = {
	.name = "sqlite",
	.open = sq_open,
	.step = sq_step,
	.prune = sq_prune,
	.errmsg = sq_errmsg,
	.close = sq_close,
};

static const char *const sq_sql[SQ_NSTMT] = {
	[SQ_BEGIN] = "BEGIN IMMEDIATE",
	[SQ_COMMIT] = "COMMIT",
	[SQ_ROLLBACK] = "ROLLBACK",
	[SQ_SELECT] =
	    "SELECT window_start_ms, count, expires_ms FROM rlg_state"
	    " WHERE policy = ?1 AND client = ?2",
	[SQ_UPSERT] =
	    "INSERT INTO rlg_state"
	    " (policy, client, window_start_ms, count, expires_ms)"
	    " VALUES (?1, ?2, ?3, ?4, ?5)"
	    " ON CONFLICT (policy, client) DO UPDATE SET"
	    " window_start_ms = excluded.window_start_ms,"
	    " count = excluded.count,"
	    " expires_ms = excluded.expires_ms",
	/*
	 * Most admitted requests change only the count of a stored row.
	 * Leaving expires_ms out of the SET list spares the index: one page
	 * per commit instead of two, about 1.5x the decisions per second.
	 */
	[SQ_UPDATE] =
	    "UPDATE rlg_state SET window_start_ms = ?3, count = ?4"
	    " WHERE policy = ?1 AND client = ?2",
	/* A bounded batch: the inner SELECT walks the expires_ms index. */
	[SQ_PRUNE] =
	    "DELETE FROM rlg_state WHERE (policy, client) IN"
	    " (SELECT policy, client FROM rlg_state"
	    " WHERE expires_ms <= ?1 LIMIT 1000)",
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
	s->path = rlg_xstrdup(cfg->path != NULL ? cfg->path : "");
	s->busy_timeout_ms = cfg->busy_timeout_ms > 0 ?
	    cfg->busy_timeout_ms : 0;
	s->nscratch = 4;
	s->scratch = rlg_xcalloc(s->nscratch, sizeof *s->scratch);
	snprintf(s->errmsg, sizeof s->errmsg, "no error");
	*out = &s->base;
	return sq_connect(s) == 0 ? RLG_OK : RLG_ESTORE;
}

static int
sq_step(struct rlg_store *base, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions)
{
	struct sq_store *s = (struct sq_store *)base;
	struct sq_item *x;
	bool admitted = true, found;
	size_t i, j;
	int rc;

	if ((rc = sq_check_items(s, items, n, decisions)) != RLG_OK)
		return rc;
	if (sq_ready(s, now_ms) != 0)
		return RLG_ESTORE;
	if (n > s->nscratch) {
		free(s->scratch);
		s->nscratch = n;
		s->scratch = rlg_xcalloc(n, sizeof *s->scratch);
	}

	if ((rc = sq_run(s, "step", s->stmt[SQ_BEGIN])) != SQLITE_OK)
		return sq_failed(s, rc);
	for (i = 0; i < n; i++) {
		x = &s->scratch[i];
		/*
		 * The same (policy, client) twice in one request counts
		 * twice: the second sees the first one's new state, and
		 * its row exists by the time the second is written.
		 */
		found = false;
		for (j = i; j-- > 0 && !found; ) {
			if (strcmp(items[j].policy->name,
			    items[i].policy->name) == 0 &&
			    strcmp(items[j].client, items[i].client) == 0) {
				x->in = s->scratch[j].out;
				x->stored = true;
				found = true;
			}
		}
		if (!found && (rc = sq_load(s, &items[i], x)) != SQLITE_OK)
			return sq_failed(s, rc);
		if (rlg_limiter_step(items[i].policy, &x->in, now_ms,
		    &x->out, &decisions[i]) != RLG_OK) {
			sq_seterr(s, "store step: the limiter refused policy"
			    " \"%s\" (limit %lld, window %lld ms)",
			    items[i].policy->name,
			    (long long)items[i].policy->limit,
			    (long long)items[i].policy->window_ms);
			if (!sqlite3_get_autocommit(s->db))
				(void)sq_run(s, NULL, s->stmt[SQ_ROLLBACK]);
			return RLG_EINVAL;
		}
		if (!decisions[i].admitted)
			admitted = false;
	}

	if (!admitted) {
		/* Rejected: no quota consumed, nothing written. */
		if ((rc = sq_run(s, "step", s->stmt[SQ_ROLLBACK])) !=
		    SQLITE_OK)
			return sq_failed(s, rc);
		return RLG_OK;
	}
	for (i = 0; i < n; i++) {
		if ((rc = sq_save(s, &items[i], &s->scratch[i])) != SQLITE_OK)
			return sq_failed(s, rc);
	}
	if ((rc = sq_run(s, "step", s->stmt[SQ_COMMIT])) != SQLITE_OK)
		return sq_failed(s, rc);
	return RLG_OK;
}

static int
sq_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted)
{
	struct sq_store *s = (struct sq_store *)base;
	sqlite3_stmt *st;
	int64_t total = 0;
	int rc, changes;

	if (deleted != NULL)
		*deleted = 0;
	if (sq_ready(s, now_ms) != 0)
		return RLG_ESTORE;
	st = s->stmt[SQ_PRUNE];
	/* Each batch is one autocommit DELETE: its own short transaction. */
	do {
		sqlite3_bind_int64(st, 1, now_ms);
		if ((rc = sq_run(s, "prune", st)) != SQLITE_OK)
			return sq_failed(s, rc);
		changes = sqlite3_changes(s->db);
		total += changes;
		if (deleted != NULL)
			*deleted = total;
	} while (changes >= SQ_PRUNE_BATCH);
	return RLG_OK;
}

static const char *
sq_errmsg(const struct rlg_store *base)
{
	const struct sq_store *s = (const struct sq_store *)base;

	return s->errmsg;
}

static void
sq_close(struct rlg_store *base)
{
	struct sq_store *s = (struct sq_store *)base;

	if (s == NULL)
		return;
	sq_disconnect(s);
	free(s->scratch);
	free(s->path);
	free(s);
}

/* Refuses a malformed request before it reaches the database. */
static int
sq_check_items(struct sq_store *s, const struct rlg_store_item *items,
    size_t n, const struct rlg_decision *decisions)
{
	size_t i;

	if (items == NULL || decisions == NULL || n == 0) {
		sq_seterr(s, "store step: no policy to apply");
		return RLG_EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (items[i].policy == NULL || items[i].policy->name == NULL ||
		    items[i].client == NULL) {
			sq_seterr(s, "store step: item %zu has no policy or"
			    " no client key", i);
			return RLG_EINVAL;
		}
		if (strnlen(items[i].client, RLG_CLIENT_KEY_MAX + 1) >
		    RLG_CLIENT_KEY_MAX) {
			sq_seterr(s, "store step: client key longer than %d"
			    " bytes", RLG_CLIENT_KEY_MAX);
			return RLG_EINVAL;
		}
	}
	return RLG_OK;
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
 * sets WAL and synchronous=NORMAL, applies the schema to a new file and
 * prepares the statements. 0, or -1 with errmsg set and s->db NULL.
 */
static int
sq_connect(struct sq_store *s)
{
	struct stat st;
	int rc, i;

	assert(s->db == NULL);
	s->check_armed = false;
	if (s->path[0] == '\0') {
		sq_seterr(s, "sqlite open: no database path configured");
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
			sq_seterr(s, "sqlite open on %s: %s", s->path,
			    sqlite3_errstr(rc));
		else
			sq_sqlite_error(s, "open", rc);
		goto fail;
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, s->busy_timeout_ms);
	if (sqlite3_db_readonly(s->db, "main") == 1) {
		sq_seterr(s, "sqlite open on %s: the file is read-only for"
		    " this process (SQLITE_READONLY)", s->path);
		goto fail;
	}
	if (sq_check_header(s) != 0 || sq_set_wal(s) != 0 ||
	    sq_exec(s, "open", "PRAGMA synchronous = NORMAL") != 0 ||
	    sq_apply_schema(s) != 0)
		goto fail;
	for (i = 0; i < SQ_NSTMT; i++) {
		rc = sqlite3_prepare_v3(s->db, sq_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &s->stmt[i], NULL);
		if (rc != SQLITE_OK) {
			sq_sqlite_error(s, "prepare", rc);
			goto fail;
		}
	}
	if (stat(s->path, &st) != 0) {
		sq_seterr(s, "sqlite open on %s: %s", s->path,
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
	int i;

	for (i = 0; i < SQ_NSTMT; i++) {
		sqlite3_finalize(s->stmt[i]);
		s->stmt[i] = NULL;
	}
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
		sq_seterr(s, "sqlite open on %s: %s", s->path,
		    strerror(errno));
		return -1;
	}

	len = strlen(s->path);
	dir = rlg_xstrdup(s->path);
	slash = strrchr(dir, '/');
	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		sq_seterr(s, "sqlite open on %s: cannot create the database:"
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
		sq_seterr(s, "sqlite open on %s: cannot create the database:"
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
		sq_seterr(s, "sqlite open on %s: cannot read the header (%s)",
		    s->path, sqlite3_errstr(rc));
		return -1;
	}
	/* A short read pads with zeros: an empty file is an empty database. */
	for (i = 0; i < sizeof head && head[i] == 0; i++)
		;
	if (i < sizeof head && memcmp(head, magic, sizeof magic) != 0) {
		sq_seterr(s, "sqlite open on %s: file is not a database"
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
 * Applies db/schema.sql to a new database (user_version 0) in one write
 * transaction, checking the version again under the lock since another
 * process may have done it meanwhile; refuses versions it does not know.
 */
static int
sq_apply_schema(struct sq_store *s)
{
	int version;

	if (sq_user_version(s, &version) != 0)
		return -1;
	if (version == 0) {
		if (sq_exec(s, "schema", "BEGIN IMMEDIATE") != 0)
			return -1;
		if (sq_user_version(s, &version) != 0)
			goto rollback;
		if (version == 0) {
			if (sq_exec(s, "schema", rlg_schema_sql) != 0 ||
			    sq_user_version(s, &version) != 0)
				goto rollback;
		}
		if (sq_exec(s, "schema", "COMMIT") != 0)
			goto rollback;
	}
	if (version > SQ_SCHEMA_VERSION) {
		sq_seterr(s, "sqlite open on %s: database schema version %d"
		    " is newer than this rlgate (%d)", s->path, version,
		    SQ_SCHEMA_VERSION);
		return -1;
	}
	if (version != SQ_SCHEMA_VERSION) {
		sq_seterr(s, "sqlite open on %s: unknown database schema"
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
 * Writes x->out: an UPDATE that leaves the expiry index alone when the row
 * exists and keeps its expiry, else the UPSERT (new row, new window).
 */
static int
sq_save(struct sq_store *s, const struct rlg_store_item *item,
    const struct sq_item *x)
{
	sqlite3_stmt *st;
	int rc;

	if (x->stored && x->out.expires_ms == x->in.expires_ms) {
		st = s->stmt[SQ_UPDATE];
		sqlite3_bind_text(st, 1, item->policy->name, -1,
		    SQLITE_STATIC);
		sqlite3_bind_text(st, 2, item->client, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, x->out.window_start_ms);
		sqlite3_bind_int64(st, 4, x->out.count);
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
	sqlite3_bind_int64(st, 5, x->out.expires_ms);
	return sq_run(s, "step", st);
}

/*
 * After an SQLite error (errmsg already set): rolls back an open
 * transaction and closes a connection the error left unusable, so the next
 * call reopens it. Returns RLG_ESTORE.
 */
static int
sq_failed(struct sq_store *s, int rc)
{
	if (s->db != NULL && !sqlite3_get_autocommit(s->db))
		(void)sq_run(s, NULL, s->stmt[SQ_ROLLBACK]);
	if (sq_unusable(rc))
		sq_disconnect(s);
	return RLG_ESTORE;
}

/* errmsg = "sqlite OP on PATH: message (SQLITE_CODE)". */
static void
sq_sqlite_error(struct sq_store *s, const char *op, int rc)
{
	char name[48];

	sq_seterr(s, "sqlite %s on %s: %s (%s)", op, s->path,
	    s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc),
	    sq_code_name(rc, name, sizeof name));
}

static void
sq_seterr(struct sq_store *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
	va_end(ap);
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
