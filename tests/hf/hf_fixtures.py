"""hf_fixtures.py: writes the config.json files tests/hf/test_config.c reads, with transformers
itself (GPT2Config.save_pretrained). Run by hand when a fixture must change, in an environment
with transformers (pip install transformers; torch is not needed for configurations):

    python3 tests/hf/hf_fixtures.py tests/fixtures/hf

  tiny_gelu/     a 2-layer GPT-2 (vocabulary 96, context 32, width 16, 4 heads) with the exact
                 GELU ("gelu"), which attograd reads
  gpt2_default/  GPT2Config's defaults (GPT-2 small, "gelu_new"), which attograd reads
"""
import os
import sys

from transformers import GPT2Config

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/hf"
GPT2Config(vocab_size=96, n_positions=32, n_embd=16, n_layer=2, n_head=4,
           activation_function="gelu", architectures=["GPT2LMHeadModel"], bos_token_id=95,
           eos_token_id=95).save_pretrained(os.path.join(out, "tiny_gelu"))
GPT2Config(architectures=["GPT2LMHeadModel"]).save_pretrained(os.path.join(out, "gpt2_default"))
print("wrote", out)
