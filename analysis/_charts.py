"""Charts for the report, rendered by matplotlib (Agg) to inline SVG strings.

The SVG is made self-contained: no XML prolog, no DOCTYPE (its DTD address),
no metadata block (its RDF/Dublin Core addresses); only the ``xmlns``
namespace strings remain, which browsers never fetch. Text stays text
(``svg.fonttype = none``) and matplotlib escapes it, so a hostile label cannot
inject markup.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from analysis._capacity import CapacityRow  # noqa: E402
from analysis._metrics import RunSummary, steady_window  # noqa: E402
from analysis._read import RunData  # noqa: E402

__all__ = [
    "ArmLevels",
    "cdf_chart",
    "curve_chart",
    "timeseries_chart",
    "ttft_prompt_chart",
    "turn_chart",
]

_MAX_SCATTER = 4000
_MAX_LINES = 12
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
_STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "agentreplay",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
}


@dataclass(frozen=True)
class ArmLevels:
    """One arm's level summaries (sorted by users) and its runs."""

    arm: str
    summaries: list[RunSummary]
    runs: list[RunData]


def _safe(text: str) -> str:
    """Literal text for matplotlib: ``$`` would start mathtext."""
    return text.replace("$", r"\$")


def _color(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


def _svg(fig: plt.Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    return text


def _figure(rows: int = 1, height: float = 3.6) -> tuple[plt.Figure, np.ndarray]:
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(rows, 1, figsize=(8.0, height * rows), squeeze=False)
    return fig, axes[:, 0]


def _render(fig: plt.Figure) -> str:
    with plt.rc_context(_STYLE):
        fig.tight_layout()
        return _svg(fig)


def curve_chart(arms: Sequence[ArmLevels], capacity: Sequence[CapacityRow]) -> str:
    """Decode throughput per GPU against P90 interactivity, one line per arm."""
    fig, (ax,) = _figure(height=4.2)
    per_gpu = all(s.decode_tok_s_per_gpu is not None for a in arms for s in a.summaries)
    for i, a in enumerate(arms):
        pts = [(s.interactivity.p90, s.decode_tok_s_per_gpu if per_gpu else s.decode_tok_s,
                s.users) for s in a.summaries]
        pts = [p for p in pts if p[0] is not None and p[1] is not None]
        if not pts:
            continue
        x, y, u = zip(*pts, strict=True)
        ax.plot(x, y, "-o", color=_color(i), label=_safe(a.arm))
        for xi, yi, ui in pts:
            ax.annotate(f"{ui}u", (xi, yi), textcoords="offset points", xytext=(4, 4),
                        fontsize=7, color=_color(i))
    floors = sorted({r.tier.floor_tok_s for r in capacity})
    for f in floors:
        ax.axvline(f, color="0.5", linestyle=":", linewidth=0.8)
    ax.set_xlabel("P90 interactivity (tok/s/user, 1 / P90 TPOT): higher is faster per user")
    ax.set_ylabel("decode throughput " + ("per GPU (tok/s/GPU)" if per_gpu else "(tok/s)"))
    ax.set_title("Throughput vs interactivity (dotted: SLO floors; labels: users)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return _render(fig)


def _ok_window(run: RunData) -> np.ndarray:
    r = run.requests
    w = steady_window(run)
    if w is None:
        return np.zeros(len(r), dtype=bool)
    return (r.status == "ok") & (r.sent_s >= w[0]) & (r.sent_s < w[1])


def _lines(arms: Sequence[ArmLevels]) -> list[tuple[int, str, list[RunData]]]:
    """(color index, legend, runs) per arm and level, at most _MAX_LINES."""
    out = []
    for i, a in enumerate(arms):
        users = sorted({r.manifest.load.users for r in a.runs})
        for u in users:
            out.append((i, f"{a.arm} @ {u} users",
                        [r for r in a.runs if r.manifest.load.users == u]))
    if len(out) > _MAX_LINES:  # keep the extremes and spread the rest
        idx = np.unique(np.linspace(0, len(out) - 1, _MAX_LINES).round().astype(int))
        out = [out[j] for j in idx]
    return out


def cdf_chart(arms: Sequence[ArmLevels]) -> str:
    """Empirical CDFs of TPOT and TTFT per arm and level."""
    fig, (ax1, ax2) = _figure(rows=2, height=3.2)
    levels = {u for a in arms for u in {r.manifest.load.users for r in a.runs}}
    styles = {u: s for u, s in zip(sorted(levels), ["-", "--", "-.", ":"] * 10, strict=False)}
    for ci, legend, runs in _lines(arms):
        tpot, ttft = [], []
        for run in runs:
            r = run.requests
            m = _ok_window(run)
            ttft.append((r.first_token_s - r.sent_s)[m])
            mm = m & (r.output_tokens >= 2)
            tpot.append((r.last_token_s - r.first_token_s)[mm] / (r.output_tokens[mm] - 1))
        u = runs[0].manifest.load.users
        for ax, vals in ((ax1, tpot), (ax2, ttft)):
            v = np.sort(np.concatenate(vals)) if vals else np.zeros(0)
            v = v[np.isfinite(v)]
            if len(v):
                y = np.arange(1, len(v) + 1) / len(v)
                if len(v) > 2000:
                    pick = np.linspace(0, len(v) - 1, 2000).astype(int)
                    v, y = v[pick], y[pick]
                ax.plot(v * 1000.0, y, styles[u], color=_color(ci), label=_safe(legend))
    ax1.set_xlabel("TPOT (ms per output token)")
    ax2.set_xlabel("TTFT (ms)")
    for ax, name in ((ax1, "TPOT"), (ax2, "TTFT")):
        ax.set_ylabel("share of requests")
        ax.set_title(f"CDF of {name} (ok requests sent in the steady window)")
        ax.axhline(0.9, color="0.5", linestyle=":", linewidth=0.8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return _render(fig)


def ttft_prompt_chart(arms: Sequence[ArmLevels]) -> str:
    """TTFT against prompt length (a sample of at most a few thousand points per arm)."""
    fig, (ax,) = _figure(height=3.8)
    rng = np.random.default_rng(0)
    for i, a in enumerate(arms):
        xs, ys = [], []
        for run in a.runs:
            r = run.requests
            m = _ok_window(run)
            xs.append(r.prompt_tokens[m])
            ys.append((r.first_token_s - r.sent_s)[m])
        x = np.concatenate(xs) if xs else np.zeros(0)
        y = np.concatenate(ys) if ys else np.zeros(0)
        if len(x) > _MAX_SCATTER:
            pick = rng.choice(len(x), _MAX_SCATTER, replace=False)
            x, y = x[pick], y[pick]
        if len(x):
            ax.scatter(x, y, s=5, alpha=0.4, color=_color(i), label=_safe(a.arm))
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("TTFT (s)")
    ax.set_title("TTFT vs prompt length (all levels)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return _render(fig)


def timeseries_chart(arms: Sequence[ArmLevels]) -> str:
    """Output tokens/s received, KV cache usage and prefix hit rate over each run."""
    fig, (ax1, ax2, ax3) = _figure(rows=3, height=2.6)
    runs = [(i, a.arm, run) for i, a in enumerate(arms) for run in a.runs]
    if len(runs) > _MAX_LINES:
        idx = np.unique(np.linspace(0, len(runs) - 1, _MAX_LINES).round().astype(int))
        runs = [runs[j] for j in idx]
    for i, arm, run in runs:
        legend = _safe(f"{arm} @ {run.manifest.load.users}u ({run.manifest.run_id})")
        r = run.requests
        t = r.chunk_times_s
        if len(t):
            span = max(float(t.max()), 1e-9)
            width = max(span / 120.0, 1e-3)
            bins = np.arange(0.0, span + width, width)
            h, e = np.histogram(t, bins=bins, weights=r.chunk_tokens)
            ax1.plot(e[:-1], h / width, color=_color(i), linewidth=0.8, label=legend)
        w = steady_window(run)
        if w is not None:
            for ax in (ax1, ax2, ax3):
                ax.axvspan(w[0], w[1], color=_color(i), alpha=0.03)
        ms = run.metrics
        kv = ms.get("kv_cache_usage_perc")
        if kv is not None:
            scale = 100.0 if np.nanmax(kv, initial=0.0) <= 1.0 else 1.0
            ax2.plot(ms.t_s, kv * scale, color=_color(i), linewidth=0.8, label=legend)
        hits, queries = ms.get("prefix_cache_hits_total"), ms.get("prefix_cache_queries_total")
        if hits is not None and queries is not None and len(ms.t_s) > 1:
            dh, dq = np.diff(hits), np.diff(queries)
            with np.errstate(divide="ignore", invalid="ignore"):
                rate = np.where(dq > 0, dh / dq * 100.0, np.nan)
            ax3.plot(ms.t_s[1:], rate, color=_color(i), linewidth=0.8, label=legend)
    ax1.set_ylabel("output tok/s")
    ax1.set_title("Output tokens received per second (shaded: steady window)")
    ax2.set_ylabel("KV cache usage (%)")
    ax2.set_title("KV cache usage (server /metrics)")
    ax3.set_ylabel("prefix hit rate (%)")
    ax3.set_title("Prefix cache hits / queries between scrapes (server /metrics)")
    ax3.set_xlabel("seconds since run start")
    for ax in (ax1, ax2, ax3):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    return _render(fig)


def turn_chart(arms: Sequence[ArmLevels], max_turn: int = 60) -> str:
    """Median TTFT and TPOT by turn index within a session, per arm (all levels)."""
    fig, (ax1, ax2) = _figure(rows=2, height=2.8)
    for i, a in enumerate(arms):
        turns, ttft, tpot = [], [], []
        for run in a.runs:
            r = run.requests
            m = _ok_window(run) & (r.turn <= max_turn)
            turns.append(r.turn[m])
            ttft.append((r.first_token_s - r.sent_s)[m])
            with np.errstate(divide="ignore", invalid="ignore"):
                tpot.append(np.where(r.output_tokens[m] >= 2,
                                     (r.last_token_s - r.first_token_s)[m]
                                     / (r.output_tokens[m] - 1), np.nan))
        if not turns:
            continue
        tu = np.concatenate(turns)
        for ax, vals, scale in ((ax1, np.concatenate(ttft), 1.0),
                                (ax2, np.concatenate(tpot), 1000.0)):
            xs, ys = [], []
            for t in np.unique(tu):
                v = vals[(tu == t) & np.isfinite(vals)]
                if len(v):
                    xs.append(int(t))
                    ys.append(float(np.median(v)) * scale)
            if xs:
                ax.plot(xs, ys, "-o", markersize=2, color=_color(i), label=_safe(a.arm))
    ax1.set_ylabel("median TTFT (s)")
    ax1.set_title("Latency by turn index (longer histories later in a session)")
    ax2.set_ylabel("median TPOT (ms)")
    ax2.set_xlabel("turn index within the session")
    for ax in (ax1, ax2):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return _render(fig)
