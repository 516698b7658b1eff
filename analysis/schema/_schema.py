"""The result files: the contract that replay/ writes and analysis/ reads.

A run directory holds ``run.json`` (RunManifest), ``requests.jsonl`` (one
RequestRecord a line, appended and flushed as each request finishes),
``server_metrics.jsonl`` (one MetricSample a line) and, once analysed,
``summary.json``.

``RequestRecord`` is the single description of a request record: the column
tables, both readers, the CSV export and ``RecordDict`` (what the lanes build)
are derived from or checked against its fields.

Times inside a run are seconds on one monotonic clock whose origin is the run's
start (``RunManifest.clock``); wall time only labels the run.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal, TypedDict, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from analysis.schema._manifest_parts import (
    ClientHealth,
    Coverage,
    EarlyStop,
    IdleCap,
    Replica,
    ServerWatch,
    Validity,
    ValidityReason,
    WorkerInfo,
)
from analysis.schema._metric_values import split_metric_values
from analysis.schema._urls import public_url

__all__ = [
    "is_error_kind",
    "ClientHealth",
    "ClockInfo",
    "Coverage",
    "ErrorKind",
    "HostInfo",
    "LoadKind",
    "LoadSettings",
    "MetricSample",
    "Phase",
    "RESULT_FORMAT_VERSION",
    "RecordDict",
    "RequestRecord",
    "RequestStatus",
    "RunManifest",
    "RunWindow",
    "STATUSES",
    "ServerWatch",
    "Validity",
    "ValidityReason",
    "WorkerInfo",
    "WorkloadRef",
]

RESULT_FORMAT_VERSION = 2
"""Version of run.json / requests.jsonl / summary.json. 2: ``think_applied_s``
(was ``think_time_s``), status ``incomplete``, validity and health blocks."""

RequestStatus = Literal["ok", "error", "timeout", "incomplete", "cancelled", "lost"]
"""``ok``: ``[DONE]`` and no error. ``error``/``timeout``: failed (``error_kind`` says
how). ``incomplete``: still running when the drain ended (``error_kind`` None).
``cancelled``: interrupted by the user (``error_kind`` ``cancelled_interrupt``).
``lost``: in flight or due on a worker that was lost (its Ray node or actor died or
stopped answering); the driver wrote it from the worker's last report, so what the
server did with it is unknown (``error_kind`` ``worker_lost``; a failure)."""
STATUSES: tuple[str, ...] = get_args(RequestStatus)
Phase = Literal["warmup", "measure", "drain"]
LoadKind = Literal["users", "rate", "timestamps"]


class ErrorKind(StrEnum):
    """Why a request failed. HTTP errors are ``http_<code>`` (see ``is_error_kind``)."""

    CONNECT = "connect"
    TIMEOUT_CONNECT = "timeout_connect"
    TIMEOUT_FIRST_TOKEN = "timeout_first_token"
    TIMEOUT_ITL = "timeout_itl"
    TIMEOUT_TOTAL = "timeout_total"
    DISCONNECT = "disconnect"
    MALFORMED = "malformed"
    STREAM_ERROR = "stream_error"
    LINE_TOO_LONG = "line_too_long"
    TOO_MANY_TOKENS = "too_many_tokens"
    BAD_USAGE = "bad_usage"
    REDIRECT = "redirect"
    CLIENT_ERROR = "client_error"
    INTERNAL = "internal"
    CANCELLED_INTERRUPT = "cancelled_interrupt"
    WORKER_LOST = "worker_lost"


_HTTP_KIND = re.compile(r"http_[1-5]\d\d")


def is_error_kind(value: str) -> bool:
    """A known ErrorKind or ``http_<3-digit code>``."""
    return value in ErrorKind.__members__.values() or _HTTP_KIND.fullmatch(value) is not None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestRecord(_Model):
    """What happened to one request. Failed requests are data, never exceptions."""

    id: str
    user: int = Field(ge=0)
    """User lane; subagent lanes carry their parent's user."""
    lane: str = ""
    """Lane path, e.g. ``"3"`` or ``"3/sub0"`` for a subagent of user 3."""
    session: str
    session_instance: int = 0
    """How many times this user had started a session before (recycling)."""
    turn: int = Field(ge=0)
    """Index of the request within its session (or subagent)."""
    agent: str | None = None
    """Subagent id, None for the main session."""
    kind: str = "other"
    phase: Phase = "measure"
    worker: int = 0
    replica: int = Field(default=0, ge=0)
    """Which of the run's servers answered it: an index into ``RunManifest.replicas``
    (0 for a run against one server)."""
    status: RequestStatus
    error_kind: str | None = None
    """An ``ErrorKind`` value or ``http_<code>``; None when ok or incomplete."""
    error_message: str | None = None
    http_status: int | None = None

    due_s: float
    """When the request became due (schedule), seconds since run start."""
    sent_s: float
    first_token_s: float | None = None
    last_token_s: float | None = None
    end_s: float | None = None
    """When the client stopped waiting for it (stream closed, failed, or cut at the
    drain's end): an incomplete request ran at least ``end_s - sent_s``."""
    chunk_times_s: list[float] = Field(default_factory=list)
    """Arrival of every content-bearing chunk, seconds since run start."""
    chunk_tokens: list[int] = Field(default_factory=list)
    """Tokens in each chunk (same length as chunk_times_s)."""

    prompt_tokens: int = Field(ge=0)
    """Prompt tokens the client sent."""
    prompt_tokens_server: int | None = None
    """usage.prompt_tokens reported by the server."""
    output_tokens_asked: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    """Tokens of record: the server's usage.completion_tokens when reported, else
    the streamed count."""
    cached_tokens: int | None = None
    """usage.prompt_tokens_details.cached_tokens when the server reports it."""
    expected_cached_tokens: int | None = None
    """Prefix tokens the client predicts the server can reuse (infinite cache,
    server block size, whole blocks only); None when unknown: the request was lost,
    or its reusable prefix stopped at a shared block another request sent before it
    was still computing (which the server scheduled first is not the client's to
    know). Sums and shares count only the known ones."""
    think_applied_s: float = 0.0
    """The wait before this request that the lane actually applied (after the
    think scale and cap)."""

    @field_validator("error_kind")
    @classmethod
    def _known_kind(cls, v: str | None) -> str | None:
        if v is not None and not is_error_kind(v):
            raise ValueError(f"unknown error kind {v!r} (known: http_<code>, "
                             + ", ".join(k.value for k in ErrorKind) + ")")
        return v


class RecordDict(TypedDict):
    """A request record as the lanes build it and the live view reads it
    (the fields of ``RequestRecord``, every one present)."""

    id: str
    user: int
    lane: str
    session: str
    session_instance: int
    turn: int
    agent: str | None
    kind: str
    phase: Phase
    worker: int
    replica: int
    status: RequestStatus
    error_kind: str | None
    error_message: str | None
    http_status: int | None
    due_s: float
    sent_s: float
    first_token_s: float | None
    last_token_s: float | None
    end_s: float | None
    chunk_times_s: list[float]
    chunk_tokens: list[int]
    prompt_tokens: int
    prompt_tokens_server: int | None
    output_tokens_asked: int
    output_tokens: int
    cached_tokens: int | None
    expected_cached_tokens: int | None
    think_applied_s: float


class LoadSettings(_Model):
    """Everything about the load that two comparable runs must share."""

    users: int | None = Field(default=None, ge=1)
    """Closed-loop users; None for open-loop and timestamp runs, whose load is their
    rate or time scale (``level_of``)."""
    duration_s: float = Field(gt=0)
    warmup_s: float = Field(ge=0)
    drain_s: float = Field(ge=0)
    seed: int = 0
    api: Literal["completions", "chat"] = "completions"
    arrival: Literal["closed", "open", "timestamps"] = "closed"
    rate: float | None = None
    """Sessions per second for open-loop arrivals."""
    think_time_cap_s: float | None = None
    think_scale: float = 1.0
    time_scale: float | None = None
    """Timestamp replay: arrival times multiplied by this (None = 1)."""
    warmup_start: Literal["midway", "start"] = "midway"
    max_tokens_policy: Literal["forced"] = "forced"
    entries: tuple[str, ...] = ()
    """``SESSION:TURN`` per closed-loop user (``run --entry``): each user's first
    session and entry turn, pinned instead of a scenario's seeded draw (to replay
    what another tool chose, e.g. AIPerf's AgentX lanes); empty: drawn."""

    @model_validator(mode="before")
    @classmethod
    def _no_user_count_outside_closed_loop(cls, data: Any) -> Any:
        """Older run.json files gave a rate or timestamp run a user count (0, or the
        ``--users`` it was launched with); it never set that load, so it reads as None."""
        if isinstance(data, dict) and data.get("arrival", "closed") != "closed" \
                and data.get("users") is not None:
            data = {**data, "users": None}
        return data

    @model_validator(mode="after")
    def _users_for_closed_loop(self) -> LoadSettings:
        if self.arrival == "closed" and self.users is None:
            raise ValueError("a closed-loop run needs its users")
        return self


class WorkloadRef(_Model):
    path: str | None = None
    fingerprint: str
    source: str = ""
    seed: int | None = None
    sessions: int = 0
    block_size: int = 0


class RunWindow(_Model):
    """The steady window: warmup and drain excluded."""

    start_s: float
    end_s: float

    @model_validator(mode="after")
    def _ordered(self) -> RunWindow:
        if not self.end_s >= self.start_s:
            raise ValueError(f"window ends ({self.end_s}) before it starts ({self.start_s})")
        return self


class ClockInfo(_Model):
    t0_wall: str
    """ISO 8601 UTC wall time at the run's origin."""
    t0_monotonic_ns: int


class HostInfo(_Model):
    hostname: str = ""
    platform: str = ""
    python: str = ""
    cpu_count: int | None = None


def check_format_version(v: int) -> int:
    """Refuse result files of another format (older or newer than this tool)."""
    if v != RESULT_FORMAT_VERSION:
        raise ValueError(f"format version {v} is not supported (this agentreplay reads "
                         f"format {RESULT_FORMAT_VERSION}; analyse it with the version "
                         "that wrote it)")
    return v


class RunManifest(_Model):
    format_version: int = RESULT_FORMAT_VERSION
    kind: Literal["agentreplay-run"] = "agentreplay-run"
    run_id: str
    label: str
    """Arm label (usually the decode backend)."""
    target: str
    """Base URL without credentials (the first replica's when there are several)."""
    replicas: list[Replica] = Field(default_factory=list)
    """Every server of a fleet measured as one target (``run --target A --target B``),
    in order (a record's ``replica`` indexes it); empty for a run against one server."""
    routing: Literal["affinity", "round-robin"] | None = None
    """How requests were spread over ``replicas`` (None: one server)."""
    session_headers: list[str] | None = None
    """The headers every request carried its session id in, for a router to keep a
    session on one replica (``--session-header``; empty: none sent; None: not recorded,
    a run from before the flag)."""
    gpu_metrics: list[str] | None = None
    """The DCGM exporters scraped through the run (``--gpu-metrics``; samples in
    ``gpu_metrics.jsonl``, a sample's ``replica`` indexing this list); None or empty:
    none, so its energy figures are missing."""
    model: str
    api: Literal["completions", "chat"] = "completions"
    server_info: dict[str, object] | None = None
    """The server's ``/server_info?config_format=json`` snapshot, if exposed."""
    server_models: dict[str, object] | None = None
    """The server's ``/v1/models`` answer."""
    gpu_count: int | None = None
    simulated: bool = False
    scenario: str | None = None
    """Named replay rules the run followed (``--scenario agentx``), if any."""
    scenario_satisfied: bool | None = None
    """Whether the finished run satisfied its scenario's rules (None: no scenario, or
    not judged yet)."""
    scenario_notes: list[str] = Field(default_factory=list)
    """Why the run did not satisfy its scenario (one line each)."""
    load_kind: LoadKind = "users"
    """What sets the load: concurrent users (closed loop), a session rate (open
    loop) or the workload's own timestamps."""
    workload: WorkloadRef
    load: LoadSettings
    window: RunWindow | None = None
    early_stop: EarlyStop | None = None
    """Set when a stop rule ended the window early (None: the whole window ran)."""
    clock: ClockInfo
    started_at: str
    finished_at: str | None = None
    complete: bool = False
    """False until the run ended normally or by an orderly interrupt."""
    interrupted: bool = False
    tool_version: str
    host: HostInfo = Field(default_factory=HostInfo)
    workers: int = 1
    worker_info: list[WorkerInfo] = Field(default_factory=list)
    """One entry per ``--workers``/``--ray`` worker: where it ran, its clock skew, and
    whether it was lost (empty for a one-process run)."""
    vocab_size: int | None = None
    server_block_size: int | None = None
    warnings: list[str] = Field(default_factory=list)
    client_health: ClientHealth | None = None
    coverage: Coverage | None = None
    idle_cap: IdleCap | None = None
    """A scenario's system idle gap cap and its shifts (None: no cap)."""
    server_watch: ServerWatch | None = None
    validity: Validity | None = None
    """Stamped when the run closes (``analysis.assess_run``)."""

    _version = field_validator("format_version")(check_format_version)

    @field_validator("target")
    @classmethod
    def _no_credentials(cls, v: str) -> str:
        """A hand-edited run.json's credentials never reach a summary or a report."""
        return public_url(v)

    @model_validator(mode="after")
    def _simulated_from_evidence(self) -> RunManifest:
        """``simulated`` follows the server's own answers (its /server_info, a ``sim/``
        model), so a hand-edited ``false`` cannot drop the [SIMULATED] label."""
        info = self.server_info or {}
        if info.get("simulated") is True or "sim_profile" in info \
                or self.model.startswith("sim/"):
            self.simulated = True
        return self


class MetricSample(_Model):
    """One scrape of the server's ``/metrics``: ``vllm:`` samples summed over
    the ``engine`` label (histograms as their ``_sum``/``_count``)."""

    t_s: float
    values: dict[str, float]
    replica: int = Field(default=0, ge=0)
    """Which replica was scraped (``RunManifest.replicas``; 0 for one server)."""
    dropped: list[str] = Field(default_factory=list)
    """Metrics the scrape gave a non-finite, negative or absurd value for, kept as
    missing (:func:`split_metric_values`; a ``null`` in an older file counts too)."""

    @model_validator(mode="before")
    @classmethod
    def _drop_unbelievable(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("values"), dict):
            kept, bad = split_metric_values(
                {k: v for k, v in data["values"].items() if not isinstance(v, str)})
            kept.update({k: v for k, v in data["values"].items() if isinstance(v, str)})
            if bad:
                old = data.get("dropped")
                data = {**data, "values": kept,
                        "dropped": sorted({*bad, *(old if isinstance(old, list) else [])})}
        return data
