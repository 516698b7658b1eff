"""One run, analysed: its summary with its validity verdict (what summary.json holds).

The one entry point for analysing one run: a run's close (``replay.load``) calls it
once and hands the result to every later step (client health, validity, scenario,
the closing lines); the twin's levels and the held-out checks call it on their runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.judge._rules import DEFAULT_RULES, Rules
from analysis.judge._validity import assess_run
from analysis.metrics import RunSummary, measure, summarize
from analysis.read import RunData
from analysis.schema import DEFAULT_TIERS, SloTier, Validity, ValidityReason

__all__ = ["analyse_run", "with_caveats"]


def analyse_run(
    run: RunData, *, seed: int = 0, tiers: tuple[SloTier, ...] = DEFAULT_TIERS,
    rules: Rules = DEFAULT_RULES, bootstrap: bool = True, assess: bool = True,
    caveats: Sequence[ValidityReason] = (),
) -> RunSummary:
    """Measure and summarise one run and, unless ``assess`` is off, stamp its validity
    (plus ``caveats``: what the replay knew before the run started).

    ``bootstrap=False`` skips the intervals (a quick look, or a figure whose interval
    nobody reads)."""
    s = summarize(measure(run), seed=seed, tiers=tiers, bootstrap=bootstrap,
                  max_failure_share=rules.max_failure_share)
    if assess:
        s.validity = with_caveats(assess_run(run, rules=rules, summary=s), caveats)
    return s


def with_caveats(found: Validity, caveats: Sequence[ValidityReason]) -> Validity:
    """A verdict with caveats added: a valid run becomes one with caveats."""
    if not caveats:
        return found
    verdict = "caveats" if found.verdict == "valid" else found.verdict
    return Validity(verdict=verdict, reasons=[*found.reasons, *caveats])
