#!/usr/bin/env python3
"""torch_gpt.py: `attograd-gpt train`'s recipe in PyTorch, written the way nanoGPT's model.py and
train.py write it, for bench/compare.py's gpt-char workload:

    torch_gpt.py --data DIR [--threads N] [--max-iters 2000] [--skip 10] [--eval-interval 0]
                 [--eval-iters 20] [--whole-valid] [--seed 1337] [model and optimizer flags]
    torch_gpt.py --info

The model: GPT-2 (token and learned position embeddings, pre-LN blocks of causal self-attention
and a GELU MLP, a final LayerNorm, lm_head tied to wte), nanoGPT's initialisation (normal(0,
0.02), the c_proj weights normal(0, 0.02 / sqrt(2 n_layer)), zero biases). AdamW (betas 0.9,
0.99) with nanoGPT's two groups (decay 0.1 on the tensors of two or more dimensions, none on
biases and LayerNorms), the gradient norm clipped to 1.0, and attograd's schedule (lr t / warmup
for steps t = 1..warmup, then the cosine down to min_lr at --lr-decay-iters; nanoGPT's warmup is
one step ahead of it).
The data: DIR/train.bin and DIR/valid.bin as `attograd-gpt prepare` writes them (llm.c shards:
256 int32 header, magic 20240520 with uint16 tokens or 20240801 with uint32), and the batches
attograd draws: the same xoshiro256** generator, seeded as train.c seeds its loaders
(rng_hash(seed, 2) for training, rng_hash(seed, 3) for validation, started again at every
validation), so both programs see the same windows in the same order. Only the initial weights
differ (torch.manual_seed(seed)). The vocabulary is the largest id + 1 (at character level
every id occurs in the text).

Output: `step=<s> valid_loss=<l>` every --eval-interval steps and at the last (when > 0), with
--whole-valid `whole_valid_loss=<l> tokens=<n>` (every token of valid.bin but the first predicted
once, in consecutive windows of block_size, as `attograd-gpt eval`), and last

    torch_gpt tok_s=<k> timed_steps=<n> rss_mb=<r>

tok_s: batch x block tokens per second of wall-clock time over the steps after the first --skip
(batch drawing, forward, backward, clipping and the update; validation excluded). rss_mb: how
much the peak resident memory grew from the first step to the end.
Not here: attograd's side and the comparison (compare.py, gpt_char.py). See bench/README.md."""
import argparse
import math
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

M64 = (1 << 64) - 1


# ---- attograd's generator (src/tensor/rng.c), so that the batches are the same ----

def splitmix64(x):
    """-> (the next state, the output)"""
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return x, z ^ (z >> 31)


def rng_hash(key, counter):
    return splitmix64((key ^ (counter * 0xD1B54A32D192ED03)) & M64)[1]


class Rng:
    """xoshiro256** seeded through splitmix64: rng_seed, rng_u64, rng_below"""

    def __init__(self, seed):
        self.s, x = [], seed
        for _ in range(4):
            x, z = splitmix64(x)
            self.s.append(z)

    def u64(self):
        s = self.s
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M64
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            x = self.u64()
            if x < limit:
                return x % n


def read_shard(path):
    """an llm.c shard -> its tokens as an int64 array"""
    header = np.fromfile(path, dtype="<i4", count=256)
    magic = {20240520: "<u2", 20240801: "<u4"}
    if len(header) != 256 or header[0] not in magic:
        sys.exit(f"torch_gpt.py: {path}: not an llm.c shard (magic {header[:1]})")
    tokens = np.fromfile(path, dtype=magic[header[0]], offset=256 * 4)
    if len(tokens) != header[2]:
        sys.exit(f"torch_gpt.py: {path}: {len(tokens)} tokens, the header says {header[2]}")
    return tokens.astype(np.int64)


class Loader:
    """B random windows of T + 1 tokens a batch, as txt_loader_next: starts in [0, n - T)"""

    def __init__(self, tokens, B, T, seed):
        self.tokens, self.B, self.T, self.rng = tokens, B, T, Rng(seed)

    def next(self):
        starts = [self.rng.below(len(self.tokens) - self.T) for _ in range(self.B)]
        w = torch.from_numpy(np.stack([self.tokens[s:s + self.T + 1] for s in starts]))
        return w[:, :-1], w[:, 1:]


# ---- the model, as nanoGPT's model.py ----

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets, reduction="mean"):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.size(1)))
        for block in t.h:
            x = block(x)
        logits = self.lm_head(t.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                               reduction=reduction)


# ---- training, as attograd-gpt train ----

def lr_at(a, t):
    """attograd's OPTIM_WARMUP_COSINE for step t = 1, 2, ..."""
    if t <= a.warmup_iters:
        return a.lr * t / a.warmup_iters
    if t >= a.lr_decay_iters:
        return a.min_lr
    progress = (t - a.warmup_iters) / (a.lr_decay_iters - a.warmup_iters)
    return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


@torch.no_grad()
def validate(a, model, valid):
    loader = Loader(valid, a.batch_size, a.block_size, rng_hash(a.seed, 3))
    return sum(model(*loader.next()).item() for _ in range(a.eval_iters)) / a.eval_iters


@torch.no_grad()
def whole_valid(a, model, valid, batch=64):
    """the mean loss over every token of valid but the first, in consecutive windows"""
    T, n, total = a.block_size, len(valid) - 1, 0.0
    x, y = torch.from_numpy(valid[:-1]), torch.from_numpy(valid[1:])
    full = n // T
    for b in range(0, full, batch):
        e = min(b + batch, full)
        total += model(x[b * T:e * T].view(-1, T), y[b * T:e * T].view(-1, T), "sum").item()
    if n % T:
        total += model(x[full * T:].view(1, -1), y[full * T:].view(1, -1), "sum").item()
    return total / n, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--info", action="store_true")
    ap.add_argument("--data")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-iters", type=int, default=2000)
    ap.add_argument("--skip", type=int, default=10, help="first steps left out of tok_s")
    ap.add_argument("--eval-interval", type=int, default=0, help="0: no validation")
    ap.add_argument("--eval-iters", type=int, default=20)
    ap.add_argument("--whole-valid", action="store_true")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=12)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup-iters", type=int, default=100)
    ap.add_argument("--lr-decay-iters", type=int, default=2000)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    a = ap.parse_args()
    if a.info:
        print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
        return
    if not a.data:
        sys.exit("torch_gpt.py: --data DIR is required")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train, valid = read_shard(f"{a.data}/train.bin"), read_shard(f"{a.data}/valid.bin")
    vocab = int(max(train.max(), valid.max())) + 1
    model = GPT(vocab, a.block_size, a.n_layer, a.n_head, a.n_embd)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.99), eps=1e-8)
    loader = Loader(train, a.batch_size, a.block_size, rng_hash(a.seed, 2))
    rss0, timed = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, 0.0
    for t in range(1, a.max_iters + 1):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(a, t)
        loss = model(*loader.next())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        if t > a.skip:
            timed += time.perf_counter() - t0
        if a.eval_interval and (t % a.eval_interval == 0 or t == a.max_iters):
            print(f"step={t} valid_loss={validate(a, model, valid):.6f}", flush=True)
    if a.whole_valid:
        loss, n = whole_valid(a, model, valid)
        print(f"whole_valid_loss={loss:.6f} tokens={n}", flush=True)
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    steps = a.max_iters - a.skip
    print(f"torch_gpt tok_s={steps * a.batch_size * a.block_size / timed:.1f} "
          f"timed_steps={steps} rss_mb={rss:.1f}")


if __name__ == "__main__":
    main()
