/*
 * store_sqlite_db.c: the SQLite store's connection: opening it (the file
 * created with mode 0600, WAL mode, the pragmas, the schema applied and
 * checked, the statements prepared), closing it, and running and
 * reporting its statements. Beside the step (store_sqlite.c) because a
 * connection is opened, and opened again, from every call: the handle
 * outlives its connections.
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
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "store_sqlite_parts.h"
#include "util.h"

/* How often (in ms of the caller's clock) a step checks the file's inode. */
#define SQ_CHECK_MS 1000

static void sq_log_moved(struct sq_store *s);
static bool sq_same_file(const struct sq_store *s);
static int sq_stat(const char *path, dev_t *dev, ino_t *ino,
    int64_t *born_ns);
static int sq_harden(struct sq_store *s);
static int sq_prepare_db(struct sq_store *s);
static int sq_create_file(struct sq_store *s);
static void sq_unlink_suffix(const char *path, const char *suffix);
static int sq_check_header(struct sq_store *s);
static int sq_set_wal(struct sq_store *s);
static bool sq_unusable(int rc);

int
sq_ready(struct sq_store *s, int64_t now_ms)
{
	if (s->db != NULL) {
		if (!s->check_armed) {
			s->check_armed = true;
			s->checked_ms = now_ms;
		} else if (now_ms < s->checked_ms ||
		    now_ms - s->checked_ms >= SQ_CHECK_MS) {
			s->checked_ms = now_ms;
			if (!sq_same_file(s))
				sq_log_moved(s);
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

int
sq_ready_now(struct sq_store *s, int64_t now_ms)
{
	if (s->db != NULL && !sq_same_file(s))
		sq_log_moved(s);
	return sq_ready(s, now_ms);
}

/*
 * The path names another file than the connection's (deleted, or
 * replaced): says what becomes of the counts, and disconnects (the next
 * sq_ready opens the new file). With commit = behind the decision table
 * writes its states into the new file (store_table.c, which says so);
 * with each the database is the only record.
 */
static void
sq_log_moved(struct sq_store *s)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static struct { dev_t dev; ino_t ino; int64_t born_ns; } told;
	bool first;

	/* Once per process and file: each connection (a worker thread's,
	 * the overrides reader's) sees the same move; a quiet thread's
	 * leaves the telling to a worker's. */
	if (rlg_log_store_quiet()) {
		sq_disconnect(s);
		return;
	}
	pthread_mutex_lock(&mu);
	first = told.dev != s->dev || told.ino != s->ino ||
	    told.born_ns != s->born_ns;
	told.dev = s->dev;
	told.ino = s->ino;
	told.born_ns = s->born_ns;
	pthread_mutex_unlock(&mu);
	if (first)
		rlg_log("store %s: the database file was deleted or replaced:"
		    " reopening; with commit = each the counts and overrides"
		    " are now the new file's (a new file has none), with"
		    " behind the decision table writes its states into it",
		    s->path);
	sq_disconnect(s);
}

/*
 * Does the path still name the file the connection opened? A file
 * deleted and made again may get the same inode: its birth time differs.
 */
static bool
sq_same_file(const struct sq_store *s)
{
	int64_t born_ns;
	dev_t dev;
	ino_t ino;

	if (sq_stat(s->path, &dev, &ino, &born_ns) != 0)
		return false;
	return dev == s->dev && ino == s->ino && born_ns == s->born_ns;
}

/* The file's device, inode and birth time (0 where the file system
 * keeps none). 0, or -1 with errno. */
static int
sq_stat(const char *path, dev_t *dev, ino_t *ino, int64_t *born_ns)
{
	struct statx sx;

	if (statx(AT_FDCWD, path, 0, STATX_INO | STATX_BTIME, &sx) != 0)
		return -1;
	*dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	*ino = (ino_t)sx.stx_ino;
	*born_ns = (sx.stx_mask & STATX_BTIME) ?
	    (int64_t)sx.stx_btime.tv_sec * 1000000000 +
	    sx.stx_btime.tv_nsec : 0;
	return 0;
}

/*
 * Opens the connection: creates the file (mode 0600) if it is missing,
 * sets WAL, synchronous and journal_size_limit, applies the schema to a
 * new file, checks that the schema is rlgate's (sq_check_schema) and
 * prepares the statements. 0, or -1 with errmsg set and s->db NULL.
 */
int
sq_connect(struct sq_store *s)
{
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
			sq_open_error(s, "%s", sqlite3_errstr(rc));
		else
			sq_sqlite_error(s, "open", rc);
		goto fail;
	}
	if (sq_harden(s) != 0 || sq_prepare_db(s) != 0)
		goto fail;
	s->preparing = false;
	if (sq_stat(s->path, &s->dev, &s->ino, &s->born_ns) != 0) {
		sq_open_error(s, "%s", strerror(errno));
		goto fail;
	}
	return 0;

fail:
	sq_disconnect(s);
	return -1;
}

/*
 * The new connection's handlers and guards, before it reads anything:
 * extended result codes, the busy handler, the authorizer and the WAL
 * hook, and no code from the file that runs unchecked. A file this
 * process may not write is refused here. 0, or -1 with errmsg set (the
 * caller closes the connection).
 */
static int
sq_harden(struct sq_store *s)
{
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
		sq_open_error(s, "cannot set SQLITE_DBCONFIG_DEFENSIVE and"
		    " trusted_schema = OFF: %s", sqlite3_errmsg(s->db));
		return -1;
	}
	sqlite3_set_authorizer(s->db, sq_authorize, s);
	sqlite3_wal_hook(s->db, sq_wal_hook, s);
	if (sqlite3_db_readonly(s->db, "main") == 1) {
		sq_open_error(s, "the file is read-only for this process"
		    " (SQLITE_READONLY)");
		return -1;
	}
	return 0;
}

/*
 * The hardened connection's file made ready: its header checked, WAL
 * mode, synchronous and journal_size_limit set, the schema applied (or
 * migrated), checked, and the statements prepared. 0, or -1 with errmsg
 * set (the caller closes the connection).
 */
static int
sq_prepare_db(struct sq_store *s)
{
	char limit[64];

	snprintf(limit, sizeof limit, "PRAGMA journal_size_limit = %lld",
	    (long long)SQ_WAL_LIMIT_BYTES);
	if (sq_check_header(s) != 0 || sq_set_wal(s) != 0 ||
	    sq_exec(s, "open", s->sync_full ? "PRAGMA synchronous = FULL" :
	    "PRAGMA synchronous = NORMAL") != 0 ||
	    sq_exec(s, "open", limit) != 0 ||
	    sq_apply_schema(s) != 0)
		return -1;
	/*
	 * The check and the statements see one snapshot of the schema: the
	 * statements carry no trigger but those the check saw.
	 */
	if (sq_exec(s, "open", "BEGIN") != 0)
		return -1;
	if (sq_check_schema(s) != 0 || sq_prepare_all(s) != 0) {
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	if (sq_exec(s, "open", "COMMIT") != 0)
		return -1;
	return 0;
}

/* Finalizes the statements and closes the connection, if open. */
void
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
		sq_open_error(s, "%s", strerror(errno));
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
		sq_open_error(s, "cannot create the database: directory %s: %s",
		    dir, strerror(errno));
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
		sq_open_error(s, "cannot create the database: %s",
		    strerror(err));
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
		sq_open_error(s, "cannot read the header (%s)",
		    sqlite3_errstr(rc));
		return -1;
	}
	/* A short read pads with zeros: an empty file is an empty database. */
	for (i = 0; i < sizeof head && head[i] == 0; i++)
		;
	if (i < sizeof head && memcmp(head, magic, sizeof magic) != 0) {
		sq_open_error(s, "file is not a database (SQLITE_NOTADB)");
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
 * After an SQLite error (errmsg already set): rolls back an open
 * transaction and closes a connection the error left unusable, so the next
 * call reopens it. Returns RLG_ESTORE.
 */
int
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
void
sq_rollback(struct sq_store *s)
{
	if (s->db == NULL || sqlite3_get_autocommit(s->db))
		return;
	if (s->stmt[SQ_ROLLBACK] != NULL)
		(void)sq_run(s, NULL, s->stmt[SQ_ROLLBACK]);
	else
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
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

