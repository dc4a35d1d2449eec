/*
 * store.c: the store calls, dispatched through the handle's operations
 * table, whichever backend or wrapper the handle is (store_open.c opens
 * them); and the forwarding the wrappers share (store_wrap.h). It knows
 * no backend: they all sit above it.
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
static int lacking(struct rlg_store *s, const char *what);
static int check_sync(struct rlg_store *s, const struct rlg_sync_item *items,
    size_t n, int64_t now_ms, const struct rlg_state *global);

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
	/* skipped is only ever set, by the backend that skips a charge */
	memset(decisions, 0, n * sizeof *decisions);
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
	if (s->ops->probe == NULL)
		return lacking(s, "cannot be probed");
	return s->ops->probe(s, now_ms);
}

int
rlg_store_survey(struct rlg_store *s, int64_t now_ms, bool top,
    struct rlg_store_survey *out)
{
	memset(out, 0, sizeof *out);
	if (s == NULL)
		return RLG_ESTORE;
	if (s->ops->survey == NULL)
		return lacking(s, "cannot list its clients");
	return s->ops->survey(s, now_ms, top, out);
}

int
rlg_store_overrides(struct rlg_store *s, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx)
{
	if (s == NULL || version == NULL || fn == NULL)
		return RLG_ESTORE;
	if (s->ops->overrides == NULL)
		return lacking(s, "keeps no overrides");
	return s->ops->overrides(s, version, fn, ctx);
}

int
rlg_store_sync(struct rlg_store *s, const struct rlg_sync_item *items,
    size_t n, int64_t now_ms, struct rlg_state *global)
{
	int rc;

	if (s == NULL)
		return RLG_ESTORE;
	if (s->ops->sync == NULL)
		return lacking(s, "cannot sync");
	if ((rc = check_sync(s, items, n, now_ms, global)) != RLG_OK)
		return rc;
	return s->ops->sync(s, items, n, now_ms, global);
}

/*
 * Refuses, once for every backend, a sync no store could take: no item,
 * an item without policy or client, a client key too long, units out of
 * range, a policy the limiter would not merge (tried on a fresh state).
 */
static int
check_sync(struct rlg_store *s, const struct rlg_sync_item *items,
    size_t n, int64_t now_ms, const struct rlg_state *global)
{
	struct rlg_state zero, out;
	const struct rlg_policy *p;
	size_t i;

	if (items == NULL || global == NULL || n == 0) {
		rlg_store_seterr(s, "store sync: nothing to sync");
		return RLG_EINVAL;
	}
	memset(&zero, 0, sizeof zero);
	for (i = 0; i < n; i++) {
		p = items[i].policy;
		if (p == NULL || p->name == NULL || items[i].client == NULL ||
		    strnlen(items[i].client, RLG_CLIENT_KEY_MAX + 1) >
		    RLG_CLIENT_KEY_MAX) {
			rlg_store_seterr(s, "store sync: item %zu has no policy,"
			    " no client key, or one longer than %d bytes", i,
			    RLG_CLIENT_KEY_MAX);
			return RLG_EINVAL;
		}
		if (items[i].units < 0 || items[i].units > RLG_MERGE_COUNT_MAX) {
			rlg_store_seterr(s, "store sync: item %zu: %lld units,"
			    " out of 0..%lld", i, (long long)items[i].units,
			    (long long)RLG_MERGE_COUNT_MAX);
			return RLG_EINVAL;
		}
		if (rlg_limiter_merge(&p->lim, &zero, 1, 0, now_ms, &out) !=
		    RLG_OK) {
			rlg_store_seterr(s, "store sync: policy \"%s\" (%s)"
			    " cannot be merged: %s", p->name,
			    rlg_algorithm_name(p->lim.algorithm) != NULL ?
			    rlg_algorithm_name(p->lim.algorithm) : "unknown",
			    rlg_limiter_keeps_log(&p->lim) ? "it keeps a log"
			    " (exact only)" : "the limiter refuses it");
			return RLG_EINVAL;
		}
	}
	return RLG_OK;
}

void
rlg_store_close(struct rlg_store *s)
{
	if (s != NULL)
		s->ops->close(s);
}

/*
 * An optional operation the backend has not: RLG_EINVAL, the error
 * message "the <backend> store <what>".
 */
static int
lacking(struct rlg_store *s, const char *what)
{
	rlg_store_seterr(s, "the %s store %s", s->ops->name, what);
	return RLG_EINVAL;
}

/* ---- the wrappers' forwarding (struct rlg_store_wrap) ----------------- */

/* rc, inner's error message copied into the wrapper's as w says. */
static int
passed(struct rlg_store_wrap *w, int rc)
{
	if (w->mirror || rc != RLG_OK)
		snprintf(w->base.errmsg, sizeof w->base.errmsg, "%s",
		    rlg_store_errmsg(w->inner));
	return rc;
}

int
rlg_store_pass_prune(struct rlg_store *s, int64_t now_ms, int64_t *deleted)
{
	struct rlg_store_wrap *w = (struct rlg_store_wrap *)s;
	int rc = rlg_store_prune(w->inner, now_ms, deleted);

	if (rc != RLG_OK)
		snprintf(w->base.errmsg, sizeof w->base.errmsg, "%s",
		    rlg_store_errmsg(w->inner));
	return rc;
}

void
rlg_store_pass_idle(struct rlg_store *s, int64_t now_ms)
{
	rlg_store_idle(((struct rlg_store_wrap *)s)->inner, now_ms);
}

/* Inner's counters (the wrapper adds its own). */
void
rlg_store_pass_stats(const struct rlg_store *s, struct rlg_store_stats *out)
{
	rlg_store_stats(((const struct rlg_store_wrap *)s)->inner, out);
}

int
rlg_store_pass_flush(struct rlg_store *s, int64_t now_ms)
{
	struct rlg_store_wrap *w = (struct rlg_store_wrap *)s;

	return passed(w, rlg_store_flush(w->inner, now_ms));
}

int
rlg_store_pass_reset(struct rlg_store *s, const char *client,
    const char *policy, int64_t *deleted)
{
	struct rlg_store_wrap *w = (struct rlg_store_wrap *)s;

	return passed(w, rlg_store_reset(w->inner, client, policy, deleted));
}

int
rlg_store_pass_probe(struct rlg_store *s, int64_t now_ms)
{
	struct rlg_store_wrap *w = (struct rlg_store_wrap *)s;

	return passed(w, rlg_store_probe(w->inner, now_ms));
}

int
rlg_store_pass_survey(struct rlg_store *s, int64_t now_ms, bool top,
    struct rlg_store_survey *out)
{
	struct rlg_store_wrap *w = (struct rlg_store_wrap *)s;

	return passed(w, rlg_store_survey(w->inner, now_ms, top, out));
}

int
rlg_store_pass_overrides(struct rlg_store *s, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx)
{
	struct rlg_store_wrap *w = (struct rlg_store_wrap *)s;

	return passed(w, rlg_store_overrides(w->inner, version, fn, ctx));
}

bool
rlg_store_commit_behind(const struct rlg_store_config *sc)
{
	return sc->sqlite.commit == RLG_COMMIT_BEHIND;
}
