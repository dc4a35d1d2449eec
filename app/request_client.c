/*
 * request_client.c: the client behind trusted proxies (request_client.h).
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
 * A header that came twice (look-alike spellings) is a flaw too: it is
 * never resolved by order.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "request_client.h"

/* Longest Forwarded / X-Forwarded-For value read, in bytes. */
#define RLG_FWD_HEADER_MAX 8192
/* Most hops examined, from the right. */
#define RLG_FWD_HOPS_MAX   64
/* Longest decoded Forwarded node ("[IPv6]:port"), with NUL. */
#define RLG_FWD_NODE_MAX   64
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

static bool is_tchar(int c);
static const char *skip_ows(const char *p);
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
static enum rlg_walk walk_hops(const struct fwd_hops *hs, bool forwarded,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out);

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
 * A hop that hides the client ends the walk as RLG_WALK_HIDDEN; one we cannot
 * read, or more than RLG_FWD_HOPS_MAX hops all trusted, as RLG_WALK_BAD.
 */
static enum rlg_walk
walk_hops(const struct fwd_hops *hs, bool forwarded,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out)
{
	struct rlg_addr a;
	size_t i;

	*out = *peer;
	if (hs->n == 0)
		return RLG_WALK_PEER;
	for (i = 0; i < hs->n && i < RLG_FWD_HOPS_MAX; i++) {
		const struct fwd_hop *hop =
		    &hs->ring[(hs->n - 1 - i) % RLG_FWD_HOPS_MAX];

		switch (parse_node(hop, forwarded, &a)) {
		case HOP_BAD:
			return RLG_WALK_BAD;
		case HOP_HIDDEN:
			return RLG_WALK_HIDDEN;
		case HOP_ADDR:
			break;
		}
		*out = a;
		if (!rlg_cidr_any(cc->trusted_proxies, cc->ntrusted, &a))
			return RLG_WALK_CLIENT;
	}
	return hs->n > RLG_FWD_HOPS_MAX ? RLG_WALK_BAD : RLG_WALK_CLIENT;
}

/*
 * The client behind a trusted peer, from the one header the operator says
 * the trusted proxies set (cc->forwarded_header): a header a proxy merely
 * passes through would let the client choose its key. out is the client
 * for RLG_WALK_CLIENT, else the peer.
 */
enum rlg_walk
rlg_request_client(const struct rlg_params *params,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out)
{
	bool forwarded = cc->forwarded_header == RLG_FWD_FORWARDED;
	struct fwd_hops hs;
	enum rlg_walk end;
	const char *h;
	int count;

	*out = *peer;
	count = rlg_param_header(params, forwarded ? "HTTP_FORWARDED" :
	    "HTTP_X_FORWARDED_FOR", &h);
	if (count > 1)
		return RLG_WALK_DUPLICATE;
	if (count == 0)
		return RLG_WALK_PEER;
	/* Oversized: the hops we need may be anywhere in it. */
	if (strnlen(h, RLG_FWD_HEADER_MAX + 1) > RLG_FWD_HEADER_MAX)
		return RLG_WALK_BAD;
	hs.n = 0;
	if (forwarded)
		split_forwarded(h, &hs);
	else
		split_xff(h, &hs);
	end = walk_hops(&hs, forwarded, cc, peer, out);
	if (end != RLG_WALK_CLIENT)
		*out = *peer;
	return end;
}
