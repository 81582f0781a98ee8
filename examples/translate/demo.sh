#!/usr/bin/env bash
# demo.sh: what `make demo` runs once the data exist. Trains the default configuration of
# attograd-translate on the toy English-French corpus, evaluates the best checkpoint on test and
# gen_test, translates a few test sentences, draws the attention of one sentence and the
# importance of every head (gnuplot PNGs, skipped when it is missing), and says where every
# file went. The last line is
# the test exact match, e.g. "test exact-match: 98.7% (2000 sentences)".
#   usage: demo.sh BIN DATA_DIR OUT_DIR [extra train flags...]
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 BIN DATA_DIR OUT_DIR [train flags...]" >&2
    exit 2
fi
BIN=$1 DATA=$2 OUT=$3
shift 3
for f in train valid test gen_test; do
    if [ ! -f "$DATA/$f.tsv" ]; then
        echo "demo: $DATA/$f.tsv is missing (make data writes it)" >&2
        exit 1
    fi
done
mkdir -p "$OUT"
t0=$SECONDS

echo "== 1. training (the progress goes to $OUT/log.csv too)"
rm -f "$OUT/loss.png" "$OUT/loss.gp"
"$BIN" train --data "$DATA" --out "$OUT" --force "$@"
t1=$SECONDS

echo "== 2. evaluating $OUT/best.npz"
: > "$OUT/eval.txt"
for split in test gen_test; do
    "$BIN" eval --ckpt "$OUT/best.npz" --hyps "$OUT/${split}_hyps.tsv" "$DATA/$split.tsv" |
        tee -a "$OUT/eval.txt"
done
t2=$SECONDS

echo "== 3. translating the first sentences of test.tsv (greedy, then beam search of 4)"
head -n 5 "$DATA/test.tsv" | cut -f 1 > "$OUT/sentences.txt"
"$BIN" translate --ckpt "$OUT/best.npz" < "$OUT/sentences.txt" > "$OUT/greedy.txt"
"$BIN" translate --ckpt "$OUT/best.npz" --beam 4 < "$OUT/sentences.txt" > "$OUT/beam.txt"
paste -d '\n' "$OUT/sentences.txt" "$OUT/greedy.txt" "$OUT/beam.txt" /dev/null |
    awk 'NR % 4 == 1 { print "  en:    " $0 } NR % 4 == 2 { print "  fr:    " $0 }
         NR % 4 == 3 { print "  beam:  " $0 } NR % 4 == 0 { print "" }' | tee "$OUT/translations.txt"
t3=$SECONDS

echo "== 4. attention of the first test sentence, head importance on valid.tsv"
rm -rf "$OUT/attention" "$OUT/heads"
"$BIN" attention --ckpt "$OUT/best.npz" --out "$OUT/attention" "$(head -n 1 "$OUT/sentences.txt")"
"$BIN" heads --ckpt "$OUT/best.npz" --data "$DATA/valid.tsv" --out "$OUT/heads" > "$OUT/heads.txt"
# one offline HTML page of the same sentence's heads and words, and the run's curves (docs/view.md)
"$BIN" view --ckpt "$OUT/best.npz" --sentence "$(head -n 1 "$OUT/sentences.txt")" \
    --out "$OUT/view.html" --runs "$OUT"
head -n 1 "$OUT/heads.txt"
echo "the five heads whose masking costs most (every head: $OUT/heads/heads.tsv):"
sed -n '2p' "$OUT/heads.txt" | sed 's/^/    /'
sed -n '3,$p' "$OUT/heads.txt" | awk 'NF == 7' | sort -g -r -k 5 | head -n 5 | sed 's/^/    /'
t4=$SECONDS

# the files, a line each: the names in one column (as wide as the longest), then what they hold;
# a picture that is not there says why
names=()
descs=()
file() {
    names+=("$1")
    descs+=("$2")
}
picture() {
    if [ -f "$1" ]; then
        file "$1" "$2"
    else
        file "$1" "not drawn (no gnuplot: scripts/deps.sh gnuplot-nox)"
    fi
}

file "$OUT/last.npz" "checkpoint: the latest step"
file "$OUT/best.npz" "checkpoint: the best on valid"
file "$OUT/log.csv" "training log: step,epoch,train_loss,lr,grad_norm,tokens_per_s,valid_loss,valid_exact"
file "$OUT/eval.txt" "exact match, token accuracy, BLEU-4 on test and gen_test"
file "$OUT/test_hyps.tsv" "test: source<TAB>reference<TAB>hypothesis"
file "$OUT/gen_test_hyps.tsv" "gen_test: source<TAB>reference<TAB>hypothesis"
file "$OUT/translations.txt" "the sentences above"
file "$OUT/attention/attention.npz" "every head's attention for the first sentence (bertviz's layout)"
file "$OUT/heads/heads.tsv" "head importance: loss increase when masked, gradient score"
file "$OUT/view.html" "open in a browser: every head, hover a word; the words' loss; the curves"
picture "$OUT/loss.png" "train and valid loss, valid exact match against the step"
shopt -s nullglob
grids=("$OUT"/attention/attention_layer*.png)
[ ${#grids[@]} -gt 0 ] || grids=("$OUT/attention/attention_layerN.png")
for f in "${grids[@]}"; do
    picture "$f" "a layer's attention: a row per block, a column per head"
done
picture "$OUT/heads/heads.png" "head importance heatmap (rows: blocks, columns: heads)"
echo "== files"
w=0
for n in "${names[@]}"; do [ ${#n} -le $w ] || w=${#n}; done
for i in "${!names[@]}"; do printf '  %-*s  %s\n' $w "${names[$i]}" "${descs[$i]}"; done
[ ! -f "$OUT/loss.png" ] || echo "  (each picture's gnuplot script, its data inline, is next to it: NAME.gp)"
echo "time: training $((t1 - t0)) s, evaluation $((t2 - t1)) s, translation $((t3 - t2)) s, analysis $((t4 - t3)) s, total $((t4 - t0)) s"
# "DATA/test.tsv: exact match 98.70% (1974/2000), ..." -> "test exact-match: 98.7% (2000 sentences)"
sed -n 's|^.*/test\.tsv: exact match [0-9.]*% (\([0-9]*\)/\([0-9]*\)).*$|\1 \2|p' "$OUT/eval.txt" |
    awk '{ printf "test exact-match: %.1f%% (%d sentences)\n", 100 * $1 / $2, $2 }'
