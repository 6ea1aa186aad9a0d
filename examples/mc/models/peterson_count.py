#!/usr/bin/env python3
"""The reachable states of Peterson's filter lock for N processes, by a
breadth-first search of its own (not floe-mc's code), and whether mutual
exclusion holds in all of them: the expected counts of peterson.c.

    python3 examples/mc/models/peterson_count.py 2 3 4
"""
import sys
from collections import deque


def successors(state, n):
    pcs, levels, victims = state
    for i in range(n):
        pc, lvl = pcs[i], levels[i]
        if pc == "idle":
            yield (pcs[:i] + ("level",) + pcs[i + 1:], levels[:i] + (1,) + levels[i + 1:], victims)
        elif pc == "level":
            v = dict(victims)
            v[lvl] = i
            yield (pcs[:i] + ("wait",) + pcs[i + 1:], levels, tuple(sorted(v.items())))
        elif pc == "wait":
            v = dict(victims)
            blocked = v[lvl] == i and any(levels[k] >= lvl for k in range(n) if k != i)
            if blocked:
                continue
            if lvl == n - 1:
                yield (pcs[:i] + ("crit",) + pcs[i + 1:], levels, victims)
            else:
                yield (pcs[:i] + ("level",) + pcs[i + 1:], levels[:i] + (lvl + 1,) + levels[i + 1:], victims)
        else:  # crit: leave
            yield (pcs[:i] + ("idle",) + pcs[i + 1:], levels[:i] + (0,) + levels[i + 1:], victims)


def count(n):
    start = (("idle",) * n, (0,) * n, tuple((level, 0) for level in range(1, n)))
    seen = {start}
    queue = deque([start])
    exclusive = True
    while queue:
        s = queue.popleft()
        if sum(pc == "crit" for pc in s[0]) > 1:
            exclusive = False
        for t in successors(s, n):
            if t not in seen:
                seen.add(t)
                queue.append(t)
    return len(seen), exclusive


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["2", "3", "4"]:
        n = int(arg)
        states, exclusive = count(n)
        print(f"peterson:{n} {states} states, mutual exclusion {'holds' if exclusive else 'VIOLATED'}")
