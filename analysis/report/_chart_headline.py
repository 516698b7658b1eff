"""The decision chart: P90 interactivity and P90 TTFT against load, per arm.

One line per arm (or per history entry and arm) with its 95% interval as a
band; each SLO tier's interactivity floor and TTFT ceiling drawn and labelled,
so the reader sees where each arm crosses each tier. Levels are placed by
their number (a log axis when they span a wide range), never as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analysis.metrics import RunSummary
from analysis.report._chart_base import axis_label, color, figure, legend_outside, render, safe
from analysis.report._format import time_unit
from analysis.schema import LoadLevel, SloTier

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["Series", "headline_chart"]


@dataclass(frozen=True)
class Series:
    """One line of the headline chart: a name and its level summaries with their loads."""

    name: str
    summaries: list[RunSummary]
    color_index: int
    dashed: bool = False
    marker: str = "o"
    loads: list[LoadLevel] | None = None
    """The load of each summary; None: its users."""

    def points(self) -> list[tuple[LoadLevel, RunSummary]]:
        loads = self.loads or [LoadLevel(value=float(s.users)) for s in self.summaries]
        return sorted(zip(loads, self.summaries, strict=True), key=lambda p: p[0].value)


def _points(s: Series, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    xs, ys, lo, hi = [], [], [], []
    for load, summ in s.points():
        d = getattr(summ, metric)
        v = d.p90
        if v is None or not np.isfinite(v):
            continue
        ci = d.p90_ci
        xs.append(load.value)
        ys.append(v)
        lo.append(ci[0] if ci else np.nan)
        hi.append(ci[1] if ci else np.nan)
    return np.array(xs, float), np.array(ys, float), np.array(lo, float), np.array(hi, float)


def _x_axis(ax: Axes, levels: list[float], xlabel: str) -> None:
    if levels and min(levels) > 0 and max(levels) / min(levels) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([f"{u:g}" for u in levels])
    ax.minorticks_off()
    ax.set_xlabel(xlabel)


def _limit_lines(ax: Axes, values: list[float], texts: list[str], style: str) -> list[str]:
    """Each limit as a labelled line; a limit far above the data is named, not drawn."""
    top = float(ax.dataLim.y1) if ax.has_data() and np.isfinite(ax.dataLim.y1) else 0.0
    above, drawn = [], []
    for v, text in zip(values, texts, strict=True):
        if top > 0 and v > 2.5 * top:
            above.append(text)
            continue
        drawn.append(v)
        ax.axhline(v, color="0.35", linestyle=style, linewidth=0.9, zorder=1)
        ax.annotate(safe(text), xy=(1.0, v), xycoords=("axes fraction", "data"),
                    xytext=(-3, 2), textcoords="offset points", ha="right", va="bottom",
                    fontsize=7, color="0.25")
    ax.set_ylim(0, max([top, *drawn]) * 1.12 or 1.0)
    return above


def _plot(ax: Axes, series: Sequence[Series], metric: str, scale: float) -> None:
    for s in series:
        x, y, lo, hi = _points(s, metric)
        if not len(x):
            continue
        c = color(s.color_index)
        ax.plot(x, y * scale, marker=s.marker, markersize=4, color=c, label=safe(s.name),
                linestyle="--" if s.dashed else "-", zorder=3)
        band = np.isfinite(lo) & np.isfinite(hi)
        if band.any():
            ax.fill_between(x[band], lo[band] * scale, hi[band] * scale, color=c, alpha=0.15,
                            linewidth=0, zorder=2)


def _off_note(off: list[str]) -> str:
    return ("\nfar above the data, not drawn: " + "; ".join(off)) if off else ""


def headline_chart(series: Sequence[Series], tiers: Sequence[SloTier]) -> str:
    """Two panels sharing the load axis: P90 interactivity (floors) and P90 TTFT (ceilings)."""
    fig, (ax1, ax2) = figure(rows=2, height=2.9)
    unit, scale = time_unit("ttft_due")
    _plot(ax1, series, "interactivity", 1.0)
    _plot(ax2, series, "ttft_due", scale)
    floors = sorted({t.floor_tok_s for t in tiers})
    off1 = _limit_lines(ax1, floors, [f"tier floor {f:g} tok/s/user" for f in floors], "--")
    ceilings = sorted({t.ttft_s for t in tiers})
    off2 = _limit_lines(ax2, [c * scale for c in ceilings],
                        [f"tier ceiling TTFT {c:g} s" for c in ceilings], ":")
    loads = [load for ser in series for load, _ in ser.points()]
    levels = sorted({load.value for load in loads})
    for ax in (ax1, ax2):
        _x_axis(ax, levels, axis_label({load.kind for load in loads}))
    ax1.set_ylabel("P90 interactivity (tok/s/user)")
    ax1.set_title("P90 interactivity vs load (higher is better; band: 95% interval; "
                  "dashed: SLO floors)" + _off_note(off1))
    ax2.set_ylabel(f"P90 TTFT from schedule ({unit})")
    ax2.set_title("P90 TTFT from schedule vs load (lower is better; dotted: SLO ceilings)"
                  + _off_note(off2))
    legend_outside(ax1, fontsize=8)
    legend_outside(ax2, fontsize=8)
    return render(fig)
