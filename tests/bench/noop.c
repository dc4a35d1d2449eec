/*
 * noop.c: a FastCGI responder that does nothing, the ceiling of the
 * end-to-end benchmark (tests/bench/e2e.sh). Whatever the web server, the
 * spawner and libfcgi cost per request, rlgate pays it too; what rlgate
 * adds on top is its own work. So noop serves the same way rlgate does
 * (libfcgi's reentrant API, N threads, the accept serialized by a mutex as
 * in fcgi2's examples/threaded.c) and answers with as many bytes as
 * rlgate's 200: the same status line, type, Cache-Control and body, and
 * three dummy headers of the same lengths as rlgate's draft03 trio
 * (RateLimit-Limit 1000000000, RateLimit-Remaining 999999999,
 * RateLimit-Reset 36), all in one FCGX_PutStr. It reads no parameter but
 * REQUEST_METHOD (a HEAD gets no body, as from rlgate), and has no store,
 * no config and no log.
 *
 * Usage: spawn-fcgi -s SOCKET -F N -- noop [--threads N]   (default 1)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcgiapp.h>

#define NOOP_THREADS_MAX 256

#define NOOP_BODY \
	"{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}"

/*
 * Header names and values as long as rlgate's draft03 trio for a limit of
 * 1000000000 ("RateLimit-Limit: 1000000000", "RateLimit-Remaining:
 * 999999999", "RateLimit-Reset: 36"), so the bytes on the wire match.
 */
#define NOOP_HEAD \
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

static int parse_threads(const char *s, int *out);
static void *noop_thread(void *arg);

static int
parse_threads(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 ||
	    v > NOOP_THREADS_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

static void *
noop_thread(void *arg)
{
	FCGX_Request req;
	const char *method;

	(void)arg;
	if (FCGX_InitRequest(&req, 0, 0) != 0) {
		fprintf(stderr, "noop: FCGX_InitRequest failed\n");
		return NULL;
	}
	for (;;) {
		int rc;

		pthread_mutex_lock(&accept_lock);
		rc = FCGX_Accept_r(&req);
		pthread_mutex_unlock(&accept_lock);
		if (rc < 0) {
			fprintf(stderr, "noop: FastCGI accept failed (%d)\n", rc);
			break;
		}
		method = FCGX_GetParam("REQUEST_METHOD", req.envp);
		if (method != NULL && strcmp(method, "HEAD") == 0)
			FCGX_PutStr(answer_head, answer_head_len, req.out);
		else
			FCGX_PutStr(answer_get, answer_get_len, req.out);
		FCGX_Finish_r(&req);
	}
	FCGX_Free(&req, 1);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t *tids;
	int i, nthreads = 1, started = 0, rc;

	for (i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "--threads") == 0 ||
		    strcmp(argv[i], "-t") == 0) && i + 1 < argc) {
			if (parse_threads(argv[++i], &nthreads) != 0) {
				fprintf(stderr, "noop: --threads: must be an "
				    "integer from 1 to %d (got \"%s\")\n",
				    NOOP_THREADS_MAX, argv[i]);
				return 64;
			}
		} else {
			fprintf(stderr, "usage: noop [--threads N] "
			    "(under spawn-fcgi)\n");
			return 64;
		}
	}

	answer_get_len = snprintf(answer_get, sizeof answer_get,
	    "%sContent-Length: %zu\r\n\r\n%s", NOOP_HEAD,
	    sizeof NOOP_BODY - 1, NOOP_BODY);
	answer_head_len = snprintf(answer_head, sizeof answer_head,
	    "%sContent-Length: %zu\r\n\r\n", NOOP_HEAD, sizeof NOOP_BODY - 1);
	if (answer_get_len < 0 || (size_t)answer_get_len >= sizeof answer_get ||
	    answer_head_len < 0 ||
	    (size_t)answer_head_len >= sizeof answer_head)
		return 70;

	if (FCGX_Init() != 0) {
		fprintf(stderr, "noop: FCGX_Init failed\n");
		return 70;
	}
	if (FCGX_IsCGI()) {
		fprintf(stderr, "noop: no FastCGI socket on standard input: "
		    "start it under spawn-fcgi\n");
		return 64;
	}
	/* As rlgate (app/server.c): a client that hangs up must not kill us,
	 * and SIGTERM stops us at once (libfcgi would only mark a shutdown as
	 * pending, which threads blocked in accept never see). */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);

	tids = calloc((size_t)nthreads, sizeof *tids);
	if (tids == NULL) {
		fprintf(stderr, "noop: out of memory\n");
		return 71;
	}
	for (i = 0; i < nthreads; i++) {
		rc = pthread_create(&tids[i], NULL, noop_thread, NULL);
		if (rc != 0) {
			fprintf(stderr, "noop: cannot start thread: %s\n",
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
