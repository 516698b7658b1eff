"""The interval with the fit's own uncertainty: miss and spread in quadrature, the
width growing with the load, a what-if and the replica count; twin files from before
the refits keep their stored rule."""

from __future__ import annotations

import math

import pytest

from replay.twin import PredictionInterval
from replay.twin._interval import GROWTH, REPLICA_DOUBLINGS, WHAT_IF_DOUBLINGS


def _interval(refits: int) -> PredictionInterval:
    return PredictionInterval(
        checked_users=8, max_measured_users=8, max_request_tokens=4000,
        miss={"p90_interactivity": 0.03, "p90_ttft_s": 0.2, "output_tok_s": 0.0},
        spread={"p90_interactivity": 0.02, "p90_ttft_s": 0.1, "output_tok_s": 0.01},
        fit_spread={"p90_interactivity": 0.015, "p90_ttft_s": 0.05, "output_tok_s": 0.0},
        requests=200, z=2.0, refits=refits)


def test_miss_and_spread_combine_in_quadrature_and_grow_with_distance() -> None:
    pi = _interval(refits=5)
    at = math.hypot(0.03, 2.0 * 0.02)
    assert pi.half_width("p90_interactivity", 8) == pytest.approx(at)
    assert pi.half_width("p90_interactivity", 4) == pytest.approx(at)  # below: not narrower
    assert pi.half_width("p90_interactivity", 16) == pytest.approx(at * (1 + GROWTH))
    assert pi.half_width("p90_interactivity", 32) == pytest.approx(at * (1 + 2 * GROWTH))
    assert pi.half_width("p90_interactivity", 8, what_if=True) == pytest.approx(
        at * (1 + GROWTH * WHAT_IF_DOUBLINGS))
    # 4 replicas at 8 users each: two doublings of the fleet
    assert pi.half_width("p90_interactivity", 8, replicas=4) == pytest.approx(
        at * (1 + GROWTH * 2 * REPLICA_DOUBLINGS))
    # no miss: the spread alone, still a real width
    assert pi.half_width("output_tok_s", 8) == pytest.approx(0.02)
    # a truth 5% off a prediction whose interval is about +-5.4%: inside; 6%: outside
    assert pi.holds("p90_interactivity", 100.0, 105.0, 8)
    assert not pi.holds("p90_interactivity", 100.0, 106.0, 8)
    assert pi.holds("p90_interactivity", 100.0, 106.0, 8, replicas=2)


def test_a_twin_from_before_the_refits_keeps_its_rule() -> None:
    old = _interval(refits=0)
    assert old.half_width("p90_ttft_s", 8) == pytest.approx(0.2 + 2.0 * 0.1)
    assert old.half_width("p90_ttft_s", 8, replicas=4) == old.half_width("p90_ttft_s", 8)
