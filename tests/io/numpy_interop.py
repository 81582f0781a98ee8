"""numpy_interop.py: .npz files between attograd and numpy, both ways, values compared exactly.

Usage: numpy_interop.py NPZ_TOOL REAL TMPDIR   (REAL: float or double, the build of NPZ_TOOL)

1. attograd writes (tests/tools/npz_tool.c, levels 0 and 6, with and without forced ZIP64
   records); numpy.load must open it, and zipfile's own CRC check (testzip) must pass; every
   array must have the dtype, shape and values npz_tool wrote.
2. numpy writes with np.savez (stored) and np.savez_compressed (deflated), as numpy's writer
   does it (ZIP64 extra fields in the local headers); also with ZIP64 fields everywhere
   (zipfile's limits set to 0) and through an unseekable stream (data descriptors); attograd's
   reader must return the same arrays (npz_tool dump).
Prints one line per check and exits 1 if any failed.
"""
import io
import os
import subprocess
import sys
import zipfile

import numpy as np
from interop import Checks

tool, real, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
RT = np.float32 if real == "float" else np.float64
check = Checks("numpy interop", real)


def thirds(shape, sign=1.0, dtype=RT):
    n = int(np.prod(shape, dtype=np.int64))
    v = np.array([sign * (i + 1) / 3.0 for i in range(n)], dtype=np.float64)
    return v.astype(RT).astype(dtype).reshape(shape)


def expected_from_tool():
    v = thirds((7,))
    return {
        "real_2x3": thirds((2, 3)),
        "real_scalar": thirds((), -1.0),
        "real_4d": thirds((2, 3, 4, 5)),
        "f32_from_real": v.astype(np.float32),
        "f64_from_real": v.astype(np.float64),
        "encoder.layers.0.self_attn.in_proj_weight": thirds((6, 4), -1.0),
        "train.step": np.array([-2**63, -1, 0, 42, 2**63 - 1], dtype=np.int64),
        "rng.state": np.array([0, 1, 0x0123456789abcdef, 2**64 - 1], dtype=np.uint64),
        "i32": np.array([-2**31, -7, 0, 7, 1000000, 2**31 - 1], dtype=np.int32).reshape(3, 2),
        "meta.config": np.frombuffer('{"vocab": ["héllo", "wörld"]}'.encode(), dtype=np.uint8),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "naïve": np.array(1.0, dtype=np.float64),
    }


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


# ---- 1. attograd writes, numpy reads ----
for level in (0, 6):
    for zip64 in (False, True):
        path = os.path.join(tmp, f"attograd_{level}{'_zip64' if zip64 else ''}.npz")
        args = [tool, "write", path, str(level)] + (["zip64"] if zip64 else [])
        subprocess.run(args, check=True, stderr=subprocess.DEVNULL)
        label = f"attograd -> numpy, level {level}{', ZIP64' if zip64 else ''}"
        with zipfile.ZipFile(path) as z:
            check(z.testzip() is None, f"{label}: zipfile CRC check")
            methods = {i.compress_type for i in z.infolist()}
            check(methods == {zipfile.ZIP_DEFLATED if level else zipfile.ZIP_STORED},
                  f"{label}: compression method {methods}")
        exp = expected_from_tool()
        with np.load(path) as d:
            check(sorted(d.files) == sorted(exp), f"{label}: names {sorted(d.files)}")
            for k, a in exp.items():
                got = d[k] if k in d.files else None
                check(got is not None and same(got, a),
                      f"{label}: '{k}' {a.dtype} {a.shape}"
                      + ("" if got is None else f" (got {got.dtype} {got.shape})"))


# ---- 2. numpy writes, attograd reads ----
def parse_dump(text):
    out = {}
    for line in text.splitlines():
        name, descr, shape, values = line.split("\t")
        dims = tuple(int(s) for s in shape.strip("()").split(",") if s)
        dt = np.dtype(descr)
        vals = values.split()
        if dt.kind == "f":
            a = np.array([float(s) for s in vals], dtype=np.float64).astype(dt)
        else:
            a = np.array([int(s) for s in vals], dtype=dt)
        out[name] = a.reshape(dims)
    return out


rng = np.random.default_rng(7)
arrays = {
    "f32": rng.standard_normal((3, 5)).astype(np.float32),
    "f64": rng.standard_normal((4, 2, 3)),
    "f64_4d": rng.standard_normal((2, 3, 2, 2)),
    "i64": np.array([-2**63, -5, 0, 9, 2**63 - 1], dtype=np.int64),
    "u64": np.array([2**64 - 1, 0, 12345], dtype=np.uint64),
    "i32": np.arange(-6, 6, dtype=np.int32).reshape(3, 4),
    "u8": np.frombuffer(b"vocab\x00\xff text", dtype=np.uint8),
    "scalar": np.float64(np.pi),
    "scalar_i64": np.int64(123456789012),
    "empty": np.zeros((2, 0), dtype=np.float64),
    "decoder.layers.1.multihead_attn.out_proj.weight": rng.standard_normal((8, 8)).astype(np.float32),
    "f32_big": rng.standard_normal((300, 200)).astype(np.float32),
}


class Unseekable(io.RawIOBase):
    """A write-only stream zipfile cannot seek in: it then writes data descriptors."""

    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def seekable(self):
        return False

    def write(self, b):
        return self.f.write(b)


def numpy_writers():
    yield "np.savez", lambda p: np.savez(p, **arrays)
    yield "np.savez_compressed", lambda p: np.savez_compressed(p, **arrays)

    def forced(p, fn=np.savez_compressed):
        limits = zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT
        zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = 0, 0
        try:
            fn(p, **arrays)
        finally:
            zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = limits

    yield "np.savez_compressed, ZIP64 everywhere", forced
    yield "np.savez, ZIP64 everywhere", lambda p: forced(p, np.savez)

    def unseekable(p):
        with open(p, "wb") as f:
            np.savez_compressed(Unseekable(f), **arrays)

    yield "np.savez_compressed to an unseekable stream", unseekable


for label, write in numpy_writers():
    path = os.path.join(tmp, "numpy.npz")
    write(path)
    if "ZIP64 everywhere" in label:
        with open(path, "rb") as f:
            check(b"PK\x06\x06" in f.read(), f"numpy -> attograd, {label}: has a ZIP64 end record")
    if "unseekable" in label:
        with zipfile.ZipFile(path) as z:
            check(all(i.flag_bits & 8 for i in z.infolist()),
                  f"numpy -> attograd, {label}: entries have data descriptors")
    r = subprocess.run([tool, "dump", path], capture_output=True, text=True)
    check(r.returncode == 0, f"numpy -> attograd, {label}: read ({r.stderr.strip()})")
    if r.returncode != 0:
        continue
    got = parse_dump(r.stdout)
    check(sorted(got) == sorted(arrays), f"numpy -> attograd, {label}: names")
    for k, a in arrays.items():
        a = np.asarray(a)
        check(k in got and same(got[k], a), f"numpy -> attograd, {label}: '{k}' {a.dtype} {a.shape}")

check.finish()
