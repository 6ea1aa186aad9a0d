#!/usr/bin/python3
"""check_resp.py - floed's Redis protocol port through independent clients:
Debian's python3-redis (redis-py), redis-cli and redis-benchmark (redis-tools),
and a raw socket for what a client library would not send.

    check_resp.py PORT [--token T] [--tls-ca CA] [--cli FLOE --uri URI] [--quick]

Every answer is checked against a reference model (Python sets and dicts);
bad input must get an error and change nothing.  Exit 0: all passed; 1: a
check failed (the first failure is printed); 77: python3-redis is missing.
"""
import argparse
import random
import shutil
import socket
import ssl
import subprocess
import sys

try:
    import redis
except ImportError:
    print("python3-redis is not installed (make deps)")
    sys.exit(77)

FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print("FAIL:", what)
        raise SystemExit(1)


def expect_error(fn, *words, kind=redis.exceptions.ResponseError):
    """fn raises kind (redis-py names NOAUTH and WRONGPASS by their class, and strips ERR) with words."""
    try:
        fn()
    except kind as e:
        msg = str(e)
        for w in words:
            check(w.lower() in msg.lower(), "error %r lacks %r" % (msg, w))
        return msg
    check(False, "no error where %r was expected" % (words,))


def client(a, **kw):
    extra = {}
    if a.tls_ca:
        extra = dict(ssl=True, ssl_ca_certs=a.tls_ca, ssl_cert_reqs="required")
    return redis.Redis(host="127.0.0.1", port=a.port, password=a.token, decode_responses=True, **extra, **kw)


def raw(a):
    s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
    if a.tls_ca:
        ctx = ssl.create_default_context(cafile=a.tls_ca)
        s = ctx.wrap_socket(s, server_hostname="localhost")
    return s


def recv_until(s, n_lines):
    data = b""
    while data.count(b"\r\n") < n_lines:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def model_run(r, rng, rounds):
    """Pipelines of random SET and MAP commands against a model."""
    sets = {"rs1": set(), "rs2": set()}
    maps = {"rh1": {}}
    for t in list(sets) + list(maps):
        r.delete(t)
    M = 2**63 - 1

    def wrap(v):  # 8-byte values, shown signed
        v &= 2**64 - 1
        return v - 2**64 if v >= 2**63 else v

    for _ in range(rounds):
        c = r.pipeline(transaction=False)
        expected = []
        for _ in range(rng.randint(1, 60)):
            op = rng.choice(["sadd", "srem", "sismember", "smismember", "scard", "hset", "hsetnx", "hget", "hmget",
                             "hdel", "hlen", "hincrby"])
            s = rng.choice(list(sets))
            ms = [rng.randrange(64) for _ in range(rng.randint(1, 5))]
            if op == "sadd":
                c.sadd(s, *ms)
                n = len(set(ms) - sets[s])
                sets[s] |= set(ms)
                expected.append(n)
            elif op == "srem":
                c.srem(s, *ms)
                n = len(set(ms) & sets[s])
                sets[s] -= set(ms)
                expected.append(n)
            elif op == "sismember":
                c.sismember(s, ms[0])
                expected.append(ms[0] in sets[s])
            elif op == "smismember":
                c.smismember(s, ms)
                expected.append([m in sets[s] for m in ms])
            elif op == "scard":
                c.scard(s)
                expected.append(len(sets[s]))
            else:
                h = maps["rh1"]
                f = ms[0]
                if op == "hset":
                    vals = {m: rng.randrange(-1000, 1000) for m in ms}
                    c.hset("rh1", mapping=vals)
                    expected.append(len([m for m in vals if m not in h]))
                    h.update(vals)
                elif op == "hsetnx":
                    v = rng.randrange(1000)
                    c.hsetnx("rh1", f, v)
                    expected.append(f not in h)
                    h.setdefault(f, v)
                elif op == "hget":
                    c.hget("rh1", f)
                    expected.append(str(h[f]) if f in h else None)
                elif op == "hmget":
                    c.hmget("rh1", ms)
                    expected.append([str(h[m]) if m in h else None for m in ms])
                elif op == "hdel":
                    c.hdel("rh1", *ms)
                    expected.append(len(set(ms) & set(h)))
                    for m in set(ms):
                        h.pop(m, None)
                elif op == "hlen":
                    c.hlen("rh1")
                    expected.append(len(h))
                elif op == "hincrby":
                    d = rng.randrange(-M, M) if rng.random() < 0.1 else rng.randrange(-50, 50)
                    c.hincrby("rh1", f, d)
                    h[f] = wrap(h.get(f, 0) + d)
                    expected.append(h[f])
        got = c.execute()
        check(len(got) == len(expected), "%d answers to %d commands" % (len(got), len(expected)))
        for g, e in zip(got, expected):
            if isinstance(e, bool):
                g = bool(g)
            elif isinstance(e, list) and e and isinstance(e[0], bool):
                g = [bool(x) for x in g]
            check(g == e, "pipelined answer %r, model %r" % (g, e))
    return sets, maps


def model_direct(r, rng, rounds):
    """The same commands one at a time, each answer checked at once."""
    s, h = set(), {}
    r.delete("rd", "rdh")
    for _ in range(rounds):
        m = rng.randrange(100)
        op = rng.randrange(6)
        if op == 0:
            check(r.sadd("rd", m) == (m not in s), "sadd")
            s.add(m)
        elif op == 1:
            check(r.srem("rd", m) == (m in s), "srem")
            s.discard(m)
        elif op == 2:
            check(bool(r.sismember("rd", m)) == (m in s), "sismember")
        elif op == 3:
            v = rng.randrange(-(2**63), 2**63)
            check(r.hset("rdh", m, v) == (m not in h), "hset")
            h[m] = v
        elif op == 4:
            g = r.hget("rdh", m)
            check(g == (str(h[m]) if m in h else None), "hget %r, model %r" % (g, h.get(m)))
        else:
            check(r.scard("rd") == len(s), "scard")
    check(set(int(x) for x in r.sscan_iter("rd", count=7)) == s, "sscan_iter walks the whole set")
    check(r.hlen("rdh") == len(h), "hlen")


def errors(r, a):
    r.delete("re", "reh")
    r.sadd("re", 1, 2, 3)
    r.hset("reh", 1, 10)
    expect_error(lambda: r.sadd("re", 4, "x5"), "decimal integer")
    expect_error(lambda: r.sadd("re", 4, "-1"), "decimal integer")
    expect_error(lambda: r.sadd("re", 2**64), "decimal integer")
    check(r.scard("re") == 3 and not r.sismember("re", 4), "a refused SADD changed nothing")
    expect_error(lambda: r.hset("reh", 2, "abc"), "integer")
    check(r.hlen("reh") == 1, "a refused HSET changed nothing")
    expect_error(lambda: r.sadd("reh", 5), "WRONGTYPE")
    expect_error(lambda: r.hset("re", 5, 1), "WRONGTYPE")
    expect_error(lambda: r.sismember("reh", 1), "WRONGTYPE")
    check(r.hlen("reh") == 1 and r.scard("re") == 3, "WRONGTYPE changed nothing")
    expect_error(lambda: r.execute_command("SADD", "re"), "wrong number of arguments")
    expect_error(lambda: r.execute_command("HSET", "reh", "1"), "wrong number of arguments")
    expect_error(lambda: r.execute_command("NOSUCH", "x"), "unknown command")
    expect_error(lambda: r.sadd("bad name!", 1), "cannot name a table")
    expect_error(lambda: r.execute_command("SELECT", "3"), "out of range")
    check(r.execute_command("SELECT", "0") in (True, "OK"), "select 0")
    # reads of no table answer as Redis does for a missing key; writes create it
    check(r.scard("rnone") == 0 and r.sismember("rnone", 1) == 0 and r.hget("rnone2", 1) is None, "no table")
    check(r.hmget("rnone2", [1, 2]) == [None, None], "hmget of no table")
    check(r.exists("rnone") == 0 and r.type("rnone") == "none", "reads created nothing")
    check(r.sadd("rnew", 7) == 1 and r.type("rnew") == "set", "a first SADD creates a SET")
    check(r.hset("rnewh", 7, 8) == 1 and r.type("rnewh") == "hash", "a first HSET creates a MAP")
    check(r.delete("rnew", "rnewh", "rnone") == 2 and r.exists("rnew", "rnewh") == 0, "del counts what it dropped")
    # a table of 16-bit keys made by floe's own CLI: members at or past 2^16 refused
    if a.cli:
        subprocess.run([a.cli, "-H", a.uri, "create", "r16", "--key-bits", "16"], check=True, capture_output=True)
        check(r.sadd("r16", 65535) == 1, "the widest 16-bit member")
        expect_error(lambda: r.sadd("r16", 65536), "below 2^16")
        check(r.scard("r16") == 1, "the refused member changed nothing")
        # what one protocol writes the other reads
        subprocess.run([a.cli, "-H", a.uri, "insert", "r16", "5", "6"], check=True, capture_output=True)
        check(r.smismember("r16", [5, 6, 7]) == [1, 1, 0], "keys inserted by the floe CLI seen through RESP")
        out = subprocess.run([a.cli, "-H", a.uri, "find", "r16", "65535", "9"], check=True, capture_output=True,
                             text=True).stdout
        check("65535" in out and "PRESENT" in out.upper(), "a member added through RESP found by the CLI: %r" % out)
        r.delete("r16")
        # a walk that lasts through a growth: every member there all along is seen (Redis's SSCAN promise)
        subprocess.run([a.cli, "-H", a.uri, "create", "rg", "--capacity", "1000", "--grow"], check=True,
                       capture_output=True)
        r.sadd("rg", *range(500))
        cursor, seen, grown = 0, set(), False
        while True:
            cursor, page = r.sscan("rg", cursor, count=50)
            seen |= set(int(m) for m in page)
            if not grown:
                r.sadd("rg", *range(500, 20000))  # past its capacity: it grows under the walk
                grown = True
            if cursor == 0:
                break
        check(set(range(500)) <= seen, "a walk through a growth missed %d members" % len(set(range(500)) - seen))
        check(r.scard("rg") == 20000, "rg holds 20000 members")
        r.delete("rg")


def raw_protocol(a):
    s = raw(a)
    if a.token:
        s.sendall(b"AUTH %s\r\n" % a.token.encode())
        check(recv_until(s, 1) == b"+OK\r\n", "inline AUTH")
    s.sendall(b"PING\r\n*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$3\r\na\rb\r\n")
    got = recv_until(s, 4)
    check(got == b"+PONG\r\n+PONG\r\n$3\r\na\rb\r\n", "inline and multibulk commands in one write: %r" % got)
    # a command split over several writes
    for part in (b"*3\r\n$4\r\nSA", b"DD\r\n$3\r\nrr", b"w\r\n$2\r\n42\r", b"\n"):
        s.sendall(part)
    check(recv_until(s, 1) == b":1\r\n", "a command in pieces")
    s.sendall(b"*2\r\n$3\r\nDEL\r\n$3\r\nrrw\r\n")
    check(recv_until(s, 1) == b":1\r\n", "del")
    s.sendall(b"*x\r\n")
    got = recv_until(s, 1)
    check(got.startswith(b"-ERR Protocol error"), "a bad multibulk length: %r" % got)
    check(s.recv(100) == b"", "the connection closes after a protocol error")
    s = raw(a)
    s.sendall(b"*99999999\r\n")
    got = recv_until(s, 1)
    check(got.startswith(b"-ERR Protocol error"), "too many arguments: %r" % got)
    # more replies at once than a connection queues (64 Ki) behind a request still out
    s = raw(a)
    if a.token:
        s.sendall(b"AUTH %s\r\n" % a.token.encode())
        check(recv_until(s, 1) == b"+OK\r\n", "inline AUTH")
    n = 100000
    s.sendall(b"SADD rflood 1\r\n" + b"PING\r\n" * n + b"SCARD rflood\r\n")
    got = recv_until(s, n + 2)
    check(got == b":1\r\n" + b"+PONG\r\n" * n + b":1\r\n", "%d pipelined PINGs: %d bytes back" % (n, len(got)))
    s.sendall(b"DEL rflood\r\n")
    check(recv_until(s, 1) == b":1\r\n", "del rflood")
    s = raw(a)
    s.sendall(b"*1\r\n$4\r\nQUIT\r\n")
    check(recv_until(s, 1) == b"+OK\r\n" and s.recv(10) == b"", "QUIT answers OK and closes")


def auth(a):
    bare = redis.Redis(host="127.0.0.1", port=a.port, decode_responses=True,
                       **(dict(ssl=True, ssl_ca_certs=a.tls_ca) if a.tls_ca else {}))
    noauth = redis.exceptions.AuthenticationError
    expect_error(lambda: bare.sadd("ra", 1), "Authentication required", kind=noauth)
    expect_error(lambda: bare.ping(), "Authentication required", kind=noauth)
    expect_error(lambda: bare.execute_command("AUTH", "wrong" + a.token), "invalid username-password",
                 kind=(noauth, redis.exceptions.ResponseError))
    check(bare.execute_command("AUTH", a.token) in (True, "OK"), "AUTH with the token")
    check(bare.sadd("ra", 1) == 1, "a write after AUTH")
    bare.delete("ra")
    bare.close()
    s = raw(a)
    s.sendall(b"HELLO 3\r\n")
    check(recv_until(s, 1).startswith(b"-NOAUTH"), "HELLO without AUTH")
    s.sendall(b"HELLO 3 AUTH default %s\r\n" % a.token.encode())
    got = recv_until(s, 2)
    check(got.startswith(b"%7\r\n"), "HELLO 3 AUTH answers a RESP3 map: %r" % got[:40])


def redis_cli(a):
    cli = shutil.which("redis-cli")
    if not cli:
        print("redis-cli not found: its checks skipped (make deps)")
        return
    base = [cli, "-p", str(a.port)] + (["--tls", "--cacert", a.tls_ca] if a.tls_ca else []) + \
        (["--no-auth-warning", "-a", a.token] if a.token else [])

    def run(*args):
        return subprocess.run(base + list(args), capture_output=True, text=True, timeout=30).stdout

    check(run("sadd", "rc", "1", "2").strip() == "2", "redis-cli sadd")
    check(run("-3", "hget", "rcnone", "1").strip() == "", "redis-cli -3: a missing field")
    out = run("-3", "hello", "3")
    check("proto" in out and "3" in out, "redis-cli -3 hello: %r" % out)
    out = run("sadd", "rc", "x")
    check("ERR" in out and "decimal integer" in out, "redis-cli shows the error: %r" % out)
    out = run("info", "keyspace")
    check("# Keyspace" in out and "table_rc:kind=set" in out, "INFO keyspace: %r" % out)
    out = run("config", "get", "max-inflight")
    check("max-inflight" in out, "CONFIG GET: %r" % out)
    check(run("del", "rc").strip() == "1", "redis-cli del")


def redis_benchmark(a, n):
    rb = shutil.which("redis-benchmark")
    if not rb:
        print("redis-benchmark not found: its check skipped (make deps)")
        return
    r = client(a)
    r.delete("rbench")
    cmd = [rb, "-p", str(a.port), "-P", "64", "-c", "8", "-r", "1000000000", "-n", str(n), "-q"]
    if a.tls_ca:
        cmd += ["--tls", "--cacert", a.tls_ca]
    if a.token:
        cmd += ["-a", a.token]
    out = subprocess.run(cmd + ["sadd", "rbench", "__rand_int__"], capture_output=True, text=True, timeout=120)
    check(out.returncode == 0 and "requests per second" in out.stdout, "redis-benchmark: %r" % out.stdout[-300:])
    card = r.scard("rbench")
    # n random members of 10^9: about n^2 / 2e9 of them repeat; redis-benchmark may send up to a pipeline a
    # client (8 x 64) past n
    check(n - n * n // 10**9 - 50 <= card <= n + 8 * 64, "redis-benchmark's %d SADDs left %d members" % (n, card))
    print("redis-benchmark:", out.stdout.strip().splitlines()[-1])
    r.delete("rbench")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("--token")
    p.add_argument("--tls-ca")
    p.add_argument("--cli")
    p.add_argument("--uri")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    seed = random.randrange(2**32)
    print("seed", seed)
    rng = random.Random(seed)
    r = client(a)
    check(r.ping(), "ping")
    if a.token:
        auth(a)
    model_run(r, rng, 60 if a.quick else 300)
    model_direct(r, rng, 300 if a.quick else 2000)
    errors(r, a)
    raw_protocol(a)
    redis_cli(a)
    redis_benchmark(a, 20000 if a.quick else 200000)
    print("check_resp: ok")


if __name__ == "__main__":
    main()
