/*
 * store_table.h: the decision table (store_table.c, [store] commit =
 * behind), a wrapper that decides in the host's shared memory and writes
 * its store behind.
 */
#ifndef RLG_STORE_TABLE_H
#define RLG_STORE_TABLE_H

#include "store.h"

/*
 * The decision table: the store s (one with the bulk operations, struct
 * rlg_store_ops: SQLite's) wrapped so that decisions are made in a table
 * of the host's shared memory and written to the database behind, every
 * cfg->sqlite.flush_ms. *out gets the new handle, which owns s. RLG_OK,
 * or RLG_ESTORE when the table cannot be opened yet: the handle's steps
 * then fail and retry (its errmsg says why).
 */
int rlg_store_table_wrap(struct rlg_store *s,
    const struct rlg_store_config *cfg, struct rlg_store **out);
extern const struct rlg_store_ops rlg_store_table_ops;

#endif
