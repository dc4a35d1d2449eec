/*
 * table.c: the decision table of one host in shared memory (table.h says
 * what it is for and how it is laid out).
 *
 * The journal. A holder of the lock writes nothing without tbl_save
 * first: the old bytes of the range go to the journal in the header,
 * then the record is counted (a release fence between, and between the
 * count and the write), then the range is written. A holder killed
 * anywhere leaves counted records whose ranges are either unchanged or
 * changed; playing them back newest first restores the table as it was
 * when the lock was taken. tbl_lock does that on EOWNERDEAD, before it
 * marks the mutex consistent. Ending the journal (undo_n = 0) is one
 * aligned store: the step is then whole.
 *
 * Building. The file is opened (O_NOFOLLOW, created 0600) and checked to
 * be a regular file of this user; an flock serializes the processes that
 * open it. Under the flock, a header that matches (magic, version,
 * layout, capacity, boot, database) is mapped as it is; any other is
 * marked retired (when the file is long enough to hold the flag),
 * unlinked, and a new file is made with O_EXCL, sized, given a new
 * mutex and hash key, seeded, and only then given its magic. A process
 * (or thread) that gets a file's flock and finds that the path names
 * another file by then opens the path again; one that mapped the old
 * file earlier sees tbl_retired and does the same.
 *
 * The authority. A table of this version and boot is never built again
 * from the database, whatever the opener's configuration or database:
 * its entries are the counts, the database their copy. Every mapping
 * holds a read lock (an open file description lock) on the file's first
 * byte, so an opener can tell whether another mapping exists. A table of
 * another size (another max_clients or table_entries) is adopted as it
 * is while any process maps it; when none does, it is resized: a new
 * file of the opener's size gets its entries (tbl_migrate), unless they
 * do not fit, and then it is adopted too. A table of another database
 * (the file deleted, or another moved over it) is bound to the new one
 * (tbl_rebind): every entry is marked unflushed, so the next flush
 * writes all of them into the new file.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "table.h"
#include "util.h"

#define TBL_MAGIC "RLGTAB01"
#define TBL_VERSION 3
/* The journal's room: a step of 64 items, each an entry and its index
 * slots, with expired entries reclaimed, fits many times over. */
#define TBL_UNDO_BYTES ((size_t)256 * 1024)
/* Expired entries an insertion may reclaim, and entries it looks at. */
#define TBL_RECLAIM_MAX 16
/* Entries whose disk blocks are taken at once (tbl_reserve): 84 KB. */
#define TBL_RESERVE ((uint64_t)256)
#define TBL_RECLAIM_SCAN 1024

struct tbl_policy {
	char name[TBL_POLICY_MAX + 1];
	uint8_t used;
	uint64_t count;               /* its entries in the index */
};

/* A journal record: where, how long, then the old bytes. */
struct tbl_undo {
	uint64_t off;
	uint32_t len;
	uint32_t pad;
};

struct tbl_header {
	char magic[8];
	uint32_t version;
	uint32_t retired;             /* offset 12 in every version */
	uint64_t entry_size;
	uint64_t capacity;
	uint64_t slots;               /* index slots, a power of two */
	uint64_t db_dev;
	uint64_t db_ino;
	int64_t built_ms;             /* when it was built (tbl_is_of) */
	int64_t db_born_ns;           /* the database's birth time; 0 */
	char boot_id[40];
	unsigned char hash_key[16];   /* SipHash key, random per build */
	pthread_mutex_t lock;
	pthread_mutex_t flush_lock;
	uint64_t extent;              /* entries ever taken (the tail) */
	uint64_t free_head;           /* free list: entry index + 1; 0: none */
	uint64_t count;               /* entries in the index */
	uint64_t hand;                /* where reclaiming looks next */
	uint64_t recoveries;
	int64_t next_flush_ms;        /* the flush clock, atomic */
	int64_t flushed_at_ms;
	uint64_t reserved;            /* entries whose disk blocks are taken */
	struct tbl_policy policies[TBL_POLICIES];
	uint64_t undo_n;              /* records in the journal; 0: none */
	uint64_t undo_used;           /* bytes of it */
	unsigned char undo[TBL_UNDO_BYTES];
};

struct tbl {
	unsigned char *base;
	size_t size;
	struct tbl_header *h;
	/*
	 * The header's hash_key, copied when mapped: in the header it shares
	 * a cache line with the lock, which every step of every core writes,
	 * and a step hashes its keys before it takes the lock.
	 */
	unsigned char hash_key[16];
	uint32_t *index;
	struct tbl_entry *entries;
	int fd;                       /* the file, for tbl_reserve */
	/*
	 * The bounds, fixed when mapped from the size mapped: the header's
	 * copies are anybody's who may write the file, so no count, index
	 * or length read from the mapping is used before it is checked
	 * against these.
	 */
	uint64_t capacity;            /* entries */
	uint64_t slots;               /* index slots, a power of two */
};

static uint64_t tbl_offsets(uint64_t capacity, uint64_t *slots,
    uint64_t *index_off, uint64_t *entries_off);
static int tbl_boot_id(char *out, size_t size);
static bool tbl_moved(int fd, const char *path);
static bool tbl_is_of(const struct tbl_header *h, const struct tbl_ident *id);
static int tbl_take_blocks(struct tbl *t, uint64_t off, uint64_t len);
static int tbl_reserve(struct tbl *t, uint64_t n);
static int tbl_open_once(const char *path, const struct tbl_ident *id,
    uint64_t capacity, tbl_seed_fn *seed, void *ctx, struct tbl **out,
    char *err, size_t errsize);
static int tbl_build(const char *path, const struct tbl_ident *id,
    uint64_t capacity, const char *boot, tbl_seed_fn *seed, void *ctx,
    struct tbl **out, char *err, size_t errsize);
static struct tbl *tbl_map(int fd, uint64_t capacity, char *err,
    size_t errsize);
static bool tbl_matches(const struct tbl_header *h, uint64_t size,
    const struct tbl_ident *id, uint64_t capacity, const char *boot);
static bool tbl_live(const struct tbl_header *h, uint64_t size,
    const char *boot);
static bool tbl_in_use(int fd);
static int tbl_adopt(const char *path, int fd, const struct tbl_header *h,
    const struct tbl_ident *id, struct tbl **out, char *err, size_t errsize);
static int tbl_migrate(const char *path, int fd, const struct tbl_header *h,
    const struct tbl_ident *id, uint64_t capacity, const char *boot,
    struct tbl **out, char *err, size_t errsize);
static int tbl_seed_from(void *ctx, struct tbl *t);
static void tbl_save(struct tbl *t, const void *p, size_t len);
static void tbl_playback(struct tbl *t);
static uint64_t tbl_hash(const struct tbl *t, unsigned policy,
    const char *client, size_t len);
static int tbl_policy_slot(struct tbl *t, const char *policy, bool add);
static bool tbl_reclaim(struct tbl *t, int64_t now_ms);
static void tbl_set_u64(struct tbl *t, uint64_t *p, uint64_t v);

uint64_t
tbl_file_size(uint64_t capacity)
{
	uint64_t slots, io, eo;

	return tbl_offsets(capacity, &slots, &io, &eo);
}

size_t
tbl_entry_size(void)
{
	return sizeof(struct tbl_entry);
}

/* The file's size, and where its parts start. */
static uint64_t
tbl_offsets(uint64_t capacity, uint64_t *slots, uint64_t *index_off,
    uint64_t *entries_off)
{
	uint64_t s = 16;

	while (s < 2 * capacity)
		s *= 2;
	*slots = s;
	*index_off = (sizeof(struct tbl_header) + 63) & ~(uint64_t)63;
	*entries_off = (*index_off + s * sizeof(uint32_t) + 63) &
	    ~(uint64_t)63;
	return *entries_off + capacity * sizeof(struct tbl_entry);
}

/* This boot's id: a reboot makes a new one. 0, or -1. */
static int
tbl_boot_id(char *out, size_t size)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	size_t n;

	memset(out, 0, size);
	if (f == NULL)
		return -1;
	n = fread(out, 1, size - 1, f);
	fclose(f);
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\0'))
		out[--n] = '\0';
	return n > 0 ? 0 : -1;
}

struct tbl *
tbl_open(const char *path, const struct tbl_ident *id, uint64_t capacity,
    tbl_seed_fn *seed, void *ctx, char *err, size_t errsize)
{
	struct tbl *t = NULL;
	int tries, rc;

	if (capacity == 0 || capacity > UINT32_MAX / 4) {
		snprintf(err, errsize, "table %s: %llu entries is out of"
		    " range", path, (unsigned long long)capacity);
		return NULL;
	}
	/* Another process may replace the file between open and flock. */
	for (tries = 0; tries < 8; tries++) {
		rc = tbl_open_once(path, id, capacity, seed, ctx, &t, err,
		    errsize);
		if (rc <= 0)
			return rc == 0 ? t : NULL;
	}
	snprintf(err, errsize, "table %s: replaced again and again while"
	    " opening it", path);
	return NULL;
}

/* One try: 0 (*out set), -1 (err set), or 1: the file was replaced. */
static int
tbl_open_once(const char *path, const struct tbl_ident *id,
    uint64_t capacity, tbl_seed_fn *seed, void *ctx, struct tbl **out,
    char *err, size_t errsize)
{
	struct tbl_header h;
	char boot[40];
	struct stat sb;
	ssize_t got;
	int fd, rc;

	if (tbl_boot_id(boot, sizeof boot) != 0) {
		snprintf(err, errsize, "table %s: cannot read this boot's id"
		    " (/proc/sys/kernel/random/boot_id)", path);
		return -1;
	}
	fd = rlg_shared_open(path, "table", true, &sb, err, errsize);
	if (fd == -2) {
		/* Planted, or of another mode: never used; built anew in
		 * its place once it is set aside. */
		rlg_log("%s", err);
		if (rlg_shared_set_aside(path, &sb) != 0 && errno != ENOENT) {
			snprintf(err + strlen(err), errsize - strlen(err),
			    "; cannot move it aside: %s", strerror(errno));
			return -1;
		}
		rlg_log("table %s: the refused file is now %s.refused; a new"
		    " table is built", path, path);
		return 1;
	}
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX) != 0) {
		snprintf(err, errsize, "table %s: flock: %s", path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	/* Replaced (or removed) while we waited for the flock: again. */
	if (tbl_moved(fd, path)) {
		close(fd);
		return 1;
	}
	memset(&h, 0, sizeof h);
	got = pread(fd, &h, sizeof h, 0);
	if (got == (ssize_t)sizeof h && fstat(fd, &sb) == 0 &&
	    tbl_matches(&h, (uint64_t)sb.st_size, id, capacity, boot)) {
		*out = tbl_map(fd, capacity, err, errsize);
		if (*out != NULL)
			memcpy((*out)->hash_key, (*out)->h->hash_key,
			    sizeof (*out)->hash_key);
		/* Unlocked by hand: the mapping keeps the file open. */
		flock(fd, LOCK_UN);
		close(fd);
		return *out != NULL ? 0 : -1;
	}
	/*
	 * A live table of another size or database: the authority, adopted
	 * (bound to this database if need be), or resized when no process
	 * maps it and its entries fit in capacity.
	 */
	if (got == (ssize_t)sizeof h && tbl_live(&h, (uint64_t)sb.st_size,
	    boot)) {
		if (h.capacity != capacity && h.count <= capacity &&
		    !tbl_in_use(fd))
			rc = tbl_migrate(path, fd, &h, id, capacity, boot, out,
			    err, errsize);
		else
			rc = tbl_adopt(path, fd, &h, id, out, err, errsize);
		flock(fd, LOCK_UN);
		close(fd);
		return rc;
	}
	/* Not ours: mark it retired for whoever mapped it, build anew. */
	if (got >= 16 && memcmp(h.magic, TBL_MAGIC, 6) == 0) {
		uint32_t one = 1;

		(void)!pwrite(fd, &one, sizeof one,
		    offsetof(struct tbl_header, retired));
	}
	if (unlink(path) != 0 && errno != ENOENT) {
		snprintf(err, errsize, "table %s: cannot replace it: %s",
		    path, strerror(errno));
		close(fd);
		return -1;
	}
	rc = tbl_build(path, id, capacity, boot, seed, ctx, out, err,
	    errsize);
	flock(fd, LOCK_UN);
	close(fd);
	return rc == 0 ? 0 : rc;
}

/* Whether path names another file than fd now. */
static bool
tbl_moved(int fd, const char *path)
{
	struct stat a, b;

	if (fstat(fd, &a) != 0 || stat(path, &b) != 0)
		return true;
	return a.st_dev != b.st_dev || a.st_ino != b.st_ino;
}

/* Whether the header is a table of this version for this database, of
 * capacity entries, in a file of size bytes. */
static bool
tbl_matches(const struct tbl_header *h, uint64_t size,
    const struct tbl_ident *id, uint64_t capacity, const char *boot)
{
	return h->capacity == capacity && tbl_live(h, size, boot) &&
	    tbl_is_of(h, id);
}

/*
 * Whether the header is a sound table of this version and boot, whatever
 * its size and database, in a file of size bytes.
 */
static bool
tbl_live(const struct tbl_header *h, uint64_t size, const char *boot)
{
	return memcmp(h->magic, TBL_MAGIC, sizeof h->magic) == 0 &&
	    h->version == TBL_VERSION && h->retired == 0 &&
	    h->entry_size == sizeof(struct tbl_entry) &&
	    h->capacity > 0 && h->capacity <= UINT32_MAX / 4 &&
	    size == tbl_file_size(h->capacity) &&
	    h->slots >= 2 * h->capacity && (h->slots & (h->slots - 1)) == 0 &&
	    strncmp(h->boot_id, boot, sizeof h->boot_id) == 0 &&
	    h->extent <= h->capacity && h->count <= h->extent &&
	    h->undo_used <= TBL_UNDO_BYTES;
}

/*
 * Whether a mapping of the file exists, in this process or another: each
 * holds a read lock on byte 0 (tbl_map) through its own open file
 * description, which a write lock through fd's would meet. In doubt (the
 * call fails), in use.
 */
static bool
tbl_in_use(int fd)
{
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
	    .l_start = 0, .l_len = 1 };

	if (fcntl(fd, F_OFD_GETLK, &l) != 0)
		return true;
	return l.l_type != F_UNLCK;
}

/* The live table in fd mapped at its own size, bound to id. 0 or -1. */
static int
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
static int
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
 * database), else it is unflushed in t. The entries copied.
 */
static uint64_t
tbl_copy_in(struct tbl *t, const struct tbl *old, bool keep)
{
	const struct tbl_header *oh = old->h;
	const struct tbl_entry *o;
	char client[TBL_CLIENT_MAX + 1], policy[TBL_POLICY_MAX + 1];
	struct tbl_entry *e;
	uint64_t i, n = 0, extent = oh->extent;

	if (extent > old->capacity)
		extent = old->capacity;
	for (i = 0; i < extent; i++) {
		o = &old->entries[i];
		if (!o->used || o->client_len > TBL_CLIENT_MAX ||
		    o->policy >= TBL_POLICIES || !oh->policies[o->policy].used ||
		    strnlen(oh->policies[o->policy].name, TBL_POLICY_MAX + 1) >
		    TBL_POLICY_MAX)
			continue;
		memcpy(client, o->client, o->client_len);
		client[o->client_len] = '\0';
		if (strlen(client) != o->client_len)
			continue;
		memcpy(policy, oh->policies[o->policy].name, sizeof policy);
		policy[TBL_POLICY_MAX] = '\0';
		if ((e = tbl_find(t, policy, client)) == NULL &&
		    (e = tbl_insert(t, policy, client, 0, 0)) == NULL)
			continue;
		tbl_write(t, e, &o->st);
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

bool
tbl_named_by(const struct tbl *t, const char *path)
{
	return t->fd < 0 || !tbl_moved(t->fd, path);
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
	for (i = 0; i < h->extent; i++) {
		if (t->entries[i].used) {
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
static int
tbl_build(const char *path, const struct tbl_ident *id, uint64_t capacity,
    const char *boot, tbl_seed_fn *seed, void *ctx, struct tbl **out,
    char *err, size_t errsize)
{
	pthread_mutexattr_t ma;
	struct tbl_header *h;
	uint64_t io, eo, need;
	struct tbl *t;
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
	h->version = TBL_VERSION;
	h->entry_size = sizeof(struct tbl_entry);
	h->capacity = capacity;
	(void)tbl_offsets(capacity, &h->slots, &io, &eo);
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
	eo = (uint64_t)((unsigned char *)t->entries - t->base);
	need = eo + TBL_RESERVE * (uint64_t)sizeof(struct tbl_entry);
	if (t->fd < 0 || tbl_take_blocks(t, 0, eo) != 0 ||
	    tbl_reserve(t, 1) != 0) {
		snprintf(err, errsize, "table %s: no room on its file system"
		    " for its header, index and first entries (%llu bytes):"
		    " %s", path, (unsigned long long)need, strerror(errno));
		tbl_close(t);
		unlink(path);
		close(fd);
		return -1;
	}
	tbl_commit(t);          /* the reservation is no step to undo */
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
 * The file is sparse: a page of it first written on a full file system
 * would kill the writer (SIGBUS). So its blocks are taken (fallocate)
 * before they are used: the header and the index when it is built, the
 * entries TBL_RESERVE at a time as the tail grows. 0, or -1 with errno
 * (ENOSPC: the new client is refused, on_error). A file system without
 * fallocate stays sparse.
 */
static int
tbl_take_blocks(struct tbl *t, uint64_t off, uint64_t len)
{
	if (len == 0 || fallocate(t->fd, 0, (off_t)off, (off_t)len) == 0)
		return 0;
	return errno == EOPNOTSUPP ? 0 : -1;
}

/* Blocks taken for the first n entries (under the lock, or building). */
static int
tbl_reserve(struct tbl *t, uint64_t n)
{
	struct tbl_header *h = t->h;
	uint64_t want, eo = (uint64_t)((unsigned char *)t->entries - t->base);
	/* taken so far, as the header says when it says something possible */
	uint64_t have = h->reserved <= t->capacity ? h->reserved : 0;

	if (n <= have)
		return 0;
	want = (n + TBL_RESERVE - 1) / TBL_RESERVE * TBL_RESERVE;
	if (want > t->capacity)
		want = t->capacity;
	if (tbl_take_blocks(t, eo + have * sizeof(struct tbl_entry),
	    (want - have) * sizeof(struct tbl_entry)) != 0)
		return -1;
	tbl_set_u64(t, &h->reserved, want);
	return 0;
}

static struct tbl *
tbl_map(int fd, uint64_t capacity, char *err, size_t errsize)
{
	uint64_t slots, io, eo, size = tbl_offsets(capacity, &slots, &io, &eo);
	struct tbl *t;
	void *p;

	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	    0);
	if (p == MAP_FAILED) {
		snprintf(err, errsize, "table: mmap of %llu bytes: %s",
		    (unsigned long long)size, strerror(errno));
		return NULL;
	}
	t = rlg_xcalloc(1, sizeof *t);
	t->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	/* Mapped: held as long as the mapping (tbl_in_use). */
	if (t->fd >= 0) {
		struct flock l = { .l_type = F_RDLCK, .l_whence = SEEK_SET,
		    .l_start = 0, .l_len = 1 };

		(void)fcntl(t->fd, F_OFD_SETLK, &l);
	}
	t->base = p;
	t->size = (size_t)size;
	t->h = p;
	t->index = (uint32_t *)(t->base + io);
	t->entries = (struct tbl_entry *)(t->base + eo);
	t->capacity = capacity;
	t->slots = slots;
	return t;
}

void
tbl_close(struct tbl *t)
{
	if (t == NULL)
		return;
	munmap(t->base, t->size);
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

bool
tbl_retired(const struct tbl *t)
{
	return __atomic_load_n(&t->h->retired, __ATOMIC_ACQUIRE) != 0;
}

/*
 * The database's file (its device, inode and, where both know it, birth
 * time), and not made anew since the table was built: a
 * table built in the same millisecond as the schema was given, or later,
 * was built from that file (whoever gave the schema, the builder read it
 * after), while a table of a file deleted and made again is older.
 */
static bool
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

int
tbl_lock(struct tbl *t)
{
	int rc = pthread_mutex_lock(&t->h->lock);

	/* A journal length no holder left (the last one ended it, or
	 * played it back): not trusted, the journal starts empty. */
	if ((rc == 0 || rc == EOWNERDEAD) &&
	    (t->h->undo_used > TBL_UNDO_BYTES ||
	    (t->h->undo_n == 0 && t->h->undo_used != 0)))
		tbl_commit(t);
	if (rc == EOWNERDEAD) {
		/* Its holder died: undo the step it was in. */
		tbl_playback(t);
		t->h->recoveries++;
		rc = pthread_mutex_consistent(&t->h->lock);
		if (rc != 0) {
			pthread_mutex_unlock(&t->h->lock);
			return -1;
		}
		return 0;
	}
	return rc == 0 ? 0 : -1;
}

void
tbl_commit(struct tbl *t)
{
	__atomic_store_n(&t->h->undo_n, 0, __ATOMIC_RELEASE);
	t->h->undo_used = 0;
}

void
tbl_unlock(struct tbl *t)
{
	tbl_commit(t);
	pthread_mutex_unlock(&t->h->lock);
}

void
tbl_abort(struct tbl *t)
{
	tbl_playback(t);
	pthread_mutex_unlock(&t->h->lock);
}

/*
 * Journals the len bytes at p before the caller writes them. A journal
 * that is full (never, for the steps rlgate makes) aborts: losing the
 * guarantee silently would be worse.
 */
static void
tbl_save(struct tbl *t, const void *p, size_t len)
{
	struct tbl_header *h = t->h;
	struct tbl_undo u;
	size_t need = sizeof u + ((len + 7) & ~(size_t)7);

	if (h->undo_used > TBL_UNDO_BYTES - need) {
		rlg_log("table: the journal of one step is full (%zu bytes)",
		    (size_t)h->undo_used);
		abort();
	}
	u.off = (uint64_t)((const unsigned char *)p - t->base);
	u.len = (uint32_t)len;
	u.pad = 0;
	memcpy(h->undo + h->undo_used, &u, sizeof u);
	memcpy(h->undo + h->undo_used + sizeof u, p, len);
	h->undo_used += need;
	/* The record is whole before it counts, and counts before the
	 * write it guards. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&h->undo_n, h->undo_n + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Restores what the journal's records saved, newest first; ends it. */
static void
tbl_playback(struct tbl *t)
{
	struct tbl_header *h = t->h;
	uint64_t n = h->undo_n, i, at;
	struct tbl_undo u;
	size_t *offs;

	if (n == 0)
		return;
	/* A record takes sizeof u at least: more were never written. */
	if (n > TBL_UNDO_BYTES / sizeof u)
		n = TBL_UNDO_BYTES / sizeof u;
	offs = rlg_xmalloc(n * sizeof *offs);
	for (i = 0, at = 0; i < n && at + sizeof u <= TBL_UNDO_BYTES; i++) {
		offs[i] = (size_t)at;
		memcpy(&u, h->undo + at, sizeof u);
		at += sizeof u + ((u.len + 7) & ~(uint64_t)7);
	}
	while (i-- > 0) {
		memcpy(&u, h->undo + offs[i], sizeof u);
		if (u.off <= t->size && u.len <= t->size - u.off &&
		    offs[i] + sizeof u + u.len <= TBL_UNDO_BYTES)
			memcpy(t->base + u.off, h->undo + offs[i] + sizeof u,
			    u.len);
	}
	free(offs);
	tbl_commit(t);
}

/* A journaled store of one counter. */
static void
tbl_set_u64(struct tbl *t, uint64_t *p, uint64_t v)
{
	tbl_save(t, p, sizeof *p);
	*p = v;
}

/* Keyed SipHash of the policy slot and the client key. */
static uint64_t
tbl_hash(const struct tbl *t, unsigned policy, const char *client,
    size_t len)
{
	unsigned char in[1 + TBL_CLIENT_MAX], out[crypto_shorthash_BYTES];
	uint64_t v;

	in[0] = (unsigned char)policy;
	memcpy(in + 1, client, len);
	crypto_shorthash(out, in, 1 + len, t->hash_key);
	memcpy(&v, out, sizeof v);
	return v;
}

/* The slot of a policy name, added when add; -1 if none (or full). */
static int
tbl_policy_slot(struct tbl *t, const char *policy, bool add)
{
	struct tbl_policy *p;
	int i, spare = -1;

	if (strlen(policy) > TBL_POLICY_MAX)
		return -1;
	for (i = 0; i < TBL_POLICIES; i++) {
		p = &t->h->policies[i];
		if (p->used && strncmp(p->name, policy, sizeof p->name) == 0)
			return i;
		if (spare < 0 && (!p->used || p->count == 0))
			spare = i;
	}
	if (!add || spare < 0)
		return -1;
	/* A name without entries (a policy the config dropped) makes room. */
	p = &t->h->policies[spare];
	tbl_save(t, p, sizeof *p);
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "%s", policy);
	p->used = 1;
	return spare;
}

struct tbl_entry *
tbl_find(struct tbl *t, const char *policy, const char *client)
{
	size_t len = strlen(client);
	int slot;

	if (len > TBL_CLIENT_MAX || (slot = tbl_policy_slot(t, policy,
	    false)) < 0)
		return NULL;
	return tbl_find_hashed(t, slot, tbl_key_hash(t, slot, client),
	    client);
}

struct tbl_entry *
tbl_find_hashed(struct tbl *t, int slot, uint64_t hash, const char *client)
{
	uint64_t mask = t->slots - 1, i, probes;
	size_t len = strlen(client);
	struct tbl_entry *e;
	uint32_t at;

	if (len > TBL_CLIENT_MAX)
		return NULL;
	/* Bounded: an index with no free slot was never written so. */
	for (i = hash & mask, probes = 0; probes < t->slots &&
	    (at = t->index[i]) != 0; i = (i + 1) & mask, probes++) {
		if (at > t->capacity)
			return NULL;  /* never written so; not trusted */
		e = &t->entries[at - 1];
		if (e->hash == hash && e->policy == slot &&
		    e->client_len == len && memcmp(e->client, client, len) == 0)
			return e;
	}
	return NULL;
}

int
tbl_slot(struct tbl *t, const char *policy)
{
	return tbl_policy_slot(t, policy, false);
}

uint64_t
tbl_key_hash(const struct tbl *t, int slot, const char *client)
{
	size_t len = strnlen(client, TBL_CLIENT_MAX + 1);

	return tbl_hash(t, (unsigned)slot, client,
	    len > TBL_CLIENT_MAX ? TBL_CLIENT_MAX : len);
}

/*
 * A hint only: the index slot of hash and the entry it names now, read
 * without the lock (a relaxed atomic load; a writer may change it at any
 * moment, and nothing but the cache depends on what it reads).
 */
void
tbl_prefetch(const struct tbl *t, uint64_t hash)
{
	uint64_t i = hash & (t->slots - 1);
	uint32_t at;

	at = __atomic_load_n(&t->index[i], __ATOMIC_RELAXED);
	if (at != 0 && at <= t->capacity)
		__builtin_prefetch(&t->entries[at - 1]);
}

struct tbl_entry *
tbl_insert(struct tbl *t, const char *policy, const char *client,
    int64_t now_ms, uint64_t max)
{
	struct tbl_header *h = t->h;
	size_t len = strlen(client);
	uint64_t hash, mask = t->slots - 1, i, at, probes;
	struct tbl_entry *e;
	bool reclaimed = false;
	int slot;

	if (len > TBL_CLIENT_MAX ||
	    (slot = tbl_policy_slot(t, policy, true)) < 0)
		return NULL;
	/* A free list that was never written so is dropped, not followed
	 * (its entries are lost until the table is built again). */
	if (h->free_head != 0 && (h->free_head > t->capacity ||
	    t->entries[h->free_head - 1].used))
		tbl_set_u64(t, &h->free_head, 0);
	while ((max > 0 && h->policies[slot].count >= max) ||
	    (h->free_head == 0 && h->extent >= t->capacity)) {
		if (reclaimed || !tbl_reclaim(t, now_ms))
			return NULL;
		reclaimed = true;
	}
	hash = tbl_hash(t, (unsigned)slot, client, len);
	/* The index slot first: one is free unless the index was written
	 * by another hand (count <= capacity, slots >= 2 x capacity). */
	for (i = hash & mask, probes = 0; t->index[i] != 0;
	    i = (i + 1) & mask)
		if (++probes >= t->slots)
			return NULL;
	if (h->free_head != 0) {
		at = h->free_head - 1;
		e = &t->entries[at];
		/* A free entry keeps the next free one in its hash. */
		tbl_set_u64(t, &h->free_head, e->hash);
	} else {
		at = h->extent;
		if (tbl_reserve(t, at + 1) != 0)
			return NULL;
		e = &t->entries[at];
		tbl_set_u64(t, &h->extent, at + 1);
	}
	tbl_save(t, e, sizeof *e);
	memset(e, 0, sizeof *e);
	e->hash = hash;
	e->policy = (uint8_t)slot;
	e->client_len = (uint16_t)len;
	memcpy(e->client, client, len);
	e->used = 1;
	tbl_save(t, &t->index[i], sizeof t->index[i]);
	t->index[i] = (uint32_t)(at + 1);
	tbl_set_u64(t, &h->count, h->count + 1);
	tbl_set_u64(t, &h->policies[slot].count, h->policies[slot].count + 1);
	return e;
}

void
tbl_write(struct tbl *t, struct tbl_entry *e, const struct rlg_state *st)
{
	tbl_save(t, &e->st, sizeof e->st + sizeof e->seq);
	e->st = *st;
	e->seq++;
}

/*
 * Takes e out of the index (backward-shift deletion: no tombstones, so
 * probes stay short) and puts it on the free list.
 */
void
tbl_remove(struct tbl *t, struct tbl_entry *e)
{
	struct tbl_header *h = t->h;
	uint64_t mask = t->slots - 1, i, j, home, at, probes;
	uint32_t x;

	at = (uint64_t)(e - t->entries);
	for (i = e->hash & mask, probes = 0; t->index[i] != at + 1;
	    i = (i + 1) & mask)
		if (t->index[i] == 0 || ++probes >= t->slots)
			return;       /* not in the index */
	for (j = (i + 1) & mask, probes = 0; (x = t->index[j]) != 0 &&
	    ++probes < t->slots; j = (j + 1) & mask) {
		/* An index entry never written so stays where it is. */
		home = x <= t->capacity ? t->entries[x - 1].hash & mask : j;
		/* Move j into the hole at i unless its home lies in (i, j]. */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			tbl_save(t, &t->index[i], sizeof t->index[i]);
			t->index[i] = t->index[j];
			i = j;
		}
	}
	tbl_save(t, &t->index[i], sizeof t->index[i]);
	t->index[i] = 0;
	if (e->policy < TBL_POLICIES)
		tbl_set_u64(t, &h->policies[e->policy].count,
		    h->policies[e->policy].count - 1);
	tbl_set_u64(t, &h->count, h->count - 1);
	tbl_save(t, e, sizeof e->hash + sizeof e->st + 2 * sizeof e->seq +
	    sizeof e->client_len + sizeof e->policy + sizeof e->used);
	e->used = 0;
	e->hash = h->free_head;
	tbl_set_u64(t, &h->free_head, at + 1);
}

/*
 * Frees up to TBL_RECLAIM_MAX expired entries among the next
 * TBL_RECLAIM_SCAN from the hand. Whether it freed any.
 */
static bool
tbl_reclaim(struct tbl *t, int64_t now_ms)
{
	struct tbl_header *h = t->h;
	uint64_t k, i, freed = 0, extent = tbl_extent(t);
	struct tbl_entry *e;

	if (extent == 0)
		return false;
	for (k = 0; k < TBL_RECLAIM_SCAN && k < extent &&
	    freed < TBL_RECLAIM_MAX; k++) {
		i = (h->hand % extent + k) % extent;
		if ((e = tbl_at(t, i)) != NULL &&
		    e->st.expires_ms <= now_ms) {
			tbl_remove(t, e);
			freed++;
		}
	}
	tbl_set_u64(t, &h->hand, (h->hand % extent + k) % extent);
	return freed > 0;
}

const char *
tbl_policy(const struct tbl *t, const struct tbl_entry *e)
{
	const char *name = tbl_policy_at(t, e->policy);

	return name != NULL ? name : "";
}

const char *
tbl_policy_at(const struct tbl *t, int slot)
{
	const struct tbl_policy *p;

	if (slot < 0 || slot >= TBL_POLICIES)
		return NULL;
	p = &t->h->policies[slot];
	/* A name is terminated where it was written; else not trusted. */
	if (!p->used || memchr(p->name, '\0', sizeof p->name) == NULL)
		return NULL;
	return p->name;
}

/* Entry i, used and whole (a policy slot and a length it can hold). */
struct tbl_entry *
tbl_at(struct tbl *t, uint64_t i)
{
	struct tbl_entry *e;

	if (i >= tbl_extent(t))
		return NULL;
	e = &t->entries[i];
	if (!e->used || e->client_len > TBL_CLIENT_MAX ||
	    e->policy >= TBL_POLICIES)
		return NULL;
	return e;
}

/* The header's extent, never past the capacity mapped. */
uint64_t
tbl_extent(const struct tbl *t)
{
	uint64_t n = t->h->extent;

	return n < t->capacity ? n : t->capacity;
}

uint64_t
tbl_count(const struct tbl *t)
{
	return t->h->count;
}

uint64_t
tbl_capacity(const struct tbl *t)
{
	return t->capacity;
}

bool
tbl_flush_due(struct tbl *t, int64_t now_ms, int64_t interval_ms)
{
	int64_t next = __atomic_load_n(&t->h->next_flush_ms, __ATOMIC_ACQUIRE);

	if (now_ms < next)
		return false;
	return __atomic_compare_exchange_n(&t->h->next_flush_ms, &next,
	    now_ms + interval_ms, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int64_t
tbl_flushed_at(const struct tbl *t)
{
	return __atomic_load_n(&t->h->flushed_at_ms, __ATOMIC_ACQUIRE);
}

void
tbl_set_flushed_at(struct tbl *t, int64_t now_ms)
{
	__atomic_store_n(&t->h->flushed_at_ms, now_ms, __ATOMIC_RELEASE);
}

int
tbl_flush_lock(struct tbl *t)
{
	int rc = pthread_mutex_lock(&t->h->flush_lock);

	/* It guards no data of its own: a dead holder left nothing half. */
	if (rc == EOWNERDEAD)
		rc = pthread_mutex_consistent(&t->h->flush_lock);
	return rc == 0 ? 0 : -1;
}

void
tbl_flush_unlock(struct tbl *t)
{
	pthread_mutex_unlock(&t->h->flush_lock);
}

void
tbl_retire(struct tbl *t)
{
	__atomic_store_n(&t->h->retired, 1, __ATOMIC_RELEASE);
}

uint64_t
tbl_recoveries(const struct tbl *t)
{
	return t->h->recoveries;
}

void *
tbl_field(struct tbl *t, const char *name)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		{ "extent", offsetof(struct tbl_header, extent) },
		{ "free_head", offsetof(struct tbl_header, free_head) },
		{ "count", offsetof(struct tbl_header, count) },
		{ "hand", offsetof(struct tbl_header, hand) },
		{ "capacity", offsetof(struct tbl_header, capacity) },
		{ "slots", offsetof(struct tbl_header, slots) },
		{ "reserved", offsetof(struct tbl_header, reserved) },
		{ "undo_n", offsetof(struct tbl_header, undo_n) },
		{ "undo_used", offsetof(struct tbl_header, undo_used) },
		{ "undo", offsetof(struct tbl_header, undo) },
	};
	size_t i;

	for (i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (strcmp(fields[i].name, name) == 0)
			return t->base + fields[i].off;
	return NULL;
}
