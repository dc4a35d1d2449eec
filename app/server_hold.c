/*
 * server_hold.c: a FastCGI answer held for its turn (server_hold.h).
 */
#include <stdlib.h>
#include <string.h>

#include "server_hold.h"
#include "server_park.h"
#include "util.h"

/* A worker's request object: FCGX_Request first, so that the worker
 * handles it as libfcgi's (req is &rq->fcgx). */
struct request {
	FCGX_Request fcgx;
	bool at_once;                   /* held: its input read to its end */
	char *answer;                   /* held: its answer (malloc) */
	size_t len;
};

int
rlg_hold_write(void *ctx, const char *buf, size_t len)
{
	struct rlg_hold_out *o = ctx;
	char *more;

	if (o->hold_ms <= 0)
		return FCGX_PutStr(buf, (int)len, o->out) == (int)len ? 0 : -1;
	if ((more = realloc(o->held, o->len + len)) == NULL)
		return -1;
	memcpy(more + o->len, buf, len);
	o->held = more;
	o->len += len;
	return 0;
}

FCGX_Request *
rlg_hold_request_new(void)
{
	struct request *rq = rlg_xcalloc(1, sizeof *rq);

	(void)FCGX_InitRequest(&rq->fcgx, -1, 0);
	return &rq->fcgx;
}

void
rlg_hold_request_free(FCGX_Request *req)
{
	struct request *rq = (struct request *)req;

	FCGX_Free(req, 1);
	free(rq->answer);
	free(rq);
}

/* A held request's turn (on the park's thread); returns the descriptor
 * for the park's lingering close, or -1. */
static int
answer(void *arg)
{
	struct request *rq = arg;
	FCGX_Request *req = &rq->fcgx;
	int fd = -1;

	(void)FCGX_PutStr(rq->answer, (int)rq->len, req->out);
	FCGX_Detach(req);               /* libfcgi's close: without a wait */
	req->keepConnection = !rq->at_once;
	FCGX_Finish_r(req);
	if (!rq->at_once)
		fd = req->ipcFd;        /* open unless the answer failed */
	free(rq->answer);
	free(rq);
	return fd;
}

void
rlg_hold_park(FCGX_Request *req, struct rlg_hold_out *o, bool at_once)
{
	struct request *rq = (struct request *)req;

	rq->answer = o->held;
	rq->len = o->len;
	rq->at_once = at_once;
	o->held = NULL;
	rlg_park_add(rlg_mono_ns() + o->hold_ms * 1000000, answer, rq);
}
