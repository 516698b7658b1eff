"""How long the drain waits for the window's requests: by default, long enough for the
workload's longest answer.

A request still running when the drain ends is cut (``incomplete``) and, unless it
was on pace for a tier, counts as a miss: a drain shorter than the longest answer
turns the tool's own cut-off into SLO failures. The default therefore covers the
longest output of the workload at a conservative decode rate, plus a margin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from replay.load._phases import walk
from replay.load._settings import DRAIN_MARGIN_S, DRAIN_MIN_S, DRAIN_RATE_TOK_S, RunSettings
from traces import Session

__all__ = ["DRAIN_MARGIN_S", "DRAIN_MIN_S", "DRAIN_RATE_TOK_S", "auto_drain", "longest_output",
           "resolve_drain"]


def longest_output(sessions: Sequence[Session]) -> int:
    """The most output tokens any request of the workload asks for (subagents included)."""
    return max((req.output_tokens for s in sessions for _, req in walk(s.requests)), default=0)


def auto_drain(sessions: Sequence[Session]) -> float:
    """Longest output at ``DRAIN_RATE_TOK_S`` plus ``DRAIN_MARGIN_S``, at least
    ``DRAIN_MIN_S``, rounded up to a whole second."""
    need = longest_output(sessions) / DRAIN_RATE_TOK_S + DRAIN_MARGIN_S
    return float(max(DRAIN_MIN_S, math.ceil(need)))


def resolve_drain(settings: RunSettings,
                  sessions: Sequence[Session]) -> tuple[RunSettings, str | None]:
    """The settings with the drain decided, and the line that says how (None when
    ``--drain`` was given)."""
    if settings.drain_s is not None:
        return settings, None
    drain = auto_drain(sessions)
    note = (f"drain: {drain:g} s after the window (default: the workload's longest answer, "
            f"{longest_output(sessions):,} tokens, at {DRAIN_RATE_TOK_S:g} tok/s + "
            f"{DRAIN_MARGIN_S:g} s, at least {DRAIN_MIN_S:g} s; set --drain to change it)")
    return settings.model_copy(update={"drain_s": drain}), note
