"""The held-out check's uncertainty: the measured level's own interval and the twin's
spread over seeds, turned into the twin's :class:`PredictionInterval`.

A held-out error means something only against how well the level itself was
measured: a 30-s level with a handful of requests has a P90 whose 95% interval is
wider than any fit error. So the check reads the measured level with its bootstrap
intervals (TTFT from the schedule, as the tiers judge it), predicts the level with
several twin seeds, and counts a *miss* only where the prediction falls outside the
measured interval. Too small a level is named in a note.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from replay.twin._interval import (
    METRICS,
    NOMINAL,
    PredictionInterval,
    combine_spread,
    current_rule,
    log_miss,
    seed_spread,
)
from replay.twin._predict import LoadShape

__all__ = ["MIN_REQUESTS", "MeasuredLevel", "holdout_interval", "measured_level"]

MIN_REQUESTS = 50
"""Fewer requests than this in a held-out window: its P90s rest on under 5 requests
beyond them, too few to check a twin against."""
TWIN_SEEDS = (0, 1, 2, 3)
"""Engine seeds of the fitted twin at the held-out level (the first: the prediction
``calibrate`` prints, reused)."""
_REFIT_SEED = 100
"""The refits' engine seeds start here (apart from ``TWIN_SEEDS``)."""
_NAMES = {"p90_interactivity": "P90 interactivity", "p90_ttft_s": "P90 TTFT from schedule",
          "output_tok_s": "output throughput"}


@dataclass(frozen=True)
class MeasuredLevel:
    """A measured level's metrics, their 95% intervals and the requests they rest on."""

    values: dict[str, float | None]
    ci: dict[str, tuple[float, float] | None]
    requests: int

    def outside(self, metric: str, predicted: float | None) -> bool:
        """Whether a prediction lies outside the level's own 95% interval (a miss)."""
        ci, v = self.ci.get(metric), self.values.get(metric)
        if predicted is None or v is None:
            return False
        if ci is None:
            return predicted != v
        return not ci[0] <= predicted <= ci[1]


def _metrics_of(summary: Any) -> tuple[dict[str, float | None],
                                       dict[str, tuple[float, float] | None]]:
    values = {"p90_interactivity": summary.interactivity.p90,
              "p90_ttft_s": summary.ttft_due.p90, "output_tok_s": summary.output_tok_s}
    ci = {"p90_interactivity": summary.interactivity.p90_ci,
          "p90_ttft_s": summary.ttft_due.p90_ci, "output_tok_s": None}
    return values, ci


def measured_level(run_dir: str | os.PathLike[str], seed: int = 0) -> MeasuredLevel:
    """A run's headline metrics with their bootstrap intervals."""
    from analysis import read_run
    from analysis.judge import analyse_run

    s = analyse_run(read_run(run_dir), bootstrap=True, tiers=(), seed=seed, assess=False)
    values, ci = _metrics_of(s)
    return MeasuredLevel(values, ci, int(s.counts.in_window))


def predicted_values(profile: dict[str, Any], workload: str | os.PathLike[str], users: int,
                     duration_s: float, shape: LoadShape, backend: str,
                     seed: int, engine_seed: int | None = None) -> dict[str, float | None]:
    """The twin's headline metrics at ``users`` with one twin seed (profile clock)."""
    from replay.servers.sim import SimProfile
    from replay.twin._level import load_workload, simulate_level

    result = simulate_level(
        SimProfile.model_validate(profile), load_workload(workload), users, duration_s,
        shape.warmup_s, think_scale=shape.think_scale, think_time_cap_s=shape.think_time_cap_s,
        drain_s=shape.drain_s, seed=seed, engine_seed=engine_seed,
        backend="latency_specialized" if backend == "latency_specialized" else "auto",
        tiers=())
    return _metrics_of(result.summary)[0]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def holdout_interval(profile: dict[str, Any], workload: str | os.PathLike[str], users: int,
                     duration_s: float, shape: LoadShape, backend: str,
                     measured: Sequence[MeasuredLevel], max_measured_users: int,
                     max_request_tokens: int, scale: float = 1.0,
                     workload_fingerprint: str = "",
                     refits: Sequence[dict[str, Any]] = (),
                     main: Mapping[str, float | None] | None = None) -> PredictionInterval:
    """The interval from one held-out level, compared with the mean of its measured
    runs. The twin predicts the level with each of ``TWIN_SEEDS`` (engine seeds; the
    first is the measured run's own seed, ``main`` where the caller already has it):
    their spread is one measurement's sampling spread. Each of ``refits`` (profiles
    fitted to bootstrap draws of the data, ``replay.twin._refit``) predicts it once
    with an engine seed of its own: their spread is a prediction's, the fit's
    uncertainty and the sampling spread together. ``scale``: the runs' clock over the
    profile's."""
    def predict(prof: dict[str, Any], engine_seed: int) -> dict[str, float | None]:
        return predicted_values(prof, workload, users, duration_s, shape, backend,
                                shape.seed, engine_seed=engine_seed)

    seeds = [dict(main) if main is not None and k == 0 else predict(profile, shape.seed + k)
             for k in TWIN_SEEDS]
    boot = [predict(p, shape.seed + _REFIT_SEED + k) for k, p in enumerate(refits)]
    miss: dict[str, float] = {}
    spread: dict[str, float] = {}
    fit_spread: dict[str, float] = {}
    sampling: dict[str, float] = {}
    notes: list[str] = []
    requests = min(m.requests for m in measured)
    for key in METRICS:
        rate = key != "p90_ttft_s"
        vals = [p[key] for p in seeds]
        mean_pred = _mean([v * (scale if rate else 1 / scale) for v in vals if v is not None])
        truth = _mean([v for m in measured if (v := m.values[key]) is not None])
        # one measurement differs from another of the same load by its step-noise draws
        # (the twin's spread over engine seeds); a prediction also by the fit's
        # uncertainty (the refits' spread, their seeds' noise in it): both sides
        noise = seed_spread(list(vals))
        pred_side = seed_spread([p[key] for p in boot]) if len(boot) >= 2 else noise
        spread[key] = combine_spread(noise, max(pred_side, noise), key)
        sampling[key] = noise
        fit_spread[key] = math.sqrt(max(pred_side ** 2 - noise ** 2, 0.0))
        # the raw miss estimates the bias (noise included: wider, never narrower); a
        # *miss* in the held-out verdict is a prediction outside the measured interval
        miss[key] = log_miss(mean_pred, truth)
        cis = [m.ci[key] for m in measured if m.ci[key] is not None]
        if mean_pred is not None and cis and any(m.outside(key, mean_pred) for m in measured):
            lo, hi = cis[0]  # type: ignore[misc]
            notes.append(f"held-out level {users} users: the twin's {_NAMES[key]} "
                         f"{mean_pred:.4g} lies outside the measured 95% interval "
                         f"[{lo:.4g}, {hi:.4g}] ({requests} requests): a miss")
    if requests < MIN_REQUESTS:
        notes.append(f"held-out level {users} users: {requests} requests in its window; "
                     f"its P90s rest on about {max(requests // 10, 0)} requests beyond them, "
                     f"too few to check the twin (measure at least {MIN_REQUESTS})")
    from scipy import stats

    dof = len(TWIN_SEEDS) - 1 + max(len(boot) - 1, 0)
    z = float(stats.t.ppf(0.5 + NOMINAL / 2, dof))
    return PredictionInterval(checked_users=users, z=z, max_measured_users=max_measured_users,
                              max_request_tokens=max_request_tokens, miss=miss, spread=spread,
                              requests=requests, notes=notes,
                              workload_fingerprint=workload_fingerprint,
                              fit_spread=fit_spread, refits=len(boot), sampling=sampling,
                              **current_rule())
