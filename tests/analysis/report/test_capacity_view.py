"""The capacity table and the headline chart come from the same capacity rows: the
chart marks exactly the measured passing and failing levels the table prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis import capacity_view, compare_runs, read_runs, render_report
from analysis.report._chart_headline import Series, capacity_marks, headline_chart
from tests.analysis.report.builders import make_sweep


@pytest.fixture(scope="module")
def comparison_and_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, list]:
    # 300 requests per user: auto meets 100 tok/s at 1 user in 94% of its requests,
    # which 6 requests (the default) or 90 cannot tell from 90% (indeterminate)
    root = make_sweep(tmp_path_factory.mktemp("cap"), levels=(1, 4, 16), per_user=300)
    runs = read_runs([root])
    return compare_runs(runs), runs


def test_table_prints_the_brackets(comparison_and_runs: tuple) -> None:
    c, _ = comparison_and_runs
    view = capacity_view(c)
    texts = {(r["tier"], x["row"].arm): x["users"] for r in view["rows"] for x in r["arms"]}
    # auto: ~111, 83, 41 tok/s/user at 1, 4, 16 users; latency_specialized: ~197, 148, 74
    tier100 = next(t for t in c.tiers if t.floor_tok_s == 100).label
    assert texts[(tier100, "auto")] == "between 1 and 4 users"
    assert texts[(tier100, "latency_specialized")] == "between 4 and 16 users"
    row100 = next(r for r in view["rows"] if r["tier"] == tier100)
    assert row100["ratios"][0]["value"] == "1.00x \u2013 16.00x"  # [4,16) over [1,4)
    tier30 = next(t for t in c.tiers if t.floor_tok_s == 30).label
    assert texts[(tier30, "auto")] == "at least 16 users"
    row30 = next(r for r in view["rows"] if r["tier"] == tier30)
    assert row30["ratios"][0]["value"].startswith("unknown")
    for r in c.capacity:  # every end of a bracket is a measured level
        for end in (r.bracket.passed, r.bracket.failed):
            assert end is None or end in r.levels


def _want_spans(c: object) -> set[str]:
    want = set()
    for r in c.capacity:  # type: ignore[attr-defined]
        i, k = c.arms.index(r.arm), c.tiers.index(r.tier)  # type: ignore[attr-defined]
        lo, hi = (("open" if v is None else f"{v:g}") for v in (r.bracket.passed,
                                                              r.bracket.failed))
        want.add(f"ar-cap-{i}-{k}-span-{lo}-{hi}")
    return want


def test_chart_spans_the_levels_the_table_prints(comparison_and_runs: tuple) -> None:
    c, runs = comparison_and_runs
    series = [Series(name=a, summaries=[lv.arms[a] for lv in c.levels], color_index=i,
                     capacity=tuple(r for r in c.capacity if r.arm == a))
              for i, a in enumerate(c.arms)]
    svg = headline_chart(series, c.tiers)
    marks = capacity_marks(series, c.tiers)
    assert len(marks) == len(c.capacity)
    want = _want_spans(c)
    assert set(re.findall(r'id="(ar-cap-\d+-\d+-span-[\w.]+-[\w.]+)"', svg)) == want
    # spans, never markers: no capacity gid names a single level (the old pass/fail dots)
    assert not re.search(r'id="ar-cap-[^"]*-(?:pass|fail)-', svg)
    # the full report shows the same: its chart spans and its table's brackets
    html = render_report(c, runs)
    assert set(re.findall(r'id="(ar-cap-\d+-\d+-span-[\w.]+-[\w.]+)"', html)) == want
    table = html[html.index('id="capacity-table"'):]
    table = table[:table.index("</table>")]
    for r in c.capacity:
        assert r.bracket.text(r.load_kind) in table
    assert "interpolated" not in table


def test_history_shows_each_entry_s_bracket_and_marks_it(tmp_path: Path) -> None:
    from replay.cli import main

    first = make_sweep(tmp_path / "first", levels=(1, 4, 16))
    later = make_sweep(tmp_path / "later", arms={"auto": 0.004}, levels=(4, 16))
    out = tmp_path / "history.html"
    assert main(["report", str(first), str(later), "-o", str(out)]) in (0, 3)
    html = out.read_text(encoding="utf-8")
    table = html[html.index('id="capacity-table"'):]
    table = table[:table.index("</table>")]
    for root in (first, later):
        for r in compare_runs(read_runs([root])).capacity:
            assert r.bracket.text(r.load_kind) in table
    assert "ar-cap-" in html and "-span-" in html  # the history chart spans the brackets
