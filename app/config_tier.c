/*
 * config_tier.c: the [tier NAME] sections (tier.h says what a tier is).
 *
 *   [tier gold]
 *   clients = 198.51.100.0/24, 2001:db8:42::/48, k:0123...ef
 *   default = limit=600 window=60
 *   search = exempt
 *
 * The key clients lists the tier's clients; every other key names a
 * policy and says what the tier changes of it, a spec. The keys of a tier
 * are not rows of the option table: a policy's name is the key. A spec's
 * syntax is checked on its line; what needs the whole file (the policy
 * exists, the spec fits its algorithm, a route's cost fits the tier's
 * capacity) once the policies and routes are final (rlg_tiers_finish).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_priv.h"
#include "util.h"

/* A decimal integer of 1..max, nothing else. 0 or -1. */
static int
tier_int(const char *s, size_t len, int64_t max, int64_t *out)
{
	int64_t v = 0;
	size_t i;

	if (len == 0 || len > 19)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (v > (max - (s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v < 1)
		return -1;
	*out = v;
	return 0;
}

/*
 * A duration in seconds of 1..max: a decimal integer and an optional unit
 * s, m, h or d, as [policy] window takes it (config_set.c). 0 or -1.
 */
static int
tier_seconds(const char *s, size_t len, int64_t max, int64_t *out)
{
	static const struct {
		char unit;
		int64_t times;
	} units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 } };
	int64_t v, times = 1;
	size_t i;

	for (i = 0; len > 1 && i < sizeof units / sizeof units[0]; i++)
		if (s[len - 1] == units[i].unit) {
			times = units[i].times;
			len--;
			break;
		}
	if (tier_int(s, len, max / times, &v) != 0)
		return -1;
	*out = v * times;
	return 0;
}

/*
 * The value v (len bytes) of the word name of a spec into *field, from 1
 * to max: a duration (seconds, or with a unit) when seconds, else an
 * integer. 0, or -1 with the reason in err: set twice, or a bad value.
 */
static int
tier_value(const char *name, int64_t max, bool seconds, const char *v,
    size_t len, int64_t *field, char *err, size_t errlen)
{
	if (*field != 0) {
		snprintf(err, errlen, "%s set twice", name);
		return -1;
	}
	if (seconds && tier_seconds(v, len, max, field) != 0) {
		snprintf(err, errlen, "window: a duration in seconds, "
		    "or with a unit s, m, h, d (e.g. 90s, 15m, 1h), "
		    "from 1 to %lld seconds (got \"%.*s\")", (long long)max,
		    (int)len, v);
		return -1;
	}
	if (!seconds && tier_int(v, len, max, field) != 0) {
		snprintf(err, errlen, "%s: must be an integer from 1 "
		    "to %lld (got \"%.*s\")", name, (long long)max,
		    (int)len, v);
		return -1;
	}
	return 0;
}

int
rlg_tier_spec_parse(const char *s, struct rlg_tier_spec *out, char *err,
    size_t errlen)
{
	static const struct {
		const char *name;
		int64_t max;
		size_t off;
	} words[] = {
		{ "limit", RLG_LIMIT_MAX, offsetof(struct rlg_tier_spec, limit) },
		{ "window", RLG_WINDOW_S_MAX,
		    offsetof(struct rlg_tier_spec, window_s) },
		{ "burst", RLG_BURST_MAX, offsetof(struct rlg_tier_spec, burst) },
	};
	size_t len, i, nwords = 0;

	memset(out, 0, sizeof *out);
	if (strlen(s) > RLG_TIER_SPEC_MAX) {
		snprintf(err, errlen, "longer than %d bytes", RLG_TIER_SPEC_MAX);
		return -1;
	}
	for (;;) {
		const char *eq;
		int64_t *field;

		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0')
			break;
		len = strcspn(s, " \t");
		nwords++;
		if (len == 6 && strncmp(s, "exempt", 6) == 0) {
			out->exempt = true;
			s += len;
			continue;
		}
		eq = memchr(s, '=', len);
		for (i = 0; eq != NULL && i < sizeof words / sizeof words[0];
		    i++)
			if ((size_t)(eq - s) == strlen(words[i].name) &&
			    strncmp(s, words[i].name, (size_t)(eq - s)) == 0)
				break;
		if (eq == NULL || i == sizeof words / sizeof words[0]) {
			snprintf(err, errlen, "unknown word \"%.*s\" (expected "
			    "limit=N, window=SECONDS, burst=N or exempt)",
			    (int)len, s);
			return -1;
		}
		field = (int64_t *)(void *)((char *)out + words[i].off);
		if (tier_value(words[i].name, words[i].max,
		    field == &out->window_s, eq + 1, len - (size_t)(eq + 1 - s),
		    field, err, errlen) != 0)
			return -1;
		s += len;
	}
	if (nwords == 0) {
		snprintf(err, errlen, "empty (expected limit=N, "
		    "window=SECONDS, burst=N or exempt)");
		return -1;
	}
	if (out->exempt && nwords > 1) {
		snprintf(err, errlen, "exempt goes alone (a client that is "
		    "exempt has no limit to change)");
		return -1;
	}
	return 0;
}

int
rlg_tier_client_parse(const char *s, struct rlg_tier_client *out,
    char *err, size_t errlen)
{
	size_t i;

	memset(out, 0, sizeof *out);
	if (strncmp(s, "k:", 2) == 0) {
		if (strlen(s) != RLG_TIER_KEY_LEN ||
		    strspn(s + 2, "0123456789abcdefABCDEF") !=
		    RLG_TIER_KEY_LEN - 2) {
			snprintf(err, errlen, "\"%.*s\": an API key's hash is "
			    "k: and 32 hex digits (rlgate --hash-key prints it)",
			    RLG_TIER_SPEC_MAX, s);
			return -1;
		}
		out->is_key = true;
		for (i = 0; i < RLG_TIER_KEY_LEN; i++)
			out->key[i] = (char)tolower((unsigned char)s[i]);
		return 0;
	}
	if (rlg_cidr_parse(s, &out->net) != 0) {
		snprintf(err, errlen, "\"%.*s\" is no address, network "
		    "(ADDR/LEN, host bits zero) or k:HASH", RLG_TIER_SPEC_MAX,
		    s);
		return -1;
	}
	return 0;
}

int
rlg_tier_limit(const struct rlg_policy *p, const struct rlg_tier_spec *spec,
    struct rlg_limit *out, char *err, size_t errlen)
{
	const struct rlg_algorithm_desc *a = rlg_policy_alg(p);
	bool bucket = a->has_burst;
	char names[128];

	*out = p->lim;
	if (spec->burst != 0 && !bucket) {
		snprintf(err, errlen, "burst applies only to %s ([policy %s] "
		    "is %s)", rlg_burst_algorithms(names, sizeof names),
		    p->name, a->name);
		return -1;
	}
	if (spec->limit != 0 && spec->limit > a->limit_max) {
		snprintf(err, errlen, "limit: [policy %s] is a %s, which %s: "
		    "at most %lld (got %lld)", p->name, a->name, a->limit_why,
		    (long long)a->limit_max, (long long)spec->limit);
		return -1;
	}
	if (spec->limit != 0)
		out->limit = spec->limit;
	if (spec->window_s != 0)
		out->window_ms = spec->window_s * 1000;
	if (bucket)
		out->burst = spec->burst != 0 ? spec->burst :
		    p->lim.burst != p->lim.limit ? p->lim.burst : out->limit;
	return 0;
}

/*
 * A "[tier NAME]" header (name not empty): the tier of that name, a new
 * one if it is the first such section (a repeated section merges into
 * the first, as every section does, with a warning), or a reported
 * problem.
 */
void
rlg_tier_section(struct rlg_parse *p, const char *name)
{
	size_t i, len = strspn(name, RLG_ALNUM "_.-");
	char label[RLG_LABEL_MAX];

	if (name[len] != '\0' || len > RLG_POLICY_NAME_MAX) {
		rlg_problem(p, p->lineno, "bad tier name \"%s\": at most %d "
		    "bytes of A-Z a-z 0-9 _ . -", name, RLG_POLICY_NAME_MAX);
		return;
	}
	snprintf(label, sizeof label, "[tier %s]", name);
	for (i = 0; i < p->ntiers && strcmp(p->tbuilds[i].label, label) != 0;
	    i++)
		;
	if (i == RLG_TIERS_MAX) {
		if (!p->too_many_tiers)
			rlg_problem(p, p->lineno, "too many tiers: %s would be "
			    "number %d, at most %d are allowed", label,
			    RLG_TIERS_MAX + 1, RLG_TIERS_MAX);
		p->too_many_tiers = true;
		return;
	}
	if (i == p->ntiers) {
		p->tiers[i].name = rlg_xstrdup(name);
		memcpy(p->tbuilds[i].label, label, sizeof label);
		p->tbuilds[i].line = p->lineno;
		p->ntiers++;
	} else {
		rlg_section_again(p, label, p->tbuilds[i].line);
	}
	p->sect = "tier";
	p->cur = i;
	p->base = &p->tiers[i];
	memcpy(p->label, label, sizeof label);
}

/* clients = A, B, ...: each parsed; every problem reported. */
static void
tier_clients(struct rlg_parse *p, struct rlg_tier *t, const char *value)
{
	const char *s = value, *e;
	char item[RLG_TIER_SPEC_MAX + 1], err[256];
	size_t len;

	for (;;) {
		e = strchr(s, ',');
		if (e == NULL)
			e = s + strlen(s);
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		len = (size_t)(e - s);
		while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
			len--;
		if (len == 0) {
			rlg_problem(p, p->lineno, "%s clients: an empty item "
			    "(two commas, or one at an end)", p->label);
		} else if (t->nclients == RLG_TIER_CLIENTS_MAX) {
			rlg_problem(p, p->lineno, "%s clients: at most %d "
			    "clients in one tier", p->label,
			    RLG_TIER_CLIENTS_MAX);
			return;
		} else {
			snprintf(item, sizeof item, "%.*s", (int)len, s);
			if (t->clients == NULL)
				t->clients = rlg_xcalloc(RLG_TIER_CLIENTS_MAX,
				    sizeof *t->clients);
			if (rlg_tier_client_parse(item, &t->clients[t->nclients],
			    err, sizeof err) != 0)
				rlg_problem(p, p->lineno, "%s clients: %s",
				    p->label, err);
			else
				t->nclients++;
		}
		if (*e == '\0')
			return;
		s = e + 1;
	}
}

/*
 * One "key = value" line in a [tier NAME]: clients, or a policy's name
 * and its spec. A key set twice is reported as for any section.
 */
void
rlg_tier_key(struct rlg_parse *p, const char *name, const char *value)
{
	struct rlg_tier *t = &p->tiers[p->cur];
	struct rlg_tier_build *b = &p->tbuilds[p->cur];
	struct rlg_tier_spec spec;
	char err[256];
	size_t i;

	if (strcmp(name, "clients") == 0) {
		if (b->clients_line != 0) {
			rlg_problem(p, p->lineno, "%s clients: set twice "
			    "(first on line %d)", p->label, b->clients_line);
			return;
		}
		b->clients_line = p->lineno;
		tier_clients(p, t, value);
		return;
	}
	for (i = 0; i < b->nrules; i++)
		if (strcmp(b->rules[i].policy, name) == 0) {
			rlg_problem(p, p->lineno, "%s %s: set twice (first on "
			    "line %d)", p->label, name, b->rules[i].line);
			return;
		}
	if (rlg_tier_spec_parse(value, &spec, err, sizeof err) != 0) {
		rlg_problem(p, p->lineno, "%s %s: %s", p->label, name, err);
		return;
	}
	if (b->nrules == RLG_POLICIES_MAX) {
		rlg_problem(p, p->lineno, "%s %s: a tier names at most %d "
		    "policies", p->label, name, RLG_POLICIES_MAX);
		return;
	}
	if (b->nrules == 0)
		b->rules = rlg_xcalloc(RLG_POLICIES_MAX, sizeof *b->rules);
	b->rules[b->nrules].policy = rlg_xstrdup(name);
	b->rules[b->nrules].spec = spec;
	b->rules[b->nrules].line = p->lineno;
	b->nrules++;
}

/*
 * A rule against the routes: a request of a route costing more than the
 * capacity the tier gives (limit; burst for token_bucket) is never
 * admitted for the tier's clients: a fixed cost, or the cost_max of a
 * header cost (what a request costs whose header is not believed).
 * Reported at the rule's line.
 */
static void
tier_cost_check(struct rlg_parse *p, const struct rlg_tier_build *b,
    const struct rlg_tier_rule *rule, const struct rlg_limit *lim, int line)
{
	const struct rlg_config *cfg = p->cfg;
	bool bucket = rlg_limiter_has_burst(lim);
	int64_t cap = rlg_limiter_capacity(lim);
	size_t r, j;

	for (r = 0; r < cfg->nroutes; r++) {
		const struct rlg_route *rt = &cfg->routes[r];
		bool header = rt->cost_header != NULL;
		int64_t most = header ? rt->cost_max : rt->cost;

		if (most <= cap)
			continue;
		for (j = 0; j < rt->npolicies; j++)
			if (rt->policies[j] == rule->policy)
				rlg_problem(p, line, "%s %s: the tier's %s (%lld)"
				    " is below the %s of [route %s] (%lld): "
				    "%s request of the route by the tier's "
				    "clients could ever be admitted", b->label,
				    cfg->policies[rule->policy].name, bucket ?
				    "burst" : "limit", (long long)cap,
				    header ? "cost_max" : "cost", rt->name,
				    (long long)most, header ? "no costliest" :
				    "no");
	}
}

/*
 * What a tier says of the rest of the file: clients and policies it
 * must have, IPv6 clients narrower than the prefix a client is counted
 * by (a warning: a host of a /64 shares the /64's quota), the policies
 * it names (known, the spec fitting each), an API key client beside a
 * policy keyed by address (a warning: it never matches there).
 */
static void
tier_finish(struct rlg_parse *p, struct rlg_tier *t, struct rlg_tier_build *b)
{
	const struct rlg_config *cfg = p->cfg;
	int prefix = cfg->client.ipv6_prefix;
	bool keys = false;
	struct rlg_limit lim;
	char err[256], text[RLG_ADDR_TEXT_MAX];
	size_t i, n;

	if (b->clients_line == 0)
		rlg_problem(p, b->line, "%s has no clients: set clients = "
		    "ADDRESS, CIDR or k:HASH, ...", b->label);
	if (b->nrules == 0)
		rlg_problem(p, b->line, "%s changes no policy: add POLICY = "
		    "limit=N window=SECONDS (or exempt)", b->label);
	for (i = 0; i < t->nclients; i++) {
		const struct rlg_cidr *net = &t->clients[i].net;

		keys = keys || t->clients[i].is_key;
		if (t->clients[i].is_key || net->addr.v4 ||
		    net->prefix_len <= prefix)
			continue;
		rlg_addr_key(&net->addr, 0, text);
		rlg_problem(p, b->clients_line, "%s clients: %s/%d is "
		    "narrower than [client] ipv6_prefix (%d): the clients of "
		    "one /%d share one quota, and the tier applies to that "
		    "quota for this address's requests only; name the /%d",
		    b->label, text, net->prefix_len, prefix, prefix, prefix);
		p->problems[p->nproblems - 1].warning = true;
	}
	t->rules = b->nrules > 0 ? rlg_xcalloc(b->nrules, sizeof *t->rules) :
	    NULL;
	for (i = 0; i < b->nrules; i++) {
		const char *name = b->rules[i].policy;
		int line = b->rules[i].line;

		for (n = 0; n < cfg->npolicies; n++)
			if (strcmp(cfg->policies[n].name, name) == 0)
				break;
		if (n == cfg->npolicies) {
			const char *near = rlg_policy_suggest(cfg, name);

			rlg_problem(p, line, "%s %s: no [policy %s] (a key of a"
			    " tier is clients or a policy's name)%s%s%s",
			    b->label, name, name, near != NULL ?
			    ": did you mean \"" : "", near != NULL ? near : "",
			    near != NULL ? "\"?" : "");
			continue;
		}
		if ((cfg->policies[n].key & RLG_KEY_GLOBAL) &&
		    !b->rules[i].spec.exempt) {
			rlg_problem(p, line, "%s %s: [policy %s] is keyed "
			    "global, one bucket for every client: a tier may "
			    "exempt clients from it, not give them a limit of "
			    "their own in it", b->label, name, name);
			continue;
		}
		t->rules[t->nrules].policy = n;
		t->rules[t->nrules].spec = b->rules[i].spec;
		if (!b->rules[i].spec.exempt) {
			if (rlg_tier_limit(&cfg->policies[n],
			    &b->rules[i].spec, &lim, err, sizeof err) != 0) {
				rlg_problem(p, line, "%s %s: %s", b->label, name,
				    err);
				continue;
			}
			tier_cost_check(p, b, &t->rules[t->nrules], &lim,
			    line);
		}
		if (keys && (cfg->policies[n].key & RLG_KEY_CHOSEN) == 0) {
			rlg_problem(p, line, "%s %s: [policy %s] is keyed by "
			    "the client's address: the tier's API keys (k:) "
			    "never match it, its addresses do", b->label, name,
			    name);
			p->problems[p->nproblems - 1].warning = true;
		}
		t->nrules++;
	}
}

/*
 * After the policies and routes are final: each tier checked and its
 * rules resolved (tier_finish), and the tiers of the file go to the
 * config.
 */
void
rlg_tiers_finish(struct rlg_parse *p)
{
	size_t i, j;

	for (i = 0; i < p->ntiers; i++) {
		tier_finish(p, &p->tiers[i], &p->tbuilds[i]);
		for (j = 0; j < p->tbuilds[i].nrules; j++)
			free(p->tbuilds[i].rules[j].policy);
		free(p->tbuilds[i].rules);
	}
	p->cfg->tiers = p->tiers;
	p->cfg->ntiers = p->ntiers;
	p->tiers = NULL;
	free(p->tbuilds);
	p->tbuilds = NULL;
}
