"""A pure, incremental Server-Sent Events parser: feed bytes, get events.

No sockets and no clock: the client feeds whatever one socket read held and
stamps the events itself. Lines may be split anywhere across reads and may end
in ``\\n``, ``\\r\\n`` or ``\\r``. Comment lines (``:``) are dropped, multi-line
``data`` fields are joined with ``\\n``, and a line longer than ``max_line_bytes``
raises :class:`SSEError` with kind ``line_too_long`` instead of buffering without
bound (vLLM's first chunk can echo a 100K-token prompt, so the default is large).
Lines that are no SSE field at all (a bare JSON object, compressed bytes) are
ignored as the spec says, but the first one is kept in ``junk`` so the client
can call a stream that never finished ``malformed`` rather than cut off.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.schema import ErrorKind

__all__ = ["DEFAULT_MAX_LINE_BYTES", "SSEError", "SSEEvent", "SSEParser"]

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024


class SSEError(Exception):
    """The byte stream is not SSE we can parse; ``kind`` becomes the record's error kind."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(slots=True)
class SSEEvent:
    """One dispatched event: ``data`` is the joined data lines (bytes, undecoded)."""

    data: bytes
    event: str = "message"
    id: str | None = None


class SSEParser:
    """Incremental SSE framing per the WHATWG rules (fields data, event, id, retry)."""

    __slots__ = ("_buf", "_cr", "_data", "_event", "_id", "_pending_cr", "junk",
                 "max_line_bytes")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self._buf = bytearray()
        self._data: list[bytes] = []
        self._event = ""
        self._id: str | None = None
        self._pending_cr = False
        self._cr = False
        self.junk: bytes | None = None
        """The first line (cut to 80 bytes) that was not a known SSE field or comment."""
        # once a "\r" is seen, this stream always takes the general path

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume bytes; return the events completed by them (possibly none)."""
        events: list[SSEEvent] = []
        if not chunk:
            return events
        if self._pending_cr:
            # A '\r' ended the previous read; a '\n' right after belongs to it.
            self._pending_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf
        start = len(buf)
        buf += chunk
        pos = 0
        # Fast path for the common case: only '\n' line endings.
        has_cr = 0x0D in chunk
        while True:
            if has_cr:
                nl = _find_eol(buf, max(pos, start))
            else:
                nl = buf.find(b"\n", max(pos, start))
            if nl < 0:
                break
            end = nl
            step = 1
            if buf[nl] == 0x0D:  # '\r'
                if nl + 1 < len(buf):
                    if buf[nl + 1] == 0x0A:
                        step = 2
                else:
                    self._pending_cr = True
            if end - pos > self.max_line_bytes:
                self._reset()
                raise SSEError(ErrorKind.LINE_TOO_LONG,
                               f"SSE line longer than {self.max_line_bytes} bytes")
            ev = self._line(bytes(buf[pos:end]))
            if ev is not None:
                events.append(ev)
            pos = nl + step
            start = pos
        if pos:
            del buf[:pos]
        if len(buf) > self.max_line_bytes:
            self._reset()
            raise SSEError(ErrorKind.LINE_TOO_LONG,
                           f"SSE line longer than {self.max_line_bytes} bytes")
        return events

    def feed_payloads(self, chunk: bytes) -> list[bytes]:
        """Like :meth:`feed` but returns only each event's ``data`` (what the client
        reads), without building :class:`SSEEvent` objects.

        Fast path for what servers send (``data: ...`` lines, ``\\n`` endings, one
        blank line between events): the buffer is split on blank lines in C and
        each single-line ``data:`` event is sliced out; any other block (comments,
        other fields, several data lines, extra blank lines) goes through the
        general line parser, so the result is the same as :meth:`feed`'s.
        """
        buf = self._buf
        if 0x0D in chunk:  # an int needle is one memchr; b"\r" takes the general search
            self._cr = True
        elif not buf and not self._cr and not self._data:
            # One whole single-line event and nothing held: the commonest read of a
            # token stream (one event per packet), in two C scans and one slice.
            end = len(chunk) - 2
            if (chunk[end:] == b"\n\n" and chunk.find(b"\n") == end and chunk[:6] == b"data: "
                    and end <= self.max_line_bytes):
                self._event = ""
                return [chunk[6:end]]
        if self._cr or self._data:
            return [ev.data for ev in self.feed(chunk)]
        data = bytes(buf) + chunk if buf else chunk
        cut = data.rfind(b"\n\n") + 2
        # Whole read in C: when every line break of the complete part belongs to one
        # "\n\n" between "data: " events (or ends it), it holds single-line data events only.
        if (2 <= cut <= self.max_line_bytes and len(data) - cut <= self.max_line_bytes
                and data.startswith(b"data: ")):
            head = data[:cut] if cut < len(data) else data
            if head.count(b"\n") == 2 * head.count(b"\n\ndata: ") + 2:
                buf.clear()
                if cut < len(data):
                    buf += data[cut:]
                self._event = ""
                return head[6:-2].split(b"\n\ndata: ")
        start = len(buf)
        buf += chunk
        if buf.find(b"\n\n", start - 1 if start else 0) < 0:
            if len(buf) > self.max_line_bytes:  # let the general parser judge the lines
                held = bytes(buf)
                buf.clear()
                return [ev.data for ev in self.feed(held)]
            return []
        blocks = bytes(buf).split(b"\n\n")
        rest = blocks.pop()
        buf.clear()
        limit = self.max_line_bytes
        out: list[bytes] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                if len(block) > limit:
                    self._reset()
                    raise SSEError(ErrorKind.LINE_TOO_LONG, f"SSE line longer than {limit} bytes")
                out.append(block[6:])
                self._event = ""
                continue
            for ev in self.feed(block + b"\n\n"):
                out.append(ev.data)
        if rest:
            for ev in self.feed(rest):
                out.append(ev.data)
        return out

    def close(self) -> list[SSEEvent]:
        """End of stream: a trailing line without newline is processed; a half-built
        event without its blank line is dropped (as the SSE spec says)."""
        events: list[SSEEvent] = []
        if self._buf:
            ev = self._line(bytes(self._buf))
            if ev is not None:
                events.append(ev)
        self._reset()
        return events

    @property
    def buffered(self) -> int:
        """Bytes held waiting for a line end (bounded by ``max_line_bytes``)."""
        return len(self._buf)

    def _reset(self) -> None:
        self._buf.clear()
        self._data.clear()
        self._event = ""
        self._pending_cr = False

    def _line(self, line: bytes) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            ev = SSEEvent(data=data, event=self._event or "message", id=self._id)
            self._data.clear()
            self._event = ""
            return ev
        if line[0] == 0x3A:  # ':' comment
            return None
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name != b"retry" and self.junk is None:
            self.junk = line[:80]
        # 'retry' and unknown fields are ignored.
        return None


def _find_eol(buf: bytearray, start: int) -> int:
    n = buf.find(b"\n", start)
    r = buf.find(b"\r", start)
    if r < 0:
        return n
    if n < 0:
        return r
    return min(n, r)
