"""The system idle cap on a real run against serve-sim: two sessions whose next turns
are 60 s and 75 s away while nothing is in flight. Under ``--scenario agentx-mvp``
the server (its truth log) never sits idle much longer than 10 s and the turns keep
their order; without the scenario a gap above the cap is kept as recorded.

Starved-machine safe: the exact rule is checked on the client's own clock (the due
time after an idle spell is the spell's start plus the cap, whatever the lag); the
server's gaps are bounded by the cap plus that request's measured schedule lag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from analysis import RequestRecord, RunManifest
from replay.cli import main
from replay.servers.sim import SimServerProcess, TruthRecord
from tests.support.workloads import chain_requests
from traces._io import write_workload
from traces._models import Session, WorkloadHeader

_CAP = 10.0
_THINK = {"s0": 60.0, "s1": 75.0}


@pytest.fixture(scope="module")
def sim(uses_sim: None, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[SimServerProcess, Path]]:
    log = tmp_path_factory.mktemp("idlecap") / "truth.jsonl"
    with SimServerProcess("small", time_scale=4.0, truth_path=str(log)) as srv:
        yield srv, log


def _workload(path: Path) -> Path:
    sessions = [Session(id=sid, requests=chain_requests(
        turns=4, new_blocks=2, block_size=16, output=4, think_s=think,
        first_id=10_000 * (k + 1))) for k, (sid, think) in enumerate(_THINK.items())]
    write_workload(path, WorkloadHeader(source="weka", block_size=16), sessions)
    return path


def _run(srv: SimServerProcess, wl: Path, out: Path, *extra: str
         ) -> tuple[list[RequestRecord], RunManifest]:
    code = main(["run", "--workload", str(wl), "--target", srv.url, "--users", "2",
                 "--warmup", "0", "--drain", "5", "--out", str(out), "--quiet",
                 "--metrics-interval", "0", *extra])
    assert code in (0, 3)  # 3: a short window does not satisfy the scenario (stamped)
    recs = [RequestRecord.model_validate(orjson.loads(line))
            for line in (out / "requests.jsonl").read_bytes().splitlines()]
    manifest = RunManifest.model_validate(orjson.loads((out / "run.json").read_bytes()))
    return sorted(recs, key=lambda r: r.sent_s), manifest


def _truth(log: Path, ids: set[str]) -> list[TruthRecord]:
    out = [TruthRecord.model_validate(orjson.loads(line))
           for line in log.read_bytes().splitlines()]
    return sorted((t for t in out if t.request_id in ids), key=lambda t: t.arrival_ns)


def _idle_spells(recs: list[RequestRecord]) -> list[tuple[float, RequestRecord]]:
    """(when the client last had nothing in flight, the request that ended it) for
    every request sent while nothing was in flight."""
    out = []
    last_end = None
    for r in recs:
        if last_end is not None and r.sent_s > last_end:
            out.append((last_end, r))
        last_end = r.end_s if last_end is None else max(last_end, r.end_s)
    return out


def _server_gaps(truth: list[TruthRecord]) -> list[tuple[str, float]]:
    """(request, seconds the server had nothing in flight before it arrived)."""
    out = []
    busy_until = None
    for t in truth:
        if busy_until is not None and t.arrival_ns > busy_until:
            out.append((t.request_id, (t.arrival_ns - busy_until) / 1e9))
        busy_until = t.finish_ns if busy_until is None else max(busy_until, t.finish_ns)
    return out


@pytest.mark.sim
@pytest.mark.integration  # a simulator in a subprocess
def test_the_scenario_caps_the_run_idle_time_and_keeps_the_turns_order(
    tmp_path: Path, sim: tuple[SimServerProcess, Path],
) -> None:
    srv, log = sim
    wl = _workload(tmp_path / "wl.jsonl")
    recs, m = _run(srv, wl, tmp_path / "capped", "--scenario", "agentx-mvp",
                   "--scenario-unsafe", "--duration", "25",
                   "--entry", "s0:1", "--entry", "s1:1")
    assert m.idle_cap is not None and m.idle_cap.cap_s == _CAP and m.idle_cap.scope == "run"
    # every 60/75-s gap was idle time: at least two shifts, far more than 50 s taken off
    assert m.idle_cap.shifts >= 2 and m.idle_cap.shifted_s > 50.0
    spells = _idle_spells(recs)
    assert len(spells) >= 2, [(r.session, r.turn, r.sent_s) for r in recs]
    for start, r in spells:
        # the rule on the client's clock: due the cap after the run went idle, give or
        # take the instant between the request's end (its record's stamp) and the
        # clock's own idle stamp when the loop handled that end. The race, stated: on a
        # starved machine that instant is tens of milliseconds (85 ms seen at load 3)
        assert r.due_s - start <= _CAP + 0.5, (r.session, r.turn, r.due_s, start)
        assert r.due_s - start >= _CAP - 0.5, (r.session, r.turn, r.due_s, start)
        assert r.think_applied_s < _THINK[r.session]
    # each lane's turns in order, and the lanes' order kept: s0 (60 s) before s1 (75 s)
    for sid in _THINK:
        turns = [r.turn for r in recs if r.session == sid]
        assert turns == sorted(turns) and turns[0] == 1, (sid, turns)
    seconds = [(r.session, r.turn) for r in recs if r.turn == 2]
    assert seconds[:2] == [("s0", 2), ("s1", 2)], seconds
    # the server saw the same: never idle for much longer than the cap
    lag = {r.id: r.sent_s - r.due_s for r in recs}
    gaps = _server_gaps(_truth(log, set(lag)))
    assert len(gaps) >= 2, gaps
    for rid, gap in gaps:
        assert gap <= _CAP + lag[rid] + 2.0, (rid, gap, lag[rid])


@pytest.mark.sim
@pytest.mark.integration  # a simulator in a subprocess
def test_without_the_scenario_a_long_gap_is_kept(
    tmp_path: Path, sim: tuple[SimServerProcess, Path],
) -> None:
    """The same sessions, think times scaled to 12 s and 15 s (above the cap): each
    next turn waits its whole gap, so the server sits idle for over 10 s."""
    srv, log = sim
    wl = _workload(tmp_path / "wl.jsonl")
    recs, m = _run(srv, wl, tmp_path / "plain", "--duration", "17", "--think-scale", "0.2")
    assert m.idle_cap is None
    later = [r for r in recs if r.turn == 1]
    assert {r.session for r in later} == {"s0", "s1"}, [(r.session, r.turn) for r in recs]
    for r in later:
        first = next(x for x in recs if x.session == r.session and x.turn == 0)
        assert r.think_applied_s == pytest.approx(_THINK[r.session] * 0.2)
        assert r.due_s - first.end_s >= _THINK[r.session] * 0.2 - 0.5
    gaps = [gap for _, gap in _server_gaps(_truth(log, {r.id for r in recs}))]
    assert gaps and max(gaps) > _CAP + 1.0, gaps


@pytest.mark.sim
@pytest.mark.integration  # a simulator and worker processes
def test_a_split_run_caps_each_worker_and_says_so(
    tmp_path: Path, sim: tuple[SimServerProcess, Path],
) -> None:
    """Two worker processes, one user each: each worker's clock pulls its own user's
    60-s/75-s turn forward once its loop has been idle for the cap; run.json says the
    cap covered each worker (scope ``worker``) and sums their shifts."""
    srv, _ = sim
    wl = _workload(tmp_path / "wl.jsonl")
    recs, m = _run(srv, wl, tmp_path / "split", "--scenario", "agentx-mvp",
                   "--scenario-unsafe", "--duration", "14", "--workers", "2",
                   "--entry", "s0:1", "--entry", "s1:1")
    assert m.idle_cap is not None and m.idle_cap.scope == "worker"
    assert m.idle_cap.shifts >= 2 and m.idle_cap.shifted_s > 100.0
    assert {r.session for r in recs if r.turn == 2} == {"s0", "s1"}, \
        [(r.session, r.turn, r.due_s) for r in recs]
    for r in recs:
        if r.turn == 2:  # due the cap after its own worker's last request ended
            first = next(x for x in recs if x.session == r.session and x.turn == 1)
            # give or take the instant between the record's end stamp and the worker
            # clock's idle stamp (the race stated in the run-wide test above: 1.2 ms
            # seen here under load, where 1 ms was allowed)
            assert _CAP - 0.5 <= r.due_s - first.end_s <= _CAP + 0.5, (r.session, r.due_s)
