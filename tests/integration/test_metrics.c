/*
 * test_metrics.c - server-wide counters: the info operation against a known
 * mix of requests, /metrics parsed by an independent parser
 * (tests/integration/check_metrics.py over python3-prometheus-client) and
 * by Debian's own Prometheus (check_prometheus.py: promtool's lint, a
 * server that scrapes floed and answers a query), 404
 * for other paths, refused connections, and journald's log prefix.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Mirrors daemon/metrics.c's operation names. */
enum {
    OP_UNKNOWN,
    OP_HELLO,
    OP_PING,
    OP_CREATE,
    OP_DROP,
    OP_LIST,
    OP_INSERT,
    OP_FIND,
    OP_ERASE,
    OP_STATS,
    OP_SCAN,
    OP_GET,
    OP_SNAPSHOT,
    OP_INFO,
    OP_RANGE,
    OP_SUCC,
    OP_PRED,
    OP_MIN,
    OP_MAX,
    OP_ADD,
    OP_CLAIM,
    OP_TRACE,
    OP_SHUTDOWN,
    OP_CONFIG,
    OP_FREEZE,
    NOPS
};
static const char *const OP_NAMES[NOPS] = {
    "unknown", "hello", "ping",      "create_table", "drop_table", "list_tables", "insert",    "find",        "erase",
    "stats",   "scan",  "get_by_id", "snapshot",     "info",       "range",       "successor", "predecessor", "min",
    "max",     "add",   "claim",     "trace",        "shutdown",   "config",      "freeze"};
#define NSTATUS 11

/* What the test sent and got back, to compare with the server's counters. */
typedef struct tally {
    uint64_t requests[NOPS], keys[NOPS], errors[NOPS][NSTATUS];
    uint64_t bytes_in, bytes_out;
} tally;

/* Sends req (of operation op, with nkeys keys), reads its response, counts
 * both, and checks the status. */
static Floe__V1__Response *call(int fd, tally *t, int op, uint64_t nkeys, Floe__V1__Request *req, int want)
{
    t->requests[op]++;
    t->bytes_in += 4 + floe__v1__request__get_packed_size(req);
    raw_send_request(fd, req);
    Floe__V1__Response *r = raw_read_response(fd, 10000);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg((int)r->status == want, "%s: status %d, want %d (%s)", OP_NAMES[op], r->status, want, r->error);
    t->bytes_out += 4 + floe__v1__response__get_packed_size(r);
    if (r->status != FLOE__V1__STATUS__OK)
        t->errors[op][r->status]++;
    else
        t->keys[op] += nkeys;
    return r;
}

static void call_free(int fd, tally *t, int op, uint64_t nkeys, Floe__V1__Request *req, int want)
{
    floe__v1__response__free_unpacked(call(fd, t, op, nkeys, req, want), NULL);
}

static void key_op(int fd, tally *t, int op, const char *table, const uint64_t *keys, size_t bytes, int want)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    Floe__V1__Find fi = FLOE__V1__FIND__INIT;
    Floe__V1__Erase er = FLOE__V1__ERASE__INIT;
    ProtobufCBinaryData kb = {bytes, (uint8_t *)keys};
    req.id = 100 + t->requests[op];
    if (op == OP_INSERT) {
        in.table = (char *)table;
        in.keys = kb;
        req.op_case = FLOE__V1__REQUEST__OP_INSERT;
        req.insert = &in;
    } else if (op == OP_FIND) {
        fi.table = (char *)table;
        fi.keys = kb;
        req.op_case = FLOE__V1__REQUEST__OP_FIND;
        req.find = &fi;
    } else {
        er.table = (char *)table;
        er.keys = kb;
        req.op_case = FLOE__V1__REQUEST__OP_ERASE;
        req.erase = &er;
    }
    call_free(fd, t, op, bytes / 8, &req, want);
}

static void create(int fd, tally *t, const char *name, int want)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__CreateTable ct = FLOE__V1__CREATE_TABLE__INIT;
    Floe__V1__TableSpec spec = FLOE__V1__TABLE_SPEC__INIT;
    spec.name = (char *)name;
    spec.kind = FLOE__V1__TABLE_KIND__SET;
    spec.key_bits = 20;
    spec.capacity = 1000;
    ct.spec = &spec;
    req.id = 1;
    req.op_case = FLOE__V1__REQUEST__OP_CREATE_TABLE;
    req.create_table = &ct;
    call_free(fd, t, OP_CREATE, 0, &req, want);
}

/* A mix of every operation, good and bad, on one raw connection.  Leaves
 * tables a (32 keys) and b (empty). */
static void send_mix(int fd, tally *t)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Hello hello = FLOE__V1__HELLO__INIT;
    hello.version = 1;
    req.op_case = FLOE__V1__REQUEST__OP_HELLO;
    req.hello = &hello;
    call_free(fd, t, OP_HELLO, 0, &req, FLOE__V1__STATUS__OK);
    Floe__V1__Ping ping = FLOE__V1__PING__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_PING;
    req.ping = &ping;
    call_free(fd, t, OP_PING, 0, &req, FLOE__V1__STATUS__OK);
    call_free(fd, t, OP_PING, 0, &req, FLOE__V1__STATUS__OK);

    create(fd, t, "a", FLOE__V1__STATUS__OK);
    create(fd, t, "b", FLOE__V1__STATUS__OK);
    create(fd, t, "c", FLOE__V1__STATUS__OK);
    create(fd, t, "a", FLOE__V1__STATUS__ERR_EXISTS);

    enum { N = 5, K = 7, M = 4 };
    uint64_t keys[N * K];
    for (int i = 0; i < N * K; i++)
        keys[i] = (uint64_t)i + 1;
    for (int i = 0; i < N; i++)
        key_op(fd, t, OP_INSERT, "a", keys + i * K, K * 8, FLOE__V1__STATUS__OK);
    for (int i = 0; i < M; i++)
        key_op(fd, t, OP_FIND, "a", keys + i * K, K * 8, FLOE__V1__STATUS__OK);
    key_op(fd, t, OP_ERASE, "a", keys, 3 * 8, FLOE__V1__STATUS__OK);
    key_op(fd, t, OP_INSERT, "nosuch", keys, 8, FLOE__V1__STATUS__ERR_NO_TABLE);
    key_op(fd, t, OP_INSERT, "a", keys, 12, FLOE__V1__STATUS__ERR_INVALID); /* not a multiple of 8 */
    uint64_t wide = 1u << 20;
    key_op(fd, t, OP_INSERT, "a", &wide, 8, FLOE__V1__STATUS__ERR_INVALID); /* above key_bits */
    key_op(fd, t, OP_FIND, "nosuch", keys, 8, FLOE__V1__STATUS__ERR_NO_TABLE);

    Floe__V1__Stats st = FLOE__V1__STATS__INIT;
    st.table = "a";
    req.op_case = FLOE__V1__REQUEST__OP_STATS;
    req.stats = &st;
    call_free(fd, t, OP_STATS, 0, &req, FLOE__V1__STATUS__OK);
    Floe__V1__ListTables lt = FLOE__V1__LIST_TABLES__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_LIST_TABLES;
    req.list_tables = &lt;
    call_free(fd, t, OP_LIST, 0, &req, FLOE__V1__STATUS__OK);
    Floe__V1__Scan sc = FLOE__V1__SCAN__INIT;
    sc.table = "a";
    req.op_case = FLOE__V1__REQUEST__OP_SCAN;
    req.scan = &sc;
    call_free(fd, t, OP_SCAN, 0, &req, FLOE__V1__STATUS__OK);
    Floe__V1__GetById gb = FLOE__V1__GET_BY_ID__INIT;
    gb.table = "a";
    req.op_case = FLOE__V1__REQUEST__OP_GET_BY_ID;
    req.get_by_id = &gb;
    call_free(fd, t, OP_GET, 0, &req, FLOE__V1__STATUS__ERR_UNSUPPORTED); /* a SET has no ids to get */
    Floe__V1__DropTable dt = FLOE__V1__DROP_TABLE__INIT;
    dt.table = "c";
    req.op_case = FLOE__V1__REQUEST__OP_DROP_TABLE;
    req.drop_table = &dt;
    call_free(fd, t, OP_DROP, 0, &req, FLOE__V1__STATUS__OK);
    call_free(fd, t, OP_DROP, 0, &req, FLOE__V1__STATUS__ERR_NO_TABLE);
    Floe__V1__Snapshot sn = FLOE__V1__SNAPSHOT__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_SNAPSHOT;
    req.snapshot = &sn;
    call_free(fd, t, OP_SNAPSHOT, 0, &req, FLOE__V1__STATUS__ERR_UNSUPPORTED); /* no data-dir */
    Floe__V1__Range rg = FLOE__V1__RANGE__INIT;
    rg.table = "a";
    req.op_case = FLOE__V1__REQUEST__OP_RANGE;
    req.range = &rg;
    call_free(fd, t, OP_RANGE, 0, &req, FLOE__V1__STATUS__ERR_UNSUPPORTED); /* a SET has no order */
    Floe__V1__Successor su = FLOE__V1__SUCCESSOR__INIT;
    su.table = "a";
    su.keys = (ProtobufCBinaryData){16, (uint8_t *)keys};
    req.op_case = FLOE__V1__REQUEST__OP_SUCCESSOR;
    req.successor = &su;
    call_free(fd, t, OP_SUCC, 0, &req, FLOE__V1__STATUS__ERR_UNSUPPORTED);
    Floe__V1__Predecessor pr = FLOE__V1__PREDECESSOR__INIT;
    pr.table = "nosuch";
    req.op_case = FLOE__V1__REQUEST__OP_PREDECESSOR;
    req.predecessor = &pr;
    call_free(fd, t, OP_PRED, 0, &req, FLOE__V1__STATUS__ERR_NO_TABLE);
    Floe__V1__Min mn = FLOE__V1__MIN__INIT;
    mn.table = "a";
    req.op_case = FLOE__V1__REQUEST__OP_MIN;
    req.min = &mn;
    call_free(fd, t, OP_MIN, 0, &req, FLOE__V1__STATUS__ERR_UNSUPPORTED);
    Floe__V1__Max mx = FLOE__V1__MAX__INIT;
    mx.table = "b";
    req.op_case = FLOE__V1__REQUEST__OP_MAX;
    req.max = &mx;
    call_free(fd, t, OP_MAX, 0, &req, FLOE__V1__STATUS__ERR_UNSUPPORTED);

    /* no operation, and bytes that are not a Request: both "unknown" */
    Floe__V1__Request empty = FLOE__V1__REQUEST__INIT;
    empty.id = 9;
    call_free(fd, t, OP_UNKNOWN, 0, &empty, FLOE__V1__STATUS__ERR_INVALID);
    unsigned char junk[] = {0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff};
    raw_send(fd, junk, sizeof junk);
    t->requests[OP_UNKNOWN]++;
    t->bytes_in += sizeof junk;
    Floe__V1__Response *r = raw_read_response(fd, 10000);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->status, FLOE__V1__STATUS__ERR_INVALID);
    t->errors[OP_UNKNOWN][r->status]++;
    t->bytes_out += 4 + floe__v1__response__get_packed_size(r);
    floe__v1__response__free_unpacked(r, NULL);
}

static Floe__V1__Response *info(int fd, tally *t)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Info in = FLOE__V1__INFO__INIT;
    req.id = 4242;
    req.op_case = FLOE__V1__REQUEST__OP_INFO;
    req.info = &in;
    /* the info frame is counted before the reply is built; the reply is not */
    t->requests[OP_INFO]++;
    t->bytes_in += 4 + floe__v1__request__get_packed_size(&req);
    raw_send_request(fd, &req);
    Floe__V1__Response *r = raw_read_response(fd, 10000);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->id, 4242);
    ck_assert_int_eq(r->status, FLOE__V1__STATUS__OK);
    ck_assert_int_eq(r->body_case, FLOE__V1__RESPONSE__BODY_INFO);
    return r;
}

static const Floe__V1__TableInfo *table_in(const Floe__V1__InfoReply *ir, const char *name)
{
    for (size_t i = 0; i < ir->n_tables; i++)
        if (strcmp(ir->tables[i]->name, name) == 0)
            return ir->tables[i];
    return NULL;
}

static void check_info(const Floe__V1__InfoReply *ir, const tally *t, const daemon_proc *d)
{
    ck_assert_str_eq(ir->version, "floed 0.1.0");
    ck_assert_msg(strstr(ir->build, "built") && strstr(ir->build, "GPU"), "build: %s", ir->build);
    ck_assert_uint_eq(ir->pid, (uint64_t)d->pid);
    ck_assert_uint_lt(ir->uptime_seconds, 600);
    ck_assert_str_eq(ir->backend, expected_backend());
    ck_assert_msg(ir->gpu[0], "gpu says nothing");
    if (strcmp(expected_backend(), "gpu") == 0)
        ck_assert_msg(ir->gpu_memory_total > 0 && ir->gpu_memory_used + ir->gpu_memory_free == ir->gpu_memory_total,
                      "gpu memory %llu used + %llu free != %llu", (unsigned long long)ir->gpu_memory_used,
                      (unsigned long long)ir->gpu_memory_free, (unsigned long long)ir->gpu_memory_total);
    ck_assert_uint_eq(ir->connections, 1);
    ck_assert_uint_eq(ir->connections_total, 1);
    ck_assert_uint_eq(ir->connections_refused, 0);
    ck_assert_uint_eq(ir->n_ops, NOPS);
    uint64_t by_status[NSTATUS] = {0};
    for (size_t i = 0; i < ir->n_ops; i++) {
        const Floe__V1__OpCounters *o = ir->ops[i];
        int op = -1;
        for (int k = 0; k < NOPS; k++)
            if (strcmp(o->op, OP_NAMES[k]) == 0)
                op = k;
        ck_assert_msg(op >= 0, "unknown op %s", o->op);
        uint64_t errors = 0;
        for (int s = 0; s < NSTATUS; s++) {
            errors += t->errors[op][s];
            by_status[s] += t->errors[op][s];
        }
        ck_assert_msg(o->requests == t->requests[op] && o->keys == t->keys[op] && o->errors == errors,
                      "op %s: requests %llu keys %llu errors %llu, want %llu %llu %llu", o->op,
                      (unsigned long long)o->requests, (unsigned long long)o->keys, (unsigned long long)o->errors,
                      (unsigned long long)t->requests[op], (unsigned long long)t->keys[op], (unsigned long long)errors);
    }
    size_t nstatus = 0;
    for (int s = 1; s < NSTATUS; s++)
        nstatus += by_status[s] != 0;
    ck_assert_uint_eq(ir->n_errors, nstatus);
    for (size_t i = 0; i < ir->n_errors; i++) {
        const ProtobufCEnumValue *v =
            protobuf_c_enum_descriptor_get_value_by_name(&floe__v1__status__descriptor, ir->errors[i]->status);
        ck_assert_msg(v, "status %s", ir->errors[i]->status);
        ck_assert_msg(ir->errors[i]->count == by_status[v->value], "%s: %llu, want %llu", ir->errors[i]->status,
                      (unsigned long long)ir->errors[i]->count, (unsigned long long)by_status[v->value]);
    }
    ck_assert_uint_eq(ir->bytes_in, t->bytes_in);
    ck_assert_uint_eq(ir->bytes_out, t->bytes_out);
    ck_assert_uint_gt(ir->rss_bytes, 1 << 20);
    ck_assert_int_eq(ir->last_snapshot_time, 0);
    ck_assert_str_eq(ir->last_snapshot_status, "");
    ck_assert_str_eq(ir->data_dir, "");
    ck_assert_uint_eq(ir->n_tables, 2);
    const Floe__V1__TableInfo *a = table_in(ir, "a"), *b = table_in(ir, "b");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(a->keys, 32);
    ck_assert_int_eq(a->kind, FLOE__V1__TABLE_KIND__SET);
    ck_assert_str_eq(a->backend, expected_backend());
    ck_assert_msg(a->fill > 0 && a->fill < 1, "fill %g", a->fill);
    ck_assert_uint_gt(a->memory_bytes, 0);
    ck_assert_uint_eq(b->keys, 0);
}

/* Runs checker `script` (tests/integration/) on d's /metrics with args;
 * returns its exit code (its output goes to stderr on failure). */
static int run_checker(const daemon_proc *d, const char *script, unsigned mport, const char *const *args)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/metrics", mport);
    const char *argv[256];
    int n = 0;
    argv[n++] = url;
    for (int i = 0; args[i] && n < 254; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return run_python(d, script, argv);
}

/* The independent parser's checks (python3-prometheus-client). */
static int check_metrics(const daemon_proc *d, unsigned mport, const char *const *args)
{
    const char *script =
        getenv("FLOE_METRICS_CHECK") ? getenv("FLOE_METRICS_CHECK") : "tests/integration/check_metrics.py";
    return run_checker(d, script, mport, args);
}

/* Appends "fmt" to the argument list (args_free frees them). */
static void arg(const char **args, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void arg(const char **args, int *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s;
    ck_assert_int_ge(vasprintf(&s, fmt, ap), 0);
    va_end(ap);
    args[(*n)++] = s;
    args[*n] = NULL;
}

static void args_free(const char **args)
{
    for (int i = 0; args[i]; i++)
        free((char *)args[i]);
}

START_TEST(info_and_metrics_count_what_was_sent)
{
    unsigned mport = free_port();
    char ps[16];
    snprintf(ps, sizeof ps, "%u", mport);
    const char *flags[] = {"--metrics-port", ps, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    int fd = raw_connect(d.port);
    tally t;
    memset(&t, 0, sizeof t);
    send_mix(fd, &t);

    Floe__V1__Response *r = info(fd, &t);
    check_info(r->info, &t, &d);
    char want_addr[64];
    snprintf(want_addr, sizeof want_addr, "127.0.0.1:%u", mport);
    ck_assert_str_eq(r->info->metrics_address, want_addr);
    t.bytes_out += 4 + floe__v1__response__get_packed_size(r); /* now written */
    floe__v1__response__free_unpacked(r, NULL);

    const char *args[200];
    int n = 0;
    args[0] = NULL;
    arg(args, &n, "--quiescent");
    arg(args, &n, "--exact");
    arg(args, &n, "floe_errors_total");
    for (int op = 0; op < NOPS; op++) {
        arg(args, &n, "floe_requests_total{op=%s}=%llu", OP_NAMES[op], (unsigned long long)t.requests[op]);
        for (int s = 1; s < NSTATUS; s++)
            if (t.errors[op][s])
                arg(args, &n, "floe_errors_total{op=%s,status=%s}=%llu", OP_NAMES[op],
                    protobuf_c_enum_descriptor_get_value(&floe__v1__status__descriptor, s)->name,
                    (unsigned long long)t.errors[op][s]);
        uint64_t answered = t.requests[op];
        if (answered)
            arg(args, &n, "floe_request_duration_seconds_count{op=%s}=%llu", OP_NAMES[op],
                (unsigned long long)answered);
    }
    arg(args, &n, "floe_keys_total{op=insert}=%llu", (unsigned long long)t.keys[OP_INSERT]);
    arg(args, &n, "floe_keys_total{op=find}=%llu", (unsigned long long)t.keys[OP_FIND]);
    arg(args, &n, "floe_keys_total{op=erase}=%llu", (unsigned long long)t.keys[OP_ERASE]);
    ck_assert_uint_eq(t.keys[OP_INSERT], 35);
    ck_assert_uint_eq(t.keys[OP_FIND], 28);
    arg(args, &n, "floe_bytes_received_total=%llu", (unsigned long long)t.bytes_in);
    arg(args, &n, "floe_bytes_sent_total=%llu", (unsigned long long)t.bytes_out);
    arg(args, &n, "floe_connections_open=1");
    arg(args, &n, "floe_connections_total=1");
    arg(args, &n, "floe_connections_refused_total=0");
    arg(args, &n, "floe_responses_unread_bytes=0"); /* the one client has read every answer */
    arg(args, &n, "floe_tables=2");
    arg(args, &n, "floe_table_keys{table=a}=32");
    arg(args, &n, "floe_table_keys{table=b}=0");
    arg(args, &n, "floe_table_memory_bytes{table=a}>=1");
    arg(args, &n, "floe_table_fill{table=a}>=0.000001");
    arg(args, &n, "floe_table_info{table=a,kind=SET,backend=%s}=1", expected_backend());
    arg(args, &n, "floe_process_resident_memory_bytes>=1000000");
    arg(args, &n, "floe_uptime_seconds>=0");
    arg(args, &n, "floe_last_snapshot_timestamp_seconds=0");
    arg(args, &n, "floe_last_snapshot_success=1");
    int rc = check_metrics(&d, mport, args);
    ck_assert_msg(rc == 0, rc == 77 ? "python3-prometheus-client is missing: make deps" : "/metrics check failed (%d)",
                  rc);
    /* a scrape changes no counter: the same numbers again */
    ck_assert_int_eq(check_metrics(&d, mport, args), 0);
    args_free(args);
    close(fd);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* The status code of an HTTP response. */
static int http_status(const char *r)
{
    int code = 0;
    return sscanf(r, "HTTP/1.%*d %d", &code) == 1 ? code : -1;
}

/* A real Prometheus: Debian's promtool lints /metrics, Debian's
 * prometheus server scrapes floed and answers a query with the count of
 * the inserts sent, and runs every query of the Grafana dashboard. */
START_TEST(a_real_prometheus_reads_it)
{
    unsigned mport = free_port();
    char ps[16];
    snprintf(ps, sizeof ps, "%u", mport);
    const char *flags[] = {"--metrics-port", ps, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    int fd = raw_connect(d.port);
    tally t;
    memset(&t, 0, sizeof t);
    send_mix(fd, &t);
    ck_assert_uint_gt(t.requests[OP_INSERT], 1);
    const char *args[3] = {NULL, NULL, NULL};
    int n = 0;
    arg(args, &n, "floe_requests_total{op=\"insert\"}=%llu", (unsigned long long)t.requests[OP_INSERT]);
    arg(args, &n, "docs/grafana/floed-dashboard.json"); /* every panel's query runs there */
    const char *script =
        getenv("FLOE_PROMETHEUS_CHECK") ? getenv("FLOE_PROMETHEUS_CHECK") : "tests/integration/check_prometheus.py";
    const int rc = run_checker(&d, script, mport, args);
    ck_assert_msg(rc == 0,
                  rc == 77 ? "promtool or prometheus is missing: make deps" : "the Prometheus check failed (%d)", rc);
    args_free(args);
    close(fd);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(other_paths_are_not_found)
{
    unsigned mport = free_port();
    char ps[16];
    snprintf(ps, sizeof ps, "%u", mport);
    const char *flags[] = {"--metrics-port", ps, "--metrics-bind", "127.0.0.1", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    char *r = http_request(mport, "GET / HTTP/1.0\r\n\r\n");
    ck_assert_msg(http_status(r) == 404, "got: %.200s", r);
    free(r);
    r = http_request(mport, "GET /metricsx HTTP/1.0\r\n\r\n");
    ck_assert_msg(http_status(r) == 404, "got: %.200s", r);
    free(r);
    r = http_request(mport, "GET /metrics?name=x HTTP/1.0\r\n\r\n"); /* the query does not matter */
    ck_assert_msg(http_status(r) == 200, "got: %.200s", r);
    ck_assert_msg(strstr(r, "text/plain; version=0.0.4"), "got: %.300s", r);
    ck_assert_msg(strstr(r, "\nfloe_requests_total{op=\"insert\"} 0\n"), "got: %s", r);
    free(r);
    r = http_request(mport, "HEAD /metrics HTTP/1.0\r\n\r\n");
    ck_assert_msg(http_status(r) == 200 && !strstr(r, "floe_"), "got: %.300s", r);
    free(r);
    r = http_request(mport, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    ck_assert_msg(http_status(r) >= 400, "got: %.200s", r);
    free(r);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(snapshot_status)
{
    char dir[] = "/tmp/floe-itest-data-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *flags[] = {"--data-dir", dir, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    int fd = raw_connect(d.port);
    tally t;
    memset(&t, 0, sizeof t);
    Floe__V1__Response *r = info(fd, &t);
    ck_assert_int_eq(r->info->last_snapshot_time, 0);
    ck_assert_str_eq(r->info->last_snapshot_status, "");
    ck_assert_str_eq(r->info->data_dir, dir);
    floe__v1__response__free_unpacked(r, NULL);
    create(fd, &t, "a", FLOE__V1__STATUS__OK);
    uint64_t keys[3] = {1, 2, 3};
    key_op(fd, &t, OP_INSERT, "a", keys, sizeof keys, FLOE__V1__STATUS__OK);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Snapshot sn = FLOE__V1__SNAPSHOT__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_SNAPSHOT;
    req.snapshot = &sn;
    const int64_t before = (int64_t)time(NULL);
    call_free(fd, &t, OP_SNAPSHOT, 0, &req, FLOE__V1__STATUS__OK);
    r = info(fd, &t);
    ck_assert_int_ge(r->info->last_snapshot_time, before);
    ck_assert_int_le(r->info->last_snapshot_time, (int64_t)time(NULL));
    ck_assert_str_eq(r->info->last_snapshot_status, "ok");
    ck_assert_uint_eq(r->info->n_tables, 1);
    ck_assert_uint_eq(r->info->tables[0]->keys, 3);
    floe__v1__response__free_unpacked(r, NULL);
    close(fd);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(metrics_port_taken)
{
    /* a port another program listens on: floed says so and does not start */
    int busy = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(busy, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(listen(busy, 4), 0);
    socklen_t len = sizeof sin;
    ck_assert_int_eq(getsockname(busy, (struct sockaddr *)&sin, &len), 0);
    char ps[16];
    snprintf(ps, sizeof ps, "%u", ntohs(sin.sin_port));
    const char *flags[] = {"--port", "0", "--metrics-port", ps, NULL};
    char *err;
    int rc = floed_run_to_exit(flags, &err);
    ck_assert_msg(rc == 1 && strstr(err, "cannot listen for metrics") && strstr(err, "in use"), "exit %d, stderr: %s",
                  rc, err);
    free(err);
    close(busy);
}
END_TEST

START_TEST(refused_connections_are_counted)
{
    const char *flags[] = {"--max-connections", "1", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    int fd = raw_connect(d.port);
    tally t;
    memset(&t, 0, sizeof t);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Ping ping = FLOE__V1__PING__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_PING;
    req.ping = &ping;
    call_free(fd, &t, OP_PING, 0, &req, FLOE__V1__STATUS__OK); /* accepted before the next one */
    for (int i = 0; i < 2; i++) {
        int fd2 = raw_connect(d.port);
        Floe__V1__Response *busy = raw_read_response(fd2, 10000);
        ck_assert_ptr_nonnull(busy);
        ck_assert_int_eq(busy->status, FLOE__V1__STATUS__ERR_BUSY);
        floe__v1__response__free_unpacked(busy, NULL);
        close(fd2);
    }
    Floe__V1__Response *r = info(fd, &t);
    ck_assert_uint_eq(r->info->connections, 1);
    ck_assert_uint_eq(r->info->connections_total, 1);
    ck_assert_uint_eq(r->info->connections_refused, 2);
    ck_assert_str_eq(r->info->metrics_address, ""); /* metrics-port 0: off */
    ck_assert_uint_eq(r->info->n_tables, 0);
    floe__v1__response__free_unpacked(r, NULL);
    close(fd);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Load, table churn, info and scrapes at once: the counters stay
 * consistent and floed stays clean under the sanitizers. */
typedef struct churn {
    const daemon_proc *d;
    int id;
    volatile int *stop;
} churn;

static void *churn_main(void *arg)
{
    churn *ch = arg;
    floe *c;
    if (harness_connect(ch->d, NULL, &c) != FLOE_OK)
        return (void *)1;
    char name[32];
    uint64_t keys[256];
    for (int i = 0; i < 256; i++)
        keys[i] = (uint64_t)(i * 7 + ch->id);
    for (int round = 0; !*ch->stop && round < 200; round++) {
        snprintf(name, sizeof name, "churn%d_%d", ch->id, round % 3);
        floe_table_def def = {.name = name, .kind = FLOE_TABLE_SET, .key_bits = 20, .capacity = 4096};
        floe_create(c, &def);
        floe_insert(c, name, keys, 256, NULL, NULL);
        floe_find(c, name, keys, 256, NULL, NULL, 0, NULL);
        if (round % 2)
            floe_drop(c, name);
    }
    floe_close(c);
    return NULL;
}

START_TEST(counters_under_load)
{
    unsigned mport = free_port();
    char ps[16];
    snprintf(ps, sizeof ps, "%u", mport);
    const char *flags[] = {"--metrics-port", ps, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    volatile int stop = 0;
    pthread_t th[3];
    churn ch[3];
    for (int i = 0; i < 3; i++) {
        ch[i] = (churn){&d, i, &stop};
        ck_assert_int_eq(pthread_create(&th[i], NULL, churn_main, &ch[i]), 0);
    }
    int fd = raw_connect(d.port);
    tally t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < 20; i++) {
        Floe__V1__Response *r = info(fd, &t);
        floe__v1__response__free_unpacked(r, NULL);
        char *body = http_request(mport, "GET /metrics HTTP/1.0\r\n\r\n");
        ck_assert_msg(http_status(body) == 200, "got: %.200s", body);
        free(body);
    }
    const char *args[] = {NULL};
    ck_assert_int_eq(check_metrics(&d, mport, args), 0); /* well-formed in the middle of it all */
    stop = 1;
    for (int i = 0; i < 3; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        ck_assert_ptr_null(ret);
    }
    close(fd);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Starts floed with its stderr in a file, and JOURNAL_STREAM naming that
 * file (journal) or another one; returns what floed logged by the time it
 * stopped. */
static char *log_of_run(bool journal)
{
    char path[] = "/tmp/floe-itest-log-XXXXXX";
    int lfd = mkstemp(path);
    ck_assert_int_ge(lfd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(lfd, &st), 0);
    char env[64];
    snprintf(env, sizeof env, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + (journal ? 0 : 1));
    /* floed inherits this process's stderr and environment (the test runs in its own process) */
    int saved = dup(2);
    ck_assert_int_eq(dup2(lfd, 2), 2);
    setenv("JOURNAL_STREAM", env, 1);
    const char *flags[] = {"--log-level", "debug", "--max-connections", "1", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    dup2(saved, 2);
    close(saved);
    unsetenv("JOURNAL_STREAM");
    int fd = raw_connect(d.port); /* debug: a connection */
    tally t;
    memset(&t, 0, sizeof t);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Ping ping = FLOE__V1__PING__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_PING;
    req.ping = &ping;
    call_free(fd, &t, OP_PING, 0, &req, FLOE__V1__STATUS__OK);
    int fd2 = raw_connect(d.port); /* warn: refused at max-connections */
    Floe__V1__Response *busy = raw_read_response(fd2, 10000);
    ck_assert_ptr_nonnull(busy);
    floe__v1__response__free_unpacked(busy, NULL);
    close(fd2);
    close(fd);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    close(lfd);
    char *text = slurp(path);
    ck_assert_ptr_nonnull(text);
    unlink(path);
    return text;
}

START_TEST(journald_priorities)
{
    char *text = log_of_run(true);
    ck_assert_msg(strstr(text, "<6>floed "), "no <6> info line in:\n%s", text);
    ck_assert_msg(strstr(text, "<7>connection "), "no <7> debug line in:\n%s", text);
    ck_assert_msg(strstr(text, "<4>refused a connection"), "no <4> warn line in:\n%s", text);
    /* every line carries a priority and no timestamp (journald adds its own) */
    for (char *line = text, *next; *line; line = next) {
        next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        if (strncmp(line, "==", 2) == 0 || strncmp(line, "    #", 5) == 0)
            continue; /* a sanitizer's report would fail the stop anyway */
        ck_assert_msg(line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>',
                      "line without a priority: %.*s", (int)(next - line), line);
        ck_assert_msg(!(line[3] >= '0' && line[3] <= '9'), "a timestamp in: %.*s", (int)(next - line), line);
    }
    free(text);

    /* JOURNAL_STREAM naming another stream: timestamps as usual */
    text = log_of_run(false);
    ck_assert_msg(!strstr(text, "<6>"), "journal prefix without the journal:\n%s", text);
    ck_assert_msg(strstr(text, "Z INFO  floed "), "no plain info line in:\n%s", text);
    ck_assert_msg(strstr(text, "Z WARN  refused a connection"), "no plain warn line in:\n%s", text);
    free(text);
}
END_TEST

Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, info_and_metrics_count_what_was_sent);
    tcase_add_test(tc, a_real_prometheus_reads_it);
    tcase_add_test(tc, other_paths_are_not_found);
    tcase_add_test(tc, snapshot_status);
    tcase_add_test(tc, metrics_port_taken);
    tcase_add_test(tc, refused_connections_are_counted);
    tcase_add_test(tc, counters_under_load);
    tcase_add_test(tc, journald_priorities);
    suite_add_tcase(s, tc);
    return s;
}
