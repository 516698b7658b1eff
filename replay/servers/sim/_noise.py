"""Step-time noise: each engine step's modelled time times a factor drawn for its index.

A real server's steps are not all alike (a GC pause, the OS running another process,
a slow read): on a CPU server a few steps take ten times the typical one, and those
stalls, not the typical step, set the slow tail of per-request interactivity. A
profile may carry the distribution of that factor as quantiles at evenly spaced
probabilities (``SimProfile.step_noise``, fitted by ``agentreplay calibrate``).

The factor of step ``i`` is a pure function of the engine's seed and ``i`` (a
counter-based hash, SplitMix64), so a run of steps planned at once
(``replay.servers.sim.DecodeRun``) draws exactly what step-by-step calls would, however
many of the planned steps are used.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["noise_factor", "noise_factors"]

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _uniform(seed: int, index: int) -> float:
    z = (seed * _GOLDEN + (index + 1) * _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return (z >> 11) / float(1 << 53)


def _uniforms(seed: int, first: int, n: int) -> np.ndarray:
    idx = np.arange(first + 1, first + 1 + n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64((seed * _GOLDEN) & _MASK) + idx * np.uint64(_GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    out: np.ndarray = (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return out


def noise_factor(quantiles: Sequence[float], seed: int, index: int) -> float:
    """The factor of step ``index``: the quantile function at a uniform draw."""
    u = _uniform(seed, index) * (len(quantiles) - 1)
    k = min(int(u), len(quantiles) - 2)
    lo, hi = quantiles[k], quantiles[k + 1]
    return lo + (hi - lo) * (u - k)


def noise_factors(quantiles: Sequence[float], seed: int, first: int, n: int) -> np.ndarray:
    """The factors of steps ``first .. first + n - 1`` (equal to :func:`noise_factor`'s)."""
    q = np.asarray(quantiles, dtype=np.float64)
    u = _uniforms(seed, first, n) * (len(q) - 1)
    k = np.minimum(u.astype(np.int64), len(q) - 2)
    out: np.ndarray = q[k] + (q[k + 1] - q[k]) * (u - k)
    return out
