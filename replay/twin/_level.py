"""One load level on the twin: the real lanes against in-process engines, on simulated time.

:func:`simulate_level` builds the run's ``LaneContext`` exactly as a real run does
(``replay.load.make_context``, the same prompt builder, client prefix model and
think-time rules), swaps its transport for :meth:`TwinEngines.send` and drives it
with ``replay.load.drive_lanes`` on a :class:`VirtualLoop`. The records go to an
ordinary run directory (``run.json`` + ``requests.jsonl``, marked simulated), which
``analysis`` reads back: the summary is the normal ``RunSummary``, so the normal
metrics, tiers and ``meets_tier`` apply unchanged.
"""

from __future__ import annotations

import asyncio
import os
import platform
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from analysis import (
    DEFAULT_MAX_FAILURE_SHARE,
    DEFAULT_TIERS,
    RecordDict,
    RunManifest,
    RunSummary,
    SloTier,
    measure,
    read_run,
    summarize,
)
from analysis.schema import ClockInfo, Coverage, HostInfo, WorkloadRef
from replay._version import __version__
from replay.load import (
    RunSettings,
    RunWriter,
    Target,
    check_time_controls,
    close_manifest,
    drive_lanes,
    first_too_long,
    iso_utc,
    make_context,
    retimed,
)
from replay.servers.sim import Backend, SimProfile, server_info
from replay.twin._clock import VirtualLoop, virtual_time
from replay.twin._engines import PromptTap, Routing, TwinEngines
from traces import Session, WorkloadHeader, iter_sessions, read_header

__all__ = ["LevelResult", "Workload", "load_workload", "simulate_level"]

_NS = 1_000_000_000
_ORIGIN_NS = 1_000 * _NS
"""Simulated monotonic time at the run's origin (any positive value would do)."""


@dataclass(frozen=True)
class Workload:
    """A workload read once and replayed at every level."""

    path: str
    header: WorkloadHeader
    sessions: tuple[Session, ...]


def load_workload(path: str | os.PathLike[str]) -> Workload:
    """Read a workload file (closed-loop sessions) for :func:`simulate_level`."""
    p = str(path)
    header = read_header(p)
    return Workload(path=p, header=header, sessions=tuple(iter_sessions(p)))


@dataclass(frozen=True)
class LevelResult:
    """One simulated level: the analysis' summary and what the simulation cost."""

    summary: RunSummary
    run_dir: Path | None
    records: int
    sim_s: float
    """Simulated seconds from the origin to the last lane stopped."""
    wall_s: float
    cpu_s: float
    steps: int


def simulate_level(
    profile: SimProfile, workload: Workload, users: int, duration: float, warmup: float, *,
    think_scale: float = 1.0, think_time_cap_s: float | None = None, drain_s: float = 30.0,
    replicas: int = 1, routing: Routing = "affinity", seed: int = 0,
    backend: Backend = "latency_specialized", tiers: tuple[SloTier, ...] = DEFAULT_TIERS,
    max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE, bootstrap: bool = False,
    out_dir: str | os.PathLike[str] | None = None,
    first_token_timeout_s: float | None = 600.0, total_timeout_s: float | None = 3600.0,
    engine_seed: int | None = None,
) -> LevelResult:
    """Run ``users`` closed-loop users for ``warmup + duration`` (+ drain) simulated
    seconds against ``replicas`` twin engines; summarise as ``analysis`` does.

    ``out_dir`` keeps the run directory (``agentreplay report`` reads it); otherwise
    it is written to a temporary directory and removed. The client's first-token and
    total timeouts apply as in a real run (``--ttft-timeout``, ``--total-timeout``).
    ``engine_seed`` seeds the engines' step noise apart from the load (default: ``seed``):
    a hidden truth and its twin replay one workload with one seed, but a real server's
    stalls do not follow the twin's draws."""
    settings = RunSettings(
        target="http://127.0.0.1:9", users=users, duration_s=duration, warmup_s=warmup,
        drain_s=drain_s, think_scale=think_scale, think_time_cap_s=think_time_cap_s, seed=seed,
        metrics_interval_s=None, label=backend, first_token_timeout_s=first_token_timeout_s,
        total_timeout_s=total_timeout_s,
    )
    if workload.header.arrival != "closed":
        from replay.errors import ConfigError

        raise ConfigError(f"{workload.path}: the twin replays closed-loop workloads; this "
                          f"one's arrival mode is {workload.header.arrival!r}")
    check_time_controls(settings, workload.header.arrival, workload.path, rated=False)
    _check_fits(workload, profile)
    sessions = retimed(settings, list(workload.sessions), workload.path)
    engines = TwinEngines(profile, backend=backend, replicas=replicas, routing=routing,
                          seed=seed if engine_seed is None else engine_seed)
    records: list[RecordDict] = []
    wall0, cpu0 = time.perf_counter(), time.process_time()
    loop = VirtualLoop(engines.advance, start_ns=_ORIGIN_NS)
    run_tag = uuid.uuid4().hex[:8]
    target = Target(root="twin://in-process", headers={}, model=profile.model,
                    vocab_size=profile.vocab_size, block_size=workload.header.block_size,
                    server_block_size=profile.block_size, run_tag=run_tag)

    metrics: list[tuple[float, dict[str, float]]] = []

    async def sample() -> None:
        """``/metrics`` as the poller would scrape it, at the window's edges and middle
        (counters are read by interpolation: samples at the edges make it exact)."""
        for t_s in (0.0, warmup, warmup + duration / 2, warmup + duration):
            await asyncio.sleep(max(0.0, (_ORIGIN_NS + t_s * _NS - loop.now_ns) / _NS))
            metrics.append((t_s, engines.metrics()))

    async def main() -> Any:
        ctx = make_context(settings, target, cast(Any, None), _ORIGIN_NS, records.append)
        ctx.transport = engines.send
        ctx.cache = engines.tap = PromptTap(target.server_block_size)
        sampler = asyncio.ensure_future(sample())
        try:
            return await drive_lanes(ctx, settings, "closed", sessions, asyncio.Event(),
                                     probe_loop=False)
        finally:
            sampler.cancel()
            metrics.append(((loop.now_ns - _ORIGIN_NS) / _NS, engines.metrics()))

    try:
        with virtual_time(loop):
            outcome = loop.run_until_complete(main())
    finally:
        loop.close()
    sim_s = (loop.now_ns - _ORIGIN_NS) / _NS
    if outcome.crash is not None:
        raise outcome.crash
    manifest = _manifest(settings, profile, backend, replicas, workload, len(sessions),
                         run_tag)
    manifest.coverage = Coverage(lanes=outcome.lanes,
                                 lanes_done_before_window_end=outcome.done_early)
    close_manifest(manifest, warmup_s=warmup, duration_s=duration, interrupted=False,
                   crash=None)
    if out_dir is not None:
        summary, kept = _summarise(Path(out_dir), manifest, records, metrics, tiers,
                                   max_failure_share, bootstrap, seed), Path(out_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="agentreplay-twin-") as tmp:
            summary = _summarise(Path(tmp) / "run", manifest, records, metrics, tiers,
                                 max_failure_share, bootstrap, seed)
        kept = None
    steps = sum(r.steps for r in engines.replicas)
    return LevelResult(summary=summary, run_dir=kept, records=len(records), sim_s=sim_s,
                       wall_s=time.perf_counter() - wall0, cpu_s=time.process_time() - cpu0,
                       steps=steps)


def _check_fits(workload: Workload, profile: SimProfile) -> None:
    """Every request fits the profile's context, as a real run checks against the server."""
    from replay.errors import ConfigError

    limit = profile.max_model_len
    found = first_too_long(workload.sessions, limit)
    if found is not None:
        sess, turn, req = found
        need = req.prompt_tokens + req.output_tokens
        raise ConfigError(
            f"{workload.path}: session {sess.id!r} request {turn} needs {need} tokens "
            f"but the twin's profile {profile.name!r} has max_model_len {limit}; "
            f"make one that fits with `agentreplay traces generate --max-context "
            f"{limit}` (or `traces import --max-context {limit}`)")


def _summarise(run_dir: Path, manifest: RunManifest, records: Sequence[RecordDict],
               metrics: Sequence[tuple[float, dict[str, float]]], tiers: tuple[SloTier, ...],
               max_failure_share: float, bootstrap: bool, seed: int) -> RunSummary:
    writer = RunWriter(run_dir)
    try:
        writer.write_manifest(manifest)
        for rec in records:
            writer.write_record(rec)
        for t_s, values in metrics:
            writer.write_metrics(t_s, values)
    finally:
        writer.close()
    return summarize(measure(read_run(run_dir)), seed=seed, tiers=tiers, bootstrap=bootstrap,
                     max_failure_share=max_failure_share)


def _manifest(settings: RunSettings, profile: SimProfile, backend: Backend, replicas: int,
              workload: Workload, sessions: int, run_tag: str) -> RunManifest:
    header = workload.header
    now = iso_utc(datetime.now(UTC))
    info = server_info(profile, backend, 1.0)
    info["twin"] = {"replicas": replicas}
    manifest = RunManifest(
        run_id=run_tag, label=settings.label, target="twin://in-process",
        model=profile.model, api="completions", server_info=info,
        gpu_count=profile.gpu_count * replicas, simulated=True,
        workload=WorkloadRef(path=workload.path, fingerprint=header.fingerprint,
                             source=header.source, seed=header.seed, sessions=sessions,
                             block_size=header.block_size),
        load=settings.load_settings("closed"),
        clock=ClockInfo(t0_wall=now, t0_monotonic_ns=_ORIGIN_NS),
        started_at=now, tool_version=__version__,
        host=HostInfo(hostname=socket.gethostname(), platform=platform.platform(),
                      python=sys.version.split()[0], cpu_count=os.cpu_count()),
        vocab_size=profile.vocab_size, server_block_size=profile.block_size,
    )
    manifest.warnings.append("modelled (twin): simulated time, in-process engines "
                             f"(profile {profile.name}, {replicas} replica(s))")
    return manifest
