#!/bin/sh
# qemu.sh: runs an arm64 program of the build under qemu-user, for `make test-arm64`.
#   tests/arm64/qemu.sh ROOT SHIM PROGRAM [ARGS...]
# ROOT holds the arm64 libraries (scripts/arm64-root.sh), SHIM the arm64 build of
# tests/arm64/exec_shim.c, which lets the program start other arm64 programs (Criterion starts
# each test that way).
#   tests/arm64/qemu.sh --wrap ROOT SHIM PROGRAM WRAPPER
# writes WRAPPER, a shell script that runs PROGRAM this way: what the tests are given in
# AG_TRANSLATE_BIN and the like, which they may start through a shell (the host's /bin/sh
# cannot start an arm64 file itself without binfmt_misc).
set -eu
if [ "$1" = --wrap ]; then
    root=$(cd "$2" && pwd) shim=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
    prog=$(cd "$(dirname "$4")" && pwd)/$(basename "$4") self=$(cd "$(dirname "$0")" && pwd)/qemu.sh
    mkdir -p "$(dirname "$5")"
    printf '#!/bin/sh\nexec "%s" "%s" "%s" "%s" "$@"\n' "$self" "$root" "$shim" "$prog" >"$5"
    chmod +x "$5"
    exit 0
fi
ulimit -c 0 2>/dev/null || true # no qemu_*.core files from the tests that abort on purpose
root="$1" shim="$2"
shift 2
QEMU_LD_PREFIX="$root" QEMU_SET_ENV="LD_PRELOAD=$shim" AG_QEMU="${AG_QEMU:-$(command -v qemu-aarch64)}"
# AG_TEST_QEMU: the tests know qemu's own line on a fatal signal is not the program's
# (tests/support/expect_abort.c)
AG_TEST_QEMU=1
export QEMU_LD_PREFIX QEMU_SET_ENV AG_QEMU AG_TEST_QEMU
exec "$AG_QEMU" "$@"
