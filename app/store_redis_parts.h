/*
 * store_redis_parts.h: the Redis store's internals, shared by the files of
 * the one backend and included by nothing else (the rest of rlgate sees
 * rlg_store_redis_ops, store_redis.h): a server (struct rd_node), the handle
 * (struct rd_store), and the rd_ functions one file calls in another.
 *   store_redis.c          the handle: open, step, probe, overrides, close
 *   store_redis_batch.c    the step alone, or batched (group commit)
 *   store_redis_script.c   EVALSHA's arguments, the reply checked into
 *                          decisions
 *   store_redis_io.c       connections, deadline I/O, backoff
 *   store_redis_wire.c     commands in RESP, a script call's head, the
 *                          words of replies and messages
 *   store_redis_cluster.c  Redis Cluster: slot map, slot groups,
 *                          redirections, the charges' EXISTS
 *   store_redis_sentinel.c Redis Sentinel: the master asked of the
 *                          sentinels, checked by ROLE
 *   store_redis_sync.c     the sync (local+global mode): units merged
 *                          into the stored states by db/redis/sync.lua
 * Each function's full contract is above its definition; here, what it
 * is for and where it lives.
 */
#ifndef RLG_STORE_REDIS_PARTS_H
#define RLG_STORE_REDIS_PARTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "redis_url.h"
#include "store.h"
#include "store_group.h"
#include "store_stats.h"


/* Bytes of one decimal int64 with its sign and NUL. */
#define RD_NUM 21

/* Redis Cluster: its hash slots. */
#define RD_SLOTS 16384
/* The probe of a check (store_redis_cluster.c): two items of
 * fixed_window, limit 1. */
#define RD_PROBE_ITEMS 2
/* A server's text in a message: at most this many bytes, and a NUL. */
#define RD_SAID 201

/*
 * One Redis server: where it is, the connection to it, its health. The
 * single server of backend = redis, or a node of a cluster.
 */
struct rd_node {
	char *host;                   /* or NULL: socket; owned */
	int port;
	char *socket;                 /* unix socket path, or NULL; owned */
	bool seed;                    /* cluster: named by the url: kept */
	bool sentinel;                /* a sentinel: no AUTH, SELECT, script */
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
	/* Its connection has the scripts as the library (rd_load_script):
	 * a script call goes as FCALL; else as EVALSHA. */
	bool fcall;
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
	 * Sentinel (redis+sentinel://): node 0 is the master, found by
	 * asking the sentinels (in url order, from the one that answered
	 * last) on every connect to it; master_at is where the last answer
	 * put it ("" before the first), found the line that said so.
	 */
	char *master;                 /* the master's name, or NULL; owned */
	struct rd_node *sentinels;
	size_t nsentinels;
	size_t sentinel_next;
	char master_at[300];
	char found[RLG_STORE_ERRMSG_MAX];

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

	/*
	 * Group commit (store_redis_batch.c): the process's group for this
	 * server (group.g NULL: none); a batch's requests, when this handle
	 * leads one (reqcap entries).
	 */
	struct rlg_group_member group;
	struct rd_req *reqs;
	size_t reqcap;
	/* A cluster's batch: each waiter's node (index + 1; 0: alone) and
	 * the replies of one node's pipeline; bcap entries each. */
	size_t *bnode;
	redisReply **breply;
	size_t bcap;

	/* db/redis/sync.lua's SHA1 (the local+global mode's merge,
	 * store_redis_sync.c): "" until its first load. */
	char sync_sha[41];
};

/* ---- store_redis_batch.c: the step, alone or in a batch --------------- */

/* One request alone: one script call (a cluster: its slot groups). */
int rd_step_alone(void *handle, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);

/* The script call in s->argv on the single server, NOSCRIPT handled:
 * its reply, or NULL (errmsg). */
redisReply *rd_exec_script(struct rd_store *s, int argc);

/* The single server's (or the sentinels' master's) connection: 0, or -1. */
int rd_ready0(struct rd_store *s);

/* Joins the group of the handle's server (rd_open); leaves it (rd_close). */
void rd_batch_join(struct rd_store *s);
void rd_batch_leave(struct rd_store *s);

/* The stats operation: the group's counters. */
void rd_stats(const struct rlg_store *base, struct rlg_store_stats *out);

/* ---- store_redis_script.c: the script's arguments and reply ---------- */

/* One request of a script call: items[idx[0..m)] (idx NULL: items[0..m)),
 * then n - m items of a probe. */
struct rd_req {
	const struct rlg_store_item *items;
	const size_t *idx;
	size_t m;
	size_t n;
};

/* EVALSHA's arguments into s->argv for items idx[0..m) (idx NULL:
 * items[0..m)), with probe the check's two items after them. argc. */
int rd_build(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, bool probe, int64_t now_ms);

/* EVALSHA's arguments for the requests reqs[0..nreq) in one call (a
 * batch, each request in order). argc. */
int rd_build_batch(struct rd_store *s, const struct rd_req *reqs,
    size_t nreq, int64_t now_ms);

/* Room for argc arguments in s->argv, s->argvlen and need bytes in
 * s->text (their contents not kept). */
void rd_reserve(struct rd_store *s, size_t argc, size_t need);

/* The state key "rlg:{CLIENT}:POLICY" at at as argument a of s->argv,
 * NUL-ended: the end past the NUL. */
char *rd_state_key(struct rd_store *s, size_t a, const char *client,
    const char *policy, char *at);

/* Copies len bytes of s to at; returns the end. */
char *rd_put(char *at, const char *s, size_t len);

/* The script's reply from node, every value checked, into decisions:
 * 0, or -1 (errmsg). */
int rd_decisions(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, const struct rlg_store_item *items,
    size_t nreply, const size_t *idx, size_t m,
    struct rlg_decision *decisions);

/* The reply's shape for nreply items and its now_ms: 0, or -1
 * (errmsg). */
int rd_reply_now(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, size_t nreply, int64_t *now);

/* One request's m items of a checked reply, from its item base on,
 * checked into decisions: 0, or -1 (errmsg). */
int rd_reply_items(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, size_t base, int64_t now,
    const struct rlg_store_item *items, const size_t *idx, size_t m,
    struct rlg_decision *decisions);

/* ---- store_redis_io.c: connections and I/O ---------------------------- */

/* A step (or an open) begins: its command deadline and connect budget. */
void rd_budget(struct rd_store *s);

/* The index of the node at host:port (or socket), added if new. */
size_t rd_node_add(struct rd_store *s, const char *host, int port,
    const char *socket);

/* A connection to node ni, if its backoff allows: 0, or -1 (errmsg). */
int rd_ready(struct rd_store *s, size_t ni);

/* Whether node ni waits out its backoff (errmsg: why it went down). */
bool rd_backing_off(struct rd_store *s, size_t ni);

/* Connects, authenticates, selects and loads the script: 0, or -1. */
int rd_connect(struct rd_store *s, struct rd_node *node);

/* One command and its reply, by the step's deadline: 0, or -1. */
int rd_command(struct rd_store *s, struct rd_node *node, const char *what,
    int argc, const char *const *argv, const size_t *argvlen,
    redisReply **out);

/*
 * The scripts on node: FUNCTION LOAD of the library (node->fcall), else
 * (Redis before 7, an ACL without FUNCTION, a replica: any refusal)
 * SCRIPT LOAD of step.lua, its SHA1 checked into s->sha: 0, or -1.
 */
int rd_load_script(struct rd_store *s, struct rd_node *node);

/*
 * db/redis/library.sh's library of step.lua and sync.lua, and its
 * function names (app/redis_function.c, generated by make).
 */
extern const char rlg_redis_function_lua[];
extern const char rlg_redis_function_step[];
extern const char rlg_redis_function_sync[];

/* SCRIPT LOAD of lua on node, its SHA1 checked into sha: 0, or -1. */
int rd_load_lua(struct rd_store *s, struct rd_node *node, const char *lua,
    char *sha);

/* The command in s->argv on node ni (after ASKING if asking): its reply,
 * or NULL (errmsg). */
redisReply *rd_exec_on(struct rd_store *s, size_t ni, bool asking,
    int argc);

/* A pipeline: the command in s->argv for node ni appended to s->out;
 * s->out sent to node ni and its n replies read: 0, or -1 (errmsg). */
void rd_append(struct rd_store *s, size_t ni, int argc);
int rd_exec_many(struct rd_store *s, size_t ni, size_t n,
    redisReply **replies);

/* Node ni answered a step: healthy again (logged once). */
void rd_node_ok(struct rd_store *s, size_t ni);

/* After an error of node ni: drops it, starts its backoff (logged once).
 * Returns RLG_ESTORE. */
int rd_failed(struct rd_store *s, size_t ni);

/* Closes a node's connection, if open. */
void rd_disconnect(struct rd_node *node);

/* The monotonic clock, in ms: what deadlines and backoffs go by. */
int64_t rd_mono_ms(void);

/* ---- store_redis_wire.c: commands and replies ------------------------ */

/* The command argv[0..argc) appended to s->out in RESP. */
void rd_format(struct rd_store *s, int argc, const char *const *argv,
    const size_t *argvlen);

/* A script call's head in s->argv (EVALSHA, sha, the count of keys at at):
 * where the next argument's text goes. */
char *rd_script_head(struct rd_store *s, const char *sha, size_t nkeys,
    char *at);

/* The script call in s->argv made the call node takes (FCALL where it has
 * the library); any other command left as it is. */
void rd_call_head(struct rd_store *s, const struct rd_node *node);

/* A server's text for a message: at most RD_SAID - 1 printable bytes. */
const char *rd_said(const char *str, size_t len, char *buf);

/* An error reply whose first word is word ("MOVED", "NOSCRIPT"). */
bool rd_error_is(const redisReply *reply, const char *word);

/* What node's script calls are, for messages: "FCALL" or "EVALSHA". */
const char *rd_call_name(const struct rd_node *node);

/* A script call's error reply that says the server lacks the script (a
 * SCRIPT FLUSH, FUNCTION FLUSH, a failover): load it and call again. */
bool rd_not_loaded(const redisReply *reply);

/* Sets the handle's errmsg, printf-style. */
void rd_seterr(struct rd_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A reply type's name, for the messages. */
const char *rd_reply_type(int type);

/* ---- store_redis_cluster.c: Redis Cluster ----------------------------- */

/* A step on a cluster: the charges, then the slot groups. */
int rd_cluster_step(struct rd_store *s, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);

/* A command in s->argv on the master of key's slot, with the cluster's
 * redirections and retries: 0 with its reply and node, or -1 (errmsg). */
int rd_cluster_key_exec(struct rd_store *s, const char *key, int argc,
    redisReply **out, size_t *nodep);

/* The slot of a client's keys (its hash tag's). */
unsigned rd_slot(const char *client);

/* The slot map read if there is none, or if stale: 0, or -1 (errmsg). */
int rd_map_ready(struct rd_store *s);

/* Frees the scratch of a cluster's steps (slot groups, charges): rd_close. */
void rd_cluster_free(struct rd_store *s);

/* ---- store_redis_sync.c: the local+global mode's merge --------------- */

/* The sync operation: items' units merged by db/redis/sync.lua, per
 * server (a cluster: per master, a call per slot), the states after. */
int rd_sync(struct rlg_store *base, const struct rlg_sync_item *items,
    size_t n, int64_t now_ms, struct rlg_state *global);

/* store_redis_reset.c: rlg_store_reset (a client's keys deleted). */
int rd_reset(struct rlg_store *base, const char *client, const char *policy,
    int64_t *deleted);

/* ---- store_redis_sentinel.c: Redis Sentinel --------------------------- */

/* The sentinels of cfg and an unknown master as node 0: rd_open. */
void rd_sentinel_open(struct rd_store *s,
    const struct rlg_redis_config *rc);

/* Asks the sentinels where the master is, connects to it (node 0) and
 * checks that ROLE says master: 0, or -1 (errmsg; no connection). */
int rd_sentinel_connect(struct rd_store *s);

/* rd_ready for the master (node 0): its connection, or a new one found
 * by rd_sentinel_connect if its backoff allows: 0, or -1 (errmsg). */
int rd_sentinel_ready(struct rd_store *s);

/* Closes and frees the sentinels: rd_close. */
void rd_sentinel_free(struct rd_store *s);

#endif
