"""dumpfile.py: reads the binary files that tests/tools/torch_dump.c, optim_dump.c and ops_dump.c
write (through dumpfile.h), for the PyTorch comparisons (tests/nn/torch_compare.py,
tests/optim/optim_compare.py, tests/autograd/torch_ops.py).
A file is a run of records: u32 name length, the name, u32 ndim, ndim u32 dims, then the
float64 values in row-major order (all little-endian). Read next: tests/tools/torch_dump.c."""
import struct

import torch


def read(path):
    """{name: float64 tensor} for every record of the file at path."""
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos); pos += 4
        name = data[pos:pos + n].decode(); pos += n
        (nd,) = struct.unpack_from("<I", data, pos); pos += 4
        shape = struct.unpack_from("<%dI" % nd, data, pos); pos += 4 * nd
        count = 1
        for d in shape:
            count *= d
        vals = struct.unpack_from("<%dd" % count, data, pos); pos += 8 * count
        out[name] = torch.tensor(vals, dtype=torch.float64).reshape(shape)
    return out
