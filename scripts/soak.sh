#!/bin/sh
# soak.sh: a long training run whose memory must stay flat (make soak).
# Usage: scripts/soak.sh TRAINER GEN STEPS OUT_DIR
#   TRAINER  the attograd-translate program; GEN  the corpus generator (data/gen)
# Generates a small translation corpus in OUT_DIR/data, trains a tiny model for STEPS steps with
# a validation (greedy decoding), a checkpoint and a log row every 100 steps, and reads the
# trainer's --report-rss lines: the peak RSS (VmHWM) after step 100, once every
# kind of work (every batch shape of an epoch: 75 batches of 16, a validation, a save) has run,
# and at the end.
# Fails if the end exceeds step 100 by more than SOAK_MARGIN_KIB (default: 1 MiB or 2 % of the
# step-100 figure, whichever is larger). Prints both figures.
set -eu
if [ $# -ne 4 ]; then
    echo "usage: $0 TRAINER GEN STEPS OUT_DIR" >&2
    exit 2
fi
bin=$1 gen=$2 steps=$3 out=$4
if [ "$steps" -le 100 ]; then
    echo "soak: STEPS must be above 100 (got $steps)" >&2
    exit 2
fi
mkdir -p "$out"
"$gen" --out "$out/data" --task translate --seed 7 --train 1200 --valid 100 --test 10 --gen 10 \
    --gen-long 10 >/dev/null
log="$out/soak.txt"
start=$(date +%s)
# loss.png is redrawn by gnuplot (a child process: not in our RSS) at each validation; skip it
AG_GNUPLOT=/nonexistent "$bin" train --train "$out/data/train.tsv" --valid "$out/data/valid.tsv" \
    --out "$out/run" --force --steps "$steps" --warmup 50 --d-model 16 --heads 2 --layers 1 \
    --ff 32 --batch 16 --max-len 64 --valid-every 100 --valid-max 20 --save-every 100 \
    --log-every 100 --report-rss 100 --threads 1 --quiet >"$log"
end=$(date +%s)
cat "$log"
first=$(sed -n 's/^memory: peak RSS \([0-9]*\) KiB after step 100 .*/\1/p' "$log")
last=$(sed -n "s/^memory: peak RSS \([0-9]*\) KiB after step $steps .*/\1/p" "$log")
if [ -z "$first" ] || [ -z "$last" ]; then
    echo "soak: FAILED: the trainer did not report its peak RSS at steps 100 and $steps" >&2
    exit 1
fi
margin=${SOAK_MARGIN_KIB:-$(( first / 50 > 1024 ? first / 50 : 1024 ))}
grow=$(( last - first ))
echo "soak: $steps steps in $(( end - start )) s; peak RSS $first KiB after step 100," \
     "$last KiB after step $steps: $grow KiB more (allowed: $margin KiB)"
if [ "$grow" -gt "$margin" ]; then
    echo "soak: FAILED: memory grew by $grow KiB after step 100 (more than $margin KiB)" >&2
    exit 1
fi
echo "soak: passed"
