/*
 * ini.c: the INI reader of the config. Why not libinih: Debian builds it
 * with its options (comments, continuation lines, the line length) as
 * process-wide globals, which rlgate had to set before each parse, and
 * its handler is told neither the line number nor that a line was not
 * understood: rlgate wrapped it in its own line reader and a second parse
 * of every header, more code than the rules take. This reader keeps no
 * state but its arguments and hands every line over with its number.
 *
 * The rules are the ones rlgate had with libinih: lines end at "\n", a
 * "\r" before it is dropped; a UTF-8 BOM may open line 1; lines are
 * trimmed of white space (isspace); blank lines and lines that start with
 * ';' or '#' are comments; a line that starts with '[' is a header, its
 * name up to the first ']', then only a comment; any other line is "key =
 * value" (or "key: value"), the key up to the first '=' or ':', not
 * empty. A ';' after white space starts an inline comment, in a header as
 * in a value ("[a ;]" is no header). No continuation lines.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ini.h"
#include "util.h"

/* The source: a FILE, or a string when fp is NULL. */
struct rlg_ini_src {
	FILE *fp;
	const char *text;
	size_t pos;            /* next byte of text */
	int read_errno;        /* errno of a failed read, else 0 */
};

static int rlg_ini_getc(struct rlg_ini_src *src);
static void rlg_ini_parse_line(char *s, int lineno, char *msg, size_t size,
    rlg_ini_fn *fn, void *ctx);
static const char *rlg_ini_find(const char *s, const char *chars);
static char *rlg_ini_trim(char *s);

int
rlg_ini_read(FILE *fp, const char *text, size_t max, rlg_ini_fn *fn,
    void *ctx)
{
	struct rlg_ini_src src = { fp, text, 0, 0 };
	struct rlg_ini_line bad = { 0, RLG_INI_BAD_LINE, NULL, NULL, NULL };
	size_t n, size = max + 128;
	char *buf, *msg;
	bool nul, over;
	int c, lineno;

	/* One byte over max tells a long line; one more for the NUL. */
	buf = rlg_xmalloc(max + 2);
	msg = rlg_xmalloc(size);
	for (lineno = 1;; lineno++) {
		n = 0;
		nul = over = false;
		while ((c = rlg_ini_getc(&src)) != EOF && c != '\n') {
			if (n <= max)
				buf[n++] = (char)c;
			else
				over = true;
			nul = nul || c == '\0';
		}
		if (c == EOF && n == 0)
			break;
		if (n > 0 && buf[n - 1] == '\r')
			n--;
		buf[n] = '\0';
		bad.lineno = lineno;
		if (over || n > max) {
			snprintf(msg, size, "line too long (max %zu bytes)",
			    max);
			bad.error = msg;
			fn(ctx, &bad);
		} else if (nul) {
			bad.error = "line holds a NUL byte";
			fn(ctx, &bad);
		} else {
			rlg_ini_parse_line(buf, lineno, msg, size, fn, ctx);
		}
		if (c == EOF)
			break;
	}
	free(msg);
	free(buf);
	return src.read_errno;
}

/* The next byte of the source, or EOF (a read error is kept). */
static int
rlg_ini_getc(struct rlg_ini_src *src)
{
	int c;

	if (src->fp == NULL) {
		if (src->text[src->pos] == '\0')
			return EOF;
		return (unsigned char)src->text[src->pos++];
	}
	errno = 0;
	c = getc(src->fp);
	if (c == EOF && ferror(src->fp) && src->read_errno == 0)
		src->read_errno = errno != 0 ? errno : EIO;
	return c;
}

/* One whole line s (no end of line, no NUL inside), by the rules above;
 * msg (size bytes) holds a syntax error's text. */
static void
rlg_ini_parse_line(char *s, int lineno, char *msg, size_t size,
    rlg_ini_fn *fn, void *ctx)
{
	struct rlg_ini_line l = { lineno, RLG_INI_BAD_LINE, NULL, NULL, NULL };
	const char *end, *rest;
	char *name_end;

	if (lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
		s += 3;
	s = rlg_ini_trim(s);
	if (*s == '\0' || *s == ';' || *s == '#')
		return;
	snprintf(msg, size, "syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"%s\")", s);
	l.error = msg;
	if (*s == '[') {
		end = rlg_ini_find(s + 1, "]");
		for (rest = *end == ']' ? end + 1 : end;
		    isspace((unsigned char)*rest);)
			rest++;
		if (*end == ']' && (*rest == '\0' || *rest == ';' ||
		    *rest == '#')) {
			s[end - s] = '\0';
			l.kind = RLG_INI_SECTION;
			l.name = rlg_ini_trim(s + 1);
		} else {
			l.kind = RLG_INI_BAD_SECTION;
		}
		fn(ctx, &l);
		return;
	}
	end = rlg_ini_find(s, "=:");
	for (name_end = s + (end - s); name_end > s &&
	    isspace((unsigned char)name_end[-1]);)
		name_end--;
	if ((*end == '=' || *end == ':') && name_end > s) {
		*name_end = '\0';
		l.kind = RLG_INI_KEY;
		l.name = s;
		s += end - s + 1;
		s[rlg_ini_find(s, NULL) - s] = '\0';
		l.value = rlg_ini_trim(s);
	}
	fn(ctx, &l);
}

/*
 * The first of chars in s (none: NULL), or the start of an inline comment
 * (a ';' right after white space), or the end of s.
 */
static const char *
rlg_ini_find(const char *s, const char *chars)
{
	bool was_space = false;

	for (; *s != '\0'; s++) {
		if ((chars != NULL && strchr(chars, *s) != NULL) ||
		    (was_space && *s == ';'))
			break;
		was_space = isspace((unsigned char)*s) != 0;
	}
	return s;
}

/* s without white space at either end (cut in place). */
static char *
rlg_ini_trim(char *s)
{
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}
