/*
 * front_cgi.c: the adapter and the renderer of the CGI-shaped fronts
 * (front_cgi.h): FastCGI in its four roles and plain CGI hand rlgate
 * "NAME=value" strings and take CGI text back. Nothing past this file
 * sees the strings or writes the text: the request parser reads them
 * through struct rlg_params, the response side builds a struct rlg_reply.
 */
#include <string.h>

#include "front_cgi.h"
#include "util.h"

static const char *envp_param(const void *src, const char *name);
static int envp_header(const void *src, const char *name,
    const char **value);
static void envp_params(struct rlg_params *p, const void *request);
static char *put_bytes(char *at, const char *s, size_t n);

const char *
rlg_envp_param(char *const *envp, const char *name)
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
rlg_envp_header(char *const *envp, const char *name, const char **value)
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

static const char *
envp_param(const void *src, const char *name)
{
	return rlg_envp_param((char *const *)src, name);
}

static int
envp_header(const void *src, const char *name, const char **value)
{
	return rlg_envp_header((char *const *)src, name, value);
}

void
rlg_params_envp(struct rlg_params *p, char *const *envp)
{
	p->param = envp_param;
	p->header = envp_header;
	p->src = envp;
}

/* The adapter of both rows: a request is its envp. */
static void
envp_params(struct rlg_params *p, const void *request)
{
	rlg_params_envp(p, (char *const *)request);
}

const struct rlg_front rlg_front_fastcgi = {
	"fastcgi", "FastCGI: responder, Authorizer (lighttpd, Apache),"
	" auth_request (nginx), forward_auth (Caddy, Traefik)",
	envp_params, rlg_front_cgi_render,
};

const struct rlg_front rlg_front_cgi = {
	"cgi", "CGI: one request from environ, its answer on stdout",
	envp_params, rlg_front_cgi_render,
};

/* n bytes of s at at (no NUL: a line is sent by its length); the end. */
static char *
put_bytes(char *at, const char *s, size_t n)
{
	memcpy(at, s, n);
	return at + n;
}

int
rlg_front_cgi_render(struct rlg_reply *rep, rlg_write_fn write, void *ctx)
{
	char line[RLG_REPLY_ROOM];
	size_t len, n, reason;
	char *start, *end;
	int rc;

	/* "Status: 429 Too Many Requests\r\n", by hand: no printf here. */
	reason = strlen(rep->reason);
	if (rep->status < 100 || rep->status > 999 ||
	    reason + 14 > sizeof line)
		return RLG_ENOSPC;
	end = put_bytes(line, "Status: ", 8);
	*end++ = (char)('0' + rep->status / 100);
	*end++ = (char)('0' + rep->status / 10 % 10);
	*end++ = (char)('0' + rep->status % 10);
	*end++ = ' ';
	end = put_bytes(end, rep->reason, reason);
	end = put_bytes(end, "\r\n", 2);
	n = (size_t)(end - line);
	if (n > rep->room)
		return RLG_ENOSPC;
	start = rep->head - n;
	memcpy(start, line, n);
	len = n + rep->head_len + 2;
	if (rep->joined)
		len += rep->body_len;
	if ((rc = write(ctx, start, len)) != 0)
		return rc;
	if (rep->joined || rep->body_len == 0)
		return 0;
	return write(ctx, rep->body, rep->body_len);
}
