/*
 * main.c - floe-mc: an explicit-state model checker whose workers
 * deduplicate states through a floe server (examples/mc/README.md).
 *
 *   floe-mc --model puzzle:3x4 --server floe://127.0.0.1:7450 --workers 16
 *   floe-mc --model hanoi:20 --server floe://h:7450 --worker 3/8 --table run1
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "floe.h"
#include "floe_getopt.h"

/* Seconds a worker waits for an answer before it fails the run (--timeout). */
#define DEFAULT_TIMEOUT_S 60
#include "launch.h"
#include "model.h"
#include "worker.h"

typedef struct options {
    const char *model, *model_lib, *server, *table, *backend;
    floe_options conn; /* token, timeouts, TLS (libfloe's connection options) */
    unsigned workers, index;
    int one_worker;    /* --worker i/W, or a launcher's rank: this process is worker i of a run over hosts */
    int workers_given; /* --workers or --worker */
    uint64_t capacity, expect;
    size_t batch;
    unsigned inflight;
    int keep, quiet, tree, whole, deadlock;
    /* the open set on the server (claims.c) */
    int server_queue, trace, any_order;
    const char *resume; /* the table of the run to go on with */
    uint32_t max_depth;
    uint64_t max_states; /* stop once the run has found more (0: no limit) */
    size_t claim;
    unsigned lease_ms;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: floe-mc --model M | --model-lib LIB [--model PARAMS] [--server URI] [--workers W | --worker i/W]\n"
            "               [options]\n"
            "Explicit-state breadth-first search whose workers deduplicate states through a floe server.\n"
            "A state answered INSERTED belongs to the worker that sent it: it counts it and expands it.\n"
            "\n"
            "Models:\n%s"
            "\n"
            "Options:\n"
            "  -m, --model M         the model (above); with --model-lib, the library's parameters\n"
            "      --model-lib LIB   a model of one's own: a shared library written to floe_mc_model.h\n"
            "                        (examples/mc/models/: --model-lib build/rel/libmc_peterson.so\n"
            "                        --model peterson:3); its invariant is checked in every state\n"
            "  -s, --server URI      floe://host:port[?token=T], floes://host:port (TLS) or host:port\n"
            "                        (default $FLOE_SERVER, else floe://127.0.0.1:7450); a list\n"
            "                        floe://h1:p1,h2:p2,... spreads the table over those servers\n"
            "  -w, --workers W       fork W local workers and sum their counts (default 1)\n"
            "      --worker i/W      run only worker i (0..W-1) of a run spread over hosts; worker 0\n"
            "                        creates --table (which must not exist), and all W wait for each\n"
            "                        other (through the table TABLE-start) before they begin; each\n"
            "                        prints its own counts, `floe stats TABLE` the total\n"
            "                        Under mpirun or srun each rank is one worker (rank of size, from\n"
            "                        the launcher: no --workers or --worker); %s\n"
            "  -t, --table T         the table (default with --workers: mc-MODEL-PID, dropped at the end,\n"
            "                        also of a run interrupted)\n"
            "      --capacity N      states the table holds (default: the model's count + 15%% when known,\n"
            "                        else 16M; the table grows past it); K, M, G suffixes\n"
            "      --backend B       cpu, gpu or auto (default: the server's)\n"
            "  -k, --batch K         states per find-or-put request (default 64K)\n"
            "  -P, --inflight N      requests in flight per worker (default 8)\n"
            "      --expect N        exit 1 unless the run finds N states (puzzle and hanoi check\n"
            "                        their closed form by themselves)\n"
            "      --deadlock        a state with no successor is an error: count them, print the first\n"
            "                        each worker met, exit 1\n"
            "      --tree            a TREE table even when states pack into 64 bits\n"
            "      --whole           TREE: send every state whole (by default a successor goes as its\n"
            "                        parent's id and the words that differ, when they are few: fewer\n"
            "                        bytes, but a table in parts on the same host is faster whole)\n"
            "      --keep            keep the table after the run\n"
            "  -q, --quiet           no first line and no progress lines on stderr\n"
            "  -h, --help            this text\n"
            "      --version         floe-mc's and libfloe's versions\n"
            "Runs with the open set on the server (an exploring table: docs/PROTOCOL.md):\n"
            "      --server-queue    workers claim open states from the table, expand them and insert the\n"
            "                        successors with their parent: no worker holds any of the run, so a\n"
            "                        worker may die (its claims come back when their lease ends) and the\n"
            "                        run goes on; the table is kept when the run does not finish; over a\n"
            "                        list of servers each keeps the open set of its states and the workers\n"
            "                        end each level (two sweeps over the servers)\n"
            "      --resume TABLE    go on with the run in TABLE (after floed or floe-mc was killed: floed\n"
            "                        loads its last snapshot); implies --server-queue and --table TABLE\n"
            "      --trace           print the path from an initial state to the shallowest state that\n"
            "                        breaks the invariant (or has no successor, with --deadlock), a state\n"
            "                        a line (--server-queue; breadth-first, so the shortest there is)\n"
            "      --max-depth D     expand no state at depth D or deeper (they are found and counted)\n"
            "      --max-states N    stop once the run has found more than N states (counted 50 times a\n"
            "                        second, so it stops a little past N): a model whose state space is\n"
            "                        larger than the server can hold (hanoi:100) ends with exit status 3\n"
            "                        instead of filling it; the table is dropped as after SIGINT (K, M, G)\n"
            "      --any-order       claims not level by level: no wait at the end of each level (a model\n"
            "                        of many small levels, such as hanoi, runs several times faster), but\n"
            "                        a trace is a path, not the shortest one, and depths are not levels\n"
            "                        (one server only)\n"
            "      --claim N         states a claim asks for (default: --batch / 3)\n"
            "      --lease S         seconds a claim is a worker's before it returns to the open set\n"
            "                        (default 60)\n"
            "Connection options (each also from its environment variable; flags win; --timeout is %d s\n"
            "unless told otherwise, so that a stalled server fails the run):\n",
            mc_model_help(),
            mc_launch_has_mpi()
                ? "this floe-mc has MPI: the table's\n"
                  "                        name, the start and the counts go through it, rank 0 prints the\n"
                  "                        run's total, each rank's share and the check, and a rank that\n"
                  "                        fails ends the run (exit 1)"
                : "this floe-mc was built without MPI\n"
                  "                        (mpicc absent): the ranks need --table, meet through the table\n"
                  "                        TABLE-start, and each prints its own counts as with --worker",
            DEFAULT_TIMEOUT_S);
    char timeout_help[160];
    snprintf(timeout_help, sizeof timeout_help,
             "give up on a request not answered in SECONDS (default %u; 0: wait), and on connecting after as long "
             "unless --connect-timeout is given",
             DEFAULT_TIMEOUT_S);
    floe_getopt_help(f, 6, 24, timeout_help);
    fprintf(f, "\n"
               "States that pack into 64 bits (words x bits per word <= 64) go to a SET table of that key\n"
               "width; others to a TREE table of the model's words.  Exit status: 0 done (and checked),\n"
               "1 a wrong count, a state that breaks the invariant (or one with no successor, with\n"
               "--deadlock) or a server error, 2 a usage error, 3 --max-states reached, 128 + N stopped\n"
               "by signal N (SIGINT, SIGTERM: the workers are stopped and the table dropped unless --keep).\n");
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The table, sized for the model: 0, 2 if the server's address or the
 * connection's options are malformed (a usage error), else 1. */
static int create_table(const options *o, const mc_model *m, int packed)
{
    if (o->resume)
        return 0;
    floe *c;
    const int cst = floe_connect_opts(o->server, &o->conn, &c);
    if (cst != FLOE_OK) {
        fprintf(stderr, "floe-mc: cannot connect to %s: %s\n", o->server, floe_errstr(c));
        floe_close(c);
        return cst == FLOE_ERR_INVALID ? 2 : 1;
    }
    char why[256];
    if (o->server_queue && !mc_server_explores(c, why, sizeof why)) { /* before it makes a plain table */
        fprintf(stderr, "floe-mc: %s: %s\n", o->server, why);
        floe_close(c);
        return 1;
    }
    uint64_t cap = o->capacity;
    if (!cap)
        cap = m->expect ? m->expect + m->expect / 20 * 3 + 1024 : (uint64_t)16 << 20;
    floe_table_def def = {.name = o->table, .capacity = cap, .backend = o->backend, .grow = 1};
    if (o->server_queue) { /* each state's label: which of its parent's successors it is */
        def.explore = 1;
        def.label_bytes = 1;
        def.any_order = o->any_order;
    }
    if (packed) {
        def.kind = FLOE_TABLE_SET;
        def.key_bits = mc_key_bits(m);
    } else {
        def.kind = FLOE_TABLE_TREE;
        def.words = m->words;
    }
    int st = floe_create(c, &def);
    if (st != FLOE_OK)
        fprintf(stderr, "floe-mc: cannot create table %s: %s: %s%s\n", o->table, floe_strerror(st), floe_errstr(c),
                st == FLOE_ERR_EXISTS ? " (drop it, or pick another --table)" : "");
    if (st == FLOE_OK && o->server_queue) { /* the initial states open the run */
        uint32_t *s0 = malloc((size_t)m->initials * m->words * 4);
        uint64_t *k0 = malloc((size_t)m->initials * 8);
        if (!s0 || !k0)
            st = FLOE_ERR_IO;
        for (unsigned i = 0; st == FLOE_OK && i < m->initials; i++) {
            m->initial(m, i, s0 + (size_t)i * m->words);
            if (packed)
                k0[i] = mc_pack(m, s0 + (size_t)i * m->words);
        }
        if (st == FLOE_OK)
            st = floe_insert_explore(c, o->table, packed ? (const void *)k0 : (const void *)s0,
                                     (size_t)m->initials * (packed ? 8 : m->words * 4), m->initials, NULL, 0, NULL, 0,
                                     0, NULL, NULL);
        if (st != FLOE_OK)
            fprintf(stderr, "floe-mc: cannot insert the initial states into %s: %s\n", o->table, floe_errstr(c));
        free(s0);
        free(k0);
    }
    floe_close(c);
    return st == FLOE_OK ? 0 : 1;
}

/* --resume: the table holds a run of this model; *packed says how its states go. */
static int check_resumed(const options *o, const mc_model *m, int *packed)
{
    floe *c;
    floe_table_info info;
    int st = floe_connect_opts(o->server, &o->conn, &c);
    char why[256];
    if (st == FLOE_OK && !mc_server_explores(c, why, sizeof why)) {
        fprintf(stderr, "floe-mc: --resume %s: %s\n", o->table, why);
        floe_close(c);
        return 1;
    }
    if (st == FLOE_OK)
        st = floe_stats(c, o->table, &info);
    if (st != FLOE_OK) {
        fprintf(stderr, "floe-mc: --resume %s: %s\n", o->table, floe_errstr(c));
        floe_close(c);
        return st == FLOE_ERR_INVALID ? 2 : 1;
    }
    floe_close(c);
    const int tree = info.kind == FLOE_TABLE_TREE;
    if (!info.explore.on || (tree ? info.words != m->words : info.key_bits != mc_key_bits(m) || !mc_packs(m))) {
        fprintf(stderr, "floe-mc: --resume %s: %s (a run of %s keeps its states in a%s with %u %s)\n", o->table,
                !info.explore.on ? "not a run's table (floe-mc --server-queue makes those)"
                                 : "its states are not this model's",
                m->name, mc_packs(m) ? " SET, or with --tree a TREE," : " TREE",
                mc_packs(m) ? mc_key_bits(m) : m->words, mc_packs(m) ? "-bit keys" : "words");
        return 1;
    }
    *packed = !tree;
    if (!o->quiet)
        fprintf(stderr, "floe-mc: resuming the run in %s: %" PRIu64 " states found, %" PRIu64 " open, %u levels%s\n",
                o->table, info.explore.states, info.explore.open + info.explore.claimed, info.explore.levels,
                info.explore.done ? " (it had ended)" : "");
    return 0;
}

/* What the server says of the run at its end (--server-queue). */
typedef struct run_end {
    int on, done;
    uint64_t states;
    uint32_t levels;
} run_end;

static run_end end_of_run(const options *o)
{
    run_end e = {0};
    floe *c;
    floe_table_info info;
    if (floe_connect_opts(o->server, &o->conn, &c) == FLOE_OK && floe_stats(c, o->table, &info) == FLOE_OK)
        e = (run_end){1, info.explore.done, info.explore.states, info.explore.levels};
    floe_close(c);
    return e;
}

/* The path to the shallowest state of the workers' (explore ids kept in
 * id, depth in depth), a state a line. */
static void print_trace(const options *o, const mc_model *m, int packed, const char *what, uint64_t id)
{
    floe *c;
    uint64_t *ids = NULL;
    void *keys = NULL, *labels = NULL;
    size_t n = 0;
    int st = floe_connect_opts(o->server, &o->conn, &c);
    if (st == FLOE_OK)
        st = floe_trace(c, o->table, id, &ids, &keys, &labels, &n);
    if (st != FLOE_OK) {
        printf("trace        (none: %s)\n", floe_errstr(c));
    } else {
        printf("trace        %zu step%s from an initial state to the %s:\n", n - 1, n == 2 ? "" : "s", what);
        for (size_t i = 0; i < n; i++) {
            uint32_t s[MC_MAX_WORDS];
            if (packed)
                mc_unpack(m, ((const uint64_t *)keys)[i], s);
            else
                memcpy(s, (const uint32_t *)keys + i * m->words, m->words * 4u);
            char text[1024];
            mc_model_print(m, s, text, sizeof text);
            if (i == 0)
                printf("  %4zu  %s  (initial)\n", i, text);
            else
                printf("  %4zu  %s  (successor %u)\n", i, text, labels ? ((const uint8_t *)labels)[i] : 0u);
        }
    }
    free(ids);
    free(keys);
    free(labels);
    floe_close(c);
}

/* SIGINT or SIGTERM to floe-mc (not its workers): the run stops, and its
 * table is dropped as at the end (unless --keep). */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    interrupted = sig;
}

static void drop_table(const options *o)
{
    floe *c;
    if (floe_connect_opts(o->server, &o->conn, &c) == FLOE_OK)
        floe_drop(c, o->table);
    floe_close(c);
}

/* Workers other than 0 of a run over hosts: wait until worker 0 made the table. */
static int wait_for_table(const options *o)
{
    for (int i = 0; i < 600; i++) {
        floe *c;
        floe_table_info info;
        int st = floe_connect_opts(o->server, &o->conn, &c);
        if (st == FLOE_OK)
            st = floe_stats(c, o->table, &info);
        floe_close(c);
        if (st == FLOE_OK)
            return 0;
        if (st != FLOE_ERR_NO_TABLE && st != FLOE_ERR_IO) {
            fprintf(stderr, "floe-mc: table %s: %s\n", o->table, floe_strerror(st));
            return -1;
        }
        usleep(100000);
    }
    fprintf(stderr, "floe-mc: table %s did not appear within 60 s (is worker 0 running?)\n", o->table);
    return -1;
}

/* A run over hosts starts together, as local workers do: each worker puts
 * its index into the SET `TABLE-start` (worker 0 creates it) and waits
 * until every index is there.  Without it an early worker would take most
 * of the first levels, and with them most of the run. */
static int barrier(const options *o)
{
    char name[96];
    snprintf(name, sizeof name, "%s-start", o->table);
    floe *c;
    if (floe_connect_opts(o->server, &o->conn, &c) != FLOE_OK) {
        fprintf(stderr, "floe-mc: cannot connect to %s: %s\n", o->server, floe_errstr(c));
        floe_close(c);
        return -1;
    }
    int st = FLOE_OK;
    if (o->index == 0) {
        floe_table_def def = {.name = name, .kind = FLOE_TABLE_SET, .capacity = o->workers, .grow = 1};
        st = floe_create(c, &def);
        if (st == FLOE_ERR_EXISTS)
            st = FLOE_OK; /* left over from an earlier run: the indexes are the same */
    }
    uint64_t *keys = calloc(o->workers, sizeof *keys);
    uint8_t *res = calloc(o->workers, 1);
    for (unsigned i = 0; keys && i < o->workers; i++)
        keys[i] = i;
    uint64_t me = o->index;
    for (int tries = 0; st == FLOE_OK || st == FLOE_ERR_NO_TABLE; tries++) {
        if (tries > 6000) {
            fprintf(stderr, "floe-mc: not every worker of %u started within 60 s\n", o->workers);
            st = FLOE_ERR_IO;
            break;
        }
        st = floe_insert(c, name, &me, 1, NULL, NULL);
        if (st == FLOE_OK && keys && res)
            st = floe_find(c, name, keys, o->workers, res, NULL, 0, NULL);
        if (st == FLOE_OK && keys && res) {
            unsigned here = 0;
            for (unsigned i = 0; i < o->workers; i++)
                here += res[i] == FLOE_PRESENT;
            if (here == o->workers)
                break;
        }
        if (st == FLOE_OK || st == FLOE_ERR_NO_TABLE)
            usleep(10000);
    }
    if (st != FLOE_OK)
        fprintf(stderr, "floe-mc: waiting for the other workers: %s: %s\n", floe_strerror(st), floe_errstr(c));
    free(keys);
    free(res);
    floe_close(c);
    return st == FLOE_OK ? 0 : -1;
}

static uint64_t sum_states(mc_progress *p, unsigned n, uint64_t *transitions)
{
    uint64_t s = 0, t = 0;
    for (unsigned i = 0; i < n; i++) {
        s += atomic_load(&p[i].states);
        t += atomic_load(&p[i].transitions);
    }
    if (transitions)
        *transitions = t;
    return s;
}

/* What a worker reports, as the totals add them up. */
enum {
    C_STATES,
    C_TRANSITIONS,
    C_SENT,
    C_SENT_BYTES,
    C_BY_PARENT,
    C_AGAIN,
    C_VIOLATIONS,
    C_DEADLOCKS,
    C_WAITED_CLAIM_US,
    C_WAITED_INSERT_US,
    C_WAITED_LEVEL_US,
    C_FAILED,
    NCOUNTS
};

static void counts_of(const mc_progress *p, int failed, uint64_t c[NCOUNTS])
{
    c[C_STATES] = atomic_load(&p->states);
    c[C_TRANSITIONS] = atomic_load(&p->transitions);
    c[C_SENT] = atomic_load(&p->sent);
    c[C_SENT_BYTES] = atomic_load(&p->sent_bytes);
    c[C_BY_PARENT] = atomic_load(&p->by_parent);
    c[C_AGAIN] = atomic_load(&p->again);
    c[C_VIOLATIONS] = atomic_load(&p->violations);
    c[C_DEADLOCKS] = atomic_load(&p->deadlocks);
    c[C_WAITED_CLAIM_US] = atomic_load(&p->waited_claim_us);
    c[C_WAITED_INSERT_US] = atomic_load(&p->waited_insert_us);
    c[C_WAITED_LEVEL_US] = atomic_load(&p->waited_level_us);
    c[C_FAILED] = (uint64_t)failed;
}

/* The report of n workers' counts (NCOUNTS each); whole: they are the
 * whole run, so the count is checked.  Returns 1 for a failed or wrong
 * run. */
static int report(const options *o, const mc_model *m, int packed, double secs, const uint64_t *c, unsigned n,
                  int whole, const char *ran, const run_end *end)
{
    uint64_t sum[NCOUNTS] = {0};
    for (unsigned i = 0; i < n; i++)
        for (int k = 0; k < NCOUNTS; k++)
            sum[k] += c[(size_t)i * NCOUNTS + k];
    /* with the open set on the server, the server counts the run (resumed runs included) */
    const uint64_t states = end ? end->states : sum[C_STATES];
    int bad = sum[C_FAILED] != 0;
    if (end && !end->done) {
        whole = 0;
        bad = 1;
    }
    printf("model        %s (%s table, %u worker%s%s)\n", m->name, packed ? "SET" : "TREE", o->workers,
           o->workers == 1 ? "" : "s", ran);
    printf("states       %" PRIu64 "%s\n", states,
           end && o->resume ? " (the whole run, the states found before it stopped included)" : "");
    if (end)
        printf("levels       %u (breadth-first depths%s)\n", end->levels,
               o->max_depth ? ", --max-depth stopped the expansion" : "");
    printf("transitions  %" PRIu64 "\n", sum[C_TRANSITIONS]);
    printf("seconds      %.3f\n", secs);
    printf("states/s     %.0f\n", secs > 0 ? (double)states / secs : 0.0);
    printf("sent         %" PRIu64 " states, %.2f per state found, %.1f bytes each", sum[C_SENT],
           states ? (double)sum[C_SENT] / (double)states : 0.0,
           sum[C_SENT] ? (double)sum[C_SENT_BYTES] / (double)sum[C_SENT] : 0.0);
    if (packed)
        printf(" (64-bit keys)\n");
    else if (o->whole || sum[C_BY_PARENT] == 0)
        printf(" (whole vectors)\n");
    else
        printf(" (%" PRIu64 " by their parent, the rest whole)\n", sum[C_BY_PARENT]);
    if (sum[C_AGAIN]) /* the table grew while they were in flight (sent counts them twice) */
        printf("again        %" PRIu64 " states sent again whole: a growth renamed their parents in flight\n",
               sum[C_AGAIN]);
    if (end && n) /* where the workers' time went besides expanding: what bounds a run */
        printf("waited       %.3f s for claims, %.3f s for inserts' answers, %.3f s at the ends of levels "
               "(a worker's mean)\n",
               (double)sum[C_WAITED_CLAIM_US] / 1e6 / n, (double)sum[C_WAITED_INSERT_US] / 1e6 / n,
               (double)sum[C_WAITED_LEVEL_US] / 1e6 / n);
    for (unsigned i = 0; i < n && n > 1; i++) {
        const uint64_t w = c[(size_t)i * NCOUNTS + C_STATES];
        printf("worker %-5u %" PRIu64 " states (%.1f%%), %" PRIu64 " transitions\n", i, w,
               states ? 100.0 * (double)w / (double)states : 0.0, c[(size_t)i * NCOUNTS + C_TRANSITIONS]);
    }
    if (m->invariant && sum[C_VIOLATIONS]) {
        printf("invariant    VIOLATED in %" PRIu64 " state%s (the %s each worker met is below)\n", sum[C_VIOLATIONS],
               sum[C_VIOLATIONS] == 1 ? "" : "s", end ? "shallowest" : "first");
        bad = 1;
    } else if (m->invariant && !sum[C_FAILED]) {
        printf("invariant    holds in every state%s\n", whole ? "" : " this worker expanded");
    }
    if (o->deadlock && sum[C_DEADLOCKS]) {
        printf("deadlocks    %" PRIu64 " state%s with no successor (the %s each worker met is below)\n",
               sum[C_DEADLOCKS], sum[C_DEADLOCKS] == 1 ? "" : "s", end ? "shallowest" : "first");
        bad = 1;
    } else if (o->deadlock && !sum[C_FAILED]) {
        printf("deadlocks    none%s\n", whole ? "" : " in the states this worker expanded");
    }
    if (sum[C_FAILED] || (end && !end->done))
        printf("check        FAILED: the run did not complete (the errors are above)\n");
    if (!bad && whole) {
        if (m->expect && !o->max_depth && states != m->expect) {
            printf("check        WRONG: %" PRIu64 " states, the model has %" PRIu64 "\n", states, m->expect);
            bad = 1;
        }
        if (o->expect && states != o->expect) {
            printf("check        WRONG: %" PRIu64 " states, --expect %" PRIu64 "\n", states, o->expect);
            bad = 1;
        }
        if (!bad && ((m->expect && !o->max_depth) || o->expect))
            printf("check        ok: %" PRIu64 " states, as %s\n", states,
                   m->expect && !o->max_depth ? "the closed form says" : "--expect says");
    } else if (!bad && o->expect) {
        printf("check        (one worker of %u: --expect applies to the sum of all workers)\n", o->workers);
    }
    return bad;
}

/* The model of the run, freed at exit on every path out of main (the
 * sanitizers' leak check would count it). */
static mc_model the_model;

static void unload_model(void)
{
    mc_model_unload(&the_model);
}

int main(int argc, char **argv)
{
    options o = {.server = "floe://127.0.0.1:7450", .workers = 1, .batch = 65536, .inflight = 8};
    mc_launch l;
    char why[400];
    if (mc_launch_init(&l, &argc, &argv, why, sizeof why) != 0) {
        fprintf(stderr, "floe-mc: %s\n", why);
        return 2;
    }
    /* the environment, as for the floe CLI; the flags override it */
    const char *env_server = getenv("FLOE_SERVER");
    if (env_server && env_server[0])
        o.server = env_server;
    o.conn.timeout_ms = DEFAULT_TIMEOUT_S * 1000;
    if (floe_options_from_env(&o.conn, why, sizeof why) != FLOE_OK) {
        fprintf(stderr, "floe-mc: %s\n", why);
        return 2;
    }
    static const struct option own_opts[] = {
        {"model", required_argument, 0, 'm'},
        {"model-lib", required_argument, 0, 'L'},
        {"server", required_argument, 0, 's'},
        {"workers", required_argument, 0, 'w'},
        {"worker", required_argument, 0, 'W'},
        {"table", required_argument, 0, 't'},
        {"capacity", required_argument, 0, 'C'},
        {"backend", required_argument, 0, 'B'},
        {"batch", required_argument, 0, 'k'},
        {"inflight", required_argument, 0, 'P'},
        {"expect", required_argument, 0, 'E'},
        {"keep", no_argument, 0, 'K'},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {"tree", no_argument, 0, 'R'},
        {"whole", no_argument, 0, 'H'},
        {"deadlock", no_argument, 0, 'D'},
        {"server-queue", no_argument, 0, 'Q'},
        {"resume", required_argument, 0, 'U'},
        {"trace", no_argument, 0, 'T'},
        {"any-order", no_argument, 0, 'Y'},
        {"max-depth", required_argument, 0, 'X'},
        {"claim", required_argument, 0, 'A'},
        {"lease", required_argument, 0, 'G'},
        {"max-states", required_argument, 0, 'Z'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    static struct option *longopts; /* ours and libfloe's connection options: the process's life */
    if (!(longopts = floe_getopt_table(own_opts))) {
        fprintf(stderr, "floe-mc: out of memory\n");
        return 1;
    }
    int ch;
    uint64_t v;
    while ((ch = getopt_long(argc, argv, "m:s:w:t:k:P:qh", longopts, NULL)) != -1) {
        if (ch >= FLOE_GETOPT_CODE) {
            if (floe_getopt_set(&o.conn, ch, optarg, why, sizeof why) != FLOE_OK) {
                fprintf(stderr, "floe-mc: --%s\n", why);
                return 2;
            }
            continue;
        }
        switch (ch) {
        case 'm':
            o.model = optarg;
            break;
        case 'L':
            o.model_lib = optarg;
            break;
        case 'D':
            o.deadlock = 1;
            break;
        case 'Q':
            o.server_queue = 1;
            break;
        case 'U':
            o.resume = optarg;
            o.server_queue = 1;
            break;
        case 'T':
            o.trace = 1;
            break;
        case 'Y':
            o.any_order = 1;
            break;
        case 'X':
            if (!floe_parse_size(optarg, &v) || v < 1 || v > UINT32_MAX) {
                fprintf(stderr, "floe-mc: --max-depth takes a positive depth, got '%s'\n", optarg);
                return 2;
            }
            o.max_depth = (uint32_t)v;
            break;
        case 'A':
            if (!floe_parse_size(optarg, &v) || v < 1 || v > ((uint64_t)1 << 20)) {
                fprintf(stderr, "floe-mc: --claim takes 1..1M states, got '%s'\n", optarg);
                return 2;
            }
            o.claim = (size_t)v;
            break;
        case 'G':
            if (!floe_parse_size(optarg, &v) || v < 1 || v > 86400) {
                fprintf(stderr, "floe-mc: --lease takes 1..86400 seconds, got '%s'\n", optarg);
                return 2;
            }
            o.lease_ms = (unsigned)v * 1000u;
            break;
        case 's':
            o.server = optarg;
            break;
        case 't':
            o.table = optarg;
            break;
        case 'B':
            o.backend = optarg;
            break;
        case 'K':
            o.keep = 1;
            break;
        case 'R':
            o.tree = 1;
            break;
        case 'H':
            o.whole = 1;
            break;
        case 'q':
            o.quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("floe-mc %s (libfloe %s)\n", FLOE_VERSION, floe_version());
            return 0;
        case 'w':
            if (!floe_parse_size(optarg, &v) || v < 1 || v > 1024) {
                fprintf(stderr, "floe-mc: --workers takes 1..1024, got '%s'\n", optarg);
                return 2;
            }
            o.workers = (unsigned)v;
            o.workers_given = 1;
            break;
        case 'W': {
            unsigned i, n;
            char end;
            if (sscanf(optarg, "%u/%u%c", &i, &n, &end) != 2 || n < 1 || n > 1024 || i >= n) {
                fprintf(stderr, "floe-mc: --worker takes i/W with 0 <= i < W <= 1024, got '%s'\n", optarg);
                return 2;
            }
            o.index = i;
            o.workers = n;
            o.one_worker = 1;
            o.workers_given = 1;
            break;
        }
        case 'C':
            if (!floe_parse_size(optarg, &o.capacity) || o.capacity == 0) {
                fprintf(stderr, "floe-mc: --capacity takes a positive count (K, M, G allowed), got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'k':
            if (!floe_parse_size(optarg, &v) || v < 1 || v > ((uint64_t)1 << 22)) {
                fprintf(stderr, "floe-mc: --batch takes 1..4M, got '%s'\n", optarg);
                return 2;
            }
            o.batch = (size_t)v;
            break;
        case 'P':
            if (!floe_parse_size(optarg, &v) || v < 1 || v > 1024) {
                fprintf(stderr, "floe-mc: --inflight takes 1..1024, got '%s'\n", optarg);
                return 2;
            }
            o.inflight = (unsigned)v;
            break;
        case 'Z':
            if (!floe_parse_size(optarg, &o.max_states) || o.max_states == 0) {
                fprintf(stderr, "floe-mc: --max-states takes a positive count, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'E':
            if (!floe_parse_size(optarg, &o.expect) || o.expect == 0) {
                fprintf(stderr, "floe-mc: --expect takes a positive count, got '%s'\n", optarg);
                return 2;
            }
            break;
        default: /* getopt_long has named the option */
            fprintf(stderr, "Try 'floe-mc --help'.\n");
            return 2;
        }
    }
    if (optind < argc || (!o.model && !o.model_lib)) {
        fprintf(stderr,
                optind < argc ? "floe-mc: unexpected argument '%s'\n"
                              : "floe-mc: --model (or --model-lib) is required%s\n",
                optind < argc ? argv[optind] : "");
        fprintf(stderr, "Try 'floe-mc --help'.\n");
        return 2;
    }
    if (o.resume && o.table && strcmp(o.table, o.resume) != 0) {
        fprintf(stderr, "floe-mc: --resume %s names the table; --table %s is another\n", o.resume, o.table);
        return 2;
    }
    if (o.resume)
        o.table = o.resume;
    if (!o.server_queue && (o.trace || o.max_depth || o.claim || o.lease_ms || o.any_order)) {
        fprintf(stderr, "floe-mc: --trace, --max-depth, --any-order, --claim and --lease go with --server-queue\n");
        return 2;
    }
    /* requests and answers are buffers of hundreds of KiB: keep them off
     * mmap, whose page faults would cost more than the search */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mc_model *const mm = &the_model; /* unloaded at exit, however main returns */
    atexit(unload_model);
    char err[256];
    if (o.model_lib ? mc_model_load(o.model_lib, o.model, mm, err, sizeof err) != 0
                    : mc_model_parse(o.model, mm, err, sizeof err) != 0) {
        fprintf(stderr, "floe-mc: %s\n", err);
        return 2;
    }
    if (l.how != MC_LAUNCH_NONE) { /* each rank of the job is one worker */
        if (o.workers_given) {
            fprintf(stderr,
                    "floe-mc: started by %s (rank %u of %u): each rank is one worker; leave --workers and "
                    "--worker out\n",
                    l.by, l.rank, l.size);
            return 2;
        }
        o.one_worker = 1;
        o.index = l.rank;
        o.workers = l.size;
        if (!o.table && l.how != MC_LAUNCH_MPI) {
            fprintf(stderr, "floe-mc: started by %s without MPI in this floe-mc: give every rank the same --table\n",
                    l.by);
            return 2;
        }
    }
    if (o.one_worker && !o.table && l.how != MC_LAUNCH_MPI) {
        fprintf(stderr, "floe-mc: --worker i/W needs --table: every worker of the run must name the same one\n");
        return 2;
    }
    if (o.table && strlen(o.table) > 58) {
        fprintf(stderr, "floe-mc: --table: at most 58 characters (floe-mc adds -start for its own table)\n");
        return 2;
    }
    char table[80];
    if (!o.table) {
        snprintf(table, sizeof table, "mc-%s-%d", mm->name, (int)getpid());
        for (char *p = table; *p; p++)
            if (*p == ':')
                *p = '-';
        if (l.how == MC_LAUNCH_MPI && mc_launch_broadcast(&l, table, sizeof table) != 0) { /* rank 0's name */
            fprintf(stderr, "floe-mc: MPI_Bcast failed\n");
            return 1;
        }
        o.table = table;
    }
    const int mpi = l.how == MC_LAUNCH_MPI;
    int packed = mc_packs(mm) && !o.tree;
    if (o.resume) {
        const int rc = check_resumed(&o, mm, &packed);
        if (rc)
            return rc;
    }
    if (!packed && o.batch * mm->words * 4 > ((size_t)64 << 20))
        o.batch = ((size_t)64 << 20) / (mm->words * 4); /* keep a request under floed's default max-frame */
    const int creator = !o.one_worker || o.index == 0;
    if (!o.quiet) {
        char who[64];
        if (l.how != MC_LAUNCH_NONE)
            snprintf(who, sizeof who, "rank %u of %u (%s%s)", o.index, o.workers, l.by, mpi ? ", MPI" : "");
        else if (o.one_worker)
            snprintf(who, sizeof who, "worker %u of %u", o.index, o.workers);
        else
            snprintf(who, sizeof who, "%u worker%s", o.workers, o.workers == 1 ? "" : "s");
        if (packed)
            fprintf(stderr,
                    "floe-mc: %s, %u words per state, SET table %s (states packed into %u-bit keys) on %s, %s\n",
                    mm->name, mm->words, o.table, mc_key_bits(mm), o.server, who);
        else
            fprintf(stderr, "floe-mc: %s, %u words per state, TREE table %s (states as vectors) on %s, %s\n", mm->name,
                    mm->words, o.table, o.server, who);
    }
    if (mpi) { /* rank 0 makes the table and says whether it could; all start together */
        int made = creator ? create_table(&o, mm, packed) == 0 : 0;
        if (mc_launch_broadcast(&l, &made, sizeof made) != 0 || !made || mc_launch_barrier(&l) != 0) {
            mc_launch_finish(&l);
            return 1;
        }
    } else {
        const int made = creator ? create_table(&o, mm, packed) : wait_for_table(&o) ? 1 : 0;
        if (made)
            return made;
        if (o.one_worker && o.workers > 1 && !o.server_queue && barrier(&o) != 0)
            return 1;
    }

    /* progress slots the workers write and this process reads, across fork */
    const unsigned nw = o.one_worker ? 1 : o.workers;
    mc_progress *prog = mmap(NULL, nw * sizeof *prog, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (prog == MAP_FAILED) {
        fprintf(stderr, "floe-mc: out of memory\n");
        return 1;
    }
    memset(prog, 0, nw * sizeof *prog);
    const double t0 = now();
    pid_t *pids = calloc(nw, sizeof *pids);
    int start[2] = {-1, -1}; /* closed once every worker is forked: they start together */
    if (nw > 1 && pipe(start) != 0) {
        fprintf(stderr, "floe-mc: pipe: %s\n", strerror(errno));
        return 1;
    }
    for (unsigned i = 0; i < nw; i++) {
        mc_run r = {.model = mm,
                    .server = o.server,
                    .conn = &o.conn,
                    .table = o.table,
                    .index = o.one_worker ? o.index : i,
                    .workers = o.workers,
                    .batch = o.batch,
                    .inflight = o.inflight,
                    .packed = packed,
                    .whole = o.whole,
                    .start_fd = start[0],
                    .claim = o.claim,
                    .lease_ms = o.lease_ms,
                    .max_depth = o.max_depth};
        fflush(NULL);
        pids[i] = fork();
        if (pids[i] < 0) {
            fprintf(stderr, "floe-mc: fork: %s\n", strerror(errno));
            for (unsigned j = 0; j < i; j++)
                kill(pids[j], SIGTERM);
            return 1;
        }
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* no orphaned workers when floe-mc is killed */
            if (getppid() == 1)
                _exit(1);
            if (start[1] >= 0)
                close(start[1]);
            _exit((o.server_queue ? mc_claims_run(&r, &prog[i]) : mc_worker_run(&r, &prog[i])) == 0 ? 0 : 1);
        }
    }
    if (start[1] >= 0) {
        close(start[1]);
        close(start[0]);
    }
    struct sigaction sa = {.sa_handler = on_interrupt}; /* here: the workers keep the default */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* a progress line a second until every worker is done */
    double last = t0;
    uint64_t last_states = 0;
    unsigned done = 0;
    int *status = calloc(nw, sizeof *status), *reaped = calloc(nw, sizeof *reaped);
    int stopped = 0;   /* a worker failed or died: the run cannot be complete, stop the rest */
    uint64_t over = 0; /* the states found when --max-states stopped the run */
    while (done < nw) {
        usleep(20000);
        if (o.max_states && !stopped && !interrupted) {
            const uint64_t s = sum_states(prog, nw, NULL);
            if (s > o.max_states)
                over = s;
        }
        if ((interrupted || over) && !stopped) {
            stopped = 1;
            for (unsigned j = 0; j < nw; j++)
                kill(pids[j], SIGTERM);
        }
        done = 0;
        for (unsigned i = 0; i < nw; i++) {
            if (!reaped[i] && waitpid(pids[i], &status[i], WNOHANG) == pids[i])
                reaped[i] = 1;
            /* with the open set on the server, a worker that died lost nothing: the others go on */
            const int killed = reaped[i] && WIFSIGNALED(status[i]) && o.server_queue;
            const int failed = reaped[i] && !killed && (!WIFEXITED(status[i]) || WEXITSTATUS(status[i]) != 0);
            if (failed && !stopped) {
                stopped = 1;
                for (unsigned j = 0; j < nw; j++)
                    if (!reaped[j])
                        kill(pids[j], SIGTERM);
            }
            done += reaped[i];
        }
        const double t = now();
        if (!o.quiet && t - last >= 1.0) {
            uint64_t s = sum_states(prog, nw, NULL);
            fprintf(stderr, "floe-mc: %.0f s: %" PRIu64 " states, %.2f M states/s\n", t - t0, s,
                    (double)(s - last_states) / (t - last) / 1e6);
            last = t;
            last_states = s;
        }
    }
    const double secs = now() - t0;
    if (over || interrupted) { /* no counts to trust: say why the run stopped, and leave nothing behind */
        const int drop = !o.one_worker && !o.keep && !o.server_queue;
        if (interrupted)
            fprintf(stderr, "floe-mc: interrupted (%s): the run stopped after %.1f s", strsignal(interrupted), secs);
        else /* the state space is larger than the run may take */
            fprintf(stderr,
                    "floe-mc: stopped after %.1f s at %" PRIu64 " states, more than --max-states %" PRIu64
                    ": the model has more states than that",
                    secs, over, o.max_states);
        fprintf(stderr, "%s%s%s\n", drop ? "; dropping its table" : "",
                o.server_queue ? "; go on with floe-mc --resume " : "", o.server_queue ? o.table : "");
        if (drop)
            drop_table(&o);
        free(status);
        free(reaped);
        munmap(prog, nw * sizeof *prog);
        free(pids);
        mc_launch_finish(&l);
        return interrupted ? 128 + interrupted : 3;
    }
    int bad = 0;
    for (unsigned i = 0; i < nw; i++) {
        const unsigned who = o.one_worker ? o.index : i;
        if (prog[i].status) {
            fprintf(stderr, "floe-mc: worker %u: %s\n", who, prog[i].error);
            bad = 1;
        } else if (WIFSIGNALED(status[i]) && WTERMSIG(status[i]) == SIGTERM && stopped) {
            fprintf(stderr, "floe-mc: worker %u stopped: another worker failed\n", who);
            bad = 1;
        } else if (o.server_queue && WIFSIGNALED(status[i]) && !(WTERMSIG(status[i]) == SIGTERM && stopped)) {
            fprintf(stderr,
                    "floe-mc: worker %u died of signal %d; its claims went back to the open set when their lease "
                    "ended\n",
                    who, WTERMSIG(status[i]));
        } else if (!WIFEXITED(status[i]) || WEXITSTATUS(status[i]) != 0) {
            if (WIFSIGNALED(status[i]))
                fprintf(stderr, "floe-mc: worker %u died of signal %d\n", who, WTERMSIG(status[i]));
            else
                fprintf(stderr, "floe-mc: worker %u exited %d\n", who, WEXITSTATUS(status[i]));
            bad = 1;
        }
    }
    free(status);
    free(reaped);
    uint64_t *counts = calloc((size_t)(mpi ? l.size : nw) * NCOUNTS, sizeof *counts);
    if (!counts) {
        fprintf(stderr, "floe-mc: out of memory\n");
        return 1;
    }
    run_end end = {0};
    if (o.server_queue && (!mpi || l.rank == 0))
        end = end_of_run(&o);
    /* a run on the server that did not finish stays, to be resumed */
    const int keep = o.keep || (o.server_queue && !end.done);
    if (mpi) {
        if (bad) { /* the run cannot be complete: every rank stops now, with this rank's error above */
            fprintf(stderr, "floe-mc: rank %u of %u failed: ending the whole run\n", l.rank, l.size);
            mc_launch_abort(&l, 1);
        }
        uint64_t mine[NCOUNTS];
        counts_of(&prog[0], bad, mine);
        if (mc_launch_gather(&l, mine, NCOUNTS, counts) != 0) {
            fprintf(stderr, "floe-mc: MPI_Gather failed\n");
            mc_launch_abort(&l, 1);
            bad = 1;
        } else if (l.rank == 0) {
            bad = report(&o, mm, packed, secs, counts, l.size, 1, ", one per MPI rank", o.server_queue ? &end : NULL);
        }
    } else {
        for (unsigned i = 0; i < nw; i++)
            counts_of(&prog[i], bad, counts + (size_t)i * NCOUNTS);
        bad = report(&o, mm, packed, secs, counts, nw, !o.one_worker || o.server_queue,
                     l.how != MC_LAUNCH_NONE ? ", this rank ran one"
                     : o.one_worker          ? ", this process ran one"
                                             : "",
                     o.server_queue ? &end : NULL) ||
              bad;
    }
    free(counts);
    for (unsigned i = 0; i < nw; i++) /* this process's workers' first states that break the invariant */
        if (atomic_load(&prog[i].violations)) {
            char text[1024];
            mc_model_print(mm, prog[i].violation, text, sizeof text);
            printf("violation    %s (worker %u's %s)\n", text,
                   mpi            ? l.rank
                   : o.one_worker ? o.index
                                  : i,
                   o.server_queue ? "shallowest" : "first");
        }
    for (unsigned i = 0; o.deadlock && i < nw; i++) /* and first states with no successor */
        if (atomic_load(&prog[i].deadlocks)) {
            char text[1024];
            mc_model_print(mm, prog[i].deadlock, text, sizeof text);
            printf("deadlock     %s (worker %u's %s)\n", text,
                   mpi            ? l.rank
                   : o.one_worker ? o.index
                                  : i,
                   o.server_queue ? "shallowest" : "first");
        }
    if (o.trace) {     /* the shallowest this process's workers met: a shortest counterexample */
        int which = 0; /* 1: a violation, 2: a deadlock */
        uint64_t id = 0;
        uint32_t depth = UINT32_MAX;
        for (unsigned i = 0; i < nw; i++) {
            if (atomic_load(&prog[i].violations) && (which != 1 || prog[i].violation_depth < depth))
                which = 1, id = prog[i].violation_id, depth = prog[i].violation_depth;
        }
        for (unsigned i = 0; which != 1 && o.deadlock && i < nw; i++)
            if (atomic_load(&prog[i].deadlocks) && prog[i].deadlock_depth < depth)
                which = 2, id = prog[i].deadlock_id, depth = prog[i].deadlock_depth;
        if (which)
            print_trace(&o, mm, packed, which == 1 ? "state that breaks the invariant" : "deadlock", id);
    }
    if (o.server_queue && !end.done && (!mpi || l.rank == 0))
        fprintf(stderr, "floe-mc: the run did not finish; it is kept in table %s: go on with floe-mc --resume %s\n",
                o.table, o.table);
    if (!o.one_worker && !keep)
        drop_table(&o);
    else if (mpi && l.rank == 0 && !keep)
        drop_table(&o);
    munmap(prog, nw * sizeof *prog);
    free(pids);
    mc_model_unload(mm);
    mc_launch_finish(&l);
    return bad;
}
