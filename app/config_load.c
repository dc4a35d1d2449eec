/*
 * config_load.c: the INI configuration, read line by line by ini.c into
 * the plain structs of config.h, validated key by key over the built-in
 * defaults. Every problem is collected with its line number and all are
 * printed at the end, in line order, so an operator fixes a config in one
 * pass.
 *
 * Policies are built in file order, one per distinct [policy NAME], and
 * routes likewise, one per distinct [route NAME]; a repeated section merges
 * into the first, as every section does (a named one with a warning that
 * names both lines: a copied section someone forgot to rename). Checks
 * that span keys or sections run once the whole file is read, since the
 * keys may come in any order (config_check.c, and config_tier.c for the
 * tiers).
 *
 * The top of the config module: it calls the option table
 * (config_options.c), whose setters fill the structs, the checks and the
 * tiers; the loader's state (struct rlg_parse) is shared with them through
 * config_priv.h.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "config_priv.h"
#include "ini.h"
#include "util.h"

static int rlg_config_parse(const char *name, FILE *fp, const char *text,
    FILE *errs, struct rlg_config **out);
static void rlg_config_line(void *ctx, const struct rlg_ini_line *l);
static void rlg_section_line(struct rlg_parse *p, const char *inner);
static void rlg_key_line(struct rlg_parse *p, const char *name,
    const char *value);
static bool rlg_sect_is(const char *inner, const char *word,
    const char **rest);
static void rlg_named_section(struct rlg_parse *p, const char *kind,
    const char *name);
static bool rlg_section_name_ok(struct rlg_parse *p, const char *kind,
    const char *name);
static int rlg_problem_cmp(const void *a, const void *b);
static void rlg_unknown_key(struct rlg_parse *p, const char *name);
static void rlg_unknown_section(struct rlg_parse *p, const char *inner);
static const char *rlg_section_usage(const char *sect);

/* The sections without a name, and where in struct rlg_config the struct
 * their keys fill is. */
static const struct {
	const char *name;
	size_t offset;
} rlg_sections[] = {
	{ "store", offsetof(struct rlg_config, store) },
	{ "headers", 0 },
	{ "response", 0 },
	{ "client", offsetof(struct rlg_config, client) },
	{ "log", 0 },
	{ "admin", offsetof(struct rlg_config, admin) },
	{ "fastcgi", 0 },
};

int
rlg_config_load(const char *path, FILE *errs, struct rlg_config **out)
{
	struct stat st;
	FILE *fp;
	int n;

	assert(path != NULL && out != NULL);
	*out = NULL;
	fp = fopen(path, "r");
	if (fp == NULL) {
		if (errs != NULL)
			fprintf(errs, "%s: cannot open: %s\n", path,
			    strerror(errno));
		return 1;
	}
	/*
	 * A config anyone may write is a limit anyone may lift: warn (it is
	 * not a problem that stops rlgate; the operator decides).
	 */
	if (errs != NULL && fstat(fileno(fp), &st) == 0 &&
	    (st.st_mode & S_IWOTH) != 0)
		fprintf(errs, "%s: warning: the file is world-writable: anyone "
		    "on this machine can change the limits (chmod o-w %s)\n",
		    path, path);
	n = rlg_config_parse(path, fp, NULL, errs, out);
	fclose(fp);
	return n;
}

int
rlg_config_load_string(const char *text, const char *name, FILE *errs,
    struct rlg_config **out)
{
	assert(text != NULL && out != NULL);
	if (name == NULL)
		name = "<string>";
	return rlg_config_parse(name, NULL, text, errs, out);
}

/*
 * The one parse behind both loaders: reads fp, or text when fp is NULL,
 * over the defaults. Returns 0 and the config in *out, or the number of
 * problems (printed to errs) and *out NULL.
 */
static int
rlg_config_parse(const char *name, FILE *fp, const char *text, FILE *errs,
    struct rlg_config **out)
{
	struct rlg_parse p;
	size_t i;
	int n, err;

	*out = NULL;
	memset(&p, 0, sizeof p);
	p.name = name;
	p.lines = rlg_xcalloc(RLG_NSCOPES * rlg_noptions, sizeof *p.lines);
	p.cfg = rlg_config_base();
	p.pols = rlg_xcalloc(RLG_POLICIES_MAX, sizeof *p.pols);
	p.builds = rlg_xcalloc(RLG_POLICIES_MAX, sizeof *p.builds);
	p.routes = rlg_xcalloc(RLG_ROUTES_MAX, sizeof *p.routes);
	p.rbuilds = rlg_xcalloc(RLG_ROUTES_MAX, sizeof *p.rbuilds);
	p.tiers = rlg_xcalloc(RLG_TIERS_MAX, sizeof *p.tiers);
	p.tbuilds = rlg_xcalloc(RLG_TIERS_MAX, sizeof *p.tbuilds);

	err = rlg_ini_read(fp, text, RLG_CONFIG_LINE_MAX, rlg_config_line, &p);
	if (err != 0)
		rlg_problem(&p, 0, "cannot read: %s", strerror(err));
	rlg_policies_finish(&p);
	rlg_jwt_finish(&p);
	rlg_routes_finish(&p);
	rlg_tiers_finish(&p);
	rlg_store_finish(&p);

	n = 0;
	if (p.nproblems > 1)
		qsort(p.problems, p.nproblems, sizeof *p.problems,
		    rlg_problem_cmp);
	for (i = 0; i < p.nproblems; i++) {
		const char *w = p.problems[i].warning ? "warning: " : "";

		if (!p.problems[i].warning && n < INT_MAX)
			n++;
		if (errs != NULL && p.problems[i].line > 0)
			fprintf(errs, "%s:%d: %s%s\n", p.name,
			    p.problems[i].line, w, p.problems[i].msg);
		else if (errs != NULL)
			fprintf(errs, "%s: %s%s\n", p.name, w,
			    p.problems[i].msg);
		free(p.problems[i].msg);
	}
	free(p.problems);
	free(p.lines);

	if (n > 0) {
		rlg_config_free(p.cfg);
		return n;
	}
	p.cfg->source = rlg_xstrdup(name);
	*out = p.cfg;
	return 0;
}

/* One line that is not blank nor a comment, from the reader. */
static void
rlg_config_line(void *ctx, const struct rlg_ini_line *l)
{
	struct rlg_parse *p = ctx;

	p->lineno = l->lineno;
	switch (l->kind) {
	case RLG_INI_SECTION:
		rlg_section_line(p, l->name);
		break;
	case RLG_INI_KEY:
		rlg_key_line(p, l->name, l->value);
		break;
	case RLG_INI_BAD_SECTION:
		p->sect = NULL;
		p->bad_sect = true;
		/* FALLTHROUGH */
	case RLG_INI_BAD_LINE:
		rlg_problem(p, l->lineno, "%s", l->error);
		break;
	}
}

/*
 * One "key = value" line of the current section: the key looked up in
 * the rows and checked (known, set once, not empty), then its value by
 * the row's setter. The line of a good value is kept for the checks at
 * the end.
 */
static void
rlg_key_line(struct rlg_parse *p, const char *name, const char *value)
{
	const struct rlg_option *o;
	struct rlg_set_lines *lines;
	bool ok;
	size_t i;

	if (p->sect == NULL) {
		if (!p->bad_sect)
			rlg_problem(p, p->lineno, "key \"%s\" before any "
			    "[section]", name);
		return;
	}
	if (strcmp(p->sect, "tier") == 0) {
		rlg_tier_key(p, name, value);
		return;
	}
	i = rlg_option_find(p->sect, name);
	if (i == rlg_noptions) {
		rlg_unknown_key(p, name);
		return;
	}
	o = &rlg_options[i];
	lines = &p->lines[p->scope * rlg_noptions + i];
	if (lines->first != 0) {
		rlg_key_problem(p, o, "set twice (first on line %d)",
		    lines->first);
		return;
	}
	lines->first = p->lineno;
	if (*value == '\0' && !o->empty_ok) {
		rlg_key_problem(p, o, "must not be empty");
		return;
	}
	ok = o->set != NULL ? o->set(p, o, value, p->base) :
	    rlg_set_value(p, o, value, p->base);
	if (ok)
		lines->ok = p->lineno;
}

/*
 * A "[section]" header, inner the name between the brackets: the section
 * the next keys go to, or why there is none.
 */
static void
rlg_section_line(struct rlg_parse *p, const char *inner)
{
	const char *pname;
	size_t i;

	p->sect = NULL;
	p->bad_sect = true;
	for (i = 0; i < sizeof rlg_sections / sizeof rlg_sections[0]; i++) {
		if (strcmp(inner, rlg_sections[i].name) == 0) {
			p->sect = rlg_sections[i].name;
			p->base = (char *)p->cfg + rlg_sections[i].offset;
			p->scope = 0;
			snprintf(p->label, sizeof p->label, "[%s]", inner);
			return;
		}
	}
	if (rlg_sect_is(inner, "policy", &pname) ||
	    rlg_sect_is(inner, "route", &pname)) {
		if (*pname == '\0')
			rlg_problem(p, p->lineno, "section [%s] has no name "
			    "(expected [%s NAME])", inner, inner);
		else
			rlg_named_section(p, *inner == 'p' ? "policy" :
			    "route", pname);
		return;
	}
	if (rlg_sect_is(inner, "tier", &pname)) {
		if (*pname == '\0')
			rlg_problem(p, p->lineno, "section [%s] has no name "
			    "(expected [tier NAME])", inner);
		else
			rlg_tier_section(p, pname);
		return;
	}
	rlg_unknown_section(p, inner);
}

/*
 * "[inner]" names no section: said, with the closest section if one is
 * close (rlg_near, on the first word: "[polciy api]" -> "[policy api]").
 */
static void
rlg_unknown_section(struct rlg_parse *p, const char *inner)
{
	static const char *const words[] = {
		"store", "headers", "response", "client", "log", "admin",
		"fastcgi", "policy", "route", "tier",
	};
	const char *near = NULL, *rest;
	char word[RLG_EDIT_MAX + 1];
	size_t i, len, best = SIZE_MAX;

	len = strcspn(inner, " \t");
	for (rest = inner + len; isspace((unsigned char)*rest);)
		rest++;
	if (len <= RLG_EDIT_MAX) {
		memcpy(word, inner, len);
		word[len] = '\0';
		for (i = 0; i < sizeof words / sizeof words[0]; i++)
			if (rlg_near(word, words[i], &best))
				near = words[i];
	}
	if (near == NULL)
		rlg_problem(p, p->lineno, "unknown section [%s]", inner);
	else if (strcmp(near, "policy") == 0 ||
	    strcmp(near, "route") == 0 || strcmp(near, "tier") == 0)
		rlg_problem(p, p->lineno, "unknown section [%s]: did you mean "
		    "[%s %s]?", inner, near, *rest != '\0' ? rest : "NAME");
	else
		rlg_problem(p, p->lineno, "unknown section [%s]: did you mean "
		    "[%s]?", inner, near);
}

/*
 * Whether inner is word alone or word, whitespace and more ("policy x");
 * *rest is then what follows, without leading whitespace.
 */
static bool
rlg_sect_is(const char *inner, const char *word, const char **rest)
{
	size_t n = strlen(word);

	if (strncmp(inner, word, n) != 0 ||
	    (inner[n] != '\0' && !isspace((unsigned char)inner[n])))
		return false;
	for (inner += n; isspace((unsigned char)*inner);)
		inner++;
	*rest = inner;
	return true;
}

/*
 * A "[policy NAME]" or "[route NAME]" header (kind says which) with a
 * non-empty name: the policy or route of that name, a new one (with the
 * defaults) if it is the first such section, or a reported problem (a bad
 * name, one too many: reported once, as every later one is too).
 */
static void
rlg_named_section(struct rlg_parse *p, const char *kind, const char *name)
{
	bool policy = strcmp(kind, "policy") == 0;
	struct rlg_build *b = policy ? p->builds : p->rbuilds;
	bool *too_many = policy ? &p->too_many : &p->too_many_routes;
	size_t i, n = policy ? p->npols : p->nroutes, len = strlen(name);
	int max = policy ? RLG_POLICIES_MAX : RLG_ROUTES_MAX;
	char label[RLG_LABEL_MAX];

	if (!rlg_section_name_ok(p, kind, name))
		return;
	if (policy && len >= sizeof RLG_NEW_KEYS_SUFFIX - 1 &&
	    strcmp(name + len - (sizeof RLG_NEW_KEYS_SUFFIX - 1),
	    RLG_NEW_KEYS_SUFFIX) == 0) {
		rlg_problem(p, p->lineno, "bad policy name \"%s\": names "
		    "ending in \"%s\" are rlgate's own (the bound on new "
		    "keys of a policy)", name, RLG_NEW_KEYS_SUFFIX);
		return;
	}
	snprintf(label, sizeof label, "[%s %s]", kind, name);
	for (i = 0; i < n && strcmp(b[i].label, label) != 0; i++)
		;
	if (i == (size_t)max) {
		if (!*too_many)
			rlg_problem(p, p->lineno, "too many %s: %s would be "
			    "number %d, at most %d are allowed", policy ?
			    "policies" : "routes", label, max + 1, max);
		*too_many = true;
		return;
	}
	if (i == n && policy) {
		rlg_policy_init(&p->pols[i], name);
		/* At the end: the limit, unless set. */
		p->pols[i].lim.burst = 0;
		p->pols[i].new_keys = RLG_DEFAULT_NEW_KEYS;
		p->npols++;
	} else if (i == n) {
		p->routes[i].name = rlg_xstrdup(name);
		p->routes[i].cost = 1;
		p->nroutes++;
	}
	if (i == n) {
		memcpy(b[i].label, label, sizeof label);
		b[i].line = p->lineno;
	} else {
		rlg_section_again(p, label, b[i].line);
	}
	p->sect = policy ? "policy" : "route";
	p->cur = i;
	p->scope = 1 + i + (policy ? 0 : RLG_POLICIES_MAX);
	p->base = policy ? (void *)&p->pols[i] : (void *)&p->routes[i];
	memcpy(p->label, label, sizeof label);
}

/*
 * Whether name (not empty) may name a policy or a route (kind says which,
 * for the message): at most RLG_POLICY_NAME_MAX bytes of [A-Za-z0-9_.-],
 * as it goes into the database and the logs unquoted. Reports it if not.
 * No locale: isalnum would take more.
 */
static bool
rlg_section_name_ok(struct rlg_parse *p, const char *kind, const char *name)
{
	size_t len = strspn(name, RLG_ALNUM "_.-");

	if (name[len] != '\0') {
		rlg_problem(p, p->lineno, "bad %s name \"%s\": only A-Z a-z "
		    "0-9 _ . - are allowed", kind, name);
		return false;
	}
	if (len > RLG_POLICY_NAME_MAX) {
		rlg_problem(p, p->lineno, "bad %s name \"%s\": at most %d "
		    "bytes (got %zu)", kind, name, RLG_POLICY_NAME_MAX, len);
		return false;
	}
	return true;
}

/*
 * A key the current section does not have, on the current line. A key
 * of other sections says where it belongs ("[store] unknown key
 * \"limit\": it belongs in [policy NAME]"); else the closest key of this
 * section, or of another one (named), if one is close (rlg_near):
 * "did you mean \"limit\"?"; else nothing more.
 */
static void
rlg_unknown_key(struct rlg_parse *p, const char *name)
{
	char where[128];
	const char *near = NULL, *sect;
	size_t i, used = 0, best = SIZE_MAX, other = SIZE_MAX;
	size_t near_other = rlg_noptions;	/* its row, if one is close */

	where[0] = '\0';
	for (i = 0; i < rlg_noptions; i++) {
		sect = rlg_options[i].section;
		if (strcmp(sect, p->sect) == 0) {
			if (rlg_near(name, rlg_options[i].name, &best))
				near = rlg_options[i].name;
			continue;
		}
		if (strcmp(rlg_options[i].name, name) == 0) {
			/* a section has a key once: no section twice */
			if (used < sizeof where)
				used += (size_t)snprintf(where + used,
				    sizeof where - used, "%s%s", used > 0 ?
				    " or " : "", rlg_section_usage(sect));
		} else if (rlg_near(name, rlg_options[i].name, &other)) {
			near_other = i;
		}
	}
	if (where[0] != '\0')
		rlg_problem(p, p->lineno, "%s unknown key \"%s\": it belongs "
		    "in %s", p->label, name, where);
	else if (near != NULL)
		rlg_problem(p, p->lineno, "%s unknown key \"%s\": did you mean "
		    "\"%s\"?", p->label, name, near);
	else if (near_other < rlg_noptions)
		rlg_problem(p, p->lineno, "%s unknown key \"%s\": did you mean "
		    "\"%s\" (a key of %s)?", p->label, name,
		    rlg_options[near_other].name,
		    rlg_section_usage(rlg_options[near_other].section));
	else
		rlg_problem(p, p->lineno, "%s unknown key \"%s\"", p->label,
		    name);
}

/* How a section of the rows is written: "[store]", "[policy NAME]". */
static const char *
rlg_section_usage(const char *sect)
{
	static const char *const named[][2] = {
		{ "store", "[store]" }, { "headers", "[headers]" },
		{ "response", "[response]" }, { "client", "[client]" },
		{ "log", "[log]" }, { "admin", "[admin]" },
		{ "fastcgi", "[fastcgi]" }, { "policy", "[policy NAME]" },
		{ "route", "[route NAME]" },
	};
	size_t i;

	for (i = 0; i < sizeof named / sizeof named[0]; i++)
		if (strcmp(named[i][0], sect) == 0)
			return named[i][1];
	return sect;
}

/* By line, then in the order found. */
static int
rlg_problem_cmp(const void *a, const void *b)
{
	const struct rlg_problem *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return 0;
}
