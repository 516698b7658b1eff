"""Stamps that summarise a run, from its evidence: whether it satisfied its
``--scenario``. Judged when the run closes (from the close's one analysis) and again
whenever runs are read for a report, so a hand-edited ``scenario_satisfied`` is never
repeated."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from analysis import RunData, RunManifest, RunSummary
from analysis.judge import analyse_run
from replay.load._scenario import judge_scenario
from traces import TraceError, read_header

__all__ = ["rejudge_scenarios", "stamp_run_scenario"]


def stamp_run_scenario(manifest: RunManifest, run: RunData | None,
                       summary: RunSummary | None) -> None:
    """Stamp whether the run satisfied its ``--scenario`` (``scenario_satisfied``,
    with the reasons in ``scenario_notes``) from its records and their summary (None
    when they could not be read); nothing without a scenario."""
    if manifest.scenario is None:
        return
    share: float | None = None
    uncounted = 0
    if run is not None and summary is not None:
        share = summary.counts.failure_share
        r = run.requests
        done = (r.phase == "measure") & (r.status == "ok")
        uncounted = int((done & (r.prompt_tokens_server < 0)).sum())
    header = None
    if manifest.workload.path:
        with contextlib.suppress(OSError, TraceError):  # moved or gone: judged without it
            header = read_header(manifest.workload.path)
    window = manifest.window
    verdict = judge_scenario(
        manifest.scenario, manifest.load, source=manifest.workload.source,
        header_params=header.params if header is not None else {},
        max_context=header.max_context if header is not None else None,
        window_s=(window.end_s - window.start_s) if window is not None else None,
        failure_share=share, interrupted=manifest.interrupted,
        workload=manifest.workload.path or "workload", uncounted=uncounted)
    manifest.scenario_satisfied = verdict.satisfied
    manifest.scenario_notes = list(verdict.notes)


def rejudge_scenarios(runs: Sequence[RunData]) -> None:
    """Re-stamp each read run's scenario verdict from its evidence (settings, window,
    records, workload): a stamp that summarises a run is recomputed, never read back
    (a hand-edited ``scenario_satisfied: true`` on a 2-s run is not repeated)."""
    for run in runs:
        if run.manifest.scenario is not None:
            summary = analyse_run(run, bootstrap=False, tiers=(), assess=False)
            stamp_run_scenario(run.manifest, run, summary)
