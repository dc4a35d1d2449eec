/*
 * net.c: IP addresses and networks for client identity. Text is read and
 * written only through inet_pton(3) and inet_ntop(3), so the forms accepted
 * are exactly the libc's (no zones, no octal IPv4, no brackets or ports:
 * those belong to the header parsers in request.c). Every address is kept
 * in 16 bytes, IPv4 as IPv4-mapped IPv6, so one comparison serves both
 * families and ::ffff:192.0.2.1 is the same client as 192.0.2.1.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "net.h"

static const unsigned char v4_mapped_prefix[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};

static void mask_bits(unsigned char b[16], int prefix_len);

/* Clears every bit of b below the first prefix_len (0..128). */
static void
mask_bits(unsigned char b[16], int prefix_len)
{
	int i;

	for (i = 0; i < 16; i++) {
		int keep = prefix_len - i * 8;

		if (keep >= 8)
			continue;
		b[i] = keep <= 0 ? 0 :
		    (unsigned char)(b[i] & (0xff << (8 - keep)));
	}
}

int
rlg_addr_parse(const char *s, struct rlg_addr *out)
{
	unsigned char v4[4];

	memset(out, 0, sizeof *out);
	if (s == NULL || strlen(s) >= INET6_ADDRSTRLEN)
		return -1;
	if (inet_pton(AF_INET, s, v4) == 1) {
		memcpy(out->b, v4_mapped_prefix, sizeof v4_mapped_prefix);
		memcpy(out->b + 12, v4, sizeof v4);
		out->v4 = true;
		return 0;
	}
	if (inet_pton(AF_INET6, s, out->b) == 1) {
		out->v4 = memcmp(out->b, v4_mapped_prefix,
		    sizeof v4_mapped_prefix) == 0;
		return 0;
	}
	memset(out, 0, sizeof *out);
	return -1;
}

int
rlg_cidr_parse(const char *s, struct rlg_cidr *out)
{
	char host[INET6_ADDRSTRLEN];
	const char *slash, *p;
	unsigned char masked[16];
	size_t n;
	int len = 0, max;

	memset(out, 0, sizeof *out);
	if (s == NULL)
		return -1;
	slash = strchr(s, '/');
	n = slash != NULL ? (size_t)(slash - s) : strlen(s);
	if (n == 0 || n >= sizeof host)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	if (rlg_addr_parse(host, &out->addr) != 0)
		return -1;
	/* The family is the one written: "::ffff:10.0.0.0/104" counts in
	 * IPv6 bits, "10.0.0.0/8" in IPv4 bits. */
	max = strchr(host, ':') == NULL ? 32 : 128;
	if (slash == NULL) {
		len = max;
	} else {
		p = slash + 1;
		if (*p == '\0' || strlen(p) > 3)
			goto bad;
		for (; *p != '\0'; p++) {
			if (*p < '0' || *p > '9')
				goto bad;
			len = len * 10 + (*p - '0');
		}
		if (len > max)
			goto bad;
	}
	out->prefix_len = max == 32 ? 96 + len : len;
	memcpy(masked, out->addr.b, sizeof masked);
	mask_bits(masked, out->prefix_len);
	if (memcmp(masked, out->addr.b, sizeof masked) != 0)
		goto bad;       /* host bits set: "10.0.0.1/8" */
	return 0;
bad:
	memset(out, 0, sizeof *out);
	return -1;
}

bool
rlg_cidr_contains(const struct rlg_cidr *n, const struct rlg_addr *a)
{
	int whole = n->prefix_len / 8, rest = n->prefix_len % 8;

	if (memcmp(n->addr.b, a->b, (size_t)whole) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((n->addr.b[whole] ^ a->b[whole]) &
	    (0xff << (8 - rest)) & 0xff) == 0;
}

bool
rlg_cidr_any(const struct rlg_cidr *nets, size_t n, const struct rlg_addr *a)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (rlg_cidr_contains(&nets[i], a))
			return true;
	}
	return false;
}

/* Dotted quad of 4 bytes into buf (16 bytes at least): inet_ntop's
 * text, without the sprintf it calls for each of them. */
static void
format_v4(const unsigned char *b, char *buf)
{
	char *p = buf;
	int i;

	for (i = 0; i < 4; i++) {
		if (i > 0)
			*p++ = '.';
		if (b[i] >= 100)
			*p++ = (char)('0' + b[i] / 100);
		if (b[i] >= 10)
			*p++ = (char)('0' + b[i] / 10 % 10);
		*p++ = (char)('0' + b[i] % 10);
	}
	*p = '\0';
}

char *
rlg_addr_key(const struct rlg_addr *a, int ipv6_prefix, char *buf)
{
	unsigned char b[16];
	size_t n;

	if (a->v4) {
		format_v4(a->b + 12, buf);
		return buf;
	}
	memcpy(b, a->b, sizeof b);
	if (ipv6_prefix >= 1 && ipv6_prefix <= 127)
		mask_bits(b, ipv6_prefix);
	if (inet_ntop(AF_INET6, b, buf, RLG_ADDR_TEXT_MAX) == NULL) {
		buf[0] = '\0';
		return buf;
	}
	if (ipv6_prefix >= 1 && ipv6_prefix <= 127) {
		n = strlen(buf);
		snprintf(buf + n, RLG_ADDR_TEXT_MAX - n, "/%d", ipv6_prefix);
	}
	return buf;
}
