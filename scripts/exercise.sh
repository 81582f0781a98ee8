#!/bin/sh
# exercise.sh: writes a student copy of the tree with chosen backward bodies blanked
# (docs/course.md). Usage: scripts/exercise.sh OUT GRADER EXERCISE... (or "all").
# A blanked region is the code between a line "/* EXERCISE(name ...): ..." and the next
# "/* END EXERCISE */" in src/; the comment stays (what to compute, the shapes, the section of
# docs/backprop.md), the code is replaced by the comment's "STUB:" lines, which leave the
# gradient at zero. The copy holds everything but build/, .git, course/mutations/ and
# tests/course/ (the grader's own proof, which shows the solutions); unchanged files keep their
# times, so a build copied along is reused. Then GRADER (the real tree's course/grade) records
# the end-to-end losses of the real kernels into OUT/course/expected.txt, and
# OUT/course/exercises.txt lists what `make grade` grades there. With the attention exercise,
# OUT/course/exercise.mk makes ATTN=ref the default (the reference kernel is the one to write).
# The real tree is only read. Exit 2 with a message on a bad argument.
set -eu
if [ $# -lt 3 ]; then
    echo "usage: scripts/exercise.sh OUT GRADER EXERCISE... (or all)" >&2
    exit 2
fi
out=$1 grader=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# every exercise name the markers declare, in file order
known=$(grep -ho 'EXERCISE([a-z_ ]*)' src/*/*.c | sed 's/EXERCISE(\(.*\))/\1/' | tr ' ' '\n' |
    awk 'NF && !seen[$0]++')
sel=" "
for e in "$@"; do
    for x in $(echo "$e" | tr ',' ' '); do
        if [ "$x" = all ]; then
            sel=" $(echo $known) "
        elif echo "$known" | grep -qx "$x"; then
            sel="$sel$x "
        else
            echo "exercise.sh: no exercise '$x'; the exercises are: all $(echo $known)" >&2
            exit 2
        fi
    done
done
if [ ! -x "$grader" ]; then
    echo "exercise.sh: $grader: no grader program (make builds it first)" >&2
    exit 2
fi
case "$out" in /*) abs=$out ;; *) abs=$root/$out ;; esac
if [ -e "$abs" ] && [ -n "$(ls -A "$abs" 2>/dev/null)" ] && [ ! -f "$abs/course/exercises.txt" ]; then
    echo "exercise.sh: $out: exists and is not a student copy; choose another OUT" >&2
    exit 2
fi
rm -rf "$abs"
mkdir -p "$abs" || { echo "exercise.sh: $out: cannot create the folder" >&2; exit 2; }
rel=${abs#"$root"/}
# the copy: times preserved; the output folder itself is left out when it is inside the tree
tar -C "$root" --exclude=./build --exclude=./.git --exclude=./course/mutations \
    --exclude=./tests/course --exclude="./$rel" -cf - . | tar -C "$abs" -xf -

# blank the chosen regions; a region's names all become graded when any of them is chosen
graded=" "
for f in $(grep -l 'EXERCISE(' src/*/*.c); do
    awk -v sel="$sel" '
    function chosen(names,   n, a, i) {
        n = split(names, a, " ")
        for (i = 1; i <= n; i++) if (index(sel, " " a[i] " ")) return 1
        return 0
    }
    state == 0 && /\/\* EXERCISE\([a-z_ ]*\):/ {
        names = $0; sub(/.*EXERCISE\(/, "", names); sub(/\).*/, "", names)
        indent = $0; sub(/\/\*.*/, "", indent)
        print
        if (!chosen(names)) { state = 0; next }
        print "GRADED " names > "/dev/stderr"
        nstub = 0; state = /\*\// ? 2 : 1
        if (state == 2) { line = $0; if (sub(/.*STUB: /, "", line)) { sub(/ *\*\/ *$/, "", line); stub[++nstub] = line } }
        next
    }
    state == 1 {
        print
        line = $0
        if (sub(/.*STUB: /, "", line)) { sub(/ *\*\/ *$/, "", line); stub[++nstub] = line }
        if (/\*\//) state = 2
        next
    }
    state == 2 {
        if ($0 ~ /\/\* END EXERCISE \*\//) {
            for (i = 1; i <= nstub; i++) print indent stub[i]
            print
            state = 0
        }
        next
    }
    { print }
    END { if (state != 0) { print "exercise.sh: " FILENAME ": an EXERCISE without its END EXERCISE" > "/dev/stderr"; exit 1 } }
    ' "$f" > "$abs/$f.new" 2> "$abs/$f.log"
    if grep -q '^GRADED' "$abs/$f.log"; then
        mv "$abs/$f.new" "$abs/$f"
        graded="$graded$(sed -n 's/^GRADED //p' "$abs/$f.log" | tr '\n' ' ')"
    else
        rm -f "$abs/$f.new"
    fi
    if grep -v '^GRADED' "$abs/$f.log" >&2; then rm -f "$abs/$f.log"; exit 1; fi
    rm -f "$abs/$f.log"
done
echo "$graded" | tr ' ' '\n' | awk 'NF && !seen[$0]++' > "$abs/course/exercises.txt"
rm -f "$abs/course/exercise.mk"
if grep -qx attention "$abs/course/exercises.txt"; then
    printf '# written by make exercise: the attention exercise is the reference kernel\nATTN ?= ref\n' \
        > "$abs/course/exercise.mk"
fi
"$grader" --record "$abs/course/expected.txt" > "$abs/course/record.log" 2>&1 || {
    echo "exercise.sh: the real kernels' end-to-end run failed ($out/course/record.log)" >&2
    exit 1
}
rm -f "$abs/course/record.log"
echo "exercise: $(echo $(cat "$abs/course/exercises.txt")) blanked in $out; there: make grade"
