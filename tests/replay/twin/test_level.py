"""One level on the twin: the real lanes against in-process engines, on simulated time."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.servers.sim import load_profile
from replay.twin import load_workload, simulate_level
from tests.support.workloads import make_workload


@pytest.fixture
def wl(tmp_path: Path) -> Path:
    return make_workload(tmp_path / "wl.jsonl", sessions=6, turns=6, new_blocks=8,
                         output=40, think_s=2.0, shared_blocks=2)


def _records(run: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in (run / "requests.jsonl").read_bytes().splitlines()]


def test_one_user_decodes_at_the_profile_step_time(tmp_path: Path, wl: Path) -> None:
    """Alone, a request decodes one token per batch-1 step: 1/TPOT is the profile's."""
    profile = load_profile("small").model_copy(update={"prefill_tokens_per_s": 0.0})
    res = simulate_level(profile, load_workload(wl), 1, 60.0, 0.0, out_dir=tmp_path / "run")
    s = res.summary
    step = profile.step_s("latency_specialized", 1, 0, 0)
    assert s.counts.ok == s.counts.in_window > 5
    assert s.interactivity.p50 == pytest.approx(1 / step, rel=0.02)
    assert s.simulated and res.run_dir == tmp_path / "run"
    recs = _records(tmp_path / "run")
    for r in recs:  # think time honoured exactly: due = previous end + think
        assert r["status"] == "ok" and r["output_tokens"] == 40
        assert len(r["chunk_times_s"]) == 40 and r["cached_tokens"] is not None
    ordered = sorted(recs, key=lambda r: r["due_s"])
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b["turn"] == a["turn"] + 1:
            assert b["due_s"] == pytest.approx(a["end_s"] + b["think_applied_s"], abs=1e-6)


def test_request_overhead_delays_each_first_token_by_exactly_that(wl: Path) -> None:
    """``request_overhead_s`` is time before the engine: alone, every TTFT grows by it and
    decoding (interactivity) is untouched, because it holds no engine capacity."""
    profile = load_profile("small")
    slow = profile.model_copy(update={"request_overhead_s": 0.25})
    w = load_workload(wl)
    base = simulate_level(profile, w, 1, 60.0, 0.0).summary
    late = simulate_level(slow, w, 1, 60.0, 0.0).summary
    assert base.ttft.p50 is not None and late.ttft.p50 is not None
    assert late.ttft.p50 - base.ttft.p50 == pytest.approx(0.25, abs=1e-6)
    assert late.ttft.p90 - base.ttft.p90 == pytest.approx(0.25, abs=1e-6)
    assert late.interactivity.p50 == pytest.approx(base.interactivity.p50, rel=1e-9)


def test_levels_are_deterministic_and_load_shows(wl: Path) -> None:
    profile = load_profile("small")
    w = load_workload(wl)
    a = simulate_level(profile, w, 6, 60.0, 5.0, seed=3)
    b = simulate_level(profile, w, 6, 60.0, 5.0, seed=3)
    one = simulate_level(profile, w, 1, 60.0, 5.0, seed=3)
    assert a.summary.model_dump(exclude={"runs"}) == b.summary.model_dump(exclude={"runs"})
    assert a.summary.counts.in_window > one.summary.counts.in_window
    assert a.summary.tpot.p50 > one.summary.tpot.p50  # batching slows each step
    assert a.sim_s >= 65.0
    pre = a.summary.prefix  # the engines' counters, scraped at the window's edges
    assert pre.measured_share is not None and pre.reported_share is not None
    assert pre.measured_share == pytest.approx(pre.reported_share, abs=0.1)
    assert a.summary.sim_lateness == pytest.approx(0.0, abs=1e-9)


def test_affinity_keeps_a_session_on_one_replica(tmp_path: Path, wl: Path) -> None:
    """Two replicas: every turn of a session instance lands where its first did, and
    the prefix cache hits as with one engine."""
    from replay.twin import TwinEngines

    seen: dict[str, set[int]] = {}
    profile = load_profile("small")
    w = load_workload(wl)
    mp = pytest.MonkeyPatch()
    routed: list[tuple[object, int]] = []
    real_route = TwinEngines._route

    def route(self: TwinEngines, hashes: list[int]) -> int:
        k = real_route(self, hashes)
        routed.append((self.tap.last_scope if self.tap else None, k))
        return k

    mp.setattr(TwinEngines, "_route", route)
    try:
        res = simulate_level(profile, w, 6, 60.0, 0.0, replicas=2)
    finally:
        mp.undo()
    for scope, k in routed:
        seen.setdefault(str(scope), set()).add(k)
    assert len(seen) >= 6
    assert all(len(ks) == 1 for ks in seen.values())
    assert {k for ks in seen.values() for k in ks} == {0, 1}
    assert res.summary.gpu_count == 2 * profile.gpu_count
    assert res.summary.counts.ok == res.summary.counts.in_window


def test_client_first_token_timeout_is_modelled(tmp_path: Path, wl: Path) -> None:
    """A prefill slower than --ttft-timeout ends as the HTTP client would end it."""
    profile = load_profile("small").model_copy(update={"prefill_tokens_per_s": 50.0})
    from replay.twin import simulate_level as sim

    res = sim(profile, load_workload(wl), 2, 30.0, 0.0, drain_s=5.0,
              out_dir=tmp_path / "run", first_token_timeout_s=1.0)
    recs = _records(tmp_path / "run")
    assert recs and all(r["status"] == "timeout" for r in recs)
    assert {r["error_kind"] for r in recs} == {"timeout_first_token"}
    for r in recs:
        assert r["end_s"] == pytest.approx(r["sent_s"] + 1.0, abs=1e-6)
    assert res.summary.counts.timeout == res.summary.counts.in_window
