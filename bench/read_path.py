"""Client CPU per streamed token on the read path alone: no sockets, no server.

Why: on a shared host the throughput runs of ``bench/peers.py`` swing by more than
a client change moves them (a starved client reads several events per read and
looks cheaper per token), so a change to the read path is compared here, on the
process's CPU clock, with the server and the kernel left out.

One connection (``replay.client._wire._Wire``) is fed what the stub server
(``bench/_stub_server.py``) sends for a 256-token ``/v1/completions`` stream with
usage: the head, then the body cut three ways:

- ``event``: one SSE event per ``data_received`` (token and stream mode: one event
  per packet);
- ``4 events``: four events per read (a client that fell a little behind);
- ``whole``: the whole body in one read (batch mode).

Each request runs through ``Exchange`` and ``EventReader`` as in a run (timers
armed on the running loop, records not written). Printed: the best of
``--repeats`` of CPU nanoseconds per token for each shape.

    python bench/read_path.py                 # ~10 s
    python bench/read_path.py --requests 100  # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from replay.client._events import EventReader  # noqa: E402
from replay.client._exchange import Exchange  # noqa: E402
from replay.client._outcome import StreamOutcome, Timeouts  # noqa: E402
from replay.client._wire import _Wire  # noqa: E402

TOKENS = 256
_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
         b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def stub_events() -> list[bytes]:
    """The body's HTTP chunks, as the stub frames them (one SSE event each)."""
    head = (b'{"id":"cmpl-1","object":"text_completion","created":1764900000,'
            b'"model":"stub","choices":[')
    tok = b'{"index":0,"text":" token","logprobs":null,"finish_reason":%s}'
    usage = b'"usage":{"prompt_tokens":100,"total_tokens":356,"completion_tokens":256}'
    events = [_chunk(b"data: " + head + tok % b"null" + b"]}\n\n")] * (TOKENS - 1)
    events.append(_chunk(b"data: " + head + tok % b'"length"' + b"]}\n\n"))
    events.append(_chunk(b"data: " + head + b"]," + usage + b"}\n\n"))
    events.append(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    return events


class _Sink:
    """A transport that swallows the request."""

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def reads(per_read: int) -> list[bytes]:
    """The head, then the body ``per_read`` events per read (0: all in one)."""
    events = stub_events()
    if per_read <= 0:
        return [_HEAD, b"".join(events)]
    return [_HEAD] + [b"".join(events[i:i + per_read]) for i in range(0, len(events), per_read)]


async def cpu_ns_per_token(per_read: int, requests: int, repeats: int) -> float:
    """Best of ``repeats``: process CPU ns per token over ``requests`` answers."""
    loop = asyncio.get_running_loop()
    wire = _Wire()
    wire.connection_made(_Sink())  # type: ignore[arg-type]
    pieces = reads(per_read)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time_ns()
        for _ in range(requests):
            out = StreamOutcome()
            ex = Exchange(out, EventReader(out, 1 << 26, True, TOKENS), Timeouts(),
                          time.monotonic_ns(), loop)
            wire.start(ex, b"")
            ex.arm()
            feed = wire.data_received
            for piece in pieces:
                feed(piece)
            if not (out.done and out.status == "ok" and out.streamed_tokens == TOKENS):
                raise RuntimeError(f"the read path lost the answer: {out.status} "
                                   f"{out.error_message}")
        best = min(best, (time.process_time_ns() - t0) / (requests * TOKENS))
    return best


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--requests", type=int, default=400, help="answers per repeat")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    for name, per_read in (("event", 1), ("4 events", 4), ("whole", 0)):
        ns = asyncio.run(cpu_ns_per_token(per_read, args.requests, args.repeats))
        print(f"read_path {name:<8} {ns:7.0f} CPU-ns per token  "
              f"({1e9 / ns:,.0f} tok/CPU-s on this path alone)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
