#!/usr/bin/env python3
"""regions.py: a program's parallel regions, function by function: runs PROGRAM ARGS under
bench/regions.c (LD_PRELOAD of build/bench/regions.so, make build/bench/regions.so), names
each region's outlined function from the program's symbols (nm) and prints the functions by
the CPU time of their busiest thread, then the total:

    FUNCTION calls= cpu_ms= max_ms= serial_ms= wall_ms= late_ms=
    total calls= cpu_ms= max_ms= serial_ms= critical_ms= wall_ms=

critical_ms (serial + max) is the run's time if starting and joining threads cost nothing: CPU
time only, so it holds on a machine other jobs share; run the program on 1 and on N threads and
divide. GOMP_SPINCOUNT=0 keeps waiting out of cpu_ms. wall_ms and late_ms (how late the last
thread started) need a quiet machine. Example (bench/JOURNAL.md, "The step arena and two
threads"):

    GOMP_SPINCOUNT=0 python3 bench/regions.py -- build/bench/bench_models seq2seq-small 2 20

usage: bench/regions.py [--so PATH] [--top N] -- PROGRAM [ARGS...]
"""
import os
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"regions.py: {msg}", file=sys.stderr)
    sys.exit(2)


def symbols(program):
    """offset -> name of the program's functions (local ones too: the outlined regions)"""
    out = subprocess.run(["nm", program], capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"{program}: nm cannot read its symbols: {out.stderr.strip()}")
    names = {}
    for line in out.stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tT":
            names[int(p[0], 16)] = p[2]
    return names


def main():
    args = sys.argv[1:]
    so = os.path.join("build", "bench", "regions.so")
    top = 20
    while args and args[0] != "--":
        if args[0] == "--so" and len(args) > 1:
            so, args = args[1], args[2:]
        elif args[0] == "--top" and len(args) > 1 and args[1].isdigit():
            top, args = int(args[1]), args[2:]
        else:
            fail(f"unknown option '{args[0]}'\n" + __doc__.strip().splitlines()[-1])
    if len(args) < 2:
        fail("no program given\n" + __doc__.strip().splitlines()[-1])
    program, rest = args[1], args[2:]
    path = shutil.which(program) if os.sep not in program else program
    if not path or not os.access(path, os.X_OK):
        fail(f"{program}: not an executable program")
    if not os.path.isfile(so):
        fail(f"{so}: no such file (make build/bench/regions.so builds it)")
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "regions.txt")
        env = dict(os.environ, LD_PRELOAD=os.path.abspath(so), REGIONS_OUT=report)
        run = subprocess.run([path] + rest, env=env)
        if run.returncode != 0:
            fail(f"{program} exited with status {run.returncode}")
        if not os.path.isfile(report):
            fail(f"{program} wrote no report: is it an OpenMP program (GCC's libgomp)?")
        with open(report) as f:
            lines = f.read().splitlines()
    names = symbols(path)
    rows = []
    for line in lines:
        p = line.split()
        if not p or p[0] == "total":
            continue
        fields = dict(kv.split("=") for kv in p[1:])
        rows.append((names.get(int(p[0], 16), p[0]), fields))
    rows.sort(key=lambda r: -float(r[1]["max_ms"]))
    width = max([len(n) for n, _ in rows[:top]] + [5])
    for name, fields in rows[:top]:
        print(f"{name:<{width}} " + " ".join(f"{k}={v}" for k, v in fields.items()))
    for line in lines:
        if line.startswith("total"):
            print(line)


if __name__ == "__main__":
    main()
