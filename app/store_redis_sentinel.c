/*
 * store_redis_sentinel.c: Redis Sentinel ([store] url =
 * redis+sentinel://HOST:PORT,.../MASTER). The store talks to one server,
 * node 0, as with redis://; only where it is comes from the sentinels,
 * asked again on every connect to it:
 *   1. SENTINEL get-master-addr-by-name MASTER to the sentinels in turn,
 *      from the one that answered last, each connected within
 *      connect_timeout_ms of its own and asked without a password (a
 *      sentinel's connection is kept while it answers). The reply must
 *      be two strings, a host of 1 to RD_SENTINEL_HOST_MAX bytes of
 *      A-Z a-z 0-9 . - _ : % and a port of 1 to 65535; anything else,
 *      nil (the sentinel knows no such master) or an error is that
 *      sentinel's failure, and the next is asked.
 *   2. The master is connected as a redis:// server would be (AUTH,
 *      SELECT, SCRIPT LOAD, within a fresh connect_timeout_ms), and ROLE
 *      must say "master": a sentinel's stale answer, or one given while a
 *      failover is under way, may name a replica, and rlgate never writes
 *      to one.
 * Any failure of the master afterwards (the connection lost, a timeout,
 * READONLY when it was demoted: every error reply fails a step) drops its
 * connection (store_redis_io.c: rd_failed), and the next connect, after
 * the same backoff as any server's, begins with step 1: so a failover is
 * followed on the first attempt after the sentinels have promoted a
 * replica. The master's address is logged when it changes ("store redis:
 * sentinel HOST:PORT says master NAME is at H:P"), once per handle.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_url.h"
#include "store_redis_parts.h"
#include "util.h"

/* The longest host a sentinel may name (DNS: 253; an IPv6 address with a
 * zone fits). */
#define RD_SENTINEL_HOST_MAX 253

static int rd_sentinel_ask(struct rd_store *s, struct rd_node *sn,
    char *host, int *port);
static int rd_sentinel_addr(struct rd_store *s, const struct rd_node *sn,
    const redisReply *r, char *host, int *port);
static void rd_sentinel_found(struct rd_store *s, const struct rd_node *sn,
    const char *host, int port);
static int rd_master_role(struct rd_store *s, struct rd_node *node);

/*
 * The sentinels of rc (its host, port and seeds) and the master as node
 * 0, its address unknown until a sentinel names it.
 */
void
rd_sentinel_open(struct rd_store *s, const struct rlg_redis_config *rc)
{
	struct rd_node *sn;
	size_t i;

	s->master = rlg_xstrdup(rc->master);
	s->nsentinels = rc->nseeds + 1;
	s->sentinels = rlg_xcalloc(s->nsentinels, sizeof *s->sentinels);
	for (i = 0; i < s->nsentinels; i++) {
		sn = &s->sentinels[i];
		sn->host = rlg_xstrdup(i == 0 ? rc->host :
		    rc->seeds[i - 1].host);
		sn->port = i == 0 ? rc->port : rc->seeds[i - 1].port;
		sn->sentinel = true;
		snprintf(sn->name, sizeof sn->name, strchr(sn->host, ':') !=
		    NULL ? "redis sentinel [%s]:%d" : "redis sentinel %s:%d",
		    sn->host, sn->port);
	}
	(void)rd_node_add(s, NULL, 0, NULL);
	snprintf(s->nodes[0].name, sizeof s->nodes[0].name, "redis master "
	    "%s (not found yet)", s->master);
}

/*
 * The master's connection (node 0): the open one, or, when its backoff
 * allows, a new one to where the sentinels say it is; a failure starts
 * or extends the backoff (rd_failed). 0, or -1 (errmsg).
 */
int
rd_sentinel_ready(struct rd_store *s)
{
	if (s->nodes[0].c != NULL)
		return 0;
	if (rd_backing_off(s, 0))
		return -1;
	if (rd_sentinel_connect(s) != 0) {
		(void)rd_failed(s, 0);
		return -1;
	}
	return 0;
}

/*
 * Steps 1 and 2 of the top: the master named by a sentinel, connected,
 * and ROLE master. 0, or -1 with errmsg set and node 0 disconnected.
 */
int
rd_sentinel_connect(struct rd_store *s)
{
	struct rd_node *node = &s->nodes[0], *sn = NULL;
	char host[RD_SENTINEL_HOST_MAX + 1], why[RLG_STORE_ERRMSG_MAX];
	size_t k, i = 0;
	int port = 0;

	why[0] = '\0';
	for (k = 0; k < s->nsentinels; k++) {
		i = (s->sentinel_next + k) % s->nsentinels;
		sn = &s->sentinels[i];
		if (rd_sentinel_ask(s, sn, host, &port) == 0)
			break;
		memcpy(why, s->base.errmsg, sizeof why);
	}
	if (k == s->nsentinels) {
		rd_seterr(s, "redis master %s: no sentinel named it (of %zu;"
		    " the last: %s)", s->master, s->nsentinels, why);
		return -1;
	}
	s->sentinel_next = i;
	if (node->host == NULL || node->port != port ||
	    strcmp(node->host, host) != 0) {
		free(node->host);
		node->host = rlg_xstrdup(host);
		node->port = port;
	}
	rd_sentinel_found(s, sn, host, port);
	s->connect_left_ms = s->connect_timeout_ms;
	if (rd_connect(s, node) != 0)
		return -1;
	if (rd_master_role(s, node) != 0) {
		rd_disconnect(node);
		return -1;
	}
	return 0;
}

/*
 * One sentinel asked where the master is: its connection (a new one
 * within connect_timeout_ms of its own), the command by the step's
 * deadline, the reply checked into host and port. 0, or -1 (errmsg; the
 * sentinel's connection dropped unless it answered in error or nil).
 */
static int
rd_sentinel_ask(struct rd_store *s, struct rd_node *sn, char *host,
    int *port)
{
	const char *argv[3] = { "SENTINEL", "get-master-addr-by-name",
	    s->master };
	size_t argvlen[3] = { 8, 23, strlen(s->master) };
	redisReply *reply;
	int rc;

	if (sn->c == NULL) {
		s->connect_left_ms = s->connect_timeout_ms;
		if (rd_connect(s, sn) != 0)
			return -1;
	}
	if (rd_command(s, sn, "SENTINEL get-master-addr-by-name", 3, argv,
	    argvlen, &reply) != 0) {
		rd_disconnect(sn);
		return -1;
	}
	rc = rd_sentinel_addr(s, sn, reply, host, port);
	freeReplyObject(reply);
	return rc;
}

/*
 * The reply of a sentinel to get-master-addr-by-name: two strings, a
 * host (bounded, of the bytes a name or an address has) and a port of 1
 * to 65535, into host (RD_SENTINEL_HOST_MAX + 1 bytes) and *port. 0, or
 * -1 (errmsg says what came instead).
 */
static int
rd_sentinel_addr(struct rd_store *s, const struct rd_node *sn,
    const redisReply *r, char *host, int *port)
{
	const redisReply *h, *p;
	char said[RD_SAID];
	long v = 0;
	size_t i;

	if (r->type == REDIS_REPLY_NIL) {
		rd_seterr(s, "%s: knows no master named %s", sn->name,
		    s->master);
		return -1;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: SENTINEL get-master-addr-by-name: %s",
		    sn->name, rd_said(r->str, r->len, said));
		return -1;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING) {
		rd_seterr(s, "%s: SENTINEL get-master-addr-by-name: "
		    "unexpected reply (%s), not a host and a port", sn->name,
		    rd_reply_type(r->type));
		return -1;
	}
	h = r->element[0];
	p = r->element[1];
	for (i = 0; i < h->len && i <= RD_SENTINEL_HOST_MAX; i++)
		if (!rlg_token_ok(h->str + i, 1, 1, ".-_:%"))
			break;
	if (h->len == 0 || h->len > RD_SENTINEL_HOST_MAX || i < h->len) {
		rd_seterr(s, "%s: SENTINEL get-master-addr-by-name: not a "
		    "host: %zu bytes \"%s\"", sn->name, h->len,
		    rd_said(h->str, h->len, said));
		return -1;
	}
	for (i = 0; i < p->len && i < 6 && p->str[i] >= '0' &&
	    p->str[i] <= '9'; i++)
		v = v * 10 + (p->str[i] - '0');
	if (p->len == 0 || i < p->len || v < 1 || v > 65535) {
		rd_seterr(s, "%s: SENTINEL get-master-addr-by-name: not a "
		    "port of 1 to 65535: \"%s\"", sn->name,
		    rd_said(p->str, p->len, said));
		return -1;
	}
	memcpy(host, h->str, h->len);
	host[h->len] = '\0';
	*port = (int)v;
	return 0;
}

/*
 * Where the master is: node 0's name, the line in s->found, and that line
 * logged when the address is not the one found before.
 */
static void
rd_sentinel_found(struct rd_store *s, const struct rd_node *sn,
    const char *host, int port)
{
	char at[sizeof s->master_at];
	bool v6 = strchr(host, ':') != NULL;

	snprintf(at, sizeof at, "%s%s%s:%d", v6 ? "[" : "", host,
	    v6 ? "]" : "", port);
	snprintf(s->nodes[0].name, sizeof s->nodes[0].name,
	    "redis master %s at %s", s->master, at);
	snprintf(s->found, sizeof s->found, "%s says master %s is at %s",
	    sn->name + 6, s->master, at);
	if (strcmp(at, s->master_at) == 0)
		return;
	memcpy(s->master_at, at, sizeof at);
	if (!rlg_log_store_quiet())
		rlg_log("store redis: %s", s->found);
}

/* ROLE on node: its first element must be "master". 0, or -1 (errmsg). */
static int
rd_master_role(struct rd_store *s, struct rd_node *node)
{
	const char *argv[1] = { "ROLE" };
	size_t argvlen[1] = { 4 };
	const redisReply *e;
	redisReply *reply;
	char said[RD_SAID];
	int rc = -1;

	if (rd_command(s, node, "ROLE", 1, argv, argvlen, &reply) != 0)
		return -1;
	e = reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 ?
	    reply->element[0] : NULL;
	if (e == NULL || (e->type != REDIS_REPLY_STRING &&
	    e->type != REDIS_REPLY_STATUS))
		rd_seterr(s, "%s: ROLE: unexpected reply (%s), not an array "
		    "naming a role", node->name, rd_reply_type(reply->type));
	else if (e->len != 6 || memcmp(e->str, "master", 6) != 0)
		rd_seterr(s, "%s: ROLE says %s, not master (the sentinels' "
		    "answer is stale, or a failover is under way)",
		    node->name, rd_said(e->str, e->len, said));
	else
		rc = 0;
	freeReplyObject(reply);
	return rc;
}

void
rd_sentinel_free(struct rd_store *s)
{
	size_t i;

	for (i = 0; i < s->nsentinels; i++) {
		rd_disconnect(&s->sentinels[i]);
		free(s->sentinels[i].host);
	}
	free(s->sentinels);
	free(s->master);
	s->sentinels = NULL;
	s->master = NULL;
	s->nsentinels = 0;
}
