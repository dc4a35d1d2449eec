/*
 * table_entry.h: the entries of the decision table (table_entry.c):
 * lookup, insertion, writes, removal and walks, under the table's lock
 * (table_mem.h) but where said. Part of table.h, which users include.
 */
#ifndef RLG_TABLE_ENTRY_H
#define RLG_TABLE_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table_types.h"

/*
 * The entry of (policy, client), or NULL. The pointer stays valid while
 * the lock is held and no entry is removed (a removal moves entries;
 * an insertion may remove expired ones first).
 */
struct tbl_entry *tbl_find(struct tbl *t, const char *policy,
    const char *client);

/*
 * The same in steps, for a caller that hashes before it takes the lock:
 * the slot of a policy name (-1: the table has none; lock held), the
 * hash of (slot, client) (no lock: the key is fixed when the table is
 * built), a touch of the entry slot that hash leads to (no lock: it
 * reads racily and uses nothing it reads; the page comes into the
 * caches before the lock is taken), and the lookup by slot and hash
 * (lock held).
 */
int tbl_slot(struct tbl *t, const char *policy);
uint64_t tbl_key_hash(const struct tbl *t, int slot, const char *client);
void tbl_prefetch(const struct tbl *t, uint64_t hash);
struct tbl_entry *tbl_find_hashed(struct tbl *t, int slot, uint64_t hash,
    const char *client);

/*
 * A new entry for (policy, client), which has none, state all zero, or
 * NULL when the table is full or the policy has max entries already
 * (after reusing expired ones at now_ms), or policy names are full.
 * Journaled.
 */
struct tbl_entry *tbl_insert(struct tbl *t, const char *policy,
    const char *client, int64_t now_ms, uint64_t max);

/* Writes st into e (journaled), seq + 1. */
void tbl_write(struct tbl *t, struct tbl_entry *e,
    const struct rlg_state *st);

/*
 * Writes y into e's sync block (journaled): the local+global mode's. Its
 * slot's bit in the table's bitmap of entries that owe follows
 * tbl_sync_owes(y) (a walk of what is owed: tbl_next_owing).
 */
void tbl_write_sync(struct tbl *t, struct tbl_entry *e,
    const struct tbl_sync *y);

/* Whether y owes the shared store: units to push, or a read asked for. */
bool tbl_sync_owes(const struct tbl_sync *y);

/*
 * Removes e and frees its slot (journaled): entries after it in its run
 * may move. The caller ends the journal after each removal or a few
 * (tbl_unlock, or tbl_commit). false: not removed (its moves would not
 * fit in the journal: a table written so by another hand).
 */
bool tbl_remove(struct tbl *t, struct tbl_entry *e);

/*
 * The client key of e, an entry of t, into out (TBL_CLIENT_MAX + 1
 * bytes), NUL-terminated: its length, or -1 when the entry holds no sound
 * key (a length past its room, a spill slot outside the area or not its
 * own, a NUL inside).
 */
int tbl_client(const struct tbl *t, const struct tbl_entry *e, char *out);

/* The policy name of an entry. */
const char *tbl_policy(const struct tbl *t, const struct tbl_entry *e);

/* The policy name in slot (0 <= slot < TBL_POLICIES), or NULL. */
const char *tbl_policy_at(const struct tbl *t, int slot);

/*
 * The entry in slot i of the table (0 <= i < tbl_extent, the slots), or
 * NULL if unused: for walks that flush or sweep, in batches under the
 * lock, from one slot in use to the next (tbl_next: the first at or
 * after i that the bitmap marks, or tbl_extent). A removal between two
 * batches may move an entry from after the walk's place to before it:
 * a walk sees every entry that stays put, and one that moved at its
 * next walk.
 */
struct tbl_entry *tbl_at(struct tbl *t, uint64_t i);
uint64_t tbl_extent(const struct tbl *t);
uint64_t tbl_next(const struct tbl *t, uint64_t i);
/* The first slot at or after i marked as owing (tbl_write_sync), or
 * tbl_extent: the entry there, if tbl_at finds one, is to be checked. */
uint64_t tbl_next_owing(const struct tbl *t, uint64_t i);

/* Entries in use, and the capacity. */
uint64_t tbl_count(const struct tbl *t);
uint64_t tbl_capacity(const struct tbl *t);

#endif
