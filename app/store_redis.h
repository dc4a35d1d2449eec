/*
 * store_redis.h: the Redis store (store_redis.c and the files of
 * store_redis_parts.h), as the rest of rlgate sees it: its operations
 * and its entry in the registry of backends (store_backends.h).
 */
#ifndef RLG_STORE_REDIS_H
#define RLG_STORE_REDIS_H

#include "store.h"

/*
 * The Redis store: one connection per handle, one EVALSHA per step; a lost
 * connection is reopened after a backoff (100 ms doubling to 5 s) during
 * which steps fail at once. Its prune deletes nothing: keys expire. On a
 * Redis Cluster (redis_cluster in the config): one connection per master,
 * one EVALSHA per slot, and a step whose clients lie in several slots is
 * atomic per slot only (store_redis_cluster.c says what that means).
 */
extern const struct rlg_store_ops rlg_store_redis_ops;

/* [store] backend = redis (and redis_cluster): a server, which
 * --check-config connects to; no files. */
extern const struct rlg_backend rlg_redis_backend;

#endif
