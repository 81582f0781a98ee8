"""torch_ops.py: recomputes in PyTorch float64 the LLaMA-block ops that tests/tools/ops_dump.c ran
in attograd (rmsnorm, rope, silu, SwiGLU as silu(a) * b, GPT-2's gelu_tanh) from the same inputs, and compares
outputs and gradients (PyTorch's autograd on the references below). PyTorch 1.13 has no RMSNorm
or RoPE module, so both are written here as Meta's llama model.py defines them: RMSNorm as
x * rsqrt(mean(x^2) + eps) * weight, and RoPE in its complex-number form (precompute_freqs_cis,
then apply_rotary_emb: each pair (2i, 2i+1) of a head read as a complex number and multiplied
by e^(i pos theta_i), theta_i = base^(-2i/HS)). Exit 0 when every difference is under TOL."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dumpfile import read  # noqa: E402

TOL = 1e-10

worst = {}


def compare(name, ours, theirs):
    assert ours.shape == theirs.shape, "%s: shapes %s vs %s" % (name, ours.shape, theirs.shape)
    diff = (ours - theirs).abs().max().item()
    worst[name] = diff
    print("  %-36s max |diff| %.3e" % (name, diff))


def leaf(t):
    return t.clone().requires_grad_()


def rmsnorm(x, weight, eps):
    """llama/model.py RMSNorm.forward"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def precompute_freqs_cis(dim, end, theta):
    """llama/model.py, in float64: e^(i t theta_i) for t < end and pair i < dim / 2"""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64)[: (dim // 2)] / dim))
    t = torch.arange(end, dtype=torch.float64)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(x, freqs_cis):
    """llama/model.py for one tensor: x (B, T, NH, HS), freqs_cis (T, HS / 2)"""
    x_ = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == x_.ndim - 1 else 1 for i, d in enumerate(x_.shape)]
    return torch.view_as_real(x_ * freqs_cis.view(*shape)).flatten(3)


def rope(x, hs, pos0, base):
    """x (B, T, n) with heads of hs side by side, row t at position pos0 + t"""
    B, T, n = x.shape
    freqs = precompute_freqs_cis(hs, pos0 + T, base)[pos0:pos0 + T]
    return apply_rotary_emb(x.reshape(B, T, n // hs, hs), freqs).reshape(B, T, n)


def check_rmsnorm(d, p):
    x, w = leaf(d[p + ".x"]), leaf(d[p + ".w"])
    y = rmsnorm(x, w, d[p + ".eps"][0].item())
    (y * d[p + ".R"]).sum().backward()
    print("%s %s:" % (p, tuple(x.shape)))
    compare(p + " output", y.detach(), d[p + ".y"])
    compare(p + " grad x", x.grad, d[p + ".gx"])
    compare(p + " grad weight", w.grad, d[p + ".gw"])


def check_rope(d, p):
    hs, pos0, base, col, n = d[p + ".config"].tolist()
    hs, pos0, col, n = int(hs), int(pos0), int(col), int(n)
    x = leaf(d[p + ".x"])
    y = rope(x[:, :, col:col + n], hs, pos0, base)
    (y * d[p + ".R"]).sum().backward()
    print("%s %s, head size %d, pos0 %d, base %g, columns [%d, %d):"
          % (p, tuple(x.shape), hs, pos0, base, col, col + n))
    compare(p + " output", y.detach(), d[p + ".y"])
    compare(p + " grad x", x.grad, d[p + ".gx"])


def check_rope_qkv(d, p):
    hs, pos0, base, nh, nkv = d[p + ".config"].tolist()
    hs, pos0, nh, nkv = int(hs), int(pos0), int(nh), int(nkv)
    x = leaf(d[p + ".x"])
    xq, xk, _ = torch.split(x, [nh * hs, nkv * hs, nkv * hs], dim=-1)
    q, k = rope(xq, hs, pos0, base), rope(xk, hs, pos0, base)
    ((q * d[p + ".Rq"]).sum() + (k * d[p + ".Rk"]).sum()).backward()
    print("%s: query and key blocks of a fused projection %s, pos0 %d:" % (p, tuple(x.shape), pos0))
    compare(p + " query", q.detach(), d[p + ".yq"])
    compare(p + " key", k.detach(), d[p + ".yk"])
    compare(p + " grad projection", x.grad, d[p + ".gx"])
    assert x.grad[:, :, (nh + nkv) * hs:].abs().max().item() == 0


def main(path):
    d = read(path)
    print("torch", torch.__version__)
    check_rmsnorm(d, "rmsnorm")
    check_rmsnorm(d, "rmsnorm_wide")
    for p in ("rope", "rope_pos0", "rope_step", "rope_block"):
        check_rope(d, p)
    check_rope_qkv(d, "rope_qkv")

    x = leaf(d["silu.x"])
    y = torch.nn.functional.silu(x)
    (y * d["silu.R"]).sum().backward()
    print("silu (torch.nn.functional.silu):")
    compare("silu output", y.detach(), d["silu.y"])
    compare("silu grad x", x.grad, d["silu.gx"])

    x = leaf(d["gelu_tanh.x"])
    y = torch.nn.functional.gelu(x, approximate="tanh")
    (y * d["gelu_tanh.R"]).sum().backward()
    print("gelu_tanh (torch.nn.functional.gelu(approximate='tanh'), GPT-2's gelu_new):")
    compare("gelu_tanh output", y.detach(), d["gelu_tanh.y"])
    compare("gelu_tanh grad x", x.grad, d["gelu_tanh.gx"])

    a, b = leaf(d["swiglu.a"]), leaf(d["swiglu.b"])
    y = torch.nn.functional.silu(a) * b
    (y * d["swiglu.R"]).sum().backward()
    print("SwiGLU gate silu(a) * b (llama FeedForward: w2(silu(w1 x) * w3 x)):")
    compare("swiglu output", y.detach(), d["swiglu.y"])
    compare("swiglu grad a", a.grad, d["swiglu.ga"])
    compare("swiglu grad b", b.grad, d["swiglu.gb"])

    m = max(worst.values())
    print("largest difference %.3e (tolerance %.0e)" % (m, TOL))
    return 0 if m < TOL else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
