"""make_hf_fixtures.py: tiny random models of the three families attograd loads, written as
transformers writes a Hugging Face folder (config.json, model.safetensors or shards with
model.safetensors.index.json), each with the logits transformers computes for fixed ids, for
tests/hf/test_load.c. Run by hand when a fixture must change, with transformers and torch
(/opt/tl/bin/python, or pip install transformers torch safetensors):

    python3 tests/hf/make_hf_fixtures.py tests/fixtures/hf

Each folder gets expected.safetensors: "ids" (I64, (B, T)) and "logits" (F64, (B, T, vocab)),
computed in float64 by transformers from the float32 weights the folder holds. transformers
computes the rotary angles in float32 whatever the model's dtype (its RotaryEmbedding casts
inv_freq and the positions to float): rope64 gives them in float64, the same formula, so that
the reference is float64 throughout (a 1e-10 comparison needs it; the float32 angles differ by
about 1e-6). Likewise its LlamaRMSNorm normalises in float32: rms64 is the same formula in the
input's dtype.

  gpt2/          GPT2LMHeadModel, GPT-2's own "gelu_new", tied head, keys with "transformer."
  gpt2_gelu/     GPT2LMHeadModel with the exact GELU ("gelu")
  gpt2_bare/     gpt2_gelu's weights, the keys without "transformer." (as GPT2Model saves them)
  llama/         LlamaForCausalLM, grouped-query heads (4 heads, 2 key/value heads),
                 rope_theta 500000, rms_norm_eps 1e-6, untied head, in two shards with an index
  llama_tied/    LlamaForCausalLM with tie_word_embeddings true, one file
  neox/          GPTNeoXForCausalLM (as Pythia): parallel residual, rotary on a quarter of each
                 head (rotary_pct 0.25: 2 of 8 columns), untied embed_out, exact GELU
  neox_sequential/  the same with use_parallel_residual false
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM,
                          LlamaConfig, LlamaForCausalLM)

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/hf"
V, T = 96, 12
IDS = torch.tensor([[5, 17, 3, 88, 42, 42, 7, 0, 95, 31, 64, 12],
                    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]])


def rope64(rotary):
    """rotary's forward with transformers' formula in float64 (default rope_type only)"""
    inv = rotary.inv_freq.double()
    cfg = rotary.config
    rp = getattr(cfg, "rope_parameters", None) or {}
    base = rp.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    dim = inv.numel() * 2
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))

    def forward(x, position_ids):
        freqs = position_ids[:, :, None].double() * inv[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    rotary.forward = forward


def rms64(norm):
    """norm's forward with transformers' formula in the input's dtype"""
    def forward(x):
        var = x.pow(2).mean(-1, keepdim=True)
        return norm.weight * (x * torch.rsqrt(var + norm.variance_epsilon))
    norm.forward = forward


def float64_model(cls, d):
    """the model of folder d in float64, its rotary angles in float64 too"""
    m = cls.from_pretrained(d, dtype=torch.float64).eval()
    for mod in m.modules():
        if hasattr(mod, "inv_freq") and "Rotary" in type(mod).__name__:
            rope64(mod)
        if hasattr(mod, "variance_epsilon") and "RMSNorm" in type(mod).__name__:
            rms64(mod)
    return m


def write(name, model, **save):
    torch.manual_seed(1234)
    with torch.no_grad():  # weights far from the initialisation's near-zero scale
        for n, p in model.named_parameters():
            if n.endswith("weight") and p.ndim == 1:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    model.float().save_pretrained(d, **save)
    m64 = float64_model(type(model), d)
    with torch.no_grad():
        logits = m64(IDS).logits
    save_file({"ids": IDS.to(torch.int64).contiguous(), "logits": logits.contiguous()},
              os.path.join(d, "expected.safetensors"), metadata={"format": "pt"})
    return d


torch.manual_seed(0)
g = GPT2Config(vocab_size=V, n_positions=32, n_embd=16, n_layer=2, n_head=4, bos_token_id=95,
               eos_token_id=95)
write("gpt2", GPT2LMHeadModel(g))
g.activation_function = "gelu"
d = write("gpt2_gelu", GPT2LMHeadModel(g))
bare = os.path.join(out, "gpt2_bare")
os.makedirs(bare, exist_ok=True)
sd = load_file(os.path.join(d, "model.safetensors"))
save_file({k.removeprefix("transformer."): v for k, v in sd.items()},
          os.path.join(bare, "model.safetensors"), metadata={"format": "pt"})
for f in ("config.json", "expected.safetensors"):
    with open(os.path.join(d, f), "rb") as a, open(os.path.join(bare, f), "wb") as b:
        b.write(a.read())

lc = dict(vocab_size=V, hidden_size=16, intermediate_size=40, num_hidden_layers=2,
          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
          rope_theta=500000.0, rms_norm_eps=1e-6)
write("llama", LlamaForCausalLM(LlamaConfig(**lc, tie_word_embeddings=False)),
      max_shard_size="20KB")
write("llama_tied", LlamaForCausalLM(LlamaConfig(**lc, tie_word_embeddings=True)))

nc = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
          num_attention_heads=4, max_position_embeddings=32, rotary_pct=0.25,
          rotary_emb_base=10000, tie_word_embeddings=False)
write("neox", GPTNeoXForCausalLM(GPTNeoXConfig(**nc, use_parallel_residual=True)))
write("neox_sequential", GPTNeoXForCausalLM(GPTNeoXConfig(**nc, use_parallel_residual=False)))
print("wrote", out)
