/*
 * config.h: the INI configuration (read by ini.c) as plain structs.
 *
 * The loader reads the whole file, collects every problem as
 * "file:line: key: message (got "value")", and returns them all at once, so
 * an operator fixes a config in one pass. A loaded config is read-only;
 * requests borrow from it.
 */
#ifndef RLG_CONFIG_H
#define RLG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "limiter.h"
#include "net.h"
#include "redis_url.h"

/* sysexits.h: what main returns on a bad command line or config. */
#define RLG_EXIT_USAGE   64
#define RLG_EXIT_CONFIG  78
/* The store could not do what the command line asked (sysexits' EX_UNAVAILABLE). */
#define RLG_EXIT_UNAVAILABLE 69

enum rlg_on_error {
	RLG_ON_ERROR_CLOSED = 0,   /* 503 + Retry-After */
	RLG_ON_ERROR_OPEN,         /* let the request through */
};

enum rlg_header_style {
	RLG_STYLE_DRAFT03 = 0,     /* RateLimit-Limit / -Remaining / -Reset */
	RLG_STYLE_IETF,            /* RateLimit-Policy + RateLimit (latest draft) */
	RLG_STYLE_X_RATELIMIT,     /* X-RateLimit-Limit / -Remaining / -Reset */
	RLG_STYLE_ALL,             /* all three of the above */
	RLG_STYLE_NONE,            /* no rate-limit headers (Retry-After stays) */
};

enum rlg_error_format {
	RLG_ERRORS_JSON = 0,       /* the seed's {"error":{"code":...}} */
	RLG_ERRORS_PROBLEM,        /* RFC 9457 application/problem+json */
};

/*
 * What identifies a client for a policy: bits, ip with one value the
 * client chooses for a composite key; global alone.
 */
enum rlg_key_kind {
	RLG_KEY_IP = 1,          /* the client address (IPv6 by prefix) */
	RLG_KEY_HEADER = 2,      /* a request header (an API key), hashed */
	RLG_KEY_COOKIE = 4,      /* a cookie of the Cookie header, hashed */
	RLG_KEY_QUERY = 8,       /* a parameter of the query string, hashed */
	RLG_KEY_GLOBAL = 16,     /* one bucket, whoever asks */
	RLG_KEY_JWT = 32,        /* a claim of a verified bearer token, hashed */
};
/* The keys whose value the client sends (one at most in a policy):
 * hashed with key_secret, bounded by new_keys_per_ip. */
#define RLG_KEY_CHOSEN (RLG_KEY_HEADER | RLG_KEY_COOKIE | RLG_KEY_QUERY | \
	RLG_KEY_JWT)

/* [client] jwt_algorithm: the one algorithm bearer tokens are signed with. */
enum rlg_jwt_alg {
	RLG_JWT_HS256 = 0,       /* HMAC SHA-256, a shared secret */
	RLG_JWT_RS256,           /* RSA SHA-256, a public key */
	RLG_JWT_ES256,           /* ECDSA P-256 SHA-256, a public key */
};
/* [client] jwt_key: the file's bounds; an HS256 secret's least length. */
#define RLG_JWT_KEY_MAX    65536
#define RLG_JWT_SECRET_MIN 32
/* The store key of a global policy: no address or hash is "*". */
#define RLG_KEY_GLOBAL_CLIENT "*"

/* enforce: rejections are 429s; dry_run: computed, logged, not enforced. */
enum rlg_mode {
	RLG_MODE_ENFORCE = 0,
	RLG_MODE_DRY_RUN,
};

/*
 * One [policy NAME], as configured. Built once by the config, then
 * read-only. lim is all the limiter sees; the rest is how the gate applies
 * it: to which key, enforced or tried, for whom not at all.
 */
struct rlg_policy {
	char *name;                    /* section name: [policy NAME] */
	struct rlg_limit lim;          /* algorithm, limit, window, burst */
	unsigned key;                  /* enum rlg_key_kind bits; 0 means ip */
	char *key_name;                /* the NAME of key = header:NAME,
	                                  cookie:NAME or query:NAME (which:
	                                  key's RLG_KEY_CHOSEN bit), else NULL */
	enum rlg_mode mode;
	struct rlg_cidr *exempt;       /* clients it never limits */
	size_t nexempt;
	/*
	 * With a key the client chooses: how many new keys (keys with no live state)
	 * one client address may start per window; 0: no bound. The bound
	 * is a policy of its own, fixed_window, named NAME.new_keys, owned
	 * here (NULL without such a key or with new_keys 0).
	 */
	int64_t new_keys;
	struct rlg_policy *new_keys_policy;
	/*
	 * Smoothing (delay = N, an algorithm that smooths: limiter.h,
	 * rlg_limiter_wait): an admitted request over the rate is held until
	 * its turn, the first delay of a burst answered at once. false: every
	 * admitted request is answered at once (delay is then unused).
	 */
	bool smooth;
	int64_t delay;                 /* 0..burst */
};

/* The longest client key (an address, a hashed API key, both), in bytes,
 * without the NUL: what the request module makes and the store accepts. */
#define RLG_CLIENT_KEY_MAX 255

/* At most this many [policy NAME] sections; names are [A-Za-z0-9_.-]. */
#define RLG_POLICIES_MAX     32
#define RLG_POLICY_NAME_MAX  64

/* [store] synchronous (SQLite): normal (no fsync per commit) or full. */
enum rlg_sync {
	RLG_SYNC_NORMAL = 0,
	RLG_SYNC_FULL,
};

/* [store] group_commit: the steps of a process's threads batched
 * (store_group.h): one SQLite transaction, or one Redis script call. */
enum rlg_group {
	RLG_GROUP_AUTO = 0,
	RLG_GROUP_ON,
	RLG_GROUP_OFF,
};

/*
 * [store] commit (SQLite): each decision one commit, or the decisions in
 * the host's shared table and the database written behind (store_table.c).
 * auto, the default, is resolved when the config is finished: behind where
 * the table can hold the config, else each (rlg_config_why_each); a loaded
 * config never holds auto.
 */
enum rlg_commit {
	RLG_COMMIT_AUTO = 0,
	RLG_COMMIT_EACH,
	RLG_COMMIT_BEHIND,
};

/* [store] for backend = sqlite: one file, the processes of one machine. */
struct rlg_sqlite_config {
	char *path;                /* the database file */
	int path_line;             /* its line in the file; 0: the default */
	int busy_timeout_ms;       /* how long to wait for a lock */
	/*
	 * The most clients one policy keeps state for at once; 0: no limit.
	 * A request of a new client past it is a store failure (on_error).
	 * (Redis memory is bounded by maxmemory and key expiry.)
	 */
	int64_t max_clients;
	enum rlg_sync synchronous;     /* PRAGMA synchronous */
	enum rlg_commit commit;        /* each, or behind (the table) */
	bool commit_auto;              /* commit was auto: resolved, not
	                                  written */
	int64_t flush_ms;              /* behind: how often the table is
	                                  written to the database */
	/*
	 * behind: the entries of the table, max_clients for each policy
	 * that keeps state (the config computes it); 0: max_clients x 4.
	 */
	int64_t table_entries;
};

/*
 * [store]: what every backend shares, and each backend's own settings
 * (only the chosen backend's are used). All zero is a valid SQLite config
 * without a path.
 */
struct rlg_store_config {
	/* [store] backend: where the limiter state lives, as the index of
	 * its row in the table of backends (store_backends.h). */
	int backend;
	enum rlg_on_error on_error;
	/* Rejections remembered per worker thread (store_cache.c); 0: off. */
	int64_t rejection_cache;
	/* The most override rows a process reads from the store
	 * (overrides.c); rows past it are skipped. 0: none read. */
	int64_t max_overrides;
	/* auto: SQLite's with synchronous = full, Redis' (not a cluster's) */
	enum rlg_group group_commit;
	/*
	 * commit = behind with Redis (the local+global mode,
	 * store_table_sync.c): how often a host pushes the units it
	 * admitted and takes back the global state, in ms.
	 */
	int64_t sync_ms;
	struct rlg_sqlite_config sqlite;
	struct rlg_redis_config redis;
};

/* Log levels: error (store errors), warn (+ rejections, dry-run would-be
 * rejections), info (+ start-up and recovery notes, every decision). */
enum rlg_log_level {
	RLG_LOG_ERROR = 0,
	RLG_LOG_WARN,
	RLG_LOG_INFO,
};

/* How a log line is written: text (key=value), or one JSON object. */
enum rlg_log_format {
	RLG_LOG_TEXT = 0,
	RLG_LOG_JSON,
};

/*
 * [route NAME]: which policies apply to which requests. Routes are tried
 * in file order; the first whose path and method match decides.
 */
/*
 * How a route compares a request's path (path_match): normalized, the
 * default, takes the spellings common backends serve as one resource
 * (rlg_path_route: case, one trailing slash, ";params"); bytes
 * takes the decoded path byte for byte, for a strict backend.
 */
enum rlg_path_match {
	RLG_PATH_MATCH_NORMALIZED = 0,
	RLG_PATH_MATCH_BYTES,
};

struct rlg_route {
	char *name;
	char *path;                /* as configured, without a trailing '*' */
	bool prefix;               /* path ended in '*': a prefix match */
	enum rlg_path_match path_match;
	/* normalized: path as rlg_path_route spells it (an exact
	 * route's without its trailing '/'); NULL with bytes */
	char *match_path;
	char **methods;            /* nmethods method names; 0: any method */
	size_t nmethods;
	size_t *policies;          /* indexes into cfg->policies */
	size_t npolicies;          /* 0 with policies = none: exempt */
	/*
	 * What one request of the route costs each of its policies, in
	 * units of their limits: 1..RLG_COST_MAX, at most the capacity of
	 * every policy (its limit; burst for token_bucket). Default 1; 1
	 * with a header cost.
	 */
	int64_t cost;
	/*
	 * cost = header:NAME: NAME (as written; compared without case),
	 * the header a trusted front sets to each request's cost (request.h,
	 * rlg_request_cost); NULL: the cost is fixed. cost_max, with a
	 * header only (else 0), bounds it as cost is bounded, and is what a
	 * request costs whose header is not believed or not there.
	 */
	char *cost_header;
	int64_t cost_max;
};

/*
 * Per-client tiers (tier.h): what a tier, or an override row in the
 * store, changes of one policy for its clients. A value of 0 keeps the
 * policy's; exempt: the policy does not limit them (as [policy] exempt).
 */
struct rlg_tier_spec {
	int64_t limit;             /* 1..RLG_LIMIT_MAX, or 0 */
	int64_t window_s;          /* 1..RLG_WINDOW_S_MAX, or 0 */
	int64_t burst;             /* token_bucket: 1..RLG_BURST_MAX, or 0 */
	bool exempt;               /* then the others are 0 */
};

/* "k:" and the 32 hex digits of an API key's hash (rlgate --hash-key). */
#define RLG_TIER_KEY_LEN 34

/*
 * Whom a tier names: the clients whose address lies in a network (an
 * address is a network of one), or the client whose API key hashes to
 * key (a policy keyed by header:NAME only).
 */
struct rlg_tier_client {
	bool is_key;
	struct rlg_cidr net;
	char key[RLG_TIER_KEY_LEN + 1];
};

/* One line "POLICY = SPEC" of a [tier NAME]. */
struct rlg_tier_rule {
	size_t policy;             /* index into cfg->policies */
	struct rlg_tier_spec spec;
};

/*
 * [tier NAME]: clients, and what it changes of each policy it names.
 * A client in several tiers gets, for each policy, the first tier in
 * file order that names both (tier.h says how overrides in the store
 * come before tiers).
 */
struct rlg_tier {
	char *name;
	struct rlg_tier_client *clients;   /* nclients */
	size_t nclients;
	struct rlg_tier_rule *rules;       /* nrules, in file order */
	size_t nrules;
};

/* The longest spec or client text read, in bytes. */
#define RLG_TIER_SPEC_MAX   128

/*
 * Parses a spec (tier.h) into *out. 0, or -1 with what is wrong in err (errlen
 * bytes, a phrase: "limit: must be an integer from 1 to 1000000000 (got
 * \"0\")").
 */
int rlg_tier_spec_parse(const char *s, struct rlg_tier_spec *out, char *err,
    size_t errlen);

/*
 * Parses a client into *out: "k:" and 32 hex digits (upper case is read
 * as lower), else an address or a CIDR (rlg_cidr_parse: host bits
 * zero). 0, or -1 with err.
 */
int rlg_tier_client_parse(const char *s, struct rlg_tier_client *out,
    char *err, size_t errlen);

/*
 * The limit spec gives policy p (not exempt): p's, with the spec's
 * limit and window; burst (token_bucket) the spec's, else p's own when p
 * sets one apart from its limit, else the new limit. 0, or -1 with err
 * when the spec does not fit p (burst for another algorithm, a
 * sliding_log limit above RLG_SLIDING_LOG_LIMIT_MAX).
 */
int rlg_tier_limit(const struct rlg_policy *p,
    const struct rlg_tier_spec *spec, struct rlg_limit *out, char *err,
    size_t errlen);

/* At most this many [tier NAME] sections, clients in one tier. */
#define RLG_TIERS_MAX          64
#define RLG_TIER_CLIENTS_MAX   4096

/* Which forwarding header trusted proxies set (only that one is read). */
enum rlg_forwarded_header {
	RLG_FWD_X_FORWARDED_FOR = 0,
	RLG_FWD_FORWARDED,          /* RFC 7239 Forwarded: for= */
};

/* [client]: who the client is. */
struct rlg_client_config {
	enum rlg_forwarded_header forwarded_header;
	struct rlg_cidr *trusted_proxies;   /* ntrusted networks */
	size_t ntrusted;
	int ipv6_prefix;           /* 1..128: IPv6 clients grouped by prefix */
	struct rlg_cidr *exempt;   /* never limited by any policy */
	size_t nexempt;
	char *key_secret;          /* keys the hash of API keys; NULL if unset */
	/*
	 * Bearer tokens (key = jwt:CLAIM): the file named, its contents read
	 * at load (an HS256 secret, its trailing newline dropped, or a PEM
	 * public key; NUL-ended), the algorithm, and a number no other load
	 * of this process had (a verified token's cache goes by it).
	 */
	char *jwt_key_file;
	int jwt_algorithm;         /* enum rlg_jwt_alg */
	unsigned char *jwt_key;
	size_t jwt_key_len;
	uint64_t jwt_generation;
};

/*
 * [admin]: who may read the admin endpoints (admin.c: metrics, health,
 * status, the status page) and under which path. No networks: the
 * endpoints are off, their paths are like any other.
 */
struct rlg_admin_config {
	struct rlg_cidr *allow;    /* nallow networks, matched against the
	                              client's address as [client] says */
	size_t nallow;
	char *prefix;              /* "/rlgate": a path, no trailing '/' */
};

#define RLG_DEFAULT_ADMIN_PREFIX "/rlgate"
#define RLG_DEFAULT_ADMIN_ALLOW  "127.0.0.1/32, ::1/128"
#define RLG_ADMIN_PREFIX_MAX     64

#define RLG_DEFAULT_IPV6_PREFIX 64
#define RLG_ROUTES_MAX 256
/* Caps on the lists of the config: networks in one trusted_proxies or
 * exempt, methods of one route; a key header name is 1..64 bytes of an
 * HTTP token; key_secret is at least 16 bytes. */
#define RLG_CIDRS_MAX          64
#define RLG_ROUTE_METHODS_MAX  16
#define RLG_HEADER_NAME_MAX    64
#define RLG_KEY_SECRET_MIN     16

struct rlg_config {
	char *source;              /* the file it came from, or NULL: built-in */
	struct rlg_store_config store;
	enum rlg_header_style style;
	enum rlg_error_format errors;  /* [response] errors */
	int reject_status;             /* [response] status: a refusal's code */
	struct rlg_policy *policies;   /* npolicies entries, in file order */
	size_t npolicies;              /* 1..RLG_POLICIES_MAX */
	struct rlg_route *routes;      /* nroutes [route NAME], in file order */
	size_t nroutes;
	/*
	 * The policies of a request that matches no route: with no routes,
	 * every policy; with routes, [policy default] if there is one, else
	 * none. Indexes into policies.
	 */
	size_t *default_policies;
	size_t ndefault;
	struct rlg_client_config client;
	struct rlg_admin_config admin;
	struct rlg_tier *tiers;        /* ntiers [tier NAME], in file order */
	size_t ntiers;
	bool report_exempt;            /* [headers] report_exempt */
	enum rlg_log_level log_level;  /* [log] level */
	enum rlg_log_format log_format;        /* [log] format */
	int read_timeout_ms;           /* [fastcgi] read_timeout_ms */
	int max_parked;                /* [fastcgi] max_parked */
};

/* Built-in defaults (used when no config file is found). */
#define RLG_DEFAULT_DB_PATH      LOCALSTATEDIR "/lib/rlgate/rlgate.db"
#define RLG_DEFAULT_CONFIG_PATH  SYSCONFDIR "/rlgate.conf"
#define RLG_DEFAULT_BUSY_TIMEOUT_MS 2000
#define RLG_DEFAULT_MAX_CLIENTS 1000000
#define RLG_MAX_CLIENTS_MAX 1000000000
/* [store] flush_ms (commit = behind), and the table's most entries. */
#define RLG_DEFAULT_FLUSH_MS     1000
#define RLG_FLUSH_MS_MIN         10
#define RLG_FLUSH_MS_MAX         60000
#define RLG_DEFAULT_SYNC_MS      100
#define RLG_SYNC_MS_MAX          60000
#define RLG_TABLE_ENTRIES_MAX    ((int64_t)1 << 26)
#define RLG_DEFAULT_REJECTION_CACHE 4096
#define RLG_DEFAULT_MAX_OVERRIDES 100000
#define RLG_MAX_OVERRIDES_MAX 100000
#define RLG_REJECTION_CACHE_MAX 1048576
/* [policy] new_keys_per_ip: new header keys per address and window. */
#define RLG_DEFAULT_NEW_KEYS     100
/* The name of a policy's bound on new keys: NAME + this; no [policy]
 * name may end in it. */
#define RLG_NEW_KEYS_SUFFIX      ".new_keys"
#define RLG_DEFAULT_LIMIT        60
#define RLG_DEFAULT_WINDOW_S     60
/* [fastcgi] read_timeout_ms: each wait for the web server, in ms. */
#define RLG_DEFAULT_READ_TIMEOUT_MS 5000
#define RLG_READ_TIMEOUT_MS_MIN  100
#define RLG_READ_TIMEOUT_MS_MAX  600000
/* [fastcgi] max_parked: the answers one process holds for their turn. */
#define RLG_DEFAULT_MAX_PARKED   1000
#define RLG_MAX_PARKED_MAX       100000

/*
 * The longest line a config file may hold, in bytes, not counting its end
 * of line ("\n" or "\r\n"); a longer line is reported as a problem.
 */
#define RLG_CONFIG_LINE_MAX      8192

/*
 * Returns a new config holding the built-in defaults. The caller owns it
 * and frees it with rlg_config_free.
 */
struct rlg_config *rlg_config_defaults(void);

/*
 * Loads the INI file at path over the built-in defaults.
 * On success returns 0 and stores a new config (caller frees) in *out.
 * On failure returns the number of problems found (> 0), writes each one as
 * a line "path:line: message" to errs (if not NULL), and leaves *out NULL.
 * A file that cannot be opened is one problem "path: cannot open: reason".
 */
int rlg_config_load(const char *path, FILE *errs, struct rlg_config **out);

/*
 * Same as rlg_config_load, from a string in memory; name is used in the
 * messages in place of a file name. For the tests and the fuzzer.
 */
int rlg_config_load_string(const char *text, const char *name, FILE *errs,
    struct rlg_config **out);

/*
 * Chooses the config file as DESIGN.md says: the --config option (opt, may
 * be NULL), else $RLGATE_CONFIG, else SYSCONFDIR/rlgate.conf if it exists,
 * else NULL (built-in defaults). Returns a borrowed or static string.
 */
const char *rlg_config_pick(const char *opt);

/* Frees a config; NULL does nothing. */
void rlg_config_free(struct rlg_config *cfg);

/*
 * Why [store] commit = auto gives cfg's SQLite store each, not behind:
 * the decision table cannot hold it (a sliding_log policy, max_clients =
 * 0, or max_clients x the policies that keep state over
 * RLG_TABLE_ENTRIES_MAX). Returns true with the reason in why (size
 * bytes, a phrase: "[policy s] is a sliding_log, whose log lives in the
 * database"), or false with why "" when the table holds it. The loader
 * resolves auto with it; main.c says it in the log and --check-config.
 */
bool rlg_config_why_each(const struct rlg_config *cfg, char *why,
    size_t size);

/*
 * Whether the SQLite store of cfg can keep its database where [store]
 * path says: its directory exists, is a directory, and the calling user
 * may write there (and the file, if it is there). The store creates the
 * file there, and its -wal, -shm, -table and -metrics beside it. Returns
 * 0 (or with another backend), else -1 with the problem in msg (size
 * bytes) as "FILE:LINE: path: directory DIR does not exist: ..." (the
 * line of [store] path; "FILE: " alone for the default path, "built-in
 * defaults: " without a file). Reads the file system: for
 * --check-config and the start, not the loader (a config may name a
 * directory that appears later: the store heals when it does).
 */
int rlg_config_check_dir(const struct rlg_config *cfg, char *msg,
    size_t size);

/*
 * Whether b's [store] differs from a's in a key that a running store
 * keeps (everything but on_error: the backend, where and how it stores,
 * the rejection cache, the commit as resolved): a reload cannot apply
 * such a change. True with the key's name in what (size bytes), else
 * false and "".
 */
bool rlg_config_store_changed(const struct rlg_config *a,
    const struct rlg_config *b, char *what, size_t size);

/* A word a key takes, and the enum value it stands for. */
struct rlg_word {
	const char *name;
	int value;
};

/* What kind of value a key takes (struct rlg_option). */
enum rlg_option_type {
	RLG_OPT_INT = 0,       /* a decimal integer from min to max */
	RLG_OPT_ENUM,          /* one of words */
	RLG_OPT_STRING,        /* text of min to max bytes: a path, a secret */
	RLG_OPT_CIDRS,         /* a list of at most max addresses, networks */
	RLG_OPT_COMPOUND,      /* anything else: its own setter parses it */
};

/* The loader's state (config_load.c, config_priv.h), for the setters. */
struct rlg_parse;
struct rlg_option;

/*
 * A setter: checks value (not empty) for o, reports what is wrong with it
 * and, if it is good, stores it in the struct at base (or in p). Returns
 * whether it was good.
 */
typedef bool rlg_option_set_fn(struct rlg_parse *p,
    const struct rlg_option *o, const char *value, void *base);

/*
 * One config key, one row of the option table: what the loader parses
 * and checks, and what the man page and the example config must say
 * (tests/check_config.c holds them to it). A key of [policy NAME] or
 * [route NAME] has the section "policy" or "route".
 */
struct rlg_option {
	const char *section;   /* "store", "headers", "response", "client",
	                          "log", "admin", "policy", "route" */
	const char *name;
	enum rlg_option_type type;
	/*
	 * The field it fills, in the struct of its section: rlg_store_config
	 * ([store]), rlg_config ([headers], [response], [log]),
	 * rlg_client_config ([client]), rlg_policy, rlg_route. size is 1
	 * (bool), sizeof(int) (int, enum) or 8 (int64_t); a list of networks
	 * keeps its size_t count at count_offset.
	 */
	size_t offset;
	size_t size;
	size_t count_offset;
	long long min, max;    /* INT: the range; STRING: the length in
	                          bytes; CIDRS: max networks */
	int scale;             /* INT: stored times scale (0: 1) */
	/*
	 * INT: 0, or a duration: the milliseconds a bare number's unit is
	 * worth, 1000 for a key in seconds (it also takes s, m, h, d) and 1
	 * for a key in ms (ms, s, m). min and max are in that unit.
	 */
	int duration_ms;
	const struct rlg_word *words;  /* ENUM: NULL-ended, in the order the
	                                  messages list them */
	const char *def;       /* the default, as the docs write it */
	const char *doc;       /* what it is, in one line */
	rlg_option_set_fn *set;    /* or NULL: the type's own setter */
	bool empty_ok;         /* an empty value is one ("" to the setter) */
};

/*
 * The option table: every key of every section, *n of them. Static.
 */
const struct rlg_option *rlg_config_options(size_t *n);

/* Names for the logs, the words of the option table: "closed"/"open",
 * "draft03", "json"/"problem", "sqlite"/"redis", "redis"/"local"
 * ("unknown" for a value no word stands for). */
const char *rlg_on_error_name(enum rlg_on_error e);
const char *rlg_style_name(enum rlg_header_style s);
const char *rlg_error_format_name(enum rlg_error_format f);
const char *rlg_store_backend_name(int b);
const char *rlg_store_clock_name(enum rlg_store_clock c);
/* "auto", "each", "behind". */
const char *rlg_commit_name(enum rlg_commit c);
/* "error", "warn", "info" ("unknown" for anything else). */
const char *rlg_log_level_name(enum rlg_log_level l);
const char *rlg_log_format_name(enum rlg_log_format f);

#endif
