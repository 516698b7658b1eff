"""``--ray ADDRESS|auto|local``: the run's workers as Ray actors (``agentreplay[ray]``).

Actors are spread over the cluster's alive nodes, round robin (node affinity).
The workload goes to them through the object store (``ray.put``), not as a path
each node would need; each actor parses it before the origin is fixed. Each runs
:func:`replay.load._remote.run_plan` on its own event loop and keeps finished
records and announced requests until the driver takes them, every ``_POLL_S``;
the driver writes them into the one run directory. Actors may run on other hosts,
so each gets the run's origin on the wall clock corrected by its measured skew
(half a round trip of uncertainty), and measures durations on its own monotonic
clock. Node, host and skew of each go into ``run.json`` (``worker_info``).

No call to an actor is awaited without a timeout: an actor whose calls fail (it
or its node died) or that answers none for ``_SILENT_S`` (stopped, partitioned) is
lost and killed; after a stop request every actor gets ``_HALT_S`` to end.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from analysis.schema import WorkerInfo
from analysis.text import plural
from replay.errors import ConfigError
from replay.load._executor import Job
from replay.load._remote import WorkerExecutor, WorkerPlan, parse_workload, run_plan
from traces import Session

__all__ = ["RayExecutor"]

_POLL_S = 0.05
_START_S = 120.0
"""How long an actor may take to be placed, answer and parse the workload."""
_CALL_S = 5.0
"""How long one ``take`` may take before it counts as unanswered."""
_SILENT_S = 10.0
"""An actor that answers no call for this long is lost (and killed)."""
_HALT_S = 10.0
"""After a stop request, how long an actor may take to end."""


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
        self.planned: list[bytes] = []
        self.busy = 0
        self.lanes = 0
        self.stop: asyncio.Event | None = None
        self.sessions: list[Session] | None = None

    async def clock(self) -> tuple[int, str, str, int]:
        """``(wall clock ns, node id, hostname, pid)``."""
        import ray

        return (time.time_ns(), ray.get_runtime_context().get_node_id(), socket.gethostname(),
                os.getpid())

    async def load(self, workload: bytes, name: str) -> int:
        """Parse the workload shipped through the object store; its session count."""
        with tempfile.TemporaryDirectory(prefix="agentreplay-") as tmp:
            path = Path(tmp) / name
            path.write_bytes(workload)
            self.sessions = await asyncio.to_thread(parse_workload, str(path))
        return len(self.sessions)

    async def run(self, plan: WorkerPlan) -> dict[str, object]:
        self.stop = asyncio.Event()

        def emit(lines: list[bytes], busy: int, lanes: int, planned: list[bytes]) -> None:
            self.buf.extend(lines)
            self.planned.extend(planned)
            self.busy = busy
            self.lanes = lanes

        return await run_plan(plan, emit, self.stop, self.sessions)

    async def take(self) -> tuple[list[bytes], int, int, list[bytes]]:
        out, self.buf = self.buf, []
        ahead, self.planned = self.planned, []
        return out, self.busy, self.lanes, ahead

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
        n = len(self.plans)
        self.skew_ns = [0] * n
        self.rtt_ns = [0] * n
        self.where: list[tuple[str, str, int]] = [("", "", 0)] * n
        self.runs: list[Any] = []
        self.halt_by: float | None = None

    def _join(self) -> Any:
        ray = self.ray = _ray()
        if not ray.is_initialized():
            try:
                if self.address == "local":
                    ray.init(include_dashboard=False, log_to_driver=False)
                else:
                    ray.init(address=self.address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(f"--ray {self.address}: cannot join the Ray cluster: "
                                  f"{exc}") from None
        return ray

    async def prepare(self) -> None:
        """Join the cluster, place the actors (spread over nodes), measure each one's
        wall-clock skew (best of 3 round trips), ship and parse the workload."""
        ray = self._join()
        remote = ray.remote(num_cpus=0, max_restarts=0)(_Actor)
        self.actors = [remote.options(scheduling_strategy=s).remote() for s in self._spread()]
        try:
            workload = ray.put(Path(self.job.workload).read_bytes())
            name = Path(self.job.workload).name
            await self._call_all(self._clock, "answer")
            await self._call_all(lambda w: self.actors[w].load.remote(workload, name),
                                 "parse the workload")
        except BaseException:
            self._kill_all()
            raise

    def _spread(self) -> list[Any]:
        """Worker ``w`` on alive node ``w % nodes`` (node affinity: Ray's ``SPREAD`` and
        soft affinity both packed resource-less actors on one node)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = sorted(n["NodeID"] for n in self.ray.nodes() if n.get("Alive"))
        if not nodes:
            return ["SPREAD"] * len(self.plans)
        return [NodeAffinitySchedulingStrategy(nodes[w % len(nodes)], soft=False)
                for w in range(len(self.plans))]

    async def _call_all(self, call: Any, what: str) -> None:
        async def one(w: int) -> None:
            try:
                await asyncio.wait_for(call(w), _START_S)
            except TimeoutError:
                raise ConfigError(
                    f"--ray {self.address}: worker {w} did not {what} within {_START_S:.0f} s "
                    "(no node with room for it? see `ray status`)") from None
            except self.ray.exceptions.RayError as exc:
                raise ConfigError(f"--ray {self.address}: worker {w} failed to {what}: "
                                  f"{exc}") from None

        await asyncio.gather(*(one(w) for w in range(len(self.actors))))

    async def _clock(self, w: int) -> None:
        best: tuple[int, int] | None = None
        for _ in range(3):
            a = time.time_ns()
            theirs, node, host, pid = await self.actors[w].clock.remote()
            b = time.time_ns()
            if best is None or b - a < best[1]:
                best = (theirs - (a + b) // 2, b - a)
            self.where[w] = (node, host, pid)
        assert best is not None
        self.skew_ns[w], self.rtt_ns[w] = best

    def _go(self, t0_ns: int, t0_wall_ns: int) -> None:
        self.runs = [
            actor.run.remote(replace(plan, t0_ns=None, t0_wall_ns=t0_wall_ns + self.skew_ns[w]))
            for w, (actor, plan) in enumerate(zip(self.actors, self.plans, strict=True))
        ]

    def notes(self) -> list[str]:
        nodes = len({node for node, _, _ in self.where})
        return [f"ray workers: {plural(len(self.plans), 'actor')} on {plural(nodes, 'node')}; "
                "wall-clock skews "
                "against the driver are corrected at the origin (run.json worker_info)"]

    def worker_info(self) -> list[WorkerInfo]:
        return [info.model_copy(update={
            "node_id": self.where[w][0] or None, "hostname": self.where[w][1] or None,
            "skew_s": self.skew_ns[w] / 1e9, "round_trip_s": self.rtt_ns[w] / 1e9})
            for w, info in enumerate(super().worker_info())]

    def _halt(self) -> None:
        if self.halt_by is None:
            self.halt_by = time.monotonic() + _HALT_S
        for actor in self.actors:
            actor.halt.remote()  # not awaited: a stopped actor must not hold the driver

    def _kill_all(self) -> None:
        for actor in self.actors:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone, or its node is
                pass

    def _lose(self, w: int, why: str) -> None:
        self.lose(w, why)
        try:
            self.ray.kill(self.actors[w], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone, or its node is
            pass

    async def _watch(self, w: int, run: asyncio.Future[Any]) -> None:
        """Take worker ``w``'s batches until it ends or is lost (see the module docstring)."""
        ray, actor = self.ray, self.actors[w]
        heard = time.monotonic()
        while True:
            finished = run.done()  # then this take sees its last records
            try:
                got = await asyncio.wait_for(actor.take.remote(), _CALL_S)
            except TimeoutError:
                got = None
            except ray.exceptions.RayError as exc:
                self._lose(w, f"died ({type(exc).__name__})")
                return
            now = time.monotonic()
            if got is not None:
                lines, busy, lanes, planned = got
                self.tally.batch(w, lines, busy, lanes, planned)
                heard = now
                if finished:
                    try:
                        self.tally.results[w] = run.result()
                    except ray.exceptions.RayError as exc:
                        self._lose(w, f"died ({type(exc).__name__})")
                    return
            if now - heard > _SILENT_S:
                self._lose(w, f"stopped answering for {_SILENT_S:.0f} s and was killed")
                return
            if self.halt_by is not None and now > self.halt_by:
                self._lose(w, f"did not stop within {_HALT_S:.0f} s and was killed")
                return
            await asyncio.wait({run}, timeout=_POLL_S)

    async def _wait(self, deadline_s: float) -> None:
        runs = [asyncio.ensure_future(ref) for ref in self.runs]
        watchers = {w: asyncio.create_task(self._watch(w, run)) for w, run in enumerate(runs)}
        try:
            await asyncio.wait(watchers.values(), timeout=max(deadline_s, 0.1))
        finally:
            for w, task in watchers.items():
                if not task.done():
                    task.cancel()
                    self._lose(w, "did not finish in time and was killed")
            await asyncio.gather(*watchers.values(), return_exceptions=True)
            for run in runs:
                run.cancel()
            self._kill_all()
