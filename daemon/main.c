/*
 * main.c - floed's command line: settings from defaults, an optional config
 * file and flags (flags win), then floed_run.
 */
#include <event2/thread.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_gpu.h"
#include "config.h"
#include "floed.h"
#include "log.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: floed [--config FILE] [--SETTING VALUE ...]\n"
               "\n"
               "floed serves exact sets and dictionaries (floe tables) over TCP: clients send\n"
               "batches of keys in protobuf frames (docs/PROTOCOL.md) and get one answer per key.\n"
               "It runs in the foreground and logs to stderr (with syslog priorities when stderr\n"
               "is the journal). SIGTERM or SIGINT stops it gracefully (queued requests get\n"
               "ERR_SHUTTING_DOWN, tables are saved when data-dir is set); SIGHUP reads the\n"
               "config file and flags again and applies the settings marked below. Under\n"
               "systemd (Type=notify) it reports READY=1 once every saved table is loaded and\n"
               "it listens, STATUS= lines while loading and saving, and watchdog pings.\n"
               "With data-dir, floed locks the directory (one floed per data-dir) and saves\n"
               "changed tables by the save-every and save-after-changes rules.\n"
               "Exit codes: 0 stopped cleanly, 1 failed (see the log), 2 a bad setting, 3 a GPU failed\n"
               "and gpu-fault-exit stopped floed (its other tables saved; see docs/OPERATIONS.md).\n"
               "\n"
               "  -c, --config FILE    read settings from FILE (`key value` lines, see config/floed.conf)\n"
               "  -h, --help           this text\n"
               "  -V, --version        print the version\n"
               "\n"
               "Settings (each also a `key value` line in the config file; flags override it):\n");
    config_print_help(f);
    char dev[96];
    fprintf(f,
            "\nBackends (the `backend` setting is the default for new tables; a create_table request may\n"
            "name its own; stats and `floe stats` say which one a table runs on):\n"
            "  cpu   the CPU engine on engine-threads threads, always present\n"
            "  gpu   the GPU engine (device memory, pinned staging, overlapped streams): %s\n"
            "  auto  gpu where a device is present, else cpu (the default)\n"
            "A GPU table is partitioned over every device of `gpus` (each holds a whole table of its share\n"
            "of the keys); `partitions` sets the parts of every new table (docs/OPERATIONS.md, \"Several GPUs\").\n"
            "floed loads every GPU kernel at start (CUDA_MODULE_LOADING=EAGER unless the environment\n"
            "sets it; LAZY: each at its first launch, CUDA's default).\n"
            "CUDA devices now: %d\n",
            !floe_gpu_built()                     ? "not in this build (GPU=0)"
            : floe_gpu_device(0, dev, sizeof dev) ? dev
                                                  : "in this build, but no CUDA device found now",
            floe_gpu_count());
    fprintf(f, "\nExample: floed --port 7450 --data-dir /var/lib/floe --token-file /etc/floe/token\n"
               "Documentation: docs/OPERATIONS.md (settings, signals, persistence, systemd, containers,\n"
               "monitoring), docs/PROTOCOL.md, floed(8).\n");
}

int main(int argc, char **argv)
{
    floed_config cfg;
    char err[1200];
    floe_gpu_load_kernels_at_start(); /* before anything starts CUDA: no request pays a kernel's first load */
    /* Requests of 64 Ki keys (512 KiB) and batches of several MiB are
     * allocated and freed thousands of times a second.  By default glibc
     * maps blocks this large afresh each time and trims freed memory back
     * to the kernel, so every request paid a page fault per 4 KiB it
     * touched (most of its parse and copy time on the GPU host).  Keep
     * blocks up to 32 MiB in the heap and the heap's free memory mapped. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    switch (config_from_args(&cfg, argc, argv, err, sizeof err)) {
    case 0:
        break;
    case CONFIG_HELP:
        usage(stdout);
        return 0;
    case CONFIG_VERSION:
        printf("floed %s (protocol %d)\n", FLOE_VERSION, FLOE_PROTOCOL_VERSION);
        return 0;
    default:
        fprintf(stderr, "floed: %s\n", err);
        return 2;
    }
    log_set_level((log_level)log_parse_level(cfg.log_level));
    if (evthread_use_pthreads() != 0) {
        fprintf(stderr, "floed: libevent has no pthreads support\n");
        return 1;
    }
    return floed_run(&cfg, argc, argv);
}
