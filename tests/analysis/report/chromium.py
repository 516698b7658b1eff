"""Headless Chromium for report tests: where elements land in a 1400x900 first screen,
and whether any chart legend covers a plotting area.

The report holds no script; a copy of it gets a small measuring script that
writes element boxes into the page, read back with ``--dump-dom``.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 1400, 900
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars")

_MEASURE = """
<script>
(function () {
  function box(el) {
    if (!el) return null;
    var r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
  }
  function hit(a, b) {
    return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  }
  var ids = %s, out = {boxes: {}, charts: 0, legends: 0, overlaps: []};
  ids.forEach(function (id) { out.boxes[id] = box(document.getElementById(id)); });
  document.querySelectorAll("svg").forEach(function (svg, i) {
    out.charts += 1;
    var plots = Array.from(svg.querySelectorAll('[id^="ar-plot-"]')).map(box);
    svg.querySelectorAll('[id^="ar-legend-"]').forEach(function (leg) {
      out.legends += 1;
      var lb = box(leg);
      plots.forEach(function (pb, j) {
        if (hit(lb, pb)) out.overlaps.push({chart: i, legend: leg.id, plot: j});
      });
    });
  });
  var pre = document.createElement("pre");
  pre.id = "ar-measure";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "chromium is missing: run scripts/setup_test_env.sh"
    return path


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}",
         f"--window-size={WIDTH},{HEIGHT}", *args],
        capture_output=True, text=True, timeout=180)


def measure(report: Path, ids: list[str], tmp: Path) -> dict[str, Any]:
    """Boxes (viewport pixels) of the elements ``ids`` and legend/plot overlaps per chart."""
    text = report.read_text(encoding="utf-8")
    probe = tmp / f"measure-{report.name}"
    probe.write_text(text.replace("</body>", _MEASURE % json.dumps(ids) + "</body>"),
                     encoding="utf-8")
    proc = _run(["--dump-dom", probe.resolve().as_uri()], tmp)
    m = re.search(r'<pre id="ar-measure">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no measurement from chromium: {proc.stderr[-2000:]}"
    return json.loads(html.unescape(m.group(1)))


def screenshot(report: Path, tmp: Path) -> Path:
    """A 1400x900 screenshot of the report's first screen."""
    shot = tmp / f"{report.stem}-first-screen.png"
    _run([f"--screenshot={shot}", report.resolve().as_uri()], tmp)
    assert shot.exists(), "chromium wrote no screenshot"
    return shot


def in_first_screen(b: dict[str, float] | None) -> bool:
    return b is not None and b["top"] >= 0 and b["bottom"] <= HEIGHT and b["right"] <= WIDTH
