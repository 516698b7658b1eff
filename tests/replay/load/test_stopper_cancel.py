"""The phases' stopper task, cancelled before it ever ran, leaves no coroutine unawaited.

A short run on a busy machine can end its phases before the event loop first schedules
the stopper task; the task is then cancelled without running its body. Wait coroutines
made by the caller for that body were dropped unawaited ("coroutine 'Event.wait' was
never awaited", an unraisable warning that failed a fuzzed live run under load). The
race is forced here: the task is cancelled in the same loop turn that created it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from types import SimpleNamespace

import pytest

from replay.load._phases import _first, _wait_phases

pytestmark = pytest.mark.unit


def _unawaited(run: object) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        asyncio.run(run)  # type: ignore[arg-type]
        gc.collect()
    return [str(w.message) for w in seen if "never awaited" in str(w.message)]


def test_phases_that_end_before_the_stopper_ran_leave_nothing_unawaited() -> None:
    # every phase already over and no lane left: _wait_phases returns without yielding
    # once, so its stopper task is cancelled before its first step
    fixed = SimpleNamespace(warmup_end_ns=0, window_end_ns=0, issue_end_ns=0)
    state = SimpleNamespace(crashed=asyncio.Event(), tasks=set(), measure_inflight=0,
                            cancel_reason=None)
    ctx = SimpleNamespace(fixed=fixed, state=state)

    async def main() -> bool:
        return await _wait_phases(ctx, asyncio.Event(), None, None, None)  # type: ignore[arg-type]

    assert _unawaited(main()) == []


def test_a_stopper_cancelled_before_its_first_step_leaves_nothing_unawaited() -> None:
    async def main() -> None:
        task = asyncio.create_task(_first(asyncio.Event(), asyncio.Event()))
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    assert _unawaited(main()) == []


def test_the_stopper_returns_when_any_event_is_set_and_cancels_the_other_wait() -> None:
    async def main() -> bool:
        a, b = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(_first(a, b))
        await asyncio.sleep(0)
        assert not task.done()
        b.set()
        await asyncio.wait_for(task, 5)
        return a.is_set()

    assert asyncio.run(main()) is False
