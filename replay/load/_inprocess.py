"""The default executor: every lane on the driver's own event loop.

It shares the driver's HTTP session (sized by :func:`connections_for`) and
hands each record straight to the sink, so a crash loses at most the requests
in flight. Its lanes send through the run's transport (HTTP, or the twin's
engines on simulated time).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp

from analysis import RecordDict
from replay.client import PrefixCacheModel, stream_request
from replay.load._context import LaneContext, PromptBuilder
from replay.load._executor import ExecOutcome, Job
from replay.load._phases import drive_lanes, make_context
from replay.load._transport import Transport
from replay.load._window_stop import WindowStop

__all__ = ["InProcessExecutor"]


class InProcessExecutor:
    """:class:`~replay.load._executor.Executor` running the lanes in this process."""

    lead_ns = 0

    def __init__(self, job: Job, session: aiohttp.ClientSession,
                 builder: PromptBuilder | None = None, *, transport: Transport = stream_request,
                 cache: PrefixCacheModel | None = None, probe_loop: bool = True,
                 window_stop: WindowStop | None = None) -> None:
        self.job = job
        self.session = session
        self.builder = builder
        self.transport = transport
        self.cache = cache
        self.probe_loop = probe_loop
        self.window_stop = window_stop
        self.ctx: LaneContext | None = None
        self.stop_event = asyncio.Event()
        self.task: asyncio.Task[ExecOutcome] | None = None

    async def prepare(self) -> None:
        return None

    def start(self, t0_ns: int, t0_wall_ns: int) -> None:
        job = self.job
        self.ctx = make_context(job.settings, job.target, self.session, t0_ns,
                                self._on_record(), build=self.builder, transport=self.transport,
                                cache=self.cache)
        self.task = asyncio.create_task(self._drive(self.ctx))

    def _on_record(self) -> Callable[[RecordDict], None]:
        """Where the lanes hand each record: the run's sink, and the stop rule if any."""
        sink, rule = self.job.sink.record, self.window_stop
        if rule is None:
            return sink

        def both(rec: RecordDict) -> None:  # the rule sees what the run stores
            sink(rec)
            rule.record(rec)

        return both

    async def _drive(self, ctx: LaneContext) -> ExecOutcome:
        job = self.job
        lanes = await drive_lanes(ctx, job.settings, job.arrival, job.sessions, self.stop_event,
                                  probe_loop=self.probe_loop, window_stop=self.window_stop)
        crash = lanes.crash
        return ExecOutcome(interrupted=lanes.interrupted, error=crash,
                           crash=None if crash is None else repr(crash), loops=[lanes.health],
                           lanes=lanes.lanes, done_early=lanes.done_early,
                           window_end=lanes.window_end, idle_shifts=lanes.idle_shifts)

    def load(self) -> tuple[int, int]:
        ctx = self.ctx
        return (0, 0) if ctx is None else (ctx.state.busy, ctx.state.lanes)

    def notes(self) -> list[str]:
        return []

    async def finish(self, stop: asyncio.Event) -> ExecOutcome:
        assert self.task is not None, "start() first"
        relay = asyncio.create_task(_relay(stop, self.stop_event))
        try:
            return await asyncio.shield(self.task)
        except asyncio.CancelledError:
            self.stop_event.set()
            await asyncio.gather(self.task, return_exceptions=True)
            raise
        finally:
            relay.cancel()


async def _relay(src: asyncio.Event, dst: asyncio.Event) -> None:
    await src.wait()
    dst.set()
