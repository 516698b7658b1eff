"""One run, analysed: its summary with its validity verdict (what summary.json holds)."""

from __future__ import annotations

from analysis.judge._rules import DEFAULT_RULES, Rules
from analysis.judge._validity import assess_run
from analysis.metrics import RunSummary, measure, summarize
from analysis.read import RunData
from analysis.schema import DEFAULT_TIERS, SloTier

__all__ = ["analyse_run"]


def analyse_run(
    run: RunData, *, seed: int = 0, tiers: tuple[SloTier, ...] = DEFAULT_TIERS,
    rules: Rules = DEFAULT_RULES,
) -> RunSummary:
    """Measure and summarise one run, and stamp its validity."""
    s = summarize(measure(run), seed=seed, tiers=tiers,
                  max_failure_share=rules.max_failure_share)
    s.validity = assess_run(run, rules=rules, summary=s)
    return s
