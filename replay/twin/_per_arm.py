"""A twin per arm of a comparison directory (``agentreplay demo``'s): each fitted on its
arm's own runs, planned on a ladder around the measured levels, stored as
``twin-plan.json`` (``twins``) so the decision and report.html show each twin's capacity
beside its own arm's measured bracket.

The fit is ``agentreplay calibrate``'s (``replay.twin.calibrate``, one level held out
for the prediction interval); the ladder is ``plan --twin``'s (``run_ladder``,
``capacities``, ``tier_interval``) on simulated time, with the demo's window, warmup and
drain, one replica (the arm's own server): the twin is judged against a bracket of the
same backend and replica count. Everything it adds is labelled modelled.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analysis import SloTier
    from replay.twin._interval import PredictionInterval
    from replay.twin._level import LevelResult

__all__ = ["TWIN_FILE", "arm_twins", "twin_ladder"]

TWIN_FILE = "twin-{arm}.json"
"""Each arm's fitted twin (a ``serve-sim --profile`` file, as ``calibrate -o`` writes)."""


def twin_ladder(levels: Sequence[int]) -> list[int]:
    """The measured levels and geometric steps between them: a tier's twin bracket is
    narrower than the measured one, and each measured level is also simulated."""
    from replay.twin._sweep import level_ladder

    return sorted({*levels, *level_ladder(min(levels), max(levels), 2 * len(levels))})


def arm_twins(out: Path, arms: Sequence[str], levels: Sequence[int], *,
               duration_s: float, warmup_s: float, drain_s: float,
               tiers: Sequence[SloTier]) -> tuple[dict[str, Any] | None, list[str]]:
    """Fit, plan and store a twin per arm; returns the stored plan (None: no arm's twin
    could be fitted) and a line per arm that could not be (the caller goes on without)."""
    import contextlib
    from functools import partial

    import orjson

    from analysis.report import TWIN_PLAN_FILE
    from replay.twin._sweep import forked

    holdout = levels[1] if len(levels) > 1 else None  # the prediction interval's check
    # the arms' twins are independent: one forked process each (plan's pool: workers
    # leave Ctrl-C to the parent and none outlives it)
    one = partial(_arm_twin_or_why, out=out, holdout=holdout, levels=levels,
                  duration_s=duration_s, warmup_s=warmup_s, drain_s=drain_s,
                  tiers=tuple(tiers))
    jobs = max(1, min(len(arms), os.cpu_count() or 1))
    pooled = forked(one, arms, jobs)
    with contextlib.closing(pooled):
        done = {arm: got for arm, got in pooled}
    docs = [got for arm in arms if isinstance(got := done[arm], dict)]
    problems = [got for arm in arms if isinstance(got := done[arm], str)]
    if not docs:
        return None, problems
    plan = {"twins": docs}
    (out / TWIN_PLAN_FILE).write_bytes(orjson.dumps(plan, option=orjson.OPT_INDENT_2))
    return plan, problems


def _arm_twin_or_why(arm: str, *, out: Path, holdout: int | None, levels: Sequence[int],
                     **kwargs: Any) -> tuple[str, dict[str, Any] | str]:
    """One arm's twin document, or the line saying why it could not be fitted."""
    from replay.errors import ConfigError

    try:
        return arm, _arm_twin(out, arm, holdout, levels, **kwargs)
    except ConfigError as exc:
        return arm, f"no twin of {arm}: {exc}"


def _arm_twin(out: Path, arm: str, holdout: int | None, levels: Sequence[int], *,
              duration_s: float, warmup_s: float, drain_s: float,
              tiers: Sequence[SloTier]) -> dict[str, Any]:
    """One arm: calibrate on its runs, write its twin file, simulate the ladder."""
    import orjson

    from replay.twin._calibrate import calibrate
    from replay.twin._interval import interval_of
    from replay.twin._level import load_workload
    from replay.twin._sweep import capacities, level_record, load_twin, run_ladder

    cal = calibrate([str(out / "runs")], arm=arm, holdout=(holdout,) if holdout else ())
    path = out / TWIN_FILE.format(arm=arm)
    path.write_bytes(orjson.dumps(cal.document(), option=orjson.OPT_INDENT_2))  # NaN: null
    profile, calibration = load_twin(path)  # the file as serve-sim and plan --twin read it
    backend = (calibration or {}).get("decode_backend", "auto")
    ladder = twin_ladder(levels)
    results = run_ladder(profile, load_workload(out / "workload.jsonl"), ladder, jobs=1,
                         duration=duration_s, warmup=warmup_s, drain_s=drain_s, replicas=1,
                         seed=0, backend=backend, tiers=tuple(tiers))
    pi = interval_of(calibration)
    caps = {c.tier: c for c in capacities(ladder, results, tiers)}
    return {"arm": arm, "twin": path.name, "profile": profile.name, "backend": backend,
            "replicas": 1, "gpus_per_replica": profile.gpu_count, "duration_s": duration_s,
            "error_band": None, "prediction_interval": None if pi is None else pi.as_dict(),
            "levels": [level_record(u, r) for u, r in zip(ladder, results, strict=True)],
            "tiers": [_tier(caps[t], ladder, results, pi) for t in tiers]}


def _tier(cap: Any, ladder: Sequence[int], results: Sequence[LevelResult],
          pi: PredictionInterval | None) -> dict[str, Any]:
    """A tier record as ``plan --twin`` stores it (the measured bracket is not known
    yet: the decision sets the two side by side)."""
    from replay.twin._band import interval_text
    from replay.twin._plan_interval import tier_interval
    from replay.twin._sweep import tier_record

    interval, bounds = None, None
    if pi is not None:
        ti = tier_interval(ladder, results, cap.tier, pi, 1)
        interval, bounds = interval_text(ti.strict, ti.loose), [ti.low, ti.high]
    return tier_record(cap, interval, []) | {"interval_bracket": bounds, "extrapolated": []}
