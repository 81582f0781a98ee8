#!/bin/sh
# make_tl4_refs.sh: writes the committed TransformerLens 4 references of tests/lens/test_tl_refs.c,
# run by hand where TransformerLens 4 (TransformerBridge) is installed. For the GPT-2-style and
# the LLaMA-style (rotary, 4 query heads on 2 key/value heads) models of tests/fixtures/lens
# (written by make_tl_refs.sh), it exports each as a Hugging Face folder (export --format hf),
# boots it with TransformerBridge.boot_transformers in float64 and writes the bridge's values of
# every point `attograd-gpt cache` writes (tests/lens/tl4_bridge.py reference) and its logits,
# then compares them once.
# Files written to OUT (default tests/fixtures/lens): NAME_tl4.npz (the bridge's points, float32,
# and the tokens) and NAME_tl4_logits.safetensors (ids, float64 logits), NAME in gpt2, llama.
# Usage: tests/lens/make_tl4_refs.sh ATTOGRAD_GPT PYTHON [OUT]
#   ATTOGRAD_GPT: a float build's program (build/examples/attograd-gpt)
#   PYTHON: a python3 with numpy, torch >= 2, safetensors and transformer_lens >= 4, e.g. a venv
#     made with python3 -m venv /opt/tl4 && /opt/tl4/bin/pip install 'transformer_lens>=4'
set -eu
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
gpt=$(realpath "$1")
py=$2
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${3:-$here/../fixtures/lens}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in gpt2 llama; do
    "$gpt" export --ckpt "$out/$name.npz" --format hf --out "$tmp/$name" >/dev/null
    "$gpt" cache --model "$tmp/$name" --prompts "$out/prompts.txt" --out "$tmp/${name}_cache.npz" \
        >/dev/null
    "$py" "$here/tl4_bridge.py" reference "$tmp/$name" "$tmp/${name}_cache.npz" \
        "$out/${name}_tl4.npz" "$out/${name}_tl4_logits.safetensors"
    "$py" "$here/tl4_bridge.py" compare "$tmp/$name" "$tmp/${name}_cache.npz" | tail -1
done
ls -l "$out"
