"""``--scenario agentx-v1``: the agentx-harness 1.0.x rules, beside ``agentx-mvp``.

The rules are checked as values (where each was found is in
``replay.load._scenario``); the priming is checked end to end against a
simulator's truth log: each lane's first session sends the 10 turns before its
entry turn back to back during the warmup, and the entry turn, the first
measured request, finds that history in the server's prefix cache.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis import LoadSettings, RequestRecord, RunManifest
from replay.cli import main
from replay.errors import ConfigError
from replay.load import scenario_values
from replay.load._scenario import SCENARIOS, judge_scenario, scenario_rules
from replay.servers.sim import SimServerProcess, TruthRecord
from tests.support.servers import big_kv_profile
from tests.support.workloads import make_workload


def test_v1_rules_and_the_mvp_beside_them() -> None:
    v1 = scenario_rules("agentx-v1")
    assert (v1.min_duration_s, v1.seed, v1.entry_ratio, v1.max_failure_share,
            v1.warmup_requests, v1.think_time_cap_s, v1.fresh_server) == (
        3600.0, 42, (0.25, 0.75), 0.10, 10, 300.0, True)
    mvp = scenario_rules("agentx-mvp")
    assert scenario_rules("agentx") is mvp  # the former name keeps working
    assert (mvp.min_duration_s, mvp.think_time_cap_s, mvp.max_failure_share,
            mvp.warmup_requests) == (900.0, None, 0.05, 0)
    # both presets cap the whole run's idle time, not each gap (agentx-harness@6f666ba)
    assert v1.system_idle_cap_s == mvp.system_idle_cap_s == 10.0
    assert set(SCENARIOS) >= {"agentx-v1", "agentx-mvp", "agentx"}


def test_v1_fills_its_rules_and_refuses_a_short_window() -> None:
    values = {"duration_s": 3600.0, "warmup_s": 0.0, "think_scale": 1.0,
              "think_time_cap_s": None, "seed": 0, "rate": None}
    out = scenario_values("agentx-v1", False, values, None, "wl")
    assert (out["seed"], out["think_time_cap_s"], out["warmup_s"]) == (42, 300.0, 600.0)
    out = scenario_values("agentx-v1", False, {**values, "warmup_s": 120.0}, None, "wl")
    assert out["warmup_s"] == 120.0  # a warmup the user gave stays
    with pytest.raises(ConfigError, match="at least 3600 s"):
        scenario_values("agentx-v1", False, {**values, "duration_s": 900.0}, None, "wl")
    assert scenario_values("agentx-mvp", False, {**values, "duration_s": 900.0}, None,
                           "wl")["warmup_s"] == 0.0


def _judge(name: str, share: float, warmup_s: float = 600.0) -> list[str]:
    load = LoadSettings(users=4, duration_s=3600.0, warmup_s=warmup_s, drain_s=60.0, seed=42,
                        think_time_cap_s=scenario_rules(name).think_time_cap_s)
    return judge_scenario(name, load, source="weka", header_params={}, max_context=None,
                          window_s=3600.0, failure_share=share).notes


def test_v1_allows_ten_percent_failures_the_mvp_five() -> None:
    assert _judge("agentx-v1", 0.08) == []
    assert any("allows 5%" in n for n in _judge("agentx-mvp", 0.08))
    assert any("allows 10%" in n for n in _judge("agentx-v1", 0.11))
    assert any("no warmup" in n for n in _judge("agentx-v1", 0.0, warmup_s=0.0))


def _truth(log: Path) -> dict[str, TruthRecord]:
    out = {}
    for line in log.read_bytes().splitlines():
        t = TruthRecord.model_validate(orjson.loads(line))
        out[t.request_id] = t
    return out


def _run(tmp: Path, scenario: str) -> tuple[list[RequestRecord], dict[str, TruthRecord],
                                            RunManifest]:
    wl = make_workload(tmp / "wl.jsonl", sessions=3, turns=24, new_blocks=2, output=8,
                       think_s=0.02, shared_blocks=1)
    profile = big_kv_profile(tmp)
    log = tmp / f"truth-{scenario}.jsonl"
    out = tmp / f"run-{scenario}"
    with SimServerProcess(str(profile), "auto", time_scale=4.0, truth_path=str(log)) as srv:
        code = main(["run", "--workload", str(wl), "--target", srv.url, "--users", "3",
                     "--scenario", scenario, "--scenario-unsafe", "--warmup", "6",
                     "--duration", "2", "--drain", "10", "--out", str(out), "--quiet",
                     "--metrics-interval", "0"])
    assert code in (0, 3)  # 3: not satisfying the scenario (a 2-s window) is stamped
    recs = [RequestRecord.model_validate(orjson.loads(line))
            for line in (out / "requests.jsonl").read_bytes().splitlines()]
    manifest = RunManifest.model_validate(orjson.loads((out / "run.json").read_bytes()))
    return recs, _truth(log), manifest


@pytest.mark.sim
@pytest.mark.integration  # simulators in subprocesses
def test_v1_primes_each_lane_before_its_entry_turn(tmp_path: Path) -> None:
    recs, truth, manifest = _run(tmp_path, "agentx-v1")
    assert manifest.scenario == "agentx-v1" and manifest.scenario_satisfied is False
    for user in range(3):
        first = sorted((r for r in recs if r.user == user and r.session_instance == 0
                        and r.agent is None), key=lambda r: r.turn)
        measured = [r for r in first if r.phase != "warmup"]
        primed = [r for r in first if r.phase == "warmup"]
        assert measured, user
        entry = measured[0].turn
        assert 6 <= entry <= 18  # 25-75% of 24 turns
        # the 10 turns before the entry turn, in order, back to back, all in the warmup
        assert [r.turn for r in primed] == list(range(entry - 10, entry))
        assert all(r.think_applied_s == 0 for r in primed)
        assert measured[0].sent_s >= manifest.load.warmup_s
        # the entry turn finds the primed history cached: all but the new blocks
        t = truth[measured[0].id]
        assert t.cached_tokens == measured[0].expected_cached_tokens
        assert t.cached_tokens >= t.prompt_tokens - 3 * 16


@pytest.mark.sim
@pytest.mark.integration  # simulators in subprocesses
def test_mvp_enters_cold(tmp_path: Path) -> None:
    """The same run under the MVP rules sends nothing before the entry turn, which finds
    only the shared head cached (what the priming changes)."""
    recs, truth, manifest = _run(tmp_path, "agentx")
    assert manifest.scenario == "agentx"
    assert any("now means agentx-mvp" in w for w in manifest.warnings)
    for user in range(3):
        first = sorted((r for r in recs if r.user == user and r.session_instance == 0
                        and r.agent is None), key=lambda r: r.turn)
        t = truth[first[0].id]
        assert t.cached_tokens <= 16 < t.prompt_tokens - 3 * 16
