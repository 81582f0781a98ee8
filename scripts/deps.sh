#!/bin/sh
# deps.sh: makes sure the Debian packages a make target needs are installed, in one step.
# Usage: scripts/deps.sh [--for WHAT] PACKAGE...
#   PACKAGE   a Debian package name; NAME? (a trailing ?) marks an optional one: installed with
#             the others when they can be installed, never a reason to stop (what needs it is
#             skipped, and says so)
#   --for     what needs them, for the messages ("make test"; default: "attograd")
# The Makefile states each target's list once (its "set-up" part: DEPS_BUILD, DEPS_test, ...)
# and calls this before the target builds anything. It works out every missing package first,
# then:
#   - as root, or where `sudo -n` works (password-less sudo): one apt-get install of all of them;
#   - otherwise, when a required one is missing: prints the one line to run as root
#     (`su -c '...'`, or `sudo ...` where sudo is installed) and exits 1, installing nothing;
#     when only optional ones are missing: says which, and the line, and exits 0.
# Without dpkg-query and apt-get (not Debian) it names the packages and exits 0: the build then
# says what is missing itself. Safe to run by hand: scripts/deps.sh gnuplot-nox.
set -u
what="attograd"
if [ "${1:-}" = --for ]; then
    what="$2"
    shift 2
fi
need=""
optional=""
for p in "$@"; do
    case "$p" in
    *\?) optional="$optional ${p%\?}" ;;
    *) need="$need $p" ;;
    esac
done

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "$what: no dpkg-query or apt-get (not Debian?): make sure the equivalents of$need$optional are installed" >&2
    exit 0
fi

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}
missing_need=""
missing_opt=""
for p in $need; do installed "$p" || missing_need="$missing_need $p"; done
for p in $optional; do
    case " $need$missing_opt " in *" $p "*) continue ;; esac
    installed "$p" || missing_opt="$missing_opt $p"
done
all="$missing_need$missing_opt"
[ -z "$all" ] && exit 0

# the line to give a user who can install nothing: as root by su, or by sudo where it exists
install_cmd="apt-get update && apt-get install -y --no-install-recommends$all"
if command -v sudo >/dev/null 2>&1; then
    line="sudo apt-get update && sudo apt-get install -y --no-install-recommends$all"
else
    line="su -c '$install_cmd'"
fi

if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
elif [ -n "$missing_need" ]; then
    echo "$what needs Debian packages that are not installed:$missing_need${missing_opt:+ (optional:$missing_opt)}." >&2
    echo "Install them with this one line, then run $what again:" >&2
    echo "  $line" >&2
    exit 1
else
    echo "$what: optional packages not installed (what needs them is skipped):$missing_opt; to install them: $line" >&2
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
echo "$what: installing missing Debian packages:$all"
$SUDO apt-get update -qq >/dev/null 2>&1 || true
# (an optional package apt cannot install, say on another architecture, is left out on a retry)
if $SUDO apt-get install -y -qq --no-install-recommends $all >/dev/null; then
    exit 0
fi
if [ -n "$missing_opt" ] && [ -n "$missing_need" ] &&
    $SUDO apt-get install -y -qq --no-install-recommends $missing_need >/dev/null; then
    echo "$what: the optional$missing_opt could not be installed (what needs them is skipped)" >&2
    exit 0
fi
if [ -z "$missing_need" ]; then
    echo "$what: the optional$missing_opt could not be installed (what needs them is skipped)" >&2
    exit 0
fi
echo "$what: apt-get install failed (its messages are above); the packages:$all" >&2
exit 1
