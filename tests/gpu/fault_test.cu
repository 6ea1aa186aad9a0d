/*
 * fault_test.cu - part of floe-gpu-tests: a device whose context a fault
 * has ruined (an illegal address, as a bug would make) answers every request
 * that needs it with FLOE_ERR_UNAVAILABLE, never a wrong answer and never
 * FLOE_ERR_FULL, and the other devices go on serving.
 *
 * The fault cannot be undone in a process, so the suite runs in a child
 * (floe-gpu-tests --fault-child, started by fault_suite), on the host's
 * last device D: a whole table on D, a table in parts with one part on D
 * (two parts on D where the host has one device) and, on a host of several,
 * a whole table on device 0.  Each gets keys; then the next batch begun on
 * D faults on purpose (floe_gpu_fault_arm).
 */
#include <cuda_runtime.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "backend.h"
#include "backend_gpu.h"
#include "backend_test.h"
#include "partition.h"

extern char **environ;

namespace
{

const size_t N = 100000;

floe_status run_keys(floe_table *t, floe_op op, const std::vector<uint64_t> &keys, std::vector<uint8_t> &res,
                     floe_errinfo *err)
{
    floe_batch b;
    memset(&b, 0, sizeof b);
    b.op = op;
    b.keys = keys.data();
    b.n = keys.size();
    res.assign(keys.size(), 0xEE);
    b.results = res.data();
    floe_status st = floe_table_run(t, &b);
    *err = b.error;
    return st;
}

floe_table *make_table(floe_backend *be, const char *name, floe_errinfo *err)
{
    floe_spec s;
    floe_spec_default(&s);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.key_bits = 40;
    s.capacity = 4 * N;
    floe_table *t = NULL;
    return floe_table_create(be, &s, &t, err) == FLOE_OK ? t : NULL;
}

/* How many answers are a. */
size_t count(const std::vector<uint8_t> &res, uint8_t a)
{
    size_t n = 0;
    for (uint8_t r : res)
        n += r == a;
    return n;
}

/* Every answer of a batch that must not have run: untouched (0xEE). */
bool untouched(const std::vector<uint8_t> &res)
{
    for (uint8_t r : res)
        if (r != 0xEE)
            return false;
    return true;
}

/* The child: true if every check held. */
bool fault_child(void)
{
    const int ndev = floe_gpu_count(), D = ndev - 1;
    floe_errinfo err;
    floe_backend *whole_d = NULL, *whole_0 = NULL, *parts = test_gpu_parts(2);
    EXPECT_OR_RETURN(false, parts, "parts backend");
    if (floe_backend_gpu_create(D, 0, &whole_d, &err) != FLOE_OK ||
        (ndev > 1 && floe_backend_gpu_create(0, 0, &whole_0, &err) != FLOE_OK))
        EXPECT_OR_RETURN(false, false, "backends: %s", err.msg);
    floe_table *w = make_table(whole_d, "whole", &err), *p = make_table(parts, "parted", &err);
    floe_table *o = whole_0 ? make_table(whole_0, "other", &err) : NULL;
    EXPECT_OR_RETURN(false, w && p && (o || !whole_0), "tables: %s", err.msg);
    std::vector<uint64_t> keys(N), more(N);
    uint64_t r = 42;
    for (size_t i = 0; i < N; i++) {
        keys[i] = test_rng(&r) >> 24;
        more[i] = test_rng(&r) >> 24 | 1ull << 39;
    }
    std::vector<uint8_t> res;
    floe_table *all[3] = {w, p, o};
    for (floe_table *t : all)
        if (t)
            EXPECT_OR_RETURN(false, run_keys(t, FLOE_OP_INSERT, keys, res, &err) == FLOE_OK,
                             "insert before the fault: %s", err.msg);
    char why[FLOE_ERROR_MAX];
    EXPECT_OR_RETURN(false, floe_gpu_healthy(D, why, sizeof why) == 1, "device %d unhealthy before the fault: %s", D,
                     why);

    floe_gpu_fault_arm(D, 1);
    floe_status st = run_keys(w, FLOE_OP_INSERT, more, res, &err);
    EXPECT_OR_RETURN(false, st == FLOE_ERR_UNAVAILABLE, "the batch that met the fault: %s: %s", floe_status_name(st),
                     err.msg);
    char want[64];
    snprintf(want, sizeof want, "GPU %d has failed", D);
    EXPECT_OR_RETURN(false, strstr(err.msg, want) && strstr(err.msg, "illegal memory access"), "its message: %s",
                     err.msg);
    EXPECT_OR_RETURN(false, floe_gpu_healthy(D, why, sizeof why) == 0 && strstr(why, "whole"),
                     "device %d after the fault: healthy %d (%s)", D, floe_gpu_healthy(D, NULL, 0), why);
    printf("  the fault: %s\n", err.msg);
    if (o) { /* what the driver says of device 0 now, before anything of ours touches it again */
        int was = 0;
        cudaGetDevice(&was);
        cudaSetDevice(0);
        const cudaError_t e0 = cudaDeviceSynchronize();
        cudaSetDevice(was);
        printf("  device 0 right after device %d failed: %s\n", D, cudaGetErrorString(e0));
        fflush(stdout);
    }

    /* The other device: exact as before, or (where the driver took the process's context on it down
     * too, as on the 2 x H200 hosts measured) failed as well, and then answering ERR_UNAVAILABLE: never
     * a wrong answer. */
    const int other_up = o ? floe_gpu_healthy(0, why, sizeof why) : 0;
    if (o && other_up == 1) {
        st = run_keys(o, FLOE_OP_FIND, keys, res, &err);
        const size_t present = count(res, FLOE_PRESENT);
        EXPECT_OR_RETURN(false, st == FLOE_OK && present == N,
                         "device 0 after device %d failed: %s, %zu of %zu present", D, err.msg, present, N);
        st = run_keys(o, FLOE_OP_INSERT, more, res, &err);
        const size_t inserted = count(res, FLOE_INSERTED);
        EXPECT_OR_RETURN(false, st == FLOE_OK && inserted == N, "device 0 inserts: %s, %zu of %zu inserted", err.msg,
                         inserted, N);
        printf("  device 0 still works and answers exactly\n");
    } else if (o) {
        printf("  device 0 failed with it: %s\n", why);
        st = run_keys(o, FLOE_OP_FIND, keys, res, &err);
        EXPECT_OR_RETURN(false, st == FLOE_ERR_UNAVAILABLE && strstr(err.msg, "GPU 0 has failed") && untouched(res),
                         "a find on device 0, failed with device %d: %s: %s", D, floe_status_name(st), err.msg);
    }
    /* later requests on D: the same status at once, nothing answered */
    st = run_keys(w, FLOE_OP_FIND, keys, res, &err);
    EXPECT_OR_RETURN(false, st == FLOE_ERR_UNAVAILABLE && untouched(res), "a find on the failed device: %s: %s",
                     floe_status_name(st), err.msg);
    floe_batch sb;
    memset(&sb, 0, sizeof sb);
    sb.op = FLOE_OP_STATS;
    st = floe_table_run(w, &sb);
    EXPECT_OR_RETURN(false, st == FLOE_ERR_UNAVAILABLE, "stats on the failed device: %s", floe_status_name(st));
    st = run_keys(p, FLOE_OP_FIND, keys, res, &err);
    EXPECT_OR_RETURN(false, st == FLOE_ERR_UNAVAILABLE, "a find on a table with a part on the failed device: %s: %s",
                     floe_status_name(st), err.msg);
    printf("  a find on the table in parts: %s\n", err.msg);
    st = run_keys(p, FLOE_OP_INSERT, more, res, &err);
    EXPECT_OR_RETURN(false, st == FLOE_ERR_UNAVAILABLE, "an insert on a table with a part on the failed device: %s: %s",
                     floe_status_name(st), err.msg);
    floe_table *fresh = make_table(whole_d, "fresh", &err);
    EXPECT_OR_RETURN(false, !fresh && err.code == FLOE_ERR_UNAVAILABLE, "a create on the failed device: %s: %s",
                     fresh ? "made" : floe_status_name(err.code), err.msg);

    if (o && other_up == 1) { /* and still, after the requests for the failed device */
        st = run_keys(o, FLOE_OP_FIND, more, res, &err);
        const size_t present = count(res, FLOE_PRESENT);
        EXPECT_OR_RETURN(false, st == FLOE_OK && present == N, "device 0 at the end: %s, %zu of %zu present", err.msg,
                         present, N);
    }
    for (floe_table *t : all)
        floe_table_destroy(t);
    floe_backend_destroy(whole_d);
    floe_backend_destroy(whole_0);
    floe_backend_destroy(parts);
    printf("ok: fault: device %d failed on purpose: its whole table and the table in parts with a part on it "
           "answer ERR_UNAVAILABLE, a create there too%s\n",
           D,
           !o              ? ""
           : other_up == 1 ? "; device 0 still answers exactly"
                           : "; device 0 failed with it and answers "
                             "ERR_UNAVAILABLE too");
    return true;
}

} // namespace

int fault_child_main(void)
{
    const bool ok = fault_child();
    return ok && !failures ? 0 : 1;
}

void fault_suite(const char *self)
{
    char *argv[] = {(char *)self, (char *)"--fault-child", NULL};
    fflush(stdout);
    pid_t pid;
    int status = 0;
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0 || waitpid(pid, &status, 0) != pid) {
        failures++;
        fprintf(stderr, "FAIL: fault: cannot run %s --fault-child\n", self);
        return;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failures++;
        fprintf(stderr, "FAIL: fault: the child (%s --fault-child) %s %d\n", self,
                WIFEXITED(status) ? "exited with" : "died of signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
}
