/*
 * net.h: IP addresses and networks, for client identity: parsing (IPv4,
 * IPv6, IPv4-mapped IPv6 folded to IPv4), CIDR matching, prefix masking and
 * the canonical text form that becomes a client key. No I/O; used by the
 * config (trusted_proxies, exempt) and the request module.
 */
#ifndef RLG_NET_H
#define RLG_NET_H

#include <stdbool.h>
#include <stddef.h>

/*
 * An address: IPv4 is kept as IPv4-mapped IPv6 (::ffff:a.b.c.d), so one
 * 16-byte form serves both families and a mapped address equals its IPv4.
 */
struct rlg_addr {
	unsigned char b[16];
	bool v4;                  /* an IPv4 (or IPv4-mapped IPv6) address */
};

/* A network: addr/prefix_len, prefix_len counted over the 16 bytes (an
 * IPv4 /24 is stored as 96 + 24 = 120). Host bits are zero. */
struct rlg_cidr {
	struct rlg_addr addr;
	int prefix_len;           /* 0..128 */
};

/* The longest canonical text of an address or network, with NUL. */
#define RLG_ADDR_TEXT_MAX 50

/*
 * Parses an IPv4 or IPv6 address (no zone, no brackets, no port). An
 * IPv4-mapped IPv6 address becomes IPv4. Returns 0, or -1 if s is not one.
 */
int rlg_addr_parse(const char *s, struct rlg_addr *out);

/*
 * Parses "ADDR" (a single host) or "ADDR/LEN" (LEN 0..32 for IPv4,
 * 0..128 for IPv6). Host bits below LEN must be zero ("10.0.0.1/8" is an
 * error, so a typo is not silently widened). Returns 0 or -1.
 */
int rlg_cidr_parse(const char *s, struct rlg_cidr *out);

/* True when a lies inside network n. */
bool rlg_cidr_contains(const struct rlg_cidr *n, const struct rlg_addr *a);

/* True when a lies inside any of nets[0..n). */
bool rlg_cidr_any(const struct rlg_cidr *nets, size_t n,
    const struct rlg_addr *a);

/*
 * Canonical text of a: "192.0.2.1" or "2001:db8::1". With ipv6_prefix in
 * 1..127 an IPv6 address is masked to that prefix and written as a network
 * ("2001:db8:1:2::/64"), so one client with a /64 is one key; IPv4 is
 * always whole. buf must hold RLG_ADDR_TEXT_MAX bytes. Returns buf.
 */
char *rlg_addr_key(const struct rlg_addr *a, int ipv6_prefix, char *buf);

#endif
