"""Scale-out: one run's users split across worker processes (``--workers N``).

The driver (the process that ran :func:`replay.load._phases.run_load`) probes the server,
writes the manifest and owns the run directory; each worker runs its share of
the users on its own event loop and sends finished records back, already
serialised, in small batches (every ``_FLUSH_S``). The driver appends them to
the one ``requests.jsonl`` and flushes per batch, so a crash loses at most the
requests in flight plus one batch interval.

Users are dealt round robin (user ``u`` to worker ``u % N``) and keep their
single-process numbers, so sessions, salts and the request set are those of a
one-process run. Each worker has its own prefix-cache model, so the expected
reuse of the *shared* prefix is counted once per worker instead of once per run.

Clocks: local workers share the host's monotonic clock, so they use the
driver's origin as is. Ray workers (:mod:`replay.load._ray`) may sit on other hosts:
their origin is the driver's wall-clock origin corrected by the skew measured
with a round trip, and durations stay local (monotonic). A worker that dies is
reported in the manifest's warnings with the users it carried.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Literal

import orjson

from analysis._schema import ClockInfo
from replay.client._poller import MetricsPoller
from replay.client._stream import make_session
from replay.errors import ConfigError
from replay.load._live import LiveStats, LiveView
from replay.load._settings import RunConfig
from replay.load._writer import close_manifest, iso_utc
from traces._io import iter_sessions

if TYPE_CHECKING:
    from analysis._schema import RunManifest
    from replay.client._probe import ServerFacts
    from replay.load._writer import RunWriter

__all__ = ["WorkerPlan", "run_plan", "run_workers", "split_users"]

_NS = 1_000_000_000
_FLUSH_S = 0.01
_START_S = 120.0
"""How long workers may take to start (imports, a Ray actor's process)."""
_LEAD_NS = 50_000_000
"""The origin is set this far after the last worker is ready, so all start on time."""
_GRACE_S = 30.0
"""How long past the end of the drain the driver waits for a worker to report."""

Emit = Callable[[list[bytes], int, int], None]
"""``(serialised records, requests in flight, lanes)``: a worker's batch."""


def split_users(users: int, workers: int) -> list[tuple[int, ...]]:
    """User numbers per worker, dealt round robin (``u`` goes to ``u % workers``)."""
    return [tuple(range(w, users, workers)) for w in range(workers)]


@dataclass(frozen=True)
class WorkerPlan:
    """Everything one worker needs; plain data so it pickles to a process or actor."""

    index: int
    users: tuple[int, ...]
    config_json: str
    workload: str
    root: str
    headers: dict[str, str]
    model: str
    vocab_size: int
    block_size: int
    server_block_size: int
    t0_wall_ns: int
    """The driver's origin on the wall clock (already corrected for this worker's skew)."""
    run_tag: str
    t0_ns: int | None = None
    """The driver's monotonic origin, when the worker shares the driver's host."""
    connections: int = 0


def _origin(plan: WorkerPlan) -> int:
    if plan.t0_ns is not None:
        return plan.t0_ns
    return time.monotonic_ns() - (time.time_ns() - plan.t0_wall_ns)


async def run_plan(plan: WorkerPlan, emit: Emit, stop: asyncio.Event) -> dict[str, object]:
    """Run one worker's users through warmup, window and drain; records go to ``emit``.
    Returns ``{"interrupted": bool, "crash": str | None, "records": int}``."""
    from replay.load._phases import (
        _default_builder,
        _start_lanes,
        _stop_all,
        _wait_phases,
        make_context,
    )

    config = RunConfig.model_validate_json(plan.config_json)
    sessions = list(iter_sessions(plan.workload))
    t0_ns = _origin(plan)
    buf: list[bytes] = []
    sent = 0
    dumps = orjson.dumps

    def on_record(rec: dict[str, object]) -> None:
        buf.append(dumps(rec))

    session = make_session(plan.connections, connect_s=config.connect_timeout_s)
    async with session:
        build = _default_builder(plan.block_size, plan.vocab_size)
        ctx = make_context(config, session, plan.root, plan.headers, plan.model, build,
                           plan.block_size, plan.server_block_size, t0_ns, on_record,
                           plan.run_tag, worker=plan.index)

        def flush() -> None:
            nonlocal buf, sent
            if buf:
                out, buf = buf, []
                sent += len(out)
                emit(out, ctx.busy, ctx.lanes)

        async def pump() -> None:
            while True:
                await asyncio.sleep(_FLUSH_S)
                flush()

        pumper = asyncio.create_task(pump())
        _start_lanes(ctx, config, "closed", sessions, plan.users)
        interrupted = False
        try:
            interrupted = await _wait_phases(ctx, config, stop, LiveStats(0.0))
        finally:
            await _stop_all(ctx)
            pumper.cancel()
            await asyncio.gather(pumper, return_exceptions=True)
            flush()
    return {"interrupted": interrupted, "records": sent,
            "crash": repr(ctx.crash) if ctx.crash is not None else None}


# ----------------------------------------------------------------- local processes


def _process_main(plan: WorkerPlan, conn: Connection, control: Connection) -> None:
    """Entry point of a worker process: says ``READY`` once imported, waits for the
    driver's ``go`` (the run's origin), runs; the driver handles Ctrl-C and sends ``stop``."""
    import replay.load._phases  # noqa: F401  (the import cost is paid before the origin is set)
    from replay.load._phases import event_loop_factory

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn.send_bytes(b"READY")
    try:
        go = control.recv_bytes()
    except EOFError:
        return
    if not go.startswith(b"go "):
        return
    t0_ns, t0_wall_ns = (int(x) for x in go[3:].split())
    plan = replace(plan, t0_ns=t0_ns, t0_wall_ns=t0_wall_ns)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def on_driver() -> None:
            try:
                while control.poll():
                    if control.recv_bytes() == b"stop":
                        stop.set()
            except (EOFError, OSError):  # the driver is gone: end in order
                loop.remove_reader(control.fileno())
                stop.set()

        # The loop makes the control pipe non-blocking (its messages are a few bytes,
        # written atomically); the data pipe stays blocking for the worker's writes.
        loop.add_reader(control.fileno(), on_driver)

        def emit(lines: list[bytes], busy: int, lanes: int) -> None:
            conn.send_bytes(b"%d %d\n" % (busy, lanes) + b"\n".join(lines))

        result = await run_plan(plan, emit, stop)
        loop.remove_reader(control.fileno())
        conn.send_bytes(b"DONE " + orjson.dumps(result))

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(main())
    conn.close()


@dataclass(eq=False)
class _Tally:
    """The driver's view of its workers: live counts and how each ended."""

    writer: RunWriter
    stats: LiveStats
    busy: list[int] = field(default_factory=list)
    lanes: list[int] = field(default_factory=list)
    results: dict[int, dict[str, object]] = field(default_factory=dict)
    lost: dict[int, str] = field(default_factory=dict)

    def batch(self, w: int, lines: list[bytes], busy: int, lanes: int) -> None:
        self.busy[w] = busy
        self.lanes[w] = lanes
        self.writer.write_lines(lines)
        on_record = self.stats.on_record
        for line in lines:
            on_record(orjson.loads(line))


class _LocalPool:
    """Worker processes (spawned, not forked: the driver's loop and sockets stay
    behind), each with a data pipe to the driver, read by one thread per worker
    (blocking reads of whole messages), and a control pipe from it."""

    def __init__(self, plans: Sequence[WorkerPlan], tally: _Tally) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.tally = tally
        self.loop = asyncio.get_running_loop()
        self.controls: list[Connection] = []
        self.procs: list[Any] = []
        self.readers: list[threading.Thread] = []
        self.ended = [asyncio.Event() for _ in plans]
        self.ready = [asyncio.Event() for _ in plans]
        for plan in plans:
            data_in, data_out = ctx.Pipe(duplex=False)
            control_in, control_out = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_process_main, args=(plan, data_out, control_in),
                               daemon=True, name=f"agentreplay-worker-{plan.index}")
            proc.start()
            data_out.close()
            control_in.close()
            self.controls.append(control_out)
            self.procs.append(proc)
            reader = threading.Thread(target=self._read, args=(plan.index, data_in),
                                      daemon=True, name=f"agentreplay-reader-{plan.index}")
            reader.start()
            self.readers.append(reader)

    def _read(self, w: int, conn: Connection) -> None:
        """Reader thread: hand every message to the loop; tell it when the pipe ends."""
        call = self.loop.call_soon_threadsafe
        try:
            while True:
                call(self._message, w, conn.recv_bytes())
        except (EOFError, OSError):
            pass
        finally:
            conn.close()
            try:
                call(self.ended[w].set)
            except RuntimeError:  # the loop is closed: the run is over anyway
                pass

    def _message(self, w: int, msg: bytes) -> None:
        if msg == b"READY":
            self.ready[w].set()
        elif msg.startswith(b"DONE "):
            self.tally.results[w] = orjson.loads(msg[5:])
        else:
            head, _, body = msg.partition(b"\n")
            busy, lanes = head.split()
            self.tally.batch(w, body.split(b"\n") if body else [], int(busy), int(lanes))

    async def started(self, timeout_s: float) -> None:
        """Wait until every worker has imported (or ended, or the time is up)."""
        waits = [asyncio.create_task(_either(r, e)) for r, e in zip(self.ready, self.ended,
                                                                    strict=True)]
        _, pending = await asyncio.wait(waits, timeout=timeout_s)
        for task in pending:
            task.cancel()

    def go(self, t0_ns: int, t0_wall_ns: int) -> None:
        for w, conn in enumerate(self.controls):
            if not self.ended[w].is_set():
                try:
                    conn.send_bytes(b"go %d %d" % (t0_ns, t0_wall_ns))
                except OSError:
                    pass

    def stop(self) -> None:
        for w, conn in enumerate(self.controls):
            if not self.ended[w].is_set():
                try:
                    conn.send_bytes(b"stop")
                except OSError:
                    pass

    async def wait(self, deadline_s: float) -> None:
        waits = [asyncio.create_task(e.wait()) for e in self.ended]
        _, pending = await asyncio.wait(waits, timeout=max(deadline_s, 0.1))
        for task in pending:
            task.cancel()
        for w, proc in enumerate(self.procs):
            if not self.ended[w].is_set():
                proc.kill()
                self.tally.lost[w] = "did not finish in time and was killed"
            await asyncio.to_thread(proc.join, 5.0)
            await asyncio.to_thread(self.readers[w].join, 5.0)
            await asyncio.sleep(0)  # run the messages the reader handed over last
            if w not in self.tally.results and w not in self.tally.lost:
                self.tally.lost[w] = f"died (exit code {proc.exitcode})"
            self.controls[w].close()


async def _either(a: asyncio.Event, b: asyncio.Event) -> None:
    ta, tb = asyncio.create_task(a.wait()), asyncio.create_task(b.wait())
    try:
        await asyncio.wait({ta, tb}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ta.cancel()
        tb.cancel()


# ----------------------------------------------------------------- the driver


async def run_workers(
    config: RunConfig, workload: str, manifest: RunManifest, writer: RunWriter,
    stats: LiveStats, session: Any, root: str, headers: dict[str, str], facts: ServerFacts,
    block_size: int, *, live: Literal["rich", "plain", "quiet"], stop: asyncio.Event,
) -> None:
    """Drive ``config.workers`` workers (processes, or Ray actors with ``config.ray``) to
    the end of the run, write their records, and finish the manifest. The run's origin
    is set once every worker has started (process start-up is not schedule lag)."""
    if manifest.load.arrival != "closed":
        raise ConfigError(f"{workload}: --workers/--ray split closed-loop users; this "
                          f"workload's arrival mode is {manifest.load.arrival!r}")
    shares = split_users(config.users, config.workers)
    sessions = list(iter_sessions(workload))
    per_user = 1 + max((len(r.subagents) for s in sessions for r in s.requests), default=0)
    plans = [
        WorkerPlan(index=w, users=users, config_json=config.model_dump_json(),
                   workload=workload, root=root, headers=headers, model=facts.model,
                   vocab_size=facts.vocab_size, block_size=block_size,
                   server_block_size=facts.block_size, t0_wall_ns=0,
                   run_tag=manifest.run_id[:8], connections=len(users) * per_user + 8)
        for w, users in enumerate(shares)
    ]
    tally = _Tally(writer, stats, busy=[0] * len(plans), lanes=[0] * len(plans))
    if config.ray is not None:
        from replay.load._ray import RayPool

        pool: Any = await RayPool.create(config.ray, plans, tally)
    else:
        pool = _LocalPool(plans, tally)
    await pool.started(_START_S)
    t0_ns = time.monotonic_ns() + _LEAD_NS
    t0_wall_ns = time.time_ns() + _LEAD_NS
    t0_wall = datetime.fromtimestamp(t0_wall_ns / _NS, UTC)
    manifest.clock = ClockInfo(t0_wall=iso_utc(t0_wall), t0_monotonic_ns=t0_ns)
    manifest.started_at = iso_utc(t0_wall)
    stats.t0 = t0_ns / _NS
    pool.go(t0_ns, t0_wall_ns)
    if config.ray is not None:
        manifest.warnings.append(pool.skew_note())
    stats.busy = lambda: sum(tally.busy)
    stats.lanes = lambda: sum(tally.lanes)
    issue_end_ns = t0_ns + int((config.warmup_s + config.duration_s + config.drain_s) * _NS)
    helpers: list[asyncio.Task[Any]] = []
    poller = None
    if config.metrics_interval_s is not None:
        poller = MetricsPoller(session, f"{root}/metrics", config.metrics_interval_s,
                               _on_metrics(writer, stats), t0_ns, headers=headers)
        helpers.append(asyncio.create_task(poller.run()))
    helpers.append(asyncio.create_task(LiveView(stats, live).run()))
    helpers.append(asyncio.create_task(_phases(stats, config, t0_ns)))
    interrupted = False
    try:
        stopper = asyncio.create_task(stop.wait())
        done = asyncio.create_task(pool.wait(
            (issue_end_ns - time.monotonic_ns()) / _NS + _GRACE_S))
        finished, _ = await asyncio.wait({stopper, done}, return_when=asyncio.FIRST_COMPLETED)
        if stopper in finished:
            interrupted = True
            pool.stop()
            await done
        stopper.cancel()
    except asyncio.CancelledError:
        interrupted = True
        pool.stop()
        await asyncio.shield(pool.wait(_GRACE_S))
        raise
    finally:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        if poller is not None:
            await poller.scrape()
        writer.close()
        crash = _finish(manifest, config, plans, tally, interrupted)
        writer.write_manifest(manifest)
    if crash is not None:
        raise RuntimeError(crash)


def _on_metrics(writer: RunWriter, stats: LiveStats) -> Callable[[float, dict[str, float]], None]:
    def on_metrics(t_s: float, values: dict[str, float]) -> None:
        writer.write_metrics(t_s, values)
        stats.on_metrics(t_s, values)

    return on_metrics


async def _phases(stats: LiveStats, config: RunConfig, t0_ns: int) -> None:
    """Keep the live view's phase label in step with the workers' shared schedule."""
    for phase, end_s in (("warmup", config.warmup_s),
                         ("measure", config.warmup_s + config.duration_s)):
        stats.phase = phase
        rem = t0_ns + int(end_s * _NS) - time.monotonic_ns()
        if rem > 0:
            await asyncio.sleep(rem / _NS)
    stats.phase = "drain"


def _finish(manifest: RunManifest, config: RunConfig, plans: Sequence[WorkerPlan],
            tally: _Tally, interrupted: bool) -> str | None:
    crash = None
    for w, why in sorted(tally.lost.items()):
        users = plans[w].users
        manifest.warnings.append(
            f"worker {w} {why}: its {len(users)} of {config.users} users "
            f"({_span(users)}) stopped early and the requests it had in flight or "
            f"unsent are missing")
    for w, result in sorted(tally.results.items()):
        interrupted = interrupted or bool(result.get("interrupted"))
        if result.get("crash") and crash is None:
            crash = f"worker {w}: {result['crash']}"
    close_manifest(manifest, warmup_s=config.warmup_s, duration_s=config.duration_s,
                   interrupted=interrupted, crash=crash)
    return crash


def _span(users: Sequence[int]) -> str:
    if not users:
        return "none"
    shown = ", ".join(str(u) for u in users[:8])
    return f"users {shown}{', ...' if len(users) > 8 else ''}"
