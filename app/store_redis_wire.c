/*
 * store_redis_wire.c: the Redis store's commands and replies as they go on
 * the wire, apart from the connections that carry them
 * (store_redis_io.c): a command in RESP, a script call's head (EVALSHA
 * with the script's SHA1, or FCALL of the library's function, chosen per
 * server), and the words rlgate reads in replies and writes in messages.
 * Nothing here touches a socket.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "store.h"
#include "store_redis_parts.h"
#include "util.h"

/*
 * The head of a script call in s->argv: EVALSHA, sha (s->sha or
 * s->sync_sha), and the count of keys written at at. Returns where the
 * next argument's text may go; the call's arguments follow from argv[3].
 * rd_call_head makes it FCALL where the server has the library.
 */
char *
rd_script_head(struct rd_store *s, const char *sha, size_t nkeys, char *at)
{
	s->argv[0] = "EVALSHA";
	s->argvlen[0] = 7;
	s->argv[1] = sha;
	s->argvlen[1] = 40;
	s->argv[2] = at;
	s->argvlen[2] = (size_t)snprintf(at, RD_NUM, "%zu", nkeys);
	return at + s->argvlen[2] + 1;
}

/*
 * Appends the command argv[0..argc) to s->out in RESP (an array of bulk
 * strings), growing it if needed.
 */
void
rd_format(struct rd_store *s, int argc, const char *const *argv,
    const size_t *argvlen)
{
	size_t need = RD_NUM + 3, i;
	char *grown;
	int len;

	for (i = 0; i < (size_t)argc; i++)
		need += RD_NUM + 5 + argvlen[i];
	if (s->outlen + need > s->outcap) {
		s->outcap = s->outlen + need;
		grown = rlg_xmalloc(s->outcap);
		if (s->outlen > 0)
			memcpy(grown, s->out, s->outlen);
		free(s->out);
		s->out = grown;
	}
	len = snprintf(s->out + s->outlen, RD_NUM + 3, "*%d\r\n", argc);
	s->outlen += (size_t)len;
	for (i = 0; i < (size_t)argc; i++) {
		len = snprintf(s->out + s->outlen, RD_NUM + 3, "$%zu\r\n",
		    argvlen[i]);
		s->outlen += (size_t)len;
		memcpy(s->out + s->outlen, argv[i], argvlen[i]);
		s->outlen += argvlen[i];
		memcpy(s->out + s->outlen, "\r\n", 2);
		s->outlen += 2;
	}
}

/*
 * A script call in s->argv (argv[1] is s->sha or s->sync_sha, or a
 * function of the library) made the call node takes: FCALL of the
 * library's function where node has the library (rd_load_script), else
 * EVALSHA. Both take the same arguments after it. Any other command is
 * left as it is.
 */
void
rd_call_head(struct rd_store *s, const struct rd_node *node)
{
	bool step = s->argv[1] == s->sha ||
	    s->argv[1] == rlg_redis_function_step;
	bool sync = s->argv[1] == s->sync_sha ||
	    s->argv[1] == rlg_redis_function_sync;

	if (!step && !sync)
		return;
	s->argv[0] = rd_call_name(node);
	if (node->fcall)
		s->argv[1] = step ? rlg_redis_function_step :
		    rlg_redis_function_sync;
	else
		s->argv[1] = step ? s->sha : s->sync_sha;
	s->argvlen[0] = strlen(s->argv[0]);
	s->argvlen[1] = strlen(s->argv[1]);
}

/*
 * A server's text for a message: at most RD_SAID - 1 bytes of str, each
 * byte outside printable ASCII shown as '?'. Returns buf.
 */
const char *
rd_said(const char *str, size_t len, char *buf)
{
	size_t i;

	if (len > RD_SAID - 1)
		len = RD_SAID - 1;
	for (i = 0; i < len; i++) {
		buf[i] = str[i];
		if (str[i] < 0x20 || str[i] >= 0x7f)
			buf[i] = '?';
	}
	buf[len] = '\0';
	return buf;
}

/* An error reply whose first word is word ("MOVED", "NOSCRIPT"). */
bool
rd_error_is(const redisReply *reply, const char *word)
{
	size_t len = strlen(word);

	return reply->type == REDIS_REPLY_ERROR && reply->len >= len &&
	    strncmp(reply->str, word, len) == 0 &&
	    (reply->str[len] == ' ' || reply->str[len] == '\0');
}

const char *
rd_call_name(const struct rd_node *node)
{
	return node->fcall ? "FCALL" : "EVALSHA";
}

bool
rd_not_loaded(const redisReply *reply)
{
	static const char gone[] = "ERR Function not found";

	return rd_error_is(reply, "NOSCRIPT") ||
	    (reply->type == REDIS_REPLY_ERROR &&
	    reply->len >= sizeof gone - 1 &&
	    strncmp(reply->str, gone, sizeof gone - 1) == 0);
}

void
rd_seterr(struct rd_store *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->base.errmsg, sizeof s->base.errmsg, fmt, ap);
	va_end(ap);
}

/* A reply type's name, for the messages. */
const char *
rd_reply_type(int type)
{
	switch (type) {
	case REDIS_REPLY_STRING:
		return "a string";
	case REDIS_REPLY_ARRAY:
		return "an array";
	case REDIS_REPLY_INTEGER:
		return "an integer";
	case REDIS_REPLY_NIL:
		return "nil";
	case REDIS_REPLY_STATUS:
		return "a status";
	case REDIS_REPLY_ERROR:
		return "an error";
	default:
		return "an unknown type";
	}
}
