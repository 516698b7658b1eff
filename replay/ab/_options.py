"""The settings of a comparison, validated before any server is probed or file written.

:class:`CompareOptions` holds what every arm shares; each planned run's
:class:`~replay.load.RunSettings` is derived from it by :meth:`CompareOptions.config`,
so one knob has one name throughout (``think_scale``). Errors name the flag the
user typed (``replay.load.FLAGS``), exit 2.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator

from analysis import DEFAULT_MAX_FAILURE_SHARE, ResultError, Rules, SloTier, parse_tier
from replay.errors import ConfigError
from replay.knobs import Knob, not_resumed
from replay.load import RunSettings, SharedSettings, split_targets, validated

__all__ = ["CompareOptions", "parse_levels", "parse_rates", "parse_slo"]

_ALWAYS_STORED = frozenset({
    "levels", "repeats", "rates", "duration_s", "warmup_s", "drain_s", "seed", "api",
    "model", "vocab_size", "think_scale", "think_time_cap_s"})
"""The fields the first stored comparisons held (the resume check reads them always)."""


class CompareOptions(SharedSettings):
    """Load settings shared by every arm (the same for all, by construction): the
    knobs every run has (``SharedSettings``) and the comparison's own."""

    levels: tuple[int, ...] = Field(default=(1,), min_length=1)
    """User counts, each run at every arm (closed loop)."""
    rates: tuple[float, ...] | None = Field(default=None, min_length=1)
    """Session arrival rates (per second), each run at every arm: open-loop levels
    (``levels`` is then unused)."""
    repeats: Annotated[int, Field(ge=1, le=1000), Knob(
        "--repeats", "repeats of every (arm, users)", metavar="N")] = 1
    allow_unfair: Annotated[bool, Knob(
        "--allow-unfair", "proceed when the arms differ beyond the decode backend (warned)",
        resumed=False)] = False
    allow_identical: Annotated[bool, Knob(
        "--allow-identical", "proceed when the arms do not differ at all (same decode "
        "backend, or one server behind every arm): an A/A run that measures the noise "
        "floor", resumed=False)] = False
    max_failure_share: Annotated[float, Field(ge=0, le=1), Knob(
        "--max-failure-share", "a level whose failure share (errors + timeouts + incomplete "
        "over requests sent in the window) exceeds X, 0..1, fails every SLO tier",
        metavar="X", resumed=False)] = DEFAULT_MAX_FAILURE_SHARE
    """A level whose failure share exceeds this fails every SLO tier (``Rules``)."""
    slo: tuple[SloTier, ...] = ()
    """The SLO tiers the report, summary.json and search judge by (``--slo`` or the
    experiment file's ``slo``); empty: the default tiers. Changes no run."""

    def resume_settings(self) -> dict[str, Any]:
        """What a resumed comparison must share with the one it continues: every field
        but those whose knob changes no run (``Knob.resumed``). Fields added after
        comparisons were first stored (``_ALWAYS_STORED`` lists the first ones) appear
        only when not at their default, so a state written before them still resumes."""
        out = {}
        free = not_resumed(CompareOptions)
        for name, value in self.model_dump(mode="json").items():
            if name in free or name == "slo":  # judging, not running: free to change
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
            self.shared(), target=urls[0], targets=urls, users=users, rate=rate, label=label))


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


def parse_slo(text: str, flag: str = "--slo") -> SloTier:
    """``"100:15"`` -> the tier; anything else is a one-line error naming ``flag`` and the
    form to write."""
    try:
        return parse_tier(text)
    except ResultError:
        raise ConfigError(f"{flag} {text!r}: give FLOOR:TTFT, both parts: the P90 "
                          "interactivity floor (tok/s per user) and the P90 TTFT ceiling (s), "
                          "e.g. 100:15") from None
