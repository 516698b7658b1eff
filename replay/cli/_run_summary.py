"""The few lines ``agentreplay run`` ends with: what the window measured, so a
user sees the result without opening the report, and the command that writes it."""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = ["run_summary_lines"]

_OUTCOMES = ("error", "timeout", "incomplete", "cancelled", "lost")


def run_summary_lines(out: Path) -> list[str]:
    """Requests by outcome in the window, P90 interactivity and P90 TTFT (no
    bootstrap: a quick look; the report has the intervals), then the report hint."""
    from analysis import measure, read_run, summarize

    run = read_run(out)
    s = summarize(measure(run), bootstrap=False)
    c = s.counts
    outcomes = [f"{c.ok} ok"] + [f"{getattr(c, name)} {name}" for name in _OUTCOMES
                                 if getattr(c, name)]
    requests = "request" if c.in_window == 1 else "requests"
    sim = "[SIMULATED] " if run.manifest.simulated else ""
    inter, ttft = s.interactivity.p90, s.ttft.p90
    return [
        f"{sim}window: {c.in_window} {requests} ({', '.join(outcomes)}); "
        f"P90 interactivity {_number(inter, ' tok/s/user')}; P90 TTFT {_number(ttft, ' s')}",
        f"full report: agentreplay report {shlex.quote(str(out))}",
    ]


def _number(value: float | None, unit: str) -> str:
    """Three significant figures with the unit, or n/a when nothing was measured."""
    if value is None:
        return "n/a"
    return f"{value:,.3g}{unit}" if abs(value) < 1000 else f"{value:,.0f}{unit}"
