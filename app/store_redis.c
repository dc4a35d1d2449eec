/*
 * store_redis.c: the Redis store, one hiredis connection per handle (a
 * handle belongs to one worker thread), for many gateways sharing one
 * limit.
 *
 * A step is one EVALSHA of db/redis/step.lua (compiled in as
 * rlg_redis_script_lua): Redis runs a script alone, so reading the states
 * of every (policy, client) of the request, deciding and writing them only
 * when every policy admits is one atomic step for every gateway, as the
 * SQLite transaction is for one machine. The keys and the arguments are
 * the contract's (README "Many gateways: the Redis store"):
 *   KEYS[2i-1] = rlg:{CLIENT}:POLICY       the state hash of item i
 *   KEYS[2i]   = rlg:{CLIENT}:POLICY:log   its sliding log (a list)
 *   ARGV = now_ms ("" for Redis TIME), n, then per item: algorithm,
 *          limit, window_ms, burst, advisory
 * and the reply is an array of 1 + 5n integers: the now_ms used, then per
 * item admitted, limit, remaining, reset_ms, retry_ms. The reply is
 * checked strictly; anything else is a store failure.
 *
 * The hash tag {CLIENT} puts one client's keys in one slot, so the script
 * touches one slot (Redis Cluster, later). Redis hashes what lies between
 * the first '{' and the first '}' after it; for one client that is the
 * same prefix of every key, whatever the key holds, unless it is empty (a
 * client key that is empty or starts with '}'): then Redis hashes whole
 * keys, and the state and the log of one client could land in two slots.
 * Those are refused (RLG_EINVAL). rlgate's own keys (IP addresses, IPv6
 * prefixes, "k:" and hex, "unknown") never are. Policy names hold no ':'
 * or '}' (config.c), so no two (policy, client) pairs share a key.
 *
 * The script is loaded (SCRIPT LOAD) on every connect, which gives its
 * SHA1; a NOSCRIPT reply (SCRIPT FLUSH, a failover to a server that lacks
 * it) loads it again and retries once.
 *
 * Failures: any error (connect, AUTH, SELECT, timeout, a closed
 * connection, an error reply, a malformed reply) fails the step with
 * RLG_ESTORE and an errmsg naming the server and the cause, and drops the
 * connection: a connection in an unknown state (a reply may still be on
 * its way) is never reused. The next connect waits for a backoff, 100 ms
 * doubling to 5 s and reset by the next step that succeeds; until then
 * steps fail at once without touching the network, so a dead Redis costs
 * the gateway no timeouts. One line is logged when the store is lost and
 * one when it answers again. Backoffs follow the monotonic clock, not the
 * caller's now_ms (which the tests fix, and which may step).
 *
 * Per request nothing is allocated but hiredis' own command buffer and
 * reply: the EVALSHA arguments are built in buffers of the handle, which
 * grow to the largest request seen.
 *
 * hiredis writes with write(2): a process that uses this store must
 * ignore SIGPIPE (server.c does), or a connection that Redis closed could
 * kill it.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "store.h"
#include "util.h"

/* db/redis/step.lua, compiled in by the build as app/redis_script.c. */
extern const char rlg_redis_script_lua[];

/* Reconnect backoff: the first wait, and the longest. */
#define RD_BACKOFF_MIN_MS 100
#define RD_BACKOFF_MAX_MS 5000

/* Bytes of one decimal int64 with its sign and NUL. */
#define RD_NUM 21

/* The reply: now_ms, then this many integers per item. */
#define RD_PER_ITEM 5

struct rd_store {
	struct rlg_store base;        /* first: rlg_store_* dispatch on it */
	/* Where and how to connect, copied from the config; owned. */
	char *host;                   /* or NULL: socket */
	int port;
	char *socket;                 /* unix socket path, or NULL */
	char *user;                   /* ACL user, or NULL */
	char *password;               /* AUTH, or NULL; never logged */
	int db;                       /* SELECT when not 0 */
	int connect_timeout_ms;
	int timeout_ms;               /* each command */
	bool local_clock;             /* clock = local: pass the caller's now */
	char name[320];               /* "redis HOST:PORT[/DB]", for messages */

	redisContext *c;              /* NULL while disconnected */
	char sha[41];                 /* the script's SHA1 (SCRIPT LOAD) */
	/*
	 * Health: down from the first failure until a step succeeds again;
	 * backoff_ms is the wait after the next failure (0: healthy: the
	 * first wait is RD_BACKOFF_MIN_MS); no connect before retry_at_ms.
	 * Times on the monotonic clock.
	 */
	bool down;
	int64_t down_since_ms;
	int64_t backoff_ms;
	int64_t retry_at_ms;

	/*
	 * EVALSHA's argument vector, reused by every step: argv[i] points
	 * into text (or at sha and constants), argvlen[i] is its length.
	 * Grown on demand, never shrunk.
	 */
	const char **argv;
	size_t *argvlen;
	size_t argcap;                /* entries in argv and argvlen */
	char *text;
	size_t textcap;               /* bytes in text */

	char errmsg[512];             /* the last error, NUL-terminated */
};

static int rd_open(const struct rlg_store_config *cfg,
    struct rlg_store **out);
static int rd_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static int rd_prune(struct rlg_store *base, int64_t now_ms,
    int64_t *deleted);
static const char *rd_errmsg(const struct rlg_store *base);
static void rd_close(struct rlg_store *base);

static int rd_check_items(struct rd_store *s,
    const struct rlg_store_item *items, size_t n,
    const struct rlg_decision *decisions, int64_t now_ms);
static int rd_ready(struct rd_store *s);
static int rd_connect(struct rd_store *s);
static int rd_command_ok(struct rd_store *s, redisReply *reply,
    const char *what);
static int rd_load_script(struct rd_store *s);
static int rd_build(struct rd_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms);
static char *rd_put(char *at, const char *s, size_t len);
static int rd_decisions(struct rd_store *s, const redisReply *reply,
    size_t n, struct rlg_decision *decisions);
static bool rd_noscript(const redisReply *reply);
static int rd_failed(struct rd_store *s);
static void rd_io_error(struct rd_store *s, const char *what);
static void rd_disconnect(struct rd_store *s);
static void rd_seterr(struct rd_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *rd_reply_type(int type);
static int64_t rd_mono_ms(void);
static struct timeval rd_tv(int ms);

const struct rlg_store_ops rlg_store_redis_ops = {
	.name = "redis",
	.open = rd_open,
	.step = rd_step,
	.prune = rd_prune,
	.errmsg = rd_errmsg,
	.close = rd_close,
};

static int
rd_open(const struct rlg_store_config *cfg, struct rlg_store **out)
{
	struct rlg_store_config named;
	struct rd_store *s;

	assert(cfg != NULL && out != NULL);
	s = rlg_xcalloc(1, sizeof *s);
	s->base.ops = &rlg_store_redis_ops;
	s->host = cfg->redis_host != NULL ? rlg_xstrdup(cfg->redis_host) :
	    NULL;
	s->port = cfg->redis_port;
	s->socket = cfg->redis_socket != NULL ?
	    rlg_xstrdup(cfg->redis_socket) : NULL;
	s->user = cfg->redis_user != NULL ? rlg_xstrdup(cfg->redis_user) :
	    NULL;
	s->password = cfg->redis_password != NULL ?
	    rlg_xstrdup(cfg->redis_password) : NULL;
	s->db = cfg->redis_db;
	s->connect_timeout_ms = cfg->connect_timeout_ms > 0 ?
	    cfg->connect_timeout_ms : RLG_DEFAULT_REDIS_TIMEOUT_MS;
	s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms :
	    RLG_DEFAULT_REDIS_TIMEOUT_MS;
	s->local_clock = cfg->clock == RLG_CLOCK_LOCAL;
	/* Named as Redis even when opened directly, whatever cfg->backend. */
	named = *cfg;
	named.backend = RLG_BACKEND_REDIS;
	rlg_store_describe(&named, s->name, sizeof s->name);
	snprintf(s->errmsg, sizeof s->errmsg, "no error");
	*out = &s->base;
	if (s->host == NULL && s->socket == NULL) {
		rd_seterr(s, "redis: no [store] url configured");
		return RLG_ESTORE;
	}
	if (rd_connect(s) != 0)
		return rd_failed(s);
	return RLG_OK;
}

static int
rd_step(struct rlg_store *base, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions)
{
	struct rd_store *s = (struct rd_store *)base;
	redisReply *reply;
	int argc, rc;

	if ((rc = rd_check_items(s, items, n, decisions, now_ms)) != RLG_OK)
		return rc;
	if (rd_ready(s) != 0)
		return RLG_ESTORE;
	argc = rd_build(s, items, n, now_ms);
	reply = redisCommandArgv(s->c, argc, s->argv, s->argvlen);
	if (reply != NULL && rd_noscript(reply)) {
		/* Flushed or failed over: load it again, retry once. */
		freeReplyObject(reply);
		if (rd_load_script(s) != 0)
			return rd_failed(s);
		reply = redisCommandArgv(s->c, argc, s->argv, s->argvlen);
	}
	if (reply == NULL) {
		rd_io_error(s, "EVALSHA");
		return rd_failed(s);
	}
	rc = rd_decisions(s, reply, n, decisions);
	freeReplyObject(reply);
	if (rc != 0)
		return rd_failed(s);
	if (s->down)
		rlg_log("store back: %s answers again after %lld ms", s->name,
		    (long long)(rd_mono_ms() - s->down_since_ms));
	s->down = false;
	s->backoff_ms = 0;
	return RLG_OK;
}

/* Keys expire by themselves (PEXPIRE): nothing to delete. */
static int
rd_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted)
{
	(void)base;
	(void)now_ms;
	if (deleted != NULL)
		*deleted = 0;
	return RLG_OK;
}

static const char *
rd_errmsg(const struct rlg_store *base)
{
	const struct rd_store *s = (const struct rd_store *)base;

	return s->errmsg;
}

static void
rd_close(struct rlg_store *base)
{
	struct rd_store *s = (struct rd_store *)base;

	if (s == NULL)
		return;
	rd_disconnect(s);
	free(s->host);
	free(s->socket);
	free(s->user);
	if (s->password != NULL) {
		explicit_bzero(s->password, strlen(s->password));
		free(s->password);
	}
	free(s->argv);
	free(s->argvlen);
	free(s->text);
	free(s);
}

/*
 * Refuses a request no store could take (the SQLite store's messages),
 * and a client key that would leave the hash tag empty. Each policy goes
 * through the pure limiter once on an empty state, so a policy it would
 * refuse is refused here as the SQLite store refuses it, before Redis.
 */
static int
rd_check_items(struct rd_store *s, const struct rlg_store_item *items,
    size_t n, const struct rlg_decision *decisions, int64_t now_ms)
{
	const struct rlg_policy *p;
	struct rlg_state zero, out;
	struct rlg_decision d;
	bool append;
	size_t i;
	int rc;

	if (items == NULL || decisions == NULL || n == 0) {
		rd_seterr(s, "store step: no policy to apply");
		return RLG_EINVAL;
	}
	memset(&zero, 0, sizeof zero);
	for (i = 0; i < n; i++) {
		p = items[i].policy;
		if (p == NULL || p->name == NULL || items[i].client == NULL) {
			rd_seterr(s, "store step: item %zu has no policy or"
			    " no client key", i);
			return RLG_EINVAL;
		}
		if (strnlen(items[i].client, RLG_CLIENT_KEY_MAX + 1) >
		    RLG_CLIENT_KEY_MAX) {
			rd_seterr(s, "store step: client key longer than %d"
			    " bytes", RLG_CLIENT_KEY_MAX);
			return RLG_EINVAL;
		}
		if (items[i].client[0] == '\0' || items[i].client[0] == '}') {
			rd_seterr(s, "store step: client key \"%s\" would"
			    " leave the Redis hash tag {...} empty",
			    items[i].client);
			return RLG_EINVAL;
		}
		if (p->algorithm == RLG_ALG_SLIDING_LOG)
			rc = rlg_limiter_sliding_log(p, NULL, 0, now_ms,
			    &append, &out, &d);
		else
			rc = rlg_limiter_step(p, &zero, now_ms, &out, &d);
		if (rc != RLG_OK) {
			rd_seterr(s, "store step: the limiter refused policy"
			    " \"%s\" (%s, limit %lld, window %lld ms, burst"
			    " %lld)", p->name,
			    rlg_algorithm_name(p->algorithm) != NULL ?
			    rlg_algorithm_name(p->algorithm) :
			    "unknown algorithm", (long long)p->limit,
			    (long long)p->window_ms, (long long)p->burst);
			return RLG_EINVAL;
		}
	}
	return RLG_OK;
}

/*
 * A connection to step on: the open one, or a new one if the backoff
 * allows. 0, or -1 (errmsg set; a failed connect extends the backoff).
 */
static int
rd_ready(struct rd_store *s)
{
	int64_t now;

	if (s->c != NULL)
		return 0;
	if (s->host == NULL && s->socket == NULL)
		return -1;              /* no url: errmsg says so since open */
	now = rd_mono_ms();
	if (now < s->retry_at_ms)
		return -1;              /* errmsg still names the cause */
	if (rd_connect(s) != 0) {
		(void)rd_failed(s);
		return -1;
	}
	return 0;
}

/*
 * Connects, sets the command timeout, AUTH, SELECT and loads the script.
 * 0, or -1 with errmsg set and no connection.
 */
static int
rd_connect(struct rd_store *s)
{
	redisReply *reply;

	assert(s->c == NULL);
	if (s->socket != NULL)
		s->c = redisConnectUnixWithTimeout(s->socket,
		    rd_tv(s->connect_timeout_ms));
	else
		s->c = redisConnectWithTimeout(s->host, s->port,
		    rd_tv(s->connect_timeout_ms));
	if (s->c == NULL) {
		rd_seterr(s, "%s: cannot connect: out of memory", s->name);
		return -1;
	}
	if (s->c->err != 0) {
		rd_io_error(s, "connect");
		goto fail;
	}
	if (redisSetTimeout(s->c, rd_tv(s->timeout_ms)) != REDIS_OK) {
		rd_io_error(s, "setting the timeout");
		goto fail;
	}
	/* TCP only: on a socket it fails and leaves the context in error. */
	if (s->socket == NULL && redisEnableKeepAlive(s->c) != REDIS_OK) {
		rd_io_error(s, "keepalive");
		goto fail;
	}
	if (s->password == NULL) {
		/*
		 * A server that wants a password says NOAUTH to this; it
		 * would refuse the script's large unauthenticated SCRIPT
		 * LOAD with a mere protocol error.
		 */
		reply = redisCommand(s->c, "PING");
		if (rd_command_ok(s, reply, "PING") != 0)
			goto fail;
	} else {
		if (s->user != NULL)
			reply = redisCommand(s->c, "AUTH %s %s", s->user,
			    s->password);
		else
			reply = redisCommand(s->c, "AUTH %s", s->password);
		if (rd_command_ok(s, reply, "AUTH") != 0)
			goto fail;
	}
	if (s->db != 0) {
		reply = redisCommand(s->c, "SELECT %d", s->db);
		if (rd_command_ok(s, reply, "SELECT") != 0)
			goto fail;
	}
	if (rd_load_script(s) != 0)
		goto fail;
	return 0;

fail:
	rd_disconnect(s);
	return -1;
}

/* reply (freed here) to a command that answers +OK. 0, or -1 (errmsg). */
static int
rd_command_ok(struct rd_store *s, redisReply *reply, const char *what)
{
	int rc = -1;

	if (reply == NULL)
		rd_io_error(s, what);
	else if (reply->type == REDIS_REPLY_ERROR)
		rd_seterr(s, "%s: %s failed: %.*s%s", s->name, what,
		    (int)(reply->len > 200 ? 200 : reply->len), reply->str,
		    strncmp(reply->str, "NOAUTH", 6) == 0 ? " (the password"
		    " goes in [store] url)" : "");
	else if (reply->type != REDIS_REPLY_STATUS)
		rd_seterr(s, "%s: %s: unexpected reply (%s)", s->name, what,
		    rd_reply_type(reply->type));
	else
		rc = 0;
	freeReplyObject(reply);
	return rc;
}

/* SCRIPT LOAD: the SHA1 into s->sha. 0, or -1 (errmsg). */
static int
rd_load_script(struct rd_store *s)
{
	redisReply *reply;
	size_t i;
	int rc = -1;

	reply = redisCommand(s->c, "SCRIPT LOAD %s", rlg_redis_script_lua);
	if (reply == NULL) {
		rd_io_error(s, "SCRIPT LOAD");
		return -1;
	}
	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: SCRIPT LOAD failed: %.*s%s", s->name,
		    (int)(reply->len > 200 ? 200 : reply->len), reply->str,
		    strncmp(reply->str, "NOAUTH", 6) == 0 ? " (the password"
		    " goes in [store] url)" : "");
	} else if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
		rd_seterr(s, "%s: SCRIPT LOAD: unexpected reply (%s)",
		    s->name, rd_reply_type(reply->type));
	} else {
		for (i = 0; i < 40; i++)
			if (strchr("0123456789abcdef", reply->str[i]) == NULL)
				break;
		if (i == 40) {
			memcpy(s->sha, reply->str, 40);
			s->sha[40] = '\0';
			rc = 0;
		} else {
			rd_seterr(s, "%s: SCRIPT LOAD: not a SHA1: %.40s",
			    s->name, reply->str);
		}
	}
	freeReplyObject(reply);
	return rc;
}

/*
 * EVALSHA sha 2n KEYS... now n ARGS... into s->argv, growing the buffers
 * if this request is the largest yet. Returns argc.
 */
static int
rd_build(struct rd_store *s, const struct rlg_store_item *items, size_t n,
    int64_t now_ms)
{
	size_t argc = 5 + 7 * n, need = (size_t)3 * RD_NUM, i, k, a, len;
	const struct rlg_policy *p;
	char *at;
	int64_t v[RD_PER_ITEM];

	/* "rlg:{" C "}:" P, and the same with ":log", each NUL-ended. */
	for (i = 0; i < n; i++)
		need += 2 * (strlen(items[i].client) +
		    strlen(items[i].policy->name) + 8) + 4 +
		    (size_t)RD_PER_ITEM * RD_NUM;
	if (argc > s->argcap) {
		free(s->argv);
		free(s->argvlen);
		s->argcap = argc;
		s->argv = rlg_xcalloc(argc, sizeof *s->argv);
		s->argvlen = rlg_xcalloc(argc, sizeof *s->argvlen);
	}
	if (need > s->textcap) {
		free(s->text);
		s->textcap = need;
		s->text = rlg_xmalloc(need);
	}

	at = s->text;
	s->argv[0] = "EVALSHA";
	s->argvlen[0] = 7;
	s->argv[1] = s->sha;
	s->argvlen[1] = 40;
	s->argv[2] = at;
	s->argvlen[2] = (size_t)snprintf(at, RD_NUM, "%zu", 2 * n);
	at += s->argvlen[2] + 1;
	for (i = 0, a = 3; i < n; i++) {
		for (k = 0; k < 2; k++, a++) {
			s->argv[a] = at;
			at = rd_put(at, "rlg:{", 5);
			at = rd_put(at, items[i].client,
			    strlen(items[i].client));
			at = rd_put(at, "}:", 2);
			at = rd_put(at, items[i].policy->name,
			    strlen(items[i].policy->name));
			if (k == 1)
				at = rd_put(at, ":log", 4);
			s->argvlen[a] = (size_t)(at - s->argv[a]);
			*at++ = '\0';
		}
	}
	/* ARGV[1]: "" makes the script read Redis TIME. */
	s->argv[a] = at;
	len = 0;
	*at = '\0';
	if (s->local_clock)
		len = (size_t)snprintf(at, RD_NUM, "%lld", (long long)now_ms);
	s->argvlen[a++] = len;
	at += len + 1;
	s->argv[a] = at;
	s->argvlen[a] = (size_t)snprintf(at, RD_NUM, "%zu", n);
	at += s->argvlen[a++] + 1;
	for (i = 0; i < n; i++) {
		p = items[i].policy;
		v[0] = (int64_t)p->algorithm;
		v[1] = p->limit;
		v[2] = p->window_ms;
		v[3] = p->burst;
		v[4] = items[i].advisory ? 1 : 0;
		for (k = 0; k < RD_PER_ITEM; k++, a++) {
			s->argv[a] = at;
			s->argvlen[a] = (size_t)snprintf(at, RD_NUM, "%lld",
			    (long long)v[k]);
			at += s->argvlen[a] + 1;
		}
	}
	assert(a == argc && (size_t)(at - s->text) <= need);
	return (int)argc;
}

/* Copies len bytes of s to at; returns the end. */
static char *
rd_put(char *at, const char *s, size_t len)
{
	memcpy(at, s, len);
	return at + len;
}

/*
 * The script's reply into decisions[0..n): an array of 1 + 5n integers,
 * admitted 0 or 1, the others never negative. 0, or -1 (errmsg).
 */
static int
rd_decisions(struct rd_store *s, const redisReply *reply, size_t n,
    struct rlg_decision *decisions)
{
	const redisReply *const *e;
	struct rlg_decision *d;
	char got[48];
	size_t i, k;

	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: EVALSHA failed: %.*s", s->name,
		    (int)(reply->len > 300 ? 300 : reply->len), reply->str);
		return -1;
	}
	if (reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != 1 + RD_PER_ITEM * n) {
		if (reply->type == REDIS_REPLY_ARRAY)
			snprintf(got, sizeof got, "an array of %zu",
			    reply->elements);
		else
			snprintf(got, sizeof got, "%s",
			    rd_reply_type(reply->type));
		rd_seterr(s, "%s: EVALSHA: unexpected reply: %s, not an"
		    " array of %zu integers (is db/redis/step.lua the"
		    " script of this rlgate?)", s->name, got,
		    1 + RD_PER_ITEM * n);
		return -1;
	}
	e = (const redisReply *const *)reply->element;
	for (k = 0; k < reply->elements; k++) {
		if (e[k]->type != REDIS_REPLY_INTEGER || e[k]->integer < 0 ||
		    (k % RD_PER_ITEM == 1 && e[k]->integer > 1)) {
			if (e[k]->type == REDIS_REPLY_INTEGER)
				rd_seterr(s, "%s: EVALSHA: unexpected reply:"
				    " element %zu is out of range (%lld)",
				    s->name, k, (long long)e[k]->integer);
			else
				rd_seterr(s, "%s: EVALSHA: unexpected reply:"
				    " element %zu is %s", s->name, k,
				    rd_reply_type(e[k]->type));
			return -1;
		}
	}
	for (i = 0; i < n; i++) {
		d = &decisions[i];
		k = 1 + RD_PER_ITEM * i;
		d->admitted = e[k]->integer == 1;
		d->limit = e[k + 1]->integer;
		d->remaining = e[k + 2]->integer;
		d->reset_ms = e[k + 3]->integer;
		d->retry_ms = e[k + 4]->integer;
	}
	return 0;
}

static bool
rd_noscript(const redisReply *reply)
{
	return reply->type == REDIS_REPLY_ERROR && reply->len >= 8 &&
	    strncmp(reply->str, "NOSCRIPT", 8) == 0;
}

/*
 * After an error (errmsg set): drops the connection and waits out the
 * next backoff before connecting again; the first failure is logged.
 * Returns RLG_ESTORE.
 */
static int
rd_failed(struct rd_store *s)
{
	int64_t now = rd_mono_ms();

	rd_disconnect(s);
	s->backoff_ms = s->backoff_ms == 0 ? RD_BACKOFF_MIN_MS :
	    s->backoff_ms * 2 > RD_BACKOFF_MAX_MS ? RD_BACKOFF_MAX_MS :
	    s->backoff_ms * 2;
	s->retry_at_ms = now + s->backoff_ms;
	if (!s->down) {
		s->down = true;
		s->down_since_ms = now;
		rlg_log("store lost: %s (reconnecting after %d ms, then"
		    " backing off up to %d s)", s->errmsg, RD_BACKOFF_MIN_MS,
		    RD_BACKOFF_MAX_MS / 1000);
	}
	return RLG_ESTORE;
}

/* errmsg for a failed hiredis call: the context's error, timeouts named. */
static void
rd_io_error(struct rd_store *s, const char *what)
{
	int err = errno;

	if (s->c == NULL) {
		rd_seterr(s, "%s: %s: no connection", s->name, what);
		return;
	}
	if (s->c->err == REDIS_ERR_IO && (err == EAGAIN ||
	    err == EWOULDBLOCK || err == ETIMEDOUT || err == EINPROGRESS))
		rd_seterr(s, "%s: %s: timed out after %d ms", s->name, what,
		    strcmp(what, "connect") == 0 ? s->connect_timeout_ms :
		    s->timeout_ms);
	else if (s->c->err == REDIS_ERR_EOF)
		rd_seterr(s, "%s: %s: the server closed the connection",
		    s->name, what);
	else
		rd_seterr(s, "%s: %s: %s", s->name, what,
		    s->c->errstr[0] != '\0' ? s->c->errstr : "I/O error");
}

static void
rd_disconnect(struct rd_store *s)
{
	if (s->c != NULL) {
		redisFree(s->c);
		s->c = NULL;
	}
}

static void
rd_seterr(struct rd_store *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
	va_end(ap);
}

/* A reply type's name, for the messages. */
static const char *
rd_reply_type(int type)
{
	switch (type) {
	case REDIS_REPLY_STRING:
		return "a string";
	case REDIS_REPLY_ARRAY:
		return "an array";
	case REDIS_REPLY_INTEGER:
		return "an integer";
	case REDIS_REPLY_NIL:
		return "nil";
	case REDIS_REPLY_STATUS:
		return "a status";
	case REDIS_REPLY_ERROR:
		return "an error";
	default:
		return "an unknown type";
	}
}

static int64_t
rd_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timeval
rd_tv(int ms)
{
	struct timeval tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	return tv;
}
