"""The Python package against a floed it starts (FLOED, default build/rel/floed;
libfloe from FLOE_LIB): every answer checked against a Python reference
(a set, a dict, a sorted list), errors raised with the server's status,
the C declarations checked against client/floe.h by a compiled probe, and
`pip install ./python` offline into a venv."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import floe

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FLOED = os.environ.get("FLOED", os.path.join(ROOT, "build", "rel", "floed"))


@pytest.fixture(scope="module")
def server():
    d = tempfile.mkdtemp(prefix="floe-py.")
    port_file = os.path.join(d, "port")
    p = subprocess.Popen([FLOED, "--port", "0", "--port-file", port_file, "--log-level", "warn",
                          "--backend", os.environ.get("FLOE_BACKEND", "cpu")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(200):
        if os.path.exists(port_file) and open(port_file).read().strip():
            break
        time.sleep(0.05)
    else:
        p.kill()
        raise RuntimeError("floed did not start: %s" % p.stderr.read().decode())
    yield "floe://127.0.0.1:%s" % open(port_file).read().strip()
    p.terminate()
    p.wait(10)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def client(server):
    with floe.connect(server) as c:
        yield c


def expect_inserts(ref: set, keys) -> np.ndarray:
    """What find-or-put answers, key by key in order (the reference)."""
    out = np.empty(len(keys), dtype=np.uint8)
    for i, k in enumerate(keys.tolist()):
        out[i] = floe.PRESENT if k in ref else floe.INSERTED
        ref.add(k)
    return out


def test_set_against_a_python_set(client):
    t = client.create("s", key_bits=40, grow=True)
    rng = np.random.default_rng(7)
    ref = set()
    client.request_keys = 5000  # several requests a call, in flight together
    try:
        for _ in range(4):
            keys = rng.integers(0, 60000, size=20000, dtype=np.uint64)  # repeats within and across calls
            assert np.array_equal(t.insert(keys), expect_inserts(ref, keys))
    finally:
        client.request_keys = floe.Client.request_keys
    probe = rng.integers(0, 120000, size=30000, dtype=np.uint64)
    want = np.array([floe.PRESENT if k in ref else floe.ABSENT for k in probe.tolist()], dtype=np.uint8)
    assert np.array_equal(t.find(probe), want)
    gone = np.array(sorted(ref)[:100] + [10**9], dtype=np.uint64)
    erased = t.erase(gone)
    assert (erased[:100] == floe.ERASED).all() and erased[100] == floe.ABSENT
    assert len(t) == len(ref) - 100
    assert t.find(gone[:1])[0] == floe.ABSENT
    client.drop("s")


def test_pipelined_futures(client):
    t = client.create("p", key_bits=32, capacity=1 << 20)
    parts = [np.arange(i * 1000, i * 1000 + 1500, dtype=np.uint64) for i in range(8)]  # overlapping ranges
    futures = [t.insert_async(k) for k in parts]  # all sent before any is read
    ref = set()
    for k, f in zip(parts, futures):
        assert np.array_equal(f.result(), expect_inserts(ref, k))
        assert f.done()
    client.drop("p")


def test_map_values_ids_and_add(client):
    t = client.create("m", kind="map", value_bytes=8, key_bits=48)
    keys = np.array([5, 6, 7, 5], dtype=np.uint64)
    vals = np.array([50, 60, 70, 55], dtype=np.uint64)
    ans, ids = t.insert(keys, vals, ids=True)
    assert list(ans) == [floe.INSERTED, floe.INSERTED, floe.INSERTED, floe.PRESENT]
    assert ids[0] == ids[3] and len(set(ids[:3].tolist())) == 3
    ans, got, fids = t.find(np.array([7, 5, 9], dtype=np.uint64), values=True, ids=True)
    assert list(ans) == [floe.PRESENT, floe.PRESENT, floe.ABSENT]
    assert list(got) == [70, 50, 0]  # the first occurrence's value stayed
    assert fids[0] == ids[2] and fids[1] == ids[0] and fids[2] == floe.NO_ID
    t.insert(np.array([5], dtype=np.uint64), np.array([500], dtype=np.uint64), overwrite=True)
    ans, after = t.add(np.array([5, 8, 5], dtype=np.uint64), np.array([1, 2, 3], dtype=np.uint64))
    assert list(ans) == [floe.PRESENT, floe.INSERTED, floe.PRESENT] and list(after) == [501, 2, 504]
    client.drop("m")


def test_static_filled_frozen_refuses_writes(client):
    t = client.create("frozen", kind="static", value_bytes=4, key_bits=40)
    rng = np.random.default_rng(7)
    keys = np.unique(rng.integers(0, 1 << 40, size=50000, dtype=np.uint64))
    vals = (keys * np.uint64(3) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    assert (t.insert(keys, vals) == floe.INSERTED).all()
    assert not t.stats()["frozen"]
    t.freeze()
    st = t.stats()
    assert st["frozen"] and st["keys"] == len(keys) and st["kind"] == "static"
    others = np.setdiff1d(rng.integers(0, 1 << 40, size=50000, dtype=np.uint64), keys)
    ans, got = t.find(np.concatenate([keys, others]), values=True)
    assert (ans[:len(keys)] == floe.PRESENT).all() and (ans[len(keys):] == floe.ABSENT).all()
    assert (got[:len(keys)] == vals).all() and (got[len(keys):] == 0).all()
    with pytest.raises(floe.FloeError) as e:
        t.insert(others[:3], vals[:3])
    assert e.value.code == 13 and e.value.status == "ERR_FROZEN" and "frozen" in str(e.value)
    t.freeze()  # again: nothing changes
    assert t.stats()["keys"] == len(keys)
    client.drop("frozen")


def test_tree_vectors_as_2d_arrays(client):
    t = client.create("v", kind="tree", words=4, capacity=1000)
    vec = np.array([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4]], dtype=np.uint32)
    ans, ids = t.insert(vec, ids=True)
    assert list(ans) == [floe.INSERTED, floe.INSERTED, floe.PRESENT] and ids[0] == ids[2]
    assert list(t.find(np.array([[1, 2, 3, 5], [9, 9, 9, 9]], dtype=np.uint32))) == [floe.PRESENT, floe.ABSENT]
    res, back = t.get(np.array([ids[1], ids[0]], dtype=np.uint64))
    assert (res == floe.PRESENT).all() and np.array_equal(back, vec[[1, 0]])
    with pytest.raises(ValueError):
        t.insert(np.zeros((2, 3), dtype=np.uint32))  # not the table's words
    client.drop("v")


def test_ordered_ranges_and_neighbours(client):
    t = client.create("o", kind="ordered", key_bits=40, value_bytes=4)
    rng = np.random.default_rng(3)
    keys = np.unique(rng.integers(0, 1 << 30, size=5000, dtype=np.uint64))
    t.insert(keys, (keys % 1000).astype(np.uint32))
    ref = np.sort(keys)
    lo, hi = int(ref[100]) - 1, int(ref[900])
    got = t.range(lo, hi, page=64)  # several pages
    assert np.array_equal(got, ref[(ref >= lo) & (ref <= hi)])
    k, v = t.range(lo, hi, limit=10, desc=True, values=True)
    assert np.array_equal(k, ref[(ref >= lo) & (ref <= hi)][::-1][:10]) and np.array_equal(v, (k % 1000).astype(np.uint32))
    q = np.array([0, int(ref[10]), int(ref[-1]) + 1], dtype=np.uint64)
    ans, s = t.successor(q)
    assert list(ans) == [floe.PRESENT, floe.PRESENT, floe.ABSENT] and list(s[:2]) == [ref[0], ref[10]]
    ans, p = t.predecessor(q)
    assert ans[2] == floe.PRESENT and p[2] == ref[-1]
    assert t.min() == ref[0] and t.max() == ref[-1]
    client.drop("o")
    e = client.create("empty", kind="ordered")
    assert e.min() is None
    client.drop("empty")


def test_errors_carry_the_status(server, client):
    with pytest.raises(floe.FloeError) as e:
        client.table("nope")
    assert e.value.status == "ERR_NO_TABLE" and e.value.code == 2 and "nope" in str(e.value)
    t = client.create("narrow", key_bits=8)
    with pytest.raises(floe.FloeError) as e:
        t.insert(np.array([1, 256], dtype=np.uint64))  # too wide: nothing changes
    assert e.value.status == "ERR_INVALID"
    assert len(t) == 0
    with pytest.raises(ValueError):
        t.insert(np.array([-1, 2]))
    with pytest.raises(ValueError):
        t.insert(np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(floe.FloeError) as e:
        t.find([1], values=True)  # a SET has no values: the server's refusal
    assert e.value.status == "ERR_INVALID" and "value" in e.value.message
    with pytest.raises(floe.FloeError) as e:
        client.create("narrow")
    assert e.value.status == "ERR_EXISTS"
    client.drop("narrow")
    with pytest.raises(ValueError):
        client.create("x", kind="heap")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with pytest.raises(floe.FloeError) as e:
        floe.connect("floe://127.0.0.1:%d" % dead, timeout_ms=2000)
    assert e.value.status == "ERR_IO"


def test_context_manager_closes(server):
    with floe.connect(server) as c:
        c.ping()
        assert c.server["server"].startswith("floed")
        assert "max-connections" in c.config_get("max-*")
    with pytest.raises(floe.FloeError):
        c.ping()


def test_declarations_match_the_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to check the declarations against client/floe.h")
    types = ["floe_table_info", "floe_table_def", "floe_server_info", "floe_setting", "floe_range_cursor",
             "floe_counts"]
    src = tmp_path / "sizes.c"
    src.write_text('#include <stdio.h>\n#include "floe.h"\nint main(void) {\n' +
                   "".join('printf("%%zu\\n", sizeof(%s));\n' % t for t in types) + "return 0;\n}\n")
    exe = tmp_path / "sizes"
    subprocess.run([cc, "-I", os.path.join(ROOT, "client"), "-I", os.path.join(ROOT, "proto"), str(src), "-o",
                    str(exe)], check=True)
    want = [int(x) for x in subprocess.run([str(exe)], capture_output=True, check=True).stdout.split()]
    assert [floe.ffi.sizeof(t) for t in types] == want


def test_pip_install_offline(server, tmp_path):
    """pip install ./python into a venv, with no index (offline), and use it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index"]
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                                    "__pycache__", "tests"))
    subprocess.run(pip + [str(src)], check=True)
    code = ("import floe, numpy as np\n"
            "with floe.connect(%r) as c:\n"
            "    t = c.create('pip', key_bits=16)\n"
            "    print(list(t.insert(np.array([1, 1], dtype=np.uint64))))\n"
            "    c.drop('pip')\n"
            "print(floe.__file__)\n" % server)
    env = dict(os.environ, PYTHONPATH="")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == "[2, 1]" and str(venv) in lines[1]  # INSERTED, PRESENT, from the venv's copy
