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

The request goes over :mod:`replay.client._wire` (keep-alive connections framed
by httptools, events decoded as they arrive by :mod:`replay.client._events`);
the aiohttp session from :func:`make_session` serves every other request and
owns that pool through its connector.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from replay.client._connector import StreamingConnector
from replay.client._events import EventReader
from replay.client._exchange import Exchange
from replay.client._failures import RedirectRefused, classify, describe
from replay.client._outcome import StreamOutcome, Timeouts
from replay.client._sse import DEFAULT_MAX_LINE_BYTES
from replay.client._wire import WirePool

__all__ = ["StreamOutcome", "Timeouts", "make_session", "stream_request", "wire_pool"]


def make_session(
    connections: int, *, connect_s: float | None = 30.0, read_bufsize: int = 1 << 20,
) -> aiohttp.ClientSession:
    """One session per run: a connector sized for the run's lanes (``0`` = no cap)
    instead of aiohttp's silent 100, and no session-wide total timeout."""
    connector = StreamingConnector(
        WirePool(max(0, connections), connect_s), limit=max(0, connections), limit_per_host=0,
        force_close=False, enable_cleanup_closed=False, ttl_dns_cache=None,
    )
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_s, connect=None)
    trace = aiohttp.TraceConfig()
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

    ``session`` comes from :func:`make_session`; the stream itself goes over its
    connector's keep-alive pool (``replay.client._wire``), not through aiohttp.
    ``max_tokens`` is what the body asked for: a server streaming more tokens than
    that is cut off (error kind ``too_many_tokens``) instead of read without end."""
    pool = wire_pool(session)
    out.sent_ns = time.monotonic_ns()
    reader = EventReader(out, max_line_bytes, keep_output_ids, max_tokens)
    ex = Exchange(out, reader, timeouts, out.sent_ns, asyncio.get_running_loop())
    try:
        await pool.exchange(url, body, headers, ex)
    except asyncio.CancelledError:
        if not out.done:  # cancelled while waiting for the body's end: still complete
            out.fail("cancelled", "cancelled", "request cancelled")
        raise
    except Exception as exc:  # every failure becomes data
        status, kind = classify(exc, got_response=out.http_status is not None)
        out.fail(status, kind, describe(exc))
    finally:
        reader.check_usage()
        _stamp(out)
    return out


def wire_pool(session: aiohttp.ClientSession) -> WirePool:
    """The keep-alive pool of a session made by :func:`make_session`."""
    pool = getattr(session.connector, "wire", None)
    if not isinstance(pool, WirePool):
        raise TypeError("stream_request needs a session from replay.client.make_session")
    return pool


def _stamp(out: StreamOutcome) -> None:
    """First and last arrival from the chunk times (set once at the end, not per event)."""
    if out.chunk_ns:
        if out.first_ns is None:
            out.first_ns = out.chunk_ns[0]
        out.last_ns = out.chunk_ns[-1]
