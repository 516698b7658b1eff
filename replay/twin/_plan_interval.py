"""``plan --twin`` with a stored prediction interval: capacity per tier as an interval,
and the answers beyond what the battery checked labelled extrapolated.

A level is judged against each tier twice with the interval at that level
(``widened_meets``): at its pessimistic end (strict) and its optimistic end (loose).
The capacity interval runs from the strict passing level to the loose failing level.
The interval widens with the distance from the checked level (per replica: N
replicas at N x U users are each at U), and a what-if (other think times, another
workload than the fitted runs') counts as further away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analysis import SloTier
from analysis.judge import Bracket, bracket_of
from replay.twin._band import widened_meets
from replay.twin._interval import PredictionInterval
from replay.twin._level import LevelResult, Workload

__all__ = ["TierInterval", "extrapolation", "is_what_if", "tier_interval"]


@dataclass(frozen=True)
class TierInterval:
    strict: Bracket
    loose: Bracket

    @property
    def low(self) -> float | None:
        """The capacity is at least this (None: no claim)."""
        return self.strict.passed

    @property
    def high(self) -> float | None:
        """The capacity is below this (None: no claim)."""
        return self.loose.failed


def is_what_if(interval: PredictionInterval, workload: Workload, think_scale: float) -> bool:
    """Other think times or another workload than the one the twin was checked on."""
    other = bool(interval.workload_fingerprint) and \
        workload.header.fingerprint != interval.workload_fingerprint
    return other or think_scale != 1.0


def tier_interval(levels: Sequence[int], results: Sequence[LevelResult], tier: SloTier,
                  interval: PredictionInterval, replicas: int = 1,
                  what_if: bool = False) -> TierInterval:
    """The tier's capacity interval on the ladder (each level judged with the interval
    at its per-replica load)."""
    def bracket(strict: bool) -> Bracket:
        return bracket_of((float(u), widened_meets(r.summary, tier, interval, u / replicas,
                                                   strict=strict, what_if=what_if,
                                                   replicas=replicas))
                          for u, r in zip(levels, results, strict=True))
    return TierInterval(bracket(True), bracket(False))


def extrapolation(interval: PredictionInterval, users: float | None, replicas: int,
                  workload: Workload) -> list[str]:
    """Why an answer at ``users`` (the fleet's) is extrapolated (empty: it is not)."""
    from replay.load import first_too_long

    per = 0.0 if users is None else users / replicas
    why = interval.extrapolated(per)
    found = first_too_long(workload.sessions, interval.max_request_tokens)
    if found is not None:
        sess, turn, req = found
        why.append(f"session {sess.id!r} request {turn} needs "
                   f"{req.prompt_tokens + req.output_tokens} tokens, more than any request "
                   f"the twin was fitted on ({interval.max_request_tokens})")
    return why
