/*
 * store_redis_cluster.c: the Redis store on a Redis Cluster
 * ([store] backend = redis_cluster): the slot map, a step's items in slot
 * groups, the redirections and retries of a cluster, and the EXISTS of a
 * charge for a new key whose key lies in another slot. Apart from the
 * step (store_redis.c), which is all a single server needs, because a
 * cluster is a protocol of its own on top of it.
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
 *      decides every item exactly as it would and writes nothing (but a
 *      refusal a ban counts, which a refused request writes: the request
 *      is then refused, in step 2, and counted once; an advisory item's
 *      such refusal, which refuses nothing, is written by the check and
 *      again by step 4: a dry_run policy with a ban, across slots, may
 *      count one refusal twice);
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
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "store.h"
#include "store_redis_parts.h"
#include "util.h"

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

/*
 * Where the command of rd_cluster_exec stands: the node to send it to
 * next, after ASKING or not, and the redirections, TRYAGAIN and
 * CLUSTERDOWN retries and the script reload spent so far.
 */
struct rd_try {
	unsigned slot;
	size_t ni;
	bool asking;
	bool reloaded;
	int redirects;
	int tryagain;
	int down;
};

static void *rd_regrow(void *old, size_t n, size_t size);
static void rd_grow_charges(struct rd_store *s, size_t n);
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
static int rd_follow(struct rd_store *s, struct rd_try *t,
    redisReply *reply);
static int rd_try_again(struct rd_store *s, struct rd_try *t,
    redisReply *reply);
static int rd_redirect(struct rd_store *s, size_t ni,
    const redisReply *reply, unsigned want, unsigned *slotp,
    size_t *target);
static int rd_refresh(struct rd_store *s);
static int rd_slots_apply(struct rd_store *s, size_t ni,
    const redisReply *reply);
static int rd_slots_entry(struct rd_store *s, size_t ni,
    const redisReply *e, size_t i);
static void rd_compact(struct rd_store *s);
static unsigned rd_crc_slot(const char *p, size_t len);
static void rd_sleep_ms(int64_t ms);
static bool rd_host_ok(const char *host, size_t len);

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
int
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

/*
 * A scratch array grown: old freed (scratch is rebuilt by each step, never
 * copied) and n zeroed items of size bytes in its place.
 */
static void *
rd_regrow(void *old, size_t n, size_t size)
{
	free(old);
	return rlg_xcalloc(n, size);
}

void
rd_cluster_free(struct rd_store *s)
{
	free(s->item_slot);
	free(s->order);
	free(s->gstart);
	free(s->gslot);
	free(s->citems);
	free(s->cmap);
	free(s->cdec);
}

/* Makes room for n items in the charge scratch of the handle. */
static void
rd_grow_charges(struct rd_store *s, size_t n)
{
	if (n <= s->ccap)
		return;
	s->ccap = n;
	s->citems = rd_regrow(s->citems, n, sizeof *s->citems);
	s->cmap = rd_regrow(s->cmap, n, sizeof *s->cmap);
	s->cdec = rd_regrow(s->cdec, n, sizeof *s->cdec);
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
	int rc = -1;

	need = strlen(item->client) + strlen(item->policy->name) + 8;
	rd_reserve(s, 2, need);
	s->argv[0] = "EXISTS";
	s->argvlen[0] = 6;
	(void)rd_state_key(s, 1, item->client, item->policy->name, s->text);
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
		s->itemcap = n;
		s->item_slot = rd_regrow(s->item_slot, n, sizeof *s->item_slot);
		s->order = rd_regrow(s->order, n, sizeof *s->order);
		s->gstart = rd_regrow(s->gstart, n + 1, sizeof *s->gstart);
		s->gslot = rd_regrow(s->gslot, n, sizeof *s->gslot);
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
	struct rd_try t = { .slot = slot };
	redisReply *reply;

	if (rd_map_ready(s) != 0)
		return -1;
	t.ni = (size_t)s->slots[slot] - 1;
	for (;;) {
		if (s->slots[slot] == 0 && !t.asking) {
			rd_seterr(s, "%s: no master serves slot %u (CLUSTER"
			    " SLOTS)", s->name, slot);
			s->map_stale = true;
			return -1;
		}
		if (rd_ready(s, t.ni) != 0)
			return -1;
		reply = rd_exec_on(s, t.ni, t.asking, argc);
		if (reply == NULL) {
			(void)rd_failed(s, t.ni);
			return -1;
		}
		if (reply->type != REDIS_REPLY_ERROR)
			break;
		if (rd_not_loaded(reply) && !t.reloaded) {
			freeReplyObject(reply);
			t.reloaded = true;
			if (rd_load_script(s, &s->nodes[t.ni]) != 0) {
				(void)rd_failed(s, t.ni);
				return -1;
			}
			continue;
		}
		if (rd_error_is(reply, "MOVED") || rd_error_is(reply, "ASK")) {
			if (rd_follow(s, &t, reply) != 0)
				return -1;
			continue;
		}
		if (rd_error_is(reply, "TRYAGAIN")) {
			if (rd_try_again(s, &t, reply) != 0)
				return -1;
			continue;
		}
		if (rd_error_is(reply, "CLUSTERDOWN") &&
		    t.down < RD_CLUSTERDOWN_MAX) {
			freeReplyObject(reply);
			t.down++;
			s->map_stale = true;
			(void)rd_map_ready(s);
			t.asking = false;
			t.ni = (size_t)s->slots[slot] - 1;
			continue;
		}
		break;
	}
	*out = reply;
	*nodep = t.ni;
	return 0;
}

/*
 * A MOVED or ASK reply (freed here) to the command on t->ni: the node it
 * names becomes the next to ask, after ASKING for an ASK; a MOVED puts
 * the slot there in the map at once and a refresh follows. At most
 * RD_REDIRECTS_MAX of them. 0 to send the command again, or -1 (errmsg).
 */
static int
rd_follow(struct rd_store *s, struct rd_try *t, redisReply *reply)
{
	char said[RD_SAID];
	unsigned rslot;
	size_t target;

	if (++t->redirects > RD_REDIRECTS_MAX) {
		rd_seterr(s, "%s: %s: more than %d"
		    " redirections for slot %u (the last: "
		    "%s)", s->nodes[t->ni].name,
		    rd_call_name(&s->nodes[t->ni]),
		    RD_REDIRECTS_MAX, t->slot,
		    rd_said(reply->str, reply->len, said));
		freeReplyObject(reply);
		s->map_stale = true;
		return -1;
	}
	if (rd_redirect(s, t->ni, reply, t->slot, &rslot, &target) != 0) {
		freeReplyObject(reply);
		(void)rd_failed(s, t->ni);
		return -1;
	}
	t->asking = rd_error_is(reply, "ASK");
	freeReplyObject(reply);
	if (!t->asking) {
		/* Moved for good: the map follows at once. */
		s->slots[rslot] = (uint16_t)(target + 1);
		s->map_stale = true;
	}
	t->ni = target;
	return 0;
}

/*
 * A TRYAGAIN reply (freed here): a migration holds some of the keys on
 * each side. After a wait (5 ms doubling) the command goes to the slot's
 * master again, unless it was tried RD_TRYAGAIN_MAX times or the wait
 * would end past the deadline. 0 to send it again, or -1 (errmsg).
 */
static int
rd_try_again(struct rd_store *s, struct rd_try *t, redisReply *reply)
{
	char said[RD_SAID], how[64];
	int64_t wait;
	bool late;

	/* A wait that would end past the deadline: none. */
	wait = (int64_t)RD_TRYAGAIN_WAIT_MS << t->tryagain;
	late = wait >= s->deadline_ms - rd_mono_ms();
	if (t->tryagain < RD_TRYAGAIN_MAX && !late) {
		freeReplyObject(reply);
		rd_sleep_ms(wait);
		t->tryagain++;
		/*
		 * From the slot's master again (the keys may have moved on
		 * meanwhile), with its own redirections.
		 */
		t->asking = false;
		t->redirects = 0;
		t->ni = (size_t)s->slots[t->slot] - 1;
		return 0;
	}
	if (t->tryagain < RD_TRYAGAIN_MAX)
		snprintf(how, sizeof how, ", timed out after %d ms",
		    s->timeout_ms);
	else
		how[0] = '\0';
	rd_seterr(s, "%s: %s: %s (slot %u is being migrated; tried %d"
	    " times%s)", s->nodes[t->ni].name, rd_call_name(&s->nodes[t->ni]),
	    rd_said(reply->str, reply->len, said), t->slot, t->tryagain + 1,
	    how);
	freeReplyObject(reply);
	return -1;
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
	rd_seterr(s, "%s: %s: a redirection rlgate cannot read (for"
	    " slot %u): %s", s->nodes[ni].name, rd_call_name(&s->nodes[ni]),
	    want,
	    rd_said(reply->str, reply->len, said));
	return -1;
}

/*
 * Reads the slot map if there is none yet, or if it is stale and the last
 * reading is RD_REFRESH_MIN_MS old. 0 when there is a map to go by (a
 * stale one too: better than none), or -1 (errmsg).
 */
int
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
		if (rd_slots_entry(s, ni, reply->element[i], i) != 0)
			return -1;
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
 * Entry i of a CLUSTER SLOTS reply from node ni, e: [first, last, [host,
 * port, ...], ...] with 0 <= first <= last < RD_SLOTS, a host name or
 * address (or "" or "?": ni's own) and a port of 1 to 65535. 0, or -1
 * (errmsg).
 */
static int
rd_slots_entry(struct rd_store *s, size_t ni, const redisReply *e, size_t i)
{
	const redisReply *m, *h;
	char said[RD_SAID];

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
unsigned
rd_slot(const char *client)
{
	return rd_crc_slot(client, strcspn(client, "}"));
}

/* CRC16 (XMODEM, as Redis) of len bytes at p, mod 16384. */
static unsigned
rd_crc_slot(const char *p, size_t len)
{
	unsigned crc = 0;
	size_t i;
	int k;

	for (i = 0; i < len; i++) {
		crc ^= (unsigned)(unsigned char)p[i] << 8;
		for (k = 0; k < 8; k++)
			crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 :
			    crc << 1;
		crc &= 0xffff;
	}
	return crc & (RD_SLOTS - 1);
}

/*
 * Any key's slot, as Redis hashes it: its hash tag (between the first
 * '{' and the first '}' after it) when that is not empty, else the whole
 * key; then the command on that slot's master (rd_cluster_exec).
 */
int
rd_cluster_key_exec(struct rd_store *s, const char *key, int argc,
    redisReply **out, size_t *nodep)
{
	const char *open = strchr(key, '{'), *close;
	unsigned slot;

	close = open != NULL ? strchr(open + 1, '}') : NULL;
	if (close != NULL && close > open + 1)
		slot = rd_crc_slot(open + 1, (size_t)(close - open - 1));
	else
		slot = rd_crc_slot(key, strlen(key));
	return rd_cluster_exec(s, slot, argc, out, nodep);
}

static void
rd_sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
	    (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * A host a server may name (CLUSTER SLOTS, MOVED, ASK): 1 to 255 bytes of
 * a name or an address, IPv6 included (':', and '%' for a zone).
 */
static bool
rd_host_ok(const char *host, size_t len)
{
	return rlg_token_ok(host, len, 255, ".-_:%");
}
