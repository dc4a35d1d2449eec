/*
 * store.c: the store calls, dispatched through the handle's operations
 * table. rlg_store_open opens the SQLite backend behind the rejection
 * cache (store_cache.c); the dispatch lets a Redis backend or group commit
 * slot in the same way without the callers changing.
 */
#include <stddef.h>

#include "store.h"
#include "util.h"

int
rlg_store_open(const struct rlg_store_config *cfg, struct rlg_store **out)
{
	/* The SQLite store, behind a rejection cache unless it is off. */
	return rlg_store_cache_ops.open(cfg, out);
}

int
rlg_store_step(struct rlg_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	if (s == NULL)
		return RLG_ESTORE;
	return s->ops->step(s, items, n, now_ms, decisions);
}

int
rlg_store_prune(struct rlg_store *s, int64_t now_ms, int64_t *deleted)
{
	if (deleted != NULL)
		*deleted = 0;
	if (s == NULL)
		return RLG_ESTORE;
	return s->ops->prune(s, now_ms, deleted);
}

const char *
rlg_store_errmsg(const struct rlg_store *s)
{
	if (s == NULL)
		return "no store handle";
	return s->ops->errmsg(s);
}

void
rlg_store_close(struct rlg_store *s)
{
	if (s != NULL)
		s->ops->close(s);
}
