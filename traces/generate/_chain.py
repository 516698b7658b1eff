"""One synthetic agent's growing prompt, compacted as an agent (or a cap) forces.

Each request resends the whole history plus what the turn appends. Two limits
can force a compaction: the agent's own (it summarises its history near its
model's context window: part of the workload's shape) and the user's
``max_context`` cap (a change to the workload, counted in ``Counters``). A
compaction keeps the shared prefix, a summary replaces the oldest turns, and
the newest turns that fit stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from traces._import_common import Counters
from traces._models import Request, RequestKind, Subagent

__all__ = ["Chain", "Ids"]


@dataclass
class Ids:
    """Fresh global block ids, one counter for the whole workload."""

    next_id: int

    def take(self, n: int) -> tuple[int, ...]:
        start = self.next_id
        self.next_id += n
        return tuple(range(start, start + n))


@dataclass
class Chain:
    """One agent's prompt: token count, history segments, compactions.

    Appending keeps every full block of the previous prompt (its partial last
    block changes content, so it gets a new id); only new ids are stored.
    ``window`` is the agent's compaction point (already scaled), ``cap`` the
    user's max context.
    """

    shared_ids: tuple[int, ...]
    block_size: int
    window: int
    cap: int
    compact_target: float
    summary_share: float
    ids: Ids
    counters: Counters
    tokens: int = 0
    segments: list[int] = field(default_factory=list)
    compactions: int = 0

    @property
    def shared_tokens(self) -> int:
        return len(self.shared_ids) * self.block_size

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def next(
        self, append: int, output: int, think: float, kind: RequestKind,
        subagents: Sequence[Subagent] = (),
    ) -> Request:
        bs, shared = self.block_size, len(self.shared_ids)
        room_own, room_cap = self.window - output, self.cap - output
        room = min(room_own, room_cap)
        if not self.tokens:
            fit = max(1, min(append, room - self.shared_tokens))
            self.counters.truncated_requests += fit < append and self.cap < self.window
            tokens = self.shared_tokens + fit
            prefix = 0
            new = self.shared_ids + self.ids.take(self._blocks(tokens) - shared)
            self.segments = [fit]
        elif self.tokens + append <= room:
            tokens = self.tokens + append
            prefix = self.tokens // bs
            new = self.ids.take(self._blocks(tokens) - prefix)
            self.segments.append(append)
        else:
            by_cap = self.tokens + append <= room_own
            tokens = self._compact(append, room, min(self.window, self.cap), by_cap)
            prefix = shared
            new = self.ids.take(self._blocks(tokens) - shared)
        self.tokens = tokens
        return Request(
            prompt_tokens=tokens,
            output_tokens=output,
            prefix_blocks=prefix,
            new_block_ids=new,
            shared_blocks=shared,
            think_time_s=think,
            kind=kind,
            subagents=tuple(subagents),
        )

    def _compact(self, append: int, room: int, window: int, by_cap: bool) -> int:
        """Keep the shared prefix, a summary and the newest turns that fit."""
        summary = max(1, int(self.summary_share * window))
        target = int(self.compact_target * window)
        budget = max(1, min(target, room) - self.shared_tokens - summary)
        kept: list[int] = []
        total = 0
        for seg in reversed([*self.segments, append]):
            if total + seg > budget:
                break
            kept.append(seg)
            total += seg
        if not kept:  # the new input alone is too big: keep its tail
            kept = [budget]
            total = budget
            self.counters.truncated_requests += self.cap < self.window
        kept.reverse()
        self.segments = [summary, *kept]
        self.compactions += 1
        self.counters.compactions += by_cap
        return self.shared_tokens + summary + total
