"""What local worker processes and Ray actors share: the worker's side and the tally.

Users are dealt round robin (user ``u`` to worker ``u % N``) and keep their
single-process numbers, so sessions, salts and the request set are those of a
one-process run. Each worker has its own prefix-cache model, so the expected
reuse of the *shared* prefix is counted once per worker instead of once per run.

A worker runs :func:`run_plan`: its share of the lanes through
:func:`~replay.load._phases.drive_lanes` on its own loop, sending finished
records back already serialised, in small batches (every ``_FLUSH_S``). The
driver appends them to the one ``requests.jsonl`` (flushed per batch, so a
crash loses at most the requests in flight plus one batch interval).

Clocks: local workers share the host's monotonic clock and use the driver's
origin as is. Ray workers may sit on other hosts: their origin is the driver's
wall-clock origin corrected by the skew measured with a round trip, and
durations stay local (monotonic). Workers parse the workload before they say
they are ready, so the origin is fixed after every worker could start on time.

A worker announces each request when it becomes due (``_lost``); one that dies,
is killed or stops answering is *lost*: its requests in flight or due become
``lost`` records, and ``run.json`` says so (``worker_info``, warnings), which
makes the run invalid (``worker_lost``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from analysis import RecordDict
from analysis.schema import WorkerInfo
from analysis.text import plural, verb
from replay.client import make_session
from replay.load._executor import ExecOutcome, Job, RecordSink
from replay.load._health import LoopHealth
from replay.load._lost import InFlight, planned_record
from replay.load._phases import Target, connections_for, drive_lanes, make_context
from replay.load._settings import RunSettings
from traces import Session, iter_sessions

__all__ = ["Tally", "WorkerExecutor", "WorkerPlan", "make_plans", "parse_workload", "run_plan",
           "split_users"]

_NS = 1_000_000_000
_FLUSH_S = 0.01
_GRACE_S = 30.0
"""How long past the end of the drain the driver waits for a worker to report."""

Emit = Callable[[list[bytes], int, int, list[bytes]], None]
"""``(serialised records, requests in flight, lanes, requests announced)``: a worker's
batch (announced: serialised ``lost`` records, see ``_lost``)."""


def split_users(users: int, workers: int) -> list[tuple[int, ...]]:
    """User numbers per worker, dealt round robin (``u`` goes to ``u % workers``)."""
    return [tuple(range(w, users, workers)) for w in range(workers)]


@dataclass(frozen=True)
class WorkerPlan:
    """Everything one worker needs; plain data so it pickles to a process or actor."""

    index: int
    users: tuple[int, ...]
    settings_json: str
    workload: str
    target: Target
    connections: int
    t0_wall_ns: int = 0
    """The driver's origin on the wall clock (already corrected for this worker's skew)."""
    t0_ns: int | None = None
    """The driver's monotonic origin, when the worker shares the driver's host."""


def make_plans(job: Job) -> list[WorkerPlan]:
    """One plan per worker, its users dealt round robin."""
    settings = job.settings
    blob = settings.model_dump_json()
    return [
        WorkerPlan(index=w, users=users, settings_json=blob, workload=job.workload,
                   target=job.target, connections=connections_for(len(users), job.sessions))
        for w, users in enumerate(split_users(settings.users, settings.workers))
    ]


def _origin(plan: WorkerPlan) -> int:
    if plan.t0_ns is not None:
        return plan.t0_ns
    return time.monotonic_ns() - (time.time_ns() - plan.t0_wall_ns)


def parse_workload(path: str) -> list[Session]:
    """A worker's sessions, parsed (and checked) before the origin is fixed."""
    return list(iter_sessions(path))


async def run_plan(plan: WorkerPlan, emit: Emit, stop: asyncio.Event,
                   sessions: list[Session] | None = None) -> dict[str, object]:
    """Run one worker's users through warmup, window and drain; records go to ``emit``.
    Returns ``{"interrupted", "crash", "records", "health", "lanes", "done_early",
    "idle_shifts", "idle_shifted_s"}``
    (plain JSON: it travels through a pipe or Ray)."""
    settings = RunSettings.model_validate_json(plan.settings_json)
    if sessions is None:
        sessions = parse_workload(plan.workload)
    t0_ns = _origin(plan)
    buf: list[bytes] = []
    planned: list[bytes] = []
    sent = 0
    dumps = orjson.dumps

    def on_record(rec: RecordDict) -> None:
        buf.append(dumps(rec))

    def on_plan(*args: Any) -> None:
        planned.append(dumps(planned_record(*args)))

    async with make_session(plan.connections, connect_s=settings.connect_timeout_s) as session:
        ctx = make_context(settings, plan.target, session, t0_ns, on_record, worker=plan.index)
        ctx.on_plan = on_plan

        def flush() -> None:
            nonlocal buf, sent, planned
            if buf or planned:
                out, buf = buf, []
                ahead, planned = planned, []
                sent += len(out)
                emit(out, ctx.state.busy, ctx.state.lanes, ahead)

        async def pump() -> None:
            while True:
                await asyncio.sleep(_FLUSH_S)
                flush()

        pumper = asyncio.create_task(pump())
        try:
            lanes = await drive_lanes(ctx, settings, "closed", sessions, stop, plan.users)
        finally:
            pumper.cancel()
            await asyncio.gather(pumper, return_exceptions=True)
            flush()
    return {"interrupted": lanes.interrupted, "records": sent,
            "crash": repr(lanes.crash) if lanes.crash is not None else None,
            "health": lanes.health.to_json(), "lanes": lanes.lanes,
            "done_early": lanes.done_early, "idle_shifts": lanes.idle_shifts.count,
            "idle_shifted_s": lanes.idle_shifts.seconds}


@dataclass(eq=False)
class Tally:
    """The driver's view of its workers: live counts, what each has in flight, how
    each ended (``lost``: why, ``lost_requests``: its ``lost`` records)."""

    sink: RecordSink
    busy: list[int] = field(default_factory=list)
    lanes: list[int] = field(default_factory=list)
    results: dict[int, dict[str, object]] = field(default_factory=dict)
    lost: dict[int, str] = field(default_factory=dict)
    lost_requests: dict[int, int] = field(default_factory=dict)
    inflight: InFlight = field(default_factory=lambda: InFlight(0))

    @classmethod
    def of(cls, sink: RecordSink, workers: int) -> Tally:
        return cls(sink, busy=[0] * workers, lanes=[0] * workers, inflight=InFlight(workers))

    def batch(self, w: int, lines: list[bytes], busy: int, lanes: int,
              planned: list[bytes] | None = None) -> None:
        self.busy[w] = busy
        self.lanes[w] = lanes
        self.inflight.update(w, planned or [], lines)
        if lines:
            self.sink.lines(lines)

    def lose(self, w: int, why: str, now_s: float) -> None:
        """Worker ``w`` is lost (first reason kept): its requests in flight or due by
        ``now_s`` (run time) are written as ``lost`` records."""
        if w in self.lost or w in self.results:
            return
        self.lost[w] = why
        lines = self.inflight.lose(w, now_s, why)
        self.lost_requests[w] = len(lines)
        if lines:
            self.sink.lines(lines)
        self.busy[w] = self.lanes[w] = 0

    def load(self) -> tuple[int, int]:
        return sum(self.busy), sum(self.lanes)


class WorkerExecutor:
    """What the process and Ray executors share: plans, tally, the end of the run.

    Subclasses start their workers in ``prepare``, hand them their plans in
    ``_go`` and implement ``_halt`` (ask every worker to stop) and ``_wait``
    (until every worker has ended or ``deadline_s`` passed; the ones left are
    killed and lost: ``lose``).
    """

    lead_ns = 50_000_000
    """The origin is set this far after the last worker is ready, so all start on time."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.plans = make_plans(job)
        self.tally = Tally.of(job.sink, len(self.plans))
        settings = job.settings
        self.span_ns = int((settings.warmup_s + settings.duration_s + settings.drain) * _NS)
        self.end_ns = 0
        self.t0_ns = 0

    def start(self, t0_ns: int, t0_wall_ns: int) -> None:
        self.t0_ns = t0_ns
        self.end_ns = t0_ns + self.span_ns
        self._go(t0_ns, t0_wall_ns)

    def load(self) -> tuple[int, int]:
        return self.tally.load()

    def notes(self) -> list[str]:
        return []

    def lose(self, w: int, why: str, at_ns: int | None = None) -> None:
        """Worker ``w`` was lost at ``at_ns`` (monotonic; default now): see ``Tally.lose``."""
        at = time.monotonic_ns() if at_ns is None else at_ns
        self.tally.lose(w, why, (at - self.t0_ns) / _NS)

    def worker_info(self) -> list[WorkerInfo]:
        """One typed entry per worker for ``run.json`` (Ray adds node and clock)."""
        t = self.tally
        return [WorkerInfo(index=p.index, users=len(p.users), lost=p.index in t.lost,
                           lost_detail=t.lost.get(p.index),
                           lost_requests=t.lost_requests.get(p.index, 0)) for p in self.plans]

    def _go(self, t0_ns: int, t0_wall_ns: int) -> None:
        raise NotImplementedError

    def _halt(self) -> None:
        raise NotImplementedError

    async def _wait(self, deadline_s: float) -> None:
        raise NotImplementedError

    async def finish(self, stop: asyncio.Event) -> ExecOutcome:
        deadline_s = (self.end_ns - time.monotonic_ns()) / _NS + _GRACE_S
        stopper = asyncio.create_task(stop.wait())
        done = asyncio.create_task(self._wait(deadline_s))
        interrupted = False
        try:
            finished, _ = await asyncio.wait({stopper, done},
                                             return_when=asyncio.FIRST_COMPLETED)
            if stopper in finished:
                interrupted = True
                self._halt()
                await done
        except asyncio.CancelledError:
            self._halt()
            await asyncio.gather(asyncio.shield(done), return_exceptions=True)
            raise
        finally:
            stopper.cancel()
        out = _outcome(self.plans, self.tally, self.job.settings.users, interrupted)
        out.workers = self.worker_info()
        return out


def _outcome(plans: Sequence[WorkerPlan], tally: Tally, users: int,
             interrupted: bool) -> ExecOutcome:
    """How the workers ended: lost workers become warnings, the first crash is kept."""
    out = ExecOutcome(interrupted=interrupted)
    for w, why in sorted(tally.lost.items()):
        carried = plans[w].users
        out.lanes += len(carried)
        out.warnings.append(
            f"worker {w} {why}: its {len(carried)} of {users} users "
            f"({_span(carried)}) stopped early; its "
            f"{plural(tally.lost_requests.get(w, 0), 'request')} in flight or due "
            f"{verb(tally.lost_requests.get(w, 0), 'is', 'are')} recorded as lost")
    for w, result in sorted(tally.results.items()):
        out.interrupted = out.interrupted or bool(result.get("interrupted"))
        out.loops.append(LoopHealth.from_json(result.get("health")))
        out.lanes += _int(result.get("lanes"))
        out.done_early += _int(result.get("done_early"))
        out.idle_shifts.count += _int(result.get("idle_shifts"))
        shifted = result.get("idle_shifted_s")
        out.idle_shifts.seconds += shifted if isinstance(shifted, float) else 0.0
        if result.get("crash") and out.crash is None:
            out.crash = f"worker {w}: {result['crash']}"
    return out


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _span(users: Sequence[int]) -> str:
    if not users:
        return "none"
    shown = ", ".join(str(u) for u in users[:8])
    return f"users {shown}{', ...' if len(users) > 8 else ''}"
