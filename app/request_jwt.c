/*
 * request_jwt.c: the claim a policy keys by (key = jwt:CLAIM) from the
 * request's bearer token, verified with libjwt against [client] jwt_key
 * (read at load: config_jwt.c) under the one algorithm of [client]
 * jwt_algorithm. The only file that speaks libjwt.
 *
 * What a token must be to key by its claim: "Authorization: Bearer T"
 * once; T at most RLG_JWT_TOKEN_MAX bytes; its signature verified with
 * the key; its header's alg the configured one (alg "none" never; an
 * HS256 token "signed" with an RS256 public key as its secret never);
 * its exp, if any, an integer in the future and its nbf, if any, an
 * integer not in it; the claim a string or an integer. Any other token
 * keys its request as the client's address (never as the claim it
 * carries), and says why (enum rlg_token), for the log and the metrics.
 *
 * A cache of verified tokens per thread (RLG_JWT_CACHE entries, by the
 * token's BLAKE2b hash and the key's load) spares a client that sends one
 * token many times the signature check: 5 us for HS256, 0.4-0.5 ms for
 * RS256 and ES256, as libjwt 1.10 reads the PEM key anew for each token
 * (docs/benchmarks.md); its exp and nbf are checked again on every hit.
 * A token that fails the check (forged, another algorithm, no claim) is
 * kept too, with why, so one replayed again and again costs a hash, not
 * a check; a client that varies its token pays the check each time
 * (operations.md says how to bound that).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jwt.h>
#include <sodium.h>

#include "request.h"
#include "util.h"

/* Entries of a thread's cache of verified tokens (direct-mapped). */
#define RLG_JWT_CACHE 128
/* The longest claim value a cache entry holds (longer: not cached). */
#define RLG_JWT_CACHED_VALUE 128

struct jwt_entry {
	uint64_t generation;       /* the key's load (0: empty) */
	unsigned char hash[16];    /* BLAKE2b-128 of the token */
	enum rlg_token checked;    /* RLG_TOKEN_OK: signed, with the claim;
	                              else why not (exp and nbf unread) */
	long exp, nbf;             /* LONG_MAX, LONG_MIN: none */
	char claim[64];            /* the claim's name */
	char value[RLG_JWT_CACHED_VALUE];
};

static __thread struct jwt_entry jwt_cache[RLG_JWT_CACHE];

static enum rlg_token jwt_verify(const struct rlg_client_config *cc,
    const char *token, const char *claim, char *out, size_t len,
    long *exp, long *nbf);
static enum rlg_token jwt_times(long exp, long nbf, int64_t now_s);
static bool jwt_int(jwt_t *j, const char *grant, long *v, bool *bad);

const char *
rlg_token_name(enum rlg_token t)
{
	switch (t) {
	case RLG_TOKEN_OK:
		return "ok";
	case RLG_TOKEN_NONE:
		return "none";
	case RLG_TOKEN_INVALID:
		return "invalid";
	case RLG_TOKEN_ALGORITHM:
		return "algorithm";
	case RLG_TOKEN_EXPIRED:
		return "expired";
	case RLG_TOKEN_EARLY:
		return "not_yet_valid";
	case RLG_TOKEN_NO_CLAIM:
		return "no_claim";
	}
	return "unknown";
}

enum rlg_token
rlg_jwt_claim(const struct rlg_client_config *cc, const char *token,
    const char *claim, int64_t now_s, bool cached, char *out, size_t len)
{
	unsigned char hash[16];
	struct jwt_entry *e = NULL;
	enum rlg_token t;
	long exp = LONG_MAX, nbf = LONG_MIN;
	size_t n = strlen(token), vlen;

	if (cc->jwt_key == NULL || n == 0 || n > RLG_JWT_TOKEN_MAX ||
	    len == 0)
		return RLG_TOKEN_INVALID;
	if (cached && strlen(claim) < sizeof e->claim) {
		crypto_generichash(hash, sizeof hash,
		    (const unsigned char *)token, n, NULL, 0);
		e = &jwt_cache[(hash[0] | (unsigned)hash[1] << 8) %
		    RLG_JWT_CACHE];
		if (e->generation == cc->jwt_generation &&
		    memcmp(e->hash, hash, sizeof hash) == 0 &&
		    strcmp(e->claim, claim) == 0) {
			if (e->checked != RLG_TOKEN_OK)
				return e->checked;
			if ((t = jwt_times(e->exp, e->nbf, now_s)) !=
			    RLG_TOKEN_OK)
				return t;
			rlg_copy(out, e->value, len);
			return RLG_TOKEN_OK;
		}
	}
	t = jwt_verify(cc, token, claim, out, len, &exp, &nbf);
	vlen = strlen(out);
	if (e != NULL && (t != RLG_TOKEN_OK || vlen < sizeof e->value)) {
		e->generation = cc->jwt_generation;
		memcpy(e->hash, hash, sizeof hash);
		e->checked = t;
		e->exp = exp;
		e->nbf = nbf;
		rlg_copy(e->claim, claim, sizeof e->claim);
		if (t == RLG_TOKEN_OK)
			memcpy(e->value, out, vlen + 1);
		else
			e->value[0] = '\0';
	}
	if (t == RLG_TOKEN_OK && (t = jwt_times(exp, nbf, now_s)) !=
	    RLG_TOKEN_OK)
		out[0] = '\0';
	return t;
}

/* A token's exp and nbf against now: RLG_TOKEN_OK, or why not. */
static enum rlg_token
jwt_times(long exp, long nbf, int64_t now_s)
{
	if (now_s >= exp)
		return RLG_TOKEN_EXPIRED;
	if (now_s < nbf)
		return RLG_TOKEN_EARLY;
	return RLG_TOKEN_OK;
}

/*
 * The signature, the algorithm and the claim of token (its value into
 * out, cut to len), its exp and nbf (LONG_MAX, LONG_MIN when it has
 * none): RLG_TOKEN_OK, or why not.
 */
static enum rlg_token
jwt_verify(const struct rlg_client_config *cc, const char *token,
    const char *claim, char *out, size_t len, long *exp, long *nbf)
{
	static const jwt_alg_t want[] = { JWT_ALG_HS256, JWT_ALG_RS256,
	    JWT_ALG_ES256 };
	enum rlg_token t = RLG_TOKEN_OK;
	const char *s;
	jwt_t *j = NULL;
	bool bad = false;
	long v;

	out[0] = '\0';
	if (cc->jwt_key_len > INT_MAX ||
	    jwt_decode(&j, token, cc->jwt_key, (int)cc->jwt_key_len) != 0 ||
	    j == NULL) {
		t = RLG_TOKEN_INVALID;
		goto done;
	}
	/* The header's alg chose how libjwt verified: only ours counts. */
	if (cc->jwt_algorithm < 0 ||
	    (size_t)cc->jwt_algorithm >= sizeof want / sizeof want[0] ||
	    jwt_get_alg(j) != want[cc->jwt_algorithm]) {
		t = RLG_TOKEN_ALGORITHM;
		goto done;
	}
	if (!jwt_int(j, "exp", exp, &bad))
		*exp = LONG_MAX;
	if (!jwt_int(j, "nbf", nbf, &bad))
		*nbf = LONG_MIN;
	if (bad) {
		t = RLG_TOKEN_INVALID;
		goto done;
	}
	if ((s = jwt_get_grant(j, claim)) != NULL)
		rlg_copy(out, s, len);
	else if (jwt_int(j, claim, &v, &bad))
		snprintf(out, len, "%ld", v);
	if (out[0] == '\0')
		t = RLG_TOKEN_NO_CLAIM;
done:
	if (j != NULL)
		jwt_free(j);
	return t;
}

/* The integer grant of j into *v: true; false when there is none; *bad
 * set when there is one that is no integer. */
static bool
jwt_int(jwt_t *j, const char *grant, long *v, bool *bad)
{
	errno = 0;
	*v = jwt_get_grant_int(j, grant);
	if (errno == 0)
		return true;
	if (errno != ENOENT)
		*bad = true;
	return false;
}
