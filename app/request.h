/*
 * request.h: a request as rlgate sees it, whatever front it came by.
 *
 * The parser reads the parameters through the front's lookup interface
 * (struct rlg_params, front.h: the FastCGI params or environ through
 * front_cgi.c's, plain arrays in the unit tests), so it needs no
 * transport. Everything it keeps is copied into bounded buffers inside
 * the struct; only the lookup itself is kept, for the header keys and the
 * cost a route reads later (request_key.c), and it is valid for the
 * request's duration (libfcgi frees its parameters at the next accept).
 */
#ifndef RLG_REQUEST_H
#define RLG_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "front.h"

#define RLG_METHOD_MAX  15
/* The longest path read, decoded: Apache's LimitRequestLine is 8190. */
#define RLG_PATH_MAX    8191

/*
 * What the web server asks of rlgate: the FastCGI role (FCGI_ROLE; CGI:
 * responder), or, for a responder request, the parameter RLGATE_ROLE that
 * a front's configuration sets where it asks a side service before it
 * serves a request (a parameter, never a header: no client can set it).
 * In the three guarding roles rlgate only decides; the front serves the
 * request (docs/fronts.md).
 */
enum rlg_role {
	RLG_ROLE_RESPONDER = 0,
	RLG_ROLE_AUTHORIZER,       /* FastCGI Authorizer: lighttpd, Apache */
	RLG_ROLE_AUTH_REQUEST,     /* RLGATE_ROLE=auth_request: nginx */
	RLG_ROLE_FORWARD_AUTH,     /* RLGATE_ROLE=forward_auth: Caddy, and
	                              Traefik over HTTP through lighttpd */
	RLG_ROLE_OTHER,            /* FILTER or unknown */
};

/* The role parameter a front sets, and the description of the original
 * request it may add (the method and target the client sent). */
#define RLG_PARAM_ROLE    "RLGATE_ROLE"
#define RLG_PARAM_METHOD  "RLGATE_METHOD"
#define RLG_PARAM_URI     "RLGATE_URI"

/*
 * Why rlgate cannot decide for a request: the gate answers it 400, counts
 * it under no policy and logs the flaw. Each one would otherwise let a
 * client choose what it is counted as, or fall back to a shared key.
 */
enum rlg_flaw {
	RLG_FLAW_NONE = 0,
	RLG_FLAW_PATH,             /* no path, over RLG_PATH_MAX, a bad %-escape,
	                              an encoded NUL or '/' */
	RLG_FLAW_DUPLICATE,        /* a header read for identity came twice
	                              (look-alike spellings: X_Forwarded_For) */
	RLG_FLAW_FORWARDED,        /* a trusted proxy's forwarding header that
	                              cannot be read: malformed, over 8 KiB,
	                              over 64 trusted hops */
	RLG_FLAW_ROLE,             /* RLGATE_ROLE names no role: the front's
	                              configuration is wrong (answered 500) */
	RLG_FLAW_COST,             /* a trusted front's cost header that
	                              cannot be read (rlg_request_cost) */
	RLG_FLAW_DUPLICATE_PARAM,  /* a query parameter read for a key came
	                              twice (look-alikes: Key, key, k%65y) */
};

enum rlg_method {
	RLG_METHOD_OTHER = 0,
	RLG_METHOD_GET,
	RLG_METHOD_HEAD,
};

struct rlg_request {
	char method_name[RLG_METHOD_MAX + 1];   /* as sent, truncated */
	bool method_ok;                  /* false: longer than RLG_METHOD_MAX */
	enum rlg_method method;
	bool head;                       /* the answer is headers only: the
	                                    request rlgate answers is a HEAD
	                                    (REQUEST_METHOD; in a guarding role
	                                    method is the original request's) */
	char path[RLG_PATH_MAX + 1];     /* the path the server serves: decoded,
	                                    normalised, no query string */
	bool path_ok;                    /* false: see RLG_FLAW_PATH */
	enum rlg_flaw flaw;              /* RLG_FLAW_NONE, or why to refuse it */
	const char *flaw_about;          /* the header or parameter the flaw
	                                    is params, for the log (NULL: the path) */
	const char *query;               /* the query string (after '?'), or
	                                    NULL: borrowed from params, as the
	                                    target the path came from */
	char client[RLG_CLIENT_KEY_MAX + 1];     /* the IP key (key = ip) */
	enum rlg_role role;
	struct rlg_addr addr;            /* the client address, if addr_ok */
	bool addr_ok;                    /* false: RLG_CLIENT_UNKNOWN, or a flaw:
	                                    no exemption applies */
	bool via_proxy;                  /* from Forwarded/X-Forwarded-For */
	bool trusted;                    /* the peer (REMOTE_ADDR) is in
	                                    trusted_proxies */
	struct rlg_params params;            /* the front's parameters, borrowed
	                                    for the request's duration: header
	                                    keys and costs are read from it */
};

/* The key every client without a usable address shares. */
#define RLG_CLIENT_UNKNOWN "unknown"

/* True in the roles where rlgate only decides and the front serves. */
static inline bool
rlg_request_guards(const struct rlg_request *r)
{
	return r->role == RLG_ROLE_AUTHORIZER ||
	    r->role == RLG_ROLE_AUTH_REQUEST ||
	    r->role == RLG_ROLE_FORWARD_AUTH;
}

/*
 * Fills r from params. The path comes from REQUEST_URI (else SCRIPT_NAME +
 * PATH_INFO) as rlg_path_decode reads it. The role from
 * FCGI_ROLE, then RLGATE_ROLE (auth_request, forward_auth; another value
 * is RLG_FLAW_ROLE). In those two roles the method and target are the
 * original request's: RLGATE_METHOD and RLGATE_URI when the front sets
 * them; in forward_auth from a peer in cc->trusted_proxies, the
 * X-Forwarded-Method and X-Forwarded-Uri it sends (either twice:
 * RLG_FLAW_DUPLICATE); else REQUEST_METHOD and REQUEST_URI as for a
 * responder. The client address is REMOTE_ADDR, unless REMOTE_ADDR is in
 * cc->trusted_proxies: then it is taken from the one header they set
 * (cc->forwarded_header: Forwarded of RFC 7239, or X-Forwarded-For),
 * walking from the right past trusted hops: the first untrusted hop is the
 * client; every hop trusted, the leftmost. A hop that hides the client
 * ("unknown", "_obfuscated", no for=) gives RLG_CLIENT_UNKNOWN; a header
 * that is malformed where the walk reads it, over 8 KiB or over 64 hops
 * all trusted is RLG_FLAW_FORWARDED, one that came twice
 * RLG_FLAW_DUPLICATE (r->client is then the peer's key, addr_ok false).
 * r->client is the key: IPv4 whole, IPv6 masked to cc->ipv6_prefix;
 * RLG_CLIENT_UNKNOWN without a usable address. cc may be NULL (no trusted
 * proxies, prefix 64). Never fails: malformed input shows in r->flaw.
 */
void rlg_request_read(struct rlg_request *r, const struct rlg_params *params,
    const struct rlg_client_config *cc);

/*
 * What a request costs and the store keys of its policies (defined in
 * request_key.c).
 *
 * The store key of r for policy p (p->key bits): "IPKEY" for ip; "k:HEX"
 * for a value the client sends (header:NAME, cookie:NAME, query:NAME, the
 * claim of a verified token for jwt:CLAIM): a keyed BLAKE2b hash of it
 * with cc->key_secret, never the value itself; "IPKEY|k:HEX" for ip with
 * one of those; "*" for global. A request without the value (or with it
 * empty, or with a token that is not verified: *token says why when token
 * is not NULL) falls back to the IP key, so the key came from the value
 * exactly when it differs from r->client. Returns RLG_OK, RLG_EINVAL when
 * the header, cookie or parameter came more than once (the request must
 * be refused: RLG_FLAW_DUPLICATE, RLG_FLAW_DUPLICATE_PARAM), or
 * RLG_ENOSPC if out (len bytes) is too small.
 */
/* "k:" and 32 hex digits, with the NUL: an API key's hash as text. */
#define RLG_KEY_HASH_TEXT 35

/*
 * The hash of an API key as policy keys, tiers and the logs write it,
 * "k:" and 32 lower-case hex digits: a BLAKE2b hash of value keyed with
 * cc->key_secret (unkeyed without one). out holds RLG_KEY_HASH_TEXT
 * bytes. rlgate --hash-key prints it for an operator.
 */
void rlg_request_key_hash(const char *value,
    const struct rlg_client_config *cc, char *out);

/* What became of a request's bearer token (key = jwt:CLAIM). */
enum rlg_token {
	RLG_TOKEN_OK = 0,          /* verified: its claim keys the request */
	RLG_TOKEN_NONE,            /* no "Authorization: Bearer": the address */
	RLG_TOKEN_INVALID,         /* unreadable, a bad signature, an exp or
	                              nbf that is no integer */
	RLG_TOKEN_ALGORITHM,       /* signed with another alg (or none) */
	RLG_TOKEN_EXPIRED,         /* exp passed */
	RLG_TOKEN_EARLY,           /* nbf not reached */
	RLG_TOKEN_NO_CLAIM,        /* no such claim, or not a string or an
	                              integer */
};
#define RLG_TOKEN_COUNT (RLG_TOKEN_NO_CLAIM + 1)
/* The longest bearer token read, in bytes. */
#define RLG_JWT_TOKEN_MAX 8192

int rlg_request_policy_key(const struct rlg_request *r,
    const struct rlg_policy *p, const struct rlg_client_config *cc,
    char *out, size_t len, enum rlg_token *token);

/* The word for t in the log and the metrics ("expired", ...). */
const char *rlg_token_name(enum rlg_token t);

/*
 * The claim named claim of token, verified with cc's jwt_key under its
 * jwt_algorithm at now_s (seconds since the epoch), into out (len bytes,
 * cut to fit): RLG_TOKEN_OK, or why not (out then ""). With cached, a
 * token this thread verified before under the same key is taken from its
 * cache (request_jwt.c).
 */
enum rlg_token rlg_jwt_claim(const struct rlg_client_config *cc,
    const char *token, const char *claim, int64_t now_s, bool cached,
    char *out, size_t len);

/*
 * What one request of route rt costs its policies, in *cost: rt's fixed
 * cost (1 with rt NULL: no route); with a header cost (rt->cost_header),
 * the header's value when r's peer is trusted (r->trusted: a peer in
 * trusted_proxies, whatever the role: in a guarding role the peer is the
 * client, whose headers the front passes on), else rt->cost_max, which
 * is also the cost when a trusted peer sent no header: no client lowers
 * its cost by sending or leaving out the header. Returns RLG_OK, or
 * RLG_EINVAL (*cost rt->cost_max) when a trusted peer's header is no
 * plain decimal integer (digits only: no sign, no space, not empty), is
 * 0 or above rt->cost_max, or came twice (look-alike spellings, X-Cost
 * and X_Cost): the request must be refused (RLG_FLAW_COST).
 */
int rlg_request_cost(const struct rlg_request *r,
    const struct rlg_route *rt, int64_t *cost);

/* "bad_path", "duplicate_header", "bad_forwarded", "bad_role", "bad_cost"
 * ("none"): for the log. */
const char *rlg_flaw_name(enum rlg_flaw f);

#endif
