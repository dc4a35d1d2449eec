/*
 * store_sqlite.h: the SQLite store (store_sqlite.c and the files of
 * store_sqlite_parts.h), as the rest of rlgate sees it: its operations,
 * its entry in the registry of backends (store_backends.h), and its states
 * in bulk (store_sqlite_rows.c), which its operations also give the
 * decision table (struct rlg_store_ops: scan, begin, put, commit,
 * rollback, cache, ident).
 */
#ifndef RLG_STORE_SQLITE_H
#define RLG_STORE_SQLITE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store.h"

extern const struct rlg_store_ops rlg_store_sqlite_ops;

/* [store] backend = sqlite: a file and its -wal, -shm and -table, with
 * [store] commit (each, behind). */
extern const struct rlg_backend rlg_sqlite_backend;

/*
 * The SQLite store's states in bulk (store_sqlite_rows.c). s must be a
 * SQLite handle (else RLG_ESTORE).
 */

/* Calls fn for every state live at now_ms, until it returns non-zero. */
int rlg_store_sqlite_scan(struct rlg_store *s, int64_t now_ms,
    int (*fn)(void *ctx, const struct rlg_store_row *row), void *ctx);

/*
 * A write transaction of many rows: begin (BEGIN IMMEDIATE, the schema
 * checked), put rows (UPSERT) as often as needed, commit or roll back. A
 * failed put or commit has rolled the transaction back.
 */
int rlg_store_sqlite_begin(struct rlg_store *s, int64_t now_ms);
int rlg_store_sqlite_put(struct rlg_store *s,
    const struct rlg_store_row *rows, size_t n);
int rlg_store_sqlite_commit(struct rlg_store *s);
void rlg_store_sqlite_rollback(struct rlg_store *s);

/* The connection's page cache, in KiB (PRAGMA cache_size = -kib). */
void rlg_store_sqlite_cache(struct rlg_store *s, int64_t kib);

/* Deletes client's states (policy NULL: all of them); *deleted. */
int rlg_store_sqlite_reset(struct rlg_store *s, const char *client,
    const char *policy, int64_t *deleted);

/*
 * The file the connection has open, and when this handle gave it its
 * schema (a new file; said once, then 0); born_ns, the file's birth time
 * (0 where the file system keeps none). The path is checked first: a
 * file deleted or replaced is reopened (made anew if need be), so what
 * is told is the file the path names now.
 */
int rlg_store_sqlite_ident(struct rlg_store *s, dev_t *dev, ino_t *ino,
    int64_t *born_ns, int64_t *created_ms);

#endif
