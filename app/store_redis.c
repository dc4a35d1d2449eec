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
 *                                          KEYS[2i-1] again (why:
 *                                          store_redis_cluster.c)
 *   ARGV = now_ms ("" for Redis TIME), n, then per item: algorithm,
 *          limit, window_ms, burst, flags (1 advisory, 2 if_new), cost
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
 * struct rd_store and the rd_ functions of store_redis_priv.h:
 * store_redis_io.c connects (AUTH, SELECT, SCRIPT LOAD), sends and reads
 * by the step's deadline and keeps each server's backoff;
 * store_redis_cluster.c is the Redis Cluster (the slot map, slot groups,
 * redirections, the charges' EXISTS).
 */
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "store.h"
#include "store_redis_priv.h"
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
static int rd_field(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t k, const struct rlg_policy *p,
    int64_t lo, int64_t hi);
static bool rd_skipped(const redisReply *const *e, size_t k,
    const struct rlg_policy *p);
static int rd_reply_shape(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, size_t nreply);
static int rd_reply_item(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t i, const struct rlg_store_item *it,
    int64_t now);
static char *rd_build_keys(struct rd_store *s,
    const struct rlg_store_item *items, const size_t *idx, size_t m,
    size_t n, char *at, size_t *ap);
static char *rd_build_args(struct rd_store *s,
    const struct rlg_store_item *items, const size_t *idx, size_t m,
    size_t n, int64_t now_ms, char *at, size_t *ap);

static int rd_probe(struct rlg_store *base, int64_t now_ms);
static int rd_overrides(struct rlg_store *base, uint64_t *version,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx);
static int rd_ovr_digest(const redisReply *r, uint64_t *v);
static int rd_ovr_rows(struct rd_store *s, const redisReply *h,
    int (*fn)(void *ctx, const struct rlg_override_row *row), void *ctx);

/* The arguments: n, then this many per item. */
#define RD_PER_ITEM 6
/* The reply: now_ms, then this many integers per item. */
#define RD_REPLY_PER_ITEM 6

const struct rlg_store_ops rlg_store_redis_ops = {
	.name = "redis",
	.open = rd_open,
	.step = rd_step,
	.prune = rd_prune,
	.close = rd_close,
	.probe = rd_probe,
	.overrides = rd_overrides,
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

/*
 * rlg_store_probe: PING to the server (a cluster: its first seed), within
 * a step's budgets; a failure counts as a step's would (backoff).
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
	if (rd_ready(s, 0) != 0)
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
		if (rd_ready(s, 0) != 0)
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

/*
 * EVALSHA sha 2n KEYS... now n ARGS... into s->argv for the items
 * idx[0..m) (idx NULL: items[0..m)), and with probe the two items of a
 * check (store_redis_cluster.c) after them, growing the buffers if this
 * request is the largest yet. Returns argc.
 */
int
rd_build(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, bool probe, int64_t now_ms)
{
	size_t n = m + (probe ? RD_PROBE_ITEMS : 0);
	size_t argc = 5 + (2 + RD_PER_ITEM) * n, need = (size_t)3 * RD_NUM, i, a;
	const struct rlg_store_item *it;
	char *at;

	/* "rlg:{" C "}:" P, and the same with ":log", each NUL-ended. */
	for (i = 0; i < m; i++) {
		it = &items[idx != NULL ? idx[i] : i];
		need += 2 * (strlen(it->client) + strlen(it->policy->name) +
		    8) + 4 + (size_t)RD_PER_ITEM * RD_NUM;
	}
	rd_reserve(s, argc, need);

	at = s->text;
	s->argv[0] = "EVALSHA";
	s->argvlen[0] = 7;
	s->argv[1] = s->sha;
	s->argvlen[1] = 40;
	s->argv[2] = at;
	s->argvlen[2] = (size_t)snprintf(at, RD_NUM, "%zu", 2 * n);
	at += s->argvlen[2] + 1;
	a = 3;
	at = rd_build_keys(s, items, idx, m, n, at, &a);
	at = rd_build_args(s, items, idx, m, n, now_ms, at, &a);
	assert(a == argc && (size_t)(at - s->text) <= need);
	return (int)argc;
}

/*
 * Makes room for argc arguments in s->argv and s->argvlen and for need
 * bytes in s->text (what was there is not kept).
 */
void
rd_reserve(struct rd_store *s, size_t argc, size_t need)
{
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
}

/*
 * The KEYS of rd_build from argument *a on, their text from at on: each
 * item's state key and its log key (the state key again for an item
 * that is no sliding log), then the probe's (n - m items), all four the
 * first state key. Returns the end of the text written.
 */
static char *
rd_build_keys(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, size_t n, char *at, size_t *ap)
{
	const struct rlg_store_item *it;
	size_t i, k, a = *ap;

	for (i = 0; i < m; i++) {
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
			/* Unused: the state key again (store_redis_cluster.c). */
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
	*ap = a;
	return at;
}

/*
 * The ARGV of rd_build from argument *a on, their text from at on: now
 * ("" for Redis TIME), n, then each item's algorithm, limit, window_ms,
 * burst, flags and cost, then the probe's. Returns the end of the text written.
 */
static char *
rd_build_args(struct rd_store *s, const struct rlg_store_item *items,
    const size_t *idx, size_t m, size_t n, int64_t now_ms, char *at,
    size_t *ap)
{
	static const char *const probe_args[RD_PER_ITEM] = { "0", "1",
	    "1000", "0", "0", "1" };
	const struct rlg_store_item *it;
	const struct rlg_policy *p;
	size_t i, k, a = *ap, len;
	int64_t v[RD_PER_ITEM];

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
		v[5] = rlg_store_item_cost(it);
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
	*ap = a;
	return at;
}

/* Copies len bytes of s to at; returns the end. */
char *
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
int
rd_decisions(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, const struct rlg_store_item *items,
    size_t nreply, const size_t *idx, size_t m,
    struct rlg_decision *decisions)
{
	const redisReply *const *e;
	struct rlg_decision *d;
	size_t i, k;
	int64_t now;

	if (rd_reply_shape(s, node, reply, nreply) != 0)
		return -1;
	e = (const redisReply *const *)reply->element;
	if (rd_field(s, node, e, 0, NULL, 0, RLG_TIME_MS_MAX) != 0)
		return -1;
	now = e[0]->integer;
	for (i = 0; i < nreply; i++) {
		if (rd_reply_item(s, node, e, i, i < m ?
		    &items[idx != NULL ? idx[i] : i] : NULL, now) != 0)
			return -1;
	}
	for (i = 0; i < m; i++) {
		d = &decisions[idx != NULL ? idx[i] : i];
		k = 1 + RD_REPLY_PER_ITEM * i;
		d->admitted = e[k]->integer == 1;
		d->limit = e[k + 1]->integer;
		d->remaining = e[k + 2]->integer;
		d->reset_ms = e[k + 3]->integer;
		d->retry_ms = e[k + 4]->integer;
		d->next_ms = e[k + 5]->integer;
	}
	return 0;
}

/*
 * The step's reply as a whole: no error, an array of 1 + 6 nreply
 * elements. 0, or -1 (errmsg: the error, or what came instead).
 */
static int
rd_reply_shape(struct rd_store *s, const struct rd_node *node,
    const redisReply *reply, size_t nreply)
{
	char got[48], said[RD_SAID];

	if (reply->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: EVALSHA failed: %s%s", node->name,
		    rd_said(reply->str, reply->len, said),
		    !s->cluster && (rd_error_is(reply, "MOVED") ||
		    rd_error_is(reply, "ASK")) ? " (a Redis Cluster node:"
		    " set [store] backend = redis_cluster)" : "");
		return -1;
	}
	if (reply->type != REDIS_REPLY_ARRAY ||
	    reply->elements != 1 + RD_REPLY_PER_ITEM * nreply) {
		if (reply->type == REDIS_REPLY_ARRAY)
			snprintf(got, sizeof got, "an array of %zu",
			    reply->elements);
		else
			snprintf(got, sizeof got, "%s",
			    rd_reply_type(reply->type));
		rd_seterr(s, "%s: EVALSHA: unexpected reply: %s, not an"
		    " array of %zu integers (is db/redis/step.lua the"
		    " script of this rlgate?)", node->name, got,
		    1 + RD_REPLY_PER_ITEM * nreply);
		return -1;
	}
	return 0;
}

/*
 * Item i of the step's reply e, for it (NULL: an item of the probe),
 * answered at now: each field an integer within what the limiter can
 * give for its policy, admitted or rejected alike (limiter.h), or
 * exactly a skipped charge. 0, or -1 (errmsg, rd_field's).
 */
static int
rd_reply_item(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t i, const struct rlg_store_item *it,
    int64_t now)
{
	/* The probe's items: fixed_window, limit 1 (rd_build). */
	static const struct rlg_policy probe = { .name = (char *)"probe",
	    .lim = { .algorithm = RLG_ALG_FIXED_WINDOW, .limit = 1,
	    .window_ms = 1000 } };
	const struct rlg_policy *p = it != NULL ? it->policy : &probe;
	struct rlg_limiter_bounds b;
	size_t k = 1 + RD_REPLY_PER_ITEM * i;

	if (rlg_limiter_bounds(&p->lim, now, &b) != RLG_OK) {
		/* rd_check_items let only good policies through. */
		rd_seterr(s, "%s: EVALSHA: item %zu: no bounds for its"
		    " policy", node->name, i);
		return -1;
	}
	if (rd_field(s, node, e, k, p, 0, 1) != 0)
		return -1;
	/* A charge for a new key that did not apply: skipped. */
	if (it != NULL && it->if_new && e[k]->integer == 1 &&
	    rd_skipped(e, k, p))
		return 0;
	if (e[k]->integer == 1) {
		if (rd_field(s, node, e, k + 1, p, p->lim.limit,
		    p->lim.limit) != 0 ||
		    rd_field(s, node, e, k + 2, p, 0,
		    b.remaining_max) != 0 ||
		    rd_field(s, node, e, k + 3, p, 1,
		    b.delay_max) != 0 ||
		    rd_field(s, node, e, k + 4, p, 0, 0) != 0 ||
		    rd_field(s, node, e, k + 5, p, 1,
		    e[k + 3]->integer) != 0)
			return -1;
		return 0;
	}
	/*
	 * Rejected: reset_ms and next_ms are retry_ms (limiter.h); what is
	 * left to requests of cost 1 is 0 unless a costlier one was
	 * refused, up to the whole capacity.
	 */
	if (rd_field(s, node, e, k + 1, p, p->lim.limit,
	    p->lim.limit) != 0 ||
	    rd_field(s, node, e, k + 2, p, 0, it != NULL &&
	    rlg_store_item_cost(it) > 1 ? b.remaining_max + 1 : 0) != 0 ||
	    rd_field(s, node, e, k + 4, p, 1, b.delay_max) != 0 ||
	    rd_field(s, node, e, k + 3, p, e[k + 4]->integer,
	    e[k + 4]->integer) != 0 ||
	    rd_field(s, node, e, k + 5, p, e[k + 4]->integer,
	    e[k + 4]->integer) != 0)
		return -1;
	return 0;
}

/*
 * Whether the reply of an item from element k (admitted) is exactly what
 * the script answers for a skipped charge (rlg_store_skipped): limit and
 * remaining the policy's limit, reset_ms, retry_ms and next_ms 0.
 */
static bool
rd_skipped(const redisReply *const *e, size_t k, const struct rlg_policy *p)
{
	size_t f;

	for (f = 1; f < RD_REPLY_PER_ITEM; f++)
		if (e[k + f]->type != REDIS_REPLY_INTEGER)
			return false;
	return e[k + 1]->integer == p->lim.limit &&
	    e[k + 2]->integer == p->lim.limit &&
	    e[k + 3]->integer == 0 && e[k + 4]->integer == 0 &&
	    e[k + 5]->integer == 0;
}

/*
 * Element k of the step's reply e, a field of item (k - 1) / 6 of policy
 * p (now_ms when k is 0), must be an integer from lo to hi. Only a value
 * that is not costs a message. 0, or -1 (errmsg: the element, the field,
 * the value and the range).
 */
static int
rd_field(struct rd_store *s, const struct rd_node *node,
    const redisReply *const *e, size_t k, const struct rlg_policy *p,
    int64_t lo, int64_t hi)
{
	static const char *const fields[RD_REPLY_PER_ITEM] = { "admitted",
	    "limit", "remaining", "reset_ms", "retry_ms", "next_ms" };
	size_t item = (k - 1) / RD_REPLY_PER_ITEM,
	    f = (k - 1) % RD_REPLY_PER_ITEM;
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
