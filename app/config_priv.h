/*
 * config_priv.h: the config module's internals, shared by its files and
 * included by nothing else: the loader's state (struct rlg_parse), which
 * the hand-written setters of the option table fill and report into, and
 * the functions one file calls in another.
 *   config.c          reading the file, the checks across keys, problems
 *   config_options.c  the option table, its setters, words and names
 *   config_tier.c     the [tier NAME] sections
 * Each function's full contract is above its definition; here, what it
 * is for and where it lives.
 */
#ifndef RLG_CONFIG_PRIV_H
#define RLG_CONFIG_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* Letters and digits, without a locale (isalnum may take more). */
#define RLG_ALNUM \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

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

/* ---- config.c: the loader -------------------------------------------- */

/* Notes one problem on line (0: the whole file). */
void rlg_problem(struct rlg_parse *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A problem with the value of key o on the current line:
 * "[section] key: ...". */
void rlg_key_problem(struct rlg_parse *p, const struct rlg_option *o,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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

/* ---- config_options.c: the option table ------------------------------- */

/* Every key of every section, rlg_noptions rows (rlg_config_options
 * hands the same rows out). */
extern const struct rlg_option rlg_options[];
extern const size_t rlg_noptions;

/* The row of the key sect/name, or rlg_noptions. */
size_t rlg_option_find(const char *sect, const char *name);

/* The setter of every row without a hand-written one. */
rlg_option_set_fn rlg_set_value;

/* Frees a list that rlg_list_split made (n items). */
void rlg_list_free(char **items, size_t n);

/* ---- config_tier.c: the tiers -------------------------------------- */

/* A [tier NAME] header; a key line in one; the checks at the end. */
void rlg_tier_section(struct rlg_parse *p, const char *name);
void rlg_tier_key(struct rlg_parse *p, const char *name, const char *value);
void rlg_tiers_finish(struct rlg_parse *p);
/* Frees n tiers and their array. */
void rlg_tiers_free(struct rlg_tier *tiers, size_t n);

#endif
