"""``run_to_end``: a Ctrl-C while a simulated level runs stops it in order and is never
lost. The signal is raised by the coroutine itself at a chosen point, so every case is
exact: which cleanup ran, which tasks are left, what was raised."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

import pytest

from replay.twin import VirtualLoop
from replay.twin._interrupt import run_to_end


@pytest.fixture(autouse=True)
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler, as in the ``agentreplay`` process (a test runner may
    have its own); put back afterwards."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_in_a_task_stops_the_level_in_order_then_raises() -> None:
    loop = VirtualLoop()
    seen: list[str] = []

    async def helper() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            seen.append("helper ended")

    async def main() -> str:
        side = asyncio.create_task(helper())
        try:
            await asyncio.sleep(1)
            signal.raise_signal(signal.SIGINT)  # Python's handler would raise right here
            seen.append("went on after the signal")
            await asyncio.sleep(3600)
            return "finished"
        except asyncio.CancelledError:
            seen.append("cancelled")
            await asyncio.sleep(1)  # an in-order stop may await
            seen.append("stopped in order")
            raise
        finally:
            assert not side.done()

    with pytest.raises(KeyboardInterrupt):
        run_to_end(loop, main)
    assert seen == ["went on after the signal", "cancelled", "stopped in order",
                    "helper ended"]
    assert loop.is_closed()
    assert not asyncio.all_tasks(loop)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_after_the_last_await_is_still_raised() -> None:
    """The main task ends on its own after the signal: the interrupt is not lost."""
    loop = VirtualLoop()

    async def main() -> str:
        await asyncio.sleep(1)
        signal.raise_signal(signal.SIGINT)
        return "done"

    with pytest.raises(KeyboardInterrupt):
        run_to_end(loop, main)
    assert loop.is_closed()


def test_no_signal_returns_the_result_and_ends_every_task() -> None:
    loop = VirtualLoop()
    ended: list[str] = []

    async def forgotten() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append("forgotten")

    async def main() -> str:
        asyncio.create_task(forgotten())
        await asyncio.sleep(1)
        return "done"

    assert run_to_end(loop, main) == "done"
    assert ended == ["forgotten"]  # cancelled and awaited, not destroyed pending
    assert loop.is_closed()


def test_a_handler_of_the_callers_own_is_left_alone() -> None:
    """Not Python's handler (a forked pool worker ignores SIGINT): untouched."""
    loop = VirtualLoop()
    got: list[int] = []
    signal.signal(signal.SIGINT, lambda s, f: got.append(s))

    async def main() -> str:
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(1)
        return "done"

    assert run_to_end(loop, main) == "done"
    assert got == [signal.SIGINT]


def test_an_error_of_the_level_is_raised_as_it_is() -> None:
    loop = VirtualLoop()

    async def main() -> str:
        await asyncio.sleep(1)
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        run_to_end(loop, main)
    assert loop.is_closed()
