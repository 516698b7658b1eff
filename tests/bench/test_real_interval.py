"""bench/_real_interval.py and _real_spread.py: the twin's interval at the held-out
level against measured runs, and the rerun spread, on hand-worked numbers."""

from __future__ import annotations

import math

import pytest

from replay.twin import PredictionInterval
from replay.twin._holdout import MeasuredLevel


def _interval(miss: float, spread: float) -> PredictionInterval:
    return PredictionInterval(
        checked_users=8, max_measured_users=8, max_request_tokens=2000,
        miss={"p90_interactivity": miss, "p90_ttft_s": miss, "output_tok_s": miss},
        spread={"p90_interactivity": spread, "p90_ttft_s": spread, "output_tok_s": spread},
        requests=80, z=2.0, refits=5)


def _level(inter: float, ci: tuple[float, float] | None, requests: int = 80) -> MeasuredLevel:
    return MeasuredLevel({"p90_interactivity": inter, "p90_ttft_s": 0.1,
                          "output_tok_s": 100.0},
                         {"p90_interactivity": ci, "p90_ttft_s": (0.09, 0.11),
                          "output_tok_s": None}, requests)


def test_bounds_are_the_stored_half_width_around_the_prediction(real_interval):
    # half-width hypot(0.03, 2 * 0.02) = 0.05 in log units at the checked level
    c = real_interval.check_metric(_interval(0.03, 0.02), "p90_interactivity", 100.0,
                                   [_level(104.0, (99.0, 110.0))])
    assert c.half_width == pytest.approx(0.05)
    assert c.low == pytest.approx(100 * math.exp(-0.05))  # 95.12
    assert c.high == pytest.approx(100 * math.exp(0.05))  # 105.13
    assert c.covered == (True,) and c.overlaps == (True,)
    assert c.rerun_covered is None and c.rerun_overlaps is None


def test_a_rerun_outside_is_a_miss_even_when_its_interval_overlaps(real_interval):
    rerun = _level(107.0, (104.0, 112.0))  # value above 105.13, CI reaches below it
    far = _level(120.0, (111.0, 130.0))  # CI wholly above the interval
    c = real_interval.check_metric(_interval(0.03, 0.02), "p90_interactivity", 100.0,
                                   [_level(104.0, None), far], rerun)
    assert c.covered == (True, False)
    assert c.overlaps == (None, False)
    assert c.rerun_covered is False and c.rerun_overlaps is True


def test_lines_count_the_rerun_metrics_held(real_interval):
    held = [_level(104.0, (99.0, 110.0))]
    rerun = _level(107.0, (104.0, 112.0))
    lines = real_interval.interval_lines(
        _interval(0.03, 0.02),
        {"p90_interactivity": 100.0, "p90_ttft_s": 0.1, "output_tok_s": 100.0}, held, rerun)
    inter = next(line for line in lines if "P90 interactivity" in line)
    assert "[95.12, 105.1]" in inter and "rerun 107 (80 requests" in inter
    assert "OUTSIDE" in inter
    ttft = next(line for line in lines if "TTFT" in line)
    assert "twin 100 ms" in ttft  # seconds printed as ms
    # interactivity's rerun is outside; TTFT 0.1 and output 100 lie on the prediction
    assert lines[-1].endswith("2 of 3 metrics inside the twin's interval")


def test_no_prediction_is_said_not_checked(real_interval):
    lines = real_interval.interval_lines(
        _interval(0.03, 0.02), {"p90_interactivity": None, "p90_ttft_s": 0.1,
                                "output_tok_s": 100.0}, [_level(104.0, None)])
    assert "  P90 interactivity: no prediction" in lines
    assert not any("rerun" in line and "metrics inside" in line for line in lines)


def test_spread_is_largest_over_smallest(real_spread):
    runs = {1: [{"p90_interactivity": 100.0, "p90_ttft_s": 0.2, "output_tok_s": None}],
            8: [{"p90_interactivity": 30.0, "p90_ttft_s": 0.2, "output_tok_s": 50.0},
                {"p90_interactivity": 36.0, "p90_ttft_s": 0.1, "output_tok_s": None},
                {"p90_interactivity": 33.0, "p90_ttft_s": 0.15, "output_tok_s": 40.0}]}
    s = real_spread.level_spread(runs[8])
    assert s["p90_interactivity"] == pytest.approx(0.2)
    assert s["p90_ttft_s"] == pytest.approx(1.0)
    assert s["output_tok_s"] == pytest.approx(0.25)
    lines = real_spread.spread_lines(runs)
    assert len(lines) == 2  # level 1 has one run: no spread line for it
    assert lines[0].startswith("rerun spread at 8 users (3 runs")
    assert "p90_ttft_s 100.0%" in lines[-1]


def test_spread_needs_two_values(real_spread):
    s = real_spread.level_spread([{"p90_interactivity": 1.0}, {"p90_interactivity": None}])
    assert s["p90_interactivity"] is None and s["output_tok_s"] is None
    assert real_spread.spread_lines({8: [{"p90_interactivity": 1.0}]}) == []


def test_repeats_widen_the_interval_that_a_rerun_is_judged_by(real_interval):
    """The busy-host case: the held-out level run twice read 104 and 130 tok/s/user
    (log spread 0.158 on 1 dof); the seeds' interval (+-5%) misses a rerun at 96,
    the one widened by the repeats holds it, and the line says what widened it."""
    from analysis.fit import between_runs_by_metric
    from replay.twin._interval import with_between_runs

    runs = {8: [{"p90_interactivity": 104.0}, {"p90_interactivity": 130.0}]}
    base = _interval(0.03, 0.02)
    wide = with_between_runs(base, between_runs_by_metric(runs, ("p90_interactivity",)))
    rerun = _level(96.0, (90.0, 102.0))
    held = [_level(104.0, None), _level(130.0, None)]
    narrow = real_interval.check_metric(base, "p90_interactivity", 115.0, held, rerun)
    widened = real_interval.check_metric(wide, "p90_interactivity", 115.0, held, rerun)
    b = math.log(130 / 104) / math.sqrt(2)
    assert wide.between_runs["p90_interactivity"] == pytest.approx(b)
    assert narrow.rerun_covered is False and widened.rerun_covered is True
    # t(0.95, 1 dof) = 6.31: one repeated level says little, so the interval is wide
    assert widened.half_width == pytest.approx(math.hypot(0.05, 6.3138 * b), rel=1e-3)
    lines = real_interval.interval_lines(
        wide, {"p90_interactivity": 115.0, "p90_ttft_s": 0.1, "output_tok_s": 100.0},
        held, rerun)
    inter = next(line for line in lines if "P90 interactivity" in line)
    assert "between-run spread 15.8% on 1 dof" in inter
