"""Stream one completion and record what arrived when.

One function, :func:`stream_request`, posts a prepared body and fills a
:class:`StreamOutcome` in place: the monotonic arrival time of every
content-bearing chunk and its token count, the server's final ``usage``, the
generated token ids (when the server returns them) and, if it failed, a status
and an error kind. Failures never escape as exceptions, except cancellation,
which is recorded in the outcome (status ``cancelled``) and then re-raised so
task cancellation keeps working.

Token counting per chunk: ``len(token_ids)`` when the server returns token ids
(``return_token_ids``), else the delta of ``usage.completion_tokens`` when usage
comes with every chunk (``continuous_usage_stats``), else 1 per chunk with text.
The server's final ``usage.completion_tokens`` is the count of record.

All aiohttp and asyncio exceptions are translated to error kinds in one place,
:func:`_classify`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp
import orjson

from replay.client._connector import StreamingConnector
from replay.client._sse import DEFAULT_MAX_LINE_BYTES, SSEError, SSEParser

__all__ = ["StreamOutcome", "Timeouts", "make_session", "stream_request"]

_ERROR_BODY_LIMIT = 64 * 1024
_ECHO_MIN = 4096


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-request limits in seconds; ``None`` disables one."""

    connect_s: float | None = 30.0
    first_token_s: float | None = 600.0
    itl_s: float | None = 120.0
    total_s: float | None = 3600.0


@dataclass(slots=True)
class StreamOutcome:
    """What happened to one request, filled in while it streams."""

    status: str = "ok"
    error_kind: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    sent_ns: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    usage: dict[str, object] | None = None
    done: bool = False
    """``data: [DONE]`` was received."""

    @property
    def streamed_tokens(self) -> int:
        return sum(self.chunk_tokens)

    def fail(self, status: str, kind: str, message: str | None = None) -> None:
        """Record the first failure only; later ones are consequences."""
        if self.status == "ok":
            self.status = status
            self.error_kind = kind
            self.error_message = message[:500] if message else message


def make_session(
    connections: int, *, connect_s: float | None = 30.0, read_bufsize: int = 1 << 20,
) -> aiohttp.ClientSession:
    """One session per run: a connector sized for the run's lanes (``0`` = no cap)
    instead of aiohttp's silent 100, and no session-wide total timeout."""
    connector = StreamingConnector(
        limit=max(0, connections), limit_per_host=0, force_close=False,
        enable_cleanup_closed=False, ttl_dns_cache=None,
    )
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_s, connect=None)
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_headers_sent)
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, read_bufsize=read_bufsize,
        auto_decompress=False, skip_auto_headers=("User-Agent",), trace_configs=[trace],
    )


async def _headers_sent(
    session: aiohttp.ClientSession, ctx: object, params: aiohttp.TraceRequestHeadersSentParams,
) -> None:
    """Stamp the send time when the request is on the wire, not when aiohttp was
    asked for it (its request setup is client overhead, counted as schedule lag)."""
    out = getattr(ctx, "trace_request_ctx", None)
    if isinstance(out, StreamOutcome):
        out.sent_ns = time.monotonic_ns()


async def stream_request(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeouts: Timeouts,
    out: StreamOutcome,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    keep_output_ids: bool = True,
    max_tokens: int | None = None,
) -> StreamOutcome:
    """POST ``body`` to ``url`` and stream the answer into ``out`` (also returned).

    ``max_tokens`` is what the body asked for: a server streaming more tokens than
    that is cut off (error kind ``too_many_tokens``) instead of read without end."""
    loop = asyncio.get_running_loop()
    now_ns = time.monotonic_ns
    out.sent_ns = now_ns()
    t_sent = loop.time()
    total_at = t_sent + timeouts.total_s if timeouts.total_s is not None else None
    first_at = t_sent + timeouts.first_token_s if timeouts.first_token_s is not None else None
    state = _TimerState()
    state.set(first_at, "timeout_first_token", total_at)
    try:
        async with asyncio.timeout_at(state.when) as timer:
            state.timer = timer
            async with session.post(url, data=body, headers=headers,
                                    trace_request_ctx=out) as resp:
                out.http_status = resp.status
                if resp.status != 200:
                    await _read_error(resp, out)
                    return out
                await _consume(resp, out, state, timeouts, total_at, loop, max_line_bytes,
                               keep_output_ids, max_tokens)
    except asyncio.CancelledError:
        if state.expired():
            out.fail("timeout", state.kind, f"no data before the {state.kind[8:]} limit")
        else:
            out.fail("cancelled", "cancelled", "request cancelled")
            raise
    except TimeoutError as exc:
        if state.expired() or not isinstance(exc, aiohttp.ClientError):
            out.fail("timeout", state.kind, f"no data before the {state.kind[8:]} limit")
        else:
            status, kind = _classify(exc, got_response=out.http_status is not None)
            out.fail(status, kind, _describe(exc))
    except Exception as exc:  # every failure becomes data
        status, kind = _classify(exc, got_response=out.http_status is not None)
        out.fail(status, kind, _describe(exc))
    finally:
        _stamp(out)
    return out


class _TimerState:
    """Which deadline the request timer is armed for, so a timeout gets its kind."""

    __slots__ = ("kind", "timer", "when")

    def __init__(self) -> None:
        self.when: float | None = None
        self.kind = "timeout_total"
        self.timer: asyncio.Timeout | None = None

    def set(self, at: float | None, kind: str, total_at: float | None) -> None:
        if total_at is not None and (at is None or total_at <= at):
            at, kind = total_at, "timeout_total"
        self.when = at
        self.kind = kind
        if self.timer is not None:
            self.timer.reschedule(at)

    def expired(self) -> bool:
        return self.timer is not None and self.timer.expired()


async def _read_error(resp: aiohttp.ClientResponse, out: StreamOutcome) -> None:
    try:
        raw = await resp.content.read(_ERROR_BODY_LIMIT)
    except Exception:
        raw = b""
    message = _error_message(raw) or resp.reason or ""
    retry = resp.headers.get("Retry-After")
    if retry is not None:
        message = f"{message} (Retry-After: {retry})"
    out.fail("error", f"http_{resp.status}", message)


async def _consume(
    resp: aiohttp.ClientResponse, out: StreamOutcome, state: _TimerState, timeouts: Timeouts,
    total_at: float | None, loop: asyncio.AbstractEventLoop, max_line_bytes: int,
    keep_output_ids: bool, max_tokens: int | None,
) -> None:
    parser = SSEParser(max_line_bytes)
    feed = parser.feed_payloads
    streamed = 0
    now_ns = time.monotonic_ns
    loads = orjson.loads
    prev_usage_tokens = 0
    itl = timeouts.itl_s
    chunk_ns = out.chunk_ns
    chunk_tokens = out.chunk_tokens
    output_ids = out.output_ids
    limit = max_tokens if max_tokens is not None else -1
    async for data in resp.content.iter_any():
        t = now_ns()
        seen = streamed
        for payload in feed(data):
            if payload == b"[DONE]":
                out.done = True
                continue
            if out.done:
                continue
            if len(payload) > _ECHO_MIN and b'"prompt_token_ids"' in payload:
                payload = _drop_prompt_ids(payload)
            try:
                obj = loads(payload)
            except orjson.JSONDecodeError:
                out.fail("error", "malformed", f"undecodable event: {payload[:80]!r}")
                return
            if type(obj) is not dict:
                out.fail("error", "malformed", f"event is not an object: {payload[:80]!r}")
                return
            if "error" in obj or obj.get("object") == "error":
                err = obj.get("error")
                out.fail("error", "stream_error", _error_text(err if err is not None else obj))
                continue
            usage = obj.get("usage")
            if usage is not None:
                usage = _clean_usage(usage)
                if usage is None:
                    out.fail("error", "malformed", f"usage is not token counts: {payload[:80]!r}")
                    return
            n = 0
            choices = obj.get("choices")
            if choices:
                choice = choices[0] if type(choices) is list else None
                if type(choice) is not dict:
                    out.fail("error", "malformed", f"choices is not a list of objects: "
                             f"{payload[:80]!r}")
                    return
                ids = choice.get("token_ids")
                if ids:
                    if type(ids) is not list or not all(type(i) is int for i in ids):
                        out.fail("error", "malformed", f"token_ids is not a list of integers: "
                                 f"{payload[:80]!r}")
                        return
                    n = len(ids)
                    if keep_output_ids:
                        output_ids.extend(ids)
                elif usage is not None and usage.get("completion_tokens") is not None:
                    n = int(usage["completion_tokens"]) - prev_usage_tokens  # type: ignore[call-overload]
                elif choice.get("text") or (choice.get("delta") or {}).get("content"):
                    n = 1
            if usage is not None:
                out.usage = usage
                ct = usage.get("completion_tokens")
                if ct is not None:
                    prev_usage_tokens = int(ct)  # type: ignore[call-overload]
            if n > 0:
                chunk_ns.append(t)
                chunk_tokens.append(n)
                streamed += n
                if streamed > limit >= 0:
                    out.fail("error", "too_many_tokens",
                             f"server streamed more than the {max_tokens} tokens asked for")
                    return
        if itl is not None and streamed > seen:
            state.set(loop.time() + itl, "timeout_itl", total_at)
    for ev in parser.close():
        if ev.data == b"[DONE]":
            out.done = True
    if not out.done:
        out.fail("error", "disconnect", "stream ended without [DONE]")


def _stamp(out: StreamOutcome) -> None:
    """First and last arrival from the chunk times (set once at the end, not per event)."""
    if out.chunk_ns:
        if out.first_ns is None:
            out.first_ns = out.chunk_ns[0]
        out.last_ns = out.chunk_ns[-1]


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _clean_usage(usage: object) -> dict[str, object] | None:
    """``usage`` if its token counts are non-negative integers (or absent), else None:
    a hostile server's junk must become a ``malformed`` record, not a crash later."""
    if not isinstance(usage, dict):
        return None
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(key)
        if value is not None and not _count(value):
            return None
    details = usage.get("prompt_tokens_details")
    if details is not None:
        if not isinstance(details, dict):
            return None
        cached = details.get("cached_tokens")
        if cached is not None and not _count(cached):
            return None
    return usage


def _drop_prompt_ids(payload: bytes) -> bytes:
    """Cut the echoed prompt ids (``return_token_ids`` puts the whole prompt in the
    first chunk) before JSON decoding: byte searches instead of decoding 100K ints."""
    key = payload.find(b'"prompt_token_ids"')
    colon = payload.find(b":", key + 18)
    start = payload.find(b"[", colon)
    if colon < 0 or start < 0 or payload[colon + 1 : start].strip():
        return payload  # not a list (null, say): leave it to the decoder
    end = payload.find(b"]", start)
    if end < 0:
        return payload
    return payload[:start] + b"null" + payload[end + 1 :]


def _classify(exc: BaseException, *, got_response: bool) -> tuple[str, str]:
    """The one place that maps aiohttp/asyncio/parser exceptions to (status, kind)."""
    if isinstance(exc, SSEError):
        return "error", exc.kind
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "timeout", "timeout_connect"
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return "timeout", "timeout_itl" if got_response else "timeout_first_token"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "error", "connect"
    if isinstance(exc, aiohttp.ClientResponseError):
        status = getattr(exc, "status", None)
        return "error", f"http_{status}" if status else "client_error"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return "error", "disconnect"
    if isinstance(exc, aiohttp.http_exceptions.HttpProcessingError):
        return "error", "malformed"
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError):
        return "error", "disconnect" if got_response else "connect"
    if isinstance(exc, aiohttp.ClientError):
        return "error", "client_error"
    if isinstance(exc, TimeoutError):
        return "timeout", "timeout_total"
    if isinstance(exc, OSError):
        return "error", "connect" if not got_response else "disconnect"
    if isinstance(exc, ValueError | UnicodeDecodeError):
        return "error", "malformed"
    return "error", "internal"


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _error_text(err: object) -> str:
    if isinstance(err, dict):
        msg = err.get("message")
        code = err.get("code")
        if msg is not None:
            return f"{msg} (code {code})" if code is not None else str(msg)
    return str(err)


def _error_message(raw: bytes) -> str:
    if not raw:
        return ""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw[:300].decode("utf-8", "replace")
    if isinstance(obj, dict):
        if "error" in obj:
            return _error_text(obj["error"])
        if "message" in obj:
            return str(obj["message"])
    return str(obj)[:300]
