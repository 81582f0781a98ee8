"""safetensors_interop.py: safetensors files between attograd and the reference library (the
`safetensors` package from PyPI), both ways, values compared bit for bit.

Usage: safetensors_interop.py ST_TOOL REAL TMPDIR   (REAL: float or double, the build of ST_TOOL)

1. attograd writes (tests/tools/st_tool.c); safetensors.numpy.load_file must load it with the
   dtypes, shapes and values st_tool wrote, and safe_open must show its metadata, "format": "pt"
   first; where torch is installed, safetensors.torch.load_file loads the BF16 variant.
2. safetensors.numpy.save_file writes random tensors of every dtype numpy has, with metadata;
   st_tool dump must print the same values.
3. the same split into two shards with an index as transformers writes it: st_tool dump of the
   folder prints every tensor.
4. hostile files the reference refuses (overlapping offsets, a gap, a huge header length, a
   wrong byte count, a truncated file): attograd refuses each too (exit 2, the path named).
Prints one line per check and exits 1 if any failed.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
from interop import Checks

tool, real, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
check = Checks("safetensors interop", real)


def thirds(shape, sign=1.0, dtype=np.float32):
    n = int(np.prod(shape, dtype=np.int64))
    v = np.array([sign * (i + 1) / 3.0 for i in range(n)], dtype=np.float64)
    return v.astype(np.float32).astype(dtype).reshape(shape)


def bits_equal(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return a.tobytes() == b.tobytes()


specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-40], dtype=np.float32)
expected = {
    "transformer.wte.weight": thirds((5, 4)),
    "transformer.h.0.attn.c_attn.weight": thirds((4, 12), -1.0, np.float64),
    "transformer.h.0.ln_1.weight": thirds((4,), 1.0, np.float16),
    "scalar": thirds((), -1.0),
    "specials.f32": specials,
    "specials.f16": specials.astype(np.float16),
    "position_ids": np.arange(6, dtype=np.int64).reshape(1, 6),
    "empty": np.zeros((0, 3), dtype=np.float32),
}

# 1. attograd writes, the reference reads
path = os.path.join(tmp, "ours.safetensors")
r = subprocess.run([tool, "write", path], capture_output=True, text=True)
check(r.returncode == 0, "st_tool write: " + r.stderr.strip())
got = load_file(path)
check(sorted(got) == sorted(expected), "load_file: the names %s" % sorted(got))
for name, want in expected.items():
    check(name in got and bits_equal(got[name], want),
          "load_file: %s %s %s" % (name, want.dtype, want.shape))
with safe_open(path, "np") as f:
    meta = f.metadata()
check(meta == {"format": "pt", "source": "attograd st_tool"}, "safe_open: metadata %s" % meta)
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
check(n % 8 == 0 and raw[8:8 + n].decode().startswith('{"__metadata__":{"format":"pt"'),
      "header padded to 8 bytes, __metadata__ first with format pt")
try:
    import torch
    from safetensors.torch import load_file as load_torch
except ImportError:
    torch = None
if torch is None:
    print("skip  BF16 through safetensors.torch: torch is not installed")
else:
    path16 = os.path.join(tmp, "ours_bf16.safetensors")
    r = subprocess.run([tool, "write", path16, "bf16"], capture_output=True, text=True)
    got = load_torch(path16)
    want = torch.from_numpy(thirds((2, 3, 4))).to(torch.bfloat16)
    t = got.get("transformer.h.0.mlp.c_fc.weight")
    check(t is not None and t.dtype == torch.bfloat16 and torch.equal(t.view(torch.int16),
                                                                      want.view(torch.int16)),
          "safetensors.torch.load_file: BF16 rounded as torch rounds")


# 2. the reference writes, attograd reads
def dump(p):
    r = subprocess.run([tool, "dump", p], capture_output=True, text=True)
    rows, meta = {}, {}
    for line in r.stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == "#meta":
            meta[parts[1]] = parts[2]
        else:
            rows[parts[0]] = (parts[1], parts[2], parts[3])
    return r.returncode, rows, meta, r.stderr


DT = {np.float16: "F16", np.float32: "F32", np.float64: "F64", np.int8: "I8", np.uint8: "U8",
      np.int16: "I16", np.uint16: "U16", np.int32: "I32", np.uint32: "U32", np.int64: "I64",
      np.uint64: "U64", np.bool_: "BOOL"}
rng = np.random.default_rng(3)
theirs = {}
for k, (t, name) in enumerate(DT.items()):
    shape = [(3, 4), (5,), (2, 1, 3), ()][k % 4]
    if np.issubdtype(t, np.floating):
        v = (rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 4, shape)).astype(t)
    elif t is np.bool_:
        v = rng.integers(0, 2, shape).astype(t)
    else:
        info = np.iinfo(t)
        v = rng.integers(max(info.min, -2**52), min(info.max, 2**52), shape, dtype=t)
    theirs["layer.%d.%s" % (k, name.lower())] = np.asarray(v)
theirs["nan_inf"] = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32)
path = os.path.join(tmp, "theirs.safetensors")
save_file(theirs, path, metadata={"format": "pt", "note": "written by save_file"})
code, rows, meta, err = dump(path)
check(code == 0, "st_tool dump of save_file's file " + err.strip())
check(meta == {"format": "pt", "note": "written by save_file"}, "metadata read: %s" % meta)


def same_values(arr, text):
    vals = [float(x) for x in text.split()] if text else []
    flat = arr.astype(np.float64).ravel()
    return len(vals) == flat.size and all(
        (np.isnan(a) and np.isnan(b)) or (a == b and np.signbit(a) == np.signbit(b))
        for a, b in zip(flat, vals))


for name, arr in theirs.items():
    row = rows.get(name)
    want_shape = "[" + ",".join(str(d) for d in arr.shape) + "]"
    check(row is not None and row[0] == DT[arr.dtype.type] and row[1] == want_shape
          and same_values(arr, row[2]), "dump: %s %s %s" % (name, arr.dtype, want_shape))

# 3. two shards and an index, as transformers writes them
sdir = os.path.join(tmp, "sharded")
os.makedirs(sdir)
names = sorted(theirs)
parts = [names[: len(names) // 2], names[len(names) // 2:]]
wm = {}
for k, part in enumerate(parts):
    fn = "model-%05d-of-%05d.safetensors" % (k + 1, len(parts))
    save_file({n: theirs[n] for n in part}, os.path.join(sdir, fn), metadata={"format": "pt"})
    wm.update({n: fn for n in part})
total = sum(theirs[n].nbytes for n in names)
with open(os.path.join(sdir, "model.safetensors.index.json"), "w") as f:
    f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": wm}, indent=2,
                       sort_keys=True) + "\n")
code, rows, meta, err = dump(sdir)
check(code == 0 and sorted(rows) == names and all(
    same_values(theirs[n], rows[n][2]) for n in names), "dump of a sharded folder " + err.strip())


# 4. hostile files: the reference refuses them, attograd too
def hostile(name, header, data, length=None):
    h = header.encode()
    p = os.path.join(tmp, name + ".safetensors")
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(h) if length is None else length) + h + data)
    try:
        with safe_open(p, "np") as f:
            ref = "loads"
    except Exception as e:  # the reference's error
        ref = "refuses (%s)" % str(e).split("\n")[0][:60]
    code, _, _, err = dump(p)
    check(ref != "loads" and code == 2 and err.startswith("st_tool: " + p),
          "%s: the reference %s, attograd: %s" % (name, ref, err.strip()[len(p) + 11:]))


T = '"%s":{"dtype":"F32","shape":[2],"data_offsets":[%d,%d]}'
hostile("overlap", "{" + T % ("a", 0, 8) + "," + T % ("b", 4, 12) + "}", bytes(12))
hostile("gap", "{" + T % ("a", 0, 8) + "," + T % ("b", 12, 20) + "}", bytes(20))
hostile("huge_header", "{}", b"", 2**63)
hostile("wrong_size", "{" + T % ("a", 0, 6) + "}", bytes(6))
hostile("truncated", "{" + T % ("a", 0, 8) + "}", bytes(5))
hostile("stray_bytes", "{" + T % ("a", 0, 8) + "}", bytes(9))

check.finish()
