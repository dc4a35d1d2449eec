/*
 * check_main.c: runs every unit-test suite in one Check runner. Under
 * `make check` the results come out as TAP (CK_TAP_LOG_FILE_NAME=-), one
 * line per test, which the automake TAP driver counts; make check runs
 * each suite as a test of its own (CK_RUN_SUITE=NAME, through
 * tests/unit-suite.sh), so that make -j spreads them. `check_rlgate
 * --list` prints the suites' names, one a line, for that script to hold
 * Makefile.am's list (UNIT_TESTS) to this one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_rlgate.h"

/*
 * The suites, in the order they run, each under the name its
 * suite_create gives it: a new one is a line here and its
 * tests/unit/NAME.suite in Makefile.am's UNIT_TESTS.
 */
static const struct {
	const char *name;
	Suite *(*make)(void);
} suites[] = {
	{ "limiter", rlg_limiter_suite },
	{ "config", rlg_config_suite },
	{ "tier", rlg_tier_suite },
	{ "net", rlg_net_suite },
	{ "request", rlg_request_suite },
	{ "response", rlg_response_suite },
	{ "gate", rlg_gate_suite },
	{ "admin", rlg_admin_suite },
	{ "store", rlg_store_suite },
	{ "store_guard", rlg_store_guard_suite },
	{ "store_redis", rlg_store_redis_suite },
	{ "store_redis_cluster", rlg_store_redis_cluster_suite },
	{ "redis_script", rlg_redis_script_suite },
	{ "redis_sync", rlg_redis_sync_suite },
	{ "redis_faults", rlg_redis_faults_suite },
	{ "group", rlg_group_suite },
	{ "table", rlg_table_suite },
	{ "park", rlg_park_suite },
	{ "accept", rlg_accept_suite },
	{ "wire", rlg_wire_suite },
};

int
main(int argc, char **argv)
{
	SRunner *sr;
	size_t i;
	int failed;

	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (i = 0; i < sizeof suites / sizeof suites[0]; i++)
			printf("%s\n", suites[i].name);
		return EXIT_SUCCESS;
	}
	if (argc > 1) {
		fprintf(stderr, "usage: %s [--list]\n", argv[0]);
		return 64;
	}
	sr = srunner_create(suites[0].make());
	for (i = 1; i < sizeof suites / sizeof suites[0]; i++)
		srunner_add_suite(sr, suites[i].make());
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
