"""Capacity planning: how many users each arm serves at each SLO tier.

A level meets a tier when its P90 interactivity (1/P90 TPOT) is at least the
floor and its P90 TTFT from schedule is at most the ceiling. The capacity is
the largest user count below which every measured level meets the tier; when
the next level fails, the crossing is linearly interpolated between the two
levels (labelled ``interpolated``), per limit, and the smaller crossing wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from analysis._metrics import RunSummary
from analysis._slo import SloTier

__all__ = ["CapacityRow", "capacity_table", "meets_tier"]

How = Literal["interpolated", "measured", "at least", "none"]


class CapacityRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arm: str
    tier: SloTier
    users: float | None
    """Largest user count meeting the tier; None when even the smallest level fails."""
    how: How
    """``interpolated`` between two levels; ``measured`` at a level (the next
    could not be interpolated); ``at least`` when every level met the tier (the
    limit lies beyond the sweep); ``none`` when the smallest level failed."""
    gpu_count: int | None
    users_per_gpu: float | None
    decode_tok_s_per_gpu: float | None
    """Decode throughput per GPU at that user count (interpolated likewise)."""
    levels: list[int]


def meets_tier(s: RunSummary, tier: SloTier) -> bool:
    inter, ttft = s.interactivity.p90, s.ttft_due.p90
    return inter is not None and ttft is not None and inter >= tier.floor_tok_s \
        and ttft <= tier.ttft_s


def _lerp(x0: float, x1: float, y0: float | None, y1: float | None, x: float) -> float | None:
    if y0 is None:
        return None
    if y1 is None or x1 == x0:
        return y0 if x == x0 else None
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _crossing(
    u0: float, u1: float, a: float | None, b: float | None, limit: float, above: bool
) -> float | None:
    """Users where a metric going from a (at u0) to b (at u1) crosses the limit."""
    if a is None or b is None:
        return None
    fails = b < limit if above else b > limit
    if not fails:
        return u1
    if a == b:
        return u0
    return u0 + (a - limit) / (a - b) * (u1 - u0)


def _row(arm: str, levels: list[RunSummary], tier: SloTier) -> CapacityRow:
    gpus = next((s.gpu_count for s in levels if s.gpu_count), None)
    users = [s.users for s in levels]
    k = -1
    for i, s in enumerate(levels):
        if not meets_tier(s, tier):
            break
        k = i
    per_gpu = None
    if k < 0:
        return CapacityRow(arm=arm, tier=tier, users=None, how="none", gpu_count=gpus,
                           users_per_gpu=None, decode_tok_s_per_gpu=None, levels=users)
    lo = levels[k]
    if k == len(levels) - 1:
        u: float = lo.users
        how: How = "at least"
        per_gpu = lo.decode_tok_s_per_gpu
    else:
        hi = levels[k + 1]
        c1 = _crossing(lo.users, hi.users, lo.interactivity.p90, hi.interactivity.p90,
                       tier.floor_tok_s, above=True)
        c2 = _crossing(lo.users, hi.users, lo.ttft_due.p90, hi.ttft_due.p90, tier.ttft_s,
                       above=False)
        if c1 is None or c2 is None or min(c1, c2) <= lo.users:
            u, how, per_gpu = lo.users, "measured", lo.decode_tok_s_per_gpu
        else:
            u, how = min(c1, c2), "interpolated"
            per_gpu = _lerp(lo.users, hi.users, lo.decode_tok_s_per_gpu,
                            hi.decode_tok_s_per_gpu, u)
    return CapacityRow(
        arm=arm, tier=tier, users=u, how=how, gpu_count=gpus,
        users_per_gpu=u / gpus if gpus else None, decode_tok_s_per_gpu=per_gpu, levels=users,
    )


def capacity_table(
    arms: Mapping[str, Sequence[RunSummary]], tiers: Sequence[SloTier]
) -> list[CapacityRow]:
    """One row per (tier, arm), from each arm's level summaries."""
    rows = []
    for tier in tiers:
        for arm, levels in arms.items():
            ordered = sorted(levels, key=lambda s: s.users)
            if ordered:
                rows.append(_row(arm, ordered, tier))
    return rows
