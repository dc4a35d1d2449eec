/*
 * store_table_flush.h: the decision table's write-behind
 * (store_table_flush.c), for the table's handles (store_table.c): the
 * table file mapped and seeded from its database, the process's flusher,
 * and a flush now.
 */
#ifndef RLG_STORE_TABLE_FLUSH_H
#define RLG_STORE_TABLE_FLUSH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "table.h"

/*
 * Rows per flush transaction at most (the marks kept until its commit);
 * slots looked at per hold of the table's lock; rows per put.
 */
#define TAB_FLUSH_ROWS ((size_t)65536)
#define TAB_FLUSH_BATCH ((size_t)1024)
#define TAB_PUT_ROWS (TAB_FLUSH_BATCH * 4)
/*
 * The flusher's SQLite page cache: about 256 bytes per entry (a state row
 * and its index entry), from SQLite's default 2 MB up to 32 MB.
 */
#define TAB_CACHE_KIB_MIN 2048
#define TAB_CACHE_KIB_MAX 32768
/*
 * How much nicer than the threads that answer the flusher runs: a flush
 * of many rows then waits for the answers instead of delaying them (the
 * tail latency of the answers), and takes what the cores leave.
 */
#define TAB_FLUSHER_NICE 5

/* The default interval, and the bounds the config holds it to. */
#define TAB_FLUSH_MS_DEFAULT 1000

/* The flusher of one process for one table file. */
struct tab_flusher {
	char *path;                   /* the table file */
	char *db_path;
	struct rlg_store_config cfg;  /* a copy: its own connection */
	const struct rlg_store_ops *ops;  /* its backend's (the handles') */
	struct rlg_store *db;         /* the flusher's SQLite handle */
	struct tbl *t;                /* its own mapping, NULL until open */
	uint64_t capacity;
	int64_t interval_ms;
	struct tab_wb *wb;            /* its buffers */
	struct tab_sb *sb;            /* local+global: its sync buffers */
	int refs;
	bool stop;
	bool running;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct tab_flusher *next;
};

/*
 * What a flush keeps of each row it wrote, to mark the entry flushed once
 * the transaction is committed: the entry's slot, its change and its key
 * hash (a slot whose entry was removed or moved meanwhile holds another
 * key, or none: that entry stays unflushed, for the next flush).
 */
struct tab_mark {
	uint64_t at;                  /* entry slot */
	uint64_t hash;
	uint32_t seq;
};

/* One row copied for a flush. */
struct tab_row {
	struct rlg_store_row row;
	struct tab_mark mark;
	char policy[TBL_POLICY_MAX + 1];
	char client[TBL_CLIENT_MAX + 1];
};

/* A flush's buffers, allocated once per flusher (about 3.5 MB). */
struct tab_wb {
	struct tab_row rows[TAB_PUT_ROWS];
	struct rlg_store_row put[TAB_PUT_ROWS];
	struct tab_mark marks[TAB_FLUSH_ROWS];
};

/* Maps the table of db's file, built from db's states if need be. */
struct tbl *tab_open_table(struct rlg_store *db, const char *path,
    uint64_t capacity, char *err, size_t errsize);
/* The process's flusher of the table at path (ops: its database's). */
struct tab_flusher *tab_flusher_join(const struct rlg_store_config *cfg,
    const struct rlg_store_ops *ops, const char *path, uint64_t capacity);
void tab_flusher_leave(struct tab_flusher *f);
/* The path no longer names *tp: its entries carried into the one it
 * names. */
void tab_move(struct tbl **tp, struct rlg_store *db, const char *path,
    uint64_t capacity);
/* Writes t's changed entries to db (pace: the flusher, or NULL). */
int tab_write_behind(struct tbl *t, struct rlg_store *db,
    const char *path, int64_t now_ms, struct tab_wb *wb,
    struct tab_flusher *pace);

#endif
