#!/bin/sh
# memcheck.sh: the translation example under valgrind's memcheck (make memcheck).
# Usage: scripts/memcheck.sh TRAINER GEN OUT_DIR
#   TRAINER  attograd-translate built without OpenMP (make OMP=0: libgomp's thread pool shows as
#            "possibly lost" memory and its spinning makes valgrind crawl) and without AVX-512
#            (valgrind 3.19 does not know those instructions: the Makefile builds it with
#            ARCH=x86-64-v3); GEN  the corpus generator.
# Runs, each under valgrind --leak-check=full with every leak kind an error (definite, indirect,
# possible and still reachable) and --error-exitcode=1: a short training run with a validation
# and both checkpoints, a resumed run (loads a checkpoint), eval of the best checkpoint, greedy
# and beam translation, attention maps (no gnuplot: the plots are skipped). Any invalid read or
# write, use of an uninitialised value, bad free or byte not freed fails the script.
set -eu
if [ $# -ne 3 ]; then
    echo "usage: $0 TRAINER GEN OUT_DIR" >&2
    exit 2
fi
bin=$1 gen=$2 out=$3
command -v valgrind >/dev/null 2>&1 || {
    echo "memcheck: valgrind is not installed (scripts/deps.sh valgrind)" >&2
    exit 1
}
rm -rf "$out"
mkdir -p "$out"
"$gen" --out "$out/data" --task translate --seed 3 --train 200 --valid 20 --test 10 --gen 10 \
    --gen-long 10 >/dev/null
export AG_GNUPLOT=/nonexistent OMP_NUM_THREADS=1
vg() {
    name=$1
    shift
    t0=$(date +%s)
    if ! valgrind --quiet --error-exitcode=1 --leak-check=full --show-leak-kinds=all \
        --errors-for-leak-kinds=all --track-origins=yes --log-file="$out/$name.valgrind" \
        "$bin" "$@" >"$out/$name.out" 2>"$out/$name.err"; then
        echo "memcheck: FAILED: $name ($bin $*)" >&2
        cat "$out/$name.valgrind" "$out/$name.err" >&2
        exit 1
    fi
    if [ -s "$out/$name.valgrind" ]; then
        echo "memcheck: FAILED: $name: valgrind reported:" >&2
        cat "$out/$name.valgrind" >&2
        exit 1
    fi
    echo "memcheck: $name: no errors, no leaks ($(( $(date +%s) - t0 )) s)"
}
model="--d-model 16 --heads 2 --layers 1 --ff 32 --max-len 48 --batch 16 --warmup 2 --quiet"
# shellcheck disable=SC2086
vg train train --train "$out/data/train.tsv" --valid "$out/data/valid.tsv" --out "$out/run" \
    --steps 8 --valid-every 4 --valid-max 8 --log-every 2 $model
vg resume train --train "$out/data/train.tsv" --valid "$out/data/valid.tsv" --out "$out/run" \
    --resume --steps 10 --valid-every 4 --valid-max 8 --log-every 2 --quiet
vg eval eval --ckpt "$out/run/best.npz" --max 8 "$out/data/test.tsv"
vg translate translate --ckpt "$out/run/last.npz" "the young buses keep a goat ." "you throw a zebra"
vg beam translate --ckpt "$out/run/last.npz" --beam 3 "the young buses keep a goat ."
vg attention attention --ckpt "$out/run/last.npz" --out "$out/att" "the young buses keep a goat ."
echo "memcheck: passed"
