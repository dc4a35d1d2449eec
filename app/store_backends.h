/*
 * store_backends.h: the one table of the store backends, a row for each
 * word of [store] backend: what the word reads of [store] (its flags) and
 * the backend that opens it (its struct rlg_backend, store.h). The config
 * reads the rows for the words and the flags (config_options.c,
 * config_set.c, config_check.c, config.c) and keeps the row's index in
 * struct rlg_store_config's backend; store_open.c reads the entry. So a
 * new backend is its own file and one row below: nothing else names it.
 * It includes nothing of the config or the stores: both read it.
 */
#ifndef RLG_STORE_BACKENDS_H
#define RLG_STORE_BACKENDS_H

#include <stdbool.h>

struct rlg_backend;

/* What a word reads of [store] (rlg_store_finish checks the keys). */
/* The settings of a file: path, busy_timeout_ms, max_clients,
 * synchronous, commit, flush_ms (SQLite's; with Redis, commit = behind
 * reads path and max_clients too, for the host's table). */
#define RLG_BACKEND_FILES   0x1u
/* A server: url (required), connect_timeout_ms, timeout_ms, clock. */
#define RLG_BACKEND_URL     0x2u
/* The url lists the seed nodes of a Redis Cluster (redis.cluster). */
#define RLG_BACKEND_CLUSTER 0x4u

/*
 * The rows, in the order the messages list the words:
 * ROW(NAME, word, flags, entry) makes RLG_BACKEND_NAME, the row's index
 * (the value of the word in config_options.c's rlg_backend_words), and
 * names entry, the struct rlg_backend that opens it (defined in the
 * backend's own file). The first row is the default (an all-zero
 * struct rlg_store_config). Rows that share an entry are one backend:
 * the config keeps the index of its first row (redis_cluster is the
 * Redis store with redis.cluster set, its name in the logs "redis").
 */
#define RLG_STORE_BACKENDS(ROW) \
	ROW(SQLITE, "sqlite", RLG_BACKEND_FILES, rlg_sqlite_backend) \
	ROW(REDIS, "redis", RLG_BACKEND_URL, rlg_redis_backend) \
	ROW(REDIS_CLUSTER, "redis_cluster", \
	    RLG_BACKEND_URL | RLG_BACKEND_CLUSTER, rlg_redis_backend)

#define RLG_BACKEND_ENUM_(e, word, flags, entry) RLG_BACKEND_##e,
enum rlg_backend_row_index {
	RLG_STORE_BACKENDS(RLG_BACKEND_ENUM_)
	RLG_BACKEND_COUNT
};
#undef RLG_BACKEND_ENUM_

/* One row: a word of [store] backend. */
struct rlg_backend_row {
	const char *word;
	unsigned flags;                 /* RLG_BACKEND_* above */
	const struct rlg_backend *entry;
};

/* The rows, RLG_BACKEND_COUNT of them, by index. */
extern const struct rlg_backend_row rlg_backend_rows[];

/* The row of index backend (the first for an index no row has). */
const struct rlg_backend_row *rlg_backend_row(int backend);

/* Whether the row of index backend has every flag of flags. */
bool rlg_backend_has(int backend, unsigned flags);

/* The index of the first row with the entry of row i: the backend's. */
int rlg_backend_first(int i);

#endif /* RLG_STORE_BACKENDS_H */
