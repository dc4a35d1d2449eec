/*
 * tier.h: per-client tiers. An operator gives some clients their own
 * limit (window, burst) under a policy, or exempts them from it, in two
 * places: [tier NAME] sections of the config (config_tier.c reads them,
 * and holds the parsers of specs and clients), and override rows in the store, which
 * operators edit while rlgate runs (store.h: rlg_store_overrides; each
 * process's reader reads them again when they change, about twice a
 * second: overrides.h).
 *
 * What a tier changes is written the same way everywhere, a spec: the
 * words limit=N, window=S (seconds) and burst=B (token_bucket), any of
 * them in any order, separated by spaces; or the word exempt alone. A
 * client is an IPv4 or IPv6 address, a CIDR network, or an API key by
 * its hash, "k:" and 32 hex digits (rlgate --hash-key prints it).
 *
 * A set holds the tiers one source gives, ready to match: per policy, the
 * API key hashes and the single addresses sorted for a binary search, the
 * networks grouped by prefix length, longest first, each group sorted
 * for a binary search of the client's address cut to that length (a
 * lookup costs a search per distinct length, not one per network). For one (policy, client) the most specific
 * entry wins: an API key before an address, an address before a network,
 * a longer prefix before a shorter one; between equals, the first added
 * (the config's file order). The gate asks the store's set first and the
 * config's after it, so a row in the store overrides a tier.
 *
 * The limit a tier gives is a copy of the policy (same name, so the same
 * state in the store) with its own struct rlg_limit: the store and the
 * limiter see a policy like any other, the headers report its numbers.
 * No I/O here.
 */
#ifndef RLG_TIER_H
#define RLG_TIER_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "net.h"

/* The most entries one set holds (rows past it are not loaded). */
#define RLG_TIER_SET_MAX    100000

/* A set of tiers, for cfg's policies (it borrows cfg: free it first). */
struct rlg_tier_set;

/* An empty set. Never NULL (aborts when out of memory, as rlg_xmalloc). */
struct rlg_tier_set *rlg_tier_set_new(const struct rlg_config *cfg);

/* A set of cfg's [tier NAME] sections, sealed. */
struct rlg_tier_set *rlg_tier_set_config(const struct rlg_config *cfg);

/* Why rlg_tier_set_add refused a row. */
#define RLG_TIER_NO_POLICY   (-1)   /* no [policy NAME] of that name */
#define RLG_TIER_BAD_CLIENT  (-2)   /* no address, CIDR or k:HASH */
#define RLG_TIER_BAD_SPEC    (-3)   /* unreadable, or unfit for the policy */
#define RLG_TIER_FULL        (-4)   /* RLG_TIER_SET_MAX entries already */

/*
 * Adds one override row: policy (a name of cfg), client and spec as
 * text, source what the logs call it (borrowed: it must outlive the
 * set). 0; with err (the row is not added) RLG_TIER_NO_POLICY for an
 * unknown policy, RLG_TIER_BAD_CLIENT, RLG_TIER_BAD_SPEC for a bad spec
 * or one that does not fit the policy, RLG_TIER_FULL for a full set.
 */
int rlg_tier_set_add(struct rlg_tier_set *set, const char *policy,
    const char *client, const char *spec, const char *source, char *err,
    size_t errlen);

/* Makes a set ready to match; nothing can be added after. */
void rlg_tier_set_seal(struct rlg_tier_set *set);

/* How many entries the set holds. */
size_t rlg_tier_set_size(const struct rlg_tier_set *set);

/* What applies to one client under one policy. */
struct rlg_tier_match {
	const struct rlg_policy *policy;   /* as it applies (the set's copy;
	                                      NULL when exempt) */
	bool exempt;
	const char *source;                /* the tier's name, or the
	                                      source of the row */
};

/*
 * Looks up policy pi (an index of cfg->policies) for a client at addr
 * (NULL: unknown) whose store key is key (an address, "k:HASH" or
 * "ADDR|k:HASH": its k: part is matched). true with *out filled when an
 * entry applies; false when none does (NULL set too).
 */
bool rlg_tier_find(const struct rlg_tier_set *set, size_t pi,
    const struct rlg_addr *addr, const char *key,
    struct rlg_tier_match *out);

/* Frees a set (cfg may be gone by then); NULL does nothing. */
void rlg_tier_set_free(struct rlg_tier_set *set);

#endif
