/*
 * path.c: request paths as servers resolve them (path.h). Pure string
 * functions: the request's decoding (request.c) and the routes' spelling
 * (config.c at load, gate.c per request) share them.
 */
#include <stdbool.h>
#include <string.h>

#include "path.h"
#include "util.h"

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
