"""The seam between a run and whatever runs its lanes: the :class:`Executor` Protocol.

The run (:mod:`replay.load._run`) probes the server, writes the manifest, polls
``/metrics`` and shows the live view; an executor only runs the lanes: in the
driver's own loop (:class:`~replay.load._inprocess.InProcessExecutor`), in local
worker processes (``--workers``) or in Ray actors (``--ray``). Each gets one
:class:`Job` and hands finished records to the job's :class:`RecordSink`.

The order of calls is fixed: ``prepare`` (start workers; start-up is not
schedule lag), ``start(t0)`` at the run's origin, then ``finish(stop)`` which
returns once every lane has ended (window, drain, ``stop`` set, or cancelled).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from analysis.schema import WorkerInfo
from replay.load._dueclock import IdleShifts
from replay.load._health import LoopHealth
from replay.load._phases import Arrival, Target
from replay.load._settings import RunSettings
from replay.load._window_stop import WindowEnd
from traces import Session

__all__ = ["ExecOutcome", "Executor", "Job", "RecordSink", "raise_crash"]


class RecordSink(Protocol):
    """Where finished request records go (the run's writer and live view)."""

    def record(self, rec: Mapping[str, object]) -> None:
        """One record as a dict (lanes in the driver's process)."""

    def lines(self, lines: list[bytes]) -> None:
        """Records already serialised as JSON lines (from workers)."""


@dataclass(frozen=True)
class Job:
    """Everything an executor needs to run a run's lanes."""

    settings: RunSettings
    workload: str
    sessions: Sequence[Session]
    arrival: Arrival
    target: Target
    sink: RecordSink


@dataclass
class ExecOutcome:
    """How the lanes ended: stopped by the user, crashed (a bug, with the exception
    when it happened in this process), notes for the manifest's warnings, and the
    client's health and the window's coverage as the lanes saw them."""

    interrupted: bool = False
    crash: str | None = None
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)
    loops: list[LoopHealth] = field(default_factory=list)
    """Each event loop's health over the window (one per worker)."""
    lanes: int = 0
    done_early: int = 0
    """Load sources, and those that ran out of work before the window ended."""
    workers: list[WorkerInfo] = field(default_factory=list)
    """A split run's workers (``run.json`` ``worker_info``)."""
    window_end: WindowEnd | None = None
    """Where a stop rule ended the window early (None: it ran its planned length)."""
    idle_shifts: IdleShifts = field(default_factory=IdleShifts)
    """A scenario's system idle cap: its shifts, summed over the workers."""


def raise_crash(outcome: ExecOutcome) -> None:
    """Re-raise a crash, one way for every executor: the original exception when this
    process saw it, else a ``RuntimeError`` naming the worker and its error."""
    if outcome.error is not None:
        raise outcome.error
    if outcome.crash is not None:
        raise RuntimeError(outcome.crash)


class Executor(Protocol):
    """Runs a job's lanes; see the module docstring for the order of calls."""

    lead_ns: int
    """How long after ``prepare`` the origin is set, so every lane starts on time."""

    async def prepare(self) -> None:
        """Start whatever runs the lanes and wait until it is ready."""

    def start(self, t0_ns: int, t0_wall_ns: int) -> None:
        """Start the lanes with the run's origin (monotonic and wall clock)."""

    def load(self) -> tuple[int, int]:
        """``(requests in flight, lanes alive)`` now, for the live view."""

    def notes(self) -> list[str]:
        """Facts for the manifest's warnings once started (e.g. clock skews)."""

    async def finish(self, stop: asyncio.Event) -> ExecOutcome:
        """Wait until every lane has ended; setting ``stop`` ends them early."""
