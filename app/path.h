/*
 * path.h: request paths as servers resolve them: dot segments removed,
 * and the spelling that routes with path_match = normalized compare.
 * Pure functions on strings; no allocation.
 */
#ifndef RLG_PATH_H
#define RLG_PATH_H

#include <stddef.h>

/*
 * The path the web server serves for the request target uri, into out
 * (outlen bytes): the path part (up to '?' or '#'; of an absolute-form
 * "http://host/path" too), percent-decoded once, then normalised as
 * lighttpd and Apache do before they pick a file: repeated slashes merged,
 * "." and ".." segments removed (RFC 3986 section 5.2.4, never above
 * "/"). Returns RLG_OK, RLG_ENOSPC if the decoded path does not fit, or
 * RLG_EINVAL for a target that is no absolute path or URI, a bad escape,
 * an encoded NUL or an encoded '/' (%2F: a separator to some servers, a
 * name byte to others), or a dot segment with ";params" ("/a/..;/b": the
 * parent to Tomcat, a name to others).
 */
int rlg_path_decode(const char *uri, char *out, size_t outlen);

/*
 * Rewrites an absolute path in place as the server resolves it: repeated
 * slashes merged, "." segments dropped, each ".." removing the segment
 * before it (never above the root), as RFC 3986 section 5.2.4 removes dot
 * segments; a path that ends in a dot segment or a slash ends in '/'.
 * The result is never longer than the input.
 */
void rlg_path_normalize(char *path);

/*
 * The spelling of a decoded path (rlg_path_decode's) that routes
 * with path_match = normalized compare, into out (outlen bytes; the
 * result is never longer than path): ASCII letters in lower case (Express
 * and Caddy match without case), each segment's ";params" dropped (Tomcat
 * and Spring drop them; a ';' sent as %3B too: rlgate sees the path
 * decoded, and counting more is the safe direction), then repeated
 * slashes merged again. A trailing '/' stays; rlg_path_route_slash drops
 * it. Returns RLG_OK, or RLG_ENOSPC when out is too small.
 */
int rlg_path_route(const char *path, char *out, size_t outlen);

/* Drops one trailing '/' of path (not the root's): "/a/" is "/a". */
void rlg_path_route_slash(char *path);

#endif
