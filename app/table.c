/*
 * table.c: the decision table of one host in shared memory (table.h says
 * what it is for and how it is laid out): opening it. The other files
 * serve this one: table_build.c builds, resizes and binds a table,
 * table_entry.c holds its entries, table_mem.c its mapping,
 * lock and journal (table_mem_priv.h: the layout they share).
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
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "table.h"
#include "table_build_priv.h"
#include "table_mem_priv.h"
#include "util.h"

static int tbl_boot_id(char *out, size_t size);
static int tbl_open_once(const char *path, const struct tbl_ident *id,
    uint64_t capacity, tbl_seed_fn *seed, void *ctx, struct tbl **out,
    char *err, size_t errsize);
static int tbl_set_aside(const char *path, const struct stat *sb, char *err,
    size_t errsize);
static bool tbl_matches(const struct tbl_header *h, uint64_t size,
    const struct tbl_ident *id, uint64_t capacity, const char *boot);
static bool tbl_live(const struct tbl_header *h, uint64_t size,
    const char *boot);
static bool tbl_in_use(int fd);

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
	if (fd == -2)
		return tbl_set_aside(path, &sb, err, errsize);
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

/*
 * A file refused (planted, or of another mode; err says why): never
 * used; built anew in its place once it is set aside. 1 (open again),
 * or -1 (err set).
 */
static int
tbl_set_aside(const char *path, const struct stat *sb, char *err,
    size_t errsize)
{
	rlg_log("%s", err);
	if (rlg_shared_set_aside(path, sb) != 0 && errno != ENOENT) {
		snprintf(err + strlen(err), errsize - strlen(err),
		    "; cannot move it aside: %s", strerror(errno));
		return -1;
	}
	rlg_log("table %s: the refused file is now %s.refused; a new"
	    " table is built", path, path);
	return 1;
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
	    h->slots == tbl_slots_of(h->capacity) &&
	    strncmp(h->boot_id, boot, sizeof h->boot_id) == 0 &&
	    h->count <= h->capacity &&
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

bool
tbl_named_by(const struct tbl *t, const char *path)
{
	return t->fd < 0 || !tbl_moved(t->fd, path);
}
