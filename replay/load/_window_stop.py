"""A movable window end: a rule that may end a run's window early.

A run asked one question (a search probe: is this tier met at this count?) need not
measure its whole window once the answer is settled. A :class:`WindowStop` sees each
finished record and, every ``step_s`` seconds of the window, how many requests sent
in the window are still in flight; once :meth:`WindowStop.check` gives a reason, the
window ends there (``LaneContext.end_window``): requests sent later count as drain,
the drain lets the window's requests in flight finish (bounded as ever), and
``run.json`` records the window actually covered (``window``) and why it ended
(``early_stop``), so the judge and every metric use the window that ran. Only the
in-process executor supports it (the twin's levels, a plain run without
``--workers``/``--ray``): worker processes see no shared record stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from analysis import RecordDict

__all__ = ["WindowEnd", "WindowStop"]


class WindowStop(Protocol):
    """Decides, as the window runs, that the rest of it is not needed."""

    step_s: float
    """How often (seconds of window) :meth:`check` is asked."""
    rule: str
    """The rule in words (``run.json``'s ``early_stop.rule``)."""

    def record(self, rec: RecordDict) -> None:
        """One finished record (every phase; the rule picks the window's)."""

    def check(self, t_s: float, pending: int) -> str | None:
        """At ``t_s`` seconds into the window with ``pending`` window requests in
        flight: why the window may end now, or None to go on (the rule keeps its own
        floor)."""


@dataclass(frozen=True)
class WindowEnd:
    """Where a stop rule ended the window: seconds into it, and why."""

    window_s: float
    why: str
    rule: str
