/*
 * store_table_sync.h: the local+global mode's side of the decision table
 * (store_table_sync.c): what a host owes the shared store, and the sync
 * that pushes it and takes the global state back.
 */
#ifndef RLG_STORE_TABLE_SYNC_H
#define RLG_STORE_TABLE_SYNC_H

#include <stdint.h>

#include "store.h"
#include "table.h"

/* Entries a sync takes under the lock at once, and sends in one call. */
#define TAB_SYNC_BATCH ((size_t)512)
/* The default [store] sync_ms. */
#define TAB_SYNC_MS_DEFAULT 100
/* A sync looks at every entry in use (and frees the expired) once in
 * this many ms; the others look only at the entries that owe. */
#define TAB_SWEEP_MS 1000

/* One entry taken by a sync: what it owed, and where it was. */
struct tab_taken {
	struct tbl_sync owed;
	size_t first, n;              /* its items in the call */
	char policy[TBL_POLICY_MAX + 1];
	char client[TBL_CLIENT_MAX + 1];
};

/* A sync's buffers (one per syncer; large: kept, not on the stack). */
struct tab_sb {
	struct tab_taken taken[TAB_SYNC_BATCH];
	struct rlg_policy policy[TAB_SYNC_BATCH];
	struct rlg_sync_item items[TAB_SYNC_BATCH * 2];
	struct rlg_state global[TAB_SYNC_BATCH * 2];
	int64_t failures;             /* syncs failed in a row (logged once) */
	int64_t swept_ms;             /* the last sync that looked at all */
};

/*
 * Adds units admitted in the window that starts at window_start_ms to
 * what y owes (the two newest windows are kept: an older one is over for
 * every algorithm that merges).
 */
void tab_owe(struct tbl_sync *y, int64_t units, int64_t window_start_ms);

/*
 * e's state becomes global merged with what e owes (admitted here since
 * the global state was read), with e's limits; e synced at now_ms.
 */
void tab_settle(struct tbl *t, struct tbl_entry *e,
    const struct rlg_state *global, int64_t now_ms);

/*
 * One sync of t with db (a store with a sync op, store.h): under t's
 * flush lock, in batches, the entries that owe units or asked for the
 * global state are taken (what they owe zeroed), sent in one
 * rlg_store_sync, and given the global state merged with what they
 * admitted meanwhile; what the store did not merge is owed again. Frees
 * the entries that expired and owe nothing. 0, or -1 (logged once while
 * the store stays unreachable; nothing is lost).
 */
int tab_sync_behind(struct tbl *t, struct rlg_store *db, const char *path,
    int64_t now_ms, struct tab_sb *sb);

#endif
