#!/bin/sh
# arm64-root.sh: the arm64 (aarch64) run-time libraries `make test-arm64` runs the suite with,
# unpacked from Debian's arm64 packages into a folder of the build (never installed on the
# system: an arm64 library Debian built again for amd64 only, such as libnanomsg5, has another
# version for each architecture, and apt would then remove the amd64 Criterion to install the
# arm64 one). The folder then holds the C library, libgomp, zlib, jansson and Criterion with
# everything they load, as / of an arm64 system would: qemu-aarch64 finds them there with
# QEMU_LD_PREFIX, and the cross linker with -L.
# Usage: scripts/arm64-root.sh ROOT. Needs apt's arm64 package lists (dpkg --add-architecture
# arm64, then apt-get update: the Makefile's deps-arm64 does both). Does nothing when ROOT/.done
# exists.
set -eu
root="$1"
[ -f "$root/.done" ] && exit 0
debs="$root.debs"
mkdir -p "$root" "$debs"
want="libc6:arm64 libgcc-s1:arm64 libgomp1:arm64 zlib1g:arm64 zlib1g-dev:arm64 libcriterion3:arm64
      libjansson4:arm64"
# every package these load, as apt resolves them for arm64 (only the arm64 ones: the rest are
# architecture-independent names of the same packages), without the development packages
# zlib1g-dev pulls in: the cross compiler has its own C library to link with (libc6-dev's
# libc.so here would send the linker to /usr/lib/aarch64-linux-gnu, which does not exist)
pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
           --no-replaces --no-enhances $want 2>/dev/null | grep -v '^ ' | grep ':arm64$' |
           grep -v -e '-dev:arm64$' -e '^libc-dev-bin:' -e '^rpcsvc-proto:' | sort -u)
pkgs="$pkgs zlib1g-dev:arm64"
[ -n "$pkgs" ] || { echo "arm64-root.sh: apt knows no arm64 packages (dpkg --add-architecture arm64; apt-get update)" >&2; exit 1; }
# apt-get download writes into the current folder; as root it warns that _apt cannot write there
(cd "$debs" && apt-get download -qq $pkgs 2>&1 | grep -v 'unsandboxed as root' || true)
n=0
for d in "$debs"/*.deb; do
    dpkg-deb -x "$d" "$root"
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "arm64-root.sh: no package downloaded into $debs" >&2; exit 1; }
# links to absolute paths (libz.so -> /lib/aarch64-linux-gnu/...) point into the folder instead
top=$(cd "$root" && pwd)
find "$root" -type l -lname '/*' | while read -r l; do ln -sfn "$top$(readlink "$l")" "$l"; done
# the link-time names of Criterion and jansson (libcriterion-dev and libjansson-dev are not
# unpacked: their headers are the amd64 packages', the same files)
lib="$root/usr/lib/aarch64-linux-gnu"
[ -e "$lib/libcriterion.so" ] || ln -s libcriterion.so.3 "$lib/libcriterion.so"
[ -e "$lib/libjansson.so" ] || ln -s libjansson.so.4 "$lib/libjansson.so"
touch "$root/.done"
echo "arm64-root.sh: $n arm64 packages unpacked into $root"
