"""The workload model: what agents do, as token counts and block ids (never text).

A workload is a header plus sessions. A session is the ordered requests of one
agent conversation; each request resends the whole history, so consecutive
requests share a prefix of block ids. Block ids are *global content ids*: equal
ids anywhere in a workload mean equal content (importers of traces with a
session-local hash scope remap ids so this holds).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "FORMAT_VERSION",
    "Request",
    "Session",
    "Subagent",
    "Workload",
    "WorkloadHeader",
    "iter_block_ids",
]

FORMAT_VERSION = 1

RequestKind = Literal["user_text", "tool_result", "subagent_return", "side", "other"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Subagent(_Strict):
    """A nested agent spawned after its parent request's response ends.

    All subagents of one request are spawned together and run concurrently; each
    starts after its first request's ``think_time_s`` (the spawn delay). The
    parent's next request becomes due when every *blocking* subagent of the
    previous request has finished, plus the next request's think time. A
    ``background`` subagent runs alongside without delaying its parent.
    """

    id: str
    type: str = "subagent"
    requests: tuple[Request, ...] = Field(min_length=1)
    background: bool = False
    """True: the parent does not wait for it (WEKA ``duration_ms: null``)."""


class Request(_Strict):
    """One LLM call of a session (or of a subagent).

    Prompts are stored as a delta against the previous request of the same agent
    chain: ``prefix_blocks`` leading blocks are identical to the previous prompt's,
    then ``new_block_ids`` follow. Agent sessions append to their history, so this
    keeps a 100K-token, 50-turn session to a few KB instead of megabytes of ids.
    """

    prompt_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)
    prefix_blocks: int = Field(default=0, ge=0)
    """Leading blocks equal to the previous request's (0 for the first request)."""
    new_block_ids: tuple[int, ...] = ()
    """Content ids of the blocks after the prefix; one per ``block_size`` tokens,
    the last block possibly partial."""
    shared_blocks: int = Field(default=0, ge=0)
    """Leading blocks of the full prompt meant to be shared across users (system
    prompt, tool definitions); the per-user salt applies only after them."""
    think_time_s: float = Field(default=0.0, ge=0.0)
    """Pause before this request: from the previous response's end (or the end of
    the subagents it spawned) to this request being due."""
    arrival_s: float | None = Field(default=None, ge=0.0)
    """Arrival offset for open-loop replay (a session's first request) or
    timestamp replay (every request of an arrival-only trace)."""
    kind: RequestKind = "other"
    subagents: tuple[Subagent, ...] = ()

    @property
    def num_blocks(self) -> int:
        return self.prefix_blocks + len(self.new_block_ids)

    @model_validator(mode="after")
    def _shared_within_blocks(self) -> Request:
        if self.shared_blocks > self.num_blocks:
            raise ValueError(
                f"shared_blocks={self.shared_blocks} exceeds the {self.num_blocks} blocks"
            )
        return self


def iter_block_ids(requests: tuple[Request, ...]) -> Iterator[list[int]]:
    """Yield each request's full block-id list, expanding the prefix deltas."""
    prev: list[int] = []
    for req in requests:
        full = prev[: req.prefix_blocks] + list(req.new_block_ids)
        yield full
        prev = full


class Session(_Strict):
    """One agent conversation, replayed by one user lane at a time."""

    id: str
    agent_type: str = "default"
    requests: tuple[Request, ...] = Field(min_length=1)
    compactions: int = Field(default=0, ge=0)
    """How many times the history was compacted to fit the max context."""


class WorkloadHeader(_Strict):
    """First line of a workload file."""

    format_version: int = FORMAT_VERSION
    kind: Literal["agentreplay-workload"] = "agentreplay-workload"
    source: str
    """Profile name (``coding-agent``) or import format (``weka``, ``mooncake``...)."""
    seed: int | None = None
    block_size: int = Field(ge=1)
    fingerprint: str = ""
    sessions: int = Field(default=0, ge=0)
    arrival: Literal["closed", "open", "timestamps"] = "closed"
    """closed: users replay sessions back to back; open: sessions arrive at their
    first request's ``arrival_s``; timestamps: every request at its ``arrival_s``."""
    max_context: int | None = None
    params: dict[str, object] = Field(default_factory=dict)
    """Generator knobs or importer options, for the record."""


class Workload(_Strict):
    """A header and its sessions, in memory (small workloads; stream large ones)."""

    header: WorkloadHeader
    sessions: tuple[Session, ...]


Subagent.model_rebuild()
