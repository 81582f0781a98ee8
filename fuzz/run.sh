#!/usr/bin/env bash
# run.sh: runs each libFuzzer harness for a while and prints a table of executions.
# Usage: fuzz/run.sh BUILD_DIR SECONDS HARNESS...  (make fuzz calls it)
# Each harness starts from its seeds (BUILD_DIR/seeds/<h>, written by fuzz/seeds.c), the saved
# regressions (fuzz/regressions/<h>) and the corpus it grew in earlier runs
# (BUILD_DIR/corpus/<h>, kept between runs). Memory: -rss_limit_mb=2048 and -malloc_limit_mb=512
# (a single allocation over 512 MiB is a finding: no input of a few KiB may ask for that).
# A crash, leak, timeout or out-of-memory leaves its input in BUILD_DIR/crashes/<h>/ and makes
# this script fail (after the table): fix it, then keep the input in fuzz/regressions/<h>/.
set -u
B="$1"
SECONDS_EACH="$2"
shift 2
status=0
rows=()
for h in "$@"; do
    corpus="$B/corpus/$h"
    crashes="$B/crashes/$h"
    log="$B/logs/$h.log"
    mkdir -p "$corpus" "$crashes" "$B/logs" "fuzz/regressions/$h"
    dict=()
    [ -f "fuzz/$h.dict" ] && dict=(-dict="fuzz/$h.dict")
    echo "== fuzz $h: ${SECONDS_EACH} s"
    "$B/$h" "$corpus" "$B/seeds/$h" "fuzz/regressions/$h" "${dict[@]}" \
        -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 \
        -print_final_stats=1 -close_fd_mask=3 -artifact_prefix="$crashes/" \
        >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //')
    files=$(find "$corpus" -type f | wc -l)
    if [ "$rc" = 0 ]; then
        result="ok"
    else
        status=1
        art=$(grep -o "$crashes/[^ ]*" "$log" | tail -n 1)
        result="FOUND ($(grep -m1 -o 'ERROR: [A-Za-z]*: [a-z-]*\|ERROR: libFuzzer: [a-z-]*\|fuzz invariant broken' "$log" | head -n 1)) ${art:-see $log}"
    fi
    rows+=("$(printf '%-11s %8s %12s %10s %7s %8s  %s' "$h" "$SECONDS_EACH" "${execs:-?}" \
        "${rate:-?}" "${cov:-?}" "$files" "$result")")
done
echo
printf '%-11s %8s %12s %10s %7s %8s  %s\n' harness seconds executions "execs/s" cov corpus result
for r in "${rows[@]}"; do echo "$r"; done
exit $status
