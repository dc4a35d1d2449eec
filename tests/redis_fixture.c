/*
 * redis_fixture.c: starts and stops a private redis-server for the tests.
 *
 * The server runs in the foreground as our child (--daemonize no), so its
 * pid is the one we stop, and it dies with the test runner (the parent
 * death signal) if the runner crashes before stopping it. A port is picked
 * at random in 10000-32767 and checked free with a bind; another process
 * may still take it before redis-server does, so a server that exits at
 * start-up is retried on another port a few times. Every wait is bounded.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <hiredis/hiredis.h>

#include "redis_fixture.h"

#define RF_PORT_MIN 10000
#define RF_PORT_MAX 32767
#define RF_ATTEMPTS 5            /* ports tried */
#define RF_START_MS 10000        /* until PING answers (ASan is slow) */
#define RF_STOP_MS 5000          /* after SIGTERM, before SIGKILL */
#define RF_POLL_MS 20

static int rf_free_port(void);
static pid_t rf_spawn(const struct rlg_test_redis *r);
static int rf_ping(int port);
static void rf_sleep_ms(long ms);
static int rf_reap(pid_t pid, long wait_ms);
static void rf_rmdir(const char *dir);

int
rlg_test_redis_start(struct rlg_test_redis *r)
{
	int attempt, waited, up;

	memset(r, 0, sizeof *r);
	snprintf(r->dir, sizeof r->dir, "/tmp/rlg-redis-XXXXXX");
	if (mkdtemp(r->dir) == NULL) {
		fprintf(stderr, "redis fixture: mkdtemp: %s\n", strerror(errno));
		r->dir[0] = '\0';
		return -1;
	}
	for (attempt = 0; attempt < RF_ATTEMPTS; attempt++) {
		if ((r->port = rf_free_port()) < 0)
			continue;
		snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d",
		    r->port);
		if ((r->pid = rf_spawn(r)) < 0) {
			r->pid = 0;
			break;
		}
		up = 0;
		for (waited = 0; waited < RF_START_MS && !up;
		    waited += RF_POLL_MS) {
			if (waitpid(r->pid, NULL, WNOHANG) == r->pid) {
				/* Exited: the port was taken, or worse. */
				r->pid = 0;
				break;
			}
			if (rf_ping(r->port) == 0)
				up = 1;
			else
				rf_sleep_ms(RF_POLL_MS);
		}
		if (up)
			return 0;
		if (r->pid > 0) {
			fprintf(stderr, "redis fixture: redis-server on port"
			    " %d did not answer PING in %d ms\n", r->port,
			    RF_START_MS);
			break;
		}
	}
	fprintf(stderr, "redis fixture: could not start redis-server (see"
	    " %s/redis.log)\n", r->dir);
	rlg_test_redis_stop(r);
	return -1;
}

void
rlg_test_redis_stop(struct rlg_test_redis *r)
{
	if (r->pid > 0) {
		if (kill(r->pid, SIGTERM) == 0 &&
		    rf_reap(r->pid, RF_STOP_MS) != 0) {
			(void)kill(r->pid, SIGKILL);
			(void)rf_reap(r->pid, RF_STOP_MS);
		}
		r->pid = 0;
	}
	if (r->dir[0] != '\0') {
		rf_rmdir(r->dir);
		r->dir[0] = '\0';
	}
}

/* A port in range that nothing listens on right now, or -1. */
static int
rf_free_port(void)
{
	static unsigned seed;
	struct sockaddr_in sa;
	int fd, i, port, one = 1;

	if (seed == 0)
		seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	for (i = 0; i < 100; i++) {
		port = RF_PORT_MIN + (int)(rand_r(&seed) %
		    (RF_PORT_MAX - RF_PORT_MIN + 1));
		if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			return -1;
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
		    sizeof one);
		memset(&sa, 0, sizeof sa);
		sa.sin_family = AF_INET;
		sa.sin_port = htons((unsigned short)port);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
			close(fd);
			return port;
		}
		close(fd);
	}
	fprintf(stderr, "redis fixture: no free port found\n");
	return -1;
}

/* fork + exec redis-server, output to DIR/redis.log. Its pid, or -1. */
static pid_t
rf_spawn(const struct rlg_test_redis *r)
{
	char port[16], log[96];
	pid_t pid;
	int fd, maxfd;

	snprintf(port, sizeof port, "%d", r->port);
	snprintf(log, sizeof log, "%s/redis.log", r->dir);
	fflush(NULL);
	if ((pid = fork()) < 0) {
		fprintf(stderr, "redis fixture: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid > 0)
		return pid;

#ifdef __linux__
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
	if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600)) >= 0) {
		(void)dup2(fd, STDOUT_FILENO);
		(void)dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	if ((fd = open("/dev/null", O_RDONLY)) >= 0) {
		(void)dup2(fd, STDIN_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	/* Nothing of the runner's (Check's pipes, sockets) stays open. */
	maxfd = (int)sysconf(_SC_OPEN_MAX);
	if (maxfd < 0 || maxfd > 65536)
		maxfd = 65536;
	for (fd = STDERR_FILENO + 1; fd < maxfd; fd++)
		(void)close(fd);
	execlp("redis-server", "redis-server", "--port", port,
	    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
	    "--dir", r->dir, "--daemonize", "no", (char *)NULL);
	fprintf(stderr, "redis fixture: exec redis-server: %s\n",
	    strerror(errno));
	_exit(127);
}

/* 0 when the server on 127.0.0.1:port answers PONG. */
static int
rf_ping(int port)
{
	struct timeval tv = { 0, 200 * 1000 };
	redisContext *c;
	redisReply *rep;
	int rc = -1;

	c = redisConnectWithTimeout("127.0.0.1", port, tv);
	if (c == NULL)
		return -1;
	if (c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK &&
	    (rep = redisCommand(c, "PING")) != NULL) {
		if (rep->type == REDIS_REPLY_STATUS &&
		    strcmp(rep->str, "PONG") == 0)
			rc = 0;
		freeReplyObject(rep);
	}
	redisFree(c);
	return rc;
}

static void
rf_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Waits up to wait_ms for pid to exit and reaps it: 0, or -1 if alive. */
static int
rf_reap(pid_t pid, long wait_ms)
{
	long waited;
	pid_t got;

	for (waited = 0; waited <= wait_ms; waited += RF_POLL_MS) {
		got = waitpid(pid, NULL, WNOHANG);
		if (got == pid || (got < 0 && errno == ECHILD))
			return 0;
		rf_sleep_ms(RF_POLL_MS);
	}
	return -1;
}

/* Removes dir and the files in it (the server writes no subdirectories). */
static void
rf_rmdir(const char *dir)
{
	char path[512];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
			(void)unlink(path);
		}
		closedir(d);
	}
	(void)rmdir(dir);
}
