/*
 * request.h: a FastCGI or CGI request as rlgate sees it.
 *
 * The parser takes the parameters as an array of "NAME=value" strings (the
 * FastCGI envp, or environ in CGI mode), so it needs no FastCGI and the
 * unit tests feed it plain arrays. Everything it keeps is copied into
 * bounded buffers inside the struct: nothing is borrowed from libfcgi, which
 * frees its parameters at the next accept.
 */
#ifndef RLG_REQUEST_H
#define RLG_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "store.h"

#define RLG_METHOD_MAX  15
#define RLG_PATH_MAX    2047

/* The FastCGI role the web server asked for (FCGI_ROLE); CGI: responder. */
enum rlg_role {
	RLG_ROLE_RESPONDER = 0,
	RLG_ROLE_AUTHORIZER,
	RLG_ROLE_OTHER,            /* FILTER or unknown */
};

enum rlg_method {
	RLG_METHOD_OTHER = 0,
	RLG_METHOD_GET,
	RLG_METHOD_HEAD,
};

struct rlg_request {
	char method_name[RLG_METHOD_MAX + 1];   /* as sent, truncated */
	enum rlg_method method;
	char path[RLG_PATH_MAX + 1];     /* decoded path, no query string */
	bool path_ok;                    /* false: missing, too long or bad escape */
	char client[RLG_CLIENT_KEY_MAX + 1];     /* the IP key (key = ip) */
	enum rlg_role role;
	struct rlg_addr addr;            /* the client address, if addr_ok */
	bool addr_ok;                    /* false: RLG_CLIENT_UNKNOWN */
	bool via_proxy;                  /* addr came from Forwarded/X-Forwarded-For */
	char *const *envp;               /* borrowed for the request's duration:
	                                    header keys are read from it */
};

/* The key every client without a usable address shares. */
#define RLG_CLIENT_UNKNOWN "unknown"

/*
 * Looks up NAME in envp ("NAME=value" strings, NULL-terminated). Returns a
 * pointer into envp, or NULL.
 */
const char *rlg_request_param(char *const *envp, const char *name);

/*
 * Fills r from envp. The path comes from REQUEST_URI (else SCRIPT_NAME +
 * PATH_INFO), without its query string, percent-decoded. The role from
 * FCGI_ROLE. The client address is REMOTE_ADDR, unless REMOTE_ADDR is in
 * cc->trusted_proxies: then it is taken from Forwarded (RFC 7239), else
 * X-Forwarded-For, walking from the right past trusted hops (the first
 * untrusted hop is the client; a malformed hop stops the walk and the last
 * trusted address is used). r->client is its key: IPv4 whole, IPv6 masked
 * to cc->ipv6_prefix; RLG_CLIENT_UNKNOWN without a usable address. cc may
 * be NULL (no trusted proxies, prefix 64). Never fails: malformed input
 * shows in the fields.
 */
void rlg_request_parse(struct rlg_request *r, char *const *envp,
    const struct rlg_client_config *cc);

/*
 * The store key of r for policy p (p->key bits): "IPKEY" for ip,
 * "k:HEX" for header:NAME (a keyed BLAKE2b hash of the header's value with
 * cc->key_secret: never the key itself), "IPKEY|k:HEX" for both; a request
 * without the header falls back to the IP key. Returns RLG_OK, or
 * RLG_ENOSPC if out (len bytes) is too small.
 */
int rlg_request_policy_key(const struct rlg_request *r,
    const struct rlg_policy *p, const struct rlg_client_config *cc,
    char *out, size_t len);

/*
 * Percent-decodes the path part of uri (up to '?' or '#') into out
 * (outlen bytes). Returns RLG_OK, RLG_ENOSPC if it does not fit, or
 * RLG_EINVAL for a bad escape or an encoded NUL.
 */
int rlg_request_decode_path(const char *uri, char *out, size_t outlen);

#endif
