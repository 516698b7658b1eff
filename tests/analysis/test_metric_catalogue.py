"""The metric catalogue is the one place a metric's wording lives: the headline ratios,
the summaries' distributions, the report's tables, chart axes and methodology read
it, so changing an entry changes every place that shows the metric."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import pytest

from analysis import Comparison, RunData, compare_runs, read_runs, render_report
from analysis.judge import HEADLINE
from analysis.metrics import (
    METRICS,
    PERCENTILES,
    QUANTITIES,
    axis_label,
    direction_text,
    metric,
)
from analysis.report import METRIC_DEFINITIONS
from analysis.report._decision import SUMMARY_METRICS, summary_view
from analysis.report._detail import level_rows
from analysis.report._format import display_label, display_unit, row_label
from tests.analysis.report.builders import make_sweep

_DISTRIBUTIONS = ("ttft", "ttft_due", "e2e", "tpot", "itl", "interactivity",
                  "interactivity_user", "session_latency", "schedule_lag")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Comparison, list[RunData]]:
    runs = read_runs([make_sweep(tmp_path_factory.mktemp("cat"), levels=(1, 4))])
    return compare_runs(runs), runs


def _relabel(monkeypatch: pytest.MonkeyPatch, key: str, **change: str) -> None:
    """Change one catalogue entry for the test (restored after it)."""
    monkeypatch.setitem(METRICS, key, dataclasses.replace(METRICS[key], **change))


def _methodology(page: str) -> str:
    found = re.search(r'<section id="methodology">(.*?)</section>', page, re.S)
    assert found is not None
    return html.unescape(found.group(1))


def test_every_entry_is_named_and_defined() -> None:
    assert len(METRICS) > len(QUANTITIES)
    for key, m in METRICS.items():
        assert m.key == key
        assert m.label.strip() and m.unit.strip() and m.definition.strip(), key
        assert m.direction in ("higher is better", "lower is better")
    assert set(QUANTITIES) <= set(METRICS)
    assert all(k.rpartition(".")[2] not in PERCENTILES for k in QUANTITIES)


def test_a_percentile_shares_its_distribution() -> None:
    for name in _DISTRIBUTIONS:
        base = metric(name)
        for stat in PERCENTILES:
            p = metric(f"{name}.{stat}")
            assert p.label == f"{stat.upper()} {base.label}"
            assert (p.unit, p.higher_is_better, p.definition) == (
                base.unit, base.higher_is_better, base.definition)


def test_helpers() -> None:
    assert axis_label("interactivity.p90") == "P90 interactivity (tok/s/user)"
    assert axis_label("ttft_due.p90", "ms") == "P90 TTFT from schedule (ms)"
    assert display_label("ttft_due.p90") == "P90 TTFT from schedule (ms)"
    assert display_unit("e2e.p90") == "s" and display_unit("failure_share") == "%"
    assert row_label("decode_tok_s_per_gpu") == "decode throughput per GPU (tok/s/GPU)"
    assert row_label("ttft.p90") == "P90 TTFT"  # a time cell carries its own unit
    assert direction_text("interactivity.p90") == "higher is better"
    assert direction_text("ttft.p90") == "lower is better"
    with pytest.raises(KeyError, match="'ttft.p91'"):
        metric("ttft.p91")


def test_headline_metrics_read_the_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    for m in HEADLINE:
        info = metric(m.key)
        assert (m.label, m.unit, m.higher_is_better) == (
            info.label, info.unit, info.higher_is_better)
    _relabel(monkeypatch, "ttft.p90", label="tail TTFT", unit="min")
    head = next(m for m in HEADLINE if m.key == "ttft.p90")
    assert (head.label, head.unit) == ("tail TTFT", "min")


def test_ratios_carry_the_catalogue_wording(sweep: tuple[Comparison, list[RunData]]) -> None:
    c, _ = sweep
    ratios = [r for lv in c.levels for rs in lv.ratios.values() for r in rs]
    assert {r.metric for r in ratios} == {m.key for m in HEADLINE}
    for r in ratios:
        info = metric(r.metric)
        assert (r.label, r.unit, r.higher_is_better) == (
            info.label, info.unit, info.higher_is_better)


def test_summaries_take_unit_and_direction_from_the_catalogue(
        sweep: tuple[Comparison, list[RunData]]) -> None:
    c, _ = sweep
    s = next(iter(c.levels[0].arms.values()))
    for name in _DISTRIBUTIONS:
        d = getattr(s, name)
        assert (d.unit, d.higher_is_better) == (metric(name).unit,
                                               metric(name).higher_is_better), name


def test_summary_table_columns_come_from_the_catalogue(
        sweep: tuple[Comparison, list[RunData]], monkeypatch: pytest.MonkeyPatch) -> None:
    c, _ = sweep
    columns = summary_view(c)["columns"]
    assert columns == [(metric(k).label, display_unit(k),
                        f"{metric(k).direction}; {metric(k).definition}")
                       for k in SUMMARY_METRICS]
    assert columns[0][:2] == ("P90 interactivity", "tok/s/user")
    assert columns[1][:2] == ("P90 TTFT from schedule", "ms")
    _relabel(monkeypatch, "ttft_due.p90", label="P90 TTFT since due")
    assert summary_view(c)["columns"][1][0] == "P90 TTFT since due"


def test_detail_rows_come_from_the_catalogue(
        sweep: tuple[Comparison, list[RunData]], monkeypatch: pytest.MonkeyPatch) -> None:
    c, _ = sweep
    lv = c.levels[-1]
    labels = [r["label"] for r in level_rows(lv, c.arms, c.arms[1:])]
    for key in ("interactivity.p90", "interactivity_user.p50", "ttft.p99", "ttft_due.p90",
                "tpot.p50", "itl.p90", "e2e.p90", "session_latency.p90", "schedule_lag.p99",
                "decode_tok_s", "decode_tok_s_per_gpu", "output_tok_s", "prefill_tok_s"):
        assert row_label(key) in labels, key
    assert "P90 interactivity (tok/s/user)" in labels
    _relabel(monkeypatch, "decode_tok_s", label="tokens decoded per second")
    labels = [r["label"] for r in level_rows(lv, c.arms, c.arms[1:])]
    assert "tokens decoded per second (tok/s)" in labels


def test_methodology_defines_every_headline_metric(
        sweep: tuple[Comparison, list[RunData]], monkeypatch: pytest.MonkeyPatch) -> None:
    c, runs = sweep
    section = _methodology(render_report(c, runs, charts=False))
    for m in HEADLINE:
        assert metric(m.key).definition in section, m.key
    for key in QUANTITIES:
        q = metric(key)
        assert f"<td>{q.label}</td><td>{q.definition}</td>" in section, key
    assert "1 / P90(TPOT)" in section
    assert [name for name, _ in METRIC_DEFINITIONS[:len(QUANTITIES)]] == [
        metric(k).label for k in QUANTITIES]
    _relabel(monkeypatch, "ttft", definition="first token minus request sent, as measured")
    section = _methodology(render_report(c, runs, charts=False))
    assert "<td>TTFT</td><td>first token minus request sent, as measured</td>" in section


def test_headline_chart_axes_come_from_the_catalogue(
        sweep: tuple[Comparison, list[RunData]], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from analysis.report._chart_headline import Series, headline_chart

    c, _ = sweep
    series = [Series(name=a, summaries=[lv.arms[a] for lv in c.levels], color_index=i)
              for i, a in enumerate(c.arms)]
    _relabel(monkeypatch, "ttft_due.p90", label="P90 TTFT since due")
    svg = headline_chart(series, c.tiers)
    assert display_label("interactivity.p90") in svg
    assert "P90 TTFT since due (ms)" in svg
    assert f"tier floor {c.tiers[0].floor_tok_s:g} tok/s/user" in svg


@pytest.mark.cli
def test_catalogue_module_is_light() -> None:
    """The catalogue sits with the metrics: importing it pulls in no report machinery."""
    import subprocess
    import sys

    code = ("import sys, analysis.metrics; "
            "print(any(m in sys.modules for m in ('jinja2', 'matplotlib', 'analysis.report')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"
