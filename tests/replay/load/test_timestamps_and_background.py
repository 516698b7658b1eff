"""Background subagents and the timestamp time controls, against the simulator.

Background subagents (WEKA ``duration_ms: null``) run without delaying their
parent; ``--time-scale``/``--start``/``--slice`` reshape a timestamp trace. Every
check compares records with the workload's own numbers or the simulator's truth,
never with how fast this machine is.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from analysis import RequestRecord, RunManifest
from replay.cli import main
from replay.errors import ConfigError
from replay.load import RunSettings, connections_for, run_load
from replay.servers.sim import SimConfig, SimServer, SimServerProcess
from tests.support.workloads import chain_requests, make_workload
from traces import Session, Subagent, WorkloadHeader, write_workload

_BS = 16


def _records(run: Path) -> list[RequestRecord]:
    return [RequestRecord.model_validate(orjson.loads(line))
            for line in (run / "requests.jsonl").read_bytes().splitlines()]


def _sub(name: str, first_id: int, *, turns: int, output: int, think_s: float,
         background: bool = False) -> Subagent:
    reqs = chain_requests(turns=turns, new_blocks=2, block_size=_BS, output=output,
                          think_s=think_s, first_id=first_id)
    return Subagent(id=name, requests=reqs, background=background)


def _background_workload(path: Path) -> Path:
    """One session: turn 0 spawns two blocking subagents (one short turn each) and one
    background subagent whose second turn is due 1.5 s after its first ended; turn 1
    of the parent follows with no think time."""
    parent = list(chain_requests(turns=3, new_blocks=3, block_size=_BS, output=8,
                                 think_s=0.0, first_id=1_000))
    subs = (_sub("bg", 5_000, turns=2, output=8, think_s=1.5, background=True),
            _sub("b1", 6_000, turns=1, output=8, think_s=0.0),
            _sub("b2", 7_000, turns=1, output=24, think_s=0.0))
    parent[0] = parent[0].model_copy(update={"subagents": subs})
    write_workload(path, WorkloadHeader(source="test", block_size=_BS),
                   [Session(id="s0", requests=tuple(parent))])
    return path


@pytest.mark.sim
def test_parent_waits_for_blocking_subagents_only(tmp_path: Path) -> None:
    """The parent's next request is due when the last blocking subagent ended (its
    records' ends), not when the background one ends (its last token comes later);
    the background lane's requests are recorded like any other lane's."""
    wl = _background_workload(tmp_path / "wl.jsonl")
    cfg = RunSettings(target="http://127.0.0.1:1", users=1, warmup_s=0.0, duration_s=3.0,
                      drain_s=3.0, metrics_interval_s=None, warmup_start="start")

    async def go() -> tuple[Path, set[str]]:
        async with SimServer(SimConfig(profile="small", time_scale=4.0)) as srv:
            run = await run_load(cfg.model_copy(update={"target": srv.url}), wl,
                                 tmp_path / "run")
            return run, {t.request_id for t in srv.truth}

    run, truth = asyncio.run(go())
    recs = [r for r in _records(run) if r.session_instance == 0]
    assert {r.id for r in recs} <= truth
    by_agent: dict[str | None, list[RequestRecord]] = {}
    for r in recs:
        by_agent.setdefault(r.agent, []).append(r)
    assert (len(by_agent["b1"]), len(by_agent["b2"]), len(by_agent["bg"])) == (1, 1, 2)
    parent = sorted(by_agent[None], key=lambda r: r.turn)
    assert [r.turn for r in parent][:2] == [0, 1]
    blocking_end = max(r.end_s for r in by_agent["b1"] + by_agent["b2"])
    bg_last = max(by_agent["bg"], key=lambda r: r.turn)
    assert all(r.status == "ok" for r in parent[:2] + by_agent["b1"] + by_agent["b2"])
    assert bg_last.status == "ok" and bg_last.last_token_s is not None
    # due = ready + think; ready is taken after the last blocking subagent's record
    assert parent[1].think_applied_s == 0.0
    assert parent[1].due_s >= blocking_end
    assert parent[1].due_s < bg_last.due_s < bg_last.last_token_s
    # the background lane ran beside the parent's later turns
    assert parent[1].sent_s < bg_last.sent_s


def test_connections_allow_for_background_subagents() -> None:
    """Each user may hold its blocking subagents and, per session, its background ones
    (twice: they may outlive the session into the next)."""
    base = chain_requests(turns=2, new_blocks=1, block_size=_BS, output=4, think_s=0.0,
                          first_id=1)
    plain = [Session(id="a", requests=base)]
    subs = (_sub("bg", 100, turns=1, output=4, think_s=0.0, background=True),
            _sub("b1", 200, turns=1, output=4, think_s=0.0),
            _sub("b2", 300, turns=1, output=4, think_s=0.0))
    spawning = (base[0].model_copy(update={"subagents": subs}),) + base[1:]
    with_subs = [Session(id="b", requests=spawning)]
    assert connections_for(3, with_subs) - connections_for(3, plain) == 3 * (2 + 2 * 1)


# --- timestamp time controls ------------------------------------------------------------

_FIRSTS = (0.0, 0.6, 1.2, 1.8, 2.4)
_GAP = 0.4


def _timestamp_workload(path: Path, firsts: tuple[float, ...] = _FIRSTS) -> Path:
    """Sessions of two requests each, the second ``_GAP`` s after the first, starting at
    ``firsts`` (trace seconds, offset by 10 s so trace time 0 is not an arrival)."""
    sessions = []
    for s, first in enumerate(firsts):
        reqs = chain_requests(turns=2, new_blocks=2, block_size=_BS, output=4, think_s=0.0,
                              first_id=1_000 * (s + 1), arrival=0.0)
        reqs = tuple(r.model_copy(update={"arrival_s": 10.0 + first + t * _GAP})
                     for t, r in enumerate(reqs))
        sessions.append(Session(id=f"s{s}", requests=reqs))
    write_workload(path, WorkloadHeader(source="test", block_size=_BS, arrival="timestamps"),
                   sessions)
    return path


def _arrivals(path: Path) -> dict[tuple[str, int], float]:
    from traces import iter_sessions

    return {(s.id, t): r.arrival_s for s in iter_sessions(path)
            for t, r in enumerate(s.requests) if r.arrival_s is not None}


@pytest.fixture(scope="module")
def sim(uses_sim: None) -> object:
    with SimServerProcess("small", time_scale=4.0) as srv:
        yield srv


def _run(sim: SimServerProcess, wl: Path, out: Path, *extra: str, duration: str = "3") -> int:
    return main(["run", "--target", sim.url, "--workload", str(wl), "--duration", duration,
                 "--drain", "2", "--out", str(out), "--quiet", "--metrics-interval", "0",
                 *extra])


def test_time_scale_halves_due_gaps(tmp_path: Path, sim: SimServerProcess) -> None:
    """``--time-scale 0.5``: every request is due at half its offset from the trace's
    first arrival; the run's level is that time scale."""
    wl = _timestamp_workload(tmp_path / "wl.jsonl")
    assert _run(sim, wl, tmp_path / "run", "--time-scale", "0.5") in (0, 3)
    recs = _records(tmp_path / "run")
    arrivals = _arrivals(wl)
    assert len(recs) == len(arrivals) == 2 * len(_FIRSTS)
    first = min(arrivals.values())
    for r in recs:
        assert r.due_s == pytest.approx((arrivals[(r.session, r.turn)] - first) * 0.5,
                                        abs=1e-6)
    gaps = {round(b.due_s - a.due_s, 6) for a in recs for b in recs
            if a.session == b.session and (a.turn, b.turn) == (0, 1)}
    assert gaps == {round(_GAP * 0.5, 6)}
    m = RunManifest.model_validate_json((tmp_path / "run" / "run.json").read_bytes())
    assert m.load_kind == "timestamps" and m.load.time_scale == 0.5


def test_start_and_slice_select_arrivals(tmp_path: Path, sim: SimServerProcess) -> None:
    """``--start 11 --slice 1`` replays the sessions whose first arrival is in trace
    time [11, 12) (s2 at 11.2, s3 at 11.8), each due at its offset from 11."""
    wl = _timestamp_workload(tmp_path / "wl.jsonl")
    assert _run(sim, wl, tmp_path / "run", "--start", "11", "--slice", "1") in (0, 3)
    recs = _records(tmp_path / "run")
    arrivals = _arrivals(wl)
    chosen = {sid for (sid, t), a in arrivals.items() if t == 0 and 11.0 <= a < 12.0}
    assert chosen == {"s2", "s3"}
    assert {r.session for r in recs} == chosen and len(recs) == 2 * len(chosen)
    for r in recs:
        assert r.due_s == pytest.approx(arrivals[(r.session, r.turn)] - 11.0, abs=1e-6)


def test_window_without_arrivals_warns(
    tmp_path: Path, sim: SimServerProcess, capsys: pytest.CaptureFixture[str],
) -> None:
    """Arrivals at 0-0.4 s and 30 s: a window of [0.8 s, 1.8 s) holds none. The run says
    so on stderr before it starts and its validity carries the caveat."""
    wl = _timestamp_workload(tmp_path / "wl.jsonl", firsts=(0.0, 30.0))
    code = _run(sim, wl, tmp_path / "run", "--warmup", "0.8", duration="1")
    err = capsys.readouterr().err
    assert "holds no arrival" in err and "next arrives at 30.0 s" in err
    m = RunManifest.model_validate_json((tmp_path / "run" / "run.json").read_bytes())
    assert m.validity is not None and m.validity.verdict != "valid"
    assert "window_no_arrivals" in {r.code for r in m.validity.reasons}
    assert code == 3  # nothing was sent in the window: invalid


def test_no_warning_when_the_window_holds_arrivals(
    tmp_path: Path, sim: SimServerProcess, capsys: pytest.CaptureFixture[str],
) -> None:
    wl = _timestamp_workload(tmp_path / "wl.jsonl")
    _run(sim, wl, tmp_path / "run", "--warmup", "0.5", duration="1")
    assert "holds no arrival" not in capsys.readouterr().err
    m = RunManifest.model_validate_json((tmp_path / "run" / "run.json").read_bytes())
    assert m.validity is not None
    assert "window_no_arrivals" not in {r.code for r in m.validity.reasons}


@pytest.mark.parametrize(("flags", "closed", "needle"), [
    (("--time-scale", "0"), False, "--time-scale:"),
    (("--slice", "-1"), False, "--slice:"),
    (("--start", "-2"), False, "--start:"),
    (("--time-scale", "2"), True, "--time-scale: only for workloads replayed"),
    (("--start", "5"), True, "--start: only for workloads replayed"),
    (("--start", "100"), False, "--start/--slice: no session"),
])
def test_bad_time_controls_exit_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], closed: bool,
    needle: str,
) -> None:
    """Refused before any connection (the target is a closed port): one line, exit 2."""
    wl = make_workload(tmp_path / "c.jsonl") if closed \
        else _timestamp_workload(tmp_path / "wl.jsonl")
    code = main(["run", "--target", "http://127.0.0.1:1", "--workload", str(wl),
                 "--duration", "1", "--out", str(tmp_path / "run"), "--quiet", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_time_controls_refused_with_rate(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    wl = _timestamp_workload(tmp_path / "wl.jsonl")
    code = main(["run", "--target", "http://127.0.0.1:1", "--workload", str(wl),
                 "--duration", "1", "--out", str(tmp_path / "run"), "--quiet",
                 "--rate", "2", "--time-scale", "0.5"])
    assert code == 2 and "does not combine with --rate" in capsys.readouterr().err


# --- compare ------------------------------------------------------------------------------

_DEAD = "http://127.0.0.1:9"


@pytest.mark.parametrize(("flags", "closed", "needle"), [
    (("--time-scale", "-1"), False, "--time-scale:"),
    (("--time-scale", "2"), True, "--time-scale: only for workloads replayed"),
    (("--slice", "5", "--rate", "1"), False, "--slice: does not combine with --rate"),
])
def test_compare_refuses_bad_time_controls_before_any_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], closed: bool,
    needle: str,
) -> None:
    wl = make_workload(tmp_path / "c.jsonl") if closed \
        else _timestamp_workload(tmp_path / "wl.jsonl")
    out = tmp_path / "cmp"
    code = main(["compare", "--arm", f"auto={_DEAD}", "--arm", f"b={_DEAD}", "--workload",
                 str(wl), "--duration", "1", "--out", str(out), "--quiet", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and needle in err and len(err.splitlines()) == 1
    assert "cannot reach" not in err and not (out / "runs").exists()


@pytest.mark.sim
def test_compare_runs_at_the_time_scale(tmp_path: Path) -> None:
    """Every run of ``compare --time-scale 0.5`` replays the trace twice as fast (due
    times from the workload) and is labelled with that level; the stored settings
    carry it, so a resume with another time scale is refused."""
    from replay.ab import CompareOptions, compare_arms, plan_runs

    wl = _timestamp_workload(tmp_path / "wl.jsonl")
    arrivals = _arrivals(wl)
    first = min(arrivals.values())
    out = tmp_path / "cmp"
    opts = CompareOptions(duration_s=1.5, warmup_s=0.0, drain_s=1.0, metrics_interval_s=None,
                          time_scale=0.5)
    with SimServerProcess("small", "auto", time_scale=4.0) as a, \
            SimServerProcess("small", "latency_specialized", time_scale=4.0) as b:
        arms = [("auto", a.url), ("latency_specialized", b.url)]
        compare_arms(arms, wl, out, opts)
        for run in plan_runs(["auto", "latency_specialized"], [1], 1):
            m = RunManifest.model_validate_json((out / "runs" / run.name / "run.json")
                                                .read_bytes())
            assert m.load_kind == "timestamps" and m.load.time_scale == 0.5
            recs = _records(out / "runs" / run.name)
            assert len(recs) == len(arrivals)
            for r in recs:
                assert r.due_s == pytest.approx((arrivals[(r.session, r.turn)] - first) * 0.5,
                                                abs=1e-6)
        state = orjson.loads((out / "comparison.json").read_bytes())
        assert state["settings"]["time_scale"] == 0.5
        with pytest.raises(ConfigError, match="time_scale"):
            compare_arms(arms, wl, out, opts.model_copy(update={"time_scale": 1.0}))
