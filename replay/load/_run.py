"""One run, start to end: probe, manifest, executor, ``/metrics``, live view, close.

:func:`run_load` is the library entry point (the CLI, compare and demo call it).
It reads the workload, probes the target and checks the workload fits, picks an
executor (in-process, ``--workers`` processes or ``--ray`` actors: one
:class:`~replay.load._executor.Executor` interface), sets the run's origin once
the executor is ready, writes ``run.json`` with ``complete=false``, and while the
executor's lanes go through warmup, window and bounded drain
(:mod:`replay.load._phases`) it polls ``/metrics`` and shows the live view. At
the end the manifest is rewritten complete, or marked interrupted when ``stop``
was set, and a lane's crash is re-raised.
"""

from __future__ import annotations

import asyncio
import functools
import os
import platform
import socket
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import aiohttp

from analysis import (
    ResultError,
    RunManifest,
    Validity,
    ValidityReason,
    assess_run,
    public_url,
    read_run,
)
from analysis.schema import ClockInfo, Coverage, HostInfo, LoadKind, ServerWatch, WorkloadRef
from replay._version import __version__
from replay.client import (
    MetricsPoller,
    ServerFacts,
    fetch_chat_codec,
    gpu_metrics_url,
    make_session,
    parse_dcgm,
    public_target,
)
from replay.errors import ConfigError, Stopped, TargetError
from replay.load._context import PromptBuilder
from replay.load._drain import resolve_drain
from replay.load._executor import ExecOutcome, Executor, Job, raise_crash
from replay.load._fleet import FleetMetrics, describe_fleet, fleet_roots, probe_fleet
from replay.load._health import client_health
from replay.load._inprocess import InProcessExecutor
from replay.load._live import LiveStats, LiveView
from replay.load._phases import Arrival, Target, connections_for, first_too_long
from replay.load._scenario import ALIAS_NOTE as SCENARIO_ALIAS_NOTE
from replay.load._scenario import ALIASES as SCENARIO_ALIASES
from replay.load._settings import RunSettings
from replay.load._stamps import judge_run_scenario
from replay.load._timeline import check_time_controls, empty_window_note, retimed
from replay.load._workers import ProcessExecutor, event_loop_factory
from replay.load._writer import RunWriter, close_manifest, iso_utc
from traces import Session, WorkloadHeader, iter_sessions, read_header

__all__ = ["ServerWatchHook", "load_kind", "run_load", "run_load_sync"]

Live = Literal["rich", "plain", "quiet"]
_NS = 1_000_000_000
_DRIVER_CONNECTIONS = 8
"""The driver's own connections when workers carry the load (probe, ``/metrics``)."""
T = TypeVar("T")


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
) -> Path:
    """Run one load test and return its run directory (see the module docstring).

    ``before_load`` is called once the server answered and the workload fits, just
    before the first request: warnings given there come before the load, yet a run
    refused by the server still fails in one line.

    ``watch`` (e.g. ``replay.servers.launch.ServerWatcher`` of a launched server) is read
    when the run closes: a server that died is stamped in ``server_watch``.
    """
    path = str(workload_path)
    out = Path(out_dir)
    header = read_header(path)
    sessions = list(iter_sessions(path))
    if not sessions:
        raise ConfigError(f"{path}: the workload holds no session")
    arrival: Arrival = "open" if settings.rate is not None else header.arrival
    if settings.split and arrival != "closed":
        raise ConfigError(f"{path}: --workers/--ray split closed-loop users; this "
                          f"workload's arrival mode is {arrival!r}")
    check_time_controls(settings, header.arrival, path, rated=settings.rate is not None)
    sessions = retimed(settings, sessions, path)
    settings, drain_note = resolve_drain(settings, sessions)
    caveats = _time_caveats(settings, sessions, arrival)
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
        _check_fits(sessions, path, facts, public_target(settings.target))
        if drain_note is not None:  # said once the server answered (a refusal is one line)
            print(drain_note, file=sys.stderr, flush=True)
        if before_load is not None:
            before_load()
        run_id = uuid.uuid4().hex[:12]
        chat = await _unless_stopped(fetch_chat_codec(
            session, root, headers, facts.model, facts.vocab_size), stop) \
            if settings.api == "chat" else None  # exact chat prompts (replay.client._chat)
        target = Target(root=root, headers=headers, model=facts.model,
                        vocab_size=facts.vocab_size, block_size=header.block_size,
                        server_block_size=facts.block_size, run_tag=run_id[:8], chat=chat,
                        roots=roots if len(roots) > 1 else ())
        manifest = _manifest(settings, run_id, facts, header, path, len(sessions), arrival)
        describe_fleet(manifest, settings.fleet, fleet, settings.routing)
        writer = RunWriter(out)
        stats = LiveStats(settings.warmup_s + settings.duration_s, drain_s=settings.drain)
        job = Job(settings=settings, workload=path, sessions=sessions, arrival=arrival,
                  target=target, sink=_Sink(writer, stats))
        executor = _executor(job, session, builder)
        try:
            manifest.warnings.extend(c.message for c in caveats)
            await _run(executor, settings, manifest, writer, stats, session, target, live,
                       stop or asyncio.Event(), watch, caveats)
        finally:
            writer.close()
    return out


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


def _executor(job: Job, session: aiohttp.ClientSession,
              builder: PromptBuilder | None) -> Executor:
    settings = job.settings
    if settings.ray is not None:
        from replay.load._ray import RayExecutor

        return RayExecutor(job)
    if settings.workers > 1:
        return ProcessExecutor(job)
    return InProcessExecutor(job, session, builder)


async def _run(executor: Executor, settings: RunSettings, manifest: RunManifest,
               writer: RunWriter, stats: LiveStats, session: aiohttp.ClientSession,
               target: Target, live: Live, stop: asyncio.Event,
               watch: ServerWatchHook | None, caveats: Sequence[ValidityReason] = ()) -> None:
    """Prepare, set the origin, start, watch, close and stamp the manifest (one way
    for all executors)."""
    await executor.prepare()
    t0_ns = time.monotonic_ns() + executor.lead_ns
    t0_wall_ns = time.time_ns() + executor.lead_ns
    started = iso_utc(datetime.fromtimestamp(t0_wall_ns / _NS, UTC))
    manifest.clock = ClockInfo(t0_wall=started, t0_monotonic_ns=t0_ns)
    manifest.started_at = started
    writer.write_manifest(manifest)
    stats.t0 = t0_ns / _NS
    stats.busy = lambda: executor.load()[0]
    stats.lanes = lambda: executor.load()[1]
    executor.start(t0_ns, t0_wall_ns)
    manifest.warnings.extend(executor.notes())
    helpers: list[asyncio.Task[Any]] = []
    poller = None
    if settings.metrics_interval_s is not None:
        poller = FleetMetrics(session, target.roots or (target.root,),
                              settings.metrics_interval_s, writer.write_metrics,
                              stats.on_metrics, t0_ns, target.headers)
        helpers.append(asyncio.create_task(poller.run()))
    gpus = _gpu_pollers(session, settings, writer, t0_ns)
    helpers += [asyncio.create_task(g.run()) for g in gpus]
    helpers.append(asyncio.create_task(LiveView(stats, live).run()))
    helpers.append(asyncio.create_task(_follow_phases(stats, settings, t0_ns)))
    outcome = ExecOutcome(interrupted=True)
    try:
        outcome = await executor.finish(stop)
    finally:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        if poller is not None:
            await poller.scrape()
        for g in gpus:
            await g.scrape()
        writer.close()
        _facts(manifest, outcome, writer.dir, watch)
        close_manifest(manifest, warmup_s=settings.warmup_s, duration_s=settings.duration_s,
                       interrupted=outcome.interrupted, crash=outcome.crash)
        writer.write_manifest(manifest)
    raise_crash(outcome)
    manifest.validity = _assess(writer.dir, caveats)
    judge_run_scenario(manifest, writer.dir)
    writer.write_manifest(manifest)


class ServerWatchHook(Protocol):
    """What a run reads of a server watch (``replay.servers.launch.ServerWatcher`` fits)."""

    died: bool
    detail: str | None


def _window_lags(run_dir: Path) -> list[float]:
    """``sent_s - due_s`` of the requests sent in the window, read back from the records
    (kept in memory during the run, they grew with every request of a long soak)."""
    try:
        r = read_run(run_dir).requests
    except ResultError:
        return []
    lags: list[float] = (r.sent_s - r.due_s)[r.phase == "measure"].tolist()
    return lags


def _facts(manifest: RunManifest, outcome: ExecOutcome, writer_dir: Path,
           watch: ServerWatchHook | None) -> None:
    """The facts validity is judged on: client health, window coverage, server watch."""
    manifest.warnings.extend(outcome.warnings)
    manifest.worker_info = outcome.workers
    manifest.client_health = client_health(outcome.loops, _window_lags(writer_dir))
    manifest.coverage = Coverage(lanes=outcome.lanes,
                                 lanes_done_before_window_end=outcome.done_early)
    if watch is not None:
        manifest.server_watch = ServerWatch(server_died=bool(watch.died), detail=watch.detail)


def _assess(run_dir: Path, caveats: Sequence[ValidityReason] = ()) -> Validity:
    """``analysis.assess_run`` on the run as written, plus what the replay knew before
    it started (``caveats``); an unreadable run is invalid."""
    try:
        found = assess_run(read_run(run_dir))
        if not caveats:
            return found
        verdict = "caveats" if found.verdict == "valid" else found.verdict
        return Validity(verdict=verdict, reasons=[*found.reasons, *caveats])
    except ResultError as exc:
        return Validity(verdict="invalid", reasons=[ValidityReason(
            code="run_unreadable", severity="invalid", message=str(exc))])


class _Sink:
    """Records to the run directory and the live view."""

    def __init__(self, writer: RunWriter, stats: LiveStats) -> None:
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


def _manifest(settings: RunSettings, run_id: str, facts: ServerFacts, header: WorkloadHeader,
              path: str, sessions: int, arrival: Arrival) -> RunManifest:
    """The manifest as written at the start (its clock is set at the origin)."""
    now = iso_utc(datetime.now(UTC))
    manifest = RunManifest(
        run_id=run_id, label=settings.label, target=public_target(settings.target),
        model=facts.model, api=settings.api, server_info=facts.server_info,
        server_models=facts.models, gpu_count=facts.gpu_count, simulated=facts.simulated,
        workload=WorkloadRef(path=path, fingerprint=header.fingerprint, source=header.source,
                             seed=header.seed, sessions=sessions,
                             block_size=header.block_size),
        load=settings.load_settings(arrival),
        clock=ClockInfo(t0_wall=now, t0_monotonic_ns=time.monotonic_ns()),
        started_at=now, tool_version=__version__,
        host=HostInfo(hostname=socket.gethostname(), platform=platform.platform(),
                      python=sys.version.split()[0], cpu_count=os.cpu_count()),
        vocab_size=facts.vocab_size, server_block_size=facts.block_size,
    )
    manifest.load_kind = load_kind(settings, arrival)
    manifest.scenario = settings.scenario
    manifest.session_headers = list(settings.session_headers)
    manifest.gpu_metrics = [public_url(u) for u in settings.gpu_urls(settings.label)]
    if settings.scenario in SCENARIO_ALIASES:
        manifest.warnings.append(SCENARIO_ALIAS_NOTE)
    if settings.split:
        manifest.workers = settings.workers
    if facts.max_model_len is None:
        manifest.warnings.append("server did not report max_model_len; prompts unchecked")
    return manifest


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


def load_kind(settings: RunSettings, arrival: Arrival) -> LoadKind:
    """What sets a run's load: users (closed loop), a session rate (``--rate``), or the
    workload's own times (timestamp replay, or open-loop sessions at their arrivals)."""
    if settings.rate is not None:
        return "rate"
    return "users" if arrival == "closed" else "timestamps"


def _time_caveats(settings: RunSettings, sessions: Sequence[Session],
                  arrival: Arrival) -> list[ValidityReason]:
    """A window that would see no arrival of a timestamp workload, said on stderr
    before the run starts (and kept as a caveat of its validity)."""
    if arrival == "closed" or settings.rate is not None:
        return []
    note = empty_window_note(settings, sessions, settings.warmup_s, settings.duration_s)
    if note is None:
        return []
    print(f"warning: {note.message}", file=sys.stderr, flush=True)
    return [note]


def _check_fits(sessions: Sequence[Session], path: str, facts: ServerFacts, shown: str) -> None:
    limit = facts.max_model_len
    if limit is None:
        return
    found = first_too_long(sessions, limit)
    if found is not None:
        sess, turn, req = found
        need = req.prompt_tokens + req.output_tokens
        raise TargetError(
            f"{path}: session {sess.id!r} request {turn} needs {need} tokens "
            f"({req.prompt_tokens} prompt + {req.output_tokens} output) but {shown} "
            f"serves {facts.model!r} with max_model_len {limit}; make one that fits "
            f"with `agentreplay traces generate --max-context {limit}` (or `traces "
            f"import --max-context {limit}` for a real trace): token sizes are "
            "scaled, the sessions' shape kept")


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
) -> Path:
    """:func:`run_load` on a fresh event loop (uvloop when available), for callers
    that are not async themselves (compare, demo, benchmarks)."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(run_load(settings, workload_path, out_dir, live=live,
                                   builder=builder, watch=watch))
