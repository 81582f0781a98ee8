#!/usr/bin/env python3
"""mpi_cost.py: the cost model of a data-parallel step (docs/mpi.md, "A cost model"), fitted to
bench/mpi_netns.sh sweep's reduction times, and its predictions for N machines.

The reduction as src/dist does it with one shard a machine: the tree over N shards, log2 N
levels, each a message of the whole gradient (M bytes) into the left node's owner, then the
root's broadcast (binomial: log2 N more levels). So
    reduce(N, M) = 2 log2(N) * (alpha + M / beta)
(alpha: the latency of a message, beta: the link's bandwidth), against the ring's
2 (N - 1) / N * M / beta + 2 (N - 1) * alpha for a reduce-scatter + all-gather (not built).
A step: step(N) = compute + reduce(N, M), without credit for the overlap with backward.

The fit, on the NP = 2 rows at one rate (the fastest of each size: on a shared machine the
least disturbed run): alpha from the reduction of one value, then 1/beta by least squares on
the larger sizes; the rows of 4 and 8 processes are then compared with the model's prediction
(measured / predicted).

usage: bench/mpi_cost.py SWEEP.csv [RATE 1gbit] [COMPUTE_GPT_MS 25] [COMPUTE_DEMO_MS 37]
  SWEEP.csv: bench/mpi_netns.sh sweep DATA 0 > SWEEP.csv; COMPUTE_*: one step's compute on
  one machine (CPU ms of the make gpt model's step, batch 12 x 64, and of the demo translator's,
  batch 64 pairs), measured separately.
"""
import csv
import math
import sys

SIZES = [1, 203936, 815745, 1040000]  # the sweep's columns (values of 4 bytes)
GPT_VALUES = 811521  # the make gpt model's parameters + the loss
DEMO_VALUES = 1040000  # the demo translator: 1.04M parameters (docs/translate.md)


def read(path):
    rows = {}
    with open(path) as f:
        lines = [l for l in f if not l.startswith("#")]
    for r in csv.DictReader(lines):
        if r.get("overlap") not in (None, ""):
            continue
        cols = ["reduce_1", "reduce_204k", "reduce_816k", "reduce_1040k"]
        rows[(int(r["np"]), r["rate"])] = [float(r[c].split("/")[1]) for c in cols]
    return rows


def fit(ms, n_levels):
    """alpha from the 1-value reduction (ms / n_levels), then 1/beta by least squares through
    that intercept on the larger sizes: ms / n_levels - alpha = bytes * inv_beta"""
    alpha = ms[0] / n_levels
    xs = [4.0 * n for n in SIZES[1:]]
    ys = [t / n_levels - alpha for t in ms[1:]]
    inv_beta = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    return alpha, inv_beta


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-4])
    rows = read(sys.argv[1])
    rate = sys.argv[2] if len(sys.argv) > 2 else "1gbit"
    t_gpt = float(sys.argv[3]) if len(sys.argv) > 3 else 25.0
    t_demo = float(sys.argv[4]) if len(sys.argv) > 4 else 37.0
    alpha, inv_beta = fit(rows[(2, rate)], 2)
    beta_gbit = 8e-6 / inv_beta  # bytes per ms -> Gbit/s
    print(f"fit on 2 processes at {rate}: alpha {alpha * 1e3:.1f} us, beta {beta_gbit:.3f} Gbit/s")
    print("\n| processes | size | measured (fastest) | model | measured / model |")
    print("| --- | --- | --- | --- | --- |")
    for n in (2, 4, 8):
        if (n, rate) not in rows:
            continue
        lv = 2 * math.log2(n)
        for s, t in zip(SIZES, rows[(n, rate)]):
            m = lv * (alpha + 4.0 * s * inv_beta)
            print(f"| {n} | {s} values | {t:.3f} ms | {m:.3f} ms | {t / m:.2f} |")
    goodput = beta_gbit / float(rate.replace("gbit", "")) if rate.endswith("gbit") else 1.0
    print(f"\npredictions: beta = {goodput:.3f} x the link's rate (TCP's goodput, from the fit);"
          f" alpha = the network's one-way latency + {alpha * 1e3:.0f} us")
    for lat in (0.1, 1.0):
        print(f"\nlatency {lat} ms: step ms (efficiency = compute / step), tree as built; "
              "ring volume in brackets")
        print("| machines | make gpt, 1 Gbit/s | make gpt, 10 Gbit/s | demo, 1 Gbit/s | "
              "demo, 10 Gbit/s |")
        print("| --- | --- | --- | --- | --- |")
        for n in (2, 8, 64):
            cells = []
            for values, tc in ((GPT_VALUES, t_gpt), (DEMO_VALUES, t_demo)):
                for gbit in (1, 10):
                    a = lat + alpha
                    tm = 4.0 * values * 8e-6 / (gbit * goodput)  # ms for M at that rate
                    tree = tc + 2 * math.log2(n) * (a + tm)
                    ring = tc + 2 * (n - 1) / n * tm + 2 * (n - 1) * a
                    cells.append(f"{tree:.0f} ms, {100 * tc / tree:.0f}% "
                                 f"({ring:.0f} ms, {100 * tc / ring:.0f}%)")
            print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
