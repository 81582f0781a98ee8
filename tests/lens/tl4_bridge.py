"""tl4_bridge.py: attograd's Hugging Face export booted by TransformerLens 4's TransformerBridge.
Each folder DIR (written by `attograd-gpt export --format hf`) is booted with
TransformerBridge.boot_transformers(DIR, device="cpu", dtype=the folder's "dtype"),
run_with_cache runs on the tokens of an `attograd-gpt cache` file of the same model, and:
  - the bridge's logits are written to DIR/tl4_logits.safetensors ("ids" I64, "logits" F64),
    which the caller (tests/lens/test_tl_refs.c) compares with attograd's own forward;
  - every point of the attograd cache is compared with the bridge's point of the same name:
    the same shape, max |attograd - bridge| <= TOL * max |bridge| over the unmasked values.
Two differences of representation are undone, not ignored:
  - the masked attention scores: attograd's are -inf, the bridge's (transformers' eager
    attention, an additive mask) the dtype's lowest finite value; the masked places must be the
    same;
  - LlamaForCausalLM: the export permutes each head's q_proj and k_proj rows from attograd's
    adjacent rotary pairs to transformers' halves (docs/hf.md), so the bridge's hook_q, hook_k,
    hook_rot_q and hook_rot_k hold attograd's vectors with each head's coordinates in that
    order (attograd's coordinate 2p + r is the bridge's r * HS/2 + p): attograd's are put in
    that order before comparing.
Every point of the attograd cache must be a point of the bridge; the bridge's points that the
cache lacks are counted and printed.

Usage:
  tl4_bridge.py compare [--tol TOL] DIR CACHE.npz [DIR2 CACHE2 ...]
      exits 0 when every point is within TOL (1e-5), 1 when one is not, 3 when
      transformer_lens's TransformerBridge cannot be imported (skipped, the reason printed)
  tl4_bridge.py reference DIR CACHE.npz OUT.npz OUT_LOGITS.safetensors
      the committed references of tests/fixtures/lens (written by tests/lens/make_tl4_refs.sh),
      which the suite compares with everywhere: the folder booted in float64 (its float32
      weights exactly), the bridge's values of the points CACHE.npz holds in attograd's
      representation (masked scores -inf, LLaMA's rotary coordinates back in adjacent pairs;
      float32, the same names) and the tokens to OUT.npz, its logits ("ids" I64, "logits" F64)
      to OUT_LOGITS.safetensors
Needs transformer_lens >= 4 (e.g. python3 -m venv /opt/tl4 && /opt/tl4/bin/pip install
'transformer_lens>=4').
"""
import json
import os
import sys
from importlib import metadata

import numpy as np

NOT_POINTS = ("tokens", "token_strs", "config")
ROTARY_POINTS = ("attn.hook_q", "attn.hook_k", "attn.hook_rot_q", "attn.hook_rot_k")


def boot(d, dtype=None):
    import torch
    from transformer_lens.model_bridge import TransformerBridge

    with open(os.path.join(d, "config.json")) as j:
        cfg = json.load(j)
    if dtype is None:
        dtype = torch.float64 if cfg.get("dtype") == "float64" else torch.float32
    bridge = TransformerBridge.boot_transformers(d, device="cpu", dtype=dtype)
    bridge.eval()
    return bridge, cfg, dtype


def halves_order(x):
    """x (..., HS) with attograd's adjacent rotary pairs in transformers' halves order"""
    hs = x.shape[-1]
    perm = [2 * p + r for r in range(2) for p in range(hs // 2)]
    return x[..., perm]


def adjacent_order(x):
    """x (..., HS) in transformers' halves order with attograd's adjacent rotary pairs: the
    inverse of halves_order"""
    hs = x.shape[-1]
    perm = [2 * p + r for r in range(2) for p in range(hs // 2)]
    inv = [0] * hs
    for i, p in enumerate(perm):
        inv[p] = i
    return x[..., inv]


def relative(got, want, masked):
    """max |got - want| / max |want| over the unmasked places; inf when got is not -inf at
    exactly the masked ones"""
    if not np.array_equal(np.isneginf(got), masked):
        return float("inf")
    keep = ~masked
    if not keep.any():
        return 0.0
    scale = float(np.abs(want[keep]).max())
    diff = float(np.abs(got[keep].astype(np.float64) - want[keep].astype(np.float64)).max())
    return diff / scale if scale > 0 else diff


def compare_one(d, cache_path, tol):
    import torch
    from safetensors.torch import save_file

    bridge, cfg, dtype = boot(d)
    f = np.load(cache_path)
    tokens = torch.tensor(f["tokens"], dtype=torch.long)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(tokens)
    save_file({"ids": tokens.contiguous(), "logits": logits.double().contiguous()},
              os.path.join(d, "tl4_logits.safetensors"), metadata={"format": "pt"})
    llama = cfg.get("model_type") == "llama"
    lowest = torch.finfo(dtype).min
    names = [k for k in f.files if k not in NOT_POINTS and not k.endswith(".grad")]
    worst, bad = 0.0, []
    for n in names:
        if n not in cache:
            bad.append("%s: not a point of the bridge's cache" % n)
            continue
        t = cache[n]
        masked = (t <= lowest / 2).numpy()  # the additive causal mask of the scores
        want = t.double().numpy()
        got = f[n]
        if llama and n.endswith(ROTARY_POINTS):
            got = halves_order(got)
        if want.shape != got.shape:
            bad.append("%s: shape %s, the bridge's %s" % (n, got.shape, want.shape))
            continue
        r = relative(got, want, masked)
        print("%-36s %-9s %.2e" % (n, "x".join(map(str, got.shape)), r))
        worst = max(worst, r)
        if not r <= tol:
            bad.append("%s: relative difference %.3g > %g" % (n, r, tol))
    others = [k for k in cache.keys() if k not in names]
    for b in bad:
        print("FAIL %s: %s" % (cache_path, b))
    print("%s: %s booted by TransformerBridge (transformer_lens %s, %s): %d points against "
          "run_with_cache, largest relative difference %.2e (tolerance %g); %d of the bridge's "
          "points not in attograd's cache: %s" % (
              cache_path, d, metadata.version("transformer_lens"), str(dtype).split(".")[-1],
              len(names), worst, tol, len(others), " ".join(others)))
    return not bad


def compare(argv):
    tol = 1e-5
    if argv[:1] == ["--tol"]:
        tol, argv = float(argv[1]), argv[2:]
    if not argv or len(argv) % 2:
        sys.exit(__doc__)
    try:
        from transformer_lens.model_bridge import TransformerBridge  # noqa: F401
        version = metadata.version("transformer_lens")
    except ImportError as e:  # not installed, or without the bridge
        print("transformer_lens's TransformerBridge: skipped (%s)" % str(e).split(".")[0])
        sys.exit(3)
    if int(version.split(".")[0]) < 4:  # 3.x has a TransformerBridge too: this checks 4's
        print("transformer_lens's TransformerBridge: skipped (transformer_lens %s, not 4 or "
              "later)" % version)
        sys.exit(3)
    failed = False
    for i in range(0, len(argv), 2):
        failed |= not compare_one(argv[i], argv[i + 1], tol)
    sys.exit(1 if failed else 0)


def reference(d, cache_path, out, out_logits):
    import torch
    from safetensors.torch import save_file

    bridge, cfg, dtype = boot(d, torch.float64)
    f = np.load(cache_path)
    tokens = torch.tensor(f["tokens"], dtype=torch.long)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(tokens)
    llama = cfg.get("model_type") == "llama"
    lowest = torch.finfo(dtype).min
    names = [k for k in f.files if k not in NOT_POINTS and not k.endswith(".grad")]
    missing = [n for n in names if n not in cache]
    if missing:
        sys.exit("not points of the bridge's cache: %s" % ", ".join(missing))
    arrays = {}
    for n in names:
        t = cache[n]
        v = t.numpy().copy()
        v[(t <= lowest / 2).numpy()] = -np.inf  # the additive causal mask: attograd's -inf
        if llama and n.endswith(ROTARY_POINTS):
            v = adjacent_order(v)
        if v.shape != f[n].shape:
            sys.exit("%s: shape %s, attograd's %s" % (n, v.shape, f[n].shape))
        arrays[n] = v.astype(np.float32)
    arrays["tokens"] = f["tokens"]
    np.savez_compressed(out, **arrays)
    save_file({"ids": tokens.contiguous(), "logits": logits.double().contiguous()}, out_logits,
              metadata={"format": "pt"})
    print("%s, %s: TransformerBridge's values of %d points and its logits (transformer_lens %s, "
          "float64)" % (out, out_logits, len(names), metadata.version("transformer_lens")))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "compare":
        compare(sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "reference":
        reference(*sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
