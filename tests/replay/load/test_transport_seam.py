"""The one seam between the lanes and what answers them (``replay.load.Transport``), and
the twin's levels running through the run core every run shares (``drive_run``).

Everything here runs on simulated time (``replay.twin``'s ``VirtualLoop``): no socket,
no server, so the truth is what the transport double or the twin's engines did."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from replay.client import ServerFacts, StreamOutcome, Timeouts, make_session
from replay.load import (
    ClosedRun,
    Lanes,
    MemoryStore,
    RunSettings,
    Target,
    Transport,
    drive_run,
    load_workload,
    new_manifest,
    prepare_run,
)
from replay.servers.sim import load_profile
from replay.twin import TwinEngines, simulate_level
from replay.twin._clock import VirtualLoop, virtual_time
from tests.support.workloads import make_workload

_ORIGIN_NS = 1_000_000_000_000


class CountingTransport:
    """A :class:`~replay.load.Transport` double: every request is answered after
    ``latency_s`` (simulated) with all its tokens in one chunk; it counts the calls and
    keeps each request's ``X-Request-Id``."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.ids: list[str] = []

    async def __call__(self, session: aiohttp.ClientSession, url: str, body: bytes,
                       headers: dict[str, str], timeouts: Timeouts, out: StreamOutcome, *,
                       max_line_bytes: int = 0, keep_output_ids: bool = True,
                       max_tokens: int | None = None) -> StreamOutcome:
        self.ids.append(headers["X-Request-Id"])
        out.sent_ns = time.monotonic_ns()
        out.http_status = 200
        await asyncio.sleep(self.latency_s)
        n = max_tokens or 1
        now = time.monotonic_ns()
        out.chunk_ns, out.chunk_tokens = [now], [n]
        out.first_ns = out.last_ns = now
        out.usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": 1 + n}
        out.done = True
        return out


def _drive(wl: Path, transport: Transport, users: int) -> ClosedRun:
    settings = RunSettings(target="http://127.0.0.1:9", users=users, duration_s=20.0,
                           warmup_s=2.0, drain_s=5.0, metrics_interval_s=None)
    prepared = prepare_run(settings, load_workload(wl))
    facts = ServerFacts(model="m", models={}, max_model_len=100_000, server_info=None,
                        vocab_size=32_000, block_size=16, gpu_count=1, simulated=True)
    loop = VirtualLoop(start_ns=_ORIGIN_NS)

    async def main() -> ClosedRun:
        target = Target(root="double://", headers={}, model="m", vocab_size=32_000,
                        block_size=prepared.header.block_size, server_block_size=16,
                        run_tag="seam0001")
        manifest = new_manifest(prepared.settings, "seam00000001", facts, prepared.header,
                                prepared.path, len(prepared.sessions), prepared.arrival,
                                target="double://")
        async with make_session(0) as session:
            return await drive_run(prepared, manifest, MemoryStore(), target, session,
                                   out=Path("double"),
                                   lanes=Lanes(transport=transport, probe_loop=False))

    try:
        with virtual_time(loop):
            return loop.run_until_complete(main())
    finally:
        loop.close()


def test_every_request_goes_through_the_transport_given_to_the_run(tmp_path: Path) -> None:
    """The lanes reach the server only through the run's transport: the double saw
    exactly the requests recorded, and the close's analysis reads what it answered."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=3, turns=4, output=12, think_s=0.5)
    double = CountingTransport(latency_s=0.25)
    closed = _drive(wl, double, users=3)
    assert closed.run is not None and closed.summary is not None
    r = closed.run.requests
    assert closed.records == len(r.id) == len(double.ids) > 0
    assert sorted(double.ids) == sorted(r.id.tolist())
    ok = r.status == "ok"
    assert ok.all()  # nothing was cut: every answer took 0.25 s, the drain is 5 s
    e2e = r.last_token_s[ok] - r.sent_s[ok]
    assert e2e == pytest.approx([0.25] * int(ok.sum()), abs=1e-6)
    assert (r.output_tokens[ok] == 12).all()
    window = (r.phase == "measure")
    assert closed.summary.counts.in_window == int(window.sum())
    assert closed.manifest.validity is closed.summary.validity is not None


def test_the_twin_level_runs_through_the_run_core(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``simulate_level`` is a run: it goes through ``drive_run``'s close once (seal and
    judge, the same functions a real run closes with), every request through the
    engines' transport, and its summary is the one the close analysed."""
    import replay.load._run as run_module

    calls: dict[str, int] = {"seal": 0, "judge": 0, "send": 0}
    judged: list[ClosedRun] = []
    seal, judge, send = run_module.seal, run_module.judge, TwinEngines.send

    def counting_seal(*args: object, **kw: object) -> object:
        calls["seal"] += 1
        return seal(*args, **kw)  # type: ignore[arg-type]

    def counting_judge(*args: object, **kw: object) -> ClosedRun:
        calls["judge"] += 1
        judged.append(judge(*args, **kw))  # type: ignore[arg-type]
        return judged[-1]

    async def counting_send(self: TwinEngines, *args: object, **kw: object) -> StreamOutcome:
        calls["send"] += 1
        return await send(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(run_module, "seal", counting_seal)
    monkeypatch.setattr(run_module, "judge", counting_judge)
    monkeypatch.setattr(TwinEngines, "send", counting_send)
    wl = make_workload(tmp_path / "wl.jsonl", sessions=4, turns=5, output=20, think_s=1.0)
    res = simulate_level(load_profile("small"), load_workload(wl), 3, 20.0, 2.0)
    assert calls["seal"] == calls["judge"] == 1
    assert calls["send"] == res.records > 0
    assert res.summary is judged[0].summary
    assert judged[0].manifest.target == "twin://in-process" and judged[0].manifest.simulated
    assert judged[0].manifest.client_health is not None  # the real close's facts, stamped


def test_records_in_memory_are_analysed_as_the_written_directory(tmp_path: Path) -> None:
    """The twin hands its records to the analysis in memory; a kept directory of the same
    level, read back from its files, gives the same summary to the last digit."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=4, turns=5, output=20, think_s=1.0)
    w, profile = load_workload(wl), load_profile("small")
    mem = simulate_level(profile, w, 4, 20.0, 2.0, seed=5)
    kept = simulate_level(profile, w, 4, 20.0, 2.0, seed=5, out_dir=tmp_path / "run")
    assert mem.run_dir is None and kept.run_dir == tmp_path / "run"
    assert (tmp_path / "run" / "requests.jsonl").stat().st_size > 0
    a = mem.summary.model_dump(exclude={"runs", "validity"})
    b = kept.summary.model_dump(exclude={"runs", "validity"})
    assert a == b
    assert mem.records == kept.records > 0
