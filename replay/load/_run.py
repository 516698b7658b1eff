"""One run, start to end: probe, manifest, executor, ``/metrics``, live view, close.

:func:`run_load` is the library entry point (the CLI, compare and demo call it).
It prepares the workload (:func:`~replay.load._prepare.prepare_run`), probes the
target and checks the workload fits, then hands over to :func:`drive_run`, the core
every run shares, the twin's levels included: it picks an executor (in-process,
``--workers`` processes or ``--ray`` actors: one
:class:`~replay.load._executor.Executor` interface), sets the run's origin once the
executor is ready, writes ``run.json`` with ``complete=false``, and while the
executor's lanes go through warmup, window and bounded drain
(:mod:`replay.load._phases`) it runs the pollers and the live view. The close
(:mod:`replay.load._close`) reads the records once and analyses them once; a lane's
crash is re-raised. The lanes reach the server only through a
:class:`~replay.load._transport.Transport` (HTTP by default); the clock is the
running event loop's, so a caller that runs the core on a simulated loop
(``replay.twin``) gets a run on simulated time.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import aiohttp

from analysis import RunManifest
from analysis.schema import ClockInfo
from replay.client import (
    MetricsPoller,
    PrefixCacheModel,
    fetch_chat_codec,
    gpu_metrics_url,
    make_session,
    parse_dcgm,
    public_target,
    stream_request,
)
from replay.errors import ConfigError, Stopped
from replay.load._close import Analysis, ClosedRun, ServerWatchHook, judge, seal
from replay.load._context import PromptBuilder
from replay.load._executor import ExecOutcome, Executor, Job, raise_crash
from replay.load._fleet import FleetMetrics, describe_fleet, fleet_roots, probe_fleet
from replay.load._inprocess import InProcessExecutor
from replay.load._live import LiveStats, LiveView
from replay.load._manifest import check_fits, new_manifest
from replay.load._phases import Target, connections_for
from replay.load._prepare import Prepared, Workload, prepare_run
from replay.load._settings import RunSettings
from replay.load._store import RecordStore
from replay.load._transport import Transport
from replay.load._window_stop import WindowStop
from replay.load._workers import ProcessExecutor, event_loop_factory
from replay.load._writer import RunWriter, iso_utc

__all__ = ["Lanes", "Poller", "drive_run", "run_closed", "run_load", "run_load_sync"]

Live = Literal["rich", "plain", "quiet"]
_NS = 1_000_000_000
_DRIVER_CONNECTIONS = 8
"""The driver's own connections when workers carry the load (probe, ``/metrics``)."""
T = TypeVar("T")


class Poller(Protocol):
    """Samples the server during the run (``/metrics``, a GPU exporter, the twin's
    engine counters): ``run`` until cancelled, then one last ``scrape``."""

    async def run(self) -> None: ...

    async def scrape(self) -> object: ...


@dataclass(frozen=True)
class Lanes:
    """How the lanes of an in-process run reach what serves them."""

    transport: Transport = stream_request
    cache: PrefixCacheModel | None = None
    """The client's prefix model (None: one per replica, built for the run)."""
    builder: PromptBuilder | None = None
    probe_loop: bool = True
    """Probe the event loop's lag (off on simulated time: there is none to see)."""
    window_stop: WindowStop | None = None
    """A rule that may end the window early (``replay.load._window_stop``)."""


async def run_load(
    settings: RunSettings,
    workload_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    live: Live = "quiet",
    stop: asyncio.Event | None = None,
    builder: PromptBuilder | None = None,
    watch: ServerWatchHook | None = None,
    before_load: Callable[[], None] | None = None,
    transport: Transport = stream_request,
    window_stop: WindowStop | None = None,
    say_drain: bool = True,
) -> Path:
    """Run one load test and return its run directory (:func:`run_closed`'s ``dir``)."""
    closed = await run_closed(settings, workload_path, out_dir, live=live, stop=stop,
                              builder=builder, watch=watch, before_load=before_load,
                              transport=transport, window_stop=window_stop,
                              say_drain=say_drain)
    return closed.dir


async def run_closed(
    settings: RunSettings,
    workload: Workload | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    live: Live = "quiet",
    stop: asyncio.Event | None = None,
    builder: PromptBuilder | None = None,
    watch: ServerWatchHook | None = None,
    before_load: Callable[[], None] | None = None,
    transport: Transport = stream_request,
    window_stop: WindowStop | None = None,
    say_drain: bool = True,
) -> ClosedRun:
    """Run one load test against ``settings.target``; its directory, closing manifest
    and the close's one analysis (see the module docstring).

    ``before_load`` is called once the server answered and the workload fits, just
    before the first request: warnings given there come before the load, yet a run
    refused by the server still fails in one line.

    ``watch`` (e.g. ``replay.servers.launch.ServerWatcher`` of a launched server) is read
    when the run closes: a server that died is stamped in ``server_watch``.

    ``transport`` sends each request (``replay.client.stream_request``; worker
    processes and Ray actors always use that one).

    ``window_stop`` may end the window early (in-process lanes only; a split run
    ignores it and says so in the manifest's warnings).
    """
    prepared = prepare_run(settings, workload)
    settings, sessions, arrival = prepared.settings, prepared.sessions, prepared.arrival
    roots, basic = fleet_roots(settings)
    root = roots[0]
    headers = _auth_headers(settings)
    if basic is not None and "Authorization" not in headers:
        headers["Authorization"] = basic
    if settings.split:
        connections = _DRIVER_CONNECTIONS
    else:
        connections = connections_for(settings.users, sessions) if arrival == "closed" else 0
    async with make_session(connections, connect_s=settings.connect_timeout_s) as session:
        fleet = await _unless_stopped(probe_fleet(session, settings, headers), stop)
        facts = fleet[0]
        shown = public_target(settings.target)
        check_fits(sessions, prepared.path, facts, shown)
        if prepared.drain_note is not None and say_drain:  # said once the server answered
            print(prepared.drain_note, file=sys.stderr, flush=True)
        if before_load is not None:
            before_load()
        run_id = uuid.uuid4().hex[:12]
        chat = await _unless_stopped(fetch_chat_codec(
            session, root, headers, facts.model, facts.vocab_size), stop) \
            if settings.api == "chat" else None  # exact chat prompts (replay.client._chat)
        target = Target(root=root, headers=headers, model=facts.model,
                        vocab_size=facts.vocab_size, block_size=prepared.header.block_size,
                        server_block_size=facts.block_size, run_tag=run_id[:8], chat=chat,
                        roots=roots if len(roots) > 1 else ())
        manifest = new_manifest(settings, run_id, facts, prepared.header, prepared.path,
                                len(sessions), arrival, target=shown)
        describe_fleet(manifest, settings.fleet, fleet, settings.routing)
        out = Path(out_dir)
        writer = RunWriter(out)

        def pollers(stats: LiveStats, t0_ns: int) -> list[Poller]:
            found: list[Poller] = []
            if settings.metrics_interval_s is not None:
                found.append(FleetMetrics(session, target.roots or (target.root,),
                                          settings.metrics_interval_s, writer.write_metrics,
                                          stats.on_metrics, t0_ns, target.headers))
            found.extend(_gpu_pollers(session, settings, writer, t0_ns))
            return found

        return await drive_run(prepared, manifest, writer, target, session, out=out,
                               lanes=Lanes(transport=transport, builder=builder,
                                           window_stop=window_stop),
                               pollers=pollers, live=live, stop=stop, watch=watch)


async def drive_run(
    prepared: Prepared, manifest: RunManifest, store: RecordStore, target: Target,
    session: aiohttp.ClientSession, *, out: Path, lanes: Lanes = Lanes(),
    pollers: Callable[[LiveStats, int], Sequence[Poller]] | None = None,
    live: Live = "quiet", stop: asyncio.Event | None = None,
    watch: ServerWatchHook | None = None, analysis: Analysis | None = None,
) -> ClosedRun:
    """The core of every run once its target is known: executor, origin, manifest,
    pollers (made at the origin: ``pollers(stats, t0_ns)``), live view, and the one close
    (read once, analysed once with ``analysis``'s options)."""
    settings = prepared.settings
    stats = LiveStats(settings.warmup_s + settings.duration_s, drain_s=settings.drain)
    job = Job(settings=settings, workload=prepared.path, sessions=prepared.sessions,
              arrival=prepared.arrival, target=target, sink=_Sink(store, stats))
    executor = _executor(job, session, lanes)
    try:
        manifest.warnings.extend(c.message for c in prepared.caveats)
        if lanes.window_stop is not None and settings.split:
            manifest.warnings.append("early stop is off: it needs the lanes in one process "
                                     "(no --workers or --ray); the whole window ran")
        return await _run(executor, settings, manifest, store, stats, live,
                          stop or asyncio.Event(), watch, prepared, pollers or _no_pollers,
                          analysis or Analysis(), out)
    finally:
        store.close()


def _no_pollers(stats: LiveStats, t0_ns: int) -> list[Poller]:
    return []


async def _unless_stopped(work: Coroutine[Any, Any, T], stop: asyncio.Event | None) -> T:
    """``work`` (a preflight), abandoned with :class:`Stopped` when ``stop`` is set
    first: a signal during the probes or the chat codec ends the command at once."""
    if stop is None:
        return await work
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise Stopped("stopped while preparing the run; nothing was measured")
    return task.result()


def _executor(job: Job, session: aiohttp.ClientSession, lanes: Lanes) -> Executor:
    settings = job.settings
    if settings.split and lanes.transport is not stream_request:
        raise ValueError("worker processes and Ray actors send over HTTP only")
    if settings.ray is not None:
        from replay.load._ray import RayExecutor

        return RayExecutor(job)
    if settings.workers > 1:
        return ProcessExecutor(job)
    return InProcessExecutor(job, session, lanes.builder, transport=lanes.transport,
                             cache=lanes.cache, probe_loop=lanes.probe_loop,
                             window_stop=lanes.window_stop)


async def _run(executor: Executor, settings: RunSettings, manifest: RunManifest,
               store: RecordStore, stats: LiveStats, live: Live, stop: asyncio.Event,
               watch: ServerWatchHook | None, prepared: Prepared,
               pollers: Callable[[LiveStats, int], Sequence[Poller]], how: Analysis,
               out: Path) -> ClosedRun:
    """Prepare, set the origin, start, watch, close and stamp the manifest (one way
    for all executors)."""
    await executor.prepare()
    t0_ns = time.monotonic_ns() + executor.lead_ns
    t0_wall_ns = time.time_ns() + executor.lead_ns
    started = iso_utc(datetime.fromtimestamp(t0_wall_ns / _NS, UTC))
    manifest.clock = ClockInfo(t0_wall=started, t0_monotonic_ns=t0_ns)
    manifest.started_at = started
    store.write_manifest(manifest)
    stats.t0 = t0_ns / _NS
    stats.busy = lambda: executor.load()[0]
    stats.lanes = lambda: executor.load()[1]
    executor.start(t0_ns, t0_wall_ns)
    manifest.warnings.extend(executor.notes())
    watched = list(pollers(stats, t0_ns))
    helpers: list[asyncio.Task[Any]] = [asyncio.create_task(p.run()) for p in watched]
    helpers.append(asyncio.create_task(LiveView(stats, live).run()))
    helpers.append(asyncio.create_task(_follow_phases(stats, settings, t0_ns)))
    outcome = ExecOutcome(interrupted=True)
    try:
        outcome = await executor.finish(stop)
    finally:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        for p in watched:
            await p.scrape()
        read = seal(store, manifest, outcome, settings, watch)
    raise_crash(outcome)
    return judge(store, manifest, read, prepared.caveats, how, out)


class _Sink:
    """Records to the run's store and the live view."""

    def __init__(self, writer: RecordStore, stats: LiveStats) -> None:
        self.writer = writer
        self.stats = stats

    def record(self, rec: Mapping[str, object]) -> None:
        self.writer.write_record(rec)
        self.stats.on_record(rec)

    def lines(self, lines: list[bytes]) -> None:
        import orjson

        self.writer.write_lines(lines)
        on_record = self.stats.on_record
        for line in lines:
            on_record(orjson.loads(line))


STOPPING = "stopping: drain over, cancelling requests still running (marked incomplete)"
"""The live view's phase once the drain has run out: closing can take a while on a
loaded machine, and "remaining 0s" alone looked like a hang."""


async def _follow_phases(stats: LiveStats, settings: RunSettings, t0_ns: int) -> None:
    """Keep the live view's phase label in step with the run's schedule."""
    window_end_s = settings.warmup_s + settings.duration_s
    for phase, end_s in (("warmup", settings.warmup_s), ("measure", window_end_s),
                         ("drain", window_end_s + settings.drain)):
        stats.phase = phase
        rem = t0_ns + int(end_s * _NS) - time.monotonic_ns()
        if rem > 0:
            await asyncio.sleep(rem / _NS)
    stats.phase = STOPPING


def _gpu_pollers(session: aiohttp.ClientSession, settings: RunSettings, writer: RunWriter,
                 t0_ns: int) -> list[MetricsPoller]:
    """A poller per ``--gpu-metrics`` exporter of this run, on the ``/metrics`` interval
    (2 s when that polling is off), each sample into ``gpu_metrics.jsonl``. No header
    of the run goes to an exporter (the API key is the server's)."""
    interval = settings.metrics_interval_s or 2.0
    return [MetricsPoller(session, gpu_metrics_url(url), interval,
                          functools.partial(_gpu_sink, writer, k), t0_ns, parse=parse_dcgm)
            for k, url in enumerate(settings.gpu_urls(settings.label))]


def _gpu_sink(writer: RunWriter, k: int, t_s: float, values: dict[str, float]) -> None:
    writer.write_gpu(t_s, values, k)


def _auth_headers(settings: RunSettings) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if settings.api_key_env:
        key = os.environ.get(settings.api_key_env)
        if not key:
            raise ConfigError(f"--api-key-env {settings.api_key_env}: that environment "
                              "variable is not set")
        headers["Authorization"] = f"Bearer {key}"
    return headers


def run_load_sync(
    settings: RunSettings,
    workload_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    live: Live = "quiet",
    builder: PromptBuilder | None = None,
    watch: ServerWatchHook | None = None,
    window_stop: WindowStop | None = None,
    say_drain: bool = True,
) -> Path:
    """:func:`run_load` on a fresh event loop (uvloop when available), for callers
    that are not async themselves (compare, demo, benchmarks). ``say_drain``: print how
    the default drain was decided (a comparison says it for its first run only)."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(run_load(settings, workload_path, out_dir, live=live,
                                   builder=builder, watch=watch, window_stop=window_stop,
                                   say_drain=say_drain))
