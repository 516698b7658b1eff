"""The streaming client against a tiny aiohttp server: every failure becomes data."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import orjson
import pytest
from aiohttp import web

from replay.client._stream import StreamOutcome, Timeouts, make_session, stream_request
from tests.support.servers import serve_app

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _chunk(ids: list[int], sent: int) -> bytes:
    body = {"choices": [{"index": 0, "text": "x" * len(ids), "token_ids": ids}],
            "usage": {"prompt_tokens": 5, "completion_tokens": sent + len(ids)}}
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def _open(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    return resp


async def ok(request: web.Request) -> web.StreamResponse:
    assert request.headers["X-Request-Id"] == "rid-1"
    resp = await _open(request)
    await resp.write(_chunk([7], 0))
    await asyncio.sleep(0.01)
    await resp.write(_chunk([8, 9], 1) + _chunk([10], 3))
    final = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4,
                                      "prompt_tokens_details": {"cached_tokens": 0}}}
    await resp.write(b"data: " + orjson.dumps(final) + b"\n\ndata: [DONE]\n\n")
    return resp


async def echo(request: web.Request) -> web.StreamResponse:
    """vLLM's return_token_ids: the first chunk also echoes the prompt's ids."""
    resp = await _open(request)
    first = {"choices": [{"index": 0, "text": "a", "token_ids": [11],
                          "prompt_token_ids": list(range(20_000))}],
             "usage": {"prompt_tokens": 20_000, "completion_tokens": 1}}
    await resp.write(b"data: " + orjson.dumps(first) + b"\n\n" + _chunk([12, 13], 1)
                     + b"data: [DONE]\n\n")
    return resp


async def plain_text(request: web.Request) -> web.StreamResponse:
    """No token ids, no continuous usage: one token per content chunk."""
    resp = await _open(request)
    for _ in range(3):
        await resp.write(b'data: {"choices": [{"text": "a"}]}\n\n')
    await resp.write(b"data: [DONE]\n\n")
    return resp


async def http500(request: web.Request) -> web.StreamResponse:
    return web.json_response({"error": {"message": "boom", "code": 500}}, status=500)


async def http429(request: web.Request) -> web.StreamResponse:
    return web.json_response({"error": {"message": "slow down"}}, status=429,
                             headers={"Retry-After": "3"})


async def stream_error(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    await resp.write(_chunk([1], 0))
    await resp.write(b'data: {"error": {"message": "oops", "type": "x", "code": 500}}\n\n'
                     b"data: [DONE]\n\n")
    return resp


async def disconnect(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    await resp.write(_chunk([1], 0))
    await asyncio.sleep(0.01)
    assert request.transport is not None
    request.transport.close()
    return resp


async def malformed(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    await resp.write(_chunk([1], 0) + b'data: {"choices": [{"text": \n\ndata: [DONE]\n\n')
    return resp


async def no_done(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    await resp.write(_chunk([1], 0))
    return resp


async def stall_first(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    await asyncio.sleep(5)
    return resp


async def stall_mid(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    await resp.write(_chunk([1], 0))
    await asyncio.sleep(5)
    return resp


async def trickle(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    for i in range(200):
        await resp.write(_chunk([1], i))
        await asyncio.sleep(0.02)
    return resp


async def long_line(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    await resp.write(b"data: " + b"z" * 200_000)
    await asyncio.sleep(5)
    return resp


ROUTES: dict[str, Handler] = {
    "/ok": ok, "/echo": echo, "/plain": plain_text, "/500": http500, "/429": http429,
    "/stream_error": stream_error, "/disconnect": disconnect, "/malformed": malformed,
    "/no_done": no_done, "/stall_first": stall_first, "/stall_mid": stall_mid,
    "/trickle": trickle, "/long_line": long_line,
}


async def _with_server(fn: Callable[[str], Awaitable[None]]) -> None:
    app = web.Application()
    for path, handler in ROUTES.items():
        app.router.add_post(path, handler)
    async with serve_app(app) as base:
        await fn(base)


def _run(path: str, timeouts: Timeouts | None = None, max_line: int = 1 << 20) -> StreamOutcome:
    out = StreamOutcome()

    async def go(base: str) -> None:
        async with make_session(4) as session:
            await stream_request(session, base + path, b"{}", {"X-Request-Id": "rid-1"},
                                 timeouts or Timeouts(), out, max_line_bytes=max_line)

    asyncio.run(_with_server(go))
    return out


@pytest.mark.sim
def test_ok_stream_counts_tokens_and_keeps_usage() -> None:
    out = _run("/ok")
    assert out.status == "ok" and out.error_kind is None and out.done
    assert out.chunk_tokens == [1, 2, 1]
    assert out.output_ids == [7, 8, 9, 10]
    assert out.usage is not None and out.usage["completion_tokens"] == 4
    assert out.first_ns is not None and out.last_ns is not None
    assert out.sent_ns < out.first_ns < out.last_ns
    assert out.chunk_ns[1] == out.chunk_ns[2]  # arrived in one read


@pytest.mark.sim
def test_prompt_echo_is_skipped_not_counted() -> None:
    out = _run("/echo")
    assert out.status == "ok"
    assert out.output_ids == [11, 12, 13] and out.chunk_tokens == [1, 2]


@pytest.mark.sim
def test_plain_text_chunks_count_one_each() -> None:
    out = _run("/plain")
    assert out.status == "ok" and out.streamed_tokens == 3


@pytest.mark.sim
@pytest.mark.parametrize(("path", "status", "kind", "http"), [
    ("/500", "error", "http_500", 500),
    ("/429", "error", "http_429", 429),
    ("/stream_error", "error", "stream_error", 200),
    ("/disconnect", "error", "disconnect", 200),
    ("/malformed", "error", "malformed", 200),
    ("/no_done", "error", "disconnect", 200),
    ("/missing", "error", "http_404", 404),
])
def test_failures_become_records(path: str, status: str, kind: str, http: int) -> None:
    out = _run(path)
    assert (out.status, out.error_kind, out.http_status) == (status, kind, http)


@pytest.mark.sim
def test_429_message_records_retry_after() -> None:
    out = _run("/429")
    assert out.error_message is not None and "Retry-After: 3" in out.error_message


@pytest.mark.sim
def test_stream_error_message() -> None:
    out = _run("/stream_error")
    assert out.error_message == "oops (code 500)"
    assert out.chunk_tokens == [1]


@pytest.mark.sim
@pytest.mark.parametrize(("path", "timeouts", "kind"), [
    ("/stall_first", Timeouts(first_token_s=0.2), "timeout_first_token"),
    ("/stall_mid", Timeouts(itl_s=0.2), "timeout_itl"),
    ("/trickle", Timeouts(itl_s=1.0, total_s=0.3), "timeout_total"),
])
def test_timeouts_have_kinds(path: str, timeouts: Timeouts, kind: str) -> None:
    out = _run(path, timeouts)
    assert (out.status, out.error_kind) == ("timeout", kind)


@pytest.mark.sim
def test_long_line_is_bounded() -> None:
    out = _run("/long_line", max_line=50_000)
    assert (out.status, out.error_kind) == ("error", "line_too_long")


@pytest.mark.sim
def test_connect_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = StreamOutcome()

    async def go() -> None:
        async with make_session(1) as session:
            await stream_request(session, f"http://127.0.0.1:{port}/x", b"{}", {},
                                 Timeouts(), out)

    asyncio.run(go())
    assert (out.status, out.error_kind, out.http_status) == ("error", "connect", None)


@pytest.mark.sim
def test_cancellation_is_recorded_then_raised() -> None:
    out = StreamOutcome()
    raised = []

    async def go(base: str) -> None:
        async with make_session(1) as session:
            task = asyncio.create_task(stream_request(session, base + "/trickle", b"{}", {},
                                                      Timeouts(), out))
            await asyncio.sleep(0.15)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                raised.append(True)

    asyncio.run(_with_server(go))
    assert raised == [True]
    assert out.status == "cancelled"
    assert 0 < out.streamed_tokens < 200


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out.add(sub)
        out |= _subclasses(sub)
    return out


def test_every_aiohttp_client_error_is_mapped() -> None:
    """No aiohttp exception falls through to the catch-all ``internal`` kind."""
    import aiohttp

    from replay.client._failures import classify as _classify

    kinds = {}
    for cls in _subclasses(aiohttp.ClientError) | {aiohttp.ClientError}:
        exc = cls.__new__(cls)
        kinds[cls.__name__] = _classify(exc, got_response=True)
    assert all(kind != "internal" for _, kind in kinds.values()), kinds
    assert kinds["ServerDisconnectedError"] == ("error", "disconnect")
    assert kinds["ConnectionTimeoutError"] == ("timeout", "timeout_connect")
    assert kinds["SocketTimeoutError"] == ("timeout", "timeout_itl")
    assert _classify(aiohttp.http_exceptions.LineTooLong(b"x", "1"), got_response=True) == (
        "error", "malformed")
    assert _classify(ConnectionRefusedError(), got_response=False) == ("error", "connect")
