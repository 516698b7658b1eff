"""Chunk timestamps are per socket read, against the real vLLM server.

vLLM often puts several SSE events in one TCP segment, so several token chunks
arrive in one read and share a timestamp; per-chunk ITL then reads 0 for them.
The analysis reports "share of chunks in the same read" and "ITL over reads",
which are only right if the client stamps once per read and never splits or
merges reads. A proxy between client and server makes the reads known: it
forwards the server's bytes in bursts (everything that arrived in a 25 ms
window, cut at event boundaries into pieces of at most 16 KiB), 15 ms apart.
The client's runs of equal timestamps must then be the bursts' token-event
counts: never part of a burst, whole bursts merged only when the client's loop
was late (it stamps when it reads; on a loaded machine that happens). The
analysis's same-read share and ITL over reads follow from them.
"""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path

import numpy as np
import orjson
import pytest

from analysis import measure, read_run, summarize
from replay.load import RunSettings, run_load_sync
from replay.servers.launch._launcher import LaunchedArm
from traces import Request, Session, WorkloadHeader, write_workload

pytestmark = pytest.mark.vllm

WINDOW_S = 0.025
GAP_S = 0.015
MAX_BURST = 16 * 1024
"""A burst is written in one go and well under the 64 KiB the client reads at a time,
so it arrives as one read; a larger one (a starved proxy gathering the whole answer)
would be read in two and its stamps would rightly split it."""
_EVENT = re.compile(rb"data: (\{.*\})")


class BurstProxy:
    """A TCP proxy that forwards the server's answers in timed bursts (own thread)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.bursts: list[bytes] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.listen_port = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.listen_port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()
        server.close()
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self.loop.run_until_complete(server.wait_closed())
        self.loop.close()

    async def _handle(self, creader: asyncio.StreamReader,
                      cwriter: asyncio.StreamWriter) -> None:
        ureader, uwriter = await asyncio.open_connection(self.host, self.port)

        async def up() -> None:
            while data := await creader.read(65536):
                uwriter.write(data)
                await uwriter.drain()
            uwriter.close()

        async def down() -> None:
            loop = asyncio.get_running_loop()
            buf = b""
            while data := await ureader.read(65536):
                buf += data
                deadline = loop.time() + WINDOW_S
                while (left := deadline - loop.time()) > 0:
                    try:
                        more = await asyncio.wait_for(ureader.read(65536), left)
                    except TimeoutError:
                        break
                    if not more:
                        break
                    buf += more
                while b"\n\n" in buf:  # whole events only, at most MAX_BURST each
                    out, buf = _cut(buf)
                    await send(out)
            while buf:
                out, buf = _cut(buf) if b"\n\n" in buf else (buf, b"")
                await send(out)
            cwriter.close()

        async def send(out: bytes) -> None:
            self.bursts.append(out)
            cwriter.write(out)
            await cwriter.drain()
            await asyncio.sleep(GAP_S)

        try:
            await asyncio.gather(up(), down(), return_exceptions=True)
        finally:
            for w in (cwriter, uwriter):
                w.close()

    def __enter__(self) -> BurstProxy:
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _cut(buf: bytes) -> tuple[bytes, bytes]:
    """The longest run of whole events up to MAX_BURST bytes (one event if it alone is
    longer), and the rest."""
    cut = buf.rfind(b"\n\n", 0, MAX_BURST - 1) + 2
    if cut < 2:
        cut = buf.index(b"\n\n") + 2
    return buf[:cut], buf[cut:]


def _token_events(burst: bytes) -> int:
    """Events of a burst that carry output tokens."""
    n = 0
    for part in burst.split(b"\n\n"):
        m = _EVENT.search(part)
        if not m:
            continue
        obj = orjson.loads(m.group(1))
        choices = obj.get("choices") or []
        if choices and (choices[0].get("text") or choices[0].get("token_ids")):
            n += 1
    return n


def _runs(values: list[float]) -> list[int]:
    out: list[int] = []
    for i, v in enumerate(values):
        if i and v == values[i - 1]:
            out[-1] += 1
        else:
            out.append(1)
    return out


def test_chunk_timestamps_follow_socket_reads(vllm_server: LaunchedArm, tmp_path: Path) -> None:
    workload = tmp_path / "w.jsonl"
    reqs = (Request(prompt_tokens=200, output_tokens=300, new_block_ids=(1, 2),
                    arrival_s=0.0),)
    write_workload(workload, WorkloadHeader(source="hand-built", seed=0, block_size=128,
                                            arrival="open"),
                   [Session(id="s", requests=reqs)])  # open arrival: replayed once
    port = int(vllm_server.url.rsplit(":", 1)[1])
    with BurstProxy("127.0.0.1", port) as proxy:
        settings = RunSettings(target=f"http://127.0.0.1:{proxy.listen_port}", users=1,
                               duration_s=60.0, drain_s=30.0, metrics_interval_s=None)
        out = run_load_sync(settings, workload, tmp_path / "run")
    (rec,) = [orjson.loads(x) for x in (out / "requests.jsonl").read_bytes().splitlines()]
    assert rec["status"] == "ok", rec
    per_burst = [n for n in (_token_events(b) for b in proxy.bursts) if n]
    assert sum(per_burst) == len(rec["chunk_times_s"])
    assert max(per_burst) > 1, "the proxy should have coalesced events"
    per_stamp = _runs(rec["chunk_times_s"])
    # Chunks of one read share one stamp, and a stamp never spans part of a read. Reads
    # that arrived while the client's loop was busy are taken in one go (the stamp is
    # when the client got them), so stamps may merge whole reads, rarely on a quiet loop.
    assert set(np.cumsum(per_stamp)) <= set(np.cumsum(per_burst))
    # The race, stated: the proxy is a thread of this process (it shares the GIL with the
    # client), so on a starved machine it may gather the whole answer into one burst, and
    # then there is nothing to tell apart; with several bursts the stamps must be several.
    if len(per_burst) > 1:
        assert len(per_stamp) > 1, "one stamp for the whole stream: reads were not told apart"

    # What the analysis makes of it: the same-read share counts the coalesced chunks
    # (after the first), and ITL over reads has no gaps of 0 from coalescing.
    summary = summarize(measure(read_run(out)), bootstrap=False, tiers=())
    later = len(rec["chunk_times_s"]) - 1
    assert summary.chunks_same_read_share == pytest.approx(
        (later - (len(per_stamp) - 1)) / later)
    # ITL over reads: tokens that came in the first token's read arrived with it (gaps of
    # 0 by definition); every later read gives gaps > 0. So its median is > 0 exactly when
    # fewer than half the later tokens shared the first read: on a loaded machine the
    # client may take most of the stream in one go, and then the median is 0, rightly.
    assert summary.itl_reads is not None and summary.itl_reads.p50 is not None
    with_first = per_stamp[0] - 1
    if with_first < later / 2:
        assert summary.itl_reads.p50 > 0
    elif with_first > later / 2:
        assert summary.itl_reads.p50 == 0
