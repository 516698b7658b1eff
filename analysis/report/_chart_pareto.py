"""The Pareto chart: output throughput per GPU against P90 interactivity, per arm.

The view the field reads a serving configuration by (InferenceX, ``vllm bench sweep
plot_pareto``): interactivity per user on x, throughput per GPU on y, one line per arm
through its measured levels, each point labelled with its level. Up and to the right
is better: an arm whose line lies above and right of another's serves more per GPU at
the same speed per user. Each point carries the 95% interval of its P90 interactivity
as an error bar; the SLO tiers' interactivity floors are vertical lines, so the points
right of a floor are the levels fast enough for that tier (its TTFT ceiling is judged
too: the capacity table says which levels met the whole tier). Nothing else is drawn:
no capacity marker sits where a data point could be read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.metrics import RunSummary, metric
from analysis.report._chart_base import color, figure, legend_outside, render, safe, short_label
from analysis.report._chart_headline import Series
from analysis.report._format import display_label
from analysis.schema import SloTier

__all__ = ["pareto_chart", "pareto_points"]

_X = "interactivity.p90"


def _per_gpu(s: RunSummary, per_gpu: bool) -> float | None:
    if s.output_tok_s is None:
        return None
    if not per_gpu:
        return s.output_tok_s
    return s.output_tok_s / s.gpu_count if s.gpu_count else None


def pareto_points(series: Series, per_gpu: bool = True
                  ) -> list[tuple[float, float, float, float, str]]:
    """(P90 interactivity, output tok/s (per GPU), interval low, interval high, level
    label) per measured level of one line, in load order; levels lacking either value
    are left out (never drawn at 0)."""
    out = []
    for load, s in series.points():
        x, y = s.interactivity.p90, _per_gpu(s, per_gpu)
        if x is None or y is None or not (np.isfinite(x) and np.isfinite(y)):
            continue
        ci = s.interactivity.p90_ci or (np.nan, np.nan)
        out.append((float(x), float(y), float(ci[0]), float(ci[1]), short_label(load)))
    return out


def pareto_chart(series: Sequence[Series], tiers: Sequence[SloTier]) -> str:
    """One line per arm (or history entry and arm) through its levels, floors vertical."""
    # short enough to sit under a long decision (a twin per arm) on the first screen
    fig, (ax,) = figure(height=2.9)
    per_gpu = all(s.gpu_count for ser in series for s in ser.summaries)
    for ser in series:
        pts = pareto_points(ser, per_gpu)
        if not pts:
            continue
        c = color(ser.color_index)
        x, y, lo, hi = (np.array([p[k] for p in pts], dtype=float) for k in range(4))
        labels = [p[4] for p in pts]
        ax.plot(x, y, marker=ser.marker, markersize=5, color=c, label=safe(ser.name),
                linestyle="--" if ser.dashed else "-", zorder=3)
        has = np.isfinite(lo) & np.isfinite(hi)
        if has.any():
            err = np.vstack([np.maximum(x - lo, 0), np.maximum(hi - x, 0)])[:, has]
            ax.errorbar(x[has], y[has], xerr=err, fmt="none", ecolor=c, elinewidth=1.0,
                        capsize=3, alpha=0.8, zorder=2)
        for xi, yi, text in zip(x, y, labels, strict=True):
            ax.annotate(safe(str(text)), (xi, yi), textcoords="offset points", xytext=(5, 4),
                        fontsize=7, color=c)
    top = float(ax.dataLim.y1) if ax.has_data() and np.isfinite(ax.dataLim.y1) else 0.0
    ax.set_ylim(0, top * 1.15 or 1.0)  # headroom for the top point's level label
    right = float(ax.dataLim.x1) if ax.has_data() and np.isfinite(ax.dataLim.x1) else 0.0
    off = []
    for f in sorted({t.floor_tok_s for t in tiers}):
        if right > 0 and f > 2.5 * right:
            off.append(f"{f:g}")
            continue
        ax.axvline(f, color="0.4", linestyle="--", linewidth=0.9, zorder=1)
        ax.annotate(f"floor {f:g}", xy=(f, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, -2), textcoords="offset points", ha="left", va="top",
                    fontsize=7, color="0.25", rotation=90)
    ax.set_xlim(left=0)
    ax.set_xlabel(f"{display_label(_X)} (higher: faster per user)")
    y_unit = "tok/s/GPU" if per_gpu else "tok/s (GPU count unknown)"
    ax.set_ylabel(f"{metric('output_tok_s').label} ({y_unit})")
    ax.set_title("Throughput per GPU vs interactivity per user (up and right is better; "
                 "point labels: load; bars: 95% interval; dashed: SLO floors)"
                 + (f"\nfloors far right of the data, not drawn: {', '.join(off)} "
                    f"{metric(_X).unit}" if off else ""))
    legend_outside(ax, fontsize=8)
    return render(fig)
