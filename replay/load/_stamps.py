"""Stamps that summarise a run, from its evidence: whether it satisfied its
``--scenario``. Judged when the run closes and again whenever runs are read for a
report, so a hand-edited ``scenario_satisfied`` is never repeated."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from analysis import ResultError, RunData, RunManifest, read_run
from replay.load._scenario import judge_scenario
from traces import TraceError, read_header

__all__ = ["judge_run_scenario", "rejudge_scenarios"]


def judge_run_scenario(manifest: RunManifest, run_dir: Path) -> None:
    """Stamp whether the run satisfied its ``--scenario`` (``scenario_satisfied``,
    with the reasons in ``scenario_notes``); nothing without a scenario."""
    if manifest.scenario is None:
        return
    try:
        run: RunData | None = read_run(run_dir)
    except ResultError:
        run = None
    _stamp_scenario(manifest, run)


def rejudge_scenarios(runs: Sequence[RunData]) -> None:
    """Re-stamp each read run's scenario verdict from its evidence (settings, window,
    records, workload): a stamp that summarises a run is recomputed, never read back
    (a hand-edited ``scenario_satisfied: true`` on a 2-s run is not repeated)."""
    for run in runs:
        if run.manifest.scenario is not None:
            _stamp_scenario(run.manifest, run)


def _stamp_scenario(manifest: RunManifest, run: RunData | None) -> None:
    from analysis import measure, summarize

    assert manifest.scenario is not None
    share: float | None = None
    uncounted = 0
    if run is not None:
        share = summarize(measure(run), bootstrap=False, tiers=()).counts.failure_share
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
