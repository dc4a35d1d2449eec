/*
 * request.c: a request's parameters -> struct rlg_request: its role, the
 * method and the path it is counted under, and who the client is.
 *
 * The parameters come from the front through struct rlg_params (front.h):
 * CGI's names, whatever the transport. Input here is hostile: every
 * parameter may be missing, huge, or full of bytes no browser sends. Each
 * value is copied into a bounded buffer or rejected; nothing is borrowed
 * past the request, and nothing fails loudly: a request rlgate cannot
 * route or key safely carries a flaw (r->flaw), which the gate answers
 * with 400, and a client without a usable address shares the
 * RLG_CLIENT_UNKNOWN key.
 *
 * Look-alike headers: the web server names a header HTTP_ + its name in
 * upper case with '-' as '_', so X-Forwarded-For and X_Forwarded_For (or
 * x-forwarded_for) arrive as two parameters of the same name, one set by
 * the proxy and one by the client. A header rlgate reads for identity that
 * comes more than once is a flaw: it is never resolved by order.
 *
 * The path is decoded and normalised by path.c; the client behind trusted
 * proxies is found by request_client.c; what a request costs and the key
 * each policy derives from it are request_key.c's.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "net.h"
#include "path.h"
#include "request.h"
#include "request_client.h"
#include "util.h"

static enum rlg_method method_of(const char *m);
static enum rlg_role role_of(const struct rlg_params *params, bool *bad);
static const char *described(const struct rlg_params *params,
    enum rlg_role role, bool trusted, const char *param, const char *header,
    const char *plain, bool *duplicate);
static void parse_path(struct rlg_request *r, const struct rlg_params *params,
    const char *uri);
static void read_client(struct rlg_request *r, const struct rlg_params *params,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    bool trusted);

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
	case RLG_FLAW_DUPLICATE_PARAM:
		return "duplicate_param";
	}
	return "unknown";
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
role_of(const struct rlg_params *params, bool *bad)
{
	const char *role = rlg_param(params, "FCGI_ROLE");
	const char *front;

	*bad = false;
	if (role != NULL && strcmp(role, "AUTHORIZER") == 0)
		return RLG_ROLE_AUTHORIZER;
	if (role != NULL && strcmp(role, "RESPONDER") != 0)
		return RLG_ROLE_OTHER;
	front = rlg_param(params, RLG_PARAM_ROLE);
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
 * X-Forwarded- header (sent twice: *duplicate), else plain, the value of
 * the plain parameter, which the caller has looked up already (it needs
 * it anyway: a lookup walks every parameter of the request).
 * A responder's and an authorizer's request is its own description.
 */
static const char *
described(const struct rlg_params *params, enum rlg_role role, bool trusted,
    const char *param, const char *header, const char *plain,
    bool *duplicate)
{
	const char *v;

	if (role == RLG_ROLE_AUTH_REQUEST || role == RLG_ROLE_FORWARD_AUTH) {
		if ((v = rlg_param(params, param)) != NULL)
			return v;
		if (role == RLG_ROLE_FORWARD_AUTH && trusted) {
			switch (rlg_param_header(params, header, &v)) {
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
	return plain;
}

/*
 * r->path, r->path_ok and, for a path that cannot be read, the flaw.
 * REQUEST_URI is what the client sent, under lighttpd, Apache
 * mod_proxy_fcgi and CGI alike; SCRIPT_NAME and PATH_INFO depend on how
 * the server mounts us and are already decoded, so they are only the
 * fallback, taken as they are (but for the dot segments).
 */
static void
parse_path(struct rlg_request *r, const struct rlg_params *params,
    const char *uri)
{
	const char *script, *info;
	int n;

	if (uri != NULL) {
		r->path_ok = rlg_path_decode(uri, r->path,
		    sizeof r->path) == RLG_OK;
	} else {
		script = rlg_param(params, "SCRIPT_NAME");
		info = rlg_param(params, "PATH_INFO");
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
rlg_request_read(struct rlg_request *r, const struct rlg_params *params,
    const struct rlg_client_config *cc)
{
	const char *method, *uri, *query;
	struct rlg_addr peer;
	bool bad_role, peer_ok, trusted, dup_method = false, dup_uri = false;

	/*
	 * Every field zero but the 8 KiB of path past its first byte
	 * (written up to its NUL below): a memset of the whole request was
	 * a measured 1.2% of a worker's time at -F 4 --threads 4.
	 */
	memset(r, 0, offsetof(struct rlg_request, path) + 1);
	memset(&r->path_ok, 0, sizeof *r - offsetof(struct rlg_request,
	    path_ok));
	r->params = *params;
	r->role = role_of(params, &bad_role);
	peer_ok = rlg_addr_parse(rlg_param(params, "REMOTE_ADDR"),
	    &peer) == 0;
	trusted = peer_ok && cc != NULL && cc->ntrusted > 0 &&
	    rlg_cidr_any(cc->trusted_proxies, cc->ntrusted, &peer);
	r->trusted = trusted;

	method = rlg_param(params, "REQUEST_METHOD");
	r->head = method != NULL && strcmp(method, "HEAD") == 0;
	method = described(params, r->role, trusted, RLG_PARAM_METHOD,
	    "HTTP_X_FORWARDED_METHOD", method, &dup_method);
	if (method == NULL)
		method = "";
	r->method_ok = rlg_copy(r->method_name, method,
	    sizeof r->method_name) < sizeof r->method_name;
	r->method = method_of(method);

	uri = rlg_param(params, "REQUEST_URI");
	uri = described(params, r->role, trusted, RLG_PARAM_URI,
	    "HTTP_X_FORWARDED_URI", uri, &dup_uri);
	parse_path(r, params, uri);
	if (uri != NULL)
		r->query = (query = strchr(uri, '?')) != NULL ? query + 1 :
		    NULL;
	else
		r->query = rlg_param(params, "QUERY_STRING");
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
	read_client(r, params, cc, &peer, trusted);
}

/*
 * r's client from its peer (a usable address): the peer itself, or, when
 * it is trusted, who the forwarding header names behind it (a flaw when
 * that cannot be read); r->client is the key of the address found.
 */
static void
read_client(struct rlg_request *r, const struct rlg_params *params,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    bool trusted)
{
	enum rlg_walk end;

	r->addr = *peer;
	r->addr_ok = true;
	if (trusted) {
		end = rlg_request_client(params, cc, peer, &r->addr);
		switch (end) {
		case RLG_WALK_PEER:
			break;
		case RLG_WALK_CLIENT:
			r->via_proxy = true;
			break;
		case RLG_WALK_HIDDEN:
			r->via_proxy = true;
			r->addr_ok = false;
			snprintf(r->client, sizeof r->client, "%s",
			    RLG_CLIENT_UNKNOWN);
			return;
		case RLG_WALK_BAD:
		case RLG_WALK_DUPLICATE:
			/* Refused; keyed (for the log) as the peer, which no
			 * exemption may cover. */
			r->addr_ok = false;
			if (r->flaw == RLG_FLAW_NONE) {
				r->flaw = end == RLG_WALK_BAD ?
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
