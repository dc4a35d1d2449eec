/*
 * table_build.c: a decision table made for its opener (table.c, under
 * the file's flock): built anew (tbl_build), resized with its entries
 * (tbl_migrate), adopted as it is (tbl_adopt), or bound to another
 * database (tbl_rebind); and the entries of one table copied into
 * another (tbl_carry).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <sodium.h>

#include "table_build.h"
#include "table_build_priv.h"
#include "table_entry.h"
#include "table_mem.h"
#include "table_mem_priv.h"
#include "util.h"

static void tbl_init_header(struct tbl *t, const struct tbl_ident *id,
    uint64_t capacity, const char *boot);
static uint64_t tbl_copy_in(struct tbl *t, const struct tbl *old, bool keep);
static int tbl_seed_from(void *ctx, struct tbl *t);

/*
 * The database's file (its device, inode and, where both know it, birth
 * time), and not made anew since the table was built: a
 * table built in the same millisecond as the schema was given, or later,
 * was built from that file (whoever gave the schema, the builder read it
 * after), while a table of a file deleted and made again is older.
 */
bool
tbl_is_of(const struct tbl_header *h, const struct tbl_ident *id)
{
	return h->db_dev == (uint64_t)id->dev &&
	    h->db_ino == (uint64_t)id->ino &&
	    (h->db_born_ns == 0 || id->born_ns == 0 ||
	    h->db_born_ns == id->born_ns) &&
	    (id->created_ms == 0 || h->built_ms >= id->created_ms);
}

bool
tbl_belongs(const struct tbl *t, const struct tbl_ident *id)
{
	return tbl_is_of(t->h, id);
}

/* The live table in fd mapped at its own size, bound to id. 0 or -1. */
int
tbl_adopt(const char *path, int fd, const struct tbl_header *h,
    const struct tbl_ident *id, struct tbl **out, char *err, size_t errsize)
{
	struct tbl *t = tbl_map(fd, h->capacity, err, errsize);

	if (t == NULL)
		return -1;
	memcpy(t->hash_key, t->h->hash_key, sizeof t->hash_key);
	if (!tbl_is_of(t->h, id)) {
		int n = -1;

		if (tbl_flush_lock(t) == 0) {
			n = tbl_rebind(t, id, path);
			tbl_flush_unlock(t);
		}
		if (n < 0) {
			snprintf(err, errsize, "table %s: its lock is"
			    " unusable", path);
			tbl_close(t);
			return -1;
		}
	}
	*out = t;
	return 0;
}

struct tbl_from {
	struct tbl *old;
	bool same_db;
	uint64_t copied;
};

/*
 * Resizes the live table in fd, which no process maps, to capacity: the
 * old file is retired and unlinked, a new one built with its entries
 * (each with its state, and unflushed if it was, or if the database is
 * another). 0, -1 or 1 (tbl_build's).
 */
int
tbl_migrate(const char *path, int fd, const struct tbl_header *h,
    const struct tbl_ident *id, uint64_t capacity, const char *boot,
    struct tbl **out, char *err, size_t errsize)
{
	struct tbl_from from = { NULL, false, 0 };
	uint32_t one = 1;
	int rc;

	if ((from.old = tbl_map(fd, h->capacity, err, errsize)) == NULL)
		return -1;
	/* A holder that died mid-step is undone before its entries move. */
	if (tbl_lock(from.old) != 0) {
		snprintf(err, errsize, "table %s: its lock is unusable", path);
		tbl_close(from.old);
		return -1;
	}
	memcpy(from.old->hash_key, from.old->h->hash_key,
	    sizeof from.old->hash_key);
	from.same_db = tbl_is_of(from.old->h, id);
	(void)!pwrite(fd, &one, sizeof one,
	    offsetof(struct tbl_header, retired));
	if (unlink(path) != 0 && errno != ENOENT) {
		snprintf(err, errsize, "table %s: cannot replace it: %s",
		    path, strerror(errno));
		tbl_unlock(from.old);
		tbl_close(from.old);
		return -1;
	}
	rc = tbl_build(path, id, capacity, boot, tbl_seed_from, &from, out,
	    err, errsize);
	if (rc == 0)
		rlg_log("table %s: resized from %llu to %llu entries (no"
		    " process had it open); its %llu states carried over%s",
		    path, (unsigned long long)h->capacity,
		    (unsigned long long)capacity,
		    (unsigned long long)from.copied, from.same_db ? "" :
		    ", to be written into the database, which was deleted or"
		    " replaced");
	tbl_unlock(from.old);
	tbl_close(from.old);
	return rc;
}

/*
 * The sound entries of old into t (lock held, or t being built): each
 * read within bounds (its key's length, its policy's slot and name; one
 * that is not sound is left out), over t's own of the same key if any.
 * keep: an entry keeps old's seq and flushed mark (a resize of the same
 * database), else it is unflushed in t. Its sync block goes along (what
 * a host owes Redis is not lost to a resize or a carry). The entries
 * copied.
 */
static uint64_t
tbl_copy_in(struct tbl *t, const struct tbl *old, bool keep)
{
	const struct tbl_header *oh = old->h;
	const struct tbl_entry *o;
	char client[TBL_CLIENT_MAX + 1], policy[TBL_POLICY_MAX + 1];
	struct tbl_entry *e;
	uint64_t i, n = 0;

	for (i = tbl_next(old, 0); i < old->slots; i = tbl_next(old, i + 1)) {
		o = &old->entries[i];
		if (!o->used || o->policy >= TBL_POLICIES ||
		    !oh->policies[o->policy].used ||
		    strnlen(oh->policies[o->policy].name, TBL_POLICY_MAX + 1) >
		    TBL_POLICY_MAX || tbl_client(old, o, client) < 0)
			continue;
		memcpy(policy, oh->policies[o->policy].name, sizeof policy);
		policy[TBL_POLICY_MAX] = '\0';
		if ((e = tbl_find(t, policy, client)) == NULL &&
		    (e = tbl_insert(t, policy, client, 0, 0)) == NULL)
			continue;
		tbl_write(t, e, &o->st);
		/* what it owes the shared store (local+global) goes along */
		tbl_write_sync(t, e, &o->sync);
		if (keep) {
			e->seq = o->seq;
			e->flushed = o->flushed;
		} else {
			e->flushed = e->seq - 1;
		}
		tbl_commit(t);
		n++;
	}
	return n;
}

/* tbl_seed_fn of a resize: the old table's entries into t. */
static int
tbl_seed_from(void *ctx, struct tbl *t)
{
	struct tbl_from *from = ctx;

	from->copied = tbl_copy_in(t, from->old, from->same_db);
	return 0;
}

uint64_t
tbl_carry(struct tbl *t, struct tbl *from)
{
	return tbl_copy_in(t, from, false);
}

int
tbl_rebind(struct tbl *t, const struct tbl_ident *id, const char *path)
{
	struct tbl_header *h = t->h;
	uint64_t i, n = 0, old_dev = h->db_dev, old_ino = h->db_ino;

	if (tbl_lock(t) != 0)
		return -1;
	/* Unflushed first, the database's identity last: a holder killed
	 * in between leaves a table that is bound again by the next. */
	for (i = tbl_next(t, 0); i < t->slots; i = tbl_next(t, i + 1)) {
		if (tbl_at(t, i) != NULL) {
			t->entries[i].flushed = t->entries[i].seq - 1;
			n++;
		}
	}
	h->db_dev = (uint64_t)id->dev;
	h->db_ino = (uint64_t)id->ino;
	h->db_born_ns = id->born_ns;
	h->built_ms = rlg_now_ms();
	tbl_unlock(t);
	rlg_log("table %s: its database was deleted or replaced (device %llu"
	    " inode %llu, now device %llu inode %llu%s): the table keeps every"
	    " client's state and writes its %llu states into the new file;"
	    " the overrides are now the new file's (a new file has none)",
	    path, (unsigned long long)old_dev, (unsigned long long)old_ino,
	    (unsigned long long)id->dev, (unsigned long long)id->ino,
	    old_dev == (uint64_t)id->dev && old_ino == (uint64_t)id->ino ?
	    ", a new file" : "", (unsigned long long)n);
	return (int)(n > INT32_MAX ? INT32_MAX : n);
}

/*
 * Makes the new file (O_EXCL: a builder that lost a race gets 1 and
 * opens again), under its own flock: header, mutex, seed, magic last.
 */
int
tbl_build(const char *path, const struct tbl_ident *id, uint64_t capacity,
    const char *boot, tbl_seed_fn *seed, void *ctx, struct tbl **out,
    char *err, size_t errsize)
{
	struct tbl_header *h;
	struct tbl *t;
	uint64_t need;
	bool locked;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd < 0) {
		if (errno == EEXIST)
			return 1;
		snprintf(err, errsize, "table %s: %s", path, strerror(errno));
		return -1;
	}
	/*
	 * Between the open and the flock another opener may have locked the
	 * new, empty file, taken it for no table and replaced it: building
	 * this one then would leave its users apart from the others' table.
	 */
	locked = flock(fd, LOCK_EX) == 0;
	if (locked && tbl_moved(fd, path)) {
		close(fd);
		return 1;
	}
	if (!locked || ftruncate(fd, (off_t)tbl_file_size(capacity)) != 0) {
		snprintf(err, errsize, "table %s: cannot size it to %llu"
		    " bytes: %s", path,
		    (unsigned long long)tbl_file_size(capacity),
		    strerror(errno));
		unlink(path);
		close(fd);
		return -1;
	}
	if ((t = tbl_map(fd, capacity, err, errsize)) == NULL) {
		unlink(path);
		close(fd);
		return -1;
	}
	h = t->h;
	tbl_init_header(t, id, capacity, boot);
	need = (uint64_t)((unsigned char *)t->entries - t->base);
	if (t->fd < 0 || tbl_take_blocks(t, 0, need) != 0) {
		snprintf(err, errsize, "table %s: no room on its file system"
		    " for its header and bitmaps (%llu bytes): %s", path,
		    (unsigned long long)need, strerror(errno));
		tbl_close(t);
		unlink(path);
		close(fd);
		return -1;
	}
	if (seed != NULL && seed(ctx, t) != 0) {
		snprintf(err, errsize, "table %s: seeding it from the"
		    " database failed", path);
		tbl_close(t);
		unlink(path);
		close(fd);
		return -1;
	}
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, TBL_MAGIC, sizeof h->magic);
	flock(fd, LOCK_UN);
	close(fd);
	*out = t;
	return 0;
}

/*
 * The header of a new table, all but its magic: its layout, its
 * database, this boot, a new hash key (copied into t), the two robust
 * mutexes.
 */
static void
tbl_init_header(struct tbl *t, const struct tbl_ident *id, uint64_t capacity,
    const char *boot)
{
	struct tbl_header *h = t->h;
	pthread_mutexattr_t ma;
	uint64_t bo, eo;

	h->version = TBL_VERSION;
	h->entry_size = sizeof(struct tbl_entry);
	h->capacity = capacity;
	(void)tbl_offsets(capacity, &h->slots, &bo, &eo);
	h->db_dev = (uint64_t)id->dev;
	h->db_ino = (uint64_t)id->ino;
	h->db_born_ns = id->born_ns;
	h->built_ms = rlg_now_ms();
	snprintf(h->boot_id, sizeof h->boot_id, "%s", boot);
	randombytes_buf(h->hash_key, sizeof h->hash_key);
	memcpy(t->hash_key, h->hash_key, sizeof t->hash_key);
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&h->lock, &ma);
	pthread_mutex_init(&h->flush_lock, &ma);
	pthread_mutexattr_destroy(&ma);
}
