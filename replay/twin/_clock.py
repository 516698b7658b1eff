"""A fast-forwarding asyncio event loop: simulated time that jumps when nothing is ready.

Why our own loop and not ``looptime``: the twin needs two things a generic
fake-time loop does not give. (1) The lanes read ``time.monotonic_ns()``, not
``loop.time()``, so the clock must be one integer-nanosecond value both see
(:func:`virtual_time` points ``time.monotonic``/``monotonic_ns`` at it while the
loop runs). (2) The engine is not an asyncio task at all: when the loop would
block, :class:`VirtualLoop` hands the idle interval to an *advancer* (the twin's
engines), which runs whole engine steps back to back inside it and stops early
only when a request finishes. So a 900 s level costs one loop iteration per
request event and per lane timer, never one per token or per step.

The loop is a ``SelectorEventLoop`` whose selector never blocks: ``select(timeout)``
advances the clock by ``timeout`` (or less, when the advancer stops early) and
reports no I/O. Real sockets therefore never become ready on this loop: it is for
in-process work only.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import selectors
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["MAX_STILL_WAITS", "Advancer", "Deadlock", "VirtualLoop", "virtual_time"]

Advancer = Callable[[int, int | None], int]
"""``(now_ns, until_ns or None) -> new now_ns``: do the model's work in ``[now, until]``
and return where the clock stops (``until``, or earlier when something happened).
``until`` None means no timer is pending: the advancer must stop at its next event."""


class Deadlock(RuntimeError):
    """Nothing is ready, no timer is pending and the advancer has no work; or the loop
    waited :data:`MAX_STILL_WAITS` times in a row and simulated time did not move on."""


MAX_STILL_WAITS = 20_000
"""Waits (the loop had nothing ready) in one window that must move simulated time by
at least a microsecond each on average, or the loop gives up: a model whose steps take
zero time would otherwise creep on a nanosecond or two a request forever, its records
piling up (a gigabyte a minute). A real engine's step takes milliseconds and ends a
wait at most once, so a real run's waits are far apart."""
_MIN_MEAN_WAIT_NS = 1_000


class _ClockSelector(selectors.BaseSelector):
    """Keeps registrations (the loop's self-pipe) but never waits: it moves the clock."""

    def __init__(self, loop: VirtualLoop) -> None:
        self._loop = loop
        self._map: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, _fd(fileobj), events, data)
        self._map[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._map.pop(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        self._map.pop(fileobj, None)
        return self.register(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self._loop._advance(timeout)
        return []

    def get_map(self) -> Any:
        return self._map

    def close(self) -> None:
        self._map.clear()


def _fd(fileobj: Any) -> int:
    return fileobj if isinstance(fileobj, int) else int(fileobj.fileno())


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time (integer ns from ``start_ns``); see the module."""

    def __init__(self, advancer: Advancer | None = None, start_ns: int = 0) -> None:
        self.now_ns = start_ns
        self.advancer = advancer
        self.jumps = 0
        """How many times the clock moved forward (idle intervals skipped)."""
        self._window = (0, start_ns)
        """(waits, clock at the first) of the current window of MAX_STILL_WAITS waits."""
        super().__init__(selector=_ClockSelector(self))
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self.now_ns / 1e9

    def monotonic_ns(self) -> int:
        return self.now_ns

    def _advance(self, timeout: float | None) -> None:
        now = self.now_ns
        if timeout is not None and timeout <= 0:
            until: int | None = now
        elif timeout is None:
            until = None
        else:
            until = now + max(1, math.ceil(timeout * 1e9))
        if self.advancer is not None and until != now:
            new = self.advancer(now, until)
        elif until is None:
            raise Deadlock("simulated time: nothing is ready, no timer is pending and no "
                           "model work is left")
        else:
            new = until
        if new > now:
            self.jumps += 1
            self.now_ns = new
        if until != now:
            self._check_moving()

    def _check_moving(self) -> None:
        waits, since = self._window
        waits += 1
        if waits < MAX_STILL_WAITS:
            self._window = (waits, since)
            return
        if self.now_ns - since < waits * _MIN_MEAN_WAIT_NS:
            raise Deadlock(f"simulated time does not advance: {waits} waits moved the clock "
                           f"{(self.now_ns - since) / 1e3:g} us in all, from "
                           f"{since / 1e9:.9g} s (a model whose steps take no time?)")
        self._window = (0, self.now_ns)


@contextlib.contextmanager
def virtual_time(loop: VirtualLoop) -> Iterator[None]:
    """Point ``time.monotonic``/``monotonic_ns`` at ``loop``'s clock while inside.

    The lanes (``replay.load``) stamp every due, send and end time with
    ``time.monotonic_ns()``; this makes those stamps simulated time without editing
    them. Process-wide while it lasts, so only one simulated run at a time."""
    real_ns, real_s = time.monotonic_ns, time.monotonic
    time.monotonic_ns = loop.monotonic_ns  # type: ignore[assignment]
    time.monotonic = loop.time  # type: ignore[assignment]
    try:
        yield
    finally:
        time.monotonic_ns, time.monotonic = real_ns, real_s  # type: ignore[assignment]
