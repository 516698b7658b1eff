"""The completion stream's own HTTP/1.1 pool (``replay.client._wire``): keep-alive
reuse, the connection cap, no reuse of a connection whose answer did not end
cleanly, cancellation, and closing with the session; under asyncio and uvloop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
import pytest
import uvloop
from aiohttp import web

from replay.client._stream import StreamOutcome, Timeouts, make_session, stream_request, wire_pool
from tests.support.servers import serve_app

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def _event(i: int) -> bytes:
    return b"data: " + orjson.dumps({"choices": [{"index": 0, "text": "y", "token_ids": [i]}]}) \
        + b"\n\n"


class _Server:
    """Counts the connections each request came on, and how many were open at once."""

    def __init__(self) -> None:
        self.peers: list[object] = []
        self.open_now = 0
        self.open_max = 0

    async def stream(self, request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        self.peers.append(request.transport.get_extra_info("peername"))
        self.open_now += 1
        self.open_max = max(self.open_max, self.open_now)
        try:
            n = int(request.query.get("n", "5"))
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            if request.query.get("close"):
                resp.force_close()
            await resp.prepare(request)
            for i in range(n):
                await resp.write(_event(i))
                await asyncio.sleep(float(request.query.get("gap", "0")))
            if request.query.get("cut"):
                request.transport.close()
                return resp
            await resp.write(b"data: [DONE]\n\n")
            return resp
        finally:
            self.open_now -= 1


def _serve(loop: str, fn: Callable[[str, _Server], Awaitable[None]]) -> _Server:
    server = _Server()

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/completions", server.stream)
        async with serve_app(app) as base:
            await fn(f"{base}/v1/completions", server)

    runner = asyncio.Runner(loop_factory=LOOPS[loop])
    with runner:
        runner.run(main())
    return server


async def _one(session: object, url: str, timeouts: Timeouts | None = None) -> StreamOutcome:
    out = StreamOutcome()
    await stream_request(session, url, b"{}", {"Content-Type": "application/json"},  # type: ignore[arg-type]
                         timeouts or Timeouts(), out)
    return out


@pytest.mark.sim
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_sequential_requests_reuse_one_connection(loop: str) -> None:
    outs: list[StreamOutcome] = []

    async def go(url: str, server: _Server) -> None:
        async with make_session(4) as session:
            for _ in range(6):
                outs.append(await _one(session, url))

    server = _serve(loop, go)
    assert [o.status for o in outs] == ["ok"] * 6
    assert [o.streamed_tokens for o in outs] == [5] * 6
    assert len(server.peers) == 6 and len(set(server.peers)) == 1


@pytest.mark.sim
@pytest.mark.parametrize("query", ["close=1", "cut=1"])
def test_a_connection_is_not_reused_after_close_or_a_cut_answer(query: str) -> None:
    outs: list[StreamOutcome] = []

    async def go(url: str, server: _Server) -> None:
        async with make_session(4) as session:
            outs.append(await _one(session, f"{url}?{query}"))
            outs.append(await _one(session, url))

    server = _serve("uvloop", go)
    assert outs[1].status == "ok"
    if query == "cut=1":
        assert (outs[0].status, outs[0].error_kind) == ("error", "disconnect")
    else:
        assert outs[0].status == "ok"
    assert len(set(server.peers)) == 2


@pytest.mark.sim
def test_the_cap_bounds_connections_in_use() -> None:
    outs: list[StreamOutcome] = []

    async def go(url: str, server: _Server) -> None:
        async with make_session(2) as session:
            outs.extend(await asyncio.gather(*(_one(session, f"{url}?gap=0.01")
                                               for _ in range(6))))

    server = _serve("uvloop", go)
    assert [o.status for o in outs] == ["ok"] * 6
    assert server.open_max == 2 and len(set(server.peers)) == 2


@pytest.mark.sim
def test_cancelling_a_request_closes_its_connection_and_frees_its_slot() -> None:
    outs: list[StreamOutcome] = []

    async def go(url: str, server: _Server) -> None:
        async with make_session(1) as session:
            task = asyncio.create_task(_one(session, f"{url}?n=100&gap=0.05"))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            outs.append(await _one(session, url))  # the one slot is free again

    server = _serve("uvloop", go)
    assert outs[0].status == "ok"
    assert len(set(server.peers)) == 2


@pytest.mark.sim
def test_closing_the_session_closes_the_pool() -> None:
    seen: list[int] = []

    async def go(url: str, server: _Server) -> None:
        session = make_session(4)
        await _one(session, url)
        pool = wire_pool(session)
        conns = list(pool._all)
        await session.close()
        seen.append(len(conns))
        assert all(c.closed for c in conns)

    _serve("asyncio", go)
    assert seen == [1]


def test_a_plain_aiohttp_session_is_refused() -> None:
    import aiohttp

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(TypeError, match="make_session"):
                await _one(session, "http://127.0.0.1:9/v1/completions")

    asyncio.run(go())
