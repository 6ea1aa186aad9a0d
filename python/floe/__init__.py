"""floe: the Python client of floed, exact sets and dictionaries held in GPU
memory (https://github.com/... see the floe repository's README).

One call moves a whole numpy array over libfloe: keys in (``np.uint64``),
answers out (``np.uint8``: ABSENT, PRESENT, INSERTED, FULL, ERASED), values,
ids, TREE vectors as 2-D ``np.uint32`` arrays.  Arrays larger than one
request are sent in pipelined requests of at most ``Client.request_keys``
keys.  Every failure raises FloeError with the server's status and message.

    import numpy as np, floe
    with floe.connect("floe://127.0.0.1:7450") as c:
        t = c.create("s", key_bits=40, grow=True)
        answers = t.insert(np.arange(10, dtype=np.uint64))
"""
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from ._lib import C, ffi, lib

__all__ = ["connect", "Client", "Table", "Future", "FloeError",
           "ABSENT", "PRESENT", "INSERTED", "FULL", "ERASED", "SET", "MAP", "TREE", "ORDERED",
           "STATIC"]

ABSENT, PRESENT, INSERTED, FULL, ERASED = 0, 1, 2, 3, 4
SET, MAP, TREE, ORDERED, STATIC = 1, 2, 3, 4, 5
_KINDS = {"set": SET, "map": MAP, "tree": TREE, "ordered": ORDERED, "static": STATIC}
_OVERWRITE, _WANT_IDS, _WANT_VALUES, _RANGE_DESC = 1, 2, 4, 8
NO_ID = (1 << 64) - 1

__version__ = ffi.string(lib.floe_version()).decode()


class FloeError(Exception):
    """A call that failed: ``code`` (libfloe's number), ``status`` (its name:
    "ERR_NO_TABLE", "ERR_INVALID", "ERR_IO", ...) and the message."""

    def __init__(self, code: int, message: str):
        self.code = code
        self.status = ffi.string(lib.floe_strerror(code)).decode()
        self.message = message
        super().__init__("%s: %s" % (self.status, message) if message else self.status)


def _keys(keys) -> np.ndarray:
    a = np.ascontiguousarray(keys)
    if a.ndim != 1:
        raise ValueError("keys: a 1-D array, got %d dimensions" % a.ndim)
    if a.dtype != np.uint64:
        if a.size and (not np.issubdtype(a.dtype, np.integer) or a.min() < 0):
            raise ValueError("keys: unsigned 64-bit integers (np.uint64), got %s" % a.dtype)
        a = a.astype(np.uint64)
    return a


def _ptr(a: np.ndarray, ctype: str):
    return ffi.cast(ctype, ffi.from_buffer(a)) if a.size else ffi.NULL


class Future:
    """The answer of a pipelined call (``Table.insert_async`` ...): ``result()``
    waits for it (driving the connection) and returns what the blocking
    call would."""

    def __init__(self, client: "Client", calls, finish):
        self._client, self._calls, self._finish, self._value = client, calls, finish, None
        self._done = False

    def result(self):
        if not self._done:
            try:
                self._value = self._finish(self._client._wait_all(self._calls))
            finally:
                self._calls = []
                self._done = True
        return self._value

    def done(self) -> bool:
        return self._done


class Client:
    """A connection to floed (or, with a URI list, to a table partitioned over
    several).  Use it as a context manager, or close() it."""

    request_keys = 1 << 20  #: keys per request when an array is larger

    def __init__(self, uri: str = "floe://127.0.0.1:7450", token: Optional[str] = None,
                 timeout_ms: Optional[int] = None):
        out = ffi.new("floe **")
        st = lib.floe_connect(uri.encode(), token.encode() if token else ffi.NULL, out)
        if st != 0:
            msg = ffi.string(lib.floe_errstr(out[0])).decode() if out[0] != ffi.NULL else ""
            if out[0] != ffi.NULL:
                lib.floe_close(out[0])
            raise FloeError(st, msg or "cannot connect to %s" % uri)
        self._c = out[0]
        if timeout_ms is not None:
            lib.floe_set_timeout(self._c, int(timeout_ms))

    # ---- the connection ----

    def close(self) -> None:
        """Closes the connection (what is in flight is dropped)."""
        if self._c is not None:
            lib.floe_close(self._c)
            self._c = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _conn(self):
        if self._c is None:
            raise FloeError(100, "the connection is closed")
        return self._c

    def _check(self, st: int) -> None:
        if st != 0:
            raise FloeError(st, ffi.string(lib.floe_errstr(self._c)).decode())

    @property
    def server(self) -> Dict[str, object]:
        """What the server said in its hello: version, limits, backend."""
        i = lib.floe_info(self._conn())
        return {"server": ffi.string(i.server).decode(), "protocol": i.version, "max_frame": i.max_frame,
                "max_batch_keys": i.max_batch_keys, "max_inflight": i.max_inflight,
                "backend": ffi.string(i.backend).decode(), "features": ffi.string(i.features).decode().split()}

    def ping(self) -> None:
        self._check(lib.floe_ping(self._conn()))

    # ---- tables ----

    def create(self, name: str, kind: str = "set", key_bits: int = 64, value_bytes: int = 0, capacity: int = 0,
               grow: bool = False, words: int = 0, parts: int = 0, backend: Optional[str] = None,
               max_fill: float = 0.0, memory: int = 0) -> "Table":
        """Creates a table: kind "set", "map" (value_bytes 4 or 8), "tree"
        (words 2..256), "ordered" or "static" (value_bytes 0, 4 or 8: filled
        by inserts, then Table.freeze()); grow: rebuild at twice the size
        instead of answering FULL (a TREE and a STATIC table grow anyway).
        Returns it."""
        if kind not in _KINDS:
            raise ValueError("kind: set, map, tree, ordered or static, got %r" % kind)
        d = ffi.new("floe_table_def *")
        cname = ffi.new("char[]", name.encode())
        cback = ffi.new("char[]", backend.encode()) if backend else ffi.NULL
        d.name, d.kind = cname, _KINDS[kind]
        d.key_bits = 0 if kind == "tree" else key_bits
        d.value_bytes, d.capacity, d.grow, d.words = value_bytes, capacity, int(grow), words
        d.parts, d.backend, d.max_fill, d.memory = parts, cback, max_fill, memory
        self._check(lib.floe_create(self._conn(), d))
        return self.table(name)

    def drop(self, name: str) -> None:
        self._check(lib.floe_drop(self._conn(), name.encode()))

    def table(self, name: str) -> "Table":
        """The table called name (its kind and widths read from the server)."""
        return Table(self, self.stats(name))

    def stats(self, name: str) -> Dict[str, object]:
        """A table's figures: kind, key_bits, value_bytes, words, keys, slots,
        fill, memory_bytes, bytes_per_key, backend, generation."""
        info = ffi.new("floe_table_info *")
        self._check(lib.floe_stats(self._conn(), name.encode(), info))
        return _info(info)

    def tables(self) -> List[Dict[str, object]]:
        out, n = ffi.new("floe_table_info **"), ffi.new("size_t *")
        self._check(lib.floe_tables(self._conn(), out, n))
        try:
            return [_info(out[0] + i) for i in range(n[0])]
        finally:
            C.free(out[0])

    def snapshot(self, name: Optional[str] = None) -> None:
        """Saves the table (None: every table) into the server's data-dir."""
        self._check(lib.floe_snapshot(self._conn(), name.encode() if name else ffi.NULL))

    def config_get(self, pattern: str = "*") -> Dict[str, str]:
        """The server's settings matching a shell pattern, as its config file writes them."""
        out, n = ffi.new("floe_setting **"), ffi.new("size_t *")
        self._check(lib.floe_config_get(self._conn(), pattern.encode(), out, n, ffi.NULL, 0))
        try:
            return {ffi.string(out[0][i].name).decode(): ffi.string(out[0][i].value).decode() for i in range(n[0])}
        finally:
            C.free(out[0])

    def config_set(self, name: str, value: str) -> None:
        """Sets a setting the server applies while it runs (floe config set)."""
        self._check(lib.floe_config_set(self._conn(), name.encode(), str(value).encode()))

    # ---- pipelined calls ----

    def _send(self, fn, *args):
        call = fn(self._conn(), *args, ffi.NULL, ffi.NULL)
        if call == ffi.NULL:
            raise MemoryError("floe: out of memory sending a request")
        return call

    def _wait_all(self, calls):
        """Waits for every call; returns them (their owner frees them) or raises the first failure."""
        first = None
        for call in calls:
            st = lib.floe_wait(self._c, call)
            if st != 0 and first is None:
                msg = lib.floe_call_error(call)
                first = FloeError(st, ffi.string(msg).decode() if msg != ffi.NULL else "")
        if first is not None:
            for call in calls:
                lib.floe_call_free(call)
            raise first
        return calls


def _info(i) -> Dict[str, object]:
    kinds = {v: k for k, v in _KINDS.items()}
    return {"name": ffi.string(i.name).decode(), "kind": kinds.get(i.kind, "?"), "key_bits": i.key_bits,
            "value_bytes": i.value_bytes, "words": i.words, "capacity": i.capacity, "grow": bool(i.grow),
            "keys": i.keys, "tombstones": i.tombstones, "slots": i.slots, "fill": i.fill,
            "memory_bytes": i.memory_bytes, "bytes_per_key": i.bytes_per_key,
            "backend": ffi.string(i.backend).decode(), "generation": i.generation, "parts": i.n_parts,
            "frozen": bool(i.frozen)}


def _copy(src, nbytes: int, dtype, count: int, what: str) -> np.ndarray:
    out = np.empty(count, dtype=dtype)
    if nbytes != out.nbytes:
        raise FloeError(101, "the server answered %d bytes of %s for %d entries" % (nbytes, what, count))
    if nbytes:
        ffi.memmove(ffi.from_buffer(out), src, nbytes)
    return out


class Table:
    """A table of a Client.  Keys are ``np.uint64`` arrays (other unsigned
    integer arrays and lists are converted), answers ``np.uint8`` arrays.
    Every method has an ``_async`` form for insert, find and erase that
    returns a Future, so that several requests are in flight at once."""

    def __init__(self, client: Client, info: Dict[str, object]):
        self.client = client
        self.name: str = info["name"]
        self.kind: str = info["kind"]
        self.key_bits: int = info["key_bits"]
        self.value_bytes: int = info["value_bytes"]
        self.words: int = info["words"]
        self._cname = ffi.new("char[]", self.name.encode())

    def __repr__(self) -> str:
        return "floe.Table(%r, kind=%r)" % (self.name, self.kind)

    def stats(self) -> Dict[str, object]:
        return self.client.stats(self.name)

    def freeze(self) -> None:
        """STATIC: builds the table's static cuckoo table from the keys (and
        values) stored; from then on it answers finds, and writes raise
        FloeError with status ERR_FROZEN (13).  Again: nothing changes."""
        self.client._check(lib.floe_freeze(self.client._conn(), self.name.encode()))

    def __len__(self) -> int:
        return int(self.stats()["keys"])

    # ---- keys (SET, MAP, ORDERED) and vectors (TREE) ----

    def _values_dtype(self):
        if self.value_bytes not in (4, 8):
            raise FloeError(8, "table %s holds no values" % self.name)  # ERR_UNSUPPORTED
        return np.uint32 if self.value_bytes == 4 else np.uint64

    def _chunks(self, n: int):
        step = max(1, int(self.client.request_keys))
        return [(i, min(n, i + step)) for i in range(0, n, step)] or [(0, 0)]

    def _vectors(self, vectors) -> np.ndarray:
        v = np.ascontiguousarray(vectors, dtype=np.uint32)
        if v.ndim != 2 or v.shape[1] != self.words:
            raise ValueError("vectors: a 2-D array of %d columns (the table's words), got shape %s"
                             % (self.words, v.shape))
        return v

    def _keys_call(self, op: str, keys, values=None, flags: int = 0):
        """Sends op on keys (or vectors) in requests; returns (calls, n, finish parts)."""
        c = self.client
        if self.kind == "tree" and op in ("insert", "find"):
            v = self._vectors(keys)
            fn = lib.floe_send_insert_vectors if op == "insert" else lib.floe_send_find_vectors
            calls = [c._send(fn, self._cname, _ptr(v[a:b], "uint32_t *"), b - a, self.words, flags)
                     for a, b in self._chunks(v.shape[0])]
            return calls, v.shape[0]
        k = _keys(keys)
        calls = []
        vals = None
        if values is not None:
            vals = np.ascontiguousarray(values, dtype=self._values_dtype())
            if vals.shape != k.shape:
                raise ValueError("values: one per key (%d), got shape %s" % (k.size, vals.shape))
        for a, b in self._chunks(k.size):
            kp = _ptr(k[a:b], "uint64_t *")
            if op == "insert":
                vp = _ptr(vals[a:b], "void *") if vals is not None else ffi.NULL
                vl = (b - a) * self.value_bytes if vals is not None else 0
                calls.append(c._send(lib.floe_send_insert, self._cname, kp, b - a, vp, vl, flags))
            elif op == "add":
                calls.append(c._send(lib.floe_send_add, self._cname, kp, b - a, _ptr(vals[a:b], "void *"),
                                     (b - a) * self.value_bytes))
            elif op == "find":
                calls.append(c._send(lib.floe_send_find, self._cname, kp, b - a, flags))
            elif op == "erase":
                calls.append(c._send(lib.floe_send_erase, self._cname, kp, b - a))
            elif op == "successor":
                calls.append(c._send(lib.floe_send_successor, self._cname, kp, b - a, flags))
            elif op == "predecessor":
                calls.append(c._send(lib.floe_send_predecessor, self._cname, kp, b - a, flags))
        return calls, k.size

    def _answers(self, calls, n: int, ids: bool = False, values: bool = False, keys: bool = False):
        """Each call's answers (and ids, values, keys found) joined into arrays; frees the calls."""
        res, idv, vv, kv = [], [], [], []
        size = ffi.new("size_t *")
        try:
            for call in calls:
                r = lib.floe_call_results(call, size)
                m = size[0]
                res.append(_copy(r, m, np.uint8, m, "answers"))
                if ids:
                    p = lib.floe_call_ids(call, size)
                    idv.append(_copy(p, size[0], np.uint64, m, "ids"))
                if values:
                    p = lib.floe_call_values(call, size)
                    vv.append(_copy(p, size[0], self._values_dtype(), m, "values"))
                if keys:
                    p = lib.floe_call_keys(call, size)
                    kv.append(_copy(p, size[0], np.uint64, m, "keys"))
        finally:
            for call in calls:
                lib.floe_call_free(call)
        cat = lambda parts, dt: np.concatenate(parts) if parts else np.empty(0, dtype=dt)
        out = [cat(res, np.uint8)]
        if out[0].size != n:
            raise FloeError(101, "the server answered %d keys of %d" % (out[0].size, n))
        if keys:
            out.append(cat(kv, np.uint64))
        if values:
            out.append(cat(vv, self._values_dtype()))
        if ids:
            out.append(cat(idv, np.uint64))
        return out[0] if len(out) == 1 else tuple(out)

    def insert_async(self, keys, values=None, overwrite: bool = False, ids: bool = False) -> Future:
        """insert, pipelined: a Future of what insert returns."""
        flags = (_OVERWRITE if overwrite else 0) | (_WANT_IDS if ids else 0)
        calls, n = self._keys_call("insert", keys, values, flags)
        return Future(self.client, calls, lambda cs: self._answers(cs, n, ids=ids))

    def insert(self, keys, values=None, overwrite: bool = False, ids: bool = False):
        """Find-or-put: an answer per key (INSERTED, PRESENT, FULL; the first
        occurrence of a key in one request is the one INSERTED).  MAP: values
        (one per key) stored with new keys (overwrite: with every key).  TREE:
        keys is a 2-D array of vectors.  ids=True: (answers, ids)."""
        return self.insert_async(keys, values, overwrite, ids).result()

    def find_async(self, keys, values: bool = False, ids: bool = False) -> Future:
        flags = (_WANT_VALUES if values else 0) | (_WANT_IDS if ids else 0)
        calls, n = self._keys_call("find", keys, None, flags)
        return Future(self.client, calls, lambda cs: self._answers(cs, n, ids=ids, values=values))

    def find(self, keys, values: bool = False, ids: bool = False):
        """PRESENT or ABSENT per key (TREE: per vector).  values=True (a MAP):
        (answers, values), 0 for absent keys; ids=True adds the ids last."""
        return self.find_async(keys, values, ids).result()

    def erase_async(self, keys) -> Future:
        calls, n = self._keys_call("erase", keys)
        return Future(self.client, calls, lambda cs: self._answers(cs, n))

    def erase(self, keys) -> np.ndarray:
        """ERASED or ABSENT per key (the first occurrence in a request is the one ERASED)."""
        return self.erase_async(keys).result()

    def add(self, keys, deltas) -> Tuple[np.ndarray, np.ndarray]:
        """MAP: each key's value += its delta (wrapping); (answers, values after each key's own delta)."""
        calls, n = self._keys_call("add", keys, deltas)
        return Future(self.client, calls, lambda cs: self._answers(cs, n, values=True)).result()

    def get(self, ids) -> Tuple[np.ndarray, np.ndarray]:
        """TREE: the vectors of ids, (answers PRESENT/ABSENT, 2-D array of vectors; zeros where ABSENT)."""
        i = _keys(ids)
        res = np.empty(i.size, dtype=np.uint8)
        vec = np.empty((i.size, self.words), dtype=np.uint32)
        self.client._check(lib.floe_get_by_id(self.client._conn(), self._cname, _ptr(i, "uint64_t *"), i.size,
                                              self.words, _ptr(res, "uint8_t *"), _ptr(vec, "uint32_t *")))
        return res, vec

    # ---- ORDERED ----

    def range(self, lo: int, hi: int, limit: Optional[int] = None, desc: bool = False, values: bool = False,
              page: int = 1 << 20):
        """ORDERED: the stored keys in [lo, hi], ascending (desc: descending
        from hi), at most limit of them; values=True: (keys, values)."""
        cur = ffi.new("floe_range_cursor *")
        n, done = ffi.new("size_t *"), ffi.new("int *")
        ks, vs, got = [], [], 0
        want_v = values and self.value_bytes in (4, 8)
        while True:
            m = page if limit is None else min(page, limit - got)
            if m <= 0:
                break
            k = np.empty(m, dtype=np.uint64)
            v = np.empty(m, dtype=self._values_dtype()) if want_v else None
            self.client._check(lib.floe_range(self.client._conn(), self._cname, lo, hi, _RANGE_DESC if desc else 0,
                                              cur, m, _ptr(k, "uint64_t *"), _ptr(v, "void *") if want_v else ffi.NULL,
                                              self.value_bytes if want_v else 0, n, done))
            ks.append(k[:n[0]])
            if want_v:
                vs.append(v[:n[0]])
            got += n[0]
            if done[0]:
                break
        keys = np.concatenate(ks) if ks else np.empty(0, dtype=np.uint64)
        if values:
            return keys, (np.concatenate(vs) if vs else np.empty(0, dtype=self._values_dtype()))
        return keys

    def successor(self, keys) -> Tuple[np.ndarray, np.ndarray]:
        """ORDERED: for each key the smallest stored key >= it: (answers PRESENT/ABSENT, keys found; 0 where none)."""
        calls, n = self._keys_call("successor", keys)
        return Future(self.client, calls, lambda cs: self._answers(cs, n, keys=True)).result()

    def predecessor(self, keys) -> Tuple[np.ndarray, np.ndarray]:
        """ORDERED: for each key the largest stored key <= it: (answers, keys found)."""
        calls, n = self._keys_call("predecessor", keys)
        return Future(self.client, calls, lambda cs: self._answers(cs, n, keys=True)).result()

    def min(self) -> Optional[int]:
        """ORDERED: the smallest stored key, None when the table is empty."""
        return self._end(lib.floe_min)

    def max(self) -> Optional[int]:
        """ORDERED: the largest stored key, None when the table is empty."""
        return self._end(lib.floe_max)

    def _end(self, fn) -> Optional[int]:
        found, key = ffi.new("int *"), ffi.new("uint64_t *")
        self.client._check(fn(self.client._conn(), self._cname, found, key, ffi.NULL, 0))
        return int(key[0]) if found[0] else None


def connect(uri: str = "floe://127.0.0.1:7450", token: Optional[str] = None,
            timeout_ms: Optional[int] = None) -> Client:
    """A Client: floe://HOST:PORT, floes:// for TLS, a comma-separated list
    of servers for a table partitioned over several floed.  token: the
    server's (also from the URI's ?token= or $FLOE_TOKEN as libfloe reads it)."""
    return Client(uri, token, timeout_ms)
