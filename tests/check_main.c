/*
 * check_main.c: runs every unit-test suite in one Check runner. Under
 * `make check` the results come out as TAP (CK_TAP_LOG_FILE_NAME=-), one
 * line per test, which the automake TAP driver counts.
 */
#include <stdlib.h>

#include "check_rlgate.h"

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(rlg_limiter_suite());
	srunner_add_suite(sr, rlg_config_suite());
	srunner_add_suite(sr, rlg_net_suite());
	srunner_add_suite(sr, rlg_request_suite());
	srunner_add_suite(sr, rlg_response_suite());
	srunner_add_suite(sr, rlg_gate_suite());
	srunner_add_suite(sr, rlg_store_suite());
	srunner_add_suite(sr, rlg_store_guard_suite());
	srunner_add_suite(sr, rlg_store_redis_suite());
	srunner_add_suite(sr, rlg_store_redis_cluster_suite());
	srunner_add_suite(sr, rlg_redis_script_suite());
	srunner_add_suite(sr, rlg_redis_faults_suite());
	srunner_add_suite(sr, rlg_group_suite());
	srunner_add_suite(sr, rlg_table_suite());
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
