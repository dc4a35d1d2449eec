/*
 * server_wire.c: the FastCGI records of one connection (server_wire.h).
 *
 * Written by hand, not libfcgi's request layer (FCGX_Accept_r,
 * FCGX_Finish_r), which rlgate used before: libfcgi allocates every
 * request anew (its input stream and 8 KB buffer, its output and error
 * streams with theirs, a parameter table and each parameter apart: some
 * 40 malloc and free a request), and writes its streams through
 * callbacks one buffer at a time. A worker here reuses the buffers of its
 * wire for every request, takes the parameters in place, and writes the
 * whole answer with its end records in one write(2). The records are
 * those of the FastCGI specification 1.0 (fastcgi.h, libfcgi's header,
 * gives their layout and numbers); what libfcgi did at each odd record is
 * kept, and said where it is done below. Nothing read is trusted: a
 * record's lengths are checked against what was read, a parameter's
 * against its record's, and the parameters' total against
 * RLG_WIRE_PARAMS_MAX.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fastcgi.h>

#include "server_wire.h"
#include "util.h"

/* A record whole: its header, the most content and padding. */
#define RLG_WIRE_IN ((size_t)FCGI_HEADER_LEN + 0xffff + 0xff)
/* The buffers a wire starts with, and keeps past an answer. */
#define RLG_WIRE_START ((size_t)16 * 1024)
#define RLG_WIRE_KEEP ((size_t)256 * 1024)
/* The most content of one record. */
#define RLG_WIRE_RECORD 0xffff

/* A record's header, read. */
struct record {
	int type;
	uint16_t id;
	size_t clen, plen;
	const unsigned char *content;
};

static int next_record(struct rlg_wire *w, struct record *r, bool wait);
static int management(struct rlg_wire *w, const struct record *r);
static int end_request(int fd, uint16_t id, int status);
static int params_take(struct rlg_wire *w, const struct record *r);
static int params_end(struct rlg_wire *w);
static int input_record(struct rlg_wire *w, const struct record *r,
    size_t *taken);
static void header_put(unsigned char *h, int type, uint16_t id, size_t clen,
    size_t plen);
static int out_room(struct rlg_wire *w, size_t more);
static void out_close(struct rlg_wire *w);
static int out_end(struct rlg_wire *w);
static void shrink(struct rlg_wire *w);

void
rlg_wire_init(struct rlg_wire *w)
{
	memset(w, 0, sizeof *w);
	w->fd = -1;
	w->in = rlg_xmalloc(RLG_WIRE_IN);
	w->params = rlg_xmalloc(RLG_WIRE_START);
	w->params_cap = RLG_WIRE_START;
	w->envp_cap = 64;
	w->envp = rlg_xcalloc(w->envp_cap, sizeof *w->envp);
	w->out = rlg_xmalloc(RLG_WIRE_START);
	w->out_cap = RLG_WIRE_START;
}

void
rlg_wire_fini(struct rlg_wire *w)
{
	free(w->in);
	free(w->params);
	free(w->envp);
	free(w->out);
	memset(w, 0, sizeof *w);
	w->fd = -1;
}

void
rlg_wire_release(struct rlg_wire *w)
{
	w->fd = -1;
	w->in_off = w->in_len = 0;
	shrink(w);
}

bool
rlg_wire_pending(const struct rlg_wire *w)
{
	return w->in_off < w->in_len;
}

/*
 * The next record whole in w->in, its header in *r. Reads (blocking) for
 * what is missing when wait, else returns 0 when the buffer does not
 * hold it whole. Returns 1 with a record (the caller consumes it:
 * w->in_off past it), 0 (!wait), -1 on a close (errno 0), a read's
 * failure or a bad version (EPROTO).
 */
static int
next_record(struct rlg_wire *w, struct record *r, bool wait)
{
	const unsigned char *h;
	size_t have, need;
	ssize_t n;

	for (;;) {
		have = w->in_len - w->in_off;
		h = w->in + w->in_off;
		need = FCGI_HEADER_LEN;
		if (have >= FCGI_HEADER_LEN)
			need += ((size_t)h[4] << 8 | h[5]) + h[6];
		if (have >= need)
			break;
		if (!wait)
			return 0;
		if (w->in_off > 0) {            /* room at the end: all of it */
			memmove(w->in, h, have);
			w->in_off = 0;
			w->in_len = have;
		}
		n = read(w->fd, w->in + w->in_len, RLG_WIRE_IN - w->in_len);
		if (n <= 0) {
			if (n == 0)
				errno = 0;
			return -1;
		}
		w->in_len += (size_t)n;
	}
	if (h[0] != FCGI_VERSION_1) {
		errno = EPROTO;
		return -1;
	}
	r->type = h[1];
	r->id = (uint16_t)(h[2] << 8 | h[3]);
	r->clen = (size_t)h[4] << 8 | h[5];
	r->plen = h[6];
	r->content = h + FCGI_HEADER_LEN;
	w->in_off += need;
	return 1;
}

static void
header_put(unsigned char *h, int type, uint16_t id, size_t clen, size_t plen)
{
	h[0] = FCGI_VERSION_1;
	h[1] = (unsigned char)type;
	h[2] = (unsigned char)(id >> 8);
	h[3] = (unsigned char)id;
	h[4] = (unsigned char)(clen >> 8);
	h[5] = (unsigned char)clen;
	h[6] = (unsigned char)plen;
	h[7] = 0;
}

/* FCGI_END_REQUEST for request id with protocol status status, alone. */
static int
end_request(int fd, uint16_t id, int status)
{
	unsigned char rec[16] = { 0 };

	header_put(rec, FCGI_END_REQUEST, id, 8, 0);
	rec[12] = (unsigned char)status;
	return rlg_wire_write_all(fd, (const char *)rec, sizeof rec);
}

/*
 * A management record (request id 0): FCGI_GET_VALUES is answered with
 * the values asked for among libfcgi's (one connection, one request, no
 * multiplexing), any other type with FCGI_UNKNOWN_TYPE.
 */
static int
management(struct rlg_wire *w, const struct record *r)
{
	static const struct {
		const char *name, *value;
	} values[] = {
		{ FCGI_MAX_CONNS, "1" },
		{ FCGI_MAX_REQS, "1" },
		{ FCGI_MPXS_CONNS, "0" },
	};
	unsigned char rec[FCGI_HEADER_LEN + 64] = { 0 };
	size_t off = 0, len = FCGI_HEADER_LEN, nlen, vlen, i;
	const unsigned char *c = r->content;

	if (r->type != FCGI_GET_VALUES) {
		header_put(rec, FCGI_UNKNOWN_TYPE, 0, 8, 0);
		rec[FCGI_HEADER_LEN] = (unsigned char)r->type;
		return rlg_wire_write_all(w->fd, (const char *)rec, 16);
	}
	/* names of at most 127 bytes, empty values: a longer one is none
	 * of these */
	while (off + 2 <= r->clen && c[off] < 0x80 && c[off + 1] < 0x80) {
		nlen = c[off];
		vlen = c[off + 1];
		if (off + 2 + nlen + vlen > r->clen)
			break;
		for (i = 0; i < sizeof values / sizeof values[0]; i++) {
			if (strlen(values[i].name) != nlen || memcmp(c + off + 2,
			    values[i].name, nlen) != 0)
				continue;
			rec[len++] = (unsigned char)nlen;
			rec[len++] = 1;
			memcpy(rec + len, values[i].name, nlen);
			len += nlen;
			rec[len++] = (unsigned char)values[i].value[0];
			break;
		}
		off += 2 + nlen + vlen;
		if (len + 2 + 16 + 1 > sizeof rec)
			break;
	}
	header_put(rec, FCGI_GET_VALUES_RESULT, 0, len - FCGI_HEADER_LEN, 0);
	return rlg_wire_write_all(w->fd, (const char *)rec, len);
}

/* One FCGI_PARAMS record's content, after the others'. */
static int
params_take(struct rlg_wire *w, const struct record *r)
{
	size_t cap = w->params_cap;
	char *more;

	if (w->params_len + r->clen > RLG_WIRE_PARAMS_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	while (w->params_len + r->clen > cap)
		cap *= 2;
	if (cap != w->params_cap) {
		if ((more = realloc(w->params, cap)) == NULL)
			return -1;
		w->params = more;
		w->params_cap = cap;
	}
	memcpy(w->params + w->params_len, r->content, r->clen);
	w->params_len += r->clen;
	return 0;
}

/* A name-value pair's length (1 byte, or 4 with the high bit) at *off. */
static bool
pair_len(const unsigned char *p, size_t end, size_t *off, size_t *len)
{
	if (*off >= end)
		return false;
	if (p[*off] < 0x80) {
		*len = p[(*off)++];
		return true;
	}
	if (end - *off < 4)
		return false;
	*len = ((size_t)(p[*off] & 0x7f) << 24) | (size_t)p[*off + 1] << 16 |
	    (size_t)p[*off + 2] << 8 | p[*off + 3];
	*off += 4;
	return true;
}

/* How many pairs len bytes at p hold (a pair cut short ends the count:
 * params_end finds it). */
static size_t
pairs_count(const unsigned char *p, size_t len)
{
	size_t r = 0, nlen, vlen, n = 0;

	while (pair_len(p, len, &r, &nlen) && pair_len(p, len, &r, &vlen) &&
	    nlen <= len - r && vlen <= len - r - nlen) {
		r += nlen + vlen;
		n++;
	}
	return n;
}

/*
 * The end of the parameters: their pairs become "NAME=VALUE" strings in
 * place (each string is shorter than its pair by at least the pair's
 * two length bytes less the '=' and the NUL: the writing never passes
 * the reading), after the role first, as libfcgi puts it (FCGI_ROLE). A
 * pair whose name is empty or holds '=' or a NUL could pass for another
 * parameter: it is left out. A pair cut short is a protocol error.
 */
static int
params_end(struct rlg_wire *w)
{
	static char *const roles[] = {
		NULL, "FCGI_ROLE=RESPONDER", "FCGI_ROLE=AUTHORIZER",
		"FCGI_ROLE=FILTER",
	};
	unsigned char *p = (unsigned char *)w->params;
	size_t r = 0, wr = 0, nlen, vlen, n = 0, need;
	char **more;

	/* the most pairs there can be (two bytes each at least), or, past
	 * what the array holds, how many there are */
	need = w->params_len / 2 + 2;
	if (need > w->envp_cap)
		need = pairs_count(p, w->params_len) + 2;
	if (need > w->envp_cap) {
		if ((more = realloc(w->envp, need * sizeof *more)) == NULL)
			return -1;
		w->envp = more;
		w->envp_cap = need;
	}
	w->envp[n++] = roles[w->role];
	while (r < w->params_len) {
		if (!pair_len(p, w->params_len, &r, &nlen) ||
		    !pair_len(p, w->params_len, &r, &vlen) ||
		    nlen > w->params_len - r || vlen > w->params_len - r - nlen) {
			errno = EPROTO;
			return -1;
		}
		if (nlen == 0 || memchr(p + r, '=', nlen) != NULL ||
		    memchr(p + r, '\0', nlen) != NULL) {
			r += nlen + vlen;
			continue;
		}
		memmove(p + wr, p + r, nlen);
		p[wr + nlen] = '=';
		memmove(p + wr + nlen + 1, p + r + nlen, vlen);
		p[wr + nlen + 1 + vlen] = '\0';
		w->envp[n++] = (char *)p + wr;
		wr += nlen + vlen + 2;
		r += nlen + vlen;
	}
	w->envp[n] = NULL;
	return 0;
}

int
rlg_wire_read_request(struct rlg_wire *w, int fd)
{
	struct record r;
	bool begun = false, took;
	size_t taken = 0;

	if (fd != w->fd) {
		w->fd = fd;
		w->in_off = w->in_len = 0;
	}
	took = rlg_wire_pending(w);
	w->broken = w->drop = false;
	w->input_end = false;
	w->params_len = 0;
	w->out_len = FCGI_HEADER_LEN;   /* the first FCGI_STDOUT's header */
	w->out_rec = 0;
	for (;;) {
		/* a kept connection with only the last request's rest */
		if (!begun && took && !rlg_wire_pending(w))
			return 0;
		if (next_record(w, &r, true) < 0)
			return -1;
		took = true;
		if (r.id == FCGI_NULL_REQUEST_ID) {
			if (management(w, &r) != 0)
				return -1;
			continue;
		}
		if (r.type == FCGI_BEGIN_REQUEST) {
			if (begun) {
				if (r.id == w->id) {
					errno = EPROTO;
					return -1;
				}
				if (end_request(fd, r.id,
				    FCGI_CANT_MPX_CONN) != 0)
					return -1;
				continue;
			}
			if (r.clen != 8) {
				errno = EPROTO;
				return -1;
			}
			w->id = r.id;
			w->role = r.content[0] << 8 | r.content[1];
			w->keep = (r.content[2] & FCGI_KEEP_CONN) != 0;
			if (w->role < FCGI_RESPONDER || w->role > FCGI_FILTER) {
				if (end_request(fd, r.id,
				    FCGI_UNKNOWN_ROLE) != 0 || !w->keep)
					return -1;
				continue;
			}
			begun = true;
			continue;
		}
		/* before a request: the last one's rest (libfcgi skips it
		 * too); during one: another request's */
		if (!begun || r.id != w->id)
			continue;
		if (r.type != FCGI_PARAMS) {
			errno = EPROTO;
			return -1;
		}
		if (r.clen > 0) {
			if (params_take(w, &r) != 0)
				return -1;
			continue;
		}
		if (params_end(w) != 0)
			return -1;
		break;
	}
	/* the input records already read, without waiting for more */
	while (!w->input_end && next_record(w, &r, false) == 1)
		if (input_record(w, &r, &taken) < 0)
			return -1;
	return 1;
}

/*
 * One record while the request's input is read: *taken grows by its
 * FCGI_STDIN bytes (the input is not kept: rlgate decides on the
 * parameters). Returns 0, or -1 (the connection cannot go on): an
 * FCGI_ABORT_REQUEST, a record of the wrong type, a failed answer to a
 * management record.
 */
static int
input_record(struct rlg_wire *w, const struct record *r, size_t *taken)
{
	if (r->id == FCGI_NULL_REQUEST_ID)
		return management(w, r);
	if (r->id != w->id) {
		if (r->type == FCGI_BEGIN_REQUEST)
			return end_request(w->fd, r->id, FCGI_CANT_MPX_CONN);
		return 0;
	}
	if (r->type == FCGI_DATA)       /* a Filter's file: not read */
		return 0;
	if (r->type != FCGI_STDIN) {
		/* an FCGI_ABORT_REQUEST among them: as libfcgi, the end */
		w->broken = true;
		errno = EPROTO;
		return -1;
	}
	if (r->clen == 0)
		w->input_end = true;
	*taken += r->clen;
	return 0;
}

int
rlg_wire_read_input(struct rlg_wire *w, size_t max)
{
	struct record r;
	size_t taken = 0;

	while (!w->input_end) {
		if (taken > max)
			return 0;
		if (next_record(w, &r, true) < 0 ||
		    input_record(w, &r, &taken) < 0) {
			w->broken = true;
			return -1;
		}
	}
	return taken > max ? 0 : 1;
}

/* Room for more bytes in the answer. */
static int
out_room(struct rlg_wire *w, size_t more)
{
	size_t cap = w->out_cap;
	char *p;

	while (w->out_len + more > cap)
		cap *= 2;
	if (cap == w->out_cap)
		return 0;
	if ((p = realloc(w->out, cap)) == NULL)
		return -1;
	w->out = p;
	w->out_cap = cap;
	return 0;
}

/* Closes the open FCGI_STDOUT record, padded to 8 bytes as libfcgi's;
 * one left empty is taken back (an empty one is the stream's end). */
static void
out_close(struct rlg_wire *w)
{
	size_t clen = w->out_len - w->out_rec - FCGI_HEADER_LEN;
	size_t plen = (8 - clen % 8) % 8;

	if (clen == 0) {
		w->out_len = w->out_rec;
		return;
	}
	memset(w->out + w->out_len, 0, plen);   /* out_room left it */
	header_put((unsigned char *)w->out + w->out_rec, FCGI_STDOUT, w->id,
	    clen, plen);
	w->out_len += plen;
}

int
rlg_wire_put(void *ctx, const char *buf, size_t len)
{
	struct rlg_wire *w = ctx;
	size_t n;

	while (len > 0) {
		n = RLG_WIRE_RECORD - (w->out_len - w->out_rec -
		    FCGI_HEADER_LEN);
		if (n > len)
			n = len;
		/* this much, the padding, and the next record's header */
		if (out_room(w, n + 8 + FCGI_HEADER_LEN) != 0)
			return -1;
		memcpy(w->out + w->out_len, buf, n);
		w->out_len += n;
		buf += n;
		len -= n;
		if (w->out_len - w->out_rec - FCGI_HEADER_LEN ==
		    RLG_WIRE_RECORD) {
			out_close(w);
			w->out_rec = w->out_len;
			w->out_len += FCGI_HEADER_LEN;
		}
	}
	return 0;
}

/* The answer's end: an empty FCGI_STDOUT and FCGI_END_REQUEST (its
 * header and its 8 bytes: status 0, complete), END_LEN bytes. */
#define END_LEN ((size_t)FCGI_HEADER_LEN * 3)

static int
out_end(struct rlg_wire *w)
{
	unsigned char *p;

	if (out_room(w, 8 + END_LEN) != 0)
		return -1;
	out_close(w);
	p = (unsigned char *)w->out + w->out_len;
	header_put(p, FCGI_STDOUT, w->id, 0, 0);
	header_put(p + FCGI_HEADER_LEN, FCGI_END_REQUEST, w->id, 8, 0);
	memset(p + END_LEN - 8, 0, 8);
	w->out_len += END_LEN;
	return 0;
}

/* A buffer grown past RLG_WIRE_KEEP by one large answer (the status
 * page's, the metrics') or request is given back; a failure keeps it. */
static void
shrink(struct rlg_wire *w)
{
	char *p, **e;

	if (w->out_cap > RLG_WIRE_KEEP &&
	    (p = realloc(w->out, RLG_WIRE_START)) != NULL) {
		w->out = p;
		w->out_cap = RLG_WIRE_START;
	}
	if (w->params_cap > RLG_WIRE_KEEP &&
	    (p = realloc(w->params, RLG_WIRE_START)) != NULL) {
		w->params = p;
		w->params_cap = RLG_WIRE_START;
	}
	if (w->envp_cap > RLG_WIRE_KEEP / sizeof *w->envp &&
	    (e = realloc(w->envp, 64 * sizeof *e)) != NULL) {
		w->envp = e;
		w->envp_cap = 64;
	}
}

int
rlg_wire_send(struct rlg_wire *w)
{
	int rc = -1;

	if (out_end(w) == 0)
		rc = rlg_wire_write_all(w->fd, w->out, w->out_len);
	w->out_len = w->out_rec = 0;
	shrink(w);
	if (rc != 0)
		w->broken = true;
	return rc;
}

char *
rlg_wire_take(struct rlg_wire *w, size_t *len)
{
	char *p = NULL;

	if (out_end(w) == 0 && (p = malloc(w->out_len)) != NULL) {
		memcpy(p, w->out, w->out_len);
		*len = w->out_len;
	}
	w->out_len = w->out_rec = 0;
	shrink(w);
	return p;
}

int
rlg_wire_write_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}
