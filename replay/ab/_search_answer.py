"""A search's answers and their evidence: per probed count, what its runs said; per arm
and tier, the bracket and how the search ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from analysis import Bracket, SloTier
from replay.ab._early_stop import Settled

__all__ = ["Ended", "Outcome", "Probe", "SearchAnswer"]

Outcome = Literal["meets", "fails", "invalid", "indeterminate"]
Ended = Literal["searching", "bracketed", "at least", "below", "invalid", "probe limit",
                "indeterminate"]


@dataclass(frozen=True)
class Probe:
    """One short run's evidence: per tier met or not, or no evidence (invalid)."""

    users: int
    run: str
    validity: str
    outcomes: dict[str, Outcome]
    reason: str = ""
    runs: int = 1
    """Runs pooled behind it (an indeterminate probe is repeated)."""
    why: dict[str, str] = field(default_factory=dict)
    """Per indeterminate tier: why the sample could not tell."""
    window_s: float | None = None
    """The last run's window as covered (seconds of the run's clock)."""
    stopped_early: str | None = None
    """Why the last run's window ended early (``run.json`` ``early_stop``; None: it ran
    its planned length)."""
    settled: dict[str, Settled | None] = field(default_factory=dict)
    """Per tier: where the early-stop rule settled the last run's verdict (None: it
    needed the whole window)."""
    placed_by: dict[str, str] = field(default_factory=dict)
    """Per tier whose search chose this count: ``twin`` or ``bisect``."""


@dataclass
class SearchAnswer:
    """One arm and tier: the bracket so far, how the search ended and the probes behind it."""

    arm: str
    tier: SloTier
    bracket: Bracket | None = None
    ended: Ended = "searching"
    how: str = "searching"
    evidence: list[Probe] = field(default_factory=list)

    @property
    def users(self) -> int | None:
        """The largest count up to which every probe met the tier (None: none did)."""
        p = self.bracket.passed if self.bracket is not None else None
        return None if p is None else int(p)

    def answer(self) -> str:
        return self.bracket.text() if self.bracket is not None else "no answer"

    def text(self) -> str:
        return f"{self.arm} at {self.tier.label}: {self.answer()} ({self.how})"
