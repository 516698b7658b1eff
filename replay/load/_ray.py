"""``--ray ADDRESS|auto|local``: the run's workers as Ray actors (``agentreplay[ray]``).

Each actor runs :func:`replay.load._remote.run_plan` on its own event loop and keeps
finished records (serialised) until the driver takes them, every ``_POLL_S``;
the driver writes them into the one run directory. Actors may run on other
hosts, so each gets the run's origin on the wall clock corrected by its
measured skew (half a round trip of uncertainty), and measures durations on its
own monotonic clock. The skews go into the manifest.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from replay.errors import ConfigError
from replay.load._executor import Job
from replay.load._remote import WorkerExecutor, WorkerPlan, run_plan

__all__ = ["RayExecutor"]

_POLL_S = 0.05
_START_S = 120.0
"""How long an actor may take to answer its first call."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'agentreplay[ray]'") from None
    return ray


class _Actor:
    """The worker side (wrapped by ``ray.remote`` at first use)."""

    def __init__(self) -> None:
        self.buf: list[bytes] = []
        self.busy = 0
        self.lanes = 0
        self.stop: asyncio.Event | None = None

    async def clock(self) -> int:
        return time.time_ns()

    async def run(self, plan: WorkerPlan) -> dict[str, object]:
        self.stop = asyncio.Event()

        def emit(lines: list[bytes], busy: int, lanes: int) -> None:
            self.buf.extend(lines)
            self.busy = busy
            self.lanes = lanes

        return await run_plan(plan, emit, self.stop)

    async def take(self) -> tuple[list[bytes], int, int]:
        out, self.buf = self.buf, []
        return out, self.busy, self.lanes

    async def halt(self) -> None:
        if self.stop is not None:
            self.stop.set()


class RayExecutor(WorkerExecutor):
    """:class:`~replay.load._executor.Executor` over Ray actors."""

    def __init__(self, job: Job) -> None:
        super().__init__(job)
        assert job.settings.ray is not None
        self.address = job.settings.ray
        self.ray: Any = None
        self.actors: list[Any] = []
        self.skew_ns = [0] * len(self.plans)
        self.rtt_ns = [0] * len(self.plans)
        self.runs: list[Any] = []

    async def prepare(self) -> None:
        """Join the cluster, create the actors, measure each one's wall-clock skew
        (best of 3 round trips)."""
        ray = self.ray = _ray()
        address = self.address
        if not ray.is_initialized():
            try:
                if address == "local":
                    ray.init(include_dashboard=False, log_to_driver=False)
                else:
                    ray.init(address=address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(f"--ray {address}: cannot join the Ray cluster: {exc}") from None
        remote = ray.remote(num_cpus=0)(_Actor)
        self.actors = [remote.options(name=None).remote() for _ in self.plans]
        for w, actor in enumerate(self.actors):
            best: tuple[int, int] | None = None
            for _ in range(3):
                a = time.time_ns()
                theirs = await asyncio.wait_for(actor.clock.remote(), _START_S)
                b = time.time_ns()
                if best is None or b - a < best[1]:
                    best = (theirs - (a + b) // 2, b - a)
            assert best is not None
            self.skew_ns[w], self.rtt_ns[w] = best

    def _go(self, t0_ns: int, t0_wall_ns: int) -> None:
        self.runs = [
            actor.run.remote(replace(plan, t0_ns=None, t0_wall_ns=t0_wall_ns + self.skew_ns[w]))
            for w, (actor, plan) in enumerate(zip(self.actors, self.plans, strict=True))
        ]

    def notes(self) -> list[str]:
        parts = ", ".join(f"worker {w} {s / 1e6:+.3f} ms (round trip {r / 1e6:.3f} ms)"
                          for w, (s, r) in enumerate(zip(self.skew_ns, self.rtt_ns, strict=True)))
        return [f"ray workers: wall-clock skew against the driver, corrected at the origin "
                f"(cross-worker times are aligned to within half a round trip): {parts}"]

    def _halt(self) -> None:
        for actor in self.actors:
            actor.halt.remote()

    async def _take(self, w: int) -> None:
        lines, busy, lanes = await self.actors[w].take.remote()
        self.tally.batch(w, lines, busy, lanes)

    async def _wait(self, deadline_s: float) -> None:
        ray = self.ray
        pending = {w: asyncio.ensure_future(ref) for w, ref in enumerate(self.runs)}
        end = time.monotonic() + max(deadline_s, 0.1)
        try:
            while pending and time.monotonic() < end:
                await asyncio.wait(pending.values(), timeout=_POLL_S)
                for w in list(pending):
                    fut = pending[w]
                    finished = fut.done()  # then this take sees its last records
                    try:
                        await self._take(w)
                    except ray.exceptions.RayError:
                        pass
                    if not finished:
                        continue
                    del pending[w]
                    try:
                        self.tally.results[w] = fut.result()
                    except ray.exceptions.RayError as exc:
                        self.tally.lost[w] = f"died ({type(exc).__name__})"
            for w, fut in pending.items():
                fut.cancel()
                self.tally.lost[w] = "did not finish in time and was killed"
        finally:
            for actor in self.actors:
                ray.kill(actor)
