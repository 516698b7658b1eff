"""``compare --search`` ends with the decision its report opens with: each arm's bracket
per GPU and the arms' capacity ratio (before, it printed "met at 3.0 - failed at 4.0"
and no ratio)."""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path

import pytest

from replay.cli import main
from tests.replay.ab.conftest import sims

pytestmark = pytest.mark.sim

# A floor no request can reach: every arm fails at its first probe whatever the machine's
# speed, so the bracket ("below 1 user", per GPU "< 1.00") is decided, not raced. A 30 tok/s
# floor left the 1-user probe's verdict to how many requests a busy machine fitted into the
# 1.5-s window (CI: 2 requests, "indeterminate", no per-GPU figure to print).
_FLOOR = 100000


def test_search_prints_the_report_s_decision(tiny_workload: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    with sims(("small", "auto"), ("small", "latency_specialized")) as urls:
        rc = main(["compare", "--arm", f"auto={urls[0]}",
                   "--arm", f"latency_specialized={urls[1]}", "--workload", str(tiny_workload),
                   "--users", "1", "--duration", "1.5", "--warmup", "0.2", "--drain", "0.5",
                   "--out", str(out), "--search", f"{_FLOOR}:15", "--search-max-probes", "2",
                   "--quiet"])
    assert rc in (0, 3)  # 3 only when a starved machine stamped a probe invalid
    printed = capsys.readouterr().out.splitlines()
    page = (out / "report.html").read_text(encoding="utf-8")
    block = page[page.index('id="decision-lines"'):]
    items = [htmllib.unescape(x) for x in
             re.findall(r"<li>(.*?)</li>", block[:block.index("</ul>")], re.S)]
    capacity = [x for x in items if f"Capacity at \u2265 {_FLOOR} tok/s/user" in x]
    assert len(capacity) == 1
    assert "latency_specialized / auto capacity" in capacity[0]  # the ratio, always said
    for arm in ("auto", "latency_specialized"):
        # The one race left: a starved machine sending no request in an arm's window,
        # which the line then names instead of a bracket.
        assert (f"{arm} below 1 user measured (< 1.00 users per GPU)" in capacity[0]
                or f"{arm} capacity unknown, indeterminate at 1" in capacity[0]), capacity[0]
    for line in items:  # word for word, after the search's own per-arm lines
        assert line in printed, (line, printed)
    assert printed.index(items[0]) > 0
