#!/usr/bin/env python3
"""check_docs.py: every relative link of the given Markdown files resolves (make check-docs,
run by make test).

Usage: scripts/check_docs.py FILE.md...
       scripts/check_docs.py --self-test   (the checker on a tree of its own: it finds what it
                                            should, and only that)

A link is [text](target) or an image ![alt](target) outside code (fenced blocks and `spans`),
or a reference definition "[name]: target". Links with a scheme (https:, mailto:, ...) are not
checked. For the others: the path, relative to the file's folder, must exist in the tree; a
#anchor into a .md file (or into the file itself, "#anchor") must be the anchor GitHub gives one
of its headings: the heading's text without its Markdown (code ticks, links, emphasis),
lower-cased, every character that is not a letter, digit, '_', '-' or space dropped, spaces
turned into '-'; a repeated heading gets -1, -2, ... Prints each broken link as
"file:line: target: reason" and exits 1 when there is one, 0 otherwise.
"""
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def lines_outside_fences(path):
    """(line number, text) of each line outside fenced code blocks"""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                if fence is None:
                    fence = m.group(1)
                elif m.group(1) == fence:
                    fence = None
            elif fence is None:
                yield n, line


def lines_outside_code(path):
    """the same, indented code blocks and inline code left out"""
    for n, line in lines_outside_fences(path):
        if not line.startswith("    "):
            yield n, re.sub(r"(`+)(.+?)\1", "", line)


def slug(text):
    """GitHub's anchor of a heading's text"""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


anchors_cache = {}


def anchors(path):
    if path not in anchors_cache:
        seen, found = {}, set()
        for _, line in lines_outside_fences(path):
            h = HEADING.match(line)
            if not h:
                continue
            s = slug(h.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else "%s-%d" % (s, k))
        anchors_cache[path] = found
    return anchors_cache[path]


def check(path):
    bad = []
    for n, line in lines_outside_code(path):
        targets = [m.group(1) for m in LINK.finditer(line)]
        r = REFDEF.match(line)
        if r:
            targets.append(r.group(1))
        for t in targets:
            if not t or SCHEME.match(t):
                continue
            file_part, _, anchor = t.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if not os.path.exists(target):
                bad.append("%s:%d: %s: %s does not exist" % (path, n, t, target))
            elif anchor and target.endswith(".md") and anchor not in anchors(target):
                bad.append("%s:%d: %s: %s has no heading with the anchor #%s"
                           % (path, n, t, target, anchor))
    return bad


def self_test():
    """the checker on a tree of its own: each kind of broken link is found, good ones are not"""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs", "images"))
        open(os.path.join(d, "docs", "images", "a.png"), "w").close()
        with open(os.path.join(d, "docs", "b.md"), "w", encoding="utf-8") as f:
            f.write("# B\n## Hello, `World`!\n## Hello, World\n```\n# not a heading\n```\n")
        good = ["images/a.png", "b.md", "b.md#b", "b.md#hello-world", "b.md#hello-world-1",
                "#a-page", "https://example.com/x.md#nowhere", "images/"]
        bad = ["images/b.png", "docs/images/a.png", "b.md#hello", "b.md#not-a-heading",
               "b.md#hello-world-2", "#nowhere", "../b.md"]
        page = os.path.join(d, "docs", "a.md")
        with open(page, "w", encoding="utf-8") as f:
            f.write("# A page\n")
            for i, t in enumerate(good + bad):
                f.write("[link %d](%s) and `[code](nowhere.md)`\n" % (i, t))
            f.write("[ref]: missing.md\n```\n[fenced](nowhere.md)\n```\n")
        found = check(page)
        want = ["%s:%d: %s:" % (page, 2 + len(good) + i, t) for i, t in enumerate(bad)]
        want.append("%s:%d: missing.md:" % (page, 2 + len(good) + len(bad)))
        missed = [w for w in want if not any(b.startswith(w) for b in found)]
        extra = [b for b in found if not any(b.startswith(w) for w in want)]
    for m in missed:
        print("check-docs self-test: not found: " + m)
    for e in extra:
        print("check-docs self-test: found but good: " + e)
    return 1 if missed or extra else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    bad = [b for p in argv[1:] for b in check(p)]
    for b in bad:
        print(b)
    print("check-docs: %d files, %s" % (len(argv) - 1,
                                         "%d broken link%s" % (len(bad), "" if len(bad) == 1 else "s") if bad
                                         else "every relative link resolves"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
