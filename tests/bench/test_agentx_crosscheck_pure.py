"""The pure parts of bench/agentx_crosscheck.py: reading AIPerf's lanes (the entries
agentreplay then replays with ``--entry``), matching the two tools' requests (main
sessions' and subagents'), and the sample rewritten in the subagent shape AIPerf reads.

The log lines are written with the format string of AIPerf 0.13's
``TrajectorySource._log_trajectory_summary``, so a parser that drifts from it fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from traces import import_weka


def _snapshot_row(lane: int, pct: float, k: int, n: int, trace: str) -> str:
    # AIPerf 0.13 aiperf/timing/trajectory_source.py, a timestamped trace's row
    return (f"05:10:16.266 INFO         lane={lane:02d}  sample_time={pct:>3.0f}%  "
            f"root_next={k:>3d}/{n:<3d} ({k / n * 100:>3.0f}% turns)  "
            f"live=1 ready=1  trace_id={trace} (trajectory_source.py:420)")


def _legacy_row(lane: int, k: int, n: int, trace: str) -> str:
    # the same table for a trace without timestamps: start_turn is the warmup turn
    return (f"05:10:16.266 INFO         lane={lane:02d}  start_turn={k:>3d}/{n:<3d} "
            f"({k / n * 100:>3.0f}%)  trace_id={trace} (trajectory_source.py:420)")


def test_aiperf_lanes_in_lane_order_with_their_first_profiling_turn(agentx) -> None:
    log = "\n".join([
        "05:10:16.266 INFO       range cfg=[0.25, 0.75]  observed sample pct: min= 32%",
        _snapshot_row(1, 73, 12, 20, "trace_0291"),
        _snapshot_row(0, 32, 1, 3, "trace_0032"),
        _legacy_row(2, 4, 9, "trace_0277"),
        _snapshot_row(0, 50, 2, 3, "trace_0032"),  # a lane seen again keeps its first row
    ])
    assert agentx.aiperf_lanes(log) == ["trace_0032:1", "trace_0291:12", "trace_0277:5"]
    assert agentx.aiperf_lanes("no table here") == []


def test_measured_requests_are_main_session_ones_in_the_window(agentx) -> None:
    aiperf = [orjson.dumps(r) for r in (
        {"metadata": {"conversation_id": "t1", "turn_index": 3, "benchmark_phase": "profiling",
                      "agent_depth": 0},
         "metrics": {"usage_prompt_tokens": {"value": 1000}, "output_token_count": {"value": 7}}},
        {"metadata": {"conversation_id": "t1", "turn_index": 2, "benchmark_phase": "warmup",
                      "agent_depth": 0},
         "metrics": {"usage_prompt_tokens": {"value": 900}, "output_token_count": {"value": 1}}},
        {"metadata": {"conversation_id": "t1::sa:x", "turn_index": 0,
                      "benchmark_phase": "profiling", "agent_depth": 1},
         "metrics": {"usage_prompt_tokens": {"value": 50}, "output_token_count": {"value": 5}}},
    )]
    assert agentx.aiperf_measured(aiperf) == {("t1", 3): (1000, 7)}
    ours = [orjson.dumps(r) for r in (
        {"phase": "measure", "agent": None, "status": "ok", "session": "t1", "turn": 3,
         "prompt_tokens_server": 1010, "output_tokens": 7},
        {"phase": "measure", "agent": "a0", "status": "ok", "session": "t1", "turn": 0,
         "prompt_tokens_server": 50, "output_tokens": 5},
        {"phase": "warmup", "agent": None, "status": "ok", "session": "t1", "turn": 2,
         "prompt_tokens_server": 900, "output_tokens": 9},
        {"phase": "measure", "agent": None, "status": "incomplete", "session": "t1",
         "turn": 4, "prompt_tokens_server": 1100, "output_tokens": 3},
    )]
    assert agentx.agentreplay_measured(ours) == {("t1", 3): (1010, 7)}


def test_same_requests_reports_the_common_ones_and_their_prompt_gap(agentx) -> None:
    a = {("t1", 1): (1000, 7), ("t1", 2): (2000, 9), ("t2", 0): (500, 3)}
    b = {("t1", 1): (1010, 7), ("t1", 2): (1980, 8), ("t3", 0): (10, 1)}
    line = agentx.same_requests(a, b)
    assert "2 (session, turn) measured by both (of 3 / 3 main-session ones)" in line
    assert "+0.00% on average (max |1.00%|)" in line  # +1% and -1%
    assert "output tokens equal on 1 of 2" in line
    assert "none of 1 / 1" in agentx.same_requests({("x", 0): (1, 1)}, {("y", 0): (1, 1)})


def _aiperf_rec(conv: str, turn: int, depth: int, tpot: float, gaps: list[float],
                phase: str = "profiling") -> bytes:
    return orjson.dumps({
        "metadata": {"conversation_id": conv, "turn_index": turn, "benchmark_phase": phase,
                     "agent_depth": depth},
        "metrics": {"usage_prompt_tokens": {"value": 100}, "inter_token_latency":
                    {"value": tpot}, "inter_chunk_latency": {"value": gaps}}})


def _ours_rec(session: str, agent: str | None, turn: int, times: list[float],
              tokens: list[int], phase: str = "measure") -> bytes:
    return orjson.dumps({
        "phase": phase, "status": "ok", "session": session, "agent": agent, "turn": turn,
        "output_tokens": sum(tokens), "first_token_s": times[0], "last_token_s": times[-1],
        "chunk_times_s": times, "chunk_tokens": tokens})


def test_subagent_requests_are_keyed_by_agent_on_both_sides(agentx) -> None:
    """A subagent's request is (session, agent, turn) for both tools: keyed by (session,
    turn) alone, four agents' turn 0 would count as one request."""
    aiperf = [_aiperf_rec("t1", 5, 0, 4.0, [4.0]),
              *(_aiperf_rec(f"t1::sa:agent_00{i}", 0, 1, 4.0, [4.0]) for i in range(1, 5)),
              _aiperf_rec("t1::sa:agent_001", 0, 1, 4.0, [4.0]),  # a second replay
              _aiperf_rec("t1::sa:agent_002", 1, 1, 4.0, [4.0], phase="warmup")]
    timings, subs = agentx.aiperf_timings(aiperf)
    assert subs == 5  # every profiling replay counted
    assert sorted(timings) == [("t1", "", 5), *((("t1", f"agent_00{i}", 0)) for i in
                                                 range(1, 5))]
    ours = [_ours_rec("t1", None, 5, [1.0, 1.004], [1, 1]),
            *(_ours_rec("t1", f"agent_00{i}", 0, [1.0, 1.004], [1, 1]) for i in range(1, 3)),
            _ours_rec("t1", "agent_003", 0, [1.0, 1.004], [1, 1], phase="warmup")]
    mine, ours_subs = agentx.agentreplay_timings(ours)
    assert ours_subs == 2
    a, b = agentx.Figures(timings=timings, subagent_requests=subs), \
        agentx.Figures(timings=mine, subagent_requests=ours_subs)
    assert agentx.subagent_line(a, b) == ("subagent requests measured: 5 vs 2 (distinct "
                                          "(session, agent, turn): 4 vs 2, 2 in both)")


def test_shared_timing_compares_the_same_requests_token_by_token(agentx) -> None:
    # a first chunk of 2 tokens (one gap of 0), then a chunk of 3 tokens 6 ms later
    ours, _ = agentx.agentreplay_timings([_ours_rec("s", None, 0, [0.0, 0.006], [2, 3])])
    (t,) = ours.values()
    assert t.gaps_ms == pytest.approx((0.0, 2.0, 2.0, 2.0))
    assert t.tpot_ms == pytest.approx(6.0 / 4)
    a = {("s", "", k): agentx.Timing(4.0 + k / 10, (4.0,)) for k in range(10)}
    b = {("s", "", k): agentx.Timing(4.0, (4.0, 4.4)) for k in range(10)}
    b[("s", "x", 0)] = agentx.Timing(9.0, (9.0,))  # measured by one tool only: left out
    line = agentx.shared_timing(a, b)
    p90 = 1e3 / np.percentile([4.0 + k / 10 for k in range(10)], 90)
    assert line.startswith("shared requests: 10 measured by both (0 of them subagents'): "
                           f"P90 interactivity {p90:.1f} vs 250.0 tok/s")
    assert "ITL P50 4.000 vs 4.200 ms (+5.0%)" in line
    assert agentx.shared_timing(a, {}) == "shared requests: none with a TPOT in both"


def test_absolute_weka_is_the_shape_aiperf_reads_and_imports_the_same(
        agentx, tmp_path: Path) -> None:
    """The rewritten sample: each subagent's ``t`` its spawn (= its first request's
    ``t``), finishing at ``t + duration`` where the sample's ``t`` said; agentreplay
    imports it to the very same sessions, and a second pass changes nothing."""
    src = Path(__file__).parents[1] / "fixtures" / "traces" / "weka"
    out = agentx.absolute_weka(src, tmp_path / "abs")
    raw = orjson.loads((src / "trace_0277.json").read_bytes())["requests"]
    new = orjson.loads((out / "trace_0277.json").read_bytes())["requests"]
    subs = [(r, n) for r, n in zip(raw, new, strict=True) if r.get("type") == "subagent"]
    assert len(subs) == 4
    for r, n in subs:
        assert n["t"] == pytest.approx(r["t"] - r["duration_ms"] / 1000, abs=1e-6)
        assert [q["t"] for q in n["requests"]] == pytest.approx(
            [n["t"] + q["t"] for q in r["requests"]], abs=1e-6)
    again = agentx.absolute_weka(out, tmp_path / "abs2")
    assert (again / "trace_0277.json").read_bytes() == (out / "trace_0277.json").read_bytes()
    assert list(import_weka(out).sessions) == list(import_weka(src).sessions)


def test_an_earlier_aiperf_run_is_read_back_from_its_artifacts(agentx, tmp_path: Path) -> None:
    """``--tools agentreplay`` beside an earlier AIPerf run: its figures come from the
    artifacts it left (none left: nothing read)."""
    assert agentx.read_aiperf(tmp_path, agentx.Figures()) is False
    art = tmp_path / "run"
    art.mkdir()
    (art / "profile_export_aiperf.json").write_bytes(orjson.dumps(
        {"request_count": {"avg": 2}, "inter_token_latency": {"p90": 5.0, "unit": "ms"}}))
    (art / "profile_export.jsonl").write_bytes(b"\n".join(
        [_aiperf_rec("t1", 3, 0, 4.0, [4.0]), _aiperf_rec("t1::sa:a", 0, 1, 5.0, [5.0])]))
    fig = agentx.Figures()
    assert agentx.read_aiperf(tmp_path, fig) is True
    assert fig.requests == 2 and fig.p90_interactivity == pytest.approx(200.0)
    assert fig.subagent_requests == 1 and set(fig.timings) == {("t1", "", 3), ("t1", "a", 0)}


def test_shared_truth_splits_tool_timing_from_server_delivery(agentx) -> None:
    """The truth log's emit times give the TPOT the server delivered; its model step
    times the one its profile gives (a late simulator delivers slower than that)."""
    line = orjson.dumps({"request_id": "r1", "status": "ok", "output_tokens": 3,
                         "emit_ns": [0, 4_000_000, 10_000_000], "emit_tokens": [1, 1, 1],
                         "step_model_ns": [9, 4_000_000, 4_000_000]})
    assert agentx.truth_tpots([line]) == {"r1": (5.0, 4.0)}
    key = ("s", "", 0)
    a = agentx.Figures(timings={key: agentx.Timing(6.0, (), "r1")},
                       truth_tpots={"r1": (5.0, 4.0)})
    b = agentx.Figures(timings={key: agentx.Timing(4.0, (), "q")}, truth_tpots={"q": (4.0, 4.0)})
    assert agentx.shared_truth(a, b) == (
        "P90 interactivity on those 1: timed by the tool 166.7 vs 250.0, delivered by the "
        "server 200.0 vs 250.0, the profile's 250.0 vs 250.0 tok/s")
    assert agentx.shared_truth(a, agentx.Figures()).startswith("truth: no shared request")
