/*
 * request_key.c: what a request costs (a route's fixed cost, or a
 * trusted front's cost header) and the store key a policy derives from
 * it (request.h declares them with the request).
 *
 * A value the client chooses (an API key header, a cookie, a query
 * parameter) never reaches the store: policy keys carry a keyed BLAKE2b
 * hash of it (libsodium), so the database, its logs and the operator
 * views hold no credential. A key or cost header, a cookie or a parameter
 * that came twice under look-alike spellings is refused, never resolved
 * by order. Cookies and query strings are parsed here, by hand: what the
 * key needs is one name's value with every spelling of that name caught,
 * which no parser of a library of ours reports.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "request.h"
#include "util.h"

/* Bytes of the header hash in a policy key ("k:" + 2 hex digits each). */
#define RLG_KEY_HASH_BYTES 16
_Static_assert(RLG_KEY_HASH_TEXT == 3 + 2 * RLG_KEY_HASH_BYTES,
    "request.h's RLG_KEY_HASH_TEXT holds k: and the hash in hex");

static bool header_param(const char *header, char *out, size_t len);
static int chosen_value(const struct rlg_request *r,
    const struct rlg_policy *p, const struct rlg_client_config *cc,
    char *buf, size_t len, const char **value, enum rlg_token *token);
static enum rlg_token bearer_claim(const char *h,
    const struct rlg_policy *p, const struct rlg_client_config *cc,
    char *buf, size_t len, const char **value);
static int pair_value(const char *s, char sep, bool plus, const char *name,
    char *out, size_t len);
static size_t decode(const char *s, size_t n, bool plus, char *out,
    size_t len);
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

/* Bytes of a cookie's or a parameter's value kept, decoded, to hash: a
 * longer one is cut (its clients share a bucket: limited more, not less). */
#define RLG_KEY_VALUE_MAX 1024

int
rlg_request_policy_key(const struct rlg_request *r,
    const struct rlg_policy *p, const struct rlg_client_config *cc,
    char *out, size_t len, enum rlg_token *token)
{
	char buf[RLG_KEY_VALUE_MAX + 1], hex[RLG_KEY_HASH_TEXT];
	const char *value = NULL;
	enum rlg_token tok = RLG_TOKEN_NONE;
	size_t n;
	int rc;

	if (token != NULL)
		*token = RLG_TOKEN_NONE;
	if (len == 0)
		return RLG_ENOSPC;
	out[0] = '\0';
	if (p->key & RLG_KEY_GLOBAL) {
		n = rlg_copy(out, RLG_KEY_GLOBAL_CLIENT, len);
		goto done;
	}
	rc = chosen_value(r, p, cc, buf, sizeof buf, &value, &tok);
	if (token != NULL)
		*token = tok;
	if (rc != RLG_OK)
		return rc;
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

/*
 * The value the client sent for p's key into *value (NULL: none, or
 * empty: the address keys it), decoded into buf (len bytes) for a cookie
 * or a parameter, the claim of a verified token (*token: what became of
 * the token) for jwt. RLG_OK, or RLG_EINVAL when it came twice.
 */
static int
chosen_value(const struct rlg_request *r, const struct rlg_policy *p,
    const struct rlg_client_config *cc, char *buf, size_t len,
    const char **value, enum rlg_token *token)
{
	char name[256];
	const char *h = NULL;
	int found = 0;

	*value = NULL;
	switch (p->key & RLG_KEY_CHOSEN) {
	case RLG_KEY_HEADER:
		/* X-API-Key beside X_API_Key: the client would choose. */
		if (p->key_name == NULL ||
		    !header_param(p->key_name, name, sizeof name))
			return RLG_OK;
		if (rlg_param_header(&r->params, name, &h) > 1)
			return RLG_EINVAL;
		*value = h;
		break;
	case RLG_KEY_COOKIE:
		if (rlg_param_header(&r->params, "HTTP_COOKIE", &h) > 1)
			return RLG_EINVAL;
		if (h != NULL && (found = pair_value(h, ';', false,
		    p->key_name, buf, len)) < 0)
			return RLG_EINVAL;
		*value = found > 0 ? buf : NULL;
		break;
	case RLG_KEY_QUERY:
		if (r->query != NULL && (found = pair_value(r->query, '&',
		    true, p->key_name, buf, len)) < 0)
			return RLG_EINVAL;
		*value = found > 0 ? buf : NULL;
		break;
	case RLG_KEY_JWT:
		if (rlg_param_header(&r->params, "HTTP_AUTHORIZATION", &h) > 1)
			return RLG_EINVAL;
		if (h != NULL)
			*token = bearer_claim(h, p, cc, buf, len, value);
		break;
	default:
		break;
	}
	if (*value != NULL && (*value)[0] == '\0')
		*value = NULL;
	return RLG_OK;
}

/*
 * The claim that p keys by of the token in h, the request's Authorization
 * header ("Bearer TOKEN"), into buf (len bytes) and *value when the token
 * is verified (request_jwt.c); what became of the token. Another scheme
 * (Basic) is no token.
 */
static enum rlg_token
bearer_claim(const char *h, const struct rlg_policy *p,
    const struct rlg_client_config *cc, char *buf, size_t len,
    const char **value)
{
	const char *token;
	enum rlg_token t;

	if (strncasecmp(h, "Bearer", 6) != 0 ||
	    (h[6] != ' ' && h[6] != '\t'))
		return RLG_TOKEN_NONE;
	token = h + 6 + strspn(h + 6, " \t");
	if (cc == NULL || p->key_name == NULL)
		return RLG_TOKEN_INVALID;
	t = rlg_jwt_claim(cc, token, p->key_name, rlg_now_ms() / 1000, true,
	    buf, len);
	if (t == RLG_TOKEN_OK)
		*value = buf;
	return t;
}

/*
 * The value of the pair named name in s, whose pairs sep splits ("a=1;
 * b=2" of a Cookie header, "a=1&b=2" of a query string), decoded (%XX,
 * and '+' as a space when plus; a cookie's surrounding quotes dropped,
 * spaces and tabs around names and values too) into out (len bytes, cut
 * to fit). Names compare decoded and without case, as some backends read
 * them, so that a look-alike is caught: 1 found, 0 not there, -1 named
 * twice.
 */
static int
pair_value(const char *s, char sep, bool plus, const char *name, char *out,
    size_t len)
{
	char got[256];
	const char *end, *eq, *v;
	size_t nlen, vlen;
	int found = 0;

	for (; *s != '\0'; s = *end != '\0' ? end + 1 : end) {
		end = strchr(s, sep);
		if (end == NULL)
			end = s + strlen(s);
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		eq = memchr(s, '=', (size_t)(end - s));
		nlen = (size_t)((eq != NULL ? eq : end) - s);
		while (nlen > 0 && (s[nlen - 1] == ' ' || s[nlen - 1] == '\t'))
			nlen--;
		if (nlen >= sizeof got)
			continue;           /* longer than any name configured */
		decode(s, nlen, plus, got, sizeof got);
		if (strcasecmp(got, name) != 0)
			continue;
		if (found++ > 0)
			return -1;
		v = eq != NULL ? eq + 1 : end;
		vlen = (size_t)(end - v);
		while (vlen > 0 && (*v == ' ' || *v == '\t'))
			v++, vlen--;
		while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
			vlen--;
		if (!plus && vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"')
			v++, vlen -= 2;
		decode(v, vlen, plus, out, len);
	}
	return found;
}

/*
 * n bytes of s, %XX decoded (a '%' without two hex digits kept as it is)
 * and '+' as a space when plus, into out (len > 0 bytes, NUL-ended, cut
 * to fit). Returns the bytes written.
 */
static size_t
decode(const char *s, size_t n, bool plus, char *out, size_t len)
{
	size_t i, o = 0;
	int hi, lo;

	for (i = 0; i < n && o + 1 < len; i++) {
		if (s[i] == '%' && i + 2 < n &&
		    (hi = rlg_hexval(s[i + 1])) >= 0 &&
		    (lo = rlg_hexval(s[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (plus && s[i] == '+') {
			out[o++] = ' ';
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
	return o;
}
