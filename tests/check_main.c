/*
 * check_main.c: runs every unit-test suite in one Check runner. Under
 * `make check` the results come out as TAP (CK_TAP_LOG_FILE_NAME=-), one
 * line per test, which the automake TAP driver counts.
 */
#include <stdlib.h>

#include "check_rlgate.h"

/* The suites, in the order they run: a new one is a word here. */
static Suite *(*const suites[])(void) = {
	rlg_limiter_suite, rlg_config_suite, rlg_tier_suite, rlg_net_suite,
	rlg_request_suite,
	rlg_response_suite, rlg_gate_suite, rlg_admin_suite, rlg_store_suite,
	rlg_store_guard_suite, rlg_store_redis_suite,
	rlg_store_redis_cluster_suite, rlg_redis_script_suite,
	rlg_redis_faults_suite, rlg_group_suite, rlg_table_suite,
};

int
main(void)
{
	SRunner *sr;
	size_t i;
	int failed;

	sr = srunner_create(suites[0]());
	for (i = 1; i < sizeof suites / sizeof suites[0]; i++)
		srunner_add_suite(sr, suites[i]());
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
