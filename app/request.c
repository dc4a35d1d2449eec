/*
 * request.c: FastCGI/CGI parameters -> struct rlg_request, and the store
 * key a policy derives from it.
 *
 * Input here is hostile: every parameter may be missing, huge, or full of
 * bytes no browser sends. Each value is copied into a bounded buffer or
 * rejected; nothing is borrowed past the request, and nothing fails loudly:
 * a request rlgate cannot route or key safely carries a flaw (r->flaw),
 * which the gate answers with 400, and a client without a usable address
 * shares the RLG_CLIENT_UNKNOWN key.
 *
 * The client address is REMOTE_ADDR unless that peer is a trusted proxy.
 * Then Forwarded (RFC 7239) or X-Forwarded-For names it, read from the
 * right: every proxy appends the address it saw, so the hops to the right
 * were written by proxies we trust and the first untrusted one is the
 * client; anything to its left was written by the client and is ignored.
 * The walk never falls back to a shared or exempt key: a hop it needs and
 * cannot read (malformed, a for= value that is no node, a header over
 * RLG_FWD_HEADER_MAX bytes, more than RLG_FWD_HOPS_MAX trusted hops) is a
 * flaw, and the request is refused (400); a hop that says it hides the
 * address ("unknown", an "_obfuscated" node, a Forwarded element without
 * for=) makes the client RLG_CLIENT_UNKNOWN, which no exemption covers.
 *
 * Look-alike headers: the web server names a header HTTP_ + its name in
 * upper case with '-' as '_', so X-Forwarded-For and X_Forwarded_For (or
 * x-forwarded_for) arrive as two parameters of the same name, one set by
 * the proxy and one by the client. A header rlgate reads for identity that
 * comes more than once is a flaw: it is never resolved by order.
 *
 * The path is the one the web server will serve: percent-decoded once, dot
 * segments removed (RFC 3986 section 5.2.4) and repeated slashes merged,
 * as lighttpd and Apache do before they map a URL to a file; an encoded
 * '/' or NUL, a bad escape or a path over RLG_PATH_MAX bytes is a flaw.
 *
 * An API key header never reaches the store: policy keys carry a keyed
 * BLAKE2b hash of it (libsodium), so the database, its logs and the
 * operator views hold no credential.
 */
#include <ctype.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "net.h"
#include "path.h"
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
_Static_assert(RLG_KEY_HASH_TEXT == 3 + 2 * RLG_KEY_HASH_BYTES,
    "request.h's RLG_KEY_HASH_TEXT holds k: and the hash in hex");

/*
 * One hop: the raw text of an X-Forwarded-For entry or of a Forwarded
 * for= value (quoted: still escaped). bad: the element is malformed (a
 * syntax error, for= twice); s == NULL and !bad: a Forwarded element
 * without for=, which names no address.
 */
struct fwd_hop {
	const char *s;
	size_t len;
	bool quoted;
	bool bad;
};

/* The last RLG_FWD_HOPS_MAX hops of a header; n counts all of them, the
 * newest is ring[(n - 1) % RLG_FWD_HOPS_MAX]. */
struct fwd_hops {
	struct fwd_hop ring[RLG_FWD_HOPS_MAX];
	size_t n;
};

/* What one hop says. */
enum hop_kind {
	HOP_ADDR,                  /* an address */
	HOP_HIDDEN,                /* "unknown", "_obfuscated", no for= */
	HOP_BAD,                   /* nothing we can read */
};

/* Where the walk behind a trusted peer ended. */
enum walk_end {
	WALK_PEER,                 /* no header naming anyone: the peer */
	WALK_CLIENT,               /* the client's address from the header */
	WALK_HIDDEN,               /* a trusted proxy hides the client */
	WALK_BAD,                  /* malformed or oversized: a flaw */
	WALK_DUPLICATE,            /* the header came twice: a flaw */
};

static enum rlg_method method_of(const char *m);
static enum rlg_role role_of(char *const *envp, bool *bad);
static const char *described(char *const *envp, enum rlg_role role,
    bool trusted, const char *param, const char *header, const char *plain,
    bool *duplicate);
static bool is_tchar(int c);
static const char *skip_ows(const char *p);
static const char *absolute_form_path(const char *uri);
static bool dot_params(const char *path);
static void hops_push(struct fwd_hops *hs, const char *s, size_t len,
    bool quoted, bool bad);
static void split_xff(const char *h, struct fwd_hops *hs);
static void split_forwarded(const char *h, struct fwd_hops *hs);
static const char *skip_element(const char *p);
static enum hop_kind parse_node(const struct fwd_hop *hop, bool forwarded,
    struct rlg_addr *out);
static bool obfuscated_ok(const char *s);
static enum hop_kind parse_host_port(char *node, bool forwarded,
    struct rlg_addr *out);
static enum walk_end walk_hops(const struct fwd_hops *hs, bool forwarded,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out);
static enum walk_end client_from_proxy(char *const *envp,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out);
static void parse_path(struct rlg_request *r, char *const *envp,
    const char *uri);
static void sodium_start(void);
static bool header_param(const char *header, char *out, size_t len);

const char *
rlg_request_param(char *const *envp, const char *name)
{
	size_t len = strlen(name);

	if (envp == NULL)
		return NULL;
	/* The first byte before the call: most names differ there. */
	for (; *envp != NULL; envp++) {
		if ((*envp)[0] == name[0] && strncmp(*envp, name, len) == 0 &&
		    (*envp)[len] == '=')
			return *envp + len + 1;
	}
	return NULL;
}

int
rlg_request_header(char *const *envp, const char *name, const char **value)
{
	size_t len = strlen(name);
	int n = 0;

	*value = NULL;
	if (envp == NULL)
		return 0;
	for (; *envp != NULL; envp++) {
		if ((*envp)[0] != name[0] || strncmp(*envp, name, len) != 0 ||
		    (*envp)[len] != '=')
			continue;
		if (n++ > 0) {
			*value = NULL;
			return 2;
		}
		*value = *envp + len + 1;
	}
	return n;
}

const char *
rlg_flaw_name(enum rlg_flaw f)
{
	switch (f) {
	case RLG_FLAW_NONE:
		return "none";
	case RLG_FLAW_PATH:
		return "bad_path";
	case RLG_FLAW_DUPLICATE:
		return "duplicate_header";
	case RLG_FLAW_FORWARDED:
		return "bad_forwarded";
	case RLG_FLAW_ROLE:
		return "bad_role";
	case RLG_FLAW_COST:
		return "bad_cost";
	}
	return "unknown";
}

/*
 * An absolute-form request target ("http://host:port/path?q", RFC 9112
 * section 3.2.2), which Apache passes in REQUEST_URI as the client sent
 * it: the path part, "" when it has none (the server serves "/"), or NULL
 * when uri is no absolute URI.
 */
static const char *
absolute_form_path(const char *uri)
{
	const char *p = uri;

	if (!isalpha((unsigned char)*p))
		return NULL;
	while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' ||
	    *p == '.')
		p++;
	if (strncmp(p, "://", 3) != 0)
		return NULL;
	p += 3;
	return p + strcspn(p, "/?#");
}

int
rlg_request_decode_path(const char *uri, char *out, size_t outlen)
{
	size_t n = 0;
	const char *p;

	if (outlen < 2)
		return RLG_ENOSPC;
	if (uri[0] != '/') {
		uri = absolute_form_path(uri);
		if (uri == NULL)
			goto bad;
		if (*uri != '/') {
			/* "http://host" or "http://host?q": the root. */
			memcpy(out, "/", 2);
			return RLG_OK;
		}
	}
	for (p = uri; *p != '\0' && *p != '?' && *p != '#'; p++) {
		int c = (unsigned char)*p;

		if (c == '%') {
			int hi = rlg_hexval((unsigned char)p[1]);
			int lo = hi < 0 ? -1 : rlg_hexval((unsigned char)p[2]);

			if (hi < 0 || lo < 0)
				goto bad;
			c = hi * 16 + lo;
			/*
			 * An encoded NUL ends no C string safely; an encoded
			 * '/' is a separator to some servers and a name byte
			 * to others (Apache refuses it, lighttpd keeps it):
			 * either reading could be the wrong one.
			 */
			if (c == 0 || c == '/')
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
	rlg_path_normalize(out);
	if (dot_params(out))
		goto bad;
	return RLG_OK;
bad:
	out[0] = '\0';
	return RLG_EINVAL;
}

/*
 * True if a segment of path is "." or ".." followed by ";params":
 * Tomcat and Spring drop the params, then resolve the dot segment; a
 * server that keeps it as a name serves another resource.
 */
static bool
dot_params(const char *path)
{
	const char *seg;

	for (seg = strchr(path, '/'); seg != NULL; seg = strchr(seg, '/')) {
		seg++;
		if (seg[0] == '.' && seg[1] == '.')
			seg++;
		if (seg[0] == '.' && seg[1] == ';')
			return true;
	}
	return false;
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

/*
 * FCGI_ROLE, then for a responder the front's RLGATE_ROLE: *bad when it
 * names no role (the request is refused, never taken for a responder's:
 * a front that asks "may it pass?" must not get a resource for an answer).
 */
static enum rlg_role
role_of(char *const *envp, bool *bad)
{
	const char *role = rlg_request_param(envp, "FCGI_ROLE");
	const char *front;

	*bad = false;
	if (role != NULL && strcmp(role, "AUTHORIZER") == 0)
		return RLG_ROLE_AUTHORIZER;
	if (role != NULL && strcmp(role, "RESPONDER") != 0)
		return RLG_ROLE_OTHER;
	front = rlg_request_param(envp, RLG_PARAM_ROLE);
	if (front == NULL)
		return RLG_ROLE_RESPONDER;
	if (strcmp(front, "auth_request") == 0)
		return RLG_ROLE_AUTH_REQUEST;
	if (strcmp(front, "forward_auth") == 0)
		return RLG_ROLE_FORWARD_AUTH;
	*bad = true;
	return RLG_ROLE_OTHER;
}

/*
 * One part of the original request in a role where a front describes it:
 * the front's own parameter, else (forward_auth, from a trusted peer) its
 * X-Forwarded- header (sent twice: *duplicate), else the plain parameter.
 * A responder's and an authorizer's request is its own description.
 */
static const char *
described(char *const *envp, enum rlg_role role, bool trusted,
    const char *param, const char *header, const char *plain,
    bool *duplicate)
{
	const char *v;

	if (role == RLG_ROLE_AUTH_REQUEST || role == RLG_ROLE_FORWARD_AUTH) {
		if ((v = rlg_request_param(envp, param)) != NULL)
			return v;
		if (role == RLG_ROLE_FORWARD_AUTH && trusted) {
			switch (rlg_request_header(envp, header, &v)) {
			case 0:
				break;
			case 1:
				return v;
			default:
				*duplicate = true;
				return NULL;
			}
		}
	}
	return rlg_request_param(envp, plain);
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
hops_push(struct fwd_hops *hs, const char *s, size_t len, bool quoted,
    bool bad)
{
	struct fwd_hop *h = &hs->ring[hs->n % RLG_FWD_HOPS_MAX];

	h->s = s;
	h->len = len;
	h->quoted = quoted;
	h->bad = bad;
	hs->n++;
}

/*
 * X-Forwarded-For: "client, proxy1, proxy2", optional whitespace around
 * the commas (several header lines arrive joined with ", "). An empty
 * entry is kept as a hop, and fails to parse like any other bad one; a
 * value of nothing but whitespace names nobody (no hop at all).
 */
static void
split_xff(const char *h, struct fwd_hops *hs)
{
	const char *p = h, *end;
	size_t len;

	if (*skip_ows(h) == '\0')
		return;
	for (;;) {
		p = skip_ows(p);
		end = p + strcspn(p, ",");
		len = (size_t)(end - p);
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		hops_push(hs, p, len, false, false);
		if (*end == '\0')
			break;
		p = end + 1;
	}
}

/*
 * Forwarded (RFC 7239 section 4): elements separated by ",", each a list
 * of name=value pairs separated by ";", a value a token or a quoted
 * string. One hop per non-empty element: its for= value; a bad hop when
 * the element is malformed or repeats for=; a hop naming no address when
 * it lacks for=. A syntax error skips to the next comma outside quotes, so
 * an unterminated quote swallows everything after it into one bad hop,
 * which is the newest, and the walk refuses it.
 */
static void
split_forwarded(const char *h, struct fwd_hops *hs)
{
	const char *p = h, *name, *v;

	for (;;) {
		struct fwd_hop hop = { NULL, 0, false, false };
		size_t npairs = 0, nfor = 0, namelen;
		bool bad = false;

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
		if (bad)
			p = skip_element(p);
		if (bad || nfor > 1)
			hops_push(hs, NULL, 0, false, true);
		else if (npairs > 0)
			hops_push(hs, hop.s, hop.len, hop.quoted, false);
		if (*p == '\0')
			break;
		p++;
	}
}

/*
 * After a syntax error in a Forwarded element: p moved to the next ','
 * outside a quoted string (a backslash escapes inside one), or to the
 * end.
 */
static const char *
skip_element(const char *p)
{
	bool in_q;

	for (in_q = false; *p != '\0'; p++) {
		if (in_q && *p == '\\' && p[1] != '\0')
			p++;
		else if (*p == '"')
			in_q = !in_q;
		else if (!in_q && *p == ',')
			break;
	}
	return p;
}

/*
 * Reads one hop. X-Forwarded-For: an IPv4 or IPv6 address, or the node
 * forms below (some proxies add a port), or "unknown". Forwarded (RFC 7239
 * section 6): IPv4 or "[IPv6]", optionally ":port" or ":_obfport", or
 * "unknown" or an "_obfuscated" identifier (a port needs the quotes,
 * which the splitter enforces: ':' is no token character).
 */
static enum hop_kind
parse_node(const struct fwd_hop *hop, bool forwarded, struct rlg_addr *out)
{
	char node[RLG_FWD_NODE_MAX];
	size_t n = 0, i;

	if (hop->bad)
		return HOP_BAD;
	if (hop->s == NULL)
		return HOP_HIDDEN;
	if (hop->len == 0 || hop->len >= sizeof node)
		return HOP_BAD;
	for (i = 0; i < hop->len; i++) {
		if (hop->quoted && hop->s[i] == '\\' && i + 1 < hop->len)
			i++;
		node[n++] = hop->s[i];
	}
	node[n] = '\0';
	if (!forwarded) {
		if (rlg_addr_parse(node, out) == 0)
			return HOP_ADDR;
		if (strcasecmp(node, "unknown") == 0)
			return HOP_HIDDEN;
	}
	return parse_host_port(node, forwarded, out);
}

/* An obfuscated identifier after its '_' (RFC 7239 section 6.3). */
static bool
obfuscated_ok(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++) {
		if (!isalnum((unsigned char)*s) && strchr("._-", *s) == NULL)
			return false;
	}
	return true;
}

/*
 * node = nodename [ ":" node-port ] (RFC 7239 section 6), cut in place.
 * X-Forwarded-For takes no obfuscated names or ports.
 */
static enum hop_kind
parse_host_port(char *node, bool forwarded, struct rlg_addr *out)
{
	char *host, *port = NULL, *mark;
	bool hidden = false;

	if (node[0] == '[') {
		mark = strchr(node, ']');
		if (mark == NULL)
			return HOP_BAD;
		*mark = '\0';
		host = node + 1;
		if (strchr(host, ':') == NULL)
			return HOP_BAD;     /* "[192.0.2.1]": brackets are for IPv6 */
		if (mark[1] == ':')
			port = mark + 2;
		else if (mark[1] != '\0')
			return HOP_BAD;
	} else {
		host = node;
		mark = strchr(node, ':');
		if (mark != NULL) {
			*mark = '\0';
			port = mark + 1;
		}
		if (strcasecmp(host, "unknown") == 0) {
			hidden = true;
		} else if (host[0] == '_') {
			if (!forwarded || !obfuscated_ok(host + 1))
				return HOP_BAD;
			hidden = true;
		} else if (strchr(host, '.') == NULL) {
			return HOP_BAD;     /* a bare IPv6 needs brackets */
		}
	}
	if (port != NULL) {
		if (*port == '_') {
			if (!forwarded || !obfuscated_ok(port + 1))
				return HOP_BAD;
		} else if (*port == '\0' || strlen(port) > 5 ||
		    strspn(port, "0123456789") != strlen(port)) {
			return HOP_BAD;
		}
	}
	if (hidden)
		return HOP_HIDDEN;
	return rlg_addr_parse(host, out) == 0 ? HOP_ADDR : HOP_BAD;
}

/*
 * Walks hs from the right, starting from the trusted peer: the first
 * untrusted address is the client (out); every hop trusted, the leftmost.
 * A hop that hides the client ends the walk as WALK_HIDDEN; one we cannot
 * read, or more than RLG_FWD_HOPS_MAX hops all trusted, as WALK_BAD.
 */
static enum walk_end
walk_hops(const struct fwd_hops *hs, bool forwarded,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out)
{
	struct rlg_addr a;
	size_t i;

	*out = *peer;
	if (hs->n == 0)
		return WALK_PEER;
	for (i = 0; i < hs->n && i < RLG_FWD_HOPS_MAX; i++) {
		const struct fwd_hop *hop =
		    &hs->ring[(hs->n - 1 - i) % RLG_FWD_HOPS_MAX];

		switch (parse_node(hop, forwarded, &a)) {
		case HOP_BAD:
			return WALK_BAD;
		case HOP_HIDDEN:
			return WALK_HIDDEN;
		case HOP_ADDR:
			break;
		}
		*out = a;
		if (!rlg_cidr_any(cc->trusted_proxies, cc->ntrusted, &a))
			return WALK_CLIENT;
	}
	return hs->n > RLG_FWD_HOPS_MAX ? WALK_BAD : WALK_CLIENT;
}

/*
 * The client behind a trusted peer, from the one header the operator says
 * the trusted proxies set (cc->forwarded_header): a header a proxy merely
 * passes through would let the client choose its key. out is the client
 * for WALK_CLIENT, else the peer.
 */
static enum walk_end
client_from_proxy(char *const *envp, const struct rlg_client_config *cc,
    const struct rlg_addr *peer, struct rlg_addr *out)
{
	bool forwarded = cc->forwarded_header == RLG_FWD_FORWARDED;
	struct fwd_hops hs;
	enum walk_end end;
	const char *h;
	int count;

	*out = *peer;
	count = rlg_request_header(envp, forwarded ? "HTTP_FORWARDED" :
	    "HTTP_X_FORWARDED_FOR", &h);
	if (count > 1)
		return WALK_DUPLICATE;
	if (count == 0)
		return WALK_PEER;
	/* Oversized: the hops we need may be anywhere in it. */
	if (strnlen(h, RLG_FWD_HEADER_MAX + 1) > RLG_FWD_HEADER_MAX)
		return WALK_BAD;
	hs.n = 0;
	if (forwarded)
		split_forwarded(h, &hs);
	else
		split_xff(h, &hs);
	end = walk_hops(&hs, forwarded, cc, peer, out);
	if (end != WALK_CLIENT)
		*out = *peer;
	return end;
}

/*
 * r->path, r->path_ok and, for a path that cannot be read, the flaw.
 * REQUEST_URI is what the client sent, under lighttpd, Apache
 * mod_proxy_fcgi and CGI alike; SCRIPT_NAME and PATH_INFO depend on how
 * the server mounts us and are already decoded, so they are only the
 * fallback, taken as they are (but for the dot segments).
 */
static void
parse_path(struct rlg_request *r, char *const *envp, const char *uri)
{
	const char *script, *info;
	int n;

	if (uri != NULL) {
		r->path_ok = rlg_request_decode_path(uri, r->path,
		    sizeof r->path) == RLG_OK;
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
		if (r->path_ok)
			rlg_path_normalize(r->path);
	}
	if (!r->path_ok) {
		r->path[0] = '\0';
		r->flaw = RLG_FLAW_PATH;
	}
}

void
rlg_request_parse(struct rlg_request *r, char *const *envp,
    const struct rlg_client_config *cc)
{
	const char *method;
	struct rlg_addr peer;
	enum walk_end end;
	bool bad_role, peer_ok, trusted, dup_method = false, dup_uri = false;

	/*
	 * Every field zero but the 8 KiB of path past its first byte
	 * (written up to its NUL below): a memset of the whole request was
	 * a measured 1.2% of a worker's time at -F 4 --threads 4.
	 */
	memset(r, 0, offsetof(struct rlg_request, path) + 1);
	memset(&r->path_ok, 0, sizeof *r - offsetof(struct rlg_request,
	    path_ok));
	r->envp = envp;
	r->role = role_of(envp, &bad_role);
	peer_ok = rlg_addr_parse(rlg_request_param(envp, "REMOTE_ADDR"),
	    &peer) == 0;
	trusted = peer_ok && cc != NULL && cc->ntrusted > 0 &&
	    rlg_cidr_any(cc->trusted_proxies, cc->ntrusted, &peer);
	r->trusted = trusted;

	method = rlg_request_param(envp, "REQUEST_METHOD");
	r->head = method != NULL && strcmp(method, "HEAD") == 0;
	method = described(envp, r->role, trusted, RLG_PARAM_METHOD,
	    "HTTP_X_FORWARDED_METHOD", "REQUEST_METHOD", &dup_method);
	if (method == NULL)
		method = "";
	r->method_ok = rlg_copy(r->method_name, method,
	    sizeof r->method_name) < sizeof r->method_name;
	r->method = method_of(method);

	parse_path(r, envp, described(envp, r->role, trusted, RLG_PARAM_URI,
	    "HTTP_X_FORWARDED_URI", "REQUEST_URI", &dup_uri));
	if (dup_method || dup_uri) {
		r->flaw = RLG_FLAW_DUPLICATE;
		r->flaw_about = dup_uri ? "X-Forwarded-Uri" :
		    "X-Forwarded-Method";
	}
	if (bad_role) {
		r->flaw = RLG_FLAW_ROLE;
		r->flaw_about = RLG_PARAM_ROLE;
	}

	if (!peer_ok) {
		rlg_copy(r->client, RLG_CLIENT_UNKNOWN, sizeof r->client);
		return;
	}
	r->addr = peer;
	r->addr_ok = true;
	if (trusted) {
		end = client_from_proxy(envp, cc, &peer, &r->addr);
		switch (end) {
		case WALK_PEER:
			break;
		case WALK_CLIENT:
			r->via_proxy = true;
			break;
		case WALK_HIDDEN:
			r->via_proxy = true;
			r->addr_ok = false;
			snprintf(r->client, sizeof r->client, "%s",
			    RLG_CLIENT_UNKNOWN);
			return;
		case WALK_BAD:
		case WALK_DUPLICATE:
			/* Refused; keyed (for the log) as the peer, which no
			 * exemption may cover. */
			r->addr_ok = false;
			if (r->flaw == RLG_FLAW_NONE) {
				r->flaw = end == WALK_BAD ?
				    RLG_FLAW_FORWARDED : RLG_FLAW_DUPLICATE;
				r->flaw_about = cc->forwarded_header ==
				    RLG_FWD_FORWARDED ? "Forwarded" :
				    "X-Forwarded-For";
			}
			break;
		}
	}
	rlg_addr_key(&r->addr, cc != NULL ? cc->ipv6_prefix :
	    RLG_DEFAULT_IPV6_PREFIX, r->client);
}

/*
 * The parameter CGI names header by (HTTP_ + its name, upper case, '-' as
 * '_') into out (len bytes). False if it does not fit.
 */
static bool
header_param(const char *header, char *out, size_t len)
{
	size_t i, n = strlen(header);

	if (n + 5 >= len)
		return false;
	memcpy(out, "HTTP_", 5);
	for (i = 0; i < n; i++) {
		int c = (unsigned char)header[i];

		out[5 + i] = (char)(c == '-' ? '_' : toupper(c));
	}
	out[5 + n] = '\0';
	return true;
}

int
rlg_request_cost(const struct rlg_request *r, const struct rlg_route *rt,
    int64_t *cost)
{
	char name[5 + RLG_HEADER_NAME_MAX + 1];
	const char *value, *c;
	int64_t v = 0;

	*cost = rt != NULL ? rt->cost : 1;
	if (rt == NULL || rt->cost_header == NULL)
		return RLG_OK;
	*cost = rt->cost_max;
	if (!r->trusted || !header_param(rt->cost_header, name, sizeof name))
		return RLG_OK;
	switch (rlg_request_header(r->envp, name, &value)) {
	case 0:
		return RLG_OK;
	case 1:
		break;
	default:
		return RLG_EINVAL;
	}
	/* Digits only, and no sum past cost_max (<= RLG_COST_MAX). */
	for (c = value; *c >= '0' && *c <= '9' && v <= rt->cost_max; c++)
		v = v * 10 + (*c - '0');
	if (c == value || *c != '\0' || v < 1 || v > rt->cost_max)
		return RLG_EINVAL;
	*cost = v;
	return RLG_OK;
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

/*
 * The BLAKE2b key stretched from key_secret into key, kept per thread
 * with the secret it came from (compared each time: a config read again
 * may hold another secret at the same address), so that a request hashes
 * once, not twice. A secret too long to keep is stretched every time.
 */
#define SECRET_KEPT_MAX 256
static __thread char secret_of[SECRET_KEPT_MAX];
static __thread unsigned char secret_key[crypto_generichash_KEYBYTES];

static void
stretch_secret(const char *key_secret, unsigned char *key)
{
	size_t n = strlen(key_secret);

	if (n > 0 && n < sizeof secret_of && strcmp(secret_of, key_secret) == 0) {
		memcpy(key, secret_key, sizeof secret_key);
		return;
	}
	crypto_generichash(key, crypto_generichash_KEYBYTES,
	    (const unsigned char *)key_secret, n, NULL, 0);
	if (n > 0 && n < sizeof secret_of) {
		memcpy(secret_of, key_secret, n + 1);
		memcpy(secret_key, key, sizeof secret_key);
	}
}

/* out = a, b, c in turn; its length, or len (cut) if they do not fit. */
static size_t
join3(char *out, size_t len, const char *a, const char *b, const char *c)
{
	size_t used = rlg_copy(out, a, len);

	if (used < len)
		used += rlg_copy(out + used, b, len - used);
	if (used < len)
		used += rlg_copy(out + used, c, len - used);
	return used < len ? used : len;
}

void
rlg_request_key_hash(const char *value, const struct rlg_client_config *cc,
    char *out)
{
	unsigned char secret[crypto_generichash_KEYBYTES];
	unsigned char hash[RLG_KEY_HASH_BYTES];

	pthread_once(&sodium_once, sodium_start);
	/* The secret is stretched to a full BLAKE2b key; an unset one gives
	 * an unkeyed hash (still no raw value, but guessable offline). */
	if (cc != NULL && cc->key_secret != NULL) {
		stretch_secret(cc->key_secret, secret);
		crypto_generichash(hash, sizeof hash,
		    (const unsigned char *)value, strlen(value),
		    secret, sizeof secret);
		sodium_memzero(secret, sizeof secret);
	} else {
		crypto_generichash(hash, sizeof hash,
		    (const unsigned char *)value, strlen(value), NULL, 0);
	}
	out[0] = 'k';
	out[1] = ':';
	sodium_bin2hex(out + 2, 2 * RLG_KEY_HASH_BYTES + 1, hash, sizeof hash);
}

int
rlg_request_policy_key(const struct rlg_request *r,
    const struct rlg_policy *p, const struct rlg_client_config *cc,
    char *out, size_t len)
{
	char name[256], hex[RLG_KEY_HASH_TEXT];
	const char *value = NULL;
	size_t n;

	if (len == 0)
		return RLG_ENOSPC;
	out[0] = '\0';
	if ((p->key & RLG_KEY_HEADER) && p->key_header != NULL &&
	    header_param(p->key_header, name, sizeof name)) {
		/* X-API-Key beside X_API_Key: the client would choose. */
		if (rlg_request_header(r->envp, name, &value) > 1)
			return RLG_EINVAL;
		if (value != NULL && value[0] == '\0')
			value = NULL;
	}
	if (value == NULL) {
		n = rlg_copy(out, r->client, len);
		goto done;
	}

	rlg_request_key_hash(value, cc, hex);
	if (p->key & RLG_KEY_IP)
		n = join3(out, len, r->client, "|", hex);
	else
		n = rlg_copy(out, hex, len);
done:
	if (n >= len) {
		out[0] = '\0';
		return RLG_ENOSPC;
	}
	return RLG_OK;
}
