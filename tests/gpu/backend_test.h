/* backend_test.h - what the parts of floe-gpu-tests share: the failure count and EXPECT,
 * the random numbers, device memory taken away, and the suites of backend_test.cu and tree_test.cu. */
#ifndef FLOE_GPU_BACKEND_TEST_H
#define FLOE_GPU_BACKEND_TEST_H

#include <stdint.h>
#include <stdio.h>

/* Failed checks of the whole run (gpu_test.cu). */
extern int failures;

/* Counts a failure with its place and message, and leaves the test with ret. */
#define EXPECT_OR_RETURN(ret, cond, ...)                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, "\n");                                                                                     \
            return ret;                                                                                                \
        }                                                                                                              \
    } while (0)
/* The same in a void test. */
#define EXPECT(cond, ...) EXPECT_OR_RETURN(, cond, __VA_ARGS__)

/* xorshift64*: the tests' random numbers (gpu_test.cu). */
uint64_t test_rng(uint64_t *s);

#ifdef __cplusplus
#include <cuda_runtime.h>
#include <vector>

/* Device memory held until released or out of scope (an EXPECT returns
 * early): take_all() takes every free byte, in ever smaller pieces, as
 * another process might. */
struct device_hog {
    std::vector<void *> pieces;
    void take_all()
    {
        for (size_t piece = (size_t)256 << 20; piece >= ((size_t)1 << 20); piece /= 4) {
            void *p;
            while (cudaMalloc(&p, piece) == cudaSuccess)
                pieces.push_back(p);
        }
        cudaGetLastError(); /* the last cudaMalloc's failure is not sticky: clear it */
    }
    void release()
    {
        for (void *p : pieces)
            cudaFree(p);
        pieces.clear();
    }
    ~device_hog()
    {
        release();
    }
};
#endif

struct floe_backend;
/* Tables in `parts` parts (tables/partition.h) over one GPU backend per
 * device (at most parts devices; several parts a device where there are
 * fewer), or over the CPU backend; NULL with a message on failure. */
struct floe_backend *test_gpu_parts(unsigned parts);
struct floe_backend *test_cpu_parts(unsigned parts);

/* The GPU backend against the CPU backend; failures counted in `failures`. */
void backend_suite(uint64_t seed, bool small, const char *only);

/* The GPU TREE engine against the CPU one, and TREE tables through both
 * backends (tree_test.cu). */
void tree_suite(uint64_t seed, bool small);

/* A SET in parts over every device created, filled from several lanes,
 * searched and dropped `cycles` times, every answer the CPU engine's
 * (cycles_test.cu). */
void cycles_suite(uint64_t seed, bool small, unsigned cycles);

/* A device failed on purpose (floe_gpu_fault_arm), in a child process
 * (`self` --fault-child, whose main is fault_child_main): its tables answer
 * FLOE_ERR_UNAVAILABLE, the other devices' exactly (fault_test.cu). */
void fault_suite(const char *self);
int fault_child_main(void);

/* The GPU ORDERED engine against the CPU one (ordered_test.cu). */
void ordered_suite(uint64_t seed, bool small);

/* STATIC tables: the GPU engine against a reference and the CPU engine,
 * and through both backends, whole and in parts (static_test.cu). */
void static_suite(uint64_t seed, bool small);

#endif
