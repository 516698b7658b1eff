"""What-if sweeps on the twin: a ladder of user levels, each tier's modelled capacity.

A twin file is a simulator profile (the JSON ``serve-sim --profile FILE`` reads)
that may carry a top-level ``calibration`` block (what ``agentreplay calibrate``
fitted it on); the twin never reads it beyond saying the profile is calibrated.

Capacity per SLO tier is read off the simulated ladder exactly as off a measured
sweep: the largest level up to which every level met the tier
(``analysis.judge.meets_tier``, ``bracket_of``), and the first that failed; it is
only as fine as the ladder. With ``replicas`` engines
behind session-affinity routing the capacity is the fleet's; replicas needed for
K agents scale the per-replica capacity linearly (affinity keeps each session's
cache on one replica, so replicas do not share load beyond routing).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from analysis import SloTier
from analysis.judge import Bracket, bracket_of, meets_tier
from replay.errors import ConfigError
from replay.servers.sim import SimProfile
from replay.twin._level import LevelResult, Workload, simulate_level
from traces import first_problem

__all__ = ["TierCapacity", "capacities", "level_ladder", "load_twin", "replicas_needed",
           "run_ladder"]

CALIBRATION_KEY = "calibration"


def load_twin(path: str | os.PathLike[str]) -> tuple[SimProfile, dict[str, Any] | None]:
    """The twin's profile and its ``calibration`` block (None when absent).

    Every problem is one :class:`ConfigError` naming the file and the field."""
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError(f"--twin {where}: cannot read the twin file: "
                          f"{exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--twin {where}: line {exc.lineno}: invalid JSON: {exc.msg}") \
            from None
    except UnicodeDecodeError:
        raise ConfigError(f"--twin {where}: not a text (UTF-8 JSON) file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--twin {where}: must be a JSON object (a simulator profile)")
    calibration = data.get(CALIBRATION_KEY)
    if CALIBRATION_KEY not in SimProfile.model_fields:  # profiles that predate the field
        data.pop(CALIBRATION_KEY, None)
    try:
        profile = SimProfile.model_validate(data)
    except ValidationError as exc:
        problem = first_problem(exc)
        msg, field = problem.message, problem.field
        if not field:  # a check across fields: it names its field first
            first = msg.split(" ", 1)[0]
            field = first if first in SimProfile.model_fields else "(profile)"
        raise ConfigError(f"--twin {where}: field {field}: {msg} (a twin file is a "
                          "simulator profile, as `serve-sim --profile FILE` reads)") from None
    if isinstance(calibration, dict):
        from replay.twin._interval import interval_problem

        unreadable = interval_problem(calibration.get("interval"))
        if unreadable:
            raise ConfigError(f"--twin {where}: field {unreadable}")
    return profile, calibration if isinstance(calibration, dict) else None


def level_ladder(lo: int, hi: int, levels: int) -> list[int]:
    """Up to ``levels`` distinct user counts from ``lo`` to ``hi``, spaced geometrically
    (capacity questions span orders of magnitude; every level is a whole user)."""
    if lo < 1 or hi < lo or levels < 1:
        raise ValueError("need 1 <= lo <= hi and levels >= 1")
    if levels == 1 or lo == hi:
        return [hi]
    ratio = (hi / lo) ** (1.0 / (levels - 1))
    out = sorted({max(lo, min(hi, round(lo * ratio ** i))) for i in range(levels)})
    return out


_JOB: tuple[SimProfile, Workload, dict[str, Any]] | None = None
"""What a worker process simulates (set before the fork, read in the child)."""


def _run_one(users: int) -> tuple[int, LevelResult]:
    assert _JOB is not None
    profile, workload, kwargs = _JOB
    out_dir = kwargs.pop("out_dir", None)
    keep = None if out_dir is None else os.path.join(out_dir, f"users-{users:04d}")
    try:
        return users, simulate_level(profile, workload, users, out_dir=keep, **kwargs)
    finally:
        kwargs["out_dir"] = out_dir


def run_ladder(profile: SimProfile, workload: Workload, levels: Sequence[int], *,
               jobs: int = 1, out_dir: str | None = None,
               on_level: Callable[[int, LevelResult], None] | None = None,
               **kwargs: Any) -> list[LevelResult]:
    """Every level's result, in ladder order; ``on_level`` sees each as it finishes
    (any order). ``jobs`` > 1 simulates levels in that many forked processes
    (levels are independent), the costly top levels first so no long one is left
    to run alone at the end. ``kwargs`` go to :func:`simulate_level`; ``out_dir``
    keeps each level's run as ``users-NNNN`` under it."""
    global _JOB
    _JOB = (profile, workload, dict(kwargs, out_dir=out_dir))
    done: dict[int, LevelResult] = {}
    try:
        if jobs <= 1 or len(levels) <= 1:
            for users in levels:
                res = done[users] = _run_one(users)[1]
                if on_level is not None:
                    on_level(users, res)
        else:
            pooled = forked(_run_one, sorted(levels, reverse=True), jobs)
            with contextlib.closing(pooled):  # the workers stop however this loop ends
                for users, res in pooled:
                    done[users] = res
                    if on_level is not None:
                        on_level(users, res)
    finally:
        _JOB = None
    return [done[u] for u in levels]


POOL_DEADLINE_S = 10.0
"""How long the parent waits for stopped workers to exit before it kills them."""


def _worker_signals() -> None:
    """In each worker: Ctrl-C (sent to the whole process group) and the parent's
    SIGTERM-as-Ctrl-C handler (``replay.cli``) do not apply; the parent alone stops
    the pool, and its SIGTERM ends a worker at once, with no traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)  # blocked by the fork (forked)


_STOPS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
"""The signals that stop a plan: the parent's main thread alone may take them."""


@contextlib.contextmanager
def _main_thread_takes_stops() -> Iterator[None]:
    """While the pool starts, the stop signals are blocked here, so the threads the
    pool starts (and the workers it forks) are born blocking them: the kernel then
    delivers a Ctrl-C or SIGTERM to the main thread, whose wait on the pool's results
    it interrupts. Before, a signal the kernel gave one of the pool's threads only
    tripped Python's flag, and the main thread, asleep on a lock, saw it when the next
    level finished: minutes for the top levels, which run first. A signal that came
    while blocked is delivered here on the way out."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


_T = TypeVar("_T")
_R = TypeVar("_R")


def forked(fn: Callable[[_T], _R], items: Sequence[_T], jobs: int) -> Generator[_R]:
    """``fn`` of each item in ``jobs`` forked workers, as they finish (any order). However
    the parent leaves (done, Ctrl-C, an error) the workers are terminated, and any still
    alive after :data:`POOL_DEADLINE_S` are killed: no worker outlives the plan."""
    import multiprocessing
    import threading

    ctx = multiprocessing.get_context("fork")
    before = set(multiprocessing.active_children())
    pool = None
    try:
        with _main_thread_takes_stops():
            pool = ctx.Pool(min(jobs, len(items)), initializer=_worker_signals)
        yield from pool.imap_unordered(fn, items)
    finally:
        if pool is not None:
            stopper = threading.Thread(target=pool.terminate, daemon=True)
            stopper.start()
            stopper.join(POOL_DEADLINE_S)
        for proc in multiprocessing.active_children():  # also reaps those that exited
            if proc not in before and proc.is_alive():
                proc.kill()


@dataclass(frozen=True)
class TierCapacity:
    """One tier's modelled capacity on the ladder, as a measured sweep's is read."""

    tier: SloTier
    bracket: Bracket
    """``analysis.bracket_of`` over (level, ``meets_tier``): the largest level up to
    which every level met the tier, the first that failed, levels that met it again."""

    @property
    def users(self) -> int | None:
        """The capacity read off the ladder (None: the lowest level failed)."""
        return None if self.bracket.passed is None else int(self.bracket.passed)


def capacities(levels: Sequence[int], results: Sequence[LevelResult],
               tiers: Sequence[SloTier]) -> list[TierCapacity]:
    """Each tier's bracket on the ladder (``meets_tier`` per level, ``bracket_of``)."""
    out = []
    for tier in tiers:
        outcomes = [(float(u), meets_tier(r.summary, tier))
                    for u, r in zip(levels, results, strict=True)]
        out.append(TierCapacity(tier=tier, bracket=bracket_of(outcomes)))
    return out


def level_record(users: int, result: LevelResult) -> dict[str, Any]:
    """A simulated level as ``twin-plan.json`` stores it (``plan --twin``, the demo)."""
    s = result.summary
    return {"users": users, "p90_interactivity": s.interactivity.p90,
            "p90_ttft_due_s": s.ttft_due.p90, "output_tok_s": s.output_tok_s}


def tier_record(cap: TierCapacity, interval: str | None,
                measured: list[dict[str, Any]]) -> dict[str, Any]:
    """A tier's modelled capacity as ``twin-plan.json`` stores it, with the measured
    brackets it was set beside (none yet: the decision sets them side by side)."""
    return {"tier": cap.tier.name, "floor": cap.tier.floor_tok_s, "ttft": cap.tier.ttft_s,
            "bracket": [cap.bracket.passed, cap.bracket.failed],
            "text": cap.bracket.text("users"), "interval": interval, "measured": measured}


def replicas_needed(agents: int, capacity_users: int | None, replicas: int) -> int | None:
    """Replicas for ``agents`` when ``replicas`` of them served ``capacity_users``
    within the tier (linear in the per-replica capacity); None without a capacity."""
    if capacity_users is None or capacity_users <= 0:
        return None
    per_replica = capacity_users / replicas
    return max(1, math.ceil(agents / per_replica - 1e-9))
