"""hf_tokenizer_fixtures.py: the tokenizer.json fixtures of tests/text/test_hf_tokenizer.c and the
ids the `tokenizers` library gives for a mixed test text.

Run by hand (pip install tokenizers; 0.23 wrote the committed files):
    /opt/tl/bin/python tests/text/hf_tokenizer_fixtures.py
It trains small BPE tokenizers of each family attograd reads on a small generated text, writes
tests/fixtures/tokenizers/<name>/tokenizer.json (and GPT-2's vocab.json + merges.txt pair), the
test text (text.txt) and expected.json: for each tokenizer, the ids of every line of the text and
of the whole text (encode(..., add_special_tokens=False)), and decode(ids,
skip_special_tokens=False) of each line.

With an argument it is the live comparison the C test runs where a python with tokenizers is
named by AG_TOKENIZERS_PYTHON:
    python hf_tokenizer_fixtures.py encode TOKENIZER.json TEXT_FILE
prints the ids of each line of TEXT_FILE (split at \\n), one line of space-separated ids each
(TOKENIZER.json may be a folder with GPT-2's vocab.json and merges.txt: GPT2Tokenizer reads it).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "tokenizers")

# the test text: one case a line (split at \n only; \r, \x0b, \x0c, \x85, U+2028 stay inside)
LINES = [
    "Hello, world! This is a test.",
    "don't won't it's we're they've I'm you'll he'd 'S 'Re 'sup",
    "  leading spaces and trailing   ",
    "tabs\tand\t\tmore\ttabs \t mixed",
    "a  b   c    d     e",
    "numbers 123 4567 89.01 1,000,000 and x2y3 ٣٤٥ ½ Ⅻ",
    "Café naïve résumé façade Ångström",
    "cafe\u0301 composed by combining marks",
    "日本語のテキストと中文字符和한국어",
    "emoji 😀 👍🏽 👨‍👩‍👧 🇫🇷 ✨",
    "control \x01\x02\x1b[0m and \x7f delete, NUL \x00 inside",
    "carriage\rreturn and form\x0cfeed and vtab\x0bhere",
    "nbsp\u00a0here, ideographic\u3000space, line\u2028sep, nel\u0085x",
    "<|endoftext|> special in the middle <|endoftext|>end",
    "<s> and </s> look like specials",
    "<|im_start|>user\nhi<|im_end|>",
    "mixed ASCII-punctuation!!! ??? ... --- ;;; ''' \"\"\"",
    "   ",
    "",
    "x",
    "ΑΒΓ αβγ Привет мир עברית العربية",
    "math ∑∫√∞ ≠ ≤ and arrows → ⇒",
    "    indented code:\n",
    "zero\u200bwidth and soft\u00adhyphen",
    "<0x41> is not a byte token in text",
    "the end.",
]
TEXT = "\n".join(LINES)
LINES = TEXT.split("\n")  # the lines the test reads from text.txt

CORPUS_PARTS = [
    "The quick brown fox jumps over the lazy dog. ",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune "
    "must be in want of a wife. ",
    "Café au lait, crème brûlée, naïveté and résumé are French words. ",
    "日本語の文章です。中文也可以。한국어 문장입니다. ",
    "Numbers like 12345 and 3.14159 and 2024-06-01 appear often. ",
    "def f(x):\n    return x * 2\n\n",
    "Tabs\tseparate\tcolumns\tin\tfiles.\n",
    "I'm sure they'll say we've done what you'd expect. ",
    "Привет, как дела? Γειά σου κόσμε. ",
]


def corpus():
    out = []
    for i in range(40):
        for j, p in enumerate(CORPUS_PARTS):
            if (i + j) % 3 != 2:
                out.append(p)
    return "".join(out)


def bytelevel_tokenizer(vocab, specials, add_prefix_space=False, digits=False, nfc=False):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, normalizers

    tok = Tokenizer(models.BPE())
    bl = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bl]) if digits else bl
    )
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([corpus()], tr)
    return tok


def spm_tokenizer(vocab, style):
    """LLaMA's layout: <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF>, then the pieces"""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # trained on words (as SentencePiece's pieces never cross a space), read as LLaMA's files say
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    tr = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120, show_progress=False
    )
    tok.train_from_iterator([corpus()], tr)
    j = json.loads(tok.to_str())
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    j["pre_tokenizer"] = None
    old = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    names = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    names += [k for k, _ in old if k not in ("<unk>", "<s>", "</s>")]
    j["model"]["vocab"] = {k: i for i, k in enumerate(names)}
    j["added_tokens"] = [
        {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, c in enumerate(["<unk>", "<s>", "</s>"])
    ]
    seq = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    j["decoder"] = seq
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
    }
    if style == "metaspace":
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                              "split": False}
    elif style == "metaspace_split":
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                              "split": True}
        j["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                        "split": True}
        j["model"]["byte_fallback"] = False
    return Tokenizer.from_str(json.dumps(j))


def add_neox_tokens(tok):
    """GPT-NeoX's kind of added tokens: runs of spaces (normalized, not special), a special"""
    from tokenizers import AddedToken

    tok.add_tokens([AddedToken("  ", normalized=True), AddedToken("    ", normalized=True)])
    tok.add_special_tokens([AddedToken("<|padding|>", normalized=False, special=True)])


def expected(tok):
    lines = [tok.encode(s, add_special_tokens=False).ids for s in LINES]
    return {
        "lines": lines,
        "whole": tok.encode(TEXT, add_special_tokens=False).ids,
        "decoded": [tok.decode(ids, skip_special_tokens=False) for ids in lines],
    }


def main():
    import tokenizers

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "text.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(TEXT)
    toks = {
        "gpt2": bytelevel_tokenizer(500, ["<|endoftext|>"]),
        "neox": bytelevel_tokenizer(480, ["<|endoftext|>"], nfc=True),
        "smollm": bytelevel_tokenizer(480, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], digits=True),
        "llama": spm_tokenizer(400, "legacy"),
        "llama_metaspace": spm_tokenizer(400, "metaspace"),
        "llama_metaspace_split": spm_tokenizer(400, "metaspace_split"),
        "prefix_space": bytelevel_tokenizer(400, ["<|endoftext|>"], add_prefix_space=True),
    }
    add_neox_tokens(toks["neox"])
    exp = {"tokenizers_version": tokenizers.__version__}
    for name, tok in toks.items():
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
        exp[name] = expected(tok)
    # GPT-2's pair of files, read as transformers' GPT2Tokenizer reads them
    d = os.path.join(OUT, "gpt2_files")
    os.makedirs(d, exist_ok=True)
    toks["gpt2"].model.save(d)
    from transformers import GPT2Tokenizer

    t2 = GPT2Tokenizer.from_pretrained(d)
    exp_lines = [t2(s, add_special_tokens=False)["input_ids"] for s in LINES]
    exp["gpt2_files"] = {
        "lines": exp_lines,
        "whole": t2(TEXT, add_special_tokens=False)["input_ids"],
        "decoded": [t2.decode(ids, skip_special_tokens=False) for ids in exp_lines],
    }
    with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(exp, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")


def live_encode(tok_path, text_path):
    """a tokenizer.json through the tokenizers library, or a folder (GPT-2's vocab.json and
    merges.txt) through transformers' GPT2Tokenizer"""
    with open(text_path, "rb") as f:
        text = f.read().decode("utf-8")
    if os.path.isdir(tok_path):
        from transformers import GPT2Tokenizer

        tok = GPT2Tokenizer.from_pretrained(tok_path)
        enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]
    else:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(tok_path)
        enc = lambda s: tok.encode(s, add_special_tokens=False).ids
    for line in text.split("\n"):
        print(" ".join(str(i) for i in enc(line)))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "encode":
        live_encode(sys.argv[2], sys.argv[3])
    else:
        main()
