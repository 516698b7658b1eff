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

from replay.errors import ConfigError
from replay.knobs import Knob, knob_of
from replay.load import Interval, Seconds, SharedSettings, ThinkScale
from replay.servers.sim import SimProfile

__all__ = ["MAX_PLAN_USERS", "MAX_PLAN_WORK", "PlanSettings", "check_bounded"]

Count = Annotated[int, Field(ge=1)]
_TWIN = "with --twin: "
_PER_LEVEL = " (simulated, per level)"

MAX_PLAN_USERS = 100_000
"""Users of one simulated level at most: each is a lane held in memory (a million took
6 GiB and crashed)."""
MAX_LEVELS = 1000
MAX_REPLICAS = 4096
MAX_REPLICA_BLOCKS = 2**23
"""KV blocks of all replicas of one level together (the simulator holds a record per
block: about 150 bytes each, so this is about 1.2 GiB)."""
MAX_PLAN_WORK = 2e9
"""Simulated work of a whole plan at most, in decode slots: per level, the requests the
engines can hold at once (users, at most ``max_num_seqs`` per replica) times the engine
steps in the level's simulated time at the batch-1 step time, plus the users' own
events (users x seconds). About 3e5 a second on one core, so this is about two hours."""


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
    levels: Annotated[int, Field(ge=1, le=MAX_LEVELS), Knob(
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
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS), Knob(
        "--replicas", "with --twin: N engines behind session-affinity routing",
        metavar="N")] = 1
    agents: Annotated[Count | None, Knob(
        "--agents", "with --twin: say how many replicas (and GPUs) K agents need per tier",
        metavar="K")] = None
    backend: Annotated[Literal["latency_specialized", "auto"], Knob(
        "--backend", "with --twin: the decode backend")] = "latency_specialized"
    jobs: Annotated[Annotated[int, Field(ge=1, le=1024)] | None, Knob(
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
        if b > MAX_PLAN_USERS:
            raise ValueError(f"at most {MAX_PLAN_USERS} users a level (each is simulated "
                             "in memory)")
        return text

    @property
    def user_range(self) -> tuple[int, int]:
        """``--users LO:HI`` as numbers (one number N is N:N)."""
        lo, sep, hi = self.users.partition(":")
        return (int(lo), int(hi)) if sep else (int(lo), int(lo))


def check_bounded(plan: PlanSettings, profile: SimProfile, levels: list[int]) -> None:
    """Refuse, before any simulation, a twin that cannot advance simulated time and a
    sweep whose work or memory is past the stated limits (one line naming the flags)."""
    timing = profile.backends[plan.backend]
    if timing.step_s_batch1 <= 0:
        raise ConfigError(
            f"--twin {plan.twin}: backend {plan.backend}: step_s_batch1 is 0, so simulated "
            "time never advances while a request decodes (the level would never end); a "
            "twin's steps must take time (the bundled 'instant' profile is for client "
            "benchmarks, not planning)")
    blocks = plan.replicas * profile.num_gpu_blocks
    if blocks > MAX_REPLICA_BLOCKS:
        raise ConfigError(
            f"--replicas {plan.replicas}: {plan.replicas} x {profile.num_gpu_blocks} KV "
            f"blocks is past the {MAX_REPLICA_BLOCKS} one level may simulate; fewer "
            "replicas (capacity scales per replica: --agents K says how many K need)")
    sim_s = plan.warmup_s + plan.duration_s + plan.drain_s
    slots = profile.max_num_seqs * plan.replicas
    work = sum((min(u, slots) / timing.step_s_batch1 + u) * sim_s for u in levels)
    if work > MAX_PLAN_WORK:
        raise ConfigError(
            f"--users {plan.users} --levels {plan.levels} --replicas {plan.replicas} "
            f"--duration {plan.duration_s:g}: about {work:.3g} decode slots to simulate "
            f"({1 / timing.step_s_batch1:.3g} steps a simulated second), past the limit "
            f"of {MAX_PLAN_WORK:.3g} (hours of CPU); fewer levels, users or seconds")
