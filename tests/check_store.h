/*
 * check_store.h: the parts of the store suites that check_store.c
 * assembles: each backend's own tests, added to the test cases that
 * check_store.c creates (with their fixtures, store_fixture.h) next to
 * the tests every backend runs.
 */
#ifndef RLG_CHECK_STORE_H
#define RLG_CHECK_STORE_H

#include <stdbool.h>

#include <check.h>

/*
 * Adds the SQLite-only tests of test case name ("core", "algorithms",
 * "schema", "concurrency" or "errors") of suite "store" to tc.
 */
void rlg_store_sqlite_tests(TCase *tc, const char *name);

/* Adds the tests of test case "redis" of suite "store_redis" to tc. */
void rlg_store_redis_tests(TCase *tc);

/* Adds test case "group" (check_group.c: group commit on the suite's
 * redis-server, or cluster) to suite "store_redis" (or
 * "store_redis_cluster"). */
void rlg_group_redis_tests(Suite *s, bool cluster);

/* Adds test case "sync" (check_store_sync.c: rlg_store_sync on the
 * suite's redis-server, or cluster) to suite "store_redis" (or
 * "store_redis_cluster"). */
void rlg_sync_redis_tests(Suite *s, bool cluster);

/* Adds test case "global" (check_store_global.c: the local+global mode,
 * hosts' tables in front of the suite's Redis). */
void rlg_global_redis_tests(Suite *s, bool cluster);

/*
 * Adds the tests of test case name ("cluster" or "cluster_faults") of
 * suite "store_redis_cluster" to tc.
 */
void rlg_store_cluster_tests(TCase *tc, const char *name);

#endif
