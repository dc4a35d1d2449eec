/*
 * check_redis_faults.c: the Redis store against a server that lies: no
 * client escapes its quota through a reply rlgate would have trusted.
 *
 * Each test starts tests/fake_redis (built beside this runner) in one of
 * its modes on 127.0.0.1 at a port the kernel picks, drives
 * rlg_store_step against it and stops it by pid. What is checked:
 *   "replies"  every value of the step script's reply is held to what
 *              app/limiter.c can produce for the policy (limit, remaining,
 *              reset_ms, retry_ms, now_ms, admitted), so a huge, zero or
 *              inconsistent value is a store failure (RLG_ESTORE, errmsg
 *              naming the server, the field and the value), never a
 *              decision; under the sanitizer build nothing overflows on
 *              the way (the rejection cache included); SCRIPT LOAD's and
 *              PING's replies, a reply too large to hold, more replies
 *              than asked for, a slot map with a bad host;
 *   "deadline" timeout_ms is one deadline for all of a step's commands: a
 *              reply trickled one byte at a time, a silent server, a
 *              trickled connect, redirections and TRYAGAIN on a cluster
 *              end in a store failure "timed out" within a generous
 *              multiple of timeout_ms (connect_timeout_ms added when the
 *              step connects), never after the whole trickle;
 *   "cache"    the rejection cache in front of any store adds delays to
 *              now_ms only when the sum fits, so a huge delay from any
 *              backend never overflows.
 * Timing assertions are loose (3x the deadline, or more); the message
 * ("timed out after N ms") says which path failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "check_rlgate.h"
#include "fixture.h"

#include "config.h"
#include "limiter.h"
#include "store.h"
#include "store_cache.h"
#include "store_fixture.h"
#include "util.h"

/* A fixed time for clock = local: 2025-01-01T00:00:00Z. */
#define FX_T1 1735689600000LL
/* The fake's start-up and stop, bounded. */
#define FX_START_MS 10000
#define FX_STOP_MS 5000

/* A running fake_redis. */
struct fx {
	pid_t pid;
	int port;
	char dir[64];              /* where it writes its port, until read */
	char url[64];
};

static void fx_start(struct fx *f, const char *mode, int trickle_ms);
static void fx_stop(struct fx *f);
static struct rlg_store *fx_open(const struct fx *f, bool cluster,
    int connect_ms, int timeout_ms, int64_t cache, int *rc);
static void fx_expect(const struct rlg_store *s, const struct fx *f,
    const char *also, const char *also2);

static struct rlg_policy fx_policy = {
	.name = (char *)"default",
	.lim.algorithm = RLG_ALG_FIXED_WINDOW,
	.lim.limit = 5,
	.lim.window_ms = 60000,
};

/*
 * The fake's path: beside this runner (the build tree's tests/), or
 * $RLGATE_BUILDDIR/tests when make check says where that is.
 */
static void
fx_path(char *buf, size_t size)
{
	const char *b = getenv("RLGATE_BUILDDIR");
	char self[4096];
	ssize_t len;
	char *slash;

	if (b != NULL && *b != '\0') {
		snprintf(buf, size, "%s/tests/fake_redis", b);
		if (access(buf, X_OK) == 0)
			return;
	}
	len = readlink("/proc/self/exe", self, sizeof self - 1);
	ck_assert_msg(len > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[len] = '\0';
	slash = strrchr(self, '/');
	ck_assert_ptr_nonnull(slash);
	*slash = '\0';
	ck_assert_int_lt(snprintf(buf, size, "%.*s/fake_redis",
	    (int)(size - sizeof "/fake_redis"), self), (int)size);
}

/*
 * Starts fake_redis --mode mode (trickle_ms > 0: --trickle-ms) as our
 * child, dying with us, and waits (bounded) for the port it writes.
 */
static void
fx_start(struct fx *f, const char *mode, int trickle_ms)
{
	char bin[4096], portf[96], pidf[96], tr[16];
	int64_t t0;
	FILE *pf;
	int fd;

	memset(f, 0, sizeof *f);
	fx_path(bin, sizeof bin);
	snprintf(f->dir, sizeof f->dir, "/tmp/rlg-fake-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(portf, sizeof portf, "%s/port", f->dir);
	snprintf(pidf, sizeof pidf, "%s/pid", f->dir);
	snprintf(tr, sizeof tr, "%d", trickle_ms > 0 ? trickle_ms : 100);
	fflush(NULL);
	f->pid = fork();
	ck_assert_int_ge(f->pid, 0);
	if (f->pid == 0) {
#ifdef __linux__
		(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
		for (fd = 3; fd < 1024; fd++)
			(void)close(fd);
		execl(bin, "fake_redis", "--mode", mode, "--trickle-ms", tr,
		    "--port-file", portf, "--pid-file", pidf,
		    "--lifetime-s", "120", (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	t0 = mono_ms();
	while ((pf = fopen(portf, "r")) == NULL) {
		ck_assert_msg(waitpid(f->pid, NULL, WNOHANG) == 0,
		    "fake_redis --mode %s exited at start", mode);
		ck_assert_msg(mono_ms() - t0 < FX_START_MS,
		    "fake_redis --mode %s wrote no port in %d ms", mode,
		    FX_START_MS);
		sleep_ms(5);
	}
	ck_assert_int_eq(fscanf(pf, "%d", &f->port), 1);
	fclose(pf);
	snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", f->port);
	/* Read: gone now, so a failing test leaves nothing behind. */
	(void)unlink(portf);
	(void)unlink(pidf);
	(void)rmdir(f->dir);
	f->dir[0] = '\0';
}

/* SIGTERM, a bounded wait, SIGKILL. */
static void
fx_stop(struct fx *f)
{
	int64_t t0;

	if (f->pid > 0) {
		(void)kill(f->pid, SIGTERM);
		t0 = mono_ms();
		while (waitpid(f->pid, NULL, WNOHANG) == 0) {
			if (mono_ms() - t0 > FX_STOP_MS) {
				(void)kill(f->pid, SIGKILL);
				(void)waitpid(f->pid, NULL, 0);
				break;
			}
			sleep_ms(5);
		}
		f->pid = 0;
	}
}

/*
 * A Redis store (cluster: redis_cluster) on the fake, clock = local,
 * with these timeouts and rejection cache; its open's result in *rc.
 */
static struct rlg_store *
fx_open(const struct fx *f, bool cluster, int connect_ms, int timeout_ms,
    int64_t cache, int *rc)
{
	struct rlg_store_config cfg;
	struct rlg_store *s = NULL;

	memset(&cfg, 0, sizeof cfg);
	store_cfg_url(&cfg, f->url);
	cfg.redis.cluster = cluster;
	cfg.redis.clock = RLG_CLOCK_LOCAL;
	cfg.redis.connect_timeout_ms = connect_ms;
	cfg.redis.timeout_ms = timeout_ms;
	cfg.rejection_cache = cache;
	*rc = rlg_store_open(&cfg, &s);
	store_cfg_free(&cfg);
	ck_assert_ptr_nonnull(s);
	return s;
}

/* errmsg names the fake (as a server or a cluster node) and also/also2. */
static void
fx_expect(const struct rlg_store *s, const struct fx *f, const char *also,
    const char *also2)
{
	const char *msg = rlg_store_errmsg(s);
	char name[64];

	snprintf(name, sizeof name, "127.0.0.1:%d", f->port);
	ck_assert_msg(strstr(msg, name) != NULL, "no %s in: %s", name, msg);
	if (also != NULL)
		ck_assert_msg(strstr(msg, also) != NULL, "no \"%s\" in: %s",
		    also, msg);
	if (also2 != NULL)
		ck_assert_msg(strstr(msg, also2) != NULL, "no \"%s\" in: %s",
		    also2, msg);
}

/* ---- replies ------------------------------------------------------------ */

/*
 * A well-behaved fake is answered as Redis is: the checks refuse nothing
 * the limiter can say (each algorithm, a burst above the limit).
 */
START_TEST(test_reply_ok)
{
	struct rlg_policy p[4];
	struct rlg_store_item items[4];
	struct rlg_decision d[4];
	struct rlg_store *s;
	struct fx f;
	size_t i;
	int rc;

	for (i = 0; i < 4; i++) {
		p[i] = fx_policy;
		p[i].lim.algorithm = (enum rlg_algorithm)i;
		items[i].policy = &p[i];
		items[i].client = "10.0.0.1";
		items[i].advisory = false;
		items[i].if_new = false;
		items[i].cost = 1;
	}
	p[0].name = (char *)"fw";
	p[1].name = (char *)"sw";
	p[2].name = (char *)"tb";
	p[2].lim.burst = 50;           /* remaining 49: above the limit */
	p[3].name = (char *)"sl";
	fx_start(&f, "ok", 0);
	s = fx_open(&f, false, 2000, 2000, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	rc = rlg_store_step(s, items, 4, FX_T1, d);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	for (i = 0; i < 4; i++) {
		ck_assert(d[i].admitted);
		ck_assert_int_eq(d[i].limit, 5);
		ck_assert_int_eq(d[i].remaining, i == 2 ? 49 : 4);
		ck_assert_int_eq(d[i].reset_ms, 60000);
		ck_assert_int_eq(d[i].retry_ms, 0);
	}
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * A reply the limiter could never give: each mode of the fake breaks one
 * field. The step fails (RLG_ESTORE), errmsg naming the server, the
 * field and the value, and the next step connects again (the connection
 * was dropped).
 */
static const struct {
	const char *mode;
	const char *field;         /* in errmsg */
	const char *value;         /* in errmsg */
} fx_bad_replies[] = {
	{ "retry-huge", "retry_ms", "(9223372036854775807)" },
	{ "retry-zero", "retry_ms", "(0)" },
	{ "retry-admitted", "retry_ms", "(1000)" },
	{ "reset-huge", "reset_ms", "(9223372036854775807)" },
	{ "reset-zero", "reset_ms", "(0)" },
	{ "reset-ne-retry", "reset_ms", "(60001)" },
	{ "next-zero", "next_ms", "(0)" },
	{ "next-after-reset", "next_ms", "(60001)" },
	{ "next-ne-retry", "next_ms", "(60001)" },
	{ "limit-huge", "limit", "(9223372036854775807)" },
	{ "limit-other", "limit", "(6)" },
	{ "remaining-huge", "remaining", "(9223372036854775807)" },
	{ "remaining-limit", "remaining", "(5)" },
	{ "remaining-rejected", "remaining", "(1)" },
	{ "now-huge", "now_ms", "(9223372036854775807)" },
	{ "type-string", "retry_ms", "is a string" },
	{ "type-nested", "retry_ms", "is an array" },
};

START_TEST(test_reply_out_of_range)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	struct fx f;
	int rc;

	fx_start(&f, fx_bad_replies[_i].mode, 0);
	s = fx_open(&f, false, 2000, 2000, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	rc = rlg_store_step(s, &item, 1, FX_T1, &d);
	ck_assert_msg(rc == RLG_ESTORE, "mode %s: rc %d (retry_ms %lld)",
	    fx_bad_replies[_i].mode, rc, (long long)d.retry_ms);
	fx_expect(s, &f, fx_bad_replies[_i].field, fx_bad_replies[_i].value);
	ck_assert_msg(strstr(rlg_store_errmsg(s), "EVALSHA") != NULL, "%s",
	    rlg_store_errmsg(s));
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * The sync's reply (store_redis_sync.c), checked as a step's: a fake
 * that answers it well gives its states; each lie fails the sync with
 * RLG_ESTORE, errmsg naming the server and the element, and the items
 * marked unknown. A step's reply to a sync (mode ok: six integers per
 * item) is the wrong shape.
 */
static const struct {
	const char *mode;
	const char *what;          /* in errmsg */
} fx_bad_syncs[] = {
	{ "sync-tat-huge", "\"99999999999999999999\"" },
	{ "sync-tat-text", "\"12x\"" },
	{ "sync-count-huge", "element 7 is an integer out of range" },
	{ "sync-expires-negative", "element 10 is an integer out of range" },
	{ "sync-arity", "not an array of 11 elements" },
	{ "ok", "not an array of 11 elements" },
};

START_TEST(test_sync_reply)
{
	struct rlg_sync_item sy[2] = { { &fx_policy, "10.0.0.1", 1, FX_T1 },
	    { &fx_policy, "10.0.0.2", 2, FX_T1 } };
	struct rlg_state g[2];
	struct rlg_store *s;
	struct fx f;
	int rc;

	fx_start(&f, _i == 0 ? "sync-ok" : fx_bad_syncs[_i - 1].mode, 0);
	s = fx_open(&f, false, 2000, 2000, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	rc = rlg_store_sync(s, sy, 2, FX_T1, g);
	if (_i == 0) {
		ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
		ck_assert_int_eq(g[1].count, 0);
		ck_assert_int_eq(g[1].expires_ms, 0);
	} else {
		ck_assert_int_eq(rc, RLG_ESTORE);
		fx_expect(s, &f, "EVALSHA (sync)", fx_bad_syncs[_i - 1].what);
		ck_assert_int_eq(g[0].expires_ms, RLG_SYNC_UNKNOWN);
		ck_assert_int_eq(g[1].expires_ms, RLG_SYNC_UNKNOWN);
	}
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * The first of these found: retry_ms = 2^63 - 1 through the rejection
 * cache made a signed overflow (UBSan: now_ms + retry_ms) and a
 * Retry-After of 9223372036854776. It is a store failure now, and the
 * cache remembers nothing.
 */
START_TEST(test_reply_huge_through_cache)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	struct fx f;
	int rc, i;

	fx_start(&f, "retry-huge", 0);
	s = fx_open(&f, false, 2000, 2000, 64, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	for (i = 0; i < 3; i++) {
		/* After a failure the handle waits out a backoff. */
		if (i > 0)
			sleep_ms(100 << i);
		rc = rlg_store_step(s, &item, 1, FX_T1 + i, &d);
		ck_assert_msg(rc == RLG_ESTORE, "step %d: rc %d, retry_ms"
		    " %lld", i, rc, (long long)d.retry_ms);
	}
	ck_assert(rlg_test_stats(s).cache);
	ck_assert_uint_eq(rlg_test_stats(s).cache_stored, 0);
	ck_assert_uint_eq(rlg_test_stats(s).cache_hits, 0);
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * SCRIPT LOAD must give 40 lowercase hex digits, the same every time: 40
 * NUL bytes passed the old check (strchr finds the terminator).
 */
static const char *const fx_bad_sha[] = {
	"sha-nul", "sha-upper", "sha-short", "sha-int",
};

START_TEST(test_script_load_checked)
{
	struct rlg_store *s;
	struct fx f;
	int rc;

	fx_start(&f, fx_bad_sha[_i], 0);
	s = fx_open(&f, false, 2000, 2000, 0, &rc);
	ck_assert_msg(rc == RLG_ESTORE, "mode %s: open succeeded",
	    fx_bad_sha[_i]);
	fx_expect(s, &f, "SCRIPT LOAD", "SHA1");
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * After NOSCRIPT the script is loaded again: a server that then names
 * another SHA1 is not running the text rlgate sent.
 */
START_TEST(test_script_load_changes)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	struct fx f;
	int rc;

	fx_start(&f, "sha-changes", 0);
	s = fx_open(&f, false, 2000, 2000, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	rc = rlg_store_step(s, &item, 1, FX_T1, &d);
	ck_assert_int_eq(rc, RLG_ESTORE);
	fx_expect(s, &f, "SCRIPT LOAD", "SHA1");
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/* PING must say PONG. */
START_TEST(test_ping_checked)
{
	struct rlg_store *s;
	struct fx f;
	int rc;

	fx_start(&f, "pong-bad", 0);
	s = fx_open(&f, false, 2000, 2000, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	fx_expect(s, &f, "PING", "NOPE");
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * A reply no step needs: an array of a billion elements (refused before
 * hiredis allocates it), a 32 MiB string (refused once the reply passes
 * the cap, long before the deadline).
 */
START_TEST(test_reply_too_large)
{
	static const char *const modes[] = { "huge-array", "huge-bulk" };
	static const char *const says[] = { "1000000000 elements",
	    "larger than" };
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	struct fx f;
	int rc;

	fx_start(&f, modes[_i], 0);
	s = fx_open(&f, false, 2000, 5000, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	rc = rlg_store_step(s, &item, 1, FX_T1, &d);
	ck_assert_int_eq(rc, RLG_ESTORE);
	fx_expect(s, &f, "EVALSHA", says[_i]);
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * Two replies to one EVALSHA: the first is well formed, but the second
 * would be taken by the next step for its own (another client's
 * decision): the connection is out of step and the step fails.
 */
START_TEST(test_reply_extra)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	struct fx f;
	int rc;

	fx_start(&f, "extra-reply", 0);
	s = fx_open(&f, false, 2000, 2000, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	rc = rlg_store_step(s, &item, 1, FX_T1, &d);
	ck_assert_int_eq(rc, RLG_ESTORE);
	fx_expect(s, &f, "EVALSHA", "bytes more than 1 reply");
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/* A slot map whose master's host holds a control byte is refused whole. */
START_TEST(test_cluster_slots_checked)
{
	struct rlg_store *s;
	struct fx f;
	int rc;

	fx_start(&f, "cluster-bad-host", 0);
	s = fx_open(&f, true, 2000, 2000, 0, &rc);
	ck_assert_int_eq(rc, RLG_ESTORE);
	fx_expect(s, &f, "CLUSTER SLOTS", "host");
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/* ---- deadline ----------------------------------------------------------- */

/*
 * A reply trickled one byte every 30 ms (about 45 bytes: 1.4 s) with
 * timeout_ms = 200: hiredis' timeout applied per read, so each byte came
 * in time and the step took the whole trickle. It fails at the deadline.
 */
START_TEST(test_trickle_bounded)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	int64_t t0, took;
	struct fx f;
	int rc;

	fx_start(&f, "trickle", 30);
	s = fx_open(&f, false, 2000, 200, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	t0 = mono_ms();
	rc = rlg_store_step(s, &item, 1, FX_T1, &d);
	took = mono_ms() - t0;
	ck_assert_msg(rc == RLG_ESTORE, "rc %d after %lld ms", rc,
	    (long long)took);
	fx_expect(s, &f, "EVALSHA", "timed out after 200 ms");
	ck_assert_msg(took < 3 * 200, "the step took %lld ms",
	    (long long)took);
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/* A server that never answers EVALSHA: the deadline, once. */
START_TEST(test_silent_bounded)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	int64_t t0, took;
	struct fx f;
	int rc;

	fx_start(&f, "silent", 0);
	s = fx_open(&f, false, 2000, 200, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	t0 = mono_ms();
	rc = rlg_store_step(s, &item, 1, FX_T1, &d);
	took = mono_ms() - t0;
	ck_assert_int_eq(rc, RLG_ESTORE);
	fx_expect(s, &f, "EVALSHA", "timed out after 200 ms");
	ck_assert_msg(took >= 150 && took < 3 * 200, "the step took %lld ms",
	    (long long)took);
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * Every reply trickled, PING's and SCRIPT LOAD's too: a connect is
 * bounded by connect_timeout_ms + timeout_ms, not by the trickle (54
 * bytes at 30 ms: 1.6 s).
 */
START_TEST(test_trickle_connect_bounded)
{
	struct rlg_store *s;
	int64_t t0, took;
	struct fx f;
	int rc;

	fx_start(&f, "trickle-all", 30);
	t0 = mono_ms();
	s = fx_open(&f, false, 200, 200, 0, &rc);
	took = mono_ms() - t0;
	ck_assert_msg(rc == RLG_ESTORE, "open: rc %d after %lld ms", rc,
	    (long long)took);
	fx_expect(s, &f, "timed out after 200 ms", NULL);
	ck_assert_msg(took < 3 * (200 + 200), "the open took %lld ms",
	    (long long)took);
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * A cluster node that answers every EVALSHA with MOVED to itself, one
 * byte every 20 ms (about 0.6 s a reply, 5 redirections: 3.6 s): the
 * redirections share the step's deadline.
 */
START_TEST(test_cluster_moved_bounded)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	int64_t t0, took;
	struct fx f;
	int rc;

	fx_start(&f, "cluster-moved-trickle", 20);
	s = fx_open(&f, true, 2000, 200, 0, &rc);
	ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
	t0 = mono_ms();
	rc = rlg_store_step(s, &item, 1, FX_T1, &d);
	took = mono_ms() - t0;
	ck_assert_int_eq(rc, RLG_ESTORE);
	fx_expect(s, &f, "EVALSHA", "timed out after 200 ms");
	ck_assert_msg(took < 3 * 200, "the step took %lld ms",
	    (long long)took);
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/*
 * TRYAGAIN forever: the retries wait 5, 10, 20, 40, 80 ms, but no longer
 * than the step's deadline (timeout_ms = 100 here). On a loaded machine the
 * fake's first TRYAGAIN may itself come after the deadline (the message
 * then has no TRYAGAIN): up to 5 tries, each with a new connection.
 */
START_TEST(test_cluster_tryagain_bounded)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct rlg_decision d;
	struct rlg_store *s;
	int64_t t0, took;
	struct fx f;
	int rc, try;

	fx_start(&f, "cluster-tryagain", 0);
	for (try = 0; try < 5; try++) {
		s = fx_open(&f, true, 2000, 100, 0, &rc);
		ck_assert_msg(rc == RLG_OK, "%s", rlg_store_errmsg(s));
		t0 = mono_ms();
		rc = rlg_store_step(s, &item, 1, FX_T1, &d);
		took = mono_ms() - t0;
		ck_assert_int_eq(rc, RLG_ESTORE);
		ck_assert_msg(took < 1000, "the step took %lld ms",
		    (long long)took);
		if (strstr(rlg_store_errmsg(s), "TRYAGAIN") != NULL)
			break;
		if (try < 4)
			rlg_store_close(s);
	}
	fx_expect(s, &f, "TRYAGAIN", "timed out after 100 ms");
	rlg_store_close(s);
	fx_stop(&f);
}
END_TEST

/* ---- cache -------------------------------------------------------------- */

/*
 * A store that rejects every request with delay_ms as reset and retry:
 * whatever any backend could hand the rejection cache.
 */
struct fx_stub {
	struct rlg_store base;
	int64_t delay_ms;
	int steps;
};

static int
fx_stub_step(struct rlg_store *base, const struct rlg_store_item *items,
    size_t n, int64_t now_ms, struct rlg_decision *decisions)
{
	struct fx_stub *st = (struct fx_stub *)base;
	size_t i;

	(void)items;
	(void)now_ms;
	st->steps++;
	for (i = 0; i < n; i++) {
		decisions[i].admitted = false;
		decisions[i].limit = 5;
		decisions[i].remaining = 0;
		decisions[i].reset_ms = st->delay_ms;
		decisions[i].retry_ms = st->delay_ms;
		decisions[i].next_ms = st->delay_ms;
	}
	return RLG_OK;
}

static int
fx_stub_prune(struct rlg_store *base, int64_t now_ms, int64_t *deleted)
{
	(void)base;
	(void)now_ms;
	*deleted = 0;
	return RLG_OK;
}

static void
fx_stub_close(struct rlg_store *base)
{
	(void)base;
}

static const struct rlg_store_ops fx_stub_ops = {
	.name = "stub",
	.step = fx_stub_step,
	.prune = fx_stub_prune,
	.close = fx_stub_close,
};

/*
 * now_ms + delay is taken only when it fits: a delay of 2^63 - 1 is
 * passed on as the store said it and not remembered (it was a signed
 * overflow, and a negative "until" made the entry useless); the largest
 * delay that fits is remembered and counted down exactly; a time before
 * the epoch is not remembered either.
 */
START_TEST(test_cache_huge_delay)
{
	struct rlg_store_item item = { &fx_policy, "10.0.0.1", false, false, 1 };
	struct fx_stub stub = { { .ops = &fx_stub_ops }, INT64_MAX, 0 };
	struct rlg_decision d;
	struct rlg_store *c;

	c = rlg_store_cache_wrap(&stub.base, 16);
	ck_assert_ptr_ne(c, &stub.base);
	ck_assert(rlg_test_stats(c).cache);

	ck_assert_int_eq(rlg_store_step(c, &item, 1, FX_T1, &d), RLG_OK);
	ck_assert(!d.admitted);
	ck_assert_int_eq(d.retry_ms, INT64_MAX);
	ck_assert_uint_eq(rlg_test_stats(c).cache_stored, 0);
	ck_assert_int_eq(rlg_store_step(c, &item, 1, FX_T1 + 1, &d), RLG_OK);
	ck_assert_int_eq(stub.steps, 2);
	ck_assert_uint_eq(rlg_test_stats(c).cache_hits, 0);

	/* The largest delay that fits: remembered, counted down. */
	stub.delay_ms = INT64_MAX - FX_T1;
	ck_assert_int_eq(rlg_store_step(c, &item, 1, FX_T1, &d), RLG_OK);
	ck_assert_uint_eq(rlg_test_stats(c).cache_stored, 1);
	ck_assert_int_eq(rlg_store_step(c, &item, 1, FX_T1 + 7, &d), RLG_OK);
	ck_assert_int_eq(stub.steps, 3);
	ck_assert_uint_eq(rlg_test_stats(c).cache_hits, 1);
	ck_assert_int_eq(d.retry_ms, INT64_MAX - FX_T1 - 7);
	ck_assert_int_eq(d.reset_ms, INT64_MAX - FX_T1 - 7);

	/* Before the epoch: answered by the store, not remembered. */
	item.client = "10.0.0.2";
	stub.delay_ms = 1000;
	ck_assert_int_eq(rlg_store_step(c, &item, 1, -5000, &d), RLG_OK);
	ck_assert_uint_eq(rlg_test_stats(c).cache_stored, 1);
	rlg_store_close(c);
}
END_TEST

/* A connection the fake closed must fail a write, not kill the runner. */
static void
fx_setup(void)
{
	signal(SIGPIPE, SIG_IGN);
}

Suite *
rlg_redis_faults_suite(void)
{
	Suite *s = suite_create("redis_faults");
	TCase *tc;

	tc = tcase_create("replies");
	tcase_add_unchecked_fixture(tc, fx_setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_reply_ok);
	tcase_add_loop_test(tc, test_reply_out_of_range, 0,
	    (int)(sizeof fx_bad_replies / sizeof fx_bad_replies[0]));
	tcase_add_test(tc, test_reply_huge_through_cache);
	tcase_add_loop_test(tc, test_sync_reply, 0,
	    1 + (int)(sizeof fx_bad_syncs / sizeof fx_bad_syncs[0]));
	tcase_add_loop_test(tc, test_script_load_checked, 0,
	    (int)(sizeof fx_bad_sha / sizeof fx_bad_sha[0]));
	tcase_add_test(tc, test_script_load_changes);
	tcase_add_test(tc, test_ping_checked);
	tcase_add_loop_test(tc, test_reply_too_large, 0, 2);
	tcase_add_test(tc, test_reply_extra);
	tcase_add_test(tc, test_cluster_slots_checked);
	suite_add_tcase(s, tc);

	tc = tcase_create("deadline");
	tcase_add_unchecked_fixture(tc, fx_setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_trickle_bounded);
	tcase_add_test(tc, test_silent_bounded);
	tcase_add_test(tc, test_trickle_connect_bounded);
	tcase_add_test(tc, test_cluster_moved_bounded);
	tcase_add_test(tc, test_cluster_tryagain_bounded);
	suite_add_tcase(s, tc);

	tc = tcase_create("cache");
	tcase_add_test(tc, test_cache_huge_delay);
	suite_add_tcase(s, tc);
	return s;
}
