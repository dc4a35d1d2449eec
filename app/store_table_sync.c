/*
 * store_table_sync.c: the local+global mode ([store] backend = redis or
 * redis_cluster, commit = behind). Each host decides from its own table
 * (store_table.c) at memory speed; every sync_ms one process of the host
 * (the flusher thread that wins the table's clock, store_table_flush.c)
 * runs tab_sync_behind: it pushes to the shared store the units the host
 * admitted since its last push and takes back the global state, the sum
 * of every host's pushes, which then bounds the host's next decisions.
 *
 * An entry owes (struct tbl_sync, table_types.h) the units admitted here
 * and not yet pushed, by window, and asks for the global state when a
 * request was refused since the last sync. A sync takes what the entries
 * owe under the table's lock (zeroing it), found by the table's bitmap of
 * the entries that owe (so a sync costs what is owed; once in
 * TAB_SWEEP_MS it looks at every entry in use and frees the expired),
 * sends it without the lock, in one rlg_store_sync per batch (the store
 * merges each item with rlg_limiter_merge's rules), and under the lock
 * again sets each entry to
 * the global state merged with what the entry admitted meanwhile. What the
 * store did not merge (an error, Redis down) is owed again: a host that
 * cannot reach the store keeps deciding from its table and pushes later.
 * The whole sync holds the table's flush lock, so that a reset (which
 * takes it too) never interleaves with a push of units admitted before it.
 *
 * Over-admission: a unit another host admits is in Redis at most 1.25
 * intervals later (that host's next push: a flusher looks at the clock
 * four times an interval), and a host decides from a global state at most
 * 2 x sync_ms old (store_table.c reads a client synced longer ago before
 * deciding it), so per client and window the hosts together admit at most
 * the limit plus what the other hosts admit in 3.25 x sync_ms; a client
 * that one host serves alone is exact (its table holds every unit).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "limiter.h"
#include "metrics.h"
#include "store.h"
#include "store_table_sync.h"
#include "table.h"
#include "util.h"

static size_t tab_take(struct tbl *t, uint64_t *at, struct tab_sb *sb,
    int64_t now_ms, bool sweep);
static uint64_t tab_next(const struct tbl *t, uint64_t i, bool sweep);
static size_t tab_items(struct tab_sb *sb, size_t k);
static void tab_apply(struct tbl *t, struct tab_sb *sb, size_t n,
    int64_t now_ms);


void
tab_owe(struct tbl_sync *y, int64_t units, int64_t window_start_ms)
{
	int k;

	if (units <= 0)
		return;
	for (k = 0; k < 2; k++) {
		if (y->units[k] > 0 && y->window_start_ms[k] == window_start_ms) {
			y->units[k] += units;
			if (y->units[k] > RLG_MERGE_COUNT_MAX)
				y->units[k] = RLG_MERGE_COUNT_MAX;
			return;
		}
	}
	if (y->units[0] == 0 || window_start_ms > y->window_start_ms[0]) {
		/* the newest: the older of the two is dropped (over) */
		if (y->units[0] > 0) {
			y->units[1] = y->units[0];
			y->window_start_ms[1] = y->window_start_ms[0];
		}
		y->units[0] = units < RLG_MERGE_COUNT_MAX ? units :
		    RLG_MERGE_COUNT_MAX;
		y->window_start_ms[0] = window_start_ms;
	} else if (y->units[1] == 0 ||
	    window_start_ms > y->window_start_ms[1]) {
		y->units[1] = units < RLG_MERGE_COUNT_MAX ? units :
		    RLG_MERGE_COUNT_MAX;
		y->window_start_ms[1] = window_start_ms;
	}
}

int
tab_sync_behind(struct tbl *t, struct rlg_store *db, const char *path,
    int64_t now_ms, struct tab_sb *sb)
{
	uint64_t at = 0;
	size_t n, k, m;
	int rc = 0;
	/* every entry in use looked at, to free the expired, once in
	 * TAB_SWEEP_MS; else only those that owe */
	bool sweep = now_ms - sb->swept_ms >= TAB_SWEEP_MS ||
	    now_ms < sb->swept_ms;

	if (tbl_flush_lock(t) != 0)
		return -1;
	while (rc == 0 && at < tbl_extent(t)) {
		if (tbl_lock(t) != 0) {
			rc = -1;
			break;
		}
		n = tab_take(t, &at, sb, now_ms, sweep);
		tbl_unlock(t);
		if (n == 0)
			continue;
		for (m = 0, k = 0; k < n; k++) {
			sb->taken[k].first = m;
			sb->taken[k].n = tab_items(sb, k);
			m += sb->taken[k].n;
		}
		/* not merged, unless the store says it is */
		for (k = 0; k < m; k++)
			sb->global[k].expires_ms = RLG_SYNC_UNKNOWN;
		if (rlg_store_sync(db, sb->items, m, now_ms, sb->global) !=
		    RLG_OK)
			rc = -2;
		if (tbl_lock(t) != 0) {
			rc = -1;
			break;
		}
		tab_apply(t, sb, n, now_ms);
		tbl_unlock(t);
	}
	tbl_flush_unlock(t);
	if (rc == -2 && sb->failures++ == 0)
		rlg_log("table %s: sync failed (the table keeps deciding and"
		    " keeps what it owes, retried every interval): %s", path,
		    db->errmsg);
	if (rc == 0 && sb->failures > 0) {
		rlg_log("table %s: sync works again after %lld failed", path,
		    (long long)sb->failures);
		sb->failures = 0;
	}
	if (rc == 0)
		tbl_set_flushed_at(t, now_ms);
	if (rc == 0 && sweep)
		sb->swept_ms = now_ms;
	rlg_metrics_flush(rc == 0);
	return rc == 0 ? 0 : -1;
}

/*
 * Under the lock: the next batch of entries that owe something, from *at
 * on, taken into sb (what they owe zeroed), found by the bitmap of those
 * that owe; with sweep, by that of every entry in use, freeing those that
 * expired and owe nothing. Forgets what an entry owes under limits no
 * merge takes (a table written by hand). Returns the entries taken.
 */
static size_t
tab_take(struct tbl *t, uint64_t *at, struct tab_sb *sb, int64_t now_ms,
    bool sweep)
{
	static const struct tbl_sync zero_y;
	static const struct rlg_state zero_st;
	struct rlg_state probe;
	struct tbl_entry *e;
	struct tab_taken *x;
	size_t got = 0;

	for (*at = tab_next(t, *at, sweep); *at < tbl_extent(t) &&
	    got < TAB_SYNC_BATCH; *at = tab_next(t, *at + 1, sweep)) {
		/* Freed, the entry after it in its run moves into its slot:
		 * that one is looked at next. */
		while (sweep && (e = tbl_at(t, *at)) != NULL &&
		    !tbl_sync_owes(&e->sync) && e->st.expires_ms <= now_ms &&
		    tbl_remove(t, e))
			tbl_commit(t);
		e = tbl_at(t, *at);
		if (e == NULL || !tbl_sync_owes(&e->sync))
			continue;
		if (e->sync.units[0] < 0 || e->sync.units[1] < 0 ||
		    e->sync.units[0] > RLG_MERGE_COUNT_MAX ||
		    e->sync.units[1] > RLG_MERGE_COUNT_MAX ||
		    rlg_limiter_merge(&e->sync.lim, &zero_st, 0, 0, now_ms,
		    &probe) != RLG_OK) {
			tbl_write_sync(t, e, &zero_y);
			tbl_commit(t);
			continue;
		}
		x = &sb->taken[got];
		/* a key with a NUL: no store holds it */
		if (tbl_client(t, e, x->client) < 0)
			continue;
		got++;
		x->owed = e->sync;
		snprintf(x->policy, sizeof x->policy, "%s", tbl_policy(t, e));
		tbl_write_sync(t, e, &(struct tbl_sync){ .lim = e->sync.lim,
		    .synced_ms = e->sync.synced_ms });
		tbl_commit(t);
	}
	return got;
}

/* The next slot a sync looks at, from i on: one in use when it sweeps,
 * else one marked as owing. */
static uint64_t
tab_next(const struct tbl *t, uint64_t i, bool sweep)
{
	return sweep ? tbl_next(t, i) : tbl_next_owing(t, i);
}

/*
 * The items of taken entry k, from sb->items + its first on: what it owes
 * of the older window, then of the newer, or a read (units 0). Returns
 * how many.
 */
static size_t
tab_items(struct tab_sb *sb, size_t k)
{
	struct tab_taken *x = &sb->taken[k];
	struct rlg_sync_item *it = &sb->items[x->first];
	size_t n = 0;
	int w;

	memset(&sb->policy[k], 0, sizeof sb->policy[k]);
	sb->policy[k].name = x->policy;
	sb->policy[k].lim = x->owed.lim;
	for (w = 1; w >= 0; w--) {
		if (x->owed.units[w] <= 0)
			continue;
		it[n].units = x->owed.units[w];
		it[n++].window_start_ms = x->owed.window_start_ms[w];
	}
	if (n == 0)
		it[n++] = (struct rlg_sync_item){ .units = 0 };
	for (w = 0; w < (int)n; w++) {
		it[w].policy = &sb->policy[k];
		it[w].client = x->client;
	}
	return n;
}

/*
 * Under the lock: each taken entry still there gets the global state of
 * its last item, merged with what it admitted since it was taken; what
 * the store did not merge is owed again.
 */
static void
tab_apply(struct tbl *t, struct tab_sb *sb, size_t n, int64_t now_ms)
{
	const struct tab_taken *x;
	const struct rlg_state *last;
	struct tbl_entry *e;
	struct tbl_sync y;
	size_t k, i;

	for (k = 0; k < n; k++) {
		x = &sb->taken[k];
		/* Found by its key: an entry moves when one before it in
		 * its run is freed. Gone (reset, or freed): what it owed
		 * was merged, or is moot. */
		e = tbl_find(t, x->policy, x->client);
		if (e == NULL)
			continue;
		y = e->sync;
		for (i = x->first; i < x->first + x->n; i++) {
			if (sb->global[i].expires_ms != RLG_SYNC_UNKNOWN)
				continue;
			if (sb->items[i].units == 0)
				y.pull = 1;
			tab_owe(&y, sb->items[i].units,
			    sb->items[i].window_start_ms);
		}
		tbl_write_sync(t, e, &y);
		last = &sb->global[x->first + x->n - 1];
		if (last->expires_ms != RLG_SYNC_UNKNOWN)
			tab_settle(t, e, last, now_ms);
		tbl_commit(t);
	}
}

void
tab_settle(struct tbl *t, struct tbl_entry *e,
    const struct rlg_state *global, int64_t now_ms)
{
	struct rlg_state st = *global;
	struct tbl_sync y = e->sync;
	int w;

	for (w = 1; w >= 0; w--)
		if (y.units[w] > 0 && rlg_limiter_merge(&y.lim, &st,
		    y.units[w], y.window_start_ms[w], now_ms, &st) != RLG_OK)
			return;
	tbl_write(t, e, &st);
	y.synced_ms = now_ms;
	tbl_write_sync(t, e, &y);
}
