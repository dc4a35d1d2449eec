/*
 * limiter.h: the rate-limit algorithms as pure functions.
 *
 * An algorithm takes the stored state of one (policy, client), the current
 * time, the limit (struct rlg_limit: algorithm, limit, window, burst) and
 * the request's cost (units, >= 1; 1 for a plain request), and returns
 * the new state and a decision. It reads no clock, allocates
 * nothing and does no I/O: the store runs it inside one atomic
 * transaction, and the tests drive it with fixed times. A leaf: it
 * includes no other module of rlgate; names, keys, modes and exemptions
 * are the config's (struct rlg_policy, config.h).
 *
 * Each algorithm is one row of a descriptor table (struct
 * rlg_algorithm_desc) beside its function: whether it keeps a log, has a
 * burst, caps the limit. The rest of rlgate reads the row and never
 * names an algorithm, so adding one is its function, its row, its name
 * in RLG_ALGORITHMS and its Lua twin (db/redis/step.lua).
 */
#ifndef RLG_LIMITER_H
#define RLG_LIMITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The algorithms, in their numbering (the config's words, the numbers
 * db/redis/step.lua takes): X(NAME, name) makes RLG_ALG_NAME, whose word
 * is "name". What each one is and needs is its row of the descriptor
 * table (struct rlg_algorithm_desc below).
 */
#define RLG_ALGORITHMS(X) \
	X(FIXED_WINDOW, fixed_window)     /* the seed's: aligned windows */ \
	X(SLIDING_WINDOW, sliding_window) /* + the last window, weighted */ \
	X(TOKEN_BUCKET, token_bucket)     /* GCRA: one theoretical arrival */ \
	X(SLIDING_LOG, sliding_log)       /* exact: a timestamp per request */

#define RLG_ALG_ENUM_(e, name) RLG_ALG_##e,
enum rlg_algorithm {
	RLG_ALGORITHMS(RLG_ALG_ENUM_)
};
#undef RLG_ALG_ENUM_
/* How many there are: 0 .. RLG_ALG_COUNT - 1 (counted apart, so that a
 * switch over enum rlg_algorithm has no case that is none). */
#define RLG_ALG_NTH_(e, name) RLG_ALG_NTH_##e,
enum { RLG_ALGORITHMS(RLG_ALG_NTH_) RLG_ALG_COUNT };
#undef RLG_ALG_NTH_

/* Upper bounds the config enforces, so no sum below can overflow. */
#define RLG_LIMIT_MAX     1000000000LL          /* requests per window */
#define RLG_WINDOW_S_MAX  (366LL * 24 * 3600)   /* one year, in seconds */
#define RLG_BURST_MAX     RLG_LIMIT_MAX         /* token bucket burst */
/*
 * A request's cost, in units of the limit: 1..RLG_COST_MAX. Above a
 * policy's capacity (limit, or burst) it can never be admitted (see
 * "Request cost" below); the bound only keeps the sums safe.
 */
#define RLG_COST_MAX      RLG_LIMIT_MAX
/* The sliding log keeps one row per admitted request: bounded. */
#define RLG_SLIDING_LOG_LIMIT_MAX 100000LL
/*
 * The limiter clamps now_ms to [0, RLG_TIME_MS_MAX] (9999-12-31T23:59:59.999Z)
 * and stored window starts alike: with the bounds above nothing overflows.
 */
#define RLG_TIME_MS_MAX   253402300799999LL
/* The longest ban (struct rlg_limit's ban_ms), in seconds: one year. */
#define RLG_BAN_S_MAX     RLG_WINDOW_S_MAX

/*
 * One limit: what an algorithm needs of a policy, and nothing else (the
 * policy's name, keys, mode and exemptions are the config's: struct
 * rlg_policy in config.h holds one of these). Read-only.
 */
struct rlg_limit {
	enum rlg_algorithm algorithm;
	int64_t limit;                 /* requests per window, >= 1 */
	int64_t window_ms;             /* window length in ms, whole seconds */
	int64_t burst;                 /* token bucket: requests at once, >= 1
	                                  (default: limit); others: unused */
	int64_t ban_ms;                /* the penalty box: 0, none; else a
	                                  ban's length, whole seconds,
	                                  1 s..RLG_BAN_S_MAX ("The ban") */
	int64_t ban_after;             /* the refusal that starts a ban: the
	                                  Nth in one window, 1..RLG_LIMIT_MAX
	                                  (0 counts as 1) */
};

/*
 * The stored state of one (policy, client). All zero is a fresh client.
 * fixed_window: window_start_ms is the start of the counted window (a
 *   multiple of window_ms) and count the requests admitted in it.
 * sliding_window: the same, plus prev_count, the requests admitted in the
 *   window before window_start_ms.
 * token_bucket: tat_us, the theoretical arrival time (GCRA) in
 *   microseconds since the epoch; the other fields are unused (0).
 * sliding_log: the timestamps live in their own table; this row keeps
 *   count (admitted requests inside the window after the step) and
 *   window_start_ms (the oldest of them) for the operator views.
 */
struct rlg_state {
	int64_t window_start_ms;
	int64_t count;
	int64_t prev_count;
	int64_t tat_us;
	int64_t expires_ms;    /* from this instant on the state is as fresh: prunable */
	/*
	 * The penalty box (a policy with ban_ms > 0; all 0 without one):
	 * refused counts the refusals of the aligned window that starts at
	 * refused_start_ms (a multiple of window_ms, every algorithm
	 * alike), and ban_until_ms is when the client's last ban ends (0:
	 * never banned, or not since the last write).
	 */
	int64_t refused;
	int64_t refused_start_ms;
	int64_t ban_until_ms;
};

/*
 * The ban (the penalty box). A policy with ban_ms > 0 blocks a client for
 * ban_ms after its ban_after-th refusal within one aligned window
 * (refused_start_ms): while now_ms < ban_until_ms every request is
 * refused, whatever its algorithm would say, with remaining 0 and
 * retry_ms = reset_ms = next_ms = ban_until_ms - now_ms (a stored end
 * beyond now_ms + ban_ms, a clock stepped back or a damaged row, counts
 * as now_ms + ban_ms). A refusal during a ban changes nothing: the ban is
 * a fixed timeout, never extended. Every other refusal is counted (out
 * then differs from in, rlg_limiter_refusal_writes says so: the store
 * writes out although the request is refused); the one that reaches ban_after
 * starts the ban (ban_until_ms = now_ms + ban_ms, refused back to 0) and
 * is answered with retry_ms = ban_ms. expires_ms is then kept at least at
 * the ban's end and the refusal window's end, so pruning never lifts a
 * ban or forgets a count. An admitted request keeps the count and clears
 * an ended ban. Without a ban (ban_ms 0), every algorithm decides and
 * stores exactly as it did before bans existed (refused,
 * refused_start_ms and ban_until_ms stored as 0): a refusal writes
 * nothing.
 */

/*
 * Request cost. Every algorithm charges a request's cost c units
 * atomically: it is admitted exactly when c requests of cost 1 at the same
 * instant would all be, and then leaves the state they would leave; a
 * request that does not fit is refused and consumes nothing, even the
 * units that would have fitted. c = 1 decides as before costs existed,
 * to the bit:
 *   fixed_window    count + c <= limit                      count += c
 *   sliding_window  prev * (W - e) + (count + c - 1) * W < limit * W
 *                                                           count += c
 *   token_bucket    now >= tat + (c - 1) * T - tau          tat += c * T
 *   sliding_log     m + c <= limit               c entries at now appended
 * The capacity is the largest cost that can ever pass: limit, or for
 * token_bucket burst (fewer only if the tolerance is capped: tau / T + 1).
 * A cost above it is refused, with retry_ms the time until a request of
 * the whole capacity would be admitted (the whole quota back), and 1 ms
 * when that is now: such a request never passes, which the config
 * prevents (a route's cost and cost_max are at most its policies'
 * capacities).
 */

/*
 * What one policy says about one request. Every algorithm fills it alike:
 * admitted: reset_ms is the time until the client's state is fresh again
 * (its whole quota back: the window end for fixed_window), and next_ms
 * the time until the quota available grows by at least one request if
 * nothing else arrives (what draft-ietf-httpapi-ratelimit-headers-11
 * calls "additional quota ... made available"), 1 <= next_ms <= reset_ms:
 * the window end for fixed_window (= reset_ms), earlier for the others
 * (the previous window's share decaying, the next token, the oldest log
 * entry sliding out); rejected: retry_ms is the time until one request
 * would be admitted, and reset_ms and next_ms equal retry_ms (no header
 * ever tells a client to come back earlier than Retry-After). With a
 * cost c: remaining still counts requests of cost 1 (units), and a
 * refused request's remaining is what is left, above 0 when c > 1 did
 * not fit in it (the answer still shows 0: response.c); retry_ms is the
 * time until a request of cost c is admitted.
 */
struct rlg_decision {
	bool admitted;
	int64_t limit;         /* the quota: requests per window */
	int64_t remaining;     /* requests of cost 1 still admitted right now,
	                          after this one (if admitted) */
	int64_t reset_ms;      /* ms from now, > 0 (see above) */
	int64_t retry_ms;      /* rejected: ms from now until this request (its
	                          cost) is admitted, > 0; else 0 */
	int64_t next_ms;       /* ms from now until more quota is available, > 0 */
	bool skipped;          /* a store's word, never the limiter's: a
	                          charge for a new key whose key was not new,
	                          nothing read or decided (rlg_store_skipped) */
};

/*
 * Runs the policy's algorithm for one request of cost units at now_ms
 * (every algorithm but sliding_log, which needs its log:
 * rlg_limiter_sliding_log).
 * in: the stored state (all zero for a new client); out: the state to store
 * if the request is admitted (equal to *in when it is rejected: a rejected
 * request consumes no quota, unless the policy has a ban: see "The ban"
 * above, rlg_limiter_refusal_writes); d: the decision. in and out may be the same.
 * A clock that went backwards (now_ms before the stored window) is clamped
 * to the stored window: it never grants quota the state did not allow.
 * Returns RLG_OK, or RLG_EINVAL for an impossible policy (limit or window
 * out of range, token bucket burst out of 1..RLG_BURST_MAX), a cost out
 * of 1..RLG_COST_MAX, and for sliding_log. Every algorithm's step without
 * a log has this contract (rlg_limiter_fn, the descriptor's step).
 */
typedef int rlg_limiter_fn(const struct rlg_limit *lim,
    const struct rlg_state *in, int64_t now_ms, int64_t cost,
    struct rlg_state *out, struct rlg_decision *d);
rlg_limiter_fn rlg_limiter_step;

/*
 * The fixed window of the seed: windows aligned on multiples of window_ms.
 * After a clock step back, reset_ms and retry_ms count from the stored
 * window's start (lower bounds, not exact); prev_count and tat_us are
 * stored as 0.
 */
rlg_limiter_fn rlg_limiter_fixed_window;

/*
 * The sliding window counter: admits (a request of cost 1) while
 *   prev_count * (window - elapsed) / window + count < limit
 * where elapsed is the time since the current aligned window started.
 * expires_ms is window_start_ms + 2 * window (a count still weighs during
 * the next window). A clock that went back is clamped to the stored
 * window's start; reset_ms and retry_ms are still measured from now_ms.
 */
rlg_limiter_fn rlg_limiter_sliding_window;

/*
 * The token bucket as GCRA: emission interval T = window / limit (in us,
 * rounded up), tolerance (burst - 1) * T; admits (cost 1) when now >= tat -
 * tolerance, then tat = max(tat, now) + T. The tolerance is capped at 1e18 us (about
 * 31,700 years) so tat_us fits: only absurd burst * T products are cut,
 * and only made stricter. remaining counts up to burst - 1, so it may
 * exceed limit when burst > limit. out: tat_us and expires_ms =
 * ceil(tat_us / 1000); window_start_ms, count and prev_count are 0.
 */
rlg_limiter_fn rlg_limiter_token_bucket;

/*
 * The sliding log, exact: log_ms[0..n) are the timestamps of this client's
 * admitted requests with log_ms[i] > now_ms - window_ms (later ones too, if
 * the clock went back), ascending, n <= limit. Admits when the m entries
 * inside the window leave room for the cost: m + cost <= limit.
 * Leading entries <= now_ms - window_ms are skipped (not counted), and
 * n > limit in-window entries is rejected, not an error.
 * *append is set when the request is admitted: the store then adds cost
 * entries at now_ms to the log and may drop every entry <= now_ms -
 * window_ms. out gets the
 * row for the operator views (count, window_start_ms = oldest entry,
 * expires_ms = newest entry + window, both counting the appended now_ms
 * when admitted; prev_count and tat_us 0). Rejected: retry_ms is
 * log_ms[n + cost - limit - 1] + window_ms - now_ms (cost 1:
 * log_ms[n - limit]). RLG_EINVAL for a bad policy (limit above
 * RLG_SLIDING_LOG_LIMIT_MAX), a bad cost, append NULL, or log_ms NULL
 * with n > 0. With a ban (ban_ms > 0) *out is read first: it holds the
 * stored row (all zero for a new client), whose ban fields the step
 * reads ("The ban"); without one it is only written.
 */
int rlg_limiter_sliding_log(const struct rlg_limit *lim,
    const int64_t *log_ms, size_t n, int64_t now_ms, int64_t cost,
    bool *append, struct rlg_state *out, struct rlg_decision *d);

/*
 * Whether a refused step of lim from the stored state in to out must be
 * written although the request is refused: the policy has a ban and the
 * refusal was counted or started one (out's ban fields differ from in's).
 * Never without a ban, nor during one (a refusal then changes nothing).
 */
bool rlg_limiter_refusal_writes(const struct rlg_limit *lim,
    const struct rlg_state *in, const struct rlg_state *out);

/*
 * A time as every algorithm sees it: before the epoch counts as the epoch,
 * after RLG_TIME_MS_MAX as RLG_TIME_MS_MAX (the bound that keeps every sum
 * safe). The store uses it too, so both agree on "now".
 */
int64_t rlg_limiter_clamp_time(int64_t t_ms);

/*
 * What a step of a policy can answer, for a store whose limiter runs
 * elsewhere (Redis runs db/redis/step.lua) and whose answers must be held
 * to what this one can produce:
 *   remaining_max: an admitted request's remaining is 0..remaining_max
 *     (token_bucket: burst - 1, the others: limit - 1); a rejected one's
 *     is 0 for cost 1, else up to remaining_max + 1 (a cost above the
 *     capacity refused with the whole quota left);
 *   delay_max: reset_ms, and a rejected request's retry_ms, are
 *     1..delay_max (at least ban_ms with a ban) (an admitted request's retry_ms is 0); next_ms is
 *     1..reset_ms when admitted, retry_ms when rejected.
 * delay_max holds for any state that rlgate stored at any time in
 * [0, RLG_TIME_MS_MAX], under any policy (a state outlives a change of the
 * config). fixed_window: window_ms, always. The others: their longest
 * delay on one clock (sliding_window two windows, sliding_log one,
 * token_bucket the largest tolerance plus the longest emission interval,
 * 1e15 ms + one year, since a tat_us stored under another policy
 * survives) plus RLG_TIME_MS_MAX - now_ms, because a state stored by a
 * clock ahead of now_ms (another gateway's, or this one's before a step
 * back) counts from its own time. now_ms is clamped as the algorithms
 * clamp it, so now_ms + delay_max never overflows. RLG_OK, or RLG_EINVAL
 * for a policy the limiter refuses.
 */
struct rlg_limiter_bounds {
	int64_t remaining_max;
	int64_t delay_max;
};

int rlg_limiter_bounds(const struct rlg_limit *lim, int64_t now_ms,
    struct rlg_limiter_bounds *b);

/*
 * Merge: units admitted elsewhere added to a state (local+global mode).
 *
 * rlg_limiter_merge returns in *out the state global becomes when units
 * admitted elsewhere (another host, or this host since its last sync)
 * are added to it, without deciding anything: a host that decides from
 * its own table pushes what it admitted to the shared store, which merges
 * it into the state every host reads back (db/redis/sync.lua is its Lua
 * twin, held to it by a differential test). window_start_ms is the start
 * of the window the units were admitted in (aligned on window_ms here),
 * now_ms the time of the merge (clamped as every algorithm clamps it):
 *   fixed_window    global's window is the units' one: count += units;
 *                   older, or global empty (count 0): the units' window,
 *                   count = units; newer: global unchanged (the units
 *                   belong to a window that is over).
 *   sliding_window  the same on the current window (empty: count and
 *                   prev_count 0); global one window older than the
 *                   units': the units' window, prev_count = global's
 *                   count, count = units; older still: prev_count 0;
 *                   global one window newer: its prev_count += units;
 *                   newer still: unchanged.
 *   token_bucket    tat = max(tat, now) + units * T (T the emission
 *                   interval of rlg_limiter_token_bucket, in us), at
 *                   most now + 1e18 us + T (the tolerance's cap: the
 *                   largest tat any step stores), never below max(tat,
 *                   now); a stored tat beyond what rlgate stores counts
 *                   as that bound.
 *   sliding_log     not mergeable: RLG_EINVAL (it stays exact-only).
 * The ban's fields (refused, refused_start_ms, ban_until_ms) are global's,
 * unchanged: the config refuses a ban in the local+global mode.
 * Counts may exceed the limit after a merge (the over-admission the
 * mode's bound measures): they are kept, up to RLG_MERGE_COUNT_MAX;
 * rlg_limiter_step clamps them to the limit, so a merged state over its
 * limit rejects until its window passes. A changed state gets the
 * expires_ms a step would give it (window end; sliding window: its
 * start + 2 windows; token bucket: ceil(tat_us / 1000)) and 0 in the
 * fields its algorithm does not use; stored window starts are aligned
 * and counts clamped to 0..RLG_MERGE_COUNT_MAX first. units 0, or a
 * window that is over: *out = *global, bit for bit. Merging a then b in
 * one window equals merging a + b. RLG_OK, or RLG_EINVAL for a policy
 * the limiter refuses, units out of 0..RLG_MERGE_COUNT_MAX, or
 * sliding_log. global and out may be the same.
 */
#define RLG_MERGE_COUNT_MAX 1000000000000000LL  /* 1e15: exact in Lua */
/*
 * The largest tat_us any step or merge stores: a time up to
 * RLG_TIME_MS_MAX plus the tolerance's cap (1e18 us) plus the longest
 * emission interval (what rlg_limiter_bounds allows for).
 */
#define RLG_TAT_US_MAX (RLG_TIME_MS_MAX * 1000 + 1000000000000000000LL + \
	RLG_WINDOW_S_MAX * 1000000)

int rlg_limiter_merge(const struct rlg_limit *lim,
    const struct rlg_state *global, int64_t units, int64_t window_start_ms,
    int64_t now_ms, struct rlg_state *out);

/*
 * Smoothing (nginx's limit_req without nodelay, and its delay=N): a
 * policy of an algorithm that smooths (the token bucket) may hold an
 * admitted request until its turn instead of answering at once. Its
 * admission is the algorithm's, unchanged (burst requests fit at once,
 * the bucket); what changes is when the answer leaves. With delay = D
 * (0..burst), the first max(D, 1) requests of a burst are answered at
 * once and each later one waits its turn, one emission interval T =
 * window / limit after the one before it: a request admitted with
 * backlog b = max(tat, now) - now ahead of it (the turns already given
 * out) waits b - (max(D, 1) - 1) * T, if that is above 0. delay 0 and
 * 1 are thus alike (the first passes at once); delay = burst never
 * holds (the plain token bucket). With a cost c the request takes c
 * turns and waits for its first.
 *
 * rlg_limiter_wait returns that wait in ms (rounded up), from d (the
 * admitted decision of lim, at the now it decided at) alone: its
 * reset_ms is ceil((tat_new - now) / 1000) with tat_new = now + b + c *
 * T, so no store keeps anything more and every store's answer (Redis's
 * Lua twin included) gives it. 0 when delay < 0 (the policy does not
 * smooth), the algorithm does not smooth, or d was not admitted; always
 * below d->reset_ms. The rounding of reset_ms may add up to 1 ms.
 */
int64_t rlg_limiter_wait(const struct rlg_limit *lim, int64_t delay,
    int64_t cost, const struct rlg_decision *d);

/*
 * d as it reads ms later, for an answer held that long (ms >= 0): reset_ms
 * and next_ms count from the answer (at least 1 ms, next_ms at most
 * reset_ms; a rejected decision's retry_ms alike); remaining is kept
 * (quota only grows with time: a lower bound).
 */
void rlg_limiter_later(struct rlg_decision *d, int64_t ms);

/*
 * What the rest of rlgate knows of an algorithm: one row per algorithm
 * beside its function (limiter.c), as a command table keeps arity and
 * flags beside each command. The config, the tiers, the stores and the
 * response read these fields; none of them names an algorithm.
 */
struct rlg_algorithm_desc {
	enum rlg_algorithm algorithm;
	const char *name;       /* its word in the config and the logs */
	/*
	 * Its step (rlg_limiter_step calls it), or NULL for one that keeps
	 * a log, which the store passes to rlg_limiter_sliding_log.
	 */
	rlg_limiter_fn *step;
	/*
	 * It keeps a log: one entry per admitted unit, beside its state row
	 * (which then only summarises it for the operator views). Its state
	 * is more than one struct rlg_state, so the decision table
	 * (commit = behind) cannot hold it: such a policy needs commit =
	 * each.
	 */
	bool keeps_log;
	/*
	 * It takes burst: its capacity (the largest cost that can pass) is
	 * burst, not limit, the config accepts burst only for it, and
	 * RateLimit-Policy and the policy summary show it.
	 */
	bool has_burst;
	int64_t limit_max;      /* the largest limit it takes */
	/* Why the limit is capped, for the config's message ("keeps one
	 * row per request"); NULL when limit_max is RLG_LIMIT_MAX. */
	const char *limit_why;
	/*
	 * It can smooth (a policy's delay: rlg_limiter_wait): its admitted
	 * requests have turns, one emission interval apart, so one over the
	 * rate may be held until its turn instead of refused.
	 */
	bool smooths;
};

/* The row of algorithm a, or NULL if a is none. */
const struct rlg_algorithm_desc *rlg_algorithm_desc(enum rlg_algorithm a);

/* Whether lim's algorithm takes a burst, keeps a log (its row's
 * has_burst, keeps_log); false for an unknown algorithm. */
bool rlg_limiter_has_burst(const struct rlg_limit *lim);
bool rlg_limiter_keeps_log(const struct rlg_limit *lim);

/*
 * The largest cost a request may have under lim and ever pass: burst for
 * an algorithm with a burst, else limit (the token bucket may pass fewer
 * if its tolerance is capped; see "Request cost" above).
 */
int64_t rlg_limiter_capacity(const struct rlg_limit *lim);

/*
 * Names for the config and logs: "fixed_window", "sliding_window",
 * "token_bucket", "sliding_log" (the descriptor's name). NULL if unknown.
 */
const char *rlg_algorithm_name(enum rlg_algorithm a);

#endif
