"""The steady window of a run and server counter deltas over it."""

from __future__ import annotations

import numpy as np

from analysis.read._read import MetricSeries, RunData

__all__ = ["counter_delta", "steady_window"]


def steady_window(run: RunData) -> tuple[float, float] | None:
    """The manifest's window, else the span of records in phase ``measure``."""
    if run.manifest.window is not None:
        return run.manifest.window.start_s, run.manifest.window.end_s
    r = run.requests
    m = r.phase == "measure"
    if not m.any():
        return None
    end = np.nanmax(np.concatenate([r.last_token_s[m], r.sent_s[m]]))
    return float(r.sent_s[m].min()), float(end)


def counter_delta(metrics: MetricSeries, name: str, start: float, end: float) -> float | None:
    """Increase of a server counter over [start, end], linearly interpolated
    between scrapes; None when the counter is absent or not scraped twice. A fleet's
    is the sum of its replicas' (each counts only what it served)."""
    if metrics.replica is not None:
        parts = [counter_delta(one, name, start, end) for one in metrics.split()]
        found = [p for p in parts if p is not None]
        return float(sum(found)) if found else None
    v = metrics.get(name)
    if v is None:
        return None
    ok = np.isfinite(v)
    t, v = metrics.t_s[ok], v[ok]
    if len(t) < 2:
        return None
    return float(np.interp(end, t, v) - np.interp(start, t, v))
