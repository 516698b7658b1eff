"""Stamps that summarise a run, from its evidence: whether it satisfied its
``--scenario``. Judged when the run closes (from the close's one analysis) and again
whenever runs are read for a report, so a hand-edited ``scenario_satisfied`` is never
repeated. The judgement is ``analysis.judge``'s (pure); here only the workload
header is read, the one input that lives in another file."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from analysis import RunData, RunManifest, RunSummary
from analysis.judge import analyse_run, judge_run_scenario, stamp_scenario
from replay.load._scenario import scenario_rules
from traces import TraceError, read_header

__all__ = ["stamp_run_scenario", "rejudge_scenarios"]


def stamp_run_scenario(manifest: RunManifest, run: RunData | None,
                          summary: RunSummary | None) -> None:
    """Stamp whether a run satisfied its ``--scenario`` (``scenario_satisfied``, with
    the reasons in ``scenario_notes``) from its records and their summary (None when
    they could not be read); nothing without a scenario."""
    if manifest.scenario is None:
        return
    stamp_scenario(manifest, judge_run_scenario(manifest, run, summary,
                                                **_header_facts(manifest)))


def rejudge_scenarios(runs: Sequence[RunData]) -> None:
    """Re-stamp each read run's scenario verdict from its evidence (settings, window,
    records, workload): a stamp that summarises a run is recomputed, never read back
    (a hand-edited ``scenario_satisfied: true`` on a 2-s run is not repeated)."""
    for run in runs:
        name = run.manifest.scenario
        if name is not None:
            scenario_rules(name)  # an unknown name: one line, as when the run was asked
            summary = analyse_run(run, bootstrap=False, tiers=(), assess=False)
            stamp_run_scenario(run.manifest, run, summary)


def _header_facts(manifest: RunManifest) -> dict[str, Any]:
    """The workload header's ``params`` and ``max_context``, when it can still be read
    (moved or gone: judged without it)."""
    if manifest.workload.path:
        with contextlib.suppress(OSError, TraceError):
            header = read_header(manifest.workload.path)
            return {"header_params": header.params, "max_context": header.max_context}
    return {}
