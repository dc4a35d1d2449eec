/*
 * resp.h: reading a command off a RESP stream, for the test doubles of a
 * Redis server (fake_redis.c, and store_fixture.c's fake in process).
 */
#ifndef RLG_TEST_RESP_H
#define RLG_TEST_RESP_H

#include <stddef.h>

/*
 * The first whole RESP command (an array of bulk strings) in buf: its
 * length, with argv and argvlen (room for max) pointing into buf and
 * *argc set; 0 when it is not all there yet. Anything else than an
 * array, or one of more than max strings, is skipped up to its end of
 * line (*argc 0).
 */
size_t rlg_test_resp_parse(const char *buf, size_t len, const char **argv,
    size_t *argvlen, int max, int *argc);

#endif
