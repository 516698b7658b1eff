"""The simulated-time loop: timers fire in order, time jumps over idle gaps, the
advancer is handed exactly the idle intervals and ``time.monotonic_ns`` follows."""

from __future__ import annotations

import asyncio
import time

import pytest

from replay.twin import Deadlock, VirtualLoop, virtual_time


def test_timers_fire_in_order_and_time_jumps() -> None:
    loop = VirtualLoop(start_ns=5_000_000_000)
    fired: list[tuple[str, int]] = []

    async def sleeper(name: str, delay: float) -> None:
        await asyncio.sleep(delay)
        fired.append((name, loop.now_ns))

    async def main() -> None:
        await asyncio.gather(sleeper("c", 3600.0), sleeper("a", 0.5), sleeper("b", 90.0),
                             sleeper("a2", 0.5))

    real0 = time.perf_counter()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert [n for n, _ in fired] == ["a", "a2", "b", "c"]
    at = dict(fired)
    assert at["a"] == at["a2"] == 5_500_000_000
    assert at["b"] == 95_000_000_000
    assert at["c"] == 3_605_000_000_000
    assert loop.jumps == 3  # one jump per distinct deadline, never a tick
    assert time.perf_counter() - real0 < 3600  # an hour of simulated time did not pass


def test_monotonic_follows_the_loop_inside_virtual_time_only() -> None:
    loop = VirtualLoop(start_ns=1_000)
    seen: list[int] = []

    async def main() -> None:
        seen.append(time.monotonic_ns())
        await asyncio.sleep(2.0)
        seen.append(time.monotonic_ns())
        seen.append(int(time.monotonic() * 1e9))

    real = time.monotonic_ns
    with virtual_time(loop):
        loop.run_until_complete(main())
    loop.close()
    assert time.monotonic_ns is real
    assert seen[0] == 1_000
    assert seen[1] == 2_000_001_000
    assert abs(seen[2] - seen[1]) <= 1


def test_advancer_gets_the_idle_intervals_and_may_stop_early() -> None:
    calls: list[tuple[int, int | None]] = []
    events: list[int] = []

    def advancer(now: int, until: int | None) -> int:
        calls.append((now, until))
        if not events and (until is None or until > 400):
            stop = 400  # "a request finished" at 400 ns: wake a callback there
            loop.call_soon(events.append, stop)
            return stop
        if until is None:
            raise Deadlock("idle")
        return until

    loop = VirtualLoop(advancer)

    async def main() -> None:
        await asyncio.sleep(1e-6)  # 1000 ns

    loop.run_until_complete(main())
    loop.close()
    assert events == [400]
    assert calls[0] == (0, 1000)
    assert (400, 1000) in calls
    assert loop.now_ns == 1000


def test_nothing_to_wait_for_is_a_deadlock_not_a_hang() -> None:
    loop = VirtualLoop()

    async def main() -> None:
        await loop.create_future()  # nobody will ever set it

    with pytest.raises(Deadlock):
        loop.run_until_complete(main())
    loop.close()
