/*
 * config.c - floed's settings (see config.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"

typedef enum { T_STRING, T_UINT, T_SIZE } setting_type;

typedef struct setting {
    const char *name;
    setting_type type;
    size_t offset;
    size_t size; /* for strings: the buffer size */
    const char *def;
    uint64_t min, max; /* for numbers */
    const char *help;
} setting;

#define STR(f)  T_STRING, offsetof(floed_config, f), sizeof(((floed_config *)0)->f)
#define NUM(f)  T_UINT, offsetof(floed_config, f), 0
#define SIZE(f) T_SIZE, offsetof(floed_config, f), 0

static const setting SETTINGS[] = {
    {"bind", STR(bind), "127.0.0.1", 0, 0, "address to listen on (0.0.0.0 for every interface)"},
    {"port", NUM(port), "7450", 0, 65535, "TCP port (0: any free port, see port-file)"},
    {"io-threads", NUM(io_threads), "4", 1, 256, "threads that read requests and write responses"},
    {"engine-threads", NUM(engine_threads), "0", 0, 1024, "CPU engine threads (0: one per CPU)"},
    {"max-connections", NUM(max_connections), "1024", 1, 1000000, "connections beyond this get ERR_BUSY"},
    {"max-frame", SIZE(max_frame), "64M", 64, (uint64_t)1 << 31, "largest request frame accepted"},
    {"max-inflight", NUM(max_inflight), "64", 1, 1000000,
     "requests in flight per connection before floed stops reading it"},
    {"max-tables", NUM(max_tables), "64", 1, 100000, "tables beyond this get ERR_BUSY"},
    {"max-batch-keys", SIZE(max_batch_keys), "4M", 1, (uint64_t)1 << 31,
     "keys gathered into one engine batch (a larger request runs alone)"},
    {"token", STR(token), "", 0, 0, "shared secret clients must send in hello (empty: none)"},
    {"token-file", STR(token_file), "", 0, 0, "file holding the token (keeps it off the command line)"},
    {"log-level", STR(log_level), "info", 0, 0, "debug, info, warn or error"},
    {"data-dir", STR(data_dir), "", 0, 0,
     "directory for snapshots: tables load from it at start and save to it at shutdown (empty: off)"},
    {"port-file", STR(port_file), "", 0, 0, "write the listening port here once ready (for scripts and tests)"},
    {"backend", STR(backend), "auto", 0, 0, "default backend for new tables: cpu, gpu or auto"},
};
#define NSETTINGS (sizeof SETTINGS / sizeof SETTINGS[0])

size_t config_count(void)
{
    return NSETTINGS;
}

const char *config_name(size_t i)
{
    return i < NSETTINGS ? SETTINGS[i].name : NULL;
}

static const setting *find(const char *name)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (strcmp(SETTINGS[i].name, name) == 0)
            return &SETTINGS[i];
    return NULL;
}

/* "64M" -> 67108864; units K, M, G, T (powers of 1024), optional B/iB. */
static int parse_number(const char *text, int with_units, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)text[0]))
        return -1;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno)
        return -1;
    uint64_t mult = 1;
    if (with_units && *end) {
        switch (toupper((unsigned char)*end)) {
        case 'K':
            mult = 1ull << 10;
            break;
        case 'M':
            mult = 1ull << 20;
            break;
        case 'G':
            mult = 1ull << 30;
            break;
        case 'T':
            mult = 1ull << 40;
            break;
        default:
            return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'B' || *end == 'b')
            end++;
    }
    if (*end)
        return -1;
    if (v > UINT64_MAX / mult)
        return -1;
    *out = v * mult;
    return 0;
}

int config_set(floed_config *c, const char *key, const char *value, char *err, size_t errlen)
{
    const setting *s = find(key);
    if (!s) {
        snprintf(err, errlen, "unknown setting '%s' (floed --help lists them)", key);
        return -1;
    }
    char *field = (char *)c + s->offset;
    if (s->type == T_STRING) {
        if (strlen(value) >= s->size) {
            snprintf(err, errlen, "%s: value too long (at most %zu characters)", key, s->size - 1);
            return -1;
        }
        strcpy(field, value);
        return 0;
    }
    uint64_t v;
    if (parse_number(value, s->type == T_SIZE, &v) != 0) {
        snprintf(err, errlen, "%s: '%s' is not a %s", key, value,
                 s->type == T_SIZE ? "size (a number with an optional K, M, G or T)" : "whole number");
        return -1;
    }
    if (v < s->min || v > s->max) {
        snprintf(err, errlen, "%s: %llu is out of range %llu..%llu", key, (unsigned long long)v,
                 (unsigned long long)s->min, (unsigned long long)s->max);
        return -1;
    }
    memcpy(field, &v, sizeof v);
    return 0;
}

void config_defaults(floed_config *c)
{
    char err[256];
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NSETTINGS; i++)
        config_set(c, SETTINGS[i].name, SETTINGS[i].def, err, sizeof err);
}

int config_load_file(floed_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open config file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[2048];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *key = line;
        while (isspace((unsigned char)*key))
            key++;
        if (!*key)
            continue;
        char *p = key;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (*p)
            *p++ = '\0';
        while (isspace((unsigned char)*p))
            p++;
        char *value = p, *e = p + strlen(p);
        while (e > value && isspace((unsigned char)e[-1]))
            *--e = '\0';
        char msg[512];
        if (config_set(c, key, value, msg, sizeof msg) != 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}

int config_finish(floed_config *c, char *err, size_t errlen)
{
    if (log_parse_level(c->log_level) < 0) {
        snprintf(err, errlen, "log-level must be debug, info, warn or error, got '%s'", c->log_level);
        return -1;
    }
    if (strcmp(c->backend, "cpu") && strcmp(c->backend, "gpu") && strcmp(c->backend, "auto")) {
        snprintf(err, errlen, "backend must be cpu, gpu or auto, got '%s'", c->backend);
        return -1;
    }
    if (c->token_file[0]) {
        FILE *f = fopen(c->token_file, "r");
        if (!f) {
            snprintf(err, errlen, "cannot read token-file %s: %s", c->token_file, strerror(errno));
            return -1;
        }
        if (!fgets(c->token, sizeof c->token, f))
            c->token[0] = '\0';
        fclose(f);
        c->token[strcspn(c->token, "\r\n")] = '\0';
        if (!c->token[0]) {
            snprintf(err, errlen, "token-file %s is empty", c->token_file);
            return -1;
        }
    }
    return 0;
}

void config_print_help(FILE *f)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", SETTINGS[i].name);
        fprintf(f, "  %-20s %s (default: %s)\n", flag, SETTINGS[i].help,
                SETTINGS[i].def[0] ? SETTINGS[i].def : "empty");
    }
}
