#!/bin/sh
# test_course.sh: proof that the coursework grader grades (docs/course.md). In a student
# copy with every exercise blanked, `make grade` fails every check ("0 passed, N failed"); with
# the real bodies put back, every check passes ("N passed, 0 failed"); each classic wrong
# backward of course/mutations/*.patch fails its exercise with the hint its header names; an
# instructor's hidden cases run, and a bad cases file exits 2 naming the file and the line; a
# copy made with HIDE=1 holds no formula of tests/course/formulas.txt for its exercises, and
# grades.
# The real tree is checked unchanged afterwards. Usage: tests/course/test_course.sh WORKDIR
# (run by make test; MAKE names make). Prints one line when it passes; exits 1 with the log.
set -u
mkdir -p "$1" && work=$(cd "$1" && pwd) || exit 1
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
MAKE=${MAKE:-make}
log=$work/test_course.log
copy=$work/student
: > "$log"
fail() {
    echo "  course: FAILED: $*"
    tail -n 60 "$log"
    exit 1
}
# a fingerprint of the real tree's sources (the copy must never write into it)
fingerprint() { find src course scripts tests/course Makefile -type f | sort | xargs cat | cksum; }
before=$(fingerprint)
start=$(date +%s)

# 1. every exercise blanked: every check fails
"$MAKE" --no-print-directory exercise EX=all OUT="$copy" >> "$log" 2>&1 || fail "make exercise"
n_ex=$(wc -l < "$copy/course/exercises.txt")
[ "$n_ex" -ge 10 ] || fail "only $n_ex exercises listed"
grep -q 'ATTN ?= ref' "$copy/course/exercise.mk" || fail "the copy does not build ATTN=ref"
[ ! -e "$copy/course/mutations" ] && [ ! -e "$copy/tests/course" ] || fail "solutions copied"
grep -q 'k_row_dot(gr, yr, C)' "$copy/src/tensor/k_softmax.c" && fail "softmax not blanked"
(cd "$copy" && "$MAKE" --no-print-directory -j2 grade) > "$work/blank.out" 2>> "$log"
cat "$work/blank.out" >> "$log"
last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/blank.out" | tail -n 1)
case "$last" in "0 passed, "*" failed") ;; *) fail "blanked: last line '$last'" ;; esac
nfail=${last#0 passed, }
nfail=${nfail% failed}
[ "$nfail" -ge 40 ] || fail "blanked: only $nfail checks"
[ "$(grep -c 'hint: zero gradient' "$work/blank.out")" -ge 30 ] || fail "blanked: zero-gradient hints"

# 2. the real bodies back: every check passes
for f in $(grep -l 'EXERCISE(' src/*/*.c); do cp "$f" "$copy/$f"; done
(cd "$copy" && "$MAKE" --no-print-directory -j2 grade) > "$work/solved.out" 2>> "$log"
cat "$work/solved.out" >> "$log"
last=$(tail -n 1 "$work/solved.out")
[ "$last" = "$nfail passed, 0 failed" ] || fail "solved: last line '$last', want '$nfail passed, 0 failed'"

# 3. each classic wrong backward fails its exercise, with its hint
n_mut=0
for p in course/mutations/*.patch; do
    name=$(basename "$p" .patch)
    op=$(sed -n 's/^# op: //p' "$p")
    hint=$(sed -n 's/^# hint: //p' "$p")
    (cd "$copy" && patch -s -p1 < "$root/$p") >> "$log" 2>&1 || fail "$name: patch does not apply"
    (cd "$copy" && "$MAKE" --no-print-directory -j2 grade) > "$work/$name.out" 2>> "$log"
    cat "$work/$name.out" >> "$log"
    (cd "$copy" && patch -s -R -p1 < "$root/$p") >> "$log" 2>&1 || fail "$name: patch -R"
    row=$(awk -v op="$op" '$1 == op && NF >= 3 && $2 ~ /^[0-9]+$/ {print $3}' "$work/$name.out")
    [ -n "$row" ] && [ "$row" -ge 1 ] || fail "$name: $op did not fail"
    grep -A3 "^FAIL  $op " "$work/$name.out" | grep -F -q "hint: $hint" ||
        fail "$name: no '$hint' hint for $op"
    n_mut=$((n_mut + 1))
done
[ "$n_mut" -ge 20 ] || fail "only $n_mut mutations"
# the mistakes docs/course.md says the grader names
for m in softmax_overwrites layernorm_overwrites matmul_overwrites softmax_sum_without_weights \
    softmax_sign_flipped softmax_skips_last_column softmax_first_row_only softmax_without_y_factor \
    softmax_half softmax_y_squared attention_scale_forgotten attention_causal_ignored \
    attention_p_for_dp attention_groups_not_summed; do
    [ -f "course/mutations/$m.patch" ] || fail "no mutation $m"
done

# 4. hidden cases from an instructor's file; a bad file exits 2 naming it
printf '# hidden\nsoftmax 4 9 seed 17\nattention 1 3 1 4 7 2 2 10 seed 5\n' > "$work/cases.txt"
(cd "$copy" && "$MAKE" --no-print-directory grade CASES="$work/cases.txt") > "$work/hidden.out" 2>> "$log"
cat "$work/hidden.out" >> "$log"
grep -q '^pass  softmax       gradcheck hidden case (4,9) seed 17' "$work/hidden.out" ||
    fail "hidden softmax case not run"
grep -q '^pass  attention     gradcheck hidden case' "$work/hidden.out" || fail "hidden attention case"
[ "$(tail -n 1 "$work/hidden.out")" = "$((nfail + 2)) passed, 0 failed" ] || fail "hidden: total"
printf 'softmax 4\n' > "$work/bad.txt"
# the grader make grade built (its folder follows the build variables: OMP=0, DEBUG=1, ...)
grader=$(ls "$copy"/build/*/course/grade 2>/dev/null | head -n 1)
[ -x "$grader" ] || fail "no grader built in $copy/build"
(cd "$copy" && "$grader" --cases "$work/bad.txt") > "$work/bad.out" 2>&1
[ $? -eq 2 ] && grep -q "bad.txt:1: softmax takes 2 integers" "$work/bad.out" || fail "bad cases file"

# 5. HIDE=1 (make exercise HIDE=1): no final formula of a hidden exercise is left in the copy
# (tests/course/formulas.txt, "exercise<TAB>text"), the others' stay, and the grader still
# grades: blanked, solved, and a wrong backward with its hint
formulas=$root/tests/course/formulas.txt
# every formula listed is stated in the real tree (a stale line would test nothing)
stale=$(grep -v '^#' "$formulas" | while IFS='	' read -r e text; do
    grep -rqF --exclude-dir=build --exclude-dir=.git --exclude-dir=course -e "$text" . ||
        echo "$e: $text;"
done)
[ -z "$stale" ] || fail "formulas.txt lists what the real tree does not state: $stale"
# the formulas of the exercises in $2 (" a b ") that are (left=1) or are not (left=0) in copy $1
formulas_in() {
    grep -v '^#' "$formulas" | while IFS='	' read -r e text; do
        case "$2" in *" $e "*) ;; *) continue ;; esac
        grep -rqF --exclude-dir=build -e "$text" "$1" && echo "$e: $text;"
    done
}
hid=$work/hidden
"$MAKE" --no-print-directory exercise EX=all HIDE=1 OUT="$hid" >> "$log" 2>&1 || fail "HIDE=1 (all)"
left=$(formulas_in "$hid" " $(echo $(cat "$hid/course/exercises.txt")) ")
[ -z "$left" ] || fail "EX=all HIDE=1 left formulas in the copy: $left"
n_formulas=$(grep -vc '^#' "$formulas")
"$MAKE" --no-print-directory exercise EX=softmax HIDE=1 OUT="$hid" >> "$log" 2>&1 ||
    fail "HIDE=1 (softmax)"
left=$(formulas_in "$hid" " softmax ")
[ -z "$left" ] || fail "EX=softmax HIDE=1 left formulas in the copy: $left"
[ -n "$(formulas_in "$hid" " log_softmax layernorm attention ")" ] ||
    fail "EX=softmax HIDE=1 withheld the other exercises' formulas too"
grep -q '^\*(Withheld in this copy' "$hid/docs/backprop.md" || fail "HIDE=1: no withheld line"
grep -q '| exercise | the mistake |' "$hid/docs/course.md" && fail "HIDE=1: the table of mistakes stayed"
(cd "$hid" && "$MAKE" --no-print-directory -j2 grade) > "$work/hidden_blank.out" 2>> "$log"
cat "$work/hidden_blank.out" >> "$log"
[ "$(tail -n 1 "$work/hidden_blank.out")" = "0 passed, 5 failed" ] &&
    grep -q 'hint: zero gradient' "$work/hidden_blank.out" || fail "HIDE=1 copy, blanked"
cp src/tensor/k_softmax.c "$hid/src/tensor/k_softmax.c"
(cd "$hid" && "$MAKE" --no-print-directory -j2 grade) > "$work/hidden_solved.out" 2>> "$log"
cat "$work/hidden_solved.out" >> "$log"
[ "$(tail -n 1 "$work/hidden_solved.out")" = "5 passed, 0 failed" ] || fail "HIDE=1 copy, solved"
(cd "$hid" && patch -s -p1 < "$root/course/mutations/softmax_overwrites.patch") >> "$log" 2>&1 ||
    fail "HIDE=1 copy: softmax_overwrites does not apply"
(cd "$hid" && "$MAKE" --no-print-directory -j2 grade) > "$work/hidden_mut.out" 2>> "$log"
cat "$work/hidden_mut.out" >> "$log"
grep -F -q 'hint: overwrote the gradient instead of adding to it (+=)' "$work/hidden_mut.out" ||
    fail "HIDE=1 copy: no hint for an overwrite"

# 6. the real tree was only read
[ "$(fingerprint)" = "$before" ] || fail "the real tree changed"
echo "  course: $n_ex exercises: blanked 0 passed, $nfail failed; solved $nfail passed, 0 failed;" \
     "$n_mut wrong backwards each failed with its hint; hidden cases ran; HIDE=1 left none of" \
     "$n_formulas formulas, solved it grades ($(($(date +%s) - start)) s)"
