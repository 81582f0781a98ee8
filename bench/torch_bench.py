#!/usr/bin/env python3
"""torch_bench.py: the workloads of bench/bench_models.c in PyTorch, for bench/compare.py.

    torch_bench.py WORKLOAD THREADS [STEPS [fp32|bf16]]
                                               one line: torch workload=... ms=... rss_mb=...
(gpt2-124m and gpt2-124m-256 take the model of torch_gpt.py, next to this file)
    torch_bench.py --info                      PyTorch's version, threads and BLAS

Each workload is built as bench_models.c builds it (same sizes, same padding pattern, the same
kind of initialisation), runs two warm-up steps and then STEPS timed steps; ms is the median
step in wall-clock milliseconds. rss_mb is how much the process's peak resident memory grew
from just before the first step to the end: PyTorch's own memory for the step (activations,
gradients, optimizer state), roughly what attograd's peak_mb counts. bf16 runs each forward and
its loss under torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch's mixed precision: matrix
products in bf16, softmax, norms and the loss in fp32, the parameters and the optimizer fp32),
the counterpart of bench_models' bf16; the backward and the optimizer's step run outside it,
as PyTorch's documentation asks.
The fair configuration (compare.py sets it): OMP_NUM_THREADS=THREADS, torch.set_num_threads,
and OpenBLAS's OpenMP build with its AVX-512 kernel (OPENBLAS_CORETYPE=SkylakeX,
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp) where those exist.
Not here: the comparison and the medians over runs (compare.py)."""
import contextlib
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 0
AMP = contextlib.nullcontext  # main: torch.autocast to bf16 for a bf16 run


def sinusoidal(max_len, d):
    """pe[pos, 2i] = sin(pos / 10000^(2i/d)), pe[pos, 2i+1] = cos(...), as nn_positional_init"""
    pe = torch.zeros(max_len, d)
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe[:, 0::2] = torch.sin(pos / div).float()
    pe[:, 1::2] = torch.cos(pos / div).float()
    return pe


def tokens(g, B, T, V, padded):
    """ids in [1, V) with row b of length T - b % 9 (the rest PAD) when padded"""
    ids = torch.randint(1, V, (B, T), generator=g)
    if padded:
        for b in range(B):
            ids[b, T - b % 9:] = PAD
    return ids


class Seq2Seq(nn.Module):
    """embeddings * sqrt(d) + sinusoidal positions, nn.Transformer (post-LN, final norms),
    a generator Linear: attograd's nn_seq2seq"""

    def __init__(self, V, d, nh, layers, ff, max_len):
        super().__init__()
        self.d = d
        self.src_embed = nn.Embedding(V, d, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(V, d, padding_idx=PAD)
        self.register_buffer("pe", sinusoidal(max_len, d))
        self.transformer = nn.Transformer(d, nh, layers, layers, ff, dropout=0.0, batch_first=True)
        self.generator = nn.Linear(d, V)

    def loss(self, src, tgt_in, tgt_out):
        S, T = src.shape[1], tgt_in.shape[1]
        x = self.src_embed(src) * math.sqrt(self.d) + self.pe[:S]
        y = self.tgt_embed(tgt_in) * math.sqrt(self.d) + self.pe[:T]
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        src_pad, tgt_pad = src == PAD, tgt_in == PAD
        h = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_pad,
                             tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        logits = self.generator(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                               ignore_index=PAD)


class Gpt(nn.Module):
    """decoder-only: token embeddings + sinusoidal positions, pre-LN causal self-attention
    layers with GELU, a final LayerNorm and an output Linear (bench_models.c's gpt-tiny)"""

    def __init__(self, V, d, nh, layers, ff, max_len):
        super().__init__()
        self.embed = nn.Embedding(V, d)
        self.register_buffer("pe", sinusoidal(max_len, d))
        layer = nn.TransformerEncoderLayer(d, nh, ff, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, V)

    def loss(self, ids, targets):
        T = ids.shape[1]
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        h = self.layers(self.embed(ids) + self.pe[:T], mask=causal)
        logits = self.head(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def workload(name):
    """a function running one step of the named workload"""
    g = torch.Generator().manual_seed(1)
    if name == "gemm":
        a, b = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)

        def gemm_step():
            with AMP():
                return torch.mm(a, b)
        return gemm_step
    if name == "mha":
        m = nn.MultiheadAttention(256, 8, dropout=0.0, batch_first=True)
        x = torch.randn(32, 64, 256, generator=g, requires_grad=True)
        r = torch.randn(32, 64, 256, generator=g)

        def mha_step():
            m.zero_grad(set_to_none=False)
            x.grad = None
            with AMP():
                loss = (m(x, x, x, need_weights=False)[0] * r).sum()
            loss.backward()
        return mha_step
    if name in ("seq2seq-small", "seq2seq-small-dense", "seq2seq-base"):
        # seq2seq-small-dense is attograd's dense reference path; PyTorch's step is the same
        small = name.startswith("seq2seq-small")
        V, d, nh, layers, ff, B, T = ((64, 128, 4, 2, 512, 64, 20) if small else
                                     (1000, 512, 8, 6, 2048, 16, 32))
        m = Seq2Seq(V, d, nh, layers, ff, 128)
        opt = torch.optim.Adam(m.parameters(), lr=1e-4)
        src, tgt_in = tokens(g, B, T, V, True), tokens(g, B, T, V, True)
        tgt_out = torch.randint(1, V, (B, T), generator=g).masked_fill(tgt_in == PAD, PAD)

        def s2s_step():
            opt.zero_grad(set_to_none=False)
            with AMP():
                loss = m.loss(src, tgt_in, tgt_out)
            loss.backward()
            opt.step()
        return s2s_step
    if name == "gpt-tiny":
        V, d, nh, layers, ff, B, T = 512, 128, 4, 2, 512, 8, 64
        m = Gpt(V, d, nh, layers, ff, 128)
        opt = torch.optim.Adam(m.parameters(), lr=1e-4)
        ids, targets = tokens(g, B, T, V, False), tokens(g, B, T, V, False)

        def gpt_step():
            opt.zero_grad(set_to_none=False)
            with AMP():
                loss = m.loss(ids, targets)
            loss.backward()
            opt.step()
        return gpt_step
    if name in ("gpt2-124m", "gpt2-124m-256"):
        # GPT-2 small as nanoGPT writes it (torch_gpt.py's model), random weights, AdamW at its
        # best: fused where this PyTorch has it; BENCH_TORCH_COMPILE=1 adds torch.compile
        from torch_gpt import GPT
        B, T = (4, 64) if name == "gpt2-124m" else (8, 256)
        m = GPT(50257, 1024, 12, 12, 768)
        try:
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
        except (RuntimeError, TypeError):
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        fwd = torch.compile(m) if os.environ.get("BENCH_TORCH_COMPILE") == "1" else m
        ids, targets = tokens(g, B, T, 50257, False), tokens(g, B, T, 50257, False)
        def gpt2_step():
            opt.zero_grad(set_to_none=False)
            with AMP():
                loss = fwd(ids, targets)
            loss.backward()
            opt.step()
        return gpt2_step
    sys.exit(f"torch_bench.py: unknown workload '{name}'")


def info():
    blas = "generic BLAS (libblas.so.3)"
    cfg = torch.__config__.show()
    if "BLAS_INFO=mkl" in cfg:
        blas = "MKL"
    return (f"torch version={torch.__version__} num_threads={torch.get_num_threads()} "
            f"parallel={torch.__config__.parallel_info().splitlines()[-1].strip()} blas={blas}")


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--info":
        print(info())
        return
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    name, threads = sys.argv[1], int(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    precision = sys.argv[4] if len(sys.argv) > 4 else "fp32"
    if precision not in ("fp32", "bf16"):
        sys.exit(f"torch_bench.py: precision '{precision}' is not fp32 or bf16")
    if precision == "bf16":
        global AMP
        AMP = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    step = workload(name)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for i in range(steps + 2):
        t0 = time.perf_counter()
        step()
        if i >= 2:
            times.append((time.perf_counter() - t0) * 1e3)
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    print(f"torch workload={name} threads={torch.get_num_threads()} "
          f"ms={statistics.median(times):.3f} rss_mb={rss:.1f} precision={precision}")


if __name__ == "__main__":
    main()
