"""Arrival-time controls for timestamp traces (Azure, Mooncake, TraceLab arrivals).

Pure functions over sessions: ``retime`` keeps the sessions whose first arrival
falls in a slice of the trace and maps their arrival offsets onto replay time;
``count_arrivals`` says how many requests a window of replay time would see, so
the replay can warn before measuring a window that holds none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from traces._errors import TraceError
from traces._models import Request, Session, Subagent

__all__ = ["count_arrivals", "retime"]


def _check(time_scale: float, start_s: float, slice_s: float | None) -> None:
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise TraceError(f"must be a positive number, got {time_scale}", field="time_scale")
    if not (start_s >= 0 and math.isfinite(start_s)):
        raise TraceError(f"must be >= 0 seconds, got {start_s}", field="start_s")
    if slice_s is not None and not (slice_s > 0 and math.isfinite(slice_s)):
        raise TraceError(f"must be a positive number of seconds, got {slice_s}",
                         field="slice_s")


def _shift(req: Request, start_s: float, time_scale: float) -> Request:
    subs = tuple(Subagent(id=s.id, type=s.type, background=s.background,
                          requests=tuple(_shift(r, start_s, time_scale) for r in s.requests))
                 for s in req.subagents)
    if req.arrival_s is None and not subs:
        return req
    arrival = None if req.arrival_s is None else \
        max(0.0, (req.arrival_s - start_s) * time_scale)
    return req.model_copy(update={"arrival_s": arrival, "subagents": subs})


def retime(sessions: Iterable[Session], *, time_scale: float = 1.0, start_s: float = 0.0,
           slice_s: float | None = None) -> Iterator[Session]:
    """Sessions whose first arrival lies in ``[start_s, start_s + slice_s)`` of the trace.

    Offsets become ``(arrival - start_s) * time_scale``: 0.5 replays twice as
    fast, 2 half as fast. Sessions without an arrival time pass unchanged (a
    closed-loop workload has nothing to slice). Streams: one session at a time.
    """
    _check(time_scale, start_s, slice_s)
    end = math.inf if slice_s is None else start_s + slice_s
    for session in sessions:
        first = session.requests[0].arrival_s
        if first is None:
            yield session
            continue
        if not start_s <= first < end:
            continue
        reqs = tuple(_shift(r, start_s, time_scale) for r in session.requests)
        yield session.model_copy(update={"requests": reqs})


def count_arrivals(sessions: Iterable[Session], start_s: float, end_s: float) -> int:
    """Requests whose ``arrival_s`` lies in ``[start_s, end_s)`` (replay seconds)."""
    n = 0
    for session in sessions:
        for req in session.requests:
            if req.arrival_s is not None and start_s <= req.arrival_s < end_s:
                n += 1
    return n
