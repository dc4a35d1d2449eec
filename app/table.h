/*
 * table.h: the decision table of one host, in shared memory.
 *
 * With [store] commit = behind, the authoritative limiter state of the
 * gateway's processes and threads lives here, in a file mapped by every
 * one of them (beside the database: PATH-table, mode 0600), and the
 * SQLite file is written behind (store_table.c). This module is the
 * memory only: the file, its lock, the entries and the index. It speaks
 * no SQL and runs no algorithm.
 *
 * Layout: a header (identity, the lock, counters, the names of the
 * policies, an undo journal), an index of 2 x capacity slots (open
 * addressing, linear probing, keyed SipHash of policy and client), and
 * capacity entries of fixed size (the client key inline). Entries are
 * taken from a free list or the unused tail; an expired entry is as good
 * as none and is reused.
 *
 * Crashes: the lock is a process-shared robust mutex. Every write under
 * it is journaled first (the old bytes, in the header), so a holder
 * killed at any instruction leaves a journal that the next holder, told
 * by EOWNERDEAD, plays back: the step it was in never happened, and
 * nothing else is touched (tbl_lock).
 *
 * A table is tied to this boot (a reboot empties it:
 * /proc/sys/kernel/random/boot_id) and to this version's layout: a file
 * that is not such a table is built again from the database (tbl_open
 * says how without racing other processes). A live table is the
 * authority: one of another size is adopted while in use (resized when
 * no process maps it), one of another database is bound to it and
 * written into it whole (tbl_rebind).
 */
#ifndef RLG_TABLE_H
#define RLG_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table_types.h"

/*
 * Maps the table at path for a database of identity id, with room for
 * capacity entries, building it (and calling seed) when there is none or
 * the one there is not a live table of this version and boot (a bad
 * header, another version, another boot). A live table of another size
 * is mapped at its own size (tbl_capacity tells) while another mapping
 * of it exists, else resized with its entries; one of another database
 * is bound to id (tbl_rebind). Builders take an flock on the file, so only
 * one builds; a file replaced is marked retired first, and a process
 * that mapped it notices (tbl_retired). The file must be a regular file
 * of this user: else -1 and why in err. Returns the table, or NULL with
 * err set (errsize bytes).
 */
struct tbl *tbl_open(const char *path, const struct tbl_ident *id,
    uint64_t capacity, tbl_seed_fn *seed, void *ctx, char *err,
    size_t errsize);

/* Unmaps it. NULL does nothing. */
void tbl_close(struct tbl *t);

/* Whether another process built a new table in its place. */
bool tbl_retired(const struct tbl *t);

/* Whether the table is the one of the database id describes. */
bool tbl_belongs(const struct tbl *t, const struct tbl_ident *id);

/*
 * Takes the lock; a holder that died is undone first (its journal
 * played back). 0, or -1 (the lock is unusable: the table must be
 * rebuilt). Every call below but tbl_open, tbl_close, tbl_retired,
 * tbl_belongs and the flush clock needs it held.
 */
int tbl_lock(struct tbl *t);

/* Ends the journal of what was written (the step stands) and unlocks. */
void tbl_unlock(struct tbl *t);

/* Plays back the journal (the step is undone) and unlocks. */
void tbl_abort(struct tbl *t);

/*
 * The entry of (policy, client), or NULL. The pointer stays valid while
 * the lock is held.
 */
struct tbl_entry *tbl_find(struct tbl *t, const char *policy,
    const char *client);

/*
 * The same in steps, for a caller that hashes before it takes the lock:
 * the slot of a policy name (-1: the table has none; lock held), the
 * hash of (slot, client) (no lock: the key is fixed when the table is
 * built), a prefetch of where that hash leads (no lock: a hint, read
 * racily), and the lookup by slot and hash (lock held).
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
 * Removes e from the index and frees it (journaled). The caller ends the
 * journal after each removal or a few (tbl_unlock, or tbl_commit).
 */
void tbl_remove(struct tbl *t, struct tbl_entry *e);

/* Ends the journal without unlocking: what was written stands. */
void tbl_commit(struct tbl *t);

/* The policy name of an entry. */
const char *tbl_policy(const struct tbl *t, const struct tbl_entry *e);

/* The policy name in slot (0 <= slot < TBL_POLICIES), or NULL. */
const char *tbl_policy_at(const struct tbl *t, int slot);

/*
 * Entry i of the table (0 <= i < tbl_extent), or NULL if unused: for
 * walks that flush or sweep, in batches under the lock.
 */
struct tbl_entry *tbl_at(struct tbl *t, uint64_t i);
uint64_t tbl_extent(const struct tbl *t);

/* Entries in use, and the capacity. */
uint64_t tbl_count(const struct tbl *t);
uint64_t tbl_capacity(const struct tbl *t);

/*
 * The flush clock (no lock): true when now_ms is at or past the next
 * flush and this caller won it (the next is set to now_ms + interval_ms);
 * false when it is not due or another caller won.
 */
bool tbl_flush_due(struct tbl *t, int64_t now_ms, int64_t interval_ms);

/* When the last flush finished (0: never), and marking it (no lock). */
int64_t tbl_flushed_at(const struct tbl *t);
void tbl_set_flushed_at(struct tbl *t, int64_t now_ms);

/*
 * The flush lock, a second robust mutex: held by whoever copies entries
 * to the database and marks them flushed, and by a reset, so that a
 * flush never writes back a state a reset removed. 0, or -1.
 */
int tbl_flush_lock(struct tbl *t);
void tbl_flush_unlock(struct tbl *t);

/*
 * Binds the table to the database id describes, which replaced its own
 * (deleted, or another file moved over it): every entry is marked
 * unflushed, so that the next flush writes them all into it; logged,
 * naming path. The caller holds the flush lock; the table's lock is
 * taken here. The entries marked, or -1 (the lock is unusable).
 */
int tbl_rebind(struct tbl *t, const struct tbl_ident *id, const char *path);

/*
 * Whether path still names the table's file: false when it was deleted,
 * replaced, or hidden (a file system mounted over its directory), and
 * processes that open path now get another table.
 */
bool tbl_named_by(const struct tbl *t, const char *path);

/*
 * Copies every sound entry of from (a table the path no longer names)
 * into t, over t's own of the same key, each unflushed so that t's next
 * flush writes it. The caller holds both locks. The entries copied.
 */
uint64_t tbl_carry(struct tbl *t, struct tbl *from);

/* Marks the table retired: every process opens the path again. */
void tbl_retire(struct tbl *t);

/* How many times a dead holder's step was undone, since it was built. */
uint64_t tbl_recoveries(const struct tbl *t);

/*
 * For tests that write the file as a hostile writer would: the address
 * in the mapping of a header field ("extent", "free_head", "count",
 * "hand", "capacity", "slots", "reserved", "undo_n", "undo_used",
 * "undo": the journal's bytes), or NULL.
 */
void *tbl_field(struct tbl *t, const char *name);

/* Bytes of the file for capacity entries, and per entry (docs, tests). */
uint64_t tbl_file_size(uint64_t capacity);
size_t tbl_entry_size(void);

#endif
