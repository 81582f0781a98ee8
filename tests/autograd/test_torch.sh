#!/bin/sh
# test_torch.sh: compares the ops of a LLaMA-style block (rmsnorm, rope, silu, SwiGLU as
# silu(a) * b) with references written in PyTorch (float64: outputs and every gradient;
# tests/autograd/torch_ops.py has the references, as Meta's llama model.py defines them).
# Usage: tests/autograd/test_torch.sh PATH/TO/ops_dump LOG (a double build)
set -u
here=$(dirname "$0")
exec "$here/../support/torch_run.sh" "torch op comparison" "$1" "$here/torch_ops.py" "$2"
