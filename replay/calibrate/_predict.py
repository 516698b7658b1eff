"""Predicting a load level from a profile: one small interface, ``predict_level``.

Today it replays the workload against a loopback ``serve-sim`` running the profile
(real time, optionally sped up by ``time_scale``) and measures the run with the normal
analysis. A simulated-clock twin can replace the body later; callers only see
``predict_level(profile, workload, users, duration_s, ...) -> LevelMetrics``.

Speeding up: a sim at ``time_scale`` x runs every step x times faster, so the think
times and the run's phases are shortened by x too (the same load in model time) and
the measured metrics are converted back (rates / x, latencies * x).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["LevelMetrics", "LoadShape", "measured_metrics", "predict_level"]


@dataclass(frozen=True)
class LevelMetrics:
    """The headline metrics of one level (None where the run had no sample)."""

    p90_interactivity: float | None
    """tok/s/user, the slow tail (per request 1/TPOT)."""
    p90_ttft_s: float | None
    output_tok_s: float | None

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)

    def scaled(self, rate: float) -> LevelMetrics:
        """Rates times ``rate``, latencies divided by it (a clock ``rate`` x faster)."""
        def mul(v: float | None, f: float) -> float | None:
            return None if v is None else v * f
        return LevelMetrics(mul(self.p90_interactivity, rate), mul(self.p90_ttft_s, 1 / rate),
                            mul(self.output_tok_s, rate))


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
    """P90 interactivity, P90 TTFT and output throughput of a run (no bootstrap)."""
    from analysis import measure, read_run, summarize

    s = summarize(measure(read_run(run_dir)), bootstrap=False, tiers=())
    return LevelMetrics(s.interactivity.p90, s.ttft.p90, s.output_tok_s)


def predict_level(profile: dict[str, Any], workload: str | os.PathLike[str], users: int,
                  duration_s: float, *, shape: LoadShape | None = None,
                  time_scale: float = 1.0, backend: str = "auto",
                  keep_dir: str | os.PathLike[str] | None = None) -> LevelMetrics:
    """What the profile says ``users`` users of ``workload`` get (real-clock metrics)."""
    from replay.load import RunSettings, run_load_sync
    from replay.sim import SimServerProcess

    shape = shape or LoadShape()
    slow = 1.0 / time_scale  # wall seconds of the sped-up sim per second of the model
    with tempfile.TemporaryDirectory(prefix="agentreplay-predict-") as tmp:
        prof = Path(tmp) / "twin.json"
        prof.write_text(json.dumps(profile))
        out = Path(keep_dir) if keep_dir is not None else Path(tmp) / "run"
        with SimServerProcess(str(prof), backend, time_scale=time_scale) as srv:
            settings = RunSettings(
                target=srv.url, users=users, duration_s=duration_s * slow,
                warmup_s=shape.warmup_s * slow, drain_s=shape.drain_s * slow,
                seed=shape.seed, api=shape.api,  # type: ignore[arg-type]
                think_scale=shape.think_scale * slow,
                think_time_cap_s=None if shape.think_time_cap_s is None
                else shape.think_time_cap_s * slow,
                warmup_start=shape.warmup_start,  # type: ignore[arg-type]
                metrics_interval_s=shape.metrics_interval_s, label="twin",
            )
            run_load_sync(settings, workload, out)
        return measured_metrics(out).scaled(slow)
