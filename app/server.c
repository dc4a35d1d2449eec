/*
 * server.c: how requests reach rlgate and answers leave it.
 *
 * FastCGI: libfcgi's reentrant API on the socket a spawner (spawn-fcgi, or
 * the web server) left on fd 0; N threads per process, each with its own
 * gate (gate.c: its store connection), each looping FCGX_Accept_r ->
 * rlg_gate_handle -> FCGX_Finish_r -> rlg_gate_idle; on a unix socket a
 * Responder request without a body is closed without libfcgi's wait
 * (close_at_once). CGI: one request
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
#include <sys/socket.h>
#include <unistd.h>

#include <fastcgi.h>
#include <fcgiapp.h>

#include "gate.h"
#include "server.h"
#include "util.h"

extern char **environ;

static int fcgx_write(void *ctx, const char *buf, size_t len);
static int stdout_write(void *ctx, const char *buf, size_t len);
static void *fastcgi_thread(void *arg);
static int listens_on_unix_socket(void);
static int close_at_once(FCGX_Request *req, int unix_socket);

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
	int unix_socket;        /* fd 0 is an AF_UNIX socket */
	pthread_t tid;
};

static int
listens_on_unix_socket(void)
{
	struct sockaddr_storage sa = { .ss_family = AF_UNSPEC };
	socklen_t len = sizeof sa;

	return getsockname(0, (struct sockaddr *)&sa, &len) == 0 &&
	    sa.ss_family == AF_UNIX;
}

/*
 * libfcgi ends a connection by shutting down its sending side and reading
 * until the web server closes (or 2 s pass), so that input still on the
 * way cannot make the kernel answer with a TCP reset, which can destroy
 * the answer before the web server has read it. That wait costs a worker
 * about half its time per request (two more wake-ups and a select;
 * docs/benchmarks.md). It can be skipped when nothing more will come:
 *
 * - on a unix socket only: there is no reset there, but over TCP a late
 *   FCGI_ABORT_REQUEST would still draw one;
 * - in the Responder role only, where the web server ends its input with
 *   an empty FCGI_STDIN record, which is read here first (Apache writes
 *   it apart from the parameters: closing before it arrives fails that
 *   write, and the request). An Authorizer is sent no FCGI_STDIN by
 *   Apache, an empty one by lighttpd: there is no end to wait for, so its
 *   connections keep libfcgi's close;
 * - for a request without a body (no Transfer-Encoding, CONTENT_LENGTH
 *   absent, empty or 0): a body is left to libfcgi's close, which reads
 *   it while the web server writes it.
 *
 * Returns true when the input was read to its end and the connection may
 * be closed at once.
 */
static int
close_at_once(FCGX_Request *req, int unix_socket)
{
	const char *len;
	char buf[256];
	int n, total = 0;

	if (!unix_socket || req->role != FCGI_RESPONDER)
		return 0;
	if (FCGX_GetParam("HTTP_TRANSFER_ENCODING", req->envp) != NULL)
		return 0;
	len = FCGX_GetParam("CONTENT_LENGTH", req->envp);
	if (len != NULL && len[0] != '\0' && strcmp(len, "0") != 0)
		return 0;
	/* Bounded: a web server that sends a body it did not announce gets
	 * libfcgi's close for the rest. */
	while ((n = FCGX_GetStr(buf, (int)sizeof buf, req->in)) > 0)
		if ((total += n) > 4096)
			return 0;
	return FCGX_HasSeenEOF(req->in) == EOF &&
	    FCGX_GetError(req->in) == 0;
}

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
		if (close_at_once(&req, t->unix_socket))
			FCGX_Detach(&req);      /* its close skips the wait */
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
	struct sigaction sa;
	int i, started = 0, rc, unix_socket;

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
	/*
	 * SIGUSR1 reopens the log (--log) after a rotation moved it, as
	 * nginx's; libfcgi's own handler would stop the process instead.
	 * SA_RESTART: a thread in accept() goes on waiting.
	 */
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = rlg_log_reopen;
	sigaction(SIGUSR1, &sa, NULL);
	threads = rlg_xcalloc((size_t)nthreads, sizeof *threads);
	unix_socket = listens_on_unix_socket();
	for (i = 0; i < nthreads; i++) {
		threads[i].cfg = cfg;
		threads[i].unix_socket = unix_socket;
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
