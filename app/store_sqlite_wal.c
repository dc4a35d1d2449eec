/*
 * store_sqlite_wal.c: the SQLite store's upkeep between requests: the
 * WAL kept bounded, and the modes of the store's files reported. Apart
 * from the step (store_sqlite.c) because none of it is on a request's
 * path: rlg_store_idle runs it after the answer.
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
 *
 * sq_check_files (the SQLite store's rlg_store_check_files) lives here
 * too: whether others than
 * rlgate may read or write the database, its -wal, its -shm and the
 * decision table beside it (commit = behind), which holds the same state.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "store.h"
#include "store_sqlite_parts.h"
#include "util.h"

static void sq_checkpoint_locked(struct sq_store *s, int mode);
static void sq_warn_file(const char *path, const char *suffix, char *files,
    size_t fsize, char *names, size_t nsize, unsigned *bad,
    unsigned *bad_bits);

/*
 * After every commit of the connection (in place of SQLite's automatic
 * checkpoint): notes how many frames the WAL holds; the checkpoint itself
 * waits for rlg_store_idle, or the end of the step.
 */
int
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

void
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
void
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
	sq_checkpoint_locked(s, SQLITE_CHECKPOINT_RESTART);
}

/*
 * A checkpoint of mode (RESTART or TRUNCATE: they take the write lock),
 * its waits bounded by SQ_CHECKPOINT_BUSY_MS (busy_timeout_ms if
 * shorter). A failure is left to the next step to report.
 */
static void
sq_checkpoint_locked(struct sq_store *s, int mode)
{
	int log_frames, done_frames;

	s->busy_limit_ms = s->busy_timeout_ms < SQ_CHECKPOINT_BUSY_MS ?
	    s->busy_timeout_ms : SQ_CHECKPOINT_BUSY_MS;
	clock_gettime(CLOCK_MONOTONIC, &s->busy_since);
	(void)sqlite3_wal_checkpoint_v2(s->db, "main", mode, &log_frames,
	    &done_frames);
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
void
sq_shrink(struct sq_store *s)
{
	struct stat st;
	int commits = s->commits;

	s->commits = 0;
	if (commits >= SQ_WAL_QUIET_COMMITS || s->db == NULL ||
	    !sqlite3_get_autocommit(s->db) || stat(s->wal_path, &st) != 0 ||
	    st.st_size <= SQ_WAL_SHRINK_BYTES)
		return;
	sq_checkpoint_locked(s, SQLITE_CHECKPOINT_TRUNCATE);
}

int
sq_check_files(const struct rlg_store_config *cfg,
    void (*warn)(void *ctx, const char *line), void *ctx)
{
	char files[1024], names[1024], line[2300];
	unsigned bad = 0, bad_bits = 0;

	if (cfg == NULL || cfg->sqlite.path == NULL || cfg->sqlite.path[0] == '\0')
		return 0;
	files[0] = '\0';
	names[0] = '\0';
	sq_warn_file(cfg->sqlite.path, "", files, sizeof files, names,
	    sizeof names, &bad, &bad_bits);
	sq_warn_file(cfg->sqlite.path, "-wal", files, sizeof files, names,
	    sizeof names, &bad, &bad_bits);
	sq_warn_file(cfg->sqlite.path, "-shm", files, sizeof files, names,
	    sizeof names, &bad, &bad_bits);
	sq_warn_file(cfg->sqlite.path, "-table", files, sizeof files, names,
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
