/*
 * limiter.h: the rate-limit algorithms as pure functions.
 *
 * An algorithm takes the stored state of one (policy, client), the current
 * time and the policy, and returns the new state and a decision. It reads no
 * clock, allocates nothing and does no I/O: the store runs it inside one
 * atomic transaction, and the tests drive it with fixed times.
 */
#ifndef RLG_LIMITER_H
#define RLG_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

enum rlg_algorithm {
	RLG_ALG_FIXED_WINDOW = 0,
};

enum rlg_key_kind {
	RLG_KEY_IP = 0,
};

/* Upper bounds the config enforces, so no sum below can overflow. */
#define RLG_LIMIT_MAX     1000000000LL          /* requests per window */
#define RLG_WINDOW_S_MAX  (366LL * 24 * 3600)   /* one year, in seconds */

/* One limit, as configured. Built once by the config, then read-only. */
struct rlg_policy {
	char *name;                    /* section name: [policy NAME] */
	enum rlg_algorithm algorithm;
	int64_t limit;                 /* requests per window, >= 1 */
	int64_t window_ms;             /* window length in ms, whole seconds */
	enum rlg_key_kind key;
};

/*
 * The stored state of one (policy, client). All zero is a fresh client.
 * Fixed window: window_start_ms is the start of the counted window (a
 * multiple of window_ms) and count the requests admitted in it.
 */
struct rlg_state {
	int64_t window_start_ms;
	int64_t count;
	int64_t expires_ms;    /* from this instant on the state is as fresh: prunable */
};

/* What one policy says about one request. */
struct rlg_decision {
	bool admitted;
	int64_t limit;         /* the quota: requests per window */
	int64_t remaining;     /* requests still admitted in this window, after this one */
	int64_t reset_ms;      /* ms from now until the window resets, > 0 */
	int64_t retry_ms;      /* rejected: ms from now until one is admitted; else 0 */
};

/*
 * Runs the policy's algorithm for one request at now_ms.
 * in: the stored state (all zero for a new client); out: the state to store
 * if the request is admitted (equal to *in when it is rejected: a rejected
 * request consumes no quota); d: the decision. in and out may be the same.
 * A clock that went backwards (now_ms before the stored window) is clamped
 * to the stored window. Returns RLG_OK, or RLG_EINVAL for an impossible
 * policy (limit or window out of range).
 */
int rlg_limiter_step(const struct rlg_policy *policy,
    const struct rlg_state *in, int64_t now_ms,
    struct rlg_state *out, struct rlg_decision *d);

/* The fixed window of the seed: windows aligned on multiples of window_ms. */
int rlg_limiter_fixed_window(const struct rlg_policy *policy,
    const struct rlg_state *in, int64_t now_ms,
    struct rlg_state *out, struct rlg_decision *d);

/* Names for the config and logs: "fixed_window". NULL if unknown. */
const char *rlg_algorithm_name(enum rlg_algorithm a);

#endif
