"""Request records as columns: the in-memory form every metric is computed from.

Also the field tables both readers check against (which fields exist, their
JSON types, which are required, and the defaults of the optional ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis._schema import RequestRecord

__all__ = ["FIELDS", "DEFAULTS", "KNOWN", "LISTS", "PHASES", "REQUIRED", "RequestColumns",
           "STATUSES"]

STATUSES = ("ok", "error", "timeout", "cancelled")
PHASES = ("warmup", "measure", "drain")
# checked values become array elements by code: no per-value string conversion
STATUS_CODE = {v: i for i, v in enumerate(STATUSES)}
PHASE_CODE = {v: i for i, v in enumerate(PHASES)}
STATUS_ARRAY = np.array(STATUSES, dtype="<U9")
PHASE_ARRAY = np.array(PHASES, dtype="<U7")
INT = (int,)
NUM = (int, float)
STR = (str,)
# field -> (allowed python types, required, nullable); for an optional field that
# is not nullable, null means the same as absent (its default)
FIELDS: dict[str, tuple[tuple[type, ...], bool, bool]] = {
    "id": (STR, True, False),
    "user": (INT, True, False),
    "lane": (STR, False, False),
    "session": (STR, True, False),
    "session_instance": (INT, False, False),
    "turn": (INT, True, False),
    "agent": (STR, False, True),
    "kind": (STR, False, False),
    "phase": (STR, False, False),
    "worker": (INT, False, False),
    "status": (STR, True, False),
    "error_kind": (STR, False, True),
    "error_message": (STR, False, True),
    "http_status": (INT, False, True),
    "due_s": (NUM, True, False),
    "sent_s": (NUM, True, False),
    "first_token_s": (NUM, False, True),
    "last_token_s": (NUM, False, True),
    "prompt_tokens": (INT, True, False),
    "prompt_tokens_server": (INT, False, True),
    "output_tokens_asked": (INT, True, False),
    "output_tokens": (INT, True, False),
    "cached_tokens": (INT, False, True),
    "expected_cached_tokens": (INT, False, True),
    "think_time_s": (NUM, False, False),
}
DEFAULTS: dict[str, object] = {
    "lane": "", "session_instance": 0, "agent": None, "kind": "other", "phase": "measure",
    "worker": 0, "error_kind": None, "error_message": None, "http_status": None,
    "first_token_s": None, "last_token_s": None, "prompt_tokens_server": None,
    "cached_tokens": None, "expected_cached_tokens": None, "think_time_s": 0.0,
}
LISTS = ("chunk_times_s", "chunk_tokens")
# the schema decides which fields exist (fields added to it later are accepted, unread)
KNOWN = set(RequestRecord.model_fields) | set(FIELDS) | set(LISTS)
REQUIRED = frozenset(k for k, (_, req, _) in FIELDS.items() if req)


@dataclass(frozen=True)
class RequestColumns:
    """All request records of a run as parallel arrays (one element per record).

    Missing optional numbers are NaN (times) or -1 (token counts); chunk data is
    flat, record ``i`` owning ``chunk_*[chunk_offsets[i]:chunk_offsets[i + 1]]``.
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
    status: np.ndarray
    error_kind: np.ndarray
    error_message: np.ndarray
    http_status: np.ndarray
    due_s: np.ndarray
    sent_s: np.ndarray
    first_token_s: np.ndarray
    last_token_s: np.ndarray
    prompt_tokens: np.ndarray
    prompt_tokens_server: np.ndarray
    output_tokens_asked: np.ndarray
    output_tokens: np.ndarray
    cached_tokens: np.ndarray
    expected_cached_tokens: np.ndarray
    think_time_s: np.ndarray
    chunk_offsets: np.ndarray
    chunk_times_s: np.ndarray
    chunk_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.sent_s)

    @staticmethod
    def concat(parts: list[RequestColumns]) -> RequestColumns:
        """Join column sets (records in order), fixing the chunk offsets."""
        if len(parts) == 1:
            return parts[0]
        out: dict[str, np.ndarray] = {}
        for name in RequestColumns.__dataclass_fields__:
            if name == "chunk_offsets":
                continue
            out[name] = np.concatenate([getattr(p, name) for p in parts])
        offsets = [np.zeros(1, dtype=np.int64)]
        base = 0
        for p in parts:
            offsets.append(p.chunk_offsets[1:] + base)
            base += int(p.chunk_offsets[-1])
        out["chunk_offsets"] = np.concatenate(offsets)
        return RequestColumns(**out)
