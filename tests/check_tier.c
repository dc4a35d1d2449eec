/*
 * check_tier.c: the tier module (tier.h): specs, clients, the limit a
 * spec gives a policy, and which entry of a set applies to a client.
 */
#include <stdio.h>
#include <string.h>

#include "check_rlgate.h"
#include "net.h"
#include "tier.h"

#define KEY_A "k:0123456789abcdef0123456789abcdef"
#define KEY_B "k:fedcba9876543210fedcba9876543210"

START_TEST(test_spec_parse)
{
	struct rlg_tier_spec sp;
	char err[256];

	ck_assert_int_eq(rlg_tier_spec_parse("limit=600 window=60", &sp, err,
	    sizeof err), 0);
	ck_assert_int_eq(sp.limit, 600);
	ck_assert_int_eq(sp.window_s, 60);
	ck_assert_int_eq(sp.burst, 0);
	ck_assert(!sp.exempt);
	ck_assert_int_eq(rlg_tier_spec_parse(" \tburst=7  limit=1 ", &sp, err,
	    sizeof err), 0);
	ck_assert_int_eq(sp.burst, 7);
	ck_assert_int_eq(sp.limit, 1);
	ck_assert_int_eq(rlg_tier_spec_parse("exempt", &sp, err, sizeof err),
	    0);
	ck_assert(sp.exempt);
	ck_assert_int_eq(rlg_tier_spec_parse("limit=1000000000", &sp, err,
	    sizeof err), 0);
	ck_assert_int_eq(rlg_tier_spec_parse("window=31622400", &sp, err,
	    sizeof err), 0);
	/* a window takes the units [policy] window takes */
	ck_assert_int_eq(rlg_tier_spec_parse("window=90s", &sp, err,
	    sizeof err), 0);
	ck_assert_int_eq(sp.window_s, 90);
	ck_assert_int_eq(rlg_tier_spec_parse("limit=5 window=15m", &sp, err,
	    sizeof err), 0);
	ck_assert_int_eq(sp.window_s, 900);
	ck_assert_int_eq(rlg_tier_spec_parse("window=1h", &sp, err,
	    sizeof err), 0);
	ck_assert_int_eq(sp.window_s, 3600);
	ck_assert_int_eq(rlg_tier_spec_parse("window=366d", &sp, err,
	    sizeof err), 0);
	ck_assert_int_eq(sp.window_s, 31622400);
}
END_TEST

/* Each bad spec is refused with what is wrong. */
START_TEST(test_spec_bad)
{
	static const struct {
		const char *spec, *err;
	} bad[] = {
		{ "", "empty (expected limit=N, window=SECONDS, burst=N or "
		    "exempt)" },
		{ "   ", "empty (expected" },
		{ "exempt limit=3", "exempt goes alone" },
		{ "limit=3 exempt", "exempt goes alone" },
		{ "limit=0", "limit: must be an integer from 1 to 1000000000 "
		    "(got \"0\")" },
		{ "limit=-1", "(got \"-1\")" },
		{ "limit=+5", "(got \"+5\")" },
		{ "limit=1e3", "(got \"1e3\")" },
		{ "limit=", "(got \"\")" },
		{ "limit=1000000001", "(got \"1000000001\")" },
		{ "limit=99999999999999999999", "limit: must be" },
		{ "window=31622401", "window: a duration in seconds, or with "
		    "a unit s, m, h, d (e.g. 90s, 15m, 1h), from 1 to 31622400 "
		    "seconds (got \"31622401\")" },
		{ "window=367d", "(got \"367d\")" },
		{ "window=1y", "(got \"1y\")" },
		{ "window=1.5h", "(got \"1.5h\")" },
		{ "window=h", "(got \"h\")" },
		{ "window=0s", "(got \"0s\")" },
		{ "window=-1m", "(got \"-1m\")" },
		{ "window=5ms", "(got \"5ms\")" },
		{ "window=99999999999999999999d", "window: a duration" },
		{ "burst=0", "burst: must be" },
		{ "limit=1 limit=2", "limit set twice" },
		{ "speed=3", "unknown word \"speed=3\"" },
		{ "limit", "unknown word \"limit\"" },
		{ "Limit=3", "unknown word \"Limit=3\"" },
		{ "limit=3,window=4", "(got \"3,window=4\")" },
	};
	struct rlg_tier_spec sp;
	char err[256], big[300];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		ck_assert_msg(rlg_tier_spec_parse(bad[i].spec, &sp, err,
		    sizeof err) == -1, "%s", bad[i].spec);
		ck_assert_msg(strstr(err, bad[i].err) != NULL, "%s: %s",
		    bad[i].spec, err);
	}
	memset(big, ' ', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	memcpy(big, "limit=1", 7);
	ck_assert_int_eq(rlg_tier_spec_parse(big, &sp, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "longer than 128 bytes"));
}
END_TEST

START_TEST(test_client_parse)
{
	struct rlg_tier_client c;
	char err[256];

	ck_assert_int_eq(rlg_tier_client_parse("203.0.113.7", &c, err,
	    sizeof err), 0);
	ck_assert(!c.is_key);
	ck_assert_int_eq(c.net.prefix_len, 128);
	ck_assert_int_eq(rlg_tier_client_parse("198.51.100.0/24", &c, err,
	    sizeof err), 0);
	ck_assert_int_eq(c.net.prefix_len, 120);
	ck_assert_int_eq(rlg_tier_client_parse("2001:db8::/48", &c, err,
	    sizeof err), 0);
	ck_assert_int_eq(c.net.prefix_len, 48);
	ck_assert_int_eq(rlg_tier_client_parse(
	    "k:0123456789ABCDEF0123456789abcdef", &c, err, sizeof err), 0);
	ck_assert(c.is_key);
	ck_assert_str_eq(c.key, KEY_A);

	ck_assert_int_eq(rlg_tier_client_parse("k:0123", &c, err, sizeof err),
	    -1);
	ck_assert_ptr_nonnull(strstr(err, "k: and 32 hex digits"));
	ck_assert_int_eq(rlg_tier_client_parse(
	    "k:0123456789abcdef0123456789abcdeg", &c, err, sizeof err), -1);
	ck_assert_int_eq(rlg_tier_client_parse(
	    "k:0123456789abcdef0123456789abcdef0", &c, err, sizeof err), -1);
	ck_assert_int_eq(rlg_tier_client_parse("10.0.0.1/8", &c, err,
	    sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "host bits zero"));
	ck_assert_int_eq(rlg_tier_client_parse("example.com", &c, err,
	    sizeof err), -1);
	ck_assert_int_eq(rlg_tier_client_parse("", &c, err, sizeof err), -1);
	ck_assert_int_eq(rlg_tier_client_parse("10.0.0.1 ", &c, err,
	    sizeof err), -1);
}
END_TEST

/* A policy of the test: algorithm, limit, window (s), burst. */
static struct rlg_policy
pol(enum rlg_algorithm a, int64_t limit, int64_t window_s, int64_t burst)
{
	struct rlg_policy p;

	memset(&p, 0, sizeof p);
	p.name = (char *)"p";
	p.lim.algorithm = a;
	p.lim.limit = limit;
	p.lim.window_ms = window_s * 1000;
	p.lim.burst = burst;
	return p;
}

START_TEST(test_limit)
{
	struct rlg_policy fw = pol(RLG_ALG_FIXED_WINDOW, 60, 60, 60);
	struct rlg_policy tb = pol(RLG_ALG_TOKEN_BUCKET, 10, 10, 10);
	struct rlg_policy tb5 = pol(RLG_ALG_TOKEN_BUCKET, 10, 10, 5);
	struct rlg_policy sl = pol(RLG_ALG_SLIDING_LOG, 10, 60, 10);
	struct rlg_tier_spec sp = { 600, 3600, 0, false };
	struct rlg_limit lim;
	char err[256];

	ck_assert_int_eq(rlg_tier_limit(&fw, &sp, &lim, err, sizeof err), 0);
	ck_assert_int_eq(lim.algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(lim.limit, 600);
	ck_assert_int_eq(lim.window_ms, 3600000);
	sp.window_s = 0;
	ck_assert_int_eq(rlg_tier_limit(&fw, &sp, &lim, err, sizeof err), 0);
	ck_assert_int_eq(lim.window_ms, 60000);
	/* burst only for a token bucket */
	sp.burst = 7;
	ck_assert_int_eq(rlg_tier_limit(&fw, &sp, &lim, err, sizeof err), -1);
	ck_assert_str_eq(err, "burst applies only to token_bucket ([policy "
	    "p] is fixed_window)");
	ck_assert_int_eq(rlg_tier_limit(&tb, &sp, &lim, err, sizeof err), 0);
	ck_assert_int_eq(lim.burst, 7);
	ck_assert_int_eq(lim.limit, 600);
	/* the policy's burst is its limit: the burst follows the new limit */
	sp.burst = 0;
	ck_assert_int_eq(rlg_tier_limit(&tb, &sp, &lim, err, sizeof err), 0);
	ck_assert_int_eq(lim.burst, 600);
	/* a burst of its own stays */
	ck_assert_int_eq(rlg_tier_limit(&tb5, &sp, &lim, err, sizeof err), 0);
	ck_assert_int_eq(lim.burst, 5);
	/* the sliding log's cap */
	sp.limit = 100001;
	ck_assert_int_eq(rlg_tier_limit(&sl, &sp, &lim, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "at most 100000 (got 100001)"));
	sp.limit = 100000;
	ck_assert_int_eq(rlg_tier_limit(&sl, &sp, &lim, err, sizeof err), 0);
}
END_TEST

static struct rlg_config *
load(const char *text)
{
	struct rlg_config *cfg = NULL;

	ck_assert_int_eq(rlg_config_load_string(text, "tier.conf", stderr,
	    &cfg), 0);
	return cfg;
}

/* What applies under policy pi to addr (text, or NULL) with key. */
static const char *
who(const struct rlg_tier_set *set, size_t pi, const char *addr,
    const char *key, int64_t *limit)
{
	struct rlg_tier_match m;
	struct rlg_addr a;

	if (addr != NULL)
		ck_assert_int_eq(rlg_addr_parse(addr, &a), 0);
	*limit = -1;
	if (!rlg_tier_find(set, pi, addr != NULL ? &a : NULL, key, &m))
		return "none";
	if (m.exempt) {
		ck_assert_ptr_null(m.policy);
		return m.source;
	}
	*limit = m.policy->lim.limit;
	return m.source;
}

/* The config's tiers: the most specific entry wins, then file order. */
START_TEST(test_set_config)
{
	struct rlg_config *cfg = load(
	    "[client]\nkey_secret = 0123456789abcdef0123456789abcdef\n"
	    "[policy default]\nlimit = 10\n"
	    "[policy api]\nkey = header:X-API-Key\nlimit = 20\n"
	    "[policy other]\nlimit = 30\n"
	    "[tier wide]\nclients = 10.0.0.0/8, 2001:db8::/32\n"
	    "default = limit=100\napi = limit=200\n"
	    "[tier narrow]\nclients = 10.1.0.0/16\ndefault = limit=101\n"
	    "[tier host]\nclients = 10.1.2.3\ndefault = exempt\n"
	    "[tier host2]\nclients = 10.1.2.3, " KEY_A "\n"
	    "default = limit=103\napi = limit=203\n"
	    "[tier keyed]\nclients = " KEY_B "\napi = limit=204 window=5\n");
	struct rlg_tier_set *set = rlg_tier_set_config(cfg);
	int64_t limit;

	/* 1 + 1 + 1 + 2 x 2 + 1 (policy, client) entries; wide: 2 x 2 */
	ck_assert_uint_eq(rlg_tier_set_size(set), 4 + 1 + 1 + 4 + 1);
	ck_assert_str_eq(who(set, 0, "10.9.9.9", NULL, &limit), "wide");
	ck_assert_int_eq(limit, 100);
	ck_assert_str_eq(who(set, 0, "10.1.9.9", NULL, &limit), "narrow");
	ck_assert_int_eq(limit, 101);
	/* a host in two tiers: the first in the file */
	ck_assert_str_eq(who(set, 0, "10.1.2.3", NULL, &limit), "host");
	ck_assert_int_eq(limit, -1);
	ck_assert_str_eq(who(set, 0, "2001:db8:1::5", NULL, &limit), "wide");
	ck_assert_str_eq(who(set, 0, "11.0.0.1", NULL, &limit), "none");
	ck_assert_str_eq(who(set, 0, NULL, "10.1.2.3", &limit), "none");
	/* no tier names [policy other] */
	ck_assert_str_eq(who(set, 2, "10.1.2.3", NULL, &limit), "none");
	/* an API key before an address; the k: part of ADDR|k: too */
	ck_assert_str_eq(who(set, 1, "10.9.9.9", KEY_B, &limit), "keyed");
	ck_assert_int_eq(limit, 204);
	ck_assert_str_eq(who(set, 1, "10.9.9.9", "10.9.9.9|" KEY_A, &limit),
	    "host2");
	ck_assert_int_eq(limit, 203);
	ck_assert_str_eq(who(set, 1, "10.9.9.9", "k:0000", &limit), "wide");
	ck_assert_str_eq(who(set, 1, "11.0.0.1", KEY_A "x", &limit), "none");
	ck_assert_str_eq(who(set, 1, NULL, KEY_A, &limit), "host2");
	/* the copy keeps the policy's name, key and algorithm */
	{
		struct rlg_tier_match m;
		struct rlg_addr a;

		ck_assert_int_eq(rlg_addr_parse("10.9.9.9", &a), 0);
		ck_assert(rlg_tier_find(set, 1, &a, KEY_B, &m));
		ck_assert_str_eq(m.policy->name, "api");
		ck_assert_str_eq(m.policy->key_name, "X-API-Key");
		ck_assert_int_eq(m.policy->lim.window_ms, 5000);
		ck_assert_int_eq(m.policy->lim.algorithm,
		    RLG_ALG_FIXED_WINDOW);
	}
	ck_assert(!rlg_tier_find(set, 99, NULL, KEY_B, NULL));
	ck_assert(!rlg_tier_find(NULL, 0, NULL, KEY_B, NULL));
	rlg_tier_set_free(set);
	rlg_config_free(cfg);
}
END_TEST

/* Rows as the store gives them: checked one by one. */
START_TEST(test_set_rows)
{
	struct rlg_config *cfg = load(
	    "[policy default]\nlimit = 10\n"
	    "[policy bucket]\nalgorithm = token_bucket\nlimit = 5\n");
	struct rlg_tier_set *set = rlg_tier_set_new(cfg);
	char err[256];
	int64_t limit;

	ck_assert_int_eq(rlg_tier_set_add(set, "default", "203.0.113.7",
	    "limit=600 window=60", "override", err, sizeof err), 0);
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "203.0.113.0/24",
	    "exempt", "override", err, sizeof err), 0);
	ck_assert_int_eq(rlg_tier_set_add(set, "bucket", "203.0.113.7",
	    "burst=9", "override", err, sizeof err), 0);
	ck_assert_int_eq(rlg_tier_set_add(set, "nope", "203.0.113.7",
	    "limit=1", "override", err, sizeof err), RLG_TIER_NO_POLICY);
	ck_assert_str_eq(err, "no [policy nope]");
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "203.0.113.7/8",
	    "limit=1", "override", err, sizeof err), RLG_TIER_BAD_CLIENT);
	ck_assert_ptr_nonnull(strstr(err, "client: \"203.0.113.7/8\""));
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "203.0.113.8",
	    "limit=0", "override", err, sizeof err), RLG_TIER_BAD_SPEC);
	ck_assert_ptr_nonnull(strstr(err, "spec: limit: must be"));
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "203.0.113.8",
	    "burst=2", "override", err, sizeof err), RLG_TIER_BAD_SPEC);
	ck_assert_ptr_nonnull(strstr(err, "spec: burst applies only"));
	/* networks of one length, found by their address */
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "198.51.100.0/24",
	    "limit=9", "override", err, sizeof err), 0);
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "192.0.2.0/24",
	    "limit=8", "override", err, sizeof err), 0);
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "192.0.2.128/25",
	    "limit=7", "override", err, sizeof err), 0);
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "2001:db8::/32",
	    "limit=6", "override", err, sizeof err), 0);
	ck_assert_uint_eq(rlg_tier_set_size(set), 7);
	rlg_tier_set_seal(set);
	ck_assert_str_eq(who(set, 0, "198.51.100.255", NULL, &limit),
	    "override");
	ck_assert_int_eq(limit, 9);
	ck_assert_str_eq(who(set, 0, "192.0.2.1", NULL, &limit), "override");
	ck_assert_int_eq(limit, 8);
	ck_assert_str_eq(who(set, 0, "192.0.2.200", NULL, &limit),
	    "override");
	ck_assert_int_eq(limit, 7);
	ck_assert_str_eq(who(set, 0, "2001:db8:ffff::1", NULL, &limit),
	    "override");
	ck_assert_int_eq(limit, 6);
	ck_assert_str_eq(who(set, 0, "192.0.3.1", NULL, &limit), "none");
	ck_assert_str_eq(who(set, 0, "2001:db9::1", NULL, &limit), "none");
	ck_assert_str_eq(who(set, 0, "::ffff:198.51.100.7", NULL, &limit),
	    "override");
	ck_assert_int_eq(rlg_tier_set_add(set, "default", "203.0.113.9",
	    "limit=1", "override", err, sizeof err), RLG_TIER_FULL);
	ck_assert_str_eq(who(set, 0, "203.0.113.7", NULL, &limit),
	    "override");
	ck_assert_int_eq(limit, 600);
	ck_assert_str_eq(who(set, 0, "203.0.113.8", NULL, &limit),
	    "override");
	ck_assert_int_eq(limit, -1);
	{
		struct rlg_tier_match m;
		struct rlg_addr a;

		ck_assert_int_eq(rlg_addr_parse("203.0.113.7", &a), 0);
		ck_assert(rlg_tier_find(set, 1, &a, NULL, &m));
		ck_assert_int_eq(m.policy->lim.limit, 5);
		ck_assert_int_eq(m.policy->lim.burst, 9);
	}
	rlg_tier_set_free(set);
	/* an empty set matches nothing */
	set = rlg_tier_set_new(cfg);
	rlg_tier_set_seal(set);
	ck_assert_str_eq(who(set, 0, "203.0.113.7", NULL, &limit), "none");
	rlg_tier_set_free(set);
	rlg_config_free(cfg);
}
END_TEST

Suite *
rlg_tier_suite(void)
{
	Suite *s = suite_create("tier");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_spec_parse);
	tcase_add_test(tc, test_spec_bad);
	tcase_add_test(tc, test_client_parse);
	tcase_add_test(tc, test_limit);
	tcase_add_test(tc, test_set_config);
	tcase_add_test(tc, test_set_rows);
	suite_add_tcase(s, tc);
	return s;
}
