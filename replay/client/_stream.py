"""Stream one completion and record what arrived when.

One function, :func:`stream_request`, posts a prepared body and fills a
:class:`StreamOutcome` in place: the monotonic arrival time of every
content-bearing chunk and its token count, the server's final ``usage``, the
generated token ids (when the server returns them) and, if it failed, a status
and an error kind. Failures never escape as exceptions, except cancellation,
which is recorded in the outcome (status ``cancelled``) and then re-raised so
task cancellation keeps working.

Nothing the server sends is trusted: redirects are refused (error kind
``redirect``, naming where it pointed), the body must not be compressed
(``Accept-Encoding: identity`` is sent; a compressed or non-SSE body is
``malformed``), reading stops at ``[DONE]`` (a server that then keeps the
connection open costs a short grace, not a failure), and ``usage`` is the count
of record only when it is possible (else ``bad_usage``; see ``_usage``). Tokens
per chunk follow one rule per stream (:class:`replay.client._usage.TokenCounter`).

All aiohttp and asyncio exceptions are translated to error kinds in one place,
``_failures.classify``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp
import orjson

from analysis.schema import ErrorKind
from replay.client._connector import StreamingConnector
from replay.client._failures import RedirectRefused, classify, describe, error_text, http_failure
from replay.client._sse import DEFAULT_MAX_LINE_BYTES, SSEParser
from replay.client._usage import BY_TEXT, TokenCounter, clean_usage, usage_problem

__all__ = ["StreamOutcome", "Timeouts", "make_session", "stream_request"]

_ERROR_BODY_LIMIT = 64 * 1024
_ECHO_MIN = 4096
_AFTER_DONE = "after_done"
_AFTER_DONE_S = 1.0
"""How long the end of the HTTP body may lag ``[DONE]`` before the client closes."""
_AFTER_DONE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-request limits in seconds; ``None`` disables one."""

    connect_s: float | None = 30.0
    first_token_s: float | None = 600.0
    """Request sent to first output token (``--ttft-timeout``)."""
    itl_s: float | None = 120.0
    """Longest gap between output tokens (``--itl-timeout``)."""
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
    trace.on_request_redirect.append(_refuse_redirect)
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, read_bufsize=read_bufsize,
        auto_decompress=False, skip_auto_headers=("User-Agent",), trace_configs=[trace],
        headers={"Accept-Encoding": "identity"},
    )


async def _refuse_redirect(
    session: aiohttp.ClientSession, ctx: object, params: aiohttp.TraceRequestRedirectParams,
) -> None:
    """Session-wide guard: any request of this session (probes, /metrics) that would
    follow a redirect fails instead, naming the location."""
    resp = params.response
    where = resp.headers.get("Location", "(no Location header)")
    raise RedirectRefused(resp.request_info, (), status=resp.status, headers=resp.headers,
                          message=f"redirect to {where[:200]} refused")


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
    state.set(first_at, ErrorKind.TIMEOUT_FIRST_TOKEN, total_at)
    try:
        async with asyncio.timeout_at(state.when) as timer:
            state.timer = timer
            async with session.post(url, data=body, headers=headers, allow_redirects=False,
                                    trace_request_ctx=out) as resp:
                out.http_status = resp.status
                if resp.status != 200:
                    await _read_error(resp, out)
                    return out
                await _consume(resp, out, state, timeouts, total_at, loop, max_line_bytes,
                               keep_output_ids, max_tokens)
    except asyncio.CancelledError:
        if state.expired():
            _timed_out(out, state)
        else:
            if not out.done:  # cancelled while waiting for the body's end: still complete
                out.fail("cancelled", "cancelled", "request cancelled")
            raise
    except TimeoutError as exc:
        if state.expired() or not isinstance(exc, aiohttp.ClientError):
            _timed_out(out, state)
        else:
            status, kind = classify(exc, got_response=out.http_status is not None)
            out.fail(status, kind, describe(exc))
    except Exception as exc:  # every failure becomes data
        status, kind = classify(exc, got_response=out.http_status is not None)
        out.fail(status, kind, describe(exc))
    finally:
        _stamp(out)
    return out


async def _read_error(resp: aiohttp.ClientResponse, out: StreamOutcome) -> None:
    try:
        raw = await resp.content.read(_ERROR_BODY_LIMIT)
    except Exception:
        raw = b""
    kind, message = http_failure(resp.status, resp.headers, resp.reason, raw)
    out.fail("error", kind, message)


def _timed_out(out: StreamOutcome, state: _TimerState) -> None:
    """A deadline passed; after ``[DONE]`` that only ends the wait for the body's end."""
    if not out.done:
        out.fail("timeout", state.kind, f"no data before the {state.kind[8:]} limit")


class _TimerState:
    """Which deadline the request timer is armed for, so a timeout gets its kind."""

    __slots__ = ("kind", "timer", "when")

    def __init__(self) -> None:
        self.when: float | None = None
        self.kind: str = ErrorKind.TIMEOUT_TOTAL
        self.timer: asyncio.Timeout | None = None

    def set(self, at: float | None, kind: str, total_at: float | None) -> None:
        if total_at is not None and (at is None or total_at <= at):
            at, kind = total_at, ErrorKind.TIMEOUT_TOTAL
        self.when = at
        self.kind = kind
        if self.timer is not None:
            self.timer.reschedule(at)

    def expired(self) -> bool:
        return self.timer is not None and self.timer.expired()


async def _consume(
    resp: aiohttp.ClientResponse, out: StreamOutcome, state: _TimerState, timeouts: Timeouts,
    total_at: float | None, loop: asyncio.AbstractEventLoop, max_line_bytes: int,
    keep_output_ids: bool, max_tokens: int | None,
) -> None:
    encoding = resp.headers.get("Content-Encoding")
    if encoding and encoding.strip().lower() != "identity":
        out.fail("error", ErrorKind.MALFORMED,
                 f"body is {encoding[:40]}-encoded although identity was asked for")
        return
    counter = TokenCounter()
    try:
        await _read_events(resp, out, counter, state, timeouts.itl_s, total_at, loop,
                           max_line_bytes, keep_output_ids, max_tokens)
    finally:
        _check_usage(out, counter, max_tokens)
    if out.done:
        try:
            await _settle(resp, state, loop, total_at, timeouts.itl_s)
        except Exception:  # noqa: S110 - what follows [DONE] cannot undo a complete answer
            pass


async def _read_events(
    resp: aiohttp.ClientResponse, out: StreamOutcome, counter: TokenCounter,
    state: _TimerState, itl: float | None, total_at: float | None,
    loop: asyncio.AbstractEventLoop, max_line_bytes: int, keep_output_ids: bool,
    max_tokens: int | None,
) -> None:
    """Parse events into ``out`` until ``[DONE]``, a failure or the end of the body."""
    parser = SSEParser(max_line_bytes)
    feed = parser.feed_payloads
    count = counter.count
    now_ns = time.monotonic_ns
    loads = orjson.loads
    chunk_ns = out.chunk_ns
    chunk_tokens = out.chunk_tokens
    output_ids = out.output_ids
    limit = max_tokens if max_tokens is not None else -1
    async for data in resp.content.iter_any():
        t = now_ns()
        seen = counter.streamed
        for payload in feed(data):
            if payload == b"[DONE]":
                out.done = True
                break
            if len(payload) > _ECHO_MIN and b'"prompt_token_ids"' in payload:
                payload = _drop_prompt_ids(payload)
            try:
                obj = loads(payload)
            except orjson.JSONDecodeError:
                out.fail("error", ErrorKind.MALFORMED, f"undecodable event: {payload[:80]!r}")
                return
            if type(obj) is not dict:
                out.fail("error", ErrorKind.MALFORMED, f"event is not an object: {payload[:80]!r}")
                return
            if "error" in obj or obj.get("object") == "error":
                err = obj.get("error")
                out.fail("error", ErrorKind.STREAM_ERROR,
                         error_text(err if err is not None else obj))
                continue
            usage = obj.get("usage")
            usage_tokens = None
            if usage is not None:
                usage = clean_usage(usage)
                if usage is None:
                    out.fail("error", ErrorKind.MALFORMED,
                             f"usage is not token counts: {payload[:80]!r}")
                    return
                out.usage = usage
                ct = usage.get("completion_tokens")
                usage_tokens = ct if type(ct) is int else None
            n_ids = 0
            has_text = False
            choices = obj.get("choices")
            if choices:
                choice = choices[0] if type(choices) is list else None
                if type(choice) is not dict:
                    out.fail("error", ErrorKind.MALFORMED, f"choices is not a list of objects: "
                             f"{payload[:80]!r}")
                    return
                ids = choice.get("token_ids")
                if ids:
                    if type(ids) is not list or not all(type(i) is int for i in ids):
                        out.fail("error", ErrorKind.MALFORMED,
                                 f"token_ids is not a list of integers: {payload[:80]!r}")
                        return
                    n_ids = len(ids)
                    if keep_output_ids:
                        output_ids.extend(ids)
                if counter.mode is None or counter.mode == BY_TEXT:  # else text is not counted
                    delta = choice.get("delta")
                    has_text = bool(choice.get("text")) or (
                        type(delta) is dict and bool(delta.get("content")))
            n = count(n_ids, usage_tokens, bool(choices), has_text)
            if n > 0:
                chunk_ns.append(t)
                chunk_tokens.append(n)
                if counter.streamed > limit >= 0:
                    out.fail("error", ErrorKind.TOO_MANY_TOKENS,
                             f"server streamed more than the {max_tokens} tokens asked for")
                    return
        if out.done:
            break
        if itl is not None and counter.streamed > seen:
            state.set(loop.time() + itl, ErrorKind.TIMEOUT_ITL, total_at)
    else:
        for ev in parser.close():
            if ev.data == b"[DONE]":
                out.done = True
    if not out.done:
        if parser.junk is not None:
            out.fail("error", ErrorKind.MALFORMED, "stream ended without [DONE]; it held lines "
                     f"that are not SSE fields, e.g. {parser.junk!r}")
        else:
            out.fail("error", ErrorKind.DISCONNECT, "stream ended without [DONE]")


def _check_usage(out: StreamOutcome, counter: TokenCounter, max_tokens: int | None) -> None:
    """Impossible usage is never kept as truth; on a complete answer it is the failure
    (an earlier failure, a cut stream or a timeout, keeps its own kind)."""
    if out.usage is None:
        return
    problem = usage_problem(out.usage, counter, max_tokens)
    if problem is not None:
        out.usage = None
        if out.done:
            out.fail("error", ErrorKind.BAD_USAGE, problem)


async def _settle(resp: aiohttp.ClientResponse, state: _TimerState,
                  loop: asyncio.AbstractEventLoop, total_at: float | None,
                  itl_s: float | None) -> None:
    """After ``[DONE]``: let the HTTP body end so the connection can be reused, but
    wait only a moment; a server that keeps it open is closed on, not waited for."""
    content = resp.content
    if content.at_eof():
        return
    grace = _AFTER_DONE_S if itl_s is None else min(itl_s, _AFTER_DONE_S)
    state.set(loop.time() + grace, _AFTER_DONE, total_at)
    budget = _AFTER_DONE_BYTES
    while budget > 0:
        more = await content.readany()
        if not more:
            return
        budget -= len(more)


def _stamp(out: StreamOutcome) -> None:
    """First and last arrival from the chunk times (set once at the end, not per event)."""
    if out.chunk_ns:
        if out.first_ns is None:
            out.first_ns = out.chunk_ns[0]
        out.last_ns = out.chunk_ns[-1]


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


