/*
 * table_build.h: a decision table and its database (table_build.c):
 * whether it is that database's, binding it to another, carrying the
 * entries of one table into another. Part of table.h, which users
 * include.
 */
#ifndef RLG_TABLE_BUILD_H
#define RLG_TABLE_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "table_types.h"

/* Whether the table is the one of the database id describes. */
bool tbl_belongs(const struct tbl *t, const struct tbl_ident *id);

/*
 * Binds the table to the database id describes, which replaced its own
 * (deleted, or another file moved over it): every entry is marked
 * unflushed, so that the next flush writes them all into it; logged,
 * naming path. The caller holds the flush lock; the table's lock is
 * taken here. The entries marked, or -1 (the lock is unusable).
 */
int tbl_rebind(struct tbl *t, const struct tbl_ident *id, const char *path);

/*
 * Copies every sound entry of from (a table the path no longer names)
 * into t, over t's own of the same key, each unflushed so that t's next
 * flush writes it. The caller holds both locks. The entries copied.
 */
uint64_t tbl_carry(struct tbl *t, struct tbl *from);

#endif
