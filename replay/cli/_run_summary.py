"""The few lines ``agentreplay run`` ends with: what the window measured, so a
user sees the result without opening the report, and the command that writes it.
They come from the run's close (``replay.load.ClosedRun``: its one read and analysis
of the records), not from reading the run directory again."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.text import plural

if TYPE_CHECKING:
    from analysis import RunData, RunSummary
    from replay.load import ClosedRun

__all__ = ["acceptance_line", "run_summary_lines"]

_OUTCOMES = ("error", "timeout", "incomplete", "cancelled", "lost")


def run_summary_lines(closed: ClosedRun | Path) -> list[str]:
    """Requests by outcome in the window, P90 interactivity and P90 TTFT (no
    bootstrap: a quick look; the report has the intervals), then the report hint.

    ``closed`` is the run's close (its read and analysis, passed on), or a run
    directory written before, read and analysed here; none when the close could
    not read the records."""
    if isinstance(closed, Path):
        from analysis import read_run
        from analysis.judge import analyse_run

        run = read_run(closed)
        return _lines(closed, run, analyse_run(run, bootstrap=False, assess=False))
    if closed.run is None or closed.summary is None:
        return []
    return _lines(closed.dir, closed.run, closed.summary)


def _lines(out: Path, run: RunData, s: RunSummary) -> list[str]:
    c = s.counts
    outcomes = [f"{c.ok} ok"] + [f"{getattr(c, name)} {name}" for name in _OUTCOMES
                                 if getattr(c, name)]
    requests = "request" if c.in_window == 1 else "requests"
    sim = "[SIMULATED] " if run.manifest.simulated else ""
    inter, ttft = s.interactivity.p90, s.ttft_due.p90
    lines = [
        f"{sim}window: {c.in_window} {requests} ({', '.join(outcomes)}); "
        f"P90 interactivity {_number(inter, ' tok/s/user')}; P90 TTFT from schedule "
        f"{_number(None if ttft is None else ttft * 1000.0, ' ms')}",
        *_fleet_line(run),
    ]
    if c.incomplete:
        lines.append(f"cut by the drain ({run.manifest.load.drain_s:g} s): "
                     f"{plural(c.incomplete, 'request')}, {c.cut_received:,} of "
                     f"{c.cut_asked:,} tokens asked received")
    spec = acceptance_line(s.speculation.acceptance_length,
                           s.speculation.claimed_acceptance_length)
    if spec:
        lines.append(spec)
    return lines + [f"full report: agentreplay report {shlex.quote(str(out))}"]


def acceptance_line(measured: float | None, claimed: float | None) -> str:
    """The measured speculative acceptance length beside the claimed one ('' if neither)."""
    if measured is None and claimed is None:
        return ""
    got = f"{measured:.2f}" if measured is not None else "n/a (no spec_decode counters)"
    said = f" (claimed by the server/profile: {claimed:.2f})" if claimed is not None else ""
    return f"speculative acceptance length: measured {got}{said}"


def _fleet_line(run: RunData) -> list[str]:
    """A fleet's window requests by replica (how evenly the routing spread them)."""
    import numpy as np

    reps = run.manifest.replicas
    if not reps:
        return []
    r = run.requests
    counts = np.bincount(r.replica[r.phase == "measure"].astype(np.int64),
                         minlength=len(reps))
    shown = ", ".join(f"{rep.target} {int(n)}" for rep, n in zip(reps, counts, strict=False))
    return [f"fleet of {len(reps)} replicas ({run.manifest.routing}): window requests "
            f"{shown}"]


def _number(value: float | None, unit: str) -> str:
    """Three significant figures with the unit, or n/a when nothing was measured."""
    if value is None:
        return "n/a"
    return f"{value:,.3g}{unit}" if abs(value) < 1000 else f"{value:,.0f}{unit}"
