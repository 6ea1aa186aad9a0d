#!/usr/bin/env python3
"""tls_client.py - a floe client written apart from libfloe: Python's ssl module and
protobuf messages encoded by hand from proto/floe.proto (no protobuf library), so that
the TLS tests do not check floed against libfloe's own idea of TLS.

  tls_client.py HOST PORT CAFILE [--cert CERT --key KEY] [--tls12] [--token T] [--name NAME]

Over TLS (1.3 unless --tls12 asks for 1.2 and nothing else), with the server's certificate
checked against CAFILE and NAME (default HOST): hello, create table NAME-less "py" (SET),
insert 1 2 3 2, find 2 99. Prints the TLS version and each answer; exit 0 when every answer
is what the protocol says, 1 otherwise, 3 when the TLS connection or its handshake fails
(the reason on stderr)."""
import socket
import ssl
import struct
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload  # wire 2: bytes, strings, messages


def request(rid, op_field, body):
    return field(1, 0, rid) + field(op_field, 2, body)


def parse(buf):
    """A message's fields: {number: [values]} (varints as ints, length-delimited as bytes)."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = read_varint(buf, i)
        elif wire == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        out.setdefault(num, []).append(v)
    return out


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def call(s, rid, op_field, body):
    msg = request(rid, op_field, body)
    s.sendall(struct.pack(">I", len(msg)) + msg)
    (n,) = struct.unpack(">I", recv_exact(s, 4))
    r = parse(recv_exact(s, n))
    if r.get(1, [0])[0] != rid:
        raise ValueError("response id %s for request %d" % (r.get(1), rid))
    return r


def keys(*ks):
    return b"".join(struct.pack("<Q", k) for k in ks)


def main(argv):
    args = argv[1:]
    host, port, cafile = args[0], int(args[1]), args[2]
    opt = {}
    i = 3
    while i < len(args):
        if args[i] == "--tls12":
            opt["tls12"] = True
            i += 1
        else:
            opt[args[i][2:]] = args[i + 1]
            i += 2
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # checks the certificate and the name
    ctx.load_verify_locations(cafile)
    if opt.get("tls12"):
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if "cert" in opt:
        ctx.load_cert_chain(opt["cert"], opt["key"])
    try:
        raw = socket.create_connection((host, port), timeout=10)
        s = ctx.wrap_socket(raw, server_hostname=opt.get("name", host))
        print("tls", s.version())
        hello = field(1, 0, 1) + (field(2, 2, opt["token"].encode()) if "token" in opt else b"")
        r = call(s, 1, 2, hello)
    except (ssl.SSLError, ConnectionError, OSError) as e:
        print("tls_client: %s" % e, file=sys.stderr)
        return 3
    ok = r.get(2, [0])[0] == 0 and 20 in r
    print("hello", "ok" if ok else r)
    table = b"py"
    spec = field(1, 2, table) + field(2, 0, 1)  # name, kind SET
    r = call(s, 2, 4, field(1, 2, spec))
    created = r.get(2, [0])[0] in (0, 3)  # OK, or ERR_EXISTS from an earlier run
    print("create", "ok" if created else r)
    r = call(s, 3, 7, field(1, 2, table) + field(2, 2, keys(1, 2, 3, 2)))
    inserted = list(r.get(4, [b""])[0])
    print("insert", inserted)
    r = call(s, 4, 8, field(1, 2, table) + field(2, 2, keys(2, 99)))
    found = list(r.get(4, [b""])[0])
    print("find", found)
    s.close()
    # INSERTED = 2, PRESENT = 1, ABSENT = 0 (docs/PROTOCOL.md)
    good = ok and created and inserted == [2, 2, 2, 1] and found == [1, 0]
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
