"""The ladder, the tier capacity read off it and replicas for K agents (controlled inputs)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from analysis import SloTier
from analysis.metrics import Goodput
from replay.twin import capacities, level_ladder, replicas_needed


def test_ladder_is_geometric_distinct_and_spans_the_range() -> None:
    lad = level_ladder(1, 256, 20)
    assert lad[0] == 1 and lad[-1] == 256
    assert lad == sorted(set(lad)) and len(lad) == 18  # low rungs coincide when rounded
    assert level_ladder(4, 4, 20) == [4]
    assert level_ladder(1, 8, 4) == [1, 2, 4, 8]
    with pytest.raises(ValueError):
        level_ladder(0, 4, 3)


def _result(tier: SloTier, meets: bool) -> Any:
    g = Goodput(tier=tier, requests=None, users=None, meets=meets)
    return SimpleNamespace(summary=SimpleNamespace(goodput=[g]))


def test_capacity_is_the_bracket_of_meets_tier() -> None:
    t = SloTier(floor_tok_s=30, ttft_s=15)
    levels = [1, 2, 4, 8, 16]
    caps = capacities(levels, [_result(t, m) for m in (True, True, False, True, False)], [t])
    b = caps[0].bracket
    assert caps[0].users == 2 and b.failed == 4 and b.passed_above == [8]
    assert b.text("users") == "between 2 and 4 users; not monotone: met again at 8"
    none = capacities(levels, [_result(t, False)] * 5, [t])[0]
    assert none.users is None and none.bracket.text("users") == "below 1 user"
    every = capacities(levels, [_result(t, True)] * 5, [t])[0]
    assert every.users == 16 and every.bracket.text("users") == "at least 16 users"


def test_replicas_needed_scales_the_per_replica_capacity() -> None:
    assert replicas_needed(100, 25, 1) == 4
    assert replicas_needed(100, 30, 1) == 4  # 3.33 -> 4
    assert replicas_needed(100, 50, 2) == 4  # 25 per replica
    assert replicas_needed(10, 64, 1) == 1
    assert replicas_needed(10, None, 1) is None
