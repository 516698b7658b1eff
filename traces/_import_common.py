"""Pieces every importer shares: global id spaces, chain encoding, context caps.

``ChainEncoder`` turns each request's full block-id list into the delta form
(``prefix_blocks`` = common prefix with the previous request of the chain) and,
when ``max_context`` is set, fits requests into it the way an agent would
compact: keep the shared head, drop the oldest history blocks down to half the
context, keep appending from there. Every change is counted (``Counters``) and
lands in the header's params, so nothing is dropped silently.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from traces._errors import TraceError
from traces._models import Request, RequestKind, Session, Subagent, WorkloadHeader
from traces._scale import Scaler

__all__ = [
    "MAX_REQUEST_TOKENS",
    "ChainEncoder",
    "Counters",
    "Duplicates",
    "IdSpace",
    "ImportedTrace",
    "common_prefix",
    "require_file",
]

def require_file(file: Path, fmt: str) -> None:
    """Refuse a path that is not a readable file, saying which: a folder gets a
    hint, since only WEKA traces come as a folder of session files."""
    if file.is_dir():
        raise TraceError(f"is a folder; the {fmt} importer reads one trace file (only weka "
                         "takes a folder of session files)", file=str(file))
    if not file.is_file():
        raise TraceError("no such file", file=str(file))


MAX_REQUEST_TOKENS = 10_000_000
"""Largest prompt or output of one request an importer accepts (bounds memory:
ids are materialised per block)."""


@dataclass
class Counters:
    """What an importer changed to make a trace replayable (all start at 0)."""

    truncated_requests: int = 0
    compactions: int = 0
    sessions_compacted: int = 0
    outputs_capped: int = 0
    zero_outputs_raised: int = 0
    duplicate_sessions: int = 0
    """Sessions whose content repeats an earlier one (dropped with ``dedupe``)."""

    def as_params(self) -> dict[str, int]:
        return dict(self.__dict__)


class ImportedTrace:
    """Sessions streamed from a trace (or a generator), and the header once consumed.

    ``header()`` called after iterating ``sessions`` carries the counters
    (truncations, compactions...) in its params; ``counted`` names the counters
    that apply (all by default). ``base_header`` is the header without them.
    """

    def __init__(
        self, base: WorkloadHeader, sessions: Callable[[Counters], Iterator[Session]],
        counted: tuple[str, ...] | None = None,
    ) -> None:
        self._base = base
        self._counted = counted
        self.counters = Counters()
        self.sessions: Iterator[Session] = sessions(self.counters)

    @property
    def base_header(self) -> WorkloadHeader:
        return self._base

    def header(self) -> WorkloadHeader:
        counts = self.counters.as_params()
        if self._counted is not None:
            counts = {k: counts[k] for k in self._counted}
        return self._base.model_copy(update={"params": {**self._base.params, **counts}})


class Duplicates:
    """Spots sessions whose content repeats an earlier one (by a content hash).

    ``repeat`` counts every repeat; the caller drops it when ``dedupe`` is set.
    """

    def __init__(self, counters: Counters, dedupe: bool) -> None:
        self.counters, self.dedupe = counters, dedupe
        self._seen: set[bytes] = set()

    def repeat(self, content: object) -> bool:
        """True if this content (any JSON-ready value) was seen before."""
        digest = hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).digest()
        if digest in self._seen:
            self.counters.duplicate_sessions += 1
            return True
        self._seen.add(digest)
        return False


class IdSpace:
    """Global block ids: remaps session-local ids so equal ids mean equal content."""

    def __init__(self) -> None:
        self.next_id = 0

    def fresh(self, n: int = 1) -> list[int]:
        start = self.next_id
        self.next_id += n
        return list(range(start, start + n))

    def namespace(self) -> Callable[[int], int]:
        """A remapper for one local scope (one session and its subagents)."""
        table: dict[int, int] = {}

        def remap(local: int) -> int:
            got = table.get(local)
            if got is None:
                got = table[local] = self.next_id
                self.next_id += 1
            return got

        return remap


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass
class ChainEncoder:
    """Encodes one agent chain's requests as deltas, fitting max_context if set."""

    block_size: int
    max_context: int | None
    counters: Counters
    shared_blocks: int = 0
    scaler: Scaler | None = None
    """Scales every request's sizes first (``token_scale`` below 1)."""
    _prev_raw: list[int] = field(default_factory=list)
    _prev_out: list[int] = field(default_factory=list)
    _drop: int = 0
    compactions: int = 0

    def encode(
        self, full: list[int], prompt_tokens: int, output_tokens: int, *,
        think_time_s: float = 0.0, kind: RequestKind = "other",
        arrival_s: float | None = None, subagents: tuple[Subagent, ...] = (),
    ) -> Request:
        shared = min(self.shared_blocks, len(full))
        if self.scaler is not None:
            full, prompt_tokens, output_tokens, shared = self.scaler.apply(
                full, prompt_tokens, output_tokens, shared)
        raw = full
        if self.max_context is not None:
            full, prompt_tokens, output_tokens, shared = self._fit(
                full, prompt_tokens, output_tokens, shared
            )
        prefix = common_prefix(self._prev_out, full) if self._prev_out else 0
        self._prev_raw, self._prev_out = raw, full
        return Request(
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            prefix_blocks=prefix,
            new_block_ids=tuple(full[prefix:]),
            shared_blocks=shared,
            think_time_s=think_time_s,
            kind=kind,
            arrival_s=arrival_s,
            subagents=subagents,
        )

    def _fit(
        self, full: list[int], tokens: int, output: int, shared: int
    ) -> tuple[list[int], int, int, int]:
        ctx, bs = self.max_context, self.block_size
        assert ctx is not None
        if output > ctx // 2:
            output = max(1, ctx // 2)
            self.counters.outputs_capped += 1
        keep_head = min(shared, (ctx // 4) // bs)
        # Keep the current drop only while this request extends the same history.
        if self._drop and common_prefix(self._prev_raw, full) < keep_head + self._drop:
            self._drop = 0
        if tokens - self._drop * bs + output > ctx:
            target = min(ctx // 2, ctx - output)
            need = -(-(tokens - target) // bs)
            # Never drop into the last block: at least one block stays after the head.
            self._drop = max(0, min(need, len(full) - keep_head - 1))
            self.compactions += 1
            self.counters.compactions += 1
        if not self._drop:
            return full, tokens, output, shared
        self.counters.truncated_requests += 1
        kept = full[:keep_head] + full[keep_head + self._drop:]
        tokens = max(1, tokens - self._drop * bs)
        if tokens + output > ctx:  # a single huge last block: cut the prompt itself
            tokens = max(1, ctx - output)
            kept = kept[: -(-tokens // bs)]
        return kept, tokens, output, min(keep_head, len(kept))
