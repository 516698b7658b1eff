"""The between-run spread against synthetic repeated levels of known spread."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.fit import between_runs, between_runs_by_metric


def _levels(sd: float, levels: int, runs: int, seed: int,
            means: tuple[float, ...] = (1.0,)) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(means[i % len(means)] * np.exp(rng.normal(0.0, sd, runs)))
            for i in range(levels)]


@pytest.mark.parametrize("sd", [0.05, 0.2, 0.5])
def test_recovers_the_known_spread(sd: float) -> None:
    b = between_runs(_levels(sd, levels=300, runs=3, seed=7))
    assert b is not None
    assert b.dof == 600 and b.levels == 300
    assert b.sd == pytest.approx(sd, rel=0.08)


def test_levels_of_different_size_pool_around_their_own_means() -> None:
    """Levels at 1, 100 and 10^4 (tok/s at 1 user vs 64): each level's mean is taken out,
    so the spread is the runs', not the levels'."""
    b = between_runs(_levels(0.1, levels=300, runs=2, seed=3, means=(1.0, 100.0, 1e4)))
    assert b is not None and b.sd == pytest.approx(0.1, rel=0.1)


def test_single_runs_and_missing_values_say_nothing() -> None:
    assert between_runs([[1.0], [2.0, None], [None, 0.0]]) is None
    b = between_runs([[1.0], [1.0, math.e]])
    assert b is not None and b.dof == 1 and b.levels == 1
    assert b.sd == pytest.approx(math.sqrt(0.5))


def test_by_metric_leaves_out_metrics_without_repeats() -> None:
    by_level = {1: [{"a": 1.0, "b": 2.0}], 8: [{"a": 1.0, "b": None}, {"a": 1.2, "b": 3.0}]}
    out = between_runs_by_metric(by_level, ("a", "b"))
    assert set(out) == {"a"}
    assert out["a"].sd == pytest.approx(abs(math.log(1.2)) / math.sqrt(2))
