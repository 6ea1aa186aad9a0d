/*
 * cli.c - floe, the command-line client: one subcommand per protocol
 * operation, keys as arguments or one per line on stdin, bulk loading with
 * a progress bar, --json for the commands that report figures.  Output goes
 * to stdout, errors to stderr; the exit code is 0 on success, 1 when the
 * server or the connection reports an error, 2 for a usage error.
 *
 * Options: getopt_long twice, first for the global options before the
 * command (stopping at it), then for the command's own options, which may
 * come before, between or after its arguments (`--` ends them, for a table
 * whose name starts with '-').  The command line is parsed before connecting.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "floe_getopt.h"

int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("floe: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

int fail(floe *c, int st)
{
    const char *msg = floe_errstr(c);
    fprintf(stderr, "floe: %s%s%s\n", floe_strerror(st), msg && msg[0] ? ": " : "", msg ? msg : "");
    return 1;
}

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *kind_name(int kind)
{
    return kind == FLOE_TABLE_SET       ? "SET"
           : kind == FLOE_TABLE_MAP     ? "MAP"
           : kind == FLOE_TABLE_TREE    ? "TREE"
           : kind == FLOE_TABLE_ORDERED ? "ORDERED"
           : kind == FLOE_TABLE_STATIC  ? "STATIC"
                                        : "?";
}

/* Whether a table stores a value with each key (a MAP, an ORDERED or STATIC table of value_bytes 4 or 8). */
bool has_values(const floe_table_info *t)
{
    return t->kind == FLOE_TABLE_MAP ||
           ((t->kind == FLOE_TABLE_ORDERED || t->kind == FLOE_TABLE_STATIC) && t->value_bytes);
}

static const cmd CMDS[] = {
    {"ping", "check that the server answers, and how fast", "", "check that the server answers, and how fast", 0, 0, 0,
     cmd_ping},
    {"info", "the server: version, limits, uptime, counters by operation, tables", "[SECTION] [--json]",
     "the server: version, backend and limits (its hello reply), then build, uptime, GPU, connections, requests, "
     "keys and errors by operation, errors by status, bytes in and out, memory, the last snapshot and each table's "
     "keys, fill, memory and changes since its snapshot (a floed without the info operation: the hello reply only, "
     "and a note saying so). SECTION prints one part, as redis-cli's INFO does: server, clients, memory, "
     "persistence, stats, gpu or tables",
     G_JSON, 0, 1, cmd_info},
    {"tables", "list the tables with their sizes", "[--json]", "list the tables with their sizes", G_JSON, 0, 0,
     cmd_tables},
    {"create", "create a table (SET, MAP, TREE, ORDERED or STATIC)",
     "NAME [--kind set|map|tree|ordered|static] [--key-bits N] [--value-bytes 0|4|8] [--words N] [--capacity N] "
     "[--memory SIZE] [--grow | --no-grow] [--max-fill F] [--parts N] [--explore [--label-bytes N]] "
     "[--backend cpu|gpu|auto]",
     "create a table (defaults: SET, 64-bit keys, capacity 1 Mi; MAP values 8 bytes). A SET or MAP grows with "
     "--grow (else FULL answers when it is full); a TREE grows unless --no-grow (then ids stay stable for its life). "
     "TREE: vectors of --words N 32-bit words (2..256), --memory bytes for its node and root tables (default: from "
     "--capacity; with growth, where it starts). ORDERED: keys kept in order for range, succ, pred, min, max and an "
     "ordered dump, with --value-bytes 4 or 8 values (default 0: keys only); it always grows. "
     "STATIC: filled by insert and load (--value-bytes 4 or 8: with values; it grows unless --no-grow), then "
     "frozen by `floe freeze` into a static cuckoo table that answers finds only, in fewer bytes a key (on the "
     "CPU engine so far). "
     "--parts N: the table in N parts over the server's GPUs, each part a whole table of its share of the keys "
     "(default: the server's choice: whole on the GPU with the most free memory, in parts over all of them when it "
     "fits on none; docs/OPERATIONS.md, \"Several GPUs\"). "
     "--explore: a model checker's run on the server (SET, MAP, TREE): every key stored new joins the table's open "
     "set, which workers claim (libfloe's floe_claim_states; docs/PROTOCOL.md, \"Exploring tables\"), with "
     "--label-bytes N (0..4) of action label a state; stats shows the run. "
     "Sizes take K, M, G, T (powers of 1024)",
     G_CREATE, 1, 1, cmd_create},
    {"drop", "drop a table and everything in it", "NAME", "drop a table and everything in it", 0, 1, 1, cmd_drop},
    {"stats", "a table's figures", "NAME [--json]",
     "a table's figures: keys, fill per level, memory, bytes per key, where its batches spent their time (TREE: "
     "vectors, nodes, node fill, bytes per vector, compression, orphan nodes)",
     G_JSON, 1, 1, cmd_stats},
    {"insert", "find-or-put keys, from the arguments or stdin", "NAME [KEY... | KEY=VALUE... | VECTOR...]",
     "find-or-put keys (MAP: KEY=VALUE, upsert; TREE: vectors 1,2,3,... of exactly `words` words, answered "
     "VECTOR ANSWER ID); no keys: read them from stdin, one per line. Every key is checked before the first is "
     "sent; many keys go in requests of up to 64 Ki keys (fewer if the server's max-frame asks), answered in order",
     0, 1, -1, cmd_insert},
    {"find", "look keys up", "NAME [KEY... | VECTOR...]",
     "look keys up (MAP: with their values; TREE: vectors 1,2,3,..., with their ids); no keys: stdin", 0, 1, -1,
     cmd_find},
    {"erase", "erase keys", "NAME [KEY...]", "erase keys (not on a TREE); no keys: stdin", 0, 1, -1, cmd_erase},
    {"add", "MAP: add a delta to each key's value", "NAME [KEY=DELTA... | KEY DELTA...]",
     "MAP: each key's value += DELTA (wrapping at the table's value_bytes: 2^32 or 2^64; a key not there is stored "
     "with its delta), answered KEY ANSWER VALUE with the value after its own delta, in order (a key twice: the "
     "second sees the first); no keys: stdin, KEY DELTA per line. Every key and delta is checked before the first "
     "is sent",
     0, 1, -1, cmd_add},
    {"get", "TREE: the vectors of ids", "NAME [ID...]",
     "TREE: the vector of each id, ID 1,2,3,... per line (ID ABSENT for an id that names none); no ids: stdin", 0, 1,
     -1, cmd_get},
    {"load", "bulk insert from a file, with a progress bar", "NAME FILE [--binary] [--batch N]",
     "bulk insert from FILE (- for stdin): text, one key per line (MAP: KEY VALUE; TREE: a vector 1,2,3,...), or "
     "--binary raw little-endian u64 keys (TREE: `words` u32 words per vector); --batch keys per request (default "
     "64K, fewer if the server's max-frame asks), 4 in flight; shows progress and a summary; exits 1 if any key "
     "came back FULL; a bad line, a key wider than the table or a partial --binary key stops it there (exit 2), "
     "what came before it inserted and counted",
     G_LOAD, 2, 2, cmd_load},
    {"dump", "print every key", "NAME [--values]",
     "print every key (--values, of a MAP or an ORDERED table with values: KEY VALUE; TREE: ID VECTOR) one per "
     "line; an ORDERED table's in ascending order",
     G_DUMP, 1, 1, cmd_dump},
    {"range", "ORDERED: the keys in [LO, HI], in order", "NAME LO HI [--limit N] [--desc] [--values]",
     "ORDERED: the stored keys in [LO, HI] one per line, ascending (--desc: descending from HI), at most --limit N "
     "of them (default: all), with --values KEY VALUE; LO above HI is a usage error",
     G_DUMP | G_RANGE, 3, 3, cmd_range},
    {"succ", "ORDERED: the smallest stored key >= each key", "NAME [KEY...] [--values]",
     "ORDERED: for each key the smallest stored key >= it, KEY SUCCESSOR [VALUE] per line (KEY none where there is "
     "none); no keys: stdin",
     G_DUMP, 1, -1, cmd_succ},
    {"pred", "ORDERED: the largest stored key <= each key", "NAME [KEY...] [--values]",
     "ORDERED: for each key the largest stored key <= it, KEY PREDECESSOR [VALUE] per line (KEY none where there "
     "is none); no keys: stdin",
     G_DUMP, 1, -1, cmd_pred},
    {"min", "ORDERED: the smallest stored key", "NAME [--values]",
     "ORDERED: the smallest stored key (with --values, KEY VALUE); exit 1 with a message if the table is empty", G_DUMP,
     1, 1, cmd_min},
    {"max", "ORDERED: the largest stored key", "NAME [--values]",
     "ORDERED: the largest stored key (with --values, KEY VALUE); exit 1 with a message if the table is empty", G_DUMP,
     1, 1, cmd_max},
    {"freeze", "STATIC: build the table for finds only", "NAME [--from TABLE]",
     "STATIC: build the table's static cuckoo table from the keys (and values) it holds; from then on it answers "
     "find, dump and stats, and writes are refused with ERR_FROZEN (a freeze again changes nothing; one that "
     "fails leaves the table as it was). --from TABLE: first create NAME as a STATIC table of TABLE's key_bits and "
     "value_bytes and fill it with TABLE's keys and values (a SET, MAP or STATIC table, as a scan walks it: "
     "writes to TABLE meanwhile may or may not be in it). Prints the frozen table's keys, fill and bytes per key",
     G_FREEZE, 1, 1, cmd_freeze},
    {"snapshot", "save a table (or all) into the server's data-dir", "[NAME]",
     "save a table (or all) into the server's data-dir", 0, 0, 1, cmd_snapshot},
    {"config", "the server's settings: get, set, rewrite", "get [PATTERN] [--json] | set NAME VALUE | rewrite",
     "the server's settings while it runs, as redis-cli's CONFIG: `get` prints NAME VALUE for every setting (or "
     "those matching the shell pattern PATTERN, such as 'max-*'), with --json also whether each can change while "
     "floed runs (the token shows as (set)); `set` changes one that floed applies while it runs (those SIGHUP "
     "applies; others are refused with the reason, and nothing changes), until floed restarts or SIGHUP reads its "
     "file again; `rewrite` writes the config file floed was started with (-c) again with the settings in force, "
     "its comments and order kept. Over a list of servers: each",
     G_JSON, 1, 3, cmd_config},
    {"shutdown", "stop the server, saving its tables", "[--nosave]",
     "stop the server as SIGTERM does: what is in flight finishes, every table is saved into its data-dir (with "
     "--nosave: not; changes since the last snapshots are lost), and floed exits 0; over a list of servers, each. "
     "A server with a token takes it only from a client that gave it",
     G_SHUTDOWN, 0, 0, cmd_shutdown},
};
#define NCMDS (sizeof CMDS / sizeof CMDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: floe [-H HOST:PORT] [CONNECTION OPTIONS] COMMAND [ARGS] [COMMAND OPTIONS]\n"
               "       floe [-H HOST:PORT] [CONNECTION OPTIONS]      (a session: commands from a prompt or stdin)\n"
               "       floe COMMAND --help | floe --help | floe --version\n\n"
               "The command-line client of floed. Keys are decimal or 0x-hex numbers below 2^key_bits of the\n"
               "table; a TREE table's keys are vectors of `words` 32-bit words, written 1,2,3,...\n\n"
               "With no command, floe keeps one connection and runs a command a line, as redis-cli does: at a\n"
               "terminal with a prompt, line editing, history (~/.floe_history) and Tab completion of commands\n"
               "and table names; from a pipe or file without a prompt, exiting with the last failure's code.\n"
               "Lines split into words as a shell splits them ('quoted words', # comments); keys come on the\n"
               "line; `help [COMMAND]` and `quit` are the session's own.\n\n"
               "Options:\n"
               "  -H, --host SERVER   the server: HOST:PORT, HOST (port 7450), floe://HOST:PORT[?token=T],\n"
               "                      floes://HOST:PORT (TLS) or [IPv6]:PORT (-s and --server are the same,\n"
               "                      as in floe-bench and floe-mc; default\n"
               "                      $FLOE_SERVER, else " DEFAULT_SERVER "); a list floe://H1:P1,H2:P2,...\n"
               "                      is a table partitioned over those servers (docs/OPERATIONS.md)\n"
               "  -h, --help          this text\n"
               "  -V, --version       the version of floe and of the protocol it speaks\n"
               "Connection options (each also from its environment variable; flags win):\n");
    floe_getopt_help(f, 6, 22,
                     "give up on the whole command after SECONDS, connecting included unless --connect-timeout "
                     "is given (default 0: wait)");
    fprintf(f, "Options take their value as `--opt VALUE` or `--opt=VALUE`. A command's options may come before,\n"
               "between or after its arguments, and so may -H and the connection options; `--` ends the options\n"
               "(a table whose name starts with '-').\n\nCommands:\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(f, "  %-9s %s\n", CMDS[i].name, CMDS[i].summary);
    fprintf(f, "\n`floe COMMAND --help` shows a command's arguments and options. Exit code: 0 ok, 1 an error from\n"
               "the server or the connection (the message is on stderr), 2 a usage error.\n");
}

enum {
    O_JSON = 256,
    O_KIND,
    O_KEY_BITS,
    O_VALUE_BYTES,
    O_WORDS,
    O_CAPACITY,
    O_MEMORY,
    O_GROW,
    O_NO_GROW,
    O_MAX_FILL,
    O_PARTS,
    O_EXPLORE,
    O_LABEL_BYTES,
    O_BACKEND,
    O_BINARY,
    O_BATCH,
    O_VALUES,
    O_LIMIT,
    O_DESC,
    O_NOSAVE,
    O_FROM,
};

/* Besides these, both take libfloe's connection options (floe_getopt.h). */
static const struct option GLOBAL_OPTS[] = {
    {"host", required_argument, NULL, 'H'},
    {"server", required_argument, NULL, 'H'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const struct option CMD_OPTS[] = {
    {"host", required_argument, NULL, 'H'},
    {"server", required_argument, NULL, 'H'},
    {"help", no_argument, NULL, 'h'},
    {"json", no_argument, NULL, O_JSON},
    {"kind", required_argument, NULL, O_KIND},
    {"key-bits", required_argument, NULL, O_KEY_BITS},
    {"value-bytes", required_argument, NULL, O_VALUE_BYTES},
    {"words", required_argument, NULL, O_WORDS},
    {"capacity", required_argument, NULL, O_CAPACITY},
    {"memory", required_argument, NULL, O_MEMORY},
    {"grow", no_argument, NULL, O_GROW},
    {"no-grow", no_argument, NULL, O_NO_GROW},
    {"max-fill", required_argument, NULL, O_MAX_FILL},
    {"parts", required_argument, NULL, O_PARTS},
    {"explore", no_argument, NULL, O_EXPLORE},
    {"label-bytes", required_argument, NULL, O_LABEL_BYTES},
    {"backend", required_argument, NULL, O_BACKEND},
    {"binary", no_argument, NULL, O_BINARY},
    {"batch", required_argument, NULL, O_BATCH},
    {"values", no_argument, NULL, O_VALUES},
    {"limit", required_argument, NULL, O_LIMIT},
    {"desc", no_argument, NULL, O_DESC},
    {"nosave", no_argument, NULL, O_NOSAVE},
    {"from", required_argument, NULL, O_FROM},
    {NULL, 0, NULL, 0},
};

static unsigned group_of(int code)
{
    switch (code) {
    case O_JSON:
        return G_JSON;
    case O_BINARY:
    case O_BATCH:
        return G_LOAD;
    case O_VALUES:
        return G_DUMP;
    case O_LIMIT:
    case O_DESC:
        return G_RANGE;
    case O_NOSAVE:
        return G_SHUTDOWN;
    case O_FROM:
        return G_FREEZE;
    default:
        return code >= O_KIND && code <= O_BACKEND ? G_CREATE : 0;
    }
}

/* The failing option for getopt's '?' and ':' (with opterr 0). */
static const char *bad_option(char **argv, char *buf, size_t len)
{
    if (optopt && optopt < 256)
        snprintf(buf, len, "-%c", optopt);
    else
        snprintf(buf, len, "%s", argv[optind - 1]);
    return buf;
}

/* text in lines of at most 100 columns, broken at blanks (before a '['
 * where there is one: usage lines keep [--opt VALUE] whole), the lines
 * after the first indented. */
static void print_wrapped(const char *text, int indent)
{
    const char *p = text;
    while (*p) {
        int len = (int)strlen(p);
        if (len > 100 - indent) {
            len = 100 - indent;
            int at = len;
            while (at > 0 && !(p[at] == ' ' && p[at + 1] == '['))
                at--;
            if (at > 0)
                len = at;
            while (len > 0 && p[len] != ' ')
                len--;
            if (len == 0)
                len = (int)strcspn(p, " ");
        }
        printf("%*s%.*s\n", p == text ? 0 : indent, "", len, p);
        p += len;
        while (*p == ' ')
            p++;
    }
}

static void command_help(const cmd *cm)
{
    char line[512];
    snprintf(line, sizeof line, "usage: floe %s%s%s", cm->name, cm->args[0] ? " " : "", cm->args);
    print_wrapped(line, 12 + (int)strlen(cm->name));
    print_wrapped(cm->help, 0);
}

/* A command's options into *o; positional arguments end up from
 * argv[optind] on.  Returns -1 to go on, else the exit code. */
static int parse_command(const cmd *cm, int argc, char **argv, const struct option *cmd_opts, opts *o,
                         const char **server, floe_options *conn)
{
    o->def = (floe_table_def){.kind = FLOE_TABLE_SET, .key_bits = 64};
    o->batch = 65536;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            command_help(cm); /* --help wins over anything wrong around it */
            return 0;
        }
    }
    char buf[160];
    int ch, li = -1;
    optind = 0; /* a fresh scan (glibc): argv[0] is the command */
    opterr = 0;
    while ((li = -1, ch = getopt_long(argc, argv, ":hH:s:", cmd_opts, &li)) != -1) {
        const char *a = optarg;
        uint64_t x;
        if (ch == '?')
            return usage_error("%s: unknown option '%s' (floe %s --help)", cm->name, bad_option(argv, buf, sizeof buf),
                               cm->name);
        if (ch == ':')
            return usage_error("%s: %s needs a value", cm->name, bad_option(argv, buf, sizeof buf));
        if (group_of(ch) && !(group_of(ch) & cm->groups))
            return usage_error("%s: --%s is not an option of %s (floe %s --help)", cm->name,
                               li >= 0 ? cmd_opts[li].name : "?", cm->name, cm->name);
        if (ch >= FLOE_GETOPT_CODE) {
            if (floe_getopt_set(conn, ch, a, buf, sizeof buf) != FLOE_OK)
                return usage_error("%s: --%s", cm->name, buf);
            continue;
        }
        switch (ch) {
        case 'H':
        case 's':
            *server = a;
            break;
        case O_JSON:
            o->json = true;
            break;
        case O_KIND:
            if (strcasecmp(a, "set") == 0)
                o->def.kind = FLOE_TABLE_SET;
            else if (strcasecmp(a, "map") == 0)
                o->def.kind = FLOE_TABLE_MAP;
            else if (strcasecmp(a, "tree") == 0)
                o->def.kind = FLOE_TABLE_TREE;
            else if (strcasecmp(a, "ordered") == 0)
                o->def.kind = FLOE_TABLE_ORDERED;
            else if (strcasecmp(a, "static") == 0)
                o->def.kind = FLOE_TABLE_STATIC;
            else
                return usage_error("create: --kind is set, map, tree, ordered or static, not '%s'", a);
            break;
        case O_KEY_BITS:
            if (!cli_parse_u64(a, &x) || x < 1 || x > 64) /* 0 would read as "not given": 64 */
                return usage_error("create: --key-bits is 1..64, not '%s'", a);
            o->def.key_bits = (unsigned)x;
            o->key_bits_given = true;
            break;
        case O_VALUE_BYTES:
            if (!cli_parse_u64(a, &x) || (x != 0 && x != 4 && x != 8))
                return usage_error("create: --value-bytes is 4 or 8 (ORDERED, STATIC: 0, 4 or 8), not '%s'", a);
            o->def.value_bytes = (unsigned)x; /* which of them the kind takes: the server says */
            o->value_bytes_given = true;
            break;
        case O_WORDS:
            if (!cli_parse_u64(a, &x) || x < FLOE_TREE_MIN_WORDS || x > FLOE_TREE_MAX_WORDS)
                return usage_error("create: --words is %u..%u, not '%s'", FLOE_TREE_MIN_WORDS, FLOE_TREE_MAX_WORDS, a);
            o->def.words = (unsigned)x;
            break;
        case O_CAPACITY:
            if (!cli_parse_u64(a, &x) && !floe_parse_size(a, &x))
                return usage_error("create: --capacity is a count of keys (100000, 0x1000, 16M), not '%s'", a);
            if (x == 0) /* it would read as "not given" */
                return usage_error("create: --capacity is at least 1 key (leave it out for the default)");
            o->def.capacity = x;
            break;
        case O_MEMORY:
            if (!floe_parse_size(a, &x))
                return usage_error("create: --memory is a size in bytes (512M, 4GiB), not '%s'", a);
            o->def.memory = x;
            break;
        case O_PARTS:
            if (!cli_parse_u64(a, &x) || x < 1 || x > 16)
                return usage_error("create: --parts is 1..16, not '%s'", a);
            o->def.parts = (unsigned)x;
            break;
        case O_GROW:
            o->def.grow = 1;
            break;
        case O_EXPLORE:
            o->def.explore = 1;
            break;
        case O_LABEL_BYTES:
            if (!cli_parse_u64(a, &x) || x > 4)
                return usage_error("create: --label-bytes is 0..4, not '%s'", a);
            o->def.label_bytes = (unsigned)x;
            break;
        case O_NO_GROW:
            o->def.no_grow = 1;
            break;
        case O_MAX_FILL: {
            char *end;
            errno = 0;
            double v = strtod(a, &end);
            if (!a[0] || *end || errno || !isfinite(v))
                return usage_error("create: --max-fill needs a number, not '%s'", a);
            if (!(v > 0.0 && v <= 1.0)) /* 0 would read as "not given" */
                return usage_error("create: --max-fill is in (0, 1], not '%s'", a);
            o->def.max_fill = v;
            break;
        }
        case O_BACKEND:
            o->def.backend = a;
            break;
        case O_BINARY:
            o->binary = true;
            break;
        case O_BATCH:
            if ((!cli_parse_u64(a, &x) && !floe_parse_size(a, &x)) || x < 1 || x > ((uint64_t)1 << 24))
                return usage_error("load: --batch is 1..16M keys per request, not '%s'", a);
            o->batch = (size_t)x;
            break;
        case O_VALUES:
            o->values = true;
            break;
        case O_LIMIT:
            if (!cli_parse_u64(a, &x) || x == 0)
                return usage_error("range: --limit is a count of keys, at least 1, not '%s'", a);
            o->limit = x;
            break;
        case O_DESC:
            o->desc = true;
            break;
        case O_NOSAVE:
            o->nosave = true;
            break;
        case O_FROM:
            o->from = a;
            break;
        default:
            return usage_error("%s: unexpected option (floe %s --help)", cm->name, cm->name);
        }
    }
    int npos = argc - optind;
    if (npos < cm->min_args || (cm->max_args >= 0 && npos > cm->max_args)) {
        if (npos > cm->max_args && cm->max_args >= 0)
            return usage_error("%s: unexpected argument '%s'; usage: floe %s %s", cm->name, argv[optind + cm->max_args],
                               cm->name, cm->args);
        return usage_error("%s: missing arguments; usage: floe %s %s", cm->name, cm->name, cm->args);
    }
    if (o->def.grow && o->def.no_grow)
        return usage_error("create: --grow and --no-grow contradict each other: give one");
    if (o->def.kind == FLOE_TABLE_MAP && !o->value_bytes_given)
        o->def.value_bytes = 8;
    if (o->def.kind == FLOE_TABLE_TREE) {
        if (!o->def.words)
            return usage_error("create: a TREE needs --words N (32-bit words per vector, 2..256)");
        if (!o->key_bits_given)
            o->def.key_bits = 0; /* a TREE has no key_bits; given, the server says why not */
    }
    return -1;
}

/* --timeout bounds the whole command (curl's --max-time), connecting
 * included unless --connect-timeout is given: past it the process says so
 * and exits, whatever it was waiting for. */
static char timeout_msg[128];

static void on_timeout(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, timeout_msg, strlen(timeout_msg));
    (void)w;
    _exit(1);
}

static void arm_timeout(int timeout_ms)
{
    if (timeout_ms <= 0)
        return;
    snprintf(timeout_msg, sizeof timeout_msg, "floe: %s: the command did not finish within --timeout %.3g s\n",
             floe_strerror(FLOE_ERR_TIMEOUT), timeout_ms / 1000.0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_timeout;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 0}, {timeout_ms / 1000, (timeout_ms % 1000) * 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* ---- a session's lines (cli_shell.c) ------------------------------------------------------------ */

static const struct option *session_opts; /* the commands' options, for the lines of a session */
static floe_options session_conn;

/* One line's words, run as `floe WORDS` would run on the session's connection. */
static int run_line(floe *c, int argc, char **argv)
{
    if (strcmp(argv[0], "help") == 0 && argc <= 2) {
        for (size_t k = 0; argc == 2 && k < NCMDS; k++)
            if (strcmp(argv[1], CMDS[k].name) == 0) {
                command_help(&CMDS[k]);
                return 0;
            }
        if (argc == 2)
            return usage_error("help: no command '%s'", argv[1]);
        usage(stdout);
        return 0;
    }
    const cmd *cm = NULL;
    for (size_t k = 0; k < NCMDS; k++)
        if (strcmp(argv[0], CMDS[k].name) == 0)
            cm = &CMDS[k];
    if (!cm)
        return usage_error("unknown command '%s' (help lists them)", argv[0]);
    opts o = {0};
    const char *server = NULL;
    floe_options conn = session_conn;
    int rc = parse_command(cm, argc, argv, session_opts, &o, &server, &conn);
    if (rc >= 0)
        return rc;
    if (server || memcmp(&conn, &session_conn, sizeof conn) != 0)
        return usage_error("%s: the session's server and connection are fixed: start floe with them", cm->name);
    return cm->run(c, &o, argc - optind, argv + optind);
}

/* `floe` with no command: a session on one connection. */
static int session(const char *server, const floe_options *conn, const struct option *cmd_opts)
{
    const char *names[NCMDS + 3];
    for (size_t k = 0; k < NCMDS; k++)
        names[k] = CMDS[k].name;
    names[NCMDS] = "help", names[NCMDS + 1] = "quit", names[NCMDS + 2] = NULL;
    session_opts = cmd_opts;
    session_conn = *conn;
    floe *c;
    int st = floe_connect_opts(server, conn, &c);
    if (st != FLOE_OK) {
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(st), floe_errstr(c));
        floe_close(c);
        return st == FLOE_ERR_INVALID ? EXIT_USAGE : 1;
    }
    const int rc = cli_shell(&c, server, conn, names, run_line, EXIT_USAGE);
    floe_close(c);
    return rc;
}

int main(int argc, char **argv)
{
    const char *server = getenv("FLOE_SERVER");
    if (server && !server[0])
        server = NULL;
    char buf[400];
    floe_options conn;
    memset(&conn, 0, sizeof conn);
    if (floe_options_from_env(&conn, buf, sizeof buf) != FLOE_OK)
        return usage_error("%s", buf);
    struct option *global_opts = floe_getopt_table(GLOBAL_OPTS), *cmd_opts = floe_getopt_table(CMD_OPTS);
    if (!global_opts || !cmd_opts) {
        fprintf(stderr, "floe: out of memory\n");
        return 1;
    }
    int ch, rc = -1;
    opterr = 0;
    /* '+': stop at the command; its options are its own */
    while (rc < 0 && (ch = getopt_long(argc, argv, "+:H:s:hV", global_opts, NULL)) != -1) {
        switch (ch) {
        case 'H':
        case 's': /* as floe-bench and floe-mc spell it */
            server = optarg;
            break;
        case 'h':
            usage(stdout);
            rc = 0;
            break;
        case 'V':
            printf("floe %s (protocol %d)\n", FLOE_VERSION, FLOE_PROTOCOL_VERSION);
            rc = 0;
            break;
        case ':':
            rc = usage_error("%s needs a value", bad_option(argv, buf, sizeof buf));
            break;
        default:
            if (ch >= FLOE_GETOPT_CODE) {
                if (floe_getopt_set(&conn, ch, optarg, buf, sizeof buf) != FLOE_OK)
                    rc = usage_error("--%s", buf);
                break;
            }
            rc = usage_error("unknown option '%s' (floe --help)", bad_option(argv, buf, sizeof buf));
        }
    }
    const cmd *cm = NULL;
    if (rc < 0 && optind >= argc) { /* no command: a session */
        rc = session(server ? server : DEFAULT_SERVER, &conn, cmd_opts);
        free(global_opts);
        free(cmd_opts);
        return rc;
    }
    for (size_t k = 0; rc < 0 && k < NCMDS; k++)
        if (strcmp(argv[optind], CMDS[k].name) == 0)
            cm = &CMDS[k];
    if (rc < 0 && !cm)
        rc = usage_error("unknown command '%s' (floe --help lists them)", argv[optind]);
    opts o = {0};
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    if (rc < 0)
        rc = parse_command(cm, sub_argc, sub_argv, cmd_opts, &o, &server, &conn);
    free(global_opts);
    free(cmd_opts);
    if (rc >= 0)
        return rc;
    const int first = optind;
    const bool connect_own = conn.connect_timeout_ms != 0; /* --connect-timeout given: its own deadline */
    if (!connect_own)
        arm_timeout(conn.timeout_ms);
    floe *c;
    int st = floe_connect_opts(server ? server : DEFAULT_SERVER, &conn, &c);
    if (st != FLOE_OK) {
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(st), floe_errstr(c));
        floe_close(c);
        /* ERR_INVALID before any byte is sent: the address or the options themselves (a
         * scheme, a port past 65535, a key without its certificate) */
        return st == FLOE_ERR_INVALID ? EXIT_USAGE : 1;
    }
    if (connect_own)
        arm_timeout(conn.timeout_ms);
    rc = cm->run(c, &o, sub_argc - first, sub_argv + first);
    floe_close(c);
    return rc;
}
