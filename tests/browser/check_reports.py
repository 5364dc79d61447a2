"""Renders HTML reports in headless Chromium, as a person would open them, and fails on what a
person would see wrong: a script error, a page wider than a 1280-px window (horizontal
scrolling), or a figure with nothing drawn in it.

    python3 tests/browser/check_reports.py [--shots DIR] REPORT.html|DIR ...

Directories are searched for *.html. Each page is checked by a copy with a small probe script
placed first in its <head>: the probe records script errors and, once the page has loaded,
measures the page's width against the window's and counts each inline SVG figure's data
marks (shapes stroked or filled in a series colour of the charts' palette; axes, grid and text
are black or grey). Chromium prints the DOM after load (--dump-dom) and the script reads the
probe's result from it. A screenshot of each page (1280 x 2400) goes to --shots.

Standard library only; Chromium is Debian's `chromium` package (`.ci/run` installs it). Each
Chromium run is bounded by a timeout.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WIDTH = 1280
# The charts' series colours (mm_fit::html's PALETTE), as plotters writes them.
PALETTE = ["#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2", "#17BECF"]

PROBE = """<script>
window.__mmErrors = [];
window.addEventListener('error', function (e) { window.__mmErrors.push(String(e.message || e)); });
window.addEventListener('load', function () {
  var palette = %(palette)s;
  var figures = Array.prototype.slice.call(document.querySelectorAll('svg'));
  var empty = [];
  figures.forEach(function (svg, i) {
    var marks = 0;
    svg.querySelectorAll('*').forEach(function (el) {
      var s = (el.getAttribute('stroke') || '').toUpperCase();
      var f = (el.getAttribute('fill') || '').toUpperCase();
      if (palette.indexOf(s) >= 0 || palette.indexOf(f) >= 0) { marks++; }
    });
    var box = svg.getBoundingClientRect();
    var title = (svg.querySelector('text') || {}).textContent || ('figure ' + (i + 1));
    if (marks === 0 || box.width < 10 || box.height < 10) { empty.push(title); }
  });
  var d = document.documentElement;
  var out = {
    scrollWidth: Math.max(d.scrollWidth, document.body ? document.body.scrollWidth : 0),
    innerWidth: window.innerWidth,
    figures: figures.length,
    empty: empty,
    noChart: document.querySelectorAll('.no-chart').length,
    errors: window.__mmErrors
  };
  var pre = document.createElement('pre');
  pre.id = 'mm-probe';
  pre.style.display = 'none';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    sys.exit("check_reports: no chromium on the PATH (Debian: apt-get install chromium)")


def flags(profile: str) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ]


def run(cmd: list[str], timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def check(exe: str, page: Path, shots: Path | None, tmp: Path) -> list[str]:
    src = page.read_text(encoding="utf-8")
    probe = PROBE % {"palette": json.dumps(PALETTE)}
    probed = re.sub(r"<head>", "<head>" + probe, src, count=1, flags=re.IGNORECASE)
    if probed == src:
        return [f"{page}: no <head> to place the probe in"]
    copy = tmp / ("probe-" + page.name)
    copy.write_text(probed, encoding="utf-8")
    profile = tmp / "profile"
    r = run([exe, *flags(str(profile)), f"--window-size={WIDTH},900", "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()])
    m = re.search(r'<pre id="mm-probe"[^>]*>(.*?)</pre>', r.stdout, flags=re.DOTALL)
    if not m:
        return [f"{page}: the page did not finish loading in Chromium (exit {r.returncode}): {r.stderr[-400:]}"]
    res = json.loads(html.unescape(m.group(1)))
    problems = []
    if res["errors"]:
        problems.append(f"{page}: script errors: {res['errors']}")
    if res["scrollWidth"] > res["innerWidth"]:
        problems.append(f"{page}: {res['scrollWidth']} px wide in a {res['innerWidth']}-px window (horizontal scrolling)")
    if res["empty"]:
        problems.append(f"{page}: figures with nothing drawn: {res['empty']}")
    print(
        f"{page}: {res['scrollWidth']} px in a {res['innerWidth']}-px window, {res['figures']} figures "
        f"({len(res['empty'])} empty), {res['noChart']} figures replaced by a reason, {len(res['errors'])} script errors"
    )
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
        name = "_".join(page.resolve().parts[-3:]).replace(".html", ".png")
        shot = shots / name
        r = run([exe, *flags(str(profile)), f"--window-size={WIDTH},2400", "--virtual-time-budget=5000", f"--screenshot={shot}", page.resolve().as_uri()])
        if not shot.exists():
            problems.append(f"{page}: no screenshot (exit {r.returncode}): {r.stderr[-400:]}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--shots", type=Path, help="folder for the screenshots")
    ap.add_argument("--min-pages", type=int, default=1, help="fail when fewer pages are found")
    a = ap.parse_args()
    pages: list[Path] = []
    for p in a.paths:
        pages.extend(sorted(p.rglob("*.html")) if p.is_dir() else [p])
    if len(pages) < a.min_pages:
        print(f"check_reports: {len(pages)} pages found under {[str(p) for p in a.paths]}, expected at least {a.min_pages}")
        return 1
    exe = chromium()
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for page in pages:
            try:
                problems.extend(check(exe, page, a.shots, Path(tmp)))
            except subprocess.TimeoutExpired:
                problems.append(f"{page}: Chromium did not finish within its time limit")
    for p in problems:
        print("FAIL", p)
    print(f"check_reports: {len(pages)} pages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    os.environ.setdefault("LC_ALL", "C.UTF-8")
    sys.exit(main())
