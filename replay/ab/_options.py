"""The settings of a comparison, validated before any server is probed or file written.

:class:`CompareOptions` holds what every arm shares; each planned run's
:class:`~replay.load.RunSettings` is derived from it by :meth:`CompareOptions.config`,
so one knob has one name throughout (``think_scale``). Errors name the flag the
user typed (``replay.load.FLAGS``), exit 2.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from analysis import DEFAULT_MAX_FAILURE_SHARE, Rules
from replay.errors import ConfigError
from replay.load import (
    Interval,
    RunSettings,
    Seconds,
    Seed,
    ThinkScale,
    TimeScale,
    TraceSlice,
    TraceStart,
    VocabSize,
    split_targets,
    validated,
)

__all__ = ["CompareOptions", "parse_levels", "parse_rates"]

_NOT_RESUMED = frozenset({"allow_unfair", "api_key_env", "max_failure_share"})
"""Fields that change no run: a guard override, where the key is read from, and a
judging rule applied when the report is made."""
_ALWAYS_STORED = frozenset({
    "levels", "repeats", "rates", "duration_s", "warmup_s", "drain_s", "seed", "api",
    "model", "vocab_size", "think_scale", "think_time_cap_s"})


class CompareOptions(BaseModel):
    """Load settings shared by every arm (the same for all, by construction)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    levels: tuple[int, ...] = Field(default=(1,), min_length=1)
    """User counts, each run at every arm (closed loop)."""
    rates: tuple[float, ...] | None = Field(default=None, min_length=1)
    """Session arrival rates (per second), each run at every arm: open-loop levels
    (``levels`` is then unused)."""
    duration_s: Interval
    repeats: int = Field(default=1, ge=1, le=1000)
    warmup_s: Seconds = 0.0
    drain_s: Seconds | None = None
    """None: each run decides it from the workload (``replay.load`` ``resolve_drain``)."""
    seed: Seed = 0
    api: Literal["completions", "chat"] = "completions"
    model: str | None = None
    api_key_env: str | None = None
    vocab_size: VocabSize | None = None
    think_scale: ThinkScale = 1.0
    think_time_cap_s: Seconds | None = None
    metrics_interval_s: Interval | None = 2.0
    first_token_timeout_s: Interval | None = 600.0
    itl_timeout_s: Interval | None = 120.0
    allow_unfair: bool = False
    max_failure_share: float = Field(default=DEFAULT_MAX_FAILURE_SHARE, ge=0, le=1)
    """A level whose failure share exceeds this fails every SLO tier (``Rules``)."""
    scenario: Literal["agentx"] | None = None
    """``--scenario``: named replay rules every run of the comparison follows."""
    scenario_unsafe: bool = False
    time_scale: TimeScale = 1.0
    """Timestamp workloads: arrival offsets multiplied by this (``--time-scale``)."""
    start_s: TraceStart | None = None
    """Timestamp workloads: trace time replayed from (``--start``)."""
    slice_s: TraceSlice | None = None
    """Timestamp workloads: only sessions starting this soon after the start (``--slice``)."""
    routing: Literal["affinity", "round-robin"] = "affinity"
    """How an arm of several replicas (``LABEL=URL1,URL2``) spreads its requests."""

    def resume_settings(self) -> dict[str, Any]:
        """What a resumed comparison must share with the one it continues: every field
        but those that change no run (``_NOT_RESUMED``). Fields added after comparisons
        were first stored (``_ALWAYS_STORED`` lists the first ones) appear only when not
        at their default, so a state written before them still resumes."""
        out = {}
        for name, value in self.model_dump(mode="json").items():
            if name in _NOT_RESUMED:
                continue
            if name in _ALWAYS_STORED or value != CompareOptions.model_fields[name].default:
                out[name] = value
        return out

    def rules(self) -> Rules:
        """The analysis thresholds this comparison is judged by."""
        return Rules(max_failure_share=self.max_failure_share)

    @field_validator("levels")
    @classmethod
    def _distinct_positive(cls, levels: tuple[int, ...]) -> tuple[int, ...]:
        if min(levels) < 1 or len(set(levels)) != len(levels):
            raise ValueError("give distinct user counts of at least 1, e.g. 1,4,16")
        return levels

    @field_validator("rates")
    @classmethod
    def _distinct_rates(cls, rates: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if rates is not None and (min(rates) <= 0 or len(set(rates)) != len(rates)):
            raise ValueError("give distinct session rates above 0, e.g. 0.5,1,2")
        return rates

    def config(self, target: str, users: int, label: str,
               rate: float | None = None) -> RunSettings:
        """The settings of one planned run (open loop at ``rate`` when given); a
        ``target`` of several comma-separated URLs is a fleet (``--arm L=URL1,URL2``)."""
        urls = split_targets(target)
        return validated(RunSettings, dict(
            target=urls[0], targets=urls, routing=self.routing, users=users, rate=rate,
            duration_s=self.duration_s, warmup_s=self.warmup_s,
            drain_s=self.drain_s, api=self.api, model=self.model,
            api_key_env=self.api_key_env, seed=self.seed, vocab_size=self.vocab_size,
            think_scale=self.think_scale, think_time_cap_s=self.think_time_cap_s,
            metrics_interval_s=self.metrics_interval_s, label=label,
            first_token_timeout_s=self.first_token_timeout_s, itl_timeout_s=self.itl_timeout_s,
            scenario=self.scenario, scenario_unsafe=self.scenario_unsafe,
            time_scale=self.time_scale, start_s=self.start_s, slice_s=self.slice_s,
        ))


def parse_levels(text: str, flag: str = "--users") -> tuple[int, ...]:
    """``"1,4,16"`` -> ``(1, 4, 16)``; anything else is a one-line error naming ``flag``."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: give comma-separated integers, e.g. 1,4,16") \
            from None


def parse_rates(text: str, flag: str = "--rate") -> tuple[float, ...]:
    """``"0.5,1,2"`` -> ``(0.5, 1.0, 2.0)``; anything else is a one-line error naming ``flag``."""
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: give comma-separated session rates, e.g. 0.5,1,2") \
            from None
