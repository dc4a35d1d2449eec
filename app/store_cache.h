/*
 * store_cache.h: the rejection cache (store_cache.c), the free rejected
 * path: a wrapper in front of a store that answers repeat rejections
 * from memory.
 */
#ifndef RLG_STORE_CACHE_H
#define RLG_STORE_CACHE_H

#include <stdint.h>

#include "store.h"

/* The rejection cache's operations; no open: rlg_store_cache_wrap makes
 * it. */
extern const struct rlg_store_ops rlg_store_cache_ops;

/*
 * Wraps inner in a rejection cache of about entries entries (rounded up to
 * a power of two): repeat rejections are answered from memory, exactly as
 * the store would answer them, until the earliest moment one could be
 * admitted (store_cache.c says why that is exact). Returns the new handle,
 * which owns inner, or inner itself when entries <= 0 or inner is NULL.
 */
struct rlg_store *rlg_store_cache_wrap(struct rlg_store *inner,
    int64_t entries);

#endif
