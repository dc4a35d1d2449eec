/*
 * table_mem.h: the decision table's mapping, its two locks and its
 * journal, its flush clock and the fields of its header (table_mem.c).
 * Part of table.h, which users include.
 */
#ifndef RLG_TABLE_MEM_H
#define RLG_TABLE_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table_types.h"

/* Unmaps it. NULL does nothing. */
void tbl_close(struct tbl *t);

/* Whether another process built a new table in its place. */
bool tbl_retired(const struct tbl *t);

/*
 * Takes the lock; a holder that died is undone first (its journal
 * played back). 0, or -1 (the lock is unusable: the table must be
 * rebuilt). Every call of the table but tbl_open, tbl_close,
 * tbl_retired, tbl_belongs and the flush clock needs it held.
 */
int tbl_lock(struct tbl *t);

/* Ends the journal of what was written (the step stands) and unlocks. */
void tbl_unlock(struct tbl *t);

/* Plays back the journal (the step is undone) and unlocks. */
void tbl_abort(struct tbl *t);

/* Ends the journal without unlocking: what was written stands. */
void tbl_commit(struct tbl *t);

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

/* Marks the table retired: every process opens the path again. */
void tbl_retire(struct tbl *t);

/* How many times a dead holder's step was undone, since it was built. */
uint64_t tbl_recoveries(const struct tbl *t);

/*
 * For tests that write the file as a hostile writer would: the address
 * in the mapping of a header field ("count", "hand", "capacity",
 * "slots", "spill_extent", "spill_free", "undo_n", "undo_used",
 * "undo": the journal's bytes), of the slots' bitmap ("bitmap") or of
 * the first entry slot ("entries"), or NULL.
 */
void *tbl_field(struct tbl *t, const char *name);

/*
 * Bytes of the file for capacity entries (a slot and a third an entry),
 * per entry slot, and of its spill slots, which end the file (docs,
 * tests).
 */
uint64_t tbl_file_size(uint64_t capacity);
size_t tbl_entry_size(void);
uint64_t tbl_spill_bytes(uint64_t capacity);

#endif
