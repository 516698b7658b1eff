"""Report modes and exports without a browser: history refusal and labelling, single-run
titles, levels.csv against summary.json, the schema, legends outside the data."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import orjson
import pytest

from analysis import (
    Comparison,
    compare_runs,
    read_runs,
    render_report,
)
from analysis.report import LEVEL_COLUMNS
from replay.cli import main
from tests.analysis.report.builders import make_sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sweep(tmp_path_factory.mktemp("sweep"), levels=(1, 4, 16))


def test_levels_csv_matches_summary_json(sweep: Path) -> None:
    assert main(["report", str(sweep), "--no-charts"]) in (0, 3)  # beside the results
    summary = Comparison.model_validate_json((sweep / "summary.json").read_bytes())
    rows = list(csv.DictReader(io.StringIO((sweep / "levels.csv").read_text())))
    assert tuple(rows[0]) == LEVEL_COLUMNS
    assert len(rows) == sum(len(lv.arms) for lv in summary.levels) == 6
    assert [r["load"] for r in rows] == ["1", "1", "4", "4", "16", "16"]  # numeric order
    for r in rows:
        lv = next(x for x in summary.levels if x.load.value == float(r["load"]))
        s = lv.arms[r["arm"]]
        assert float(r["interactivity_p90"]) == pytest.approx(s.interactivity.p90)
        assert int(r["requests_sent"]) == s.counts.in_window
        if s.interactivity.p90_ci:
            assert float(r["interactivity_p90_lo"]) == pytest.approx(s.interactivity.p90_ci[0])
        if r["arm"] == summary.baseline:
            assert r["ratio_interactivity_p90"] == "" and r["baseline"] == "1"
        else:
            ratio = next(x for x in lv.ratios[r["arm"]] if x.metric == "interactivity.p90")
            assert float(r["ratio_interactivity_p90"]) == pytest.approx(ratio.ratio)
    schema = orjson.loads((sweep / "summary.schema.json").read_bytes())
    assert schema["title"] == "Comparison" and "levels" in schema["properties"]


def test_history_refuses_different_workloads(sweep: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    other = make_sweep(tmp_path / "other", fingerprint="fp-other", levels=(1, 4))
    out = tmp_path / "h" / "history.html"
    assert main(["report", str(sweep), str(other), "-o", str(out), "--no-charts"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-mixed" in err and "Traceback" not in err
    assert not out.exists()
    assert main(["report", str(sweep), str(other), "-o", str(out), "--no-charts",
                 "--allow-mixed"]) in (0, 3)
    html = out.read_text(encoding="utf-8")
    assert html.count("MIXED WORKLOADS") >= 3  # the decision block and every section
    data = orjson.loads((out.parent / "history.json").read_bytes())
    assert data["mixed"] is True and [e["name"] for e in data["entries"]] == [sweep.name, "other"]


def test_history_same_workload_side_by_side(sweep: Path, tmp_path: Path) -> None:
    later = make_sweep(tmp_path / "later", arms={"auto": 0.004}, levels=(4, 16))
    out = tmp_path / "history.html"
    assert main(["report", str(sweep), str(later), "-o", str(out), "--no-charts"]) in (0, 3)
    html = out.read_text(encoding="utf-8")
    assert "MIXED" not in html
    assert f"{sweep.name} / latency_specialized" in html and "later / auto" in html
    # levels in numeric order, each entry's rows under its level
    levels = re.findall(r'<th rowspan="\d+" class="level">(.*?)</th>', html)
    assert levels == ["1 user", "4 users", "16 users"]


def test_single_run_title_without_label(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, arms={"auto": 0.01}, levels=(2,), label="")
    runs = read_runs([root])
    html = render_report(compare_runs(runs), runs, charts=False)
    title = re.search(r"<h1>(.*?)</h1>", html, re.S)
    assert title is not None
    text = title.group(1)
    assert "run report:" in text and "127.0.0.1:8000" in text and "coding-agent" in text
    assert "Single arm" not in html and "arm ''" not in html
    assert '<section id="fairness">' not in html and "vary across levels" not in html


def test_legends_sit_outside_the_plotting_area(sweep: Path) -> None:
    from analysis.report import _charts
    from analysis.report._chart_base import ArmLevels, legends_outside_axes
    from analysis.report._chart_headline import Series, headline_chart

    runs = read_runs([sweep])
    c = compare_runs(runs)
    by_arm = [ArmLevels(arm=a, summaries=[lv.arms[a] for lv in c.levels],
                        runs=[r for r in runs if r.manifest.label == a]) for a in c.arms]
    built = []

    def keep(fig: object) -> str:
        built.append(fig)
        assert legends_outside_axes(fig)  # type: ignore[arg-type]
        return "<svg></svg>"

    original = _charts.render
    _charts.render = keep  # type: ignore[assignment]
    try:
        _charts.cdf_chart(by_arm)
        _charts.turn_chart(by_arm)
        _charts.timeseries_chart(by_arm)
        _charts.ttft_prompt_chart(by_arm)
    finally:
        _charts.render = original  # type: ignore[assignment]
    assert len(built) == 4
    svg = headline_chart([Series(name=a.arm, summaries=a.summaries, color_index=i)
                          for i, a in enumerate(by_arm)], c.tiers)
    assert 'id="ar-legend-' in svg and 'id="ar-plot-' in svg
    assert "tier floor 30 tok/s/user" in svg  # floors labelled


def test_open_loop_levels_are_rates_not_users(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, levels=(2, 4, 8), rates=(0.5, 1.0, 2.0))
    runs = read_runs([root])
    html = render_report(compare_runs(runs), runs)
    levels = re.findall(r'<th rowspan="\d+" class="level">(.*?)</th>', html)
    assert levels == ["0.5 sessions/s", "1 sessions/s", "2 sessions/s"]
    assert "session arrival rate (sessions/s, open loop)" in html  # the headline's axis
    assert "users (concurrent agent lanes)" not in html
    assert "auto @ 0.5 sessions/s" in html and "@ 2 users" not in html  # detail legends


def test_history_lines_never_share_colour_style_and_marker(sweep: Path, tmp_path: Path) -> None:
    from analysis.report._chart_base import color
    from analysis.report._history import HistoryEntry, history_series

    later = make_sweep(tmp_path / "later", levels=(4, 16))
    entries = [HistoryEntry(name=p.name, path=str(p), comparison=compare_runs(r), runs=r)
               for p, r in ((sweep, read_runs([sweep])), (later, read_runs([later])))]
    series = history_series(entries)
    looks = [(color(s.color_index), s.dashed, s.marker) for s in series]
    assert len(series) == 4 and len(set(looks)) == len(looks)
    # an entry's two arms differ in colour, not only in dash (coloured by entry, they hid)
    assert color(series[0].color_index) != color(series[1].color_index)
