/*
 * request.c: FastCGI/CGI parameters -> struct rlg_request.
 *
 * Input here is hostile: every parameter may be missing, huge, or full of
 * bytes no browser sends. Each value is copied into a bounded buffer or
 * rejected; nothing is borrowed past the call, and nothing fails loudly:
 * the router answers 400 for a path it cannot read, and a client without a
 * usable address shares the RLG_CLIENT_UNKNOWN key.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "request.h"
#include "util.h"

static int hexval(int c);
static enum rlg_method method_of(const char *m);

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

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
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
			int hi = hexval((unsigned char)p[1]);
			int lo = hi < 0 ? -1 : hexval((unsigned char)p[2]);

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

int
rlg_request_client_key(const char *addr, char *key, size_t keylen)
{
	unsigned char buf[sizeof(struct in6_addr)];
	char text[INET6_ADDRSTRLEN];
	const char *canon = NULL;

	if (addr != NULL && strlen(addr) < INET6_ADDRSTRLEN) {
		if (inet_pton(AF_INET, addr, buf) == 1)
			canon = inet_ntop(AF_INET, buf, text, sizeof text);
		else if (inet_pton(AF_INET6, addr, buf) == 1)
			canon = inet_ntop(AF_INET6, buf, text, sizeof text);
	}
	if (canon == NULL || strlen(canon) >= keylen) {
		if (keylen > 0)
			snprintf(key, keylen, "%s", RLG_CLIENT_UNKNOWN);
		return RLG_EINVAL;
	}
	memcpy(key, canon, strlen(canon) + 1);
	return RLG_OK;
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

void
rlg_request_parse(struct rlg_request *r, char *const *envp)
{
	const char *method, *uri, *script, *info;
	int n;

	memset(r, 0, sizeof *r);

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

	rlg_request_client_key(rlg_request_param(envp, "REMOTE_ADDR"),
	    r->client, sizeof r->client);
}
