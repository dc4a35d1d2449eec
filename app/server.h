/*
 * server.h: the transport. FastCGI (libfcgi's reentrant API, N worker
 * threads, each with its own gate and store connection) or one CGI
 * request; both hand each request to the gate (gate.h), which decides
 * and builds the answer.
 */
#ifndef RLG_SERVER_H
#define RLG_SERVER_H

#include "config.h"

/*
 * Serves FastCGI on the socket at fd 0 with nthreads threads until killed.
 * cfg (the caller's) was read from path (NULL: the built-in defaults).
 * SIGHUP reads path again: a configuration without problems whose
 * [store] is the running one's replaces it, each thread taking it up
 * before its next request; any other is logged (every problem as
 * file:line) and the running one stays. SIGUSR1 reopens the log
 * (rlg_log_reopen). Returns an exit code.
 */
int rlg_server_run_fastcgi(const struct rlg_config *cfg, const char *path,
    int nthreads);

/* Serves one CGI request from environ and stdout. Returns an exit code. */
int rlg_server_run_cgi(const struct rlg_config *cfg);

/* True when fd 0 is a socket that a FastCGI spawner listens on. */
int rlg_server_is_fastcgi(void);

#endif
