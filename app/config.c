/*
 * config.c: the INI configuration, read line by line by ini.c into the
 * plain structs of config.h, validated key by key over the built-in
 * defaults. Every problem is collected with its line number and all are
 * printed at the end, in line order, so an operator fixes a config in one
 * pass.
 *
 * Options are data: rlg_options holds one row per key (section, name,
 * type, the field it fills, bounds, words, default, one line of doc).
 * Generic setters parse and store integers, words, strings and lists of
 * networks and write the messages; a hand-written setter is there only
 * for a compound value (the Redis url, a policy's key, a route's path,
 * methods and policies) or a check of its own. The names the logs use for
 * enum values come from the same word rows, and the man page and the
 * example config are held to the rows by tests/check_config.c.
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "ini.h"
#include "util.h"

/* The longest store path, in bytes (PATH_MAX less its NUL on Linux). */
#define RLG_CONFIG_PATH_MAX  4095

/* The longest busy_timeout_ms: ten minutes. */
#define RLG_BUSY_TIMEOUT_MS_MAX  600000

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
	 * RLG_POLICIES_MAX + i those of routes[i]. Indexed scope * RLG_NOPTS
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
	bool backend_bad;      /* [store] backend was set to an unknown word */

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
static void rlg_named_section(struct rlg_parse *p, const char *kind,
    const char *name);
static bool rlg_section_name_ok(struct rlg_parse *p, const char *kind,
    const char *name);
static void rlg_policy_init(struct rlg_policy *pol, const char *name);
static void rlg_policies_finish(struct rlg_parse *p);
static void rlg_new_keys_policy(struct rlg_parse *p, struct rlg_policy *pol,
    size_t i);
static void rlg_store_finish(struct rlg_parse *p);
static void rlg_routes_finish(struct rlg_parse *p);
static void rlg_policy_free_fields(struct rlg_policy *pol);
static void rlg_route_free_fields(struct rlg_route *r);
static size_t rlg_option_find(const char *sect, const char *name);
static struct rlg_set_lines *rlg_lines(struct rlg_parse *p, size_t scope,
    const char *sect, const char *name);
static void rlg_problem(struct rlg_parse *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void rlg_key_problem(struct rlg_parse *p, const struct rlg_option *o,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static char *rlg_vformat(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
static int rlg_problem_cmp(const void *a, const void *b);
static bool rlg_parse_int(const char *s, long long min, long long max,
    long long *out);
static const char *rlg_word_name(const struct rlg_word *words, int value);
static const char *rlg_word_list(const struct rlg_word *words, char *buf,
    size_t size);
static bool rlg_list_split(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, size_t max, const char *what, char ***items,
    size_t *n);
static void rlg_list_free(char **items, size_t n);
static void rlg_put_int(void *field, size_t size, long long v);
static bool rlg_set_word(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, const char *unknown, int *out);
static rlg_option_set_fn rlg_set_value, rlg_set_cidrs, rlg_set_backend,
    rlg_set_url, rlg_set_trusted_proxies, rlg_set_algorithm, rlg_set_key,
    rlg_set_route_path, rlg_set_route_methods, rlg_set_route_policies;

/*
 * backend = redis_cluster is the Redis store in its cluster mode: backend
 * RLG_BACKEND_REDIS with redis_cluster set (rlg_set_backend).
 */
#define RLG_BACKEND_WORD_CLUSTER (-1)

/* The words each enum key takes, in the order the messages list them;
 * the first word of a value is its name in the logs. */
static const struct rlg_word rlg_on_error_words[] = {
	{ "closed", RLG_ON_ERROR_CLOSED }, { "open", RLG_ON_ERROR_OPEN },
	{ NULL, 0 }
};
static const struct rlg_word rlg_backend_words[] = {
	{ "sqlite", RLG_BACKEND_SQLITE }, { "redis", RLG_BACKEND_REDIS },
	{ "redis_cluster", RLG_BACKEND_WORD_CLUSTER }, { NULL, 0 }
};
static const struct rlg_word rlg_clock_words[] = {
	{ "redis", RLG_CLOCK_REDIS }, { "local", RLG_CLOCK_LOCAL },
	{ NULL, 0 }
};
static const struct rlg_word rlg_sync_words[] = {
	{ "normal", RLG_SYNC_NORMAL }, { "full", RLG_SYNC_FULL }, { NULL, 0 }
};
static const struct rlg_word rlg_group_words[] = {
	{ "auto", RLG_GROUP_AUTO }, { "on", RLG_GROUP_ON },
	{ "off", RLG_GROUP_OFF }, { NULL, 0 }
};
static const struct rlg_word rlg_style_words[] = {
	{ "draft03", RLG_STYLE_DRAFT03 }, { "ietf", RLG_STYLE_IETF },
	{ "x-ratelimit", RLG_STYLE_X_RATELIMIT }, { "all", RLG_STYLE_ALL },
	{ "none", RLG_STYLE_NONE }, { NULL, 0 }
};
static const struct rlg_word rlg_error_format_words[] = {
	{ "json", RLG_ERRORS_JSON }, { "problem", RLG_ERRORS_PROBLEM },
	{ NULL, 0 }
};
static const struct rlg_word rlg_algorithm_words[] = {
	{ "fixed_window", RLG_ALG_FIXED_WINDOW },
	{ "sliding_window", RLG_ALG_SLIDING_WINDOW },
	{ "token_bucket", RLG_ALG_TOKEN_BUCKET },
	{ "sliding_log", RLG_ALG_SLIDING_LOG }, { NULL, 0 }
};
static const struct rlg_word rlg_mode_words[] = {
	{ "enforce", RLG_MODE_ENFORCE }, { "dry_run", RLG_MODE_DRY_RUN },
	{ NULL, 0 }
};
static const struct rlg_word rlg_yes_no_words[] = {
	{ "yes", 1 }, { "no", 0 }, { NULL, 0 }
};
static const struct rlg_word rlg_forwarded_words[] = {
	{ "x-forwarded-for", RLG_FWD_X_FORWARDED_FOR },
	{ "forwarded", RLG_FWD_FORWARDED }, { NULL, 0 }
};
static const struct rlg_word rlg_log_level_words[] = {
	{ "error", RLG_LOG_ERROR }, { "warn", RLG_LOG_WARN },
	{ "info", RLG_LOG_INFO }, { NULL, 0 }
};

/* A row's section, name and type. */
#define RLG_KEY(sect, key, t) \
	.section = (sect), .name = (key), .type = RLG_OPT_##t
/* The field a row fills, in the struct of its section. */
#define RLG_FIELD(st, member) \
	.offset = offsetof(st, member), .size = sizeof(((st *)0)->member)
#define RLG_STORE(member)   RLG_FIELD(struct rlg_store_config, member)
#define RLG_CONFIG(member)  RLG_FIELD(struct rlg_config, member)
#define RLG_CLIENT(member)  RLG_FIELD(struct rlg_client_config, member)
#define RLG_POLICY(member)  RLG_FIELD(struct rlg_policy, member)
/* A list of networks and its count. */
#define RLG_CIDRS(st, member, count) \
	.offset = offsetof(st, member), \
	.count_offset = offsetof(st, count), .max = RLG_CIDRS_MAX

/* Every key of every section; a key not here is an error. */
static const struct rlg_option rlg_options[] = {
	{ RLG_KEY("store", "path", STRING), RLG_STORE(sqlite.path),
	  .max = RLG_CONFIG_PATH_MAX,
	  .def = "LOCALSTATEDIR/lib/rlgate/rlgate.db",
	  .doc = "The SQLite file that holds the counters." },
	{ RLG_KEY("store", "busy_timeout_ms", INT),
	  RLG_STORE(sqlite.busy_timeout_ms),
	  .max = RLG_BUSY_TIMEOUT_MS_MAX, .def = "2000",
	  .doc = "How long a request waits for the SQLite lock, in ms." },
	{ RLG_KEY("store", "on_error", ENUM), RLG_STORE(on_error),
	  .words = rlg_on_error_words, .def = "closed",
	  .doc = "What a request gets when the store fails." },
	{ RLG_KEY("store", "max_clients", INT), RLG_STORE(sqlite.max_clients),
	  .max = RLG_MAX_CLIENTS_MAX, .def = "1000000",
	  .doc = "The most clients one policy keeps state for (0: no limit)." },
	{ RLG_KEY("store", "rejection_cache", INT), RLG_STORE(rejection_cache),
	  .max = RLG_REJECTION_CACHE_MAX, .def = "4096",
	  .doc = "Rejections each worker thread remembers (0: off)." },
	{ RLG_KEY("store", "backend", ENUM), RLG_STORE(backend),
	  .words = rlg_backend_words, .def = "sqlite", .set = rlg_set_backend,
	  .doc = "Where the counters live." },
	{ RLG_KEY("store", "url", COMPOUND), .def = "none",
	  .set = rlg_set_url, .doc = "Where Redis listens." },
	{ RLG_KEY("store", "connect_timeout_ms", INT),
	  RLG_STORE(redis.connect_timeout_ms), .min = 1,
	  .max = RLG_REDIS_TIMEOUT_MS_MAX, .def = "500",
	  .doc = "How long the Redis connects of a request may take, in ms." },
	{ RLG_KEY("store", "timeout_ms", INT), RLG_STORE(redis.timeout_ms),
	  .min = 1, .max = RLG_REDIS_TIMEOUT_MS_MAX, .def = "500",
	  .doc = "One deadline for the Redis commands of one request, in ms." },
	{ RLG_KEY("store", "clock", ENUM), RLG_STORE(redis.clock),
	  .words = rlg_clock_words, .def = "redis",
	  .doc = "Whose clock says what time it is, with Redis." },
	{ RLG_KEY("store", "synchronous", ENUM), RLG_STORE(sqlite.synchronous),
	  .words = rlg_sync_words, .def = "normal",
	  .doc = "When a SQLite commit is on disk." },
	{ RLG_KEY("store", "group_commit", ENUM),
	  RLG_STORE(sqlite.group_commit),
	  .words = rlg_group_words, .def = "auto",
	  .doc = "Whether the threads of a process share SQLite commits." },
	{ RLG_KEY("headers", "style", ENUM), RLG_CONFIG(style),
	  .words = rlg_style_words, .def = "draft03",
	  .doc = "Which rate-limit headers to send." },
	{ RLG_KEY("headers", "report_exempt", ENUM), RLG_CONFIG(report_exempt),
	  .words = rlg_yes_no_words, .def = "no",
	  .doc = "Whether exempt clients are counted and get the headers." },
	{ RLG_KEY("response", "errors", ENUM), RLG_CONFIG(errors),
	  .words = rlg_error_format_words, .def = "json",
	  .doc = "The body of error answers." },
	{ RLG_KEY("client", "trusted_proxies", CIDRS), .def = "none",
	  RLG_CIDRS(struct rlg_client_config, trusted_proxies, ntrusted),
	  .set = rlg_set_trusted_proxies,
	  .doc = "The proxies whose forwarding header names the client." },
	{ RLG_KEY("client", "ipv6_prefix", INT), RLG_CLIENT(ipv6_prefix),
	  .min = 1, .max = 128, .def = "64",
	  .doc = "The prefix length that groups IPv6 clients." },
	{ RLG_KEY("client", "forwarded_header", ENUM),
	  RLG_CLIENT(forwarded_header), .words = rlg_forwarded_words,
	  .def = "x-forwarded-for",
	  .doc = "The one forwarding header the trusted proxies set." },
	{ RLG_KEY("client", "exempt", CIDRS), .def = "none",
	  RLG_CIDRS(struct rlg_client_config, exempt, nexempt),
	  .doc = "Clients that no policy ever limits." },
	{ RLG_KEY("client", "key_secret", STRING), RLG_CLIENT(key_secret),
	  .min = RLG_KEY_SECRET_MIN, .max = RLG_CONFIG_LINE_MAX, .def = "none",
	  .doc = "The secret that keys the hash of API keys." },
	{ RLG_KEY("log", "level", ENUM), RLG_CONFIG(log_level),
	  .words = rlg_log_level_words, .def = "warn",
	  .doc = "How much goes to stderr." },
	{ RLG_KEY("policy", "algorithm", ENUM), RLG_POLICY(lim.algorithm),
	  .words = rlg_algorithm_words, .def = "fixed_window",
	  .set = rlg_set_algorithm, .doc = "How requests are counted." },
	{ RLG_KEY("policy", "limit", INT), RLG_POLICY(lim.limit), .min = 1,
	  .max = RLG_LIMIT_MAX, .def = "60",
	  .doc = "Requests admitted per client and window." },
	{ RLG_KEY("policy", "window", INT), RLG_POLICY(lim.window_ms), .min = 1,
	  .max = RLG_WINDOW_S_MAX, .scale = 1000, .def = "60",
	  .doc = "The window length, in seconds." },
	{ RLG_KEY("policy", "burst", INT), RLG_POLICY(lim.burst), .min = 1,
	  .max = RLG_BURST_MAX, .def = "the policy's limit",
	  .doc = "With token_bucket: how many requests may come at once." },
	{ RLG_KEY("policy", "new_keys_per_ip", INT), RLG_POLICY(new_keys),
	  .max = RLG_LIMIT_MAX, .def = "100",
	  .doc = "With a header key: new keys per address and window." },
	{ RLG_KEY("policy", "key", COMPOUND), .def = "ip",
	  .set = rlg_set_key, .doc = "What identifies a client." },
	{ RLG_KEY("policy", "mode", ENUM), RLG_POLICY(mode),
	  .words = rlg_mode_words, .def = "enforce",
	  .doc = "Whether rejections are answered or only logged." },
	{ RLG_KEY("policy", "exempt", CIDRS), .def = "none",
	  RLG_CIDRS(struct rlg_policy, exempt, nexempt),
	  .doc = "Clients this policy never limits." },
	{ RLG_KEY("route", "path", COMPOUND), .def = "none (required)",
	  .set = rlg_set_route_path,
	  .doc = "The request path, exact or a prefix." },
	{ RLG_KEY("route", "methods", COMPOUND), .def = "every method",
	  .set = rlg_set_route_methods,
	  .doc = "The request methods the route takes." },
	{ RLG_KEY("route", "policies", COMPOUND), .def = "none (required)",
	  .set = rlg_set_route_policies,
	  .doc = "The policies of the requests the route takes." },
};
#define RLG_NOPTS (sizeof rlg_options / sizeof rlg_options[0])
#define RLG_NSCOPES (1 + RLG_POLICIES_MAX + RLG_ROUTES_MAX)

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
};

const struct rlg_option *
rlg_config_options(size_t *n)
{
	*n = RLG_NOPTS;
	return rlg_options;
}

struct rlg_config *
rlg_config_defaults(void)
{
	struct rlg_config *cfg;

	/*
	 * All zero is the first word of every enum (on_error = closed,
	 * backend = sqlite, clock = redis, synchronous = normal, group_commit
	 * = auto, style = draft03, errors = json), report_exempt = no and no
	 * lists; the rows' defaults are held to these by the tests.
	 */
	cfg = rlg_xcalloc(1, sizeof *cfg);
	cfg->store.sqlite.path = rlg_xstrdup(RLG_DEFAULT_DB_PATH);
	cfg->store.sqlite.busy_timeout_ms = RLG_DEFAULT_BUSY_TIMEOUT_MS;
	cfg->store.sqlite.max_clients = RLG_DEFAULT_MAX_CLIENTS;
	cfg->store.rejection_cache = RLG_DEFAULT_REJECTION_CACHE;
	cfg->store.redis.port = RLG_DEFAULT_REDIS_PORT;
	cfg->store.redis.connect_timeout_ms = RLG_DEFAULT_REDIS_TIMEOUT_MS;
	cfg->store.redis.timeout_ms = RLG_DEFAULT_REDIS_TIMEOUT_MS;
	cfg->client.ipv6_prefix = RLG_DEFAULT_IPV6_PREFIX;
	cfg->log_level = RLG_LOG_WARN;

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

/* The names for the logs: a value's first word in the rows. */
#define RLG_NAME_FN(fn, type, words) \
	const char *fn(type v) { return rlg_word_name(words, (int)v); }
RLG_NAME_FN(rlg_on_error_name, enum rlg_on_error, rlg_on_error_words)
RLG_NAME_FN(rlg_store_backend_name, enum rlg_store_backend, rlg_backend_words)
RLG_NAME_FN(rlg_store_clock_name, enum rlg_store_clock, rlg_clock_words)
RLG_NAME_FN(rlg_style_name, enum rlg_header_style, rlg_style_words)
RLG_NAME_FN(rlg_error_format_name, enum rlg_error_format,
    rlg_error_format_words)
RLG_NAME_FN(rlg_log_level_name, enum rlg_log_level, rlg_log_level_words)

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
	p.lines = rlg_xcalloc(RLG_NSCOPES * RLG_NOPTS, sizeof *p.lines);
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
	i = rlg_option_find(p->sect, name);
	if (i == RLG_NOPTS) {
		rlg_problem(p, p->lineno, "%s unknown key \"%s\"", p->label,
		    name);
		return;
	}
	o = &rlg_options[i];
	lines = &p->lines[p->scope * RLG_NOPTS + i];
	if (lines->first != 0) {
		rlg_key_problem(p, o, "set twice (first on line %d)",
		    lines->first);
		return;
	}
	lines->first = p->lineno;
	if (*value == '\0') {
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
	rlg_problem(p, p->lineno, "unknown section [%s]", inner);
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
		p->nroutes++;
	}
	if (i == n) {
		memcpy(b[i].label, label, sizeof label);
		b[i].line = p->lineno;
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
		if (b->nnames > 0)
			r->policies = rlg_xcalloc(b->nnames,
			    sizeof *r->policies);
		for (j = 0; j < b->nnames; j++) {
			for (n = 0; n < cfg->npolicies; n++)
				if (strcmp(cfg->policies[n].name,
				    b->names[j]) == 0)
					break;
			if (n == cfg->npolicies)
				rlg_problem(p, pols->ok, "%s policies: no "
				    "[policy %s]", b->label, b->names[j]);
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
	};
	const struct rlg_store_config *sc = &p->cfg->store;
	const struct rlg_set_lines *backend, *url;
	bool cluster = sc->redis.cluster, sqlite;
	int line;
	size_t i;

	backend = rlg_lines(p, 0, "store", "backend");
	url = rlg_lines(p, 0, "store", "url");
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
	if (sqlite)
		return;
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

/* The row of the key sect/name, or RLG_NOPTS. */
static size_t
rlg_option_find(const char *sect, const char *name)
{
	size_t i;

	for (i = 0; i < RLG_NOPTS; i++)
		if (strcmp(rlg_options[i].section, sect) == 0 &&
		    strcmp(rlg_options[i].name, name) == 0)
			break;
	return i;
}

/* Where the key sect/name (a row that is there) was set, in scope. */
static struct rlg_set_lines *
rlg_lines(struct rlg_parse *p, size_t scope, const char *sect,
    const char *name)
{
	size_t i = rlg_option_find(sect, name);

	assert(i < RLG_NOPTS && scope < RLG_NSCOPES);
	return &p->lines[scope * RLG_NOPTS + i];
}

/* Notes one problem on line (0: the whole file). */
static void
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
static void
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

/* The first word of words (ended by a NULL name) for value, or
 * "unknown". */
static const char *
rlg_word_name(const struct rlg_word *words, int value)
{
	for (; words->name != NULL; words++)
		if (words->value == value)
			return words->name;
	return "unknown";
}

/* The names of words, "a, b, c", for the messages, into buf (size bytes). */
static const char *
rlg_word_list(const struct rlg_word *words, char *buf, size_t size)
{
	size_t at = 0;

	for (buf[0] = '\0'; words->name != NULL && at < size; words++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s",
		    at > 0 ? ", " : "", words->name);
	return buf;
}

/* Stores v in the integer field of size bytes: a bool, an int (or an
 * enum), or an int64_t. */
static void
rlg_put_int(void *field, size_t size, long long v)
{
	switch (size) {
	case sizeof(bool):
		*(bool *)field = v != 0;
		break;
	case sizeof(int):
		*(int *)field = (int)v;
		break;
	default:
		assert(size == sizeof(int64_t));
		*(int64_t *)field = v;
		break;
	}
}

/*
 * The setter of every row without a hand-written one: parses value by
 * the row's type and stores it in its field of base, or reports it.
 */
static bool
rlg_set_value(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	char *field = (char *)base + o->offset;
	size_t len = strlen(value);
	long long v;
	int w;

	switch (o->type) {
	case RLG_OPT_INT:
		if (!rlg_parse_int(value, o->min, o->max, &v)) {
			rlg_key_problem(p, o, "must be an integer from %lld to "
			    "%lld (got \"%s\")", o->min, o->max, value);
			return false;
		}
		rlg_put_int(field, o->size, o->scale != 0 ? v * o->scale : v);
		return true;
	case RLG_OPT_ENUM:
		if (!rlg_set_word(p, o, value, NULL, &w))
			return false;
		rlg_put_int(field, o->size, w);
		return true;
	case RLG_OPT_STRING:
		/* The length only: the value may be a secret. */
		if ((long long)len < o->min) {
			rlg_key_problem(p, o, "must be at least %lld bytes "
			    "(got %zu bytes)", o->min, len);
			return false;
		}
		if ((long long)len > o->max) {
			rlg_key_problem(p, o, "must be at most %lld bytes "
			    "long (got %zu bytes)", o->max, len);
			return false;
		}
		free(*(char **)field);
		*(char **)field = rlg_xstrdup(value);
		return true;
	case RLG_OPT_CIDRS:
		return rlg_set_cidrs(p, o, value, base);
	case RLG_OPT_COMPOUND:
		break;
	}
	assert(!"a compound key needs its own setter");
	return false;
}

/*
 * The value of the word value of o's words in *out, or reports "must be
 * one of ..." (or, with unknown, "unknown UNKNOWN (got ...): must be one
 * of ...") and returns false.
 */
static bool
rlg_set_word(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, const char *unknown, int *out)
{
	const struct rlg_word *w;
	char list[256];

	for (w = o->words; w->name != NULL; w++) {
		if (strcmp(value, w->name) == 0) {
			*out = w->value;
			return true;
		}
	}
	rlg_word_list(o->words, list, sizeof list);
	if (unknown != NULL)
		rlg_key_problem(p, o, "unknown %s (got \"%s\"): must be one "
		    "of %s", unknown, value, list);
	else
		rlg_key_problem(p, o, "must be one of %s (got \"%s\")", list,
		    value);
	return false;
}

/*
 * A list of networks (rlg_cidr_parse) into a new array at o's field of
 * base and its count. Each bad item is its own problem; nothing is
 * stored unless all are good.
 */
static bool
rlg_set_cidrs(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_cidr **nets = (void *)((char *)base + o->offset);
	size_t *n = (void *)((char *)base + o->count_offset);
	struct rlg_cidr *v;
	char **items;
	size_t i, count;
	bool ok = true;

	if (!rlg_list_split(p, o, value, (size_t)o->max, "networks", &items,
	    &count))
		return false;
	v = rlg_xcalloc(count, sizeof *v);
	for (i = 0; i < count; i++) {
		if (rlg_cidr_parse(items[i], &v[i]) != 0) {
			rlg_key_problem(p, o, "not an IP address or "
			    "ADDR/LEN network with zero host bits "
			    "(got \"%s\")", items[i]);
			ok = false;
		}
	}
	rlg_list_free(items, count);
	if (!ok) {
		free(v);
		return false;
	}
	free(*nets);
	*nets = v;
	*n = count;
	return true;
}

/*
 * backend, url, connect_timeout_ms, timeout_ms and clock are checked
 * against each other at the end (rlg_store_finish): the keys may come in
 * any order.
 */
static bool
rlg_set_backend(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_store_config *sc = base;
	int v;

	if (!rlg_set_word(p, o, value, NULL, &v)) {
		p->backend_bad = true;
		return false;
	}
	sc->redis.cluster = v == RLG_BACKEND_WORD_CLUSTER;
	sc->backend = v == RLG_BACKEND_WORD_CLUSTER ? RLG_BACKEND_REDIS :
	    (enum rlg_store_backend)v;
	return true;
}

/* The message quotes the url with its password masked: errors are logged. */
static bool
rlg_set_url(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	char why[256], *shown;

	if (rlg_config_redis_url(base, value, why, sizeof why) == 0)
		return true;
	shown = rlg_url_masked(value);
	rlg_key_problem(p, o, "%s (got \"%s\")", why, shown);
	free(shown);
	return false;
}

static bool
rlg_set_trusted_proxies(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	const struct rlg_client_config *cc = base;
	const struct rlg_cidr *n;
	size_t i;

	if (!rlg_set_cidrs(p, o, value, base))
		return false;
	/*
	 * 0.0.0.0/0 (or ::/0) believes every peer's forwarding header: any
	 * client then names its own key. Allowed (a front that strips and
	 * sets the header, with rlgate reachable only through it), said.
	 * An IPv4 network is stored over 16 bytes: /0 is 96 there.
	 */
	for (i = 0; i < cc->ntrusted; i++) {
		n = &cc->trusted_proxies[i];
		if (n->prefix_len == 0 || (n->addr.v4 && n->prefix_len <= 96)) {
			rlg_key_problem(p, o, "%s trusts every peer: any "
			    "client that reaches rlgate directly chooses its "
			    "own key with a forwarding header; list only your "
			    "proxies", n->addr.v4 ? "0.0.0.0/0" : "::/0");
			p->problems[p->nproblems - 1].warning = true;
			break;
		}
	}
	return true;
}

/* A word of the algorithm rows, with a message of its own. */
static bool
rlg_set_algorithm(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	int v;

	if (!rlg_set_word(p, o, value, "algorithm", &v))
		return false;
	rlg_put_int((char *)base + o->offset, o->size, v);
	return true;
}

/*
 * key = ip | header:NAME | both, comma-separated in any order. NAME is kept
 * as written (header names compare without case when a request is read).
 * Each bad item is its own problem; the policy changes only if all are
 * good. Whether a key_secret is there waits for the end.
 */
static bool
rlg_set_key(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_policy *pol = base;
	const char *header = NULL, *name;
	unsigned bits = 0;
	char **items;
	size_t i, n, len;
	bool ok = true;

	if (!rlg_list_split(p, o, value, 2, "items", &items, &n))
		return false;
	for (i = 0; i < n; i++) {
		if (strcmp(items[i], "ip") == 0) {
			if ((bits & RLG_KEY_IP) != 0) {
				rlg_key_problem(p, o, "ip given twice "
				    "(got \"%s\")", value);
				ok = false;
			}
			bits |= RLG_KEY_IP;
			continue;
		}
		if (strncmp(items[i], "header:", 7) != 0 ||
		    items[i][7] == '\0') {
			rlg_key_problem(p, o, "must be one of ip, header:NAME "
			    "(got \"%s\")", items[i]);
			ok = false;
			continue;
		}
		name = items[i] + 7;
		len = strlen(name);
		/* An HTTP token (RFC 9110 tchar). */
		if (name[strspn(name, RLG_ALNUM "!#$%&'*+-.^_`|~")] != '\0') {
			rlg_key_problem(p, o, "header name must be an HTTP "
			    "token: A-Z a-z 0-9 and !#$%%&'*+-.^_`|~ "
			    "(got \"%s\")", name);
			ok = false;
		} else if (len > RLG_HEADER_NAME_MAX) {
			rlg_key_problem(p, o, "header name must be at most "
			    "%d bytes (got %zu)", RLG_HEADER_NAME_MAX, len);
			ok = false;
		} else if (header != NULL) {
			rlg_key_problem(p, o, "at most one header:NAME "
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
	}
	rlg_list_free(items, n);
	return ok;
}

/* "/exact" or "/prefix*": a '*' only at the end, stored without it. */
static bool
rlg_set_route_path(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_route *r = base;
	const char *star;
	size_t len = strlen(value);

	if (value[0] != '/') {
		rlg_key_problem(p, o, "must start with \"/\" (got \"%s\")",
		    value);
		return false;
	}
	star = strchr(value, '*');
	if (star != NULL && star != value + len - 1) {
		rlg_key_problem(p, o, "\"*\" may only end the path, for a "
		    "prefix match (got \"%s\")", value);
		return false;
	}
	free(r->path);
	r->path = rlg_xstrdup(value);
	r->prefix = star != NULL;
	if (r->prefix)
		r->path[len - 1] = '\0';
	return true;
}

/* Method names as a request carries them: uppercase letters, no repeat. */
static bool
rlg_set_route_methods(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_route *r = base;
	const char *c;
	char **items;
	size_t i, j, n;
	bool ok = true;

	if (!rlg_list_split(p, o, value, RLG_ROUTE_METHODS_MAX, "methods",
	    &items, &n))
		return false;
	for (i = 0; i < n; i++) {
		for (c = items[i]; *c >= 'A' && *c <= 'Z';)
			c++;
		if (*c != '\0') {
			rlg_key_problem(p, o, "not a method: uppercase "
			    "letters only (got \"%s\")", items[i]);
			ok = false;
			continue;
		}
		for (j = 0; j < i; j++) {
			if (strcmp(items[j], items[i]) == 0) {
				rlg_key_problem(p, o, "%s given twice "
				    "(got \"%s\")", items[i], value);
				ok = false;
				break;
			}
		}
	}
	if (!ok) {
		rlg_list_free(items, n);
		return false;
	}
	rlg_list_free(r->methods, r->nmethods);
	r->methods = items;
	r->nmethods = n;
	return true;
}

/*
 * Policy names, resolved at the end (a [policy] may come later), or
 * "none" alone: the route is not limited.
 */
static bool
rlg_set_route_policies(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_build *b = &p->rbuilds[p->cur];
	char **items;
	size_t i, j, n;
	bool ok = true;

	(void)base;
	if (!rlg_list_split(p, o, value, RLG_POLICIES_MAX, "policies",
	    &items, &n))
		return false;
	for (i = 0; i < n; i++) {
		if (strcmp(items[i], "none") == 0 && n > 1) {
			rlg_key_problem(p, o, "none must stand alone "
			    "(got \"%s\")", value);
			ok = false;
			break;
		}
		for (j = 0; j < i; j++) {
			if (strcmp(items[j], items[i]) == 0) {
				rlg_key_problem(p, o, "[policy %s] given "
				    "twice (got \"%s\")", items[i], value);
				ok = false;
				break;
			}
		}
	}
	if (!ok || (n == 1 && strcmp(items[0], "none") == 0)) {
		rlg_list_free(items, n);
		return ok;
	}
	b->names = items;
	b->nnames = n;
	return true;
}

/*
 * Splits value at commas into trimmed items (a new array of new strings,
 * free with rlg_list_free). Reports an empty item, or more than max of
 * them (what names them in the message), and returns false.
 */
static bool
rlg_list_split(struct rlg_parse *p, const struct rlg_option *o,
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
		rlg_key_problem(p, o, "at most %zu %s (got %zu)", max, what,
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
			rlg_key_problem(p, o, "empty item in the list "
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
