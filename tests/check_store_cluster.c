/*
 * check_store_cluster.c: what only the Redis Cluster store does (suite
 * "store_redis_cluster", against the three masters its fixture creates;
 * the tests every backend runs are in check_store.c).
 *
 * "cluster": clients spread over the masters on the slots Redis
 * computes, with no redirection; a slot migrated between requests (ASK,
 * then MOVED) and under load from four threads, counts exact; the
 * library flushed on every master; two policies keyed by clients in two
 * slots, checked then committed (no quota spent by a rejected request,
 * round trips counted); the seeds (dead, one dead, not a cluster); an
 * ACL user without FUNCTION (EVALSHA); the bounds on MOVED, ASK,
 * TRYAGAIN and CLUSTERDOWN against a fake node.
 * "cluster_faults": a master stopped (RLG_ESTORE for its clients, answers
 * for the others, CLUSTERDOWN once the cluster needs full coverage) and
 * started again.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "check_store.h"
#include "store_fixture.h"
#include "util.h"

/* One command to cluster node i (0..2), database 0; never an error. */
#define CL(i, ...) rcmd(cluster_srv.port[i], NULL, 0, __VA_ARGS__)

/* The slot of a key, as the cluster says (CLUSTER KEYSLOT). */
static int
cl_keyslot(const char *key)
{
	redisReply *r = CL(0, "CLUSTER KEYSLOT %s", key);
	int slot = (int)r->integer;

	freeReplyObject(r);
	return slot;
}

/* The node (0..2) that serves slot, as node `ask` sees it; -1: none. */
static int
cl_owner_seen_by(int ask, int slot)
{
	redisReply *r = CL(ask, "CLUSTER SLOTS"), *e;
	int i, port = -1;
	size_t k;

	for (k = 0; k < r->elements; k++) {
		e = r->element[k];
		if (slot >= e->element[0]->integer &&
		    slot <= e->element[1]->integer)
			port = (int)e->element[2]->element[1]->integer;
	}
	freeReplyObject(r);
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++)
		if (cluster_srv.port[i] == port)
			return i;
	return -1;
}

static int
cl_owner(int slot)
{
	return cl_owner_seen_by(0, slot);
}

/* The node that serves client's keys. */
static int
cl_client_node(const char *client)
{
	char key[512];

	redis_key(key, sizeof key, "default", client, false);
	return cl_owner(cl_keyslot(key));
}

/* A client key "PREFIX-N" whose keys node i serves, into buf. */
static void
cl_client_on(int i, const char *prefix, char *buf, size_t size)
{
	int n;

	for (n = 0; n < 1000; n++) {
		snprintf(buf, size, "%s-%d", prefix, n);
		if (cl_client_node(buf) == i)
			return;
	}
	ck_abort_msg("no client of node %d", i);
}

/*
 * A number from INFO section of node i: the integer after field (e.g.
 * "errorstat_MOVED:count=", "cmdstat_fcall:calls="); 0 when absent.
 */
static int64_t
cl_info(int i, const char *section, const char *field)
{
	redisReply *r = CL(i, "INFO %s", section);
	const char *at = strstr(r->str, field);
	int64_t v = at != NULL ? strtoll(at + strlen(field), NULL, 10) : 0;

	freeReplyObject(r);
	return v;
}

/* Summed over the three masters. */
static int64_t
cl_info_sum(const char *section, const char *field)
{
	int64_t v = 0;
	int i;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++)
		v += cl_info(i, section, field);
	return v;
}

static void
cl_resetstat(void)
{
	redisReply *r;
	int i;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		r = CL(i, "CONFIG RESETSTAT");
		freeReplyObject(r);
	}
}

/*
 * The count field of a state read on node i itself, -1 when it has none
 * there: ASKING first, so that a node importing the slot answers too.
 */
static int64_t
cl_count_on(int i, const char *policy_name, const char *client)
{
	struct timeval tv = { 5, 0 };
	redisContext *c;
	redisReply *r;
	char key[512];
	int64_t v;

	redis_key(key, sizeof key, policy_name, client, false);
	c = redisConnectWithTimeout("127.0.0.1", cluster_srv.port[i], tv);
	ck_assert(c != NULL && c->err == 0);
	redisSetTimeout(c, tv);
	r = redisCommand(c, "ASKING");
	ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = redisCommand(c, "HGET %s count", key);
	ck_assert(r != NULL);
	/* ASK: a node migrating the slot away has no such key. */
	ck_assert_msg(r->type != REDIS_REPLY_ERROR || strncmp(r->str, "ASK ",
	    4) == 0, "HGET %s: %s", key, r->str);
	v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
	freeReplyObject(r);
	redisFree(c);
	return v;
}

/* "CLUSTER MYID" of node i into id. */
static void
cl_id(int i, char *id, size_t size)
{
	redisReply *r = CL(i, "CLUSTER MYID");

	snprintf(id, size, "%s", r->str);
	freeReplyObject(r);
}

/* Migration, step 1: slot IMPORTING on b from a, MIGRATING on a to b. */
static void
cl_migrate_open(int slot, int a, int b)
{
	char ida[64], idb[64];
	redisReply *r;

	cl_id(a, ida, sizeof ida);
	cl_id(b, idb, sizeof idb);
	r = CL(b, "CLUSTER SETSLOT %d IMPORTING %s", slot, ida);
	freeReplyObject(r);
	r = CL(a, "CLUSTER SETSLOT %d MIGRATING %s", slot, idb);
	freeReplyObject(r);
}

/* Step 2: MIGRATE every key of slot from a to b; how many there were. */
static size_t
cl_migrate_keys(int slot, int a, int b)
{
	const char *argv[1000 + 8];
	char port[16];
	redisReply *keys, *r;
	struct timeval tv = { 5, 0 };
	redisContext *c;
	size_t n, i;

	keys = CL(a, "CLUSTER GETKEYSINSLOT %d 1000", slot);
	n = keys->elements;
	if (n > 0) {
		snprintf(port, sizeof port, "%d", cluster_srv.port[b]);
		argv[0] = "MIGRATE";
		argv[1] = "127.0.0.1";
		argv[2] = port;
		argv[3] = "";
		argv[4] = "0";
		argv[5] = "5000";
		argv[6] = "KEYS";
		for (i = 0; i < n; i++)
			argv[7 + i] = keys->element[i]->str;
		c = redisConnectWithTimeout("127.0.0.1", cluster_srv.port[a],
		    tv);
		ck_assert(c != NULL && c->err == 0);
		redisSetTimeout(c, tv);
		r = redisCommandArgv(c, (int)(7 + n), argv, NULL);
		ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS,
		    "MIGRATE: %s", r != NULL && r->str != NULL ? r->str :
		    c->errstr);
		freeReplyObject(r);
		redisFree(c);
	}
	freeReplyObject(keys);
	return n;
}

/* Step 3: slot belongs to b, told to b, to a, then to the third. */
static void
cl_migrate_close(int slot, int a, int b)
{
	char idb[64];
	redisReply *r;
	int i;

	cl_id(b, idb, sizeof idb);
	r = CL(b, "CLUSTER SETSLOT %d NODE %s", slot, idb);
	freeReplyObject(r);
	r = CL(a, "CLUSTER SETSLOT %d NODE %s", slot, idb);
	freeReplyObject(r);
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		if (i == a || i == b)
			continue;
		r = CL(i, "CLUSTER SETSLOT %d NODE %s", slot, idb);
		freeReplyObject(r);
	}
}

/*
 * Many clients spread over the three masters, each counted exactly, with
 * its keys on the master of its slot: rlgate's slot is the cluster's
 * (CLUSTER KEYSLOT, COUNTKEYSINSLOT) for every kind of client key, and
 * once the map is read no request is redirected.
 */
START_TEST(test_cluster_spread)
{
	char *path = path_in("spread");
	struct rlg_policy p = policy(5, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 3, 10,
	    0);
	struct rlg_store *s = open_ok(path, 0);
	const char *odd[] = { "a}b", "{x}", "x{", "10.0.0.1|k:0a1b",
	    "2001:db8::/64", "unknown", "k:ffee" };
	char client[64], key[512];
	int per_node[RLG_TEST_CLUSTER_NODES] = { 0 };
	int i, k, slot, owner;
	size_t j;
	redisReply *r;
	int64_t total = 0;

	cl_resetstat();
	for (i = 0; i < 300; i++) {
		snprintf(client, sizeof client, "10.%d.%d.%d", i % 7, i / 7,
		    i % 251);
		for (k = 0; k < 7; k++)
			ck_assert_int_eq(hit(s, &p, client, T1, NULL), k < 5);
	}
	for (j = 0; j < sizeof odd / sizeof odd[0]; j++) {
		ck_assert(hit(s, &p, odd[j], T1, NULL));
		ck_assert(hit(s, &sl, odd[j], T1, NULL));
		ck_assert(hit(s, &sl, odd[j], T1 + 1, NULL));
	}
	/* Not one MOVED or ASK: every request went to the right master. */
	ck_assert_int_eq(cl_info_sum("errorstats", "errorstat_MOVED:count="),
	    0);
	ck_assert_int_eq(cl_info_sum("errorstats", "errorstat_ASK:count="),
	    0);

	for (i = 0; i < 300; i++) {
		snprintf(client, sizeof client, "10.%d.%d.%d", i % 7, i / 7,
		    i % 251);
		redis_key(key, sizeof key, "default", client, false);
		slot = cl_keyslot(key);
		owner = cl_owner(slot);
		ck_assert_int_ge(owner, 0);
		per_node[owner]++;
		ck_assert_int_eq(cl_count_on(owner, "default", client), 5);
		r = CL(owner, "CLUSTER COUNTKEYSINSLOT %d", slot);
		ck_assert_int_ge(r->integer, 1);
		freeReplyObject(r);
	}
	for (j = 0; j < sizeof odd / sizeof odd[0]; j++) {
		redis_key(key, sizeof key, "sl", odd[j], true);
		owner = cl_owner(cl_keyslot(key));
		ck_assert_int_eq(cl_count_on(owner, "default", odd[j]), 1);
		ck_assert_int_eq(cl_count_on(owner, "sl", odd[j]), 2);
		r = CL(owner, "LLEN %s", key);
		ck_assert_int_eq(r->integer, 2);
		freeReplyObject(r);
	}
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		ck_assert_msg(per_node[i] >= 50, "node %d holds %d clients",
		    i, per_node[i]);
		r = CL(i, "DBSIZE");
		total += r->integer;
		freeReplyObject(r);
	}
	/* 300 states, and per odd client two states and one log. */
	ck_assert_int_eq(total, 300 + 3 * (int64_t)(sizeof odd /
	    sizeof odd[0]));
	ck_assert_int_eq(nstates(path), 300 + 2 * (int64_t)(sizeof odd /
	    sizeof odd[0]));
	rlg_store_close(s);
}
END_TEST

/*
 * A client's slot moves from its master a to b while its requests go on,
 * the counts exact before, during and after: keys still on a are served
 * there; a new client of the slot, and this one once its keys moved, are
 * served on b after ASK (the map unchanged); once the slot is b's, MOVED
 * takes the handle there for good. A sliding log (two keys) follows too,
 * and so does a request of two policies whose keys all moved; a request
 * of two policies of a new client gets TRYAGAIN until the slot has moved.
 */
START_TEST(test_cluster_migration)
{
	char *path = path_in("migrate");
	struct rlg_policy p = policy(100, 60);
	struct rlg_policy sl = alg_policy(name_sl, RLG_ALG_SLIDING_LOG, 50, 60,
	    0);
	struct rlg_policy q = policy(100, 60);
	struct rlg_store *s = open_ok(path, 0);
	struct rlg_store_item items[2];
	char c[32], d[64], e[64], key[512];
	struct rlg_decision dd, two[2];
	int slot, a, b, i, n = 0;
	int64_t asks, moved, t0;

	snprintf(c, sizeof c, "203.0.113.7");
	redis_key(key, sizeof key, "default", c, false);
	slot = cl_keyslot(key);
	a = cl_owner(slot);
	b = (a + 1) % RLG_TEST_CLUSTER_NODES;
	/* Other clients of the same slot (their tag is c), new during it. */
	snprintf(d, sizeof d, "%s}new", c);
	snprintf(e, sizeof e, "%s}two", c);
	q.name = name_hour;
	cl_resetstat();

	/* Before. */
	for (i = 0; i < 10; i++, n++)
		ck_assert(hit(s, &p, c, T1, NULL));
	ck_assert(hit(s, &sl, c, T1, NULL));
	ck_assert_int_eq(cl_count_on(a, "default", c), 10);

	/* During, the keys still on a: served there. */
	cl_migrate_open(slot, a, b);
	for (i = 0; i < 10; i++, n++)
		ck_assert(hit(s, &p, c, T1, NULL));
	ck_assert(hit(s, &sl, c, T1, NULL));
	ck_assert_int_eq(cl_count_on(a, "default", c), 20);
	ck_assert_int_eq(cl_info(a, "errorstats", "errorstat_ASK:count="),
	    0);
	/* A new client of the slot: ASK to b, served there. */
	for (i = 0; i < 5; i++) {
		ck_assert(hit(s, &p, d, T1, &dd));
		ck_assert_int_eq(dd.remaining, 99 - i);
	}
	asks = cl_info(a, "errorstats", "errorstat_ASK:count=");
	ck_assert_int_eq(asks, 5);
	ck_assert_int_eq(cl_count_on(b, "default", d), 5);
	ck_assert_int_eq(cl_count_on(a, "default", d), -1);   /* an ASK */
	asks++;

	/* During, the keys moved to b: ASK, served on b. */
	ck_assert_uint_eq(cl_migrate_keys(slot, a, b), 3);
	for (i = 0; i < 10; i++, n++) {
		ck_assert(hit(s, &p, c, T1, &dd));
		ck_assert_int_eq(dd.remaining, 100 - n - 1);
	}
	ck_assert(hit(s, &sl, c, T1, &dd));
	ck_assert_int_eq(dd.remaining, 50 - 3);
	ck_assert_int_eq(cl_info(a, "errorstats", "errorstat_ASK:count="),
	    asks + 11);
	/* Two policies, every key there: served after ASK too. */
	items[0] = (struct rlg_store_item){ &p, c, false, false, 1 };
	items[1] = (struct rlg_store_item){ &sl, c, false, false, 1 };
	ck_assert_msg(rlg_store_step(s, items, 2, T1, two) == RLG_OK, "%s",
	    rlg_store_errmsg(s));
	ck_assert(two[0].admitted && two[1].admitted);
	ck_assert_int_eq(two[0].remaining, 100 - ++n);
	ck_assert_int_eq(two[1].remaining, 50 - 4);
	/*
	 * Two policies of a new client: its keys are missing on both
	 * sides, and Redis answers TRYAGAIN to several keys missing on the
	 * importing side: retried, then a failure that wrote nothing.
	 */
	items[0].client = e;
	items[1] = (struct rlg_store_item){ &q, e, false, false, 1 };
	t0 = mono_ms();
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, two), RLG_ESTORE);
	ck_assert_int_ge(mono_ms() - t0, 5 + 10 + 20 + 40 + 80);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "TRYAGAIN") != NULL, "%s",
	    rlg_store_errmsg(s));
	ck_assert_int_eq(cl_count_on(b, "default", e), -1);
	ck_assert_int_eq(cl_count_on(b, "hour", e), -1);
	ck_assert_int_eq(cl_count_on(b, "default", c), 31);
	ck_assert_int_eq(cl_count_on(a, "default", c), -1);
	/* The map was not changed by ASK: still a first. */
	ck_assert_int_eq(cl_info_sum("errorstats", "errorstat_MOVED:count="),
	    0);

	/* After: the slot is b's; MOVED once, then straight to b. */
	cl_migrate_close(slot, a, b);
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, two), RLG_OK);
	ck_assert(two[0].admitted && two[1].admitted);
	ck_assert_int_eq(cl_count_on(b, "hour", e), 1);
	for (i = 0; i < 10; i++, n++)
		ck_assert(hit(s, &p, c, T1, NULL));
	moved = cl_info(a, "errorstats", "errorstat_MOVED:count=");
	ck_assert_int_eq(moved, 1);
	ck_assert_int_eq(cl_count_on(b, "default", c), 41);
	for (; n < 100; n++)
		ck_assert(hit(s, &p, c, T1, NULL));
	ck_assert(!hit(s, &p, c, T1, &dd));
	ck_assert_int_gt(dd.retry_ms, 0);
	ck_assert_int_eq(count_of(path, "default", c), 100);
	ck_assert_int_eq(count_of(path, "default", d), 5);
	ck_assert_int_eq(cl_count_on(b, "sl", c), 4);
	ck_assert_int_eq(cl_info(a, "errorstats", "errorstat_MOVED:count="),
	    1);
	/* Another handle, whose map is fresh: no redirection at all. */
	rlg_store_close(s);
	s = open_ok(path, 0);
	ck_assert(hit(s, &p, d, T1, &dd));
	ck_assert_int_eq(dd.remaining, 94);
	ck_assert_int_eq(cl_info(a, "errorstats", "errorstat_MOVED:count="),
	    1);
	rlg_store_close(s);
}
END_TEST

/* Threads hammering one client while its slot moves. */
struct mig_worker {
	pthread_t tid;
	const char *path;
	const char *client;
	const struct rlg_policy *p;
	volatile int *stop;
	long sent;
	long admitted;
	long errors;
	char errmsg[256];
};

static void *
mig_main(void *arg)
{
	struct mig_worker *w = arg;
	struct rlg_store_config cfg;
	struct rlg_store_item item = { w->p, w->client, false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	int rc;

	store_cfg(&cfg, w->path, 0);
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	if (rc != RLG_OK) {
		snprintf(w->errmsg, sizeof w->errmsg, "%s",
		    rlg_store_errmsg(s));
		w->errors++;
	}
	while (!*w->stop && w->sent < 200000) {
		rc = rlg_store_step(s, &item, 1, T1, &d);
		w->sent++;
		if (rc != RLG_OK) {
			w->errors++;
			snprintf(w->errmsg, sizeof w->errmsg, "%s",
			    rlg_store_errmsg(s));
		} else if (d.admitted) {
			__atomic_add_fetch(&w->admitted, 1, __ATOMIC_RELAXED);
		}
	}
	rlg_store_close(s);
	return NULL;
}

/*
 * Four threads, a handle each, send one client's requests without pause
 * while its slot moves (the three steps, a pause after each): not one
 * error, and exactly limit admitted and counted.
 */
START_TEST(test_cluster_migration_load)
{
	enum { NW = 4, LIMIT = 3000 };
	char *path = path_in("migload");
	struct rlg_policy p = policy(LIMIT, 600);
	struct mig_worker w[NW];
	volatile int stop = 0;
	char key[512];
	long admitted, sent = 0, errors = 0;
	int64_t t0;
	int slot, a, b, i;

	redis_key(key, sizeof key, "default", "198.51.100.9", false);
	slot = cl_keyslot(key);
	a = cl_owner(slot);
	b = (a + 2) % RLG_TEST_CLUSTER_NODES;
	cl_resetstat();
	memset(w, 0, sizeof w);
	for (i = 0; i < NW; i++) {
		w[i].path = path;
		w[i].client = "198.51.100.9";
		w[i].p = &p;
		w[i].stop = &stop;
		ck_assert_int_eq(pthread_create(&w[i].tid, NULL, mig_main,
		    &w[i]), 0);
	}
	/* Some of the quota used before the migration starts. */
	for (t0 = mono_ms(); mono_ms() - t0 < 20000; sleep_ms(2)) {
		for (admitted = 0, i = 0; i < NW; i++)
			admitted += __atomic_load_n(&w[i].admitted,
			    __ATOMIC_RELAXED);
		if (admitted >= LIMIT / 5)
			break;
	}
	cl_migrate_open(slot, a, b);
	sleep_ms(30);
	(void)cl_migrate_keys(slot, a, b);
	sleep_ms(30);
	cl_migrate_close(slot, a, b);
	sleep_ms(30);
	/* Then until the quota is gone, and a little more. */
	for (t0 = mono_ms(); mono_ms() - t0 < 20000; sleep_ms(2)) {
		for (admitted = 0, i = 0; i < NW; i++)
			admitted += __atomic_load_n(&w[i].admitted,
			    __ATOMIC_RELAXED);
		if (admitted >= LIMIT)
			break;
	}
	sleep_ms(20);
	stop = 1;
	for (admitted = 0, i = 0; i < NW; i++) {
		pthread_join(w[i].tid, NULL);
		admitted += w[i].admitted;
		sent += w[i].sent;
		errors += w[i].errors;
		ck_assert_msg(w[i].errors == 0, "thread %d: %ld errors: %s",
		    i, w[i].errors, w[i].errmsg);
	}
	ck_assert_int_eq(errors, 0);
	ck_assert_int_gt(sent, LIMIT);
	ck_assert_int_eq(admitted, LIMIT);
	ck_assert_int_eq(cl_count_on(b, "default", "198.51.100.9"), LIMIT);
	ck_assert_int_eq(cl_owner(slot), b);
	/* The requests did meet the migration: ASK during it, MOVED after. */
	ck_assert_int_gt(cl_info(a, "errorstats", "errorstat_ASK:count="), 0);
	ck_assert_int_gt(cl_info(a, "errorstats", "errorstat_MOVED:count="),
	    0);
}
END_TEST

/*
 * FUNCTION FLUSH on every master: the library's function is not found,
 * the library is loaded again there, counted.
 */
START_TEST(test_cluster_noscript)
{
	char *path = path_in("noscript");
	struct rlg_policy p = policy(5, 60);
	struct rlg_decision d;
	struct rlg_store *s = open_ok(path, 0);
	char client[RLG_TEST_CLUSTER_NODES][64];
	redisReply *r;
	int i;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		cl_client_on(i, "ns", client[i], sizeof client[i]);
		ck_assert(hit(s, &p, client[i], T1, &d));
		ck_assert_int_eq(d.remaining, 4);
	}
	cl_resetstat();
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		r = CL(i, "FUNCTION FLUSH");
		freeReplyObject(r);
	}
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		ck_assert(hit(s, &p, client[i], T1, &d));
		ck_assert_int_eq(d.remaining, 3);
		ck_assert(hit(s, &p, client[i], T1, &d));
		ck_assert_int_eq(d.remaining, 2);
		ck_assert_int_eq(cl_count_on(i, "default", client[i]), 3);
		/* Once per node: not found, FUNCTION LOAD, the retry. */
		ck_assert_int_eq(cl_info(i, "errorstats",
		    "errorstat_ERR:count="), 1);
		ck_assert_int_eq(cl_info(i, "commandstats",
		    "cmdstat_function|load:calls="), 1);
		ck_assert_int_eq(cl_info(i, "commandstats",
		    "cmdstat_fcall:calls="), 3);
	}
	rlg_store_close(s);
}
END_TEST

/*
 * Two policies keyed by two clients in two slots, as the top of
 * store_redis_cluster.c documents: checked, then committed. A request
 * rejected by either policy costs no quota in the other, whatever the
 * order of the items; an admitted one counts in both. Round trips: one
 * FCALL for one slot, two for a rejection at the check, three for an
 * admission. An
 * advisory item in another slot never rejects, and is written only when
 * the request is admitted and it admits.
 */
START_TEST(test_cluster_two_slots)
{
	char *path = path_in("twoslots");
	struct rlg_policy ip = policy(3, 60), key = policy(5, 60);
	struct rlg_store *s = open_ok(path, 0);
	struct rlg_store_item items[2];
	struct rlg_decision d[2];
	const char *ca = "192.0.2.1", *cb = "k:00aa";
	char ka[512], kb[512];
	int i;

	key.name = name_hour;
	redis_key(ka, sizeof ka, "default", ca, false);
	redis_key(kb, sizeof kb, "hour", cb, false);
	ck_assert_int_ne(cl_keyslot(ka), cl_keyslot(kb));
	items[0] = (struct rlg_store_item){ &ip, ca, false, false, 1 };
	items[1] = (struct rlg_store_item){ &key, cb, false, false, 1 };

	cl_resetstat();
	ck_assert(hit(s, &ip, ca, T1, NULL));
	ck_assert_int_eq(cl_info_sum("commandstats",
	    "cmdstat_fcall:calls="), 1);

	cl_resetstat();
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
		ck_assert(d[0].admitted && d[1].admitted);
		ck_assert_int_eq(d[0].remaining, 3 - 2 - i);
		ck_assert_int_eq(d[1].remaining, 5 - 1 - i);
	}
	ck_assert_int_eq(cl_info_sum("commandstats",
	    "cmdstat_fcall:calls="), 6);
	ck_assert_int_eq(count_of(path, "default", ca), 3);
	ck_assert_int_eq(count_of(path, "hour", cb), 2);

	/* ip is full: rejected, and cb's quota untouched, either order. */
	cl_resetstat();
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(!d[0].admitted && d[1].admitted);
	ck_assert_int_gt(d[0].retry_ms, 0);
	ck_assert_int_eq(d[1].remaining, 2);
	ck_assert_int_eq(cl_info_sum("commandstats",
	    "cmdstat_fcall:calls="), 2);
	items[0] = (struct rlg_store_item){ &key, cb, false, false, 1 };
	items[1] = (struct rlg_store_item){ &ip, ca, false, false, 1 };
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(d[0].remaining, 2);
	ck_assert_int_eq(count_of(path, "default", ca), 3);
	ck_assert_int_eq(count_of(path, "hour", cb), 2);

	/* key full (a fresh address): the fresh address stays untouched. */
	for (i = 0; i < 3; i++)
		ck_assert(hit(s, &key, cb, T1, NULL));
	items[0] = (struct rlg_store_item){ &ip, "192.0.2.2", false, false, 1 };
	items[1] = (struct rlg_store_item){ &key, cb, false, false, 1 };
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(count_of(path, "default", "192.0.2.2"), -1);
	ck_assert_int_eq(count_of(path, "hour", cb), 5);

	/* Advisory in the other slot: rejecting, it does not reject. */
	items[1].advisory = true;
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && !d[1].admitted);
	ck_assert_int_eq(count_of(path, "default", "192.0.2.2"), 1);
	ck_assert_int_eq(count_of(path, "hour", cb), 5);
	/* Admitting, it is written with the admitted request. */
	items[1] = (struct rlg_store_item){ &key, "k:00bb", true, false, 1 };
	ck_assert_int_eq(rlg_store_step(s, items, 2, T1, d), RLG_OK);
	ck_assert(d[0].admitted && d[1].admitted);
	ck_assert_int_eq(count_of(path, "default", "192.0.2.2"), 2);
	ck_assert_int_eq(count_of(path, "hour", "k:00bb"), 1);
	rlg_store_close(s);
}
END_TEST

/* Threads sending two-slot requests: what they may and may not do. */
struct two_worker {
	pthread_t tid;
	const char *path;
	const struct rlg_policy *p;
	const struct rlg_policy *q;
	long admitted;
	long errors;
};

static void *
two_main(void *arg)
{
	struct two_worker *w = arg;
	struct rlg_store_config cfg;
	struct rlg_store_item items[2] = { { w->p, "192.0.2.50", false, false, 1 },
	    { w->q, "k:77", false, false, 1 } };
	struct rlg_decision d[2];
	struct rlg_store *s = NULL;
	int i;

	store_cfg(&cfg, w->path, 0);
	if (rlg_store_open(&cfg, &s) != RLG_OK)
		w->errors++;
	store_cfg_free(&cfg);
	for (i = 0; i < 150; i++) {
		if (rlg_store_step(s, items, 2, T1, d) != RLG_OK)
			w->errors++;
		else if (d[0].admitted && d[1].admitted)
			w->admitted++;
	}
	rlg_store_close(s);
	return NULL;
}

/*
 * Under concurrency, two slots, both limits reachable: no policy ever
 * counts past its limit, each counts every admitted request, and runs
 * ahead of them only by the requests that lost a race between a check
 * and its commit (docs/design.md): at most one per request rejected.
 */
START_TEST(test_cluster_two_slots_concurrent)
{
	enum { NW = 4 };
	char *path = path_in("twoconc");
	struct rlg_policy p = policy(100, 60), q = policy(100, 60);
	struct two_worker w[NW];
	long admitted = 0;
	int64_t cp, cq;
	int i;

	q.name = name_hour;
	memset(w, 0, sizeof w);
	for (i = 0; i < NW; i++) {
		w[i].path = path;
		w[i].p = &p;
		w[i].q = &q;
		ck_assert_int_eq(pthread_create(&w[i].tid, NULL, two_main,
		    &w[i]), 0);
	}
	for (i = 0; i < NW; i++) {
		pthread_join(w[i].tid, NULL);
		ck_assert_int_eq(w[i].errors, 0);
		admitted += w[i].admitted;
	}
	cp = count_of(path, "default", "192.0.2.50");
	cq = count_of(path, "hour", "k:77");
	ck_assert_int_le(cp, 100);
	ck_assert_int_le(cq, 100);
	ck_assert_int_ge(cp, admitted);
	ck_assert_int_ge(cq, admitted);
	ck_assert_int_ge(admitted, 100 - (cp - admitted) - (cq - admitted));
	ck_assert_int_le(admitted, 100);
}
END_TEST

/*
 * The seeds: none answering is RLG_ESTORE at open with a usable handle
 * naming a node, whose steps fail at once; a dead seed before a live one
 * is passed over. A cluster url at a server that is no cluster, and a
 * single-server url at a cluster node, say what to set.
 */
START_TEST(test_cluster_seeds)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_store_config cfg;
	struct rlg_test_redis plain;
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	char url[256], name[64];
	int dead = free_port(), i, rc;
	int64_t t0;

	snprintf(url, sizeof url, "redis://127.0.0.1:%d", dead);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.cluster = true;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_ESTORE);
	store_cfg_free(&cfg);
	snprintf(name, sizeof name, "redis_cluster node 127.0.0.1:%d", dead);
	ck_assert_msg(strstr(rlg_store_errmsg(s), name) != NULL &&
	    strstr(rlg_store_errmsg(s), "refused") != NULL, "%s",
	    rlg_store_errmsg(s));
	t0 = mono_ms();
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d),
		    RLG_ESTORE);
	ck_assert_int_lt(mono_ms() - t0, 50);
	rlg_store_close(s);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d,127.0.0.1:%d", dead,
	    cluster_srv.port[1]);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.cluster = true;
	cfg.redis.clock = RLG_CLOCK_LOCAL;
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	ck_assert(hit(s, &p, "c", T1, &d));
	ck_assert_int_eq(d.remaining, 4);
	rlg_store_close(s);

	ck_assert_int_eq(rlg_test_redis_start(&plain), 0);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, plain.url);
	cfg.redis.cluster = true;
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	rlg_test_redis_stop(&plain);
	ck_assert_int_eq(rc, RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "set [store] backend ="
	    " redis") != NULL, "%s", rlg_store_errmsg(s));
	rlg_store_close(s);

	/* backend = redis at one node: a client another node serves. */
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", cluster_srv.port[0]);
	s = open_url(url, 0, &rc);
	ck_assert_int_eq(rc, RLG_OK);
	cl_client_on(1, "x", name, sizeof name);
	item.client = name;
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "MOVED") != NULL &&
	    strstr(rlg_store_errmsg(s), "backend = redis_cluster") != NULL,
	    "%s", rlg_store_errmsg(s));
	rlg_store_close(s);
}
END_TEST

/*
 * An ACL user with docs/operations.md's permissions for a cluster (the single
 * server's, and CLUSTER SLOTS and ASKING), created on every master:
 * clients of every master are counted, through a migration's ASK too.
 */
START_TEST(test_cluster_acl)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_config cfg;
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	char client[64], url[256], key[512];
	redisReply *r;
	int i, slot, a, b, rc;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		r = CL(i, "ACL SETUSER rlgate on >s3cret ~rlg:* resetchannels"
		    " -@all +ping +evalsha +script|load +hmget +hset +lrange"
		    " +linsert +ltrim +rpush +pexpire +time +cluster|slots"
		    " +asking");
		freeReplyObject(r);
	}
	snprintf(url, sizeof url, "redis://rlgate:s3cret@127.0.0.1:%d,"
	    "127.0.0.1:%d", cluster_srv.port[2], cluster_srv.port[0]);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.cluster = true;
	cfg.redis.clock = RLG_CLOCK_LOCAL;
	rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		cl_client_on(i, "acl", client, sizeof client);
		ck_assert(hit(s, &p, client, T1, &d));
		ck_assert(hit(s, &p, client, T1, &d));
		ck_assert_int_eq(d.remaining, 3);
	}
	/* A new client of a slot being migrated: ASK, ASKING, served. */
	redis_key(key, sizeof key, "default", "acl-new", false);
	slot = cl_keyslot(key);
	a = cl_owner(slot);
	b = (a + 1) % RLG_TEST_CLUSTER_NODES;
	cl_migrate_open(slot, a, b);
	ck_assert_msg(hit(s, &p, "acl-new", T1, &d), "%s", rlg_store_errmsg(s));
	ck_assert_int_eq(cl_count_on(b, "default", "acl-new"), 1);
	cl_migrate_close(slot, a, b);
	ck_assert(hit(s, &p, "acl-new", T1, &d));
	ck_assert_int_eq(d.remaining, 3);
	rlg_store_close(s);
}
END_TEST

/*
 * The bounds, against a fake node that serves every slot itself and
 * answers EVALSHA with one reply: MOVED and ASK to itself are followed 5
 * times, then an error; TRYAGAIN is retried 5 times (waiting), then an
 * error that does not take the node down; CLUSTERDOWN is tried twice,
 * then the node is lost and backs off.
 */
START_TEST(test_cluster_redirect_bounds)
{
	struct rlg_policy p = policy(5, 60);
	struct rlg_store_item item = { &p, "c", false, false, 1 };
	struct rlg_store_config cfg;
	struct rlg_decision d;
	struct rlg_store *s = NULL;
	char url[64], moved[64], ask[64];
	struct fake f;
	int evals;
	int64_t t0;

	fake_start(&f);
	snprintf(f.slots, sizeof f.slots, "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n"
	    "$9\r\n127.0.0.1\r\n:%d\r\n", f.port);
	/* 7365: the slot of the client "c" (a redirection names it). */
	snprintf(moved, sizeof moved, "-MOVED 7365 127.0.0.1:%d\r\n",
	    f.port);
	snprintf(ask, sizeof ask, "-ASK 7365 :%d\r\n", f.port);
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", f.port);
	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, url);
	cfg.redis.cluster = true;
	cfg.redis.clock = RLG_CLOCK_LOCAL;
	ck_assert_int_eq(rlg_store_open(&cfg, &s), RLG_OK);

	pthread_mutex_lock(&f.mu);
	f.reply = moved;
	evals = f.evals;
	pthread_mutex_unlock(&f.mu);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "more than 5 redirections")
	    != NULL, "%s", rlg_store_errmsg(s));
	pthread_mutex_lock(&f.mu);
	ck_assert_int_eq(f.evals - evals, 6);
	f.reply = ask;
	evals = f.evals;
	pthread_mutex_unlock(&f.mu);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "more than 5 redirections")
	    != NULL, "%s", rlg_store_errmsg(s));
	pthread_mutex_lock(&f.mu);
	ck_assert_int_eq(f.evals - evals, 6);
	ck_assert_int_eq(f.askings, 5);

	f.reply = "-TRYAGAIN Multiple keys request during rehashing of"
	    " slot\r\n";
	evals = f.evals;
	pthread_mutex_unlock(&f.mu);
	t0 = mono_ms();
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_int_ge(mono_ms() - t0, 5 + 10 + 20 + 40 + 80);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "TRYAGAIN") != NULL &&
	    strstr(rlg_store_errmsg(s), "tried 6 times") != NULL, "%s",
	    rlg_store_errmsg(s));
	pthread_mutex_lock(&f.mu);
	ck_assert_int_eq(f.evals - evals, 6);
	f.reply = "*7\r\n:1700000000000\r\n:1\r\n:5\r\n:4\r\n:1000\r\n:0\r\n"
	    ":1000\r\n";
	pthread_mutex_unlock(&f.mu);
	/* Not lost: the next step goes through at once. */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_OK);
	ck_assert_int_eq(d.remaining, 4);

	pthread_mutex_lock(&f.mu);
	f.reply = "-CLUSTERDOWN The cluster is down\r\n";
	evals = f.evals;
	pthread_mutex_unlock(&f.mu);
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "CLUSTERDOWN") != NULL,
	    "%s", rlg_store_errmsg(s));
	/* Lost: backing off, no traffic. */
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "CLUSTERDOWN") != NULL,
	    "%s", rlg_store_errmsg(s));
	pthread_mutex_lock(&f.mu);
	ck_assert_int_eq(f.evals - evals, 2);
	pthread_mutex_unlock(&f.mu);
	rlg_store_close(s);
	store_cfg_free(&cfg);
	fake_stop(&f);
}
END_TEST

/*
 * A master stopped: RLG_ESTORE for the clients of its slots (naming it,
 * at once during its backoff) while the clients of the other masters are
 * answered and counted, as long as the cluster serves a partial slot
 * space (cluster-require-full-coverage no); with the default (yes) the
 * cluster goes down once it notices, and every request fails
 * (CLUSTERDOWN). Started again, it rejoins and the same handle heals.
 */
START_TEST(test_cluster_master_down)
{
	char *path = path_in("down");
	struct rlg_policy p = policy(1000, 600);
	struct rlg_store_item item = { &p, NULL, false, false, 1 };
	struct rlg_store *s = open_ok(path, 0);
	char client[RLG_TEST_CLUSTER_NODES][64], name[64];
	int64_t want[RLG_TEST_CLUSTER_NODES], t0;
	struct rlg_decision d;
	redisReply *r;
	int i, rounds;

	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		cl_client_on(i, "down", client[i], sizeof client[i]);
		ck_assert(hit(s, &p, client[i], T1, NULL));
		want[i] = 1;
		r = CL(i, "CONFIG SET cluster-require-full-coverage no");
		freeReplyObject(r);
	}
	ck_assert_int_eq(rlg_test_redis_cluster_stop_node(&cluster_srv, 0),
	    0);
	snprintf(name, sizeof name, "redis_cluster node 127.0.0.1:%d",
	    cluster_srv.port[0]);
	/* Until the others mark it failed, and on: 1 and 2 answer. */
	t0 = mono_ms();
	for (rounds = 0; mono_ms() - t0 < 15000; rounds++) {
		item.client = client[0];
		ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d),
		    RLG_ESTORE);
		ck_assert_msg(strstr(rlg_store_errmsg(s), name) != NULL, "%s",
		    rlg_store_errmsg(s));
		for (i = 1; i < RLG_TEST_CLUSTER_NODES; i++) {
			ck_assert(hit(s, &p, client[i], T1, &d));
			ck_assert_int_eq(d.remaining, 1000 - ++want[i]);
		}
		r = CL(1, "CLUSTER NODES");
		if (strstr(r->str, "master,fail") != NULL && rounds > 10) {
			freeReplyObject(r);
			break;
		}
		freeReplyObject(r);
		sleep_ms(POLL_MS);
	}
	ck_assert_int_lt(mono_ms() - t0, 15000);
	for (i = 1; i < RLG_TEST_CLUSTER_NODES; i++)
		ck_assert_int_eq(cl_count_on(i, "default", client[i]),
		    want[i]);

	/*
	 * Full coverage required: the cluster is down for everyone. A node
	 * computes its state again only on an event (a node failing), not
	 * on CONFIG SET: so back up first, the setting on every node, then
	 * the master stopped again. Gossip on a loaded machine can take long.
	 */
	ck_assert_int_eq(rlg_test_redis_cluster_start_node(&cluster_srv, 0),
	    0);
	ck_assert_int_eq(rlg_test_redis_cluster_wait(&cluster_srv, "ok",
	    30000), 0);
	/*
	 * And its FAIL flag cleared everywhere (a master that serves slots
	 * gets it cleared some seconds after it is back): a node still
	 * flagged FAIL when it stops again makes no new event, and the
	 * others would never compute their state again.
	 */
	t0 = mono_ms();
	for (i = 1; i < RLG_TEST_CLUSTER_NODES && mono_ms() - t0 < 30000; ) {
		r = CL(i, "CLUSTER NODES");
		if (strstr(r->str, "fail") == NULL)
			i++;
		else
			sleep_ms(100);
		freeReplyObject(r);
	}
	ck_assert_int_lt(mono_ms() - t0, 30000);
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		r = CL(i, "CONFIG SET cluster-require-full-coverage yes");
		freeReplyObject(r);
	}
	ck_assert_int_eq(rlg_test_redis_cluster_stop_node(&cluster_srv, 0),
	    0);
	ck_assert_int_eq(rlg_test_redis_cluster_wait(&cluster_srv, "fail",
	    45000), 0);
	item.client = client[1];
	ck_assert_int_eq(rlg_store_step(s, &item, 1, T1, &d), RLG_ESTORE);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "CLUSTERDOWN") != NULL,
	    "%s", rlg_store_errmsg(s));

	/* Back: it rejoins (empty: no persistence); the handle heals. */
	ck_assert_int_eq(rlg_test_redis_cluster_start_node(&cluster_srv, 0),
	    0);
	ck_assert_int_eq(rlg_test_redis_cluster_wait(&cluster_srv, "ok",
	    30000), 0);
	want[0] = 0;
	for (i = 0; i < RLG_TEST_CLUSTER_NODES; i++) {
		ck_assert_msg(step_until_ok(s, &p, client[i], &d) == RLG_OK,
		    "%s", rlg_store_errmsg(s));
		ck_assert_int_eq(d.remaining, 1000 - ++want[i]);
		ck_assert_int_eq(cl_count_on(i, "default", client[i]),
		    want[i]);
	}
	rlg_store_close(s);
	/* Ours now: stopped here, reaped here. */
	ck_assert_int_eq(rlg_test_redis_cluster_stop_node(&cluster_srv, 0),
	    0);
}
END_TEST

void
rlg_store_cluster_tests(TCase *tc, const char *name)
{
	if (strcmp(name, "cluster") == 0) {
		tcase_add_test(tc, test_cluster_spread);
		tcase_add_test(tc, test_cluster_noscript);
		tcase_add_test(tc, test_cluster_two_slots);
		tcase_add_test(tc, test_cluster_two_slots_concurrent);
		tcase_add_test(tc, test_cluster_seeds);
		tcase_add_test(tc, test_cluster_redirect_bounds);
		tcase_add_test(tc, test_cluster_acl);
		/* These move slots: last. */
		tcase_add_test(tc, test_cluster_migration);
		tcase_add_test(tc, test_cluster_migration_load);
	} else if (strcmp(name, "cluster_faults") == 0) {
		tcase_add_test(tc, test_cluster_master_down);
	}
}
