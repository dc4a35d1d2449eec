/*
 * check_redis_sync.c: db/redis/sync.lua, the local+global mode's merge,
 * against rlg_limiter_merge, on a private redis-server
 * (tests/redis_fixture.c).
 *
 * "differential": seeded random policies of the three mergeable
 * algorithms (limits up to the config's bound, windows of 1 s to a
 * year, bursts), random units (0, small, up to RLG_MERGE_COUNT_MAX),
 * units' windows around now (older, the same, newer), times that step,
 * jump, go back and pass year 9999, the same key twice in one call, and
 * stored states written straight into Redis and the model (unaligned
 * window starts, counts up to the bound, tats up to RLG_TAT_US_MAX):
 * every reply field and every stored field equal to the model's, and
 * each key written expires when the model says. "malformed": every
 * argument the script checks, refused with an error and nothing
 * written. The differential runs through the script (EVALSHA) and
 * through the library of Redis Functions (FCALL), as rlgate calls
 * either.
 *
 * As in check_redis_script.c, the script runs at a simulated now, so
 * each call goes in a MULTI/EXEC with a PTTL and a PERSIST per key: the
 * TTL is read and no key expires while the simulated clock stands still.
 *
 * Redis 7.0's PEXPIRE reads the clock twice, for the key's deadline
 * (now + ttl) and to see whether that deadline is already past, and
 * deletes the key at once when it is: a state the merge writes with a
 * short TTL (1 ms when it ends now) is lost inside the EXEC when the
 * server is preempted between the two reads (a loaded machine; it
 * failed a CI run). A later item of the same key in the call then reads
 * no state, and the PTTL answers -2. For a key written with a TTL within
 * SHORT_TTL_MS the test accepts either, and the model follows Redis.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "check_rlgate.h"
#include "limiter.h"
#include "redis_fixture.h"
#include "util.h"

/* db/redis/sync.lua after step.lua's helpers: app/redis_sync.c; the
 * same in the library of Redis Functions (db/redis/library.sh). */
extern const char rlg_redis_sync_lua[];
extern const char rlg_redis_function_lua[];
extern const char rlg_redis_function_sync[];

#define NPOL 4
#define NKEY 4
#define MAXN 6
#define STEPS 3000
#define T0 ((int64_t)1700000000000)
#define GRAIN_MS 1000
#define SHORT_TTL_MS 1000

struct key {
	char name[32];
	struct rlg_limit lim;          /* its policy's */
	struct rlg_state st;           /* the model: as stored */
};

static struct rlg_test_redis srv;
static bool srv_up;
static redisContext *conn;
static char sha[48];
static bool via_fcall;          /* FCALL of the library, not EVALSHA */
static struct key keys[NPOL * NKEY];
static uint64_t rng;

static uint64_t
rnd(uint64_t n)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31)) % n;
}

static void
srv_setup(void)
{
	srv_up = rlg_test_redis_start(&srv) == 0;
}

static void
srv_teardown(void)
{
	rlg_test_redis_stop(&srv);
	srv_up = false;
}

static redisReply *
cmd_argv(int argc, const char **argv)
{
	redisReply *r = redisCommandArgv(conn, argc, argv, NULL);

	ck_assert_msg(r != NULL, "redis: %s", conn->errstr);
	return r;
}

static void
conn_setup(void)
{
	struct timeval tv = { 5, 0 };
	const char *argv[3] = { "SCRIPT", "LOAD", rlg_redis_sync_lua };
	const char *flush[1] = { "FLUSHALL" };
	const char *fload[4] = { "FUNCTION", "LOAD", "REPLACE",
	    rlg_redis_function_lua };
	redisReply *r;

	ck_assert_msg(srv_up, "redis-server did not start (see stderr)");
	conn = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
	ck_assert_ptr_nonnull(conn);
	ck_assert_msg(conn->err == 0, "connect: %s", conn->errstr);
	freeReplyObject(cmd_argv(1, flush));
	r = cmd_argv(3, argv);
	ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 40, "%s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "not a SHA1");
	memcpy(sha, r->str, 41);
	freeReplyObject(r);
	r = cmd_argv(4, fload);
	ck_assert_msg(r->type == REDIS_REPLY_STRING, "FUNCTION LOAD: %s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "not a name");
	freeReplyObject(r);
}

static void
conn_teardown(void)
{
	if (conn != NULL)
		redisFree(conn);
	conn = NULL;
}

/* What the store keeps: expires rounded up to the second. */
static int64_t
round_expires(int64_t e)
{
	return e > 0 && e % GRAIN_MS != 0 ? e + GRAIN_MS - e % GRAIN_MS : e;
}

/* A random policy of one of the mergeable algorithms. */
static struct rlg_limit
random_limit(void)
{
	static const int64_t windows_s[] = { 1, 7, 60, 3600, 86400,
	    RLG_WINDOW_S_MAX };
	struct rlg_limit l;

	l.algorithm = (enum rlg_algorithm)rnd(3);
	l.limit = rnd(4) == 0 ? RLG_LIMIT_MAX - (int64_t)rnd(3) :
	    1 + (int64_t)rnd(20);
	l.window_ms = windows_s[rnd(6)] * 1000;
	l.burst = l.algorithm == RLG_ALG_TOKEN_BUCKET ? (rnd(4) == 0 ?
	    RLG_BURST_MAX : 1 + (int64_t)rnd(30)) : 0;
	return l;
}

/* A state rlgate could have stored, into Redis and the model. */
static void
inject(struct key *k, int64_t now)
{
	char f[5][32];
	const char *argv[12] = { "HSET", k->name, "window_start_ms", f[0],
	    "count", f[1], "prev_count", f[2], "tat_us", f[3], "expires_ms",
	    f[4] };
	struct rlg_state *st = &k->st;

	memset(st, 0, sizeof *st);
	if (k->lim.algorithm == RLG_ALG_TOKEN_BUCKET) {
		st->tat_us = rnd(3) == 0 ? (int64_t)rnd((uint64_t)RLG_TAT_US_MAX
		    + 1) : now * 1000 + (int64_t)rnd(100000000);
	} else {
		st->window_start_ms = now - (int64_t)rnd(3) * k->lim.window_ms +
		    (rnd(5) == 0 ? (int64_t)rnd(1000) : 0);
		if (st->window_start_ms < 0)
			st->window_start_ms = 0;
		if (st->window_start_ms > RLG_TIME_MS_MAX)
			st->window_start_ms = RLG_TIME_MS_MAX;
		st->count = rnd(5) == 0 ? (int64_t)rnd(RLG_MERGE_COUNT_MAX + 1) :
		    (int64_t)rnd(30);
		st->prev_count = k->lim.algorithm == RLG_ALG_SLIDING_WINDOW ?
		    (int64_t)rnd(30) : 0;
	}
	st->expires_ms = round_expires(now + (int64_t)rnd(100000));
	snprintf(f[0], 32, "%lld", (long long)st->window_start_ms);
	snprintf(f[1], 32, "%lld", (long long)st->count);
	snprintf(f[2], 32, "%lld", (long long)st->prev_count);
	snprintf(f[3], 32, "%lld", (long long)st->tat_us);
	snprintf(f[4], 32, "%lld", (long long)st->expires_ms);
	freeReplyObject(cmd_argv(12, argv));
}

/* Element i of r as a number (an integer or a decimal string). */
static int64_t
elem(const redisReply *r, size_t i)
{
	ck_assert_uint_gt(r->elements, i);
	if (r->element[i]->type == REDIS_REPLY_INTEGER)
		return r->element[i]->integer;
	ck_assert_int_eq(r->element[i]->type, REDIS_REPLY_STRING);
	return strtoll(r->element[i]->str, NULL, 10);
}

/*
 * The stored hash of k equals the model's; or k is gone, which a key
 * written with a TTL of a few ms may be by the time PERSIST comes (the
 * MULTI takes real time): then the model forgets it too.
 */
static void
check_stored(struct key *k, int64_t now, long step)
{
	const char *argv[7] = { "HMGET", k->name, "window_start_ms", "count",
	    "prev_count", "tat_us", "expires_ms" };
	const int64_t want[5] = { k->st.window_start_ms, k->st.count,
	    k->st.prev_count, k->st.tat_us, k->st.expires_ms };
	redisReply *r = cmd_argv(7, argv);
	size_t f;

	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	if (r->element[0]->type == REDIS_REPLY_NIL &&
	    k->st.expires_ms - rlg_limiter_clamp_time(now) < 200) {
		memset(&k->st, 0, sizeof k->st);
		freeReplyObject(r);
		return;
	}
	for (f = 0; f < 5; f++)
		ck_assert_msg((r->element[f]->type == REDIS_REPLY_NIL ? 0 :
		    strtoll(r->element[f]->str, NULL, 10)) == want[f],
		    "step %ld, %s field %zu: stored %s, model %lld", step,
		    k->name, f, r->element[f]->type == REDIS_REPLY_NIL ? "nil" :
		    r->element[f]->str, (long long)want[f]);
	freeReplyObject(r);
}

/* Whether item i is the last of its key in idx[0..n). */
static bool
last_of(const size_t *idx, size_t n, size_t i)
{
	size_t j;

	for (j = i + 1; j < n; j++)
		if (idx[j] == idx[i])
			return false;
	return true;
}

/* The model's merge of one item into st, expires as the store keeps it. */
static void
model_item(const struct rlg_limit *lim, struct rlg_state *st, int64_t units,
    int64_t uws, int64_t now)
{
	ck_assert_int_eq(rlg_limiter_merge(lim, st, units, uws, now, st),
	    RLG_OK);
	if (units > 0)
		st->expires_ms = round_expires(st->expires_ms);
}

/* Whether item i of the reply e answers the state st. */
static bool
reply_is(const redisReply *e, size_t i, const struct rlg_state *st)
{
	return elem(e, 1 + 5 * i) == st->window_start_ms &&
	    elem(e, 2 + 5 * i) == st->count &&
	    elem(e, 3 + 5 * i) == st->prev_count &&
	    elem(e, 4 + 5 * i) == st->tat_us &&
	    elem(e, 5 + 5 * i) == st->expires_ms;
}

/*
 * One call of n items (keys idx[], units[], uws[]) at now in a MULTI with
 * a PTTL and a PERSIST per key; the reply and the TTLs checked against
 * the model, which it then holds.
 */
static void
diff_call(const size_t *idx, const int64_t *units, const int64_t *uws,
    size_t n, int64_t now, long step)
{
	char nums[MAXN * 6 + 2][24];
	const char *argv[3 + MAXN + 2 + 6 * MAXN];
	struct rlg_state before[MAXN], *st;
	bool short_ttl[NPOL * NKEY];
	redisReply *r, *e;
	int64_t ttl;
	int argc = 0, a = 0;
	size_t i, f;

	argv[argc++] = via_fcall ? "FCALL" : "EVALSHA";
	argv[argc++] = via_fcall ? rlg_redis_function_sync : sha;
	snprintf(nums[a], 24, "%zu", n);
	argv[argc++] = nums[a++];
	for (i = 0; i < n; i++)
		argv[argc++] = keys[idx[i]].name;
	snprintf(nums[a], 24, "%lld", (long long)now);
	argv[argc++] = nums[a++];
	argv[argc++] = nums[0];
	for (i = 0; i < n; i++) {
		const struct rlg_limit *l = &keys[idx[i]].lim;
		const int64_t v[6] = { l->algorithm, l->limit, l->window_ms,
		    l->burst, units[i], uws[i] };

		for (f = 0; f < 6; f++) {
			snprintf(nums[a], 24, "%lld", (long long)v[f]);
			argv[argc++] = nums[a++];
		}
	}
	freeReplyObject(redisCommand(conn, "MULTI"));
	freeReplyObject(cmd_argv(argc, argv));
	/* Every TTL before any PERSIST: a key may come twice. */
	for (i = 0; i < n; i++)
		freeReplyObject(redisCommand(conn, "PTTL %s", keys[idx[i]].name));
	for (i = 0; i < n; i++)
		freeReplyObject(redisCommand(conn, "PERSIST %s",
		    keys[idx[i]].name));
	r = redisCommand(conn, "EXEC");
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	e = r->element[0];
	ck_assert_msg(e->type == REDIS_REPLY_ARRAY, "step %ld: %s", step,
	    e->type == REDIS_REPLY_ERROR ? e->str : "not an array");
	ck_assert_int_eq(elem(e, 0), rlg_limiter_clamp_time(now));
	memset(short_ttl, 0, sizeof short_ttl);
	for (i = 0; i < n; i++) {
		st = &keys[idx[i]].st;
		before[i] = *st;
		model_item(&keys[idx[i]].lim, st, units[i], uws[i], now);
		if (!reply_is(e, i, st) && short_ttl[idx[i]]) {
			/* an earlier item wrote it with a short TTL: lost */
			memset(st, 0, sizeof *st);
			before[i] = *st;
			model_item(&keys[idx[i]].lim, st, units[i], uws[i], now);
		}
		ck_assert_msg(reply_is(e, i, st),
		    "step %ld item %zu (%s, alg %d): reply (%lld %lld %lld %lld"
		    " %lld) differs from the model (%lld %lld %lld %lld %lld)",
		    step, i, keys[idx[i]].name, (int)keys[idx[i]].lim.algorithm,
		    (long long)elem(e, 1 + 5 * i), (long long)elem(e, 2 + 5 * i),
		    (long long)elem(e, 3 + 5 * i), (long long)elem(e, 4 + 5 * i),
		    (long long)elem(e, 5 + 5 * i),
		    (long long)st->window_start_ms, (long long)st->count,
		    (long long)st->prev_count, (long long)st->tat_us,
		    (long long)st->expires_ms);
		if (memcmp(&before[i], st, sizeof *st) != 0)
			short_ttl[idx[i]] = st->expires_ms -
			    rlg_limiter_clamp_time(now) <= SHORT_TTL_MS;
	}
	/* A key that its last item in the call changed expires then (less
	 * the real time the MULTI took), or, written with a short TTL, may
	 * be gone: then the model forgets it too. */
	for (i = 0; i < n; i++) {
		if (!last_of(idx, n, i) || memcmp(&before[i], &keys[idx[i]].st,
		    sizeof before[i]) == 0)
			continue;
		if (r->element[1 + i]->integer == -2 && short_ttl[idx[i]]) {
			memset(&keys[idx[i]].st, 0, sizeof keys[idx[i]].st);
			continue;
		}
		ttl = keys[idx[i]].st.expires_ms - rlg_limiter_clamp_time(now);
		ttl = ttl > 1 ? ttl : 1;
		ck_assert_msg(r->element[1 + i]->integer <= ttl &&
		    r->element[1 + i]->integer >= ttl - 200, "step %ld: %s"
		    " PTTL %lld, model %lld", step, keys[idx[i]].name,
		    r->element[1 + i]->integer, (long long)ttl);
	}
	freeReplyObject(r);
	for (i = 0; i < n; i++)
		check_stored(&keys[idx[i]], now, step);
}

START_TEST(test_differential)
{
	size_t idx[MAXN], i, n;
	int64_t units[MAXN], uws[MAXN], now = T0, w;
	long step;

	/* 0-3 through the script, 4-7 the same through the library */
	rng = 0x5eed0000u + (unsigned)_i % 4;
	via_fcall = _i >= 4;
	for (i = 0; i < NPOL * NKEY; i++) {
		if (i % NKEY == 0)
			keys[i].lim = random_limit();
		else
			keys[i].lim = keys[i - 1].lim;
		snprintf(keys[i].name, sizeof keys[i].name, "rlg:{c%zu}:p%zu",
		    i % NKEY, i / NKEY);
		memset(&keys[i].st, 0, sizeof keys[i].st);
	}
	for (step = 0; step < STEPS; step++) {
		switch (rnd(10)) {
		case 0: now -= (int64_t)rnd(120000); break;   /* back */
		case 1: now += (int64_t)rnd(86400000); break; /* a jump */
		case 2: now = rnd(50) == 0 ? RLG_TIME_MS_MAX + (int64_t)rnd(
		    1000) : now; break;
		default: now += (int64_t)rnd(3000); break;
		}
		if (now > RLG_TIME_MS_MAX + 1000 || now < 0)
			now = T0;
		n = 1 + rnd(MAXN);
		for (i = 0; i < n; i++) {
			idx[i] = i > 0 && rnd(4) == 0 ? idx[i - 1] :
			    rnd(NPOL * NKEY);
			if (rnd(40) == 0)
				inject(&keys[idx[i]], now);
			w = keys[idx[i]].lim.window_ms;
			units[i] = rnd(6) == 0 ? 0 : rnd(20) == 0 ?
			    (int64_t)rnd(RLG_MERGE_COUNT_MAX + 1) :
			    1 + (int64_t)rnd(5);
			uws[i] = now + ((int64_t)rnd(5) - 2) * w +
			    (int64_t)rnd(1000);
		}
		diff_call(idx, units, uws, n, now, step);
	}
}
END_TEST

/* ARGV of one item after now and n ("1"): alg limit window burst units
 * uws, NULL-terminated, and the error expected. */
struct bad_case {
	const char *args[10];
	const char *why;
};

START_TEST(test_malformed)
{
	static const struct bad_case cases[] = {
	    { { "x", "1", "0", "10", "60000", "0", "1", "0" }, "now_ms" },
	    { { "1", "x" }, "expected" },
	    { { "1", "2", "0", "10", "60000", "0", "1", "0" }, "expected" },
	    { { "1", "1", "3", "10", "60000", "0", "1", "0" }, "sliding_log" },
	    { { "1", "1", "4", "10", "60000", "0", "1", "0" }, "malformed" },
	    { { "1", "1", "0", "0", "60000", "0", "1", "0" }, "policy" },
	    { { "1", "1", "0", "10", "0", "0", "1", "0" }, "policy" },
	    { { "1", "1", "2", "10", "60000", "0", "1", "0" }, "policy" },
	    { { "1", "1", "0", "10", "60000", "0", "-1", "0" }, "units" },
	    { { "1", "1", "0", "10", "60000", "0", "1000000000000001", "0" },
	      "units" },
	    { { "1", "1", "0", "10", "60000", "0", "1", "1.5" }, "malformed" },
	    { { "1", "1", "0", "10", "60000", "0", "1" }, "expected" },
	};
	const char *argv[16];
	const char *dbsize[1] = { "DBSIZE" };
	redisReply *r;
	size_t c, k;
	int argc;

	for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		argc = 0;
		argv[argc++] = "EVALSHA";
		argv[argc++] = sha;
		argv[argc++] = "1";
		argv[argc++] = "rlg:{a}:p";
		for (k = 0; cases[c].args[k] != NULL; k++)
			argv[argc++] = cases[c].args[k];
		r = cmd_argv(argc, argv);
		ck_assert_msg(r->type == REDIS_REPLY_ERROR &&
		    strstr(r->str, cases[c].why) != NULL, "case %zu: %s", c,
		    r->type == REDIS_REPLY_ERROR ? r->str : "no error");
		freeReplyObject(r);
		r = cmd_argv(1, dbsize);
		ck_assert_int_eq(r->integer, 0);
		freeReplyObject(r);
	}
}
END_TEST

Suite *
rlg_redis_sync_suite(void)
{
	Suite *s = suite_create("redis_sync");
	TCase *tc = tcase_create("sync");

	tcase_add_unchecked_fixture(tc, srv_setup, srv_teardown);
	tcase_add_checked_fixture(tc, conn_setup, conn_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_differential, 0, 8);
	tcase_add_test(tc, test_malformed);
	suite_add_tcase(s, tc);
	return s;
}
