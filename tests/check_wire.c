/*
 * check_wire.c: the FastCGI records of one connection (app/server_wire.c),
 * over a socketpair, the web server's side written and read here record
 * by record: a request in one write and in pieces (a pair cut between two
 * FCGI_PARAMS records, 4-byte lengths); pairs that could pass for another
 * parameter left out; 5,000 parameters, their array sized to them; a
 * pair cut short, a bad version, a close mid-record and parameters past
 * RLG_WIRE_PARAMS_MAX dropped; FCGI_GET_VALUES and an
 * unknown management type answered; a second request on the connection
 * refused (FCGI_CANT_MPX_CONN), an unknown role too; the answer's records
 * (padding, an answer past one record, the end records); a kept
 * connection's two requests in one write, the second served from the
 * same buffers as the first; the input to its end, past a bound, and cut
 * by FCGI_ABORT_REQUEST.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fastcgi.h>

#include "check_rlgate.h"
#include "server_wire.h"

/* A record's bytes, appended to buf at *len. */
static void
rec(unsigned char *buf, size_t *len, int type, int id, const void *c,
    size_t clen, size_t plen)
{
	unsigned char *h = buf + *len;

	h[0] = FCGI_VERSION_1;
	h[1] = (unsigned char)type;
	h[2] = (unsigned char)(id >> 8);
	h[3] = (unsigned char)id;
	h[4] = (unsigned char)(clen >> 8);
	h[5] = (unsigned char)clen;
	h[6] = (unsigned char)plen;
	h[7] = 0;
	if (clen > 0)
		memcpy(h + 8, c, clen);
	memset(h + 8 + clen, 0, plen);
	*len += 8 + clen + plen;
}

static void
begin(unsigned char *buf, size_t *len, int id, int role, bool keep)
{
	unsigned char b[8] = { 0 };

	b[0] = (unsigned char)(role >> 8);
	b[1] = (unsigned char)role;
	b[2] = keep ? FCGI_KEEP_CONN : 0;
	rec(buf, len, FCGI_BEGIN_REQUEST, id, b, 8, 0);
}

/* A name-value pair's bytes; long: 4-byte lengths. */
static size_t
pair(unsigned char *p, const char *name, const char *value, bool lng)
{
	size_t n = strlen(name), v = strlen(value), off = 0;

	if (lng) {
		p[off++] = (unsigned char)(0x80 | n >> 24);
		p[off++] = (unsigned char)(n >> 16);
		p[off++] = (unsigned char)(n >> 8);
		p[off++] = (unsigned char)n;
		p[off++] = (unsigned char)(0x80 | v >> 24);
		p[off++] = (unsigned char)(v >> 16);
		p[off++] = (unsigned char)(v >> 8);
		p[off++] = (unsigned char)v;
	} else {
		p[off++] = (unsigned char)n;
		p[off++] = (unsigned char)v;
	}
	memcpy(p + off, name, n);
	memcpy(p + off + n, value, v);
	return off + n + v;
}

/* A request whole: BEGIN, two params, their end, an empty STDIN. */
static size_t
request(unsigned char *buf, size_t len, int id, bool keep)
{
	unsigned char p[256];
	size_t plen;

	begin(buf, &len, id, FCGI_RESPONDER, keep);
	plen = pair(p, "REQUEST_METHOD", "GET", false);
	plen += pair(p + plen, "REQUEST_URI", "/api/x", true);
	rec(buf, &len, FCGI_PARAMS, id, p, plen, 0);
	rec(buf, &len, FCGI_PARAMS, id, NULL, 0, 0);
	rec(buf, &len, FCGI_STDIN, id, NULL, 0, 0);
	return len;
}

static int sv[2];
static struct rlg_wire w;

static void
setup(void)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	rlg_wire_init(&w);
}

static void
teardown(void)
{
	rlg_wire_fini(&w);
	close(sv[0]);
	close(sv[1]);
}

static void
send_all(const void *buf, size_t len)
{
	ck_assert_int_eq(write(sv[1], buf, len), (ssize_t)len);
}

/* The web server's side reads one record: its type, id and content. */
static size_t
read_rec(int *type, int *id, unsigned char *c)
{
	unsigned char h[8];
	size_t clen, plen, got = 0;
	ssize_t n;

	ck_assert_int_eq(read(sv[1], h, 8), 8);
	ck_assert_int_eq(h[0], FCGI_VERSION_1);
	*type = h[1];
	*id = h[2] << 8 | h[3];
	clen = (size_t)h[4] << 8 | h[5];
	plen = h[6];
	while (got < clen + plen) {
		n = read(sv[1], c + got, clen + plen - got);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	return clen;
}

static const char *
env(const char *name)
{
	size_t n = strlen(name);
	char **e;

	for (e = w.envp; *e != NULL; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* The answer "hello" and its end records, as the web server reads them. */
static void
expect_answer(int id, const char *body)
{
	static unsigned char c[70000];
	int type, rid;
	size_t n;

	n = read_rec(&type, &rid, c);
	ck_assert_int_eq(type, FCGI_STDOUT);
	ck_assert_int_eq(rid, id);
	ck_assert_uint_eq(n, strlen(body));
	ck_assert(memcmp(c, body, n) == 0);
	ck_assert_uint_eq(read_rec(&type, &rid, c), 0);
	ck_assert_int_eq(type, FCGI_STDOUT);
	ck_assert_uint_eq(read_rec(&type, &rid, c), 8);
	ck_assert_int_eq(type, FCGI_END_REQUEST);
	ck_assert_int_eq(rid, id);
	ck_assert_int_eq(c[4], FCGI_REQUEST_COMPLETE);
}

START_TEST(test_wire_request)
{
	unsigned char buf[1024];
	size_t len = request(buf, 0, 7, false);

	send_all(buf, len);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	ck_assert_int_eq(w.id, 7);
	ck_assert_int_eq(w.role, FCGI_RESPONDER);
	ck_assert(!w.keep);
	/* the role first, as libfcgi puts it */
	ck_assert_str_eq(w.envp[0], "FCGI_ROLE=RESPONDER");
	ck_assert_str_eq(env("REQUEST_METHOD"), "GET");
	ck_assert_str_eq(env("REQUEST_URI"), "/api/x");
	ck_assert_ptr_null(w.envp[3]);
	/* the empty FCGI_STDIN came with it: read without waiting */
	ck_assert(w.input_end);
	ck_assert_int_eq(rlg_wire_read_input(&w, 4096), 1);
	ck_assert(!rlg_wire_pending(&w));
	ck_assert_int_eq(rlg_wire_put(&w, "hel", 3), 0);
	ck_assert_int_eq(rlg_wire_put(&w, "lo", 2), 0);
	ck_assert_int_eq(rlg_wire_send(&w), 0);
	expect_answer(7, "hello");
}
END_TEST

/* Byte by byte, and a pair cut between two FCGI_PARAMS records. */
START_TEST(test_wire_pieces)
{
	unsigned char buf[1024], p[256];
	size_t len = 0, plen, i;

	begin(buf, &len, 1, FCGI_AUTHORIZER, true);
	plen = pair(p, "HTTP_X_API_KEY", "k1", false);
	plen += pair(p + plen, "REMOTE_ADDR", "127.0.0.9", false);
	rec(buf, &len, FCGI_PARAMS, 1, p, 10, 3);
	rec(buf, &len, FCGI_PARAMS, 1, p + 10, plen - 10, 0);
	rec(buf, &len, FCGI_PARAMS, 1, NULL, 0, 0);
	for (i = 0; i < len; i++)
		send_all(buf + i, 1);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	ck_assert_str_eq(w.envp[0], "FCGI_ROLE=AUTHORIZER");
	ck_assert(w.keep);
	ck_assert_str_eq(env("HTTP_X_API_KEY"), "k1");
	ck_assert_str_eq(env("REMOTE_ADDR"), "127.0.0.9");
	ck_assert(!w.input_end);
}
END_TEST

/* Names that could pass for another parameter are left out. */
START_TEST(test_wire_names)
{
	unsigned char buf[1024], p[256];
	size_t len = 0, plen;

	begin(buf, &len, 1, FCGI_RESPONDER, false);
	plen = pair(p, "REMOTE_ADDR=1.2.3.4", "x", false);
	plen += pair(p + plen, "", "y", false);
	p[plen++] = 6;
	p[plen++] = 1;
	memcpy(p + plen, "A\0B_CDz", 7);
	plen += 7;
	plen += pair(p + plen, "REMOTE_ADDR", "127.0.0.1", false);
	plen += pair(p + plen, "EMPTY", "", false);
	rec(buf, &len, FCGI_PARAMS, 1, p, plen, 0);
	rec(buf, &len, FCGI_PARAMS, 1, NULL, 0, 0);
	send_all(buf, len);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	ck_assert_str_eq(env("REMOTE_ADDR"), "127.0.0.1");
	ck_assert_str_eq(env("EMPTY"), "");
	ck_assert_ptr_null(env("A"));
	ck_assert_ptr_null(w.envp[3]);
}
END_TEST

/* Many parameters: every one there, the array as large as they need. */
START_TEST(test_wire_many)
{
	static unsigned char buf[70000], p[65535];
	char name[16];
	size_t len = 0, plen = 0;
	int i;

	begin(buf, &len, 1, FCGI_RESPONDER, false);
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof name, "P%d", i);
		plen += pair(p + plen, name, "v", false);
	}
	rec(buf, &len, FCGI_PARAMS, 1, p, plen, 0);
	rec(buf, &len, FCGI_PARAMS, 1, NULL, 0, 0);
	send_all(buf, len);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	ck_assert_str_eq(env("P0"), "v");
	ck_assert_str_eq(env("P4999"), "v");
	ck_assert_ptr_null(w.envp[5001]);
	/* the role, 5,000 pairs and the end: not half the bytes */
	ck_assert_uint_eq(w.envp_cap, 5002);
}
END_TEST

/* What cannot be a request drops the connection. */
START_TEST(test_wire_bad)
{
	unsigned char buf[1024], p[64];
	size_t len = 0, plen;
	int kind = _i;

	begin(buf, &len, 1, FCGI_RESPONDER, false);
	switch (kind) {
	case 0:         /* a pair longer than its parameters */
		plen = pair(p, "REQUEST_METHOD", "GET", false);
		p[1] = 60;
		rec(buf, &len, FCGI_PARAMS, 1, p, plen, 0);
		rec(buf, &len, FCGI_PARAMS, 1, NULL, 0, 0);
		break;
	case 1:         /* version 2 */
		rec(buf, &len, FCGI_PARAMS, 1, NULL, 0, 0);
		buf[len - 8] = 2;
		break;
	case 2:         /* the close mid-record */
		rec(buf, &len, FCGI_PARAMS, 1, "abcdef", 6, 0);
		len -= 3;
		break;
	case 3:         /* FCGI_STDIN before the parameters' end */
		rec(buf, &len, FCGI_STDIN, 1, NULL, 0, 0);
		break;
	case 4:         /* FCGI_BEGIN_REQUEST again, the same id */
		begin(buf, &len, 1, FCGI_RESPONDER, false);
		break;
	case 5:         /* a 4-byte length past everything */
		p[0] = 0xff; p[1] = 0xff; p[2] = 0xff; p[3] = 0xff; p[4] = 1;
		memcpy(p + 5, "ab", 2);
		rec(buf, &len, FCGI_PARAMS, 1, p, 7, 0);
		rec(buf, &len, FCGI_PARAMS, 1, NULL, 0, 0);
		break;
	}
	send_all(buf, len);
	shutdown(sv[1], SHUT_WR);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), -1);
}
END_TEST

static void *
flood(void *arg)
{
	static unsigned char buf[8 + 0xffff];
	size_t len, i;

	(void)arg;
	memset(buf, 'a', sizeof buf);
	for (i = 0; i < RLG_WIRE_PARAMS_MAX / 0xffff + 2; i++) {
		len = 0;
		rec(buf, &len, FCGI_PARAMS, 1, buf + 8, 0xffff, 0);
		if (send(sv[1], buf, len, MSG_NOSIGNAL) != (ssize_t)len)
			break;
	}
	return NULL;
}

START_TEST(test_wire_too_many)
{
	unsigned char buf[64];
	size_t len = 0;
	pthread_t t;

	begin(buf, &len, 1, FCGI_RESPONDER, false);
	send_all(buf, len);
	ck_assert_int_eq(pthread_create(&t, NULL, flood, NULL), 0);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	/* the megabyte is not kept past the connection */
	ck_assert_uint_ge(w.params_cap, RLG_WIRE_PARAMS_MAX / 2);
	rlg_wire_release(&w);
	ck_assert_uint_le(w.params_cap, 256 * 1024);
	close(sv[0]);           /* the writer's end fails */
	sv[0] = -1;
	pthread_join(t, NULL);
}
END_TEST

/* Management records, and a second request, answered on the way. */
START_TEST(test_wire_management)
{
	unsigned char buf[1024], p[128], c[256];
	size_t len = 0, plen, n;
	int type, id;

	plen = pair(p, FCGI_MPXS_CONNS, "", false);
	plen += pair(p + plen, "OTHER", "", false);
	plen += pair(p + plen, FCGI_MAX_REQS, "", false);
	rec(buf, &len, FCGI_GET_VALUES, 0, p, plen, 0);
	rec(buf, &len, 42, 0, NULL, 0, 0);
	begin(buf, &len, 1, FCGI_RESPONDER, false);
	begin(buf, &len, 2, FCGI_RESPONDER, false);
	rec(buf, &len, FCGI_PARAMS, 1, NULL, 0, 0);
	send_all(buf, len);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	n = read_rec(&type, &id, c);
	ck_assert_int_eq(type, FCGI_GET_VALUES_RESULT);
	ck_assert_int_eq(id, 0);
	ck_assert_uint_eq(n, 2 + 15 + 1 + 2 + 13 + 1);
	ck_assert(memcmp(c, "\x0f\x01" FCGI_MPXS_CONNS "0", 18) == 0);
	ck_assert(memcmp(c + 18, "\x0d\x01" FCGI_MAX_REQS "1", 16) == 0);
	ck_assert_uint_eq(read_rec(&type, &id, c), 8);
	ck_assert_int_eq(type, FCGI_UNKNOWN_TYPE);
	ck_assert_int_eq(c[0], 42);
	ck_assert_uint_eq(read_rec(&type, &id, c), 8);
	ck_assert_int_eq(type, FCGI_END_REQUEST);
	ck_assert_int_eq(id, 2);
	ck_assert_int_eq(c[4], FCGI_CANT_MPX_CONN);
	ck_assert_int_eq(w.id, 1);
}
END_TEST

START_TEST(test_wire_role)
{
	unsigned char buf[64], c[16];
	size_t len = 0;
	int type, id;

	begin(buf, &len, 3, 9, false);
	send_all(buf, len);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), -1);
	ck_assert_uint_eq(read_rec(&type, &id, c), 8);
	ck_assert_int_eq(type, FCGI_END_REQUEST);
	ck_assert_int_eq(id, 3);
	ck_assert_int_eq(c[4], FCGI_UNKNOWN_ROLE);
}
END_TEST

/* An answer past one record: several, padded, the bytes whole. */
START_TEST(test_wire_large)
{
	static char body[200000], got[200000];
	static unsigned char c[70000];
	unsigned char buf[1024];
	size_t len = request(buf, 0, 5, false), n, have = 0, i;
	int type, id, status;
	pid_t pid;

	for (i = 0; i < sizeof body; i++)
		body[i] = (char)('a' + i % 26);
	send_all(buf, len);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	ck_assert_int_eq(rlg_wire_put(&w, body, 3), 0);
	ck_assert_int_eq(rlg_wire_put(&w, body + 3, sizeof body - 3), 0);
	/* the web server reads while the answer is written */
	if ((pid = fork()) == 0)
		_exit(rlg_wire_send(&w) == 0 ? 0 : 1);
	ck_assert_int_gt(pid, 0);
	for (;;) {
		n = read_rec(&type, &id, c);
		ck_assert_int_eq(id, 5);
		if (type == FCGI_END_REQUEST)
			break;
		ck_assert_int_eq(type, FCGI_STDOUT);
		ck_assert_uint_le(n, 0xffff);
		ck_assert_uint_le(have + n, sizeof got);
		memcpy(got + have, c, n);
		have += n;
	}
	ck_assert_uint_eq(have, sizeof body);
	ck_assert(memcmp(got, body, sizeof body) == 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* A kept connection's two requests in one write, then the rest. */
START_TEST(test_wire_kept)
{
	unsigned char buf[1024];
	void *bufs[4];
	size_t len;

	len = request(buf, 0, 1, true);
	len = request(buf, len, 1, true);
	rec(buf, &len, FCGI_STDIN, 1, "late", 4, 4);
	send_all(buf, len);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	ck_assert(w.keep);
	ck_assert(rlg_wire_pending(&w));
	ck_assert_int_eq(rlg_wire_put(&w, "one", 3), 0);
	ck_assert_int_eq(rlg_wire_send(&w), 0);
	expect_answer(1, "one");
	bufs[0] = w.in;
	bufs[1] = w.params;
	bufs[2] = w.envp;
	bufs[3] = w.out;
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	ck_assert_str_eq(env("REQUEST_URI"), "/api/x");
	/* no buffer of its own: the first one's */
	ck_assert_ptr_eq(bufs[0], w.in);
	ck_assert_ptr_eq(bufs[1], w.params);
	ck_assert_ptr_eq(bufs[2], w.envp);
	ck_assert_ptr_eq(bufs[3], w.out);
	ck_assert_int_eq(rlg_wire_put(&w, "two", 3), 0);
	ck_assert_int_eq(rlg_wire_send(&w), 0);
	expect_answer(1, "two");
	/* only a stale record is left: back to wait, no blocking read */
	ck_assert(rlg_wire_pending(&w));
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 0);
	/* a new connection on the same number starts clean */
	rlg_wire_release(&w);
	ck_assert(!rlg_wire_pending(&w));
}
END_TEST

/* The input: to its end, past a bound, cut by an abort. */
START_TEST(test_wire_input)
{
	unsigned char buf[1024], p[64];
	size_t len = 0, plen;
	int kind = _i;

	begin(buf, &len, 1, FCGI_RESPONDER, false);
	plen = pair(p, "CONTENT_LENGTH", "10", false);
	rec(buf, &len, FCGI_PARAMS, 1, p, plen, 0);
	rec(buf, &len, FCGI_PARAMS, 1, NULL, 0, 0);
	send_all(buf, len);
	ck_assert_int_eq(rlg_wire_read_request(&w, sv[0]), 1);
	len = 0;
	rec(buf, &len, FCGI_STDIN, 2, "other", 5, 0);   /* another id's */
	rec(buf, &len, FCGI_STDIN, 1, "01234", 5, 3);
	if (kind == 2)
		rec(buf, &len, FCGI_ABORT_REQUEST, 1, NULL, 0, 0);
	rec(buf, &len, FCGI_STDIN, 1, "56789", 5, 0);
	rec(buf, &len, FCGI_STDIN, 1, NULL, 0, 0);
	send_all(buf, len);
	if (kind == 0) {
		ck_assert_int_eq(rlg_wire_read_input(&w, 10), 1);
		ck_assert(w.input_end);
		ck_assert(!w.broken);
	} else if (kind == 1) {
		ck_assert_int_eq(rlg_wire_read_input(&w, 4), 0);
	} else {
		ck_assert_int_eq(rlg_wire_read_input(&w, 100), -1);
		ck_assert(w.broken);
	}
}
END_TEST

Suite *
rlg_wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 20);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_wire_request);
	tcase_add_test(tc, test_wire_pieces);
	tcase_add_test(tc, test_wire_names);
	tcase_add_test(tc, test_wire_many);
	tcase_add_loop_test(tc, test_wire_bad, 0, 6);
	tcase_add_test(tc, test_wire_too_many);
	tcase_add_test(tc, test_wire_management);
	tcase_add_test(tc, test_wire_role);
	tcase_add_test(tc, test_wire_large);
	tcase_add_test(tc, test_wire_kept);
	tcase_add_loop_test(tc, test_wire_input, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
