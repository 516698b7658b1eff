"""The per-probe early-stop rule (``replay.ab._early_stop``): a verdict settles only when
the requests known decide it whichever way the ones in flight end, at 99%, past the
floor; a level near the line does not settle. Counts and records are constructed."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import SloTier
from analysis.metrics import wilson_interval
from replay.ab._early_stop import (
    Known,
    StopRule,
    TierStop,
    forecast_remaining,
    known_at,
    settle,
    settled_at,
)

RULE = StopRule()
TIER = SloTier(floor_tok_s=50, ttft_s=2)


def _known(n: int, met: int, pending: int = 0, failed: int = 0) -> Known:
    return Known(sent=n, failed=failed, ttft_ok=met, fast=met, rated=n, pending=pending)


def test_a_clearly_met_level_settles_met() -> None:
    verdict, why = settle(_known(200, 200, pending=8), 0.1, RULE)
    assert verdict == "meets" and "even if the 8 pending missed" in why


def test_a_clearly_failed_level_settles_failed() -> None:
    verdict, _ = settle(_known(120, 60, pending=8), 0.1, RULE)
    assert verdict == "fails"


def test_too_many_failures_settle_failed_whatever_is_pending() -> None:
    verdict, why = settle(_known(100, 80, pending=50, failed=20), 0.1, RULE)
    assert verdict == "fails" and "failed" in why


@pytest.mark.parametrize("n, met", [(200, 180), (400, 364), (1000, 905), (100, 87)])
def test_a_level_near_the_line_does_not_settle(n: int, met: int) -> None:
    lo, hi = wilson_interval(met, n, RULE.z)
    assert lo < 0.9 < hi  # the construction: the 99% interval holds 90%
    assert settle(_known(n, met), 0.1, RULE)[0] is None


def test_pending_requests_can_keep_a_level_open() -> None:
    # 60 of 60 met is met at 99%, but 20 still in flight could all miss (60 of 80 = 75%)
    assert settle(_known(60, 60), 0.1, RULE)[0] == "meets"
    assert settle(_known(60, 60, pending=20), 0.1, RULE)[0] is None


def test_the_floor_on_requests_holds() -> None:
    # under the floor of 40 known requests nothing settles, not even all missing
    assert settle(_known(RULE.min_requests - 1, RULE.min_requests - 1), 0.1, RULE)[0] is None
    assert settle(_known(RULE.min_requests - 1, 0), 0.1, RULE)[0] is None


class _Cols:
    """The request columns ``known_at`` reads."""

    def __init__(self, sent: np.ndarray, end: np.ndarray, fast: np.ndarray) -> None:
        n = len(sent)
        self.sent_s = sent
        self.end_s = end
        self.due_s = sent
        self.first_token_s = sent + 0.1
        # 101 tokens: 100 gaps at 1/60 s (fast: 60 tok/s >= 50) or 1/20 s (slow)
        self.output_tokens = np.full(n, 101)
        self.last_token_s = self.first_token_s + np.where(fast, 100 / 60, 100 / 20)
        self.status = np.array(["ok"] * n, dtype=object)


class _Window:
    def __init__(self, start: float, end: float) -> None:
        self.start_s, self.end_s = start, end


class _Manifest:
    def __init__(self) -> None:
        self.window = _Window(10.0, 130.0)


class _Run:
    def __init__(self, cols: _Cols) -> None:
        self.requests = cols
        self.manifest = _Manifest()


def _run(share_fast: float, per_s: float = 4.0, seed: int = 0) -> _Run:
    rng = np.random.default_rng(seed)
    sent = np.arange(10.0, 130.0, 1 / per_s)
    fast = rng.uniform(size=len(sent)) < share_fast
    end = sent + 0.1 + np.where(fast, 100 / 60, 100 / 20)
    return _Run(_Cols(sent, end, fast))


def test_known_at_counts_what_had_finished_and_what_was_in_flight() -> None:
    run = _run(1.0)
    k = known_at(run, TIER, 30.0)  # type: ignore[arg-type]
    # sent in [10, 40): 120 requests; those sent within the last ~1.77 s still running
    assert k.sent + k.pending == 120
    assert k.pending == int(np.sum((run.requests.sent_s < 40) & (run.requests.end_s > 40)))
    assert k.fast == k.sent == k.ttft_ok


def test_settled_at_stops_a_clear_level_at_the_floor_and_not_a_close_one() -> None:
    clear = settled_at(_run(1.0), TIER, 0.1, RULE)  # type: ignore[arg-type]
    assert clear is not None and clear.verdict == "meets"
    # not before the floor on time (30 of 120 s); at 30 s the ~7 in flight, counted as
    # misses, still keep 113 of 120 from 90% at 99%: it settles a few looks later
    assert RULE.min_fraction * 120 < clear.window_s <= 60
    bad = settled_at(_run(0.3), TIER, 0.1, RULE)  # type: ignore[arg-type]
    assert bad is not None and bad.verdict == "fails"
    assert bad.window_s == RULE.min_fraction * 120  # a clear failure: at the floor
    # 90% fast: on the line; it never settles, the whole window is needed
    assert settled_at(_run(0.9, seed=1), TIER, 0.1, RULE) is None  # type: ignore[arg-type]


# The guard: a verdict on the requests so far settles only if the whole window would
# still give it, the rest forecast at the send rate so far and at the late half's 99%
# bound against the verdict (at least 92% for "fails"), judged at 95% (the judge's).

def _whole_upper(ok: float, n: float) -> float:
    return wilson_interval(ok, n)[1]  # the project's interval at the judge's 95%


def test_the_forecast_is_the_send_rate_so_far_over_the_time_left() -> None:
    assert forecast_remaining(60, 30.0, 120.0) == pytest.approx(180.0)  # 2 a second, 90 s left
    assert forecast_remaining(60, 120.0, 120.0) == 0.0  # the window is over
    assert forecast_remaining(60, 0.0, 120.0) == 0.0


def test_an_early_failure_whose_late_half_meets_is_not_settled_fails() -> None:
    # 60 known, 40 fast (67%): on these alone "fails" at 99%; but the late half met
    # 30 of 30, and 180 more such requests would lift the whole window over 90%
    k, late = _known(60, 40), _known(30, 30)
    assert settle(k, 0.1, RULE)[0] == "fails"  # no forecast: the rule on counts alone
    hi_late = wilson_interval(30, 30, RULE.z)[1]
    assert _whole_upper(40 + 180 * hi_late, 240) >= 0.9  # the construction
    verdict, why = settle(k, 0.1, RULE, 180.0, late)
    assert verdict is None and "not yet the whole window's 'fails'" in why


def test_a_steady_failure_is_settled_fails() -> None:
    # 30 of 60 fast, the late half 15 of 30: even at 92% for the rest (above the late
    # half's 99% upper bound) the whole window stays under 90%
    k, late = _known(60, 30), _known(30, 15)
    assert wilson_interval(15, 30, RULE.z)[1] < RULE.fail_floor
    assert _whole_upper(30 + 180 * RULE.fail_floor, 240) < 0.9  # the construction
    verdict, why = settle(k, 0.1, RULE, 180.0, late)
    assert verdict == "fails" and "180 more forecast" in why


def test_the_rest_is_assumed_to_meet_at_least_92_percent_for_fails() -> None:
    # late half 20 of 30 (99% upper bound ~85%): at that bound the window would fail, at
    # 92% it would not: the floor keeps it open
    k, late = _known(60, 48), _known(30, 20)
    hi_late = wilson_interval(20, 30, RULE.z)[1]
    assert settle(k, 0.1, RULE)[0] == "fails"
    assert _whole_upper(48 + 180 * hi_late, 240) < 0.9 <= _whole_upper(
        48 + 180 * RULE.fail_floor, 240)
    assert settle(k, 0.1, RULE, 180.0, late)[0] is None
    floor_off = StopRule(fail_floor=0.0)
    assert settle(k, 0.1, floor_off, 180.0, late)[0] == "fails"


def test_an_early_meet_whose_late_half_slips_is_not_settled_meets() -> None:
    # 200 of 200 met so far; the late half met 80 of 100: its 99% lower bound over the
    # 200 still to come could sink the whole window under 90%
    k, late = _known(200, 200), _known(100, 80)
    assert settle(k, 0.1, RULE)[0] == "meets"
    verdict, why = settle(k, 0.1, RULE, 200.0, late)
    assert verdict is None and "not yet the whole window's 'meets'" in why


def test_a_steady_meet_is_settled_meets() -> None:
    k, late = _known(200, 200, pending=4), _known(100, 100)
    lo_late = wilson_interval(100, 100, RULE.z)[0]
    assert wilson_interval(200 + 200 * lo_late, 404)[0] >= 0.9  # the construction
    verdict, why = settle(k, 0.1, RULE, 200.0, late)
    assert verdict == "meets" and "would still meet" in why


def test_no_late_half_known_settles_nothing_while_the_window_runs() -> None:
    # nothing sent in the late half has finished: its share is unknown (0-100%)
    assert settle(_known(60, 30), 0.1, RULE, 180.0, None)[0] is None
    assert settle(_known(200, 200), 0.1, RULE, 200.0, _known(0, 0))[0] is None


def test_failures_project_too() -> None:
    # 20 of 100 failed so far, but the late half failed none: the rest could bring the
    # share under 10%; when the late half fails as often, the window fails
    k = _known(100, 80, failed=20)
    assert settle(k, 0.1, RULE)[0] == "fails"
    assert settle(k, 0.1, RULE, 300.0, _known(50, 50))[0] is None
    assert settle(k, 0.1, RULE, 300.0, _known(50, 40, failed=10))[0] == "fails"
    # meets: the late half's failure share carried over the rest
    assert settle(_known(300, 300), 0.1, RULE, 300.0, _known(150, 150))[0] == "meets"
    assert settle(_known(300, 300), 0.1, RULE, 300.0,
                  _known(150, 150, failed=40))[0] is None


def _drifting_run(early_share: float, late_share: float, early_s: float = 30.0) -> _Run:
    """A window whose first ``early_s`` seconds are harder (``early_share`` fast) than the
    rest (``late_share``): contexts still growing, as after a coding-agent warmup."""
    run = _run(1.0)
    sent = run.requests.sent_s
    u = np.random.default_rng(2).uniform(size=len(sent))
    fast = u < np.where(sent < 10.0 + early_s, early_share, late_share)
    end = sent + 0.1 + np.where(fast, 100 / 60, 100 / 20)
    return _Run(_Cols(sent, end, fast))


def test_a_window_hard_only_at_its_start_is_not_settled_fails() -> None:
    run = _drifting_run(0.75, 0.97)
    cols = run.requests
    fast = (cols.last_token_s - cols.first_token_s) < 100 / 30
    # the construction: the whole window is no failure (its 95% interval reaches 90%),
    # and the first 30 s alone, judged by the rule on counts, say "fails"
    assert wilson_interval(int(fast.sum()), len(fast))[1] >= 0.9
    k = known_at(run, TIER, 30.0)  # type: ignore[arg-type]
    assert settle(k, 0.1, RULE)[0] == "fails"
    s = settled_at(run, TIER, 0.1, RULE)  # type: ignore[arg-type]
    assert s is None or s.verdict == "meets"


def _records(run: _Run) -> list[dict[str, object]]:
    c = run.requests
    return [{"phase": "measure", "status": "ok", "sent_s": float(c.sent_s[i]),
             "due_s": float(c.due_s[i]), "first_token_s": float(c.first_token_s[i]),
             "last_token_s": float(c.last_token_s[i]), "end_s": float(c.end_s[i]),
             "output_tokens": int(c.output_tokens[i])} for i in range(len(c.sent_s))]


@pytest.mark.parametrize("early, late", [(1.0, 1.0), (0.3, 0.3), (0.75, 0.97), (0.97, 0.6)])
def test_tier_stop_while_running_stops_where_settled_at_names_on_the_records(
        early: float, late: float) -> None:
    # TierStop sees records as they finish (sent times from the window start at 10 s of
    # the run clock) and the pending count; settled_at walks the finished run: the same
    # rule on the same requests stops at the same look with the same verdict
    run = _drifting_run(early, late)
    recs = sorted(_records(run), key=lambda r: float(r["end_s"]))  # type: ignore[arg-type]
    stop = TierStop((TIER,), 0.1, 120.0, 10.0, RULE)
    t, fed, why = RULE.step_s, 0, None
    while t < 120.0 and why is None:
        now = 10.0 + t
        while fed < len(recs) and float(recs[fed]["end_s"]) <= now:  # type: ignore[arg-type]
            stop.record(recs[fed])  # type: ignore[arg-type]
            fed += 1
        c = run.requests
        pending = int(np.sum((c.sent_s < now) & (c.end_s > now)))
        why = stop.check(t, pending)
        t += RULE.step_s
    posthoc = settled_at(run, TIER, 0.1, RULE)  # type: ignore[arg-type]
    if posthoc is None:
        assert why is None and stop.settled == {}
    else:
        got = stop.settled[TIER.name]
        assert (got.verdict, got.window_s) == (posthoc.verdict, posthoc.window_s)


def test_tier_stop_takes_the_late_half_from_the_window_start() -> None:
    # the window starts at 100 s of the run clock; the requests sent in its first 15 s
    # are slow, those sent in the next 15 s fast: at 30 s the counts say "fails" (half
    # fast) but the late half (window seconds 15-30) met the floor: not settled
    sent = np.arange(100.0, 130.0, 0.25)
    fast = sent >= 115.0
    end = sent + 0.1 + np.where(fast, 100 / 60, 100 / 20)
    recs = [r for r in _records(_Run(_Cols(sent, end, fast))) if float(r["end_s"]) <= 130.0]  # type: ignore[arg-type]
    pending = len(sent) - len(recs)
    stop = TierStop((TIER,), 0.1, 120.0, 100.0, RULE)
    for r in recs:
        stop.record(r)  # type: ignore[arg-type]
    assert settle(_known(len(recs), int(sum(float(r["sent_s"]) >= 115.0 for r in recs)),  # type: ignore[arg-type]
                         pending=pending), 0.1, RULE)[0] == "fails"
    assert stop.check(30.0, pending) is None
    steady = TierStop((TIER,), 0.1, 120.0, 100.0, RULE)  # the same, every request slow
    for r in recs:
        steady.record({**r, "last_token_s": float(r["first_token_s"]) + 100 / 20})  # type: ignore[arg-type]
    assert steady.check(30.0, pending) is not None
    assert steady.settled[TIER.name].verdict == "fails"
