#!/bin/sh
# run_suite.sh: runs the Criterion suite (build/.../tests/run_tests) with everything the run
# prints going to a log file: the messages passing tests expect (the abort message of every
# `.signal = SIGABRT` test, the errors of programs run under faults), cr_log_info's figures,
# and Criterion's own lines for each test ([RUN ], [PASS], [SKIP], [FAIL]; it runs --verbose).
# The terminal gets one line when every test passes, plus one line per test skipped here, with
# its reason. When a test fails: each failed test's part of the log (from its [RUN ] line to its
# [FAIL] line, with its assertion message and what it printed; with -j2 the other job's lines
# may be mixed in), Criterion's summary, and the log's path. Exit status: the suite's.
# Usage: tests/run_suite.sh LABEL LOG PROGRAM [ARGS...]    (the Makefile's test-one)
set -u
label="$1"
log="$2"
shift 2
mkdir -p "$(dirname "$log")"
"$@" --verbose >"$log" 2>&1
rc=$?
synthesis="$(grep '^\[====\] Synthesis' "$log" | tail -n 1)"
# skipped here, with the reason (a --filter also lists the tests it left out: not those)
skips="$(grep '^\[SKIP\]' "$log" | grep -v ': Test is disabled$')"
nskip=$(printf '%s' "$skips" | grep -c .)
if [ "$rc" = 0 ]; then
    tested=$(printf '%s\n' "$synthesis" | sed -n 's/.*Tested: \([0-9]*\).*/\1/p')
    printf '  tests %s: %s passed, %s skipped; their messages are in %s\n' "$label" "${tested:-?}" \
        "$nskip" "$log"
    [ -n "$skips" ] && printf '%s\n' "$skips" | sed 's/^/    /'
    exit 0
fi
echo "  tests $label: FAILED (exit $rc)"
awk '
    FNR == NR {
        if ($0 ~ /^\[FAIL\] /) { t = substr($0, 8); sub(/: .*/, "", t); failed[t] = 1 }
        next
    }
    {
        printed = 0
        if ($0 ~ /^\[RUN \] /) { t = substr($0, 8); if (t in failed) open[t] = 1 }
        n = 0
        for (t in open) n++
        if (n > 0 && shown < 300) { print; printed = 1; shown++ }
        if (n > 0 && shown == 300) { print "    ... (the rest is in the log)"; shown++ }
        if ($0 ~ /^\[FAIL\] /) {
            t = substr($0, 8); sub(/: .*/, "", t)
            if (t in open) delete open[t]; else if (!printed) print
        } else if ($0 ~ /^\[(WARN|ERR )\]/ && !printed) print
    }
' "$log" "$log"
[ -n "$synthesis" ] || tail -n 40 "$log"
# Criterion (BoxFort) keeps what its test processes share in a POSIX shared-memory file, which
# glibc creates in /dev/shm: a chroot or container without a writable /dev/shm stops it there
if grep -q 'Could not initialize inheritable arena' "$log"; then
    echo "  tests $label: Criterion could not create its shared memory: /dev/shm must be a folder"
    echo "  every user may write (mode 1777, as on any Debian system; in a chroot, as root:"
    echo "  mount -t tmpfs -o mode=1777 tmpfs /dev/shm)"
fi
[ -n "$synthesis" ] && echo "$synthesis"
echo "  tests $label: every message of the run is in $log"
exit "$rc"
