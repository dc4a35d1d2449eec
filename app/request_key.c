/*
 * request_key.c: what a request costs (a route's fixed cost, or a
 * trusted front's cost header) and the store key a policy derives from
 * it (request.h declares them with the request).
 *
 * An API key header never reaches the store: policy keys carry a keyed
 * BLAKE2b hash of it (libsodium), so the database, its logs and the
 * operator views hold no credential. A key or cost header that came
 * twice under look-alike spellings is refused, never resolved by order.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "request.h"
#include "util.h"

/* Bytes of the header hash in a policy key ("k:" + 2 hex digits each). */
#define RLG_KEY_HASH_BYTES 16
_Static_assert(RLG_KEY_HASH_TEXT == 3 + 2 * RLG_KEY_HASH_BYTES,
    "request.h's RLG_KEY_HASH_TEXT holds k: and the hash in hex");

static bool header_param(const char *header, char *out, size_t len);
static void sodium_start(void);
static void stretch_secret(const char *key_secret, unsigned char *key);
static size_t join3(char *out, size_t len, const char *a, const char *b,
    const char *c);

/*
 * The parameter CGI names header by (HTTP_ + its name, upper case, '-' as
 * '_') into out (len bytes). False if it does not fit.
 */
static bool
header_param(const char *header, char *out, size_t len)
{
	size_t i, n = strlen(header);

	if (n + 5 >= len)
		return false;
	memcpy(out, "HTTP_", 5);
	for (i = 0; i < n; i++) {
		int c = (unsigned char)header[i];

		out[5 + i] = (char)(c == '-' ? '_' : toupper(c));
	}
	out[5 + n] = '\0';
	return true;
}

int
rlg_request_cost(const struct rlg_request *r, const struct rlg_route *rt,
    int64_t *cost)
{
	char name[5 + RLG_HEADER_NAME_MAX + 1];
	const char *value, *c;
	int64_t v = 0;

	*cost = rt != NULL ? rt->cost : 1;
	if (rt == NULL || rt->cost_header == NULL)
		return RLG_OK;
	*cost = rt->cost_max;
	if (!r->trusted || !header_param(rt->cost_header, name, sizeof name))
		return RLG_OK;
	switch (rlg_param_header(&r->params, name, &value)) {
	case 0:
		return RLG_OK;
	case 1:
		break;
	default:
		return RLG_EINVAL;
	}
	/* Digits only, and no sum past cost_max (<= RLG_COST_MAX). */
	for (c = value; *c >= '0' && *c <= '9' && v <= rt->cost_max; c++)
		v = v * 10 + (*c - '0');
	if (c == value || *c != '\0' || v < 1 || v > rt->cost_max)
		return RLG_EINVAL;
	*cost = v;
	return RLG_OK;
}

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;

static void
sodium_start(void)
{
	if (sodium_init() < 0) {
		rlg_log("libsodium failed to initialise");
		abort();
	}
}

/*
 * The BLAKE2b key stretched from key_secret into key, kept per thread
 * with the secret it came from (compared each time: a config read again
 * may hold another secret at the same address), so that a request hashes
 * once, not twice. A secret too long to keep is stretched every time.
 */
#define SECRET_KEPT_MAX 256
static __thread char secret_of[SECRET_KEPT_MAX];
static __thread unsigned char secret_key[crypto_generichash_KEYBYTES];

static void
stretch_secret(const char *key_secret, unsigned char *key)
{
	size_t n = strlen(key_secret);

	if (n > 0 && n < sizeof secret_of && strcmp(secret_of, key_secret) == 0) {
		memcpy(key, secret_key, sizeof secret_key);
		return;
	}
	crypto_generichash(key, crypto_generichash_KEYBYTES,
	    (const unsigned char *)key_secret, n, NULL, 0);
	if (n > 0 && n < sizeof secret_of) {
		memcpy(secret_of, key_secret, n + 1);
		memcpy(secret_key, key, sizeof secret_key);
	}
}

/* out = a, b, c in turn; its length, or len (cut) if they do not fit. */
static size_t
join3(char *out, size_t len, const char *a, const char *b, const char *c)
{
	size_t used = rlg_copy(out, a, len);

	if (used < len)
		used += rlg_copy(out + used, b, len - used);
	if (used < len)
		used += rlg_copy(out + used, c, len - used);
	return used < len ? used : len;
}

void
rlg_request_key_hash(const char *value, const struct rlg_client_config *cc,
    char *out)
{
	unsigned char secret[crypto_generichash_KEYBYTES];
	unsigned char hash[RLG_KEY_HASH_BYTES];

	pthread_once(&sodium_once, sodium_start);
	/* The secret is stretched to a full BLAKE2b key; an unset one gives
	 * an unkeyed hash (still no raw value, but guessable offline). */
	if (cc != NULL && cc->key_secret != NULL) {
		stretch_secret(cc->key_secret, secret);
		crypto_generichash(hash, sizeof hash,
		    (const unsigned char *)value, strlen(value),
		    secret, sizeof secret);
		sodium_memzero(secret, sizeof secret);
	} else {
		crypto_generichash(hash, sizeof hash,
		    (const unsigned char *)value, strlen(value), NULL, 0);
	}
	out[0] = 'k';
	out[1] = ':';
	sodium_bin2hex(out + 2, 2 * RLG_KEY_HASH_BYTES + 1, hash, sizeof hash);
}

int
rlg_request_policy_key(const struct rlg_request *r,
    const struct rlg_policy *p, const struct rlg_client_config *cc,
    char *out, size_t len)
{
	char name[256], hex[RLG_KEY_HASH_TEXT];
	const char *value = NULL;
	size_t n;

	if (len == 0)
		return RLG_ENOSPC;
	out[0] = '\0';
	if ((p->key & RLG_KEY_HEADER) && p->key_header != NULL &&
	    header_param(p->key_header, name, sizeof name)) {
		/* X-API-Key beside X_API_Key: the client would choose. */
		if (rlg_param_header(&r->params, name, &value) > 1)
			return RLG_EINVAL;
		if (value != NULL && value[0] == '\0')
			value = NULL;
	}
	if (value == NULL) {
		n = rlg_copy(out, r->client, len);
		goto done;
	}

	rlg_request_key_hash(value, cc, hex);
	if (p->key & RLG_KEY_IP)
		n = join3(out, len, r->client, "|", hex);
	else
		n = rlg_copy(out, hex, len);
done:
	if (n >= len) {
		out[0] = '\0';
		return RLG_ENOSPC;
	}
	return RLG_OK;
}
