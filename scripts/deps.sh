#!/bin/sh
# deps.sh: makes sure the Debian packages a make target needs are installed.
# Usage: scripts/deps.sh PACKAGE... (Debian package names). For each missing package it runs
# apt-get as root, or through sudo when sudo works without a password; otherwise it prints the
# exact line to run and fails. Called by the Makefile; safe to run by hand.
set -u
missing=""
for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
echo "attograd: installing missing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "attograd: cannot install packages (not root, no password-less sudo). Run:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null 2>&1 || true
if ! $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null; then
    echo "attograd: apt-get failed. Run:  apt-get install -y$missing" >&2
    exit 1
fi
