#!/usr/bin/env bash
# test_install.sh: `make install` into a temporary prefix, then a program outside the tree built
# only with `pkg-config attograd`, linked statically and dynamically, must print the exact loss
# and gradient of a tiny tape. Then `make uninstall` must leave nothing of ours behind.
# Run by `make test-install` (REAL and OMP select the configuration, as for make).
# Checks: the installed layout (libraries, headers in their folders, ops.def, attograd.pc); the
# shared library as a system library is laid out (libattograd.so.X.Y.Z with the SONAME
# libattograd.so.X, the links libattograd.so.X and libattograd.so) and the program records the
# SONAME; that the Cflags carry -DAG_REAL_DOUBLE exactly in the double build (the program compares
# its sizeof(Real) with the library's own gradcheck default, which depends on the library's
# Real); that --static adds Libs.private; that the static program does not need
# libattograd.so and the shared one starts with the LD_LIBRARY_PATH line make install printed;
# pkg-config finds attograd.pc with the PKG_CONFIG_PATH line it printed (none for /usr/local).
# Uninstall: the folders install created go (the prefix included), folders that were there
# before stay with what other software keeps in them; DESTDIR stages without ldconfig.
# SYSTEM=1 (root, on a machine without attograd in /usr/local: .ci/run) also installs into
# /usr/local: ldconfig runs, a program starts with no LD_LIBRARY_PATH, uninstall forgets it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
MAKE="${MAKE:-make}"
REAL="${REAL:-float}"
OMP="${OMP:-1}"
CC="${CC:-cc}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/attograd-install.XXXXXX")"
system_installed=0 # 1 while our install sits in /usr/local (SYSTEM=1): a failure still removes it
cleanup() {
    if [ "$system_installed" = 1 ]; then
        $MAKE -C "$ROOT" --no-print-directory uninstall PREFIX=/usr/local REAL="$REAL" OMP="$OMP" \
            >/dev/null || echo "test-install: could not uninstall from /usr/local" >&2
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
PREFIX="$TMP/prefix"

fail() {
    echo "test-install ($REAL, OMP=$OMP): FAIL: $*" >&2
    exit 1
}

version="$(sed -n 's/^#define ATTOGRAD_VERSION "\(.*\)"/\1/p' "$ROOT/src/attograd.h")"
soname="libattograd.so.${version%%.*}"

echo "== make install PREFIX=$PREFIX (REAL=$REAL OMP=$OMP)"
install_out="$($MAKE -C "$ROOT" --no-print-directory install PREFIX="$PREFIX" REAL="$REAL" \
    OMP="$OMP")"

for f in lib/libattograd.a "lib/libattograd.so.$version" lib/pkgconfig/attograd.pc \
         include/attograd/attograd.h include/attograd/tensor/tensor.h \
         include/attograd/tensor/kernels.h include/attograd/autograd/autograd.h \
         include/attograd/autograd/ops.def; do
    [ -f "$PREFIX/$f" ] || fail "$f was not installed"
done
# every header of the tree, at the same place under include/attograd/
for f in "$ROOT"/src/*/*.h "$ROOT"/src/*/*.def; do
    rel="${f#"$ROOT"/src/}"
    cmp -s "$f" "$PREFIX/include/attograd/$rel" || fail "include/attograd/$rel missing or differs"
done

# the shared library: one file with its SONAME, and the two links
so="$PREFIX/lib/libattograd.so.$version"
if command -v readelf >/dev/null 2>&1; then
    so_dyn="$(readelf -d "$so")"
else
    so_dyn="$(objdump -p "$so")"
fi
grep -Eq "SONAME.*\[?$soname\]?\$" <<<"$so_dyn" || fail "$so lacks the SONAME $soname: $so_dyn"
[ "$(readlink "$PREFIX/lib/$soname")" = "libattograd.so.$version" ] ||
    fail "lib/$soname is not a link to libattograd.so.$version"
[ "$(readlink "$PREFIX/lib/libattograd.so")" = "$soname" ] ||
    fail "lib/libattograd.so is not a link to $soname"
echo "   $soname -> libattograd.so.$version (SONAME $soname), libattograd.so -> $soname"
# a prefix the loader does not search: make install says how a program finds the library
export_line="$(grep -E '^  export LD_LIBRARY_PATH=' <<<"$install_out")" ||
    fail "make install did not print the LD_LIBRARY_PATH line: $install_out"
if grep -qx ldconfig <<<"$install_out"; then fail "ldconfig ran for $PREFIX"; fi
# and how pkg-config finds attograd.pc: the line it printed, applied as a user would
pc_line="$(grep -E '^  export PKG_CONFIG_PATH=' <<<"$install_out")" ||
    fail "make install did not print the PKG_CONFIG_PATH line: $install_out"
unset PKG_CONFIG_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
eval "$pc_line"
[ "$PKG_CONFIG_PATH" = "$PREFIX/lib/pkgconfig" ] ||
    fail "the printed line sets PKG_CONFIG_PATH=$PKG_CONFIG_PATH, not $PREFIX/lib/pkgconfig"
export PKG_CONFIG_PATH
cflags="$(pkg-config --cflags attograd)"
libs="$(pkg-config --libs attograd)"
static_libs="$(pkg-config --static --libs attograd)"
echo "   cflags: $cflags"
echo "   libs: $libs"
echo "   libs --static: $static_libs"
case "$cflags" in *-DAG_REAL_DOUBLE*) has_double=1 ;; *) has_double=0 ;; esac
[ "$has_double" = "$([ "$REAL" = double ] && echo 1 || echo 0)" ] ||
    fail "Cflags '$cflags' do not match REAL=$REAL"
case " $static_libs " in *" -lm "*) ;; *) fail "--static libs lack -lm: $static_libs" ;; esac
case " $static_libs " in *" -lz "*) ;; *) fail "--static libs lack -lz (zlib): $static_libs" ;; esac
case " $static_libs " in
    *" -fopenmp "*) [ "$OMP" = 1 ] || fail "OMP=0 but --static libs have -fopenmp" ;;
    *) [ "$OMP" = 0 ] || fail "OMP=1 but --static libs lack -fopenmp: $static_libs" ;;
esac

# The program, in a folder outside the tree: y = x w, loss = sum(y * y), so
# dL/dw = 2 x^T (x w). With x = [[1,2,3],[4,5,6]] and w = [[1,0],[0,1],[1,1]]:
# x w = [[4,5],[10,11]], loss = 16+25+100+121 = 262, dL/dw = [[88,98],[116,130],[144,162]].
# Every value is a small integer, exact in float and double.
mkdir -p "$TMP/prog"
cat >"$TMP/prog/prog.c" <<'EOF'
#include <attograd.h>
#include <stdio.h>

int main(void) {
    Arena *params = arena_new("params", 1 << 16);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_new2(params, 2, 3, "x");
    Tensor *w = tensor_param(params, 2, (int[]){3, 2}, "w");
    tensor_copy_from_doubles(x, (const double[]){1, 2, 3, 4, 5, 6});
    tensor_copy_from_doubles(w, (const double[]){1, 0, 0, 1, 1, 1});
    Tensor *y = ag_matmul(tape, x, w);
    Tensor *loss = ag_sum(tape, ag_mul(tape, y, y));
    ag_backward(tape, loss);
    /* the library was built with its own Real: its default gradcheck step tells which */
    int lib_double = ag_gradcheck_default_eps() < 1e-3;
    int prog_double = sizeof(Real) == sizeof(double);
    printf("attograd %s, Real %s, library and program agree: %s\n", ATTOGRAD_VERSION,
           AG_REAL_NAME, lib_double == prog_double ? "yes" : "no");
    printf("nodes %d loss %g\n", tape->n_nodes, (double)loss->data[0]);
    printf("dL/dw");
    for (size_t i = 0; i < w->size; i++) printf(" %g", (double)w->grad[i]);
    printf("\n");
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
    return 0;
}
EOF
expected="attograd $version, Real $REAL, library and program agree: yes
nodes 3 loss 262
dL/dw 88 98 116 130 144 162"

check_output() { # $1: label, $2: output
    if [ "$2" != "$expected" ]; then
        printf 'expected:\n%s\ngot:\n%s\n' "$expected" "$2" >&2
        fail "$1 program printed the wrong result"
    fi
    echo "   $1: ok"
}

cd "$TMP/prog"
CFLAGS_PROG="-std=c11 -Wall -Wextra -Werror -O1"

# Static: -lattograd would pick the .so that sits next to the .a, so name the archive
# (-l:libattograd.a, as the README shows); --static brings its own needs (-fopenmp -lm).
static_only="${static_libs//-lattograd/-l:libattograd.a}"
# shellcheck disable=SC2086 # the flags are meant to split into words
$CC $CFLAGS_PROG $cflags prog.c -o prog_static $static_only
dyn="$(readelf -d prog_static)"
if grep -q 'libattograd' <<<"$dyn"; then fail "prog_static needs libattograd.so"; fi
check_output static "$(env -u LD_LIBRARY_PATH ./prog_static)"

# Shared: plain --libs; it records the SONAME and starts with the line make install printed.
# shellcheck disable=SC2086
$CC $CFLAGS_PROG $cflags prog.c -o prog_shared $libs
# (outputs are captured first: with pipefail, `cmd | grep -q` fails when grep exits early)
dyn="$(readelf -d prog_shared)"
grep -q "NEEDED.*\[$soname\]" <<<"$dyn" || fail "prog_shared does not need $soname: $dyn"
deps="$(eval "$export_line" && ldd ./prog_shared)"
grep -qF "$soname => $PREFIX/lib/$soname" <<<"$deps" ||
    fail "prog_shared does not load $PREFIX/lib/$soname: $deps"
check_output shared "$(env -u LD_LIBRARY_PATH sh -c "$export_line && ./prog_shared")"

cd "$ROOT"
uninstall() { # $@: make variables
    $MAKE -C "$ROOT" --no-print-directory uninstall REAL="$REAL" OMP="$OMP" "$@" >/dev/null
}
echo "== make uninstall: the prefix it created goes"
uninstall PREFIX="$PREFIX"
[ ! -e "$PREFIX" ] || fail "left after uninstall: $(find "$PREFIX")"

echo "== a prefix other software uses: install, uninstall, and the rest stays"
P2="$TMP/shared-prefix"
mkdir -p "$P2/lib/pkgconfig" "$P2/include"
echo "other software" >"$P2/lib/pkgconfig/other.pc"
$MAKE -C "$ROOT" --no-print-directory install PREFIX="$P2" REAL="$REAL" OMP="$OMP" >/dev/null
uninstall PREFIX="$P2"
left="$(cd "$P2" && find . | sort | tr '\n' ' ')"
[ "$left" = ". ./include ./lib ./lib/pkgconfig ./lib/pkgconfig/other.pc " ] ||
    fail "uninstall in a shared prefix left: $left"

echo "== DESTDIR: staged under it, no ldconfig, uninstall empties it"
STAGE="$TMP/stage"
staged="$($MAKE -C "$ROOT" --no-print-directory install DESTDIR="$STAGE" PREFIX=/usr/local \
    REAL="$REAL" OMP="$OMP")"
[ -f "$STAGE/usr/local/lib/libattograd.so.$version" ] || fail "nothing staged in $STAGE"
grep -q '^prefix=/usr/local$' "$STAGE/usr/local/lib/pkgconfig/attograd.pc" ||
    fail "the staged attograd.pc does not say prefix=/usr/local"
if grep -q 'ldconfig\|LD_LIBRARY_PATH\|PKG_CONFIG_PATH' <<<"$staged"; then fail "a staged install: $staged"; fi
uninstall DESTDIR="$STAGE" PREFIX=/usr/local
left="$(cd "$STAGE" && find . | sort | tr '\n' ' ')"
[ "$left" = ". ./usr " ] || fail "uninstall with DESTDIR left: $left"

if [ "${SYSTEM:-0}" = 1 ]; then
    echo "== SYSTEM=1: make install into /usr/local (ldconfig), a program with no LD_LIBRARY_PATH"
    [ "$(id -u)" = 0 ] || fail "SYSTEM=1 needs root"
    if [ -n "$(find /usr/local/lib /usr/local/include -maxdepth 1 -name '*attograd*' 2>/dev/null)" ]
    then
        fail "attograd is already installed in /usr/local: not touching it"
    fi
    before="$(find /usr/local | sort)"
    system_installed=1
    out="$($MAKE -C "$ROOT" --no-print-directory install PREFIX=/usr/local REAL="$REAL" OMP="$OMP")"
    grep -qx ldconfig <<<"$out" || fail "make install into /usr/local did not run ldconfig: $out"
    if grep -q 'PKG_CONFIG_PATH' <<<"$out"; then fail "/usr/local needs no PKG_CONFIG_PATH: $out"; fi
    cache="$(ldconfig -p)"
    grep -qF "$soname " <<<"$cache" || fail "ldconfig's cache lacks $soname"
    cd "$TMP/prog"
    # shellcheck disable=SC2046,SC2086
    $CC $CFLAGS_PROG prog.c -o prog_system $(env -u PKG_CONFIG_PATH pkg-config --cflags --libs attograd)
    check_output "system (no LD_LIBRARY_PATH)" "$(env -u LD_LIBRARY_PATH ./prog_system)"
    cd "$ROOT"
    uninstall PREFIX=/usr/local
    system_installed=0
    cache="$(ldconfig -p)"
    if grep -qF "$soname " <<<"$cache"; then fail "ldconfig's cache still has $soname"; fi
    after="$(find /usr/local | sort)"
    [ "$before" = "$after" ] || fail "/usr/local differs after uninstall: $(diff <(echo "$before") \
        <(echo "$after"))"
fi
echo "test-install ($REAL, OMP=$OMP): passed"
