#!/bin/sh
# install.sh: `make install` and `make uninstall` (the Makefile passes the paths and names; see
# docs/install.md). What it installs, under DESTDIR + PREFIX:
#   lib/libattograd.a
#   lib/libattograd.so.X.Y.Z                (SONAME libattograd.so.X, X = the major version)
#   lib/libattograd.so.X -> libattograd.so.X.Y.Z,  lib/libattograd.so -> libattograd.so.X
#   lib/pkgconfig/attograd.pc
#   include/attograd/attograd.h and include/attograd/<module>/*.h, *.def
# Folders it had to create (PREFIX itself, lib, lib/pkgconfig, include) are written into
# attograd.pc (a comment line), so that uninstall removes them again, and only those, and only
# when empty: a folder other software uses is never removed. include/attograd/ is ours alone.
# The loader: installed into a folder the dynamic loader searches (ldconfig's list, e.g.
# /usr/local/lib on Debian) without DESTDIR, as root it runs ldconfig; otherwise it prints the
# command to run, or the LD_LIBRARY_PATH line a program needs. pkg-config: into a folder it does
# not search by default ($HOME/.local/lib/pkgconfig), it prints the PKG_CONFIG_PATH line.
# Usage: scripts/install.sh install|uninstall DESTDIR PREFIX BUILD_DIR VERSION PC_CFLAGS
#            PC_LIBS_PRIVATE HEADER...
set -eu
action="$1"
destdir="$2"
prefix="$3"
build="$4"
version="$5"
pc_cflags="$6"
pc_libs_private="$7"
shift 7
root="$destdir$prefix"
libdir="$root/lib"
incdir="$root/include/attograd"
pc="$libdir/pkgconfig/attograd.pc"
major="${version%%.*}"
soname="libattograd.so.$major"
sofile="libattograd.so.$version"
marker="# folders make install created (make uninstall removes them when empty):"

# the folders ldconfig searches, one a line (empty when ldconfig is missing)
loader_dirs() {
    ldc="$(command -v ldconfig || echo /sbin/ldconfig)"
    [ -x "$ldc" ] || return 0
    "$ldc" -v -N 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'
}

# 0 when folder $1 is one of the folders read from stdin (one a line), links resolved
listed_dir() {
    real="$(cd "$1" && pwd -P)"
    while read -r d; do
        [ -d "$d" ] && [ "$(cd "$d" && pwd -P)" = "$real" ] && return 0
    done
    return 1
}

# 0 when the dynamic loader finds libraries in $1 without LD_LIBRARY_PATH
is_loader_dir() { loader_dirs | listed_dir "$1"; }

# the folders pkg-config searches without PKG_CONFIG_PATH, one a line (without pkg-config,
# Debian's: those under /usr/local and /usr)
pc_dirs() {
    if command -v pkg-config >/dev/null 2>&1; then
        pkg-config --variable pc_path pkg-config 2>/dev/null | tr ':' '\n'
    else
        printf '%s\n' /usr/local/lib/*/pkgconfig /usr/local/lib/pkgconfig /usr/lib/*/pkgconfig \
            /usr/lib/pkgconfig
    fi
}

# after install: the PKG_CONFIG_PATH line the README's `pkg-config --cflags --libs attograd`
# needs when pkg-config does not look in PREFIX/lib/pkgconfig
pc_step() {
    [ -z "$destdir" ] || return 0
    pc_dirs | listed_dir "$libdir/pkgconfig" && return 0
    echo "note: pkg-config does not search $libdir/pkgconfig; pkg-config --cflags --libs attograd"
    echo "works after"
    echo "  export PKG_CONFIG_PATH=$libdir/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
}

# after install or uninstall: ldconfig, or what to do instead
loader_step() { # $1: install | uninstall
    [ -z "$destdir" ] || return 0 # a staged install: the package's own scripts run ldconfig
    [ -d "$libdir" ] || return 0
    if is_loader_dir "$libdir"; then
        if [ "$(id -u)" = 0 ]; then
            echo "ldconfig"
            ldconfig
        else
            echo "note: the dynamic loader's cache must learn of this $1; run as root:"
            echo "  ldconfig"
        fi
    elif [ "$1" = install ]; then
        echo "note: the dynamic loader does not search $libdir; a program linked with"
        echo "-lattograd starts after"
        echo "  export LD_LIBRARY_PATH=$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
        echo "(or link it with -Wl,-rpath,$libdir, or link the static library: docs/install.md)"
    fi
}

case "$action" in
install)
    # the folders that do not exist yet, relative to PREFIX; kept from an earlier install
    created=""
    [ -f "$pc" ] && created="$(sed -n "s|^$marker||p" "$pc")"
    for d in . lib lib/pkgconfig include; do
        [ -d "$root/$d" ] || created="$created $d"
    done
    run() {
        echo "$@"
        "$@"
    }
    run install -d "$libdir/pkgconfig" "$incdir"
    run install -m 644 "$build/libattograd.a" "$libdir/"
    run install -m 755 "$build/$sofile" "$libdir/"
    run ln -sfn "$sofile" "$libdir/$soname"
    run ln -sfn "$soname" "$libdir/libattograd.so"
    echo "install -m 644 HEADERS $incdir/..."
    for f in "$@"; do
        d="$incdir/$(dirname "${f#src/}")"
        install -d "$d"
        install -m 644 "$f" "$d/"
    done
    echo "$pc"
    {
        echo "$marker$created"
        sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" -e "s|@CFLAGS@|$pc_cflags|" \
            -e "s|@LIBS_PRIVATE@|$pc_libs_private|" attograd.pc.in
    } >"$pc.tmp"
    mv "$pc.tmp" "$pc"
    pc_step
    loader_step install
    ;;
uninstall)
    created=""
    [ -f "$pc" ] && created="$(sed -n "s|^$marker||p" "$pc")"
    for f in libattograd.a libattograd.so "$soname" "$sofile" pkgconfig/attograd.pc; do
        if [ -e "$libdir/$f" ] || [ -L "$libdir/$f" ]; then
            echo "rm $libdir/$f"
            rm -f "$libdir/$f"
        fi
    done
    if [ -d "$incdir" ]; then
        echo "rm -r $incdir"
        rm -rf "$incdir"
    fi
    # deepest first; rmdir fails on a folder that holds anything else: then it stays
    for d in include lib/pkgconfig lib .; do
        case " $created " in
        *" $d "*)
            p="$root/$d"
            [ "$d" = . ] && p="$root"
            if rmdir "$p" 2>/dev/null; then echo "rmdir $p"; fi
            ;;
        esac
    done
    loader_step uninstall
    ;;
*)
    echo "usage: $0 install|uninstall DESTDIR PREFIX BUILD_DIR VERSION ..." >&2
    exit 2
    ;;
esac
