/*
 * main.c - runs every unit test suite (Check).  CK_EXCLUDE_TAGS=big skips the
 * large capacity test; CK_RUN_SUITE=name runs one suite.
 */
#include <stdlib.h>

#include "testutil.h"

int main(void)
{
    SRunner *sr = srunner_create(layout_suite());
    srunner_add_suite(sr, dedup_suite());
    srunner_add_suite(sr, iceberg_suite());
    srunner_add_suite(sr, concurrency_suite());
    srunner_add_suite(sr, tablefile_suite());
    srunner_add_suite(sr, badinput_suite());
    srunner_add_suite(sr, backend_suite());
    srunner_add_suite(sr, add_suite());
    srunner_add_suite(sr, partition_suite());
    srunner_add_suite(sr, tree_suite());
    srunner_add_suite(sr, cuckoo_suite());
    srunner_add_suite(sr, static_suite());
    srunner_add_suite(sr, ordered_suite());
    srunner_add_suite(sr, config_suite());
    srunner_add_suite(sr, envelope_suite());
    srunner_add_suite(sr, resp_wire_suite());
    srunner_add_suite(sr, explore_suite());
    srunner_add_suite(sr, histogram_suite());
    srunner_add_suite(sr, workload_suite());
    srunner_add_suite(sr, mcmodel_suite());
    srunner_add_suite(sr, faults_suite());
    srunner_add_suite(sr, capacity_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
