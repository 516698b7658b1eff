"""The pure parts of bench/agentx_crosscheck.py: reading AIPerf's lanes (the entries
agentreplay then replays with ``--entry``) and matching the two tools' requests.

The log lines are written with the format string of AIPerf 0.13's
``TrajectorySource._log_trajectory_summary``, so a parser that drifts from it fails.
"""

from __future__ import annotations

import orjson


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
