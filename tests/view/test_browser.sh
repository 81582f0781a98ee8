#!/bin/sh
# test_browser.sh: the pages of src/view opened in headless Chromium (make test; tests/view/
# browser.py says what it checks). Trains a tiny GPT on a text full of markup, quotes, newlines,
# Hebrew and Arabic (BPE: whole right-to-left letters and words become tokens; the char
# tokenizer: bytes of UTF-8 letters alone, which are not UTF-8), writes the view of a hostile
# prompt with the runs' curves, and checks it in the browser: no console error, no network
# request, the heads, the token labels as text, hover and click. Also checks that src/view/page.c
# is what src/view/page.html gives. Screenshots go to OUT/shots.
# Then a tiny translator on word pairs of the same kind: its encoder, decoder and cross-attention
# pages. Then a tiny attograd-grokking run's analysis page (AG_GROKKING_BIN): its plots; and a
# tiny attograd-induction experiment's page (AG_INDUCTION_BIN).
# Usage: tests/view/test_browser.sh GPT_BIN TRANSLATE_BIN OUT
# Without chromium (Debian's package, installed by make test's set-up when it can be): skipped,
# saying so.
set -eu
gpt=$1
translate=$2
out=$3
here=$(dirname "$0")
python3 "$here/../../scripts/embed_page.py" --check
if ! command -v chromium >/dev/null 2>&1 && [ -z "${AG_CHROMIUM:-}" ]; then
    echo "  view pages in Chromium: skipped (chromium is not installed: apt-get install chromium)"
    exit 0
fi
rm -rf "$out"
mkdir -p "$out"
log="$out/log.txt"
fail() {
    echo "  view pages in Chromium: FAILED ($1); the log, $log:"
    tail -n 40 "$log"
    exit 1
}
python3 - "$out/text.txt" <<'PY'
import random, sys
random.seed(3)
parts = ["<script>alert(1)</script>", "&amp; & ", '"quoted" ', "'single' ", "\n", "שלום עולם ",
         "مرحبا بالعالم ", "</script><b>x</b> ", "abc def ", "<img src=http://example.com/x> "]
open(sys.argv[1], "w", encoding="utf-8").write("".join(random.choice(parts) for _ in range(600)))
PY
prompt=$(printf '<b>x</b> & "q" </script>\nשלום مرحبا <img src=http://example.com/x>')
for tok in bpe char; do
    d="$out/$tok"
    vocab=
    [ $tok = bpe ] && vocab="--vocab 320"
    # shellcheck disable=SC2086
    "$gpt" prepare --input "$out/text.txt" --tokenizer $tok $vocab --out "$d/data" >>"$log" 2>&1 ||
        fail "prepare --tokenizer $tok"
    "$gpt" train --data "$d/data" --out "$d/run" --n-layer 2 --n-head 2 --n-embd 16 \
        --block-size 96 --batch-size 4 --max-iters 20 --warmup-iters 2 --eval-interval 10 \
        --eval-iters 2 --log-interval 5 --threads 1 --quiet >>"$log" 2>&1 || fail "train ($tok)"
    "$gpt" view --ckpt "$d/run/last.npz" --prompt "$prompt" --out "$d/view.html" --threads 1 \
        --runs "$d/run" "$d/run" >>"$log" 2>&1 || fail "view ($tok)"
    python3 "$here/browser.py" --shots "$out/shots" --prefix "gpt-$tok-" --expect-text "$prompt" \
        "$d/view.html" >>"$log" 2>&1 || fail "the $tok page in the browser"
done
# a batch of prompts (--prompts: rows of as many tokens); the logit lens after the last block is
# the model's own probability of each token
printf 'abc <b>&amp;</b> def\ndef "q" \047s\047 <b>abc</\n' >"$out/prompts.txt"
"$gpt" view --ckpt "$out/char/run/last.npz" --prompts "$out/prompts.txt" --out "$out/batch.html" \
    --top-k 3 >>"$log" 2>&1 || fail "view --prompts"
python3 - "$out/batch.html" "$out/bpe/view.html" >>"$log" 2>&1 <<'PY' || fail "the pages' data"
import json, re, sys
for path in sys.argv[1:]:
    html = open(path, encoding="utf-8").read()
    d = json.loads(re.search(r'id="data">\n(.*?)</script>', html, re.S).group(1))
    rows = len(d["attention"][0]["prompts"])
    assert rows == len(d["tokens"]["prompts"]), path
    m = {x["name"]: x["values"] for x in d["tokens"]["measures"]}
    prob = m["probability of this token"]
    last = [k for k in m if k.startswith("logit lens: after block")][-1]
    for b in range(rows):
        assert prob[b][0] is None and len(prob[b]) == len(d["tokens"]["prompts"][b]["tok"])
        for p, q in zip(prob[b][1:], m[last][b][1:]):
            assert abs(p - q) <= 1e-5 * max(1, abs(p)), (path, last, p, q)
    print(path, rows, "rows: the logit lens after the last block is the model's probability")
PY
[ "$(grep -c . "$out/prompts.txt")" = 2 ] && grep -q '"prompts":\[{"q"' "$out/batch.html" ||
    fail "the batch page"
python3 "$here/browser.py" --shots "$out/shots" --prefix "gpt-batch-" "$out/batch.html" >>"$log" 2>&1 ||
    fail "the batch page in the browser"
# direct logit attribution: the page's value of each part at a token is the lens command's
# (attograd-gpt lens --token THAT_TOKEN --pos THE_POSITION_BEFORE), as is the logit they sum to
"$gpt" view --ckpt "$out/char/run/last.npz" --prompt "abc def abc" --out "$out/dla.html" \
    --threads 1 >>"$log" 2>&1 || fail "view (the DLA page)"
"$gpt" lens --ckpt "$out/char/run/last.npz" --prompt "abc def abc" --token e --pos 4 \
    --out "$out/lens.npz" --threads 1 >>"$log" 2>&1 || fail "lens"
python3 - "$out/dla.html" "$out/lens.npz" >>"$log" 2>&1 <<'PY' || fail "the page's DLA against lens"
import ast, json, re, struct, sys, zipfile
html = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r'id="data">\n(.*?)</script>', html, re.S).group(1))
z = zipfile.ZipFile(sys.argv[2])
def npy(name):  # a float64 or bytes entry of the .npz (no numpy needed)
    raw = z.read(name + ".npy")
    n = struct.unpack("<H", raw[8:10])[0]
    head = ast.literal_eval(raw[10:10 + n].decode())
    body = raw[10 + n:]
    if head["descr"] == "|u1":
        return body
    assert head["descr"] == "<f8", head
    return head["shape"], struct.unpack("<%dd" % (len(body) // 8), body)
(B, T, n), dla = npy("dla")
parts = json.loads(npy("parts"))
(_, _), metric = npy("metric")
m = {x["name"]: x["values"][0] for x in d["tokens"]["measures"]}
assert d["tokens"]["prompts"][0]["tok"][5] == "e"
checked = 0
for k, part in enumerate(parts):
    got, want = m["direct logit attribution: " + part][5], dla[4 * n + k]
    assert abs(got - want) <= 1e-5 * max(1, abs(want)), (part, got, want)
    checked += 1
got = m["logit of this token (the sum of the parts below)"][5]
assert abs(got - metric[4]) <= 1e-5 * max(1, abs(metric[4])), (got, metric[4])
assert len([k for k in m if k.startswith("direct logit attribution: ")]) == n
assert all(v[0] is None for k, v in m.items())
print("the page's direct logit attribution of 'e' is lens's:", checked, "parts and their sum")
PY
# a post-LN model has no such decomposition: its page has the loss and the probability, and
# says why on stderr
"$gpt" train --data "$out/char/data" --out "$out/postln" --post-ln --n-layer 1 --n-head 2 \
    --n-embd 16 --block-size 32 --batch-size 2 --max-iters 2 --warmup-iters 1 --eval-interval 2 \
    --eval-iters 1 --threads 1 --quiet >>"$log" 2>&1 || fail "train --post-ln"
"$gpt" view --ckpt "$out/postln/last.npz" --prompt "abc def" --out "$out/postln.html" \
    --threads 1 >"$out/postln.txt" 2>&1 || fail "view of a post-LN model"
grep -q "view: no logit lens or direct logit attribution: a post-LN model" "$out/postln.txt" ||
    fail "the post-LN model's view does not say why it has no DLA"
[ "$(grep -o '"kind":"' "$out/postln.html" | wc -l)" = 2 ] || fail "the post-LN page's measures"
python3 "$here/browser.py" "$out/postln.html" >>"$log" 2>&1 || fail "the post-LN page in the browser"
# the tables of ablate, patch and detect (--from), with the char model's runs
c="$out/char"
"$gpt" ablate --ckpt "$c/run/last.npz" --prompt "abc def abc" --out "$c/ablate.npz" \
    --threads 1 >>"$log" 2>&1 || fail "ablate"
"$gpt" detect --ckpt "$c/run/last.npz" --prompt "abc def abc" --out "$c/detect.npz" \
    --threads 1 >>"$log" 2>&1 || fail "detect"
"$gpt" patch --ckpt "$c/run/last.npz" --clean "abc def a" --corrupt "abd def a" --good b \
    --bad d --by head --hook 'blocks.*.attn.hook_z' --out "$c/patch.npz" --threads 1 \
    >>"$log" 2>&1 || fail "patch"
for t in ablate detect patch; do
    "$gpt" view --from "$c/$t.npz" --out "$c/$t.html" --runs "$c/run" >>"$log" 2>&1 ||
        fail "view --from $t.npz"
done
python3 "$here/browser.py" --shots "$out/shots" --prefix "gpt-tables-" "$c/ablate.html" \
    "$c/detect.html" "$c/patch.html" >>"$log" 2>&1 || fail "the tables in the browser"
# the translator: encoder and decoder self-attention, cross-attention, its words, a table
t="$out/translate"
mkdir -p "$t"
python3 - "$t" <<'PY'
import random, sys
random.seed(2)
words = '<b> & "q" שלום مرحبا cat dog sat mat </script> <img/src=http://example.com/y>'.split()
lines = []
for _ in range(300):
    s = [random.choice(words) for _ in range(random.randint(3, 6))]
    lines.append(" ".join(s) + "\t" + " ".join(reversed(s)))
for name, part in (("train.tsv", lines), ("valid.tsv", lines[:30])):
    open(sys.argv[1] + "/" + name, "w", encoding="utf-8").write("\n".join(part) + "\n")
PY
"$translate" train --data "$t" --out "$t/run" --d-model 16 --heads 2 --layers 2 --ff 32 \
    --max-len 16 --batch 16 --steps 40 --log-every 10 --valid-every 20 --threads 1 --quiet \
    >>"$log" 2>&1 || fail "attograd-translate train"
printf '<b> & "q" cat\tcat "q" & <b>\nשלום mat dog sat\tsat dog mat שלום\n' >"$t/pairs.tsv"
"$translate" view --ckpt "$t/run/best.npz" --sentence '<b> & "q" שלום </script> مرحبا' \
    --out "$t/view.html" --runs "$t/run" >>"$log" 2>&1 || fail "attograd-translate view"
"$translate" view --ckpt "$t/run/best.npz" --pairs "$t/pairs.tsv" --out "$t/pairs.html" \
    >>"$log" 2>&1 || fail "attograd-translate view --pairs"
"$translate" ablate --ckpt "$t/run/best.npz" --sentence '<b> & "q" cat' --out "$t/ablate.npz" \
    --threads 1 >>"$log" 2>&1 || fail "attograd-translate ablate"
"$translate" view --from "$t/ablate.npz" --out "$t/ablate.html" >>"$log" 2>&1 ||
    fail "attograd-translate view --from"
"$translate" detect --ckpt "$t/run/best.npz" --sentence '<b> & "q" cat' --out "$t/detect.npz" \
    --threads 1 >>"$log" 2>&1 || fail "attograd-translate detect"
"$translate" view --from "$t/detect.npz" --out "$t/detect.html" >>"$log" 2>&1 ||
    fail "attograd-translate view --from detect.npz"
python3 "$here/browser.py" --shots "$out/shots" --prefix "translate-" --expect-sep " " \
    "$t/view.html" "$t/pairs.html" "$t/ablate.html" "$t/detect.html" >>"$log" 2>&1 ||
    fail "the translator's pages in the browser"
# detect's tables: a kind per side, the cross-attention's diagonal, each (layer, head)
python3 - "$t/detect.html" >>"$log" 2>&1 <<'PY' || fail "the translator's detect tables"
import json, re, sys
d = json.loads(re.search(r'id="data">\n(.*?)</script>', open(sys.argv[1], encoding="utf-8").read(),
               re.S).group(1))
names = [t["name"] for t in d["tables"]]
want = ["detect.npz: %s %s" % (s, k) for s in ("encoder", "decoder")
        for k in ("previous_token", "duplicate_token", "induction")]
assert names == want + ["detect.npz: cross-attention diagonal"], names
for t in d["tables"]:
    assert t["rows"] == ["L0", "L1"] and t["cols"] == ["H0", "H1"], t
    assert all(v is not None and 0 <= v <= 1 for v in t["values"]), t
print("the translator's detect: %d tables" % len(names))
PY
grep -q '"name":"cross-attention (decoder -\\u003E source)"' "$t/view.html" || fail "no cross-attention"
# what a bad command line gets: exit 2 naming the flag or the file
"$translate" view --sentence x --out "$out/y.html" >>"$log" 2>&1 && fail "view without --ckpt succeeded"
grep -q "attograd-translate view: --ckpt goes with --sentence" "$log" || fail "view without --ckpt: no reason"
"$gpt" view --from "$c/run/last.npz" --out "$out/x.html" >>"$log" 2>&1 && fail "view --from a checkpoint succeeded"
grep -q "last.npz: not a table of ablate, patch or detect" "$log" || fail "view --from a checkpoint: no reason"

if "$gpt" view --ckpt "$out/bpe/run/last.npz" --out "$out/x.html" >>"$log" 2>&1; then
    fail "view without --prompt succeeded"
fi
# attograd-grokking (AG_GROKKING_BIN, which the Makefile exports): a tiny run's analysis page,
# its plots (curves on a log step axis, the Fourier norms' bars) and the norms' table
grok=${AG_GROKKING_BIN:-}
[ -n "$grok" ] || fail "AG_GROKKING_BIN is not set (make test-view sets it)"
g="$out/grokking"
"$grok" train --out "$g" --p 13 --frac 0.5 --d-model 16 --heads 2 --d-mlp 32 --steps 30 \
    --keep-every 10 --valid-every 10 --threads 1 --quiet >>"$log" 2>&1 || fail "grokking train"
"$grok" analyze --out "$g" --threads 1 >>"$log" 2>&1 || fail "grokking analyze"
grep -q "^view: $g/view.html" "$log" || fail "grokking analyze did not name its view"
python3 "$here/browser.py" --shots "$out/shots" --prefix "grokking-" "$g/view.html" >>"$log" 2>&1 ||
    fail "the grokking page in the browser"
# attograd-induction (AG_INDUCTION_BIN): a tiny experiment's page, its plots (the loss, the heads'
# scores), the loss per position and the patterns as tables, both runs' log.csv
ind=${AG_INDUCTION_BIN:-}
[ -n "$ind" ] || fail "AG_INDUCTION_BIN is not set (make test-view sets it)"
i="$out/induction"
"$ind" --out "$i" --steps 20 --every 5 --batch 4 --eval-batch 3 --vocab 16 --ctx 16 --d-model 16 \
    --heads 2 --min-prefix 3 --max-prefix 6 --threads 1 --quiet >>"$log" 2>&1 || fail "induction"
grep -q "^  files: $i/induction.npz, curves.csv, heads.csv, positions.csv, induction.html" "$log" ||
    fail "attograd-induction did not name its page"
python3 - "$i/induction.html" >>"$log" 2>&1 <<'PY' || fail "the induction page's data"
import json, re, sys
d = json.loads(re.search(r'id="data">\n(.*?)</script>', open(sys.argv[1], encoding="utf-8").read(),
               re.S).group(1))
assert [p["name"] for p in d["plots"]] == ["loss", "induction scores", "previous-token scores"]
assert [len(p["series"]) for p in d["plots"]] == [4, 6, 6], d["plots"]
assert all(len(s["y"]) == 5 for p in d["plots"] for s in p["series"])
names = [t["name"] for t in d["tables"]]
assert names == ["two_layer"] + ["two_layer L%dH%d" % (l, h) for l in (0, 1) for h in (0, 1)] + \
    ["one_layer", "one_layer L0H0", "one_layer L0H1"], names
assert d["tables"][0]["rows"][-1] == "step 20" and len(d["tables"][0]["cols"]) == 16
assert len(d["runs"]) == 2
print("the induction page: %d plots, %d tables, %d runs" % (3, len(names), 2))
PY
python3 "$here/browser.py" --shots "$out/shots" --prefix "induction-" "$i/induction.html" \
    >>"$log" 2>&1 || fail "the induction page in the browser"
echo "  view pages in Chromium: 6 GPT pages (BPE, char, a batch with hostile tokens; ablate," \
     "detect, patch tables), 4 translator pages (encoder, decoder, cross-attention; pairs;" \
     "ablate and detect tables), a grokking page (its plots, the Fourier norms' table, the" \
     "run), an induction page (its plots, tables and runs): 0 console errors, 0 network requests, the DOM as expected; the direct logit" \
     "attribution as lens gives it"
