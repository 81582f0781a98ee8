#!/bin/sh
# test_torch.sh: compares attograd's MultiHeadAttention, a 1+1-layer transformer and the causal
# encoder layer (the GPT block, post- and pre-LN) with PyTorch's on the same weights and inputs
# (float64: outputs, probabilities, every gradient).
# Runs where Debian's python3-torch is installed; otherwise says it was skipped and why.
# Then a PyTorch state_dict saved with numpy is loaded into attograd (tools/torch_load.c).
# Every difference goes to LOG; the terminal gets one line, or the whole log on a failure.
# Usage: tests/nn/test_torch.sh PATH/TO/torch_dump LOG (a double build; torch_load beside it)
set -u
dump="$1"
log="$2"
if ! why="$("$(dirname "$0")/../support/python_module.sh" torch python3-torch)"; then
    echo "torch comparison: SKIPPED ($why)"
    exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if (
    ok=1
    "$dump" "$tmp/attograd.bin" || { echo "$dump failed"; exit 1; }
    /usr/bin/python3 "$(dirname "$0")/torch_compare.py" "$tmp/attograd.bin" || ok=0
    # a PyTorch model's state_dict saved with numpy loads into attograd and gives the same logits
    load="$(dirname "$dump")/torch_load"
    if /usr/bin/python3 "$(dirname "$0")/torch_state_dict.py" "$tmp" && "$load" "$tmp"; then
        :
    else
        ok=0
    fi
    exit $((1 - ok))
) >"$log" 2>&1; then
    echo "torch comparison: 1 passed, 0 failed; $(grep '^largest difference' "$log"); details in $log"
else
    cat "$log"
    echo "torch comparison: 0 passed, 1 failed (the log: $log)"
    exit 1
fi
