"""Re-judging stored battery outcomes with today's interval rule: the measured parts of
the stored interval are kept, the rule (widening per doubling, the measured scale) is
today's, and a case the run's rule judged differently flips."""

from __future__ import annotations

import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
from _battery_case import Outcome  # noqa: E402
from _battery_rescore import rescore  # noqa: E402

from replay.twin._interval import GROWTH_BY_METRIC, SCALE_BY_QUESTION  # noqa: E402

TTFT = "p90_ttft_s"


def _outcome(truth: float, growth_by_metric: dict[str, float]) -> Outcome:
    interval = dict(checked_users=8, max_measured_users=8, max_request_tokens=4000,
                    miss={TTFT: 0.0}, spread={TTFT: 0.1}, sampling={TTFT: 0.0},
                    requests=200, z=2.0, refits=5, growth=0.75,
                    growth_by_metric=growth_by_metric)
    row = {"kind": "4x", "users": 32, "per_replica": 32.0, "what_if": False,
           "replicas": 1, f"{TTFT}_pred": 1.0, f"{TTFT}_held": truth,
           f"{TTFT}_covered": True, "p90_interactivity_covered": None,
           "output_tok_s_covered": None}
    return Outcome(0, "p", "none", {}, {}, rows=[row], interval=interval)


def test_a_stored_case_is_judged_with_todays_widening_per_doubling() -> None:
    # at 4x: half-width 0.2 x (1 + 2 g) x the 4x scale; the run's rule (g 0.75, no
    # scale) held a truth at exp(0.45), today's P90 TTFT rate and scale narrow the
    # width below it
    today = 0.2 * (1 + 2 * GROWTH_BY_METRIC[TTFT]) * SCALE_BY_QUESTION["4x"][TTFT]
    assert today < 0.45 < 0.2 * 2.5
    far = rescore([_outcome(math.exp(0.45), {})])[0]
    assert far.rows[0][f"{TTFT}_covered"] is False
    near = rescore([_outcome(math.exp(today - 0.01), {})])[0]
    assert near.rows[0][f"{TTFT}_covered"] is True
    assert near.rows[0]["p90_interactivity_covered"] is None  # not judged stays not judged
    assert rescore([_outcome(math.exp(today + 0.01), {})])[0].rows[0][f"{TTFT}_covered"] is False


def test_a_failed_case_and_a_twin_without_refits_pass_through() -> None:
    failed = Outcome(1, "p", "none", {}, {}, error="boom")
    assert rescore([failed]) == [failed]
    old = _outcome(math.exp(0.45), {})
    assert old.interval is not None
    old.interval["refits"] = 0  # a twin from before the refits keeps its stored rule
    assert rescore([old])[0].rows[0][f"{TTFT}_covered"] is True
