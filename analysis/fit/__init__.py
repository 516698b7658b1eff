"""Fitting a simulator twin's step-time model to a run's own records (pure: arrays in,
parameters out). Sits on the schema wing only; ``replay.twin`` does the I/O."""

from analysis.fit._model import (
    GroupResidual,
    StepFit,
    fit_steps,
    level_stall_factor,
    predict_gap,
)
from analysis.fit._phases import (
    PrefillCheck,
    overhead_given_rate,
    prefill_check,
    prefill_pinned,
)
from analysis.fit._repeats import BetweenRuns, between_runs, between_runs_by_metric
from analysis.fit._resample import WINDOWS, resample
from analysis.fit._samples import (
    StepSamples,
    TtftSamples,
    running_at,
    step_samples,
    ttft_samples,
)

__all__ = [
    "BetweenRuns",
    "GroupResidual",
    "PrefillCheck",
    "StepFit",
    "StepSamples",
    "TtftSamples",
    "WINDOWS",
    "between_runs",
    "between_runs_by_metric",
    "fit_steps",
    "level_stall_factor",
    "overhead_given_rate",
    "predict_gap",
    "prefill_check",
    "prefill_pinned",
    "resample",
    "running_at",
    "step_samples",
    "ttft_samples",
]
