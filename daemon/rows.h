/*
 * rows.h - the requests floed answers: one row per operation of the
 * protocol's Request (proto/floe.proto), in the order metrics count them.
 *
 * X(NAME, WIRE, "name", table op, flags, handler, reply):
 *   NAME     METRICS_OP_<NAME>, the row's place (metrics.h);
 *   WIRE     the Request oneof case FLOE__V1__REQUEST__OP_<WIRE>;
 *   "name"   as metrics, logs and the CLI's --help spell it;
 *   table op the FLOE_OP_* (tables/ops.h) its table work is, 0 for none;
 *   flags    REQ_* (daemon/item.h);
 *   handler  takes the request (daemon/ops/: keys.c, ordered.c, tables.c,
 *            explore.c, service.c, config.c); a request whose message carries keys
 *            (proto/keymsg.h) has handle_keys, which reads its parts by
 *            their names in the schema (and serves it read in place);
 *   reply    the answer of its table work when it ran (NULL: the key
 *            answers, or OK).
 * A row is added at the end (metrics keep their numbers); docs/ARCHITECTURE.md
 * says what else a new operation needs.  Nothing but macros here: metrics.h
 * takes the names and numbers without the handlers' types.
 */
#ifndef FLOE_DAEMON_ROWS_H
#define FLOE_DAEMON_ROWS_H

#define REQUEST_OPS(X)                                                                                                 \
    X(HELLO, HELLO, "hello", 0, REQ_ANY_TIME, handle_hello, NULL)                                                      \
    X(PING, PING, "ping", 0, REQ_ANY_TIME, handle_ping, NULL)                                                          \
    X(CREATE_TABLE, CREATE_TABLE, "create_table", 0, 0, handle_create, NULL)                                           \
    X(DROP_TABLE, DROP_TABLE, "drop_table", 0, 0, handle_drop, NULL)                                                   \
    X(LIST_TABLES, LIST_TABLES, "list_tables", FLOE_OP_STATS, 0, handle_list, NULL)                                    \
    X(INSERT, INSERT, "insert", FLOE_OP_INSERT, REQ_TAKES, handle_keys, NULL)                                          \
    X(FIND, FIND, "find", FLOE_OP_FIND, REQ_TAKES, handle_keys, NULL)                                                  \
    X(ERASE, ERASE, "erase", FLOE_OP_ERASE, REQ_TAKES, handle_keys, NULL)                                              \
    X(STATS, STATS, "stats", FLOE_OP_STATS, REQ_TAKES, handle_stats, stats_reply)                                      \
    X(SCAN, SCAN, "scan", FLOE_OP_SCAN, REQ_TAKES, handle_scan, scan_reply)                                            \
    X(GET_BY_ID, GET_BY_ID, "get_by_id", FLOE_OP_GET, REQ_TAKES, handle_keys, NULL)                                    \
    X(SNAPSHOT, SNAPSHOT, "snapshot", FLOE_OP_SAVE, REQ_DATA_DIR, handle_list, NULL)                                   \
    X(INFO, INFO, "info", 0, 0, handle_info, NULL)                                                                     \
    X(RANGE, RANGE, "range", FLOE_OP_RANGE, REQ_TAKES, handle_range, range_reply)                                      \
    X(SUCCESSOR, SUCCESSOR, "successor", FLOE_OP_SUCC, REQ_TAKES, handle_keys, NULL)                                   \
    X(PREDECESSOR, PREDECESSOR, "predecessor", FLOE_OP_PRED, REQ_TAKES, handle_keys, NULL)                             \
    X(MIN, MIN, "min", FLOE_OP_RANGE, REQ_TAKES, handle_range, range_reply)                                            \
    X(MAX, MAX, "max", FLOE_OP_RANGE, REQ_TAKES, handle_range, range_reply)                                            \
    X(ADD, ADD, "add", FLOE_OP_ADD, REQ_TAKES, handle_keys, NULL)                                                      \
    X(CLAIM, CLAIM, "claim", 0, 0, handle_claim, NULL)                                                                 \
    X(TRACE, TRACE, "trace", 0, 0, handle_trace, NULL)                                                                 \
    X(SHUTDOWN, SHUTDOWN, "shutdown", 0, 0, handle_shutdown, NULL)                                                     \
    X(CONFIG, CONFIG, "config", 0, 0, handle_config, NULL)                                                             \
    X(FREEZE, FREEZE, "freeze", FLOE_OP_FREEZE, REQ_TAKES, handle_freeze, NULL)

#endif
