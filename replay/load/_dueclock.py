"""The lanes' due-time clock: every wait for a due request, shiftable by a system idle cap.

Plain runs wait each due time out as it is. Under a scenario with a system idle gap
cap (``--scenario agentx-mvp`` and ``agentx-v1``: 10 s), the run is never idle for
longer than the cap: once no request has been in flight for ``cap`` seconds, every
pending due time moves earlier by one and the same amount, so the earliest is due
at that moment. Order and spacing of the pending waits are kept; one lane's own
gaps are not capped (a lane whose neighbours keep the server busy waits its whole
recorded think time).

The rule is AgentX's global idle guard: SemiAnalysisAI/agentx-harness@6f666ba,
src/aiperf/timing/strategies/agentic_replay.py,
``AgenticReplayStrategy.enforce_system_idle_cap`` with the scheduler's
``cap_pending_delay`` (``system_idle_gap_cap_seconds=10.0`` in
src/aiperf/common/scenario/inferencex_agentx_mvp.py for both presets): "Pending
request timers shift uniformly only when no request is active". There, "active"
is the phase's credits in flight (sent, not yet returned); the idle interval
starts when the last one returns (or when the phase starts) and the shift is
``earliest pending - (idle start + cap)``. It is checked on every return, on
scheduler drains and by a watchdog at the idle deadline; here one timer at the
idle deadline does it (the same shift: what fires first fires at idle start +
cap), so every wait a lane registers meanwhile is among those shifted.

Where idle time counts from: the run's origin, or (``idle_from_ns``) the window's
start when the scenario primes lanes before it (``agentx-v1``): AIPerf does not
apply the cap during its accelerated, count-based warmup, and agentreplay's entry
turns wait for the window, which no shift may pull into the warmup.

One clock per event loop: a run split over worker processes or Ray actors caps
each worker's idle time (a worker idle while another is busy still jumps).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

__all__ = ["DueClock", "IdleShifts", "sleep_until"]

_NS = 1_000_000_000


async def sleep_until(due_ns: int) -> None:
    """Sleep until a monotonic instant; never returns early (timers may round)."""
    while True:
        rem = due_ns - time.monotonic_ns()
        if rem <= 0:
            return
        await asyncio.sleep(rem / _NS)


@dataclass(slots=True)
class IdleShifts:
    """What the cap did in one clock: how often it pulled the pending waits forward,
    and by how many seconds in all (each shift counted once, not per wait)."""

    count: int = 0
    seconds: float = 0.0


@dataclass(eq=False, slots=True)
class _Waiter:
    due_ns: int
    wake: asyncio.Future[None] | None = None


@dataclass(eq=False)
class DueClock:
    """Waits for due times; with ``cap_ns``, shifts the pending ones when idle (module)."""

    cap_ns: int | None = None
    idle_from_ns: int = 0
    """Idle time counts from here at the earliest (the run's origin or window start)."""
    shifts: IdleShifts = field(default_factory=IdleShifts)
    _waiters: set[_Waiter] = field(default_factory=set)
    _inflight: int = 0
    _idle_since_ns: int | None = None
    _timer: asyncio.TimerHandle | None = None

    @property
    def capped(self) -> bool:
        return self.cap_ns is not None

    async def wait(self, due_ns: int) -> int:
        """Wait until ``due_ns`` or, if the cap moved it, until the moved time; returns
        the due time that held (the one a request's record must carry)."""
        if self.cap_ns is None:
            await sleep_until(due_ns)
            return due_ns
        loop = asyncio.get_running_loop()
        w = _Waiter(due_ns)
        self._waiters.add(w)
        self._arm()
        try:
            while (rem := w.due_ns - time.monotonic_ns()) > 0:
                w.wake = loop.create_future()
                handle = loop.call_later(rem / _NS, _settle, w.wake)
                try:
                    await w.wake
                finally:
                    handle.cancel()
            return w.due_ns
        finally:
            self._waiters.discard(w)
            # the lane sends at once (no await before ``request_started``); if it did
            # not, the run is still idle and the rest are checked again (AIPerf
            # rechecks when a fired timer's task ends: the scheduler's drain observer)
            loop.call_soon(self._arm)

    def close(self) -> None:
        """The lanes are done: no more shifts."""
        self.cap_ns = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def request_started(self) -> None:
        """A request went out: the run is not idle."""
        self._inflight += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def request_ended(self) -> None:
        """A request ended; the last one in flight starts an idle interval."""
        self._inflight -= 1
        if self._inflight == 0 and self.cap_ns is not None:
            self._idle_since_ns = max(time.monotonic_ns(), self.idle_from_ns)
            self._arm()

    def _arm(self) -> None:
        """Set the timer for the idle deadline, if idle and none is set."""
        if self.cap_ns is None or self._inflight > 0 or self._timer is not None:
            return
        now = time.monotonic_ns()
        if self._idle_since_ns is None:  # nothing sent yet: idle since the start
            self._idle_since_ns = self.idle_from_ns
        deadline = self._idle_since_ns + self.cap_ns
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0, deadline - now) / _NS, self._on_deadline)

    def _on_deadline(self) -> None:
        self._timer = None
        if self.cap_ns is None or self._inflight > 0 or self._idle_since_ns is None:
            return
        now = time.monotonic_ns()
        deadline = self._idle_since_ns + self.cap_ns
        if now < deadline:  # the timer rounded early
            self._arm()
            return
        if not self._waiters:
            return  # nothing pending: a lane's next registration re-arms (deadline past)
        shift = min(w.due_ns for w in self._waiters) - now
        if shift <= 0:
            return
        for w in self._waiters:
            w.due_ns -= shift
            if w.wake is not None and not w.wake.done():
                w.wake.set_result(None)
        self.shifts.count += 1
        self.shifts.seconds += shift / _NS


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
