/*
 * server_accept.c: the connections ready for a FastCGI worker
 * (server_accept.h).
 *
 * Why a set and not accept(2) in each worker: a web server that keeps its
 * FastCGI connections (nginx: fastcgi_keep_conn on with an upstream
 * keepalive) sends its next request on a connection whenever it likes. A
 * worker that waited on its connection for that request would be pinned
 * by it while it is idle, and requests on other connections would queue
 * behind idle ones: with more kept connections than threads, behind one
 * that never speaks again. So between two requests a kept connection is
 * in this set, and any worker takes it up when it is readable.
 *
 * The set, one epoll instance per process, which every worker waits in
 * (epoll wakes one waiter per event):
 *
 * - the listening socket, edge-triggered and EPOLLEXCLUSIVE: a connection
 *   wakes one worker of one process (the processes of spawn-fcgi -F N
 *   share the socket), not all of them. The woken worker accepts until
 *   the socket has nothing more, keeps the first connection and puts the
 *   others in the set for the other workers: with an edge, a connection
 *   left in the queue would wait for the next one's. The kernel wakes
 *   the sets on a socket in the order they joined it, so the first
 *   process would take every connection while it has an idle worker;
 *   after every RLG_ROTATE_EVERY connections a process takes the socket
 *   out of its set and puts it back, last (rotate): the processes take
 *   turns, as they would in accept(2), at two system calls for that
 *   many connections.
 * - connections, EPOLLONESHOT: one worker takes a connection when it is
 *   readable; the set forgets it until the worker gives it back
 *   (rlg_accept_keep) after the answer. A connection that closes is
 *   readable too: its worker reads the end and closes it. One that stays
 *   silent is closed at its read deadline (rlg_accept_reap; one that has
 *   spoken waits for a free worker, as in the listening queue): idle
 *   connections hold no thread, but each holds a descriptor, and whoever
 *   may connect could otherwise fill the process's table with them.
 *
 * The set holds at most the descriptors the rest of the process leaves
 * (slots.cap, from RLIMIT_NOFILE): past that, a worker leaves new
 * connections in the listening queue, the kernel's (the watchdog takes
 * them in as room comes: rlg_accept_reap), and a kept one is closed.
 *
 * Each connection in the set has a slot, indexed by its descriptor, under
 * one mutex: its deadline and a generation, which the epoll event carries
 * beside the descriptor, so that an event of a connection the reaper
 * closed (its descriptor perhaps reused since) is known and dropped.
 *
 * A new connection is served by the worker that accepted it without a
 * trip through the set: the web server (lighttpd, Apache, Caddy, nginx
 * without keepalive) writes its request at once after connecting.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <limits.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "pacer.h"
#include "server_accept.h"
#include "server_peers.h"
#include "util.h"

/* The listening socket's mark in the set (a descriptor is never this). */
#define RLG_LISTENER UINT64_MAX
/* A process's connections between two turns given to the others. */
#define RLG_ROTATE_EVERY 8

/* A connection's slot: in the set (idle) or not (a worker's, or none). */
struct slot {
	int64_t deadline_ns;    /* closed past this, when idle */
	uint32_t gen;           /* of its last entry into the set */
	bool idle;              /* in the set, armed */
	bool fresh;             /* never read: its deadline is logged */
};

static struct {
	pthread_mutex_t mu;
	struct slot *at;        /* by descriptor */
	int n;                  /* slots allocated */
	int top;                /* 1 + the highest descriptor in use */
	int nidle;              /* connections idle in the set */
	int cap;                /* the most there may be */
} slots = { .mu = PTHREAD_MUTEX_INITIALIZER, .cap = 16 };

static int epfd = -1;
static int lfd = -1;
static int tcp;                         /* lfd is not AF_UNIX */
static const int *log_level;
static const int *read_timeout_ms;
static struct rlg_pacer refused_pacer;
static struct rlg_pacer accept_pacer;
static struct rlg_pacer full_pacer;
static unsigned accepted;               /* connections taken (atomic) */

int
rlg_accept_init(int fd, const int *level, const int *timeout_ms,
    int reserved)
{
	struct rlimit rl;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET |
	    EPOLLEXCLUSIVE, .data.u64 = RLG_LISTENER };
	struct sockaddr_storage sa = { .ss_family = AF_UNSPEC };
	socklen_t len = sizeof sa;
	int flags;

	log_level = level;
	read_timeout_ms = timeout_ms;
	lfd = fd;
	/* at least 16; RLIM_INFINITY is the largest rlim_t */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && reserved >= 0 &&
	    rl.rlim_cur > (rlim_t)reserved + 16)
		slots.cap = rl.rlim_cur - (rlim_t)reserved > INT_MAX / 2 ?
		    INT_MAX / 2 : (int)(rl.rlim_cur - (rlim_t)reserved);
	tcp = getsockname(fd, (struct sockaddr *)&sa, &len) != 0 ||
	    sa.ss_family != AF_UNIX;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return errno;
	if ((epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return errno;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		int err = errno;

		close(epfd);
		epfd = -1;
		return err;
	}
	return 0;
}

static long
pace(struct rlg_pacer *p)
{
	return rlg_pacer_take(p, rlg_mono_ns() / 1000000,
	    RLG_ERROR_LOG_INTERVAL_MS);
}

/* The set is full (slots.cap): logged, paced. */
static void
full(void)
{
	long more;

	if (__atomic_load_n(log_level, __ATOMIC_RELAXED) >= RLG_LOG_WARN &&
	    (more = pace(&full_pacer)) >= 0)
		rlg_log("FastCGI: %d idle connections, the most this process"
		    " keeps (its descriptor limit, ulimit -n, less what it"
		    " needs besides): the rest wait in the listening queue,"
		    " or are closed suppressed=%ld", slots.cap, more);
}

/* Whether the set has room for one more idle connection. */
static bool
room(void)
{
	bool ok;

	pthread_mutex_lock(&slots.mu);
	ok = slots.nidle < slots.cap;
	pthread_mutex_unlock(&slots.mu);
	if (!ok)
		full();
	return ok;
}

static int take(struct sockaddr_storage *peer, bool wait);
static void watch(int fd, bool fresh);

/*
 * Every connection queued on the listening socket into the set, while it
 * has room; out of descriptors, the rest stay queued.
 */
static void
drain(void)
{
	struct sockaddr_storage other;
	int fd;

	while (room() && (fd = take(&other, false)) >= 0)
		watch(fd, true);
}

/* The slot of fd, made if need be (under slots.mu); NULL: no memory. */
static struct slot *
slot_of(int fd)
{
	if (fd >= slots.n) {
		int n = slots.n > 0 ? slots.n : 256;
		struct slot *at;

		while (n <= fd)
			n *= 2;
		if ((at = realloc(slots.at, (size_t)n * sizeof *at)) == NULL)
			return NULL;
		memset(at + slots.n, 0, (size_t)(n - slots.n) * sizeof *at);
		slots.at = at;
		slots.n = n;
	}
	if (fd >= slots.top)
		slots.top = fd + 1;
	return &slots.at[fd];
}

/*
 * Puts connection fd in the set (or back), readable once, until
 * timeout_ms from now. fresh: it was never read (a new connection another
 * worker will take).
 */
static void
watch(int fd, bool fresh)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP |
	    EPOLLONESHOT };
	struct slot *sl;
	int err;

	pthread_mutex_lock(&slots.mu);
	if (slots.nidle >= slots.cap) {
		pthread_mutex_unlock(&slots.mu);
		full();
		close(fd);              /* the web server opens another */
		return;
	}
	if ((sl = slot_of(fd)) == NULL) {
		pthread_mutex_unlock(&slots.mu);
		err = ENOMEM;
		goto fail;
	}
	slots.nidle++;
	sl->gen++;
	sl->idle = true;
	sl->fresh = fresh;
	sl->deadline_ns = rlg_mono_ns() + (int64_t)__atomic_load_n(
	    read_timeout_ms, __ATOMIC_RELAXED) * 1000000;
	ev.data.u64 = (uint64_t)sl->gen << 32 | (uint32_t)fd;
	pthread_mutex_unlock(&slots.mu);
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
		return;
	if (errno == ENOENT && epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
		return;
	err = errno;
	pthread_mutex_lock(&slots.mu);
	slots.at[fd].idle = false;
	slots.nidle--;
	pthread_mutex_unlock(&slots.mu);
fail:
	rlg_log("FastCGI: cannot watch a connection: %s: closing it",
	    strerror(err));
	close(fd);
}

void
rlg_accept_keep(int fd)
{
	watch(fd, false);
}

/* Whether the event ev (a connection's) is still its slot's: the worker
 * takes the connection out of the set. */
static bool
claim(uint64_t data)
{
	int fd = (int)(uint32_t)data;
	bool ok;

	pthread_mutex_lock(&slots.mu);
	ok = fd < slots.n && slots.at[fd].idle &&
	    slots.at[fd].gen == (uint32_t)(data >> 32);
	if (ok) {
		slots.at[fd].idle = false;
		slots.nidle--;
	}
	pthread_mutex_unlock(&slots.mu);
	return ok;
}

int
rlg_accept_reap(int64_t now_ns, struct sockaddr_storage *peer)
{
	struct epoll_event ev;
	int fd, fresh = 0;

	pthread_mutex_lock(&slots.mu);
	for (fd = 0; fd < slots.top; fd++) {
		struct slot *sl = &slots.at[fd];

		if (!sl->idle || now_ns < sl->deadline_ns)
			continue;
		/* readable (a request, or the close): its event waits for a
		 * free worker, which reads it under a deadline of its own */
		if (poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1,
		    0) != 0)
			continue;
		sl->idle = false;
		slots.nidle--;
		if (sl->fresh && fresh++ == 0) {
			socklen_t len = sizeof *peer;

			if (getpeername(fd, (struct sockaddr *)peer, &len) != 0)
				peer->ss_family = AF_UNSPEC;
		}
		(void)epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &ev);
		close(fd);
	}
	pthread_mutex_unlock(&slots.mu);
	/* what a worker left in the listening queue for want of room */
	drain();
	return fresh;
}

/*
 * The listening socket out of the set and back in: this process's turn
 * goes last (see above), and what is still queued wakes a worker.
 * Whatever two workers do here at once, each puts it back last.
 */
static void
rotate(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET |
	    EPOLLEXCLUSIVE, .data.u64 = RLG_LISTENER };

	(void)epoll_ctl(epfd, EPOLL_CTL_DEL, lfd, &ev);
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) != 0 && errno != EEXIST)
		rlg_log("FastCGI: cannot watch the listening socket again:"
		    " %s", strerror(errno));
}

/*
 * One connection from the listening socket into *peer: its descriptor,
 * -EAGAIN when there is none, or another -errno (-EINTR: a stop).
 * Refused peers and a connection gone before its accept are skipped;
 * running out of descriptors or memory is logged (paced), and waited
 * out, 100 ms at a time, when wait (else -EAGAIN).
 */
static int
take(struct sockaddr_storage *peer, bool wait)
{
	struct timespec nap = { 0, 100L * 1000000 };
	socklen_t len;
	int fd, err, on = 1;
	long more;

	for (;;) {
		len = sizeof *peer;
		fd = accept4(lfd, (struct sockaddr *)peer, &len,
		    SOCK_CLOEXEC);
		if (fd >= 0) {
			if (!tcp)
				return fd;
			if (rlg_web_server_ok(peer)) {
				(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY,
				    &on, sizeof on);
				return fd;
			}
			close(fd);
			if (__atomic_load_n(log_level, __ATOMIC_RELAXED) >=
			    RLG_LOG_WARN && (more = pace(&refused_pacer)) >= 0) {
				char name[64];

				rlg_peer_name(peer, name, sizeof name);
				rlg_log("event=refused peer=%s: not in"
				    " FCGI_WEB_SERVER_ADDRS suppressed=%ld",
				    name, more);
			}
			continue;
		}
		switch (err = errno) {
		case ECONNABORTED: case EPROTO: case ECONNRESET:
		case ETIMEDOUT: case EHOSTUNREACH: case ENETUNREACH:
		case ENETDOWN: case EHOSTDOWN: case ENONET: case EPERM:
		case ENOPROTOOPT: case EOPNOTSUPP:
			continue;
		case EMFILE: case ENFILE: case ENOBUFS: case ENOMEM:
			if ((more = pace(&accept_pacer)) >= 0)
				rlg_log("FastCGI accept: %s: waiting"
				    " suppressed=%ld", strerror(err), more);
			if (!wait)
				return -EAGAIN;
			if (nanosleep(&nap, NULL) != 0)
				return -EINTR;
			continue;
		case EWOULDBLOCK:
			return -EAGAIN;
		default:
			return -err;
		}
	}
}

int
rlg_accept_next(struct sockaddr_storage *peer, bool *kept)
{
	struct epoll_event ev;
	int fd, n;

	for (;;) {
		n = epoll_wait(epfd, &ev, 1, -1);
		if (n < 0) {
			if (errno == EINTR)
				return -EINTR;
			return -errno;
		}
		if (n == 0)
			continue;
		if (ev.data.u64 != RLG_LISTENER) {
			if (!claim(ev.data.u64))
				continue;       /* closed at its deadline */
			*kept = true;
			return (int)(uint32_t)ev.data.u64;
		}
		/* the edge: every connection now queued is taken (with no
		 * room in the set, the watchdog takes the rest later) */
		fd = take(peer, true);
		if (fd == -EAGAIN)
			continue;       /* another worker took it */
		if (fd < 0)
			return fd;
		/* not waiting for descriptors here: this worker holds a
		 * connection to serve (the watchdog takes the rest later; a
		 * failure comes back at this worker's next call) */
		drain();
		if (__atomic_add_fetch(&accepted, 1, __ATOMIC_RELAXED) %
		    RLG_ROTATE_EVERY == 0)
			rotate();
		*kept = false;
		return fd;
	}
}
