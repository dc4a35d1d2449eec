/*
 * tier.c: per-client tiers, parsed and matched (tier.h).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tier.h"
#include "util.h"

/* One entry: who, and what applies to them under one policy. */
struct tier_entry {
	struct rlg_tier_client who;
	const struct rlg_policy *policy;   /* the copy; NULL: exempt */
	const char *source;
	size_t order;                      /* added as the order-th */
};

/* One policy's entries: keys and hosts sorted, networks longest first. */
struct tier_list {
	struct tier_entry *e;
	size_t n, cap;
	size_t nkeys, nhosts;      /* after seal: e = keys, hosts, networks */
	size_t *groups;            /* after seal: where each prefix length's
	                              networks start, longest first, and n */
	size_t ngroups;
};

struct rlg_tier_set {
	const struct rlg_config *cfg;      /* borrowed until the set is freed,
	                                      which needs it no more */
	struct tier_list *pols;            /* npolicies */
	size_t npolicies;                  /* cfg's */
	struct rlg_policy **copies;        /* ncopies, owned */
	size_t ncopies, capcopies;
	/* the copies by (policy, limit), so that rows giving one limit
	 * share one copy: open addressing, index + 1 (0: empty) */
	size_t *memo, capmemo;
	size_t n;
	bool sealed;
};

static void *
tier_grow(void *p, size_t *cap, size_t need, size_t size)
{
	void *q;

	if (need <= *cap)
		return p;
	*cap = *cap == 0 ? 16 : *cap * 2;
	if (*cap < need)
		*cap = need;
	q = realloc(p, *cap * size);
	if (q == NULL)
		abort();
	return q;
}

struct rlg_tier_set *
rlg_tier_set_new(const struct rlg_config *cfg)
{
	struct rlg_tier_set *set = rlg_xcalloc(1, sizeof *set);

	set->cfg = cfg;
	set->npolicies = cfg->npolicies;
	set->pols = rlg_xcalloc(cfg->npolicies > 0 ? cfg->npolicies : 1,
	    sizeof *set->pols);
	return set;
}

/* Whether two limits are the same (field by field: no padding read). */
static bool
tier_same_limit(const struct rlg_limit *a, const struct rlg_limit *b)
{
	return a->algorithm == b->algorithm && a->limit == b->limit &&
	    a->window_ms == b->window_ms && a->burst == b->burst;
}

/* The memo's slot for (pi's name, lim): its copy's, or the empty one to
 * use. A copy keeps its policy's name pointer, which tells pi. */
static size_t
tier_memo_slot(const struct rlg_tier_set *set, const char *name,
    const struct rlg_limit *lim)
{
	uint64_t h = 1469598103934665603ULL;
	const uint64_t f[5] = { (uint64_t)(uintptr_t)name,
	    (uint64_t)lim->algorithm, (uint64_t)lim->limit,
	    (uint64_t)lim->window_ms, (uint64_t)lim->burst };
	const struct rlg_policy *c;
	size_t i, k;

	for (i = 0; i < 5; i++)
		h = (h ^ f[i]) * 1099511628211ULL;
	for (k = (size_t)(h ^ h >> 29) & (set->capmemo - 1);;
	    k = (k + 1) & (set->capmemo - 1)) {
		if (set->memo[k] == 0)
			return k;
		c = set->copies[set->memo[k] - 1];
		if (c->name == name && tier_same_limit(&c->lim, lim))
			return k;
	}
}

/* Room in the memo for one more copy (at most half full). */
static void
tier_memo_grow(struct rlg_tier_set *set)
{
	size_t *old = set->memo, cap = set->capmemo, i;
	const struct rlg_policy *c;

	if ((set->ncopies + 1) * 2 <= set->capmemo)
		return;
	set->capmemo = cap == 0 ? 64 : cap * 2;
	set->memo = rlg_xcalloc(set->capmemo, sizeof *set->memo);
	for (i = 0; i < cap; i++) {
		if (old[i] == 0)
			continue;
		c = set->copies[old[i] - 1];
		set->memo[tier_memo_slot(set, c->name, &c->lim)] = old[i];
	}
	free(old);
}

/*
 * The policy copy for pi under spec (NULL for exempt), owned by the set
 * and shared by the rows that give pi the same limit; a spec that changes
 * nothing gives a copy all the same (the logs name its tier). 0, or -1
 * with err.
 */
static int
tier_copy(struct rlg_tier_set *set, size_t pi,
    const struct rlg_tier_spec *spec, const struct rlg_policy **out,
    char *err, size_t errlen)
{
	const struct rlg_policy *p = &set->cfg->policies[pi];
	struct rlg_policy *copy;
	struct rlg_limit lim;
	size_t k;

	*out = NULL;
	if (spec->exempt)
		return 0;
	if (rlg_tier_limit(p, spec, &lim, err, errlen) != 0)
		return -1;
	tier_memo_grow(set);
	k = tier_memo_slot(set, p->name, &lim);
	if (set->memo[k] != 0) {
		*out = set->copies[set->memo[k] - 1];
		return 0;
	}
	copy = rlg_xmalloc(sizeof *copy);
	*copy = *p;
	copy->lim = lim;
	set->copies = tier_grow(set->copies, &set->capcopies,
	    set->ncopies + 1, sizeof(struct rlg_policy *));
	set->copies[set->ncopies++] = copy;
	set->memo[k] = set->ncopies;
	*out = copy;
	return 0;
}

static void
tier_put(struct rlg_tier_set *set, size_t pi,
    const struct rlg_tier_client *who, const struct rlg_policy *policy,
    const char *source)
{
	struct tier_list *l = &set->pols[pi];
	struct tier_entry *e;

	l->e = tier_grow(l->e, &l->cap, l->n + 1, sizeof *l->e);
	e = &l->e[l->n++];
	e->who = *who;
	e->policy = policy;
	e->source = source;
	e->order = set->n++;
}

/* The index of the policy named name, or npolicies. */
static size_t
tier_policy(const struct rlg_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < cfg->npolicies; i++)
		if (strcmp(cfg->policies[i].name, name) == 0)
			break;
	return i;
}

int
rlg_tier_set_add(struct rlg_tier_set *set, const char *policy,
    const char *client, const char *spec, const char *source, char *err,
    size_t errlen)
{
	struct rlg_tier_client who;
	struct rlg_tier_spec sp;
	const struct rlg_policy *copy;
	char why[256];
	size_t pi;

	if (set->sealed || set->n >= RLG_TIER_SET_MAX) {
		snprintf(err, errlen, "more than %d overrides: not loaded",
		    RLG_TIER_SET_MAX);
		return RLG_TIER_FULL;
	}
	pi = tier_policy(set->cfg, policy);
	if (pi == set->cfg->npolicies) {
		snprintf(err, errlen, "no [policy %.*s]", RLG_POLICY_NAME_MAX,
		    policy);
		return RLG_TIER_NO_POLICY;
	}
	if (rlg_tier_client_parse(client, &who, why, sizeof why) != 0) {
		snprintf(err, errlen, "client: %s", why);
		return RLG_TIER_BAD_CLIENT;
	}
	if (rlg_tier_spec_parse(spec, &sp, why, sizeof why) != 0) {
		snprintf(err, errlen, "spec: %s", why);
		return RLG_TIER_BAD_SPEC;
	}
	if (tier_copy(set, pi, &sp, &copy, why, sizeof why) != 0) {
		snprintf(err, errlen, "spec: %s", why);
		return RLG_TIER_BAD_SPEC;
	}
	tier_put(set, pi, &who, copy, source);
	return 0;
}

/* Keys, then single addresses, then networks; see tier_cmp. */
static int
tier_rank(const struct tier_entry *e)
{
	if (e->who.is_key)
		return 0;
	return e->who.net.prefix_len == 128 ? 1 : 2;
}

/*
 * The seal's order: keys by key, hosts by address, networks longest
 * first and then by address; equals by the order they were added.
 */
static int
tier_cmp(const void *va, const void *vb)
{
	const struct tier_entry *a = va, *b = vb;
	int ra = tier_rank(a), rb = tier_rank(b), c = 0;

	if (ra != rb)
		return ra - rb;
	if (ra == 0)
		c = strcmp(a->who.key, b->who.key);
	else    /* hosts are all 128 long */
		c = b->who.net.prefix_len - a->who.net.prefix_len;
	if (ra != 0 && c == 0)
		c = memcmp(a->who.net.addr.b, b->who.net.addr.b, 16);
	if (c != 0)
		return c;
	return a->order < b->order ? -1 : a->order > b->order;
}

void
rlg_tier_set_seal(struct rlg_tier_set *set)
{
	size_t pi, i;

	for (pi = 0; pi < set->cfg->npolicies; pi++) {
		struct tier_list *l = &set->pols[pi];

		if (l->n > 1)
			qsort(l->e, l->n, sizeof *l->e, tier_cmp);
		l->nkeys = l->nhosts = l->ngroups = 0;
		l->groups = rlg_xcalloc(l->n + 1, sizeof *l->groups);
		for (i = 0; i < l->n; i++) {
			if (tier_rank(&l->e[i]) == 0)
				l->nkeys++;
			else if (tier_rank(&l->e[i]) == 1)
				l->nhosts++;
			else if (l->ngroups == 0 || l->e[i].who.net.prefix_len !=
			    l->e[l->groups[l->ngroups - 1]].who.net.prefix_len)
				l->groups[l->ngroups++] = i;
		}
		l->groups[l->ngroups] = l->n;
	}
	set->sealed = true;
}

struct rlg_tier_set *
rlg_tier_set_config(const struct rlg_config *cfg)
{
	struct rlg_tier_set *set = rlg_tier_set_new(cfg);
	const struct rlg_policy *copy;
	char err[256];
	size_t t, r, c;

	for (t = 0; t < cfg->ntiers; t++) {
		const struct rlg_tier *tier = &cfg->tiers[t];

		for (r = 0; r < tier->nrules; r++) {
			const struct rlg_tier_rule *rule = &tier->rules[r];

			/* The loader checked the spec against the policy. */
			if (tier_copy(set, rule->policy, &rule->spec, &copy,
			    err, sizeof err) != 0)
				continue;
			for (c = 0; c < tier->nclients; c++)
				tier_put(set, rule->policy, &tier->clients[c],
				    copy, tier->name);
		}
	}
	rlg_tier_set_seal(set);
	return set;
}

size_t
rlg_tier_set_size(const struct rlg_tier_set *set)
{
	return set != NULL ? set->n : 0;
}

/* The first of e[lo..hi) that cmp (0: equal) finds, by bisection. */
static const struct tier_entry *
tier_bisect(const struct tier_entry *e, size_t lo, size_t hi,
    int (*cmp)(const struct tier_entry *, const void *), const void *what)
{
	size_t end = hi;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp(&e[mid], what) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < end && cmp(&e[lo], what) == 0 ? &e[lo] : NULL;
}

static int
tier_key_cmp(const struct tier_entry *e, const void *key)
{
	return strcmp(e->who.key, key);
}

/* addr's first len bits, the rest zero: a network's address. */
static void
tier_mask(const struct rlg_addr *addr, int len, unsigned char *out)
{
	int whole = len / 8, rest = len % 8;

	memset(out, 0, 16);
	memcpy(out, addr->b, (size_t)whole);
	if (rest != 0)
		out[whole] = (unsigned char)(addr->b[whole] & (0xff << (8 - rest)));
}

static int
tier_net_cmp(const struct tier_entry *e, const void *masked)
{
	return memcmp(e->who.net.addr.b, masked, 16);
}

static int
tier_host_cmp(const struct tier_entry *e, const void *addr)
{
	return memcmp(e->who.net.addr.b, ((const struct rlg_addr *)addr)->b,
	    16);
}

bool
rlg_tier_find(const struct rlg_tier_set *set, size_t pi,
    const struct rlg_addr *addr, const char *key, struct rlg_tier_match *out)
{
	const struct tier_entry *e = NULL;
	const struct tier_list *l;
	const char *k;
	size_t i;

	if (set == NULL || pi >= set->cfg->npolicies || !set->sealed)
		return false;
	l = &set->pols[pi];
	if (l->n == 0)
		return false;
	/* The key's API key part: "k:..." alone or after "ADDR|". */
	k = key == NULL ? NULL : strncmp(key, "k:", 2) == 0 ? key :
	    strstr(key, "|k:");
	if (k != NULL && *k == '|')
		k++;
	if (k != NULL && l->nkeys > 0 && strlen(k) == RLG_TIER_KEY_LEN)
		e = tier_bisect(l->e, 0, l->nkeys, tier_key_cmp, k);
	if (e == NULL && addr != NULL && l->nhosts > 0)
		e = tier_bisect(l->e, l->nkeys, l->nkeys + l->nhosts,
		    tier_host_cmp, addr);
	/* Each prefix length, longest first: its networks by address. */
	for (i = 0; e == NULL && addr != NULL && i < l->ngroups; i++) {
		unsigned char masked[16];

		tier_mask(addr, l->e[l->groups[i]].who.net.prefix_len, masked);
		e = tier_bisect(l->e, l->groups[i], l->groups[i + 1],
		    tier_net_cmp, masked);
	}
	if (e == NULL)
		return false;
	out->policy = e->policy;
	out->exempt = e->policy == NULL;
	out->source = e->source;
	return true;
}

void
rlg_tier_set_free(struct rlg_tier_set *set)
{
	size_t i;

	if (set == NULL)
		return;
	for (i = 0; i < set->npolicies; i++) {
		free(set->pols[i].e);
		free(set->pols[i].groups);
	}
	free(set->pols);
	for (i = 0; i < set->ncopies; i++)
		free(set->copies[i]);
	free(set->copies);
	free(set->memo);
	free(set);
}
