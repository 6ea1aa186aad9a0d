/*
 * test_mc.c - floe-mc end to end against a floed: state counts nobody can
 * fake.  The sliding-tile puzzle and Hanoi against their closed forms, the
 * dining philosophers against a plain search written here from the rules
 * (its own encoding, no floe-mc code), each with 1 and 4 workers; and the
 * bad command lines, each refused with a message.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* The number after `label` in floe-mc's report. */
static unsigned long long field(const char *out, const char *label)
{
    const char *p = strstr(out, label);
    ck_assert_msg(p != NULL, "no '%s' in floe-mc's output:\n%s", label, out);
    return strtoull(p + strlen(label), NULL, 10);
}

static void check_run(const daemon_proc *d, const char *model, const char *workers, unsigned long long states,
                      unsigned long long transitions)
{
    char *out;
    int rc = run_mc(d, &out, (const char *const[]){"--model", model, "--workers", workers, NULL});
    ck_assert_msg(rc == 0, "floe-mc --model %s --workers %s exited %d:\n%s", model, workers, rc, out);
    ck_assert_msg(field(out, "states ") == states, "%s with %s workers: %llu states, expected %llu", model, workers,
                  field(out, "states "), states);
    if (transitions)
        ck_assert_msg(field(out, "transitions ") == transitions, "%s: %llu transitions, expected %llu", model,
                      field(out, "transitions "), transitions);
    free(out);
}

/* Transitions of the R x C puzzle: each blank position holds 1/(R*C) of
 * the (R*C)!/2 boards, and a board has as many moves as its blank has
 * neighbours. */
static unsigned long long puzzle_transitions(int rows, int cols, unsigned long long states)
{
    unsigned long long degrees = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            degrees += (unsigned long long)((r > 0) + (r + 1 < rows) + (c > 0) + (c + 1 < cols));
    return states / (unsigned long long)(rows * cols) * degrees;
}

START_TEST(puzzle_and_hanoi_closed_forms)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *workers[] = {"1", "4"};
    for (int w = 0; w < 2; w++) {
        check_run(&d, "puzzle:2x4", workers[w], 20160, puzzle_transitions(2, 4, 20160));   /* 8!/2 */
        check_run(&d, "puzzle:3x3", workers[w], 181440, puzzle_transitions(3, 3, 181440)); /* 9!/2 */
        check_run(&d, "hanoi:8", workers[w], 6561, 19680);                                 /* 3^8; 3 x 3^8 - 3 moves */
    }
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* States as vectors in a TREE table (--tree), the path of models too wide
 * for 64 bits, on the same counts. */
START_TEST(tree_table_counts)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *workers[] = {"1", "4"};
    for (int w = 0; w < 2; w++) {
        char *out;
        const char *args[] = {"--model", "hanoi:8", "--workers", workers[w], "--tree", "--batch", "1000", NULL};
        ck_assert_int_eq(run_mc(&d, &out, args), 0);
        ck_assert(strstr(out, "TREE table") != NULL);
        ck_assert_uint_eq(field(out, "states "), 6561);
        ck_assert_uint_eq(field(out, "transitions "),
                          19680); /* 3 moves from each state, 2 from the 3 with one full peg */
        free(out);
    }
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Philosopher i in 2 bits of s: 0 thinking, 1 holding the left fork (fork
 * i), 2 eating (forks i and i+1 mod n).  The successors of s into out;
 * how many. */
static unsigned phils_moves(unsigned n, uint32_t s, uint32_t *out)
{
    unsigned k = 0;
#define PH(s, i) (((s) >> (2 * ((i) % n))) & 3u)
    for (unsigned i = 0; i < n; i++) {
        /* fork f is in use if its left owner f holds anything or its right owner f-1 eats */
        int left_free = PH(s, i + n - 1) != 2; /* philosopher i is thinking here: only i-1 can hold fork i */
        int right_free = PH(s, i + 1) == 0;    /* fork i+1: i+1 must think (i holds only its left fork) */
        uint32_t to;
        if (PH(s, i) == 0 && left_free)
            to = 1;
        else if (PH(s, i) == 1 && right_free)
            to = 2;
        else if (PH(s, i) == 2)
            to = 0;
        else
            continue;
        out[k++] = (s & ~(3u << (2 * i))) | to << (2 * i);
    }
#undef PH
    return k;
}

/* Counts reachable states and transitions by breadth-first search over a
 * visited bitmap of 4^n bits; *deadlock_depth: the depth of the first
 * state with no successor. */
static void phils_search(unsigned n, unsigned long long *states, unsigned long long *transitions,
                         unsigned long long *deadlocks, unsigned *deadlock_depth)
{
    const size_t space = (size_t)1 << (2 * n);
    unsigned char *seen = calloc(space / 8 + 1, 1);
    uint32_t *queue = malloc(space * sizeof *queue);
    unsigned *depth = malloc(space * sizeof *depth);
    ck_assert(seen && queue && depth);
    size_t head = 0, tail = 0;
    queue[tail++] = 0;
    depth[0] = 0;
    seen[0] |= 1;
    *transitions = *deadlocks = 0;
    while (head < tail) {
        const uint32_t s = queue[head];
        const unsigned d = depth[head++];
        uint32_t next[32];
        const unsigned k = phils_moves(n, s, next);
        *transitions += k;
        if (k == 0 && (*deadlocks)++ == 0)
            *deadlock_depth = d;
        for (unsigned j = 0; j < k; j++) {
            const uint32_t t = next[j];
            if (!(seen[t / 8] & (1u << (t % 8)))) {
                seen[t / 8] |= (unsigned char)(1u << (t % 8));
                depth[tail] = d + 1;
                queue[tail++] = t;
            }
        }
    }
    *states = tail;
    free(seen);
    free(queue);
    free(depth);
}

static void phils_reference(unsigned n, unsigned long long *states, unsigned long long *transitions,
                            unsigned long long *deadlocks)
{
    unsigned depth;
    phils_search(n, states, transitions, deadlocks, &depth);
}

START_TEST(philosophers_against_a_plain_search)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const unsigned sizes[] = {2, 3, 5, 8, 10};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned long long states, transitions, deadlocks;
        phils_reference(sizes[k], &states, &transitions, &deadlocks);
        char model[32];
        snprintf(model, sizeof model, "phils:%u", sizes[k]);
        check_run(&d, model, "1", states, transitions);
        check_run(&d, model, "4", states, transitions);
        /* --deadlock: the states with no successor (every philosopher holding the left fork), exit 1 */
        char *out;
        ck_assert_int_eq(
            run_mc(&d, &out, (const char *const[]){"--model", model, "--workers", "3", "--deadlock", NULL}),
            deadlocks ? 1 : 0);
        ck_assert_msg(deadlocks == 1, "phils:%u: the plain search found %llu deadlocks", sizes[k], deadlocks);
        ck_assert_msg(field(out, "deadlocks    ") == deadlocks, "%s", out);
        char all_left[128] = "";
        for (unsigned i = 0; i < sizes[k]; i++)
            strcat(all_left, i ? " left" : "deadlock     left");
        ck_assert_msg(strstr(out, all_left), "no '%s' in:\n%s", all_left, out);
        free(out);
    }
    /* a model without deadlocks says so, and passes */
    char *out;
    ck_assert_int_eq(run_mc(&d, &out, (const char *const[]){"--model", "puzzle:2x3", "--deadlock", NULL}), 0);
    ck_assert_msg(strstr(out, "deadlocks    none"), "%s", out);
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(expect_and_bad_command_lines)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    char *out;
    /* --expect: the right count passes, a wrong one exits 1 and says so */
    ck_assert_int_eq(run_mc(&d, &out, (const char *const[]){"--model", "phils:4", "--expect", "1", NULL}), 1);
    ck_assert_msg(strstr(out, "WRONG") != NULL, "%s", out);
    free(out);
    /* --max-states: a model larger than the limit (hanoi:100 has 3^100 states) stops with exit 3 and its
     * table dropped; one that fits it finishes as usual */
    ck_assert_int_eq(run_mc(&d, &out, (const char *const[]){"--model", "hanoi:100", "--max-states", "20K", NULL}), 3);
    free(out);
    {
        char path[300], msg[1024] = "";
        snprintf(path, sizeof path, "%s/cli.err", d.dir);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        msg[fread(msg, 1, sizeof msg - 1, f)] = '\0';
        fclose(f);
        ck_assert_msg(strstr(msg, "more than --max-states 20480") && strstr(msg, "dropping its table"), "%s", msg);
        floe *c = connect_ok(&d);
        floe_table_info *all;
        size_t n;
        ck_assert_int_eq(floe_tables(c, &all, &n), FLOE_OK);
        ck_assert_uint_eq(n, 0);
        free(all);
        floe_close(c);
    }
    ck_assert_int_eq(run_mc(&d, &out, (const char *const[]){"--model", "hanoi:6", "--max-states", "1M", NULL}), 0);
    ck_assert_msg(strstr(out, "check        ok: 729 states") != NULL, "%s", out);
    free(out);
    static const struct {
        const char *args[8];
        int rc;
    } bad[] = {
        {{"--model", "hanoi:3", "--max-states", "0", NULL}, 2},
        {{"--model", "towers:3", NULL}, 2},
        {{"--model", "puzzle:1x5", NULL}, 2},
        {{"--model", "puzzle:3", NULL}, 2},
        {{"--model", "phils:1", NULL}, 2},
        {{"--model", "hanoi:0", NULL}, 2},
        {{"--model", "hanoi:3", "--worker", "1/4", NULL}, 2}, /* no --table */
        {{"--model", "hanoi:3", "--worker", "4/4", "--table", "x", NULL}, 2},
        {{"--model", "hanoi:3", "--workers", "0", NULL}, 2},
        {{"--model", "hanoi:3", "--batch", "0", NULL}, 2},
        {{"hanoi:3", NULL}, 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(run_mc(&d, &out, bad[i].args), bad[i].rc);
        free(out);
        char path[300], msg[512] = "";
        snprintf(path, sizeof path, "%s/cli.err", d.dir);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        size_t len = fread(msg, 1, sizeof msg - 1, f);
        msg[len] = '\0';
        fclose(f);
        ck_assert_msg(strstr(msg, "floe-mc: ") != NULL, "case %zu: no message on stderr", i);
    }
    /* a malformed server address is a usage error of floe-mc and floe-bench too (issue 41, 8) */
    const char *mc = tool_path("FLOE_MC", "build/san/floe-mc"),
               *bench = tool_path("FLOE_BENCH", "build/rel/floe-bench");
    expect_tool(&d, NULL, 2, NULL, "the port must be 1..65535",
                (const char *const[]){mc, "--model", "hanoi:3", "--server", "127.0.0.1:99999", NULL});
    expect_tool(&d, NULL, 2, NULL, "the scheme must be floe:// or floes://",
                (const char *const[]){bench, "-s", "http://x", "-n", "1", "-q", NULL});
    /* a TREE table made far too small for the model grows, and the run still finds the exact
     * count (hanoi:8 has 3^8 = 6561 states) */
    ck_assert_int_eq(
        run_mc(&d, &out,
               (const char *const[]){"--model", "hanoi:8", "--tree", "--capacity", "100", "--workers", "2", NULL}),
        0);
    ck_assert_msg(strstr(out, "check        ok") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "6561") != NULL, "%s", out);
    /* successors went as parent ids and changes, in parts too (some whole again after a growth) */
    ck_assert_msg(strstr(out, " by their parent, the rest whole)") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "(0 by their parent") == NULL, "%s", out);
    free(out);
    /* one worker with one request in flight: a growth comes inside a request, whose answer names
     * the new generation, so no later request names renamed parents (their states go whole):
     * every state is sent once, as many as into a table that never grows */
    ck_assert_int_eq(run_mc(&d, &out,
                            (const char *const[]){"--model", "hanoi:8", "--tree", "--workers", "1", "--inflight", "1",
                                                  "--batch", "500", NULL}),
                     0);
    const unsigned long long sent_sized = field(out, "sent "), by_parent_sized = field(out, "each (");
    free(out);
    ck_assert_int_eq(run_mc(&d, &out,
                            (const char *const[]){"--model", "hanoi:8", "--tree", "--capacity", "100", "--workers", "1",
                                                  "--inflight", "1", "--batch", "500", NULL}),
                     0);
    ck_assert_msg(strstr(out, "check        ok: 6561 states") != NULL, "%s", out);
    ck_assert_uint_eq(field(out, "sent "), sent_sized);
    ck_assert_msg(strstr(out, "again ") == NULL, "%s", out);
    ck_assert_uint_lt(field(out, "each ("), by_parent_sized); /* it grew: some went whole */
    free(out);
    /* the same with every state sent whole */
    ck_assert_int_eq(run_mc(&d, &out,
                            (const char *const[]){"--model", "hanoi:8", "--tree", "--whole", "--capacity", "100",
                                                  "--workers", "2", NULL}),
                     0);
    ck_assert_msg(strstr(out, "check        ok: 6561 states") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "32.0 bytes each (whole vectors)") != NULL, "%s", out); /* 8 words of 4 bytes */
    free(out);
    /* worker 0 of a run over hosts will not reuse a table that exists */
    floe *c = connect_ok(&d);
    floe_table_def t = {.name = "taken", .kind = FLOE_TABLE_SET, .key_bits = 6};
    ck_assert_int_eq(floe_create(c, &t), FLOE_OK);
    ck_assert_int_eq(
        run_mc(&d, &out, (const char *const[]){"--model", "hanoi:3", "--worker", "0/1", "--table", "taken", NULL}), 1);
    free(out);
    /* and the table is untouched */
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "taken", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, 0);
    /* one worker of a one-worker run over hosts is a whole run: hanoi:3 = 27 */
    ck_assert_int_eq(
        run_mc(&d, &out,
               (const char *const[]){"--model", "hanoi:3", "--worker", "0/1", "--table", "h3", "--keep", NULL}),
        0);
    ck_assert_uint_eq(field(out, "states "), 27);
    free(out);
    ck_assert_int_eq(floe_stats(c, "h3", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, 27);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* floe-mc --worker i/W with its output in path; returns the pid. */
static pid_t spawn_worker(const daemon_proc *d, const char *model, const char *which, const char *table,
                          const char *path)
{
    const char *mc = getenv("FLOE_MC") ? getenv("FLOE_MC") : "build/san/floe-mc";
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(path, "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(126);
        execl(mc, mc, "--server", d->uri, "--quiet", "--model", model, "--worker", which, "--table", table,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* A run over hosts: three processes, each --worker i/3 on one table; their
 * counts add up to the model's, and the table holds exactly those states. */
START_TEST(workers_over_hosts)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *which[3] = {"2/3", "1/3", "0/3"}; /* worker 0 last: the others wait for its table */
    pid_t pids[3];
    char paths[3][300];
    for (int i = 0; i < 3; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/mc%d.out", d.dir, i);
        pids[i] = spawn_worker(&d, "puzzle:3x3", which[i], "spread", paths[i]);
        usleep(100000);
    }
    unsigned long long states = 0, transitions = 0;
    for (int i = 0; i < 3; i++) {
        int status;
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker %s: status %d", which[i], status);
        char *out = slurp(paths[i]);
        ck_assert_ptr_nonnull(out);
        states += field(out, "states ");
        transitions += field(out, "transitions ");
        free(out);
    }
    ck_assert_uint_eq(states, 181440);
    ck_assert_uint_eq(transitions, puzzle_transitions(3, 3, 181440));
    floe *c = connect_ok(&d);
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "spread", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, 181440);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* floe-mc stopped by SIGINT or SIGTERM while it runs: its workers stop, it
 * exits 128 + the signal, and its table is dropped (issue 41, 6). */
START_TEST(interrupted_run_drops_its_table)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *mc = getenv("FLOE_MC") ? getenv("FLOE_MC") : "build/san/floe-mc";
    const int sigs[2] = {SIGINT, SIGTERM};
    for (int k = 0; k < 2; k++) {
        char err_path[300];
        snprintf(err_path, sizeof err_path, "%s/mc-int.err", d.dir);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            if (!freopen("/dev/null", "w", stdout) || !freopen(err_path, "w", stderr))
                _exit(126);
            /* puzzle:3x4 on the CPU engine runs for minutes: long enough to be interrupted.
             * A small growing table: the model's own size (275 M) takes seconds to
             * create under ThreadSanitizer. */
            execl(mc, mc, "--server", d.uri, "--quiet", "--model", "puzzle:3x4", "--workers", "2", "--table", "intr",
                  "--capacity", "1M", (char *)NULL);
            _exit(127);
        }
        floe *c = connect_ok(&d);
        floe_table_info info;
        int seen = 0, status;
        /* until its table has states (60 s: the slowest floed of the runs is under TSan),
         * or until floe-mc ends, which is a failure that its stderr explains */
        for (int i = 0; i < 1200 && !seen; i++) {
            usleep(50000);
            seen = floe_stats(c, "intr", &info) == FLOE_OK && info.keys > 0;
            if (!seen && waitpid(pid, &status, WNOHANG) == pid) {
                char *err = slurp(err_path);
                ck_abort_msg("floe-mc ended (status %d) before its table had states: %s", status, err ? err : "");
            }
        }
        ck_assert_msg(seen, "floe-mc made no table with states in 60 s");
        ck_assert_int_eq(kill(pid, sigs[k]), 0);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        char *err = slurp(err_path);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 128 + sigs[k], "status %d: %s", status,
                      err ? err : "");
        ck_assert_msg(err && strstr(err, "interrupted") && strstr(err, "dropping its table"), "%s", err ? err : "");
        free(err);
        ck_assert_int_eq(floe_stats(c, "intr", &info), FLOE_ERR_NO_TABLE);
        floe_close(c);
    }
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* A model written as a plugin (examples/mc/models/peterson.c): the state
 * counts of peterson_count.py, a search in Python of its own; its
 * invariant held, and broken in the naive lock (the first violating state
 * printed, exit 1); libraries and parameters that are not right refused. */
START_TEST(a_model_library)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *lib = tool_path("FLOE_MC_PETERSON", "build/rel/libmc_peterson.so");
    static const struct {
        const char *model, *workers, *tree;
        unsigned long long states;
    } runs[] = {
        {"peterson:2", "1", NULL, 20},
        {"peterson:3", "4", NULL, 288},
        {"peterson:4", "3", "--tree", 4752},
        {"peterson:5", "4", NULL, 88560},
    };
    char *out;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const int rc = run_mc(&d, &out,
                              (const char *const[]){"--model-lib", lib, "--model", runs[i].model, "--workers",
                                                    runs[i].workers, runs[i].tree, NULL});
        ck_assert_msg(rc == 0, "%s exited %d:\n%s", runs[i].model, rc, out);
        ck_assert_msg(field(out, "states ") == runs[i].states, "%s: %llu states, expected %llu", runs[i].model,
                      field(out, "states "), runs[i].states);
        ck_assert_msg(strstr(out, "invariant    holds in every state"), "%s", out);
        ck_assert_msg(strstr(out, runs[i].tree ? "TREE table" : "SET table"), "%s", out);
        free(out);
    }
    /* the lock without its wait: two processes in the critical section */
    ck_assert_int_eq(run_mc(&d, &out, (const char *const[]){"--model-lib", lib, "--model", "naive:3", NULL}), 1);
    ck_assert_msg(strstr(out, "invariant    VIOLATED in "), "%s", out);
    const char *v = strstr(out, "violation    ");
    ck_assert_msg(v && strstr(v, "crit") && strstr(strstr(v, "crit") + 4, "crit"), "no state with two in crit:\n%s",
                  out);
    free(out);
    /* what is not a model library, or not its parameters */
    static const char *const bad[][5] = {
        {"--model-lib", "/nonexistent/libmodel.so", NULL},
        {"--model-lib", "PLUGIN", "--model", "peterson:1", NULL},
        {"--model-lib", "PLUGIN", "--model", "peterson:x", NULL},
        {"--model-lib", "libc.so.6", NULL}, /* a library, of no model */
    };
    static const char *const why[] = {"cannot load the model library", "expected peterson:N", "expected peterson:N",
                                      "is no model library"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[6] = {NULL};
        for (int k = 0; bad[i][k]; k++)
            args[k] = strcmp(bad[i][k], "PLUGIN") == 0 ? lib : bad[i][k];
        ck_assert_int_eq(run_mc(&d, &out, args), 2);
        free(out);
        char path[300], msg[600] = "";
        snprintf(path, sizeof path, "%s/cli.err", d.dir);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        msg[fread(msg, 1, sizeof msg - 1, f)] = '\0';
        fclose(f);
        ck_assert_msg(strstr(msg, why[i]), "case %zu: '%s' lacks '%s'", i, msg, why[i]);
    }
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* --server-queue: the open set on the server.  Every built-in model and
 * the plugin, SET and TREE, against the same independent counts as the
 * workers' own queues (transitions too: every state expanded once), and
 * the table gone at the end. */
START_TEST(server_queue_counts)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *lib = tool_path("FLOE_MC_PETERSON", "build/rel/libmc_peterson.so");
    unsigned long long phils_states, phils_trans, phils_dead;
    phils_reference(8, &phils_states, &phils_trans, &phils_dead);
    const struct {
        const char *args[8];
        unsigned long long states, transitions;
    } runs[] = {
        {{"--model", "puzzle:3x3", "--workers", "4"}, 181440, puzzle_transitions(3, 3, 181440)},
        {{"--model", "hanoi:8", "--workers", "1", "--tree"}, 6561, 19680},
        {{"--model", "phils:8", "--workers", "3", "--claim", "7"}, phils_states, phils_trans},
        {{"--model-lib", lib, "--model", "peterson:4", "--workers", "3", "--tree"}, 4752, 0},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const char *args[12] = {"--server-queue", "--table", "sq"};
        for (int k = 0; runs[i].args[k]; k++)
            args[3 + k] = runs[i].args[k];
        char *out;
        const int rc = run_mc(&d, &out, args);
        ck_assert_msg(rc == 0, "run %zu exited %d:\n%s", i, rc, out);
        ck_assert_msg(field(out, "states ") == runs[i].states, "run %zu: %llu states, expected %llu", i,
                      field(out, "states "), runs[i].states);
        if (runs[i].transitions)
            ck_assert_msg(field(out, "transitions ") == runs[i].transitions, "run %zu:\n%s", i, out);
        free(out);
        floe *c = connect_ok(&d);
        floe_table_info info;
        ck_assert_int_eq(floe_stats(c, "sq", &info), FLOE_ERR_NO_TABLE); /* a finished run's table goes */
        floe_close(c);
    }
    /* under mpirun (where this floe-mc has MPI): each rank a worker, rank 0 makes the run and reports it */
    const char *mc = tool_path("FLOE_MC", "build/san/floe-mc");
    char *help = NULL;
    run_tool(&d, NULL, &help, ARGS(mc, "--help"));
    if (help && strstr(help, "this floe-mc has MPI") && access("/usr/bin/mpirun", X_OK) == 0) {
        char *out = NULL;
        const char *argv[] = {
            "/usr/bin/mpirun", "--oversubscribe", "-np", "3", mc, "--server", "@URI", "--quiet", "--model",
            "puzzle:3x3",      "--server-queue",  NULL,  NULL};
        if (getuid() == 0) { /* as root mpirun wants to be told (a container, CI) */
            memmove(argv + 2, argv + 1, 10 * sizeof *argv);
            argv[1] = "--allow-run-as-root";
        }
        char *asan = getenv("ASAN_OPTIONS") ? strdup(getenv("ASAN_OPTIONS")) : NULL;
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1); /* OpenMPI keeps what it allocates to the end */
        const int rc = run_tool(&d, NULL, &out, argv);
        if (asan)
            setenv("ASAN_OPTIONS", asan, 1);
        else
            unsetenv("ASAN_OPTIONS");
        free(asan);
        ck_assert_msg(rc == 0 && field(out, "states ") == 181440 && strstr(out, "one per MPI rank"), "mpirun: %d\n%s",
                      rc, out ? out : "");
        free(out);
    }
    free(help);
    /* what cannot be resumed, and flags that need --server-queue */
    floe *c = connect_ok(&d);
    floe_table_def plain = {.name = "plain", .kind = FLOE_TABLE_SET, .key_bits = 48};
    ck_assert_int_eq(floe_create(c, &plain), FLOE_OK);
    floe_close(c);
    static const struct {
        const char *args[8];
        int rc;
        const char *why;
    } bad[] = {
        {{"--model", "puzzle:3x3", "--resume", "nosuch"}, 1, "--resume nosuch"},
        {{"--model", "puzzle:3x3", "--resume", "plain"}, 1, "not a run's table"},
        {{"--model", "puzzle:3x3", "--resume", "a", "--table", "b"}, 2, "names the table"},
        {{"--model", "puzzle:3x3", "--trace"}, 2, "go with --server-queue"},
        {{"--model", "puzzle:3x3", "--max-depth", "0", "--server-queue"}, 2, "--max-depth takes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        ck_assert_int_eq(run_mc(&d, &out, bad[i].args), bad[i].rc);
        free(out);
        char *err = last_stderr(&d);
        ck_assert_msg(err && strstr(err, bad[i].why), "case %zu: '%s' lacks '%s'", i, err ? err : "", bad[i].why);
        free(err);
    }
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* The trace floe-mc --trace printed for phils:n's deadlock (in out),
 * replayed with this file's own rules: the first state initial, every step
 * a transition, the last a deadlock, as long as the breadth-first depth. */
static void replay_deadlock_trace(const char *out, unsigned n, unsigned depth)
{
    static const char *const what[] = {"think", "left", "eat"};
    const char *t = strstr(out, "trace        ");
    ck_assert_msg(t != NULL, "no trace in:\n%s", out);
    ck_assert_uint_eq(field(t, "trace        "), depth);
    t = strchr(t, '\n') + 1;
    uint32_t prev = 0;
    unsigned steps = 0;
    for (unsigned line = 0; *t == ' '; line++) {
        unsigned at;
        int used;
        ck_assert_int_eq(sscanf(t, " %u %n", &at, &used), 1);
        ck_assert_uint_eq(at, line);
        const char *w = t + used;
        uint32_t s = 0;
        for (unsigned i = 0; i < n; i++) { /* "think left eat ..." */
            unsigned v = 3;
            for (unsigned k = 0; k < 3; k++)
                if (strncmp(w, what[k], strlen(what[k])) == 0 && (w[strlen(what[k])] == ' '))
                    v = k;
            ck_assert_msg(v < 3, "line %u: '%.40s'", line, w);
            s |= v << (2 * i);
            w += strlen(what[v]) + 1;
        }
        if (line == 0) {
            ck_assert_uint_eq(s, 0); /* the initial state: everyone thinks */
        } else {
            uint32_t next[32];
            const unsigned k = phils_moves(n, prev, next);
            int found = 0;
            for (unsigned j = 0; j < k; j++)
                found |= next[j] == s;
            ck_assert_msg(found, "line %u is no successor of line %u", line, line - 1);
        }
        prev = s;
        steps = line;
        t = strchr(t, '\n') + 1;
    }
    uint32_t next[32];
    ck_assert_uint_eq(phils_moves(n, prev, next), 0); /* the last: a deadlock */
    ck_assert_uint_eq(steps, depth);
}

/* The dining philosophers' deadlock with its trace (--trace), replayed. */
START_TEST(deadlock_trace_replayed)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    for (unsigned n = 3; n <= 6; n += 3) {
        unsigned long long states, transitions, deadlocks;
        unsigned depth = 0;
        phils_search(n, &states, &transitions, &deadlocks, &depth);
        char model[16];
        snprintf(model, sizeof model, "phils:%u", n);
        char *out;
        ck_assert_int_eq(run_mc(&d, &out,
                                (const char *const[]){"--model", model, "--server-queue", "--workers", "2",
                                                      "--deadlock", "--trace", NULL}),
                         1);
        ck_assert_uint_eq(field(out, "states "), states);
        replay_deadlock_trace(out, n, depth);
        free(out);
    }
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* floe-mc ARGS in the background against port-file's floed, its stdout
 * and stderr in path. */
static pid_t spawn_mc(const char *uri, const char *path, const char *const *args)
{
    const char *mc = getenv("FLOE_MC") ? getenv("FLOE_MC") : "build/san/floe-mc";
    const char *argv[24] = {mc, "--server", uri, "--quiet"};
    for (int k = 0; args[k]; k++)
        argv[4 + k] = args[k];
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(path, "w", stdout) || dup2(1, 2) != 2)
            _exit(126);
        execv(mc, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int wait_exit(pid_t pid)
{
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The states the run in table k has found (0 if floed does not answer). */
static uint64_t found(const daemon_proc *d, uint64_t *claims)
{
    floe *c = connect_ok(d);
    floe_table_info info;
    const int st = floe_stats(c, "k", &info);
    floe_close(c);
    if (claims)
        *claims = st == FLOE_OK ? info.explore.claims : 0;
    return st == FLOE_OK ? info.explore.states : 0;
}

/* Waits until the run in k has found more than `beyond` states (or, with
 * beyond 0, has a claim out); false if floe-mc ended first. */
static bool progressed(const daemon_proc *d, pid_t mc, uint64_t beyond)
{
    for (int i = 0; i < 6000; i++) {
        uint64_t claims;
        const uint64_t n = found(d, &claims);
        if (beyond ? n > beyond : claims > 0)
            return true;
        if (waitpid(mc, NULL, WNOHANG) == mc)
            return false;
        usleep(5000);
    }
    return false;
}

/* A run that survives kill -9: 2 of its 8 workers killed, then floed
 * killed three times (right after a snapshot, in the middle of a run
 * resumed, and as soon as a resumed run has a claim out) and started
 * again on its data dir, the run resumed each time with --resume.  The
 * count at the end is exact. */
START_TEST(a_run_survives_kill_9)
{
    char data[] = "/tmp/floe-mc-kill-XXXXXX", path[300];
    ck_assert_ptr_nonnull(mkdtemp(data));
    const char *flags[] = {"--data-dir", data, "--save-every", "1", NULL};
    daemon_proc d;
    daemon_start_logged(&d, flags);
    snprintf(path, sizeof path, "%s/mc.out", data);
    /* small claims and requests: a run of some seconds, past several snapshots (hanoi:12 took 0.95 s
     * on an H200 host, its table dropped at its end before its first snapshot: 3^14 states there) */
    const bool gpu = strcmp(expected_backend(), "gpu") == 0;
    const char *model = gpu ? "hanoi:14" : "hanoi:12";
    const uint64_t total = gpu ? 4782969 : 531441; /* 3^14, 3^12 */
    const char *first[] = {
        "--server-queue", "--table", "k",       "--model", model,        "--workers", "8", "--lease", "1",
        "--claim",        "32",      "--batch", "96",      "--inflight", "2",         NULL};
    const char *again[] = {"--resume", "k",       "--model", model,        "--workers", "4", "--claim",
                           "32",       "--batch", "96",      "--inflight", "2",         NULL};
    for (int round = 0; round < 4; round++) {
        pid_t mc = spawn_mc(d.uri, path, round ? again : first);
        if (round == 0) { /* two workers killed: the others finish their claims when the lease ends */
            ck_assert_msg(progressed(&d, mc, 50000), "the run ended before its workers could be killed");
            char children[64], list[256] = "";
            snprintf(children, sizeof children, "/proc/%d/task/%d/children", (int)mc, (int)mc);
            FILE *f = fopen(children, "r");
            ck_assert_ptr_nonnull(f);
            ck_assert_ptr_nonnull(fgets(list, sizeof list, f));
            fclose(f);
            int w1 = 0, w2 = 0;
            ck_assert_int_eq(sscanf(list, "%d %d", &w1, &w2), 2);
            kill(w1, SIGKILL);
            kill(w2, SIGKILL);
            const int saves = log_count(&d, "snapshot of table k written");
            for (int i = 0; i < 2000 && log_count(&d, "snapshot of table k written") == saves; i++)
                usleep(5000);
            if (log_count(&d, "snapshot of table k written") == saves) { /* what floed was doing, to see why */
                char *log = log_text(&d);
                const size_t len = log ? strlen(log) : 0;
                fprintf(stderr, "floed's log, its end:\n%s\n", log ? log + (len > 4000 ? len - 4000 : 0) : "(none)");
                free(log);
            }
            ck_assert_msg(log_count(&d, "snapshot of table k written") > saves,
                          "no snapshot in 10 s after two workers were killed (%llu states found; floed's log above)",
                          (unsigned long long)found(&d, NULL));
        } else if (round == 1 || round == 2) {
            /* round 1: killed a quarter of the way through what is left (on a GPU, round 0 may have
             * found most of the run by its first snapshot) */
            const uint64_t before = round == 1 ? found(&d, NULL) : 0;
            if (!progressed(&d, mc, round == 1 ? before + (total - before) / 4 : 0)) {
                char *out = slurp(path);
                ck_abort_msg("round %d ended before its kill:\n%s", round, out ? out : "");
            }
        }
        if (round < 3) {
            ck_assert_int_eq(daemon_stop(&d, SIGKILL), 128 + SIGKILL);
            daemon_start_logged(&d, flags);
        }
        const int rc = wait_exit(mc);
        char *out = slurp(path);
        if (round < 3) {
            ck_assert_msg(rc == 1 && strstr(out, "go on with floe-mc --resume k"), "round %d: exit %d:\n%s", round, rc,
                          out);
            if (round == 0)
                ck_assert_msg(strstr(out, "died of signal 9"), "%s", out);
        } else {
            ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
            ck_assert_uint_eq(field(out, "states "), total);
            ck_assert_msg(strstr(out, "check        ok"), "%s", out);
        }
        free(out);
    }
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(data);
}
END_TEST

/* The same runs with the open set over three floed (each server the open
 * set of its states; the workers end the levels): exact counts for the
 * built-in models and the plugin, SET and TREE, a deadlock's trace
 * followed across the servers and replayed, and a run that loses a worker
 * to kill -9, is interrupted, and is resumed to the exact count. */
START_TEST(server_queue_over_three_floed)
{
    daemon_proc d[3];
    for (int i = 0; i < 3; i++)
        daemon_start(&d[i], NULL);
    char uri[512];
    const char *hp[3];
    for (int i = 0; i < 3; i++)
        hp[i] = strstr(d[i].uri, "://") ? strstr(d[i].uri, "://") + 3 : d[i].uri;
    snprintf(uri, sizeof uri, "%s%s,%s,%s", harness_tls() ? "floes://" : "floe://", hp[0], hp[1], hp[2]);
    const char *mc = tool_path("FLOE_MC", "build/san/floe-mc");
    const char *lib = tool_path("FLOE_MC_PETERSON", "build/rel/libmc_peterson.so");
    unsigned long long phils_states, phils_trans, deadlocks;
    unsigned depth = 0;
    phils_search(6, &phils_states, &phils_trans, &deadlocks, &depth);
    const struct {
        const char *args[10];
        int rc;
        unsigned long long states;
    } runs[] = {
        {{"--model", "puzzle:3x3", "--workers", "4"}, 0, 181440},
        {{"--model", "hanoi:7", "--workers", "2", "--tree"}, 0, 2187},
        {{"--model-lib", lib, "--model", "peterson:4", "--workers", "3", "--tree"}, 0, 4752},
        {{"--model", "phils:6", "--workers", "2", "--deadlock", "--trace"}, 1, phils_states},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const char *argv[20] = {mc, "--server", uri, "--quiet", "--server-queue"};
        for (int k = 0; runs[i].args[k]; k++)
            argv[5 + k] = runs[i].args[k];
        char *out = NULL;
        const int rc = run_tool(&d[0], NULL, &out, argv);
        ck_assert_msg(rc == runs[i].rc && field(out, "states ") == runs[i].states, "run %zu: exit %d:\n%s", i, rc,
                      out ? out : "");
        if (runs[i].rc)
            replay_deadlock_trace(out, 6, depth);
        free(out);
    }
    /* a worker killed, the run interrupted, then resumed */
    char path[] = "/tmp/floe-mc-three-XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    const char *first[] = {
        "--server-queue", "--table", "k",       "--model", "hanoi:10",   "--workers", "3", "--lease", "1",
        "--claim",        "16",      "--batch", "48",      "--inflight", "2",         NULL};
    pid_t run = spawn_mc(uri, path, first);
    floe *c = connect_uri(uri, NULL, 0);
    ck_assert_ptr_nonnull(c);
    floe_table_info info = {0};
    for (int i = 0; i < 4000 && (floe_stats(c, "k", &info) != FLOE_OK || info.explore.states < 5000); i++)
        usleep(2000);
    char children[64], list[256] = "";
    snprintf(children, sizeof children, "/proc/%d/task/%d/children", (int)run, (int)run);
    FILE *f = fopen(children, "r");
    ck_assert_msg(f && fgets(list, sizeof list, f), "floe-mc has no workers to kill: it ended too soon");
    fclose(f);
    kill(atoi(list), SIGKILL);
    const uint64_t at_kill = info.explore.states;
    for (int i = 0; i < 4000 && floe_stats(c, "k", &info) == FLOE_OK && info.explore.states < at_kill + 5000; i++)
        usleep(2000);
    kill(run, SIGINT);
    int rc = wait_exit(run);
    char *out = slurp(path);
    ck_assert_msg(rc == 128 + SIGINT && strstr(out, "go on with floe-mc --resume k"), "exit %d:\n%s", rc, out);
    free(out);
    ck_assert_int_eq(floe_stats(c, "k", &info), FLOE_OK);
    ck_assert(!info.explore.done && info.explore.states < 59049);
    const char *again[] = {"--resume", "k", "--model", "hanoi:10", "--workers", "2", "--claim", "16", NULL};
    run = spawn_mc(uri, path, again);
    rc = wait_exit(run);
    out = slurp(path);
    ck_assert_msg(rc == 0 && field(out, "states ") == 59049 && strstr(out, "check        ok"), "exit %d:\n%s", rc, out);
    free(out);
    ck_assert_int_eq(floe_stats(c, "k", &info), FLOE_ERR_NO_TABLE); /* a finished run's table goes */
    floe_close(c);
    unlink(path);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(daemon_stop(&d[i], SIGTERM), 0);
}
END_TEST

/* The sliding-tile puzzle's moves in floe-mc's order (up, down, left,
 * right of the blank, those on the board): the successor number `label`
 * of a board packed `bits` a cell, or 0 when it has fewer. */
static uint64_t puzzle_move(unsigned rows, unsigned cols, unsigned bits, uint64_t s, unsigned label)
{
    const uint64_t mask = (1ull << bits) - 1;
    unsigned blank = 0;
    while ((s >> (blank * bits)) & mask)
        blank++;
    const int r = (int)(blank / cols), c = (int)(blank % cols);
    const int dr[4] = {-1, 1, 0, 0}, dc[4] = {0, 0, -1, 1};
    for (unsigned d = 0, j = 0; d < 4; d++) {
        const int nr = r + dr[d], nc = c + dc[d];
        if (nr < 0 || nr >= (int)rows || nc < 0 || nc >= (int)cols)
            continue;
        if (j++ != label)
            continue;
        const unsigned f = (unsigned)(nr * (int)cols + nc);
        const uint64_t tile = (s >> (f * bits)) & mask;
        return (s & ~(mask << (f * bits))) | tile << (blank * bits);
    }
    return 0;
}

/* Every state of a --server-queue run of puzzle:2x3 (small requests and
 * claims, so that a parent's successors straddle requests) traced back:
 * each step is its label's move from the state before, from the solved
 * board.  The run's levels (floe_explore_levels, `floe stats`, /metrics)
 * are those of a breadth-first search of the test's own. */
START_TEST(server_queue_labels_replay)
{
    enum { STATES = 360 };                                          /* 6!/2 */
    const uint64_t solved = 1 | 2 << 3 | 3 << 6 | 4 << 9 | 5 << 12; /* tiles 1..5, the blank last; 3 bits a cell */
    uint64_t seen[STATES], want[32] = {0};
    size_t nseen = 1, depths = 0;
    seen[0] = solved;
    for (size_t from = 0, end = 1; from < end; depths++) { /* level by level */
        want[depths] = end - from;
        for (size_t i = from; i < end; i++)
            for (unsigned l = 0; l < 4; l++) {
                const uint64_t t = puzzle_move(2, 3, 3, seen[i], l);
                bool dup = t == 0;
                for (size_t k = 0; k < nseen && !dup; k++)
                    dup = seen[k] == t;
                if (!dup)
                    seen[nseen++] = t;
            }
        from = end;
        end = nseen;
    }
    ck_assert_uint_eq(nseen, STATES);
    const unsigned mport = free_port();
    char ps[16];
    snprintf(ps, sizeof ps, "%u", mport);
    const char *flags[] = {"--metrics-port", ps, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    char *out;
    const int rc = run_mc(&d, &out,
                          (const char *const[]){"--model", "puzzle:2x3", "--server-queue", "--table", "lab", "--keep",
                                                "--workers", "3", "--batch", "10", "--claim", "4", NULL});
    ck_assert_msg(rc == 0 && field(out, "states ") == STATES, "exit %d:\n%s", rc, out);
    free(out);
    floe *c = connect_ok(&d);
    uint64_t *sizes, bytes;
    size_t levels;
    ck_assert_int_eq(floe_explore_levels(c, "lab", &sizes, &levels, &bytes), FLOE_OK);
    ck_assert_uint_eq(levels, depths);
    ck_assert(memcmp(sizes, want, depths * 8) == 0 && bytes >= STATES * 17);
    free(sizes);
    /* the open set lives where the table does, and counts in its memory */
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "lab", &info), FLOE_OK);
    const bool gpu = strcmp(expected_backend(), "gpu") == 0;
    ck_assert_msg(gpu ? strncmp(info.explore.memory, "GPU ", 4) == 0 : strcmp(info.explore.memory, "host") == 0,
                  "the open set of a %s table is in %s", expected_backend(), info.explore.memory);
    ck_assert_uint_ge(info.memory_bytes, bytes + 1);
    ck_assert(info.bytes_per_key >= (double)bytes / STATES);
    ck_assert_int_eq(floe_explore_levels(c, "nope", &sizes, &levels, NULL), FLOE_ERR_NO_TABLE);
    char line[512] = "level_sizes:", metric[128];
    for (size_t l = 0; l < depths; l++)
        snprintf(line + strlen(line), sizeof line - strlen(line), " %llu", (unsigned long long)want[l]);
    const char *cli = tool_path("FLOE_CLI", "build/san/floe");
    out = NULL;
    ck_assert_int_eq(run_tool(&d, NULL, &out, ARGS(cli, "--server", d.uri, "stats", "lab")), 0);
    ck_assert_msg(out && strstr(out, line) && strstr(out, "explore: 360 states found in") &&
                      strstr(out, gpu ? "(GPU " : "(host memory: "),
                  "want '%s' in:\n%s", line, out ? out : "");
    free(out);
    char *m = http_request(mport, "GET /metrics HTTP/1.0\r\n\r\n");
    snprintf(metric, sizeof metric, "\nfloe_explore_levels{table=\"lab\"} %zu\n", depths);
    ck_assert_msg(strstr(m, "\nfloe_explore_states{table=\"lab\"} 360\n") && strstr(m, metric) &&
                      strstr(m, "\nfloe_explore_done{table=\"lab\"} 1\n") &&
                      strstr(m, "\nfloe_explore_open_states{table=\"lab\"} 0\n"),
                  "%s", m);
    const char *mem = strstr(m, "\nfloe_table_memory_bytes{table=\"lab\"} "); /* the open set counted in */
    ck_assert_msg(mem && strtod(strchr(mem, '}') + 1, NULL) == (double)info.memory_bytes, "want %llu in:\n%s",
                  (unsigned long long)info.memory_bytes, m);
    free(m);
    for (uint64_t id = 0; id < STATES; id++) {
        uint64_t *ids;
        void *keys, *labels;
        size_t n;
        ck_assert_int_eq(floe_trace(c, "lab", id, &ids, &keys, &labels, &n), FLOE_OK);
        const uint64_t *k = keys;
        const uint8_t *l = labels;
        ck_assert(n >= 1 && ids[n - 1] == id && k[0] == solved && l != NULL);
        for (size_t t = 1; t < n; t++)
            ck_assert_msg(puzzle_move(2, 3, 3, k[t - 1], l[t]) == k[t], "state %llu, step %zu", (unsigned long long)id,
                          t);
        free(ids), free(keys), free(labels);
    }
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *mc_suite(void)
{
    Suite *s = suite_create("mc");
    TCase *tc = tcase_create("mc");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, puzzle_and_hanoi_closed_forms);
    tcase_add_test(tc, tree_table_counts);
    tcase_add_test(tc, workers_over_hosts);
    tcase_add_test(tc, philosophers_against_a_plain_search);
    tcase_add_test(tc, expect_and_bad_command_lines);
    tcase_add_test(tc, interrupted_run_drops_its_table);
    tcase_add_test(tc, a_model_library);
    tcase_add_test(tc, server_queue_counts);
    tcase_add_test(tc, server_queue_labels_replay);
    tcase_add_test(tc, deadlock_trace_replayed);
    tcase_add_test(tc, server_queue_over_three_floed);
    tcase_add_test(tc, a_run_survives_kill_9);
    suite_add_tcase(s, tc);
    return s;
}
