/*
 * server_park.c: answers held for their turn (server_park.h).
 *
 * A min-heap of parked answers ordered by (due time, order of arrival)
 * under one mutex, and one thread, the parker, that sleeps in
 * epoll_wait(2) until the first is due, an earlier one arrives (an
 * eventfd wakes it), or a connection it is closing speaks. Written here, not taken from a
 * library: libfcgi has no timers, and an event library (libevent,
 * libuv) would bring a loop of its own for one heap and one poll set.
 *
 * The closes: libfcgi's own close of a connection shuts its side, then
 * waits in select(2) until the web server closes too (so that what the
 * web server still sends does not make our kernel answer with a reset
 * that could drop the answer). On the parker that wait would hold every
 * later answer behind a slow peer, and select(2) cannot watch a
 * descriptor at or above FD_SETSIZE, which a process holding many
 * parked connections reaches. So the parker does the same without
 * blocking: each answered connection joins its epoll set, its side shut,
 * and is read and dropped until the peer closes or linger_ms passes.
 * epoll, not poll: a wake then costs what it reads, not a scan of every
 * connection still closing (1,000 held answers due together would make
 * the scans quadratic). The closes end in the order they began (linger_ms
 * is one for all), so a FIFO of them gives the next bound; a close that
 * ended early is skipped there by its number.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_park.h"
#include "util.h"

struct parked {
	int64_t due_ns;
	uint64_t seq;                   /* order of arrival: ties keep it */
	rlg_park_answer_fn *answer;
	void *arg;
};

struct closing {
	int fd;
	uint64_t n;                     /* its number: closing_n[fd] while open */
	int64_t until_ns;
};

static struct {
	pthread_mutex_t mu;
	pthread_t tid;
	bool started;
	bool stopping;
	int wake;                       /* eventfd: an earlier due, a stop */
	int ep;                         /* the parker's epoll: wake, closes */
	int linger_ms;
	struct parked *heap;
	size_t n, cap;
	uint64_t seq;
} park = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = -1, .ep = -1 };

/* The slots taken (atomic): reserved, parked or closing. */
static int taken;

/*
 * The parker's own: the connections it is closing, a FIFO ring (head,
 * count, capacity), and by descriptor the number of its close (0: none).
 */
static struct closing *closing;
static size_t chead, nclosing, capclosing;
static uint64_t *closing_n;
static size_t nclosing_n;
static uint64_t closes;

static void *parker(void *arg);

/* realloc, or the process ends as rlg_xmalloc ends it. */
static void *
grow(void *p, size_t size)
{
	void *q = realloc(p, size);

	if (q == NULL) {
		rlg_log("out of memory allocating %zu bytes", size);
		abort();
	}
	return q;
}

static bool
before(const struct parked *a, const struct parked *b)
{
	return a->due_ns < b->due_ns ||
	    (a->due_ns == b->due_ns && a->seq < b->seq);
}

static void
heap_push(const struct parked *e)
{
	size_t i, up;
	struct parked t;

	if (park.n == park.cap) {
		park.cap = park.cap == 0 ? 64 : park.cap * 2;
		park.heap = grow(park.heap, park.cap * sizeof *park.heap);
	}
	i = park.n++;
	park.heap[i] = *e;
	while (i > 0 && before(&park.heap[i], &park.heap[up = (i - 1) / 2])) {
		t = park.heap[up];
		park.heap[up] = park.heap[i];
		park.heap[i] = t;
		i = up;
	}
}

static struct parked
heap_pop(void)
{
	struct parked top = park.heap[0], t;
	size_t i = 0, l, m;

	park.heap[0] = park.heap[--park.n];
	for (;;) {
		l = 2 * i + 1;
		m = i;
		if (l < park.n && before(&park.heap[l], &park.heap[m]))
			m = l;
		if (l + 1 < park.n && before(&park.heap[l + 1], &park.heap[m]))
			m = l + 1;
		if (m == i)
			break;
		t = park.heap[m];
		park.heap[m] = park.heap[i];
		park.heap[i] = t;
		i = m;
	}
	return top;
}

int
rlg_park_start(int linger_ms)
{
	int rc;

	struct epoll_event ev = { .events = EPOLLIN, .data.fd = -1 };

	pthread_mutex_lock(&park.mu);
	rc = park.started || park.stopping;
	pthread_mutex_unlock(&park.mu);
	if (rc)
		return 0;               /* once per process */
	park.linger_ms = linger_ms;
	park.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	park.ep = epoll_create1(EPOLL_CLOEXEC);
	if (park.wake < 0 || park.ep < 0 ||
	    epoll_ctl(park.ep, EPOLL_CTL_ADD, park.wake, &ev) != 0 ||
	    (errno = pthread_create(&park.tid, NULL, parker, NULL)) != 0) {
		rc = errno;
		if (park.wake >= 0)
			close(park.wake);
		if (park.ep >= 0)
			close(park.ep);
		park.wake = park.ep = -1;
		return rc;
	}
	pthread_mutex_lock(&park.mu);
	park.started = true;
	pthread_mutex_unlock(&park.mu);
	return 0;
}

bool
rlg_park_reserve(int max)
{
	int n = __atomic_load_n(&taken, __ATOMIC_RELAXED);

	do {
		if (n >= max)
			return false;
	} while (!__atomic_compare_exchange_n(&taken, &n, n + 1, true,
	    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	return true;
}

void
rlg_park_unreserve(void)
{
	__atomic_sub_fetch(&taken, 1, __ATOMIC_ACQ_REL);
}

int
rlg_park_count(void)
{
	return __atomic_load_n(&taken, __ATOMIC_RELAXED);
}

static void
wake(void)
{
	uint64_t one = 1;

	(void)!write(park.wake, &one, sizeof one);
}

void
rlg_park_add(int64_t due_ns, rlg_park_answer_fn *answer, void *arg)
{
	struct parked e = { due_ns, 0, answer, arg };
	bool first;
	int fd;

	pthread_mutex_lock(&park.mu);
	if (!park.started || park.stopping) {
		pthread_mutex_unlock(&park.mu);
		if ((fd = answer(arg)) >= 0)
			rlg_linger_close(fd, park.linger_ms);
		rlg_park_unreserve();
		return;
	}
	e.seq = park.seq++;
	heap_push(&e);
	first = park.heap[0].seq == e.seq;
	pthread_mutex_unlock(&park.mu);
	if (first)
		wake();
}

void
rlg_linger_close(int fd, int timeout_ms)
{
	int64_t until = rlg_mono_ns() + (int64_t)timeout_ms * 1000000;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char trash[1024];
	int64_t left;
	ssize_t n;

	if (shutdown(fd, SHUT_WR) == 0) {
		while ((left = until - rlg_mono_ns()) > 0) {
			n = poll(&pfd, 1, (int)((left + 999999) / 1000000));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			n = read(fd, trash, sizeof trash);
			if (n <= 0 && !(n < 0 && errno == EINTR))
				break;
		}
	}
	close(fd);
}

/* The end of a close: the descriptor closed, its slot given back. */
static void
closing_end(int fd)
{
	closing_n[fd] = 0;
	close(fd);                      /* leaves the epoll set too */
	rlg_park_unreserve();
}

/* One answered connection joins the closes (its side shut, unblocked). */
static void
closing_add(int fd, int64_t now_ns)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP,
	    .data.fd = fd };
	struct closing *c;
	size_t i;

	if (shutdown(fd, SHUT_WR) != 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0 ||
	    epoll_ctl(park.ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		close(fd);
		rlg_park_unreserve();
		return;
	}
	if ((size_t)fd >= nclosing_n) {
		i = nclosing_n;
		nclosing_n = (size_t)fd + 1024;
		closing_n = grow(closing_n, nclosing_n * sizeof *closing_n);
		memset(closing_n + i, 0, (nclosing_n - i) * sizeof *closing_n);
	}
	if (nclosing == capclosing) {
		/* unroll the ring into the bigger array */
		struct closing *bigger = grow(NULL, (capclosing == 0 ? 64 :
		    capclosing * 2) * sizeof *closing);

		for (i = 0; i < nclosing; i++)
			bigger[i] = closing[(chead + i) % capclosing];
		free(closing);
		closing = bigger;
		chead = 0;
		capclosing = capclosing == 0 ? 64 : capclosing * 2;
	}
	c = &closing[(chead + nclosing++) % capclosing];
	c->fd = fd;
	c->n = ++closes;
	c->until_ns = now_ns + (int64_t)park.linger_ms * 1000000;
	closing_n[fd] = c->n;
}

/* Reads what fd has, dropping it; true when the peer closed (or failed). */
static bool
drained(int fd)
{
	char trash[4096];
	ssize_t n;

	for (;;) {
		n = read(fd, trash, sizeof trash);
		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	}
}

/*
 * The closes past their bound, from the FIFO's head (ended ones are
 * skipped there); returns the next bound, or -1 with none left.
 */
static int64_t
closing_expire(int64_t now_ns)
{
	struct closing *c;

	while (nclosing > 0) {
		c = &closing[chead];
		if (closing_n[c->fd] == c->n) {
			if (now_ns < c->until_ns)
				return c->until_ns;
			closing_end(c->fd);
		}
		chead = (chead + 1) % capclosing;
		nclosing--;
	}
	return -1;
}

/* Answers every parked answer that is due (all of them at a stop). */
static bool
answer_due(int64_t *next_ns, long *early)
{
	struct parked e;
	int64_t now = rlg_mono_ns();
	bool stopping;
	int fd;

	pthread_mutex_lock(&park.mu);
	while (park.n > 0 && (park.stopping || park.heap[0].due_ns <= now)) {
		e = heap_pop();
		if (e.due_ns > now)
			(*early)++;
		pthread_mutex_unlock(&park.mu);
		if ((fd = e.answer(e.arg)) >= 0)
			closing_add(fd, rlg_mono_ns());
		else
			rlg_park_unreserve();
		now = rlg_mono_ns();
		pthread_mutex_lock(&park.mu);
	}
	*next_ns = park.n > 0 ? park.heap[0].due_ns : -1;
	stopping = park.stopping;
	pthread_mutex_unlock(&park.mu);
	return stopping;
}

static void *
parker(void *arg)
{
	struct epoll_event ev[64];
	int64_t next, bound, now, until;
	uint64_t drop;
	long early = 0;
	bool stopping;
	int i, n, ms;

	(void)arg;
	for (;;) {
		stopping = answer_due(&next, &early);
		now = rlg_mono_ns();
		bound = closing_expire(now);
		if (stopping && next < 0 && bound < 0)
			break;
		until = next < 0 || (bound >= 0 && bound < next) ? bound : next;
		/* whole ms, rounded up: never woken before the first is due */
		ms = until < 0 ? -1 : until <= now ? 0 :
		    (int)((until - now + 999999) / 1000000);
		n = epoll_wait(park.ep, ev, 64, ms);
		if (n < 0 && errno != EINTR)
			rlg_log("park: epoll_wait: %s", strerror(errno));
		for (i = 0; i < n; i++) {
			if (ev[i].data.fd < 0) {
				(void)!read(park.wake, &drop, sizeof drop);
				continue;
			}
			if (drained(ev[i].data.fd))
				closing_end(ev[i].data.fd);
		}
	}
	if (early > 0)
		rlg_log("stopping: %ld held answer%s given before %s turn"
		    " (admitted, as decided)", early, early == 1 ? "" : "s",
		    early == 1 ? "its" : "their");
	return NULL;
}

void
rlg_park_stop(void)
{
	pthread_mutex_lock(&park.mu);
	if (!park.started || park.stopping) {
		pthread_mutex_unlock(&park.mu);
		return;
	}
	park.stopping = true;
	pthread_mutex_unlock(&park.mu);
	wake();
	pthread_join(park.tid, NULL);
}
