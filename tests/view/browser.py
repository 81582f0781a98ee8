#!/usr/bin/env python3
"""browser.py: opens pages of src/view in headless Chromium and checks them, through the
DevTools protocol over a pipe (--remote-debugging-pipe: NUL-separated JSON on fds 3 and 4, no
websocket, no other package).

For each page: any console error, uncaught exception, log entry of level error (a
Content-Security-Policy violation is one) or network request other than the page itself fails
it. Then, for each tab the page's JSON document has, the DOM is checked against that document
(read from the file here, independently of the page's script): the number of head thumbnails,
the token labels' text (every token as text: the DOM never holds an element the tokens' markup
would make), a real mouse hover (Input.dispatchMouseEvent) that colors the attended tokens and
highlights the row, the layer filter, a click on a thumbnail; tokens colored with a top-k
readout on hover; a table's value on hover; one legend line per run; each plot's first series
drawn on its canvas, its legend, its marked values and a value on hover. A screenshot of each tab
is written with --shots DIR. --expect-text TEXT: the tokens of the first prompt, joined (a
"\\xNN" shown for a byte that is not UTF-8 read back as that byte), must give TEXT's bytes.
--expect-sep SEP: what joins a prompt's first tokens in the prompt selectors' options (" " for
a word-level translator's words, as its detokenization joins them; "" by default: bytes and
characters join with nothing).
--timing: prints the page's first-render time (performance.mark "view-ready", from navigation
start) and its first contentful paint.

Usage: browser.py [--shots DIR] [--prefix NAME] [--expect-text TEXT] [--expect-sep SEP] [--timing]
                  PAGE.html...
Exit 0 when every check passed, 1 with the failures listed, 77 when Chromium is not found."""
import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT = float(os.environ.get("AG_BROWSER_TIMEOUT", "120"))


class Browser:
    def __init__(self, exe, no_sandbox):
        self.dir = tempfile.mkdtemp(prefix="ag-chromium-")
        to_r, to_w = os.pipe()  # we write, Chromium reads on fd 3
        from_r, from_w = os.pipe()  # Chromium writes on fd 4
        args = [exe, "--headless=new", "--remote-debugging-pipe", "--user-data-dir=" + self.dir,
                "--no-first-run", "--no-default-browser-check", "--disable-gpu",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps", "--mute-audio",
                "--allow-file-access-from-files", "about:blank"]
        if no_sandbox:
            args.insert(1, "--no-sandbox")

        def fds():  # (moved above 9 first: a pipe may itself be at 3 or 4)
            hi_r, hi_w = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.log = open(os.path.join(self.dir, "stderr.log"), "wb")
        # (the child's dup2 puts them at 3 and 4, inheritable; every other descriptor of ours
        # is close-on-exec, as Python opens them)
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, preexec_fn=fds, close_fds=False)
        os.close(to_r)
        os.close(from_w)
        self.w, self.r = to_w, from_r
        self.buf = b""
        self.id = 0
        self.events = []

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no answer from Chromium in %.0f s" % TIMEOUT)
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                chunk = os.read(self.r, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed its pipe: " + self.stderr())
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def stderr(self):
        self.log.flush()
        with open(os.path.join(self.dir, "stderr.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")[-2000:]

    def send(self, method, params=None, session=None):
        self.id += 1
        msg = {"id": self.id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.w, data):]
        deadline = time.time() + TIMEOUT
        while True:
            m = self._read(deadline)
            if m.get("id") == self.id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session):
        deadline = time.time() + TIMEOUT
        for i, m in enumerate(self.events):
            if m.get("method") == method and m.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read(deadline)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.w)
        os.close(self.r)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def page_data(path):
    """the page's JSON document, read from the file"""
    html = open(path, "rb").read().decode("utf-8")
    m = re.search(r'<script type="application/json" id="data">\n(.*?)</script>', html, re.S)
    if not m:
        raise ValueError("%s: no JSON block" % path)
    return json.loads(m.group(1))


def shown(s):
    return s.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def unshown_bytes(s):
    """a token's text back to bytes: "\\xNN" (a byte that is not UTF-8) to that byte"""
    out = b""
    for part in re.split(r"(\\x[0-9A-F]{2})", s):
        out += bytes([int(part[2:], 16)]) if re.fullmatch(r"\\x[0-9A-F]{2}", part) else \
            part.encode("utf-8")
    return out


class Page:
    def __init__(self, b, path, fails, name):
        self.b, self.path, self.fails, self.name = b, path, fails, name
        self.target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.s = b.send("Target.attachToTarget", {"targetId": self.target, "flatten": True})[
            "sessionId"]
        for d in ("Runtime", "Log", "Network", "Page"):
            b.send(d + ".enable", session=self.s)
        b.send("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900,
               "deviceScaleFactor": 1, "mobile": False}, session=self.s)
        self.url = "file://" + os.path.abspath(path)
        b.send("Page.navigate", {"url": self.url}, session=self.s)
        b.wait_event("Page.loadEventFired", self.s)

    def js(self, expr):
        r = self.b.send("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                        "awaitPromise": True}, session=self.s)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr[:80], r["exceptionDetails"]))
        return r["result"].get("value")

    def check(self, ok, what):
        if not ok:
            self.fails.append("%s: %s" % (self.name, what))
        return ok

    def mouse(self, selector, kind="mouseMoved", shift=False):
        """moves the mouse to the centre of the element (scrolled into view), or clicks it"""
        box = self.js("(() => { const e = document.querySelector(%s); if (!e) return null; "
                      "e.scrollIntoView({block: 'center', inline: 'center'}); "
                      "const r = e.getBoundingClientRect(); return [r.left + r.width / 2, "
                      "r.top + r.height / 2]; })()" % json.dumps(selector))
        if not self.check(box is not None, "no element %s to point at" % selector):
            return
        p = {"x": box[0], "y": box[1], "modifiers": 8 if shift else 0}
        if kind == "click":
            self.b.send("Input.dispatchMouseEvent", dict(p, type="mouseMoved"), session=self.s)
            for t in ("mousePressed", "mouseReleased"):
                self.b.send("Input.dispatchMouseEvent", dict(p, type=t, button="left",
                            clickCount=1), session=self.s)
        else:
            self.b.send("Input.dispatchMouseEvent", dict(p, type="mouseMoved"), session=self.s)

    def shot(self, path):
        self.js("window.scrollTo(0, 0)")
        data = self.b.send("Page.captureScreenshot", {"format": "png"}, session=self.s)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def problems(self):
        """console errors, exceptions, error log entries and requests seen so far"""
        for m in self.b.events:
            if m.get("sessionId") != self.s:
                continue
            meth, p = m.get("method"), m.get("params", {})
            if meth == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
                self.check(False, "console %s: %s" % (p["type"], args))
            elif meth == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                self.check(False, "uncaught exception: %s %s" % (
                    d.get("text"), d.get("exception", {}).get("description", "")))
            elif meth == "Log.entryAdded" and p["entry"]["level"] == "error":
                self.check(False, "log error: %s" % p["entry"]["text"])
            elif meth == "Network.requestWillBeSent" and p["request"]["url"] != self.url:
                self.check(False, "network request: %s" % p["request"]["url"][:200])


def js_slice(s, n):
    """JavaScript's s.slice(0, n): n UTF-16 code units"""
    return s.encode("utf-16-le", "surrogatepass")[:2 * n].decode("utf-16-le", "surrogatepass")


def prompt_options(pg, select_id, rows, key, sep):
    """the options of a prompt selector: "i: " and the first 12 tokens joined by sep, shown"""
    got = pg.js("[...document.querySelectorAll('#%s option')].map(o => o.textContent)" % select_id)
    want = ["%d: %s" % (i, js_slice(shown(sep.join(r[key][:12])), 40)) for i, r in enumerate(rows)]
    pg.check(got == want, "%s: the prompt selector shows %r, not %r (tokens joined by %r)"
             % (select_id, got[:2], want[:2], sep))


def check_attention(pg, data, shots, prefix, expect_text, sep):
    for si, S in enumerate(data["attention"]):
        if si:
            pg.js("(() => { const s = document.getElementById('att-set'); s.value = %d; "
                  "s.dispatchEvent(new Event('change')); })()" % si)
        P = S["prompts"][0]
        q, k = P["q"], P["k"] or P["q"]
        prompt_options(pg, "att-prompt", S["prompts"], "q", sep)
        L, H = S["layers"], S["heads"]
        n = pg.js("document.querySelectorAll('#thumbs .thumb').length")
        pg.check(n == L * H, "%s: %s thumbnails, the model has %d x %d heads" % (S["name"], n, L, H))
        strip = pg.js("[...document.querySelectorAll('#att-strip .tok')].map(e => e.textContent)")
        pg.check(strip == [shown(s) for s in q], "%s: the token strip is not the tokens as "
                 "text: %r" % (S["name"], strip[:20]))
        kstrip = pg.js("[...document.querySelectorAll('#att-kstrip .tok')].map(e => e.textContent)")
        pg.check(kstrip == ([] if P["k"] is None else [shown(s) for s in k]),
                 "%s: the keys' strip is not the keys as text: %r" % (S["name"], kstrip[:20]))
        ylab = pg.js("[...document.querySelectorAll('#big .ylab .lab')].map(e => e.textContent)")
        xlab = pg.js("[...document.querySelectorAll('#big .xlab .lab')].map(e => e.textContent)")
        pg.check(ylab == [shown(s) for s in q] and xlab == [shown(s) for s in k],
                 "%s: the large pattern's axis labels are not the tokens" % S["name"])
        if expect_text is not None and si == 0:
            got = b"".join(unshown_bytes(s) for s in q)
            pg.check(got == expect_text.encode("utf-8"), "the tokens joined give %r, not %r"
                     % (got, expect_text))
        colored = "[...document.querySelectorAll('#att-strip .tok, #att-kstrip .tok')].filter(" \
                  "e => e.style.background).length"
        pg.check(pg.js(colored) == 0, "%s: tokens colored before any hover" % S["name"])
        # hover the last query token of the strip (a causal one sees every key)
        last = len(q) - 1 if S["causal"] else 0
        pg.mouse("#att-strip .tok[data-i='%d']" % last)
        c = pg.js(colored)
        pg.check(c >= 1, "%s: hovering token %d colored no token" % (S["name"], last))
        pg.check(pg.js("document.querySelectorAll('#big .ylab .lab.hl').length") == 1,
                 "%s: hovering a token highlighted no row label of the large pattern" % S["name"])
        # the last head, clicked
        pg.mouse("#thumb-%d-%d" % (L - 1, H - 1), "click")
        title = pg.js("document.getElementById('big-title').textContent")
        pg.check(title.startswith("layer %d, head %d" % (L - 1, H - 1)),
                 "%s: clicking L%dH%d shows '%s'" % (S["name"], L - 1, H - 1, title))
        if shots and si == 0:
            pg.shot(os.path.join(shots, prefix + "attention.png"))
        if shots and si > 0:
            pg.shot(os.path.join(shots, prefix + "attention-%d.png" % si))
        vis = "[...document.querySelectorAll('#thumbs .thumb')].filter(e => " \
              "e.style.display !== 'none').length"
        pg.js("(() => { const f = document.getElementById('layer-filter'); f.value = '0'; "
              "f.dispatchEvent(new Event('input')); })()")
        pg.check(pg.js(vis) == H, "%s: the layer filter '0' leaves %s thumbnails, not %d"
                 % (S["name"], pg.js(vis), H))
        pg.js("(() => { const f = document.getElementById('layer-filter'); f.value = ''; "
              "f.dispatchEvent(new Event('input')); })()")


def check_tokens(pg, data, shots, prefix, sep):
    T = data["tokens"]
    pg.mouse("#tab-tokens", "click")
    prompt_options(pg, "tok-prompt", T["prompts"], "tok", sep)
    texts = pg.js("[...document.querySelectorAll('#tok-strip .tok')].map(e => e.textContent)")
    pg.check(texts == [shown(s) for s in T["prompts"][0]["tok"]], "tokens: the strip is not the "
             "tokens as text")
    n = pg.js("[...document.querySelectorAll('#tok-strip .tok')].filter(e => "
              "e.style.background).length")
    pg.check(n >= 1, "tokens: no token colored by the measure")
    pg.mouse("#tok-strip .tok[data-i='%d']" % (len(texts) // 2))
    r = pg.js("document.getElementById('tokreadout').textContent")
    label = T.get("top_label", "top predictions of the next token")
    top = T["prompts"][0]["top"][len(texts) // 2]
    pg.check(label in r and (not top or shown(top[0][0]) in r),
             "tokens: hovering a token shows no top-k: %r" % r)
    if shots:
        pg.shot(os.path.join(shots, prefix + "tokens.png"))
    # the selector lists every measure (grouped by the name's text before ": "); choosing a
    # direct-logit-attribution part recolors the tokens by it, its value on hover
    opts = pg.js("[...document.querySelectorAll('#tok-measure option')].map(o => "
                 "(o.parentNode.label ? o.parentNode.label + ': ' : '') + o.textContent)")
    pg.check(opts == [m["name"] for m in T["measures"]], "tokens: the selector lists %r, not the "
             "measures" % opts[:8])
    dla = [i for i, m in enumerate(T["measures"]) if m["name"].startswith("direct logit")]
    if dla:
        k = max(dla, key=lambda i: sum(abs(v or 0) for v in T["measures"][i]["values"][0]))
        bg = "[...document.querySelectorAll('#tok-strip .tok')].map(e => e.style.background)"
        before = pg.js(bg)
        pg.js("(() => { const s = document.getElementById('tok-measure'); s.value = '%d'; "
              "s.dispatchEvent(new Event('change')); })()" % k)
        after = pg.js(bg)
        vals = T["measures"][k]["values"][0]
        pg.check(after != before and all((v is None) == (c == "") for v, c in zip(vals, after)),
                 "tokens: choosing %s did not recolor the tokens by it" % T["measures"][k]["name"])
        i = max(range(len(vals)), key=lambda j: abs(vals[j] or 0))
        pg.mouse("#tok-strip .tok[data-i='%d']" % i)
        r = pg.js("document.getElementById('tokreadout').textContent")
        pg.check("%s: %.4f" % (T["measures"][k]["name"], vals[i]) in r,
                 "tokens: hovering token %d under %s shows %r" % (i, T["measures"][k]["name"], r))
        if shots:
            pg.shot(os.path.join(shots, prefix + "tokens-dla.png"))


def check_tables(pg, data, shots, prefix):
    pg.mouse("#tab-tables", "click")
    pg.check(pg.js("!!document.getElementById('tab-canvas')"), "tables: no heatmap")
    t = data["tables"][0]
    ylab = pg.js("[...document.querySelectorAll('#tables .ylab .lab')].map(e => e.textContent)")
    pg.check(ylab == [shown(s) for s in t["rows"]], "tables: the row labels are not the table's")
    pg.mouse("#tab-canvas")
    r = pg.js("document.getElementById('tabreadout').textContent")
    pg.check(": " in r, "tables: hovering the heatmap shows no value: %r" % r)
    if shots:
        pg.shot(os.path.join(shots, prefix + "tables.png"))


def check_runs(pg, data, shots, prefix):
    pg.mouse("#tab-runs", "click")
    n = pg.js("document.querySelectorAll('#run-legend div').length")
    pg.check(n == len(data["runs"]), "runs: %s legend lines for %d runs" % (n, len(data["runs"])))
    pg.mouse("#run-log", "click")
    pg.check(pg.js("document.getElementById('run-log').checked") is True,
             "runs: the log-scale box did not toggle")
    if shots:
        pg.shot(os.path.join(shots, prefix + "runs.png"))


def check_plots(pg, data, shots, prefix):
    """each plot drawn: a canvas with pixels of its first series' color (the curve or the bars),
    one legend entry a series, the marked x values (key frequencies) listed, a value on hover"""
    pg.mouse("#tab-plots", "click")
    plots = data["plots"]
    n = pg.js("document.querySelectorAll('#plots canvas.plot-canvas').length")
    pg.check(n == len(plots), "plots: %s canvases for %d plots" % (n, len(plots)))
    for i, P in enumerate(plots):
        leg = pg.js("document.querySelectorAll('#plot-%d .plot-legend span:not(.plot-marks)')"
                    ".length" % i)
        pg.check(leg == len(P["series"]), "plot %s: %s legend entries for %d series"
                 % (P["name"], leg, len(P["series"])))
        # the first series' color (a bar of another color when it is marked), counted on canvas
        rgb = [31, 119, 180]
        if P.get("bars") and P.get("marks") and all(x in P["marks"] for x in P["x"]):
            rgb = [214, 39, 40]
        drawn = pg.js("(() => { const c = document.querySelector('#plot-%d canvas'); const d = "
                      "c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0; "
                      "for (let i = 0; i < d.length; i += 4) n += d[i] === %d && d[i + 1] === %d "
                      "&& d[i + 2] === %d; return n; })()" % (i, rgb[0], rgb[1], rgb[2]))
        has = any(v is not None and v > 0 for v in P["series"][0]["y"])
        pg.check(drawn > 0 or not has, "plot %s: its first series is not drawn" % P["name"])
        if P.get("marks"):
            m = pg.js("document.querySelector('#plot-%d .plot-marks').textContent" % i)
            pg.check(m.endswith(": " + " ".join(str(x) for x in P["marks"])),
                     "plot %s: the marks listed as %r, not %r" % (P["name"], m, P["marks"]))
    pg.mouse("#plot-0 canvas")
    r = pg.js("document.querySelector('#plot-0 .plotreadout').textContent")
    name = plots[0]["series"][0]["name"]
    pg.check(name + " " in r, "plots: hovering the first plot shows no value: %r" % r)
    if shots:
        pg.shot(os.path.join(shots, prefix + "plots.png"))


def main():
    args, shots, prefix, expect, sep, timing = sys.argv[1:], None, "", None, "", False
    pages = []
    while args:
        a = args.pop(0)
        if a == "--shots":
            shots = args.pop(0)
        elif a == "--prefix":
            prefix = args.pop(0)
        elif a == "--expect-text":
            expect = args.pop(0)
        elif a == "--expect-sep":
            sep = args.pop(0)
        elif a == "--timing":
            timing = True
        else:
            pages.append(a)
    exe = os.environ.get("AG_CHROMIUM") or shutil.which("chromium") or \
        shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not exe:
        print("browser.py: no chromium on PATH (Debian's chromium package): skipped")
        return 77
    if shots:
        os.makedirs(shots, exist_ok=True)
    fails = []
    # Chromium refuses to run as root with its sandbox; an ordinary user gets the sandbox, unless
    # the machine cannot give one (no user namespaces, as in many containers)
    b = Browser(exe, os.geteuid() == 0)
    try:
        b.send("Browser.getVersion")
    except RuntimeError as e:
        if "sandbox" not in str(e).lower():
            raise
        b.close()
        print("browser.py: Chromium has no usable sandbox here: run with --no-sandbox")
        b = Browser(exe, True)
    try:
        for path in pages:
            data = page_data(path)
            name = os.path.basename(path)
            pg = Page(b, path, fails, name)
            if timing:
                t = pg.js("new Promise(r => requestAnimationFrame(() => setTimeout(() => r(["
                          "performance.getEntriesByName('view-ready')[0]?.startTime, "
                          "performance.getEntriesByName('view-start')[0]?.startTime, "
                          "performance.getEntriesByName('first-contentful-paint')[0]?.startTime"
                          "]), 0)))")
                print("%s: %d bytes, first screen built %.0f ms after navigation start (its "
                      "script: %.0f ms), first contentful paint %s ms"
                      % (name, os.path.getsize(path), t[0] or -1, (t[0] or 0) - (t[1] or 0),
                         "%.0f" % t[2] if t[2] else "-"), flush=True)
            pg.check(pg.js("document.scripts.length") == 2, "the page holds %s scripts, not 2"
                     % pg.js("document.scripts.length"))
            if data.get("attention"):
                check_attention(pg, data, shots, prefix, expect, sep)
            if data.get("tokens"):
                check_tokens(pg, data, shots, prefix, sep)
            if data.get("tables"):
                check_tables(pg, data, shots, prefix)
            if data.get("runs"):
                check_runs(pg, data, shots, prefix)
            if data.get("plots"):
                check_plots(pg, data, shots, prefix)
            pg.check(pg.js("document.querySelectorAll('body b, body img, body iframe, "
                           "body a').length") == 0, "markup from the data became elements")
            pg.check(pg.js("document.scripts.length") == 2, "a script element appeared")
            pg.problems()
            b.send("Target.closeTarget", {"targetId": pg.target})
            print("%s: %s" % (name, "checked" if not [f for f in fails if f.startswith(name)]
                              else "FAILED"))
    finally:
        b.close()
    for f in fails:
        print("FAIL " + f)
    return 1 if fails else 0


sys.exit(main())
