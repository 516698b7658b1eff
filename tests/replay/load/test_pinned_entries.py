"""``run --entry SESSION:TURN``: each user's first session and entry turn pinned (to
replay the lanes another tool chose, as bench/agentx_crosscheck.py replays AIPerf's),
and the one sequential sampler a scenario's users share afterwards.

The pure parts are checked against the workload they read; the lanes against a
simulator's truth log: the pinned turn is each user's first measured request, the
turns before it were primed, and recycled users take the workload's sessions in order.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis import LoadSettings, RequestRecord, RunManifest
from replay.cli import main
from replay.errors import ConfigError
from replay.load import RunSettings, scenario_values, validated
from replay.load._prepare import prepare_run
from replay.load._scenario import judge_scenario, pinned_entries
from replay.servers.sim import SimServerProcess, TruthRecord
from tests.support.servers import big_kv_profile
from tests.support.workloads import chain_requests, make_workload
from traces import Session


def _sessions(turns: tuple[int, ...]) -> list[Session]:
    return [Session(id=f"s{i}", requests=chain_requests(
        turns=n, new_blocks=1, block_size=16, output=4, think_s=0.0, first_id=1000 * (i + 1)))
        for i, n in enumerate(turns)]


def test_pinned_entries_name_sessions_and_turns_the_workload_has() -> None:
    sessions = _sessions((3, 8, 5))
    assert pinned_entries(("s2:4", "s0:0", "s2:1"), sessions) == ((2, 4), (0, 0), (2, 1))
    with pytest.raises(ConfigError, match=r"--entry s3:1: no session 's3'"):
        pinned_entries(("s0:1", "s3:1"), sessions)
    with pytest.raises(ConfigError, match=r"--entry s0:3: session 's0' has turns 0-2"):
        pinned_entries(("s0:3",), sessions)
    # a session id may itself hold colons: the turn is what follows the last one
    odd = [Session(id="a:b", requests=sessions[0].requests)]
    assert pinned_entries(("a:b:2",), odd) == ((0, 2),)


def test_entry_values_are_session_colon_turn() -> None:
    base = {"target": "http://127.0.0.1:9", "duration_s": 10.0}
    assert validated(RunSettings, {**base, "entries": ("s1:3",)}).entries == ("s1:3",)
    for bad in ("s1", ":3", "s1:-1", "s1:x"):
        with pytest.raises(ConfigError, match="--entry"):
            validated(RunSettings, {**base, "entries": (bad,)})
    load = validated(RunSettings, {**base, "entries": ("s1:3",), "drain_s": 1.0}
                     ).load_settings("closed")
    assert load.entries == ("s1:3",)
    # a run without pins records none (run.json files from before read the same)
    assert validated(RunSettings, {**base, "drain_s": 1.0}).load_settings("closed").entries == ()


def test_entries_are_checked_against_the_workload_before_the_run(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=4)
    base = {"target": "http://127.0.0.1:9", "duration_s": 10.0, "scenario": "agentx-v1",
            "scenario_unsafe": True}
    with pytest.raises(ConfigError, match="--entry given 2 times for 1 user"):
        prepare_run(validated(RunSettings, {**base, "entries": ("s0:1", "s1:1")}), wl)
    with pytest.raises(ConfigError, match="session 's1' has turns 0-3"):
        prepare_run(validated(RunSettings, {**base, "users": 2,
                                            "entries": ("s0:1", "s1:4")}), wl)
    assert prepare_run(validated(RunSettings, {**base, "entries": ("s1:3",)}), wl
                       ).settings.entries == ("s1:3",)


def test_entry_needs_a_scenario_and_its_unsafe_flag() -> None:
    values = {"duration_s": 3600.0, "warmup_s": 600.0, "think_scale": 1.0,
              "think_time_cap_s": None, "seed": 0, "rate": None, "entries": ("s0:1",)}
    with pytest.raises(ConfigError, match="--entry: give the --scenario"):
        scenario_values(None, False, values, None, "wl")
    with pytest.raises(ConfigError, match="--entry: scenario agentx-v1 draws"):
        scenario_values("agentx-v1", False, values, None, "wl")
    out = scenario_values("agentx-v1", True, values, None, "wl")
    assert out["entries"] == ("s0:1",) and out["scenario_unsafe"] is True


def test_a_run_with_pinned_entries_is_judged_not_satisfying_its_scenario() -> None:
    def judge(entries: tuple[str, ...]) -> list[str]:
        load = LoadSettings(users=2, duration_s=3600.0, warmup_s=600.0, drain_s=60.0,
                            seed=42, think_time_cap_s=300.0, entries=entries)
        return judge_scenario("agentx-v1", load, source="weka", header_params={},
                              max_context=None, window_s=3600.0, failure_share=0.0).notes
    assert judge(()) == []
    assert any("entry turns pinned for 2 lane(s)" in n for n in judge(("s0:1", "s1:2")))


@pytest.mark.sim
@pytest.mark.integration  # a simulator in a subprocess
def test_pinned_lanes_enter_where_told_then_share_one_sampler(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=5, turns=24, new_blocks=2, output=8,
                       think_s=0.02, shared_blocks=1)
    profile = big_kv_profile(tmp_path)
    log = tmp_path / "truth.jsonl"
    out = tmp_path / "run"
    pins = {0: ("s3", 17), 1: ("s1", 12)}
    with SimServerProcess(str(profile), "auto", time_scale=4.0, truth_path=str(log)) as srv:
        code = main(["run", "--workload", str(wl), "--target", srv.url, "--users", "2",
                     "--scenario", "agentx-v1", "--scenario-unsafe",
                     "--entry", "s3:17", "--entry", "s1:12", "--warmup", "6",
                     "--duration", "3", "--drain", "10", "--out", str(out), "--quiet",
                     "--metrics-interval", "0"])
    assert code in (0, 3)  # 3: stamped not satisfying the scenario (pins, a 3-s window)
    recs = [RequestRecord.model_validate(orjson.loads(line))
            for line in (out / "requests.jsonl").read_bytes().splitlines()]
    truth = {t.request_id: t for t in (TruthRecord.model_validate(orjson.loads(line))
                                       for line in log.read_bytes().splitlines())}
    manifest = RunManifest.model_validate(orjson.loads((out / "run.json").read_bytes()))
    assert manifest.load.entries == ("s3:17", "s1:12")
    assert any("entry turns pinned" in n for n in manifest.scenario_notes)
    for user, (sid, entry) in pins.items():
        first = sorted((r for r in recs if r.user == user and r.session_instance == 0
                        and r.agent is None), key=lambda r: r.turn)
        assert {r.session for r in first} == {sid}
        measured = [r for r in first if r.phase != "warmup"]
        assert measured[0].turn == entry
        # primed: the scenario's 10 turns before the pinned entry, all during the warmup
        assert [r.turn for r in first if r.phase == "warmup"] == list(range(entry - 10, entry))
        t = truth[measured[0].id]
        assert t.cached_tokens >= t.prompt_tokens - 3 * 16  # its history was cached
    # recycled users draw from one sequential sampler: after the 2 first sessions
    # (draws 0 and 1), the next to start are the workload's sessions 2, 3, 4, 0, ...
    starts = sorted((r.sent_s, r.session) for r in recs
                    if r.session_instance > 0 and r.agent is None and r.turn == 0)
    assert starts, "no user finished its first session"
    order = ["s2", "s3", "s4", "s0", "s1"]
    assert [s for _, s in starts] == order[:len(starts)]
