"""Each report mode in headless Chromium: the decision is in the 1400x900 first screen,
the capacity table comes before the per-level detail, and no legend covers data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.cli import main
from tests.analysis.report.builders import make_sweep
from tests.analysis.report.chromium import in_first_screen, measure, screenshot
from tests.support.demo import DemoRun

pytestmark = [pytest.mark.browser, pytest.mark.sim]

DECISION = ["verdict", "validity", "pareto-chart"]


def _check_first_screen(report: Path, tmp: Path, extra: list[str] | None = None) -> None:
    from PIL import Image

    ids = DECISION + ["capacity", "metrics"] + (extra or [])
    m = measure(report, ids, tmp)
    for el in DECISION:
        assert in_first_screen(m["boxes"][el]), (el, m["boxes"][el])
    if m["boxes"]["metrics"] is not None:  # the capacity table comes before the detail
        assert m["boxes"]["capacity"]["top"] < m["boxes"]["metrics"]["top"]
    assert m["charts"] >= 1 and m["legends"] >= 1
    assert m["overlaps"] == []
    pixels = np.asarray(Image.open(screenshot(report, tmp)).convert("L"), dtype=np.float64)
    assert pixels.shape == (900, 1400) and pixels.var() > 100.0  # not a blank page


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sweep(tmp_path_factory.mktemp("sweep"))


def test_comparison_report_decision_first(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp" / "report.html"
    assert main(["report", str(sweep), "-o", str(out)]) in (0, 3)
    _check_first_screen(out, tmp_path, ["capacity-table"])
    html = out.read_text(encoding="utf-8")
    assert html.index('id="capacity-table"') < html.index('<section id="metrics">')


def test_single_run_report(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "one" / "report.html"
    assert main(["report", str(sweep / "runs" / "auto-u4"), "-o", str(out)]) in (0, 3)
    _check_first_screen(out, tmp_path)
    html = out.read_text(encoding="utf-8")
    assert "Fairness" not in html and "fair comparison" not in html.lower()


def test_search_report(sweep: Path, tmp_path: Path) -> None:
    import shutil

    import orjson

    root = tmp_path / "search"
    shutil.copytree(sweep, root)
    evidence = [{"users": u, "run": f"auto-u{u}", "validity": "valid", "reason": "",
                 "verdict": "meets" if u < 16 else "fails"} for u in (1, 4, 16)]
    (root / "search.json").write_bytes(orjson.dumps({"kind": "agentreplay-search", "results": [
        {"arm": "auto", "tier": "\u2265 100 tok/s/user, TTFT \u2264 15 s", "answer": "4 users",
         "users": 4, "bracket": [4, 16], "how": "stopped after 3 probes",
         "evidence": evidence}]}))
    assert main(["report", str(root)]) in (0, 3)
    out = root / "report.html"
    _check_first_screen(out, tmp_path, ["search"])
    html = out.read_text(encoding="utf-8")
    assert "met at 4 \u2013 failed at 16" in html and "16: fails" in html
    assert html.index('<section id="search">') < html.index('<section id="metrics">')


def test_history_view(sweep: Path, tmp_path: Path) -> None:
    later = make_sweep(tmp_path / "later", arms={"auto": 0.006, "latency_specialized": 0.004})
    out = tmp_path / "hist" / "history.html"
    assert main(["report", str(sweep), str(later), "-o", str(out)]) in (0, 3)
    m = measure(out, ["entries-table", "pareto-chart", "summary-table"], tmp_path)
    assert in_first_screen(m["boxes"]["entries-table"])
    assert in_first_screen(m["boxes"]["pareto-chart"])
    assert m["charts"] == 2 and m["overlaps"] == []  # the Pareto and headline charts


def _invalid_validity_box(n_checks: int) -> tuple[str, str]:
    """The validity box and the decision's validity line of a comparison stamped invalid
    by ``n_checks`` checks (two findings each, messages longer than a line)."""
    from analysis.report._decision import _groups
    from analysis.report._report import _environment

    reasons = [{"severity": "invalid" if i < 2 else "caveat", "code": f"check_{i}",
                "message": f"finding {j} of check {i}: " + "what went wrong, in words " * 12,
                "run": f"auto-u{4 * (j + 1)}-r0"} for i in range(n_checks) for j in range(2)]
    view = {"verdict": "invalid", "cls": "invalid", "reasons": reasons, "note": "",
            "groups": _groups(reasons)}
    box = _environment().get_template("_decision.html.j2").module.validity_box(view)
    line = "Validity: INVALID (" + ", ".join(f"check_{i}" for i in range(n_checks)) + ")."
    return str(box), line


def test_demo_report_first_screen_holds_many_findings(quick_demo: DemoRun,
                                                      tmp_path: Path) -> None:
    """A demo stamped invalid by many checks (a starved machine) keeps the decision and
    the Pareto chart in the first screen: the box lists three checks, the rest fold."""
    import re

    html = quick_demo.report.read_text(encoding="utf-8")
    box, line = _invalid_validity_box(8)
    html, n = re.subn(r'<div class="validity [a-z]+" id="validity">.*?</div>',
                      lambda _: box, html, count=1, flags=re.S)
    assert n == 1
    html, n = re.subn(r"<li>Validity: [^<]*</li>", lambda _: f"<li>{line}</li>", html,
                      count=1)
    assert n == 1
    report = tmp_path / "invalid" / "report.html"
    report.parent.mkdir()
    report.write_text(html, encoding="utf-8")
    assert box.count('<span class="sev') == 3 + 16  # three on the screen, all 16 folded
    assert "and 5 more checks below" in box
    _check_first_screen(report, tmp_path, ["capacity-table"])


def test_demo_report_decision_in_first_screen(quick_demo: DemoRun, tmp_path: Path) -> None:
    """The issue's check, on the real thing: ``agentreplay demo``'s report (quick; the
    session's one run, tests/support/demo.py)."""
    result = quick_demo
    assert result.report.exists(), result.stderr.decode(errors="replace")[-3000:]
    _check_first_screen(result.report, tmp_path, ["capacity-table"])
    html = result.report.read_text(encoding="utf-8")
    assert html.index('id="capacity-table"') < html.index('<section id="metrics">')
    assert "[SIMULATED]" in html
    # the simulator is named with what it is calibrated to (issue 26: the report never said)
    assert "Simulator profile <code>kimi-k3-gb300-tp16</code>: " in html
    assert "256.4 tok/s at batch 1" in html
    # each arm's twin, fitted on the demo's own runs, beside its bracket (issue 36 item 8)
    from html import unescape

    decision = unescape(html[html.index('id="decision-lines"'):])
    decision = decision[:decision.index("</ul>")]
    assert decision.count("its twin (1 replica) modelled") == 6  # 3 tiers x 2 arms
