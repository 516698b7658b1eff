"""Early stop for real: a run whose window a stop rule ends (``replay.load.WindowStop``,
the search's ``TierStop``) on the twin's virtual clock, checked against the same level
run its whole window (the clock is deterministic and causal: up to the stop, the two
runs are the same run).

Truths checked: the stopped run's judged verdict is the one the rule settled on; the
window ``run.json`` records is the window the rule stopped at (``settled_at`` on the
full run's records names the same checkpoint), never before the floor; the requests
sent in that window all finished in the drain; a level on the line does not stop; and
a run without a rule is the plain run (no ``early_stop``, the planned window).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis import SloTier, read_run
from analysis.judge import meets_tier
from replay.ab._early_stop import StopRule, TierStop, settled_at
from replay.twin import load_workload, simulate_level
from tests.support.twin import flat_profile, small_agent_workload

DURATION, WARMUP, DRAIN = 60.0, 10.0, 20.0
TIER = SloTier(floor_tok_s=40, ttft_s=30)
MAX_FAILURE = 0.1


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_agent_workload(tmp_path_factory.mktemp("wl") / "wl.jsonl")


def _level(workload: Path, users: int, out: Path, stop: TierStop | None = None):  # type: ignore[no-untyped-def]
    return simulate_level(flat_profile(), load_workload(workload), users, DURATION, WARMUP,
                          drain_s=DRAIN, backend="auto", tiers=(TIER,), out_dir=out,
                          window_stop=stop)


@pytest.mark.parametrize("users, verdict", [(2, "meets"), (14, "fails")])
def test_a_clear_level_stops_early_with_the_verdict_the_rule_settled(
        workload: Path, tmp_path: Path, users: int, verdict: str) -> None:
    full = _level(workload, users, tmp_path / "full")
    stop = TierStop((TIER,), MAX_FAILURE, DURATION, WARMUP)
    early = _level(workload, users, tmp_path / "early", stop)
    settled = stop.settled[TIER.name]
    assert settled.verdict == verdict
    # the stopped run is judged on its own (shorter) window: the rule's verdict
    judged = meets_tier(early.summary, TIER)
    assert judged is (verdict == "meets")
    assert meets_tier(full.summary, TIER) is judged  # and the whole window agrees here
    run = read_run(tmp_path / "early")
    m = run.manifest
    assert m.early_stop is not None and m.window is not None
    assert m.early_stop.planned_s == DURATION and m.load.duration_s == DURATION
    assert m.window.start_s == WARMUP
    assert m.window.end_s - m.window.start_s == pytest.approx(m.early_stop.window_s)
    assert m.early_stop.window_s == pytest.approx(settled.window_s, abs=1e-6)
    assert early.summary.window_s == pytest.approx(m.early_stop.window_s, abs=1e-6)
    assert verdict in m.early_stop.why
    # not before the floor, and at the checkpoint the rule names on the full run's records
    assert m.early_stop.window_s >= StopRule().min_fraction * DURATION
    posthoc = settled_at(read_run(tmp_path / "full"), TIER, MAX_FAILURE)
    assert posthoc is not None and posthoc.verdict == verdict
    assert posthoc.window_s == pytest.approx(settled.window_s, abs=1e-6)
    # the window's requests: sent before its end, each finished in the drain
    r = run.requests
    window_end = WARMUP + m.early_stop.window_s
    measured = r.phase == "measure"
    assert measured.any() and bool(np.all(r.sent_s[measured] < window_end))
    assert not bool(np.any(r.sent_s[r.phase == "drain"] < window_end))
    assert set(r.status[measured].tolist()) <= {"ok", "error", "timeout"}
    assert early.sim_s < full.sim_s  # fewer (simulated) GPU-seconds


def test_a_level_on_the_line_runs_its_whole_window(workload: Path, tmp_path: Path) -> None:
    full = _level(workload, 8, tmp_path / "full")
    # the construction: on the full run's records the rule never settles at 8 users
    assert settled_at(read_run(tmp_path / "full"), TIER, MAX_FAILURE) is None
    stop = TierStop((TIER,), MAX_FAILURE, DURATION, WARMUP)
    early = _level(workload, 8, tmp_path / "early", stop)
    m = read_run(tmp_path / "early").manifest
    assert m.early_stop is None and stop.settled == {}
    assert m.window is not None and m.window.end_s - m.window.start_s == DURATION
    assert early.sim_s == pytest.approx(full.sim_s)
    assert early.records == full.records


def test_a_run_without_a_rule_records_no_early_stop(workload: Path, tmp_path: Path) -> None:
    _level(workload, 2, tmp_path / "plain")
    m = read_run(tmp_path / "plain").manifest
    assert m.early_stop is None
    assert m.window is not None and m.window.end_s == WARMUP + DURATION
