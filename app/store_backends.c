/*
 * store_backends.c: the table of the store backends (store_backends.h):
 * its rows, made from the one list RLG_STORE_BACKENDS, and what the
 * config and store_open.c ask of them. It names each backend's entry but
 * includes no store header (nor the config's), so that the config, below
 * the stores, can read it.
 */
#include <stdbool.h>
#include <stddef.h>

#include "store_backends.h"

/* The entries the rows name (each defined in its backend's own file). */
#define RLG_BACKEND_EXTERN_(e, word, flags, entry) \
	extern const struct rlg_backend entry;
RLG_STORE_BACKENDS(RLG_BACKEND_EXTERN_)
#undef RLG_BACKEND_EXTERN_

#define RLG_BACKEND_ROW_(e, word, flags, entry) \
	{ (word), (flags), &(entry) },
const struct rlg_backend_row rlg_backend_rows[] = {
	RLG_STORE_BACKENDS(RLG_BACKEND_ROW_)
};
#undef RLG_BACKEND_ROW_

const struct rlg_backend_row *
rlg_backend_row(int backend)
{
	if (backend < 0 || backend >= RLG_BACKEND_COUNT)
		return &rlg_backend_rows[0];
	return &rlg_backend_rows[backend];
}

bool
rlg_backend_has(int backend, unsigned flags)
{
	return (rlg_backend_row(backend)->flags & flags) == flags;
}

int
rlg_backend_first(int i)
{
	int j;

	for (j = 0; j < i; j++)
		if (rlg_backend_rows[j].entry == rlg_backend_rows[i].entry)
			return j;
	return i;
}
