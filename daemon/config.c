/*
 * config.c - floed's settings (see config.h).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "tablefile.h"

typedef enum { T_STRING, T_UINT, T_SIZE, T_BOOL } setting_type;

typedef struct setting {
    const char *name;
    setting_type type;
    size_t offset;
    size_t size; /* for strings: the buffer size */
    const char *def;
    uint64_t min, max; /* for numbers */
    const char *help;
    int live; /* SIGHUP applies it to a running floed; else it needs a restart */
} setting;

#define STR(f)  T_STRING, offsetof(floed_config, f), sizeof(((floed_config *)0)->f)
#define NUM(f)  T_UINT, offsetof(floed_config, f), 0
#define SIZE(f) T_SIZE, offsetof(floed_config, f), 0
#define BOOL(f) T_BOOL, offsetof(floed_config, f), 0

static const setting SETTINGS[] = {
    {"bind", STR(bind), "127.0.0.1", 0, 0, "address or host name to listen on (0.0.0.0 for every interface)", 0},
    {"port", NUM(port), "7450", 0, 65535, "TCP port (0: any free port, see port-file)", 0},
    {"io-threads", NUM(io_threads), "0", 0, 256,
     "threads that read requests and write responses (0: one per two CPUs, 4 to 16)", 0},
    {"engine-threads", NUM(engine_threads), "0", 0, 1024,
     "CPU engine threads, which also split the batches of tables in parts (0: one per CPU)", 0},
    {"max-connections", NUM(max_connections), "1024", 1, 1000000, "connections beyond this get ERR_BUSY", 1},
    {"max-frame", SIZE(max_frame), "64M", 64, (uint64_t)1 << 31, "largest request frame accepted", 1},
    {"max-inflight", NUM(max_inflight), "64", 1, 1000000,
     "requests in flight per connection before floed stops reading it", 1},
    {"max-tables", NUM(max_tables), "64", 1, 100000, "tables beyond this get ERR_BUSY", 1},
    {"max-batch-keys", SIZE(max_batch_keys), "4M", 1, (uint64_t)1 << 31,
     "keys gathered into one engine batch (a larger request runs alone)", 1},
    {"token", STR(token), "", 0, 0, "shared secret clients must send in hello (empty: none)", 1},
    {"token-file", STR(token_file), "", 0, 0,
     "file holding the token (keeps it off the command line; one line of at most 1024 bytes)", 1},
    {"protected-mode", BOOL(protected_mode), "yes", 0, 1,
     "refuse to listen on an address other than loopback unless clients must authenticate (a token, or "
     "tls-auth-clients yes)",
     1},
    {"timeout", NUM(timeout), "0", 0, 365u * 24 * 3600,
     "close a connection idle this many seconds (nothing in flight, nothing sent; 0: never)", 1},
    {"hello-timeout", NUM(hello_timeout), "10", 0, 3600,
     "close a connection that sends no request (with a token: no hello) within this many seconds (0: never)", 1},
    {"frame-timeout", NUM(frame_timeout), "10", 0, 3600,
     "close a connection whose request frame, once begun, is not whole within this many seconds (0: never)", 1},
    {"output-soft-limit", SIZE(output_soft_limit), "64M", 0, (uint64_t)1 << 40,
     "stop reading a client's requests while this many bytes of its responses wait unread (0: no limit)", 1},
    {"output-hard-limit", SIZE(output_hard_limit), "512M", 0, (uint64_t)1 << 40,
     "close a client's connection once this many bytes of its responses wait unread (0: no limit)", 1},
    {"maxmemory", SIZE(maxmemory), "0", 0, (uint64_t)1 << 50,
     "host memory floed may hold (resident, all of it: tables, open sets, buffers; 0: no limit): past it "
     "writes are refused with ERR_NO_MEMORY and a table does not grow past it",
     1},
    {"maxmemory-gpu", SIZE(maxmemory_gpu), "0", 0, (uint64_t)1 << 50,
     "device memory in use on any of floed's GPUs (every process's, as nvidia-smi counts it; 0: no limit) past "
     "which writes to GPU tables and creates of GPU tables are refused with ERR_NO_MEMORY; a GPU SET or MAP does "
     "not grow past it (the keys that needed the room answer FULL)",
     1},
    {"max-table-bytes", SIZE(max_table_bytes), "0", 0, (uint64_t)1 << 50,
     "refuse a create whose arrays would take more than this many bytes (0: no limit of its own; a create is "
     "refused anyway where the host, or the GPU, has not that much free)",
     1},
    {"output-total-limit", SIZE(output_total_limit), "1G", 0, (uint64_t)1 << 40,
     "all connections' unread responses together: past it a connection with responses unread is not read, and "
     "an answer to it is replaced by ERR_BUSY (0: no limit)",
     1},
    {"log-level", STR(log_level), "info", 0, 0, "debug, info, warn or error", 1},
    {"data-dir", STR(data_dir), "", 0, 0,
     "directory for snapshots: tables load from it at start and are saved to it by the save-every and "
     "save-after-changes rules, on `floe snapshot` and at shutdown (empty: tables live in memory only)",
     0},
    {"port-file", STR(port_file), "", 0, 0, "write the listening port here once ready (for scripts and tests)", 0},
    {"backend", STR(backend), "auto", 0, 0, "default backend for new tables: cpu, gpu or auto", 1},
    {"gpus", STR(gpus), "all", 0, 0,
     "CUDA devices of the GPU backend: all, or device ids (0,1); a new GPU table is placed whole on the one with the "
     "most free memory, or in parts over all of them when it fits on none (or as its create asks)",
     0},
    {"gpu-fault-exit", STR(gpu_fault_exit), "auto", 0, 0,
     "when a GPU fails (a sticky CUDA error: an illegal address, an uncorrectable ECC error, a lost device; its "
     "tables answer ERR_UNAVAILABLE until floed restarts), save the other tables and stop with exit code 3, so "
     "that a service manager starts floed again from the last snapshots: yes, no, or auto (yes when systemd "
     "started floed)",
     0},
    {"partitions", NUM(partitions), "0", 0, FLOE_PARTS_MAX,
     "parts of every new table, each a whole table on one device, keys spread by a fixed hash (0: each table's "
     "own: its create's parts, else placed as `gpus` says; 1 for CPU tables); a saved table in another number of "
     "parts than a nonzero setting is re-partitioned when loaded",
     0},
    {"pipelines", NUM(pipelines), "1", 1, FLOE_LANES_MAX,
     "pipelines of every table, 1 to 8: io thread i's connections feed pipeline i mod P (more than io-threads add "
     "nothing); a GPU table runs them side by side over its one device table, its kernels still one piece after "
     "another; a CPU table's share one engine queue",
     0},
    {"metrics-port", NUM(metrics_port), "0", 0, 65535, "HTTP port serving Prometheus text at /metrics (0: off)", 0},
    {"metrics-bind", STR(metrics_bind), "127.0.0.1", 0, 0, "address or host name of the metrics port", 0},
    {"save-every", NUM(save_every), "300", 0, 31u * 24 * 3600,
     "with data-dir: snapshot a changed (or never saved) table this many seconds after its last snapshot (0: never "
     "by time)",
     1},
    {"save-after-changes", SIZE(save_after_changes), "0", 0, UINT64_MAX,
     "with data-dir: snapshot a table once this many keys were inserted or erased since its last snapshot (0: "
     "never by count)",
     1},
    {"resp-port", STR(resp_port), "", 0, 0,
     "TCP port speaking the Redis protocol, RESP2 and RESP3, for Redis clients and redis-cli (docs/RESP.md; empty: "
     "off; 0: any free port): the same bind and token as the main port, and TLS with tls-only",
     0},
    {"resp-port-file", STR(resp_port_file), "", 0, 0, "write the RESP port here once ready", 0},
    {"tls-port", STR(tls_port), "", 0, 0, "TCP port for TLS connections (empty: no TLS; 0: any free port)", 0},
    {"tls-port-file", STR(tls_port_file), "", 0, 0, "write the TLS port here once ready", 0},
    {"tls-only", BOOL(tls_only), "no", 0, 1, "with tls-port: no plain port, TLS only", 0},
    {"tls-cert-file", STR(tls_cert_file), "", 0, 0, "the server's certificate chain (PEM)", 1},
    {"tls-key-file", STR(tls_key_file), "", 0, 0, "its private key (PEM)", 1},
    {"tls-ca-cert-file", STR(tls_ca_cert_file), "", 0, 0,
     "CA certificates (PEM) that client certificates must chain to", 1},
    {"tls-auth-clients", STR(tls_auth_clients), "no", 0, 0,
     "no, yes (a client certificate from tls-ca-cert-file is required) or optional (checked when given)", 1},
    {"tls-protocols", STR(tls_protocols), "TLSv1.3", 0, 0, "TLS versions allowed: TLSv1.3, or TLSv1.2,TLSv1.3", 1},
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

/* A whole number, or with_units a size ("64M": floe_size_parse); 0 or -1. */
static int parse_number(const char *text, int with_units, uint64_t *out)
{
    if (!with_units && text[strspn(text, "0123456789")] != '\0')
        return -1;
    return floe_size_parse(text, out) ? 0 : -1;
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
    if (s->type == T_BOOL) {
        if (!strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "on") || !strcmp(value, "1"))
            v = 1;
        else if (!strcmp(value, "no") || !strcmp(value, "false") || !strcmp(value, "off") || !strcmp(value, "0"))
            v = 0;
        else {
            snprintf(err, errlen, "%s: '%s' is not yes or no", key, value);
            return -1;
        }
        memcpy(field, &v, sizeof v);
        return 0;
    }
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
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (memchr(line, '\0', (size_t)len)) { /* it would cut the value short, unseen */
            snprintf(err, errlen, "%s:%d: a NUL byte in the line", path, lineno);
            rc = -1;
            break;
        }
        /* a comment starts with '#' at the start of the line or after a space: a '#' inside a
         * value (a token such as a#b) is part of it */
        for (char *h = strchr(line, '#'); h; h = strchr(h + 1, '#'))
            if (h == line || isspace((unsigned char)h[-1])) {
                *h = '\0';
                break;
            }
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
    free(line);
    fclose(f);
    return rc;
}

/* bind takes an address or a host name that resolves to one. */
static int check_bind(const char *name, const char *host, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "%s: '%s' is not an IPv4 or IPv6 address or a host name that resolves (%s)", name, host,
                 gai_strerror(rc));
        return -1;
    }
    freeaddrinfo(res);
    return 0;
}

/* Whether every address host resolves to is a loopback address. */
static int is_loopback(const char *host)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res, *a;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    int all = 1;
    for (a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            const struct sockaddr_in *v4 = (const struct sockaddr_in *)a->ai_addr;
            all &= (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            all &= IN6_IS_ADDR_LOOPBACK(v6) || (IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127);
        } else {
            all = 0;
        }
    }
    freeaddrinfo(res);
    return all;
}

/* Protected mode (as in Redis): a listener other hosts can reach must make
 * its clients authenticate: the plain port with a token, the TLS port with
 * a token or client certificates. */
static int check_protected(const floed_config *c, char *err, size_t errlen)
{
    if (!c->protected_mode || is_loopback(c->bind))
        return 0;
    const int plain_open = !c->tls_only && !c->token[0];
    const int tls_open = c->tls_port[0] && !c->token[0] && strcmp(c->tls_auth_clients, "yes") != 0;
    if (!plain_open && !tls_open)
        return 0;
    snprintf(err, errlen,
             "protected mode: floed would serve %s to every host that reaches it (bind %s) with no authentication. "
             "Set a token (token-file FILE, which clients give with --token-file or $FLOE_TOKEN)%s; or, if every "
             "host that can reach this address may use floed, set protected-mode no",
             plain_open ? "its plain port" : "its TLS port", c->bind,
             c->tls_port[0] ? ", or require client certificates (tls-auth-clients yes, with tls-only yes)" : "");
    return -1;
}

/* The TLS settings: a port, its files, and words from their lists. */
/* The RESP port: a port, and not one of the others. */
static int config_finish_resp(const floed_config *c, char *err, size_t errlen)
{
    uint64_t port;
    if (!c->resp_port[0])
        return 0;
    if (parse_number(c->resp_port, 0, &port) != 0 || port > 65535) {
        snprintf(err, errlen, "resp-port: '%s' is not a port (0..65535)", c->resp_port);
        return -1;
    }
    uint64_t tls = 0;
    if (port && ((!c->tls_only && port == c->port) ||
                 (c->tls_port[0] && parse_number(c->tls_port, 0, &tls) == 0 && tls == port))) {
        snprintf(err, errlen, "resp-port %llu is also floed's %s port: pick another", (unsigned long long)port,
                 port == tls ? "TLS" : "plain");
        return -1;
    }
    return 0;
}

static int config_finish_tls(floed_config *c, char *err, size_t errlen)
{
    if (strcmp(c->tls_auth_clients, "no") && strcmp(c->tls_auth_clients, "yes") &&
        strcmp(c->tls_auth_clients, "optional")) {
        snprintf(err, errlen, "tls-auth-clients must be no, yes or optional, got '%s'", c->tls_auth_clients);
        return -1;
    }
    if (config_tls_protocols(c->tls_protocols, NULL, NULL) != 0) {
        snprintf(err, errlen, "tls-protocols: '%s' is not a list of TLSv1.2 and TLSv1.3", c->tls_protocols);
        return -1;
    }
    if (!c->tls_port[0]) {
        if (c->tls_only) {
            snprintf(err, errlen, "tls-only needs a tls-port");
            return -1;
        }
        return 0;
    }
    uint64_t port;
    if (parse_number(c->tls_port, 0, &port) != 0 || port > 65535) {
        snprintf(err, errlen, "tls-port: '%s' is not a port (0..65535)", c->tls_port);
        return -1;
    }
    if (!c->tls_only && port && port == c->port) {
        snprintf(err, errlen, "tls-port %llu is also the plain port: pick another, or tls-only yes",
                 (unsigned long long)port);
        return -1;
    }
    if (!c->tls_cert_file[0] || !c->tls_key_file[0]) {
        snprintf(err, errlen, "tls-port needs tls-cert-file and tls-key-file");
        return -1;
    }
    const struct {
        const char *name, *path;
    } files[] = {{"tls-cert-file", c->tls_cert_file},
                 {"tls-key-file", c->tls_key_file},
                 {"tls-ca-cert-file", c->tls_ca_cert_file}};
    for (size_t i = 0; i < 3; i++) {
        if (files[i].path[0] && access(files[i].path, R_OK) != 0) {
            snprintf(err, errlen, "%s %s: %s", files[i].name, files[i].path, strerror(errno));
            return -1;
        }
    }
    if (strcmp(c->tls_auth_clients, "no") && !c->tls_ca_cert_file[0]) {
        snprintf(err, errlen, "tls-auth-clients %s needs tls-ca-cert-file (the CA of the client certificates)",
                 c->tls_auth_clients);
        return -1;
    }
    return 0;
}

int config_tls_protocols(const char *list, int *min, int *max)
{
    int lo = 0, hi = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *w = strtok_r(buf, " ,", &save); w; w = strtok_r(NULL, " ,", &save)) {
        int v;
        if (!strcasecmp(w, "TLSv1.2"))
            v = 12;
        else if (!strcasecmp(w, "TLSv1.3"))
            v = 13;
        else
            return -1;
        lo = lo && lo < v ? lo : v;
        hi = hi > v ? hi : v;
    }
    if (!lo)
        return -1;
    if (min)
        *min = lo;
    if (max)
        *max = hi;
    return 0;
}

int config_gpus(const char *gpus, int ids[FLOE_PARTS_MAX], char *err, size_t errlen)
{
    if (strcmp(gpus, "all") == 0)
        return 0;
    int n = 0;
    const char *p = gpus;
    for (;;) {
        char *end;
        errno = 0;
        long v = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
        if (v < 0 || v > 1023 || errno || (*end != ',' && *end != '\0')) {
            snprintf(err, errlen, "gpus must be all or a list of CUDA device ids such as 0,1; got '%s'", gpus);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (ids[i] == (int)v) {
                snprintf(err, errlen, "gpus names device %ld twice", v);
                return -1;
            }
        if (n == FLOE_PARTS_MAX) {
            snprintf(err, errlen, "gpus names more than %d devices", FLOE_PARTS_MAX);
            return -1;
        }
        ids[n++] = (int)v;
        if (*end == '\0')
            return n;
        p = end + 1;
    }
}

unsigned config_io_threads(const floed_config *c)
{
    if (c->io_threads)
        return (unsigned)c->io_threads;
    /* a busy GPU table wants several: E1 through floed on the 16-core H100 host doubled from 4 to 8-12 */
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const long half = cpus > 0 ? cpus / 2 : 4;
    return half < 4 ? 4 : half > 16 ? 16 : (unsigned)half;
}

bool config_gpu_fault_exit(const floed_config *c)
{
    if (strcmp(c->gpu_fault_exit, "auto") == 0)
        return getenv("INVOCATION_ID") || getenv("NOTIFY_SOCKET");
    return strcmp(c->gpu_fault_exit, "yes") == 0;
}

int config_finish(floed_config *c, char *err, size_t errlen)
{
    if (check_bind("bind", c->bind, err, errlen) != 0 ||
        (c->metrics_port && check_bind("metrics-bind", c->metrics_bind, err, errlen) != 0))
        return -1;
    struct stat sb;
    if (c->data_dir[0] && stat(c->data_dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "data-dir %s is not a directory", c->data_dir);
        return -1;
    }
    if (log_parse_level(c->log_level) < 0) {
        snprintf(err, errlen, "log-level must be debug, info, warn or error, got '%s'", c->log_level);
        return -1;
    }
    if (strcmp(c->backend, "cpu") && strcmp(c->backend, "gpu") && strcmp(c->backend, "auto")) {
        snprintf(err, errlen, "backend must be cpu, gpu or auto, got '%s'", c->backend);
        return -1;
    }
    int ids[FLOE_PARTS_MAX];
    if (config_gpus(c->gpus, ids, err, errlen) < 0)
        return -1;
    if (strcmp(c->gpu_fault_exit, "yes") && strcmp(c->gpu_fault_exit, "no") && strcmp(c->gpu_fault_exit, "auto")) {
        snprintf(err, errlen, "gpu-fault-exit must be yes, no or auto, got '%s'", c->gpu_fault_exit);
        return -1;
    }
    if (c->token_file[0]) {
        char why[1200];
        if (floe_token_file_read(c->token_file, c->token, why, sizeof why) != 0) {
            snprintf(err, errlen, "token-file %s", why);
            return -1;
        }
    }
    if (c->output_hard_limit && c->output_soft_limit > c->output_hard_limit) {
        snprintf(err, errlen, "output-soft-limit (%llu) is above output-hard-limit (%llu)",
                 (unsigned long long)c->output_soft_limit, (unsigned long long)c->output_hard_limit);
        return -1;
    }
    if (config_finish_tls(c, err, errlen) != 0 || config_finish_resp(c, err, errlen) != 0)
        return -1;
    return check_protected(c, err, errlen);
}

int config_from_args(floed_config *c, int argc, char **argv, char *err, size_t errlen)
{
    /* One long option per setting, plus -c/--config. */
    struct option opts[sizeof SETTINGS / sizeof SETTINGS[0] + 4];
    size_t k = 0;
    for (; k < NSETTINGS; k++)
        opts[k] = (struct option){SETTINGS[k].name, required_argument, NULL, (int)k + 256};
    opts[k++] = (struct option){"config", required_argument, NULL, 'c'};
    opts[k++] = (struct option){"help", no_argument, NULL, 'h'};
    opts[k++] = (struct option){"version", no_argument, NULL, 'V'};
    opts[k] = (struct option){NULL, 0, NULL, 0};
    config_defaults(c);
    /* The file first, wherever -c stands, so that flags override it. */
    for (int pass = 0; pass < 2; pass++) {
        optind = 0; /* GNU: start afresh (SIGHUP parses the same argv again) */
        opterr = 0;
        int ch;
        while ((ch = getopt_long(argc, argv, ":c:hV", opts, NULL)) != -1) {
            if (ch == 'h')
                return CONFIG_HELP;
            if (ch == 'V')
                return CONFIG_VERSION;
            if (ch == '?' || ch == ':') {
                const char *arg = argv[optind - 1];
                snprintf(err, errlen,
                         ch == ':' ? "%s needs a value (floed --help)" : "unknown option '%s' (floed --help)", arg);
                return -1;
            }
            if (ch == 'c') {
                if (pass == 0) {
                    snprintf(c->config_file, sizeof c->config_file, "%s", optarg);
                    if (strlen(optarg) >= sizeof c->config_file) {
                        snprintf(err, errlen, "config: path too long");
                        return -1;
                    }
                    if (config_load_file(c, optarg, err, errlen) != 0)
                        return -1;
                }
                continue;
            }
            if (pass == 1 && config_set(c, SETTINGS[ch - 256].name, optarg, err, errlen) != 0)
                return -1;
        }
        if (optind < argc) {
            snprintf(err, errlen, "unexpected argument '%s' (floed --help)", argv[optind]);
            return -1;
        }
    }
    return config_finish(c, err, errlen);
}

void config_changes(const floed_config *a, const floed_config *b, void (*fn)(const char *name, int live, void *arg),
                    void *arg)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &SETTINGS[i];
        const char *fa = (const char *)a + s->offset, *fb = (const char *)b + s->offset;
        int differ = s->type == T_STRING ? strcmp(fa, fb) != 0 : memcmp(fa, fb, sizeof(uint64_t)) != 0;
        if (differ)
            fn(s->name, s->live, arg);
    }
}

void config_apply_live(floed_config *dst, const floed_config *src)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &SETTINGS[i];
        if (s->live)
            memcpy((char *)dst + s->offset, (const char *)src + s->offset, s->type == T_STRING ? s->size : 8);
    }
    memcpy(dst->token, src->token, sizeof dst->token); /* token-file's token too */
}

void config_print_help(FILE *f)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", SETTINGS[i].name);
        fprintf(f, "  %-20s %s (default: %s%s)\n", flag, SETTINGS[i].help,
                SETTINGS[i].def[0] ? SETTINGS[i].def : "empty", SETTINGS[i].live ? "; SIGHUP applies it" : "");
    }
}

int config_index(const char *name)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (!strcmp(SETTINGS[i].name, name))
            return (int)i;
    return -1;
}

bool config_is_live(size_t i)
{
    return i < NSETTINGS && SETTINGS[i].live;
}

void config_value(const floed_config *c, size_t i, char *out, size_t len)
{
    const setting *s = &SETTINGS[i];
    const char *field = (const char *)c + s->offset;
    uint64_t v;
    memcpy(&v, field, sizeof v);
    if (s->type == T_STRING)
        snprintf(out, len, "%s", field);
    else if (s->type == T_BOOL)
        snprintf(out, len, "%s", v ? "yes" : "no");
    else
        snprintf(out, len, "%llu", (unsigned long long)v);
}

/* Whether setting i is the same in a and b. */
static bool same_value(const floed_config *a, const floed_config *b, size_t i)
{
    const setting *s = &SETTINGS[i];
    const char *fa = (const char *)a + s->offset, *fb = (const char *)b + s->offset;
    return s->type == T_STRING ? strcmp(fa, fb) == 0 : memcmp(fa, fb, sizeof(uint64_t)) == 0;
}

/* Line `line` of a config file as key (the setting's index, -1 for none),
 * its value, and where a comment after it starts (NULL: none).  Writes into
 * the line. */
static int split_line(char *line, char **value, char **comment)
{
    *value = *comment = NULL;
    for (char *h = strchr(line, '#'); h; h = strchr(h + 1, '#'))
        if (h == line || isspace((unsigned char)h[-1])) {
            *comment = h;
            break;
        }
    char *key = line;
    while (isspace((unsigned char)*key))
        key++;
    char *end = *comment ? *comment : line + strlen(line);
    char *p = key;
    while (p < end && !isspace((unsigned char)*p))
        p++;
    if (p == key)
        return -1;
    char *v = p;
    while (v < end && isspace((unsigned char)*v))
        v++;
    char *e = end;
    while (e > v && isspace((unsigned char)e[-1]))
        e--;
    const char keep = *p;
    *p = '\0';
    const int i = config_index(key);
    *p = keep;
    if (i >= 0) {
        *e = '\0'; /* the comment, if any, is past it */
        *value = v;
    }
    return i;
}

int config_rewrite(const floed_config *c, const char *path, char *err, size_t errlen)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        snprintf(err, errlen, "cannot open config file %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    char *out = NULL, *line = NULL;
    size_t out_len = 0, cap = 0;
    FILE *o = open_memstream(&out, &out_len);
    if (!o || fstat(fileno(in), &sb) != 0) {
        snprintf(err, errlen, "rewriting %s: %s", path, strerror(errno));
        if (o)
            fclose(o);
        free(out);
        fclose(in);
        return -1;
    }
    floed_config def;
    config_defaults(&def);
    bool seen[NSETTINGS] = {false};
    ssize_t len;
    while ((len = getline(&line, &cap, in)) >= 0) {
        const bool nl = len > 0 && line[len - 1] == '\n';
        if (nl)
            line[len - 1] = '\0';
        char *copy = strdup(line), *value, *comment;
        const int i = copy ? split_line(copy, &value, &comment) : -1;
        floed_config was = *c;
        char msg[256];
        if (i < 0 || config_set(&was, SETTINGS[i].name, value, msg, sizeof msg) != 0 ||
            same_value(&was, c, (size_t)i) || (i == config_index("token") && c->token_file[0])) {
            fputs(line, o); /* not a setting, or one as it is (the token of a token-file stays unwritten) */
        } else {
            char v[1100];
            config_value(c, (size_t)i, v, sizeof v);
            fprintf(o, "%s %s%s%s", SETTINGS[i].name, v, comment ? " " : "", comment ? comment : "");
        }
        if (nl)
            fputc('\n', o);
        if (i >= 0)
            seen[i] = true;
        free(copy);
    }
    free(line);
    fclose(in);
    bool header = false;
    for (size_t i = 0; i < NSETTINGS; i++) {
        if (seen[i] || same_value(c, &def, i) || SETTINGS[i].offset == offsetof(floed_config, token))
            continue; /* a token is written only where a line named it: a rewrite puts no secret in a file */
        if (!header)
            fputs("\n# Written by CONFIG REWRITE: settings in force that the lines above did not name\n", o);
        header = true;
        char v[1100];
        config_value(c, i, v, sizeof v);
        fprintf(o, "%s %s\n", SETTINGS[i].name, v);
    }
    if (fclose(o) != 0) {
        free(out);
        snprintf(err, errlen, "rewriting %s: out of memory", path);
        return -1;
    }
    char tmp[1100];
    int fd = floe_file_temporary(path, tmp, sizeof tmp);
    int rc = fd < 0 ? -1 : 0;
    if (rc == 0 &&
        (fchmod(fd, sb.st_mode & 07777) != 0 || write(fd, out, out_len) != (ssize_t)out_len || fsync(fd) != 0))
        rc = -1;
    if (fd >= 0 && close(fd) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        snprintf(err, errlen, "rewriting %s: %s", path, strerror(errno));
        if (fd >= 0)
            unlink(tmp);
    }
    free(out);
    return rc;
}
