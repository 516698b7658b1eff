"""One close per run: the records read once, analysed once, every later step fed from it.

When the lanes are done, :func:`seal` closes the store, reads the run back once
(``RecordStore.read``: the run directory, or the twin's records in memory), stamps
the facts validity is judged on (client health from the window's schedule lags,
coverage, the server watch) and writes the manifest closed. Unless a lane crashed,
:func:`judge` then analyses that same read once (``analysis.judge.analyse_run``:
summary and validity) and judges the run's scenario from it; the
:class:`ClosedRun` it returns carries the read and the analysis on to the caller
(``agentreplay run``'s closing lines, the twin's level) so nobody reads the run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from analysis import ResultError, RunData, RunManifest, RunSummary, Validity, ValidityReason
from analysis.judge import DEFAULT_RULES, Rules, analyse_run
from analysis.schema import DEFAULT_TIERS, Coverage, EarlyStop, ServerWatch, SloTier
from replay.load._executor import ExecOutcome
from replay.load._health import client_health
from replay.load._scenario import idle_cap_info
from replay.load._settings import RunSettings
from replay.load._stamps import stamp_run_scenario
from replay.load._store import RecordStore
from replay.load._writer import close_manifest

__all__ = ["Analysis", "ClosedRun", "ServerWatchHook", "judge", "seal", "window_lags"]


class ServerWatchHook(Protocol):
    """What a run reads of a server watch (``replay.servers.launch.ServerWatcher`` fits)."""

    died: bool
    detail: str | None


@dataclass(frozen=True)
class Analysis:
    """How the close analyses its run (``analysis.judge.analyse_run``'s options). A
    real run's close takes a quick look (no bootstrap, the default tiers); the twin's
    levels ask for their own tiers, seed and intervals."""

    seed: int = 0
    tiers: tuple[SloTier, ...] = DEFAULT_TIERS
    rules: Rules = DEFAULT_RULES
    bootstrap: bool = False


@dataclass(frozen=True)
class ClosedRun:
    """A finished run: where its results are, its closing manifest, and the close's one
    read and analysis of it (None when its records could not be read)."""

    dir: Path
    manifest: RunManifest
    run: RunData | None = None
    summary: RunSummary | None = None
    """The analysis (validity stamped); None when the records could not be read."""
    records: int = 0
    """Records the run stored."""


def window_lags(run: RunData | None) -> list[float]:
    """``sent_s - due_s`` of the requests sent in the window (none when unreadable)."""
    if run is None:
        return []
    r = run.requests
    lags: list[float] = (r.sent_s - r.due_s)[r.phase == "measure"].tolist()
    return lags


def seal(store: RecordStore, manifest: RunManifest, outcome: ExecOutcome,
         settings: RunSettings, watch: ServerWatchHook | None) -> RunData | ResultError:
    """Close the store, read the run once, stamp the facts validity is judged on and
    write the manifest closed; the read (or why it failed) goes on to :func:`judge`."""
    store.close()
    try:
        read: RunData | ResultError = store.read()
    except ResultError as exc:
        read = exc
    manifest.warnings.extend(outcome.warnings)
    manifest.worker_info = outcome.workers
    run = read if isinstance(read, RunData) else None
    manifest.client_health = client_health(outcome.loops, window_lags(run))
    manifest.coverage = Coverage(lanes=outcome.lanes,
                                 lanes_done_before_window_end=outcome.done_early)
    manifest.idle_cap = idle_cap_info(settings.scenario, settings.workers > 1,
                                      outcome.idle_shifts)
    if watch is not None:
        manifest.server_watch = ServerWatch(server_died=bool(watch.died), detail=watch.detail)
    end = outcome.window_end
    close_manifest(manifest, warmup_s=settings.warmup_s,
                   duration_s=settings.duration_s if end is None else end.window_s,
                   interrupted=outcome.interrupted, crash=outcome.crash)
    if end is not None:
        manifest.early_stop = EarlyStop(planned_s=settings.duration_s, window_s=end.window_s,
                                        rule=end.rule, why=end.why)
    store.write_manifest(manifest)
    return read


def judge(store: RecordStore, manifest: RunManifest, read: RunData | ResultError,
          caveats: Sequence[ValidityReason], how: Analysis, out: Path) -> ClosedRun:
    """Analyse the sealed run once: its validity (with the ``caveats`` the replay knew
    before it started; an unreadable run is invalid) and its scenario, both stamped in
    the manifest, written once more."""
    run: RunData | None = None
    summary: RunSummary | None = None
    if isinstance(read, ResultError):
        manifest.validity = Validity(verdict="invalid", reasons=[ValidityReason(
            code="run_unreadable", severity="invalid", message=str(read))])
    else:
        run = read.with_manifest(manifest)
        summary = analyse_run(run, seed=how.seed, tiers=how.tiers, rules=how.rules,
                              bootstrap=how.bootstrap, caveats=caveats)
        manifest.validity = summary.validity
    stamp_run_scenario(manifest, run, summary)
    store.write_manifest(manifest)
    return ClosedRun(dir=out, manifest=manifest, run=run, summary=summary,
                     records=store.records)
