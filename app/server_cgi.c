/*
 * server_cgi.c: the CGI front's run (server.h, rlg_server_run_cgi): one
 * request from environ, its answer on stdout, through the same gate as
 * FastCGI's (front_cgi.c's adapter and renderer).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "front_cgi.h"
#include "fronts.h"
#include "gate.h"
#include "server.h"
#include "util.h"

extern char **environ;

/*
 * CGI's writer: an answer held for its turn (hold_ms, which the gate sets
 * before it sends: a smoothing policy) waits here first, as the process
 * is the request's own.
 */
struct cgi_out {
	FILE *f;
	int64_t hold_ms;
};

static int
stdout_write(void *ctx, const char *buf, size_t len)
{
	struct cgi_out *out = ctx;
	struct timespec nap;

	if (out->hold_ms > 0) {
		nap.tv_sec = out->hold_ms / 1000;
		nap.tv_nsec = out->hold_ms % 1000 * 1000000;
		out->hold_ms = 0;
		while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
			;
	}
	if (fwrite(buf, 1, len, out->f) != len || fflush(out->f) != 0)
		return -1;
	return 0;
}

int
rlg_server_run_cgi(const struct rlg_config *cfg)
{
	struct rlg_gate g;
	struct cgi_out out = { stdout, 0 };
	int rc;

	/* Writing to a Redis connection the server closed must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	rlg_gate_init(&g, cfg);
	rc = rlg_front_handle(&rlg_front_cgi, &g, environ, rlg_now_ms(),
	    stdout_write, &out, &out.hold_ms);
	/*
	 * The web server waits for a CGI process to exit, so pruning here
	 * delays the client: do it for about one request in a hundred.
	 */
	if (rlg_now_ms() % 100 == 0)
		rlg_gate_idle(&g, rlg_now_ms());
	rlg_gate_fini(&g);
	return rc == 0 ? 0 : 74;        /* EX_IOERR */
}
