"""Brackets and ratio brackets on controlled outcomes (pure)."""

from __future__ import annotations

import pytest

from analysis.judge import Bracket, bracket_of, ratio_bracket


def _b(passed: float | None, failed: float | None) -> Bracket:
    return Bracket(passed=passed, failed=failed)


@pytest.mark.parametrize("outcomes, want, text", [
    ([(1, True), (2, True), (4, False)], (2, 4, []), "between 2 and 4 users"),
    ([(1, True), (16, True)], (16, None, []), "at least 16 users"),
    ([(1, False), (2, False)], (None, 1, []), "below 1 user"),
    ([(4, False)], (None, 4, []), "below 4 users"),
    ([(1, True)], (1, None, []), "at least 1 user"),
    ([(1, False), (2, True)], (None, 1, [2]), "below 1 user; not monotone: met again at 2"),
    ([(1, True), (2, False), (4, True), (8, True), (16, False)], (1, 2, [4, 8]),
     "between 1 and 2 users; not monotone: met again at 4, 8"),
])
def test_bracket_of(outcomes: list[tuple[float, bool]],
                    want: tuple[float | None, float | None, list[float]], text: str) -> None:
    b = bracket_of(outcomes)
    assert (b.passed, b.failed, b.passed_above) == want
    assert b.text() == text


def test_bracket_units_and_empty() -> None:
    assert bracket_of([(0.5, True), (2.0, False)]).text("rate") == \
        "between 0.5 and 2 sessions/s"
    with pytest.raises(ValueError):
        bracket_of([])


@pytest.mark.parametrize("base, other, want", [
    (_b(4, 8), _b(8, 16), (1.0, 4.0, "more")),  # disjoint: other serves more
    (_b(8, 16), _b(4, 8), (0.25, 1.0, "less")),
    (_b(4, 32), _b(4, 32), (0.125, 8.0, "unknown")),  # overlapping: straddles 1
    (_b(4, 8), _b(16, None), (2.0, None, "more")),  # other met every level: at least
    (_b(16, None), _b(4, 8), (None, 0.5, "less")),
    (_b(16, None), _b(16, None), (None, None, "unknown")),  # both open: unbounded
    (_b(None, 1), _b(4, 8), (4.0, None, "more")),  # base failed at the smallest level
    (_b(None, 1), _b(None, 1), (None, None, "unknown")),
    (_b(4, 8), _b(6, 10), (0.75, 2.5, "unknown")),
])
def test_ratio_bracket(base: Bracket, other: Bracket,
                       want: tuple[float | None, float | None, str]) -> None:
    r = ratio_bracket(base, other)
    assert (r.low, r.high, r.verdict) == want
    if r.verdict == "unknown":
        assert r.text().startswith("unknown")
    else:
        assert not r.text().startswith("unknown")


def test_ratio_text() -> None:
    assert ratio_bracket(_b(4, 8), _b(16, None)).text() == "\u2265 2.00x"
    assert ratio_bracket(_b(16, None), _b(4, 8)).text() == "\u2264 0.50x"
    assert ratio_bracket(_b(16, None), _b(16, None)).text() == "unknown (unbounded)"
