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

from analysis import RequestRecord
from replay.load import RunSettings, connections_for, run_load
from replay.sim import SimConfig, SimServer
from tests.replay.conftest import chain_requests
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
