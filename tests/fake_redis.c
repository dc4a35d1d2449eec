/*
 * fake_redis.c: a Redis server that lies, for the tests of the Redis
 * store's distrust (tests/check_redis_faults.c,
 * tests/integration/redis_faults.sh).
 *
 * It listens on 127.0.0.1 (a port the kernel picks unless --port says
 * one), writes its port and its pid to files so that a test finds it and
 * stops it by pid, and speaks enough RESP for what rlgate sends: PING,
 * AUTH, SELECT, SCRIPT LOAD, EVALSHA, ASKING, CLUSTER SLOTS. Well-behaved
 * (mode "ok"), EVALSHA admits every item as step.lua would on a fresh
 * client: limit from the request, remaining limit - 1 (token_bucket:
 * burst - 1), reset_ms and next_ms one window, retry_ms 0, at the now_ms
 * the request passed (or the wall clock for clock = redis). Every other mode breaks
 * one thing (see the table below): a value out of the range the limiter
 * can produce, a wrong type or arity, a bad SCRIPT LOAD or PING reply, a
 * reply trickled one byte every --trickle-ms ms, no reply at all, a
 * reply too large to hold, a bad slot map, endless redirections.
 *
 * One thread, one poll() loop over every connection, so a trickle to one
 * client never holds up another. Bounded: at most FR_CONNS connections
 * (more are closed at once), FR_INBUF bytes of input per connection, and
 * the process exits by itself after --lifetime-s seconds (default 300)
 * if nobody stopped it. On SIGTERM it exits at once.
 *
 *   fake_redis --mode MODE [--trickle-ms N] [--port N] [--port-file F]
 *              [--pid-file F] [--lifetime-s S]
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "clock.h"
#include "resp.h"

#define FR_CONNS 64
#define FR_INBUF (1 << 16)         /* the largest command: SCRIPT LOAD */
#define FR_ARGS 512                /* arguments of one command, at most */
#define FR_FLOOD_BYTES (32 << 20)  /* huge-bulk: 32 MiB of payload */
#define FR_SHA "0123456789abcdef0123456789abcdef01234567"

/* What the server breaks. */
enum fr_mode {
	FR_OK,
	FR_RETRY_HUGE,          /* rejects, retry = reset = 2^63 - 1 */
	FR_RETRY_NEGATIVE,      /* rejects, retry = reset = -1000 */
	FR_RETRY_ZERO,          /* rejects, retry = reset = 0 */
	FR_RETRY_ADMITTED,      /* admits with a retry_ms of 1000 */
	FR_RESET_HUGE,          /* admits, reset = 2^63 - 1 */
	FR_RESET_ZERO,          /* admits, reset = 0 */
	FR_RESET_NE_RETRY,      /* rejects, reset = retry + 1 */
	FR_NEXT_ZERO,           /* admits, next = 0 */
	FR_NEXT_AFTER_RESET,    /* admits, next = reset + 1 */
	FR_NEXT_NE_RETRY,       /* rejects, next = retry + 1 */
	FR_LIMIT_HUGE,          /* limit = 2^63 - 1 */
	FR_LIMIT_OTHER,         /* limit = the request's + 1 */
	FR_REMAINING_HUGE,      /* admits, remaining = 2^63 - 1 */
	FR_REMAINING_LIMIT,     /* admits, remaining = limit */
	FR_REMAINING_REJECTED,  /* rejects with remaining 1 */
	FR_NOW_HUGE,            /* now_ms = 2^63 - 1 */
	FR_TYPE_STRING,         /* retry_ms as a bulk string */
	FR_TYPE_NESTED,         /* retry_ms as an array */
	FR_ARITY_SHORT,         /* one integer short */
	FR_EXTRA_REPLY,         /* EVALSHA answered twice */
	FR_TRICKLE,             /* EVALSHA's reply one byte every N ms */
	FR_TRICKLE_ALL,         /* every reply so, PING and SCRIPT LOAD too */
	FR_SILENT,              /* EVALSHA never answered */
	FR_SILENT_ALL,          /* nothing answered, PING neither */
	FR_SHA_NUL,             /* SCRIPT LOAD: 40 NUL bytes */
	FR_SHA_UPPER,           /* SCRIPT LOAD: uppercase hex */
	FR_SHA_SHORT,           /* SCRIPT LOAD: 39 hex digits */
	FR_SHA_INT,             /* SCRIPT LOAD: an integer */
	FR_SHA_CHANGES,         /* each SCRIPT LOAD another SHA1; first
	                           EVALSHA NOSCRIPT */
	FR_PONG_BAD,            /* PING: +NOPE */
	FR_HUGE_ARRAY,          /* EVALSHA: *1000000000, then nothing */
	FR_HUGE_BULK,           /* EVALSHA: a 32 MiB bulk string */
	FR_SYNC_OK,             /* the sync (sync.lua: n keys) answered
	                           well: every state fresh */
	FR_SYNC_TAT_HUGE,       /* sync: tat_us "99999999999999999999" */
	FR_SYNC_TAT_TEXT,       /* sync: tat_us "12x" */
	FR_SYNC_COUNT_HUGE,     /* sync: count 10^15 + 1 */
	FR_SYNC_EXPIRES_NEG,    /* sync: expires_ms -1 */
	FR_SYNC_ARITY,          /* sync: one element short */
	FR_CLUSTER,             /* a one-node cluster: every slot here */
	FR_CLUSTER_BAD_HOST,    /* CLUSTER SLOTS names a host "a\x01b" */
	FR_CLUSTER_MOVED_TRICKLE, /* EVALSHA: MOVED to itself, trickled */
	FR_CLUSTER_TRYAGAIN,    /* EVALSHA: TRYAGAIN, always */
};

static const struct {
	const char *name;
	enum fr_mode mode;
} fr_modes[] = {
	{ "ok", FR_OK },
	{ "retry-huge", FR_RETRY_HUGE },
	{ "retry-negative", FR_RETRY_NEGATIVE },
	{ "retry-zero", FR_RETRY_ZERO },
	{ "retry-admitted", FR_RETRY_ADMITTED },
	{ "reset-huge", FR_RESET_HUGE },
	{ "reset-zero", FR_RESET_ZERO },
	{ "reset-ne-retry", FR_RESET_NE_RETRY },
	{ "next-zero", FR_NEXT_ZERO },
	{ "next-after-reset", FR_NEXT_AFTER_RESET },
	{ "next-ne-retry", FR_NEXT_NE_RETRY },
	{ "limit-huge", FR_LIMIT_HUGE },
	{ "limit-other", FR_LIMIT_OTHER },
	{ "remaining-huge", FR_REMAINING_HUGE },
	{ "remaining-limit", FR_REMAINING_LIMIT },
	{ "remaining-rejected", FR_REMAINING_REJECTED },
	{ "now-huge", FR_NOW_HUGE },
	{ "type-string", FR_TYPE_STRING },
	{ "type-nested", FR_TYPE_NESTED },
	{ "arity-short", FR_ARITY_SHORT },
	{ "extra-reply", FR_EXTRA_REPLY },
	{ "trickle", FR_TRICKLE },
	{ "trickle-all", FR_TRICKLE_ALL },
	{ "silent", FR_SILENT },
	{ "silent-all", FR_SILENT_ALL },
	{ "sha-nul", FR_SHA_NUL },
	{ "sha-upper", FR_SHA_UPPER },
	{ "sha-short", FR_SHA_SHORT },
	{ "sha-int", FR_SHA_INT },
	{ "sha-changes", FR_SHA_CHANGES },
	{ "pong-bad", FR_PONG_BAD },
	{ "huge-array", FR_HUGE_ARRAY },
	{ "huge-bulk", FR_HUGE_BULK },
	{ "sync-ok", FR_SYNC_OK },
	{ "sync-tat-huge", FR_SYNC_TAT_HUGE },
	{ "sync-tat-text", FR_SYNC_TAT_TEXT },
	{ "sync-count-huge", FR_SYNC_COUNT_HUGE },
	{ "sync-expires-negative", FR_SYNC_EXPIRES_NEG },
	{ "sync-arity", FR_SYNC_ARITY },
	{ "cluster", FR_CLUSTER },
	{ "cluster-bad-host", FR_CLUSTER_BAD_HOST },
	{ "cluster-moved-trickle", FR_CLUSTER_MOVED_TRICKLE },
	{ "cluster-tryagain", FR_CLUSTER_TRYAGAIN },
};

/* One client connection. */
struct fr_conn {
	int fd;                       /* -1: free */
	char in[FR_INBUF];
	size_t inlen;
	char *out;                    /* pending reply bytes, owned */
	size_t outlen, outpos;
	bool trickle;                 /* out goes one byte per trickle_ms */
	int64_t next_ms;              /* trickle: the next byte's time */
	size_t flood_left;            /* huge-bulk payload still to send */
};

static enum fr_mode mode;
static int trickle_ms = 100;
static int port;
static int loads;                 /* SCRIPT LOADs answered */
static int evals;                 /* EVALSHAs answered */
static volatile sig_atomic_t stop;
static struct fr_conn conns[FR_CONNS];

static void fr_usage(void);
static void fr_on_term(int sig);
static int fr_listen(int want);
static void fr_accept(int lfd);
static bool fr_read(struct fr_conn *c);
static bool fr_write(struct fr_conn *c);
static void fr_close(struct fr_conn *c);
static void fr_command(struct fr_conn *c, int argc, const char **argv,
    const size_t *argvlen);
static void fr_sync(struct fr_conn *c, int argc, const char **argv,
    const size_t *argvlen);
static void fr_evalsha(struct fr_conn *c, int argc, const char **argv,
    const size_t *argvlen);
static void fr_put(struct fr_conn *c, bool trickle, const char *s,
    size_t len);
static void fr_putf(struct fr_conn *c, bool trickle, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static long long fr_arg(const char *s, size_t len, long long dflt);
static unsigned fr_slot(const char *key, size_t len);
static void fr_write_file(const char *path, long v);

int
main(int argc, char **argv)
{
	const char *port_file = NULL, *pid_file = NULL;
	struct pollfd pfd[FR_CONNS + 1];
	int i, n, lfd, want = 0, lifetime_s = 300, wait;
	bool have_mode = false;
	int64_t end, now;
	size_t k;

	for (i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			fr_usage();
		if (strcmp(argv[i], "--mode") == 0) {
			for (k = 0; k < sizeof fr_modes / sizeof fr_modes[0];
			    k++)
				if (strcmp(argv[i + 1], fr_modes[k].name) == 0)
					break;
			if (k == sizeof fr_modes / sizeof fr_modes[0])
				fr_usage();
			mode = fr_modes[k].mode;
			have_mode = true;
		} else if (strcmp(argv[i], "--trickle-ms") == 0) {
			trickle_ms = atoi(argv[i + 1]);
		} else if (strcmp(argv[i], "--port") == 0) {
			want = atoi(argv[i + 1]);
		} else if (strcmp(argv[i], "--port-file") == 0) {
			port_file = argv[i + 1];
		} else if (strcmp(argv[i], "--pid-file") == 0) {
			pid_file = argv[i + 1];
		} else if (strcmp(argv[i], "--lifetime-s") == 0) {
			lifetime_s = atoi(argv[i + 1]);
		} else {
			fr_usage();
		}
		i++;
	}
	if (!have_mode || trickle_ms < 1 || lifetime_s < 1)
		fr_usage();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, fr_on_term);
	signal(SIGINT, fr_on_term);
	for (i = 0; i < FR_CONNS; i++)
		conns[i].fd = -1;
	if ((lfd = fr_listen(want)) < 0)
		return 1;
	/* The pid first: a test that sees the port may stop us at once. */
	if (pid_file != NULL)
		fr_write_file(pid_file, (long)getpid());
	if (port_file != NULL)
		fr_write_file(port_file, port);

	end = rlg_test_clock_ms(CLOCK_MONOTONIC) +
	    (int64_t)lifetime_s * 1000;
	while (!stop && (now = rlg_test_clock_ms(CLOCK_MONOTONIC)) < end) {
		wait = 1000;
		pfd[0].fd = lfd;
		pfd[0].events = POLLIN;
		for (i = 0; i < FR_CONNS; i++) {
			struct fr_conn *c = &conns[i];

			pfd[i + 1].fd = c->fd;
			pfd[i + 1].events = 0;
			if (c->fd < 0)
				continue;
			pfd[i + 1].events = POLLIN;
			if (c->outpos < c->outlen || c->flood_left > 0) {
				if (!c->trickle || c->next_ms <= now)
					pfd[i + 1].events |= POLLOUT;
				else if (c->next_ms - now < wait)
					wait = (int)(c->next_ms - now);
			}
		}
		n = poll(pfd, FR_CONNS + 1, wait);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (pfd[0].revents & POLLIN)
			fr_accept(lfd);
		for (i = 0; i < FR_CONNS; i++) {
			struct fr_conn *c = &conns[i];

			if (c->fd < 0 || pfd[i + 1].revents == 0)
				continue;
			if ((pfd[i + 1].revents & (POLLIN | POLLHUP |
			    POLLERR)) && !fr_read(c)) {
				fr_close(c);
				continue;
			}
			if ((pfd[i + 1].revents & POLLOUT) && !fr_write(c))
				fr_close(c);
		}
	}
	for (i = 0; i < FR_CONNS; i++)
		fr_close(&conns[i]);
	close(lfd);
	fprintf(stderr, "fake_redis: %d SCRIPT LOAD, %d EVALSHA answered\n",
	    loads, evals);
	return 0;
}

static void
fr_usage(void)
{
	size_t k;

	fprintf(stderr, "usage: fake_redis --mode MODE [--trickle-ms N]"
	    " [--port N] [--port-file F] [--pid-file F] [--lifetime-s S]\n"
	    "modes:");
	for (k = 0; k < sizeof fr_modes / sizeof fr_modes[0]; k++)
		fprintf(stderr, " %s", fr_modes[k].name);
	fprintf(stderr, "\n");
	exit(64);
}

static void
fr_on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* A listening socket on 127.0.0.1:want (0: any free port); sets port. */
static int
fr_listen(int want)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	int fd, one = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) < 0) {
		perror("fake_redis: socket");
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)want);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    listen(fd, 64) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
		perror("fake_redis: bind/listen");
		close(fd);
		return -1;
	}
	port = ntohs(sa.sin_port);
	return fd;
}

static void
fr_accept(int lfd)
{
	int fd, i;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
		for (i = 0; i < FR_CONNS && conns[i].fd >= 0; i++)
			;
		if (i == FR_CONNS) {
			close(fd);
			continue;
		}
		memset(&conns[i], 0, sizeof conns[i]);
		conns[i].fd = fd;
	}
}

/* Reads what there is and answers every whole command; false: closed. */
static bool
fr_read(struct fr_conn *c)
{
	const char *argv[FR_ARGS];
	size_t argvlen[FR_ARGS], used;
	ssize_t got;
	int argc;

	got = read(c->fd, c->in + c->inlen, sizeof c->in - c->inlen);
	if (got == 0)
		return false;
	if (got < 0)
		return errno == EAGAIN || errno == EINTR;
	c->inlen += (size_t)got;
	while ((used = rlg_test_resp_parse(c->in, c->inlen, argv, argvlen,
	    FR_ARGS, &argc)) > 0) {
		if (argc > 0)
			fr_command(c, argc, argv, argvlen);
		memmove(c->in, c->in + used, c->inlen - used);
		c->inlen -= used;
	}
	/* A command larger than the buffer: nothing we could answer. */
	return c->inlen < sizeof c->in;
}

/* Sends what is due; false: the client is gone. */
static bool
fr_write(struct fr_conn *c)
{
	static char fill[1 << 16];
	size_t len;
	ssize_t put;

	if (c->outpos == c->outlen && c->flood_left > 0) {
		/* huge-bulk: the payload, as fast as the client reads. */
		len = c->flood_left < sizeof fill ? c->flood_left : sizeof fill;
		memset(fill, 'x', len);
		put = write(c->fd, fill, len);
		if (put < 0)
			return errno == EAGAIN || errno == EINTR;
		c->flood_left -= (size_t)put;
		return true;
	}
	len = c->trickle ? 1 : c->outlen - c->outpos;
	put = write(c->fd, c->out + c->outpos, len);
	if (put < 0)
		return errno == EAGAIN || errno == EINTR;
	c->outpos += (size_t)put;
	if (c->trickle)
		c->next_ms = rlg_test_clock_ms(CLOCK_MONOTONIC) + trickle_ms;
	if (c->outpos == c->outlen) {
		free(c->out);
		c->out = NULL;
		c->outpos = c->outlen = 0;
		c->trickle = false;
	}
	return true;
}

static void
fr_close(struct fr_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

/* Whether argument i is word (case-insensitive). */
#define FR_IS(i, word) (argc > (i) && argvlen[i] == strlen(word) && \
	strncasecmp(argv[i], (word), argvlen[i]) == 0)

static void
fr_command(struct fr_conn *c, int argc, const char **argv,
    const size_t *argvlen)
{
	bool all = mode == FR_TRICKLE_ALL;
	char sha[41];
	unsigned slot;

	if (mode == FR_SILENT_ALL)
		return;
	if (FR_IS(0, "PING")) {
		fr_putf(c, all, mode == FR_PONG_BAD ? "+NOPE\r\n" :
		    "+PONG\r\n");
	} else if (FR_IS(0, "AUTH") || FR_IS(0, "SELECT") ||
	    FR_IS(0, "ASKING")) {
		fr_putf(c, all, "+OK\r\n");
	} else if (FR_IS(0, "SCRIPT") && FR_IS(1, "LOAD")) {
		loads++;
		switch (mode) {
		case FR_SHA_NUL:
			fr_put(c, false, "$40\r\n", 5);
			fr_put(c, false, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
			    "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
			    "\r\n", 42);
			break;
		case FR_SHA_UPPER:
			fr_putf(c, false, "$40\r\n0123456789ABCDEF0123456789"
			    "ABCDEF01234567\r\n");
			break;
		case FR_SHA_SHORT:
			fr_putf(c, false, "$39\r\n%.39s\r\n", FR_SHA);
			break;
		case FR_SHA_INT:
			fr_putf(c, false, ":1\r\n");
			break;
		case FR_SHA_CHANGES:
			snprintf(sha, sizeof sha, "%040x", loads);
			fr_putf(c, false, "$40\r\n%s\r\n", sha);
			break;
		default:
			fr_putf(c, all, "$40\r\n%s\r\n", FR_SHA);
			break;
		}
	} else if (FR_IS(0, "CLUSTER") && FR_IS(1, "SLOTS")) {
		if (mode == FR_CLUSTER_BAD_HOST)
			fr_putf(c, all, "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n"
			    "$3\r\na\001b\r\n:%d\r\n$40\r\n%s\r\n", port,
			    FR_SHA);
		else if (mode >= FR_CLUSTER)
			fr_putf(c, all, "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n"
			    "$9\r\n127.0.0.1\r\n:%d\r\n$40\r\n%s\r\n", port,
			    FR_SHA);
		else
			fr_putf(c, all, "-ERR This instance has cluster"
			    " support disabled\r\n");
	} else if (FR_IS(0, "EVALSHA")) {
		evals++;
		if (mode == FR_SILENT)
			return;
		if (mode == FR_SHA_CHANGES && evals == 1) {
			fr_putf(c, false, "-NOSCRIPT No matching script\r\n");
			return;
		}
		if (mode == FR_CLUSTER_MOVED_TRICKLE) {
			/* The slot of the first key, as Redis computes it. */
			slot = argc > 3 ? fr_slot(argv[3], argvlen[3]) : 0;
			fr_putf(c, true, "-MOVED %u 127.0.0.1:%d\r\n", slot,
			    port);
			return;
		}
		if (mode == FR_CLUSTER_TRYAGAIN) {
			fr_putf(c, false, "-TRYAGAIN Multiple keys request"
			    " during rehashing of slot\r\n");
			return;
		}
		if (mode >= FR_SYNC_OK && mode <= FR_SYNC_ARITY) {
			fr_sync(c, argc, argv, argvlen);
			return;
		}
		fr_evalsha(c, argc, argv, argvlen);
		if (mode == FR_EXTRA_REPLY)
			fr_evalsha(c, argc, argv, argvlen);
	} else {
		fr_putf(c, all, "-ERR unknown command '%.*s'\r\n",
		    (int)(argvlen[0] > 32 ? 32 : argvlen[0]), argv[0]);
	}
}

/*
 * EVALSHA sha n KEYS... now n (alg limit window burst units
 * window_start)...: sync.lua's reply for fresh states (window_start_ms,
 * count, prev_count, tat_us as a string, expires_ms all 0), with the
 * mode's one lie in the last item.
 */
static void
fr_sync(struct fr_conn *c, int argc, const char **argv,
    const size_t *argvlen)
{
	long long n, i, now;
	int a;

	n = argc > 2 ? fr_arg(argv[2], argvlen[2], 0) : 0;
	a = 3 + (int)n;
	if (n < 1 || a + 2 + 6 * n > argc) {
		fr_putf(c, false, "-ERR fake_redis: malformed EVALSHA\r\n");
		return;
	}
	now = argvlen[a] > 0 ? fr_arg(argv[a], argvlen[a], 0) :
	    rlg_test_clock_ms(CLOCK_REALTIME);
	fr_putf(c, false, "*%lld\r\n:%lld\r\n", 1 + 5 * n -
	    (mode == FR_SYNC_ARITY ? 1 : 0), now);
	for (i = 0; i < n; i++) {
		bool last = i == n - 1;

		fr_putf(c, false, ":0\r\n:%lld\r\n:0\r\n", last &&
		    mode == FR_SYNC_COUNT_HUGE ? 1000000000000001LL : 0);
		if (last && mode == FR_SYNC_TAT_HUGE)
			fr_putf(c, false, "$20\r\n99999999999999999999\r\n");
		else if (last && mode == FR_SYNC_TAT_TEXT)
			fr_putf(c, false, "$3\r\n12x\r\n");
		else
			fr_putf(c, false, "$1\r\n0\r\n");
		if (last && mode == FR_SYNC_ARITY)
			break;
		fr_putf(c, false, ":%d\r\n", last &&
		    mode == FR_SYNC_EXPIRES_NEG ? -1 : 0);
	}
}

/*
 * EVALSHA sha numkeys KEYS... now n (alg limit window burst flags
 * cost)...: step.lua's reply for a fresh client (requests of cost 1, all
 * the tests send), with the mode's one lie.
 */
static void
fr_evalsha(struct fr_conn *c, int argc, const char **argv,
    const size_t *argvlen)
{
	const long long huge = INT64_MAX;
	long long nkeys, now, n, i, alg, limit, window, burst;
	long long admitted, remaining, reset, retry, next;
	bool trickle = mode == FR_TRICKLE || mode == FR_TRICKLE_ALL;
	int a, per;

	if (mode == FR_HUGE_ARRAY) {
		fr_putf(c, false, "*1000000000\r\n");
		return;
	}
	if (mode == FR_HUGE_BULK) {
		fr_putf(c, false, "$%d\r\n", FR_FLOOD_BYTES);
		c->flood_left = FR_FLOOD_BYTES;
		return;
	}
	nkeys = argc > 2 ? fr_arg(argv[2], argvlen[2], 0) : 0;
	a = 3 + (int)nkeys;
	if (nkeys < 0 || a + 2 > argc) {
		fr_putf(c, false, "-ERR fake_redis: malformed EVALSHA\r\n");
		return;
	}
	now = argvlen[a] > 0 ? fr_arg(argv[a], argvlen[a], 0) :
	    rlg_test_clock_ms(CLOCK_REALTIME);
	n = fr_arg(argv[a + 1], argvlen[a + 1], 0);
	a += 2;
	/* 8 arguments an item; 6: sync.lua's, answered as a step (as a
	 * server with the other script loaded would) */
	per = n > 0 && argc - a == 6 * n ? 6 : 8;
	if (n < 1 || a + per * n > argc) {
		fr_putf(c, false, "-ERR fake_redis: malformed EVALSHA\r\n");
		return;
	}
	fr_putf(c, trickle, "*%lld\r\n:%lld\r\n", 1 + 6 * n -
	    (mode == FR_ARITY_SHORT ? 1 : 0), mode == FR_NOW_HUGE ? huge :
	    now);
	for (i = 0; i < n; i++, a += per) {
		alg = fr_arg(argv[a], argvlen[a], 0);
		limit = fr_arg(argv[a + 1], argvlen[a + 1], 1);
		window = fr_arg(argv[a + 2], argvlen[a + 2], 1000);
		burst = fr_arg(argv[a + 3], argvlen[a + 3], 1);
		admitted = 1;
		remaining = (alg == 2 ? burst : limit) - 1;
		reset = window;
		retry = 0;
		switch (mode) {
		case FR_RETRY_HUGE:
			admitted = 0;
			remaining = 0;
			reset = retry = huge;
			break;
		case FR_RETRY_NEGATIVE:
			admitted = 0;
			remaining = 0;
			reset = retry = -1000;
			break;
		case FR_RETRY_ZERO:
			admitted = 0;
			remaining = 0;
			reset = retry = 0;
			break;
		case FR_RETRY_ADMITTED:
			retry = 1000;
			break;
		case FR_RESET_HUGE:
			reset = huge;
			break;
		case FR_RESET_ZERO:
			reset = 0;
			break;
		case FR_RESET_NE_RETRY:
			admitted = 0;
			remaining = 0;
			retry = window;
			reset = window + 1;
			break;
		case FR_NEXT_NE_RETRY:
			admitted = 0;
			remaining = 0;
			reset = retry = window;
			break;
		case FR_LIMIT_HUGE:
			limit = huge;
			break;
		case FR_LIMIT_OTHER:
			limit++;
			break;
		case FR_REMAINING_HUGE:
			remaining = huge;
			break;
		case FR_REMAINING_LIMIT:
			remaining = limit;
			break;
		case FR_REMAINING_REJECTED:
			admitted = 0;
			remaining = 1;
			retry = window;
			break;
		default:
			break;
		}
		fr_putf(c, trickle, ":%lld\r\n:%lld\r\n:%lld\r\n:%lld\r\n",
		    admitted, limit, remaining, reset);
		if (mode == FR_TYPE_STRING && i == n - 1)
			fr_putf(c, trickle, "$%d\r\n%lld\r\n",
			    snprintf(NULL, 0, "%lld", retry), retry);
		else if (mode == FR_TYPE_NESTED && i == n - 1)
			fr_putf(c, trickle, "*1\r\n:%lld\r\n", retry);
		else
			fr_putf(c, trickle, ":%lld\r\n", retry);
		if (mode == FR_ARITY_SHORT && i == n - 1)
			break;
		/* next_ms: retry_ms when rejected, reset_ms when admitted. */
		next = admitted ? reset : retry;
		if (mode == FR_NEXT_ZERO)
			next = 0;
		else if (mode == FR_NEXT_AFTER_RESET)
			next = reset + 1;
		else if (mode == FR_NEXT_NE_RETRY)
			next = retry + 1;
		fr_putf(c, trickle, ":%lld\r\n", next);
	}
}

/* Queues len bytes of s on c, trickled if asked. */
static void
fr_put(struct fr_conn *c, bool trickle, const char *s, size_t len)
{
	char *grown;

	grown = realloc(c->out, c->outlen + len);
	if (grown == NULL) {
		fprintf(stderr, "fake_redis: out of memory\n");
		exit(70);
	}
	c->out = grown;
	memcpy(c->out + c->outlen, s, len);
	c->outlen += len;
	if (trickle && !c->trickle) {
		c->trickle = true;
		c->next_ms = rlg_test_clock_ms(CLOCK_MONOTONIC);
	}
}

static void
fr_putf(struct fr_conn *c, bool trickle, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof buf)
		len = 0;
	fr_put(c, trickle, buf, (size_t)len);
}

/* A decimal argument, or dflt. */
static long long
fr_arg(const char *s, size_t len, long long dflt)
{
	char buf[32];
	char *end;
	long long v;

	if (len == 0 || len >= sizeof buf)
		return dflt;
	memcpy(buf, s, len);
	buf[len] = '\0';
	v = strtoll(buf, &end, 10);
	return *end == '\0' ? v : dflt;
}

/* Redis' slot of a key: CRC16 (XMODEM) of its hash tag, mod 16384. */
static unsigned
fr_slot(const char *key, size_t len)
{
	const char *open, *close;
	unsigned crc = 0;
	size_t i;
	int k;

	open = memchr(key, '{', len);
	if (open != NULL) {
		close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
		if (close != NULL && close > open + 1) {
			len = (size_t)(close - open - 1);
			key = open + 1;
		}
	}
	for (i = 0; i < len; i++) {
		crc ^= (unsigned)(unsigned char)key[i] << 8;
		for (k = 0; k < 8; k++)
			crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 :
			    crc << 1;
		crc &= 0xffff;
	}
	return crc & 16383;
}

/* Writes "v\n" to path through a temporary file, so readers see it whole. */
static void
fr_write_file(const char *path, long v)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if ((f = fopen(tmp, "w")) == NULL || fprintf(f, "%ld\n", v) < 0 ||
	    fclose(f) != 0 || rename(tmp, path) != 0) {
		perror(path);
		exit(73);
	}
}
