"""One load level on the twin: a real run's code on simulated time, in-process engines.

:func:`simulate_level` runs a level through ``replay.load.drive_run``, the core every
run shares: the same workload preparation, fit check, manifest, lanes (prompt
builder, client prefix model, think-time rules) and close. Only three things
differ, each through a seam of that core: the transport is :meth:`TwinEngines.send`
(``replay.load.Transport``), the pollers sample the engines' counters instead of
``/metrics``, and the event loop is a :class:`VirtualLoop`, so every clock the run
reads is simulated. The records stay in memory (``replay.load.MemoryStore``) unless
``out_dir`` keeps an ordinary run directory, and the close analyses them once
(``analysis.judge.analyse_run``): the summary is the normal ``RunSummary``, so the
normal metrics, tiers and ``meets_tier`` apply unchanged.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from analysis import (
    DEFAULT_MAX_FAILURE_SHARE,
    DEFAULT_TIERS,
    RunSummary,
    SloTier,
)
from analysis.judge import Rules
from analysis.text import plural
from replay.client import ServerFacts, make_session
from replay.load import (
    Analysis,
    ClosedRun,
    Lanes,
    MemoryStore,
    Poller,
    RecordStore,
    RunSettings,
    RunWriter,
    Target,
    WindowStop,
    Workload,
    check_fits,
    drive_run,
    load_workload,
    new_manifest,
    prepare_run,
)
from replay.servers.sim import Backend, SimProfile, server_info
from replay.twin._clock import VirtualLoop, virtual_time
from replay.twin._engines import PromptTap, Routing, TwinEngines
from replay.twin._interrupt import run_to_end

__all__ = ["LevelResult", "Workload", "load_workload", "simulate_level"]

_NS = 1_000_000_000
_ORIGIN_NS = 1_000 * _NS
"""Simulated monotonic time at the run's origin (any positive value would do)."""
TARGET = "twin://in-process"
"""The target a twin's run names (its engines run in this process)."""


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
    engine_seed: int | None = None, window_stop: WindowStop | None = None,
) -> LevelResult:
    """Run ``users`` closed-loop users for ``warmup + duration`` (+ drain) simulated
    seconds against ``replicas`` twin engines; summarise as ``analysis`` does.

    ``out_dir`` keeps the run directory (``agentreplay report`` reads it); otherwise
    the records stay in memory and are handed to the analysis from there. The client's
    first-token and total timeouts apply as in a real run (``--ttft-timeout``,
    ``--total-timeout``).
    ``engine_seed`` seeds the engines' step noise apart from the load (default: ``seed``):
    a hidden truth and its twin replay one workload with one seed, but a real server's
    stalls do not follow the twin's draws.
    ``window_stop`` may end the window early, as in a real run (``replay.load.WindowStop``:
    the virtual clock is causal, so what it saw at ``t`` does not depend on the stop)."""
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
    prepared = prepare_run(settings, workload)
    facts = _facts(profile, backend, replicas)
    check_fits(prepared.sessions, workload.path, facts, f"the twin's profile {profile.name!r}")
    engines = TwinEngines(profile, backend=backend, replicas=replicas, routing=routing,
                          seed=seed if engine_seed is None else engine_seed)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    store: RecordStore = MemoryStore(TARGET) if out_dir is None else RunWriter(Path(out_dir))
    how = Analysis(seed=seed, tiers=tiers, bootstrap=bootstrap,
                   rules=Rules(max_failure_share=max_failure_share))

    async def main() -> ClosedRun:
        run_id = uuid.uuid4().hex[:12]
        target = Target(root=TARGET, headers={}, model=profile.model,
                        vocab_size=profile.vocab_size, block_size=workload.header.block_size,
                        server_block_size=profile.block_size, run_tag=run_id[:8])
        manifest = new_manifest(prepared.settings, run_id, facts, workload.header,
                                workload.path, len(prepared.sessions), "closed", target=TARGET)
        manifest.warnings.append("modelled (twin): simulated time, in-process engines "
                                 f"(profile {profile.name}, {plural(replicas, 'replica')})")
        engines.tap = PromptTap(target.server_block_size)
        lanes = Lanes(transport=engines.send, cache=engines.tap, probe_loop=False,
                      window_stop=window_stop)

        def pollers(_stats: object, t0_ns: int) -> list[Poller]:
            return [_Counters(engines, store, t0_ns, (0.0, warmup, warmup + duration / 2,
                                                      warmup + duration))]

        async with make_session(0) as session:  # the transport's argument; never used
            return await drive_run(prepared, manifest, store, target, session,
                                   out=Path(out_dir) if out_dir is not None else Path(TARGET),
                                   lanes=lanes, pollers=pollers, analysis=how)

    loop = VirtualLoop(engines.advance, start_ns=_ORIGIN_NS)
    with virtual_time(loop):  # Ctrl-C stops the level in order, then KeyboardInterrupt
        closed = run_to_end(loop, main)
    sim_s = (loop.now_ns - _ORIGIN_NS) / _NS
    assert closed.summary is not None, "records kept in memory are always readable"
    steps = sum(r.steps for r in engines.replicas)
    return LevelResult(summary=closed.summary, run_dir=None if out_dir is None else closed.dir,
                       records=closed.records, sim_s=sim_s,
                       wall_s=time.perf_counter() - wall0, cpu_s=time.process_time() - cpu0,
                       steps=steps)


class _Counters:
    """The engines' counters as the ``/metrics`` poller would scrape them, at the
    window's edges and middle (counters are read by interpolation: samples at the
    edges make it exact), and once more when the run ends."""

    def __init__(self, engines: TwinEngines, store: RecordStore, t0_ns: int,
                 at_s: tuple[float, ...]) -> None:
        self.engines, self.store, self.t0_ns, self.at_s = engines, store, t0_ns, at_s

    async def run(self) -> None:
        for t_s in self.at_s:
            await asyncio.sleep(max(0.0, (self.t0_ns + t_s * _NS - time.monotonic_ns()) / _NS))
            self.store.write_metrics(t_s, self.engines.metrics())

    async def scrape(self) -> None:
        self.store.write_metrics((time.monotonic_ns() - self.t0_ns) / _NS,
                                 self.engines.metrics())


def _facts(profile: SimProfile, backend: Backend, replicas: int) -> ServerFacts:
    """What a probe of the twin's engines would find (their profile's)."""
    info = server_info(profile, backend, 1.0)
    info["twin"] = {"replicas": replicas}
    return ServerFacts(model=profile.model, models={}, max_model_len=profile.max_model_len,
                       server_info=info, vocab_size=profile.vocab_size,
                       block_size=profile.block_size, gpu_count=profile.gpu_count * replicas,
                       simulated=True)
