/*
 * bench_jwt.c: what a jwt:CLAIM key costs a request's policy key (make
 * bench-jwt), in process: rlg_request_policy_key for one request, keyed
 * by the address (the baseline), by an API key header, and by the sub of
 * a bearer token under HS256, RS256 (2048 bits) and ES256 (P-256), each
 * with the cache of verified tokens (one client sending one token again
 * and again, the common case) and without it (every token new: the
 * signature checked each time, as for a client that never repeats),
 * and a forged token against the RS256 key, replayed (its failure
 * cached) and each time new.
 * Rounds of each case in turn (drift hits all alike); printed per case:
 * the median over the rounds of ns per key, its range, and its ratio to
 * the address's. No assertion: a benchmark prints figures.
 *
 *     bench_jwt [ROUNDS [MS_PER_CASE]]      (default 5 rounds of 300 ms)
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jwt.h>

#include "config.h"
#include "front_cgi.h"
#include "request.h"
#include "util.h"

#define ROUNDS_MAX 64

struct bcase {
	const char *name;
	unsigned key;              /* RLG_KEY_* */
	int alg;                   /* RLG_JWT_*, or -1 */
	bool cached;
	bool forged;               /* the ES256 token against the RS256 key */
};

static const struct bcase cases[] = {
	{ "ip (baseline)", RLG_KEY_IP, -1, false, false },
	{ "header:X-Api-Key", RLG_KEY_HEADER, -1, false, false },
	{ "jwt:sub HS256, cached", RLG_KEY_JWT, RLG_JWT_HS256, true, false },
	{ "jwt:sub HS256, verified each time", RLG_KEY_JWT, RLG_JWT_HS256,
	    false, false },
	{ "jwt:sub RS256, cached", RLG_KEY_JWT, RLG_JWT_RS256, true, false },
	{ "jwt:sub RS256, verified each time", RLG_KEY_JWT, RLG_JWT_RS256,
	    false, false },
	{ "jwt:sub ES256, cached", RLG_KEY_JWT, RLG_JWT_ES256, true, false },
	{ "jwt:sub ES256, verified each time", RLG_KEY_JWT, RLG_JWT_ES256,
	    false, false },
	{ "jwt:sub RS256, a forged token replayed", RLG_KEY_JWT,
	    RLG_JWT_RS256, true, true },
	{ "jwt:sub RS256, a forged token each time new", RLG_KEY_JWT,
	    RLG_JWT_RS256, false, true },
};
#define NCASES (sizeof cases / sizeof cases[0])

static const char secret[] = "bench-jwt-secret-0123456789abcdef!";

/* The stdout of cmd, or exit. */
static char *
out_of(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	char *buf = rlg_xmalloc(16384);
	size_t n = f != NULL ? fread(buf, 1, 16383, f) : 0;

	if (f == NULL || pclose(f) != 0 || n == 0) {
		fprintf(stderr, "bench_jwt: %s failed (openssl?)\n", cmd);
		exit(1);
	}
	buf[n] = '\0';
	return buf;
}

/* A token of alg signed with key (len), sub "alice", exp in a day. */
static char *
token(jwt_alg_t alg, const char *key, size_t len)
{
	jwt_t *j = NULL;
	char *t;

	if (jwt_new(&j) != 0 || jwt_set_alg(j, alg,
	    (const unsigned char *)key, (int)len) != 0 ||
	    jwt_add_grant(j, "sub", "alice") != 0 ||
	    jwt_add_grant_int(j, "exp", (long)time(NULL) + 86400) != 0 ||
	    (t = jwt_encode_str(j)) == NULL) {
		fprintf(stderr, "bench_jwt: libjwt could not sign\n");
		exit(1);
	}
	jwt_free(j);
	return t;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	int ms = argc > 2 ? atoi(argv[2]) : 300;
	char *rsa_priv, *rsa_pub, *ec_priv, *ec_pub, *tok[3], auth[3][4200];
	const char *keys[3];
	size_t lens[3];
	int64_t ns[NCASES][ROUNDS_MAX], base[ROUNDS_MAX];
	char out[RLG_CLIENT_KEY_MAX + 1];
	struct rlg_client_config cc;
	struct rlg_policy p;
	struct rlg_request r;
	struct rlg_params in;
	int round;
	size_t c, i;

	if (rounds < 1 || rounds > ROUNDS_MAX || ms < 10) {
		fprintf(stderr, "usage: bench_jwt [ROUNDS (1-%d) [MS >= 10]]\n",
		    ROUNDS_MAX);
		return 2;
	}
	rsa_priv = out_of("openssl genpkey -algorithm RSA -pkeyopt "
	    "rsa_keygen_bits:2048 2>/dev/null");
	ec_priv = out_of("openssl genpkey -algorithm EC -pkeyopt "
	    "ec_paramgen_curve:P-256 2>/dev/null");
	{
		char cmd[8192];

		snprintf(cmd, sizeof cmd, "printf '%%s' '%s' | openssl pkey "
		    "-pubout 2>/dev/null", rsa_priv);
		rsa_pub = out_of(cmd);
		snprintf(cmd, sizeof cmd, "printf '%%s' '%s' | openssl pkey "
		    "-pubout 2>/dev/null", ec_priv);
		ec_pub = out_of(cmd);
	}
	tok[0] = token(JWT_ALG_HS256, secret, strlen(secret));
	tok[1] = token(JWT_ALG_RS256, rsa_priv, strlen(rsa_priv));
	tok[2] = token(JWT_ALG_ES256, ec_priv, strlen(ec_priv));
	keys[0] = secret;
	keys[1] = rsa_pub;
	keys[2] = ec_pub;
	for (i = 0; i < 3; i++) {
		lens[i] = strlen(keys[i]);
		snprintf(auth[i], sizeof auth[i],
		    "HTTP_AUTHORIZATION=Bearer %s", tok[i]);
	}

	memset(&cc, 0, sizeof cc);
	cc.ipv6_prefix = 64;
	cc.key_secret = "bench-key-secret-0123456789";
	memset(&p, 0, sizeof p);
	for (round = 0; round < rounds; round++) {
		for (c = 0; c < NCASES; c++) {
			const struct bcase *b = &cases[c];
			char *envp[5] = { "REMOTE_ADDR=192.0.2.1",
			    "REQUEST_URI=/api", "HTTP_X_API_KEY=alice-key",
			    NULL, NULL };
			int64_t t0, t1, n = 0;
			enum rlg_token t;

			if (b->alg >= 0) {
				envp[3] = auth[b->forged ? RLG_JWT_ES256 :
				    b->alg];
				cc.jwt_key = (unsigned char *)keys[b->alg];
				cc.jwt_key_len = lens[b->alg];
				cc.jwt_algorithm = b->alg;
				cc.jwt_generation++;   /* another key: a load */
			}
			rlg_params_envp(&in, envp);
			rlg_request_read(&r, &in, &cc);
			p.key = b->key;
			p.key_name = b->key == RLG_KEY_HEADER ? "X-Api-Key" :
			    b->key == RLG_KEY_JWT ? "sub" : NULL;
			t0 = rlg_mono_ns();
			do {
				for (i = 0; i < 64; i++) {
					/* a new load each time: no cache */
					if (!b->cached)
						cc.jwt_generation++;
					if (rlg_request_policy_key(&r, &p, &cc,
					    out, sizeof out, &t) != RLG_OK ||
					    (b->alg >= 0 &&
					    (t == RLG_TOKEN_OK) == b->forged)) {
						fprintf(stderr, "bench_jwt: %s: "
						    "no key (%s)\n", b->name,
						    rlg_token_name(t));
						return 1;
					}
				}
				n += 64;
				t1 = rlg_mono_ns();
			} while (t1 - t0 < (int64_t)ms * 1000000);
			ns[c][round] = (t1 - t0) / n;
		}
	}
	printf("| key | ns per policy key (median of %d rounds) | range | "
	    "vs ip |\n|---|---:|---|---:|\n", rounds);
	for (i = 0; i < (size_t)rounds; i++)
		base[i] = ns[0][i];
	qsort(base, (size_t)rounds, sizeof base[0], cmp_i64);
	for (c = 0; c < NCASES; c++) {
		int64_t med;

		qsort(ns[c], (size_t)rounds, sizeof ns[c][0], cmp_i64);
		med = ns[c][rounds / 2];
		printf("| %s | %lld | %lld-%lld | %.1f |\n", cases[c].name,
		    (long long)med, (long long)ns[c][0],
		    (long long)ns[c][rounds - 1],
		    (double)med / (double)base[rounds / 2]);
	}
	free(rsa_priv);
	free(rsa_pub);
	free(ec_priv);
	free(ec_pub);
	for (i = 0; i < 3; i++)
		free(tok[i]);
	return 0;
}
