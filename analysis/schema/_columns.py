"""Request records as columns: the in-memory form every metric is computed from.

The field tables both readers check against (which fields exist, their JSON
types, which are required, their defaults, which must not be negative) are
derived here from ``RequestRecord``'s fields, never written by hand.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, fields
from typing import Any, Literal, Union, get_args, get_origin

import numpy as np
from annotated_types import Ge
from pydantic.fields import FieldInfo

from analysis.schema._schema import STATUSES, Phase, RequestRecord

__all__ = ["COLUMN_KIND", "CODED", "DEFAULTS", "FIELDS", "INT", "KNOWN", "LISTS", "NONNEGATIVE",
           "NUM", "PHASES", "REQUIRED", "RequestColumns", "STATUSES", "STR", "ColumnKind"]

PHASES: tuple[str, ...] = get_args(Phase)
INT: tuple[type, ...] = (int,)
NUM: tuple[type, ...] = (int, float)
STR: tuple[type, ...] = (str,)
ColumnKind = Literal["text", "count", "time", "coded"]
"""How a scalar field is held: ``text`` object array (None kept), ``count`` int64
(-1 for null), ``time`` float64 (NaN for null), ``coded`` one of a fixed set."""


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without ``| None``, whether None is allowed)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0], len(args) < len(get_args(annotation))
    return annotation, False


def _json_types(annotation: Any) -> tuple[type, ...]:
    if annotation is int:
        return INT
    if annotation is float:
        return NUM
    return STR  # str and Literal[str, ...]


def _default(info: FieldInfo) -> object:
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg]
    return info.default


_MODEL = RequestRecord.model_fields
LISTS: tuple[str, ...] = tuple(n for n, f in _MODEL.items() if get_origin(f.annotation) is list)
"""Per-chunk list fields (held flat with offsets)."""
FIELDS: dict[str, tuple[tuple[type, ...], bool, bool]] = {}
"""Scalar field -> (allowed JSON value types, required, nullable). For an optional
field that is not nullable, null means the same as absent (its default)."""
COLUMN_KIND: dict[str, ColumnKind] = {}
CODED: dict[str, tuple[str, ...]] = {}
"""Fields restricted to a fixed set of strings (Literal): their allowed values."""
for _name, _info in _MODEL.items():
    if _name in LISTS:
        continue
    _ann, _nullable = _unwrap(_info.annotation)
    FIELDS[_name] = (_json_types(_ann), _info.is_required(), _nullable)
    if get_origin(_ann) is Literal:
        CODED[_name] = tuple(get_args(_ann))
        COLUMN_KIND[_name] = "coded"
    else:
        COLUMN_KIND[_name] = ("count" if _ann is int else "time" if _ann is float else "text")
DEFAULTS: dict[str, object] = {n: _default(f) for n, f in _MODEL.items() if not f.is_required()}
KNOWN = frozenset(_MODEL)
REQUIRED = frozenset(n for n, (_, req, _) in FIELDS.items() if req)
NONNEGATIVE: tuple[str, ...] = tuple(
    n for n, f in _MODEL.items() if any(isinstance(m, Ge) and m.ge == 0 for m in f.metadata))
"""Integer fields that must not be negative."""
CODE_LABELS: dict[str, np.ndarray] = {
    n: np.array(v, dtype=f"<U{max(map(len, v))}") for n, v in CODED.items()}
"""Coded values become array elements by index: no per-value string conversion."""
CODE_INDEX: dict[str, dict[str, int]] = {
    n: {v: i for i, v in enumerate(vals)} for n, vals in CODED.items()}


@dataclass(frozen=True)
class RequestColumns:
    """All request records of a run as parallel arrays (one element per record).

    One attribute per ``RequestRecord`` field (a test holds them equal). Missing
    optional numbers are NaN (times) or -1 (token counts); chunk data is flat,
    record ``i`` owning ``chunk_*[chunk_offsets[i]:chunk_offsets[i + 1]]``.
    """

    id: np.ndarray
    user: np.ndarray
    lane: np.ndarray
    session: np.ndarray
    session_instance: np.ndarray
    turn: np.ndarray
    agent: np.ndarray
    kind: np.ndarray
    phase: np.ndarray
    worker: np.ndarray
    replica: np.ndarray
    status: np.ndarray
    error_kind: np.ndarray
    error_message: np.ndarray
    http_status: np.ndarray
    due_s: np.ndarray
    sent_s: np.ndarray
    first_token_s: np.ndarray
    last_token_s: np.ndarray
    end_s: np.ndarray
    chunk_times_s: np.ndarray
    chunk_tokens: np.ndarray
    prompt_tokens: np.ndarray
    prompt_tokens_server: np.ndarray
    output_tokens_asked: np.ndarray
    output_tokens: np.ndarray
    cached_tokens: np.ndarray
    expected_cached_tokens: np.ndarray
    think_applied_s: np.ndarray
    chunk_offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.sent_s)

    @staticmethod
    def concat(parts: list[RequestColumns]) -> RequestColumns:
        """Join column sets (records in order), fixing the chunk offsets."""
        if len(parts) == 1:
            return parts[0]
        out: dict[str, np.ndarray] = {}
        for f in fields(RequestColumns):
            if f.name != "chunk_offsets":
                out[f.name] = np.concatenate([getattr(p, f.name) for p in parts])
        offsets = [np.zeros(1, dtype=np.int64)]
        base = 0
        for p in parts:
            offsets.append(p.chunk_offsets[1:] + base)
            base += int(p.chunk_offsets[-1])
        out["chunk_offsets"] = np.concatenate(offsets)
        return RequestColumns(**out)
