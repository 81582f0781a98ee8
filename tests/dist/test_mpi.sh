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
#   5. SIGKILL to process 1 of 2: the run exits (non-zero, naming rank 1) within 60 s, no hang.
# Usage: tests/dist/test_mpi.sh PLAIN_GPT MPI_GPT DIST_TREE WORKDIR
set -u
plain="$1"
mgpt="$2"
tree="$3"
work="$4"
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
cat "$(dirname "$0")/../../README.md" "$(dirname "$0")/../../docs/"*.md >"$work/text.txt"
"$plain" prepare --input "$work/text.txt" --out "$work/data" >>"$log" 2>&1 || fail "prepare"
args="--data $work/data --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8
      --warmup-iters 5 --eval-interval 10 --eval-iters 3 --dropout 0.1
      --threads 1 --quiet"
"$plain" train $args --max-iters 20 --lr-decay-iters 20 --shards 4 --out "$work/acc" >>"$log" 2>&1 ||
    fail "plain --shards 4: exit $?"
"$plain" train $args --max-iters 20 --lr-decay-iters 20 --out "$work/one" >>"$log" 2>&1 || fail "plain: exit $?"
cmp -s "$work/acc/last.npz" "$work/one/last.npz" && fail "--shards 4 and 1 wrote the same bytes"
ok
for np in 1 2 4; do
    mpi -np $np "$mgpt" train $args --max-iters 20 --lr-decay-iters 20 --shards 4 --out "$work/np$np" >>"$log" 2>&1 ||
        fail "mpirun -np $np: exit $?"
    for f in last.npz best.npz; do
        cmp "$work/acc/$f" "$work/np$np/$f" >>"$log" 2>&1 ||
            fail "mpirun -np $np: $f differs from one process accumulating the 4 shards"
        ok
    done
done

# the same with the reduction after backward (no overlap), and with 1 kB buckets (one message
# a parameter or more) on 3 processes (shards 0-1, 2, 3) and 4
AG_DIST_OVERLAP=0 mpi -x AG_DIST_OVERLAP -np 2 "$mgpt" train $args --max-iters 20 --lr-decay-iters 20 \
    --shards 4 --out "$work/noov" >>"$log" 2>&1 || fail "AG_DIST_OVERLAP=0 mpirun -np 2: exit $?"
cmp "$work/acc/last.npz" "$work/noov/last.npz" >>"$log" 2>&1 ||
    fail "AG_DIST_OVERLAP=0 mpirun -np 2: last.npz differs from one process accumulating"
ok
for np in 3 4; do
    AG_DIST_BUCKET_KB=1 mpi -x AG_DIST_BUCKET_KB -np $np "$mgpt" train $args --max-iters 20 \
        --lr-decay-iters 20 --shards 4 --out "$work/b1_$np" >>"$log" 2>&1 ||
        fail "AG_DIST_BUCKET_KB=1 mpirun -np $np: exit $?"
    cmp "$work/acc/last.npz" "$work/b1_$np/last.npz" >>"$log" 2>&1 ||
        fail "AG_DIST_BUCKET_KB=1 mpirun -np $np: last.npz differs from one process accumulating"
    ok
done
AG_DIST_OVERLAP=x mpi -x AG_DIST_OVERLAP -np 2 "$mgpt" train $args --max-iters 20 --shards 4 \
    --out "$work/badenv" >"$work/badenv.out" 2>&1 && fail "AG_DIST_OVERLAP=x: exit 0"
grep -q 'AG_DIST_OVERLAP=x' "$work/badenv.out" || fail "AG_DIST_OVERLAP=x: not named in the error"
ok

# ---- 3. resume on another number of processes ----
mpi -np 2 "$mgpt" train $args --max-iters 10 --lr-decay-iters 20 --shards 4 \
    --out "$work/half" >>"$log" 2>&1 ||
    fail "mpirun -np 2, 10 steps: exit $?"
cp -r "$work/half" "$work/half_plain"
mpi -np 1 "$mgpt" train --data "$work/data" --out "$work/half" --resume --max-iters 20 \
    --threads 1 --quiet >>"$log" 2>&1 || fail "resume on -np 1: exit $?"
"$plain" train --data "$work/data" --out "$work/half_plain" --resume --max-iters 20 --threads 1 \
    --quiet >>"$log" 2>&1 || fail "resume on the plain build: exit $?"
for d in half half_plain; do
    cmp "$work/acc/last.npz" "$work/$d/last.npz" >>"$log" 2>&1 ||
        fail "$d: 10 steps on 2 processes + 10 resumed on 1 differ from 20 steps"
    ok
done

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
# long_run NAME SIGNAL: starts a long run, waits for its first checkpoint past step 0, sends
# SIGNAL to process 1, waits; sets rc and out
long_run() {
    out="$work/$1.out"
    mpirun --allow-run-as-root --oversubscribe -np 2 "$mgpt" train $args --max-iters 1000000 --lr-decay-iters 1000000 --shards 4 \
        --out "$work/$1" >"$out" 2>&1 &
    mp=$!
    i=0
    while [ $i -lt 300 ] && ! grep -q '^10,' "$work/$1/log.csv" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    r1="$(rank_pid $mp 1)" || fail "$1: no process 1 found under mpirun $mp"
    kill -"$2" "$r1"
    i=0
    while [ $i -lt 600 ] && kill -0 $mp 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 $mp 2>/dev/null; then
        kill -KILL $mp
        fail "$1: SIG$2 to process 1: the run still runs after 60 s (hangs)"
    fi
    wait $mp
    rc=$?
    cat "$out" >>"$log"
}
long_run int INT
[ $rc = 130 ] || fail "SIGINT to process 1: mpirun exit $rc, not 130"
n_saved=$(grep -c 'interrupted by SIGINT' "$out")
[ "$n_saved" = 1 ] || fail "SIGINT: $n_saved 'interrupted' messages, not 1"
step=$(sed -n 's/.*interrupted by SIGINT at step \([0-9]*\).*/\1/p' "$out")
mpi -np 1 "$mgpt" train --data "$work/data" --out "$work/int" --resume --max-iters $((step + 2)) \
    --threads 1 --quiet >>"$log" 2>&1 || fail "resume after SIGINT at step $step: exit $?"
ok
long_run kill KILL
[ $rc != 0 ] || fail "SIGKILL to process 1: mpirun exit 0"
grep -q 'rank 1' "$out" || fail "SIGKILL to process 1: mpirun's message does not name rank 1"
ok
echo "  test-mpi: $checks checks passed (mpirun -np 1, 2, 3, 4: the same bits; resume; signals); log: $log"
