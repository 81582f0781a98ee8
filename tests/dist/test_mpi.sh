#!/bin/sh
# test_mpi.sh: data-parallel training under mpirun gives the bits of one process (make test-mpi;
# docs/mpi.md). What it checks:
#   1. the tree (tests/tools/dist_tree): 8 and 6 leaves of 100000 values summed by 1, 2, 3 and 4
#      processes, leaves given out contiguously, cyclically and reversed (8; 6: cyclically):
#      the same bits as a
#      recursive pairwise sum written separately, and not the bits of a left-to-right sum;
#   2. attograd-gpt train, 20 steps of a small model with dropout, --shards 4: one process of the
#      plain build (gradient accumulation over the 4 shards) and mpirun -np 1, 2, 4 of the MPI
#      build write byte-identical last.npz and best.npz (and --shards 1 writes other bytes); the
#      reduction overlapped with backward (the default) or not (AG_DIST_OVERLAP=0), and in 1 kB
#      buckets on 3 and 4 processes: the same last.npz; AG_DIST_OVERLAP=x is refused, named;
#   3. 10 steps on 2 processes, then --resume to step 20 on 1 process (MPI build) and on the
#      plain build: the same last.npz as above;
#   4. SIGINT to process 1 of 2: every process stops, process 0 saves once, exit 130; the run
#      resumes from that checkpoint;
#   5. SIGKILL to process 1 of 2: the run exits (non-zero, naming rank 1) within 60 s, no hang;
#   6. attograd-translate train, the same: 20 steps of a small model with dropout, --shards 4 over
#      batches of 10 pairs (10 batches an epoch, the last of 7: shards of 2 or 3 pairs, 1 or 2 in
#      the last, weighted by their tokens), the plain build accumulating and mpirun -np 1, 2, 3, 4
#      writing the same last.npz and best.npz (validation dealt to the processes); 10 steps on 2
#      processes resumed to 20 on 1; SIGINT and SIGKILL to process 1.
#   7. examples/classify (the library's run loop, src/run), the same: 20 steps --shards 4 on one
#      process and mpirun -np 1, 2; 10 steps on 2 processes resumed to 20 on 1; SIGINT and SIGKILL
#      to process 1 (when PLAIN_CLASSIFY and MPI_CLASSIFY are given).
# Usage: tests/dist/test_mpi.sh PLAIN_GPT MPI_GPT DIST_TREE WORKDIR PLAIN_TRANSLATE MPI_TRANSLATE
#        [PLAIN_CLASSIFY MPI_CLASSIFY]
set -u
plain="$1"
mgpt="$2"
tree="$3"
work="$4"
ptr="$5"
mtr="$6"
pcl="${7:-}"
mcl="${8:-}"
rm -rf "$work"
mkdir -p "$work"
log="$work/test.log"
mpi() { mpirun --allow-run-as-root --oversubscribe "$@"; }
fail() {
    echo "  test-mpi: FAILED: $*"
    echo "  (log: $log)"
    tail -n 30 "$log" | sed 's/^/    /'
    exit 1
}
checks=0
ok() { checks=$((checks + 1)); }

# ---- 1. the tree ----
for S in 8 6; do
    want=""
    maps="contiguous cyclic reversed"
    [ $S = 6 ] && maps=cyclic
    for np in 1 2 3 4; do
        for map in $maps; do
            out="$(mpi -np $np "$tree" $S 100000 $map 2>>"$log")" || fail "dist_tree $S on $np: exit $?"
            echo "S=$S np=$np $map: $out" >>"$log"
            set -- $out
            [ "$2" = "$4" ] || fail "S=$S np=$np $map: tree $2 differs from the pairwise reference $4"
            [ "$2" != "$6" ] || fail "S=$S: the tree's bits equal a left-to-right sum's (no order shown)"
            [ -z "$want" ] && want="$2"
            [ "$2" = "$want" ] || fail "S=$S np=$np $map: tree $2, not $want"
            ok
        done
    done
done

# ---- 2. the same run on 1, 2, 4 processes and accumulated on one ----
# same_bits WHAT PLAIN MPI "NPS" S ARGS...: the plain build accumulating S shards
# ($work/WHAT-acc) and one shard (other bytes), then mpirun -np N of the MPI build for each N
# of NPS: the same last.npz and best.npz as the accumulation
same_bits() {
    what="$1"
    pl="$2"
    mp="$3"
    nps="$4"
    S="$5"
    shift 5
    "$pl" train "$@" --shards $S --out "$work/$what-acc" >>"$log" 2>&1 ||
        fail "$what: plain --shards $S: exit $?"
    "$pl" train "$@" --out "$work/$what-one" >>"$log" 2>&1 || fail "$what: plain: exit $?"
    cmp -s "$work/$what-acc/last.npz" "$work/$what-one/last.npz" &&
        fail "$what: --shards $S and 1 wrote the same bytes"
    ok
    for np in $nps; do
        mpi -np $np "$mp" train "$@" --shards $S --out "$work/$what-np$np" >>"$log" 2>&1 ||
            fail "$what: mpirun -np $np: exit $?"
        for f in last.npz best.npz; do
            cmp "$work/$what-acc/$f" "$work/$what-np$np/$f" >>"$log" 2>&1 ||
                fail "$what: mpirun -np $np: $f differs from one process accumulating the $S shards"
            ok
        done
    done
}
# ---- 3. resume on another number of processes ----
# resumed WHAT PLAIN MPI "RESUME_ARGS" ARGS...: ARGS (half of WHAT-acc's run) on 2 processes,
# then --resume RESUME_ARGS on 1 process of the MPI build and on the plain build: both write
# WHAT-acc's last.npz
resumed() {
    what="$1"
    pl="$2"
    mp="$3"
    rargs="$4"
    shift 4
    mpi -np 2 "$mp" train "$@" --out "$work/$what-half" >>"$log" 2>&1 ||
        fail "$what: mpirun -np 2, half the steps: exit $?"
    cp -r "$work/$what-half" "$work/$what-half_plain"
    mpi -np 1 "$mp" train $rargs --out "$work/$what-half" --resume >>"$log" 2>&1 ||
        fail "$what: resume on -np 1: exit $?"
    "$pl" train $rargs --out "$work/$what-half_plain" --resume >>"$log" 2>&1 ||
        fail "$what: resume on the plain build: exit $?"
    for d in half half_plain; do
        cmp "$work/$what-acc/last.npz" "$work/$what-$d/last.npz" >>"$log" 2>&1 ||
            fail "$what-$d: half the steps on 2 processes, the rest resumed on 1, differ"
        ok
    done
}
cat "$(dirname "$0")/../../README.md" "$(dirname "$0")/../../docs/"*.md >"$work/text.txt"
"$plain" prepare --input "$work/text.txt" --out "$work/data" >>"$log" 2>&1 || fail "prepare"
args="--data $work/data --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8
      --warmup-iters 5 --eval-interval 10 --eval-iters 3 --dropout 0.1
      --threads 1 --quiet"
same_bits gpt "$plain" "$mgpt" "1 2 4" 4 $args --max-iters 20 --lr-decay-iters 20
resumed gpt "$plain" "$mgpt" "--data $work/data --max-iters 20 --threads 1 --quiet" \
    $args --max-iters 10 --lr-decay-iters 20 --shards 4

# the same with the reduction after backward (no overlap), and with 1 kB buckets (one message
# a parameter or more) on 3 processes (shards 0-1, 2, 3) and 4
AG_DIST_OVERLAP=0 mpi -x AG_DIST_OVERLAP -np 2 "$mgpt" train $args --max-iters 20 --lr-decay-iters 20 \
    --shards 4 --out "$work/noov" >>"$log" 2>&1 || fail "AG_DIST_OVERLAP=0 mpirun -np 2: exit $?"
cmp "$work/gpt-acc/last.npz" "$work/noov/last.npz" >>"$log" 2>&1 ||
    fail "AG_DIST_OVERLAP=0 mpirun -np 2: last.npz differs from one process accumulating"
ok
for np in 3 4; do
    AG_DIST_BUCKET_KB=1 mpi -x AG_DIST_BUCKET_KB -np $np "$mgpt" train $args --max-iters 20 \
        --lr-decay-iters 20 --shards 4 --out "$work/b1_$np" >>"$log" 2>&1 ||
        fail "AG_DIST_BUCKET_KB=1 mpirun -np $np: exit $?"
    cmp "$work/gpt-acc/last.npz" "$work/b1_$np/last.npz" >>"$log" 2>&1 ||
        fail "AG_DIST_BUCKET_KB=1 mpirun -np $np: last.npz differs from one process accumulating"
    ok
done
AG_DIST_OVERLAP=x mpi -x AG_DIST_OVERLAP -np 2 "$mgpt" train $args --max-iters 20 --shards 4 \
    --out "$work/badenv" >"$work/badenv.out" 2>&1 && fail "AG_DIST_OVERLAP=x: exit 0"
grep -q 'AG_DIST_OVERLAP=x' "$work/badenv.out" || fail "AG_DIST_OVERLAP=x: not named in the error"
ok

# ---- 4 and 5: a signal to one process ----
# rank_pid MPIRUN_PID RANK: the pid of that rank (a child of mpirun, OMPI_COMM_WORLD_RANK in its
# environment)
rank_pid() {
    for c in $(pgrep -P "$1"); do
        if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
            echo "$c"
            return 0
        fi
    done
    return 1
}
# long_run NAME SIGNAL PROGRAM ARGS...: starts a long run on 2 processes writing $work/NAME,
# waits for its CSV row of step 10, sends SIGNAL to process 1, waits; sets rc and out
long_run() {
    name="$1"
    sig="$2"
    shift 2
    out="$work/$name.out"
    mpirun --allow-run-as-root --oversubscribe -np 2 "$@" --out "$work/$name" >"$out" 2>&1 &
    mp=$!
    i=0
    while [ $i -lt 300 ] && ! grep -q '^10,' "$work/$name/log.csv" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    r1="$(rank_pid $mp 1)" || fail "$name: no process 1 found under mpirun $mp"
    kill -"$sig" "$r1"
    i=0
    while [ $i -lt 600 ] && kill -0 $mp 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 $mp 2>/dev/null; then
        kill -KILL $mp
        fail "$name: SIG$sig to process 1: the run still runs after 60 s (hangs)"
    fi
    wait $mp
    rc=$?
    cat "$out" >>"$log"
}
# signals WHAT PROGRAM RESUME_ARGS STEPS_FLAG LONG_ARGS...: SIGINT to process 1 (exit 130, one message,
# the run resumes on 1 process to 2 steps more), then SIGKILL (mpirun exits non-zero, naming rank 1)
signals() {
    what="$1"
    prog="$2"
    resume_args="$3"
    steps_flag="$4"
    shift 4
    long_run "$what-int" INT "$prog" train "$@"
    [ $rc = 130 ] || fail "$what: SIGINT to process 1: mpirun exit $rc, not 130"
    n_saved=$(grep -c 'interrupted by SIGINT' "$out")
    [ "$n_saved" = 1 ] || fail "$what: SIGINT: $n_saved 'interrupted' messages, not 1"
    step=$(sed -n 's/.*interrupted by SIGINT at step \([0-9]*\).*/\1/p' "$out")
    mpi -np 1 "$prog" train $resume_args --out "$work/$what-int" --resume $steps_flag $((step + 2)) \
        >>"$log" 2>&1 || fail "$what: resume after SIGINT at step $step: exit $?"
    ok
    long_run "$what-kill" KILL "$prog" train "$@"
    [ $rc != 0 ] || fail "$what: SIGKILL to process 1: mpirun exit 0"
    grep -q 'rank 1' "$out" || fail "$what: SIGKILL to process 1: mpirun's message does not name rank 1"
    ok
}
signals gpt "$mgpt" "--data $work/data --threads 1 --quiet" --max-iters \
    $args --max-iters 1000000 --lr-decay-iters 1000000 --shards 4

# ---- 6. the translator ----
# tsv N SEED: N pairs of 2..7 letters of 6 and their reversal
tsv() {
    awk -v n="$1" -v seed="$2" 'BEGIN {
        srand(seed)
        for (i = 0; i < n; i++) {
            len = 2 + int(rand() * 6)
            for (k = 0; k < len; k++) w[k] = substr("abcdef", 1 + int(rand() * 6), 1)
            s = w[0]; for (k = 1; k < len; k++) s = s " " w[k]
            t = w[len - 1]; for (k = len - 2; k >= 0; k--) t = t " " w[k]
            print s "\t" t
        }
    }'
}
mkdir -p "$work/tr"
tsv 97 21 >"$work/tr/train.tsv"
tsv 24 22 >"$work/tr/valid.tsv"
targs="--data $work/tr --d-model 16 --heads 2 --layers 1 --ff 32 --max-len 24 --batch 10
       --lr 0.01 --warmup 5 --log-every 5 --valid-every 10 --dropout 0.1 --threads 1 --quiet"
same_bits translate "$ptr" "$mtr" "1 2 3 4" 4 $targs --steps 20
# 10 steps of the 20-step run (the same schedule), then resumed to 20
resumed translate "$ptr" "$mtr" "--data $work/tr --steps 20 --threads 1 --quiet" \
    $targs --steps 10 --schedule-steps 20 --shards 4
signals translate "$mtr" "--data $work/tr --threads 1 --quiet" --steps \
    $targs --steps 1000000 --shards 4

# ---- 7. examples/classify on the library's run loop ----
if [ -n "$pcl" ]; then
    cargs="--d-model 16 --heads 2 --layers 1 --len 8 --batch 16 --warmup 5 --valid-every 10
           --dropout 0.1 --threads 1 --quiet"
    same_bits classify "$pcl" "$mcl" "1 2" 4 $cargs --steps 20
    resumed classify "$pcl" "$mcl" "--steps 20 --threads 1 --quiet" \
        $cargs --steps 10 --schedule-steps 20 --shards 4
    signals classify "$mcl" "--threads 1 --quiet" --steps $cargs --steps 1000000 --shards 4
fi
echo "  test-mpi: $checks checks passed (mpirun -np 1, 2, 3, 4: the same bits; resume; signals; both trainers${pcl:+ and classify}); log: $log"
