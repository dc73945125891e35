#!/usr/bin/env python3
"""Opens `osdp report`'s page in headless Chromium and checks that it drew every figure.

    check_report_page.py PAGE.html SCREENSHOT.png

Fails (exit 1) on a script error or console error, when the page did not finish drawing, or when
a figure is missing or empty (DOM queries on the page as Chromium rendered it); saves a
screenshot. Exits 77 (CTest: skipped) when Chromium is not installed.
"""
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIPPED = 77

# Chromium as the machine image's probe starts it: no sandbox (root in CI), no GPU, and none of
# its background connections (this machine has no network).
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--enable-logging=stderr", "--v=0",
]


class Dom(html.parser.HTMLParser):
    """The rendered DOM, kept as the few facts the checks need."""

    def __init__(self):
        super().__init__()
        self.body = {}
        self.stack = []  # ids of the open elements that have one
        self.counts = {}  # (enclosing id, tag, class) -> count
        self.text_of = {}  # id -> text
        self.open_ids = []

    def handle_starttag(self, tag, attributes):
        attributes = dict(attributes)
        if tag == "body":
            self.body = attributes
        for enclosing in self.open_ids:
            key = (enclosing, tag, attributes.get("class", ""))
            self.counts[key] = self.counts.get(key, 0) + 1
        self.stack.append(attributes.get("id"))
        if attributes.get("id"):
            self.open_ids.append(attributes["id"])
            self.text_of.setdefault(attributes["id"], "")

    def handle_endtag(self, tag):
        if not self.stack:
            return
        closed = self.stack.pop()
        if closed and self.open_ids and self.open_ids[-1] == closed:
            self.open_ids.pop()

    def handle_data(self, data):
        for enclosing in self.open_ids:
            self.text_of[enclosing] += data

    def count(self, enclosing, tag, css_class=None):
        return sum(n for (where, t, c), n in self.counts.items()
                   if where == enclosing and t == tag and (css_class is None or c == css_class))


def chromium():
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run_browser(browser, profile, extra, page):
    return subprocess.run([browser] + FLAGS + [f"--user-data-dir={profile}"] + extra +
                          ["file://" + os.path.abspath(page)],
                          capture_output=True, text=True, timeout=120)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    page, screenshot = sys.argv[1], sys.argv[2]
    browser = chromium()
    if browser is None:
        print("skipped: Chromium is not installed (scripts/install-deps.sh installs Debian's "
              "chromium)")
        return SKIPPED
    # A browser that cannot even report its version is a broken installation, not a page error.
    try:
        version = subprocess.run([browser, "--version"], capture_output=True, text=True,
                                 timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"skipped: {browser} does not run ({error})")
        return SKIPPED
    if version.returncode != 0:
        print(f"skipped: {browser} --version exited {version.returncode}: {version.stderr[-500:]}")
        return SKIPPED
    failures = []
    with tempfile.TemporaryDirectory() as profile:
        dumped = run_browser(browser, profile, ["--dump-dom"], page)
        # Script errors and console.error calls, as Chromium logs them.
        for line in dumped.stderr.splitlines():
            if re.search(r"CONSOLE.*(Uncaught|Error)|:ERROR:CONSOLE", line):
                failures.append("console: " + line.strip())
        dom = Dom()
        dom.feed(dumped.stdout)
        shot = run_browser(browser, profile,
                           ["--window-size=1280,6000", f"--screenshot={screenshot}"], page)
    if dumped.returncode != 0:
        failures.append(f"chromium --dump-dom exited {dumped.returncode}: {dumped.stderr[-2000:]}")
    if dom.body.get("data-rendered") != "yes":
        failures.append(f"the page did not finish drawing (data-rendered = "
                        f"{dom.body.get('data-rendered')!r})")
    if dom.body.get("data-errors"):
        failures.append("script errors on the page: " + dom.text_of.get("page-errors", "").strip())

    operators = dom.count("plan-map-svg", "g", "operator")
    checks = [
        ("plan map: one box per operator", operators, 1),
        ("memory bars: stacked parts", dom.count("memory-bars-svg", "rect", "memory-part"), 4),
        ("collectives table rows", dom.count("collectives", "tr"), 3),
        ("mode cards", dom.count("mode-cards", "div", "mode"), 2),
        ("throughput plot: curves", dom.count("throughput-svg", "polyline"), 2),
        ("throughput plot: points", dom.count("throughput-svg", "circle"), 8),
        ("timeline: spans", dom.count("timeline-svg", "rect", "span"), 10),
        ("memory timeline: areas", dom.count("memory-timeline-svg", "polygon", "memory-area"), 2),
        ("3D layouts: the strategies' rows", dom.count("layouts", "tr"), 6),
        ("3D layouts: each stage's memory parts", dom.count("layout-memory-svg", "rect", "stage-memory"), 2),
        ("3D layouts: the pipeline's passes", dom.count("pipeline-svg", "rect", "pass"), 2),
        ("why: operator classes", dom.count("why", "div", "class"), 1),
        ("why: reasons", dom.count("why", "p", "why"), 1),
    ]
    for what, found, least in checks:
        if found < least:
            failures.append(f"{what}: {found} found, expected at least {least}")
    if not dom.text_of.get("summary-text", "").strip():
        failures.append("the summary is empty")
    if shot.returncode != 0 or not os.path.exists(screenshot) or os.path.getsize(screenshot) < 10000:
        failures.append(f"no screenshot written to {screenshot} (exit {shot.returncode})")

    for failure in failures:
        print("FAIL", failure)
    if failures:
        return 1
    print(f"ok: {operators} operators on the plan map, every figure drawn, no console error; "
          f"screenshot {screenshot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
