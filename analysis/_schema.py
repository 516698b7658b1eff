"""The result files: the contract that replay/ writes and analysis/ reads.

A run directory holds ``run.json`` (RunManifest), ``requests.jsonl`` (one
RequestRecord a line, appended and flushed as each request finishes),
``server_metrics.jsonl`` (one MetricSample a line) and, once analysed,
``summary.json``.

Times inside a run are seconds on one monotonic clock whose origin is the run's
start (``RunManifest.clock``); wall time only labels the run.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ClockInfo",
    "HostInfo",
    "LoadSettings",
    "MetricSample",
    "RESULT_FORMAT_VERSION",
    "RequestRecord",
    "RequestStatus",
    "RunManifest",
    "RunWindow",
    "WorkloadRef",
]

RESULT_FORMAT_VERSION = 1

RequestStatus = Literal["ok", "error", "timeout", "cancelled"]
Phase = Literal["warmup", "measure", "drain"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestRecord(_Model):
    """What happened to one request. Failed requests are data, never exceptions.

    ``status`` is ``ok`` only when the stream ended with ``[DONE]`` and no error
    event; ``error_kind`` says which failure otherwise (``http_500``, ``http_429``,
    ``stream_error``, ``disconnect``, ``malformed``, ``connect``, ``timeout_connect``,
    ``timeout_first_token``, ``timeout_itl``, ``timeout_total``, ``cancelled_drain``,
    ``cancelled_interrupt``...).
    """

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
    status: RequestStatus
    error_kind: str | None = None
    error_message: str | None = None
    http_status: int | None = None

    due_s: float
    """When the request became due (schedule), seconds since run start."""
    sent_s: float
    first_token_s: float | None = None
    last_token_s: float | None = None
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
    server block size, whole blocks only)."""
    think_time_s: float = 0.0


class LoadSettings(_Model):
    """Everything about the load that two comparable runs must share."""

    users: int = Field(ge=0)
    duration_s: float = Field(gt=0)
    warmup_s: float = Field(ge=0)
    drain_s: float = Field(ge=0)
    seed: int = 0
    api: Literal["completions", "chat"] = "completions"
    arrival: Literal["closed", "open", "timestamps"] = "closed"
    rate: float | None = None
    """Sessions per second for open-loop arrivals."""
    think_time_cap_s: float | None = None
    think_time_scale: float = 1.0
    warmup_start: Literal["midway", "start"] = "midway"
    max_tokens_policy: Literal["forced"] = "forced"


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


class ClockInfo(_Model):
    t0_wall: str
    """ISO 8601 UTC wall time at the run's origin."""
    t0_monotonic_ns: int


class HostInfo(_Model):
    hostname: str = ""
    platform: str = ""
    python: str = ""
    cpu_count: int | None = None


class RunManifest(_Model):
    format_version: int = RESULT_FORMAT_VERSION
    kind: Literal["agentreplay-run"] = "agentreplay-run"
    run_id: str
    label: str
    """Arm label (usually the decode backend)."""
    target: str
    """Base URL without credentials."""
    model: str
    api: Literal["completions", "chat"] = "completions"
    server_info: dict[str, object] | None = None
    """The server's ``/server_info?config_format=json`` snapshot, if exposed."""
    server_models: dict[str, object] | None = None
    """The server's ``/v1/models`` answer."""
    gpu_count: int | None = None
    simulated: bool = False
    workload: WorkloadRef
    load: LoadSettings
    window: RunWindow | None = None
    clock: ClockInfo
    started_at: str
    finished_at: str | None = None
    complete: bool = False
    """False until the run ended normally or by an orderly interrupt."""
    interrupted: bool = False
    tool_version: str
    host: HostInfo = Field(default_factory=HostInfo)
    workers: int = 1
    vocab_size: int | None = None
    server_block_size: int | None = None
    warnings: list[str] = Field(default_factory=list)


class MetricSample(_Model):
    """One scrape of the server's ``/metrics``: ``vllm:`` samples summed over
    the ``engine`` label (histograms as their ``_sum``/``_count``)."""

    t_s: float
    values: dict[str, float]
