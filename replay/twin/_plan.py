"""``plan --twin``'s settings: each field declares its flag (``replay.knobs``).

The load knobs are ``run``'s and ``compare``'s (``SharedSettings``): the same flag,
metavar and help (``replay.knobs.knob_of``) and the same bounds (the same
``Seconds``, ``Interval`` and ``ThinkScale`` types, checked by
tests/replay/twin/test_plan_knobs.py), so a value one command refuses the twin
refuses too; only the defaults differ, sized for simulated time.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from replay.knobs import Knob, knob_of
from replay.load import Interval, Seconds, SharedSettings, ThinkScale

__all__ = ["PlanSettings"]

Count = Annotated[int, Field(ge=1)]
_TWIN = "with --twin: "
_PER_LEVEL = " (simulated, per level)"


class PlanSettings(BaseModel):
    """A ladder of closed-loop levels on the twin, and what to say about it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    twin: Annotated[str | None, Knob(
        "--twin", "plan on a twin file (a simulator profile, e.g. from `agentreplay "
        "calibrate`) instead of measured runs", metavar="FILE")] = None
    workload: Annotated[str | None, Knob(
        "--workload", "with --twin: the workload to replay", metavar="FILE")] = None
    users: Annotated[str, Knob(
        "--users", "with --twin: the range of concurrent users", metavar="LO:HI")] = "1:256"
    levels: Annotated[Count, Knob(
        "--levels", "with --twin: load levels, spaced geometrically over --users",
        metavar="N")] = 20
    duration_s: Annotated[Interval, knob_of(
        SharedSettings, "duration_s", prefix=_TWIN, suffix=_PER_LEVEL)] = 900.0
    warmup_s: Annotated[Seconds, knob_of(
        SharedSettings, "warmup_s", prefix=_TWIN, suffix=_PER_LEVEL)] = 120.0
    drain_s: Annotated[Seconds, knob_of(
        SharedSettings, "drain_s", prefix=_TWIN, help="drain seconds after the window",
        suffix=_PER_LEVEL)] = 30.0
    """Not decided from the workload as a run's is: a level's drain is simulated time."""
    think_scale: Annotated[ThinkScale, knob_of(
        SharedSettings, "think_scale", prefix=_TWIN)] = 1.0
    think_time_cap_s: Annotated[Seconds | None, knob_of(
        SharedSettings, "think_time_cap_s", prefix=_TWIN, suffix=" (default: no cap)")] = None
    replicas: Annotated[Count, Knob(
        "--replicas", "with --twin: N engines behind session-affinity routing",
        metavar="N")] = 1
    agents: Annotated[Count | None, Knob(
        "--agents", "with --twin: say how many replicas (and GPUs) K agents need per tier",
        metavar="K")] = None
    backend: Annotated[Literal["latency_specialized", "auto"], Knob(
        "--backend", "with --twin: the decode backend")] = "latency_specialized"
    jobs: Annotated[Count | None, Knob(
        "--jobs", "with --twin: levels simulated at once, one process each (default: the "
        "CPU count)", metavar="N")] = None
    keep_runs: Annotated[str | None, Knob(
        "--keep-runs", "with --twin: keep each level's run directory under DIR (`agentreplay "
        "report` reads them) (default: not kept)", metavar="DIR")] = None

    @model_validator(mode="after")
    def _twin_and_workload(self) -> PlanSettings:
        if self.twin is None:
            raise ValueError("the twin plan needs --twin FILE (a simulator profile)")
        if self.workload is None:
            raise ValueError("--twin needs --workload FILE (the workload to replay)")
        return self

    @field_validator("users")
    @classmethod
    def _users_range(cls, text: str) -> str:
        lo, sep, hi = text.partition(":")
        try:
            a, b = (int(lo), int(hi)) if sep else (int(text), int(text))
        except ValueError:
            raise ValueError("give LO:HI, whole numbers, e.g. 1:256") from None
        if a < 1 or b < a:
            raise ValueError("need 1 <= LO <= HI, e.g. 1:256")
        return text

    @property
    def user_range(self) -> tuple[int, int]:
        """``--users LO:HI`` as numbers (one number N is N:N)."""
        lo, sep, hi = self.users.partition(":")
        return (int(lo), int(hi)) if sep else (int(lo), int(lo))
