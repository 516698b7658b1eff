"""Indeterminate levels: a tier share measured on too few requests is neither met nor
failed, and no bracket end moves on it (the truth is the records' own counts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis import SloTier, measure, read_run, summarize
from analysis.judge import bracket_of, capacity_table, ratio_bracket
from analysis.metrics import MIN_ALL_MET_REQUESTS, wilson_interval
from replay.ab import next_probe
from replay.ab._search import Probe
from tests.analysis.builders import make_run

TIER = SloTier(floor_tok_s=50, ttft_s=0.1)


def _records(users: int, fast_ttft: int, slow_ttft: int) -> list[dict[str, Any]]:
    """Requests spread over ``users`` lanes: ``fast_ttft`` with a 50 ms first token,
    ``slow_ttft`` with 300 ms; every one decodes 10 tokens at 100 tok/s."""
    out = []
    for i in range(fast_ttft + slow_ttft):
        sent = 12.0 + i * 0.2  # 400 requests fit the 100 s window
        ttft = 0.05 if i < fast_ttft else 0.3
        first = sent + ttft
        out.append({"id": f"r{i}", "user": i % users, "lane": str(i % users),
                    "session": f"s{i % users}", "turn": i // users, "status": "ok",
                    "due_s": sent, "sent_s": sent, "first_token_s": first,
                    "last_token_s": first + 0.09, "prompt_tokens": 100,
                    "output_tokens_asked": 10, "output_tokens": 10})
    return out


def _summary(tmp_path: Path, name: str, users: int, fast: int, slow: int) -> Any:
    run = make_run(tmp_path / name, _records(users, fast, slow), run_id=name,
                   load={"users": users, "duration_s": 100, "warmup_s": 10, "drain_s": 5})
    return summarize(measure(read_run(run)), tiers=(TIER,))


def test_six_of_seven_is_indeterminate_not_a_fail(tmp_path: Path) -> None:
    s = _summary(tmp_path, "u2", users=2, fast=6, slow=1)
    (g,) = s.goodput
    assert g.ttft_share == pytest.approx(6 / 7)  # the point value is below 90%...
    assert g.outcome == "indeterminate" and not g.meets  # ...but 7 requests cannot tell
    assert "6 of 7 requests met the TTFT ceiling" in g.why
    assert f"at least {MIN_ALL_MET_REQUESTS}" in g.why


@pytest.mark.parametrize(("fast", "slow", "outcome"), [
    (MIN_ALL_MET_REQUESTS, 0, "meets"), (MIN_ALL_MET_REQUESTS - 1, 0, "indeterminate"),
    (7, 0, "indeterminate"), (0, 20, "fails"), (50, 50, "fails"), (180, 20, "indeterminate"),
    (396, 4, "meets"),
])
def test_outcome_follows_the_interval_of_the_counts(tmp_path: Path, fast: int, slow: int,
                                                    outcome: str) -> None:
    (g,) = _summary(tmp_path, "r", users=4, fast=fast, slow=slow).goodput
    lo, hi = wilson_interval(fast, fast + slow)
    assert g.outcome == outcome
    assert (lo >= 0.9) == (outcome == "meets") and (hi < 0.9) == (outcome == "fails")


def test_the_bracket_does_not_move_on_an_indeterminate_level(tmp_path: Path) -> None:
    levels = [_summary(tmp_path, "u1", 1, 40, 0), _summary(tmp_path, "u2", 2, 6, 1),
              _summary(tmp_path, "u4", 4, 0, 20)]
    assert [s.level.value for s in levels] == [1, 2, 4]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert (row.bracket.passed, row.bracket.failed) == (1, 4)  # the old rule said (1, 2)
    assert row.bracket.indeterminate == [2]
    assert row.bracket.text() == ("between 1 and 4 users; indeterminate at 2 "
                                  "(too few requests to tell)")


def test_every_level_indeterminate_is_an_unknown_capacity_and_ratio() -> None:
    b = bracket_of([(2.0, None), (4.0, None)])
    assert (b.kind, b.text()) == ("unknown", "unknown; indeterminate at 2, 4 (too few "
                                              "requests to tell)")
    r = ratio_bracket(bracket_of([(1.0, True), (2.0, False)]), b)
    assert r.verdict == "unknown" and (r.low, r.high) == (None, None)


def test_the_search_probes_an_indeterminate_count_again_then_steps_over_it() -> None:
    probes = {1: Probe(1, "r1", "valid", {"t": "meets"}),
              2: Probe(2, "r2", "valid", {"t": "indeterminate"}),
              4: Probe(4, "r4", "valid", {"t": "fails"})}
    want, ended, how = next_probe(probes, "t", 1, 64)
    assert (want, ended) == (2, "searching") and "again" in how
    probes[2] = Probe(2, "r2b", "valid", {"t": "indeterminate"}, runs=2)
    want, ended, how = next_probe(probes, "t", 1, 64)
    assert want == 3  # stepped over 2: bisects what is left
    probes[3] = Probe(3, "r3", "valid", {"t": "fails"})
    want, ended, how = next_probe(probes, "t", 1, 64)
    assert (want, ended) == (None, "indeterminate") and "indeterminate at 2" in how


def test_a_repeat_that_tells_ends_the_bracket_there() -> None:
    probes = {1: Probe(1, "r1", "valid", {"t": "meets"}),
              2: Probe(2, "r2", "valid", {"t": "fails"}, runs=2)}
    assert next_probe(probes, "t", 1, 64)[:2] == (None, "bracketed")


def test_a_deferred_repeat_waits_until_a_failure_puts_the_count_inside_the_bracket() -> None:
    # the twin's search defers: before any failure an indeterminate count (a low one:
    # too few requests) is stepped over at once, and the doubling goes on
    probes = {1: Probe(1, "r1", "valid", {"t": "indeterminate"})}
    assert next_probe(probes, "t", 1, 64)[0] == 1  # bisection repeats it at once
    want, ended, how = next_probe(probes, "t", 1, 64, defer=True)
    assert (want, ended, how) == (2, "searching", "searching")
    probes[2] = Probe(2, "r2", "valid", {"t": "meets"})
    assert next_probe(probes, "t", 1, 64, defer=True)[0] == 4  # 1 lies below a met count
    probes[4] = Probe(4, "r4", "valid", {"t": "indeterminate"})
    assert next_probe(probes, "t", 1, 64, defer=True)[0] == 8
    probes[8] = Probe(8, "r8", "valid", {"t": "fails"})
    # now 4 lies between the last count met (2) and the failure: no longer stepped over,
    # it is run again once bisection lands on it (here after 5 fails and 3 meets)
    assert next_probe(probes, "t", 1, 64, defer=True)[0] == 5
    probes[5] = Probe(5, "r5", "valid", {"t": "fails"})
    assert next_probe(probes, "t", 1, 64, defer=True)[0] == 3
    probes[3] = Probe(3, "r3", "valid", {"t": "meets"})
    want, ended, how = next_probe(probes, "t", 1, 64, defer=True)
    assert (want, ended) == (4, "searching") and "again" in how
    # at the top of the range there is nothing above to defer to: repeated there
    top = {64: Probe(64, "r64", "valid", {"t": "indeterminate"})}
    want, _, how = next_probe(top, "t", 64, 64, defer=True)
    assert want == 64 and "again" in how


def test_the_twin_search_steps_down_doubling_under_a_blurred_line() -> None:
    from replay.ab._search import _bracket, close_below

    def probe(u: int, verdict: str, runs: int = 1) -> Probe:
        return Probe(u, f"r{u}", "valid", {"t": verdict}, runs=runs)

    # met at 2, failed at 69, 68 could not tell even twice: the lower end is measured
    # below it in doubling steps (67, then 65, 61, 53...), never past the gap's midpoint
    probes = {2: probe(2, "meets"), 68: probe(68, "indeterminate", 2),
              69: probe(69, "fails")}
    seen = []
    for _ in range(4):
        want = close_below(probes, _bracket(probes, "t"))
        assert want is not None
        seen.append(want)
        probes[want] = probe(want, "indeterminate")  # one run each: no repeat
    assert seen == [67, 65, 61, 53]
    # a count that meets raises the lower end: the gap (53 met, 61 unsure) is halved
    probes[53] = probe(53, "meets")
    assert close_below(probes, _bracket(probes, "t")) == 57
    # one unsure count just over the last met: the next count down, once
    narrow = {2: probe(2, "meets"), 7: probe(7, "indeterminate", 2), 8: probe(8, "fails")}
    assert close_below(narrow, _bracket(narrow, "t")) == 6
    narrow[6] = probe(6, "meets")
    assert close_below(narrow, _bracket(narrow, "t")) is None  # 6-8: one unsure count
    # an indeterminate count above the failure is no part of the gap
    above = {2: probe(2, "meets"), 9: probe(9, "fails"), 12: probe(12, "indeterminate")}
    assert close_below(above, _bracket(above, "t")) is None
    # within the search's precision: nothing left to close
    near = {60: probe(60, "meets"), 65: probe(65, "indeterminate", 2), 66: probe(66, "fails")}
    assert close_below(near, _bracket(near, "t")) == 64
    assert close_below(near, _bracket(near, "t"), precision=0.1) is None
