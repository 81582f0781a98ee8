"""optim_compare.py: replays what tests/tools/optim_dump.c wrote with torch.optim in float64:
the same initial parameters, the same gradient at every step, the same hyperparameters, and
the lr of every step computed here from the schedule's definition (set on the param group
before each step, as a scheduler does). Compares final parameters, optimizer state
(exp_avg, exp_avg_sq, momentum_buffer), the lrs, and torch.nn.utils.clip_grad_norm_ on one
set of gradients. Exit 0 when every difference is under the tolerance."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dumpfile import read  # noqa: E402

TOL = 1e-12
KINDS = {0: "SGD", 1: "Adam", 2: "AdamW"}
SCHEDULES = {0: "constant", 1: "warmup_invsqrt", 2: "warmup_cosine"}


def schedule_lr(kind, base, t, warmup, total, lr_min):
    """lr of step t (from 1): constant; base * min(t/w, sqrt(w/t)) ("Attention Is All You
    Need"); linear warmup then cosine from base down to lr_min at step total."""
    if kind == 0:
        return base
    if kind == 1:
        return base * min(t / warmup, math.sqrt(warmup / t))
    if t <= warmup:
        return base * (t / warmup)
    if t >= total:
        return lr_min
    progress = (t - warmup) / (total - warmup)
    return lr_min + (base - lr_min) * 0.5 * (1 + math.cos(math.pi * progress))


worst = {}


def compare(name, ours, theirs):
    diff = (ours - theirs).abs().max().item()
    worst[name] = diff
    print("  %-52s max |diff| %.3e" % (name, diff))


def main(path):
    d = read(path)
    print("torch", torch.__version__)
    names = [k[len("init."):] for k in d if k.startswith("init.")]
    steps = 1 + max(int(k.split(".")[1]) for k in d if k.startswith("grad."))
    k = 0
    while "case.%d.config" % k in d:
        h = d["case.%d.config" % k].tolist()
        kind, lr, momentum, nesterov, b1, b2, eps, wd = h[:8]
        skind, warmup, total, lr_min = int(h[8]), int(h[9]), int(h[10]), h[11]
        kind = int(kind)
        params = [torch.nn.Parameter(d["init." + n].clone()) for n in names]
        if kind == 0:
            opt = torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=bool(nesterov),
                                  weight_decay=wd, foreach=False)
            desc = "SGD(lr %g, momentum %g, nesterov %d, wd %g)" % (lr, momentum, nesterov, wd)
        else:
            cls = torch.optim.Adam if kind == 1 else torch.optim.AdamW
            opt = cls(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)
            desc = "%s(lr %g, betas (%g, %g), eps %g, wd %g)" % (KINDS[kind], lr, b1, b2, eps, wd)
        if skind:
            desc += " %s(warmup %d%s)" % (SCHEDULES[skind], warmup,
                                          ", total %d, lr_min %g" % (total, lr_min)
                                          if skind == 2 else "")
        print("case %d: %s, %d steps" % (k, desc, steps))
        lrs = []
        for s in range(steps):
            lr_t = schedule_lr(skind, lr, s + 1, warmup, total, lr_min)
            lrs.append(lr_t)
            for g in opt.param_groups:
                g["lr"] = lr_t
            for n, p in zip(names, params):
                p.grad = d["grad.%d.%s" % (s, n)].clone()
            opt.step()
        compare("case %d lr of each step" % k, torch.tensor(lrs, dtype=torch.float64),
                d["case.%d.lrs" % k])
        for n, p in zip(names, params):
            compare("case %d %s" % (k, n), p.detach(), d["case.%d.param.%s" % (k, n)])
            for key, value in opt.state[p].items():
                if key == "step":  # Adam's step count (a tensor), ours is one per optimizer
                    compare("case %d %s step" % (k, n), value.reshape(1).double(),
                            d["case.%d.step" % k])
                    continue
                if value is None:  # SGD without momentum keeps None
                    continue
                ours = "case.%d.state.optim.%s.%s" % (k, n, key)
                if ours not in d:
                    print("  missing state %s" % ours)
                    worst[ours] = float("inf")
                    continue
                compare("case %d %s %s" % (k, n, key), value, d[ours])
        k += 1
    if k == 0:
        print("no cases in the file")
        return 1

    # clip_grad_norm_ on the gradients of step 2
    params = [torch.nn.Parameter(d["init." + n].clone()) for n in names]
    for n, p in zip(names, params):
        p.grad = d["grad.2.%s" % n].clone()
    max_norm = d["clip.max_norm"].item()
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    print("clip_grad_norm_(max_norm %g): norm %.17g (ours %.17g)" %
          (max_norm, norm.item(), d["clip.norm"].item()))
    compare("clip norm", norm.reshape(1), d["clip.norm"])
    for n, p in zip(names, params):
        compare("clip grad %s" % n, p.grad, d["clip.grad.%s" % n])

    m = max(worst.values())
    print("largest difference %.3e (tolerance %.0e)" % (m, TOL))
    return 0 if m < TOL else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
