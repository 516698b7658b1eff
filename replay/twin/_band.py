"""The twin's capacity with its calibration error: a prediction interval, never a
point, and its place against the measured bracket.

``agentreplay calibrate --holdout`` measured how far the twin's P90 interactivity and
P90 TTFT missed a level left out of the fit (``calibration.holdouts``, predicted /
measured - 1). The largest miss of each, as a factor either way (+25% is 1.25x; -74%
is 3.85x, the measurement 3.85 times the prediction), widens every tier both ways:
the twin's levels are judged against a stricter tier (floor raised by the
interactivity factor, TTFT ceiling lowered by the TTFT factor) and a looser one. The
interval runs from the strict tier's passing level to the loose tier's failing level:
what the twin supports given how wrong it was where it could be checked. Without a
held-out check there is no interval to give.

A twin calibrated now stores a prediction interval that widens with the distance from
the checked level (``replay.twin._interval``); ``widened_meets`` judges a level at
either end of it, and the band above stays for twin files that predate it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analysis import DEFAULT_MAX_FAILURE_SHARE, RunSummary, SloTier
from analysis.judge import Bracket
from analysis.text import plural
from replay.twin._interval import PredictionInterval

__all__ = [
    "ErrorBand", "calibration_error", "interval_text", "outside_measured", "widened_meets",
    "widened_tiers",
]

_MAX_FAILURES = DEFAULT_MAX_FAILURE_SHARE


@dataclass(frozen=True)
class ErrorBand:
    """The largest held-out relative errors of a twin (None: no held-out check)."""

    interactivity: float
    """The largest factor by which the twin missed P90 interactivity (>= 1)."""
    ttft: float
    """The same for P90 TTFT."""
    holdouts: int

    def text(self) -> str:
        return (f"held-out miss up to {self.interactivity:.2f}x in P90 interactivity, "
                f"{self.ttft:.2f}x in P90 TTFT ({plural(self.holdouts, 'level')})")


_WORST = 100.0
"""A prediction of (nearly) nothing misses by at most this factor: still an interval."""


def _factor(relative_error: float) -> float:
    """predicted / measured - 1 as the factor of the miss, either way (>= 1)."""
    ratio = 1.0 + relative_error
    if ratio <= 1.0 / _WORST:
        return _WORST
    return min(_WORST, max(ratio, 1.0 / ratio))


def calibration_error(calibration: Mapping[str, Any] | None) -> ErrorBand | None:
    """The twin's measured error from its ``calibration.holdouts``; None without one."""
    holds = (calibration or {}).get("holdouts")
    if not isinstance(holds, list):
        return None
    inter: list[float] = []
    ttft: list[float] = []
    for h in holds:
        err = h.get("relative_error") if isinstance(h, dict) else None
        if not isinstance(err, dict):
            continue
        for key, into in (("p90_interactivity", inter), ("p90_ttft_s", ttft)):
            v = err.get(key)
            if isinstance(v, int | float) and v == v:  # not NaN
                into.append(_factor(float(v)))
    if not inter:
        return None
    return ErrorBand(interactivity=max(inter), ttft=max(ttft, default=1.0),
                     holdouts=len(inter))


def widened_tiers(tier: SloTier, band: ErrorBand) -> tuple[SloTier, SloTier]:
    """(strict, loose): the tier the twin must meet if it was optimistic by the band,
    and the one it need only meet if it was pessimistic."""
    strict = SloTier(floor_tok_s=tier.floor_tok_s * band.interactivity,
                     ttft_s=tier.ttft_s / band.ttft)
    loose = SloTier(floor_tok_s=tier.floor_tok_s / band.interactivity,
                    ttft_s=tier.ttft_s * band.ttft)
    return strict, loose


def outside_measured(twin: Bracket, measured: Bracket) -> bool:
    """True when the twin's bracket and the measured one cannot both hold: the twin
    passes a level the measurements failed, or fails one they passed."""
    if twin.passed is not None and measured.failed is not None and \
            twin.passed >= measured.failed:
        return True
    return twin.failed is not None and measured.passed is not None and \
        twin.failed <= measured.passed


def _count(value: float, unit: str) -> str:
    """``1 user``, ``6 users`` (a unit that is not a plural noun stays as it is)."""
    one = unit[:-1] if unit.endswith("s") and value == 1 and unit.isalpha() else unit
    return f"{value:g} {one}"


def interval_text(strict: Bracket, loose: Bracket, unit: str = "users") -> str:
    """The prediction interval from the strict tier's passing level to the loose
    tier's failing level."""
    lo = "below the lowest level" if strict.passed is None else _count(strict.passed, unit)
    hi = "beyond the highest level tried" if loose.failed is None else \
        f"below {_count(loose.failed, unit)}"
    return f"from {lo} to {hi}"


def widened_meets(summary: RunSummary, tier: SloTier, interval: PredictionInterval,
                  users: float, *, strict: bool, what_if: bool = False,
                  replicas: int = 1) -> bool:
    """Whether a twin level meets ``tier`` with its prediction interval at ``users``
    (per replica, on ``replicas`` engines): ``strict`` asks the interval's pessimistic
    end to meet it (P90 interactivity at its low bound, P90 TTFT from schedule at its
    high one), otherwise the optimistic end. A tier is met when P90 interactivity >=
    floor and P90 TTFT from schedule <= ceiling (``analysis.metrics``), the failure
    share within its maximum (the level's own verdict: an interval does not widen
    failures)."""
    from analysis.judge import meets_tier

    # an indeterminate level (None: too few requests to tell) is met at the optimistic
    # end and not at the pessimistic one: it widens the interval, never narrows it
    verdict = meets_tier(summary, tier)
    met = verdict is True if strict else verdict is not False
    inter, ttft = summary.interactivity.p90, summary.ttft_due.p90
    if inter is None or ttft is None:
        return met
    wi = interval.half_width("p90_interactivity", users, what_if, replicas)
    wt = interval.half_width("p90_ttft_s", users, what_if, replicas)
    sign = -1.0 if strict else 1.0
    by_p90 = inter * math.exp(sign * wi) >= tier.floor_tok_s and \
        ttft * math.exp(-sign * wt) <= tier.ttft_s
    fails = summary.counts.failure_share
    if strict:
        return met and by_p90
    return met or (by_p90 and (fails is None or fails <= _MAX_FAILURES))
