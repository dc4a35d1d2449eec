/*
 * redis_fixture.c: starts and stops a private redis-server for the tests.
 *
 * The server runs in the foreground as our child (--daemonize no), so its
 * pid is the one we stop, and it dies with the test runner (the parent
 * death signal) if the runner crashes before stopping it. A port is picked
 * at random in 10000-32767, checked free with a bind and reserved as the
 * integration scripts reserve theirs (tests/lib-proc.sh reserve_port: a
 * directory /tmp/rlgate-ports/PORT holding the reserving pid), so that no
 * test of either build takes it before redis-server binds it; a process
 * that is not a test may still, so a server that exits at start-up is
 * retried on another port a few times. Every wait is bounded.
 *
 * The cluster: three such servers with --cluster-enabled yes, each with
 * its nodes file in the one directory, on ports whose cluster bus port
 * (port + 10000) is free too; redis-cli --cluster create joins them (run
 * as a child, killed if it takes too long), then every node is polled
 * until CLUSTER INFO says cluster_state:ok.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
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
#define RF_BUS_OFFSET 10000      /* a cluster node's bus port */
#define RF_CREATE_MS 60000       /* redis-cli --cluster create */
#define RF_CLUSTER_OK_MS 30000   /* then until cluster_state:ok */

static int rf_free_port(int max, bool bus);
static bool rf_port_free(int port);
static bool rf_reserve(int port);
static void rf_release(int port);
static const char *rf_port_dir(void);
static pid_t rf_spawn(const struct rlg_test_redis *r);
static pid_t rf_exec_server(int port, const char *dir, const char *log,
    bool cluster);
static int rf_wait_up(pid_t *pid, int port);
static int rf_cluster_create(struct rlg_test_redis_cluster *cl);
static redisReply *rf_command(int port, long timeout_ms, const char *fmt,
    ...);
static int rf_cluster_state(int port, char *buf, size_t size);
static int rf_ping(int port);
static void rf_sleep_ms(long ms);
static int rf_reap(pid_t pid, long wait_ms);
static bool rf_gone(pid_t pid);
static void rf_rmdir(const char *dir);

int
rlg_test_redis_start(struct rlg_test_redis *r)
{
	int attempt;

	memset(r, 0, sizeof *r);
	snprintf(r->dir, sizeof r->dir, "/tmp/rlg-redis-XXXXXX");
	if (mkdtemp(r->dir) == NULL) {
		fprintf(stderr, "redis fixture: mkdtemp: %s\n", strerror(errno));
		r->dir[0] = '\0';
		return -1;
	}
	for (attempt = 0; attempt < RF_ATTEMPTS; attempt++) {
		if ((r->port = rf_free_port(RF_PORT_MAX, false)) < 0)
			continue;
		snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d",
		    r->port);
		if ((r->pid = rf_spawn(r)) < 0) {
			r->pid = 0;
			break;
		}
		if (rf_wait_up(&r->pid, r->port) == 0)
			return 0;
		rf_release(r->port);
		/*
		 * Exited (r->pid 0): the port was taken, try another one;
		 * alive but not answering will not get better.
		 */
		if (r->pid > 0)
			break;
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
	if (r->port > 0) {
		rf_release(r->port);
		r->port = 0;
	}
	if (r->dir[0] != '\0') {
		rf_rmdir(r->dir);
		r->dir[0] = '\0';
	}
}

int
rlg_test_redis_kill(struct rlg_test_redis *r)
{
	if (r->pid <= 0 || kill(r->pid, SIGKILL) != 0)
		return -1;
	(void)rf_reap(r->pid, RF_STOP_MS);
	r->pid = 0;
	return 0;
}

int
rlg_test_redis_restart(struct rlg_test_redis *r)
{
	if (r->pid > 0 || r->port <= 0)
		return -1;
	if ((r->pid = rf_spawn(r)) < 0) {
		r->pid = 0;
		return -1;
	}
	return rf_wait_up(&r->pid, r->port);
}

/*
 * A port in RF_PORT_MIN..max that nothing listens on right now (with bus:
 * nor on port + RF_BUS_OFFSET), reserved for this process (rf_reserve:
 * with bus, both), or -1.
 */
static int
rf_free_port(int max, bool bus)
{
	static unsigned seed;
	int i, port;

	if (seed == 0)
		seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	for (i = 0; i < 100; i++) {
		port = RF_PORT_MIN + (int)(rand_r(&seed) %
		    (unsigned)(max - RF_PORT_MIN + 1));
		if (!rf_port_free(port) ||
		    (bus && !rf_port_free(port + RF_BUS_OFFSET)) ||
		    !rf_reserve(port))
			continue;
		if (!bus || rf_reserve(port + RF_BUS_OFFSET))
			return port;
		rf_release(port);
	}
	fprintf(stderr, "redis fixture: no free port found\n");
	return -1;
}

/* Whether a bind to 127.0.0.1:port succeeds now. */
static bool
rf_port_free(int port)
{
	struct sockaddr_in sa;
	int fd, one = 1;
	bool ok;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return false;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return ok;
}

/* Where ports are reserved: RLGATE_PORT_DIR, else /tmp/rlgate-ports. */
static const char *
rf_port_dir(void)
{
	const char *d = getenv("RLGATE_PORT_DIR");

	return d != NULL && d[0] != '\0' ? d : "/tmp/rlgate-ports";
}

/*
 * Reserves port for this process as tests/lib-proc.sh's reserve_port
 * does, in the same directory: true when rf_port_dir()/PORT is now ours,
 * made with mkdir (atomic), holding our pid; a reservation whose process
 * has ended is taken over (one rename wins of two). True too, reserving
 * nothing, when the directory cannot be made or written (as the scripts).
 */
static bool
rf_reserve(int port)
{
	char path[256], stale[288], pidfile[288], buf[32];
	const char *d = rf_port_dir();
	long owner;
	FILE *f;

	if (mkdir(d, 0755) == 0)
		(void)chmod(d, 01777);
	else if (errno != EEXIST)
		return true;
	if (access(d, W_OK) != 0)
		return true;
	snprintf(path, sizeof path, "%s/%d", d, port);
	snprintf(pidfile, sizeof pidfile, "%s/pid", path);
	if (mkdir(path, 0755) != 0) {
		if (errno != EEXIST)
			return false;
		buf[0] = '\0';
		if ((f = fopen(pidfile, "r")) != NULL) {
			if (fgets(buf, sizeof buf, f) == NULL)
				buf[0] = '\0';
			fclose(f);
		}
		owner = strtol(buf, NULL, 10);
		/* no pid yet: its owner is writing it now */
		if (owner <= 0 || !rf_gone((pid_t)owner))
			return false;
		snprintf(stale, sizeof stale, "%s.stale.%ld", path,
		    (long)getpid());
		if (rename(path, stale) != 0)
			return false;
		rf_rmdir(stale);
		if (mkdir(path, 0755) != 0)
			return false;
	}
	if ((f = fopen(pidfile, "w")) == NULL)
		return true;
	fprintf(f, "%ld\n", (long)getpid());
	fclose(f);
	return true;
}

/* Gives up this process's reservation of port (rf_reserve), if it is. */
static void
rf_release(int port)
{
	char path[256], pidfile[288], buf[32];
	FILE *f;

	snprintf(path, sizeof path, "%s/%d", rf_port_dir(), port);
	snprintf(pidfile, sizeof pidfile, "%s/pid", path);
	if ((f = fopen(pidfile, "r")) == NULL)
		return;
	if (fgets(buf, sizeof buf, f) == NULL)
		buf[0] = '\0';
	fclose(f);
	if (strtol(buf, NULL, 10) == (long)getpid())
		rf_rmdir(path);
}

/* fork + exec redis-server, output to DIR/redis.log. Its pid, or -1. */
static pid_t
rf_spawn(const struct rlg_test_redis *r)
{
	return rf_exec_server(r->port, r->dir, "redis.log", false);
}

/*
 * In a forked child before exec: stdout and stderr appended to the file
 * at log, stdin from /dev/null, so a server or redis-cli never writes
 * into the runner's output nor reads its input.
 */
static void
rf_child_stdio(const char *log)
{
	int fd;

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
}

/*
 * fork + exec redis-server on 127.0.0.1:port in dir, output to dir/log;
 * a cluster node keeps its nodes file in dir/nodes-PORT.conf. Its pid,
 * or -1.
 */
static pid_t
rf_exec_server(int port, const char *dir, const char *log, bool cluster)
{
	char portstr[16], logpath[160], nodes[160];
	pid_t pid;
	int fd, maxfd;

	snprintf(portstr, sizeof portstr, "%d", port);
	snprintf(logpath, sizeof logpath, "%s/%s", dir, log);
	snprintf(nodes, sizeof nodes, "%s/nodes-%d.conf", dir, port);
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
	rf_child_stdio(logpath);
	/* Nothing of the runner's (Check's pipes, sockets) stays open. */
	maxfd = (int)sysconf(_SC_OPEN_MAX);
	if (maxfd < 0 || maxfd > 65536)
		maxfd = 65536;
	for (fd = STDERR_FILENO + 1; fd < maxfd; fd++)
		(void)close(fd);
	if (cluster)
		execlp("redis-server", "redis-server", "--port", portstr,
		    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		    "--dir", dir, "--daemonize", "no",
		    "--cluster-enabled", "yes",
		    "--cluster-config-file", nodes,
		    "--cluster-node-timeout", "2000", (char *)NULL);
	else
		execlp("redis-server", "redis-server", "--port", portstr,
		    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		    "--dir", dir, "--daemonize", "no", (char *)NULL);
	fprintf(stderr, "redis fixture: exec redis-server: %s\n",
	    strerror(errno));
	_exit(127);
}

/*
 * Waits (bounded) until the server *pid on port answers PING: 0; -1 when
 * it exited (*pid set to 0: the port was taken, or worse) or never
 * answered.
 */
static int
rf_wait_up(pid_t *pid, int port)
{
	int waited;

	for (waited = 0; waited < RF_START_MS; waited += RF_POLL_MS) {
		if (waitpid(*pid, NULL, WNOHANG) == *pid) {
			*pid = 0;
			return -1;
		}
		if (rf_ping(port) == 0)
			return 0;
		rf_sleep_ms(RF_POLL_MS);
	}
	fprintf(stderr, "redis fixture: redis-server on port %d did not"
	    " answer PING in %d ms\n", port, RF_START_MS);
	return -1;
}

int
rlg_test_redis_cluster_start(struct rlg_test_redis_cluster *cl)
{
	char log[32];
	int i, attempt;

	memset(cl, 0, sizeof *cl);
	snprintf(cl->dir, sizeof cl->dir, "/tmp/rlg-cluster-XXXXXX");
	if (mkdtemp(cl->dir) == NULL) {
		fprintf(stderr, "redis fixture: mkdtemp: %s\n",
		    strerror(errno));
		cl->dir[0] = '\0';
		return -1;
	}
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		for (attempt = 0; attempt < RF_ATTEMPTS; attempt++) {
			/* Bus ports (port + 10000) stay <= 32767 too. */
			cl->port[i] = rf_free_port(RF_PORT_MAX - RF_BUS_OFFSET,
			    true);
			if (cl->port[i] < 0 || (i > 0 &&
			    cl->port[i] == cl->port[i - 1]) || (i > 1 &&
			    cl->port[i] == cl->port[i - 2]))
				continue;
			snprintf(log, sizeof log, "redis-%d.log", cl->port[i]);
			cl->pid[i] = rf_exec_server(cl->port[i], cl->dir, log,
			    true);
			if (cl->pid[i] < 0) {
				cl->pid[i] = 0;
				goto fail;
			}
			if (rf_wait_up(&cl->pid[i], cl->port[i]) == 0)
				break;
			rf_release(cl->port[i]);
			rf_release(cl->port[i] + RF_BUS_OFFSET);
			if (cl->pid[i] > 0)
				goto fail;
		}
		if (cl->pid[i] == 0)
			goto fail;
	}
	snprintf(cl->url, sizeof cl->url, "redis://127.0.0.1:%d,"
	    "127.0.0.1:%d,127.0.0.1:%d", cl->port[0], cl->port[1],
	    cl->port[2]);
	if (rf_cluster_create(cl) != 0)
		goto fail;
	if (rlg_test_redis_cluster_wait(cl, "ok", RF_CLUSTER_OK_MS) != 0) {
		fprintf(stderr, "redis fixture: the cluster was not ok after"
		    " %d ms\n", RF_CLUSTER_OK_MS);
		goto fail;
	}
	return 0;

fail:
	fprintf(stderr, "redis fixture: could not start the cluster (see"
	    " %s)\n", cl->dir);
	rlg_test_redis_cluster_stop(cl);
	return -1;
}

void
rlg_test_redis_cluster_stop(struct rlg_test_redis_cluster *cl)
{
	int i;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		(void)rlg_test_redis_cluster_stop_node(cl, i);
		if (cl->port[i] > 0) {
			rf_release(cl->port[i]);
			rf_release(cl->port[i] + RF_BUS_OFFSET);
			cl->port[i] = 0;
		}
	}
	if (cl->dir[0] != '\0') {
		rf_rmdir(cl->dir);
		cl->dir[0] = '\0';
	}
}

/*
 * A test (a forked Check child) may stop a node its parent started: that
 * pid is not its child to reap, so it waits until the process is a zombie
 * or gone (its ports free).
 */
int
rlg_test_redis_cluster_stop_node(struct rlg_test_redis_cluster *cl, int i)
{
	int rc = 0;

	if (cl->pid[i] > 0) {
		if (kill(cl->pid[i], SIGTERM) == 0 &&
		    rf_reap(cl->pid[i], RF_STOP_MS) != 0) {
			(void)kill(cl->pid[i], SIGKILL);
			rc = rf_reap(cl->pid[i], RF_STOP_MS);
		}
		cl->pid[i] = 0;
	}
	return rc;
}

int
rlg_test_redis_cluster_start_node(struct rlg_test_redis_cluster *cl, int i)
{
	char log[32];

	if (cl->pid[i] > 0)
		return 0;
	snprintf(log, sizeof log, "redis-%d.log", cl->port[i]);
	cl->pid[i] = rf_exec_server(cl->port[i], cl->dir, log, true);
	if (cl->pid[i] < 0) {
		cl->pid[i] = 0;
		return -1;
	}
	return rf_wait_up(&cl->pid[i], cl->port[i]);
}

int
rlg_test_redis_cluster_wait(const struct rlg_test_redis_cluster *cl,
    const char *want, long wait_ms)
{
	char state[16];
	long waited;
	int i, ok, running;

	for (waited = 0; waited <= wait_ms; waited += 100) {
		ok = running = 0;
		for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
			if (cl->pid[i] <= 0)
				continue;
			running++;
			if (rf_cluster_state(cl->port[i], state,
			    sizeof state) == 0 && strcmp(state, want) == 0)
				ok++;
		}
		/* Every running node: a step may go to any of them. */
		if (running > 0 && ok == running)
			return 0;
		rf_sleep_ms(100);
	}
	return -1;
}

/*
 * redis-cli --cluster create P1 P2 P3 --cluster-replicas 0 --cluster-yes,
 * output to DIR/create.log; killed if it runs past RF_CREATE_MS. 0 when
 * it exits 0.
 */
static int
rf_cluster_create(struct rlg_test_redis_cluster *cl)
{
	char addr[RLG_TEST_CLUSTER_NODES][32], log[160];
	long waited;
	pid_t pid, got;
	int status, i;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++)
		snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", cl->port[i]);
	snprintf(log, sizeof log, "%s/create.log", cl->dir);
	fflush(NULL);
	if ((pid = fork()) < 0) {
		fprintf(stderr, "redis fixture: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		rf_child_stdio(log);
		execlp("redis-cli", "redis-cli", "--cluster", "create",
		    addr[0], addr[1], addr[2], "--cluster-replicas", "0",
		    "--cluster-yes", (char *)NULL);
		fprintf(stderr, "redis fixture: exec redis-cli: %s\n",
		    strerror(errno));
		_exit(127);
	}
	for (waited = 0; waited <= RF_CREATE_MS; waited += RF_POLL_MS) {
		got = waitpid(pid, &status, WNOHANG);
		if (got == pid) {
			if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
				return 0;
			fprintf(stderr, "redis fixture: redis-cli --cluster"
			    " create failed (see %s)\n", log);
			return -1;
		}
		rf_sleep_ms(RF_POLL_MS);
	}
	(void)kill(pid, SIGKILL);
	(void)rf_reap(pid, RF_STOP_MS);
	fprintf(stderr, "redis fixture: redis-cli --cluster create took more"
	    " than %d ms\n", RF_CREATE_MS);
	return -1;
}

/*
 * One command to the server on 127.0.0.1:port, connect and reply within
 * timeout_ms each: its reply (caller frees), or NULL if the server could
 * not be reached or did not answer.
 */
static redisReply *
rf_command(int port, long timeout_ms, const char *fmt, ...)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	redisContext *c;
	redisReply *rep = NULL;
	va_list ap;

	c = redisConnectWithTimeout("127.0.0.1", port, tv);
	if (c == NULL)
		return NULL;
	if (c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
		va_start(ap, fmt);
		rep = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	redisFree(c);
	return rep;
}

/* cluster_state of the node on port ("ok", "fail") into buf: 0 or -1. */
static int
rf_cluster_state(int port, char *buf, size_t size)
{
	redisReply *rep = rf_command(port, 500, "CLUSTER INFO");
	const char *at;
	int rc = -1;

	if (rep != NULL && rep->type == REDIS_REPLY_STRING &&
	    (at = strstr(rep->str, "cluster_state:")) != NULL) {
		at += strlen("cluster_state:");
		snprintf(buf, size, "%.*s", (int)strcspn(at, "\r\n"), at);
		rc = 0;
	}
	freeReplyObject(rep);
	return rc;
}

/* 0 when the server on 127.0.0.1:port answers PONG. */
static int
rf_ping(int port)
{
	redisReply *rep = rf_command(port, 200, "PING");
	int rc = -1;

	if (rep != NULL && rep->type == REDIS_REPLY_STATUS &&
	    strcmp(rep->str, "PONG") == 0)
		rc = 0;
	freeReplyObject(rep);
	return rc;
}

static void
rf_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * Waits up to wait_ms for pid to exit and reaps it: 0, or -1 if alive. A
 * pid that is not our child is waited for until it is a zombie or gone.
 */
static int
rf_reap(pid_t pid, long wait_ms)
{
	long waited;
	pid_t got;

	for (waited = 0; waited <= wait_ms; waited += RF_POLL_MS) {
		got = waitpid(pid, NULL, WNOHANG);
		if (got == pid)
			return 0;
		if (got < 0 && errno == ECHILD && rf_gone(pid))
			return 0;
		rf_sleep_ms(RF_POLL_MS);
	}
	return -1;
}

/* Whether pid has exited: gone, or a zombie (Linux: /proc). */
static bool
rf_gone(pid_t pid)
{
	char path[64], buf[256], *paren;
	FILE *f;
	bool zombie = false;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return errno == ENOENT;
	if (fgets(buf, sizeof buf, f) != NULL &&
	    (paren = strrchr(buf, ')')) != NULL)
		zombie = paren[1] == ' ' && paren[2] == 'Z';
	fclose(f);
	return zombie;
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
