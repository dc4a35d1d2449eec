/*
 * server.h: the accept loops. FastCGI (libfcgi's reentrant API, N worker
 * threads, each with its own store connection) or one CGI request; both go
 * through rlg_server_handle, which routes a request, asks the store and
 * answers.
 */
#ifndef RLG_SERVER_H
#define RLG_SERVER_H

#include "config.h"
#include "request.h"
#include "response.h"
#include "store.h"

/* Per-thread state: a store connection and the error-log throttle. */
struct rlg_worker {
	const struct rlg_config *cfg;
	struct rlg_store *store;
	int64_t next_prune_ms;
	int64_t store_failing_since_ms;   /* 0 while the store works */
	int64_t next_error_log_ms;
	long suppressed_errors;
	int64_t next_full_log_ms;          /* max_clients reached: log pacing */
	long suppressed_full;
};

/* The resource endpoint. */
#define RLG_RESOURCE_PATH "/api/v1/resources"

/* How often a worker prunes expired states, after answering a request. */
#define RLG_PRUNE_INTERVAL_MS 10000
/* Store errors are logged once, then at most once per this interval. */
#define RLG_ERROR_LOG_INTERVAL_MS 10000

/* Sets up a worker for cfg (opening its store connection). */
void rlg_worker_init(struct rlg_worker *w, const struct rlg_config *cfg);
/* Closes the worker's store connection. */
void rlg_worker_fini(struct rlg_worker *w);

/*
 * Answers one request: parses envp, routes, steps the store at now_ms,
 * writes the answer through write/ctx. Never fails for bad input.
 * Returns 0, or the writer's negative result.
 */
int rlg_server_handle(struct rlg_worker *w, char *const *envp, int64_t now_ms,
    rlg_write_fn write, void *ctx);

/*
 * Housekeeping after a request has been answered: the store's upkeep
 * (rlg_store_idle: the SQLite WAL's checkpoint), and pruning of expired
 * states at most once per RLG_PRUNE_INTERVAL_MS.
 */
void rlg_worker_idle(struct rlg_worker *w, int64_t now_ms);

/*
 * Serves FastCGI on the socket at fd 0 with nthreads threads until killed.
 * Returns an exit code.
 */
int rlg_server_run_fastcgi(const struct rlg_config *cfg, int nthreads);

/* Serves one CGI request from environ and stdout. Returns an exit code. */
int rlg_server_run_cgi(const struct rlg_config *cfg);

/* True when fd 0 is a socket that a FastCGI spawner listens on. */
int rlg_server_is_fastcgi(void);

#endif
