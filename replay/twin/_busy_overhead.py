"""The per-request overhead of a request that finds the engine busy, fitted by simulation.

``request_overhead_s`` is fitted on idle-engine TTFTs, where nothing else is in flight.
A request that arrives while the engine runs pays the wait for the step in flight and
rides a batched step, which the twin models, plus an overhead the idle TTFTs do not
show: vLLM on a CPU took a request in about 3 ms sooner while its engine ran than when
it had to wake it (bench/README.md, "an idle host"), so a twin with the idle overhead
put the held-out P90 TTFT 25% high.

The busy overhead is what closes the gap the twin leaves at the fitted levels: the twin
(with the idle overhead everywhere) replays each fitted level with the run's own
workload, seed and shape, and the busy-engine TTFTs it gives are set against the
measured ones. An overhead is a constant added to each such TTFT, so it moves their
distribution by itself: the shift is the Hodges-Lehmann estimate (the median of the
pairwise differences), pooled over the levels by their counts. It is applied only
where it stands out of its own noise (a bootstrap over the requests puts its 90%
interval clear of zero) and is large enough to matter: a server whose overhead does
not depend on the engine's state keeps one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis import read_run
from analysis.fit import TtftSamples, ttft_samples

__all__ = ["BusyOverhead", "busy_overhead", "with_busy_overhead"]

_MIN_BUSY = 30
"""Busy-engine TTFTs needed on each side (measured, twin) to read a shift at all."""
_MIN_SHIFT = 0.05
"""A shift smaller than this share of the busy TTFTs' median is left alone."""
_RESAMPLES = 200
_MAX_SIDE = 600
"""Busy TTFTs per side and level the shift is computed on (quantiles beyond it)."""


@dataclass(frozen=True)
class BusyOverhead:
    """The fitted busy-engine overhead and what it rests on (the runs' clock)."""

    idle_s: float
    shift_s: float
    """Measured minus twin busy-engine TTFTs (Hodges-Lehmann), pooled over the levels."""
    low_s: float
    high_s: float
    """The shift's 90% bootstrap interval."""
    median_ttft_s: float
    measured: int
    simulated: int
    levels: tuple[int, ...]

    @property
    def clear_of_zero(self) -> bool:
        """The shift's interval does not hold zero."""
        return self.low_s > 0 or self.high_s < 0

    @property
    def applied(self) -> bool:
        """The shift is told apart from zero and is not negligible."""
        return self.clear_of_zero and abs(self.shift_s) >= _MIN_SHIFT * self.median_ttft_s

    @property
    def why_not(self) -> str:
        """Why the shift is not applied (empty when it is)."""
        if self.applied:
            return ""
        if not self.clear_of_zero:
            return "not told apart from zero"
        return f"under {_MIN_SHIFT:.0%} of those TTFTs' median"

    @property
    def busy_s(self) -> float | None:
        """The overhead a busy-engine request pays; None: the idle one."""
        return max(self.idle_s + self.shift_s, 0.0) if self.applied else None

    def note(self) -> str:
        """What the busy-engine TTFTs at the fitted levels said (the runs' clock)."""
        where = (f"{self.measured} busy-engine TTFTs at {', '.join(map(str, self.levels))} "
                 f"users (twin {self.simulated})")
        shift = (f"{self.shift_s * 1e3:+.2f} ms against the twin with the idle overhead "
                 f"(90%: {self.low_s * 1e3:+.2f} to {self.high_s * 1e3:+.2f} ms)")
        busy = self.busy_s
        if busy is None:
            return (f"{where}: {shift}, {self.why_not}: one overhead "
                    f"({self.idle_s * 1e3:.2f} ms, run clock) for a busy engine and an idle one")
        return (f"{where}: {shift}: a request that finds the engine busy pays "
                f"{busy * 1e3:.2f} ms of overhead, an idle one {self.idle_s * 1e3:.2f} ms "
                "(run clock; request_overhead_busy_s)")

    def as_dict(self, scale: float) -> dict[str, Any]:
        """For the calibration block, in the profile's clock (``scale`` model s per s)."""
        busy = self.busy_s
        return {"idle_s": self.idle_s * scale,
                "busy_s": None if busy is None else busy * scale,
                "shift_s": self.shift_s * scale, "shift_low_s": self.low_s * scale,
                "shift_high_s": self.high_s * scale, "applied": self.applied,
                "busy_ttfts_measured": self.measured, "busy_ttfts_twin": self.simulated,
                "levels": list(self.levels)}


def with_busy_overhead(profile: dict[str, Any], fit: BusyOverhead | None,
                       scale: float) -> dict[str, Any]:
    """``profile`` with the busy overhead set (the fitted shift on its own idle overhead,
    so a refit keeps the shift, not the main fit's absolute value)."""
    if fit is None or not fit.applied:
        return profile
    idle = float(profile.get("request_overhead_s") or 0.0)
    return {**profile, "request_overhead_busy_s": max(idle + fit.shift_s * scale, 0.0)}


def _busy(t: TtftSamples, users: int, scale: float = 1.0) -> np.ndarray:
    """TTFTs at ``users`` (the runs' clock) of the requests sent while another was in
    flight."""
    keep = (t.group == users) & ~t.alone & (t.ttft_s > 0)
    return np.asarray(t.ttft_s[keep] / scale, dtype=np.float64)


def _thin(x: np.ndarray) -> np.ndarray:
    """At most ``_MAX_SIDE`` values with the same distribution (evenly spaced quantiles)."""
    if x.size <= _MAX_SIDE:
        return x
    return np.quantile(x, np.linspace(0.0, 1.0, _MAX_SIDE))


def _level_shift(measured: np.ndarray, twin: np.ndarray) -> float:
    """Hodges-Lehmann shift: the median of every measured-minus-twin difference (robust to
    heavy-tailed steps, and on multimodal TTFTs, one step's wait or two, far steadier than
    the difference of the medians)."""
    return float(np.median(np.subtract.outer(_thin(measured), _thin(twin))))


def _pooled_shift(measured: Sequence[np.ndarray], twin: Sequence[np.ndarray],
                  rng: np.random.Generator | None = None) -> float:
    """Count-weighted mean of the levels' shifts; ``rng``: on a bootstrap resample."""
    shifts, weights = [], []
    for m, t in zip(measured, twin, strict=True):
        if rng is not None:
            m, t = rng.choice(m, m.size), rng.choice(t, t.size)
        shifts.append(_level_shift(m, t))
        weights.append(min(m.size, t.size))
    return float(np.average(shifts, weights=weights))


def busy_overhead(profile: dict[str, Any], measured: TtftSamples, *,
                  simulate: Callable[[dict[str, Any], int, Path], None], idle_s: float,
                  scale: float, seed: int = 0) -> BusyOverhead | None:
    """Fit the shift on the fitted levels' TTFTs (``measured``, grouped by users, as the
    fit read them). ``simulate(profile, users, out_dir)`` runs the twin at one level into
    ``out_dir`` as the level's first run was loaded. None: too few busy-engine TTFTs on
    either side."""
    sides, twin, used = [], [], []
    with tempfile.TemporaryDirectory(prefix="agentreplay-busy-") as tmp:
        for users in sorted({int(g) for g in measured.group}):
            m = _busy(measured, users)
            if m.size < _MIN_BUSY:
                continue
            out = Path(tmp) / f"u{users}"
            simulate(profile, users, out)
            t = _busy(ttft_samples(read_run(out).requests, group=users), users, scale)
            if t.size < _MIN_BUSY:
                continue
            sides.append(m)
            twin.append(t)
            used.append(users)
    if not used:
        return None
    rng = np.random.default_rng(seed)
    shift = _pooled_shift(sides, twin)
    boot = np.array([_pooled_shift(sides, twin, rng) for _ in range(_RESAMPLES)])
    low, high = np.quantile(boot, [0.05, 0.95])
    return BusyOverhead(
        idle_s=idle_s, shift_s=shift, low_s=float(low), high_s=float(high),
        median_ttft_s=float(np.median(np.concatenate(sides))),
        measured=int(sum(m.size for m in sides)), simulated=int(sum(t.size for t in twin)),
        levels=tuple(used))
