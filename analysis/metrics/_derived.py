"""Per-request values derived from a record's times and counts, defined once.

Metrics, the CSV export and the live view all take TTFT, TTFT from schedule,
E2E, decode time and TPOT from here, for whole columns (``column_latencies``)
or for one record dict as the lanes build it (``record_latencies``): the same
formulas either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from analysis.schema import RecordDict

if TYPE_CHECKING:
    from analysis.schema import RequestColumns

__all__ = ["Latencies", "RecordLatencies", "column_latencies", "record_latencies"]

_T = TypeVar("_T", float, np.ndarray)


def ttft(first: _T, sent: _T) -> _T:
    """First token received minus request sent."""
    out: _T = first - sent
    return out


def ttft_due(first: _T, due: _T) -> _T:
    """First token minus when the request was due (includes client lag)."""
    out: _T = first - due
    return out


def e2e(last: _T, sent: _T) -> _T:
    """Last token received minus request sent."""
    out: _T = last - sent
    return out


def decode_time(first: _T, last: _T) -> _T:
    """Last token minus first token."""
    out: _T = last - first
    return out


@dataclass(frozen=True)
class Latencies:
    """Derived values of every record, NaN where undefined (TPOT: < 2 tokens, or every
    token in one read: a decode time of 0 measures no rate, it is not an infinite one)."""

    ttft: np.ndarray
    ttft_due: np.ndarray
    e2e: np.ndarray
    decode_time: np.ndarray
    tpot: np.ndarray


def column_latencies(r: RequestColumns) -> Latencies:
    """Derived values of all records of a run."""
    dt = decode_time(r.first_token_s, r.last_token_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where((r.output_tokens >= 2) & (dt > 0), dt / (r.output_tokens - 1), np.nan)
    return Latencies(
        ttft=ttft(r.first_token_s, r.sent_s), ttft_due=ttft_due(r.first_token_s, r.due_s),
        e2e=e2e(r.last_token_s, r.sent_s), decode_time=dt, tpot=tpot,
    )


@dataclass(frozen=True)
class RecordLatencies:
    """Derived values of one record; None where undefined."""

    ttft: float | None
    ttft_due: float | None
    e2e: float | None
    decode_time: float | None
    tpot: float | None


def record_latencies(rec: RecordDict) -> RecordLatencies:
    """Derived values of one record as the lanes build it (the live view's source)."""
    first, last = rec["first_token_s"], rec["last_token_s"]
    sent, n = rec["sent_s"], rec["output_tokens"]
    dt = decode_time(first, last) if first is not None and last is not None else None
    return RecordLatencies(
        ttft=ttft(first, sent) if first is not None else None,
        ttft_due=ttft_due(first, rec["due_s"]) if first is not None else None,
        e2e=e2e(last, sent) if last is not None else None,
        decode_time=dt,
        tpot=dt / (n - 1) if dt is not None and dt > 0 and n >= 2 else None,
    )
