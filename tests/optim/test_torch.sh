#!/bin/sh
# test_torch.sh: compares attograd's optimizers (SGD with momentum, Nesterov and weight decay;
# Adam; AdamW; lr schedules) and gradient clipping with torch.optim and
# torch.nn.utils.clip_grad_norm_ on the same parameters and gradients (float64).
# Runs where Debian's python3-torch is installed; otherwise says it was skipped and why.
# Every difference goes to LOG; the terminal gets one line, or the whole log on a failure.
# Usage: tests/optim/test_torch.sh PATH/TO/optim_dump LOG (a double build)
set -u
dump="$1"
log="$2"
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "torch optimizer comparison: SKIPPED (python3-torch is not installed; apt-get install python3-torch to run it)"
    exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if { "$dump" "$tmp/optim.bin" && /usr/bin/python3 "$(dirname "$0")/optim_compare.py" \
    "$tmp/optim.bin"; } >"$log" 2>&1; then
    echo "torch optimizer comparison: 1 passed, 0 failed; $(grep '^largest difference' "$log");" \
        "details in $log"
else
    cat "$log"
    echo "torch optimizer comparison: 0 passed, 1 failed (the log: $log)"
    exit 1
fi
