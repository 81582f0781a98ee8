#!/bin/sh
# test_numpy.sh: files between attograd and Python's own readers and writers, both ways:
#  - .npz with numpy (tests/io/numpy_interop.py): numpy.load opens what npz_write writes,
#    npz_read opens what np.savez and np.savez_compressed write;
#  - safetensors with the reference library (tests/io/safetensors_interop.py, when ST_TOOL is
#    given): safetensors.numpy.load_file loads what st_write writes, st_open reads what
#    save_file writes (one file, and shards with an index), hostile files are refused by both.
# Values compared exactly. Each part runs where /usr/bin/python3 has what it needs (Debian's
# python3-numpy; the safetensors package from PyPI); otherwise it says it was skipped and why.
# (The committed safetensors fixtures are checked by the Criterion suite everywhere.)
# Usage: tests/io/test_numpy.sh PATH/TO/npz_tool float|double [PATH/TO/st_tool]
set -u
tool="$1"
real="$2"
st_tool="${3:-}"
here="$(dirname "$0")"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0

# run_part NAME IMPORTS INSTALL SCRIPT ARGS...: SCRIPT's last line, or its failures
run_part() {
    name="$1" imports="$2" install="$3"
    shift 3
    if [ ! -x /usr/bin/python3 ]; then
        echo "$name ($real build): SKIPPED (python3 is not installed; $install to run it)"
        return
    fi
    if ! /usr/bin/python3 -c "import $imports" 2>/dev/null; then
        echo "$name ($real build): SKIPPED ($imports not importable by /usr/bin/python3; $install to run it)"
        return
    fi
    mkdir -p "$tmp/$name" && out="$tmp/$name.log"
    if /usr/bin/python3 "$@" >"$out" 2>&1; then
        tail -n 1 "$out"
    else
        grep -v '^ok ' "$out"
        status=1
    fi
}

run_part numpy numpy "apt-get install python3-numpy" "$here/numpy_interop.py" "$tool" "$real" \
    "$tmp/numpy"
if [ -n "$st_tool" ]; then
    run_part safetensors "numpy, safetensors.numpy" "pip install safetensors" \
        "$here/safetensors_interop.py" "$st_tool" "$real" "$tmp/safetensors"
fi
exit $status
