"""The simulator's clock: runs ``Engine`` steps in real time and hands out their tokens.

The loop plans a step, sleeps until the step's absolute deadline (a chain of
deadlines on the monotonic clock, so lateness never accumulates) and then hands
each request its tokens (``deliver``). It also measures itself: per step, the
modelled duration (profile, after ``time_scale``) and the wall time the step
really took, from the end of the previous step, or, after idling, from the moment
work arrived, so event-loop delay before a step ran counts. ``slowdown`` stretches
every deadline (a deliberately late simulator); the modelled figure stays the
profile's. Totals feed ``vllm_sim:engine_step_*_seconds_total``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from replay.servers.sim._engine import Engine, SimRequest, StepResult
from replay.servers.sim._live import Live
from replay.servers.sim._prometheus import (
    ITL_BUCKETS,
    TTFT_BUCKETS,
    Histogram,
    PhaseHistograms,
)
from replay.servers.sim._truth import StepTruth

__all__ = ["StepLoop"]

_log = logging.getLogger(__name__)
_LATE_RESET_NS = 500_000_000
"""A step starting this late restarts the deadline chain from now (the loop was starved
for long); shorter lateness is caught up, so the mean step time stays exact."""


class StepLoop:
    """The engine's step loop and its clock (one per server)."""

    def __init__(self, engine: Engine, live: dict[SimRequest, Live], *, time_scale: float,
                 slowdown: float = 1.0,
                 on_step: Callable[[StepTruth], None] | None = None) -> None:
        self.engine = engine
        self.live = live
        self.time_scale = time_scale
        self.slowdown = slowdown
        self.on_step = on_step
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.phases = PhaseHistograms()
        self.model_s_total = 0.0
        """Sum of the steps' modelled durations (after time_scale)."""
        self.actual_s_total = 0.0
        """Sum of the wall time the steps really took."""
        self._wake = asyncio.Event()
        self._work_since_ns: int | None = None

    def notify(self) -> None:
        """Work was added to the engine: wake the loop if it idles (and note when)."""
        if not self._wake.is_set():
            self._work_since_ns = time.monotonic_ns()
            self._wake.set()

    async def run(self) -> None:
        """Step until cancelled; if the model raises, no stream is left hanging."""
        try:
            await self._steps()
        except Exception:
            _log.exception("simulator engine loop failed")
            self.stop_all()
            raise

    def stop_all(self) -> None:
        for live in self.live.values():
            live.stop()

    async def _steps(self) -> None:
        engine = self.engine
        stretch = self.slowdown * 1e9
        base: int | None = None  # deadline of the previous step of this busy period
        prev_end: int | None = None  # when the previous step delivered (or work arrived)
        while True:
            if not engine.has_work():
                self._wake.clear()
                await self._wake.wait()
                base = None
                prev_end = self._work_since_ns
            now = time.monotonic_ns()
            if prev_end is None:
                prev_end = now
            if base is None:
                base = prev_end
            start = base if now - base < _LATE_RESET_NS else now
            result = engine.step()
            model_s = result.duration_s / self.time_scale
            deadline = start + int(model_s * stretch)
            delay = deadline - time.monotonic_ns()
            await asyncio.sleep(delay / 1e9 if delay > 0 else 0)
            while (delay := deadline - time.monotonic_ns()) > 0:  # a timer may fire early
                await asyncio.sleep(delay / 1e9)
            end = time.monotonic_ns()
            actual_s = (end - prev_end) / 1e9
            self.model_s_total += model_s
            self.actual_s_total += actual_s
            self.deliver(result, start, end, int(model_s * 1e9), int(actual_s * 1e9))
            if self.on_step is not None:
                self.on_step(StepTruth.model_construct(
                    index=result.index, start_ns=start, end_ns=end, model_s=model_s,
                    actual_s=actual_s, decode_batch=result.decode_batch,
                    ctx_tokens=result.ctx_tokens, prefill_tokens=result.prefill_tokens,
                    emitted_tokens=sum(len(t) for _r, t in result.emissions)))
            prev_end = end
            base = deadline

    def deliver(self, result: StepResult, start_ns: int, end_ns: int, model_ns: int,
                actual_ns: int) -> None:
        """Hand a finished step's tokens to the handlers of its requests."""
        live_map = self.live
        step_tokens = 0
        for req in result.scheduled:
            live = live_map.get(req)
            if live is not None and live.scheduled_ns is None:
                # a step planned while the loop woke may start before a request that
                # joined it was stamped queued: never scheduled before queued (the truth
                # log's rule, so the queue-time histogram never goes negative)
                live.scheduled_ns = max(start_ns, live.queued_ns)
        for req, tokens in result.emissions:
            live = live_map.get(req)
            if live is None:
                continue
            live.pending.extend(tokens)
            live.emit_ns.append(end_ns)
            live.emit_tokens.append(len(tokens))
            live.step_start_ns.append(start_ns)
            live.step_model_ns.append(model_ns)
            live.step_actual_ns.append(actual_ns)
            step_tokens += len(tokens)
            if live.first_token_ns is None:
                step_tokens += req.num_prompt  # vLLM counts a prompt when it finishes
                live.first_token_ns = end_ns
                self.ttft.observe((end_ns - live.arrival_ns) / 1e9)
            else:
                self.itl.observe((end_ns - live.last_emit_ns) / 1e9)
            live.last_emit_ns = end_ns
            live.wake()
        if result.emissions:
            self.phases.iteration_tokens.observe(step_tokens)
        for req in result.finished:
            live = live_map.get(req)
            if live is not None:
                if live.first_token_ns is not None and live.scheduled_ns is not None:
                    self.phases.finished(live.queued_ns, live.scheduled_ns, live.first_token_ns,
                                         end_ns, req.num_output)
                live.finished = True
                live.wake()
