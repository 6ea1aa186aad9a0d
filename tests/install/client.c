/* client.c - the install test's program (tests/install/install.sh): built against an
 * installed libfloe with nothing but `pkg-config --cflags --libs libfloe` (and --static),
 * it inserts and finds keys on the floed named by argv[1] and checks every answer. */
#include <floe/floe.h>
#include <stdio.h>
#include <string.h>

static int fail(floe *c, const char *what, int st)
{
    fprintf(stderr, "client: %s: %s: %s\n", what, floe_strerror(st), c ? floe_errstr(c) : "");
    floe_close(c);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: client floe://HOST:PORT TABLE\n");
        return 2;
    }
    floe *c = NULL;
    int st = floe_connect(argv[1], NULL, &c);
    if (st != FLOE_OK)
        return fail(c, "connect", st);
    floe_table_def def = {.name = argv[2], .kind = FLOE_TABLE_SET, .key_bits = 40};
    if ((st = floe_create(c, &def)) != FLOE_OK)
        return fail(c, "create", st);
    uint64_t keys[4] = {1, 2, 3, 2};
    uint8_t res[4];
    floe_counts counts;
    if ((st = floe_insert(c, argv[2], keys, 4, res, &counts)) != FLOE_OK)
        return fail(c, "insert", st);
    const uint8_t want_ins[4] = {FLOE_INSERTED, FLOE_INSERTED, FLOE_INSERTED, FLOE_PRESENT};
    if (memcmp(res, want_ins, 4) != 0 || counts.inserted != 3 || counts.present != 1)
        return fail(c, "insert: wrong answers", FLOE_OK);
    uint64_t probe[2] = {2, 99};
    if ((st = floe_find(c, argv[2], probe, 2, res, NULL, 0, NULL)) != FLOE_OK)
        return fail(c, "find", st);
    if (res[0] != FLOE_PRESENT || res[1] != FLOE_ABSENT)
        return fail(c, "find: wrong answers", FLOE_OK);
    printf("client: %s on %s: inserted 3, present 1; find: 2 PRESENT, 99 ABSENT\n", argv[2], floe_info(c)->server);
    floe_close(c);
    return 0;
}
