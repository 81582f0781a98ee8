#!/usr/bin/env bash
# test_install.sh: `make install` into a temporary prefix, then a program outside the tree built
# only with `pkg-config attograd`, linked statically and dynamically, must print the exact loss
# and gradient of a tiny tape. Then `make uninstall` must leave no attograd file behind.
# Run by `make test-install` (REAL and OMP select the configuration, as for make).
# Checks: the installed layout (libraries, headers in their folders, ops.def, attograd.pc);
# that the Cflags carry -DAG_REAL_DOUBLE exactly in the double build (the program compares
# its sizeof(Real) with the library's own gradcheck default, which depends on the library's
# Real); that --static adds Libs.private; that the static program does not need
# libattograd.so and the shared one does.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
MAKE="${MAKE:-make}"
REAL="${REAL:-float}"
OMP="${OMP:-1}"
CC="${CC:-cc}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/attograd-install.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PREFIX="$TMP/prefix"

fail() {
    echo "test-install ($REAL, OMP=$OMP): FAIL: $*" >&2
    exit 1
}

echo "== make install PREFIX=$PREFIX (REAL=$REAL OMP=$OMP)"
$MAKE -C "$ROOT" --no-print-directory install PREFIX="$PREFIX" REAL="$REAL" OMP="$OMP" >/dev/null

for f in lib/libattograd.a lib/libattograd.so lib/pkgconfig/attograd.pc \
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

export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
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
version="$(sed -n 's/^#define ATTOGRAD_VERSION "\(.*\)"/\1/p' "$ROOT/src/attograd.h")"
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

# Shared: plain --libs, found at run time through LD_LIBRARY_PATH.
# shellcheck disable=SC2086
$CC $CFLAGS_PROG $cflags prog.c -o prog_shared $libs
# (outputs are captured first: with pipefail, `cmd | grep -q` fails when grep exits early)
dyn="$(readelf -d prog_shared)"
grep -q 'NEEDED.*libattograd\.so' <<<"$dyn" || fail "prog_shared does not use libattograd.so"
deps="$(LD_LIBRARY_PATH="$PREFIX/lib" ldd ./prog_shared)"
grep -qF "libattograd.so => $PREFIX/lib/libattograd.so" <<<"$deps" ||
    fail "prog_shared does not load $PREFIX/lib/libattograd.so"
check_output shared "$(LD_LIBRARY_PATH="$PREFIX/lib" ./prog_shared)"

echo "== make uninstall"
cd "$ROOT"
$MAKE -C "$ROOT" --no-print-directory uninstall PREFIX="$PREFIX" REAL="$REAL" OMP="$OMP" >/dev/null
left="$(find "$PREFIX" -name '*attograd*')"
[ -z "$left" ] || fail "left after uninstall: $left"
echo "test-install ($REAL, OMP=$OMP): passed"
