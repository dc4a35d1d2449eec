/*
 * table_mem_priv.h: the inside of the decision table, which its files share
 * (table.c opens a table; table_build.c builds, resizes and binds one;
 * table_entry.c holds the entries, placed by their hash; table_mem.c the mapping,
 * the lock and the journal): the layout of the file's header, the handle,
 * and table_mem.c's calls that only they make. Nothing outside the table
 * includes it.
 */
#ifndef RLG_TABLE_MEM_PRIV_H
#define RLG_TABLE_MEM_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table_types.h"

#define TBL_MAGIC "RLGTAB01"
/*
 * 6: entries of 264 bytes (the state's ban: the penalty box), else as
 * 5: each entry (224 bytes, its sync block with it) in the slot its
 * hash leads to (no index), a bitmap of the slots in use and one of the
 * entries that owe the shared store; 4: entries of 400 bytes
 * and an index of their numbers; 3: entries of 320 bytes.
 */
#define TBL_VERSION 6
/*
 * The journal's room: a step of 64 items, each an entry and its spill
 * slot, with expired entries reclaimed (each removal moving the entries
 * after it in its run, 328 bytes of journal a move), fits many times
 * over; reclaiming stops at half of it, and a removal whose moves would
 * not fit is not made (tbl_remove).
 */
#define TBL_UNDO_BYTES ((size_t)1024 * 1024)
/* Expired entries an insertion may reclaim, and slots it looks at. */
#define TBL_RECLAIM_MAX 16
#define TBL_RECLAIM_SCAN 1024

struct tbl_policy {
	char name[TBL_POLICY_MAX + 1];
	uint8_t used;
	uint64_t count;               /* its entries in use */
};

/*
 * The key of an entry longer than TBL_KEY_INLINE, apart: the spill
 * slots follow the entries, min(capacity, TBL_SPILL_MAX) of them (a
 * long key past them is a full table for that client), their blocks
 * taken as the tail grows; a slot is freed with its entry. A slot names
 * its entry, and an entry's slot is used only when it names that entry
 * back (an entry moved to another slot takes its spill slot's name
 * along): a slot number or a free list written by another hand leads to
 * no other entry's key.
 */
struct tbl_spill {
	uint32_t owner;               /* its entry's slot + 1; 0: free */
	uint32_t pad;
	uint64_t next;                /* free: the next free slot + 1; 0 */
	char key[TBL_CLIENT_MAX + 1];
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
	uint64_t capacity;            /* live entries at most */
	uint64_t slots;               /* entry slots (tbl_offsets) */
	uint64_t db_dev;
	uint64_t db_ino;
	int64_t built_ms;             /* when it was built (tbl_is_of) */
	int64_t db_born_ns;           /* the database's birth time; 0 */
	char boot_id[40];
	unsigned char hash_key[16];   /* SipHash key, random per build */
	pthread_mutex_t lock;
	pthread_mutex_t flush_lock;
	uint64_t count;               /* entries in use */
	uint64_t hand;                /* where reclaiming looks next */
	uint64_t recoveries;
	int64_t next_flush_ms;        /* the flush clock, atomic */
	int64_t flushed_at_ms;
	uint64_t spill_extent;        /* spill slots ever taken (the tail) */
	uint64_t spill_free;          /* free spill slot + 1; 0: none */
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
	uint64_t *bitmap;             /* a bit a slot: in use */
	uint64_t *owing;              /* a bit a slot: its entry owes
	                               * (local+global, tbl_sync_owes) */
	struct tbl_entry *entries;
	struct tbl_spill *spill;
	int fd;                       /* the file, for tbl_take_blocks */
	/*
	 * The bounds, fixed when mapped from the size mapped: the header's
	 * copies are anybody's who may write the file, so no count, slot
	 * or length read from the mapping is used before it is checked
	 * against these.
	 */
	uint64_t capacity;            /* live entries at most */
	uint64_t slots;               /* entry slots */
	uint64_t spills;              /* spill slots */
};

/* The file and its mapping. */
uint64_t tbl_slots_of(uint64_t capacity);
uint64_t tbl_offsets(uint64_t capacity, uint64_t *slots, uint64_t *bitmap_off,
    uint64_t *entries_off);
uint64_t tbl_spills(uint64_t capacity);
struct tbl *tbl_map(int fd, uint64_t capacity, char *err, size_t errsize);
bool tbl_moved(int fd, const char *path);
int tbl_take_blocks(struct tbl *t, uint64_t off, uint64_t len);

/* The journal. */
void tbl_save(struct tbl *t, const void *p, size_t len);
void tbl_set_u64(struct tbl *t, uint64_t *p, uint64_t v);
bool tbl_room(const struct tbl *t, size_t len);

#endif
