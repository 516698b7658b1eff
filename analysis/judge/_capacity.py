"""Capacity planning: between which measured loads each arm stops meeting each SLO tier.

A level meets a tier when its goodput entry says so (failure share at most the
maximum, at least 90% of all requests sent met each limit: ``_tiers``); a level
whose sample could not tell is indeterminate and moves no bracket end. Per arm
and tier the answer is the bracket of measured levels (``_bracket``): the
largest level up to which every level met the tier, and the first that failed;
nothing is interpolated in between. Throughput and users per GPU are those of
the passing level. The arms' capacity ratio is bounded by their brackets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from analysis.judge._bracket import Bracket, RatioBracket, bracket_of, ratio_bracket
from analysis.metrics import RunSummary
from analysis.schema import SloTier

__all__ = ["CapacityRow", "capacity_table", "meets_tier"]


class CapacityRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arm: str
    tier: SloTier
    load_kind: Literal["users", "rate", "timestamps"] = "users"
    bracket: Bracket
    """Measured levels around the capacity (users, or sessions/s for ``rate``)."""
    gpu_count: int | None
    users_per_gpu: float | None
    """The passing level (``bracket.passed``) per GPU; None without one."""
    decode_tok_s_per_gpu: float | None
    """Decode throughput per GPU measured at the passing level."""
    power_w: float | None = None
    """Mean GPU power over the passing level's window (``--gpu-metrics``; None: no
    telemetry there, missing)."""
    users_per_kw: float | None = None
    """The passing level per kilowatt of that power (agents per kW)."""
    output_tok_per_j: float | None = None
    """Output tokens per joule at the passing level."""
    j_per_output_tok: float | None = None
    ratio: RatioBracket | None = None
    """This arm's capacity over the baseline's, bounded by the brackets (None for the
    baseline)."""
    levels: list[float]


def meets_tier(s: RunSummary, tier: SloTier) -> bool | None:
    """Whether the summary's goodput entry for ``tier`` says the tier is met; None when
    the sample could not tell (indeterminate: ``analysis.metrics.judge_tier``)."""
    g = next((g for g in s.goodput if g.tier == tier), None)
    if g is None:
        return False
    outcome = g.judged()
    return None if outcome == "indeterminate" else outcome == "meets"


def _x(s: RunSummary) -> float:
    return s.level.value


def _kind(s: RunSummary) -> str:
    return s.level.kind


def _row(arm: str, summaries: Sequence[RunSummary], tier: SloTier) -> CapacityRow:
    gpus = next((s.gpu_count for s in summaries if s.gpu_count), None)
    kind = summaries[0].level.kind if summaries[0].level is not None else "users"
    b = bracket_of((_x(s), meets_tier(s, tier)) for s in summaries)
    at = next((s for s in summaries if b.passed is not None and _x(s) == b.passed), None)
    return CapacityRow(
        arm=arm, tier=tier, load_kind=kind, bracket=b, gpu_count=gpus,
        users_per_gpu=b.passed / gpus if gpus and b.passed is not None else None,
        decode_tok_s_per_gpu=at.decode_tok_s_per_gpu if at is not None else None,
        levels=[_x(s) for s in summaries],
    ).model_copy(update=_energy_at(at, b.passed))


def _energy_at(at: RunSummary | None, passed: float | None) -> dict[str, float | None]:
    """The passing level's energy figures (all None where it had no GPU telemetry)."""
    e = at.energy if at is not None else None
    if e is None:
        return {}
    return {"power_w": e.power_w, "output_tok_per_j": e.output_tok_per_j,
            "j_per_output_tok": e.j_per_output_tok,
            "users_per_kw": passed / (e.power_w / 1000.0)
            if passed is not None and e.power_w > 0 else None}


def capacity_table(
    arms: Mapping[str, Sequence[RunSummary]],
    tiers: Sequence[SloTier],
) -> list[CapacityRow]:
    """One row per (tier, load kind, arm), from each arm's level summaries; every arm
    but the first carries its capacity ratio to the first (the baseline)."""
    given = {arm: list(items) for arm, items in arms.items()}
    kinds = list(dict.fromkeys(_kind(s) for items in given.values() for s in items))
    baseline = next(iter(given), None)
    rows = []
    for tier in tiers:
        for kind in kinds:
            base: CapacityRow | None = None
            for arm, items in given.items():
                ordered = sorted((s for s in items if _kind(s) == kind), key=_x)
                if not ordered:
                    continue
                row = _row(arm, ordered, tier)
                if arm == baseline:
                    base = row
                elif base is not None:
                    row.ratio = ratio_bracket(base.bracket, row.bracket)
                rows.append(row)
    return rows
