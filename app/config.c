/*
 * config.c: the INI configuration, read line by line by ini.c into the
 * plain structs of config.h, validated key by key over the built-in
 * defaults. Every problem is collected with its line number and all are
 * printed at the end, in line order, so an operator fixes a config in one
 * pass.
 *
 * Policies are built in file order, one per distinct [policy NAME], and
 * routes likewise, one per distinct [route NAME]; a repeated section merges
 * into the first, as every section does. Checks that span keys or sections
 * (burst needs token_bucket, sliding_log caps the limit, a header key needs
 * [client] key_secret, a route names policies that may come later in the
 * file, the [store] keys that belong to one backend) run once the whole
 * file is read, since the keys may come in any order; their problems
 * carry the line of the key at fault (or of the section header, for a key
 * that is missing), so the sort puts them in place.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "ini.h"
#include "store_redis.h"
#include "util.h"

/* The longest store path, in bytes (PATH_MAX less its NUL on Linux). */
#define RLG_CONFIG_PATH_MAX  4095

/* The longest busy_timeout_ms: ten minutes. */
#define RLG_BUSY_TIMEOUT_MS_MAX  600000

/* Where the next key line goes. */
enum rlg_sect {
	RLG_SECT_NONE = 0,     /* no [section] seen yet */
	RLG_SECT_BAD,          /* a bad header, already reported: ignore keys */
	RLG_SECT_STORE,
	RLG_SECT_HEADERS,
	RLG_SECT_RESPONSE,
	RLG_SECT_CLIENT,
	RLG_SECT_LOG,
	RLG_SECT_POLICY,       /* [policy NAME]: the policy rlg_parse.cur */
	RLG_SECT_ROUTE,        /* [route NAME]: the route rlg_parse.cur */
};

/* A word of the config and the enum value it stands for. */
struct rlg_word {
	const char *name;
	int value;
};

/*
 * What the parse knows of one policy beyond the policy itself: how to name
 * it in messages and where its keys were, for the checks made at the end.
 */
struct rlg_policy_build {
	char label[sizeof "[policy ]" + RLG_POLICY_NAME_MAX];
	bool algorithm_ok;     /* algorithm was set to a known value */
	int limit_line;        /* line of a valid limit, or 0: default */
	int burst_line;        /* line of a valid burst, or 0: default */
	int new_keys_line;     /* line of a valid new_keys_per_ip, or 0 */
	int key_line;          /* line of a valid key, or 0: default (ip) */
};

/*
 * What the parse knows of one route beyond the route: its label, its
 * header's line (a missing key is reported there) and the policy names of
 * its policies key, resolved to indexes once every policy is known.
 */
struct rlg_route_build {
	char label[sizeof "[route ]" + RLG_POLICY_NAME_MAX];
	int line;              /* the first [route NAME] header */
	char **names;          /* nnames policy names; none with "none" */
	size_t nnames;
	int policies_line;     /* line of a valid policies, or 0 */
};

struct rlg_parse;
struct rlg_key;

typedef void rlg_key_set_fn(struct rlg_parse *, const struct rlg_key *,
    const char *);

/* One known key: its section, its name and what checks and stores it. */
struct rlg_key {
	enum rlg_sect sect;
	const char *name;
	rlg_key_set_fn *set;
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

	enum rlg_sect sect;    /* section of the next key line */
	size_t cur;            /* index in pols or routes, per sect */
	/*
	 * The line each key was first set on, or 0, per scope: scope 0 holds
	 * the keys outside policies and routes, scope 1 + i those of pols[i],
	 * scope 1 + RLG_POLICIES_MAX + i those of routes[i]. Indexed
	 * scope * RLG_NKEYS + the key's index in rlg_keys.
	 */
	int *first_line;

	struct rlg_config *cfg;    /* being built over the defaults */
	/* The [policy NAME] sections so far, in file order; they replace the
	 * built-in "default" at the end if there is at least one. */
	struct rlg_policy *pols;           /* RLG_POLICIES_MAX allocated */
	struct rlg_policy_build *builds;   /* one per pols entry */
	size_t npols;
	bool too_many;         /* the cap on policies has been reported */
	/* The [route NAME] sections so far, in file order. */
	struct rlg_route *routes;          /* RLG_ROUTES_MAX allocated */
	struct rlg_route_build *rbuilds;   /* one per routes entry */
	size_t nroutes;
	bool too_many_routes;  /* the cap on routes has been reported */

	/*
	 * The [store] keys whose meaning depends on the backend: the line of
	 * each one set to a valid value, or 0, for rlg_store_finish.
	 */
	int backend_line;
	bool backend_bad;      /* backend was set to an unknown value */
	int url_line;
	int connect_timeout_line;
	int timeout_line;
	int clock_line;
	int max_clients_line;
	int synchronous_line;
	int group_commit_line;

	struct rlg_problem *problems;
	size_t nproblems;
	size_t capproblems;
};

static int rlg_config_parse(const char *name, FILE *fp, const char *text,
    FILE *errs, struct rlg_config **out);
static void rlg_config_line(void *ctx, const struct rlg_ini_line *l);
static void rlg_section_line(struct rlg_parse *p, const char *inner);
static void rlg_key_line(struct rlg_parse *p, const char *name,
    const char *value);
static bool rlg_sect_is(const char *inner, const char *word,
    const char **rest);
static void rlg_policy_section(struct rlg_parse *p, const char *name);
static void rlg_route_section(struct rlg_parse *p, const char *name);
static bool rlg_section_name_ok(struct rlg_parse *p, const char *kind,
    const char *name);
static void rlg_policies_finish(struct rlg_parse *p);
static void rlg_new_keys_policy(struct rlg_parse *p, struct rlg_policy *pol,
    const struct rlg_policy_build *b);
static void rlg_store_finish(struct rlg_parse *p);
static void rlg_routes_finish(struct rlg_parse *p);
static void rlg_policy_free_fields(struct rlg_policy *pol);
static void rlg_route_free_fields(struct rlg_route *r);
static struct rlg_policy *rlg_cur_policy(struct rlg_parse *p);
static struct rlg_policy_build *rlg_cur_build(struct rlg_parse *p);
static struct rlg_route *rlg_cur_route(struct rlg_parse *p);
static struct rlg_route_build *rlg_cur_rbuild(struct rlg_parse *p);
static int *rlg_first_line(struct rlg_parse *p, size_t scope, size_t key);
static size_t rlg_key_index(enum rlg_sect sect, const char *name);
static const char *rlg_sect_label(const struct rlg_parse *p);
static void rlg_problem(struct rlg_parse *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void rlg_vproblem(struct rlg_parse *p, int line, const char *fmt,
    va_list ap) __attribute__((format(printf, 3, 0)));
static void rlg_key_problem(struct rlg_parse *p, const struct rlg_key *k,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rlg_key_warning(struct rlg_parse *p, const struct rlg_key *k,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rlg_key_vproblem(struct rlg_parse *p, const struct rlg_key *k,
    bool warning, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static char *rlg_vformat(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
static int rlg_problem_cmp(const void *a, const void *b);
static bool rlg_parse_int(const char *s, long long min, long long max,
    long long *out);
static const struct rlg_word *rlg_word_find(const char *s,
    const struct rlg_word *words);
static char *rlg_word_list(const struct rlg_word *words);
static bool rlg_list_split(struct rlg_parse *p, const struct rlg_key *k,
    const char *value, size_t max, const char *what, char ***items,
    size_t *n);
static void rlg_list_free(char **items, size_t n);
static bool rlg_header_name_ok(const char *s);
static void rlg_set_cidrs(struct rlg_parse *p, const struct rlg_key *k,
    const char *value, struct rlg_cidr **nets, size_t *n);
static bool rlg_set_word(struct rlg_parse *p, const struct rlg_key *k,
    const char *value, const struct rlg_word *words, int *out);
static void rlg_set_int(struct rlg_parse *p, const struct rlg_key *k,
    const char *value, long long min, long long max, long long *out,
    bool *ok);
static void rlg_set_store_path(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_max_clients(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_rejection_cache(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_busy_timeout(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_on_error(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_backend(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_url(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_connect_timeout(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_timeout(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_clock(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_synchronous(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_group_commit(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_style(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_errors(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_algorithm(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_limit(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_window(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_new_keys(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_burst(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_key(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_mode(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_policy_exempt(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_trusted_proxies(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_forwarded_header(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_ipv6_prefix(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_client_exempt(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_key_secret(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_report_exempt(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_log_level(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_route_path(struct rlg_parse *p, const struct rlg_key *k,
    const char *value);
static void rlg_set_route_methods(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);
static void rlg_set_route_policies(struct rlg_parse *p,
    const struct rlg_key *k, const char *value);

/* Every key of every section; a key not here is an error. */
static const struct rlg_key rlg_keys[] = {
	{ RLG_SECT_STORE, "path", rlg_set_store_path },
	{ RLG_SECT_STORE, "busy_timeout_ms", rlg_set_busy_timeout },
	{ RLG_SECT_STORE, "on_error", rlg_set_on_error },
	{ RLG_SECT_STORE, "max_clients", rlg_set_max_clients },
	{ RLG_SECT_STORE, "rejection_cache", rlg_set_rejection_cache },
	{ RLG_SECT_STORE, "backend", rlg_set_backend },
	{ RLG_SECT_STORE, "url", rlg_set_url },
	{ RLG_SECT_STORE, "connect_timeout_ms", rlg_set_connect_timeout },
	{ RLG_SECT_STORE, "timeout_ms", rlg_set_timeout },
	{ RLG_SECT_STORE, "clock", rlg_set_clock },
	{ RLG_SECT_STORE, "synchronous", rlg_set_synchronous },
	{ RLG_SECT_STORE, "group_commit", rlg_set_group_commit },
	{ RLG_SECT_HEADERS, "style", rlg_set_style },
	{ RLG_SECT_HEADERS, "report_exempt", rlg_set_report_exempt },
	{ RLG_SECT_RESPONSE, "errors", rlg_set_errors },
	{ RLG_SECT_CLIENT, "trusted_proxies", rlg_set_trusted_proxies },
	{ RLG_SECT_CLIENT, "ipv6_prefix", rlg_set_ipv6_prefix },
	{ RLG_SECT_CLIENT, "forwarded_header", rlg_set_forwarded_header },
	{ RLG_SECT_CLIENT, "exempt", rlg_set_client_exempt },
	{ RLG_SECT_CLIENT, "key_secret", rlg_set_key_secret },
	{ RLG_SECT_LOG, "level", rlg_set_log_level },
	{ RLG_SECT_POLICY, "algorithm", rlg_set_algorithm },
	{ RLG_SECT_POLICY, "limit", rlg_set_limit },
	{ RLG_SECT_POLICY, "window", rlg_set_window },
	{ RLG_SECT_POLICY, "burst", rlg_set_burst },
	{ RLG_SECT_POLICY, "new_keys_per_ip", rlg_set_new_keys },
	{ RLG_SECT_POLICY, "key", rlg_set_key },
	{ RLG_SECT_POLICY, "mode", rlg_set_mode },
	{ RLG_SECT_POLICY, "exempt", rlg_set_policy_exempt },
	{ RLG_SECT_ROUTE, "path", rlg_set_route_path },
	{ RLG_SECT_ROUTE, "methods", rlg_set_route_methods },
	{ RLG_SECT_ROUTE, "policies", rlg_set_route_policies },
};
#define RLG_NKEYS (sizeof rlg_keys / sizeof rlg_keys[0])
#define RLG_NSCOPES (1 + RLG_POLICIES_MAX + RLG_ROUTES_MAX)

/*
 * backend = redis_cluster is the Redis store in its cluster mode: backend
 * RLG_BACKEND_REDIS with redis_cluster set (rlg_set_backend).
 */
#define RLG_BACKEND_WORD_CLUSTER (-1)

/* The words each enum key accepts, in the order the messages list them. */
static const struct rlg_word rlg_on_error_words[] = {
	{ "closed", RLG_ON_ERROR_CLOSED },
	{ "open", RLG_ON_ERROR_OPEN },
	{ NULL, 0 }
};
static const struct rlg_word rlg_backend_words[] = {
	{ "sqlite", RLG_BACKEND_SQLITE },
	{ "redis", RLG_BACKEND_REDIS },
	{ "redis_cluster", RLG_BACKEND_WORD_CLUSTER },
	{ NULL, 0 }
};
static const struct rlg_word rlg_clock_words[] = {
	{ "redis", RLG_CLOCK_REDIS },
	{ "local", RLG_CLOCK_LOCAL },
	{ NULL, 0 }
};
static const struct rlg_word rlg_sync_words[] = {
	{ "normal", RLG_SYNC_NORMAL },
	{ "full", RLG_SYNC_FULL },
	{ NULL, 0 }
};
static const struct rlg_word rlg_group_words[] = {
	{ "auto", RLG_GROUP_AUTO },
	{ "on", RLG_GROUP_ON },
	{ "off", RLG_GROUP_OFF },
	{ NULL, 0 }
};
static const struct rlg_word rlg_style_words[] = {
	{ "draft03", RLG_STYLE_DRAFT03 },
	{ "ietf", RLG_STYLE_IETF },
	{ "x-ratelimit", RLG_STYLE_X_RATELIMIT },
	{ "all", RLG_STYLE_ALL },
	{ "none", RLG_STYLE_NONE },
	{ NULL, 0 }
};
static const struct rlg_word rlg_error_format_words[] = {
	{ "json", RLG_ERRORS_JSON },
	{ "problem", RLG_ERRORS_PROBLEM },
	{ NULL, 0 }
};
static const struct rlg_word rlg_algorithm_words[] = {
	{ "fixed_window", RLG_ALG_FIXED_WINDOW },
	{ "sliding_window", RLG_ALG_SLIDING_WINDOW },
	{ "token_bucket", RLG_ALG_TOKEN_BUCKET },
	{ "sliding_log", RLG_ALG_SLIDING_LOG },
	{ NULL, 0 }
};
static const struct rlg_word rlg_mode_words[] = {
	{ "enforce", RLG_MODE_ENFORCE },
	{ "dry_run", RLG_MODE_DRY_RUN },
	{ NULL, 0 }
};
static const struct rlg_word rlg_yes_no_words[] = {
	{ "yes", 1 },
	{ "no", 0 },
	{ NULL, 0 }
};
static const struct rlg_word rlg_forwarded_words[] = {
	{ "x-forwarded-for", RLG_FWD_X_FORWARDED_FOR },
	{ "forwarded", RLG_FWD_FORWARDED },
	{ NULL, 0 }
};
static const struct rlg_word rlg_log_level_words[] = {
	{ "error", RLG_LOG_ERROR },
	{ "warn", RLG_LOG_WARN },
	{ "info", RLG_LOG_INFO },
	{ NULL, 0 }
};

struct rlg_config *
rlg_config_defaults(void)
{
	struct rlg_config *cfg;
	struct rlg_policy *pol;

	cfg = rlg_xcalloc(1, sizeof *cfg);
	cfg->source = NULL;
	cfg->store.path = rlg_xstrdup(RLG_DEFAULT_DB_PATH);
	cfg->store.busy_timeout_ms = RLG_DEFAULT_BUSY_TIMEOUT_MS;
	cfg->store.max_clients = RLG_DEFAULT_MAX_CLIENTS;
	cfg->store.rejection_cache = RLG_DEFAULT_REJECTION_CACHE;
	cfg->store.on_error = RLG_ON_ERROR_CLOSED;
	cfg->store.backend = RLG_BACKEND_SQLITE;
	cfg->store.redis_port = RLG_DEFAULT_REDIS_PORT;
	cfg->store.connect_timeout_ms = RLG_DEFAULT_REDIS_TIMEOUT_MS;
	cfg->store.timeout_ms = RLG_DEFAULT_REDIS_TIMEOUT_MS;
	cfg->store.clock = RLG_CLOCK_REDIS;
	cfg->store.synchronous = RLG_SYNC_NORMAL;
	cfg->store.group_commit = RLG_GROUP_AUTO;
	cfg->style = RLG_STYLE_DRAFT03;
	cfg->errors = RLG_ERRORS_JSON;

	cfg->npolicies = 1;
	cfg->policies = rlg_xcalloc(cfg->npolicies, sizeof *cfg->policies);
	pol = &cfg->policies[0];
	pol->name = rlg_xstrdup("default");
	pol->algorithm = RLG_ALG_FIXED_WINDOW;
	pol->limit = RLG_DEFAULT_LIMIT;
	pol->window_ms = (int64_t)RLG_DEFAULT_WINDOW_S * 1000;
	pol->burst = pol->limit;
	pol->key = RLG_KEY_IP;
	pol->mode = RLG_MODE_ENFORCE;

	/* No routes: every request gets every policy. */
	cfg->ndefault = 1;
	cfg->default_policies = rlg_xcalloc(cfg->ndefault,
	    sizeof *cfg->default_policies);
	cfg->default_policies[0] = 0;
	cfg->client.ipv6_prefix = RLG_DEFAULT_IPV6_PREFIX;
	cfg->report_exempt = false;
	cfg->log_level = RLG_LOG_WARN;
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
	free(cfg->store.path);
	rlg_redis_fields_free(&cfg->store);
	for (i = 0; i < cfg->npolicies; i++)
		rlg_policy_free_fields(&cfg->policies[i]);
	free(cfg->policies);
	for (i = 0; i < cfg->nroutes; i++)
		rlg_route_free_fields(&cfg->routes[i]);
	free(cfg->routes);
	free(cfg->default_policies);
	free(cfg->client.trusted_proxies);
	free(cfg->client.exempt);
	free(cfg->client.key_secret);
	free(cfg);
}

const char *
rlg_on_error_name(enum rlg_on_error e)
{
	switch (e) {
	case RLG_ON_ERROR_CLOSED:
		return "closed";
	case RLG_ON_ERROR_OPEN:
		return "open";
	}
	return "unknown";
}

const char *
rlg_store_backend_name(enum rlg_store_backend b)
{
	switch (b) {
	case RLG_BACKEND_SQLITE:
		return "sqlite";
	case RLG_BACKEND_REDIS:
		return "redis";
	}
	return "unknown";
}

const char *
rlg_store_clock_name(enum rlg_store_clock c)
{
	switch (c) {
	case RLG_CLOCK_REDIS:
		return "redis";
	case RLG_CLOCK_LOCAL:
		return "local";
	}
	return "unknown";
}

const char *
rlg_style_name(enum rlg_header_style s)
{
	switch (s) {
	case RLG_STYLE_DRAFT03:
		return "draft03";
	case RLG_STYLE_IETF:
		return "ietf";
	case RLG_STYLE_X_RATELIMIT:
		return "x-ratelimit";
	case RLG_STYLE_ALL:
		return "all";
	case RLG_STYLE_NONE:
		return "none";
	}
	return "unknown";
}

const char *
rlg_error_format_name(enum rlg_error_format f)
{
	switch (f) {
	case RLG_ERRORS_JSON:
		return "json";
	case RLG_ERRORS_PROBLEM:
		return "problem";
	}
	return "unknown";
}

const char *
rlg_log_level_name(enum rlg_log_level l)
{
	switch (l) {
	case RLG_LOG_ERROR:
		return "error";
	case RLG_LOG_WARN:
		return "warn";
	case RLG_LOG_INFO:
		return "info";
	}
	return "unknown";
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
	p.sect = RLG_SECT_NONE;
	p.first_line = rlg_xcalloc(RLG_NSCOPES * RLG_NKEYS,
	    sizeof *p.first_line);
	p.cfg = rlg_config_defaults();
	p.pols = rlg_xcalloc(RLG_POLICIES_MAX, sizeof *p.pols);
	p.builds = rlg_xcalloc(RLG_POLICIES_MAX, sizeof *p.builds);
	p.routes = rlg_xcalloc(RLG_ROUTES_MAX, sizeof *p.routes);
	p.rbuilds = rlg_xcalloc(RLG_ROUTES_MAX, sizeof *p.rbuilds);

	err = rlg_ini_read(fp, text, RLG_CONFIG_LINE_MAX, rlg_config_line, &p);
	if (err != 0)
		rlg_problem(&p, 0, "cannot read: %s", strerror(err));
	rlg_policies_finish(&p);
	rlg_routes_finish(&p);
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
	free(p.first_line);

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
		p->sect = RLG_SECT_BAD;
		rlg_problem(p, l->lineno, "%s", l->error);
		break;
	case RLG_INI_BAD_LINE:
		rlg_problem(p, l->lineno, "%s", l->error);
		break;
	}
}

/*
 * One "key = value" line of the current section: the key checked, then
 * its value by the key's setter.
 */
static void
rlg_key_line(struct rlg_parse *p, const char *name, const char *value)
{
	const struct rlg_key *k = NULL;
	size_t i, scope;
	int *first;

	switch (p->sect) {
	case RLG_SECT_NONE:
		rlg_problem(p, p->lineno, "key \"%s\" before any [section]",
		    name);
		return;
	case RLG_SECT_BAD:
		return;
	default:
		break;
	}
	for (i = 0; i < RLG_NKEYS; i++) {
		if (rlg_keys[i].sect == p->sect &&
		    strcmp(rlg_keys[i].name, name) == 0) {
			k = &rlg_keys[i];
			break;
		}
	}
	if (k == NULL) {
		rlg_problem(p, p->lineno, "%s unknown key \"%s\"",
		    rlg_sect_label(p), name);
		return;
	}
	if (p->sect == RLG_SECT_POLICY)
		scope = 1 + p->cur;
	else if (p->sect == RLG_SECT_ROUTE)
		scope = 1 + RLG_POLICIES_MAX + p->cur;
	else
		scope = 0;
	first = rlg_first_line(p, scope, i);
	if (*first != 0) {
		rlg_key_problem(p, k, "set twice (first on line %d)", *first);
		return;
	}
	*first = p->lineno;
	if (*value == '\0') {
		rlg_key_problem(p, k, "must not be empty");
		return;
	}
	k->set(p, k, value);
}

/*
 * A "[section]" header, inner the name between the brackets: the section
 * the next keys go to, or why there is none.
 */
static void
rlg_section_line(struct rlg_parse *p, const char *inner)
{
	const char *pname;

	p->sect = RLG_SECT_BAD;
	if (strcmp(inner, "store") == 0) {
		p->sect = RLG_SECT_STORE;
	} else if (strcmp(inner, "headers") == 0) {
		p->sect = RLG_SECT_HEADERS;
	} else if (strcmp(inner, "response") == 0) {
		p->sect = RLG_SECT_RESPONSE;
	} else if (strcmp(inner, "client") == 0) {
		p->sect = RLG_SECT_CLIENT;
	} else if (strcmp(inner, "log") == 0) {
		p->sect = RLG_SECT_LOG;
	} else if (rlg_sect_is(inner, "policy", &pname)) {
		if (*pname == '\0')
			rlg_problem(p, p->lineno, "section [policy] has no name "
			    "(expected [policy NAME])");
		else
			rlg_policy_section(p, pname);
	} else if (rlg_sect_is(inner, "route", &pname)) {
		if (*pname == '\0')
			rlg_problem(p, p->lineno, "section [route] has no name "
			    "(expected [route NAME])");
		else
			rlg_route_section(p, pname);
	} else {
		rlg_problem(p, p->lineno, "unknown section [%s]", inner);
	}
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
 * A "[policy NAME]" header with a non-empty name: the policy of that name,
 * a new one (with the defaults) if it is the first such section, or a
 * reported problem (a bad name, one policy too many).
 */
static void
rlg_policy_section(struct rlg_parse *p, const char *name)
{
	struct rlg_policy *pol;
	size_t i, len;

	if (!rlg_section_name_ok(p, "policy", name))
		return;
	len = strlen(name);
	if (len >= sizeof RLG_NEW_KEYS_SUFFIX - 1 &&
	    strcmp(name + len - (sizeof RLG_NEW_KEYS_SUFFIX - 1),
	    RLG_NEW_KEYS_SUFFIX) == 0) {
		rlg_problem(p, p->lineno, "bad policy name \"%s\": names "
		    "ending in \"%s\" are rlgate's own (the bound on new "
		    "keys of a policy)", name, RLG_NEW_KEYS_SUFFIX);
		return;
	}
	for (i = 0; i < p->npols; i++) {
		if (strcmp(p->pols[i].name, name) == 0) {
			p->sect = RLG_SECT_POLICY;
			p->cur = i;
			return;
		}
	}
	if (p->npols == RLG_POLICIES_MAX) {
		/* Once: every section after it is one too many as well. */
		if (!p->too_many)
			rlg_problem(p, p->lineno, "too many policies: "
			    "[policy %s] would be number %d, at most %d are "
			    "allowed", name, RLG_POLICIES_MAX + 1,
			    RLG_POLICIES_MAX);
		p->too_many = true;
		return;
	}
	pol = &p->pols[p->npols];
	pol->name = rlg_xstrdup(name);
	pol->algorithm = RLG_ALG_FIXED_WINDOW;
	pol->limit = RLG_DEFAULT_LIMIT;
	pol->window_ms = (int64_t)RLG_DEFAULT_WINDOW_S * 1000;
	pol->burst = 0;        /* until the end: the limit, unless set */
	pol->key = RLG_KEY_IP;
	pol->mode = RLG_MODE_ENFORCE;
	pol->new_keys = RLG_DEFAULT_NEW_KEYS;
	snprintf(p->builds[p->npols].label, sizeof p->builds[p->npols].label,
	    "[policy %s]", name);
	p->sect = RLG_SECT_POLICY;
	p->cur = p->npols++;
}

/*
 * A "[route NAME]" header with a non-empty name: the route of that name, a
 * new one if it is the first such section, or a reported problem (a bad
 * name, one route too many). Like rlg_policy_section.
 */
static void
rlg_route_section(struct rlg_parse *p, const char *name)
{
	struct rlg_route_build *b;
	size_t i;

	if (!rlg_section_name_ok(p, "route", name))
		return;
	for (i = 0; i < p->nroutes; i++) {
		if (strcmp(p->routes[i].name, name) == 0) {
			p->sect = RLG_SECT_ROUTE;
			p->cur = i;
			return;
		}
	}
	if (p->nroutes == RLG_ROUTES_MAX) {
		if (!p->too_many_routes)
			rlg_problem(p, p->lineno, "too many routes: "
			    "[route %s] would be number %d, at most %d are "
			    "allowed", name, RLG_ROUTES_MAX + 1,
			    RLG_ROUTES_MAX);
		p->too_many_routes = true;
		return;
	}
	p->routes[p->nroutes].name = rlg_xstrdup(name);
	b = &p->rbuilds[p->nroutes];
	snprintf(b->label, sizeof b->label, "[route %s]", name);
	b->line = p->lineno;
	p->sect = RLG_SECT_ROUTE;
	p->cur = p->nroutes++;
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
	const char *s;

	for (s = name; *s != '\0'; s++) {
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		    (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' ||
		    *s == '-')) {
			rlg_problem(p, p->lineno, "bad %s name \"%s\": "
			    "only A-Z a-z 0-9 _ . - are allowed", kind, name);
			return false;
		}
	}
	if ((size_t)(s - name) > RLG_POLICY_NAME_MAX) {
		rlg_problem(p, p->lineno, "bad %s name \"%s\": at most %d "
		    "bytes (got %zu)", kind, name, RLG_POLICY_NAME_MAX,
		    (size_t)(s - name));
		return false;
	}
	return true;
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
	struct rlg_policy *pol;
	struct rlg_policy_build *b;
	size_t i, alg_key;
	bool secret_set;

	alg_key = rlg_key_index(RLG_SECT_POLICY, "algorithm");
	/* A key_secret that was set but bad is reported for itself. */
	secret_set = *rlg_first_line(p, 0,
	    rlg_key_index(RLG_SECT_CLIENT, "key_secret")) != 0;
	for (i = 0; i < p->npols; i++) {
		pol = &p->pols[i];
		b = &p->builds[i];
		if (b->burst_line == 0)
			pol->burst = pol->limit;
		if (b->key_line != 0 && (pol->key & RLG_KEY_HEADER) != 0 &&
		    !secret_set)
			rlg_problem(p, b->key_line, "%s key: header keys are "
			    "stored hashed: set [client] key_secret (at least "
			    "%d random bytes, e.g. openssl rand -hex 32)",
			    b->label, RLG_KEY_SECRET_MIN);
		if (!b->algorithm_ok && *rlg_first_line(p, 1 + i, alg_key) != 0)
			continue;
		if (b->burst_line != 0 && pol->algorithm != RLG_ALG_TOKEN_BUCKET)
			rlg_problem(p, b->burst_line, "%s burst: applies only "
			    "to algorithm = token_bucket", b->label);
		if (b->limit_line != 0 && pol->algorithm == RLG_ALG_SLIDING_LOG &&
		    pol->limit > RLG_SLIDING_LOG_LIMIT_MAX)
			rlg_problem(p, b->limit_line, "%s limit: sliding_log "
			    "keeps one row per request: at most %lld "
			    "(got \"%lld\")", b->label,
			    (long long)RLG_SLIDING_LOG_LIMIT_MAX,
			    (long long)pol->limit);
	}
	for (i = 0; i < p->npols; i++)
		rlg_new_keys_policy(p, &p->pols[i], &p->builds[i]);
	if (p->npols == 0) {
		free(p->pols);
		free(p->builds);
		return;
	}
	for (i = 0; i < p->cfg->npolicies; i++)
		rlg_policy_free_fields(&p->cfg->policies[i]);
	free(p->cfg->policies);
	p->cfg->policies = rlg_xcalloc(p->npols, sizeof *p->cfg->policies);
	memcpy(p->cfg->policies, p->pols, p->npols * sizeof *p->pols);
	p->cfg->npolicies = p->npols;
	free(p->pols);
	free(p->builds);
}

/*
 * The bound on new keys of a policy keyed by a header: a fixed window of
 * new_keys per the policy's window, counted per client address under its
 * own name, NAME.new_keys (the store charges it only for a key it holds
 * no live state for; see struct rlg_store_item). Without a header key
 * there is nothing to mint: the key is reported if set, ignored if not.
 */
static void
rlg_new_keys_policy(struct rlg_parse *p, struct rlg_policy *pol,
    const struct rlg_policy_build *b)
{
	struct rlg_policy *charge;
	size_t len;

	if ((pol->key & RLG_KEY_HEADER) == 0) {
		if (b->new_keys_line != 0)
			rlg_problem(p, b->new_keys_line, "%s new_keys_per_ip: "
			    "applies only to a key with header:NAME",
			    b->label);
		return;
	}
	/*
	 * One address may then hold every row the store allows: say so
	 * (the bound's window may be short, so this is no error).
	 */
	if (p->cfg->store.backend == RLG_BACKEND_SQLITE &&
	    p->cfg->store.max_clients > 0 &&
	    (pol->new_keys == 0 || pol->new_keys >= p->cfg->store.max_clients)) {
		rlg_problem(p, b->new_keys_line != 0 ? b->new_keys_line :
		    b->key_line, "%s new_keys_per_ip: %lld%s lets one "
		    "address start as many keys as [store] max_clients (%lld) "
		    "holds, and lock every new client out", b->label,
		    (long long)pol->new_keys,
		    pol->new_keys == 0 ? " (no bound)" : "",
		    (long long)p->cfg->store.max_clients);
		p->problems[p->nproblems - 1].warning = true;
	}
	if (pol->new_keys == 0)
		return;
	charge = rlg_xcalloc(1, sizeof *charge);
	len = strlen(pol->name) + sizeof RLG_NEW_KEYS_SUFFIX;
	charge->name = rlg_xmalloc(len);
	snprintf(charge->name, len, "%s%s", pol->name, RLG_NEW_KEYS_SUFFIX);
	charge->algorithm = RLG_ALG_FIXED_WINDOW;
	charge->limit = pol->new_keys;
	charge->window_ms = pol->window_ms;
	charge->burst = pol->new_keys;
	charge->key = RLG_KEY_IP;
	charge->mode = pol->mode;
	pol->new_keys_policy = charge;
}

/*
 * After the policies are final: each route's policy names become indexes
 * (an unknown name is reported at the route's policies line), a route
 * without path or policies is reported at its header, and the routes of
 * the file go to the config, with the policies of a request that matches
 * none of them.
 */
static void
rlg_routes_finish(struct rlg_parse *p)
{
	struct rlg_config *cfg = p->cfg;
	struct rlg_route_build *b;
	struct rlg_route *r;
	size_t i, j, n, path_key, pols_key;

	path_key = rlg_key_index(RLG_SECT_ROUTE, "path");
	pols_key = rlg_key_index(RLG_SECT_ROUTE, "policies");
	for (i = 0; i < p->nroutes; i++) {
		r = &p->routes[i];
		b = &p->rbuilds[i];
		if (*rlg_first_line(p, 1 + RLG_POLICIES_MAX + i, path_key) == 0)
			rlg_problem(p, b->line, "%s has no path: set path = "
			    "/PATH (or /PREFIX* for a prefix)", b->label);
		if (*rlg_first_line(p, 1 + RLG_POLICIES_MAX + i, pols_key) == 0)
			rlg_problem(p, b->line, "%s has no policies: set "
			    "policies = NAME, ... (or policies = none: not "
			    "limited)", b->label);
		if (b->nnames > 0)
			r->policies = rlg_xcalloc(b->nnames,
			    sizeof *r->policies);
		for (j = 0; j < b->nnames; j++) {
			for (n = 0; n < cfg->npolicies; n++)
				if (strcmp(cfg->policies[n].name,
				    b->names[j]) == 0)
					break;
			if (n == cfg->npolicies)
				rlg_problem(p, b->policies_line, "%s policies: "
				    "no [policy %s]", b->label, b->names[j]);
			else
				r->policies[r->npolicies++] = n;
		}
		rlg_list_free(b->names, b->nnames);
	}
	if (p->nroutes > 0) {
		cfg->routes = rlg_xcalloc(p->nroutes, sizeof *cfg->routes);
		memcpy(cfg->routes, p->routes, p->nroutes * sizeof *p->routes);
		cfg->nroutes = p->nroutes;
	}
	free(p->routes);
	free(p->rbuilds);

	free(cfg->default_policies);
	cfg->default_policies = NULL;
	cfg->ndefault = 0;
	if (cfg->nroutes == 0) {
		cfg->default_policies = rlg_xcalloc(cfg->npolicies,
		    sizeof *cfg->default_policies);
		for (i = 0; i < cfg->npolicies; i++)
			cfg->default_policies[i] = i;
		cfg->ndefault = cfg->npolicies;
		return;
	}
	for (i = 0; i < cfg->npolicies; i++) {
		if (strcmp(cfg->policies[i].name, "default") == 0) {
			cfg->default_policies = rlg_xcalloc(1,
			    sizeof *cfg->default_policies);
			cfg->default_policies[0] = i;
			cfg->ndefault = 1;
			break;
		}
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
	const struct rlg_store_config *sc = &p->cfg->store;
	const struct {
		const char *name;
		int line;
	} redis_only[] = {
		{ "url", p->url_line },
		{ "connect_timeout_ms", p->connect_timeout_line },
		{ "timeout_ms", p->timeout_line },
		{ "clock", p->clock_line },
	};
	bool cluster = sc->redis_cluster;
	size_t i;

	if (p->backend_bad)
		return;
	if (sc->backend == RLG_BACKEND_SQLITE) {
		for (i = 0; i < sizeof redis_only / sizeof redis_only[0]; i++)
			if (redis_only[i].line != 0)
				rlg_problem(p, redis_only[i].line, "[store] %s: "
				    "applies only to backend = redis or "
				    "redis_cluster", redis_only[i].name);
		return;
	}
	/* A url that was set but bad is reported for itself. */
	if (p->url_line == 0 && *rlg_first_line(p, 0,
	    rlg_key_index(RLG_SECT_STORE, "url")) == 0)
		rlg_problem(p, p->backend_line, cluster ? "[store] backend: "
		    "redis_cluster needs [store] url = redis://HOST:PORT"
		    "[,HOST:PORT...] (seed nodes)" : "[store] backend: redis "
		    "needs [store] url = redis://HOST:PORT or unix:/PATH");
	if (p->url_line != 0 && !cluster && sc->redis_nseeds > 0)
		rlg_problem(p, p->url_line, "[store] url: several HOST:PORT "
		    "are the seed nodes of a Redis Cluster: set backend = "
		    "redis_cluster, or name one server");
	if (p->url_line != 0 && cluster && sc->redis_socket != NULL)
		rlg_problem(p, p->url_line, "[store] url: backend = "
		    "redis_cluster needs redis://HOST:PORT[,HOST:PORT...]: "
		    "cluster nodes talk TCP");
	if (p->url_line != 0 && cluster && sc->redis_db != 0)
		rlg_problem(p, p->url_line, "[store] url: a Redis Cluster has "
		    "database 0 only (got /%d)", sc->redis_db);
	if (p->max_clients_line != 0)
		rlg_problem(p, p->max_clients_line, "[store] max_clients: "
		    "applies only to backend = sqlite: Redis memory is bounded "
		    "by its maxmemory and by the expiry of the keys");
	if (p->synchronous_line != 0)
		rlg_problem(p, p->synchronous_line, "[store] synchronous: "
		    "applies only to backend = sqlite: Redis durability is its"
		    " own appendfsync");
	if (p->group_commit_line != 0)
		rlg_problem(p, p->group_commit_line, "[store] group_commit: "
		    "applies only to backend = sqlite");
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
	rlg_list_free(r->methods, r->nmethods);
	free(r->policies);
}

/* The policy the current [policy NAME] section sets. */
static struct rlg_policy *
rlg_cur_policy(struct rlg_parse *p)
{
	assert(p->sect == RLG_SECT_POLICY && p->cur < p->npols);
	return &p->pols[p->cur];
}

static struct rlg_policy_build *
rlg_cur_build(struct rlg_parse *p)
{
	assert(p->sect == RLG_SECT_POLICY && p->cur < p->npols);
	return &p->builds[p->cur];
}

/* The route the current [route NAME] section sets. */
static struct rlg_route *
rlg_cur_route(struct rlg_parse *p)
{
	assert(p->sect == RLG_SECT_ROUTE && p->cur < p->nroutes);
	return &p->routes[p->cur];
}

static struct rlg_route_build *
rlg_cur_rbuild(struct rlg_parse *p)
{
	assert(p->sect == RLG_SECT_ROUTE && p->cur < p->nroutes);
	return &p->rbuilds[p->cur];
}

/* Where the first line of rlg_keys[key] in scope is kept (see first_line). */
static int *
rlg_first_line(struct rlg_parse *p, size_t scope, size_t key)
{
	assert(scope < RLG_NSCOPES && key < RLG_NKEYS);
	return &p->first_line[scope * RLG_NKEYS + key];
}

/* The index in rlg_keys of a key that is there. */
static size_t
rlg_key_index(enum rlg_sect sect, const char *name)
{
	size_t i;

	for (i = 0; i < RLG_NKEYS; i++)
		if (rlg_keys[i].sect == sect &&
		    strcmp(rlg_keys[i].name, name) == 0)
			return i;
	assert(!"no such key in rlg_keys");
	return 0;
}

/* How the current section is named in the messages. */
static const char *
rlg_sect_label(const struct rlg_parse *p)
{
	switch (p->sect) {
	case RLG_SECT_STORE:
		return "[store]";
	case RLG_SECT_HEADERS:
		return "[headers]";
	case RLG_SECT_RESPONSE:
		return "[response]";
	case RLG_SECT_CLIENT:
		return "[client]";
	case RLG_SECT_LOG:
		return "[log]";
	case RLG_SECT_POLICY:
		return p->builds[p->cur].label;
	case RLG_SECT_ROUTE:
		return p->rbuilds[p->cur].label;
	case RLG_SECT_NONE:
	case RLG_SECT_BAD:
		break;
	}
	return "[?]";
}

/* Notes one problem on line (0: the whole file). */
static void
rlg_problem(struct rlg_parse *p, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rlg_vproblem(p, line, fmt, ap);
	va_end(ap);
}

static void
rlg_vproblem(struct rlg_parse *p, int line, const char *fmt, va_list ap)
{
	struct rlg_problem *grown;

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
	p->problems[p->nproblems].msg = rlg_vformat(fmt, ap);
	p->nproblems++;
}

/* A problem with the value of key k, of the current section, on the
 * current line: "[section] key: ...". */
static void
rlg_key_problem(struct rlg_parse *p, const struct rlg_key *k,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rlg_key_vproblem(p, k, false, fmt, ap);
	va_end(ap);
}

/* Like rlg_key_problem, but a warning: printed, not counted. */
static void
rlg_key_warning(struct rlg_parse *p, const struct rlg_key *k,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rlg_key_vproblem(p, k, true, fmt, ap);
	va_end(ap);
}

static void
rlg_key_vproblem(struct rlg_parse *p, const struct rlg_key *k, bool warning,
    const char *fmt, va_list ap)
{
	char *msg = rlg_vformat(fmt, ap);

	assert(k->sect == p->sect);
	rlg_problem(p, p->lineno, "%s %s: %s", rlg_sect_label(p), k->name,
	    msg);
	p->problems[p->nproblems - 1].warning = warning;
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

/*
 * A whole decimal integer from min to max: digits only (no sign, no space,
 * no unit), nothing after them. Returns false on anything else.
 */
static bool
rlg_parse_int(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* The entry of words (ended by a NULL name) named s, or NULL. */
static const struct rlg_word *
rlg_word_find(const char *s, const struct rlg_word *words)
{
	for (; words->name != NULL; words++)
		if (strcmp(s, words->name) == 0)
			return words;
	return NULL;
}

/* The names of words as a new string "a, b, c", for the messages. */
static char *
rlg_word_list(const struct rlg_word *words)
{
	const struct rlg_word *w;
	size_t len = 1, at = 0, n;
	char *s;

	for (w = words; w->name != NULL; w++)
		len += strlen(w->name) + 2;
	s = rlg_xmalloc(len);
	for (w = words; w->name != NULL; w++) {
		if (w != words) {
			memcpy(s + at, ", ", 2);
			at += 2;
		}
		n = strlen(w->name);
		memcpy(s + at, w->name, n);
		at += n;
	}
	s[at] = '\0';
	return s;
}

/*
 * Stores the value of the word value in *out and returns true, or reports
 * "must be one of ..." and returns false.
 */
static bool
rlg_set_word(struct rlg_parse *p, const struct rlg_key *k, const char *value,
    const struct rlg_word *words, int *out)
{
	const struct rlg_word *w;
	char *list;

	w = rlg_word_find(value, words);
	if (w != NULL) {
		*out = w->value;
		return true;
	}
	list = rlg_word_list(words);
	rlg_key_problem(p, k, "must be one of %s (got \"%s\")", list, value);
	free(list);
	return false;
}

/* Parses an integer value of k into *out, or reports it; *ok tells. */
static void
rlg_set_int(struct rlg_parse *p, const struct rlg_key *k, const char *value,
    long long min, long long max, long long *out, bool *ok)
{
	*ok = rlg_parse_int(value, min, max, out);
	if (!*ok)
		rlg_key_problem(p, k, "must be an integer from %lld to %lld "
		    "(got \"%s\")", min, max, value);
}

static void
rlg_set_store_path(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	size_t len = strlen(value);

	if (len > RLG_CONFIG_PATH_MAX) {
		rlg_key_problem(p, k, "must be at most %d bytes long "
		    "(got %zu bytes)", RLG_CONFIG_PATH_MAX, len);
		return;
	}
	free(p->cfg->store.path);
	p->cfg->store.path = rlg_xstrdup(value);
}

static void
rlg_set_busy_timeout(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 0, RLG_BUSY_TIMEOUT_MS_MAX, &v, &ok);
	if (ok)
		p->cfg->store.busy_timeout_ms = (int)v;
}

static void
rlg_set_max_clients(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 0, RLG_MAX_CLIENTS_MAX, &v, &ok);
	if (ok) {
		p->cfg->store.max_clients = v;
		p->max_clients_line = p->lineno;
	}
}

static void
rlg_set_rejection_cache(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 0, RLG_REJECTION_CACHE_MAX, &v, &ok);
	if (ok)
		p->cfg->store.rejection_cache = v;
}

static void
rlg_set_on_error(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_on_error_words, &v))
		p->cfg->store.on_error = (enum rlg_on_error)v;
}

/*
 * backend, url, connect_timeout_ms, timeout_ms and clock are checked
 * against each other at the end (rlg_store_finish): the keys may come in
 * any order.
 */
static void
rlg_set_backend(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_backend_words, &v)) {
		p->cfg->store.redis_cluster = v == RLG_BACKEND_WORD_CLUSTER;
		p->cfg->store.backend = v == RLG_BACKEND_WORD_CLUSTER ?
		    RLG_BACKEND_REDIS : (enum rlg_store_backend)v;
		p->backend_line = p->lineno;
	} else {
		p->backend_bad = true;
	}
}

/* The message quotes the url with its password masked: errors are logged. */
static void
rlg_set_url(struct rlg_parse *p, const struct rlg_key *k, const char *value)
{
	char why[256], *shown;

	if (rlg_config_redis_url(&p->cfg->store, value, why, sizeof why) == 0) {
		p->url_line = p->lineno;
		return;
	}
	shown = rlg_url_masked(value);
	rlg_key_problem(p, k, "%s (got \"%s\")", why, shown);
	free(shown);
}

static void
rlg_set_connect_timeout(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 1, RLG_REDIS_TIMEOUT_MS_MAX, &v, &ok);
	if (ok) {
		p->cfg->store.connect_timeout_ms = (int)v;
		p->connect_timeout_line = p->lineno;
	}
}

static void
rlg_set_timeout(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 1, RLG_REDIS_TIMEOUT_MS_MAX, &v, &ok);
	if (ok) {
		p->cfg->store.timeout_ms = (int)v;
		p->timeout_line = p->lineno;
	}
}

static void
rlg_set_clock(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_clock_words, &v)) {
		p->cfg->store.clock = (enum rlg_store_clock)v;
		p->clock_line = p->lineno;
	}
}

static void
rlg_set_synchronous(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_sync_words, &v)) {
		p->cfg->store.synchronous = (enum rlg_sync)v;
		p->synchronous_line = p->lineno;
	}
}

static void
rlg_set_group_commit(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_group_words, &v)) {
		p->cfg->store.group_commit = (enum rlg_group)v;
		p->group_commit_line = p->lineno;
	}
}

static void
rlg_set_style(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_style_words, &v))
		p->cfg->style = (enum rlg_header_style)v;
}

static void
rlg_set_errors(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_error_format_words, &v))
		p->cfg->errors = (enum rlg_error_format)v;
}

static void
rlg_set_algorithm(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	const struct rlg_word *w;
	char *list;

	w = rlg_word_find(value, rlg_algorithm_words);
	if (w != NULL) {
		rlg_cur_policy(p)->algorithm = (enum rlg_algorithm)w->value;
		rlg_cur_build(p)->algorithm_ok = true;
		return;
	}
	list = rlg_word_list(rlg_algorithm_words);
	rlg_key_problem(p, k, "unknown algorithm (got \"%s\"): must be one "
	    "of %s", value, list);
	free(list);
}

/* The sliding_log cap waits for the end: algorithm may come later. */
static void
rlg_set_limit(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 1, RLG_LIMIT_MAX, &v, &ok);
	if (ok) {
		rlg_cur_policy(p)->limit = v;
		rlg_cur_build(p)->limit_line = p->lineno;
	}
}

static void
rlg_set_window(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 1, RLG_WINDOW_S_MAX, &v, &ok);
	if (ok)
		rlg_cur_policy(p)->window_ms = (int64_t)v * 1000;
}

/* Whether the algorithm takes a burst waits for the end, like the cap. */
static void
rlg_set_burst(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 1, RLG_BURST_MAX, &v, &ok);
	if (ok) {
		rlg_cur_policy(p)->burst = v;
		rlg_cur_build(p)->burst_line = p->lineno;
	}
}

static void
rlg_set_new_keys(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 0, RLG_LIMIT_MAX, &v, &ok);
	if (ok) {
		rlg_cur_policy(p)->new_keys = v;
		rlg_cur_build(p)->new_keys_line = p->lineno;
	}
}

/*
 * key = ip | header:NAME | both, comma-separated in any order. NAME is kept
 * as written (header names compare without case when a request is read).
 * Each bad item is its own problem; the policy changes only if all are
 * good. Whether a key_secret is there waits for the end.
 */
static void
rlg_set_key(struct rlg_parse *p, const struct rlg_key *k, const char *value)
{
	struct rlg_policy *pol = rlg_cur_policy(p);
	const char *header = NULL, *name;
	unsigned bits = 0;
	char **items;
	size_t i, n, len;
	bool ok = true;

	if (!rlg_list_split(p, k, value, 2, "items", &items, &n))
		return;
	for (i = 0; i < n; i++) {
		if (strcmp(items[i], "ip") == 0) {
			if ((bits & RLG_KEY_IP) != 0) {
				rlg_key_problem(p, k, "ip given twice "
				    "(got \"%s\")", value);
				ok = false;
			}
			bits |= RLG_KEY_IP;
			continue;
		}
		if (strncmp(items[i], "header:", 7) != 0 ||
		    items[i][7] == '\0') {
			rlg_key_problem(p, k, "must be one of ip, header:NAME "
			    "(got \"%s\")", items[i]);
			ok = false;
			continue;
		}
		name = items[i] + 7;
		len = strlen(name);
		if (!rlg_header_name_ok(name)) {
			rlg_key_problem(p, k, "header name must be an HTTP "
			    "token: A-Z a-z 0-9 and !#$%%&'*+-.^_`|~ "
			    "(got \"%s\")", name);
			ok = false;
		} else if (len > RLG_HEADER_NAME_MAX) {
			rlg_key_problem(p, k, "header name must be at most "
			    "%d bytes (got %zu)", RLG_HEADER_NAME_MAX, len);
			ok = false;
		} else if (header != NULL) {
			rlg_key_problem(p, k, "at most one header:NAME "
			    "(got \"%s\")", value);
			ok = false;
		}
		header = name;
		bits |= RLG_KEY_HEADER;
	}
	if (ok) {
		pol->key = bits;
		free(pol->key_header);
		pol->key_header = header != NULL ? rlg_xstrdup(header) : NULL;
		rlg_cur_build(p)->key_line = p->lineno;
	}
	rlg_list_free(items, n);
}

static void
rlg_set_mode(struct rlg_parse *p, const struct rlg_key *k, const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_mode_words, &v))
		rlg_cur_policy(p)->mode = (enum rlg_mode)v;
}

static void
rlg_set_policy_exempt(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	struct rlg_policy *pol = rlg_cur_policy(p);

	rlg_set_cidrs(p, k, value, &pol->exempt, &pol->nexempt);
}

static void
rlg_set_trusted_proxies(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	const struct rlg_client_config *cc = &p->cfg->client;
	size_t i;

	rlg_set_cidrs(p, k, value, &p->cfg->client.trusted_proxies,
	    &p->cfg->client.ntrusted);
	/*
	 * 0.0.0.0/0 (or ::/0) believes every peer's forwarding header: any
	 * client then names its own key. Allowed (a front that strips and
	 * sets the header, with rlgate reachable only through it), said.
	 * An IPv4 network is stored over 16 bytes: /0 is 96 there.
	 */
	for (i = 0; i < cc->ntrusted; i++) {
		const struct rlg_cidr *n = &cc->trusted_proxies[i];

		if (n->prefix_len == 0 ||
		    (n->addr.v4 && n->prefix_len <= 96)) {
			rlg_key_warning(p, k, "%s trusts every peer: any "
			    "client that reaches rlgate directly chooses its "
			    "own key with a forwarding header; list only your "
			    "proxies", n->addr.v4 ? "0.0.0.0/0" : "::/0");
			break;
		}
	}
}

static void
rlg_set_ipv6_prefix(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	long long v;
	bool ok;

	rlg_set_int(p, k, value, 1, 128, &v, &ok);
	if (ok)
		p->cfg->client.ipv6_prefix = (int)v;
}

static void
rlg_set_client_exempt(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	rlg_set_cidrs(p, k, value, &p->cfg->client.exempt,
	    &p->cfg->client.nexempt);
}

/* A secret: the message gives its length, never the value. */
static void
rlg_set_key_secret(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	size_t len = strlen(value);

	if (len < RLG_KEY_SECRET_MIN) {
		rlg_key_problem(p, k, "must be at least %d bytes (got %zu "
		    "bytes)", RLG_KEY_SECRET_MIN, len);
		return;
	}
	free(p->cfg->client.key_secret);
	p->cfg->client.key_secret = rlg_xstrdup(value);
}

static void
rlg_set_report_exempt(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_yes_no_words, &v))
		p->cfg->report_exempt = v != 0;
}

/*
 * Only the header the trusted proxies set is read: one they merely pass
 * through would let a client choose its own key.
 */
static void
rlg_set_forwarded_header(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_forwarded_words, &v))
		p->cfg->client.forwarded_header = (enum rlg_forwarded_header)v;
}

static void
rlg_set_log_level(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	int v;

	if (rlg_set_word(p, k, value, rlg_log_level_words, &v))
		p->cfg->log_level = (enum rlg_log_level)v;
}

/* "/exact" or "/prefix*": a '*' only at the end, stored without it. */
static void
rlg_set_route_path(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	struct rlg_route *r = rlg_cur_route(p);
	const char *star;
	size_t len = strlen(value);

	if (value[0] != '/') {
		rlg_key_problem(p, k, "must start with \"/\" (got \"%s\")",
		    value);
		return;
	}
	star = strchr(value, '*');
	if (star != NULL && star != value + len - 1) {
		rlg_key_problem(p, k, "\"*\" may only end the path, for a "
		    "prefix match (got \"%s\")", value);
		return;
	}
	free(r->path);
	r->path = rlg_xstrdup(value);
	r->prefix = star != NULL;
	if (r->prefix)
		r->path[len - 1] = '\0';
}

/* Method names as a request carries them: uppercase letters, no repeat. */
static void
rlg_set_route_methods(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	struct rlg_route *r = rlg_cur_route(p);
	const char *c;
	char **items;
	size_t i, j, n;
	bool ok = true;

	if (!rlg_list_split(p, k, value, RLG_ROUTE_METHODS_MAX, "methods",
	    &items, &n))
		return;
	for (i = 0; i < n; i++) {
		for (c = items[i]; *c >= 'A' && *c <= 'Z';)
			c++;
		if (*c != '\0') {
			rlg_key_problem(p, k, "not a method: uppercase "
			    "letters only (got \"%s\")", items[i]);
			ok = false;
			continue;
		}
		for (j = 0; j < i; j++) {
			if (strcmp(items[j], items[i]) == 0) {
				rlg_key_problem(p, k, "%s given twice "
				    "(got \"%s\")", items[i], value);
				ok = false;
				break;
			}
		}
	}
	if (!ok) {
		rlg_list_free(items, n);
		return;
	}
	rlg_list_free(r->methods, r->nmethods);
	r->methods = items;
	r->nmethods = n;
}

/*
 * Policy names, resolved at the end (a [policy] may come later), or
 * "none" alone: the route is not limited.
 */
static void
rlg_set_route_policies(struct rlg_parse *p, const struct rlg_key *k,
    const char *value)
{
	struct rlg_route_build *b = rlg_cur_rbuild(p);
	char **items;
	size_t i, j, n;
	bool ok = true;

	if (!rlg_list_split(p, k, value, RLG_POLICIES_MAX, "policies",
	    &items, &n))
		return;
	for (i = 0; i < n; i++) {
		if (strcmp(items[i], "none") == 0 && n > 1) {
			rlg_key_problem(p, k, "none must stand alone "
			    "(got \"%s\")", value);
			ok = false;
			break;
		}
		for (j = 0; j < i; j++) {
			if (strcmp(items[j], items[i]) == 0) {
				rlg_key_problem(p, k, "[policy %s] given "
				    "twice (got \"%s\")", items[i], value);
				ok = false;
				break;
			}
		}
	}
	if (!ok) {
		rlg_list_free(items, n);
		return;
	}
	b->policies_line = p->lineno;
	if (n == 1 && strcmp(items[0], "none") == 0) {
		rlg_list_free(items, n);
		return;
	}
	b->names = items;
	b->nnames = n;
}

/*
 * Splits value at commas into trimmed items (a new array of new strings,
 * free with rlg_list_free). Reports an empty item, or more than max of
 * them (what names them in the message), and returns false.
 */
static bool
rlg_list_split(struct rlg_parse *p, const struct rlg_key *k,
    const char *value, size_t max, const char *what, char ***items,
    size_t *n)
{
	const char *s, *e, *comma;
	size_t count = 1, i;
	char **v;

	for (s = value; *s != '\0'; s++)
		if (*s == ',')
			count++;
	if (count > max) {
		rlg_key_problem(p, k, "at most %zu %s (got %zu)", max, what,
		    count);
		return false;
	}
	v = rlg_xcalloc(count, sizeof *v);
	s = value;
	for (i = 0; i < count; i++) {
		comma = strchr(s, ',');
		e = comma != NULL ? comma : s + strlen(s);
		while (s < e && isspace((unsigned char)*s))
			s++;
		while (e > s && isspace((unsigned char)e[-1]))
			e--;
		if (e == s) {
			rlg_key_problem(p, k, "empty item in the list "
			    "(got \"%s\")", value);
			rlg_list_free(v, i);
			return false;
		}
		v[i] = rlg_xmalloc((size_t)(e - s) + 1);
		memcpy(v[i], s, (size_t)(e - s));
		v[i][e - s] = '\0';
		if (comma != NULL)
			s = comma + 1;
	}
	*items = v;
	*n = count;
	return true;
}

static void
rlg_list_free(char **items, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(items[i]);
	free(items);
}

/* An HTTP token (RFC 9110 tchar), not empty. */
static bool
rlg_header_name_ok(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		    (*s >= '0' && *s <= '9') ||
		    strchr("!#$%&'*+-.^_`|~", *s) != NULL))
			return false;
	return true;
}

/*
 * A list of networks (rlg_cidr_parse) into a new array *nets of *n. Each
 * bad item is its own problem; nothing is stored unless all are good.
 */
static void
rlg_set_cidrs(struct rlg_parse *p, const struct rlg_key *k,
    const char *value, struct rlg_cidr **nets, size_t *n)
{
	struct rlg_cidr *v;
	char **items;
	size_t i, count;
	bool ok = true;

	if (!rlg_list_split(p, k, value, RLG_CIDRS_MAX, "networks", &items,
	    &count))
		return;
	v = rlg_xcalloc(count, sizeof *v);
	for (i = 0; i < count; i++) {
		if (rlg_cidr_parse(items[i], &v[i]) != 0) {
			rlg_key_problem(p, k, "not an IP address or "
			    "ADDR/LEN network with zero host bits "
			    "(got \"%s\")", items[i]);
			ok = false;
		}
	}
	rlg_list_free(items, count);
	if (!ok) {
		free(v);
		return;
	}
	free(*nets);
	*nets = v;
	*n = count;
}
