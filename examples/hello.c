/* hello.c - libfloe in 20 lines: dedup states through a floed (make run first). */
#include <stdio.h>

#include "floe.h"

int main(void)
{
    floe *c;
    if (floe_connect("floe://127.0.0.1:7450", NULL, &c) != FLOE_OK) {
        fprintf(stderr, "connect: %s\n", floe_errstr(c));
        floe_close(c);
        return 1;
    }
    floe_table_def def = {.name = "seen", .kind = FLOE_TABLE_SET, .key_bits = 64, .grow = 1};
    int st = floe_create(c, &def); /* FLOE_ERR_EXISTS is fine: a second run */
    uint64_t states[4] = {42, 7, 42, 1000};
    uint8_t answers[4];
    if (st == FLOE_OK || st == FLOE_ERR_EXISTS)
        st = floe_insert(c, "seen", states, 4, answers, NULL);
    for (int i = 0; st == FLOE_OK && i < 4; i++)
        printf("%llu: %s\n", (unsigned long long)states[i], answers[i] == FLOE_INSERTED ? "new" : "seen before");
    if (st != FLOE_OK)
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(st), floe_errstr(c));
    floe_close(c);
    return st == FLOE_OK ? 0 : 1;
}
