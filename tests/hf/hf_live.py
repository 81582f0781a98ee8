"""hf_live.py DIR: the logits transformers computes for the folder DIR (written by attograd's
hf_save), in float64 (rotary angles and RMSNorm too, as make_hf_fixtures.py computes them),
for fixed ids, written to DIR/expected.safetensors ("ids" I64, "logits" F64). Run by
tests/hf/test_load.c where AG_HF_PYTHON names a python with transformers and torch."""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

d = sys.argv[1]
m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64).eval()
for mod in m.modules():
    name = type(mod).__name__
    if hasattr(mod, "inv_freq") and "Rotary" in name:
        base = mod.config.rope_parameters["rope_theta"]
        dim = mod.inv_freq.numel() * 2
        inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))

        def rope(x, position_ids, inv=inv):
            f = position_ids[:, :, None].double() * inv[None, None, :]
            e = torch.cat((f, f), dim=-1)
            return e.cos().to(x.dtype), e.sin().to(x.dtype)
        mod.forward = rope
    if hasattr(mod, "variance_epsilon") and "RMSNorm" in name:
        def rms(x, mod=mod):
            return mod.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + mod.variance_epsilon))
        mod.forward = rms
V = m.config.vocab_size
ids = torch.tensor([[(7 * i + 3) % V for i in range(8)], [(5 * i + 1) % V for i in range(8)]])
with torch.no_grad():
    logits = m(ids).logits
save_file({"ids": ids.to(torch.int64).contiguous(), "logits": logits.contiguous()},
          os.path.join(d, "expected.safetensors"), metadata={"format": "pt"})
