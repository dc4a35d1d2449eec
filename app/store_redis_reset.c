/*
 * store_redis_reset.c: rlgate --reset on Redis: a client's state keys
 * deleted, under one policy or every one. Every key of a client shares
 * its hash tag (rlg:{CLIENT}:POLICY, its log POLICY:log), so they are on
 * one node of a cluster: the deletes go to that slot's master.
 *
 * Under every policy, the names are not known here (the keys of a policy
 * the config no longer has are the client's too): the node's keys are
 * walked with SCAN MATCH rlg:{CLIENT}:*, RD_RESET_COUNT keys looked at per
 * call, so that Redis serves other clients between the calls, at most
 * RD_RESET_CALLS calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_redis_parts.h"
#include "util.h"

#define RD_RESET_COUNT "1000"
#define RD_RESET_CALLS 1000000

static int rd_reset_exec(struct rd_store *s, const char *key, int argc,
    redisReply **out, size_t *ni);
static int rd_reset_del(struct rd_store *s, const char *key,
    const redisReply *keys, int64_t *deleted);
static size_t rd_glob_escape(const char *in, char *out);

int
rd_reset(struct rlg_store *base, const char *client, const char *policy,
    int64_t *deleted)
{
	struct rd_store *s = (struct rd_store *)base;
	char key[2 * RLG_CLIENT_KEY_MAX + 3 * RLG_POLICY_NAME_MAX + 32];
	char pat[sizeof key], log[sizeof key + 8], cursor[32] = "0";
	redisReply *r;
	size_t ni = 0, calls, at;
	int rc = RLG_OK;

	*deleted = 0;
	if (s->nnodes == 0)
		return RLG_ESTORE;      /* no url: errmsg says so since open */
	rd_budget(s);
	if (policy != NULL) {
		snprintf(key, sizeof key, "rlg:{%s}:%s", client, policy);
		snprintf(log, sizeof log, "%s:log", key);
		rd_reserve(s, 3, 0);
		s->argv[0] = "DEL";
		s->argv[1] = key;
		s->argv[2] = log;
		if (rd_reset_exec(s, key, 3, &r, &ni) != RLG_OK)
			return RLG_ESTORE;
		*deleted = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
		freeReplyObject(r);
		rd_node_ok(s, ni);
		return RLG_OK;
	}
	snprintf(key, sizeof key, "rlg:{%s}:", client);
	at = (size_t)snprintf(pat, sizeof pat, "rlg:{");
	at += rd_glob_escape(client, pat + at);
	snprintf(pat + at, sizeof pat - at, "}:*");
	for (calls = 0; rc == RLG_OK && calls < RD_RESET_CALLS; calls++) {
		rd_reserve(s, 6, 0);
		s->argv[0] = "SCAN";
		s->argv[1] = cursor;
		s->argv[2] = "MATCH";
		s->argv[3] = pat;
		s->argv[4] = "COUNT";
		s->argv[5] = RD_RESET_COUNT;
		if (rd_reset_exec(s, key, 6, &r, &ni) != RLG_OK)
			return RLG_ESTORE;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[0]->len >= sizeof cursor ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			rd_seterr(s, "%s: reset: SCAN answered %s, not a cursor"
			    " and keys", s->nodes[ni].name,
			    rd_reply_type(r->type));
			freeReplyObject(r);
			return rd_failed(s, ni);
		}
		memcpy(cursor, r->element[0]->str, r->element[0]->len);
		cursor[r->element[0]->len] = '\0';
		rc = rd_reset_del(s, key, r->element[1], deleted);
		freeReplyObject(r);
		if (strcmp(cursor, "0") == 0)
			break;
	}
	if (rc == RLG_OK)
		rd_node_ok(s, ni);
	return rc;
}

/*
 * The command in s->argv (lengths filled here) on the master of key's
 * slot: RLG_OK with *out (not an error reply), or RLG_ESTORE.
 */
static int
rd_reset_exec(struct rd_store *s, const char *key, int argc,
    redisReply **out, size_t *ni)
{
	char said[RD_SAID];
	int i;

	for (i = 0; i < argc; i++)
		s->argvlen[i] = strlen(s->argv[i]);
	*ni = 0;
	if (s->cluster) {
		if (rd_cluster_key_exec(s, key, argc, out, ni) != 0)
			return RLG_ESTORE;
	} else {
		if (rd_ready0(s) != 0)
			return RLG_ESTORE;
		if ((*out = rd_exec_on(s, 0, false, argc)) == NULL)
			return rd_failed(s, 0);
	}
	if ((*out)->type == REDIS_REPLY_ERROR) {
		rd_seterr(s, "%s: reset (%s): %s", s->nodes[*ni].name,
		    s->argv[0], rd_said((*out)->str, (*out)->len, said));
		freeReplyObject(*out);
		return RLG_ESTORE;
	}
	return RLG_OK;
}

/* The keys SCAN found deleted; the states among them (not logs) counted. */
static int
rd_reset_del(struct rd_store *s, const char *key, const redisReply *keys,
    int64_t *deleted)
{
	redisReply *r;
	size_t i, n = keys->elements, ni;

	if (n == 0)
		return RLG_OK;
	rd_reserve(s, n + 1, 0);
	s->argv[0] = "DEL";
	for (i = 0; i < n; i++) {
		if (keys->element[i]->type != REDIS_REPLY_STRING)
			return RLG_OK;  /* not a key: nothing deleted */
		s->argv[i + 1] = keys->element[i]->str;
		if (keys->element[i]->len < 4 || strcmp(keys->element[i]->str +
		    keys->element[i]->len - 4, ":log") != 0)
			(*deleted)++;
	}
	if (rd_reset_exec(s, key, (int)n + 1, &r, &ni) != RLG_OK)
		return RLG_ESTORE;
	freeReplyObject(r);
	return RLG_OK;
}

/* in with the characters SCAN's MATCH gives a meaning escaped; the
 * length written (out has room for twice in's length, and a NUL). */
static size_t
rd_glob_escape(const char *in, char *out)
{
	size_t n = 0;

	for (; *in != '\0'; in++) {
		if (strchr("*?[]\\", *in) != NULL)
			out[n++] = '\\';
		out[n++] = *in;
	}
	out[n] = '\0';
	return n;
}
