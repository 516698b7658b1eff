"""Resampling the fit's data: a block bootstrap by time window within each level.

The twin's fit has its own uncertainty: another run of the same levels would have
drawn other steps and other requests, and fitted other parameters. ``resample``
draws such a "another run" from the records themselves, for a refit.

Blocks are *time windows*, not single gaps and not requests. A step of batch ``b``
is read by ``b`` requests (``b`` rows that share one noise draw), and the load
(the batch, the contexts, who prefills) drifts over seconds: rows close in time are
not independent, so resampling rows one by one (or requests, which split one step's
rows between draws) would understate the spread. A window keeps each step's rows,
the idle TTFTs sent in it and the load around them together. Each level (group) is
resampled on its own, with as many windows as it has, so every level keeps its share
of the fit (the fit weighs levels as blocks). ``WINDOWS`` per level: enough blocks for
a bootstrap, each still many steps long (a 120-s level: 6-s windows).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from analysis.fit._samples import StepSamples, TtftSamples

__all__ = ["WINDOWS", "resample", "window_of"]

WINDOWS = 20
"""Windows per level."""


def window_of(t_s: np.ndarray, lo: float, hi: float, windows: int) -> np.ndarray:
    """The window (0 .. ``windows`` - 1) of each time in [lo, hi]."""
    if hi <= lo:
        return np.zeros(len(t_s), dtype=np.int64)
    k = np.floor((t_s - lo) / (hi - lo) * windows).astype(np.int64)
    return np.clip(k, 0, windows - 1)


def _take(obj: StepSamples | TtftSamples, idx: np.ndarray) -> dict[str, np.ndarray]:
    return {f.name: getattr(obj, f.name)[idx] for f in fields(obj)}


def resample(steps: StepSamples, ttfts: TtftSamples, rng: np.random.Generator,
             windows: int = WINDOWS) -> tuple[StepSamples, TtftSamples]:
    """One bootstrap draw of ``steps`` and ``ttfts``: per group, ``windows`` time windows
    drawn with replacement, each bringing all its gaps and all its TTFTs."""
    s_idx: list[np.ndarray] = []
    t_idx: list[np.ndarray] = []
    for g in np.unique(np.concatenate([steps.group, ttfts.group])):
        s_in = np.flatnonzero(steps.group == g)
        t_in = np.flatnonzero(ttfts.group == g)
        times = np.concatenate([steps.t_s[s_in], ttfts.t_s[t_in]])
        finite = times[np.isfinite(times)]
        lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)
        s_win = window_of(steps.t_s[s_in], lo, hi, windows)
        t_win = window_of(ttfts.t_s[t_in], lo, hi, windows)
        s_rows = [s_in[s_win == w] for w in range(windows)]
        t_rows = [t_in[t_win == w] for w in range(windows)]
        for w in rng.integers(0, windows, size=windows):
            s_idx.append(s_rows[w])
            t_idx.append(t_rows[w])
    s_all = np.concatenate(s_idx) if s_idx else np.zeros(0, dtype=np.int64)
    t_all = np.concatenate(t_idx) if t_idx else np.zeros(0, dtype=np.int64)
    return StepSamples(**_take(steps, s_all)), TtftSamples(**_take(ttfts, t_all))
