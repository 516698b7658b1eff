"""A loopback OpenAI-style server with one misbehaviour per mode, and what the
client must record for each (status, error kind).

Every mode answers ``/v1/models`` and ``/metrics`` normally, so a whole run gets
past the probes; ``/v1/completions`` misbehaves. The server logs the
``X-Request-Id`` of every completion request it received (``seen``), so a test
can check that each one has exactly one client record. The ``redirect`` mode
points at a second server (``elsewhere``) that would answer perfectly: it must
never be asked anything.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field

import orjson
from aiohttp import web

__all__ = ["EXPECTED", "MODEL", "Hostile", "hostile_server", "sse_chunk"]

MODEL = "hostile/m"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

EXPECTED: dict[str, tuple[str, str | None]] = {
    "redirect": ("error", "redirect"),
    "gzip": ("error", "malformed"),
    "gzip_unlabelled": ("error", "malformed"),
    "done_then_hang": ("ok", None),
    "done_then_junk": ("ok", None),
    "absurd_usage": ("error", "bad_usage"),
    "cached_above_prompt": ("error", "bad_usage"),
    "negative_usage": ("error", "bad_usage"),
    "usage_above_ids": ("error", "bad_usage"),
    "double_count": ("ok", None),
    "no_data_prefix": ("error", "malformed"),
    "garbage": ("error", "malformed"),
    "stall_first": ("timeout", "timeout_first_token"),
    "stall_mid": ("timeout", "timeout_itl"),
}
"""(status, error kind) the client must record for every request in each mode."""


def sse_chunk(n: int, *, ids: bool = True, usage: dict[str, object] | None = None,
              finish: str | None = None, text: str = "t") -> bytes:
    """One completions event carrying the ``n``-th output token."""
    choice: dict[str, object] = {"index": 0, "text": text, "finish_reason": finish}
    if ids:
        choice["token_ids"] = [100 + n]
    obj: dict[str, object] = {"id": "c", "object": "text_completion", "model": MODEL,
                              "choices": [choice]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _usage(prompt: int, completion: int, cached: int | None = None) -> dict[str, object]:
    u: dict[str, object] = {"prompt_tokens": prompt, "completion_tokens": completion,
                            "total_tokens": prompt + completion}
    if cached is not None:
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    return u


async def _asked(request: web.Request) -> int:
    """``max_tokens`` of the request body (the client forces the output length)."""
    raw = await request.read()
    try:
        body = orjson.loads(raw)
        return max(1, int(body.get("max_tokens", 4)))
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return 4


async def _sse(request: web.Request, **headers: str) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **headers})
    await resp.prepare(request)
    return resp


def _good_stream(n: int, final_usage: dict[str, object] | None = None,
                 cached: int = 0) -> bytes:
    """A correct vLLM-like answer of ``n`` tokens with ids, then usage, then [DONE]."""
    body = b"".join(sse_chunk(i) for i in range(n))
    usage = final_usage if final_usage is not None else _usage(8, n, cached)
    return body + b"data: " + orjson.dumps({"id": "c", "choices": [], "usage": usage}) \
        + b"\n\ndata: [DONE]\n\n"


async def _hang() -> None:
    await asyncio.sleep(3600)


def _handlers(elsewhere: str) -> dict[str, Handler]:
    async def redirect(request: web.Request) -> web.StreamResponse:
        await request.read()
        raise web.HTTPTemporaryRedirect(f"{elsewhere}/v1/completions")

    async def gzip_labelled(request: web.Request) -> web.StreamResponse:
        n = await _asked(request)
        return web.Response(body=gzip.compress(_good_stream(n), mtime=0),
                            headers={"Content-Type": "text/event-stream",
                                     "Content-Encoding": "gzip"})

    async def gzip_unlabelled(request: web.Request) -> web.StreamResponse:
        """A proxy that compresses and forgets to say so: bytes, not SSE."""
        n = await _asked(request)
        resp = await _sse(request)
        await resp.write(gzip.compress(_good_stream(n), mtime=0))
        return resp

    async def done_then_hang(request: web.Request) -> web.StreamResponse:
        resp = await _sse(request)
        await resp.write(_good_stream(await _asked(request)))
        await _hang()
        return resp

    async def done_then_junk(request: web.Request) -> web.StreamResponse:
        resp = await _sse(request)
        await resp.write(_good_stream(await _asked(request)))
        await resp.write(b"data: {not json\n\n" + sse_chunk(99) * 50)
        await _hang()
        return resp

    def usage_mode(make: Callable[[int], dict[str, object]]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            n = await _asked(request)
            resp = await _sse(request)
            await resp.write(_good_stream(n, final_usage=make(n)))
            return resp
        return handler

    async def usage_above_ids(request: web.Request) -> web.StreamResponse:
        """Fewer token ids than usage claims, within what was asked."""
        n = await _asked(request)
        resp = await _sse(request)
        got = max(1, n - 1)
        await resp.write(_good_stream(got, final_usage=_usage(8, got + 1)))
        return resp

    async def double_count(request: web.Request) -> web.StreamResponse:
        """Token ids on every chunk and usage on the last chunk that also has a choice."""
        n = await _asked(request)
        resp = await _sse(request)
        body = b"".join(sse_chunk(i) for i in range(n - 1))
        body += sse_chunk(n - 1, usage=_usage(8, n), finish="length")
        await resp.write(body + b"data: [DONE]\n\n")
        return resp

    async def no_data_prefix(request: web.Request) -> web.StreamResponse:
        n = await _asked(request)
        resp = await _sse(request)
        lines = _good_stream(n).replace(b"data: ", b"")
        await resp.write(lines)
        return resp

    async def garbage(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = await _sse(request)
        await resp.write(bytes(range(256)) * 4 + b"\n\x8b\x1f\x00junk:\xff\n")
        return resp

    async def stall_first(request: web.Request) -> web.StreamResponse:
        await request.read()
        await _sse(request)
        await _hang()
        raise AssertionError("unreachable")

    async def stall_mid(request: web.Request) -> web.StreamResponse:
        await _asked(request)
        resp = await _sse(request)
        await resp.write(sse_chunk(0) + sse_chunk(1))
        await _hang()
        return resp

    return {
        "redirect": redirect, "gzip": gzip_labelled, "gzip_unlabelled": gzip_unlabelled,
        "done_then_hang": done_then_hang, "done_then_junk": done_then_junk,
        "absurd_usage": usage_mode(lambda n: _usage(8, 10**15)),
        "cached_above_prompt": usage_mode(lambda n: _usage(8, n, cached=9)),
        "negative_usage": usage_mode(lambda n: _usage(8, n, cached=-1)),
        "usage_above_ids": usage_above_ids,
        "double_count": double_count, "no_data_prefix": no_data_prefix, "garbage": garbage,
        "stall_first": stall_first, "stall_mid": stall_mid,
    }


@dataclass
class Hostile:
    """A running hostile server: its URL, the request ids it saw, and the decoy."""

    url: str
    mode: str
    seen: list[str] = field(default_factory=list)
    elsewhere_seen: list[str] = field(default_factory=list)


async def _start(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


def _app(completions: Handler, log: list[str],
         server_info: dict[str, object] | None = None) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": MODEL, "object": "model", "max_model_len": 4096}]})

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text="vllm:num_requests_running 1\n")

    async def logged(request: web.Request) -> web.StreamResponse:
        log.append(request.headers.get("X-Request-Id", ""))
        return await completions(request)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", logged)
    if server_info is not None:
        async def info(request: web.Request) -> web.Response:
            return web.json_response(server_info)

        app.router.add_get("/server_info", info)
    return app


@asynccontextmanager
async def hostile_server(mode: str, server_info: dict[str, object] | None = None,
                         ) -> AsyncIterator[Hostile]:
    """Serve one mode on a free loopback port (and the decoy a redirect points at);
    ``server_info`` is what ``/server_info`` answers (404 when None)."""
    decoy_log: list[str] = []

    async def decoy(request: web.Request) -> web.StreamResponse:
        resp = await _sse(request)
        await resp.write(_good_stream(await _asked(request)))
        return resp

    decoy_runner, elsewhere = await _start(_app(decoy, decoy_log))
    try:
        state = Hostile(url="", mode=mode, elsewhere_seen=decoy_log)
        runner, url = await _start(_app(_handlers(elsewhere)[mode], state.seen, server_info))
        state.url = url
        try:
            yield state
        finally:
            await runner.cleanup()
    finally:
        await decoy_runner.cleanup()


@contextmanager
def serving(mode: str, server_info: dict[str, object] | None = None) -> Iterator[Hostile]:
    """The hostile server on its own loop in a thread (the command runs its own loop)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    box: list[Hostile] = []
    failed: list[BaseException] = []

    async def serve() -> None:
        try:
            async with hostile_server(mode, server_info) as srv:
                box.append(srv)
                ready.set()
                await stop.wait()
        except BaseException as exc:  # surfaced to the test below
            failed.append(exc)
            ready.set()
        finally:  # handlers still hanging on purpose
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

    # the server's own complaints about clients that hung up are not the command's output
    server_log = logging.getLogger("aiohttp.server")
    was_disabled = server_log.disabled
    server_log.disabled = True

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    try:
        ready.wait(10)
        if failed or not box:
            raise RuntimeError(f"hostile server did not start: {failed}")
        yield box[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
        server_log.disabled = was_disabled
