"""Each metric is one declaration on the summary field it fills: the catalogue, the
samples, the summary, the report's tables, time units and methodology are derived
from the declarations, and a declaration's direction drives the comparison's
better/worse."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import numpy as np
import pytest

from analysis import compare_runs, read_run, read_runs, render_report
from analysis.metrics import (
    DECLARED,
    METRICS,
    QUANTITIES,
    Distribution,
    RequestCounts,
    RunSummary,
    Window,
    measure,
    metric,
    per_request,
    report_rows,
    summarize,
)
from analysis.metrics._samplers import window_of
from analysis.report import METRIC_DEFINITIONS
from analysis.report._decision import summary_columns
from analysis.report._detail import level_rows
from analysis.report._format import TIME_UNITS, row_label
from tests.analysis.builders import make_run, rec
from tests.analysis.report.builders import make_sweep

# window [10, 110), drain 5 s (ends at 115). Per record: TTFT, E2E, what it was.
RECORDS = [
    rec(0, user=0, sent_s=20.0, due_s=19.0, first_token_s=21.0, last_token_s=25.0,
        output_tokens=5, output_tokens_asked=5),                 # ok: TTFT 1, E2E 5
    rec(1, user=1, sent_s=30.0, first_token_s=32.0, last_token_s=33.0,
        output_tokens=3, output_tokens_asked=3),                 # ok: TTFT 2, E2E 3
    rec(2, user=1, sent_s=100.0, status="incomplete", first_token_s=104.0,
        last_token_s=110.0, output_tokens=4, output_tokens_asked=50),  # cut after 4 s
    rec(3, user=0, sent_s=105.0, status="incomplete", first_token_s=None,
        last_token_s=None, output_tokens=0, output_tokens_asked=50),   # cut, no token
    rec(4, user=2, sent_s=5.0, first_token_s=6.0, last_token_s=7.0),  # warmup: left out
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("decl"), RECORDS)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sweep(tmp_path_factory.mktemp("sweep"), levels=(1, 4))


def test_every_declaration_is_a_summary_field_keyed_by_its_name() -> None:
    fields = {**RunSummary.model_fields, **RequestCounts.model_fields}
    assert QUANTITIES == tuple(m.key for m in DECLARED)
    assert len(set(QUANTITIES)) == len(QUANTITIES)
    for m in DECLARED:
        assert m.key in fields, m.key
        assert METRICS[m.key] == m
        # at most one way to compute it; none only for a part's own field
        ways = [m.sample is not None, m.inverse_of is not None, m.value is not None]
        assert sum(ways) <= 1, m.key
        assert sum(ways) == 1 or m.key in RequestCounts.model_fields, m.key
        if m.inverse_of is not None:
            assert metric(m.inverse_of).sample is not None
        assert set(m.shown) <= {"p50", "p90", "p99"}
        assert bool(m.shown) == (m.is_distribution and m.row is not None), m.key


def test_summarize_fills_every_declared_metric_with_its_unit_and_direction(
        run_dir: Path) -> None:
    samples = measure(read_run(run_dir))
    s = summarize(samples, bootstrap=False)
    for m in DECLARED:
        if m.sample is not None:  # measure drew its samples under its key
            assert m.key in samples.values and m.key in samples.groups, m.key
        if m.key not in RunSummary.model_fields:
            continue
        got = getattr(s, m.key)
        if m.is_distribution:
            assert isinstance(got, Distribution), m.key
            assert (got.unit, got.higher_is_better) == (m.unit, m.higher_is_better), m.key
        else:
            assert got is None or isinstance(got, float), m.key
    # the values are the declared formulas over the declared requests: TTFT of the two ok
    # requests and of the one cut after its first token, a bound for the one without
    assert sorted(samples.values["ttft"]) == [1.0, 2.0, 4.0]
    assert list(samples.censored["ttft"]) == [115.0 - 105.0]
    assert sorted(samples.values["e2e"]) == [3.0, 5.0]
    assert sorted(samples.censored["e2e"]) == [115.0 - 105.0, 115.0 - 100.0]
    assert s.ttft.count == 4 and s.e2e.count == 4
    assert s.interactivity.p50 == pytest.approx(1.0 / s.tpot.p50)


def test_per_request_sampler_takes_the_formula_over_its_selections(run_dir: Path) -> None:
    """A declared per-request metric: the formula over ``of`` (finite values), then over
    ``also``, with lower bounds over ``bound_of``; users as the bootstrap's groups."""
    w = window_of(read_run(run_dir))

    def since_due(v: Window) -> np.ndarray:
        out: np.ndarray = v.requests.first_token_s - v.requests.due_s
        return out

    def ok(v: Window) -> np.ndarray:
        return v.good

    def cut_first(v: Window) -> np.ndarray:
        return v.cut_with_first

    def cut_none(v: Window) -> np.ndarray:
        return v.cut_without_first

    def ran(v: Window) -> np.ndarray:
        out: np.ndarray = v.ran_until - v.requests.due_s
        return out

    d = per_request(since_due, ok, also=cut_first, bound=ran, bound_of=cut_none)(w)
    assert list(d.values) == [2.0, 2.0, 4.0]  # r0 from due 19, r1, then the cut r2
    assert [int(g) for g in d.groups] == [0, 1, 1]
    assert d.censored is not None and list(d.censored) == [10.0]
    plain = per_request(since_due, cut_none)(w)  # its TTFT is NaN: left out, not 0
    assert len(plain.values) == 0 and plain.censored is None


def test_methodology_rows_are_the_declarations(sweep: Path) -> None:
    runs = read_runs([sweep])
    page = render_report(compare_runs(runs), runs, charts=False)
    section = html.unescape(re.search(r'<section id="methodology">(.*?)</section>', page,
                                      re.S).group(1))  # type: ignore[union-attr]
    assert METRIC_DEFINITIONS[:len(DECLARED)] == tuple(
        (m.label, m.definition) for m in DECLARED)
    for m in DECLARED:
        assert f"<td>{m.label}</td><td>{m.definition}</td>" in section, m.key


def test_detail_rows_follow_the_declared_rows(sweep: Path) -> None:
    c = compare_runs(read_runs([sweep]))
    keys = report_rows()
    listed = sorted((m for m in DECLARED if m.row is not None), key=lambda m: m.row or 0)
    assert keys == tuple(k for m in listed for k in (
        [f"{m.key}.{s}" for s in m.shown] if m.is_distribution else [m.key]))
    labels = [r["label"] for r in level_rows(c.levels[0], c.arms, c.arms[1:])]
    assert labels[:len(keys)] == [row_label(k) for k in keys]
    unlisted = [m for m in DECLARED if m.row is None]
    assert all(row_label(m.key) not in labels[:len(keys)] for m in unlisted)


def test_time_units_are_the_declared_display_units(sweep: Path) -> None:
    timed = [m for m in DECLARED if m.unit == "s" and m.is_distribution]
    assert timed and all(m.display in ("ms", "s") for m in timed)
    for m in timed:
        assert TIME_UNITS[m.key][0] == m.display
    c = compare_runs(read_runs([sweep]))
    rows = {r["label"]: r["cells"] for r in level_rows(c.levels[0], c.arms, c.arms[1:])}
    for m in timed:
        value = rows[row_label(f"{m.key}.{m.shown[0]}")][0][0]
        assert value == "n/a" or value.endswith(f" {m.display}"), (m.key, value)


def test_direction_drives_better_and_worse(sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The faster arm's P90 interactivity ratio is above 1: better while the declaration
    says higher is better, worse once it says lower is better."""
    runs = read_runs([sweep])

    def ratio() -> tuple[float, bool | None]:
        lv = compare_runs(runs).levels[0]
        r = next(r for rs in lv.ratios.values() for r in rs if r.metric == "interactivity.p90")
        assert r.ratio is not None
        return r.ratio, r.better

    value, better = ratio()
    assert value > 1 and better is True
    flipped = dataclasses.replace(METRICS["interactivity.p90"], higher_is_better=False)
    monkeypatch.setitem(METRICS, "interactivity.p90", flipped)
    assert ratio() == (value, False)
    assert summary_columns()[0][2].startswith("lower is better; ")


def test_every_metric_key_the_report_and_judge_name_is_declared() -> None:
    """Report and judge modules name metrics by catalogue key ("interactivity.p90"); each
    such key must resolve to a declaration, so a typo fails here, not as a blank cell."""
    import ast

    root = Path(__file__).resolve().parents[3] / "analysis"
    shaped = re.compile(r"^[a-z_]+\.p(50|90|99)$")
    found = set()
    for path in [*(root / "report").glob("*.py"), *(root / "judge").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and shaped.match(node.value):
                found.add(node.value)
    assert {"interactivity.p90", "ttft_due.p90", "ttft.p90"} <= found
    for key in found:
        assert metric(key).key == key
        assert metric(key.partition(".")[0]).is_distribution
