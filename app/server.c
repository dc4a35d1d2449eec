/*
 * server.c: how requests reach rlgate and answers leave it.
 *
 * FastCGI: libfcgi's reentrant API on the socket a spawner (spawn-fcgi, or
 * the web server) left on fd 0; N threads per process, each with its own
 * gate (gate.c: its store connection), each looping FCGX_Accept_r ->
 * rlg_gate_handle -> FCGX_Finish_r -> rlg_gate_idle. CGI: one request
 * from environ to stdout, through the same gate. What to answer is the
 * gate's; this file only moves bytes and owns the threads and signals.
 * Only this file includes fcgiapp.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "gate.h"
#include "server.h"
#include "util.h"

extern char **environ;

static int fcgx_write(void *ctx, const char *buf, size_t len);
static int stdout_write(void *ctx, const char *buf, size_t len);
static void *fastcgi_thread(void *arg);

static int
fcgx_write(void *ctx, const char *buf, size_t len)
{
	FCGX_Stream *out = ctx;

	return FCGX_PutStr(buf, (int)len, out) == (int)len ? 0 : -1;
}

static int
stdout_write(void *ctx, const char *buf, size_t len)
{
	FILE *out = ctx;

	if (fwrite(buf, 1, len, out) != len || fflush(out) != 0)
		return -1;
	return 0;
}

int
rlg_server_is_fastcgi(void)
{
	return !FCGX_IsCGI();
}

struct thread_arg {
	const struct rlg_config *cfg;
	pthread_t tid;
};

static void *
fastcgi_thread(void *arg)
{
	struct thread_arg *t = arg;
	struct rlg_gate g;
	FCGX_Request req;
	int64_t now_ms;
	int rc;

	rlg_gate_init(&g, t->cfg);
	if (FCGX_InitRequest(&req, 0, 0) != 0) {
		rlg_log("FCGX_InitRequest failed");
		rlg_gate_fini(&g);
		return NULL;
	}
	/*
	 * No lock around the accept, unlike fcgi2's threaded example: Linux
	 * lets threads accept() on one socket at once (libfcgi serializes
	 * only where USE_LOCKING says a platform cannot), and a kept
	 * FastCGI connection (nginx fastcgi_keep_conn) makes FCGX_Accept_r
	 * wait on that connection: under a lock, every other thread of the
	 * process would wait with it.
	 */
	for (;;) {
		rc = FCGX_Accept_r(&req);
		if (rc < 0) {
			rlg_log("FastCGI accept failed (%d): stopping this worker",
			    rc);
			break;
		}
		now_ms = rlg_now_ms();
		rlg_gate_handle(&g, req.envp, now_ms, fcgx_write, req.out);
		FCGX_Finish_r(&req);
		rlg_gate_idle(&g, now_ms);      /* a clock read per request */
	}
	FCGX_Free(&req, 1);
	rlg_gate_fini(&g);
	return NULL;
}

int
rlg_server_run_fastcgi(const struct rlg_config *cfg, int nthreads)
{
	struct thread_arg *threads;
	int i, started = 0, rc;

	if (FCGX_Init() != 0) {
		rlg_log("FCGX_Init failed");
		return 70;      /* EX_SOFTWARE */
	}
	/* A client that hangs up must not kill the worker mid-write. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * libfcgi catches SIGTERM and only marks a shutdown as pending, which
	 * threads blocked in accept never see: spawn-fcgi users and service
	 * managers expect SIGTERM to stop us. Dying mid-request is safe: an
	 * uncommitted SQLite transaction rolls back.
	 */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	threads = rlg_xcalloc((size_t)nthreads, sizeof *threads);
	for (i = 0; i < nthreads; i++) {
		threads[i].cfg = cfg;
		rc = pthread_create(&threads[i].tid, NULL, fastcgi_thread,
		    &threads[i]);
		if (rc != 0) {
			rlg_log("cannot start worker thread: %s", strerror(rc));
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(threads[i].tid, NULL);
	free(threads);
	return started == nthreads ? 0 : 71;    /* EX_OSERR */
}

int
rlg_server_run_cgi(const struct rlg_config *cfg)
{
	struct rlg_gate g;
	int rc;

	/* Writing to a Redis connection the server closed must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	rlg_gate_init(&g, cfg);
	rc = rlg_gate_handle(&g, environ, rlg_now_ms(), stdout_write, stdout);
	/*
	 * The web server waits for a CGI process to exit, so pruning here
	 * delays the client: do it for about one request in a hundred.
	 */
	if (rlg_now_ms() % 100 == 0)
		rlg_gate_idle(&g, rlg_now_ms());
	rlg_gate_fini(&g);
	return rc == 0 ? 0 : 74;        /* EX_IOERR */
}
