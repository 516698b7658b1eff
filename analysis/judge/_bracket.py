"""Capacity as what was measured: the bracket between a passing and a failing level.

Nothing is measured between two levels, so nothing is said about it: an arm's
capacity at a tier is *at least* the largest level up to which every measured
level met the tier and *below* the first level that failed. In closed loop the
share of requests meeting a floor falls from 1 to 0 over a few users, so an
interpolated crossing would only restate where the grid points were.

Not monotone (a level meets the tier above one that failed): the bracket still
ends at the first failing level (every level below it passed), and the levels
that met the tier again above it are listed, so the reader sees the noise.

Indeterminate (the sample could not tell whether a level met the tier:
``analysis.metrics.judge_tier``): the level is unknown, so it neither ends nor
extends the bracket; it is listed (``indeterminate``) beside it. Every level
indeterminate leaves the capacity ``unknown``.

The ratio of two arms' capacities follows from the brackets alone: with arm A in
[a_lo, a_hi) and B in [b_lo, b_hi), B / A lies in (b_lo / a_hi, b_hi / a_lo), a
missing end making that side unbounded. When that range holds 1, which arm
serves more is not known (``unknown``), whatever the midpoints suggest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["Bracket", "RatioBracket", "bracket_of", "ratio_bracket"]

BracketKind = Literal["between", "at least", "below", "unknown"]
_UNITS = {"users": ("user", "users"), "rate": ("session/s", "sessions/s"),
          "timestamps": ("x time scale", "x time scale")}


def _num(v: float) -> str:
    return f"{v:g}" if v == int(v) else f"{v:.3g}"


def _with_unit(v: float, kind: str) -> str:
    one, many = _UNITS.get(kind, ("", ""))
    return f"{_num(v)} {one if v == 1 else many}".strip()


class Bracket(BaseModel):
    """The measured levels around one arm's capacity at one tier (``passed`` <= capacity
    < ``failed``)."""

    model_config = ConfigDict(extra="forbid")

    passed: float | None
    """Largest measured level up to which every measured level met the tier; None when
    the smallest level failed."""
    failed: float | None
    """Smallest measured level that failed the tier; None when every level met it."""
    passed_above: list[float] = []
    """Levels above ``failed`` that met the tier again (not monotone: noise or drift)."""
    indeterminate: list[float] = []
    """Levels whose sample could not tell (too few requests): unknown, no bracket end."""

    @property
    def kind(self) -> BracketKind:
        if self.failed is None and self.passed is None:
            return "unknown"
        if self.failed is None:
            return "at least"
        return "below" if self.passed is None else "between"

    def text(self, load_kind: str = "users") -> str:
        """``between 4 and 16 users``, ``at least 16 users``, ``below 1 user`` or
        ``unknown``, and the levels that were not monotone or indeterminate."""
        if self.kind == "unknown":
            out = "unknown"
        elif self.failed is None:
            out = f"at least {_with_unit(self.passed or 0.0, load_kind)}"
        elif self.passed is None:
            out = f"below {_with_unit(self.failed, load_kind)}"
        else:
            out = (f"between {_num(self.passed)} and "
                   f"{_with_unit(self.failed, load_kind)}")
        return out + self.note()

    def note(self) -> str:
        out = ""
        if self.passed_above:
            out += "; not monotone: met again at " + ", ".join(_num(v) for v in self.passed_above)
        if self.indeterminate:
            out += ("; indeterminate at " + ", ".join(_num(v) for v in self.indeterminate)
                    + " (too few requests to tell)")
        return out

    def width(self) -> float | None:
        """Upper end minus lower end (None while either is missing)."""
        if self.passed is None or self.failed is None:
            return None
        return self.failed - self.passed


def bracket_of(outcomes: Iterable[tuple[float, bool | None]]) -> Bracket:
    """The bracket from (level, met the tier) pairs, in any order (at least one pair);
    None for a level whose sample could not tell (indeterminate: left out, listed)."""
    given = sorted(outcomes, key=lambda p: p[0])
    if not given:
        raise ValueError("a bracket needs at least one measured level")
    unknown = [x for x, ok in given if ok is None]
    ordered = [(x, ok) for x, ok in given if ok is not None]
    failed = next((x for x, ok in ordered if not ok), None)
    below = [x for x, ok in ordered if ok and (failed is None or x < failed)]
    above = [x for x, ok in ordered if ok and failed is not None and x > failed]
    return Bracket(passed=below[-1] if below else None, failed=failed, passed_above=above,
                   indeterminate=unknown)


class RatioBracket(BaseModel):
    """What two brackets say about one arm's capacity over the baseline's."""

    model_config = ConfigDict(extra="forbid")

    low: float | None
    """The ratio is above this (None: no bound above 0)."""
    high: float | None
    """The ratio is below this (None: unbounded)."""
    verdict: Literal["more", "less", "unknown"]
    """``more``/``less``: this arm serves more/less than the baseline at every value the
    brackets allow; ``unknown``: the range holds 1."""

    def range_text(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.low:.2f}x \u2013 {self.high:.2f}x"
        if self.low is not None:
            return f"\u2265 {self.low:.2f}x"
        if self.high is not None:
            return f"\u2264 {self.high:.2f}x"
        return "unbounded"

    def text(self) -> str:
        """``1.25x – 4.00x``, ``≥ 2.00x``; or ``unknown (0.13x – 8.00x)`` when it holds 1."""
        if self.verdict == "unknown":
            return f"unknown ({self.range_text()})"
        return self.range_text()

    def meaning(self) -> str:
        """A few words: which arm serves more, as far as the brackets say."""
        return {"more": "serves more than the baseline",
                "less": "serves less than the baseline",
                "unknown": "either arm may serve more"}[self.verdict]


def ratio_bracket(base: Bracket, other: Bracket) -> RatioBracket:
    """``other`` / ``base`` bounded by the two brackets (each half-open: passed <= c < failed)."""
    low = (other.passed / base.failed
           if other.passed is not None and base.failed is not None else None)
    high = (other.failed / base.passed
            if other.failed is not None and base.passed else None)
    verdict: Literal["more", "less", "unknown"] = "unknown"
    if low is not None and low >= 1:
        verdict = "more"
    elif high is not None and high <= 1:
        verdict = "less"
    return RatioBracket(low=low, high=high, verdict=verdict)
