/*
 * sf_parse.c: the RFC 8941 List parser of sf_parse.h, step by step as
 * section 4.2 of the RFC writes it, for the subset the tests need. Every
 * function consumes from one cursor and returns -1 on the first byte that
 * does not fit, so malformed input never yields a partial result.
 */
#include <string.h>

#include "sf_parse.h"

struct cursor {
	const char *p;
	size_t len, pos;
};

static int at_end(const struct cursor *c);
static int peek(const struct cursor *c);
static void skip_sp(struct cursor *c);
static void skip_ows(struct cursor *c);
static int is_lcalpha(int ch);
static int is_alpha(int ch);
static int is_digit(int ch);
static int is_tchar(int ch);
static int parse_item(struct cursor *c, struct sf_item *item);
static int parse_bare(struct cursor *c, struct sf_bare *v);
static int parse_params(struct cursor *c, struct sf_item *item);
static int parse_key(struct cursor *c, char *key);
static int parse_integer(struct cursor *c, struct sf_bare *v);
static int parse_string(struct cursor *c, struct sf_bare *v);
static int parse_token(struct cursor *c, struct sf_bare *v);
static int parse_boolean(struct cursor *c, struct sf_bare *v);

static int
at_end(const struct cursor *c)
{
	return c->pos >= c->len;
}

/* The next byte as 0..255, or -1 at the end. */
static int
peek(const struct cursor *c)
{
	return at_end(c) ? -1 : (unsigned char)c->p[c->pos];
}

static void
skip_sp(struct cursor *c)
{
	while (peek(c) == ' ')
		c->pos++;
}

/* OWS: SP and HTAB, allowed only around the commas of a List. */
static void
skip_ows(struct cursor *c)
{
	while (peek(c) == ' ' || peek(c) == '\t')
		c->pos++;
}

static int
is_lcalpha(int ch)
{
	return ch >= 'a' && ch <= 'z';
}

static int
is_alpha(int ch)
{
	return is_lcalpha(ch) || (ch >= 'A' && ch <= 'Z');
}

static int
is_digit(int ch)
{
	return ch >= '0' && ch <= '9';
}

/* RFC 9110 tchar. */
static int
is_tchar(int ch)
{
	return ch > 0 && (is_alpha(ch) || is_digit(ch) ||
	    strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

int
sf_parse_list(const char *in, size_t len, struct sf_item *items,
    size_t max, size_t *n)
{
	struct cursor c = { in, len, 0 };

	*n = 0;
	skip_sp(&c);
	while (!at_end(&c)) {
		if (*n == max)
			return -1;
		if (parse_item(&c, &items[*n]) != 0)
			return -1;
		(*n)++;
		skip_ows(&c);
		if (at_end(&c))
			break;
		if (c.p[c.pos++] != ',')
			return -1;
		skip_ows(&c);
		if (at_end(&c))
			return -1;           /* a trailing comma */
	}
	/* Trailing SP went with the OWS after the last member. */
	return 0;
}

const struct sf_bare *
sf_param(const struct sf_item *item, const char *key)
{
	size_t i;

	for (i = 0; i < item->nparams; i++)
		if (strcmp(item->params[i].key, key) == 0)
			return &item->params[i].value;
	return NULL;
}

static int
parse_item(struct cursor *c, struct sf_item *item)
{
	memset(item, 0, sizeof *item);
	if (peek(c) == '(')
		return -1;                   /* Inner List: outside the subset */
	if (parse_bare(c, &item->value) != 0)
		return -1;
	return parse_params(c, item);
}

static int
parse_bare(struct cursor *c, struct sf_bare *v)
{
	int ch = peek(c);

	memset(v, 0, sizeof *v);
	if (ch == '-' || is_digit(ch))
		return parse_integer(c, v);
	if (ch == '"')
		return parse_string(c, v);
	if (is_alpha(ch) || ch == '*')
		return parse_token(c, v);
	if (ch == '?')
		return parse_boolean(c, v);
	return -1;                           /* ':' (Byte Sequence) included */
}

static int
parse_params(struct cursor *c, struct sf_item *item)
{
	char key[SF_KEY_MAX + 1];
	struct sf_bare value;
	size_t i;

	while (peek(c) == ';') {
		c->pos++;
		skip_sp(c);
		if (parse_key(c, key) != 0)
			return -1;
		memset(&value, 0, sizeof value);
		value.type = SF_BOOLEAN;
		value.boolean = true;
		if (peek(c) == '=') {
			c->pos++;
			if (parse_bare(c, &value) != 0)
				return -1;
		}
		for (i = 0; i < item->nparams; i++)
			if (strcmp(item->params[i].key, key) == 0)
				break;
		if (i == item->nparams) {
			if (item->nparams == SF_PARAMS_MAX)
				return -1;
			memcpy(item->params[i].key, key, sizeof key);
			item->nparams++;
		}
		item->params[i].value = value;
	}
	return 0;
}

static int
parse_key(struct cursor *c, char *key)
{
	size_t n = 0;
	int ch = peek(c);

	if (!is_lcalpha(ch) && ch != '*')
		return -1;
	for (;;) {
		ch = peek(c);
		if (!is_lcalpha(ch) && !is_digit(ch) && ch != '_' &&
		    ch != '-' && ch != '.' && ch != '*')
			break;
		if (n == SF_KEY_MAX)
			return -1;
		key[n++] = (char)ch;
		c->pos++;
	}
	key[n] = '\0';
	return 0;
}

static int
parse_integer(struct cursor *c, struct sf_bare *v)
{
	int64_t sign = 1, value = 0;
	int digits = 0;

	if (peek(c) == '-') {
		sign = -1;
		c->pos++;
	}
	if (!is_digit(peek(c)))
		return -1;
	while (is_digit(peek(c))) {
		if (++digits > 15)
			return -1;
		value = value * 10 + (c->p[c->pos++] - '0');
	}
	if (peek(c) == '.')
		return -1;                   /* Decimal: outside the subset */
	v->type = SF_INTEGER;
	v->integer = sign * value;
	return 0;
}

static int
parse_string(struct cursor *c, struct sf_bare *v)
{
	size_t n = 0;
	int ch;

	c->pos++;                            /* the opening DQUOTE */
	for (;;) {
		if (at_end(c))
			return -1;
		ch = (unsigned char)c->p[c->pos++];
		if (ch == '\\') {
			if (at_end(c))
				return -1;
			ch = (unsigned char)c->p[c->pos++];
			if (ch != '"' && ch != '\\')
				return -1;
		} else if (ch == '"') {
			break;
		} else if (ch < 0x20 || ch > 0x7e) {
			return -1;
		}
		if (n == SF_STRING_MAX)
			return -1;
		v->string[n++] = (char)ch;
	}
	v->string[n] = '\0';
	v->type = SF_STRING;
	return 0;
}

static int
parse_token(struct cursor *c, struct sf_bare *v)
{
	size_t n = 0;
	int ch;

	for (;;) {
		ch = peek(c);
		if (!is_tchar(ch) && ch != ':' && ch != '/')
			break;
		if (n == SF_STRING_MAX)
			return -1;
		v->string[n++] = (char)ch;
		c->pos++;
	}
	v->string[n] = '\0';
	v->type = SF_TOKEN;
	return 0;
}

static int
parse_boolean(struct cursor *c, struct sf_bare *v)
{
	c->pos++;                            /* the '?' */
	if (peek(c) == '1')
		v->boolean = true;
	else if (peek(c) == '0')
		v->boolean = false;
	else
		return -1;
	c->pos++;
	v->type = SF_BOOLEAN;
	return 0;
}
