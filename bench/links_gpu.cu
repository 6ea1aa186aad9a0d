/*
 * links_gpu.cu - floe-links-gpu: how fast this host moves batches to and from
 * its GPUs, one device alone and several at once.  Each device copies
 * --chunk bytes at a time (8 MiB: a 1 Mi-key batch of 64-bit keys) between
 * its own pinned host buffer and its memory, host to device, device to host,
 * and both ways at once (a stream each), for about --seconds; devices 0..g-1
 * copy together for g = 1, 2, 4, ... up to every device.  Printed: GB/s
 * summed over the devices and per device, and the keys/s that would carry
 * (8 bytes in and 1 back a key, as a find-or-put's batch moves).
 * docs/PERFORMANCE.md ("Several GPUs") uses it to say when E1 in process is
 * bound by the host's links rather than by floe.
 */
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_DEVICES 16

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "floe-links-gpu: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct device_bufs {
    void *host_in, *host_out, *dev_in, *dev_out;
    cudaStream_t up, down;
};

/* GB/s summed over devices 0..g-1 copying `rounds` chunks each: up (host to
 * device), down, or both at once. */
static double copy_rate(device_bufs *d, int g, size_t chunk, int rounds, bool up, bool down)
{
    for (int i = 0; i < g; i++) {
        check(cudaSetDevice(i), "cudaSetDevice");
        check(cudaDeviceSynchronize(), "synchronize");
    }
    const double t0 = now();
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < g; i++) {
            check(cudaSetDevice(i), "cudaSetDevice");
            if (up)
                check(cudaMemcpyAsync(d[i].dev_in, d[i].host_in, chunk, cudaMemcpyHostToDevice, d[i].up), "copy in");
            if (down)
                check(cudaMemcpyAsync(d[i].host_out, d[i].dev_out, chunk, cudaMemcpyDeviceToHost, d[i].down),
                      "copy out");
        }
    for (int i = 0; i < g; i++) {
        check(cudaSetDevice(i), "cudaSetDevice");
        check(cudaDeviceSynchronize(), "synchronize");
    }
    return (double)chunk * rounds * g * ((up ? 1 : 0) + (down ? 1 : 0)) / (now() - t0) / 1e9;
}

static void help(void)
{
    printf("usage: floe-links-gpu [--chunk MIB] [--seconds S]\n"
           "How fast this host copies to and from its GPUs: each device between its own pinned\n"
           "host buffer and its memory, CHUNK MiB a copy (default 8: a 1 Mi-key batch), host to\n"
           "device, device to host and both at once, one device and then 2, 4, ... at once, each\n"
           "for about S seconds (default 1).  Prints GB/s summed and per device, and the keys/s\n"
           "that would carry at 8 bytes in and 1 back a key.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"chunk", required_argument, NULL, 'c'},
        {"seconds", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    size_t chunk = (size_t)8 << 20;
    double seconds = 1.0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'c': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end || v < 1 || v > 1024) {
                fprintf(stderr, "floe-links-gpu: --chunk wants MiB from 1 to 1024, not '%s'\n", optarg);
                return 2;
            }
            chunk = (size_t)v << 20;
            break;
        }
        case 's':
            seconds = strtod(optarg, &end);
            if (*end || !(seconds > 0 && seconds <= 60)) {
                fprintf(stderr, "floe-links-gpu: --seconds wants a number of seconds up to 60, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h':
            help();
            return 0;
        default:
            fprintf(stderr, "try 'floe-links-gpu --help'\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "floe-links-gpu: unexpected argument '%s'; try 'floe-links-gpu --help'\n", argv[optind]);
        return 2;
    }
    int n = 0;
    check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
    if (n > MAX_DEVICES)
        n = MAX_DEVICES;
    device_bufs d[MAX_DEVICES];
    for (int i = 0; i < n; i++) {
        check(cudaSetDevice(i), "cudaSetDevice");
        check(cudaMallocHost(&d[i].host_in, chunk), "pinned host memory");
        check(cudaMallocHost(&d[i].host_out, chunk), "pinned host memory");
        check(cudaMalloc(&d[i].dev_in, chunk), "device memory");
        check(cudaMalloc(&d[i].dev_out, chunk), "device memory");
        check(cudaStreamCreateWithFlags(&d[i].up, cudaStreamNonBlocking), "stream");
        check(cudaStreamCreateWithFlags(&d[i].down, cudaStreamNonBlocking), "stream");
    }
    printf("%d device(s), %zu MiB a copy, GB/s summed (per device)\n", n, chunk >> 20);
    printf("%-8s %-22s %-22s %-22s %s\n", "devices", "host to device", "device to host", "both at once",
           "keys/s at 8 in + 1 out");
    for (int g = 1; g <= n; g = g * 2 > n && g < n ? n : g * 2) {
        copy_rate(d, g, chunk, 4, true, true); /* warm-up; also sizes the rounds */
        const double probe = copy_rate(d, g, chunk, 8, true, false);
        const int rounds = (int)(probe * 1e9 * seconds / ((double)chunk * g)) + 1;
        const double in = copy_rate(d, g, chunk, rounds, true, false),
                     out = copy_rate(d, g, chunk, rounds, false, true),
                     both = copy_rate(d, g, chunk, rounds, true, true);
        /* a key's 9 bytes: its 8 in at `in`'s rate, its byte out at `out`'s, the two overlapping */
        const double keys = 1.0 / (8.0 / in > 1.0 / out ? 8.0 / in : 1.0 / out);
        char a[32], b[32], c[32];
        snprintf(a, sizeof a, "%.1f (%.1f)", in, in / g);
        snprintf(b, sizeof b, "%.1f (%.1f)", out, out / g);
        snprintf(c, sizeof c, "%.1f (%.1f)", both, both / g);
        printf("%-8d %-22s %-22s %-22s <= %.2f G\n", g, a, b, c, keys);
    }
    for (int i = 0; i < n; i++) {
        cudaSetDevice(i);
        cudaFreeHost(d[i].host_in);
        cudaFreeHost(d[i].host_out);
        cudaFree(d[i].dev_in);
        cudaFree(d[i].dev_out);
    }
    return 0;
}
