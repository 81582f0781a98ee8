#!/bin/sh
# exercise.sh: writes a student copy of the tree with chosen backward bodies blanked
# (docs/course.md). Usage: scripts/exercise.sh [--hide] OUT GRADER EXERCISE... (or "all").
# A blanked region is the code between a line "/* EXERCISE(name ...): ..." and the next
# "/* END EXERCISE */" in src/; the comment stays (what to compute, the shapes, the section of
# docs/backprop.md), the code is replaced by the comment's "STUB:" lines, which leave the
# gradient at zero. The copy holds everything but build/, .git, course/mutations/ and
# tests/course/ (the grader's own proof, which shows the solutions); unchanged files keep their
# times, so a build copied along is reused. Then GRADER (the real tree's course/grade) records
# the end-to-end losses of the real kernels into OUT/course/expected.txt, and
# OUT/course/exercises.txt lists what `make grade` grades there. With the attention exercise,
# OUT/course/exercise.mk makes ATTN=ref the default (the reference kernel is the one to write).
# --hide (make exercise HIDE=1, for graded work) also withholds the answers the copy would
# otherwise hold in words: the comments above each blanked function (and above the functions of
# its file that call it or name it), the gradient part of the op's row of
# src/autograd/ops.def, the blocks of docs/backprop.md and docs/course.md between
# "<!-- withhold: names -->" and "<!-- /withhold -->" that name a chosen exercise (each replaced
# by a line saying so), and the
# places course/withhold.txt lists (formulas in other files; that list stays out of the copy).
# The real tree is only read. Exit 2 with a message on a bad argument.
set -eu
hide=0
if [ "${1:-}" = --hide ]; then
    hide=1
    shift
fi
if [ $# -lt 3 ]; then
    echo "usage: scripts/exercise.sh [--hide] OUT GRADER EXERCISE... (or all)" >&2
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
# awk: whether any of the names in list (spaces between) is one of sel's (" a b ")
chosen_awk='
function chosen(list,   n, a, i) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) if (index(sel, " " a[i] " ")) return 1
    return 0
}'

# withhold COPY " names ": the --hide step (above), in the copy
withhold() {
    copy=$1 names=$2
    # 1. the comments above the blanked functions, above the functions of their file that
    # call them or name them, and above the helpers they call (read in the real file, hidden
    # in the copy's)
    for f in $(grep -l 'EXERCISE(' src/*/*.c); do
        awk -v sel="$names" "$chosen_awk"'
        function header(line,   name) { # the name of the function a top-level line starts, or ""
            if (line !~ /^[A-Za-z_].*[A-Za-z_0-9]\(/ || line ~ /;[ \t]*$/ || line ~ /^(typedef|struct|enum)/)
                return ""
            name = line; sub(/\(.*/, "", name); sub(/.*[^A-Za-z_0-9]/, "", name)
            return name
        }
        FNR == NR { # pass 1, the real file: the functions, their bodies and the comments above
            if (incom) {
                ctext = ctext " " $0
                if (index($0, "*/")) { incom = 0; cend = FNR }
                next
            }
            if ($0 ~ /^\/\*/) {
                ctext = $0
                if (index($0, "*/")) cend = FNR; else incom = 1
                next
            }
            if ((name = header($0)) != "") {
                cur = name; fname[++nf] = name; body[name] = ""
                if (cend == FNR - 1) ct[name] = ctext
                next
            }
            if ($0 ~ /^}/) { cur = ""; next }
            if (cur == "") next
            body[cur] = body[cur] " " $0
            if ($0 ~ /\/\* EXERCISE\([a-z_ ]*\):/) {
                list = $0; sub(/.*EXERCISE\(/, "", list); sub(/\).*/, "", list)
                if (chosen(list)) { blanked[cur] = 1; hide[cur] = 1 }
            }
            next
        }
        FNR == 1 { # the functions whose comments go
            for (i = 1; i <= nf; i++)
                for (b in blanked)
                    if (index(body[fname[i]], b "(") || index(ct[fname[i]], b)) hide[fname[i]] = 1
            do { # the helpers the blanked functions call, and theirs
                more = 0
                for (b in blanked)
                    for (i = 1; i <= nf; i++)
                        if (!(fname[i] in blanked) && index(body[b], fname[i] "(")) {
                            blanked[fname[i]] = hide[fname[i]] = 1
                            more = 1
                        }
            } while (more)
            incom = 0; n = 0
        }
        { # pass 2, the copy: a top-level comment is held until the line after it
            if (incom || (n == 0 && $0 ~ /^\/\*/)) {
                buf[++n] = $0
                incom = !index($0, "*/")
                next
            }
            if (n && (name = header($0)) != "" && (name in hide)) {
                print "/* (withheld in this copy, make exercise HIDE=1: the derivation for " name ";"
                print " * the forward is its kernel, and docs/backprop.md states it) */"
            } else
                for (i = 1; i <= n; i++) print buf[i]
            n = 0
            if ($0 ~ /^\/\*/) {
                buf[++n] = $0
                incom = !index($0, "*/")
                next
            }
            print
        }
        END { for (i = 1; i <= n; i++) print buf[i] }
        ' "$f" "$copy/$f" > "$copy/$f.new" && mv "$copy/$f.new" "$copy/$f"
    done
    # 2. ops.def: the rows of the chosen exercises keep the forward, lose the gradient
    rows=
    for e in $names; do
        case $e in
        softmax) rows="$rows SOFTMAX" ;;
        log_softmax) rows="$rows LOG_SOFTMAX" ;;
        cross_entropy) rows="$rows CROSS_ENTROPY" ;;
        layernorm | rmsnorm) rows="$rows LAYERNORM ADD_LAYERNORM RMSNORM" ;;
        matmul) rows="$rows MATMUL MATMUL_BT" ;;
        linear) rows="$rows LINEAR LINEAR_RELU" ;;
        gelu) rows="$rows GELU" ;;
        embedding) rows="$rows EMBEDDING EMBEDDING_ROWS" ;;
        rope) rows="$rows ROPE" ;;
        attention) rows="$rows ATTENTION" ;;
        *) echo "exercise.sh: --hide: no ops.def rows known for '$e'" >&2; exit 1 ;;
        esac
    done
    awk -v rows=" $rows " '
    /^AG_OP\(/ {
        op = $0; sub(/^AG_OP\( */, "", op); sub(/ *,.*/, "", op)
        if (index(rows, " " op " ")) {
            if (!sub(/; +g.*"\)$/, ";  the gradient: withheld in this copy (make exercise HIDE=1)\")")) {
                print "exercise.sh: --hide: no gradient found in the ops.def row of " op > "/dev/stderr"
                bad = 1
            }
        }
    }
    { print }
    END { exit bad }
    ' "$copy/src/autograd/ops.def" > "$copy/src/autograd/ops.def.new"
    mv "$copy/src/autograd/ops.def.new" "$copy/src/autograd/ops.def"
    # 3. the marked blocks of docs/backprop.md and docs/course.md
    for doc in docs/backprop.md docs/course.md; do
        awk -v sel="$names" '
        /^<!-- withhold: [a-z_ ]* -->$/ {
            list = $0; sub(/^<!-- withhold: /, "", list); sub(/ -->$/, "", list)
            n = split(list, a, " ")
            for (i = 1; i <= n; i++) if (index(sel, " " a[i] " ")) inside = 1
            if (inside) print "*(Withheld in this copy, for the exercise: derive it yourself; `make grade` checks your backward.)*"
            next
        }
        /^<!-- \/withhold -->$/ { inside = 0; next }
        !inside { print }
        ' "$copy/$doc" > "$copy/$doc.new"
        mv "$copy/$doc.new" "$copy/$doc"
    done
    # 4. the other places: "exercise<TAB>file<TAB>text<TAB>replacement" in course/withhold.txt
    [ -f course/withhold.txt ] || return 0
    grep -v '^#' course/withhold.txt | while IFS='	' read -r e f text repl; do
        [ -n "$e" ] && [ -f "$copy/$f" ] || continue
        case "$names" in *" $e "*) ;; *) continue ;; esac
        awk -v t="$text" -v r="$repl" '
        r == "BLOCK" { # a comment of several lines, from the line opening it to the one closing it
            if (!open && index($0, "/*") && !index($0, "*/")) { open = 1; n = 0; has = 0 }
            if (open) {
                buf[++n] = $0
                has = has || index($0, t)
                if (!index($0, "*/")) next
                open = 0
                if (has) {
                    ind = buf[1]; sub(/\/\*.*/, "", ind)
                    print ind "/* (withheld in this copy, make exercise HIDE=1) */"
                } else
                    for (i = 1; i <= n; i++) print buf[i]
                next
            }
            print
            next
        }
        {
            out = ""
            while ((i = index($0, t)) > 0) { out = out substr($0, 1, i - 1) r; $0 = substr($0, i + length(t)) }
            print out $0
        }' "$copy/$f" > "$copy/$f.new"
        mv "$copy/$f.new" "$copy/$f"
    done
}

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
    --exclude=./course/withhold.txt --exclude=./tests/course --exclude="./$rel" -cf - . |
    tar -C "$abs" -xf -

# blank the chosen regions; a region's names all become graded when any of them is chosen
graded=" "
for f in $(grep -l 'EXERCISE(' src/*/*.c); do
    awk -v sel="$sel" "$chosen_awk"'
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
if [ "$hide" = 1 ]; then withhold "$abs" " $(echo $(cat "$abs/course/exercises.txt")) "; fi
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
echo "exercise: $(echo $(cat "$abs/course/exercises.txt")) blanked in $out$([ "$hide" = 1 ] &&
    echo ', their derivations withheld'); there: make grade"
