"""The decision chart: P90 interactivity and P90 TTFT against load, per arm.

One line per arm (or per history entry and arm) with its 95% interval as a
band; each SLO tier's interactivity floor and TTFT ceiling drawn and labelled,
so the reader sees where each arm crosses each tier. On each floor, each arm's
capacity bracket is marked at the measured levels it comes from (filled circle:
the largest level up to which every level met the tier; cross: the first level
that failed; joined by a bar), the same rows the capacity table prints, so chart
and table cannot disagree. Levels are placed by their number (a log axis when
they span a wide range), never as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analysis.judge import CapacityRow
from analysis.metrics import RunSummary
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
from analysis.schema import LoadLevel, SloTier, direction_text, metric

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
    """This line's capacity rows (one per tier), marked on the tier floors."""

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


def _mark_brackets(ax: Axes, series: Sequence[Series], tiers: Sequence[SloTier],
                   off: list[str]) -> None:
    from matplotlib.transforms import blended_transform_factory, offset_copy

    drawn_floor = {t.floor_tok_s for t in tiers
                   if _floor_text(t.floor_tok_s) not in off}
    per_floor: dict[float, int] = {}
    for i, k, lo, hi in capacity_marks(series, tiers):
        floor = tiers[k].floor_tok_s
        n = per_floor.get(floor, 0)
        per_floor[floor] = n + 1
        base = (ax.transData if floor in drawn_floor
                else blended_transform_factory(ax.transData, ax.transAxes))
        y = floor if floor in drawn_floor else 0.97
        tr = offset_copy(base, fig=ax.get_figure(root=True), x=0, y=-4.0 * (n + 1),
                         units="points")
        c = color(series[i].color_index)
        gid = f"ar-cap-{i}-{k}"
        if lo is not None and hi is not None:
            ax.plot([lo, hi], [y, y], color=c, linewidth=2.2, alpha=0.7, transform=tr,
                    zorder=4, gid=f"{gid}-bar", solid_capstyle="butt")
        if lo is not None:
            ax.plot([lo], [y], marker="o", markersize=5, color=c, linestyle="none",
                    transform=tr, zorder=5, gid=f"{gid}-pass-{lo:g}")
        if hi is not None:
            ax.plot([hi], [y], marker="x", markersize=6, markeredgewidth=1.6, color=c,
                    linestyle="none", transform=tr, zorder=5, gid=f"{gid}-fail-{hi:g}")


def _off_note(off: list[str]) -> str:
    return ("\nfar above the data, not drawn: " + "; ".join(off)) if off else ""


def headline_chart(series: Sequence[Series], tiers: Sequence[SloTier]) -> str:
    """Two panels sharing the load axis: P90 interactivity (floors) and P90 TTFT (ceilings)."""
    fig, (ax1, ax2) = figure(rows=2, height=2.9)
    scale = time_unit("ttft_due")[1]
    _plot(ax1, series, "interactivity", 1.0)
    _plot(ax2, series, "ttft_due", scale)
    floors = sorted({t.floor_tok_s for t in tiers})
    off1 = _limit_lines(ax1, floors, [_floor_text(f) for f in floors], "--")
    _mark_brackets(ax1, series, tiers, off1)
    ceilings = sorted({t.ttft_s for t in tiers})
    off2 = _limit_lines(ax2, [c * scale for c in ceilings],
                        [f"tier ceiling TTFT {c:g} s" for c in ceilings], ":")
    loads = [load for ser in series for load, _ in ser.points()]
    levels = sorted({load.value for load in loads})
    for ax in (ax1, ax2):
        _x_axis(ax, levels, axis_label({load.kind for load in loads}))
    ax1.set_ylabel(display_label(_INTER))
    marked = any(s.capacity for s in series)
    ax1.set_title(f"{metric(_INTER).label} vs load ({direction_text(_INTER)}; band: 95% "
                  "interval; dashed: SLO floors" + ("; on each floor, capacity bracket: o met, "
                                                    "x first failed" if marked else "") + ")"
                  + _off_note(off1))
    ax2.set_ylabel(display_label(_TTFT))
    ax2.set_title(f"{metric(_TTFT).label} vs load ({direction_text(_TTFT)}; dotted: SLO "
                  "ceilings)" + _off_note(off2))
    legend_outside(ax1, fontsize=8)
    legend_outside(ax2, fontsize=8)
    return render(fig)
