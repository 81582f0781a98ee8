#!/usr/bin/env python3
"""compare.py: attograd (bench_models) against PyTorch (torch_bench.py) on the same workloads,
1 and 2 threads, in alternating runs; one line per workload and thread count:

    bench <name> threads=<n> attograd_ms=<x> torch_ms=<y> speedup=<y/x> gflops=<g>
        pct_peak=<pp> mem_mib=<m> pct_bw=<pb> bound_ms=<b> over_bound=<x/b> torch_gflops=<tg>
        tokens_per_s=<k> torch_tokens_per_s=<tk> live_rows=<l> peak_mib=<p> state_mib=<s>
        torch_rss_mib=<r> cpu_ms=<c>

and, after the thread counts of a workload, how much the second thread speeds each up:

    bench <name> scaling threads=1->2 attograd=<ms1/ms2> torch=<ms1/ms2>

The torch fields are left out when no python3 with torch is found (TORCH_PYTHON names one).
Where two are found (python3 or /usr/bin/python3, and TORCH_PYTHON with another version of
torch, e.g. PyTorch 2 in a venv) the second one's fields follow as torch2_ms, speedup2,
torch2_gflops, torch2_rss_mib, torch2=. Last, unless --no-contention, the contention line:
seq2seq-small on 1 and 2 threads, alternating, while one CPU-bound process competes:

    bench contention seq2seq-small busy_processes=1 threads=1 ms=<a> threads=2 ms=<b>
        ratio_2_to_1=<b/a> quiet_ratio_2_to_1=<the same from the quiet seq2seq-small lines>

Times are medians over ROUNDS runs of each program, the programs alternating (the order
reversed every other round) so that all see the same load; each run reports the median
of its own STEPS steps after two warm-up steps. speedup > 1 means attograd is faster.
gflops counts the products' flops (bench_models.c) per second of each program, the work each
really does: attograd's over the rows it computes (live_rows is their share: seq2seq-small and
-base skip padding), PyTorch's over every row (dense_gflop); pct_peak is
attograd's gflops against the FMA peak bench_gemm measures (per thread, times the threads; left
out when bench_gemm is not next to bench_models). The roofline: mem_mib is the memory traffic a
perfect step cannot avoid (bench_models.c: the optimizer's pass over its state, the step
arena's peak written and read once), pct_bw that traffic's rate against the bandwidth
bench_gemm --bandwidth measures at that thread count, bound_ms the step of a perfect
implementation (the products at the FMA peak, then the traffic at that bandwidth) and
over_bound attograd's step over it (1.00: at the bound). With --precision bf16 attograd's
products are bf16 (bench_models' PRECISION) and the peak is vdpbf16ps's (none, and no roofline,
on a build without AVX512_BF16); PyTorch then runs each forward and loss under
torch.autocast to bf16, its mixed precision (--torch-precision fp32: in fp32 instead). tokens_per_s is attograd's, torch_tokens_per_s PyTorch's. peak_mib is attograd's step arena peak, state_mib its parameters, gradients and
Adam moments; torch_rss_mib is how much PyTorch's peak resident memory grew during its steps
(its step memory plus gradients and Adam state). cpu_ms is attograd's CPU time of all threads.

    compare.py [--bin build/bench/bench_models] [--rounds 5] [--steps N] [--threads 1,2]
               [--no-torch] [--no-contention] [--gpt-bin build/examples/attograd-gpt]
               [--gpt-data build/gpt/data] [--gpt-steps 100] [--gpt-full]
               [--precision fp32|bf16] [--torch-precision fp32|bf16 (default: --precision)]
               [--hf-layers 12] [--hf-new-tokens 64]
               [--hf-dir DIR] [workload ...]
               (default: gemm mha seq2seq-small seq2seq-small-dense seq2seq-base gpt-tiny
               gpt2-124m gpt2-124m-256)

The workload gpt-char (not in the default list) is the program attograd-gpt train against
torch_gpt.py on the shards in --gpt-data, in tokens/s (gpt_char.py says how); --gpt-full also
trains both for 2000 steps and prints their valid losses side by side (--gpt-steps 0: only that).
The workload gpt2-hf (not in the default list either; make bench-hf) is a GPT-2 small-shaped
Hugging Face folder in attograd (bench_hf) against transformers (hf_bench.py): load time, peak
memory, a forward, greedy generation (gpt2_hf.py says how; --hf-layers, --hf-new-tokens,
--hf-dir).

STEPS defaults to 7, and to 3 for seq2seq-base, gpt2-124m and gpt2-124m-256 (a PyTorch step
takes seconds there).

Both run in the fair configuration: OMP_NUM_THREADS=n for each, and PyTorch on OpenBLAS's
OpenMP build with its AVX-512 kernel (OPENBLAS_CORETYPE=SkylakeX on AVX-512 machines,
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp) where those exist. When attograd is
the AVX2 build on an AVX-512 machine (make ARCH=x86-64-v3 bench), PyTorch is held to AVX2 as well
(ATEN_CPU_CAPABILITY=avx2, OPENBLAS_CORETYPE=Haswell, MKL_ENABLE_INSTRUCTIONS=AVX2): the stand-in
for an AVX2 CPU.
Not here: the workloads (bench_models.c, torch_bench.py). See bench/README.md."""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ["gemm", "mha", "seq2seq-small", "seq2seq-small-dense", "seq2seq-base", "gpt-tiny",
             "gpt2-124m", "gpt2-124m-256"]
DEFAULT_STEPS = {"seq2seq-base": 3, "gpt2-124m": 3, "gpt2-124m-256": 3}
CONTENTION_WORKLOAD = "seq2seq-small"
OPENBLAS_OMP = "/usr/lib/x86_64-linux-gnu/openblas-openmp"


def fields(line):
    """'attograd workload=x ms=1.5' -> {'workload': 'x', 'ms': '1.5'}"""
    return dict(tok.split("=", 1) for tok in line.split() if "=" in tok)


def has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


# The kernel family attograd was built for ("AVX2 kernels" in its --info line). When it is AVX2 on a
# machine with AVX-512 (ARCH=x86-64-v3 as a stand-in for an AVX2 CPU), PyTorch is held to AVX2 too:
# ATen's AVX2 kernels and OpenBLAS's Haswell kernel, so that both sides use the same instructions.
# main() puts the family in the environment (BENCH_KERNELS), where gpt_char.py, which imports this
# file as a module of its own, finds it too.


def torch_env(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if os.environ.get("BENCH_KERNELS") == "AVX2" and has_avx512():
        env["OPENBLAS_CORETYPE"] = "Haswell"
        env["ATEN_CPU_CAPABILITY"] = "avx2"
        env["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"  # PyPI's PyTorch 2 multiplies with MKL
    elif has_avx512():
        env["OPENBLAS_CORETYPE"] = "SkylakeX"
    if os.path.isdir(OPENBLAS_OMP):
        env["LD_LIBRARY_PATH"] = OPENBLAS_OMP + (
            ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def imports(py, module="torch"):
    """whether python py imports module (in PyTorch's environment)"""
    try:
        r = subprocess.run([py, "-c", f"import {module}"], capture_output=True, timeout=300,
                           env=torch_env(1))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def find_torch_pythons():
    """[(tag, python)]: "torch", the first of python3 and /usr/bin/python3 that imports torch
    (Debian's python3-torch), then "torch2", TORCH_PYTHON when it imports a torch of another
    version (a venv with PyTorch 2); TORCH_PYTHON alone is "torch" """
    found, versions = [], set()
    for py in ["python3", "/usr/bin/python3", os.environ.get("TORCH_PYTHON")]:
        if not py or not imports(py):
            continue
        v = subprocess.run([py, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, env=torch_env(1)).stdout.strip()
        if v in versions:
            continue
        versions.add(v)
        found.append(py)
    return [("torch" if i == 0 else "torch2", py) for i, py in enumerate(found[:2])]


def bench_gemm_line(bench_bin, flag):
    """the fields of bench_gemm FLAG's first line (bench_gemm next to bench_models), or {}"""
    gemm = os.path.join(os.path.dirname(os.path.abspath(bench_bin)), "bench_gemm")
    if not os.access(gemm, os.X_OK):
        return {}
    r = subprocess.run([gemm, flag], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    return fields(r.stdout.strip().splitlines()[0]) if r.returncode == 0 and r.stdout else {}


def measure_peak(bench_bin, precision="fp32"):
    """bench_gemm's FMA peak per thread in GFLOP/s (bench_gemm --peak), vdpbf16ps's for bf16
    (None where the build has no AVX512_BF16: the emulation has no peak of its own), or None"""
    key = "peak_bf16_gflops_per_thread" if precision == "bf16" else "peak_gflops_per_thread"
    f = bench_gemm_line(bench_bin, "--peak")
    return float(f[key]) if key in f else None


def measure_bandwidth(bench_bin):
    """bench_gemm --bandwidth: {threads: GB/s} for 1 and 2 threads, or {}"""
    f = bench_gemm_line(bench_bin, "--bandwidth")
    return {int(k[4:]): float(v) for k, v in f.items() if k.startswith("gbs_")}


def roofline(gflop, mem_mib, threads, peak, gbs):
    """the step time (ms) of a perfect implementation: its products at the FMA peak, then its
    unavoidable memory traffic (bench_models' mem_mib) at the measured bandwidth"""
    return gflop / (peak * threads) * 1e3 + mem_mib * 1048576 / (gbs * 1e9) * 1e3


def run(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return fields(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bench/bench_models")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--contention", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--torch", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--gpt-bin", default="build/examples/attograd-gpt")
    ap.add_argument("--gpt-data", default="build/gpt/data")
    ap.add_argument("--gpt-steps", type=int, default=100)
    ap.add_argument("--gpt-full", action="store_true")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--torch-precision", choices=["fp32", "bf16"], default=None)
    ap.add_argument("--hf-layers", type=int, default=12)
    ap.add_argument("--hf-new-tokens", type=int, default=64)
    ap.add_argument("--hf-dir", default=None)
    ap.add_argument("workloads", nargs="*", default=WORKLOADS)
    a = ap.parse_args()
    a.torch_precision = a.torch_precision or a.precision
    info = subprocess.run([a.bin, "--info"], capture_output=True, text=True).stdout.strip()
    if info:
        print(f"# {info}")
        os.environ["BENCH_KERNELS"] = "AVX2" if "AVX2 kernels" in info else ""
    torches = find_torch_pythons() if a.torch else []
    for tag, py in torches:
        info = subprocess.run([py, os.path.join(HERE, "torch_bench.py"), "--info"],
                              capture_output=True, text=True, env=torch_env(1)).stdout.strip()
        print(f"# {tag}: {info} (python: {py})")
    if torches:
        env = torch_env(1)
        print(f"# torch env: OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', '')} "
              + (f"ATEN_CPU_CAPABILITY={env['ATEN_CPU_CAPABILITY']} "
                 if "ATEN_CPU_CAPABILITY" in env else "")
              + f"LD_LIBRARY_PATH={env.get('LD_LIBRARY_PATH', '')}")
    elif a.torch:
        print("# PyTorch not found (set TORCH_PYTHON): attograd only")
    print(f"# {a.rounds} alternating runs of each, each the median of "
          f"{a.steps or 'its'} steps; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    # the roofline's figures, for the workloads of bench_models only
    no_roofline = all(w in ("gpt-char", "gpt2-hf") for w in a.workloads)
    peak = None if no_roofline else measure_peak(a.bin, a.precision)
    if peak:
        print(f"# {'bf16 (vdpbf16ps)' if a.precision == 'bf16' else 'FMA'} peak {peak:.1f} "
              "GFLOP/s per thread (bench_gemm --peak)")
    gbs = {} if no_roofline else measure_bandwidth(a.bin)
    if gbs:
        print("# memory bandwidth " + " ".join(f"{v:.1f} GB/s at {t} thread{'s' * (t > 1)}"
                                               for t, v in sorted(gbs.items()))
              + " (bench_gemm --bandwidth)")
    if a.precision != "fp32" or (torches and a.torch_precision != "fp32"):
        theirs = "autocast to bf16" if a.torch_precision == "bf16" else "fp32"
        print(f"# attograd's products in {a.precision}" + (f" (PyTorch's: {theirs})" if torches else ""))
    sys.stdout.flush()
    quiet = {}
    med = lambda rows, key: statistics.median(float(x[key]) for x in rows)
    for name in a.workloads:
        if name == "gpt-char":  # attograd-gpt train against torch_gpt.py (gpt_char.py)
            import gpt_char
            if a.gpt_steps > 0:
                gpt_char.bench(a, torches)
            if a.gpt_full:
                gpt_char.full(a, torches)
            continue
        if name == "gpt2-hf":  # bench_hf against hf_bench.py (gpt2_hf.py)
            import gpt2_hf
            gpt2_hf.bench(a, torches)
            continue
        times = {}
        for threads in [int(t) for t in a.threads.split(",")]:
            steps = a.steps or DEFAULT_STEPS.get(name, 7)
            cmds = [([a.bin, name, str(threads), str(steps), a.precision],
                     dict(os.environ, OMP_NUM_THREADS=str(threads)))]
            cmds += [([py, os.path.join(HERE, "torch_bench.py"), name, str(threads), str(steps),
                       a.torch_precision],
                      torch_env(threads)) for _, py in torches]
            rows = alternate(cmds, a.rounds)
            ours = rows[0]
            ag_ms, gflop = med(ours, "ms"), float(ours[0]["gflop"])
            # PyTorch computes every row: its flops are the dense count
            dense_gflop = float(ours[0].get("dense_gflop", gflop))
            tokens = float(ours[0]["tokens"])
            th_ms = [med(theirs, "ms") for theirs in rows[1:]]
            out = f"bench {name} threads={threads}"
            if int(ours[0]["threads"]) != threads:  # a build without OpenMP runs one thread
                out += f" attograd_threads={ours[0]['threads']}"
            out += f" attograd_ms={ag_ms:.2f}"
            for (tag, _), ms in zip(torches, th_ms):
                out += f" {tag}_ms={ms:.2f} speedup{tag[5:]}={ms / ag_ms:.2f}"
            out += f" gflops={gflop / ag_ms * 1e3:.1f}"
            if peak:
                out += f" pct_peak={100 * gflop / ag_ms * 1e3 / (peak * threads):.0f}"
            if peak and threads in gbs and "mem_mib" in ours[0]:
                mem = float(ours[0]["mem_mib"])
                bound = roofline(gflop, mem, threads, peak, gbs[threads])
                out += (f" mem_mib={mem:.0f} pct_bw={100 * mem * 1048576 / (ag_ms * 1e6) / gbs[threads]:.0f}"
                        f" bound_ms={bound:.2f} over_bound={ag_ms / bound:.2f}")
            for (tag, _), ms in zip(torches, th_ms):
                out += f" {tag}_gflops={dense_gflop / ms * 1e3:.1f}"
            if tokens > 0:
                out += f" tokens_per_s={tokens / ag_ms * 1e3:.0f}"
                for (tag, _), ms in zip(torches, th_ms):
                    out += f" {tag}_tokens_per_s={tokens / ms * 1e3:.0f}"
            if "live_rows" in ours[0]:
                out += f" live_rows={ours[0]['live_rows']}"
            out += f" peak_mib={ours[0]['peak_mib']} state_mib={ours[0]['state_mib']}"
            for (tag, _), theirs in zip(torches, rows[1:]):
                out += f" {tag}_rss_mib={med(theirs, 'rss_mb'):.1f}"
            out += f" cpu_ms={med(ours, 'cpu_ms'):.2f}"
            print(out)
            sys.stdout.flush()
            times[threads] = [ag_ms] + th_ms
        if 1 in times and 2 in times:
            out = f"bench {name} scaling threads=1->2 attograd={times[1][0] / times[2][0]:.2f}"
            for i, (tag, _) in enumerate(torches):
                out += f" {tag}={times[1][i + 1] / times[2][i + 1]:.2f}"
            print(out)
            sys.stdout.flush()
            quiet[name] = times[2][0] / times[1][0]
    if a.contention:
        contention(a, quiet.get(CONTENTION_WORKLOAD))


def alternate(cmds, rounds):
    """each command run rounds times, in turn, the order reversed every other round; the
    fields of each run's last line, per command"""
    rows = [[] for _ in cmds]
    for r in range(rounds):
        order = list(range(len(cmds)))
        if r % 2:
            order.reverse()
        for i in order:  # a command line and its environment, or a function
            rows[i].append(cmds[i]() if callable(cmds[i]) else run(*cmds[i]))
    return rows


def contention(a, quiet_ratio):
    """seq2seq-small on 1 and 2 threads, alternating, while one CPU-bound process (a shell
    loop) competes for the cores: how much longer 2 threads take than 1"""
    steps = str(a.steps or DEFAULT_STEPS.get(CONTENTION_WORKLOAD, 7))
    cmds = [([a.bin, CONTENTION_WORKLOAD, str(n), steps], dict(os.environ, OMP_NUM_THREADS=str(n)))
            for n in (1, 2)]
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        rows = alternate(cmds, a.rounds)
    finally:
        busy.kill()
        busy.wait()
    one, two = (statistics.median(float(x["ms"]) for x in r) for r in rows)
    out = (f"bench contention {CONTENTION_WORKLOAD} busy_processes=1 threads=1 ms={one:.2f} "
           f"threads=2 ms={two:.2f} ratio_2_to_1={two / one:.2f}")
    if quiet_ratio:
        out += f" quiet_ratio_2_to_1={quiet_ratio:.2f}"
    print(out)
    sys.stdout.flush()

if __name__ == "__main__":
    main()
