"""tl_cache.py: every point of an `attograd-gpt cache` file against TransformerLens's own value of
the same name: the model's TransformerLens export (`attograd-gpt export`) is loaded into
HookedTransformer (transformer_lens 2 or 3; 4.0 removed the class) with a strict
load_state_dict, run_with_cache runs on the cache's tokens, and each activation is compared.

A point agrees when max |attograd - TransformerLens| <= TOL * max |TransformerLens| over the
point's finite values (its scale: a relative difference per point), and both have -inf at the
same places (the masked scores). Every point of the attograd file must exist in TransformerLens's
cache with the same shape.

Usage:
  tl_cache.py compare [--tol TOL] EXPORT.npz EXPORT.json CACHE.npz [EXPORT2.npz ...]
      for each triple, prints each point's relative difference; exits 0 when all are within
      TOL (1e-5), 1 when one is not, 3 when transformer_lens with HookedTransformer cannot be
      imported (skipped, the reason printed)
  tl_cache.py reference EXPORT.npz EXPORT.json CACHE.npz OUT.npz
      writes TransformerLens's values of the points CACHE.npz holds (float32, the same names),
      and the tokens, to OUT.npz: the committed references of tests/fixtures/lens (written by
      tests/lens/make_tl_refs.sh), which the suite compares with where transformer_lens is not
      installed
Needs torch >= 2 and transformer_lens < 4 (e.g. a venv: pip install 'transformer_lens<4').
"""
import json
import sys
import warnings

import numpy as np

NOT_POINTS = ("tokens", "token_strs", "config")


def load_tl(npz, cfg_path):
    import torch
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    with open(cfg_path) as j:
        cfg = json.load(j)
    with warnings.catch_warnings():  # 3.x: "HookedTransformer is deprecated" (removed in 4.0)
        warnings.simplefilter("ignore", DeprecationWarning)
        model = HookedTransformer(HookedTransformerConfig(**cfg))
    f = np.load(npz)
    state = {k: torch.tensor(f[k]) for k in f.files}
    # the buffers HookedTransformer builds itself (causal mask, IGNORE, rotary tables) are the
    # only keys the export does not hold: everything else must load strictly
    for k, v in model.state_dict().items():
        if k.endswith(("attn.mask", "attn.IGNORE", "attn.rotary_sin", "attn.rotary_cos")):
            state.setdefault(k, v)
    model.load_state_dict(state, strict=True)
    model.eval()
    return model


def tl_cache(model, tokens):
    import torch

    with torch.no_grad():
        _, cache = model.run_with_cache(torch.tensor(tokens, dtype=torch.long))
    return {k: v.detach().cpu().numpy() for k, v in cache.items()}


def points(cache_npz):
    f = np.load(cache_npz)
    names = [k for k in f.files if k not in NOT_POINTS and not k.endswith(".grad")]
    return f, names


def relative(got, want):
    """max |got - want| / max |want| over the finite values; inf when the -inf places differ"""
    fin = np.isfinite(want)
    if not np.array_equal(fin, np.isfinite(got)) or not np.array_equal(got[~fin], want[~fin]):
        return float("inf")
    if not fin.any():
        return 0.0
    scale = float(np.abs(want[fin]).max())
    diff = float(np.abs(got[fin].astype(np.float64) - want[fin].astype(np.float64)).max())
    return diff / scale if scale > 0 else diff


def compare(argv):
    tol = 1e-5
    if argv[:1] == ["--tol"]:
        tol, argv = float(argv[1]), argv[2:]
    if not argv or len(argv) % 3:
        sys.exit(__doc__)
    try:
        import transformer_lens  # noqa: F401
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError as e:  # not installed, or 4.x (no HookedTransformer)
        print("transformer_lens's HookedTransformer: skipped (%s)" % str(e).split(".")[0])
        sys.exit(3)
    failed = False
    for i in range(0, len(argv), 3):
        failed |= not compare_one(argv[i], argv[i + 1], argv[i + 2], tol)
    sys.exit(1 if failed else 0)


def compare_one(export, cfg, cache, tol):
    model = load_tl(export, cfg)
    f, names = points(cache)
    tl = tl_cache(model, f["tokens"])
    worst, bad = 0.0, []
    for n in names:
        if n not in tl:
            bad.append("%s: not a point of TransformerLens's cache" % n)
            continue
        if tl[n].shape != f[n].shape:
            bad.append("%s: shape %s, TransformerLens's %s" % (n, f[n].shape, tl[n].shape))
            continue
        r = relative(f[n], tl[n])
        print("%-36s %-9s %.2e" % (n, "x".join(map(str, f[n].shape)), r))
        worst = max(worst, r)
        if not r <= tol:
            bad.append("%s: relative difference %.3g > %g" % (n, r, tol))
    for b in bad:
        print("FAIL %s: %s" % (cache, b))
    print("%s: %d points against TransformerLens's run_with_cache: largest relative difference "
          "%.2e (tolerance %g)" % (cache, len(names), worst, tol))
    return not bad


def reference(argv):
    export, cfg, cache, out = argv[:4]
    model = load_tl(export, cfg)
    f, names = points(cache)
    tl = tl_cache(model, f["tokens"])
    missing = [n for n in names if n not in tl]
    if missing:
        sys.exit("not points of TransformerLens's cache: %s" % ", ".join(missing))
    arrays = {n: tl[n].astype(np.float32) for n in names}
    arrays["tokens"] = f["tokens"]
    np.savez_compressed(out, **arrays)
    print("%s: TransformerLens's values of %d points" % (out, len(names)))


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "compare":
        compare(sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "reference":
        reference(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
