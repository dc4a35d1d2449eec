/*
 * redis_fixture.h: a private redis-server for the tests, on 127.0.0.1 at a
 * free port in a fresh temporary directory, started and stopped by pid;
 * and a private three-master Redis Cluster, likewise.
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

/*
 * SIGKILL (its port stays reserved, its dir kept), and a server started
 * again on that port, empty (no persistence). 0 or -1.
 */
int rlg_test_redis_kill(struct rlg_test_redis *r);
int rlg_test_redis_restart(struct rlg_test_redis *r);

/* A Redis Cluster of three masters, no replicas, on 127.0.0.1. */
#define RLG_TEST_CLUSTER_NODES 3

struct rlg_test_redis_cluster {
	pid_t pid[RLG_TEST_CLUSTER_NODES];   /* 0: not running */
	int port[RLG_TEST_CLUSTER_NODES];    /* bus port: port + 10000 */
	char dir[64];         /* nodes-PORT.conf, redis-PORT.log, create.log */
	char url[128];        /* "redis://127.0.0.1:P1,...:P2,...:P3" */
};

/*
 * Starts three redis-server with --cluster-enabled yes on free ports
 * (10000-22767, their bus ports free too), no persistence, one temp dir;
 * creates the cluster with redis-cli --cluster create (16384 slots split
 * in three, no replicas) and waits (bounded) until every node says
 * cluster_state:ok. 0 or -1 (with a message on stderr; all stopped).
 */
int rlg_test_redis_cluster_start(struct rlg_test_redis_cluster *cl);

/* Stops every node (as rlg_test_redis_stop) and removes the dir. */
void rlg_test_redis_cluster_stop(struct rlg_test_redis_cluster *cl);

/* Stops node i by its pid (SIGTERM, bounded wait, SIGKILL); 0 or -1. */
int rlg_test_redis_cluster_stop_node(struct rlg_test_redis_cluster *cl,
    int i);

/*
 * Starts node i again on its port with its nodes file, so it rejoins with
 * its id and slots; waits (bounded) until it answers PING. 0 or -1.
 */
int rlg_test_redis_cluster_start_node(struct rlg_test_redis_cluster *cl,
    int i);

/*
 * Waits up to wait_ms until every running node says cluster_state:want
 * ("ok" or "fail"): a step may go to any of them. 0, or -1 when the time
 * ran out.
 */
int rlg_test_redis_cluster_wait(const struct rlg_test_redis_cluster *cl,
    const char *want, long wait_ms);

#endif
