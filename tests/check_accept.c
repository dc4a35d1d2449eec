/*
 * check_accept.c: the ready connections of a FastCGI process
 * (app/server_accept.c), in process, on a unix socket: a new connection
 * goes to the worker that accepted it; a burst is taken whole (none left
 * in the queue for want of a second edge); an idle kept connection holds
 * no worker and comes back when it speaks or closes; a signal ends the
 * wait; the reaper closes what stays idle past the read deadline (a kept
 * connection, a new one that never spoke) and nothing else; the set's
 * bound leaves the rest in the listening queue; and four
 * threads serve fifty connections, each exactly once.
 * The set is one per process: each case makes it (Check runs a case in
 * a process of its own unless CK_FORK=no).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check_rlgate.h"
#include "config.h"
#include "fixture.h"
#include "server_accept.h"
#include "util.h"

static int level = RLG_LOG_WARN;
static int timeout_ms = 100;
/* descriptors left for the rest: a large set, unless a case says */
static int reserved = 64;
static char dir[] = "/tmp/rlg-accept-XXXXXX";
static struct sockaddr_un addr = { .sun_family = AF_UNIX };

/* A listening unix socket in a directory of its own, and the set on it. */
static int
listener(void)
{
	int fd;

	ck_assert_int_eq(rlg_test_mkdtemp(dir), 0);
	snprintf(addr.sun_path, sizeof addr.sun_path, "%s/s", dir);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
	ck_assert_int_eq(listen(fd, 64), 0);
	ck_assert_int_eq(rlg_accept_init(fd, &level, &timeout_ms, reserved), 0);
	return fd;
}

static void
cleanup(void)
{
	unlink(addr.sun_path);
	rmdir(dir);
}

/* A client that connected and, unless msg is NULL, wrote msg. */
static int
client(const char *msg)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&addr, sizeof addr),
	    0);
	if (msg != NULL)
		ck_assert_int_eq(write(fd, msg, strlen(msg)),
		    (ssize_t)strlen(msg));
	return fd;
}

/* The next ready connection, which must say msg (or be at its end). */
static int
next_says(const char *msg, bool want_kept)
{
	struct sockaddr_storage peer;
	char buf[64];
	bool kept = !want_kept;
	int fd = rlg_accept_next(&peer, &kept);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	ck_assert(kept == want_kept);
	n = read(fd, buf, sizeof buf - 1);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, msg);
	return fd;
}

START_TEST(test_accept_new)
{
	int lfd = listener(), c, fd;

	/* every worker of every process only accepts when told */
	ck_assert(fcntl(lfd, F_GETFL) & O_NONBLOCK);
	c = client("one");
	fd = next_says("one", false);
	close(fd);
	close(c);
	cleanup();
}
END_TEST

/* Five connections before anyone looks: one edge, five served. */
START_TEST(test_accept_burst)
{
	char msg[8];
	int c[5], fd[5], i, j;
	bool seen[5] = { false };

	(void)listener();
	for (i = 0; i < 5; i++) {
		snprintf(msg, sizeof msg, "c%d", i);
		c[i] = client(msg);
	}
	for (i = 0; i < 5; i++) {
		struct sockaddr_storage peer;
		char buf[8];
		bool kept;
		ssize_t n;

		fd[i] = rlg_accept_next(&peer, &kept);
		ck_assert_int_ge(fd[i], 0);
		/* the first from the accept, the rest through the set */
		ck_assert(kept == (i > 0));
		n = read(fd[i], buf, sizeof buf - 1);
		ck_assert_int_eq(n, 2);
		buf[n] = '\0';
		j = buf[1] - '0';
		ck_assert(j >= 0 && j < 5 && !seen[j]);
		seen[j] = true;
	}
	for (i = 0; i < 5; i++) {
		close(fd[i]);
		close(c[i]);
	}
	cleanup();
}
END_TEST

/*
 * A kept connection, idle, holds no worker: a new one is served before
 * it; it comes back through the set when it speaks, and when it closes.
 */
START_TEST(test_accept_keep)
{
	int c1, c2, fd1, fd2;

	(void)listener();
	c1 = client("a");
	fd1 = next_says("a", false);
	rlg_accept_keep(fd1);           /* idle: the web server keeps it */
	c2 = client("b");
	fd2 = next_says("b", false);
	rlg_accept_keep(fd2);
	ck_assert_int_eq(write(c1, "a2", 2), 2);
	ck_assert_int_eq(next_says("a2", true), fd1);
	rlg_accept_keep(fd1);
	close(c2);                      /* the web server's close */
	ck_assert_int_eq(next_says("", true), fd2);
	close(fd2);
	ck_assert_int_eq(write(c1, "a3", 2), 2);
	ck_assert_int_eq(next_says("a3", true), fd1);
	close(fd1);
	close(c1);
	cleanup();
}
END_TEST

/*
 * Past the read deadline, the reaper closes the idle kept connection and
 * the silent new one (counted: the caller logs it), not the one a worker
 * holds nor the one that spoke and waits for a worker; a later
 * connection is served as ever.
 */
START_TEST(test_accept_reap)
{
	struct sockaddr_storage peer;
	int c1, c2, c3, c4, c5, fd1, fd2;
	char buf[8];

	(void)listener();
	c1 = client("a");
	fd1 = next_says("a", false);
	rlg_accept_keep(fd1);           /* kept, idle */
	c2 = client("b");
	c3 = client(NULL);              /* never speaks: into the set */
	c5 = client("e");               /* spoke: waits in the set */
	fd2 = next_says("b", false);    /* a worker's */
	ck_assert_int_eq(rlg_accept_reap(rlg_mono_ns(), &peer), 0);
	ck_assert_int_eq(rlg_accept_reap(rlg_mono_ns() + 200LL * 1000000,
	    &peer), 1);
	ck_assert_int_eq(peer.ss_family, AF_UNIX);
	ck_assert_int_eq(read(c1, buf, sizeof buf), 0);     /* closed */
	ck_assert_int_eq(read(c3, buf, sizeof buf), 0);
	ck_assert_int_eq(write(fd2, "k", 1), 1);            /* still open */
	ck_assert_int_eq(read(c2, buf, 1), 1);
	close(next_says("e", true));     /* not closed: it had spoken */
	c4 = client("d");
	close(next_says("d", false));
	close(fd2);
	close(c1);
	close(c2);
	close(c3);
	close(c4);
	close(c5);
	cleanup();
}
END_TEST

/*
 * The set's bound: with every descriptor reserved it holds 16 idle
 * connections; the rest wait in the listening queue, not in this
 * process's table, until the reaper makes room and takes them.
 */
START_TEST(test_accept_bound)
{
	struct rlimit rl;
	struct sockaddr_storage peer;
	int c[21], fd, i;
	bool kept;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	reserved = rl.rlim_cur > 100000 ? 100000 : (int)rl.rlim_cur;
	(void)listener();
	for (i = 0; i < 20; i++)
		c[i] = client(NULL);            /* silent */
	c[20] = client("s");
	fd = rlg_accept_next(&peer, &kept);     /* the first, silent */
	ck_assert_int_ge(fd, 0);
	ck_assert(!kept);
	close(fd);
	/* 16 in the set, 3 silent ones and "s" still queued */
	ck_assert_int_eq(rlg_accept_reap(rlg_mono_ns() + 200LL * 1000000,
	    &peer), 16);
	/* the reaper took the rest in: "s" is served */
	close(next_says("s", true));
	ck_assert_int_eq(rlg_accept_reap(rlg_mono_ns() + 400LL * 1000000,
	    &peer), 3);
	for (i = 0; i < 21; i++)
		close(c[i]);
	cleanup();
}
END_TEST

static void
on_usr2(int sig)
{
	(void)sig;
}

static void *
wait_one(void *arg)
{
	struct sockaddr_storage peer;
	bool kept;

	*(int *)arg = rlg_accept_next(&peer, &kept);
	return NULL;
}

/* A signal (a stop's SIGUSR2, no SA_RESTART) ends the wait. */
START_TEST(test_accept_signal)
{
	struct sigaction sa = { .sa_handler = on_usr2 };
	struct timespec nap = { 0, 50L * 1000000 };
	pthread_t th;
	int rc = 0;

	(void)listener();
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	ck_assert_int_eq(pthread_create(&th, NULL, wait_one, &rc), 0);
	nanosleep(&nap, NULL);
	pthread_kill(th, SIGUSR2);
	pthread_join(th, NULL);
	ck_assert_int_eq(rc, -EINTR);
	cleanup();
}
END_TEST

/* Four workers, fifty connections in bursts: each served exactly once. */
#define NCONN 50
static struct {
	pthread_mutex_t mu;
	int served[NCONN];
	int total;
} log_ = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void *
worker(void *arg)
{
	struct sockaddr_storage peer;
	char buf[8];
	bool kept;
	int fd, i;
	ssize_t n;

	(void)arg;
	for (;;) {
		fd = rlg_accept_next(&peer, &kept);
		if (fd < 0)
			return NULL;    /* the end: SIGUSR2 */
		n = read(fd, buf, sizeof buf - 1);
		if (n > 0) {
			buf[n] = '\0';
			i = atoi(buf);
			pthread_mutex_lock(&log_.mu);
			if (i >= 0 && i < NCONN)
				log_.served[i]++;
			log_.total++;
			pthread_mutex_unlock(&log_.mu);
			if (write(fd, "k", 1) != 1)
				i = -1;         /* the client sees no answer */
		}
		close(fd);
	}
}

START_TEST(test_accept_threads)
{
	struct sigaction sa = { .sa_handler = on_usr2 };
	struct timespec nap = { 0, 10L * 1000000 };
	pthread_t th[4];
	char msg[8], k;
	int c[NCONN], i, total = 0, waited;

	(void)listener();
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker, NULL),
		    0);
	for (i = 0; i < NCONN; i++) {
		snprintf(msg, sizeof msg, "%d", i);
		c[i] = client(msg);
		if (i % 10 == 9)        /* bursts of ten */
			nanosleep(&nap, NULL);
	}
	/* every client gets its answer (the Check timeout bounds this) */
	for (i = 0; i < NCONN; i++) {
		ck_assert_int_eq(read(c[i], &k, 1), 1);
		close(c[i]);
	}
	for (waited = 0; waited < 200 && total < NCONN; waited++) {
		pthread_mutex_lock(&log_.mu);
		total = log_.total;
		pthread_mutex_unlock(&log_.mu);
		if (total < NCONN)
			nanosleep(&nap, NULL);
	}
	ck_assert_int_eq(total, NCONN);
	for (i = 0; i < NCONN; i++)
		ck_assert_int_eq(log_.served[i], 1);
	for (i = 0; i < 4; i++) {
		pthread_kill(th[i], SIGUSR2);
		pthread_join(th[i], NULL);
	}
	cleanup();
}
END_TEST

Suite *
rlg_accept_suite(void)
{
	Suite *s = suite_create("accept");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_accept_new);
	tcase_add_test(tc, test_accept_burst);
	tcase_add_test(tc, test_accept_keep);
	tcase_add_test(tc, test_accept_reap);
	tcase_add_test(tc, test_accept_bound);
	tcase_add_test(tc, test_accept_signal);
	tcase_add_test(tc, test_accept_threads);
	suite_add_tcase(s, tc);
	return s;
}
