#!/usr/bin/env python3
"""embed_page.py: src/view/page.html -> src/view/page.c (the page as two C strings, before and
after its <!--DATA--> line). Usage: scripts/embed_page.py [--check]  (--check: exit 1 when
page.c is not what page.html gives; tests/view/test_browser.sh runs it)."""
import sys

SRC, OUT = "src/view/page.html", "src/view/page.c"


def c_string(name, text):
    out = ["const char %s[] =" % name]
    for line in text.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.append('    "%s"' % esc)
    return "\n".join(out) + ";\n"


def main():
    html = open(SRC, encoding="utf-8").read()
    head, sep, tail = html.partition("<!--DATA-->\n")
    if not sep:
        sys.exit("%s: no <!--DATA--> line" % SRC)
    text = ("/* page.c: generated from page.html by scripts/embed_page.py; edit page.html and run\n"
            " * it again. */\n#include \"view.h\"\n\n/* clang-format off */\n" +
            c_string("view_page_head", head) + "\n" + c_string("view_page_tail", tail) +
            "/* clang-format on */\n")
    if sys.argv[1:] == ["--check"]:
        if open(OUT, encoding="utf-8").read() != text:
            sys.exit("%s is not what %s gives: run scripts/embed_page.py" % (OUT, SRC))
        return
    open(OUT, "w", encoding="utf-8").write(text)


main()
