/*
 * front_cgi.h: the CGI-shaped fronts: FastCGI (responder, Authorizer, and
 * the responder asked by nginx's auth_request or Caddy's forward_auth) and
 * plain CGI. Their request is an array of "NAME=value" strings (the
 * FastCGI params, or environ), read through rlg_params_envp; their answer
 * is CGI text, rendered by rlg_front_cgi_render. server.c moves the bytes.
 */
#ifndef RLG_FRONT_CGI_H
#define RLG_FRONT_CGI_H

#include "front.h"

/*
 * Looks up NAME in envp ("NAME=value" strings, NULL-terminated; NULL: none).
 * Returns a pointer into envp, or NULL.
 */
const char *rlg_envp_param(char *const *envp, const char *name);

/*
 * Looks up the header parameter NAME ("HTTP_X_API_KEY") in envp. Returns
 * how many times it is there: 0 (*value NULL), 1 (*value points into
 * envp) or 2 for "more than once" (*value NULL): the web server gives
 * look-alike spellings of a header (X-Api-Key, X_Api_Key) one name, so a
 * client can add its own copy beside the one a proxy set.
 */
int rlg_envp_header(char *const *envp, const char *name,
    const char **value);

/* Sets p to read envp (borrowed: it must outlive the request). */
void rlg_params_envp(struct rlg_params *p, char *const *envp);

/*
 * The rows of fronts.c: "fastcgi" (a request is an FCGX_Request's envp;
 * the role, FCGI_ROLE or RLGATE_ROLE, says responder, Authorizer,
 * auth_request or forward_auth) and "cgi" (environ); both render CGI text.
 */
extern const struct rlg_front rlg_front_fastcgi;
extern const struct rlg_front rlg_front_cgi;

/*
 * Renders rep as CGI text, "Status: CODE REASON\r\n", the header lines, a
 * blank line and the body: with one call to write when rep is joined
 * (the status line goes into rep's room), else the head in one call and
 * a body (if any) in a second. Returns 0, the writer's negative result, or
 * RLG_ENOSPC when the status line does not fit rep's room.
 */
int rlg_front_cgi_render(struct rlg_reply *rep, rlg_write_fn write,
    void *ctx);

#endif
