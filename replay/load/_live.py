"""What a person watching a run sees: a rich Live panel, or one log line per period.

:class:`LiveStats` is fed every finished record and every metrics scrape and keeps
rolling windows; :func:`render_lines` turns a snapshot into text lines (pure), and
the display classes only print them.

The figures are the window's, like the report's: only requests sent in the
measured window count (the line says how many warmup and drain requests were
left out), so the live view and the report agree. Requests still running when
the drain ended are ``incomplete``, counted apart from failures.

The time left is the schedule's: warmup and window, whose ends are fixed. The drain
is shown apart, as its cap: it ends as soon as the window's requests finish, and its
default cap is sized for the workload's longest answer at a slow rate (a run of 30 s
with "remaining 541s" read as a hang that had not started).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TextIO, cast

import numpy as np

from analysis import RecordDict, record_latencies
from analysis.text import plural

__all__ = ["LiveStats", "LiveView", "render_lines"]

_ROLL = 512
_RATE_WINDOW_S = 10.0


class LiveStats:
    """Rolling figures for the live view; cheap enough to update per request."""

    def __init__(self, total_s: float, drain_s: float = 0.0) -> None:
        self.total_s = total_s
        """Warmup plus window: when the load's fixed schedule ends."""
        self.drain_s = drain_s
        """The drain's cap after it (it ends sooner when the window's requests finish)."""
        self.t0 = time.monotonic()
        self.done = 0
        self.failed = 0
        self.incomplete = 0
        self.cancelled = 0
        self.outside = 0
        """Requests sent in warmup or drain: finished, but not in the figures."""
        self.ttft: deque[float] = deque(maxlen=_ROLL)
        self.tpot: deque[float] = deque(maxlen=_ROLL)
        self.lag: deque[float] = deque(maxlen=_ROLL)
        self.tokens: deque[tuple[float, int]] = deque()
        self.metrics: dict[str, float] = {}
        self._prev_metrics: dict[str, float] = {}
        self.busy: Callable[[], int] = lambda: 0
        self.lanes: Callable[[], int] = lambda: 0
        self.phase = "warmup"

    def on_record(self, rec: Mapping[str, object]) -> None:
        if rec.get("phase") != "measure":
            self.outside += 1
            return
        now = time.monotonic()
        status = rec["status"]
        if status == "ok":
            self.done += 1
        elif status == "incomplete":
            self.incomplete += 1
        elif status == "cancelled":  # interrupted by the user: bookkeeping, not the server
            self.cancelled += 1
        else:
            self.failed += 1
        sent = rec["sent_s"]
        due = rec["due_s"]
        assert isinstance(sent, float) and isinstance(due, float)
        self.lag.append(sent - due)
        n = rec["output_tokens"]
        assert isinstance(n, int)
        # the report's formulas and samples: TTFT of ok requests, TPOT of ok and
        # incomplete ones (an incomplete request decoded until the cut)
        lat = record_latencies(cast(RecordDict, rec))
        if status == "ok" and lat.ttft is not None:
            self.ttft.append(lat.ttft)
        if status in ("ok", "incomplete") and lat.tpot is not None:
            self.tpot.append(lat.tpot)
        self.tokens.append((now, n))
        cutoff = now - _RATE_WINDOW_S
        while self.tokens and self.tokens[0][0] < cutoff:
            self.tokens.popleft()

    def on_metrics(self, t_s: float, values: dict[str, float]) -> None:
        self._prev_metrics = self.metrics
        self.metrics = values

    def snapshot(self) -> dict[str, float | int | str | None]:
        now = time.monotonic()
        elapsed = now - self.t0
        span = min(_RATE_WINDOW_S, max(elapsed, 1e-9))
        tok = sum(n for t, n in self.tokens if t >= now - _RATE_WINDOW_S)

        def pct(values: deque[float], q: float) -> float | None:
            return float(np.percentile(np.fromiter(values, float), q)) if values else None

        p50_tpot = pct(self.tpot, 50)
        p90_tpot = pct(self.tpot, 90)
        m, pm = self.metrics, self._prev_metrics
        hits = m.get("vllm:prefix_cache_hits_total", 0.0) - pm.get(
            "vllm:prefix_cache_hits_total", 0.0)
        queries = m.get("vllm:prefix_cache_queries_total", 0.0) - pm.get(
            "vllm:prefix_cache_queries_total", 0.0)
        kv = m.get("vllm:kv_cache_usage_perc")
        busy = self.busy()
        return {
            "phase": self.phase,
            "elapsed_s": elapsed,
            "remaining_s": max(0.0, self.total_s - elapsed),
            "drain_s": self.drain_s,
            "drain_left_s": max(0.0, self.total_s + self.drain_s - elapsed),
            "busy": busy,
            "thinking": max(0, self.lanes() - busy),
            "done": self.done,
            "failed": self.failed,
            "incomplete": self.incomplete,
            "cancelled": self.cancelled,
            "outside": self.outside,
            "ttft_p50": pct(self.ttft, 50),
            "ttft_p90": pct(self.ttft, 90),
            "inter_p50": 1.0 / p50_tpot if p50_tpot else None,
            "inter_p90": 1.0 / p90_tpot if p90_tpot else None,
            "tokens_per_s": tok / span,
            "lag_p99": pct(self.lag, 99),
            "kv_usage": kv,
            "prefix_hit_rate": hits / queries if queries > 0 else None,
        }


def _f(value: object, fmt: str, scale: float = 1.0, unit: str = "") -> str:
    if value is None:
        return "-"
    assert isinstance(value, int | float)
    return f"{value * scale:{fmt}}{unit}"


def render_lines(snap: dict[str, float | int | str | None]) -> list[str]:
    """The live view as plain lines (shared by the rich panel and the log mode)."""
    phase = str(snap["phase"])
    clock = f"elapsed {_f(snap['elapsed_s'], '.0f', unit='s')}"
    drain = snap.get("drain_s")
    if phase == "drain":
        busy = int(snap.get("busy") or 0)
        if busy:
            clock += (f"  remaining {_f(snap.get('drain_left_s'), '.0f', unit='s')} at most "
                      f"({plural(busy, 'request')} still running; the drain ends when the "
                      "window's requests finish)")
        else:  # the last answer is in: the drain ends now, not at its cap
            clock += "  remaining 0s (no request still running: the drain is ending)"
    elif not phase.startswith("stopping"):
        clock += f"  remaining {_f(snap['remaining_s'], '.0f', unit='s')}"
        if drain:
            clock += (f", then the drain (until the window's requests finish, at most "
                      f"{_f(drain, '.0f', unit='s')})")
    return [
        f"{phase}  {clock}",
        f"users busy {snap['busy']}  thinking {snap['thinking']}  "
        f"window requests done {snap['done']}  failed {snap['failed']}  "
        f"incomplete {snap.get('incomplete', 0)}  cancelled {snap.get('cancelled', 0)}  "
        f"(window only; {snap.get('outside', 0)} warmup/drain not counted)",
        f"TTFT P50 {_f(snap['ttft_p50'], '.0f', 1e3, ' ms')}  "
        f"P90 {_f(snap['ttft_p90'], '.0f', 1e3, ' ms')}   "
        f"interactivity P50 {_f(snap['inter_p50'], '.1f', unit=' tok/s')}  "
        f"P90 {_f(snap['inter_p90'], '.1f', unit=' tok/s')}",
        f"output {_f(snap['tokens_per_s'], '.0f', unit=' tok/s')}  "
        f"schedule lag P99 {_f(snap['lag_p99'], '.1f', 1e3, ' ms')}  "
        f"KV usage {_f(snap['kv_usage'], '.0%')}  "
        f"prefix hits {_f(snap['prefix_hit_rate'], '.0%')}",
    ]


class LiveView:
    """Shows :class:`LiveStats` as a rich Live panel (``rich``), log lines
    (``plain``) or nothing (``quiet``) until cancelled."""

    def __init__(self, stats: LiveStats, mode: str = "rich", period_s: float | None = None,
                 stream: TextIO | None = None) -> None:
        if mode not in ("rich", "plain", "quiet"):
            raise ValueError(f"unknown live mode {mode!r}")
        self.stats = stats
        self.mode = mode
        self.stream = stream or sys.stderr
        self.period_s = period_s if period_s is not None else (0.5 if mode == "rich" else 10.0)

    def _log_line(self) -> None:
        print(" | ".join(render_lines(self.stats.snapshot())), file=self.stream, flush=True)

    async def run(self) -> None:
        if self.mode == "quiet":
            return
        if self.mode == "plain":
            try:
                while True:
                    await asyncio.sleep(self.period_s)
                    self._log_line()
            finally:
                self._log_line()  # the final state, also for runs shorter than a period
        from rich.console import Console
        from rich.live import Live
        from rich.panel import Panel
        from rich.text import Text

        console = Console(file=self.stream)

        def panel() -> Panel:
            return Panel(Text("\n".join(render_lines(self.stats.snapshot()))),
                         title="agentreplay run")

        with Live(panel(), console=console, refresh_per_second=4, transient=False) as live:
            try:
                while True:
                    await asyncio.sleep(self.period_s)
                    live.update(panel())
            finally:
                live.update(panel())  # the state it stopped in stays on screen
