/*
 * main.c - floed's command line: settings from defaults, an optional config
 * file and flags (flags win), then server_run.
 */
#include <event2/thread.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_gpu.h"
#include "config.h"
#include "log.h"
#include "server.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: floed [--config FILE] [--SETTING VALUE ...]\n"
               "\n"
               "floed serves exact sets and dictionaries (floe tables) over TCP: clients send\n"
               "batches of keys in protobuf frames (docs/PROTOCOL.md) and get one answer per key.\n"
               "It runs in the foreground and logs to stderr; SIGTERM or SIGINT stops it\n"
               "gracefully (queued requests get ERR_SHUTTING_DOWN, tables are saved when\n"
               "data-dir is set).\n"
               "\n"
               "  -c, --config FILE    read settings from FILE (`key value` lines, see config/floed.conf)\n"
               "  -h, --help           this text\n"
               "  -V, --version        print the version\n"
               "\n"
               "Settings (each also a `key value` line in the config file; flags override it):\n");
    config_print_help(f);
    char dev[96];
    fprintf(f, "\nBackends (the `backend` setting is the default for new tables; a create_table request may\n"
               "name its own; stats and `floe stats` say which one a table runs on):\n"
               "  cpu   the CPU engine on engine-threads threads, always present\n"
               "  gpu   the GPU engine (device memory, pinned staging, overlapped streams): %s\n"
               "  auto  gpu where a device is present, else cpu (the default)\n",
            !floe_gpu_built()              ? "not in this build (GPU=0)"
            : floe_gpu_device(dev, sizeof dev) ? dev
                                           : "in this build, but no CUDA device found now");
    fprintf(f, "\nExample: floed --port 7450 --data-dir /var/lib/floe --token-file /etc/floe/token\n");
}

int main(int argc, char **argv)
{
    floed_config cfg;
    char err[1200];
    /* Requests of 64 Ki keys (512 KiB) and batches of several MiB are
     * allocated and freed thousands of times a second.  By default glibc
     * maps blocks this large afresh each time and trims freed memory back
     * to the kernel, so every request paid a page fault per 4 KiB it
     * touched (most of its parse and copy time on the GPU host).  Keep
     * blocks up to 32 MiB in the heap and the heap's free memory mapped. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    config_defaults(&cfg);
    /* The config file first, so that flags override it wherever they stand. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "-V") == 0 || strcmp(argv[i], "--version") == 0) {
            printf("floed %s (protocol %d)\n", FLOED_VERSION, FLOE_PROTOCOL_VERSION);
            return 0;
        }
        const char *file = NULL;
        if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) && i + 1 < argc)
            file = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
        if (file && config_load_file(&cfg, file, err, sizeof err) != 0) {
            fprintf(stderr, "floed: %s\n", err);
            return 2;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-c") == 0 || strcmp(arg, "--config") == 0) {
            i++;
            continue;
        }
        if (strncmp(arg, "--config=", 9) == 0)
            continue;
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, "floed: unexpected argument '%s' (floed --help)\n", arg);
            return 2;
        }
        char key[64];
        const char *value;
        const char *eq = strchr(arg, '=');
        if (eq) {
            snprintf(key, sizeof key, "%.*s", (int)(eq - arg - 2), arg + 2);
            value = eq + 1;
        } else {
            snprintf(key, sizeof key, "%s", arg + 2);
            if (i + 1 >= argc) {
                fprintf(stderr, "floed: --%s needs a value (floed --help)\n", key);
                return 2;
            }
            value = argv[++i];
        }
        if (config_set(&cfg, key, value, err, sizeof err) != 0) {
            fprintf(stderr, "floed: %s\n", err);
            return 2;
        }
    }
    if (config_finish(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "floed: %s\n", err);
        return 2;
    }
    log_set_level((log_level)log_parse_level(cfg.log_level));
    if (evthread_use_pthreads() != 0) {
        fprintf(stderr, "floed: libevent has no pthreads support\n");
        return 1;
    }
    return server_run(&cfg);
}
