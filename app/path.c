/*
 * path.c: request paths as servers resolve them (path.h). Pure string
 * functions: the request target's decoding (request.c), and the routes'
 * spelling (config.c at load, gate.c per request), share them.
 *
 * The path is the one the web server will serve: percent-decoded once,
 * dot segments removed (RFC 3986 section 5.2.4) and repeated slashes
 * merged, as lighttpd and Apache do before they map a URL to a file; an
 * encoded '/' or NUL, a bad escape or a path that does not fit is
 * refused.
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "path.h"
#include "util.h"

static const char *absolute_form_path(const char *uri);
static bool dot_params(const char *path);

void
rlg_path_normalize(char *path)
{
	char *in = path, *out = path, *seg;
	size_t len;

	/* out always ends in '/' between segments: "/", "/a/", ... */
	*out++ = '/';
	for (;;) {
		while (*in == '/')
			in++;
		if (*in == '\0')
			break;
		seg = in;
		len = strcspn(seg, "/");
		in = seg + len;
		if (len == 1 && seg[0] == '.')
			continue;
		if (len == 2 && seg[0] == '.' && seg[1] == '.') {
			if (out - path > 1) {
				out--;
				while (out[-1] != '/')
					out--;
			}
			continue;
		}
		memmove(out, seg, len);
		out += len;
		if (*in == '\0') {
			*out = '\0';
			return;         /* a last segment without '/' */
		}
		*out++ = '/';
	}
	*out = '\0';
}

int
rlg_path_route(const char *path, char *out, size_t outlen)
{
	size_t n = 0;
	const char *p;
	bool params = false;

	if (outlen < 2) {
		if (outlen > 0)
			out[0] = '\0';
		return RLG_ENOSPC;
	}
	for (p = path; *p != '\0'; p++) {
		if (*p == '/')
			params = false;
		else if (*p == ';')
			params = true;
		if (params)
			continue;
		if (n + 1 >= outlen) {
			out[0] = '\0';
			return RLG_ENOSPC;
		}
		out[n] = *p;
		if (*p >= 'A' && *p <= 'Z')     /* ASCII, whatever the locale */
			out[n] = (char)(*p - 'A' + 'a');
		n++;
	}
	out[n] = '\0';
	if (out[0] != '/') {
		/* Not a decoded path: matches no normalised route. */
		out[0] = '\0';
		return RLG_OK;
	}
	rlg_path_normalize(out);
	return RLG_OK;
}

void
rlg_path_route_slash(char *path)
{
	size_t len = strlen(path);

	if (len > 1 && path[len - 1] == '/')
		path[len - 1] = '\0';
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
rlg_path_decode(const char *uri, char *out, size_t outlen)
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
