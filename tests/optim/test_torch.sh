#!/bin/sh
# test_torch.sh: compares attograd's optimizers (SGD with momentum, Nesterov and weight decay;
# Adam; AdamW; lr schedules) and gradient clipping with torch.optim and
# torch.nn.utils.clip_grad_norm_ on the same parameters and gradients (float64).
# Usage: tests/optim/test_torch.sh PATH/TO/optim_dump LOG (a double build)
set -u
here=$(dirname "$0")
exec "$here/../support/torch_run.sh" "torch optimizer comparison" "$1" "$here/optim_compare.py" \
    "$2"
