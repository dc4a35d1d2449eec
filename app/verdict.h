/*
 * verdict.h: what the gate decided for one request, item by item, and
 * what the store said of its step. gate.c's decision fills it and makes
 * no side effect of its own; the observers read it after it, in one
 * place (gate.c, decide): the counters (metrics.h, rlg_metrics_verdict)
 * and the log (gate_log.h, rlg_gate_log_verdict). Every outcome is a
 * word of its own: nothing here is told by special values.
 */
#ifndef RLG_VERDICT_H
#define RLG_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "request.h"
#include "store.h"

/* Items of one step: a policy each, and a charge for a new key after each
 * policy keyed by a header (new_keys_per_ip). */
#define RLG_GATE_ITEMS_MAX (2 * RLG_POLICIES_MAX)

/* What one item of the step came to. */
enum rlg_item_outcome {
	RLG_ITEM_ADMITTED = 0,
	RLG_ITEM_REJECTED,          /* by an enforcing policy */
	RLG_ITEM_DRY_RUN_REJECTED,  /* a dry_run policy's would-be rejection */
	RLG_ITEM_EXEMPT,            /* an exempt client's, reported
	                               (report_exempt): never rejects */
	RLG_ITEM_SKIPPED,           /* a charge for a new key whose key is
	                               not new: it decided nothing */
};

/* What the store said of the request's step. */
enum rlg_store_said {
	RLG_STORE_NOT_ASKED = 0,    /* no item, or refused before the step */
	RLG_STORE_SAID_OK,
	RLG_STORE_SAID_FULL,        /* refused a new client (max_clients:
	                               RLG_EFULL); the store works */
	RLG_STORE_SAID_FAILED,      /* any other error */
};

/* The items of one store step and what the gate knows of each. */
struct rlg_verdict_items {
	struct rlg_store_item items[RLG_GATE_ITEMS_MAX];
	bool enforced[RLG_GATE_ITEMS_MAX];  /* may reject the request */
	bool dry[RLG_GATE_ITEMS_MAX];       /* a dry_run policy's */
	/* the policy as configured (an item's may be a tier's copy), and
	 * the tier that gave the item its limit, or NULL */
	const struct rlg_policy *base[RLG_GATE_ITEMS_MAX];
	const char *tier[RLG_GATE_ITEMS_MAX];
	size_t n;
	/* the policies the client is exempt from, not asked (counted) */
	const struct rlg_policy *exempt[RLG_POLICIES_MAX];
	size_t nexempt;
	char keys[RLG_POLICIES_MAX][RLG_CLIENT_KEY_MAX + 1];
	int64_t cost;           /* the request's (rlg_request_cost) */
	/*
	 * A smoothing policy's item when the front could hold no answer
	 * (its park full, or none): the policy with burst = max(delay, 1),
	 * so that only what passes at once is admitted and a request that
	 * would wait is refused, charged nothing (items[i].policy points
	 * here then).
	 */
	struct rlg_policy at_once[RLG_POLICIES_MAX];
	size_t nat_once;
	/* the store's decisions and what each came to: set when the store
	 * said ok */
	struct rlg_decision d[RLG_GATE_ITEMS_MAX];
	enum rlg_item_outcome outcome[RLG_GATE_ITEMS_MAX];
};

/*
 * The decision for one request. A refused request (flaw not
 * RLG_FLAW_NONE: unread, or its cost or key header unreadable) has no
 * items and asked no store; else the items were gathered, and asked
 * when there are any.
 */
struct rlg_decided {
	const struct rlg_request *req;
	const struct rlg_route *route;  /* the [route] that matched, or NULL */
	enum rlg_flaw flaw;             /* why it was refused unread */
	const char *flaw_about;         /* the header it names, or NULL */
	bool unguarded;                 /* a guarding role's request no
	                                   policy covers */
	enum rlg_token token;           /* a bearer token a jwt key could not
	                                   use (the first), else RLG_TOKEN_OK:
	                                   its items keyed by the address */
	enum rlg_store_said store;
	const char *store_msg;          /* its message when it said full or
	                                   failed (rlg_store_errmsg), valid
	                                   until its next operation */
	bool cached;                    /* the rejection cache answered */
	int64_t step_ns;                /* the step's time; -1: not timed
	                                   (one in RLG_METRICS_SAMPLE is) */
	bool admitted;                  /* no enforcing item rejected */
	int64_t hold_ms;                /* admitted: how long its answer waits
	                                   for its turn (smoothing); 0: none */
	bool park_full;                 /* a smoothing policy decided at once
	                                   only: the front could hold nothing */
	bool dry_rejected;              /* a dry-run item would have */
	struct rlg_verdict_items gi;
};

#endif
