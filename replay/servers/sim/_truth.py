"""The truth logs: what the simulator did for each request and in each engine step.

Request records (``TruthRecord``): one JSON object a line, written and flushed when
the request ends, and kept in memory (``SimServer.truth``). Step records
(``StepTruth``): one a line in the step log beside it (``step_log_path``), kept in
``SimServer.steps``. Times are absolute ``time.monotonic_ns()`` values: on the same
machine they compare directly with a client's monotonic clock.
"""

from __future__ import annotations

import orjson
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["StepTruth", "TruthRecord", "read_step_log"]


class TruthRecord(BaseModel):
    """One request as the server saw it."""

    model_config = ConfigDict(extra="forbid")

    request_id: str
    endpoint: str
    stream: bool
    status: str
    """ok, rejected (HTTP error before streaming), stream_error, disconnected, aborted."""
    http_status: int
    fault: str | None = None
    arrival_ns: int
    """Handler entered (before slow_accept)."""
    queued_ns: int | None = None
    """Handed to the engine."""
    scheduled_ns: int | None = None
    """Start of the first step that computed any of its tokens (not before ``queued_ns``)."""
    first_token_ns: int | None = None
    finish_ns: int
    prompt_tokens: int = 0
    max_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens hit in the prefix cache at first admission (usage.cached_tokens)."""
    prefill_tokens: int = 0
    """Prompt tokens computed, recomputation after preemption included."""
    queried_tokens: int = 0
    """Tokens looked up in the prefix cache (vllm:prefix_cache_queries; first admission)."""
    hit_tokens: int = 0
    """Tokens found there (vllm:prefix_cache_hits; first admission)."""
    preempted_hit_tokens: int = 0
    """Hits on re-admission after preemption (vLLM keeps these out of its counters)."""
    preemptions: int = 0
    emit_ns: list[int] = Field(default_factory=list)
    """End of every step that produced tokens for this request (when it was delivered)."""
    emit_tokens: list[int] = Field(default_factory=list)
    step_start_ns: list[int] = Field(default_factory=list)
    """Scheduled start of each of those steps (its absolute deadline chain)."""
    step_model_ns: list[int] = Field(default_factory=list)
    """Modelled duration of each of those steps, after time scaling."""
    step_actual_ns: list[int] = Field(default_factory=list)
    """Wall time each of those steps really took (``StepTruth.actual_s``)."""


class StepTruth(BaseModel):
    """One engine step: what the profile says it should take and what it really took.

    ``model_s`` is the profile's duration after ``time_scale`` (before ``slowdown``);
    ``actual_s`` runs from the end of the previous step (or, for the first step after
    idling, from the moment work arrived) to this step's delivery, so event-loop delay
    before the step ran is in it, and over a busy period the ``actual_s`` add up to its
    wall time. Their sums are the ``vllm_sim:engine_step_*_seconds_total`` counters.
    """

    model_config = ConfigDict(extra="forbid")

    index: int
    start_ns: int
    """Scheduled start (the deadline chain)."""
    end_ns: int
    """Delivered (tokens handed to the handlers)."""
    model_s: float
    actual_s: float
    decode_batch: int
    ctx_tokens: int
    prefill_tokens: int
    emitted_tokens: int


def read_step_log(path: str) -> list[StepTruth]:
    """The step records of a step log file, in order."""
    with open(path, "rb") as fh:
        return [StepTruth.model_validate(orjson.loads(line)) for line in fh if line.strip()]
