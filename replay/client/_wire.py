"""HTTP/1.1 for the completion stream: pooled keep-alive connections, framed by httptools.

Why not aiohttp for this one request: at a streamed event per HTTP chunk, aiohttp
spends four Python calls per chunk in its ``StreamReader`` (feed, chunk-start,
chunk-end, hand-out) plus a task wake-up per socket read; that was more of the
client's CPU than decoding the events (``bench/README.md``). Here httptools (the
llhttp bindings uvicorn uses) frames the response in C, its body callback is a
bare ``list.append``, and the events are decoded inside ``data_received``
(:class:`replay.client._events.EventReader`, driven by the request's
:class:`replay.client._exchange.Exchange`), so a read costs one parse call and no
task switch. aiohttp still serves every other request (probes, ``/metrics``).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

import httptools
from multidict import CIMultiDict
from yarl import URL

from analysis.schema import ErrorKind
from replay.client._exchange import Exchange

__all__ = ["WirePool"]


@dataclass(frozen=True, slots=True)
class _Origin:
    key: tuple[str, str, int]
    host: str
    port: int
    tls: bool
    head: bytes
    """``POST path HTTP/1.1`` and the Host line."""


@functools.lru_cache(maxsize=256)
def _origin(url: str) -> _Origin:
    u = URL(url)
    if u.scheme not in ("http", "https") or not u.raw_host:
        raise ValueError(f"not an http(s) URL: {url[:200]}")
    host = u.raw_host
    port = u.port or (443 if u.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    if u.explicit_port is not None:
        shown = f"{shown}:{port}"
    head = f"POST {u.raw_path_qs or '/'} HTTP/1.1\r\nHost: {shown}\r\n".encode()
    return _Origin((u.scheme, host, port), host, port, u.scheme == "https", head)


def _header_lines(headers: dict[str, str], body_len: int) -> bytes:
    lines = ["Accept: */*", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if any(c in name or c in value for c in "\r\n\x00"):
            raise ValueError(f"header {name[:40]!r} holds a line break")
        if name.lower() not in ("host", "content-length", "accept-encoding", "accept"):
            lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {body_len}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class _Wire(asyncio.Protocol):
    """One keep-alive connection; one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.ex: Exchange | None = None
        self.closed = False
        self._pieces: list[bytes] = []
        self.on_body: Callable[[bytes], None] = self._pieces.append
        self._headers: CIMultiDict[str] = CIMultiDict()
        self._reason = b""
        self._complete = False
        self._keep_alive = False
        self._eof_body = False
        self.parser = httptools.HttpResponseParser(self)
        self.on_return: Callable[[_Wire], None] | None = None

    # -- asyncio ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        ex = self.ex
        if ex is None:  # bytes on an idle connection: it cannot be trusted again
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            ex.broken("the server switched protocols")
        except httptools.HttpParserError as exc:
            self._pieces.clear()
            ex.broken(f"not an HTTP/1.1 answer: {exc}"[:300])
            return
        pieces = self._pieces
        if pieces:
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            pieces.clear()
            ex.body(data)
        if self._complete:
            self._complete = False
            if self.ex is ex:
                ex.complete(self._keep_alive)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.ex
        if ex is not None:
            pieces = self._pieces
            if pieces:
                ex.body(b"".join(pieces))
                pieces.clear()
            if self.ex is ex:
                ex.lost(exc, self._eof_body)

    # -- httptools ---------------------------------------------------------------------
    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.add(name.decode("latin-1"), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        headers = self._headers
        self._eof_body = ("Content-Length" not in headers and "chunked" not in
                          headers.get("Transfer-Encoding", "").lower())
        if self.ex is not None:
            self.ex.head(self.parser.get_status_code(),
                         self._reason.decode("latin-1", "replace"), headers)

    def on_message_complete(self) -> None:
        self._complete = True
        self._keep_alive = self.parser.should_keep_alive()  # llhttp forgets it after

    # -- the pool's side ---------------------------------------------------------------
    def start(self, ex: Exchange, request: bytes) -> None:
        self.ex = ex
        self._headers = CIMultiDict()
        self._reason = b""
        self._complete = False
        ex.attach(self)
        assert self.transport is not None
        self.transport.write(request)

    def release(self, ex: Exchange, reuse: bool) -> None:
        if self.ex is not ex:
            return
        self.ex = None
        if not reuse or self.closed:
            self.close()
        if self.on_return is not None:
            self.on_return(self)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class WirePool:
    """Keep-alive connections per origin, at most ``limit`` in use (0: no cap)."""

    def __init__(self, limit: int, connect_s: float | None) -> None:
        self.limit = limit
        self.connect_s = connect_s
        self._idle: dict[tuple[str, str, int], list[_Wire]] = {}
        self._all: set[_Wire] = set()
        self._slots: asyncio.Semaphore | None = None
        self._tls: ssl.SSLContext | None = None

    async def exchange(self, url: str, body: bytes, headers: dict[str, str],
                       ex: Exchange) -> None:
        """Send one request and wait until its exchange ends (or the task is cancelled,
        which closes the connection)."""
        origin = _origin(url)
        request = origin.head + _header_lines(headers, len(body)) + body
        slots = self._slot_gate()
        if slots is not None:
            await slots.acquire()
        try:
            conn = self._take_idle(origin.key) or await self._connect(origin, ex)
            if conn is None:
                return
            ex.out.sent_ns = time.monotonic_ns()
            conn.start(ex, request)
            ex.arm()
            try:
                await ex.ended
            except asyncio.CancelledError:
                ex.finish(reuse=False)
                raise
        finally:
            if slots is not None:
                slots.release()

    def close(self) -> None:
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()

    def _slot_gate(self) -> asyncio.Semaphore | None:
        if self.limit and self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        return self._slots

    def _take_idle(self, key: tuple[str, str, int]) -> _Wire | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
            self._all.discard(conn)
        return None

    def _give_back(self, key: tuple[str, str, int], conn: _Wire) -> None:
        if conn.closed:
            self._all.discard(conn)
        else:
            self._idle.setdefault(key, []).append(conn)

    async def _connect(self, origin: _Origin, ex: Exchange) -> _Wire | None:
        """A new connection; a failure is recorded in the outcome (None returned)."""
        loop = asyncio.get_running_loop()
        due, kind = ex.deadline()
        limit_ns = None if self.connect_s is None else time.monotonic_ns() + int(
            self.connect_s * 1e9)
        if limit_ns is not None and (due is None or limit_ns < due):
            due, kind = limit_ns, ErrorKind.TIMEOUT_CONNECT
        when = None if due is None else loop.time() + (due - time.monotonic_ns()) / 1e9
        tls = self._tls_context() if origin.tls else None
        try:
            async with asyncio.timeout_at(when):
                _, conn = await loop.create_connection(
                    _Wire, origin.host, origin.port, ssl=tls,
                    server_hostname=origin.host if tls else None)
        except TimeoutError:
            ex.out.fail("timeout", kind, f"no connection before the {kind[8:]} limit")
            return None
        except OSError as exc:
            ex.out.fail("error", ErrorKind.CONNECT, f"{type(exc).__name__}: {exc}")
            return None
        conn.on_return = functools.partial(self._give_back, origin.key)
        self._all.add(conn)
        return conn

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls
