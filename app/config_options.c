/*
 * config_options.c: the option table of the config and what reads it.
 * Apart from the loader (config.c), which walks the file and checks keys
 * against each other, because the table is the one place that says what
 * a key is: the loader, --check-config, the man page and the example
 * config all follow these rows.
 *
 * Options are data: rlg_options holds one row per key (section, name,
 * type, the field it fills, bounds, words, default, one line of doc).
 * Generic setters parse and store integers, words, strings and lists of
 * networks and write the messages; a hand-written setter is there only
 * for a compound value (the Redis url, a policy's key, a route's path,
 * methods and policies) or a check of its own. The names the logs use for
 * enum values come from the same word rows, and the man page and the
 * example config are held to the rows by tests/check_config.c.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_priv.h"
#include "util.h"
#include "util.h"

/* The longest store path, in bytes (PATH_MAX less its NUL on Linux). */
#define RLG_CONFIG_PATH_MAX  4095

/* The longest busy_timeout_ms: ten minutes. */
#define RLG_BUSY_TIMEOUT_MS_MAX  600000

static bool rlg_parse_int(const char *s, long long min, long long max,
    long long *out);
static bool rlg_set_duration(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, long long *out);
static const char *rlg_duration_str(long long v, int unit_ms, char *buf,
    size_t size);
static const char *rlg_word_name(const struct rlg_word *words, int value);
static const char *rlg_word_list(const struct rlg_word *words, char *buf,
    size_t size);
static bool rlg_list_split(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, size_t max, const char *what, char ***items,
    size_t *n);
static void rlg_put_int(void *field, size_t size, long long v);
static bool rlg_header_name_ok(struct rlg_parse *p,
    const struct rlg_option *o, const char *name);
static bool rlg_set_word(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, const char *unknown, int *out);
static rlg_option_set_fn rlg_set_cidrs, rlg_set_backend, rlg_set_url,
    rlg_set_trusted_proxies, rlg_set_algorithm, rlg_set_key,
    rlg_set_route_path, rlg_set_route_methods, rlg_set_route_policies,
    rlg_set_route_cost, rlg_set_admin_allow, rlg_set_admin_prefix,
    rlg_set_status;

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
static const struct rlg_word rlg_commit_words[] = {
	{ "auto", RLG_COMMIT_AUTO }, { "each", RLG_COMMIT_EACH },
	{ "behind", RLG_COMMIT_BEHIND }, { NULL, 0 }
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
static const struct rlg_word rlg_path_match_words[] = {
	{ "normalized", RLG_PATH_MATCH_NORMALIZED },
	{ "bytes", RLG_PATH_MATCH_BYTES }, { NULL, 0 }
};
static const struct rlg_word rlg_log_format_words[] = {
	{ "text", RLG_LOG_TEXT }, { "json", RLG_LOG_JSON }, { NULL, 0 }
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
#define RLG_ADMIN(member)   RLG_FIELD(struct rlg_admin_config, member)
#define RLG_ROUTE(member)   RLG_FIELD(struct rlg_route, member)
/* A list of networks and its count. */
#define RLG_CIDRS(st, member, count) \
	.offset = offsetof(st, member), \
	.count_offset = offsetof(st, count), .max = RLG_CIDRS_MAX

/* Every key of every section; a key not here is an error. */
const struct rlg_option rlg_options[] = {
	{ RLG_KEY("store", "path", STRING), RLG_STORE(sqlite.path),
	  .max = RLG_CONFIG_PATH_MAX,
	  .def = "LOCALSTATEDIR/lib/rlgate/rlgate.db",
	  .doc = "The SQLite file that holds the counters." },
	{ RLG_KEY("store", "busy_timeout_ms", INT),
	  RLG_STORE(sqlite.busy_timeout_ms),
	  .max = RLG_BUSY_TIMEOUT_MS_MAX, .duration_ms = 1, .def = "2000",
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
	{ RLG_KEY("store", "max_overrides", INT), RLG_STORE(max_overrides),
	  .max = RLG_MAX_OVERRIDES_MAX, .def = "100000",
	  .doc = "The most override rows read from the store (0: none)." },
	{ RLG_KEY("store", "backend", ENUM), RLG_STORE(backend),
	  .words = rlg_backend_words, .def = "sqlite", .set = rlg_set_backend,
	  .doc = "Where the counters live." },
	{ RLG_KEY("store", "url", COMPOUND), .def = "none",
	  .set = rlg_set_url, .doc = "Where Redis listens." },
	{ RLG_KEY("store", "connect_timeout_ms", INT),
	  RLG_STORE(redis.connect_timeout_ms), .min = 1,
	  .max = RLG_REDIS_TIMEOUT_MS_MAX, .duration_ms = 1, .def = "500",
	  .doc = "How long the Redis connects of a request may take, in ms." },
	{ RLG_KEY("store", "timeout_ms", INT), RLG_STORE(redis.timeout_ms),
	  .min = 1, .max = RLG_REDIS_TIMEOUT_MS_MAX, .duration_ms = 1,
	  .def = "500",
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
	{ RLG_KEY("store", "commit", ENUM), RLG_STORE(sqlite.commit),
	  .words = rlg_commit_words, .def = "auto",
	  .doc = "Decided in shared memory and written behind, or a commit"
	  " each." },
	{ RLG_KEY("store", "flush_ms", INT), RLG_STORE(sqlite.flush_ms),
	  .min = RLG_FLUSH_MS_MIN, .max = RLG_FLUSH_MS_MAX, .duration_ms = 1,
	  .def = "1000",
	  .doc = "commit = behind: how often the table is written to SQLite,"
	  " in ms." },
	{ RLG_KEY("headers", "style", ENUM), RLG_CONFIG(style),
	  .words = rlg_style_words, .def = "draft03",
	  .doc = "Which rate-limit headers to send." },
	{ RLG_KEY("headers", "report_exempt", ENUM), RLG_CONFIG(report_exempt),
	  .words = rlg_yes_no_words, .def = "no",
	  .doc = "Whether exempt clients are counted and get the headers." },
	{ RLG_KEY("response", "errors", ENUM), RLG_CONFIG(errors),
	  .words = rlg_error_format_words, .def = "json",
	  .doc = "The body of error answers." },
	{ RLG_KEY("response", "status", INT), RLG_CONFIG(reject_status),
	  .min = 400, .max = 599, .def = "429", .set = rlg_set_status,
	  .doc = "The status code of a request over its limit." },
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
	{ RLG_KEY("log", "format", ENUM), RLG_CONFIG(log_format),
	  .words = rlg_log_format_words, .def = "text",
	  .doc = "Each line key=value text, or one JSON object." },
	{ RLG_KEY("admin", "allow", CIDRS), .def = RLG_DEFAULT_ADMIN_ALLOW,
	  RLG_CIDRS(struct rlg_admin_config, allow, nallow),
	  .set = rlg_set_admin_allow, .empty_ok = true,
	  .doc = "Who may read the admin endpoints; empty or none: nobody." },
	{ RLG_KEY("admin", "prefix", STRING), RLG_ADMIN(prefix),
	  .min = 2, .max = RLG_ADMIN_PREFIX_MAX, .def = RLG_DEFAULT_ADMIN_PREFIX,
	  .set = rlg_set_admin_prefix,
	  .doc = "The path under which the admin endpoints answer." },
	{ RLG_KEY("fastcgi", "read_timeout_ms", INT), RLG_CONFIG(read_timeout_ms),
	  .min = RLG_READ_TIMEOUT_MS_MIN, .max = RLG_READ_TIMEOUT_MS_MAX,
	  .duration_ms = 1, .def = "5000",
	  .doc = "How long rlgate waits for the web server, in ms." },
	{ RLG_KEY("policy", "algorithm", ENUM), RLG_POLICY(lim.algorithm),
	  .words = rlg_algorithm_words, .def = "fixed_window",
	  .set = rlg_set_algorithm, .doc = "How requests are counted." },
	{ RLG_KEY("policy", "limit", INT), RLG_POLICY(lim.limit), .min = 1,
	  .max = RLG_LIMIT_MAX, .def = "60",
	  .doc = "Requests admitted per client and window." },
	{ RLG_KEY("policy", "window", INT), RLG_POLICY(lim.window_ms), .min = 1,
	  .max = RLG_WINDOW_S_MAX, .scale = 1000, .duration_ms = 1000,
	  .def = "60",
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
	{ RLG_KEY("route", "path_match", ENUM), RLG_ROUTE(path_match),
	  .words = rlg_path_match_words, .def = "normalized",
	  .doc = "Whether case, a trailing slash and ;params count." },
	{ RLG_KEY("route", "methods", COMPOUND), .def = "every method",
	  .set = rlg_set_route_methods,
	  .doc = "The request methods the route takes." },
	{ RLG_KEY("route", "policies", COMPOUND), .def = "none (required)",
	  .set = rlg_set_route_policies,
	  .doc = "The policies of the requests the route takes." },
	{ RLG_KEY("route", "cost", INT), RLG_ROUTE(cost), .min = 1,
	  .max = RLG_COST_MAX, .def = "1", .set = rlg_set_route_cost,
	  .doc = "The units one request takes of each of its policies." },
	{ RLG_KEY("route", "cost_max", INT), RLG_ROUTE(cost_max), .min = 1,
	  .max = RLG_COST_MAX, .def = "none (required with a header cost)",
	  .doc = "With cost = header:NAME: the most one request costs." },
};
const size_t rlg_noptions = sizeof rlg_options / sizeof rlg_options[0];

const struct rlg_option *
rlg_config_options(size_t *n)
{
	*n = rlg_noptions;
	return rlg_options;
}

/* The names for the logs: a value's first word in the rows. */
#define RLG_NAME_FN(fn, type, words) \
	const char *fn(type v) { return rlg_word_name(words, (int)v); }
RLG_NAME_FN(rlg_on_error_name, enum rlg_on_error, rlg_on_error_words)
RLG_NAME_FN(rlg_store_backend_name, enum rlg_store_backend, rlg_backend_words)
RLG_NAME_FN(rlg_store_clock_name, enum rlg_store_clock, rlg_clock_words)
RLG_NAME_FN(rlg_commit_name, enum rlg_commit, rlg_commit_words)
RLG_NAME_FN(rlg_style_name, enum rlg_header_style, rlg_style_words)
RLG_NAME_FN(rlg_error_format_name, enum rlg_error_format,
    rlg_error_format_words)
RLG_NAME_FN(rlg_log_level_name, enum rlg_log_level, rlg_log_level_words)
RLG_NAME_FN(rlg_log_format_name, enum rlg_log_format, rlg_log_format_words)

/* The row of the key sect/name, or rlg_noptions. */
size_t
rlg_option_find(const char *sect, const char *name)
{
	size_t i;

	for (i = 0; i < rlg_noptions; i++)
		if (strcmp(rlg_options[i].section, sect) == 0 &&
		    strcmp(rlg_options[i].name, name) == 0)
			break;
	return i;
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

/*
 * Durations as operators write them in nginx's configs: a whole number
 * and an optional unit. A key in seconds (duration_ms 1000) takes s, m,
 * h, d; a key in milliseconds (1) takes ms, s, m; a bare number is in
 * the key's own unit, as before units existed. No sign, no space, no
 * fraction (1.5h is 90m), no other unit.
 */
static const struct {
	const char *unit;
	int unit_ms;           /* the keys that take it */
	long long times;       /* how many of the key's unit it is */
} rlg_duration_units[] = {
	{ "s", 1000, 1 }, { "m", 1000, 60 }, { "h", 1000, 3600 },
	{ "d", 1000, 86400 },
	{ "ms", 1, 1 }, { "s", 1, 1000 }, { "m", 1, 60000 },
};

/*
 * A duration for o into *out, in o's unit, from o->min to o->max; or
 * reports it and returns false: bad syntax, an unknown unit, or a value
 * beyond long long (a hostile 99999999999999999999d) as "a duration in
 * seconds, or with a unit s, m, h, d (e.g. 90s, 15m, 1h)"; out of range
 * with the range in units.
 */
static bool
rlg_set_duration(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, long long *out)
{
	const char *c = value;
	long long v = 0, times = 0;
	char lo[32], hi[32];
	size_t i;

	while (*c >= '0' && *c <= '9') {
		if (v > (LLONG_MAX - (*c - '0')) / 10) {
			c = value;      /* too long: reported as bad */
			break;
		}
		v = v * 10 + (*c - '0');
		c++;
	}
	for (i = 0; c != value && i < sizeof rlg_duration_units /
	    sizeof rlg_duration_units[0]; i++)
		if (rlg_duration_units[i].unit_ms == o->duration_ms &&
		    strcmp(c, rlg_duration_units[i].unit) == 0)
			times = rlg_duration_units[i].times;
	if (c != value && *c == '\0')
		times = 1;
	if (times == 0 || v > LLONG_MAX / times) {
		rlg_key_problem(p, o, "\"%s\": %s", value, o->duration_ms == 1 ?
		    "a duration in milliseconds, or with a unit ms, s, m (e.g. "
		    "500ms, 2s, 1m)" : "a duration in seconds, or with a unit "
		    "s, m, h, d (e.g. 90s, 15m, 1h)");
		return false;
	}
	v *= times;
	if (v < o->min || v > o->max) {
		rlg_key_problem(p, o, "\"%s\": must be from %s to %s (%lld to "
		    "%lld %s)", value, rlg_duration_str(o->min, o->duration_ms,
		    lo, sizeof lo), rlg_duration_str(o->max, o->duration_ms, hi,
		    sizeof hi), o->min, o->max, o->duration_ms == 1 ?
		    "milliseconds" : "seconds");
		return false;
	}
	*out = v;
	return true;
}

/* v of a key's unit (unit_ms: struct rlg_option) in the largest unit
 * that holds it whole: "366d", "10ms", "1m". */
static const char *
rlg_duration_str(long long v, int unit_ms, char *buf, size_t size)
{
	size_t i, best = 0;
	bool found = false;

	for (i = 0; i < sizeof rlg_duration_units /
	    sizeof rlg_duration_units[0]; i++) {
		if (rlg_duration_units[i].unit_ms != unit_ms ||
		    v % rlg_duration_units[i].times != 0)
			continue;
		if (!found || rlg_duration_units[i].times >
		    rlg_duration_units[best].times)
			best = i;
		found = true;
	}
	if (!found || v == 0)
		snprintf(buf, size, "%lld", v);
	else
		snprintf(buf, size, "%lld%s",
		    v / rlg_duration_units[best].times,
		    rlg_duration_units[best].unit);
	return buf;
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
bool
rlg_set_value(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	char *field = (char *)base + o->offset;
	size_t len = strlen(value);
	long long v;
	int w;

	switch (o->type) {
	case RLG_OPT_INT:
		if (o->duration_ms != 0) {
			if (!rlg_set_duration(p, o, value, &v))
				return false;
		} else if (!rlg_parse_int(value, o->min, o->max, &v)) {
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

	if (rlg_redis_url_parse(&((struct rlg_store_config *)base)->redis,
	    value, why, sizeof why) == 0)
		return true;
	shown = rlg_redis_url_masked(value);
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

/*
 * [admin] allow: a list of networks, or nothing (an empty value, or
 * "none"): the admin endpoints are off.
 */
static bool
rlg_set_admin_allow(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_admin_config *ac = base;

	if (*value != '\0' && strcmp(value, "none") != 0)
		return rlg_set_cidrs(p, o, value, base);
	free(ac->allow);
	ac->allow = NULL;
	ac->nallow = 0;
	return true;
}

/* [response] status: a registered 4xx or 5xx code (rlg_http_reason). */
static bool
rlg_set_status(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	long long v = 0;

	if (!rlg_set_value(p, o, value, base))
		return false;
	if (!rlg_parse_int(value, o->min, o->max, &v) ||
	    rlg_http_reason((int)v) == NULL) {
		rlg_key_problem(p, o, "must be a registered 4xx or 5xx status "
		    "code (400-418, 421-426, 428, 429, 431, 451, 500-508, 510, "
		    "511; got \"%s\")", value);
		return false;
	}
	return true;
}

/*
 * [admin] prefix: an absolute path of segments of unreserved characters
 * ([A-Za-z0-9._~-]), no empty, "." or ".." segment, no trailing '/': what
 * a request's normalized path can equal, so that the endpoints are
 * exactly PREFIX/metrics and the others.
 */
static bool
rlg_set_admin_prefix(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	const char *c, *seg;

	if (value[0] != '/') {
		rlg_key_problem(p, o, "must start with '/' (got \"%s\")",
		    value);
		return false;
	}
	for (seg = c = value + 1;; c++) {
		if (*c == '/' || *c == '\0') {
			size_t n = (size_t)(c - seg);

			if (n == 0 || (n == 1 && seg[0] == '.') ||
			    (n == 2 && seg[0] == '.' && seg[1] == '.')) {
				rlg_key_problem(p, o, "must be a path of "
				    "segments, without an empty, \".\" or "
				    "\"..\" one or a trailing '/' (got \"%s\")",
				    value);
				return false;
			}
			if (*c == '\0')
				break;
			seg = c + 1;
		} else if (!isalnum((unsigned char)*c) && *c != '-' &&
		    *c != '.' && *c != '_' && *c != '~') {
			rlg_key_problem(p, o, "may hold only letters, digits, "
			    "'-', '.', '_', '~' and '/' (got \"%s\")", value);
			return false;
		}
	}
	return rlg_set_value(p, o, value, base);
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
	size_t i, n;
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
		if (!rlg_header_name_ok(p, o, name)) {
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

/*
 * Whether name may be a header's name in the config: an HTTP token (RFC
 * 9110 tchar) of at most RLG_HEADER_NAME_MAX bytes. Reports it if not.
 */
static bool
rlg_header_name_ok(struct rlg_parse *p, const struct rlg_option *o,
    const char *name)
{
	size_t len = strlen(name);

	if (name[strspn(name, RLG_ALNUM "!#$%&'*+-.^_`|~")] != '\0') {
		rlg_key_problem(p, o, "header name must be an HTTP token: "
		    "A-Z a-z 0-9 and !#$%%&'*+-.^_`|~ (got \"%s\")", name);
		return false;
	}
	if (len > RLG_HEADER_NAME_MAX) {
		rlg_key_problem(p, o, "header name must be at most %d bytes "
		    "(got %zu)", RLG_HEADER_NAME_MAX, len);
		return false;
	}
	return true;
}

/*
 * [route] cost = N (o's range), or header:NAME: each request's cost is
 * what a trusted front says in that header, bounded by cost_max (whether
 * cost_max is set, and fits, waits for the end). The later of two good
 * values wins whole: a number drops the header, a header sets the fixed
 * cost back to 1.
 */
static bool
rlg_set_route_cost(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_route *r = base;
	long long v;

	if (strncmp(value, "header:", 7) == 0) {
		if (value[7] == '\0') {
			rlg_key_problem(p, o, "header:NAME needs a name (got "
			    "\"%s\")", value);
			return false;
		}
		if (!rlg_header_name_ok(p, o, value + 7))
			return false;
		free(r->cost_header);
		r->cost_header = rlg_xstrdup(value + 7);
		r->cost = 1;
		return true;
	}
	if (!rlg_parse_int(value, o->min, o->max, &v)) {
		rlg_key_problem(p, o, "must be an integer from %lld to %lld, "
		    "or header:NAME (got \"%s\")", o->min, o->max, value);
		return false;
	}
	free(r->cost_header);
	r->cost_header = NULL;
	r->cost = v;
	return true;
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

void
rlg_list_free(char **items, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(items[i]);
	free(items);
}
