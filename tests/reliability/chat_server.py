"""A loopback server for chat mode's preflight (``/tokenize``, ``/detokenize``) that
misbehaves in one way per mode, run on its own thread so that a CLI child process
can be pointed at it; it counts what it was asked."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import orjson
from aiohttp import web

__all__ = ["ChatServer", "chat_server"]

MODEL = "hostile/chat"


@dataclass
class ChatServer:
    url: str = ""
    asked: Counter[str] = field(default_factory=Counter)


def _app(mode: str, state: ChatServer) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": MODEL, "object": "model", "max_model_len": 4096}]})

    async def tokenize(request: web.Request) -> web.StreamResponse:
        state.asked["tokenize"] += 1
        if mode == "huge_tokenize":
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            await resp.write(b'{"tokens": [' + b"1, " * (1 << 20))
            for _ in range(60):  # 60 MiB more, never closed
                await resp.write(b"1, " * (1 << 20) + b" " * (1 << 20))
            return resp
        return web.json_response({"tokens": [10]})

    async def detokenize(request: web.Request) -> web.Response:
        state.asked["detokenize"] += 1
        if mode == "slow_empty":
            await asyncio.sleep(0.2)
        return web.Response(body=orjson.dumps({"prompt": ""}),
                            content_type="application/json")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    return app


@contextmanager
def chat_server(mode: str) -> Iterator[ChatServer]:
    """Serve ``mode`` on a free loopback port from a background thread."""
    state = ChatServer()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runner = web.AppRunner(_app(mode, state), access_log=None, shutdown_timeout=0.2)

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        ready.set()

    def serve() -> None:
        loop.run_until_complete(start())
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10), "the chat server did not start"
    try:
        yield state
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
