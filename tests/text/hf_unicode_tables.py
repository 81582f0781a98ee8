"""hf_unicode_tables.py: writes src/text/hf_unicode.c, the Unicode classes GPT-2's split pattern
uses (\\p{L}, \\p{N}, \\s), read from the regex engine the `tokenizers` library itself runs
(Oniguruma, through tokenizers.pre_tokenizers.Split), so that attograd's split agrees with it
code point by code point; and the code points that NFC may change (from Python's unicodedata).
Run by hand: /opt/tl/bin/python tests/text/hf_unicode_tables.py (needs `pip install tokenizers`).
"""
import unicodedata
import tokenizers
from tokenizers import pre_tokenizers as P, Regex

CPS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def members(cls):
    """code points the engine matches with the one-character class cls"""
    s = "".join(chr(c) for c in CPS)
    out = set()
    # a piece left after removing the class is not in it; the rest is
    kept = P.Split(Regex(cls + "+"), "removed").pre_tokenize_str(s)
    mask = [True] * len(CPS)
    for _, (a, b) in kept:
        for i in range(a, b):
            mask[i] = False
    return {CPS[i] for i in range(len(CPS)) if mask[i]}


def ranges(cps):
    out, run = [], None
    for c in sorted(cps):
        if run and c == run[1] + 1:
            run[1] = c
        else:
            run = [c, c]
            out.append(run)
    return out


def nfc_unsafe():
    """A superset of the code points whose presence lets NFC change a text: those NFC changes
    alone, those with a combining class (reordering, composition), those that are the second
    part of a canonical decomposition (they may compose with what precedes), and the Hangul
    vowel and trailing jamo. A text with none of them is its own NFC."""
    out = set()
    for c in CPS:
        ch = chr(c)
        if unicodedata.normalize("NFC", ch) != ch or unicodedata.combining(ch):
            out.add(c)
        d = unicodedata.decomposition(ch)
        if d and not d.startswith("<"):
            parts = [int(x, 16) for x in d.split()]
            out.update(parts[1:])
    out.update(range(0x1161, 0x1176))
    out.update(range(0x11A8, 0x11C3))
    return out


def table(name, rs):
    lines = [f"const uint32_t {name}[][2] = {{"]
    row = ""
    for a, b in rs:
        cell = f"{{0x{a:X}, 0x{b:X}}}, "
        if len(row) + len(cell) > 96:
            lines.append("    " + row.rstrip())
            row = ""
        row += cell
    lines.append("    " + row.rstrip())
    lines.append("};")
    lines.append(f"const int {name}_n = {len(rs)};")
    return "\n".join(lines)


def main():
    L, N, S = members(r"\p{L}"), members(r"\p{N}"), members(r"\s")
    U = nfc_unsafe()
    with open("src/text/hf_unicode.c", "w") as f:
        f.write(
            "/* hf_unicode.c: Unicode classes as inclusive ranges of code points, sorted, written by\n"
            " * tests/text/hf_unicode_tables.py (do not edit): \\p{L}, \\p{N} and \\s as the regex engine\n"
            f" * of the tokenizers library {tokenizers.__version__} matches them (GPT-2's split pattern), and\n"
            f" * the code points that may let NFC change a text (Python's unicodedata {unicodedata.unidata_version}).\n"
            " * Read next: hf_tokenizer.c (the split that uses them). */\n"
            '#include "hf_internal.h"\n\n'
        )
        for name, s in (("txt_hf_letter", L), ("txt_hf_number", N), ("txt_hf_space", S),
                        ("txt_hf_nfc_unsafe", U)):
            f.write(table(name, ranges(s)) + "\n\n")
    print(len(L), len(N), len(S), len(U))


if __name__ == "__main__":
    main()
