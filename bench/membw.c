/*
 * membw.c - floe-membw: how fast this host copies memory, with 1..N threads
 * (each copying its own 64 MiB buffer, as floed's staging and merge copies
 * do).  docs/PERFORMANCE.md uses it to say when E1 is bound by memory
 * bandwidth rather than by any one thread.
 *
 *   floe-membw [MAX_THREADS]    (default: the online CPUs)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BYTES  ((size_t)64 << 20)
#define ROUNDS 8

typedef struct {
    unsigned char *src, *dst;
    pthread_barrier_t *go;
} job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *copier(void *arg)
{
    job *j = arg;
    pthread_barrier_wait(j->go);
    for (int r = 0; r < ROUNDS; r++)
        memcpy(j->dst, j->src, BYTES);
    return NULL;
}

int main(int argc, char **argv)
{
    long max = argc > 1 ? strtol(argv[1], NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (max < 1 || max > 1024) {
        fprintf(stderr, "usage: floe-membw [MAX_THREADS (1..1024)]\n");
        return 2;
    }
    job *jobs = calloc((size_t)max, sizeof *jobs);
    pthread_t *th = calloc((size_t)max, sizeof *th);
    if (!jobs || !th)
        return 1;
    for (long i = 0; i < max; i++) {
        jobs[i].src = malloc(BYTES);
        jobs[i].dst = malloc(BYTES);
        if (!jobs[i].src || !jobs[i].dst) {
            fprintf(stderr, "floe-membw: out of memory\n");
            return 1;
        }
        memset(jobs[i].src, (int)i, BYTES); /* touch every page before timing */
        memset(jobs[i].dst, 0, BYTES);
    }
    printf("threads  copy GB/s (read + write of each byte counts once)\n");
    for (long n = 1; n <= max; n = n < max && n * 2 > max ? max : n * 2) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, (unsigned)n + 1);
        for (long i = 0; i < n; i++) {
            jobs[i].go = &go;
            pthread_create(&th[i], NULL, copier, &jobs[i]);
        }
        pthread_barrier_wait(&go);
        double t0 = now();
        for (long i = 0; i < n; i++)
            pthread_join(th[i], NULL);
        double s = now() - t0;
        pthread_barrier_destroy(&go);
        printf("%7ld  %9.1f\n", n, (double)n * ROUNDS * BYTES / s / 1e9);
        if (n == max)
            break;
    }
    return 0;
}
