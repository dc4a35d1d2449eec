/*
 * redis_fixture.h: a private redis-server for the tests, on 127.0.0.1 at a
 * free port in a fresh temporary directory, started and stopped by pid.
 * Never the system's server on 6379: tests neither depend on it nor touch it.
 */
#ifndef RLG_REDIS_FIXTURE_H
#define RLG_REDIS_FIXTURE_H

#include <sys/types.h>

struct rlg_test_redis {
	pid_t pid;            /* the redis-server; 0 when not running */
	int port;             /* its TCP port on 127.0.0.1 */
	char dir[64];         /* its working directory (and log file) */
	char url[64];         /* "redis://127.0.0.1:PORT" for [store] url */
};

/*
 * Starts redis-server on 127.0.0.1 at a free port (10000-32767), no
 * persistence, in a fresh temp dir; waits (bounded) until it answers PING.
 * 0 or -1 (with a message on stderr).
 */
int rlg_test_redis_start(struct rlg_test_redis *r);

/* SIGTERM, bounded wait, SIGKILL; removes the dir. */
void rlg_test_redis_stop(struct rlg_test_redis *r);

#endif
