/*
 * metrics.h: what rlgate decided, counted for the whole host.
 *
 * The counters live in a scoreboard, as Apache's: a file mapped shared by
 * every rlgate process of the host (PATH-metrics beside [store] path, mode
 * 0600), made of slots. Each worker thread claims a slot of its own and
 * is its only writer, so counting is a plain add to memory no other
 * thread writes: no lock, no atomic read-modify-write, no cache line
 * bouncing between cores. The admin endpoints (admin.c) sum the slots.
 * A slot keeps its counts when its thread ends or its process dies: the
 * next thread to claim it adds to them, so the sums only grow (counters,
 * as Prometheus wants them) for as long as the file lives.
 *
 * The file names the policies it counts (by name, up to
 * RLG_METRICS_POLICIES); a process maps its config's policies onto them
 * when it opens the file, adding new names. A file that cannot hold them,
 * or of another layout, is replaced by a new one (the counts restart, and
 * rlgate_start_time_seconds with them).
 */
#ifndef RLG_METRICS_H
#define RLG_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "response.h"
#include "verdict.h"

/* What a policy decided for one request (rlgate_requests_total). */
enum rlg_metric_decision {
	RLG_MD_ADMITTED = 0,
	RLG_MD_REJECTED,
	RLG_MD_DRY_RUN_REJECTED,
	RLG_MD_EXEMPT,
	RLG_MD_N
};

/* The status codes counted one by one; others count as "other". */
#define RLG_METRICS_CODES 8
/* Policy names a file holds: every policy and its .new_keys bound. */
#define RLG_METRICS_POLICIES ((size_t)RLG_POLICIES_MAX * 2)
/* Slots, one per worker thread alive at once on the host. */
#define RLG_METRICS_SLOTS 1024
/* The histogram's buckets (upper bounds) and the +Inf one. */
#define RLG_METRICS_BUCKETS 20
/*
 * A worker thread times one store step in this many (its first, then
 * every RLG_METRICS_SAMPLE-th) for the histogram: two clock reads per
 * step would cost a table decision about 4% (docs/benchmarks.md), a
 * sample of them well under 1%. A power of two.
 */
#define RLG_METRICS_SAMPLE 64

/*
 * The guarding roles (request.h: authorizer, auth_request,
 * forward_auth), counted apart in rlgate_unguarded_total: index role - 1.
 */
#define RLG_METRICS_GUARDS 3

/*
 * The bearer tokens a jwt key could not use, by why (request.h: enum
 * rlg_token from RLG_TOKEN_INVALID on), in rlgate_bad_tokens_total: index
 * reason - RLG_TOKEN_INVALID.
 */
#define RLG_METRICS_TOKENS 5

/* One thread's counters (its slot in the file). */
struct rlg_metrics_slot {
	uint64_t owner;           /* pid << 32 | thread serial; 0: free */
	uint64_t requests[RLG_METRICS_POLICIES][RLG_MD_N];
	uint64_t responses[RLG_METRICS_CODES];
	uint64_t admin_responses[RLG_METRICS_CODES];
	uint64_t store_errors;
	uint64_t cache_hits;
	uint64_t buckets[RLG_METRICS_BUCKETS];
	uint64_t step_ns;
	uint64_t steps;
	uint64_t unguarded[RLG_METRICS_GUARDS];   /* by guarding role */
	uint64_t bad_tokens[RLG_METRICS_TOKENS];  /* by reason */
	uint64_t held;            /* answers held for their turn (delay) */
	uint64_t park_full;       /* refused by a smoothing policy that could
	                             not hold them: the park was full */
} __attribute__((aligned(64)));

/*
 * A config's policies mapped onto the file's names: idx[i] is the file's
 * index of the config's policy index i (rlg_metrics_index), -1 for none.
 */
struct rlg_metrics_map {
	const struct rlg_config *cfg;
	int idx[RLG_METRICS_POLICIES];
};

/*
 * Opens (creating it if missing) the scoreboard at path for cfg, as the
 * process's scoreboard: the one rlg_metrics_claim hands slots of. A
 * scoreboard that cannot be opened is said through the log, and the
 * process counts in memory of its own (its endpoints then show its own
 * counts only). 0, or -1 in that case. Once per process, before threads
 * start; cfg must outlive it.
 */
int rlg_metrics_open(const char *path, const struct rlg_config *cfg);

/*
 * The map of cfg (a config the process reloaded, say): found, or made,
 * the file's names added for its policies under the file's flock (those
 * without room are not counted; said once in the log). NULL when the
 * process has no scoreboard. Valid until rlg_metrics_unmap(cfg), which
 * is for when no gate uses cfg any more, or rlg_metrics_close.
 */
const struct rlg_metrics_map *rlg_metrics_map(const struct rlg_config *cfg);
void rlg_metrics_unmap(const struct rlg_config *cfg);

/* The scoreboard's file for a config: [store] path + "-metrics". */
const char *rlg_metrics_path(const struct rlg_config *cfg, char *buf,
    size_t size);

/* Unmaps the process's scoreboard and forgets its maps (slots must be
 * released first). */
void rlg_metrics_close(void);

/*
 * A slot for the calling thread, or NULL when the process has no
 * scoreboard or every slot is taken by a live thread (then nothing is
 * counted for it; said once in the log). Released by
 * rlg_metrics_release.
 */
struct rlg_metrics_slot *rlg_metrics_claim(void);
void rlg_metrics_release(struct rlg_metrics_slot *s);

/*
 * The policies of cfg the counters count, by index: cfg->policies[i]
 * for i < npolicies, the .new_keys bound of cfg->policies[i - npolicies]
 * from npolicies up (NULL where that policy has none); NULL from
 * rlg_metrics_npolicies(cfg) on. The one place this order is known.
 */
const struct rlg_policy *rlg_metrics_policy(const struct rlg_config *cfg,
    size_t i);
/* The indexes rlg_metrics_policy takes for cfg: 2 * npolicies. */
size_t rlg_metrics_npolicies(const struct rlg_config *cfg);

/* The index of a .new_keys bound of cfg (rlg_metrics_policy's inverse
 * from npolicies up); RLG_METRICS_POLICIES for none. */
size_t rlg_metrics_bound_index(const struct rlg_config *cfg,
    const struct rlg_policy *p);

/*
 * The index of a policy of cfg in the sums (rlg_metrics_policy's
 * inverse); RLG_METRICS_POLICIES for none. A configured policy's index
 * is its place there: found without a search, inline, as on every
 * request.
 */
static inline size_t
rlg_metrics_index(const struct rlg_config *cfg, const struct rlg_policy *p)
{
	if (p >= cfg->policies && p < cfg->policies + cfg->npolicies)
		return (size_t)(p - cfg->policies);
	return rlg_metrics_bound_index(cfg, p);
}

/*
 * One more to a counter of a slot, by the slot's thread (its only
 * writer): a load and a store, no locked instruction; the sums read it
 * with relaxed loads, so they never see it torn.
 */
static inline void
rlg_metrics_add(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n,
	    __ATOMIC_RELAXED);
}

/*
 * Counting, by the slot's thread only; a NULL slot or map counts
 * nothing. policy is a policy of the map's config (one of its policies
 * or a .new_keys bound). Inline: the hot path's.
 */
static inline void
rlg_metrics_decision(struct rlg_metrics_slot *s,
    const struct rlg_metrics_map *m, const struct rlg_policy *policy,
    enum rlg_metric_decision d)
{
	size_t i;
	int f;

	if (s == NULL || m == NULL)
		return;
	i = rlg_metrics_index(m->cfg, policy);
	if (i < RLG_METRICS_POLICIES && (f = m->idx[i]) >= 0)
		rlg_metrics_add(&s->requests[f][d], 1);
}

/* The index of a code among the counted ones (0: other). */
size_t rlg_metrics_code_index(int code);

/* An answer of code code (admin: to an admin endpoint); a code outside
 * the counted ones is "other". */
void rlg_metrics_response(struct rlg_metrics_slot *s, int code, bool admin);
void rlg_metrics_store_error(struct rlg_metrics_slot *s);
void rlg_metrics_cache_hit(struct rlg_metrics_slot *s);
/*
 * A request of a guarding role (role: RLG_ROLE_AUTHORIZER,
 * RLG_ROLE_AUTH_REQUEST or RLG_ROLE_FORWARD_AUTH; any other counts
 * nothing) that no policy covered: its route has policies = none, or it
 * matched no route and there is no default (rlgate_unguarded_total).
 */
void rlg_metrics_unguarded(struct rlg_metrics_slot *s, enum rlg_role role);
/* The label of a guarding role in rlgate_unguarded_total (index
 * role - 1, below RLG_METRICS_GUARDS): "authorizer", "auth_request",
 * "forward_auth". */
const char *rlg_metrics_guard_name(size_t i);
/*
 * A flush of the write-behind table (store_table.c) that failed, or one
 * that succeeded, now: kept in the scoreboard's header, for the whole
 * host (rlgate_flush_failures_total, rlgate_flush_age_seconds). Any
 * thread; a locked add, once per flush.
 */
void rlg_metrics_flush(bool ok);
/* One (timed) store step of ns nanoseconds. */
void rlg_metrics_step_time(struct rlg_metrics_slot *s, int64_t ns);

/*
 * The gate's verdict dd counted in slot s (an observer: gate.c calls it
 * after the decision), policies by m (dd's config's map): each item by
 * what it came to (a skipped charge not at all), the policies the client
 * is exempt from, an unguarded request by role, the store's error or
 * its rejection cache's hit, the step's time when timed. A refused
 * request (a flaw) counts nothing here. A NULL slot counts nothing.
 */
void rlg_metrics_verdict(struct rlg_metrics_slot *s,
    const struct rlg_metrics_map *m, const struct rlg_decided *dd);

/* The host's sums, for the endpoints. */
struct rlg_metrics_sums {
	uint64_t requests[RLG_METRICS_POLICIES][RLG_MD_N];  /* by the
	                                map's config's index (rlg_metrics_index) */
	uint64_t responses[RLG_METRICS_CODES];
	uint64_t admin_responses[RLG_METRICS_CODES];
	uint64_t store_errors;
	uint64_t cache_hits;
	uint64_t buckets[RLG_METRICS_BUCKETS];  /* not cumulative */
	uint64_t step_ns;
	uint64_t steps;
	uint64_t unguarded[RLG_METRICS_GUARDS];  /* by role - 1 */
	uint64_t bad_tokens[RLG_METRICS_TOKENS]; /* by reason */
	uint64_t held;
	uint64_t park_full;
	int64_t start_s;          /* when the file was made */
	uint64_t flush_failures;  /* flushes of the table that failed */
	int64_t flush_ok_ms;      /* the last good flush's end; 0: none */
	bool shared;              /* false: this process only */
};

/* Sums every slot of the scoreboard into *out, requests by map's
 * config's index (zeros for a NULL map). */
void rlg_metrics_sum(const struct rlg_metrics_map *map,
    struct rlg_metrics_sums *out);

/* The code counted at index i, 0 for "other". */
int rlg_metrics_code(size_t i);

/* The buckets' upper bounds in ns (the last is +Inf: INT64_MAX). */
int64_t rlg_metrics_bucket_ns(size_t i);

/* The word of a decision: "admitted", "rejected", ... */
const char *rlg_metrics_decision_name(enum rlg_metric_decision d);

#endif
