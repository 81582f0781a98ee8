#!/usr/bin/env python3
"""alternate.py: two builds of bench_models run in turn on one workload, for a before/after
figure on a machine other jobs share. Runs A B A B ... (B A on odd rounds), ROUNDS pairs; each
run is `BIN WORKLOAD THREADS STEPS` and prints its median ms and cpu_ms; the ratios A/B are taken
pair by pair (so a change of load between pairs cancels) and their medians printed, with the
load average at the end. cpu_ms at 1 thread is the figure that survives a busy machine; 2-thread
wall times need a quiet one. Both binaries must print the same loss (checked), unless
LOSSES=differ is set in the environment: for a change that moves the last bits on purpose (a new
order of summation, a narrower type); both losses are then printed.

The workload gpt-char takes two attograd-gpt programs instead (GPT_DATA: the prepared
Shakespeare, default build/gpt/data): each run is `train` with make gpt's recipe (gpt_char.py's
flags) for 11 steps and for 11 + STEPS steps; ms is the wall time and cpu_ms the CPU time of
all threads per step between the two (start-up and the first steps cancel), and loss the last
train loss of the longer run (printed, not checked: a change may move the last bits).
PRECISION=bf16 in the environment runs both with `bf16` after STEPS (bench_models' PRECISION);
PRECISION_A and PRECISION_B set one side's (fp32 or bf16: A bf16 against B fp32 gives the
bf16/fp32 step ratio of one build).
Not here: the comparison with PyTorch (compare.py).

usage: bench/alternate.py A_BIN B_BIN WORKLOAD THREADS [STEPS 20] [ROUNDS 7]
"""
import csv
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from gpt_char import TRAIN


def gpt_train(binary, threads, steps):
    """wall and CPU seconds of one `attograd-gpt train` of `steps` steps; its last train loss"""
    data = os.environ.get("GPT_DATA", "build/gpt/data")
    with tempfile.TemporaryDirectory() as out:
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        subprocess.run([binary, "train", "--data", data, "--out", out, "--force", "--quiet",
                        "--threads", threads, *TRAIN, "--max-iters", str(steps),
                        "--eval-interval", str(1 << 30), "--eval-iters", "1"],
                       check=True, capture_output=True, env=dict(os.environ, OMP_NUM_THREADS=threads))
        t1, r1 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(os.path.join(out, "log.csv")) as f:
            loss = list(csv.DictReader(f))[-1]["train_loss"]
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return t1 - t0, cpu, loss


def run_gpt(binary, threads, steps):
    short, long_ = gpt_train(binary, threads, 11), gpt_train(binary, threads, 11 + int(steps))
    return (1e3 * (long_[0] - short[0]) / int(steps), 1e3 * (long_[1] - short[1]) / int(steps),
            long_[2])


def run(binary, workload, threads, steps, precision):
    if workload == "gpt-char":
        return run_gpt(binary, threads, steps)
    out = subprocess.run([binary, workload, threads, steps] + ([precision] if precision else []),
                         capture_output=True, text=True, check=True).stdout
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
    precision = {x: os.environ.get("PRECISION_" + x, os.environ.get("PRECISION")) for x in res}
    for r in range(rounds):
        order = (("A", a), ("B", b)) if r % 2 == 0 else (("B", b), ("A", a))
        for name, binary in order:
            res[name].append(run(binary, workload, threads, steps, precision[name]))
    losses = {x[2] for x in res["A"] + res["B"]}
    if len(losses) != 1 and workload != "gpt-char" and os.environ.get("LOSSES") != "differ":
        sys.exit(f"the two builds print different losses: {sorted(losses)}")
    for name in ("A", "B"):
        v = res[name]
        print(f"{name} {workload} threads={threads} ms={statistics.median(x[0] for x in v):.3f} "
              f"cpu_ms={statistics.median(x[1] for x in v):.3f} loss={v[0][2]}")
    if len(losses) != 1:
        print(f"losses differ: {sorted(losses)}")
    ms = statistics.median(x[0] / y[0] for x, y in zip(res["A"], res["B"]))
    cpu = statistics.median(x[1] / y[1] for x, y in zip(res["A"], res["B"]))
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"ratio A/B ms={ms:.3f} cpu_ms={cpu:.3f} (load average {load})")


if __name__ == "__main__":
    main()
