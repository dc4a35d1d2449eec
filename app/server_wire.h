/*
 * server_wire.h: the FastCGI records of one connection, as a worker reads
 * a request from them and writes its answer: FCGI_BEGIN_REQUEST, the
 * FCGI_PARAMS into an environment (envp, "NAME=VALUE", as CGI's),
 * FCGI_STDIN, and the answer as FCGI_STDOUT and FCGI_END_REQUEST, in
 * buffers of the worker's own that every request reuses. The management
 * records (FCGI_GET_VALUES) are answered on the way. One request at a
 * time on a connection (FCGI_MPXS_CONNS is 0): a second FCGI_BEGIN_REQUEST
 * is answered FCGI_CANT_MPX_CONN, as libfcgi does.
 */
#ifndef RLG_SERVER_WIRE_H
#define RLG_SERVER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most FCGI_PARAMS bytes a request may bring: more drops it. */
#define RLG_WIRE_PARAMS_MAX ((size_t)1024 * 1024)

/* A worker's wire: its buffers, and the request it is answering. */
struct rlg_wire {
	int fd;                 /* the connection; -1: none */
	uint16_t id;            /* the request's (FCGI_BEGIN_REQUEST) */
	int role;               /* FCGI_RESPONDER, FCGI_AUTHORIZER, ... */
	bool keep;              /* FCGI_KEEP_CONN */
	bool input_end;         /* its FCGI_STDIN's end is read */
	bool broken;            /* the connection cannot serve another */
	bool drop;              /* the answer is not to be sent (it could
	                           not be rendered whole) */
	char **envp;            /* the parameters, NULL-terminated */
	/* what was read and not yet taken (in[off, len)) */
	unsigned char *in;
	size_t in_off, in_len;
	/* the parameters' bytes, then their strings (in place) */
	char *params;
	size_t params_len, params_cap;
	size_t envp_cap;
	/* the answer: records, the last STDOUT one open at out_rec */
	char *out;
	size_t out_len, out_cap, out_rec;
};

/* The wire's buffers (once per worker); and their end. */
void rlg_wire_init(struct rlg_wire *w);
void rlg_wire_fini(struct rlg_wire *w);

/*
 * Reads the next request on fd (a new connection, or a kept one) to the
 * end of its parameters, answering management records on the way.
 * Returns 1 with a request (w->envp, w->role, w->keep); 0 when a kept
 * connection has nothing more buffered and no request begun (what it
 * sent was the last request's rest: it may go back to wait); -1 when the
 * connection is to be closed: the web server's close, a protocol error,
 * parameters past RLG_WIRE_PARAMS_MAX, or a read that failed (EINTR: the
 * read deadline, server.c). Blocking reads.
 */
int rlg_wire_read_request(struct rlg_wire *w, int fd);

/*
 * Reads the request's FCGI_STDIN to its end, taking at most max bytes of
 * it. Returns 1 at its end, 0 past max, -1 on an error or a close.
 */
int rlg_wire_read_input(struct rlg_wire *w, size_t max);

/* The worker lets the connection go (closed, or back to wait): what is
 * buffered of it is forgotten. */
void rlg_wire_release(struct rlg_wire *w);

/* Whether bytes past the request are buffered (a kept connection's next
 * request, or the rest of this one's input). */
bool rlg_wire_pending(const struct rlg_wire *w);

/* A front's writer (front.h): appends to the answer's FCGI_STDOUT. */
int rlg_wire_put(void *w, const char *buf, size_t len);

/*
 * Ends the answer (an empty FCGI_STDOUT, FCGI_END_REQUEST) and writes it
 * all, in one write when it fits. Returns 0, or -1 when the write failed
 * (the connection is closed by the caller).
 */
int rlg_wire_send(struct rlg_wire *w);

/*
 * Ends the answer as rlg_wire_send, but hands its bytes over instead of
 * writing them (malloc; *len bytes): an answer held for its turn
 * (server_hold.c). NULL when out of memory.
 */
char *rlg_wire_take(struct rlg_wire *w, size_t *len);

/* Writes len bytes of buf to fd whole; 0, or -1 when a write fails or
 * a signal interrupts it (the read deadline, server.c: a web server that
 * reads nothing cannot hold the worker). */
int rlg_wire_write_all(int fd, const char *buf, size_t len);

#endif
