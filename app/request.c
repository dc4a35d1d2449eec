/*
 * request.c: FastCGI/CGI parameters -> struct rlg_request, and the store
 * key a policy derives from it.
 *
 * Input here is hostile: every parameter may be missing, huge, or full of
 * bytes no browser sends. Each value is copied into a bounded buffer or
 * rejected; nothing is borrowed past the request, and nothing fails loudly:
 * the router answers 400 for a path it cannot read, and a client without a
 * usable address shares the RLG_CLIENT_UNKNOWN key.
 *
 * The client address is REMOTE_ADDR unless that peer is a trusted proxy.
 * Then Forwarded (RFC 7239) or X-Forwarded-For names it, read from the
 * right: every proxy appends the address it saw, so the hops to the right
 * were written by proxies we trust and the first untrusted one is the
 * client; anything to its left was written by the client and is ignored.
 * A hop we cannot read (malformed, "unknown", "_obfuscated") ends the walk
 * at the last trusted address, the nearest one we can vouch for. The work
 * is bounded: a header over RLG_FWD_HEADER_MAX bytes is not read at all
 * (the peer is the client), and at most RLG_FWD_HOPS_MAX hops are examined.
 *
 * An API key header never reaches the store: policy keys carry a keyed
 * BLAKE2b hash of it (libsodium), so the database, its logs and the
 * operator views hold no credential.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "net.h"
#include "request.h"
#include "util.h"

/* Longest Forwarded / X-Forwarded-For value read, in bytes. */
#define RLG_FWD_HEADER_MAX 8192
/* Most hops examined, from the right. */
#define RLG_FWD_HOPS_MAX   64
/* Longest decoded Forwarded node ("[IPv6]:port"), with NUL. */
#define RLG_FWD_NODE_MAX   64
/* Bytes of the header hash in a policy key ("k:" + 2 hex digits each). */
#define RLG_KEY_HASH_BYTES 16

/* One hop: the raw text of an X-Forwarded-For entry or of a Forwarded
 * for= value (quoted: still escaped); s == NULL for an unreadable hop. */
struct fwd_hop {
	const char *s;
	size_t len;
	bool quoted;
};

/* The last RLG_FWD_HOPS_MAX hops of a header; n counts all of them, the
 * newest is ring[(n - 1) % RLG_FWD_HOPS_MAX]. */
struct fwd_hops {
	struct fwd_hop ring[RLG_FWD_HOPS_MAX];
	size_t n;
};

static enum rlg_method method_of(const char *m);
static enum rlg_role role_of(const char *role);
static bool is_tchar(int c);
static const char *skip_ows(const char *p);
static void hops_push(struct fwd_hops *hs, const char *s, size_t len,
    bool quoted);
static void split_xff(const char *h, struct fwd_hops *hs);
static size_t split_forwarded(const char *h, struct fwd_hops *hs);
static int parse_node(const struct fwd_hop *hop, bool forwarded,
    struct rlg_addr *out);
static bool walk_hops(const struct fwd_hops *hs, bool forwarded,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out);
static bool client_from_proxy(char *const *envp,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out);
static void sodium_start(void);

const char *
rlg_request_param(char *const *envp, const char *name)
{
	size_t len = strlen(name);

	if (envp == NULL)
		return NULL;
	for (; *envp != NULL; envp++) {
		if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
			return *envp + len + 1;
	}
	return NULL;
}

int
rlg_request_decode_path(const char *uri, char *out, size_t outlen)
{
	size_t n = 0;
	const char *p;

	if (outlen == 0)
		return RLG_ENOSPC;
	for (p = uri; *p != '\0' && *p != '?' && *p != '#'; p++) {
		int c = (unsigned char)*p;

		if (c == '%') {
			int hi = rlg_hexval((unsigned char)p[1]);
			int lo = hi < 0 ? -1 : rlg_hexval((unsigned char)p[2]);

			if (hi < 0 || lo < 0)
				goto bad;
			c = hi * 16 + lo;
			if (c == 0)
				goto bad;
			p += 2;
		}
		if (n + 1 >= outlen) {
			out[0] = '\0';
			return RLG_ENOSPC;
		}
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return RLG_OK;
bad:
	out[0] = '\0';
	return RLG_EINVAL;
}

static enum rlg_method
method_of(const char *m)
{
	if (strcmp(m, "GET") == 0)
		return RLG_METHOD_GET;
	if (strcmp(m, "HEAD") == 0)
		return RLG_METHOD_HEAD;
	return RLG_METHOD_OTHER;
}

static enum rlg_role
role_of(const char *role)
{
	if (role == NULL || strcmp(role, "RESPONDER") == 0)
		return RLG_ROLE_RESPONDER;
	if (strcmp(role, "AUTHORIZER") == 0)
		return RLG_ROLE_AUTHORIZER;
	return RLG_ROLE_OTHER;
}

/* RFC 9110 token characters. */
static bool
is_tchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static const char *
skip_ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static void
hops_push(struct fwd_hops *hs, const char *s, size_t len, bool quoted)
{
	struct fwd_hop *h = &hs->ring[hs->n % RLG_FWD_HOPS_MAX];

	h->s = s;
	h->len = len;
	h->quoted = quoted;
	hs->n++;
}

/*
 * X-Forwarded-For: "client, proxy1, proxy2", optional whitespace around
 * the commas (several header lines arrive joined with ", "). An empty
 * entry is kept as a hop, and fails to parse like any other bad one.
 */
static void
split_xff(const char *h, struct fwd_hops *hs)
{
	const char *p = h, *end;

	for (;;) {
		p = skip_ows(p);
		end = p + strcspn(p, ",");
		hops_push(hs, p, (size_t)(end - p), false);
		while (hs->ring[(hs->n - 1) % RLG_FWD_HOPS_MAX].len > 0 &&
		    (end[-1] == ' ' || end[-1] == '\t')) {
			hs->ring[(hs->n - 1) % RLG_FWD_HOPS_MAX].len--;
			end--;
		}
		p += strcspn(p, ",");
		if (*p == '\0')
			break;
		p++;
	}
}

/*
 * Forwarded (RFC 7239 section 4): elements separated by ",", each a list
 * of name=value pairs separated by ";", a value a token or a quoted
 * string. One hop per non-empty element: its for= value, or an unreadable
 * hop when the element is malformed, lacks for= or repeats it. A syntax
 * error skips to the next comma outside quotes, so an unterminated quote
 * swallows everything after it into one unreadable hop. Returns how many
 * for= parameters were seen (0: the header names no addresses).
 */
static size_t
split_forwarded(const char *h, struct fwd_hops *hs)
{
	const char *p = h, *name, *v;
	size_t nfor_total = 0;

	for (;;) {
		struct fwd_hop hop = { NULL, 0, false };
		size_t npairs = 0, nfor = 0, namelen;
		bool bad = false, in_q;

		for (;;) {
			p = skip_ows(p);
			if (*p == ';') {
				p++;
				continue;
			}
			if (*p == ',' || *p == '\0')
				break;
			name = p;
			while (is_tchar((unsigned char)*p))
				p++;
			namelen = (size_t)(p - name);
			if (namelen == 0 || *p != '=') {
				bad = true;
				break;
			}
			p++;
			v = p;
			if (*p == '"') {
				for (p++; *p != '\0' && *p != '"'; p++) {
					if (*p == '\\' && p[1] != '\0')
						p++;
				}
				if (*p != '"') {
					bad = true;
					break;
				}
				p++;
			} else {
				while (is_tchar((unsigned char)*p))
					p++;
				if (p == v) {
					bad = true;
					break;
				}
			}
			npairs++;
			if (namelen == 3 && strncasecmp(name, "for", 3) == 0) {
				nfor++;
				hop.quoted = *v == '"';
				hop.s = hop.quoted ? v + 1 : v;
				hop.len = (size_t)(p - v) - (hop.quoted ? 2 : 0);
			}
			p = skip_ows(p);
			if (*p == ';') {
				p++;
				continue;
			}
			if (*p != ',' && *p != '\0')
				bad = true;
			break;
		}
		if (bad) {
			for (in_q = false; *p != '\0'; p++) {
				if (in_q && *p == '\\' && p[1] != '\0')
					p++;
				else if (*p == '"')
					in_q = !in_q;
				else if (!in_q && *p == ',')
					break;
			}
		}
		nfor_total += nfor;
		if (bad || nfor != 1)
			hop.s = NULL;
		if (bad || npairs > 0)
			hops_push(hs, hop.s, hop.len, hop.quoted);
		if (*p == '\0')
			break;
		p++;
	}
	return nfor_total;
}

/*
 * Reads one hop as an address. X-Forwarded-For: a bare IPv4 or IPv6
 * address. Forwarded (RFC 7239 section 6): IPv4 or "[IPv6]", optionally
 * ":port" or ":_obfport"; a port needs the quotes, which the splitter
 * enforces (':' is no token character). "unknown" and "_obfuscated"
 * identifiers name no address. Returns 0, or -1 if the hop names no
 * address we can use.
 */
static int
parse_node(const struct fwd_hop *hop, bool forwarded, struct rlg_addr *out)
{
	char node[RLG_FWD_NODE_MAX], host[RLG_FWD_NODE_MAX];
	const char *port, *close;
	size_t n = 0, i;

	if (hop->s == NULL || hop->len == 0 || hop->len >= sizeof node)
		return -1;
	for (i = 0; i < hop->len; i++) {
		if (hop->quoted && hop->s[i] == '\\' && i + 1 < hop->len)
			i++;
		node[n++] = hop->s[i];
	}
	node[n] = '\0';
	if (!forwarded)
		return rlg_addr_parse(node, out);

	if (node[0] == '[') {
		close = strchr(node, ']');
		if (close == NULL)
			return -1;
		n = (size_t)(close - node - 1);
		memcpy(host, node + 1, n);
		host[n] = '\0';
		if (strchr(host, ':') == NULL)
			return -1;      /* "[192.0.2.1]": brackets are for IPv6 */
		port = close + 1;
	} else {
		n = strcspn(node, ":");
		memcpy(host, node, n);
		host[n] = '\0';
		/* "unknown", "_hidden", or a bare IPv6 without brackets */
		if (strchr(host, '.') == NULL || host[0] == '_')
			return -1;
		port = node + n;
	}
	if (*port != '\0') {
		if (*port++ != ':' || *port == '\0')
			return -1;
		if (*port == '_') {
			if (port[1] == '\0')
				return -1;
			for (port++; *port != '\0'; port++) {
				if (!isalnum((unsigned char)*port) &&
				    strchr("._-", *port) == NULL)
					return -1;
			}
		} else if (strlen(port) > 5 ||
		    strspn(port, "0123456789") != strlen(port)) {
			return -1;
		}
	}
	return rlg_addr_parse(host, out);
}

/*
 * Walks hs from the right, starting from the trusted peer. Writes the
 * client to out and returns true when it came from the header, false when
 * the walk ended at the peer.
 */
static bool
walk_hops(const struct fwd_hops *hs, bool forwarded,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out)
{
	struct rlg_addr last = *peer, a;
	bool from_header = false;
	size_t i;

	for (i = 0; i < hs->n && i < RLG_FWD_HOPS_MAX; i++) {
		const struct fwd_hop *hop =
		    &hs->ring[(hs->n - 1 - i) % RLG_FWD_HOPS_MAX];

		if (parse_node(hop, forwarded, &a) != 0)
			break;
		if (!rlg_cidr_any(cc->trusted_proxies, cc->ntrusted, &a)) {
			*out = a;
			return true;
		}
		last = a;
		from_header = true;
	}
	*out = last;
	return from_header;
}

/*
 * The client behind a trusted peer, from the one header the operator says
 * the trusted proxies set (cc->forwarded_header): a header a proxy merely
 * passes through would let the client choose its key. Returns true when
 * out came from that header; else out is the peer.
 */
static bool
client_from_proxy(char *const *envp, const struct rlg_client_config *cc,
    const struct rlg_addr *peer, struct rlg_addr *out)
{
	bool forwarded = cc->forwarded_header == RLG_FWD_FORWARDED;
	struct fwd_hops hs;
	const char *h;

	*out = *peer;
	h = rlg_request_param(envp, forwarded ? "HTTP_FORWARDED" :
	    "HTTP_X_FORWARDED_FOR");
	/* Oversized: no hop in it can be trusted. */
	if (h == NULL || strnlen(h, RLG_FWD_HEADER_MAX + 1) >
	    RLG_FWD_HEADER_MAX)
		return false;
	hs.n = 0;
	if (forwarded) {
		if (split_forwarded(h, &hs) == 0)
			return false;
	} else {
		split_xff(h, &hs);
	}
	return walk_hops(&hs, forwarded, cc, peer, out);
}

void
rlg_request_parse(struct rlg_request *r, char *const *envp,
    const struct rlg_client_config *cc)
{
	const char *method, *uri, *script, *info;
	struct rlg_addr peer;
	int n;

	memset(r, 0, sizeof *r);
	r->envp = envp;
	r->role = role_of(rlg_request_param(envp, "FCGI_ROLE"));

	method = rlg_request_param(envp, "REQUEST_METHOD");
	if (method == NULL)
		method = "";
	snprintf(r->method_name, sizeof r->method_name, "%s", method);
	r->method = method_of(method);

	/*
	 * REQUEST_URI is what the client sent, under lighttpd, Apache
	 * mod_proxy_fcgi and CGI alike; SCRIPT_NAME and PATH_INFO depend on
	 * how the server mounts us and are already decoded, so they are only
	 * the fallback, taken as they are.
	 */
	uri = rlg_request_param(envp, "REQUEST_URI");
	if (uri != NULL) {
		r->path_ok = uri[0] == '/' &&
		    rlg_request_decode_path(uri, r->path, sizeof r->path) == RLG_OK;
	} else {
		script = rlg_request_param(envp, "SCRIPT_NAME");
		info = rlg_request_param(envp, "PATH_INFO");
		if (script == NULL)
			script = "";
		if (info == NULL)
			info = "";
		n = snprintf(r->path, sizeof r->path, "%s%s", script, info);
		r->path_ok = r->path[0] == '/' && n > 0 &&
		    (size_t)n < sizeof r->path;
	}
	if (!r->path_ok)
		r->path[0] = '\0';

	if (rlg_addr_parse(rlg_request_param(envp, "REMOTE_ADDR"), &peer) != 0) {
		snprintf(r->client, sizeof r->client, "%s", RLG_CLIENT_UNKNOWN);
		return;
	}
	r->addr = peer;
	if (cc != NULL && cc->ntrusted > 0 &&
	    rlg_cidr_any(cc->trusted_proxies, cc->ntrusted, &peer))
		r->via_proxy = client_from_proxy(envp, cc, &peer, &r->addr);
	r->addr_ok = true;
	rlg_addr_key(&r->addr, cc != NULL ? cc->ipv6_prefix :
	    RLG_DEFAULT_IPV6_PREFIX, r->client);
}

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;

static void
sodium_start(void)
{
	if (sodium_init() < 0) {
		rlg_log("libsodium failed to initialise");
		abort();
	}
}

int
rlg_request_policy_key(const struct rlg_request *r,
    const struct rlg_policy *p, const struct rlg_client_config *cc,
    char *out, size_t len)
{
	unsigned char secret[crypto_generichash_KEYBYTES];
	unsigned char hash[RLG_KEY_HASH_BYTES];
	char name[256], hex[2 * RLG_KEY_HASH_BYTES + 1];
	const char *value = NULL;
	size_t i;
	int n;

	if (len > 0)
		out[0] = '\0';
	if ((p->key & RLG_KEY_HEADER) && p->key_header != NULL &&
	    strlen(p->key_header) < sizeof name - 5) {
		/* CGI names a header HTTP_ + its name, upper case, '-' -> '_'. */
		memcpy(name, "HTTP_", 5);
		for (i = 0; p->key_header[i] != '\0'; i++) {
			int c = (unsigned char)p->key_header[i];

			name[5 + i] = (char)(c == '-' ? '_' : toupper(c));
		}
		name[5 + i] = '\0';
		value = rlg_request_param(r->envp, name);
		if (value != NULL && value[0] == '\0')
			value = NULL;
	}
	if (value == NULL) {
		n = snprintf(out, len, "%s", r->client);
		goto done;
	}

	pthread_once(&sodium_once, sodium_start);
	/* The secret is stretched to a full BLAKE2b key; an unset one gives
	 * an unkeyed hash (still no raw value, but guessable offline). */
	if (cc != NULL && cc->key_secret != NULL) {
		crypto_generichash(secret, sizeof secret,
		    (const unsigned char *)cc->key_secret,
		    strlen(cc->key_secret), NULL, 0);
		crypto_generichash(hash, sizeof hash,
		    (const unsigned char *)value, strlen(value),
		    secret, sizeof secret);
		sodium_memzero(secret, sizeof secret);
	} else {
		crypto_generichash(hash, sizeof hash,
		    (const unsigned char *)value, strlen(value), NULL, 0);
	}
	sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
	if (p->key & RLG_KEY_IP)
		n = snprintf(out, len, "%s|k:%s", r->client, hex);
	else
		n = snprintf(out, len, "k:%s", hex);
done:
	if (n < 0 || (size_t)n >= len) {
		if (len > 0)
			out[0] = '\0';
		return RLG_ENOSPC;
	}
	return RLG_OK;
}
