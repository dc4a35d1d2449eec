/*
 * front.h: what a front (the transport a request comes by) and the rest
 * of rlgate exchange, as plain data: the request's parameters through a
 * lookup interface (struct rlg_params), and the answer as data (struct
 * rlg_reply: status, header lines, body) that the front renders its own
 * way (rlg_render_fn). The gate, the request parser and the response
 * side see only these, never a transport's own form (the CGI envp, CGI
 * text), so a new front is an adapter, a renderer and a row in fronts.c.
 * Types only; each front's adapter and renderer live in its own file
 * (front_cgi.c: FastCGI in its four roles, and CGI).
 */
#ifndef RLG_FRONT_H
#define RLG_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A request's parameters, as a front finds them. Names are CGI's
 * (REQUEST_METHOD, REMOTE_ADDR, HTTP_X_FORWARDED_FOR: the header name in
 * upper case, '-' as '_', after HTTP_), whatever the transport calls
 * them. src is the front's own request (borrowed for the request's
 * duration: both functions return pointers into it).
 *   param: the value of name (its first occurrence), or NULL;
 *   header: how many times name is there: 0 (*value NULL), 1 (*value its
 *     value) or 2 for "more than once" (*value NULL). A transport that
 *     folds look-alike spellings of a header into one name (X-Api-Key and
 *     X_Api_Key are both HTTP_X_API_KEY in CGI) must say 2 when the name
 *     came twice: a client could add its own copy beside a proxy's.
 */
struct rlg_params {
	const char *(*param)(const void *src, const char *name);
	int (*header)(const void *src, const char *name, const char **value);
	const void *src;
};

/* in's parameter name, or NULL. */
static inline const char *
rlg_param(const struct rlg_params *in, const char *name)
{
	return in->param(in->src, name);
}

/* in's header parameter name: 0, 1 (*value set) or 2 ("more than once"). */
static inline int
rlg_param_header(const struct rlg_params *in, const char *name,
    const char **value)
{
	return in->header(in->src, name, value);
}

/*
 * One answer as data, built by the response side (response.h), which alone
 * chooses its status and its headers. The header lines are head_len bytes
 * at head, each "Name: value\r\n"; the buffer holds "\r\n" right after
 * them (the blank line a text header block ends with), and, when joined,
 * the body right after that. room is how many writable bytes of the same
 * buffer precede head: a renderer may put its own first line there (CGI's
 * "Status:") and send the whole answer in one write, with no copy of it.
 */
struct rlg_reply {
	int status;                /* 200, 429, ... */
	const char *reason;        /* its phrase: "Too Many Requests" */
	char *head;
	size_t head_len;
	size_t room;
	const char *body;          /* body_len bytes (0: none, or HEAD) */
	size_t body_len;
	bool joined;               /* body follows head's "\r\n" */
};

/* The room the response side leaves before head: a "Status: " line with
 * any code and registered phrase rlgate sends fits. */
#define RLG_REPLY_ROOM 64

/* Writes len bytes; returns 0 on success, negative on failure. */
typedef int (*rlg_write_fn)(void *ctx, const char *buf, size_t len);

/*
 * A front's renderer: sends rep its transport's way through write/ctx
 * (it may write into rep's room). Returns 0, the writer's negative
 * result, or RLG_ENOSPC when rep has too little room for it.
 */
typedef int (*rlg_render_fn)(struct rlg_reply *rep, rlg_write_fn write,
    void *ctx);

/*
 * Where an answer goes: a front's renderer and its writer, and whether
 * the front can hold it. hold_ms: where the gate says, before it sends
 * the answer, how long the front must hold it (ms; 0: send it at once)
 * for a smoothing policy (config.h: delay); the answer is rendered
 * already, as it must read when it leaves. NULL: the front cannot hold
 * one now (its park is full), so a smoothing policy admits only what
 * passes at once and refuses the rest, charging nothing.
 */
struct rlg_out {
	rlg_render_fn render;
	rlg_write_fn write;
	void *ctx;
	int64_t *hold_ms;
};

/*
 * A front, as fronts.c registers it: its adapter (sets *p to look up the
 * parameters of request, the transport's own form of one, borrowed) and
 * its renderer.
 */
struct rlg_front {
	const char *name;          /* "fastcgi", "cgi": for the log and tests */
	const char *about;         /* one line: the transports and roles */
	void (*params)(struct rlg_params *p, const void *request);
	rlg_render_fn render;
};

#endif
