/*
 * fcgi_client.c: one FastCGI request, as a web server sends it, and how the
 * application ends the connection; for tests/integration/close.sh.
 *
 *   fcgi_client ADDR METHOD URI [--body N] [--late-stdin MS]
 *       [--authorizer [--no-stdin]] [NAME=VALUE...]
 *
 * ADDR is a unix socket's path (it holds a '/') or 127.0.0.1:PORT. Sends
 * FCGI_BEGIN_REQUEST (Responder, no keep-alive), FCGI_PARAMS
 * (REQUEST_METHOD, REQUEST_URI, SCRIPT_NAME, REMOTE_ADDR 127.0.0.1,
 * SERVER_PROTOCOL, then each NAME=VALUE; a REMOTE_ADDR=... among them
 * replaces 127.0.0.1), the empty FCGI_PARAMS, N bytes
 * of FCGI_STDIN (default 0) and the empty FCGI_STDIN, in one write, as
 * lighttpd does; with --late-stdin the FCGI_STDIN records MS ms after the
 * rest, as Apache's mod_proxy_fcgi writes them apart. --authorizer asks
 * for the Authorizer role; --no-stdin then sends no FCGI_STDIN, as
 * Apache's mod_authnz_fcgi. Reads the answer
 * to FCGI_END_REQUEST and then to the application's end of the stream.
 * Then it writes 8 more bytes: if the application has closed its socket,
 * a unix socket refuses them (EPIPE) and TCP answers them with a reset;
 * if it only shut down its sending side and still reads (libfcgi's wait
 * for the web server to close first), they are taken and nothing comes
 * back within 500 ms. Prints one line:
 *
 *   status=CODE end=closed|open
 *
 * Exit 0, or 1 with a message on stderr when the exchange fails.
 *
 *   fcgi_client ADDR --stall KIND N HOLD_MS
 *
 * opens N connections, all at once, that each stall (for
 * tests/integration/stall.sh): KIND none sends nothing; params sends
 * FCGI_BEGIN_REQUEST and FCGI_PARAMS (with STALL_MARKER=
 * stall-marker-3f9c, which no log may show) but not the empty
 * FCGI_PARAMS; stdin sends a whole Responder request without a body but
 * 3 bytes of FCGI_STDIN and not its end; kept sends a whole request with
 * FCGI_KEEP_CONN and stays idle after its answer; trickle sends a whole
 * request a byte every 100 ms (no read waits long, the request takes
 * ~20 s). Then it reads and
 * discards whatever comes until the application has closed (or shut
 * down its sending side of) each one, or HOLD_MS have passed (it closes
 * none before), and prints one line:
 *
 *   closed=K of N answered=A
 *
 * (A: the connections on which anything came back).
 *
 *   fcgi_client ADDR --records KIND
 *
 * sends, in one write, records a web server rarely or never sends, with a
 * GET of /api/v1/resources as request 1, reads what comes back until
 * request 1's answers are whole (or the end of the stream), and prints
 * one line of what came: values= the FCGI_GET_VALUES_RESULT pairs,
 * refused= each FCGI_END_REQUEST of another request or not complete
 * (ID:PROTOCOL_STATUS),
 * status= request 1's HTTP statuses, end=closed|open (whether the
 * application closed within 2 s). KIND: values (FCGI_GET_VALUES for
 * FCGI_MPXS_CONNS and FCGI_MAX_REQS, then the request), mpx (request 2
 * begun inside request 1), kept (two whole requests with FCGI_KEEP_CONN),
 * role (a role that does not exist), version (version 2 records), huge
 * (2 MiB of FCGI_PARAMS).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { BEGIN_REQUEST = 1, END_REQUEST = 3, PARAMS = 4, STDIN = 5,
	STDOUT = 6, GET_VALUES = 9, GET_VALUES_RESULT = 10 };

static void
die(const char *what)
{
	fprintf(stderr, "fcgi_client: %s: %s\n", what,
	    errno != 0 ? strerror(errno) : "protocol error");
	exit(1);
}

static void
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write");
		p += n;
		len -= (size_t)n;
	}
}

/*
 * The request's records are gathered and written at once, as web servers
 * write them (lighttpd, Apache): a record that came apart from the rest,
 * after the answer, would still be unread when the application closes.
 */
static unsigned char *sendbuf;
static size_t sendlen, sendcap;

static void
record_id(int type, int id, const void *content, size_t len)
{
	unsigned char h[8] = { 1, (unsigned char)type, (unsigned char)(id >> 8),
		(unsigned char)id, (unsigned char)(len >> 8),
		(unsigned char)len, 0, 0 };

	if (sendlen + sizeof h + len > sendcap) {
		sendcap = (sendlen + sizeof h + len) * 2;
		sendbuf = realloc(sendbuf, sendcap);
		if (sendbuf == NULL)
			die("out of memory");
	}
	memcpy(sendbuf + sendlen, h, sizeof h);
	if (len > 0)
		memcpy(sendbuf + sendlen + sizeof h, content, len);
	sendlen += sizeof h + len;
}

static void
record(int type, const void *content, size_t len)
{
	record_id(type, 1, content, len);
}

/* Appends NAME=VALUE as a FastCGI name-value pair; returns the new length. */
static size_t
pair(unsigned char *buf, size_t at, size_t cap, const char *nv)
{
	const char *eq = strchr(nv, '=');
	size_t nl, vl, i;
	size_t lens[2];

	if (eq == NULL)
		die("a parameter without '='");
	nl = (size_t)(eq - nv);
	vl = strlen(eq + 1);
	if (at + nl + vl + 8 > cap)
		die("parameters too long");
	lens[0] = nl;
	lens[1] = vl;
	for (i = 0; i < 2; i++) {
		if (lens[i] < 128) {
			buf[at++] = (unsigned char)lens[i];
		} else {
			buf[at++] = (unsigned char)(0x80 | (lens[i] >> 24));
			buf[at++] = (unsigned char)(lens[i] >> 16);
			buf[at++] = (unsigned char)(lens[i] >> 8);
			buf[at++] = (unsigned char)lens[i];
		}
	}
	memcpy(buf + at, nv, nl);
	memcpy(buf + at + nl, eq + 1, vl);
	return at + nl + vl;
}

/* Reads len bytes, or returns -1 at the end of the stream (errno 0) or
 * an error. */
static int
read_some(int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = 0;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A GET of /api/v1/resources from 127.0.0.1, as pairs in params. */
static size_t
api_get(unsigned char *params, size_t cap)
{
	size_t plen = 0;

	plen = pair(params, plen, cap, "REQUEST_METHOD=GET");
	plen = pair(params, plen, cap, "REQUEST_URI=/api/v1/resources");
	plen = pair(params, plen, cap, "SCRIPT_NAME=/api/v1/resources");
	plen = pair(params, plen, cap, "REMOTE_ADDR=127.0.0.1");
	return pair(params, plen, cap, "SERVER_PROTOCOL=HTTP/1.1");
}

static void
read_full(int fd, void *buf, size_t len)
{
	if (read_some(fd, buf, len) != 0)
		die("read");
}

static int
connect_to(const char *addr)
{
	int fd;

	if (strchr(addr, '/') != NULL) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		if (strlen(addr) >= sizeof sa.sun_path)
			die("socket path too long");
		strcpy(sa.sun_path, addr);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
			die(addr);
	} else {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		const char *colon = strrchr(addr, ':');

		if (colon == NULL || inet_pton(AF_INET, "127.0.0.1",
		    &sa.sin_addr) != 1 || strncmp(addr, "127.0.0.1:", 10) != 0)
			die("ADDR must be a path or 127.0.0.1:PORT");
		sa.sin_port = htons((unsigned short)atoi(colon + 1));
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
			die(addr);
	}
	return fd;
}

static long long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --stall: see the top. */
static int
stall(const char *addr, const char *kind, int n, int hold_ms)
{
	static unsigned char params[4096];
	static struct pollfd pfd[1024];
	unsigned char begin[8] = { 0, 1, 0, 0, 0, 0, 0, 0 };
	unsigned char buf[4096];
	size_t plen = 0;
	long long end;
	static char got[1024];
	static size_t sent[1024];
	long long now;
	int i, open_n, closed = 0, answered = 0, trickle, wait;

	if (n < 1 || n > 1024 || hold_ms < 0)
		die("--stall: N from 1 to 1024, HOLD_MS >= 0");
	plen = api_get(params, sizeof params);
	plen = pair(params, plen, sizeof params,
	    "STALL_MARKER=stall-marker-3f9c");
	if (strcmp(kind, "kept") == 0)
		begin[2] = 1;           /* FCGI_KEEP_CONN */
	if (strcmp(kind, "params") == 0) {
		record(BEGIN_REQUEST, begin, sizeof begin);
		record(PARAMS, params, plen);
	} else if (strcmp(kind, "stdin") == 0 || strcmp(kind, "kept") == 0 ||
	    strcmp(kind, "trickle") == 0) {
		record(BEGIN_REQUEST, begin, sizeof begin);
		record(PARAMS, params, plen);
		record(PARAMS, NULL, 0);
		if (kind[0] == 's')
			record(STDIN, "abc", 3);
		else
			record(STDIN, NULL, 0);
	} else if (strcmp(kind, "none") != 0) {
		die("--stall: KIND is none, params, stdin, kept or trickle");
	}
	trickle = kind[0] == 't';
	for (i = 0; i < n; i++) {
		pfd[i].fd = connect_to(addr);
		pfd[i].events = POLLIN;
		if (sendlen > 0 && !trickle)
			write_all(pfd[i].fd, sendbuf, sendlen);
	}
	end = mono_ms() + hold_ms;
	for (open_n = n; open_n > 0 && (now = mono_ms()) < end; ) {
		wait = (int)(end - now);
		if (trickle && wait > 100)
			wait = 100;
		for (i = 0; trickle && i < n; i++) {
			if (pfd[i].fd < 0 || sent[i] >= sendlen)
				continue;
			/* a byte every 100 ms: a whole request in ~20 s */
			if (write(pfd[i].fd, sendbuf + sent[i], 1) == 1)
				sent[i]++;
		}
		if (poll(pfd, (nfds_t)n, wait) <= 0)
			continue;
		for (i = 0; i < n; i++) {
			ssize_t r;

			if (pfd[i].fd < 0 || pfd[i].revents == 0)
				continue;
			r = read(pfd[i].fd, buf, sizeof buf);
			if (r > 0 && !got[i]) {
				got[i] = 1;
				answered++;
			}
			if (r > 0 || (r < 0 && errno == EINTR))
				continue;
			/* kept open, as a web server that never closes:
			 * poll skips a negative fd */
			pfd[i].fd = -pfd[i].fd - 1;
			open_n--;
			closed++;
		}
	}
	for (i = 0; i < n; i++)
		close(pfd[i].fd < 0 ? -pfd[i].fd - 1 : pfd[i].fd);
	printf("closed=%d of %d answered=%d\n", closed, n, answered);
	return 0;
}

/* A whole request 1 (begin: its FCGI_BEGIN_REQUEST body). */
static void
whole(const unsigned char *begin, const unsigned char *params, size_t plen)
{
	record(BEGIN_REQUEST, begin, 8);
	record(PARAMS, params, plen);
	record(PARAMS, NULL, 0);
	record(STDIN, NULL, 0);
}

static int
records(const char *addr, const char *kind)
{
	static unsigned char params[4096], chunk[65535 + 255];
	unsigned char begin[8] = { 0, 1, 0, 0, 0, 0, 0, 0 }, q[64], h[8];
	char values[256] = "", refused[256] = "", statuses[64] = "";
	size_t plen = 0, ql = 0, clen, i;
	int fd = connect_to(addr), want = 1, ends = 0, closed = 0, id;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	const char *sp = "";
	ssize_t r;

	plen = api_get(params, sizeof params);
	if (strcmp(kind, "values") == 0) {
		ql = pair(q, ql, sizeof q, "FCGI_MPXS_CONNS=");
		ql = pair(q, ql, sizeof q, "FCGI_MAX_REQS=");
		record_id(GET_VALUES, 0, q, ql);
		whole(begin, params, plen);
	} else if (strcmp(kind, "mpx") == 0) {
		record(BEGIN_REQUEST, begin, 8);
		record_id(BEGIN_REQUEST, 2, begin, 8);
		record(PARAMS, params, plen);
		record(PARAMS, NULL, 0);
		record(STDIN, NULL, 0);
	} else if (strcmp(kind, "kept") == 0) {
		begin[2] = 1;           /* FCGI_KEEP_CONN */
		whole(begin, params, plen);
		whole(begin, params, plen);
		want = 2;
	} else if (strcmp(kind, "role") == 0) {
		begin[1] = 9;
		whole(begin, params, plen);
	} else if (strcmp(kind, "version") == 0) {
		whole(begin, params, plen);
		sendbuf[0] = 2;
	} else if (strcmp(kind, "huge") == 0) {
		record(BEGIN_REQUEST, begin, 8);
		memset(chunk, 'a', 65535);
		for (i = 0; i < 33; i++)        /* 33 x 64 KB: past 2 MiB */
			record(PARAMS, chunk, 65535);
		record(PARAMS, NULL, 0);
	} else {
		die("--records: KIND is values, mpx, kept, role, version or"
		    " huge");
	}
	/* the application may close before it has read all (huge): a
	 * failed write is what this looks at, not an error */
	for (i = 0; i < sendlen; i += (size_t)r)
		if ((r = write(fd, sendbuf + i, sendlen - i)) <= 0)
			break;
	while (ends < want && read_some(fd, h, sizeof h) == 0) {
		clen = (size_t)h[4] << 8 | h[5];
		if (read_some(fd, chunk, clen + h[6]) != 0)
			break;
		id = h[2] << 8 | h[3];
		if (h[1] == GET_VALUES_RESULT) {
			for (i = 0; i + 2 <= clen && chunk[i] < 128 &&
			    chunk[i + 1] < 128 &&
			    i + 2 + chunk[i] + chunk[i + 1] <= clen;
			    i += 2 + (size_t)chunk[i] + chunk[i + 1])
				snprintf(values + strlen(values),
				    sizeof values - strlen(values), "%s%.*s:%.*s",
				    values[0] != '\0' ? "," : "", chunk[i],
				    (char *)chunk + i + 2, chunk[i + 1],
				    (char *)chunk + i + 2 + chunk[i]);
		} else if (h[1] == END_REQUEST) {
			if (clen == 8 && (id != 1 || chunk[4] != 0))
				snprintf(refused + strlen(refused),
				    sizeof refused - strlen(refused), "%s%d:%d",
				    refused[0] != '\0' ? "," : "", id, chunk[4]);
			if (id == 1)
				ends++;
		} else if (h[1] == STDOUT && clen > 8 &&
		    memcmp(chunk, "Status: ", 8) == 0) {
			snprintf(statuses + strlen(statuses), sizeof statuses -
			    strlen(statuses), "%s%d", statuses[0] != '\0' ?
			    "," : "", atoi((char *)chunk + 8));
		}
	}
	/* the end of the stream within 2 s, or none */
	for (;;) {
		if (poll(&pfd, 1, 2000) <= 0)
			break;
		r = read(fd, chunk, sizeof chunk);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			closed = 1;
			break;
		}
	}
	if (values[0] != '\0') {
		printf("values=%s", values);
		sp = " ";
	}
	if (refused[0] != '\0') {
		printf("%srefused=%s", sp, refused);
		sp = " ";
	}
	printf("%sstatus=%s end=%s\n", sp, statuses[0] != '\0' ? statuses :
	    "none", closed ? "closed" : "open");
	close(fd);
	return 0;
}

int
main(int argc, char **argv)
{
	static unsigned char params[65535], chunk[65535];
	unsigned char begin[8] = { 0, 1, 0, 0, 0, 0, 0, 0 };   /* Responder */
	int late_ms = -1, no_stdin = 0;
	unsigned char h[8];
	char nv[4096], out[4096] = "";
	size_t plen = 0, outlen = 0, body = 0, n;
	int fd, i, status = 0, closed;
	ssize_t r;
	struct pollfd pfd;

	if (argc < 4) {
		fprintf(stderr, "usage: fcgi_client ADDR METHOD URI "
		    "[--body N] [NAME=VALUE...]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(argv[2], "--stall") == 0) {
		if (argc != 6)
			die("usage: fcgi_client ADDR --stall KIND N HOLD_MS");
		return stall(argv[1], argv[3], atoi(argv[4]), atoi(argv[5]));
	}
	if (strcmp(argv[2], "--records") == 0)
		return records(argv[1], argv[3]);
	fd = connect_to(argv[1]);
	snprintf(nv, sizeof nv, "REQUEST_METHOD=%s", argv[2]);
	plen = pair(params, plen, sizeof params, nv);
	snprintf(nv, sizeof nv, "REQUEST_URI=%s", argv[3]);
	plen = pair(params, plen, sizeof params, nv);
	snprintf(nv, sizeof nv, "SCRIPT_NAME=%s", argv[3]);
	plen = pair(params, plen, sizeof params, nv);
	/* A REMOTE_ADDR among the arguments replaces 127.0.0.1. */
	for (i = 4; i < argc && strncmp(argv[i], "REMOTE_ADDR=", 12) != 0; i++)
		;
	if (i == argc)
		plen = pair(params, plen, sizeof params,
		    "REMOTE_ADDR=127.0.0.1");
	plen = pair(params, plen, sizeof params, "SERVER_PROTOCOL=HTTP/1.1");
	for (i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--body") == 0 && i + 1 < argc)
			body = (size_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--late-stdin") == 0 && i + 1 < argc)
			late_ms = atoi(argv[++i]);
		else if (strcmp(argv[i], "--authorizer") == 0)
			begin[1] = 2;
		else if (strcmp(argv[i], "--no-stdin") == 0)
			no_stdin = 1;
		else
			plen = pair(params, plen, sizeof params, argv[i]);
	}

	record(BEGIN_REQUEST, begin, sizeof begin);
	record(PARAMS, params, plen);
	record(PARAMS, NULL, 0);
	if (late_ms >= 0) {
		write_all(fd, sendbuf, sendlen);
		sendlen = 0;
		poll(NULL, 0, late_ms);
	}
	memset(chunk, 'x', sizeof chunk);
	while (body > 0) {
		n = body < sizeof chunk ? body : sizeof chunk;
		record(STDIN, chunk, n);
		body -= n;
	}
	if (!no_stdin)
		record(STDIN, NULL, 0);
	if (sendlen > 0)
		write_all(fd, sendbuf, sendlen);

	for (;;) {
		size_t clen, pad;

		read_full(fd, h, sizeof h);
		clen = (size_t)h[4] << 8 | h[5];
		pad = h[6];
		read_full(fd, chunk, clen + pad);
		if (h[1] == STDOUT && outlen + clen < sizeof out) {
			memcpy(out + outlen, chunk, clen);
			outlen += clen;
			out[outlen] = '\0';
		}
		if (h[1] == END_REQUEST)
			break;
	}
	if (strncmp(out, "Status: ", 8) == 0)
		status = atoi(out + 8);

	/* The application's end of the stream: up to 5 s. */
	pfd.fd = fd;
	pfd.events = POLLIN;
	for (;;) {
		if (poll(&pfd, 1, 5000) <= 0)
			die("no end of stream from the application within 5 s");
		r = read(fd, chunk, sizeof chunk);
		if (r == 0)
			break;
		if (r < 0 && errno != EINTR)
			die("read to the end of stream");
	}

	/* Closed, or still reading what we send? */
	r = write(fd, "trailing", 8);
	if (r < 0) {
		closed = 1;     /* unix socket: EPIPE (TCP: a reset seen) */
	} else {
		r = poll(&pfd, 1, 500);
		closed = r > 0 && read(fd, chunk, sizeof chunk) < 0;
	}
	printf("status=%d end=%s\n", status, closed ? "closed" : "open");
	close(fd);
	return 0;
}
