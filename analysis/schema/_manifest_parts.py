"""Blocks of the run manifest that replay measures and analysis judges: the
client's health, the window's coverage, an early stop, the server watch and the verdict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ClientHealth", "Coverage", "EarlyStop", "IdleCap", "LoopStall", "Replica",
           "ServerWatch", "Severity", "StallKind", "Validity", "ValidityReason", "Verdict",
           "WorkerInfo"]

Verdict = Literal["valid", "caveats", "invalid"]
Severity = Literal["caveat", "invalid"]
StallKind = Literal["busy", "gc", "starved", "blocked"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoopStall(_Model):
    """One event-loop stall and what the loop was doing (``replay.load``'s watchdog)."""

    at_s: float
    """When the loop last ran before the stall, seconds from the run's t0."""
    lag_s: float
    """How much later than its period the loop woke."""
    kind: StallKind
    """busy: the loop thread ran the client's code (``frames``) most of the time; gc:
    busy in a garbage collection; starved: runnable but waiting for a CPU (another
    process took it); blocked: off the CPU in a blocking call (``frames``)."""
    frames: list[str] = Field(default_factory=list)
    """Innermost first, ``file:line function``."""


class ClientHealth(_Model):
    """How well the load generator kept up during the window."""

    loop_lag_p99_s: float | None = None
    """P99 of how late a 50 ms sleep woke on the event loop."""
    loop_lag_max_s: float | None = None
    cpu_share: float | None = None
    """Client CPU seconds / wall seconds (1.0 = one full core; max over workers)."""
    schedule_lag_p99_s: float | None = None
    loop_stalls: list[LoopStall] = Field(default_factory=list)
    """The longest stalls of the window (a few), with what the loop was doing."""
    loop_stall_kinds: dict[str, int] = Field(default_factory=dict)
    """Every stall of the window, counted by kind."""


class Coverage(_Model):
    """Whether the lanes had work for the whole window."""

    lanes: int = Field(ge=0)
    lanes_done_before_window_end: int = Field(ge=0)


class IdleCap(_Model):
    """A scenario's system idle gap cap and what it did: once no request had been in
    flight for ``cap_s``, every pending due time moved earlier by one amount
    (``replay.load._dueclock``, after AgentX's ``enforce_system_idle_cap``)."""

    cap_s: float = Field(ge=0)
    scope: Literal["run", "worker"]
    """``run``: one event loop saw every request; ``worker``: a run split over worker
    processes or Ray actors capped each worker's idle time on its own (a worker idle
    while another was busy still jumped)."""
    counts_from: Literal["origin", "window"]
    """Idle time counted from the run's origin, or from the window's start (lanes
    primed before it: the cap never pulls an entry turn into the warmup)."""
    shifts: int = Field(ge=0)
    """How many times the pending due times were pulled forward (summed over workers)."""
    shifted_s: float = Field(ge=0)
    """Seconds taken off the schedule in all (each shift once, not per lane)."""


class Replica(_Model):
    """One server of a fleet measured as one target: what it said of itself before
    the load (its replicas must agree; ``analysis.judge_fairness`` checks them)."""

    target: str
    """Base URL without credentials."""
    model: str
    server_info: dict[str, object] | None = None
    """Its ``/server_info?config_format=json`` snapshot, if exposed."""
    gpu_count: int | None = None


class ServerWatch(_Model):
    """A launched server process that exited, or a health probe that kept failing."""

    server_died: bool = False
    detail: str | None = None


class WorkerInfo(_Model):
    """One worker of a split run (``--workers`` process or ``--ray`` actor)."""

    index: int = Field(ge=0)
    users: int = Field(ge=0)
    """How many of the run's users it carried (user ``u`` on worker ``u % N``)."""
    node_id: str | None = None
    """The Ray node it ran on (None for local processes)."""
    hostname: str | None = None
    skew_s: float | None = None
    """Its wall clock minus the driver's (Ray), corrected at the origin..."""
    round_trip_s: float | None = None
    """...to within half of this round trip."""
    lost: bool = False
    """It died, was killed or stopped answering before it reported its end: its users
    stopped early and its last-known requests are recorded as ``lost``."""
    lost_detail: str | None = None
    lost_requests: int = Field(default=0, ge=0)
    """Records the driver wrote with status ``lost`` for it."""


class ValidityReason(_Model):
    code: str
    """Stable identifier, e.g. ``window_empty`` or ``sim_late``."""
    severity: Severity
    message: str


class Validity(_Model):
    """Whether a run (or comparison) can carry a verdict, with named reasons."""

    verdict: Verdict = "valid"
    reasons: list[ValidityReason] = Field(default_factory=list)


class EarlyStop(_Model):
    """The window ended before its planned length: a stop rule found the question the
    run was asked (e.g. a search probe's tier verdict) settled (``window`` is the
    window actually covered; the judge and every metric use that one)."""

    planned_s: float
    """The window as planned (``load.duration_s``)."""
    window_s: float
    """The window actually covered (seconds)."""
    rule: str
    """The rule, in words."""
    why: str
    """What it had settled when it stopped."""
