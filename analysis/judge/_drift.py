"""Drift between repeats: per-run values of one arm at one level, compared.

Pooling repeats widens the interval by the spread between runs, but says nothing
when one run was slower (a restart, another tenant): the pooled P90 just moves.
Here each repeat's value gets its own 95% bootstrap interval (users resampled,
widened for few users as the comparison's are); two repeats whose log-difference
exceeds the root-sum-square of their intervals' half-widths (scaled up for the
number of pairs compared, Bonferroni, so identical repeats are flagged about 5% of
the time whatever their number) changed by more than the within-run noise
explains, which is a caveat naming the arm, the metric and the size. When pairing
a repeat of one arm with a repeat of the other puts the ratio on the other side of
1 (or within ``min_effect`` of it), the drift could flip the verdict: the level's
difference is not established.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

from analysis.metrics import (
    BOOTSTRAP_REPS,
    RunSummary,
    Samples,
    metric_rng,
    small_sample_widening,
)
from analysis.schema import ValidityReason

__all__ = ["DRIFT_METRICS", "Drift", "RepeatValue", "drift_evidence", "drift_flip", "drift_of",
           "drift_reasons", "repeat_drift"]

_Reps = Callable[[Samples, np.random.Generator], np.ndarray | None]


DRIFT_METRICS = ("interactivity.p90", "ttft.p90", "e2e.p90")
"""Metrics whose per-repeat values are compared for drift between repeats."""

class _Metric(Protocol):
    """A headline metric (``_comparison.HEADLINE``): its key, how to read it, resample it."""

    @property
    def key(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def point(self) -> Callable[[RunSummary], float | None]: ...
    @property
    def replicates(self) -> _Reps: ...


class RepeatValue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    value: float
    ci: tuple[float, float] | None


class Drift(BaseModel):
    """A metric of one arm at one level that moved between repeats beyond noise."""

    model_config = ConfigDict(extra="forbid")

    arm: str
    level: str
    metric: str
    label: str
    unit: str
    repeats: list[RepeatValue]
    """Every repeat's value (in the order the runs started) and its 95% interval."""
    factor: float
    """Largest / smallest repeat value."""
    explained: float
    """The factor the within-run intervals explain (root-sum-square in log space)."""

    def text(self) -> str:
        vals = " -> ".join(f"{r.value:.3g}" for r in self.repeats)
        return (f"arm {self.arm!r} at {self.level}: {self.label} moved {vals} {self.unit} "
                f"between repeats ({self.factor:.2f}x apart, the within-run 95% intervals "
                f"explain {self.explained:.2f}x): the server or machine drifted between runs "
                "(a restart, another tenant, thermals)")


def _half_width(point: float, ci: tuple[float, float] | None) -> float | None:
    """Half-width of an interval in log space (the larger side)."""
    if ci is None or point <= 0 or ci[0] <= 0 or not all(map(math.isfinite, ci)):
        return None
    return max(math.log(point) - math.log(ci[0]), math.log(ci[1]) - math.log(point))


def repeat_drift(
    arm: str, level: str, runs: Sequence[tuple[str, Samples, float | None]], *,
    metric: str, label: str, unit: str, replicates: _Reps, seed: int,
) -> tuple[list[RepeatValue], Drift | None]:
    """Each repeat's value and interval; the drift when some pair of repeats differs by
    more than their intervals explain (``runs``: run id, its samples, its point value)."""
    values: list[RepeatValue] = []
    for run_id, smp, point in runs:
        if point is None or not point > 0:
            continue
        ci = None
        reps = replicates(smp, metric_rng(seed, f"drift/{metric}/{level}/{run_id}")) \
            if len(runs) > 1 else None  # one run: nothing to compare it with
        if reps is not None:
            reps = reps[np.isfinite(reps) & (reps > 0)]
            if len(reps) >= 0.9 * BOOTSTRAP_REPS:
                lo, hi = np.log(np.quantile(reps, [0.025, 0.975]))
                mid, k = math.log(point), small_sample_widening(smp.n_users)
                lo, hi = min(lo, mid), max(hi, mid)
                ci = (math.exp(mid - k * (mid - lo)), math.exp(mid + k * (hi - mid)))
        values.append(RepeatValue(run_id=run_id, value=point, ci=ci))
    worst: tuple[float, float] | None = None
    pairs = len(values) * (len(values) - 1) // 2
    scale = NormalDist().inv_cdf(1 - 0.025 / max(pairs, 1)) / NormalDist().inv_cdf(0.975)
    for a, b in itertools.combinations(values, 2):
        wa, wb = _half_width(a.value, a.ci), _half_width(b.value, b.ci)
        if wa is None or wb is None:
            continue
        gap = abs(math.log(a.value / b.value))
        noise = scale * math.hypot(wa, wb)
        if gap > noise and (worst is None or gap - noise > worst[0] - worst[1]):
            worst = (gap, noise)
    if worst is None:
        return values, None
    vs = [v.value for v in values]
    return values, Drift(arm=arm, level=level, metric=metric, label=label, unit=unit,
                         repeats=values, factor=max(vs) / min(vs),
                         explained=math.exp(worst[1]))


def drift_flip(ratio: float, base: Sequence[RepeatValue], other: Sequence[RepeatValue],
               min_effect: float) -> tuple[float, float] | None:
    """(lowest, highest) ratio over pairs of repeats, when some pair says the opposite
    of ``ratio`` (other side of 1, or within ``min_effect`` of it); else None."""
    pairs = [o.value / b.value for b in base for o in other]
    if not pairs:
        return None
    up = ratio > 1
    flips = [p for p in pairs if (p > 1) != up or abs(p - 1) < min_effect]
    return (min(pairs), max(pairs)) if flips else None


def drift_of(
    label: str, metrics: Sequence[_Metric],
    groups: dict[str, list[tuple[str, Samples, RunSummary]]], seed: int,
) -> tuple[list[Drift], dict[str, dict[str, list[RepeatValue]]]]:
    """Per drift metric: every arm's per-repeat values, and the drifts found."""
    drifts: list[Drift] = []
    values: dict[str, dict[str, list[RepeatValue]]] = {}
    if all(len(g) < 2 for g in groups.values()):
        return drifts, values
    for m in metrics:
        if m.key not in DRIFT_METRICS:
            continue
        for arm, runs in groups.items():
            vals, d = repeat_drift(
                arm, label, [(rid, smp, m.point(s)) for rid, smp, s in runs], metric=m.key,
                label=m.label, unit=m.unit, replicates=m.replicates, seed=seed)
            values.setdefault(m.key, {})[arm] = vals
            if d is not None:
                drifts.append(d)
    return drifts, values


def drift_evidence(metric: str, ratio: float | None, base: str, arm: str,
                   drifts: Sequence[Drift], values: dict[str, dict[str, list[RepeatValue]]],
                   min_effect: float) -> str | None:
    """Why a ratio is not established when drift between repeats could flip it."""
    if ratio is None or not any(d.metric == metric and d.arm in (base, arm) for d in drifts):
        return None
    per = values.get(metric, {})
    span = drift_flip(ratio, per.get(base, []), per.get(arm, []), min_effect)
    if span is None:
        return None
    return (f"drift between repeats could flip it: pairing single repeats gives "
            f"{span[0]:.2f}x to {span[1]:.2f}x")


def drift_reasons(drifts: Sequence[Drift]) -> list[ValidityReason]:
    """One ``repeat_drift`` caveat per drift found."""
    return [ValidityReason(code="repeat_drift", severity="caveat", message=d.text())
            for d in drifts]
