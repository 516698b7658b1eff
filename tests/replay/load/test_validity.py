"""Runs built as traps on the simulator: what run.json and the exit code must say.

Every trap is made by construction (think times longer than the run, no drain),
never by how fast this machine happens to be.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from analysis import RunManifest, measure, read_run, summarize
from replay.cli import main
from replay.load import RunSettings, run_load
from replay.servers.sim import SimConfig, SimServer, SimServerProcess, TruthRecord
from tests.support.workloads import chain_requests, make_workload
from traces import Session, WorkloadHeader, write_workload


def _slow_workload(path: Path) -> Path:
    """Every turn (a session's first included) is due 100 s after the previous one ended."""
    sessions = [Session(id=f"s{s}", requests=tuple(
        r.model_copy(update={"think_time_s": 100.0})
        for r in chain_requests(turns=3, new_blocks=4, block_size=16, output=8, think_s=100.0,
                                first_id=10_000 * (s + 1))))
        for s in range(2)]
    write_workload(path, WorkloadHeader(source="test", block_size=16), sessions)
    return path


def _manifest(run: Path) -> RunManifest:
    return RunManifest.model_validate_json((run / "run.json").read_bytes())


@pytest.fixture(scope="module")
def sim(uses_sim: None) -> object:
    with SimServerProcess("small", time_scale=4.0) as srv:
        yield srv


def test_lanes_out_of_work_leave_an_empty_window_invalid_exit_3(
    tmp_path: Path, sim: SimServerProcess, capsys: pytest.CaptureFixture[str],
) -> None:
    """Each user's next turn is due 100 s after its first (sent in warmup), far past the
    window and drain: every lane runs out of work before the window, nothing is sent in
    it. The run is stamped invalid with the cause named, and ``run`` exits 3."""
    wl = _slow_workload(tmp_path / "wl.jsonl")
    out = tmp_path / "run"
    code = main(["run", "--target", sim.url, "--workload", str(wl), "--users", "2",
                 "--warmup", "0.5", "--duration", "1", "--drain", "0.5", "--out", str(out),
                 "--quiet", "--metrics-interval", "0"])
    err = capsys.readouterr().err
    assert code == 3
    m = _manifest(out)
    assert m.complete and m.coverage is not None
    assert (m.coverage.lanes, m.coverage.lanes_done_before_window_end) == (2, 2)
    assert m.validity is not None and m.validity.verdict == "invalid"
    codes = {r.code for r in m.validity.reasons}
    assert "window_empty" in codes
    assert "run invalid" in err and "window_empty" in err and "no turn due" in err
    assert "--think-time-cap" in err
    recs = [orjson.loads(x) for x in (out / "requests.jsonl").read_bytes().splitlines()]
    assert recs and all(r["phase"] == "warmup" for r in recs)


def test_a_normal_run_is_covered_and_measures_its_client(
    tmp_path: Path, sim: SimServerProcess,
) -> None:
    """Think times shorter than the window: no lane runs out; the client's health is
    measured over the window (loop lag, CPU share, schedule lag) and load_kind says users."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=3, turns=6, think_s=0.05)
    cfg = RunSettings(target=sim.url, users=3, warmup_s=0.3, duration_s=1.5, drain_s=2.0,
                      metrics_interval_s=None)
    run = asyncio.run(run_load(cfg, wl, tmp_path / "run"))
    m = _manifest(run)
    assert m.load_kind == "users"
    assert m.coverage is not None
    assert (m.coverage.lanes, m.coverage.lanes_done_before_window_end) == (3, 0)
    h = m.client_health
    assert h is not None and h.cpu_share is not None and h.cpu_share > 0
    assert h.loop_lag_p99_s is not None and h.loop_lag_max_s is not None
    assert 0 <= h.loop_lag_p99_s <= h.loop_lag_max_s
    recs = [orjson.loads(x) for x in (run / "requests.jsonl").read_bytes().splitlines()]
    lags = sorted(r["sent_s"] - r["due_s"] for r in recs if r["phase"] == "measure")
    assert h.schedule_lag_p99_s is not None and lags[0] <= h.schedule_lag_p99_s <= lags[-1]
    assert m.validity is not None


@pytest.mark.sim
def test_drain_cuts_are_incomplete_records_counted(tmp_path: Path) -> None:
    """No drain and long outputs: the requests still streaming when the window ends are
    cut. Each is recorded once as ``incomplete`` (no error kind), every request the server
    saw has a record, and the analysis counts them in the failure share."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=3, turns=3, output=2000, think_s=0.0)
    cfg = RunSettings(target="http://127.0.0.1:1", users=3, warmup_s=0.0, duration_s=0.6,
                      drain_s=0.0, metrics_interval_s=None, warmup_start="start")

    async def go() -> tuple[Path, list[TruthRecord]]:
        async with SimServer(SimConfig(profile="small", time_scale=1.0)) as srv:
            run = await run_load(cfg.model_copy(update={"target": srv.url}), wl,
                                 tmp_path / "run")
            return run, list(srv.truth)

    run, truth = asyncio.run(go())
    recs = [orjson.loads(x) for x in (run / "requests.jsonl").read_bytes().splitlines()]
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids)) and {t.request_id for t in truth} <= set(ids)
    cut = [r for r in recs if r["status"] == "incomplete"]
    assert len(cut) == 3  # one per user: 2000 tokens take longer than the window
    assert all(r["error_kind"] is None and r["phase"] == "measure" for r in cut)
    counts = summarize(measure(read_run(run)), bootstrap=False, tiers=()).counts
    assert counts.incomplete == 3 and counts.failure_share == pytest.approx(1.0)
    m = _manifest(run)
    assert m.complete and m.validity is not None and m.validity.verdict != "valid"


class _DeadServer:
    """A server watch that saw the server die (as ``replay.servers.launch.ServerWatcher``
    reports)."""

    died = True
    detail = "arm x: server process 4242 exited during the run"


def test_a_server_watch_that_saw_a_death_stamps_the_run_invalid(
    tmp_path: Path, sim: SimServerProcess,
) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=3, think_s=0.05)
    cfg = RunSettings(target=sim.url, users=2, warmup_s=0.2, duration_s=1.0, drain_s=1.0,
                      metrics_interval_s=None)
    run = asyncio.run(run_load(cfg, wl, tmp_path / "run", watch=_DeadServer()))
    m = _manifest(run)
    assert m.server_watch is not None and m.server_watch.server_died
    assert m.server_watch.detail == _DeadServer.detail
    assert m.validity is not None and m.validity.verdict == "invalid"
    assert "server_died" in {r.code for r in m.validity.reasons}
