"""The decision chart: P90 interactivity and P90 TTFT against load, per arm.

One line per arm (or per history entry and arm) with its 95% interval as a
band; each SLO tier's interactivity floor and TTFT ceiling drawn and labelled,
so the reader sees where each arm crosses each tier. On each floor, each arm's
capacity bracket is drawn in a panel of its own below, as a span on the load axis
from the largest level up to which every level met the tier to the first level
that failed (the same rows the capacity table prints, so chart and table cannot
disagree); never as a marker in a data panel, where it would read as a measured
value. Levels are placed by their number (a log axis when
they span a wide range), never as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analysis.judge import CapacityRow
from analysis.metrics import RunSummary, direction_text, metric
from analysis.report._chart_base import (
    axis_label,
    color,
    figure,
    legend_outside,
    level_points,
    render,
    safe,
)
from analysis.report._format import display_label, time_unit
from analysis.schema import LoadLevel, SloTier

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["Series", "capacity_marks", "headline_chart"]

_INTER, _TTFT = "interactivity.p90", "ttft_due.p90"
"""The two panels' metrics (catalogue keys): the SLO tiers' floor and ceiling."""


def _floor_text(floor: float) -> str:
    """``tier floor 30 tok/s/user``: a floor's line label (and how an undrawn one is named)."""
    return f"tier floor {floor:g} {metric(_INTER).unit}"


@dataclass(frozen=True)
class Series:
    """One line of the headline chart: a name and its level summaries."""

    name: str
    summaries: list[RunSummary]
    color_index: int
    dashed: bool = False
    marker: str = "o"
    capacity: tuple[CapacityRow, ...] = ()
    """This line's capacity rows (one per tier), drawn as spans on the load axis."""

    def points(self) -> list[tuple[LoadLevel, RunSummary]]:
        return level_points(self.summaries)


def _points(s: Series, quantity: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    xs, ys, lo, hi = [], [], [], []
    for load, summ in s.points():
        d = getattr(summ, quantity)
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


def _plot(ax: Axes, series: Sequence[Series], quantity: str, scale: float) -> None:
    for s in series:
        x, y, lo, hi = _points(s, quantity)
        if not len(x):
            continue
        c = color(s.color_index)
        ax.plot(x, y * scale, marker=s.marker, markersize=4, color=c, label=safe(s.name),
                linestyle="--" if s.dashed else "-", zorder=3)
        band = np.isfinite(lo) & np.isfinite(hi)
        if band.any():
            ax.fill_between(x[band], lo[band] * scale, hi[band] * scale, color=c, alpha=0.15,
                            linewidth=0, zorder=2)


def capacity_marks(series: Sequence[Series], tiers: Sequence[SloTier]
                   ) -> list[tuple[int, int, float | None, float | None]]:
    """(series index, tier index, passed level, failed level) per marked bracket: what
    the chart draws, taken from the series' capacity rows unchanged."""
    order = {t: k for k, t in enumerate(tiers)}
    return [(i, order[r.tier], r.bracket.passed, r.bracket.failed)
            for i, s in enumerate(series) for r in s.capacity if r.tier in order]


def _end(v: float | None) -> str:
    return "open" if v is None else f"{v:g}"


def _bracket_panel(ax: Axes, series: Sequence[Series], tiers: Sequence[SloTier],
                   edges: tuple[float, float]) -> None:
    """Each capacity bracket as a span on the load axis, in a panel of its own (one row
    per line and tier): from the largest level that met the tier to the first that
    failed, open-ended (an arrow to the edge) when the sweep did not reach either. No
    marker sits where a measured value could be read."""
    marks = capacity_marks(series, tiers)
    lo_edge, hi_edge = edges
    names = []
    for row, (i, k, lo, hi) in enumerate(marks):
        y = len(marks) - 1 - row
        c = color(series[i].color_index)
        start, stop = (lo if lo is not None else lo_edge), (hi if hi is not None else hi_edge)
        ax.barh(y, stop - start, left=start, height=0.55, color=c, alpha=0.35,
                edgecolor=c, linewidth=1.0, gid=f"ar-cap-{i}-{k}-span-{_end(lo)}-{_end(hi)}")
        if lo is None:
            ax.annotate("", xy=(lo_edge, y), xytext=(stop, y),
                        arrowprops={"arrowstyle": "->", "color": c, "lw": 1.2})
        if hi is None:
            ax.annotate("", xy=(hi_edge, y), xytext=(start, y),
                        arrowprops={"arrowstyle": "->", "color": c, "lw": 1.2})
        names.append(f"{series[i].name} @ {tiers[k].floor_tok_s:g}")
    ax.set_yticks(range(len(marks)))
    ax.set_yticklabels([safe(n) for n in reversed(names)], fontsize=7)
    ax.set_ylim(-0.6, max(len(marks), 1) - 0.4)
    ax.grid(axis="y", visible=False)
    ax.set_title("Capacity brackets on the load axis (span: met at its left end, first "
                 "failed at its right end; arrow: beyond the sweep), per line @ tier floor",
                 fontsize=8)


def _off_note(off: list[str]) -> str:
    return ("\nfar above the data, not drawn: " + "; ".join(off)) if off else ""


def headline_chart(series: Sequence[Series], tiers: Sequence[SloTier]) -> str:
    """Two panels sharing the load axis: P90 interactivity (floors) and P90 TTFT (ceilings)."""
    marked = any(s.capacity for s in series)
    n_marks = len(capacity_marks(series, tiers))
    heights = (2.9, 2.9) + ((0.45 + 0.2 * n_marks,) if marked else ())
    fig, axes = figure(rows=len(heights), height=2.9, heights=heights)
    ax1, ax2 = axes[0], axes[1]
    scale = time_unit("ttft_due")[1]
    _plot(ax1, series, "interactivity", 1.0)
    _plot(ax2, series, "ttft_due", scale)
    floors = sorted({t.floor_tok_s for t in tiers})
    off1 = _limit_lines(ax1, floors, [_floor_text(f) for f in floors], "--")
    ceilings = sorted({t.ttft_s for t in tiers})
    off2 = _limit_lines(ax2, [c * scale for c in ceilings],
                        [f"tier ceiling TTFT {c:g} s" for c in ceilings], ":")
    loads = [load for ser in series for load, _ in ser.points()]
    levels = sorted({load.value for load in loads})
    for ax in axes:
        _x_axis(ax, levels, axis_label({load.kind for load in loads}))
    if marked:
        edges = ax1.get_xlim()
        _bracket_panel(axes[2], series, tiers, (float(edges[0]), float(edges[1])))
        axes[2].set_xlim(*edges)
    ax1.set_ylabel(display_label(_INTER))
    ax1.set_title(f"{metric(_INTER).label} vs load ({direction_text(_INTER)}; band: 95% "
                  "interval; dashed: SLO floors)"
                  + _off_note(off1))
    ax2.set_ylabel(display_label(_TTFT))
    ax2.set_title(f"{metric(_TTFT).label} vs load ({direction_text(_TTFT)}; dotted: SLO "
                  "ceilings)" + _off_note(off2))
    legend_outside(ax1, fontsize=8)
    legend_outside(ax2, fontsize=8)
    return render(fig)
