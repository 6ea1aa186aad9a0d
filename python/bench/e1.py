#!/usr/bin/python3
"""E1 from Python: T threads, each with its own connection, each sending
R arrays of K keys to one SET (find-or-put, half of each array keys sent
before), and the keys/s of the whole.  The keys are made before the clock
starts; every answer is counted (INSERTED must equal the new keys).

usage: e1.py URI [--threads 16] [--keys 1048576] [--rounds 8] [--inflight 4]"""
import argparse
import threading
import time

import numpy as np

import floe


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("uri")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--keys", type=int, default=1 << 20)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--inflight", type=int, default=4, help="arrays in flight per connection (futures)")
    ap.add_argument("--backend", default=None)
    a = ap.parse_args()
    with floe.connect(a.uri) as c:
        try:
            c.drop("py-e1")
        except floe.FloeError:
            pass
        c.create("py-e1", key_bits=40, capacity=a.threads * a.rounds * a.keys // 2 + 1024, backend=a.backend)
    work = []
    for t in range(a.threads):  # each array: half new keys, half repeats of the thread's earlier ones
        base = np.uint64(t) << np.uint64(34)
        arrays, new = [], 0
        for r in range(a.rounds):
            fresh = base + np.arange(new, new + a.keys // 2, dtype=np.uint64)
            old = base + (np.arange(a.keys - a.keys // 2, dtype=np.uint64) * np.uint64(2654435761)) % np.uint64(max(new, 1))
            if new == 0:
                old = fresh[: a.keys - a.keys // 2]
            arr = np.concatenate([fresh, old])
            np.random.default_rng(t * 1000 + r).shuffle(arr)
            arrays.append(arr)
            new += a.keys // 2
        work.append(arrays)
    inserted = [0] * a.threads
    start = threading.Barrier(a.threads + 1)

    def run(t):
        with floe.connect(a.uri) as c:
            tbl = c.table("py-e1")
            c.request_keys = a.keys
            start.wait()
            pending = []
            for arr in work[t]:
                pending.append(tbl.insert_async(arr))
                if len(pending) >= a.inflight:
                    inserted[t] += int((pending.pop(0).result() == floe.INSERTED).sum())
            for f in pending:
                inserted[t] += int((f.result() == floe.INSERTED).sum())

    threads = [threading.Thread(target=run, args=(t,)) for t in range(a.threads)]
    for th in threads:
        th.start()
    start.wait()
    t0 = time.perf_counter()
    for th in threads:
        th.join()
    secs = time.perf_counter() - t0
    total = a.threads * a.rounds * a.keys
    want = a.threads * a.rounds * (a.keys // 2)
    with floe.connect(a.uri) as c:
        held = c.stats("py-e1")["keys"]
        c.drop("py-e1")
    ok = sum(inserted) == want == held
    print("python E1: %d threads, %d arrays of %d keys each: %.1f M keys/s (%.2f s); inserted %d of %d new%s"
          % (a.threads, a.rounds, a.keys, total / secs / 1e6, secs, sum(inserted), want, "" if ok else " WRONG"))
    return 0 if ok else 1


raise SystemExit(main())
