"""What went wrong with a request, as data: the one place where aiohttp, asyncio
and parser exceptions, HTTP error answers and in-stream error events become a
(status, error kind) pair and a short message."""

from __future__ import annotations

import aiohttp
import orjson

from analysis.schema import ErrorKind
from replay.client._sse import SSEError

__all__ = ["RedirectRefused", "classify", "describe", "error_text", "http_failure"]


class RedirectRefused(aiohttp.ClientResponseError):
    """The server answered with a redirect; the client never follows one (it would
    send the run, and the API key, to a server the user did not name)."""


def http_failure(status: int, headers: object, reason: str | None,
                 body: bytes) -> tuple[str, str]:
    """(error kind, message) for a non-200 answer; a redirect names its location."""
    get = getattr(headers, "get", None)
    if 300 <= status < 400:
        where = get("Location", None) if get else None
        to = str(where)[:200] if where else "?"
        return ErrorKind.REDIRECT, f"HTTP {status} redirect to {to}; redirects are not followed"
    message = _error_message(body) or reason or ""
    retry = get("Retry-After", None) if get else None
    if retry is not None:
        message = f"{message} (Retry-After: {retry})"
    return f"http_{status}", message


def classify(exc: BaseException, *, got_response: bool) -> tuple[str, str]:
    """The one place that maps aiohttp/asyncio/parser exceptions to (status, kind)."""
    if isinstance(exc, SSEError):
        return "error", exc.kind
    if isinstance(exc, RedirectRefused):
        return "error", ErrorKind.REDIRECT
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "timeout", ErrorKind.TIMEOUT_CONNECT
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return "timeout", ErrorKind.TIMEOUT_ITL if got_response else ErrorKind.TIMEOUT_FIRST_TOKEN
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "error", ErrorKind.CONNECT
    if isinstance(exc, aiohttp.ClientResponseError):
        status = getattr(exc, "status", None)
        return "error", f"http_{status}" if status else ErrorKind.CLIENT_ERROR
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return "error", ErrorKind.DISCONNECT
    if isinstance(exc, aiohttp.http_exceptions.HttpProcessingError):
        return "error", ErrorKind.MALFORMED
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError):
        return "error", ErrorKind.DISCONNECT if got_response else ErrorKind.CONNECT
    if isinstance(exc, aiohttp.ClientError):
        return "error", ErrorKind.CLIENT_ERROR
    if isinstance(exc, TimeoutError):
        return "timeout", ErrorKind.TIMEOUT_TOTAL
    if isinstance(exc, OSError):
        return "error", ErrorKind.CONNECT if not got_response else ErrorKind.DISCONNECT
    if isinstance(exc, ValueError | UnicodeDecodeError):
        return "error", ErrorKind.MALFORMED
    return "error", ErrorKind.INTERNAL


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_text(err: object) -> str:
    """The message of an OpenAI-style error object (with its code when given)."""
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
            return error_text(obj["error"])
        if "message" in obj:
            return str(obj["message"])
    return str(obj)[:300]
