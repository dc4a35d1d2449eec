/*
 * check_rlgate.h: the Check suites, one per module, that check_main.c runs
 * in one runner.
 */
#ifndef RLG_CHECK_RLGATE_H
#define RLG_CHECK_RLGATE_H

#include <check.h>

Suite *rlg_accept_suite(void);
Suite *rlg_wire_suite(void);
Suite *rlg_admin_suite(void);
Suite *rlg_config_suite(void);
Suite *rlg_gate_suite(void);
Suite *rlg_group_suite(void);
Suite *rlg_limiter_suite(void);
Suite *rlg_park_suite(void);
Suite *rlg_net_suite(void);
Suite *rlg_redis_faults_suite(void);
Suite *rlg_redis_script_suite(void);
Suite *rlg_redis_sync_suite(void);
Suite *rlg_request_suite(void);
Suite *rlg_response_suite(void);
Suite *rlg_store_suite(void);
Suite *rlg_store_guard_suite(void);
Suite *rlg_store_redis_suite(void);
Suite *rlg_store_redis_cluster_suite(void);
Suite *rlg_table_suite(void);
Suite *rlg_tier_suite(void);

#endif
