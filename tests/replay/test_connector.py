"""The streaming connector's fast resume: same bytes and records as aiohttp's own
connector, and flow control still pauses and resumes a socket a reader lags behind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import orjson
from aiohttp import web

from replay.client import _connector
from replay.client._stream import StreamOutcome, Timeouts, make_session, stream_request
from tests.replay.conftest import serve_app

EVENTS = 3000


def _event(i: int) -> bytes:
    body = {"choices": [{"index": 0, "text": "y" * 900, "token_ids": [i]}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def _many(request: web.Request) -> web.StreamResponse:
    """~3 MB of events, written 100 at a time (each write one HTTP chunk)."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for start in range(0, EVENTS, 100):
        await resp.write(b"".join(_event(i) for i in range(start, start + 100)))
    await resp.write(b"data: [DONE]\n\n")
    return resp


async def _with_server(fn: Callable[[str], Awaitable[None]]) -> None:
    app = web.Application()
    app.router.add_post("/v1/completions", _many)
    async with serve_app(app) as base:
        await fn(f"{base}/v1/completions")


def test_the_installed_aiohttp_gets_the_fast_path() -> None:
    async def go() -> None:
        async with make_session(2) as session:
            connector = session.connector
            assert isinstance(connector, _connector.StreamingConnector)
            assert connector.fast_resume

    assert _connector.fast_resume_supported()
    asyncio.run(go())


def test_records_match_aiohttps_own_connector() -> None:
    outcomes: list[StreamOutcome] = []

    async def go(url: str) -> None:
        fast = make_session(2)
        plain = aiohttp.ClientSession(connector=aiohttp.TCPConnector(), auto_decompress=False,
                                      read_bufsize=1 << 20)
        async with fast, plain:
            for session in (fast, plain):
                out = StreamOutcome()
                await stream_request(session, url, b"{}", {}, Timeouts(), out)
                outcomes.append(out)

    asyncio.run(_with_server(go))
    fast, plain = outcomes
    assert fast.status == plain.status == "ok" and fast.done and plain.done
    assert fast.output_ids == plain.output_ids == list(range(EVENTS))
    assert fast.chunk_tokens == plain.chunk_tokens == [1] * EVENTS


def test_a_lagging_reader_pauses_and_resumes_the_socket(monkeypatch: object) -> None:
    calls = {"pause": 0, "resume_paused": 0}
    handler = _connector._FastResumeHandler
    pause, resume = handler.pause_reading, handler.resume_reading

    def counting_pause(self: _connector._FastResumeHandler) -> None:
        calls["pause"] += 1
        pause(self)

    def counting_resume(self: _connector._FastResumeHandler, resume_parser: bool = True) -> None:
        if self._reading_paused:
            calls["resume_paused"] += 1
        resume(self, resume_parser)

    monkeypatch.setattr(handler, "pause_reading", counting_pause)  # type: ignore[attr-defined]
    monkeypatch.setattr(handler, "resume_reading", counting_resume)  # type: ignore[attr-defined]
    got = bytearray()

    async def go(url: str) -> None:
        async with make_session(1, read_bufsize=16 * 1024) as session:
            async with session.post(url, data=b"{}") as resp:
                async for data in resp.content.iter_any():
                    got.extend(data)
                    await asyncio.sleep(0.001)  # fall behind the server

    async def bounded(url: str) -> None:
        await asyncio.wait_for(go(url), 30)  # a socket never resumed fails, not hangs

    asyncio.run(_with_server(bounded))
    expected = b"".join(_event(i) for i in range(EVENTS)) + b"data: [DONE]\n\n"
    assert bytes(got) == expected
    assert calls["pause"] > 0
    assert calls["resume_paused"] >= calls["pause"] - 1
