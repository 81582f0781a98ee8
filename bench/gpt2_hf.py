"""gpt2_hf.py: compare.py's gpt2-hf workload: a GPT-2 small-shaped Hugging Face folder (random
weights) in attograd (bench_hf, next to bench_models) against transformers (hf_bench.py): load
time, peak resident memory, a forward over 64 tokens, greedy generation with the KV cache.

The folder is written once by `bench_hf write` (hf_save of nn_gpt_init's random weights, GPT-2
small's shape with --hf-layers layers, default 12: 124M parameters, a 498 MB model.safetensors in
the float build) into build/bench/gpt2-hf-<layers> (next to bench_models; --hf-dir names
another). Then, at each thread count, ROUNDS alternating runs of `bench_hf run` and
`hf_bench.py`, each a fresh process (the order reversed every other round), and the medians:

    bench gpt2-hf threads=<n> layers=<L> new_tokens=<k> attograd_load_ms=<a> hf_load_ms=<h>
        load_speedup=<h/a> attograd_rss_mib=<a> hf_rss_mib=<h> rss_ratio=<h/a>
        attograd_model_rss_mib=<a> hf_model_rss_mib=<h> attograd_forward_ms=<a>
        hf_forward_ms=<h> forward_speedup=<h/a> attograd_gen_tok_s=<a> hf_gen_tok_s=<h>
        gen_speedup=<a/h> attograd_step_ms=<a> hf_step_ms=<h> step_speedup=<h/a> same_ids=<m>/<k>

step_ms is one decoding step past the prompt (gen_tok_s includes the prompt's forward);
speedups and rss_ratio > 1 mean attograd is faster or smaller (the issue's targets: gen_speedup
at least 2, rss_ratio at least 1). *_rss_mib is the process's peak resident memory over the
whole run (load, forwards, generation: what the machine must hold), *_model_rss_mib that peak
less the peak before the load (the interpreter, torch and transformers' imports are outside).
same_ids is how many of the k new tokens agree from the first on (greedy on the same weights:
all of them unless two logits tie to within float rounding). bench_hf.c and hf_bench.py say
what each field times. The transformers python is HF_PYTHON, else the first of compare.py's
PyTorch pythons (python3, TORCH_PYTHON) that imports transformers; none: attograd alone.
Not here: the programs (bench_hf.c, hf_bench.py). See bench/README.md."""
import os
import statistics
import subprocess
import sys

import compare
from compare import HERE, alternate, imports, torch_env

MEDIANS = ["load_ms", "rss_mib", "model_rss_mib", "forward_ms", "gen_tok_s", "step_ms"]


def hf_python(torches):
    for py in [os.environ.get("HF_PYTHON")] + [py for _, py in torches]:
        if py and imports(py, "transformers"):
            return py
    return None


def run(cmd, env):
    """one run's fields, with the peak resident memory beyond the start-up's"""
    f = compare.run(cmd, env)
    f["model_rss_mib"] = float(f["rss_mib"]) - float(f["rss0_mib"])
    return f


def leading_same(a, b):
    n = 0
    for x, y in zip(a.split(","), b.split(",")):
        if x != y:
            break
        n += 1
    return n


def bench(a, torches):
    bench_hf = os.path.join(os.path.dirname(os.path.abspath(a.bin)), "bench_hf")
    folder = a.hf_dir or os.path.join(os.path.dirname(os.path.abspath(a.bin)),
                                      f"gpt2-hf-{a.hf_layers}")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        print(f"# gpt2-hf: writing {folder} ({a.hf_layers} layers, random weights)", flush=True)
        cmd = [bench_hf, "write", folder, str(a.hf_layers)]
        if subprocess.run(cmd).returncode != 0:
            sys.exit(f"gpt2_hf.py: {' '.join(cmd)} failed")
    py = hf_python(torches)
    if py:
        info = subprocess.run([py, os.path.join(HERE, "hf_bench.py"), "--info"],
                              capture_output=True, text=True, env=torch_env(1)).stdout.strip()
        print(f"# gpt2-hf: {folder}; hf: {info} (python: {py})", flush=True)
    else:
        print(f"# gpt2-hf: {folder}; no python with transformers (set HF_PYTHON): attograd only",
              flush=True)
    k = str(a.hf_new_tokens)
    for threads in [int(t) for t in a.threads.split(",")]:
        cmds = [([bench_hf, "run", folder, str(threads), k],
                 dict(os.environ, OMP_NUM_THREADS=str(threads)))]
        if py:
            cmds.append(([py, os.path.join(HERE, "hf_bench.py"), folder, str(threads), k],
                         torch_env(threads)))
        rows = alternate([lambda c=c: run(*c) for c in cmds], a.rounds)
        med = [{key: statistics.median(float(x[key]) for x in r) for key in MEDIANS}
               for r in rows]
        ag = med[0]
        out = f"bench gpt2-hf threads={threads} layers={a.hf_layers} new_tokens={k}"
        if py:
            hf = med[1]
            out += (f" attograd_load_ms={ag['load_ms']:.1f} hf_load_ms={hf['load_ms']:.1f}"
                    f" load_speedup={hf['load_ms'] / ag['load_ms']:.2f}"
                    f" attograd_rss_mib={ag['rss_mib']:.1f} hf_rss_mib={hf['rss_mib']:.1f}"
                    f" rss_ratio={hf['rss_mib'] / ag['rss_mib']:.2f}"
                    f" attograd_model_rss_mib={ag['model_rss_mib']:.1f}"
                    f" hf_model_rss_mib={hf['model_rss_mib']:.1f}"
                    f" attograd_forward_ms={ag['forward_ms']:.2f}"
                    f" hf_forward_ms={hf['forward_ms']:.2f}"
                    f" forward_speedup={hf['forward_ms'] / ag['forward_ms']:.2f}"
                    f" attograd_gen_tok_s={ag['gen_tok_s']:.1f} hf_gen_tok_s={hf['gen_tok_s']:.1f}"
                    f" gen_speedup={ag['gen_tok_s'] / hf['gen_tok_s']:.2f}"
                    f" attograd_step_ms={ag['step_ms']:.2f} hf_step_ms={hf['step_ms']:.2f}"
                    f" step_speedup={hf['step_ms'] / ag['step_ms'] if ag['step_ms'] else 0:.2f}"
                    f" same_ids={leading_same(rows[0][0]['ids'], rows[1][0]['ids'])}/{k}")
        else:
            out += (f" attograd_load_ms={ag['load_ms']:.1f} attograd_rss_mib={ag['rss_mib']:.1f}"
                    f" attograd_model_rss_mib={ag['model_rss_mib']:.1f}"
                    f" attograd_forward_ms={ag['forward_ms']:.2f}"
                    f" attograd_gen_tok_s={ag['gen_tok_s']:.1f}"
                    f" attograd_step_ms={ag['step_ms']:.2f}")
        print(out, flush=True)
