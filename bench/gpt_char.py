"""gpt_char.py: compare.py's gpt-char workload: `attograd-gpt train` against bench/torch_gpt.py
(PyTorch, nanoGPT's way) on Shakespeare at character level, with `make gpt`'s recipe (4 layers,
4 heads, n_embd 128, block 64, batch 12, dropout 0, AdamW lr 1e-3 cosine to 1e-4 over 2000
steps after 100 warmup steps, weight decay 0.1, clipping 1.0), both reading the shards
`attograd-gpt prepare` wrote and drawing the same windows (torch_gpt.py replays attograd's
generator). Two parts:

- bench(): tokens/s, alternating runs as the other workloads, at each thread count:

      bench gpt-char threads=<n> attograd_tok_s=<a> torch_tok_s=<t> speedup=<a/t>
          [torch2_tok_s=<t2> speedup2=<a/t2>] steps=<s> torch_rss_mib=<r>
      bench gpt-char scaling threads=1->2 attograd=<a2/a1> torch=<t2/t1>

  Each run trains SKIP + STEPS steps (and one more, which validates and is not timed); tok_s
  is 12 x 64 tokens a step over the wall-clock time of steps SKIP+1 .. SKIP+STEPS: attograd's
  from the tokens_per_s of its log.csv rows (one every 10 steps), PyTorch's from its own clock
  around the same steps. Start-up, data loading and the first SKIP steps are outside.
- full(): both trained for the whole 2000 steps at the same time (1 thread each: the losses,
  not the speed), the valid loss of each every 250 steps (the mean of the same 20 batches of
  valid.bin), then of the last weights over the whole of valid.bin (`attograd-gpt eval`):

      bench gpt-char valid step=<s> attograd=<l> torch=<l> [torch2=<l>] diff=<attograd - torch>
      bench gpt-char valid whole attograd=<l> torch=<l> [torch2=<l>] diff=<attograd - torch>

Not here: the model in PyTorch (torch_gpt.py), the alternation and the environment of each
PyTorch (compare.py). See bench/README.md."""
import csv
import os
import statistics
import subprocess
import sys
import tempfile

from compare import HERE, alternate, fields, torch_env

MODEL = ["--n-layer", "4", "--n-head", "4", "--n-embd", "128", "--block-size", "64",
         "--batch-size", "12"]
TRAIN = MODEL + ["--dropout", "0", "--lr", "1e-3", "--min-lr", "1e-4", "--warmup-iters", "100",
                 "--lr-decay-iters", "2000"]
TOKENS = 12 * 64  # a step
LOG = 10  # attograd's log.csv rows, the grain of SKIP and STEPS
SKIP = 10
FULL_STEPS, EVAL_INTERVAL, EVAL_ITERS = 2000, 250, 20


def check(r, cmd):
    if r.returncode != 0:
        sys.exit(f"gpt_char.py: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def train(a, threads, out, steps, eval_interval, eval_iters):
    cmd = [a.gpt_bin, "train", "--data", a.gpt_data, "--out", out, "--force", "--quiet",
           "--threads", str(threads), *TRAIN, "--max-iters", str(steps),
           "--eval-interval", str(eval_interval), "--eval-iters", str(eval_iters),
           "--log-interval", str(LOG)]
    check(subprocess.run(cmd, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads))), cmd)
    with open(os.path.join(out, "log.csv")) as f:
        return list(csv.DictReader(f))


def attograd_speed(a, threads, steps):
    """one run: {'tok_s': ...} over steps SKIP+1 .. SKIP+steps (log.csv rows of LOG steps)"""
    with tempfile.TemporaryDirectory() as out:
        rows = train(a, threads, out, SKIP + steps + 1, 1 << 30, 1)
    timed = [r for r in rows if SKIP < int(r["step"]) <= SKIP + steps]
    seconds = sum(LOG * TOKENS / float(r["tokens_per_s"]) for r in timed)
    return {"tok_s": len(timed) * LOG * TOKENS / seconds}


def torch_cmd(a, py, threads, *flags):
    return [py, os.path.join(HERE, "torch_gpt.py"), "--data", a.gpt_data, "--threads",
            str(threads), *MODEL, *flags]


def bench(a, torches):
    steps = max(LOG, a.gpt_steps // LOG * LOG)
    tok_s = {}
    for threads in [int(t) for t in a.threads.split(",")]:
        cmds = [lambda: attograd_speed(a, threads, steps)]
        cmds += [(torch_cmd(a, py, threads, "--max-iters", str(SKIP + steps), "--skip",
                            str(SKIP)), torch_env(threads)) for _, py in torches]
        rows = alternate(cmds, a.rounds)
        med = [statistics.median(float(x["tok_s"]) for x in r) for r in rows]
        out = f"bench gpt-char threads={threads} attograd_tok_s={med[0]:.0f}"
        for (tag, _), t in zip(torches, med[1:]):
            out += f" {tag}_tok_s={t:.0f} speedup{tag[5:]}={med[0] / t:.2f}"
        out += f" steps={steps}"
        for (tag, _), r in zip(torches, rows[1:]):
            out += f" {tag}_rss_mib={statistics.median(float(x['rss_mb']) for x in r):.1f}"
        print(out, flush=True)
        tok_s[threads] = med
    if 1 in tok_s and 2 in tok_s:
        out = f"bench gpt-char scaling threads=1->2 attograd={tok_s[2][0] / tok_s[1][0]:.2f}"
        for i, (tag, _) in enumerate(torches):
            out += f" {tag}={tok_s[2][i + 1] / tok_s[1][i + 1]:.2f}"
        print(out, flush=True)


def full(a, torches):
    print(f"# gpt-char full run: {FULL_STEPS} steps, the valid loss every {EVAL_INTERVAL} "
          f"({EVAL_ITERS} batches), all programs at once, 1 thread each", flush=True)
    procs = [subprocess.Popen(torch_cmd(a, py, 1, "--max-iters", str(FULL_STEPS),
                                        "--eval-interval", str(EVAL_INTERVAL), "--eval-iters",
                                        str(EVAL_ITERS), "--whole-valid"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=torch_env(1)) for _, py in torches]
    with tempfile.TemporaryDirectory() as out:
        rows = train(a, 1, out, FULL_STEPS, EVAL_INTERVAL, EVAL_ITERS)
        cmd = [a.gpt_bin, "eval", "--ckpt", os.path.join(out, "last.npz"), "--data",
               a.gpt_data, "--threads", "1"]
        said = check(subprocess.run(cmd, capture_output=True, text=True), cmd)
    # "... valid loss 1.8864 nats/token ..."
    whole = {"attograd": float(said.split("valid loss ")[1].split()[0])}
    valid = {"attograd": {int(r["step"]): float(r["valid_loss"]) for r in rows if r["valid_loss"]}}
    for (tag, _), p in zip(torches, procs):
        o, e = p.communicate()
        got = [fields(x) for x in check(subprocess.CompletedProcess(p.args, p.returncode, o, e),
                                        p.args).splitlines()]
        valid[tag] = {int(f["step"]): float(f["valid_loss"]) for f in got if "valid_loss" in f}
        whole[tag] = next(float(f["whole_valid_loss"]) for f in got if "whole_valid_loss" in f)
    for step in sorted(valid["attograd"]):
        print(line(f"step={step}", {k: v.get(step) for k, v in valid.items()}), flush=True)
    print(line("whole", whole), flush=True)


def line(what, losses):
    out = f"bench gpt-char valid {what}" + "".join(
        f" {k}={v:.4f}" for k, v in losses.items() if v is not None)
    if losses.get("torch") is not None:
        out += f" diff={losses['attograd'] - losses['torch']:+.4f}"
    return out
