"""Warnings given before any load: ``--warmup`` too short for a workload built on
prefix reuse, and a window too thin to measure (think times that outlast it).

With warmup 0 every lane's first requests find a cold prefix cache (lanes start
part-way into their sessions), so the window opens on misses the workload never
meant. The rule, stated in the warning: warmup should cover one think-time
median plus one request at the lowest default SLO floor (30 tok/s/user), so each
lane has sent its first request and come back for the next before measuring.
"""

from __future__ import annotations

import math
import os
from itertools import islice
from typing import TYPE_CHECKING

from analysis.text import plural, verb

if TYPE_CHECKING:
    from traces import Session

__all__ = [
    "MIN_WINDOW_REQUESTS", "PREFIX_HEAVY_SHARE", "print_advice", "warmup_advice", "window_advice",
]

PREFIX_HEAVY_SHARE = 0.5
"""Workload-wide prefix reuse share (blocks sent before) from which warmup matters."""
_PACE_TOK_S = 30.0
"""Decode pace assumed for the one request of the rule (the lowest default floor)."""
_SAMPLE_SESSIONS = 200
"""Sessions read for the estimate (the run reads the rest itself)."""


def _closed_sample(workload: str | os.PathLike[str]) -> list[Session] | None:
    """The first sessions of a closed-loop workload (the estimates need no more); None
    for another arrival mode or a workload that cannot be read (the run says why)."""
    from traces import TraceError, iter_sessions, read_header

    try:
        if read_header(workload).arrival != "closed":
            return None
        return list(islice(iter_sessions(workload), _SAMPLE_SESSIONS))
    except (TraceError, OSError):
        return None


def warmup_advice(
    workload: str | os.PathLike[str], warmup_s: float, *, think_scale: float = 1.0,
    think_time_cap_s: float | None = None,
) -> str | None:
    """One warning line when ``warmup_s`` is below the rule for a prefix-heavy
    closed-loop workload; None when it is long enough, or the workload is not such
    (or cannot be read: the run says why itself)."""
    from traces import inspect_sessions

    sample = _closed_sample(workload)
    if sample is None:
        return None
    stats = inspect_sessions(sample)
    reuse = stats.reuse_share
    if reuse is None or reuse < PREFIX_HEAVY_SHARE:
        return None
    think = (stats.think_time_s.p50 or 0.0) * think_scale
    if think_time_cap_s is not None:
        think = min(think, think_time_cap_s)
    request = (stats.output_tokens.p50 or 0.0) / _PACE_TOK_S
    needed = math.ceil(think + request)
    if warmup_s >= needed:
        return None
    return (f"warning: --warmup {warmup_s:g} s is shorter than this workload's prefix cache "
            f"needs ({reuse:.0%} of prompt blocks are reused); suggested: --warmup {needed} "
            f"(rule: one think-time median, {think:.1f} s, plus one request at "
            f"{_PACE_TOK_S:g} tok/s/user, {request:.1f} s); shorter, the window opens on "
            "cold-cache requests")


MIN_WINDOW_REQUESTS = 20
"""Requests a level needs for a difference to be established (analysis' evidence rule)."""


def window_advice(
    workload: str | os.PathLike[str], users: int, duration_s: float, *,
    think_scale: float = 1.0, think_time_cap_s: float | None = None,
    scenario: str | None = None,
) -> str | None:
    """One warning line when a closed-loop window of ``duration_s`` would see fewer than
    :data:`MIN_WINDOW_REQUESTS` requests. A user sends one request per cycle: a think
    time (the mean, scaled and capped request by request: long pauses dominate) plus
    one request at 30 tok/s/user. None when the window is wide enough or the workload
    is not closed loop (or cannot be read). Under a ``scenario`` the think times are
    its rules' (it refuses ``--think-time-cap`` and ``--think-scale``), so the fix named
    is a longer window or more users."""
    sample = _closed_sample(workload)
    if sample is None:
        return None
    reqs = [r for sess in sample for r in sess.requests]
    if not reqs:
        return None

    def mean_think(cap: float | None) -> float:
        scaled = [r.think_time_s * think_scale for r in reqs]
        return sum(scaled if cap is None else [min(t, cap) for t in scaled]) / len(reqs)

    think = mean_think(think_time_cap_s)
    request = sum(r.output_tokens for r in reqs) / len(reqs) / _PACE_TOK_S
    expected = users * duration_s / max(think + request, 1e-9)
    if expected >= MIN_WINDOW_REQUESTS:
        return None
    cycle = users * duration_s / MIN_WINDOW_REQUESTS  # what one request's cycle may take
    cap = math.floor(cycle - request)
    if scenario is None and cap >= 1 and mean_think(cap) + request <= cycle:
        fix = f"cap think times with --think-time-cap {cap} (or scale them: --think-scale)"
    else:
        need = math.ceil(MIN_WINDOW_REQUESTS * (think + request) / max(users, 1))
        fix = f"lengthen --duration to about {need} s (or add --users)"
        if scenario is not None:
            fix += f"; scenario {scenario} sets the think times"
    return (f"warning: the {duration_s:g} s window would see about {expected:.0f} "
            f"{verb(round(expected), 'request', 'requests')} from {plural(users, 'user')} "
            f"(mean think time {think:.1f} s, a request "
            f"about {request:.1f} s at {_PACE_TOK_S:g} tok/s/user): fewer than the "
            f"{MIN_WINDOW_REQUESTS} a level needs for an established difference; {fix}")


def print_advice(
    workload: str | os.PathLike[str], *, warmup_s: float, users: int, duration_s: float,
    think_scale: float = 1.0, think_time_cap_s: float | None = None,
    scenario: str | None = None,
) -> None:
    """On stderr, before any load: the warmup and window warnings that apply (the
    settings are valid by then, so a refused command still fails in one line)."""
    import sys

    for advice in (
        warmup_advice(workload, warmup_s, think_scale=think_scale,
                      think_time_cap_s=think_time_cap_s),
        window_advice(workload, users, duration_s, think_scale=think_scale,
                      think_time_cap_s=think_time_cap_s, scenario=scenario),
    ):
        if advice:
            print(f"agentreplay: {advice}", file=sys.stderr, flush=True)
