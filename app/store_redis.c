/*
 * store_redis.c: the Redis store, for many gateways sharing one limit:
 * one Redis server, a master its Redis Sentinels name (redis+sentinel://),
 * or a Redis Cluster ([store] backend = redis_cluster).
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
 *                                          KEYS[2i-1] again (why:
 *                                          store_redis_cluster.c)
 *   ARGV = now_ms ("" for Redis TIME), n, then per item: algorithm,
 *          limit, window_ms, burst, flags (1 advisory, 2 if_new), cost,
 *          ban_ms (0: none), ban_after
 * and the reply is an array of 1 + 6n integers: the now_ms used, then per
 * item admitted, limit, remaining, reset_ms, retry_ms, next_ms. The reply
 * is checked strictly; anything else is a store failure.
 * Beside the states, the operator's overrides: the hash rlg:overrides,
 * field "POLICY CLIENT", value SPEC, read by rd_overrides (below).
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
 * exactly 1 + 6n integers; now_ms is a time the limiter can use (0 to
 * RLG_TIME_MS_MAX); per item, admitted is 0 or 1, limit is the policy's,
 * remaining, reset_ms and retry_ms lie within rlg_limiter_bounds (the
 * most the algorithms give for that policy at that now_ms, from any state
 * rlgate can have stored), retry_ms is 0 when admitted and reset_ms
 * equals retry_ms when rejected, next_ms is 1 to reset_ms when admitted
 * and equals retry_ms when rejected, as limiter.h promises. SCRIPT LOAD gives
 * 40 lowercase hex digits, the same for every load; PING says PONG, AUTH,
 * SELECT and ASKING say OK; CLUSTER SLOTS, MOVED and ASK name slots,
 * ports and host names (or addresses) that can be. No array of more than
 * RD_ARRAY_MAX elements is allocated and no reply of more than
 * RD_REPLY_BYTES_MAX bytes read; bytes beyond the replies a command asked
 * for (which the next command would take for its own) fail it too.
 * Text from the server that goes into a message (an error reply) is cut
 * to 200 bytes, control bytes shown as '?'.
 *
 * Per request nothing is allocated but hiredis' reply: the EVALSHA
 * arguments and the command's bytes are built in buffers of the handle,
 * which grow to the largest request seen (a refresh of the slot map
 * allocates).
 *
 * The rest of the backend sits beside this file, one seam each, sharing
 * struct rd_store and the rd_ functions of store_redis_parts.h:
 * store_redis_batch.c runs the step, alone or, with group commit, in one
 * call with the steps of the process's other threads;
 * store_redis_script.c builds EVALSHA's arguments and checks the
 * script's reply into decisions; store_redis_io.c connects (AUTH,
 * SELECT, SCRIPT LOAD), sends and reads by the step's deadline and keeps
 * each server's backoff;
 * store_redis_cluster.c is the Redis Cluster (the slot map, slot groups,
 * redirections, the charges' EXISTS); store_redis_sentinel.c finds the
 * master of a Sentinel setup on each connect to it.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_url.h"
#include "store.h"
#include "store_redis.h"
#include "store_redis_parts.h"
#include "util.h"

static int rd_open(const struct rlg_store_config *cfg,
    struct rlg_store **out);
static int rd_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions);
static int rd_prune(struct rlg_store *base, int64_t now_ms,
    int64_t *deleted);
static void rd_close(struct rlg_store *base);
static int rd_check_items(struct rd_store *s,
    const struct rlg_store_item *items, size_t n, int64_t now_ms);

static int rd_probe(struct rlg_store *base, int64_t now_ms);
static int rd_overrides(struct rlg_store *base, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx);
static const char *rd_describe(const struct rlg_store_config *sc, char *buf,
    size_t size);
static int rd_ovr_digest(const redisReply *r, uint64_t *v);
static int rd_ovr_rows(struct rd_store *s, const redisReply *h,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx);


/* What it has not (idle, survey, the calls of a database behind the
 * decision table) stays NULL: store.c answers that it cannot. */
const struct rlg_store_ops rlg_store_redis_ops = {
	.name = "redis", .open = rd_open, .step = rd_step, .prune = rd_prune,
	.close = rd_close, .probe = rd_probe, .overrides = rd_overrides,
	.stats = rd_stats, .sync = rd_sync, .reset = rd_reset,
};

/* A server to probe; with commit = behind, the host's table in front
 * (the local+global mode, store_table_sync.c). */
const struct rlg_backend rlg_redis_backend = {
	.ops = &rlg_store_redis_ops, .caps = RLG_STORE_CAN_CONNECT,
	.describe = rd_describe, .behind = rlg_store_commit_behind,
};

/*
 * The overrides (store.h): one hash, field "POLICY CLIENT", value SPEC.
 * Their version is a digest of the hash that Redis computes (SHA1 of its
 * fields and values, sorted by field, each length-prefixed), so the
 * unchanged case transfers 40 hex digits; its first 16 are the version (0
 * taken as 1). The script compares them with ARGV[1], the caller's
 * version in 16 hex digits, and only when they differ returns the whole
 * hash with the digest, read in the same script: the rows delivered are
 * those of the version. The hash is sorted, not taken in HGETALL's order,
 * which a rehash may change while the contents stay. A missing or empty
 * hash has a digest of its own. EVAL, not EVALSHA: the script is short,
 * Redis caches it, and NOSCRIPT never comes. The rows come back as the
 * one string the digest is made of (each field and value as LEN:BYTES,
 * sorted by field), so their number is bounded by the caller ([store]
 * max_overrides: fn stops) and the reply's bytes (store_redis_io.c:
 * RD_REPLY_BYTES_MAX),
 * not by an array's elements.
 */
#define RD_OVR_KEY "rlg:overrides"
static const char rd_ovr_lua[] =
    "local h = redis.call('HGETALL', KEYS[1])\n"
    "local i = {}\n"
    "for k = 1, #h, 2 do i[#i + 1] = k end\n"
    "table.sort(i, function(a, b) return h[a] < h[b] end)\n"
    "local s = {}\n"
    "for _, k in ipairs(i) do\n"
    "  s[#s + 1] = #h[k] .. ':' .. h[k] .. #h[k + 1] .. ':' .. h[k + 1]\n"
    "end\n"
    "local c = table.concat(s)\n"
    "local d = redis.sha1hex(c)\n"
    "if string.sub(d, 1, 16) == ARGV[1] then return d end\n"
    "return {d, c}\n";

/* As rlg_redis_describe says, never with a password. */
static const char *
rd_describe(const struct rlg_store_config *sc, char *buf, size_t size)
{
	size_t len;

	rlg_redis_describe(&sc->redis, buf, size);
	len = strlen(buf);
	if (rlg_store_commit_behind(sc) && len < size)
		snprintf(buf + len, size - len, ", table %s-table synced every"
		    " %lld ms", sc->sqlite.path != NULL ? sc->sqlite.path : "",
		    (long long)sc->sync_ms);
	return buf;
}

static int
rd_open(const struct rlg_store_config *cfg, struct rlg_store **out)
{
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
	rlg_redis_describe(&cfg->redis, s->name, sizeof s->name);
	snprintf(s->base.errmsg, sizeof s->base.errmsg, "no error");
	*out = &s->base;
	rd_budget(s);
	if (cfg->redis.host == NULL && cfg->redis.socket == NULL) {
		rd_seterr(s, "redis: no [store] url configured");
		return RLG_ESTORE;
	}
	if (!s->cluster) {
		if (cfg->redis.nseeds > 0 && cfg->redis.master == NULL) {
			rd_seterr(s, "%s: several servers in [store] url need"
			    " backend = redis_cluster", s->name);
			return RLG_ESTORE;
		}
		if (cfg->redis.master != NULL)
			rd_sentinel_open(s, &cfg->redis);
		else
			(void)rd_node_add(s, cfg->redis.host, cfg->redis.port,
			    cfg->redis.socket);
		if (cfg->group_commit != RLG_GROUP_OFF)
			rd_batch_join(s);
		if ((s->master != NULL ? rd_sentinel_connect(s) :
		    rd_connect(s, &s->nodes[0])) != 0)
			return rd_failed(s, 0);
		return RLG_OK;
	}

	if (cfg->redis.socket != NULL || s->db != 0) {
		rd_seterr(s, "%s: a Redis Cluster is reached over TCP, in"
		    " database 0", s->name);
		return RLG_ESTORE;
	}
	if (cfg->group_commit != RLG_GROUP_OFF)
		rd_batch_join(s);
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
	int rc;

	if ((rc = rd_check_items(s, items, n, now_ms)) != RLG_OK)
		return rc;
	if (s->nnodes == 0)
		return RLG_ESTORE;      /* no url: errmsg says so since open */
	if (s->group.g != NULL)
		return rlg_group_step(&s->group, items, n, now_ms, decisions);
	return rd_step_alone(s, items, n, now_ms, decisions);
}

/*
 * rlg_store_probe: PING to the server (a cluster: its first seed; a
 * sentinel's master: the one they name), within a step's budgets; a
 * failure counts as a step's would (backoff). A sentinel's master
 * answered: errmsg says which sentinel named it where, for
 * --check-config to tell.
 */
static int
rd_probe(struct rlg_store *base, int64_t now_ms)
{
	struct rd_store *s = (struct rd_store *)base;
	const char *argv[1] = { "PING" };
	size_t argvlen[1] = { 4 };
	redisReply *reply = NULL;
	bool pong;

	(void)now_ms;
	if (s->nnodes == 0)
		return RLG_ESTORE;
	rd_budget(s);
	if (rd_ready0(s) != 0)
		return RLG_ESTORE;
	if (rd_command(s, &s->nodes[0], "PING", 1, argv, argvlen, &reply) != 0)
		return rd_failed(s, 0);
	pong = reply->type == REDIS_REPLY_STATUS && reply->str != NULL &&
	    strcmp(reply->str, "PONG") == 0;
	if (!pong)
		rd_seterr(s, "redis: PING answered %s, not PONG",
		    rd_reply_type(reply->type));
	freeReplyObject(reply);
	if (!pong)
		return rd_failed(s, 0);
	rd_node_ok(s, 0);
	if (s->master != NULL)
		rd_seterr(s, "%s", s->found);   /* where: --check-config */
	return RLG_OK;
}

/*
 * rlg_store_overrides: one EVAL of rd_ovr_lua on the server (a cluster:
 * the master of the hash's slot), within a step's budgets. A server that
 * fails, or a reply that is not the script's, counts as a step's failure
 * would (backoff); an error reply (the key holds no hash) is told, and
 * the connection kept.
 */
static int
rd_overrides(struct rlg_store *base, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx)
{
	struct rd_store *s = (struct rd_store *)base;
	redisReply *reply = NULL;
	char have[17], said[RD_SAID];
	const char *what;
	uint64_t v = 0;
	size_t ni = 0;

	if (s->nnodes == 0)
		return RLG_ESTORE;      /* no url: errmsg says so since open */
	rd_budget(s);
	snprintf(have, sizeof have, "%016llx", (unsigned long long)*version);
	rd_reserve(s, 5, 0);
	s->argv[0] = "EVAL";
	s->argv[1] = rd_ovr_lua;
	s->argv[2] = "1";
	s->argv[3] = RD_OVR_KEY;
	s->argv[4] = have;
	for (ni = 0; ni < 5; ni++)
		s->argvlen[ni] = strlen(s->argv[ni]);
	ni = 0;
	if (s->cluster) {
		if (rd_cluster_key_exec(s, RD_OVR_KEY, 5, &reply, &ni) != 0)
			return RLG_ESTORE;
	} else {
		if (rd_ready0(s) != 0)
			return RLG_ESTORE;
		if ((reply = rd_exec_on(s, 0, false, 5)) == NULL)
			return rd_failed(s, 0);
	}
	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: the overrides (EVAL on %s, a hash): %s",
		    s->nodes[ni].name, RD_OVR_KEY,
		    rd_said(reply->str, reply->len, said));
		freeReplyObject(reply);
		return RLG_ESTORE;
	}
	what = NULL;
	if (reply->type == REDIS_REPLY_STRING) {
		/* Unchanged: the digest alone, which must be *version's. */
		if (rd_ovr_digest(reply, &v) != 0 || v != *version)
			what = "a digest of another version than the one sent";
	} else if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
	    rd_ovr_digest(reply->element[0], &v) == 0) {
		if (rd_ovr_rows(s, reply->element[1], fn, ctx) != RLG_OK)
			what = s->base.errmsg;
	} else {
		what = "neither a digest nor a digest and the hash";
	}
	freeReplyObject(reply);
	if (what != NULL) {
		if (what != s->base.errmsg)
			rd_seterr(s, "%s: the overrides: unexpected reply: %s",
			    s->nodes[ni].name, what);
		return rd_failed(s, ni);
	}
	rd_node_ok(s, ni);
	*version = v;
	return RLG_OK;
}

/* The version of a digest (40 lowercase hex digits): 0, or -1. */
static int
rd_ovr_digest(const redisReply *r, uint64_t *v)
{
	size_t i;
	int d;

	if (r->type != REDIS_REPLY_STRING || r->len != 40)
		return -1;
	*v = 0;
	for (i = 0; i < 40; i++) {
		d = r->str[i] >= '0' && r->str[i] <= '9' ? r->str[i] - '0' :
		    r->str[i] >= 'a' && r->str[i] <= 'f' ? r->str[i] - 'a' + 10 :
		    -1;
		if (d < 0)
			return -1;
		if (i < 16)
			*v = *v << 4 | (uint64_t)d;
	}
	if (*v == 0)
		*v = 1;
	return 0;
}

/* One LEN:BYTES of the script's string at *p (end: its end): the bytes
 * at *out, len of them, *p past them. 0, or -1 for anything else. */
static int
rd_ovr_item(char **p, const char *end, char **out, size_t *len)
{
	char *q = *p;
	size_t n = 0;

	if (q >= end || *q < '0' || *q > '9')
		return -1;
	for (; q < end && *q >= '0' && *q <= '9'; q++) {
		if (n > (SIZE_MAX - 9) / 10)
			return -1;
		n = n * 10 + (size_t)(*q - '0');
	}
	if (q >= end || *q != ':' || (size_t)(end - q - 1) < n)
		return -1;
	*out = q + 1;
	*len = n;
	*p = q + 1 + n;
	return 0;
}

/*
 * The rows of the script's string (field, value, as LEN:BYTES each) to
 * fn, until fn says stop: the field split at its first space into policy
 * and client (no space: an empty client, which the gate refuses with a
 * line in its log). A field or value holding a NUL ends there (the gate
 * sees a cut row). The reply's string is this call's: the split and the
 * terminators write into a copy of it. RLG_OK, or RLG_ESTORE (errmsg)
 * for a string that is no such list.
 */
static int
rd_ovr_rows(struct rd_store *s, const redisReply *h,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx)
{
	struct rlg_override_row row;
	char *buf, *p, *end, *field, *value, *space;
	size_t flen, vlen;
	int rc = RLG_OK;

	if (h->type != REDIS_REPLY_STRING) {
		rd_seterr(s, "%s: the overrides: unexpected reply: the rows are"
		    " %s, not a string", s->name, rd_reply_type(h->type));
		return RLG_ESTORE;
	}
	buf = rlg_xmalloc(h->len + 1);
	memcpy(buf, h->str, h->len);
	end = buf + h->len;
	for (p = buf; p < end;) {
		if (rd_ovr_item(&p, end, &field, &flen) != 0 ||
		    rd_ovr_item(&p, end, &value, &vlen) != 0) {
			rd_seterr(s, "%s: the overrides: unexpected reply: the"
			    " rows are no list of LEN:FIELD LEN:VALUE",
			    s->name);
			rc = RLG_ESTORE;
			break;
		}
		/* Each string one byte left, over its ':', for its NUL:
		 * nothing past its own end is written. */
		memmove(field - 1, field, flen);
		field--;
		field[flen] = '\0';
		memmove(value - 1, value, vlen);
		value--;
		value[vlen] = '\0';
		row.policy = field;
		space = strchr(field, ' ');
		if (space != NULL)
			*space = '\0';
		row.client = space != NULL ? space + 1 : "";
		row.spec = value;
		if (fn(ctx, &row) != 0)
			break;
	}
	free(buf);
	return rc;
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
	rd_cluster_free(s);
	rd_sentinel_free(s);
	rd_batch_leave(s);
	free(s);
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
		out = zero;     /* the sliding log reads a ban's row from it */
		if (p->lim.algorithm == RLG_ALG_SLIDING_LOG)
			rc = rlg_limiter_sliding_log(&p->lim, NULL, 0, now_ms, 1,
			    &append, &out, &d);
		else
			rc = rlg_limiter_step(&p->lim, &zero, now_ms, 1, &out, &d);
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
