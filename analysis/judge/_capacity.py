"""Capacity planning: how much load each arm serves at each SLO tier.

A level meets a tier when its failure share is at most the maximum and at least
90% of all requests sent met each limit (``_tiers``). The capacity is the
largest load (users, or sessions/s in open loop) up to which every measured
level meets the tier; when the next level fails, the crossing is linearly
interpolated between the two levels (labelled ``interpolated``), per criterion,
and the smallest crossing wins. Its 95% interval comes from bootstrap
replicates of every level (users, and runs when repeats are pooled, resampled),
the capacity recomputed per replicate; the arms' capacity ratio likewise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from analysis.metrics import (
    BOOTSTRAP_REPS,
    TIER_QUANTILE,
    RunSummary,
    Samples,
    clusters_of,
    draw_counts,
    metric_rng,
    tier_shares,
)
from analysis.schema import DEFAULT_MAX_FAILURE_SHARE, SloTier

__all__ = ["CapacityRow", "capacity_table", "meets_tier"]

How = Literal["interpolated", "measured", "at least", "none"]


class CapacityRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arm: str
    tier: SloTier
    load_kind: Literal["users", "rate", "timestamps"] = "users"
    users: float | None
    """Largest load meeting the tier (users, or sessions/s for ``rate``); None when
    even the smallest level fails."""
    how: How
    """``interpolated`` between two levels; ``measured`` at a level (the next
    could not be interpolated); ``at least`` when every level met the tier (the
    limit lies beyond the sweep); ``none`` when the smallest level failed."""
    ci: tuple[float, float] | None = None
    """95% bootstrap interval of the capacity (None without replicates)."""
    ratio: float | None = None
    """This arm's capacity / the baseline's (None for the baseline)."""
    ratio_ci: tuple[float, float] | None = None
    gpu_count: int | None
    users_per_gpu: float | None
    decode_tok_s_per_gpu: float | None
    """Decode throughput per GPU at that load (interpolated likewise)."""
    levels: list[float]


def meets_tier(s: RunSummary, tier: SloTier) -> bool:
    """Whether the summary's goodput entry for ``tier`` says the tier is met."""
    g = next((g for g in s.goodput if g.tier == tier), None)
    return bool(g is not None and g.meets)


@dataclass(frozen=True)
class _Point:
    x: float
    fail: float
    ttft: float
    fast: float


def _cross(x0: float, x1: float, a: float, b: float, limit: float, above: bool) -> float:
    """Load where a criterion going from a (at x0) to b (at x1) crosses its limit
    (``above``: the value must stay at or above it)."""
    if not (np.isfinite(a) and np.isfinite(b)):
        return x0
    fails = b < limit if above else b > limit
    if not fails:
        return x1
    if a == b:
        return x0
    return x0 + (a - limit) / (a - b) * (x1 - x0)


def _capacity(points: Sequence[_Point], max_fail: float) -> tuple[float | None, How, int]:
    """(capacity, how, index of the last level meeting the tier)."""
    def ok(p: _Point) -> bool:
        return bool(p.fail <= max_fail and p.ttft >= TIER_QUANTILE and p.fast >= TIER_QUANTILE)

    k = -1
    for i, p in enumerate(points):
        if not ok(p):
            break
        k = i
    if k < 0:
        return None, "none", k
    lo = points[k]
    if k == len(points) - 1:
        return lo.x, "at least", k
    hi = points[k + 1]
    c = min(_cross(lo.x, hi.x, lo.ttft, hi.ttft, TIER_QUANTILE, True),
            _cross(lo.x, hi.x, lo.fast, hi.fast, TIER_QUANTILE, True),
            _cross(lo.x, hi.x, lo.fail, hi.fail, max_fail, False))
    if c <= lo.x:
        return lo.x, "measured", k
    return c, "interpolated", k


def _lerp(x0: float, x1: float, y0: float | None, y1: float | None, x: float) -> float | None:
    if y0 is None:
        return None
    if y1 is None or x1 == x0:
        return y0 if x == x0 else None
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _x(s: RunSummary) -> float:
    return s.level.value if s.level is not None else float(s.users)


def _point(s: RunSummary, tier: SloTier) -> _Point:
    g = next((g for g in s.goodput if g.tier == tier), None)

    def f(v: float | None) -> float:
        return float("nan") if v is None else v

    if g is None:
        return _Point(_x(s), float("nan"), float("nan"), float("nan"))
    return _Point(_x(s), f(g.failure_share), f(g.ttft_share), f(g.fast_share))


def _replicates(
    levels: Sequence[tuple[RunSummary, Samples]], tier: SloTier, max_fail: float, seed: int,
    arm: str,
) -> np.ndarray:
    """Capacity per bootstrap replicate (NaN where even the smallest level fails)."""
    per_level = []
    for s, smp in levels:
        shares = tier_shares(smp, tier)
        rng = metric_rng(seed, f"capacity/{tier.name}/{arm}/{_x(s)}")
        counts = draw_counts(smp.n_users, BOOTSTRAP_REPS, rng, clusters_of(smp))
        per_level.append((_x(s), *shares.replicate(counts)))
    out = np.full(BOOTSTRAP_REPS, np.nan)
    for i in range(BOOTSTRAP_REPS):
        pts = [_Point(x, float(f[i]), float(t[i]), float(q[i])) for x, f, t, q in per_level]
        cap, _, _ = _capacity(pts, max_fail)
        out[i] = np.nan if cap is None else cap
    return out


def _interval(reps: np.ndarray) -> tuple[float, float] | None:
    if np.isnan(reps).mean() > 0.1:
        return None  # too many replicates without any level meeting the tier
    lo, hi = np.nanquantile(reps, [0.025, 0.975])
    return float(lo), float(hi)


def _row(
    arm: str, levels: Sequence[tuple[RunSummary, Samples | None]], tier: SloTier,
    max_fail: float,
) -> CapacityRow:
    summaries = [s for s, _ in levels]
    gpus = next((s.gpu_count for s in summaries if s.gpu_count), None)
    kind = summaries[0].level.kind if summaries[0].level is not None else "users"
    u, how, k = _capacity([_point(s, tier) for s in summaries], max_fail)
    per_gpu = None
    if k >= 0:
        lo = summaries[k]
        per_gpu = lo.decode_tok_s_per_gpu
        if how == "interpolated" and u is not None:
            hi = summaries[k + 1]
            per_gpu = _lerp(_x(lo), _x(hi), lo.decode_tok_s_per_gpu, hi.decode_tok_s_per_gpu, u)
    return CapacityRow(
        arm=arm, tier=tier, load_kind=kind, users=u, how=how, gpu_count=gpus,
        users_per_gpu=u / gpus if gpus and u is not None else None,
        decode_tok_s_per_gpu=per_gpu, levels=[_x(s) for s in summaries],
    )


def _kind(s: RunSummary) -> str:
    return s.level.kind if s.level is not None else "users"


def capacity_table(
    arms: Mapping[str, Sequence[RunSummary | tuple[RunSummary, Samples]]],
    tiers: Sequence[SloTier], *, max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE,
    seed: int = 0,
) -> list[CapacityRow]:
    """One row per (tier, load kind, arm), from each arm's level summaries. With
    samples beside the summaries, each row carries a 95% interval, and every arm
    but the first its capacity ratio to the first arm (the baseline)."""
    pairs = {arm: [g if isinstance(g, tuple) else (g, None) for g in given]
             for arm, given in arms.items()}
    kinds = list(dict.fromkeys(_kind(s) for given in pairs.values() for s, _ in given))
    rows = []
    for tier in tiers:
        for kind in kinds:
            rows += _tier_rows(
                {arm: sorted([p for p in given if _kind(p[0]) == kind],
                             key=lambda p: _x(p[0])) for arm, given in pairs.items()},
                tier, max_failure_share, seed)
    return rows


def _tier_rows(
    arms: Mapping[str, Sequence[tuple[RunSummary, Samples | None]]], tier: SloTier,
    max_failure_share: float, seed: int,
) -> list[CapacityRow]:
    rows = []
    base_reps: np.ndarray | None = None
    base_row: CapacityRow | None = None
    baseline = next(iter(arms), None)
    for arm, ordered in arms.items():
        if not ordered:
            continue
        row = _row(arm, ordered, tier, max_failure_share)
        with_samples = [(s, smp) for s, smp in ordered if smp is not None]
        if len(with_samples) == len(ordered):
            reps = _replicates(with_samples, tier, max_failure_share, seed, arm)
            row.ci = _interval(reps) if row.users is not None else None
            if arm == baseline:
                base_reps, base_row = reps, row
            elif (base_reps is not None and base_row is not None and base_row.users
                  and row.users is not None):
                row.ratio = row.users / base_row.users
                with np.errstate(divide="ignore", invalid="ignore"):
                    rr = reps / base_reps
                row.ratio_ci = _interval(np.where(np.isfinite(rr), rr, np.nan))
        rows.append(row)
    return rows
