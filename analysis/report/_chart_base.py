"""What every report chart shares: style, colours, level styles, legends, SVG output.

The SVG is made self-contained: no XML prolog, no DOCTYPE (its DTD address),
no metadata block (its RDF/Dublin Core addresses); only the ``xmlns``
namespace strings remain, which browsers never fetch. Text stays text
(``svg.fonttype = none``) and matplotlib escapes it, so a hostile label cannot
inject markup.

Readability rules held here: one colour per arm, one line style (and shade)
per level in numeric order, legends outside the plotting area. Each plotting
area and legend carries an SVG id (``ar-plot-N``, ``ar-legend-N``) so a test
can check in a browser that no legend covers data.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.metrics import RunSummary
from analysis.read import RunData, steady_window
from analysis.schema import LoadLevel, level_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "ArmLevels",
    "axis_label",
    "color",
    "figure",
    "legend_outside",
    "legends_outside_axes",
    "level_points",
    "level_style",
    "level_styles",
    "numeric_levels",
    "ok_window",
    "render",
    "run_load",
    "safe",
    "short_label",
]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
_LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
STYLE: Any = {  # matplotlib types rc keys as literals
    "svg.fonttype": "none",
    "svg.hashsalt": "agentreplay",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
}
_ids = itertools.count(1)


def _pyplot() -> Any:
    """matplotlib.pyplot, imported on first use: it costs about a second, and every
    command that imports analysis (serve-sim, run) would pay it without drawing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class ArmLevels:
    """One arm's level summaries (in load order) and its runs."""

    arm: str
    summaries: list[RunSummary]
    runs: list[RunData]

    def points(self) -> list[tuple[LoadLevel, RunSummary]]:
        return level_points(self.summaries)


def level_points(summaries: list[RunSummary]) -> list[tuple[LoadLevel, RunSummary]]:
    """Each summary with its load (users, sessions/s or time scale), in load order."""
    return sorted(((s.level, s) for s in summaries), key=lambda p: p[0].value)


def run_load(run: RunData) -> LoadLevel:
    """What set a run's load (users, a session rate or a time scale)."""
    return level_of(run.manifest)


def short_label(load: LoadLevel) -> str:
    """A point label: ``4u``, ``0.5/s`` or ``x2``."""
    if load.kind == "users":
        return f"{load.value:g}u"
    return f"{load.value:g}/s" if load.kind == "rate" else f"x{load.value:g}"


def axis_label(kinds: set[str]) -> str:
    """The load axis' title for the kinds on it."""
    if kinds <= {"users"}:
        return "users (concurrent agent lanes)"
    if kinds == {"rate"}:
        return "session arrival rate (sessions/s, open loop)"
    if kinds == {"timestamps"}:
        return "time scale of the replayed timestamps"
    return "load (mixed kinds)"


def safe(text: str) -> str:
    """Literal text for matplotlib: ``$`` would start mathtext."""
    return text.replace("$", r"\$")


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def level_styles(levels: Iterable[float]) -> dict[float, tuple[object, float]]:
    """(line style, alpha) per level in numeric order: the smallest level solid and darkest."""
    ordered = sorted(set(levels))
    n = max(len(ordered), 1)
    return {u: (_LINESTYLES[k % len(_LINESTYLES)], 1.0 - 0.45 * k / max(n - 1, 1))
            for k, u in enumerate(ordered)}


def level_style(styles: dict[float, tuple[object, float]], load: float) -> dict[str, object]:
    ls, alpha = styles.get(load, ("-", 1.0))
    return {"linestyle": ls, "alpha": alpha}


def figure(rows: int = 1, height: float = 3.6, width: float = 9.0,
           heights: Sequence[float] | None = None) -> tuple[Figure, list[Axes]]:
    """``rows`` panels of ``height`` inches, or one panel per entry of ``heights``."""
    sizes = list(heights) if heights else [height] * rows
    with _pyplot().rc_context(STYLE):
        fig, axes = _pyplot().subplots(len(sizes), 1, figsize=(width, sum(sizes)),
                                       squeeze=False, height_ratios=sizes)
    return fig, list(axes[:, 0])


def legend_outside(ax: Axes, *, fontsize: float = 7, title: str | None = None) -> None:
    """A legend to the right of the plotting area (never over the data), if any entries."""
    if not ax.get_legend_handles_labels()[0]:
        return
    leg = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                    fontsize=fontsize, title=title, title_fontsize=fontsize, frameon=False)
    leg.set_gid(f"ar-legend-{next(_ids)}")


def _tag_axes(fig: Figure) -> None:
    for ax in fig.axes:
        ax.patch.set_gid(f"ar-plot-{next(_ids)}")


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    text = buf.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    return text


def render(fig: Figure) -> str:
    """The figure as an inline SVG string (the figure is closed)."""
    with _pyplot().rc_context(STYLE):
        _tag_axes(fig)
        fig.tight_layout()
        return _svg(fig)


def legends_outside_axes(fig: Figure) -> bool:
    """Whether every legend's box lies outside every plotting area (for tests)."""
    fig.canvas.draw()
    boxes = [ax.get_window_extent() for ax in fig.axes]
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        lb = leg.get_window_extent()
        if any(lb.overlaps(b) for b in boxes):
            return False
    return True


def ok_window(run: RunData) -> np.ndarray:
    """Requests with status ok that were sent inside the steady window."""
    r = run.requests
    w = steady_window(run)
    if w is None:
        return np.zeros(len(r), dtype=bool)
    out: np.ndarray = (r.status == "ok") & (r.sent_s >= w[0]) & (r.sent_s < w[1])
    return out


def numeric_levels(arms: Sequence[ArmLevels]) -> list[float]:
    """Every run's load value, in numeric order."""
    return sorted({run_load(r).value for a in arms for r in a.runs})
