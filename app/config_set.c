/*
 * config_set.c: the setters of the option table's rows. Generic setters
 * parse and store integers, durations, words, strings and lists of
 * networks and write the messages; a hand-written setter is here only for
 * a compound value (the Redis url, a policy's key, a route's path,
 * methods and policies) or a check of its own. Each takes the row it
 * sets (struct rlg_option: bounds, words, the field's offset) and
 * reports into the loader's state (struct rlg_parse, config_priv.h).
 *
 * Below the table (config_options.c), which names these setters in its
 * rows; above config.c, whose problem list it reports into.
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
#include "store_backends.h"
#include "util.h"

static bool rlg_parse_int(const char *s, long long min, long long max,
    long long *out);
static bool rlg_set_duration(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, long long *out);
static const char *rlg_duration_str(long long v, int unit_ms, char *buf,
    size_t size);
static const char *rlg_word_list(const struct rlg_word *words, char *buf,
    size_t size);
static void rlg_put_int(void *field, size_t size, long long v);
static bool rlg_name_ok(struct rlg_parse *p,
    const struct rlg_option *o, const char *what, const char *name);
static bool rlg_set_word(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, const char *unknown, int *out);

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
const char *
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
bool
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
bool
rlg_set_backend(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_store_config *sc = base;
	int v;

	if (!rlg_set_word(p, o, value, NULL, &v)) {
		p->backend_bad = true;
		return false;
	}
	/* redis_cluster: the Redis store (its first row), in its cluster
	 * mode. */
	sc->redis.cluster =
	    (rlg_backend_rows[v].flags & RLG_BACKEND_CLUSTER) != 0;
	sc->backend = rlg_backend_first(v);
	return true;
}

/* The message quotes the url with its password masked: errors are logged. */
bool
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

bool
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
bool
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
bool
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
bool
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
bool
rlg_set_algorithm(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	int v;

	if (!rlg_set_word(p, o, value, "algorithm", &v))
		return false;
	rlg_put_int((char *)base + o->offset, o->size, v);
	return true;
}

/* The words of key that take a NAME, and their bits. */
static const struct {
	const char *prefix;
	unsigned bit;
} rlg_key_sources[] = {
	{ "header:", RLG_KEY_HEADER },
	{ "cookie:", RLG_KEY_COOKIE },
	{ "query:", RLG_KEY_QUERY },
	{ "jwt:", RLG_KEY_JWT },
};

/* The bit of a "header:NAME", "cookie:NAME", "query:NAME" or "jwt:CLAIM"
 * item (its NAME into *name), or 0. */
static unsigned
rlg_key_source(const char *item, const char **name)
{
	size_t i, n;

	for (i = 0; i < sizeof rlg_key_sources / sizeof rlg_key_sources[0];
	    i++) {
		n = strlen(rlg_key_sources[i].prefix);
		if (strncmp(item, rlg_key_sources[i].prefix, n) == 0 &&
		    item[n] != '\0') {
			*name = item + n;
			return rlg_key_sources[i].bit;
		}
	}
	return 0;
}

/*
 * key = ip, one of header:NAME, cookie:NAME, query:NAME, jwt:CLAIM, or ip
 * with one of them, comma-separated in any order; or global alone. NAME
 * is kept as written (a header's name compares without case when a
 * request is read; a cookie's and a parameter's too, to catch
 * look-alikes). Each bad item is its own problem; the policy changes only
 * if all are good. Whether a key_secret is there waits for the end.
 */
bool
rlg_set_key(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_policy *pol = base;
	const char *chosen = NULL, *name = NULL;
	unsigned bits = 0, bit;
	char **items;
	size_t i, n;
	bool ok = true;

	if (!rlg_list_split(p, o, value, 2, "items", &items, &n))
		return false;
	for (i = 0; i < n; i++) {
		if (strcmp(items[i], "ip") == 0 ||
		    strcmp(items[i], "global") == 0) {
			bit = items[i][0] == 'i' ? RLG_KEY_IP : RLG_KEY_GLOBAL;
			if ((bits & bit) != 0) {
				rlg_key_problem(p, o, "%s given twice "
				    "(got \"%s\")", items[i], value);
				ok = false;
			}
			bits |= bit;
			continue;
		}
		bit = rlg_key_source(items[i], &name);
		if (bit == 0) {
			rlg_key_problem(p, o, "must be one of ip, header:NAME, "
			    "cookie:NAME, query:NAME, jwt:CLAIM, global (got "
			    "\"%s\")", items[i]);
			ok = false;
			continue;
		}
		if (!rlg_name_ok(p, o, bit == RLG_KEY_HEADER ? "header" :
		    bit == RLG_KEY_COOKIE ? "cookie" : bit == RLG_KEY_QUERY ?
		    "query parameter" : "claim", name)) {
			ok = false;
		} else if (chosen != NULL) {
			rlg_key_problem(p, o, "at most one of header:NAME, "
			    "cookie:NAME, query:NAME, jwt:CLAIM (got \"%s\")",
			    value);
			ok = false;
		}
		chosen = name;
		bits |= bit;
	}
	if (ok && (bits & RLG_KEY_GLOBAL) != 0 && bits != RLG_KEY_GLOBAL) {
		rlg_key_problem(p, o, "global is one bucket for every client: "
		    "it takes no other item (got \"%s\")", value);
		ok = false;
	}
	if (ok) {
		pol->key = bits;
		free(pol->key_name);
		pol->key_name = chosen != NULL ? rlg_xstrdup(chosen) : NULL;
	}
	rlg_list_free(items, n);
	return ok;
}

/*
 * Whether name may be a header's name in the config: an HTTP token (RFC
 * 9110 tchar) of at most RLG_HEADER_NAME_MAX bytes. Reports it if not.
 */
static bool
rlg_name_ok(struct rlg_parse *p, const struct rlg_option *o,
    const char *what, const char *name)
{
	size_t len = strlen(name);
	/* A claim's name may be a URI, as namespaced claims are. */
	bool claim = strcmp(what, "claim") == 0;

	if (name[strspn(name, claim ? RLG_ALNUM "!#$%&'*+-.^_`|~:/@" :
	    RLG_ALNUM "!#$%&'*+-.^_`|~")] != '\0') {
		rlg_key_problem(p, o, "%s name must be an HTTP token%s: "
		    "A-Z a-z 0-9 and !#$%%&'*+-.^_`|~%s (got \"%s\")", what,
		    claim ? " or a URI" : "", claim ? ":/@" : "", name);
		return false;
	}
	if (len > RLG_HEADER_NAME_MAX) {
		rlg_key_problem(p, o, "%s name must be at most %d bytes "
		    "(got %zu)", what, RLG_HEADER_NAME_MAX, len);
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
bool
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
		if (!rlg_name_ok(p, o, "header", value + 7))
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
bool
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

/*
 * Whether items[i] repeats an earlier item of the list value: then a
 * problem that names it, "BEFORE item AFTER given twice (got "value")".
 */
static bool
rlg_list_repeat(struct rlg_parse *p, const struct rlg_option *o,
    char *const *items, size_t i, const char *value, const char *before,
    const char *after)
{
	size_t j;

	for (j = 0; j < i; j++)
		if (strcmp(items[j], items[i]) == 0) {
			rlg_key_problem(p, o, "%s%s%s given twice (got \"%s\")",
			    before, items[i], after, value);
			return true;
		}
	return false;
}

/* Method names as a request carries them: uppercase letters, no repeat. */
bool
rlg_set_route_methods(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	static const char upper[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	struct rlg_route *r = base;
	char **items;
	size_t i, n;
	bool ok = true;

	if (!rlg_list_split(p, o, value, RLG_ROUTE_METHODS_MAX, "methods",
	    &items, &n))
		return false;
	for (i = 0; i < n; i++) {
		if (items[i][strspn(items[i], upper)] != '\0') {
			rlg_key_problem(p, o, "not a method: uppercase "
			    "letters only (got \"%s\")", items[i]);
			ok = false;
		} else if (rlg_list_repeat(p, o, items, i, value, "", "")) {
			ok = false;
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
bool
rlg_set_route_policies(struct rlg_parse *p, const struct rlg_option *o,
    const char *value, void *base)
{
	struct rlg_build *b = &p->rbuilds[p->cur];
	char **items;
	size_t i, n;
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
		if (rlg_list_repeat(p, o, items, i, value, "[policy ", "]"))
			ok = false;
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
bool
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
