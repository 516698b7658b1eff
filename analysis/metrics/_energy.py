"""Energy from GPU telemetry: integrate the scraped power over the measured window.

Pure computation on the samples a run stored from its DCGM exporters
(``gpu_metrics.jsonl``, ``run --gpu-metrics``). DCGM's power field is itself
an average over a short recent interval, so each sample stands for the time
since the one before it (sample and hold, backwards): the energy of a window is
the sum of each sample's power times the part of its interval inside the window.
Exporters are integrated apart and added. A window the samples do not cover
(none before its start plus one interval, or none at or after its end) has no
energy: missing, never 0. From the energy and the tokens that arrived in the
window come joules per output token and output tokens per joule; a capacity per
kilowatt divides the users a tier holds by the mean power at that level.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

__all__ = ["Energy", "interval_energy_j", "series_energy_j", "window_energy"]


def interval_energy_j(t_s: np.ndarray, power_w: np.ndarray, start: float,
                      end: float) -> float | None:
    """The energy (J) of one exporter's power samples over ``[start, end]``; None when
    the samples do not cover the window."""
    ok = np.isfinite(t_s) & np.isfinite(power_w)
    t, p = t_s[ok], power_w[ok]
    if t.size < 2 or not end > start:
        return None
    order = np.argsort(t, kind="stable")
    t, p = t[order], p[order]
    step = float(np.median(np.diff(t)))
    if t[0] > start + step or t[-1] < end:
        return None
    lo = np.concatenate(([t[0] - step], t[:-1]))  # each sample covers (previous, own]
    overlap = np.clip(np.minimum(t, end) - np.maximum(lo, start), 0.0, None)
    return float((p * overlap).sum())


def series_energy_j(t_s: np.ndarray, power_w: np.ndarray | None, source: np.ndarray | None,
                    start: float, end: float) -> float | None:
    """The energy of every exporter together over the window (each integrated apart);
    None when any exporter's samples miss it, or there is no power at all."""
    if power_w is None or t_s.size == 0:
        return None
    if source is None:
        return interval_energy_j(t_s, power_w, start, end)
    total = 0.0
    for k in np.unique(source):
        e = interval_energy_j(t_s[source == k], power_w[source == k], start, end)
        if e is None:
            return None
        total += e
    return total


class Energy(BaseModel):
    """GPU energy over the measured window, from the DCGM exporters the run scraped."""

    model_config = ConfigDict(extra="forbid")

    energy_j: float
    """Every scraped GPU's energy over the window (power integrated, sample and hold)."""
    power_w: float
    """Mean power over the window (energy / window)."""
    output_tokens: int
    """Output tokens that arrived in the window."""
    j_per_output_tok: float | None
    output_tok_per_j: float | None


def window_energy(energy_j: float | None, window_s: float | None,
                  output_tokens: int) -> Energy | None:
    """The window's energy figures; None (missing) without an energy or a window."""
    if energy_j is None or window_s is None or window_s <= 0:
        return None
    return Energy(energy_j=energy_j, power_w=energy_j / window_s, output_tokens=output_tokens,
                  j_per_output_tok=energy_j / output_tokens if output_tokens else None,
                  output_tok_per_j=output_tokens / energy_j if energy_j > 0 else None)
