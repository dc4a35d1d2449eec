/*
 * server_hold.h: a FastCGI answer held for its turn (a smoothing policy:
 * config.h, delay), between the worker that decided it (server.c) and
 * the park that gives it (server_park.c): the worker renders it into a
 * buffer of its own (rlg_hold_write), since libfcgi would send what
 * fills its 8 KB stream buffer at once, and hands the request to the
 * park (rlg_hold_park), which writes the answer and finishes the request
 * when it is due. A worker's request object is on the heap
 * (rlg_hold_request_new): a held request keeps its object (its streams
 * point at it), and the worker takes a new one.
 */
#ifndef RLG_SERVER_HOLD_H
#define RLG_SERVER_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <fcgiapp.h>

/*
 * Where a FastCGI answer goes (the ctx of rlg_hold_write): the request's
 * FCGI_STDOUT, or, once the gate set hold_ms above 0 (struct rlg_out,
 * before it sends), held (malloc; the caller frees it if it does not
 * park the request).
 */
struct rlg_hold_out {
	FCGX_Stream *out;
	int64_t hold_ms;
	char *held;
	size_t len;
};

/* A front's writer (front.h) for a struct rlg_hold_out. */
int rlg_hold_write(void *ctx, const char *buf, size_t len);

/* A worker's request object, initialised for libfcgi (no listening
 * socket: the worker accepts); and its end. */
FCGX_Request *rlg_hold_request_new(void);
void rlg_hold_request_free(FCGX_Request *req);

/*
 * Parks req (a rlg_hold_request_new's, in the slot the caller reserved:
 * rlg_park_reserve) with o's held answer, due o->hold_ms from now. At its
 * turn, on the park's thread, the answer is written and the request
 * finished; its connection is closed at once when at_once (its input was
 * read to its end), else by the park's lingering close, never libfcgi's,
 * which would block the park; a kept connection is closed too (the web
 * server opens another). The request is the park's from here on.
 */
void rlg_hold_park(FCGX_Request *req, struct rlg_hold_out *o, bool at_once);

#endif
