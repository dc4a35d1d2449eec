/*
 * store_redis_io.c: the Redis store's connections and their I/O: connect
 * (PING or AUTH, SELECT, SCRIPT LOAD), commands sent and replies read
 * against one deadline, and each server's health and backoff. Apart from
 * the step (store_redis.c) because it is the one place that touches a
 * socket, and the deadline below holds only if nothing else does.
 *
 * Deadline: [store] timeout_ms is one deadline for the commands of a step
 * (or of an open): every write and every byte of every reply, the
 * reload after NOSCRIPT, the redirections and TRYAGAIN waits of a
 * cluster, a refresh of the slot map, must be done timeout_ms after the
 * step began, or the step fails ("timed out after N ms"). Connects have
 * their own budget: connect_timeout_ms for all the connects of the step
 * together, the handshake after each (PING or AUTH, SELECT, SCRIPT LOAD)
 * counting as commands; the time spent connecting does not eat into
 * timeout_ms. So a step waits at most connect_timeout_ms + timeout_ms for
 * Redis, whatever the servers do (a name to resolve aside: getaddrinfo
 * has no timeout; a Sentinel's master, found on connect, gives each
 * sentinel's connect and its own a connect_timeout_ms: see
 * store_redis_sentinel.c). hiredis is used to connect and to parse replies;
 * rlgate writes with send(MSG_DONTWAIT | MSG_NOSIGNAL) and reads with
 * poll() against the deadline, since hiredis' own timeout (SO_RCVTIMEO)
 * applies to each read: a server that trickled its reply one byte at a
 * time could hold a request for as long as it liked.
 *
 * Failures: any error (connect, AUTH, SELECT, timeout, a closed
 * connection, an error reply, a reply out of range) fails the step with
 * RLG_ESTORE and an errmsg naming the server and the cause, and drops the
 * connection: a connection in an unknown state (a reply may still be on
 * its way) is never reused. (A step that runs out of time before it sends
 * anything to a server, its deadline spent on another, fails without
 * blaming that server: its connection stays and no backoff starts.) The
 * next connect to a server that failed waits for a backoff, 100 ms
 * doubling to 5 s and reset by the next step that succeeds there; until
 * then steps that need it fail at once without touching the network, so
 * a dead Redis costs the gateway no timeouts.
 * One line is logged when a server is lost and one when it answers
 * again. Backoffs follow the monotonic clock, not the caller's now_ms
 * (which the tests fix, and which may step).
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "store.h"
#include "store_redis_parts.h"
#include "util.h"

/* db/redis/step.lua, compiled in by the build as app/redis_script.c. */
extern const char rlg_redis_script_lua[];

/* Reconnect backoff: the first wait, and the longest. */
#define RD_BACKOFF_MIN_MS 100
#define RD_BACKOFF_MAX_MS 5000

/*
 * The largest array a reply may hold (a step's: 1 + 6 x 34 items; CLUSTER
 * SLOTS: one entry per slot range, at most 16384), and the most bytes of
 * one command's replies (a slot map of 16384 ranges with replicas).
 */
#define RD_ARRAY_MAX 65536
#define RD_REPLY_BYTES_MAX (16 << 20)
/* Bytes read from the socket at once. */
#define RD_READ_CHUNK 16384

/* The element count of hiredis' createArray: int before 1.0. */
#if HIREDIS_MAJOR >= 1
typedef size_t rd_nelem;
#else
typedef int rd_nelem;
#endif

/* How rd_send and rd_receive end. */
enum rd_io {
	RD_IO_DONE = 0,
	RD_IO_TIMEOUT,             /* the step's deadline passed */
	RD_IO_ERRNO,               /* a system call failed: errno says why */
	RD_IO_FAILED,              /* errmsg says why */
};

static void rd_node_name(struct rd_store *s, struct rd_node *node);
static int rd_handshake(struct rd_store *s, struct rd_node *node);
static int rd_command_ok(struct rd_store *s, struct rd_node *node,
    redisReply *reply, const char *what, const char *want);
static int rd_exchange(struct rd_store *s, struct rd_node *node,
    const char *what, size_t nreplies, redisReply **replies);
static enum rd_io rd_send(struct rd_store *s, int fd);
static enum rd_io rd_receive(struct rd_store *s, struct rd_node *node,
    const char *what, size_t nreplies, redisReply **replies, size_t *got);
static int rd_wait(struct rd_store *s, int fd, short events);
static void rd_timed_out(struct rd_store *s, const struct rd_node *node,
    const char *what);
static void *rd_create_array(const redisReadTask *task, rd_nelem elements);
static void rd_fn_setup(void);
static void rd_reader_init(void);
static void rd_io_error(struct rd_store *s, const struct rd_node *node,
    const char *what);
static struct timeval rd_tv(int ms);

/*
 * hiredis' reply functions with one change: an array of more than
 * RD_ARRAY_MAX elements is refused (the reader fails: rd_exchange says
 * why) before it is allocated. Set up once for every thread.
 */
static redisReplyObjectFunctions rd_fn;
static redisReplyObjectFunctions rd_default_fn;
static pthread_once_t rd_fn_once = PTHREAD_ONCE_INIT;
/* The size of the array refused last in this thread, or 0. */
static _Thread_local long long rd_refused_array;

/*
 * A step (or an open) begins: timeout_ms for its commands, from now, and
 * connect_timeout_ms for its connects (see the top).
 */
void
rd_budget(struct rd_store *s)
{
	s->deadline_ms = rd_mono_ms() + s->timeout_ms;
	s->connect_left_ms = s->connect_timeout_ms;
	s->late = false;
}

/*
 * The index of the node at host:port (or socket), added if new (not
 * connected). Indices stay valid until the next rd_compact; pointers
 * into nodes only until the next add.
 */
size_t
rd_node_add(struct rd_store *s, const char *host, int port,
    const char *socket)
{
	struct rd_node *node, *grown;
	size_t i;

	for (i = 0; i < s->nnodes; i++) {
		node = &s->nodes[i];
		if (socket != NULL ? node->socket != NULL &&
		    strcmp(node->socket, socket) == 0 : node->host != NULL &&
		    node->port == port && strcmp(node->host, host) == 0)
			return i;
	}
	if (s->nnodes == s->capnodes) {
		s->capnodes = s->capnodes == 0 ? 4 : s->capnodes * 2;
		grown = rlg_xcalloc(s->capnodes, sizeof *grown);
		if (s->nnodes > 0)
			memcpy(grown, s->nodes, s->nnodes * sizeof *grown);
		free(s->nodes);
		s->nodes = grown;
	}
	node = &s->nodes[s->nnodes];
	memset(node, 0, sizeof *node);
	node->host = host != NULL ? rlg_xstrdup(host) : NULL;
	node->port = port;
	node->socket = socket != NULL ? rlg_xstrdup(socket) : NULL;
	rd_node_name(s, node);
	return s->nnodes++;
}

/* "redis HOST:PORT[/DB]" for the single server (the store's name), and
 * "redis_cluster node HOST:PORT" for a cluster's. */
static void
rd_node_name(struct rd_store *s, struct rd_node *node)
{
	/* A cluster node always has a host (no socket). */
	const char *host = node->host != NULL ? node->host : "";

	if (!s->cluster)
		snprintf(node->name, sizeof node->name, "%s", s->name);
	else
		snprintf(node->name, sizeof node->name, strchr(host, ':') !=
		    NULL ? "redis_cluster node [%s]:%d" :
		    "redis_cluster node %s:%d", host, node->port);
}

/*
 * A connection to node ni: the open one, or a new one if its backoff
 * allows (a Sentinel's master: rd_sentinel_ready instead). 0, or -1 (errmsg set; a failed connect extends the backoff).
 */
int
rd_ready(struct rd_store *s, size_t ni)
{
	struct rd_node *node = &s->nodes[ni];

	if (node->c != NULL)
		return 0;
	if (rd_backing_off(s, ni))
		return -1;
	if (rd_connect(s, node) != 0) {
		(void)rd_failed(s, ni);
		return -1;
	}
	return 0;
}

/*
 * Whether node ni is still waiting out its backoff (then errmsg says
 * why it went down: its own cause, the last errmsg may be another's).
 */
bool
rd_backing_off(struct rd_store *s, size_t ni)
{
	struct rd_node *node = &s->nodes[ni];

	if (rd_mono_ms() >= node->retry_at_ms)
		return false;
	rd_seterr(s, "%s", node->err);
	return true;
}

/*
 * Connects within what is left of the connect budget (the time it takes
 * is added to the command deadline, see the top), then PING or AUTH,
 * SELECT and loads the script by the command deadline. 0, or -1 with
 * errmsg set and no connection.
 */
int
rd_connect(struct rd_store *s, struct rd_node *node)
{
	int64_t t0, took;

	assert(node->c == NULL);
	if (s->connect_left_ms <= 0) {
		rd_seterr(s, "%s: connect: no time left (this request spent"
		    " connect_timeout_ms = %d ms on other connects)",
		    node->name, s->connect_timeout_ms);
		s->late = true;
		return -1;
	}
	t0 = rd_mono_ms();
	if (node->socket != NULL)
		node->c = redisConnectUnixWithTimeout(node->socket,
		    rd_tv((int)s->connect_left_ms));
	else
		node->c = redisConnectWithTimeout(node->host, node->port,
		    rd_tv((int)s->connect_left_ms));
	took = rd_mono_ms() - t0;
	s->connect_left_ms -= took;
	s->deadline_ms += took;
	if (node->c == NULL) {
		rd_seterr(s, "%s: cannot connect: out of memory", node->name);
		return -1;
	}
	if (node->c->err != 0) {
		rd_io_error(s, node, "connect");
		goto fail;
	}
	/* TCP only: on a socket it fails and leaves the context in error. */
	if (node->socket == NULL && redisEnableKeepAlive(node->c) !=
	    REDIS_OK) {
		rd_io_error(s, node, "keepalive");
		goto fail;
	}
	/* Arrays no larger than RD_ARRAY_MAX (rd_create_array). */
	rd_reader_init();
	node->c->reader->fn = &rd_fn;
	if (node->sentinel)
		return 0;          /* asked without a password, nothing loaded */
	if (rd_handshake(s, node) != 0)
		goto fail;
	return 0;

fail:
	rd_disconnect(node);
	return -1;
}

/*
 * The commands after a connect, by the command deadline: PING, or AUTH
 * with the password (wiped from the command buffer after); SELECT when
 * db is not 0; SCRIPT LOAD. 0, or -1 with errmsg set (the caller drops
 * the connection).
 */
static int
rd_handshake(struct rd_store *s, struct rd_node *node)
{
	const char *argv[3];
	size_t argvlen[3];
	redisReply *reply;
	char db[RD_NUM];
	int argc;

	if (s->password == NULL) {
		/*
		 * A server that wants a password says NOAUTH to this; it
		 * would refuse the script's large unauthenticated SCRIPT
		 * LOAD with a mere protocol error.
		 */
		argv[0] = "PING";
		argvlen[0] = 4;
		if (rd_command(s, node, "PING", 1, argv, argvlen, &reply) !=
		    0 || rd_command_ok(s, node, reply, "PING", "PONG") != 0)
			return -1;
	} else {
		argc = 0;
		argv[argc] = "AUTH";
		argvlen[argc++] = 4;
		if (s->user != NULL) {
			argv[argc] = s->user;
			argvlen[argc++] = strlen(s->user);
		}
		argv[argc] = s->password;
		argvlen[argc++] = strlen(s->password);
		if (rd_command(s, node, "AUTH", argc, argv, argvlen, &reply) !=
		    0 || rd_command_ok(s, node, reply, "AUTH", "OK") != 0) {
			/* The password is in the command buffer: gone. */
			explicit_bzero(s->out, s->outlen);
			return -1;
		}
		explicit_bzero(s->out, s->outlen);
	}
	if (s->db != 0) {
		argv[0] = "SELECT";
		argvlen[0] = 6;
		argv[1] = db;
		argvlen[1] = (size_t)snprintf(db, sizeof db, "%d", s->db);
		if (rd_command(s, node, "SELECT", 2, argv, argvlen, &reply) !=
		    0 || rd_command_ok(s, node, reply, "SELECT", "OK") != 0)
			return -1;
	}
	return rd_load_script(s, node);
}

/*
 * One command (argv, argvlen: argc arguments) to node, its reply into
 * *out by the step's deadline. 0, or -1 (errmsg; *out untouched).
 */
int
rd_command(struct rd_store *s, struct rd_node *node, const char *what,
    int argc, const char *const *argv, const size_t *argvlen,
    redisReply **out)
{
	s->outlen = 0;
	rd_format(s, argc, argv, argvlen);
	return rd_exchange(s, node, what, 1, out);
}

/*
 * reply (freed here) to a command that answers +want: the status, and
 * nothing else. 0, or -1 (errmsg).
 */
static int
rd_command_ok(struct rd_store *s, struct rd_node *node, redisReply *reply,
    const char *what, const char *want)
{
	char said[RD_SAID];
	int rc = -1;

	if (reply->type == REDIS_REPLY_ERROR)
		rd_seterr(s, "%s: %s failed: %s%s", node->name, what,
		    rd_said(reply->str, reply->len, said),
		    strncmp(reply->str, "NOAUTH", 6) == 0 ? " (the password"
		    " goes in [store] url)" : "");
	else if (reply->type != REDIS_REPLY_STATUS)
		rd_seterr(s, "%s: %s: unexpected reply (%s), not +%s",
		    node->name, what, rd_reply_type(reply->type), want);
	else if (reply->len != strlen(want) ||
	    memcmp(reply->str, want, reply->len) != 0)
		rd_seterr(s, "%s: %s: unexpected reply +%s, not +%s",
		    node->name, what, rd_said(reply->str, reply->len, said),
		    want);
	else
		rc = 0;
	freeReplyObject(reply);
	return rc;
}

/*
 * FUNCTION LOAD REPLACE of the library on node (REPLACE: a library of its
 * name is this text, or one someone else planted: ours replaces it). 1
 * when loaded; 0 when the server refused it (the caller uses EVALSHA);
 * -1 when the exchange failed (errmsg; the connection is dropped).
 */
static int
rd_load_function(struct rd_store *s, struct rd_node *node)
{
	const char *argv[4] = { "FUNCTION", "LOAD", "REPLACE",
	    rlg_redis_function_lua };
	size_t argvlen[4] = { 8, 4, 7, strlen(rlg_redis_function_lua) };
	/* "#!lua name=NAME\n": the name the reply must give */
	const char *name = rlg_redis_function_lua + 11;
	size_t namelen = strcspn(name, "\n");
	redisReply *reply;
	int rc;

	if (rd_command(s, node, "FUNCTION LOAD", 4, argv, argvlen, &reply) !=
	    0)
		return -1;
	rc = reply->type == REDIS_REPLY_STRING && reply->len == namelen &&
	    memcmp(reply->str, name, namelen) == 0;
	freeReplyObject(reply);
	return rc;
}

int
rd_load_script(struct rd_store *s, struct rd_node *node)
{
	int rc = rd_load_function(s, node);

	if (rc < 0)
		return -1;
	node->fcall = rc == 1;
	if (node->fcall)
		return 0;
	return rd_load_lua(s, node, rlg_redis_script_lua, s->sha);
}

/*
 * SCRIPT LOAD of lua: the SHA1 into sha (41 bytes): 40 lowercase hex
 * digits (no NUL among them), and the same as every load before (the
 * text is the same: another SHA1 is not the script rlgate sent). 0, or
 * -1 (errmsg).
 */
int
rd_load_lua(struct rd_store *s, struct rd_node *node, const char *lua,
    char *sha)
{
	const char *argv[3] = { "SCRIPT", "LOAD", lua };
	size_t argvlen[3] = { 6, 4, strlen(lua) };
	char said[RD_SAID];
	redisReply *reply;
	size_t i;
	int rc = -1;

	if (rd_command(s, node, "SCRIPT LOAD", 3, argv, argvlen, &reply) !=
	    0)
		return -1;
	for (i = 0; reply->type == REDIS_REPLY_STRING && reply->len == 40 &&
	    i < 40; i++)
		if (!((reply->str[i] >= '0' && reply->str[i] <= '9') ||
		    (reply->str[i] >= 'a' && reply->str[i] <= 'f')))
			break;
	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: SCRIPT LOAD failed: %s%s", node->name,
		    rd_said(reply->str, reply->len, said),
		    strncmp(reply->str, "NOAUTH", 6) == 0 ? " (the password"
		    " goes in [store] url)" : "");
	} else if (reply->type != REDIS_REPLY_STRING) {
		rd_seterr(s, "%s: SCRIPT LOAD: unexpected reply (%s), not a"
		    " SHA1", node->name, rd_reply_type(reply->type));
	} else if (reply->len != 40 || i < 40) {
		rd_seterr(s, "%s: SCRIPT LOAD: not a SHA1 (40 lowercase hex"
		    " digits): %zu bytes \"%s\"", node->name, reply->len,
		    rd_said(reply->str, reply->len, said));
	} else if (sha[0] != '\0' && memcmp(sha, reply->str, 40) != 0) {
		rd_seterr(s, "%s: SCRIPT LOAD: SHA1 %.40s, but %s before: not"
		    " the script rlgate sent", node->name, reply->str, sha);
	} else {
		memcpy(sha, reply->str, 40);
		sha[40] = '\0';
		rc = 0;
	}
	freeReplyObject(reply);
	return rc;
}

/*
 * Sends the command in s->argv to node ni, after ASKING if asking (in one
 * write), by the step's deadline. The command's reply, or NULL (errmsg
 * set) when the exchange failed or ASKING was refused.
 */
redisReply *
rd_exec_on(struct rd_store *s, size_t ni, bool asking, int argc)
{
	static const char *const ask[1] = { "ASKING" };
	static const size_t asklen[1] = { 6 };
	struct rd_node *node = &s->nodes[ni];
	redisReply *r[2];

	s->outlen = 0;
	if (asking)
		rd_format(s, 1, ask, asklen);
	rd_call_head(s, node);
	rd_format(s, argc, s->argv, s->argvlen);
	if (rd_exchange(s, node, asking ? (node->fcall ? "ASKING, FCALL" :
	    "ASKING, EVALSHA") : s->argv[0], asking ? 2 : 1, r) != 0)
		return NULL;
	if (!asking)
		return r[0];
	if (rd_command_ok(s, node, r[0], "ASKING", "OK") != 0) {
		freeReplyObject(r[1]);
		return NULL;
	}
	return r[1];
}

/*
 * A pipeline: the commands in s->argv appended one by one (rd_append,
 * after s->outlen = 0), then sent to node ni in one write and their n
 * replies read into replies[] by the step's deadline. 0 (the caller
 * frees the replies), or -1 (errmsg; none kept).
 */
void
rd_append(struct rd_store *s, size_t ni, int argc)
{
	rd_call_head(s, &s->nodes[ni]);
	rd_format(s, argc, s->argv, s->argvlen);
}

int
rd_exec_many(struct rd_store *s, size_t ni, size_t n, redisReply **replies)
{
	char what[32];

	snprintf(what, sizeof what, "%s (pipelined)",
	    rd_call_name(&s->nodes[ni]));
	return rd_exchange(s, &s->nodes[ni], what, n, replies);
}

/*
 * Sends s->out to node and reads nreplies replies into replies[], all by
 * the step's deadline (see the top): never more than RD_REPLY_BYTES_MAX
 * bytes read, no array of more than RD_ARRAY_MAX elements. 0 (the caller
 * frees the replies), or -1 (errmsg; none kept; s->late when the time was
 * up before anything was sent, the connection then as it was).
 */
static int
rd_exchange(struct rd_store *s, struct rd_node *node, const char *what,
    size_t nreplies, redisReply **replies)
{
	redisReader *reader = node->c->reader;
	size_t got = 0;
	enum rd_io io;

	s->late = false;
	rd_refused_array = 0;
	if (rd_mono_ms() >= s->deadline_ms) {
		rd_timed_out(s, node, what);
		s->late = true;
		return -1;
	}
	io = rd_send(s, node->c->fd);
	if (io == RD_IO_DONE)
		io = rd_receive(s, node, what, nreplies, replies, &got);
	/* More than was asked for: the next command would read it. */
	if (io == RD_IO_DONE && reader->pos < reader->len) {
		rd_seterr(s, "%s: %s: %zu bytes more than %zu repl%s",
		    node->name, what, reader->len - reader->pos, nreplies,
		    nreplies == 1 ? "y" : "ies");
		io = RD_IO_FAILED;
	}
	if (io == RD_IO_DONE)
		return 0;
	if (io == RD_IO_TIMEOUT)
		rd_timed_out(s, node, what);
	else if (io == RD_IO_ERRNO)
		rd_seterr(s, "%s: %s: %s", node->name, what, errno == EPIPE ||
		    errno == ECONNRESET ? "the server closed the connection" :
		    strerror(errno));
	while (got > 0)
		freeReplyObject(replies[--got]);
	return -1;
}

/*
 * Writes s->out to fd, waiting (poll) while the socket is full, by the
 * step's deadline. RD_IO_DONE, RD_IO_TIMEOUT, or RD_IO_ERRNO (errno says
 * why).
 */
static enum rd_io
rd_send(struct rd_store *s, int fd)
{
	size_t off = 0;
	ssize_t n;
	int w;

	while (off < s->outlen) {
		n = send(fd, s->out + off, s->outlen - off,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return RD_IO_ERRNO;
		if ((w = rd_wait(s, fd, POLLOUT)) != 0)
			return w > 0 ? RD_IO_TIMEOUT : RD_IO_ERRNO;
	}
	return RD_IO_DONE;
}

/*
 * Reads from node until its reader holds nreplies replies, into
 * replies[] (*got of them so far, for the caller to free on failure), by
 * the step's deadline and within RD_REPLY_BYTES_MAX bytes. RD_IO_DONE,
 * RD_IO_TIMEOUT, RD_IO_ERRNO (errno says why), or RD_IO_FAILED (errmsg
 * says why: a reply rlgate cannot read, too large, the connection
 * closed).
 */
static enum rd_io
rd_receive(struct rd_store *s, struct rd_node *node, const char *what,
    size_t nreplies, redisReply **replies, size_t *got)
{
	redisReader *reader = node->c->reader;
	char buf[RD_READ_CHUNK];
	size_t bytes = 0;
	ssize_t n;
	void *r;
	int fd = node->c->fd, w;

	while (*got < nreplies) {
		if (redisReaderGetReply(reader, &r) != REDIS_OK) {
			if (rd_refused_array > 0)
				rd_seterr(s, "%s: %s: a reply rlgate cannot"
				    " read: an array of %lld elements (at most"
				    " %d)", node->name, what,
				    rd_refused_array, RD_ARRAY_MAX);
			else
				rd_seterr(s, "%s: %s: a reply rlgate cannot"
				    " read: %s", node->name, what,
				    reader->errstr);
			return RD_IO_FAILED;
		}
		if (r != NULL) {
			replies[(*got)++] = r;
			continue;
		}
		if ((w = rd_wait(s, fd, POLLIN)) != 0)
			return w > 0 ? RD_IO_TIMEOUT : RD_IO_ERRNO;
		n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n == 0) {
			rd_seterr(s, "%s: %s: the server closed the connection",
			    node->name, what);
			return RD_IO_FAILED;
		}
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == EWOULDBLOCK)
				continue;
			return RD_IO_ERRNO;
		}
		bytes += (size_t)n;
		if (bytes > RD_REPLY_BYTES_MAX) {
			rd_seterr(s, "%s: %s: the reply is larger than %d MiB",
			    node->name, what, RD_REPLY_BYTES_MAX >> 20);
			return RD_IO_FAILED;
		}
		if (redisReaderFeed(reader, buf, (size_t)n) != REDIS_OK) {
			rd_seterr(s, "%s: %s: a reply rlgate cannot read: %s",
			    node->name, what, reader->errstr);
			return RD_IO_FAILED;
		}
	}
	return RD_IO_DONE;
}

/*
 * Until fd is ready for events (POLLIN, POLLOUT) or the step's deadline:
 * 0 ready (or in error: the next read or write says which), 1 the
 * deadline passed, -1 poll failed (errno).
 */
static int
rd_wait(struct rd_store *s, int fd, short events)
{
	struct pollfd pfd;
	int64_t left;
	int n;

	for (;;) {
		left = s->deadline_ms - rd_mono_ms();
		if (left <= 0)
			return 1;
		pfd.fd = fd;
		pfd.events = events;
		pfd.revents = 0;
		n = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/* errmsg for a command past the step's deadline. */
static void
rd_timed_out(struct rd_store *s, const struct rd_node *node,
    const char *what)
{
	rd_seterr(s, "%s: %s: timed out after %d ms", node->name, what,
	    s->timeout_ms);
}

/*
 * An array of more than RD_ARRAY_MAX elements is refused before hiredis
 * allocates it (rd_fn, rd_reader_init).
 */
static void *
rd_create_array(const redisReadTask *task, rd_nelem elements)
{
	if (elements > RD_ARRAY_MAX) {
		rd_refused_array = (long long)elements;
		return NULL;
	}
	return rd_default_fn.createArray(task, elements);
}

static void
rd_fn_setup(void)
{
	redisReader *r = redisReaderCreate();

	if (r == NULL) {
		rlg_log("out of memory: hiredis reader");
		abort();
	}
	rd_default_fn = *r->fn;
	redisReaderFree(r);
	rd_fn = rd_default_fn;
	rd_fn.createArray = rd_create_array;
}

static void
rd_reader_init(void)
{
	(void)pthread_once(&rd_fn_once, rd_fn_setup);
}

/* Node ni answered a step: healthy again, and said so once. */
void
rd_node_ok(struct rd_store *s, size_t ni)
{
	struct rd_node *node = &s->nodes[ni];

	if (node->down && !rlg_log_store_quiet())
		rlg_log("store back: %s answers again after %lld ms",
		    node->name, (long long)(rd_mono_ms() -
		    node->down_since_ms));
	node->down = false;
	node->backoff_ms = 0;
}

/*
 * After an error of node ni (errmsg set): drops its connection and waits
 * out the next backoff before connecting again; the first failure is
 * logged. A cluster's slot map is read again soon: the slots of a failed
 * master may have moved to a replica. But a step that ran out of time
 * before it sent node ni anything (s->late) is no fault of the node's:
 * nothing changes. Returns RLG_ESTORE.
 */
int
rd_failed(struct rd_store *s, size_t ni)
{
	struct rd_node *node = &s->nodes[ni];
	int64_t now = rd_mono_ms();

	if (s->late) {
		s->late = false;
		return RLG_ESTORE;
	}
	rd_disconnect(node);
	memcpy(node->err, s->base.errmsg, sizeof node->err);
	node->backoff_ms = node->backoff_ms == 0 ? RD_BACKOFF_MIN_MS :
	    node->backoff_ms * 2 > RD_BACKOFF_MAX_MS ? RD_BACKOFF_MAX_MS :
	    node->backoff_ms * 2;
	node->retry_at_ms = now + node->backoff_ms;
	if (!node->down) {
		node->down = true;
		node->down_since_ms = now;
		if (!rlg_log_store_quiet())
			rlg_log("store lost: %s (reconnecting after %d ms,"
			    " then backing off up to %d s)", s->base.errmsg,
			    RD_BACKOFF_MIN_MS, RD_BACKOFF_MAX_MS / 1000);
	}
	if (s->cluster)
		s->map_stale = true;
	return RLG_ESTORE;
}

/* errmsg for a failed hiredis call: the context's error, timeouts named. */
static void
rd_io_error(struct rd_store *s, const struct rd_node *node, const char *what)
{
	int err = errno;

	if (node->c == NULL) {
		rd_seterr(s, "%s: %s: no connection", node->name, what);
		return;
	}
	if (node->c->err == REDIS_ERR_IO && (err == EAGAIN ||
	    err == EWOULDBLOCK || err == ETIMEDOUT || err == EINPROGRESS))
		rd_seterr(s, "%s: %s: timed out after %d ms", node->name, what,
		    strcmp(what, "connect") == 0 ? s->connect_timeout_ms :
		    s->timeout_ms);
	else if (node->c->err == REDIS_ERR_EOF)
		rd_seterr(s, "%s: %s: the server closed the connection",
		    node->name, what);
	else
		rd_seterr(s, "%s: %s: %s", node->name, what,
		    node->c->errstr[0] != '\0' ? node->c->errstr :
		    "I/O error");
}

void
rd_disconnect(struct rd_node *node)
{
	if (node->c != NULL) {
		redisFree(node->c);
		node->c = NULL;
	}
}

int64_t
rd_mono_ms(void)
{
	return rlg_mono_ns() / 1000000;
}

static struct timeval
rd_tv(int ms)
{
	struct timeval tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	return tv;
}
