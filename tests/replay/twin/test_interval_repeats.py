"""The prediction interval widened by the between-run spread of repeated levels, against
synthetic measurements whose between-run spread is known (pure: no twin is run).

The situation of the real vLLM server on a busy host: the twin's seeds move a level by
a few percent, while two runs of the same level differ by tens of percent (the
machine's load, stalls in spells). An interval sized on the seeds misses a fresh
measurement most of the time; widened by the spread the repeats show, it holds one at
about its nominal rate.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.fit import between_runs_by_metric
from replay.twin import PredictionInterval
from replay.twin._interval import with_between_runs

KEY = "p90_interactivity"
SEED_SPREAD = 0.02
"""The twin's spread over engine seeds (log sd)."""
BETWEEN = 0.25
"""The true spread of one run of a level around the level's value (log sd)."""


def _interval(miss: float) -> PredictionInterval:
    return PredictionInterval(checked_users=8, max_measured_users=8, max_request_tokens=1000,
                              miss={KEY: miss}, spread={KEY: SEED_SPREAD * math.sqrt(2)},
                              requests=200, z=2.0, refits=4, sampling={KEY: SEED_SPREAD})


def _coverage(widen: bool, trials: int = 800) -> float:
    """Share of fresh measurements of the held-out level inside the interval, for an
    unbiased twin calibrated on 1, 2, 4 users and 8 held out, each level run twice."""
    rng = np.random.default_rng(11)
    truth, held = 100.0, 0
    for _ in range(trials):
        runs = {u: [{KEY: truth * u * math.exp(rng.normal(0, BETWEEN))} for _ in range(2)]
                for u in (1, 2, 4, 8)}
        measured = math.exp(np.mean([math.log(r[KEY]) for r in runs[8]])) / 8
        predicted = truth * math.exp(rng.normal(0, SEED_SPREAD / 2))
        interval = _interval(abs(math.log(predicted / measured)))
        if widen:
            interval = with_between_runs(interval, between_runs_by_metric(runs, (KEY,)))
        fresh = truth * math.exp(rng.normal(0, BETWEEN))
        held += interval.holds(KEY, predicted, fresh, 8)
    return held / trials


def test_repeats_widen_the_interval_to_its_nominal_coverage() -> None:
    narrow, wide = _coverage(False), _coverage(True)
    assert narrow < 0.75  # the seeds alone: far under 90%
    assert 0.85 <= wide <= 0.99


def test_no_wider_where_the_repeats_spread_no_more_than_the_seeds() -> None:
    base = _interval(0.01)
    runs = {8: [{KEY: 100.0}, {KEY: 100.0 * math.exp(SEED_SPREAD / 2)}]}
    same = with_between_runs(base, between_runs_by_metric(runs, (KEY,)))
    assert same.half_width(KEY, 8) == base.half_width(KEY, 8)
    assert same.between_runs[KEY] < SEED_SPREAD


def test_stored_and_read_back() -> None:
    from replay.twin import interval_of

    runs = {4: [{KEY: 1.0}, {KEY: 1.3}], 8: [{KEY: 2.0}, {KEY: 2.4}]}
    wide = with_between_runs(_interval(0.05), between_runs_by_metric(runs, (KEY,)))
    back = interval_of({"interval": wide.as_dict()})
    assert back == wide
    assert back.half_width(KEY, 8) > _interval(0.05).half_width(KEY, 8)
    assert back.between_dof[KEY] == 2 and back.z_between[KEY] > back.z
