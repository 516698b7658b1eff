"""A warning when ``--warmup`` is too short for a workload built on prefix reuse.

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

__all__ = ["PREFIX_HEAVY_SHARE", "warmup_advice"]

PREFIX_HEAVY_SHARE = 0.5
"""Workload-wide prefix reuse share (blocks sent before) from which warmup matters."""
_PACE_TOK_S = 30.0
"""Decode pace assumed for the one request of the rule (the lowest default floor)."""
_SAMPLE_SESSIONS = 200
"""Sessions read for the estimate (the run reads the rest itself)."""


def warmup_advice(
    workload: str | os.PathLike[str], warmup_s: float, *, think_scale: float = 1.0,
    think_cap_s: float | None = None,
) -> str | None:
    """One warning line when ``warmup_s`` is below the rule for a prefix-heavy
    closed-loop workload; None when it is long enough, or the workload is not such
    (or cannot be read: the run says why itself)."""
    from traces import TraceError, inspect_sessions, iter_sessions, read_header

    try:
        if read_header(workload).arrival != "closed":
            return None
        stats = inspect_sessions(islice(iter_sessions(workload), _SAMPLE_SESSIONS))
    except (TraceError, OSError):
        return None
    reuse = stats.reuse_share
    if reuse is None or reuse < PREFIX_HEAVY_SHARE:
        return None
    think = (stats.think_time_s.p50 or 0.0) * think_scale
    if think_cap_s is not None:
        think = min(think, think_cap_s)
    request = (stats.output_tokens.p50 or 0.0) / _PACE_TOK_S
    needed = math.ceil(think + request)
    if warmup_s >= needed:
        return None
    return (f"warning: --warmup {warmup_s:g} s is shorter than this workload's prefix cache "
            f"needs ({reuse:.0%} of prompt blocks are reused); suggested: --warmup {needed} "
            f"(rule: one think-time median, {think:.1f} s, plus one request at "
            f"{_PACE_TOK_S:g} tok/s/user, {request:.1f} s); shorter, the window opens on "
            "cold-cache requests")
