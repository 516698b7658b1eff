"""One request and its answer on a connection, as a state machine fed by the connection.

An :class:`Exchange` ends exactly once (:meth:`Exchange.finish`): the answer
ended, failed, timed out, or its task was cancelled; only an exchange whose
answer ended cleanly on a connection the server kept alive lets the connection
be reused. Deadlines are one timer per exchange, re-armed lazily: a read only
notes the time of the last token, and the timer, when it fires early, moves
itself to the real deadline (it is moved at once only when the deadline comes
nearer: at the first token, and after ``[DONE]``).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

from multidict import CIMultiDict

from analysis.schema import ErrorKind
from replay.client._failures import http_failure
from replay.client._sse import SSEError

if TYPE_CHECKING:
    from replay.client._events import EventReader
    from replay.client._outcome import StreamOutcome, Timeouts


class Carrier(Protocol):
    """The connection an exchange runs on, as the exchange sees it: told when the
    exchange ends and whether the connection may carry another (``_wire._Wire``)."""

    def release(self, ex: Exchange, reuse: bool) -> None: ...

__all__ = ["Exchange"]

_ERROR_BODY_LIMIT = 64 * 1024
_AFTER_DONE_S = 1.0
"""How long the end of the HTTP body may lag ``[DONE]`` before the client closes."""
_AFTER_DONE_BYTES = 64 * 1024

_HEAD, _EVENTS, _ERROR_BODY, _SETTLE, _ENDED = range(5)


class Exchange:
    """One request and its answer; the outcome is filled in as bytes arrive."""

    __slots__ = ("_budget", "_conn", "_error", "_first_due", "_itl_ns", "_last_tok",
                 "_settle_due", "_timer", "_total_due", "ended", "headers", "loop", "mode",
                 "out", "reader", "reason")

    def __init__(self, out: StreamOutcome, reader: EventReader, timeouts: Timeouts,
                 start_ns: int, loop: asyncio.AbstractEventLoop) -> None:
        self.out = out
        self.reader = reader
        self.loop = loop
        self.ended: asyncio.Future[None] = loop.create_future()
        self.mode = _HEAD
        self.headers: CIMultiDict[str] = CIMultiDict()
        self.reason = ""
        self._conn: Carrier | None = None
        self._error = bytearray()
        self._budget = _AFTER_DONE_BYTES
        self._first_due = _due(start_ns, timeouts.first_token_s)
        self._total_due = _due(start_ns, timeouts.total_s)
        self._itl_ns = None if timeouts.itl_s is None else int(timeouts.itl_s * 1e9)
        grace = _AFTER_DONE_S if timeouts.itl_s is None else min(timeouts.itl_s, _AFTER_DONE_S)
        self._settle_due = int(grace * 1e9)
        self._last_tok = 0
        self._timer: asyncio.TimerHandle | None = None

    # -- deadlines ---------------------------------------------------------------
    def deadline(self) -> tuple[int | None, str]:
        """The next deadline (monotonic ns) and the kind of timeout it would be."""
        if self.mode == _SETTLE:
            return self._settle_due, "after_done"
        if self._last_tok and self._itl_ns is not None:
            due, kind = self._last_tok + self._itl_ns, ErrorKind.TIMEOUT_ITL
        elif self._last_tok:
            due, kind = None, ErrorKind.TIMEOUT_ITL
        else:
            due, kind = self._first_due, ErrorKind.TIMEOUT_FIRST_TOKEN
        if self._total_due is not None and (due is None or self._total_due <= due):
            return self._total_due, ErrorKind.TIMEOUT_TOTAL
        return due, kind

    def arm(self) -> None:
        due, _ = self.deadline()
        if due is not None:
            delay = max(0.0, (due - time.monotonic_ns()) / 1e9)
            self._timer = self.loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.mode == _ENDED:
            return
        due, kind = self.deadline()
        if due is None:
            return
        now = time.monotonic_ns()
        if now < due:
            self._timer = self.loop.call_later((due - now) / 1e9, self._on_timer)
            return
        if self.mode != _SETTLE and not self.out.done:
            self.out.fail("timeout", kind, f"no data before the {kind[8:]} limit")
        self.finish(reuse=False)

    # -- what the connection reports --------------------------------------------
    def attach(self, conn: Carrier) -> None:
        self._conn = conn

    def head(self, status: int, reason: str, headers: CIMultiDict[str]) -> None:
        out = self.out
        out.http_status = status
        self.headers = headers
        self.reason = reason
        if status != 200:
            self.mode = _ERROR_BODY
            return
        encoding = headers.get("Content-Encoding")
        if encoding and encoding.strip().lower() != "identity":
            out.fail("error", ErrorKind.MALFORMED,
                     f"body is {encoding[:40]}-encoded although identity was asked for")
            self.finish(reuse=False)
            return
        self.mode = _EVENTS

    def body(self, data: bytes) -> None:
        mode = self.mode
        if mode == _EVENTS:
            t = time.monotonic_ns()
            reader = self.reader
            seen = reader.counter.streamed
            try:
                stop = reader.feed(data, t)
            except SSEError as exc:
                self.out.fail("error", exc.kind, str(exc))
                self.finish(reuse=False)
                return
            if reader.counter.streamed > seen:
                first = not self._last_tok
                self._last_tok = t
                if first:  # the deadline moves from the first token's to the gap's
                    self._rearm()
            if stop:
                if self.out.done:
                    self.mode = _SETTLE
                    self._settle_due += time.monotonic_ns()
                    self._rearm()
                else:
                    self.finish(reuse=False)
        elif mode == _SETTLE:
            self._budget -= len(data)
            if self._budget <= 0:
                self.finish(reuse=False)
        elif mode == _ERROR_BODY:
            room = _ERROR_BODY_LIMIT - len(self._error)
            self._error += data[:room]
            if len(data) >= room:
                self._http_error()
                self.finish(reuse=False)

    def complete(self, keep_alive: bool) -> None:
        """The response's body ended where its framing said."""
        if self.mode == _EVENTS:
            self.reader.end()
        elif self.mode == _ERROR_BODY:
            self._http_error()
        self.finish(reuse=keep_alive)

    def lost(self, exc: BaseException | None, eof_body: bool) -> None:
        """The connection closed before this exchange ended."""
        out = self.out
        if self.mode == _HEAD:
            why = f"{type(exc).__name__}: {exc}" if exc else "server closed the connection"
            out.fail("error", ErrorKind.DISCONNECT, f"{why} before answering")
        elif self.mode == _EVENTS:
            if eof_body or exc is None:
                self.reader.end()
            else:
                out.fail("error", ErrorKind.DISCONNECT, f"{type(exc).__name__}: {exc}")
        elif self.mode == _ERROR_BODY:
            self._http_error()
        self.finish(reuse=False)

    def broken(self, message: str) -> None:
        """The bytes are not HTTP."""
        if not self.out.done:
            self.out.fail("error", ErrorKind.MALFORMED, message)
        self.finish(reuse=False)

    def finish(self, *, reuse: bool) -> None:
        if self.mode == _ENDED:
            return
        self.mode = _ENDED
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._conn is not None:
            self._conn.release(self, reuse)
        if not self.ended.done():
            self.ended.set_result(None)

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.arm()

    def _http_error(self) -> None:
        status = self.out.http_status or 0
        kind, message = http_failure(status, self.headers, self.reason, bytes(self._error))
        self.out.fail("error", kind, message)


def _due(start_ns: int, limit_s: float | None) -> int | None:
    return None if limit_s is None else start_ns + int(limit_s * 1e9)
