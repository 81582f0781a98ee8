#!/usr/bin/env bash
# fresh-root.sh: first contact on a fresh Debian 12 machine (make test-fresh; .ci/run runs it).
# Builds a minimal Debian root (debootstrap --variant=minbase bookworm with git, make and
# ca-certificates, nothing else: no compiler, no gnuplot, no sudo), clones this tree into it
# (git clone: its committed HEAD), and runs the README's commands as a newcomer meets them, in
# two roots made from the same base:
#   root      make test as the very first command passes (its set-up step installs
#             everything), then make demo passes;
#   newcomer  an ordinary user without sudo: make test, make demo, make gpt, make induction and
#             make install each print exactly one install line (su -c '...'), no "installing"
#             line, and install nothing; the line make test printed, run as root, is all it
#             takes: make test then passes, then make demo, then make install
#             PREFIX=$HOME/.local, whose printed lines make the README's pkg-config command
#             and a program built with it work.
# Every command runs chrooted, in a mount namespace of its own (nothing is mounted outside it;
# the EXIT trap still checks that no mount is left under the work folder before removing it),
# with /proc, /dev/pts, a writable /dev/shm (tmpfs, mode 1777: Criterion needs one) and the
# host's resolv.conf. The mirror is this machine's (FRESH_MIRROR, else the first URIs of
# /etc/apt/sources.list.d/debian.sources, else http://deb.debian.org/debian). If it cannot be
# reached, debootstrap or apt fails and so does this script, saying so.
# Caches (FRESH_CACHE, default /var/cache/attograd-fresh; FRESH_CACHE=none: none): the base root
# as a tarball, rebuilt when older than a week, and the .deb files apt downloads. Without them
# everything is downloaded. Logs and roots go to FRESH_DIR (default: a new folder under
# /var/tmp), removed at the end unless FRESH_KEEP=1 (or a step failed: then it is kept).
# Prints each step's time and a summary. Exit 0: every check passed; 1: one failed (said which).
# Usage: scripts/fresh-root.sh   (as root)
# (Everything is in main, which bash reads whole before running it: editing this file during a
# run cannot change the run.)
set -euo pipefail
main() {
src="$(cd "$(dirname "$0")/.." && pwd)"
suite=bookworm
user=newcomer
cache="${FRESH_CACHE:-/var/cache/attograd-fresh}"
[ "$cache" = none ] && cache=""
t_start=$SECONDS
summary=""

say() { printf '== fresh root: %s\n' "$*"; }
die() {
    printf 'fresh root: FAILED: %s\n' "$*" >&2
    failed=1
    exit 1
}
# "2 min 06 s" for a number of seconds
fmt() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount namespaces)"
head="$(git -C "$src" rev-parse HEAD 2>/dev/null)" || die "$src is not a git clone"
"$src/scripts/deps.sh" --for "make test-fresh" debootstrap || die "debootstrap is not installed"
command -v unshare >/dev/null || die "unshare (util-linux) not found"
[ -z "$(git -C "$src" status --porcelain --untracked-files=no)" ] ||
    echo "fresh root: note: $src has uncommitted changes; the clone holds HEAD ($head) only"

mirror="${FRESH_MIRROR:-}"
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list.d/debian.sources ]; then
    mirror="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
        /etc/apt/sources.list.d/debian.sources | head -n 1)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"

work="${FRESH_DIR:-$(mktemp -d /var/tmp/attograd-fresh.XXXXXX)}"
mkdir -p "$work/logs"
failed=0
cleanup() {
    # nothing should be mounted here (each command had its own namespace): if something is,
    # it is unmounted before anything is removed, and the folder is kept
    local left
    left="$(findmnt -rn -o TARGET | grep -F "$work/" | sort -r || true)"
    if [ -n "$left" ]; then
        echo "fresh root: unmounting what was left: $left" >&2
        printf '%s\n' "$left" | while read -r m; do umount -l "$m" || true; done
        failed=1
    fi
    if [ "$failed" = 0 ] && [ "${FRESH_KEEP:-0}" != 1 ]; then
        rm -rf "$work"
    else
        echo "fresh root: the roots and logs are kept in $work" >&2
    fi
}
trap cleanup EXIT

# ---- the base root: debootstrap once (or the cached tarball) ----
tarball="${cache:-$work}/$suite-minbase.tar"
debs=""
if [ -n "$cache" ]; then
    mkdir -p "$cache/debs/partial"
    debs="$cache/debs"
fi
t0=$SECONDS
if [ -n "$cache" ] && [ -s "$tarball" ] && [ -n "$(find "$tarball" -mtime -7)" ]; then
    say "base root: the cached $tarball"
else
    say "base root: debootstrap --variant=minbase $suite from $mirror (git make ca-certificates)"
    rm -rf "$work/base"
    if ! debootstrap --variant=minbase --include=git,make,ca-certificates "$suite" "$work/base" \
        "$mirror" >"$work/logs/debootstrap.log" 2>&1; then
        tail -n 20 "$work/logs/debootstrap.log" >&2
        die "debootstrap could not build the root from $mirror (can this machine reach it?);" \
            "its log: $work/logs/debootstrap.log"
    fi
    rm -f "$work/base/var/cache/apt/archives/"*.deb
    tar -C "$work/base" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$work/base"
fi
t_base=$((SECONDS - t0))
summary+="$(printf '  %-58s %s' "base root (debootstrap or the cache)" "$(fmt $t_base)")"$'\n'

# a new root from the base, with the host's resolv.conf; $1: its folder
new_root() {
    mkdir -p "$1"
    tar -C "$1" -xf "$tarball"
    cp -L /etc/resolv.conf "$1/etc/resolv.conf"
}

# Runs a shell command chrooted into root $1 as user $2 (a clean environment: HOME, USER,
# LOGNAME and PATH only), in a mount namespace of its own with /proc, /dev/pts, a tmpfs on
# /dev/shm and the .deb cache; its output goes to stdout, its exit status is returned.
in_root() {
    local root="$1" who="$2" cmd="$3" home=/root
    [ "$who" = root ] || home="/home/$who"
    unshare --mount --propagation private -- /bin/sh -c '
        set -e
        r="$1" who="$2" home="$3" debs="$4" cmd="$5"
        mount --bind "$r" "$r" # / a mount point, as on a machine (tests make it private)
        mount -t proc proc "$r/proc"
        mount -t tmpfs -o mode=1777,size=1g shm "$r/dev/shm"
        mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$r/dev/pts"
        mount --bind "$r/dev/pts/ptmx" "$r/dev/ptmx"
        [ -z "$debs" ] || mount --bind "$debs" "$r/var/cache/apt/archives"
        exec chroot --userspec="$who:$who" "$r" /usr/bin/env -i HOME="$home" USER="$who" \
            LOGNAME="$who" PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin \
            /bin/sh -c "cd && $cmd"' sh "$root" "$who" "$home" "$debs" "$cmd" </dev/null
}

# Runs step NAME (a log file name) = command $3 in root $1 as user $2; it must pass. Times it.
step() {
    local root="$1" who="$2" cmd="$3" name="$4" t rc=0
    say "$name: $cmd   (as $who)"
    t=$SECONDS
    in_root "$root" "$who" "$cmd" >"$work/logs/$name.log" 2>&1 || rc=$?
    t=$((SECONDS - t))
    if [ "$rc" != 0 ]; then
        tail -n 60 "$work/logs/$name.log"
        die "$name: '$cmd' as $who failed (exit $rc) after $(fmt $t); log: $work/logs/$name.log"
    fi
    tail -n 12 "$work/logs/$name.log" | sed 's/^/    /'
    say "$name: passed in $(fmt $t)"
    summary+="$(printf '  %-58s %s' "$name: $cmd ($who)" "$(fmt $t)")"$'\n'
}

# the packages installed in root $1, one a line
packages() { in_root "$1" root "dpkg-query -W -f='\${Package}\n' | sort"; }

# what a fresh root lacks at the start: a compiler, gnuplot, sudo
check_fresh() {
    local p
    for p in gcc gnuplot-nox sudo libcriterion-dev; do
        if in_root "$1" root "dpkg-query -W -f='\${Status}' $p 2>/dev/null | grep -q 'ok installed'"
        then
            die "$p is installed in the new root: not a fresh machine"
        fi
    done
}

# ---- root: make test first, then make demo ----
r="$work/root"
say "root: a new root, the tree cloned into /root/attograd (HEAD $head)"
new_root "$r"
check_fresh "$r"
git clone --quiet --no-hardlinks "$src" "$r/root/attograd"
[ "$(git -C "$r/root/attograd" rev-parse HEAD)" = "$head" ] || die "the clone is not at $head"
step "$r" root "cd attograd && make test" root-make-test
in_root "$r" root "command -v gnuplot" >/dev/null ||
    echo "    (gnuplot is not installed after make test: its tests were skipped)"
step "$r" root "cd attograd && make demo" root-make-demo
rm -rf "$r"

# ---- newcomer: one install line, then make test, make demo, make install ----
r="$work/user"
say "$user: a new root, an ordinary user without sudo, the tree cloned into /home/$user/attograd"
new_root "$r"
check_fresh "$r"
in_root "$r" root "useradd --create-home --shell /bin/bash $user" >/dev/null
git clone --quiet --no-hardlinks "$src" "$r/home/$user/attograd"
in_root "$r" root "chown -R $user:$user /home/$user/attograd"
before="$(packages "$r")"
line=""
for target in test demo gpt induction "install PREFIX=\$HOME/.local"; do
    name="$user-first-make-${target%% *}"
    rc=0
    t=$SECONDS
    in_root "$r" "$user" "cd attograd && make $target" >"$work/logs/$name.log" 2>&1 || rc=$?
    out="$(cat "$work/logs/$name.log")"
    lines="$(grep -c 'apt-get install' <<<"$out" || true)"
    say "make $target as $user before any package: exit $rc, $lines install line(s), $(fmt $((SECONDS - t)))"
    printf '%s\n' "$out" | sed 's/^/    /'
    [ "$rc" != 0 ] || die "make $target as $user passed without the packages it needs"
    [ "$lines" = 1 ] || die "make $target as $user printed $lines install lines, not 1"
    got="$(grep 'apt-get install' <<<"$out")"
    case "$got" in
    "  su -c '"*"'") ;;
    *) die "make $target: the install line is not '  su -c '...'' (no sudo here): $got" ;;
    esac
    if grep -qi 'installing' <<<"$out"; then die "make $target as $user said 'installing'"; fi
    [ "$(packages "$r")" = "$before" ] || die "make $target as $user changed the packages"
    [ "${target%% *}" = test ] && line="${got#  }"
done
step "$r" root "DEBIAN_FRONTEND=noninteractive $line" "$user-install-line"
for p in gcc libcriterion-dev gnuplot-nox; do
    in_root "$r" root "dpkg-query -W -f='\${Status}' $p | grep -q 'ok installed'" ||
        die "make test's install line did not install $p"
done
step "$r" "$user" "cd attograd && make test" "$user-make-test"
step "$r" "$user" "cd attograd && make demo" "$user-make-demo"
# make install into the home folder; the lines it printed, then the README's pkg-config command
# and a program built with it, started with no other help
step "$r" "$user" "cd attograd && make install PREFIX=\$HOME/.local" "$user-make-install"
grep -q '^  export PKG_CONFIG_PATH=' "$work/logs/$user-make-install.log" ||
    die "make install PREFIX=\$HOME/.local printed no PKG_CONFIG_PATH line"
exports="$(grep '^  export ' "$work/logs/$user-make-install.log" | sed 's/^  //' | tr '\n' ';')"
cat >"$r/home/$user/first.c" <<'EOF'
#include <attograd.h> /* pkg-config's Cflags: -I PREFIX/include/attograd */
#include <stdio.h>
int main(void) {
    printf("attograd %s, %s, %s kernels\n", ATTOGRAD_VERSION, AG_REAL_NAME, ag_kernel_family());
    return 0;
}
EOF
step "$r" "$user" "$exports cc first.c \$(pkg-config --cflags --libs attograd) -o first && ./first" \
    "$user-pkg-config"
rm -rf "$r"

t_all=$((SECONDS - t_start))
echo
echo "fresh root: every check passed ($suite minbase from $mirror, HEAD $head):"
printf '%s' "$summary"
printf '  %-58s %s\n' "total" "$(fmt $t_all)"
}
main "$@"
