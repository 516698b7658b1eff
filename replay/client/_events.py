"""The events of one streamed answer, fed as bytes arrive: pure, no sockets.

:class:`EventReader` turns body bytes (whatever one socket read held) into the
outcome's chunk times, token counts, ids and ``usage``, and says when reading
must stop: at ``[DONE]``, or at the first event that makes the answer a failure
(undecodable, not an object, more tokens than asked for). It runs inside the
connection's ``data_received``, so a read costs no task switch; every read is
stamped once, with the time the caller took when the bytes arrived.

Tokens per chunk follow one rule per stream (:class:`replay.client._usage.TokenCounter`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from analysis.schema import ErrorKind
from replay.client._failures import error_text
from replay.client._sse import SSEParser
from replay.client._usage import BY_TEXT, TokenCounter, clean_usage, usage_problem

if TYPE_CHECKING:
    from replay.client._outcome import StreamOutcome

__all__ = ["EventReader"]

_ECHO_MIN = 4096


class EventReader:
    """Decodes one answer's SSE body into its :class:`StreamOutcome`."""

    __slots__ = ("counter", "keep_ids", "limit", "max_tokens", "out", "parser")

    def __init__(self, out: StreamOutcome, max_line_bytes: int, keep_output_ids: bool,
                 max_tokens: int | None) -> None:
        self.out = out
        self.parser = SSEParser(max_line_bytes)
        self.counter = TokenCounter()
        self.keep_ids = keep_output_ids
        self.max_tokens = max_tokens
        self.limit = max_tokens if max_tokens is not None else -1

    def feed(self, data: bytes, t: int) -> bool:
        """Read the events ``data`` completes (arrived at ``t`` ns); True when reading
        must stop (``[DONE]`` or a failure). May raise ``SSEError``."""
        out = self.out
        counter = self.counter
        count = counter.count
        loads = orjson.loads
        for payload in self.parser.feed_payloads(data):
            if payload == b"[DONE]":
                out.done = True
                return True
            if len(payload) > _ECHO_MIN and b'"prompt_token_ids"' in payload:
                payload = _drop_prompt_ids(payload)
            try:
                obj = loads(payload)
            except orjson.JSONDecodeError:
                out.fail("error", ErrorKind.MALFORMED, f"undecodable event: {payload[:80]!r}")
                return True
            if type(obj) is not dict:
                out.fail("error", ErrorKind.MALFORMED, f"event is not an object: {payload[:80]!r}")
                return True
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
                    return True
                out.usage = usage
                ct = usage.get("completion_tokens")
                usage_tokens = ct if type(ct) is int else None
            n_ids = 0
            has_text = has_choice = False
            choices = obj.get("choices")
            if choices:
                has_choice = True
                choice = choices[0] if type(choices) is list else None
                if type(choice) is not dict:
                    out.fail("error", ErrorKind.MALFORMED, f"choices is not a list of objects: "
                             f"{payload[:80]!r}")
                    return True
                ids = choice.get("token_ids")
                if ids:
                    if type(ids) is not list or not all(type(i) is int for i in ids):
                        out.fail("error", ErrorKind.MALFORMED,
                                 f"token_ids is not a list of integers: {payload[:80]!r}")
                        return True
                    n_ids = len(ids)
                    if self.keep_ids:
                        out.output_ids.extend(ids)
                mode = counter.mode
                if mode is None or mode == BY_TEXT:  # else text is not counted
                    if choice.get("text"):
                        has_text = True
                    else:
                        delta = choice.get("delta")
                        has_text = type(delta) is dict and bool(delta.get("content"))
                    if mode is not None and usage_tokens is None:
                        # a text stream's plain event: TokenCounter.count's BY_TEXT rule inline
                        if has_text:
                            counter.streamed += 1
                            out.chunk_ns.append(t)
                            out.chunk_tokens.append(1)
                            if counter.streamed > self.limit >= 0:
                                out.fail("error", ErrorKind.TOO_MANY_TOKENS, "server streamed "
                                         f"more than the {self.max_tokens} tokens asked for")
                                return True
                        continue
            n = count(n_ids, usage_tokens, has_choice, has_text)
            if n > 0:
                out.chunk_ns.append(t)
                out.chunk_tokens.append(n)
                if counter.streamed > self.limit >= 0:
                    out.fail("error", ErrorKind.TOO_MANY_TOKENS,
                             f"server streamed more than the {self.max_tokens} tokens asked for")
                    return True
        return False

    def end(self) -> None:
        """The body ended: a trailing ``[DONE]`` without its blank line still counts;
        without one the answer was cut off (or was not SSE at all)."""
        out = self.out
        if not out.done:
            for ev in self.parser.close():
                if ev.data == b"[DONE]":
                    out.done = True
        if not out.done:
            if self.parser.junk is not None:
                out.fail("error", ErrorKind.MALFORMED, "stream ended without [DONE]; it held "
                         f"lines that are not SSE fields, e.g. {self.parser.junk!r}")
            else:
                out.fail("error", ErrorKind.DISCONNECT, "stream ended without [DONE]")

    def check_usage(self) -> None:
        """Impossible usage is never kept as truth; on a complete answer it is the
        failure (an earlier failure, a cut stream or a timeout, keeps its own kind)."""
        out = self.out
        if out.usage is None:
            return
        problem = usage_problem(out.usage, self.counter, self.max_tokens)
        if problem is not None:
            out.usage = None
            if out.done:
                out.fail("error", ErrorKind.BAD_USAGE, problem)


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
