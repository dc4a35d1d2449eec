/*
 * store_redis.c: the Redis store, for many gateways sharing one limit:
 * one Redis server, or a Redis Cluster ([store] backend = redis_cluster).
 * A handle belongs to one worker thread and holds its own connections.
 *
 * A step is one EVALSHA of db/redis/step.lua (compiled in as
 * rlg_redis_script_lua): Redis runs a script alone, so reading the states
 * of every (policy, client) of the request, deciding and writing them only
 * when every policy admits is one atomic step for every gateway, as the
 * SQLite transaction is for one machine. The keys and the arguments are
 * the contract's (README "Many gateways: the Redis store"):
 *   KEYS[2i-1] = rlg:{CLIENT}:POLICY       the state hash of item i
 *   KEYS[2i]   = rlg:{CLIENT}:POLICY:log   its sliding log (a list), for
 *                                          a sliding_log item; for the
 *                                          others, which never touch it,
 *                                          KEYS[2i-1] again (see below)
 *   ARGV = now_ms ("" for Redis TIME), n, then per item: algorithm,
 *          limit, window_ms, burst, advisory
 * and the reply is an array of 1 + 5n integers: the now_ms used, then per
 * item admitted, limit, remaining, reset_ms, retry_ms. The reply is
 * checked strictly; anything else is a store failure.
 *
 * The hash tag {CLIENT} puts one client's keys in one slot, so the script
 * of a request whose policies all key on one client touches one slot.
 * Redis hashes what lies between the first '{' and the first '}' after
 * it; for one client that is the same prefix of every key, whatever the
 * key holds, unless it is empty (a client key that is empty or starts
 * with '}'): then Redis hashes whole keys, and the state and the log of
 * one client could land in two slots. Those are refused (RLG_EINVAL).
 * rlgate's own keys (IP addresses, IPv6 prefixes, "k:" and hex,
 * "unknown") never are. Policy names hold no ':' or '}' (config.c), so no
 * two (policy, client) pairs share a key.
 *
 * The script is loaded (SCRIPT LOAD) on every connect, which gives its
 * SHA1; a NOSCRIPT reply (SCRIPT FLUSH, a failover to a server that lacks
 * it) loads it again on that server and retries once.
 *
 * Distrust: every value of every reply is checked before it is used, and
 * anything else than what a Redis running this script can say is a
 * store failure, never a decision. The step's reply is an array of
 * exactly 1 + 5n integers; now_ms is a time the limiter can use (0 to
 * RLG_TIME_MS_MAX); per item, admitted is 0 or 1, limit is the policy's,
 * remaining, reset_ms and retry_ms lie within rlg_limiter_bounds (the
 * most the algorithms give for that policy at that now_ms, from any state
 * rlgate can have stored), retry_ms is 0 when admitted and reset_ms
 * equals retry_ms when rejected, as limiter.h promises. SCRIPT LOAD gives
 * 40 lowercase hex digits, the same for every load; PING says PONG, AUTH,
 * SELECT and ASKING say OK; CLUSTER SLOTS, MOVED and ASK name slots,
 * ports and host names (or addresses) that can be. No array of more than
 * RD_ARRAY_MAX elements is allocated and no reply of more than
 * RD_REPLY_BYTES_MAX bytes read; bytes beyond the replies a command asked
 * for (which the next command would take for its own) fail it too. Text from the server that goes into a
 * message (an error reply) is cut to 200 bytes, control bytes shown as
 * '?'.
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
 * has no timeout). hiredis is used to connect and to parse replies;
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
 *
 * Redis Cluster. The handle keeps a slot map (the master of each of the
 * 16384 slots, from CLUSTER SLOTS, asked of a node it knows or else of the
 * seed nodes of the url) and one connection per master, each opened when
 * a request first needs it and each with its own backoff and lost/back
 * log lines, as the single server's. The slot of a request is CRC16 of
 * its client's hash tag mod 16384. The map is read at open and again,
 * at most every RD_REFRESH_MIN_MS, before a request that follows a MOVED,
 * a CLUSTERDOWN or a failed server (a failover moves slots). Replies:
 *   MOVED slot host:port  the slot has moved: the map says so at once,
 *                         the command goes there; a full refresh follows.
 *   ASK slot host:port    the slot is being migrated and the keys are not
 *                         (or no longer) here: ASKING, then the command on
 *                         that node, once; the map is left as it is.
 *   NOSCRIPT              SCRIPT LOAD on that node, the command again once.
 *   TRYAGAIN              a migration holds some keys of the command on
 *                         each side: again after 5, 10, 20, 40, 80 ms,
 *                         then a store failure (the server is not lost).
 *   CLUSTERDOWN           once more (after a refresh), then a failure of
 *                         that server, with its backoff.
 * At most RD_REDIRECTS_MAX redirections per try, then a failure.
 * During a migration Redis serves a multi-key command only when the keys
 * are all on one side (else TRYAGAIN), and one on the importing side
 * after ASK only when they all exist or there is only one distinct key.
 * So an item that is not a sliding log names its state key twice instead
 * of its (never used, never existing) log key: a request of one policy
 * per client, the usual one, then has one distinct key and is served on
 * either side throughout a migration. Several policies of one client
 * whose keys only partly exist, and a sliding log's first request, get
 * TRYAGAIN (retried as above) while their slot moves.
 *
 * A request whose items lie in several slots (policies keyed by different
 * clients: one by address, one by API key) cannot be one script: Redis
 * runs a script on the keys of one slot only. Its items are split into
 * slot groups (each in item order; groups ordered by their first item)
 * and decided check-then-commit:
 *   1. check each group but the last: the group's items followed by a
 *      probe, two fixed_window items of limit 1 on the group's first
 *      state key, whose second always rejects (it sees the first's count
 *      of 1, or the same full state the first rejected on), so the script
 *      decides every item exactly as it would and writes nothing;
 *   2. if a check rejects, the last group is checked too and the request
 *      is rejected: nothing was written anywhere;
 *   3. else the last group is run for real: it is its own check; if it
 *      rejects, nothing was written anywhere;
 *   4. else the other groups are run for real, in order.
 * Each group is atomic; the request as a whole is not. A request refused
 * by any policy over its quota costs no quota anywhere (steps 2 and 3).
 * But the state can change between a group's check and its commit (other
 * requests of the same clients, on other gateways): if a group then
 * rejects in step 4, the request is rejected (the later groups are not
 * run), and the groups committed before it (the last one, and those
 * before it in order) have each counted it once. So across slots a
 * policy can count a request that another policy rejected, one per such
 * race: the counts stay exact for the requests admitted, and can run
 * ahead of them by the rejected requests that raced. A store failure in
 * step 4 likewise leaves the groups committed so far counted. A request
 * of one slot is one round trip; of G slots, G when rejected in step 2
 * or 3, else (admitted, or a race lost in step 4) up to 2G - 1.
 *
 * Per request nothing is allocated but hiredis' reply: the EVALSHA
 * arguments and the command's bytes are built in buffers of the handle,
 * which grow to the largest request seen (a refresh of the slot map
 * allocates).
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

/* Redis Cluster: its hash slots. */
#define RD_SLOTS 16384
/* MOVED and ASK followed for one command, at most. */
#define RD_REDIRECTS_MAX 5
/* TRYAGAIN: this many retries, the first after this wait, doubling. */
#define RD_TRYAGAIN_MAX 5
#define RD_TRYAGAIN_WAIT_MS 5
/* CLUSTERDOWN: retried this many times before the server counts as lost. */
#define RD_CLUSTERDOWN_MAX 1
/* The slot map is read again at most this often. */
#define RD_REFRESH_MIN_MS 100
/* Nodes asked for CLUSTER SLOTS in one refresh, at most. */
#define RD_REFRESH_TRIES 3
/* Nodes one handle knows, at most: a cluster has up to about 1000. */
#define RD_NODES_MAX 2048
/* The probe of a check (see the top): two items of fixed_window, limit 1. */
#define RD_PROBE_ITEMS 2
/*
 * The largest array a reply may hold (a step's: 1 + 5 x 34 items; CLUSTER
 * SLOTS: one entry per slot range, at most 16384), and the most bytes of
 * one command's replies (a slot map of 16384 ranges with replicas).
 */
#define RD_ARRAY_MAX 65536
#define RD_REPLY_BYTES_MAX (16 << 20)
/* Bytes read from the socket at once. */
#define RD_READ_CHUNK 16384
/* A server's text in a message: at most this many bytes, and a NUL. */
#define RD_SAID 201

/* The element count of hiredis' createArray: int before 1.0. */
#if HIREDIS_MAJOR >= 1
typedef size_t rd_nelem;
#else
typedef int rd_nelem;
#endif

/*
 * One Redis server: where it is, the connection to it, its health. The
 * single server of backend = redis, or a node of a cluster.
 */
struct rd_node {
	char *host;                   /* or NULL: socket; owned */
	int port;
	char *socket;                 /* unix socket path, or NULL; owned */
	bool seed;                    /* cluster: named by the url: kept */
	char name[320];               /* "redis HOST:PORT[/DB]", for messages */
	redisContext *c;              /* NULL while disconnected */
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
	char err[512];                /* why it is down: its last errmsg */
};

struct rd_store {
	struct rlg_store base;        /* first: rlg_store_* dispatch on it */
	/* How to talk to every server, copied from the config; owned. */
	char *user;                   /* ACL user, or NULL */
	char *password;               /* AUTH, or NULL; never logged */
	int db;                       /* SELECT when not 0 */
	int connect_timeout_ms;       /* all the connects of one step */
	int timeout_ms;               /* all the commands of one step */
	bool local_clock;             /* clock = local: pass the caller's now */
	char name[320];               /* "redis HOST:PORT[/DB]", the store */
	char sha[41];                 /* the script's SHA1 (SCRIPT LOAD); ""
	                                 until the first load */
	/*
	 * The budgets of the step (or open) under way, on the monotonic
	 * clock (see the top): its commands are done by deadline_ms, its
	 * connects may take connect_left_ms more. late: the last failure
	 * came before anything was sent to that server (out of time).
	 */
	int64_t deadline_ms;
	int64_t connect_left_ms;
	bool late;
	/* The bytes of the commands to send (RESP), grown, never shrunk. */
	char *out;
	size_t outlen;
	size_t outcap;

	/*
	 * The servers: the single one (nnodes == 1), or the cluster's known
	 * nodes, the seeds first. Grown on demand; a refresh of the slot
	 * map drops the nodes that are neither seeds nor in the map.
	 */
	bool cluster;
	struct rd_node *nodes;
	size_t nnodes;
	size_t capnodes;
	/*
	 * Cluster: the master of each slot, as an index in nodes plus one
	 * (0: unknown). map_loaded once a CLUSTER SLOTS was read; map_stale
	 * when it should be read again, not before refresh_at_ms.
	 */
	uint16_t *slots;
	bool map_loaded;
	bool map_stale;
	int64_t refresh_at_ms;
	char map_err[512];            /* why the last reading failed */

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
	/*
	 * Cluster, a step's slot groups: the slot of each item, the items in
	 * group order (order[gstart[g]..gstart[g + 1])), the slot of each
	 * group. Each array has itemcap entries (gstart one more).
	 */
	uint16_t *item_slot;
	size_t *order;
	size_t *gstart;
	uint16_t *gslot;
	size_t itemcap;
	/*
	 * Cluster, a step with charges for new keys (rd_cluster_step): the
	 * items sent, the index of each in the step, their decisions. ccap
	 * entries each.
	 */
	struct rlg_store_item *citems;
	size_t *cmap;
	struct rlg_decision *cdec;
	size_t ccap;

};

static int rd_open(const struct rlg_store_config *cfg,
    struct rlg_store **out);
static int rd_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static int rd_prune(struct rlg_store *base, int64_t now_ms,
    int64_t *deleted);
static void rd_close(struct rlg_store *base);

static void rd_budget(struct rd_store *s);
static int rd_check_items(struct rd_store *s,
    const struct rlg_store_item *items, size_t n, int64_t now_ms);
static size_t rd_node_add(struct rd_store *s, const char *host, int port,
    const char *socket);
static void rd_node_name(struct rd_store *s, struct rd_node *node);
static int rd_ready(struct rd_store *s, size_t ni);
static int rd_connect(struct rd_store *s, struct rd_node *node);
static int rd_command(struct rd_store *s, struct rd_node *node,
    const char *what, int argc, const char *const *argv,
    const size_t *argvlen, redisReply **out);
static int rd_command_ok(struct rd_store *s, struct rd_node *node,
    redisReply *reply, const char *what, const char *want);
static int rd_load_script(struct rd_store *s, struct rd_node *node);
static void rd_format(struct rd_store *s, int argc,
    const char *const *argv, const size_t *argvlen);
static int rd_exchange(struct rd_store *s, struct rd_node *node,
    const char *what, size_t nreplies, redisReply **replies);
static int rd_wait(struct rd_store *s, int fd, short events);
static void rd_timed_out(struct rd_store *s, const struct rd_node *node,
    const char *what);
static void *rd_create_array(const redisReadTask *task, rd_nelem elements);
static void rd_fn_setup(void);
static void rd_reader_init(void);
static const char *rd_said(const char *str, size_t len, char *buf);
static bool rd_host_ok(const char *host, size_t len);
static int rd_build(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, bool probe, int64_t now_ms);
static char *rd_put(char *at, const char *s, size_t len);
static int rd_decisions(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, const struct rlg_store_item *items,
    size_t nreply, const size_t *idx, size_t m,
    struct rlg_decision *decisions);
static int rd_field(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t k, const struct rlg_policy *p,
    int64_t lo, int64_t hi);
static bool rd_error_is(const redisReply *reply, const char *word);
static void rd_node_ok(struct rd_store *s, size_t ni);
static int rd_failed(struct rd_store *s, size_t ni);
static void rd_io_error(struct rd_store *s, const struct rd_node *node,
    const char *what);
static void rd_disconnect(struct rd_node *node);
static void rd_seterr(struct rd_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *rd_reply_type(int type);
static int64_t rd_mono_ms(void);
static struct timeval rd_tv(int ms);

static int rd_cluster_step(struct rd_store *s,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions);
static void rd_grow_charges(struct rd_store *s, size_t n);
static bool rd_skipped(const redisReply *const *e, size_t k,
    const struct rlg_policy *p);
static int rd_cluster_exists(struct rd_store *s,
    const struct rlg_store_item *item);
static int rd_cluster_groups(struct rd_store *s,
    const struct rlg_store_item *items, size_t n, int64_t now_ms,
    struct rlg_decision *decisions);
static size_t rd_group(struct rd_store *s, const struct rlg_store_item *items,
    size_t n);
static int rd_group_run(struct rd_store *s,
    const struct rlg_store_item *items, size_t g, bool probe,
    int64_t now_ms, struct rlg_decision *decisions, bool *admitted);
static int rd_cluster_exec(struct rd_store *s, unsigned slot, int argc,
    redisReply **out, size_t *nodep);
static redisReply *rd_exec_on(struct rd_store *s, size_t ni, bool asking,
    int argc);
static int rd_redirect(struct rd_store *s, size_t ni,
    const redisReply *reply, unsigned want, unsigned *slotp,
    size_t *target);
static int rd_map_ready(struct rd_store *s);
static int rd_refresh(struct rd_store *s);
static int rd_slots_apply(struct rd_store *s, size_t ni,
    const redisReply *reply);
static void rd_compact(struct rd_store *s);
static unsigned rd_slot(const char *client);
static void rd_sleep_ms(int64_t ms);

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

const struct rlg_store_ops rlg_store_redis_ops = {
	.name = "redis",
	.open = rd_open,
	.step = rd_step,
	.prune = rd_prune,
	.close = rd_close,
};

static int
rd_open(const struct rlg_store_config *cfg, struct rlg_store **out)
{
	struct rlg_store_config named;
	struct rd_store *s;
	size_t i, ni;

	assert(cfg != NULL && out != NULL);
	s = rlg_xcalloc(1, sizeof *s);
	s->base.ops = &rlg_store_redis_ops;
	s->user = cfg->redis.user != NULL ? rlg_xstrdup(cfg->redis.user) :
	    NULL;
	s->password = cfg->redis.password != NULL ?
	    rlg_xstrdup(cfg->redis.password) : NULL;
	s->db = cfg->redis.db;
	s->connect_timeout_ms = cfg->redis.connect_timeout_ms > 0 ?
	    cfg->redis.connect_timeout_ms : RLG_DEFAULT_REDIS_TIMEOUT_MS;
	s->timeout_ms = cfg->redis.timeout_ms > 0 ? cfg->redis.timeout_ms :
	    RLG_DEFAULT_REDIS_TIMEOUT_MS;
	s->local_clock = cfg->redis.clock == RLG_CLOCK_LOCAL;
	s->cluster = cfg->redis.cluster;
	/* Named as Redis even when opened directly, whatever cfg->backend. */
	named = *cfg;
	named.backend = RLG_BACKEND_REDIS;
	rlg_store_describe(&named, s->name, sizeof s->name);
	snprintf(s->base.errmsg, sizeof s->base.errmsg, "no error");
	*out = &s->base;
	rd_budget(s);
	if (cfg->redis.host == NULL && cfg->redis.socket == NULL) {
		rd_seterr(s, "redis: no [store] url configured");
		return RLG_ESTORE;
	}
	if (!s->cluster) {
		if (cfg->redis.nseeds > 0) {
			rd_seterr(s, "%s: several servers in [store] url need"
			    " backend = redis_cluster", s->name);
			return RLG_ESTORE;
		}
		(void)rd_node_add(s, cfg->redis.host, cfg->redis.port,
		    cfg->redis.socket);
		if (rd_connect(s, &s->nodes[0]) != 0)
			return rd_failed(s, 0);
		return RLG_OK;
	}

	if (cfg->redis.socket != NULL || s->db != 0) {
		rd_seterr(s, "%s: a Redis Cluster is reached over TCP, in"
		    " database 0", s->name);
		return RLG_ESTORE;
	}
	s->slots = rlg_xcalloc(RD_SLOTS, sizeof *s->slots);
	for (i = 0; i <= cfg->redis.nseeds; i++) {
		ni = rd_node_add(s, i == 0 ? cfg->redis.host :
		    cfg->redis.seeds[i - 1].host, i == 0 ? cfg->redis.port :
		    cfg->redis.seeds[i - 1].port, NULL);
		s->nodes[ni].seed = true;
	}
	return rd_map_ready(s) == 0 ? RLG_OK : RLG_ESTORE;
}

static int
rd_step(struct rlg_store *base, const struct rlg_store_item *items, size_t n,
    int64_t now_ms, struct rlg_decision *decisions)
{
	struct rd_store *s = (struct rd_store *)base;
	redisReply *reply;
	int argc, rc;

	if ((rc = rd_check_items(s, items, n, now_ms)) != RLG_OK)
		return rc;
	if (s->nnodes == 0)
		return RLG_ESTORE;      /* no url: errmsg says so since open */
	rd_budget(s);
	if (s->cluster)
		return rd_cluster_step(s, items, n, now_ms, decisions);
	if (rd_ready(s, 0) != 0)
		return RLG_ESTORE;
	argc = rd_build(s, items, NULL, n, false, now_ms);
	reply = rd_exec_on(s, 0, false, argc);
	if (reply != NULL && rd_error_is(reply, "NOSCRIPT")) {
		/* Flushed or failed over: load it again, retry once. */
		freeReplyObject(reply);
		if (rd_load_script(s, &s->nodes[0]) != 0)
			return rd_failed(s, 0);
		reply = rd_exec_on(s, 0, false, argc);
	}
	if (reply == NULL)
		return rd_failed(s, 0);
	rc = rd_decisions(s, &s->nodes[0], reply, items, n, NULL, n,
	    decisions);
	freeReplyObject(reply);
	if (rc != 0)
		return rd_failed(s, 0);
	rd_node_ok(s, 0);
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

static void
rd_close(struct rlg_store *base)
{
	struct rd_store *s = (struct rd_store *)base;
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->nnodes; i++) {
		rd_disconnect(&s->nodes[i]);
		free(s->nodes[i].host);
		free(s->nodes[i].socket);
	}
	free(s->nodes);
	free(s->slots);
	free(s->user);
	if (s->password != NULL) {
		explicit_bzero(s->password, strlen(s->password));
		free(s->password);
	}
	free(s->argv);
	free(s->argvlen);
	free(s->text);
	free(s->out);
	free(s->item_slot);
	free(s->order);
	free(s->gstart);
	free(s->gslot);
	free(s->citems);
	free(s->cmap);
	free(s->cdec);
	free(s);
}

/*
 * A step (or an open) begins: timeout_ms for its commands, from now, and
 * connect_timeout_ms for its connects (see the top).
 */
static void
rd_budget(struct rd_store *s)
{
	s->deadline_ms = rd_mono_ms() + s->timeout_ms;
	s->connect_left_ms = s->connect_timeout_ms;
	s->late = false;
}

/*
 * Refuses (rlg_store_step has checked what every store refuses) a client
 * key that would leave the hash tag empty. Each policy goes
 * through the pure limiter once on an empty state, so a policy it would
 * refuse is refused here as the SQLite store refuses it, before Redis.
 */
static int
rd_check_items(struct rd_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms)
{
	const struct rlg_policy *p;
	struct rlg_state zero, out;
	struct rlg_decision d;
	bool append;
	size_t i;
	int rc;

	memset(&zero, 0, sizeof zero);
	for (i = 0; i < n; i++) {
		p = items[i].policy;
		if (items[i].client[0] == '\0' || items[i].client[0] == '}') {
			rd_seterr(s, "store step: client key \"%s\" would"
			    " leave the Redis hash tag {...} empty",
			    items[i].client);
			return RLG_EINVAL;
		}
		if (p->lim.algorithm == RLG_ALG_SLIDING_LOG)
			rc = rlg_limiter_sliding_log(&p->lim, NULL, 0, now_ms,
			    &append, &out, &d);
		else
			rc = rlg_limiter_step(&p->lim, &zero, now_ms, &out, &d);
		if (rc != RLG_OK) {
			rd_seterr(s, "store step: the limiter refused policy"
			    " \"%s\" (%s, limit %lld, window %lld ms, burst"
			    " %lld)", p->name,
			    rlg_algorithm_name(p->lim.algorithm) != NULL ?
			    rlg_algorithm_name(p->lim.algorithm) :
			    "unknown algorithm", (long long)p->lim.limit,
			    (long long)p->lim.window_ms,
			    (long long)p->lim.burst);
			return RLG_EINVAL;
		}
	}
	return RLG_OK;
}

/*
 * The index of the node at host:port (or socket), added if new (not
 * connected). Indices stay valid until the next rd_compact; pointers
 * into nodes only until the next add.
 */
static size_t
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
 * allows. 0, or -1 (errmsg set; a failed connect extends the backoff).
 */
static int
rd_ready(struct rd_store *s, size_t ni)
{
	struct rd_node *node = &s->nodes[ni];
	int64_t now;

	if (node->c != NULL)
		return 0;
	now = rd_mono_ms();
	if (now < node->retry_at_ms) {
		/* Its own cause: the last errmsg may be another's. */
		rd_seterr(s, "%s", node->err);
		return -1;
	}
	if (rd_connect(s, node) != 0) {
		(void)rd_failed(s, ni);
		return -1;
	}
	return 0;
}

/*
 * Connects within what is left of the connect budget (the time it takes
 * is added to the command deadline, see the top), then PING or AUTH,
 * SELECT and loads the script by the command deadline. 0, or -1 with
 * errmsg set and no connection.
 */
static int
rd_connect(struct rd_store *s, struct rd_node *node)
{
	const char *argv[3];
	size_t argvlen[3];
	redisReply *reply;
	char db[RD_NUM];
	int64_t t0, took;
	int argc;

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
			goto fail;
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
			goto fail;
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
			goto fail;
	}
	if (rd_load_script(s, node) != 0)
		goto fail;
	return 0;

fail:
	rd_disconnect(node);
	return -1;
}

/*
 * One command (argv, argvlen: argc arguments) to node, its reply into
 * *out by the step's deadline. 0, or -1 (errmsg; *out untouched).
 */
static int
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
 * SCRIPT LOAD: the SHA1 into s->sha: 40 lowercase hex digits (no NUL
 * among them), and the same as every load before (the text is the same:
 * another SHA1 is not the script rlgate sent). 0, or -1 (errmsg).
 */
static int
rd_load_script(struct rd_store *s, struct rd_node *node)
{
	static const char *const argv[3] = { "SCRIPT", "LOAD",
	    rlg_redis_script_lua };
	size_t argvlen[3] = { 6, 4, strlen(rlg_redis_script_lua) };
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
	} else if (s->sha[0] != '\0' && memcmp(s->sha, reply->str, 40) != 0) {
		rd_seterr(s, "%s: SCRIPT LOAD: SHA1 %.40s, but %s before: not"
		    " the script rlgate sent", node->name, reply->str, s->sha);
	} else {
		memcpy(s->sha, reply->str, 40);
		s->sha[40] = '\0';
		rc = 0;
	}
	freeReplyObject(reply);
	return rc;
}

/*
 * Appends the command argv[0..argc) to s->out in RESP (an array of bulk
 * strings), growing it if needed.
 */
static void
rd_format(struct rd_store *s, int argc, const char *const *argv,
    const size_t *argvlen)
{
	size_t need = RD_NUM + 3, i;
	char *grown;
	int len;

	for (i = 0; i < (size_t)argc; i++)
		need += RD_NUM + 5 + argvlen[i];
	if (s->outlen + need > s->outcap) {
		s->outcap = s->outlen + need;
		grown = rlg_xmalloc(s->outcap);
		if (s->outlen > 0)
			memcpy(grown, s->out, s->outlen);
		free(s->out);
		s->out = grown;
	}
	len = snprintf(s->out + s->outlen, RD_NUM + 3, "*%d\r\n", argc);
	s->outlen += (size_t)len;
	for (i = 0; i < (size_t)argc; i++) {
		len = snprintf(s->out + s->outlen, RD_NUM + 3, "$%zu\r\n",
		    argvlen[i]);
		s->outlen += (size_t)len;
		memcpy(s->out + s->outlen, argv[i], argvlen[i]);
		s->outlen += argvlen[i];
		memcpy(s->out + s->outlen, "\r\n", 2);
		s->outlen += 2;
	}
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
	char buf[RD_READ_CHUNK];
	size_t off = 0, got = 0, bytes = 0;
	ssize_t n;
	void *r;
	int fd = node->c->fd, w;

	s->late = false;
	rd_refused_array = 0;
	if (rd_mono_ms() >= s->deadline_ms) {
		rd_timed_out(s, node, what);
		s->late = true;
		return -1;
	}
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
			goto io;
		if ((w = rd_wait(s, fd, POLLOUT)) != 0)
			goto waited;
	}
	while (got < nreplies) {
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
			goto fail;
		}
		if (r != NULL) {
			replies[got++] = r;
			continue;
		}
		if ((w = rd_wait(s, fd, POLLIN)) != 0)
			goto waited;
		n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n == 0) {
			rd_seterr(s, "%s: %s: the server closed the connection",
			    node->name, what);
			goto fail;
		}
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == EWOULDBLOCK)
				continue;
			goto io;
		}
		bytes += (size_t)n;
		if (bytes > RD_REPLY_BYTES_MAX) {
			rd_seterr(s, "%s: %s: the reply is larger than %d MiB",
			    node->name, what, RD_REPLY_BYTES_MAX >> 20);
			goto fail;
		}
		if (redisReaderFeed(reader, buf, (size_t)n) != REDIS_OK) {
			rd_seterr(s, "%s: %s: a reply rlgate cannot read: %s",
			    node->name, what, reader->errstr);
			goto fail;
		}
	}
	/* More than was asked for: the next command would read it. */
	if (reader->pos < reader->len) {
		rd_seterr(s, "%s: %s: %zu bytes more than %zu repl%s",
		    node->name, what, reader->len - reader->pos, nreplies,
		    nreplies == 1 ? "y" : "ies");
		goto fail;
	}
	return 0;

waited:
	if (w > 0) {
		rd_timed_out(s, node, what);
		goto fail;
	}
io:
	rd_seterr(s, "%s: %s: %s", node->name, what, errno == EPIPE ||
	    errno == ECONNRESET ? "the server closed the connection" :
	    strerror(errno));
fail:
	while (got > 0)
		freeReplyObject(replies[--got]);
	return -1;
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

/*
 * A server's text for a message: at most RD_SAID - 1 bytes of str, each
 * byte outside printable ASCII shown as '?'. Returns buf.
 */
static const char *
rd_said(const char *str, size_t len, char *buf)
{
	size_t i;

	if (len > RD_SAID - 1)
		len = RD_SAID - 1;
	for (i = 0; i < len; i++) {
		buf[i] = str[i];
		if (str[i] < 0x20 || str[i] >= 0x7f)
			buf[i] = '?';
	}
	buf[len] = '\0';
	return buf;
}

/*
 * A host a server may name (CLUSTER SLOTS, MOVED, ASK): 1 to 255 bytes of
 * a name or an address, IPv6 included (':', and '%' for a zone).
 */
static bool
rd_host_ok(const char *host, size_t len)
{
	size_t i;

	if (len == 0 || len > 255)
		return false;
	for (i = 0; i < len; i++)
		if (!((host[i] >= 'a' && host[i] <= 'z') ||
		    (host[i] >= 'A' && host[i] <= 'Z') ||
		    (host[i] >= '0' && host[i] <= '9') || host[i] == '.' ||
		    host[i] == '-' || host[i] == '_' || host[i] == ':' ||
		    host[i] == '%'))
			return false;
	return true;
}

/*
 * EVALSHA sha 2n KEYS... now n ARGS... into s->argv for the items
 * idx[0..m) (idx NULL: items[0..m)), and with probe the two items of a
 * check (see the top) after them, growing the buffers if this request is
 * the largest yet. Returns argc.
 */
static int
rd_build(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, bool probe, int64_t now_ms)
{
	static const char *const probe_args[RD_PER_ITEM] = { "0", "1",
	    "1000", "0", "0" };
	size_t n = m + (probe ? RD_PROBE_ITEMS : 0);
	size_t argc = 5 + 7 * n, need = (size_t)3 * RD_NUM, i, k, a, len;
	const struct rlg_store_item *it;
	const struct rlg_policy *p;
	char *at;
	int64_t v[RD_PER_ITEM];

	/* "rlg:{" C "}:" P, and the same with ":log", each NUL-ended. */
	for (i = 0; i < m; i++) {
		it = &items[idx != NULL ? idx[i] : i];
		need += 2 * (strlen(it->client) + strlen(it->policy->name) +
		    8) + 4 + (size_t)RD_PER_ITEM * RD_NUM;
	}
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
	for (i = 0, a = 3; i < m; i++) {
		it = &items[idx != NULL ? idx[i] : i];
		s->argv[a] = at;
		at = rd_put(at, "rlg:{", 5);
		at = rd_put(at, it->client, strlen(it->client));
		at = rd_put(at, "}:", 2);
		at = rd_put(at, it->policy->name, strlen(it->policy->name));
		s->argvlen[a] = (size_t)(at - s->argv[a]);
		*at++ = '\0';
		a++;
		if (it->policy->lim.algorithm != RLG_ALG_SLIDING_LOG) {
			/* Unused: the state key again (see the top). */
			s->argv[a] = s->argv[a - 1];
			s->argvlen[a] = s->argvlen[a - 1];
			a++;
			continue;
		}
		s->argv[a] = at;
		at = rd_put(at, s->argv[a - 1], s->argvlen[a - 1]);
		at = rd_put(at, ":log", 4);
		s->argvlen[a] = (size_t)(at - s->argv[a]);
		*at++ = '\0';
		a++;
	}
	for (i = m; i < n; i++) {
		/* The probe: the first state key, four times. */
		for (k = 0; k < 2; k++, a++) {
			s->argv[a] = s->argv[3];
			s->argvlen[a] = s->argvlen[3];
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
	for (i = 0; i < m; i++) {
		it = &items[idx != NULL ? idx[i] : i];
		p = it->policy;
		v[0] = (int64_t)p->lim.algorithm;
		v[1] = p->lim.limit;
		v[2] = p->lim.window_ms;
		v[3] = p->lim.burst;
		/* flags: 1 advisory, 2 a charge for a new key */
		v[4] = (it->advisory ? 1 : 0) | (it->if_new ? 2 : 0);
		for (k = 0; k < RD_PER_ITEM; k++, a++) {
			s->argv[a] = at;
			s->argvlen[a] = (size_t)snprintf(at, RD_NUM, "%lld",
			    (long long)v[k]);
			at += s->argvlen[a] + 1;
		}
	}
	for (i = m; i < n; i++) {
		for (k = 0; k < RD_PER_ITEM; k++, a++) {
			s->argv[a] = probe_args[k];
			s->argvlen[a] = strlen(probe_args[k]);
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
 * The script's reply from node, for nreply items (items[idx[j]] for the
 * first m, idx NULL: items[j]; then the probe's), into decisions: the
 * first m reply items go to decisions[idx[j]] (idx NULL: decisions[j]).
 * Every value is checked (see the top) before any is used. 0, or -1
 * (errmsg names the element, its field, its value and the range).
 */
static int
rd_decisions(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, const struct rlg_store_item *items,
    size_t nreply, const size_t *idx, size_t m,
    struct rlg_decision *decisions)
{
	/* The probe's items: fixed_window, limit 1 (rd_build). */
	static const struct rlg_policy probe = { .name = (char *)"probe",
	    .lim = { .algorithm = RLG_ALG_FIXED_WINDOW, .limit = 1,
	    .window_ms = 1000 } };
	const redisReply *const *e;
	const struct rlg_store_item *it;
	const struct rlg_policy *p;
	struct rlg_limiter_bounds b;
	struct rlg_decision *d;
	char got[48], said[RD_SAID];
	size_t i, k;
	int64_t now;

	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: EVALSHA failed: %s%s", node->name,
		    rd_said(reply->str, reply->len, said),
		    !s->cluster && (rd_error_is(reply, "MOVED") ||
		    rd_error_is(reply, "ASK")) ? " (a Redis Cluster node:"
		    " set [store] backend = redis_cluster)" : "");
		return -1;
	}
	if (reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != 1 + RD_PER_ITEM * nreply) {
		if (reply->type == REDIS_REPLY_ARRAY)
			snprintf(got, sizeof got, "an array of %zu",
			    reply->elements);
		else
			snprintf(got, sizeof got, "%s",
			    rd_reply_type(reply->type));
		rd_seterr(s, "%s: EVALSHA: unexpected reply: %s, not an"
		    " array of %zu integers (is db/redis/step.lua the"
		    " script of this rlgate?)", node->name, got,
		    1 + RD_PER_ITEM * nreply);
		return -1;
	}
	e = (const redisReply *const *)reply->element;
	if (rd_field(s, node, e, 0, NULL, 0, RLG_TIME_MS_MAX) != 0)
		return -1;
	now = e[0]->integer;
	for (i = 0; i < nreply; i++) {
		it = i < m ? &items[idx != NULL ? idx[i] : i] : NULL;
		p = it != NULL ? it->policy : &probe;
		if (rlg_limiter_bounds(&p->lim, now, &b) != RLG_OK) {
			/* rd_check_items let only good policies through. */
			rd_seterr(s, "%s: EVALSHA: item %zu: no bounds for its"
			    " policy", node->name, i);
			return -1;
		}
		k = 1 + RD_PER_ITEM * i;
		if (rd_field(s, node, e, k, p, 0, 1) != 0)
			return -1;
		/* A charge for a new key that did not apply: skipped. */
		if (it != NULL && it->if_new && e[k]->integer == 1 &&
		    rd_skipped(e, k, p))
			continue;
		if (e[k]->integer == 1) {
			if (rd_field(s, node, e, k + 1, p, p->lim.limit,
			    p->lim.limit) != 0 ||
			    rd_field(s, node, e, k + 2, p, 0,
			    b.remaining_max) != 0 ||
			    rd_field(s, node, e, k + 3, p, 1,
			    b.delay_max) != 0 ||
			    rd_field(s, node, e, k + 4, p, 0, 0) != 0)
				return -1;
			continue;
		}
		/* Rejected: reset_ms is retry_ms (limiter.h). */
		if (rd_field(s, node, e, k + 1, p, p->lim.limit,
		    p->lim.limit) != 0 ||
		    rd_field(s, node, e, k + 2, p, 0, 0) != 0 ||
		    rd_field(s, node, e, k + 4, p, 1, b.delay_max) != 0 ||
		    rd_field(s, node, e, k + 3, p, e[k + 4]->integer,
		    e[k + 4]->integer) != 0)
			return -1;
	}
	for (i = 0; i < m; i++) {
		d = &decisions[idx != NULL ? idx[i] : i];
		k = 1 + RD_PER_ITEM * i;
		d->admitted = e[k]->integer == 1;
		d->limit = e[k + 1]->integer;
		d->remaining = e[k + 2]->integer;
		d->reset_ms = e[k + 3]->integer;
		d->retry_ms = e[k + 4]->integer;
	}
	return 0;
}

/*
 * Whether the reply of an item from element k (admitted) is exactly what
 * the script answers for a skipped charge (rlg_store_skipped): limit and
 * remaining the policy's limit, reset_ms and retry_ms 0.
 */
static bool
rd_skipped(const redisReply *const *e, size_t k, const struct rlg_policy *p)
{
	size_t f;

	for (f = 1; f < RD_PER_ITEM; f++)
		if (e[k + f]->type != REDIS_REPLY_INTEGER)
			return false;
	return e[k + 1]->integer == p->lim.limit &&
	    e[k + 2]->integer == p->lim.limit &&
	    e[k + 3]->integer == 0 && e[k + 4]->integer == 0;
}

/*
 * Element k of the step's reply e, a field of item (k - 1) / 5 of policy
 * p (now_ms when k is 0), must be an integer from lo to hi. Only a value
 * that is not costs a message. 0, or -1 (errmsg: the element, the field,
 * the value and the range).
 */
static int
rd_field(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t k, const struct rlg_policy *p,
    int64_t lo, int64_t hi)
{
	static const char *const fields[RD_PER_ITEM] = { "admitted", "limit",
	    "remaining", "reset_ms", "retry_ms" };
	size_t item = (k - 1) / RD_PER_ITEM, f = (k - 1) % RD_PER_ITEM;
	char what[200], range[64];

	if (e[k]->type == REDIS_REPLY_INTEGER && e[k]->integer >= lo &&
	    e[k]->integer <= hi)
		return 0;
	if (k == 0)
		snprintf(what, sizeof what, "now_ms");
	else
		snprintf(what, sizeof what, "%s of item %zu (policy \"%.64s\"%s)",
		    fields[f], item, p->name, f == 0 ? "" :
		    e[k - f]->integer == 1 ? ", admitted" : ", rejected");
	if (e[k]->type != REDIS_REPLY_INTEGER) {
		rd_seterr(s, "%s: EVALSHA: unexpected reply: element %zu is"
		    " %s, not an integer: %s", node->name, k,
		    rd_reply_type(e[k]->type), what);
		return -1;
	}
	if (lo == hi)
		snprintf(range, sizeof range, "%lld", (long long)lo);
	else
		snprintf(range, sizeof range, "%lld to %lld", (long long)lo,
		    (long long)hi);
	rd_seterr(s, "%s: EVALSHA: unexpected reply: element %zu is out of"
	    " range (%lld): %s must be %s", node->name, k,
	    (long long)e[k]->integer, what, range);
	return -1;
}

/* An error reply whose first word is word ("MOVED", "NOSCRIPT"). */
static bool
rd_error_is(const redisReply *reply, const char *word)
{
	size_t len = strlen(word);

	return reply->type == REDIS_REPLY_ERROR && reply->len >= len &&
	    strncmp(reply->str, word, len) == 0 &&
	    (reply->str[len] == ' ' || reply->str[len] == '\0');
}

/* Node ni answered a step: healthy again, and said so once. */
static void
rd_node_ok(struct rd_store *s, size_t ni)
{
	struct rd_node *node = &s->nodes[ni];

	if (node->down)
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
static int
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
		rlg_log("store lost: %s (reconnecting after %d ms, then"
		    " backing off up to %d s)", s->base.errmsg, RD_BACKOFF_MIN_MS,
		    RD_BACKOFF_MAX_MS / 1000);
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

static void
rd_disconnect(struct rd_node *node)
{
	if (node->c != NULL) {
		redisFree(node->c);
		node->c = NULL;
	}
}

static void
rd_seterr(struct rd_store *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->base.errmsg, sizeof s->base.errmsg, fmt, ap);
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

/* ---- Redis Cluster ------------------------------------------------------ */

/*
 * A step on a cluster. A charge for a new key (if_new) goes to the script
 * of its key when both share a slot; when they do not, the script of the
 * charge cannot see the key's state, so the key is looked at first
 * (EXISTS on its state key, which expires with its state, rounded up to
 * the second): a key that exists is not new, and the charge is decided
 * skipped here and not sent; else it is sent as a plain item. Like the
 * rest of a request across slots this is not atomic: a key that appears
 * or expires in between is charged or not by that one request.
 */
static int
rd_cluster_step(struct rd_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	size_t i, m = 0;
	int exists, rc;

	for (i = 1; i < n && !items[i].if_new; i++)
		;
	if (i == n)
		return rd_cluster_groups(s, items, n, now_ms, decisions);
	rd_grow_charges(s, n);
	for (i = 0; i < n; i++) {
		s->citems[m] = items[i];
		s->cmap[m] = i;
		if (items[i].if_new &&
		    rd_slot(items[i].client) != rd_slot(items[i - 1].client)) {
			if ((exists = rd_cluster_exists(s, &items[i - 1])) < 0)
				return RLG_ESTORE;
			if (exists) {
				rlg_store_skipped(items[i].policy,
				    &decisions[i]);
				continue;
			}
			s->citems[m].if_new = false;
		}
		m++;
	}
	rc = rd_cluster_groups(s, s->citems, m, now_ms, s->cdec);
	for (i = 0; rc == RLG_OK && i < m; i++)
		decisions[s->cmap[i]] = s->cdec[i];
	return rc;
}

/* Makes room for n items in the charge scratch of the handle. */
static void
rd_grow_charges(struct rd_store *s, size_t n)
{
	if (n <= s->ccap)
		return;
	free(s->citems);
	free(s->cmap);
	free(s->cdec);
	s->ccap = n;
	s->citems = rlg_xcalloc(n, sizeof *s->citems);
	s->cmap = rlg_xcalloc(n, sizeof *s->cmap);
	s->cdec = rlg_xcalloc(n, sizeof *s->cdec);
}

/*
 * Whether item's state key exists, asked of its slot's master: 1, 0, or
 * -1 (errmsg; the store failed).
 */
static int
rd_cluster_exists(struct rd_store *s, const struct rlg_store_item *item)
{
	size_t need, ni;
	redisReply *reply;
	char *at;
	int rc = -1;

	need = strlen(item->client) + strlen(item->policy->name) + 8;
	if (s->argcap < 2) {
		free(s->argv);
		free(s->argvlen);
		s->argcap = 2;
		s->argv = rlg_xcalloc(2, sizeof *s->argv);
		s->argvlen = rlg_xcalloc(2, sizeof *s->argvlen);
	}
	if (need > s->textcap) {
		free(s->text);
		s->textcap = need;
		s->text = rlg_xmalloc(need);
	}
	at = s->text;
	at = rd_put(at, "rlg:{", 5);
	at = rd_put(at, item->client, strlen(item->client));
	at = rd_put(at, "}:", 2);
	at = rd_put(at, item->policy->name, strlen(item->policy->name));
	s->argv[0] = "EXISTS";
	s->argvlen[0] = 6;
	s->argv[1] = s->text;
	s->argvlen[1] = (size_t)(at - s->text);
	if (rd_cluster_exec(s, rd_slot(item->client), 2, &reply, &ni) != 0)
		return -1;
	if (reply->type == REDIS_REPLY_INTEGER &&
	    (reply->integer == 0 || reply->integer == 1)) {
		rc = (int)reply->integer;
		rd_node_ok(s, ni);
	} else {
		rd_seterr(s, "%s: EXISTS: unexpected reply (%s)",
		    s->nodes[ni].name, rd_reply_type(reply->type));
		(void)rd_failed(s, ni);
	}
	freeReplyObject(reply);
	return rc;
}

/*
 * The items of a step on a cluster: one script per slot group,
 * check-then-commit when there are several (see the top).
 */
static int
rd_cluster_groups(struct rd_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	size_t ng, g;
	bool admitted, rejected = false;

	ng = rd_group(s, items, n);
	if (ng == 1)
		return rd_group_run(s, items, 0, false, now_ms, decisions,
		    &admitted) == 0 ? RLG_OK : RLG_ESTORE;
	/* 1. Check every group but the last. */
	for (g = 0; g + 1 < ng; g++) {
		if (rd_group_run(s, items, g, true, now_ms, decisions,
		    &admitted) != 0)
			return RLG_ESTORE;
		rejected = rejected || !admitted;
	}
	/* 2. Rejected: the last group's decisions too; nothing written. */
	if (rejected)
		return rd_group_run(s, items, ng - 1, true, now_ms, decisions,
		    &admitted) == 0 ? RLG_OK : RLG_ESTORE;
	/* 3. The last group for real: its own check. */
	if (rd_group_run(s, items, ng - 1, false, now_ms, decisions,
	    &admitted) != 0)
		return RLG_ESTORE;
	if (!admitted)
		return RLG_OK;
	/* 4. The others for real; one that rejects now lost a race. */
	for (g = 0; g + 1 < ng; g++) {
		if (rd_group_run(s, items, g, false, now_ms, decisions,
		    &admitted) != 0)
			return RLG_ESTORE;
		if (!admitted)
			break;
	}
	return RLG_OK;
}

/*
 * Splits items[0..n) into slot groups (s->order, s->gstart, s->gslot):
 * each group in item order, the groups in the order of their first item.
 * Returns the number of groups.
 */
static size_t
rd_group(struct rd_store *s, const struct rlg_store_item *items, size_t n)
{
	size_t i, g, ng = 0, *at;

	if (n > s->itemcap) {
		free(s->item_slot);
		free(s->order);
		free(s->gstart);
		free(s->gslot);
		s->itemcap = n;
		s->item_slot = rlg_xcalloc(n, sizeof *s->item_slot);
		s->order = rlg_xcalloc(n, sizeof *s->order);
		s->gstart = rlg_xcalloc(n + 1, sizeof *s->gstart);
		s->gslot = rlg_xcalloc(n, sizeof *s->gslot);
	}
	for (i = 0; i < n; i++) {
		s->item_slot[i] = (uint16_t)rd_slot(items[i].client);
		for (g = 0; g < ng && s->gslot[g] != s->item_slot[i]; g++)
			;
		if (g == ng) {
			s->gslot[ng] = s->item_slot[i];
			s->gstart[ng++] = 0;
		}
		s->gstart[g]++;        /* for now: the size of group g */
	}
	/* Sizes to starts, then each item at its group's next place. */
	for (g = 0, i = 0; g < ng; g++) {
		i += s->gstart[g];
		s->gstart[g] = i - s->gstart[g];
	}
	s->gstart[ng] = n;
	at = s->order;
	for (g = 0; g < ng; g++)
		for (i = 0; i < n; i++)
			if (s->item_slot[i] == s->gslot[g])
				*at++ = i;
	return ng;
}

/*
 * Runs group g's script, a check (probe) or for real, on the master of
 * its slot; its decisions into decisions, and in *admitted whether every
 * non-advisory item of the group admits (for real: whether it wrote).
 * 0, or -1 (errmsg).
 */
static int
rd_group_run(struct rd_store *s, const struct rlg_store_item *items,
    size_t g, bool probe, int64_t now_ms, struct rlg_decision *decisions,
    bool *admitted)
{
	const size_t *idx = s->order + s->gstart[g];
	size_t m = s->gstart[g + 1] - s->gstart[g], ni, j;
	redisReply *reply;
	int argc, rc;

	argc = rd_build(s, items, idx, m, probe, now_ms);
	if (rd_cluster_exec(s, s->gslot[g], argc, &reply, &ni) != 0)
		return -1;
	rc = rd_decisions(s, &s->nodes[ni], reply, items, m + (probe ?
	    RD_PROBE_ITEMS : 0), idx, m, decisions);
	freeReplyObject(reply);
	if (rc != 0) {
		(void)rd_failed(s, ni);
		return -1;
	}
	rd_node_ok(s, ni);
	*admitted = true;
	for (j = 0; j < m; j++)
		if (!decisions[idx[j]].admitted && !items[idx[j]].advisory)
			*admitted = false;
	return 0;
}

/*
 * The command in s->argv (argc) on the master of slot, following MOVED
 * and ASK, reloading the script after NOSCRIPT, retrying TRYAGAIN and
 * CLUSTERDOWN, as the top says. 0 with the reply (*out, the caller frees;
 * an error reply other than those is the caller's to report) and the
 * node that gave it; or -1 (errmsg set).
 */
static int
rd_cluster_exec(struct rd_store *s, unsigned slot, int argc,
    redisReply **out, size_t *nodep)
{
	int redirects = 0, tryagain = 0, down = 0;
	bool asking = false, reloaded = false, late;
	char said[RD_SAID], how[64];
	redisReply *reply;
	unsigned rslot;
	size_t ni, target;
	int64_t wait;

	if (rd_map_ready(s) != 0)
		return -1;
	ni = (size_t)s->slots[slot] - 1;
	for (;;) {
		if (s->slots[slot] == 0 && !asking) {
			rd_seterr(s, "%s: no master serves slot %u (CLUSTER"
			    " SLOTS)", s->name, slot);
			s->map_stale = true;
			return -1;
		}
		if (rd_ready(s, ni) != 0)
			return -1;
		reply = rd_exec_on(s, ni, asking, argc);
		if (reply == NULL) {
			(void)rd_failed(s, ni);
			return -1;
		}
		if (reply->type != REDIS_REPLY_ERROR) {
			*out = reply;
			*nodep = ni;
			return 0;
		}
		if (rd_error_is(reply, "NOSCRIPT") && !reloaded) {
			freeReplyObject(reply);
			reloaded = true;
			if (rd_load_script(s, &s->nodes[ni]) != 0) {
				(void)rd_failed(s, ni);
				return -1;
			}
			continue;
		}
		if (rd_error_is(reply, "MOVED") || rd_error_is(reply, "ASK")) {
			if (++redirects > RD_REDIRECTS_MAX) {
				rd_seterr(s, "%s: EVALSHA: more than %d"
				    " redirections for slot %u (the last: "
				    "%s)", s->nodes[ni].name,
				    RD_REDIRECTS_MAX, slot,
				    rd_said(reply->str, reply->len, said));
				freeReplyObject(reply);
				s->map_stale = true;
				return -1;
			}
			if (rd_redirect(s, ni, reply, slot, &rslot,
			    &target) != 0) {
				freeReplyObject(reply);
				(void)rd_failed(s, ni);
				return -1;
			}
			asking = rd_error_is(reply, "ASK");
			freeReplyObject(reply);
			if (!asking) {
				/* Moved for good: the map follows at once. */
				s->slots[rslot] = (uint16_t)(target + 1);
				s->map_stale = true;
			}
			ni = target;
			continue;
		}
		if (rd_error_is(reply, "TRYAGAIN")) {
			/* A wait that would end past the deadline: none. */
			wait = (int64_t)RD_TRYAGAIN_WAIT_MS << tryagain;
			late = wait >= s->deadline_ms - rd_mono_ms();
			if (tryagain < RD_TRYAGAIN_MAX && !late) {
				freeReplyObject(reply);
				rd_sleep_ms(wait);
				tryagain++;
				/*
				 * From the slot's master again (the keys may
				 * have moved on meanwhile), with its own
				 * redirections.
				 */
				asking = false;
				redirects = 0;
				ni = (size_t)s->slots[slot] - 1;
				continue;
			}
			if (tryagain < RD_TRYAGAIN_MAX)
				snprintf(how, sizeof how, ", timed out after"
				    " %d ms", s->timeout_ms);
			else
				how[0] = '\0';
			rd_seterr(s, "%s: EVALSHA: %s (slot %u is being"
			    " migrated; tried %d times%s)", s->nodes[ni].name,
			    rd_said(reply->str, reply->len, said), slot,
			    tryagain + 1, how);
			freeReplyObject(reply);
			return -1;
		}
		if (rd_error_is(reply, "CLUSTERDOWN") &&
		    down < RD_CLUSTERDOWN_MAX) {
			freeReplyObject(reply);
			down++;
			s->map_stale = true;
			(void)rd_map_ready(s);
			asking = false;
			ni = (size_t)s->slots[slot] - 1;
			continue;
		}
		*out = reply;
		*nodep = ni;
		return 0;
	}
}

/*
 * Sends the command in s->argv to node ni, after ASKING if asking (in one
 * write), by the step's deadline. The command's reply, or NULL (errmsg
 * set) when the exchange failed or ASKING was refused.
 */
static redisReply *
rd_exec_on(struct rd_store *s, size_t ni, bool asking, int argc)
{
	static const char *const ask[1] = { "ASKING" };
	static const size_t asklen[1] = { 6 };
	struct rd_node *node = &s->nodes[ni];
	redisReply *r[2];

	s->outlen = 0;
	if (asking)
		rd_format(s, 1, ask, asklen);
	rd_format(s, argc, s->argv, s->argvlen);
	if (rd_exchange(s, node, asking ? "ASKING, EVALSHA" : "EVALSHA",
	    asking ? 2 : 1, r) != 0)
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
 * "MOVED slot host:port" or "ASK slot host:port" from node ni: the slot
 * into *slotp, the node it names (added if new) into *target. An empty
 * host is ni's own (a node that does not know its address). 0, or -1
 * (errmsg).
 */
static int
rd_redirect(struct rd_store *s, size_t ni, const redisReply *reply,
    unsigned want, unsigned *slotp, size_t *target)
{
	const char *at, *colon, *end, *c;
	char host[256], said[RD_SAID];
	long slot, port;
	char *stop;

	at = strchr(reply->str, ' ');
	if (at == NULL)
		goto bad;
	errno = 0;
	slot = strtol(at + 1, &stop, 10);
	/* The keys' slot, which rlgate computed as Redis does. */
	if (errno != 0 || stop == at + 1 || *stop != ' ' || slot < 0 ||
	    slot >= RD_SLOTS || (unsigned)slot != want)
		goto bad;
	at = stop + 1;
	end = at + strcspn(at, " \r\n");
	colon = NULL;
	for (c = at; c < end; c++)
		if (*c == ':')
			colon = c;
	if (colon == NULL || (size_t)(colon - at) >= sizeof host ||
	    (colon > at && !rd_host_ok(at, (size_t)(colon - at))))
		goto bad;
	port = strtol(colon + 1, &stop, 10);
	if (stop == colon + 1 || stop != end || port < 1 || port > 65535)
		goto bad;
	if (colon == at)
		snprintf(host, sizeof host, "%s", s->nodes[ni].host);
	else
		snprintf(host, sizeof host, "%.*s", (int)(colon - at), at);
	if (s->nnodes >= RD_NODES_MAX) {
		rd_seterr(s, "%s: more than %d cluster nodes", s->name,
		    RD_NODES_MAX);
		return -1;
	}
	*slotp = (unsigned)slot;
	*target = rd_node_add(s, host, (int)port, NULL);
	return 0;

bad:
	rd_seterr(s, "%s: EVALSHA: a redirection rlgate cannot read (for"
	    " slot %u): %s", s->nodes[ni].name, want,
	    rd_said(reply->str, reply->len, said));
	return -1;
}

/*
 * Reads the slot map if there is none yet, or if it is stale and the last
 * reading is RD_REFRESH_MIN_MS old. 0 when there is a map to go by (a
 * stale one too: better than none), or -1 (errmsg).
 */
static int
rd_map_ready(struct rd_store *s)
{
	int64_t now;

	if (s->map_loaded && !s->map_stale)
		return 0;
	now = rd_mono_ms();
	if (now < s->refresh_at_ms) {
		if (!s->map_loaded)
			rd_seterr(s, "%s", s->map_err);
		return s->map_loaded ? 0 : -1;
	}
	s->refresh_at_ms = now + RD_REFRESH_MIN_MS;
	if (rd_refresh(s) == 0) {
		s->map_loaded = true;
		s->map_stale = false;
		return 0;
	}
	memcpy(s->map_err, s->base.errmsg, sizeof s->map_err);
	return s->map_loaded ? 0 : -1;
}

/*
 * CLUSTER SLOTS from the first node that answers, at most
 * RD_REFRESH_TRIES of them: the connected ones first, then the others
 * (seeds included) whose backoff is over. 0, or -1 (errmsg).
 */
static int
rd_refresh(struct rd_store *s)
{
	static const char *const argv[2] = { "CLUSTER", "SLOTS" };
	static const size_t argvlen[2] = { 7, 5 };
	redisReply *reply;
	int tries = 0, pass, rc;
	int64_t now = rd_mono_ms();
	size_t i;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < s->nnodes && tries < RD_REFRESH_TRIES; i++) {
			if ((pass == 0) != (s->nodes[i].c != NULL) ||
			    (pass == 1 && now < s->nodes[i].retry_at_ms))
				continue;
			tries++;
			if (rd_ready(s, i) != 0)
				continue;
			if (rd_command(s, &s->nodes[i], "CLUSTER SLOTS", 2,
			    argv, argvlen, &reply) != 0) {
				(void)rd_failed(s, i);
				continue;
			}
			rc = rd_slots_apply(s, i, reply);
			freeReplyObject(reply);
			if (rc != 0) {
				(void)rd_failed(s, i);
				continue;
			}
			/*
			 * Not "back" yet: that takes a step (a node may
			 * answer this and CLUSTERDOWN to every step).
			 */
			rd_compact(s);
			return 0;
		}
	}
	if (tries == 0)
		rd_seterr(s, "%s: no node to ask for the slot map: every"
		    " one is backing off after an error", s->name);
	return -1;
}

/*
 * A CLUSTER SLOTS reply from node ni into the slot map: checked whole
 * first, so a bad reply changes nothing. Each entry is [first, last,
 * [host, port, id, ...] of the master, replicas...]. 0, or -1 (errmsg).
 */
static int
rd_slots_apply(struct rd_store *s, size_t ni, const redisReply *reply)
{
	const redisReply *e, *m, *h;
	char said[RD_SAID];
	size_t i, at, slot;
	const char *host;

	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: CLUSTER SLOTS failed: %s%s",
		    s->nodes[ni].name, rd_said(reply->str, reply->len, said),
		    strstr(reply->str, "cluster support disabled") != NULL ?
		    " (not a cluster: set [store] backend = redis)" : "");
		return -1;
	}
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements > RD_SLOTS) {
		rd_seterr(s, "%s: CLUSTER SLOTS: unexpected reply: %s%s",
		    s->nodes[ni].name, rd_reply_type(reply->type),
		    reply->type == REDIS_REPLY_ARRAY ? " of more entries than"
		    " slots" : "");
		return -1;
	}
	for (i = 0; i < reply->elements; i++) {
		e = reply->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER ||
		    e->element[2]->type != REDIS_REPLY_ARRAY ||
		    e->element[2]->elements < 2 ||
		    e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
			rd_seterr(s, "%s: CLUSTER SLOTS: unexpected reply:"
			    " entry %zu is not [first slot, last slot, [host,"
			    " port, ...], ...]", s->nodes[ni].name, i);
			return -1;
		}
		if (e->element[0]->integer < 0 ||
		    e->element[0]->integer > e->element[1]->integer ||
		    e->element[1]->integer >= RD_SLOTS) {
			rd_seterr(s, "%s: CLUSTER SLOTS: unexpected reply:"
			    " entry %zu: slots %lld to %lld, not within 0 to"
			    " %d", s->nodes[ni].name, i,
			    (long long)e->element[0]->integer,
			    (long long)e->element[1]->integer, RD_SLOTS - 1);
			return -1;
		}
		m = e->element[2];
		h = m->element[0];
		/* "" or "?": the node does not know its address; ni's. */
		if (!(h->len == 0 || (h->len == 1 && h->str[0] == '?') ||
		    rd_host_ok(h->str, h->len))) {
			rd_seterr(s, "%s: CLUSTER SLOTS: unexpected reply:"
			    " entry %zu: the master's host \"%s\" is no host"
			    " name or address", s->nodes[ni].name, i,
			    rd_said(h->str, h->len, said));
			return -1;
		}
		if (m->element[1]->integer < 1 ||
		    m->element[1]->integer > 65535) {
			rd_seterr(s, "%s: CLUSTER SLOTS: unexpected reply:"
			    " entry %zu: the master's port %lld is not 1 to"
			    " 65535", s->nodes[ni].name, i,
			    (long long)m->element[1]->integer);
			return -1;
		}
	}
	if (s->nnodes + reply->elements > RD_NODES_MAX) {
		rd_seterr(s, "%s: more than %d cluster nodes", s->name,
		    RD_NODES_MAX);
		return -1;
	}
	memset(s->slots, 0, RD_SLOTS * sizeof *s->slots);
	for (i = 0; i < reply->elements; i++) {
		e = reply->element[i];
		m = e->element[2];
		h = m->element[0];
		/* A cluster's nodes are all reached over TCP (rd_open). */
		assert(s->nodes[ni].host != NULL);
		host = h->len == 0 || (h->len == 1 && h->str[0] == '?') ?
		    s->nodes[ni].host : h->str;
		at = rd_node_add(s, host, (int)m->element[1]->integer, NULL);
		for (slot = (size_t)e->element[0]->integer;
		    slot <= (size_t)e->element[1]->integer; slot++)
			s->slots[slot] = (uint16_t)(at + 1);
	}
	return 0;
}

/*
 * Drops the nodes that are neither seeds nor the master of a slot
 * (closing their connections), and renumbers the map.
 */
static void
rd_compact(struct rd_store *s)
{
	size_t i, j, *to;
	bool *used;

	used = rlg_xcalloc(s->nnodes, sizeof *used);
	to = rlg_xcalloc(s->nnodes, sizeof *to);
	for (i = 0; i < RD_SLOTS; i++)
		if (s->slots[i] != 0)
			used[s->slots[i] - 1] = true;
	for (i = 0, j = 0; i < s->nnodes; i++) {
		if (!used[i] && !s->nodes[i].seed) {
			rd_disconnect(&s->nodes[i]);
			free(s->nodes[i].host);
			free(s->nodes[i].socket);
			continue;
		}
		to[i] = j;
		if (i != j)
			s->nodes[j] = s->nodes[i];
		j++;
	}
	s->nnodes = j;
	for (i = 0; i < RD_SLOTS; i++)
		if (s->slots[i] != 0)
			s->slots[i] = (uint16_t)(to[s->slots[i] - 1] + 1);
	free(used);
	free(to);
}

/*
 * The slot of a client's keys: CRC16 (XMODEM, as Redis) of its hash tag,
 * the key up to its first '}' (never empty: rd_check_items), mod 16384.
 */
static unsigned
rd_slot(const char *client)
{
	unsigned crc = 0;
	const unsigned char *p;
	int k;

	for (p = (const unsigned char *)client; *p != '\0' && *p != '}';
	    p++) {
		crc ^= (unsigned)*p << 8;
		for (k = 0; k < 8; k++)
			crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 :
			    crc << 1;
		crc &= 0xffff;
	}
	return crc & (RD_SLOTS - 1);
}

static void
rd_sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
	    (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
