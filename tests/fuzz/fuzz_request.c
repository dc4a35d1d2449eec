/*
 * fuzz_request.c: libFuzzer target for the request parser and the policy
 * keys, the code that reads what clients and proxies send. The input is
 * split at '\n' into "NAME=value" parameters (REMOTE_ADDR, HTTP_FORWARDED,
 * HTTP_X_FORWARDED_FOR, REQUEST_URI, REQUEST_METHOD, HTTP_X_API_KEY, ...;
 * CR and every other byte stay in the values). Each input is parsed with a
 * config that trusts 10.0.0.0/8 and ::1, and keyed by IP, by header, by
 * cookie (HTTP_COOKIE's sid), by query parameter (key), by a bearer
 * token's sub (HTTP_AUTHORIZATION, HS256) and globally, alone and with
 * IP. Beyond the sanitizers, it checks that a key is NUL-terminated,
 * fits and holds no CR or LF, that the client is an address we parsed or
 * the shared unknown key, that a refused request (a flaw) has no address
 * an exemption could match, that a path read is absolute, that only a
 * key header sent twice or a cookie or parameter named twice makes a
 * policy key fail, and that a global key is "*".
 *
 * Build with ./configure CC=clang --enable-fuzzing; run scripts/fuzz.sh.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "front_cgi.h"
#include "net.h"
#include "request.h"
#include "util.h"

#define FUZZ_PARAMS_MAX 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rlg_cidr trusted[2];
static struct rlg_client_config cc;

static void
check_key(const char *key, size_t cap)
{
	size_t n = strnlen(key, cap);

	if (n == cap || strpbrk(key, "\r\n") != NULL)
		abort();
}

static void
setup(void)
{
	if (cc.ntrusted != 0)
		return;
	if (rlg_cidr_parse("10.0.0.0/8", &trusted[0]) != 0 ||
	    rlg_cidr_parse("::1", &trusted[1]) != 0)
		abort();
	cc.trusted_proxies = trusted;
	cc.ntrusted = 2;
	cc.ipv6_prefix = 64;
	cc.key_secret = "fuzz-secret";
	/* bearer tokens: HS256 with this secret (a token of the corpus
	 * signs with it) */
	cc.jwt_key = (unsigned char *)"fuzz-jwt-secret-0123456789abcdef";
	cc.jwt_key_len = strlen((const char *)cc.jwt_key);
	cc.jwt_algorithm = RLG_JWT_HS256;
	cc.jwt_generation = 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned kinds[] = { 0, RLG_KEY_IP, RLG_KEY_HEADER,
	    RLG_KEY_IP | RLG_KEY_HEADER, RLG_KEY_COOKIE,
	    RLG_KEY_IP | RLG_KEY_COOKIE, RLG_KEY_QUERY,
	    RLG_KEY_IP | RLG_KEY_QUERY, RLG_KEY_GLOBAL, RLG_KEY_JWT };
	char *buf, *envp[FUZZ_PARAMS_MAX + 1], *p, *nl;
	struct rlg_params in;
	char key[RLG_CLIENT_KEY_MAX + 1], text[RLG_ADDR_TEXT_MAX];
	struct rlg_request *r;
	struct rlg_policy pol;
	const char *v;
	size_t n = 0, i;
	bool twice;
	int rc;

	setup();
	buf = malloc(size + 1);
	r = malloc(sizeof *r);
	if (buf == NULL || r == NULL)
		abort();
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (p = buf; n < FUZZ_PARAMS_MAX; p = nl + 1) {
		nl = strchr(p, '\n');
		if (nl != NULL)
			*nl = '\0';
		if (*p != '\0')
			envp[n++] = p;
		if (nl == NULL)
			break;
	}
	envp[n] = NULL;

	rlg_params_envp(&in, envp);
	rlg_request_read(r, &in, &cc);
	check_key(r->client, sizeof r->client);
	/* A forwarding header that cannot be believed leaves no address
	 * an exemption could match. */
	if ((r->flaw == RLG_FLAW_FORWARDED || r->flaw == RLG_FLAW_DUPLICATE) &&
	    r->addr_ok)
		abort();
	if (r->addr_ok &&
	    strcmp(rlg_addr_key(&r->addr, cc.ipv6_prefix, text), r->client) != 0)
		abort();
	/* Without an address and without a flaw: the shared unknown key
	 * (no address, or a trusted proxy hid the client). */
	if (!r->addr_ok && r->flaw == RLG_FLAW_NONE &&
	    strcmp(r->client, RLG_CLIENT_UNKNOWN) != 0)
		abort();
	if (r->flaw == RLG_FLAW_PATH && (r->path_ok || r->path[0] != '\0'))
		abort();
	if (r->path_ok && r->path[0] != '/')
		abort();
	twice = rlg_envp_header(envp, "HTTP_X_API_KEY", &v) > 1;

	memset(&pol, 0, sizeof pol);
	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		pol.key = kinds[i];
		pol.key_name = (pol.key & RLG_KEY_HEADER) ? "X-Api-Key" :
		    (pol.key & RLG_KEY_COOKIE) ? "sid" :
		    (pol.key & RLG_KEY_QUERY) ? "key" :
		    (pol.key & RLG_KEY_JWT) ? "sub" : NULL;
		rc = rlg_request_policy_key(r, &pol, &cc, key, sizeof key,
		    NULL);
		/* Only a key header sent twice is refused, and always; a
		 * cookie or a parameter may be named twice. */
		if (rc == RLG_EINVAL && ((twice && (pol.key & RLG_KEY_HEADER)) ||
		    (pol.key & (RLG_KEY_COOKIE | RLG_KEY_QUERY | RLG_KEY_JWT))))
			continue;
		if (rc != RLG_OK)
			abort();
		check_key(key, sizeof key);
		if ((pol.key & RLG_KEY_GLOBAL) &&
		    strcmp(key, RLG_KEY_GLOBAL_CLIENT) != 0)
			abort();
		/* a short buffer fails cleanly, leaving "" */
		if (rlg_request_policy_key(r, &pol, &cc, key, 8, NULL) == RLG_OK) {
			check_key(key, 8);
		} else if (key[0] != '\0') {
			abort();
		}
	}
	free(r);
	free(buf);
	return 0;
}
