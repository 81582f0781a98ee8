#!/bin/sh
# mpi_netns.sh: runs an MPI program on NP emulated machines on this one: NP network namespaces
# (mpinet-r0 .. mpinet-r<NP-1>, addresses 10.199.77.1 .. NP) joined by veth pairs to a bridge in
# a switch namespace (mpinet-sw), each machine's link limited to RATE in both directions (tc:
# netem, or tbf when the kernel has no netem) and, with netem, delayed by DELAY on the way out.
# Open MPI talks TCP only (--mca btl tcp,self), over those links only; mpirun runs in mpinet-r0
# and starts one daemon in each namespace through a small rsh agent (ip netns exec + a hostname
# of its own, so each namespace is a machine to Open MPI). The emulated machines share this
# one's cores: processes are not bound (--bind-to none) and yield when they wait
# (mpi_yield_when_idle), or a waiting process would spin on the core of the one it waits for.
# docs/mpi.md, "Across machines".
# Needs root (ip netns, tc). Idempotent: namespaces left by an earlier run are removed first, and
# this run's are removed at exit (also on Ctrl-C).
# Usage:
#   bench/mpi_netns.sh run NP RATE DELAY COMMAND...   one mpirun -np NP COMMAND
#       RATE: none (the veth's own speed) or a tc rate (1gbit, 10gbit); DELAY: 0 or a tc time
#       (0.1ms, 1ms; needs netem). The AG_DIST_* variables are passed to the processes.
#   bench/mpi_netns.sh sweep DATA [STEPS]   the figures of docs/mpi.md: for NP 2 and 4 (and 8
#       with STEPS 0) and RATE none, 10gbit, 1gbit: the reduction alone (tests/dist_tree: NP
#       leaves of 1 value, 204k, 816k (the make gpt model's gradient) and 1.04M (the demo
#       translator's); median and fastest of 21), and a short attograd-gpt train of the make gpt
#       model (STEPS steps, default 20; 0: none) with and without overlap. CSV rows, for
#       bench/mpi_cost.py. DATA: attograd-gpt prepare's folder. Needs make MPI=1 first.
set -eu
PRE=mpinet
NET=10.199.77

die() {
    echo "mpi_netns.sh: $*" >&2
    exit 2
}
[ "$(id -u)" = 0 ] || die "needs root: it creates network namespaces (ip netns) and tc qdiscs"
command -v ip >/dev/null && command -v tc >/dev/null || die "needs ip and tc (iproute2)"
command -v mpirun >/dev/null || die "needs mpirun (make MPI=1 installs Open MPI)"

TMP="" SWEEP_OUT=""
remove_namespaces() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in "$PRE"-r* | "$PRE"-sw) ip netns del "$ns" 2>/dev/null || true ;; esac
    done
}
cleanup() {
    remove_namespaces
    [ -z "$TMP" ] || rm -rf "$TMP"
    [ -z "$SWEEP_OUT" ] || rm -rf "$SWEEP_OUT"
}

has_netem() {
    ip netns exec "$PRE"-sw tc qdisc add dev lo root netem delay 1ms 2>/dev/null || return 1
    ip netns exec "$PRE"-sw tc qdisc del dev lo root
}

# shape NS DEV RATE DELAY: DEV's outgoing traffic limited to RATE, delayed by DELAY
shape() {
    if [ "$HAVE_NETEM" = 1 ]; then
        set -- "$1" "$2" "$([ "$3" = none ] || echo "rate $3")" "$([ "$4" = 0 ] || echo "delay $4")"
        [ -z "$3$4" ] || ip netns exec "$1" tc qdisc add dev "$2" root netem $3 $4 limit 100000
    elif [ "$3" != none ]; then
        # tbf: a bucket of 1 ms at RATE (at least 64 kB), a queue of 20 ms
        bps=$(echo "$3" | awk '/gbit$/{print $1*1e9} /mbit$/{print $1*1e6}')
        [ -n "$bps" ] || die "rate $3: give Nmbit or Ngbit"
        burst=$(awk -v b="$bps" 'BEGIN{x=b/8/1000; if (x<65536) x=65536; printf "%d", x}')
        ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst "$burst" \
            limit "$(awk -v b="$bps" -v u="$burst" 'BEGIN{printf "%d", b/8/50 + u}')"
    fi
}

# setup NP RATE DELAY
setup() {
    remove_namespaces
    [ -z "$TMP" ] || rm -rf "$TMP"
    HAVE_NETEM=0
    ip netns add "$PRE"-sw
    ip -n "$PRE"-sw link set lo up
    ip -n "$PRE"-sw link add br0 type bridge
    ip -n "$PRE"-sw link set br0 up
    has_netem && HAVE_NETEM=1
    [ "$3" = 0 ] || [ "$HAVE_NETEM" = 1 ] ||
        die "delay $3: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so no delay can be added"
    i=0
    while [ $i -lt "$1" ]; do
        ns="$PRE"-r$i
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        ip link add "$PRE"e$i type veth peer name "$PRE"p$i
        ip link set "$PRE"e$i netns "$ns"
        ip link set "$PRE"p$i netns "$PRE"-sw
        ip -n "$ns" link set "$PRE"e$i name eth0
        ip -n "$ns" addr add $NET.$((i + 1))/24 dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$PRE"-sw link set "$PRE"p$i master br0
        ip -n "$PRE"-sw link set "$PRE"p$i up
        shape "$ns" eth0 "$2" "$3"
        shape "$PRE"-sw "$PRE"p$i "$2" 0
        i=$((i + 1))
    done
    TMP=$(mktemp -d)
    # the rsh agent: [options] HOST COMMAND...: COMMAND in namespace HOST, with hostname HOST
    cat >"$TMP/agent" <<'EOF'
#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
exec ip netns exec "$host" unshare --uts /bin/sh -c "hostname $host && $*"
EOF
    chmod +x "$TMP/agent"
}

# mpi NP COMMAND...: mpirun over the namespaces (setup first)
mpi() {
    np=$1
    shift
    hosts=""
    i=0
    while [ $i -lt "$np" ]; do
        hosts="$hosts${hosts:+,}${PRE}-r$i"
        i=$((i + 1))
    done
    ip netns exec "$PRE"-r0 mpirun --allow-run-as-root -np "$np" --host "$hosts" --bind-to none \
        --mca plm_rsh_agent "$TMP/agent" --mca btl tcp,self --mca mpi_yield_when_idle 1 \
        --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24 \
        -x AG_DIST_OVERLAP -x AG_DIST_BUCKET_KB -x OMP_NUM_THREADS "$@"
}

trap cleanup EXIT
trap 'exit 130' INT TERM
export AG_DIST_OVERLAP="${AG_DIST_OVERLAP:-1}" AG_DIST_BUCKET_KB="${AG_DIST_BUCKET_KB:-256}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
case ${1:-} in
run)
    [ $# -ge 5 ] || die "usage: $0 run NP RATE DELAY COMMAND..."
    np=$2 rate=$3 delay=$4
    shift 4
    setup "$np" "$rate" "$delay"
    mpi "$np" "$@"
    ;;
sweep)
    [ $# -ge 2 ] || die "usage: $0 sweep DATA [STEPS]"
    data=$2 steps=${3:-20}
    [ -f "$data/train.bin" ] || die "$data: no train.bin (attograd-gpt prepare's folder)"
    tree=build/float-mpi/tests/dist_tree gpt=build/float-mpi/examples/attograd-gpt
    [ -x $tree ] && [ -x $gpt ] || die "$tree or $gpt missing: make MPI=1 $tree $gpt"
    out=$(mktemp -d /tmp/mpinet_sweep.XXXXXX)
    SWEEP_OUT=$out
    echo "# reduce: tests/dist_tree NP leaves of N values, ms (median/fastest of 21); train: make gpt's model,"
    echo "# --shards 4, STEPS steps: tokens/s, the reduction's ms a step and its part after backward"
    echo "np,rate,reduce_1,reduce_204k,reduce_816k,reduce_1040k,overlap,tokens_per_s,reduce_ms,after_backward_ms"
    for np in 2 4 $([ "$steps" != 0 ] || echo 8); do
        for rate in none 10gbit 1gbit; do
            setup "$np" "$rate" 0
            row="$np,$rate"
            for n in 1 203936 815745 1040000; do
                row="$row,$(mpi "$np" $tree "$np" $n contiguous 21 |
                    sed -n 's|.*: \([0-9.]*\) ms a.*fastest \([0-9.]*\) ms.*|\1/\2|p')"
            done
            for ov in $([ "$steps" = 0 ] || echo 1 0); do
                AG_DIST_OVERLAP=$ov mpi "$np" $gpt train --data "$data" --out "$out/run" --force \
                    --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 \
                    --dropout 0 --max-iters "$steps" --warmup-iters 2 --eval-interval 100000 \
                    --eval-iters 1 --shards 4 --threads 1 >"$out/log" 2>&1 ||
                    die "attograd-gpt train on $np namespaces, $rate: $(tail -n 3 "$out/log")"
                tps=$(sed -n 's/^done:.*(\([0-9]*\) tokens\/s).*/\1/p' "$out/log")
                red=$(sed -n 's/.*took \([0-9.]*\) ms a step.*, \([0-9.]*\) ms of it.*/\1,\2/p' "$out/log")
                echo "$row,$ov,$tps,$red"
            done
            [ "$steps" != 0 ] || echo "$row"
        done
    done
    rm -rf "$out"
    ;;
*) die "usage: $0 run NP RATE DELAY COMMAND... | sweep DATA [STEPS]" ;;
esac
