"""One run, start to end: probe, warmup, measured window, bounded drain, records.

:func:`run_load` is the library entry point (the CLI, compare and demo call it):
it probes the target, checks the workload fits, writes ``run.json`` with
``complete=false``, starts the lanes, the ``/metrics`` poller and the live view,
and after ``warmup + duration`` keeps the load on while the measured requests
still in flight finish (at most ``drain_s``); then everything left is cancelled
and recorded (status ``cancelled``), and the manifest is rewritten complete.
Setting the ``stop`` event ends the run early the same orderly way
(``interrupted=true``).
"""

from __future__ import annotations

import asyncio
import os
import platform
import socket
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiohttp
import numpy as np

from analysis._schema import ClockInfo, HostInfo, RunManifest, WorkloadRef
from replay._version import __version__
from replay.client._bodies import BodySpec, PrefixCacheModel
from replay.client._poller import MetricsPoller
from replay.client._probe import ServerFacts, connect_url, probe_server, public_target
from replay.client._stream import Timeouts, make_session
from replay.errors import ConfigError, TargetError
from replay.load._lanes import (
    LaneContext,
    PromptBuilder,
    closed_user,
    open_arrivals,
    open_plan,
    timestamp_session,
)
from replay.load._live import LiveStats, LiveView
from replay.load._settings import RunConfig
from replay.load._writer import RunWriter, close_manifest, iso_utc
from traces._io import iter_sessions, read_header
from traces._models import Request, Session, WorkloadHeader

__all__ = ["event_loop_factory", "run_load", "run_load_sync"]

_NS = 1_000_000_000


def _walk(requests: Sequence[Request]) -> list[tuple[int, Request]]:
    out: list[tuple[int, Request]] = []
    for turn, req in enumerate(requests):
        out.append((turn, req))
        for sub in req.subagents:
            out.extend(_walk(sub.requests))
    return out


def _check_fits(sessions: Sequence[Session], path: str, facts: ServerFacts, shown: str) -> None:
    limit = facts.max_model_len
    if limit is None:
        return
    for sess in sessions:
        for turn, req in _walk(sess.requests):
            need = req.prompt_tokens + req.output_tokens
            if need > limit:
                raise TargetError(
                    f"{path}: session {sess.id!r} request {turn} needs {need} tokens "
                    f"({req.prompt_tokens} prompt + {req.output_tokens} output) but {shown} "
                    f"serves {facts.model!r} with max_model_len {limit}"
                )


def _max_parallel_subagents(sessions: Sequence[Session]) -> int:
    best = 0
    for sess in sessions:
        for _, req in _walk(sess.requests):
            best = max(best, len(req.subagents))
    return best


def _arrival(config: RunConfig, header: WorkloadHeader) -> Literal["closed", "open",
                                                                   "timestamps"]:
    if config.rate is not None:
        return "open"
    return header.arrival


def _default_builder(block_size: int, vocab_size: int) -> PromptBuilder:
    from traces._materialise import Vocab, build_prompt

    vocab = Vocab(size=vocab_size)

    def build(req: Request, salt: int, prev: np.ndarray | None,
              prev_out: Sequence[int]) -> np.ndarray:
        return build_prompt(req, block_size, vocab, salt, prev, prev_out)

    return build


def _auth_headers(config: RunConfig) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ConfigError(f"--api-key-env {config.api_key_env}: that environment variable "
                              "is not set")
        headers["Authorization"] = f"Bearer {key}"
    return headers


async def run_load(
    config: RunConfig,
    workload_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    live: Literal["rich", "plain", "quiet"] = "quiet",
    stop: asyncio.Event | None = None,
    builder: PromptBuilder | None = None,
) -> Path:
    """Run one load test and return its run directory (see the module docstring)."""
    path = str(workload_path)
    out = Path(out_dir)
    header = read_header(path)
    sessions = list(iter_sessions(path))
    if not sessions:
        raise ConfigError(f"{path}: the workload holds no session")
    arrival = _arrival(config, header)
    root, basic = connect_url(config.target)
    headers = _auth_headers(config)
    if basic is not None and "Authorization" not in headers:
        headers["Authorization"] = basic
    lanes_per_user = 1 + _max_parallel_subagents(sessions)
    connections = config.users * lanes_per_user + 8 if arrival == "closed" else 0
    shown = public_target(config.target)
    session = make_session(connections, connect_s=config.connect_timeout_s)
    async with session:
        facts = await probe_server(session, config.target, headers, model=config.model,
                                   vocab_size=config.vocab_size,
                                   block_size=config.server_block_size)
        _check_fits(sessions, path, facts, shown)
        build = builder or _default_builder(header.block_size, facts.vocab_size)
        run_id = uuid.uuid4().hex[:12]
        t0_ns = time.monotonic_ns()
        t0_wall = datetime.now(UTC)
        manifest = RunManifest(
            run_id=run_id, label=config.label, target=shown, model=facts.model, api=config.api,
            server_info=facts.server_info, server_models=facts.models,
            gpu_count=facts.gpu_count, simulated=facts.simulated,
            workload=WorkloadRef(path=path, fingerprint=header.fingerprint,
                                 source=header.source, seed=header.seed,
                                 sessions=len(sessions), block_size=header.block_size),
            load=config.load_settings(arrival),
            clock=ClockInfo(t0_wall=iso_utc(t0_wall), t0_monotonic_ns=t0_ns),
            started_at=iso_utc(t0_wall), tool_version=__version__,
            host=HostInfo(hostname=socket.gethostname(), platform=platform.platform(),
                          python=sys.version.split()[0], cpu_count=os.cpu_count()),
            vocab_size=facts.vocab_size, server_block_size=facts.block_size,
        )
        if facts.max_model_len is None:
            manifest.warnings.append("server did not report max_model_len; prompts unchecked")
        writer = RunWriter(out)
        writer.write_manifest(manifest)
        stats = LiveStats(config.warmup_s + config.duration_s)

        def on_record(rec: dict[str, object]) -> None:
            writer.write_record(rec)
            stats.on_record(rec)

        def on_metrics(t_s: float, values: dict[str, float]) -> None:
            writer.write_metrics(t_s, values)
            stats.on_metrics(t_s, values)

        ctx = make_context(config, session, root, headers, facts.model, build,
                           header.block_size, facts.block_size, t0_ns, on_record, run_id[:8])
        if config.workers > 1 or config.ray is not None:
            from replay.load._workers import run_workers

            manifest.workers = config.workers
            await run_workers(config, path, manifest, writer, stats, session, root, headers,
                              facts, header.block_size, live=live,
                              stop=stop or asyncio.Event())
            return out
        stats.busy = lambda: ctx.busy
        stats.lanes = lambda: ctx.lanes
        helpers: list[asyncio.Task[Any]] = []
        poller = None
        if config.metrics_interval_s is not None:
            poller = MetricsPoller(session, f"{root}/metrics", config.metrics_interval_s,
                                   on_metrics, t0_ns, headers=headers)
            helpers.append(asyncio.create_task(poller.run()))
        helpers.append(asyncio.create_task(LiveView(stats, live).run()))
        _start_lanes(ctx, config, arrival, sessions)
        stop = stop or asyncio.Event()
        interrupted = False
        try:
            interrupted = await _wait_phases(ctx, config, stop, stats)
        except asyncio.CancelledError:
            interrupted = True
            ctx.cancel_reason = "interrupt"
            raise
        finally:
            await _stop_all(ctx)
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            if poller is not None:
                await poller.scrape()
            writer.close()
            close_manifest(manifest, warmup_s=config.warmup_s, duration_s=config.duration_s,
                           interrupted=interrupted,
                           crash=None if ctx.crash is None else repr(ctx.crash))
            writer.write_manifest(manifest)
        if ctx.crash is not None:
            raise ctx.crash
    return out


def make_context(
    config: RunConfig, session: aiohttp.ClientSession, root: str, headers: dict[str, str],
    model: str, build: PromptBuilder, block_size: int, server_block_size: int, t0_ns: int,
    on_record: Callable[[dict[str, object]], None], run_tag: str, worker: int = 0,
) -> LaneContext:
    """The lanes' shared state for one process (the whole run, or one worker's share)."""
    warm_ns = int(config.warmup_s * _NS)
    window_end_ns = t0_ns + warm_ns + int(config.duration_s * _NS)
    return LaneContext(
        session=session,
        url=f"{root}/v1/chat/completions" if config.api == "chat" else f"{root}/v1/completions",
        headers=headers,
        spec=BodySpec(model=model, api=config.api, carry_output=config.carry_output),
        timeouts=Timeouts(connect_s=config.connect_timeout_s,
                          first_token_s=config.first_token_timeout_s,
                          itl_s=config.itl_timeout_s, total_s=config.total_timeout_s),
        build=build, block_size=block_size,
        cache=PrefixCacheModel(server_block_size), t0_ns=t0_ns,
        warmup_end_ns=t0_ns + warm_ns, window_end_ns=window_end_ns,
        issue_end_ns=window_end_ns + int(config.drain_s * _NS),
        on_record=on_record, run_tag=run_tag, think_scale=config.think_time_scale,
        think_cap_s=config.think_time_cap_s, max_line_bytes=config.max_line_bytes,
        worker=worker,
    )


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when uvloop is installed, else None (asyncio's default)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return None
    return uvloop.new_event_loop


def run_load_sync(
    config: RunConfig,
    workload_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    live: Literal["rich", "plain", "quiet"] = "quiet",
    builder: PromptBuilder | None = None,
) -> Path:
    """:func:`run_load` on a fresh event loop (uvloop when available), for callers
    that are not async themselves (compare, demo, benchmarks)."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(run_load(config, workload_path, out_dir, live=live,
                                   builder=builder))


def _start_lanes(ctx: LaneContext, config: RunConfig, arrival: str,
                 sessions: Sequence[Session], users: Sequence[int] | None = None) -> None:
    horizon = (ctx.issue_end_ns - ctx.t0_ns) / _NS
    if arrival == "closed":
        midway = config.warmup_start == "midway" and config.warmup_s > 0
        for user in range(config.users) if users is None else users:
            ctx.spawn(closed_user(ctx, user, sessions, config.seed, midway, config.warmup_s))
    elif arrival == "open":
        if config.rate is not None:
            plan = open_plan(config.rate, config.seed, horizon)
        else:
            plan = sorted((s.requests[0].arrival_s or 0.0) for s in sessions)
            base = plan[0] if plan else 0.0
            plan = [a - base for a in plan]
            sessions = sorted(sessions, key=lambda s: s.requests[0].arrival_s or 0.0)
        ctx.spawn(open_arrivals(ctx, sessions, plan, config.seed))
    else:
        origin = min((r.arrival_s or 0.0) for s in sessions for r in s.requests)
        for user, sess in enumerate(sessions):
            ctx.spawn(timestamp_session(ctx, user, sess, config.seed, origin))


async def _wait_phases(ctx: LaneContext, config: RunConfig, stop: asyncio.Event,
                       stats: LiveStats) -> bool:
    """Wait out warmup, window and drain; True if ``stop`` cut the run short."""
    stopper = asyncio.create_task(_first(stop.wait(), ctx.crashed.wait()))
    try:
        for phase, end_ns in (("warmup", ctx.warmup_end_ns), ("measure", ctx.window_end_ns)):
            stats.phase = phase
            if await _wait_until(stopper, end_ns, ctx):
                ctx.cancel_reason = "interrupt"
                return True
        stats.phase = "drain"
        if ctx.measure_inflight > 0:
            idle = asyncio.create_task(ctx.measure_idle.wait())
            deadline = max(0.0, (ctx.issue_end_ns - time.monotonic_ns()) / _NS)
            done, _ = await asyncio.wait({idle, stopper}, timeout=deadline,
                                         return_when=asyncio.FIRST_COMPLETED)
            idle.cancel()
            if stopper in done:
                ctx.cancel_reason = "interrupt"
                return True
        return False
    finally:
        stopper.cancel()


async def _first(*aws: Coroutine[Any, Any, Any]) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


async def _wait_until(stopper: asyncio.Task[Any], end_ns: int, ctx: LaneContext) -> bool:
    """Sleep until ``end_ns``; returns early (True) if stopped. Ends early when every
    lane is gone (a finite open-loop or timestamp plan)."""
    while True:
        rem = (end_ns - time.monotonic_ns()) / _NS
        if rem <= 0:
            return False
        if not ctx.tasks:
            return False
        done, _ = await asyncio.wait({stopper}, timeout=min(rem, 0.25))
        if done:
            return True


async def _stop_all(ctx: LaneContext) -> None:
    ctx.stopped = True
    while ctx.tasks:
        pending = list(ctx.tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
