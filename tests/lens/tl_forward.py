"""tl_forward.py: a numpy forward of a model exported by `attograd-gpt export --format
transformer-lens`, written from TransformerLens's documented conventions (HookedTransformer with
the config's normalization_type, act_fn "gelu" ("gelu_new", "relu"), standard positions), compared with the logits
attograd computed for the same tokens.

TransformerLens's conventions used here (transformer_lens/components): resid = W_E[tokens] +
W_pos[:T] (standard positions); per block, x = ln1(resid); q = einsum("bpm,hmd->bphd", x, W_Q) +
b_Q (k, v alike; grouped-query: _W_K, _W_V with n_key_value_heads heads, each repeated to the
n_heads / n_key_value_heads query heads after it, torch.repeat_interleave); rotary positions
turn q and k (rotary_adjacent_pairs: the pair (x[2i], x[2i+1]) by pos / base^(2i / rotary_dim));
scores = q.k / sqrt(d_head), causal mask, softmax over keys; z = pattern . v;
attn_out = einsum("bphd,hdm->bpm", z, W_O) + b_O; resid += attn_out; then (unless attn_only)
x = ln2(resid), post = gelu(x W_in + b_in) (gated_mlp: silu(x W_gate) * (x W_in) + b_in), resid +=
post W_out + b_out; logits = ln_final(resid) W_U + b_U. LayerNorm: (x - mean) /
sqrt(var + eps) * w + b; RMS: x / sqrt(mean(x^2) + eps) * w.

Where transformer_lens with HookedTransformer (versions 2 and 3; 4.0 removed it for
TransformerBridge) is installed, the same file is also loaded into HookedTransformer and its
logits compared (it needs PyTorch 2: the suite does not depend on it).

Usage: tl_forward.py EXPORT.npz EXPORT.json LENS.npz [TOL]
  LENS.npz: `attograd-gpt lens --out` (its "tokens" int32 (B, T) and "logits" float32 (B, T, V)).
Prints one line and exits 0 when every logit agrees within TOL * max(1, |logit|) (TOL 1e-5).
"""
import json
import math
import sys

import numpy as np


def norm(x, p, name, kind, eps):
    if kind is None:
        return x
    if kind == "LN":
        x = x - x.mean(-1, keepdims=True)
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * p[name + ".w"] + p[name + ".b"]
    if kind == "RMS":
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * p[name + ".w"]
    raise ValueError("normalization_type %r" % kind)


ERF = np.vectorize(math.erf)


def gelu(x):  # act_fn "gelu": PyTorch's F.gelu, the exact erf form
    return 0.5 * x * (1 + ERF(x / math.sqrt(2)))


ACT = {  # TransformerLens's act_fn names of the ungated MLPs
    "gelu": gelu,
    "gelu_new": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "relu": lambda x: np.maximum(x, 0),
}


def rotary(x, cfg):  # x (B, T, heads, d_head); rotary_adjacent_pairs
    assert cfg["rotary_adjacent_pairs"], "only adjacent pairs (attograd's RoPE) are exported"
    rd, T = cfg["rotary_dim"], x.shape[1]
    freq = np.repeat(cfg["rotary_base"] ** (np.arange(rd // 2) / (rd / 2)), 2)  # "d -> (d 2)"
    angles = np.arange(T)[:, None] / freq[None, :]
    sin, cos = np.sin(angles)[None, :, None, :], np.cos(angles)[None, :, None, :]
    xr = x[..., :rd]
    flip = np.empty_like(xr)
    flip[..., ::2], flip[..., 1::2] = -xr[..., 1::2], xr[..., ::2]
    return np.concatenate([xr * cos + flip * sin, x[..., rd:]], -1)


def silu(x):
    return x / (1 + np.exp(-x))


def forward(p, cfg, tokens):
    B, T = tokens.shape
    kind, eps = cfg["normalization_type"], cfg["eps"]
    rope = cfg["positional_embedding_type"] == "rotary"
    resid = p["embed.W_E"][tokens] + (0 if rope else p["pos_embed.W_pos"][:T][None])
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    nkv = cfg.get("n_key_value_heads") or cfg["n_heads"]
    grouped = "_" if nkv != cfg["n_heads"] else ""  # _W_K, _b_K, _W_V, _b_V
    for l in range(cfg["n_layers"]):
        b = "blocks.%d." % l
        x = norm(resid, p, b + "ln1", kind, eps)
        q, k, v = (np.einsum("bpm,hmd->bphd", x, p[b + "attn." + u + "W_" + n])
                   + p[b + "attn." + u + "b_" + n]
                   for n, u in zip("QKV", ["", grouped, grouped]))
        k, v = (np.repeat(a, cfg["n_heads"] // nkv, axis=2) for a in (k, v))
        if rope:
            q, k = rotary(q, cfg), rotary(k, cfg)
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(cfg["d_head"])
        scores = np.where(mask, -np.inf, scores)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        pattern = scores / scores.sum(-1, keepdims=True)
        z = np.einsum("bhqk,bkhd->bqhd", pattern, v)
        attn_out = np.einsum("bqhd,hdm->bqm", z, p[b + "attn.W_O"]) + p[b + "attn.b_O"]
        resid_pre, resid = resid, resid + attn_out
        if cfg.get("parallel_attn_mlp"):  # both read resid_pre: resid_pre + attn_out + mlp_out
            x = norm(resid_pre, p, b + "ln2", kind, eps)
            post = ACT[cfg["act_fn"]](x @ p[b + "mlp.W_in"] + p[b + "mlp.b_in"])
            resid = resid + post @ p[b + "mlp.W_out"] + p[b + "mlp.b_out"]
        elif cfg.get("gated_mlp"):
            assert cfg["act_fn"] == "silu"
            x = norm(resid, p, b + "ln2", kind, eps)
            post = silu(x @ p[b + "mlp.W_gate"]) * (x @ p[b + "mlp.W_in"]) + p[b + "mlp.b_in"]
            resid = resid + post @ p[b + "mlp.W_out"] + p[b + "mlp.b_out"]
        elif not cfg["attn_only"]:
            x = norm(resid, p, b + "ln2", kind, eps)
            post = ACT[cfg["act_fn"]](x @ p[b + "mlp.W_in"] + p[b + "mlp.b_in"])
            resid = resid + post @ p[b + "mlp.W_out"] + p[b + "mlp.b_out"]
    return norm(resid, p, "ln_final", kind, eps) @ p["unembed.W_U"] + p["unembed.b_U"]


def compare(what, got, want, tol):
    err = np.abs(got - want) / np.maximum(1, np.abs(want))
    worst = float(err.max())
    if not worst <= tol:
        i = np.unravel_index(int(err.argmax()), err.shape)
        sys.exit("%s: logit %s is %.9g, attograd's %.9g (relative %.3g > %g)"
                 % (what, i, got[i], want[i], worst, tol))
    return worst


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    f = np.load(sys.argv[1])
    p = {k: f[k].astype(np.float64) for k in f.files}
    assert all(f[k].dtype == np.float32 for k in f.files), "every array is float32"
    with open(sys.argv[2]) as j:
        cfg = json.load(j)
    lens = np.load(sys.argv[3])
    tokens, want = lens["tokens"], lens["logits"].astype(np.float64)
    tol = float(sys.argv[4]) if len(sys.argv) == 5 else 1e-5
    assert p["blocks.0.attn.W_Q"].shape == (cfg["n_heads"], cfg["d_model"], cfg["d_head"])
    assert p["blocks.0.attn.W_O"].shape == (cfg["n_heads"], cfg["d_head"], cfg["d_model"])
    assert p["unembed.W_U"].shape == (cfg["d_model"], cfg["d_vocab"])
    worst = compare("numpy forward", forward(p, cfg, tokens), want, tol)
    line = "numpy forward of the export: %d x %d logits within %.2g of attograd's (tolerance %g)" \
        % (want.shape[0] * want.shape[1], want.shape[2], worst, tol)
    try:
        import torch
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as e:  # not installed, or 4.x (no HookedTransformer)
        print(line + "; transformer_lens's HookedTransformer: skipped (%s)"
              % str(e).split(".")[0])
        return
    model = HookedTransformer(HookedTransformerConfig(**cfg))
    missing, unexpected = model.load_state_dict(
        {k: torch.tensor(f[k]) for k in f.files}, strict=False)
    assert not unexpected, unexpected
    # only the attention's buffers, which HookedTransformer builds itself, are not exported
    built = ("mask", "IGNORE", "rotary_sin", "rotary_cos")
    assert all(k.endswith(built) for k in missing), missing
    with torch.no_grad():
        got = model(torch.tensor(tokens, dtype=torch.long)).double().numpy()
    worst_tl = compare("transformer_lens", got, want, tol)
    print(line + "; transformer_lens's HookedTransformer: within %.2g" % worst_tl)


if __name__ == "__main__":
    main()
