"""The report's detail charts, rendered by matplotlib (Agg) to inline SVG strings.

Colour = arm, line style and shade = level (numeric order), legends outside
the data, one unit per quantity (see ``_format.TIME_UNITS``). Shared
machinery (style, SVG clean-up, legends) is in ``_chart_base``; the decision
chart is in ``_chart_headline``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.metrics import column_latencies, metric
from analysis.read import RunData, steady_window
from analysis.report._chart_base import (
    ArmLevels,
    color,
    figure,
    legend_outside,
    level_style,
    level_styles,
    numeric_levels,
    ok_window,
    render,
    run_load,
    safe,
)
from analysis.report._format import display_label, display_unit, time_unit
from analysis.schema import RequestColumns

__all__ = [
    "ArmLevels",
    "cdf_chart",
    "timeseries_chart",
    "ttft_prompt_chart",
    "turn_chart",
]

_INTER = "interactivity.p90"
_MAX_SCATTER = 4000
_MAX_LINES = 12


def _lines(arms: Sequence[ArmLevels]) -> list[tuple[int, float, str, list[RunData]]]:
    """(arm index, load, legend, runs) per arm and level in numeric order, at most _MAX_LINES."""
    out = []
    for i, a in enumerate(arms):
        loads = {run_load(r).value: run_load(r) for r in a.runs}
        for v in sorted(loads):
            out.append((i, v, f"{a.arm} @ {loads[v].label}",
                        [r for r in a.runs if run_load(r).value == v]))
    if len(out) > _MAX_LINES:  # keep the extremes and spread the rest
        idx = np.unique(np.linspace(0, len(out) - 1, _MAX_LINES).round().astype(int))
        out = [out[j] for j in idx]
    return out


def _ttft(r: RequestColumns, m: np.ndarray) -> np.ndarray:
    out: np.ndarray = column_latencies(r).ttft[m]
    return out


def _tpot(r: RequestColumns, m: np.ndarray) -> np.ndarray:
    """TPOT of the selected requests that have one (at least 2 output tokens)."""
    tpot = column_latencies(r).tpot[m]
    out: np.ndarray = tpot[np.isfinite(tpot)]
    return out


def cdf_chart(arms: Sequence[ArmLevels]) -> str:
    """Empirical CDFs of TPOT and TTFT per arm and level."""
    fig, (ax1, ax2) = figure(rows=2, height=3.0)
    styles = level_styles(numeric_levels(arms))
    units = {"tpot": time_unit("tpot"), "ttft": time_unit("ttft")}
    for ci, load, legend, runs in _lines(arms):
        tpot = [_tpot(run.requests, ok_window(run)) for run in runs]
        ttft = [_ttft(run.requests, ok_window(run)) for run in runs]
        for ax, vals, name in ((ax1, tpot, "tpot"), (ax2, ttft, "ttft")):
            v = np.sort(np.concatenate(vals)) if vals else np.zeros(0)
            v = v[np.isfinite(v)]
            if len(v):
                y = np.arange(1, len(v) + 1) / len(v)
                if len(v) > 2000:
                    pick = np.linspace(0, len(v) - 1, 2000).astype(int)
                    v, y = v[pick], y[pick]
                ax.plot(v * units[name][1], y, color=color(ci), label=safe(legend),
                        **level_style(styles, load))  # type: ignore[arg-type]
    ax1.set_xlabel(f"{metric('tpot').label} ({display_unit('tpot')} per output token)")
    ax2.set_xlabel(display_label("ttft"))
    for ax, name in ((ax1, "tpot"), (ax2, "ttft")):
        ax.set_ylabel("share of requests")
        ax.set_title(f"CDF of {metric(name).label} (ok requests sent in the steady window; "
                     "dotted: P90)")
        ax.axhline(0.9, color="0.5", linestyle=":", linewidth=0.8)
        legend_outside(ax)
    return render(fig)


def ttft_prompt_chart(arms: Sequence[ArmLevels]) -> str:
    """TTFT against prompt length, per arm and level (a sample of a few thousand points)."""
    fig, (ax,) = figure(height=3.6)
    rng = np.random.default_rng(0)
    scale = time_unit("ttft")[1]
    levels = numeric_levels(arms)
    shades = {u: 0.85 - 0.4 * k / max(len(levels) - 1, 1) for k, u in enumerate(levels)}
    markers = ("o", "s", "^", "D", "v", "P")
    for ci, load, legend, runs in _lines(arms):
        x = np.concatenate([run.requests.prompt_tokens[ok_window(run)] for run in runs])
        y = np.concatenate([_ttft(run.requests, ok_window(run)) for run in runs])
        if len(x) > _MAX_SCATTER // 4:
            pick = rng.choice(len(x), _MAX_SCATTER // 4, replace=False)
            x, y = x[pick], y[pick]
        if len(x):
            k = levels.index(load) if load in levels else 0
            ax.scatter(x, y * scale, s=12, alpha=shades.get(load, 0.5), color=color(ci),
                       marker=markers[k % len(markers)], label=safe(legend), linewidths=0)
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel(display_label("ttft"))
    ax.set_title(f"{metric('ttft').label} vs prompt length (colour: arm; marker: load level)")
    legend_outside(ax)
    return render(fig)


def timeseries_chart(arms: Sequence[ArmLevels]) -> str:
    """Output tokens/s received, KV cache usage and prefix hit rate over each run."""
    fig, (ax1, ax2, ax3) = figure(rows=3, height=2.4)
    styles = level_styles(numeric_levels(arms))
    runs = [(i, a.arm, run) for i, a in enumerate(arms)
            for run in sorted(a.runs, key=lambda r: run_load(r).value)]
    if len(runs) > _MAX_LINES:
        idx = np.unique(np.linspace(0, len(runs) - 1, _MAX_LINES).round().astype(int))
        runs = [runs[j] for j in idx]
    for i, arm, run in runs:
        load = run_load(run)
        legend = safe(f"{arm} @ {load.label} ({run.manifest.run_id})")
        style = {"color": color(i), "linewidth": 0.9, **level_style(styles, load.value)}
        r = run.requests
        t = r.chunk_times_s
        if len(t):
            span = max(float(t.max()), 1e-9)
            width = max(span / 120.0, 1e-3)
            bins = np.arange(0.0, span + width, width)
            h, e = np.histogram(t, bins=bins, weights=r.chunk_tokens)
            ax1.plot(e[:-1], h / width, label=legend, **style)  # type: ignore[arg-type]
        w = steady_window(run)
        if w is not None:
            for ax in (ax1, ax2, ax3):
                ax.axvspan(w[0], w[1], color=color(i), alpha=0.03)
        for k, ms in enumerate(run.metrics.split()):  # a fleet: one line per replica
            shown = legend if k == 0 else None
            kv = ms.get("kv_cache_usage_perc")
            if kv is not None:
                scale = 100.0 if np.nanmax(kv, initial=0.0) <= 1.0 else 1.0
                ax2.plot(ms.t_s, kv * scale, label=shown, **style)  # type: ignore[arg-type]
            hits = ms.get("prefix_cache_hits_total")
            queries = ms.get("prefix_cache_queries_total")
            if hits is not None and queries is not None and len(ms.t_s) > 1:
                dh, dq = np.diff(hits), np.diff(queries)
                with np.errstate(divide="ignore", invalid="ignore"):
                    rate = np.where(dq > 0, dh / dq * 100.0, np.nan)
                ax3.plot(ms.t_s[1:], rate, label=shown, **style)  # type: ignore[arg-type]
    ax1.set_ylabel("output tok/s")
    ax1.set_title("Output tokens received per second (shaded: steady window)")
    ax2.set_ylabel("KV cache usage (%)")
    ax2.set_title("KV cache usage (server /metrics)")
    ax3.set_ylabel("prefix hit rate (%)")
    ax3.set_title("Prefix cache hits / queries between scrapes (server /metrics)")
    ax3.set_xlabel("seconds since run start")
    legend_outside(ax1, fontsize=6)
    return render(fig)


def turn_chart(arms: Sequence[ArmLevels], max_turn: int = 60) -> str:
    """Median TTFT and TPOT by turn index within a session, per arm and level."""
    fig, (ax1, ax2) = figure(rows=2, height=2.8)
    styles = level_styles(numeric_levels(arms))
    s_ttft, s_tpot = time_unit("ttft")[1], time_unit("tpot")[1]
    for ci, load, legend, runs in _lines(arms):
        turns, ttft, tpot = [], [], []
        for run in runs:
            r = run.requests
            m = ok_window(run) & (r.turn <= max_turn)
            turns.append(r.turn[m])
            ttft.append(_ttft(r, m))
            tpot.append(column_latencies(r).tpot[m])
        tu = np.concatenate(turns)
        for ax, vals, scale in ((ax1, np.concatenate(ttft), s_ttft),
                                (ax2, np.concatenate(tpot), s_tpot)):
            xs, ys = [], []
            for t in np.unique(tu):
                v = vals[(tu == t) & np.isfinite(vals)]
                if len(v):
                    xs.append(int(t))
                    ys.append(float(np.median(v)) * scale)
            if xs:
                ax.plot(xs, ys, marker="o", markersize=2, color=color(ci), label=safe(legend),
                        **level_style(styles, load))  # type: ignore[arg-type]
    ax1.set_ylabel("median " + display_label("ttft"))
    ax1.set_title("Latency by turn index, per arm and level (longer histories later)")
    ax2.set_ylabel("median " + display_label("tpot"))
    ax2.set_xlabel("turn index within the session")
    legend_outside(ax1)
    return render(fig)
