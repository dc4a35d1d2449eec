/*
 * supervisor.h: rlgate --processes N, a process that keeps N FastCGI
 * worker processes running on the listening socket it was given (fd 0:
 * from spawn-fcgi -n, or systemd's socket activation).
 *
 * It forks the workers, starts a new one in place of one that ends (the
 * exit or signal logged; a worker that lived less than
 * RLG_SUPERVISOR_STEADY_MS waits a backoff first, 100 ms doubling to
 * RLG_SUPERVISOR_BACKOFF_MAX_MS, so a worker that cannot start does not
 * spin), passes SIGHUP (reload) and SIGUSR1 (log reopen) on to them, and
 * on SIGTERM or SIGINT stops them gracefully (each finishes the requests
 * it is answering: server.c) and exits 0 once they are gone, killing
 * what remains after RLG_SUPERVISOR_STOP_MS. A worker whose supervisor
 * dies gets SIGTERM (PR_SET_PDEATHSIG). Nothing here knows FastCGI:
 * each worker runs work(ctx) and exits with what it returns.
 */
#ifndef RLG_SUPERVISOR_H
#define RLG_SUPERVISOR_H

#define RLG_SUPERVISOR_PROCESSES_MAX 256
#define RLG_SUPERVISOR_STEADY_MS 10000
#define RLG_SUPERVISOR_BACKOFF_MAX_MS 10000
#define RLG_SUPERVISOR_STOP_MS 15000

/* Runs until stopped; returns the supervisor's exit code. */
int rlg_supervise(int nprocs, int (*work)(void *ctx), void *ctx);

#endif
