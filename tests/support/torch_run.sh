#!/bin/sh
# torch_run.sh: runs one PyTorch comparison: a dump tool writes attograd's numbers to a file,
# a python script recomputes them with PyTorch and prints "largest difference ..." (exit 0 when
# every difference is under its tolerance). Where Debian's python3-torch is not installed it
# says the comparison was skipped and why. Everything goes to LOG; the terminal gets one line,
# or the whole log on a failure.
# Usage: tests/support/torch_run.sh WHAT DUMP_TOOL SCRIPT.py LOG
# (tests/optim/test_torch.sh and tests/autograd/test_torch.sh call it)
set -u
what="$1"
dump="$2"
script="$3"
log="$4"
if ! why="$("$(dirname "$0")/python_module.sh" torch python3-torch)"; then
    echo "$what: SKIPPED ($why)"
    exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if { "$dump" "$tmp/dump.bin" && /usr/bin/python3 "$script" "$tmp/dump.bin"; } >"$log" 2>&1; then
    echo "$what: 1 passed, 0 failed; $(grep '^largest difference' "$log"); details in $log"
else
    cat "$log"
    echo "$what: 0 passed, 1 failed (the log: $log)"
    exit 1
fi
