/*
 * fronts.c: the fronts rlgate has, one row each (fronts.h). A front is
 * an adapter (its transport's request -> struct rlg_params) and a
 * renderer (struct rlg_reply -> its transport's answer); the transport's
 * loop (server.c's for FastCGI and CGI) finds its row here and hands each
 * request to rlg_front_handle, which reads it and hands it to the admin
 * endpoints or to the gate (rlg_front_serve). Adding a front: its file,
 * and a row below.
 */
#include <string.h>

#include "admin.h"
#include "front_cgi.h"
#include "fronts.h"
#include "util.h"

/* The fronts built in: one line each. */
static const struct rlg_front *const builtin[] = {
	&rlg_front_fastcgi,
	&rlg_front_cgi,
};
#define NBUILTIN (sizeof builtin / sizeof builtin[0])

/* The fronts registered at start (rlg_front_register), after them. */
static const struct rlg_front *extra[RLG_FRONTS_EXTRA];
static size_t nextra;

const struct rlg_front *
rlg_front_at(size_t i)
{
	if (i < NBUILTIN)
		return builtin[i];
	i -= NBUILTIN;
	return i < nextra ? extra[i] : NULL;
}

const struct rlg_front *
rlg_front_find(const char *name)
{
	const struct rlg_front *f;
	size_t i;

	for (i = 0; (f = rlg_front_at(i)) != NULL; i++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

int
rlg_front_register(const struct rlg_front *f)
{
	if (rlg_front_find(f->name) != NULL)
		return RLG_EINVAL;
	if (nextra == RLG_FRONTS_EXTRA)
		return RLG_ENOSPC;
	extra[nextra++] = f;
	return RLG_OK;
}

int
rlg_front_serve(struct rlg_gate *g, const struct rlg_params *params,
    int64_t now_ms, const struct rlg_out *out)
{
	struct rlg_request req;
	enum rlg_admin_endpoint e;

	rlg_request_read(&req, params, &g->cfg->client);
	e = req.flaw == RLG_FLAW_NONE ? rlg_admin_match(g->cfg, &req) :
	    RLG_ADMIN_NONE;
	if (e != RLG_ADMIN_NONE)
		return rlg_admin_serve(g->cfg, g->store, g->slot, e, &req,
		    now_ms, out);
	return rlg_gate_answer(g, &req, now_ms, out);
}

int
rlg_front_handle(const struct rlg_front *f, struct rlg_gate *g,
    const void *request, int64_t now_ms, rlg_write_fn write, void *ctx,
    int64_t *hold_ms)
{
	const struct rlg_out out = { f->render, write, ctx, hold_ms };
	struct rlg_params params;

	f->params(&params, request);
	return rlg_front_serve(g, &params, now_ms, &out);
}
