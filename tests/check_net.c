/*
 * check_net.c: addresses and networks: parsing through the libc (and what
 * it must refuse), IPv4-mapped IPv6 folded to IPv4, CIDR host-bit
 * strictness, containment across families, and the prefix keys that group
 * an IPv6 client's /64 into one.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "check_rlgate.h"
#include "net.h"

static const char *
key_of(const char *s, int prefix, char *buf)
{
	struct rlg_addr a;

	if (rlg_addr_parse(s, &a) != 0)
		return "(bad)";
	return rlg_addr_key(&a, prefix, buf);
}

static bool
in(const char *net, const char *addr)
{
	struct rlg_cidr n;
	struct rlg_addr a;

	ck_assert_int_eq(rlg_cidr_parse(net, &n), 0);
	ck_assert_int_eq(rlg_addr_parse(addr, &a), 0);
	return rlg_cidr_contains(&n, &a);
}

START_TEST(test_addr_parse)
{
	static const char *bad[] = { "", "1.2.3", "1.2.3.4.5", "256.1.1.1",
	    "01.2.3.4", "1.2.3.4 ", " 1.2.3.4", "1.2.3.4:80", "[::1]",
	    "fe80::1%eth0", "2001:db8::1::2", "unknown", "_hidden",
	    "10.0.0.1\r\n", "10.0.0.0/8", "gggg::1",
	    "1111:2222:3333:4444:5555:6666:7777:8888:9999" };
	struct rlg_addr a;
	char buf[RLG_ADDR_TEXT_MAX];
	size_t i;

	ck_assert_int_eq(rlg_addr_parse("192.0.2.1", &a), 0);
	ck_assert(a.v4);
	ck_assert_int_eq(a.b[10], 0xff);
	ck_assert_int_eq(a.b[11], 0xff);
	ck_assert_int_eq(a.b[12], 192);
	ck_assert_int_eq(a.b[15], 1);
	ck_assert_int_eq(rlg_addr_parse("2001:DB8::1", &a), 0);
	ck_assert(!a.v4);
	ck_assert_str_eq(rlg_addr_key(&a, 128, buf), "2001:db8::1");
	ck_assert_int_eq(rlg_addr_parse("::1", &a), 0);
	ck_assert(!a.v4);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(rlg_addr_parse(bad[i], &a) == -1, "%s", bad[i]);
	ck_assert_int_eq(rlg_addr_parse(NULL, &a), -1);
}
END_TEST

START_TEST(test_mapped)
{
	struct rlg_addr a, b;
	char buf[RLG_ADDR_TEXT_MAX];

	ck_assert_int_eq(rlg_addr_parse("::ffff:192.0.2.1", &a), 0);
	ck_assert_int_eq(rlg_addr_parse("192.0.2.1", &b), 0);
	ck_assert(a.v4);
	ck_assert_mem_eq(a.b, b.b, 16);
	ck_assert_str_eq(rlg_addr_key(&a, 64, buf), "192.0.2.1");
	ck_assert_int_eq(rlg_addr_parse("::FFFF:c000:0201", &a), 0);
	ck_assert(a.v4);
	ck_assert_str_eq(rlg_addr_key(&a, 64, buf), "192.0.2.1");
	/* IPv4-compatible (deprecated) and NAT64 are not mapped. */
	ck_assert_int_eq(rlg_addr_parse("::192.0.2.1", &a), 0);
	ck_assert(!a.v4);
	ck_assert_int_eq(rlg_addr_parse("64:ff9b::192.0.2.1", &a), 0);
	ck_assert(!a.v4);
}
END_TEST

START_TEST(test_cidr_parse)
{
	static const char *bad[] = { "10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/",
	    "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/8 ", "10.0.0.0/0x8",
	    "/8", "2001:db8::1/64", "2001:db8::/129", "2001:db8::/1000",
	    "10.0.0.0/8/8", "::ffff:10.0.0.1/104", "", "bogus/8",
	    "192.168.1.128/24", "2001:db8:0:1::/63" };
	/*
	 * Each good network and its prefix length over 128 bits (an IPv4
	 * one as ::ffff:a.b.c.d, 96 bits in).
	 */
	static const struct {
		const char *text;
		int prefix_len;
	} good[] = {
		{ "10.0.0.0/8", 96 + 8 }, { "192.0.2.7", 128 },
		{ "0.0.0.0/0", 96 }, { "2001:db8::/32", 32 }, { "::/0", 0 },
		{ "::1", 128 }, { "::ffff:10.0.0.0/104", 104 },
		{ "10.0.0.128/25", 96 + 25 }, { "2001:db8:0:2::/63", 63 },
	};
	struct rlg_cidr n;
	size_t i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		ck_assert_msg(rlg_cidr_parse(good[i].text, &n) == 0, "%s",
		    good[i].text);
		ck_assert_int_eq(n.prefix_len, good[i].prefix_len);
	}
	ck_assert_int_eq(rlg_cidr_parse("10.0.0.0/8", &n), 0);
	ck_assert(n.addr.v4);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(rlg_cidr_parse(bad[i], &n) == -1, "%s", bad[i]);
	ck_assert_int_eq(rlg_cidr_parse(NULL, &n), -1);
}
END_TEST

START_TEST(test_contains)
{
	/* A network, an address in it and one not in it (NULL: none). */
	static const struct {
		const char *net, *inside, *outside;
	} cases[] = {
		{ "10.0.0.0/8", "10.255.1.2", "11.0.0.0" },
		{ "10.0.0.0/8", "::ffff:10.1.2.3", "9.255.255.255" },
		{ "10.0.0.128/25", "10.0.0.255", "10.0.0.127" },
		{ "192.0.2.7", "192.0.2.7", "192.0.2.8" },
		{ "0.0.0.0/0", "203.0.113.9", "2001:db8::1" },  /* IPv4 only */
		{ "2001:db8::/32", "2001:db8:ffff::1", "2001:db9::1" },
		{ "2001:db8::/33", "2001:db8:7fff::1", "2001:db8:8000::1" },
		{ "::1", "::1", "::2" },
		{ "::1", "::1", "127.0.0.1" },
		{ "::ffff:10.0.0.0/104", "10.1.2.3", "11.1.2.3" },  /* mapped */
		{ "::/0", "10.1.2.3", NULL },
	};
	struct rlg_cidr nets[2];
	struct rlg_addr a;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_msg(in(cases[i].net, cases[i].inside), "%s in %s",
		    cases[i].inside, cases[i].net);
		ck_assert_msg(cases[i].outside == NULL ||
		    !in(cases[i].net, cases[i].outside), "%s not in %s",
		    cases[i].outside, cases[i].net);
	}

	ck_assert_int_eq(rlg_cidr_parse("10.0.0.0/8", &nets[0]), 0);
	ck_assert_int_eq(rlg_cidr_parse("::1", &nets[1]), 0);
	ck_assert_int_eq(rlg_addr_parse("::1", &a), 0);
	ck_assert(rlg_cidr_any(nets, 2, &a));
	ck_assert(!rlg_cidr_any(nets, 1, &a));
	ck_assert(!rlg_cidr_any(nets, 0, &a));
	ck_assert_int_eq(rlg_addr_parse("10.9.9.9", &a), 0);
	ck_assert(rlg_cidr_any(nets, 2, &a));
}
END_TEST

START_TEST(test_prefix_keys)
{
	/* An address, the IPv6 prefix, its key. */
	static const struct {
		const char *addr;
		int prefix;
		const char *key;
	} cases[] = {
		{ "2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64" },
		{ "2001:db8:1:2:ffff::1", 64, "2001:db8:1:2::/64" },
		{ "2001:db8:1:3::1", 64, "2001:db8:1:3::/64" },
		{ "2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6" },
		{ "2001:db8:1:2:3:4:5:6", 0, "2001:db8:1:2:3:4:5:6" },
		{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 127,
		    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127" },  /* longest */
		{ "2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48" },
		{ "2001:db8:1:2:3:4:5:6", 1, "::/1" },
		{ "2001:db8::ff", 120, "2001:db8::/120" },
		/* IPv4 is always whole, whatever the IPv6 prefix */
		{ "192.0.2.77", 64, "192.0.2.77" },
		{ "::ffff:192.0.2.77", 1, "192.0.2.77" },
		{ "::1", 64, "::/64" },
		{ "::1", 128, "::1" },
	};
	char buf[RLG_ADDR_TEXT_MAX];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_str_eq(key_of(cases[i].addr, cases[i].prefix, buf),
		    cases[i].key);
		ck_assert_int_lt(strlen(buf), RLG_ADDR_TEXT_MAX);
	}
}
END_TEST

/* The IPv4 key is inet_ntop's text, for every value of each byte. */
START_TEST(test_v4_text)
{
	char buf[RLG_ADDR_TEXT_MAX], want[INET_ADDRSTRLEN], in[32];
	unsigned char b[4];
	int v, pos;

	for (pos = 0; pos < 4; pos++) {
		for (v = 0; v < 256; v++) {
			b[0] = 1, b[1] = 20, b[2] = 203, b[3] = 7;
			b[pos] = (unsigned char)v;
			ck_assert_ptr_nonnull(inet_ntop(AF_INET, b, want,
			    sizeof want));
			snprintf(in, sizeof in, "%u.%u.%u.%u", b[0], b[1],
			    b[2], b[3]);
			ck_assert_str_eq(key_of(in, 64, buf), want);
		}
	}
	ck_assert_str_eq(key_of("255.255.255.255", 64, buf),
	    "255.255.255.255");
	ck_assert_str_eq(key_of("0.0.0.0", 64, buf), "0.0.0.0");
}
END_TEST

Suite *
rlg_net_suite(void)
{
	Suite *s = suite_create("net");
	TCase *core = tcase_create("core"), *keys = tcase_create("keys");

	tcase_add_test(core, test_addr_parse);
	tcase_add_test(core, test_mapped);
	tcase_add_test(core, test_cidr_parse);
	tcase_add_test(core, test_contains);
	tcase_add_test(keys, test_prefix_keys);
	tcase_add_test(keys, test_v4_text);
	suite_add_tcase(s, core);
	suite_add_tcase(s, keys);
	return s;
}
