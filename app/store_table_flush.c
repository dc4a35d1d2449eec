/*
 * store_table_flush.c: the decision table's write-behind (store_table.c
 * decides; this file keeps the database behind it), and the table file
 * mapped and seeded from the database's live states.
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
 * The table's database is reached through its store's bulk operations
 * (struct rlg_store_ops: ident, scan, begin, put, commit, rollback,
 * cache), on a connection of the flusher's own.
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
#include "store_table_flush.h"
#include "store_table_sync.h"
#include "table.h"
#include "util.h"

static int tab_seed(void *ctx, struct tbl *t);
static struct tab_flusher *tab_flusher_find(const char *path);
static void *tab_flusher_main(void *arg);
static int tab_flush(struct tab_flusher *f, int64_t now_ms);
static int tab_commit(struct tbl *t, struct rlg_store *db,
    const struct tbl_ident *id, const struct tab_mark *marks, size_t n);
static bool tab_pause(struct tbl *t, struct tab_flusher *f, int64_t ms);
static void tab_wait(struct tab_flusher *f, int64_t ms);
static void tab_syncer_open(struct tab_flusher *f,
    const struct rlg_store_config *cfg);

static pthread_mutex_t tab_flushers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tab_flusher *tab_flushers;

/* Maps the table of db's file, built from db's states if need be. */
struct tbl *
tab_open_table(struct rlg_store *db, const char *path, uint64_t capacity,
    char *err, size_t errsize)
{
	struct tbl_ident id = { 0 };

	/* A shared store (local+global) is no file: the table is bound to
	 * none, and starts empty (a client's state is read when it comes,
	 * store_table.c's tab_pull). */
	if (db->ops->ident == NULL)
		return tbl_open(path, &id, capacity, NULL, NULL, err,
		    errsize);
	if (db->ops->ident(db, &id.dev, &id.ino, &id.born_ns,
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

	if (db->ops->scan(db, rlg_now_ms(), tab_seed_row, &c) !=
	    RLG_OK)
		return -1;
	if (c.skipped > 0)
		rlg_log("table: %llu states of the database did not fit in"
		    " %llu entries and start fresh",
		    (unsigned long long)c.skipped,
		    (unsigned long long)tbl_capacity(t));
	return 0;
}

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
struct tab_flusher *
tab_flusher_join(const struct rlg_store_config *cfg,
    const struct rlg_store_ops *ops, const char *path, uint64_t capacity)
{
	struct tab_flusher *f;

	pthread_mutex_lock(&tab_flushers_mu);
	if ((f = tab_flusher_find(path)) == NULL) {
		f = rlg_xcalloc(1, sizeof *f);
		f->path = rlg_xstrdup(path);
		f->db_path = rlg_xstrdup(cfg->sqlite.path);
		f->cfg.backend = cfg->backend;
		f->ops = ops;
		f->cfg.sqlite = cfg->sqlite;
		f->cfg.sqlite.path = f->db_path;
		/* Its own connection, with no group (it commits alone),
		 * no table and no cache: the database itself. */
		f->cfg.group_commit = RLG_GROUP_OFF;
		f->cfg.sqlite.commit = RLG_COMMIT_EACH;
		f->cfg.rejection_cache = 0;
		f->capacity = capacity;
		f->interval_ms = cfg->sqlite.flush_ms > 0 ?
		    cfg->sqlite.flush_ms : TAB_FLUSH_MS_DEFAULT;
		if (ops->sync != NULL)
			tab_syncer_open(f, cfg);
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

void
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
	if (f->running)
		rlg_thread_stop(f->thread, &f->mu, &f->cv, &f->stop);
	tbl_close(f->t);
	if (f->db != NULL)
		f->db->ops->close(f->db);
	free(f->wb);
	free(f->sb);
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

	if (f->sb == NULL)
		f->wb = rlg_xmalloc(sizeof *f->wb);
	/* This thread only (Linux: a thread has its own nice value). */
	errno = 0;
	prio = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno == 0)
		(void)setpriority(PRIO_PROCESS, (id_t)gettid(),
		    prio + TAB_FLUSHER_NICE);
	/* The backend itself: a handle even on failure, which heals. */
	if (f->db == NULL && f->ops->open(&f->cfg, &f->db) != RLG_OK)
		rlg_log("table %s: %s", f->path, f->db->errmsg);
	if (f->db->ops->cache != NULL)
		f->db->ops->cache(f->db, kib < TAB_CACHE_KIB_MIN ?
		    TAB_CACHE_KIB_MIN : kib > TAB_CACHE_KIB_MAX ?
		    TAB_CACHE_KIB_MAX : kib);
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

/*
 * Copies the next batch of changed entries from slot *at on; frees those
 * that expired and are flushed (the slot is looked at again: an entry
 * after it may have moved in). Returns the rows copied into rows + n.
 */
static size_t
tab_copy(struct tbl *t, uint64_t *at, struct tab_row *rows, size_t n,
    size_t room, int64_t now_ms)
{
	struct tbl_entry *e;
	struct tab_row *r;
	uint64_t end = *at + TAB_FLUSH_BATCH;
	size_t got = 0;

	for (*at = tbl_next(t, *at); *at < end && *at < tbl_extent(t) &&
	    n + got < room; *at = tbl_next(t, *at + 1)) {
		while ((e = tbl_at(t, *at)) != NULL && e->seq == e->flushed &&
		    e->st.expires_ms <= now_ms && tbl_remove(t, e))
			tbl_commit(t);
		r = &rows[n + got];
		/* unchanged, or a key with a NUL: no row holds it */
		if (e == NULL || e->seq == e->flushed ||
		    tbl_client(t, e, r->client) < 0)
			continue;
		got++;
		r->mark.at = *at;
		r->mark.hash = e->hash;
		r->mark.seq = e->seq;
		snprintf(r->policy, sizeof r->policy, "%s", tbl_policy(t, e));
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
	if (f->sb != NULL)
		return tab_sync_behind(f->t, f->db, f->path, now_ms, f->sb);
	return tab_write_behind(f->t, f->db, f->path, now_ms, f->wb, f);
}

/*
 * Local+global: the flusher syncs with the shared store every sync_ms,
 * on a connection of its own opened now (the config's strings are not
 * kept: a reload may free them), alone (no group commit).
 */
static void
tab_syncer_open(struct tab_flusher *f, const struct rlg_store_config *cfg)
{
	struct rlg_store_config c = *cfg;

	c.group_commit = RLG_GROUP_OFF;
	c.sqlite.commit = RLG_COMMIT_EACH;
	c.rejection_cache = 0;
	f->interval_ms = cfg->sync_ms > 0 ? cfg->sync_ms :
	    TAB_SYNC_MS_DEFAULT;
	f->sb = rlg_xcalloc(1, sizeof *f->sb);
	if (f->ops->open(&c, &f->db) != RLG_OK)
		rlg_log("table %s: %s", f->path, f->db->errmsg);
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
void
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
int
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
	if (db->ops->ident(db, &id.dev, &id.ino, &id.born_ns,
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
			if (db->ops->begin(db, now_ms) != RLG_OK) {
				rc = -2;
				break;
			}
		}
		for (i = 0; i < n; i++) {
			wb->put[i] = wb->rows[i].row;
			wb->marks[marked + i] = wb->rows[i].mark;
		}
		if (db->ops->put(db, wb->put, n) != RLG_OK) {
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
		db->ops->rollback(db);
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

	if (db->ops->commit(db) != RLG_OK)
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
