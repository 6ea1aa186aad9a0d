/*
 * main.c - the integration tests: each starts a real floed (FLOED, default
 * build/san/floed) on an ephemeral port and talks to it through libfloe, raw
 * frames and the floe CLI (FLOE_CLI, default build/san/floe).
 */
#include <signal.h>
#include <stdlib.h>

#include "harness.h"

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    harness_init();
    SRunner *sr = srunner_create(ops_suite());
    srunner_add_suite(sr, load_suite());
    srunner_add_suite(sr, badinput_suite());
    srunner_add_suite(sr, lifecycle_suite());
    srunner_add_suite(sr, cli_suite());
    srunner_add_suite(sr, tree_suite());
    srunner_add_suite(sr, ordered_suite());
    srunner_add_suite(sr, shards_suite());
    srunner_add_suite(sr, add_suite());
    srunner_add_suite(sr, explore_suite());
    srunner_add_suite(sr, mc_suite());
    srunner_add_suite(sr, metrics_suite());
    srunner_add_suite(sr, tools_suite());
    srunner_add_suite(sr, service_suite());
    srunner_add_suite(sr, security_suite());
    srunner_add_suite(sr, tls_suite());
    srunner_add_suite(sr, faults_suite());
    srunner_add_suite(sr, resp_suite());
    srunner_add_suite(sr, static_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
