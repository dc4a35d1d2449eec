/*
 * fixture.h: what several test programs share: scratch directories
 * removed with everything in them, the log (stderr) captured to a file,
 * a store handle's statistics by value, CGI parameters from arguments,
 * worker threads, and a pseudo-random clock. The Redis servers have their
 * own fixture (redis_fixture.h). No Check here: the benchmarks link it.
 */
#ifndef RLG_TEST_FIXTURE_H
#define RLG_TEST_FIXTURE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdint.h>

#include "gate.h"
#include "store.h"
#include "store_stats.h"

/*
 * Makes a new directory from template (ending in XXXXXX, modified in
 * place, as mkdtemp(3)). 0, or -1 (errno).
 */
int rlg_test_mkdtemp(char *template);

/* Removes path and everything below it (links not followed); quiet. */
void rlg_test_rmtree(const char *path);

/*
 * Sends stderr, where rlg_log writes, to the file at path (created or
 * emptied) until rlg_test_log_end. 0, or -1 (errno).
 */
int rlg_test_log_begin(const char *path);

/*
 * Restores stderr and returns how many lines of the captured log contain
 * needle ("" counts every line); -1 if the log cannot be read.
 */
int rlg_test_log_end(const char *needle);

/*
 * One request of one item (policy p, client) at now: the step's result;
 * *admitted (if not NULL) whether it was admitted, when RLG_OK.
 */
int rlg_test_step(struct rlg_store *s, const struct rlg_policy *p,
    const char *client, int64_t now, bool *admitted);

/* What s has done (rlg_store_stats), by value. */
struct rlg_store_stats rlg_test_stats(const struct rlg_store *s);

/*
 * Copies the NULL-terminated char * arguments in ap to envp, which has
 * room for max pointers, and ends it with NULL: the "NAME=value"
 * parameters a test passes as arguments. How many; aborts if they do not
 * fit (a test's mistake).
 */
size_t rlg_test_envv(char **envp, size_t max, va_list ap);

/*
 * rlg_gate_decide on the "NAME=value" parameters envp (NULL-terminated),
 * read as the CGI fronts read theirs.
 */
void rlg_test_decide_envp(struct rlg_gate *g, char **envp, int64_t now_ms,
    struct rlg_verdict *v);

/*
 * Runs fn on n threads at once, the i-th with (char *)args + i * size,
 * and waits for them all. A thread that cannot start aborts the program
 * (the others may wait for it on a barrier).
 */
void rlg_test_threads(int n, void *(*fn)(void *), void *args, size_t size);

/* One xorshift64 step of *x (not 0): the new *x. Fast, reproducible. */
uint64_t rlg_test_xorshift(uint64_t *x);

/*
 * A clock that mostly goes on and now and then steps back: one
 * rlg_test_xorshift draw of *x; one draw in back_one_in moves *now back
 * by up to back - 1 ms, the others on by up to on - 1 ms. Returns the
 * draw, for the caller's other choices (which client).
 */
uint64_t rlg_test_clock_walk(uint64_t *x, int64_t *now, uint64_t back_one_in,
    int64_t back, int64_t on);

/* n override rows (policy "default", spec limit=2000000), row i's client
 * client(i), written to the SQLite database at path as an operator would;
 * an error ends the program (who names it). For the benchmarks. */
void rlg_test_put_overrides(const char *path, const char *who, int n,
    void (*client)(int i, char *buf, size_t size));

#endif
