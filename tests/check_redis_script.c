/*
 * check_redis_script.c: db/redis/step.lua, the Redis store's step, against
 * the C limiter, on a private redis-server (tests/redis_fixture.c).
 *
 * "differential": seeded random policies (small limits, windows of 1 s to
 * an hour, bursts) and random times (same millisecond, steps, jumps, the
 * clock going back, times around the epoch) drive the script and a model
 * in memory that is app/store_sqlite_step.c's step (sq_step) over
 * rlg_limiter_step and rlg_limiter_sliding_log with an in-memory log.
 * Every decision field, every stored hash field, every log entry and the
 * expiry of every key written must agree, at every step. "extremes": the
 * same with states written straight into Redis and the model (every
 * window position, full and damaged counts, GCRA tats from 0 to 9e18),
 * policies up to the config's bounds and times up to year 9999 and past
 * it: the script's big-integer paths. "step": the step's semantics by
 * hand (all or nothing, advisory items, the same key twice, the server's
 * clock, expiries) and malformed arguments refused with nothing written.
 *
 * The script runs with ARGV[1] = a simulated now. The keys a step writes
 * get a PEXPIRE relative to that now, which real time would run down
 * while the simulated clock stands still: the test reads each TTL and
 * PERSISTs the keys in the same MULTI/EXEC as the EVALSHA (no key expires
 * during an EXEC), so the model, which never expires anything, and Redis
 * hold the same states; but see expired_early().
 *
 * "differential_fcall" and "extremes_fcall" run the same through the
 * library of Redis Functions (db/redis/library.sh: FCALL), which rlgate
 * calls where the server has it.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "check_rlgate.h"
#include "config.h"
#include "limiter.h"
#include "redis_fixture.h"
#include "util.h"

/* db/redis/step.lua, compiled in by the build as app/redis_script.c. */
extern const char rlg_redis_script_lua[];
/* The same as a library of Redis Functions (db/redis/library.sh). */
extern const char rlg_redis_function_lua[];
extern const char rlg_redis_function_step[];

#define MAXITEMS 6
#define NCLIENTS 3
#define NPOLICIES 6
#define NKEYS (NPOLICIES * NCLIENTS)
#define DIFF_STEPS 2500
#define EXTREME_STEPS 1500
/* 2023-11-14 22:13:20 UTC */
#define T0 ((int64_t)1700000000000)
#define GRAIN_MS 1000             /* store_sqlite_step.c's SQ_EXPIRES_GRAIN_MS */

/* One item of a step: a policy and one of its clients' keys. */
struct item {
	const struct rlg_policy *p;
	int key;                      /* index into sim.keys */
	bool advisory;
	int64_t cost;                 /* units; 0 is 1 (as rlg_store_item) */
};

/* One (policy, client) as the model stores it. */
struct mkey {
	char hash[48];                /* rlg:{cC}:pP */
	char log[56];                 /* rlg:{cC}:pP:log */
	bool stored;                  /* a state row (hash) exists */
	struct rlg_state st;          /* as stored: expires rounded */
	int64_t *log_ms;              /* every log entry, ascending */
	size_t nlog, caplog;
	bool written;                 /* written by the current step */
	int64_t ttl_ms;               /* the PEXPIRE it then got */
	bool log_written;             /* its log appended to by it */
	int64_t log_ttl_ms;           /* the log's PEXPIRE then */
};

struct sim {
	redisContext *c;
	char sha[48];
	uint64_t rng;
	unsigned seed;
	long step;                    /* for failure messages */
	struct rlg_policy pol[NPOLICIES];
	char names[NPOLICIES][8];
	size_t npol;
	struct mkey keys[NKEYS];
	int64_t *buf;                 /* a sliding log as the step reads it */
	size_t capbuf;
};

/* A command's arguments for redisAppendCommandArgv. */
struct args {
	int argc;
	const char *argv[80];
	size_t len[80];
	char store[80][64];
};

static struct rlg_test_redis srv;
static bool srv_up;
static redisContext *conn;
/* The test calls the library's function (FCALL), not the script. */
static bool via_fcall;
static char sha[48];

static void srv_setup(void);
static void srv_teardown(void);
static void conn_setup(void);
static void conn_teardown(void);
static TCase *script_tcase(Suite *s, const char *name, int timeout_s);
static redisReply *cmd(const char *fmt, ...);
static void args_add(struct args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void args_eval(struct args *a, const char *now,
    const struct item *it, size_t n, const struct mkey *keys);
static int64_t cost_of(const struct item *it);
static uint64_t rnd(struct sim *s, uint64_t n);
static int64_t rnd_log(struct sim *s, int64_t lo, int64_t hi);
static int64_t round_expires(int64_t e);
static void sim_init(struct sim *s, unsigned seed);
static void sim_free(struct sim *s);
static void log_reserve(int64_t **v, size_t *cap, size_t need);
static void log_insert(struct mkey *k, int64_t now);
static size_t log_read(struct sim *s, const struct mkey *k,
    const struct rlg_policy *p, int64_t now, size_t extra);
static void model_step(struct sim *s, const struct item *it, size_t n,
    int64_t now_ms, struct rlg_decision *d);
static size_t diff_step(struct sim *s, const struct item *it, size_t n,
    int64_t now_ms);
static void check_key(struct sim *s, struct mkey *k,
    redisReply *fields, redisReply *log, redisReply *pttl_hash,
    redisReply *pttl_log);
static void random_policy(struct sim *s, struct rlg_policy *p, int alg,
    bool extreme);
static void inject(struct sim *s, struct mkey *k, const struct rlg_policy *p,
    int64_t now_ms);
static redisReply *eval_args(const char *const *args);
static int64_t reply_int(const redisReply *r, size_t i);
static redisReply *eval_items(const char *now, const struct item *it,
    size_t n, const struct mkey *keys);

/* ---- fixtures ------------------------------------------------------------ */

/* One server per test case, started in the runner (unchecked). */
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

/* Per test: a connection, an empty database, the script loaded. */
static void
conn_setup(void)
{
	struct timeval tv = { 5, 0 };
	redisReply *r;

	ck_assert_msg(srv_up, "redis-server did not start (see stderr)");
	conn = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
	ck_assert_ptr_nonnull(conn);
	ck_assert_msg(conn->err == 0, "connect: %s", conn->errstr);
	ck_assert_int_eq(redisSetTimeout(conn, tv), REDIS_OK);
	r = cmd("FLUSHALL");
	freeReplyObject(r);
	r = cmd("SCRIPT LOAD %s", rlg_redis_script_lua);
	ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
	ck_assert_uint_eq(r->len, 40);
	memcpy(sha, r->str, 41);
	freeReplyObject(r);
	r = cmd("FUNCTION LOAD REPLACE %s", rlg_redis_function_lua);
	ck_assert_msg(r->type == REDIS_REPLY_STRING, "FUNCTION LOAD: %s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "not a name");
	freeReplyObject(r);
	via_fcall = false;
}

/* The same, and the test calls the library's function. */
static void
conn_setup_fcall(void)
{
	conn_setup();
	via_fcall = true;
}

static void
conn_teardown(void)
{
	if (conn != NULL)
		redisFree(conn);
	conn = NULL;
}

/* ---- helpers ------------------------------------------------------------- */

/* A command on the test's connection; its reply, never NULL. */
static redisReply *
cmd(const char *fmt, ...)
{
	redisReply *r;
	va_list ap;

	va_start(ap, fmt);
	r = redisvCommand(conn, fmt, ap);
	va_end(ap);
	ck_assert_msg(r != NULL, "redis: %s", conn->errstr);
	return r;
}

static void
args_add(struct args *a, const char *fmt, ...)
{
	va_list ap;
	int len;

	ck_assert_int_lt(a->argc, 80);
	va_start(ap, fmt);
	len = vsnprintf(a->store[a->argc], sizeof a->store[0], fmt, ap);
	va_end(ap);
	ck_assert(len >= 0 && (size_t)len < sizeof a->store[0]);
	a->argv[a->argc] = a->store[a->argc];
	a->len[a->argc] = (size_t)len;
	a->argc++;
}

/* EVALSHA sha 2n keys... now n items... */
static void
args_eval(struct args *a, const char *now, const struct item *it, size_t n,
    const struct mkey *keys)
{
	size_t i;

	a->argc = 0;
	args_add(a, via_fcall ? "FCALL" : "EVALSHA");
	args_add(a, "%s", via_fcall ? rlg_redis_function_step : sha);
	args_add(a, "%zu", 2 * n);
	for (i = 0; i < n; i++) {
		args_add(a, "%s", keys[it[i].key].hash);
		args_add(a, "%s", keys[it[i].key].log);
	}
	args_add(a, "%s", now);
	args_add(a, "%zu", n);
	for (i = 0; i < n; i++) {
		args_add(a, "%d", (int)it[i].p->lim.algorithm);
		args_add(a, "%lld", (long long)it[i].p->lim.limit);
		args_add(a, "%lld", (long long)it[i].p->lim.window_ms);
		args_add(a, "%lld", (long long)it[i].p->lim.burst);
		args_add(a, "%d", it[i].advisory ? 1 : 0);
		args_add(a, "%lld", (long long)cost_of(&it[i]));
		args_add(a, "%lld", (long long)it[i].p->lim.ban_ms);
		args_add(a, "%lld", (long long)it[i].p->lim.ban_after);
	}
}

/* An item's cost: 0 is 1. */
static int64_t
cost_of(const struct item *it)
{
	return it->cost == 0 ? 1 : it->cost;
}

/* The script on its own, outside MULTI: its reply. */
static redisReply *
eval_items(const char *now, const struct item *it, size_t n,
    const struct mkey *keys)
{
	struct args a;
	redisReply *r;

	args_eval(&a, now, it, n, keys);
	r = redisCommandArgv(conn, a.argc, a.argv, a.len);
	ck_assert_msg(r != NULL, "redis: %s", conn->errstr);
	return r;
}

/*
 * EVALSHA sha and the arguments args (NULL-terminated; at most 62): the
 * reply, never NULL, caller frees.
 */
static redisReply *
eval_args(const char *const *args)
{
	const char *argv[64];
	redisReply *r;
	int argc = 0;

	argv[argc++] = via_fcall ? "FCALL" : "EVALSHA";
	argv[argc++] = via_fcall ? rlg_redis_function_step : sha;
	for (; *args != NULL; args++) {
		ck_assert_int_lt(argc, 64);
		argv[argc++] = *args;
	}
	r = redisCommandArgv(conn, argc, argv, NULL);
	ck_assert_msg(r != NULL, "redis: %s", conn->errstr);
	return r;
}

/* Element i of an array reply, an integer. */
static int64_t
reply_int(const redisReply *r, size_t i)
{
	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	ck_assert_uint_gt(r->elements, i);
	ck_assert_int_eq(r->element[i]->type, REDIS_REPLY_INTEGER);
	return r->element[i]->integer;
}

/* splitmix64: a number in [0, n), n > 0. */
static uint64_t
rnd(struct sim *s, uint64_t n)
{
	uint64_t z;

	s->rng += 0x9e3779b97f4a7c15ULL;
	z = s->rng;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return z % n;
}

/* Log-uniform in [lo, hi], lo >= 1: every magnitude as likely. */
static int64_t
rnd_log(struct sim *s, int64_t lo, int64_t hi)
{
	int64_t top = lo;
	int bits = (int)rnd(s, 64);

	while (bits-- > 0 && top <= hi / 2)
		top *= 2;
	if (top > hi)
		top = hi;
	return lo + (int64_t)rnd(s, (uint64_t)(top - lo + 1));
}

/* store_sqlite_step.c's sq_expires. */
static int64_t
round_expires(int64_t e)
{
	int64_t r;

	if (e <= 0)
		return e;
	r = e % GRAIN_MS;
	return r == 0 ? e : e + GRAIN_MS - r;
}

static void
sim_init(struct sim *s, unsigned seed)
{
	size_t i;

	memset(s, 0, sizeof *s);
	s->c = conn;
	s->seed = seed;
	s->rng = 0x5eed0000ULL + seed;
	for (i = 0; i < NKEYS; i++) {
		snprintf(s->keys[i].hash, sizeof s->keys[i].hash,
		    "rlg:{c%zu}:p%zu", i % NCLIENTS, i / NCLIENTS);
		snprintf(s->keys[i].log, sizeof s->keys[i].log,
		    "rlg:{c%zu}:p%zu:log", i % NCLIENTS, i / NCLIENTS);
	}
	for (i = 0; i < NPOLICIES; i++) {
		snprintf(s->names[i], sizeof s->names[i], "p%zu", i);
		s->pol[i].name = s->names[i];
	}
}

static void
sim_free(struct sim *s)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		free(s->keys[i].log_ms);
	free(s->buf);
}

static void
log_reserve(int64_t **v, size_t *cap, size_t need)
{
	size_t c = *cap > 0 ? *cap : 16;

	if (need <= *cap)
		return;
	while (c < need)
		c *= 2;
	*v = realloc(*v, c * sizeof **v);
	ck_assert_ptr_nonnull(*v);
	*cap = c;
}

/* now joins the log after every entry <= now (store_sqlite's index). */
static void
log_insert(struct mkey *k, int64_t now)
{
	size_t at;

	log_reserve(&k->log_ms, &k->caplog, k->nlog + 1);
	for (at = k->nlog; at > 0 && k->log_ms[at - 1] > now; at--)
		;
	memmove(k->log_ms + at + 1, k->log_ms + at,
	    (k->nlog - at) * sizeof *k->log_ms);
	k->log_ms[at] = now;
	k->nlog++;
}

/*
 * sq_load_log + sq_decide_log: the newest limit entries > now - window,
 * then extra entries at now (earlier items of the step that append),
 * the newest limit kept. Into s->buf; their number.
 */
static size_t
log_read(struct sim *s, const struct mkey *k, const struct rlg_policy *p,
    int64_t now, size_t extra)
{
	size_t lo = k->nlog, n, at, j, drop;

	while (lo > 0 && k->log_ms[lo - 1] > now - p->lim.window_ms &&
	    k->nlog - lo < (size_t)p->lim.limit)
		lo--;
	n = k->nlog - lo;
	log_reserve(&s->buf, &s->capbuf, n + extra + 1);
	if (n > 0)
		memcpy(s->buf, k->log_ms + lo, n * sizeof *s->buf);
	if (extra > 0) {
		for (at = n; at > 0 && s->buf[at - 1] > now; at--)
			;
		memmove(s->buf + at + extra, s->buf + at,
		    (n - at) * sizeof *s->buf);
		for (j = 0; j < extra; j++)
			s->buf[at + j] = now;
		n += extra;
		if (n > (size_t)p->lim.limit) {
			drop = n - (size_t)p->lim.limit;
			memmove(s->buf, s->buf + drop,
			    (n - drop) * sizeof *s->buf);
			n -= drop;
		}
	}
	return n;
}

/*
 * store_sqlite_step.c's sq_step in memory: decide every item in order (an
 * earlier item with the same key passes its new state on; a sliding log
 * sees the earlier appends), admit when every non-advisory item admits,
 * then write each admitted item's state (expiry rounded) and log.
 */
static void
model_step(struct sim *s, const struct item *it, size_t n, int64_t now_ms,
    struct rlg_decision *d)
{
	static const struct rlg_state zero;
	struct rlg_state out[MAXITEMS], in[MAXITEMS];
	bool append[MAXITEMS], wref[MAXITEMS], admitted = true, adm, found;
	int64_t now = rlg_limiter_clamp_time(now_ms), c;
	size_t i, j, extra, nb, drop;
	struct mkey *k;

	ck_assert_uint_le(n, MAXITEMS);
	for (i = 0; i < NKEYS; i++) {
		s->keys[i].written = false;
		s->keys[i].log_written = false;
	}
	for (i = 0; i < n; i++) {
		k = &s->keys[it[i].key];
		append[i] = false;
		/* What an earlier item of the same key left, else the row. */
		found = false;
		for (j = i; j-- > 0 && !found; ) {
			if (it[j].key == it[i].key) {
				in[i] = out[j];
				found = true;
			}
		}
		if (!found)
			in[i] = k->stored ? k->st : zero;
		if (rlg_limiter_keeps_log(&it[i].p->lim)) {
			extra = 0;
			for (j = 0; j < i; j++)
				if (it[j].key == it[i].key && append[j])
					extra += (size_t)cost_of(&it[j]);
			nb = log_read(s, k, it[i].p, now, extra);
			/* Its row is read for its ban only (sq_decide_log). */
			if (it[i].p->lim.ban_ms == 0)
				in[i] = zero;
			out[i] = in[i];
			ck_assert_int_eq(rlg_limiter_sliding_log(&it[i].p->lim,
			    s->buf, nb, now_ms, cost_of(&it[i]), &append[i],
			    &out[i], &d[i]), RLG_OK);
		} else {
			ck_assert_int_eq(rlg_limiter_step(&it[i].p->lim, &in[i],
			    now_ms, cost_of(&it[i]), &out[i], &d[i]), RLG_OK);
		}
		wref[i] = !d[i].admitted && rlg_limiter_refusal_writes(
		    &it[i].p->lim, &in[i], &out[i]);
		if (!d[i].admitted && !it[i].advisory)
			admitted = false;
	}
	for (i = 0; i < n; i++) {
		/* Admitted, or a refusal a ban counts (its row only). */
		adm = admitted && d[i].admitted;
		if (!adm && !wref[i])
			continue;
		k = &s->keys[it[i].key];
		if (adm && append[i]) {
			for (c = 0; c < cost_of(&it[i]); c++)
				log_insert(k, now);
			for (drop = 0; drop < k->nlog &&
			    k->log_ms[drop] <= now - it[i].p->lim.window_ms; drop++)
				;
			memmove(k->log_ms, k->log_ms + drop,
			    (k->nlog - drop) * sizeof *k->log_ms);
			k->nlog -= drop;
		}
		k->st = out[i];
		k->st.expires_ms = round_expires(out[i].expires_ms);
		k->stored = true;
		k->written = true;
		k->ttl_ms = k->st.expires_ms - now > 1 ?
		    k->st.expires_ms - now : 1;
		if (adm && append[i]) {
			k->log_written = true;
			k->log_ttl_ms = k->ttl_ms;
		}
	}
}

/*
 * One step on both sides, compared. Redis runs, in one MULTI/EXEC: the
 * script, then per item HMGET of the hash, LRANGE of the log, PTTL of
 * both, then PERSIST of both. The number of items that rejected.
 */
static size_t
diff_step(struct sim *s, const struct item *it, size_t n, int64_t now_ms)
{
	static const char *fields[] = { "HMGET", NULL, "window_start_ms",
	    "count", "prev_count", "tat_us", "expires_ms", "refused",
	    "refused_start_ms", "ban_until_ms" };
	struct rlg_decision d[MAXITEMS];
	const char *argv[10];
	struct args a;
	redisReply *r, *ex, *res;
	char now[32];
	size_t i, e, rejected = 0;
	int q = 0;

	model_step(s, it, n, now_ms, d);
	for (i = 0; i < n; i++)
		if (!d[i].admitted)
			rejected++;

	snprintf(now, sizeof now, "%lld", (long long)now_ms);
	ck_assert_int_eq(redisAppendCommand(s->c, "MULTI"), REDIS_OK);
	q++;
	args_eval(&a, now, it, n, s->keys);
	ck_assert_int_eq(redisAppendCommandArgv(s->c, a.argc, a.argv, a.len),
	    REDIS_OK);
	q++;
	for (i = 0; i < n; i++) {
		memcpy(argv, fields, sizeof fields);
		argv[1] = s->keys[it[i].key].hash;
		ck_assert_int_eq(redisAppendCommandArgv(s->c, 10, argv, NULL),
		    REDIS_OK);
		ck_assert_int_eq(redisAppendCommand(s->c, "LRANGE %s 0 -1",
		    s->keys[it[i].key].log), REDIS_OK);
		ck_assert_int_eq(redisAppendCommand(s->c, "PTTL %s",
		    s->keys[it[i].key].hash), REDIS_OK);
		ck_assert_int_eq(redisAppendCommand(s->c, "PTTL %s",
		    s->keys[it[i].key].log), REDIS_OK);
		q += 4;
	}
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(redisAppendCommand(s->c, "PERSIST %s",
		    s->keys[it[i].key].hash), REDIS_OK);
		ck_assert_int_eq(redisAppendCommand(s->c, "PERSIST %s",
		    s->keys[it[i].key].log), REDIS_OK);
		q += 2;
	}
	ck_assert_int_eq(redisAppendCommand(s->c, "EXEC"), REDIS_OK);
	for (; q > 0; q--) {
		ck_assert_int_eq(redisGetReply(s->c, (void **)&r), REDIS_OK);
		ck_assert_msg(r->type != REDIS_REPLY_ERROR, "redis: %s",
		    r->str);
		freeReplyObject(r);
	}
	ck_assert_int_eq(redisGetReply(s->c, (void **)&ex), REDIS_OK);
	ck_assert_int_eq(ex->type, REDIS_REPLY_ARRAY);
	ck_assert_uint_eq(ex->elements, 1 + 6 * n);

	res = ex->element[0];
	ck_assert_msg(res->type == REDIS_REPLY_ARRAY, "seed %u step %ld: the"
	    " script failed: %s", s->seed, s->step,
	    res->type == REDIS_REPLY_ERROR ? res->str : "not an array");
	ck_assert_uint_eq(res->elements, 1 + 6 * n);
	ck_assert_int_eq(reply_int(res, 0), rlg_limiter_clamp_time(now_ms));
	for (i = 0; i < n; i++) {
		e = 1 + 6 * i;
		ck_assert_msg(reply_int(res, e) == (d[i].admitted ? 1 : 0) &&
		    reply_int(res, e + 1) == d[i].limit &&
		    reply_int(res, e + 2) == d[i].remaining &&
		    reply_int(res, e + 3) == d[i].reset_ms &&
		    reply_int(res, e + 4) == d[i].retry_ms &&
		    reply_int(res, e + 5) == d[i].next_ms,
		    "seed %u step %ld now %lld item %zu (%s limit %lld window"
		    " %lld burst %lld%s): script %lld/%lld/%lld/%lld/%lld/%lld,"
		    " limiter %d/%lld/%lld/%lld/%lld/%lld", s->seed, s->step,
		    (long long)now_ms, i,
		    rlg_algorithm_name(it[i].p->lim.algorithm),
		    (long long)it[i].p->lim.limit, (long long)it[i].p->lim.window_ms,
		    (long long)it[i].p->lim.burst,
		    it[i].advisory ? " advisory" : "",
		    (long long)reply_int(res, e),
		    (long long)reply_int(res, e + 1),
		    (long long)reply_int(res, e + 2),
		    (long long)reply_int(res, e + 3),
		    (long long)reply_int(res, e + 4),
		    (long long)reply_int(res, e + 5), d[i].admitted,
		    (long long)d[i].limit, (long long)d[i].remaining,
		    (long long)d[i].reset_ms, (long long)d[i].retry_ms,
		    (long long)d[i].next_ms);
	}
	for (i = 0; i < n; i++) {
		e = 1 + 4 * i;
		check_key(s, &s->keys[it[i].key], ex->element[e],
		    ex->element[e + 1], ex->element[e + 2], ex->element[e + 3]);
	}
	freeReplyObject(ex);
	return rejected;
}

/*
 * Redis 7.0's PEXPIRE reads the clock twice, for the key's deadline
 * (now + ttl) and to see whether that deadline is already past, and
 * deletes the key at once when it is: with the ttl of 1 ms the script
 * gives a state that ends now, a worker preempted between the two reads
 * (a loaded machine) loses the key inside the EXEC (it failed two CI
 * runs). Such a key was written
 * as the model says, with a TTL within SHORT_TTL_MS: the model lets it
 * expire too, as Redis did, and the next steps go on from there.
 */
#define SHORT_TTL_MS 1000

static bool
expired_early(const struct mkey *k, const redisReply *fields,
    const redisReply *log, const redisReply *pttl_hash,
    const redisReply *pttl_log)
{
	size_t i;

	if (!k->written || k->ttl_ms > SHORT_TTL_MS)
		return false;
	if (pttl_hash->type == REDIS_REPLY_INTEGER &&
	    pttl_hash->integer == -2 && k->stored)
		return true;
	if (pttl_log->type == REDIS_REPLY_INTEGER &&
	    pttl_log->integer == -2 && k->nlog > 0 && k->log_written)
		return true;
	if (log->type == REDIS_REPLY_ARRAY && log->elements < k->nlog)
		return true;
	/* (the ban's fields are there only for a policy with a ban) */
	if (fields->type == REDIS_REPLY_ARRAY && k->stored)
		for (i = 0; i < fields->elements && i < 5; i++)
			if (fields->element[i]->type == REDIS_REPLY_NIL)
				return true;
	return false;
}

/* The hash, log and TTLs of one key against the model. */
static void
check_key(struct sim *s, struct mkey *k, redisReply *fields,
    redisReply *log, redisReply *pttl_hash, redisReply *pttl_log)
{
	const int64_t want[8] = { k->st.window_start_ms, k->st.count,
	    k->st.prev_count, k->st.tat_us, k->st.expires_ms, k->st.refused,
	    k->st.refused_start_ms, k->st.ban_until_ms };
	redisReply *r;
	size_t i;

	if (k->written && !k->stored)   /* dropped below: the same key twice */
		return;
	if (expired_early(k, fields, log, pttl_hash, pttl_log)) {
		r = cmd("DEL %s %s", k->hash, k->log);   /* both, as the model */
		freeReplyObject(r);
		memset(&k->st, 0, sizeof k->st);
		k->stored = false;
		k->nlog = 0;
		return;
	}
	ck_assert_int_eq(fields->type, REDIS_REPLY_ARRAY);
	ck_assert_uint_eq(fields->elements, 8);
	for (i = 0; i < 8; i++) {
		/* A policy without a ban writes none of its fields: 0. */
		if (i >= 5 && k->stored &&
		    fields->element[i]->type == REDIS_REPLY_NIL) {
			ck_assert_msg(want[i] == 0, "seed %u step %ld: %s field"
			    " %zu missing, the model %lld", s->seed, s->step,
			    k->hash, i, (long long)want[i]);
			continue;
		}
		if (!k->stored) {
			ck_assert_msg(fields->element[i]->type ==
			    REDIS_REPLY_NIL, "seed %u step %ld: %s written,"
			    " not in the model", s->seed, s->step, k->hash);
			continue;
		}
		ck_assert_msg(fields->element[i]->type == REDIS_REPLY_STRING,
		    "seed %u step %ld: %s field %zu missing", s->seed,
		    s->step, k->hash, i);
		ck_assert_msg(strtoll(fields->element[i]->str, NULL, 10) ==
		    want[i], "seed %u step %ld: %s field %zu: redis %s, model"
		    " %lld", s->seed, s->step, k->hash, i,
		    fields->element[i]->str, (long long)want[i]);
	}
	ck_assert_int_eq(log->type, REDIS_REPLY_ARRAY);
	ck_assert_msg(log->elements == k->nlog, "seed %u step %ld: %s holds"
	    " %zu entries, the model %zu", s->seed, s->step, k->log,
	    log->elements, k->nlog);
	for (i = 0; i < k->nlog; i++)
		ck_assert_msg(strtoll(log->element[i]->str, NULL, 10) ==
		    k->log_ms[i], "seed %u step %ld: %s[%zu]: redis %s, model"
		    " %lld", s->seed, s->step, k->log, i, log->element[i]->str,
		    (long long)k->log_ms[i]);

	/* Written now: a TTL of what the state has left (real time ran a
	 * little); else persisted before (-1) or never written (-2). */
	ck_assert_int_eq(pttl_hash->type, REDIS_REPLY_INTEGER);
	ck_assert_int_eq(pttl_log->type, REDIS_REPLY_INTEGER);
	if (k->written) {
		ck_assert_msg(pttl_hash->integer >= 0 &&
		    pttl_hash->integer <= k->ttl_ms &&
		    pttl_hash->integer >= k->ttl_ms - 5000, "seed %u step %ld:"
		    " %s PTTL %lld, expected %lld", s->seed, s->step, k->hash,
		    pttl_hash->integer, (long long)k->ttl_ms);
	} else {
		ck_assert_int_eq(pttl_hash->integer, k->stored ? -1 : -2);
	}
	if (k->log_written && k->nlog > 0) {
		ck_assert_msg(pttl_log->integer >= 0 &&
		    pttl_log->integer <= k->log_ttl_ms &&
		    pttl_log->integer >= k->log_ttl_ms - 5000, "seed %u step"
		    " %ld: %s PTTL %lld, expected %lld", s->seed, s->step,
		    k->log, pttl_log->integer, (long long)k->log_ttl_ms);
	} else {
		ck_assert_int_eq(pttl_log->integer, k->nlog > 0 ? -1 : -2);
	}
}

/*
 * A policy of algorithm alg (-1: any). Not extreme: limits up to 50
 * (mostly up to 6), windows of 1 s to an hour, bursts up to twice the
 * limit. Extreme: anything the config accepts, every magnitude alike.
 */
static void
random_policy(struct sim *s, struct rlg_policy *p, int alg, bool extreme)
{
	static const int64_t windows_s[] = { 1, 1, 2, 3, 5, 10, 60, 3600 };

	p->lim.algorithm = (enum rlg_algorithm)(alg >= 0 ? alg :
	    (int)rnd(s, RLG_ALG_COUNT));
	if (extreme) {
		p->lim.limit = rnd_log(s, 1,
		    rlg_algorithm_desc(p->lim.algorithm)->limit_max);
		p->lim.window_ms = 1000 * rnd_log(s, 1, RLG_WINDOW_S_MAX);
		p->lim.burst = rnd_log(s, 1, RLG_BURST_MAX);
	} else {
		p->lim.limit = 1 + (int64_t)rnd(s, rnd(s, 4) == 0 ? 50 : 6);
		p->lim.window_ms = 1000 * (rnd(s, 3) == 0 ?
		    1 + (int64_t)rnd(s, 3600) : windows_s[rnd(s, 8)]);
		p->lim.burst = 1 + (int64_t)rnd(s, (uint64_t)(2 * p->lim.limit));
	}
	/* Other algorithms ignore it: it must not matter what it is. */
	if (!rlg_limiter_has_burst(&p->lim) && rnd(s, 2) == 0)
		p->lim.burst = (int64_t)rnd(s, 3);
	/* A third with a ban (the penalty box), short enough to end. */
	p->lim.ban_ms = 0;
	p->lim.ban_after = 0;
	if (rnd(s, 3) == 0) {
		p->lim.ban_ms = 1000 * (extreme ? rnd_log(s, 1,
		    RLG_BAN_S_MAX) : 1 + (int64_t)rnd(s, 5));
		p->lim.ban_after = (int64_t)rnd(s, 4);
	}
}

/* ---- differential -------------------------------------------------------- */

/*
 * Loops 0 .. RLG_ALG_COUNT - 1: one algorithm each; then one of all
 * mixed, and one of all mixed around the epoch, where times before it
 * clamp to 0.
 */
START_TEST(test_differential)
{
	struct item it[MAXITEMS];
	struct sim s;
	int64_t now, w;
	size_t n = 0, i, admitted = 0, rejected = 0;
	int r, burst = 0;

	sim_init(&s, (unsigned)_i);
	for (i = 0; i < NPOLICIES; i++)
		random_policy(&s, &s.pol[i], _i < RLG_ALG_COUNT ? _i : -1,
		    false);
	now = _i == RLG_ALG_COUNT + 1 ? (int64_t)rnd(&s, 3000) :
	    T0 + (int64_t)rnd(&s, 1000000000);
	for (s.step = 0; s.step < DIFF_STEPS; s.step++) {
		if (burst > 0) {
			/* A burst: the same request again, ms apart. */
			burst--;
			now += (int64_t)rnd(&s, 20);
			rejected += diff_step(&s, it, n, now);
			for (i = 0; i < NKEYS; i++)
				if (s.keys[i].written)
					admitted++;
			continue;
		}
		if (rnd(&s, 30) == 0)
			burst = 10 + (int)rnd(&s, 20);
		w = s.pol[rnd(&s, NPOLICIES)].lim.window_ms;
		r = (int)rnd(&s, 100);
		if (r < 35)
			;                               /* the same ms */
		else if (r < 60)
			now += 1 + (int64_t)rnd(&s, 50);
		else if (r < 80)
			now += (int64_t)rnd(&s, (uint64_t)w);
		else if (r < 90)
			now += w + (int64_t)rnd(&s, (uint64_t)(2 * w));
		else if (r < 94)
			now += (int64_t)rnd(&s, (uint64_t)(10 * w));
		else
			now -= 1 + (int64_t)rnd(&s, (uint64_t)w);  /* back */

		n = rnd(&s, 10) == 0 ? 1 + rnd(&s, MAXITEMS) : 1 + rnd(&s, 3);
		for (i = 0; i < n; i++) {
			it[i].key = (int)rnd(&s, NKEYS);
			it[i].p = &s.pol[it[i].key / NCLIENTS];
			it[i].advisory = rnd(&s, 7) == 0;
			/* Mostly 1; else up to the limit and a little past. */
			it[i].cost = rnd(&s, 3) != 0 ? 1 :
			    1 + (int64_t)rnd(&s, (uint64_t)(it[i].p->lim.limit < 50 ?
			    it[i].p->lim.limit + 2 : 50));
		}
		/* The same (policy, client) twice, now and then. */
		if (n > 1 && rnd(&s, 5) == 0) {
			it[n - 1].key = it[rnd(&s, n - 1)].key;
			it[n - 1].p = &s.pol[it[n - 1].key / NCLIENTS];
		}
		rejected += diff_step(&s, it, n, now);
		for (i = 0; i < NKEYS; i++)
			if (s.keys[i].written)
				admitted++;
	}
	/* The sequences must have exercised both outcomes. */
	printf("redis_script differential %d: %zu items admitted and"
	    " written, %zu rejected\n", _i, admitted, rejected);
	ck_assert_uint_gt(admitted, DIFF_STEPS / 4);
	ck_assert_uint_gt(rejected, DIFF_STEPS / 10);
	sim_free(&s);
}
END_TEST

/* ---- extremes ------------------------------------------------------------ */

/* A random stored state for key k at about now_ms, in Redis and model. */
static void
inject(struct sim *s, struct mkey *k, const struct rlg_policy *p,
    int64_t now_ms)
{
	int64_t now = rlg_limiter_clamp_time(now_ms), w = p->lim.window_ms;
	int64_t start = now - now % w, t_us, tau, now_us, t;
	redisReply *r;
	size_t i, n;

	memset(&k->st, 0, sizeof k->st);
	k->nlog = 0;
	k->stored = rnd(s, 8) != 0;
	switch ((int)rnd(s, 6)) {
	case 0:
		k->st.window_start_ms = start;
		break;
	case 1:
		k->st.window_start_ms = start - w;
		break;
	case 2:
		k->st.window_start_ms = start + w * (int64_t)rnd(s, 3);
		break;
	case 3:
		k->st.window_start_ms = (int64_t)rnd(s, (uint64_t)now + 1);
		break;
	case 4:
		k->st.window_start_ms = start - w * (int64_t)rnd(s, 5);
		break;
	default:
		k->st.window_start_ms = 0;
		break;
	}
	k->st.count = rnd(s, 3) == 0 ? p->lim.limit : (int64_t)rnd(s,
	    (uint64_t)p->lim.limit + 1);
	k->st.prev_count = rnd(s, 3) == 0 ? p->lim.limit : (int64_t)rnd(s,
	    (uint64_t)p->lim.limit + 1);
	if (rnd(s, 20) == 0)                   /* damaged */
		k->st.count = rnd(s, 2) == 0 ? -5 : p->lim.limit + 7;
	/* GCRA: around now +- tolerance, or anywhere up to 9e18. */
	t_us = (p->lim.window_ms * 1000 + p->lim.limit - 1) / p->lim.limit;
	tau = p->lim.burst < 1 ? 0 : p->lim.burst - 1 > 1000000000000000000LL /
	    t_us ? 1000000000000000000LL : (p->lim.burst - 1) * t_us;
	now_us = now * 1000;
	switch ((int)rnd(s, 5)) {
	case 0:
		k->st.tat_us = now_us + tau - t_us + (int64_t)rnd(s,
		    (uint64_t)(3 * t_us));
		break;
	case 1:
		k->st.tat_us = now_us + (int64_t)rnd(s, (uint64_t)tau + 1);
		break;
	case 2:
		k->st.tat_us = (int64_t)rnd(s, 9000000000000000000ULL);
		break;
	case 3:
		k->st.tat_us = now_us - (int64_t)rnd(s, 1000000000);
		break;
	default:
		k->st.tat_us = 0;
		break;
	}
	if (k->st.tat_us < 0 || k->st.tat_us > 9000000000000000000LL)
		k->st.tat_us = 9000000000000000000LL - (int64_t)rnd(s, 1000);
	k->st.expires_ms = start + w;

	r = cmd("DEL %s %s", k->hash, k->log);
	freeReplyObject(r);
	if (k->stored) {
		r = cmd("HSET %s window_start_ms %lld count %lld prev_count"
		    " %lld tat_us %lld expires_ms %lld", k->hash,
		    (long long)k->st.window_start_ms, (long long)k->st.count,
		    (long long)k->st.prev_count, (long long)k->st.tat_us,
		    (long long)k->st.expires_ms);
		freeReplyObject(r);
	}
	/* A sliding log: ascending entries, up to the limit (and past it
	 * when the limit was lowered), some already out of the window. */
	if (rlg_limiter_keeps_log(&p->lim) && rnd(s, 6) != 0) {
		n = (size_t)rnd(s, (uint64_t)(p->lim.limit < 40 ? p->lim.limit + 3 :
		    40));
		t = now - w - (int64_t)rnd(s, (uint64_t)w);
		for (i = 0; i < n; i++) {
			t += (int64_t)rnd(s, (uint64_t)(2 * w /
			    (int64_t)(n + 1) + 1));
			t = rlg_limiter_clamp_time(t);
			log_reserve(&k->log_ms, &k->caplog, k->nlog + 1);
			k->log_ms[k->nlog++] = t;
			r = cmd("RPUSH %s %lld", k->log, (long long)t);
			freeReplyObject(r);
		}
	}
	if (!k->stored)
		memset(&k->st, 0, sizeof k->st);
	r = cmd("PERSIST %s", k->hash);
	freeReplyObject(r);
}

/*
 * Policies up to the config's bounds, stored states of every kind
 * (injected into both sides), times from the epoch to year 9999 and
 * beyond either end: the script's exact big-integer paths and clamps.
 */
START_TEST(test_extremes)
{
	struct item it[2];
	struct sim s;
	int64_t now;
	size_t n;

	sim_init(&s, 100 + (unsigned)_i);
	for (s.step = 0; s.step < EXTREME_STEPS; s.step++) {
		random_policy(&s, &s.pol[0], _i, true);
		switch ((int)rnd(&s, 6)) {
		case 0:
			now = (int64_t)rnd(&s, RLG_TIME_MS_MAX + 1);
			break;
		case 1:
			now = RLG_TIME_MS_MAX - (int64_t)rnd(&s, 100000000);
			break;
		case 2:
			now = RLG_TIME_MS_MAX + (int64_t)rnd(&s, 1000000000);
			break;
		case 3:
			now = -(int64_t)rnd(&s, 1000000000);
			break;
		default:
			now = T0 + (int64_t)rnd(&s, 400000000000LL) -
			    200000000000LL;
			break;
		}
		inject(&s, &s.keys[0], &s.pol[0], now);
		it[0].p = &s.pol[0];
		it[0].key = 0;
		it[0].advisory = false;
		it[0].cost = rnd(&s, 3) != 0 ? 1 : 1 + (int64_t)rnd(&s, 1000);
		n = 1;
		if (rnd(&s, 4) == 0) {         /* the same key twice */
			it[1] = it[0];
			it[1].advisory = rnd(&s, 2) == 0;
			n = 2;
		}
		diff_step(&s, it, n, now);
	}
	sim_free(&s);
}
END_TEST

/* ---- the step by hand ---------------------------------------------------- */

static struct rlg_policy pol_fixed1 = { .name = "f1",
    .lim.algorithm = RLG_ALG_FIXED_WINDOW, .lim.limit = 1, .lim.window_ms = 60000 };
static struct rlg_policy pol_fixed3 = { .name = "f3",
    .lim.algorithm = RLG_ALG_FIXED_WINDOW, .lim.limit = 3, .lim.window_ms = 60000 };
static struct rlg_policy pol_bucket = { .name = "tb",
    .lim.algorithm = RLG_ALG_TOKEN_BUCKET, .lim.limit = 10, .lim.window_ms = 60000,
    .lim.burst = 5 };
static struct rlg_policy pol_log2 = { .name = "sl",
    .lim.algorithm = RLG_ALG_SLIDING_LOG, .lim.limit = 2, .lim.window_ms = 10000 };
static struct rlg_policy pol_slide = { .name = "sw",
    .lim.algorithm = RLG_ALG_SLIDING_WINDOW, .lim.limit = 4, .lim.window_ms = 10000 };

/* Keys 0..3 of a fresh sim, on the test's connection. */
static struct mkey hkeys[4];

static void
hkeys_init(void)
{
	size_t i;

	for (i = 0; i < 4; i++) {
		snprintf(hkeys[i].hash, sizeof hkeys[i].hash, "rlg:{h}:k%zu",
		    i);
		snprintf(hkeys[i].log, sizeof hkeys[i].log,
		    "rlg:{h}:k%zu:log", i);
	}
}

static bool
exists(const char *key)
{
	redisReply *r = cmd("EXISTS %s", key);
	bool yes;

	ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
	yes = r->integer == 1;
	freeReplyObject(r);
	return yes;
}

static int64_t
hfield(const char *key, const char *field)
{
	redisReply *r = cmd("HGET %s %s", key, field);
	int64_t v;

	ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
	v = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

/* One rejecting non-advisory item: nothing at all is written. */
START_TEST(test_all_or_nothing)
{
	struct item it[3] = {
		{ &pol_bucket, 1, false, 1 },
		{ &pol_fixed1, 0, false, 1 },
		{ &pol_log2, 2, false, 1 },
	};
	redisReply *r;

	hkeys_init();
	r = eval_items("1700000000000", &it[1], 1, hkeys);
	ck_assert_int_eq(reply_int(r, 1), 1);
	freeReplyObject(r);
	r = cmd("DBSIZE");
	ck_assert_int_eq(r->integer, 1);
	freeReplyObject(r);

	/* f1 is spent: the bucket and the log would admit, yet nothing. */
	r = eval_items("1700000000001", it, 3, hkeys);
	ck_assert_int_eq(reply_int(r, 1), 1);     /* tb admits ... */
	ck_assert_int_eq(reply_int(r, 7), 0);     /* f1 rejects */
	ck_assert_int_eq(reply_int(r, 10), 39999); /* its reset */
	ck_assert_int_eq(reply_int(r, 11), 39999);
	ck_assert_int_eq(reply_int(r, 12), 39999); /* its next_ms */
	ck_assert_int_eq(reply_int(r, 13), 1);    /* sl admits */
	freeReplyObject(r);
	ck_assert(!exists(hkeys[1].hash));
	ck_assert(!exists(hkeys[2].hash));
	ck_assert(!exists(hkeys[2].log));
	ck_assert_int_eq(hfield(hkeys[0].hash, "count"), 1);

	/* Without f1 the bucket is written. */
	r = eval_items("1700000000002", it, 1, hkeys);
	ck_assert_int_eq(reply_int(r, 1), 1);
	freeReplyObject(r);
	ck_assert(exists(hkeys[1].hash));
}
END_TEST

/* An advisory item decides, but neither rejects nor writes on rejection. */
START_TEST(test_advisory)
{
	struct item it[2] = {
		{ &pol_fixed1, 0, true, 1 },
		{ &pol_fixed3, 1, false, 1 },
	};
	redisReply *r;

	hkeys_init();
	r = eval_items("1700000000000", it, 2, hkeys);
	ck_assert_int_eq(reply_int(r, 1), 1);
	ck_assert_int_eq(reply_int(r, 7), 1);
	freeReplyObject(r);
	ck_assert_int_eq(hfield(hkeys[0].hash, "count"), 1);
	ck_assert_int_eq(hfield(hkeys[1].hash, "count"), 1);

	/* The advisory one rejects: the request goes on, f3 counts, f1's
	 * state is left as it was. */
	r = eval_items("1700000000500", it, 2, hkeys);
	ck_assert_int_eq(reply_int(r, 1), 0);
	ck_assert_int_eq(reply_int(r, 5), 39500);
	ck_assert_int_eq(reply_int(r, 7), 1);
	ck_assert_int_eq(reply_int(r, 9), 1);     /* f3 remaining */
	freeReplyObject(r);
	ck_assert_int_eq(hfield(hkeys[0].hash, "count"), 1);
	ck_assert_int_eq(hfield(hkeys[1].hash, "count"), 2);

	/* Advisory and admitted, with a non-advisory rejection: nothing. */
	it[0].p = &pol_fixed3;
	it[0].key = 2;
	it[1].p = &pol_fixed1;
	it[1].key = 0;
	it[1].advisory = false;
	r = eval_items("1700000000600", it, 2, hkeys);
	ck_assert_int_eq(reply_int(r, 1), 1);
	ck_assert_int_eq(reply_int(r, 7), 0);
	freeReplyObject(r);
	ck_assert(!exists(hkeys[2].hash));
}
END_TEST

/* The same (policy, client) twice in one request counts twice. */
START_TEST(test_same_key_twice)
{
	struct item it[3] = {
		{ &pol_fixed3, 0, false, 1 },
		{ &pol_fixed3, 0, false, 1 },
		{ &pol_fixed3, 0, false, 1 },
	};
	redisReply *r;

	hkeys_init();
	r = eval_items("1700000000000", it, 2, hkeys);
	ck_assert_int_eq(reply_int(r, 3), 2);     /* remaining 2, then 1 */
	ck_assert_int_eq(reply_int(r, 9), 1);
	freeReplyObject(r);
	ck_assert_int_eq(hfield(hkeys[0].hash, "count"), 2);
	/* Two more: the second is the fourth, rejected, so neither counts. */
	r = eval_items("1700000000001", it, 2, hkeys);
	ck_assert_int_eq(reply_int(r, 1), 1);
	ck_assert_int_eq(reply_int(r, 7), 0);
	freeReplyObject(r);
	ck_assert_int_eq(hfield(hkeys[0].hash, "count"), 2);

	/* A sliding log: two entries at the same ms. */
	it[0].p = it[1].p = &pol_log2;
	it[0].key = it[1].key = 1;
	r = eval_items("1700000000002", it, 2, hkeys);
	ck_assert_int_eq(reply_int(r, 1), 1);
	ck_assert_int_eq(reply_int(r, 3), 1);
	ck_assert_int_eq(reply_int(r, 7), 1);
	ck_assert_int_eq(reply_int(r, 9), 0);
	freeReplyObject(r);
	r = cmd("LRANGE %s 0 -1", hkeys[1].log);
	ck_assert_uint_eq(r->elements, 2);
	ck_assert_str_eq(r->element[0]->str, "1700000000002");
	ck_assert_str_eq(r->element[1]->str, "1700000000002");
	freeReplyObject(r);
	ck_assert_int_eq(hfield(hkeys[1].hash, "count"), 2);
	ck_assert_int_eq(hfield(hkeys[1].hash, "expires_ms"),
	    1700000011000);                     /* 10002, rounded up */
}
END_TEST

/*
 * A batch (several requests in one call, store_redis_batch.c) answers as
 * the same requests one call each: in order, each all or nothing on its
 * own, a later one deciding on what an earlier one wrote.
 */
START_TEST(test_batch)
{
	/* Five requests on one key of a fixed window of 3: cost 2
	 * (admitted), 2 (rejected: 1 left, nothing written), 1 (admitted),
	 * then 1 and 1 (rejected: none left). */
#define RQ(c) "1", "0", "3", "60000", "0", "0", c, "0", "1"
	static const char *const batch[] = { "10", "a", "a", "a", "a", "a",
	    "a", "a", "a", "a", "a", "1700000000000", RQ("2"), RQ("2"),
	    RQ("1"), RQ("1"), RQ("1"), NULL };
	static const char *const one[][16] = {
		{ "2", "b", "b", "1700000000000", RQ("2"), NULL },
		{ "2", "b", "b", "1700000000000", RQ("2"), NULL },
		{ "2", "b", "b", "1700000000000", RQ("1"), NULL },
		{ "2", "b", "b", "1700000000000", RQ("1"), NULL },
		{ "2", "b", "b", "1700000000000", RQ("1"), NULL },
	};
#undef RQ
	static const int admitted[] = { 1, 0, 1, 0, 0 };
	redisReply *r, *o;
	size_t i, k;

	r = eval_args(batch);
	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	ck_assert_uint_eq(r->elements, 1 + 6 * 5);
	ck_assert_int_eq(reply_int(r, 0), 1700000000000);
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(reply_int(r, 1 + 6 * i), admitted[i]);
		o = eval_args(one[i]);
		for (k = 1; k < 7; k++)
			ck_assert_msg(reply_int(r, 6 * i + k) ==
			    reply_int(o, k), "request %zu, field %zu: batch"
			    " %lld, alone %lld", i, k - 1,
			    (long long)reply_int(r, 6 * i + k),
			    (long long)reply_int(o, k));
		freeReplyObject(o);
	}
	freeReplyObject(r);
	ck_assert_int_eq(hfield("a", "count"), 3);
	ck_assert_int_eq(hfield("b", "count"), 3);
}
END_TEST

/* ARGV[1] = "": the server's clock (TIME), in the reply. */
START_TEST(test_server_clock)
{
	struct item it[1] = { { &pol_slide, 0, false, 1 } };
	struct timespec ts;
	redisReply *r;
	int64_t before, after, now;

	hkeys_init();
	clock_gettime(CLOCK_REALTIME, &ts);
	before = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	r = eval_items("", it, 1, hkeys);
	clock_gettime(CLOCK_REALTIME, &ts);
	after = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	now = reply_int(r, 0);
	ck_assert_int_ge(now, before - 1000);
	ck_assert_int_le(now, after + 1000);
	ck_assert_int_eq(reply_int(r, 1), 1);
	/* The sliding window's reset: to the end of the next window. */
	ck_assert_int_eq(reply_int(r, 4), now - now % 10000 + 20000 - now);
	freeReplyObject(r);
	ck_assert_int_eq(hfield(hkeys[0].hash, "window_start_ms"),
	    now - now % 10000);
}
END_TEST

/* Every key written expires with its state, relative to now. */
START_TEST(test_expiry)
{
	struct item it[3] = {
		{ &pol_fixed3, 0, false, 1 },
		{ &pol_bucket, 1, false, 1 },
		{ &pol_log2, 2, false, 1 },
	};
	const char *keys[4];
	struct timespec ts;
	redisReply *r;
	char now[32];
	int64_t now_ms, expires, left;
	size_t i;

	hkeys_init();
	keys[0] = hkeys[0].hash;
	keys[1] = hkeys[1].hash;
	keys[2] = hkeys[2].hash;
	keys[3] = hkeys[2].log;
	/* A time an hour off the real one: the TTL is relative to it. */
	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (int64_t)ts.tv_sec * 1000 - 3600000 + 1234;
	snprintf(now, sizeof now, "%lld", (long long)now_ms);
	r = eval_items(now, it, 3, hkeys);
	ck_assert_int_eq(reply_int(r, 0), now_ms);
	freeReplyObject(r);
	for (i = 0; i < 4; i++) {
		expires = hfield(i < 3 ? keys[i] : keys[2], "expires_ms");
		ck_assert_int_eq(expires % 1000, 0);
		ck_assert_int_gt(expires, now_ms);
		r = cmd("PTTL %s", keys[i]);
		left = r->integer;
		freeReplyObject(r);
		ck_assert_msg(left > 0 && left <= expires - now_ms &&
		    left > expires - now_ms - 5000, "%s: PTTL %lld, expires"
		    " in %lld", keys[i], (long long)left,
		    (long long)(expires - now_ms));
	}
	/* The log key of an algorithm without a log is never created. */
	ck_assert(!exists(hkeys[0].log));
	ck_assert(!exists(hkeys[1].log));
}
END_TEST

/* Malformed arguments: an error starting "rlgate:", nothing written. */
START_TEST(test_malformed)
{
	/* The first number past the last algorithm (set below). */
	static char past_last[16];
	static const char *const bad[][32] = {
		/* numkeys, keys..., now, n, items... (NULL ends) */
		{ "2", "a", "b", "x", "1", "0", "3", "60000", "0", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", "1.5", "1", "0", "3", "60000", "0", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", " 1", "1", "0", "3", "60000", "0", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", "1", "0", "0", "3", "60000", "0", "0", "1" },
		{ "2", "a", "b", "1", "x", "0", "3", "60000", "0", "0", "1" },
		{ "2", "a", "b", "1", "2", "0", "3", "60000", "0", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", past_last, "3", "60000", "0", "0",
		    "1", "0", "1" },
		{ "2", "a", "b", "1", "1", "-1", "3", "60000", "0", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "0", "60000", "0", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "1000000001", "60000", "0", "0",
		    "1", "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "0", "0", "0", "1", "0",
		    "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "31622400001", "0", "0",
		    "1", "0", "1" },
		{ "2", "a", "b", "1", "1", "2", "3", "60000", "0", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "2", "3", "60000", "1000000001", "0",
		    "1", "0", "1" },
		{ "2", "a", "b", "1", "1", "3", "100001", "60000", "0", "0",
		    "1", "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "x", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "2", "1",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "4", "1",
		    "0", "1" },
		/* the ban: 0, or whole seconds up to a year; ban_after
		 * 0..RLG_LIMIT_MAX; integers */
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "x", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "-1000", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "1500", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "31622401000", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "1000", "-1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "1000", "1000000001" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "1000", "" },
		/* the cost: 1..RLG_COST_MAX, an integer */
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "0",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "-1",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "x",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1.5",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0",
		    "1000000001", "0", "1" },
		/* a charge for a new key after another charge */
		{ "4", "a", "b", "c", "d", "1", "2", "0", "3", "60000", "0",
		    "2", "1", "0", "1", "0", "3", "60000", "0", "2", "1", "0",
		    "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "", "1", "0",
		    "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "0", "1", "0" },
		{ "0", "1", "1", "0", "3", "60000", "0", "0", "1", "0", "1" },
		/* A good first item does not get written either. */
		{ "4", "a", "b", "c", "d", "1", "2", "0", "3", "60000", "0",
		    "0", "1", "0", "1", "0", "3", "-5", "0", "0", "1", "0",
		    "1" },
		/* A batch: nor a good first request before a bad second. */
		{ "4", "a", "b", "c", "d", "1", "1", "0", "3", "60000", "0",
		    "0", "1", "0", "1", "1", "0", "3", "-5", "0", "0", "1", "0",
		    "1" },
		/* ... keys for one request only, a second n with no items, a
		 * count of items past the arguments, a request of none */
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "0", "1", "1", "0", "3", "60000", "0", "0", "1", "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "0", "1", "1" },
		{ "4", "a", "b", "c", "d", "1", "1", "0", "3", "60000", "0",
		    "0", "1", "0", "1", "2", "0", "3", "60000", "0", "0", "1",
		    "0", "1" },
		{ "2", "a", "b", "1", "1", "0", "3", "60000", "0", "0", "1",
		    "0", "1", "0" },
	};
	static const char *const negative_now[] = {
		"2", "a", "b", "-5", "1", "0", "3", "60000", "0", "0", "1", "0",
		"1", NULL
	};
	redisReply *r;
	size_t i;

	snprintf(past_last, sizeof past_last, "%d", RLG_ALG_COUNT);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		r = eval_args(bad[i]);
		ck_assert_msg(r->type == REDIS_REPLY_ERROR &&
		    strncmp(r->str, "rlgate:", 7) == 0,
		    "case %zu: not an rlgate error (type %d, %s)", i, r->type,
		    r->type == REDIS_REPLY_ERROR ? r->str : "-");
		freeReplyObject(r);
		r = cmd("DBSIZE");
		ck_assert_int_eq(r->integer, 0);
		freeReplyObject(r);
	}
	/* And a negative now is a time before the epoch: clamped to 0. */
	r = eval_args(negative_now);
	ck_assert_int_eq(reply_int(r, 0), 0);
	ck_assert_int_eq(reply_int(r, 4), 60000);
	freeReplyObject(r);
}
END_TEST

/*
 * A test case against the suite's server, a connection per test; "_fcall"
 * at the end of its name: calling the library's function.
 */
static TCase *
script_tcase(Suite *s, const char *name, int timeout_s)
{
	TCase *tc = tcase_create(name);
	size_t len = strlen(name);

	tcase_add_unchecked_fixture(tc, srv_setup, srv_teardown);
	tcase_add_checked_fixture(tc, len > 6 &&
	    strcmp(name + len - 6, "_fcall") == 0 ? conn_setup_fcall :
	    conn_setup, conn_teardown);
	tcase_set_timeout(tc, timeout_s);
	suite_add_tcase(s, tc);
	return tc;
}

Suite *
rlg_redis_script_suite(void)
{
	Suite *s = suite_create("redis_script");
	TCase *tc;

	tc = script_tcase(s, "differential", 120);
	tcase_add_loop_test(tc, test_differential, 0, RLG_ALG_COUNT + 2);

	tc = script_tcase(s, "extremes", 120);
	tcase_add_loop_test(tc, test_extremes, 0, RLG_ALG_COUNT);

	/* The same through the library of Redis Functions (FCALL). */
	tc = script_tcase(s, "differential_fcall", 120);
	tcase_add_loop_test(tc, test_differential, 0, RLG_ALG_COUNT + 2);
	tc = script_tcase(s, "extremes_fcall", 120);
	tcase_add_loop_test(tc, test_extremes, 0, RLG_ALG_COUNT);

	tc = script_tcase(s, "step", 60);
	tcase_add_test(tc, test_all_or_nothing);
	tcase_add_test(tc, test_advisory);
	tcase_add_test(tc, test_same_key_twice);
	tcase_add_test(tc, test_batch);
	tcase_add_test(tc, test_server_clock);
	tcase_add_test(tc, test_expiry);
	tcase_add_test(tc, test_malformed);
	return s;
}
