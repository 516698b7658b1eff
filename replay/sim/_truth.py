"""The truth log: what the simulator did for each request.

One JSON object a line, written and flushed when the request ends, and kept in
memory (``SimServer.truth``). Times are absolute ``time.monotonic_ns()`` values:
on the same machine they compare directly with a client's monotonic clock.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TruthRecord"]


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
    """Start of the first step that computed any of its tokens."""
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
    """End of every step that produced tokens for this request."""
    emit_tokens: list[int] = Field(default_factory=list)
    step_start_ns: list[int] = Field(default_factory=list)
    """Scheduled start of each of those steps (its absolute deadline chain)."""
    step_model_ns: list[int] = Field(default_factory=list)
    """Modelled duration of each of those steps, after time scaling."""
