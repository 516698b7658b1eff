"""Time controls for workloads replayed at their own arrival times.

``--time-scale``, ``--start`` and ``--slice`` reshape a timestamp trace (or an
open-loop workload's session arrivals) with :func:`traces.retime`: keep the
sessions whose first arrival lies in a slice of the trace, and map their
offsets onto replay time. Replay time 0 is trace time ``--start`` when given,
else the trace's first arrival. A measured window that would hold no arrival
(a sparse trace, a gap) is said before the run starts, not discovered after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from analysis import ValidityReason
from replay.errors import ConfigError
from traces import Session, TraceError, count_arrivals, retime

__all__ = ["TimeControls", "check_time_controls", "empty_window_note", "retimed"]


class TimeControls(Protocol):
    """The settings these functions read (``RunSettings`` and ``CompareOptions``)."""

    @property
    def time_scale(self) -> float: ...
    @property
    def start_s(self) -> float | None: ...
    @property
    def slice_s(self) -> float | None: ...


def _given(c: TimeControls) -> str | None:
    """The first time-control flag the user set, or None."""
    if c.time_scale != 1.0:
        return "--time-scale"
    if c.start_s is not None:
        return "--start"
    if c.slice_s is not None:
        return "--slice"
    return None


def check_time_controls(c: TimeControls, arrival: str, workload: str, *, rated: bool) -> None:
    """Refuse time controls where the load is not the workload's own arrival times:
    a closed-loop workload (users set its load) or an open-loop ``--rate`` (``rated``)."""
    flag = _given(c)
    if flag is None:
        return
    if arrival == "closed":
        raise ConfigError(f"{flag}: only for workloads replayed at their own arrival times; "
                          f"{workload} is closed loop (users set its load)")
    if rated:
        raise ConfigError(f"{flag}: does not combine with --rate (the workload's own "
                          "arrival times are replaced by a Poisson rate)")


def retimed(c: TimeControls, sessions: Sequence[Session], workload: str) -> list[Session]:
    """The sessions as replayed under the time controls (unchanged when none is set)."""
    if _given(c) is None:
        return list(sessions)
    start = c.start_s if c.start_s is not None else _first_arrival(sessions)
    try:
        out = list(retime(sessions, time_scale=c.time_scale, start_s=start,
                          slice_s=c.slice_s))
    except TraceError as exc:
        raise ConfigError(f"--time-scale/--start/--slice: {exc}") from None
    if not out:
        end = "" if c.slice_s is None else f" + {c.slice_s:g} s"
        span = _span(sessions)
        raise ConfigError(f"--start/--slice: no session of {workload} starts in trace time "
                          f"[{start:g} s, {start:g} s{end}) (its sessions start at {span})")
    return out


def replay_origin(c: TimeControls, sessions: Sequence[Session]) -> float:
    """The workload offset that replay time 0 stands for (see the module docstring)."""
    if c.start_s is not None:
        return 0.0
    return _first_arrival(sessions)


def empty_window_note(c: TimeControls, sessions: Sequence[Session], warmup_s: float,
                      duration_s: float) -> ValidityReason | None:
    """A caveat when the measured window ``[warmup, warmup + duration)`` of replay
    time would see no arrival of ``sessions`` (as replayed), else None."""
    origin = replay_origin(c, sessions)
    lo, hi = origin + warmup_s, origin + warmup_s + duration_s
    if count_arrivals(sessions, lo, hi):
        return None
    later = [r.arrival_s - origin for s in sessions for r in s.requests
             if r.arrival_s is not None and r.arrival_s >= hi]
    after = f"; the next arrives at {min(later):.1f} s" if later else "; none arrives after it"
    return ValidityReason(
        code="window_no_arrivals", severity="caveat",
        message=f"the measured window [{warmup_s:g} s, {warmup_s + duration_s:g} s) holds no "
                f"arrival of the workload{after} (move it with --start, --time-scale or "
                "--warmup, or lengthen --duration)")


def _first_arrival(sessions: Sequence[Session]) -> float:
    return min((r.arrival_s for s in sessions for r in s.requests if r.arrival_s is not None),
               default=0.0)


def _span(sessions: Sequence[Session]) -> str:
    firsts = [s.requests[0].arrival_s for s in sessions if s.requests[0].arrival_s is not None]
    if not firsts:
        return "no recorded time"
    return f"{min(firsts):g}..{max(firsts):g} s"
