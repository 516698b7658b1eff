"""The interval with the fit's own uncertainty: miss and spread in quadrature, the
width growing with the load, a what-if and the replica count; twin files from before
the refits keep their stored rule."""

from __future__ import annotations

import math

import pytest

from replay.twin import PredictionInterval
from replay.twin._interval import (
    GROWTH,
    GROWTH_BY_METRIC,
    REPLICA_DOUBLINGS,
    WHAT_IF_DOUBLINGS,
)


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


def _what_if(pi: PredictionInterval, metric: str) -> float:
    return pi.what_if_by_metric.get(metric, pi.what_if_doublings)


def test_the_load_widens_each_metric_at_its_own_rate_and_a_what_if_at_the_shared_one() -> None:
    """A twin calibrated now stores a widening per load doubling per metric: P90 TTFT
    and output throughput widen slower than interactivity (the battery's development
    seeds covered them above the nominal rate far out), a what-if and a fleet still
    count their doublings at ``GROWTH``; a twin file without the per-metric rates keeps
    ``growth`` for all."""
    assert GROWTH_BY_METRIC["p90_ttft_s"] < GROWTH_BY_METRIC["p90_interactivity"] == GROWTH
    from dataclasses import replace

    old = _interval(refits=5)
    new = replace(old, growth_by_metric=dict(GROWTH_BY_METRIC))
    for m in ("p90_interactivity", "p90_ttft_s", "output_tok_s"):
        at = new.half_width(m, 8)
        assert at == old.half_width(m, 8)  # at the checked level: the same width
        rate = GROWTH_BY_METRIC[m]
        assert new.half_width(m, 32) == pytest.approx(at * (1 + 2 * rate))
        assert old.half_width(m, 32) == pytest.approx(at * (1 + 2 * GROWTH))
        # 2 replicas at 16 users each, a what-if: the load at its rate, the rest at GROWTH
        d = _what_if(new, m) + new.replica_by_metric.get(m, REPLICA_DOUBLINGS)
        assert new.half_width(m, 16, what_if=True, replicas=2) == pytest.approx(
            at * (1 + rate + GROWTH * d))
    # P90 TTFT at 4x: 2.0x the checked width, not 2.5x
    assert new.half_width("p90_ttft_s", 32) == pytest.approx(2.0 * new.half_width("p90_ttft_s", 8))
    assert new.half_width("p90_ttft_s", 32) < old.half_width("p90_ttft_s", 32)


def test_the_measured_scale_multiplies_each_questions_width() -> None:
    """Each question's width is the rule's times its measured factor: the load's factor
    linear in doublings between the held-out, 2x and 4x ones (the 4x one beyond), a
    what-if's and a fleet's their own; a twin file without a scale keeps the rule's."""
    from dataclasses import replace

    plain = replace(_interval(refits=5), growth_by_metric=dict(GROWTH_BY_METRIC))
    table = {"held-out": {"p90_ttft_s": 0.8}, "2x": {"p90_ttft_s": 0.6},
             "4x": {"p90_ttft_s": 0.4}, "what-if": {"p90_ttft_s": 0.5},
             "replicas": {"p90_ttft_s": 1.5}}
    scaled = replace(plain, scale=table)
    m = "p90_ttft_s"
    for users, factor in ((8, 0.8), (4, 0.8), (16, 0.6), (32, 0.4), (64, 0.4),
                          (8 * 2 ** 0.5, 0.7), (16 * 2 ** 0.25, 0.55)):
        assert scaled.half_width(m, users) == pytest.approx(plain.half_width(m, users) * factor)
    assert scaled.half_width(m, 8, what_if=True) == pytest.approx(
        plain.half_width(m, 8, what_if=True) * 0.5)
    assert scaled.half_width(m, 8, replicas=2) == pytest.approx(
        plain.half_width(m, 8, replicas=2) * 1.5)
    # a metric the table has no factor for keeps the rule's width
    assert scaled.half_width("output_tok_s", 32) == plain.half_width("output_tok_s", 32)
    # the scale narrows: a truth at 0.6 of the rule's 4x width lies outside the scaled one only
    w = plain.half_width(m, 32)
    truth = math.exp(0.6 * w)
    assert plain.holds(m, 1.0, truth, 32) and not scaled.holds(m, 1.0, truth, 32)


def test_a_new_twin_stores_a_measured_scale_for_every_question_and_metric() -> None:
    from replay.twin._interval import METRICS, QUESTIONS, SCALE_BY_QUESTION, current_rule

    assert current_rule()["scale"] == SCALE_BY_QUESTION
    for q in QUESTIONS:
        for m in METRICS:
            assert 0.1 < SCALE_BY_QUESTION[q][m] < 10.0, (q, m)
