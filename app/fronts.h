/*
 * fronts.h: the registry of fronts (struct rlg_front, front.h) and the
 * one way each of them hands a request to the gate.
 */
#ifndef RLG_FRONTS_H
#define RLG_FRONTS_H

#include <stddef.h>
#include <stdint.h>

#include "front.h"
#include "gate.h"

/* The front registered as name, or NULL. */
const struct rlg_front *rlg_front_find(const char *name);

/* The i-th registered front, for i from 0 until it returns NULL. */
const struct rlg_front *rlg_front_at(size_t i);

/*
 * Registers f (borrowed: it must outlive the program) beside the fronts
 * built in, before any thread serves: a front linked from elsewhere (the
 * tests register theirs). Returns RLG_OK, RLG_EINVAL for a name already
 * registered, or RLG_ENOSPC past RLG_FRONTS_EXTRA of them.
 */
#define RLG_FRONTS_EXTRA 4
int rlg_front_register(const struct rlg_front *f);

/*
 * Answers the request params describe with gate g at now_ms, through out
 * (a renderer and its writer): the one dispatch of every front. The
 * request is read (rlg_request_read); one for the admin endpoints from a
 * client [admin] allow lists is answered by admin.c (rlg_admin_serve),
 * counted by no policy; any other by the gate (rlg_gate_answer). Returns
 * 0, or the renderer's negative result.
 */
int rlg_front_serve(struct rlg_gate *g, const struct rlg_params *params,
    int64_t now_ms, const struct rlg_out *out);

/*
 * Answers request (f's transport's form of one) with gate g at now_ms:
 * the parameters through f's adapter, the answer through f's renderer to
 * write/ctx (rlg_front_serve); hold_ms as struct rlg_out's (NULL: the
 * front cannot hold the answer now). Returns 0, or the renderer's
 * negative result.
 */
int rlg_front_handle(const struct rlg_front *f, struct rlg_gate *g,
    const void *request, int64_t now_ms, rlg_write_fn write, void *ctx,
    int64_t *hold_ms);

#endif
