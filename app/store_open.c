/*
 * store_open.c: the opening of a store, and what the rest of rlgate asks
 * of a backend. The backends register by name in the table of
 * store_backends.h, each row pointing at its struct rlg_backend (store.h):
 * rlg_store_open opens the one that [store] backend names and wraps it,
 * in the decision table (store_table.c) when it writes behind (SQLite
 * with commit = behind), else in the rejection cache (store_cache.c)
 * unless rejection_cache = 0: the callers never know which one they talk
 * to. What the rest of rlgate asks of a backend it has not opened (where
 * it is, its files, what it can) is answered here from its entry, so
 * that nothing outside a backend's own files asks which one it is.
 */
#include <stddef.h>
#include <stdio.h>

#include "store.h"
#include "store_backends.h"
#include "store_cache.h"
#include "store_table.h"
#include "util.h"

/* The backend that sc names: its row's entry (the first row's, SQLite's,
 * for an index no row has). */
static const struct rlg_backend *
backend_of(const struct rlg_store_config *sc)
{
	return rlg_backend_row(sc->backend)->entry;
}

int
rlg_store_open(const struct rlg_store_config *cfg, struct rlg_store **out)
{
	const struct rlg_backend *backend = backend_of(cfg);
	struct rlg_store *inner = NULL;
	int rc;

	/* A handle even on failure (it heals): the cache goes on it too. */
	rc = backend->ops->open(cfg, &inner);
	/* commit = behind: the decisions in the host's shared table. */
	/*
	 * The table answers a repeat rejection at memory speed itself: no
	 * rejection cache in front of it, so a reset takes effect at once.
	 */
	if (backend->behind != NULL && backend->behind(cfg)) {
		if (rlg_store_table_wrap(inner, cfg, out) != RLG_OK)
			rc = RLG_ESTORE;
		return rc;
	}
	*out = rlg_store_cache_wrap(inner, cfg->rejection_cache);
	return rc;
}

const char *
rlg_store_describe(const struct rlg_store_config *sc, char *buf, size_t size)
{
	return backend_of(sc)->describe(sc, buf, size);
}

int
rlg_store_check_files(const struct rlg_store_config *cfg,
    void (*warn)(void *ctx, const char *line), void *ctx)
{
	const struct rlg_backend *backend;

	if (cfg == NULL)
		return 0;
	backend = backend_of(cfg);
	return backend->check_files != NULL ?
	    backend->check_files(cfg, warn, ctx) : 0;
}

bool
rlg_store_can(const struct rlg_store_config *sc, unsigned caps)
{
	return (backend_of(sc)->caps & caps) == caps;
}

bool
rlg_store_behind(const struct rlg_store_config *sc)
{
	const struct rlg_backend *backend = backend_of(sc);

	return backend->behind != NULL && backend->behind(sc);
}
