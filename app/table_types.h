/*
 * table_types.h: the types of the decision table that its users and its
 * own files share (table.h declares the calls; table_mem_priv.h holds the
 * inside): the limits of an entry, the entry, the identity of a database,
 * the seeding callback. The handle, struct tbl, is opaque.
 */
#ifndef RLG_TABLE_TYPES_H
#define RLG_TABLE_TYPES_H

#include <stdint.h>
#include <sys/types.h>

#include "limiter.h"

/* The longest client key and policy name an entry holds, without NUL. */
#define TBL_CLIENT_MAX 255
/*
 * The longest client key held in the entry itself: every key rlgate
 * makes fits (an IPv4 or IPv6 address or prefix, at most 49 bytes as
 * net.h sizes them; "k:" and a key hash, 34; or the two joined by '|',
 * 84), which check_table.c holds. A longer key (a database's row, up to
 * TBL_CLIENT_MAX) is kept in a spill slot apart (table_mem_priv.h).
 */
#define TBL_KEY_INLINE 84
/* Spill slots a table has: as many as its entries, up to this many. */
#define TBL_SPILL_MAX 4096
#define TBL_POLICY_MAX 64
/* Policy names the table knows at once (a config has at most 64). */
#define TBL_POLICIES 128

/*
 * What a host owes the shared store and asks of it, in the local+global
 * mode (store_table_sync.c; zero otherwise): the units admitted here
 * since the last push, by the window they were admitted in (two: the
 * current window's and the one before, which a sliding window still
 * weighs; [0] the newer), the limits the client was last decided with
 * (which the merge needs: a token bucket's units are worth its emission
 * interval), when it last got the global state, and whether a request
 * was refused since the last sync (the next one then reads the global
 * state: a reset, or another host's window, reaches a client that this
 * host only refuses). 96 bytes.
 */
struct tbl_sync {
	int64_t units[2];
	int64_t window_start_ms[2];
	struct rlg_limit lim;
	int64_t synced_ms;            /* when it last got the global state */
	uint8_t pull;
};

/*
 * One (policy, client) and its state: 264 bytes. What a decision reads
 * and writes comes first (the first 84 bytes: the hash, the state, the
 * marks; then the key), the sync block last (its own cache lines, read
 * only in the local+global mode). The key is not NUL-terminated:
 * client_len says how long. One longer than TBL_KEY_INLINE is in a spill
 * slot, whose number + 1 the first 4 bytes of client hold (tbl_client
 * reads either).
 */
struct tbl_entry {
	uint64_t hash;                /* of (policy slot, client) */
	struct rlg_state st;
	uint32_t seq;                 /* changes so far */
	uint32_t flushed;             /* the seq the database holds */
	uint16_t client_len;
	uint8_t policy;               /* slot in the header's names */
	uint8_t used;                 /* 1: its slot is in use */
	char client[TBL_KEY_INLINE];
	struct tbl_sync sync;         /* local+global mode only */
};

struct tbl;

/*
 * What the table's database is: the table is bound to another when this
 * changes (tbl_rebind). A database file made anew may have the inode of
 * the one it replaced: its birth time (statx; where the file system
 * keeps one) tells them apart, and created_ms, when the connection that
 * asks gave the file its schema (0: it did not), tells a table built
 * before then from one built from it.
 */
struct tbl_ident {
	dev_t dev;
	ino_t ino;
	int64_t created_ms;
	int64_t born_ns;              /* its birth time; 0: not known */
};

/*
 * Fills the entries of a table being built, from the database: calls
 * put(table, policy, client, state) for each live state. Returns 0, or -1
 * (the table is then not built).
 */
typedef int tbl_seed_fn(void *ctx, struct tbl *t);

#endif
