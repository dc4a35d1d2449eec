/*
 * sf_parse.h: a small RFC 8941 (Structured Field Values) List parser for
 * the tests, so they can read RateLimit-Policy and RateLimit back and
 * compare what they mean, not only their bytes.
 *
 * It follows the parsing algorithm of RFC 8941 section 4.2 for a subset:
 * a List whose members are Items; a bare item is an Integer, a String, a
 * Token or a Boolean. Inner Lists, Decimals and Byte Sequences are valid
 * RFC 8941 but outside the subset: they are rejected like malformed input
 * (rlgate never sends them). Fixed bounds keep it allocation-free; input
 * beyond them is rejected too.
 */
#ifndef RLG_SF_PARSE_H
#define RLG_SF_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SF_STRING_MAX  256   /* bytes of a String or Token, after unescaping */
#define SF_KEY_MAX     64    /* bytes of a parameter key */
#define SF_PARAMS_MAX  8     /* parameters per item */

enum sf_type {
	SF_INTEGER = 1,
	SF_STRING,
	SF_TOKEN,
	SF_BOOLEAN,
};

struct sf_bare {
	enum sf_type type;
	int64_t integer;                 /* SF_INTEGER */
	bool boolean;                    /* SF_BOOLEAN */
	char string[SF_STRING_MAX + 1];  /* SF_STRING (unescaped), SF_TOKEN */
};

struct sf_param {
	char key[SF_KEY_MAX + 1];
	struct sf_bare value;            /* a key without "=" is Boolean true */
};

struct sf_item {
	struct sf_bare value;
	struct sf_param params[SF_PARAMS_MAX];   /* in first-seen order */
	size_t nparams;
};

/*
 * Parses the field value in[0..len) as a List into items[0..max). On
 * success returns 0 and sets *n (an empty or all-space value is the empty
 * List, n = 0). Returns -1 for malformed input, input outside the subset,
 * or more than max members; *n is then unspecified. A parameter key seen
 * twice keeps its first position and its last value (RFC 8941 4.2.3.2).
 */
int sf_parse_list(const char *in, size_t len, struct sf_item *items,
    size_t max, size_t *n);

/* The parameter named key of item, or NULL. */
const struct sf_bare *sf_param(const struct sf_item *item, const char *key);

#endif
