/*
 * ini.h: an INI reader with exact line numbers and no global state (ini.c
 * says why rlgate has its own). It knows the syntax only; what sections
 * and keys mean is the config's business (config_load.c).
 */
#ifndef RLG_INI_H
#define RLG_INI_H

#include <stddef.h>
#include <stdio.h>

/* What a line that is not blank nor a comment is. */
enum rlg_ini_kind {
	RLG_INI_SECTION = 0,   /* "[name]": name, trimmed, maybe empty */
	RLG_INI_KEY,           /* "key = value": name and value, trimmed */
	RLG_INI_BAD_SECTION,   /* starts with '[' but is no header: error */
	RLG_INI_BAD_LINE,      /* none of these, too long, or a NUL: error */
};

/* One line, handed to the callback; its strings live until it returns. */
struct rlg_ini_line {
	int lineno;            /* from 1 */
	enum rlg_ini_kind kind;
	const char *name;      /* SECTION, KEY; else NULL */
	const char *value;     /* KEY: without an inline comment, maybe "" */
	const char *error;     /* BAD_*: what is wrong, ready to print */
};

typedef void rlg_ini_fn(void *ctx, const struct rlg_ini_line *line);

/*
 * Reads fp, or the string text when fp is NULL, and calls fn(ctx, line)
 * for every line that is not blank nor a comment, in order. A line holds
 * at most max bytes, its end ("\n" or "\r\n") not counted; a longer one,
 * or one with a NUL byte, is a BAD_LINE. Returns 0, or the errno of a
 * failed read of fp (the lines before it were handed to fn).
 */
int rlg_ini_read(FILE *fp, const char *text, size_t max, rlg_ini_fn *fn,
    void *ctx);

#endif
