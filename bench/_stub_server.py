"""A minimal vLLM-shaped streaming server whose timing is known, for client benchmarks.

Why not ``replay/servers/sim``: this stub must cost as little server CPU as possible, so
that on one pinned core it outpaces any client on another; it speaks HTTP/1.1
over a raw asyncio protocol (keep-alive, chunked SSE responses) and models
nothing but a shared decode step.

Timing: all running requests share one step clock. Every step, each running
request emits one token. ``--step-ms 10`` gives a true TPOT of 10 ms (the stub
measures its real step period too); ``--step-ms 0`` steps back to back, as fast
as the event loop turns.

Write modes:

- ``batch``: as few writes as possible. With ``--step-ms 0`` a whole response
  (every token, the usage chunk and ``[DONE]``) is one write; with a step
  clock, one write per request per step (a token cannot be sent before it
  exists).
- ``token``: one SSE event per write, TCP_NODELAY, and at ``--step-ms 0`` one
  step per event-loop turn, so tokens leave as separate packets.

Endpoints: ``POST /v1/completions`` and ``/v1/chat/completions`` (streaming or
not, vLLM chunk shapes, ``stream_options.include_usage``), ``GET /v1/models``,
``/health``, ``/metrics`` (empty), ``/stats`` (JSON counters for the bench
harness) and ``POST /stats/reset``.

Run: ``python bench/_stub_server.py --port 8900 --step-ms 0 --write-mode batch``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import socket
import time
from dataclasses import dataclass, field
from typing import cast

import orjson

MODEL = "stub"
DEFAULT_OUTPUT_TOKENS = 256
TOKEN_TEXT = " token"
"""One token's text: a single token in the bench tokenizers, so a client that
re-tokenises the output (AIPerf) counts what the server sent."""

_HDR_SSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


def _chunk(data: bytes) -> bytes:
    """Frame ``data`` as one HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


_LAST_CHUNK = b"0\r\n\r\n"


def _plain(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
        % (status.encode(), ctype, len(body), body)
    )


@dataclass
class Stats:
    """Counters the bench harness polls; tokens are counted when written."""

    requests_started: int = 0
    requests_finished: int = 0
    tokens_streamed: int = 0
    steps: int = 0
    step_time_s: float = 0.0
    """Sum of intervals between consecutive steps while requests ran."""
    step_intervals: int = 0
    stream_steps: int = 0
    """Sum over steps of the streams running in that step (mean batch = this / steps)."""
    running: int = 0
    max_running: int = 0
    t_reset: float = field(default_factory=time.monotonic)

    def as_json(self, step_ms: float, write_mode: str) -> bytes:
        mean_step = self.step_time_s / self.step_intervals if self.step_intervals else None
        return orjson.dumps(
            {
                "requests_started": self.requests_started,
                "requests_finished": self.requests_finished,
                "tokens_streamed": self.tokens_streamed,
                "running": self.running,
                "max_running": self.max_running,
                "steps": self.steps,
                "mean_running_per_step": self.stream_steps / self.steps if self.steps else None,
                "mean_step_ms": None if mean_step is None else mean_step * 1e3,
                "step_ms": step_ms,
                "write_mode": write_mode,
                "t_monotonic": time.monotonic(),
                "since_reset_s": time.monotonic() - self.t_reset,
            }
        )


class Stream:
    """One running streamed request: its pre-built event bytes and a countdown."""

    __slots__ = ("proto", "left", "event", "last_event", "tail")

    def __init__(self, proto: StubProtocol, total: int, event: bytes, last: bytes, tail: bytes):
        self.proto = proto
        self.left = total
        self.event = event
        self.last_event = last
        self.tail = tail


class StepClock:
    """The shared decode step: every step, every running stream emits one token."""

    def __init__(self, step_s: float, write_mode: str, stats: Stats) -> None:
        self.step_s = step_s
        self.write_mode = write_mode
        self.stats = stats
        self.streams: list[Stream] = []
        self._scheduled = False
        self._next_at = 0.0
        self._last_step = 0.0
        self.loop = asyncio.get_running_loop()

    def add(self, stream: Stream) -> None:
        self.streams.append(stream)
        st = self.stats
        st.running += 1
        st.max_running = max(st.max_running, st.running)
        if not self._scheduled:
            self._scheduled = True
            self._last_step = 0.0
            if self.step_s > 0:
                # the first token waits for the next step boundary
                self._next_at = self.loop.time() + self.step_s
                self.loop.call_at(self._next_at, self._step)
            else:
                self.loop.call_soon(self._step)

    def _step(self) -> None:
        now = time.monotonic()
        st = self.stats
        if self._last_step:
            st.step_time_s += now - self._last_step
            st.step_intervals += 1
        self._last_step = now
        st.steps += 1
        keep: list[Stream] = []
        emitted = 0
        for s in self.streams:
            tr = s.proto.transport
            if tr is None or tr.is_closing():
                st.running -= 1
                continue
            s.left -= 1
            emitted += 1
            if s.left > 0:
                tr.write(s.event)
                keep.append(s)
            else:
                if self.write_mode == "token":
                    tr.write(s.last_event)
                    tr.write(s.tail)
                else:
                    tr.write(s.last_event + s.tail)
                st.running -= 1
                st.requests_finished += 1
        st.tokens_streamed += emitted
        st.stream_steps += emitted
        self.streams = keep
        if not keep:
            self._scheduled = False
            return
        if self.step_s > 0:
            self._next_at += self.step_s
            if self._next_at < self.loop.time():  # overloaded: do not burst to catch up
                self._next_at = self.loop.time()
            self.loop.call_at(self._next_at, self._step)
        else:
            self.loop.call_soon(self._step)


_ids = itertools.count()


_BIG_BODY = 1 << 16
_PROMPT_KEY = b'"prompt":['


def _parse_request(body: bytes) -> dict[str, object]:
    """The request as a dict; a long token-id prompt is counted, not parsed (a
    100K-token body would otherwise cost this near-zero-cost server ~1 ms)."""
    i = body.find(_PROMPT_KEY) if len(body) > _BIG_BODY else -1
    numbers = i >= 0 and body[i + len(_PROMPT_KEY):i + len(_PROMPT_KEY) + 1] not in b'["'
    j = body.find(b"]", i) if numbers else -1
    if j < 0:
        return orjson.loads(body) if body else {}
    ids = body[i + len(_PROMPT_KEY):j]
    req = orjson.loads(body[:i] + b'"prompt":null' + body[j + 1:])
    req["prompt_len"] = ids.count(b",") + 1 if ids.strip() else 0
    return req


def _prompt_tokens(body: dict[str, object]) -> int:
    if isinstance(body.get("prompt_len"), int):
        return int(body["prompt_len"])  # type: ignore[call-overload]
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if prompt and isinstance(prompt[0], list):
            return sum(len(p) for p in prompt)
        if prompt and isinstance(prompt[0], str):
            return sum(len(str(p).split()) for p in prompt)
        return len(prompt)
    if isinstance(prompt, str):
        return len(prompt.split())
    msgs = body.get("messages")
    if isinstance(msgs, list):
        n = 0
        for m in msgs:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, str):
                n += len(c.split())
            elif isinstance(c, list):
                n += sum(len(str(p.get("text", "")).split()) for p in c if isinstance(p, dict))
        return n
    return 0


def _max_tokens(body: dict[str, object]) -> int:
    for key in ("max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if isinstance(v, int) and v > 0:
            return v
    return DEFAULT_OUTPUT_TOKENS


class StubProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive, Content-Length request bodies, one request at a time."""

    def __init__(self, server: StubServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.need = 0
        """Bytes the buffer must hold before the pending request is complete."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.need and len(self.buf) < self.need:
            return  # the rest of a known-length body: no rescan
        self.need = 0
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            lines = head.split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) < 2:
                self._send(_plain("400 Bad Request", b'{"error":"bad request line"}'))
                return
            method, target = parts[0], parts[1]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buf) < end + 4 + length:
                self.need = end + 4 + length
                return
            body = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            self.server.handle(self, method, target.split("?", 1)[0], body)

    def _send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


class StubServer:
    """Routes requests; holds the step clock and the counters."""

    def __init__(self, step_ms: float, write_mode: str) -> None:
        self.step_ms = step_ms
        self.write_mode = write_mode
        self.stats = Stats()
        self.clock: StepClock | None = None

    def handle(self, proto: StubProtocol, method: str, path: str, body: bytes) -> None:
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            try:
                req = _parse_request(body)
            except orjson.JSONDecodeError:
                proto._send(_plain("400 Bad Request", b'{"error":"body is not JSON"}'))
                return
            self._generate(proto, req, chat=path.endswith("chat/completions"))
        elif method == "GET" and path == "/v1/models":
            proto._send(
                _plain(
                    "200 OK",
                    orjson.dumps(
                        {
                            "object": "list",
                            "data": [
                                {
                                    "id": MODEL,
                                    "object": "model",
                                    "created": 0,
                                    "owned_by": "stub",
                                    "root": MODEL,
                                    "max_model_len": 1 << 20,
                                }
                            ],
                        }
                    ),
                )
            )
        elif method == "GET" and path in ("/health", "/ping"):
            proto._send(_plain("200 OK", b""))
        elif method == "GET" and path == "/metrics":
            proto._send(_plain("200 OK", b"", b"text/plain; version=0.0.4"))
        elif method == "GET" and path == "/stats":
            proto._send(_plain("200 OK", self.stats.as_json(self.step_ms, self.write_mode)))
        elif method == "POST" and path == "/stats/reset":
            running = self.stats.running
            self.stats = Stats(running=running, max_running=running)
            if self.clock is not None:
                self.clock.stats = self.stats
            proto._send(_plain("200 OK", b"{}"))
        else:
            proto._send(_plain("404 Not Found", b'{"error":"not found"}'))

    def _generate(self, proto: StubProtocol, req: dict[str, object], chat: bool) -> None:
        n = _max_tokens(req)
        p = _prompt_tokens(req)
        self.stats.requests_started += 1
        rid = b"%s-%d" % (b"chatcmpl" if chat else b"cmpl", next(_ids))
        created = int(time.time())
        head = b'{"id":"%s","object":"%s","created":%d,"model":"%s","choices":[' % (
            rid,
            b"chat.completion.chunk" if chat else b"text_completion",
            created,
            MODEL.encode(),
        )
        text = orjson.dumps(TOKEN_TEXT)
        if chat:
            choice = b'{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":%s}'
            tok = choice % (text, b"null")
            last = choice % (text, b'"length"')
        else:
            tok = b'{"index":0,"text":%s,"logprobs":null,"finish_reason":null}' % text
            last = b'{"index":0,"text":%s,"logprobs":null,"finish_reason":"length"}' % text
        usage = b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % (
            p,
            p + n,
            n,
        )
        if not req.get("stream"):
            obj = b'{"id":"%s","object":"%s","created":%d,"model":"%s","choices":[%s],%s}' % (
                rid,
                b"chat.completion" if chat else b"text_completion",
                created,
                MODEL.encode(),
                (
                    b'{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"length"}'
                    if chat
                    else b'{"index":0,"text":%s,"finish_reason":"length"}'
                )
                % orjson.dumps(TOKEN_TEXT * n),
                usage,
            )
            self.stats.requests_finished += 1
            self.stats.tokens_streamed += n
            proto._send(_plain("200 OK", obj))
            return
        opts = req.get("stream_options")
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        ev_tok = _chunk(b"data: " + head + tok + b"]}\n\n")
        ev_last = _chunk(b"data: " + head + last + b"]}\n\n")
        tail = b""
        if include_usage:
            tail += _chunk(b"data: " + head + b"]," + usage + b"}\n\n")
        tail += _chunk(b"data: [DONE]\n\n") + _LAST_CHUNK
        prelude = _HDR_SSE
        if chat:
            prelude += _chunk(
                b"data: "
                + head
                + b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
                b'"finish_reason":null}]}\n\n'
            )
        tr = proto.transport
        if tr is None:
            return
        if self.write_mode == "batch" and self.step_ms <= 0:
            tr.write(prelude + ev_tok * (n - 1) + ev_last + tail)
            self.stats.tokens_streamed += n
            self.stats.requests_finished += 1
            return
        tr.write(prelude)
        if self.clock is None:
            self.clock = StepClock(self.step_ms / 1e3, self.write_mode, self.stats)
        self.clock.add(Stream(proto, n, ev_tok, ev_last, tail))


async def serve(host: str, port: int, step_ms: float, write_mode: str) -> None:
    """Serve until cancelled."""
    server = StubServer(step_ms, write_mode)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: StubProtocol(server), host, port, backlog=1024)
    async with srv:
        await srv.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8900)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--write-mode", choices=("batch", "token"), default="batch")
    args = ap.parse_args()
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    try:
        runner(serve(args.host, args.port, args.step_ms, args.write_mode))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
