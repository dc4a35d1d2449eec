/*
 * table_mem.c: the decision table's file and its mapping (sizes, blocks
 * taken before use), its two robust locks, its journal, and the fields
 * of its header read or set without the lock (the flush clock, the
 * retired flag).
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
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "table_mem.h"
#include "table_mem_priv.h"
#include "util.h"

static void tbl_playback(struct tbl *t);

uint64_t
tbl_file_size(uint64_t capacity)
{
	uint64_t slots, bo, eo;

	return tbl_offsets(capacity, &slots, &bo, &eo);
}

size_t
tbl_entry_size(void)
{
	return sizeof(struct tbl_entry);
}

uint64_t
tbl_spill_bytes(uint64_t capacity)
{
	return tbl_spills(capacity) * sizeof(struct tbl_spill);
}

/* Spill slots of a table of capacity entries. */
uint64_t
tbl_spills(uint64_t capacity)
{
	return capacity < TBL_SPILL_MAX ? capacity : TBL_SPILL_MAX;
}

/*
 * Entry slots of a table of capacity entries: a third more, so that a
 * full table is three quarters used and a lookup's run stays short
 * (linear probing: about 2.5 slots looked at to find an entry, 8.5 to
 * find none, at that load).
 */
uint64_t
tbl_slots_of(uint64_t capacity)
{
	return capacity + capacity / 3 + 1;
}

/*
 * The file's size, and where its parts start: the header, the bitmap
 * of the slots in use, then that of the entries that owe the shared
 * store (as long, right after it), the entry slots, the spill slots
 * (right after the entries: 264 is a multiple of their alignment).
 */
uint64_t
tbl_offsets(uint64_t capacity, uint64_t *slots, uint64_t *bitmap_off,
    uint64_t *entries_off)
{
	uint64_t s = tbl_slots_of(capacity);

	_Static_assert(sizeof(struct tbl_entry) % _Alignof(struct tbl_spill)
	    == 0, "the spill slots follow the entries aligned");
	*slots = s;
	*bitmap_off = (sizeof(struct tbl_header) + 63) & ~(uint64_t)63;
	*entries_off = (*bitmap_off + 2 * ((s + 63) / 64) * sizeof(uint64_t) +
	    63) & ~(uint64_t)63;
	return *entries_off + s * sizeof(struct tbl_entry) +
	    tbl_spill_bytes(capacity);
}

/* Whether path names another file than fd now. */
bool
tbl_moved(int fd, const char *path)
{
	struct stat a, b;

	if (fstat(fd, &a) != 0 || stat(path, &b) != 0)
		return true;
	return a.st_dev != b.st_dev || a.st_ino != b.st_ino;
}

/*
 * The file is sparse: a page of it first written on a full file system
 * would kill the writer (SIGBUS). So its blocks are taken (fallocate)
 * before they are used: the header and the bitmap when it is built, a
 * group of 64 entry slots when its first entry is put in (tbl_insert),
 * a spill slot when the spill tail reaches it. 0, or -1 with errno
 * (ENOSPC: the new client is refused, on_error). A file system without
 * fallocate stays sparse.
 */
int
tbl_take_blocks(struct tbl *t, uint64_t off, uint64_t len)
{
	if (len == 0 || fallocate(t->fd, 0, (off_t)off, (off_t)len) == 0)
		return 0;
	return errno == EOPNOTSUPP ? 0 : -1;
}

struct tbl *
tbl_map(int fd, uint64_t capacity, char *err, size_t errsize)
{
	uint64_t slots, bo, eo, size = tbl_offsets(capacity, &slots, &bo, &eo);
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
	t->bitmap = (uint64_t *)(t->base + bo);
	t->owing = t->bitmap + (slots + 63) / 64;
	t->entries = (struct tbl_entry *)(t->base + eo);
	t->spill = (struct tbl_spill *)(t->base + eo +
	    slots * sizeof(struct tbl_entry));
	t->capacity = capacity;
	t->slots = slots;
	t->spills = tbl_spills(capacity);
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

void
tbl_retire(struct tbl *t)
{
	__atomic_store_n(&t->h->retired, 1, __ATOMIC_RELEASE);
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
void
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

/* Whether the journal has room for len more bytes of records. */
bool
tbl_room(const struct tbl *t, size_t len)
{
	uint64_t used = t->h->undo_used;

	return used <= TBL_UNDO_BYTES && TBL_UNDO_BYTES - used >= len;
}

/* A journaled store of one counter. */
void
tbl_set_u64(struct tbl *t, uint64_t *p, uint64_t v)
{
	tbl_save(t, p, sizeof *p);
	*p = v;
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
		{ "count", offsetof(struct tbl_header, count) },
		{ "hand", offsetof(struct tbl_header, hand) },
		{ "capacity", offsetof(struct tbl_header, capacity) },
		{ "slots", offsetof(struct tbl_header, slots) },
		{ "spill_extent", offsetof(struct tbl_header, spill_extent) },
		{ "spill_free", offsetof(struct tbl_header, spill_free) },
		{ "undo_n", offsetof(struct tbl_header, undo_n) },
		{ "undo_used", offsetof(struct tbl_header, undo_used) },
		{ "undo", offsetof(struct tbl_header, undo) },
	};
	size_t i;

	for (i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (strcmp(fields[i].name, name) == 0)
			return t->base + fields[i].off;
	if (strcmp(name, "bitmap") == 0)
		return t->bitmap;
	if (strcmp(name, "owing") == 0)
		return t->owing;
	return strcmp(name, "entries") == 0 ? t->entries : NULL;
}
