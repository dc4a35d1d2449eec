/*
 * table.h: the decision table of one host, in shared memory.
 *
 * With [store] commit = behind, the authoritative limiter state of the
 * gateway's processes and threads lives here, in a file mapped by every
 * one of them (beside the database: PATH-table, mode 0600), and the
 * SQLite file is written behind (store_table.c). This module is the
 * memory only: the file, its lock and the entries. It speaks no SQL and
 * runs no algorithm.
 *
 * Layout: a header (identity, the lock, counters, the names of the
 * policies, an undo journal), a bitmap of the entry slots in use, the
 * entry slots, a third more than the capacity (each entry in the slot
 * its keyed SipHash of policy and client leads to, or the next unused
 * one: open addressing over the entries themselves, so a decision reads
 * one place of the file, not an index and then an entry), of 264 bytes
 * (the state and the client key inline up to TBL_KEY_INLINE bytes,
 * which every key rlgate makes fits, then the local+global mode's sync
 * block), and the spill slots of longer
 * keys, min(capacity, TBL_SPILL_MAX) of them, each freed with its
 * entry. At most capacity entries are in use; when that many are, an
 * expired entry is as good as none and is removed for the new one.
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

#include "table_build.h"
#include "table_entry.h"
#include "table_mem.h"
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

/*
 * Whether path still names the table's file: false when it was deleted,
 * replaced, or hidden (a file system mounted over its directory), and
 * processes that open path now get another table.
 */
bool tbl_named_by(const struct tbl *t, const char *path);

#endif
