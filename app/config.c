/*
 * config.c: the config's own values and the small pieces every part of
 * the config module shares: the built-in defaults, choosing the file,
 * freeing a config, the questions the rest of rlgate asks of a loaded
 * one (why commit = auto means each, whether the store's keys changed on
 * a reload, whether the database's directory is usable), and the loader's
 * problem list with its "did you mean" suggestions.
 *
 * The lowest file of the config: the others build on it and it calls
 * none of them.
 *   config_load.c     reading the file line by line into the structs
 *   config_check.c    the checks across keys, once the file is read
 *   config_tier.c     the [tier NAME] sections
 *   config_options.c  the option table, the names of enum values
 *   config_set.c      the setters of the table's rows
 * They share the loader's state (struct rlg_parse) through
 * config_priv.h.
 */
#include <assert.h>
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
#include "store_backends.h"
#include "util.h"

static size_t rlg_edit_distance(const char *a, const char *b);
static char *rlg_vformat(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
static bool rlg_same_str(const char *a, const char *b);

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
struct rlg_config *
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
	cfg->store.sync_ms = RLG_DEFAULT_SYNC_MS;
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
	cfg->max_parked = RLG_DEFAULT_MAX_PARKED;
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
	free(cfg->client.jwt_key_file);
	free(cfg->client.jwt_key);
	free(cfg->admin.allow);
	free(cfg->admin.prefix);
	free(cfg);
}

void
rlg_section_again(struct rlg_parse *p, const char *label, int first)
{
	rlg_problem(p, p->lineno, "%s again (first on line %d): its keys merge "
	    "into that one; a copy meant as another one needs a name of its "
	    "own", label, first);
	p->problems[p->nproblems - 1].warning = true;
}

/* A policy named name (copied) with the built-in values; burst and
 * new_keys are the caller's. */
void
rlg_policy_init(struct rlg_policy *pol, const char *name)
{
	pol->name = rlg_xstrdup(name);
	pol->lim.algorithm = RLG_ALG_FIXED_WINDOW;
	pol->lim.limit = RLG_DEFAULT_LIMIT;
	pol->lim.window_ms = (int64_t)RLG_DEFAULT_WINDOW_S * 1000;
	pol->key = RLG_KEY_IP;
	pol->mode = RLG_MODE_ENFORCE;
}

bool
rlg_config_why_each(const struct rlg_config *cfg, char *why, size_t size)
{
	const struct rlg_sqlite_config *sq = &cfg->store.sqlite;
	int64_t kept = rlg_table_policies(cfg);
	size_t i;

	for (i = 0; i < cfg->npolicies; i++)
		if (rlg_policy_alg(&cfg->policies[i])->keeps_log) {
			snprintf(why, size, "[policy %s] is a %s, "
			    "whose log lives in the database",
			    cfg->policies[i].name,
			    rlg_policy_alg(&cfg->policies[i])->name);
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
	/* SQLite's database, or the table of Redis with commit = behind */
	bool file = rlg_backend_has(cfg->store.backend, RLG_BACKEND_FILES);

	if (size > 0)
		msg[0] = '\0';
	if ((!file && sq->commit != RLG_COMMIT_BEHIND) || db == NULL)
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
		    "(uid %ld): rlgate run as it could not keep its %s "
		    "there; check as the user rlgate runs as, or give it the "
		    "directory (chown USER %s)", where,
		    access(dir, W_OK | X_OK) != 0 ? dir : db, (long)getuid(),
		    file ? "database" : "table", dir);
		return -1;
	}
	return 0;
}

/* The policies that keep state in the table: each, and each bound on new
 * keys; at least 1. */
int64_t
rlg_table_policies(const struct rlg_config *cfg)
{
	int64_t kept = 0;
	size_t i;

	for (i = 0; i < cfg->npolicies; i++)
		kept += 1 + (cfg->policies[i].new_keys_policy != NULL);
	return kept > 0 ? kept : 1;
}

/* Frees what a policy owns, not the policy itself. */
void
rlg_policy_free_fields(struct rlg_policy *pol)
{
	free(pol->name);
	free(pol->key_name);
	free(pol->exempt);
	if (pol->new_keys_policy != NULL) {
		free(pol->new_keys_policy->name);
		free(pol->new_keys_policy);
	}
}

/* Frees what a route owns, not the route itself. */
void
rlg_route_free_fields(struct rlg_route *r)
{
	free(r->name);
	free(r->path);
	free(r->match_path);
	rlg_list_free(r->methods, r->nmethods);
	free(r->policies);
	free(r->cost_header);
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
bool
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

/* Two strings alike, NULL only like NULL. */
static bool
rlg_same_str(const char *a, const char *b)
{
	return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

/* One key that a reload compares: whether it differs, and its name. */
struct rlg_key_change {
	bool differs;
	const char *key;
};

/* The name of the first key of c[0..n) that differs, or NULL. */
static const char *
rlg_first_change(const struct rlg_key_change *c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (c[i].differs)
			return c[i].key;
	return NULL;
}

/* Whether two Redis configs name other servers (the url's parts). */
static bool
rlg_url_changed(const struct rlg_redis_config *r,
    const struct rlg_redis_config *t)
{
	size_t i;

	if (!rlg_same_str(r->host, t->host) || r->port != t->port ||
	    !rlg_same_str(r->socket, t->socket) ||
	    !rlg_same_str(r->user, t->user) ||
	    !rlg_same_str(r->master, t->master) ||
	    !rlg_same_str(r->password, t->password) || r->db != t->db ||
	    r->cluster != t->cluster || r->nseeds != t->nseeds)
		return true;
	for (i = 0; i < r->nseeds; i++)
		if (!rlg_same_str(r->seeds[i].host, t->seeds[i].host) ||
		    r->seeds[i].port != t->seeds[i].port)
			return true;
	return false;
}

bool
rlg_config_store_changed(const struct rlg_config *a,
    const struct rlg_config *b, char *what, size_t size)
{
	const struct rlg_store_config *x = &a->store, *y = &b->store;
	const struct rlg_sqlite_config *p = &x->sqlite, *q = &y->sqlite;
	const struct rlg_redis_config *r = &x->redis, *t = &y->redis;
	/* In the order they are reported: the first that differs. */
	const struct rlg_key_change store[] = {
		{ x->backend != y->backend, "backend" },
		{ x->rejection_cache != y->rejection_cache, "rejection_cache" },
		{ x->group_commit != y->group_commit, "group_commit" },
	}, file[] = {
		{ !rlg_same_str(p->path, q->path), "path" },
		{ p->busy_timeout_ms != q->busy_timeout_ms, "busy_timeout_ms" },
		{ p->max_clients != q->max_clients, "max_clients" },
		{ p->synchronous != q->synchronous, "synchronous" },
		{ p->commit != q->commit, "commit (as resolved)" },
		{ p->flush_ms != q->flush_ms, "flush_ms" },
	}, server[] = {
		{ rlg_url_changed(r, t), "url" },
		{ r->connect_timeout_ms != t->connect_timeout_ms,
		  "connect_timeout_ms" },
		{ r->timeout_ms != t->timeout_ms, "timeout_ms" },
		{ r->clock != t->clock, "clock" },
		{ p->commit != q->commit, "commit" },
		{ p->commit == RLG_COMMIT_BEHIND &&
		  !rlg_same_str(p->path, q->path), "path" },
		{ p->commit == RLG_COMMIT_BEHIND &&
		  p->max_clients != q->max_clients, "max_clients" },
		{ x->sync_ms != y->sync_ms, "sync_ms" },
	};
	const char *key;

	key = rlg_first_change(store, sizeof store / sizeof store[0]);
	if (key == NULL && rlg_backend_has(x->backend, RLG_BACKEND_FILES))
		key = rlg_first_change(file, sizeof file / sizeof file[0]);
	else if (key == NULL)
		key = rlg_first_change(server, sizeof server / sizeof server[0]);
	snprintf(what, size, "%s", key != NULL ? key : "");
	return key != NULL;
}

void
rlg_list_free(char **items, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(items[i]);
	free(items);
}

/* The limiter's row for pol's algorithm (always one: the config only
 * stores the words of the algorithms). */
const struct rlg_algorithm_desc *
rlg_policy_alg(const struct rlg_policy *pol)
{
	const struct rlg_algorithm_desc *a;

	a = rlg_algorithm_desc(pol->lim.algorithm);
	assert(a != NULL);
	return a;
}

/* The names of the algorithms that take a burst (smooths: that smooth),
 * for messages: "token_bucket", or "a or b". */
const char *
rlg_burst_algorithms(char *buf, size_t size)
{
	return rlg_algorithms_that(buf, size, false);
}

const char *
rlg_algorithms_that(char *buf, size_t size, bool smooths)
{
	const struct rlg_algorithm_desc *a;
	size_t used = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < RLG_ALG_COUNT; i++) {
		a = rlg_algorithm_desc((enum rlg_algorithm)i);
		if ((smooths ? a->smooths : a->has_burst) && used < size)
			used += (size_t)snprintf(buf + used, size - used,
			    "%s%s", used > 0 ? " or " : "", a->name);
	}
	return buf;
}

void
rlg_tiers_free(struct rlg_tier *tiers, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(tiers[i].name);
		free(tiers[i].clients);
		free(tiers[i].rules);
	}
	free(tiers);
}
