/*
 * config_priv.h: the config module's internals, shared by its files and
 * included by nothing else: the loader's state (struct rlg_parse), which
 * the hand-written setters of the option table fill and report into, and
 * the functions one file calls in another. From the top down (a file
 * calls only the ones below it):
 *   config_load.c     reading the file line by line
 *   config_check.c    the checks across keys, once the file is read
 *   config_jwt.c      the file of [client] jwt_key, read and checked
 *   config_tier.c     the [tier NAME] sections
 *   config_options.c  the option table, the names of enum values
 *   config_set.c      the setters of the table's rows
 *   config.c          defaults, freeing, problems and suggestions
 * Each function's full contract is above its definition; here, what it
 * is for and where it lives. A header without a file of its own: it is
 * below every one of them.
 */
#ifndef RLG_CONFIG_PRIV_H
#define RLG_CONFIG_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Letters and digits, without a locale (isalnum may take more). */
#define RLG_ALNUM \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* The places a key can be set: the sections outside policies and
 * routes, each policy, each route (struct rlg_parse's lines). */
#define RLG_NSCOPES (1 + RLG_POLICIES_MAX + RLG_ROUTES_MAX)
/* The longest name rlg_edit_distance compares (a typo of a key, a
 * section, a policy's name). */
#define RLG_EDIT_MAX 64

/* How messages name a section: "[store]", "[policy NAME]". */
#define RLG_LABEL_MAX  (sizeof "[policy ]" + RLG_POLICY_NAME_MAX)

/*
 * What the parse knows of one [policy NAME] or [route NAME] beyond the
 * policy or route itself: its label, its header's line (a missing key is
 * reported there) and, for a route, the policy names of its policies key,
 * resolved to indexes once every policy is known.
 */
struct rlg_build {
	char label[RLG_LABEL_MAX];
	int line;              /* the first header */
	char **names;          /* nnames policy names; none with "none" */
	size_t nnames;
};

/*
 * What the parse knows of one [tier NAME] beyond the tier: its label,
 * its header's line, the line of its clients, and its rules by policy
 * name (resolved once every policy is known).
 */
struct rlg_tier_build {
	char label[RLG_LABEL_MAX];
	int line;
	int clients_line;
	struct {
		char *policy;
		struct rlg_tier_spec spec;
		int line;
	} *rules;              /* nrules, RLG_POLICIES_MAX allocated */
	size_t nrules;
};

/* The line a key was first set on, and the line it was set to a good
 * value on; 0: not (yet). */
struct rlg_set_lines {
	int first;
	int ok;
};

/* One problem: the line it is on (0: the whole file) and its text. A
 * warning is printed like a problem but does not stop rlgate. */
struct rlg_problem {
	int line;
	size_t seq;            /* order of discovery, to keep the sort stable */
	char *msg;
	bool warning;
};

/* Everything one parse needs; the reader hands it to rlg_config_line. */
struct rlg_parse {
	const char *name;      /* file name for the messages */
	int lineno;            /* the line being read, from 1 */

	/*
	 * The section of the next key lines: a section of the rows, or NULL
	 * before any header and after a bad one (already reported: its keys
	 * are ignored, bad_sect tells). Its keys fill the struct at base;
	 * label names it in messages; scope and cur say which policy or route
	 * it is (see lines).
	 */
	const char *sect;
	bool bad_sect;
	void *base;
	char label[RLG_LABEL_MAX];
	size_t scope;
	size_t cur;
	/*
	 * Where each key was set, per scope: scope 0 holds the keys outside
	 * policies and routes, scope 1 + i those of pols[i], scope 1 +
	 * RLG_POLICIES_MAX + i those of routes[i]. Indexed scope * rlg_noptions
	 * + the key's row in rlg_options.
	 */
	struct rlg_set_lines *lines;

	struct rlg_config *cfg;    /* being built over the defaults */
	/* The [policy NAME] sections so far, in file order; they replace the
	 * built-in "default" at the end if there is at least one. */
	struct rlg_policy *pols;           /* RLG_POLICIES_MAX allocated */
	struct rlg_build *builds;          /* one per pols entry */
	size_t npols;
	bool too_many;         /* the cap on policies has been reported */
	/* The [route NAME] sections so far, in file order. */
	struct rlg_route *routes;          /* RLG_ROUTES_MAX allocated */
	struct rlg_build *rbuilds;         /* one per routes entry */
	size_t nroutes;
	bool too_many_routes;  /* the cap on routes has been reported */
	/* The [tier NAME] sections so far, in file order (sect "tier"). */
	struct rlg_tier *tiers;            /* RLG_TIERS_MAX allocated */
	struct rlg_tier_build *tbuilds;    /* one per tiers entry */
	size_t ntiers;
	bool too_many_tiers;
	bool backend_bad;      /* [store] backend was set to an unknown word */

	struct rlg_problem *problems;
	size_t nproblems;
	size_t capproblems;
};

/* ---- config.c: defaults, freeing, problems ------------------------- */

/* The built-in defaults before anything is resolved (commit = auto):
 * what the loader reads a file over. */
struct rlg_config *rlg_config_base(void);

/* A policy named name (copied) with the built-in values; burst and
 * new_keys are the caller's. */
void rlg_policy_init(struct rlg_policy *pol, const char *name);

/* Frees what a policy, a route owns, not the policy or route itself. */
void rlg_policy_free_fields(struct rlg_policy *pol);
void rlg_route_free_fields(struct rlg_route *r);

/* Frees a list that rlg_list_split made (n items). */
void rlg_list_free(char **items, size_t n);

/* Frees n tiers and their array. */
void rlg_tiers_free(struct rlg_tier *tiers, size_t n);

/*
 * What the config knows of an algorithm is its descriptor (limiter.h):
 * pol's row (never NULL), and the names of the algorithms with a burst
 * written into buf for a message ("token_bucket"), buf returned.
 */
const struct rlg_algorithm_desc *rlg_policy_alg(const struct rlg_policy *pol);
const char *rlg_burst_algorithms(char *buf, size_t size);
const char *rlg_algorithms_that(char *buf, size_t size, bool smooths);

/* The policies that keep state in the table: each, and each bound on
 * new keys; at least 1. */
int64_t rlg_table_policies(const struct rlg_config *cfg);

/* Notes one problem on line (0: the whole file). */
void rlg_problem(struct rlg_parse *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A problem with the value of key o on the current line:
 * "[section] key: ...". */
void rlg_key_problem(struct rlg_parse *p, const struct rlg_option *o,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Whether known is close enough to typed to be offered ("did you
 * mean"), and closer than *best (then *best is its distance).
 */
bool rlg_near(const char *typed, const char *known, size_t *best);

/*
 * What an operator may have meant by name, a policy name that names no
 * policy: the closest name of cfg's policies (rlg_edit_distance within
 * a small threshold), or NULL when none is close.
 */
const char *rlg_policy_suggest(const struct rlg_config *cfg,
    const char *name);

/*
 * A [policy NAME], [route NAME] or [tier NAME] (label) seen again on the
 * current line, first on line first: a warning (its keys merge).
 */
void rlg_section_again(struct rlg_parse *p, const char *label, int first);

/* ---- config_set.c: the setters of the rows ---------------------------- */

/* The setter of every row without a hand-written one. */
rlg_option_set_fn rlg_set_value;

/* The hand-written setters the rows name. */
rlg_option_set_fn rlg_set_cidrs, rlg_set_backend, rlg_set_url,
    rlg_set_trusted_proxies, rlg_set_algorithm, rlg_set_key,
    rlg_set_route_path, rlg_set_route_methods, rlg_set_route_policies,
    rlg_set_route_cost, rlg_set_admin_allow, rlg_set_admin_prefix,
    rlg_set_status;

/* The name of value among words (its first word), or NULL. */
const char *rlg_word_name(const struct rlg_word *words, int value);

/*
 * Splits value at commas into trimmed items (free with rlg_list_free);
 * reports an empty item, or more than max of them, and returns false.
 */
bool rlg_list_split(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, size_t max, const char *what, char ***items,
    size_t *n);

/* ---- config_options.c: the option table ------------------------------- */

/* Every key of every section, rlg_noptions rows (rlg_config_options
 * hands the same rows out). */
extern const struct rlg_option rlg_options[];
extern const size_t rlg_noptions;

/* The row of the key sect/name, or rlg_noptions. */
size_t rlg_option_find(const char *sect, const char *name);

/* ---- config_tier.c: the tiers -------------------------------------- */

/* A [tier NAME] header; a key line in one; the checks at the end. */
void rlg_tier_section(struct rlg_parse *p, const char *name);
void rlg_tier_key(struct rlg_parse *p, const char *name, const char *value);
void rlg_tiers_finish(struct rlg_parse *p);

/* ---- config_check.c: the checks across keys --------------------------- */

/*
 * After the whole file: the policies (burst, algorithm caps, key_secret,
 * the bounds on new keys, the file's in place of the built-in one), the
 * routes (their policies resolved, costs), the [store] keys and commit.
 */
void rlg_policies_finish(struct rlg_parse *p);
void rlg_routes_finish(struct rlg_parse *p);
void rlg_store_finish(struct rlg_parse *p);

/* ---- config_jwt.c: the key that verifies bearer tokens ----------------- */

/* After the whole file: [client] jwt_key read into the config and checked
 * against jwt_algorithm (the file's problems at the key's line). */
void rlg_jwt_finish(struct rlg_parse *p);

/* Where the key sect/name (a row that is there) was set, in scope. */
struct rlg_set_lines *rlg_lines(struct rlg_parse *p, size_t scope,
    const char *sect, const char *name);

/* A policy name that names no policy, at line: "LABEL policies: no
 * [policy NAME]", and the closest name if one is close. */
void rlg_no_policy(struct rlg_parse *p, int line, const char *label,
    const char *name);

#endif
