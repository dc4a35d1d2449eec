/*
 * responder.h: what the benchmark's FastCGI responders (noop.c, the
 * ceiling; naive.c, one UPSERT per request) share: their 200 answer, as
 * many bytes as rlgate's, and the way they serve, as rlgate does
 * (libfcgi's reentrant API, N threads, the accept serialized by a mutex
 * as in fcgi2's examples/threaded.c; on a unix socket a Responder request
 * without a body closed without libfcgi's wait, as app/server.c does).
 */
#ifndef RLGATE_BENCH_RESPONDER_H
#define RLGATE_BENCH_RESPONDER_H

#include <fcgiapp.h>

#define RESPONDER_THREADS_MAX 256

/*
 * Per worker thread: init (if not NULL) once, its result passed to every
 * handle; init returns NULL when the thread cannot serve (it has said why
 * on stderr). handle answers one accepted request (responder_ok, say).
 */
typedef void *(*responder_init_fn)(void);
typedef void (*responder_handle_fn)(FCGX_Request *req, void *state);

/*
 * responder_run: builds the answers, starts libfcgi (the socket on
 * standard input, from spawn-fcgi), ignores SIGPIPE and leaves SIGTERM
 * and SIGINT to their default (libfcgi would only mark a shutdown as
 * pending, which threads blocked in accept never see), runs nthreads
 * (1 to RESPONDER_THREADS_MAX) serving threads and waits for them. PROG
 * names the program in messages. Returns the exit status: 0, 64 (not
 * under a FastCGI spawner), 70 (libfcgi did not start) or 71 (a thread
 * did not start); a thread that cannot serve (its init fails, say) ends
 * the process with 70.
 */
int responder_run(const char *prog, int nthreads, responder_init_fn init,
    responder_handle_fn handle);

/*
 * responder_ok: rlgate's 200 in bytes: the same status line, type,
 * Cache-Control, Content-Length and body, and three dummy headers as long
 * as rlgate's draft03 trio (X-Noop-Limit-00, ...), in one FCGX_PutStr; no
 * body for a HEAD, as from rlgate.
 */
void responder_ok(FCGX_Request *req);

#endif
