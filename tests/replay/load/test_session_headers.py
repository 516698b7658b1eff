"""Session affinity through a router: the session-id headers let a consistent-hash
router keep each session on one replica.

A small router (an aiohttp proxy on 127.0.0.1) sits in front of two simulated
servers: a request with ``X-Session-ID`` goes to the replica its value hashes to,
one without it to the next replica in turn. The client sees one target and so
predicts prefix hits for one server. With the header every session's requests
land on one replica (read from each server's truth log) and every admitted
request hit exactly what the client predicted; with ``--no-session-header`` the
same run scatters sessions: requests hit less than predicted and the hit share
drops (only somewhat: round robin sends turn t+2 back where turn t warmed). The sessions share no
prefix with each other, so which of two concurrent requests a server schedules
first changes no hit count: each session's turns are sequential.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web

from analysis import RequestRecord, RunManifest
from replay.cli import main
from replay.servers.sim import SimServerProcess, TruthRecord
from tests.replay.conftest import make_workload
from tests.support.servers import big_kv_profile

_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


class HashRouter:
    """A consistent-hash router: ``X-Session-ID`` picks the replica (crc32 mod n);
    without it, round robin. Runs its own loop in a thread."""

    def __init__(self, upstreams: list[str], header: str = "X-Session-ID") -> None:
        self.upstreams = upstreams
        self.header = header
        self._turn = itertools.count()
        self.url = ""
        self.seen: list[str | None] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._stop: asyncio.Event | None = None

    def _pick(self, request: web.Request) -> str:
        key = request.headers.get(self.header)
        self.seen.append(key)
        if key is None:
            return self.upstreams[next(self._turn) % len(self.upstreams)]
        return self.upstreams[zlib.crc32(key.encode()) % len(self.upstreams)]

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        upstream = self._pick(request)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        body = await request.read()
        assert self._client is not None
        async with self._client.request(request.method, upstream + request.path_qs,
                                        headers=headers, data=body) as up:
            resp = web.StreamResponse(status=up.status, headers={
                k: v for k, v in up.headers.items() if k.lower() not in _HOP})
            await resp.prepare(request)
            with contextlib.suppress(ConnectionResetError):  # the client cut it (run's end)
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
            return resp

    async def _main(self) -> None:
        self._client = aiohttp.ClientSession(auto_decompress=False)
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()
        await self._client.close()

    def _serve(self) -> None:
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    def __enter__(self) -> HashRouter:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


@contextlib.contextmanager
def _routed(tmp: Path, tag: str) -> Iterator[tuple[HashRouter, list[Path]]]:
    """Two simulators with a KV cache that never evicts here, behind one router."""
    profile = big_kv_profile(tmp)
    with contextlib.ExitStack() as stack:
        urls, logs = [], []
        for k in range(2):
            log = tmp / f"truth-{tag}-{k}.jsonl"
            srv = stack.enter_context(SimServerProcess(str(profile), "auto", time_scale=4.0,
                                                       truth_path=str(log)))
            urls.append(srv.url)
            logs.append(log)
        yield stack.enter_context(HashRouter(urls)), logs


def _truth(log: Path) -> list[TruthRecord]:
    if not log.exists():
        return []
    return [TruthRecord.model_validate(orjson.loads(line))
            for line in log.read_bytes().splitlines() if line.strip()]


def _run(tmp: Path, tag: str, *extra: str) -> tuple[list[RequestRecord], list[list[TruthRecord]],
                                                   RunManifest, HashRouter]:
    wl = make_workload(tmp / "wl.jsonl", sessions=4, turns=6, output=16, think_s=0.05,
                       shared_blocks=0, subagent_every=2)
    out = tmp / f"run-{tag}"
    with _routed(tmp, tag) as (router, logs):
        code = main(["run", "--workload", str(wl), "--target", router.url, "--users", "4",
                     "--duration", "2", "--warmup", "0", "--drain", "10", "--out", str(out),
                     "--quiet", "--metrics-interval", "0", *extra])
    assert code in (0, 3)  # 3: a starved simulator on a busy machine (stamped invalid)
    recs = [RequestRecord.model_validate(orjson.loads(line))
            for line in (out / "requests.jsonl").read_bytes().splitlines()]
    manifest = RunManifest.model_validate(orjson.loads((out / "run.json").read_bytes()))
    return recs, [_truth(log) for log in logs], manifest, router


def _replica_of(truths: list[list[TruthRecord]]) -> dict[str, int]:
    return {t.request_id: k for k, ts in enumerate(truths) for t in ts
            if t.endpoint.endswith("completions")}


def _hit_share(truths: list[list[TruthRecord]]) -> float:
    done = [t for ts in truths for t in ts if t.scheduled_ns is not None]
    return sum(t.cached_tokens for t in done) / sum(t.prompt_tokens for t in done)


@pytest.mark.sim
@pytest.mark.integration  # simulators in subprocesses
def test_session_header_keeps_each_session_on_one_replica(tmp_path: Path) -> None:
    recs, truths, manifest, router = _run(tmp_path, "hdr")
    assert manifest.session_headers == ["X-Session-ID", "X-Correlation-ID"]
    where = _replica_of(truths)
    assert {r.id for r in recs if r.http_status is not None} <= set(where)
    on: dict[tuple[int, int], set[int]] = {}
    for r in recs:
        if r.id in where:
            on.setdefault((r.user, r.session_instance), set()).add(where[r.id])
    assert len(on) >= 4 and all(len(v) == 1 for v in on.values()), on
    assert {next(iter(v)) for v in on.values()} == {0, 1}  # the hash spread the sessions
    assert any(r.agent is not None for r in recs if r.id in where)  # subagents followed
    ids = {key for key in router.seen if key is not None}
    assert len(ids) == len(on)  # one id per session instance, subagents sending their parent's
    by_id = {r.id: r for r in recs}
    admitted = [t for ts in truths for t in ts if t.scheduled_ns is not None]
    assert len(admitted) >= 10
    for t in admitted:  # the one-server prediction holds on whichever replica it was
        assert by_id[t.request_id].expected_cached_tokens == t.cached_tokens, t.request_id
    assert _hit_share(truths) > 0.4


@pytest.mark.sim
@pytest.mark.integration  # simulators in subprocesses
def test_without_the_header_sessions_scatter_and_hits_drop(tmp_path: Path) -> None:
    _, with_truth, _, _ = _run(tmp_path, "hdr")
    recs, truths, manifest, router = _run(tmp_path, "none", "--no-session-header")
    assert manifest.session_headers == []
    assert set(router.seen) == {None}
    where = _replica_of(truths)
    on: dict[tuple[int, int], set[int]] = {}
    for r in recs:
        if r.id in where:
            on.setdefault((r.user, r.session_instance), set()).add(where[r.id])
    assert any(len(v) == 2 for v in on.values())
    # round robin sends a turn to the replica its previous turn did not warm: it hits
    # less than the one-server prediction (it may still hit what turn t-2 left there)
    by_id = {r.id: r for r in recs}
    admitted = [t for ts in truths for t in ts if t.scheduled_ns is not None]
    short = [t for t in admitted if t.cached_tokens < (by_id[t.request_id].expected_cached_tokens
                                                       or 0)]
    assert len(short) >= 3
    assert _hit_share(truths) < _hit_share(with_truth)


def test_custom_header_names_and_bad_names(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    wl = make_workload(tmp_path / "wl.jsonl")
    code = main(["run", "--workload", str(wl), "--target", "http://127.0.0.1:9", "--users",
                 "1", "--duration", "1", "--out", str(tmp_path / "r"),
                 "--session-header", "bad name"])
    assert code == 2
    assert "--session-header" in capsys.readouterr().err
    code = main(["run", "--workload", str(wl), "--target", "http://127.0.0.1:9", "--users",
                 "1", "--duration", "1", "--out", str(tmp_path / "r"),
                 "--session-header", "X-A", "--no-session-header"])
    assert code == 2
    assert "contradict" in capsys.readouterr().err


def test_chosen_names_carry_the_id_and_the_default_is_both() -> None:
    from replay.load import RunSettings
    from replay.load._context import LaneSettings

    base = {"target": "http://127.0.0.1:8000", "duration_s": 1.0}
    assert RunSettings(**base).session_headers == ("X-Session-ID", "X-Correlation-ID")
    assert RunSettings(**base, no_session_header=True).session_headers == ()
    chosen = RunSettings(**base, session_header=("x-dynamo-session-id", "X-Route"))
    assert chosen.session_headers == ("x-dynamo-session-id", "X-Route")
    fixed = LaneSettings(urls=("u",), headers={"Content-Type": "application/json"},
                         spec=None, timeouts=None, block_size=16, t0_ns=0,  # type: ignore[arg-type]
                         warmup_end_ns=0, window_end_ns=0, issue_end_ns=0, run_tag="r",
                         session_headers=chosen.session_headers)
    assert fixed.chain_headers("r-3-0") == {"Content-Type": "application/json",
                                            "x-dynamo-session-id": "r-3-0", "X-Route": "r-3-0"}
    none = LaneSettings(urls=("u",), headers={"A": "b"}, spec=None, timeouts=None,  # type: ignore[arg-type]
                        block_size=16, t0_ns=0, warmup_end_ns=0, window_end_ns=0,
                        issue_end_ns=0, run_tag="r")
    assert none.chain_headers("r-3-0") == {"A": "b"}
