"""Blocks of the run manifest that replay measures and analysis judges: the
client's health, the window's coverage, the server watch and the verdict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ClientHealth", "Coverage", "Replica", "ServerWatch", "Severity", "Validity",
           "ValidityReason", "Verdict", "WorkerInfo"]

Verdict = Literal["valid", "caveats", "invalid"]
Severity = Literal["caveat", "invalid"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClientHealth(_Model):
    """How well the load generator kept up during the window."""

    loop_lag_p99_s: float | None = None
    """P99 of how late a 50 ms sleep woke on the event loop."""
    loop_lag_max_s: float | None = None
    cpu_share: float | None = None
    """Client CPU seconds / wall seconds (1.0 = one full core; max over workers)."""
    schedule_lag_p99_s: float | None = None


class Coverage(_Model):
    """Whether the lanes had work for the whole window."""

    lanes: int = Field(ge=0)
    lanes_done_before_window_end: int = Field(ge=0)


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
