#!/bin/sh
# test_numpy.sh: .npz files between attograd and numpy, both ways (tests/io/numpy_interop.py):
# numpy.load opens what npz_write writes, npz_read opens what np.savez and np.savez_compressed
# write; values compared exactly. Runs where Debian's python3-numpy is installed for
# /usr/bin/python3; otherwise says it was skipped and why.
# Usage: tests/io/test_numpy.sh PATH/TO/npz_tool float|double (the build of npz_tool)
set -u
tool="$1"
real="$2"
if ! why="$("$(dirname "$0")/../support/python_module.sh" numpy python3-numpy)"; then
    echo "numpy interop ($real build): SKIPPED ($why)"
    exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
out="$tmp/log"
if /usr/bin/python3 "$(dirname "$0")/numpy_interop.py" "$tool" "$real" "$tmp" >"$out" 2>&1; then
    tail -n 1 "$out"
else
    grep -v '^ok ' "$out"
    exit 1
fi
