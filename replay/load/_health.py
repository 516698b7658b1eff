"""How well the client kept up during the window: event-loop lag and CPU share.

A load generator that falls behind sends late and measures its own stalls as
server latency. :class:`LoopProbe` runs beside the lanes on the same event loop:
a task that sleeps ``PERIOD_S`` and records how late it woke (the loop's lag: a
busy loop wakes late), and the process's CPU time over the window's wall time
(1.0 = one full core; one event loop cannot use more). Only wakes inside the
window count. Blind spot: a stall shorter than the period between two sleeps
is seen only if a wake falls in it.

What the loop was doing when it stalled comes from a watchdog thread beside it
(:class:`~replay.load._stalls.StallWatch`, beaten at every wake of the probe).

Schedule lag (``sent_s - due_s`` of the requests sent in the window) comes from
the records, so the driver computes it for every executor alike
(:func:`schedule_lag_p99`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from analysis.schema import ClientHealth, LoopStall
from replay.load._stalls import StallWatch

__all__ = ["PERIOD_S", "STALLS_KEPT", "LoopHealth", "LoopProbe", "client_health",
           "schedule_lag_p99"]

PERIOD_S = 0.05
STALLS_KEPT = 5
"""Stalls the manifest keeps with their frames (the longest; the rest are counted)."""
_NS = 1_000_000_000


@dataclass(frozen=True)
class LoopHealth:
    """One event loop's figures over the window (None when nothing was measured)."""

    lag_p99_s: float | None = None
    lag_max_s: float | None = None
    cpu_share: float | None = None
    samples: int = 0
    stalls: tuple[LoopStall, ...] = ()
    """The longest stalls with what the loop was doing (:mod:`replay.load._stalls`)."""
    stall_kinds: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"lag_p99_s": self.lag_p99_s, "lag_max_s": self.lag_max_s,
                "cpu_share": self.cpu_share, "samples": self.samples,
                "stalls": [s.model_dump(mode="json") for s in self.stalls],
                "stall_kinds": dict(self.stall_kinds)}

    @classmethod
    def from_json(cls, data: object) -> LoopHealth:
        if not isinstance(data, dict):
            return cls()
        return cls(**{k: data.get(k) for k in ("lag_p99_s", "lag_max_s", "cpu_share")},
                   samples=int(data.get("samples") or 0),
                   stalls=tuple(LoopStall.model_validate(s) for s in data.get("stalls") or ()),
                   stall_kinds={str(k): int(v) for k, v in
                                (data.get("stall_kinds") or {}).items()})


class LoopProbe:
    """Samples this loop's wake-up lateness and the process CPU share over a window;
    with ``t0_ns`` it also runs a :class:`StallWatch` that says what a stall was."""

    def __init__(self, start_ns: int, end_ns: int, period_s: float = PERIOD_S,
                 t0_ns: int | None = None) -> None:
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.period_ns = int(period_s * _NS)
        self.lags_ns: list[int] = []
        self.t0_ns = t0_ns
        self.watch: StallWatch | None = None
        self._cpu_start: tuple[float, int] | None = None
        self._cpu_end: tuple[float, int] | None = None

    def _mark(self, now_ns: int) -> None:
        if self._cpu_start is None and now_ns >= self.start_ns:
            self._cpu_start = (time.process_time(), now_ns)
        if self._cpu_end is None and now_ns >= self.end_ns and self._cpu_start is not None:
            self._cpu_end = (time.process_time(), now_ns)

    async def run(self) -> None:
        """Sample until cancelled (or the window is over)."""
        period_s = self.period_ns / _NS
        if self.t0_ns is not None:
            self.watch = StallWatch(period_s, self.start_ns, self.end_ns, self.t0_ns).start()
        try:
            while True:
                before = time.monotonic_ns()
                self._mark(before)
                if before >= self.end_ns:
                    return
                await asyncio.sleep(period_s)
                after = time.monotonic_ns()
                if self.watch is not None:
                    self.watch.beat()
                if self.start_ns <= before < self.end_ns:
                    self.lags_ns.append(max(0, after - before - self.period_ns))
        finally:
            if self.watch is not None:
                self.watch.stop()

    def result(self) -> LoopHealth:
        """The figures so far (a run stopped early measures up to now)."""
        start, end = self._cpu_start, self._cpu_end
        if start is not None and end is None:
            end = (time.process_time(), time.monotonic_ns())
        share = None
        if start is not None and end is not None and end[1] > start[1]:
            share = (end[0] - start[0]) / ((end[1] - start[1]) / _NS)
        stalls: tuple[LoopStall, ...] = ()
        kinds: dict[str, int] = {}
        if self.watch is not None:
            stalls = tuple(self.watch.stalls)
            kinds = {str(k): n for k, n in self.watch.kinds.items()}
        if not self.lags_ns:
            return LoopHealth(cpu_share=share, stalls=stalls, stall_kinds=kinds)
        lags = np.asarray(self.lags_ns, dtype=np.float64) / _NS
        return LoopHealth(lag_p99_s=float(np.percentile(lags, 99)), lag_max_s=float(lags.max()),
                          cpu_share=share, samples=len(self.lags_ns), stalls=stalls,
                          stall_kinds=kinds)


def _max(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def schedule_lag_p99(lags_s: Sequence[float]) -> float | None:
    """P99 of ``sent_s - due_s`` over the requests sent in the window."""
    return float(np.percentile(np.asarray(lags_s, dtype=np.float64), 99)) if lags_s else None


def client_health(loops: Sequence[LoopHealth], lags_s: Sequence[float]) -> ClientHealth:
    """The manifest's block: the worst loop (max over worker processes) and the
    schedule lag of every request sent in the window; the longest stalls of all
    loops, and every loop's stalls counted by kind."""
    kinds: Counter[str] = Counter()
    for h in loops:
        kinds.update(h.stall_kinds)
    stalls = sorted((s for h in loops for s in h.stalls), key=lambda s: -s.lag_s)
    return ClientHealth(
        loop_lag_p99_s=_max(h.lag_p99_s for h in loops),
        loop_lag_max_s=_max(h.lag_max_s for h in loops),
        cpu_share=_max(h.cpu_share for h in loops),
        schedule_lag_p99_s=schedule_lag_p99(lags_s),
        loop_stalls=stalls[:STALLS_KEPT],
        loop_stall_kinds=dict(kinds),
    )
