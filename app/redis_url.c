/*
 * redis_url.c: [store] url, the address of the Redis store, parsed into
 * struct rlg_redis_config; a Redis store described for the logs; and any
 * url masked for a message. The forms it accepts are the ones the Redis
 * store can reach (TCP, a unix socket, a cluster's seed nodes). No secret
 * ever leaves this file unmasked: a refused url's reason never quotes the
 * password, and rlg_redis_url_masked hides every part of a url that may
 * be one, whatever its shape. It needs nothing of the config or the store
 * (redis_url.h says why it is a module of its own).
 */
#include <assert.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <sys/un.h>

#include "redis_url.h"
#include "util.h"

/* The longest Redis host name (DNS: 253) and unix socket path (sun_path). */
#define RLG_REDIS_HOST_MAX  253
#define RLG_REDIS_SOCKET_MAX  (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

static bool rlg_url_param_name(const char *s, size_t len);
static bool rlg_url_word(const char *s, size_t len, const char *word);
static int rlg_url_unix(struct rlg_redis_config *rc, const char *rest,
    char *why, size_t size);
static int rlg_url_tcp(struct rlg_redis_config *rc, const char *rest,
    char *why, size_t size);
static int rlg_url_sentinel(struct rlg_redis_config *rc, const char *rest,
    char *why, size_t size);
static int rlg_url_userinfo(struct rlg_redis_config *rc, const char *rest,
    const char **hostp, char *why, size_t size);
static int rlg_url_list(struct rlg_redis_config *rc, const char **sp,
    size_t max, int defport, char *why, size_t size);
static int rlg_url_host(const char **sp, char **hostp, int *portp,
    char *why, size_t size);
static bool rlg_url_decode(const char *s, size_t len, char **out);
static bool rlg_url_number(const char *s, size_t len, long long max,
    long long *out);

int
rlg_redis_url_parse(struct rlg_redis_config *rc, const char *url,
    char *why, size_t size)
{
	struct rlg_redis_config tmp;
	int ret;

	assert(rc != NULL && url != NULL && why != NULL);
	memset(&tmp, 0, sizeof tmp);
	tmp.port = RLG_DEFAULT_REDIS_PORT;
	if (strncmp(url, "redis://", 8) == 0) {
		ret = rlg_url_tcp(&tmp, url + 8, why, size);
	} else if (strncmp(url, "redis+sentinel://", 17) == 0) {
		ret = rlg_url_sentinel(&tmp, url + 17, why, size);
	} else if (strncmp(url, "unix:", 5) == 0) {
		ret = rlg_url_unix(&tmp, url + 5, why, size);
	} else if (strncmp(url, "rediss://", 9) == 0) {
		snprintf(why, size, "rediss:// (TLS) is not supported: use "
		    "redis:// on a trusted network, or a unix socket");
		ret = -1;
	} else {
		snprintf(why, size, "must start with redis://, "
		    "redis+sentinel:// or unix:");
		ret = -1;
	}
	if (ret != 0) {
		rlg_redis_config_free(&tmp);
		return -1;
	}
	rlg_redis_config_free(rc);
	rc->host = tmp.host;
	rc->port = tmp.port;
	rc->socket = tmp.socket;
	rc->user = tmp.user;
	rc->password = tmp.password;
	rc->db = tmp.db;
	rc->seeds = tmp.seeds;
	rc->nseeds = tmp.nseeds;
	rc->master = tmp.master;
	return 0;
}

const char *
rlg_redis_describe(const struct rlg_redis_config *rc, char *buf, size_t size)
{
	const char *host;
	char db[24] = "", *unix_url, *shown;
	size_t len, i;
	int port;

	if (rc->socket != NULL) {
		/* A path may hold what looks like a secret: masked alike. */
		if (rc->db != 0)
			snprintf(db, sizeof db, "?db=%d", rc->db);
		len = strlen(rc->socket) + 6;
		unix_url = rlg_xmalloc(len);
		snprintf(unix_url, len, "unix:%s", rc->socket);
		shown = rlg_redis_url_masked(unix_url);
		snprintf(buf, size, "redis %s%s", shown, db);
		free(shown);
		free(unix_url);
		return buf;
	}
	if (rc->host == NULL) {
		snprintf(buf, size, "redis (no url)");
		return buf;
	}
	if (rc->db != 0)
		snprintf(db, sizeof db, "/%d", rc->db);
	if (rc->cluster || rc->master != NULL) {
		/* The seed nodes or the sentinels, as many as fit. */
		len = rc->master != NULL ? (size_t)snprintf(buf, size,
		    "redis sentinel master %s via ", rc->master) :
		    (size_t)snprintf(buf, size, "redis_cluster ");
		for (i = 0; i <= rc->nseeds && len < size; i++) {
			host = i == 0 ? rc->host :
			    rc->seeds[i - 1].host;
			port = i == 0 ? rc->port :
			    rc->seeds[i - 1].port;
			len += (size_t)snprintf(buf + len, size - len,
			    strchr(host, ':') != NULL ? "%s[%s]:%d" :
			    "%s%s:%d", i > 0 ? "," : "", host, port);
		}
		if (len < size)
			snprintf(buf + len, size - len, "%s", db);
		return buf;
	}
	snprintf(buf, size, strchr(rc->host, ':') != NULL ?
	    "redis [%s]:%d%s" : "redis %s:%d%s", rc->host,
	    rc->port, db);
	return buf;
}

/*
 * redis://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB], rest after
 * "redis://": the userinfo, the host list, the database. The first
 * HOST:PORT goes to rc->host and port, the others (a Redis Cluster's seed
 * nodes) to its seeds.
 */
static int
rlg_url_tcp(struct rlg_redis_config *rc, const char *rest, char *why,
    size_t size)
{
	const char *s;
	long long v;
	size_t len;

	if (rlg_url_userinfo(rc, rest, &s, why, size) != 0 ||
	    rlg_url_list(rc, &s, RLG_REDIS_SEEDS_MAX, RLG_DEFAULT_REDIS_PORT,
	    why, size) != 0)
		return -1;
	if (*s == '/') {
		len = strlen(s + 1);
		if (len > 0 && !rlg_url_number(s + 1, len, RLG_REDIS_DB_MAX,
		    &v)) {
			snprintf(why, size, "database must be an integer from "
			    "0 to %d", RLG_REDIS_DB_MAX);
			return -1;
		}
		rc->db = len > 0 ? (int)v : 0;
		s += 1 + len;
	}
	if (*s != '\0') {
		snprintf(why, size, "unexpected \"%c\" after the host",
		    *s);
		return -1;
	}
	return 0;
}

/*
 * redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,...]/MASTER[?db=N],
 * rest after the scheme: the sentinels (port 26379 by default) to host,
 * port and seeds, the master's name to master; the userinfo and the
 * database are the master's.
 */
static int
rlg_url_sentinel(struct rlg_redis_config *rc, const char *rest, char *why,
    size_t size)
{
	const char *s, *name;
	long long v;
	size_t len;

	if (rlg_url_userinfo(rc, rest, &s, why, size) != 0 ||
	    rlg_url_list(rc, &s, RLG_REDIS_SENTINELS_MAX,
	    RLG_DEFAULT_SENTINEL_PORT, why, size) != 0)
		return -1;
	name = *s == '/' ? s + 1 : s;
	len = strcspn(name, "?");
	if (*s != '/' || len == 0) {
		snprintf(why, size, "no master name (redis+sentinel://"
		    "HOST:PORT[,HOST:PORT...]/MASTERNAME)");
		return -1;
	}
	if (!rlg_token_ok(name, len, RLG_REDIS_MASTER_MAX, "._-")) {
		snprintf(why, size, "bad master name: 1 to %d of A-Z a-z 0-9"
		    " . - _", RLG_REDIS_MASTER_MAX);
		return -1;
	}
	rc->master = rlg_xmalloc(len + 1);
	memcpy(rc->master, name, len);
	rc->master[len] = '\0';
	s = name + len;
	if (*s == '\0')
		return 0;
	if (strncmp(s, "?db=", 4) != 0 || !rlg_url_number(s + 4,
	    strlen(s + 4), RLG_REDIS_DB_MAX, &v)) {
		snprintf(why, size, "after the master name only ?db=N, N an "
		    "integer from 0 to %d", RLG_REDIS_DB_MAX);
		return -1;
	}
	rc->db = (int)v;
	return 0;
}

/*
 * The userinfo of rest (after "SCHEME://"), [[USER]:PASSWORD@], into
 * rc->user and password; *hostp where the hosts begin. The userinfo ends
 * at the last '@', so a password may hold '@', '/' and ',' as they are;
 * %XX escapes are decoded too. 0, or -1 (why).
 */
static int
rlg_url_userinfo(struct rlg_redis_config *rc, const char *rest,
    const char **hostp, char *why, size_t size)
{
	const char *at, *colon;

	at = strrchr(rest, '@');
	*hostp = at != NULL ? at + 1 : rest;
	if (at == NULL)
		return 0;
	colon = memchr(rest, ':', (size_t)(at - rest));
	if (colon == NULL) {
		snprintf(why, size, "a user needs a password "
		    "(redis://USER:PASSWORD@HOST)");
		return -1;
	}
	if (colon + 1 == at) {
		snprintf(why, size, "empty password");
		return -1;
	}
	if ((colon > rest && !rlg_url_decode(rest, (size_t)(colon - rest),
	    &rc->user)) || !rlg_url_decode(colon + 1,
	    (size_t)(at - colon - 1), &rc->password)) {
		snprintf(why, size, "bad %%XX escape in the user or "
		    "password");
		return -1;
	}
	return 0;
}

/*
 * HOST[:PORT][,HOST[:PORT]...] at *sp, at most max of them, each port
 * defport if none; *sp is moved past the list. The first goes to
 * rc->host and port, the others to rc->seeds. 0, or -1 (why).
 */
static int
rlg_url_list(struct rlg_redis_config *rc, const char **sp, size_t max,
    int defport, char *why, size_t size)
{
	const char *s = *sp;
	size_t i;
	char *h;
	int port;

	for (i = 0;; i++) {
		if (i == max) {
			snprintf(why, size, "more than %zu HOST:PORT in the "
			    "list", max);
			return -1;
		}
		if (i > 0 && (*s == ',' || *s == '/' || *s == '\0')) {
			snprintf(why, size, "empty HOST:PORT in the list");
			return -1;
		}
		if (rlg_url_host(&s, &h, &port, why, size) != 0)
			return -1;
		if (port == 0)
			port = defport;
		if (i == 0) {
			rc->host = h;
			rc->port = port;
		} else {
			if (rc->seeds == NULL)
				rc->seeds = rlg_xcalloc(max - 1,
				    sizeof *rc->seeds);
			rc->seeds[i - 1].host = h;
			rc->seeds[i - 1].port = port;
			rc->nseeds = i;
		}
		if (*s != ',')
			break;
		s++;
	}
	*sp = s;
	return 0;
}

/*
 * One HOST[:PORT] at *sp, up to a ',', a '/' or the end; *sp is moved
 * past it. The host (a new string) into *hostp, the port (0 if none:
 * the caller's default) into *portp. 0, or -1 with why set and nothing allocated.
 */
static int
rlg_url_host(const char **sp, char **hostp, int *portp, char *why,
    size_t size)
{
	const char *host = *sp, *end, *s;
	char addr[INET6_ADDRSTRLEN + 64], *h;
	struct in6_addr a6;
	long long v;
	size_t len;

	if (*host == '[') {
		end = strchr(host, ']');
		len = end != NULL ? (size_t)(end - host - 1) : 0;
		if (end == NULL || len == 0 || len >= sizeof addr) {
			snprintf(why, size, "bad IPv6 address in brackets");
			return -1;
		}
		memcpy(addr, host + 1, len);
		addr[len] = '\0';
		/* A zone (fe80::1%eth0) goes to getaddrinfo as it is. */
		s = strchr(addr, '%');
		if (s != NULL)
			addr[s - addr] = '\0';
		if (inet_pton(AF_INET6, addr, &a6) != 1) {
			snprintf(why, size, "bad IPv6 address in brackets");
			return -1;
		}
		host++;
		s = end + 1;
	} else {
		for (s = host; *s != '\0' && *s != ':' && *s != '/' &&
		    *s != ','; s++) {
			if (!((*s >= 'A' && *s <= 'Z') ||
			    (*s >= 'a' && *s <= 'z') ||
			    (*s >= '0' && *s <= '9') || *s == '.' ||
			    *s == '-' || *s == '_')) {
				snprintf(why, size, "bad host: a name of "
				    "A-Z a-z 0-9 . - _, an IPv4 address, or "
				    "an IPv6 address in brackets");
				return -1;
			}
		}
		len = (size_t)(s - host);
		if (len == 0) {
			snprintf(why, size, "no host");
			return -1;
		}
		if (len > RLG_REDIS_HOST_MAX) {
			snprintf(why, size, "host longer than %d bytes",
			    RLG_REDIS_HOST_MAX);
			return -1;
		}
	}
	*portp = 0;
	if (*s == ':') {
		end = s + 1 + strcspn(s + 1, "/,");
		if (!rlg_url_number(s + 1, (size_t)(end - s - 1), 65535, &v) ||
		    v < 1) {
			snprintf(why, size, "port must be an integer from 1 "
			    "to 65535");
			return -1;
		}
		*portp = (int)v;
		s = end;
	}
	h = rlg_xmalloc(len + 1);
	memcpy(h, host, len);
	h[len] = '\0';
	*hostp = h;
	*sp = s;
	return 0;
}

/* unix:/PATH[?db=N][&password=P][&user=U], rest after "unix:". */
static int
rlg_url_unix(struct rlg_redis_config *rc, const char *rest, char *why,
    size_t size)
{
	const char *q, *item, *eq, *next;
	char **field;
	long long v;
	size_t len;

	if (strncmp(rest, "///", 3) == 0)
		rest += 2;                 /* unix:///PATH: an empty authority */
	if (*rest != '/') {
		snprintf(why, size, "the socket path must be absolute "
		    "(unix:/PATH)");
		return -1;
	}
	q = strchr(rest, '?');
	len = q != NULL ? (size_t)(q - rest) : strlen(rest);
	if (len > RLG_REDIS_SOCKET_MAX) {
		snprintf(why, size, "socket path longer than %zu bytes",
		    (size_t)RLG_REDIS_SOCKET_MAX);
		return -1;
	}
	rc->socket = rlg_xmalloc(len + 1);
	memcpy(rc->socket, rest, len);
	rc->socket[len] = '\0';
	for (item = q != NULL ? q + 1 : NULL; item != NULL; item = next) {
		next = strchr(item, '&');
		len = next != NULL ? (size_t)(next - item) : strlen(item);
		if (next != NULL)
			next++;
		eq = memchr(item, '=', len);
		if (eq == NULL) {
			snprintf(why, size, "parameters are NAME=VALUE: db, "
			    "password, user");
			return -1;
		}
		len -= (size_t)(eq + 1 - item);
		if ((size_t)(eq - item) == 2 && strncmp(item, "db", 2) == 0) {
			if (!rlg_url_number(eq + 1, len, RLG_REDIS_DB_MAX,
			    &v)) {
				snprintf(why, size, "database must be an "
				    "integer from 0 to %d", RLG_REDIS_DB_MAX);
				return -1;
			}
			rc->db = (int)v;
			continue;
		}
		if ((size_t)(eq - item) == 8 &&
		    strncmp(item, "password", 8) == 0)
			field = &rc->password;
		else if ((size_t)(eq - item) == 4 &&
		    strncmp(item, "user", 4) == 0)
			field = &rc->user;
		else {
			snprintf(why, size, "unknown parameter \"%.*s\": db, "
			    "password, user", (int)(eq - item) > 32 ? 32 :
			    (int)(eq - item), item);
			return -1;
		}
		free(*field);
		*field = NULL;
		if (len == 0) {
			snprintf(why, size, "empty %.*s", (int)(eq - item),
			    item);
			return -1;
		}
		if (!rlg_url_decode(eq + 1, len, field)) {
			snprintf(why, size, "bad %%XX escape in the user or "
			    "password");
			return -1;
		}
	}
	if (rc->user != NULL && rc->password == NULL) {
		snprintf(why, size, "a user needs a password");
		return -1;
	}
	return 0;
}

/*
 * s[0..len) with %XX escapes decoded, into a new string *out. false for
 * a bad escape or one that gives a NUL byte.
 */
static bool
rlg_url_decode(const char *s, size_t len, char **out)
{
	char *d;
	size_t i, n = 0;
	int hi, lo;

	d = rlg_xmalloc(len + 1);
	for (i = 0; i < len; i++) {
		if (s[i] != '%') {
			d[n++] = s[i];
			continue;
		}
		hi = i + 2 < len ? rlg_hexval((unsigned char)s[i + 1]) : -1;
		lo = hi >= 0 ? rlg_hexval((unsigned char)s[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(d);
			return false;
		}
		d[n++] = (char)(hi * 16 + lo);
		i += 2;
	}
	d[n] = '\0';
	free(*out);
	*out = d;
	return true;
}

/* s[0..len): digits only, at most max. */
static bool
rlg_url_number(const char *s, size_t len, long long max, long long *out)
{
	long long v = 0;
	size_t i;

	if (len == 0 || len > 19)
		return false;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
		if (v > max)
			return false;
	}
	*out = v;
	return true;
}

/*
 * url for a message, whatever its shape, valid or not, with every part
 * that may be a secret replaced by three stars: the userinfo, up to the
 * last '@' (where rlg_url_tcp ends it), from after "SCHEME://", else
 * after "unix:", else from the start ("redis://<stars>@h"); and in a
 * query, from the first '?' or '&', every value but db's and every item
 * that is no NAME=VALUE ("unix:/p?password=<stars>&db=1"). A new string.
 */
char *
rlg_redis_url_masked(const char *url)
{
	size_t len = strlen(url), i, from, at, q, item, end, eq, out;
	bool *hide, dbl = false;
	char *s;

	hide = rlg_xcalloc(len + 1, sizeof *hide);
	/* The scheme, if any: a letter, then letters, digits, + - . */
	for (i = 0; i < len && (isalpha((unsigned char)url[i]) || (i > 0 &&
	    (isdigit((unsigned char)url[i]) || url[i] == '+' ||
	    url[i] == '-' || url[i] == '.'))); i++)
		;
	from = 0;
	if (i > 0 && i < len && url[i] == ':') {
		dbl = strncmp(url + i, "://", 3) == 0;
		if (dbl)
			from = i + 3;
		else if (rlg_url_word(url, i, "unix"))
			from = i + 1;
	}
	/* The userinfo: a '@' ends it; with "//" the last one anywhere. */
	q = from + strcspn(url + from, "?&");
	for (at = dbl ? len : q; at > from && url[at - 1] != '@'; at--)
		;
	for (i = from; at > from && i < at - 1; i++)
		hide[i] = true;
	/* The query: each item NAME=VALUE, '&' between them. */
	for (item = q; item < len; item = end) {
		item++;
		end = item + strcspn(url + item, "&");
		eq = item + strcspn(url + item, "=");
		if (eq < end && rlg_url_param_name(url + item, eq - item)) {
			if (rlg_url_word(url + item, eq - item, "db"))
				continue;
			for (i = eq + 1; i < end; i++)
				hide[i] = true;
		} else if (eq < end || !(rlg_url_word(url + item, end - item,
		    "db") || rlg_url_word(url + item, end - item,
		    "password") || rlg_url_word(url + item, end - item,
		    "user"))) {
			/* Not NAME=VALUE: a piece of a value, maybe. */
			for (i = item; i < end; i++)
				hide[i] = true;
		}
	}
	/* Each run of hidden bytes becomes one "***". */
	s = rlg_xmalloc(3 * len + 1);
	for (i = 0, out = 0; i < len; i++) {
		if (!hide[i])
			s[out++] = url[i];
		else if (i == 0 || !hide[i - 1]) {
			memcpy(s + out, "***", 3);
			out += 3;
		}
	}
	s[out] = '\0';
	free(hide);
	return s;
}

/* Whether s[0..len) is word. */
static bool
rlg_url_word(const char *s, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(s, word, len) == 0;
}

/* A query parameter's name: 1 to 32 of A-Z a-z 0-9 _ -. */
static bool
rlg_url_param_name(const char *s, size_t len)
{
	return rlg_token_ok(s, len, 32, "_-");
}

void
rlg_redis_config_free(struct rlg_redis_config *rc)
{
	size_t i;

	for (i = 0; i < rc->nseeds; i++)
		free(rc->seeds[i].host);
	free(rc->seeds);
	rc->seeds = NULL;
	rc->nseeds = 0;
	free(rc->host);
	free(rc->socket);
	free(rc->master);
	rc->master = NULL;
	free(rc->user);
	free(rc->password);
	rc->host = NULL;
	rc->socket = NULL;
	rc->user = NULL;
	rc->password = NULL;
	rc->db = 0;
}
