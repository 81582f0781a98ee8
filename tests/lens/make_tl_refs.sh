#!/bin/sh
# make_tl_refs.sh: writes the committed references of tests/lens/test_tl_refs.c, run by hand
# where TransformerLens 3 (HookedTransformer) is installed. It trains three tiny models with
# attograd-gpt on a generated text (a GPT-2-style one: learned positions, LayerNorm, GELU; a
# LLaMA-style one: RoPE, RMSNorm, SwiGLU, 4 query heads on 2 key/value heads; an attention-only
# one), keeps their weights (a checkpoint without the optimizer's state), exports each to
# TransformerLens, and writes TransformerLens's run_with_cache values of every point
# `attograd-gpt cache` writes (tests/lens/tl_cache.py reference), then compares them once.
# Files written to OUT (default tests/fixtures/lens): prompts.txt, NAME.npz (the checkpoint)
# and NAME_tl.npz (TransformerLens's activations and the tokens), NAME in gpt2, llama, attn.
# Usage: tests/lens/make_tl_refs.sh ATTOGRAD_GPT PYTHON [OUT]
#   ATTOGRAD_GPT: a float build's program (build/examples/attograd-gpt)
#   PYTHON: a python3 with numpy, torch >= 2 and transformer_lens < 4, e.g. a venv made with
#     python3 -m venv --system-site-packages /opt/tl && /opt/tl/bin/pip install 'transformer_lens<4'
set -eu
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
gpt=$(realpath "$1")
py=$2
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${3:-$here/../fixtures/lens}")
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
while [ $i -lt 400 ]; do
    if [ $((i % 3)) -eq 0 ]; then echo "bac abc!"; else echo "abba cab."; fi
    i=$((i + 1))
done >"$tmp/text.txt"
"$gpt" prepare --input "$tmp/text.txt" --tokenizer char --out "$tmp/data" >/dev/null
printf 'abba cab\nbac abc!\n' >"$out/prompts.txt"
common="--data $tmp/data --n-layer 2 --n-head 4 --n-embd 16 --block-size 16 --batch-size 4
        --max-iters 40 --warmup-iters 5 --threads 1 --seed 7"
for name in gpt2 llama attn; do
    case $name in
    gpt2) extra="" ;;
    llama) extra="--llama --n-kv-head 2" ;;
    attn) extra="--mlp none" ;;
    esac
    # shellcheck disable=SC2086
    "$gpt" train $common $extra --out "$tmp/$name" >/dev/null
    # the weights, the configuration and the tokenizer (meta.extra): no optimizer state
    "$py" - "$tmp/$name/last.npz" "$out/$name.npz" <<'EOF'
import sys
import numpy as np
f = np.load(sys.argv[1])
drop = ("optim.", "meta.optim.", "train.", "rng.", "data.")
np.savez_compressed(sys.argv[2], **{k: f[k] for k in f.files if not k.startswith(drop)})
EOF
    "$gpt" export --ckpt "$out/$name.npz" --format transformer-lens --out "$tmp/${name}_export.npz" \
        >/dev/null
    "$gpt" cache --ckpt "$out/$name.npz" --prompts "$out/prompts.txt" --out "$tmp/${name}_cache.npz" \
        >/dev/null
    "$py" "$here/tl_cache.py" reference "$tmp/${name}_export.npz" "$tmp/${name}_export.json" \
        "$tmp/${name}_cache.npz" "$out/${name}_tl.npz"
    "$py" "$here/tl_cache.py" compare "$tmp/${name}_export.npz" "$tmp/${name}_export.json" \
        "$tmp/${name}_cache.npz" | tail -1
done
ls -l "$out"
