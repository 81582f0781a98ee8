"""safetensors_fixtures.py: writes the safetensors files tests/io/test_safetensors.c reads, with the
reference library itself (safetensors.torch.save_file; torch for BF16, which numpy lacks).
Run by hand when a fixture must change (pip install safetensors; python3-torch from Debian):

    /usr/bin/python3 tests/io/safetensors_fixtures.py tests/fixtures/safetensors

The files (a few KB together):
  reference.safetensors   tensors whose values the test computes again: element i of
                          "thirds" is float32(sign * (i + 1) / 3), stored as F32, F64, F16 or
                          BF16 (rounded by torch from the float32 value); st_write must write the
                          same bytes for the same tensors
  specials.safetensors    the edge values of each float type (zeros of both signs, the largest
                          finite value, the smallest subnormal, infinities, NaN) and integer
                          buffers as models hold them (I64 position ids, U8, BOOL)
  sharded/                two shards and model.safetensors.index.json as transformers'
                          save_pretrained writes it (json.dumps(indent=2, sort_keys=True) + "\\n")
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/safetensors"


def thirds(shape, sign=1.0, dtype=torch.float32):
    n = 1
    for d in shape:
        n *= d
    v = torch.tensor([sign * (i + 1) / 3.0 for i in range(n)], dtype=torch.float64)
    return v.to(torch.float32).to(dtype).reshape(shape)


PT = {"format": "pt"}

reference = {
    "wte.weight": thirds((4, 3)),
    "h.0.attn.c_attn.weight": thirds((3, 6), -1.0, torch.float64),
    "h.0.ln_1.bias": thirds((5,), 1.0, torch.float16),
    "h.0.ln_1.weight": thirds((5,), -1.0, torch.bfloat16),
    "na\u00efve": thirds(()),
    "empty": thirds((0, 3)),
    "B.upper": thirds((2,), -1.0),
    "h.0.mlp.c_fc.weight": thirds((2, 2, 3), 1.0, torch.float16),
}
save_file(reference, os.path.join(out, "reference.safetensors"), metadata=PT)

inf, nan = float("inf"), float("nan")
specials = {
    "f16": torch.tensor([0.0, -0.0, 1.0, -2.0, 65504.0, -65504.0, 2.0**-24, -(2.0**-14), inf, -inf, nan],
                        dtype=torch.float16),
    "bf16": torch.tensor([0.0, -0.0, 1.0, -2.0, 3.3895313892515355e38, -3.3895313892515355e38,
                          2.0**-133, -(2.0**-126), inf, -inf, nan], dtype=torch.bfloat16),
    "f32": torch.tensor([0.0, -0.0, 1.0, -2.0, 3.4028234663852886e38, -3.4028234663852886e38,
                         2.0**-149, -(2.0**-126), inf, -inf, nan], dtype=torch.float32),
    "f64": torch.tensor([0.0, -0.0, 1.0, -2.0, 1.7976931348623157e308, -1.7976931348623157e308,
                         2.0**-1074, -(2.0**-1022), inf, -inf, nan], dtype=torch.float64),
    "position_ids": torch.arange(5, dtype=torch.int64).reshape(1, 5),
    "mask": torch.tensor([0, 1, 255], dtype=torch.uint8),
    "flags": torch.tensor([True, False, True]),
    "i32": torch.tensor([-(2**31), -1, 0, 2**31 - 1], dtype=torch.int32),
}
save_file(specials, os.path.join(out, "specials.safetensors"), metadata=PT)

shards = [
    {"transformer.h.0.attn.c_attn.weight": thirds((2, 6)), "transformer.wte.weight": thirds((3, 2), -1.0)},
    {"transformer.h.0.attn.c_attn.bias": thirds((6,), 1.0, torch.float16), "lm_head.weight": thirds((3, 2))},
]
sdir = os.path.join(out, "sharded")
os.makedirs(sdir, exist_ok=True)
weight_map, total = {}, 0
for k, shard in enumerate(shards):
    name = "model-%05d-of-%05d.safetensors" % (k + 1, len(shards))
    save_file(shard, os.path.join(sdir, name), metadata=PT)
    for key, t in shard.items():
        weight_map[key] = name
        total += t.numel() * t.element_size()
index = {"metadata": {"total_size": total}, "weight_map": weight_map}
with open(os.path.join(sdir, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
    f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
print("wrote", out)
