/*
 * check_config.c: the config loader. "core" checks what a good file
 * becomes, "policies" the [policy NAME] sections (order, defaults, names,
 * the cap, the checks that span keys), "clients" who a client is (key,
 * mode, exempt, [client], [headers] report_exempt, [log]), "routes" the
 * [route NAME] sections and the policies of a request that matches none,
 * "errors" that every kind of problem
 * is reported on its own line with its exact line number and text, all of
 * them in one pass, "redis" the [store] keys of the Redis backend (url
 * forms, the keys of one backend set with the other, passwords masked in
 * the messages), and "files" the loading from disk and the choice of the
 * file to load.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_rlgate.h"
#include "config.h"
#include "store.h"
#include "ini.h"

/* One value that a key must refuse, and what the loader says. */
struct rlg_t_bad {
	const char *section;   /* the header, without brackets */
	const char *key;
	const char *value;
	const char *msg;       /* the problem, after "t.conf:2: " */
};

static char *rlg_t_fmt(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static char *rlg_t_repeat(char c, size_t n);
static char *rlg_t_load(const char *text, int *n, struct rlg_config **cfg);
static void rlg_t_expect(const char *text, int count, const char *want);
static struct rlg_config *rlg_t_ok(const char *text);
static const char *rlg_t_tmpdir(void);
static char *rlg_t_file(const char *content, size_t len);
static char *rlg_t_policies(size_t n);

/* A value that a key must accept, and what it becomes. */
struct rlg_t_word {
	const char *word;
	int value;
};

#define RLG_T_LIMIT_RANGE "must be an integer from 1 to 1000000000"
#define RLG_T_WINDOW_RANGE "must be from 1s to 366d (1 to 31622400 seconds)"
#define RLG_T_BUSY_RANGE "must be from 0 to 10m (0 to 600000 milliseconds)"
#define RLG_T_DUR_S "a duration in seconds, or with a unit s, m, h, d " \
    "(e.g. 90s, 15m, 1h)"
#define RLG_T_DUR_MS "a duration in milliseconds, or with a unit ms, s, " \
    "m (e.g. 500ms, 2s, 1m)"
#define RLG_T_MAXC_RANGE "must be an integer from 0 to 1000000000"
#define RLG_T_BURST_RANGE "must be an integer from 1 to 1000000000"
/*
 * The words of the algorithms and of the backends, listed as their
 * tables list them (RLG_ALGORITHMS, limiter.h; RLG_STORE_BACKENDS,
 * store_backends.h), so that a new one needs no edit here: an expected
 * message writes the marker, and rlg_t_expect puts the list in its place
 * (rlg_t_words) before it compares the whole message.
 */
#define RLG_T_ALGORITHMS "must be one of <algorithms>"
#define RLG_T_BACKENDS "must be one of <backends>"
#define RLG_T_STYLES "must be one of draft03, ietf, x-ratelimit, all, none"
#define RLG_T_NEED_SECRET "header, cookie, query and jwt keys are stored " \
    "hashed: set [client] key_secret (at least 16 random bytes, e.g. " \
    "openssl rand -hex 32)"
#define RLG_T_KEYS "must be one of ip, header:NAME, cookie:NAME, " \
    "query:NAME, jwt:CLAIM, global"
#define RLG_T_TOKEN "header name must be an HTTP token: " \
    "A-Z a-z 0-9 and !#$%&'*+-.^_`|~"
#define RLG_T_CIDR "not an IP address or ADDR/LEN network with zero " \
    "host bits"
#define RLG_T_EMPTY_ITEM "empty item in the list"
/* A [policy NAME], [route NAME] or [tier NAME] again: a warning. */
#define RLG_T_AGAIN(label, line, first) "t.conf:" line ": warning: " label \
    " again (first on line " first "): its keys merge into that one; a " \
    "copy meant as another one needs a name of its own\n"
#define RLG_T_SECRET "openssl rand -hex 32"
#define RLG_T_READ_RANGE "must be from 100ms to 10m (100 to 600000 " \
    "milliseconds)"
#define RLG_T_FLUSH_RANGE "must be from 10ms to 1m (10 to 60000 milliseconds)"
#define RLG_T_REDIS_TIMEOUT "must be from 1ms to 1m (1 to 60000 milliseconds)"
#define RLG_T_PORT "port must be an integer from 1 to 65535"
#define RLG_T_DB "database must be an integer from 0 to 2147483647"
#define RLG_T_HOST "bad host: a name of A-Z a-z 0-9 . - _, an IPv4 " \
    "address, or an IPv6 address in brackets"

static const struct rlg_t_bad rlg_t_bad_values[] = {
	{ "policy default", "limit", "abc",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"abc\")" },
	{ "policy default", "limit", "60s",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"60s\")" },
	{ "policy default", "limit", "-1",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"-1\")" },
	{ "policy default", "limit", "0",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"0\")" },
	{ "policy default", "limit", "99999999999999999999",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE
	    " (got \"99999999999999999999\")" },
	{ "policy default", "limit", "1000000001",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE
	    " (got \"1000000001\")" },
	{ "policy default", "limit", "+5",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"+5\")" },
	{ "policy default", "limit", "0x10",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"0x10\")" },
	{ "policy default", "limit", "1.5",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"1.5\")" },
	{ "policy default", "limit", "1 2",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"1 2\")" },
	{ "policy default", "window", "0",
	    "[policy default] window: \"0\": " RLG_T_WINDOW_RANGE },
	{ "policy default", "window", "60y",
	    "[policy default] window: \"60y\": " RLG_T_DUR_S },
	{ "policy default", "window", "1.5h",
	    "[policy default] window: \"1.5h\": " RLG_T_DUR_S },
	{ "policy default", "window", "60 s",
	    "[policy default] window: \"60 s\": " RLG_T_DUR_S },
	{ "policy default", "window", "60S",
	    "[policy default] window: \"60S\": " RLG_T_DUR_S },
	{ "policy default", "window", "60ms",
	    "[policy default] window: \"60ms\": " RLG_T_DUR_S },
	{ "policy default", "window", "s",
	    "[policy default] window: \"s\": " RLG_T_DUR_S },
	{ "policy default", "window", "-1",
	    "[policy default] window: \"-1\": " RLG_T_DUR_S },
	{ "policy default", "window", "-1s",
	    "[policy default] window: \"-1s\": " RLG_T_DUR_S },
	{ "policy default", "window", "31622401",
	    "[policy default] window: \"31622401\": " RLG_T_WINDOW_RANGE },
	{ "policy default", "window", "367d",
	    "[policy default] window: \"367d\": " RLG_T_WINDOW_RANGE },
	{ "policy default", "window", "99999999999d",
	    "[policy default] window: \"99999999999d\": " RLG_T_WINDOW_RANGE },
	{ "policy default", "window", "106751991167301d",
	    "[policy default] window: \"106751991167301d\": " RLG_T_DUR_S },
	{ "policy default", "window", "99999999999999999999",
	    "[policy default] window: \"99999999999999999999\": " RLG_T_DUR_S },
	{ "store", "busy_timeout_ms", "-1",
	    "[store] busy_timeout_ms: \"-1\": " RLG_T_DUR_MS },
	{ "store", "busy_timeout_ms", "600001",
	    "[store] busy_timeout_ms: \"600001\": " RLG_T_BUSY_RANGE },
	{ "store", "busy_timeout_ms", "11m",
	    "[store] busy_timeout_ms: \"11m\": " RLG_T_BUSY_RANGE },
	{ "store", "busy_timeout_ms", "2h",
	    "[store] busy_timeout_ms: \"2h\": " RLG_T_DUR_MS },
	{ "store", "busy_timeout_ms", "2.5s",
	    "[store] busy_timeout_ms: \"2.5s\": " RLG_T_DUR_MS },
	{ "store", "busy_timeout_ms", "99999999999999999999",
	    "[store] busy_timeout_ms: \"99999999999999999999\": " RLG_T_DUR_MS },
	{ "store", "busy_timeout_ms", "153722867280913m",
	    "[store] busy_timeout_ms: \"153722867280913m\": " RLG_T_DUR_MS },
	{ "fastcgi", "read_timeout_ms", "99",
	    "[fastcgi] read_timeout_ms: \"99\": " RLG_T_READ_RANGE },
	{ "fastcgi", "read_timeout_ms", "0",
	    "[fastcgi] read_timeout_ms: \"0\": " RLG_T_READ_RANGE },
	{ "fastcgi", "read_timeout_ms", "600001",
	    "[fastcgi] read_timeout_ms: \"600001\": " RLG_T_READ_RANGE },
	{ "fastcgi", "read_timeout_ms", "5d",
	    "[fastcgi] read_timeout_ms: \"5d\": " RLG_T_DUR_MS },
	{ "store", "flush_ms", "9ms",
	    "[store] flush_ms: \"9ms\": " RLG_T_FLUSH_RANGE },
	{ "store", "flush_ms", "2m",
	    "[store] flush_ms: \"2m\": " RLG_T_FLUSH_RANGE },
	{ "store", "flush_ms", "1 s",
	    "[store] flush_ms: \"1 s\": " RLG_T_DUR_MS },
	{ "store", "max_clients", "-1",
	    "[store] max_clients: " RLG_T_MAXC_RANGE " (got \"-1\")" },
	{ "store", "max_clients", "1000000001",
	    "[store] max_clients: " RLG_T_MAXC_RANGE
	    " (got \"1000000001\")" },
	{ "store", "max_clients", "1e6",
	    "[store] max_clients: " RLG_T_MAXC_RANGE " (got \"1e6\")" },
	{ "store", "rejection_cache", "-1",
	    "[store] rejection_cache: must be an integer from 0 to 1048576"
	    " (got \"-1\")" },
	{ "store", "rejection_cache", "1048577",
	    "[store] rejection_cache: must be an integer from 0 to 1048576"
	    " (got \"1048577\")" },
	{ "store", "on_error", "Closed",
	    "[store] on_error: must be one of closed, open (got \"Closed\")" },
	{ "store", "on_error", "fail",
	    "[store] on_error: must be one of closed, open (got \"fail\")" },
	{ "store", "synchronous", "off",
	    "[store] synchronous: must be one of normal, full (got \"off\")" },
	{ "store", "synchronous", "FULL",
	    "[store] synchronous: must be one of normal, full (got \"FULL\")" },
	{ "store", "group_commit", "yes",
	    "[store] group_commit: must be one of auto, on, off"
	    " (got \"yes\")" },
	{ "headers", "style", "x",
	    "[headers] style: " RLG_T_STYLES " (got \"x\")" },
	{ "headers", "style", "DRAFT03",
	    "[headers] style: " RLG_T_STYLES " (got \"DRAFT03\")" },
	{ "headers", "style", "draft-03",
	    "[headers] style: " RLG_T_STYLES " (got \"draft-03\")" },
	{ "headers", "style", "x_ratelimit",
	    "[headers] style: " RLG_T_STYLES " (got \"x_ratelimit\")" },
	{ "response", "errors", "xml",
	    "[response] errors: must be one of json, problem (got \"xml\")" },
	{ "response", "errors", "JSON",
	    "[response] errors: must be one of json, problem (got \"JSON\")" },
	{ "response", "errors", "problem+json",
	    "[response] errors: must be one of json, problem "
	    "(got \"problem+json\")" },
	{ "response", "errors", "",
	    "[response] errors: must not be empty" },
	{ "response", "status", "420",
	    "[response] status: must be a registered 4xx or 5xx status code "
	    "(400-418, 421-426, 428, 429, 431, 451, 500-508, 510, 511; "
	    "got \"420\")" },
	{ "response", "status", "509",
	    "[response] status: must be a registered 4xx or 5xx status code "
	    "(400-418, 421-426, 428, 429, 431, 451, 500-508, 510, 511; "
	    "got \"509\")" },
	{ "response", "status", "200",
	    "[response] status: must be an integer from 400 to 599 "
	    "(got \"200\")" },
	{ "response", "status", "4290",
	    "[response] status: must be an integer from 400 to 599 "
	    "(got \"4290\")" },
	{ "policy default", "algorithm", "leaky_bucket",
	    "[policy default] algorithm: unknown algorithm "
	    "(got \"leaky_bucket\"): " RLG_T_ALGORITHMS },
	{ "policy default", "algorithm", "Fixed_Window",
	    "[policy default] algorithm: unknown algorithm "
	    "(got \"Fixed_Window\"): " RLG_T_ALGORITHMS },
	{ "policy default", "algorithm", "gcra",
	    "[policy default] algorithm: unknown algorithm "
	    "(got \"gcra\"): " RLG_T_ALGORITHMS },
	{ "policy default", "algorithm", "",
	    "[policy default] algorithm: must not be empty" },
	{ "policy tb", "burst", "0",
	    "[policy tb] burst: " RLG_T_BURST_RANGE " (got \"0\")" },
	{ "policy tb", "burst", "-3",
	    "[policy tb] burst: " RLG_T_BURST_RANGE " (got \"-3\")" },
	{ "policy tb", "burst", "1000000001",
	    "[policy tb] burst: " RLG_T_BURST_RANGE " (got \"1000000001\")" },
	{ "policy tb", "burst", "ten",
	    "[policy tb] burst: " RLG_T_BURST_RANGE " (got \"ten\")" },
	{ "policy tb", "burst", "",
	    "[policy tb] burst: must not be empty" },
	{ "policy a.b-c_9", "window", "1y",
	    "[policy a.b-c_9] window: \"1y\": " RLG_T_DUR_S },
	{ "policy default", "key", "header:X-Api-Key",
	    "[policy default] key: " RLG_T_NEED_SECRET },
	{ "policy default", "key", "header:",
	    "[policy default] key: " RLG_T_KEYS " (got \"header:\")" },
	{ "policy default", "key", "IP",
	    "[policy default] key: " RLG_T_KEYS " (got \"IP\")" },
	{ "policy default", "limit", "",
	    "[policy default] limit: must not be empty" },
	{ "policy default", "key", "",
	    "[policy default] key: must not be empty" },
	{ "store", "path", "",
	    "[store] path: must not be empty" },
	{ "headers", "style", "",
	    "[headers] style: must not be empty" },
	/* key: each item, spaces around commas, one header, no repeats */
	{ "policy default", "key", "header:X Y",
	    "[policy default] key: " RLG_T_TOKEN " (got \"X Y\")" },
	{ "policy default", "key", "header: X-Api-Key",
	    "[policy default] key: " RLG_T_TOKEN " (got \" X-Api-Key\")" },
	{ "policy default", "key", "header:X:Y",
	    "[policy default] key: " RLG_T_TOKEN " (got \"X:Y\")" },
	{ "policy default", "key", "header:X\xC3\xA9",
	    "[policy default] key: " RLG_T_TOKEN " (got \"X\xC3\xA9\")" },
	{ "policy default", "key", "header:(x)",
	    "[policy default] key: " RLG_T_TOKEN " (got \"(x)\")" },
	{ "policy default", "key", "header:"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	    "[policy default] key: header name must be at most 64 bytes "
	    "(got 65)" },
	{ "policy default", "key", "ip, ip",
	    "[policy default] key: ip given twice (got \"ip, ip\")" },
	{ "policy default", "key", "header:A, header:B",
	    "[policy default] key: at most one of header:NAME, cookie:NAME, "
	    "query:NAME, jwt:CLAIM (got \"header:A, header:B\")" },
	{ "policy default", "key", "cookie:sid, query:key",
	    "[policy default] key: at most one of header:NAME, cookie:NAME, "
	    "query:NAME, jwt:CLAIM (got \"cookie:sid, query:key\")" },
	{ "policy default", "key", "cookie:",
	    "[policy default] key: " RLG_T_KEYS " (got \"cookie:\")" },
	{ "policy default", "key", "jwt:a b",
	    "[policy default] key: claim name must be an HTTP token or a URI: "
	    "A-Z a-z 0-9 and !#$%&'*+-.^_`|~:/@ (got \"a b\")" },
	{ "policy default", "key", "cookie:a b",
	    "[policy default] key: cookie name must be an HTTP token: "
	    "A-Z a-z 0-9 and !#$%&'*+-.^_`|~ (got \"a b\")" },
	{ "policy default", "key", "query:a=b",
	    "[policy default] key: query parameter name must be an HTTP "
	    "token: A-Z a-z 0-9 and !#$%&'*+-.^_`|~ (got \"a=b\")" },
	{ "policy default", "key", "global, ip",
	    "[policy default] key: global is one bucket for every client: "
	    "it takes no other item (got \"global, ip\")" },
	{ "policy default", "key", "global, global",
	    "[policy default] key: global given twice "
	    "(got \"global, global\")" },
	{ "policy default", "key", "ip, header:A, header:B",
	    "[policy default] key: at most 2 items (got 3)" },
	{ "policy default", "key", "ip,",
	    "[policy default] key: " RLG_T_EMPTY_ITEM " (got \"ip,\")" },
	{ "policy default", "key", ", ip",
	    "[policy default] key: " RLG_T_EMPTY_ITEM " (got \", ip\")" },
	{ "policy default", "key", "ip header:A",
	    "[policy default] key: " RLG_T_KEYS " (got \"ip header:A\")" },
	{ "policy default", "key", "ip, Header:A",
	    "[policy default] key: " RLG_T_KEYS " (got \"Header:A\")" },
	/* mode */
	{ "policy default", "mode", "dry-run",
	    "[policy default] mode: must be one of enforce, dry_run "
	    "(got \"dry-run\")" },
	{ "policy default", "mode", "Enforce",
	    "[policy default] mode: must be one of enforce, dry_run "
	    "(got \"Enforce\")" },
	{ "policy default", "mode", "",
	    "[policy default] mode: must not be empty" },
	/* exempt, trusted_proxies: networks */
	{ "policy default", "exempt", "10.0.0.1/8",
	    "[policy default] exempt: " RLG_T_CIDR " (got \"10.0.0.1/8\")" },
	{ "policy default", "exempt", "10.0.0.0/33",
	    "[policy default] exempt: " RLG_T_CIDR " (got \"10.0.0.0/33\")" },
	{ "policy default", "exempt", "localhost",
	    "[policy default] exempt: " RLG_T_CIDR " (got \"localhost\")" },
	{ "policy default", "exempt", "10.0.0.0/8,,10.1.0.0/16",
	    "[policy default] exempt: " RLG_T_EMPTY_ITEM
	    " (got \"10.0.0.0/8,,10.1.0.0/16\")" },
	{ "client", "exempt", "2001:db8::1/32",
	    "[client] exempt: " RLG_T_CIDR " (got \"2001:db8::1/32\")" },
	{ "client", "exempt", "",
	    "[client] exempt: must not be empty" },
	{ "client", "trusted_proxies", "10.0.0.0/8 10.1.0.0/16",
	    "[client] trusted_proxies: " RLG_T_CIDR
	    " (got \"10.0.0.0/8 10.1.0.0/16\")" },
	{ "client", "trusted_proxies", "127.0.0.1,",
	    "[client] trusted_proxies: " RLG_T_EMPTY_ITEM
	    " (got \"127.0.0.1,\")" },
	/* ipv6_prefix, key_secret */
	{ "client", "ipv6_prefix", "0",
	    "[client] ipv6_prefix: must be an integer from 1 to 128 "
	    "(got \"0\")" },
	{ "client", "ipv6_prefix", "129",
	    "[client] ipv6_prefix: must be an integer from 1 to 128 "
	    "(got \"129\")" },
	{ "client", "ipv6_prefix", "/64",
	    "[client] ipv6_prefix: must be an integer from 1 to 128 "
	    "(got \"/64\")" },
	{ "client", "key_secret", "0123456789abcde",
	    "[client] key_secret: must be at least 16 bytes (got 15 bytes)" },
	{ "client", "key_secret", "",
	    "[client] key_secret: must not be empty" },
	/* [headers] report_exempt, [log] level */
	{ "headers", "report_exempt", "true",
	    "[headers] report_exempt: must be one of yes, no (got \"true\")" },
	{ "headers", "report_exempt", "YES",
	    "[headers] report_exempt: must be one of yes, no (got \"YES\")" },
	{ "log", "level", "debug",
	    "[log] level: must be one of error, warn, info (got \"debug\")" },
	{ "log", "level", "warning",
	    "[log] level: must be one of error, warn, info "
	    "(got \"warning\")" },
	/* [store] backend, url, connect_timeout_ms, timeout_ms, clock */
	{ "store", "backend", "mysql",
	    "[store] backend: " RLG_T_BACKENDS " (got \"mysql\")" },
	{ "store", "backend", "Redis",
	    "[store] backend: " RLG_T_BACKENDS " (got \"Redis\")" },
	{ "store", "backend", "",
	    "[store] backend: must not be empty" },
	{ "store", "clock", "utc",
	    "[store] clock: must be one of redis, local (got \"utc\")" },
	{ "store", "clock", "",
	    "[store] clock: must not be empty" },
	{ "store", "connect_timeout_ms", "0",
	    "[store] connect_timeout_ms: \"0\": " RLG_T_REDIS_TIMEOUT },
	{ "store", "connect_timeout_ms", "60001",
	    "[store] connect_timeout_ms: \"60001\": " RLG_T_REDIS_TIMEOUT },
	{ "store", "connect_timeout_ms", "2m",
	    "[store] connect_timeout_ms: \"2m\": " RLG_T_REDIS_TIMEOUT },
	{ "store", "connect_timeout_ms", "1h",
	    "[store] connect_timeout_ms: \"1h\": " RLG_T_DUR_MS },
	{ "store", "timeout_ms", "-1",
	    "[store] timeout_ms: \"-1\": " RLG_T_DUR_MS },
	{ "store", "timeout_ms", "0ms",
	    "[store] timeout_ms: \"0ms\": " RLG_T_REDIS_TIMEOUT },
	{ "store", "url", "",
	    "[store] url: must not be empty" },
	{ "store", "url", "http://h:1",
	    "[store] url: must start with redis://, redis+sentinel:// or unix: "
	    "(got \"http://h:1\")" },
	{ "store", "url", "REDIS://h",
	    "[store] url: must start with redis://, redis+sentinel:// or unix: "
	    "(got \"REDIS://h\")" },
	{ "store", "url", "rediss://:pw@h:1",
	    "[store] url: rediss:// (TLS) is not supported: use redis:// on a "
	    "trusted network, or a unix socket (got \"rediss://***@h:1\")" },
	{ "store", "url", "redis://",
	    "[store] url: no host (got \"redis://\")" },
	{ "store", "url", "redis://:6379",
	    "[store] url: no host (got \"redis://:6379\")" },
	{ "store", "url", "redis://h:0",
	    "[store] url: " RLG_T_PORT " (got \"redis://h:0\")" },
	{ "store", "url", "redis://h:65536",
	    "[store] url: " RLG_T_PORT " (got \"redis://h:65536\")" },
	{ "store", "url", "redis://h:",
	    "[store] url: " RLG_T_PORT " (got \"redis://h:\")" },
	{ "store", "url", "redis://h:63x",
	    "[store] url: " RLG_T_PORT " (got \"redis://h:63x\")" },
	{ "store", "url", "redis://h:-1",
	    "[store] url: " RLG_T_PORT " (got \"redis://h:-1\")" },
	{ "store", "url", "redis://h/1x",
	    "[store] url: " RLG_T_DB " (got \"redis://h/1x\")" },
	{ "store", "url", "redis://h/2147483648",
	    "[store] url: " RLG_T_DB " (got \"redis://h/2147483648\")" },
	{ "store", "url", "redis://ho st",
	    "[store] url: " RLG_T_HOST " (got \"redis://ho st\")" },
	{ "store", "url", "redis://h?db=1",
	    "[store] url: " RLG_T_HOST " (got \"redis://h?db=1\")" },
	{ "store", "url", "redis://::1:6379",
	    "[store] url: no host (got \"redis://::1:6379\")" },
	{ "store", "url", "redis://[::1",
	    "[store] url: bad IPv6 address in brackets (got \"redis://[::1\")" },
	{ "store", "url", "redis://[]:1",
	    "[store] url: bad IPv6 address in brackets (got \"redis://[]:1\")" },
	{ "store", "url", "redis://[10.0.0.1]:1",
	    "[store] url: bad IPv6 address in brackets "
	    "(got \"redis://[10.0.0.1]:1\")" },
	{ "store", "url", "redis://[::1]x",
	    "[store] url: unexpected \"x\" after the host "
	    "(got \"redis://[::1]x\")" },
	{ "store", "url", "redis://user@h",
	    "[store] url: a user needs a password (redis://USER:PASSWORD@HOST) "
	    "(got \"redis://***@h\")" },
	{ "store", "url", "redis://:@h",
	    "[store] url: empty password (got \"redis://***@h\")" },
	{ "store", "url", "redis://:se%zzcret@h:1",
	    "[store] url: bad %XX escape in the user or password "
	    "(got \"redis://***@h:1\")" },
	{ "store", "url", "redis://:se%00cret@h",
	    "[store] url: bad %XX escape in the user or password "
	    "(got \"redis://***@h\")" },
	{ "store", "url", "redis://u:secret@h:99999",
	    "[store] url: " RLG_T_PORT " (got \"redis://***@h:99999\")" },
	{ "store", "url", "redis://"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhh",
	    "[store] url: host longer than 253 bytes "
	    "(got \"redis://"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
	    "\")" },
	{ "store", "url", "unix:redis.sock",
	    "[store] url: the socket path must be absolute (unix:/PATH) "
	    "(got \"unix:redis.sock\")" },
	{ "store", "url", "unix:",
	    "[store] url: the socket path must be absolute (unix:/PATH) "
	    "(got \"unix:\")" },
	{ "store", "url", "unix:"
	    "/sssssssssssssssssssssssssssssssssssssssssssssssssssssss"
	    "ssssssssssssssssssssssssssssssssssssssssssssssssssss",
	    "[store] url: socket path longer than 107 bytes "
	    "(got \"unix:"
	    "/sssssssssssssssssssssssssssssssssssssssssssssssssssssss"
	    "ssssssssssssssssssssssssssssssssssssssssssssssssssss"
	    "\")" },
	{ "store", "url", "unix:/r.sock?db=x",
	    "[store] url: " RLG_T_DB " (got \"unix:/r.sock?db=x\")" },
	{ "store", "url", "unix:/r.sock?db=",
	    "[store] url: " RLG_T_DB " (got \"unix:/r.sock?db=\")" },
	{ "store", "url", "unix:/r.sock?foo=1",
	    "[store] url: unknown parameter \"foo\": db, password, user "
	    "(got \"unix:/r.sock?foo=***\")" },
	{ "store", "url", "unix:/r.sock?db",
	    "[store] url: parameters are NAME=VALUE: db, password, user "
	    "(got \"unix:/r.sock?db\")" },
	{ "store", "url", "unix:/r.sock?password=",
	    "[store] url: empty password (got \"unix:/r.sock?password=\")" },
	{ "store", "url", "unix:/r.sock?user=u",
	    "[store] url: a user needs a password "
	    "(got \"unix:/r.sock?user=***\")" },
	{ "store", "url", "unix:/r.sock?password=p%2&db=1",
	    "[store] url: bad %XX escape in the user or password "
	    "(got \"unix:/r.sock?password=***&db=1\")" },
};
#define RLG_T_NBAD (sizeof rlg_t_bad_values / sizeof rlg_t_bad_values[0])

/* Bad values of [route r] keys; the other keys a route needs are set
 * after them (see test_bad_route_value). */
static const struct rlg_t_bad rlg_t_bad_route_values[] = {
	{ "route r", "path", "login",
	    "[route r] path: must start with \"/\" (got \"login\")" },
	{ "route r", "path", "*",
	    "[route r] path: must start with \"/\" (got \"*\")" },
	{ "route r", "path", "/a*/b",
	    "[route r] path: \"*\" may only end the path, for a prefix match "
	    "(got \"/a*/b\")" },
	{ "route r", "path", "/static/**",
	    "[route r] path: \"*\" may only end the path, for a prefix match "
	    "(got \"/static/**\")" },
	{ "route r", "methods", "get",
	    "[route r] methods: not a method: uppercase letters only "
	    "(got \"get\")" },
	{ "route r", "methods", "GET POST",
	    "[route r] methods: not a method: uppercase letters only "
	    "(got \"GET POST\")" },
	{ "route r", "methods", "M-SEARCH",
	    "[route r] methods: not a method: uppercase letters only "
	    "(got \"M-SEARCH\")" },
	{ "route r", "methods", "GET, GET",
	    "[route r] methods: GET given twice (got \"GET, GET\")" },
	{ "route r", "methods", "GET,",
	    "[route r] methods: " RLG_T_EMPTY_ITEM " (got \"GET,\")" },
	{ "route r", "policies", "none, a",
	    "[route r] policies: none must stand alone (got \"none, a\")" },
	{ "route r", "policies", "a, b, a",
	    "[route r] policies: [policy a] given twice (got \"a, b, a\")" },
	{ "route r", "policies", "a,,b",
	    "[route r] policies: " RLG_T_EMPTY_ITEM " (got \"a,,b\")" },
};
#define RLG_T_NBAD_ROUTE \
    (sizeof rlg_t_bad_route_values / sizeof rlg_t_bad_route_values[0])

/* The example config of DESIGN.md, verbatim. */
static const char rlg_t_design_example[] =
    "[store]\n"
    "path = /var/lib/rlgate/rlgate.db   ; SQLite file, created with its "
    "schema on first use\n"
    "busy_timeout_ms = 2000\n"
    "on_error = closed                  ; closed: 503 + Retry-After; open: "
    "let requests through\n"
    "\n"
    "[headers]\n"
    "style = draft03                    ; draft03 | ietf | x-ratelimit | "
    "all | none\n"
    "\n"
    "[policy default]\n"
    "algorithm = fixed_window           ; fixed_window | sliding_window | "
    "token_bucket | sliding_log\n"
    "limit = 60                         ; requests per window\n"
    "window = 60                        ; seconds\n"
    "key = ip                           ; ip | header:NAME\n";

/* A newly allocated string, formatted. */
static char *
rlg_t_fmt(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	ck_assert_int_ge(n, 0);
	s = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(s);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* n times c, as a new string. */
static char *
rlg_t_repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/*
 * Loads text as "t.conf"; returns what was written to errs (caller frees),
 * the count in *n and the config in *cfg.
 */
static char *
rlg_t_load(const char *text, int *n, struct rlg_config **cfg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *errs;

	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	*cfg = (struct rlg_config *)&len;     /* must be overwritten */
	*n = rlg_config_load_string(text, "t.conf", errs, cfg);
	fclose(errs);
	ck_assert_ptr_nonnull(buf);
	return buf;
}

#define RLG_T_ALG_WORD_(e, name) #name,
static const char *const rlg_t_algorithm_words[] = {
	RLG_ALGORITHMS(RLG_T_ALG_WORD_) NULL
};
#undef RLG_T_ALG_WORD_
#define RLG_T_BACKEND_WORD_(e, word, flags, entry) word,
static const char *const rlg_t_backend_words[] = {
	RLG_STORE_BACKENDS(RLG_T_BACKEND_WORD_) NULL
};
#undef RLG_T_BACKEND_WORD_

/*
 * want with each <algorithms> and <backends> replaced by the words of
 * their table, "a, b, c" (RLG_T_ALGORITHMS); a new string.
 */
static char *
rlg_t_words(const char *want)
{
	static const struct {
		const char *marker;
		const char *const *words;
	} lists[] = {
		{ "<algorithms>", rlg_t_algorithm_words },
		{ "<backends>", rlg_t_backend_words },
	};
	char *buf = NULL;
	const char *at, *next;
	size_t len = 0, i, j, m;
	FILE *out;

	out = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(out);
	for (at = want; *at != '\0'; at = next) {
		next = at + 1;
		for (i = 0; i < sizeof lists / sizeof lists[0]; i++) {
			m = strlen(lists[i].marker);
			if (strncmp(at, lists[i].marker, m) != 0)
				continue;
			for (j = 0; lists[i].words[j] != NULL; j++)
				fprintf(out, "%s%s", j > 0 ? ", " : "",
				    lists[i].words[j]);
			next = at + m;
			break;
		}
		if (i == sizeof lists / sizeof lists[0])
			fputc(*at, out);
	}
	fclose(out);
	ck_assert_ptr_nonnull(buf);
	return buf;
}

/*
 * text must fail with exactly count problems, printed exactly as want
 * (its word lists put in by rlg_t_words).
 */
static void
rlg_t_expect(const char *text, int count, const char *want)
{
	struct rlg_config *cfg;
	char *errs, *words;
	int n;

	errs = rlg_t_load(text, &n, &cfg);
	words = rlg_t_words(want);
	ck_assert_str_eq(errs, words);
	ck_assert_int_eq(n, count);
	ck_assert_ptr_null(cfg);
	free(words);
	free(errs);
}

/* text must load with no problem at all; returns the config. */
static struct rlg_config *
rlg_t_ok(const char *text)
{
	struct rlg_config *cfg;
	char *errs;
	int n;

	errs = rlg_t_load(text, &n, &cfg);
	ck_assert_str_eq(errs, "");
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_nonnull(cfg);
	free(errs);
	return cfg;
}

/*
 * text must load with no problem but exactly nwarn warnings (each a line
 * "t.conf:N: warning: ..."); returns the config.
 */
static struct rlg_config *
rlg_t_ok_warned(const char *text, int nwarn)
{
	struct rlg_config *cfg;
	const char *at;
	char *errs;
	int n, lines = 0;

	errs = rlg_t_load(text, &n, &cfg);
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_nonnull(cfg);
	for (at = errs; *at != '\0'; at = strchr(at, '\n') + 1) {
		ck_assert_msg(strchr(at, '\n') != NULL, "%s", errs);
		ck_assert_msg(strncmp(strchr(at, ' '), " warning: ", 10) == 0,
		    "not a warning: %s", errs);
		lines++;
	}
	ck_assert_msg(lines == nwarn, "%d warnings, not %d: %s", lines,
	    nwarn, errs);
	free(errs);
	return cfg;
}

/* Where the temporary files go: $TMPDIR, else /tmp. */
static const char *
rlg_t_tmpdir(void)
{
	const char *dir = getenv("TMPDIR");

	return dir != NULL && *dir != '\0' ? dir : "/tmp";
}

/* Writes len bytes of content to a new temporary file; returns its path. */
static char *
rlg_t_file(const char *content, size_t len)
{
	char *path;
	int fd;

	path = rlg_t_fmt("%s/check_config.XXXXXX", rlg_t_tmpdir());
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
	return path;
}

/* n sections "[policy pN]\nlimit = N\n", N from 1 to n, as a new string. */
static char *
rlg_t_policies(size_t n)
{
	char *s, *t;
	size_t i;

	s = rlg_t_fmt("%s", "");
	for (i = 1; i <= n; i++) {
		t = rlg_t_fmt("%s[policy p%zu]\nlimit = %zu\n", s, i, i);
		free(s);
		s = t;
	}
	return s;
}

/* ---- core --------------------------------------------------------------- */

START_TEST(test_defaults)
{
	struct rlg_config *cfg = rlg_config_defaults();

	ck_assert_ptr_null(cfg->source);
	ck_assert_str_eq(cfg->store.sqlite.path, RLG_DEFAULT_DB_PATH);
	ck_assert_str_eq(cfg->store.sqlite.path, LOCALSTATEDIR "/lib/rlgate/rlgate.db");
	ck_assert_int_eq(cfg->store.sqlite.busy_timeout_ms, 2000);
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_CLOSED);
	ck_assert_int_eq(cfg->store.sqlite.max_clients, 1000000);
	ck_assert_int_eq(cfg->store.rejection_cache, 4096);
	ck_assert_int_eq(cfg->store.sqlite.synchronous, RLG_SYNC_NORMAL);
	ck_assert_int_eq(cfg->store.group_commit, RLG_GROUP_AUTO);
	/* commit = auto, resolved: the table holds the built-in policy. */
	ck_assert_int_eq(cfg->store.sqlite.commit, RLG_COMMIT_BEHIND);
	ck_assert(cfg->store.sqlite.commit_auto);
	ck_assert_int_eq(cfg->store.sqlite.flush_ms, 1000);
	ck_assert_int_eq(cfg->store.sqlite.table_entries, 1000000);
	ck_assert_int_eq(cfg->style, RLG_STYLE_DRAFT03);
	ck_assert_int_eq(cfg->errors, RLG_ERRORS_JSON);
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "default");
	ck_assert_int_eq(cfg->policies[0].lim.algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 60);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 60000);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 60);
	ck_assert_int_eq(cfg->policies[0].key, RLG_KEY_IP);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_empty_file_is_defaults)
{
	struct rlg_config *cfg = rlg_t_ok("");

	ck_assert_str_eq(cfg->source, "t.conf");
	ck_assert_str_eq(cfg->store.sqlite.path, RLG_DEFAULT_DB_PATH);
	ck_assert_int_eq(cfg->store.sqlite.busy_timeout_ms, 2000);
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "default");
	ck_assert_int_eq(cfg->policies[0].lim.limit, 60);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 60000);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 60);
	ck_assert_int_eq(cfg->style, RLG_STYLE_DRAFT03);
	ck_assert_int_eq(cfg->errors, RLG_ERRORS_JSON);
	rlg_config_free(cfg);

	cfg = rlg_t_ok("\n\n   \n; only a comment\n# and another\n");
	ck_assert_int_eq(cfg->policies[0].lim.limit, 60);
	rlg_config_free(cfg);

	/* Sections but no [policy]: the built-in "default" still applies. */
	cfg = rlg_t_ok("[store]\npath = /p\n[headers]\n[response]\n");
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "default");
	ck_assert_int_eq(cfg->policies[0].lim.algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 60);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 60);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_full_file)
{
	struct rlg_config *cfg = rlg_t_ok(
	    "[store]\n"
	    "path = /srv/rl/state.db\n"
	    "busy_timeout_ms = 600000\n"
	    "on_error = open\n"
	    "max_clients = 0\n"
	    "rejection_cache = 0\n"
	    "synchronous = full\n"
	    "group_commit = off\n"
	    "[headers]\n"
	    "style = draft03\n"
	    "[response]\n"
	    "errors = problem\n"
	    "[policy default]\n"
	    "algorithm = token_bucket\n"
	    "limit = 1000000000\n"
	    "window = 31622400\n"
	    "burst = 1000000000\n"
	    "key = ip\n"
	    "[fastcgi]\n"
	    "read_timeout_ms = 600000\n");

	ck_assert_str_eq(cfg->source, "t.conf");
	ck_assert_int_eq(cfg->read_timeout_ms, 600000);
	ck_assert_str_eq(cfg->store.sqlite.path, "/srv/rl/state.db");
	ck_assert_int_eq(cfg->store.sqlite.busy_timeout_ms, 600000);
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_OPEN);
	ck_assert_int_eq(cfg->store.sqlite.max_clients, 0);
	ck_assert_int_eq(cfg->store.rejection_cache, 0);
	ck_assert_int_eq(cfg->store.sqlite.synchronous, RLG_SYNC_FULL);
	ck_assert_int_eq(cfg->store.group_commit, RLG_GROUP_OFF);
	ck_assert_int_eq(cfg->style, RLG_STYLE_DRAFT03);
	ck_assert_int_eq(cfg->errors, RLG_ERRORS_PROBLEM);
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "default");
	ck_assert_int_eq(cfg->policies[0].lim.algorithm, RLG_ALG_TOKEN_BUCKET);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 1000000000);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 31622400LL * 1000);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 1000000000);
	ck_assert_int_eq(cfg->policies[0].key, RLG_KEY_IP);
	rlg_config_free(cfg);

	/* The low ends of the ranges. */
	cfg = rlg_t_ok("[store]\nbusy_timeout_ms = 0\n"
	    "[policy default]\nlimit = 1\nwindow = 1\n"
	    "algorithm = token_bucket\nburst = 1\n");
	ck_assert_int_eq(cfg->store.sqlite.busy_timeout_ms, 0);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 1);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 1000);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 1);
	rlg_config_free(cfg);
	cfg = rlg_t_ok("[fastcgi]\nread_timeout_ms = 100\n");
	ck_assert_int_eq(cfg->read_timeout_ms, 100);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_inline_comments)
{
	struct rlg_config *cfg = rlg_t_ok(
	    "; a comment line\n"
	    "# another kind\n"
	    "   ; an indented one\n"
	    "[store] ; the store\n"
	    "path = /a;b/c.db ; a ';' inside a value stays\n"
	    "on_error = open\t; after a tab\n"
	    "[policy default]\n"
	    "limit = 5 ; five\n"
	    "window = 7 ;seven\n");

	ck_assert_str_eq(cfg->store.sqlite.path, "/a;b/c.db");
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_OPEN);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 5);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 7000);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_design_example)
{
	struct rlg_config *cfg = rlg_t_ok(rlg_t_design_example);

	ck_assert_str_eq(cfg->store.sqlite.path, "/var/lib/rlgate/rlgate.db");
	ck_assert_int_eq(cfg->store.sqlite.busy_timeout_ms, 2000);
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_CLOSED);
	ck_assert_int_eq(cfg->style, RLG_STYLE_DRAFT03);
	ck_assert_int_eq(cfg->policies[0].lim.algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 60);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 60000);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 60);
	ck_assert_int_eq(cfg->policies[0].key, RLG_KEY_IP);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_layout)
{
	/* CRLF, tabs, indented keys (no continuation lines), a BOM,
	 * "key=value" without spaces, '=' inside a value, and a repeated
	 * section merged into the first. */
	struct rlg_config *cfg = rlg_t_ok_warned(
	    "\xEF\xBB\xBF[store]\r\n"
	    "\tpath=/x=y.db\r\n"
	    "  [policy\t default ]\r\n"
	    "    limit = 9\r\n"
	    "[store]\n"
	    "\t busy_timeout_ms\t=\t17 \n"
	    "[policy default]\n"
	    "window = 3", 1);

	ck_assert_str_eq(cfg->store.sqlite.path, "/x=y.db");
	ck_assert_int_eq(cfg->store.sqlite.busy_timeout_ms, 17);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 9);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 3000);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_long_lines_fit)
{
	struct rlg_config *cfg;
	char *pad, *path, *text;

	/* A line of exactly RLG_CONFIG_LINE_MAX bytes, with "\n", "\r\n"
	 * or nothing after it, is fine. */
	pad = rlg_t_repeat('x', RLG_CONFIG_LINE_MAX - 2);
	text = rlg_t_fmt("; %s\n; %s\r\n[store]\n; %s", pad, pad, pad);
	cfg = rlg_t_ok(text);
	ck_assert_str_eq(cfg->store.sqlite.path, RLG_DEFAULT_DB_PATH);
	rlg_config_free(cfg);
	free(text);
	free(pad);

	/* The longest path. */
	path = rlg_t_repeat('p', 4095);
	text = rlg_t_fmt("[store]\npath = %s\n", path);
	cfg = rlg_t_ok(text);
	ck_assert_str_eq(cfg->store.sqlite.path, path);
	rlg_config_free(cfg);
	free(text);
	free(path);
}
END_TEST

START_TEST(test_load_string_name)
{
	struct rlg_config *cfg = NULL;

	ck_assert_int_eq(rlg_config_load_string("[store]\npath = /p\n", NULL,
	    NULL, &cfg), 0);
	ck_assert_ptr_nonnull(cfg);
	ck_assert_str_eq(cfg->source, "<string>");
	ck_assert_str_eq(cfg->store.sqlite.path, "/p");
	rlg_config_free(cfg);
}
END_TEST

/* Every [headers] style word, and what it becomes. */
static const struct rlg_t_word rlg_t_styles[] = {
	{ "draft03", RLG_STYLE_DRAFT03 },
	{ "ietf", RLG_STYLE_IETF },
	{ "x-ratelimit", RLG_STYLE_X_RATELIMIT },
	{ "all", RLG_STYLE_ALL },
	{ "none", RLG_STYLE_NONE },
};
#define RLG_T_NSTYLES (sizeof rlg_t_styles / sizeof rlg_t_styles[0])

/* Every [response] errors word, and what it becomes. */
static const struct rlg_t_word rlg_t_error_formats[] = {
	{ "json", RLG_ERRORS_JSON },
	{ "problem", RLG_ERRORS_PROBLEM },
};
#define RLG_T_NERROR_FORMATS \
    (sizeof rlg_t_error_formats / sizeof rlg_t_error_formats[0])

/* Every algorithm word, and what it becomes. */
static const struct rlg_t_word rlg_t_algorithms[] = {
	{ "fixed_window", RLG_ALG_FIXED_WINDOW },
	{ "sliding_window", RLG_ALG_SLIDING_WINDOW },
	{ "token_bucket", RLG_ALG_TOKEN_BUCKET },
	{ "sliding_log", RLG_ALG_SLIDING_LOG },
};
#define RLG_T_NALGORITHMS \
    (sizeof rlg_t_algorithms / sizeof rlg_t_algorithms[0])

START_TEST(test_style)
{
	const struct rlg_t_word *w = &rlg_t_styles[_i];
	struct rlg_config *cfg;
	char *text;

	text = rlg_t_fmt("[headers]\nstyle = %s\n", w->word);
	cfg = rlg_t_ok(text);
	ck_assert_int_eq(cfg->style, w->value);
	ck_assert_str_eq(rlg_style_name(cfg->style), w->word);
	ck_assert_int_eq(cfg->errors, RLG_ERRORS_JSON);
	rlg_config_free(cfg);
	free(text);
}
END_TEST

START_TEST(test_error_format)
{
	const struct rlg_t_word *w = &rlg_t_error_formats[_i];
	struct rlg_config *cfg;
	char *text;

	text = rlg_t_fmt("[response]\nerrors = %s ; how errors look\n",
	    w->word);
	cfg = rlg_t_ok(text);
	ck_assert_int_eq(cfg->errors, w->value);
	ck_assert_str_eq(rlg_error_format_name(cfg->errors), w->word);
	ck_assert_int_eq(cfg->style, RLG_STYLE_DRAFT03);
	rlg_config_free(cfg);
	free(text);
}
END_TEST

/* [response] status: 429 unless set; any registered 4xx or 5xx. */
START_TEST(test_reject_status)
{
	static const int ok[] = { 400, 403, 418, 429, 451, 500, 503, 511 };
	struct rlg_config *cfg;
	char *text;
	size_t i;

	cfg = rlg_t_ok("[policy api]\nlimit = 1\n");
	ck_assert_int_eq(cfg->reject_status, 429);
	rlg_config_free(cfg);
	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		text = rlg_t_fmt("[response]\nstatus = %d\n", ok[i]);
		cfg = rlg_t_ok(text);
		ck_assert_int_eq(cfg->reject_status, ok[i]);
		rlg_config_free(cfg);
		free(text);
	}
}
END_TEST

START_TEST(test_algorithm)
{
	const struct rlg_t_word *w = &rlg_t_algorithms[_i];
	struct rlg_config *cfg;
	char *text;

	text = rlg_t_fmt("[policy x]\nalgorithm = %s\n", w->word);
	cfg = rlg_t_ok(text);
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "x");
	ck_assert_int_eq(cfg->policies[0].lim.algorithm, w->value);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 60);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 60);
	rlg_config_free(cfg);
	free(text);
}
END_TEST

START_TEST(test_names)
{
	size_t i;

	ck_assert_str_eq(rlg_on_error_name(RLG_ON_ERROR_CLOSED), "closed");
	ck_assert_str_eq(rlg_on_error_name(RLG_ON_ERROR_OPEN), "open");
	ck_assert_str_eq(rlg_style_name(RLG_STYLE_DRAFT03), "draft03");
	ck_assert_str_eq(rlg_style_name(RLG_STYLE_IETF), "ietf");
	ck_assert_str_eq(rlg_style_name(RLG_STYLE_X_RATELIMIT), "x-ratelimit");
	ck_assert_str_eq(rlg_style_name(RLG_STYLE_ALL), "all");
	ck_assert_str_eq(rlg_style_name(RLG_STYLE_NONE), "none");
	ck_assert_str_eq(rlg_style_name((enum rlg_header_style)99), "unknown");
	ck_assert_str_eq(rlg_error_format_name(RLG_ERRORS_JSON), "json");
	ck_assert_str_eq(rlg_error_format_name(RLG_ERRORS_PROBLEM), "problem");
	ck_assert_str_eq(rlg_error_format_name((enum rlg_error_format)99),
	    "unknown");
	/* Each name is the word the config takes for it. */
	for (i = 0; i < RLG_T_NSTYLES; i++)
		ck_assert_str_eq(rlg_style_name(
		    (enum rlg_header_style)rlg_t_styles[i].value),
		    rlg_t_styles[i].word);
	for (i = 0; i < RLG_T_NERROR_FORMATS; i++)
		ck_assert_str_eq(rlg_error_format_name(
		    (enum rlg_error_format)rlg_t_error_formats[i].value),
		    rlg_t_error_formats[i].word);
	rlg_config_free(NULL);
}
END_TEST

/* ---- policies ----------------------------------------------------------- */

START_TEST(test_policies_in_order)
{
	/* File order, each with its own values; a repeated section merges
	 * into the first, whose place in the order it keeps. */
	struct rlg_config *cfg = rlg_t_ok_warned(
	    "[policy burst]\n"
	    "algorithm = token_bucket\n"
	    "limit = 10\n"
	    "window = 1\n"
	    "burst = 20\n"
	    "[policy hourly]\n"
	    "algorithm = sliding_window\n"
	    "limit = 1000\n"
	    "window = 3600\n"
	    "key = ip\n"
	    "[store]\n"
	    "path = /p\n"
	    "[policy exact]\n"
	    "algorithm = sliding_log\n"
	    "limit = 100000\n"
	    "[policy daily]\n"
	    "window = 86400\n"
	    "[policy exact]\n"
	    "window = 10\n"
	    "[policy A-1.b_2]\n"
	    "limit = 7\n", 2);

	ck_assert_str_eq(cfg->store.sqlite.path, "/p");
	ck_assert_uint_eq(cfg->npolicies, 5);

	ck_assert_str_eq(cfg->policies[0].name, "burst");
	ck_assert_int_eq(cfg->policies[0].lim.algorithm, RLG_ALG_TOKEN_BUCKET);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 10);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 1000);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 20);
	ck_assert_int_eq(cfg->policies[0].key, RLG_KEY_IP);

	ck_assert_str_eq(cfg->policies[1].name, "hourly");
	ck_assert_int_eq(cfg->policies[1].lim.algorithm, RLG_ALG_SLIDING_WINDOW);
	ck_assert_int_eq(cfg->policies[1].lim.limit, 1000);
	ck_assert_int_eq(cfg->policies[1].lim.window_ms, 3600000);
	ck_assert_int_eq(cfg->policies[1].lim.burst, 1000);
	ck_assert_int_eq(cfg->policies[1].key, RLG_KEY_IP);

	ck_assert_str_eq(cfg->policies[2].name, "exact");
	ck_assert_int_eq(cfg->policies[2].lim.algorithm, RLG_ALG_SLIDING_LOG);
	ck_assert_int_eq(cfg->policies[2].lim.limit, 100000);
	ck_assert_int_eq(cfg->policies[2].lim.window_ms, 10000);

	ck_assert_str_eq(cfg->policies[3].name, "daily");
	ck_assert_int_eq(cfg->policies[3].lim.algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(cfg->policies[3].lim.limit, 60);
	ck_assert_int_eq(cfg->policies[3].lim.window_ms, 86400000);

	ck_assert_str_eq(cfg->policies[4].name, "A-1.b_2");
	ck_assert_int_eq(cfg->policies[4].lim.limit, 7);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_policy_defaults)
{
	/* An empty section is a policy with every default; "default" is a
	 * name like any other and need not be first, nor there at all. */
	struct rlg_config *cfg = rlg_t_ok(
	    "[policy empty]\n"
	    "[policy default]\n"
	    "limit = 5\n"
	    "[policy slow]\n"
	    "window = 120\n");
	size_t i;

	ck_assert_uint_eq(cfg->npolicies, 3);
	ck_assert_str_eq(cfg->policies[0].name, "empty");
	ck_assert_str_eq(cfg->policies[1].name, "default");
	ck_assert_str_eq(cfg->policies[2].name, "slow");
	for (i = 0; i < cfg->npolicies; i++) {
		ck_assert_int_eq(cfg->policies[i].lim.algorithm,
		    RLG_ALG_FIXED_WINDOW);
		ck_assert_int_eq(cfg->policies[i].key, RLG_KEY_IP);
		ck_assert_int_eq(cfg->policies[i].lim.burst,
		    cfg->policies[i].lim.limit);
	}
	ck_assert_int_eq(cfg->policies[0].lim.limit, 60);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 60000);
	ck_assert_int_eq(cfg->policies[1].lim.limit, 5);
	ck_assert_int_eq(cfg->policies[1].lim.window_ms, 60000);
	ck_assert_int_eq(cfg->policies[2].lim.limit, 60);
	ck_assert_int_eq(cfg->policies[2].lim.window_ms, 120000);
	rlg_config_free(cfg);

	/* Without "default" among them, it is not added. */
	cfg = rlg_t_ok("[policy api]\nlimit = 3\n");
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "api");
	ck_assert_int_eq(cfg->policies[0].lim.limit, 3);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_burst)
{
	struct rlg_config *cfg;

	/* Default: the policy's limit, whichever order the keys come in. */
	cfg = rlg_t_ok_warned(
	    "[policy a]\nalgorithm = token_bucket\nlimit = 10\n"
	    "[policy b]\nlimit = 7\nalgorithm = token_bucket\n"
	    "[policy c]\nalgorithm = token_bucket\n"
	    "[policy a]\nwindow = 2\n", 1);
	ck_assert_uint_eq(cfg->npolicies, 3);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 10);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 2000);
	ck_assert_int_eq(cfg->policies[1].lim.burst, 7);
	ck_assert_int_eq(cfg->policies[2].lim.burst, 60);
	rlg_config_free(cfg);

	/* Explicit: above or below the limit, before or after algorithm, or
	 * in a repeated section. */
	cfg = rlg_t_ok_warned(
	    "[policy a]\nalgorithm = token_bucket\nlimit = 10\nburst = 25\n"
	    "[policy b]\nburst = 3\nlimit = 100\nalgorithm = token_bucket\n"
	    "[policy c]\nburst = 1\n"
	    "[policy c]\nalgorithm = token_bucket\n"
	    "[policy d]\nalgorithm = token_bucket\nburst = 1000000000\n", 3);
	ck_assert_uint_eq(cfg->npolicies, 4);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 10);
	ck_assert_int_eq(cfg->policies[0].lim.burst, 25);
	ck_assert_int_eq(cfg->policies[1].lim.limit, 100);
	ck_assert_int_eq(cfg->policies[1].lim.burst, 3);
	ck_assert_int_eq(cfg->policies[2].lim.burst, 1);
	ck_assert_int_eq(cfg->policies[3].lim.burst, 1000000000);
	rlg_config_free(cfg);
}
END_TEST

/*
 * The penalty box: ban in seconds (units too) up to 366 days, ban_after
 * defaulting to 1; ban_after above 1 without a ban is a problem at its
 * line; a ban in the local+global mode is one at the ban's line.
 */
START_TEST(test_ban)
{
	struct rlg_config *cfg;

	cfg = rlg_t_ok(
	    "[policy login]\n"
	    "limit = 5\n"
	    "ban = 15m\n"
	    "[policy b]\n"
	    "ban = 2\n"
	    "ban_after = 3\n"
	    "[policy c]\n");
	ck_assert_int_eq(cfg->policies[0].lim.ban_ms, 900000);
	ck_assert_int_eq(cfg->policies[0].lim.ban_after, 1);
	ck_assert_int_eq(cfg->policies[1].lim.ban_ms, 2000);
	ck_assert_int_eq(cfg->policies[1].lim.ban_after, 3);
	ck_assert_int_eq(cfg->policies[2].lim.ban_ms, 0);
	rlg_config_free(cfg);

	rlg_t_expect(
	    "[policy a]\n"                   /* 1 */
	    "ban = 367d\n"                   /* 2 */
	    "[policy b]\n"                   /* 3 */
	    "ban_after = 2\n"                /* 4 */
	    "[policy c]\n"                   /* 5 */
	    "ban = 10\n"                     /* 6 */
	    "ban_after = 0\n",               /* 7 */
	    3,
	    "t.conf:2: [policy a] ban: \"367d\": must be from 0 to 366d (0 to "
	    "31622400 seconds)\n"
	    "t.conf:4: [policy b] ban_after: applies only with ban (seconds "
	    "> 0)\n"
	    "t.conf:7: [policy c] ban_after: must be an integer from 1 to "
	    "1000000000 (got \"0\")\n");

	rlg_t_expect(
	    "[store]\n"                      /* 1 */
	    "backend = redis\n"              /* 2 */
	    "url = redis://127.0.0.1:6379\n" /* 3 */
	    "commit = behind\n"              /* 4 */
	    "max_clients = 1000\n"           /* 5 */
	    "[policy login]\n"               /* 6 */
	    "ban = 900\n",                   /* 7 */
	    1,
	    "t.conf:7: [policy login] ban: the local+global mode (backend = "
	    "redis, commit = behind) cannot keep a ban (each host refuses on "
	    "its own and pushes only what it admitted): use commit = each, "
	    "or no ban\n");
}
END_TEST

START_TEST(test_burst_not_token_bucket)
{
	/* Reported at burst's line, whether the algorithm is set before
	 * it, after it, in a repeated section, or left to its default. */
	rlg_t_expect(
	    "[policy a]\n"                  /* 1 */
	    "algorithm = fixed_window\n"    /* 2 */
	    "burst = 5\n"                   /* 3 */
	    "[policy b]\n"                  /* 4 */
	    "burst = 5\n"                   /* 5 */
	    "limit = 10\n"                  /* 6 */
	    "algorithm = sliding_window\n"  /* 7 */
	    "[policy c]\n"                  /* 8 */
	    "burst = 5\n"                   /* 9 */
	    "[policy d]\n"                  /* 10 */
	    "burst = 5\n"                   /* 11 */
	    "[policy ok]\n"                 /* 12 */
	    "burst = 5\n"                   /* 13 */
	    "algorithm = token_bucket\n"    /* 14 */
	    "[policy d]\n"                  /* 15 */
	    "algorithm = sliding_log\n",    /* 16 */
	    4,
	    "t.conf:3: [policy a] burst: applies only to algorithm = "
	    "token_bucket\n"
	    "t.conf:5: [policy b] burst: applies only to algorithm = "
	    "token_bucket\n"
	    "t.conf:9: [policy c] burst: applies only to algorithm = "
	    "token_bucket\n"
	    "t.conf:11: [policy d] burst: applies only to algorithm = "
	    "token_bucket\n"
	    RLG_T_AGAIN("[policy d]", "15", "10"));

	/* A bad algorithm or a bad burst is reported once, for itself. */
	rlg_t_expect(
	    "[policy a]\n"
	    "burst = 5\n"
	    "algorithm = token_buckt\n"
	    "[policy b]\n"
	    "burst = 0\n"
	    "[policy c]\n"
	    "burst = 5\n"
	    "algorithm =\n",
	    3,
	    "t.conf:3: [policy a] algorithm: unknown algorithm "
	    "(got \"token_buckt\"): " RLG_T_ALGORITHMS "\n"
	    "t.conf:5: [policy b] burst: " RLG_T_BURST_RANGE " (got \"0\")\n"
	    "t.conf:8: [policy c] algorithm: must not be empty\n");
}
END_TEST

START_TEST(test_sliding_log_limit)
{
	struct rlg_config *cfg;

	/* The cap, exactly; and only for sliding_log. */
	cfg = rlg_t_ok(
	    "[policy log]\nalgorithm = sliding_log\nlimit = 100000\n"
	    "[policy fw]\nlimit = 1000000000\n"
	    "[policy sw]\nalgorithm = sliding_window\nlimit = 100001\n"
	    "[policy tb]\nalgorithm = token_bucket\nlimit = 100001\n");
	ck_assert_uint_eq(cfg->npolicies, 4);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 100000);
	ck_assert_int_eq(cfg->policies[1].lim.limit, 1000000000);
	ck_assert_int_eq(cfg->policies[2].lim.limit, 100001);
	ck_assert_int_eq(cfg->policies[3].lim.limit, 100001);
	rlg_config_free(cfg);

	/* Over it: at the limit's line, before or after the algorithm. */
	rlg_t_expect(
	    "[policy a]\n"                  /* 1 */
	    "algorithm = sliding_log\n"     /* 2 */
	    "limit = 100001\n"              /* 3 */
	    "[policy b]\n"                  /* 4 */
	    "limit = 1000000000\n"          /* 5 */
	    "window = 1\n"                  /* 6 */
	    "[policy b]\n"                  /* 7 */
	    "algorithm = sliding_log\n"     /* 8 */
	    "[policy c]\n"                  /* 9 */
	    "limit = 5000000000\n"          /* 10: out of any range */
	    "algorithm = sliding_log\n",    /* 11 */
	    3,
	    "t.conf:3: [policy a] limit: sliding_log keeps one row per "
	    "request: at most 100000 (got \"100001\")\n"
	    "t.conf:5: [policy b] limit: sliding_log keeps one row per "
	    "request: at most 100000 (got \"1000000000\")\n"
	    RLG_T_AGAIN("[policy b]", "7", "4")
	    "t.conf:10: [policy c] limit: " RLG_T_LIMIT_RANGE
	    " (got \"5000000000\")\n");
}
END_TEST

START_TEST(test_policy_names)
{
	struct rlg_config *cfg;
	char *name, *text, *want;

	/* The longest name. */
	name = rlg_t_repeat('n', 64);
	text = rlg_t_fmt("[policy %s]\nlimit = 2\n", name);
	cfg = rlg_t_ok(text);
	ck_assert_str_eq(cfg->policies[0].name, name);
	rlg_config_free(cfg);
	free(text);
	free(name);

	/* Every byte it may hold; the name is case-sensitive. */
	cfg = rlg_t_ok(
	    "[policy ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz]\n"
	    "[policy 0123456789_.-]\n"
	    "[policy Default]\n"
	    "[policy default]\n"
	    "[policy\t  x  ]\n");
	ck_assert_uint_eq(cfg->npolicies, 5);
	ck_assert_str_eq(cfg->policies[1].name, "0123456789_.-");
	ck_assert_str_eq(cfg->policies[2].name, "Default");
	ck_assert_str_eq(cfg->policies[3].name, "default");
	ck_assert_str_eq(cfg->policies[4].name, "x");
	rlg_config_free(cfg);

	/* Bad: empty, too long, a byte outside the set; the keys under a
	 * bad header are ignored. */
	name = rlg_t_repeat('n', 65);
	text = rlg_t_fmt(
	    "[policy]\n"                    /* 1 */
	    "limit = 0\n"                   /* 2: ignored */
	    "[policy   ]\n"                 /* 3 */
	    "[policy %s]\n"                 /* 4 */
	    "[policy a b]\n"                /* 5 */
	    "limit = x\n"                   /* 6: ignored */
	    "[policy \xC3\xA9]\n"           /* 7 */
	    "[policy a/b]\n"                /* 8 */
	    "[policy a;b]\n"                /* 9 */
	    "[policy a:b]\n"                /* 10 */
	    "[policy \"a\"]\n"              /* 11 */
	    "[policy a\x01]\n"              /* 12 */
	    "[policy ok]\n"                 /* 13 */
	    "limit = 1\n",                  /* 14 */
	    name);
	want = rlg_t_fmt(
	    "t.conf:1: section [policy] has no name (expected [policy NAME])\n"
	    "t.conf:3: section [policy] has no name (expected [policy NAME])\n"
	    "t.conf:4: bad policy name \"%s\": at most 64 bytes (got 65)\n"
	    "t.conf:5: bad policy name \"a b\": only A-Z a-z 0-9 _ . - are "
	    "allowed\n"
	    "t.conf:7: bad policy name \"\xC3\xA9\": only A-Z a-z 0-9 _ . - are "
	    "allowed\n"
	    "t.conf:8: bad policy name \"a/b\": only A-Z a-z 0-9 _ . - are "
	    "allowed\n"
	    "t.conf:9: bad policy name \"a;b\": only A-Z a-z 0-9 _ . - are "
	    "allowed\n"
	    "t.conf:10: bad policy name \"a:b\": only A-Z a-z 0-9 _ . - are "
	    "allowed\n"
	    "t.conf:11: bad policy name \"\"a\"\": only A-Z a-z 0-9 _ . - "
	    "are allowed\n"
	    "t.conf:12: bad policy name \"a\x01\": only A-Z a-z 0-9 _ . - are "
	    "allowed\n", name);
	rlg_t_expect(text, 10, want);
	free(want);
	free(text);
	free(name);
}
END_TEST

START_TEST(test_policies_max)
{
	struct rlg_config *cfg;
	char *text, *more, *want;
	size_t i;

	/* RLG_POLICIES_MAX is fine, and a repeated section is not one more. */
	ck_assert_int_eq(RLG_POLICIES_MAX, 32);
	text = rlg_t_policies(RLG_POLICIES_MAX);
	more = rlg_t_fmt("%s[policy p1]\nwindow = 9\n", text);
	cfg = rlg_t_ok_warned(more, 1);
	ck_assert_uint_eq(cfg->npolicies, RLG_POLICIES_MAX);
	for (i = 0; i < RLG_POLICIES_MAX; i++) {
		ck_assert_int_eq(cfg->policies[i].lim.limit, (int64_t)i + 1);
		ck_assert_int_eq(cfg->policies[i].lim.burst, (int64_t)i + 1);
	}
	ck_assert_str_eq(cfg->policies[0].name, "p1");
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 9000);
	ck_assert_str_eq(cfg->policies[31].name, "p32");
	rlg_config_free(cfg);
	free(more);
	free(text);

	/* One more is one problem, on its header, however many follow; their
	 * keys are ignored, but a known name still merges. */
	text = rlg_t_policies(RLG_POLICIES_MAX + 1);
	more = rlg_t_fmt("%s"
	    "[policy p34]\nlimit = bad\n"
	    "[policy p2]\nlimit = bad\n", text);
	want = rlg_t_fmt(
	    "t.conf:65: too many policies: [policy p33] would be number 33, "
	    "at most 32 are allowed\n"
	    RLG_T_AGAIN("[policy p2]", "69", "3")
	    "t.conf:70: [policy p2] limit: set twice (first on line 4)\n");
	rlg_t_expect(more, 2, want);
	free(want);
	free(more);
	free(text);
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

START_TEST(test_bad_value)
{
	const struct rlg_t_bad *b = &rlg_t_bad_values[_i];
	char *text, *want;

	text = rlg_t_fmt("[%s]\n%s = %s\n", b->section, b->key, b->value);
	want = rlg_t_fmt("t.conf:2: %s\n", b->msg);
	rlg_t_expect(text, 1, want);
	free(want);
	free(text);
}
END_TEST

START_TEST(test_many_errors)
{
	rlg_t_expect(
	    "key0 = 1\n"                    /* 1 */
	    "[store]\n"                     /* 2 */
	    "pth = /x\n"                    /* 3 */
	    "busy_timeout_ms = 60y\n"       /* 4 */
	    "on_error = Closed\n"           /* 5 */
	    "[headers]\n"                   /* 6 */
	    "style = fancy\n"               /* 7 */
	    "what is this\n"                /* 8 */
	    "[policy default]\n"            /* 9 */
	    "limit = 0\n"                   /* 10 */
	    "limit = 5\n"                   /* 11 */
	    "window =\n"                    /* 12 */
	    "key = header:X-Api-Key\n"      /* 13 */
	    "[policy api]\n"                /* 14 */
	    "burst = 5\n"                   /* 15: api is no token_bucket */
	    "limit = 200000\n"              /* 16: too many for sliding_log */
	    "[foo]\n"                       /* 17 */
	    "bar = 1\n"                     /* 18: in a bad section */
	    "[store\n"                      /* 19 */
	    "path = /y\n"                   /* 20: in a bad section */
	    "[response]\n"                  /* 21 */
	    "errors = html\n"               /* 22 */
	    "[policy a b]\n"                /* 23 */
	    "limit = 0\n"                   /* 24: in a bad section */
	    "[policy api]\n"                /* 25 */
	    "algorithm = sliding_log\n"     /* 26 */
	    "burst = 6\n"                   /* 27 */
	    "[policy default]\n"            /* 28 */
	    "algorithm = leaky\n"           /* 29 */
	    "nonsense",                     /* 30, no newline */
	    19,
	    "t.conf:1: key \"key0\" before any [section]\n"
	    "t.conf:3: [store] unknown key \"pth\": did you mean \"path\"?\n"
	    "t.conf:4: [store] busy_timeout_ms: \"60y\": " RLG_T_DUR_MS "\n"
	    "t.conf:5: [store] on_error: must be one of closed, open "
	    "(got \"Closed\")\n"
	    "t.conf:7: [headers] style: " RLG_T_STYLES " (got \"fancy\")\n"
	    "t.conf:8: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"what is this\")\n"
	    "t.conf:10: [policy default] limit: must be an integer from 1 to "
	    "1000000000 (got \"0\")\n"
	    "t.conf:11: [policy default] limit: set twice (first on line 10)\n"
	    "t.conf:12: [policy default] window: must not be empty\n"
	    "t.conf:13: [policy default] key: " RLG_T_NEED_SECRET "\n"
	    "t.conf:15: [policy api] burst: applies only to algorithm = "
	    "token_bucket\n"
	    "t.conf:16: [policy api] limit: sliding_log keeps one row per "
	    "request: at most 100000 (got \"200000\")\n"
	    "t.conf:17: unknown section [foo]\n"
	    "t.conf:19: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"[store\")\n"
	    "t.conf:22: [response] errors: must be one of json, problem "
	    "(got \"html\")\n"
	    "t.conf:23: bad policy name \"a b\": only A-Z a-z 0-9 _ . - are "
	    "allowed\n"
	    RLG_T_AGAIN("[policy api]", "25", "14")
	    "t.conf:27: [policy api] burst: set twice (first on line 15)\n"
	    RLG_T_AGAIN("[policy default]", "28", "9")
	    "t.conf:29: [policy default] algorithm: unknown algorithm "
	    "(got \"leaky\"): " RLG_T_ALGORITHMS "\n"
	    "t.conf:30: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"nonsense\")\n");
}
END_TEST

START_TEST(test_syntax_errors)
{
	const char *head = "syntax error: expected \"key = value\" or "
	    "\"[section]\" (got ";
	char *want;

	want = rlg_t_fmt(
	    "t.conf:2: %s\"just words\")\n"
	    "t.conf:3: %s\"= value\")\n"
	    "t.conf:4: %s\"[headers\")\n"
	    "t.conf:6: %s\"[store] path = /x\")\n"
	    "t.conf:8: %s\"[store ; comment]\")\n"
	    "t.conf:9: %s\"also bad ; with a comment\")\n",
	    head, head, head, head, head, head);
	rlg_t_expect(
	    "[store]\n"
	    "just words\n"
	    "= value\n"
	    "[headers\n"
	    "[headers] ; a comment after a header is fine\n"
	    "[store] path = /x\n"
	    "[store]#fine too\n"
	    "[store ; comment]\n"
	    "also bad ; with a comment\n",
	    6, want);
	free(want);
}
END_TEST

START_TEST(test_no_continuation_lines)
{
	/* An indented line is a line of its own, never a continuation. */
	rlg_t_expect(
	    "[store]\n"
	    "path = /a\n"
	    "  /continued\n",
	    1,
	    "t.conf:3: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"/continued\")\n");
	rlg_t_expect(
	    "[store]\n"
	    "path = /a\n"
	    "  path = /b\n",
	    1,
	    "t.conf:3: [store] path: set twice (first on line 2)\n");
}
END_TEST

START_TEST(test_overlong_line)
{
	char *pad, *text, *want;

	/* One byte over: with '\n', with "\r\n", at the end of the text;
	 * the lines after each one keep their numbers. */
	pad = rlg_t_repeat('x', RLG_CONFIG_LINE_MAX - 1);
	text = rlg_t_fmt(
	    "[store]\n"
	    "; %s\n"
	    "bogus\n"
	    "path = %s\r\n"
	    "[nope]\n"
	    "path = /ok\n"
	    "; %s",
	    pad, pad, pad);
	want = rlg_t_fmt(
	    "t.conf:2: line too long (max %d bytes)\n"
	    "t.conf:3: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"bogus\")\n"
	    "t.conf:4: line too long (max %d bytes)\n"
	    "t.conf:5: unknown section [nope]\n"
	    "t.conf:7: line too long (max %d bytes)\n",
	    RLG_CONFIG_LINE_MAX, RLG_CONFIG_LINE_MAX, RLG_CONFIG_LINE_MAX);
	rlg_t_expect(text, 5, want);
	free(want);
	free(text);
	free(pad);

	/* Far over: the rest of the line is skipped, not read as lines. */
	pad = rlg_t_repeat('y', 5 * RLG_CONFIG_LINE_MAX);
	text = rlg_t_fmt("[store]\npath = %s\nbusy_timeout_ms = x\n", pad);
	want = rlg_t_fmt(
	    "t.conf:2: line too long (max %d bytes)\n"
	    "t.conf:3: [store] busy_timeout_ms: \"x\": " RLG_T_DUR_MS "\n",
	    RLG_CONFIG_LINE_MAX);
	rlg_t_expect(text, 2, want);
	free(want);
	free(text);
	free(pad);
}
END_TEST

START_TEST(test_path_too_long)
{
	char *path, *text;

	path = rlg_t_repeat('p', 4096);
	text = rlg_t_fmt("[store]\npath = %s\n", path);
	rlg_t_expect(text, 1, "t.conf:2: [store] path: must be at most 4095 "
	    "bytes long (got 4096 bytes)\n");
	free(text);
	free(path);
}
END_TEST

START_TEST(test_duplicate_key)
{
	rlg_t_expect(
	    "[store]\n"
	    "\n"
	    "path = /a\n"
	    "[policy default]\n"
	    "limit = 1\n"
	    "[store]\n"
	    "busy_timeout_ms = 1\n"
	    "path = /b\n"
	    "[policy default]\n"
	    "limit = 2\n"
	    "limit = 3\n",
	    3,
	    "t.conf:8: [store] path: set twice (first on line 3)\n"
	    RLG_T_AGAIN("[policy default]", "9", "4")
	    "t.conf:10: [policy default] limit: set twice (first on line 5)\n"
	    "t.conf:11: [policy default] limit: set twice (first on line 5)\n");
	/* A bad first value still counts as set. */
	rlg_t_expect(
	    "[headers]\nstyle = fancy\nstyle = draft03\n",
	    2,
	    "t.conf:2: [headers] style: " RLG_T_STYLES " (got \"fancy\")\n"
	    "t.conf:3: [headers] style: set twice (first on line 2)\n");
	/* Per policy: a repeated [policy NAME] merges, so a key twice in it
	 * is an error; the same key in two policies is not. */
	rlg_t_expect(
	    "[policy a]\n"
	    "limit = 1\n"
	    "[policy b]\n"
	    "limit = 2\n"
	    "burst = 2\n"
	    "algorithm = token_bucket\n"
	    "[response]\n"
	    "errors = json\n"
	    "[policy a]\n"
	    "window = 2\n"
	    "limit = 3\n"
	    "[policy b]\n"
	    "burst = 3\n"
	    "[response]\n"
	    "errors = problem\n",
	    3,
	    RLG_T_AGAIN("[policy a]", "9", "1")
	    "t.conf:11: [policy a] limit: set twice (first on line 2)\n"
	    RLG_T_AGAIN("[policy b]", "12", "3")
	    "t.conf:13: [policy b] burst: set twice (first on line 5)\n"
	    "t.conf:15: [response] errors: set twice (first on line 8)\n");
}
END_TEST

START_TEST(test_unknown_section_and_key)
{
	rlg_t_expect(
	    "[foo]\n"
	    "[Store]\n"
	    "[]\n"
	    "[policyx]\n"
	    "[store]\n"
	    "pth = /x\n"
	    "Path = /x\n"
	    "[headers]\n"
	    "styles = draft03\n"
	    "[policy default]\n"
	    "limits = 5\n"
	    "path = /x\n"
	    "[response]\n"
	    "error = json\n"
	    "style = none\n"
	    "[policy api]\n"
	    "errors = json\n"
	    "Burst = 5\n"
	    "[Response]\n"
	    "[Policy x]\n"
	    "[policies x]\n",
	    16,
	    "t.conf:1: unknown section [foo]\n"
	    "t.conf:2: unknown section [Store]: did you mean [store]?\n"
	    "t.conf:3: unknown section []\n"
	    "t.conf:4: unknown section [policyx]: did you mean [policy "
	    "NAME]?\n"
	    "t.conf:6: [store] unknown key \"pth\": did you mean \"path\"?\n"
	    "t.conf:7: [store] unknown key \"Path\": did you mean \"path\"?\n"
	    "t.conf:9: [headers] unknown key \"styles\": "
	    "did you mean \"style\"?\n"
	    "t.conf:11: [policy default] unknown key \"limits\": "
	    "did you mean \"limit\"?\n"
	    "t.conf:12: [policy default] unknown key \"path\": "
	    "it belongs in [store] or [route NAME]\n"
	    "t.conf:14: [response] unknown key \"error\": "
	    "did you mean \"errors\"?\n"
	    "t.conf:15: [response] unknown key \"style\": "
	    "it belongs in [headers]\n"
	    "t.conf:17: [policy api] unknown key \"errors\": "
	    "it belongs in [response]\n"
	    "t.conf:18: [policy api] unknown key \"Burst\": "
	    "did you mean \"burst\"?\n"
	    "t.conf:19: unknown section [Response]: did you mean "
	    "[response]?\n"
	    "t.conf:20: unknown section [Policy x]: did you mean [policy x]?\n"
	    "t.conf:21: unknown section [policies x]\n");
	rlg_t_expect("limit = 5\n; c\n[store]\n", 1,
	    "t.conf:1: key \"limit\" before any [section]\n");
}
END_TEST

START_TEST(test_errs_null)
{
	struct rlg_config *cfg = NULL;

	ck_assert_int_eq(rlg_config_load_string(
	    "[store]\nbusy_timeout_ms = -1\n[x]\n", "t.conf", NULL, &cfg), 2);
	ck_assert_ptr_null(cfg);
}
END_TEST

/* ---- files -------------------------------------------------------------- */

START_TEST(test_load_file)
{
	static const char text[] =
	    "[store]\npath = /data/rl.db\n[policy default]\nlimit = 100\n";
	struct rlg_config *cfg = NULL;
	char *path, *buf = NULL;
	size_t len = 0;
	FILE *errs;

	path = rlg_t_file(text, sizeof text - 1);
	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load(path, errs, &cfg), 0);
	fclose(errs);
	unlink(path);
	ck_assert_str_eq(buf, "");
	ck_assert_ptr_nonnull(cfg);
	ck_assert_str_eq(cfg->source, path);
	ck_assert_str_eq(cfg->store.sqlite.path, "/data/rl.db");
	ck_assert_int_eq(cfg->policies[0].lim.limit, 100);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 60000);
	rlg_config_free(cfg);
	free(buf);
	free(path);
}
END_TEST

/* A world-writable config loads, with one warning naming the fix. */
START_TEST(test_world_writable_warning)
{
	static const char text[] = "[policy default]\nlimit = 7\n";
	struct rlg_config *cfg = NULL;
	char *path, *buf = NULL, *want;
	size_t len = 0;
	FILE *errs;

	path = rlg_t_file(text, sizeof text - 1);
	ck_assert_int_eq(chmod(path, 0666), 0);
	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load(path, errs, &cfg), 0);
	fclose(errs);
	want = rlg_t_fmt("%s: warning: the file is world-writable: anyone on "
	    "this machine can change the limits (chmod o-w %s)\n", path, path);
	ck_assert_str_eq(buf, want);
	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(cfg->policies[0].lim.limit, 7);
	rlg_config_free(cfg);
	free(buf);
	free(want);
	/* 0644: no warning */
	ck_assert_int_eq(chmod(path, 0644), 0);
	buf = NULL;
	errs = open_memstream(&buf, &len);
	ck_assert_int_eq(rlg_config_load(path, errs, &cfg), 0);
	fclose(errs);
	ck_assert_str_eq(buf, "");
	rlg_config_free(cfg);
	free(buf);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_load_file_errors)
{
	/* The messages name the file; a NUL byte spoils only its line;
	 * an overlong line is skipped when read from a file too. */
	static const char head[] = "[store]\npa\0th = /x\nbogus\n";
	struct rlg_config *cfg = NULL;
	char *path, *buf = NULL, *want, *pad, *text;
	size_t len = 0;
	FILE *errs;

	pad = rlg_t_repeat('z', 3 * RLG_CONFIG_LINE_MAX);
	text = malloc(sizeof head - 1 + strlen(pad) + 64);
	ck_assert_ptr_nonnull(text);
	memcpy(text, head, sizeof head - 1);
	len = sizeof head - 1;
	len += (size_t)sprintf(text + len, "%s\nlimit = 5\n[policy default]\n"
	    "window = 60y\n", pad);
	path = rlg_t_file(text, len);

	len = 0;
	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load(path, errs, &cfg), 5);
	fclose(errs);
	unlink(path);
	ck_assert_ptr_null(cfg);
	want = rlg_t_fmt(
	    "%s:2: line holds a NUL byte\n"
	    "%s:3: syntax error: expected \"key = value\" or \"[section]\" "
	    "(got \"bogus\")\n"
	    "%s:4: line too long (max %d bytes)\n"
	    "%s:5: [store] unknown key \"limit\": it belongs in [policy NAME]\n"
	    "%s:7: [policy default] window: \"60y\": " RLG_T_DUR_S "\n",
	    path, path, path, RLG_CONFIG_LINE_MAX, path, path);
	ck_assert_str_eq(buf, want);
	free(want);
	free(buf);
	free(text);
	free(pad);
	free(path);
}
END_TEST

START_TEST(test_load_missing)
{
	struct rlg_config *cfg = (struct rlg_config *)&cfg;
	char *buf = NULL;
	size_t len = 0;
	FILE *errs;

	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load("/nonexistent/rlgate.conf", errs,
	    &cfg), 1);
	fclose(errs);
	ck_assert_ptr_null(cfg);
	ck_assert_str_eq(buf, "/nonexistent/rlgate.conf: cannot open: "
	    "No such file or directory\n");
	free(buf);

	ck_assert_int_eq(rlg_config_load("/nonexistent/rlgate.conf", NULL,
	    &cfg), 1);
	ck_assert_ptr_null(cfg);
}
END_TEST

START_TEST(test_load_directory)
{
	struct rlg_config *cfg = NULL;
	char *dir, *buf = NULL, *want;
	size_t len = 0;
	FILE *errs;

	dir = rlg_t_fmt("%s/check_config.XXXXXX", rlg_t_tmpdir());
	ck_assert_ptr_nonnull(mkdtemp(dir));
	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load(dir, errs, &cfg), 1);
	fclose(errs);
	ck_assert_ptr_null(cfg);
	want = rlg_t_fmt("%s: cannot read: Is a directory\n", dir);
	ck_assert_str_eq(buf, want);
	free(want);
	free(buf);
	rmdir(dir);
	free(dir);
}
END_TEST

START_TEST(test_pick)
{
	const char *fallback;

	fallback = access(RLG_DEFAULT_CONFIG_PATH, F_OK) == 0 ?
	    RLG_DEFAULT_CONFIG_PATH : NULL;

	/* --config wins over everything. */
	ck_assert_int_eq(setenv("RLGATE_CONFIG", "/env/rlgate.conf", 1), 0);
	ck_assert_str_eq(rlg_config_pick("/opt/rlgate.conf"),
	    "/opt/rlgate.conf");
	/* Then the environment. */
	ck_assert_str_eq(rlg_config_pick(NULL), "/env/rlgate.conf");
	/* An empty variable counts as unset. */
	ck_assert_int_eq(setenv("RLGATE_CONFIG", "", 1), 0);
	if (fallback == NULL)
		ck_assert_ptr_null(rlg_config_pick(NULL));
	else
		ck_assert_str_eq(rlg_config_pick(NULL), fallback);
	/* Then SYSCONFDIR/rlgate.conf if it exists, else built-in. */
	ck_assert_int_eq(unsetenv("RLGATE_CONFIG"), 0);
	if (fallback == NULL)
		ck_assert_ptr_null(rlg_config_pick(NULL));
	else
		ck_assert_str_eq(rlg_config_pick(NULL), fallback);
	ck_assert_str_eq(rlg_config_pick("/opt/rlgate.conf"),
	    "/opt/rlgate.conf");
}
END_TEST

/* ---- clients: [client], key, mode, exempt, [headers], [log] ------------- */

/* A [client] key_secret line, 16 bytes exactly. */
#define RLG_T_SECRET_LINE "[client]\nkey_secret = 0123456789abcdef\n"

/* n networks "10.0.N.0/24, ..." (N from 0), as a new string. */
static char *
rlg_t_cidrs(size_t n)
{
	char *s, *t;
	size_t i;

	s = rlg_t_fmt("%s", "");
	for (i = 0; i < n; i++) {
		t = rlg_t_fmt("%s%s10.0.%zu.0/24", s, i > 0 ? ", " : "", i);
		free(s);
		s = t;
	}
	return s;
}

/* n methods "AA, AB, ...", as a new string. */
static char *
rlg_t_methods(size_t n)
{
	char *s, *t;
	size_t i;

	s = rlg_t_fmt("%s", "");
	for (i = 0; i < n; i++) {
		t = rlg_t_fmt("%s%sM%c", s, i > 0 ? "," : "",
		    (char)('A' + (int)i));
		free(s);
		s = t;
	}
	return s;
}

/* c is the IPv4 network a.b.c.d/len, as IPv4-mapped IPv6. */
static void
rlg_t_v4(const struct rlg_cidr *c, unsigned a, unsigned b, unsigned cc,
    unsigned d, int len)
{
	static const unsigned char mapped[12] =
	    { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	ck_assert(c->addr.v4);
	ck_assert_int_eq(memcmp(c->addr.b, mapped, sizeof mapped), 0);
	ck_assert_uint_eq(c->addr.b[12], a);
	ck_assert_uint_eq(c->addr.b[13], b);
	ck_assert_uint_eq(c->addr.b[14], cc);
	ck_assert_uint_eq(c->addr.b[15], d);
	ck_assert_int_eq(c->prefix_len, 96 + len);
}

START_TEST(test_new_defaults)
{
	struct rlg_config *cfg = rlg_config_defaults();
	int round;

	for (round = 0; round < 2; round++) {
		ck_assert_uint_eq(cfg->nroutes, 0);
		ck_assert_ptr_null(cfg->routes);
		ck_assert_uint_eq(cfg->ndefault, 1);
		ck_assert_uint_eq(cfg->default_policies[0], 0);
		ck_assert_uint_eq(cfg->client.ntrusted, 0);
		ck_assert_ptr_null(cfg->client.trusted_proxies);
		ck_assert_int_eq(cfg->client.ipv6_prefix,
		    RLG_DEFAULT_IPV6_PREFIX);
		ck_assert_int_eq(cfg->client.ipv6_prefix, 64);
		ck_assert_uint_eq(cfg->client.nexempt, 0);
		ck_assert_ptr_null(cfg->client.exempt);
		ck_assert_ptr_null(cfg->client.key_secret);
		ck_assert(!cfg->report_exempt);
		ck_assert_int_eq(cfg->log_level, RLG_LOG_WARN);
		ck_assert_int_eq(cfg->policies[0].key, RLG_KEY_IP);
		ck_assert_ptr_null(cfg->policies[0].key_name);
		ck_assert_int_eq(cfg->policies[0].mode, RLG_MODE_ENFORCE);
		ck_assert_uint_eq(cfg->policies[0].nexempt, 0);
		ck_assert_ptr_null(cfg->policies[0].exempt);
		rlg_config_free(cfg);
		/* The same from a file that sets none of it; a policy of
		 * the file gets the same defaults. */
		cfg = rlg_t_ok(round == 0 ?
		    "[client]\n[log]\n[headers]\n" :
		    "[client]\n[log]\n[policy default]\nlimit = 3\n");
	}
	ck_assert_int_eq(cfg->policies[0].lim.limit, 3);
	rlg_config_free(cfg);
}
END_TEST

/* A good key value and what it becomes. */
struct rlg_t_key {
	const char *value;
	unsigned bits;
	const char *header;    /* NULL: none */
};

static const struct rlg_t_key rlg_t_keys[] = {
	{ "ip", RLG_KEY_IP, NULL },
	{ "header:X-Api-Key", RLG_KEY_HEADER, "X-Api-Key" },
	{ "header:x-api-key", RLG_KEY_HEADER, "x-api-key" },
	{ "ip, header:X-Api-Key", RLG_KEY_IP | RLG_KEY_HEADER, "X-Api-Key" },
	{ "header:Authorization,ip", RLG_KEY_IP | RLG_KEY_HEADER,
	    "Authorization" },
	{ "  header:K  ,   ip  ", RLG_KEY_IP | RLG_KEY_HEADER, "K" },
	{ "header:!#$%&'*+-.^_`|~09AZaz", RLG_KEY_HEADER,
	    "!#$%&'*+-.^_`|~09AZaz" },
	{ "header:"
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh",
	    RLG_KEY_HEADER,
	    "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh" },
};
#define RLG_T_NKEYS (sizeof rlg_t_keys / sizeof rlg_t_keys[0])

START_TEST(test_policy_key)
{
	const struct rlg_t_key *w = &rlg_t_keys[_i];
	struct rlg_config *cfg;
	char *text;

	text = rlg_t_fmt("[policy p]\nkey = %s ; a comment\n"
	    RLG_T_SECRET_LINE, w->value);
	cfg = rlg_t_ok(text);
	ck_assert_uint_eq(cfg->policies[0].key, w->bits);
	if (w->header == NULL)
		ck_assert_ptr_null(cfg->policies[0].key_name);
	else
		ck_assert_str_eq(cfg->policies[0].key_name, w->header);
	ck_assert_str_eq(cfg->client.key_secret, "0123456789abcdef");
	rlg_config_free(cfg);
	free(text);
}
END_TEST

START_TEST(test_key_items_each_reported)
{
	/* Every bad item of one key is its own problem; the header length
	 * is counted only for a token. */
	rlg_t_expect(
	    "[policy p]\n"
	    "key = IP, header:a b\n",
	    2,
	    "t.conf:2: [policy p] key: " RLG_T_KEYS " (got \"IP\")\n"
	    "t.conf:2: [policy p] key: " RLG_T_TOKEN " (got \"a b\")\n");
}
END_TEST

/* A file of dir with text and mode; its path (freed by the caller). */
static char *
jwt_file(const char *dir, const char *name, const char *text, mode_t mode)
{
	char *path = rlg_t_fmt("%s/%s", dir, name);
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

/* The problems of a config with [client] jwt_key = path (line 4) and
 * jwt_algorithm = alg, one policy keyed jwt:sub. */
static void
jwt_expect(const char *path, const char *alg, int count, const char *want)
{
	char *text = rlg_t_fmt("[client]\n"
	    "key_secret = 00112233445566778899aabbccddeeff\n"
	    "jwt_algorithm = %s\n"
	    "jwt_key = %s\n"
	    "[policy p]\nkey = jwt:sub\n", alg, path);
	const char *at = want != NULL ? strstr(want, "%s") : NULL;
	char *w = at != NULL ? rlg_t_fmt("%.*s%s%s", (int)(at - want), want,
	    path, at + 2) : NULL;

	if (w == NULL) {
		struct rlg_config *cfg = rlg_t_ok(text);

		ck_assert_ptr_nonnull(cfg->client.jwt_key);
		ck_assert_uint_gt(cfg->client.jwt_generation, 0);
		rlg_config_free(cfg);
	} else {
		rlg_t_expect(text, count, w);
	}
	free(w);
	free(text);
}

/*
 * [client] jwt_key: read at load, at its line: a file that cannot be
 * read, empty, writable by others, a short HS256 secret, a private or
 * no PEM key for RS256; a secret readable by others is a warning; a
 * jwt:CLAIM key without jwt_key is a problem at the key's line.
 */
START_TEST(test_jwt_key_file)
{
	char *dir, *ok, *nl, *shortk, *empty, *open_w, *priv, *notpem, *loose;
	char *missing, *text;
	struct rlg_config *cfg;

	dir = rlg_t_fmt("%s/check_config.XXXXXX", rlg_t_tmpdir());
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ok = jwt_file(dir, "hs", "0123456789abcdef0123456789abcdef", 0600);
	nl = jwt_file(dir, "hsnl", "0123456789abcdef0123456789abcdef\n", 0600);
	shortk = jwt_file(dir, "short", "0123456789abcdef0123456789abcde\n",
	    0600);
	empty = jwt_file(dir, "empty", "", 0600);
	open_w = jwt_file(dir, "open", "0123456789abcdef0123456789abcdef",
	    0622);
	loose = jwt_file(dir, "loose", "0123456789abcdef0123456789abcdef",
	    0644);
	priv = jwt_file(dir, "priv", "-----BEGIN PRIVATE KEY-----\nx\n"
	    "-----END PRIVATE KEY-----\n", 0600);
	notpem = jwt_file(dir, "notpem", "hello", 0600);

	jwt_expect(ok, "HS256", 0, NULL);
	jwt_expect(nl, "HS256", 0, NULL);
	missing = rlg_t_fmt("%s/missing", dir);
	jwt_expect(missing, "HS256", 1,
	    "t.conf:4: [client] jwt_key: %s: No such file or directory\n");
	free(missing);
	jwt_expect(shortk, "HS256", 1, "t.conf:4: [client] jwt_key: %s: an "
	    "HS256 secret of at least 32 bytes (got 31)\n");
	jwt_expect(empty, "HS256", 1,
	    "t.conf:4: [client] jwt_key: %s: empty (0 bytes)\n");
	jwt_expect(open_w, "HS256", 1, "t.conf:4: [client] jwt_key: %s: "
	    "writable by group or others (mode 622): whoever writes it signs "
	    "tokens\n");
	jwt_expect(priv, "RS256", 1, "t.conf:4: [client] jwt_key: %s: holds a "
	    "private key: give rlgate the public key only (openssl pkey "
	    "-pubout)\n");
	jwt_expect(notpem, "ES256", 1, "t.conf:4: [client] jwt_key: %s: not a "
	    "PEM public key (-----BEGIN PUBLIC KEY-----), as ES256 needs\n");
	jwt_expect(dir, "HS256", 1,
	    "t.conf:4: [client] jwt_key: %s: not a regular file\n");
	/* the secret without its newline; readable by others: a warning */
	text = rlg_t_fmt("[client]\njwt_key = %s\n", nl);
	cfg = rlg_t_ok(text);
	ck_assert_uint_eq(cfg->client.jwt_key_len, 32);
	rlg_config_free(cfg);
	free(text);
	text = rlg_t_fmt("[client]\njwt_key = %s\n", loose);
	rlg_config_free(rlg_t_ok_warned(text, 1));
	free(text);
	/* a namespaced claim */
	text = rlg_t_fmt("[client]\nkey_secret = 00112233445566778899aabbccddeeff"
	    "\njwt_key = %s\n[policy p]\nkey = jwt:https://example.com/tenant\n",
	    ok);
	cfg = rlg_t_ok(text);
	ck_assert_str_eq(cfg->policies[0].key_name, "https://example.com/tenant");
	rlg_config_free(cfg);
	free(text);
	/* a jwt key without jwt_key */
	rlg_t_expect("[client]\nkey_secret = 00112233445566778899aabbccddeeff\n"
	    "[policy p]\nkey = ip, jwt:sub\n", 1,
	    "t.conf:4: [policy p] key: jwt:CLAIM reads verified bearer "
	    "tokens: set [client] jwt_key (the file of the HS256 secret, or "
	    "of the RS256 or ES256 public key)\n");
	free(ok);
	free(nl);
	free(shortk);
	free(empty);
	free(open_w);
	free(loose);
	free(priv);
	free(notpem);
	free(dir);
}
END_TEST

START_TEST(test_key_secret_required)
{
	struct rlg_config *cfg;

	/* At the key line of every policy with a header key, whatever the
	 * order of the sections; ip alone needs no secret. */
	rlg_t_expect(
	    "[policy a]\n"                  /* 1 */
	    "key = ip, header:X-Api-Key\n"  /* 2 */
	    "[policy b]\n"                  /* 3 */
	    "key = ip\n"                    /* 4 */
	    "[policy c]\n"                  /* 5 */
	    "limit = 5\n"                   /* 6 */
	    "key = header:X-Token\n"        /* 7 */
	    "[client]\n"                    /* 8 */
	    "ipv6_prefix = 56\n",           /* 9 */
	    2,
	    "t.conf:2: [policy a] key: " RLG_T_NEED_SECRET "\n"
	    "t.conf:7: [policy c] key: " RLG_T_NEED_SECRET "\n");

	/* Set after the policies: fine. */
	cfg = rlg_t_ok(
	    "[policy a]\nkey = header:X-Api-Key\n"
	    "[client]\nkey_secret = 00112233445566778899aabbccddeeff\n");
	ck_assert_uint_eq(cfg->policies[0].key, RLG_KEY_HEADER);
	ck_assert_str_eq(cfg->policies[0].key_name, "X-Api-Key");
	ck_assert_str_eq(cfg->client.key_secret,
	    "00112233445566778899aabbccddeeff");
	rlg_config_free(cfg);

	/* A secret that is too short is reported once, for itself (its
	 * value never printed), not again at each header key. */
	rlg_t_expect(
	    "[client]\nkey_secret = short-secret\n"
	    "[policy a]\nkey = header:X-Api-Key\n",
	    1,
	    "t.conf:2: [client] key_secret: must be at least 16 bytes "
	    "(got 12 bytes)\n");
}
END_TEST

START_TEST(test_mode)
{
	struct rlg_config *cfg = rlg_t_ok(
	    "[policy a]\nmode = dry_run\n"
	    "[policy b]\nmode = enforce\n"
	    "[policy c]\n");

	ck_assert_int_eq(cfg->policies[0].mode, RLG_MODE_DRY_RUN);
	ck_assert_int_eq(cfg->policies[1].mode, RLG_MODE_ENFORCE);
	ck_assert_int_eq(cfg->policies[2].mode, RLG_MODE_ENFORCE);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_policy_exempt)
{
	struct rlg_config *cfg = rlg_t_ok(
	    "[policy a]\n"
	    "exempt = 10.0.0.0/8, 192.0.2.1 ,2001:db8::/32,::1\n"
	    "[policy b]\n"
	    "exempt = 198.51.100.0/24\n"
	    "[policy c]\n");
	const struct rlg_policy *a = &cfg->policies[0];
	static const unsigned char v6[16] =
	    { 0x20, 0x01, 0x0d, 0xb8 };
	static const unsigned char lo[16] =
	    { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };

	ck_assert_uint_eq(a->nexempt, 4);
	rlg_t_v4(&a->exempt[0], 10, 0, 0, 0, 8);
	rlg_t_v4(&a->exempt[1], 192, 0, 2, 1, 32);
	ck_assert(!a->exempt[2].addr.v4);
	ck_assert_int_eq(memcmp(a->exempt[2].addr.b, v6, 16), 0);
	ck_assert_int_eq(a->exempt[2].prefix_len, 32);
	ck_assert(!a->exempt[3].addr.v4);
	ck_assert_int_eq(memcmp(a->exempt[3].addr.b, lo, 16), 0);
	ck_assert_int_eq(a->exempt[3].prefix_len, 128);
	ck_assert_uint_eq(cfg->policies[1].nexempt, 1);
	rlg_t_v4(&cfg->policies[1].exempt[0], 198, 51, 100, 0, 24);
	ck_assert_uint_eq(cfg->policies[2].nexempt, 0);
	ck_assert_ptr_null(cfg->policies[2].exempt);
	rlg_config_free(cfg);

	/* Each bad network is its own problem, named. */
	rlg_t_expect(
	    "[policy a]\n"
	    "exempt = 10.0.0.0/8, 10.0.0.1/8, 192.0.2.0/24, nope, ::1/200\n",
	    3,
	    "t.conf:2: [policy a] exempt: " RLG_T_CIDR
	    " (got \"10.0.0.1/8\")\n"
	    "t.conf:2: [policy a] exempt: " RLG_T_CIDR " (got \"nope\")\n"
	    "t.conf:2: [policy a] exempt: " RLG_T_CIDR " (got \"::1/200\")\n");
}
END_TEST

START_TEST(test_cidrs_max)
{
	static const char *const where[][2] = {
		{ "policy a", "[policy a] exempt" },
		{ "client", "[client] exempt" },
		{ "client", "[client] trusted_proxies" },
	};
	struct rlg_config *cfg;
	char *list, *text, *want;
	const char *key;
	size_t i;

	/* 64 of them are fine. */
	list = rlg_t_cidrs(RLG_CIDRS_MAX);
	text = rlg_t_fmt("[policy a]\nexempt = %s\n[client]\nexempt = %s\n"
	    "trusted_proxies = %s\n", list, list, list);
	cfg = rlg_t_ok(text);
	ck_assert_uint_eq(cfg->policies[0].nexempt, 64);
	ck_assert_uint_eq(cfg->client.nexempt, 64);
	ck_assert_uint_eq(cfg->client.ntrusted, 64);
	rlg_t_v4(&cfg->policies[0].exempt[63], 10, 0, 63, 0, 24);
	rlg_t_v4(&cfg->client.exempt[0], 10, 0, 0, 0, 24);
	rlg_t_v4(&cfg->client.trusted_proxies[63], 10, 0, 63, 0, 24);
	rlg_config_free(cfg);
	free(text);
	free(list);

	/* 65 are one problem, in each place. */
	list = rlg_t_cidrs(RLG_CIDRS_MAX + 1);
	for (i = 0; i < sizeof where / sizeof where[0]; i++) {
		key = strrchr(where[i][1], ' ') + 1;
		text = rlg_t_fmt("[%s]\n%s = %s\n", where[i][0], key, list);
		want = rlg_t_fmt("t.conf:2: %s: at most 64 networks "
		    "(got 65)\n", where[i][1]);
		rlg_t_expect(text, 1, want);
		free(want);
		free(text);
	}
	free(list);
}
END_TEST

/*
 * trusted_proxies = 0.0.0.0/0 lets any client name its key: allowed (a
 * front may strip and set the header), but warned about, on its line;
 * a warning is no problem (the count stays 0, the config loads).
 */
/*
 * new_keys_per_ip: a header-keyed policy gets its bound on new keys, a
 * fixed window of NAME.new_keys (default 100 per the policy's window);
 * 0 turns it off; it is an error on a policy without a header key, and no
 * policy may take a name of that form.
 */
START_TEST(test_new_keys_per_ip)
{
	struct rlg_config *cfg = rlg_t_ok(
	    "[store]\nmax_clients = 0\n"
	    "[client]\nkey_secret = 0123456789abcdef0123\n"
	    "[policy api]\nkey = header:X-Api-Key\nwindow = 30\nmode = dry_run\n"
	    "[policy both]\nkey = ip, header:X-Api-Key\nnew_keys_per_ip = 7\n"
	    "[policy off]\nkey = header:X-Api-Key\nnew_keys_per_ip = 0\n"
	    "[policy ip]\n");
	const struct rlg_policy *nk;
	char *errs;
	int n;

	ck_assert_uint_eq(cfg->npolicies, 4);
	nk = cfg->policies[0].new_keys_policy;
	ck_assert_ptr_nonnull(nk);
	ck_assert_str_eq(nk->name, "api.new_keys");
	ck_assert_int_eq(nk->lim.algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(nk->lim.limit, RLG_DEFAULT_NEW_KEYS);
	ck_assert_int_eq(nk->lim.window_ms, 30000);
	ck_assert_int_eq(nk->mode, RLG_MODE_DRY_RUN);
	nk = cfg->policies[1].new_keys_policy;
	ck_assert_ptr_nonnull(nk);
	ck_assert_str_eq(nk->name, "both.new_keys");
	ck_assert_int_eq(nk->lim.limit, 7);
	ck_assert_int_eq(nk->lim.window_ms, 60000);
	ck_assert_ptr_null(cfg->policies[2].new_keys_policy);
	ck_assert_ptr_null(cfg->policies[3].new_keys_policy);
	rlg_config_free(cfg);

	rlg_t_expect("[policy ip]\nnew_keys_per_ip = 5\n", 1,
	    "t.conf:2: [policy ip] new_keys_per_ip: applies only to a key "
	    "with header:NAME, cookie:NAME, query:NAME or jwt:CLAIM\n");
	rlg_t_expect("[client]\nkey_secret = 0123456789abcdef0123\n"
	    "[policy k]\nkey = header:A\nnew_keys_per_ip = -1\n", 1,
	    "t.conf:5: [policy k] new_keys_per_ip: must be an integer from 0 "
	    "to 1000000000 (got \"-1\")\n");
	/* a bound as large as the store: warned about, on its line */
	errs = rlg_t_load("[store]\nmax_clients = 50\n"
	    "[client]\nkey_secret = 0123456789abcdef0123\n"
	    "[policy k]\nkey = header:A\nnew_keys_per_ip = 50\n"
	    "[policy z]\nkey = header:A\nnew_keys_per_ip = 0\n", &n, &cfg);
	ck_assert_int_eq(n, 0);
	ck_assert_str_eq(errs, "t.conf:7: warning: [policy k] new_keys_per_ip: "
	    "50 lets one address start as many keys as [store] max_clients "
	    "(50) holds, and lock every new client out\n"
	    "t.conf:10: warning: [policy z] new_keys_per_ip: 0 (no bound) "
	    "lets one address start as many keys as [store] max_clients (50) "
	    "holds, and lock every new client out\n");
	rlg_config_free(cfg);
	free(errs);
	rlg_t_expect("[policy x.new_keys]\n", 1,
	    "t.conf:1: bad policy name \"x.new_keys\": names ending in "
	    "\".new_keys\" are rlgate's own (the bound on new keys of a "
	    "policy)\n");
}
END_TEST

START_TEST(test_trust_everyone_warning)
{
	static const struct { const char *nets, *word; } cases[] = {
		{ "0.0.0.0/0", "0.0.0.0/0" },
		{ "10.0.0.1, ::/0", "::/0" },
		{ "::ffff:0.0.0.0/96", "0.0.0.0/0" },
	};
	struct rlg_config *cfg;
	char text[128], want[512], *errs;
	size_t i;
	int n;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(text, sizeof text,
		    "[store]\npath = /tmp/x.db\n[client]\ntrusted_proxies = %s\n",
		    cases[i].nets);
		errs = rlg_t_load(text, &n, &cfg);
		snprintf(want, sizeof want, "t.conf:4: warning: [client] "
		    "trusted_proxies: %s trusts every peer: any client that "
		    "reaches rlgate directly chooses its own key with a "
		    "forwarding header; list only your proxies\n",
		    cases[i].word);
		ck_assert_str_eq(errs, want);
		ck_assert_int_eq(n, 0);
		ck_assert_ptr_nonnull(cfg);
		rlg_config_free(cfg);
		free(errs);
	}
	/* /1 is no warning; a warning beside a problem: only one counts */
	errs = rlg_t_load("[client]\ntrusted_proxies = 0.0.0.0/1\n", &n, &cfg);
	ck_assert_str_eq(errs, "");
	rlg_config_free(cfg);
	free(errs);
	errs = rlg_t_load("[client]\ntrusted_proxies = ::/0\nipv6_prefix = 0\n",
	    &n, &cfg);
	ck_assert_int_eq(n, 1);
	ck_assert_ptr_null(cfg);
	ck_assert_ptr_nonnull(strstr(errs, "t.conf:2: warning:"));
	ck_assert_ptr_nonnull(strstr(errs, "t.conf:3: [client] ipv6_prefix"));
	free(errs);
}
END_TEST

START_TEST(test_client)
{
	struct rlg_config *cfg = rlg_t_ok(
	    "[client]\n"
	    "trusted_proxies = 127.0.0.1, ::1, 10.1.0.0/16\n"
	    "ipv6_prefix = 48\n"
	    "exempt = 203.0.113.7\n"
	    "key_secret = a secret with spaces, commas; and more\n");

	ck_assert_uint_eq(cfg->client.ntrusted, 3);
	rlg_t_v4(&cfg->client.trusted_proxies[0], 127, 0, 0, 1, 32);
	ck_assert(!cfg->client.trusted_proxies[1].addr.v4);
	ck_assert_int_eq(cfg->client.trusted_proxies[1].prefix_len, 128);
	rlg_t_v4(&cfg->client.trusted_proxies[2], 10, 1, 0, 0, 16);
	ck_assert_int_eq(cfg->client.ipv6_prefix, 48);
	ck_assert_uint_eq(cfg->client.nexempt, 1);
	rlg_t_v4(&cfg->client.exempt[0], 203, 0, 113, 7, 32);
	/* A ';' not after a space is part of the value. */
	ck_assert_str_eq(cfg->client.key_secret,
	    "a secret with spaces, commas; and more");
	rlg_config_free(cfg);

	/* The ends of the ipv6_prefix range. */
	cfg = rlg_t_ok("[client]\nipv6_prefix = 1\n");
	ck_assert_int_eq(cfg->client.ipv6_prefix, 1);
	rlg_config_free(cfg);
	cfg = rlg_t_ok("[client]\nipv6_prefix = 128\n");
	ck_assert_int_eq(cfg->client.ipv6_prefix, 128);
	rlg_config_free(cfg);

	/* A key set twice in [client], over two sections. */
	rlg_t_expect(
	    "[client]\nexempt = 10.0.0.0/8\n[client]\nexempt = ::1\n",
	    1,
	    "t.conf:4: [client] exempt: set twice (first on line 2)\n");
	/* [client] keys belong to [client] only. */
	rlg_t_expect(
	    "[policy a]\ntrusted_proxies = ::1\n[client]\nmode = enforce\n",
	    2,
	    "t.conf:2: [policy a] unknown key \"trusted_proxies\": "
	    "it belongs in [client]\n"
	    "t.conf:4: [client] unknown key \"mode\": "
	    "it belongs in [policy NAME]\n");
}
END_TEST

START_TEST(test_forwarded_header)
{
	struct rlg_config *cfg;

	cfg = rlg_t_ok("[client]\n");
	ck_assert_int_eq(cfg->client.forwarded_header, RLG_FWD_X_FORWARDED_FOR);
	rlg_config_free(cfg);
	cfg = rlg_t_ok("[client]\nforwarded_header = forwarded\n");
	ck_assert_int_eq(cfg->client.forwarded_header, RLG_FWD_FORWARDED);
	rlg_config_free(cfg);
	cfg = rlg_t_ok("[client]\nforwarded_header = x-forwarded-for\n");
	ck_assert_int_eq(cfg->client.forwarded_header, RLG_FWD_X_FORWARDED_FOR);
	rlg_config_free(cfg);
	rlg_t_expect("[client]\nforwarded_header = both\n", 1,
	    "t.conf:2: [client] forwarded_header: must be one of "
	    "x-forwarded-for, forwarded (got \"both\")\n");
}
END_TEST

START_TEST(test_headers_log)
{
	static const struct rlg_t_word levels[] = {
		{ "error", RLG_LOG_ERROR },
		{ "warn", RLG_LOG_WARN },
		{ "info", RLG_LOG_INFO },
	};
	struct rlg_config *cfg;
	char *text;
	size_t i;

	cfg = rlg_t_ok("[headers]\nreport_exempt = yes\nstyle = ietf\n");
	ck_assert(cfg->report_exempt);
	ck_assert_int_eq(cfg->style, RLG_STYLE_IETF);
	rlg_config_free(cfg);
	cfg = rlg_t_ok("[headers]\nreport_exempt = no\n");
	ck_assert(!cfg->report_exempt);
	rlg_config_free(cfg);

	for (i = 0; i < sizeof levels / sizeof levels[0]; i++) {
		text = rlg_t_fmt("[log]\nlevel = %s\n", levels[i].word);
		cfg = rlg_t_ok(text);
		ck_assert_int_eq(cfg->log_level, levels[i].value);
		ck_assert_str_eq(rlg_log_level_name(cfg->log_level),
		    levels[i].word);
		rlg_config_free(cfg);
		free(text);
	}
	ck_assert_str_eq(rlg_log_level_name((enum rlg_log_level)99),
	    "unknown");
	rlg_t_expect("[log]\nstyle = none\nlevel = info\nlevel = error\n", 2,
	    "t.conf:2: [log] unknown key \"style\": it belongs in [headers]\n"
	    "t.conf:4: [log] level: set twice (first on line 3)\n");
}
END_TEST

/* ---- routes ------------------------------------------------------------- */

/* n sections "[route rN]\npath = /N\npolicies = default\n", as a new string. */
static char *
rlg_t_routes(size_t n)
{
	char *s, *t;
	size_t i;

	s = rlg_t_fmt("%s", "");
	for (i = 1; i <= n; i++) {
		t = rlg_t_fmt("%s[route r%zu]\npath = /%zu\npolicies = default\n",
		    s, i, i);
		free(s);
		s = t;
	}
	return s;
}

START_TEST(test_routes)
{
	/* File order; prefix paths stored without '*'; methods; policies
	 * resolved to indexes, also to a [policy] later in the file; none;
	 * a repeated [route] merges into the first, keeping its place. */
	struct rlg_config *cfg = rlg_t_ok_warned(
	    "[policy strict]\nlimit = 5\n"
	    "[route login]\n"
	    "path = /login\n"
	    "methods = POST\n"
	    "[route static]\n"
	    "path = /static/*\n"
	    "policies = none\n"
	    "[route api]\n"
	    "path = /api/v1/*\n"
	    "methods = GET, HEAD ,PUT,DELETE\n"
	    "policies = hourly, strict\n"
	    "[route root]\n"
	    "path = /*\n"
	    "policies = default\n"
	    "[policy hourly]\nwindow = 3600\n"
	    "[route login]\n"
	    "policies = strict\n"
	    "[policy default]\n", 2);
	const struct rlg_route *r;

	ck_assert_uint_eq(cfg->npolicies, 3);
	ck_assert_uint_eq(cfg->nroutes, 4);

	r = &cfg->routes[0];
	ck_assert_str_eq(r->name, "login");
	ck_assert_str_eq(r->path, "/login");
	ck_assert(!r->prefix);
	ck_assert_uint_eq(r->nmethods, 1);
	ck_assert_str_eq(r->methods[0], "POST");
	ck_assert_uint_eq(r->npolicies, 1);
	ck_assert_uint_eq(r->policies[0], 0);

	r = &cfg->routes[1];
	ck_assert_str_eq(r->name, "static");
	ck_assert_str_eq(r->path, "/static/");
	ck_assert(r->prefix);
	ck_assert_uint_eq(r->nmethods, 0);
	ck_assert_ptr_null(r->methods);
	ck_assert_uint_eq(r->npolicies, 0);

	r = &cfg->routes[2];
	ck_assert_str_eq(r->name, "api");
	ck_assert_str_eq(r->path, "/api/v1/");
	ck_assert(r->prefix);
	ck_assert_uint_eq(r->nmethods, 4);
	ck_assert_str_eq(r->methods[0], "GET");
	ck_assert_str_eq(r->methods[1], "HEAD");
	ck_assert_str_eq(r->methods[2], "PUT");
	ck_assert_str_eq(r->methods[3], "DELETE");
	ck_assert_uint_eq(r->npolicies, 2);
	ck_assert_uint_eq(r->policies[0], 1);
	ck_assert_uint_eq(r->policies[1], 0);

	r = &cfg->routes[3];
	ck_assert_str_eq(r->name, "root");
	ck_assert_str_eq(r->path, "/");
	ck_assert(r->prefix);
	ck_assert_uint_eq(r->npolicies, 1);
	ck_assert_uint_eq(r->policies[0], 2);

	/* With routes: [policy default] only. */
	ck_assert_uint_eq(cfg->ndefault, 1);
	ck_assert_uint_eq(cfg->default_policies[0], 2);
	rlg_config_free(cfg);

	/* Sixteen methods, and the longest route name. */
	cfg = rlg_t_ok_warned("[route "
	    "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr]\n"
	    "path = /x\npolicies = none\n"
	    "methods = MA,MB,MC,MD,ME,MF,MG,MH,MI,MJ,MK,ML,MM,MN,MO,MP\n", 1);
	ck_assert_uint_eq(cfg->routes[0].nmethods, 16);
	ck_assert_str_eq(cfg->routes[0].methods[15], "MP");
	ck_assert_uint_eq(strlen(cfg->routes[0].name), 64);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_default_policies)
{
	struct rlg_config *cfg;

	/* No routes: every policy, in order. */
	cfg = rlg_t_ok("[policy a]\n[policy default]\n[policy c]\n");
	ck_assert_uint_eq(cfg->ndefault, 3);
	ck_assert_uint_eq(cfg->default_policies[0], 0);
	ck_assert_uint_eq(cfg->default_policies[1], 1);
	ck_assert_uint_eq(cfg->default_policies[2], 2);
	rlg_config_free(cfg);

	/* No routes, no policies: the built-in one. */
	cfg = rlg_t_ok("");
	ck_assert_uint_eq(cfg->ndefault, 1);
	ck_assert_uint_eq(cfg->default_policies[0], 0);
	rlg_config_free(cfg);

	/* Routes and [policy default]: that one alone. */
	cfg = rlg_t_ok("[policy a]\n[policy b]\n[policy default]\n"
	    "[route r]\npath = /r\npolicies = a, b\n");
	ck_assert_uint_eq(cfg->ndefault, 1);
	ck_assert_uint_eq(cfg->default_policies[0], 2);
	rlg_config_free(cfg);

	/* Routes without [policy default]: none. */
	cfg = rlg_t_ok("[policy a]\n[policy Default]\n"
	    "[route r]\npath = /r\npolicies = a\n");
	ck_assert_uint_eq(cfg->ndefault, 0);
	ck_assert_ptr_null(cfg->default_policies);
	rlg_config_free(cfg);

	/* Routes with no [policy] at all: the built-in "default", which a
	 * route may name too. */
	cfg = rlg_t_ok("[route r]\npath = /r\npolicies = default\n");
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_uint_eq(cfg->routes[0].npolicies, 1);
	ck_assert_uint_eq(cfg->routes[0].policies[0], 0);
	ck_assert_uint_eq(cfg->ndefault, 1);
	ck_assert_uint_eq(cfg->default_policies[0], 0);
	rlg_config_free(cfg);
}
END_TEST

/*
 * [route] cost: 1 unless set; 1..RLG_COST_MAX; at most the capacity of
 * each of the route's policies (limit; burst for token_bucket), else one
 * problem per policy at the cost line. A route without policies takes
 * any cost.
 */
/*
 * [tier NAME]: clients and the policies it changes, resolved once the
 * policies are known (they may come later in the file); every problem
 * at its line.
 */
START_TEST(test_tiers)
{
	struct rlg_config *cfg;

	cfg = rlg_t_ok("[tier gold]\n"
	    "clients = 198.51.100.0/24, 203.0.113.7 ,2001:db8::/48\n"
	    "default = limit=600 window=60\nbucket = burst=40\n"
	    "[tier free]\nclients = 192.0.2.0/24\ndefault = exempt\n"
	    "[policy default]\nlimit = 60\n"
	    "[policy bucket]\nalgorithm = token_bucket\nlimit = 10\n");
	ck_assert_uint_eq(cfg->ntiers, 2);
	ck_assert_str_eq(cfg->tiers[0].name, "gold");
	ck_assert_uint_eq(cfg->tiers[0].nclients, 3);
	ck_assert_int_eq(cfg->tiers[0].clients[2].net.prefix_len, 48);
	ck_assert_uint_eq(cfg->tiers[0].nrules, 2);
	ck_assert_uint_eq(cfg->tiers[0].rules[0].policy, 0);
	ck_assert_int_eq(cfg->tiers[0].rules[0].spec.limit, 600);
	ck_assert_int_eq(cfg->tiers[0].rules[0].spec.window_s, 60);
	ck_assert_uint_eq(cfg->tiers[0].rules[1].policy, 1);
	ck_assert_int_eq(cfg->tiers[0].rules[1].spec.burst, 40);
	ck_assert(cfg->tiers[1].rules[0].spec.exempt);
	rlg_config_free(cfg);

	rlg_t_expect("[tier]\n", 1, "t.conf:1: section [tier] has no name "
	    "(expected [tier NAME])\n");
	rlg_t_expect("[tier a b]\n", 1, "t.conf:1: bad tier name \"a b\": at "
	    "most 64 bytes of A-Z a-z 0-9 _ . -\n");
	rlg_t_expect("[tier t]\n", 2,
	    "t.conf:1: [tier t] has no clients: set clients = ADDRESS, CIDR "
	    "or k:HASH, ...\n"
	    "t.conf:1: [tier t] changes no policy: add POLICY = limit=N "
	    "window=SECONDS (or exempt)\n");
	rlg_t_expect("[policy p]\n"                              /* 1 */
	    "[tier t]\n"                                         /* 2 */
	    "clients = 10.0.0.1/8, , k:12, 10.0.0.0/8\n"         /* 3 */
	    "clients = 10.0.0.2\n"                               /* 4 */
	    "p = limit=0\n"                                      /* 5 */
	    "p = limit=5\n"                                      /* 6 */
	    "q = limit=5\n"                                      /* 7 */
	    "p = burst=3\n", 7,                                  /* 8 */
	    "t.conf:3: [tier t] clients: \"10.0.0.1/8\" is no address, "
	    "network (ADDR/LEN, host bits zero) or k:HASH\n"
	    "t.conf:3: [tier t] clients: an empty item (two commas, or one "
	    "at an end)\n"
	    "t.conf:3: [tier t] clients: \"k:12\": an API key's hash is k: "
	    "and 32 hex digits (rlgate --hash-key prints it)\n"
	    "t.conf:4: [tier t] clients: set twice (first on line 3)\n"
	    "t.conf:5: [tier t] p: limit: must be an integer from 1 to "
	    "1000000000 (got \"0\")\n"
	    "t.conf:7: [tier t] q: no [policy q] (a key of a tier is clients "
	    "or a policy's name)\n"
	    "t.conf:8: [tier t] p: set twice (first on line 6)\n");
	/* p set twice: line 5 after the good line 4 */
	rlg_t_expect("[policy p]\n[tier t]\nclients = 10.0.0.1\n"
	    "p = limit=5\np = burst=3\n", 1,
	    "t.conf:5: [tier t] p: set twice (first on line 4)\n");
	/* a global policy: a tier exempts from it, never splits it */
	rlg_t_expect("[policy p]\nkey = global\n[tier t]\nclients = 10.0.0.1\n"
	    "p = limit=5\n", 1,
	    "t.conf:5: [tier t] p: [policy p] is keyed global, one bucket for "
	    "every client: a tier may exempt clients from it, not give them a "
	    "limit of their own in it\n");
	rlg_config_free(rlg_t_ok("[policy p]\nkey = global\n[tier t]\n"
	    "clients = 10.0.0.1\np = exempt\n"));
	rlg_t_expect("[policy p]\n[tier t]\nclients = 10.0.0.1\n"
	    "p = burst=3\n", 1,
	    "t.conf:4: [tier t] p: burst applies only to token_bucket "
	    "([policy p] is fixed_window)\n");
	rlg_t_expect("[policy p]\nalgorithm = sliding_log\n[tier t]\n"
	    "clients = 10.0.0.1\np = limit=100001\n", 1,
	    "t.conf:5: [tier t] p: limit: [policy p] is a sliding_log, which "
	    "keeps one row per request: at most 100000 (got 100001)\n");
	/* a route's cost above the tier's capacity */
	rlg_t_expect("[policy p]\nlimit = 20\n"
	    "[route big]\npath = /b\ncost = 10\npolicies = p\n"
	    "[tier t]\nclients = 10.0.0.1\np = limit=5\n", 1,
	    "t.conf:9: [tier t] p: the tier's limit (5) is below the cost of "
	    "[route big] (10): no request of the route by the tier's "
	    "clients could ever be admitted\n");
	/* a header cost: its cost_max, what an unbelieved request costs */
	rlg_t_expect("[policy p]\nlimit = 20\n"
	    "[client]\ntrusted_proxies = 10.9.0.1\n"
	    "[route h]\npath = /h\ncost = header:X-Cost\ncost_max = 8\n"
	    "policies = p\n"
	    "[tier t]\nclients = 10.0.0.1\np = limit=5\n", 1,
	    "t.conf:12: [tier t] p: the tier's limit (5) is below the "
	    "cost_max of [route h] (8): no costliest request of the route "
	    "by the tier's clients could ever be admitted\n");
	/* warnings: an API key beside an address key, a host of a /64 */
	{
		char *errs;
		int n;

		errs = rlg_t_load("[policy p]\n[tier t]\nclients = "
		    "2001:db8::1, k:0123456789abcdef0123456789abcdef\n"
		    "p = limit=5\n", &n, &cfg);
		ck_assert_str_eq(errs, "t.conf:3: warning: [tier t] clients: "
		    "2001:db8::1/128 is narrower than [client] ipv6_prefix "
		    "(64): the clients of one /64 share one quota, and the "
		    "tier applies to that quota for this address's requests "
		    "only; name the /64\n"
		    "t.conf:4: warning: [tier t] p: [policy p] is keyed by the "
		    "client's address: the tier's API keys (k:) never match "
		    "it, its addresses do\n");
		ck_assert_int_eq(n, 0);
		ck_assert_uint_eq(cfg->tiers[0].nclients, 2);
		ck_assert(cfg->tiers[0].clients[1].is_key);
		rlg_config_free(cfg);
		free(errs);
	}
}
END_TEST

/* More tiers than RLG_TIERS_MAX: one problem; a repeated one merges. */
START_TEST(test_tiers_max)
{
	char *text = malloc(70 * 64 + 64);
	size_t used = 0;
	int i;

	ck_assert_ptr_nonnull(text);
	used += (size_t)sprintf(text, "[policy p]\n");
	for (i = 0; i < RLG_TIERS_MAX + 2; i++)
		used += (size_t)sprintf(text + used, "[tier t%d]\nclients = "
		    "10.0.0.%d\np = limit=%d\n", i, i, i + 1);
	rlg_t_expect(text, 1, "t.conf:194: too many tiers: [tier t64] would "
	    "be number 65, at most 64 are allowed\n");
	free(text);
}
END_TEST

START_TEST(test_route_cost)
{
	struct rlg_config *cfg;

	cfg = rlg_t_ok_warned("[policy p]\nlimit = 12\n"
	    "[route plain]\npath = /a\npolicies = p\n"
	    "[route big]\npath = /b\ncost = 12\npolicies = p\n"
	    "[route free]\npath = /c\ncost = 1000000000\npolicies = none\n", 1);
	ck_assert_int_eq(cfg->routes[0].cost, 1);
	ck_assert_int_eq(cfg->routes[1].cost, 12);
	ck_assert_int_eq(cfg->routes[2].cost, RLG_COST_MAX);
	rlg_config_free(cfg);

	/* The burst of a token bucket, above its limit. */
	cfg = rlg_t_ok_warned("[policy tb]\nalgorithm = token_bucket\nlimit = 2\n"
	    "burst = 30\n[route r]\npath = /r\npolicies = tb\ncost = 30\n", 1);
	ck_assert_int_eq(cfg->routes[0].cost, 30);
	rlg_config_free(cfg);

	rlg_t_expect("[route r]\npath = /r\npolicies = default\ncost = 0\n", 1,
	    "t.conf:4: [route r] cost: must be an integer from 1 to "
	    "1000000000, or header:NAME (got \"0\")\n");
	rlg_t_expect("[route r]\npath = /r\npolicies = default\n"
	    "cost = 1000000001\n", 1,
	    "t.conf:4: [route r] cost: must be an integer from 1 to "
	    "1000000000, or header:NAME (got \"1000000001\")\n");
	rlg_t_expect("[route r]\npath = /r\npolicies = default\ncost = -2\n", 1,
	    "t.conf:4: [route r] cost: must be an integer from 1 to "
	    "1000000000, or header:NAME (got \"-2\")\n");

	/* Above a policy's capacity: each policy it exceeds, named. */
	rlg_t_expect(
	    "[policy small]\nlimit = 4\n"                       /* 1-2 */
	    "[policy big]\nlimit = 100\n"                       /* 3-4 */
	    "[policy tb]\nalgorithm = token_bucket\n"           /* 5-6 */
	    "limit = 50\nburst = 3\n"                           /* 7-8 */
	    "[route r]\npath = /r\n"                            /* 9-10 */
	    "policies = small, big, tb\n"                       /* 11 */
	    "cost = 5\n", 2,                                    /* 12 */
	    "t.conf:12: [route r] cost: 5 is above the limit of [policy "
	    "small] (4): no request of the route could ever be admitted\n"
	    "t.conf:12: [route r] cost: 5 is above the burst of [policy "
	    "tb] (3): no request of the route could ever be admitted\n");
	/* The policy may come after the route. */
	rlg_t_expect("[route r]\npath = /r\ncost = 61\npolicies = default\n"
	    "[policy default]\n", 1,
	    "t.conf:3: [route r] cost: 61 is above the limit of [policy "
	    "default] (60): no request of the route could ever be "
	    "admitted\n");
}
END_TEST

/*
 * cost = header:NAME: the name kept, cost_max required and held to every
 * policy's capacity at its own line; cost_max without a header cost, a
 * bad name, an empty one.
 */
START_TEST(test_route_cost_header)
{
	struct rlg_config *cfg;

	cfg = rlg_t_ok_warned("[policy p]\nlimit = 12\n"
	    "[policy tb]\nalgorithm = token_bucket\nlimit = 2\nburst = 10\n"
	    "[route h]\npath = /h\npolicies = p, tb\ncost = header:X-Cost\n"
	    "cost_max = 10\n"
	    "[route fixed]\npath = /f\npolicies = p\ncost = 3\n", 1);
	ck_assert_str_eq(cfg->routes[0].cost_header, "X-Cost");
	ck_assert_int_eq(cfg->routes[0].cost_max, 10);
	ck_assert_int_eq(cfg->routes[0].cost, 1);
	ck_assert_ptr_null(cfg->routes[1].cost_header);
	ck_assert_int_eq(cfg->routes[1].cost_max, 0);
	ck_assert_int_eq(cfg->routes[1].cost, 3);
	rlg_config_free(cfg);

	/* Required with a header cost, at the cost line. */
	rlg_t_expect("[route r]\npath = /r\npolicies = default\n"
	    "cost = header:X-Cost\n", 1,
	    "t.conf:4: [route r] cost: header:X-Cost needs cost_max = N, the "
	    "most one request may cost (and what one costs whose header is "
	    "not believed)\n");
	/* A bad cost_max is reported once, as a value. */
	rlg_t_expect("[route r]\npath = /r\npolicies = default\n"
	    "cost = header:X-Cost\ncost_max = 0\n", 1,
	    "t.conf:5: [route r] cost_max: must be an integer from 1 to "
	    "1000000000 (got \"0\")\n");
	/* Bounded by the capacity of each policy, at the cost_max line. */
	rlg_t_expect("[policy small]\nlimit = 4\n"                /* 1-2 */
	    "[policy tb]\nalgorithm = token_bucket\nburst = 3\n"  /* 3-5 */
	    "[route r]\npath = /r\npolicies = small, tb\n"       /* 6-8 */
	    "cost_max = 4\ncost = header:X-Cost\n", 1,            /* 9-10 */
	    "t.conf:9: [route r] cost_max: 4 is above the burst of [policy "
	    "tb] (3): a request that costs it could never be admitted\n");
	/* Without a header cost it bounds nothing: a mistake. */
	rlg_t_expect("[route r]\npath = /r\npolicies = default\n"
	    "cost_max = 5\n", 1,
	    "t.conf:4: [route r] cost_max: only with cost = header:NAME (the "
	    "cost is fixed: 1)\n");
	rlg_t_expect("[route r]\npath = /r\npolicies = default\n"
	    "cost = 2\ncost_max = 5\n", 1,
	    "t.conf:5: [route r] cost_max: only with cost = header:NAME (the "
	    "cost is fixed: 2)\n");
	/* ... but not on top of a bad cost line. */
	rlg_t_expect("[route r]\npath = /r\npolicies = default\n"
	    "cost = header:\ncost_max = 5\n", 1,
	    "t.conf:4: [route r] cost: header:NAME needs a name (got "
	    "\"header:\")\n");
	rlg_t_expect("[route r]\npath = /r\npolicies = default\n"
	    "cost = header:X Cost\ncost_max = 5\n", 1,
	    "t.conf:4: [route r] cost: " RLG_T_TOKEN " (got \"X Cost\")\n");
}
END_TEST

START_TEST(test_bad_route_value)
{
	const struct rlg_t_bad *b = &rlg_t_bad_route_values[_i];
	char *text, *want;

	/* The keys a route needs, unless it is the one under test. */
	text = rlg_t_fmt("[route r]\n%s = %s\n%s%s", b->key, b->value,
	    strcmp(b->key, "path") != 0 ? "path = /p\n" : "",
	    strcmp(b->key, "policies") != 0 ? "policies = default\n" : "");
	want = rlg_t_fmt("t.conf:2: %s\n", b->msg);
	rlg_t_expect(text, 1, want);
	free(want);
	free(text);
}
END_TEST

START_TEST(test_route_errors)
{
	char *methods, *text, *want;

	/* Missing keys at the (first) header; unknown policies at the
	 * policies line, one problem per name. */
	rlg_t_expect(
	    "[policy a]\n"                  /* 1 */
	    "[route nopath]\n"              /* 2 */
	    "policies = a\n"                /* 3 */
	    "[route nopolicies]\n"          /* 4 */
	    "path = /x\n"                   /* 5 */
	    "[route nothing]\n"             /* 6 */
	    "[route unknown]\n"             /* 7 */
	    "path = /u\n"                   /* 8 */
	    "policies = a, nope, b\n"       /* 9 */
	    "[route nopath]\n"              /* 10 */
	    "methods = GET\n"               /* 11 */
	    "[route]\n"                     /* 12 */
	    "[route a/b]\n"                 /* 13 */
	    "path = /ignored\n"             /* 14 */
	    "[route ok]\n"                  /* 15 */
	    "path = /ok\n"                  /* 16 */
	    "policies = a\n"                /* 17 */
	    "methods = GET\n"               /* 18 */
	    "methods = POST\n",             /* 19 */
	    9,
	    "t.conf:2: [route nopath] has no path: set path = /PATH "
	    "(or /PREFIX* for a prefix)\n"
	    "t.conf:4: [route nopolicies] has no policies: set policies = "
	    "NAME, ... (or policies = none: not limited)\n"
	    "t.conf:6: [route nothing] has no path: set path = /PATH "
	    "(or /PREFIX* for a prefix)\n"
	    "t.conf:6: [route nothing] has no policies: set policies = "
	    "NAME, ... (or policies = none: not limited)\n"
	    "t.conf:9: [route unknown] policies: no [policy nope]\n"
	    "t.conf:9: [route unknown] policies: no [policy b]\n"
	    RLG_T_AGAIN("[route nopath]", "10", "2")
	    "t.conf:12: section [route] has no name (expected [route NAME])\n"
	    "t.conf:13: bad route name \"a/b\": only A-Z a-z 0-9 _ . - are "
	    "allowed\n"
	    "t.conf:19: [route ok] methods: set twice (first on line 18)\n");

	/* A bad path or policies counts as set: no "has no" on top. */
	rlg_t_expect("[route r]\npath = x\npolicies = ,\n", 2,
	    "t.conf:2: [route r] path: must start with \"/\" (got \"x\")\n"
	    "t.conf:3: [route r] policies: " RLG_T_EMPTY_ITEM
	    " (got \",\")\n");

	/* 17 methods. */
	methods = rlg_t_methods(RLG_ROUTE_METHODS_MAX + 1);
	text = rlg_t_fmt("[route r]\npath = /\npolicies = default\n"
	    "methods = %s\n", methods);
	want = rlg_t_fmt("t.conf:4: [route r] methods: at most 16 methods "
	    "(got 17)\n");
	rlg_t_expect(text, 1, want);
	free(want);
	free(text);
	free(methods);

	/* A long route name. */
	rlg_t_expect("[route "
	    "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr]"
	    "\n", 1,
	    "t.conf:1: bad route name \""
	    "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
	    "\": at most 64 bytes (got 65)\n");
	/* Route keys belong to routes. */
	rlg_t_expect("[policy a]\nmethods = GET\n[route r]\npath = /\n"
	    "policies = a\nlimit = 5\n", 2,
	    "t.conf:2: [policy a] unknown key \"methods\": "
	    "it belongs in [route NAME]\n"
	    "t.conf:6: [route r] unknown key \"limit\": "
	    "it belongs in [policy NAME]\n");
}
END_TEST

/*
 * path_match: normalized (default) keeps the path's spelling that
 * requests are compared with; bytes none; a ';' in a normalized path
 * could never match (requests' params are dropped): at its line.
 */
START_TEST(test_route_path_match)
{
	struct rlg_config *cfg;

	cfg = rlg_t_ok_warned("[route a]\npath = /API/Search/\npolicies = none\n"
	    "[route b]\npath = /Static/*\npolicies = none\n"
	    "[route c]\npath = /X;y\npath_match = bytes\npolicies = none\n"
	    "[route d]\npath = /\npath_match = normalized\n"
	    "policies = none\n", 4);
	ck_assert_int_eq(cfg->routes[0].path_match, RLG_PATH_MATCH_NORMALIZED);
	ck_assert_str_eq(cfg->routes[0].path, "/API/Search/");
	ck_assert_str_eq(cfg->routes[0].match_path, "/api/search");
	ck_assert_str_eq(cfg->routes[1].match_path, "/static/");
	ck_assert_int_eq(cfg->routes[2].path_match, RLG_PATH_MATCH_BYTES);
	ck_assert_ptr_null(cfg->routes[2].match_path);
	ck_assert_str_eq(cfg->routes[3].match_path, "/");
	rlg_config_free(cfg);

	rlg_t_expect("[route r]\npath = /a;b\npolicies = default\n", 1,
	    "t.conf:2: [route r] path: a request's \";params\" are dropped "
	    "before it is compared, so \"/a;b\" could never match (or set "
	    "path_match = bytes)\n");
	rlg_t_expect("[route r]\npath = /a\npolicies = default\n"
	    "path_match = exact\n", 1,
	    "t.conf:4: [route r] path_match: must be one of normalized, "
	    "bytes (got \"exact\")\n");
}
END_TEST

START_TEST(test_routes_max)
{
	struct rlg_config *cfg;
	char *text, *more, *want;

	ck_assert_int_eq(RLG_ROUTES_MAX, 256);
	text = rlg_t_routes(RLG_ROUTES_MAX);
	more = rlg_t_fmt("%s[route r1]\nmethods = GET\n", text);
	cfg = rlg_t_ok_warned(more, 1);
	ck_assert_uint_eq(cfg->nroutes, RLG_ROUTES_MAX);
	ck_assert_str_eq(cfg->routes[0].name, "r1");
	ck_assert_uint_eq(cfg->routes[0].nmethods, 1);
	ck_assert_str_eq(cfg->routes[255].name, "r256");
	ck_assert_str_eq(cfg->routes[255].path, "/256");
	/* No [policy]: the built-in "default" is the default. */
	ck_assert_uint_eq(cfg->ndefault, 1);
	rlg_config_free(cfg);
	free(more);
	free(text);

	/* One more is one problem, on its header; its keys are ignored. */
	text = rlg_t_routes(RLG_ROUTES_MAX + 1);
	more = rlg_t_fmt("%s[route r258]\npath = bad\n", text);
	want = rlg_t_fmt("t.conf:%d: too many routes: [route r257] would be "
	    "number 257, at most 256 are allowed\n", 3 * 256 + 1);
	rlg_t_expect(more, 1, want);
	free(want);
	free(more);
	free(text);
}
END_TEST

START_TEST(test_new_mixed)
{
	/* Every kind of new problem, reported all at once in line order,
	 * those found after the whole file (key_secret, unknown policy,
	 * missing keys) in their place among the others. */
	rlg_t_expect(
	    "[route login]\n"               /* 1 */
	    "path = /login\n"               /* 2 */
	    "policies = strict, gone\n"     /* 3 */
	    "methods = post\n"              /* 4 */
	    "[policy strict]\n"             /* 5 */
	    "key = header:X-Api-Key\n"      /* 6: no key_secret */
	    "mode = dryrun\n"               /* 7 */
	    "exempt = 10.0.0.1/8\n"         /* 8 */
	    "[client]\n"                    /* 9 */
	    "trusted_proxies = ::1, x\n"    /* 10 */
	    "ipv6_prefix = 0\n"             /* 11 */
	    "[headers]\n"                   /* 12 */
	    "report_exempt = maybe\n"       /* 13 */
	    "[log]\n"                       /* 14 */
	    "level = debug\n"               /* 15 */
	    "[route static]\n"              /* 16: no policies */
	    "path = /st*tic\n"              /* 17 */
	    "[policy api]\n"                /* 18 */
	    "key = ip, header:A B\n",       /* 19: bad, so no secret asked */
	    12,
	    "t.conf:3: [route login] policies: no [policy gone]\n"
	    "t.conf:4: [route login] methods: not a method: uppercase "
	    "letters only (got \"post\")\n"
	    "t.conf:6: [policy strict] key: " RLG_T_NEED_SECRET "\n"
	    "t.conf:7: [policy strict] mode: must be one of enforce, dry_run "
	    "(got \"dryrun\")\n"
	    "t.conf:8: [policy strict] exempt: " RLG_T_CIDR
	    " (got \"10.0.0.1/8\")\n"
	    "t.conf:10: [client] trusted_proxies: " RLG_T_CIDR
	    " (got \"x\")\n"
	    "t.conf:11: [client] ipv6_prefix: must be an integer from 1 to "
	    "128 (got \"0\")\n"
	    "t.conf:13: [headers] report_exempt: must be one of yes, no "
	    "(got \"maybe\")\n"
	    "t.conf:15: [log] level: must be one of error, warn, info "
	    "(got \"debug\")\n"
	    "t.conf:16: [route static] has no policies: set policies = "
	    "NAME, ... (or policies = none: not limited)\n"
	    "t.conf:17: [route static] path: \"*\" may only end the path, "
	    "for a prefix match (got \"/st*tic\")\n"
	    "t.conf:19: [policy api] key: " RLG_T_TOKEN " (got \"A B\")\n");
}
END_TEST

/* ---- [store]: the Redis backend ------------------------------------------ */

/* A url that must parse, and what it becomes. */
static const struct {
	const char *url;
	const char *host;          /* NULL: a socket */
	int port;
	const char *socket;
	const char *user;
	const char *password;
	int db;
	const char *described;     /* rlg_store_describe */
} rlg_t_urls[] = {
	{ "redis://127.0.0.1:6379", "127.0.0.1", 6379, NULL, NULL, NULL, 0,
	    "redis 127.0.0.1:6379" },
	{ "redis://localhost", "localhost", 6379, NULL, NULL, NULL, 0,
	    "redis localhost:6379" },
	{ "redis://redis-1.internal_net:1/0", "redis-1.internal_net", 1, NULL,
	    NULL, NULL, 0, "redis redis-1.internal_net:1" },
	{ "redis://h:65535/", "h", 65535, NULL, NULL, NULL, 0,
	    "redis h:65535" },
	{ "redis://h/15", "h", 6379, NULL, NULL, NULL, 15, "redis h:6379/15" },
	{ "redis://h:7000/2147483647", "h", 7000, NULL, NULL, NULL,
	    2147483647, "redis h:7000/2147483647" },
	{ "redis://[::1]:6380/3", "::1", 6380, NULL, NULL, NULL, 3,
	    "redis [::1]:6380/3" },
	{ "redis://[fe80::1%eth0]", "fe80::1%eth0", 6379, NULL, NULL, NULL, 0,
	    "redis [fe80::1%eth0]:6379" },
	{ "redis://:s3cret@10.0.0.5:6380/2", "10.0.0.5", 6380, NULL, NULL,
	    "s3cret", 2, "redis 10.0.0.5:6380/2" },
	{ "redis://alice:pw@h", "h", 6379, NULL, "alice", "pw", 0,
	    "redis h:6379" },
	/* '@', ':' and '/' in a password as they are; %XX decoded. */
	{ "redis://:p@ss:w/rd@h:1/4", "h", 1, NULL, NULL, "p@ss:w/rd", 4,
	    "redis h:1/4" },
	{ "redis://a%3Ab:x%25y%40z@h", "h", 6379, NULL, "a:b", "x%y@z", 0,
	    "redis h:6379" },
	{ "unix:/run/redis/redis.sock", NULL, 6379, "/run/redis/redis.sock",
	    NULL, NULL, 0, "redis unix:/run/redis/redis.sock" },
	{ "unix:///run/redis.sock?db=7", NULL, 6379, "/run/redis.sock", NULL,
	    NULL, 7, "redis unix:/run/redis.sock?db=7" },
	{ "unix:/r.sock?password=a%26b&db=1&user=u", NULL, 6379, "/r.sock",
	    "u", "a&b", 1, "redis unix:/r.sock?db=1" },
};
#define RLG_T_NURLS (sizeof rlg_t_urls / sizeof rlg_t_urls[0])

START_TEST(test_redis_url)
{
	char *text, buf[256];
	struct rlg_config *cfg;

	text = rlg_t_fmt("[store]\nbackend = redis\nurl = %s\n",
	    rlg_t_urls[_i].url);
	cfg = rlg_t_ok(text);
	ck_assert_int_eq(cfg->store.backend, RLG_BACKEND_REDIS);
	if (rlg_t_urls[_i].host != NULL)
		ck_assert_str_eq(cfg->store.redis.host, rlg_t_urls[_i].host);
	else
		ck_assert_ptr_null(cfg->store.redis.host);
	ck_assert_int_eq(cfg->store.redis.port, rlg_t_urls[_i].port);
	if (rlg_t_urls[_i].socket != NULL)
		ck_assert_str_eq(cfg->store.redis.socket,
		    rlg_t_urls[_i].socket);
	else
		ck_assert_ptr_null(cfg->store.redis.socket);
	if (rlg_t_urls[_i].user != NULL)
		ck_assert_str_eq(cfg->store.redis.user, rlg_t_urls[_i].user);
	else
		ck_assert_ptr_null(cfg->store.redis.user);
	if (rlg_t_urls[_i].password != NULL)
		ck_assert_str_eq(cfg->store.redis.password,
		    rlg_t_urls[_i].password);
	else
		ck_assert_ptr_null(cfg->store.redis.password);
	ck_assert_int_eq(cfg->store.redis.db, rlg_t_urls[_i].db);
	ck_assert_str_eq(rlg_store_describe(&cfg->store, buf, sizeof buf),
	    rlg_t_urls[_i].described);
	rlg_config_free(cfg);
	free(text);
}
END_TEST

/*
 * Urls that carry a secret in any shape, valid or not: the userinfo
 * without a ':' (redis://SECRET@h), a user, another scheme or none, a
 * password or user in a query, a password with '&' in it, a misspelt
 * parameter. Each is refused (or, the last ones, accepted), and neither
 * the problem printed nor rlg_store_describe shows a secret ("xyzzy",
 * "plugh").
 */
static const struct {
	const char *url;
	bool valid;
} rlg_t_secret_urls[] = {
	{ "redis://xyzzy@h", false },
	{ "redis://xyzzy@h:99999", false },
	{ "redis://plugh:xyzzy@h:0", false },
	{ "redis://plugh:xy@zzy@h:0", false },
	{ "REDIS://plugh:xyzzy@h", false },
	{ "rediss://xyzzy@h", false },
	{ "http://plugh:xyzzy@h", false },
	{ "xyzzy@h", false },
	{ "plugh:xyzzy@h", false },
	{ "redis:xyzzy@h", false },
	{ "redis://h/0?password=xyzzy", false },
	{ "redis://h?user=plugh&password=xyzzy", false },
	{ "unix://plugh:xyzzy@/p", true },     /* a path "//plugh..." */
	{ "unix:/p?user=plugh", false },
	{ "unix:/p?password=xyzzy&user=plugh&db=x", false },
	{ "unix:/p?password=xyzzy&plugh", false },
	{ "unix:/p?pass=xyzzy", false },
	{ "unix:/p?db=1&passwd=xyzzy", false },
	{ "unix:/p?db=1&user=plugh&password=xyzzy", true },
	{ "unix:/p&password=xyzzy", true },
	{ "redis://plugh:xyzzy@h", true },
	{ "redis+sentinel://plugh:xyzzy@h:1,g/m?db=2", true },
	{ "redis+sentinel://:xyzzy@h/m?password=xyzzy", false },
	{ "redis+sentinel://plugh:xyzzy@h", false },
};
#define RLG_T_NSECRET_URLS \
	(sizeof rlg_t_secret_urls / sizeof rlg_t_secret_urls[0])

START_TEST(test_redis_url_masked)
{
	struct rlg_config *cfg;
	char *text, *errs, buf[512];
	int n;

	text = rlg_t_fmt("[store]\nbackend = redis\nurl = %s\n",
	    rlg_t_secret_urls[_i].url);
	errs = rlg_t_load(text, &n, &cfg);
	if (rlg_t_secret_urls[_i].valid) {
		ck_assert_msg(n == 0, "%s", errs);
		rlg_store_describe(&cfg->store, buf, sizeof buf);
		ck_assert_msg(strstr(buf, "xyzzy") == NULL &&
		    strstr(buf, "plugh") == NULL, "%s", buf);
		rlg_config_free(cfg);
	} else {
		ck_assert_int_eq(n, 1);
		ck_assert_msg(strstr(errs, "[store] url: ") != NULL, "%s", errs);
		ck_assert_msg(strstr(errs, "***") != NULL, "%s", errs);
	}
	ck_assert_msg(strstr(errs, "xyzzy") == NULL &&
	    strstr(errs, "plugh") == NULL, "%s", errs);
	free(errs);
	free(text);
}
END_TEST

/* Every [store] key of the Redis backend, and the defaults. */
START_TEST(test_redis_store)
{
	struct rlg_config *cfg;
	char buf[256];

	cfg = rlg_config_defaults();
	ck_assert_int_eq(cfg->store.backend, RLG_BACKEND_SQLITE);
	ck_assert_int_eq(cfg->store.redis.connect_timeout_ms, 500);
	ck_assert_int_eq(cfg->store.redis.timeout_ms, 500);
	ck_assert_int_eq(cfg->store.redis.clock, RLG_CLOCK_REDIS);
	ck_assert_ptr_null(cfg->store.redis.host);
	ck_assert_ptr_null(cfg->store.redis.socket);
	ck_assert_str_eq(rlg_store_describe(&cfg->store, buf, sizeof buf),
	    "sqlite " RLG_DEFAULT_DB_PATH);
	rlg_config_free(cfg);

	cfg = rlg_t_ok(
	    "[store]\n"
	    "backend = redis\n"
	    "url = redis://:pw@10.1.2.3:6380/5\n"
	    "connect_timeout_ms = 1\n"
	    "timeout_ms = 60000\n"
	    "clock = local\n"
	    "on_error = open\n"
	    "rejection_cache = 0\n"
	    "path = /ignored.db\n"
	    "busy_timeout_ms = 10\n");
	ck_assert_int_eq(cfg->store.backend, RLG_BACKEND_REDIS);
	ck_assert_str_eq(cfg->store.redis.host, "10.1.2.3");
	ck_assert_int_eq(cfg->store.redis.port, 6380);
	ck_assert_str_eq(cfg->store.redis.password, "pw");
	ck_assert_int_eq(cfg->store.redis.db, 5);
	ck_assert_int_eq(cfg->store.redis.connect_timeout_ms, 1);
	ck_assert_int_eq(cfg->store.redis.timeout_ms, 60000);
	ck_assert_int_eq(cfg->store.redis.clock, RLG_CLOCK_LOCAL);
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_OPEN);
	ck_assert_int_eq(cfg->store.rejection_cache, 0);
	/* Never the password. */
	ck_assert_str_eq(rlg_store_describe(&cfg->store, buf, sizeof buf),
	    "redis 10.1.2.3:6380/5");
	rlg_config_free(cfg);

	/* The keys in any order; clock = redis; backend = sqlite alone. */
	cfg = rlg_t_ok("[store]\nclock = redis\nurl = unix:/s\n"
	    "backend = redis\n");
	ck_assert_int_eq(cfg->store.redis.clock, RLG_CLOCK_REDIS);
	ck_assert_str_eq(cfg->store.redis.socket, "/s");
	rlg_config_free(cfg);
	cfg = rlg_t_ok("[store]\nbackend = sqlite\nmax_clients = 5\n");
	ck_assert_int_eq(cfg->store.backend, RLG_BACKEND_SQLITE);
	ck_assert_int_eq(cfg->store.sqlite.max_clients, 5);
	rlg_config_free(cfg);

	ck_assert_str_eq(rlg_store_backend_name(RLG_BACKEND_SQLITE), "sqlite");
	ck_assert_str_eq(rlg_store_backend_name(RLG_BACKEND_REDIS), "redis");
	ck_assert_str_eq(rlg_store_clock_name(RLG_CLOCK_REDIS), "redis");
	ck_assert_str_eq(rlg_store_clock_name(RLG_CLOCK_LOCAL), "local");
}
END_TEST

#define RLG_T_REDIS_ONLY "applies only to backend = redis or redis_cluster"
#define RLG_T_REDIS_CLIENTS "applies to backend = redis only with commit =" \
	" behind (it sizes the host's table): Redis memory is bounded by its" \
	" maxmemory and by the expiry of the keys"

/*
 * The keys of one backend with the other: each on its own line, in line
 * order, with the other problems of the file.
 */
START_TEST(test_redis_store_errors)
{
	struct rlg_config *cfg;

	/* Redis keys without backend = redis. */
	rlg_t_expect(
	    "[store]\n"                                  /* 1 */
	    "url = redis://h:1\n"                        /* 2 */
	    "clock = local\n"                            /* 3 */
	    "[policy default]\n"                         /* 4 */
	    "limit = 0\n"                                /* 5 */
	    "[store]\n"                                  /* 6 */
	    "timeout_ms = 5\n"                           /* 7 */
	    "connect_timeout_ms = 5\n",                  /* 8 */
	    5,
	    "t.conf:2: [store] url: " RLG_T_REDIS_ONLY "\n"
	    "t.conf:3: [store] clock: " RLG_T_REDIS_ONLY "\n"
	    "t.conf:5: [policy default] limit: " RLG_T_LIMIT_RANGE
	    " (got \"0\")\n"
	    "t.conf:7: [store] timeout_ms: " RLG_T_REDIS_ONLY "\n"
	    "t.conf:8: [store] connect_timeout_ms: " RLG_T_REDIS_ONLY "\n");
	rlg_t_expect(
	    "[store]\nbackend = sqlite\nurl = unix:/s\n", 1,
	    "t.conf:3: [store] url: " RLG_T_REDIS_ONLY "\n");
	/* Redis without a url; with max_clients. */
	rlg_t_expect(
	    "[store]\nmax_clients = 10\non_error = open\nbackend = redis\n", 2,
	    "t.conf:2: [store] max_clients: " RLG_T_REDIS_CLIENTS "\n"
	    "t.conf:4: [store] backend: redis needs [store] url = "
	    "redis://HOST:PORT or unix:/PATH\n");
	/* The SQLite store's durability means nothing to Redis; group
	 * commit batches a server's steps, and a cluster's. */
	rlg_t_expect(
	    "[store]\nbackend = redis\nurl = redis://h\nsynchronous = full\n"
	    "group_commit = on\n", 1,
	    "t.conf:4: [store] synchronous: applies only to backend = sqlite:"
	    " Redis durability is its own appendfsync\n");
	cfg = rlg_t_ok("[store]\nbackend = redis_cluster\nurl = redis://h\n"
	    "group_commit = on\n");
	ck_assert_int_eq(cfg->store.group_commit, RLG_GROUP_ON);
	rlg_config_free(cfg);
	/* A bad url is reported for itself only. */
	rlg_t_expect(
	    "[store]\nbackend = redis\nurl = redis://h:0\n", 1,
	    "t.conf:3: [store] url: port must be an integer from 1 to 65535 "
	    "(got \"redis://h:0\")\n");
	/* A bad backend: the others are not checked against it. */
	rlg_t_expect(
	    "[store]\nbackend = memcached\nurl = redis://h\nmax_clients = 1\n",
	    1,
	    "t.conf:2: [store] backend: " RLG_T_BACKENDS
	    " (got \"memcached\")\n");
	/* Set twice. */
	rlg_t_expect(
	    "[store]\nbackend = redis\nurl = redis://a\nurl = redis://b\n", 1,
	    "t.conf:4: [store] url: set twice (first on line 3)\n");
}
END_TEST

/* rlg_redis_url_parse itself: the reason, and sc untouched on failure. */
START_TEST(test_redis_url_api)
{
	struct rlg_store_config sc;
	char why[256];

	memset(&sc, 0, sizeof sc);
	ck_assert_int_eq(rlg_redis_url_parse(&sc.redis, "redis://:pw@h:2/3", why,
	    sizeof why), 0);
	ck_assert_int_eq(rlg_redis_url_parse(&sc.redis, "redis://x:99999", why,
	    sizeof why), -1);
	ck_assert_str_eq(why, "port must be an integer from 1 to 65535");
	ck_assert_str_eq(sc.redis.host, "h");
	ck_assert_str_eq(sc.redis.password, "pw");
	ck_assert_int_eq(sc.redis.port, 2);
	ck_assert_int_eq(sc.redis.db, 3);
	/* Replaced as a whole: no password left from the last url. */
	ck_assert_int_eq(rlg_redis_url_parse(&sc.redis, "unix:/s", why,
	    sizeof why), 0);
	ck_assert_ptr_null(sc.redis.host);
	ck_assert_ptr_null(sc.redis.password);
	ck_assert_str_eq(sc.redis.socket, "/s");
	ck_assert_int_eq(sc.redis.db, 0);
	free(sc.redis.socket);
}
END_TEST

/* ---- [store]: a Redis Cluster ------------------------------------------- */

/* A cluster url that must parse: its seed nodes, and the description. */
static const struct {
	const char *url;
	const char *seeds;         /* "HOST:PORT HOST:PORT ..." */
	const char *password;
	const char *described;
} rlg_t_cluster_urls[] = {
	{ "redis://127.0.0.1:7000", "127.0.0.1:7000", NULL,
	    "redis_cluster 127.0.0.1:7000" },
	{ "redis://a:7000,b:7001,c", "a:7000 b:7001 c:6379", NULL,
	    "redis_cluster a:7000,b:7001,c:6379" },
	{ "redis://:pw@10.0.0.1:7000,10.0.0.2:7000/", "10.0.0.1:7000"
	    " 10.0.0.2:7000", "pw",
	    "redis_cluster 10.0.0.1:7000,10.0.0.2:7000" },
	/* The password ends at the last '@': a ',' in it is its own. */
	{ "redis://u:p,w@h1:1,[::1]:2/0", "h1:1 ::1:2", "p,w",
	    "redis_cluster h1:1,[::1]:2" },
	{ "redis://[fe80::1%eth0]:7001,x_y.z-1:65535", "fe80::1%eth0:7001"
	    " x_y.z-1:65535", NULL,
	    "redis_cluster [fe80::1%eth0]:7001,x_y.z-1:65535" },
};
#define RLG_T_NCLUSTER_URLS \
	(sizeof rlg_t_cluster_urls / sizeof rlg_t_cluster_urls[0])

START_TEST(test_redis_cluster_url)
{
	char *text, buf[256], seeds[256];
	struct rlg_config *cfg;
	size_t i, len;

	/* backend after url: the keys come in any order. */
	text = rlg_t_fmt("[store]\nurl = %s\nbackend = redis_cluster\n",
	    rlg_t_cluster_urls[_i].url);
	cfg = rlg_t_ok(text);
	/* The Redis store, in its cluster mode. */
	ck_assert_int_eq(cfg->store.backend, RLG_BACKEND_REDIS);
	ck_assert(cfg->store.redis.cluster);
	len = (size_t)snprintf(seeds, sizeof seeds, "%s:%d",
	    cfg->store.redis.host, cfg->store.redis.port);
	for (i = 0; i < cfg->store.redis.nseeds; i++)
		len += (size_t)snprintf(seeds + len, sizeof seeds - len,
		    " %s:%d", cfg->store.redis.seeds[i].host,
		    cfg->store.redis.seeds[i].port);
	ck_assert_str_eq(seeds, rlg_t_cluster_urls[_i].seeds);
	if (rlg_t_cluster_urls[_i].password != NULL)
		ck_assert_str_eq(cfg->store.redis.password,
		    rlg_t_cluster_urls[_i].password);
	else
		ck_assert_ptr_null(cfg->store.redis.password);
	ck_assert_int_eq(cfg->store.redis.db, 0);
	ck_assert_ptr_null(cfg->store.redis.socket);
	ck_assert_str_eq(rlg_store_describe(&cfg->store, buf, sizeof buf),
	    rlg_t_cluster_urls[_i].described);
	rlg_config_free(cfg);
	free(text);

	/* The same url with backend = redis: one server, a list refused. */
	text = rlg_t_fmt("[store]\nbackend = redis\nurl = %s\n",
	    rlg_t_cluster_urls[_i].url);
	if (strchr(rlg_t_cluster_urls[_i].seeds, ' ') == NULL) {
		cfg = rlg_t_ok(text);
		ck_assert(!cfg->store.redis.cluster);
		ck_assert_uint_eq(cfg->store.redis.nseeds, 0);
		rlg_config_free(cfg);
	} else {
		rlg_t_expect(text, 1, "t.conf:3: [store] url: several "
		    "HOST:PORT are the seed nodes of a Redis Cluster: set "
		    "backend = redis_cluster, or name one server\n");
	}
	free(text);
}
END_TEST

/*
 * A url of max HOST:PORT (head, the list, tail: on line 3 of the file)
 * loads, the last one as the last seed; one more is refused, file:line.
 */
static void
rlg_t_list_bound(const char *head, const char *tail, size_t max)
{
	struct rlg_config *cfg;
	char *list, *text, *errs, want[96], last[16];
	size_t i, len;
	int n;

	list = malloc(16 * (max + 1) + 1);
	ck_assert_ptr_nonnull(list);
	for (i = 0, len = 0; i < max; i++)
		len += (size_t)sprintf(list + len, "%sn%zu:%zu", i > 0 ? "," :
		    "", i, 7000 + i);
	text = rlg_t_fmt("%s%s%s\n", head, list, tail);
	cfg = rlg_t_ok(text);
	ck_assert_uint_eq(cfg->store.redis.nseeds, max - 1);
	snprintf(last, sizeof last, "n%zu", max - 1);
	ck_assert_str_eq(cfg->store.redis.seeds[max - 2].host, last);
	rlg_config_free(cfg);
	free(text);
	sprintf(list + len, ",n:1");
	text = rlg_t_fmt("%s%s%s\n", head, list, tail);
	errs = rlg_t_load(text, &n, &cfg);
	ck_assert_int_eq(n, 1);
	ck_assert_ptr_null(cfg);
	snprintf(want, sizeof want, "t.conf:3: [store] url: more than %zu "
	    "HOST:PORT in the list (got", max);
	ck_assert_msg(strstr(errs, want) == errs, "%s", errs);
	free(errs);
	free(text);
	free(list);
}

/* What a cluster url may not be, each with its line; the password masked. */
START_TEST(test_redis_cluster_errors)
{
	rlg_t_expect(
	    "[store]\n"                                  /* 1 */
	    "backend = redis_cluster\n"                  /* 2 */
	    "url = unix:/run/redis.sock\n"               /* 3 */
	    "max_clients = 5\n",                         /* 4 */
	    2,
	    "t.conf:3: [store] url: backend = redis_cluster needs "
	    "redis://HOST:PORT[,HOST:PORT...]: cluster nodes talk TCP\n"
	    "t.conf:4: [store] max_clients: " RLG_T_REDIS_CLIENTS "\n");
	rlg_t_expect(
	    "[store]\nurl = redis://:pw@a:1,b:2/3\nbackend = redis_cluster\n",
	    1,
	    "t.conf:2: [store] url: a Redis Cluster has database 0 only "
	    "(got /3)\n");
	rlg_t_expect(
	    "[store]\nbackend = redis_cluster\n", 1,
	    "t.conf:2: [store] backend: redis_cluster needs [store] url = "
	    "redis://HOST:PORT[,HOST:PORT...] (seed nodes)\n");
	rlg_t_expect(
	    "[store]\nbackend = redis_cluster\nurl = redis://:pw@a:1,,b:2\n",
	    1,
	    "t.conf:3: [store] url: empty HOST:PORT in the list "
	    "(got \"redis://***@a:1,,b:2\")\n");
	rlg_t_expect(
	    "[store]\nbackend = redis_cluster\nurl = redis://a:1,\n", 1,
	    "t.conf:3: [store] url: empty HOST:PORT in the list "
	    "(got \"redis://a:1,\")\n");
	rlg_t_expect(
	    "[store]\nbackend = redis_cluster\nurl = redis://a:1,b:0\n", 1,
	    "t.conf:3: [store] url: port must be an integer from 1 to 65535 "
	    "(got \"redis://a:1,b:0\")\n");
	rlg_t_expect(
	    "[store]\nbackend = redis_cluster\nurl = redis://a:1,b!:2\n", 1,
	    "t.conf:3: [store] url: bad host: a name of A-Z a-z 0-9 . - _, an "
	    "IPv4 address, or an IPv6 address in brackets "
	    "(got \"redis://a:1,b!:2\")\n");
	rlg_t_expect(
	    "[store]\nbackend = redis_cluster\nurl = redis://a:1,[::1:2\n",
	    1,
	    "t.conf:3: [store] url: bad IPv6 address in brackets "
	    "(got \"redis://a:1,[::1:2\")\n");
	rlg_t_expect(
	    "[store]\nbackend = redis_cluster\nurl = redis://a:1,b:2x\n", 1,
	    "t.conf:3: [store] url: port must be an integer from 1 to 65535 "
	    "(got \"redis://a:1,b:2x\")\n");

	/* RLG_REDIS_SEEDS_MAX seed nodes, and one more. */
	rlg_t_list_bound("[store]\nbackend = redis_cluster\nurl = redis://",
	    "", RLG_REDIS_SEEDS_MAX);
}
END_TEST

/* rlg_redis_url_parse replaces a list as a whole; sc kept on failure. */
START_TEST(test_redis_cluster_url_api)
{
	struct rlg_store_config sc;
	char why[256];

	memset(&sc, 0, sizeof sc);
	ck_assert_int_eq(rlg_redis_url_parse(&sc.redis, "redis://a:1,b:2,c:3",
	    why, sizeof why), 0);
	ck_assert_uint_eq(sc.redis.nseeds, 2);
	ck_assert_str_eq(sc.redis.seeds[1].host, "c");
	ck_assert_int_eq(sc.redis.seeds[1].port, 3);
	ck_assert_int_eq(rlg_redis_url_parse(&sc.redis, "redis://x:1,y:0", why,
	    sizeof why), -1);
	ck_assert_str_eq(why, "port must be an integer from 1 to 65535");
	ck_assert_uint_eq(sc.redis.nseeds, 2);
	ck_assert_str_eq(sc.redis.host, "a");
	ck_assert_int_eq(rlg_redis_url_parse(&sc.redis, "redis://d", why,
	    sizeof why), 0);
	ck_assert_uint_eq(sc.redis.nseeds, 0);
	ck_assert_ptr_null(sc.redis.seeds);
	ck_assert_str_eq(sc.redis.host, "d");
	ck_assert_int_eq(sc.redis.port, 6379);
	free(sc.redis.host);
}
END_TEST

/*
 * redis+sentinel://: the sentinels (26379 by default) in host, port and
 * seeds, the master's name, its password and database; described with
 * the master's name; and each way the url is refused, file:line.
 */
START_TEST(test_redis_sentinel_url)
{
	struct rlg_config *cfg;
	char buf[512];

	cfg = rlg_t_ok("[store]\nbackend = redis\nurl = redis+sentinel://"
	    ":s3cret@10.0.0.1:26380,s2,[::1]:7/mymaster?db=3\n");
	ck_assert_str_eq(cfg->store.redis.master, "mymaster");
	ck_assert_str_eq(cfg->store.redis.host, "10.0.0.1");
	ck_assert_int_eq(cfg->store.redis.port, 26380);
	ck_assert_uint_eq(cfg->store.redis.nseeds, 2);
	ck_assert_str_eq(cfg->store.redis.seeds[0].host, "s2");
	ck_assert_int_eq(cfg->store.redis.seeds[0].port, 26379);
	ck_assert_str_eq(cfg->store.redis.seeds[1].host, "::1");
	ck_assert_int_eq(cfg->store.redis.seeds[1].port, 7);
	ck_assert_str_eq(cfg->store.redis.password, "s3cret");
	ck_assert_int_eq(cfg->store.redis.db, 3);
	ck_assert_str_eq(rlg_store_describe(&cfg->store, buf, sizeof buf),
	    "redis sentinel master mymaster via 10.0.0.1:26380,s2:26379,"
	    "[::1]:7/3");
	rlg_config_free(cfg);
	cfg = rlg_t_ok("[store]\nbackend = redis\n"
	    "url = redis+sentinel://h/m.a-s_1\n");
	ck_assert_str_eq(cfg->store.redis.master, "m.a-s_1");
	ck_assert_int_eq(cfg->store.redis.port, 26379);
	ck_assert_int_eq(cfg->store.redis.db, 0);
	rlg_config_free(cfg);

	rlg_t_expect("[store]\nurl = redis+sentinel://h:1\n", 1,
	    "t.conf:2: [store] url: no master name (redis+sentinel://"
	    "HOST:PORT[,HOST:PORT...]/MASTERNAME) "
	    "(got \"redis+sentinel://h:1\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel://:pw@h:1/\n", 1,
	    "t.conf:2: [store] url: no master name (redis+sentinel://"
	    "HOST:PORT[,HOST:PORT...]/MASTERNAME) "
	    "(got \"redis+sentinel://***@h:1/\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel://h:1/?db=1\n", 1,
	    "t.conf:2: [store] url: no master name (redis+sentinel://"
	    "HOST:PORT[,HOST:PORT...]/MASTERNAME) "
	    "(got \"redis+sentinel://h:1/?db=1\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel://h:1/my/master\n", 1,
	    "t.conf:2: [store] url: bad master name: 1 to 64 of A-Z a-z 0-9 "
	    ". - _ (got \"redis+sentinel://h:1/my/master\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel://h:1/m?db=x\n", 1,
	    "t.conf:2: [store] url: after the master name only ?db=N, N an "
	    "integer from 0 to 2147483647 "
	    "(got \"redis+sentinel://h:1/m?db=x\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel://h:1/m?password=x\n", 1,
	    "t.conf:2: [store] url: after the master name only ?db=N, N an "
	    "integer from 0 to 2147483647 "
	    "(got \"redis+sentinel://h:1/m?password=***\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel://h:0/m\n", 1,
	    "t.conf:2: [store] url: " RLG_T_PORT
	    " (got \"redis+sentinel://h:0/m\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel://h:1,h!:2/m\n", 1,
	    "t.conf:2: [store] url: " RLG_T_HOST
	    " (got \"redis+sentinel://h:1,h!:2/m\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel://h:1,,g:2/m\n", 1,
	    "t.conf:2: [store] url: empty HOST:PORT in the list "
	    "(got \"redis+sentinel://h:1,,g:2/m\")\n");
	rlg_t_expect("[store]\nurl = redis+sentinel:///m\n", 1,
	    "t.conf:2: [store] url: no host (got \"redis+sentinel:///m\")\n");
	rlg_t_expect("[store]\nbackend = redis_cluster\n"
	    "url = redis+sentinel://h:1/m\n", 1,
	    "t.conf:3: [store] url: redis+sentinel:// names one master for "
	    "backend = redis, not a cluster\n");

	/* RLG_REDIS_SENTINELS_MAX sentinels, and one more. */
	rlg_t_list_bound("[store]\nbackend = redis\n"
	    "url = redis+sentinel://", "/m", RLG_REDIS_SENTINELS_MAX);
}
END_TEST

/* ---- table -------------------------------------------------------------- */

/* The struct that o's section fills, in cfg (the first policy for
 * [policy NAME], the first route for [route NAME]). */
static char *
rlg_t_base(struct rlg_config *cfg, const struct rlg_option *o)
{
	if (strcmp(o->section, "store") == 0)
		return (char *)&cfg->store;
	if (strcmp(o->section, "client") == 0)
		return (char *)&cfg->client;
	if (strcmp(o->section, "admin") == 0)
		return (char *)&cfg->admin;
	if (strcmp(o->section, "policy") == 0)
		return (char *)&cfg->policies[0];
	if (strcmp(o->section, "route") == 0)
		return (char *)&cfg->routes[0];
	return (char *)cfg;
}

/* The header of o's section, as a file would write it. */
static const char *
rlg_t_header(const struct rlg_option *o)
{
	if (strcmp(o->section, "policy") == 0)
		return "[policy p]";
	if (strcmp(o->section, "route") == 0)
		return "[route r]";
	return strcmp(o->section, "store") == 0 ? "[store]" :
	    strcmp(o->section, "headers") == 0 ? "[headers]" :
	    strcmp(o->section, "response") == 0 ? "[response]" :
	    strcmp(o->section, "client") == 0 ? "[client]" :
	    strcmp(o->section, "admin") == 0 ? "[admin]" :
	    strcmp(o->section, "fastcgi") == 0 ? "[fastcgi]" : "[log]";
}

/* Every row is whole: a known section, a name, a default, a doc line,
 * its type's data; no key twice. */
START_TEST(test_option_rows)
{
	static const char *const sections[] = { "store", "headers",
	    "response", "client", "log", "admin", "policy", "route",
	    "fastcgi" };
	const struct rlg_option *opts, *o;
	size_t n, i, j, k;

	opts = rlg_config_options(&n);
	ck_assert_uint_ge(n, 32);
	for (i = 0; i < n; i++) {
		o = &opts[i];
		for (k = 0; k < sizeof sections / sizeof sections[0]; k++)
			if (strcmp(o->section, sections[k]) == 0)
				break;
		ck_assert_msg(k < sizeof sections / sizeof sections[0],
		    "row %zu: section %s", i, o->section);
		ck_assert_ptr_nonnull(o->name);
		ck_assert_msg(o->def != NULL && *o->def != '\0' &&
		    o->doc != NULL && *o->doc != '\0' && strlen(o->doc) < 70,
		    "%s %s: a default and one short line of doc", o->section,
		    o->name);
		ck_assert_msg(o->type != RLG_OPT_ENUM || o->words != NULL,
		    "%s: no words", o->name);
		ck_assert_msg(o->type != RLG_OPT_COMPOUND || o->set != NULL,
		    "%s: no setter", o->name);
		ck_assert_msg(o->type != RLG_OPT_INT || (o->min <= o->max &&
		    (o->size == sizeof(int) || o->size == sizeof(int64_t))),
		    "%s: range or size", o->name);
		for (j = 0; j < i; j++)
			ck_assert_msg(strcmp(opts[j].section, o->section) != 0 ||
			    strcmp(opts[j].name, o->name) != 0,
			    "%s %s twice", o->section, o->name);
	}
}
END_TEST

/*
 * The default a row writes is what the key is when it is not set: each
 * integer and word key set to its default gives the same field as a file
 * without it (in a file where the key is allowed at all). burst's default
 * is "the policy's limit"; the store path is the configured one.
 */
START_TEST(test_option_defaults)
{
	const struct rlg_option *opts, *o;
	struct rlg_config *with, *without;
	char *a, *b, *path;
	const char *ctx, *tail;
	size_t n, i, checked = 0;

	opts = rlg_config_options(&n);
	for (i = 0; i < n; i++) {
		o = &opts[i];
		if ((o->type != RLG_OPT_INT && o->type != RLG_OPT_ENUM) ||
		    strcmp(o->name, "burst") == 0 ||
		    strcmp(o->name, "delay") == 0 ||
		    strcmp(o->name, "cost_max") == 0)
			continue;
		ctx = "";
		if (strcmp(o->name, "connect_timeout_ms") == 0 ||
		    strcmp(o->name, "timeout_ms") == 0 ||
		    strcmp(o->name, "clock") == 0)
			ctx = "[store]\nbackend = redis\nurl = redis://h\n";
		else if (strcmp(o->name, "new_keys_per_ip") == 0)
			ctx = "[client]\nkey_secret = 0123456789abcdef\n";
		else if (strcmp(o->name, "flush_ms") == 0)
			ctx = "[store]\ncommit = behind\n";
		else if (strcmp(o->name, "sync_ms") == 0)
			ctx = "[store]\nbackend = redis\nurl = redis://h\n"
			    "commit = behind\n";
		/* A route needs its path and policies; new_keys_per_ip, a
		 * header key. */
		tail = strcmp(o->section, "route") == 0 ?
		    "path = /r\npolicies = default\n" :
		    strcmp(o->name, "new_keys_per_ip") == 0 ?
		    "key = header:X\n" : "";
		a = rlg_t_fmt("%s%s\n%s = %s\n%s", ctx, rlg_t_header(o),
		    o->name, o->def, tail);
		b = rlg_t_fmt("%s%s\n%s", ctx, rlg_t_header(o), tail);
		with = rlg_t_ok(a);
		without = rlg_t_ok(b);
		ck_assert_msg(memcmp(rlg_t_base(with, o) + o->offset,
		    rlg_t_base(without, o) + o->offset, o->size) == 0,
		    "%s %s: the default \"%s\" is not what it is unset",
		    o->section, o->name, o->def);
		rlg_config_free(with);
		rlg_config_free(without);
		free(a);
		free(b);
		checked++;
	}
	ck_assert_uint_ge(checked, 20);
	/* "LOCALSTATEDIR/..." as configured. */
	for (i = 0; i < n && strcmp(opts[i].name, "path") != 0; i++)
		;
	ck_assert_uint_lt(i, n);
	ck_assert_int_eq(strncmp(opts[i].def, "LOCALSTATEDIR/", 14), 0);
	path = rlg_t_fmt("%s/%s", LOCALSTATEDIR, opts[i].def + 14);
	ck_assert_str_eq(path, RLG_DEFAULT_DB_PATH);
	free(path);
}
END_TEST

/*
 * A word key's problem lists the words of its row, in order; the name
 * the logs give a value is its first word in the row.
 */
START_TEST(test_option_words)
{
	const struct rlg_option *opts, *o;
	const struct rlg_word *w;
	char list[512], *text, *want;
	const char *got;
	size_t n, i, len, rows = 0;

	opts = rlg_config_options(&n);
	for (i = 0; i < n; i++) {
		o = &opts[i];
		if (o->type != RLG_OPT_ENUM)
			continue;
		rows++;
		len = 0;
		list[0] = '\0';
		for (w = o->words; w->name != NULL; w++)
			len += (size_t)snprintf(list + len, sizeof list - len,
			    "%s%s", len > 0 ? ", " : "", w->name);
		/* a route needs its path and policies (else more problems) */
		text = rlg_t_fmt("%s\n%s = bogus\n%s", rlg_t_header(o), o->name,
		    strcmp(o->section, "route") == 0 ?
		    "path = /\npolicies = default\n" : "");
		if (strcmp(o->name, "algorithm") == 0)
			want = rlg_t_fmt("t.conf:2: %s %s: unknown algorithm "
			    "(got \"bogus\"): must be one of %s\n",
			    rlg_t_header(o), o->name, list);
		else
			want = rlg_t_fmt("t.conf:2: %s %s: must be one of %s "
			    "(got \"bogus\")\n", rlg_t_header(o), o->name,
			    list);
		rlg_t_expect(text, 1, want);
		free(text);
		free(want);
		for (w = o->words; w->name != NULL; w++) {
			got = NULL;
			if (strcmp(o->name, "on_error") == 0)
				got = rlg_on_error_name(w->value);
			else if (strcmp(o->name, "backend") == 0 &&
			    w->value >= 0)
				got = rlg_store_backend_name(w->value);
			else if (strcmp(o->name, "clock") == 0)
				got = rlg_store_clock_name(w->value);
			else if (strcmp(o->name, "style") == 0)
				got = rlg_style_name(w->value);
			else if (strcmp(o->name, "errors") == 0)
				got = rlg_error_format_name(w->value);
			else if (strcmp(o->name, "level") == 0)
				got = rlg_log_level_name(w->value);
			else if (strcmp(o->name, "format") == 0)
				got = rlg_log_format_name(w->value);
			else if (strcmp(o->name, "commit") == 0)
				got = rlg_commit_name(w->value);
			else if (strcmp(o->name, "algorithm") == 0)
				got = rlg_algorithm_name(w->value);
			if (got != NULL)
				ck_assert_str_eq(got, w->name);
		}
	}
	ck_assert_uint_eq(rows, 16);
}
END_TEST

/*
 * commit = behind: the table is sized by max_clients per policy that keeps
 * state, so max_clients must be set and the product bounded; no
 * sliding_log; flush_ms only with it.
 */
START_TEST(test_commit_behind)
{
	struct rlg_config *cfg;

	cfg = rlg_t_ok("[store]\ncommit = behind\nflush_ms = 250\n"
	    "max_clients = 1000\n[client]\nkey_secret = 0123456789abcdef\n"
	    "[policy a]\nkey = header:X\n[policy b]\n");
	ck_assert_int_eq(cfg->store.sqlite.commit, RLG_COMMIT_BEHIND);
	ck_assert_int_eq(cfg->store.sqlite.flush_ms, 250);
	/* a, its bound on new keys, b. */
	ck_assert_int_eq(cfg->store.sqlite.table_entries, 3000);
	ck_assert(!cfg->store.sqlite.commit_auto);
	rlg_config_free(cfg);
	rlg_t_expect("[store]\ncommit = each\nflush_ms = 250\n", 1,
	    "t.conf:3: [store] flush_ms: applies only to commit = behind\n");
	cfg = rlg_t_ok("[store]\ncommit = each\n");
	ck_assert_int_eq(cfg->store.sqlite.commit, RLG_COMMIT_EACH);
	ck_assert(!cfg->store.sqlite.commit_auto);
	ck_assert_int_eq(cfg->store.sqlite.table_entries, 0);
	rlg_config_free(cfg);
	rlg_t_expect("[store]\ncommit = behind\nmax_clients = 0\n", 1,
	    "t.conf:2: [store] commit: behind sizes its table by max_clients:"
	    " set [store] max_clients > 0\n");
	rlg_t_expect("[store]\ncommit = behind\n[policy s]\n"
	    "algorithm = sliding_log\n", 1,
	    "t.conf:2: [store] commit: behind does not keep [policy s], a"
	    " sliding_log (its log lives in the database): use commit = each,"
	    " or another algorithm\n");
	rlg_t_expect("[store]\ncommit = behind\nmax_clients = 100000000\n",
	    1, "t.conf:2: [store] commit: behind keeps max_clients (100000000)"
	    " x 1 policies = 100000000 entries, over the table's 67108864:"
	    " lower max_clients\n");
	/* Every reason at once, each on the commit line. */
	rlg_t_expect("[store]\ncommit = behind\nmax_clients = 0\n"
	    "[policy s]\nalgorithm = sliding_log\n", 2,
	    "t.conf:2: [store] commit: behind does not keep [policy s], a"
	    " sliding_log (its log lives in the database): use commit = each,"
	    " or another algorithm\n"
	    "t.conf:2: [store] commit: behind sizes its table by max_clients:"
	    " set [store] max_clients > 0\n");
	rlg_t_expect("[store]\ncommit = later\n", 1,
	    "t.conf:2: [store] commit: must be one of auto, each, behind (got"
	    " \"later\")\n");
}
END_TEST

/*
 * commit = auto, the default: behind where the table holds the config
 * (sized as an explicit behind is), else each with commit_auto saying it
 * was resolved; flush_ms with an auto that gave each is a problem naming
 * why; Redis takes each and no commit line.
 */
START_TEST(test_commit_auto)
{
	static const struct {
		const char *text;
		enum rlg_commit commit;
		int64_t entries;
		const char *why;
	} cases[] = {
		{ "", RLG_COMMIT_BEHIND, 1000000, "" },
		{ "[store]\ncommit = auto\n", RLG_COMMIT_BEHIND, 1000000, "" },
		{ "[store]\nmax_clients = 1000\n[client]\n"
		  "key_secret = 0123456789abcdef\n[policy a]\n"
		  "key = header:X\n[policy b]\n", RLG_COMMIT_BEHIND, 3000,
		  "" },
		{ "[store]\nflush_ms = 250\n", RLG_COMMIT_BEHIND, 1000000,
		  "" },
		{ "[policy fast]\n[policy s]\nalgorithm = sliding_log\n",
		  RLG_COMMIT_EACH, 0, "[policy s] is a sliding_log, whose log"
		  " lives in the database" },
		{ "[store]\nmax_clients = 0\n", RLG_COMMIT_EACH, 0,
		  "max_clients = 0, and the table is sized by it" },
		{ "[store]\nmax_clients = 40000000\n[policy a]\n[policy b]\n",
		  RLG_COMMIT_EACH, 0, "max_clients (40000000) x 2 policies ="
		  " 80000000 entries, over the table's 67108864" },
		/* Exactly the table's most: it fits. */
		{ "[store]\nmax_clients = 33554432\n[policy a]\n[policy b]\n",
		  RLG_COMMIT_BEHIND, 67108864, "" },
	};
	struct rlg_config *cfg;
	char why[256];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cfg = rlg_t_ok(cases[i].text);
		ck_assert_msg(cfg->store.sqlite.commit == cases[i].commit,
		    "case %zu: commit %d", i, (int)cfg->store.sqlite.commit);
		ck_assert(cfg->store.sqlite.commit_auto);
		ck_assert_int_eq(cfg->store.sqlite.table_entries,
		    cases[i].entries);
		ck_assert_int_eq(rlg_config_why_each(cfg, why, sizeof why),
		    cases[i].why[0] != '\0');
		ck_assert_str_eq(why, cases[i].why);
		rlg_config_free(cfg);
	}
	/* flush_ms where auto gives each: the problem says why. */
	rlg_t_expect("[store]\nflush_ms = 250\n[policy s]\n"
	    "algorithm = sliding_log\n", 1,
	    "t.conf:2: [store] flush_ms: commit = auto resolves to each here"
	    " ([policy s] is a sliding_log, whose log lives in the database):"
	    " flush_ms applies only to commit = behind\n");
	rlg_t_expect("[store]\ncommit = auto\nmax_clients = 0\n"
	    "flush_ms = 250\n", 1,
	    "t.conf:4: [store] flush_ms: commit = auto resolves to each here"
	    " (max_clients = 0, and the table is sized by it): flush_ms"
	    " applies only to commit = behind\n");
	/* An explicit behind keeps its problems where auto gives each. */
	rlg_t_expect("[policy s]\nalgorithm = sliding_log\n[store]\n"
	    "commit = behind\n", 1,
	    "t.conf:4: [store] commit: behind does not keep [policy s], a"
	    " sliding_log (its log lives in the database): use commit = each,"
	    " or another algorithm\n");
	/* Redis: each, resolved; a commit line is a problem, auto too. */
	cfg = rlg_t_ok("[store]\nbackend = redis\nurl = redis://h\n");
	ck_assert_int_eq(cfg->store.sqlite.commit, RLG_COMMIT_EACH);
	ck_assert(cfg->store.sqlite.commit_auto);
	ck_assert_int_eq(cfg->store.sqlite.table_entries, 0);
	rlg_config_free(cfg);
	rlg_t_expect("[store]\nbackend = redis\nurl = redis://h\n"
	    "commit = auto\nflush_ms = 250\n", 1,
	    "t.conf:5: [store] flush_ms: applies only to backend = sqlite: "
	    "the table of backend = redis (commit = behind) syncs every "
	    "sync_ms\n");
	/* Redis, behind: the local+global mode, the table sized as
	 * SQLite's; sync_ms only there. */
	cfg = rlg_t_ok("[store]\nbackend = redis_cluster\nurl = redis://h:1\n"
	    "commit = behind\nmax_clients = 100\nsync_ms = 250\n"
	    "[policy p]\nlimit = 1\nwindow = 1\n");
	ck_assert_int_eq(cfg->store.sqlite.commit, RLG_COMMIT_BEHIND);
	ck_assert_int_eq(cfg->store.sqlite.table_entries, 100);
	ck_assert_int_eq(cfg->store.sync_ms, 250);
	ck_assert(rlg_store_behind(&cfg->store));
	rlg_config_free(cfg);
	rlg_t_expect("[store]\nbackend = redis\nurl = redis://h\n"
	    "commit = behind\n"
	    "[policy s]\nalgorithm = sliding_log\nlimit = 1\nwindow = 1\n",
	    1,
	    "t.conf:4: [store] commit: behind does not keep [policy s], a"
	    " sliding_log (its log lives in the database): use commit = each,"
	    " or another algorithm\n");
	rlg_t_expect("[store]\nbackend = redis\nurl = redis://h\n"
	    "sync_ms = 50\nmax_clients = 9\n", 2,
	    "t.conf:4: [store] sync_ms: applies only to commit = behind\n"
	    "t.conf:5: [store] max_clients: " RLG_T_REDIS_CLIENTS "\n");
	rlg_t_expect("[store]\ncommit = behind\nsync_ms = 50\n", 1,
	    "t.conf:3: [store] sync_ms: " RLG_T_REDIS_ONLY "\n");
	rlg_t_expect("[store]\nbackend = redis\nurl = redis://h\n"
	    "commit = behind\nsync_ms = 0\n", 1,
	    "t.conf:5: [store] sync_ms: \"0\": must be from 1ms to 1m (1 to "
	    "60000 milliseconds)\n");
	ck_assert_str_eq(rlg_commit_name(RLG_COMMIT_AUTO), "auto");
	ck_assert_str_eq(rlg_commit_name(RLG_COMMIT_BEHIND), "behind");
}
END_TEST

/* An empty backend is reported as empty, and is no bad word: the keys of
 * the other backend are still checked (against the default, sqlite). */
START_TEST(test_empty_backend)
{
	rlg_t_expect("[store]\nbackend =\nurl = redis://h\n", 2,
	    "t.conf:2: [store] backend: must not be empty\n"
	    "t.conf:3: [store] url: applies only to backend = redis or "
	    "redis_cluster\n");
	rlg_t_expect("[store]\nbackend = x\nurl = redis://h\n", 1,
	    "t.conf:2: [store] backend: " RLG_T_BACKENDS " (got \"x\")\n");
}
END_TEST

/* ---- docs --------------------------------------------------------------- */

/* The text of the source file rel ($RLGATE_SRCDIR, else the tree this
 * file is in), a new string. */
static char *
rlg_t_srcfile(const char *rel)
{
	const char *dir = getenv("RLGATE_SRCDIR");
	char *path, *text, *slash;
	size_t len;
	FILE *fp;

	if (dir != NULL && *dir != '\0') {
		path = rlg_t_fmt("%s/%s", dir, rel);
	} else {
		path = rlg_t_fmt("%s", __FILE__);
		slash = strrchr(path, '/');
		ck_assert_ptr_nonnull(slash);
		*slash = '\0';               /* tests/ */
		slash = strrchr(path, '/');
		text = rlg_t_fmt("%.*s%s", slash != NULL ?
		    (int)(slash - path + 1) : 0, path, rel);
		free(path);
		path = text;
	}
	fp = fopen(path, "r");
	ck_assert_msg(fp != NULL, "cannot open %s", path);
	text = malloc(1 << 20);
	ck_assert_ptr_nonnull(text);
	len = fread(text, 1, (1 << 20) - 1, fp);
	ck_assert_uint_lt(len, (1 << 20) - 1);
	text[len] = '\0';
	fclose(fp);
	free(path);
	return text;
}

/* s with the roff escapes the man page uses ("\-", "\&") undone. */
static void
rlg_t_unroff(char *s)
{
	char *d = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '\\' && (s[1] == '-' || s[1] == '&')) {
			if (s[1] == '-')
				*d++ = '-';
			s++;
			continue;
		}
		*d++ = *s;
	}
	*d = '\0';
}

/*
 * The entry of key sect/name in the man page: from its "\n.TP\n.B NAME\n"
 * in the ".SH" section "THE [SECT ..." to the next ".TP" or ".SH", as a
 * new string with the escapes undone; NULL if there is none.
 */
static char *
rlg_t_man_entry(const char *man, const char *sect, const char *name)
{
	const char *sh, *end, *at, *nl;
	char *head, *entry;
	size_t len;

	head = rlg_t_fmt("\n.SH \"THE [%s", sect);
	sh = strstr(man, head);
	free(head);
	if (sh == NULL)
		return NULL;
	end = strstr(sh + 1, "\n.SH ");
	head = rlg_t_fmt("\n.TP\n.B %s\n", name);
	at = strstr(sh, head);
	free(head);
	if (at == NULL || (end != NULL && at > end))
		return NULL;
	len = strlen(at);
	for (nl = at + 1; (nl = strchr(nl, '\n')) != NULL; nl++) {
		if (strncmp(nl, "\n.TP\n", 5) == 0 ||
		    strncmp(nl, "\n.SH ", 5) == 0) {
			len = (size_t)(nl - at);
			break;
		}
	}
	entry = rlg_t_fmt("%.*s\n", (int)len, at);
	rlg_t_unroff(entry);
	return entry;
}

/*
 * Every key of the table has its entry in docs/rlgate.conf.5 under its
 * section, with the table's default, its doc line, every word and its
 * range; and every entry there is a key of the table.
 */
START_TEST(test_man_page_agrees)
{
	const struct rlg_option *opts, *o;
	const struct rlg_word *w;
	char *man, *entry, *want, *sect, *name;
	const char *at, *sh;
	size_t n, i, found;

	man = rlg_t_srcfile("docs/rlgate.conf.5");
	opts = rlg_config_options(&n);
	for (i = 0; i < n; i++) {
		o = &opts[i];
		entry = rlg_t_man_entry(man, o->section, o->name);
		ck_assert_msg(entry != NULL, "rlgate.conf.5: no entry for "
		    "[%s] %s", o->section, o->name);
		want = rlg_t_fmt("\nDefault: %s.\n", o->def);
		ck_assert_msg(strstr(entry, want) != NULL, "rlgate.conf.5: "
		    "[%s] %s: not \"Default: %s.\"", o->section, o->name,
		    o->def);
		free(want);
		want = rlg_t_fmt("\n%s\n", o->doc);
		ck_assert_msg(strstr(entry, want) != NULL, "rlgate.conf.5: "
		    "[%s] %s: no line \"%s\"", o->section, o->name, o->doc);
		free(want);
		for (w = o->words; o->type == RLG_OPT_ENUM && w->name != NULL;
		    w++)
			ck_assert_msg(strstr(entry, w->name) != NULL,
			    "rlgate.conf.5: %s: no word %s", o->name, w->name);
		ck_assert_msg(o->duration_ms == 0 || strstr(entry,
		    o->duration_ms == 1 ? "\nDuration in milliseconds, " :
		    "\nDuration in seconds, ") != NULL, "rlgate.conf.5: %s: "
		    "not said a duration", o->name);
		want = rlg_t_fmt(" %lld to %lld.", o->min, o->max);
		ck_assert_msg(o->type != RLG_OPT_INT ||
		    strstr(entry, want) != NULL, "rlgate.conf.5: %s: no "
		    "range \"%s\"", o->name, want);
		free(want);
		free(entry);
	}
	/* No entry the table does not have. */
	found = 0;
	for (at = strstr(man, "\n.TP\n.B "); at != NULL;
	    at = strstr(at + 1, "\n.TP\n.B ")) {
		for (sh = at; sh > man && strncmp(sh, "\n.SH ", 5) != 0; sh--)
			;
		if (strncmp(sh, "\n.SH \"THE [", 11) != 0)
			continue;
		sect = rlg_t_fmt("%.*s", (int)strcspn(sh + 11, " ]"), sh + 11);
		name = rlg_t_fmt("%.*s", (int)strcspn(at + 8, "\n"), at + 8);
		for (i = 0; i < n; i++)
			if (strcmp(opts[i].section, sect) == 0 &&
			    strcmp(opts[i].name, name) == 0)
				break;
		ck_assert_msg(i < n, "rlgate.conf.5: [%s] %s is no key", sect,
		    name);
		found++;
		free(sect);
		free(name);
	}
	ck_assert_uint_eq(found, n);
	free(man);
}
END_TEST

/*
 * www/rlgate.conf.example names every key of the table in its section
 * ("key = " or ";key = "), the first time under a "; Default: " line with
 * the table's default; and names no key the table does not have (but in
 * a [tier NAME], whose keys are not the table's: config_tier.c).
 */
START_TEST(test_example_agrees)
{
	const struct rlg_option *opts;
	char *text, *line, *next, *def = NULL, *sect = NULL, *key;
	char **defs;
	size_t n, i, len;

	text = rlg_t_srcfile("www/rlgate.conf.example");
	opts = rlg_config_options(&n);
	defs = calloc(n, sizeof *defs);
	ck_assert_ptr_nonnull(defs);
	for (line = text; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		if (line[0] == '[') {
			free(sect);
			sect = rlg_t_fmt("%.*s", (int)strcspn(line + 1, " ]"),
			    line + 1);
			continue;
		}
		if (strncmp(line, "; Default: ", 11) == 0) {
			free(def);
			def = rlg_t_fmt("%s", line + 11);
			continue;
		}
		key = line + (line[0] == ';');
		len = strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_");
		if (len == 0 || strncmp(key + len, " = ", 3) != 0)
			continue;
		ck_assert_ptr_nonnull(sect);
		/* A tier's keys are clients and policy names: no rows. */
		if (strcmp(sect, "tier") == 0)
			continue;
		for (i = 0; i < n; i++)
			if (strcmp(opts[i].section, sect) == 0 &&
			    strlen(opts[i].name) == len &&
			    strncmp(opts[i].name, key, len) == 0)
				break;
		ck_assert_msg(i < n, "rlgate.conf.example: [%s] %.*s is no "
		    "key", sect, (int)len, key);
		if (defs[i] == NULL) {
			ck_assert_msg(def != NULL, "rlgate.conf.example: [%s] "
			    "%s: no \"; Default:\" line", sect, opts[i].name);
			defs[i] = def;
			def = NULL;
		}
		free(def);
		def = NULL;
	}
	for (i = 0; i < n; i++) {
		ck_assert_msg(defs[i] != NULL, "rlgate.conf.example: no [%s] "
		    "%s", opts[i].section, opts[i].name);
		ck_assert_msg(strcmp(defs[i], opts[i].def) == 0,
		    "rlgate.conf.example: [%s] %s: default \"%s\", not \"%s\"",
		    opts[i].section, opts[i].name, defs[i], opts[i].def);
		free(defs[i]);
	}
	free(defs);
	free(def);
	free(sect);
	free(text);
}
END_TEST

/* ---- reader ------------------------------------------------------------- */

/* rlg_ini_fn: appends "LINE kind name=value" or "LINE kind: error" and a
 * newline to the string *ctx (a char **, reallocated). */
static void
rlg_t_ini_collect(void *ctx, const struct rlg_ini_line *l)
{
	static const char *const kinds[] = { "section", "key", "bad-section",
	    "bad-line" };
	char **log = ctx, *t;

	if (l->kind == RLG_INI_SECTION)
		t = rlg_t_fmt("%s%d section [%s]\n", *log, l->lineno, l->name);
	else if (l->kind == RLG_INI_KEY)
		t = rlg_t_fmt("%s%d key %s=%s\n", *log, l->lineno, l->name,
		    l->value);
	else
		t = rlg_t_fmt("%s%d %s: %s\n", *log, l->lineno, kinds[l->kind],
		    l->error);
	free(*log);
	*log = t;
}

/* What rlg_ini_read makes of len bytes (a file when len > strlen). */
static char *
rlg_t_ini(const char *text, size_t len, size_t max)
{
	char *log = rlg_t_fmt("%s", "");
	FILE *fp = NULL;

	if (len > strlen(text)) {
		fp = fmemopen((void *)(uintptr_t)text, len, "r");
		ck_assert_ptr_nonnull(fp);
	}
	ck_assert_int_eq(rlg_ini_read(fp, text, max, rlg_t_ini_collect, &log),
	    0);
	if (fp != NULL)
		fclose(fp);
	return log;
}

#define RLG_T_SYNTAX "syntax error: expected \"key = value\" or " \
    "\"[section]\" (got "

/* Line numbers hold with CRLF, a BOM, blank and comment lines. */
START_TEST(test_ini_lines)
{
	static const char text[] =
	    "\xEF\xBB\xBF[a]\r\n"
	    "k = v ; c\r\n"
	    "\r\n"
	    "; comment\r\n"
	    "  # another\r\n"
	    "x=1;2\r\n"
	    "\t[ b c ] ; c\r\n"
	    "y: z = w\r\n"
	    "e =\r\n"
	    "last = \tend\t";
	char *log = rlg_t_ini(text, sizeof text - 1, 64);

	ck_assert_str_eq(log,
	    "1 section [a]\n"
	    "2 key k=v\n"
	    "6 key x=1;2\n"
	    "7 section [b c]\n"
	    "8 key y=z = w\n"
	    "9 key e=\n"
	    "10 key last=end\n");
	free(log);
	/* A BOM opens line 1 only: elsewhere it is part of the line. */
	log = rlg_t_ini("\n\xEF\xBB\xBF[a]\n", 8, 64);
	ck_assert_str_eq(log, "2 bad-line: " RLG_T_SYNTAX
	    "\"\xEF\xBB\xBF[a]\")\n");
	free(log);
}
END_TEST

/* Headers and keys that are not, and inline comments. */
START_TEST(test_ini_syntax)
{
	static const char text[] =
	    "[a ;]\n"
	    "[a] b\n"
	    "[a]#c\n"
	    "[]\n"
	    "[a]]\n"
	    "= v\n"
	    "k ; = v\n"
	    "k = ;v\n"
	    "k =;v\n"
	    "words\n";
	char *log = rlg_t_ini(text, sizeof text - 1, 64);

	ck_assert_str_eq(log,
	    "1 bad-section: " RLG_T_SYNTAX "\"[a ;]\")\n"
	    "2 bad-section: " RLG_T_SYNTAX "\"[a] b\")\n"
	    "3 section [a]\n"
	    "4 section []\n"
	    "5 bad-section: " RLG_T_SYNTAX "\"[a]]\")\n"
	    "6 bad-line: " RLG_T_SYNTAX "\"= v\")\n"
	    "7 bad-line: " RLG_T_SYNTAX "\"k ; = v\")\n"
	    "8 key k=\n"
	    "9 key k=;v\n"
	    "10 bad-line: " RLG_T_SYNTAX "\"words\")\n");
	free(log);
}
END_TEST

/* max bytes fit, "\r\n" or not; one more is too long; a NUL spoils its
 * line only; the numbers of the lines after them hold. */
START_TEST(test_ini_long_and_nul)
{
	static const char text[] =
	    "a=12\n"
	    "a=123\n"
	    "a=12\r\n"
	    "a=123\r\n"
	    "a=1\r\r\n"
	    "a=\0b\n"
	    "a=1234567890\n"
	    "b=1\n"
	    "a=123";
	char *log = rlg_t_ini(text, sizeof text - 1, 4);

	ck_assert_str_eq(log,
	    "1 key a=12\n"
	    "2 bad-line: line too long (max 4 bytes)\n"
	    "3 key a=12\n"
	    "4 bad-line: line too long (max 4 bytes)\n"
	    "5 key a=1\n"
	    "6 bad-line: line holds a NUL byte\n"
	    "7 bad-line: line too long (max 4 bytes)\n"
	    "8 key b=1\n"
	    "9 bad-line: line too long (max 4 bytes)\n");
	free(log);
	/* The same from a string (no NUL there: it ends the text). */
	log = rlg_t_ini("a=123\r\nb=1", 10, 4);
	ck_assert_str_eq(log, "1 bad-line: line too long (max 4 bytes)\n"
	    "2 key b=1\n");
	free(log);
}
END_TEST

/*
 * What a reload may not change: each [store] key a running store keeps,
 * named; on_error and every other section may change.
 */
START_TEST(test_store_changed)
{
	static const struct {
		const char *a, *b, *key;
	} cases[] = {
		{ "path = /x/a.db\n", "path = /x/b.db\n", "path" },
		{ "", "busy_timeout_ms = 10\n", "busy_timeout_ms" },
		{ "", "max_clients = 10\n", "max_clients" },
		{ "", "synchronous = full\n", "synchronous" },
		{ "", "group_commit = on\n", "group_commit" },
		{ "", "commit = each\n", "commit (as resolved)" },
		{ "", "flush_ms = 500\n", "flush_ms" },
		{ "", "rejection_cache = 0\n", "rejection_cache" },
		{ "", "backend = redis\nurl = redis://h\n", "backend" },
		{ "backend = redis\nurl = redis://h\n",
		  "backend = redis\nurl = redis://h:6380\n", "url" },
		{ "backend = redis\nurl = redis://h\n",
		  "backend = redis\nurl = redis://:pw@h\n", "url" },
		{ "backend = redis\nurl = redis://h\n",
		  "backend = redis\nurl = redis://h\ntimeout_ms = 99\n",
		  "timeout_ms" },
		{ "backend = redis\nurl = redis://h\n",
		  "backend = redis\nurl = redis://h\nclock = local\n", "clock" },
		{ "", "on_error = open\n[policy p]\nlimit = 9\n[log]\n"
		  "level = info\n[admin]\nallow =\n", "" },
	};
	struct rlg_config *a, *b;
	char what[64], *ta, *tb;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ta = rlg_t_fmt("[store]\n%s", cases[i].a);
		tb = rlg_t_fmt("[store]\n%s", cases[i].b);
		a = rlg_t_ok(ta);
		b = rlg_t_ok(tb);
		ck_assert_msg(rlg_config_store_changed(a, b, what, sizeof what) ==
		    (cases[i].key[0] != '\0'), "case %zu", i);
		ck_assert_str_eq(what, cases[i].key);
		ck_assert(!rlg_config_store_changed(a, a, what, sizeof what));
		rlg_config_free(a);
		rlg_config_free(b);
		free(ta);
		free(tb);
	}
}
END_TEST

/*
 * A route with policies = none is a warning on its policies line: a
 * guarding front asking about its paths limits nothing. The config
 * loads (a warning changes no status).
 */
START_TEST(test_msg_unguarded_route)
{
	struct rlg_config *cfg;
	char *errs;
	int n;

	errs = rlg_t_load("[route static]\npath = /static/*\n"
	    "policies = none\n[route a]\npath = /a\npolicies = default\n",
	    &n, &cfg);
	ck_assert_str_eq(errs, "t.conf:3: warning: [route static] policies = "
	    "none: a guarding front (FastCGI Authorizer, nginx auth_request, "
	    "Caddy forward_auth) asking about /static/* will limit nothing: "
	    "rlgate admits those requests unlimited\n");
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_nonnull(cfg);
	ck_assert_uint_eq(cfg->routes[0].npolicies, 0);
	rlg_config_free(cfg);
	free(errs);
}
END_TEST

/*
 * Durations take units as nginx's do (s, m, h, d for a key in seconds;
 * ms, s, m for one in ms), a bare number its key's own unit; the bad
 * ones (tests/check_config.c's table of bad values) say what a duration
 * is.
 */
START_TEST(test_msg_durations)
{
	struct rlg_config *cfg;

	cfg = rlg_t_ok("[store]\nbusy_timeout_ms = 2s\ncommit = behind\n"
	    "flush_ms = 250ms\n"
	    "[fastcgi]\nread_timeout_ms = 1m\n"
	    "[policy a]\nwindow = 90s\n[policy b]\nwindow = 15m\n"
	    "[policy c]\nwindow = 1h\n[policy d]\nwindow = 366d\n"
	    "[policy e]\nwindow = 120\n");
	ck_assert_int_eq(cfg->store.sqlite.busy_timeout_ms, 2000);
	ck_assert_int_eq(cfg->store.sqlite.flush_ms, 250);
	ck_assert_int_eq(cfg->read_timeout_ms, 60000);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 90000);
	ck_assert_int_eq(cfg->policies[1].lim.window_ms, 900000);
	ck_assert_int_eq(cfg->policies[2].lim.window_ms, 3600000);
	ck_assert_int_eq(cfg->policies[3].lim.window_ms, 366LL * 86400000);
	ck_assert_int_eq(cfg->policies[4].lim.window_ms, 120000);
	rlg_config_free(cfg);
	cfg = rlg_t_ok("[store]\nbackend = redis\nurl = redis://h\n"
	    "connect_timeout_ms = 1s\ntimeout_ms = 750\n");
	ck_assert_int_eq(cfg->store.redis.connect_timeout_ms, 1000);
	ck_assert_int_eq(cfg->store.redis.timeout_ms, 750);
	rlg_config_free(cfg);
	rlg_t_expect("[policy default]\nwindow = 1y\n", 1, "t.conf:2: "
	    "[policy default] window: \"1y\": a duration in seconds, or with "
	    "a unit s, m, h, d (e.g. 90s, 15m, 1h)\n");
	rlg_t_expect("[store]\ncommit = behind\nflush_ms = 1h\n", 1,
	    "t.conf:3: [store] flush_ms: \"1h\": a duration in milliseconds, "
	    "or with a unit ms, s, m (e.g. 500ms, 2s, 1m)\n");
}
END_TEST

/*
 * An unknown key close to a key of its section (a typo: a letter
 * missing, added, changed, two swapped) gets "did you mean"; close to a
 * key of another section only, that key and its section; nothing close,
 * nothing more. A policy name a route or a tier names that is close to
 * a policy's gets the same.
 */
START_TEST(test_msg_did_you_mean)
{
	rlg_t_expect("[policy default]\nlimt = 5\nwindwo = 60\n"
	    "algoritm = token_bucket\nzzz = 1\nlimitlimit = 2\n"
	    "[client]\nexmept = ::1\n[admin]\nlmit = 3\n", 7,
	    "t.conf:2: [policy default] unknown key \"limt\": did you mean "
	    "\"limit\"?\n"
	    "t.conf:3: [policy default] unknown key \"windwo\": did you mean "
	    "\"window\"?\n"
	    "t.conf:4: [policy default] unknown key \"algoritm\": did you "
	    "mean \"algorithm\"?\n"
	    "t.conf:5: [policy default] unknown key \"zzz\"\n"
	    "t.conf:6: [policy default] unknown key \"limitlimit\"\n"
	    "t.conf:8: [client] unknown key \"exmept\": did you mean "
	    "\"exempt\"?\n"
	    "t.conf:10: [admin] unknown key \"lmit\": did you mean \"limit\" "
	    "(a key of [policy NAME])?\n");
	rlg_t_expect("[polciy api]\n[rotue  b c]\n[sotre]\n[nothing]\n", 4,
	    "t.conf:1: unknown section [polciy api]: did you mean [policy "
	    "api]?\n"
	    "t.conf:2: unknown section [rotue  b c]: did you mean [route b "
	    "c]?\n"
	    "t.conf:3: unknown section [sotre]: did you mean [store]?\n"
	    "t.conf:4: unknown section [nothing]\n");
	rlg_t_expect("[policy default]\n[policy api]\n"
	    "[route a]\npath = /a\npolicies = defualt, apu\n"
	    "[route b]\npath = /b\npolicies = nothing\n"
	    "[tier gold]\nclients = 10.0.0.0/8\nap = limit=5\n", 4,
	    "t.conf:5: [route a] policies: no [policy defualt]: did you mean "
	    "\"default\"?\n"
	    "t.conf:5: [route a] policies: no [policy apu]: did you mean "
	    "\"api\"?\n"
	    "t.conf:8: [route b] policies: no [policy nothing]\n"
	    "t.conf:11: [tier gold] ap: no [policy ap] (a key of a tier is "
	    "clients or a policy's name): did you mean \"api\"?\n");
}
END_TEST

/*
 * A key of another section says where it belongs, each section where
 * it is valid.
 */
START_TEST(test_msg_right_section)
{
	rlg_t_expect("[store]\nlimit = 5\n[policy p]\npath = /x\n"
	    "exempt = ::1\n[headers]\nexempt = ::1\nread_timeout_ms = 1\n",
	    4,
	    "t.conf:2: [store] unknown key \"limit\": it belongs in [policy "
	    "NAME]\n"
	    "t.conf:4: [policy p] unknown key \"path\": it belongs in [store] "
	    "or [route NAME]\n"
	    "t.conf:7: [headers] unknown key \"exempt\": it belongs in "
	    "[client] or [policy NAME]\n"
	    "t.conf:8: [headers] unknown key \"read_timeout_ms\": it belongs "
	    "in [fastcgi]\n");
}
END_TEST

/*
 * The database's directory, for --check-config and the start: missing,
 * or a file, is said at [store] path's line ("FILE:LINE: path:
 * directory DIR does not exist"); a directory that is there passes; the
 * Redis store keeps no database.
 */
START_TEST(test_msg_missing_dir)
{
	struct rlg_config *cfg;
	char *path, *text, *want, msg[2048];

	text = rlg_t_fmt("; a comment\n[store]\npath = %s/rlg-no-such-dir/x.db\n",
	    rlg_t_tmpdir());
	path = rlg_t_file(text, strlen(text));
	ck_assert_int_eq(rlg_config_load(path, stderr, &cfg), 0);
	ck_assert_int_eq(rlg_config_check_dir(cfg, msg, sizeof msg), -1);
	want = rlg_t_fmt("%s:3: path: directory %s/rlg-no-such-dir does not "
	    "exist: create it for the user rlgate runs as (mkdir -p "
	    "%s/rlg-no-such-dir; chown USER %s/rlg-no-such-dir)", path,
	    rlg_t_tmpdir(), rlg_t_tmpdir(), rlg_t_tmpdir());
	ck_assert_str_eq(msg, want);
	rlg_config_free(cfg);
	free(want);
	free(text);
	unlink(path);

	/* a file where the directory should be */
	text = rlg_t_fmt("[store]\npath = %s/x.db\n", path);
	ck_assert_int_eq(rlg_config_load_string(text, "t.conf", stderr, &cfg),
	    0);
	{
		FILE *f = fopen(path, "w");

		ck_assert_ptr_nonnull(f);
		fclose(f);
	}
	ck_assert_int_eq(rlg_config_check_dir(cfg, msg, sizeof msg), -1);
	want = rlg_t_fmt("t.conf:2: path: directory %s is not a directory",
	    path);
	ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "%s", msg);
	rlg_config_free(cfg);
	free(want);
	free(text);
	unlink(path);
	free(path);

	text = rlg_t_fmt("[store]\npath = %s/x.db\n", rlg_t_tmpdir());
	ck_assert_int_eq(rlg_config_load_string(text, "t.conf", stderr, &cfg),
	    0);
	ck_assert_int_eq(rlg_config_check_dir(cfg, msg, sizeof msg), 0);
	ck_assert_str_eq(msg, "");
	rlg_config_free(cfg);
	free(text);
	cfg = rlg_t_ok("[store]\nbackend = redis\nurl = redis://h\n"
	    "path = /rlg-no-such-dir/x.db\n");
	ck_assert_int_eq(rlg_config_check_dir(cfg, msg, sizeof msg), 0);
	rlg_config_free(cfg);
}
END_TEST

/*
 * A [policy NAME], [route NAME] or [tier NAME] seen again merges into
 * the first, with a warning naming both lines (a copied section someone
 * forgot to rename); the config still loads. [store] twice is no
 * warning: its keys are one section's.
 */
START_TEST(test_msg_section_again)
{
	struct rlg_config *cfg;
	char *errs;
	int n;

	errs = rlg_t_load("[policy api]\nlimit = 5\n"          /* 1-2 */
	    "[store]\n[policy login]\nlimit = 3\n"              /* 3-5 */
	    "[policy api]\nwindow = 10\n[store]\n"              /* 6-8 */
	    "[route a]\npath = /a\npolicies = api\n"           /* 9-11 */
	    "[route a]\nmethods = GET\n"                       /* 12-13 */
	    "[tier gold]\nclients = 10.0.0.0/8\n"               /* 14-15 */
	    "[tier gold]\napi = limit=50\n", &n, &cfg);        /* 16-17 */
	ck_assert_str_eq(errs,
	    RLG_T_AGAIN("[policy api]", "6", "1")
	    RLG_T_AGAIN("[route a]", "12", "9")
	    RLG_T_AGAIN("[tier gold]", "16", "14"));
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_nonnull(cfg);
	ck_assert_uint_eq(cfg->npolicies, 2);
	ck_assert_int_eq(cfg->policies[0].lim.window_ms, 10000);
	ck_assert_uint_eq(cfg->routes[0].nmethods, 1);
	ck_assert_uint_eq(cfg->ntiers, 1);
	rlg_config_free(cfg);
	free(errs);
}
END_TEST

/*
 * A token bucket's burst above its limit + 1 shows a new client more
 * remaining than the limit: a warning at burst's line saying what the
 * client sees (checked against the limiter itself); up to limit + 1 is
 * none, nor a burst below the limit.
 */
START_TEST(test_msg_burst_above_limit)
{
	struct rlg_config *cfg;
	struct rlg_state in, out;
	struct rlg_decision d;
	char *errs;
	int n;

	errs = rlg_t_load("[policy api]\nalgorithm = token_bucket\n"
	    "limit = 50\nburst = 100\n"
	    "[policy small]\nalgorithm = token_bucket\nlimit = 50\n"
	    "burst = 20\n"
	    "[policy edge]\nalgorithm = token_bucket\nlimit = 50\n"
	    "burst = 51\n", &n, &cfg);
	ck_assert_str_eq(errs, "t.conf:4: warning: [policy api] burst: 100 is "
	    "above the limit (50): a new client's first request is answered "
	    "RateLimit-Limit: 50 and RateLimit-Remaining: 99 (the bucket holds "
	    "burst, the headers show the limit), more left than the limit, "
	    "which surprises clients; a burst up to 51 keeps Remaining within "
	    "Limit\n");
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_nonnull(cfg);
	/* what the limiter says: a new client's first answer */
	memset(&in, 0, sizeof in);
	ck_assert_int_eq(rlg_limiter_token_bucket(&cfg->policies[0].lim, &in,
	    1700000000000LL, 1, &out, &d), 0);
	ck_assert(d.admitted);
	ck_assert_int_eq(d.limit, 50);
	ck_assert_int_eq(d.remaining, 99);
	ck_assert_int_eq(rlg_limiter_token_bucket(&cfg->policies[2].lim, &in,
	    1700000000000LL, 1, &out, &d), 0);
	ck_assert_int_eq(d.remaining, 50);      /* = limit: no warning */
	rlg_config_free(cfg);
	free(errs);
}
END_TEST

Suite *
rlg_config_suite(void)
{
	Suite *s;
	TCase *tc;

	s = suite_create("config");

	tc = tcase_create("core");
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_empty_file_is_defaults);
	tcase_add_test(tc, test_full_file);
	tcase_add_test(tc, test_inline_comments);
	tcase_add_test(tc, test_design_example);
	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_long_lines_fit);
	tcase_add_test(tc, test_load_string_name);
	tcase_add_loop_test(tc, test_style, 0, (int)RLG_T_NSTYLES);
	tcase_add_test(tc, test_reject_status);
	tcase_add_loop_test(tc, test_error_format, 0,
	    (int)RLG_T_NERROR_FORMATS);
	tcase_add_loop_test(tc, test_algorithm, 0, (int)RLG_T_NALGORITHMS);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("policies");
	tcase_add_test(tc, test_policies_in_order);
	tcase_add_test(tc, test_policy_defaults);
	tcase_add_test(tc, test_burst);
	tcase_add_test(tc, test_burst_not_token_bucket);
	tcase_add_test(tc, test_ban);
	tcase_add_test(tc, test_sliding_log_limit);
	tcase_add_test(tc, test_policy_names);
	tcase_add_test(tc, test_policies_max);
	suite_add_tcase(s, tc);

	tc = tcase_create("clients");
	tcase_add_test(tc, test_new_defaults);
	tcase_add_loop_test(tc, test_policy_key, 0, (int)RLG_T_NKEYS);
	tcase_add_test(tc, test_key_items_each_reported);
	tcase_add_test(tc, test_key_secret_required);
	tcase_add_test(tc, test_jwt_key_file);
	tcase_add_test(tc, test_mode);
	tcase_add_test(tc, test_policy_exempt);
	tcase_add_test(tc, test_cidrs_max);
	tcase_add_test(tc, test_client);
	tcase_add_test(tc, test_headers_log);
	tcase_add_test(tc, test_forwarded_header);
	suite_add_tcase(s, tc);

	tc = tcase_create("routes");
	tcase_add_test(tc, test_routes);
	tcase_add_test(tc, test_default_policies);
	tcase_add_loop_test(tc, test_bad_route_value, 0,
	    (int)RLG_T_NBAD_ROUTE);
	tcase_add_test(tc, test_route_errors);
	tcase_add_test(tc, test_route_cost);
	tcase_add_test(tc, test_tiers);
	tcase_add_test(tc, test_tiers_max);
	tcase_add_test(tc, test_route_cost_header);
	tcase_add_test(tc, test_routes_max);
	tcase_add_test(tc, test_route_path_match);
	tcase_add_test(tc, test_new_mixed);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_loop_test(tc, test_bad_value, 0, (int)RLG_T_NBAD);
	tcase_add_test(tc, test_many_errors);
	tcase_add_test(tc, test_syntax_errors);
	tcase_add_test(tc, test_no_continuation_lines);
	tcase_add_test(tc, test_overlong_line);
	tcase_add_test(tc, test_path_too_long);
	tcase_add_test(tc, test_duplicate_key);
	tcase_add_test(tc, test_unknown_section_and_key);
	tcase_add_test(tc, test_errs_null);
	suite_add_tcase(s, tc);

	tc = tcase_create("redis");
	tcase_add_loop_test(tc, test_redis_url, 0, (int)RLG_T_NURLS);
	tcase_add_loop_test(tc, test_redis_url_masked, 0,
	    (int)RLG_T_NSECRET_URLS);
	tcase_add_test(tc, test_redis_store);
	tcase_add_test(tc, test_redis_store_errors);
	tcase_add_test(tc, test_redis_url_api);
	tcase_add_loop_test(tc, test_redis_cluster_url, 0,
	    (int)RLG_T_NCLUSTER_URLS);
	tcase_add_test(tc, test_redis_cluster_errors);
	tcase_add_test(tc, test_redis_cluster_url_api);
	tcase_add_test(tc, test_redis_sentinel_url);
	suite_add_tcase(s, tc);

	tc = tcase_create("table");
	tcase_add_test(tc, test_option_rows);
	tcase_add_test(tc, test_store_changed);
	tcase_add_test(tc, test_option_defaults);
	tcase_add_test(tc, test_commit_behind);
	tcase_add_test(tc, test_commit_auto);
	tcase_add_test(tc, test_option_words);
	tcase_add_test(tc, test_empty_backend);
	suite_add_tcase(s, tc);

	tc = tcase_create("docs");
	tcase_add_test(tc, test_man_page_agrees);
	tcase_add_test(tc, test_example_agrees);
	suite_add_tcase(s, tc);

	tc = tcase_create("reader");
	tcase_add_test(tc, test_ini_lines);
	tcase_add_test(tc, test_ini_syntax);
	tcase_add_test(tc, test_ini_long_and_nul);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_test(tc, test_load_file);
	tcase_add_test(tc, test_world_writable_warning);
	tcase_add_test(tc, test_trust_everyone_warning);
	tcase_add_test(tc, test_new_keys_per_ip);
	tcase_add_test(tc, test_load_file_errors);
	tcase_add_test(tc, test_load_missing);
	tcase_add_test(tc, test_load_directory);
	tcase_add_test(tc, test_pick);
	suite_add_tcase(s, tc);

	tc = tcase_create("messages");
	tcase_add_test(tc, test_msg_unguarded_route);
	tcase_add_test(tc, test_msg_durations);
	tcase_add_test(tc, test_msg_did_you_mean);
	tcase_add_test(tc, test_msg_right_section);
	tcase_add_test(tc, test_msg_missing_dir);
	tcase_add_test(tc, test_msg_section_again);
	tcase_add_test(tc, test_msg_burst_above_limit);
	suite_add_tcase(s, tc);

	return s;
}
