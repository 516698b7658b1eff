"""Helpers for the simulator tests: run a coroutine, read an SSE stream plainly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp
import orjson

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Stream:
    """Everything a plain client saw of one streamed response."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.events: list[bytes] = []
        self.times: list[float] = []
        self.error: BaseException | None = None
        self.t_headers = 0.0

    @property
    def done(self) -> bool:
        return bool(self.events) and self.events[-1] == b"[DONE]"

    def json_events(self) -> list[dict[str, Any]]:
        out = []
        for e in self.events:
            if e != b"[DONE]":
                out.append(orjson.loads(e))
        return out

    def token_ids(self) -> list[int]:
        ids: list[int] = []
        for ev in self.json_events():
            for ch in ev.get("choices", []):
                ids.extend(ch.get("token_ids") or [])
        return ids


async def stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
                 headers: dict[str, str] | None = None) -> Stream:
    """POST and split the body into SSE ``data:`` events, stamping each arrival."""
    out = Stream()
    t0 = time.monotonic()
    try:
        async with session.post(url, json=body, headers=headers) as resp:
            out.status = resp.status
            out.headers = dict(resp.headers)
            out.t_headers = time.monotonic() - t0
            buf = b""
            async for data in resp.content.iter_any():
                buf += data
                while b"\n\n" in buf:
                    frame, buf = buf.split(b"\n\n", 1)
                    if frame.startswith(b"data: "):
                        out.events.append(frame[6:])
                        out.times.append(time.monotonic())
    except aiohttp.ClientError as exc:
        out.error = exc
    return out


def body(prompt: list[int] | str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "return_token_ids": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}, **extra}
