"""The due-time clock's system idle cap, on simulated time (the twin's loop): exact
instants, no wall clock, no sockets. The rule (AgentX's ``enforce_system_idle_cap``):
once nothing has been in flight for the cap, every pending due time moves earlier by
one amount, so the earliest fires then; waits while a request is in flight are kept."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from replay.load._dueclock import DueClock
from replay.twin import VirtualLoop, virtual_time

_NS = 1_000_000_000


def _simulate(clock: DueClock, lanes: list[tuple[float, float]],
              busy: tuple[float, float] | None = None) -> dict[int, tuple[float, float]]:
    """Lane ``i`` waits until ``due`` (s) then sends a request lasting ``length`` s;
    ``busy``: one request in flight over that span, apart from the lanes. Returns each
    lane's (due time that held, when it sent), seconds on the simulated clock."""
    loop = VirtualLoop()
    out: dict[int, tuple[float, float]] = {}

    async def lane(i: int, due_s: float, length_s: float) -> None:
        held = await clock.wait(int(due_s * _NS))
        out[i] = (held / _NS, time.monotonic_ns() / _NS)
        await _request(clock, length_s)

    async def background(start_s: float, end_s: float) -> None:
        await asyncio.sleep(start_s)
        await _request(clock, end_s - start_s)

    async def main() -> None:
        jobs: list[Coroutine[Any, Any, None]] = [lane(i, d, n) for i, (d, n) in enumerate(lanes)]
        if busy is not None:
            jobs.append(background(*busy))
        await asyncio.gather(*jobs)
        clock.close()

    with virtual_time(loop):
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()
    return out


async def _request(clock: DueClock, length_s: float) -> None:
    clock.request_started()
    try:
        await asyncio.sleep(length_s)
    finally:
        clock.request_ended()


def _capped(cap_s: float, idle_from_s: float = 0.0) -> DueClock:
    return DueClock(cap_ns=int(cap_s * _NS), idle_from_ns=int(idle_from_s * _NS))


def test_idle_waits_move_earlier_together_and_keep_their_order() -> None:
    """Two lanes due 60 s and 75 s out, nothing in flight, cap 10 s: the first is
    pulled to 10 s (both shift 50 s); its 1-s request ends at 11 s, so the second,
    now due at 25 s, is pulled to 21 s. Every idle gap is the cap, never more."""
    clock = _capped(10.0)
    out = _simulate(clock, [(60.0, 1.0), (75.0, 1.0)])
    assert out[0] == (10.0, 10.0)
    assert out[1] == (21.0, 21.0)
    assert clock.shifts.count == 2 and abs(clock.shifts.seconds - 54.0) < 1e-9


def test_no_cap_keeps_every_gap() -> None:
    clock = DueClock()
    out = _simulate(clock, [(60.0, 1.0), (75.0, 1.0)])
    assert out == {0: (60.0, 60.0), 1: (75.0, 75.0)}
    assert clock.shifts.count == 0


def test_a_wait_while_a_request_is_in_flight_is_not_cut() -> None:
    """A request in flight from 0 to 50 s: the lane due at 30 s waits all of it; the
    one due at 90 s waits until 10 s after the run went idle (its request ended at 31 s,
    the other at 50 s: idle from 50 s, so 60 s)."""
    clock = _capped(10.0)
    out = _simulate(clock, [(30.0, 1.0), (90.0, 1.0)], busy=(0.0, 50.0))
    assert out[0] == (30.0, 30.0)
    assert out[1] == (60.0, 60.0)
    assert clock.shifts.count == 1 and abs(clock.shifts.seconds - 30.0) < 1e-9


def test_gaps_within_the_cap_are_untouched() -> None:
    clock = _capped(10.0)
    out = _simulate(clock, [(4.0, 1.0), (12.0, 1.0)])
    assert out == {0: (4.0, 4.0), 1: (12.0, 12.0)}
    assert clock.shifts.count == 0


def test_idle_time_counted_from_the_window_start() -> None:
    """Lanes primed before the window (``agentx-v1``): idle time counts from the
    window's start (100 s here), so nothing is pulled into the warmup."""
    clock = _capped(10.0, idle_from_s=100.0)
    out = _simulate(clock, [(130.0, 1.0)])
    assert out[0] == (110.0, 110.0)


def test_a_lane_that_registers_after_the_deadline_is_pulled_at_once() -> None:
    """The deadline passed with nothing pending; a wait registered later (while still
    idle) fires at once: the run has already been idle for longer than the cap."""
    clock = _capped(5.0)
    fired: list[float] = []

    async def late() -> None:
        await _sleep_real(8.0)  # a lane busy elsewhere (not a request, not a due wait)
        held = await clock.wait(int(40 * _NS))
        fired.append(held / _NS)

    _run(late)
    assert fired == [8.0]


async def _sleep_real(s: float) -> None:
    await asyncio.sleep(s)


def _run(fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    loop = VirtualLoop()
    with virtual_time(loop):
        try:
            loop.run_until_complete(fn())
        finally:
            loop.close()
