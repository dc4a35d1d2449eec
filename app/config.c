/*
 * config.c: the INI configuration, read line by line by ini.c into the
 * plain structs of config.h, validated key by key over the built-in
 * defaults. Every problem is collected with its line number and all are
 * printed at the end, in line order, so an operator fixes a config in one
 * pass.
 *
 * Policies are built in file order, one per distinct [policy NAME], and
 * routes likewise, one per distinct [route NAME]; a repeated section merges
 * into the first, as every section does (a named one with a warning that
 * names both lines: a copied section someone forgot to rename). Checks
 * that span keys or sections (burst needs token_bucket, sliding_log caps
 * the limit, a header key needs [client] key_secret, a route names
 * policies that may come later in the file, a route's cost (or cost_max)
 * fits each of its policies, the [store] keys that belong to one
 * backend) run once the whole file is read, since the keys may come in
 * any order; their problems carry the line of the key at fault (or of
 * the section header, for a key that is missing), so the sort puts them
 * in place.
 *
 * The option table, its generic setters and the names of enum values are
 * config_options.c, which shares the loader's state (struct rlg_parse)
 * with this file through config_priv.h; [store] url is parsed by the
 * redis_url module.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_priv.h"
#include "ini.h"
#include "path.h"
#include "util.h"

#define RLG_NSCOPES (1 + RLG_POLICIES_MAX + RLG_ROUTES_MAX)
/* The longest name rlg_edit_distance compares (a typo of a key, a
 * section, a policy's name). */
#define RLG_EDIT_MAX 64
/* The instant rlg_burst_above asks the limiter about (any will do). */
#define RLG_BURST_PROBE_MS 1700000000000LL

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
static void rlg_policy_init(struct rlg_policy *pol, const char *name);
static void rlg_policies_finish(struct rlg_parse *p);
static void rlg_new_keys_policy(struct rlg_parse *p, struct rlg_policy *pol,
    size_t i);
static void rlg_burst_above(struct rlg_parse *p,
    const struct rlg_policy *pol, const char *label, int line);
static void rlg_store_finish(struct rlg_parse *p);
static void rlg_table_finish(struct rlg_parse *p);
static int64_t rlg_table_policies(const struct rlg_config *cfg);
static struct rlg_config *rlg_config_base(void);
static void rlg_routes_finish(struct rlg_parse *p);
static void rlg_route_cost_check(struct rlg_parse *p,
    const struct rlg_route *r, const struct rlg_build *b, size_t scope);
static void rlg_route_match_path(struct rlg_parse *p, struct rlg_route *r,
    const struct rlg_build *b, size_t scope);
static void rlg_policy_free_fields(struct rlg_policy *pol);
static void rlg_route_free_fields(struct rlg_route *r);
static struct rlg_set_lines *rlg_lines(struct rlg_parse *p, size_t scope,
    const char *sect, const char *name);
static char *rlg_vformat(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
static int rlg_problem_cmp(const void *a, const void *b);
static void rlg_unknown_key(struct rlg_parse *p, const char *name);
static void rlg_unknown_section(struct rlg_parse *p, const char *inner);
static void rlg_no_policy(struct rlg_parse *p, int line, const char *label,
    const char *name);
static size_t rlg_edit_distance(const char *a, const char *b);
static bool rlg_near(const char *typed, const char *known, size_t *best);
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

struct rlg_config *
rlg_config_defaults(void)
{
	struct rlg_config *cfg = rlg_config_base();
	struct rlg_sqlite_config *sq = &cfg->store.sqlite;
	char why[256];

	/* commit = auto, resolved as the loader does for an empty file. */
	sq->commit_auto = true;
	if (rlg_config_why_each(cfg, why, sizeof why)) {
		sq->commit = RLG_COMMIT_EACH;
	} else {
		sq->commit = RLG_COMMIT_BEHIND;
		sq->table_entries = sq->max_clients * rlg_table_policies(cfg);
	}
	return cfg;
}

/*
 * The built-in defaults before anything is resolved (commit = auto): what
 * the loader reads a file over.
 */
static struct rlg_config *
rlg_config_base(void)
{
	struct rlg_config *cfg;

	/*
	 * All zero is the first word of every enum (on_error = closed,
	 * backend = sqlite, clock = redis, synchronous = normal, group_commit
	 * = auto, commit = auto, style = draft03, errors = json),
	 * report_exempt = no and no lists; the rows' defaults are held to
	 * these by the tests.
	 */
	cfg = rlg_xcalloc(1, sizeof *cfg);
	cfg->store.sqlite.path = rlg_xstrdup(RLG_DEFAULT_DB_PATH);
	cfg->store.sqlite.busy_timeout_ms = RLG_DEFAULT_BUSY_TIMEOUT_MS;
	cfg->store.sqlite.max_clients = RLG_DEFAULT_MAX_CLIENTS;
	cfg->store.sqlite.flush_ms = RLG_DEFAULT_FLUSH_MS;
	cfg->store.rejection_cache = RLG_DEFAULT_REJECTION_CACHE;
	cfg->store.max_overrides = RLG_DEFAULT_MAX_OVERRIDES;
	cfg->store.redis.port = RLG_DEFAULT_REDIS_PORT;
	cfg->store.redis.connect_timeout_ms = RLG_DEFAULT_REDIS_TIMEOUT_MS;
	cfg->store.redis.timeout_ms = RLG_DEFAULT_REDIS_TIMEOUT_MS;
	cfg->client.ipv6_prefix = RLG_DEFAULT_IPV6_PREFIX;
	cfg->reject_status = 429;
	cfg->log_level = RLG_LOG_WARN;
	cfg->log_format = RLG_LOG_TEXT;
	cfg->read_timeout_ms = RLG_DEFAULT_READ_TIMEOUT_MS;
	cfg->admin.prefix = rlg_xstrdup(RLG_DEFAULT_ADMIN_PREFIX);
	cfg->admin.nallow = 2;
	cfg->admin.allow = rlg_xcalloc(cfg->admin.nallow,
	    sizeof *cfg->admin.allow);
	if (rlg_cidr_parse("127.0.0.1/32", &cfg->admin.allow[0]) != 0 ||
	    rlg_cidr_parse("::1/128", &cfg->admin.allow[1]) != 0)
		abort();

	cfg->npolicies = 1;
	cfg->policies = rlg_xcalloc(cfg->npolicies, sizeof *cfg->policies);
	rlg_policy_init(&cfg->policies[0], "default");
	cfg->policies[0].lim.burst = cfg->policies[0].lim.limit;

	/* No routes: every request gets every policy. */
	cfg->ndefault = 1;
	cfg->default_policies = rlg_xcalloc(cfg->ndefault,
	    sizeof *cfg->default_policies);
	return cfg;
}

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

const char *
rlg_config_pick(const char *opt)
{
	const char *env;

	if (opt != NULL)
		return opt;
	env = getenv("RLGATE_CONFIG");
	if (env != NULL && *env != '\0')
		return env;
	if (access(RLG_DEFAULT_CONFIG_PATH, F_OK) == 0)
		return RLG_DEFAULT_CONFIG_PATH;
	return NULL;
}

void
rlg_config_free(struct rlg_config *cfg)
{
	size_t i;

	if (cfg == NULL)
		return;
	free(cfg->source);
	free(cfg->store.sqlite.path);
	rlg_redis_config_free(&cfg->store.redis);
	for (i = 0; i < cfg->npolicies; i++)
		rlg_policy_free_fields(&cfg->policies[i]);
	free(cfg->policies);
	for (i = 0; i < cfg->nroutes; i++)
		rlg_route_free_fields(&cfg->routes[i]);
	free(cfg->routes);
	free(cfg->default_policies);
	rlg_tiers_free(cfg->tiers, cfg->ntiers);
	free(cfg->client.trusted_proxies);
	free(cfg->client.exempt);
	free(cfg->client.key_secret);
	free(cfg->admin.allow);
	free(cfg->admin.prefix);
	free(cfg);
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

void
rlg_section_again(struct rlg_parse *p, const char *label, int first)
{
	rlg_problem(p, p->lineno, "%s again (first on line %d): its keys merge "
	    "into that one; a copy meant as another one needs a name of its "
	    "own", label, first);
	p->problems[p->nproblems - 1].warning = true;
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

/* A policy named name (copied) with the built-in values; burst and
 * new_keys are the caller's. */
static void
rlg_policy_init(struct rlg_policy *pol, const char *name)
{
	pol->name = rlg_xstrdup(name);
	pol->lim.algorithm = RLG_ALG_FIXED_WINDOW;
	pol->lim.limit = RLG_DEFAULT_LIMIT;
	pol->lim.window_ms = (int64_t)RLG_DEFAULT_WINDOW_S * 1000;
	pol->key = RLG_KEY_IP;
	pol->mode = RLG_MODE_ENFORCE;
}

/*
 * After the whole file: the checks that span keys of one policy, the
 * burst default, the key_secret a header key needs, and the policies of
 * the file in place of the built-in one. A policy whose algorithm was bad
 * (already reported) is not checked further: its algorithm is unknown.
 */
static void
rlg_policies_finish(struct rlg_parse *p)
{
	const struct rlg_set_lines *alg, *limit, *burst, *key;
	struct rlg_policy *pol;
	const char *label;
	size_t i;
	bool secret_set;

	/* A key_secret that was set but bad is reported for itself. */
	secret_set = rlg_lines(p, 0, "client", "key_secret")->first != 0;
	for (i = 0; i < p->npols; i++) {
		pol = &p->pols[i];
		label = p->builds[i].label;
		alg = rlg_lines(p, 1 + i, "policy", "algorithm");
		limit = rlg_lines(p, 1 + i, "policy", "limit");
		burst = rlg_lines(p, 1 + i, "policy", "burst");
		key = rlg_lines(p, 1 + i, "policy", "key");
		if (burst->ok == 0)
			pol->lim.burst = pol->lim.limit;
		if (key->ok != 0 && (pol->key & RLG_KEY_HEADER) != 0 &&
		    !secret_set)
			rlg_problem(p, key->ok, "%s key: header keys are "
			    "stored hashed: set [client] key_secret (at least "
			    "%d random bytes, e.g. openssl rand -hex 32)",
			    label, RLG_KEY_SECRET_MIN);
		if (alg->ok == 0 && alg->first != 0)
			continue;
		if (burst->ok != 0 &&
		    pol->lim.algorithm != RLG_ALG_TOKEN_BUCKET)
			rlg_problem(p, burst->ok, "%s burst: applies only "
			    "to algorithm = token_bucket", label);
		else if (burst->ok != 0)
			rlg_burst_above(p, pol, label, burst->ok);
		if (limit->ok != 0 &&
		    pol->lim.algorithm == RLG_ALG_SLIDING_LOG &&
		    pol->lim.limit > RLG_SLIDING_LOG_LIMIT_MAX)
			rlg_problem(p, limit->ok, "%s limit: sliding_log "
			    "keeps one row per request: at most %lld "
			    "(got \"%lld\")", label,
			    (long long)RLG_SLIDING_LOG_LIMIT_MAX,
			    (long long)pol->lim.limit);
	}
	for (i = 0; i < p->npols; i++)
		rlg_new_keys_policy(p, &p->pols[i], i);
	if (p->npols > 0) {
		for (i = 0; i < p->cfg->npolicies; i++)
			rlg_policy_free_fields(&p->cfg->policies[i]);
		free(p->cfg->policies);
		p->cfg->policies = rlg_xcalloc(p->npols,
		    sizeof *p->cfg->policies);
		memcpy(p->cfg->policies, p->pols, p->npols * sizeof *p->pols);
		p->cfg->npolicies = p->npols;
	}
	free(p->pols);
	free(p->builds);
}

/*
 * A token bucket holds burst requests, but the headers show its limit
 * (RateLimit-Limit, X-RateLimit-Limit, the ietf q=): a new client's
 * first request leaves burst - 1 (fewer when the limiter caps a huge
 * tolerance), so with a burst above limit + 1 the answer shows more
 * remaining than the limit, which clients read as a bug. Allowed (the
 * bucket does what it says), said as a warning at burst's line with
 * what the client will see: the limiter's own answer to a new client's
 * first request (pure: any now will do).
 */
static void
rlg_burst_above(struct rlg_parse *p, const struct rlg_policy *pol,
    const char *label, int line)
{
	struct rlg_state in, out;
	struct rlg_decision d;

	memset(&in, 0, sizeof in);
	if (rlg_limiter_token_bucket(&pol->lim, &in, RLG_BURST_PROBE_MS, 1,
	    &out, &d) != RLG_OK || d.remaining <= d.limit)
		return;
	rlg_problem(p, line, "%s burst: %lld is above the limit (%lld): a new "
	    "client's first request is answered RateLimit-Limit: %lld and "
	    "RateLimit-Remaining: %lld (the bucket holds burst, the headers "
	    "show the limit), more left than the limit, which surprises "
	    "clients; a burst up to %lld keeps Remaining within Limit", label,
	    (long long)pol->lim.burst, (long long)pol->lim.limit,
	    (long long)d.limit, (long long)d.remaining,
	    (long long)pol->lim.limit + 1);
	p->problems[p->nproblems - 1].warning = true;
}

/*
 * The bound on new keys of pols[i], a policy keyed by a header: a fixed
 * window of new_keys per the policy's window, counted per client address
 * under its own name, NAME.new_keys (the store charges it only for a key
 * it holds no live state for; see struct rlg_store_item). Without a
 * header key there is nothing to mint: the key is reported if set,
 * ignored if not.
 */
static void
rlg_new_keys_policy(struct rlg_parse *p, struct rlg_policy *pol, size_t i)
{
	const char *label = p->builds[i].label;
	struct rlg_policy *charge;
	int new_keys_line, key_line;
	int64_t max;
	size_t len;

	new_keys_line = rlg_lines(p, 1 + i, "policy", "new_keys_per_ip")->ok;
	key_line = rlg_lines(p, 1 + i, "policy", "key")->ok;
	if ((pol->key & RLG_KEY_HEADER) == 0) {
		if (new_keys_line != 0)
			rlg_problem(p, new_keys_line, "%s new_keys_per_ip: "
			    "applies only to a key with header:NAME", label);
		return;
	}
	/*
	 * One address may then hold every row the store allows: say so
	 * (the bound's window may be short, so this is no error).
	 */
	max = p->cfg->store.sqlite.max_clients;
	if (p->cfg->store.backend == RLG_BACKEND_SQLITE && max > 0 &&
	    (pol->new_keys == 0 || pol->new_keys >= max)) {
		rlg_problem(p, new_keys_line != 0 ? new_keys_line : key_line,
		    "%s new_keys_per_ip: %lld%s lets one address start as "
		    "many keys as [store] max_clients (%lld) holds, and lock "
		    "every new client out", label, (long long)pol->new_keys,
		    pol->new_keys == 0 ? " (no bound)" : "",
		    (long long)p->cfg->store.sqlite.max_clients);
		p->problems[p->nproblems - 1].warning = true;
	}
	if (pol->new_keys == 0)
		return;
	charge = rlg_xcalloc(1, sizeof *charge);
	len = strlen(pol->name) + sizeof RLG_NEW_KEYS_SUFFIX;
	charge->name = rlg_xmalloc(len);
	snprintf(charge->name, len, "%s%s", pol->name, RLG_NEW_KEYS_SUFFIX);
	charge->lim.algorithm = RLG_ALG_FIXED_WINDOW;
	charge->lim.limit = pol->new_keys;
	charge->lim.window_ms = pol->lim.window_ms;
	charge->lim.burst = pol->new_keys;
	charge->key = RLG_KEY_IP;
	charge->mode = pol->mode;
	pol->new_keys_policy = charge;
}

/*
 * A route's cost against each of its policies: a cost above a policy's
 * capacity (its limit; burst for token_bucket) could never be admitted,
 * so every request of the route would be refused. Reported at the cost
 * line, once per such policy. With a header cost, cost_max is held to
 * the same bound at its own line; it is required (reported at the cost
 * line), and without a header cost it is a mistake (at its line: it
 * would bound nothing), unless the cost line was bad (already reported).
 */
static void
rlg_route_cost_check(struct rlg_parse *p, const struct rlg_route *r,
    const struct rlg_build *b, size_t scope)
{
	const struct rlg_set_lines *cost = rlg_lines(p, scope, "route",
	    "cost");
	const struct rlg_set_lines *max = rlg_lines(p, scope, "route",
	    "cost_max");
	const struct rlg_policy *pol;
	bool bucket, header = r->cost_header != NULL;
	int64_t cap, most = header ? r->cost_max : r->cost;
	size_t j;

	if (header && max->ok == 0) {
		if (max->first == 0)
			rlg_problem(p, cost->ok, "%s cost: header:%s needs "
			    "cost_max = N, the most one request may cost (and "
			    "what one costs whose header is not believed)",
			    b->label, r->cost_header);
		return;
	}
	if (!header && max->first != 0) {
		if (cost->first == 0 || cost->ok != 0)
			rlg_problem(p, max->first, "%s cost_max: only with "
			    "cost = header:NAME (the cost is fixed: %lld)",
			    b->label, (long long)r->cost);
		return;
	}
	for (j = 0; j < r->npolicies; j++) {
		pol = &p->cfg->policies[r->policies[j]];
		bucket = pol->lim.algorithm == RLG_ALG_TOKEN_BUCKET;
		cap = bucket ? pol->lim.burst : pol->lim.limit;
		if (most <= cap)
			continue;
		rlg_problem(p, header ? max->ok : cost->ok,
		    "%s %s: %lld is above the %s of [policy %s] (%lld): %s",
		    b->label, header ? "cost_max" : "cost", (long long)most,
		    bucket ? "burst" : "limit", pol->name, (long long)cap,
		    header ? "a request that costs it could never be admitted"
		    : "no request of the route could ever be admitted");
	}
}

/*
 * With path_match = normalized, the spelling of a route's path that
 * requests are compared with (rlg_path_route; an exact route's
 * without its trailing '/'). A ';' in such a path is reported at its
 * line: requests' ";params" are dropped, so it could never match.
 */
static void
rlg_route_match_path(struct rlg_parse *p, struct rlg_route *r,
    const struct rlg_build *b, size_t scope)
{
	size_t len;

	free(r->match_path);
	r->match_path = NULL;
	if (r->path == NULL || r->path_match != RLG_PATH_MATCH_NORMALIZED)
		return;
	if (strchr(r->path, ';') != NULL) {
		rlg_problem(p, rlg_lines(p, scope, "route", "path")->ok,
		    "%s path: a request's \";params\" are dropped before it "
		    "is compared, so \"%s\" could never match (or set "
		    "path_match = bytes)", b->label, r->path);
		return;
	}
	len = strlen(r->path) + 1;
	r->match_path = rlg_xmalloc(len);
	if (rlg_path_route(r->path, r->match_path, len) != RLG_OK)
		r->match_path[0] = '\0';
	if (!r->prefix)
		rlg_path_route_slash(r->match_path);
}

/*
 * After the policies are final: each route's policy names become indexes
 * (an unknown name is reported at the route's policies line; policies =
 * none is a warning there: a guarding front asking about the route's
 * paths limits nothing), a cost
 * above one of them at the cost line (rlg_route_cost_check), a route
 * without path or policies is reported at its header, and the routes of
 * the file go to the config, with the policies of a request that matches
 * none of them.
 */
static void
rlg_routes_finish(struct rlg_parse *p)
{
	struct rlg_config *cfg = p->cfg;
	const struct rlg_set_lines *pols;
	struct rlg_build *b;
	struct rlg_route *r;
	size_t i, j, n, scope;

	for (i = 0; i < p->nroutes; i++) {
		r = &p->routes[i];
		b = &p->rbuilds[i];
		scope = 1 + RLG_POLICIES_MAX + i;
		pols = rlg_lines(p, scope, "route", "policies");
		if (rlg_lines(p, scope, "route", "path")->first == 0)
			rlg_problem(p, b->line, "%s has no path: set path = "
			    "/PATH (or /PREFIX* for a prefix)", b->label);
		if (pols->first == 0)
			rlg_problem(p, b->line, "%s has no policies: set "
			    "policies = NAME, ... (or policies = none: not "
			    "limited)", b->label);
		if (pols->ok != 0 && b->nnames == 0) {
			rlg_problem(p, pols->ok, "%s policies = none: a "
			    "guarding front (FastCGI Authorizer, nginx "
			    "auth_request, Caddy forward_auth) asking about "
			    "%s%s will limit nothing: rlgate admits those "
			    "requests unlimited", b->label, r->path != NULL ?
			    r->path : "its path", r->prefix ? "*" : "");
			p->problems[p->nproblems - 1].warning = true;
		}
		if (b->nnames > 0)
			r->policies = rlg_xcalloc(b->nnames,
			    sizeof *r->policies);
		for (j = 0; j < b->nnames; j++) {
			for (n = 0; n < cfg->npolicies; n++)
				if (strcmp(cfg->policies[n].name,
				    b->names[j]) == 0)
					break;
			if (n == cfg->npolicies)
				rlg_no_policy(p, pols->ok, b->label,
				    b->names[j]);
			else
				r->policies[r->npolicies++] = n;
		}
		rlg_list_free(b->names, b->nnames);
		rlg_route_cost_check(p, r, b, scope);
		rlg_route_match_path(p, r, b, scope);
	}
	if (p->nroutes > 0) {
		cfg->routes = rlg_xcalloc(p->nroutes, sizeof *cfg->routes);
		memcpy(cfg->routes, p->routes, p->nroutes * sizeof *p->routes);
		cfg->nroutes = p->nroutes;
	}
	free(p->routes);
	free(p->rbuilds);

	/* Without routes every policy; with routes [policy default], if. */
	free(cfg->default_policies);
	cfg->default_policies = NULL;
	cfg->ndefault = 0;
	for (i = 0; i < cfg->npolicies; i++) {
		if (cfg->nroutes > 0 &&
		    strcmp(cfg->policies[i].name, "default") != 0)
			continue;
		if (cfg->default_policies == NULL)
			cfg->default_policies = rlg_xcalloc(cfg->npolicies,
			    sizeof *cfg->default_policies);
		cfg->default_policies[cfg->ndefault++] = i;
	}
}

/*
 * After the whole file: the [store] keys that belong to one backend only.
 * Each is reported on its own line. Redis keys with the SQLite backend
 * are an error, not a no-op: an operator who set url but not backend =
 * redis would get one SQLite file per machine, each client a full quota
 * on each. max_clients set with Redis likewise promises a bound that
 * Redis does not keep (its memory follows maxmemory and key expiry), and
 * synchronous or group_commit a durability or a batching it has not. A
 * list of seed nodes with backend = redis would silently use the first
 * node only; a Redis Cluster is reached over TCP and has database 0 only.
 * With a backend that was itself bad (already reported) nothing is
 * checked.
 */
static void
rlg_store_finish(struct rlg_parse *p)
{
	/* Each key of one backend: the backend, and why (for SQLite's). */
	static const char *const one_backend[][3] = {
		{ "url", "redis or redis_cluster", "" },
		{ "connect_timeout_ms", "redis or redis_cluster", "" },
		{ "timeout_ms", "redis or redis_cluster", "" },
		{ "clock", "redis or redis_cluster", "" },
		{ "max_clients", "sqlite", ": Redis memory is bounded by its "
		    "maxmemory and by the expiry of the keys" },
		{ "synchronous", "sqlite", ": Redis durability is its own "
		    "appendfsync" },
		{ "group_commit", "sqlite", "" },
		{ "commit", "sqlite", "" },
		{ "flush_ms", "sqlite", "" },
	};
	const struct rlg_store_config *sc = &p->cfg->store;
	const struct rlg_set_lines *backend, *url;
	bool cluster = sc->redis.cluster, sqlite;
	int line;
	size_t i;

	backend = rlg_lines(p, 0, "store", "backend");
	url = rlg_lines(p, 0, "store", "url");
	p->cfg->store.sqlite.path_line = rlg_lines(p, 0, "store", "path")->ok;
	if (p->backend_bad)
		return;
	sqlite = sc->backend == RLG_BACKEND_SQLITE;
	for (i = 0; i < sizeof one_backend / sizeof one_backend[0]; i++) {
		line = rlg_lines(p, 0, "store", one_backend[i][0])->ok;
		if (line != 0 && sqlite != (*one_backend[i][1] == 's'))
			rlg_problem(p, line, "[store] %s: applies only to "
			    "backend = %s%s", one_backend[i][0],
			    one_backend[i][1], one_backend[i][2]);
	}
	if (sqlite) {
		rlg_table_finish(p);
		return;
	}
	/* Redis has no commit of its own to choose (a commit line was
	 * reported above): auto means nothing there, each says so. */
	if (p->cfg->store.sqlite.commit == RLG_COMMIT_AUTO) {
		p->cfg->store.sqlite.commit = RLG_COMMIT_EACH;
		p->cfg->store.sqlite.commit_auto = true;
	}
	/* A url that was set but bad is reported for itself. */
	if (url->first == 0)
		rlg_problem(p, backend->ok, cluster ? "[store] backend: "
		    "redis_cluster needs [store] url = redis://HOST:PORT"
		    "[,HOST:PORT...] (seed nodes)" : "[store] backend: redis "
		    "needs [store] url = redis://HOST:PORT or unix:/PATH");
	if (url->ok != 0 && !cluster && sc->redis.nseeds > 0)
		rlg_problem(p, url->ok, "[store] url: several HOST:PORT "
		    "are the seed nodes of a Redis Cluster: set backend = "
		    "redis_cluster, or name one server");
	if (url->ok != 0 && cluster && sc->redis.socket != NULL)
		rlg_problem(p, url->ok, "[store] url: backend = "
		    "redis_cluster needs redis://HOST:PORT[,HOST:PORT...]: "
		    "cluster nodes talk TCP");
	if (url->ok != 0 && cluster && sc->redis.db != 0)
		rlg_problem(p, url->ok, "[store] url: a Redis Cluster has "
		    "database 0 only (got /%d)", sc->redis.db);
}

/*
 * commit: auto becomes behind where the table holds the config, else each
 * (rlg_config_why_each), and says so in commit_auto. An explicit behind
 * must fit, or each reason is a problem on the commit line: the table
 * holds max_clients entries for each policy that keeps state (a bound on
 * new keys is one), so max_clients must be set and the product bounded;
 * sliding_log keeps its log in the database, which the table does not
 * (store_table.c). flush_ms only means something with behind: with an
 * auto that gave each, the problem says why it did.
 */
static void
rlg_table_finish(struct rlg_parse *p)
{
	struct rlg_sqlite_config *sq = &p->cfg->store.sqlite;
	int commit = rlg_lines(p, 0, "store", "commit")->ok;
	int flush = rlg_lines(p, 0, "store", "flush_ms")->ok;
	int64_t kept = rlg_table_policies(p->cfg);
	char why[256];
	size_t i;

	if (sq->commit == RLG_COMMIT_AUTO) {
		sq->commit_auto = true;
		if (rlg_config_why_each(p->cfg, why, sizeof why)) {
			sq->commit = RLG_COMMIT_EACH;
			if (flush != 0)
				rlg_problem(p, flush, "[store] flush_ms: "
				    "commit = auto resolves to each here (%s):"
				    " flush_ms applies only to commit = "
				    "behind", why);
			return;
		}
		sq->commit = RLG_COMMIT_BEHIND;
	}
	if (sq->commit != RLG_COMMIT_BEHIND) {
		if (flush != 0)
			rlg_problem(p, flush, "[store] flush_ms: applies only "
			    "to commit = behind");
		return;
	}
	for (i = 0; i < p->cfg->npolicies; i++)
		if (p->cfg->policies[i].lim.algorithm == RLG_ALG_SLIDING_LOG)
			rlg_problem(p, commit, "[store] commit: behind does "
			    "not keep [policy %s], a sliding_log (its log "
			    "lives in the database): use commit = each, or "
			    "another algorithm", p->cfg->policies[i].name);
	if (sq->max_clients == 0) {
		rlg_problem(p, commit, "[store] commit: behind sizes its "
		    "table by max_clients: set [store] max_clients > 0");
		return;
	}
	if (sq->max_clients > RLG_TABLE_ENTRIES_MAX / kept) {
		rlg_problem(p, commit, "[store] commit: behind keeps "
		    "max_clients (%lld) x %lld policies = %lld entries, over "
		    "the table's %lld: lower max_clients",
		    (long long)sq->max_clients, (long long)kept,
		    (long long)sq->max_clients * (long long)kept,
		    (long long)RLG_TABLE_ENTRIES_MAX);
		return;
	}
	sq->table_entries = sq->max_clients * kept;
}

bool
rlg_config_why_each(const struct rlg_config *cfg, char *why, size_t size)
{
	const struct rlg_sqlite_config *sq = &cfg->store.sqlite;
	int64_t kept = rlg_table_policies(cfg);
	size_t i;

	for (i = 0; i < cfg->npolicies; i++)
		if (cfg->policies[i].lim.algorithm == RLG_ALG_SLIDING_LOG) {
			snprintf(why, size, "[policy %s] is a sliding_log, "
			    "whose log lives in the database",
			    cfg->policies[i].name);
			return true;
		}
	if (sq->max_clients == 0) {
		snprintf(why, size, "max_clients = 0, and the table is sized "
		    "by it");
		return true;
	}
	if (sq->max_clients > RLG_TABLE_ENTRIES_MAX / kept) {
		snprintf(why, size, "max_clients (%lld) x %lld policies = "
		    "%lld entries, over the table's %lld",
		    (long long)sq->max_clients, (long long)kept,
		    (long long)sq->max_clients * (long long)kept,
		    (long long)RLG_TABLE_ENTRIES_MAX);
		return true;
	}
	if (size > 0)
		why[0] = '\0';
	return false;
}

int
rlg_config_check_dir(const struct rlg_config *cfg, char *msg, size_t size)
{
	const struct rlg_sqlite_config *sq = &cfg->store.sqlite;
	const char *db = sq->path, *slash;
	char dir[RLG_CONFIG_LINE_MAX + 2], where[RLG_CONFIG_LINE_MAX + 32];
	struct stat st;
	bool missing;

	if (size > 0)
		msg[0] = '\0';
	if (cfg->store.backend != RLG_BACKEND_SQLITE || db == NULL)
		return 0;
	if (cfg->source == NULL)
		snprintf(where, sizeof where, "built-in defaults");
	else if (sq->path_line > 0)
		snprintf(where, sizeof where, "%s:%d", cfg->source,
		    sq->path_line);
	else
		snprintf(where, sizeof where, "%s", cfg->source);
	slash = strrchr(db, '/');
	if (slash == NULL)
		snprintf(dir, sizeof dir, ".");
	else if (slash == db)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - db), db);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		missing = stat(dir, &st) != 0;
		snprintf(msg, size, "%s: path: directory %s %s: create it for "
		    "the user rlgate runs as (mkdir -p %s; chown USER %s)",
		    where, dir, missing ? "does not exist" :
		    "is not a directory", dir, dir);
		return -1;
	}
	if (access(dir, W_OK | X_OK) != 0 ||
	    (access(db, F_OK) == 0 && access(db, R_OK | W_OK) != 0)) {
		snprintf(msg, size, "%s: path: %s is not writable by this user "
		    "(uid %ld): rlgate run as it could not keep its database "
		    "there; check as the user rlgate runs as, or give it the "
		    "directory (chown USER %s)", where,
		    access(dir, W_OK | X_OK) != 0 ? dir : db, (long)getuid(),
		    dir);
		return -1;
	}
	return 0;
}

/* The policies that keep state in the table: each, and each bound on new
 * keys; at least 1. */
static int64_t
rlg_table_policies(const struct rlg_config *cfg)
{
	int64_t kept = 0;
	size_t i;

	for (i = 0; i < cfg->npolicies; i++)
		kept += 1 + (cfg->policies[i].new_keys_policy != NULL);
	return kept > 0 ? kept : 1;
}

/* Frees what a policy owns, not the policy itself. */
static void
rlg_policy_free_fields(struct rlg_policy *pol)
{
	free(pol->name);
	free(pol->key_header);
	free(pol->exempt);
	if (pol->new_keys_policy != NULL) {
		free(pol->new_keys_policy->name);
		free(pol->new_keys_policy);
	}
}

/* Frees what a route owns, not the route itself. */
static void
rlg_route_free_fields(struct rlg_route *r)
{
	free(r->name);
	free(r->path);
	free(r->match_path);
	rlg_list_free(r->methods, r->nmethods);
	free(r->policies);
	free(r->cost_header);
}

/* Where the key sect/name (a row that is there) was set, in scope. */
static struct rlg_set_lines *
rlg_lines(struct rlg_parse *p, size_t scope, const char *sect,
    const char *name)
{
	size_t i = rlg_option_find(sect, name);

	assert(i < rlg_noptions && scope < RLG_NSCOPES);
	return &p->lines[scope * rlg_noptions + i];
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

/* A policy name that names no policy, at line: "LABEL policies: no
 * [policy NAME]", and the closest name if one is close. */
static void
rlg_no_policy(struct rlg_parse *p, int line, const char *label,
    const char *name)
{
	const char *near = rlg_policy_suggest(p->cfg, name);

	if (near != NULL)
		rlg_problem(p, line, "%s policies: no [policy %s]: did you "
		    "mean \"%s\"?", label, name, near);
	else
		rlg_problem(p, line, "%s policies: no [policy %s]", label,
		    name);
}

const char *
rlg_policy_suggest(const struct rlg_config *cfg, const char *name)
{
	const char *near = NULL;
	size_t i, best = SIZE_MAX;

	for (i = 0; i < cfg->npolicies; i++)
		if (rlg_near(name, cfg->policies[i].name, &best))
			near = cfg->policies[i].name;
	return near;
}

/*
 * Whether known is close enough to typed to be offered ("did you
 * mean"), and closer than *best (then *best is its distance): at most 2
 * edits, and at most a third of the longer name (so that "ab" does not
 * become "cd"), never 0 (that is no typo).
 */
static bool
rlg_near(const char *typed, const char *known, size_t *best)
{
	size_t la = strlen(typed), lb = strlen(known), d;

	/* the distance is at least the difference of the lengths: a long
	 * line of a hostile file costs no table */
	if (la > lb + 2 || lb > la + 2)
		return false;
	d = rlg_edit_distance(typed, known);
	if (d == 0 || d > 2 || 3 * d > (la > lb ? la : lb) || d >= *best)
		return false;
	*best = d;
	return true;
}

/*
 * The Damerau-Levenshtein distance of a and b (optimal string
 * alignment: insertions, deletions, substitutions and swaps of two
 * neighbours, each 1), written here rather than borrowed: three rows of
 * the classic table. Names longer than RLG_EDIT_MAX (a line of the file
 * may be 8 KiB) are no typo of a key: SIZE_MAX.
 */
static size_t
rlg_edit_distance(const char *a, const char *b)
{
	size_t rows[3][RLG_EDIT_MAX + 1], *pp, *prev, *cur, i, j, c;
	size_t la = strlen(a), lb = strlen(b);

	if (la > RLG_EDIT_MAX || lb > RLG_EDIT_MAX)
		return SIZE_MAX;
	pp = rows[0], prev = rows[1], cur = rows[2];
	for (j = 0; j <= lb; j++)
		prev[j] = j;
	for (i = 1; i <= la; i++) {
		cur[0] = i;
		for (j = 1; j <= lb; j++) {
			c = prev[j - 1] + (a[i - 1] != b[j - 1]);
			if (prev[j] + 1 < c)
				c = prev[j] + 1;
			if (cur[j - 1] + 1 < c)
				c = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && pp[j - 2] + 1 < c)
				c = pp[j - 2] + 1;
			cur[j] = c;
		}
		/* rotate: the row before the previous one is reused */
		{
			size_t *t = pp;

			pp = prev;
			prev = cur;
			cur = t;
		}
	}
	return prev[lb];
}

/* Notes one problem on line (0: the whole file). */
void
rlg_problem(struct rlg_parse *p, int line, const char *fmt, ...)
{
	struct rlg_problem *grown;
	va_list ap;

	if (p->nproblems == p->capproblems) {
		p->capproblems = p->capproblems == 0 ? 8 : 2 * p->capproblems;
		grown = rlg_xcalloc(p->capproblems, sizeof *grown);
		if (p->nproblems > 0)
			memcpy(grown, p->problems,
			    p->nproblems * sizeof *grown);
		free(p->problems);
		p->problems = grown;
	}
	p->problems[p->nproblems].line = line;
	p->problems[p->nproblems].seq = p->nproblems;
	va_start(ap, fmt);
	p->problems[p->nproblems].msg = rlg_vformat(fmt, ap);
	va_end(ap);
	p->nproblems++;
}

/* A problem with the value of key o, of the current section, on the
 * current line: "[section] key: ...". */
void
rlg_key_problem(struct rlg_parse *p, const struct rlg_option *o,
    const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = rlg_vformat(fmt, ap);
	va_end(ap);
	assert(p->sect != NULL && strcmp(o->section, p->sect) == 0);
	rlg_problem(p, p->lineno, "%s %s: %s", p->label, o->name, msg);
	free(msg);
}

/* A newly allocated string, formatted. */
static char *
rlg_vformat(const char *fmt, va_list ap)
{
	va_list ap2;
	char *s;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return rlg_xstrdup("(message lost: bad format)");
	s = rlg_xmalloc((size_t)n + 1);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
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

/* Two strings alike, NULL only like NULL. */
static bool
rlg_same_str(const char *a, const char *b)
{
	return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

bool
rlg_config_store_changed(const struct rlg_config *a,
    const struct rlg_config *b, char *what, size_t size)
{
	const struct rlg_store_config *x = &a->store, *y = &b->store;
	const struct rlg_sqlite_config *p = &x->sqlite, *q = &y->sqlite;
	const struct rlg_redis_config *r = &x->redis, *t = &y->redis;
	const char *key = NULL;
	size_t i;

	if (x->backend != y->backend)
		key = "backend";
	else if (x->rejection_cache != y->rejection_cache)
		key = "rejection_cache";
	else if (x->backend == RLG_BACKEND_SQLITE) {
		if (!rlg_same_str(p->path, q->path))
			key = "path";
		else if (p->busy_timeout_ms != q->busy_timeout_ms)
			key = "busy_timeout_ms";
		else if (p->max_clients != q->max_clients)
			key = "max_clients";
		else if (p->synchronous != q->synchronous)
			key = "synchronous";
		else if (p->group_commit != q->group_commit)
			key = "group_commit";
		else if (p->commit != q->commit)
			key = "commit (as resolved)";
		else if (p->flush_ms != q->flush_ms)
			key = "flush_ms";
	} else {
		if (!rlg_same_str(r->host, t->host) || r->port != t->port ||
		    !rlg_same_str(r->socket, t->socket) ||
		    !rlg_same_str(r->user, t->user) ||
		    !rlg_same_str(r->password, t->password) || r->db != t->db ||
		    r->cluster != t->cluster || r->nseeds != t->nseeds)
			key = "url";
		for (i = 0; key == NULL && i < r->nseeds; i++)
			if (!rlg_same_str(r->seeds[i].host, t->seeds[i].host) ||
			    r->seeds[i].port != t->seeds[i].port)
				key = "url";
		if (key == NULL && r->connect_timeout_ms != t->connect_timeout_ms)
			key = "connect_timeout_ms";
		else if (key == NULL && r->timeout_ms != t->timeout_ms)
			key = "timeout_ms";
		else if (key == NULL && r->clock != t->clock)
			key = "clock";
	}
	snprintf(what, size, "%s", key != NULL ? key : "");
	return key != NULL;
}
