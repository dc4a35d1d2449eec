/*
 * noop.c: a FastCGI responder that does nothing, the ceiling of the
 * end-to-end benchmark (tests/bench/e2e.sh). Whatever the web server, the
 * spawner and libfcgi cost per request, rlgate pays it too; what rlgate
 * adds on top is its own work. So noop serves the same way rlgate does
 * and answers with as many bytes as rlgate's 200 (responder.c: libfcgi's
 * reentrant API, N threads, the accept serialized by a mutex; the same
 * status line, type, Cache-Control and body, and three dummy headers of
 * the same lengths as rlgate's draft03 trio, all in one FCGX_PutStr). It
 * reads no parameter but REQUEST_METHOD (a HEAD gets no body, as from
 * rlgate), and has no store, no config and no log.
 *
 * Usage: spawn-fcgi -s SOCKET -F N -- noop [--threads N]   (default 1)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "responder.h"

static int parse_threads(const char *s, int *out);
static void noop_handle(FCGX_Request *req, void *state);

static int
parse_threads(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 ||
	    v > RESPONDER_THREADS_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

static void
noop_handle(FCGX_Request *req, void *state)
{
	(void)state;
	responder_ok(req);
}

int
main(int argc, char **argv)
{
	int i, nthreads = 1;

	for (i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "--threads") == 0 ||
		    strcmp(argv[i], "-t") == 0) && i + 1 < argc) {
			if (parse_threads(argv[++i], &nthreads) != 0) {
				fprintf(stderr, "noop: --threads: must be an "
				    "integer from 1 to %d (got \"%s\")\n",
				    RESPONDER_THREADS_MAX, argv[i]);
				return 64;
			}
		} else {
			fprintf(stderr, "usage: noop [--threads N] "
			    "(under spawn-fcgi)\n");
			return 64;
		}
	}
	return responder_run("noop", nthreads, NULL, noop_handle);
}
