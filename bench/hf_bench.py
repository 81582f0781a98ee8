#!/usr/bin/env python3
"""hf_bench.py: a Hugging Face GPT-2 folder in transformers: load time, peak memory, a forward
and greedy generation; the transformers half of compare.py's gpt2-hf workload (bench/gpt2_hf.py),
measured as bench_hf.c measures attograd on the same folder.

    hf_bench.py DIR THREADS [NEW_TOKENS]
    -> hf threads=<n> load_ms=<l> rss0_mib=<r0> load_rss_mib=<lr> rss_mib=<r> forward_ms=<f>
       forward_tok_s=<ft> new_tokens=<k> gen_ms=<g> gen_tok_s=<gt> step_ms=<s> ids=<a,b,...>
    hf_bench.py --info     the versions of torch and transformers, the attention implementation

In one fresh process, after importing torch and transformers (not timed): load_ms is the wall
time of AutoModelForCausalLM.from_pretrained(DIR) (dtype "auto": the file's, F32 from a float
build) and .eval(); rss0_mib is the process's peak resident memory before it (the interpreter,
torch and transformers), load_rss_mib after it, rss_mib at the end (resource.getrusage's
ru_maxrss: the peak over the load, the forwards and the generation). forward_ms is the median
of 5 forwards of one row of 64 tokens under torch.no_grad() (use_cache=False; logits at every
position), after one more not timed. gen_ms is one model.generate of NEW_TOKENS (default 64)
new tokens after the same 64, do_sample=False (greedy) with its KV cache (transformers'
default), no end-of-text stop (eos_token_id None, min_new_tokens NEW_TOKENS), prompt included;
gen_tok_s = NEW_TOKENS / gen_ms; step_ms the median time of one step of it past the prompt (one
token through the model with the cache: between consecutive calls of a logits processor, which
generate calls once a token), as bench_hf.c's. Threads: torch.set_num_threads(THREADS)
(compare.py also sets OMP_NUM_THREADS). The prompt's token i is (1 + 7919 i) mod vocab_size, as
bench_hf.c's.
Not here: the comparison (gpt2_hf.py); the training workloads (torch_bench.py)."""
import resource
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, LogitsProcessorList

PROMPT, FORWARDS = 64, 5


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def info():
    return (f"torch {torch.__version__} transformers {transformers.__version__} "
            f"num_threads={torch.get_num_threads()}")


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--info":
        print(info())
        return
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    path, threads = sys.argv[1], int(sys.argv[2])
    new_tokens = int(sys.argv[3]) if len(sys.argv) == 4 else 64
    torch.set_num_threads(threads)
    rss0 = peak_rss_mib()
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(path, dtype="auto").eval()
    load_ms = (time.perf_counter() - t0) * 1e3
    load_rss = peak_rss_mib()
    V = model.config.vocab_size
    ids = torch.tensor([[(1 + 7919 * i) % V for i in range(PROMPT)]])
    times = []
    with torch.no_grad():
        for i in range(FORWARDS + 1):  # the first one warms up, not timed
            f0 = time.perf_counter()
            model(ids, use_cache=False)
            if i > 0:
                times.append((time.perf_counter() - f0) * 1e3)
        stamps = []

        def stamp(input_ids, scores):  # a logits processor: the time of each token's step
            stamps.append(time.perf_counter())
            return scores

        g0 = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             eos_token_id=None, pad_token_id=0,
                             logits_processor=LogitsProcessorList([stamp]))
        gen_ms = (time.perf_counter() - g0) * 1e3
    steps = [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]
    step_ms = statistics.median(steps) if steps else 0.0
    new = out[0, PROMPT:].tolist()
    if len(new) != new_tokens:
        sys.exit(f"hf_bench.py: generated {len(new)} of {new_tokens} tokens")
    fwd = statistics.median(times)
    print(f"hf threads={torch.get_num_threads()} load_ms={load_ms:.1f} rss0_mib={rss0:.1f} "
          f"load_rss_mib={load_rss:.1f} rss_mib={peak_rss_mib():.1f} forward_ms={fwd:.2f} "
          f"forward_tok_s={PROMPT / fwd * 1e3:.0f} new_tokens={new_tokens} gen_ms={gen_ms:.1f} "
          f"gen_tok_s={new_tokens / gen_ms * 1e3:.1f} step_ms={step_ms:.2f} "
          f"ids={','.join(map(str, new))}")


if __name__ == "__main__":
    main()
