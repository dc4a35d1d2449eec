/*
 * config_options.c: the option table of the config and what reads it,
 * because the table is the one place that says what a key is: the
 * loader, --check-config, the man page and the example config all follow
 * these rows.
 *
 * Options are data: rlg_options holds one row per key (section, name,
 * type, the field it fills, bounds, words, default, one line of doc).
 * The setters the rows name are config_set.c's: generic ones for
 * integers, words, strings and lists of networks, a hand-written one only
 * for a compound value or a check of its own. The names the logs use for
 * enum values come from the same word rows, and the man page and the
 * example config are held to the rows by tests/check_config.c.
 */#include <assert.h>
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
#include "store_backends.h"
#include "util.h"

/* The longest store path, in bytes (PATH_MAX less its NUL on Linux). */
#define RLG_CONFIG_PATH_MAX  4095

/* The longest busy_timeout_ms: ten minutes. */
#define RLG_BUSY_TIMEOUT_MS_MAX  600000

/* The words each enum key takes, in the order the messages list them;
 * the first word of a value is its name in the logs. */
static const struct rlg_word rlg_on_error_words[] = {
	{ "closed", RLG_ON_ERROR_CLOSED }, { "open", RLG_ON_ERROR_OPEN },
	{ NULL, 0 }
};
/* The words of the backends' rows, each with its row's index. */
#define RLG_BACKEND_WORD_(e, word, flags, entry) { word, RLG_BACKEND_##e },
static const struct rlg_word rlg_backend_words[] = {
	RLG_STORE_BACKENDS(RLG_BACKEND_WORD_)
	{ NULL, 0 }
};
#undef RLG_BACKEND_WORD_
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
/* The limiter's algorithms, each by its name (limiter.h). */
#define RLG_ALG_WORD_(e, name) { #name, RLG_ALG_##e },
static const struct rlg_word rlg_algorithm_words[] = {
	RLG_ALGORITHMS(RLG_ALG_WORD_) { NULL, 0 }
};
#undef RLG_ALG_WORD_
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
static const struct rlg_word rlg_jwt_alg_words[] = {
	{ "HS256", RLG_JWT_HS256 }, { "RS256", RLG_JWT_RS256 },
	{ "ES256", RLG_JWT_ES256 }, { NULL, 0 }
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
	  RLG_STORE(group_commit),
	  .words = rlg_group_words, .def = "auto",
	  .doc = "Whether the threads of a process share round trips to the"
	  " store." },
	{ RLG_KEY("store", "commit", ENUM), RLG_STORE(sqlite.commit),
	  .words = rlg_commit_words, .def = "auto",
	  .doc = "Decided in shared memory and written behind, or a commit"
	  " each." },
	{ RLG_KEY("store", "flush_ms", INT), RLG_STORE(sqlite.flush_ms),
	  .min = RLG_FLUSH_MS_MIN, .max = RLG_FLUSH_MS_MAX, .duration_ms = 1,
	  .def = "1000",
	  .doc = "commit = behind: how often the table is written to SQLite,"
	  " in ms." },
	{ RLG_KEY("store", "sync_ms", INT), RLG_STORE(sync_ms),
	  .min = 1, .max = RLG_SYNC_MS_MAX, .duration_ms = 1, .def = "100",
	  .doc = "Redis, commit = behind: how often a host syncs, in ms." },
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
	{ RLG_KEY("client", "jwt_key", STRING), RLG_CLIENT(jwt_key_file),
	  .min = 1, .max = RLG_CONFIG_LINE_MAX, .def = "none",
	  .doc = "The file of the key that verifies bearer tokens." },
	{ RLG_KEY("client", "jwt_algorithm", ENUM), RLG_CLIENT(jwt_algorithm),
	  .words = rlg_jwt_alg_words, .def = "HS256",
	  .doc = "The one algorithm bearer tokens are signed with." },
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
	{ RLG_KEY("fastcgi", "max_parked", INT), RLG_CONFIG(max_parked),
	  .max = RLG_MAX_PARKED_MAX, .def = "1000",
	  .doc = "The answers one process holds for their turn (delay)." },
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
	{ RLG_KEY("policy", "ban", INT), RLG_POLICY(lim.ban_ms),
	  .max = RLG_BAN_S_MAX, .scale = 1000, .duration_ms = 1000,
	  .def = "0",
	  .doc = "Seconds a client is refused after its ban_after-th refusal." },
	{ RLG_KEY("policy", "ban_after", INT), RLG_POLICY(lim.ban_after),
	  .min = 1, .max = RLG_LIMIT_MAX, .def = "1",
	  .doc = "With ban: the refusal in one window that starts the ban." },
	{ RLG_KEY("policy", "delay", INT), RLG_POLICY(delay), .max = RLG_BURST_MAX,
	  .def = "none (answer at once)",
	  .doc = "With token_bucket: hold requests over the rate for their turn." },
	{ RLG_KEY("policy", "new_keys_per_ip", INT), RLG_POLICY(new_keys),
	  .max = RLG_LIMIT_MAX, .def = "100",
	  .doc = "With a key the client chooses: new keys per address and "
	  "window." },
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
RLG_NAME_FN(rlg_store_backend_name, int, rlg_backend_words)
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
