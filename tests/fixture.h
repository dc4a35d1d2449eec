/*
 * fixture.h: what several test programs share: scratch directories
 * removed with everything in them, the log (stderr) captured to a file,
 * and a store handle's statistics by value. The Redis servers have their
 * own fixture (redis_fixture.h).
 */
#ifndef RLG_TEST_FIXTURE_H
#define RLG_TEST_FIXTURE_H

#include <stddef.h>

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

/* What s has done (rlg_store_stats), by value. */
struct rlg_store_stats rlg_test_stats(const struct rlg_store *s);

#endif
