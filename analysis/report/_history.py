"""History view: several comparisons (or runs) of one workload, side by side.

Each entry is one result directory given to ``report``, analysed on its own
(``compare_runs``); the view puts their decision numbers next to each other:
this week's server against last week's, or several configurations. Entries
must have replayed the same workload (equal fingerprints); mixed workloads
are refused unless explicitly allowed, and then every page says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.judge import Comparison
from analysis.read import RunData
from analysis.report._chart_headline import Series, headline_chart
from analysis.report._chart_pareto import pareto_chart
from analysis.report._decide import decide
from analysis.report._decision import (
    SUMMARY_METRICS,
    level_label,
    summary_cell,
    summary_columns,
    validity_view,
)
from analysis.report._report import _defang, _environment
from analysis.schema import ResultError

__all__ = ["HistoryEntry", "check_history", "entry_names", "render_history"]


@dataclass(frozen=True)
class HistoryEntry:
    """One result directory of a history: its name, runs and their comparison."""

    name: str
    path: str
    comparison: Comparison
    runs: list[RunData]

    @property
    def fingerprints(self) -> list[str]:
        return sorted({r.manifest.workload.fingerprint for r in self.runs})

    @property
    def started(self) -> str:
        return min((r.manifest.started_at for r in self.runs), default="")


def entry_names(paths: Sequence[str]) -> list[str]:
    """Short, distinct names for result directories (their last part, else the full path)."""
    short = [Path(p).resolve().name or str(p) for p in paths]
    if len(set(short)) == len(short):
        return short
    return [str(Path(p)) for p in paths]


def check_history(entries: Sequence[HistoryEntry], *, allow_mixed: bool) -> bool:
    """Whether the entries mix workloads; refuses a mix unless ``allow_mixed``."""
    first = entries[0]
    mixed = [e for e in entries if e.fingerprints != first.fingerprints]
    if mixed and not allow_mixed:
        e = mixed[0]
        raise ResultError(
            f"{first.name} and {e.name} replayed different workloads (fingerprint "
            f"{', '.join(first.fingerprints)} vs {', '.join(e.fingerprints)}); "
            "pass --allow-mixed to show them side by side, labelled as mixed",
            field="allow-mixed")
    return bool(mixed)


def _summary_rows(entries: Sequence[HistoryEntry]) -> list[dict[str, Any]]:
    """Per level (in numeric order): one row per entry and arm."""
    keyed: dict[tuple[str, float], tuple[str, list[tuple[str, Any]]]] = {}
    for e in entries:
        for lv in e.comparison.levels:
            key = (str(lv.load.kind), float(lv.load.value))
            label = level_label(lv)
            for arm in e.comparison.arms:
                if arm in lv.arms:
                    keyed.setdefault(key, (label, []))[1].append(
                        (f"{e.name} / {arm}" if arm else e.name, lv.arms[arm]))
    rows: list[dict[str, Any]] = []
    for key in sorted(keyed):
        label, items = keyed[key]
        for i, (name, s) in enumerate(items):
            rows.append({"level": label, "span": len(items) if i == 0 else 0, "arm": name,
                         "ratio": False,
                         "cells": [summary_cell(s, k) for k in SUMMARY_METRICS]})
    return rows


def _capacity(entries: Sequence[HistoryEntry]) -> dict[str, Any]:
    """Each entry's capacity bracket per tier and arm, as measured (no interpolation)."""
    cols = [(e, arm) for e in entries for arm in e.comparison.arms]
    tiers: dict[str, dict[tuple[str, str], str]] = {}
    for e in entries:
        for r in e.comparison.capacity:
            tiers.setdefault(r.tier.label, {})[(e.name, r.arm)] = r.bracket.text(r.load_kind)
    return {"columns": [f"{e.name} / {a}" if a else e.name for e, a in cols],
            "rows": [(t, [cells.get((e.name, a), "not measured") for e, a in cols])
                     for t, cells in tiers.items()]}


_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def history_series(entries: Sequence[HistoryEntry]) -> list[Series]:
    """One line per (entry, arm), each its own colour; the arm's line style (baseline
    solid) and the entry's marker tell them apart where colours repeat, so no line
    hides another (colouring by entry drew an entry's arms alike)."""
    series: list[Series] = []
    for i, e in enumerate(entries):
        for j, arm in enumerate(e.comparison.arms):
            levels = [lv for lv in e.comparison.levels if arm in lv.arms]
            series.append(Series(
                name=f"{e.name} / {arm}" if arm else e.name, color_index=len(series),
                dashed=j > 0, marker=_MARKERS[i % len(_MARKERS)],
                summaries=[lv.arms[arm] for lv in levels],
                capacity=tuple(r for r in e.comparison.capacity if r.arm == arm)))
    return series


def _chart(entries: Sequence[HistoryEntry]) -> str:
    tiers = list({t.name: t for e in entries for t in e.comparison.tiers}.values())
    return headline_chart(history_series(entries), tiers)


def _pareto(entries: Sequence[HistoryEntry]) -> str:
    tiers = list({t.name: t for e in entries for t in e.comparison.tiers}.values())
    return pareto_chart(history_series(entries), tiers)


def _when(iso: str) -> str:
    """``2026-12-05T05:08:39.919232Z`` as ``2026-12-05 05:08 UTC``: the entry column is
    narrow, and a raw ISO stamp broke at its hyphens."""
    date, sep, clock = iso.partition("T")
    if not sep or len(clock) < 5 or not clock.endswith(("Z", "+00:00")):
        return iso
    return f"{date} {clock[:5]} UTC"


def render_history(entries: Sequence[HistoryEntry], *, mixed: bool = False,
                   charts: bool = True) -> str:
    """The history view as one self-contained HTML string."""
    rows = [{"name": e.name, "path": e.path, "started": _when(e.started),
             "arms": ", ".join(a or "(unlabelled)" for a in e.comparison.arms),
             "decision": decide(e.comparison).lines(),
             "validity": validity_view(e.comparison, e.runs),
             "fingerprints": ", ".join(e.fingerprints), "runs": len(e.runs),
             "model": e.runs[0].manifest.model if e.runs else "",
             "fair": e.comparison.fairness.sentence if len(e.comparison.arms) > 1 else ""}
            for e in entries]
    context = {
        "entries": rows,
        "simulated": any(e.comparison.simulated for e in entries),
        "mixed": mixed,
        "summary": {"columns": summary_columns(),
                    "rows": _summary_rows(entries)},
        "capacity": _capacity(entries),
        "headline_svg": _chart(entries) if charts else "",
        "pareto_svg": _pareto(entries) if charts else "",
    }
    html = _environment().get_template("history.html.j2").render(**context)
    return _defang(html)
