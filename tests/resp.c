/*
 * resp.c: the helper of resp.h.
 */
#include <stdlib.h>
#include <string.h>

#include "resp.h"

size_t
rlg_test_resp_parse(const char *buf, size_t len, const char **argv,
    size_t *argvlen, int max, int *argc)
{
	const char *at = buf, *end = buf + len, *nl;
	long n, i, blen;

	*argc = 0;
	if (len == 0 || (nl = memchr(at, '\n', len)) == NULL)
		return 0;
	if (*at != '*')
		return (size_t)(nl + 1 - buf);
	n = strtol(at + 1, NULL, 10);
	if (n < 0 || n > max)
		n = 0;
	at = nl + 1;
	for (i = 0; i < n; i++) {
		if (at >= end || *at != '$' ||
		    (nl = memchr(at, '\n', (size_t)(end - at))) == NULL)
			return 0;
		blen = strtol(at + 1, NULL, 10);
		at = nl + 1;
		if (blen < 0 || end - at < blen + 2)
			return 0;
		argv[i] = at;
		argvlen[i] = (size_t)blen;
		at += blen + 2;
	}
	*argc = (int)n;
	return (size_t)(at - buf);
}
