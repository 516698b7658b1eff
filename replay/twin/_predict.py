"""Predicting a load level from a profile: one small interface, ``predict_level``.

It runs the twin (``replay.twin``: the lanes and the simulator's engine on a
simulated clock) and summarises the level with the normal analysis, so a held-out
prediction takes seconds, not the level's duration, and its error is the error of
the instrument ``plan --twin`` uses.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LevelMetrics", "LoadShape", "mean_metrics", "measured_metrics", "predict_level"]


@dataclass(frozen=True)
class LevelMetrics:
    """The headline metrics of one level (None where the run had no sample)."""

    p90_interactivity: float | None
    """tok/s/user, the slow tail (per request 1/TPOT)."""
    p90_ttft_s: float | None
    """TTFT from the schedule (first token minus the time the request was due), as the
    SLO tiers and ``plan`` judge it: one TTFT for held-out errors, tiers and plan."""
    output_tok_s: float | None

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)

    def scaled(self, rate: float) -> LevelMetrics:
        """Rates times ``rate``, latencies divided by it (a clock ``rate`` x faster)."""
        def mul(v: float | None, f: float) -> float | None:
            return None if v is None else v * f
        return LevelMetrics(mul(self.p90_interactivity, rate), mul(self.p90_ttft_s, 1 / rate),
                            mul(self.output_tok_s, rate))


def mean_metrics(runs: list[LevelMetrics]) -> LevelMetrics:
    """Each metric's mean over the runs of one level that have it (repeated runs of a
    level measure it once, with the machine's drift between them averaged)."""
    def mean(values: list[float | None]) -> float | None:
        have = [v for v in values if v is not None]
        return sum(have) / len(have) if have else None
    return LevelMetrics(mean([r.p90_interactivity for r in runs]),
                        mean([r.p90_ttft_s for r in runs]),
                        mean([r.output_tok_s for r in runs]))


@dataclass(frozen=True)
class LoadShape:
    """How the measured run loaded its server, beyond users and duration."""

    warmup_s: float = 0.0
    drain_s: float = 30.0
    seed: int = 0
    api: str = "completions"
    think_scale: float = 1.0
    think_time_cap_s: float | None = None
    warmup_start: str = "midway"
    metrics_interval_s: float | None = 1.0


def measured_metrics(run_dir: str | os.PathLike[str]) -> LevelMetrics:
    """P90 interactivity, P90 TTFT from the schedule and output throughput of a run (no
    bootstrap)."""
    from analysis import read_run
    from analysis.judge import analyse_run

    s = analyse_run(read_run(run_dir), bootstrap=False, tiers=(), assess=False)
    return LevelMetrics(s.interactivity.p90, s.ttft_due.p90, s.output_tok_s)


def predict_level(profile: dict[str, Any], workload: str | os.PathLike[str], users: int,
                  duration_s: float, *, shape: LoadShape | None = None,
                  backend: str = "auto",
                  keep_dir: str | os.PathLike[str] | None = None) -> LevelMetrics:
    """What the twin of ``profile`` says ``users`` users of ``workload`` get (the
    profile's clock). The twin that ``plan --twin`` sweeps makes the prediction, so the
    held-out error a calibration shows is that instrument's own error."""
    from replay.servers.sim import SimProfile
    from replay.twin._level import load_workload, simulate_level

    shape = shape or LoadShape()
    result = simulate_level(
        SimProfile.model_validate(profile), load_workload(workload), users, duration_s,
        shape.warmup_s, think_scale=shape.think_scale, think_time_cap_s=shape.think_time_cap_s,
        drain_s=shape.drain_s, seed=shape.seed,
        backend="latency_specialized" if backend == "latency_specialized" else "auto",
        tiers=(), out_dir=keep_dir)
    s = result.summary
    return LevelMetrics(s.interactivity.p90, s.ttft_due.p90, s.output_tok_s)
