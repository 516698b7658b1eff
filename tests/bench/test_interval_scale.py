"""The interval's measured scale (``bench/twin_interval_scale.py``): the split-conformal
quantile of the development cases' scores, per question and metric, and the coverage it
gives on the cases it was chosen on and on others."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
from _battery_case import METRICS, Outcome  # noqa: E402
from twin_interval_scale import conformal, coverage, scales  # noqa: E402

from replay.twin._interval import current_rule  # noqa: E402

TTFT = "p90_ttft_s"


def _outcome(number: int, kind: str, miss: float) -> Outcome:
    """A case whose unscaled P90 TTFT width at the checked level is 0.1 (spread 0.1,
    quantile 1, no miss) and whose prediction lies ``miss`` (log) from the truth, stored
    as the battery stores a row (the other metrics not judged)."""
    interval = dict(checked_users=8, max_measured_users=8, max_request_tokens=4000,
                    miss={TTFT: 0.0}, spread={TTFT: 0.1}, sampling={TTFT: 0.0},
                    requests=200, z=1.0, refits=5)
    row = {"kind": kind, "users": 8, "per_replica": 8.0, "what_if": kind == "what-if",
           "replicas": 1, TTFT: math.exp(miss) - 1, f"{TTFT}_pred": math.exp(miss),
           f"{TTFT}_held": 1.0, f"{TTFT}_covered": True} | \
        {k: None for m in METRICS if m != TTFT for k in (m, f"{m}_covered")}
    return Outcome(number, "p", "none", {}, {}, rows=[row], interval=interval)


def test_the_conformal_quantile_is_the_ceil_n_plus_1_share_smallest() -> None:
    scores = [i / 10 for i in range(1, 21)]  # 0.1 .. 2.0
    assert conformal(scores, 0.9) == pytest.approx(1.9)  # ceil(21 * 0.9) = 19th
    assert conformal(scores[:9], 0.9) == pytest.approx(0.9)  # ceil(10 * 0.9) = 9th of 9
    assert conformal(scores[:8], 0.9) == math.inf  # ceil(9 * 0.9) = 9 > 8: cannot say
    assert conformal([0.3] * 5 + [5.0], 0.5) == pytest.approx(0.3)


def test_the_scale_puts_the_nominal_share_inside_and_is_judged_on_other_cases() -> None:
    dev = [_outcome(i, "held-out", 0.01 * (i + 1) - 0.0005) for i in range(20)]
    table = scales(dev)  # scores 0.095 .. 1.995: the 19th, 1.895, rounded up
    assert table["held-out"][TTFT] == pytest.approx(1.90)
    assert table["4x"][TTFT] == math.inf  # no 4x case: no factor can be measured
    rule = current_rule() | {"scale": table}
    on_dev = coverage(dev, rule)["held-out"]
    assert on_dev[TTFT] == pytest.approx(19 / 20) and on_dev[TTFT] >= 0.9
    # other cases, every one twice as far off: half of them outside the same factor
    far = [_outcome(i, "held-out", 0.02 * (i + 1) - 0.001) for i in range(20)]
    assert coverage(far, rule)["held-out"][TTFT] == pytest.approx(9 / 20)
    assert coverage(far, rule | {"scale": {}})["held-out"][TTFT] == pytest.approx(5 / 20)
