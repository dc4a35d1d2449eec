/*
 * server_hold.c: a FastCGI answer held for its turn (server_hold.h).
 */
#include <stdlib.h>
#include <unistd.h>

#include "server_hold.h"
#include "server_park.h"
#include "util.h"

/* A held answer: its records, whole, and its connection. */
struct held {
	int fd;
	bool at_once;                   /* its input read to its end */
	char *bytes;
	size_t len;
};

/* A held answer's turn (on the park's thread); returns the descriptor
 * for the park's lingering close, or -1. */
static int
answer(void *arg)
{
	struct held *h = arg;
	int fd = h->fd;

	if (rlg_wire_write_all(fd, h->bytes, h->len) != 0 || h->at_once) {
		close(fd);
		fd = -1;
	}
	free(h->bytes);
	free(h);
	return fd;
}

bool
rlg_hold_park(struct rlg_wire *w, int64_t hold_ms, bool at_once)
{
	struct held *h = malloc(sizeof *h);

	if (h == NULL || (h->bytes = rlg_wire_take(w, &h->len)) == NULL) {
		free(h);
		close(w->fd);
		rlg_wire_release(w);
		return false;
	}
	h->fd = w->fd;
	h->at_once = at_once;
	rlg_wire_release(w);
	rlg_park_add(rlg_mono_ns() + hold_ms * 1000000, answer, h);
	return true;
}
