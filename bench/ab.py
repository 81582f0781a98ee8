#!/usr/bin/env python3
"""ab.py: two whole commands timed in alternating runs, for a before/after figure on a machine
other jobs share. Runs A B, B A, A B, ... (N pairs); each run's wall time and CPU time (user +
system of the command and its children, from the kernel's rusage) are kept; prints the medians
of each, and the ratios A/B taken pair by pair (so a change of load between pairs cancels):
their median, min and max. A command is one string run by /bin/sh; its output goes to
/dev/null (redirect inside the string to keep it); a command that fails stops everything.
Not here: the bench_models workloads with their losses checked (alternate.py), PyTorch
(compare.py).

usage: bench/ab.py [-n PAIRS] 'COMMAND_A' 'COMMAND_B'
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def run(cmd):
    """(wall seconds, CPU seconds) of one run of cmd"""
    before = os.times()
    t0 = time.perf_counter()
    r = subprocess.run(["/bin/sh", "-c", cmd], stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = os.times()
    if r.returncode != 0:
        sys.exit(f"ab.py: {cmd!r} failed (exit {r.returncode})")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=7, help="pairs (7)")
    ap.add_argument("a")
    ap.add_argument("b")
    a = ap.parse_args()
    times = {"A": [], "B": []}
    for i in range(a.n):
        order = [("A", a.a), ("B", a.b)] if i % 2 == 0 else [("B", a.b), ("A", a.a)]
        for name, cmd in order:
            times[name].append(run(cmd))
    for name in "AB":
        w = [t[0] for t in times[name]]
        c = [t[1] for t in times[name]]
        print(f"{name}: wall median {statistics.median(w):.3f} s (min {min(w):.3f}, max "
              f"{max(w):.3f}); cpu median {statistics.median(c):.3f} s")
    for k, what in ((0, "wall"), (1, "cpu")):
        r = [ta[k] / tb[k] for ta, tb in zip(times["A"], times["B"]) if tb[k] > 0]
        if r:
            print(f"A/B {what}, pair by pair: median {statistics.median(r):.3f} (min "
                  f"{min(r):.3f}, max {max(r):.3f}) over {len(r)} pairs")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
