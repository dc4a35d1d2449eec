/*
 * server.c: how requests reach rlgate and answers leave it.
 *
 * FastCGI: on the socket a spawner (spawn-fcgi, or the web server) left
 * on fd 0, N threads per process, each with its own gate (gate.c: its
 * store connection) and its own wire (server_wire.c: the FastCGI records,
 * in buffers every request reuses), each looping next_request (a ready
 * connection from server_accept.c, its request read) -> serve ->
 * finish_request (the answer's records in one write; a kept connection
 * back to the set) -> rlg_gate_idle, every wait for the web server under
 * a read deadline (watch_thread); on a unix socket a Responder request
 * without a body is closed without the lingering close (close_at_once).
 * CGI (server_cgi.c): one request from environ to stdout, through the
 * same gate. Both are CGI-shaped fronts: their params reach the gate
 * through front_cgi.c's adapter and its answer leaves as CGI text through
 * front_cgi.c's renderer. What to answer is the gate's; this file only
 * moves bytes and owns the threads and signals, and the configuration
 * they serve with: a reload (SIGHUP) makes a new generation of it, which
 * each thread takes up before its next request (the last thread to leave
 * one frees it). An answer that must wait for its turn (a smoothing
 * policy) leaves the worker: its records and connection are handed to
 * the park (server_park.c), which answers it when it is due
 * (server_hold.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fastcgi.h>

#include "front_cgi.h"
#include "fronts.h"
#include "gate.h"
#include "metrics.h"
#include "pacer.h"
#include "server.h"
#include "server_accept.h"
#include "server_hold.h"
#include "server_park.h"
#include "server_peers.h"
#include "server_wire.h"
#include "util.h"

struct thread_arg;
static void *fastcgi_thread(void *arg);
static bool serve(struct rlg_gate *g, struct thread_arg *t,
    struct rlg_wire *w, int64_t now_ms, bool smooths);
static void max_parked_set(const struct rlg_config *cfg);
static void *signal_thread(void *arg);
static void reload(void);
static void stop_threads(void);
static void on_wake(int sig);
static struct generation *gen_take(void);
static void gen_release(struct generation *g);
static int listens_on_unix_socket(void);
static bool close_at_once(struct rlg_wire *w, int unix_socket);
static void linger_close(int fd);
static int next_request(struct thread_arg *t, struct rlg_wire *w);
static void finish_request(struct thread_arg *t, struct rlg_wire *w);
static void handlers_set(void);
static void watch_arm(struct thread_arg *t);
static bool watch_disarm(struct thread_arg *t);
static bool watch_fired(struct thread_arg *t);
static void *watch_thread(void *arg);
static void deadline_passed(struct thread_arg *t, const char *wait);
static void deadline_log(const struct sockaddr_storage *sa,
    const char *wait);
static long pace(struct rlg_pacer *p);

/*
 * FastCGI when fd 0 is a listening socket (a socket without a peer), as
 * libfcgi tells: a CGI request comes on a pipe or a file instead.
 */
int
rlg_server_is_fastcgi(void)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof sa;

	return getpeername(0, (struct sockaddr *)&sa, &len) != 0 &&
	    errno == ENOTCONN;
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
	/* The read deadline (watch_thread), under watch_mu: */
	pthread_mutex_t watch_mu;
	int64_t deadline_ns;    /* rlg_mono_ns(); 0: not waiting to read */
	int fired;              /* woken past deadline_ns since watch_arm */
	struct sockaddr_storage peer;   /* the connection's, for the log */
} __attribute__((aligned(64)));         /* no cache line shared between
                                           two workers' */


/* The worker threads, for a graceful stop (stop_threads). */
static struct thread_arg *workers;
static int nworkers;
static int stopping;            /* SIGTERM or SIGINT came (atomic) */

/* How long a stop waits for requests in flight. */
#define RLG_STOP_WAIT_MS 10000

/*
 * The read deadline: [fastcgi] read_timeout_ms of the current
 * configuration (atomic: a reload sets it), for each wait of a worker on
 * the web server. The watchdog looks every RLG_WATCH_TICK_MS at most
 * (less for a short deadline), so a deadline holds to that much.
 */
static int read_timeout_ms = RLG_DEFAULT_READ_TIMEOUT_MS;
#define RLG_WATCH_TICK_MS 100
/* [log] level of the current configuration (atomic, as above). */
static int log_level = RLG_LOG_WARN;
/* [fastcgi] max_parked of the current configuration (atomic, as above),
 * at most what the process's descriptors allow (fd_room). */
static int max_parked = RLG_DEFAULT_MAX_PARKED;
static int max_parked_room = RLG_MAX_PARKED_MAX;

/*
 * One log line at once, then at most one per RLG_ERROR_LOG_INTERVAL_MS
 * saying how many more came in between: a flood costs no disk (pacer.h;
 * every thread's, by the monotonic clock).
 */
static struct rlg_pacer deadline_pacer;
static struct rlg_pacer park_pacer;


static int
listens_on_unix_socket(void)
{
	struct sockaddr_storage sa = { .ss_family = AF_UNSPEC };
	socklen_t len = sizeof sa;

	return getsockname(0, (struct sockaddr *)&sa, &len) == 0 &&
	    sa.ss_family == AF_UNIX;
}

/*
 * A connection ends as libfcgi ends it (linger_close): rlgate shuts down
 * its sending side and reads until the web server closes (or 2 s pass),
 * so that input still on the way cannot make the kernel answer with a
 * TCP reset, which can destroy the answer before the web server has read
 * it. That wait costs a worker about half its time per request (two more
 * wake-ups and a poll; docs/benchmarks.md). It can be skipped when
 * nothing more will come:
 *
 * - on a unix socket only: there is no reset there, but over TCP a late
 *   FCGI_ABORT_REQUEST would still draw one;
 * - in the Responder role only, where the web server ends its input with
 *   an empty FCGI_STDIN record, which is read here first (Apache writes
 *   it apart from the parameters: closing before it arrives fails that
 *   write, and the request). An Authorizer is sent no FCGI_STDIN by
 *   Apache, an empty one by lighttpd: there is no end to wait for, so its
 *   connections keep the lingering close;
 * - for a request without a body (no Transfer-Encoding, CONTENT_LENGTH
 *   absent, empty or 0): a body is left to the lingering close, which
 *   reads it while the web server writes it.
 *
 * Returns true when the input was read to its end and the connection may
 * be closed at once.
 */
static bool
close_at_once(struct rlg_wire *w, int unix_socket)
{
	const char *len;

	if (!unix_socket || w->role != FCGI_RESPONDER)
		return false;
	if (rlg_envp_param(w->envp, "HTTP_TRANSFER_ENCODING") != NULL)
		return false;
	len = rlg_envp_param(w->envp, "CONTENT_LENGTH");
	if (len != NULL && len[0] != '\0' && strcmp(len, "0") != 0)
		return false;
	/* Bounded: a web server that sends a body it did not announce gets
	 * the lingering close for the rest. */
	return rlg_wire_read_input(w, 4096) == 1;
}

/*
 * libfcgi's close: the sending side shut, what comes read and dropped
 * until the web server closes, a read fails (the read deadline: EINTR)
 * or 2 s pass without a byte; then the close.
 */
static void
linger_close(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char trash[1024];

	if (shutdown(fd, SHUT_WR) == 0)
		while (poll(&p, 1, 2000) > 0 &&
		    read(fd, trash, sizeof trash) > 0)
			;
	close(fd);
}

/*
 * The read deadline. A worker reads with plain blocking read(2)s
 * (server_wire.c), without a timeout: a web server, or any local user
 * who may connect to the socket (over TCP, anyone on the host), that
 * sends nothing, or a request's
 * parameters without their end, or a body that never ends, would hold
 * the worker for as long as the connection stayed open, and threads x
 * processes such connections would stop every answer. So each wait of a
 * worker on the web server has a deadline, read_timeout_ms from its
 * start: for the request (from the accept, or on a kept connection from
 * the moment it is readable, to the end of its parameters; a connection
 * silent in the set is closed by the watchdog, rlg_accept_reap), and for
 * the end of its input and the web server's close after the answer
 * (close_at_once, linger_close). A deadline, not a timeout per read
 * (SO_RCVTIMEO): a peer that trickled a byte at a time would pass every
 * read's timeout.
 *
 * How: the workers say when they wait (watch_arm, watch_disarm);
 * watch_thread wakes a worker past its deadline with SIGUSR2, whose
 * handler does nothing and has no SA_RESTART, so the read (or poll)
 * fails with EINTR: a request not yet read whole is dropped (closed at
 * once) and the worker goes back to the set; a request already answered
 * is closed. The signal is sent under the
 * worker's watch_mu while it waits, so none reaches it past watch_disarm
 * (which lets a signal sent just before it land: sigpending), in the
 * store or the gate. Each passed deadline is logged (deadline_passed),
 * never with any byte of the request.
 */
static void
watch_arm(struct thread_arg *t)
{
	int64_t at = rlg_mono_ns() + (int64_t)__atomic_load_n(&read_timeout_ms,
	    __ATOMIC_RELAXED) * 1000000;

	pthread_mutex_lock(&t->watch_mu);
	t->deadline_ns = at;
	t->fired = 0;
	pthread_mutex_unlock(&t->watch_mu);
}

/* The wait is over; true if the deadline passed during it. */
static bool
watch_disarm(struct thread_arg *t)
{
	sigset_t pending;
	int fired;

	pthread_mutex_lock(&t->watch_mu);
	t->deadline_ns = 0;
	fired = t->fired;
	t->fired = 0;
	pthread_mutex_unlock(&t->watch_mu);
	if (fired)
		(void)sigpending(&pending);     /* a system call: the signal
		                                   lands here, not later */
	return fired;
}

/* Whether the deadline of the wait in progress has passed. */
static bool
watch_fired(struct thread_arg *t)
{
	bool fired;

	pthread_mutex_lock(&t->watch_mu);
	fired = t->fired != 0;
	pthread_mutex_unlock(&t->watch_mu);
	return fired;
}

/*
 * The watchdog: every tick, a worker waiting past its deadline gets
 * SIGUSR2 (again at each tick while it waits: a read that had taken some
 * bytes returns them rather than failing).
 */
static void *
watch_thread(void *arg)
{
	struct sockaddr_storage silent;
	struct timespec nap;
	int64_t now, tick_ms;
	int i, n;

	(void)arg;
	for (;;) {
		tick_ms = __atomic_load_n(&read_timeout_ms, __ATOMIC_RELAXED) / 5;
		if (tick_ms > RLG_WATCH_TICK_MS)
			tick_ms = RLG_WATCH_TICK_MS;
		nap.tv_sec = 0;
		nap.tv_nsec = (long)tick_ms * 1000000;
		nanosleep(&nap, NULL);
		now = rlg_mono_ns();
		/* the idle connections of the set past theirs */
		if (rlg_accept_reap(now, &silent) > 0)
			deadline_log(&silent, "request");
		n = __atomic_load_n(&nworkers, __ATOMIC_ACQUIRE);
		for (i = 0; i < n; i++) {
			struct thread_arg *t = &workers[i];

			pthread_mutex_lock(&t->watch_mu);
			if (t->deadline_ns != 0 && now >= t->deadline_ns) {
				t->fired = 1;
				pthread_kill(t->tid, SIGUSR2);
			}
			pthread_mutex_unlock(&t->watch_mu);
		}
	}
	return NULL;
}

/*
 * The number of lines p held back since its last one, or -1 to hold
 * this one back too (rlg_pacer_take, now by the monotonic clock).
 */
static long
pace(struct rlg_pacer *p)
{
	return rlg_pacer_take(p, rlg_mono_ns() / 1000000,
	    RLG_ERROR_LOG_INTERVAL_MS);
}

/*
 * A connection closed at its read deadline, waiting for wait ("request":
 * its parameters; "input": the end of its FCGI_STDIN; "close": the web
 * server's close after the answer): one line, paced.
 */
static void
deadline_passed(struct thread_arg *t, const char *wait)
{
	deadline_log(&t->peer, wait);
}

/* The same for a connection of peer sa closed by the watchdog. */
static void
deadline_log(const struct sockaddr_storage *sa, const char *wait)
{
	char peer[INET6_ADDRSTRLEN];
	long more;

	if (__atomic_load_n(&log_level, __ATOMIC_RELAXED) < RLG_LOG_WARN ||
	    (more = pace(&deadline_pacer)) < 0)
		return;
	rlg_peer_name(sa, peer, sizeof peer);
	rlg_log("event=read_deadline peer=%s wait=%s timeout_ms=%d"
	    " suppressed=%ld", peer, wait,
	    __atomic_load_n(&read_timeout_ms, __ATOMIC_RELAXED), more);
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

/*
 * The worker's next request on its wire w, from the next ready
 * connection (server_accept.c: a new one, or a kept one that has sent its
 * next request; or the one w still holds, whose next request is already
 * read), read under the read deadline. Returns 1 with a request, 0 when
 * there is none this time (a signal, a stop, a request dropped: the
 * deadline, a protocol error, the web server's close; a kept connection
 * back to wait), -1 when the worker stops (the socket is no listening
 * socket).
 */
static int
next_request(struct thread_arg *t, struct rlg_wire *w)
{
	bool kept;
	int rc, fd;

	if (w->fd >= 0 && rlg_wire_pending(w)) {
		fd = w->fd;             /* its peer: t->peer still */
	} else {
		__atomic_store_n(&t->in_accept, 1, __ATOMIC_RELEASE);
		fd = rlg_accept_next(&t->peer, &kept);
		__atomic_store_n(&t->in_accept, 0, __ATOMIC_RELEASE);
		if (fd == -EINTR)       /* a stop, or another signal */
			return 0;
		if (fd < 0) {
			rlg_log("FastCGI accept failed: %s: stopping this"
			    " worker", strerror(-fd));
			return -1;
		}
		if (kept) {             /* its peer, for the log */
			socklen_t len = sizeof t->peer;

			if (t->unix_socket)
				t->peer.ss_family = AF_UNIX;
			else if (getpeername(fd, (struct sockaddr *)&t->peer,
			    &len) != 0)
				t->peer.ss_family = AF_UNSPEC;
		}
	}
	watch_arm(t);
	rc = rlg_wire_read_request(w, fd);
	if (watch_disarm(t) && rc < 0)
		deadline_passed(t, "request");
	if (rc == 1)
		return 1;
	rlg_wire_release(w);
	if (rc == 0)                    /* only the last request's rest */
		rlg_accept_keep(fd);
	else                            /* dropped: the deadline, a protocol
		                           error, the web server's close */
		close(fd);
	return 0;
}

/*
 * After the answer's records: the rest of the request's input and the web
 * server's close, under the read deadline (close_at_once skips the
 * close's wait); a kept connection (FCGI_KEEP_CONN) goes back to the set,
 * idle there, not in a worker, unless its next request is read already
 * (the worker goes on with it).
 */
static void
finish_request(struct thread_arg *t, struct rlg_wire *w)
{
	const char *late = NULL;
	bool at_once = false, keep = w->keep, sent;
	int fd = w->fd;

	watch_arm(t);
	if (!keep)
		at_once = close_at_once(w, t->unix_socket);
	if (!at_once && watch_fired(t)) {
		at_once = true;         /* the rest never came */
		keep = false;
		late = "input";
	}
	sent = !w->drop && rlg_wire_send(w) == 0;
	if (keep && sent && !w->broken) {
		if (!rlg_wire_pending(w)) {
			rlg_wire_release(w);
			rlg_accept_keep(fd);
		}
	} else {
		rlg_wire_release(w);
		if (at_once || !sent)
			close(fd);
		else
			linger_close(fd);
	}
	if (watch_disarm(t) && late == NULL)
		late = "close";
	if (late != NULL)
		deadline_passed(t, late);
}

/*
 * One request of the FastCGI front: its params through the front's
 * adapter, its answer rendered (CGI text) as FCGI_STDOUT records on its
 * wire (rlg_wire_put). An answer that must wait for its turn (smooths:
 * the configuration has a smoothing policy) is parked: its records and
 * connection go to the park, which writes them when it is due
 * (rlg_hold_park). A slot is reserved first: with none left
 * (max_parked), the gate answers at once (struct rlg_out). Returns true
 * when the request was parked (or dropped: no memory to hold it); else
 * the caller sends the answer (finish_request).
 */
static bool
serve(struct rlg_gate *g, struct thread_arg *t, struct rlg_wire *w,
    int64_t now_ms, bool smooths)
{
	int64_t hold_ms = 0;
	bool slot = smooths && rlg_park_reserve(__atomic_load_n(&max_parked,
	    __ATOMIC_RELAXED));
	bool at_once;
	long more;
	int rc;

	rc = rlg_front_handle(&rlg_front_fastcgi, g, w->envp, now_ms,
	    rlg_wire_put, w, !smooths || slot ? &hold_ms : NULL);
	if (smooths && !slot && __atomic_load_n(&log_level,
	    __ATOMIC_RELAXED) >= RLG_LOG_WARN &&
	    (more = pace(&park_pacer)) >= 0)
		rlg_log("event=park_full max_parked=%d: smoothing policies"
		    " answer at once, refusing what would wait"
		    " suppressed=%ld", __atomic_load_n(&max_parked,
		    __ATOMIC_RELAXED), more);
	if (rc != 0)            /* no memory for the answer: the request
	                           ends without it, as a failed write's */
		w->drop = true;
	if (hold_ms <= 0 || rc != 0) {
		if (slot)
			rlg_park_unreserve();
		return false;
	}
	/* its input read to its end now, if it can be (close_at_once), so
	 * that the park closes it at once, without a lingering close */
	watch_arm(t);
	at_once = close_at_once(w, t->unix_socket);
	(void)watch_disarm(t);
	if (!rlg_hold_park(w, hold_ms, at_once))
		rlg_park_unreserve();
	return true;
}

/* max_parked of cfg, within the room the descriptors leave. */
static void
max_parked_set(const struct rlg_config *cfg)
{
	__atomic_store_n(&max_parked, cfg->max_parked < max_parked_room ?
	    cfg->max_parked : max_parked_room, __ATOMIC_RELAXED);
}

static void *
fastcgi_thread(void *arg)
{
	struct thread_arg *t = arg;
	struct generation *gen = gen_take();
	struct rlg_gate g;
	struct rlg_wire w;
	bool smooths = rlg_config_smooths(gen->cfg);
	int64_t now_ms;
	int rc;

	rlg_gate_init(&g, gen->cfg);
	rlg_wire_init(&w);              /* its buffers, for every request */
	/*
	 * No lock around the accept, unlike fcgi2's threaded example: the
	 * workers wait in one epoll set (server_accept.c), which wakes one
	 * of them per ready connection, and a kept FastCGI connection
	 * (nginx fastcgi_keep_conn) waits for its next request in that set,
	 * not in a worker.
	 */
	for (;;) {
		if (__atomic_load_n(&stopping, __ATOMIC_ACQUIRE))
			break;
		rc = next_request(t, &w);
		if (rc < 0)
			break;
		if (rc == 0)
			continue;
		/* a reload since the last request: its configuration first */
		if (__atomic_load_n(&live.n, __ATOMIC_ACQUIRE) != gen->n) {
			struct generation *old = gen;

			gen = gen_take();
			rlg_gate_reconfig(&g, gen->cfg);
			smooths = rlg_config_smooths(gen->cfg);
			gen_release(old);
		}
		now_ms = rlg_now_ms();
		if (!serve(&g, t, &w, now_ms, smooths))
			finish_request(t, &w);
		rlg_gate_idle(&g, now_ms);      /* a clock read per request */
	}
	if (w.fd >= 0)                  /* a kept one with its next request */
		close(w.fd);
	rlg_wire_fini(&w);
	rlg_gate_fini(&g);
	gen_release(gen);
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * SIGUSR2: nothing; it only interrupts a thread's accept (a stop) or its
 * read past the deadline (no SA_RESTART).
 */
static void
on_wake(int sig)
{
	(void)sig;
}

/*
 * A graceful stop: no thread takes a new request, each finishes the one
 * it is answering. A thread waiting in accept is woken by SIGUSR2 (its
 * accept fails with EINTR), again every 20 ms, since one
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
	__atomic_store_n(&read_timeout_ms, cfg->read_timeout_ms,
	    __ATOMIC_RELAXED);
	__atomic_store_n(&log_level, (int)cfg->log_level, __ATOMIC_RELAXED);
	max_parked_set(cfg);
	rlg_log("reload: %s: loaded (generation %llu: %zu polic%s, %zu"
	    " route%s); each thread serves with it from its next request",
	    live.path, (unsigned long long)g->n, cfg->npolicies,
	    cfg->npolicies == 1 ? "y" : "ies", cfg->nroutes,
	    cfg->nroutes == 1 ? "" : "s");
}

/* The process's signal handlers for FastCGI, before any thread starts. */
static void
handlers_set(void)
{
	struct sigaction sa;
	sigset_t usr1;

	/* A client that hangs up must not kill the worker mid-write. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * spawn-fcgi users and service managers expect SIGTERM to stop us,
	 * whatever the process inherited. signal_thread takes it (started by
	 * rlg_server_run_fastcgi) and stops the threads gracefully; SIGUSR2
	 * wakes one from its wait for a connection, or from a read past its
	 * deadline (watch_thread).
	 */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;
	sa.sa_handler = on_wake;
	sigaction(SIGUSR2, &sa, NULL);
	/*
	 * SIGUSR1 reopens the log (--log) after a rotation moved it, as
	 * nginx's (its default would stop the process).
	 * SA_RESTART: a thread in accept() goes on waiting.
	 */
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = rlg_log_reopen;
	sigaction(SIGUSR1, &sa, NULL);
	/* a supervisor's worker starts with it blocked (supervisor.c) */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
}

int
rlg_server_run_fastcgi(const struct rlg_config *cfg, const char *path,
    int nthreads)
{
	struct thread_arg *threads;
	struct generation *first;
	sigset_t hup;
	pthread_t reloader, watcher;
	int i, started = 0, rc, unix_socket;

	handlers_set();
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
	rlg_web_servers_read();
	__atomic_store_n(&read_timeout_ms, cfg->read_timeout_ms,
	    __ATOMIC_RELAXED);
	__atomic_store_n(&log_level, (int)cfg->log_level, __ATOMIC_RELAXED);
	if (rlg_config_smooths(cfg))
		max_parked_room = rlg_park_room(cfg->max_parked, nthreads);
	max_parked_set(cfg);
	/* idle connections: the descriptors the workers, the store, the log
	 * and the held answers leave */
	if ((rc = rlg_accept_init(0, &log_level, &read_timeout_ms,
	    nthreads * 4 + 64 + (rlg_config_smooths(cfg) ?
	    max_parked_room : 0))) != 0) {
		rlg_log("FastCGI: cannot wait for connections on fd 0: %s",
		    strerror(rc));
		return 71;      /* EX_OSERR */
	}
	if ((rc = rlg_park_start(cfg->read_timeout_ms)) != 0)
		rlg_log("cannot start the park's thread: %s (answers that"
		    " would wait for their turn are given at once)",
		    strerror(rc));
	for (i = 0; i < nthreads; i++)
		pthread_mutex_init(&threads[i].watch_mu, NULL);
	if ((rc = pthread_create(&watcher, NULL, watch_thread, NULL)) != 0) {
		rlg_log("cannot start the read deadline's thread: %s",
		    strerror(rc));
		return 71;      /* EX_OSERR */
	}
	pthread_detach(watcher);
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
	/* the held answers, at once (a stop: admitted as decided) */
	rlg_park_stop();
	/* threads is not freed: the signal thread may still read it */
	return started == nthreads ? 0 : 71;    /* EX_OSERR */
}
