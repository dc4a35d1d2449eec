/*
 * check_store_redis.c: what only the Redis store does (test case "redis"
 * of suite "store_redis"; the tests every backend runs are in
 * check_store.c): Redis down at open and killed mid-run (RLG_ESTORE naming
 * the server, then recovery), the reconnect backoff (no traffic while it
 * runs), a timeout, NOSCRIPT after SCRIPT FLUSH, clock = redis, AUTH
 * (password, ACL user, a wrong one), a unix socket, key expiry, strict
 * replies (a fake server), hash-tag-breaking client keys, the overrides
 * of a server down, of a key that is no hash, a master found through
 * real redis-sentinels (and refused when it is a replica). Servers of the
 * tests' own are started on 127.0.0.1 and stopped by pid.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "check_store.h"
#include "fixture.h"
#include "store_fixture.h"
#include "util.h"

/*
 * A redis-server of a test's own, on a port it chooses (so it can be
 * killed and started again on the same one), with a password or a unix
 * socket if asked; started and stopped by pid, its dir removed at the end.
 */
struct own_redis {
	pid_t pid;
	int port;
	char dir[64];
	char sock[128];                /* unix socket path, or "" */
	const char *password;          /* requirepass, or NULL */
	/* A Redis Sentinel instead (redis-sentinel), watching the master
	 * of that name at 127.0.0.1:monitor_port. */
	const char *monitor;
	int monitor_port;
};

/* Whether the server answers PING (after AUTH, if it has a password). */
static bool
own_answers(const struct own_redis *o)
{
	struct timeval tv = { 0, 200 * 1000 };
	redisContext *c;
	redisReply *r = NULL;
	bool ok = false;

	c = redisConnectWithTimeout("127.0.0.1", o->port, tv);
	if (c == NULL)
		return false;
	if (c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
		if (o->password != NULL)
			r = redisCommand(c, "AUTH %s", o->password);
		if (o->password == NULL || (r != NULL &&
		    r->type == REDIS_REPLY_STATUS)) {
			freeReplyObject(r);
			r = redisCommand(c, "PING");
			ok = r != NULL && r->type == REDIS_REPLY_STATUS;
		}
		freeReplyObject(r);
	}
	redisFree(c);
	return ok;
}

/* Starts (or starts again) o's server; waits until it answers. */
static void
own_start(struct own_redis *o)
{
	char port[16], log[96], conf[96];
	int fd, waited;
	FILE *f;

	if (o->dir[0] == '\0') {
		snprintf(o->dir, sizeof o->dir, "/tmp/rlg-own-redis-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(o->dir));
	}
	snprintf(port, sizeof port, "%d", o->port);
	snprintf(log, sizeof log, "%s/redis.log", o->dir);
	snprintf(conf, sizeof conf, "%s/sentinel.conf", o->dir);
	if (o->monitor != NULL) {
		f = fopen(conf, "w");
		ck_assert_ptr_nonnull(f);
		fprintf(f, "port %d\nbind 127.0.0.1\ndir %s\n"
		    "sentinel monitor %s 127.0.0.1 %d 1\n", o->port, o->dir,
		    o->monitor, o->monitor_port);
		ck_assert_int_eq(fclose(f), 0);
	}
	fflush(NULL);
	o->pid = fork();
	ck_assert_int_ge(o->pid, 0);
	if (o->pid == 0) {
		/* Dies with the test, should that fail before stopping it. */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		for (fd = STDERR_FILENO + 1; fd < 1024; fd++)
			close(fd);
		if (o->monitor != NULL)
			execlp("redis-sentinel", "redis-sentinel", conf,
			    (char *)NULL);
		else if (o->password != NULL && o->sock[0] != '\0')
			execlp("redis-server", "redis-server", "--port", port,
			    "--bind", "127.0.0.1", "--save", "", "--appendonly",
			    "no", "--dir", o->dir, "--requirepass",
			    o->password, "--unixsocket", o->sock,
			    "--unixsocketperm", "700", (char *)NULL);
		else if (o->password != NULL)
			execlp("redis-server", "redis-server", "--port", port,
			    "--bind", "127.0.0.1", "--save", "", "--appendonly",
			    "no", "--dir", o->dir, "--requirepass",
			    o->password, (char *)NULL);
		else if (o->sock[0] != '\0')
			execlp("redis-server", "redis-server", "--port", port,
			    "--bind", "127.0.0.1", "--save", "", "--appendonly",
			    "no", "--dir", o->dir, "--unixsocket", o->sock,
			    "--unixsocketperm", "700", (char *)NULL);
		else
			execlp("redis-server", "redis-server", "--port", port,
			    "--bind", "127.0.0.1", "--save", "", "--appendonly",
			    "no", "--dir", o->dir, (char *)NULL);
		_exit(127);
	}
	for (waited = 0; waited < HEAL_MS; waited += POLL_MS) {
		if (own_answers(o))
			return;
		ck_assert_msg(waitpid(o->pid, NULL, WNOHANG) == 0,
		    "redis-server on port %d exited (see %s)", o->port, log);
		sleep_ms(POLL_MS);
	}
	ck_abort_msg("redis-server on port %d did not answer", o->port);
}

/* Stops it with sig (SIGKILL: as a crash) and reaps it, bounded. */
static void
own_stop(struct own_redis *o, int sig)
{
	int waited;

	if (o->pid <= 0)
		return;
	kill(o->pid, sig);
	for (waited = 0; waited < 5000; waited += POLL_MS) {
		if (waitpid(o->pid, NULL, WNOHANG) == o->pid) {
			o->pid = 0;
			return;
		}
		sleep_ms(POLL_MS);
	}
	kill(o->pid, SIGKILL);
	waitpid(o->pid, NULL, 0);
	o->pid = 0;
}

static void
own_cleanup(struct own_redis *o)
{
	own_stop(o, SIGTERM);
	if (o->dir[0] != '\0')
		rlg_test_rmtree(o->dir);
	o->dir[0] = '\0';
}

/*
 * Down at open: RLG_ESTORE with a usable handle whose errmsg names the
 * server; steps fail at once meanwhile; the same handle heals once a
 * server listens there.
 */
START_TEST(test_redis_down_at_open)
{
	struct own_redis o = { .port = free_port() };
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	char url[64];
	int64_t t0;
	int rc;

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "refused");
	t0 = mono_ms();
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_lt(mono_ms() - t0, 50);
	check_names(s, o.port, "refused");
	ck_assert_int_eq(rlg_store_prune(s, T1, NULL), RLG_OK);

	own_start(&o);
	ck_assert_msg(step_until_ok(s, &p, "c", &d) == RLG_OK, "%s",
	    rlg_store_errmsg(s));
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 4);
	rlg_store_close(s);
	own_cleanup(&o);
}
END_TEST

/*
 * Killed mid-run: RLG_ESTORE naming the server; started again on the same
 * port, the same handle goes on (from a fresh state: no persistence).
 */
START_TEST(test_redis_killed_mid_run)
{
	struct own_redis o = { .port = free_port() };
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	char url[64];
	int rc, i;

	own_start(&o);
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &p, "c", T1, NULL));

	own_stop(&o, SIGKILL);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	check_names(s, o.port, NULL);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	check_names(s, o.port, NULL);

	own_start(&o);
	ck_assert_msg(step_until_ok(s, &p, "c", &d) == RLG_OK, "%s",
	    rlg_store_errmsg(s));
	ck_assert(d.admitted);
	ck_assert_int_eq(d.remaining, 4);
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 3);
	rlg_store_close(s);
	own_cleanup(&o);
}
END_TEST

/*
 * Group commit with the server gone: 8 threads of one process step at
 * once on their own handles (batched), the server is killed, and every
 * step fails with RLG_ESTORE and a message naming the server in its own
 * handle, whoever led the batch; started again, every handle heals.
 */
#define BK_THREADS 8
struct bk_worker {
	const char *url;
	pthread_barrier_t *barrier;
	struct own_redis *o;
	int id;
	int before;                    /* steps admitted while it ran */
	int after_rc;                  /* the first step's once killed */
	char after_msg[RLG_STORE_ERRMSG_MAX];
	int healed_rc;
};

static void *
bk_thread(void *arg)
{
	struct bk_worker *w = arg;
	struct rlg_policy p = policy(1000, 60);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	int rc, i;

	s = open_url(w->url, 0, &rc);
	pthread_barrier_wait(w->barrier);
	for (i = 0; i < 40; i++)
		if (rlg_store_step(s, &item, 1, T1, &d) == RLG_OK && d.admitted)
			w->before++;
	pthread_barrier_wait(w->barrier);
	if (w->id == 0)
		own_stop(w->o, SIGKILL);
	pthread_barrier_wait(w->barrier);
	w->after_rc = rlg_store_step(s, &item, 1, T1, &d);
	snprintf(w->after_msg, sizeof w->after_msg, "%s", rlg_store_errmsg(s));
	pthread_barrier_wait(w->barrier);
	if (w->id == 0)
		own_start(w->o);
	pthread_barrier_wait(w->barrier);
	w->healed_rc = step_until_ok(s, &p, "c", &d);
	/* The server dies with the thread that started it (PDEATHSIG):
	 * none leaves before all have healed. */
	pthread_barrier_wait(w->barrier);
	rlg_store_close(s);
	return NULL;
}

START_TEST(test_redis_batch_killed)
{
	struct own_redis o = { .port = free_port() };
	struct bk_worker w[BK_THREADS];
	pthread_barrier_t barrier;
	char url[64], name[64];
	int i, before = 0;

	own_start(&o);
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", o.port);
	snprintf(name, sizeof name, "redis 127.0.0.1:%d", o.port);
	pthread_barrier_init(&barrier, NULL, BK_THREADS);
	for (i = 0; i < BK_THREADS; i++)
		w[i] = (struct bk_worker){ .url = url, .barrier = &barrier,
		    .o = &o, .id = i };
	rlg_test_threads(BK_THREADS, bk_thread, w, sizeof w[0]);
	pthread_barrier_destroy(&barrier);
	for (i = 0; i < BK_THREADS; i++) {
		before += w[i].before;
		ck_assert_msg(w[i].after_rc == RLG_ESTORE, "thread %d: %d", i,
		    w[i].after_rc);
		ck_assert_msg(strstr(w[i].after_msg, name) != NULL,
		    "thread %d: %s", i, w[i].after_msg);
		ck_assert_msg(w[i].healed_rc == RLG_OK, "thread %d: %d", i,
		    w[i].healed_rc);
	}
	ck_assert_int_eq(before, BK_THREADS * 40);
	own_cleanup(&o);
}
END_TEST

/* Connections waiting on the listener, accepted and closed: how many. */
static int
drain(int lfd)
{
	int fd, n = 0;

	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		close(fd);
		n++;
	}
	ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
	return n;
}

/*
 * A server that accepts and never answers: each connect times out after
 * timeout_ms; then no connection at all until the backoff is over (100
 * ms, then 200 ms), so a dead Redis costs nothing per request.
 */
START_TEST(test_redis_backoff)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct sockaddr_in sa;
	struct rlg_decision d;
	struct rlg_store *s;
	socklen_t len = sizeof sa;
	int lfd, port, rc, i;
	int64_t t0;
	char url[64];

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(lfd, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(lfd, 64), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
	t0 = mono_ms();
	s = open_url(url, 100, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	ck_assert_int_ge(mono_ms() - t0, 90);
	check_names(s, port, "timed out after 100 ms");
	ck_assert_int_eq(drain(lfd), 1);

	/* Within the first backoff: fail at once, no connection. */
	t0 = mono_ms();
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d),
		    RLG_ESTORE);
	ck_assert_int_lt(mono_ms() - t0, 50);
	ck_assert_int_eq(drain(lfd), 0);
	check_names(s, port, "timed out");

	/* After it: one attempt, then a backoff of 200 ms. */
	sleep_ms(150);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(drain(lfd), 1);
	sleep_ms(60);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(drain(lfd), 0);
	sleep_ms(250);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_eq(drain(lfd), 1);
	rlg_store_close(s);
	close(lfd);
}
END_TEST

/* A field of INFO section of the server of path, as a number (0: none). */
static long long
info_of(const char *path, const char *section, const char *field)
{
	redisReply *r = rdb(path, "INFO %s", section);
	const char *at;
	long long v = 0;

	ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
	if ((at = strstr(r->str, field)) != NULL)
		v = strtoll(at + strlen(field), NULL, 10);
	freeReplyObject(r);
	return v;
}

/*
 * The steps go as FCALL of the library (Redis 7), which FUNCTION LOAD
 * made once. FUNCTION FLUSH under a live handle: the function is not
 * found, the library is loaded again, the step answered. SCRIPT FLUSH
 * changes nothing. An error reply names the call as FCALL.
 */
START_TEST(test_redis_noscript)
{
	char *path = path_in("noscript");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "w", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s = open_ok(path, 0);
	redisReply *r;

	freeReplyObject(rdb(path, "CONFIG RESETSTAT"));
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 4);
	r = rdb(path, "FUNCTION FLUSH");
	freeReplyObject(r);
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 3);
	r = rdb(path, "SCRIPT FLUSH");
	freeReplyObject(r);
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 2);
	ck_assert_int_eq(info_of(path, "commandstats",
	    "cmdstat_fcall:calls="), 4);
	ck_assert_int_eq(info_of(path, "commandstats",
	    "cmdstat_function|load:calls="), 1);
	ck_assert_int_eq(info_of(path, "commandstats",
	    "cmdstat_evalsha:calls="), 0);
	/* A state key of another type: the step fails, named as an FCALL. */
	freeReplyObject(rdb(path, "SET rlg:{w}:default x"));
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), ": FCALL failed: ") !=
	    NULL && strstr(rlg_store_errmsg(s), "WRONGTYPE") != NULL, "%s",
	    rlg_store_errmsg(s));
	rlg_store_close(s);
}
END_TEST

/* Redis TIME in ms. */
static int64_t
redis_time_ms(const char *path)
{
	redisReply *r = rdb(path, "TIME");
	int64_t t;

	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	ck_assert_uint_eq(r->elements, 2);
	t = strtoll(r->element[0]->str, NULL, 10) * 1000 +
	    strtoll(r->element[1]->str, NULL, 10) / 1000;
	freeReplyObject(r);
	return t;
}

/*
 * clock = redis: the caller's now_ms (here 1970) is not used; the window
 * and the log follow Redis TIME.
 */
START_TEST(test_redis_clock)
{
	char *path = path_in("clock");
	struct rlg_policy p = policy(5, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 10,
	    0);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_store_config cfg;
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	char text[256];
	int64_t before, after, ws, ts;

	store_cfg(&cfg, path, 0);
	cfg.redis.clock = RLG_CLOCK_REDIS;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);
	store_cfg_free(&cfg);

	before = redis_time_ms(path);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, 1, &d), RLG_OK);
	item.policy = &sl;
	ck_assert_int_eq(rlg_store_step(s, &item, 1, 1, &d), RLG_OK);
	after = redis_time_ms(path);
	ck_assert(d.admitted);

	ws = state_field(path, "default", "c", "window_start_ms");
	ck_assert_int_ge(ws, before - before % 60000);
	ck_assert_int_le(ws, after - after % 60000);
	log_dump(path, "sl", "c", text, sizeof text);
	ts = strtoll(text, NULL, 10);
	ck_assert_msg(ts >= before && ts <= after, "log %s, TIME %lld..%lld",
	    text, (long long)before, (long long)after);
	/* The reset counts from Redis' now too: at most one window away. */
	ck_assert_int_le(d.reset_ms, 10000);
	ck_assert_int_ge(d.reset_ms, 10000 - (after - before) - 1);
	rlg_store_close(s);
}
END_TEST

/*
 * AUTH: a password with '@' and ':' in the url, an ACL user, a wrong
 * password and none: clear errors that never show the password.
 */
START_TEST(test_redis_auth)
{
	struct own_redis o = { .port = free_port(),
	    .password = "pw@with:colon" };
	struct rlg_policy p = policy(5, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 2, 10,
	    0);
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5, 10,
	    3);
	struct rlg_store_item item = { &p, "t", false, false, 1 };
	struct rlg_store_config cfg;
	struct rlg_decision d;
	struct rlg_store *s;
	redisReply *r;
	const char *u;
	char url[128];
	int rc, turn;

	own_start(&o);
	snprintf(url, sizeof url, "redis://:pw@with:colon@127.0.0.1:%d",
	    o.port);
	s = open_url(url, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert(hit(s, &p, "c", T1, &d));
	rlg_store_close(s);

	snprintf(url, sizeof url, "redis://:badsecret@127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "AUTH failed");
	ck_assert_msg(strstr(rlg_store_errmsg(s), "WRONGPASS") != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_msg(strstr(rlg_store_errmsg(s), "badsecret") == NULL, "%s",
	    rlg_store_errmsg(s));
	rlg_store_close(s);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "NOAUTH");
	ck_assert_msg(strstr(rlg_store_errmsg(s), "[store] url") != NULL,
	    "%s", rlg_store_errmsg(s));
	rlg_store_close(s);

	/*
	 * An ACL user with docs/operations.md's permissions (and only
	 * those), and a database of its own; then (the loop's second turn)
	 * one without FUNCTION LOAD and FCALL, as Redis before 7 has none:
	 * the scripts go as EVALSHA.
	 */
	for (turn = 0; turn < 2; turn++) {
		u = turn == 0 ? "u" : "v";
		r = rcmd(o.port, o.password, 0, turn == 0 ?
		    "ACL SETUSER alice reset on >alice%%pw ~rlg:*"
		    " resetchannels -@all +ping +select +fcall +function|load"
		    " +evalsha +script|load +hmget +hset +lrange +linsert"
		    " +ltrim +rpush +pexpire +time" :
		    "ACL SETUSER alice reset on >alice%%pw ~rlg:*"
		    " resetchannels -@all +ping +select"
		    " +evalsha +script|load +hmget +hset +lrange +linsert"
		    " +ltrim +rpush +pexpire +time");
		freeReplyObject(r);
		r = rcmd(o.port, o.password, 0, "CONFIG RESETSTAT");
		freeReplyObject(r);
		snprintf(url, sizeof url,
		    "redis://alice:alice%%25pw@127.0.0.1:%d/3", o.port);
		s = open_url(url, 0, &rc);
		ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
		ck_assert(hit(s, &p, u, T1, &d));
		ck_assert(hit(s, &sl, u, T1, &d));
		ck_assert(hit(s, &sl, u, T1 + 1, &d));
		ck_assert(!hit(s, &sl, u, T1 + 2, &d));
		ck_assert(hit(s, &tb, u, T1, &d));
		rlg_store_close(s);
		/* clock = redis: TIME in the script is allowed too. */
		memset(&cfg, 0, sizeof cfg);
		store_cfg_url(&cfg, url);
		ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);
		store_cfg_free(&cfg);
		ck_assert_msg(rlg_store_step(s, &item, 1, 0, &d) == RLG_OK,
		    "%s", rlg_store_errmsg(s));
		ck_assert(d.admitted);
		rlg_store_close(s);
		r = rcmd(o.port, o.password, 3, "EXISTS rlg:{%s}:default",
		    u);
		ck_assert_int_eq(r->integer, 1);
		freeReplyObject(r);
		r = rcmd(o.port, o.password, 0, "INFO commandstats");
		ck_assert_msg(strstr(r->str, turn == 0 ? "cmdstat_fcall:" :
		    "cmdstat_evalsha:") != NULL && strstr(r->str, turn == 0 ?
		    "cmdstat_evalsha:" : "cmdstat_fcall:") == NULL,
		    "turn %d: %s", turn, r->str);
		freeReplyObject(r);
	}
	snprintf(url, sizeof url, "redis://alice:nope@127.0.0.1:%d/3",
	    o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "AUTH failed");
	rlg_store_close(s);
	own_cleanup(&o);
}
END_TEST

/* A unix socket with ?db=N, and a database that does not exist. */
START_TEST(test_redis_unix_socket)
{
	struct own_redis o = { .port = free_port() };
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s;
	redisReply *r;
	char url[256];
	int rc;

	snprintf(o.dir, sizeof o.dir, "/tmp/rlg-own-redis-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(o.dir));
	snprintf(o.sock, sizeof o.sock, "%s/redis.sock", o.dir);
	own_start(&o);
	snprintf(url, sizeof url, "unix:%s?db=2", o.sock);
	s = open_url(url, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 3);
	rlg_store_close(s);
	r = rcmd(o.port, NULL, 2, "HGET rlg:{c}:default count");
	ck_assert_str_eq(r->str, "2");
	freeReplyObject(r);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d/99", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	check_names(s, o.port, "SELECT failed");
	rlg_store_close(s);
	own_cleanup(&o);
}
END_TEST

/* Every key written expires: PEXPIRE by expires_ms - now. */
START_TEST(test_redis_keys_expire)
{
	char *path = path_in("expire");
	struct rlg_policy fw = policy(5, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 10,
	    0);
	struct rlg_policy tb = alg_policy(name_tb, RLG_ALG_TOKEN_BUCKET, 5, 10,
	    3);
	struct rlg_store *s = open_ok(path, 0);
	redisReply *r, *ttl;
	int64_t deleted = -1;
	size_t i;

	ck_assert(hit(s, &fw, "c", T1, NULL));
	ck_assert(hit(s, &sl, "c", T1, NULL));
	ck_assert(hit(s, &tb, "c", T1, NULL));
	r = rdb(path, "PTTL rlg:{c}:default");
	ck_assert_int_gt(r->integer, 58000);
	ck_assert_int_le(r->integer, 59000);
	freeReplyObject(r);
	r = rdb(path, "PTTL rlg:{c}:sl");
	ck_assert_int_gt(r->integer, 9000);
	ck_assert_int_le(r->integer, 10000);
	freeReplyObject(r);
	r = rdb(path, "PTTL rlg:{c}:sl:log");
	ck_assert_int_gt(r->integer, 9000);
	ck_assert_int_le(r->integer, 10000);
	freeReplyObject(r);
	/* tat = T1 + 2 s. */
	r = rdb(path, "PTTL rlg:{c}:tb");
	ck_assert_int_gt(r->integer, 1000);
	ck_assert_int_le(r->integer, 2000);
	freeReplyObject(r);
	r = rdb(path, "KEYS *");
	ck_assert_uint_eq(r->elements, 4);
	for (i = 0; i < r->elements; i++) {
		ttl = rdb(path, "PTTL %s", r->element[i]->str);
		ck_assert_msg(ttl->integer > 0, "%s: PTTL %lld",
		    r->element[i]->str, (long long)ttl->integer);
		freeReplyObject(ttl);
	}
	freeReplyObject(r);

	/* prune has nothing to do: the keys expire by themselves. */
	ck_assert_int_eq(rlg_store_prune(s, WIN0 + 3600000, &deleted), RLG_OK);
	ck_assert_int_eq(deleted, 0);
	ck_assert_int_eq(nstates(path), 3);
	rlg_store_close(s);
}
END_TEST

/*
 * Client keys: braces inside are harmless (one prefix tags every key of
 * the client); an empty key or one that starts with '}' would leave the
 * tag empty and is refused.
 */
START_TEST(test_redis_client_keys)
{
	char *path = path_in("keys");
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s = open_ok(path, 0);
	const char *good[] = { "a}b", "a", "{x}", "x{", "10.0.0.1|k:0a1b",
	    "2001:db8::/64", "unknown" };
	size_t i;

	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "hash tag") != NULL, "%s",
	    rlg_store_errmsg(s));
	item.client = "}x";
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_EINVAL);
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		ck_assert(hit(s, &p, good[i], T1, &d));
		ck_assert(hit(s, &p, good[i], T1, &d));
		ck_assert_int_eq(d.remaining, 3);
		ck_assert_int_eq(count_of(path, "default", good[i]), 2);
	}
	ck_assert_int_eq(nstates(path), (int64_t)(sizeof good /
	    sizeof good[0]));
	rlg_store_close(s);
}
END_TEST
/*
 * Malformed replies are store failures (RLG_ESTORE, errmsg naming the
 * server and what was wrong); a well-formed one is taken field by field;
 * NOSCRIPT twice in a row is retried once only.
 */
START_TEST(test_redis_strict_reply)
{
	static const struct {
		const char *reply;
		const char *msg;       /* NULL: RLG_OK */
	} cases[] = {
		{ ":1\r\n", "unexpected reply: an integer," },
		{ "*2\r\n:1\r\n:1\r\n", "unexpected reply: an array of 2," },
		{ "*7\r\n:1\r\n:1\r\n:5\r\n$1\r\n4\r\n:1000\r\n:0\r\n:1000\r\n",
		    "element 3 is a string" },
		{ "*7\r\n:1\r\n:2\r\n:5\r\n:4\r\n:1000\r\n:0\r\n:1000\r\n",
		    "element 1 is out of range (2)" },
		{ "*7\r\n:1\r\n:1\r\n:5\r\n:-4\r\n:1000\r\n:0\r\n:1000\r\n",
		    "element 3 is out of range (-4)" },
		{ "*7\r\n:1\r\n:1\r\n:5\r\n*0\r\n:1000\r\n:0\r\n:1000\r\n",
		    "element 3 is an array" },
		{ "*7\r\n:1\r\n:1\r\n:5\r\n:4\r\n:1000\r\n:0\r\n:1001\r\n",
		    "element 6 is out of range (1001): next_ms" },
		{ "-ERR rlgate: bad argument\r\n",
		    "EVALSHA failed: ERR rlgate: bad argument" },
		{ "$-1\r\n", "unexpected reply: nil," },
		{ "-NOSCRIPT No matching script\r\n",
		    "EVALSHA failed: NOSCRIPT" },
		{ "*7\r\n:1700000000000\r\n:1\r\n:5\r\n:4\r\n:1000\r\n:0\r\n:1000\r\n",
		    NULL },
	};
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	struct fake f;
	char url[64];
	size_t i;
	int rc, loads;

	fake_start(&f);
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", f.port);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		pthread_mutex_lock(&f.mu);
		f.reply = cases[i].reply;
		loads = f.loads;
		pthread_mutex_unlock(&f.mu);
		s = open_url(url, 0, &rc);
		ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
		rc = rlg_store_step(s, &item, 1, T1, &d);
		if (cases[i].msg == NULL) {
			ck_assert_int_eq(rc, RLG_OK);
			ck_assert(d.admitted);
			ck_assert_int_eq(d.limit, 5);
			ck_assert_int_eq(d.remaining, 4);
			ck_assert_int_eq(d.reset_ms, 1000);
			ck_assert_int_eq(d.retry_ms, 0);
			ck_assert_int_eq(d.next_ms, 1000);
		} else {
			ck_assert_msg(rc == RLG_ESTORE, "case %zu", i);
			check_names(s, f.port, cases[i].msg);
		}
		rlg_store_close(s);
		pthread_mutex_lock(&f.mu);
		/* NOSCRIPT: loaded at connect and once again, no more. */
		ck_assert_int_eq(f.loads - loads,
		    strncmp(cases[i].reply, "-NOSCRIPT", 9) == 0 ? 2 : 1);
		pthread_mutex_unlock(&f.mu);
	}
	fake_stop(&f);
}
END_TEST

/*
 * The overrides of a server that is down: RLG_ESTORE naming it, the
 * version kept, fn never called; once it listens, the same handle reads
 * them. A key rlg:overrides that holds no hash: RLG_ESTORE that says so,
 * and the connection kept (the next step is answered at once). A field
 * without a space: the whole field the policy, an empty client (the
 * gate refuses it).
 */
START_TEST(test_redis_overrides_faults)
{
	struct own_redis o = { .port = free_port() };
	struct overrides_seen seen = { 0 };
	struct rlg_policy p = policy(5, 60);
	char url[64], *path = path_in("ovr-bad");
	struct rlg_store *s;
	int64_t t0;
	uint64_t v = 42;
	int rc;

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", o.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_ESTORE);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_eq(seen.calls, 0);
	check_names(s, o.port, NULL);
	own_start(&o);
	t0 = mono_ms();
	while ((rc = overrides_read(s, &v, &seen)) != RLG_OK &&
	    mono_ms() - t0 < HEAL_MS)
		sleep_ms(POLL_MS);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert_uint_ne(v, 42);
	ck_assert_uint_ne(v, 0);
	rlg_store_close(s);
	own_cleanup(&o);

	freeReplyObject(rdb(path, "SET rlg:overrides %s", "not a hash"));
	s = open_with(path, 0, 0);
	v = 0;
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_ESTORE);
	ck_assert_uint_eq(v, 0);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "WRONGTYPE") != NULL &&
	    strstr(rlg_store_errmsg(s), "rlg:overrides") != NULL, "%s",
	    rlg_store_errmsg(s));
	t0 = mono_ms();
	ck_assert(hit(s, &p, "c", T1, NULL));
	ck_assert_int_lt(mono_ms() - t0, 1000);
	freeReplyObject(rdb(path, "DEL rlg:overrides"));
	freeReplyObject(rdb(path, "HSET rlg:overrides %s %s %s %s", "nospace",
	    "exempt", "default 10.0.0.1", "limit=5 window=1"));
	ck_assert_int_eq(overrides_read(s, &v, &seen), RLG_OK);
	ck_assert_str_eq(seen.rows,
	    "default|10.0.0.1|limit=5 window=1,nospace||exempt");
	rlg_store_close(s);
}
END_TEST

/*
 * Sentinel: the master a real redis-sentinel names is used (and the log
 * names it); a sentinel that does not answer is passed over for the
 * next; a sentinel that knows no such master, or a server that is no
 * sentinel, leaves the store down with the reason; a sentinel that names
 * a replica is refused (ROLE), never written to; a master demoted under
 * an open connection answers READONLY, and is refused until promoted.
 */
START_TEST(test_redis_sentinel)
{
	struct own_redis st = { .port = free_port(), .monitor = "m",
	    .monitor_port = redis_srv.port };
	/* Their ports are chosen once the one before listens: free_port
	 * may give one port twice until then. */
	struct own_redis rep = { .port = 0 };
	struct own_redis st2 = { .port = 0, .monitor = "r" };
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	redisReply *r;
	char url[160], want[128];
	int rc, dead = 1;          /* nothing listens there */

	own_start(&st);
	snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d,"
	    "127.0.0.1:%d/m", dead, st.port);
	s = open_url(url, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(rlg_store_probe(s, T1), RLG_OK);
	snprintf(want, sizeof want, "sentinel 127.0.0.1:%d says master m is"
	    " at 127.0.0.1:%d", st.port, redis_srv.port);
	ck_assert_str_eq(rlg_store_errmsg(s), want);
	rlg_store_close(s);
	r = rcmd(redis_srv.port, NULL, 0, "HGET rlg:{c}:default count");
	ck_assert_str_eq(r->str, "1");
	freeReplyObject(r);

	snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d/other",
	    st.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "no sentinel named it") !=
	    NULL && strstr(rlg_store_errmsg(s), "knows no master named "
	    "other") != NULL, "%s", rlg_store_errmsg(s));
	rlg_store_close(s);
	snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d/m",
	    redis_srv.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "SENTINEL "
	    "get-master-addr-by-name: ERR") != NULL, "%s",
	    rlg_store_errmsg(s));
	rlg_store_close(s);

	/* A replica named as the master: ROLE refuses it. */
	rep.port = free_port();
	own_start(&rep);
	r = rcmd(rep.port, NULL, 0, "REPLICAOF 127.0.0.1 %d", redis_srv.port);
	freeReplyObject(r);
	st2.monitor_port = rep.port;
	st2.port = free_port();
	own_start(&st2);
	snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d/r",
	    st2.port);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "ROLE says slave, not "
	    "master") != NULL, "%s", rlg_store_errmsg(s));
	/* Promoted: the same handle heals; demoted under its connection:
	 * READONLY fails the step, and the next connects ask again (ROLE
	 * refuses it) until it is a master again. */
	r = rcmd(rep.port, NULL, 0, "REPLICAOF NO ONE");
	freeReplyObject(r);
	ck_assert_int_eq(step_until_ok(s, &p, "c", &d), RLG_OK);
	r = rcmd(rep.port, NULL, 0, "REPLICAOF 127.0.0.1 %d", redis_srv.port);
	freeReplyObject(r);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "READONLY") != NULL, "%s",
	    rlg_store_errmsg(s));
	sleep_ms(300);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "ROLE says slave") != NULL,
	    "%s", rlg_store_errmsg(s));
	r = rcmd(rep.port, NULL, 0, "REPLICAOF NO ONE");
	freeReplyObject(r);
	ck_assert_int_eq(step_until_ok(s, &p, "c", &d), RLG_OK);
	rlg_store_close(s);
	own_cleanup(&st2);
	own_cleanup(&rep);
	own_cleanup(&st);
}
END_TEST

void
rlg_store_redis_tests(TCase *tc)
{
	tcase_add_test(tc, test_redis_down_at_open);
	tcase_add_test(tc, test_redis_killed_mid_run);
	tcase_add_test(tc, test_redis_backoff);
	tcase_add_test(tc, test_redis_noscript);
	tcase_add_test(tc, test_redis_clock);
	tcase_add_test(tc, test_redis_auth);
	tcase_add_test(tc, test_redis_unix_socket);
	tcase_add_test(tc, test_redis_keys_expire);
	tcase_add_test(tc, test_redis_client_keys);
	tcase_add_test(tc, test_redis_strict_reply);
	tcase_add_test(tc, test_redis_overrides_faults);
	tcase_add_test(tc, test_redis_sentinel);
	tcase_add_test(tc, test_redis_batch_killed);
}
