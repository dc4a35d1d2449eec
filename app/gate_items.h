/*
 * gate_items.h: what a request's step is made of: its route, its cost
 * and its items (gate_items.c), for the gate's decision (gate.c).
 */
#ifndef RLG_GATE_ITEMS_H
#define RLG_GATE_ITEMS_H

#include "config.h"
#include "request.h"
#include "tier.h"
#include "verdict.h"

/*
 * The first [route] whose path and method match r: it names the
 * policies. NULL: none matched (the default policies apply).
 */
const struct rlg_route *rlg_gate_route(const struct rlg_config *cfg,
    const struct rlg_request *r);

/*
 * The items of req's step under route rt (NULL: the default policies),
 * with the tiers of sets[0] (the overrides) before sets[1] (the
 * config's; either may be NULL), into dd->gi: its cost (gi.cost), then
 * one item per policy that applies and the charges for new keys.
 * RLG_OK, or RLG_EINVAL when the request cannot be charged or keyed for
 * sure (an unreadable cost header, a key header that came twice): the
 * flaw in dd, the request must be refused.
 */
int rlg_gate_items(const struct rlg_config *cfg,
    const struct rlg_tier_set *const sets[2], const struct rlg_request *req,
    const struct rlg_route *rt, struct rlg_decided *dd);

#endif
