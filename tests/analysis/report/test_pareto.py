"""The Pareto chart: each arm's points are its levels' measured P90 interactivity and
output throughput per GPU (nothing else is drawn as a point), labelled by level, with
the SLO floors as vertical lines; it follows the decision in the report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis import compare_runs, read_runs, render_report
from analysis.report._chart_headline import Series
from analysis.report._chart_pareto import pareto_chart, pareto_points
from tests.analysis.report.builders import make_sweep


@pytest.fixture(scope="module")
def cmp(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, list]:
    runs = read_runs([make_sweep(tmp_path_factory.mktemp("pareto"))])
    return compare_runs(runs), runs


def _series(c: object) -> list[Series]:
    return [Series(name=a, summaries=[lv.arms[a] for lv in c.levels], color_index=i)  # type: ignore[attr-defined]
            for i, a in enumerate(c.arms)]  # type: ignore[attr-defined]


def test_points_are_the_measured_levels(cmp: tuple) -> None:
    c, _ = cmp
    for ser in _series(c):
        pts = pareto_points(ser)
        assert [p[4] for p in pts] == ["1u", "4u", "16u"]
        for (x, y, lo, hi, _), lv in zip(pts, c.levels, strict=True):
            s = lv.arms[ser.name]
            assert s.gpu_count == 2
            assert x == pytest.approx(s.interactivity.p90)
            assert y == pytest.approx(s.output_tok_s / 2)  # output tok/s per GPU
            if s.interactivity.p90_ci is not None:
                assert (lo, hi) == pytest.approx(s.interactivity.p90_ci)
        assert [p[1] for p in pts] == sorted(p[1] for p in pts)  # more users, more tok/s


def test_chart_labels_levels_and_floors_and_follows_the_decision(cmp: tuple) -> None:
    c, runs = cmp
    svg = pareto_chart(_series(c), c.tiers)
    for label in ("1u", "4u", "16u", "floor 30", "floor 100", "floor 300"):
        assert label in svg
    assert "output throughput (tok/s/GPU)" in svg
    assert "ar-cap-" not in svg  # no capacity marker among the data points
    html = render_report(c, runs)
    order = [html.index(x) for x in ('id="decision-lines"', '<section id="pareto">',
                                     'id="pareto-chart"', '<section id="summary">')]
    assert order == sorted(order)
    assert re.search(r'<section id="pareto">.*?<svg', html, re.S)


def test_unknown_gpu_count_is_said_not_divided(tmp_path: Path) -> None:
    runs = read_runs([make_sweep(tmp_path)])
    c = compare_runs(runs)
    series = _series(c)
    for ser in series:
        for s in ser.summaries:
            object.__setattr__(s, "gpu_count", None)
    assert pareto_points(series[0], per_gpu=False)[0][1] == \
        pytest.approx(series[0].summaries[0].output_tok_s)
    assert "GPU count unknown" in pareto_chart(series, c.tiers)
