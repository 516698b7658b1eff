"""How far one run of a level lies from another run of the same level: the between-run
spread, estimated from repeated levels.

A run's own bootstrap interval resamples the requests *inside* it; it cannot see what
differs *between* runs (the machine's load then, a server's stalls that come in
spells, which long prompt lands behind which). On a busy host one level measured twice
differed by up to 55% where the in-run interval said a few percent. So where a level
was measured more than once, the spread of its runs is measured directly: the pooled
log standard deviation over every level with two runs or more (each level's own mean
taken out, so levels of different size pool; degrees of freedom the runs less the
levels). Pure: values in, a spread out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["BetweenRuns", "between_runs", "between_runs_by_metric"]


@dataclass(frozen=True)
class BetweenRuns:
    """One metric's between-run spread."""

    sd: float
    """Pooled log standard deviation of one run of a level around the level's mean."""
    dof: int
    """Degrees of freedom it rests on (runs less levels, over the repeated levels)."""
    levels: int
    """Levels with two runs or more."""


def between_runs(levels: Iterable[Sequence[float | None]]) -> BetweenRuns | None:
    """The pooled log spread of repeated runs (each item: one level's runs' values).
    None: no level has two positive values."""
    ss, dof, used = 0.0, 0, 0
    for values in levels:
        logs = [math.log(v) for v in values if v is not None and v > 0]
        if len(logs) < 2:
            continue
        m = sum(logs) / len(logs)
        ss += sum((x - m) ** 2 for x in logs)
        dof += len(logs) - 1
        used += 1
    if not dof:
        return None
    return BetweenRuns(math.sqrt(ss / dof), dof, used)


def between_runs_by_metric(
        by_level: Mapping[int, Sequence[Mapping[str, float | None]]],
        metrics: Sequence[str]) -> dict[str, BetweenRuns]:
    """Per metric, the between-run spread of ``by_level`` (users -> each run's metric
    values); metrics without a repeated level are left out."""
    out: dict[str, BetweenRuns] = {}
    for key in metrics:
        b = between_runs([r.get(key) for r in runs] for runs in by_level.values())
        if b is not None:
            out[key] = b
    return out
