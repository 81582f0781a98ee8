#!/usr/bin/env python3
"""alternate.py: two builds of bench_models run in turn on one workload, for a before/after
figure on a machine other jobs share. Runs A B A B ... (B A on odd rounds), ROUNDS pairs; each
run is `BIN WORKLOAD THREADS STEPS` and prints its median ms and cpu_ms; the ratios A/B are taken
pair by pair (so a change of load between pairs cancels) and their medians printed, with the
load average at the end. cpu_ms at 1 thread is the figure that survives a busy machine; 2-thread
wall times need a quiet one. Both binaries must print the same loss (checked).
Not here: the comparison with PyTorch (compare.py).

usage: bench/alternate.py A_BIN B_BIN WORKLOAD THREADS [STEPS 20] [ROUNDS 7]
"""
import re
import statistics
import subprocess
import sys


def run(binary, workload, threads, steps):
    out = subprocess.run([binary, workload, threads, steps], capture_output=True, text=True,
                         check=True).stdout
    ms = float(re.search(r" ms=([\d.]+)", out).group(1))
    cpu = float(re.search(r"cpu_ms=([\d.]+)", out).group(1))
    loss = re.search(r"loss=(\S+)", out).group(1)
    return ms, cpu, loss


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__.strip().splitlines()[-1])
    a, b, workload, threads = sys.argv[1:5]
    steps = sys.argv[5] if len(sys.argv) > 5 else "20"
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 7
    res = {"A": [], "B": []}
    for r in range(rounds):
        order = (("A", a), ("B", b)) if r % 2 == 0 else (("B", b), ("A", a))
        for name, binary in order:
            res[name].append(run(binary, workload, threads, steps))
    losses = {x[2] for x in res["A"] + res["B"]}
    if len(losses) != 1:
        sys.exit(f"the two builds print different losses: {sorted(losses)}")
    for name in ("A", "B"):
        v = res[name]
        print(f"{name} {workload} threads={threads} ms={statistics.median(x[0] for x in v):.3f} "
              f"cpu_ms={statistics.median(x[1] for x in v):.3f} loss={v[0][2]}")
    ms = statistics.median(x[0] / y[0] for x, y in zip(res["A"], res["B"]))
    cpu = statistics.median(x[1] / y[1] for x, y in zip(res["A"], res["B"]))
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"ratio A/B ms={ms:.3f} cpu_ms={cpu:.3f} (load average {load})")


if __name__ == "__main__":
    main()
