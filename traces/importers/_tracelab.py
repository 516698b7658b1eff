"""Import TraceLab round traces (JSONL, one LLM round a line).

Rounds are grouped into sessions by ``session_id`` and ordered by
``round_index``. ``prefix_tokens`` (what the provider's cache served) becomes
the prefix kept from the previous round; a first round's cached prefix is the
provider's shared head (system prompt + tools), given ids shared by every
session of that provider. Think time = the round's last input event (tool
result or user message) minus the previous round's last output event.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from traces._errors import TraceError
from traces._import_common import (
    MAX_REQUEST_TOKENS,
    ChainEncoder,
    Counters,
    Duplicates,
    IdSpace,
    ImportedTrace,
    require_file,
)
from traces._lines import bounded_lines
from traces._models import Request, RequestKind, Session, WorkloadHeader
from traces._scale import make_scaler, scale_params

__all__ = ["import_tracelab"]

_INPUT_EVENTS = frozenset({"user_message", "tool_result"})


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")

    event_type: str
    timestamp: datetime

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        """Naive timestamps are taken as UTC, so every pair can be compared."""
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class _Round(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    provider: str = "unknown"
    session_id: str
    round_index: int = Field(ge=0)
    input_tokens_total: int = Field(ge=1)
    prefix_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(ge=0)
    first_input_event_type: str | None = None
    timing_events: list[_Event] = []


def _read(file: Path) -> list[tuple[int, _Round]]:
    name = str(file)
    rows: list[tuple[int, _Round]] = []
    with open(file, "rb") as fh:
        for lineno, raw in bounded_lines(fh, name):
            if not raw.strip():
                continue
            try:
                obj: Any = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise TraceError(f"invalid JSON ({exc.msg})", file=name, line=lineno) from None
            if not isinstance(obj, dict):
                raise TraceError("expected a JSON object", file=name, line=lineno)
            try:
                rnd = _Round.model_validate(obj)
            except ValidationError as exc:
                raise TraceError.from_validation(exc, file=name, line=lineno) from None
            for fname in ("input_tokens_total", "output_tokens"):
                if getattr(rnd, fname) > MAX_REQUEST_TOKENS:
                    raise TraceError(f"more than {MAX_REQUEST_TOKENS:,} tokens in one request",
                                     file=name, line=lineno, field=fname)
            if rnd.prefix_tokens > rnd.input_tokens_total:
                raise TraceError(
                    f"prefix_tokens {rnd.prefix_tokens} exceeds input_tokens_total "
                    f"{rnd.input_tokens_total}", file=name, line=lineno, field="prefix_tokens",
                )
            rows.append((lineno, rnd))
    if not rows:
        raise TraceError("empty file", file=name, line=1)
    return rows


def _kind(rnd: _Round) -> RequestKind:
    return {"user_message": "user_text", "tool_result": "tool_result"}.get(
        rnd.first_input_event_type or "", "other")  # type: ignore[return-value]


def _times(rnd: _Round) -> tuple[datetime | None, datetime | None]:
    ins = [e.timestamp for e in rnd.timing_events if e.event_type in _INPUT_EVENTS]
    outs = [e.timestamp for e in rnd.timing_events if e.event_type not in _INPUT_EVENTS]
    return (max(ins) if ins else None), (max(outs) if outs else None)


def _gap(later: datetime | None, earlier: datetime | None) -> float:
    if later is None or earlier is None:
        return 0.0
    return max(0.0, (later - earlier).total_seconds())


def import_tracelab(path: str | os.PathLike[str], *, max_context: int | None = None,
                    block_size: int = 64, dedupe: bool = False, token_scale: float = 1.0
                    ) -> ImportedTrace:
    """Sessions rebuilt from a TraceLab ``round_trace.jsonl``.

    A session whose rounds (all fields but ``session_id``) repeat an earlier
    session's is counted in ``duplicate_sessions``; ``dedupe`` drops it.
    """
    file = Path(path)
    require_file(file, "tracelab")
    base = WorkloadHeader(
        source="tracelab", block_size=block_size, arrival="closed", max_context=max_context,
        params={"path": file.name, "dedupe": dedupe, **scale_params(token_scale)},
    )
    scaler = make_scaler(token_scale, block_size)

    def sessions(counters: Counters) -> Iterator[Session]:
        name = str(file)
        seen = Duplicates(counters, dedupe)
        groups: dict[str, list[tuple[int, _Round]]] = {}
        for lineno, rnd in _read(file):
            groups.setdefault(rnd.session_id, []).append((lineno, rnd))
        starts = [
            min((e.timestamp for _, r in g for e in r.timing_events), default=None)
            for g in groups.values()
        ]
        known = [s for s in starts if s is not None]
        origin = min(known) if known else None
        ids = IdSpace()
        heads: dict[str, dict[int, int]] = {}
        for (sid, group), start in zip(groups.items(), starts, strict=True):
            group.sort(key=lambda x: x[1].round_index)
            content = [r.model_dump(mode="json", exclude={"session_id"}) for _, r in group]
            if seen.repeat(content) and dedupe:
                continue
            for (la, a), (lb, b) in zip(group, group[1:], strict=False):
                if a.round_index == b.round_index:
                    raise TraceError(f"round_index {b.round_index} repeats line {la}",
                                     file=name, line=lb, field="round_index")
            enc = ChainEncoder(block_size, max_context, counters, scaler=scaler)
            prev_full: list[int] = []
            prev_tokens = 0
            prev_out_time: datetime | None = None
            shared = 0
            requests: list[Request] = []
            for i, (_, rnd) in enumerate(group):
                blocks = -(-rnd.input_tokens_total // block_size)
                if i == 0:
                    head = heads.setdefault(rnd.provider, {})
                    keep = min(rnd.prefix_tokens // block_size, blocks)
                    for k in range(len(head), keep):
                        head[k] = ids.fresh()[0]
                    full = [head[k] for k in range(keep)]
                    shared = keep
                else:
                    keep = min(rnd.prefix_tokens // block_size, prev_tokens // block_size)
                    full = prev_full[:keep]
                    shared = min(shared, keep)
                full = full + ids.fresh(blocks - len(full))
                in_time, out_time = _times(rnd)
                think = _gap(in_time, prev_out_time) if i else 0.0
                arrival = _gap(start, origin) if i == 0 and origin is not None else None
                enc.shared_blocks = shared
                requests.append(enc.encode(
                    full, rnd.input_tokens_total, max(1, rnd.output_tokens),
                    think_time_s=round(think, 3), kind=_kind(rnd), arrival_s=arrival,
                ))
                counters.zero_outputs_raised += rnd.output_tokens < 1
                prev_full, prev_tokens, prev_out_time = full, rnd.input_tokens_total, out_time
            counters.sessions_compacted += enc.compactions > 0
            yield Session(id=sid, agent_type=group[0][1].provider, requests=tuple(requests),
                          compactions=enc.compactions)

    return ImportedTrace(base, sessions)
