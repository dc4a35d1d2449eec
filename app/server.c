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
 * gate's; this file only moves bytes and owns the threads and signals,
 * and the configuration they serve with: a reload (SIGHUP) makes a new
 * generation of it, which each thread takes up before its next request
 * (the last thread to leave one frees it).
 * Only this file includes fcgiapp.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fastcgi.h>
#include <fcgiapp.h>

#include "gate.h"
#include "metrics.h"
#include "server.h"
#include "util.h"

extern char **environ;

static int fcgx_write(void *ctx, const char *buf, size_t len);
static int stdout_write(void *ctx, const char *buf, size_t len);
static void *fastcgi_thread(void *arg);
static void *signal_thread(void *arg);
static void reload(void);
static void stop_threads(void);
static void on_wake(int sig);
static struct generation *gen_take(void);
static void gen_release(struct generation *g);
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

/* A configuration the threads serve with, and who holds it. */
struct generation {
	const struct rlg_config *cfg;
	struct rlg_config *owned;     /* a reload's, freed with the last
	                                 holder; NULL: the caller's */
	int refs;                     /* the threads on it, and live's own */
	uint64_t n;
};

/* The current generation: what a thread's next request is decided by. */
static struct {
	pthread_mutex_t mu;
	struct generation *cur;
	uint64_t n;                   /* cur->n, read without the lock */
	const char *path;             /* NULL: built-in defaults */
} live = { .mu = PTHREAD_MUTEX_INITIALIZER };

struct thread_arg {
	int unix_socket;        /* fd 0 is an AF_UNIX socket */
	pthread_t tid;
	int in_accept;          /* waiting for a request (atomic) */
	int done;               /* its loop has ended (atomic) */
};

/* The worker threads, for a graceful stop (stop_threads). */
static struct thread_arg *workers;
static int nworkers;
static int stopping;            /* SIGTERM or SIGINT came (atomic) */

/* How long a stop waits for requests in flight. */
#define RLG_STOP_WAIT_MS 10000

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

/* The current generation, one more holder. */
static struct generation *
gen_take(void)
{
	struct generation *g;

	pthread_mutex_lock(&live.mu);
	g = live.cur;
	g->refs++;
	pthread_mutex_unlock(&live.mu);
	return g;
}

/* One holder less; the last one frees a generation no longer current. */
static void
gen_release(struct generation *g)
{
	bool gone;

	pthread_mutex_lock(&live.mu);
	gone = --g->refs == 0 && g != live.cur;
	pthread_mutex_unlock(&live.mu);
	if (!gone)
		return;
	rlg_metrics_unmap(g->cfg);
	rlg_config_free(g->owned);
	free(g);
}

static void *
fastcgi_thread(void *arg)
{
	struct thread_arg *t = arg;
	struct generation *gen = gen_take();
	struct rlg_gate g;
	FCGX_Request req;
	int64_t now_ms;
	int rc;

	rlg_gate_init(&g, gen->cfg);
	/* A stop interrupts the accept (stop_threads): let it fail then. */
	if (FCGX_InitRequest(&req, 0, FCGI_FAIL_ACCEPT_ON_INTR) != 0) {
		rlg_log("FCGX_InitRequest failed");
		rlg_gate_fini(&g);
		gen_release(gen);
		__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
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
		if (__atomic_load_n(&stopping, __ATOMIC_ACQUIRE))
			break;
		__atomic_store_n(&t->in_accept, 1, __ATOMIC_RELEASE);
		rc = FCGX_Accept_r(&req);
		__atomic_store_n(&t->in_accept, 0, __ATOMIC_RELEASE);
		if (rc < 0) {
			if (__atomic_load_n(&stopping, __ATOMIC_ACQUIRE))
				break;
			if (rc == -EINTR)       /* a signal, not a stop */
				continue;
			rlg_log("FastCGI accept failed (%d): stopping this"
			    " worker", rc);
			break;
		}
		/* a reload since the last request: its configuration first */
		if (__atomic_load_n(&live.n, __ATOMIC_ACQUIRE) != gen->n) {
			struct generation *old = gen;

			gen = gen_take();
			rlg_gate_reconfig(&g, gen->cfg);
			gen_release(old);
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
	gen_release(gen);
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* SIGUSR2: nothing; it only interrupts a thread's accept (no SA_RESTART). */
static void
on_wake(int sig)
{
	(void)sig;
}

/*
 * A graceful stop: no thread takes a new request, each finishes the one
 * it is answering. A thread waiting in accept is woken by SIGUSR2 (its
 * accept fails: FCGI_FAIL_ACCEPT_ON_INTR), again every 20 ms, since one
 * that was between requests when the flag was set may enter accept after
 * the signal. After RLG_STOP_WAIT_MS the process exits as it is.
 */
static void
stop_threads(void)
{
	struct timespec nap = { 0, 20L * 1000000 };
	int i, busy = 0, waited;

	__atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
	for (waited = 0; waited < RLG_STOP_WAIT_MS; waited += 20) {
		busy = 0;
		for (i = 0; i < __atomic_load_n(&nworkers, __ATOMIC_ACQUIRE); i++) {
			if (__atomic_load_n(&workers[i].done, __ATOMIC_ACQUIRE))
				continue;
			busy++;
			if (__atomic_load_n(&workers[i].in_accept,
			    __ATOMIC_ACQUIRE))
				pthread_kill(workers[i].tid, SIGUSR2);
		}
		if (busy == 0)
			return;
		nanosleep(&nap, NULL);
	}
	rlg_log("stopping: %d thread%s still answering after %d ms: exiting"
	    " without them", busy, busy == 1 ? "" : "s", RLG_STOP_WAIT_MS);
	_exit(0);
}

/*
 * SIGHUP, SIGTERM and SIGINT, taken by this thread alone (sigwait; every
 * other thread blocks them), so that what they ask runs outside any
 * signal handler: a reload may read files, allocate and log; a stop
 * waits for the requests in flight.
 */
static void *
signal_thread(void *arg)
{
	sigset_t set;
	int sig;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGHUP) {
			reload();
		} else {
			stop_threads();
			return NULL;
		}
	}
}

/*
 * Reads the configuration file again. Every problem is logged as the
 * loader writes it (file:line: message), and the running configuration
 * stays; so it does when the new one's [store] differs (the store is
 * open: restart for that). Else the new one becomes current: its policy
 * names join the scoreboard, the log's format follows it, and each
 * thread takes it up before its next request.
 */
static void
reload(void)
{
	struct rlg_config *cfg = NULL;
	struct generation *g, *old;
	char *errs = NULL, *line, *next, what[64];
	size_t len = 0;
	FILE *f;
	int n;

	if (live.path == NULL) {
		rlg_log("reload (SIGHUP): running on the built-in defaults, no"
		    " file to read again");
		return;
	}
	f = open_memstream(&errs, &len);
	if (f == NULL) {
		rlg_log("reload (SIGHUP): %s", strerror(errno));
		return;
	}
	n = rlg_config_load(live.path, f, &cfg);
	fclose(f);
	for (line = errs; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		rlg_log("reload: %s", line);
	}
	free(errs);
	if (n != 0) {
		rlg_log("reload: %s: %d problem%s: the running configuration"
		    " stays", live.path, n, n == 1 ? "" : "s");
		return;
	}
	if (rlg_config_store_changed(live.cur->cfg, cfg, what, sizeof what)) {
		rlg_log("reload: %s: [store] %s changed: a reload cannot change"
		    " the store (restart rlgate for that); the running"
		    " configuration stays", live.path, what);
		rlg_config_free(cfg);
		return;
	}
	(void)rlg_metrics_map(cfg);
	g = rlg_xcalloc(1, sizeof *g);
	g->cfg = cfg;
	g->owned = cfg;
	g->refs = 1;                    /* live's */
	pthread_mutex_lock(&live.mu);
	old = live.cur;
	g->n = old->n + 1;
	live.cur = g;
	__atomic_store_n(&live.n, g->n, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&live.mu);
	gen_release(old);
	rlg_log_set_json(cfg->log_format == RLG_LOG_JSON);
	rlg_log("reload: %s: loaded (generation %llu: %zu polic%s, %zu"
	    " route%s); each thread serves with it from its next request",
	    live.path, (unsigned long long)g->n, cfg->npolicies,
	    cfg->npolicies == 1 ? "y" : "ies", cfg->nroutes,
	    cfg->nroutes == 1 ? "" : "s");
}

int
rlg_server_run_fastcgi(const struct rlg_config *cfg, const char *path,
    int nthreads)
{
	struct thread_arg *threads;
	struct generation *first;
	struct sigaction sa;
	sigset_t hup;
	pthread_t reloader;
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
	 * managers expect SIGTERM to stop us. signal_thread takes it (below)
	 * and stops the threads gracefully; SIGUSR2 wakes one from accept.
	 */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;
	sa.sa_handler = on_wake;
	sigaction(SIGUSR2, &sa, NULL);
	/*
	 * SIGUSR1 reopens the log (--log) after a rotation moved it, as
	 * nginx's; libfcgi's own handler would stop the process instead.
	 * SA_RESTART: a thread in accept() goes on waiting.
	 */
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = rlg_log_reopen;
	sigaction(SIGUSR1, &sa, NULL);
	/* a supervisor's worker starts with it blocked (supervisor.c) */
	sigemptyset(&hup);
	sigaddset(&hup, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &hup, NULL);
	/*
	 * SIGHUP (reload), SIGTERM and SIGINT (stop): blocked here, so in
	 * every thread started from here on, and taken by signal_thread.
	 */
	first = rlg_xcalloc(1, sizeof *first);
	first->cfg = cfg;
	first->refs = 1;                /* live's */
	live.cur = first;
	live.n = 0;
	live.path = path;
	threads = rlg_xcalloc((size_t)nthreads, sizeof *threads);
	workers = threads;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	sigaddset(&hup, SIGTERM);
	sigaddset(&hup, SIGINT);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);
	if ((rc = pthread_create(&reloader, NULL, signal_thread, NULL)) != 0) {
		rlg_log("cannot start the signal thread: %s (SIGHUP and"
		    " SIGTERM keep their default: SIGTERM stops at once)",
		    strerror(rc));
		pthread_sigmask(SIG_UNBLOCK, &hup, NULL);
	} else {
		pthread_detach(reloader);
	}
	unix_socket = listens_on_unix_socket();
	for (i = 0; i < nthreads; i++) {
		threads[i].unix_socket = unix_socket;
		rc = pthread_create(&threads[i].tid, NULL, fastcgi_thread,
		    &threads[i]);
		if (rc != 0) {
			rlg_log("cannot start worker thread: %s", strerror(rc));
			break;
		}
		started++;
		__atomic_store_n(&nworkers, started, __ATOMIC_RELEASE);
	}
	for (i = 0; i < started; i++)
		pthread_join(threads[i].tid, NULL);
	/* threads is not freed: the signal thread may still read it */
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
