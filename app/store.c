/*
 * store.c: the store calls, dispatched through the handle's operations
 * table. rlg_store_open opens the backend that [store] backend names,
 * SQLite (store_sqlite.c) or Redis (store_redis.c), and wraps it in the
 * rejection cache (store_cache.c) unless rejection_cache = 0, or SQLite
 * in the decision table (store_table.c) with commit = behind: the callers
 * never know which one they talk to.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "store.h"
#include "store_stats.h"
#include "util.h"

static int check_items(struct rlg_store *s,
    const struct rlg_store_item *items, size_t n,
    const struct rlg_decision *decisions);

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
	/* commit = behind: the decisions in the host's shared table. */
	/*
	 * The table answers a repeat rejection at memory speed itself: no
	 * rejection cache in front of it, so a reset takes effect at once.
	 */
	if (cfg->backend == RLG_BACKEND_SQLITE &&
	    cfg->sqlite.commit == RLG_COMMIT_BEHIND) {
		if (rlg_store_table_wrap(inner, cfg, out) != RLG_OK)
			rc = RLG_ESTORE;
		return rc;
	}
	*out = rlg_store_cache_wrap(inner, cfg->rejection_cache);
	return rc;
}

int
rlg_store_step(struct rlg_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	int rc;

	if (s == NULL)
		return RLG_ESTORE;
	s->cached = false;
	if ((rc = check_items(s, items, n, decisions)) != RLG_OK)
		return rc;
	return s->ops->step(s, items, n, now_ms, decisions);
}

/*
 * Refuses, once for every backend, a request no store could take: no
 * item, an item without policy or client, a client key too long, a charge
 * for a new key with no key item before it, a cost out of range (the
 * limiter refuses it too, but the Redis store must not send it).
 */
static int
check_items(struct rlg_store *s, const struct rlg_store_item *items,
    size_t n, const struct rlg_decision *decisions)
{
	size_t i;

	if (items == NULL || decisions == NULL || n == 0) {
		rlg_store_seterr(s, "store step: no policy to apply");
		return RLG_EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (items[i].policy == NULL || items[i].policy->name == NULL ||
		    items[i].client == NULL) {
			rlg_store_seterr(s, "store step: item %zu has no policy"
			    " or no client key", i);
			return RLG_EINVAL;
		}
		if (strnlen(items[i].client, RLG_CLIENT_KEY_MAX + 1) >
		    RLG_CLIENT_KEY_MAX) {
			rlg_store_seterr(s, "store step: client key longer than"
			    " %d bytes", RLG_CLIENT_KEY_MAX);
			return RLG_EINVAL;
		}
		if (items[i].cost < 0 || items[i].cost > RLG_COST_MAX) {
			rlg_store_seterr(s, "store step: item %zu costs %lld"
			    " units, out of 0..%lld", i,
			    (long long)items[i].cost, (long long)RLG_COST_MAX);
			return RLG_EINVAL;
		}
		if (items[i].if_new && (i == 0 || items[i - 1].if_new)) {
			rlg_store_seterr(s, "store step: item %zu is a charge"
			    " for a new key (if_new) with no key before it", i);
			return RLG_EINVAL;
		}
	}
	return RLG_OK;
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
rlg_store_describe(const struct rlg_store_config *sc, char *buf, size_t size)
{
	if (sc->backend == RLG_BACKEND_REDIS)
		return rlg_redis_describe(&sc->redis, buf, size);
	snprintf(buf, size, "sqlite %s", sc->sqlite.path != NULL ?
	    sc->sqlite.path : "(no path)");
	return buf;
}

bool
rlg_store_cached(const struct rlg_store *s)
{
	return s != NULL && s->cached;
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
	return s->errmsg;
}

void
rlg_store_stats(const struct rlg_store *s, struct rlg_store_stats *out)
{
	memset(out, 0, sizeof *out);
	if (s != NULL && s->ops->stats != NULL)
		s->ops->stats(s, out);
}

int
rlg_store_flush(struct rlg_store *s, int64_t now_ms)
{
	if (s == NULL)
		return RLG_ESTORE;
	return s->ops->flush != NULL ? s->ops->flush(s, now_ms) : RLG_OK;
}

int
rlg_store_reset(struct rlg_store *s, const char *client, const char *policy,
    int64_t *deleted)
{
	*deleted = 0;
	if (s == NULL)
		return RLG_ESTORE;
	if (s->ops->reset == NULL) {
		rlg_store_seterr(s, "reset: the %s store cannot reset a client;"
		    " delete its keys in the store itself", s->ops->name);
		return RLG_EINVAL;
	}
	return s->ops->reset(s, client, policy, deleted);
}

int
rlg_store_probe(struct rlg_store *s, int64_t now_ms)
{
	if (s == NULL)
		return RLG_ESTORE;
	if (s->ops->probe == NULL) {
		rlg_store_seterr(s, "the %s store cannot be probed",
		    s->ops->name);
		return RLG_EINVAL;
	}
	return s->ops->probe(s, now_ms);
}

int
rlg_store_survey(struct rlg_store *s, int64_t now_ms, bool top,
    struct rlg_store_survey *out)
{
	memset(out, 0, sizeof *out);
	if (s == NULL)
		return RLG_ESTORE;
	if (s->ops->survey == NULL) {
		rlg_store_seterr(s, "the %s store cannot list its clients",
		    s->ops->name);
		return RLG_EINVAL;
	}
	return s->ops->survey(s, now_ms, top, out);
}

int
rlg_store_overrides(struct rlg_store *s, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx)
{
	if (s == NULL || version == NULL || fn == NULL)
		return RLG_ESTORE;
	if (s->ops->overrides == NULL) {
		rlg_store_seterr(s, "the %s store keeps no overrides",
		    s->ops->name);
		return RLG_EINVAL;
	}
	return s->ops->overrides(s, version, fn, ctx);
}

void
rlg_store_close(struct rlg_store *s)
{
	if (s != NULL)
		s->ops->close(s);
}
