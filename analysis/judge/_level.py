"""A comparison's per-level records: the ratio of one metric between two arms, and a
load level's arms with their ratios. Their own module so that the verdict's
wording (``_verdict``) and the comparison (``_comparison``) both read them
without importing each other."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from analysis.judge._drift import Drift
from analysis.metrics import RunSummary
from analysis.schema import LoadLevel, Validity

__all__ = ["Level", "Ratio"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ratio(_Model):
    metric: str
    label: str
    unit: str
    higher_is_better: bool
    baseline: float | None
    other: float | None
    ratio: float | None
    """other / baseline; None when either side is missing."""
    ci: tuple[float, float] | None = None
    better: bool | None = None
    """Whether the other arm is better (direction-aware); None when unknown."""
    sure: bool = False
    """Whether the 95% interval of the ratio excludes 1."""
    established: bool = False
    """``sure`` and the evidence rules hold (units, requests, validity)."""
    not_established: str | None = None
    """Why a difference whose interval excludes 1 is still not established."""


class Level(_Model):
    load: LoadLevel
    """What set the load: users, a session rate or a time scale."""
    arms: dict[str, RunSummary]
    ratios: dict[str, list[Ratio]] = Field(default_factory=dict)
    """Per non-baseline arm label, the ratios against the baseline."""
    validity: Validity = Field(default_factory=Validity)
    """The level's runs' verdicts merged, plus client imbalance between arms."""
    evidence: dict[str, str | None] = Field(default_factory=dict)
    """Per non-baseline arm: None when a difference could be established, else why not."""
    single_run: bool = True
    """One run per arm: intervals do not cover drift between runs."""
    drift: list[Drift] = Field(default_factory=list)
    """Metrics of an arm whose repeats differ beyond their within-run intervals."""

    @property
    def label(self) -> str:
        return self.load.label
