/*
 * responder.c: the serving loop and the 200 answer of the benchmark's
 * FastCGI responders (noop, naive); see responder.h.
 */
#include "responder.h"

#include <fastcgi.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define RESPONDER_BODY \
	"{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}"

/*
 * Header names and values as long as rlgate's draft03 trio for a limit of
 * 1000000000 ("RateLimit-Limit: 1000000000", "RateLimit-Remaining:
 * 999999999", "RateLimit-Reset: 36"), so the bytes on the wire match.
 */
#define RESPONDER_HEAD \
	"Status: 200 OK\r\n" \
	"Content-Type: application/json\r\n" \
	"Cache-Control: no-store\r\n" \
	"X-Noop-Limit-00: 1000000000\r\n" \
	"X-Noop-Remaining-00: 999999999\r\n" \
	"X-Noop-Reset-00: 36\r\n"

static char answer_get[512], answer_head[512];
static int answer_get_len, answer_head_len;

/* FastCGI accept is serialized, as in fcgi2's threaded example (and rlgate). */
static pthread_mutex_t accept_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *run_prog;
static int run_unix_socket;     /* fd 0 is an AF_UNIX socket */
static responder_init_fn run_init;
static responder_handle_fn run_handle;

static void *responder_thread(void *arg);
static int close_at_once(FCGX_Request *req);

/*
 * As rlgate closes a connection (app/server.c, close_at_once): on a unix
 * socket, a Responder request without a body has its FCGI_STDIN read to
 * the end and is closed without libfcgi's wait for the web server's
 * close; so that the ceiling is served as rlgate is.
 */
static int
close_at_once(FCGX_Request *req)
{
	const char *len;
	char buf[256];
	int n, total = 0;

	if (!run_unix_socket || req->role != FCGI_RESPONDER ||
	    FCGX_GetParam("HTTP_TRANSFER_ENCODING", req->envp) != NULL)
		return 0;
	len = FCGX_GetParam("CONTENT_LENGTH", req->envp);
	if (len != NULL && len[0] != '\0' && strcmp(len, "0") != 0)
		return 0;
	while ((n = FCGX_GetStr(buf, (int)sizeof buf, req->in)) > 0)
		if ((total += n) > 4096)
			return 0;
	return FCGX_HasSeenEOF(req->in) == EOF &&
	    FCGX_GetError(req->in) == 0;
}

void
responder_ok(FCGX_Request *req)
{
	const char *method = FCGX_GetParam("REQUEST_METHOD", req->envp);

	if (method != NULL && strcmp(method, "HEAD") == 0)
		FCGX_PutStr(answer_head, answer_head_len, req->out);
	else
		FCGX_PutStr(answer_get, answer_get_len, req->out);
}

static void *
responder_thread(void *arg)
{
	FCGX_Request req;
	void *state = NULL;

	(void)arg;
	if (run_init != NULL && (state = run_init()) == NULL)
		exit(70);
	if (FCGX_InitRequest(&req, 0, 0) != 0) {
		fprintf(stderr, "%s: FCGX_InitRequest failed\n", run_prog);
		exit(70);
	}
	for (;;) {
		int rc;

		pthread_mutex_lock(&accept_lock);
		rc = FCGX_Accept_r(&req);
		pthread_mutex_unlock(&accept_lock);
		if (rc < 0) {
			fprintf(stderr, "%s: FastCGI accept failed (%d)\n",
			    run_prog, rc);
			break;
		}
		run_handle(&req, state);
		if (close_at_once(&req))
			FCGX_Detach(&req);
		FCGX_Finish_r(&req);
	}
	FCGX_Free(&req, 1);
	return NULL;
}

int
responder_run(const char *prog, int nthreads, responder_init_fn init,
    responder_handle_fn handle)
{
	pthread_t *tids;
	int i, started = 0, rc;

	run_prog = prog;
	run_init = init;
	run_handle = handle;
	answer_get_len = snprintf(answer_get, sizeof answer_get,
	    "%sContent-Length: %zu\r\n\r\n%s", RESPONDER_HEAD,
	    sizeof RESPONDER_BODY - 1, RESPONDER_BODY);
	answer_head_len = snprintf(answer_head, sizeof answer_head,
	    "%sContent-Length: %zu\r\n\r\n", RESPONDER_HEAD,
	    sizeof RESPONDER_BODY - 1);
	if (answer_get_len < 0 || (size_t)answer_get_len >= sizeof answer_get ||
	    answer_head_len < 0 ||
	    (size_t)answer_head_len >= sizeof answer_head)
		return 70;

	if (FCGX_Init() != 0) {
		fprintf(stderr, "%s: FCGX_Init failed\n", prog);
		return 70;
	}
	if (FCGX_IsCGI()) {
		fprintf(stderr, "%s: no FastCGI socket on standard input: "
		    "start it under spawn-fcgi\n", prog);
		return 64;
	}
	/* As rlgate (app/server.c): a client that hangs up must not kill us,
	 * and SIGTERM stops us at once. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	{
		struct sockaddr_storage sa = { .ss_family = AF_UNSPEC };
		socklen_t len = sizeof sa;

		run_unix_socket = getsockname(0, (struct sockaddr *)&sa,
		    &len) == 0 && sa.ss_family == AF_UNIX;
	}

	tids = calloc((size_t)nthreads, sizeof *tids);
	if (tids == NULL) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 71;
	}
	for (i = 0; i < nthreads; i++) {
		rc = pthread_create(&tids[i], NULL, responder_thread, NULL);
		if (rc != 0) {
			fprintf(stderr, "%s: cannot start thread: %s\n", prog,
			    strerror(rc));
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	return started == nthreads ? 0 : 71;
}
