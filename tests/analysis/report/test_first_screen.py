"""Issue 36's check in headless Chromium: the first 1400x900 screen of a comparison
report and of a history view holds the decision sentence and the Pareto chart, and no
capacity bracket is drawn inside a data panel (where it could be read as a value)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from replay.cli import main
from tests.analysis.report.builders import make_sweep
from tests.analysis.report.chromium import WIDTH, _run, in_first_screen, measure

pytestmark = pytest.mark.integration  # a browser

_SPANS = """
<script>
(function () {
  function box(el) {
    var r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
  }
  function inside(a, b) {
    return a.top >= b.top - 1 && a.bottom <= b.bottom + 1;
  }
  var out = [];
  document.querySelectorAll("svg").forEach(function (svg) {
    var spans = svg.querySelectorAll('[id^="ar-cap-"]');
    if (!spans.length) return;
    var plots = Array.from(svg.querySelectorAll('[id^="ar-plot-"]')).map(box);
    spans.forEach(function (s) {
      var b = box(s);
      out.push({id: s.id, plots: plots.map(function (p) { return inside(b, p); })});
    });
  });
  var pre = document.createElement("pre");
  pre.id = "ar-spans";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def _span_panels(report: Path, tmp: Path) -> list[dict[str, object]]:
    """Per capacity span: which of its chart's plotting areas it lies within."""
    probe = tmp / f"spans-{report.name}"
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>", _SPANS + "</body>"),
                     encoding="utf-8")
    proc = _run(["--dump-dom", probe.resolve().as_uri()], tmp)
    m = re.search(r'<pre id="ar-spans">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stderr[-2000:]
    return list(json.loads(html.unescape(m.group(1))))


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("first")
    return (make_sweep(root / "before"),
            make_sweep(root / "after", arms={"auto": 0.006, "latency_specialized": 0.004}))


@pytest.mark.browser
def test_report_first_screen_holds_decision_and_pareto(sweeps: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    out = tmp_path / "r" / "report.html"
    assert main(["report", str(sweeps[0]), "-o", str(out)]) == 0
    m = measure(out, ["decision-lines", "pareto-chart", "validity"], tmp_path)
    for el in ("decision-lines", "pareto-chart"):
        assert in_first_screen(m["boxes"][el]), (el, m["boxes"][el])
    assert m["boxes"]["decision-lines"]["top"] < m["boxes"]["pareto-chart"]["top"]
    spans = _span_panels(out, tmp_path)
    assert len(spans) == 6  # 2 arms x 3 tiers
    for s in spans:  # each span lies in the last panel (the brackets'), no data panel
        assert s["plots"] == [False, False, True], s


@pytest.mark.browser
def test_the_capacity_table_fits_the_page_width(sweeps: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    """Two arms of six columns and a ratio column: the ratio (the answer) is not cut off
    behind a horizontal scroll at 1400 px."""
    out = tmp_path / "w" / "report.html"
    assert main(["report", str(sweeps[0]), "-o", str(out)]) == 0
    box = measure(out, ["capacity-table"], tmp_path)["boxes"]["capacity-table"]
    assert box is not None and box["right"] <= WIDTH, box


@pytest.mark.browser
def test_history_first_screen_holds_decisions_and_pareto(sweeps: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    out = tmp_path / "h" / "history.html"
    assert main(["report", str(sweeps[0]), str(sweeps[1]), "-o", str(out)]) == 0
    m = measure(out, ["entries-table", "pareto-chart"], tmp_path)
    for el in ("entries-table", "pareto-chart"):
        assert in_first_screen(m["boxes"][el]), (el, m["boxes"][el])
    page = out.read_text(encoding="utf-8")
    assert page.count('<ul class="decision">') == 2  # one decision per entry
    spans = _span_panels(out, tmp_path)
    assert len(spans) == 12  # 2 entries x 2 arms x 3 tiers
    assert all(s["plots"] == [False, False, True] for s in spans), spans
