/*
 * store.c: the store calls, dispatched through the handle's operations
 * table. rlg_store_open opens the backend that [store] backend names,
 * SQLite (store_sqlite.c) or Redis (store_redis.c), and wraps it in the
 * rejection cache (store_cache.c) unless rejection_cache = 0: the callers
 * never know which one they talk to.
 */
#include <stddef.h>

#include "store.h"
#include "util.h"

int
rlg_store_open(const struct rlg_store_config *cfg, struct rlg_store **out)
{
	const struct rlg_store_ops *backend;
	struct rlg_store *inner = NULL;
	int rc;

	backend = cfg->backend == RLG_BACKEND_REDIS ? &rlg_store_redis_ops :
	    &rlg_store_sqlite_ops;
	/* A handle even on failure (it heals): the cache goes on it too. */
	rc = backend->open(cfg, &inner);
	*out = rlg_store_cache_wrap(inner, cfg->rejection_cache);
	return rc;
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

void
rlg_store_idle(struct rlg_store *s, int64_t now_ms)
{
	if (s != NULL && s->ops->idle != NULL)
		s->ops->idle(s, now_ms);
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
